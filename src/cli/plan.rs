//! `cuzk plan`: predicts a batch's wall time, throughput, device use and host memory from
//! per-partition costs, with the stages' discrete-event model (`proofs::sim`). Needs no
//! daemon, parameters or GPU.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context as _};
use clap::{Args, ValueEnum};

use crate::config::parse_size;
use crate::pipeline::sim::{simulate, Plan, Prediction};

/// Sector sizes with preset partition counts and sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SectorSize {
    /// 2 KiB PoRep: 1 partition, about 0.4 GB reserved per partition.
    #[value(name = "2KiB")]
    Kib2,
    /// 32 GiB PoRep: 10 partitions, about 16 GiB reserved per partition.
    #[value(name = "32GiB")]
    Gib32,
}

impl SectorSize {
    /// Partitions per job and host bytes per partition in flight (estimates).
    fn preset(self) -> (usize, u64) {
        match self {
            Self::Kib2 => (1, 400_000_000),
            Self::Gib32 => (10, 16 << 30),
        }
    }
}

/// Options of `cuzk plan`.
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// Synthesis threads (CPUs) [default: this host's CPUs].
    #[arg(long)]
    pub cpus: Option<usize>,
    /// GPUs (one device worker each).
    #[arg(long, default_value_t = 1)]
    pub gpus: usize,
    /// Jobs queued at once.
    #[arg(long, default_value_t = 64)]
    pub jobs: usize,
    /// Preset partitions per job and host bytes per partition; the presets are estimates,
    /// --partitions and --partition-bytes override them.
    #[arg(long, default_value = "2KiB")]
    pub sector_size: SectorSize,
    /// Partitions per job [default: from --sector-size].
    #[arg(long)]
    pub partitions: Option<usize>,
    /// Seconds one partition's synthesis takes on one CPU (or from --costs).
    #[arg(long, value_name = "SECONDS")]
    pub synthesis: Option<f64>,
    /// Seconds one partition takes on a GPU (or from --costs).
    #[arg(long, value_name = "SECONDS")]
    pub device: Option<f64>,
    /// Seconds a job's verification takes [default: from --costs, else 0].
    #[arg(long, value_name = "SECONDS")]
    pub verification: Option<f64>,
    /// Jobs in flight at once [default: CPUs + 2, as the daemon's proving.workers = 0].
    #[arg(long)]
    pub workers: Option<usize>,
    /// Host memory partitions may reserve together, e.g. 112GiB [default: unlimited].
    #[arg(long, value_name = "SIZE")]
    pub memory_budget: Option<String>,
    /// Host memory one partition reserves, e.g. 16GiB [default: from --sector-size].
    #[arg(long, value_name = "SIZE")]
    pub partition_bytes: Option<String>,
    /// A TOML file with the per-partition costs in seconds (`synthesis`, `device`,
    /// `verification`); flags given as well take precedence.
    #[arg(long, value_name = "FILE")]
    pub costs: Option<PathBuf>,
}

/// Per-partition costs read from `--costs`.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Costs {
    synthesis: Option<f64>,
    device: Option<f64>,
    verification: Option<f64>,
}

fn read_costs(path: &Path) -> anyhow::Result<Costs> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    toml::from_str(&text).with_context(|| format!("{}", path.display()))
}

fn size(flag: &str, text: &str) -> anyhow::Result<u64> {
    parse_size(text).map_err(|e| anyhow!("--{flag}: {e}"))
}

