//! Which prover a command that proves in this process runs on: the GPU where one is usable,
//! else the CPU. `prove --standalone`, `bench` and `demo` (a part of `client`) all choose so;
//! it sits below them so that `demo` need not reach into `prove`, which itself uses `client`.

use std::sync::Arc;

use crate::gpu::GpuOptions;
use crate::prover::cpu::{CpuBackend, CpuOptions};
use crate::prover::Backend;

/// The best backend available, built with `gpu` or `cpu`: the GPU when one is usable, else
/// the CPU (with the reason printed to the log).
pub(super) fn select_backend(
    force_cpu: bool,
    gpu: &GpuOptions,
    cpu: &CpuOptions,
) -> Arc<dyn Backend> {
    if !force_cpu {
        match crate::gpu::try_backend(gpu) {
            Ok(b) => return b,
            Err(e) => tracing::warn!("no GPU backend ({e}); proving on the CPU"),
        }
    }
    Arc::new(CpuBackend::new(cpu.clone()))
}
