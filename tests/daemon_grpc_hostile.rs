//! The gRPC endpoint against hostile local clients, on a real `cuzkd` (CPU backend) and real
//! Unix sockets, with HTTP/2 written byte by byte: refused peers closed at accept, one
//! connection limit over both sockets with hello and idle deadlines, a stream limit, length
//! prefixes that claim more than arrives, messages bounded by `protocol.input_memory`; and
//! a load of 100 hostile clients of several kinds while an honest client of another uid is
//! served on both sockets, the daemon under an address-space limit of 8 GiB.
//!
//! `CUZK_HOSTILE_SECS=N` runs the load for N seconds (default 20).

mod daemon_support;
mod grpc_support;

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cuzk::proto::{Client, ClientError, ErrorCode};
use daemon_support::{ConfigBuilder, Daemon, Env};
use grpc_support::*;

/// The uid the allow lists refuse, and the honest client's.
const REFUSED_UID: u32 = 65_532;
const HONEST_UID: u32 = 65_534;

fn grpc_path(env: &Env) -> PathBuf {
    env.dir.path().join("grpc.sock")
}

fn grpc_config(env: &Env) -> ConfigBuilder {
    let grpc = grpc_path(env).display().to_string();
    env.config()
        .set("grpc.enabled", "true")
        .set("grpc.path", &format!("{grpc:?}"))
        .set("proving.backend", "\"cpu\"")
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// A raw connection to the gRPC socket that has sent `bytes` (as far as the daemon took
/// them before closing it).
fn raw(path: &Path, bytes: &[u8]) -> UnixStream {
    let mut s = UnixStream::connect(path).expect("connect");
    let _ = s.write_all(bytes);
    s
}

#[test]
fn a_refused_peer_is_told_and_closed_at_accept() {
    let env = Env::new();
    // Only a uid that is not ours may connect.
    let config = grpc_config(&env).set("socket.allowed_uids", &format!("[{REFUSED_UID}]"));
    let daemon = Daemon::start_with(env, config);
    let path = grpc_path(&daemon.env);
    let mut slowest = Duration::ZERO;
    let mut held = Vec::new();
    for i in 0..200 {
        // Half say nothing at all, half the preface and a call.
        let bytes = if i % 2 == 0 {
            Vec::new()
        } else {
            let mut b = hello();
            b.extend(call(1, GET_STATUS, &message_prefix(0), true));
            b
        };
        let mut s = raw(&path, &bytes);
        let (got, closed) = read_until_closed(&mut s, Duration::from_secs(1));
        let closed = closed.unwrap_or_else(|| panic!("connection {i} still open after 1 s"));
        slowest = slowest.max(closed);
        let goaway = frames(&got)
            .into_iter()
            .find(|f| f.0 == GOAWAY)
            .expect("a GOAWAY");
        assert_eq!(&goaway.3[4..8], &[0, 0, 0, 7], "REFUSED_STREAM");
        assert!(String::from_utf8_lossy(&goaway.3[8..]).contains("not allowed"));
        // No HEADERS: the call was never served.
        assert!(!frames(&got).iter().any(|f| f.0 == HEADERS));
        held.push(s);
    }
    eprintln!("200 refused connections, each closed within {slowest:?}");
    // The daemon holds none of them.
    let fds = std::fs::read_dir(format!("/proc/{}/fd", daemon.child.id()))
        .map(|d| d.count())
        .unwrap_or(0);
    assert!(fds < 100, "{fds} descriptors open in cuzkd");
}

#[test]
fn grpc_and_protocol_connections_share_one_limit_and_idle_ones_are_closed() {
    let env = Env::new();
    let config = grpc_config(&env)
        .set("socket.max_connections_per_uid", "4")
        .set("protocol.hello_timeout", "\"1s\"")
        .set("protocol.idle_timeout", "\"2s\"");
    let daemon = Daemon::start_with(env, config);
    let path = grpc_path(&daemon.env);
    // Four gRPC connections that make no call take the uid's four slots ...
    let mut idle: Vec<UnixStream> = (0..4).map(|_| raw(&path, &hello())).collect();
    std::thread::sleep(Duration::from_millis(200));
    // ... so that the protocol's socket is busy for this uid ...
    match Client::connect(&daemon.env.socket, "limit-test") {
        Err(ClientError::Server(e)) => assert_eq!(e.code, ErrorCode::Busy),
        other => panic!("expected Busy, got {:?}", other.map(|_| ())),
    }
    // ... until the hello timeout closes them.
    for s in &mut idle {
        let (_, closed) = read_until_closed(s, Duration::from_secs(4));
        assert!(closed.is_some(), "an idle gRPC connection still open");
    }
    let mut client = Client::connect(&daemon.env.socket, "limit-test").expect("a slot again");
    client.ping(1).expect("served");
    drop(client);
    // A connection that made a call is closed once idle for protocol.idle_timeout.
    let rt = runtime();
    let closed = rt.block_on(async {
        let io = tokio::net::UnixStream::connect(&path).await.unwrap();
        let (send, conn) = h2::client::handshake(io).await.unwrap();
        let conn = tokio::spawn(conn);
        // `send` kept: the client closes its connection once every handle is gone.
        assert_eq!(unary_on(send.clone(), GET_STATUS, Vec::new()).await, Ok(0));
        let start = Instant::now();
        let ended = tokio::time::timeout(Duration::from_secs(6), conn).await;
        drop(send);
        (ended.is_ok(), start.elapsed())
    });
    assert!(closed.0, "not closed after the idle timeout");
    assert!(
        closed.1 >= Duration::from_millis(1500),
        "closed early: {closed:?}"
    );
}

#[test]
fn length_claims_reserve_nothing_and_streams_are_limited() {
    let env = Env::new();
    let config = grpc_config(&env);
    let daemon = Daemon::start_with(env, config);
    let path = grpc_path(&daemon.env);
    let pid = daemon.child.id();
    let before = memory(pid);
    // Ten connections of 1,000 streams, each claiming a 256 MiB message and sending none
    // of it.
    let mut conns = Vec::new();
    let mut server = Vec::new();
    for _ in 0..10 {
        let mut bytes = hello();
        bytes.extend(claiming_streams(GET_STATUS, 1000, 256 << 20));
        let mut s = raw(&path, &bytes);
        let (got, _) = read_until_closed(&mut s, Duration::from_millis(500));
        server.push(got);
        conns.push(s);
    }
    std::thread::sleep(Duration::from_millis(500));
    let after = memory(pid);
    let grown = |a: u64, b: u64| a.saturating_sub(b) >> 20;
    eprintln!(
        "10 x 1000 streams claiming 256 MiB: VmSize +{} MiB, VmRSS +{} MiB",
        grown(after.0, before.0),
        grown(after.1, before.1)
    );
    assert!(grown(after.0, before.0) < 1024, "{before:?} -> {after:?}");
    assert!(grown(after.1, before.1) < 256, "{before:?} -> {after:?}");
    // The server said how many streams it takes, and refused the rest.
    assert_eq!(setting(&server[0], MAX_CONCURRENT_STREAMS), Some(128));
    let refused = frames(&server[0])
        .iter()
        .filter(|f| f.0 == RST_STREAM && f.3 == [0, 0, 0, 7])
        .count();
    assert!(refused >= 800, "{refused} streams refused");
    // An honest call is served meanwhile.
    let rt = runtime();
    assert_eq!(rt.block_on(unary(&path, GET_STATUS, Vec::new())), Ok(0));
    assert!(daemon.child.id() == pid);
    drop(conns);
}

#[test]
fn a_message_that_does_not_fit_the_input_memory_is_refused_resource_exhausted() {
    let env = Env::new();
    let config = grpc_config(&env)
        .set("protocol.max_input_size", "\"4MiB\"")
        .set("protocol.input_memory", "\"4MiB\"");
    let daemon = Daemon::start_with(env, config);
    let path = grpc_path(&daemon.env);
    let rt = runtime();
    // 16 MiB of real bytes (under grpc.max_message_size): more than the memory allows.
    let status = rt.block_on(unary(&path, GET_STATUS, vec![0x0a; 16 << 20]));
    assert_eq!(status, Ok(8), "RESOURCE_EXHAUSTED");
    // A small call is served, and so is a message that fits.
    assert_eq!(rt.block_on(unary(&path, GET_STATUS, Vec::new())), Ok(0));
    let (_, rss, _) = memory(daemon.child.id());
    assert!(rss < 1 << 30, "RSS {rss}");
}

/// What the load's clients saw.
#[derive(Default)]
struct Tally {
    connections: AtomicU64,
    refused_slowest_ms: AtomicU64,
    refused_open: AtomicU64,
    honest_failures: Mutex<Vec<String>>,
}

/// Runs `f` on a thread whose credentials are `uid`'s (the thread's alone: the raw
/// setresuid system call, not libc's wrapper that changes every thread).
fn as_uid<T: Send + 'static>(
    uid: u32,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    std::thread::spawn(move || {
        // SAFETY: a plain system call with integer arguments; it changes this thread's
        // credentials only (the kernel's setresuid acts on the calling task), keeping the
        // saved uid so nothing else is affected. Its result is checked.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_setresuid,
                uid as libc::c_long,
                uid as libc::c_long,
                0 as libc::c_long,
            )
        };
        assert_eq!(
            rc,
            0,
            "setresuid({uid}): {}",
            std::io::Error::last_os_error()
        );
        f()
    })
}

