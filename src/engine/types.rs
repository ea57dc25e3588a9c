//! The engine's vocabulary: priorities, job states, results and errors.

use std::sync::Arc;
use std::time::Duration;

use crate::pipeline::{ProofOutput, ProveError};
use crate::proofs::ProofKind;

/// A job's identifier, unique for the life of the engine (never reused).
pub type JobId = u64;

/// Who submitted a job: the submitter's uid (the daemon reads its peers' with SO_PEERCRED).
/// A job belongs to its owner; request ids are looked up among the owner's jobs.
pub type Owner = u32;

/// Scheduling class. A higher class always starts before a lower one; within a class, jobs
/// start in submission order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Priority {
    /// Background work.
    Low,
    /// PoRep and SnapDeals by default.
    Normal,
    /// WindowPoSt by default: it has a deadline within its proving period.
    High,
    /// WinningPoSt by default: a block reward is lost if it is late.
    Critical,
}

impl Priority {
    /// The default class of a proof kind.
    pub fn for_kind(kind: ProofKind) -> Self {
        match kind {
            ProofKind::WinningPoSt => Priority::Critical,
            ProofKind::WindowPoSt => Priority::High,
            ProofKind::PoRep | ProofKind::SnapDeals => Priority::Normal,
        }
    }

    /// Its class in the proving stages: 0 (low) to 3 (critical).
    pub fn class(self) -> u8 {
        self as u8
    }

    /// Lower-case name for logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Priority::Low => "low",
            Priority::Normal => "normal",
            Priority::High => "high",
            Priority::Critical => "critical",
        }
    }
}

/// Where a job is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum JobState {
    /// Waiting for a worker.
    Queued,
    /// Being proved.
    Running,
    /// Proved and verified.
    Succeeded,
    /// Failed.
    Failed,
    /// Cancelled by a client.
    Cancelled,
}

impl JobState {
    /// Whether the job has finished (its result is final).
    pub fn is_finished(self) -> bool {
        !matches!(self, JobState::Queued | JobState::Running)
    }

    /// Lower-case name for logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Queued => "queued",
            JobState::Running => "running",
            JobState::Succeeded => "succeeded",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
        }
    }
}

/// Time spent in each stage of a job.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JobTimings {
    /// From submission to a worker taking the job.
    pub queue_wait: Duration,
    /// Loading parameters.
    pub param_load: Duration,
    /// Circuit synthesis.
    pub synthesis: Duration,
    /// NTTs, MSMs and assembly.
    pub proving: Duration,
    /// Verification.
    pub verification: Duration,
    /// From submission to the result.
    pub total: Duration,
}

impl JobTimings {
    /// Adds `other` stage by stage (for metrics sums).
    pub fn accumulate(&mut self, other: &JobTimings) {
        self.queue_wait += other.queue_wait;
        self.param_load += other.param_load;
        self.synthesis += other.synthesis;
        self.proving += other.proving;
        self.verification += other.verification;
        self.total += other.total;
    }
}

/// A finished job's proof.
#[derive(Clone, Debug)]
pub struct JobOutput {
    /// The verified proof.
    pub output: ProofOutput,
    /// Per-stage timings, queue wait and total included.
    pub timings: JobTimings,
}

/// Why a job produced no proof.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FailureKind {
    /// The input could not be parsed or is inconsistent.
    InvalidInput,
    /// Parameters, synthesis, backend or verification failed.
    ProvingFailed,
    /// A client cancelled the job.
    Cancelled,
    /// The daemon stopped before the job could run (or finish within the drain grace).
    ShuttingDown,
    /// The prover panicked: a bug.
    Internal,
    /// The backend lacked a resource it may have later (device memory): the same request
    /// may succeed when retried.
    ResourceExhausted,
}

/// The longest error message a job keeps, a response carries or a log line repeats, in
/// bytes: parsers echo their input in errors (serde's "unknown variant …"), and a job's error
/// is kept for the retention time and returned by every Status.
pub const MAX_MESSAGE: usize = 1024;

