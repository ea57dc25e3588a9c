//! `cuzk bench partition`: one PoRep partition of any sector size — synthetic (random values
//! in the real shape) or from a C1 file — synthesized in parts on every core and, as the
//! reference in the same run, storage-proofs-porep's own circuit whole on one thread (the
//! per-constraint evaluation bellperson's prover does), with their digests compared; its host bytes per constraint; and its device
//! stage on parameters of the real section sizes made of random points (a synthetic proof is
//! never verified).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bellperson::groth16::{prepare_verifying_key, VerifyingKey};
use blstrs::{G1Affine, G2Affine, Scalar};
use ff::Field;
use rayon::prelude::*;
use sha2::{Digest, Sha256};

use super::bench_gpu::{random_g1, random_g2, repeat, TILE};
use super::rss::{peak_rss, reset_peak_rss, status_bytes};
use crate::gpu::bytes::bytes;
use crate::proofs::porep::{self, synthetic};
use crate::proofs::shapes::{format_sector_size, parse_sector_size};
use bellperson::groth16::Proof;
use blstrs::Bls12;

use crate::prover::{
    count_set, prove_with_randomness, prove_witness_with_randomness, Backend, PreparedSrs, Witness,
    WitnessPartition,
};
use crate::srs::{HostPoints, Srs};
use crate::synth::Synthesized;

/// Goals of issue 15 (H200 host: 16 cores, 128 GiB, one H200).
const GOAL_SYNTHESIS_32GIB_S: f64 = 1.5;
const GOAL_BYTES_PER_CONSTRAINT: f64 = 40.0;
/// Goal of issue 20: a 32 GiB partition's device work.
const GOAL_DEVICE_32GIB_S: f64 = 0.8;

/// Options of `cuzk bench partition`.
#[derive(clap::Args, Debug, Clone)]
pub struct PartitionBenchArgs {
    /// Sector size of the synthetic partition: 2KiB, 8MiB, 512MiB, 32GiB or 64GiB.
    #[arg(long, value_parser = parse_sector_size, default_value = "32GiB")]
    pub sector_size: u64,
    /// A synthetic partition: the real shape, random values (the default without `--c1`).
    #[arg(long, conflicts_with = "c1")]
    pub synthetic: bool,
    /// A real C1 output (JSON or lotus-bench's wrapper) instead of a synthetic partition.
    #[arg(long)]
    pub c1: Option<PathBuf>,
    /// Which partition.
    #[arg(long, default_value_t = 0)]
    pub partition: usize,
    /// Threads the parts are synthesized on [default: one per CPU].
    #[arg(long)]
    pub threads: Option<usize>,
    /// Skip the one-thread reference synthesis (about 100 s for a 32 GiB partition).
    #[arg(long)]
    pub no_reference: bool,
    /// Skip the device stage.
    #[arg(long)]
    pub no_device: bool,
    /// Skip the recorded shape's path (record the constraints once, then the witness alone
    /// and the evaluations as sparse products).
    #[arg(long)]
    pub no_shape: bool,
    /// Seed of the synthetic values.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Timed device runs after one warm-up.
    #[arg(long = "timed-runs", default_value_t = 2)]
    pub runs: usize,
    /// Then prove every partition of the synthetic sector through the stages (admission
    /// under the memory budget, synthesis in parts, the device queue): wall time, peak RSS.
    #[arg(long, conflicts_with = "c1")]
    pub sector: bool,
    /// The stages' memory budget for `--sector` [default: as cuzkd's, the host's memory
    /// less an eighth].
    #[arg(long, value_parser = crate::config::parse_size)]
    pub memory_budget: Option<u64>,
    /// After the runs under `--gpu-memory-limit`, the device stage again with no limit beside
    /// another process (`cuzk bench hold-gpu`) that holds all of the card's memory but each of
    /// these sizes, e.g. 22GiB,14.5GiB; proofs compared with the first run's.
    #[arg(long, value_delimiter = ',', value_parser = crate::config::parse_size)]
    pub beside_held: Vec<u64>,
    /// Then prove the partition once more on our CPU prover, with the first timed device
    /// run's randomness, and compare the two proofs byte for byte (the GPU against the CPU;
    /// at 32 GiB minutes on 16 cores, and the CPU's quotient holds another copy of A, B, C).
    #[arg(long, conflicts_with = "no_device")]
    pub against_cpu: bool,
}

/// Another process holding a GPU's memory (`cuzk bench hold-gpu`), killed when dropped.
struct Hog(std::process::Child);

impl Hog {
    /// Starts `cuzk bench hold-gpu --leave LEAVE` and waits until it holds the memory.
    fn start(leave: u64) -> anyhow::Result<Self> {
        use std::io::BufRead;
        use std::os::unix::process::CommandExt;
        use std::process::{Command, Stdio};
        let mut command = Command::new(std::env::current_exe()?);
        command
            .args(["bench", "hold-gpu", "--leave", &leave.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped());
        // SAFETY: runs in the forked child before exec; prctl(PR_SET_PDEATHSIG) is
        // async-signal-safe and changes only the child's own death signal, so that the holder
        // dies with this benchmark however it ends.
        unsafe {
            command.pre_exec(|| {
                nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                    .map_err(std::io::Error::from)
            });
        }
        let mut child = command.spawn()?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| anyhow::anyhow!("no stdout of the holder"))?;
        let mut line = String::new();
        std::io::BufReader::new(stdout).read_line(&mut line)?;
        let hog = Hog(child);
        anyhow::ensure!(line.starts_with("holding"), "the holder said {line:?}");
        println!("another process: {}", line.trim());
        Ok(hog)
    }
}

