//! `Watch`: a job's steps pushed to the connections that follow it (docs/protocol.md,
//! section 5, **Watch**).
//!
//! The engine's observer hands every job's steps to the [`Hub`] on the thread where they
//! happen (a synthesis thread, a device worker); the hub copies each into the buffer of
//! every watcher of that job and returns at once. A buffer holds at most
//! [`BUFFER`] events: when a watcher's client reads too slowly, the oldest buffered event
//! is dropped and counted, and the next event sent carries the count. The job never waits
//! for a watcher, and a watcher never holds more than its buffer. The final answer is not
//! an event: it comes from the job's phase, like an Await's, so it is never dropped. A
//! watcher is unregistered when its connection's request ends (the answer sent, the client
//! gone, or the connection failed), whichever way it ends. The hub also keeps each running
//! job's latest step (one event per running job, dropped when it finishes), so that a watch
//! that begins mid-job starts from where the job is.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;

use super::access::Access;
use super::frames::{hung_up, send, Conn};
use super::{handler, wire, Context};
use crate::engine::{JobEvent, JobId, JobPhase, JobState};
use crate::pipeline::Step;
use crate::proto::{ProgressEvent, ProgressStage, Response};

/// Events a watcher's buffer holds at most (about 64 bytes each).
pub(super) const BUFFER: usize = 64;

/// The watchers of every watched job, and the latest step of every running job (so that
/// a watch that begins mid-job starts from where the job is, not from "started").
#[derive(Default)]
pub struct Hub {
    jobs: Mutex<HashMap<JobId, Vec<Arc<Slot>>>>,
    /// One entry per running job: removed when it finishes.
    latest: Mutex<HashMap<JobId, ProgressEvent>>,
}

/// One watcher's buffer.
#[derive(Default)]
struct Slot {
    buffer: Mutex<Buffer>,
    ready: Notify,
}

#[derive(Default)]
struct Buffer {
    events: VecDeque<ProgressEvent>,
    /// Dropped since the last event taken, for the next one taken.
    dropped: u32,
}

impl Slot {
    fn lock(&self) -> MutexGuard<'_, Buffer> {
        // A buffer is consistent after any panic: keep going.
        self.buffer.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Buffers `event`, dropping the oldest one when the buffer is full.
    fn push(&self, event: ProgressEvent) {
        {
            let mut b = self.lock();
            if b.events.len() >= BUFFER {
                b.events.pop_front();
                b.dropped = b.dropped.saturating_add(1);
            }
            b.events.push_back(event);
        }
        self.ready.notify_one();
    }

    /// Takes the buffered events, the first carrying the count of those dropped before it.
    fn take(&self) -> Vec<ProgressEvent> {
        let mut b = self.lock();
        let mut events: Vec<ProgressEvent> = b.events.drain(..).collect();
        if let Some(first) = events.first_mut() {
            first.dropped = std::mem::take(&mut b.dropped);
        }
        events
    }
}

/// One registration; unregistered when dropped.
pub(super) struct Watcher<'a> {
    hub: &'a Hub,
    job: JobId,
    slot: Arc<Slot>,
}

impl Watcher<'_> {
    /// Resolves when events may be waiting (at once if some arrived since the last take).
    async fn ready(&self) {
        self.slot.ready.notified().await;
    }

    fn take(&self) -> Vec<ProgressEvent> {
        self.slot.take()
    }
}

impl Drop for Watcher<'_> {
    fn drop(&mut self) {
        let mut jobs = self.hub.lock();
        if let Some(slots) = jobs.get_mut(&self.job) {
            slots.retain(|s| !Arc::ptr_eq(s, &self.slot));
            if slots.is_empty() {
                jobs.remove(&self.job);
            }
        }
    }
}

impl Hub {
    fn lock(&self) -> MutexGuard<'_, HashMap<JobId, Vec<Arc<Slot>>>> {
        self.jobs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a watcher of `job`: it receives the job's events published from now on.
    pub(super) fn watch(&self, job: JobId) -> Watcher<'_> {
        let slot = Arc::new(Slot::default());
        self.lock().entry(job).or_default().push(slot.clone());
        Watcher {
            hub: self,
            job,
            slot,
        }
    }

    /// Watchers registered now, of all jobs.
    #[cfg(test)]
    fn watchers(&self) -> usize {
        self.lock().values().map(Vec::len).sum()
    }

    /// The latest step of running job `job`, if it took one.
    fn latest(&self, job: JobId) -> Option<ProgressEvent> {
        let latest = self.latest.lock().unwrap_or_else(PoisonError::into_inner);
        latest.get(&job).cloned()
    }

    /// Hands an engine event to the watchers of its job (none: nothing but the job's latest
    /// step is kept). Never blocks beyond short locks.
    pub fn publish(&self, event: &JobEvent) {
        let Some(progress) = progress_of(event) else {
            if let JobEvent::Finished(s, _) = event {
                let mut latest = self.latest.lock().unwrap_or_else(PoisonError::into_inner);
                latest.remove(&s.id);
            }
            return;
        };
        {
            let mut latest = self.latest.lock().unwrap_or_else(PoisonError::into_inner);
            latest.insert(progress.job_id, progress.clone());
        }
        let slots = match self.lock().get(&progress.job_id) {
            Some(slots) => slots.clone(),
            None => return,
        };
        for slot in slots {
            slot.push(progress.clone());
        }
    }
}

