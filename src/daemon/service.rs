//! The proving side of the daemon: backend selection and the runner the engine calls.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::DaemonError;
use crate::config::BackendChoice;
use crate::engine::Runner;
use crate::gpu::GpuOptions;
use crate::proofs::{JobControl, ProofOutput, ProofRequest, ProveError, ProvingService};
use crate::prover::cpu::{CpuBackend, CpuOptions};
use crate::prover::Backend;

/// The GPU backend `options` describe, or why there is none.
fn gpu_backend(options: &GpuOptions) -> Result<Arc<dyn Backend>, String> {
    crate::gpu::try_backend(options).map_err(|e| e.to_string())
}

/// The backend `choice` selects, built with `gpu` or `cpu`: `auto` falls back to the CPU
/// (saying why), `gpu` fails.
pub fn select_backend(
    choice: BackendChoice,
    gpu: &GpuOptions,
    cpu: CpuOptions,
) -> Result<Arc<dyn Backend>, DaemonError> {
    let cpu = move || Arc::new(CpuBackend::new(cpu.clone())) as Arc<dyn Backend>;
    match choice {
        BackendChoice::Cpu => Ok(cpu()),
        BackendChoice::Auto => Ok(gpu_backend(gpu).unwrap_or_else(|why| {
            tracing::info!("no usable GPU ({why}); proving on the CPU");
            cpu()
        })),
        BackendChoice::Gpu => gpu_backend(gpu)
            .map_err(|why| DaemonError::Backend(format!("proving.backend = \"gpu\": {why}"))),
    }
}

/// The engine's runner: the proving service, after the optional `debug.job_delay`.
pub struct ServiceRunner {
    /// The proving service.
    pub service: Arc<ProvingService>,
    /// Testing aid: a cancellable pause before each proof.
    pub delay: Duration,
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
}