impl Drop for Hog {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Goals of issue 31 for the 32 GiB partition's device stage under a memory limit.
const GOAL_DEVICE_24GB_S: f64 = 2.5;
const GOAL_DEVICE_16GB_S: f64 = 3.0;

/// Runs the benchmark; `backend(limit)` opens the device (or the CPU) that proves the device
/// stage under each memory limit of `limits` in turn (`None`: no limit), the first limit's
/// proofs the reference of the others; the sector runs under the last.
pub fn run(
    args: PartitionBenchArgs,
    limits: &[Option<u64>],
    backend: &dyn Fn(Option<u64>) -> Arc<dyn Backend>,
    cpu: &dyn Fn() -> Arc<dyn Backend>,
) -> anyhow::Result<()> {
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let what = describe(&args)?;
    println!("{what}; parts on {threads} threads");
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()?;

    let (mut ours, split) = split_synthesis(&args, &pool, threads)?;
    let t_ref = if args.no_reference {
        None
    } else {
        Some(one_thread_synthesis(&args, &pool, &split.digest)?)
    };
    let (shape, recorded) = if args.no_shape {
        (None, None)
    } else {
        drop(ours);
        let (times, evaluated, recorded) = shape_path(&args, &pool, threads, &split.digest)?;
        ours = evaluated;
        (Some(times), Some(recorded))
    };
    let srs = (!args.no_device || args.sector).then(|| synthetic_srs_timed(&ours));
    // A run that fails is reported and the others go on (the sector too); the benchmark
    // fails at the end.
    let mut failed = Vec::new();
    let devices = match (&srs, args.no_device) {
        (Some(srs), false) => {
            let runs = DeviceRuns {
                args: &args,
                limits,
                backend,
                ours: &ours,
                recorded: recorded.as_ref(),
                srs,
            };
            runs.run(&mut failed)?
        }
        _ => Vec::new(),
    };
    if let (Some(srs), true) = (&srs, args.against_cpu) {
        if let Err(e) = against_cpu(&ours, srs.clone(), cpu(), &devices) {
            println!("the CPU prover against the device FAILED: {e:#}");
            failed.push("the CPU prover against the device".into());
        }
    }
    drop(ours);
    drop(recorded);
    let sector = match srs {
        Some(srs) if args.sector => {
            let limit = limits.last().copied().flatten();
            Some(sector(&args, srs, backend(limit), limit)?)
        }
        _ => None,
    };
    print_table(
        &args,
        split.time,
        t_ref,
        split.bytes_per_constraint,
        split.peak,
        &devices,
    );
    if let Some(t) = shape {
        t.print(&args, t_ref);
    }
    if let Some(s) = sector {
        s.print(&args);
    }
    anyhow::ensure!(
        failed.is_empty(),
        "device stages failed: {}",
        failed.join("; ")
    );
    Ok(())
}

/// The partition synthesized in `parts` parts with `code`'s circuit on `pool`, with its time.
fn synthesize(
    args: &PartitionBenchArgs,
    pool: &rayon::ThreadPool,
    parts: usize,
    code: porep::CircuitCode,
) -> anyhow::Result<(Synthesized, Duration)> {
    let start = Instant::now();
    let what = crate::synth::Recording::Evaluations;
    let r = pool.install(|| match &args.c1 {
        Some(path) => {
            let c1 = std::fs::read(path)?;
            Ok::<_, anyhow::Error>(porep::record_partition_by(
                &c1,
                args.partition,
                parts,
                what,
                code,
            )?)
        }
        None => Ok(synthetic::record_by(
            args.sector_size,
            args.partition,
            parts,
            args.seed,
            what,
            code,
        )?),
    })?;
    Ok((
        crate::pipeline::partitions::evaluations(r)?,
        start.elapsed(),
    ))
}

/// What the split synthesis measured.
struct Split {
    time: Duration,
    /// Peak RSS over the RSS before it, in bytes.
    peak: u64,
    /// Host bytes held per constraint.
    bytes_per_constraint: f64,
    digest: [u8; 32],
}

/// The split synthesis, on every thread of `pool`, printed with its census.
fn split_synthesis(
    args: &PartitionBenchArgs,
    pool: &rayon::ThreadPool,
    threads: usize,
) -> anyhow::Result<(Synthesized, Split)> {
    let base_rss = rss();
    reset_peak_rss();
    let (ours, t_ours) = synthesize(args, pool, threads, porep::CircuitCode::Ours)?;
    let peak = peak_rss().saturating_sub(base_rss);
    let n = ours.num_constraints();
    let bytes = host_bytes(&ours);
    let digest = digest(&ours);
    println!(
        "split synthesis: {:.2} s, {n} constraints, {} aux, {:.1} B/constraint held ({:.1} GiB), peak RSS +{:.1} GiB, digest {}",
        t_ours.as_secs_f64(),
        ours.aux.len(),
        bytes as f64 / n as f64,
        gib(bytes),
        gib(peak),
        hex::encode(&digest[..8]),
    );
    census(&ours);
    let split = Split {
        time: t_ours,
        peak,
        bytes_per_constraint: bytes as f64 / n as f64,
        digest,
    };
    Ok((ours, split))
}

/// The reference: storage-proofs-porep's own circuit, whole, on one thread; its time. Fails
/// where its digest is not `expected`, the split synthesis's.
fn one_thread_synthesis(
    args: &PartitionBenchArgs,
    pool: &rayon::ThreadPool,
    expected: &[u8; 32],
) -> anyhow::Result<Duration> {
    // The reference: storage-proofs-porep's own circuit, whole, on one thread.
    let (theirs, t_ref) = synthesize(args, pool, 1, porep::CircuitCode::Bellperson)?;
    let theirs = digest(&theirs);
    let same = *expected == theirs;
    println!(
        "one-thread synthesis (storage-proofs-porep's circuit): {:.2} s, digest {}: {}",
        t_ref.as_secs_f64(),
        hex::encode(&theirs[..8]),
        if same { "bit-identical" } else { "DIFFERENT" }
    );
    if !same {
        anyhow::bail!("split synthesis differs from one-thread synthesis");
    }
    Ok(t_ref)
}

/// Parameters of `s`'s section sizes made of random points, printed with their time.
fn synthetic_srs_timed(s: &Synthesized) -> Arc<Srs> {
    let start = Instant::now();
    let srs = Arc::new(synthetic_srs(s));
    println!(
        "synthetic parameters: {:.1} GiB of random points in {:.1} s",
        gib(srs.resident_bytes()),
        start.elapsed().as_secs_f64()
    );
    srs
}

/// The device stage's runs and what they share.
struct DeviceRuns<'a> {
    args: &'a PartitionBenchArgs,
    limits: &'a [Option<u64>],
    backend: &'a dyn Fn(Option<u64>) -> Arc<dyn Backend>,
    ours: &'a Synthesized,
    recorded: Option<&'a WitnessPartition>,
    srs: &'a Arc<Srs>,
}

