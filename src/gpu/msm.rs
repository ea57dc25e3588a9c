//! Host side of the MSM kernels (`cuda/msm.cu`, `cuda/batch_add.cu`, `cuda/scan.cu`).
//!
//! The device computes, per window, Σ_k (k+1)·B_k and, separately, the sum of the bases whose
//! scalar is 1; the host adds the ≤ 26 window sums with doublings (microseconds).
//!
//! Phases (their names in the trace event, a `tracing` debug event with `debug.gpu_trace`),
//! each a function that takes what the one before left on the device (`classify`,
//! `sum_ones`, `redigit_if_sparse`, `sort_by_bucket`, `accumulate`, `window_sums`):
//! * `front`: the scalars go up in pieces of [`UPLOAD_CHUNK`] scalars on the device's copy
//!   stream ([`Gpu::upload_overlapped`]) while `msm_front` classifies the piece before (0s
//!   dropped, 1s listed apart, the rest listed with their signed digits, written window-major
//!   with a window stride of n since their count m is known only at the end). The window width
//!   is chosen for n.
//! * `ones`: the bases whose scalar is 1, summed by mixed XYZZ additions (32 per thread) and a
//!   tree.
//! * `redigits`, only where m ≤ n / [`REDIGIT_SHARE`] and [`window_bits`] of m is two bits or
//!   more from that of n: the digits again (`msm_digits`, stride m) with the width for m.
//! * `scan`, `scatter`: the counting sort of (window, point) pairs by bucket.
//! * `accumulate`, `segments`, `tree`: bucket sums, window sums, down to one point per window.
//!   The bucket sums go to the device in pieces ([`MsmRun`]): a caller taking turns on the
//!   device may let another go between them.
//!
//! Tuning (the device handle's [`super::MsmTuning`], from `[debug]` or `cuzk bench gpu` flags):
//! the window width, the smallest bucket-accumulation chunk, the scalars per upload piece.

use blst::{blst_fp, blst_fp2, blst_p1, blst_p2};
use blstrs::{G1Projective, G2Projective};
use group::Group;

mod accumulate;
mod run;

pub use run::MsmRun;

use super::bytes::{bytes, bytes_mut};
use super::device::{DevBuf, DevView, Gpu};
use super::kernels::{self as k, Arg};
use super::GpuError;

/// Which group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Curve {
    /// G1 over Fp.
    G1,
    /// G2 over Fp2.
    G2,
}

impl Curve {
    /// Bytes of a base field element (Fp or Fp2).
    fn field_bytes(self) -> usize {
        match self {
            Curve::G1 => 48,
            Curve::G2 => 96,
        }
    }
    /// Bytes of an affine point (blst layout: x, y).
    pub fn affine_bytes(self) -> usize {
        2 * self.field_bytes()
    }
    fn xyzz_bytes(self) -> usize {
        4 * self.field_bytes()
    }
    fn jacobian_u64s(self) -> usize {
        3 * self.field_bytes() / 8
    }
    fn kernel(self, which: Kernel) -> &'static k::Kernel {
        match (self, which) {
            (Curve::G1, Kernel::Segments) => &k::MSM_REDUCE_SEGMENTS_G1,
            (Curve::G2, Kernel::Segments) => &k::MSM_REDUCE_SEGMENTS_G2,
            (Curve::G1, Kernel::Groups) => &k::MSM_REDUCE_GROUPS_G1,
            (Curve::G2, Kernel::Groups) => &k::MSM_REDUCE_GROUPS_G2,
            (Curve::G1, Kernel::Jacobian) => &k::MSM_TO_JACOBIAN_G1,
            (Curve::G2, Kernel::Jacobian) => &k::MSM_TO_JACOBIAN_G2,
            (Curve::G1, Kernel::Chunks) => &k::MSM_CHUNKS_G1,
            (Curve::G2, Kernel::Chunks) => &k::MSM_CHUNKS_G2,
            (Curve::G1, Kernel::Combine) => &k::MSM_COMBINE_G1,
            (Curve::G2, Kernel::Combine) => &k::MSM_COMBINE_G2,
            (Curve::G1, Kernel::BatchAdd) => &k::BATCH_ADD_G1,
            (Curve::G2, Kernel::BatchAdd) => &k::BATCH_ADD_G2,
        }
    }
}

