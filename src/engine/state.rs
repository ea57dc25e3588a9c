//! The engine's bookkeeping: jobs, the priority queue, request ids, retention and counters.
//! Pure logic under one lock; the threads and waking live in [`super::Engine`].

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::estimate::{
    estimate_start, estimate_starts, time_left, Measured, QueuedJob, RunningJob,
};
use super::journal::{RecoveredJob, RecoveredState};
use super::types::*;
use super::EngineConfig;
use crate::pipeline::{Due, JobControl};
use crate::proofs::{ProofKind, ProofRequest};
use crate::srs::ParamsId;

/// One job.
pub(super) struct Job {
    pub kind: ProofKind,
    /// Who submitted it.
    pub owner: Owner,
    /// The parameter set it proves with, where its input names one
    /// ([`ProofRequest::params_id`]).
    pub params: Option<ParamsId>,
    /// Miner and sector, when the request names them (PoRep), for logs.
    pub miner: Option<u64>,
    pub sector: Option<u64>,
    pub priority: Priority,
    pub request_id: Option<String>,
    pub digest: [u8; 32],
    /// The input; dropped as soon as the job finishes so that large C1 outputs are freed.
    pub request: Option<Arc<ProofRequest>>,
    pub control: Arc<JobControl>,
    /// When its client needs it done by ([`Due::Never`] when it said nothing).
    pub due: Due,
    pub phase: watch::Sender<JobPhase>,
    pub state: JobState,
    pub submitted: Instant,
    pub started: Option<Instant>,
    /// The lane of the worker that took it, once one did.
    pub lane: Option<Lane>,
    pub finished: Option<Instant>,
    pub error: Option<String>,
    /// A Cancel reached it while it ran: its result is "cancelled" whatever its proof does,
    /// and the journal has it already (recorded before the Cancel was answered).
    pub cancel_recorded: bool,
    /// Its worker has made its result ([`State::final_result`]): a Cancel comes too late to
    /// change it.
    pub result_made: bool,
    /// The log has warned that it will likely miss its deadline ([`State::newly_at_risk`]).
    pub warned_at_risk: bool,
}

impl Job {
    /// Whether its waiters have been shown its result ([`State::publish`]).
    fn is_published(&self) -> bool {
        matches!(*self.phase.borrow(), JobPhase::Finished(_))
    }
}

/// What [`State::cancel`] did.
#[derive(Debug)]
pub enum Cancelled {
    /// A queued job, finished at once with this result.
    Queued(JobResult),
    /// A running job, asked to stop. `record`: this Cancel decided its result ("cancelled",
    /// [`cancelled_while_running`]), which the engine makes durable before answering; false
    /// when an earlier Cancel did, or its worker had made its result already.
    Running { record: bool },
}

/// The result of a job a Cancel reached while it ran.
pub fn cancelled_while_running() -> JobResult {
    Err(Failure::new(
        FailureKind::Cancelled,
        "cancelled while running",
    ))
}

/// What a worker takes from the queue.
pub(super) struct Assignment {
    pub id: JobId,
    pub request: Arc<ProofRequest>,
    pub control: Arc<JobControl>,
}

/// Counters kept since start, for Status and metrics.
#[derive(Clone, Debug, Default)]
pub struct EngineStats {
    /// Jobs waiting.
    pub queued: usize,
    /// Jobs being proved.
    pub running: usize,
    /// Finished jobs by kind and final state.
    pub finished: BTreeMap<(ProofKind, JobState), u64>,
    /// Sum of the stage timings of succeeded jobs, by kind.
    pub stage_sums: BTreeMap<ProofKind, JobTimings>,
    /// Submissions refused because the queue was full.
    pub rejected_queue_full: u64,
    /// Jobs with a deadline that ended, by kind and whether they succeeded by it (cancelled
    /// ones left out).
    pub deadlines: BTreeMap<(ProofKind, bool), u64>,
    /// Queued and running jobs that the measured proving times say will end after their
    /// deadline, by kind ([`State::at_risk`]; filled when the counters are read).
    pub at_risk: BTreeMap<ProofKind, u64>,
}

impl EngineStats {
    /// Finished jobs in `state`, all kinds.
    pub fn count(&self, state: JobState) -> u64 {
        self.finished
            .iter()
            .filter(|((_, s), _)| *s == state)
            .map(|(_, n)| n)
            .sum()
    }
}