impl DeviceRuns<'_> {
    /// The device stage under each limit, then with no limit beside a process holding the
    /// memory; each run's proofs checked against the first's. A run that fails is named in
    /// `failed` and the others go on.
    fn run(&self, failed: &mut Vec<String>) -> anyhow::Result<Vec<DeviceTimes>> {
        let args = self.args;
        let mut devices = Vec::new();
        let mut reference: Option<Vec<Proof<Bls12>>> = None;
        // The runs: under each limit, then with no limit beside a process holding the memory.
        let runs = self
            .limits
            .iter()
            .map(|&l| (l, None))
            .chain(args.beside_held.iter().map(|&f| (None, Some(f))));
        for (limit, held) in runs {
            let _hog = held.map(Hog::start).transpose()?;
            let b = (self.backend)(limit);
            let again = self.recorded.map(|w| WitnessPartition {
                witness: w.witness.clone(),
                shape: w.shape.clone(),
            });
            let srs = self.srs.clone();
            let mut d = match device_stage(self.ours, again, srs, b, args.runs, limit) {
                Ok(d) => d,
                Err(e) => {
                    let what = match held {
                        Some(f) => format!("beside a process leaving {f} bytes free"),
                        None => limit_name(limit),
                    };
                    println!("device stage under {what} FAILED: {e:#}");
                    failed.push(what);
                    continue;
                }
            };
            d.held = held;
            match &reference {
                None => reference = Some(d.proofs.clone()),
                Some(r) if *r == d.proofs => println!(
                    "device stage under {}: the same proofs as the first run's",
                    d.name()
                ),
                Some(_) => {
                    anyhow::bail!("the proofs under {} differ from the first run's", d.name())
                }
            }
            devices.push(d);
        }
        Ok(devices)
    }
}

/// The recorded shape's path through one partition.
struct ShapeTimes {
    record: Duration,
    witness: Duration,
    /// The witness of storage-proofs-porep's circuit on bellperson's gadgets, same threads.
    witness_gadgets: Duration,
    evaluate: Duration,
    constraints: usize,
    terms: usize,
    shape_bytes: u64,
    witness_bytes: u64,
}

impl ShapeTimes {
    fn print(&self, args: &PartitionBenchArgs, reference: Option<Duration>) {
        let is_32 = args.c1.is_none() && args.sector_size == 32 << 30;
        let goal = |g: String| if is_32 { g } else { "–".into() };
        let n = self.constraints as f64;
        let wall = self.witness + self.evaluate;
        let (r, ratio) = match reference {
            Some(r) => (
                format!("{:.2} s one thread", r.as_secs_f64()),
                format!("{:.3}", wall.as_secs_f64() / r.as_secs_f64()),
            ),
            None => ("–".into(), "–".into()),
        };
        println!("| recorded shape's path | ours | reference | ratio | goal (32 GiB) |");
        println!("|---|---|---|---|---|");
        println!(
            "| shape recording (once per parameter set) | {:.2} s | | | |",
            self.record.as_secs_f64()
        );
        println!(
            "| shape held (once per parameter set) | {:.2} GiB, {:.2} terms/constraint | | | |",
            gib(self.shape_bytes),
            self.terms as f64 / n
        );
        println!(
            "| witness | {:.2} s | {:.2} s on bellperson's gadgets | {:.3} | |",
            self.witness.as_secs_f64(),
            self.witness_gadgets.as_secs_f64(),
            self.witness.as_secs_f64() / self.witness_gadgets.as_secs_f64()
        );
        println!(
            "| synthesis wall on a GPU (witness; A, B, C made on the device) | {:.2} s | | | {} |",
            self.witness.as_secs_f64(),
            goal(format!("≤ {GOAL_SYNTHESIS_32GIB_S} s"))
        );
        println!(
            "| A, B, C from the shape | {:.2} s | | | |",
            self.evaluate.as_secs_f64()
        );
        println!(
            "| synthesis wall (witness + evaluation) | {:.2} s | {r} | {ratio} | {} |",
            wall.as_secs_f64(),
            goal(format!("≤ {GOAL_SYNTHESIS_32GIB_S} s"))
        );
        println!(
            "| host bytes per constraint until evaluated (witness) | {:.1} | | | ≤ {GOAL_BYTES_PER_CONSTRAINT} |",
            self.witness_bytes as f64 / n
        );
    }
}

