//! Single field and curve operations on the device (`cuda/selftest.cu`), for checking the
//! arithmetic against blst in tests.

use blstrs::{G1Affine, G1Projective, Scalar};

use super::backend::GpuBackend;
use super::bytes::{bytes, bytes_mut};
use super::kernels::{self as k, Arg};
use super::msm::g1_point;
use super::GpuError;

impl GpuBackend {
    /// For each i: [a·b, a+b, a−b, −a] in Fp (Montgomery limbs as blst_fp).
    pub fn selftest_fp(&self, a: &[[u64; 6]], b: &[[u64; 6]]) -> Result<Vec<[u64; 6]>, GpuError> {
        let n = a.len().min(b.len());
        let s = self.lock()?;
        let g = &s.gpu;
        let da = g.upload_new(bytes(&a[..n]))?;
        let db = g.upload_new(bytes(&b[..n]))?;
        let out = g.alloc(n * 4 * 48)?;
        g.launch(
            &k::SELFTEST_FP,
            (n as u64).div_ceil(64),
            64,
            &[(&da).into(), (&db).into(), (&out).into(), Arg::u32(n)?],
        )?;
        let mut h = vec![0u64; n * 4 * 6];
        g.download(&out, bytes_mut(&mut h))?;
        Ok(h.chunks(6)
            .map(|c| [c[0], c[1], c[2], c[3], c[4], c[5]])
            .collect())
    }

    /// Canonical little-endian limbs of each scalar, computed on the device.
    pub fn selftest_fr_from_mont(&self, v: &[Scalar]) -> Result<Vec<[u64; 4]>, GpuError> {
        let n = v.len();
        let s = self.lock()?;
        let g = &s.gpu;
        let d = g.upload_new(bytes(v))?;
        let out = g.alloc(n * 32)?;
        g.launch(
            &k::SELFTEST_FR_FROM_MONT,
            (n as u64).div_ceil(64),
            64,
            &[(&d).into(), (&out).into(), Arg::u32(n)?],
        )?;
        let mut h = vec![0u64; n * 4];
        g.download(&out, bytes_mut(&mut h))?;
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
        let dp = g.upload_new(bytes(&p[..n]))?;
        let dq = g.upload_new(bytes(&q[..n]))?;
        let out = g.alloc(n * 5 * 144)?;
        g.launch(
            &k::SELFTEST_G1,
            (n as u64).div_ceil(64),
            64,
            &[(&dp).into(), (&dq).into(), (&out).into(), Arg::u32(n)?],
        )?;
        let mut h = vec![0u64; n * 5 * 18];
        g.download(&out, bytes_mut(&mut h))?;
        Ok(h.chunks(18).map(g1_point).collect())
    }
}