#[derive(Clone, Copy)]
enum Kernel {
    Chunks,
    Combine,
    Segments,
    Groups,
    Jacobian,
    BatchAdd,
}

/// Points summed by one thread of the batch addition of ones.
const ONES_PER_THREAD: u64 = 32;
/// Points summed per thread and round of the tree reduction.
const TREE_FANIN: u64 = 8;
/// Smallest chunk of the balanced bucket accumulation, in points (the default of
/// [`super::MsmTuning::chunk_min`]).
pub const CHUNK_MIN: u64 = 128;
/// Entries of the bucket-sorted list per launch of the bucket sums (the default of
/// [`super::MsmTuning::accumulate_piece`]): at the G1 rate measured at 2^27 (about 2.5 G mixed
/// additions a second on an H100), about a twentieth of a second, the longest another caller
/// waits for the device inside an MSM's bucket phase.
pub const ACCUMULATE_PIECE: u64 = 1 << 27;
/// Fewest chains (chunks of the bucket-sorted list) for which
/// `debug.gpu_msm_batch_affine` sums G1 buckets in the batch-affine walk
/// (`cuda/msm_affine.cu`): each of its steps waits for one inversion (a few hundred dependent
/// products on one thread), which only many chains per step cover.
pub const AFFINE_MIN_CHAINS: u64 = 1 << 20;
/// Buckets per thread in the window reduction.
const SEGMENT: u32 = 16;
/// Scalars per piece of the overlapped upload (the default of
/// [`super::MsmTuning::upload_chunk`]). 2^20
/// scalars are 32 MiB, about 0.65 ms at the ≈ 50 GB/s the H200 reaches from pinned memory; the
/// front end then takes about the whole upload plus `msm_front` on the last piece (G1 2^27:
/// front 89.6 ms, where upload, classify and digits took 85 + 7 + 28 ms one after the other).
/// H200 sweep, G1 MSM median of 3 at 2^24 / 2^27 (ms): pieces of 2^20 129.9 / 904.7, 2^21
/// 131.7 / 908.2, 2^22 130.5 / 922.2, 2^23 132.6 / 912.0 (docs/gpu-notes.md, v15).
pub const UPLOAD_CHUNK: usize = 1 << 20;
/// The digits are redone with the window width for m (`redigits`) when at most
/// 1/REDIGIT_SHARE of the scalars are full ones (neither 0 nor 1) and [`window_bits`] gives m a
/// width at least two bits away from n's. Otherwise n's width stays: for m close to n (any m
/// just under a power of two gets another width from the table) or one bit away (the table's
/// neighbouring widths, G1 19 and 20 say, are within a few percent of each other around their
/// boundary) a digits pass would buy little. Far below n, n's width leaves most of its 2^(c-1)
/// buckets per window nearly empty and their reduction dominates (G1 n = 2^27, m = 2^20:
/// about 1.7× the bucket additions of c = 16), which a digits pass over m scalars (≈ 0.5 ms
/// per 2^20 at the measured rates) costs much less than. An estimate, not yet measured.
pub const REDIGIT_SHARE: u64 = 4;

/// Window width for `m` full scalars, from sweeps on the H200 (docs/gpu-notes.md): 16-bit
/// windows (16 windows, the top one balanced) up to 2^22 points; G1 19 at 2^23 and 20 from 2^24
/// to 2^27; G2 16 up to 2^27; 22 above (fewer windows keep the bucket lists within u32 offsets). Larger windows shrink the m·(255/c + 1) bucket additions but grow the
/// per-bucket reduction and memory. [`super::MsmTuning::window_bits`] may force another width
/// (for tuning).
pub fn window_bits(m: usize, curve: Curve) -> u32 {
    let k = usize::BITS - m.max(1).leading_zeros() - 1; // floor(log2 m)
    match (k, curve) {
        (0..=9, _) => (k + 2).max(4),
        (10..=15, _) => k,
        (16..=22, _) => 16,
        (23, Curve::G1) => 19,
        (24..=27, Curve::G1) => 20,
        (23..=27, Curve::G2) => 16,
        _ => 22,
    }
}

