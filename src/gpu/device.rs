//! One CUDA device: discovery, the context and streams, the compiled module and its kernels,
//! device buffers and pinned host buffers.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use cudarc::driver::sys::{
    CUdevice_attribute, CUfunction_attribute, CUmemorytype, CUpointer_attribute, CUresult,
};
use cudarc::driver::{
    CudaContext, CudaEvent, CudaFunction, CudaSlice, CudaStream, DevicePtr, LaunchConfig,
    PinnedHostSlice, PushKernelArg,
};
use cudarc::nvrtc::Ptx;
use rayon::prelude::*;

use super::compile;
use super::error::{Ctx, GpuError};
use super::kernels::{self, Arg, Kernel};
use super::GpuOptions;

/// What the backend reports about its device.
#[derive(Debug, Clone)]
pub struct DeviceInfo {
    /// CUDA ordinal.
    pub ordinal: usize,
    /// Marketing name, e.g. "NVIDIA H200".
    pub name: String,
    /// Streaming multiprocessors.
    pub sm_count: u32,
    /// Total device memory in bytes.
    pub total_mem: usize,
    /// Dynamic shared memory a block may use once a kernel opts in (bytes).
    pub smem_optin: u32,
    /// Compute capability as major*10 + minor (90 for Hopper).
    pub arch: u32,
    /// The driver's CUDA version (cuDriverGetVersion), e.g. 13000.
    pub driver_version: i32,
    /// Milliseconds spent getting the kernels (NVRTC or cache) and loading them.
    pub module_ms: f64,
    /// Whether the cubin came from the on-disk cache.
    pub module_cached: bool,
    /// PCI address as sysfs names it (`0000:1b:00.0`), for the device's NUMA node.
    pub pci_bus_id: String,
}

/// A device buffer of raw bytes; kernels get its address. Its bytes count against the device
/// handle's [`Ledger`] until it is dropped.
pub struct DevBuf {
    slice: CudaSlice<u8>,
    ptr: u64,
    ledger: Arc<Ledger>,
}

impl DevBuf {
    /// The device address (what kernels take).
    pub fn ptr(&self) -> u64 {
        self.ptr
    }
    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.slice.len()
    }
    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.slice.len() == 0
    }
    /// The whole buffer as a view.
    pub fn view(&self) -> DevView {
        DevView {
            ptr: self.ptr,
            len: self.len(),
        }
    }
    /// Bytes `range` of the buffer as a view, or an error where it does not lie inside.
    pub fn view_of(&self, range: std::ops::Range<usize>) -> Result<DevView, GpuError> {
        self.view().range(range)
    }
}

impl Drop for DevBuf {
    fn drop(&mut self) {
        // The memory itself is freed in stream order after the work already issued on it; the
        // ledger counts it free now, which is what a later allocation (ordered after that
        // work on the same stream) may reuse.
        self.ledger.release(self.slice.len() as u64);
    }
}

/// A range of a live device buffer: an address and a length. It borrows nothing, so the
/// caller keeps the buffer it came from alive (and unmoved on the device: buffers never move)
/// for as long as work issued on the view may run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DevView {
    ptr: u64,
    len: usize,
}

impl DevView {
    /// The device address.
    pub fn ptr(&self) -> u64 {
        self.ptr
    }
    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }
    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Bytes `range` of this view, or an error where it does not lie inside.
    pub fn range(self, range: std::ops::Range<usize>) -> Result<DevView, GpuError> {
        if range.start > range.end || range.end > self.len {
            return Err(GpuError::Input(format!(
                "device range {range:?} of a view of {} bytes",
                self.len
            )));
        }
        Ok(DevView {
            ptr: self.ptr + range.start as u64,
            len: range.end - range.start,
        })
    }
}

// Buffers and views pass as their device addresses.
impl From<&DevBuf> for Arg {
    fn from(b: &DevBuf) -> Arg {
        Arg::Ptr(b.ptr())
    }
}

impl From<DevView> for Arg {
    fn from(v: DevView) -> Arg {
        Arg::Ptr(v.ptr())
    }
}

impl From<&mut DevBuf> for Arg {
    fn from(b: &mut DevBuf) -> Arg {
        Arg::Ptr(b.ptr())
    }
}

/// The device memory a handle's buffers hold, against its cap (`gpu.memory_limit`, else the
/// memory free when the device was opened, less a margin), and the most they held at once.
/// An allocation that would pass the cap fails as the driver's out-of-memory does, so that a
/// large card can stand in for a small one and a card can be shared with other work.
pub struct Ledger {
    cap: u64,
    used: AtomicU64,
    peak: AtomicU64,
    /// What was held when the current turn on the device began ([`Ledger::begin_turn`]).
    turn_start: AtomicU64,
    /// The most held since then.
    turn_peak: AtomicU64,
}

impl Ledger {
    fn new(cap: u64) -> Self {
        Ledger {
            cap,
            used: AtomicU64::new(0),
            peak: AtomicU64::new(0),
            turn_start: AtomicU64::new(0),
            turn_peak: AtomicU64::new(0),
        }
    }

    /// Takes `bytes` where they fit under the cap.
    fn take(&self, bytes: u64) -> Result<(), GpuError> {
        let mut used = self.used.load(Ordering::Relaxed);
        loop {
            let after = used.saturating_add(bytes);
            if after > self.cap {
                return Err(GpuError::OutOfMemory(format!(
                    "{bytes} bytes more would pass the device's memory budget of {} bytes ({used} held)",
                    self.cap
                )));
            }
            match self
                .used
                .compare_exchange_weak(used, after, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => {
                    self.peak.fetch_max(after, Ordering::Relaxed);
                    self.turn_peak.fetch_max(after, Ordering::Relaxed);
                    return Ok(());
                }
                Err(now) => used = now,
            }
        }
    }

    fn release(&self, bytes: u64) {
        self.used.fetch_sub(bytes, Ordering::Relaxed);
    }
}

impl Ledger {
    /// What it holds now, against its cap.
    pub fn snapshot(&self) -> MemoryUse {
        MemoryUse {
            budget: self.cap,
            used: self.used.load(Ordering::Relaxed),
            peak: self.peak.load(Ordering::Relaxed),
        }
    }

    /// Starts the peak again from what is held now.
    pub fn reset_peak(&self) {
        let used = self.used.load(Ordering::Relaxed);
        self.peak.store(used, Ordering::Relaxed);
    }

    /// Starts the turn's count from what is held now (a caller took its turn on the device).
    pub fn begin_turn(&self) {
        let used = self.used.load(Ordering::Relaxed);
        self.turn_start.store(used, Ordering::Relaxed);
        self.turn_peak.store(used, Ordering::Relaxed);
    }

    /// The current turn's bytes: held when it began, the most held since, held now.
    pub fn turn_bytes(&self) -> (u64, u64, u64) {
        let used = self.used.load(Ordering::Relaxed);
        let start = self.turn_start.load(Ordering::Relaxed);
        (
            start,
            self.turn_peak.load(Ordering::Relaxed).max(used),
            used,
        )
    }
}