/// What a submission asks for.
pub(super) struct NewJob {
    pub request: ProofRequest,
    /// Who submits it: request ids are looked up among this owner's jobs only.
    pub owner: Owner,
    /// The parameter set it proves with, if known.
    pub params: Option<ParamsId>,
    /// [`digest`](super::journal::format::digest) of the request, computed before taking the
    /// lock.
    pub digest: [u8; 32],
    /// The priority asked for; `None`: the kind's default (or, for a resubmission, whatever
    /// the job has).
    pub priority: Option<Priority>,
    pub request_id: Option<String>,
    /// What the request id means: a key bound to the input, or a label.
    pub request_ids: RequestIds,
    /// When its client needs it done by: within its class, jobs due earlier go first.
    pub due: Due,
}

/// A queue entry: the class, then the earliest due (no deadline last), then submission order;
/// the job.
type Queued = (Priority, Reverse<Due>, Reverse<u64>, JobId);

/// What a submission did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Outcome {
    /// A new job was queued.
    Queued,
    /// The request id named a job with the same input: that job, unchanged.
    Existing,
    /// As `Existing`, and the queued job's priority was raised to the one asked for.
    Raised,
}

pub(super) struct State {
    config: EngineConfig,
    next_id: JobId,
    next_seq: u64,
    pub jobs: HashMap<JobId, Job>,
    /// Max-heap on (priority, earliest sequence); cancelled entries are skipped lazily.
    queue: BinaryHeap<Queued>,
    /// The job holding each owner's request ids: every owner has request ids of its own.
    by_request_id: HashMap<(Owner, String), JobId>,
    /// Finished jobs, oldest first, for retention.
    finished: VecDeque<JobId>,
    pub stats: EngineStats,
    /// Proving times of succeeded jobs per kind, for [`State::capacity`].
    measured: Measured,
    pub shutting_down: bool,
    /// Set when the drain grace ran out and running jobs were cancelled: their cancellation
    /// is reported as "shutting down".
    drain_cancelled: bool,
}

impl State {
    pub fn new(config: EngineConfig) -> Self {
        Self {
            config,
            next_id: 1,
            next_seq: 0,
            jobs: HashMap::new(),
            queue: BinaryHeap::new(),
            by_request_id: HashMap::new(),
            finished: VecDeque::new(),
            stats: EngineStats::default(),
            measured: Measured::default(),
            shutting_down: false,
            drain_cancelled: false,
        }
    }

    /// Takes up the jobs a journal recorded before a restart (in id order): unfinished ones
    /// queued again in id order within their class, finished ones kept with their results
    /// for what is left of the retention time; ids continue at `next_id` (or above the
    /// highest recovered). Each comes with its parameter set, if known. Recovered jobs do not
    /// count in the counters, which are this run's.
    pub fn restore(
        &mut self,
        jobs: Vec<(RecoveredJob, Option<ParamsId>)>,
        next_id: JobId,
        now: Instant,
    ) {
        let before = |ago: Duration| now.checked_sub(ago).unwrap_or(now);
        let mut finished = Vec::new();
        let mut max_id = 0;
        for (job, params) in jobs {
            let id = job.id;
            max_id = max_id.max(id);
            let (request, phase, state, finished_at) = match job.state {
                RecoveredState::Queued(request) => {
                    self.next_seq += 1;
                    // Deadlines are not journaled: after a restart a job has none.
                    self.queue.push((
                        job.priority,
                        Reverse(Due::Never),
                        Reverse(self.next_seq),
                        id,
                    ));
                    self.stats.queued += 1;
                    (
                        Some(Arc::new(request)),
                        JobPhase::Queued,
                        JobState::Queued,
                        None,
                    )
                }
                RecoveredState::Finished {
                    result,
                    finished_ago,
                } => {
                    let state = match &result {
                        Ok(_) => JobState::Succeeded,
                        Err(f) if f.kind == FailureKind::Cancelled => JobState::Cancelled,
                        Err(_) => JobState::Failed,
                    };
                    let at = before(finished_ago);
                    finished.push((at, id));
                    (None, JobPhase::Finished(result), state, Some(at))
                }
            };
            if let Some(rid) = &job.request_id {
                // In id order: the newest job under an id holds it, as at submission.
                self.by_request_id.insert((job.owner, rid.clone()), id);
            }
            let error = match &phase {
                JobPhase::Finished(Err(f)) => Some(f.message.clone()),
                _ => None,
            };
            self.jobs.insert(
                id,
                Job {
                    kind: job.kind,
                    owner: job.owner,
                    params,
                    miner: job.miner,
                    sector: job.sector,
                    priority: job.priority,
                    request_id: job.request_id,
                    digest: job.digest,
                    request,
                    control: JobControl::with_class(job.priority.class()),
                    due: Due::Never,
                    phase: watch::Sender::new(phase),
                    state,
                    submitted: before(job.submitted_ago),
                    started: None,
                    lane: None,
                    finished: finished_at,
                    error,
                    cancel_recorded: false,
                    result_made: false,
                    warned_at_risk: false,
                },
            );
        }
        // Oldest first, for retention.
        finished.sort_unstable();
        self.finished.extend(finished.into_iter().map(|(_, id)| id));
        self.next_id = self.next_id.max(next_id).max(max_id.saturating_add(1));
    }

