//! `cuzk bench hostile`: a real `cuzkd` under attack by many local clients sending fuzzed
//! frames, while an honest client proves real proofs through it. The goal (issue 16): at
//! least 10^7 fuzzed frames from 100 hostile clients with zero crashes, and every valid job
//! completed. The honest client's proof latency under attack is reported against the same
//! proof's latency measured before the attack, in the same run.
//!
//! Each hostile client opens connection after connection, each in one of a few modes: a
//! Hello and then a stream of frames made from small valid requests, most of them mutated
//! (bytes flipped, truncated, extended or replaced by noise); frames before any Hello; a
//! length prefix over the limit; a frame cut off by a hang-up; a connection that says
//! nothing until the daemon's Hello timeout closes it. A thread per connection drains the
//! answers. The requests fuzzed are read-only or refer to job ids no job has (no Cancel,
//! Preload or Evict: the attackers share the honest client's uid, and the trust model lets
//! a uid cancel its own jobs).
//!
//! `--grpc` attacks the gRPC socket instead (`bench_hostile_grpc.rs`); the flags and the report
//! table's helpers that both modes share are in `bench_hostile_args.rs`.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::bench_daemon::{Daemon, Inputs};
use super::bench_hostile_args::{met, ratio, row, HostileBenchArgs, GOAL_CLIENTS, GOAL_FRAMES};
use crate::proto::{
    decode_payload, encode_frame, encode_payload, AwaitJob, ClientError, Hello, JobRef, JobsQuery,
    LookupQuery, Ping, ProofInput, Request, StatusQuery, Submit, LENGTH_PREFIX, PROTOCOL_VERSION,
};

const CLIENT: &str = "cuzk-bench-hostile";
/// Frames a hostile connection writes before it reads on (its reader drains meanwhile).
const BATCH: usize = 64;
/// Job ids the fuzzed requests name: far above any id the honest client's jobs get.
const FAR_IDS: u64 = 1 << 40;

/// What the attackers did, counted by all of them.
#[derive(Default)]
struct Counters {
    frames: AtomicU64,
    connections: AtomicU64,
    /// Connections refused or reset before anything was written.
    refused: AtomicU64,
    answers: AtomicU64,
    answer_bytes: AtomicU64,
}

/// How a hostile connection behaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Hello, then fuzzed frames.
    Fuzz,
    /// Fuzzed frames without Hello.
    NoHello,
    /// Hello, then a length prefix over the limit.
    TooLarge,
    /// Hello, then part of a frame and a hang-up.
    Truncated,
    /// Nothing at all, until the daemon closes the connection.
    Silent,
}

fn pick_mode(rng: &mut impl Rng) -> Mode {
    match rng.gen_range(0..100) {
        0..=79 => Mode::Fuzz,
        80..=89 => Mode::NoHello,
        90..=94 => Mode::TooLarge,
        95..=98 => Mode::Truncated,
        _ => Mode::Silent,
    }
}

/// A small valid request of a random kind, naming only job ids no job has.
fn base_request(rng: &mut impl Rng) -> Request {
    let far = FAR_IDS + rng.gen_range(0..FAR_IDS);
    let noise = |rng: &mut dyn rand::RngCore, max: usize| {
        let mut v = vec![0u8; rng.next_u32() as usize % (max + 1)];
        rng.fill_bytes(&mut v);
        v
    };
    match rng.gen_range(0..10) {
        0 => Request::Hello(Hello {
            protocol_version: rng.gen_range(0..3),
            client_name: String::from_utf8_lossy(&noise(rng, 40)).into_owned(),
        }),
        1 => Request::Status(StatusQuery { job_id: Some(far) }),
        2 => Request::Await(AwaitJob {
            job_id: far,
            timeout_ms: Some(rng.gen_range(0..10)),
        }),
        3 => Request::Ping(Ping { nonce: rng.gen() }),
        4 => Request::Jobs(JobsQuery {
            after: Some(far),
            max: rng.gen_range(0..4),
        }),
        5 => Request::Lookup(LookupQuery {
            request_id: format!("hostile-{far}"),
        }),
        6 => Request::Info,
        7 => Request::Watch(JobRef { job_id: far }),
        _ => {
            let input = noise(rng, 300);
            Request::Submit(Submit {
                request_id: None,
                priority: None,
                input: match rng.gen_range(0..4) {
                    0 => ProofInput::PoRep {
                        c1: input,
                        miner_id: rng.gen(),
                        sector_number: Some(rng.gen()),
                    },
                    1 => ProofInput::SnapDeals { input },
                    2 => ProofInput::WindowPoSt { input },
                    _ => ProofInput::WinningPoSt { input },
                },
            })
        }
    }
}