/// Saturating milliseconds.
fn ms(d: Duration) -> u64 {
    d.as_millis().min(u64::MAX as u128) as u64
}

/// Saturating u32.
fn u32_of(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The wire event of an engine event; `None` for the end of a job (the final answer comes
/// from the job's phase).
fn progress_of(event: &JobEvent) -> Option<ProgressEvent> {
    match event {
        JobEvent::Started(s) => Some(ProgressEvent {
            job_id: s.id,
            stage: ProgressStage::Started,
            partition: None,
            partitions_done: u32_of(s.progress.0),
            partitions_total: u32_of(s.progress.1),
            age_ms: ms(s.age),
            stage_ms: 0,
            dropped: 0,
        }),
        JobEvent::Progress(p) => Some(ProgressEvent {
            job_id: p.id,
            stage: match p.event.step {
                Step::ParamsLoading => ProgressStage::ParamsLoading,
                Step::ParamsReady => ProgressStage::ParamsReady,
                Step::SynthesisStarted => ProgressStage::SynthesisStarted,
                Step::SynthesisDone => ProgressStage::SynthesisDone,
                Step::DeviceStarted => ProgressStage::DeviceStarted,
                Step::DeviceDone => ProgressStage::DeviceDone,
                Step::Verifying => ProgressStage::Verifying,
            },
            partition: p.event.partition.map(u32_of),
            partitions_done: u32_of(p.progress.0),
            partitions_total: u32_of(p.progress.1),
            age_ms: ms(p.age),
            stage_ms: ms(p.event.took),
            dropped: 0,
        }),
        JobEvent::Finished(..) => None,
    }
}

/// What woke a watching connection.
enum Wake {
    Events,
    Phase(bool),
    HungUp,
}

/// Serves a Watch of `job` on `framed`: the job's current state as the first event, then
/// each event as it comes, then the job's final answer, which is returned (to be sent as
/// the request's answer). `None` when the client hung up or the connection failed: nothing
/// is left to answer. The job is not affected either way.
pub(super) async fn serve(
    job: JobId,
    access: Access,
    ctx: &Context,
    framed: &mut Conn,
) -> Option<Response> {
    if handler::visible_job(job, access, ctx).is_none() {
        return Some(handler::unknown_job(job));
    }
    // Registered before the state is read: no event between the two is missed (one may be
    // seen twice: a start, which is skipped below).
    let watcher = ctx.watchers.watch(job);
    let (Some(mut phase), Some(snap)) = (ctx.engine.watch(job), ctx.engine.snapshot(job)) else {
        return Some(handler::unknown_job(job));
    };
    tracing::debug!(cuzk_job_id = job, uid = access.uid, "watch");
    let running = snap.state == JobState::Running;
    // The first event: where the job is now (a running job's latest step, with its
    // partitions and age as of now). A step published since the registration is in the
    // buffer too: it is not sent twice.
    let mut first = None;
    if !snap.state.is_finished() {
        let latest = running.then(|| ctx.watchers.latest(job)).flatten();
        let event = ProgressEvent {
            job_id: job,
            partitions_done: u32_of(snap.progress.0),
            partitions_total: u32_of(snap.progress.1),
            age_ms: ms(snap.age),
            dropped: 0,
            ..latest.unwrap_or(ProgressEvent {
                job_id: job,
                stage: if running {
                    ProgressStage::Started
                } else {
                    ProgressStage::Queued
                },
                partition: None,
                partitions_done: 0,
                partitions_total: 0,
                age_ms: 0,
                stage_ms: 0,
                dropped: 0,
            })
        };
        first = Some((event.stage, event.partition));
        send(framed, &Response::Progress(event)).await.ok()?;
    }
    let mut started = running;
    let result = loop {
        if let JobPhase::Finished(result) = &*phase.borrow_and_update() {
            break result.clone();
        }
        let wake = tokio::select! {
            _ = watcher.ready() => Wake::Events,
            changed = phase.changed() => Wake::Phase(changed.is_ok()),
            _ = hung_up(framed.get_ref().get_ref()) => Wake::HungUp,
        };
        match wake {
            Wake::Events => {
                for event in watcher.take() {
                    if first == Some((event.stage, event.partition))
                        || (event.stage == ProgressStage::Started
                            && std::mem::replace(&mut started, true))
                    {
                        continue;
                    }
                    send(framed, &Response::Progress(event)).await.ok()?;
                }
            }
            Wake::Phase(true) => {}
            // The job is gone (its result expired): as for an Await.
            Wake::Phase(false) => return Some(handler::unknown_job(job)),
            Wake::HungUp => {
                tracing::debug!(cuzk_job_id = job, "client hung up while watching the job");
                return None;
            }
        }
    };
    // What was buffered before the end, then the end itself.
    for event in watcher
        .take()
        .into_iter()
        .filter(|e| first != Some((e.stage, e.partition)))
    {
        send(framed, &Response::Progress(event)).await.ok()?;
    }
    Some(wire::result(job, &result))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::JobProgress;
    use crate::pipeline::StepEvent;

    fn step(job: JobId, partition: usize) -> JobEvent {
        JobEvent::Progress(JobProgress {
            id: job,
            event: StepEvent {
                step: Step::DeviceDone,
                partition: Some(partition),
                took: Duration::from_millis(5),
            },
            progress: (partition + 1, 1000),
            age: Duration::from_millis(7),
        })
    }

    #[test]
    fn a_watcher_gets_its_jobs_events_in_order() {
        let hub = Hub::default();
        let w = hub.watch(1);
        hub.publish(&step(1, 0));
        hub.publish(&step(2, 0)); // another job's
        hub.publish(&step(1, 1));
        let got = w.take();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].partition, Some(0));
        assert_eq!(got[1].partition, Some(1));
        assert_eq!(
            (
                got[1].stage,
                got[1].partitions_done,
                got[1].stage_ms,
                got[1].age_ms
            ),
            (ProgressStage::DeviceDone, 2, 5, 7)
        );
        assert!(got.iter().all(|e| e.dropped == 0));
        assert!(w.take().is_empty());
    }

    #[test]
    fn a_slow_watcher_holds_at_most_its_buffer_and_is_told_what_it_missed() {
        let hub = Hub::default();
        let w = hub.watch(1);
        for k in 0..1000 {
            hub.publish(&step(1, k));
            assert!(w.slot.lock().events.len() <= BUFFER);
        }
        let got = w.take();
        assert_eq!(got.len(), BUFFER);
        // The newest were kept; the first says how many went before it.
        assert_eq!(got[0].partition, Some((1000 - BUFFER) as u32));
        assert_eq!(got[0].dropped as usize, 1000 - BUFFER);
        assert!(got[1..].iter().all(|e| e.dropped == 0));
        assert_eq!(got[BUFFER - 1].partition, Some(999));
        // Counted once: the next take starts afresh.
        hub.publish(&step(1, 1000));
        assert_eq!(w.take()[0].dropped, 0);
    }

    #[test]
    fn a_dropped_watcher_is_unregistered_and_unwatched_jobs_cost_nothing() {
        let hub = Hub::default();
        let a = hub.watch(1);
        let b = hub.watch(1);
        let c = hub.watch(2);
        assert_eq!(hub.watchers(), 3);
        drop(a);
        hub.publish(&step(1, 0));
        assert_eq!(b.take().len(), 1);
        drop((b, c));
        assert_eq!(hub.watchers(), 0);
        assert!(hub.lock().is_empty(), "no entry left behind");
        hub.publish(&step(3, 0)); // nobody watches: nothing kept
        assert!(hub.lock().is_empty());
    }

    #[test]
    fn the_latest_step_of_each_running_job_is_kept_until_it_finishes() {
        let hub = Hub::default();
        hub.publish(&step(1, 0)); // nobody watches: still the job's latest
        hub.publish(&step(1, 1));
        hub.publish(&step(2, 0));
        assert_eq!(hub.latest(1).and_then(|e| e.partition), Some(1));
        let snap = crate::engine::JobSnapshot {
            id: 1,
            owner: 0,
            request_id: None,
            kind: crate::proofs::ProofKind::PoRep,
            miner: None,
            sector: None,
            priority: crate::engine::Priority::Normal,
            state: JobState::Succeeded,
            progress: (1, 1),
            age: Duration::ZERO,
            error: None,
        };
        let result = Err(crate::engine::Failure::new(
            crate::engine::FailureKind::Cancelled,
            "cancelled",
        ));
        hub.publish(&JobEvent::Finished(snap, result));
        assert!(hub.latest(1).is_none(), "dropped with the job");
        assert!(hub.latest(2).is_some());
    }

    #[tokio::test]
    async fn a_watcher_is_woken_by_an_event_published_before_it_waits() {
        let hub = Hub::default();
        let w = hub.watch(1);
        hub.publish(&step(1, 0));
        tokio::time::timeout(Duration::from_secs(5), w.ready())
            .await
            .expect("woken");
        assert_eq!(w.take().len(), 1);
    }
}
