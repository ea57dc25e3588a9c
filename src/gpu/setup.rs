//! Fixed-base scalar multiplication on the device for a Groth16 setup (`cuda/setup.cu`,
//! driven by `params_gen::fresh`): every scalar of a parameter query times one generator,
//! returned as bellperson's uncompressed point bytes (96 per G1 point, 192 per G2 point).
//!
//! The product is a sum of table entries, one per 16-bit window of the scalar
//! ([`window_table`], built here on the host): 16 mixed additions, no doublings. (8-bit
//! windows would keep the table in the device's L2 but double the additions; the CPU path
//! shares the table and is bound by its additions.) `params_gen`'s CPU path sums
//! the same tables, so both paths write the same bytes.

use blstrs::{Fp, Fp2, G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ff::Field;
use group::Curve;
use rayon::prelude::*;

use super::bytes::bytes;
use super::device::{DevBuf, Gpu};
use super::kernels::{self as k, Arg, Kernel};
use super::{GpuError, GpuOptions};

/// Bits of a window (`SETUP_WINDOW_BITS` in `cuda/setup.cu`).
pub const WINDOW_BITS: usize = 16;
/// Windows of a 256-bit scalar.
pub const WINDOWS: usize = 256 / WINDOW_BITS;
/// Non-zero digits of a window.
pub const DIGITS: usize = (1 << WINDOW_BITS) - 1;
/// Bytes of an uncompressed G1 point.
pub const G1_BYTES: usize = 96;
/// Bytes of an uncompressed G2 point.
pub const G2_BYTES: usize = 192;
/// Points each thread of the affine pass makes (`SETUP_STRIP` in `cuda/setup.cu`).
const STRIP: usize = 32;
/// Scalars per launch: 16 M G2 points take 6 GiB of device memory in XYZZ form.
const CHUNK: usize = 1 << 24;

/// Points made affine a slice at a time, with one field inversion for the slice
/// (Montgomery's trick). `group`'s default `batch_normalize`, which blstrs keeps, inverts
/// once per point: a third of the CPU setup's time went there.
pub trait Normalize: Curve {
    /// `out[i]` = `p[i]` affine (the identity where `p[i]` is); as many as the shorter has.
    fn normalize_all(p: &[Self], out: &mut [Self::AffineRepr]);
}

macro_rules! normalize {
    ($proj:ty, $affine:ty, $fp:ty) => {
        impl Normalize for $proj {
            fn normalize_all(p: &[Self], out: &mut [$affine]) {
                let n = p.len().min(out.len());
                let (p, out) = (&p[..n], &mut out[..n]);
                // blst's points are Jacobian: x = X/Z², y = Y/Z³; Z = 0 is the identity.
                let mut prefix = Vec::with_capacity(n);
                let mut product = <$fp>::ONE;
                for q in p {
                    prefix.push(product);
                    let z = q.z();
                    if !bool::from(z.is_zero()) {
                        product *= z;
                    }
                }
                // A product of non-zero elements is never zero: the inverse exists.
                let mut inverse = Option::<$fp>::from(product.invert()).unwrap_or(<$fp>::ZERO);
                for ((q, o), before) in p.iter().zip(out.iter_mut()).zip(&prefix).rev() {
                    let z = q.z();
                    if bool::from(z.is_zero()) {
                        *o = <$affine as group::prime::PrimeCurveAffine>::identity();
                        continue;
                    }
                    let z_inv = inverse * before;
                    inverse *= z;
                    let z_inv2 = z_inv.square();
                    *o = <$affine>::from_raw_unchecked(
                        q.x() * z_inv2,
                        q.y() * z_inv2 * z_inv,
                        false,
                    );
                }
            }
        }
    };
}
normalize!(G1Projective, G1Affine, Fp);
normalize!(G2Projective, G2Affine, Fp2);

/// The fixed-base table of `base`: entry `w * DIGITS + d - 1` is `d · 2^(WINDOW_BITS·w) ·
/// base`, affine (a window per rayon task).
pub fn window_table<G>(base: G) -> Vec<G::AffineRepr>
where
    G: Normalize + Send + Sync,
    G::AffineRepr: Default + Copy + Send,
{
    let mut out = vec![G::AffineRepr::default(); WINDOWS * DIGITS];
    out.par_chunks_mut(DIGITS)
        .enumerate()
        .for_each(|(w, window)| {
            let mut b = base;
            for _ in 0..w * WINDOW_BITS {
                b = b.double();
            }
            let mut proj = Vec::with_capacity(DIGITS);
            let mut acc = b;
            for _ in 0..DIGITS {
                proj.push(acc);
                acc += b;
            }
            G::normalize_all(&proj, window);
        });
    out
}

/// The device with the G1 and G2 tables of two bases uploaded.
pub struct FixedBaseGpu {
    gpu: Gpu,
    table_g1: DevBuf,
    table_g2: DevBuf,
}

/// What one group's launches need.
struct Group {
    mul: &'static Kernel,
    affine: &'static Kernel,
    /// Bytes of a point in XYZZ form on the device.
    xyzz: usize,
    /// Bytes of an uncompressed point.
    out: usize,
}

const G1: Group = Group {
    mul: &k::SETUP_MUL_G1,
    affine: &k::SETUP_AFFINE_G1,
    xyzz: 4 * 48,
    out: G1_BYTES,
};
const G2: Group = Group {
    mul: &k::SETUP_MUL_G2,
    affine: &k::SETUP_AFFINE_G2,
    xyzz: 8 * 48,
    out: G2_BYTES,
};

impl FixedBaseGpu {
    /// Opens the device `options` name and uploads the tables of `g1` and `g2`.
    pub fn new(options: &GpuOptions, g1: G1Projective, g2: G2Projective) -> Result<Self, GpuError> {
        let gpu = Gpu::open(options)?;
        let table_g1 = gpu.upload_new(bytes(&window_table(g1)))?;
        let table_g2 = gpu.upload_new(bytes(&window_table(g2)))?;
        Ok(Self {
            gpu,
            table_g1,
            table_g2,
        })
    }

    /// The device's name.
    pub fn name(&self) -> &str {
        &self.gpu.info.name
    }

    /// `s · g1` for each scalar, uncompressed, into `out` ([`G1_BYTES`] per scalar).
    pub fn g1(&self, scalars: &[Scalar], out: &mut [u8]) -> Result<(), GpuError> {
        self.run(&G1, &self.table_g1, scalars, out)
    }

    /// `s · g2` for each scalar, uncompressed, into `out` ([`G2_BYTES`] per scalar).
    pub fn g2(&self, scalars: &[Scalar], out: &mut [u8]) -> Result<(), GpuError> {
        self.run(&G2, &self.table_g2, scalars, out)
    }

    fn run(
        &self,
        group: &Group,
        table: &DevBuf,
        scalars: &[Scalar],
        out: &mut [u8],
    ) -> Result<(), GpuError> {
        if out.len() != scalars.len() * group.out {
            return Err(GpuError::Input(format!(
                "{} bytes for {} points of {} bytes",
                out.len(),
                scalars.len(),
                group.out
            )));
        }
        let most = scalars.len().min(CHUNK);
        let g = &self.gpu;
        let mut dev_scalars = g.alloc(most * 32)?;
        let points = g.alloc(most * group.xyzz)?;
        let encoded = g.alloc(most * group.out)?;
        for (chunk, out) in scalars.chunks(CHUNK).zip(out.chunks_mut(CHUNK * group.out)) {
            let n = chunk.len();
            g.upload(&mut dev_scalars, bytes(chunk))?;
            let args = [
                table.into(),
                (&dev_scalars).into(),
                Arg::u32(n)?,
                (&points).into(),
            ];
            g.launch(group.mul, (n as u64).div_ceil(128), 128, &args)?;
            let threads = n.div_ceil(STRIP) as u64;
            let args = [(&points).into(), Arg::u32(n)?, (&encoded).into()];
            g.launch(group.affine, threads.div_ceil(64), 64, &args)?;
            g.download(&encoded, out)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use blstrs::G1Affine;
    use ff::Field;
    use group::Group;

    /// The table's entries are the multiples the kernels assume.
    #[test]
    fn normalizing_a_slice_is_to_affine_point_by_point() {
        let mut rng = rand::thread_rng();
        let mut g1: Vec<G1Projective> = (0..9).map(|_| G1Projective::random(&mut rng)).collect();
        g1[3] = G1Projective::identity();
        let mut a1 = vec![G1Affine::default(); g1.len()];
        G1Projective::normalize_all(&g1, &mut a1);
        for (p, a) in g1.iter().zip(&a1) {
            assert_eq!(p.to_affine(), *a);
        }
        assert!(bool::from(group::prime::PrimeCurveAffine::is_identity(
            &a1[3]
        )));
        let g2: Vec<G2Projective> = (0..5).map(|_| G2Projective::random(&mut rng)).collect();
        let mut a2 = vec![G2Affine::default(); g2.len()];
        G2Projective::normalize_all(&g2, &mut a2);
        for (p, a) in g2.iter().zip(&a2) {
            assert_eq!(p.to_affine(), *a);
        }
    }

    #[test]
    fn the_window_table_holds_d_times_2_to_the_16w() {
        let base = G1Projective::generator() * Scalar::from(7u64);
        let t = window_table(base);
        assert_eq!(t.len(), WINDOWS * DIGITS);
        let at = |w: usize, d: u64| -> G1Affine {
            (base * (Scalar::from(1u64 << WINDOW_BITS).pow_vartime([w as u64]) * Scalar::from(d)))
                .to_affine()
        };
        for (w, d) in [(0, 1), (0, 65535), (1, 1), (5, 777), (15, 65535)] {
            assert_eq!(
                t[w * DIGITS + d as usize - 1],
                at(w, d),
                "window {w} digit {d}"
            );
        }
    }
}
