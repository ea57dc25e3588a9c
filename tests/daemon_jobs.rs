//! The job engine through the real cuzkd: cancellation, priorities, idempotent request ids,
//! the bounded queue and result retention. `debug.job_delay` makes each job take a known
//! time (cancellable), then fail fast on a bogus input: scheduling is observable without
//! spending minutes proving.

mod daemon_support;

use std::time::{Duration, Instant};

use cuzk::proto::{ErrorCode, JobState, Priority};
use daemon_support::*;
use nix::sys::signal::Signal;

/// One job in flight (the default keeps one per synthesis thread in flight), so that the
/// queue behind it is observable.
const ONE_AT_A_TIME: (&str, &str) = ("proving.workers", "1");

fn stop(mut daemon: Daemon) {
    daemon.signal(Signal::SIGTERM);
    let status = daemon.wait_exit(Duration::from_secs(30));
    assert!(status.success(), "stderr:\n{}", daemon.env.stderr());
}

fn wait_running(client: &mut cuzk::proto::Client, job: u64) {
    eventually("the job to run", Duration::from_secs(10), || {
        (job_state(client, job) == JobState::Running).then_some(())
    });
}

#[test]
fn cancel_a_queued_and_a_running_job() {
    let daemon = Daemon::start(&[("debug.job_delay", "\"20s\""), ONE_AT_A_TIME]);
    let mut c = daemon.client();
    let running = c.submit(bogus_porep("running")).unwrap().job_id;
    let queued = c.submit(bogus_porep("queued")).unwrap().job_id;
    wait_running(&mut c, running);
    assert_eq!(job_state(&mut c, queued), JobState::Queued);

    let q = c.cancel(queued).unwrap();
    assert!(!q.was_running);
    assert_eq!(
        code(&c.await_job(queued, None).unwrap_err()),
        ErrorCode::Cancelled
    );
    assert_eq!(job_state(&mut c, queued), JobState::Cancelled);

    let t = Instant::now();
    let r = c.cancel(running).unwrap();
    assert!(r.was_running);
    assert_eq!(
        code(&c.await_job(running, None).unwrap_err()),
        ErrorCode::Cancelled
    );
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "a running job stops promptly: {:?}",
        t.elapsed()
    );
    let s = c.status(None).unwrap();
    assert_eq!((s.queued, s.running, s.cancelled), (0, 0, 2));
    assert_eq!(
        code(&c.cancel(running).unwrap_err()),
        ErrorCode::JobFinished
    );
    assert_eq!(code(&c.cancel(99_999).unwrap_err()), ErrorCode::UnknownJob);
    stop(daemon);
}

#[test]
fn a_critical_job_behind_normal_ones_starts_at_once() {
    let daemon = Daemon::start(&[("debug.job_delay", "\"1500ms\""), ONE_AT_A_TIME]);
    let mut c = daemon.client();
    let first = c.submit(bogus_porep("first")).unwrap().job_id;
    wait_running(&mut c, first);
    let normals: Vec<u64> = (0..3)
        .map(|i| c.submit(bogus_porep(&format!("n{i}"))).unwrap().job_id)
        .collect();
    let mut low = bogus_porep("low");
    low.priority = Some(Priority::Low);
    let low = c.submit(low).unwrap().job_id;
    let critical = c.submit(bogus_winning("w")).unwrap();
    assert_eq!(
        critical.priority,
        Priority::Critical,
        "WinningPoSt is critical by default"
    );
    // The critical job starts on the worker kept for critical jobs, while the first job
    // still runs; the normal ones keep waiting for the general worker.
    wait_running(&mut c, critical.job_id);
    assert_eq!(job_state(&mut c, first), JobState::Running);
    for &n in &normals {
        assert_eq!(job_state(&mut c, n), JobState::Queued, "normal job {n}");
    }
    assert_eq!(job_state(&mut c, low), JobState::Queued);
    // Then the normal ones in order, the low one last.
    assert_eq!(
        code(&c.await_job(critical.job_id, None).unwrap_err()),
        ErrorCode::InvalidInput
    );
    assert_eq!(
        code(&c.await_job(first, None).unwrap_err()),
        ErrorCode::InvalidInput
    );
    wait_running(&mut c, normals[0]);
    for &n in &normals {
        c.cancel(n).unwrap();
    }
    wait_running(&mut c, low);
    stop(daemon);
}

#[test]
fn a_repeated_request_id_is_the_same_job_and_a_conflicting_one_an_error() {
    let daemon = Daemon::start(&[("debug.job_delay", "\"500ms\""), ONE_AT_A_TIME]);
    let mut c = daemon.client();
    let mut first = bogus_porep("same");
    first.request_id = Some("sector-1000-1".into());
    let a = c.submit(first.clone()).unwrap();
    assert!(!a.existing);
    // Another connection, same id and payload: the same job.
    let mut other = daemon.client();
    let b = other.submit(first.clone()).unwrap();
    assert_eq!(b.job_id, a.job_id);
    assert!(b.existing);
    // Same id, different payload: an error naming the job, never an overwrite.
    let mut conflicting = bogus_porep("different");
    conflicting.request_id = Some("sector-1000-1".into());
    let err = other.submit(conflicting).unwrap_err();
    assert_eq!(code(&err), ErrorCode::RequestIdConflict);
    let cuzk::proto::ClientError::Server(e) = err else {
        unreachable!()
    };
    assert_eq!(e.job_id, Some(a.job_id));
    // Prove with the same id joins the same job and gets its result.
    assert_eq!(
        code(&other.prove(first.clone()).unwrap_err()),
        ErrorCode::InvalidInput
    );
    assert_eq!(
        c.status(None).unwrap().jobs.len(),
        1,
        "only one job was ever created"
    );
    stop(daemon);
}