/// Records the partition's shape, then its witness alone, then evaluates A, B and C from
/// both, checking the result against `expected` (split synthesis's digest).
fn shape_path(
    args: &PartitionBenchArgs,
    pool: &rayon::ThreadPool,
    threads: usize,
    expected: &[u8; 32],
) -> anyhow::Result<(ShapeTimes, Synthesized, WitnessPartition)> {
    use crate::synth::{Recorded, Recording};
    let record_by = |what, code| -> anyhow::Result<(Recorded, Duration)> {
        let start = Instant::now();
        let r = pool.install(|| match &args.c1 {
            Some(path) => {
                let c1 = std::fs::read(path)?;
                Ok::<_, anyhow::Error>(porep::record_partition_by(
                    &c1,
                    args.partition,
                    threads,
                    what,
                    code,
                )?)
            }
            None => Ok(synthetic::record_by(
                args.sector_size,
                args.partition,
                threads,
                args.seed,
                what,
                code,
            )?),
        })?;
        Ok((r, start.elapsed()))
    };
    let record = |what| record_by(what, porep::CircuitCode::Ours);
    let (Recorded::Shape(shape, first), t_record) = record(Recording::Shape)? else {
        anyhow::bail!("shape recording returned something else");
    };
    drop(first);
    println!(
        "shape recorded in parts: {:.2} s, {} terms, {} coefficients, {:.2} GiB",
        t_record.as_secs_f64(),
        shape.terms(),
        shape.coeffs().len(),
        gib(shape.host_bytes())
    );
    let (Recorded::Witness(w), t_witness) = record(Recording::Witness)? else {
        anyhow::bail!("witness synthesis returned something else");
    };
    let witness_bytes = w.host_bytes();
    println!(
        "witness in parts: {:.2} s, {:.1} B/constraint",
        t_witness.as_secs_f64(),
        witness_bytes as f64 / shape.num_constraints() as f64
    );
    let (Recorded::Witness(reference), t_gadgets) =
        record_by(Recording::Witness, porep::CircuitCode::Bellperson)?
    else {
        anyhow::bail!("witness synthesis returned something else");
    };
    let same = reference == w;
    drop(reference);
    println!(
        "witness on bellperson's gadgets (storage-proofs-porep's circuit): {:.2} s: {}",
        t_gadgets.as_secs_f64(),
        if same { "bit-identical" } else { "DIFFERENT" }
    );
    if !same {
        anyhow::bail!("our witness differs from storage-proofs-porep's");
    }
    let start = Instant::now();
    let shape = Arc::new(shape);
    let recorded = WitnessPartition::new(w.clone(), shape.clone())?;
    let evaluated = pool.install(|| shape.synthesized(w))?;
    let t_evaluate = start.elapsed();
    let same = digest(&evaluated) == *expected;
    println!(
        "A, B, C evaluated from the shape: {:.2} s: {}",
        t_evaluate.as_secs_f64(),
        if same { "bit-identical" } else { "DIFFERENT" }
    );
    if !same {
        anyhow::bail!("the shape's evaluation differs from split synthesis");
    }
    let times = ShapeTimes {
        record: t_record,
        witness: t_witness,
        witness_gadgets: t_gadgets,
        evaluate: t_evaluate,
        constraints: shape.num_constraints(),
        terms: shape.terms(),
        shape_bytes: shape.host_bytes(),
        witness_bytes,
    };
    Ok((times, evaluated, recorded))
}

/// A whole synthetic sector through the stages.
struct SectorRun {
    /// The device's memory limit, and its budget and peak.
    limit: Option<u64>,
    memory: Option<crate::prover::DeviceMemory>,
    /// The first sector's wall time (it records the shape, where shapes are used).
    first: Duration,
    /// The second's.
    wall: Duration,
    params_upload: Duration,
    budget: u64,
    params_bytes: u64,
    peak_rss: u64,
    stats: crate::pipeline::PipelineStats,
}

impl SectorRun {
    fn print(&self, args: &PartitionBenchArgs) {
        let s = &self.stats;
        let proved = s.partitions_proved.max(1) as f64;
        println!(
            "whole synthetic {} sector through the stages under {} (budget {:.1} GiB, parameters {:.1} GiB on the host, uploaded in {:.1} s):",
            format_sector_size(args.sector_size),
            limit_name(self.limit),
            gib(self.budget),
            gib(self.params_bytes),
            self.params_upload.as_secs_f64()
        );
        let is_32 = args.sector_size == 32 << 30;
        let goal = |g: &str| if is_32 { g.to_string() } else { "–".into() };
        println!("| measure | ours | goal (32 GiB) |");
        println!("|---|---|---|");
        println!(
            "| first sector wall (records the circuit's shape) | {:.1} s | |",
            self.first.as_secs_f64()
        );
        let wall_goal = match self.limit {
            Some(l) if l <= 16 << 30 => "≤ 35 s (16 GB)",
            Some(_) => "–",
            None => "≤ 15 s",
        };
        println!(
            "| next sector wall | {:.1} s | {} |",
            self.wall.as_secs_f64(),
            goal(wall_goal)
        );
        if let Some(m) = self.memory {
            println!(
                "| device memory: peak / budget | {:.2} / {:.2} GiB | |",
                gib(m.peak),
                gib(m.budget)
            );
        }
        println!(
            "| peak RSS (parameters included) | {:.1} GiB | {} |",
            gib(self.peak_rss),
            goal("< 100 GiB")
        );
        println!(
            "| per partition, both sectors: synthesis / device wait / device | {:.1} / {:.1} / {:.2} s | |",
            s.synthesis_time.as_secs_f64() / proved,
            s.device_wait.as_secs_f64() / proved,
            s.device_time.as_secs_f64() / proved
        );
        println!(
            "| device busy, both sectors | {:.0} % | |",
            100.0 * s.device_busy.as_secs_f64() / (self.first + self.wall).as_secs_f64().max(1e-9)
        );
    }
}