/// The pieces of one MSM, as Jacobian coordinates (blst limbs, Montgomery form).
pub struct MsmParts {
    /// Window width c.
    pub window_bits: u32,
    /// Σ over window w, lowest window first.
    pub windows: Vec<Vec<u64>>,
    /// Sum of the bases whose scalar is 1.
    pub ones: Option<Vec<u64>>,
}

/// Per-phase timings when the device's options ask for them (`debug.gpu_trace`): the device
/// is synchronized after each phase, so only for diagnosis. Emitted as one `tracing` debug
/// event per MSM.
pub(super) struct Trace {
    on: bool,
    last: std::time::Instant,
    marks: Vec<(&'static str, f64)>,
}

impl Trace {
    pub(super) fn new(gpu: &Gpu) -> Self {
        Trace {
            on: gpu.options().trace,
            last: std::time::Instant::now(),
            marks: Vec::new(),
        }
    }
    pub(super) fn mark(&mut self, gpu: &Gpu, name: &'static str) -> Result<(), GpuError> {
        if self.on {
            gpu.sync()?;
            let now = std::time::Instant::now();
            self.marks
                .push((name, (now - self.last).as_secs_f64() * 1e3));
            self.last = now;
        }
        Ok(())
    }
    /// The event: what the MSM was (`what`) and each phase's milliseconds.
    pub(super) fn emit(&self, what: &str) {
        if self.on {
            let phases_ms: Vec<String> = self
                .marks
                .iter()
                .map(|(n, t)| format!("{n} {t:.2}"))
                .collect();
            tracing::debug!(msm = what, phases_ms = %phases_ms.join(", "), "gpu msm trace");
        }
    }
}

/// Sums `groups` runs of `m` XYZZ points each down to one point per run.
fn reduce_tree(
    gpu: &Gpu,
    curve: Curve,
    mut buf: DevBuf,
    groups: u64,
    mut m: u64,
) -> Result<DevBuf, GpuError> {
    while m > 1 {
        let fan = TREE_FANIN.min(m);
        let m_out = m.div_ceil(fan);
        let out = gpu.alloc((groups * m_out) as usize * curve.xyzz_bytes())?;
        gpu.launch(
            curve.kernel(Kernel::Groups),
            (groups * m_out).div_ceil(128),
            128,
            &[
                (&buf).into(),
                (&out).into(),
                Arg::u32(groups)?,
                Arg::u32(m)?,
                Arg::u32(fan)?,
            ],
        )?;
        buf = out;
        m = m_out;
    }
    Ok(buf)
}

fn to_jacobian(
    gpu: &Gpu,
    curve: Curve,
    buf: &DevBuf,
    count: usize,
) -> Result<Vec<Vec<u64>>, GpuError> {
    let words = curve.jacobian_u64s();
    let out = gpu.alloc(count * words * 8)?;
    gpu.launch(
        curve.kernel(Kernel::Jacobian),
        (count as u64).div_ceil(64),
        64,
        &[buf.into(), (&out).into(), Arg::u32(count)?],
    )?;
    let mut host = vec![0u64; count * words];
    gpu.download(&out, bytes_mut(&mut host))?;
    Ok(host.chunks(words).map(|c| c.to_vec()).collect())
}

/// The `count` scalars of `src` (n of them, 32 bytes each) whose flag is set, in order, in a
/// new device buffer: the A and B queries' scalars taken from the aux assignment already on
/// the device. `count` is the query's length, checked against the flags (a wrong one would
/// make the kernel write past the buffer); the buffer holds at least one scalar so that it is
/// never empty.
pub fn compact(gpu: &Gpu, src: &DevBuf, flags: &[bool], count: usize) -> Result<DevBuf, GpuError> {
    let dst = gpu.alloc(count.max(1) * 32)?;
    compact_into(gpu, src.view(), flags, count, dst.view())?;
    Ok(dst)
}

/// [`compact`] where `count` is already known to be the number of set flags (a
/// [`crate::synth::Density`]'s count, made once per shape): no pass over the flags on the
/// host. Were it wrong, the kernel would still write no more than `count` scalars.
pub fn compact_counted(
    gpu: &Gpu,
    src: &DevBuf,
    flags: &[bool],
    count: usize,
) -> Result<DevBuf, GpuError> {
    let dst = gpu.alloc(count.max(1) * 32)?;
    compact_run(gpu, src.view(), flags, count, dst.view())?;
    Ok(dst)
}

/// [`compact`] of the scalars of the view `src` into the start of the view `dst` (at least
/// `count` scalars long).
pub fn compact_into(
    gpu: &Gpu,
    src: DevView,
    flags: &[bool],
    count: usize,
    dst: DevView,
) -> Result<(), GpuError> {
    let set = crate::prover::count_set(flags);
    if count != set {
        return Err(GpuError::Input(format!(
            "compaction of {} flags ({set} set) into {count} scalars",
            flags.len()
        )));
    }
    compact_run(gpu, src, flags, count, dst)
}

/// [`compact_into`] without counting the flags: the flags uploaded, then
/// [`compact_flagged`]; returns once the device is done (the flags' copy with it).
fn compact_run(
    gpu: &Gpu,
    src: DevView,
    flags: &[bool],
    count: usize,
    dst: DevView,
) -> Result<(), GpuError> {
    if count == 0 {
        return Ok(());
    }
    let flags_dev = gpu.upload_new(bytes(flags))?;
    compact_flagged(gpu, src, flags_dev.view(), count, dst)?;
    gpu.sync()
}

/// [`compact_into`] with the flags already on the device (`flags`, one byte each): nothing
/// goes up from the host. The scatter is bounded by `count` (at
/// most `count` scalars written whatever the flags say), so the caller's count need not be
/// checked against them here.
pub fn compact_flagged(
    gpu: &Gpu,
    src: DevView,
    flags: DevView,
    count: usize,
    dst: DevView,
) -> Result<(), GpuError> {
    let n = flags.len();
    if src.len() < n * 32 || n >= (1usize << 32) || dst.len() < count * 32 {
        return Err(GpuError::Input(format!(
            "compaction of {n} flags over {} scalar bytes into {count} ({} bytes)",
            src.len(),
            dst.len()
        )));
    }
    if count == 0 || n == 0 {
        return Ok(());
    }
    let blocks = (n as u64).div_ceil(1024);
    let offsets = gpu.alloc(blocks as usize * 4)?;
    gpu.launch(
        &k::COMPACT_COUNT,
        blocks,
        1024,
        &[flags.into(), Arg::u32(n)?, (&offsets).into()],
    )?;
    exclusive_scan(gpu, offsets.ptr(), blocks)?;
    gpu.launch(
        &k::COMPACT_SCATTER,
        blocks,
        1024,
        &[
            src.into(),
            flags.into(),
            Arg::u32(n)?,
            (&offsets).into(),
            dst.into(),
            Arg::u32(count)?,
        ],
    )
}

/// Exclusive prefix sum of `n` u32 values at `ptr`, in place.
fn exclusive_scan(gpu: &Gpu, ptr: u64, n: u64) -> Result<(), GpuError> {
    let blocks = n.div_ceil(1024);
    let sums = gpu.alloc(blocks as usize * 4)?;
    let args = [Arg::Ptr(ptr), Arg::u32(n)?, (&sums).into()];
    gpu.launch(&k::SCAN_BLOCKS, blocks, 1024, &args)?;
    if blocks > 1 {
        exclusive_scan(gpu, sums.ptr(), blocks)?;
        gpu.launch(&k::SCAN_ADD, blocks, 1024, &args)?;
    }
    gpu.sync()
}

/// Σ scalars[i]·bases[i] for `n` bases already on the device and `scalars` as raw blst_fr
/// bytes (32 per scalar, Montgomery form), pinned or pageable host memory. The scalars go up in
/// pieces of the device options' [`super::MsmTuning::upload_chunk`] scalars ([`UPLOAD_CHUNK`]
/// by default).
pub fn msm(
    gpu: &Gpu,
    curve: Curve,
    bases: &DevBuf,
    n: usize,
    scalars: &[u8],
) -> Result<MsmParts, GpuError> {
    let chunk = gpu.options().msm.upload_chunk;
    msm_chunked(gpu, curve, bases, n, scalars, chunk)
}

/// [`msm`] with the scalars uploaded in pieces of `chunk` scalars (at least 1; a last piece
/// shorter when `chunk` does not divide `n`).
pub fn msm_chunked(
    gpu: &Gpu,
    curve: Curve,
    bases: &DevBuf,
    n: usize,
    scalars: &[u8],
    chunk: usize,
) -> Result<MsmParts, GpuError> {
    if scalars.len() != n * 32 {
        return Err(GpuError::Input(format!(
            "{} scalar bytes for {n} bases",
            scalars.len()
        )));
    }
    let chunk = chunk.clamp(1, n.max(1));
    msm_from(gpu, curve, bases.view(), n, Source::Host { scalars, chunk })
}

/// [`msm`] of the first `n` scalars of `scalars`, a device buffer (blst_fr Montgomery form, 32
/// bytes each) such as the output of an NTT: no host transfer. The buffer is consumed (the MSM
/// leaves its scalars out of Montgomery form).
pub fn msm_device(
    gpu: &Gpu,
    curve: Curve,
    bases: &DevBuf,
    n: usize,
    scalars: DevBuf,
) -> Result<MsmParts, GpuError> {
    let mut run = MsmRun::new(gpu, curve, bases, n, scalars)?;
    while run.step(gpu, bases)? {}
    run.finish()
}

/// [`msm_device`] over views: `n` bases at the start of `bases` and their scalars at the start
/// of `scalars`, which the MSM leaves out of Montgomery form (the caller reads them no more).
pub fn msm_view(
    gpu: &Gpu,
    curve: Curve,
    bases: DevView,
    n: usize,
    scalars: DevView,
) -> Result<MsmParts, GpuError> {
    if scalars.len() < n * 32 {
        return Err(GpuError::Input(format!(
            "{} scalar bytes on the device for {n} bases",
            scalars.len()
        )));
    }
    msm_from(gpu, curve, bases, n, Source::View(scalars))
}

/// Where the scalars of an MSM are.
enum Source<'a> {
    /// Host bytes, uploaded in pieces of `chunk` (≥ 1) scalars overlapped with `msm_front`.
    Host { scalars: &'a [u8], chunk: usize },
    /// A device buffer of at least n scalars (freed once read).
    Device(DevBuf),
    /// Part of a device buffer the caller keeps.
    View(DevView),
}

/// The scalars on the device: a buffer the MSM owns (freed when dropped) or a caller's view.
enum OnDevice {
    Owned(DevBuf),
    View(DevView),
}

impl OnDevice {
    fn view(&self) -> DevView {
        match self {
            OnDevice::Owned(b) => b.view(),
            OnDevice::View(v) => *v,
        }
    }
}

/// The MSM's phases in order (see the module's documentation), each its own function below.
fn msm_from(
    gpu: &Gpu,
    curve: Curve,
    bases: DevView,
    n: usize,
    source: Source<'_>,
) -> Result<MsmParts, GpuError> {
    let mut run = MsmRun::start(gpu, curve, bases, n, source)?;
    while run.step_view(gpu, bases)? {}
    run.finish()
}

/// Refuses bases shorter than `n` points and sizes the kernels' u32 indices cannot hold.
fn check_lengths(curve: Curve, bases: DevView, n: usize) -> Result<(), GpuError> {
    if bases.len() < n * curve.affine_bytes() {
        return Err(GpuError::Input(format!(
            "{} bytes of bases for {n} points",
            bases.len()
        )));
    }
    if n >= (1usize << 31) {
        return Err(GpuError::Input(format!("MSM of {n} points exceeds 2^31")));
    }
    Ok(())
}

/// Signed digits of the full scalars, window-major, and how many land in each bucket.
struct Digits {
    /// The window width.
    c: u32,
    /// Entries between one window's digits and the next's (n or m).
    stride: u64,
    digits: DevBuf,
    /// One count per bucket and one more, not yet scanned.
    counts: DevBuf,
}

impl Digits {
    fn windows(&self) -> u64 {
        (255 / self.c + 1) as u64
    }
    fn buckets_per_window(&self) -> u64 {
        1 << (self.c - 1)
    }
    fn buckets(&self) -> u64 {
        self.windows() * self.buckets_per_window()
    }
    /// Device buffers for `windows` digits of `stride` points each at width `c`.
    fn alloc(gpu: &Gpu, c: u32, stride: u64) -> Result<Self, GpuError> {
        let nw = (255 / c + 1) as u64;
        Ok(Digits {
            c,
            stride,
            digits: gpu.alloc((nw * stride) as usize * 4)?,
            counts: gpu.alloc_zeroed(((nw << (c - 1)) + 1) as usize * 4)?,
        })
    }
}

/// What the front end leaves on the device.
struct Front {
    /// The scalars, left canonical (out of Montgomery form) for `redigits`.
    scalars: OnDevice,
    /// Indices of the points whose scalar is 1 (`n_ones` of them).
    ones_idx: DevBuf,
    /// Indices of the points whose scalar is full (`m` of them).
    rest_idx: DevBuf,
    n_ones: u64,
    m: u64,
    /// The full scalars' digits with the width for n, stride n.
    digits: Digits,
}

/// `front`: upload, classification and digits together, a piece at a time. The digits are
/// written while the scalars arrive, before the number m of full scalars is known: with the
/// window width chosen for n, and with a window stride of n.
fn classify(gpu: &Gpu, curve: Curve, n: usize, source: Source<'_>) -> Result<Front, GpuError> {
    let nn = n as u64;
    let digits = Digits::alloc(gpu, gpu.options().msm.window_bits(n, curve), nn)?;
    let (mut scalars, upload) = match source {
        Source::Host { scalars, chunk } => {
            (OnDevice::Owned(gpu.alloc(n * 32)?), Some((scalars, chunk)))
        }
        Source::Device(buf) => (OnDevice::Owned(buf), None),
        Source::View(v) => (OnDevice::View(v), None),
    };
    let ones_idx = gpu.alloc(n * 4)?;
    let rest_idx = gpu.alloc(n * 4)?;
    let counts = gpu.alloc_zeroed(8)?;
    let sc_ptr = scalars.view().ptr();
    // msm_front on scalars [first, first + count).
    let front = |first: u64, count: u64| {
        gpu.launch(
            &k::MSM_FRONT,
            count.div_ceil(256),
            256,
            &[
                Arg::Ptr(sc_ptr),
                Arg::u32(first)?,
                Arg::u32(count)?,
                Arg::u32(nn)?,
                Arg::u32(digits.c)?,
                Arg::u32(digits.windows())?,
                (&ones_idx).into(),
                (&rest_idx).into(),
                (&counts).into(),
                (&digits.digits).into(),
                (&digits.counts).into(),
            ],
        )
    };
    match (upload, &mut scalars) {
        (Some((host, chunk)), OnDevice::Owned(buf)) => {
            gpu.upload_overlapped(buf, host, chunk * 32, |offset, len| {
                front((offset / 32) as u64, (len / 32) as u64)
            })?
        }
        (Some(_), OnDevice::View(_)) => {
            return Err(GpuError::Input(
                "host scalars need a buffer of their own".into(),
            ))
        }
        (None, _) if n > 0 => front(0, nn)?,
        (None, _) => {}
    }
    let mut cnt = [0u32; 2];
    gpu.download(&counts, bytes_mut(&mut cnt))?;
    Ok(Front {
        scalars,
        ones_idx,
        rest_idx,
        n_ones: u64::from(u32::from_le(cnt[0])),
        m: u64::from(u32::from_le(cnt[1])),
        digits,
    })
}

/// `ones`: the sum of the bases whose scalar is 1, as a Jacobian point's words.
fn sum_ones(
    gpu: &Gpu,
    curve: Curve,
    bases: DevView,
    ones_idx: DevBuf,
    n_ones: u64,
) -> Result<Option<Vec<u64>>, GpuError> {
    if n_ones == 0 {
        return Ok(None);
    }
    let threads = n_ones.div_ceil(ONES_PER_THREAD);
    let partial = gpu.alloc(threads as usize * curve.xyzz_bytes())?;
    gpu.launch(
        curve.kernel(Kernel::BatchAdd),
        threads.div_ceil(128),
        128,
        &[
            bases.into(),
            (&ones_idx).into(),
            Arg::u32(n_ones)?,
            Arg::u32(ONES_PER_THREAD)?,
            (&partial).into(),
        ],
    )?;
    drop(ones_idx);
    let sum = reduce_tree(gpu, curve, partial, 1, threads)?;
    Ok(to_jacobian(gpu, curve, &sum, 1)?.pop())
}

/// `redigits`: where few of the n scalars are full ones (see [`REDIGIT_SHARE`]), their digits
/// again with the window width for m, from the canonical scalars msm_front left in place,
/// stride m; otherwise the front end's digits as they are.
fn redigit_if_sparse(
    gpu: &Gpu,
    curve: Curve,
    front: Digits,
    scalars: &OnDevice,
    rest_idx: &DevBuf,
    m: u64,
    tr: &mut Trace,
) -> Result<Digits, GpuError> {
    let c_m = gpu.options().msm.window_bits(m as usize, curve);
    if m * REDIGIT_SHARE > front.stride || c_m.abs_diff(front.c) < 2 {
        return Ok(front);
    }
    drop(front);
    let digits = Digits::alloc(gpu, c_m, m)?;
    gpu.launch(
        &k::MSM_DIGITS,
        m.div_ceil(256),
        256,
        &[
            scalars.view().into(),
            rest_idx.into(),
            Arg::u32(m)?,
            Arg::u32(c_m)?,
            Arg::u32(digits.windows())?,
            (&digits.digits).into(),
            (&digits.counts).into(),
        ],
    )?;
    tr.mark(gpu, "redigits")?;
    Ok(digits)
}

/// The (window, point) pairs sorted by bucket.
struct Sorted {
    /// Point indices, bucket after bucket.
    list: DevBuf,
    /// Where each bucket's run starts in `list` (one more entry: the end).
    offsets: DevBuf,
    buckets: u64,
    /// Entries in `list`.
    total: u64,
}

/// `scan`, `scatter`: the counting sort of the m full scalars' (window, point) pairs by
/// bucket.
fn sort_by_bucket(
    gpu: &Gpu,
    digits: Digits,
    rest_idx: DevBuf,
    m: u64,
    tr: &mut Trace,
) -> Result<Sorted, GpuError> {
    let nw = digits.windows();
    if nw * m >= 1u64 << 32 {
        // Bucket offsets are u32: more (window, point) pairs than that need wider windows.
        return Err(GpuError::Input(format!(
            "{m} scalars with {}-bit windows overflow the bucket lists",
            digits.c
        )));
    }
    let nb = digits.buckets();
    let offsets = digits.counts;
    exclusive_scan(gpu, offsets.ptr(), nb + 1)?;
    tr.mark(gpu, "scan")?;
    let mut cursor = gpu.alloc((nb + 1) as usize * 4)?;
    gpu.copy(&offsets, &mut cursor, (nb + 1) as usize * 4)?;
    let list = gpu.alloc((nw * m) as usize * 4)?;
    // One thread per (window, point), window-major.
    gpu.launch(
        &k::MSM_SCATTER,
        nw * m.div_ceil(256),
        256,
        &[
            (&digits.digits).into(),
            (&rest_idx).into(),
            Arg::u32(m)?,
            Arg::u32(nw)?,
            Arg::u32(digits.stride)?,
            (&cursor).into(),
            (&list).into(),
        ],
    )?;
    drop((digits.digits, cursor, rest_idx));
    tr.mark(gpu, "scatter")?;
    let mut last = [0u32; 1];
    gpu.download_at(&offsets, nb as usize * 4, bytes_mut(&mut last))?;
    Ok(Sorted {
        list,
        offsets,
        buckets: nb,
        total: u64::from(u32::from_le(last[0])),
    })
}

/// `segments`, `tree`: each window's Σ_k (k+1)·B_k from its buckets (c-bit windows), as
/// Jacobian points' words, one per window.
fn window_sums(
    gpu: &Gpu,
    curve: Curve,
    buckets: &DevBuf,
    c: u32,
    tr: &mut Trace,
) -> Result<Vec<Vec<u64>>, GpuError> {
    let nw = (255 / c + 1) as u64;
    let buckets_per_window = 1u64 << (c - 1);
    let seg = (SEGMENT as u64).min(buckets_per_window);
    let segs = buckets_per_window / seg;
    let seg_out = gpu.alloc((nw * segs) as usize * curve.xyzz_bytes())?;
    gpu.launch(
        curve.kernel(Kernel::Segments),
        (nw * segs).div_ceil(64),
        64,
        &[
            buckets.into(),
            Arg::u32(nw)?,
            Arg::u32(buckets_per_window)?,
            Arg::u32(seg)?,
            (&seg_out).into(),
        ],
    )?;
    tr.mark(gpu, "segments")?;
    let sums = reduce_tree(gpu, curve, seg_out, nw, segs)?;
    let windows = to_jacobian(gpu, curve, &sums, nw as usize)?;
    tr.mark(gpu, "tree")?;
    Ok(windows)
}

fn fp(l: &[u64]) -> blst_fp {
    let mut a = [0u64; 6];
    a.copy_from_slice(&l[..6]);
    blst_fp { l: a }
}

pub(crate) fn g1_point(l: &[u64]) -> G1Projective {
    let p = blst_p1 {
        x: fp(&l[0..6]),
        y: fp(&l[6..12]),
        z: fp(&l[12..18]),
    };
    // SAFETY: G1Projective is #[repr(transparent)] over blst_p1 (Jacobian, Montgomery limbs),
    // which is what the kernel wrote: a valid curve point (Z = 0 for infinity).
    unsafe { std::mem::transmute::<blst_p1, G1Projective>(p) }
}

fn g2_point(l: &[u64]) -> G2Projective {
    let f2 = |k: usize| blst_fp2 {
        fp: [fp(&l[12 * k..12 * k + 6]), fp(&l[12 * k + 6..12 * k + 12])],
    };
    let p = blst_p2 {
        x: f2(0),
        y: f2(1),
        z: f2(2),
    };
    // SAFETY: as for G1: G2Projective is #[repr(transparent)] over blst_p2.
    unsafe { std::mem::transmute::<blst_p2, G2Projective>(p) }
}

fn combine<P: Group>(parts: &MsmParts, point: fn(&[u64]) -> P) -> P {
    let mut acc = P::identity();
    for w in parts.windows.iter().rev() {
        for _ in 0..parts.window_bits {
            acc = acc.double();
        }
        acc += point(w);
    }
    if let Some(o) = &parts.ones {
        acc += point(o);
    }
    acc
}

/// The G1 result of the parts.
pub fn finish_g1(parts: &MsmParts) -> G1Projective {
    combine(parts, g1_point)
}

/// The G2 result of the parts.
pub fn finish_g2(parts: &MsmParts) -> G2Projective {
    combine(parts, g2_point)
}
