//! The proving side of the daemon: backend selection and the runner the engine calls.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::DaemonError;
use crate::config::BackendChoice;
use crate::engine::Runner;
use crate::proofs::{JobControl, ProofOutput, ProofRequest, ProveError, ProvingService};
use crate::prover::cpu::CpuBackend;
use crate::prover::Backend;

/// The GPU backend, when one is usable.
///
/// NOT YET WIRED: `cuzk::gpu` (another engineer's module) is not in the library yet; until
/// it is, this returns `None`, `proving.backend = "auto"` means the CPU and `"gpu"` fails to
/// start. Replace the body with `crate::gpu::try_backend()` when it lands.
fn gpu_backend() -> Option<Arc<dyn Backend>> {
    None
}

/// The backend `choice` selects.
pub fn select_backend(choice: BackendChoice) -> Result<Arc<dyn Backend>, DaemonError> {
    let cpu = || Arc::new(CpuBackend) as Arc<dyn Backend>;
    match choice {
        BackendChoice::Cpu => Ok(cpu()),
        BackendChoice::Auto => Ok(gpu_backend().unwrap_or_else(cpu)),
        BackendChoice::Gpu => gpu_backend().ok_or_else(|| {
            DaemonError::Backend(
                "proving.backend = \"gpu\" but no usable GPU backend was found".into(),
            )
        }),
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
