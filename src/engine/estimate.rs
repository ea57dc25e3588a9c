//! When a new job would start: a pure model of the engine's workers over its queue, with
//! the proving times measured so far (time passed in, no lock, no clock).
//!
//! The model is the engine's own rule played forward: `workers` workers take any job,
//! highest class first and first come first served within a class, and one more worker
//! takes critical jobs only ([`Lane::Critical`]). A running job frees its worker after its
//! kind's measured proving time less what it has run already (at once when it has run
//! longer); each queued job ahead of the new one takes the worker that frees first among
//! those its lane allows, and holds it for its kind's measured time. The new job goes
//! behind every queued job of its class or a higher one (a new job joins the end of its
//! class) and starts when the first worker it may use frees after them.
//!
//! Nothing is invented: a kind without a measured job has no time, and an estimate that
//! depends on one is `None`. It does not depend on one when a worker the new job may use is
//! idle after the jobs ahead took theirs (an idle worker starts it now, whatever the others
//! do).

use std::collections::BTreeMap;
use std::time::Duration;

use super::types::Lane;
use super::types::Priority;
use crate::proofs::ProofKind;

/// Measured proving times per kind: the time from a worker taking a succeeded job to its
/// result, less its parameter loading, as a running average.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Measured {
    kinds: BTreeMap<ProofKind, KindTime>,
}

/// One kind's measurements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct KindTime {
    count: u64,
    mean: Duration,
}

/// The weight of the newest job once this many were measured: the average is the plain
/// mean of the first `WINDOW` jobs, then an exponentially weighted one (each new job
/// counts 1/`WINDOW`), so that it follows a host whose load changes.
const WINDOW: u64 = 8;

impl Measured {
    /// Adds a succeeded job's proving time.
    pub fn record(&mut self, kind: ProofKind, run: Duration) {
        let entry = self.kinds.entry(kind).or_insert(KindTime {
            count: 0,
            mean: Duration::ZERO,
        });
        entry.count = entry.count.saturating_add(1);
        let weight = entry.count.min(WINDOW) as u128;
        // mean += (run - mean) / weight, in nanoseconds without overflow or sign trouble.
        let mean = entry.mean.as_nanos();
        let run = run.as_nanos();
        let next = if run >= mean {
            mean + (run - mean) / weight
        } else {
            mean - (mean - run) / weight
        };
        entry.mean = Duration::from_nanos(next.min(u128::from(u64::MAX)) as u64);
    }

    /// The average proving time of `kind`, `None` before one was measured.
    pub fn mean(&self, kind: ProofKind) -> Option<Duration> {
        self.kinds.get(&kind).map(|k| k.mean)
    }

    /// How many jobs of `kind` were measured.
    pub fn count(&self, kind: ProofKind) -> u64 {
        self.kinds.get(&kind).map_or(0, |k| k.count)
    }
}

/// What a running job has left: once `progress` (partitions done, of all) counts one done,
/// the rest at the pace it has kept so far (its own partitions, whatever their number: a
/// WindowPoSt of ten partitions takes longer than the mean of smaller ones), else its kind's
/// `mean` proving time less the `elapsed` time, `None` where that is not measured. The pace
/// includes the job's start (parameters, the first partition's synthesis), so it errs late.
pub fn time_left(
    mean: Option<Duration>,
    elapsed: Duration,
    progress: (usize, usize),
) -> Option<Duration> {
    let (done, total) = progress;
    if done > 0 && total >= done {
        let rest = u32::try_from(total - done).unwrap_or(u32::MAX);
        let per = elapsed / u32::try_from(done).unwrap_or(u32::MAX);
        return Some(per.saturating_mul(rest));
    }
    mean.map(|m| m.saturating_sub(elapsed))
}

/// A job a worker holds now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunningJob {
    /// Its kind.
    pub kind: ProofKind,
    /// The lane of the worker that took it.
    pub lane: Lane,
    /// How long it has run.
    pub elapsed: Duration,
}

/// A queued job, as the model sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueuedJob {
    /// Its kind.
    pub kind: ProofKind,
    /// Its class.
    pub priority: Priority,
}

