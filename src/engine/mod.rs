//! The job engine: a bounded priority queue in front of a fixed set of proving workers.
//!
//! The engine knows nothing of sockets or wire formats: it takes [`ProofRequest`]s, runs them
//! on a [`Runner`] (the [`ProvingService`](crate::pipeline::ProvingService) in the daemon, a
//! fake in tests) on dedicated OS threads, and reports through `tokio::sync::watch` channels
//! (which work without a runtime) and an [`Observer`] callback. The daemon is a thin shell
//! that maps the wire protocol onto it.
//!
//! Rules: critical > high > normal > low, first come first served within a class; a job
//! belongs to the uid that submitted it ([`Owner`]); a request id of the same owner with the
//! same input returns the same job, with a different input an error; Cancel
//! removes a queued job or stops a running one at its next partition boundary; finished jobs
//! are kept for the retention time, then dropped.

pub mod estimate;
pub mod journal;
mod state;
mod types;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::watch;

pub use state::EngineStats;
pub use types::*;

use crate::pipeline::{
    Due, JobControl, ProgressSink, ProofOutput, ProveError, ProvingService, StepEvent,
};
use crate::proofs::{ProofKind, ProofRequest};
use crate::srs::ParamsId;
use journal::format::{self as jformat, Accepted, Finished};
use journal::{Journal, Record, Recorder};
use state::{Cancelled, NewJob, Outcome, State};

/// Runs one proof. Called on a worker thread; may block for minutes.
pub trait Runner: Send + Sync + 'static {
    /// Proves `request`, checking `control` for cancellation at partition boundaries.
    fn run(&self, request: &ProofRequest, control: &JobControl) -> Result<ProofOutput, ProveError>;

    /// Checks `request` cheaply before it is queued (on the submitting thread); an error
    /// refuses the submission as invalid input. The default accepts everything.
    fn check(&self, request: &ProofRequest) -> Result<(), ProveError> {
        let _ = request;
        Ok(())
    }

    /// The parameter set `request` will prove with, where it can be told before it runs
    /// (on the submitting thread, after [`Runner::check`]); the engine keeps it with the
    /// job ([`Engine::needing`]). The default knows none.
    fn params(&self, request: &ProofRequest) -> Option<ParamsId> {
        let _ = request;
        None
    }
}

impl Runner for ProvingService {
    fn run(&self, request: &ProofRequest, control: &JobControl) -> Result<ProofOutput, ProveError> {
        self.prove(request, control)
    }

    fn check(&self, request: &ProofRequest) -> Result<(), ProveError> {
        request.check()
    }

    fn params(&self, request: &ProofRequest) -> Option<ParamsId> {
        request.params_id().ok()
    }
}

/// Something that happened to a job, for logging and for its watchers.
#[derive(Debug)]
pub enum JobEvent {
    /// A worker took the job.
    Started(JobSnapshot),
    /// The job finished (any outcome, cancellation while queued included).
    Finished(JobSnapshot, JobResult),
    /// A running job's proof took a step (parameters, a partition's stages, verification).
    Progress(JobProgress),
}

/// A step of a running job's proof ([`crate::pipeline::Step`]), with where the job stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobProgress {
    /// The job.
    pub id: JobId,
    /// The step, the partition it concerns, and the time in the stage it ends.
    pub event: StepEvent,
    /// (partitions proved, partitions in total) after the step, as in [`JobSnapshot`].
    pub progress: (usize, usize),
    /// Time since the job was submitted.
    pub age: Duration,
}

/// Receives [`JobEvent`]s, on whichever thread caused them; must not block.
pub type Observer = Arc<dyn Fn(JobEvent) + Send + Sync>;