    /// Queues a job, or finds the one already holding its request id.
    ///
    /// Request ids are the owner's: a request id names at most one live job of its owner,
    /// and another owner's jobs under the same id are none of its business (neither found
    /// nor in conflict). It is released when its job's result
    /// expires, and at once when the job failed, was cancelled or is being cancelled: the
    /// next submission under it is a new job (the old one stays known by its job id). A
    /// job that succeeded, or is queued or running, keeps it: the same input returns that
    /// job; another input is a conflict where the id is a key ([`RequestIds::Strict`]), and
    /// a new job that takes the id over where it is a label ([`RequestIds::Label`]: the old
    /// job stays known by its job id). An explicit priority on such a resubmission is
    /// either the job's, raises a queued job's, or is refused (`PriorityConflict`); once the
    /// job has succeeded the priority no longer matters.
    pub fn submit(&mut self, new: NewJob, now: Instant) -> Result<(JobId, Outcome), SubmitError> {
        self.reap(now);
        if self.shutting_down {
            return Err(SubmitError::ShuttingDown);
        }
        let digest = new.digest;
        if let Some(rid) = &new.request_id {
            if let Some(&id) = self.by_request_id.get(&(new.owner, rid.clone())) {
                match self.jobs.get(&id) {
                    Some(j) if releases_request_id(j) => {} // a new job takes the id over
                    Some(j) if j.digest != digest && new.request_ids == RequestIds::Strict => {
                        return Err(SubmitError::RequestIdConflict {
                            request_id: rid.clone(),
                            job: id,
                        })
                    }
                    // A label's new input: a new job takes the label over.
                    Some(j) if j.digest != digest => {}
                    Some(_) => {
                        let State {
                            jobs,
                            queue,
                            next_seq,
                            ..
                        } = self;
                        if let Some(job) = jobs.get_mut(&id) {
                            return resubmitted(job, id, rid, new.priority, queue, next_seq);
                        }
                    }
                    None => {}
                }
            }
        }
        let priority = new
            .priority
            .unwrap_or_else(|| Priority::for_kind(new.request.kind()));
        let limit = self.queue_limit(priority);
        if self.stats.queued >= limit {
            self.stats.rejected_queue_full += 1;
            return Err(SubmitError::QueueFull {
                queued: self.stats.queued,
                limit,
            });
        }
        let id = self.next_id;
        self.next_id += 1;
        self.next_seq += 1;
        self.queue
            .push((priority, Reverse(new.due), Reverse(self.next_seq), id));
        if let Some(rid) = &new.request_id {
            self.by_request_id.insert((new.owner, rid.clone()), id);
        }
        let (miner, sector) = match &new.request {
            ProofRequest::PoRep(r) => (Some(r.miner_id), r.sector_number),
            _ => (None, None),
        };
        self.jobs.insert(
            id,
            Job {
                kind: new.request.kind(),
                owner: new.owner,
                params: new.params,
                miner,
                sector,
                priority,
                request_id: new.request_id,
                digest,
                request: Some(Arc::new(new.request)),
                control: JobControl::with_class_due(priority.class(), new.due),
                due: new.due,
                phase: watch::Sender::new(JobPhase::Queued),
                state: JobState::Queued,
                submitted: now,
                started: None,
                lane: None,
                finished: None,
                error: None,
                cancel_recorded: false,
                result_made: false,
                warned_at_risk: false,
            },
        );
        self.stats.queued += 1;
        Ok((id, Outcome::Queued))
    }

