//! The proving service: parameters kept resident, one entry point per request.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::control::{catch_panic, JobControl, ProveError, ProvedOn, StageTimings};
use super::recorded::ShapeCache;
use super::stages::{
    bounded, bounded_text, DeviceHealth, DeviceSpec, PipelineOptions, PipelineStats, Prepared,
    PreparedSet, SpanObserver, Stages,
};
use crate::prover::{Backend, Partition, PinnedPool, PinnedStats, PreparedSrs};
use crate::srs::{LoadedParams, ParamsId, ProofKind, Srs, SrsCache};
use crate::topology::Placement;

/// A request the service proves: the proof kinds' code (`crate::proofs` implements it for
/// its requests) plugged into the service, which wraps it in panic capture and the retry
/// without the devices that made a proof that failed verification. The pipeline's one
/// window onto the kinds: nothing in it names a kind's input or circuit.
pub trait ProofJob: Sync {
    /// Proves the job once through `service`'s stages and verifies the result.
    fn prove_once(
        &self,
        service: &ProvingService,
        control: &JobControl,
    ) -> Result<ProofOutput, ProveError>;

    /// Checks the job's vanilla proofs, after a proof of it failed verification: bad input
    /// fails here, typed, without a second proof and without a charge against the devices.
    fn check_vanilla(&self) -> Result<(), ProveError>;
}

/// A verified proof and how it was made.
#[derive(Clone, Debug)]
pub struct ProofOutput {
    /// The kind of proof.
    pub kind: ProofKind,
    /// The proof bytes exactly as filecoin-proofs returns them (192 bytes per partition,
    /// concatenated in partition order).
    pub proof: Vec<u8>,
    /// How many partition circuits were proved.
    pub partitions: usize,
    /// Per-stage timings.
    pub timings: StageTimings,
    /// The provers that made its partitions: the one device's name where one proved them
    /// all, else each device (and the CPU fallback) with its count of partitions
    /// (`cuda:0 NVIDIA H200 ×8, fallback cpu (16 threads) ×2`).
    pub backend: String,
}

/// A resident parameter set, in host memory and on the devices.
#[derive(Clone, Debug)]
pub struct ResidentParams {
    /// The set and its host copy.
    pub params: LoadedParams,
    /// Bytes of its points on each device, in the devices' order (0 for the CPU backend, or
    /// where a device short of memory dropped them; they go up again with the next proof).
    pub per_device: Vec<u64>,
}

impl ResidentParams {
    /// Bytes of its points on all devices together.
    pub fn device_bytes(&self) -> u64 {
        self.per_device.iter().sum()
    }
}

/// One device's memory, and the plans of the parameter sets prepared on it
/// ([`ProvingService::device_memory`]).
#[derive(Clone, Debug)]
pub struct DeviceMemoryReport {
    /// The backend's name.
    pub name: String,
    /// Its memory budget, what it holds and the most it held; `None` for the CPU.
    pub memory: Option<crate::prover::DeviceMemory>,
    /// How often calls let it go part way to urgent callers; `None` for the CPU.
    pub pauses: Option<crate::prover::DevicePauses>,
    /// The resident sets' plans on it (none for the CPU).
    pub plans: Vec<SetPlan>,
}

/// The longest memory plan line reported (the planner's are about 150 bytes).
pub const MAX_PLAN: usize = 512;

/// A backend's plan line made safe to send, log and label: bounded once here for every
/// reader (the DeviceMemory request, the metrics).
fn plan_line(plan: &str) -> String {
    bounded(plan, MAX_PLAN)
}

/// How one parameter set's proofs use a device.
#[derive(Clone, Debug)]
pub struct SetPlan {
    /// The set.
    pub id: ParamsId,
    /// The device's memory plan for it, in a line: at most [`MAX_PLAN`] bytes and a note of
    /// how many were cut, control characters escaped ([`plan_line`]).
    pub plan: String,
    /// Bytes of its points held on the device now.
    pub device_bytes: u64,
    /// Host bytes the device holds for it beside the parameters (page-locked).
    pub host_bytes: u64,
}

/// A proving device: its backend, and the CPUs its workers run on.
#[derive(Clone)]
pub struct Device {
    /// The backend that proves on it.
    pub backend: Arc<dyn Backend>,
    /// CPUs its workers are pinned to (its GPU's NUMA node); empty: not pinned.
    pub cpus: Vec<usize>,
}

