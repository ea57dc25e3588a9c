//! Typed errors of the GPU backend.

use cudarc::driver::{sys::CUresult, DriverError};

use crate::prover::ProverError;

/// Why a GPU operation failed.
#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    /// No usable CUDA driver or device on this machine; the caller falls back to the CPU.
    #[error("no CUDA device: {0}")]
    NoDevice(String),
    /// NVRTC is missing or rejected the kernels.
    #[error("CUDA kernel compilation failed: {0}")]
    Compile(String),
    /// The device ran out of memory (retry later, or with a smaller job).
    #[error("out of GPU memory: {0}")]
    OutOfMemory(String),
    /// Any other CUDA driver error.
    #[error("CUDA error in {context}: {message}")]
    Cuda {
        /// What we were doing.
        context: &'static str,
        /// The driver's description.
        message: String,
    },
    /// Inputs the backend cannot process (lengths differ, size over the supported maximum).
    #[error("invalid input: {0}")]
    Input(String),
    /// The host copy of a parameter query, released while the device held it, could not be
    /// read again from its file.
    #[error("parameter points: {0}")]
    Params(#[from] crate::srs::SrsError),
}

impl GpuError {
    /// Wraps a driver error, keeping out-of-memory distinguishable.
    pub fn driver(context: &'static str, e: DriverError) -> Self {
        if e.0 == CUresult::CUDA_ERROR_OUT_OF_MEMORY {
            GpuError::OutOfMemory(format!("{context}: {e:?}"))
        } else {
            GpuError::Cuda {
                context,
                message: format!("{e:?}"),
            }
        }
    }

    /// True for an out-of-memory failure.
    pub fn is_out_of_memory(&self) -> bool {
        matches!(self, GpuError::OutOfMemory(_))
    }
}

/// Kept whole behind the prover's error: out of memory as [`ProverError::OutOfMemory`], which
/// the daemon reports as a retryable condition, everything else as [`ProverError::Device`].
impl From<GpuError> for ProverError {
    fn from(e: GpuError) -> Self {
        if e.is_out_of_memory() {
            ProverError::OutOfMemory(Box::new(e))
        } else {
            ProverError::Device(Box::new(e))
        }
    }
}

/// `result.map_err(|e| GpuError::driver(context, e))` in short.
pub(crate) trait Ctx<T> {
    fn ctx(self, context: &'static str) -> Result<T, GpuError>;
}

impl<T> Ctx<T> for Result<T, DriverError> {
    fn ctx(self, context: &'static str) -> Result<T, GpuError> {
        self.map_err(|e| GpuError::driver(context, e))
    }
}
