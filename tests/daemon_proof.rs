//! Real proofs through the real cuzkd: a freshly sealed 2 KiB sector's PoRep C2 proved over
//! the socket, for two clients at once, watched stage by stage (`Watch`), and through the
//! `cuzk` CLI across a SIGTERM drain;
//! every proof is checked with filecoin-proofs' own verifier.
//!
//! Needs the 2 KiB PoRep test parameters in `$CUZK_TEST_PARAMS` (default
//! /var/tmp/filecoin-proof-parameters); they are generated if missing (scripts/test.sh does it
//! beforehand). Each proof takes about a minute on two CPU cores.

mod daemon_support;

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cuzk::proto::{encode_frame, JobRef, JobState, ProgressStage, ProofKind, Request};
use daemon_support::*;
use nix::sys::signal::Signal;

const CUZK: &str = env!("CARGO_BIN_EXE_cuzk");

#[test]
fn two_clients_get_verified_2k_porep_proofs_at_once() {
    let dir = params();
    let trace_dir = tempfile::tempdir().unwrap();
    let trace = trace_dir.path().join("stages.json");
    let trace_value = format!("{:?}", trace.display().to_string());
    // Two CPU devices: the jobs' partitions are spread over them.
    let daemon = Daemon::start(&[
        ("proving.backend", "\"cpu\""),
        ("proving.cpu_device", "2"),
        ("debug.trace_file", &trace_value),
        // Real inputs pass the check made at Submit.
        ("debug.check_input", "true"),
    ]);
    let sector = sealed(daemon.env.dir.path(), 1);
    // Preload the parameters: both proofs then find them resident.
    let porep_2k = cuzk::proto::ParamSpec {
        kind: ProofKind::PoRep,
        sector_size: 2048,
    };
    let loaded = daemon.client().preload(porep_2k.clone()).expect("preload");
    assert_eq!(loaded.loaded, vec![porep_2k.clone()]);
    let clients: Vec<_> = (0..2)
        .map(|i| {
            let (socket, submit) = (daemon.env.socket.clone(), porep(&sector));
            std::thread::spawn(move || {
                let mut c = cuzk::proto::Client::connect(&socket, &format!("client-{i}")).unwrap();
                c.prove(submit).expect("a proof")
            })
        })
        .collect();
    let results: Vec<_> = clients.into_iter().map(|h| h.join().unwrap()).collect();
    assert_ne!(results[0].job_id, results[1].job_id, "two jobs");
    for r in &results {
        assert_eq!(r.kind, ProofKind::PoRep);
        assert_eq!(r.partitions, 1);
        assert_eq!(r.proof.len(), 192);
        assert!(
            sector
                .verify_porep(&r.proof, &dir)
                .expect("verify_seal runs"),
            "filecoin-proofs accepts job {}",
            r.job_id
        );
        let t = &r.timings;
        assert!(
            t.synthesis_us > 0 && t.proving_us > 0 && t.verification_us > 0,
            "{t:?}"
        );
        assert_eq!(t.param_load_us, 0, "parameters were preloaded: {t:?}");
        let stages =
            t.queue_wait_us + t.param_load_us + t.synthesis_us + t.proving_us + t.verification_us;
        assert!(t.total_us >= stages, "total covers the stages: {t:?}");
    }
    // Jobs in flight at once (the default): neither waited for the other to finish.
    let waited = results
        .iter()
        .map(|r| r.timings.queue_wait_us)
        .max()
        .unwrap();
    assert!(
        waited < 1_000_000,
        "the second job queued behind the first: {waited} us"
    );
    let mut c = daemon.client();
    let status = c.status(None).unwrap();
    assert_eq!(status.succeeded, 2);
    assert!(status
        .params_loaded
        .iter()
        .any(|p| p.kind == ProofKind::PoRep && p.sector_size == 2048));
    // Residency: the set in host memory, nothing on a device (the CPU backend).
    let residency = c.residency().unwrap();
    assert!(
        residency
            .params
            .iter()
            .any(|p| p.spec == porep_2k && p.host_bytes > 0 && p.device_bytes == 0),
        "{residency:?}"
    );
    assert!(c.evict(porep_2k).expect("evict").loaded.is_empty());
    assert!(c.residency().unwrap().params.is_empty());
    let metrics = c.metrics().unwrap();
    assert!(
        metrics.contains("cuzk_jobs_finished_total{kind=\"porep\",outcome=\"succeeded\"} 2"),
        "{metrics}"
    );
    // Both partitions went through the stages: the Pipeline request counts them, and the
    // trace has each one's four stages (and the device's row).
    let pipeline = c.pipeline().unwrap();
    assert_eq!(pipeline.partitions_proved, 2, "{pipeline:?}");
    assert_eq!((pipeline.waiting, pipeline.reserved_bytes), (0, 0));
    assert!(
        metrics.contains("cuzk_partitions_proved_total 2"),
        "{metrics}"
    );
    // Both devices proved one of them (partitions rotate over idle devices), and each
    // reports the set resident while it was.
    let devices = c.devices().unwrap();
    let proved: Vec<u64> = devices
        .devices
        .iter()
        .map(|d| d.partitions_proved)
        .collect();
    assert_eq!(proved, [1, 1], "{devices:?}");
    assert!(devices
        .devices
        .iter()
        .all(|d| d.name.starts_with("cpu") && d.busy_ms > 0));
    for i in 0..2 {
        assert!(
            metrics.contains(&format!("cuzk_device_partitions_total{{device=\"{i}\"}} 1")),
            "{metrics}"
        );
    }
    let text = std::fs::read_to_string(&trace).unwrap();
    let closed = format!("{}]", text.trim_end().trim_end_matches(','));
    let events: Vec<serde_json::Value> = serde_json::from_str(&closed).expect("a trace array");
    let named = |n: &str| events.iter().filter(|e| e["name"] == n).count();
    for stage in ["admission", "synthesis", "device_queue", "device"] {
        assert_eq!(named(stage), 2, "{stage} in {text}");
    }
    assert_eq!(events.len(), 10, "{text}");
    let mut daemon = daemon;
    daemon.signal(Signal::SIGTERM);
    assert!(daemon.wait_exit(Duration::from_secs(30)).success());
}

