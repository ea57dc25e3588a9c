//! The stages every partition flows through, shared by all jobs: admission (a synthesis
//! permit and a reservation of host memory), synthesis (on the job's own scoped threads, so
//! that circuits may borrow the job's parsed input), and the device queue, which a fixed set
//! of device workers drains in rank order. Verification stays with the job, off the device
//! path.
//!
//! Ranks: a partition is ranked by its job's class (critical first), then the job's
//! submission order, then its index, at admission and in the device queue alike. Critical
//! partitions have a synthesis permit and a device worker of their own, so a WinningPoSt
//! waits neither for a synthesis slot nor for the device queue; their synthesis threads, and
//! the part threads of their own that a PoSt's runs of sector slots go to ([`PartPools`]),
//! keep the normal priority while high ones (WindowPoSt by default) run at nice +[`AHEAD_NICE`]
//! and the others at nice +[`BACKGROUND_NICE`], and they are proved
//! with the thread marked urgent ([`prover::urgency`]), so that a GPU gives them the next
//! turn and nobody else one until they are done. While one is in flight (admitted, not yet
//! through the device), the other partitions' synthesis pauses at its yield points
//! ([`CriticalClaim`], `proving.yield_to_critical`).
//!
//! Memory: a partition reserves its host bytes before synthesis (the shape's upper bound
//! from the parameters until a partition of that shape and [`Form`] was measured, then the
//! measurement) and releases them when the device worker has consumed the synthesized
//! partition. A partition synthesized against a recorded shape holds its assignment alone,
//! a quarter of one with its evaluations, and is sized apart from those.
//! Admission waits rather than exceeds `memory_budget` minus what the process holds besides
//! partitions ([`HeldBytes`]), and, where the daemon gave a probe of the process's resident
//! memory, rather than let that memory and the partitions being synthesized pass the budget
//! (`memory.rs`). A parameter load waits the same way for room for its upper bound.
//! A partition cut into parts reserves, beside its measured size, one part's copy of the
//! vector being copied while its parts are stitched (a 32 GiB partition in 16 parts: about
//! 0.26 GB over its 16.9 GB). Not counted: a vector's unused capacity, which is never
//! touched.

mod gate;
mod health;
mod memory;
mod placement;
pub mod sim;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bellperson::groth16::Proof;
use blstrs::Bls12;

use gate::{Gate, GateConfig, Key};
pub use gate::{CRITICAL, HIGH};
pub use health::{bounded, DeviceHealth, HealthPolicy, HealthState, MAX_ERROR};
use health::{Change, Health};
use memory::InFlight;
pub use memory::{HeldBytes, MemoryProbe};
pub(crate) use placement::{
    lower_this_thread, synthesis_nice, yield_to_critical, CriticalClaim, AHEAD_NICE,
    BACKGROUND_NICE,
};

use super::control::{catch_panic, report_to, Due, ProveError};
use super::progress::{ProgressSink, Step};
use crate::prover::{self, Backend, Partition, PinnedPool, PreparedSrs, WitnessPartition};
use crate::srs::{ParamsId, Srs};

/// The threads of partitions cut into parts: `parts` synthesizes the parts of normal and low
/// partitions (PoRep and SnapDeals by default) at nice +[`BACKGROUND_NICE`], first-in
/// first-out across partitions, and `stitch` copies them together; `ahead` and
/// `ahead_stitch` do the same for high ones (WindowPoSt by default, which has a deadline) at
/// nice +[`AHEAD_NICE`], so that those neither queue behind the others' parts nor get only
/// their share of the cores; `critical` and `critical_stitch` for critical ones (WinningPoSt)
/// at the daemon's own priority, idle but for them, so that a critical partition's parts
/// queue behind nothing: neither other partitions' parts nor the device workers' host work,
/// which runs on rayon's global pool. Stitches apart from parts, so that a stitch never waits
/// behind a part.
pub(crate) struct PartPools {
    parts: rayon::ThreadPool,
    stitch: rayon::ThreadPool,
    ahead: rayon::ThreadPool,
    ahead_stitch: rayon::ThreadPool,
    critical: rayon::ThreadPool,
    critical_stitch: rayon::ThreadPool,
}

/// The pools one partition's parts use ([`PartPools`]).
#[derive(Clone, Copy)]
pub(crate) struct PartThreads<'a> {
    pub parts: &'a rayon::ThreadPool,
    pub stitch: &'a rayon::ThreadPool,
}

impl PartPools {
    /// The pools, their threads at the calling thread's nice value plus theirs (they inherit
    /// its value and CPUs, so it must be neither lowered nor pinned: [`Stages::start`]'s).
    fn start(threads: usize) -> Result<Self, rayon::ThreadPoolBuildError> {
        let pool = |n: usize, name: &'static str, nice: i32| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(n)
                .thread_name(move |i| format!("cuzk-{name}-{i}"))
                .start_handler(move |_| lower_this_thread(nice))
                .build()
        };
        // Copying is bound by memory bandwidth: a few threads saturate it.
        let stitchers = threads.clamp(1, 4);
        Ok(Self {
            parts: pool(threads, "part", BACKGROUND_NICE)?,
            stitch: pool(stitchers, "stitch", BACKGROUND_NICE)?,
            ahead: pool(threads, "ahead", AHEAD_NICE)?,
            ahead_stitch: pool(stitchers, "ahead-stitch", AHEAD_NICE)?,
            critical: pool(threads, "critical", 0)?,
            critical_stitch: pool(stitchers, "critical-stitch", 0)?,
        })
    }

    /// The pools of a partition of `class`.
    fn of_class(&self, class: u8) -> PartThreads<'_> {
        let (parts, stitch) = match class {
            c if c >= CRITICAL => (&self.critical, &self.critical_stitch),
            c if c >= HIGH => (&self.ahead, &self.ahead_stitch),
            _ => (&self.parts, &self.stitch),
        };
        PartThreads { parts, stitch }
    }
}

/// The part pools for `threads` threads per partition: none for one.
fn start_part_pools(threads: usize) -> Option<PartPools> {
    if threads <= 1 {
        return None;
    }
    PartPools::start(threads)
        .map_err(|e| {
            tracing::warn!(error = %e, "cannot start the partition-part threads; partitions are synthesized whole");
        })
        .ok()
}

/// How the stages are sized.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PipelineOptions {
    /// Partitions synthesized at once (any class); critical partitions have one more.
    pub synthesis_threads: usize,
    /// Host bytes for resident parameters and partitions in flight together.
    pub memory_budget: u64,
    /// Partitions the device proves at once (any class); critical partitions have one more
    /// worker.
    pub device_workers: usize,
    /// Whether non-critical synthesis pauses while a critical partition is in flight.
    pub yield_to_critical: bool,
    /// Threads one non-critical partition's independent parts (PoRep's challenges) are
    /// synthesized on at once, from a pool of that many shared by all partitions; 1: every
    /// partition whole on its own thread.
    pub partition_threads: usize,
    /// Whether non-critical partitions record their circuit's shape once per parameter set
    /// and then synthesize their witness alone, A, B and C evaluated by the device worker.
    pub recorded_shapes: bool,
    /// When a failing device is quarantined, and for how long.
    pub health: HealthPolicy,
}