/// One fuzzed payload: a valid request a quarter of the time, else a mutation of one, never
/// one that decodes into a request that changes jobs or parameters ([`touches_state`]).
fn fuzzed_payload(rng: &mut impl Rng) -> Vec<u8> {
    loop {
        let p = mutated_payload(rng);
        if !touches_state(&p) {
            return p;
        }
    }
}

/// Whether a payload is a Cancel, Preload or Evict: the attackers share the honest client's
/// uid (and run as root on a test host, an admin), so such a frame could cancel an honest job
/// or drop its parameters, which the trust model allows them.
fn touches_state(payload: &[u8]) -> bool {
    matches!(
        decode_payload::<Request>(payload),
        Ok(Request::Cancel(_)
            | Request::Preload(_)
            | Request::Evict(_)
            | Request::PreloadProof(_)
            | Request::EvictProof(_))
    )
}

fn mutated_payload(rng: &mut impl Rng) -> Vec<u8> {
    let mut p = encode_payload(&base_request(rng)).unwrap_or_default();
    match rng.gen_range(0..8) {
        0 | 1 => {}
        2 | 3 => {
            for _ in 0..rng.gen_range(1..=4) {
                if let Some(len) = std::num::NonZeroUsize::new(p.len()) {
                    let i = rng.gen_range(0..len.get());
                    p[i] ^= 1 << rng.gen_range(0..8);
                }
            }
        }
        4 => p.truncate(rng.gen_range(0..=p.len())),
        5 => {
            let extra = rng.gen_range(1..16);
            p.extend((0..extra).map(|_| rng.gen::<u8>()));
        }
        6 => {
            if let Some(first) = p.first_mut() {
                *first = rng.gen();
            }
        }
        _ => {
            let n = rng.gen_range(0..64);
            p = (0..n).map(|_| rng.gen()).collect();
        }
    }
    p
}

fn frame_of(payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(LENGTH_PREFIX + payload.len());
    f.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    f.extend_from_slice(payload);
    f
}

fn hello_frame() -> Vec<u8> {
    encode_frame(&Request::Hello(Hello {
        protocol_version: PROTOCOL_VERSION,
        client_name: CLIENT.into(),
    }))
    .unwrap_or_default()
}

/// Drains a connection's answers, counting frames, until it closes or stays silent for
/// `quiet`.
fn drain(mut s: UnixStream, counters: &Counters, quiet: Duration) {
    let _ = s.set_read_timeout(Some(quiet));
    let mut buf = vec![0u8; 64 << 10];
    let mut pending: Vec<u8> = Vec::new();
    while let Ok(n) = s.read(&mut buf) {
        if n == 0 {
            break;
        }
        counters.answer_bytes.fetch_add(n as u64, Ordering::Relaxed);
        pending.extend_from_slice(&buf[..n]);
        let mut at = 0;
        while let Some(prefix) = pending.get(at..at + LENGTH_PREFIX) {
            let mut len = [0u8; LENGTH_PREFIX];
            len.copy_from_slice(prefix);
            let end = at + LENGTH_PREFIX + u32::from_be_bytes(len) as usize;
            if end > pending.len() {
                break;
            }
            counters.answers.fetch_add(1, Ordering::Relaxed);
            at = end;
        }
        pending.drain(..at);
    }
}