/// Evict of the parameter set a running proof uses is refused (`InUse`, naming the job) while
/// the job is queued and while it runs on the resident set, which stays; the proof still
/// comes back and verifies, and once the job has finished the same Evict goes through.
#[test]
fn evict_of_the_set_a_running_proof_uses_is_refused_and_the_proof_verifies() {
    let dir = params();
    let daemon = Daemon::start(&[
        ("proving.backend", "\"cpu\""),
        ("debug.check_input", "true"),
    ]);
    let sector = sealed(daemon.env.dir.path(), 3);
    let porep_2k = cuzk::proto::ParamSpec {
        kind: ProofKind::PoRep,
        sector_size: 2048,
    };
    let mut c = daemon.client();
    let job = c.submit(porep(&sector)).unwrap().job_id;
    let (mut refused, mut refused_resident) = (0, 0);
    loop {
        let state = job_state(&mut c, job);
        if !matches!(state, JobState::Queued | JobState::Running) {
            break;
        }
        let resident = c
            .residency()
            .unwrap()
            .params
            .iter()
            .any(|p| p.spec == porep_2k);
        match c.evict(porep_2k.clone()) {
            Err(e) => {
                assert_eq!(code(&e), cuzk::proto::ErrorCode::InUse, "{e}");
                let cuzk::proto::ClientError::Server(refusal) = &e else {
                    panic!("{e}");
                };
                assert_eq!(refusal.job_id, Some(job));
                refused += 1;
                refused_resident += usize::from(resident);
            }
            // Only once the job is done.
            Ok(report) => {
                let now = job_state(&mut c, job);
                assert_eq!(
                    now,
                    JobState::Succeeded,
                    "evicted under the job: {report:?}"
                );
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    println!("{refused} evictions refused, {refused_resident} of them with the set resident");
    assert!(
        refused_resident > 0,
        "refused while the job ran on the resident set"
    );
    let proof = match c.await_job(job, None).unwrap() {
        Ok(p) => p,
        Err(info) => panic!("pending: {info:?}"),
    };
    assert!(
        sector.verify_porep(&proof.proof, &dir).unwrap(),
        "filecoin-proofs accepts the proof"
    );
    assert!(c.evict(porep_2k.clone()).unwrap().loaded.is_empty());
    assert!(c.residency().unwrap().params.is_empty());
    let mut daemon = daemon;
    daemon.signal(Signal::SIGTERM);
    assert!(daemon.wait_exit(Duration::from_secs(30)).success());
}

/// `cuzk submit`, SIGTERM while the proof runs, `cuzk await` still gets it, cuzkd exits 0.
#[test]
fn the_cli_gets_a_real_proof_through_a_sigterm_drain() {
    let dir = params();
    let mut daemon = Daemon::start(&[
        ("proving.backend", "\"cpu\""),
        ("daemon.drain_grace", "\"10m\""),
        ("debug.check_input", "true"),
    ]);
    let sector = sealed(daemon.env.dir.path(), 2);
    let c1 = daemon.env.dir.path().join("c1.json");
    std::fs::write(&c1, &sector.c1_json).unwrap();
    let cli = |args: &[&str]| {
        Command::new(CUZK)
            .args(args)
            .env("CUZK_SOCKET", &daemon.env.socket)
            .stdin(Stdio::null())
            .output()
            .expect("run cuzk")
    };
    let out = cli(&[
        "submit",
        "--request-id",
        "demo-2",
        "porep",
        "--c1",
        c1.to_str().unwrap(),
        "--miner-id",
        "1000",
        "--sector-number",
        "2",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let job: u64 = String::from_utf8(out.stdout)
        .unwrap()
        .trim()
        .parse()
        .expect("submit prints the job id");
    let mut c = daemon.client();
    eventually("the proof to start", Duration::from_secs(60), || {
        (job_state(&mut c, job) == JobState::Running).then_some(())
    });
    let status = cli(&["status", "--json"]);
    assert!(status.status.success());
    let doc: serde_json::Value =
        serde_json::from_slice(&status.stdout).expect("status --json is JSON");
    assert_eq!(doc["running"], 1);
    // The CPU device: no device memory, no plans (a GPU's are in `memory` too).
    assert_eq!(
        doc["memory"],
        serde_json::json!([{ "name": doc["devices"]["devices"][0]["name"], "memory": null, "plans": [] }]),
        "{doc}"
    );

    let proof_file = daemon.env.dir.path().join("proof.bin");
    let waiter = {
        let (socket, proof_file) = (daemon.env.socket.clone(), proof_file.clone());
        std::thread::spawn(move || {
            Command::new(CUZK)
                .args([
                    "await",
                    &job.to_string(),
                    "--out",
                    proof_file.to_str().unwrap(),
                ])
                .env("CUZK_SOCKET", socket)
                .stdin(Stdio::null())
                .output()
                .expect("run cuzk await")
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    daemon.signal(Signal::SIGTERM);
    daemon
        .env
        .wait_notify("STOPPING=1", Duration::from_secs(10), &mut daemon.child);
    let out = waiter.join().unwrap();
    assert!(
        out.status.success(),
        "cuzk await: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("synthesis") && stderr.contains("total"),
        "prints the timing table: {stderr}"
    );
    let proof = std::fs::read(&proof_file).unwrap();
    assert!(
        sector.verify_porep(&proof, &dir).unwrap(),
        "filecoin-proofs accepts the drained job's proof"
    );
    assert_eq!(
        daemon.wait_exit(Duration::from_secs(60)).code(),
        Some(0),
        "{}",
        daemon.env.stderr()
    );
    let log = daemon.env.stderr();
    assert!(
        log.contains("job accepted") && log.contains("job finished"),
        "{log}"
    );
}

/// `cuzk demo`: parameters, in-process daemon, fresh sector, proof over the socket, checked
/// by filecoin-proofs, timing table.
#[test]
fn cuzk_demo_runs_the_whole_path() {
    let dir = params();
    let out = Command::new(CUZK)
        .args(["demo", "--json", "--cpu"])
        .env("CUZK_TEST_PARAMS", &dir)
        .stdin(Stdio::null())
        .output()
        .expect("run cuzk demo");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "cuzk demo failed: {stderr}");
    let doc: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("demo --json prints JSON");
    assert_eq!(doc["verified_by_filecoin_proofs"], true);
    assert_eq!(
        doc["proof"].as_str().map(str::len),
        Some(384),
        "one 192-byte partition proof"
    );
    assert!(doc["timings_us"]["proving_us"].as_u64().unwrap() > 0);
    assert!(stderr.contains("daemon listening on"), "{stderr}");
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
    let sector = sealed(daemon.env.dir.path(), 1);
    let mut c = daemon.client();
    let job = c.submit(porep(&sector)).unwrap().job_id;
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
    let mut daemon = daemon;
    daemon.signal(Signal::SIGTERM);
    assert!(daemon.wait_exit(Duration::from_secs(30)).success());
}

/// After a real proof, Capacity has a measured PoRep time and estimates when the next PoRep
/// starts: at once on an idle worker, and within the measured time behind a running one.
#[test]
fn capacity_estimates_from_a_measured_real_proof() {
    params();
    let daemon = Daemon::start(&[
        ("proving.backend", "\"cpu\""),
        ("proving.workers", "1"),
        ("debug.check_input", "true"),
    ]);
    let sector = sealed(daemon.env.dir.path(), 4);
    let mut c = daemon.client();
    let before = c.capacity(ProofKind::PoRep, None).unwrap();
    assert_eq!((before.measured_jobs, before.estimated_proof_ms), (0, None));
    // Two jobs on one worker: the second waits for the first.
    let first = c.submit(porep(&sector)).unwrap().job_id;
    let second = c.submit(porep(&sector)).unwrap().job_id;
    let proof = c.await_job(first, None).unwrap().expect("a proof");
    assert_eq!(proof.proof.len(), 192);
    let t = &proof.timings;
    let run_ms = (t.total_us - t.queue_wait_us - t.param_load_us) / 1000;
    eventually("the second job to run", Duration::from_secs(10), || {
        (job_state(&mut c, second) == JobState::Running).then_some(())
    });
    let r = c.capacity(ProofKind::PoRep, None).unwrap();
    assert_eq!(r.measured_jobs, 1, "{r:?}");
    let measured = r.estimated_proof_ms.expect("a measured PoRep");
    // The first job's time on its worker, less loading parameters (rounding aside).
    assert!(
        measured.abs_diff(run_ms) <= 2,
        "{measured} ms against {t:?}"
    );
    assert_eq!(r.running, vec![0, 1, 0, 0], "{r:?}");
    let start = r
        .estimated_start_ms
        .expect("an estimate behind a measured kind");
    assert!(start <= measured, "{start} ms > {measured} ms");
    // A WinningPoSt has the critical worker: at once, though none was measured.
    let w = c.capacity(ProofKind::WinningPoSt, None).unwrap();
    assert_eq!(
        (w.estimated_start_ms, w.estimated_proof_ms),
        (Some(0), None)
    );
    let proof = c.await_job(second, None).unwrap().expect("a proof");
    assert!(sector
        .verify_porep(&proof.proof, &params())
        .expect("verify_seal runs"));
    let idle = c.capacity(ProofKind::PoRep, None).unwrap();
    assert_eq!((idle.measured_jobs, idle.estimated_start_ms), (2, Some(0)));
    let mut daemon = daemon;
    daemon.signal(Signal::SIGTERM);
    assert!(daemon.wait_exit(Duration::from_secs(30)).success());
}