fn sector(
    args: &PartitionBenchArgs,
    srs: Arc<Srs>,
    backend: Arc<dyn Backend>,
    limit: Option<u64>,
) -> anyhow::Result<SectorRun> {
    use crate::pipeline::{JobControl, PipelineOptions, ProvingService};
    let budget = stages_budget(args.memory_budget)?;
    let options = PipelineOptions {
        memory_budget: budget,
        ..PipelineOptions::default()
    };
    let svc =
        ProvingService::with_pipeline(PathBuf::from("/nonexistent"), backend.clone(), &options)?;
    let id = synthetic::params_id(args.sector_size);
    let params_bytes = srs.resident_bytes();
    let params_upload = svc.preload_built(&id, srs)?;
    reset_peak_rss();
    let start = Instant::now();
    synthetic::prove_sector(&svc, args.sector_size, args.seed, &JobControl::new())?;
    let first = start.elapsed();
    // A second sector finds the circuit's shape recorded, as every sector after a daemon's
    // first does.
    let start = Instant::now();
    synthetic::prove_sector(&svc, args.sector_size, args.seed + 1, &JobControl::new())?;
    Ok(SectorRun {
        limit,
        memory: backend.memory(),
        first,
        wall: start.elapsed(),
        params_upload,
        budget,
        params_bytes,
        peak_rss: peak_rss(),
        stats: svc.pipeline(),
    })
}

/// The stages' memory budget: `given`, else cuzkd's default (the host's memory less an
/// eighth).
pub(super) fn stages_budget(given: Option<u64>) -> anyhow::Result<u64> {
    match given {
        Some(b) => Ok(b),
        None => crate::daemon::host::memory()
            .map(crate::daemon::host::budget_from)
            .ok_or_else(|| anyhow::anyhow!("cannot read the host's memory: pass --memory-budget")),
    }
}

fn describe(args: &PartitionBenchArgs) -> anyhow::Result<String> {
    Ok(match &args.c1 {
        Some(path) => format!("partition {} of {}", args.partition, path.display()),
        None => {
            let s = synthetic::shape(args.sector_size)?;
            format!(
                "synthetic {} PoRep partition {} of {} ({} challenges, {} layers, {} nodes)",
                format_sector_size(args.sector_size),
                args.partition,
                s.partitions,
                s.challenges,
                s.layers,
                s.nodes
            )
        }
    })
}

impl DeviceTimes {
    /// How the run was limited, as the tables print it.
    fn name(&self) -> String {
        match self.held {
            Some(free) => format!(
                "no limit, another process holding all but {}",
                crate::config::format_size(free)
            ),
            None => limit_name(self.limit),
        }
    }
}

/// A memory limit as the tables print it.
fn limit_name(limit: Option<u64>) -> String {
    match limit {
        None => "no limit".into(),
        Some(b) => format!("a {} limit", crate::config::format_size(b)),
    }
}

/// Device stage times: the set's upload (prepare), then per timed run the quotient with the
/// H MSM and the witness MSMs.
struct DeviceTimes {
    backend: String,
    limit: Option<u64>,
    /// Bytes another process left free on the card, where one held the rest.
    held: Option<u64>,
    /// The device's memory plan for the set, and its budget and peak over the runs.
    plan: Option<String>,
    memory: Option<crate::prover::DeviceMemory>,
    /// The proofs of the timed runs from host evaluations (fixed randomness per run).
    proofs: Vec<Proof<Bls12>>,
    prepare: Duration,
    device_bytes: u64,
    quotient: Vec<f64>,
    msm: Vec<f64>,
    /// The same from the recorded shape (A, B, C evaluated on the device).
    shaped: Option<(Vec<f64>, Vec<f64>)>,
    /// Both sums from the recorded shape, the assignment sent once (as the prover does) and
    /// sent twice (apart: the H sum, then the witness sums), alternating: total seconds.
    once_twice: Option<(Vec<f64>, Vec<f64>)>,
}