/// Takes up to `want` frames from the shared budget; 0 when it is spent.
fn take(budget: &AtomicU64, total: u64, want: u64) -> u64 {
    let before = budget.fetch_add(want, Ordering::Relaxed);
    total.saturating_sub(before).min(want)
}

/// One hostile client: connections until the frame budget is spent.
fn attacker(socket: &Path, seed: u64, total: u64, budget: &AtomicU64, counters: &Counters) {
    let mut rng = StdRng::seed_from_u64(seed);
    while budget.load(Ordering::Relaxed) < total {
        let Ok(mut s) = UnixStream::connect(socket) else {
            counters.refused.fetch_add(1, Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(5));
            continue;
        };
        counters.connections.fetch_add(1, Ordering::Relaxed);
        let Ok(reader) = s.try_clone() else {
            continue;
        };
        let mode = pick_mode(&mut rng);
        std::thread::scope(|scope| {
            let quiet = if mode == Mode::Silent {
                Duration::from_secs(30)
            } else {
                Duration::from_secs(5)
            };
            scope.spawn(move || drain(reader, counters, quiet));
            let _ = s.set_write_timeout(Some(Duration::from_secs(10)));
            connection(&mut s, mode, &mut rng, total, budget, counters);
            let _ = s.shutdown(std::net::Shutdown::Write);
        });
    }
}

/// What one connection writes.
fn connection(
    s: &mut UnixStream,
    mode: Mode,
    rng: &mut StdRng,
    total: u64,
    budget: &AtomicU64,
    counters: &Counters,
) {
    if matches!(mode, Mode::Fuzz | Mode::TooLarge | Mode::Truncated)
        && s.write_all(&hello_frame()).is_err()
    {
        return;
    }
    match mode {
        Mode::Fuzz | Mode::NoHello => {
            let batches = if mode == Mode::Fuzz {
                rng.gen_range(1..200)
            } else {
                1
            };
            for _ in 0..batches {
                let n = take(budget, total, BATCH as u64);
                if n == 0 {
                    return;
                }
                let mut out = Vec::new();
                for _ in 0..n {
                    out.extend(frame_of(&fuzzed_payload(rng)));
                }
                counters.frames.fetch_add(n, Ordering::Relaxed);
                if s.write_all(&out).is_err() {
                    return;
                }
            }
        }
        Mode::TooLarge => {
            if take(budget, total, 1) == 1 {
                counters.frames.fetch_add(1, Ordering::Relaxed);
                let len: u32 = rng.gen_range(64 << 20..=u32::MAX);
                let _ = s.write_all(&len.to_be_bytes());
            }
        }
        Mode::Truncated => {
            if take(budget, total, 1) == 1 {
                counters.frames.fetch_add(1, Ordering::Relaxed);
                let frame = frame_of(&fuzzed_payload(rng));
                let cut = rng.gen_range(1..frame.len().max(2));
                let _ = s.write_all(&frame[..cut.min(frame.len())]);
            }
        }
        Mode::Silent => {}
    }
}

/// The honest client's proofs: each kind timed once idle (the reference), then during the
/// attack.
struct Honest {
    idle: Vec<Duration>,
    attacked: Vec<Duration>,
    failures: Vec<String>,
}

fn prove_one(
    daemon: &mut Daemon,
    inputs: &Inputs,
    winning: bool,
) -> anyhow::Result<Result<Duration, String>> {
    let mut client = daemon.client()?;
    let submit = if winning {
        inputs.winning()
    } else {
        inputs.porep()
    };
    let start = Instant::now();
    let job = match client.submit(submit) {
        Ok(a) => a.job_id,
        Err(ClientError::Server(e)) => return Ok(Err(format!("submit: {e}"))),
        Err(e) => return Err(e).context("submitting an honest proof"),
    };
    loop {
        match client.await_job(job, Some(Duration::from_secs(60))) {
            Ok(Ok(r)) if r.proof.is_empty() => return Ok(Err("an empty proof".into())),
            Ok(Ok(_)) => return Ok(Ok(start.elapsed())),
            Ok(Err(_pending)) => daemon.check_running()?,
            Err(ClientError::Server(e)) => return Ok(Err(e.to_string())),
            Err(e) => {
                daemon.check_running()?;
                return Err(e).with_context(|| format!("awaiting honest job {job}"));
            }
        }
    }
}