impl Default for PipelineOptions {
    /// One synthesis thread per CPU, all of them for one partition's parts, no memory limit,
    /// one device worker.
    fn default() -> Self {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        Self {
            synthesis_threads: cpus,
            memory_budget: u64::MAX,
            device_workers: 1,
            yield_to_critical: true,
            partition_threads: cpus,
            recorded_shapes: true,
            health: HealthPolicy::default(),
        }
    }
}

/// A proving device as the stages see it: what its workers are called, which partitions
/// they take, and where they run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceSpec {
    /// The backend's name (`"cuda:0 NVIDIA H200"`, `"cpu"`), for logs and Status.
    pub name: String,
    /// Whether the device proves critical partitions (it gets a worker of their own). A CPU
    /// beside GPUs does not: a WinningPoSt would wait for it far longer than for a GPU.
    pub critical: bool,
    /// CPUs its workers are pinned to (its GPU's NUMA node); empty: not pinned.
    pub cpus: Vec<usize>,
}

impl DeviceSpec {
    /// A device that takes every class of partition, its workers not pinned.
    pub fn any(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            critical: true,
            cpus: Vec::new(),
        }
    }
}

/// One device's share of the work since start.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeviceStats {
    /// The device's name.
    pub name: String,
    /// Partitions on it now.
    pub running: usize,
    /// Time it had at least one partition.
    pub busy: Duration,
    /// Partitions it proved.
    pub partitions_proved: u64,
    /// Partitions it failed (a device error or out of memory; a wrong result is counted in
    /// [`DeviceHealth::failures`]).
    pub partitions_failed: u64,
}

/// What the stages hold now, and counters since start.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PipelineStats {
    /// Partitions synthesized at once at most (besides the critical one).
    pub synthesis_threads: usize,
    /// Partitions waiting for admission to synthesis.
    pub waiting: usize,
    /// Partitions being synthesized.
    pub synthesizing: usize,
    /// Synthesized partitions waiting for the device.
    pub device_queued: usize,
    /// Partitions on the device.
    pub device_running: usize,
    /// Host bytes reserved by partitions in flight.
    pub reserved_bytes: u64,
    /// Host bytes held besides partitions: [`HeldBytes::total`] of `held`.
    pub params_bytes: u64,
    /// What is held besides partitions, by part.
    pub held: HeldBytes,
    /// The process's resident memory now, where the daemon gave a probe.
    pub process_bytes: Option<u64>,
    /// The budget (everything above and partitions).
    pub budget_bytes: u64,
    /// Time the device had at least one partition, since start.
    pub device_busy: Duration,
    /// Partitions proved since start.
    pub partitions_proved: u64,
    /// Sum of the partitions' synthesis times.
    pub synthesis_time: Duration,
    /// Sum of the partitions' waits in the device queue.
    pub device_wait: Duration,
    /// Sum of the partitions' device times.
    pub device_time: Duration,
    /// Sum of the bytes per partition measured after synthesis, and how many were measured.
    pub measured: (u64, u64),
    /// Partitions proved on the CPU prover because no usable device was left for them.
    pub fallback_proved: u64,
    /// Each device's share, in the order the devices were given.
    pub devices: Vec<DeviceStats>,
}

/// A stage of the pipeline, as a partition passes through it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Waiting for a synthesis thread and for host memory.
    Admission,
    /// Being synthesized.
    Synthesis,
    /// Waiting in the device queue.
    DeviceQueue,
    /// On the device.
    Device,
}

impl Stage {
    /// Lower-case name for traces and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Admission => "admission",
            Stage::Synthesis => "synthesis",
            Stage::DeviceQueue => "device_queue",
            Stage::Device => "device",
        }
    }
}

/// One partition's time in one stage, for a trace.
#[derive(Clone, Copy, Debug)]
pub struct StageSpan {
    /// The job's submission sequence number (its rank within a class).
    pub job: u64,
    /// The job's class (3: critical).
    pub class: u8,
    /// The partition.
    pub partition: usize,
    /// The stage.
    pub stage: Stage,
    /// The device that proved it (for the device stages; 0 before).
    pub device: usize,
    /// When the partition entered the stage.
    pub start: Instant,
    /// When it left.
    pub end: Instant,
}

/// Receives every [`StageSpan`], on the thread that ends it; must not block for long.
pub type SpanObserver = Arc<dyn Fn(&StageSpan) + Send + Sync>;

/// One job's stake in the stages: its rank and whether it was stopped.
pub(crate) struct JobRun {
    class: u8,
    due: Due,
    seq: u64,
    stopped: AtomicBool,
    /// Where the job's steps are reported (its `JobControl`'s sink), if anywhere.
    progress: Option<ProgressSink>,
}

impl JobRun {
    #[cfg(test)]
    pub(crate) fn new(class: u8, seq: u64) -> Arc<Self> {
        Self::due(class, Due::Never, seq, None)
    }
    /// A run of a job due at `due` ([`Key`]'s order), its device steps reported to
    /// `progress`.
    pub(crate) fn due(class: u8, due: Due, seq: u64, progress: Option<ProgressSink>) -> Arc<Self> {
        Arc::new(Self {
            class,
            due,
            seq,
            stopped: AtomicBool::new(false),
            progress,
        })
    }
    /// Reports a step of partition `partition` where the job has a sink.
    fn report(&self, step: Step, partition: usize, took: Duration) {
        if let Some(sink) = &self.progress {
            report_to(sink, step, Some(partition), took);
        }
    }
    fn key(&self, partition: usize) -> Key {
        Key::new(self.class, self.seq, partition).due(self.due)
    }
    pub(crate) fn class(&self) -> u8 {
        self.class
    }
    pub(crate) fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }
}

/// A partition's result from the device, with its stage times.
pub(crate) struct PartitionDone {
    pub partition: usize,
    pub result: Result<Proof<Bls12>, ProveError>,
    pub synthesis: Duration,
    pub device_wait: Duration,
    pub device: Duration,
    /// The device that proved it or failed it; `None`: the CPU prover, or it never reached
    /// a device.
    pub on: Option<usize>,
    /// Where a retry's result goes, for a partition a device failed
    /// ([`is_device_fault`]): the job may prove it again elsewhere.
    pub resend: Option<std::sync::mpsc::Sender<PartitionDone>>,
}

