//! Host side of the NTT kernels (`cuda/ntt.cu`): per-domain power tables, transforms in natural
//! order, cosets, and the Groth16 quotient.

use blstrs::Scalar;
use ff::{Field, PrimeField};

use super::bytes::{bytes, bytes_mut};
use super::device::{DevBuf, DevView, Gpu};
use super::kernels::{self as k, Arg};
use super::GpuError;
use crate::prover::ntt::root_of_unity;

/// Bytes of one Fr element on the device.
pub const FR_BYTES: usize = 32;
/// Stages per shared-memory pass (the default of [`super::NttTuning::max_stages`]).
pub const MAX_STAGES: u32 = 9;
/// Fewest threads per pass block (2^20: 128 against 32 for one 7-stage group per block; the
/// default of [`super::NttTuning::min_threads`]).
pub const MIN_THREADS: u32 = 128;
/// Entries of each power table (2^POW_LO_BITS in ntt.cu).
const POW_TABLE: usize = 1 << 14;
/// Largest transform: the power tables cover exponents below 2^28.
pub const MAX_LOG_SIZE: u32 = 28;

/// Pass flags (NTT_* in ntt.cu).
const INVERSE: u64 = 1;
const GATHER: u64 = 2;
const PRE_POWERS: u64 = 4;
const POST_POWERS: u64 = 8;

/// Power tables of `scale·base^i` (lo[j] = scale·base^j, hi[j] = base^(j 2^14)): any such
/// factor with i < 2^28 is one product in the kernels.
pub struct PowTables {
    lo: DevBuf,
    hi: DevBuf,
}

