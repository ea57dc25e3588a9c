//! What a running proof shares with whoever started it, and what every stage of the
//! pipeline returns: [`JobControl`] (rank, cancellation, progress, the devices to avoid),
//! [`ProveError`], [`StageTimings`], [`ProvedOn`], and [`catch_panic`], which turns a panic of
//! circuit code into the job's error. The bottom of the pipeline: it uses nothing of it but
//! the progress types.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::progress::{ProgressSink, Step, StepEvent};
use crate::prover::ProverError;
use crate::srs::SrsError;

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

/// When a job must be done by, where its client said: within a class, jobs due earlier are
/// synthesized and proved first, and jobs with no deadline after every job with one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum Due {
    /// Done by then.
    At(Instant),
    /// No deadline.
    #[default]
    Never,
}

impl Due {
    /// The instant, where there is one.
    pub fn instant(self) -> Option<Instant> {
        match self {
            Due::At(t) => Some(t),
            Due::Never => None,
        }
    }
}

/// Shared between a running proof and whoever started it: its rank in the stages,
/// cancellation and progress.
pub struct JobControl {
    class: u8,
    due: Due,
    seq: u64,
    cancelled: AtomicBool,
    partitions_total: AtomicUsize,
    partitions_done: AtomicUsize,
    /// Set while the job has partitions in the stages: drops them on cancel.
    on_cancel: Mutex<Option<Box<dyn Fn() + Send + Sync>>>,
    /// Where the proof's steps are reported, once someone attached a sink.
    progress: std::sync::OnceLock<ProgressSink>,
    /// Devices the job's partitions must not be proved on (those that made a proof of it
    /// that failed verification), and those its partitions were proved on.
    devices: Mutex<JobDevices>,
}

/// Which devices a job's partitions avoid, and which proved them.
#[derive(Debug, Default)]
struct JobDevices {
    avoid: Vec<usize>,
    used: Vec<usize>,
}

impl std::fmt::Debug for JobControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobControl")
            .field("class", &self.class)
            .field("due", &self.due)
            .field("seq", &self.seq)
            .field("cancelled", &self.is_cancelled())
            .field("progress", &self.progress())
            .finish()
    }
}

/// Orders jobs that share the stages: every control gets the next number.
static NEXT_SEQ: AtomicU64 = AtomicU64::new(1);

impl JobControl {
    /// A fresh control of the normal class (1), not cancelled, no progress.
    pub fn new() -> Arc<Self> {
        Self::with_class(1)
    }

    /// A fresh control of `class` (0 low, 1 normal, 2 high, 3 critical): partitions of a higher class
    /// are synthesized and proved first; within a class, in the order the controls were made.
    pub fn with_class(class: u8) -> Arc<Self> {
        Self::with_class_due(class, Due::Never)
    }

    /// A fresh control of `class` due at `due`: within its class, before the jobs due later
    /// (those with no deadline last), then in the order the controls were made.
    pub fn with_class_due(class: u8, due: Due) -> Arc<Self> {
        Arc::new(Self {
            class,
            due,
            seq: NEXT_SEQ.fetch_add(1, Ordering::Relaxed),
            cancelled: AtomicBool::new(false),
            partitions_total: AtomicUsize::new(0),
            partitions_done: AtomicUsize::new(0),
            on_cancel: Mutex::new(None),
            progress: std::sync::OnceLock::new(),
            devices: Mutex::new(JobDevices::default()),
        })
    }

    /// Reports the proof's steps to `sink` from now on (see [`super::progress`]). Only the
    /// first sink attached is kept; returns whether this one was.
    pub fn on_progress(&self, sink: ProgressSink) -> bool {
        self.progress.set(sink).is_ok()
    }

    /// The attached sink, for the stages that report a partition's steps on their own
    /// threads.
    pub(crate) fn progress_sink(&self) -> Option<ProgressSink> {
        self.progress.get().cloned()
    }

    /// Reports a step to the attached sink, if any.
    pub(crate) fn report(&self, step: Step, partition: Option<usize>, took: Duration) {
        if let Some(sink) = self.progress.get() {
            report_to(sink, step, partition, took);
        }
    }

    /// Asks the proof to stop: its waiting and queued partitions are dropped at once, a
    /// running one at its next stage boundary.
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::SeqCst);
        let hook = self.on_cancel.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(stop) = hook.as_ref() {
            stop();
        }
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
    pub(crate) fn class(&self) -> u8 {
        self.class
    }
    /// When the job must be done by.
    pub fn due(&self) -> Due {
        self.due
    }
    pub(crate) fn seq(&self) -> u64 {
        self.seq
    }
    pub(crate) fn set_on_cancel(&self, hook: Option<Box<dyn Fn() + Send + Sync>>) {
        *self.on_cancel.lock().unwrap_or_else(|p| p.into_inner()) = hook;
    }
    pub(crate) fn set_total(&self, total: usize) {
        self.partitions_total.store(total, Ordering::SeqCst);
    }
    pub(crate) fn partition_done(&self) {
        self.partitions_done.fetch_add(1, Ordering::SeqCst);
    }
    fn job_devices(&self) -> std::sync::MutexGuard<'_, JobDevices> {
        self.devices.lock().unwrap_or_else(|p| p.into_inner())
    }
    /// The devices the job's partitions must not be proved on.
    pub(crate) fn avoided_devices(&self) -> Vec<usize> {
        self.job_devices().avoid.clone()
    }
    /// Records that device `d` proved a partition of the job.
    pub(crate) fn proved_on(&self, d: usize) {
        let mut j = self.job_devices();
        if !j.used.contains(&d) {
            j.used.push(d);
        }
    }
    /// Starts the job's proving again, avoiding the devices its partitions were proved on;
    /// returns them.
    pub(super) fn prove_again_without_used(&self) -> Vec<usize> {
        self.partitions_done.store(0, Ordering::SeqCst);
        let mut j = self.job_devices();
        let used = std::mem::take(&mut j.used);
        j.avoid = used.clone();
        used
    }
    pub(crate) fn check(&self) -> Result<(), ProveError> {
        if self.is_cancelled() {
            Err(ProveError::Cancelled)
        } else {
            Ok(())
        }
    }
}

