//! Device faults through the real cuzkd, on CPU devices with faults injected
//! (`debug.fault_*`): a partition a device fails is proved again elsewhere (another device,
//! or the CPU prover where none is left), the device is quarantined and Health, the metrics
//! and `cuzk status` say so; a device that returns a wrong result never gets a proof out:
//! the job is proved again without it and only a verified proof is returned; a quarantined
//! device whose faults stopped is probed after its back-off and released. Every proof
//! returned is checked with filecoin-proofs' own verifier: 0 invalid proofs.
//!
//! Needs the 2 KiB PoRep test parameters (see daemon_proof.rs); each proof takes about a
//! minute on two CPU cores.

mod daemon_support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use cuzk::proto::HealthState;
use cuzk::sealing::SealedSector;
use daemon_support::*;

const CUZK: &str = env!("CARGO_BIN_EXE_cuzk");

/// One sealed sector for every test of this file (sealing takes a while), with the
/// directory that holds it.
fn sector() -> &'static SealedSector {
    static SECTOR: OnceLock<(tempfile::TempDir, SealedSector)> = OnceLock::new();
    &SECTOR
        .get_or_init(|| {
            params();
            let dir = tempfile::tempdir().unwrap();
            let s = sealed(dir.path(), 1);
            (dir, s)
        })
        .1
}

/// Proves the sector through `daemon` and checks the proof with filecoin-proofs: a fault
/// must never get an invalid proof out. Returns the result (its `backend` names who proved).
fn prove_and_verify(daemon: &Daemon, what: &str) -> cuzk::proto::ProofResult {
    let sector = sector();
    let r = daemon
        .client()
        .prove(porep(sector))
        .unwrap_or_else(|e| panic!("{what}: the job failed: {e}"));
    assert_eq!(r.proof.len(), 192, "{what}");
    assert!(
        sector
            .verify_porep(&r.proof, &params())
            .expect("verify_seal runs"),
        "{what}: job {} returned a proof filecoin-proofs rejects",
        r.job_id
    );
    r
}

/// Every `STATUS=` line cuzkd sends to its NOTIFY_SOCKET, read as they come on a thread of
/// its own: the socket holds only a few unread datagrams (net.unix.max_dgram_qlen), and
/// cuzkd drops what does not fit, so a test that read them only at the end would miss some.
struct StatusLines {
    lines: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
}

impl StatusLines {
    fn collect(env: &Env) -> Self {
        let socket = env.notify.try_clone().expect("clone the notify socket");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (into, stopped) = (lines.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            // The socket's read timeout (50 ms) lets the loop see `stop`.
            while !stopped.load(Ordering::Relaxed) {
                if let Ok(n) = socket.recv(&mut buf) {
                    let msg = String::from_utf8_lossy(&buf[..n]).into_owned();
                    let status = msg.lines().filter_map(|l| l.strip_prefix("STATUS="));
                    into.lock().unwrap().extend(status.map(str::to_owned));
                }
            }
        });
        Self { lines, stop }
    }

    fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    /// Waits for a STATUS= line that `pred` accepts, and returns it.
    fn wait_for(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        eventually(what, Duration::from_secs(10), || {
            self.lines().into_iter().find(|l| pred(l))
        })
    }
}