fn is_winning(i: usize, every: usize) -> bool {
    every > 0 && (i + 1).is_multiple_of(every)
}

impl Honest {
    /// No proof yet.
    fn new() -> Honest {
        Honest {
            idle: Vec::new(),
            attacked: Vec::new(),
            failures: Vec::new(),
        }
    }

    /// The reference, before the attack: each kind proved by the run (only WinningPoSt
    /// where `winning_every` is 1) once to warm up, then once timed.
    fn measure_idle(
        &mut self,
        daemon: &mut Daemon,
        inputs: &Inputs,
        winning_every: usize,
    ) -> anyhow::Result<()> {
        // The reference: each kind once to warm up (parameters, shapes), then once timed.
        for winning in [false, true] {
            if winning_every != 1 || winning {
                for round in 0..2 {
                    match prove_one(daemon, inputs, winning)? {
                        Ok(t) if round == 1 => self.idle.push(t),
                        Ok(_) => {}
                        Err(e) => bail!("an honest proof failed before the attack: {e}"),
                    }
                }
            }
        }
        Ok(())
    }
}

/// What the attack did, and what the daemon showed after it.
struct Attack {
    counters: Arc<Counters>,
    /// Honest proofs made, during the attack and after it until `--proofs` were.
    proofs: usize,
    /// From the first attacker's start to the last one's end.
    duration: Duration,
    /// A new client's Hello and Status after the attack.
    after: Duration,
    /// Panics in the daemon's log.
    panics: usize,
    /// The daemon's log's size.
    log_bytes: u64,
    /// The daemon's peak RSS.
    peak: Option<u64>,
}

/// Starts the daemon, with `socket.max_connections` raised to the clients plus 16 unless a
/// `--set` gives it.
fn start_daemon(args: &HostileBenchArgs, exe: &Path, params: &Path) -> anyhow::Result<Daemon> {
    let mut set = args.daemon.set.clone();
    if !set
        .iter()
        .any(|s| s.trim_start().starts_with("socket.max_connections="))
    {
        set.push(format!("socket.max_connections={}", args.clients + 16));
    }
    Daemon::start(exe, params, &set, CLIENT)
}

/// Spawns the attackers on `socket`, each on a thread of its own, sharing `counters` and
/// the frame budget.
fn spawn_attackers(
    args: &HostileBenchArgs,
    socket: &Path,
    counters: &Arc<Counters>,
) -> std::io::Result<Vec<std::thread::JoinHandle<()>>> {
    let budget = Arc::new(AtomicU64::new(0));
    (0..args.clients)
        .map(|i| {
            let (counters, budget) = (counters.clone(), budget.clone());
            let socket = socket.to_path_buf();
            let seed = args.seed.wrapping_mul(1_000_003).wrapping_add(i as u64);
            let total = args.frames;
            std::thread::Builder::new()
                .name(format!("hostile-{i}"))
                .spawn(move || attacker(&socket, seed, total, &budget, &counters))
        })
        .collect()
}

