//! The job journal through the real cuzkd: real 2 KiB PoRep proofs queued, the daemon killed
//! with SIGKILL at several moments (jobs queued, one proving, some finished) and started
//! again on the same journal. Every job must come back under its id, owner and request id
//! and finish with a proof that filecoin-proofs' verifier accepts; finished results must be
//! served after a restart; no job id may be given out twice. Also: a journal directory named
//! in the configuration that cannot be used stops the start with status 78; the state
//! directory's default only costs a warning.
//!
//! Needs the 2 KiB PoRep test parameters in `$CUZK_TEST_PARAMS` (default
//! /var/tmp/filecoin-proof-parameters); they are generated if missing.

mod daemon_support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use cuzk::proto::{JobState, ProofInput, Submit};
use cuzk::sealing::SealedSector;
use daemon_support::*;
use nix::sys::signal::Signal;

fn porep(sector: &SealedSector, request_id: &str) -> Submit {
    Submit {
        request_id: Some(request_id.into()),
        priority: None,
        input: ProofInput::PoRep {
            c1: sector.c1_json.clone(),
            miner_id: sector.miner_id,
            sector_number: Some(sector.sector_number),
        },
    }
}

/// Kills the daemon (SIGKILL: no drain, no flush) and starts it again with `config`.
fn kill_and_restart(daemon: &mut Daemon, config: &ConfigBuilder) {
    daemon.signal(Signal::SIGKILL);
    let status = daemon.wait_exit(Duration::from_secs(30));
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9)
    );
    daemon.child = daemon.env.command(config).spawn().expect("spawn cuzkd");
    daemon.startup = daemon
        .env
        .wait_notify("READY=1", Duration::from_secs(60), &mut daemon.child);
}