impl PowTables {
    /// Builds the tables of `scale·base^i` on the device.
    pub fn new(gpu: &Gpu, base: Scalar, scale: Scalar) -> Result<Self, GpuError> {
        let b = gpu.upload_new(bytes(&[base, scale]))?;
        let lo = gpu.alloc(POW_TABLE * FR_BYTES)?;
        let hi = gpu.alloc(POW_TABLE * FR_BYTES)?;
        gpu.launch(
            &k::POW_TABLES,
            (POW_TABLE / 256) as u64,
            256,
            &[
                (&lo).into(),
                (&hi).into(),
                (&b).into(),
                Arg::Ptr(b.ptr() + FR_BYTES as u64),
            ],
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
    /// tw[e] = w^e for e < n/2 (w^-e is −tw[n/2 − e]): 16 bytes per element of the domain.
    twiddles: DevBuf,
    /// Factors g^i (forward coset), g^i/n (the quotient's first step), g^-i/n (inverse coset)
    /// and 1/n (plain inverse).
    coset: PowTables,
    coset_n_inv: PowTables,
    coset_inv_n_inv: PowTables,
    n_inv: PowTables,
    /// 1/(g^n − 1), the inverse of Z on the coset.
    z_inv: DevBuf,
    shape: PassShape,
    /// The device options' [`super::NttTuning::quotient_serial`] when the domain was built
    /// (see [`Domain::quotient_from_host`]).
    serial_uploads: bool,
}

/// Where a transform's elements get a factor s·g^i: on the way in (before the first pass) or
/// on the way out (after the last).
#[derive(Clone, Copy)]
enum Scale<'a> {
    None,
    Pre(&'a PowTables),
    Post(&'a PowTables),
}

/// How passes are cut and launched: at most `max_stages` stages per pass (or an explicit
/// `split`), at least `min_threads` threads per block (several groups per block when one group,
/// a thread per four elements, has fewer), and whether each pass is timed (`trace`). Taken from
/// the device's options once per domain.
#[derive(Clone, Debug)]
struct PassShape {
    max_stages: u32,
    min_threads: u32,
    split: Option<Vec<u32>>,
    trace: bool,
}

impl PassShape {
    /// The shape the device's options ask for (see [`super::NttTuning`]), clamped to what the
    /// kernel supports: 1..=10 stages per pass, 1..=1024 threads per block.
    fn from_options(gpu: &Gpu) -> Self {
        let o = gpu.options();
        PassShape {
            max_stages: o.ntt.max_stages.clamp(1, 10),
            min_threads: o.ntt.min_threads.clamp(1, 1024),
            split: (!o.ntt.split.is_empty()).then(|| o.ntt.split.clone()),
            trace: o.trace,
        }
    }

    /// Launch geometry of a pass of `t` stages in a size-2^lg transform: (log2 groups per
    /// block, threads per block, shared memory bytes: the elements and the twiddles).
    fn geometry(&self, lg: u32, t: u32, smem_limit: u32) -> (u32, u32, u32) {
        let per_group = 1u32 << t.saturating_sub(2);
        let group_smem = (2 * FR_BYTES as u32) << t;
        let mut lgc = 0;
        while per_group << lgc < self.min_threads
            && lgc < lg - t
            && group_smem << (lgc + 1) <= smem_limit
        {
            lgc += 1;
        }
        (lgc, per_group << lgc, group_smem << lgc)
    }

    /// The stages of each pass of a size-2^lg transform, spread evenly (e.g. 20 = 7 + 7 + 6),
    /// or the tuning split where it fits.
    fn stages(&self, lg: u32) -> Vec<u32> {
        if let Some(split) = &self.split {
            let fits = split.iter().all(|t| (1..=10).contains(t));
            if fits && split.iter().sum::<u32>() == lg {
                return split.clone();
            }
        }
        let passes = lg.div_ceil(self.max_stages);
        let mut s0 = 0;
        (0..passes)
            .map(|p| {
                let stages = (lg - s0).div_ceil(passes - p);
                s0 += stages;
                stages
            })
            .collect()
    }
}

impl Domain {
    /// Device memory the tables hold, in bytes.
    pub fn device_bytes(&self) -> u64 {
        let pow = |t: &PowTables| (t.lo.len() + t.hi.len()) as u64;
        (self.twiddles.len() + self.z_inv.len()) as u64
            + pow(&self.coset)
            + pow(&self.coset_n_inv)
            + pow(&self.coset_inv_n_inv)
            + pow(&self.n_inv)
    }

    /// Tables for the domain of size 2^lg (1 ≤ 2^lg ≤ 2^28). The twiddle table takes
    /// 2^(lg−1)·32 bytes of device memory (2 GiB at 2^27).
    pub fn new(gpu: &Gpu, lg: u32) -> Result<Self, GpuError> {
        if lg > MAX_LOG_SIZE {
            return Err(GpuError::Input(format!(
                "NTT of 2^{lg} exceeds 2^{MAX_LOG_SIZE}"
            )));
        }
        let w = root_of_unity(lg);
        let g = Scalar::MULTIPLICATIVE_GENERATOR;
        let n_inv = inv(Scalar::from(1u64 << lg))?;
        let z = g.pow_vartime([1u64 << lg]) - Scalar::ONE;
        let g_inv = inv(g)?;
        let omega = PowTables::new(gpu, w, Scalar::ONE)?;
        let half = (1u64 << lg) / 2;
        let twiddles = gpu.alloc(half.max(1) as usize * FR_BYTES)?;
        gpu.launch(
            &k::NTT_TWIDDLE_TABLE,
            half.div_ceil(256),
            256,
            &[
                (&twiddles).into(),
                (&omega.lo).into(),
                (&omega.hi).into(),
                Arg::U64(half),
            ],
        )?;
        Ok(Domain {
            lg,
            twiddles,
            coset: PowTables::new(gpu, g, Scalar::ONE)?,
            coset_n_inv: PowTables::new(gpu, g, n_inv)?,
            coset_inv_n_inv: PowTables::new(gpu, g_inv, n_inv)?,
            n_inv: PowTables::new(gpu, Scalar::ONE, n_inv)?,
            z_inv: gpu.upload_new(bytes(&[inv(z)?]))?,
            shape: PassShape::from_options(gpu),
            serial_uploads: gpu.options().ntt.quotient_serial,
        })
    }

    /// Size in elements.
    pub fn size(&self) -> usize {
        1usize << self.lg
    }

    /// `dst` ← the natural-order transform of the natural-order `src` (distinct buffers;
    /// `src` is left as it was), with the scale factors of `scale`. Inverse transforms do not
    /// divide by n themselves: that is one of the scales.
    fn run(
        &self,
        gpu: &Gpu,
        src: &DevBuf,
        dst: &mut DevBuf,
        inverse: bool,
        scale: Scale,
    ) -> Result<(), GpuError> {
        let stages = self.shape.stages(self.lg);
        if stages.is_empty() {
            // Size 1: the transform is the identity; only a factor (at i = 0) can apply.
            gpu.copy(src, dst, FR_BYTES)?;
            return match scale {
                Scale::None => Ok(()),
                Scale::Pre(t) | Scale::Post(t) => self.scale_one(gpu, dst, t),
            };
        }
        let last = stages.len() - 1;
        let mut s0 = 0;
        for (p, &t) in stages.iter().enumerate() {
            let mut flags = if inverse { INVERSE } else { 0 };
            let mut tables = None;
            if p == 0 {
                flags |= GATHER;
                if let Scale::Pre(tb) = scale {
                    flags |= PRE_POWERS;
                    tables = Some(tb);
                }
            }
            if p == last {
                if let Scale::Post(tb) = scale {
                    flags |= POST_POWERS;
                    tables = Some(tb);
                }
            }
            let (lo, hi) = tables.map_or((0, 0), |tb| (tb.lo.ptr(), tb.hi.ptr()));
            let from = if p == 0 { src.ptr() } else { dst.ptr() };
            let (lgc, threads, smem) = self.shape.geometry(self.lg, t, gpu.info.smem_optin);
            let t0 = std::time::Instant::now();
            gpu.launch_smem(
                &k::NTT_DIT_PASS,
                1u64 << (self.lg - t - lgc),
                threads,
                smem,
                &[
                    Arg::Ptr(from),
                    (&*dst).into(),
                    (&self.twiddles).into(),
                    Arg::u32(self.lg)?,
                    Arg::u32(s0)?,
                    Arg::u32(t)?,
                    Arg::u32(lgc)?,
                    Arg::u32(flags)?,
                    Arg::Ptr(lo),
                    Arg::Ptr(hi),
                ],
            )?;
            if self.shape.trace {
                gpu.sync()?;
                tracing::debug!(
                    log_size = self.lg,
                    pass = p,
                    first_stage = s0,
                    stages = t,
                    ms = t0.elapsed().as_secs_f64() * 1e3,
                    "gpu ntt pass trace"
                );
            }
            s0 += t;
        }
        Ok(())
    }

    /// dst[0] *= the factor of `t` at i = 0, lo[0]·hi[0], on the host: a size-1 transform has
    /// no pass to carry it.
    fn scale_one(&self, gpu: &Gpu, dst: &mut DevBuf, t: &PowTables) -> Result<(), GpuError> {
        let mut f = [Scalar::ZERO; 3];
        gpu.download_at(&t.lo, 0, bytes_mut(&mut f[0..1]))?;
        gpu.download_at(&t.hi, 0, bytes_mut(&mut f[1..2]))?;
        gpu.download_at(dst, 0, bytes_mut(&mut f[2..3]))?;
        let v = f[2] * f[0] * f[1];
        gpu.upload(dst, bytes(&[v]))
    }

    /// Natural-order transform of `data` into `out` (`data` is left as it was).
    /// `inverse` divides by n; `coset` evaluates on (or, inverse, interpolates from) g·H.
    pub fn transform(
        &self,
        gpu: &Gpu,
        data: &DevBuf,
        out: &mut DevBuf,
        inverse: bool,
        coset: bool,
    ) -> Result<(), GpuError> {
        let scale = match (inverse, coset) {
            (false, false) => Scale::None,
            (false, true) => Scale::Pre(&self.coset),
            (true, false) => Scale::Post(&self.n_inv),
            (true, true) => Scale::Post(&self.coset_inv_n_inv),
        };
        self.run(gpu, data, out, inverse, scale)
    }

    /// H = (A·B − C)/Z (see [`crate::prover::Backend::quotient`]) from host vectors `a`, `b`,
    /// `c` (each of at most the domain's size, the rest zero): the buffer with H's
    /// coefficients. Each input's transforms are issued before
    /// the next input is sent, and the uploads are ordered only after the allocations
    /// (`Gpu::upload_after`), so that B and C travel while the transforms of A and B run.
    /// [`super::NttTuning::quotient_serial`] set in the device's options when the domain is
    /// built orders each upload after all earlier work instead (A/B runs).
    pub fn quotient_from_host(
        &self,
        gpu: &Gpu,
        a: &[Scalar],
        b: &[Scalar],
        c: &[Scalar],
    ) -> Result<DevBuf, GpuError> {
        let m = self.size();
        let n = a.len();
        if b.len() != n || c.len() != n || n > m {
            return Err(GpuError::Input(format!(
                "A, B, C of {}, {} and {} values for a domain of {m}",
                n,
                b.len(),
                c.len()
            )));
        }
        let mut bufs = [
            gpu.alloc(m * FR_BYTES)?,
            gpu.alloc(m * FR_BYTES)?,
            gpu.alloc(m * FR_BYTES)?,
            gpu.alloc(m * FR_BYTES)?,
        ];
        let mark = gpu.mark()?;
        for (v, src) in [a, b, c].into_iter().enumerate() {
            let (vs, scratch) = bufs.split_at_mut(3);
            if self.serial_uploads {
                gpu.upload(&mut vs[v], bytes(src))?;
            } else {
                gpu.upload_after(&mark, &mut vs[v], bytes(src))?;
            }
            gpu.zero_range(&mut vs[v], n * FR_BYTES, (m - n) * FR_BYTES)?;
            self.to_coset(gpu, &mut vs[v], &mut scratch[0])?;
        }
        self.quotient_on_coset(gpu, &mut bufs)?;
        let [h, ..] = bufs;
        Ok(h)
    }

    /// [`Domain::quotient_from_host`] for A, B and C already on the device: the first `n`
    /// values of `bufs[0..3]` (each a whole domain long; their tails are zeroed here),
    /// `bufs[3]` a domain-long scratch buffer. H's coefficients come back in `bufs[0]`.
    pub fn quotient_from_device(
        &self,
        gpu: &Gpu,
        mut bufs: [DevBuf; 4],
        n: usize,
    ) -> Result<DevBuf, GpuError> {
        let m = self.size();
        if n > m || bufs.iter().any(|b| b.len() < m * FR_BYTES) {
            return Err(GpuError::Input(format!(
                "A, B, C of {n} values in buffers of {:?} bytes for a domain of {m}",
                bufs.iter().map(DevBuf::len).collect::<Vec<_>>()
            )));
        }
        for v in 0..3 {
            self.coset_of(gpu, &mut bufs, v, n)?;
        }
        self.quotient_on_coset(gpu, &mut bufs)?;
        let [h, ..] = bufs;
        Ok(h)
    }

    /// One step of [`Domain::quotient_from_device`] (its buffers checked by the caller): the
    /// tail of `bufs[v]` (v < 3) past its `n` values zeroed, then its evaluations on gH, through
    /// the scratch `bufs[3]`. After the three, [`Domain::quotient_from_cosets`] finishes: a
    /// caller taking turns on the device may let another go between the steps.
    pub(crate) fn coset_of(
        &self,
        gpu: &Gpu,
        bufs: &mut [DevBuf; 4],
        v: usize,
        n: usize,
    ) -> Result<(), GpuError> {
        let m = self.size();
        if v >= 3 || n > m || bufs.iter().any(|b| b.len() < m * FR_BYTES) {
            return Err(GpuError::Input(format!(
                "vector {v} of {n} values for a domain of {m}"
            )));
        }
        let (vs, scratch) = bufs.split_at_mut(3);
        gpu.zero_range(&mut vs[v], n * FR_BYTES, (m - n) * FR_BYTES)?;
        self.to_coset(gpu, &mut vs[v], &mut scratch[0])
    }

    /// The rest of the quotient from A, B and C on the coset (`bufs[0..3]`, `bufs[3]`
    /// scratch): H's coefficients in the returned buffer.
    pub(crate) fn quotient_from_cosets(
        &self,
        gpu: &Gpu,
        mut bufs: [DevBuf; 4],
    ) -> Result<DevBuf, GpuError> {
        self.quotient_on_coset(gpu, &mut bufs)?;
        let [h, ..] = bufs;
        Ok(h)
    }

    /// Evaluations on H → coefficients times g^i/n (the polynomial of the coset) → evaluations
    /// on gH, in place (through `scratch`).
    pub(super) fn to_coset(
        &self,
        gpu: &Gpu,
        v: &mut DevBuf,
        scratch: &mut DevBuf,
    ) -> Result<(), GpuError> {
        self.run(gpu, v, scratch, true, Scale::Post(&self.coset_n_inv))?;
        self.run(gpu, scratch, v, false, Scale::None)
    }

    /// The quotient's last step: `dst` ← the coefficients of the quotient from its
    /// evaluations on gH in `src` (the quotient's inverse coset transform).
    pub(super) fn coset_to_coefficients(
        &self,
        gpu: &Gpu,
        src: &DevBuf,
        dst: &mut DevBuf,
    ) -> Result<(), GpuError> {
        self.run(gpu, src, dst, true, Scale::Post(&self.coset_inv_n_inv))
    }

    /// The pointwise step of the quotient on `n` elements: a ← (a·b − c)/Z, for parts of the
    /// vectors (views of at least `n` elements each).
    pub(super) fn pointwise(
        &self,
        gpu: &Gpu,
        a: DevView,
        b: DevView,
        c: DevView,
        n: usize,
    ) -> Result<(), GpuError> {
        if [a, b, c].iter().any(|v| v.len() < n * FR_BYTES) {
            return Err(GpuError::Input(format!(
                "pointwise quotient step of {n} elements over views of {} / {} / {} bytes",
                a.len(),
                b.len(),
                c.len()
            )));
        }
        gpu.launch(
            &k::QUOTIENT_POINTWISE,
            (n as u64).div_ceil(256),
            256,
            &[
                a.into(),
                b.into(),
                c.into(),
                (&self.z_inv).into(),
                Arg::U64(n as u64),
            ],
        )
    }

    /// From A, B, C evaluated on gH (`bufs[0..3]`, `bufs[3]` scratch): H's coefficients in
    /// `bufs[0]`.
    fn quotient_on_coset(&self, gpu: &Gpu, bufs: &mut [DevBuf; 4]) -> Result<(), GpuError> {
        let n = self.size() as u64;
        gpu.launch(
            &k::QUOTIENT_POINTWISE,
            n.div_ceil(256),
            256,
            &[
                (&bufs[0]).into(),
                (&bufs[1]).into(),
                (&bufs[2]).into(),
                (&self.z_inv).into(),
                Arg::U64(n),
            ],
        )?;
        // evaluations on gH → coefficients (times g^-i/n)
        let (a, rest) = bufs.split_at_mut(1);
        self.run(
            gpu,
            &a[0],
            &mut rest[2],
            true,
            Scale::Post(&self.coset_inv_n_inv),
        )?;
        bufs.swap(0, 3);
        Ok(())
    }
}