/// When a worker frees: `Some(t)` after `t`, `None` at a time no measurement tells.
type FreeAt = Option<Duration>;

/// The estimated wait before a new job of class `priority` starts, given the `workers`
/// workers that take any job (and the one critical worker), the jobs running now, the jobs
/// queued now in the order the engine takes them (highest class first, then submission
/// order), and the measured times. `None` when it depends on a kind not measured yet.
pub fn estimate_start(
    workers: usize,
    running: &[RunningJob],
    queued: &[QueuedJob],
    priority: Priority,
    measured: &Measured,
) -> Option<Duration> {
    let (mut any, mut critical) = free_times(workers, running, measured);
    let ahead = queued.iter().filter(|q| q.priority >= priority);
    for job in ahead {
        hold(&mut any, &mut critical, job, measured);
    }
    take(&mut any, &mut critical, priority == Priority::Critical).at
}

/// The estimated start of every queued job, in the engine's order (`queued`, highest class
/// first): what [`estimate_start`] says of each behind the ones before it, in one pass
/// (a queue of many jobs is not played again for each).
pub fn estimate_starts(
    workers: usize,
    running: &[RunningJob],
    queued: &[QueuedJob],
    measured: &Measured,
) -> Vec<Option<Duration>> {
    let (mut any, mut critical) = free_times(workers, running, measured);
    (queued.iter())
        .map(|job| hold(&mut any, &mut critical, job, measured))
        .collect()
}

/// When each worker of the Any lane frees, then the critical one's; an idle worker is free
/// now.
fn free_times(
    workers: usize,
    running: &[RunningJob],
    measured: &Measured,
) -> (Vec<FreeAt>, FreeAt) {
    let remaining = |job: &RunningJob| -> FreeAt {
        measured
            .mean(job.kind)
            .map(|m| m.saturating_sub(job.elapsed))
    };
    let mut any: Vec<FreeAt> = (running.iter())
        .filter(|j| j.lane == Lane::Any)
        .map(remaining)
        .collect();
    any.resize(workers.max(1).max(any.len()), Some(Duration::ZERO));
    let critical: FreeAt = (running.iter())
        .find(|j| j.lane == Lane::Critical)
        .map_or(Some(Duration::ZERO), remaining);
    (any, critical)
}

/// `job` takes the worker that frees first among those it may use and holds it for its
/// kind's measured time: its start.
fn hold(any: &mut [FreeAt], critical: &mut FreeAt, job: &QueuedJob, measured: &Measured) -> FreeAt {
    let took = take(any, critical, job.priority == Priority::Critical);
    let at = took.at;
    *took.slot = match (at, measured.mean(job.kind)) {
        (Some(at), Some(hold)) => Some(at.saturating_add(hold)),
        _ => None,
    };
    at
}

/// The worker a job takes: where it is, and when the job starts on it.
struct Taken<'a> {
    slot: &'a mut FreeAt,
    at: FreeAt,
}