/// The attack, with the honest client proving through it until it ends and `--proofs`
/// were made; then a new client's Status, and the daemon's log and memory. Consumes the
/// daemon.
fn attack(
    args: &HostileBenchArgs,
    mut daemon: Daemon,
    inputs: &Inputs,
    honest: &mut Honest,
) -> anyhow::Result<Attack> {
    let counters = Arc::new(Counters::default());
    let socket = daemon.socket().to_path_buf();
    let start = Instant::now();
    let attackers = spawn_attackers(args, &socket, &counters)?;
    let mut i = 0;
    let mut attack_end = None;
    while i < args.proofs || attack_end.is_none() {
        match prove_one(&mut daemon, inputs, is_winning(i, args.winning_every))? {
            Ok(t) if attack_end.is_none() => honest.attacked.push(t),
            Ok(_) => {}
            Err(e) => honest.failures.push(format!("honest proof {i}: {e}")),
        }
        i += 1;
        if attack_end.is_none() && attackers.iter().all(|a| a.is_finished()) {
            attack_end = Some(start.elapsed());
        }
    }
    for a in attackers {
        let _ = a.join();
    }
    let duration = attack_end.unwrap_or_else(|| start.elapsed());
    daemon.check_running()?;
    // After the attack: a new client is served at once.
    let after = Instant::now();
    let mut c = daemon.client().context("connecting after the attack")?;
    c.status(None).context("Status after the attack")?;
    let after = after.elapsed();
    let panics = daemon.log_count("panicked");
    let log_bytes = daemon.log_bytes();
    let peak = daemon.peak_rss();
    drop(c);
    drop(daemon);
    Ok(Attack {
        counters,
        proofs: i,
        duration,
        after,
        panics,
        log_bytes,
        peak,
    })
}

/// Runs the benchmark with the parameter directory `params`.
pub fn run(args: HostileBenchArgs, params: &Path) -> anyhow::Result<()> {
    if args.grpc {
        return super::bench_hostile_grpc::run(&args, params);
    }
    if args.clients == 0 || args.proofs == 0 {
        bail!("--clients and --proofs must be at least 1");
    }
    let exe = args.daemon.exe()?;
    let inputs = args.daemon.inputs()?;
    let mut daemon = start_daemon(&args, &exe, params)?;
    let backend = daemon.client()?.welcome().backend.clone();
    let mut honest = Honest::new();
    honest.measure_idle(&mut daemon, &inputs, args.winning_every)?;
    let attack = attack(&args, daemon, &inputs, &mut honest)?;

    println!(
        "cuzk bench hostile: {} hostile clients, seed {}, devices configured: {backend}; {} honest proofs ({} during the attack), {} failed",
        args.clients,
        args.seed,
        attack.proofs,
        honest.attacked.len(),
        honest.failures.len()
    );
    report_attack(&args, &attack);
    report_honest(&honest, &attack);
    for f in honest.failures.iter().take(5) {
        eprintln!("failed: {f}");
    }
    let panics = attack.panics;
    if !honest.failures.is_empty() || panics > 0 {
        bail!(
            "{} honest proofs failed, {panics} panics logged",
            honest.failures.len()
        );
    }
    Ok(())
}

/// The report's table head and its rows of what the attackers did.
fn report_attack(args: &HostileBenchArgs, attack: &Attack) {
    let counters = &attack.counters;
    let frames = counters.frames.load(Ordering::Relaxed);
    row("measure", "this run".into(), "goal", "status");
    row("---", "---".into(), "---", "---");
    row(
        "fuzzed frames sent",
        format!(
            "{frames} in {:.1} s ({:.0} frames/s)",
            attack.duration.as_secs_f64(),
            frames as f64 / attack.duration.as_secs_f64().max(1e-9)
        ),
        &format!("≥ {GOAL_FRAMES}"),
        met(frames >= GOAL_FRAMES),
    );
    row(
        "hostile clients at once",
        args.clients.to_string(),
        &format!("≥ {GOAL_CLIENTS}"),
        met(args.clients >= GOAL_CLIENTS),
    );
    row(
        "connections opened / refused at connect",
        format!(
            "{} / {}",
            counters.connections.load(Ordering::Relaxed),
            counters.refused.load(Ordering::Relaxed)
        ),
        "",
        "",
    );
    row(
        "answers read (bytes)",
        format!(
            "{} ({:.1} MiB)",
            counters.answers.load(Ordering::Relaxed),
            counters.answer_bytes.load(Ordering::Relaxed) as f64 / (1u64 << 20) as f64
        ),
        "",
        "",
    );
}

