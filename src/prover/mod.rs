//! Groth16 proving from a synthesized circuit.
//!
//! [`prove`] checks the parameter set against the circuit, asks a [`Backend`] for the
//! quotient polynomial and the multi-scalar multiplications, and assembles the proof exactly
//! as bellperson does, so that for the same randomness `r`, `s` both produce the same bytes.

mod backend;
pub mod cpu;
pub mod fr52;
mod groth16;
pub mod msm;
pub mod ntt;
pub mod pippenger;
mod simd;

pub use backend::{AuxQueries, AuxSums, Backend};
pub use groth16::{count_set, dense, prove, prove_with_randomness, ProofTimings};

/// Why a backend stage failed.
#[derive(Debug, thiserror::Error)]
pub enum ProverError {
    /// The parameter set does not fit the circuit (another circuit's parameters).
    #[error("parameters do not match the circuit: {0}")]
    ParamsMismatch(String),
    /// The circuit cannot be proved with this backend (e.g. its domain is too large).
    #[error("unsupported circuit: {0}")]
    Unsupported(String),
    /// The device ran out of memory; the job may be retried later or elsewhere.
    #[error("out of device memory: {0}")]
    OutOfMemory(String),
    /// Any other backend failure.
    #[error("backend failure: {0}")]
    Backend(String),
}
