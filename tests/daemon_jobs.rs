//! The job engine through the real cuzkd: cancellation, priorities, idempotent request ids,
//! the bounded queue and result retention. `debug.job_delay` makes each job take a known
//! time (cancellable), then fail fast on a bogus input: scheduling is observable without
//! spending minutes proving.

mod daemon_support;

use std::time::{Duration, Instant};

use cuzk::proto::{ErrorCode, JobState, Priority, ProofKind};
use daemon_support::*;

/// One job in flight (the default keeps one per synthesis thread in flight), so that the
/// queue behind it is observable.
const ONE_AT_A_TIME: (&str, &str) = ("proving.workers", "1");

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

/// The server's error of a failed request.
fn server_error(e: cuzk::proto::ClientError) -> cuzk::proto::ErrorResponse {
    match e {
        cuzk::proto::ClientError::Server(e) => e,
        other => panic!("want an error response, got {other}"),
    }
}

/// With the check on (the default outside these tests), Submit and Prove parse the input
/// before queueing: an unparseable C1, an input that is not JSON, or vanilla proofs that do
/// not decode are refused at once with InvalidInput, no job is made and no queue slot taken
/// (issue 17, item 2).
#[test]
fn submit_refuses_invalid_input_before_queueing() {
    let daemon = Daemon::start(&[
        ("debug.check_input", "true"),
        ("queue.max_queued", "2"),
        ("queue.critical_reserve", "1"),
    ]);
    let mut c = daemon.client();
    let e = server_error(c.submit(bogus_porep("x")).unwrap_err());
    assert_eq!(e.code, ErrorCode::InvalidInput, "{e:?}");
    assert_eq!(e.job_id, None, "no job was made");
    assert!(e.message.contains("C1 output"), "{e:?}");
    let e = server_error(c.prove(bogus_winning("w")).unwrap_err());
    assert_eq!((e.code, e.job_id), (ErrorCode::InvalidInput, None), "{e:?}");
    // Well-formed JSON whose vanilla proof does not decode.
    let window = serde_json::json!({
        "registered_proof": "StackedDrgWindow2KiBV1_2",
        "randomness": "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
        "miner_id": 1000,
        "partition_index": 0,
        "vanilla_proofs": ["AAAA"],
    });
    let submit = cuzk::proto::Submit {
        request_id: Some("window-1".into()),
        priority: None,
        input: cuzk::proto::ProofInput::WindowPoSt {
            input: window.to_string().into_bytes(),
        },
    };
    let e = server_error(c.submit(submit.clone()).unwrap_err());
    assert_eq!(e.code, ErrorCode::InvalidInput, "{e:?}");
    assert!(e.message.contains("vanilla proof 0"), "{e:?}");
    let s = c.status(None).unwrap();
    assert!(s.jobs.is_empty(), "nothing was queued: {:?}", s.jobs);
    assert_eq!((s.queued, s.running, s.failed), (0, 0, 0));
    // The refused request id is not held: still refused for its input, never a conflict.
    let e = server_error(c.submit(submit).unwrap_err());
    assert_eq!(e.code, ErrorCode::InvalidInput, "{e:?}");
    stop(daemon);
}