impl PartitionDone {
    /// A partition that failed before it reached the device.
    pub(crate) fn failed(partition: usize, e: ProveError, synthesis: Duration) -> Self {
        Self {
            partition,
            result: Err(e),
            synthesis,
            device_wait: Duration::ZERO,
            device: Duration::ZERO,
            on: None,
            resend: None,
        }
    }
}

/// `text` escaped and cut for a log line.
pub(crate) fn bounded_text(text: &str) -> String {
    health::bounded(text, MAX_ERROR)
}

/// Whether `e` is a device's failure (an error or out of memory of its backend) that another
/// device may not have: the partition is proved again elsewhere, and the device's health
/// counts it.
pub(crate) fn is_device_fault(e: &ProveError) -> bool {
    matches!(
        e,
        ProveError::Backend(prover::ProverError::Device(_) | prover::ProverError::OutOfMemory(_))
    )
}

/// A synthesized partition as the device queue holds it.
pub(crate) enum Staged {
    /// A, B, C evaluated, with the assignment.
    Evaluated(Partition),
    /// The assignment and its circuit's shape: A, B and C are evaluated when a device
    /// worker takes it, so that a partition waiting for the device holds its assignment
    /// alone.
    Witness(WitnessPartition),
}

/// What a synthesized partition holds on the host, for its reservation: its evaluations
/// and assignment, or (against a recorded shape) its assignment alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Form {
    Evaluated,
    Witness,
}

impl Staged {
    /// Which of the two it is.
    pub(crate) fn form(&self) -> Form {
        match self {
            Staged::Evaluated(_) => Form::Evaluated,
            Staged::Witness(_) => Form::Witness,
        }
    }

    /// Host bytes it holds now.
    pub(crate) fn host_bytes(&self) -> u64 {
        match self {
            Staged::Evaluated(p) => p.host_bytes(),
            Staged::Witness(w) => w.host_bytes(),
        }
    }
}

/// A synthesized partition on its way to the device.
pub(crate) struct Handover {
    pub job: Arc<JobRun>,
    pub partition: usize,
    pub synthesized: Staged,
    /// How long its synthesis took.
    pub synthesis: Duration,
    /// What the device does with it.
    pub work: Arc<dyn DeviceWork>,
    /// Where its result goes.
    pub reply: std::sync::mpsc::Sender<PartitionDone>,
    /// A critical partition's claim on the host, held until its device stage ends.
    pub claim: Option<CriticalClaim>,
    /// A critical partition's announcement to the device ([`prover::urgency::expect`]),
    /// withdrawn when its device stage ends.
    pub expected: Option<prover::urgency::Expectation>,
    /// Devices that must not prove it (they failed it, or its job): where no other usable
    /// device is left, the CPU prover does.
    pub avoid: Vec<usize>,
}

/// What a device worker does with a synthesized partition: the prover over a prepared
/// parameter set ([`Prepared`]), or a fake in tests.
pub(crate) trait DeviceWork: Send + Sync {
    /// Proves `synthesized` on device `device` (an index into the devices the stages were
    /// started with).
    fn prove(&self, device: usize, synthesized: Staged) -> Result<Proof<Bls12>, ProveError>;

    /// Proves `synthesized` on the CPU prover the stages fall back to where no usable device
    /// is left for it.
    fn prove_fallback(&self, synthesized: Staged) -> Result<Proof<Bls12>, ProveError> {
        drop(synthesized);
        Err(ProveError::Backend(prover::ProverError::Device(
            "no usable device and no CPU prover to fall back to".into(),
        )))
    }
}

/// A parameter set prepared by every device's backend, as device work, and where a
/// witness partition's evaluations are made.
pub(crate) struct Prepared {
    /// The parameter set on each device.
    pub set: PreparedSet,
    /// Page-locked blocks the evaluations go to where it has room.
    pub pinned: Option<Arc<PinnedPool>>,
    /// The threads that evaluate A, B and C (at normal priority: the device waits for
    /// them).
    pub evaluate: Option<Arc<rayon::ThreadPool>>,
    /// The CPU prover partitions fall back to, and the set prepared on it when first needed.
    pub fallback: Arc<dyn Backend>,
    pub fallback_set: std::sync::OnceLock<Arc<dyn PreparedSrs>>,
}

/// A parameter set prepared on each device, in the devices' order.
pub type PreparedSet = Arc<[Arc<dyn PreparedSrs>]>;

impl DeviceWork for Prepared {
    fn prove(&self, device: usize, synthesized: Staged) -> Result<Proof<Bls12>, ProveError> {
        let prepared = self.set.get(device).ok_or_else(|| {
            ProveError::Backend(prover::ProverError::Device(
                format!("no device {device} among {}", self.set.len()).into(),
            ))
        })?;
        self.prove_on(prepared, synthesized)
    }

    fn prove_fallback(&self, synthesized: Staged) -> Result<Proof<Bls12>, ProveError> {
        let prepared = match self.fallback_set.get() {
            Some(p) => p.clone(),
            None => {
                let srs = self.set.first().map(|p| p.srs().clone()).ok_or_else(|| {
                    ProveError::Backend(prover::ProverError::Device(
                        "no parameter set to fall back with".into(),
                    ))
                })?;
                let p = self.fallback.prepare(srs)?;
                self.fallback_set.get_or_init(|| p).clone()
            }
        };
        self.prove_on(&prepared, synthesized)
    }
}

impl Prepared {
    fn prove_on(
        &self,
        prepared: &Arc<dyn PreparedSrs>,
        synthesized: Staged,
    ) -> Result<Proof<Bls12>, ProveError> {
        let partition = match synthesized {
            Staged::Evaluated(p) => p,
            // The device evaluates A, B and C itself, from its copy of the shape.
            Staged::Witness(w) if prepared.evaluates_shapes() => {
                return prover::prove_witness(prepared.as_ref(), w)
                    .map(|(proof, _)| proof)
                    .map_err(ProveError::from);
            }
            Staged::Witness(w) => {
                let pinned = self.pinned.as_deref();
                let evaluate = || w.evaluate(pinned);
                match &self.evaluate {
                    Some(pool) => pool.install(evaluate),
                    None => evaluate(),
                }
                .map_err(|e| ProveError::Synthesis(format!("evaluating A, B, C: {e}")))?
            }
        };
        prover::prove(prepared.as_ref(), partition)
            .map(|(proof, _)| proof)
            .map_err(ProveError::from)
    }
}

struct DeviceItem {
    /// Dropped with the item: after its device stage, or when it is dropped unproved.
    _claim: Option<CriticalClaim>,
    _expected: Option<prover::urgency::Expectation>,
    /// Devices that must not prove it.
    avoid: Vec<usize>,
    synthesized: Staged,
    work: Arc<dyn DeviceWork>,
    job: Arc<JobRun>,
    reply: std::sync::mpsc::Sender<PartitionDone>,
    synthesis: Duration,
    queued_at: Instant,
}