/// The report's rows of the daemon's health and the honest client's proofs.
fn report_honest(honest: &Honest, attack: &Attack) {
    let (i, panics) = (attack.proofs, attack.panics);
    row(
        "daemon crashes, panics in its log",
        format!("0, {panics}"),
        "0",
        met(panics == 0),
    );
    row(
        "honest proofs failed",
        format!("{} of {i}", honest.failures.len()),
        "0",
        met(honest.failures.is_empty()),
    );
    row(
        "honest proof latency: idle (median) / under attack (median, max)",
        format!(
            "{} / {}, {} ({:.2}× idle)",
            secs(median(&honest.idle)),
            secs(median(&honest.attacked)),
            secs(honest.attacked.iter().max().copied()),
            ratio(median(&honest.attacked), median(&honest.idle))
        ),
        "",
        "",
    );
    row(
        "a new client's Hello + Status after the attack",
        format!("{:.1} ms", attack.after.as_secs_f64() * 1e3),
        "",
        "",
    );
    row(
        "daemon log written (peak RSS)",
        format!(
            "{:.1} KiB ({})",
            attack.log_bytes as f64 / 1024.0,
            attack.peak.map_or("–".into(), |b| format!(
                "{:.1} MiB",
                b as f64 / (1u64 << 20) as f64
            ))
        ),
        "",
        "",
    );
}

fn median(v: &[Duration]) -> Option<Duration> {
    let mut v = v.to_vec();
    v.sort();
    v.get(v.len() / 2).copied()
}

fn secs(d: Option<Duration>) -> String {
    d.map_or("–".into(), |d| format!("{:.2} s", d.as_secs_f64()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_is_shared_exactly() {
        let budget = AtomicU64::new(0);
        assert_eq!(take(&budget, 100, 64), 64);
        assert_eq!(take(&budget, 100, 64), 36);
        assert_eq!(take(&budget, 100, 64), 0);
    }

    #[test]
    fn fuzzed_payloads_are_mostly_not_valid_and_never_touch_jobs_or_parameters() {
        let mut rng = StdRng::seed_from_u64(7);
        let (mut valid, n) = (0, 20_000);
        for _ in 0..n {
            let p = fuzzed_payload(&mut rng);
            assert!(!touches_state(&p), "{p:?}");
            valid += usize::from(decode_payload::<Request>(&p).is_ok());
        }
        assert!(valid > n / 5 && valid < n * 3 / 4, "{valid} of {n} valid");
    }

    #[test]
    fn state_changing_requests_are_recognized() {
        let cancel = encode_payload(&Request::Cancel(JobRef { job_id: 3 })).unwrap();
        assert!(touches_state(&cancel));
        assert!(!touches_state(&encode_payload(&Request::Info).unwrap()));
        assert!(!touches_state(&[4]));
    }

    #[test]
    fn every_mode_is_picked() {
        let mut rng = StdRng::seed_from_u64(3);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..2000 {
            seen.insert(format!("{:?}", pick_mode(&mut rng)));
        }
        assert_eq!(seen.len(), 5);
    }

    #[test]
    fn drain_counts_whole_frames() {
        let (mut a, b) = UnixStream::pair().unwrap();
        let counters = Counters::default();
        let mut bytes = frame_of(b"abc");
        bytes.extend(frame_of(b""));
        bytes.extend(frame_of(&[9; 70_000]));
        std::thread::scope(|s| {
            s.spawn(|| {
                a.write_all(&bytes[..10]).unwrap();
                a.write_all(&bytes[10..]).unwrap();
                drop(a);
            });
            drain(b, &counters, Duration::from_secs(5));
        });
        assert_eq!(counters.answers.load(Ordering::Relaxed), 3);
        assert_eq!(
            counters.answer_bytes.load(Ordering::Relaxed),
            bytes.len() as u64
        );
    }
}