/// A request id is released when its job failed or was cancelled (or is being cancelled):
/// the same request again is a new job, so that a miner using the sector as its request id
/// can retry (issue 17, item 2).
#[test]
fn a_failed_or_cancelled_jobs_request_id_names_a_new_job() {
    let daemon = Daemon::start(&[("debug.job_delay", "\"20s\""), ONE_AT_A_TIME]);
    let mut c = daemon.client();
    let mut first = bogus_porep("sector");
    first.request_id = Some("sector-1000-7".into());
    let a = c.submit(first.clone()).unwrap();
    wait_running(&mut c, a.job_id);
    // Cancelled while running: the id is free as soon as Cancel is answered.
    assert!(c.cancel(a.job_id).unwrap().was_running);
    let b = c.submit(first.clone()).unwrap();
    assert!(!b.existing, "a new job");
    assert_ne!(b.job_id, a.job_id);
    assert_eq!(
        code(&c.await_job(a.job_id, None).unwrap_err()),
        ErrorCode::Cancelled,
        "the old job is still known by its id"
    );
    // Cancelled while queued.
    wait_running(&mut c, b.job_id);
    let mut queued = bogus_porep("queued");
    queued.request_id = Some("sector-1000-8".into());
    let q = c.submit(queued.clone()).unwrap();
    assert!(!c.cancel(q.job_id).unwrap().was_running);
    let q2 = c.submit(queued).unwrap();
    assert!(!q2.existing && q2.job_id != q.job_id);
    // Resubmitting the live job is still the same job.
    let again = c.submit(first.clone()).unwrap();
    assert!(again.existing && again.job_id == b.job_id);
    c.cancel(q2.job_id).unwrap();
    c.cancel(b.job_id).unwrap();
    assert_eq!(
        code(&c.await_job(b.job_id, None).unwrap_err()),
        ErrorCode::Cancelled
    );
    stop(daemon);

    // Failed: the id names a new job, even with another input.
    let daemon = Daemon::start(&[]);
    let mut c = daemon.client();
    let failed = c.submit(first.clone()).unwrap().job_id;
    assert_eq!(
        code(&c.await_job(failed, None).unwrap_err()),
        ErrorCode::InvalidInput
    );
    let retry = c.submit(first.clone()).unwrap();
    assert!(!retry.existing && retry.job_id != failed);
    assert_eq!(
        code(&c.await_job(retry.job_id, None).unwrap_err()),
        ErrorCode::InvalidInput
    );
    let mut other = bogus_porep("another input");
    other.request_id = first.request_id.clone();
    let third = c.submit(other).unwrap();
    assert!(!third.existing && third.job_id != retry.job_id);
    let _ = c.await_job(third.job_id, None);
    // The retained failed jobs are all still known.
    let ids: Vec<u64> = c
        .status(None)
        .unwrap()
        .jobs
        .iter()
        .map(|j| j.job_id)
        .collect();
    assert_eq!(ids, vec![failed, retry.job_id, third.job_id]);
    stop(daemon);
}

/// A resubmission under a request id with another explicit priority is never ignored: it
/// raises a queued job's priority (the job then goes before the class it left), and is
/// refused with PriorityConflict where it cannot apply (lower, or the job is running)
/// (issue 17, item 2).
#[test]
fn a_resubmission_raises_a_queued_jobs_priority_or_is_refused() {
    let daemon = Daemon::start(&[("debug.job_delay", "\"20s\""), ONE_AT_A_TIME]);
    let mut c = daemon.client();
    let blocker = c.submit(bogus_porep("blocker")).unwrap().job_id;
    wait_running(&mut c, blocker);
    let mut low = bogus_porep("low");
    low.request_id = Some("sector-1000-9".into());
    low.priority = Some(Priority::Low);
    let a = c.submit(low.clone()).unwrap();
    assert_eq!(a.priority, Priority::Low);
    let normal = c.submit(bogus_porep("normal")).unwrap().job_id;

    let mut high = low.clone();
    high.priority = Some(Priority::High);
    let raised = c.submit(high).unwrap();
    assert_eq!(
        (raised.job_id, raised.existing, raised.priority),
        (a.job_id, true, Priority::High),
        "the queued job's priority was raised"
    );
    let info = c.status(Some(a.job_id)).unwrap().jobs[0].clone();
    assert_eq!(info.priority, Priority::High);
    // Lower than the job's: refused, naming the job.
    let mut lower = low.clone();
    lower.priority = Some(Priority::Normal);
    let e = server_error(c.submit(lower).unwrap_err());
    assert_eq!(
        (e.code, e.job_id),
        (ErrorCode::PriorityConflict, Some(a.job_id)),
        "{e:?}"
    );
    // No priority: whatever the job has.
    let mut none = low.clone();
    none.priority = None;
    let same = c.submit(none).unwrap();
    assert_eq!((same.existing, same.priority), (true, Priority::High));

    // The raised job now goes before the normal one submitted before it was raised.
    c.cancel(blocker).unwrap();
    wait_running(&mut c, a.job_id);
    assert_eq!(job_state(&mut c, normal), JobState::Queued);
    // A running job's priority cannot change.
    let mut critical = low.clone();
    critical.priority = Some(Priority::Critical);
    let e = server_error(c.submit(critical).unwrap_err());
    assert_eq!(
        (e.code, e.job_id),
        (ErrorCode::PriorityConflict, Some(a.job_id)),
        "{e:?}"
    );
    c.cancel(normal).unwrap();
    c.cancel(a.job_id).unwrap();
    stop(daemon);
}