    /// Jobs of `priority` that may wait at once.
    fn queue_limit(&self, priority: Priority) -> usize {
        if priority == Priority::Critical {
            self.config.max_queued
        } else {
            self.config
                .max_queued
                .saturating_sub(self.config.critical_reserve)
        }
    }

    /// Whether a submission by `owner` under `request_id` (meaning what `ids` says) of an
    /// input with `digest` at `priority` would make a new job at `now`, as far as can be told
    /// before it is made: not while shutting down, not when the request id names a job that
    /// keeps it (the same input: that job; another: a conflict, or a new job under a label),
    /// not when the queue has no room for the priority. The journal stores a job's input only
    /// when it would (a resubmission of a finished 32 GiB PoRep writes nothing); the
    /// submission itself still decides.
    pub fn would_queue(
        &mut self,
        owner: Owner,
        request_id: Option<&str>,
        ids: RequestIds,
        digest: &[u8; 32],
        priority: Priority,
        now: Instant,
    ) -> bool {
        self.reap(now);
        if self.shutting_down {
            return false;
        }
        if let Some(rid) = request_id {
            let holder = self
                .by_request_id
                .get(&(owner, rid.to_string()))
                .and_then(|id| self.jobs.get(id));
            let relabelled = |j: &Job| ids == RequestIds::Label && j.digest != *digest;
            if holder.is_some_and(|j| !releases_request_id(j) && !relabelled(j)) {
                return false;
            }
        }
        self.stats.queued < self.queue_limit(priority)
    }

    /// Takes the highest-priority queued job that `lane` may run and marks it running.
    pub fn next_assignment(&mut self, now: Instant, lane: Lane) -> Option<Assignment> {
        while let Some(&(priority, _, _, id)) = self.queue.peek() {
            let queued = self
                .jobs
                .get(&id)
                .is_some_and(|j| j.state == JobState::Queued && j.priority == priority);
            if !queued {
                self.queue.pop(); // cancelled while queued, or its priority was raised
                continue;
            }
            if lane == Lane::Critical && priority != Priority::Critical {
                return None; // the head is the best there is: nothing critical waits
            }
            self.queue.pop();
            let Some(job) = self.jobs.get_mut(&id) else {
                continue;
            };
            let request = job.request.clone()?;
            job.state = JobState::Running;
            job.started = Some(now);
            job.lane = Some(lane);
            job.phase.send_replace(JobPhase::Running);
            self.stats.queued -= 1;
            self.stats.running += 1;
            return Some(Assignment {
                id,
                request,
                control: job.control.clone(),
            });
        }
        None
    }

    /// Records a running job's result (the tests' shorthand: the engine makes the result
    /// durable between the two steps).
    #[cfg(test)]
    pub fn finish(
        &mut self,
        id: JobId,
        result: Result<crate::pipeline::ProofOutput, Failure>,
        now: Instant,
    ) {
        if let Some(result) = self.final_result(id, result, now) {
            self.complete_running(id, result, now);
        }
    }

    /// The result a running job's outcome makes at `now` (timings from its submission; a
    /// cancellation by the drain reported as "shutting down"), without recording it: the
    /// journal makes it durable before [`State::complete_running`] lets waiters see it.
    pub fn final_result(
        &mut self,
        id: JobId,
        result: Result<crate::pipeline::ProofOutput, Failure>,
        now: Instant,
    ) -> Option<JobResult> {
        let drain_cancelled = self.drain_cancelled;
        let job = self.jobs.get_mut(&id)?;
        job.result_made = true;
        if job.cancel_recorded {
            // What the Cancel recorded and promised: "cancelled", even where the proof was
            // done before the job saw it.
            return Some(cancelled_while_running());
        }
        let queue_wait = job
            .started
            .unwrap_or(now)
            .saturating_duration_since(job.submitted);
        let total = now.saturating_duration_since(job.submitted);
        let result = result.map_err(|f| {
            if drain_cancelled && f.kind == FailureKind::Cancelled {
                Failure::new(
                    FailureKind::ShuttingDown,
                    "stopped: the drain grace ran out",
                )
            } else {
                f
            }
        });
        Some(result.map(|output| {
            let t = &output.timings;
            let timings = JobTimings {
                queue_wait,
                param_load: t.param_load,
                synthesis: t.synthesis,
                proving: t.proving,
                verification: t.verification,
                total,
            };
            Arc::new(JobOutput { output, timings })
        }))
    }