/// One honest round: a Ping on the protocol's socket and a GetStatus on the gRPC one; their
/// latencies.
fn honest_round(
    socket: &Path,
    grpc: &Path,
    rt: &tokio::runtime::Runtime,
) -> Result<(Duration, Duration), String> {
    let start = Instant::now();
    let mut client = Client::connect(socket, "honest").map_err(|e| format!("connect: {e}"))?;
    client.ping(7).map_err(|e| format!("ping: {e}"))?;
    let protocol = start.elapsed();
    let start = Instant::now();
    match rt.block_on(unary(grpc, GET_STATUS, Vec::new())) {
        Ok(0) => {}
        other => return Err(format!("GetStatus: {other:?}")),
    }
    Ok((protocol, start.elapsed()))
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

#[test]
fn a_hundred_hostile_clients_do_not_crash_the_daemon_or_stop_an_honest_one() {
    let secs: u64 = std::env::var("CUZK_HOSTILE_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let env = Env::new();
    let config = grpc_config(&env)
        .set("socket.mode", "\"0666\"")
        .set("grpc.mode", "\"0666\"")
        .set("socket.allowed_uids", &format!("[0, {HONEST_UID}]"))
        .set("socket.max_connections", "128")
        .set("protocol.hello_timeout", "\"2s\"");
    let mut cmd = env.command(&config);
    // SAFETY: the closure runs in the child between fork and exec and only calls setrlimit,
    // which is async-signal-safe; it allocates nothing.
    unsafe {
        cmd.pre_exec(|| {
            let limit = 8u64 << 30;
            nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_AS, limit, limit)
                .map_err(std::io::Error::from)
        });
    }
    let mut child = cmd.spawn().expect("spawn cuzkd");
    env.wait_notify("READY=1", Duration::from_secs(60), &mut child);
    let pid = child.id();
    let socket = env.socket.clone();
    let grpc = grpc_path(&env);
    // The directory is a 0700 temporary one: let the other uids reach the sockets.
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(env.dir.path(), std::fs::Permissions::from_mode(0o711))
            .expect("chmod");
    }
    // The honest client's latency before the attack.
    let baseline = {
        let (s, g) = (socket.clone(), grpc.clone());
        as_uid(HONEST_UID, move || {
            let rt = runtime();
            (0..50)
                .map(|_| honest_round(&s, &g, &rt).expect("honest round before the attack"))
                .collect::<Vec<_>>()
        })
        .join()
        .expect("honest client")
    };
    let (_, rss_before, _) = memory(pid);
    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Tally::default());
    let mut threads = Vec::new();
    for i in 0..100usize {
        let (stop, tally, grpc) = (stop.clone(), tally.clone(), grpc.clone());
        let kind = i % 5;
        let work = move || {
            let mut n = 0u32;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                tally.connections.fetch_add(1, Ordering::Relaxed);
                let Ok(mut s) = UnixStream::connect(&grpc) else {
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                };
                match kind {
                    // 1,000 streams claiming 256 MiB each.
                    0 => {
                        let mut bytes = hello();
                        bytes.extend(claiming_streams(GET_STATUS, 1000, 256 << 20));
                        let _ = s.write_all(&bytes);
                        let _ = read_until_closed(&mut s, Duration::from_secs(1));
                    }
                    // A slow writer: a 64 MiB message, a few bytes at a time.
                    1 => {
                        let _ = s.write_all(&hello());
                        let _ =
                            s.write_all(&frame(HEADERS, END_HEADERS, 1, &header_block(GET_STATUS)));
                        let _ = s.write_all(&frame(DATA, 0, 1, &message_prefix(64 << 20)));
                        for _ in 0..10 {
                            if s.write_all(&frame(DATA, 0, 1, &[0u8; 4096])).is_err() {
                                break;
                            }
                            std::thread::sleep(Duration::from_millis(100));
                        }
                    }
                    // Real bytes: a 32 KiB message on each of 200 streams (within the
                    // initial windows), never ended.
                    2 => {
                        let mut bytes = hello();
                        bytes.extend(unended_messages(GET_STATUS, 200, 32 << 10));
                        let _ = s.write_all(&bytes);
                        let _ = read_until_closed(&mut s, Duration::from_secs(1));
                    }
                    // Idle: the preface, then nothing until the daemon closes it.
                    3 => {
                        let _ = s.write_all(&hello());
                        let _ = read_until_closed(&mut s, Duration::from_secs(5));
                    }
                    // Garbage after the preface.
                    _ => {
                        let mut bytes = hello();
                        bytes.extend(
                            (0..4096u32)
                                .map(|j| (j.wrapping_mul(2_654_435_761) >> 13) as u8 ^ n as u8),
                        );
                        let _ = s.write_all(&bytes);
                        let _ = read_until_closed(&mut s, Duration::from_secs(1));
                    }
                }
            }
        };
        threads.push(std::thread::spawn(work));
    }
    // Refused peers: another uid, not in the allow list.
    for _ in 0..4 {
        let (stop, tally, grpc) = (stop.clone(), tally.clone(), grpc.clone());
        threads.push(as_uid(REFUSED_UID, move || {
            while !stop.load(Ordering::Relaxed) {
                let Ok(mut s) = UnixStream::connect(&grpc) else {
                    continue;
                };
                let _ = s.write_all(&hello());
                match read_until_closed(&mut s, Duration::from_secs(1)) {
                    (_, Some(t)) => {
                        tally
                            .refused_slowest_ms
                            .fetch_max(t.as_millis() as u64, Ordering::Relaxed);
                    }
                    (_, None) => {
                        tally.refused_open.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }));
    }
    // The honest client meanwhile.
    let attacked = {
        let (s, g, stop, tally) = (socket.clone(), grpc.clone(), stop.clone(), tally.clone());
        as_uid(HONEST_UID, move || {
            let rt = runtime();
            let mut lat = Vec::new();
            let end = Instant::now() + Duration::from_secs(secs);
            while Instant::now() < end {
                match honest_round(&s, &g, &rt) {
                    Ok(l) => lat.push(l),
                    Err(e) => {
                        let mut f = tally.honest_failures.lock().unwrap();
                        if f.len() < 20 {
                            f.push(e);
                        }
                    }
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            stop.store(true, Ordering::Relaxed);
            lat
        })
    };
    let attacked = attacked.join().expect("honest client");
    for t in threads {
        t.join().expect("attacker");
    }
    let (_, rss_after, hwm) = memory(pid);
    let alive = child.try_wait().expect("try_wait").is_none();
    let failures = tally.honest_failures.lock().unwrap().clone();
    let med = |v: &[(Duration, Duration)], f: fn(&(Duration, Duration)) -> Duration| {
        median(v.iter().map(f).collect())
    };
    let (p0, g0) = (med(&baseline, |l| l.0), med(&baseline, |l| l.1));
    let (p1, g1) = (med(&attacked, |l| l.0), med(&attacked, |l| l.1));
    eprintln!(
        "{secs} s, {} hostile connections; refused peers closed within {} ms ({} left open); \
         RSS {} MiB before, {} MiB after, peak {} MiB; honest rounds {} ({} failed): \
         protocol socket median {p0:?} -> {p1:?}, gRPC {g0:?} -> {g1:?}",
        tally.connections.load(Ordering::Relaxed),
        tally.refused_slowest_ms.load(Ordering::Relaxed),
        tally.refused_open.load(Ordering::Relaxed),
        rss_before >> 20,
        rss_after >> 20,
        hwm >> 20,
        attacked.len(),
        failures.len(),
    );
    let stderr = env.stderr();
    let _ = child.kill();
    let _ = child.wait();
    assert!(alive, "cuzkd died; stderr:\n{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        failures.is_empty(),
        "the honest client failed: {failures:?}"
    );
    assert!(!attacked.is_empty());
    assert_eq!(
        tally.refused_open.load(Ordering::Relaxed),
        0,
        "a refused peer left open"
    );
    assert!(tally.refused_slowest_ms.load(Ordering::Relaxed) < 1000);
    assert!(
        hwm.saturating_sub(rss_before) < 1 << 30,
        "RSS grew by more than 1 GiB"
    );
}