/// A response larger than the frame limit is a typed error the client can act on, not
/// `Internal`; Status lists as many jobs as fit, unfinished ones first (issue 17, item 2).
#[test]
fn a_response_over_the_frame_limit_is_typed_and_status_fits() {
    let daemon = Daemon::start(&[
        ("debug.job_delay", "\"20s\""),
        ("protocol.max_frame_size", "1024"),
        ONE_AT_A_TIME,
    ]);
    let mut c = daemon.client();
    let e = server_error(c.metrics().unwrap_err());
    assert_eq!(e.code, ErrorCode::ResponseTooLarge, "{e:?}");
    assert!(e.message.contains("1024"), "{e:?}");
    let jobs: Vec<u64> = (0..8)
        .map(|i| {
            let mut s = bogus_porep(&format!("j{i}"));
            s.request_id = Some(format!("{i:0>200}"));
            c.submit(s).unwrap().job_id
        })
        .collect();
    let s = c.status(None).unwrap();
    assert_eq!(s.queued + s.running, 8);
    assert!(
        !s.jobs.is_empty() && s.jobs.len() < 8,
        "{} jobs listed",
        s.jobs.len()
    );
    let listed: Vec<u64> = s.jobs.iter().map(|j| j.job_id).collect();
    let mut sorted = listed.clone();
    sorted.sort_unstable();
    assert_eq!(listed, sorted, "in job id order");
    // One job at a time always fits.
    assert_eq!(c.status(Some(jobs[7])).unwrap().jobs[0].job_id, jobs[7]);
    // Jobs pages through all of them, with the count of the rest.
    let first = c.jobs(None, 3).unwrap();
    assert_eq!(first.jobs.len(), 3);
    assert_eq!(first.more, 5);
    let mut seen: Vec<u64> = first.jobs.iter().map(|j| j.job_id).collect();
    loop {
        let page = c.jobs(seen.last().copied(), 0).unwrap();
        assert!(!page.jobs.is_empty(), "each job alone fits");
        seen.extend(page.jobs.iter().map(|j| j.job_id));
        assert_eq!(page.more, (8 - seen.len()) as u64);
        if page.more == 0 {
            break;
        }
    }
    assert_eq!(seen, jobs);
    for j in jobs {
        c.cancel(j).unwrap();
    }
    stop(daemon);
}

/// Lookup (request 14, appended to version 1): a client that lost its job id (a miner that
/// restarted) finds the job by its request id, on a new connection, without resending the
/// input; the newest job under the id, failed ones included; nothing past retention.
#[test]
fn a_job_is_found_by_its_request_id_from_a_new_connection() {
    let daemon = Daemon::start(&[
        ("debug.job_delay", "\"1s\""),
        ("queue.result_retention", "\"3s\""),
        ONE_AT_A_TIME,
    ]);
    let with_id = |tag: &str| {
        let mut s = bogus_porep(tag);
        s.request_id = Some("sector-7".into());
        s
    };
    let first = {
        // The submitting client goes away with the job id.
        let mut gone = daemon.client();
        gone.submit(with_id("first")).unwrap().job_id
    };
    let mut c = daemon.client();
    let found = c.lookup("sector-7").unwrap();
    assert_eq!(found.job_id, first);
    assert_eq!(found.request_id.as_deref(), Some("sector-7"));
    assert!(
        matches!(found.state, JobState::Queued | JobState::Running),
        "{found:?}"
    );
    // The same information Status gives for the job.
    let status = c.status(Some(first)).unwrap().jobs.remove(0);
    assert_eq!(
        (status.job_id, status.kind, status.priority),
        (found.job_id, found.kind, found.priority)
    );
    // Awaited by the id found; once it failed, Lookup reports the failure.
    assert_eq!(
        code(&c.await_job(first, None).unwrap_err()),
        ErrorCode::InvalidInput
    );
    let failed = c.lookup("sector-7").unwrap();
    assert_eq!((failed.job_id, failed.state), (first, JobState::Failed));
    assert!(failed.error.is_some(), "{failed:?}");
    // The failed job released the id: a resubmission is a new job, and the one found.
    let second = c.submit(with_id("second")).unwrap();
    assert!(!second.existing);
    assert_eq!(c.lookup("sector-7").unwrap().job_id, second.job_id);
    // Unknown and invalid ids; none of this made a job.
    let err = c.lookup("sector-8").unwrap_err();
    assert_eq!(code(&err), ErrorCode::UnknownJob);
    assert_eq!(server_error(err).job_id, None);
    assert_eq!(code(&c.lookup("").unwrap_err()), ErrorCode::InvalidInput);
    let long = "x".repeat(257);
    assert_eq!(code(&c.lookup(&long).unwrap_err()), ErrorCode::InvalidInput);
    assert_eq!(c.status(None).unwrap().jobs.len(), 2);
    // Past retention, the daemon knows neither job.
    let _ = c.await_job(second.job_id, None);
    eventually("both results to expire", Duration::from_secs(10), || {
        c.lookup("sector-7")
            .err()
            .filter(|e| code(e) == ErrorCode::UnknownJob)
    });
    stop(daemon);
}