fn device_stage(
    s: &Synthesized,
    recorded: Option<WitnessPartition>,
    srs: Arc<Srs>,
    backend: Arc<dyn Backend>,
    runs: usize,
    limit: Option<u64>,
) -> anyhow::Result<DeviceTimes> {
    let start = Instant::now();
    let prepared = backend.prepare(srs)?;
    let prepare = start.elapsed();
    let plan = prepared.memory_plan();
    println!(
        "device stage under {}: {}",
        limit_name(limit),
        plan.as_deref().unwrap_or("no device plan (CPU)")
    );
    backend.reset_memory_peak();
    let mut out = DeviceTimes {
        backend: backend.name(),
        limit,
        held: None,
        plan,
        memory: None,
        proofs: Vec::new(),
        prepare,
        device_bytes: prepared.device_bytes(),
        quotient: Vec::new(),
        msm: Vec::new(),
        shaped: None,
        once_twice: None,
    };
    let mut proofs = Vec::new();
    for run in 0..=runs {
        let (r, t) = (Scalar::from(run as u64 + 2), Scalar::from(run as u64 + 3));
        let (proof, times) = prove_with_randomness(prepared.as_ref(), s.clone(), r, t)?;
        proofs.push(proof);
        println!(
            "device run {run}{}: quotient + H {:.3} s, witness MSMs {:.3} s",
            if run == 0 { " (warm-up)" } else { "" },
            times.quotient.as_secs_f64(),
            times.msm.as_secs_f64()
        );
        if run > 0 {
            out.quotient.push(times.quotient.as_secs_f64());
            out.msm.push(times.msm.as_secs_f64());
        }
    }
    out.proofs = proofs.clone();
    out.memory = backend.memory();
    let Some(w) = recorded.filter(|_| prepared.evaluates_shapes()) else {
        return Ok(out);
    };
    let mut shaped = (Vec::new(), Vec::new());
    for (run, theirs) in proofs.iter().enumerate() {
        let (r, t) = (Scalar::from(run as u64 + 2), Scalar::from(run as u64 + 3));
        let again = WitnessPartition {
            witness: w.witness.clone(),
            shape: w.shape.clone(),
        };
        let (proof, times) = prove_witness_with_randomness(prepared.as_ref(), again, r, t)?;
        let same = proof == *theirs;
        println!(
            "device run {run} from the shape{}: A, B, C on the device + quotient + H {:.3} s, witness MSMs {:.3} s, proof {}",
            if run == 0 { " (warm-up)" } else { "" },
            times.quotient.as_secs_f64(),
            times.msm.as_secs_f64(),
            if same { "identical" } else { "DIFFERENT" }
        );
        if !same {
            anyhow::bail!("the proof from the shape differs from the proof from the evaluations");
        }
        if run > 0 {
            shaped.0.push(times.quotient.as_secs_f64());
            shaped.1.push(times.msm.as_secs_f64());
        }
    }
    out.shaped = Some(shaped);
    out.once_twice = Some(once_or_twice(prepared.as_ref(), &w, runs)?);
    out.memory = backend.memory();
    Ok(out)
}

/// `s` proved on the CPU backend `cpu` with the randomness of the first device run's first
/// timed proof, compared byte for byte with that proof (the warm-up's where no run was
/// timed). Fails where they differ, or where no device run made a proof on a GPU.
fn against_cpu(
    s: &Synthesized,
    srs: Arc<Srs>,
    cpu: Arc<dyn Backend>,
    devices: &[DeviceTimes],
) -> anyhow::Result<()> {
    let first = devices
        .first()
        .ok_or_else(|| anyhow::anyhow!("--against-cpu: no device run made a proof"))?;
    anyhow::ensure!(
        first.memory.is_some(),
        "--against-cpu: the device runs were on the CPU ({}), so there is nothing to compare",
        first.backend
    );
    let run = usize::from(first.proofs.len() > 1);
    let theirs = &first.proofs[run];
    let (r, t) = (Scalar::from(run as u64 + 2), Scalar::from(run as u64 + 3));
    let prepared = cpu.prepare(srs)?;
    let start = Instant::now();
    let (proof, times) = prove_with_randomness(prepared.as_ref(), s.clone(), r, t)?;
    let same = proof == *theirs;
    println!(
        "CPU prover ({}), run {run}'s randomness: {:.1} s (quotient + H {:.1} s, witness MSMs {:.1} s), proof {} the device's ({})",
        cpu.name(),
        start.elapsed().as_secs_f64(),
        times.quotient.as_secs_f64(),
        times.msm.as_secs_f64(),
        if same { "byte for byte" } else { "DIFFERENT from" },
        first.backend
    );
    anyhow::ensure!(same, "the CPU prover's proof differs from the device's");
    Ok(())
}

/// The sums of `w` from its shape with the assignment sent to the device once
/// ([`PreparedSrs::sums_shaped`]) and twice (its default: [`PreparedSrs::h_sum_shaped`], then
/// [`PreparedSrs::witness_sums`]), alternating after a warm-up of each; checks both give the
/// same sums.
fn once_or_twice(
    prepared: &dyn PreparedSrs,
    w: &WitnessPartition,
    runs: usize,
) -> anyhow::Result<(Vec<f64>, Vec<f64>)> {
    let witness = || Witness {
        input: w.witness.input.clone(),
        aux: w.witness.aux.clone().into(),
        a_aux_density: w.shape.a_aux_density.clone(),
        b_input_density: w.shape.b_input_density.clone(),
        b_aux_density: w.shape.b_aux_density.clone(),
        b_in: count_set(&w.shape.b_input_density),
    };
    let (mut once, mut twice) = (Vec::new(), Vec::new());
    for run in 0..=runs {
        // The copies are made (and dropped) outside the timed spans: 4 GiB at 32 GiB.
        let (w1, w2) = (witness(), witness());
        let start = Instant::now();
        let joint = prepared.sums_shaped(&w.shape, w1)?;
        let t_once = start.elapsed().as_secs_f64();
        let h = prepared.h_sum_shaped(&w.shape, &w2.input, &w2.aux)?;
        let apart = prepared.witness_sums(w2)?;
        let t_twice = start.elapsed().as_secs_f64() - t_once;
        let same = joint.h == h && joint.witness == apart;
        println!(
            "sums from the shape, run {run}{}: assignment sent once {t_once:.3} s (H {:.3} s), twice {t_twice:.3} s: {}",
            if run == 0 { " (warm-up)" } else { "" },
            joint.h_done.as_secs_f64(),
            if same { "same sums" } else { "DIFFERENT" }
        );
        if !same {
            anyhow::bail!("the sums with the assignment sent once differ from those sent twice");
        }
        if run > 0 {
            once.push(t_once);
            twice.push(t_twice);
        }
    }
    Ok((once, twice))
}