    /// Whether a Cancel recorded the job's result while it ran.
    pub fn cancel_recorded(&self, id: JobId) -> bool {
        self.jobs.get(&id).is_some_and(|j| j.cancel_recorded)
    }

    /// Finishes a running job with a result [`State::final_result`] made.
    pub fn complete_running(&mut self, id: JobId, result: JobResult, now: Instant) {
        let Some(job) = self.jobs.get(&id) else {
            return;
        };
        if job.state.is_finished() {
            return;
        }
        if job.state == JobState::Running {
            self.stats.running -= 1;
        } else if job.state == JobState::Queued {
            self.stats.queued -= 1;
        }
        self.complete(id, result, now);
    }

    /// Marks a job finished with `result`, whatever state it was in, and wakes its waiters.
    fn complete(&mut self, id: JobId, result: JobResult, now: Instant) {
        self.settle(id, &result, now);
        self.publish(id, result);
    }

    /// Shows a settled job's result to its waiters (Await, Prove), which answer with it at
    /// once: called only once the journal has made the result durable.
    pub fn publish(&mut self, id: JobId, result: JobResult) {
        if let Some(job) = self.jobs.get(&id) {
            job.phase.send_replace(JobPhase::Finished(result));
        }
    }

    /// Marks a job finished with `result`, whatever state it was in, without showing the
    /// result to its waiters yet ([`State::publish`]).
    fn settle(&mut self, id: JobId, result: &JobResult, now: Instant) {
        let Some(job) = self.jobs.get_mut(&id) else {
            return;
        };
        job.state = match result {
            Ok(_) => JobState::Succeeded,
            Err(f) if f.kind == FailureKind::Cancelled => JobState::Cancelled,
            Err(_) => JobState::Failed,
        };
        job.error = result.as_ref().err().map(|f| f.message.clone());
        job.finished = Some(now);
        job.request = None;
        *self
            .stats
            .finished
            .entry((job.kind, job.state))
            .or_default() += 1;
        if let (Some(due), false) = (job.due.instant(), job.state == JobState::Cancelled) {
            let met = job.state == JobState::Succeeded && now <= due;
            *self.stats.deadlines.entry((job.kind, met)).or_default() += 1;
            if !met {
                let late = now.saturating_duration_since(due).as_secs_f64();
                tracing::warn!(
                    job = id,
                    kind = %job.kind,
                    state = job.state.as_str(),
                    "job missed its deadline ({late:.1} s past it)"
                );
            }
        }
        if let Ok(out) = result {
            self.stats
                .stage_sums
                .entry(job.kind)
                .or_default()
                .accumulate(&out.timings);
            // Its time on a worker, less loading parameters (a load is paid once, not by
            // every job).
            let t = &out.timings;
            let run = t.total.saturating_sub(t.queue_wait);
            self.measured
                .record(job.kind, run.saturating_sub(t.param_load));
        }
        self.finished.push_back(id);
    }

    /// Cancels a job: a queued one is removed at once, a running one is asked to stop at
    /// its next partition boundary and its result is "cancelled" from now on. For a queued
    /// job, the result: its waiters see it only once the engine [`State::publish`]es it,
    /// after the journal made it durable (an Await answered "cancelled" must not find the
    /// job queued again after a crash); for a running one, whether the engine must record
    /// its result now (same reason: a Cancel answered `was_running` must not find it queued
    /// again).
    pub fn cancel(&mut self, id: JobId, now: Instant) -> Result<Cancelled, CancelError> {
        let job = self.jobs.get_mut(&id).ok_or(CancelError::UnknownJob(id))?;
        let (control, state) = (job.control.clone(), job.state);
        match state {
            JobState::Queued => {
                control.cancel();
                self.stats.queued -= 1;
                let result: JobResult = Err(Failure::new(
                    FailureKind::Cancelled,
                    "cancelled while queued",
                ));
                self.settle(id, &result, now);
                Ok(Cancelled::Queued(result))
            }
            JobState::Running => {
                control.cancel();
                let record = !job.cancel_recorded && !job.result_made;
                job.cancel_recorded |= record;
                Ok(Cancelled::Running { record })
            }
            s => Err(CancelError::AlreadyFinished(id, s.as_str())),
        }
    }