#[test]
fn a_full_queue_answers_busy_but_keeps_room_for_critical_jobs() {
    let daemon = Daemon::start(&[
        ("debug.job_delay", "\"20s\""),
        ("queue.max_queued", "3"),
        ("queue.critical_reserve", "1"),
        ONE_AT_A_TIME,
    ]);
    let mut c = daemon.client();
    let running = c.submit(bogus_porep("running")).unwrap().job_id;
    wait_running(&mut c, running);
    c.submit(bogus_porep("q1")).unwrap();
    c.submit(bogus_porep("q2")).unwrap();
    assert_eq!(
        code(&c.submit(bogus_porep("q3")).unwrap_err()),
        ErrorCode::QueueFull
    );
    // The first critical job starts at once on the critical worker; the second waits in
    // the reserved slot; a third finds the queue full.
    let critical = c.submit(bogus_winning("critical")).unwrap().job_id;
    wait_running(&mut c, critical);
    c.submit(bogus_winning("critical 2"))
        .expect("the reserve takes a critical job");
    assert_eq!(
        code(&c.submit(bogus_winning("critical 3")).unwrap_err()),
        ErrorCode::QueueFull
    );
    assert!(c.metrics().unwrap().contains("cuzk_queue_full_total 2"));
    c.cancel(running).unwrap();
    c.cancel(critical).unwrap();
    stop(daemon);
}

#[test]
fn finished_results_are_dropped_after_the_retention_time() {
    let daemon = Daemon::start(&[("queue.result_retention", "\"400ms\"")]);
    let mut c = daemon.client();
    let job = c.submit(bogus_porep("r")).unwrap().job_id;
    assert_eq!(
        code(&c.await_job(job, None).unwrap_err()),
        ErrorCode::InvalidInput
    );
    assert_eq!(
        code(&c.await_job(job, None).unwrap_err()),
        ErrorCode::InvalidInput,
        "kept for a while"
    );
    eventually("the result to expire", Duration::from_secs(5), || {
        c.await_job(job, Some(Duration::ZERO))
            .err()
            .filter(|e| code(e) == ErrorCode::UnknownJob)
    });
    stop(daemon);
}

#[test]
fn await_with_a_timeout_reports_pending() {
    let daemon = Daemon::start(&[("debug.job_delay", "\"5s\""), ONE_AT_A_TIME]);
    let mut c = daemon.client();
    let job = c.submit(bogus_porep("slow")).unwrap().job_id;
    let t = Instant::now();
    let info = c
        .await_job(job, Some(Duration::from_millis(300)))
        .unwrap()
        .unwrap_err();
    assert!(t.elapsed() >= Duration::from_millis(300) && t.elapsed() < Duration::from_secs(3));
    assert_eq!(info.job_id, job);
    assert!(matches!(info.state, JobState::Queued | JobState::Running));
    c.cancel(job).unwrap();
    stop(daemon);
}

/// An input that a parser echoes in its error (serde's "unknown variant …") fails the job
/// with a message capped and escaped: it is kept for the retention time, returned by every
/// Status and logged (issue 16, defects 1 and 7).
#[test]
fn an_echoed_input_is_capped_and_escaped_in_the_error() {
    let daemon = Daemon::start(&[]);
    let mut c = daemon.client();
    let long = format!("{}\nERROR forged line\x1b[31m", "A".repeat(200_000));
    let c1 = serde_json::json!({ "registered_proof": long }).to_string();
    let submit = cuzk::proto::Submit {
        request_id: None,
        priority: None,
        input: cuzk::proto::ProofInput::PoRep {
            c1: c1.into_bytes(),
            miner_id: 1000,
            sector_number: Some(1),
        },
    };
    let job = c.submit(submit).unwrap().job_id;
    let err = c.await_job(job, None).map(|_| ()).unwrap_err();
    assert_eq!(code(&err), ErrorCode::InvalidInput, "{err}");
    let message = match &err {
        cuzk::proto::ClientError::Server(e) => e.message.clone(),
        other => panic!("{other}"),
    };
    assert!(message.len() <= 1100, "{} bytes", message.len());
    assert!(
        message.contains("AAAA") && message.contains("more bytes"),
        "{message}"
    );
    assert!(
        !message.contains('\n') && !message.contains('\x1b'),
        "{message}"
    );
    let status = c.status(None).unwrap();
    let kept = status.jobs.iter().find(|j| j.job_id == job).unwrap();
    assert!(kept.error.as_ref().is_some_and(|e| e.len() <= 1100));
    stop(daemon);
}