/// The plan the arguments describe.
fn plan(args: &PlanArgs) -> anyhow::Result<Plan> {
    let costs = match &args.costs {
        Some(path) => read_costs(path)?,
        None => Costs::default(),
    };
    let cpus = match args.cpus {
        Some(n) => n,
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let (preset_partitions, preset_bytes) = args.sector_size.preset();
    let Some(synthesis) = args.synthesis.or(costs.synthesis) else {
        bail!("the synthesis time is needed: --synthesis SECONDS or --costs FILE");
    };
    let Some(device) = args.device.or(costs.device) else {
        bail!("the device time is needed: --device SECONDS or --costs FILE");
    };
    Ok(Plan {
        cpus,
        devices: args.gpus,
        workers: args.workers.unwrap_or(Plan::default_workers(cpus)),
        memory_budget: match &args.memory_budget {
            Some(s) => size("memory-budget", s)?,
            None => u64::MAX,
        },
        partition_bytes: match &args.partition_bytes {
            Some(s) => size("partition-bytes", s)?,
            None => preset_bytes,
        },
        jobs: args.jobs,
        partitions_per_job: args.partitions.unwrap_or(preset_partitions),
        synthesis,
        device,
        verification: args.verification.or(costs.verification).unwrap_or(0.0),
    })
}

/// A size for a reader, rounded to one decimal of the largest binary unit it reaches
/// (`format_size` prints exact sizes, e.g. 390625KiB, which hide the magnitude).
fn human(bytes: u64) -> String {
    if bytes == u64::MAX {
        return "unlimited".into();
    }
    let units = [
        ("TiB", 1u64 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
    ];
    match units.iter().find(|(_, m)| bytes >= *m) {
        Some((name, m)) => format!("{:.1} {name}", bytes as f64 / *m as f64),
        None => format!("{bytes} B"),
    }
}

/// `n` and `noun`, with an "s" unless `n` is 1.
fn count(n: usize, noun: &str) -> String {
    format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
}

/// The report: the inputs in one line each, then the prediction.
fn report(p: &Plan, r: &Prediction) -> String {
    let rows = [
        (
            "host",
            format!(
                "{}, {}, {} in flight, memory budget {}",
                count(p.cpus, "CPU"),
                count(p.devices, "GPU"),
                count(p.workers, "job"),
                human(p.memory_budget)
            ),
        ),
        (
            "work",
            format!(
                "{} × {} of {}",
                count(p.jobs, "job"),
                count(p.partitions_per_job, "partition"),
                human(p.partition_bytes)
            ),
        ),
        (
            "per partition",
            format!(
                "synthesis {:.3} s, device {:.3} s; verification {:.3} s per job",
                p.synthesis, p.device, p.verification
            ),
        ),
        ("predicted wall", format!("{:.2} s", r.wall)),
        ("proofs/min", format!("{:.1}", r.proofs_per_min)),
        ("device busy", format!("{:.1} %", 100.0 * r.device_busy)),
        (
            "synthesis busy",
            format!("{:.1} %", 100.0 * r.synthesis_busy),
        ),
        (
            "peak host reserved",
            format!(
                "{} ({})",
                human(r.peak_reserved_bytes),
                count(r.peak_partitions_in_flight, "partition")
            ),
        ),
    ];
    rows.iter()
        .map(|(name, value)| format!("{name:<20}{value}\n"))
        .collect()
}

/// Runs `cuzk plan`.
pub fn run(args: PlanArgs) -> anyhow::Result<()> {
    let plan = plan(&args)?;
    let prediction = simulate(&plan)?;
    print!("{}", report(&plan, &prediction));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cmd {
        #[command(flatten)]
        args: PlanArgs,
    }

    fn parse(argv: &[&str]) -> PlanArgs {
        Cmd::parse_from(std::iter::once("plan").chain(argv.iter().copied())).args
    }

    #[test]
    fn presets_and_overrides() {
        let a = parse(&["--cpus", "8", "--synthesis", "1", "--device", "0.5"]);
        let p = plan(&a).expect("a plan");
        assert_eq!((p.partitions_per_job, p.workers, p.devices), (1, 10, 1));
        let a = parse(&[
            "--cpus",
            "8",
            "--sector-size",
            "32GiB",
            "--synthesis",
            "1",
            "--device",
            "0.5",
            "--memory-budget",
            "112GiB",
        ]);
        let p = plan(&a).expect("a plan");
        assert_eq!(p.partitions_per_job, 10);
        assert_eq!(p.partition_bytes, 16 << 30);
        assert_eq!(p.memory_budget, 112 << 30);
    }

    #[test]
    fn sizes_read_as_magnitudes() {
        assert_eq!(human(400_000_000), "381.5 MiB");
        assert_eq!(human(16 << 30), "16.0 GiB");
        assert_eq!(human(u64::MAX), "unlimited");
    }

    #[test]
    fn missing_costs_are_errors() {
        assert!(plan(&parse(&["--cpus", "8", "--device", "0.5"])).is_err());
    }

    #[test]
    fn costs_file_and_flags() {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("costs.toml");
        std::fs::write(
            &file,
            "synthesis = 2.0\ndevice = 0.2\nverification = 0.01\n",
        )
        .expect("write");
        let path = file.to_str().expect("utf-8 path");
        let p = plan(&parse(&["--cpus", "4", "--costs", path, "--device", "0.3"])).expect("plan");
        assert_eq!((p.synthesis, p.device, p.verification), (2.0, 0.3, 0.01));
        std::fs::write(&file, "synthesis = 2.0\nfoo = 1\n").expect("write");
        assert!(plan(&parse(&["--cpus", "4", "--costs", path])).is_err());
    }
}