#[derive(Default)]
struct Busy {
    running: usize,
    since: Option<Instant>,
    total: Duration,
}

impl Busy {
    fn start(&mut self, now: Instant) {
        if self.running == 0 {
            self.since = Some(now);
        }
        self.running += 1;
    }
    fn end(&mut self, now: Instant) {
        self.running = self.running.saturating_sub(1);
        if self.running == 0 {
            if let Some(s) = self.since.take() {
                self.total += now.saturating_duration_since(s);
            }
        }
    }
    fn total(&self, now: Instant) -> Duration {
        self.total
            + self
                .since
                .map_or(Duration::ZERO, |s| now.saturating_duration_since(s))
    }
}

/// One device's counters and its workers' availability, for spreading partitions.
#[derive(Default)]
struct DeviceState {
    /// Whether it takes critical partitions (an accelerator, or any device where there is
    /// none): such a device goes before the others for every partition.
    critical: bool,
    busy: Busy,
    proved: u64,
    failed: u64,
    /// General (not critical-only) workers waiting for a partition now.
    idle_general: usize,
    /// When one of its workers last took a partition.
    last_start: Option<Instant>,
}

impl DeviceState {
    /// Whether this device should have the next non-critical partition before a general
    /// worker of `other`: it has an idle general worker, and it is an accelerator where
    /// `other` is not, or of the same kind and has gone longer without new work. Partitions
    /// then rotate over idle GPUs (a CPU device gets one only while no GPU is idle) rather
    /// than going to whichever worker wakes first. A strict order: of the idle devices
    /// exactly one goes before all others.
    fn goes_before(&self, other: &DeviceState) -> bool {
        if self.idle_general == 0 {
            return false;
        }
        if self.critical != other.critical {
            return self.critical;
        }
        match (self.last_start, other.last_start) {
            (None, Some(_)) => true,
            (Some(a), Some(b)) => a < b,
            _ => false,
        }
    }
}

struct State {
    gate: Gate,
    queue: BTreeMap<Key, DeviceItem>,
    /// Any device busy (the pipeline's device busy time).
    busy: Busy,
    /// Each device's busy time, partitions proved and idle workers.
    devices: Vec<DeviceState>,
    /// Largest measured host bytes per parameter set's partitions, per form.
    measured: HashMap<(ParamsId, Form), u64>,
    /// The last synthesis time of a critical partition, per parameter set: when the next
    /// one is expected on the device.
    critical_synthesis: HashMap<ParamsId, Duration>,
    stats: PipelineStats,
    stopping: bool,
    /// Which devices take partitions.
    health: Health,
    /// What the process holds besides partitions.
    held: HeldBytes,
    /// Of `held.loading`, the loads still waiting for room (they keep partitions from taking
    /// it, but not each other: the first that fits goes).
    waiting_loads: u64,
}

struct Inner {
    state: Mutex<State>,
    /// Admission changed (a permit or bytes freed, a job withdrawn).
    admit: Condvar,
    /// The device queue changed.
    device: Condvar,
    budget: u64,
    /// [`PipelineOptions::yield_to_critical`].
    yield_to_critical: bool,
    /// [`PipelineOptions::partition_threads`].
    partition_threads: usize,
    /// The threads partitions' parts are synthesized and stitched on, made by
    /// [`Stages::start`] so that they inherit its thread's nice value and CPUs, not those of a
    /// lowered, pinned synthesis thread (raising a nice value needs a privilege the daemon
    /// drops). `None`: one thread per partition, or they could not be started (partitions
    /// are synthesized whole).
    parts_pool: Option<PartPools>,
    /// The process's resident memory, where the daemon gave a probe.
    probe: std::sync::OnceLock<MemoryProbe>,
    observer: std::sync::OnceLock<SpanObserver>,
    /// Bumped when a device enters or leaves quarantine ([`Stages::health_changes`]): what
    /// the daemon's status line says changes with it, between job changes.
    health_changes: tokio::sync::watch::Sender<u64>,
}

