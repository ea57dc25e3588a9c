//! `cuzk bench pipeline`: a real `cuzkd` under a queue of proofs, with WinningPoSt
//! interleaved: throughput, device busy fraction, WinningPoSt latency idle against loaded,
//! and the daemon's peak RSS.
//!
//! The references are measured in the same run: one job alone on the idle daemon (its
//! throughput if jobs ran one after another) and WinningPoSt on the idle daemon.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};

use super::bench_daemon::{connect, Daemon, DaemonFlags, Inputs};
use crate::proto::{Client, Timings};

const CLIENT: &str = "cuzk-bench-pipeline";
/// The goals of the pipeline issue, on the H200 host with 2 KiB PoRep.
const GOAL_PROOFS_PER_MIN: f64 = 300.0;
const GOAL_WINNING_RATIO: f64 = 1.5;

/// `cuzk bench pipeline …`
#[derive(Debug, clap::Args)]
pub struct PipelineBenchArgs {
    /// The proof kind queued (PoRep only, for now).
    #[arg(long, default_value = "porep", value_parser = ["porep"])]
    pub kind: String,
    /// Jobs queued at once.
    #[arg(long, default_value_t = 48)]
    pub jobs: usize,
    /// Prove a WinningPoSt every this many seconds while the jobs run (0: none).
    #[arg(long, default_value_t = 2.0)]
    pub winning_post_every: f64,
    /// The daemon and its inputs.
    #[command(flatten)]
    pub daemon: DaemonFlags,
    /// Write the daemon's stage trace (Chrome trace events, for Perfetto) to this file.
    #[arg(long, value_name = "FILE")]
    pub trace_file: Option<PathBuf>,
}

/// A WinningPoSt's latency as its client saw it, and the daemon's stage times.
#[derive(Clone)]
struct Sample {
    latency: Duration,
    timings: Timings,
}

/// Proves one WinningPoSt on a connection of its own.
fn winning_once(socket: &Path, input: &Inputs) -> anyhow::Result<Sample> {
    let mut c = connect(socket, CLIENT)?;
    let start = Instant::now();
    let result = c.prove(input.winning())?;
    Ok(Sample {
        latency: start.elapsed(),
        timings: result.timings,
    })
}

/// Mean stage times of `samples` in ms: queue wait, synthesis, proving, verification, and
/// the rest of the client's latency (connection, parsing, the answer).
fn stage_means(samples: &[Sample]) -> String {
    let n = samples.len().max(1) as f64;
    let mean = |f: &dyn Fn(&Sample) -> f64| samples.iter().map(f).sum::<f64>() / n;
    let us = |v: u64| v as f64 / 1e3;
    let stages = |s: &Sample| {
        let t = &s.timings;
        us(t.queue_wait_us) + us(t.synthesis_us) + us(t.proving_us) + us(t.verification_us)
    };
    format!(
        "{:.0} / {:.0} / {:.0} / {:.0} / {:.0}",
        mean(&|s| us(s.timings.queue_wait_us)),
        mean(&|s| us(s.timings.synthesis_us)),
        mean(&|s| us(s.timings.proving_us)),
        mean(&|s| us(s.timings.verification_us)),
        mean(&|s| s.latency.as_secs_f64() * 1e3 - stages(s)),
    )
}

/// One number of the daemon's metrics (an unlabelled sample).
fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}

fn p50_max(v: &mut [Duration]) -> (Duration, Duration) {
    v.sort();
    let p50 = v.get(v.len() / 2).copied().unwrap_or_default();
    (p50, v.last().copied().unwrap_or_default())
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1e3)
}

/// What the queue's run measured, with the daemon's metrics around it.
struct Loaded {
    /// The wall time from the first submission to the last job's answer.
    wall: Duration,
    /// Jobs answered without a proof.
    failed: usize,
    /// The daemon's metrics before the jobs were submitted, and after the last answer.
    before: String,
    after: String,
    /// The WinningPoSts proved while the jobs ran.
    samples: Vec<Sample>,
}

impl Loaded {
    /// How much metric `name` grew over the run.
    fn delta(&self, name: &str) -> f64 {
        metric(&self.after, name).unwrap_or(0.0) - metric(&self.before, name).unwrap_or(0.0)
    }
}