    /// Refuses new work and finishes every queued job "shutting down"; returns them with
    /// their results, which the engine [`State::publish`]es once they are durable.
    pub fn shut_down(&mut self, now: Instant) -> Vec<(JobId, JobResult)> {
        self.shutting_down = true;
        let queued: Vec<JobId> = self
            .jobs
            .iter()
            .filter(|(_, j)| j.state == JobState::Queued)
            .map(|(&id, _)| id)
            .collect();
        let mut finished = Vec::with_capacity(queued.len());
        for id in queued {
            self.stats.queued -= 1;
            let failure = Failure::new(FailureKind::ShuttingDown, "the daemon is shutting down");
            let result: JobResult = Err(failure);
            self.settle(id, &result, now);
            finished.push((id, result));
        }
        self.queue.clear();
        finished
    }

    /// Asks every running job to stop at its next partition boundary.
    pub fn cancel_running(&mut self) {
        self.drain_cancelled = true;
        for job in self.jobs.values().filter(|j| j.state == JobState::Running) {
            job.control.cancel();
        }
    }

    /// Drops finished jobs older than the retention time, and the oldest beyond the cap.
    pub fn reap(&mut self, now: Instant) {
        while let Some(&id) = self.finished.front() {
            if self.jobs.get(&id).is_some_and(|j| !j.is_published()) {
                // Settled, its result not yet durable and shown ([`State::publish`]): its
                // waiters must still find it. The ones behind it wait for it.
                break;
            }
            let expired =
                self.jobs.get(&id).and_then(|j| j.finished).is_none_or(|f| {
                    now.saturating_duration_since(f) >= self.config.result_retention
                });
            if !expired && self.finished.len() <= self.config.max_finished {
                break;
            }
            self.finished.pop_front();
            if let Some(job) = self.jobs.remove(&id) {
                // Only if it is still this job's: a failed job's id may name a newer job.
                if let Some(rid) = job.request_id {
                    let key = (job.owner, rid);
                    if self.by_request_id.get(&key) == Some(&id) {
                        self.by_request_id.remove(&key);
                    }
                }
            }
        }
    }

    /// A job's snapshot.
    pub fn snapshot(&self, id: JobId, now: Instant) -> Option<JobSnapshot> {
        let job = self.jobs.get(&id)?;
        Some(JobSnapshot {
            id,
            owner: job.owner,
            request_id: job.request_id.clone(),
            kind: job.kind,
            miner: job.miner,
            sector: job.sector,
            priority: job.priority,
            state: job.state,
            progress: job.control.progress(),
            age: now.saturating_duration_since(job.submitted),
            error: job.error.clone(),
        })
    }

    /// The newest known job `owner` submitted under `request_id` (`None`: of any owner):
    /// the one holding it, or, once a failed or cancelled job released it and nothing took
    /// it over, that job (so that a client learns it failed and may resubmit). Older jobs
    /// under the same id (failed or cancelled before a newer one took the id over) are not
    /// reported: the newest is the one a client acts on.
    pub fn lookup(
        &self,
        request_id: &str,
        owner: Option<Owner>,
        now: Instant,
    ) -> Option<JobSnapshot> {
        // The holder is always the newest of its owner's jobs under its id: a job that
        // takes an id over is newer than the one it takes it from.
        if let Some(owner) = owner {
            if let Some(&id) = self.by_request_id.get(&(owner, request_id.to_string())) {
                return self.snapshot(id, now);
            }
        }
        // Any owner's, or the holder expired but an older job under the id may not have
        // (one cancelled while running can finish after its successor): look through the
        // known jobs, which retention bounds (`max_queued` plus running plus
        // `max_finished`).
        let id = self
            .jobs
            .iter()
            .filter(|(_, j)| {
                j.request_id.as_deref() == Some(request_id) && owner.is_none_or(|o| j.owner == o)
            })
            .map(|(&id, _)| id)
            .max()?;
        self.snapshot(id, now)
    }

    /// The queued and running jobs that prove with the parameter set `params`, by id.
    pub fn needing(&self, params: &ParamsId) -> Vec<JobId> {
        let mut ids: Vec<JobId> = self
            .jobs
            .iter()
            .filter(|(_, j)| !j.state.is_finished() && j.params.as_ref() == Some(params))
            .map(|(&id, _)| id)
            .collect();
        ids.sort_unstable();
        ids
    }