pub use crate::pipeline::bounded;

/// A failed job's error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// What kind of failure.
    pub kind: FailureKind,
    /// Human-readable detail.
    pub message: String,
}

impl Failure {
    /// A failure of `kind`; the message is [`bounded`] to [`MAX_MESSAGE`].
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: bounded(&message.into(), MAX_MESSAGE),
        }
    }

    /// Classifies a prover error.
    pub fn from_prove_error(e: &ProveError) -> Self {
        let kind = match e {
            ProveError::InvalidInput(_) => FailureKind::InvalidInput,
            ProveError::Cancelled => FailureKind::Cancelled,
            ProveError::Backend(b) if b.is_retryable() => FailureKind::ResourceExhausted,
            ProveError::DeviceFailed {
                out_of_memory: true,
                ..
            } => FailureKind::ResourceExhausted,
            _ => FailureKind::ProvingFailed,
        };
        Self::new(kind, e.to_string())
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// A job's final result, shared by every waiter.
pub type JobResult = Result<Arc<JobOutput>, Failure>;

/// What watchers of a job see.
#[derive(Clone, Debug)]
pub enum JobPhase {
    /// Waiting for a worker.
    Queued,
    /// Being proved.
    Running,
    /// Finished.
    Finished(JobResult),
}

/// What a request id means to the client that sends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RequestIds {
    /// An idempotency key bound to its input (the socket protocol's): while it names a job
    /// that holds it, the same input returns that job and another input is refused
    /// ([`SubmitError::RequestIdConflict`]).
    #[default]
    Strict,
    /// A label for what is proved (Curio's `porep-<miner>-<sector>`, on the gRPC endpoint):
    /// the same input under it still returns the job that holds it, and another input makes
    /// a new job, which takes the label over, as Curio's own server proves every submission
    /// it is sent. The job it named runs on, or keeps its result, known by its job id.
    Label,
}

/// Why a submission was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubmitError {
    /// The queue has no room for this priority.
    #[error("queue full: {queued} jobs waiting (limit {limit} for this priority)")]
    QueueFull {
        /// Jobs waiting.
        queued: usize,
        /// The limit that applied.
        limit: usize,
    },
    /// The request id belongs to a job with a different input.
    #[error("request id {request_id:?} is already used by job {job} with a different input")]
    RequestIdConflict {
        /// The request id.
        request_id: String,
        /// The job that holds it.
        job: JobId,
    },
    /// The engine is shutting down.
    #[error("the daemon is shutting down")]
    ShuttingDown,
    /// The input failed the check made before queueing (bounded with [`bounded`]).
    #[error("{0}")]
    InvalidInput(String),
    /// The request id belongs to a job with the same input but a priority the resubmission
    /// cannot change to: lower than the job's, or the job is already running.
    #[error(
        "request id {request_id:?} is job {job}, {} at priority {}: priority {} cannot be given          (only a queued job's priority can be raised)",
        state.as_str(), priority.as_str(), requested.as_str()
    )]
    PriorityConflict {
        /// The request id.
        request_id: String,
        /// The job that holds it.
        job: JobId,
        /// The job's priority.
        priority: Priority,
        /// The job's state.
        state: JobState,
        /// The priority asked for.
        requested: Priority,
    },
}

/// Why a cancellation did nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CancelError {
    /// No such job.
    #[error("unknown job {0}")]
    UnknownJob(JobId),
    /// The job had already finished.
    #[error("job {0} has already finished ({1})")]
    AlreadyFinished(JobId, &'static str),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_caps_escapes_and_counts() {
        assert_eq!(bounded("plain", 10), "plain");
        assert_eq!(bounded("a\nb\x1b[31m", 100), "a\\nb\\u{1b}[31m");
        let long = "é".repeat(100); // two bytes each
        let cut = bounded(&long, 11);
        assert_eq!(cut, format!("{}… (190 more bytes)", "é".repeat(5)));
        assert!(
            Failure::new(FailureKind::InvalidInput, "x".repeat(5000))
                .message
                .len()
                < 1100
        );
    }
}