/// The engine's limits.
#[derive(Clone, Debug, PartialEq)]
pub struct EngineConfig {
    /// Proofs run at once.
    pub workers: usize,
    /// Jobs waiting at once.
    pub max_queued: usize,
    /// Of `max_queued`, slots only critical jobs may take.
    pub critical_reserve: usize,
    /// How long finished jobs are kept.
    pub result_retention: Duration,
    /// Finished jobs kept at most.
    pub max_finished: usize,
}

/// What [`Engine::submit`] returns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Submitted {
    /// The job.
    pub id: JobId,
    /// Whether the request id matched an existing job.
    pub existing: bool,
    /// Whether that existing job was queued at a lower priority and now has the one asked
    /// for.
    pub raised: bool,
    /// The job's priority.
    pub priority: Priority,
    /// The job's state.
    pub state: JobState,
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    runner: Arc<dyn Runner>,
    observer: Observer,
    /// Bumped on every state change, so that the daemon can refresh its status line.
    changes: watch::Sender<u64>,
    /// The journal, where there is one.
    recorder: Option<Arc<dyn Recorder>>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock would be a bug in this module; the state is still
        // consistent field by field, so keep serving rather than cascade the panic.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn changed(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Records what `make` says, where there is a journal (called under the lock).
    fn record(&self, make: impl FnOnce() -> Option<Record>) {
        if let Some(r) = &self.recorder {
            if let Some(record) = make() {
                r.record(record);
            }
        }
    }

    /// Makes the records durable, where there is a journal (called outside the lock).
    fn sync(&self) {
        if let Some(r) = &self.recorder {
            r.sync();
        }
    }
}

/// Now, in Unix milliseconds (the journal's clock: it outlives the process).
fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis().min(u128::from(u64::MAX)) as u64)
}

/// The journal's record of job `id`'s acceptance.
fn accepted_record(st: &State, id: JobId, input_stored: bool) -> Option<Record> {
    let j = st.jobs.get(&id)?;
    Some(Record::Accepted(Accepted {
        id,
        owner: j.owner,
        request_id: j.request_id.clone(),
        priority: jformat::priority_code(j.priority),
        kind: jformat::kind_code(j.kind),
        miner: j.miner,
        sector: j.sector,
        digest: j.digest,
        input_stored,
        submitted_ms: unix_ms(),
    }))
}

/// The journal's record of job `id`'s result.
fn finished_record(id: JobId, result: &JobResult) -> Record {
    Record::Finished(Finished {
        id,
        finished_ms: unix_ms(),
        outcome: jformat::Outcome::of(result),
    })
}

/// The job engine. Dropping it does not stop the workers: call [`Engine::shut_down`].
pub struct Engine {
    shared: Arc<Shared>,
    workers: Mutex<Vec<JoinHandle<()>>>,
}

impl Engine {
    /// Starts `config.workers` worker threads running jobs on `runner`, and one more that
    /// runs only critical jobs ([`Lane::Critical`]).
    pub fn start(
        config: EngineConfig,
        runner: Arc<dyn Runner>,
        observer: Observer,
    ) -> std::io::Result<Self> {
        Self::start_with(config, runner, observer, None)
    }

    /// [`Engine::start`], with a journal where there is one: the engine takes up the jobs it
    /// recovered (unfinished ones queued again, finished ones with their results), gives out
    /// ids from its `next_id` on, and records every job from now on.
    pub fn start_with(
        config: EngineConfig,
        runner: Arc<dyn Runner>,
        observer: Observer,
        journal: Option<Journal>,
    ) -> std::io::Result<Self> {
        let workers = config.workers.max(1);
        let mut state = State::new(config);
        let recorder = journal.map(|j| {
            let jobs = j
                .jobs
                .into_iter()
                .map(|job| {
                    let params = match &job.state {
                        journal::RecoveredState::Queued(request) => runner.params(request),
                        journal::RecoveredState::Finished { .. } => None,
                    };
                    (job, params)
                })
                .collect();
            state.restore(jobs, j.next_id, Instant::now());
            j.recorder
        });
        let shared = Arc::new(Shared {
            state: Mutex::new(state),
            wake: Condvar::new(),
            runner,
            observer,
            changes: watch::Sender::new(0),
            recorder,
        });
        let lanes = (0..workers)
            .map(|i| (format!("cuzk-worker-{i}"), Lane::Any))
            .chain([("cuzk-critical".to_string(), Lane::Critical)]);
        let handles = lanes
            .map(|(name, lane)| {
                let shared = shared.clone();
                std::thread::Builder::new()
                    .name(name)
                    .spawn(move || worker_loop(&shared, lane))
            })
            .collect::<std::io::Result<Vec<_>>>()?;
        Ok(Self {
            shared,
            workers: Mutex::new(handles),
        })
    }