/// Two device buffers that host memory streams through in pieces ([`Gpu::stream`]), with
/// the events that order their reuse; kept across several streams (the rows of A, B and C
/// one after the other) so that each stream's first copy waits only for its slot's last
/// reader.
pub struct Ring {
    slots: [DevBuf; 2],
    /// Recorded when the ring was made: its slots' allocation is done.
    ready: CudaEvent,
    /// Recorded on the main stream after the work on each slot's last piece.
    consumed: [Option<CudaEvent>; 2],
    /// The slot the next piece goes to.
    next: usize,
}

impl Ring {
    /// Bytes of each slot.
    pub fn slot_bytes(&self) -> usize {
        self.slots[0].len()
    }
}

/// What [`Gpu::memory`] reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryUse {
    /// The cap.
    pub budget: u64,
    /// Bytes held now.
    pub used: u64,
    /// The most held at once since the last [`Gpu::reset_peak`].
    pub peak: u64,
}

/// A context, its streams and the loaded kernels. All work — allocations, frees, kernels,
/// copies — is issued on the one main stream, in order, so it needs no cross-stream events.
/// The exceptions are [`Gpu::upload_overlapped`] and `Gpu::upload_after`: their host→device
/// copies run on a second (copy) stream, ordered against the main stream by events, and they
/// synchronize the copy stream before they return, so that between their calls the copy
/// stream is idle and everything else can keep reasoning about the main stream alone.
pub struct Gpu {
    /// The device.
    pub info: DeviceInfo,
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    /// Non-blocking stream for the uploads of [`Gpu::upload_overlapped`] and `upload_after` only.
    copy: Arc<CudaStream>,
    funcs: HashMap<&'static str, CudaFunction>,
    /// Page-locked buffers that uploads from pageable memory go through (allocated on first
    /// use; see [`Gpu::copy_staged`]).
    staging: Mutex<StagingState>,
    /// Bytes of one staging buffer, and of the pieces of a large pageable upload: half of
    /// [`GpuOptions::staging_bytes`]; 0 when that is 0 (pageable uploads then go through the
    /// driver).
    stage_bytes: usize,
    /// What the device was opened with; the host drivers read their tuning from it.
    options: GpuOptions,
    /// The device memory this handle's buffers hold, against its cap.
    ledger: Arc<Ledger>,
    /// Whether large allocations settle the pool first ([`Gpu::set_tight`]).
    tight: std::sync::atomic::AtomicBool,
}

/// Allocations of at least this many bytes settle the stream-ordered pool first.
const SETTLE_BYTES: usize = 512 << 20;

/// Host copies into a staging buffer go in parallel pieces of this size (also the smallest
/// staging buffer).
const STAGE_PAR: usize = 1 << 20;

/// Whether the staging buffers exist yet, or could not be had.
enum StagingState {
    Untried,
    Ready(Staging),
    /// Page-locked memory was refused (a low `RLIMIT_MEMLOCK` outside the systemd unit, say):
    /// pageable uploads go through the driver, as without staging.
    Unavailable,
}

/// Two page-locked host buffers used in turn: while the device reads one over PCIe, the host
/// fills the other, on all cores. On the H200 host the quotient with its H MSM at 2^27 (three
/// 4.3 GB inputs from pageable memory) took 2.73 s with the driver staging the uploads and
/// 1.40 s through these (docs/gpu-notes.md, v15).
struct Staging {
    bufs: [PinnedHostSlice<u8>; 2],
    /// Recorded on the copy stream after the last transfer out of each buffer; the host
    /// waits for it before writing that buffer again.
    done: [Option<CudaEvent>; 2],
    next: usize,
}

/// Synchronizes the copy stream when dropped, so that no copy issued by `Gpu::upload_pieces`
/// (behind [`Gpu::upload_overlapped`] and `upload_after`) is in flight once it returns, whatever the path out (an early
/// error, a panic in the caller's closure): neither its host source (which the caller may free
/// or reuse, pinned or not) nor its device destination (which is freed in main-stream order, and
/// the main stream may not have waited for every copy yet) is touched afterwards.
struct CopyFence<'a> {
    stream: &'a CudaStream,
    armed: bool,
}

impl CopyFence<'_> {
    /// The synchronization of the normal path, with its error typed.
    fn finish(mut self) -> Result<(), GpuError> {
        self.armed = false;
        self.stream.synchronize().ctx("cuStreamSynchronize")
    }
}

impl Drop for CopyFence<'_> {
    fn drop(&mut self) {
        if self.armed {
            // Only on an early exit, which already carries its error. A failure here means the
            // context itself has failed (a sticky error, after which the device runs nothing
            // more): it cannot be reported from drop.
            let _ = self.stream.synchronize();
        }
    }
}

/// One staging buffer's size for a budget of `total` bytes for both: half of it, at least
/// [`STAGE_PAR`]; 0 (no staging) for a budget of 0.
fn stage_bytes(total: usize) -> usize {
    if total == 0 {
        0
    } else {
        (total / 2).max(STAGE_PAR)
    }
}

/// The order of [`Gpu::stream_while`]'s steps over pieces `pieces` of a two-slot ring `r`:
/// piece k + 1 issued (`issue`) before the work on piece k (`work`, given what its issue
/// gave), and asked for (`go_on(k + 1)`) before it is issued; where `go_on` says no, the work
/// on the piece in hand is done and the next piece's index returned (`pieces.end` when all
/// are done). Every piece issued is worked on: none is issued that a stop leaves behind.
fn pipelined<R, X>(
    r: &mut R,
    pieces: std::ops::Range<usize>,
    mut go_on: impl FnMut(usize) -> bool,
    mut issue: impl FnMut(&mut R, usize) -> Result<X, GpuError>,
    mut work: impl FnMut(&mut R, usize, X) -> Result<(), GpuError>,
) -> Result<usize, GpuError> {
    let mut k = pieces.start;
    let mut next = match k < pieces.end {
        true => Some(issue(r, k)?),
        false => None,
    };
    while let Some(in_hand) = next.take() {
        if k + 1 < pieces.end && go_on(k + 1) {
            next = Some(issue(r, k + 1)?);
        }
        work(r, k, in_hand)?;
        k += 1;
    }
    Ok(k)
}

/// A point in the main stream's work, for `Gpu::upload_after`.
pub(crate) struct StreamMark(CudaEvent);

/// Device memory held by this process for nothing but to leave less to others: a stand-in for
/// another program using the card (`cuzk bench hold-gpu`). Freed when dropped.
pub struct HeldMemory {
    _blocks: Vec<CudaSlice<u8>>,
    /// Bytes held.
    pub held: u64,
    /// Bytes the driver reported free once they were taken.
    pub free: u64,
}

