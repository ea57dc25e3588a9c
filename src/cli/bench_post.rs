//! `cuzk bench post`: one WinningPoSt or WindowPoSt partition of the real shape at any sector
//! size, synthetic (random values in the real shape, `proofs::post::synthetic`): its
//! constraint count, synthesis time and host bytes, and its device stage on parameters of the
//! real section sizes made of random points (a synthetic proof is never verified). A whole
//! WindowPoSt partition (about 130 M constraints) may not fit a small host: `--sectors`
//! synthesizes a prefix of its sector slots, and the whole partition's time and bytes are
//! scaled from it by constraints (the slots are identical sub-circuits; the whole count is
//! counted exactly, on the blank circuit).

use std::sync::Arc;
use std::time::{Duration, Instant};

use blstrs::Scalar;

use super::bench_partition::{host_bytes, synthetic_srs};
use super::rss::{peak_rss, reset_peak_rss, status_bytes};
use crate::proofs::post::synthetic;
use crate::proofs::shapes::{format_sector_size, parse_sector_size};
use crate::proofs::ProofKind;
use crate::prover::{prove_with_randomness, Backend};
use crate::synth::Recording;

/// Options of `cuzk bench post`.
#[derive(clap::Args, Debug, Clone)]
pub struct PostBenchArgs {
    /// winning-post or window-post.
    #[arg(long)]
    pub kind: ProofKind,
    /// Sector size: 2KiB, 8MiB, 512MiB, 32GiB or 64GiB.
    #[arg(long, value_parser = parse_sector_size, default_value = "32GiB")]
    pub sector_size: u64,
    /// A synthetic partition: the real shape, random values (the only kind this benchmark
    /// runs; real PoSt inputs are benchmarked by `cuzk bench winning-post|window-post`).
    #[arg(long)]
    pub synthetic: bool,
    /// Synthesize the first N sector slots of the partition only [default: all of them].
    #[arg(long)]
    pub sectors: Option<usize>,
    /// Seed of the synthetic values.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Timed device runs after one warm-up.
    #[arg(long = "timed-runs", default_value_t = 2)]
    pub runs: usize,
    /// Skip the device stage.
    #[arg(long)]
    pub no_device: bool,
    /// Also time the witness alone, whole on one thread and in runs of sectors on this
    /// machine's threads (a whole 32 GiB WindowPoSt partition's whole witness takes minutes).
    #[arg(long)]
    pub witness_runs: bool,
}

/// Runs the benchmark; the device stage on `backend`, or reported as skipped with its error
/// where there is none (no GPU).
pub fn run(args: PostBenchArgs, backend: Result<Arc<dyn Backend>, String>) -> anyhow::Result<()> {
    anyhow::ensure!(
        matches!(args.kind, ProofKind::WinningPoSt | ProofKind::WindowPoSt),
        "--kind is winning-post or window-post"
    );
    let shape = synthetic::shape(args.kind, args.sector_size)?;
    let slots = args.sectors.unwrap_or(shape.sectors);
    println!(
        "synthetic {} {} partition: {slots} of {} sector slots, {} challenge(s) each, paths of arities {:?}",
        format_sector_size(args.sector_size),
        args.kind,
        shape.sectors,
        shape.challenges,
        shape.arities
    );
    let start = Instant::now();
    let whole = synthetic::count_constraints(args.kind, args.sector_size, None)?;
    println!(
        "whole partition: {whole} constraints, input constraints included (counted from one and two slots of the blank circuit in {:.1} s)",
        start.elapsed().as_secs_f64()
    );
    if args.witness_runs {
        witness_runs(&args, slots)?;
    }
    let base = status_bytes("self", "VmRSS:").unwrap_or(0);
    reset_peak_rss();
    let start = Instant::now();
    let s = synthetic::synthesize(args.kind, args.sector_size, Some(slots), args.seed)?;
    let took = start.elapsed();
    let peak = peak_rss().saturating_sub(base);
    let n = s.num_constraints();
    let bytes = host_bytes(&s);
    println!(
        "synthesis with the evaluations, whole (storage-proofs-post's own groups of sectors on this machine's threads, as a critical partition is synthesized): {:.2} s, {n} constraints, {} aux, {} inputs, {:.1} MiB held ({:.1} B/constraint), peak RSS +{:.1} MiB",
        took.as_secs_f64(),
        s.aux.len(),
        s.input.len(),
        mib(bytes),
        bytes as f64 / n as f64,
        mib(peak)
    );
    if slots < shape.sectors {
        let scale = whole as f64 / n as f64;
        println!(
            "the whole partition, scaled by constraints ({scale:.1}x): synthesis about {:.0} s, about {:.1} GiB held",
            took.as_secs_f64() * scale,
            gib(bytes) * scale
        );
    }
    if args.no_device {
        println!("device stage: skipped (--no-device)");
        return Ok(());
    }
    match backend {
        Ok(b) => device_stage(&args, s, b, slots < shape.sectors),
        Err(why) => {
            println!("device stage: skipped (no GPU: {why})");
            Ok(())
        }
    }
}

