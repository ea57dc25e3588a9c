//! Host side of the NTT kernels (`cuda/ntt.cu`): per-domain power tables, transforms in natural
//! order, cosets, and the Groth16 quotient.

use blstrs::Scalar;
use ff::{Field, PrimeField};

use super::device::{DevBuf, Gpu};
use super::GpuError;
use crate::prover::ntt::root_of_unity;

/// Bytes of one Fr element on the device.
pub const FR_BYTES: usize = 32;
/// Stages per shared-memory pass (NTT_MAX_T in ntt.cu).
const MAX_STAGES: u32 = 9;
/// Entries of each power table (2^POW_LO_BITS in ntt.cu).
const POW_TABLE: usize = 1 << 14;
/// Largest transform: the power tables cover exponents below 2^28.
pub const MAX_LOG_SIZE: u32 = 28;

/// Raw bytes of scalars (Montgomery form, as the kernels take them).
pub fn scalar_bytes(s: &[Scalar]) -> &[u8] {
    // SAFETY: blstrs::Scalar is repr(transparent) over blst_fr, four u64 limbs with no padding;
    // any byte view of initialised memory is valid.
    unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<u8>(), std::mem::size_of_val(s)) }
}

/// Mutable raw bytes of scalars. Callers only write valid Montgomery-form elements (< r).
pub fn scalar_bytes_mut(s: &mut [Scalar]) -> &mut [u8] {
    // SAFETY: as in `scalar_bytes`; the kernels write reduced field elements only.
    unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(s)) }
}

/// Power tables of one base (lo[j] = w^j, hi[j] = w^(j 2^14)).
pub struct PowTables {
    lo: DevBuf,
    hi: DevBuf,
}

impl PowTables {
    /// Builds the tables of `base` on the device.
    pub fn new(gpu: &Gpu, base: Scalar) -> Result<Self, GpuError> {
        let b = gpu.upload_new(scalar_bytes(&[base]))?;
        let lo = gpu.alloc(POW_TABLE * FR_BYTES)?;
        let hi = gpu.alloc(POW_TABLE * FR_BYTES)?;
        gpu.launch(
            "pow_tables",
            (POW_TABLE / 256) as u64,
            256,
            &[lo.ptr(), hi.ptr(), b.ptr()],
        )?;
        gpu.sync()?;
        Ok(PowTables { lo, hi })
    }
}

fn inv(x: Scalar) -> Result<Scalar, GpuError> {
    Option::<Scalar>::from(x.invert()).ok_or_else(|| GpuError::Input("inverse of zero".into()))
}

/// Everything a size-2^lg transform needs on the device.
pub struct Domain {
    /// log2 of the size.
    pub lg: u32,
    omega: PowTables,
    omega_inv: PowTables,
    g: PowTables,
    g_inv: PowTables,
    /// Device constants: [1/n, 1, 1/(g^n - 1)] (the 1 is no longer read; the layout stays).
    consts: DevBuf,
    /// Twiddles of the last DIF pass (stride 1, the same for every block) for w and w^-1.
    last_tw: [DevBuf; 2],
}

/// The stages of each DIF pass of a size-2^lg transform: at most MAX_STAGES, spread evenly
/// (e.g. 20 = 7 + 7 + 6).
fn pass_stages(lg: u32) -> Vec<u32> {
    let passes = lg.div_ceil(MAX_STAGES);
    let mut s0 = 0;
    (0..passes)
        .map(|p| {
            let stages = (lg - s0).div_ceil(passes - p);
            s0 += stages;
            stages
        })
        .collect()
}

impl Domain {
    /// Tables for the domain of size 2^lg (1 ≤ 2^lg ≤ 2^28).
    pub fn new(gpu: &Gpu, lg: u32) -> Result<Self, GpuError> {
        if lg > MAX_LOG_SIZE {
            return Err(GpuError::Input(format!(
                "NTT of 2^{lg} exceeds 2^{MAX_LOG_SIZE}"
            )));
        }
        let w = root_of_unity(lg);
        let g = Scalar::MULTIPLICATIVE_GENERATOR;
        let n = Scalar::from(1u64 << lg);
        let z = g.pow_vartime([1u64 << lg]) - Scalar::ONE;
        let consts = [inv(n)?, Scalar::ONE, inv(z)?];
        let omega = PowTables::new(gpu, w)?;
        let omega_inv = PowTables::new(gpu, inv(w)?)?;
        let last_tw = [
            Self::last_pass_twiddles(gpu, lg, &omega)?,
            Self::last_pass_twiddles(gpu, lg, &omega_inv)?,
        ];
        Ok(Domain {
            lg,
            omega,
            omega_inv,
            g: PowTables::new(gpu, g)?,
            g_inv: PowTables::new(gpu, inv(g)?)?,
            consts: gpu.upload_new(scalar_bytes(&consts))?,
            last_tw,
        })
    }

    fn last_pass_twiddles(gpu: &Gpu, lg: u32, t: &PowTables) -> Result<DevBuf, GpuError> {
        let stages = pass_stages(lg);
        let last = stages.last().copied().unwrap_or(0);
        let count = (1u64 << last).saturating_sub(1).max(1);
        let out = gpu.alloc(count as usize * FR_BYTES)?;
        if last > 0 {
            gpu.launch(
                "ntt_pass_twiddles",
                count.div_ceil(256),
                256,
                &[
                    out.ptr(),
                    t.lo.ptr(),
                    t.hi.ptr(),
                    (lg - last) as u64,
                    last as u64,
                ],
            )?;
        }
        Ok(out)
    }