    /// Every known job's snapshot, by id.
    pub fn snapshots(&self, now: Instant) -> Vec<JobSnapshot> {
        let mut ids: Vec<JobId> = self.jobs.keys().copied().collect();
        ids.sort_unstable();
        ids.into_iter()
            .filter_map(|id| self.snapshot(id, now))
            .collect()
    }

    /// What a scheduler needs to know before it sends a job of `kind` at `priority` (the
    /// kind's default when `None`) at `now`: the jobs per class, the room in the queue for
    /// that class, and when such a job would start and how long it would prove
    /// ([`super::estimate`]).
    pub fn capacity(&self, kind: ProofKind, priority: Option<Priority>, now: Instant) -> Capacity {
        let priority = priority.unwrap_or_else(|| Priority::for_kind(kind));
        let mut queued_per_class = [0usize; 4];
        let mut running_per_class = [0usize; 4];
        for job in self.jobs.values() {
            let class = usize::from(job.priority.class()).min(3);
            match job.state {
                JobState::Queued => queued_per_class[class] += 1,
                JobState::Running => running_per_class[class] += 1,
                _ => {}
            }
        }
        let running: Vec<RunningJob> = self.running_jobs(now).into_iter().map(|(_, r)| r).collect();
        let queued: Vec<QueuedJob> = self.queue_order().into_iter().map(|(_, q)| q).collect();
        Capacity {
            priority,
            queued: queued_per_class,
            running: running_per_class,
            workers: self.config.workers.max(1),
            queue_room: self.queue_limit(priority).saturating_sub(self.stats.queued),
            estimated_start: estimate_start(
                self.config.workers,
                &running,
                &queued,
                priority,
                &self.measured,
            ),
            estimated_proof: self.measured.mean(kind),
            measured_jobs: self.measured.count(kind),
        }
    }

    /// The running jobs as the start model sees them, with their ids.
    fn running_jobs(&self, now: Instant) -> Vec<(JobId, RunningJob)> {
        let running = self
            .jobs
            .iter()
            .filter(|(_, j)| j.state == JobState::Running);
        running
            .map(|(&id, job)| {
                let elapsed = job
                    .started
                    .map_or(Duration::ZERO, |s| now.saturating_duration_since(s));
                let lane = job.lane.unwrap_or(Lane::Any);
                (
                    id,
                    RunningJob {
                        kind: job.kind,
                        lane,
                        elapsed,
                    },
                )
            })
            .collect()
    }

    /// The queue in the order workers take it, with the jobs' ids: the live heap entries (a
    /// raised job's old entry is stale), highest class first, then the earliest due, then
    /// submission order.
    fn queue_order(&self) -> Vec<(JobId, QueuedJob)> {
        let live = |(p, _, _, id): &&Queued| {
            (self.jobs.get(id)).is_some_and(|j| j.state == JobState::Queued && j.priority == *p)
        };
        let mut order: Vec<Queued> = self.queue.iter().filter(live).copied().collect();
        order.sort_unstable_by(|a, b| b.cmp(a));
        let job = |(p, _, _, id): Queued| {
            let kind = self.jobs.get(&id)?.kind;
            Some((id, QueuedJob { kind, priority: p }))
        };
        order.into_iter().filter_map(job).collect()
    }

