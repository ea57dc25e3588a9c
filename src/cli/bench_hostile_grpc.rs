//! `cuzk bench hostile --grpc`: a real `cuzkd` with its gRPC endpoint on, attacked on the
//! gRPC socket by local clients speaking HTTP/2 byte by byte (`proto::h2raw`) while an
//! honest client is timed on both sockets. The goals (issue 43): zero crashes, the daemon's
//! RSS growth at most 1 GiB, a refused peer's connection closed within 1 s, the honest
//! client always served with its latency at most 1.1× its latency before the attack,
//! measured in the same run.
//!
//! The attackers run under a uid the allow list admits and the refused peers under one it
//! does not, the honest client as root: so the benchmark runs as root. Each attacker opens
//! connection after connection of one kind: 1,000 streams whose length prefix claims
//! 256 MiB; a slow writer of a 64 MiB message; 200 streams each with 32 KiB of real bytes,
//! never ended; the preface and nothing else; garbage after the preface. After the attack,
//! a third uid fills its share of connections and the connections it opens past it are
//! timed until they are closed.

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};

use super::bench_daemon::{connect, Daemon};
use super::bench_hostile_args::{met, ratio, row, HostileBenchArgs};
use crate::proto::h2raw::{
    claiming_streams, frame, frames, get_status, header_block, hello, message_prefix,
    read_until_closed, unended_messages, DATA, END_HEADERS, GET_STATUS, GOAWAY, HEADERS,
};

const CLIENT: &str = "cuzk-bench-hostile-grpc";
/// The attackers' uid (admitted by the allow list) and the refused peers' (not admitted).
const ATTACKER_UID: u32 = 65_534;
const REFUSED_UID: u32 = 65_532;
/// Threads of refused peers, each connecting again as soon as it is closed.
const REFUSED_PEERS: usize = 4;
/// The uid of the over-limit probe after the attack: it holds its whole per-uid share of
/// connections, then each connection more is refused at accept.
const PROBE_UID: u32 = 65_533;
/// Connections the probe opens past its share.
const OVER_LIMIT_PROBES: usize = 20;
/// Honest rounds (a Ping on the protocol's socket, a GetStatus on the gRPC one) before the
/// attack, for the reference latency.
const BASELINE_ROUNDS: usize = 50;
/// The goals of issue 43.
const GOAL_RSS_GROWTH: u64 = 1 << 30;
const GOAL_REFUSED_CLOSE: Duration = Duration::from_secs(1);
const GOAL_LATENCY_RATIO: f64 = 1.1;
/// How long an honest call may take before it counts as not served.
const HONEST_TIMEOUT: Duration = Duration::from_secs(30);

/// What the attackers and refused peers saw.
#[derive(Default)]
struct Tally {
    connections: AtomicU64,
    /// Hostile connects the socket refused (its backlog full).
    connect_failed: AtomicU64,
    refused: AtomicU64,
    refused_slowest_us: AtomicU64,
    /// Refused connections still open after [`GOAL_REFUSED_CLOSE`].
    refused_late: AtomicU64,
}

/// The honest client's latencies on (protocol socket, gRPC socket).
type Round = (Duration, Duration);

/// Runs `f` on a thread whose credentials are `uid`'s: the raw setresuid system call acts on
/// the calling thread alone (libc's wrapper would change every thread of the process).
fn spawn_as<T: Send + 'static>(
    uid: u32,
    name: String,
    f: impl FnOnce() -> T + Send + 'static,
) -> anyhow::Result<std::thread::JoinHandle<Option<T>>> {
    Ok(std::thread::Builder::new().name(name).spawn(move || {
        // SAFETY: a system call with integer arguments only; it changes the credentials of
        // this thread (the kernel's setresuid acts on the calling task), keeping the saved
        // uid; its result is checked.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_setresuid,
                libc::c_long::from(uid),
                libc::c_long::from(uid),
                0 as libc::c_long,
            )
        };
        (rc == 0).then(f)
    })?)
}

