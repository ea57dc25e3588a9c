//! `cuzk bench`: our prover against filecoin-proofs' on the same input; the reference runs in
//! a process of its own (`bench_reference.rs`).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Subcommand;

use super::backend::select_backend;
use super::bench_gpu::GpuFlags;
use super::bench_msm::CpuFlags;
use super::bench_reference::{Checked, ReferenceRun};
use super::request::{request_of, ProveWhat};
use super::rss::{peak_rss, reset_peak_rss};
use super::Environment;
use crate::gpu::GpuOptions;
use crate::pipeline::{JobControl, ProvingService};

/// `cuzk bench …`
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// What to benchmark.
    #[command(subcommand)]
    pub what: BenchWhat,
    /// Parameter directory [default: $FIL_PROOFS_PARAMETER_CACHE or
    /// /var/tmp/filecoin-proof-parameters].
    #[arg(long, global = true)]
    pub param_dir: Option<PathBuf>,
    /// Warm runs of cuzk after the first (cold) one.
    #[arg(long, global = true, default_value_t = 2)]
    pub runs: usize,
    /// Use the CPU backend even when a GPU is present.
    #[arg(long, global = true)]
    pub cpu: bool,
    /// The GPU options of the run.
    #[command(flatten)]
    pub gpu: GpuFlags,
    /// The CPU options of the run.
    #[command(flatten)]
    pub cpu_options: CpuFlags,
    /// Run only filecoin-proofs' prover on the input and print one result line: the process
    /// `cuzk bench <kind>` starts for its reference.
    #[arg(long, global = true, hide = true)]
    pub reference_only: bool,
}

/// The benchmarks.
#[derive(Debug, Subcommand)]
pub enum BenchWhat {
    /// Prove the same input with cuzk and with filecoin-proofs' CPU prover (in a process of its
    /// own, verified by filecoin-proofs' verifier); print both times, the ratio and each
    /// one's peak RSS.
    #[command(flatten)]
    Proof(ProveWhat),
    /// GPU kernels (MSM, NTT) beside sppark's figures on the H200 from ANCHORS.md (another
    /// day and process: provenance printed beside the ratio).
    Gpu(super::bench_gpu::GpuBenchArgs),
    /// The CPU backend's multi-scalar multiplication against blst's Pippenger.
    Msm(super::bench_msm::MsmBenchArgs),
    /// A real cuzkd under a queue of proofs with WinningPoSt interleaved: throughput, device
    /// busy, WinningPoSt latency idle against loaded, peak RSS.
    Pipeline(super::bench_pipeline::PipelineBenchArgs),
    /// Many proofs through a real cuzkd, a few in flight: the daemon's RSS drift and open
    /// descriptors over the run.
    Soak(super::bench_soak::SoakBenchArgs),
    /// A real cuzkd under attack by many clients sending fuzzed frames while an honest
    /// client proves through it: crashes, failed proofs, the honest latency against idle.
    Hostile(super::bench_hostile_args::HostileBenchArgs),
    /// One PoRep partition (synthetic, any sector size, or from a C1 file): synthesis in
    /// parts against one thread, host bytes per constraint, the device stage on synthetic
    /// parameters.
    Partition(super::bench_partition::PartitionBenchArgs),
    /// One WinningPoSt or WindowPoSt partition of the real shape (synthetic, any sector
    /// size): its constraint count, synthesis time and host bytes, the device stage on
    /// synthetic parameters where there is a GPU.
    Post(super::bench_post::PostBenchArgs),
    /// A storage provider's day through the proving stages: a continuous synthetic PoRep
    /// load, a WindowPoSt deadline at a set time, a WinningPoSt every period; each class's
    /// latencies, the deadline's completion, PoRep sectors per hour with and without the PoSt
    /// work, device busy, peak RSS (synthetic proofs, never verified). `--gpu-memory-limit
    /// 16GiB` runs the same day as a 16 GiB card; without a GPU it runs on the CPU.
    Day(super::bench_day_schedule::DayBenchArgs),
    /// A large free beside a thread that starts threads and maps memory: how long the free
    /// holds it up, freed whole against handed back in pieces first (the binaries' allocator).
    Free(super::bench_free::FreeBenchArgs),
    /// Hold a GPU's memory, leaving only some of it free, until killed: a stand-in for another
    /// program on the card, to run cuzk beside it as on a smaller one.
    HoldGpu(HoldGpuArgs),
}