    /// Checks `request` ([`Runner::check`]), then queues it for `owner` with `priority`
    /// (default: the kind's class), or returns the job of `owner` that already holds
    /// `request_id` if its input is the same (see [`state::State::submit`] for when a
    /// request id is released, and what a different priority does). Blocks for as long as
    /// the check and hashing the input take.
    pub fn submit(
        &self,
        owner: Owner,
        request: ProofRequest,
        priority: Option<Priority>,
        request_id: Option<String>,
    ) -> Result<Submitted, SubmitError> {
        self.submit_as(
            owner,
            request,
            priority,
            request_id,
            RequestIds::Strict,
            Due::Never,
        )
    }

    /// [`Engine::submit`] with the request id meaning what `ids` says (a key bound to its
    /// input, or a label under which another input makes a new job) and the job due at `due`
    /// (within its class, jobs due earlier go first, at every stage; a resubmission keeps the
    /// job's).
    pub fn submit_as(
        &self,
        owner: Owner,
        request: ProofRequest,
        priority: Option<Priority>,
        request_id: Option<String>,
        ids: RequestIds,
        due: Due,
    ) -> Result<Submitted, SubmitError> {
        // Outside the lock, like the hash: parsing a 32 GiB C1 output takes a while.
        self.shared
            .runner
            .check(&request)
            .map_err(|e| SubmitError::InvalidInput(bounded(&e.to_string(), MAX_MESSAGE)))?;
        let params = self.shared.runner.params(&request);
        let default = Priority::for_kind(request.kind());
        // Hash outside the lock: a 32 GiB C1 output is tens of megabytes. So is storing it
        // in the journal (by its digest) before the job exists.
        let digest = journal::format::digest(&request);
        let recorder = self.shared.recorder.as_ref().filter(|_| {
            // Only for a submission that will make a job: a resubmission of a known job, or
            // one refused for a full queue, stores nothing. If the answer changes before the
            // job is made (its predecessor under the request id failed meanwhile), the job
            // is recorded without its input, and reported failed should the daemon crash.
            let wanted = priority.unwrap_or(default);
            self.shared.lock().would_queue(
                owner,
                request_id.as_deref(),
                ids,
                &digest,
                wanted,
                Instant::now(),
            )
        });
        let stored = recorder.is_some_and(|r| r.store_input(&request, &digest));
        let mut st = self.shared.lock();
        let result = st.submit(
            NewJob {
                request,
                owner,
                params,
                digest,
                priority,
                request_id,
                request_ids: ids,
                due,
            },
            Instant::now(),
        );
        match &result {
            Ok((id, Outcome::Queued)) => self.shared.record(|| accepted_record(&st, *id, stored)),
            Ok((id, Outcome::Raised)) => self.shared.record(|| {
                let p = st.jobs.get(id)?.priority;
                Some(Record::Priority {
                    id: *id,
                    priority: jformat::priority_code(p),
                })
            }),
            _ => {}
        }
        let made = matches!(result, Ok((_, Outcome::Queued)));
        let submitted = result.map(|(id, outcome)| {
            let (priority, state) = st
                .jobs
                .get(&id)
                .map_or((priority.unwrap_or(default), JobState::Queued), |j| {
                    (j.priority, j.state)
                });
            let submitted = Submitted {
                id,
                existing: outcome != Outcome::Queued,
                raised: outcome == Outcome::Raised,
                priority,
                state,
            };
            (submitted, outcome)
        });
        drop(st);
        if stored && !made {
            // Nothing names the stored input: the journal may drop it.
            if let Some(r) = recorder {
                r.release_input(&digest);
            }
        }
        let (submitted, outcome) = submitted?;
        if outcome != Outcome::Existing {
            // Durable before the client hears of the job.
            self.shared.sync();
            // Every worker: the one woken must be one whose lane takes the job.
            self.shared.wake.notify_all();
            self.shared.changed();
        }
        Ok(submitted)
    }