/// The worker that frees first among those a job may use (the critical one too when
/// `critical`), by the model's rule: a known time beats an unknown one only when it is
/// now (an unknown one may free any moment); otherwise any unknown makes the start unknown.
fn take<'a>(any: &'a mut [FreeAt], critical: &'a mut FreeAt, is_critical: bool) -> Taken<'a> {
    let mut slots: Vec<&'a mut FreeAt> = any.iter_mut().collect();
    if is_critical {
        slots.push(critical);
    }
    let unknown = slots.iter().any(|s| s.is_none());
    // The earliest known, first in order on a tie (the engine's lanes are not ordered, so
    // any choice is the model's).
    let mut best: Option<usize> = None;
    for (i, s) in slots.iter().enumerate() {
        if let Some(t) = **s {
            if best.is_none_or(|b| slots[b].is_some_and(|bt| t < bt)) {
                best = Some(i);
            }
        }
    }
    match best {
        Some(i) => {
            let t = slots[i].unwrap_or_default();
            let at = (!unknown || t.is_zero()).then_some(t);
            Taken {
                slot: slots.swap_remove(i),
                at,
            }
        }
        None => {
            // Every worker it may use frees at an unknown time: take the first.
            Taken {
                slot: slots.swap_remove(0),
                at: None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    fn measured(times: &[(ProofKind, u64)]) -> Measured {
        let mut m = Measured::default();
        for &(kind, secs) in times {
            m.record(kind, S * secs as u32);
        }
        m
    }

    fn run(kind: ProofKind, lane: Lane, elapsed_s: u64) -> RunningJob {
        RunningJob {
            kind,
            lane,
            elapsed: S * elapsed_s as u32,
        }
    }

    fn q(kind: ProofKind, priority: Priority) -> QueuedJob {
        QueuedJob { kind, priority }
    }

    use Priority::{Critical, High, Low, Normal};
    use ProofKind::{PoRep, SnapDeals, WindowPoSt, WinningPoSt};

    #[test]
    fn every_queued_jobs_start_in_one_pass_is_the_one_behind_those_before_it() {
        use Priority::*;
        use ProofKind::*;
        let m = measured(&[(PoRep, 300), (WindowPoSt, 60), (WinningPoSt, 2)]);
        let running = [
            run(PoRep, Lane::Any, 100),
            run(WinningPoSt, Lane::Critical, 1),
        ];
        let queued = [
            q(WinningPoSt, Critical),
            q(WindowPoSt, High),
            q(WindowPoSt, High),
            q(PoRep, Normal),
            q(SnapDeals, Normal),
            q(PoRep, Low),
        ];
        let all = estimate_starts(2, &running, &queued, &m);
        assert_eq!(all.len(), queued.len());
        for (k, job) in queued.iter().enumerate() {
            let one = estimate_start(2, &running, &queued[..k], job.priority, &m);
            assert_eq!(all[k], one, "job {k}");
        }
        // Known up to the unmeasured SnapDeals, unknown behind it.
        assert!(
            all[..5].iter().all(Option::is_some) && all[5].is_none(),
            "{all:?}"
        );
    }

    #[test]
    fn a_running_job_has_left_its_own_pace_once_a_partition_is_done() {
        let s = Duration::from_secs;
        // Nothing done: the kind's mean less what it has run, unknown unmeasured.
        assert_eq!(time_left(Some(s(100)), s(30), (0, 10)), Some(s(70)));
        assert_eq!(time_left(Some(s(100)), s(130), (0, 10)), Some(s(0)));
        assert_eq!(time_left(None, s(30), (0, 10)), None);
        // 2 of 10 partitions in 40 s: 8 more at 20 s each, whatever the mean says.
        assert_eq!(time_left(Some(s(100)), s(40), (2, 10)), Some(s(160)));
        assert_eq!(time_left(None, s(40), (2, 10)), Some(s(160)));
        assert_eq!(time_left(None, s(40), (10, 10)), Some(s(0)));
    }

    #[test]
    fn mean_then_moving_average() {
        let mut m = Measured::default();
        assert_eq!(m.mean(PoRep), None);
        assert_eq!(m.count(PoRep), 0);
        m.record(PoRep, S * 10);
        m.record(PoRep, S * 20);
        assert_eq!(m.mean(PoRep), Some(S * 15));
        m.record(PoRep, S * 30);
        assert_eq!(m.mean(PoRep), Some(S * 20));
        assert_eq!(m.count(PoRep), 3);
        // The first eight: their mean.
        for _ in 3..8 {
            m.record(PoRep, S * 20);
        }
        assert_eq!(m.mean(PoRep), Some(S * 20));
        // Then each new job weighs an eighth.
        m.record(PoRep, S * 100);
        assert_eq!(m.mean(PoRep), Some(S * 30));
        m.record(PoRep, Duration::ZERO);
        assert_eq!(m.mean(PoRep), Some(Duration::from_millis(26_250)));
        assert_eq!(m.mean(SnapDeals), None);
    }

    #[test]
    fn an_idle_worker_starts_it_now_even_unmeasured() {
        let none = Measured::default();
        assert_eq!(
            estimate_start(2, &[], &[], Normal, &none),
            Some(Duration::ZERO)
        );
        // One of two workers busy with an unmeasured kind: the other is idle.
        let running = [run(PoRep, Lane::Any, 5)];
        assert_eq!(
            estimate_start(2, &running, &[], Normal, &none),
            Some(Duration::ZERO)
        );
        // Both busy: unknown.
        let running = [run(PoRep, Lane::Any, 5), run(PoRep, Lane::Any, 1)];
        assert_eq!(estimate_start(2, &running, &[], Normal, &none), None);
    }

    #[test]
    fn waits_for_the_first_worker_to_free() {
        let m = measured(&[(PoRep, 100)]);
        let running = [run(PoRep, Lane::Any, 30), run(PoRep, Lane::Any, 90)];
        assert_eq!(estimate_start(2, &running, &[], Normal, &m), Some(S * 10));
        // Overdue: frees any moment.
        let running = [run(PoRep, Lane::Any, 130), run(PoRep, Lane::Any, 90)];
        assert_eq!(
            estimate_start(2, &running, &[], Normal, &m),
            Some(Duration::ZERO)
        );
    }

    #[test]
    fn queued_jobs_of_its_class_or_higher_go_first() {
        let m = measured(&[(PoRep, 100), (SnapDeals, 40), (WindowPoSt, 10)]);
        let running = [run(PoRep, Lane::Any, 50)];
        // Queue order: High, then Normal, then Low (the engine's heap order).
        let queued = [
            q(WindowPoSt, High),
            q(SnapDeals, Normal),
            q(PoRep, Normal),
            q(PoRep, Low),
        ];
        // One worker: 50 s left, then WindowPoSt 10, SnapDeals 40, PoRep 100.
        assert_eq!(
            estimate_start(1, &running, &queued, Normal, &m),
            Some(S * 200)
        );
        // A High job waits only for the WindowPoSt ahead of it.
        assert_eq!(estimate_start(1, &running, &queued, High, &m), Some(S * 60));
        // A Low one for everything queued.
        assert_eq!(estimate_start(1, &running, &queued, Low, &m), Some(S * 300));
        // Two workers: the second is idle, so the WindowPoSt starts now on it.
        // Worker A frees at 50, B at 10 (WindowPoSt); SnapDeals on B 10..50, PoRep on
        // A 50..150 (A and B tie at 50: either), the new Normal job at 50.
        assert_eq!(
            estimate_start(2, &running, &queued, Normal, &m),
            Some(S * 50)
        );
    }

    #[test]
    fn an_unmeasured_kind_ahead_makes_it_unknown() {
        let m = measured(&[(PoRep, 100)]);
        let running = [run(PoRep, Lane::Any, 50)];
        let queued = [q(SnapDeals, Normal), q(PoRep, Normal)];
        assert_eq!(estimate_start(1, &running, &queued, Normal, &m), None);
        // Not when it is of a lower class: it stays behind.
        let queued = [q(SnapDeals, Low)];
        assert_eq!(
            estimate_start(1, &running, &queued, Normal, &m),
            Some(S * 50)
        );
        // Nor when an idle worker is left for the new job after it.
        let queued = [q(SnapDeals, Normal)];
        assert_eq!(
            estimate_start(3, &running, &queued, Normal, &m),
            Some(Duration::ZERO)
        );
    }

    #[test]
    fn critical_jobs_have_a_worker_of_their_own() {
        let m = measured(&[(PoRep, 100), (WinningPoSt, 2)]);
        let running = [run(PoRep, Lane::Any, 0)];
        // The critical worker is idle: a critical job starts now, a normal one waits.
        assert_eq!(
            estimate_start(1, &running, &[], Critical, &m),
            Some(Duration::ZERO)
        );
        assert_eq!(estimate_start(1, &running, &[], Normal, &m), Some(S * 100));
        // A critical job on the critical worker, another queued: the next goes after it.
        let running = [
            run(PoRep, Lane::Any, 0),
            run(WinningPoSt, Lane::Critical, 1),
        ];
        let queued = [q(WinningPoSt, Critical)];
        assert_eq!(
            estimate_start(1, &running, &queued, Critical, &m),
            Some(S * 3)
        );
        // A normal job does not count on the critical worker, and the queued critical job
        // takes the critical worker (it frees first), not the normal job's.
        assert_eq!(
            estimate_start(1, &running, &queued, Normal, &m),
            Some(S * 100)
        );
    }
}
