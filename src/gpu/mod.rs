//! The CUDA backend: our own BLS12-381 NTT and MSM kernels (`cuda/`), compiled at run time with
//! NVRTC and driven through cudarc with dynamic loading, so the binary builds and runs on
//! machines without CUDA (where [`try_backend`] returns [`GpuError::NoDevice`] and the caller
//! uses the CPU backend).
//!
//! * [`GpuOptions`]: the device, kernel cache, staging memory and tuning, built once at start
//!   and passed in (the library reads no environment).
//! * [`compile`]: NVRTC → cubin for the device's architecture, cached on disk.
//! * [`device`]: device discovery, context, stream, buffers, kernel launches.
//! * [`bytes`]: byte views of host slices for copies (the one `unsafe` place for them).
//! * [`kernels`]: the kernels' signatures (checked against `cuda/` by a test), typed launch
//!   arguments.
//! * [`ntt`], [`msm`]: host drivers of the kernels.
//! * [`r1cs`]: an R1CS shape kept on the device, its A, B, C rows evaluated there.
//! * [`GpuBackend`]: implements [`crate::prover::Backend`].
//! * `setup`: fixed-base multiplications for a Groth16 setup (`params_gen`), scaffolding.
//! * `selftest`: single field and curve operations on the device, for tests; `test_backend`:
//!   the device for tests. Both (and the self-test kernels) are scaffolding, built only with
//!   the `scaffolding` feature, which `cuzkd` is built without. `cuzk bench gpu` lives in
//!   `crate::cli::bench_gpu`.

pub mod backend;
pub mod budget;
pub mod bytes;
pub mod compile;
pub mod device;
mod error;
pub mod kernels;
pub mod msm;
pub mod ntt;
mod options;
pub(crate) mod pinned;
pub mod plan;
pub mod r1cs;
#[cfg(feature = "scaffolding")]
mod selftest;
#[cfg(feature = "scaffolding")]
pub mod setup;

use std::sync::Arc;

pub use backend::GpuBackend;
pub use device::{device_count, DeviceInfo};
pub use error::GpuError;
pub use options::{GpuOptions, MsmTuning, NttTuning, DEFAULT_STAGING_BYTES, MIN_STAGING_BYTES};

/// The GPU backend `options` describe, or why there is none (print it and use the CPU
/// backend).
pub fn try_backend(options: &GpuOptions) -> Result<Arc<dyn crate::prover::Backend>, GpuError> {
    Ok(Arc::new(GpuBackend::new(options)?))
}

/// Opens the device `options` name for the GPU tests. They are `#[ignore]`d, so that a machine
/// without a device reports them as ignored rather than passed, and run with `--ignored` where
/// a device is expected (`scripts/gpu-device-run.sh`): there, no device is an error like any
/// other.
#[cfg(feature = "scaffolding")]
pub fn test_backend(options: &GpuOptions) -> Result<GpuBackend, GpuError> {
    GpuBackend::new(options)
}