impl Device {
    /// A device of `backend`, its workers not pinned.
    pub fn new(backend: Arc<dyn Backend>) -> Self {
        Self {
            backend,
            cpus: Vec::new(),
        }
    }
}

/// Keeps parameters resident (on the host, and prepared by every device's backend) and
/// proves requests.
pub struct ProvingService {
    /// The parameter sets, each with every device's prepared handle: evicting one drops
    /// them all, so that its device memory is freed with its host memory.
    pub(crate) srs: SrsCache<PreparedSet>,
    /// The devices, at least one.
    devices: Vec<Device>,
    /// Where synthesis threads run (NUMA nodes); off unless the daemon set one.
    pub(crate) placement: Placement,
    /// Page-locked memory synthesized partitions are copied into for a GPU, if any.
    pinned: Option<Arc<PinnedPool>>,
    /// Recorded circuit shapes, by parameter set.
    pub(crate) shapes: ShapeCache,
    /// Whether non-critical partitions use recorded shapes (`proving.recorded_shapes`).
    recorded_shapes: bool,
    /// Device workers that evaluate a witness partition on the host at once (each holds its
    /// A, B, C there): those of the devices that are not accelerators.
    evaluating_workers: usize,
    /// The threads device workers evaluate A, B and C on, made when first needed.
    evaluate_pool: std::sync::OnceLock<Option<Arc<rayon::ThreadPool>>>,
    /// The stages every job's partitions flow through.
    pub(crate) stages: Stages,
    /// The CPU prover a partition falls back to where no usable device is left for it.
    fallback: Arc<dyn Backend>,
    /// Serialises the sum and store of the resident parameters' bytes, so that a stale sum
    /// never overwrites a newer one.
    params_bytes: Mutex<()>,
}

impl ProvingService {
    /// A service reading parameters from `param_dir` and proving on `backend`, with the
    /// default stages (one synthesis thread per CPU, no memory budget, one device worker).
    ///
    /// # Panics
    /// When the device worker threads cannot be started.
    pub fn new(param_dir: PathBuf, backend: Arc<dyn Backend>) -> Self {
        Self::with_pipeline(param_dir, backend, &PipelineOptions::default())
            .unwrap_or_else(|e| panic!("cannot start the device workers: {e}"))
    }

    /// A service on one device with its stages sized by `options`.
    pub fn with_pipeline(
        param_dir: PathBuf,
        backend: Arc<dyn Backend>,
        options: &PipelineOptions,
    ) -> std::io::Result<Self> {
        Self::with_devices(param_dir, vec![Device::new(backend)], options)
    }

