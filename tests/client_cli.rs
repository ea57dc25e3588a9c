//! The installed `cuzk` client against sockets where no daemon answers: it must stop with a
//! clear error naming the socket and where to look, never wait forever (a socket-activated
//! daemon that keeps failing to start leaves systemd holding the connection unanswered).

use std::os::unix::net::UnixListener;
use std::process::Command;
use std::time::{Duration, Instant};

fn cuzk() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cuzk"))
}

#[test]
fn status_gives_up_on_a_socket_nobody_answers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("held.sock");
    // Listening but never accepting: what systemd's socket unit looks like while the
    // service it would start keeps failing.
    let _held = UnixListener::bind(&path).unwrap();
    let start = Instant::now();
    let out = cuzk()
        .args(["status", "--answer-timeout", "1s", "--socket"])
        .arg(&path)
        .output()
        .unwrap();
    let took = start.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "must fail: {stderr}");
    assert!(
        took < Duration::from_secs(20),
        "gave up after {took:?}, not after its 1 s timeout"
    );
    assert!(took >= Duration::from_millis(900), "waited {took:?} only");
    assert!(stderr.contains("did not answer within 1 s"), "{stderr}");
    assert!(stderr.contains(&path.display().to_string()), "{stderr}");
    assert!(stderr.contains("journalctl -u cuzkd"), "{stderr}");
}

#[test]
fn status_explains_a_missing_socket() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("absent.sock");
    let out = cuzk()
        .args(["status", "--socket"])
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "must fail: {stderr}");
    assert!(stderr.contains("cannot connect to cuzkd at"), "{stderr}");
    assert!(stderr.contains(&path.display().to_string()), "{stderr}");
    assert!(
        stderr.contains("systemctl status cuzkd.socket cuzkd"),
        "{stderr}"
    );
}

#[test]
fn answer_timeout_comes_from_the_environment_too() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("held.sock");
    let _held = UnixListener::bind(&path).unwrap();
    let out = cuzk()
        .env("CUZK_ANSWER_TIMEOUT", "500ms")
        .args(["metrics", "--socket"])
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "must fail: {stderr}");
    assert!(stderr.contains("did not answer within 0.5 s"), "{stderr}");
}

#[test]
fn status_explains_a_connection_dropped_unanswered() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dropping.sock");
    let listener = UnixListener::bind(&path).unwrap();
    // What a socket-activated service that fails at once looks like once systemd gives up:
    // the waiting connection is closed without a word.
    let dropper = std::thread::spawn(move || {
        let (conn, _) = listener.accept().unwrap();
        drop(conn);
    });
    let out = cuzk()
        .args(["status", "--socket"])
        .arg(&path)
        .output()
        .unwrap();
    dropper.join().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "must fail: {stderr}");
    assert!(
        stderr.contains("closed the connection without answering"),
        "{stderr}"
    );
    assert!(stderr.contains("journalctl -u cuzkd"), "{stderr}");
}

#[test]
fn metrics_takes_prometheus_as_its_one_format() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("absent.sock");
    // Accepted (the daemon is what is missing here), and refused beside --json.
    let out = cuzk()
        .args(["metrics", "--prometheus", "--socket"])
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cannot connect to cuzkd at"), "{stderr}");
    let out = cuzk()
        .args(["metrics", "--prometheus", "--json", "--socket"])
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("cannot be used with"), "{stderr}");
}
