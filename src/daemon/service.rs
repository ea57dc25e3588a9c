//! The proving side of the daemon: backend selection and the runner the engine calls.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::DaemonError;
use crate::config::{BackendChoice, FaultConfig, GpuSelection, ProvingConfig};
use crate::engine::Runner;
use crate::gpu::GpuOptions;
use crate::pipeline::{JobControl, ProofOutput, ProveError, ProvingService};
use crate::proofs::ProofRequest;
use crate::prover::cpu::{CpuBackend, CpuOptions};
use crate::prover::fault::FaultyBackend;
use crate::prover::Backend;
use crate::topology::{self, Placement, Topology};

/// The CUDA ordinals `selection` names: the listed ones, or every device the driver shows
/// (none where there is no driver or device, with the reason).
fn gpu_ordinals(selection: &GpuSelection) -> Result<Vec<usize>, String> {
    match selection {
        GpuSelection::List(list) => Ok(list.clone()),
        GpuSelection::All => crate::gpu::device_count()
            .map(|n| (0..n).collect())
            .map_err(|e| e.to_string()),
    }
}

/// GPUs that could not be opened: each ordinal with the reason.
type Unusable = Vec<(usize, String)>;

/// The GPU backends of `ordinals`, in order; each failure with its ordinal.
fn gpu_backends(ordinals: &[usize], gpu: &GpuOptions) -> (Vec<Arc<dyn Backend>>, Unusable) {
    let mut opened = Vec::new();
    let mut failed = Vec::new();
    for &ordinal in ordinals {
        let options = GpuOptions {
            ordinal,
            ..gpu.clone()
        };
        match crate::gpu::try_backend(&options) {
            Ok(b) => opened.push(b),
            Err(e) => failed.push((ordinal, e.to_string())),
        }
    }
    (opened, failed)
}

/// The proving devices the configuration selects, built with `gpu` or `cpu`: the GPUs of
/// `proving.gpus` (`auto` skips those that cannot be opened, saying why, and falls back to
/// the CPU where none is left; `gpu` fails), then `proving.cpu_device` CPU devices; where
/// no GPU is used, at least one CPU device.
pub fn select_devices(
    proving: &ProvingConfig,
    gpu: &GpuOptions,
    cpu: CpuOptions,
) -> Result<Vec<Arc<dyn Backend>>, DaemonError> {
    let cpu_backend = move || Arc::new(CpuBackend::new(cpu.clone())) as Arc<dyn Backend>;
    let mut devices = match proving.backend {
        BackendChoice::Cpu => Vec::new(),
        choice => {
            let strict = choice == BackendChoice::Gpu;
            let refuse =
                |why: String| DaemonError::Backend(format!("proving.backend = \"gpu\": {why}"));
            let ordinals = match gpu_ordinals(&proving.gpus) {
                Ok(o) => o,
                Err(why) if strict => return Err(refuse(why)),
                Err(why) => {
                    tracing::info!("no usable GPU ({why}); proving on the CPU");
                    Vec::new()
                }
            };
            let (opened, failed) = gpu_backends(&ordinals, gpu);
            for (ordinal, why) in &failed {
                if strict {
                    return Err(refuse(format!("device {ordinal}: {why}")));
                }
                tracing::warn!(ordinal, "GPU not usable ({why}); proving without it");
            }
            if opened.is_empty() && !ordinals.is_empty() {
                tracing::info!("no usable GPU; proving on the CPU");
            }
            opened
        }
    };
    let cpus = if devices.is_empty() {
        proving.cpu_device.max(1)
    } else {
        proving.cpu_device
    };
    devices.extend((0..cpus).map(|_| cpu_backend()));
    Ok(devices)
}

/// `devices` with `debug.fault_*`'s faults injected on device `fault.device` (none where
/// `fault.every` is 0); an index past the devices is a configuration error.
pub fn inject_faults(
    mut devices: Vec<Arc<dyn Backend>>,
    fault: &FaultConfig,
) -> Result<Vec<Arc<dyn Backend>>, DaemonError> {
    if fault.every == 0 {
        return Ok(devices);
    }
    let count = devices.len();
    let Some(device) = devices.get_mut(fault.device) else {
        return Err(DaemonError::Backend(format!(
            "debug.fault_device = {}: there are {count} proving devices",
            fault.device
        )));
    };
    tracing::warn!(
        device = %device.name(),
        every = fault.every,
        limit = fault.limit,
        stage = ?fault.stage,
        kind = ?fault.kind,
        "debug.fault_every: injecting faults on a proving device (a testing aid)"
    );
    *device = FaultyBackend::wrap(device.clone(), *fault);
    Ok(devices)
}

/// Where the devices' workers and the synthesis threads run: the NUMA topology under
/// `sysfs` (limited to the CPUs this process may use) and each GPU's node. Unreadable
/// topology means no placement, said once in the log.
pub fn placement(
    sysfs: &Path,
    devices: &[Arc<dyn Backend>],
    synthesis_threads: usize,
    numa: bool,
) -> Placement {
    if !numa {
        return Placement::off(devices.len());
    }
    let topology = match (Topology::read(sysfs), topology::allowed_cpus()) {
        (Ok(t), Ok(allowed)) => t.restricted(&allowed),
        (Err(e), _) => {
            tracing::info!("NUMA topology not readable ({e}); threads are not placed");
            return Placement::off(devices.len());
        }
        (_, Err(e)) => {
            tracing::info!("CPU affinity not readable ({e}); threads are not placed");
            return Placement::off(devices.len());
        }
    };
    let gpu_nodes: Vec<Option<u32>> = devices
        .iter()
        .map(|d| {
            d.pci_bus_id()
                .and_then(|id| topology::gpu_numa_node(sysfs, &id))
        })
        .collect();
    Placement::new(&topology, synthesis_threads, &gpu_nodes, true)
}

/// The engine's runner: the proving service, after the optional `debug.job_delay`.
pub struct ServiceRunner {
    /// The proving service.
    pub service: Arc<ProvingService>,
    /// Testing aid: a cancellable pause before each proof.
    pub delay: Duration,
    /// Whether inputs are checked before they are queued (`debug.check_input`).
    pub check_input: bool,
}

impl Runner for ServiceRunner {
    fn run(&self, request: &ProofRequest, control: &JobControl) -> Result<ProofOutput, ProveError> {
        let end = Instant::now() + self.delay;
        loop {
            if control.is_cancelled() {
                return Err(ProveError::Cancelled);
            }
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            std::thread::sleep(left.min(Duration::from_millis(10)));
        }
        self.service.prove(request, control)
    }

    fn check(&self, request: &ProofRequest) -> Result<(), ProveError> {
        if self.check_input {
            request.check()
        } else {
            Ok(())
        }
    }

    /// The set the job will prove with, so that an Evict of it is refused while the job is
    /// queued or running.
    fn params(&self, request: &ProofRequest) -> Option<crate::srs::ParamsId> {
        request.params_id().ok()
    }
}