    /// A receiver that sees the job's phase, or `None` for an unknown job.
    pub fn watch(&self, id: JobId) -> Option<watch::Receiver<JobPhase>> {
        self.shared
            .lock()
            .jobs
            .get(&id)
            .map(|j| j.phase.subscribe())
    }

    /// Cancels a job; returns whether it was running (and will stop at its next partition
    /// boundary) rather than queued (and is already removed). A queued job's cancellation
    /// is durable before anyone hears of it: this answer, its waiters' and its watchers'.
    pub fn cancel(&self, id: JobId) -> Result<bool, CancelError> {
        let now = Instant::now();
        let mut st = self.shared.lock();
        let result = match st.cancel(id, now)? {
            Cancelled::Queued(result) => result,
            Cancelled::Running { record } => {
                // Its result is decided and durable before the answer: a crash before the
                // job stops must not queue it again. Synced even where this Cancel records
                // nothing: the result it found decided (an earlier Cancel's, or the one its
                // worker recorded under the lock) may still be on its way to the disk.
                if record {
                    self.shared
                        .record(|| Some(finished_record(id, &state::cancelled_while_running())));
                }
                drop(st);
                self.shared.sync();
                self.shared.changed();
                return Ok(true);
            }
        };
        self.shared.record(|| Some(finished_record(id, &result)));
        let snap = st.snapshot(id, now);
        drop(st);
        // Outside the lock, like a submission's; the waiters see the result after it.
        self.shared.sync();
        self.shared.lock().publish(id, result.clone());
        if let Some(snap) = snap {
            (self.shared.observer)(JobEvent::Finished(snap, result));
        }
        self.shared.changed();
        Ok(false)
    }

    /// One job's snapshot.
    pub fn snapshot(&self, id: JobId) -> Option<JobSnapshot> {
        self.shared.lock().snapshot(id, Instant::now())
    }

    /// The snapshot of the newest known job `owner` submitted under `request_id` (`None`:
    /// of any owner; see [`state::State::lookup`]).
    pub fn lookup(&self, request_id: &str, owner: Option<Owner>) -> Option<JobSnapshot> {
        self.shared.lock().lookup(request_id, owner, Instant::now())
    }

    /// The queued and running jobs that prove with the parameter set `params` (as far as
    /// [`Runner::params`] could tell at their submission), by id.
    pub fn needing(&self, params: &ParamsId) -> Vec<JobId> {
        self.shared.lock().needing(params)
    }

    /// Every known job's snapshot, by id.
    pub fn snapshots(&self) -> Vec<JobSnapshot> {
        self.shared.lock().snapshots(Instant::now())
    }

    /// The queue per class, the room left for `priority` (the kind's default when `None`),
    /// and when a job of `kind` at that class would start if submitted now
    /// ([`state::State::capacity`]). A short lock; never waits for a proof.
    pub fn capacity(&self, kind: ProofKind, priority: Option<Priority>) -> Capacity {
        self.shared.lock().capacity(kind, priority, Instant::now())
    }