#[test]
fn jobs_survive_kill_9_and_every_proof_verifies() {
    let t0 = Instant::now();
    let dir = params();
    let env = Env::new();
    let journal = env.dir.path().join("state/journal");
    let config = env
        .config()
        .set("proving.backend", "\"cpu\"")
        // One job at a time: a kill finds some jobs queued and one proving.
        .set("proving.workers", "1")
        .set("debug.check_input", "true")
        .set(
            "queue.journal_dir",
            &format!("{:?}", journal.display().to_string()),
        );
    let mut daemon = Daemon::start_with(env, config.clone());
    let sectors = [
        sealed(daemon.env.dir.path(), 1),
        sealed(daemon.env.dir.path(), 2),
    ];
    // request id → (job id, sector index)
    let mut jobs: BTreeMap<String, (u64, usize)> = BTreeMap::new();
    let mut ids_given = BTreeSet::new();
    let mut submit = |daemon: &Daemon, jobs: &mut BTreeMap<String, (u64, usize)>, n: usize| {
        let rid = format!("sector-job-{n}");
        let sector = n % sectors.len();
        let accepted = daemon
            .client()
            .submit(porep(&sectors[sector], &rid))
            .expect("submit");
        assert!(!accepted.existing);
        // Never an id given out before, by this run or an earlier one.
        assert!(
            ids_given.iter().all(|&id| id < accepted.job_id),
            "job id {} after {ids_given:?}",
            accepted.job_id
        );
        ids_given.insert(accepted.job_id);
        jobs.insert(rid, (accepted.job_id, sector));
    };
    for n in 0..3 {
        submit(&daemon, &mut jobs, n);
    }
    // Kill at different moments: right after the submissions (the first job just started),
    // while a proof runs, and once a job has finished (the others queued or proving). One
    // more job after each start.
    let moments = ["at once", "while proving", "after a result"];
    for (n, moment) in (3..).zip(moments) {
        let mut c = daemon.client();
        match moment {
            "at once" => std::thread::sleep(Duration::from_millis(100)),
            "while proving" => {
                eventually("a job to run", Duration::from_secs(60), || {
                    (c.status(None).ok()?.running > 0).then_some(())
                });
                std::thread::sleep(Duration::from_millis(1500));
            }
            _ => eventually("a job to succeed", Duration::from_secs(300), || {
                (c.status(None).ok()?.succeeded > 0).then_some(())
            }),
        }
        let before = c.status(None).expect("status");
        eprintln!(
            "killing {moment}: {} queued, {} running, {} succeeded",
            before.queued, before.running, before.succeeded
        );
        kill_and_restart(&mut daemon, &config);
        let mut c = daemon.client();
        // Every job is known again: same id, same request id, same owner (this uid sees
        // it: another uid's job would be unknown to it).
        for (rid, &(id, _)) in &jobs {
            let info = c.lookup(rid).expect("lookup by request id after a restart");
            assert_eq!(info.job_id, id, "{rid}");
            let state = job_state(&mut c, id);
            assert!(
                state != JobState::Failed && state != JobState::Cancelled,
                "job {id} ({rid}): {state:?}; {}",
                daemon.env.stderr()
            );
        }
        // The same request again is the same job, not a new one.
        let (rid, &(id, sector)) = jobs.iter().next().unwrap();
        let again = c.submit(porep(&sectors[sector], rid)).unwrap();
        assert_eq!((again.job_id, again.existing), (id, true));
        submit(&daemon, &mut jobs, n);
    }
    let log = daemon.env.stderr();
    assert!(log.contains("job journal opened"), "{log}");
    // Every job finishes with a proof the verifier accepts.
    let mut c = daemon.client();
    let mut proofs = BTreeMap::new();
    for (rid, &(id, sector)) in &jobs {
        let proof = match c.await_job(id, None).expect("await") {
            Ok(p) => p,
            Err(info) => panic!("job {id} ({rid}) pending: {info:?}"),
        };
        assert_eq!(proof.job_id, id);
        let t = &proof.timings;
        eprintln!(
            "job {id}: synthesis {} ms, proving {} ms, total {} ms",
            t.synthesis_us / 1000,
            t.proving_us / 1000,
            t.total_us / 1000
        );
        assert!(
            sectors[sector]
                .verify_porep(&proof.proof, &dir)
                .expect("verify_seal runs"),
            "filecoin-proofs accepts job {id}'s proof"
        );
        proofs.insert(id, proof.proof);
    }
    // Finished results survive a kill too: the same bytes, by job id and by request id.
    kill_and_restart(&mut daemon, &config);
    let mut c = daemon.client();
    for (rid, &(id, _)) in &jobs {
        let info = c.lookup(rid).unwrap();
        assert_eq!((info.job_id, info.state), (id, JobState::Succeeded));
        let proof = c
            .await_job(id, Some(Duration::ZERO))
            .unwrap()
            .expect("a finished result");
        assert_eq!(proof.proof, proofs[&id], "job {id}'s proof after a restart");
    }
    // Nothing of the inputs is left once every job has finished.
    let inputs: Vec<_> = std::fs::read_dir(journal.join("inputs"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(inputs.is_empty(), "{inputs:?}");
    // A clean stop still works with a journal.
    daemon.signal(Signal::SIGTERM);
    assert_eq!(daemon.wait_exit(Duration::from_secs(60)).code(), Some(0));
    eprintln!("{} jobs in {:?}", jobs.len(), t0.elapsed());
}

/// A corrupt record and a torn one in the journal cost those records only: the daemon
/// starts, says what it skipped (escaped, bounded), and keeps the rest. A journal directory
/// named in the configuration that cannot be used is a configuration error (78); the state
/// directory's default only costs a warning.
#[test]
fn damaged_or_unusable_journals_do_not_stop_the_daemon_unless_named() {
    let env = Env::new();
    let journal = env.dir.path().join("journal");
    let config = env.config().set("debug.job_delay", "\"1h\"").set(
        "queue.journal_dir",
        &format!("{:?}", journal.display().to_string()),
    );
    let mut daemon = Daemon::start_with(env, config.clone());
    let ids: Vec<u64> = (0..3)
        .map(|i| {
            daemon
                .client()
                .submit(bogus_porep(&format!("job-{i}")))
                .unwrap()
                .job_id
        })
        .collect();
    daemon.signal(Signal::SIGKILL);
    daemon.wait_exit(Duration::from_secs(30));
    // Garbage in the middle and a torn record at the end.
    let log = journal.join("journal.log");
    let mut bytes = std::fs::read(&log).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    bytes.extend_from_slice(b"CZKJ\x10\x00\x00\x00\n\x1b[31mtorn");
    std::fs::write(&log, &bytes).unwrap();
    daemon.child = daemon.env.command(&config).spawn().unwrap();
    daemon
        .env
        .wait_notify("READY=1", Duration::from_secs(60), &mut daemon.child);
    let stderr = daemon.env.stderr();
    assert!(stderr.contains("journal: a truncated record"), "{stderr}");
    assert!(
        !stderr.contains('\x1b'),
        "nothing of the log's bytes is echoed"
    );
    // At most the job whose record was hit is missing; the others are queued again.
    let mut c = daemon.client();
    let known = ids.iter().filter(|&&id| c.status(Some(id)).is_ok()).count();
    assert!(known >= 2, "{known} of 3 jobs known; {stderr}");
    let next = c.submit(bogus_porep("after")).unwrap().job_id;
    assert!(ids.iter().all(|&id| id < next));
    drop(daemon);

    // Named and unusable (a file where the directory should be): status 78.
    let env = Env::new();
    let file = env.dir.path().join("a-file");
    std::fs::write(&file, b"").unwrap();
    let config = env.config().set(
        "queue.journal_dir",
        &format!("{:?}", file.join("journal").display().to_string()),
    );
    let mut child = env.command(&config).spawn().unwrap();
    let status = wait_exit(&mut child, Duration::from_secs(60), &env);
    assert_eq!(status.code(), Some(78), "{}", env.stderr());
    assert!(
        env.stderr().contains("queue.journal_dir"),
        "{}",
        env.stderr()
    );

    // The default under STATE_DIRECTORY, unusable: a warning, and the daemon serves.
    let config = env.config();
    let mut cmd = env.command(&config);
    cmd.env("STATE_DIRECTORY", &file);
    let mut child = cmd.spawn().unwrap();
    env.wait_notify("READY=1", Duration::from_secs(60), &mut child);
    assert!(
        env.stderr().contains("job journal not usable"),
        "{}",
        env.stderr()
    );
    let _ = child.kill();
    let _ = child.wait();
    // And usable: --check-config names it.
    let state = env.dir.path().join("state");
    let out = std::process::Command::new(CUZKD)
        .args(["--check-config", "--config"])
        .arg(env.write_config(&env.config()))
        .env("STATE_DIRECTORY", &state)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!(
            "journal_dir = {:?}",
            state.join("journal").display().to_string()
        )),
        "{text}"
    );
}