/// Starts the daemon with `--set` keys and the trace file, if asked for.
fn start_daemon(args: &PipelineBenchArgs, exe: &Path, params: &Path) -> anyhow::Result<Daemon> {
    let mut set = args.daemon.set.clone();
    if let Some(trace) = &args.trace_file {
        let path = std::path::absolute(trace)?;
        set.push(format!("debug.trace_file={:?}", path.display().to_string()));
    }
    Daemon::start(exe, params, &set, CLIENT)
}

/// Warms the daemon, then measures the references on it idle: one job alone, and five
/// WinningPoSts.
fn references(
    daemon: &Daemon,
    client: &mut Client,
    inputs: &Inputs,
) -> anyhow::Result<(Duration, Vec<Sample>)> {
    // Warm: parameters resident, kernels compiled. Then the references, on the idle daemon.
    client.prove(inputs.porep())?;
    winning_once(daemon.socket(), inputs)?;
    let start = Instant::now();
    client.prove(inputs.porep())?;
    let alone = start.elapsed();
    let idle: Vec<Sample> = (0..5)
        .map(|_| winning_once(daemon.socket(), inputs))
        .collect::<anyhow::Result<_>>()?;
    Ok((alone, idle))
}

/// Proves a WinningPoSt every `every` on a thread of its own until `running` clears.
fn spawn_prober(
    socket: PathBuf,
    inputs: Inputs,
    every: Duration,
    running: Arc<AtomicBool>,
) -> std::thread::JoinHandle<anyhow::Result<Vec<Sample>>> {
    std::thread::spawn(move || -> anyhow::Result<Vec<Sample>> {
        let mut samples = Vec::new();
        std::thread::sleep(every.min(Duration::from_secs(1)));
        while running.load(Ordering::SeqCst) {
            samples.push(winning_once(&socket, &inputs)?);
            std::thread::sleep(every);
        }
        Ok(samples)
    })
}

/// Queues the jobs, with WinningPoSt interleaved, and waits for every answer.
fn run_queue(
    args: &PipelineBenchArgs,
    daemon: &Daemon,
    client: &mut Client,
    inputs: &Inputs,
) -> anyhow::Result<Loaded> {
    let before = client.metrics()?;
    let start = Instant::now();
    let ids: Vec<u64> = (0..args.jobs)
        .map(|_| client.submit(inputs.porep()).map(|a| a.job_id))
        .collect::<Result<_, _>>()?;
    let running = Arc::new(AtomicBool::new(true));
    if !args.winning_post_every.is_finite() || args.winning_post_every < 0.0 {
        bail!("--winning-post-every: expected seconds, 0 for none");
    }
    let prober = (args.winning_post_every > 0.0).then(|| {
        let every = Duration::from_secs_f64(args.winning_post_every);
        let socket = daemon.socket().to_path_buf();
        spawn_prober(socket, inputs.clone(), every, running.clone())
    });
    let mut failed = 0;
    for id in &ids {
        let result = loop {
            match client.await_job(*id, Some(Duration::from_secs(60)))? {
                Ok(r) => break r,
                Err(_) => continue,
            }
        };
        if result.proof.is_empty() {
            failed += 1;
        }
    }
    let wall = start.elapsed();
    running.store(false, Ordering::SeqCst);
    let after = client.metrics()?;
    let samples = match prober {
        Some(h) => h
            .join()
            .map_err(|_| anyhow!("the WinningPoSt thread panicked"))??,
        None => Vec::new(),
    };
    Ok(Loaded {
        wall,
        failed,
        before,
        after,
        samples,
    })
}

/// Runs the benchmark with the parameter directory `params`.
pub fn run(args: PipelineBenchArgs, params: &Path) -> anyhow::Result<()> {
    let exe = args.daemon.exe()?;
    let inputs = args.daemon.inputs()?;
    let daemon = start_daemon(&args, &exe, params)?;
    let mut client = daemon.client()?;
    let welcome = client.welcome().clone();
    let (alone, idle) = references(&daemon, &mut client, &inputs)?;
    let loaded = run_queue(&args, &daemon, &mut client, &inputs)?;
    let peak = daemon.peak_rss();
    drop(client);
    drop(daemon);

    println!(
        "cuzk bench pipeline: {} {} jobs, devices configured: {}, {} jobs in flight, {} failed",
        args.jobs, args.kind, welcome.backend, welcome.workers, loaded.failed
    );
    report_devices(&args, &loaded, alone);
    report_winning(&loaded.samples, &idle);
    if let Some(p) = peak {
        println!(
            "| daemon peak RSS | {:.2} GiB | | | |",
            p as f64 / (1u64 << 30) as f64
        );
    }
    if loaded.failed > 0 {
        bail!("{} of {} jobs failed", loaded.failed, args.jobs);
    }
    Ok(())
}