    /// Every unfinished job with a deadline at `now`, earliest due first (then by id), with
    /// when it is due and when the measured proving times say it ends: a running job after
    /// what it has left ([`time_left`]: by its own pace once a partition is done, else its
    /// kind's mean proving time less what it has run), a queued one after its estimated
    /// start behind the jobs ahead of it ([`estimate_starts`], the whole queue in one pass)
    /// and its kind's mean. Where a kind is not measured yet, or the model cannot tell a
    /// start, the end is `None` (nothing is invented).
    pub fn deadlines(&self, now: Instant) -> Vec<DeadlineView> {
        // Read with every Status, metrics scrape and readiness update: without a deadline in
        // sight the queue is not ordered and played at all.
        let has_due = |j: &Job| !j.state.is_finished() && j.due.instant().is_some();
        if !self.jobs.values().any(has_due) {
            return Vec::new();
        }
        let running = self.running_jobs(now);
        let mut ends: Vec<(JobId, Option<Duration>)> = Vec::new();
        for (id, r) in &running {
            let progress = self.jobs.get(id).map_or((0, 0), |j| j.control.progress());
            ends.push((
                *id,
                time_left(self.measured.mean(r.kind), r.elapsed, progress),
            ));
        }
        let run: Vec<RunningJob> = running.iter().map(|(_, r)| *r).collect();
        let order = self.queue_order();
        let queued: Vec<QueuedJob> = order.iter().map(|(_, q)| *q).collect();
        let starts = estimate_starts(self.config.workers, &run, &queued, &self.measured);
        for ((id, q), start) in order.iter().zip(starts) {
            let proof = self.measured.mean(q.kind);
            ends.push((*id, start.zip(proof).map(|(s, p)| s.saturating_add(p))));
        }
        let mut out: Vec<(Instant, DeadlineView)> = ends
            .into_iter()
            .filter_map(|(id, ends_in)| {
                let job = self.jobs.get(&id)?;
                let due = job.due.instant()?;
                let view = DeadlineView {
                    id,
                    owner: job.owner,
                    kind: job.kind,
                    priority: job.priority,
                    state: job.state,
                    progress: job.control.progress(),
                    due_in: due.saturating_duration_since(now),
                    overdue: now.saturating_duration_since(due),
                    ends_in,
                };
                Some((due, view))
            })
            .collect();
        out.sort_unstable_by_key(|(due, v)| (*due, v.id));
        out.into_iter().map(|(_, v)| v).collect()
    }

    /// The jobs of [`State::deadlines`] that the projection says will end after their
    /// deadline, at `now`. A job of a kind not measured yet, or whose start the model cannot
    /// tell, is not counted (nothing is invented).
    pub fn at_risk(&self, now: Instant) -> Vec<AtRisk> {
        let risk = |v: DeadlineView| {
            v.late_by().map(|late_by| AtRisk {
                id: v.id,
                kind: v.kind,
                late_by,
            })
        };
        self.deadlines(now).into_iter().filter_map(risk).collect()
    }

    /// [`State::at_risk`], each job returned once (the first time it is found at risk), for
    /// a warning in the log.
    pub fn newly_at_risk(&mut self, now: Instant) -> Vec<AtRisk> {
        let risks = self.at_risk(now);
        let mut new = Vec::new();
        for r in risks {
            if let Some(job) = self.jobs.get_mut(&r.id).filter(|j| !j.warned_at_risk) {
                job.warned_at_risk = true;
                new.push(r);
            }
        }
        new
    }

    /// The earliest moment a finished job expires, for the reaper.
    pub fn retention(&self) -> Duration {
        self.config.result_retention
    }
}

/// The same request again under the job `id`'s request id: that job, its priority raised if
/// asked for and still queued, or a conflict if the priority asked for cannot be given.
fn resubmitted(
    job: &mut Job,
    id: JobId,
    request_id: &str,
    wanted: Option<Priority>,
    queue: &mut BinaryHeap<Queued>,
    next_seq: &mut u64,
) -> Result<(JobId, Outcome), SubmitError> {
    let Some(wanted) = wanted else {
        return Ok((id, Outcome::Existing));
    };
    if wanted == job.priority || job.state == JobState::Succeeded {
        return Ok((id, Outcome::Existing));
    }
    if job.state == JobState::Queued && wanted > job.priority {
        // A fresh control of the new class (nobody but the job holds a queued job's
        // control), and a fresh place at the end of that class; the old heap entry is
        // skipped as stale.
        job.priority = wanted;
        job.control = JobControl::with_class_due(wanted.class(), job.due);
        *next_seq += 1;
        queue.push((wanted, Reverse(job.due), Reverse(*next_seq), id));
        return Ok((id, Outcome::Raised));
    }
    Err(SubmitError::PriorityConflict {
        request_id: request_id.to_string(),
        job: id,
        priority: job.priority,
        state: job.state,
        requested: wanted,
    })
}

/// Whether a job no longer holds its request id: it failed, was cancelled, or is being
/// cancelled (running until its next partition boundary).
fn releases_request_id(job: &Job) -> bool {
    match job.state {
        JobState::Failed | JobState::Cancelled => true,
        JobState::Running => job.control.is_cancelled(),
        JobState::Queued | JobState::Succeeded => false,
    }
}