    /// Every queued and running job with a deadline, earliest due first, with when it is
    /// due and when the measured proving times say it ends ([`state::State::deadlines`]). A
    /// short lock; never waits for a proof.
    pub fn deadlines(&self) -> Vec<DeadlineView> {
        self.shared.lock().deadlines(Instant::now())
    }

    /// Counters since start.
    pub fn stats(&self) -> EngineStats {
        let st = self.shared.lock();
        let mut stats = st.stats.clone();
        for r in st.at_risk(Instant::now()) {
            *stats.at_risk.entry(r.kind).or_default() += 1;
        }
        stats
    }

    /// Drops expired results. Also done on every submission; call it periodically so that
    /// memory is released on an idle daemon too.
    pub fn reap(&self) {
        let now = Instant::now();
        let risks = {
            let mut st = self.shared.lock();
            st.reap(now);
            st.newly_at_risk(now)
        };
        for r in risks {
            tracing::warn!(
                job = r.id,
                kind = %r.kind,
                late_by_s = format_args!("{:.1}", r.late_by.as_secs_f64()),
                "job will likely miss its deadline, by the proving times measured so far"
            );
        }
    }

    /// How long finished results are kept.
    pub fn retention(&self) -> Duration {
        self.shared.lock().retention()
    }

    /// A receiver that changes whenever any job changes state.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.shared.changes.subscribe()
    }

    /// Refuses new submissions, answers every queued job "shutting down", and lets the
    /// workers exit once their current job is done.
    pub fn shut_down(&self) {
        let now = Instant::now();
        let mut st = self.shared.lock();
        let finished = st.shut_down(now);
        for (id, result) in &finished {
            self.shared.record(|| Some(finished_record(*id, result)));
        }
        let snaps: Vec<Option<JobSnapshot>> = finished
            .iter()
            .map(|(id, _)| st.snapshot(*id, now))
            .collect();
        drop(st);
        // Durable before the queued jobs' waiters are answered "shutting down": a crash
        // before the sync queues them again after the restart, so they must not have been
        // told otherwise.
        self.shared.sync();
        let mut st = self.shared.lock();
        for (id, result) in &finished {
            st.publish(*id, result.clone());
        }
        drop(st);
        for (snap, (_, result)) in snaps.into_iter().zip(finished) {
            if let Some(snap) = snap {
                (self.shared.observer)(JobEvent::Finished(snap, result));
            }
        }
        self.shared.wake.notify_all();
        self.shared.changed();
    }

    /// Asks running jobs to stop at their next partition boundary (when the drain grace is
    /// over); they finish as "shutting down".
    pub fn cancel_running(&self) {
        self.shared.lock().cancel_running();
    }

    /// Whether [`Engine::shut_down`] was called.
    pub fn is_shutting_down(&self) -> bool {
        self.shared.lock().shutting_down
    }

    /// Jobs being proved.
    pub fn running(&self) -> usize {
        self.shared.lock().stats.running
    }

    /// Whether every worker thread has exited (after [`Engine::shut_down`]).
    pub fn workers_exited(&self) -> bool {
        let workers = self.workers.lock().unwrap_or_else(PoisonError::into_inner);
        workers.iter().all(|h| h.is_finished())
    }

    /// The watchdog's liveness check: every worker thread is alive and the engine's lock can
    /// be taken within `within`. Blocks for at most about `within`.
    pub fn liveness(&self, within: Duration) -> Result<(), String> {
        let dead = {
            let workers = self.workers.lock().unwrap_or_else(PoisonError::into_inner);
            workers.iter().filter(|h| h.is_finished()).count()
        };
        let deadline = Instant::now() + within;
        loop {
            match self.shared.state.try_lock() {
                Ok(st) if dead > 0 && !st.shutting_down => {
                    return Err(format!("{dead} worker thread(s) have exited"));
                }
                Ok(_) => return Ok(()),
                Err(std::sync::TryLockError::Poisoned(_)) => {
                    return Err("engine lock poisoned".into())
                }
                Err(std::sync::TryLockError::WouldBlock) if Instant::now() >= deadline => {
                    return Err(format!("engine lock held for more than {within:?}"));
                }
                Err(std::sync::TryLockError::WouldBlock) => {
                    std::thread::sleep(Duration::from_millis(5))
                }
            }
        }
    }
}