/// The report's table head and its rows of throughput and the devices' work.
fn report_devices(args: &PipelineBenchArgs, loaded: &Loaded, alone: Duration) {
    let wall = loaded.wall;
    let delta = |name: &str| loaded.delta(name);
    let busy = delta("cuzk_device_busy_seconds_total") / wall.as_secs_f64();
    let rate = args.jobs as f64 / wall.as_secs_f64() * 60.0;
    let serial = 60.0 / alone.as_secs_f64();
    println!("| measure | this run | reference (same run) | ratio | goal |");
    println!("|---|---|---|---|---|");
    println!(
        "| throughput | {rate:.1} proofs/min ({:.1} s for {}) | one job alone: {serial:.1}/min ({:.2} s) | {:.2}× | ≥ {GOAL_PROOFS_PER_MIN:.0} proofs/min |",
        wall.as_secs_f64(),
        args.jobs,
        alone.as_secs_f64(),
        rate / serial
    );
    println!("| device busy | {:.1} % | | | |", busy * 100.0);
    // Partitions no device proved (every device quarantined, or each failed them): the CPU
    // prover made them, and the figures above include that.
    println!(
        "| partitions proved on the CPU fallback | {:.0} | | | 0 |",
        delta("cuzk_partitions_fallback_total")
    );
    // Each device's share, where the daemon has several (its per-device metrics).
    let devices: Vec<String> = (0..)
        .map_while(|i| {
            let n = format!("cuzk_device_partitions_total{{device=\"{i}\"}}");
            let w = format!("cuzk_device_work_seconds_total{{device=\"{i}\"}}");
            metric(&loaded.after, &n)?;
            Some(format!(
                "device {i}: {:.0} partitions, busy {:.1} %",
                delta(&n),
                delta(&w) / wall.as_secs_f64() * 100.0
            ))
        })
        .collect();
    if devices.len() > 1 {
        println!("| per device | {} | | | |", devices.join("; "));
    }
    if metric(&loaded.after, "cuzk_pinned_leases_total").is_some() {
        println!(
            "| pinned pool: leases / misses | {:.0} / {:.0} | | | |",
            delta("cuzk_pinned_leases_total"),
            delta("cuzk_pinned_misses_total")
        );
    }
    let proved = delta("cuzk_partitions_proved_total").max(1.0);
    let stage = |s: &str| {
        let name = format!("cuzk_partition_stage_seconds_total{{stage=\"{s}\"}}");
        delta(&name) / proved * 1e3
    };
    println!(
        "| per partition: synthesis / device wait / device | {:.0} / {:.0} / {:.0} ms | | | |",
        stage("synthesis"),
        stage("device_wait"),
        stage("device")
    );
}

/// The report's rows of WinningPoSt under load against idle, if any was proved under load.
fn report_winning(loaded: &[Sample], idle: &[Sample]) {
    if loaded.is_empty() {
        return;
    }
    let (idle50, idle_max) = p50_max(&mut idle.iter().map(|s| s.latency).collect::<Vec<_>>());
    let n = loaded.len();
    let (l50, lmax) = p50_max(&mut loaded.iter().map(|s| s.latency).collect::<Vec<_>>());
    println!(
        "| WinningPoSt p50 / max ({n} under load) | {} / {} | idle: {} / {} | {:.2}× / {:.2}× | ≤ {GOAL_WINNING_RATIO}× idle |",
        ms(l50),
        ms(lmax),
        ms(idle50),
        ms(idle_max),
        l50.as_secs_f64() / idle50.as_secs_f64(),
        lmax.as_secs_f64() / idle_max.as_secs_f64()
    );
    println!(
        "| WinningPoSt mean ms: queue / synthesis / proving / verification / rest | {} | idle: {} | | |",
        stage_means(loaded),
        stage_means(idle)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_unlabelled_metrics() {
        let text = "# HELP cuzk_x x\n# TYPE cuzk_x counter\ncuzk_x 2.5\ncuzk_x_total 7\n";
        assert_eq!(metric(text, "cuzk_x"), Some(2.5));
        assert_eq!(metric(text, "cuzk_x_total"), Some(7.0));
        assert_eq!(metric(text, "cuzk_y"), None);
    }
}