/// Parameters of the sections `s` needs, made of random points tiled from a few thousand
/// (an MSM's time does not depend on which points it adds).
pub(super) fn synthetic_srs(s: &Synthesized) -> Srs {
    srs_of(&Sections::of(s))
}

/// The lengths of a circuit's parameter sections, from what decides them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Sections {
    /// Constraints, one per input included.
    pub constraints: usize,
    /// Inputs, ONE included.
    pub inputs: usize,
    /// Aux variables.
    pub aux: usize,
    /// Aux variables in A (set flags of the A aux density).
    pub a_aux: usize,
    /// Variables in B: inputs and aux.
    pub b: usize,
}

impl Sections {
    /// The sections of a synthesized circuit.
    pub fn of(s: &Synthesized) -> Self {
        Sections {
            constraints: s.num_constraints(),
            inputs: s.input.len(),
            aux: s.aux.len(),
            a_aux: count_set(&s.a_aux_density),
            b: count_set(&s.b_input_density) + count_set(&s.b_aux_density),
        }
    }

    /// The H query's points: the domain less one.
    fn h(&self) -> usize {
        self.constraints.next_power_of_two().max(2) - 1
    }

    /// Host bytes of parameters of these sections (affine points: 96 bytes in G1, 192 in G2).
    pub fn bytes(&self) -> u64 {
        let g1 = self.h() + self.aux + self.inputs + self.a_aux + self.b + self.inputs;
        (g1 * std::mem::size_of::<blstrs::G1Affine>()
            + self.b * std::mem::size_of::<blstrs::G2Affine>()) as u64
    }
}

/// Parameters of `sec`, made of random points tiled from a few thousand. Their host copies
/// can be released once the devices hold them, as a parameter file's can: they are tiled again
/// where they are needed after all.
pub(super) fn srs_of(sec: &Sections) -> Srs {
    let g1: Arc<[G1Affine]> = random_g1(TILE, 11).into();
    let g2: Arc<[G2Affine]> = random_g2(TILE / 8, 12).into();
    let tiled1 = |n: usize, shift: usize| repeat(&g1[shift..], n);
    let rebuildable1 = |n: usize, shift: usize| {
        let g1 = g1.clone();
        HostPoints::rebuildable(move || repeat(&g1[shift..], n))
    };
    let vk = VerifyingKey {
        alpha_g1: g1[0],
        beta_g1: g1[1],
        beta_g2: g2[0],
        gamma_g2: g2[1],
        delta_g1: g1[2],
        delta_g2: g2[2],
        ic: tiled1(sec.inputs, 5),
    };
    let pvk = prepare_verifying_key(&vk);
    Srs {
        path: PathBuf::from("synthetic"),
        vk,
        pvk,
        h: rebuildable1(sec.h(), 1),
        l: rebuildable1(sec.aux, 2),
        a: rebuildable1(sec.inputs + sec.a_aux, 3),
        b_g1: rebuildable1(sec.b, 4),
        b_g2: {
            let (g2, n) = (g2.clone(), sec.b);
            HostPoints::rebuildable(move || repeat(&g2, n))
        },
        file_len: 0,
        load_time: Duration::ZERO,
    }
}

/// How many of each vector's values are 0, 1, another value below 2^32, or larger: what a
/// compact in-flight encoding of the partition could save.
fn census(s: &Synthesized) {
    let small = |v: &Scalar| {
        let b = v.to_bytes_le();
        b[4..].iter().all(|&x| x == 0)
    };
    for (name, v) in [("a", &s.a), ("b", &s.b), ("c", &s.c), ("aux", &s.aux)] {
        let (zero, one, short) = v
            .par_iter()
            .map(|x| {
                if bool::from(x.is_zero()) {
                    (1usize, 0usize, 0usize)
                } else if *x == Scalar::ONE {
                    (0, 1, 0)
                } else if small(x) {
                    (0, 0, 1)
                } else {
                    (0, 0, 0)
                }
            })
            .reduce(|| (0, 0, 0), |a, b| (a.0 + b.0, a.1 + b.1, a.2 + b.2));
        let pct = |k: usize| 100.0 * k as f64 / v.len().max(1) as f64;
        println!(
            "values of {name}: {:.1} % zero, {:.1} % one, {:.1} % other < 2^32, {:.1} % larger",
            pct(zero),
            pct(one),
            pct(short),
            pct(v.len() - zero - one - short)
        );
    }
}

/// Host bytes a synthesized partition holds: 32 per field element, one per density flag.
pub(super) fn host_bytes(s: &Synthesized) -> u64 {
    let scalars = s.a.len() + s.b.len() + s.c.len() + s.aux.len() + s.input.len();
    let flags = s.a_aux_density.len() + s.b_aux_density.len() + s.b_input_density.len();
    (scalars * std::mem::size_of::<Scalar>() + flags) as u64
}