impl Drop for StatusLines {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The value of the metric line `series` (name and labels).
fn metric(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {series} in\n{text}"))
}

/// Two CPU devices, the first of which runs out of memory on every proof: the partitions it
/// takes are proved again on the other device, it is quarantined at its first failure
/// (`proving.quarantine_after = 1`) and stays so (1h), and Health, the metrics, `cuzk
/// status` and the log say so.
#[test]
fn a_failing_device_is_retried_elsewhere_and_quarantined() {
    let daemon = Daemon::start(&[
        ("proving.backend", "\"cpu\""),
        ("proving.cpu_device", "2"),
        ("proving.quarantine_after", "1"),
        ("proving.quarantine_time", "\"1h\""),
        ("debug.fault_device", "0"),
        ("debug.fault_kind", "\"oom\""),
        ("debug.fault_stage", "\"h\""),
        ("debug.fault_every", "1"),
        ("debug.check_input", "true"),
    ]);
    let status = StatusLines::collect(&daemon.env);
    let health = daemon.client().health().expect("Health");
    assert_eq!(health.devices.len(), 2);
    assert!(health
        .devices
        .iter()
        .all(|d| d.state == HealthState::Healthy && d.failures == 0));
    // One job at a time: device 0 goes first when both are idle and it has gone longer
    // without work, so it takes the first or the second job's partition.
    let mut failed_in = None;
    for i in 0..2 {
        prove_and_verify(&daemon, &format!("job {i}"));
        if daemon.client().health().expect("Health").devices[0].failures > 0 {
            failed_in = Some(i);
            break;
        }
    }
    let health = daemon.client().health().expect("Health");
    let (bad, good) = (&health.devices[0], &health.devices[1]);
    assert_eq!(bad.state, HealthState::Quarantined, "{health:?}");
    assert_eq!((bad.failures, bad.consecutive_failures), (1, 1), "{bad:?}");
    assert!(bad.probe_in_ms > 3_000_000, "an hour's back-off: {bad:?}");
    let error = bad.last_error.as_deref().unwrap_or_default();
    assert!(error.contains("injected fault"), "{error}");
    assert_eq!(good.state, HealthState::Healthy, "{good:?}");
    assert_eq!(good.failures, 0, "{good:?}");
    // A quarantined device takes nothing: the next job goes to device 1 at once.
    prove_and_verify(&daemon, "after the quarantine");
    let health = daemon.client().health().expect("Health");
    assert_eq!(health.devices[0].failures, 1, "{health:?}");
    assert_eq!(health.devices[0].state, HealthState::Quarantined);

    let text = daemon.client().metrics().expect("metrics");
    assert_eq!(metric(&text, "cuzk_device_quarantined{device=\"0\"}"), 1.0);
    assert_eq!(metric(&text, "cuzk_device_quarantined{device=\"1\"}"), 0.0);
    assert_eq!(
        metric(&text, "cuzk_device_failures_total{device=\"0\"}"),
        1.0
    );
    assert_eq!(
        metric(&text, "cuzk_device_failures_total{device=\"1\"}"),
        0.0
    );
    assert_eq!(metric(&text, "cuzk_partitions_fallback_total"), 0.0);

    // systemd's status line says so too: first while the job whose partition the device
    // failed was still running (the quarantine itself refreshes the line, not only a job's
    // end: the line counts that job running, not done), and on every line since.
    let failed_in = failed_in.expect("device 0 failed a partition of the first two jobs");
    let lines = status.lines();
    let first = lines
        .iter()
        .position(|l| l.contains("quarantined"))
        .unwrap_or_else(|| panic!("no STATUS= line mentions the quarantine: {lines:?}"));
    assert_eq!(
        lines[first],
        format!(
            "queued 0, running 1, done {failed_in}, failed 0, cancelled 0, 1 device quarantined"
        ),
        "the quarantine is announced mid-job: {lines:?}"
    );
    assert!(
        lines[first..]
            .iter()
            .all(|l| l.ends_with(", 1 device quarantined")),
        "{lines:?}"
    );
    status.wait_for("the last job's end with the quarantine", |l| {
        l.starts_with("queued 0, running 0, done ") && l.ends_with(", 1 device quarantined")
    });

    let out = std::process::Command::new(CUZK)
        .args(["status", "--socket"])
        .arg(&daemon.env.socket)
        .output()
        .expect("cuzk status");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    // A line for the quarantined device (its name is "cpu (2 threads)"), none for the other.
    assert!(
        stdout.lines().any(|l| l.starts_with("device 0 ")
            && l.contains("QUARANTINED")
            && l.contains("injected fault")),
        "cuzk status shows the quarantine:\n{stdout}"
    );
    assert!(
        !stdout
            .lines()
            .any(|l| l.starts_with("device 1 ") && l.contains("failed partitions")),
        "{stdout}"
    );
    let log = daemon.env.stderr();
    assert!(
        log.contains("device quarantined"),
        "a WARN line says so:\n{log}"
    );
}

/// One CPU device that returns a wrong H sum once (`debug.fault_limit = 1`): the job's proof
/// fails verification, so it is proved again without that device (on the CPU prover, since
/// no other device is left), and only that verified proof is returned; the device is
/// quarantined for the wrong result. After its back-off (1s) the next job's partition probes
/// it, the fault is spent, and the probe's success ends the quarantine.
#[test]
fn a_wrong_result_is_never_returned_and_the_device_is_probed_again() {
    let daemon = Daemon::start(&[
        ("proving.backend", "\"cpu\""),
        ("proving.cpu_device", "1"),
        ("proving.quarantine_after", "1"),
        ("proving.quarantine_time", "\"1s\""),
        ("debug.fault_kind", "\"wrong\""),
        ("debug.fault_stage", "\"any\""),
        ("debug.fault_every", "1"),
        ("debug.fault_limit", "1"),
        ("debug.check_input", "true"),
    ]);
    let status = StatusLines::collect(&daemon.env);
    let r = prove_and_verify(&daemon, "the job with a wrong result");
    // The result names who made the proof returned: the CPU fallback, not the device.
    assert!(
        r.backend.starts_with("fallback cpu (") && !r.backend.contains('×'),
        "{}",
        r.backend
    );
    let health = daemon.client().health().expect("Health");
    let d = &health.devices[0];
    assert_eq!(d.state, HealthState::Quarantined, "{health:?}");
    assert_eq!(d.failures, 1, "{d:?}");
    let error = d.last_error.as_deref().unwrap_or_default();
    assert!(error.contains("wrong result"), "{error}");
    let text = daemon.client().metrics().expect("metrics");
    assert_eq!(metric(&text, "cuzk_partitions_fallback_total"), 1.0);
    assert_eq!(metric(&text, "cuzk_device_quarantined{device=\"0\"}"), 1.0);

    // The back-off ends; the next partition probes the device, which is healthy now.
    std::thread::sleep(Duration::from_millis(1500));
    let r = prove_and_verify(&daemon, "the probe");
    assert!(!r.backend.contains("fallback"), "{}", r.backend);
    let health = daemon.client().health().expect("Health");
    let d = &health.devices[0];
    assert_eq!(d.state, HealthState::Healthy, "{health:?}");
    assert_eq!((d.failures, d.consecutive_failures), (1, 0), "{d:?}");
    let text = daemon.client().metrics().expect("metrics");
    assert_eq!(
        metric(&text, "cuzk_partitions_fallback_total"),
        1.0,
        "the probe was proved on the device"
    );
    assert_eq!(metric(&text, "cuzk_device_quarantined{device=\"0\"}"), 0.0);
    let log = daemon.env.stderr();
    assert!(log.contains("device out of quarantine"), "{log}");
    // The status line said so while the job was proved again, and says nothing of it once
    // the probe released the device.
    status.wait_for("the quarantine on the status line", |l| {
        l.contains("running 1") && l.ends_with(", 1 device quarantined")
    });
    status.wait_for("the status line after the release", |l| {
        l.starts_with("queued 0, running 0, done 2,")
    });
    let last = status.lines().pop().unwrap_or_default();
    assert!(!last.contains("quarantined"), "{last}");
}

/// The fault keys are range-checked like every other key, and a fault device that does not
/// exist stops the start.
#[test]
fn fault_keys_are_checked() {
    for (key, bad) in [
        ("debug.fault_kind", "\"flaky\""),
        ("debug.fault_stage", "\"msm\""),
        ("debug.fault_every", "-1"),
        ("proving.quarantine_after", "0"),
        ("proving.quarantine_time", "\"0s\""),
    ] {
        let env = Env::new();
        let config = env.config().set(key, bad);
        let path = env.write_config(&config);
        let out = std::process::Command::new(CUZKD)
            .arg("--config")
            .arg(&path)
            .arg("--check-config")
            .output()
            .expect("cuzkd --check-config");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(78), "{key} = {bad}: {stderr}");
        assert!(stderr.contains(key), "{key} = {bad}: {stderr}");
    }
    let env = Env::new();
    let config = env
        .config()
        .set("proving.backend", "\"cpu\"")
        .set("debug.fault_device", "3")
        .set("debug.fault_every", "1");
    let mut child = env.command(&config).spawn().expect("spawn cuzkd");
    let status = wait_exit(&mut child, Duration::from_secs(60), &env);
    assert!(!status.success());
    let log = env.stderr();
    assert!(log.contains("debug.fault_device = 3"), "{log}");
}
