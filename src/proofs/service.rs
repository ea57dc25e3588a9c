//! The proving service: parameters kept resident, one entry point per request.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{ProofKind, ProofRequest};
use crate::prover::{Backend, PreparedSrs, ProverError};
use crate::srs::{LoadedParams, ParamsId, SrsCache, SrsError};

/// Time spent in each stage of one proof.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StageTimings {
    /// Finding, mapping and converting the parameters (zero when they were resident).
    pub param_load: Duration,
    /// Circuit synthesis of all partitions.
    pub synthesis: Duration,
    /// NTTs, MSMs and proof assembly of all partitions.
    pub proving: Duration,
    /// Checking the proof with the Filecoin verifier.
    pub verification: Duration,
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
    /// The backend that ran the NTTs and MSMs.
    pub backend: String,
}

/// Shared between a running proof and whoever started it: cancellation and progress.
#[derive(Debug, Default)]
pub struct JobControl {
    cancelled: AtomicBool,
    partitions_total: AtomicUsize,
    partitions_done: AtomicUsize,
}

impl JobControl {
    /// A fresh control, not cancelled, no progress.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }
    /// Asks the proof to stop at the next partition boundary.
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::SeqCst);
    }
    /// Whether [`JobControl::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }
    /// (partitions proved, partitions in total); total is 0 until synthesis knows it.
    pub fn progress(&self) -> (usize, usize) {
        (
            self.partitions_done.load(Ordering::SeqCst),
            self.partitions_total.load(Ordering::SeqCst),
        )
    }
    pub(crate) fn set_total(&self, total: usize) {
        self.partitions_total.store(total, Ordering::SeqCst);
    }
    pub(crate) fn partition_done(&self) {
        self.partitions_done.fetch_add(1, Ordering::SeqCst);
    }
    pub(crate) fn check(&self) -> Result<(), ProveError> {
        if self.is_cancelled() {
            Err(ProveError::Cancelled)
        } else {
            Ok(())
        }
    }
}

/// Why a proof could not be produced.
#[derive(Debug, thiserror::Error)]
pub enum ProveError {
    /// The request's input could not be parsed or is inconsistent.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// The parameter files are missing, truncated or corrupt.
    #[error(transparent)]
    Params(#[from] SrsError),
    /// The circuit could not be synthesized (e.g. vanilla proofs of the wrong shape).
    #[error("synthesis failed: {0}")]
    Synthesis(String),
    /// The NTT/MSM backend failed.
    #[error(transparent)]
    Backend(#[from] ProverError),
    /// The proof was produced but the Filecoin verifier rejected it. This is what inputs
    /// that belong to another sector, miner or randomness lead to.
    #[error("proof failed verification: {0}")]
    VerificationFailed(String),
    /// The job was cancelled.
    #[error("cancelled")]
    Cancelled,
}

/// A resident parameter set, in host memory and on the backend's device.
#[derive(Clone, Debug)]
pub struct ResidentParams {
    /// The set and its host copy.
    pub params: LoadedParams,
    /// Bytes of its points on the device (0 for the CPU backend, or where a device short of
    /// memory dropped them; they go up again with the next proof).
    pub device_bytes: u64,
}

/// Keeps parameters resident (on the host, and prepared by the backend) and proves requests.
pub struct ProvingService {
    /// The parameter sets, each with the backend's prepared handle: evicting one drops both,
    /// so that its device memory is freed with its host memory.
    pub(crate) srs: SrsCache<Arc<dyn PreparedSrs>>,
    pub(crate) backend: Arc<dyn Backend>,
    /// Partitions synthesized at once. Memory grows with it: up to twice this many
    /// synthesized partitions wait for the prover (a 32 GiB PoRep partition is ~16 GiB of
    /// evaluations and assignment), plus the one being proved.
    pub(crate) synthesis_parallelism: usize,
}

/// One partition synthesized at a time per 8 CPUs, at most 4: keeps a GPU fed on large hosts
/// without letting 32 GiB partitions (~16 GiB each) exhaust memory.
fn default_synthesis_parallelism() -> usize {
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    (cpus / 8).clamp(1, 4)
}

impl ProvingService {
    /// A service reading parameters from `param_dir` and proving on `backend`.
    pub fn new(param_dir: PathBuf, backend: Arc<dyn Backend>) -> Self {
        Self {
            srs: SrsCache::new(param_dir),
            backend,
            synthesis_parallelism: default_synthesis_parallelism(),
        }
    }

    /// Sets how many partitions are synthesized at once (at least 1).
    pub fn with_synthesis_parallelism(mut self, partitions: usize) -> Self {
        self.synthesis_parallelism = partitions.max(1);
        self
    }

    /// The parameter set `id` prepared by the backend, loading and preparing it if needed;
    /// and the time that took (zero when it was resident).
    pub fn prepared(&self, id: &ParamsId) -> Result<(Arc<dyn PreparedSrs>, Duration), ProveError> {
        let (_, prepared, time) = self.srs.get_prepared(id, |srs| {
            self.backend.prepare(srs.clone()).map_err(ProveError::from)
        })?;
        Ok((prepared, time))
    }

    /// Loads and prepares the parameter set `id` ahead of the first proof that needs it.
    pub fn preload(&self, id: &ParamsId) -> Result<Duration, ProveError> {
        self.prepared(id).map(|(_, time)| time)
    }

    /// Drops the parameter set `id` from host memory and from the device (running proofs
    /// keep theirs until they finish). Returns whether it was resident.
    pub fn evict(&self, id: &ParamsId) -> bool {
        self.srs.evict(id)
    }

    /// The resident parameter sets.
    pub fn resident(&self) -> Vec<ResidentParams> {
        self.srs
            .loaded_prepared()
            .into_iter()
            .map(|(params, prepared)| ResidentParams {
                params,
                device_bytes: prepared.device_bytes(),
            })
            .collect()
    }

    /// The parameter cache.
    pub fn srs(&self) -> &SrsCache<Arc<dyn PreparedSrs>> {
        &self.srs
    }

    /// The backend's name.
    pub fn backend_name(&self) -> String {
        self.backend.name()
    }

    /// Proves `request`, verifies the result and returns it. Checks `control` for cancellation
    /// at every partition boundary.
    pub fn prove(
        &self,
        request: &ProofRequest,
        control: &JobControl,
    ) -> Result<ProofOutput, ProveError> {
        // Circuit code from the storage-proofs crates may panic on malformed inputs; a bad
        // request must never take the process (and the other jobs) down.
        super::pipeline::catch_panic("proving", || match request {
            ProofRequest::PoRep(r) => super::porep::prove(self, r, control),
            ProofRequest::SnapDeals { input } => super::snap::prove(self, input, control),
            ProofRequest::WindowPoSt { input } => super::post::prove_window(self, input, control),
            ProofRequest::WinningPoSt { input } => super::post::prove_winning(self, input, control),
        })
    }
}