/// Takes device `ordinal`'s memory, 256 MiB at a time, until about `leave` bytes stay free.
/// Near the top the driver may decline a block that its free count would hold (its page
/// granularity and own bookkeeping; an H200 did so): the block is halved then, down to 1 MiB.
pub fn hold_memory(ordinal: usize, leave: u64) -> Result<HeldMemory, GpuError> {
    device_count()?;
    let ctx = CudaContext::new(ordinal).ctx("cuCtxCreate")?;
    let stream = ctx.default_stream();
    let mut blocks = Vec::new();
    let (mut held, mut block) = (0, 256u64 << 20);
    loop {
        let (free, _) = ctx.mem_get_info().ctx("cuMemGetInfo")?;
        let free = free as u64;
        let take = free.saturating_sub(leave).min(block);
        if take < (1 << 20) {
            return Ok(HeldMemory {
                _blocks: blocks,
                held,
                free,
            });
        }
        match stream.alloc_zeros::<u8>(take as usize).ctx("cuMemAlloc") {
            Ok(b) => blocks.push(b),
            Err(e) if e.is_out_of_memory() => {
                block = take / 2;
                continue;
            }
            Err(e) => return Err(e),
        }
        // Synchronized so that the pool hands the memory out now, not at the next sync.
        stream.synchronize().ctx("cuStreamSynchronize")?;
        held += take;
    }
}

/// The lowest free memory device `ordinal`'s driver reported while this lived: a thread of
/// its own asks the driver (`cuMemGetInfo`, device-wide, whoever holds the memory) every
/// `every` until dropped or [`FreeWatch::stop`]ped. A check of the device's own view beside the
/// ledger's count: the pool's rounding, the driver's allocations and memory taken outside the
/// ledger show here only.
pub struct FreeWatch {
    lowest: Arc<AtomicU64>,
    samples: Arc<AtomicU64>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FreeWatch {
    /// Starts watching device `ordinal` (its first sample taken before this returns).
    pub fn start(ordinal: usize, every: std::time::Duration) -> Result<FreeWatch, GpuError> {
        device_count()?;
        let ctx = CudaContext::new(ordinal).ctx("cuCtxCreate")?;
        let (free, _) = ctx.mem_get_info().ctx("cuMemGetInfo")?;
        let lowest = Arc::new(AtomicU64::new(free as u64));
        let samples = Arc::new(AtomicU64::new(1));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (l, n, halt) = (lowest.clone(), samples.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !halt.load(Ordering::Relaxed) {
                if let Ok((free, _)) = ctx.mem_get_info() {
                    l.fetch_min(free as u64, Ordering::Relaxed);
                    n.fetch_add(1, Ordering::Relaxed);
                }
                std::thread::sleep(every);
            }
        });
        Ok(FreeWatch {
            lowest,
            samples,
            stop,
            thread: Some(thread),
        })
    }

    /// The lowest free memory reported so far, in bytes.
    pub fn lowest(&self) -> u64 {
        self.lowest.load(Ordering::Relaxed)
    }

    /// How many times the driver was asked so far.
    pub fn samples(&self) -> u64 {
        self.samples.load(Ordering::Relaxed)
    }

    /// Stops the thread and returns the lowest free memory reported.
    pub fn stop(mut self) -> u64 {
        self.halt();
        self.lowest()
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for FreeWatch {
    fn drop(&mut self) {
        self.halt();
    }
}

/// Number of CUDA devices, or why there are none. Never panics, also without libcuda.
pub fn device_count() -> Result<usize, GpuError> {
    // SAFETY: only tries to load libcuda; cudarc panics on the first driver call without it.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err(GpuError::NoDevice(
            "libcuda (the NVIDIA driver) is not installed".into(),
        ));
    }
    match CudaContext::device_count() {
        Ok(n) if n > 0 => Ok(n as usize),
        Ok(_) => Err(GpuError::NoDevice(
            "the driver reports no CUDA device".into(),
        )),
        Err(e) if e.0 == CUresult::CUDA_ERROR_NO_DEVICE => Err(GpuError::NoDevice(
            "the driver reports no CUDA device".into(),
        )),
        Err(e) => Err(GpuError::NoDevice(format!("cuInit failed: {e:?}"))),
    }
}