/// A job as Status reports it.
#[derive(Clone, Debug)]
pub struct JobSnapshot {
    /// The job.
    pub id: JobId,
    /// Who submitted it.
    pub owner: Owner,
    /// The client's request id.
    pub request_id: Option<String>,
    /// The proof kind.
    pub kind: ProofKind,
    /// The miner actor id, when the request names it (PoRep).
    pub miner: Option<u64>,
    /// The sector number, when the request names it (PoRep).
    pub sector: Option<u64>,
    /// Its priority.
    pub priority: Priority,
    /// Its state.
    pub state: JobState,
    /// (partitions proved, partitions in total).
    pub progress: (usize, usize),
    /// Time since submission.
    pub age: Duration,
    /// For failed and cancelled jobs, why.
    pub error: Option<String>,
}

/// An unfinished job with a deadline, as [`super::state::State::deadlines`] projects it: how
/// long until it is due and how long until the measured proving times say it ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeadlineView {
    pub id: JobId,
    /// Who submitted it: what a peer may see of the list is decided by it.
    pub owner: Owner,
    pub kind: ProofKind,
    pub priority: Priority,
    /// Queued or running.
    pub state: JobState,
    /// (partitions proved, partitions in total).
    pub progress: (usize, usize),
    /// Time until its deadline; zero once it has passed.
    pub due_in: Duration,
    /// How long ago its deadline passed; zero before it does.
    pub overdue: Duration,
    /// Time until it ends by the measured proving times; `None` where its kind, or a kind
    /// it waits behind, has not been measured yet.
    pub ends_in: Option<Duration>,
}

impl DeadlineView {
    /// How long after its deadline the projection says it ends; `None` when on time or
    /// unmeasured.
    pub fn late_by(&self) -> Option<Duration> {
        let end_after_due = self.ends_in?.saturating_add(self.overdue);
        end_after_due
            .checked_sub(self.due_in)
            .filter(|late| !late.is_zero())
    }
}

/// A job that the measured proving times say will end after its deadline
/// ([`super::state::State::at_risk`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AtRisk {
    pub id: JobId,
    pub kind: ProofKind,
    /// How long after its deadline it would end by the estimate.
    pub late_by: Duration,
}

/// What [`super::Engine::capacity`] reports: the queue and the workers as a scheduler sees
/// them before it sends a job of one kind and class.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Capacity {
    /// The class the estimate is for (the kind's default when none was asked for).
    pub priority: Priority,
    /// Queued jobs per class, [`Priority::class`] order (low to critical), all owners.
    pub queued: [usize; 4],
    /// Running jobs per class, as `queued`.
    pub running: [usize; 4],
    /// Workers that take any job (one more takes critical jobs only).
    pub workers: usize,
    /// Jobs of the class that may still be queued now (the critical reserve counted).
    pub queue_room: usize,
    /// When a job of the kind and class submitted now would start, from now; `None` when
    /// that depends on a kind not measured yet ([`super::estimate`]).
    pub estimated_start: Option<Duration>,
    /// The kind's measured proving time (a running average), `None` before a job of it
    /// succeeded.
    pub estimated_proof: Option<Duration>,
    /// Succeeded jobs of the kind measured since start.
    pub measured_jobs: u64,
}

/// Which jobs a worker takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lane {
    /// Any job, highest priority first (the `proving.workers` workers).
    Any,
    /// Critical jobs only (WinningPoSt): one extra worker, so that a critical job starts at
    /// once instead of waiting for a running job to finish. It then shares the backend with
    /// that job; the GPU backend interleaves the two at the granularity of its stages.
    Critical,
}