/// Calls `sink` with one step; a sink that panics takes nothing down with it (it is a
/// watcher's, not the proof's).
pub(crate) fn report_to(sink: &ProgressSink, step: Step, partition: Option<usize>, took: Duration) {
    let event = StepEvent {
        step,
        partition,
        took,
    };
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sink(&event)));
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
    /// A partition failed on every device it was tried on (and, where no other device was
    /// usable, on the CPU prover).
    #[error("partition {partition} failed on {}: {cause}", devices.join(", "))]
    DeviceFailed {
        /// The partition.
        partition: usize,
        /// The devices it was tried on, in order (`"cpu prover"` for the fallback).
        devices: Vec<String>,
        /// The last failure.
        cause: String,
        /// Whether the last failure was a device out of memory (the job may succeed later).
        out_of_memory: bool,
    },
    /// A partition of this circuit needs more host memory than the budget leaves beside the
    /// resident parameters: it can never be proved with this configuration.
    #[error(
        "a partition needs {needed} bytes of host memory; proving.memory_budget leaves {available} \
         beside the resident parameters"
    )]
    ExceedsMemoryBudget {
        /// Bytes one partition reserves.
        needed: u64,
        /// Bytes the budget leaves for partitions.
        available: u64,
    },
    /// Loading this parameter set needs more host memory than the budget leaves beside what
    /// the process holds (other resident sets, shapes, pools): it can never be loaded now.
    #[error(
        "loading the parameters needs up to {needed} bytes of host memory; \
         proving.memory_budget leaves {available} beside what the process holds"
    )]
    ParamsExceedMemoryBudget {
        /// The load's upper bound.
        needed: u64,
        /// Bytes the budget leaves.
        available: u64,
    },
}

/// Which provers made a job's partition proofs: each device (by its index in the service)
/// and the CPU prover partitions fall back to where no usable device is left.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ProvedOn {
    devices: std::collections::BTreeMap<usize, usize>,
    fallback: usize,
}

impl ProvedOn {
    /// One partition proved on device `on`, or (`None`) on the fallback CPU prover.
    pub(crate) fn record(&mut self, on: Option<usize>) {
        match on {
            Some(d) => *self.devices.entry(d).or_default() += 1,
            None => self.fallback += 1,
        }
    }

    /// The provers by name (`names[d]` for device `d`, `fallback` for the CPU prover): one
    /// name where one prover made every partition, else each with its count
    /// (`cuda:0 NVIDIA H200 ×8, fallback cpu (16 threads) ×2`); `None` where nothing was
    /// proved.
    pub(crate) fn describe(&self, names: &[String], fallback: &str) -> Option<String> {
        let mut named: Vec<(String, usize)> = self
            .devices
            .iter()
            .map(|(&d, &n)| {
                let name = names
                    .get(d)
                    .cloned()
                    .unwrap_or_else(|| format!("device {d}"));
                (name, n)
            })
            .collect();
        if self.fallback > 0 {
            named.push((format!("fallback {fallback}"), self.fallback));
        }
        match named.as_slice() {
            [] => None,
            [(one, _)] => Some(one.clone()),
            all => Some(
                all.iter()
                    .map(|(name, n)| format!("{name} ×{n}"))
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
        }
    }
}

/// Runs `f`, turning a panic into an error. The storage-proofs circuits assert on inputs
/// that do not fit together (e.g. vanilla proofs of another sector); such input must fail the
/// job, not the process.
pub(crate) fn catch_panic<T>(
    what: &str,
    f: impl FnOnce() -> Result<T, ProveError>,
) -> Result<T, ProveError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|payload| {
        let msg = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        Err(ProveError::InvalidInput(format!(
            "{what} rejected the input: {msg}"
        )))
    })
}

#[cfg(test)]
mod tests {
    use super::ProvedOn;

    #[test]
    fn the_provers_that_made_a_proof_are_named() {
        let names = ["cuda:0 H200".to_string(), "cuda:1 H200".to_string()];
        let describe = |on: &[Option<usize>]| {
            let mut p = ProvedOn::default();
            on.iter().for_each(|&d| p.record(d));
            p.describe(&names, "cpu (16 threads)")
        };
        assert_eq!(describe(&[]), None);
        assert_eq!(
            describe(&[Some(1), Some(1)]).as_deref(),
            Some("cuda:1 H200")
        );
        assert_eq!(
            describe(&[None]).as_deref(),
            Some("fallback cpu (16 threads)")
        );
        assert_eq!(
            describe(&[Some(1), None, Some(0), Some(1)]).as_deref(),
            Some("cuda:0 H200 ×1, cuda:1 H200 ×2, fallback cpu (16 threads) ×1")
        );
        let mut p = ProvedOn::default();
        p.record(Some(7));
        assert_eq!(p.describe(&names, "cpu").as_deref(), Some("device 7"));
    }
}