    /// Size in elements.
    pub fn size(&self) -> usize {
        1usize << self.lg
    }

    fn n_inv(&self) -> u64 {
        self.consts.ptr()
    }
    fn z_inv(&self) -> u64 {
        self.consts.ptr() + 2 * FR_BYTES as u64
    }

    /// In-place decimation-in-frequency transform: natural order in, bit-reversed out.
    pub(crate) fn dif(&self, gpu: &Gpu, data: &DevBuf, inverse: bool) -> Result<(), GpuError> {
        let t = if inverse {
            &self.omega_inv
        } else {
            &self.omega
        };
        let tw = &self.last_tw[inverse as usize];
        let mut s0 = 0;
        for stages in pass_stages(self.lg) {
            let groups = 1u64 << (self.lg - stages);
            let threads = 1u32 << (stages - 1);
            // Shared memory sized to this pass (the elements and the twiddles, 2^stages each),
            // so that passes of fewer stages fit more blocks on an SM.
            let smem = (2 * FR_BYTES as u32) << stages;
            gpu.launch_smem(
                "ntt_dif_pass",
                groups,
                threads,
                smem,
                &[
                    data.ptr(),
                    t.lo.ptr(),
                    t.hi.ptr(),
                    self.lg as u64,
                    s0 as u64,
                    stages as u64,
                    tw.ptr(),
                ],
            )?;
            s0 += stages;
        }
        Ok(())
    }

    /// out[i] = in[bitrev(i)] * factor: mode 0 → 1, 1 → consts[c], 2 → consts[c]·g^i (g or 1/g).
    pub(crate) fn bitrev(
        &self,
        gpu: &Gpu,
        src: &DevBuf,
        dst: &DevBuf,
        mode: u64,
        c: u64,
        g_inv: bool,
    ) -> Result<(), GpuError> {
        let g = if g_inv { &self.g_inv } else { &self.g };
        let n = self.size() as u64;
        gpu.launch(
            "ntt_bitrev_scale",
            n.div_ceil(256),
            256,
            &[
                src.ptr(),
                dst.ptr(),
                self.lg as u64,
                mode,
                c,
                g.lo.ptr(),
                g.hi.ptr(),
            ],
        )
    }

    /// Natural-order transform of `data` into `out` (`out` ← NTT(data); `data` is clobbered).
    /// `inverse` divides by n; `coset` evaluates on (or, inverse, interpolates from) g·H.
    pub fn transform(
        &self,
        gpu: &Gpu,
        data: &DevBuf,
        out: &DevBuf,
        inverse: bool,
        coset: bool,
    ) -> Result<(), GpuError> {
        if self.lg == 0 {
            // size 1: the transform is the identity (times 1/n = 1).
            return gpu.launch(
                "ntt_bitrev_scale",
                1,
                1,
                &[data.ptr(), out.ptr(), 0, 0, 0, 0, 0],
            );
        }
        if !inverse && coset {
            let n = self.size() as u64;
            gpu.launch(
                "ntt_scale_powers",
                n.div_ceil(256),
                256,
                // No constant factor (the kernel skips it for a null pointer).
                &[data.ptr(), n, 0, self.g.lo.ptr(), self.g.hi.ptr()],
            )?;
        }
        self.dif(gpu, data, inverse)?;
        match (inverse, coset) {
            (false, _) => self.bitrev(gpu, data, out, 0, 0, false),
            (true, false) => self.bitrev(gpu, data, out, 1, self.n_inv(), false),
            (true, true) => self.bitrev(gpu, data, out, 2, self.n_inv(), true),
        }
    }

    /// H = (A·B − C)/Z: see [`crate::prover::Backend::quotient`]. `bufs` holds A, B, C
    /// (natural order, zero-padded to the domain) and a scratch buffer, each of the domain's
    /// size; the coefficients of H end up in `bufs[0]`.
    pub fn quotient(&self, gpu: &Gpu, bufs: &mut [DevBuf; 4]) -> Result<(), GpuError> {
        for v in 0..3 {
            // evaluations on H → coefficients scaled by g^i/n → evaluations on gH (bit-reversed)
            self.dif(gpu, &bufs[v], true)?;
            self.bitrev(gpu, &bufs[v], &bufs[3], 2, self.n_inv(), false)?;
            self.dif(gpu, &bufs[3], false)?;
            bufs.swap(v, 3);
        }
        let n = self.size() as u64;
        gpu.launch(
            "quotient_pointwise",
            n.div_ceil(256),
            256,
            &[bufs[0].ptr(), bufs[1].ptr(), bufs[2].ptr(), self.z_inv(), n],
        )?;
        // bit-reversed evaluations on gH → natural order → coefficients (times g^-i/n)
        self.bitrev(gpu, &bufs[0], &bufs[3], 0, 0, false)?;
        self.dif(gpu, &bufs[3], true)?;
        self.bitrev(gpu, &bufs[3], &bufs[0], 2, self.n_inv(), true)
    }
}