impl Inner {
    /// Says that a device's quarantine began or ended (after the state changed).
    fn health_changed(&self) {
        self.health_changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Reports that partition `partition` of `job` spent `start..end` in `stage`.
    fn span(&self, job: &JobRun, partition: usize, stage: Stage, start: Instant, end: Instant) {
        self.span_on(job, partition, stage, 0, start, end);
    }

    /// [`Inner::span`] of a device stage, on device `device`.
    fn span_on(
        &self,
        job: &JobRun,
        partition: usize,
        stage: Stage,
        device: usize,
        start: Instant,
        end: Instant,
    ) {
        if let Some(observe) = self.observer.get() {
            let span = StageSpan {
                job: job.seq,
                class: job.class,
                partition,
                stage,
                device,
                start,
                end,
            };
            // A trace must not take a stage down with it.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| observe(&span)));
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// What partitions may reserve in all beside what stays held (loads are passing: the
    /// set they make counts once loaded): a partition or a load past it can never fit until
    /// something resident is dropped.
    fn capacity(&self, st: &State) -> u64 {
        let resident = HeldBytes {
            loading: 0,
            ..st.held
        };
        self.budget.saturating_sub(resident.total())
    }

    fn rss(&self) -> Option<u64> {
        self.probe.get().and_then(|probe| probe())
    }

    fn in_flight(st: &State) -> InFlight {
        let synthesized = st.gate.synthesized_bytes();
        InFlight {
            synthesizing: st.gate.reserved().saturating_sub(synthesized),
            synthesized,
        }
    }

    /// What partitions may reserve in all now: [`Inner::capacity`], and the process's
    /// measured memory (`memory::partition_capacity`).
    fn grant_capacity(&self, st: &State) -> u64 {
        memory::partition_capacity(
            self.budget,
            st.held.total(),
            self.rss(),
            Self::in_flight(st),
        )
    }

    /// Waits on the admission condition: with a probe, at most [`MEMORY_POLL`], since freed
    /// memory may leave the process's RSS after the wake-up that freed it.
    fn wait_admit<'a>(&self, st: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        if self.probe.get().is_some() {
            self.admit
                .wait_timeout(st, MEMORY_POLL)
                .unwrap_or_else(PoisonError::into_inner)
                .0
        } else {
            self.admit.wait(st).unwrap_or_else(PoisonError::into_inner)
        }
    }

    /// Drops the job's waiting and queued partitions (answering the queued ones
    /// "cancelled") and wakes its waiters.
    fn stop_job(&self, job: &JobRun) {
        job.stopped.store(true, Ordering::SeqCst);
        let mut st = self.lock();
        st.gate.withdraw_job(job.seq);
        let keys: Vec<Key> = st
            .queue
            .keys()
            .filter(|k| k.seq() == job.seq)
            .copied()
            .collect();
        let mut dropped = Vec::with_capacity(keys.len());
        for k in keys {
            if let Some(item) = st.queue.remove(&k) {
                st.gate.release(&k);
                dropped.push((k, item));
            }
        }
        drop(st);
        self.admit.notify_all();
        // Freeing synthesized partitions (gigabytes each at 32 GiB) happens outside the lock.
        for (k, item) in dropped {
            let _ = item.reply.send(PartitionDone::failed(
                k.partition(),
                ProveError::Cancelled,
                item.synthesis,
            ));
        }
    }
}

/// How long an admission or a load waiting for memory sleeps at most between looks at the
/// process's resident memory.
const MEMORY_POLL: Duration = Duration::from_millis(50);

/// Host memory held for a parameter load ([`Stages::reserve_load`]), until dropped: after
/// the loaded set counts among the resident ones.
pub(crate) struct LoadReservation {
    inner: Arc<Inner>,
    bytes: u64,
}

impl Drop for LoadReservation {
    fn drop(&mut self) {
        let mut st = self.inner.lock();
        st.held.loading = st.held.loading.saturating_sub(self.bytes);
        drop(st);
        self.inner.admit.notify_all();
    }
}

/// The shared stages, with their device workers. Dropping it stops the workers once the
/// device queue is empty (the daemon cancels running jobs first, which empties it).
pub struct Stages {
    inner: Arc<Inner>,
    workers: Vec<JoinHandle<()>>,
}

impl Stages {
    /// Starts `options.device_workers` workers per device of `devices`, and one for critical
    /// partitions on each device that takes them. With no device given, one unnamed device.
    pub fn start(options: &PipelineOptions, devices: &[DeviceSpec]) -> std::io::Result<Self> {
        let one = [DeviceSpec::any("device")];
        let devices = if devices.is_empty() {
            &one[..]
        } else {
            devices
        };
        // Where no device takes critical partitions, every one does: they must go somewhere.
        let any_critical = devices.iter().any(|d| d.critical);
        let inner = Arc::new(Inner {
            state: Mutex::new(State {
                gate: Gate::new(GateConfig {
                    permits: options.synthesis_threads.max(1),
                    critical_permits: 1,
                }),
                queue: BTreeMap::new(),
                busy: Busy::default(),
                devices: devices
                    .iter()
                    .map(|d| DeviceState {
                        critical: d.critical || !any_critical,
                        ..DeviceState::default()
                    })
                    .collect(),
                measured: HashMap::new(),
                critical_synthesis: HashMap::new(),
                stats: PipelineStats {
                    synthesis_threads: options.synthesis_threads.max(1),
                    budget_bytes: options.memory_budget,
                    devices: devices
                        .iter()
                        .map(|d| DeviceStats {
                            name: d.name.clone(),
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                },
                stopping: false,
                health: Health::new(options.health, devices.len()),
                held: HeldBytes::default(),
                waiting_loads: 0,
            }),
            admit: Condvar::new(),
            device: Condvar::new(),
            budget: options.memory_budget,
            yield_to_critical: options.yield_to_critical,
            partition_threads: options.partition_threads.max(1),
            parts_pool: start_part_pools(options.partition_threads),
            probe: std::sync::OnceLock::new(),
            observer: std::sync::OnceLock::new(),
            health_changes: tokio::sync::watch::Sender::new(0),
        });
        let mut lanes = Vec::new();
        for (d, spec) in devices.iter().enumerate() {
            let critical = spec.critical || !any_critical;
            let general = if critical {
                Lane::Any
            } else {
                Lane::NonCritical
            };
            for i in 0..options.device_workers.max(1) {
                lanes.push((format!("cuzk-dev{d}-{i}"), d, general));
            }
            if critical {
                lanes.push((format!("cuzk-dev{d}-crit"), d, Lane::CriticalOnly));
            }
        }
        let workers = lanes
            .into_iter()
            .map(|(name, device, lane)| {
                let inner = inner.clone();
                let cpus = devices[device].cpus.clone();
                std::thread::Builder::new().name(name).spawn(move || {
                    if !cpus.is_empty() {
                        placement::pin_this_thread(&cpus);
                    }
                    device_loop(&inner, device, lane)
                })
            })
            .collect::<std::io::Result<Vec<_>>>()?;
        Ok(Self { inner, workers })
    }

    /// Sends every partition's stage times to `observer` from now on (a trace). Only the
    /// first observer set is kept; returns whether this one was.
    pub fn observe(&self, observer: SpanObserver) -> bool {
        self.inner.observer.set(observer).is_ok()
    }

    /// Records what the resident parameter sets hold (they count against the budget):
    /// `set` changes the parts it knows of, and leaves loads and the process's base alone.
    pub(crate) fn set_held(&self, set: impl FnOnce(&mut HeldBytes)) {
        // Under the lock: a waiter between its check and its wait would miss the wake-up.
        let mut st = self.inner.lock();
        set(&mut st.held);
        drop(st);
        self.inner.admit.notify_all();
    }

    /// Measures the process's memory with `probe` from now on: admission and parameter loads
    /// wait for the process's resident memory too, and what it holds now (before any
    /// parameters or partitions) counts as its base. Only the first probe set is kept;
    /// returns whether this one was.
    pub fn measure_with(&self, probe: MemoryProbe) -> bool {
        let base = probe().unwrap_or(0);
        if self.inner.probe.set(probe).is_err() {
            return false;
        }
        self.set_held(|h| h.process_base = base);
        true
    }

    /// Waits until a parameter load of `bytes` (its upper bound) fits the budget beside
    /// everything held and reserved, then holds them until the reservation is dropped. While
    /// it waits, its bytes count already, so that partitions admitted after it do not take
    /// the room it waits for. An error when it can never fit: what is held besides
    /// partitions (other sets included) leaves less than `bytes`.
    pub(crate) fn reserve_load(&self, bytes: u64) -> Result<LoadReservation, ProveError> {
        let mut st = self.inner.lock();
        let never = |st: &State| {
            let available = self.inner.capacity(st);
            (bytes > available).then_some(ProveError::ParamsExceedMemoryBudget {
                needed: bytes,
                available,
            })
        };
        if let Some(e) = never(&st) {
            return Err(e);
        }
        st.held.loading = st.held.loading.saturating_add(bytes);
        st.waiting_loads = st.waiting_loads.saturating_add(bytes);
        let reservation = LoadReservation {
            inner: self.inner.clone(),
            bytes,
        };
        loop {
            let held = st.held.total().saturating_sub(st.waiting_loads);
            let in_flight = Inner::in_flight(&st);
            let rss = self.inner.rss();
            let fits = memory::load_fits(self.inner.budget, held, rss, in_flight, bytes);
            // Another set or shape may have taken the room for good meanwhile.
            let never = if fits { None } else { never(&st) };
            if fits || never.is_some() {
                st.waiting_loads = st.waiting_loads.saturating_sub(bytes);
            }
            if fits {
                return Ok(reservation);
            }
            if let Some(e) = never {
                drop(st);
                drop(reservation);
                return Err(e);
            }
            st = self.inner.wait_admit(st);
        }
    }

    /// Whether non-critical synthesis pauses while a critical partition is in flight.
    pub(crate) fn yields_to_critical(&self) -> bool {
        self.inner.yield_to_critical
    }

    /// The pools a partition of `class` synthesizes and stitches its parts on (critical ones
    /// on pools of their own: [`PartPools`]), and how many parts it should be cut into;
    /// `None` where it is synthesized whole on its own thread: a configuration of one thread
    /// per partition, or pools that failed to start.
    pub(crate) fn parts_pool(&self, class: u8) -> Option<(PartThreads<'_>, usize)> {
        let threads = self.inner.partition_threads;
        if threads <= 1 {
            return None;
        }
        self.inner
            .parts_pool
            .as_ref()
            .map(|pools| (pools.of_class(class), threads))
    }

    /// What the stages hold now.
    pub fn stats(&self) -> PipelineStats {
        let now = Instant::now();
        let st = self.inner.lock();
        PipelineStats {
            waiting: st.gate.waiting(),
            synthesizing: st.gate.synthesizing(),
            device_queued: st.queue.len(),
            device_running: st.busy.running,
            reserved_bytes: st.gate.reserved(),
            params_bytes: st.held.total(),
            held: st.held,
            process_bytes: self.inner.rss(),
            device_busy: st.busy.total(now),
            devices: st
                .stats
                .devices
                .iter()
                .zip(&st.devices)
                .map(|(d, s)| DeviceStats {
                    name: d.name.clone(),
                    running: s.busy.running,
                    busy: s.busy.total(now),
                    partitions_proved: s.proved,
                    partitions_failed: s.failed,
                })
                .collect(),
            ..st.stats.clone()
        }
    }

    /// A receiver that changes whenever a device is quarantined (again, after a failed
    /// probe, too) or released: [`Stages::health`] then says something new.
    pub fn health_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.inner.health_changes.subscribe()
    }

    /// Every device's health: whether it takes partitions, its failures, its quarantine.
    pub fn health(&self) -> Vec<DeviceHealth> {
        let st = self.inner.lock();
        let names: Vec<String> = st.stats.devices.iter().map(|d| d.name.clone()).collect();
        st.health.report(&names, Instant::now())
    }

    /// Counts a failure of each of `devices` that the partitions' own results did not show:
    /// a job whose proof they made failed verification and then verified without them.
    pub(crate) fn devices_failed(&self, devices: &[usize], error: &str) {
        let changes: Vec<(String, Change)> = {
            let mut st = self.inner.lock();
            let now = Instant::now();
            devices
                .iter()
                .filter_map(|&d| {
                    let change = st.health.failed(d, now, error)?;
                    let name = st.stats.devices.get(d).map(|s| s.name.clone())?;
                    Some((name, change))
                })
                .collect()
        };
        if !changes.is_empty() {
            self.inner.device.notify_all();
            self.inner.health_changed();
        }
        for (name, change) in changes {
            log_change(&name, change, error);
        }
    }

    /// Host bytes a partition of the parameter set `id` in `form` reserves: the largest
    /// measured so far in that form, else an upper bound from the set's shape. A measured
    /// size is what a partition holds once synthesized; one cut into `n` parts also holds,
    /// while its parts are stitched, one part's copy of the vector being copied beside the
    /// stitched one: an `n`th more.
    pub(crate) fn partition_bytes(&self, id: &ParamsId, srs: &Srs, form: Form) -> u64 {
        match self.measured(id, form) {
            Some(m) => stitched_bytes(m, self.inner.partition_threads),
            None => match form {
                Form::Evaluated => shape_bound(srs),
                Form::Witness => witness_bound(srs),
            },
        }
    }

    /// How long the last critical partition of the parameter set `id` took to synthesize,
    /// if one did.
    pub(crate) fn critical_synthesis(&self, id: &ParamsId) -> Option<Duration> {
        self.inner.lock().critical_synthesis.get(id).copied()
    }

    /// The largest host bytes measured of a partition of the parameter set `id` in `form`.
    fn measured(&self, id: &ParamsId, form: Form) -> Option<u64> {
        self.inner.lock().measured.get(&(id.clone(), form)).copied()
    }

    /// A callback that stops `job`'s partitions, for [`JobControl`](super::control::JobControl)'s cancel.
    pub(crate) fn stopper(&self, job: &Arc<JobRun>) -> Box<dyn Fn() + Send + Sync> {
        let inner: Weak<Inner> = Arc::downgrade(&self.inner);
        let job = job.clone();
        Box::new(move || {
            if let Some(inner) = inner.upgrade() {
                inner.stop_job(&job);
            }
        })
    }

    /// Stops `job`'s partitions: waiting and queued ones are dropped.
    pub(crate) fn stop(&self, job: &JobRun) {
        self.inner.stop_job(job);
    }

    /// Waits until partition `partition` of `job` may be synthesized with `bytes` reserved.
    /// Returns false when the job was stopped first, and an error when the partition can no
    /// longer fit at all (the resident parameters or the memory held back for critical work
    /// grew): waiting would hold up every partition ranked behind it.
    pub(crate) fn admit(
        &self,
        job: &JobRun,
        partition: usize,
        bytes: u64,
    ) -> Result<bool, ProveError> {
        let key = job.key(partition);
        let start = Instant::now();
        let mut st = self.inner.lock();
        if job.is_stopped() {
            return Ok(false);
        }
        st.gate.wait(key, bytes);
        loop {
            let capacity = self.inner.capacity(&st);
            if !st.gate.is_granted(&key) && !st.gate.can_fit(job.class, bytes, capacity) {
                st.gate.withdraw(&key);
                drop(st);
                self.inner.admit.notify_all();
                return Err(ProveError::ExceedsMemoryBudget {
                    needed: bytes,
                    available: capacity,
                });
            }
            let room = self.inner.grant_capacity(&st);
            if !st.gate.grant(room).is_empty() {
                self.inner.admit.notify_all();
            }
            if st.gate.is_granted(&key) {
                drop(st);
                let now = Instant::now();
                self.inner
                    .span(job, partition, Stage::Admission, start, now);
                return Ok(true);
            }
            if job.is_stopped() {
                st.gate.withdraw(&key);
                return Ok(false);
            }
            st = self.inner.wait_admit(st);
        }
    }

    /// Synthesis of an admitted partition failed: its permit and bytes are free again.
    pub(crate) fn abandon(&self, job: &JobRun, partition: usize) {
        self.inner.lock().gate.release(&job.key(partition));
        self.inner.admit.notify_all();
    }

    /// Hands a synthesized partition to the device queue; its result comes back on
    /// `to.reply`. `id` names the circuit shape whose measured size it updates.
    pub(crate) fn to_device(&self, id: &ParamsId, to: Handover) {
        let Handover {
            job,
            partition,
            synthesized,
            synthesis,
            work,
            reply,
            claim,
            expected,
            avoid,
        } = to;
        let key = job.key(partition);
        let bytes = synthesized.host_bytes();
        let form = synthesized.form();
        let now = Instant::now();
        let began = now.checked_sub(synthesis).unwrap_or(now);
        let mut st = self.inner.lock();
        st.gate.synthesized(&key, bytes);
        let m = st.measured.entry((id.clone(), form)).or_insert(0);
        *m = (*m).max(bytes);
        st.stats.measured.0 += bytes;
        st.stats.measured.1 += 1;
        st.stats.synthesis_time += synthesis;
        if key.class() >= CRITICAL {
            st.critical_synthesis.insert(id.clone(), synthesis);
        }
        if job.is_stopped() || st.stopping {
            st.gate.release(&key);
            drop(st);
            self.inner.admit.notify_all();
            self.inner
                .span(&job, partition, Stage::Synthesis, began, now);
            let _ = reply.send(PartitionDone::failed(
                partition,
                ProveError::Cancelled,
                synthesis,
            ));
            return;
        }
        let traced = job.clone();
        st.queue.insert(
            key,
            DeviceItem {
                _claim: claim,
                _expected: expected,
                avoid,
                synthesized,
                work,
                job,
                reply,
                synthesis,
                queued_at: Instant::now(),
            },
        );
        drop(st);
        // The permit is free: admission may go on. Every device worker: the one woken must
        // be one whose lane takes the partition.
        self.inner.admit.notify_all();
        self.inner.device.notify_all();
        self.inner
            .span(&traced, partition, Stage::Synthesis, began, now);
    }
}

impl Drop for Stages {
    fn drop(&mut self) {
        self.inner.lock().stopping = true;
        self.inner.device.notify_all();
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

/// Which partitions a device worker takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lane {
    /// The best queued one, whatever its class.
    Any,
    /// Only critical ones: the worker that keeps a WinningPoSt out of the device queue.
    CriticalOnly,
    /// The best queued one that is not critical (a CPU beside GPUs).
    NonCritical,
}

/// Where a device worker proves the partition it took.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Route {
    /// On its device; `probe`: as its quarantine's probe.
    Device { probe: bool },
    /// On the CPU prover: no usable device is left for the partition.
    Fallback,
}

/// What a device worker finds in the queue.
enum Next {
    /// A partition for it, and where to prove it.
    Take(Key, Box<DeviceItem>, Route),
    /// A partition it could take, left to a device that goes first
    /// ([`DeviceState::goes_before`]) or is due for its probe.
    Defer,
    /// Nothing for its lane.
    Nothing,
}

/// Whether a worker of `lane` takes partitions ranked `key`.
fn lane_takes(lane: Lane, key: &Key) -> bool {
    match lane {
        Lane::Any => true,
        Lane::CriticalOnly => key.class() >= CRITICAL,
        Lane::NonCritical => key.class() < CRITICAL,
    }
}

/// Whether a healthy device not in `avoid` is left that takes partitions ranked `key`.
fn any_usable(st: &State, key: &Key, avoid: &[usize]) -> bool {
    st.devices.iter().enumerate().any(|(d, s)| {
        st.health.usable(d) && !avoid.contains(&d) && (key.class() < CRITICAL || s.critical)
    })
}

/// Takes the best queued partition this worker's lane may run: on its device where the
/// device is healthy (or due for its probe) and the partition does not avoid it, else on the
/// CPU prover where no usable device is left for the partition. A general worker leaves a
/// non-critical partition to another device's idle general worker when that device goes
/// first ([`DeviceState::goes_before`]) or is due for its probe.
fn next_item(st: &mut State, device: usize, lane: Lane, now: Instant) -> Next {
    let usable = st.health.usable(device);
    // Critical work is never a probe.
    let probe = !usable && lane != Lane::CriticalOnly && st.health.may_probe(device, now);
    let mut chosen = None;
    for (key, item) in &st.queue {
        if !lane_takes(lane, key) {
            continue;
        }
        if (usable || probe) && !item.avoid.contains(&device) {
            chosen = Some((*key, Route::Device { probe }));
            break;
        }
        if !any_usable(st, key, &item.avoid) {
            chosen = Some((*key, Route::Fallback));
            break;
        }
    }
    let Some((key, route)) = chosen else {
        return Next::Nothing;
    };
    if route == (Route::Device { probe: false })
        && lane != Lane::CriticalOnly
        && key.class() < CRITICAL
    {
        let Some(me) = st.devices.get(device) else {
            return Next::Nothing;
        };
        let avoid = st.queue.get(&key).map_or(&[][..], |i| &i.avoid[..]);
        let deferred = st.devices.iter().enumerate().any(|(d, other)| {
            d != device
                && !avoid.contains(&d)
                && ((st.health.usable(d) && other.goes_before(me))
                    || (st.health.may_probe(d, now) && other.idle_general > 0))
        });
        if deferred {
            return Next::Defer;
        }
    }
    match st.queue.remove(&key) {
        Some(item) => Next::Take(key, Box::new(item), route),
        None => Next::Nothing,
    }
}

/// Logs a device's change of health (a WARN line each way; the name and error escaped and
/// bounded).
fn log_change(name: &str, change: Change, error: &str) {
    let name = health::bounded(name, 128);
    match change {
        Change::Quarantined {
            consecutive,
            backoff,
        } => tracing::warn!(
            device = %name,
            consecutive_failures = consecutive,
            backoff_s = backoff.as_secs(),
            error = %health::bounded(error, MAX_ERROR),
            "device quarantined: it takes no partitions until its back-off ends and a probe \
             partition succeeds on it"
        ),
        Change::Released { after } => tracing::warn!(
            device = %name,
            quarantined_s = after.as_secs(),
            "device out of quarantine: its probe partition was proved"
        ),
    }
}

fn device_loop(inner: &Inner, device: usize, lane: Lane) {
    while let Some((key, item, route)) = take_next(inner, device, lane) {
        let started = Instant::now();
        let item_queued = item.queued_at;
        let device_wait = started.saturating_duration_since(item_queued);
        let DeviceItem {
            synthesized,
            work,
            job,
            reply,
            synthesis,
            _claim: claim,
            _expected: expected,
            ..
        } = item;
        let result = if job.is_stopped() {
            drop(synthesized);
            Err(ProveError::Cancelled)
        } else {
            job.report(Step::DeviceStarted, key.partition(), device_wait);
            let what = format!("partition {}", key.partition());
            let prove = || {
                catch_panic(&what, || match route {
                    Route::Device { .. } => work.prove(device, synthesized),
                    Route::Fallback => work.prove_fallback(synthesized),
                })
            };
            if key.class() >= CRITICAL {
                prover::urgency::urgently(prove)
            } else {
                prove()
            }
        };
        let ended = Instant::now();
        // A critical partition's claim on the synthesis threads and its announcement end with
        // its proof, before anyone hears of it.
        drop((claim, expected));
        let on_device = ended.saturating_duration_since(started);
        let outcome = Outcome {
            key,
            route,
            proved: result.is_ok(),
            fault: match &result {
                Err(e) if is_device_fault(e) => Some(e.to_string()),
                _ => None,
            },
            device_wait,
            on_device,
        };
        inner.settle(device, &outcome);
        let fault = outcome.fault.is_some();
        if matches!(&result, Err(e) if !matches!(e, ProveError::Cancelled) && !fault) {
            // The job fails with this error: its other partitions need not run. A device's
            // failure is the job's to retry elsewhere (it stops itself when it gives up).
            inner.stop_job(&job);
        }
        let resend = fault.then(|| reply.clone());
        let _ = reply.send(PartitionDone {
            partition: key.partition(),
            result,
            synthesis,
            device_wait,
            device: on_device,
            on: matches!(route, Route::Device { .. }).then_some(device),
            resend,
        });
        // Traced last: the memory is released and the job answered whatever the trace does.
        let partition = key.partition();
        inner.span_on(
            &job,
            partition,
            Stage::DeviceQueue,
            device,
            item_queued,
            started,
        );
        inner.span_on(&job, partition, Stage::Device, device, started, ended);
    }
}

/// The next partition device worker `device` (of `lane`) takes, once there is one for it,
/// with the device marked busy; `None` when the stages stop.
fn take_next(inner: &Inner, device: usize, lane: Lane) -> Option<(Key, DeviceItem, Route)> {
    let mut st = inner.lock();
    let general = usize::from(lane != Lane::CriticalOnly);
    if let Some(d) = st.devices.get_mut(device) {
        d.idle_general += general;
    }
    loop {
        let now = Instant::now();
        let next = next_item(&mut st, device, lane, now);
        if let Next::Take(key, item, route) = next {
            if route == (Route::Device { probe: true }) {
                st.health.start_probe(device);
            }
            st.busy.start(now);
            if let Some(d) = st.devices.get_mut(device) {
                d.busy.start(now);
                d.idle_general -= general;
                d.last_start = Some(now);
            }
            if !st.queue.is_empty() {
                // What is left may be another device's to take: its worker may have
                // deferred it before this take changed who goes first.
                inner.device.notify_all();
            }
            return Some((key, *item, route));
        }
        if st.stopping {
            return None;
        }
        if matches!(next, Next::Defer) {
            // The device that goes first has an idle worker waiting: wake it (the order is
            // strict, so it takes the partition rather than defer again).
            inner.device.notify_all();
        }
        // A quarantined device's general workers wake when its back-off ends, to probe it
        // with a queued partition.
        let probe_at = st
            .health
            .probe_at(device)
            .filter(|at| *at > now && lane != Lane::CriticalOnly);
        st = match probe_at {
            Some(at) => {
                inner
                    .device
                    .wait_timeout(st, at.saturating_duration_since(now))
                    .unwrap_or_else(PoisonError::into_inner)
                    .0
            }
            None => inner
                .device
                .wait(st)
                .unwrap_or_else(PoisonError::into_inner),
        };
    }
}

/// How a partition's turn on a device (or the CPU prover) ended, for [`Inner::settle`].
struct Outcome {
    key: Key,
    route: Route,
    proved: bool,
    /// The device's error, where it failed the partition ([`is_device_fault`]).
    fault: Option<String>,
    device_wait: Duration,
    on_device: Duration,
}

impl Inner {
    /// Counts `outcome` of device `device`: its busy time ends, its health moves, the
    /// partition's memory is released, and the workers and admissions that may now go are
    /// woken.
    fn settle(&self, device: usize, outcome: &Outcome) {
        let error = outcome.fault.clone().unwrap_or_default();
        let (change, name) = {
            let mut st = self.lock();
            let now = Instant::now();
            st.busy.end(now);
            let (proved, fault) = (outcome.proved, outcome.fault.is_some());
            if let Some(d) = st.devices.get_mut(device) {
                d.busy.end(now);
            }
            let change = match outcome.route {
                Route::Device { .. } => {
                    if let Some(d) = st.devices.get_mut(device) {
                        d.proved += u64::from(proved);
                        d.failed += u64::from(fault);
                    }
                    if proved {
                        st.health.succeeded(device, now)
                    } else if fault {
                        st.health.failed(device, now, &error)
                    } else {
                        st.health.inconclusive(device, now);
                        None
                    }
                }
                Route::Fallback => {
                    st.stats.fallback_proved += u64::from(proved);
                    None
                }
            };
            st.gate.release(&outcome.key);
            if proved {
                st.stats.partitions_proved += 1;
                st.stats.device_wait += outcome.device_wait;
                st.stats.device_time += outcome.on_device;
            }
            let name = st
                .stats
                .devices
                .get(device)
                .map(|d| d.name.clone())
                .unwrap_or_default();
            (change, name)
        };
        self.admit.notify_all();
        if let Some(change) = change {
            // Who takes what changed: queued partitions may now be another device's, or the
            // CPU prover's.
            self.device.notify_all();
            self.health_changed();
            log_change(&name, change, &error);
        }
    }
}

/// Bytes a partition measured at `measured` once synthesized holds at most while it is
/// synthesized in `parts` parts (see [`Stages::partition_bytes`]).
fn stitched_bytes(measured: u64, parts: usize) -> u64 {
    match parts {
        0 | 1 => measured,
        n => measured.saturating_add(measured / n as u64),
    }
}

/// An upper bound of a partition's host bytes from its parameters' shape: a, b and c grow
/// to at most the domain (the H query's length + 1), the assignment and densities to at
/// most twice their length (a vector's growth).
fn shape_bound(srs: &Srs) -> u64 {
    let domain = (srs.h.len() as u64 + 1).next_power_of_two();
    let aux = (srs.l.len() as u64).next_power_of_two();
    let inputs = (srs.vk.ic.len() as u64).next_power_of_two();
    3 * domain * 32 + (aux + inputs) * 32 + 2 * aux + inputs
}

/// The same bound for a partition synthesized against a recorded shape: its assignment (the
/// densities are the shape's, shared).
fn witness_bound(srs: &Srs) -> u64 {
    let aux = (srs.l.len() as u64).next_power_of_two();
    let inputs = (srs.vk.ic.len() as u64).next_power_of_two();
    (aux + inputs) * 32
}

#[cfg(test)]
mod tests;
