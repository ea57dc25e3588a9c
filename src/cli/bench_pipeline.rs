//! `cuzk bench pipeline`: a real `cuzkd` under a queue of proofs, with WinningPoSt
//! interleaved: throughput, device busy fraction, WinningPoSt latency idle against loaded,
//! and the daemon's peak RSS.
//!
//! The references are measured in the same run: one job alone on the idle daemon (its
//! throughput if jobs ran one after another) and WinningPoSt on the idle daemon.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _};

use crate::proto::{Client, ProofInput, Submit, Timings};

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
    /// Inputs made by `cuzk sample` (c1.json, winning-post.json).
    #[arg(long, default_value = "/tmp/s")]
    pub sample: PathBuf,
    /// Miner id and sector number the sample was sealed for.
    #[arg(long, default_value_t = 1000)]
    pub miner_id: u64,
    /// The sample's sector number.
    #[arg(long, default_value_t = 1)]
    pub sector_number: u64,
    /// The daemon to start [default: cuzkd next to this cuzk].
    #[arg(long)]
    pub daemon: Option<PathBuf>,
    /// A configuration key for the daemon, `section.key=<TOML value>` (repeatable); the
    /// default configuration otherwise.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Write the daemon's stage trace (Chrome trace events, for Perfetto) to this file.
    #[arg(long, value_name = "FILE")]
    pub trace_file: Option<PathBuf>,
}

