//! The job journal's logic: what the engine records so that a restarted daemon takes its jobs
//! up again, and what it takes up. Pure code: the format ([`format`]: frames, records, stored
//! inputs) and the decisions ([`replay`]: which jobs, ids, inputs and results a log means,
//! what expires, what a compacted log holds). The files are the daemon's
//! (`daemon/journal.rs`), behind [`Recorder`].
//!
//! The engine calls its [`Recorder`] at every step of a job's life: the input is stored
//! before the job is queued (outside the engine's lock: it may be large), the acceptance,
//! start, priority change and result are recorded under the lock (so in the order they
//! happened; buffered, no disk wait), and [`Recorder::sync`] makes them durable outside the
//! lock, before a submission is answered, after a job finishes, before a queued job
//! cancelled or stopped by the shutdown is answered so (to the Cancel and to its waiters), and
//! before a Cancel of a running job is answered (its result, "cancelled", is recorded by the
//! Cancel; the job's worker records nothing more).

pub mod format;
pub mod replay;

use std::time::Duration;

use super::{JobId, JobResult, Owner, Priority};
use crate::proofs::{ProofKind, ProofRequest};

pub use format::Record;

/// Where the engine records its jobs (the daemon's journal). Every method must return
/// promptly whatever happens to the disk: a journal that cannot write logs it and lets the
/// jobs run (they are just not recorded).
pub trait Recorder: Send + Sync + 'static {
    /// Stores `request`'s input under `digest` (the job's digest) before its job is queued;
    /// called outside the engine's lock, may wait for the disk. Returns whether it is stored.
    /// Every `true` is followed by the [`Record::Accepted`] that names it, or by
    /// [`Recorder::release_input`].
    fn store_input(&self, request: &ProofRequest, digest: &[u8; 32]) -> bool;

    /// The submission that stored `digest` made no new job (it found an existing one, or was
    /// refused): the input may be deleted if no job needs it.
    fn release_input(&self, digest: &[u8; 32]);

    /// Records `record`; called under the engine's lock, in the order things happened. Must
    /// not wait for the disk.
    fn record(&self, record: Record);

    /// Makes every record so far durable; called outside the engine's lock.
    fn sync(&self);
}

/// A job a restarted engine takes up.
#[derive(Clone, Debug)]
pub struct RecoveredJob {
    /// Its id, as before.
    pub id: JobId,
    /// Its owner, as before.
    pub owner: Owner,
    /// Its request id, as before.
    pub request_id: Option<String>,
    /// The proof kind.
    pub kind: ProofKind,
    /// Its priority (raised by a resubmission, if one did).
    pub priority: Priority,
    /// For logs and Status (PoRep).
    pub miner: Option<u64>,
    /// For logs and Status (PoRep).
    pub sector: Option<u64>,
    /// The request's digest (for request-id matching).
    pub digest: [u8; 32],
    /// How long ago it was submitted.
    pub submitted_ago: Duration,
    /// Whether a worker had taken it.
    pub was_running: bool,
    /// Queued again, or finished.
    pub state: RecoveredState,
}

/// Where a recovered job stands.
#[derive(Clone, Debug)]
pub enum RecoveredState {
    /// Not finished before the restart: queued again with its input.
    Queued(ProofRequest),
    /// Finished: its result, kept for what is left of the retention time.
    Finished {
        /// The result.
        result: JobResult,
        /// How long ago it finished.
        finished_ago: Duration,
    },
}

/// What the engine starts with when there is a journal.
pub struct Journal {
    /// Where it records.
    pub recorder: std::sync::Arc<dyn Recorder>,
    /// The first job id it may give out.
    pub next_id: JobId,
    /// The jobs the journal knew, by id.
    pub jobs: Vec<RecoveredJob>,
}