/// Options of `cuzk bench hold-gpu`.
#[derive(clap::Args, Debug, Clone)]
pub struct HoldGpuArgs {
    /// Device memory to leave free, e.g. 14.5GiB.
    #[arg(long, value_parser = crate::config::parse_size)]
    pub leave: u64,
}

/// Holds the memory, says so on stdout (one line, flushed), and waits to be killed.
fn hold_gpu(args: &HoldGpuArgs, gpu: &GpuOptions) -> anyhow::Result<()> {
    use std::io::Write;
    let held = crate::gpu::device::hold_memory(gpu.ordinal, args.leave)?;
    let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
    println!(
        "holding {:.2} GiB of device {}; {:.2} GiB free",
        gib(held.held),
        gpu.ordinal,
        gib(held.free)
    );
    std::io::stdout().flush()?;
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

/// The parameter directory of a proof benchmark: `--param-dir`, else
/// `FIL_PROOFS_PARAMETER_CACHE`, else filecoin-proofs' default. `None` for the kernel
/// benchmarks, which read no parameters.
pub fn filecoin_proofs_param_dir(args: &BenchArgs, env: &Environment) -> Option<PathBuf> {
    match args.what {
        BenchWhat::Proof(_) => Some(args.param_dir.clone().unwrap_or_else(|| env.param_dir())),
        BenchWhat::Gpu(_)
        | BenchWhat::Msm(_)
        | BenchWhat::Pipeline(_)
        | BenchWhat::Soak(_)
        | BenchWhat::Hostile(_)
        | BenchWhat::Partition(_)
        | BenchWhat::Post(_)
        | BenchWhat::Day(_)
        | BenchWhat::Free(_)
        | BenchWhat::HoldGpu(_) => None,
    }
}

/// Runs `cuzk bench …`: the options `cuzk` started with, changed by the flags.
pub fn run(args: BenchArgs, env: &Environment) -> anyhow::Result<()> {
    if args.reference_only {
        let BenchWhat::Proof(what) = &args.what else {
            anyhow::bail!("--reference-only is for the proof benchmarks");
        };
        return super::bench_reference::run_child(what);
    }
    let gpu = args.gpu.apply(env.gpu.clone())?;
    let cpu = args.cpu_options.apply(env.cpu.clone())?;
    match args.what {
        BenchWhat::Gpu(g) => super::bench_gpu::run(g, &gpu),
        BenchWhat::Msm(m) => super::bench_msm::run(m, &cpu),
        BenchWhat::HoldGpu(h) => hold_gpu(&h, &gpu),
        BenchWhat::Free(f) => super::bench_free::run(f),
        BenchWhat::Partition(p) => {
            anyhow::ensure!(
                !(p.against_cpu && args.cpu),
                "--against-cpu compares the GPU's proof with the CPU prover's: not with --cpu"
            );
            // One backend per memory limit, the device opened anew for each.
            let limits = match args.gpu.gpu_memory_limit.as_slice() {
                [] => vec![gpu.memory_limit],
                l => l.iter().map(|&b| (b != 0).then_some(b)).collect(),
            };
            let backend = |limit| {
                let gpu = GpuOptions {
                    memory_limit: limit,
                    ..gpu.clone()
                };
                select_backend(args.cpu, &gpu, &cpu)
            };
            let cpu_backend = || select_backend(true, &gpu, &cpu);
            super::bench_partition::run(p, &limits, &backend, &cpu_backend)
        }
        BenchWhat::Day(d) => {
            let limit = match args.gpu.gpu_memory_limit.as_slice() {
                [] => gpu.memory_limit,
                [l] => (*l != 0).then_some(*l),
                _ => anyhow::bail!("a day runs under one --gpu-memory-limit"),
            };
            let gpu = GpuOptions {
                memory_limit: limit,
                ..gpu.clone()
            };
            super::bench_day::run(d, &|| select_backend(args.cpu, &gpu, &cpu))
        }
        BenchWhat::Post(p) => {
            // The CPU only when asked for: without a GPU the device stage is skipped.
            let backend = if args.cpu {
                Ok(select_backend(true, &gpu, &cpu))
            } else {
                crate::gpu::try_backend(&gpu).map_err(|e| e.to_string())
            };
            super::bench_post::run(p, backend)
        }
        BenchWhat::Pipeline(p) => {
            let dir = args.param_dir.clone().unwrap_or_else(|| env.param_dir());
            super::bench_pipeline::run(p, &dir)
        }
        BenchWhat::Soak(s) => {
            let dir = args.param_dir.clone().unwrap_or_else(|| env.param_dir());
            super::bench_soak::run(s, &dir)
        }
        BenchWhat::Hostile(h) => {
            let dir = args.param_dir.clone().unwrap_or_else(|| env.param_dir());
            super::bench_hostile::run(h, &dir)
        }
        BenchWhat::Proof(ref what) => {
            let dir = filecoin_proofs_param_dir(&args, env)
                .unwrap_or_else(|| PathBuf::from(crate::srs::DEFAULT_PARAM_DIR));
            let backend = select_backend(args.cpu, &gpu, &cpu);
            proof_bench(what, &args, dir, backend)
        }
    }
}

struct Row {
    label: String,
    time: Duration,
    /// Its verification's share of `time` (cuzk's runs).
    verification: Duration,
    peak: u64,
    detail: String,
}

/// Our prover on `backend` against filecoin-proofs' on the same input. The reference runs
/// after our service is dropped, in a child process (`bench_reference`), so that each peak
/// RSS is the prover's own.
fn proof_bench(
    what: &ProveWhat,
    b: &BenchArgs,
    dir: PathBuf,
    backend: std::sync::Arc<dyn crate::prover::Backend>,
) -> anyhow::Result<()> {
    let request = request_of(what)?;
    let svc = ProvingService::new(dir.clone(), backend);
    let mut rows = Vec::new();
    for run in 0..=b.runs {
        let fallback_before = svc.pipeline().fallback_proved;
        reset_peak_rss();
        let start = Instant::now();
        let out = svc.prove(&request, &JobControl::new())?;
        let time = start.elapsed();
        let t = &out.timings;
        rows.push(Row {
            label: format!(
                "cuzk {} ({})",
                if run == 0 { "cold" } else { "warm" },
                out.backend
            ),
            time,
            verification: t.verification,
            peak: peak_rss(),
            detail: format!(
                "params {:.2}s synth {:.2}s prove {:.2}s verify {:.3}s (its verifier); \
                 fallback partitions {}",
                t.param_load.as_secs_f64(),
                t.synthesis.as_secs_f64(),
                t.proving.as_secs_f64(),
                t.verification.as_secs_f64(),
                svc.pipeline().fallback_proved - fallback_before
            ),
        });
    }
    drop(svc);
    let reference = super::bench_reference::measure(what, &dir)?;
    print_table(what, &rows, &reference);
    Ok(())
}

/// The rows, each with its ratio to the reference, and the reference's own row last.
fn print_table(what: &ProveWhat, rows: &[Row], reference: &ReferenceRun) {
    let (prove_call, verify_call) = (&reference.call, super::bench_reference::verifier(what));
    let (base, compared) = match reference.checked {
        Checked::Not => (
            reference.prove,
            "cuzk less its verification against the reference's prover: it could not verify",
        ),
        Checked::Inside | Checked::Apart(_) => (
            reference.total(),
            "both include proving and verifying the proof",
        ),
    };
    println!(
        "reference: filecoin-proofs' CPU prover (built without its GPU features), alone in a \
         process of its own; ratio = cuzk / reference, {compared}"
    );
    println!(
        "{:<34} {:>9} {:>7} {:>10}  detail",
        "run", "time", "ratio", "peak RSS"
    );
    let line = |label: &str, time: Duration, ratio: f64, peak: u64, detail: &str| {
        println!(
            "{:<34} {:>8.2}s {:>6.3}x {:>8.2}GB  {}",
            label,
            time.as_secs_f64(),
            ratio,
            peak as f64 / 1e9,
            detail
        );
    };
    let base = base.as_secs_f64().max(f64::MIN_POSITIVE);
    for r in rows {
        let ours = match reference.checked {
            Checked::Not => r.time.saturating_sub(r.verification),
            Checked::Inside | Checked::Apart(_) => r.time,
        };
        line(
            &r.label,
            r.time,
            ours.as_secs_f64() / base,
            r.peak,
            &r.detail,
        );
    }
    let detail = match reference.checked {
        Checked::Inside => format!("{prove_call}, which runs {verify_call} inside"),
        Checked::Apart(v) => format!(
            "{prove_call} {:.2}s + {verify_call} {:.3}s",
            reference.prove.as_secs_f64(),
            v.as_secs_f64()
        ),
        Checked::Not => format!(
            "{prove_call}; not verified ({verify_call} takes whole deadlines, this is one \
             partition of several)"
        ),
    };
    line(
        "filecoin-proofs (CPU, own process)",
        reference.total(),
        reference.total().as_secs_f64() / base,
        reference.peak,
        &detail,
    );
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;
    use std::path::Path;

    use clap::{CommandFactory, Parser};

    use super::super::bench_reference::child_args;
    use super::super::{Cli, Command, Environment};
    use super::*;

    fn bench_args(line: &[&str]) -> BenchArgs {
        match Cli::try_parse_from(line).expect("parses").command {
            Command::Bench(b) => *b,
            other => panic!("not a bench command: {other:?}"),
        }
    }

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn flags_fill_the_options_the_environment_started() {
        let env = Environment::default();
        let b = bench_args(&[
            "cuzk",
            "bench",
            "gpu",
            "--g1",
            "20",
            "--gpu-device",
            "1",
            "--msm-window-bits",
            "16",
            "--nvrtc-define",
            "CUZK_FP_INLINE,CUZK_ACC_MINB=5",
            "--staging-memory",
            "0",
            "--ntt-split",
            "10,10",
            "--trace",
            "--no-cpu-simd",
        ]);
        let gpu = b.gpu.apply(env.gpu.clone()).unwrap();
        assert_eq!(gpu.ordinal, 1);
        assert_eq!(gpu.msm.window_bits, Some(16));
        assert_eq!(gpu.nvrtc_defines, vec!["CUZK_FP_INLINE", "CUZK_ACC_MINB=5"]);
        assert_eq!(gpu.staging_bytes, 0);
        assert_eq!(gpu.ntt.split, vec![10, 10]);
        assert!(gpu.trace);
        let cpu = b.cpu_options.apply(env.cpu.clone()).unwrap();
        assert!(!cpu.simd);
        assert!(filecoin_proofs_param_dir(&b, &env).is_none());

        // No flags: the options cuzk started with, unchanged.
        let b = bench_args(&["cuzk", "bench", "msm"]);
        assert_eq!(b.gpu.apply(env.gpu.clone()).unwrap(), env.gpu);
        assert_eq!(b.cpu_options.apply(env.cpu.clone()).unwrap(), env.cpu);

        // Out of range is refused, not clamped silently.
        let b = bench_args(&["cuzk", "bench", "gpu", "--ntt-max-stages", "11"]);
        assert!(b.gpu.apply(env.gpu.clone()).is_err());
    }

    #[test]
    fn proof_benchmarks_point_filecoin_proofs_at_their_parameters() {
        let env = Environment {
            param_cache: Some("/data/zk/params".into()),
            ..Environment::default()
        };
        let b = bench_args(&[
            "cuzk",
            "bench",
            "porep",
            "--c1",
            "c1.json",
            "--miner-id",
            "1",
        ]);
        assert_eq!(
            filecoin_proofs_param_dir(&b, &env),
            Some(PathBuf::from("/data/zk/params"))
        );
        let b = bench_args(&[
            "cuzk",
            "bench",
            "--param-dir",
            "/p",
            "porep",
            "--c1",
            "c1.json",
            "--miner-id",
            "1",
        ]);
        assert_eq!(
            filecoin_proofs_param_dir(&b, &env),
            Some(PathBuf::from("/p"))
        );
    }

    #[test]
    fn hostile_flags_parse() {
        let argv = [
            "cuzk",
            "bench",
            "hostile",
            "--clients",
            "8",
            "--frames",
            "1000",
            "--proofs",
            "1",
        ];
        let cli = Cli::try_parse_from(argv).unwrap();
        let Command::Bench(b) = cli.command else {
            panic!("not bench")
        };
        let BenchWhat::Hostile(h) = b.what else {
            panic!("not hostile")
        };
        assert_eq!((h.clients, h.frames, h.proofs, h.seed), (8, 1000, 1, 1));
        assert!(!h.grpc);
        let cli =
            Cli::try_parse_from(["cuzk", "bench", "hostile", "--grpc", "--seconds", "5"]).unwrap();
        let Command::Bench(b) = cli.command else {
            panic!("not bench")
        };
        let BenchWhat::Hostile(h) = b.what else {
            panic!("not hostile")
        };
        assert!(h.grpc);
        assert_eq!(h.seconds, 5);
    }

    /// The flags parse beside `cuzk bench`'s global ones (a `--trace` here once collided with
    /// the GPU benchmark's).
    #[test]
    fn pipeline_flags_parse() {
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
        let cli = Cli::try_parse_from(argv).unwrap();
        let Command::Bench(b) = cli.command else {
            panic!("not bench")
        };
        let BenchWhat::Pipeline(p) = b.what else {
            panic!("not pipeline")
        };
        assert_eq!(p.jobs, 3);
        assert_eq!(p.trace_file.as_deref(), Some(Path::new("/t.json")));
        assert_eq!(p.daemon.set, ["proving.workers=2"]);
    }

    #[test]
    fn soak_flags_parse() {
        let argv = [
            "cuzk",
            "bench",
            "soak",
            "--proofs",
            "3",
            "--in-flight",
            "2",
            "--csv",
            "/c.csv",
            "--set",
            "proving.workers=2",
        ];
        let cli = Cli::try_parse_from(argv).unwrap();
        let Command::Bench(b) = cli.command else {
            panic!("not bench")
        };
        let BenchWhat::Soak(s) = b.what else {
            panic!("not soak")
        };
        assert_eq!((s.proofs, s.in_flight, s.winning_every), (3, 2, 10));
        assert_eq!(s.csv.as_deref(), Some(Path::new("/c.csv")));
        assert_eq!(s.daemon.set, ["proving.workers=2"]);
    }

    #[test]
    fn the_reference_child_is_asked_for_the_same_input() {
        let whats = [
            vec![
                "porep",
                "--c1",
                "c1.json",
                "--miner-id",
                "1000",
                "--sector-number",
                "7",
            ],
            vec!["porep", "--c1", "c1.json", "--miner-id", "1000"],
            vec!["snap", "--input", "snap.json"],
            vec!["window-post", "--input", "w.json"],
            vec!["winning-post", "--input", "win.json"],
        ];
        for what in whats {
            let mut line = vec!["cuzk", "bench", "--cpu"];
            line.extend(&what);
            let cli = Cli::try_parse_from(&line).expect("parses");
            let Command::Bench(b) = cli.command else {
                panic!("not bench")
            };
            let BenchWhat::Proof(ours) = &b.what else {
                panic!("not a proof")
            };
            let mut child: Vec<OsString> = vec!["cuzk".into()];
            child.extend(child_args(ours, Path::new("/p")));
            let cli = Cli::try_parse_from(&child).expect("the child's line parses");
            let Command::Bench(c) = cli.command else {
                panic!("not bench")
            };
            assert!(c.reference_only, "{what:?}");
            assert_eq!(c.param_dir.as_deref(), Some(Path::new("/p")));
            let BenchWhat::Proof(theirs) = &c.what else {
                panic!("not a proof")
            };
            assert_eq!(format!("{ours:?}"), format!("{theirs:?}"), "{what:?}");
        }
    }
}
