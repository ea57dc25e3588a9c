//! Single field and curve operations on the device (`cuda/selftest.cu`), for checking the
//! arithmetic against blst in tests.

use blstrs::{G1Affine, G1Projective, Scalar};

use super::backend::GpuBackend;
use super::msm::g1_point;
use super::ntt::scalar_bytes;
use super::GpuError;

fn u64s_as_bytes_mut(v: &mut [u64]) -> &mut [u8] {
    // SAFETY: viewing initialised u64s as bytes.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<u8>(), v.len() * 8) }
}

fn as_bytes<T>(v: &[T]) -> &[u8] {
    // SAFETY: used for plain-old-data limb arrays and blstrs points (u64 limbs, no padding).
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

impl GpuBackend {
    /// For each i: [a·b, a+b, a−b, −a] in Fp (Montgomery limbs as blst_fp).
    pub fn selftest_fp(&self, a: &[[u64; 6]], b: &[[u64; 6]]) -> Result<Vec<[u64; 6]>, GpuError> {
        let n = a.len().min(b.len());
        let s = self.lock()?;
        let g = &s.gpu;
        let da = g.upload_new(as_bytes(&a[..n]))?;
        let db = g.upload_new(as_bytes(&b[..n]))?;
        let out = g.alloc(n * 4 * 48)?;
        g.launch(
            "selftest_fp",
            (n as u64).div_ceil(64),
            64,
            &[da.ptr(), db.ptr(), out.ptr(), n as u64],
        )?;
        let mut h = vec![0u64; n * 4 * 6];
        g.download(&out, u64s_as_bytes_mut(&mut h))?;
        Ok(h.chunks(6)
            .map(|c| [c[0], c[1], c[2], c[3], c[4], c[5]])
            .collect())
    }

    /// Canonical little-endian limbs of each scalar, computed on the device.
    pub fn selftest_fr_from_mont(&self, v: &[Scalar]) -> Result<Vec<[u64; 4]>, GpuError> {
        let n = v.len();
        let s = self.lock()?;
        let g = &s.gpu;
        let d = g.upload_new(scalar_bytes(v))?;
        let out = g.alloc(n * 32)?;
        g.launch(
            "selftest_fr_from_mont",
            (n as u64).div_ceil(64),
            64,
            &[d.ptr(), out.ptr(), n as u64],
        )?;
        let mut h = vec![0u64; n * 4];
        g.download(&out, u64s_as_bytes_mut(&mut h))?;
        Ok(h.chunks(4).map(|c| [c[0], c[1], c[2], c[3]]).collect())
    }

    /// For each i: [2P, P+Q (mixed), P+Q (XYZZ), P+P (mixed), P−P (mixed)].
    pub fn selftest_g1(
        &self,
        p: &[G1Affine],
        q: &[G1Affine],
    ) -> Result<Vec<G1Projective>, GpuError> {
        let n = p.len().min(q.len());
        let s = self.lock()?;
        let g = &s.gpu;
        let dp = g.upload_new(as_bytes(&p[..n]))?;
        let dq = g.upload_new(as_bytes(&q[..n]))?;
        let out = g.alloc(n * 5 * 144)?;
        g.launch(
            "selftest_g1",
            (n as u64).div_ceil(64),
            64,
            &[dp.ptr(), dq.ptr(), out.ptr(), n as u64],
        )?;
        let mut h = vec![0u64; n * 5 * 18];
        g.download(&out, u64s_as_bytes_mut(&mut h))?;
        Ok(h.chunks(18).map(g1_point).collect())
    }
}