/// A started daemon, stopped (SIGTERM, then waited for) when dropped.
struct Daemon {
    child: Child,
    socket: PathBuf,
    /// Its socket, configuration and log; removed when the daemon is stopped.
    dir: PathBuf,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            let pid = nix::unistd::Pid::from_raw(pid);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        }
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Daemon {
    fn start(exe: &Path, params: &Path, set: &[String]) -> anyhow::Result<Self> {
        let dir = PathBuf::from(format!("/tmp/cuzk-bench-pipeline-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let socket = dir.join("cuzk.sock");
        let config = dir.join("cuzk.toml");
        std::fs::write(&config, config_text(&socket, params, set)?)?;
        let log = std::fs::File::create(dir.join("cuzkd.log"))?;
        let child = Command::new(exe)
            .arg("--config")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", exe.display()))?;
        let mut daemon = Self { child, socket, dir };
        let start = Instant::now();
        while !daemon.socket.exists() {
            if let Some(status) = daemon.child.try_wait()? {
                let log = std::fs::read_to_string(daemon.dir.join("cuzkd.log")).unwrap_or_default();
                let tail: String = log
                    .chars()
                    .rev()
                    .take(2000)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect();
                bail!("{} exited at start ({status}):\n{tail}", exe.display());
            }
            if start.elapsed() > Duration::from_secs(120) {
                bail!("{} did not open its socket within 120 s", exe.display());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(daemon)
    }

    fn client(&self) -> anyhow::Result<Client> {
        connect(&self.socket)
    }

    /// The daemon's peak resident set size so far.
    fn peak_rss(&self) -> Option<u64> {
        super::bench::peak_rss_of(&self.child.id().to_string())
    }
}

/// The daemon's configuration: its socket and parameters, then the `--set` keys by section.
fn config_text(socket: &Path, params: &Path, set: &[String]) -> anyhow::Result<String> {
    let mut sections: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut add =
        |section: &str, line: String| sections.entry(section.to_string()).or_default().push(line);
    add(
        "socket",
        format!("path = {:?}", socket.display().to_string()),
    );
    add(
        "params",
        format!("dir = {:?}", params.display().to_string()),
    );
    add("daemon", "allow_root = true".into());
    add("queue", "max_queued = 4096".into());
    for kv in set {
        let (key, value) = kv
            .split_once('=')
            .ok_or_else(|| anyhow!("--set {kv}: expected section.key=value"))?;
        let (section, key) = key
            .trim()
            .split_once('.')
            .ok_or_else(|| anyhow!("--set {kv}: expected section.key=value"))?;
        add(section, format!("{key} = {}", value.trim()));
    }
    let mut out = String::new();
    for (section, lines) in sections {
        out += &format!("[{section}]\n{}\n", lines.join("\n"));
    }
    Ok(out)
}

fn porep(args: &PipelineBenchArgs, c1: &Arc<Vec<u8>>) -> Submit {
    Submit {
        request_id: None,
        priority: None,
        input: ProofInput::PoRep {
            c1: c1.as_ref().clone(),
            miner_id: args.miner_id,
            sector_number: Some(args.sector_number),
        },
    }
}

fn winning(input: &[u8]) -> Submit {
    Submit {
        request_id: None,
        priority: None,
        input: ProofInput::WinningPoSt {
            input: input.to_vec(),
        },
    }
}

/// A client of the benchmark's daemon, past Hello; answers may take minutes under load.
fn connect(socket: &Path) -> anyhow::Result<Client> {
    Ok(Client::connect_with(
        socket,
        CLIENT,
        Some(Duration::from_secs(600)),
    )?)
}

/// A WinningPoSt's latency as its client saw it, and the daemon's stage times.
#[derive(Clone)]
struct Sample {
    latency: Duration,
    timings: Timings,
}

/// Proves one WinningPoSt on a connection of its own.
fn winning_once(socket: &Path, input: &[u8]) -> anyhow::Result<Sample> {
    let mut c = connect(socket)?;
    let start = Instant::now();
    let result = c.prove(winning(input))?;
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

/// Runs the benchmark with the parameter directory `params`.
pub fn run(args: PipelineBenchArgs, params: &Path) -> anyhow::Result<()> {
    let exe = match &args.daemon {
        Some(p) => p.clone(),
        None => std::env::current_exe()?
            .parent()
            .map(|d| d.join("cuzkd"))
            .ok_or_else(|| anyhow!("cannot locate cuzkd; pass --daemon"))?,
    };
    let c1 = Arc::new(
        std::fs::read(args.sample.join("c1.json"))
            .with_context(|| format!("{}: run `cuzk sample` first", args.sample.display()))?,
    );
    let wpost: Arc<Vec<u8>> = Arc::new(std::fs::read(args.sample.join("winning-post.json"))?);
    let mut set = args.set.clone();
    if let Some(trace) = &args.trace_file {
        let path = std::path::absolute(trace)?;
        set.push(format!("debug.trace_file={:?}", path.display().to_string()));
    }
    let daemon = Daemon::start(&exe, params, &set)?;
    let mut client = daemon.client()?;
    let welcome = client.welcome().clone();

    // Warm: parameters resident, kernels compiled. Then the references, on the idle daemon.
    client.prove(porep(&args, &c1))?;
    winning_once(&daemon.socket, &wpost)?;
    let start = Instant::now();
    client.prove(porep(&args, &c1))?;
    let alone = start.elapsed();
    let idle: Vec<Sample> = (0..5)
        .map(|_| winning_once(&daemon.socket, &wpost))
        .collect::<anyhow::Result<_>>()?;

    let before = client.metrics()?;
    let start = Instant::now();
    let ids: Vec<u64> = (0..args.jobs)
        .map(|_| client.submit(porep(&args, &c1)).map(|a| a.job_id))
        .collect::<Result<_, _>>()?;
    let running = Arc::new(AtomicBool::new(true));
    if !args.winning_post_every.is_finite() || args.winning_post_every < 0.0 {
        bail!("--winning-post-every: expected seconds, 0 for none");
    }
    let prober = (args.winning_post_every > 0.0).then(|| {
        let (running, wpost) = (running.clone(), wpost.clone());
        let every = Duration::from_secs_f64(args.winning_post_every);
        let socket = daemon.socket.clone();
        std::thread::spawn(move || -> anyhow::Result<Vec<Sample>> {
            let mut samples = Vec::new();
            std::thread::sleep(every.min(Duration::from_secs(1)));
            while running.load(Ordering::SeqCst) {
                samples.push(winning_once(&socket, &wpost)?);
                std::thread::sleep(every);
            }
            Ok(samples)
        })
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
    let loaded = match prober {
        Some(h) => h
            .join()
            .map_err(|_| anyhow!("the WinningPoSt thread panicked"))??,
        None => Vec::new(),
    };
    let peak = daemon.peak_rss();
    drop(client);
    drop(daemon);

    let delta =
        |name: &str| metric(&after, name).unwrap_or(0.0) - metric(&before, name).unwrap_or(0.0);
    let busy = delta("cuzk_device_busy_seconds_total") / wall.as_secs_f64();
    let rate = args.jobs as f64 / wall.as_secs_f64() * 60.0;
    let serial = 60.0 / alone.as_secs_f64();
    let (idle50, idle_max) = p50_max(&mut idle.iter().map(|s| s.latency).collect::<Vec<_>>());
    println!(
        "cuzk bench pipeline: {} {} jobs, backend {}, {} jobs in flight, {} failed",
        args.jobs, args.kind, welcome.backend, welcome.workers, failed
    );
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
    // Each device's share, where the daemon has several (its per-device metrics).
    let devices: Vec<String> = (0..)
        .map_while(|i| {
            let n = format!("cuzk_device_partitions_total{{device=\"{i}\"}}");
            let w = format!("cuzk_device_work_seconds_total{{device=\"{i}\"}}");
            metric(&after, &n)?;
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
    if metric(&after, "cuzk_pinned_leases_total").is_some() {
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
    if !loaded.is_empty() {
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
            stage_means(&loaded),
            stage_means(&idle)
        );
    }
    if let Some(p) = peak {
        println!(
            "| daemon peak RSS | {:.2} GiB | | | |",
            p as f64 / (1u64 << 30) as f64
        );
    }
    if failed > 0 {
        bail!("{failed} of {} jobs failed", args.jobs);
    }
    Ok(())
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

    /// The flags parse beside `cuzk bench`'s global ones (a `--trace` here once collided with
    /// the GPU benchmark's).
    #[test]
    fn flags_parse() {
        use clap::Parser;
        let argv = [
            "cuzk",
            "bench",
            "pipeline",
            "--jobs",
            "3",
            "--trace-file",
            "/t.json",
            "--set",
            "proving.workers=2",
            "--trace",
        ];
        let cli = crate::cli::Cli::try_parse_from(argv).unwrap();
        let crate::cli::Command::Bench(b) = cli.command else {
            panic!("not bench")
        };
        let super::super::bench::BenchWhat::Pipeline(p) = b.what else {
            panic!("not pipeline")
        };
        assert_eq!(p.jobs, 3);
        assert_eq!(p.trace_file.as_deref(), Some(Path::new("/t.json")));
        assert_eq!(p.set, ["proving.workers=2"]);
    }

    #[test]
    fn config_groups_keys_by_section() {
        let set = [
            "proving.workers=4".to_string(),
            "proving.backend=\"cpu\"".into(),
        ];
        let text = config_text(Path::new("/s"), Path::new("/p"), &set).unwrap();
        let doc: toml::Table = text.parse().unwrap();
        assert_eq!(doc["proving"]["workers"].as_integer(), Some(4));
        assert_eq!(doc["proving"]["backend"].as_str(), Some("cpu"));
        assert_eq!(doc["socket"]["path"].as_str(), Some("/s"));
        assert!(config_text(Path::new("/s"), Path::new("/p"), &["x".into()]).is_err());
    }
}