    /// A service proving on `devices` (an empty list is refused), which partitions of all
    /// jobs are spread over: each device's workers take the best queued partition when they
    /// are free. Critical partitions go to the accelerators where there are any.
    pub fn with_devices(
        param_dir: PathBuf,
        devices: Vec<Device>,
        options: &PipelineOptions,
    ) -> std::io::Result<Self> {
        if devices.is_empty() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "no proving device",
            ));
        }
        let accelerators = devices.iter().any(|d| d.backend.is_accelerator());
        let specs: Vec<DeviceSpec> = devices
            .iter()
            .map(|d| DeviceSpec {
                name: d.backend.name(),
                critical: d.backend.is_accelerator() || !accelerators,
                cpus: d.cpus.clone(),
            })
            .collect();
        Ok(Self {
            srs: SrsCache::new(param_dir),
            stages: Stages::start(options, &specs)?,
            placement: Placement::off(devices.len()),
            pinned: None,
            shapes: ShapeCache::default(),
            recorded_shapes: options.recorded_shapes,
            // A GPU evaluates A, B, C in its own memory: only the other devices' workers make
            // host copies of them.
            evaluating_workers: options.device_workers.max(1)
                * devices
                    .iter()
                    .filter(|d| !d.backend.is_accelerator())
                    .count(),
            evaluate_pool: std::sync::OnceLock::new(),
            devices,
            params_bytes: Mutex::new(()),
            fallback: Arc::new(crate::prover::cpu::CpuBackend::fallback(Default::default())),
        })
    }

    /// Proves partitions that no usable device is left for (every device quarantined, or
    /// failed them) on `backend` (by default the CPU prover with its default options).
    pub fn with_fallback(mut self, backend: Arc<dyn Backend>) -> Self {
        self.fallback = backend;
        self
    }

    /// Every device's health (failures, quarantine), in the devices' order.
    pub fn health(&self) -> Vec<DeviceHealth> {
        self.stages.health()
    }

    /// A receiver that changes whenever a device enters or leaves quarantine.
    pub fn health_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.stages.health_changes()
    }

    /// Places synthesis threads by `placement` from now on (the device workers were placed
    /// by their [`Device::cpus`]).
    pub fn with_placement(mut self, placement: Placement) -> Self {
        self.placement = placement;
        self
    }

    /// Where synthesis threads and device workers run.
    pub fn placement(&self) -> &Placement {
        &self.placement
    }

    /// Copies synthesized partitions into `pool` (page-locked memory a GPU uploads from
    /// directly) from now on, where it has room. Its whole limit counts against the memory
    /// budget, like the resident parameters.
    pub fn with_pinned_pool(mut self, pool: PinnedPool) -> Self {
        self.pinned = Some(Arc::new(pool));
        self.update_params_bytes();
        self
    }

    /// The pinned pool's counters, if there is one.
    pub fn pinned(&self) -> Option<PinnedStats> {
        self.pinned.as_deref().map(PinnedPool::stats)
    }

    /// A synthesized partition made ready for the device stage: pinned where there is a
    /// pool with room (on the calling synthesis thread).
    pub(crate) fn stage_for_device(&self, partition: Partition) -> Partition {
        match &self.pinned {
            Some(pool) => partition.pin(pool),
            None => partition,
        }
    }

    /// Whether non-critical partitions use recorded shapes.
    pub(crate) fn uses_recorded_shapes(&self) -> bool {
        self.recorded_shapes
    }

    /// The device work of a prepared set: the prover, and where witness partitions are
    /// evaluated.
    pub(crate) fn device_work(&self, set: PreparedSet) -> Prepared {
        Prepared {
            set,
            pinned: self.pinned.clone(),
            evaluate: self.evaluate_pool(),
            fallback: self.fallback.clone(),
            fallback_set: std::sync::OnceLock::new(),
        }
    }

    /// The evaluation threads, one per CPU, at normal priority: the device waits for them.
    /// `None` (evaluated on the device worker's current pool) when they cannot be started.
    fn evaluate_pool(&self) -> Option<Arc<rayon::ThreadPool>> {
        self.evaluate_pool
            .get_or_init(|| {
                rayon::ThreadPoolBuilder::new()
                    .thread_name(|i| format!("cuzk-eval-{i}"))
                    .build()
                    .map(Arc::new)
                    .map_err(|e| tracing::warn!(error = %e, "cannot start the evaluation threads"))
                    .ok()
            })
            .clone()
    }

    /// Records that the shape of a set was recorded (it counts against the budget).
    pub(crate) fn shape_recorded(&self) {
        self.update_params_bytes();
    }

    /// The devices' names, in order.
    pub fn device_names(&self) -> Vec<String> {
        self.devices.iter().map(|d| d.backend.name()).collect()
    }

    /// Sends every partition's stage times to `observer` from now on (the daemon's trace).
    /// Only the first observer set is kept; returns whether this one was.
    pub fn observe_stages(&self, observer: SpanObserver) -> bool {
        self.stages.observe(observer)
    }

    /// What the stages hold now, and their counters.
    pub fn pipeline(&self) -> PipelineStats {
        self.stages.stats()
    }

    /// Records the resident parameters' host bytes with the stages' budget.
    fn update_params_bytes(&self) {
        let _one_at_a_time = self.params_bytes.lock().unwrap_or_else(|p| p.into_inner());
        let loaded = self.srs.loaded_prepared();
        let params: u64 = loaded.iter().map(|(p, _)| p.resident_bytes).sum();
        // Page-locked blocks the devices keep for the sets (the parked quotient vectors).
        let devices: u64 = loaded
            .iter()
            .flat_map(|(_, prepared)| prepared.iter().map(|p| p.host_bytes()))
            .sum();
        let pinned = self.pinned.as_ref().map_or(0, |p| p.stats().limit);
        let (shapes, host_work) = self.shapes.bytes(self.evaluating_workers);
        self.stages.set_held(|h| {
            h.params = params;
            h.device_host = devices;
            h.pinned_pool = pinned;
            h.shapes = shapes;
            h.host_work = host_work;
        });
    }

    /// Measures the process's resident memory with `probe` from now on (the daemon reads
    /// `/proc`): admission and parameter loads also wait for it to leave room, and what it
    /// is now counts against the budget as the process's base. Only the first probe is kept.
    pub fn measure_memory_with(&self, probe: super::stages::MemoryProbe) -> bool {
        self.stages.measure_with(probe)
    }

    /// Whether the parameter set `id` is resident (a proof that needs it does not load it).
    pub fn is_resident(&self, id: &ParamsId) -> bool {
        self.srs.loaded().iter().any(|p| &p.id == id)
    }

    /// The parameter set `id` prepared by every device's backend, loading and preparing it if
    /// needed; and the time that took (zero when it was resident).
    ///
    /// A load first waits for room in the memory budget for its upper bound
    /// ([`crate::srs::load_bytes`]), and holds it until the set counts among the resident
    /// ones; a set that can never fit is [`ProveError::ParamsExceedMemoryBudget`].
    pub fn prepared(&self, id: &ParamsId) -> Result<(PreparedSet, Duration), ProveError> {
        let file = id.params_file(self.srs.dir());
        let mut reservation = None;
        let load = || {
            let bytes = crate::srs::load_bytes(&file)?;
            reservation = Some(self.stages.reserve_load(bytes)?);
            Ok(Arc::new(crate::srs::load_srs(&file)?))
        };
        let (srs, prepared, time) = self
            .srs
            .get_prepared_or(id, load, |srs| self.prepare(srs))?;
        // Every device prepared: the host copies of what they all hold can go.
        let released = srs.release_unwanted();
        if released > 0 {
            tracing::info!(params = %srs.path.display(), bytes = released, "host copy of parameter points released: the devices hold them");
        }
        if !time.is_zero() || released > 0 {
            self.update_params_bytes();
        }
        drop(reservation);
        Ok((prepared, time))
    }

    /// The set prepared on every device.
    fn prepare(&self, srs: &Arc<Srs>) -> Result<PreparedSet, ProveError> {
        self.devices
            .iter()
            .map(|d| d.backend.prepare(srs.clone()).map_err(ProveError::from))
            .collect::<Result<Vec<Arc<dyn PreparedSrs>>, _>>()
            .map(PreparedSet::from)
    }

    /// Makes `srs`, built in memory, the resident parameter set `id` (prepared on every
    /// device), unless a set `id` is resident already. Benchmarks' synthetic parameters only:
    /// nothing a client sends reaches this.
    #[cfg(feature = "scaffolding")]
    pub fn preload_built(&self, id: &ParamsId, srs: Arc<Srs>) -> Result<Duration, ProveError> {
        let (srs, _, time) = self
            .srs
            .get_prepared_or(id, || Ok(srs), |srs| self.prepare(srs))?;
        // As after a load from a file: the host copies of what every device holds can go
        // (where they can be made again).
        srs.release_unwanted();
        self.update_params_bytes();
        Ok(time)
    }

    /// Loads and prepares the parameter set `id` ahead of the first proof that needs it.
    /// Single flight: while the set is being loaded (for another preload or a proof), this
    /// waits for that load and shares it rather than load a second copy.
    pub fn preload(&self, id: &ParamsId) -> Result<Duration, ProveError> {
        self.prepared(id).map(|(_, time)| time)
    }

    /// Drops the parameter set `id` from host memory and from every device, with its
    /// recorded shape. Returns whether it was resident. Refused, leaving the set (and its
    /// shape) as they are, while the set is being loaded or a running proof holds it
    /// ([`crate::srs::EvictError`]): an eviction never leaves a copy alive that the next
    /// load would duplicate.
    pub fn evict(&self, id: &ParamsId) -> Result<bool, crate::srs::EvictError> {
        let was = self.srs.evict(id)?;
        self.shapes.evict(id);
        self.update_params_bytes();
        Ok(was)
    }

    /// The resident parameter sets.
    pub fn resident(&self) -> Vec<ResidentParams> {
        self.srs
            .loaded_prepared()
            .into_iter()
            .map(|(params, prepared)| ResidentParams {
                params,
                per_device: prepared.iter().map(|p| p.device_bytes()).collect(),
            })
            .collect()
    }

    /// Every device's memory as its backend accounts for it, and the plan each resident
    /// parameter set's proofs follow on it (read without waiting for the devices).
    pub fn device_memory(&self) -> Vec<DeviceMemoryReport> {
        let resident = self.srs.loaded_prepared();
        self.devices
            .iter()
            .enumerate()
            .map(|(i, d)| DeviceMemoryReport {
                name: d.backend.name(),
                memory: d.backend.memory(),
                pauses: d.backend.pauses(),
                plans: resident
                    .iter()
                    .filter_map(|(params, prepared)| {
                        let p = prepared.get(i)?;
                        Some(SetPlan {
                            id: params.id.clone(),
                            plan: plan_line(&p.memory_plan()?),
                            device_bytes: p.device_bytes(),
                            host_bytes: p.host_bytes(),
                        })
                    })
                    .collect(),
            })
            .collect()
    }

    /// The parameter cache.
    pub fn srs(&self) -> &SrsCache<PreparedSet> {
        &self.srs
    }

    /// The provers that made a proof's partitions, by name (see `ProvedOn::describe`): the
    /// devices that proved them and the CPU fallback, not the devices configured.
    pub(crate) fn proved_by(&self, on: &ProvedOn) -> String {
        on.describe(&self.device_names(), &self.fallback.name())
            .unwrap_or_else(|| self.backend_name())
    }

    /// The backends' names: the one device's, or the devices' joined (`"2 devices: cuda:0
    /// NVIDIA H200, cuda:1 NVIDIA H200"`).
    pub fn backend_name(&self) -> String {
        match self.devices.as_slice() {
            [one] => one.backend.name(),
            all => format!("{} devices: {}", all.len(), self.device_names().join(", ")),
        }
    }

    /// Proves `request` through the stages, verifies the result and returns it. A cancel of
    /// `control` drops the job's waiting and queued partitions at once.
    pub fn prove(
        &self,
        request: &dyn ProofJob,
        control: &JobControl,
    ) -> Result<ProofOutput, ProveError> {
        // Circuit code from the storage-proofs crates may panic on malformed inputs; a bad
        // request must never take the process (and the other jobs) down.
        let once = || catch_panic("proving", || request.prove_once(self, control));
        let first = once();
        let Err(ProveError::VerificationFailed(why)) = &first else {
            return first;
        };
        if control.is_cancelled() {
            return first;
        }
        // Bad input (vanilla proofs that do not verify) fails here, typed, without a second
        // proof and without a charge against the devices.
        request.check_vanilla()?;
        if control.is_cancelled() {
            // Cancelled while the vanilla proofs were checked (seconds for a 32 GiB C1).
            return first;
        }
        // A device may have returned a wrong result, or the input may not fit together in a
        // way the vanilla check cannot see: proved once more without the devices that made
        // this proof (on the others, or the CPU prover), a proof that verifies shows it was
        // them.
        let used = control.prove_again_without_used();
        if used.is_empty() {
            return first;
        }
        let names = self.device_names();
        let named: Vec<&str> = used
            .iter()
            .filter_map(|&d| names.get(d).map(String::as_str))
            .collect();
        tracing::warn!(
            devices = %bounded_text(&named.join(", ")),
            error = %bounded_text(why),
            "a proof failed verification; proving the job again without the devices that made it"
        );
        let second = once();
        if second.is_ok() {
            let error = format!(
                "wrong result: a proof it made failed verification, and verified when made \
                 without it ({why})"
            );
            self.stages.devices_failed(&used, &error);
        }
        second
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_plan_is_cut_and_control_characters_escaped() {
        let long = plan_line(&"x".repeat(10_000));
        assert!(long.len() < MAX_PLAN + 40, "{} bytes", long.len());
        assert!(long.ends_with("more bytes)"), "{long}");
        assert_eq!(plan_line("parked\nshape"), "parked\\nshape");
    }
}
