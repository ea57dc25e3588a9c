//! `Deadlines` through the real cuzkd: every queued and running job with a deadline is
//! listed, earliest due first, with its time to (or past) the deadline; a job without one
//! is not, and the answer is bounded by the count asked for. `debug.job_delay` keeps the
//! jobs (bogus inputs that fail fast once their delay ends) queued and running long enough
//! to be observed; none succeeds, so no projected end is known.

mod daemon_support;

use std::time::{Duration, Instant};

use cuzk::proto::{DeadlineInfo, JobState, ProofKind};
use daemon_support::*;

fn wait_running(client: &mut cuzk::proto::Client, job: u64) {
    eventually("the job to run", Duration::from_secs(10), || {
        (job_state(client, job) == JobState::Running).then_some(())
    });
}

#[test]
fn deadlines_lists_the_jobs_with_a_deadline_earliest_due_first() {
    let daemon = Daemon::start(&[("debug.job_delay", "\"30s\""), ("proving.workers", "1")]);
    let mut c = daemon.client();
    assert_eq!(c.deadlines(0).unwrap().jobs, vec![], "nothing queued");
    let submitted = Instant::now();
    let running = c
        .submit_within(bogus_porep("running"), Duration::from_secs(600))
        .unwrap()
        .job_id;
    wait_running(&mut c, running);
    let plain = c.submit(bogus_porep("plain")).unwrap().job_id;
    let soon = c
        .submit_within(bogus_porep("soon"), Duration::from_secs(60))
        .unwrap()
        .job_id;
    let past = c
        .submit_within(bogus_porep("past"), Duration::from_millis(1))
        .unwrap()
        .job_id;
    std::thread::sleep(Duration::from_millis(20));

    let r = c.deadlines(0).unwrap();
    let asked = submitted.elapsed().as_millis() as u64;
    let ids: Vec<u64> = r.jobs.iter().map(|j| j.job_id).collect();
    assert_eq!(ids, vec![past, soon, running], "{r:?}");
    assert!(
        !ids.contains(&plain),
        "a job without a deadline is not listed"
    );
    assert_eq!(r.more, 0);
    let job = |id: u64| -> &DeadlineInfo { r.jobs.iter().find(|j| j.job_id == id).unwrap() };
    // Due within what was asked for, less at most the time since submission (a millisecond
    // more: both sides round down).
    let soon_job = job(soon);
    assert_eq!(soon_job.state, JobState::Queued);
    assert_eq!(soon_job.overdue_ms, 0);
    assert!(soon_job.due_in_ms <= 60_000, "{soon_job:?}");
    assert!(soon_job.due_in_ms + 1 >= 60_000 - asked, "{soon_job:?}");
    let run = job(running);
    assert_eq!((run.state, run.kind), (JobState::Running, ProofKind::PoRep));
    assert!(run.due_in_ms <= 600_000, "{run:?}");
    assert!(run.due_in_ms + 1 >= 600_000 - asked, "{run:?}");
    // Past its deadline: no time left, the time since it passed.
    let late = job(past);
    assert_eq!(late.due_in_ms, 0, "{late:?}");
    assert!(
        late.overdue_ms >= 19 && late.overdue_ms <= asked,
        "{late:?}"
    );
    // No PoRep has succeeded: no end is projected.
    assert!(r.jobs.iter().all(|j| j.ends_in_ms.is_none()), "{r:?}");

    // Bounded: the earliest due, and the count of the rest.
    let first = c.deadlines(1).unwrap();
    let first_ids: Vec<u64> = first.jobs.iter().map(|j| j.job_id).collect();
    assert_eq!((first_ids, first.more), (vec![past], 2));

    for id in [past, soon, plain, running] {
        c.cancel(id).unwrap();
    }
    eventually("the list to empty", Duration::from_secs(10), || {
        let r = c.deadlines(0).unwrap();
        (r.jobs.is_empty() && r.more == 0).then_some(())
    });
    stop(daemon);
}