/// SHA-256 over every vector of `s` (chunks hashed in parallel, then the chunk hashes).
fn digest(s: &Synthesized) -> [u8; 32] {
    const CHUNK: usize = 1 << 20;
    let scalars = |v: &[Scalar]| -> Vec<[u8; 32]> {
        v.par_chunks(CHUNK)
            .map(|c| Sha256::digest(bytes(c)).into())
            .collect()
    };
    let flags = |v: &[bool]| -> [u8; 32] {
        let bytes: Vec<u8> = v.iter().map(|&f| u8::from(f)).collect();
        Sha256::digest(&bytes).into()
    };
    let mut h = Sha256::new();
    for v in [&s.a, &s.b, &s.c, &s.input, &s.aux] {
        h.update((v.len() as u64).to_le_bytes());
        for c in scalars(v) {
            h.update(c);
        }
    }
    for v in [&s.a_aux_density, &s.b_aux_density, &s.b_input_density] {
        h.update((v.len() as u64).to_le_bytes());
        h.update(flags(v));
    }
    h.finalize().into()
}

/// The resident set now (`VmRSS`), in bytes.
fn rss() -> u64 {
    status_bytes("self", "VmRSS:").unwrap_or(0)
}

fn gib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 30) as f64
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s.get(s.len() / 2).copied().unwrap_or(f64::NAN)
}

fn print_table(
    args: &PartitionBenchArgs,
    ours: Duration,
    reference: Option<Duration>,
    bytes_per_constraint: f64,
    peak: u64,
    devices: &[DeviceTimes],
) {
    let is_32 = args.c1.is_none() && args.sector_size == 32 << 30;
    let goal = |g: f64| {
        if is_32 {
            format!("≤ {g} s")
        } else {
            "–".into()
        }
    };
    println!("| measure | ours | reference | ratio | goal (32 GiB) |");
    println!("|---|---|---|---|---|");
    let (r, ratio) = match reference {
        Some(r) => (
            format!("{:.2} s one thread", r.as_secs_f64()),
            format!("{:.3}", ours.as_secs_f64() / r.as_secs_f64()),
        ),
        None => ("–".into(), "–".into()),
    };
    println!(
        "| synthesis wall | {:.2} s | {r} | {ratio} | {} |",
        ours.as_secs_f64(),
        goal(GOAL_SYNTHESIS_32GIB_S)
    );
    println!(
        "| host bytes per constraint | {bytes_per_constraint:.1} | | | ≤ {GOAL_BYTES_PER_CONSTRAINT} |"
    );
    println!("| synthesis peak RSS | {:.1} GiB | | | |", gib(peak));
    for d in devices {
        let goal = |g: f64| match d.limit.or(d.held) {
            None => goal(g),
            Some(l) if is_32 && l <= 16 << 30 => format!("≤ {GOAL_DEVICE_16GB_S} s (16 GB)"),
            Some(l) if is_32 && l <= 24 << 30 => format!("≤ {GOAL_DEVICE_24GB_S} s (24 GB)"),
            Some(_) => "–".into(),
        };
        println!("| **under {}** | | | | |", d.name());
        if let Some(p) = &d.plan {
            println!("| device memory plan | {p} | | | |");
        }
        if let Some(m) = d.memory {
            println!(
                "| device memory: peak / budget | {:.2} / {:.2} GiB | | | |",
                gib(m.peak),
                gib(m.budget)
            );
        }
        let (q, m) = (median(&d.quotient), median(&d.msm));
        println!(
            "| device: parameters upload | {:.2} s | | | |",
            d.prepare.as_secs_f64()
        );
        println!("| device: quotient + H MSM | {q:.3} s | | | |");
        println!("| device: L, A, B G1, B G2 MSMs | {m:.3} s | | | |");
        println!(
            "| device stage ({}) | {:.3} s | | | {} |",
            d.backend,
            q + m,
            goal(GOAL_DEVICE_32GIB_S)
        );
        println!(
            "| device memory held (parameters) | {:.1} GiB | | | |",
            gib(d.device_bytes)
        );
        if let Some((q, m)) = &d.shaped {
            let (q, m) = (median(q), median(m));
            println!("| device from the shape: A, B, C + quotient + H MSM | {q:.3} s | | | |");
            println!(
                "| device stage from the shape (assignment uploaded, A, B, C on the device) | {:.3} s | | | {} |",
                q + m,
                goal(GOAL_DEVICE_32GIB_S)
            );
        }
        if let Some((once, twice)) = &d.once_twice {
            let (once, twice) = (median(once), median(twice));
            println!(
                "| sums from the shape: assignment sent once / twice | {once:.3} s | {twice:.3} s | {:.3} | |",
                once / twice
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_digest_sees_every_vector() {
        let s = Synthesized {
            a: vec![Scalar::ONE; 3],
            b: vec![Scalar::ZERO; 3],
            c: vec![Scalar::ZERO; 3],
            input: vec![Scalar::ONE],
            aux: vec![Scalar::ONE, Scalar::ZERO],
            a_aux_density: vec![true, false],
            b_input_density: vec![true],
            b_aux_density: vec![false, false],
        };
        let d = digest(&s);
        let mut t = s.clone();
        t.b_aux_density[1] = true;
        assert_ne!(digest(&t), d);
        let mut t = s.clone();
        t.c[2] = Scalar::ONE;
        assert_ne!(digest(&t), d);
        assert_eq!(digest(&s.clone()), d);
        assert_eq!(host_bytes(&s), 12 * 32 + 5);
    }
}