/// The witness alone, as the stages synthesize a non-critical partition against its
/// recorded shape: whole on one thread, then in runs of its sectors, one per thread of the
/// current pool (the stages cut it into `proving.partition_threads` runs, one per CPU by
/// default).
fn witness_runs(args: &PostBenchArgs, slots: usize) -> anyhow::Result<()> {
    let (kind, size, seed) = (args.kind, args.sector_size, args.seed);
    let threads = rayon::current_num_threads();
    let mut took = [0.0; 2];
    for (t, parts) in took.iter_mut().zip([1, threads]) {
        let start = Instant::now();
        synthetic::record_in_parts(kind, size, Some(slots), seed, parts, Recording::Witness)?;
        *t = start.elapsed().as_secs_f64();
    }
    println!(
        "the witness alone (against a recorded shape): whole on one thread {:.2} s; in {} runs of sectors on {threads} threads {:.2} s ({:.2}x)",
        took[0],
        threads.min(slots),
        took[1],
        took[0] / took[1].max(1e-9)
    );
    Ok(())
}

/// The partition proved on `backend` with parameters of its section sizes made of random
/// points: one warm-up, then the timed runs.
fn device_stage(
    args: &PostBenchArgs,
    s: crate::synth::Synthesized,
    backend: Arc<dyn Backend>,
    prefix: bool,
) -> anyhow::Result<()> {
    let start = Instant::now();
    let srs = Arc::new(synthetic_srs(&s));
    println!(
        "synthetic parameters: {:.1} GiB of random points in {:.1} s",
        gib(srs.resident_bytes()),
        start.elapsed().as_secs_f64()
    );
    let start = Instant::now();
    let prepared = backend.prepare(srs)?;
    println!(
        "device stage on {}: parameters prepared in {:.1} s{}",
        backend.name(),
        start.elapsed().as_secs_f64(),
        if prefix {
            " (the prefix's sections, not the whole partition's)"
        } else {
            ""
        }
    );
    let mut times: Vec<Duration> = Vec::new();
    for run in 0..=args.runs {
        let (r, t) = (Scalar::from(run as u64 + 2), Scalar::from(run as u64 + 3));
        let start = Instant::now();
        let (_proof, parts) = prove_with_randomness(prepared.as_ref(), s.clone(), r, t)?;
        let total = start.elapsed();
        println!(
            "device run {run}{}: {:.3} s (quotient + H {:.3} s, witness MSMs {:.3} s)",
            if run == 0 { " (warm-up)" } else { "" },
            total.as_secs_f64(),
            parts.quotient.as_secs_f64(),
            parts.msm.as_secs_f64()
        );
        if run > 0 {
            times.push(total);
        }
    }
    times.sort();
    if let Some(median) = times.get(times.len() / 2) {
        println!("device stage median: {:.3} s", median.as_secs_f64());
    }
    Ok(())
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 20) as f64
}

fn gib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 30) as f64
}