/// Capacity counts every user's jobs per class, gives the room left for the class asked
/// about, and makes no estimate that needs a kind not measured yet (here: a job that
/// fails, so nothing is ever measured), except where a worker is idle for the job.
#[test]
fn capacity_counts_jobs_per_class_and_invents_no_estimate() {
    let daemon = Daemon::start(&[
        ("debug.job_delay", "\"20s\""),
        ONE_AT_A_TIME,
        ("queue.max_queued", "10"),
        ("queue.critical_reserve", "2"),
        ("proving.memory_budget", "\"4GiB\""),
    ]);
    let mut c = daemon.client();
    // Idle: a job would start at once, although nothing was measured.
    let idle = c.capacity(ProofKind::PoRep, None).unwrap();
    assert_eq!(idle.priority, Priority::Normal);
    assert_eq!((&idle.queued, &idle.running), (&vec![0; 4], &vec![0; 4]));
    assert_eq!((idle.workers, idle.queue_room), (1, 8));
    assert_eq!(idle.estimated_start_ms, Some(0));
    assert_eq!((idle.estimated_proof_ms, idle.measured_jobs), (None, 0));
    // Nothing resident, nothing reserved: the budget (less any page-locked pool).
    assert!(idle.budget_free_bytes <= 4 << 30, "{idle:?}");
    assert!(idle.budget_free_bytes > 2 << 30, "{idle:?}");

    let running = c.submit(bogus_porep("running")).unwrap().job_id;
    wait_running(&mut c, running);
    let with = |tag: &str, p: Priority| {
        let mut s = bogus_porep(tag);
        s.priority = Some(p);
        s
    };
    let mut queued = vec![];
    for (tag, p) in [
        ("n1", Priority::Normal),
        ("n2", Priority::Normal),
        ("l1", Priority::Low),
        ("h1", Priority::High),
    ] {
        queued.push(c.submit(with(tag, p)).unwrap().job_id);
    }
    let r = c.capacity(ProofKind::PoRep, None).unwrap();
    assert_eq!(r.queued, vec![1, 2, 1, 0], "{r:?}");
    assert_eq!(r.running, vec![0, 1, 0, 0], "{r:?}");
    assert_eq!(r.queue_room, 10 - 2 - 4);
    // The only worker is busy with a PoRep no proof measured: no estimate.
    assert_eq!(r.estimated_start_ms, None, "{r:?}");
    // A critical job may take the critical worker, which is idle.
    let critical = c.capacity(ProofKind::WinningPoSt, None).unwrap();
    assert_eq!(critical.priority, Priority::Critical);
    assert_eq!(critical.queue_room, 10 - 4);
    assert_eq!(critical.estimated_start_ms, Some(0), "{critical:?}");
    // A class asked for explicitly.
    let high = c.capacity(ProofKind::PoRep, Some(Priority::High)).unwrap();
    assert_eq!(
        (high.priority, high.estimated_start_ms),
        (Priority::High, None)
    );
    for id in queued.into_iter().chain([running]) {
        c.cancel(id).unwrap();
    }
    eventually("the queue to empty", Duration::from_secs(10), || {
        let r = c.capacity(ProofKind::PoRep, None).unwrap();
        (r.queued == vec![0; 4] && r.running == vec![0; 4]).then_some(())
    });
    stop(daemon);
}

/// SubmitWithin: within a class the job due first starts first, jobs without a deadline
/// after every job with one; a deadline past 30 days is refused as invalid input.
#[test]
fn jobs_due_earlier_start_first_within_their_class() {
    let daemon = Daemon::start(&[("debug.job_delay", "\"1500ms\""), ONE_AT_A_TIME]);
    let mut c = daemon.client();
    let first = c.submit(bogus_porep("first")).unwrap().job_id;
    wait_running(&mut c, first);
    let none = c.submit(bogus_porep("none")).unwrap().job_id;
    let late = c
        .submit_within(bogus_porep("late"), Duration::from_secs(600))
        .unwrap()
        .job_id;
    let soon = c
        .submit_within(bogus_porep("soon"), Duration::from_secs(60))
        .unwrap()
        .job_id;
    for (next, waiting) in [(soon, vec![late, none]), (late, vec![none]), (none, vec![])] {
        wait_running(&mut c, next);
        for &w in &waiting {
            assert_eq!(
                job_state(&mut c, w),
                JobState::Queued,
                "job {w} behind {next}"
            );
        }
        c.cancel(next).unwrap();
    }
    let refused = c
        .prove_within(bogus_porep("far"), Duration::from_secs(31 * 24 * 3600))
        .unwrap_err();
    assert_eq!(code(&refused), ErrorCode::InvalidInput, "{refused:?}");
    stop(daemon);
}