impl Gpu {
    /// Opens the device `options` name, compiles (or loads from its kernel cache) and loads the
    /// kernels, and keeps `options` for the host drivers ([`Gpu::options`]).
    pub fn open(options: &GpuOptions) -> Result<Gpu, GpuError> {
        let ordinal = options.ordinal;
        device_count()?;
        let ctx = CudaContext::new(ordinal).ctx("cuCtxCreate")?;
        // SAFETY: every buffer and kernel of this context is used on `stream` only, in issue
        // order, and host reads synchronize the stream first; per-buffer events would add
        // nothing but overhead. The one exception, the copies of `upload_overlapped` and
        // `upload_after` on the `copy` stream, are ordered against `stream` by explicit events
        // in `upload_pieces` (after the destination's allocation, before any kernel that reads
        // a piece and before its free) and the copy stream is synchronized before they return.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.default_stream();
        // Non-blocking: it does not synchronize implicitly with the (legacy) default stream
        // above, so its copies can overlap kernels there; created after event tracking is off.
        let copy = ctx.new_stream().ctx("cuStreamCreate")?;
        let name = ctx.name().ctx("cuDeviceGetName")?;
        let (major, minor) = ctx.compute_capability().ctx("compute capability")?;
        let sm_count = ctx
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .ctx("SM count")? as u32;
        let total_mem = ctx.total_mem().ctx("cuDeviceTotalMem")?;
        let mut driver_version = 0i32;
        // SAFETY: valid out pointer; the driver library is loaded (device_count succeeded).
        unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut driver_version) }
            .result()
            .ctx("cuDriverGetVersion")?;
        let arch = (major * 10 + minor) as u32;
        let pci_bus_id = pci_bus_id(&ctx)?;
        let t0 = Instant::now();
        let (funcs, cached, smem_optin) = load_kernels(&ctx, arch, driver_version, options)?;
        // Measured after the context and the module took theirs: what is left is what the
        // proofs may use, less the margin, or the configured limit where that is lower.
        let (free, _) = ctx.mem_get_info().ctx("cuMemGetInfo")?;
        let budget = super::budget::device_budget(free as u64, options.memory_limit);
        if options.memory_limit.is_some_and(|l| l > budget) {
            tracing::warn!(
                ordinal,
                limit = options.memory_limit.unwrap_or(0),
                budget,
                "gpu.memory_limit exceeds the device's free memory; using what is free"
            );
        }
        let info = DeviceInfo {
            ordinal,
            name,
            sm_count,
            total_mem,
            smem_optin,
            arch,
            driver_version,
            module_ms: t0.elapsed().as_secs_f64() * 1e3,
            module_cached: cached,
            pci_bus_id,
        };
        Ok(Gpu {
            info,
            ctx,
            stream,
            copy,
            funcs,
            staging: Mutex::new(StagingState::Untried),
            stage_bytes: stage_bytes(options.staging_bytes),
            options: options.clone(),
            ledger: Arc::new(Ledger::new(budget)),
            tight: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// The options the device was opened with.
    pub fn options(&self) -> &GpuOptions {
        &self.options
    }

    /// The context, for page-locked host blocks made outside the device's turn.
    pub(crate) fn context(&self) -> Arc<CudaContext> {
        self.ctx.clone()
    }

    /// Makes this context the calling thread's current one. cudarc binds it for the calls it
    /// makes, but not for the frees of dropped buffers: a thread whose first device work is
    /// dropping one would free it outside any context (`CUDA_ERROR_INVALID_CONTEXT`, reported
    /// by the next call).
    pub fn bind(&self) -> Result<(), GpuError> {
        self.ctx.bind_to_thread().ctx("cuCtxSetCurrent")
    }

    /// Free and total device memory in bytes.
    pub fn mem_info(&self) -> Result<(usize, usize), GpuError> {
        self.ctx.mem_get_info().ctx("cuMemGetInfo")
    }

    /// The device memory this handle's buffers hold, against its cap.
    pub fn memory(&self) -> MemoryUse {
        self.ledger.snapshot()
    }

    /// The ledger, for reading the memory without the device's lock.
    pub fn ledger(&self) -> Arc<Ledger> {
        self.ledger.clone()
    }

    /// Bytes an allocation may take now: the driver's free memory, or what the cap leaves,
    /// whichever is less.
    pub fn available(&self) -> Result<usize, GpuError> {
        let (free, _) = self.mem_info()?;
        let m = self.memory();
        Ok(free.min(m.budget.saturating_sub(m.used) as usize))
    }

    /// Starts the peak of [`Gpu::memory`] again from what is held now.
    pub fn reset_peak(&self) {
        self.ledger.reset_peak();
    }

    /// `slice` counted in the ledger (the bytes were taken from it before the allocation).
    fn counted(&self, slice: CudaSlice<u8>) -> DevBuf {
        let ptr = slice.device_ptr(&self.stream).0;
        DevBuf {
            slice,
            ptr,
            ledger: self.ledger.clone(),
        }
    }

    /// Waits for the work issued so far and hands the memory it freed back to the driver (the
    /// stream-ordered pool keeps freed blocks until a synchronization, and trims to nothing
    /// only when asked): so that a large buffer freed before a large allocation of another
    /// size is not held beside it. Out of the ledger's sight, such blocks ran a card whose
    /// memory another process held out of memory (docs/benchmarks.md, 2026-12-04).
    pub fn settle(&self) -> Result<(), GpuError> {
        self.sync()?;
        let mut pool: cudarc::driver::sys::CUmemoryPool = std::ptr::null_mut();
        // SAFETY: valid out pointer; the context is bound (sync above) and its device exists.
        let r = unsafe {
            cudarc::driver::sys::cuDeviceGetDefaultMemPool(&mut pool, self.ctx.cu_device())
        };
        if r != CUresult::CUDA_SUCCESS || pool.is_null() {
            // No stream-ordered pool on this device: allocations are the driver's own.
            return Ok(());
        }
        // SAFETY: `pool` is the device's default pool; trimming frees only unused blocks.
        unsafe { cudarc::driver::sys::cuMemPoolTrimTo(pool, 0) }
            .result()
            .ctx("cuMemPoolTrimTo")
    }

    /// Whether large allocations settle the pool first ([`Gpu::settle`]): while a proof runs
    /// under a plan that fills the budget (a device that holds everything has room for the
    /// pool's freed blocks, and is not slowed by the waits).
    pub fn set_tight(&self, tight: bool) {
        self.tight.store(tight, Ordering::Relaxed);
    }

    /// Takes `bytes` from the ledger for `alloc`, giving them back where it fails. A large
    /// allocation settles the pool first where memory is tight ([`Gpu::set_tight`]).
    fn alloc_with(
        &self,
        bytes: usize,
        alloc: impl FnOnce(usize) -> Result<CudaSlice<u8>, GpuError>,
    ) -> Result<DevBuf, GpuError> {
        let bytes = bytes.max(1);
        if bytes >= SETTLE_BYTES && self.tight.load(Ordering::Relaxed) {
            self.settle()?;
        }
        self.ledger.take(bytes as u64)?;
        match alloc(bytes) {
            Ok(slice) => Ok(self.counted(slice)),
            Err(e) => {
                self.ledger.release(bytes as u64);
                Err(e)
            }
        }
    }

    /// Uninitialised device buffer of `bytes` bytes (at least 1, so that its address is valid).
    /// Out of memory where the driver has none, or where it would pass the ledger's cap.
    pub fn alloc(&self, bytes: usize) -> Result<DevBuf, GpuError> {
        self.alloc_with(bytes, |b| {
            // SAFETY: the contents are uninitialised device memory; every user writes before
            // reading.
            unsafe { self.stream.alloc::<u8>(b) }.ctx("cuMemAlloc")
        })
    }

    /// Zero-filled device buffer.
    pub fn alloc_zeroed(&self, bytes: usize) -> Result<DevBuf, GpuError> {
        self.alloc_with(bytes, |b| {
            self.stream.alloc_zeros::<u8>(b).ctx("cuMemAlloc")
        })
    }

    /// Copies `src` to the start of `dst`. A large pageable `src` goes through the staging
    /// buffers on the copy stream (see [`Gpu::copy_staged`]).
    pub fn upload(&self, dst: &mut DevBuf, src: &[u8]) -> Result<(), GpuError> {
        if src.len() > dst.len() {
            return Err(GpuError::Input(format!(
                "upload of {} bytes into {}",
                src.len(),
                dst.len()
            )));
        }
        if src.len() >= 2 * self.stage_bytes && self.needs_staging(src) {
            return self.upload_overlapped(dst, src, self.stage_bytes, |_, _| Ok(()));
        }
        let mut view = dst.slice.slice_mut(0..src.len());
        self.stream.memcpy_htod(src, &mut view).ctx("cuMemcpyHtoD")
    }

    /// New device buffer holding `src`.
    pub fn upload_new(&self, src: &[u8]) -> Result<DevBuf, GpuError> {
        let mut b = self.alloc(src.len())?;
        self.upload(&mut b, src)?;
        Ok(b)
    }

    /// Copies `src` to the start of `dst` in pieces of `chunk` bytes (the last one shorter when
    /// `chunk` does not divide `src.len()`) on the copy stream, and after issuing each piece
    /// calls `consume(offset, len)` with the main stream ordered after that piece's copy: the
    /// work `consume` issues (on the main stream, as everything in `Gpu` does) sees the bytes
    /// `offset..offset + len` of `dst`, and may run while later pieces are still being copied.
    /// From pinned host memory the copies overlap that work; pageable memory goes through the
    /// two page-locked staging buffers ([`Gpu::copy_staged`]), filled by the host while the
    /// device reads the other. On return (also on error) no copy is in flight. Everything
    /// issued on the main stream before the call (the allocation of `dst`, for one) is ordered
    /// before the copies.
    pub fn upload_overlapped(
        &self,
        dst: &mut DevBuf,
        src: &[u8],
        chunk: usize,
        consume: impl FnMut(usize, usize) -> Result<(), GpuError>,
    ) -> Result<(), GpuError> {
        self.upload_pieces(dst, src, chunk, None, consume)
    }

    /// Marks the work issued on the main stream so far (see [`Gpu::upload_after`]).
    pub(crate) fn mark(&self) -> Result<StreamMark, GpuError> {
        Ok(StreamMark(
            self.stream.record_event(None).ctx("cuEventRecord")?,
        ))
    }

    /// Copies `src` to the start of `dst` (on the copy stream, through the staging buffers
    /// when pageable), ordered after the main-stream work before `mark` only: main-stream work
    /// issued between the mark and this call (transforms of an earlier upload, say) runs while
    /// the bytes travel. The caller makes sure that work does not touch `dst` (allocate `dst`
    /// before the mark). Main-stream work issued after the call sees the bytes; on return no
    /// copy is in flight. Crate-private: a `dst` touched by work after the mark would race
    /// with the copy, which the type system cannot rule out.
    pub(crate) fn upload_after(
        &self,
        mark: &StreamMark,
        dst: &mut DevBuf,
        src: &[u8],
    ) -> Result<(), GpuError> {
        self.upload_pieces(dst, src, src.len().max(1), Some(&mark.0), |_, _| Ok(()))
    }

    /// [`Gpu::upload_overlapped`], with the copies ordered after `after` instead of after all
    /// the main stream's work so far when it is given.
    fn upload_pieces(
        &self,
        dst: &mut DevBuf,
        src: &[u8],
        chunk: usize,
        after: Option<&CudaEvent>,
        mut consume: impl FnMut(usize, usize) -> Result<(), GpuError>,
    ) -> Result<(), GpuError> {
        if src.len() > dst.len() {
            return Err(GpuError::Input(format!(
                "upload of {} bytes into {}",
                src.len(),
                dst.len()
            )));
        }
        if src.is_empty() {
            return Ok(());
        }
        let chunk = chunk.clamp(1, src.len());
        let staged = self.needs_staging(src);
        // Ordering (all events are recorded before they are waited for, in host order):
        // * allocated: main → copy, once, so the copy stream writes `dst` only after its
        //   stream-ordered allocation on the main stream (and any earlier main-stream work;
        //   with `after`, only the work before that mark, which the caller made sure covers
        //   the allocation).
        // * copied[k]: copy → main after piece k, waited for before `consume` issues the work
        //   on piece k. The copies run in issue order on the copy stream, so once the main
        //   stream has waited for the last piece it is ordered after every copy, and `dst` is
        //   freed (in main-stream order) only after all of them.
        // Pieces of `dst` are disjoint and each is written once, so the copy stream never needs
        // to wait for the main stream again (the staging buffers, reused, are ordered by events
        // of their own in `copy_staged`). The host issues piece k+1 after the work on piece k,
        // so that while the host copies a pageable piece into a staging buffer that work is
        // already queued.
        let fence = CopyFence {
            stream: &self.copy,
            armed: true,
        };
        match after {
            Some(ev) => self.copy.wait(ev).ctx("cuStreamWaitEvent")?,
            None => {
                let allocated: CudaEvent = self.stream.record_event(None).ctx("cuEventRecord")?;
                self.copy.wait(&allocated).ctx("cuStreamWaitEvent")?;
            }
        }
        let mut copied = self.copy_piece(dst, src, 0, chunk, staged)?;
        let mut offset = 0;
        while offset < src.len() {
            let len = chunk.min(src.len() - offset);
            self.stream.wait(&copied).ctx("cuStreamWaitEvent")?;
            consume(offset, len)?;
            offset += len;
            if offset < src.len() {
                copied = self.copy_piece(dst, src, offset, chunk, staged)?;
            }
        }
        // Blocks until the last piece is copied: the work on it is queued already, and the
        // caller may not see `src` released before that anyway.
        fence.finish()
    }

    /// Issues the copy of `src[offset..offset + chunk]` (clipped to `src`) to the same range of
    /// `dst` on the copy stream, through the staging buffers when `staged`, and returns an
    /// event recorded after it.
    fn copy_piece(
        &self,
        dst: &mut DevBuf,
        src: &[u8],
        offset: usize,
        chunk: usize,
        staged: bool,
    ) -> Result<CudaEvent, GpuError> {
        let end = offset + chunk.min(src.len() - offset);
        if staged && self.copy_staged(dst.ptr() + offset as u64, &src[offset..end])? {
            return self.copy.record_event(None).ctx("cuEventRecord");
        }
        let mut view = dst.slice.slice_mut(offset..end);
        // Event tracking is off (see `open`), so cudarc orders nothing itself here; the caller,
        // `upload_overlapped`, orders this copy against the main stream with events and keeps
        // `src` borrowed until the copy stream is synchronized.
        self.copy
            .memcpy_htod(&src[offset..end], &mut view)
            .ctx("cuMemcpyHtoDAsync")?;
        self.copy.record_event(None).ctx("cuEventRecord")
    }

    /// Whether an upload from `src` goes through the staging buffers: pageable memory, unless
    /// the options gave them no memory (then the driver stages it).
    fn needs_staging(&self, src: &[u8]) -> bool {
        self.stage_bytes > 0 && !self.is_pinned(src)
    }

    /// Whether the staging buffers have been allocated (by a pageable upload).
    pub fn staging_ready(&self) -> bool {
        matches!(self.staging.lock().as_deref(), Ok(StagingState::Ready(_)))
    }

    /// Whether `src` is page-locked memory of this context (the device can read it directly).
    pub fn is_pinned(&self, src: &[u8]) -> bool {
        if self.ctx.bind_to_thread().is_err() {
            return false;
        }
        let mut kind = 0u32;
        // SAFETY: `kind` is a valid out pointer of the attribute's size (an unsigned int); the
        // driver only inspects the address, which it does not know for pageable memory (an
        // error, read as "not pinned").
        let r = unsafe {
            cudarc::driver::sys::cuPointerGetAttribute(
                (&mut kind as *mut u32).cast(),
                CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                src.as_ptr() as u64,
            )
        };
        r == CUresult::CUDA_SUCCESS && kind == CUmemorytype::CU_MEMORYTYPE_HOST as u32
    }

    /// Issues the transfer of the pageable `src` to device address `dst` on the copy stream,
    /// in pieces of `stage_bytes` through the two staging buffers: the host copies a piece
    /// into one buffer (in parallel) while the device reads the other. On return `src` is no
    /// longer needed; the transfers may still be running (the caller orders them by events,
    /// as `upload_overlapped` does, and synchronizes the copy stream before returning).
    /// Returns false, having issued nothing, where no staging buffers could be allocated.
    fn copy_staged(&self, dst: u64, src: &[u8]) -> Result<bool, GpuError> {
        if self.stage_bytes == 0 {
            return Ok(false);
        }
        let mut guard = self.staging.lock().map_err(|_| GpuError::Cuda {
            context: "staging buffers",
            message: "a previous upload panicked".into(),
        })?;
        if let StagingState::Untried = *guard {
            *guard = match (self.pinned(self.stage_bytes), self.pinned(self.stage_bytes)) {
                (Ok(a), Ok(b)) => StagingState::Ready(Staging {
                    bufs: [a, b],
                    done: [None, None],
                    next: 0,
                }),
                (Err(e), _) | (_, Err(e)) => {
                    tracing::warn!(error = %e, "no page-locked staging buffers; uploads from pageable memory go through the driver");
                    StagingState::Unavailable
                }
            };
        }
        let StagingState::Ready(st) = &mut *guard else {
            return Ok(false);
        };
        for (k, piece) in src.chunks(self.stage_bytes).enumerate() {
            let j = st.next;
            st.next ^= 1;
            if let Some(ev) = st.done[j].take() {
                // The device has finished reading buffer j before the host writes it again.
                ev.synchronize().ctx("cuEventSynchronize")?;
            }
            let host = &mut st.bufs[j].as_mut_slice().ctx("pinned buffer")?[..piece.len()];
            host.par_chunks_mut(STAGE_PAR)
                .zip(piece.par_chunks(STAGE_PAR))
                .for_each(|(d, s)| d.copy_from_slice(s));
            // SAFETY: `host` is page-locked memory owned by `self.staging`, which outlives the
            // transfer: the host writes it again only after `done[j]` (recorded right after)
            // has completed, and every caller synchronizes the copy stream before returning
            // (so no transfer out of it is pending when the Gpu, and the buffers, are dropped).
            // The destination range lies inside a live device buffer of the caller's, ordered
            // against the main stream by the caller's events.
            unsafe {
                cudarc::driver::result::memcpy_htod_async(
                    dst + (k * self.stage_bytes) as u64,
                    host,
                    self.copy.cu_stream(),
                )
            }
            .ctx("cuMemcpyHtoDAsync")?;
            st.done[j] = Some(self.copy.record_event(None).ctx("cuEventRecord")?);
        }
        Ok(true)
    }

    /// Two device buffers of `slot_bytes` each that host memory streams through ([`Ring`]),
    /// ordered after the work issued so far (their allocation among it).
    pub fn ring(&self, slot_bytes: usize) -> Result<Ring, GpuError> {
        let slots = [self.alloc(slot_bytes)?, self.alloc(slot_bytes)?];
        Ok(Ring {
            slots,
            ready: self.stream.record_event(None).ctx("cuEventRecord")?,
            consumed: [None, None],
            next: 0,
        })
    }

    /// Streams host memory through `ring` in `pieces` pieces: piece k is `parts(k)`, host
    /// slices copied back to back into the ring's next slot on the copy stream, and once it is
    /// there `consume(k, view)` issues the work on it on the main stream (the view covers the
    /// piece's bytes). The copy of piece k + 1 is issued before the work on piece k, so it
    /// travels while that work runs; a slot is written again only after the work on its last
    /// piece (an event the copy stream waits for), and the first time only after the ring was
    /// made, not after later main-stream work: a ring made before a chain of work lets its
    /// copies overlap that work. From page-locked memory the copies are asynchronous; pageable
    /// parts go through the staging buffers. On return (also on error) no copy is in flight.
    pub fn stream<'s>(
        &self,
        ring: &mut Ring,
        pieces: usize,
        parts: impl FnMut(usize) -> Vec<&'s [u8]>,
        consume: impl FnMut(usize, DevView) -> Result<(), GpuError>,
    ) -> Result<(), GpuError> {
        self.stream_while(ring, 0..pieces, |_| true, parts, consume)
            .map(|_| ())
    }

    /// [`Gpu::stream`] of pieces `pieces.start..pieces.end` that can stop between two pieces:
    /// `go_on(k)` is asked before piece k's copy is issued (for every piece but the first),
    /// and where it says no, the work on the piece in hand is issued and the stream ends,
    /// returning k, the next piece to do (`pieces.end` when all are done). No copy is issued
    /// that is not worked on, and none is in flight on return, so the caller may let the
    /// device go and later go on from k through the same ring (its events still order the
    /// slots' reuse).
    pub fn stream_while<'s>(
        &self,
        ring: &mut Ring,
        pieces: std::ops::Range<usize>,
        go_on: impl FnMut(usize) -> bool,
        mut parts: impl FnMut(usize) -> Vec<&'s [u8]>,
        mut consume: impl FnMut(usize, DevView) -> Result<(), GpuError>,
    ) -> Result<usize, GpuError> {
        let fence = CopyFence {
            stream: &self.copy,
            armed: true,
        };
        let start = Instant::now();
        let (mut issuing, mut consuming, mut bytes) = (0.0, 0.0, 0usize);
        let first = pieces.start;
        let next = pipelined(
            ring,
            pieces,
            go_on,
            |ring, k| {
                let t = Instant::now();
                let issued = self.issue_piece(ring, k, &mut parts);
                issuing += t.elapsed().as_secs_f64();
                issued
            },
            |ring, k, (copied, view, j)| {
                bytes += view.len();
                self.stream.wait(&copied).ctx("cuStreamWaitEvent")?;
                let t = Instant::now();
                consume(k, view)?;
                consuming += t.elapsed().as_secs_f64();
                ring.consumed[j] = Some(self.stream.record_event(None).ctx("cuEventRecord")?);
                Ok(())
            },
        )?;
        let t = Instant::now();
        fence.finish()?;
        tracing::debug!(
            pieces = next - first,
            bytes,
            wall_ms = start.elapsed().as_secs_f64() * 1e3,
            issuing_ms = issuing * 1e3,
            consuming_ms = consuming * 1e3,
            fence_ms = t.elapsed().as_secs_f64() * 1e3,
            "stream through a ring"
        );
        Ok(next)
    }

    /// Issues the copy of piece `k` (the host slices `parts(k)`, back to back) into `ring`'s
    /// next slot on the copy stream, after the work on that slot's last piece: the event
    /// recorded after the copy, the view of the piece's bytes and the slot's index.
    fn issue_piece<'s>(
        &self,
        ring: &mut Ring,
        k: usize,
        parts: &mut impl FnMut(usize) -> Vec<&'s [u8]>,
    ) -> Result<(CudaEvent, DevView, usize), GpuError> {
        let j = ring.next;
        ring.next ^= 1;
        let after = ring.consumed[j].as_ref().unwrap_or(&ring.ready);
        self.copy.wait(after).ctx("cuStreamWaitEvent")?;
        let slot = &ring.slots[j];
        let mut at = 0usize;
        for part in parts(k) {
            if at + part.len() > slot.len() {
                return Err(GpuError::Input(format!(
                    "piece {k} of {} bytes or more for a slot of {}",
                    at + part.len(),
                    slot.len()
                )));
            }
            self.copy_to(slot.ptr() + at as u64, part)?;
            at += part.len();
        }
        let copied = self.copy.record_event(None).ctx("cuEventRecord")?;
        Ok((copied, slot.view().range(0..at)?, j))
    }

    /// Issues the copy of `src` to device address `dst` on the copy stream: through the staging
    /// buffers where `src` is pageable (and staging is on), else directly. The caller orders
    /// it against the main stream and keeps `src` alive until the copy stream is synchronized.
    fn copy_to(&self, dst: u64, src: &[u8]) -> Result<(), GpuError> {
        if src.is_empty() {
            return Ok(());
        }
        if self.needs_staging(src) && self.copy_staged(dst, src)? {
            return Ok(());
        }
        // SAFETY: `dst` lies inside a live device buffer of the caller's (checked against the
        // slot's length), ordered against the main stream by the caller's events; `src` stays
        // borrowed until the caller synchronizes the copy stream (Gpu::stream's fence).
        unsafe { cudarc::driver::result::memcpy_htod_async(dst, src, self.copy.cu_stream()) }
            .ctx("cuMemcpyHtoDAsync")
    }

    /// Issues the copy of the device view `src` to the host slice `dst` of the same length on
    /// the main stream, after all work issued so far, and returns without waiting for it.
    ///
    /// # Safety
    /// `dst` (page-locked, for the copy to be asynchronous) must not be read, written or freed
    /// until the main stream has passed this point: after a [`Gpu::sync`], or by work ordered
    /// after it (copies of a [`Ring`] made after this call).
    pub unsafe fn download_view_async(&self, src: DevView, dst: &mut [u8]) -> Result<(), GpuError> {
        if dst.len() != src.len() {
            return Err(GpuError::Input(format!(
                "download of a view of {} bytes into {}",
                src.len(),
                dst.len()
            )));
        }
        if dst.is_empty() {
            return Ok(());
        }
        // SAFETY: the view lies inside a live device buffer (its maker's promise); the caller
        // keeps `dst` untouched until the stream has passed the copy (this function's contract).
        unsafe { cudarc::driver::result::memcpy_dtoh_async(dst, src.ptr, self.stream.cu_stream()) }
            .ctx("cuMemcpyDtoHAsync")
    }

    /// Device-to-device copy of the view `src` into the start of `dst` (at least as long),
    /// in stream order.
    pub fn copy_view(&self, src: DevView, dst: DevView) -> Result<(), GpuError> {
        if src.len() > dst.len() {
            return Err(GpuError::Input(format!(
                "device copy of {} bytes into {}",
                src.len(),
                dst.len()
            )));
        }
        if src.is_empty() {
            return Ok(());
        }
        // SAFETY: both views lie inside live device buffers (their makers' promise), the
        // destination at least as long as the source; ordered on the main stream like every
        // other use of them.
        unsafe {
            cudarc::driver::result::memcpy_dtod_async(
                dst.ptr,
                src.ptr,
                src.len(),
                self.stream.cu_stream(),
            )
        }
        .ctx("cuMemcpyDtoDAsync")
    }

    /// Sets the bytes of `view` to zero, in stream order.
    pub fn zero_view(&self, view: DevView) -> Result<(), GpuError> {
        if view.is_empty() {
            return Ok(());
        }
        // SAFETY: the view lies inside a live device buffer (its maker's promise); the memset
        // is ordered on the main stream like every other use of it.
        unsafe {
            cudarc::driver::result::memset_d8_async(
                view.ptr,
                0,
                view.len(),
                self.stream.cu_stream(),
            )
        }
        .ctx("cuMemsetD8Async")
    }

    /// Copies the first `dst.len()` bytes of `src` to the host (synchronous).
    pub fn download(&self, src: &DevBuf, dst: &mut [u8]) -> Result<(), GpuError> {
        if dst.len() > src.len() {
            return Err(GpuError::Input(format!(
                "download of {} bytes from {}",
                dst.len(),
                src.len()
            )));
        }
        let view = src.slice.slice(0..dst.len());
        self.stream.memcpy_dtoh(&view, dst).ctx("cuMemcpyDtoH")?;
        self.sync()
    }

    /// Copies `dst.len()` bytes starting at byte `offset` of `src` to the host (synchronous).
    pub fn download_at(&self, src: &DevBuf, offset: usize, dst: &mut [u8]) -> Result<(), GpuError> {
        if offset + dst.len() > src.len() {
            return Err(GpuError::Input(format!(
                "download of {} bytes at {offset} from {}",
                dst.len(),
                src.len()
            )));
        }
        let view = src.slice.slice(offset..offset + dst.len());
        self.stream.memcpy_dtoh(&view, dst).ctx("cuMemcpyDtoH")?;
        self.sync()
    }

    /// Device-to-device copy of `bytes` bytes.
    pub fn copy(&self, src: &DevBuf, dst: &mut DevBuf, bytes: usize) -> Result<(), GpuError> {
        if bytes > src.len() || bytes > dst.len() {
            return Err(GpuError::Input("device copy out of bounds".into()));
        }
        let s = src.slice.slice(0..bytes);
        let mut d = dst.slice.slice_mut(0..bytes);
        self.stream.memcpy_dtod(&s, &mut d).ctx("cuMemcpyDtoD")
    }

    /// Copies `bytes` bytes inside `buf` from offset `src` to offset `dst` (ranges must not
    /// overlap); used to tile benchmark bases.
    pub fn copy_within(
        &self,
        buf: &mut DevBuf,
        src: usize,
        dst: usize,
        bytes: usize,
    ) -> Result<(), GpuError> {
        if src.max(dst) + bytes > buf.len() || (src < dst + bytes && dst < src + bytes) {
            return Err(GpuError::Input(
                "copy_within out of bounds or overlapping".into(),
            ));
        }
        // SAFETY: both ranges lie inside the live allocation and do not overlap (checked above);
        // the copy is ordered on our stream like every other use of the buffer.
        unsafe {
            cudarc::driver::result::memcpy_dtod_async(
                buf.ptr + dst as u64,
                buf.ptr + src as u64,
                bytes,
                self.stream.cu_stream(),
            )
        }
        .ctx("cuMemcpyDtoDAsync")
    }

    /// Sets `bytes` bytes from offset `from` to zero.
    pub fn zero_range(&self, buf: &mut DevBuf, from: usize, bytes: usize) -> Result<(), GpuError> {
        if bytes == 0 {
            return Ok(());
        }
        if from + bytes > buf.len() {
            return Err(GpuError::Input("memset out of bounds".into()));
        }
        let mut v = buf.slice.slice_mut(from..from + bytes);
        self.stream.memset_zeros(&mut v).ctx("cuMemsetD8")
    }

    /// Page-locked host buffer of `len` bytes (fast, asynchronous-capable transfers).
    pub fn pinned(&self, len: usize) -> Result<PinnedHostSlice<u8>, GpuError> {
        // SAFETY: the contents are uninitialised; callers fill it before use.
        unsafe { self.ctx.alloc_pinned::<u8>(len.max(1)) }.ctx("cuMemHostAlloc")
    }

    /// Waits for all work issued so far.
    pub fn sync(&self) -> Result<(), GpuError> {
        self.stream.synchronize().ctx("cuStreamSynchronize")
    }

    /// Launches kernel `k` on a 1-D grid with `args`, which must be of its parameters' types.
    pub fn launch(&self, k: &Kernel, grid: u64, block: u32, args: &[Arg]) -> Result<(), GpuError> {
        self.launch_smem(k, grid, block, 0, args)
    }

    /// As [`Gpu::launch`], with `smem` bytes of dynamic shared memory per block (at most 48 KiB,
    /// the limit without an opt-in attribute, or [`DeviceInfo::smem_optin`] for the kernels
    /// marked so in [`kernels`]).
    pub fn launch_smem(
        &self,
        k: &Kernel,
        grid: u64,
        block: u32,
        smem: u32,
        args: &[Arg],
    ) -> Result<(), GpuError> {
        k.check(args)?;
        if grid == 0 {
            return Ok(());
        }
        let name = k.name;
        let grid =
            u32::try_from(grid).map_err(|_| GpuError::Input(format!("{name}: grid too large")))?;
        let f = self
            .funcs
            .get(name)
            .ok_or_else(|| GpuError::Compile(format!("kernel {name} missing from the module")))?;
        let mut b = self.stream.launch_builder(f);
        for a in args {
            match a {
                Arg::Ptr(v) | Arg::U64(v) => b.arg(v),
                Arg::U32(v) => b.arg(v),
            };
        }
        let cfg = LaunchConfig {
            grid_dim: (grid, 1, 1),
            block_dim: (block, 1, 1),
            shared_mem_bytes: smem,
        };
        // SAFETY: the arguments have the kernel's parameter types (checked above against
        // kernels.rs, whose table a test checks against the declarations in cuda/), each
        // passed by a reference to a value of that size; the buffers they address outlive the
        // launch because a DevBuf's drop frees in stream order, after the kernel.
        unsafe { b.launch(cfg) }.ctx(name)?;
        Ok(())
    }
}

