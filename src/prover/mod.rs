//! Groth16 proving from a synthesized circuit.
//!
//! [`prove`] checks the parameter set against the circuit, asks the parameter set prepared by
//! a [`Backend`] ([`PreparedSrs`]) for the H sum and the witness sums, and assembles the proof
//! exactly as bellperson does, so that for the same randomness `r`, `s` both produce the same
//! bytes.

mod backend;
pub mod cpu;
pub mod fault;
pub mod fr52;
pub mod gentle;
mod groth16;
pub mod msm;
pub mod ntt;
mod options;
mod pinned;
pub mod pippenger;
mod shaped;
mod simd;
pub mod urgency;

use std::path::PathBuf;

pub use backend::{
    count_set, dense, Backend, DeviceMemory, DevicePauses, PreparedSrs, Sums, Witness, WitnessSums,
};
pub use groth16::{
    prove, prove_with_randomness, prove_witness, prove_witness_with_randomness, Partition,
    ProofTimings,
};
pub use pinned::{
    heap_allocator, HeapBlock, HostAllocator, Lease, PinnedPool, PinnedStats, RawBlock, Scalars,
};
pub use shaped::WitnessPartition;

/// A backend's own error, kept whole (its type and its chain) behind the prover's.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why a proof could not be computed.
#[derive(Debug, thiserror::Error)]
pub enum ProverError {
    /// A query of the parameter set has another length than the circuit needs (another
    /// circuit's parameters).
    #[error(
        "parameters do not match the circuit: {}: section {section} has {have} points, the circuit needs {want}",
        path.display()
    )]
    ParamsMismatch {
        /// The parameter file.
        path: PathBuf,
        /// The query (`ic`, `h`, `l`, `a`, `b_g1`, `b_g2`).
        section: &'static str,
        /// Its points.
        have: usize,
        /// The points the circuit needs.
        want: usize,
    },
    /// The verifying key's delta is the identity: no proof made with it would be sound.
    #[error("parameters do not match the circuit: {}: delta is the identity", path.display())]
    DegenerateParams {
        /// The parameter file.
        path: PathBuf,
    },
    /// The circuit's domain is larger than the backend supports.
    #[error("unsupported circuit: a domain of {size} elements (at most 2^{max_log})")]
    DomainTooLarge {
        /// The domain's size.
        size: usize,
        /// log2 of the largest supported domain.
        max_log: u32,
    },
    /// Vectors that belong together have different lengths (a bug in the caller).
    #[error("{what}: lengths {left} and {right} differ")]
    LengthMismatch {
        /// Which vectors.
        what: &'static str,
        /// The first length.
        left: usize,
        /// The second length.
        right: usize,
    },
    /// The device ran out of memory, even after dropping what it caches: the job may
    /// succeed later (with other parameter sets evicted) or elsewhere.
    #[error(transparent)]
    OutOfMemory(BoxError),
    /// Any other failure of the device.
    #[error(transparent)]
    Device(BoxError),
    /// A query's host copy, released while a device held the query, could not be read
    /// again from the parameter file.
    #[error(transparent)]
    Params(#[from] crate::srs::SrsError),
}

impl ProverError {
    /// Whether the same proof may succeed when tried again later: the device lacked a
    /// resource it may have then (memory).
    pub fn is_retryable(&self) -> bool {
        matches!(self, ProverError::OutOfMemory(_))
    }
}
