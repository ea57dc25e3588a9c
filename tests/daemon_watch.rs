//! `Watch` through the real cuzkd over its real socket (docs/protocol.md, section 5,
//! **Watch**), with `debug.job_delay` and inputs that fail fast: watches end with Await's
//! answer, hanging up frees them, unknown jobs are unknown. A real proof watched stage by
//! stage (beside a watcher that never reads) is in tests/daemon_proof.rs; another uid's job
//! refused is in tests/daemon_trust.rs, which runs clients as other uids.

mod daemon_support;

use std::io::Write;
use std::sync::mpsc;
use std::time::Duration;

use cuzk::proto::{
    encode_frame, ErrorCode, JobRef, JobState, ProgressEvent, ProgressStage, Request,
};
use daemon_support::*;
use nix::sys::signal::Signal;

fn stop(mut daemon: Daemon) {
    daemon.signal(Signal::SIGTERM);
    let status = daemon.wait_exit(Duration::from_secs(30));
    assert!(status.success(), "stderr:\n{}", daemon.env.stderr());
}

/// Watches `job` on a new connection in a thread: its events as they come (on the channel),
/// then its answer (joined).
fn watch_in_thread(
    daemon: &Daemon,
    job: u64,
) -> (
    mpsc::Receiver<ProgressEvent>,
    std::thread::JoinHandle<Result<cuzk::proto::ProofResult, cuzk::proto::ClientError>>,
) {
    let (tx, rx) = mpsc::channel();
    let mut client = daemon.client();
    let handle = std::thread::spawn(move || {
        client.watch(job, |e| {
            let _ = tx.send(e.clone());
        })
    });
    (rx, handle)
}

/// The next event, failing after a while.
fn next(rx: &mpsc::Receiver<ProgressEvent>) -> ProgressEvent {
    rx.recv_timeout(Duration::from_secs(30))
        .expect("an event within 30 s")
}

/// A watch of a queued job starts with Queued, sees it start, and ends with Await's error
/// when it is cancelled; a watch of a failing job ends with its error; unknown jobs are
/// unknown; a Watch before Hello needs a Hello; a watcher that hangs up is let go at once.
#[test]
fn watches_end_with_awaits_errors_and_hanging_up_frees_them() {
    let daemon = Daemon::start(&[
        ("debug.job_delay", "\"30s\""),
        ("proving.workers", "1"),
        ("proving.backend", "\"cpu\""),
    ]);
    let mut c = daemon.client();
    let running = c.submit(bogus_porep("running")).unwrap().job_id;
    let queued = c.submit(bogus_porep("queued")).unwrap().job_id;
    eventually("the first job to run", Duration::from_secs(10), || {
        (job_state(&mut c, running) == JobState::Running).then_some(())
    });

    let (running_events, running_watch) = watch_in_thread(&daemon, running);
    let (queued_events, queued_watch) = watch_in_thread(&daemon, queued);
    let e = next(&running_events);
    assert_eq!((e.job_id, e.stage), (running, ProgressStage::Started));
    let e = next(&queued_events);
    assert_eq!((e.job_id, e.stage), (queued, ProgressStage::Queued));

    // A third watcher of the queued job hangs up: its connection is let go at once.
    let before = connections(&mut c);
    let mut gone = daemon.client();
    gone.stream()
        .write_all(&encode_frame(&Request::Watch(JobRef { job_id: queued })).unwrap())
        .unwrap();
    eventually(
        "the third watcher to connect",
        Duration::from_secs(10),
        || (connections(&mut c) == before + 1).then_some(()),
    );
    drop(gone);
    eventually(
        "the hung-up watcher's connection to close",
        Duration::from_secs(10),
        || (connections(&mut c) == before).then_some(()),
    );

    // Cancelling the running job ends its watch with Await's answer.
    assert!(c.cancel(running).unwrap().was_running);
    let watched = running_watch.join().unwrap().unwrap_err();
    let awaited = c.await_job(running, None).unwrap_err();
    assert_eq!(code(&watched), ErrorCode::Cancelled);
    assert_eq!(format!("{watched}"), format!("{awaited}"));
    // The queued job starts next: its watcher sees it.
    let e = next(&queued_events);
    assert_eq!((e.job_id, e.stage), (queued, ProgressStage::Started));
    assert!(c.cancel(queued).unwrap().was_running);
    assert_eq!(
        code(&queued_watch.join().unwrap().unwrap_err()),
        ErrorCode::Cancelled
    );

    // A finished job: no event, its answer at once. A job that fails: its error.
    let mut events = 0;
    let e = c.watch(queued, |_| events += 1).unwrap_err();
    assert_eq!((code(&e), events), (ErrorCode::Cancelled, 0));
    let unknown = c.watch(999_999, |_| events += 1).unwrap_err();
    assert_eq!(code(&unknown), ErrorCode::UnknownJob);
    assert_eq!(events, 0);
    // The connection takes requests again after a watch.
    assert_eq!(c.ping(5).unwrap().nonce, 5);
    // Its log went to a file, not a terminal: no colour codes in it.
    let log = daemon.env.stderr();
    assert!(log.contains("job accepted"), "{log}");
    assert!(!log.contains('\u{1b}'), "escape codes in the log:\n{log}");
    stop(daemon);
}

/// Watch needs a session, like every request but Ping.
#[test]
fn a_watch_before_hello_is_refused() {
    let daemon = Daemon::start(&[]);
    let mut s = std::os::unix::net::UnixStream::connect(&daemon.env.socket).unwrap();
    s.write_all(&encode_frame(&Request::Watch(JobRef { job_id: 1 })).unwrap())
        .unwrap();
    let answer = cuzk::proto::read_response(&mut s, 1 << 20).unwrap();
    match answer {
        cuzk::proto::Response::Error(e) => assert_eq!(e.code, ErrorCode::HelloRequired),
        other => panic!("{other:?}"),
    }
    stop(daemon);
}