/// The device's PCI address, as `nvidia-smi` prints it (`0000:1b:00.0`).
fn pci_bus_id(ctx: &CudaContext) -> Result<String, GpuError> {
    let pci = |a, what| ctx.attribute(a).ctx(what);
    Ok(format!(
        "{:04x}:{:02x}:{:02x}.0",
        pci(
            CUdevice_attribute::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID,
            "PCI domain"
        )?,
        pci(
            CUdevice_attribute::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID,
            "PCI bus"
        )?,
        pci(
            CUdevice_attribute::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID,
            "PCI device"
        )?,
    ))
}

/// The kernels compiled (or taken from the cache) for `arch` and loaded into `ctx`, by name;
/// whether the cubin came from the cache; the opt-in shared memory per block, which the
/// kernels that want it are given.
fn load_kernels(
    ctx: &Arc<CudaContext>,
    arch: u32,
    driver_version: i32,
    options: &GpuOptions,
) -> Result<(HashMap<&'static str, CudaFunction>, bool, u32), GpuError> {
    let (bin, cached) = compile::cubin(
        arch,
        driver_version,
        options.kernel_cache.as_deref(),
        &options.nvrtc_defines,
    )?;
    let module = ctx
        .load_module(Ptx::from_binary(bin))
        .ctx("cuModuleLoadData")?;
    let smem_optin = ctx
        .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
        .ctx("shared memory limit")? as u32;
    let mut funcs = HashMap::new();
    for k in kernels::ALL {
        let f = module.load_function(k.name).ctx("cuModuleGetFunction")?;
        if k.smem_optin {
            f.set_attribute(
                CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                smem_optin as i32,
            )
            .ctx("cuFuncSetAttribute")?;
        }
        funcs.insert(k.name, f);
    }
    Ok((funcs, cached, smem_optin))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The staging budget is split between the two buffers; 0 turns staging off, and a tiny
    /// budget still gets buffers of one parallel piece.
    #[test]
    fn the_staging_budget_sizes_the_two_buffers() {
        assert_eq!(stage_bytes(0), 0);
        assert_eq!(stage_bytes(super::super::DEFAULT_STAGING_BYTES), 32 << 20);
        assert_eq!(stage_bytes(256 << 20), 128 << 20);
        assert_eq!(stage_bytes(1), STAGE_PAR);
    }

    /// What [`pipelined`] did over `pieces`, stopping where `stop` says: its steps in order
    /// ("i3" issued piece 3, "w3" worked on it) and the index it returned.
    fn steps(pieces: std::ops::Range<usize>, stop: &[usize]) -> (Vec<String>, usize) {
        let mut log = Vec::new();
        let next = pipelined(
            &mut log,
            pieces,
            |k| !stop.contains(&k),
            |log: &mut Vec<String>, k| {
                log.push(format!("i{k}"));
                Ok(k)
            },
            |log, k, issued| {
                assert_eq!(k, issued, "the work is on the piece issued for it");
                log.push(format!("w{k}"));
                Ok(())
            },
        )
        .unwrap();
        (log, next)
    }

    /// Piece k + 1 is issued before the work on piece k; a stop asked before piece k issues
    /// nothing more, finishes the piece in hand and returns k, from which a second stream goes
    /// on; every piece issued is worked on once.
    #[test]
    fn a_stream_issues_one_piece_ahead_and_stops_without_a_wasted_copy() {
        assert_eq!(
            steps(0..3, &[]),
            (
                ["i0", "i1", "w0", "i2", "w1", "w2"]
                    .map(String::from)
                    .to_vec(),
                3
            )
        );
        assert_eq!(
            steps(0..4, &[2]),
            (["i0", "i1", "w0", "w1"].map(String::from).to_vec(), 2)
        );
        // Going on from the stop: the first piece is never asked about.
        assert_eq!(
            steps(2..4, &[2]),
            (["i2", "i3", "w2", "w3"].map(String::from).to_vec(), 4)
        );
        assert_eq!(steps(0..4, &[1]).1, 1);
        assert_eq!(steps(3..3, &[]), (Vec::new(), 3));
        // Stopping before every piece still goes through all of them, one per stream.
        let mut at = 0;
        let mut streams = 0;
        while at < 5 {
            let (log, next) = steps(at..5, &[0, 1, 2, 3, 4]);
            assert_eq!(log, vec![format!("i{at}"), format!("w{at}")]);
            (at, streams) = (next, streams + 1);
        }
        assert_eq!(streams, 5);
    }

    /// An error from the work ends the stream with it, after no further issue.
    #[test]
    fn a_streams_error_ends_it() {
        let mut issued = 0;
        let r = pipelined(
            &mut issued,
            0..5,
            |_| true,
            |n: &mut usize, _| {
                *n += 1;
                Ok(())
            },
            |_, k, ()| match k {
                1 => Err(GpuError::Input("piece 1".into())),
                _ => Ok(()),
            },
        );
        assert!(r.is_err());
        assert_eq!(
            issued, 3,
            "pieces 0, 1 and 2 issued before the work on 1 failed"
        );
    }
}