fn worker_loop(shared: &Shared, lane: Lane) {
    loop {
        let assignment = {
            let mut st = shared.lock();
            loop {
                if let Some(a) = st.next_assignment(Instant::now(), lane) {
                    shared.record(|| Some(Record::Started { id: a.id }));
                    let snap = st.snapshot(a.id, Instant::now());
                    drop(st);
                    let age = snap.as_ref().map_or(Duration::ZERO, |s| s.age);
                    if let Some(snap) = snap {
                        (shared.observer)(JobEvent::Started(snap));
                    }
                    // The control of a running job is its last (a raised priority replaces
                    // a queued job's): its steps go to the observer from here on.
                    report_progress(shared, &a, age);
                    break a;
                }
                if st.shutting_down {
                    return;
                }
                st = shared.wake.wait(st).unwrap_or_else(PoisonError::into_inner);
            }
        };
        shared.changed();
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            shared.runner.run(&assignment.request, &assignment.control)
        }));
        let result = match outcome {
            Ok(Ok(output)) => Ok(output),
            Ok(Err(e)) => Err(Failure::from_prove_error(&e)),
            Err(panic) => Err(Failure::new(FailureKind::Internal, panic_message(&*panic))),
        };
        // The request (possibly a large C1 output) is released here, with the job's.
        drop(assignment.request);
        let now = Instant::now();
        let id = assignment.id;
        let result = {
            let mut st = shared.lock();
            let result = st.final_result(id, result, now);
            // Recorded under the lock, with the result: a Cancel that finds it made records
            // nothing and relies on its sync to cover this record. (A job a Cancel reached
            // has its result recorded already, by the Cancel.)
            if let Some(result) = result.as_ref().filter(|_| !st.cancel_recorded(id)) {
                shared.record(|| Some(finished_record(id, result)));
            }
            result
        };
        if result.is_some() {
            // Durable before anyone sees it: a client that got the proof gets it again
            // after a crash. Also where the Cancel recorded it: its sync may not be done.
            shared.sync();
        }
        let mut st = shared.lock();
        if let Some(result) = result {
            st.complete_running(id, result, now);
        }
        let event = st.snapshot(id, now).zip(result_of(&st, id));
        drop(st);
        if let Some((snap, result)) = event {
            (shared.observer)(JobEvent::Finished(snap, result));
        }
        shared.changed();
    }
}

/// Sends the steps of `assignment`'s proof to the observer as [`JobEvent::Progress`], with
/// the job's id, its partitions and its age (`age` when it started).
fn report_progress(shared: &Shared, assignment: &state::Assignment, age: Duration) {
    let observer = shared.observer.clone();
    let id = assignment.id;
    let submitted = Instant::now().checked_sub(age);
    // Weak: the control holds the sink, which must not keep the control alive.
    let control = Arc::downgrade(&assignment.control);
    let sink: ProgressSink = Arc::new(move |event: &StepEvent| {
        let progress = control.upgrade().map_or((0, 0), |c| c.progress());
        let age = submitted.map_or(Duration::ZERO, |t| t.elapsed());
        observer(JobEvent::Progress(JobProgress {
            id,
            event: *event,
            progress,
            age,
        }));
    });
    assignment.control.on_progress(sink);
}

/// A finished job's result.
fn result_of(st: &State, id: JobId) -> Option<JobResult> {
    match &*st.jobs.get(&id)?.phase.borrow() {
        JobPhase::Finished(r) => Some(r.clone()),
        _ => None,
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    let detail = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into());
    format!("the prover panicked: {detail}")
}

#[cfg(test)]
mod tests;