/// One hostile connection of `kind` on `grpc`.
fn hostile_connection(grpc: &Path, kind: usize, n: u64, tally: &Tally) {
    let Ok(mut s) = UnixStream::connect(grpc) else {
        tally.connect_failed.fetch_add(1, Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(50));
        return;
    };
    tally.connections.fetch_add(1, Ordering::Relaxed);
    let _ = s.set_write_timeout(Some(Duration::from_secs(10)));
    let mut bytes = hello();
    match kind {
        0 => bytes.extend(claiming_streams(GET_STATUS, 1000, 256 << 20)),
        1 => {
            bytes.extend(frame(HEADERS, END_HEADERS, 1, &header_block(GET_STATUS)));
            bytes.extend(frame(DATA, 0, 1, &message_prefix(64 << 20)));
            let _ = s.write_all(&bytes);
            for _ in 0..10 {
                if s.write_all(&frame(DATA, 0, 1, &[0u8; 4096])).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            return;
        }
        2 => bytes.extend(unended_messages(GET_STATUS, 200, 32 << 10)),
        3 => {
            let _ = s.write_all(&bytes);
            let _ = read_until_closed(&mut s, Duration::from_secs(5));
            return;
        }
        _ => bytes
            .extend((0..4096u64).map(|j| (j.wrapping_mul(2_654_435_761) >> 13) as u8 ^ n as u8)),
    }
    let _ = s.write_all(&bytes);
    let _ = read_until_closed(&mut s, Duration::from_secs(1));
}

/// A refused peer: connects and says hello until `stop`, timing how soon it is closed.
fn refused_peer(grpc: &Path, stop: &AtomicBool, tally: &Tally) {
    while !stop.load(Ordering::Relaxed) {
        let Ok(mut s) = UnixStream::connect(grpc) else {
            std::thread::sleep(Duration::from_millis(5));
            continue;
        };
        let _ = s.write_all(&hello());
        tally.refused.fetch_add(1, Ordering::Relaxed);
        let (_, closed) = read_until_closed(&mut s, GOAL_REFUSED_CLOSE * 5);
        let took = closed.unwrap_or(GOAL_REFUSED_CLOSE * 5);
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        tally.refused_slowest_us.fetch_max(us, Ordering::Relaxed);
        if took > GOAL_REFUSED_CLOSE {
            tally.refused_late.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// One honest round: a new connection, Hello and Ping on the protocol's socket, then a new
/// connection and GetStatus on the gRPC one.
fn honest_round(socket: &Path, grpc: &Path) -> Result<Round, String> {
    let start = Instant::now();
    let mut client = connect(socket, CLIENT).map_err(|e| format!("connect: {e:#}"))?;
    client.ping(7).map_err(|e| format!("Ping: {e}"))?;
    let protocol = start.elapsed();
    let start = Instant::now();
    get_status(grpc, HONEST_TIMEOUT).map_err(|e| format!("GetStatus: {e}"))?;
    Ok((protocol, start.elapsed()))
}

/// The daemon's configuration: the gRPC endpoint on, both sockets open to every uid but
/// admitting only root and the attackers' uid, room for every attacker.
fn daemon_set(args: &HostileBenchArgs, grpc: &Path) -> Vec<String> {
    let mut set = vec![
        "grpc.enabled=true".to_string(),
        format!("grpc.path={:?}", grpc.display().to_string()),
        "grpc.mode=\"0666\"".into(),
        "socket.mode=\"0666\"".into(),
        format!("socket.allowed_uids=[0, {ATTACKER_UID}, {PROBE_UID}]"),
        format!(
            "socket.max_connections={}",
            args.clients + REFUSED_PEERS + 32
        ),
        format!("socket.max_connections_per_uid={}", per_uid(args)),
    ];
    // The caller's keys last: they win.
    set.extend(args.daemon.set.iter().cloned());
    set
}

/// Each uid's share of connections: room for every attacker, and for the probe's uid to
/// reach its limit while root keeps slots.
fn per_uid(args: &HostileBenchArgs) -> usize {
    args.clients + 8
}

/// After the attack: `share` idle connections of [`PROBE_UID`] fill its share, then each of
/// [`OVER_LIMIT_PROBES`] more is timed until the daemon closes it; `(refused with a GOAWAY
/// saying "too many connections", slowest close, still open after 1 s)`. The held
/// connections are closed at the end (before the daemon's hello timeout would).
fn over_limit(grpc: &Path, share: usize) -> (usize, Duration, usize) {
    let mut held = Vec::with_capacity(share);
    for _ in 0..share {
        if let Ok(mut s) = UnixStream::connect(grpc) {
            let _ = s.write_all(&hello());
            held.push(s);
        }
    }
    // The daemon admits the held ones as it accepts them.
    std::thread::sleep(Duration::from_millis(300));
    let (mut refused, mut slowest, mut late) = (0, Duration::ZERO, 0);
    for _ in 0..OVER_LIMIT_PROBES {
        let Ok(mut s) = UnixStream::connect(grpc) else {
            continue;
        };
        let _ = s.write_all(&hello());
        let (got, closed) = read_until_closed(&mut s, GOAL_REFUSED_CLOSE * 5);
        let goaway = frames(&got).iter().any(|f| {
            f.0 == GOAWAY && String::from_utf8_lossy(&f.3).contains("too many connections")
        });
        refused += usize::from(goaway);
        let took = closed.unwrap_or(GOAL_REFUSED_CLOSE * 5);
        slowest = slowest.max(took);
        late += usize::from(took > GOAL_REFUSED_CLOSE);
    }
    drop(held);
    (refused, slowest, late)
}

/// What the run measured.
struct Outcome {
    baseline: Vec<Round>,
    attacked: Vec<Round>,
    /// The first few failures' reasons.
    failures: Vec<String>,
    failed: usize,
    rss_before: u64,
    rss_after: u64,
    peak: u64,
    exit: Option<std::process::ExitStatus>,
    panics: usize,
    /// [`over_limit`]'s figures.
    over_limit: (usize, Duration, usize),
    attack: Duration,
}

/// Runs the gRPC benchmark with the parameter directory `params` (no proof is made: the
/// honest client's calls need none).
pub fn run(args: &HostileBenchArgs, params: &Path) -> anyhow::Result<()> {
    if args.clients == 0 || args.seconds == 0 {
        bail!("--clients and --seconds must be at least 1");
    }
    if !nix::unistd::geteuid().is_root() {
        bail!(
            "--grpc runs its attackers and refused peers under uids of their own: run it as root"
        );
    }
    let exe = args.daemon.exe()?;
    let grpc = Daemon::dir_for(CLIENT).join("grpc.sock");
    let mut daemon = Daemon::start(&exe, params, &daemon_set(args, &grpc), CLIENT)?;
    let start = Instant::now();
    while !grpc.exists() {
        daemon.check_running()?;
        if start.elapsed() > Duration::from_secs(60) {
            bail!("no gRPC socket at {} within 60 s", grpc.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let tally = Arc::new(Tally::default());
    let outcome = attack(args, &mut daemon, &grpc, &tally)?;
    report(args, &outcome, &tally);
    if outcome.exit.is_some() || outcome.panics > 0 || outcome.failed > 0 {
        bail!(
            "cuzkd {}, {} panics logged, {} honest rounds failed",
            outcome
                .exit
                .map_or("alive".into(), |s| format!("exited ({s})")),
            outcome.panics,
            outcome.failed
        );
    }
    Ok(())
}

/// The baseline, the attack with the honest client's rounds, and the daemon's state after.
fn attack(
    args: &HostileBenchArgs,
    daemon: &mut Daemon,
    grpc: &Path,
    tally: &Arc<Tally>,
) -> anyhow::Result<Outcome> {
    let socket = daemon.socket().to_path_buf();
    let mut baseline = Vec::new();
    for _ in 0..BASELINE_ROUNDS {
        baseline.push(
            honest_round(&socket, grpc)
                .map_err(anyhow::Error::msg)
                .context("an honest round before the attack")?,
        );
    }
    let rss_before = daemon.rss().unwrap_or(0);
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    for i in 0..args.clients {
        let (stop, tally, grpc) = (stop.clone(), tally.clone(), grpc.to_path_buf());
        threads.push(spawn_as(ATTACKER_UID, format!("hostile-{i}"), move || {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                hostile_connection(&grpc, i % 5, n, &tally);
            }
        })?);
    }
    for i in 0..REFUSED_PEERS {
        let (stop, tally, grpc) = (stop.clone(), tally.clone(), grpc.to_path_buf());
        threads.push(spawn_as(REFUSED_UID, format!("refused-{i}"), move || {
            refused_peer(&grpc, &stop, &tally)
        })?);
    }
    let started = Instant::now();
    let (mut attacked, mut failures, mut failed) = (Vec::new(), Vec::new(), 0);
    while started.elapsed() < Duration::from_secs(args.seconds) {
        match honest_round(&socket, grpc) {
            Ok(r) => attacked.push(r),
            Err(e) => {
                failed += 1;
                if failures.len() < 5 {
                    failures.push(e);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    stop.store(true, Ordering::Relaxed);
    let attack = started.elapsed();
    let mut unprivileged = 0;
    for t in threads {
        unprivileged += usize::from(matches!(t.join(), Ok(None)));
    }
    let (grpc_path, share) = (grpc.to_path_buf(), per_uid(args));
    let over_limit = spawn_as(PROBE_UID, "over-limit".into(), move || {
        over_limit(&grpc_path, share)
    })?
    .join()
    .ok()
    .flatten();
    unprivileged += usize::from(over_limit.is_none());
    if unprivileged > 0 {
        bail!("{unprivileged} attacker threads could not take their uid");
    }
    Ok(Outcome {
        baseline,
        attacked,
        failures,
        failed,
        rss_before,
        rss_after: daemon.rss().unwrap_or(0),
        peak: daemon.peak_rss().unwrap_or(0),
        exit: daemon.exit_status(),
        panics: daemon.log_count("panicked"),
        over_limit: over_limit.unwrap_or_default(),
        attack,
    })
}

fn median(v: &[Round], f: fn(&Round) -> Duration) -> Option<Duration> {
    let mut v: Vec<Duration> = v.iter().map(f).collect();
    v.sort();
    v.get(v.len() / 2).copied()
}

fn mib(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / f64::from(1 << 20))
}

/// The table of figures, each beside its goal.
fn report(args: &HostileBenchArgs, o: &Outcome, t: &Tally) {
    println!(
        "cuzk bench hostile --grpc: {} hostile clients and {REFUSED_PEERS} refused peers for {:.1} s; honest rounds {} before, {} during the attack",
        args.clients,
        o.attack.as_secs_f64(),
        o.baseline.len(),
        o.attacked.len()
    );
    row("measure", "this run".into(), "goal", "status");
    row("---", "---".into(), "---", "---");
    row(
        "hostile gRPC connections opened (connects refused)",
        format!(
            "{} ({})",
            t.connections.load(Ordering::Relaxed),
            t.connect_failed.load(Ordering::Relaxed)
        ),
        "",
        "",
    );
    let crashed = o.exit.map_or("0 (alive)".into(), |s| format!("1 ({s})"));
    row(
        "daemon crashes, panics in its log",
        format!("{crashed}, {}", o.panics),
        "0, 0",
        met(o.exit.is_none() && o.panics == 0),
    );
    let growth = o.peak.saturating_sub(o.rss_before);
    row(
        "daemon RSS growth (before, after, peak)",
        format!(
            "{} ({}, {}, {})",
            mib(growth),
            mib(o.rss_before),
            mib(o.rss_after),
            mib(o.peak)
        ),
        "≤ 1 GiB",
        met(growth <= GOAL_RSS_GROWTH),
    );
    let slowest = Duration::from_micros(t.refused_slowest_us.load(Ordering::Relaxed));
    let late = t.refused_late.load(Ordering::Relaxed);
    row(
        "refused peers' connections: closed within (slowest), still open after 1 s",
        format!(
            "{} connections: {:.1} ms, {late}",
            t.refused.load(Ordering::Relaxed),
            slowest.as_secs_f64() * 1e3
        ),
        "≤ 1 s, 0",
        met(late == 0 && t.refused.load(Ordering::Relaxed) > 0),
    );
    let (refused, slowest, late) = o.over_limit;
    row(
        "over-limit connections (a uid past its share, after the attack): refused with GOAWAY, slowest close, still open after 1 s",
        format!(
            "{refused} of {OVER_LIMIT_PROBES}: {:.1} ms, {late}",
            slowest.as_secs_f64() * 1e3
        ),
        "≤ 1 s, 0",
        met(refused == OVER_LIMIT_PROBES && late == 0),
    );
    row(
        "honest rounds failed",
        format!("{} of {}", o.failed, o.failed + o.attacked.len()),
        "0",
        met(o.failed == 0 && !o.attacked.is_empty()),
    );
    for (name, f) in [
        (
            "protocol socket (Hello + Ping)",
            (|r: &Round| r.0) as fn(&Round) -> Duration,
        ),
        ("gRPC socket (GetStatus)", |r: &Round| r.1),
    ] {
        let (before, during) = (median(&o.baseline, f), median(&o.attacked, f));
        let ratio = ratio(during, before);
        row(
            &format!("honest latency, {name}: before / during the attack (median)"),
            format!(
                "{:.2} ms / {:.2} ms ({ratio:.2}×)",
                before.map_or(f64::NAN, |d| d.as_secs_f64() * 1e3),
                during.map_or(f64::NAN, |d| d.as_secs_f64() * 1e3)
            ),
            &format!("≤ {GOAL_LATENCY_RATIO}×"),
            met(ratio <= GOAL_LATENCY_RATIO),
        );
    }
    for f in &o.failures {
        eprintln!("honest round failed: {f}");
    }
}
