//! `Watch` through the real cuzkd over its real socket (docs/protocol.md, section 5,
//! **Watch**): a job's progress pushed stage by stage, partition by partition, then exactly
//! Await's answer; a client that never reads does not hold the job up; another uid's job is
//! unknown (in tests/daemon_trust.rs, which runs clients as other uids); hanging up frees
//! the watch.
//!
//! The real proof needs the 2 KiB PoRep test parameters in `$CUZK_TEST_PARAMS` (default
//! /var/tmp/filecoin-proof-parameters; generated if missing) and takes about a minute on two
//! CPU cores. The other tests use `debug.job_delay` and inputs that fail fast.

mod daemon_support;

use std::io::Write;
use std::path::PathBuf;
use std::sync::mpsc;
use std::sync::Once;
use std::time::{Duration, Instant};

use cuzk::proto::{
    encode_frame, Client, ErrorCode, JobRef, JobState, ProgressEvent, ProgressStage, ProofInput,
    Request, Submit,
};
use daemon_support::*;
use filecoin_proofs_api::RegisteredSealProof;
use nix::sys::signal::Signal;

fn stop(mut daemon: Daemon) {
    daemon.signal(Signal::SIGTERM);
    let status = daemon.wait_exit(Duration::from_secs(30));
    assert!(status.success(), "stderr:\n{}", daemon.env.stderr());
}

/// The 2 KiB PoRep parameters, generated once per test binary; filecoin-proofs' verifier
/// pointed at them.
fn params() -> PathBuf {
    static ONCE: Once = Once::new();
    let dir = test_params_dir();
    ONCE.call_once(|| {
        cuzk::params_gen::ensure_params(&dir, cuzk::proofs::ProofKind::PoRep, 2048, &mut |m| {
            eprintln!("{m}")
        })
        .expect("2 KiB PoRep test parameters");
        std::env::set_var("FIL_PROOFS_PARAMETER_CACHE", &dir);
    });
    dir
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

/// The number of open connections, from the metrics.
fn connections(c: &mut Client) -> u64 {
    let text = c.metrics().unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("cuzk_connections "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no cuzk_connections in\n{text}"))
}

/// A real 2 KiB PoRep watched from submission: the events come in order — queued or
/// started, the parameters, partition 1/1 through synthesis and the device, verifying —
/// and end with the same proof Await gives. A second watcher that never reads a byte
/// holds up neither the job nor the first watcher.
#[test]
fn a_watcher_follows_a_real_proof_stage_by_stage_and_ends_with_awaits_answer() {
    let dir = params();
    let daemon = Daemon::start(&[
        ("proving.backend", "\"cpu\""),
        ("debug.check_input", "true"),
        // The job waits this long before its first step: the watch below is registered
        // by then and sees every step (one that begins later starts from the latest).
        ("debug.job_delay", "\"2s\""),
    ]);
    let sector = cuzk::sealing::seal_sector(
        &daemon.env.dir.path().join("sector"),
        RegisteredSealProof::StackedDrg2KiBV1_1,
        1000,
        1,
    )
    .expect("sealing a 2 KiB sector");
    let mut c = daemon.client();
    let job = c
        .submit(Submit {
            request_id: None,
            priority: None,
            input: ProofInput::PoRep {
                c1: sector.c1_json.clone(),
                miner_id: sector.miner_id,
                sector_number: Some(sector.sector_number),
            },
        })
        .unwrap()
        .job_id;
    // A watcher that sends Watch and never reads.
    let mut deaf = daemon.client();
    deaf.stream()
        .write_all(&encode_frame(&Request::Watch(JobRef { job_id: job })).unwrap())
        .unwrap();
    let mut events = Vec::new();
    let t = Instant::now();
    let proof = c
        .watch(job, |e| {
            eprintln!("{:>8.3} s {e:?}", t.elapsed().as_secs_f64());
            events.push(e.clone());
        })
        .expect("the watched job's proof");
    assert_eq!(proof.job_id, job);
    assert!(
        sector
            .verify_porep(&proof.proof, &dir)
            .expect("verify_seal"),
        "filecoin-proofs accepts the watched proof"
    );
    // The same answer as Await's.
    let awaited = daemon.client().await_job(job, None).unwrap().unwrap();
    assert_eq!(awaited, proof);

    use ProgressStage::*;
    let stages: Vec<ProgressStage> = events.iter().map(|e| e.stage).collect();
    let first = stages.first().copied();
    assert!(
        matches!(first, Some(Queued) | Some(Started)),
        "first event: {stages:?}"
    );
    // One Started, whichever way the watch began.
    assert_eq!(
        stages.iter().filter(|s| **s == Started).count(),
        1,
        "{stages:?}"
    );
    let rest: Vec<ProgressStage> = stages
        .iter()
        .copied()
        .skip_while(|s| *s != Started)
        .skip(1)
        .filter(|s| *s != ParamsLoading)
        .collect();
    assert_eq!(
        rest,
        [
            ParamsReady,
            SynthesisStarted,
            SynthesisDone,
            DeviceStarted,
            DeviceDone,
            Verifying
        ],
        "{events:#?}"
    );
    for e in &events {
        assert_eq!(e.job_id, job);
        assert_eq!(e.dropped, 0, "a reading watcher misses nothing: {e:?}");
        let partition_stage = matches!(
            e.stage,
            SynthesisStarted | SynthesisDone | DeviceStarted | DeviceDone
        );
        assert_eq!(e.partition, partition_stage.then_some(0), "{e:?}");
        if !matches!(e.stage, Queued | Started | ParamsLoading) {
            assert_eq!(e.partitions_total, 1, "partition k of 1: {e:?}");
        }
    }
    let at = |stage| events.iter().find(|e| e.stage == stage).unwrap();
    assert_eq!(at(DeviceStarted).partitions_done, 0);
    assert_eq!(at(DeviceDone).partitions_done, 1, "partition 1/1 proved");
    assert_eq!(at(Verifying).partitions_done, 1);
    assert!(at(SynthesisDone).stage_ms > 0, "synthesis takes time");
    assert!(at(DeviceDone).stage_ms > 0, "proving takes time");
    // Ages grow.
    assert!(events.windows(2).all(|w| w[0].age_ms <= w[1].age_ms));
    assert!(at(Verifying).age_ms as u128 <= t.elapsed().as_millis() + 1000);

    // The deaf watcher's answer waits in its socket: the daemon is done with it, and its
    // connection closes (the gauge counts it) when the client goes.
    let before = connections(&mut c);
    drop(deaf);
    eventually(
        "the deaf watcher's connection to close",
        Duration::from_secs(10),
        || (connections(&mut c) < before).then_some(()),
    );
    stop(daemon);
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
