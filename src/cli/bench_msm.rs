//! `cuzk bench msm`: the CPU backend's MSM against blst's Pippenger, in one process.

use std::time::{Duration, Instant};

use blst::{blst_p1, blst_p1_affine, blst_p2, blst_p2_affine, MultiPoint};
use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ff::Field;
use group::{Curve, Group};
use rand::SeedableRng;

use crate::prover::cpu::CpuOptions;
use crate::prover::msm;

/// Flags of `cuzk bench` that set the CPU options of the run: the `[debug]` keys `cpu_simd`
/// and `cpu_msm_window_bits` of cuzkd's configuration (cuzk.toml(5)).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct CpuFlags {
    /// Run the CPU prover's portable paths even where the CPU has AVX-512 IFMA (debug.cpu_simd
    /// = false).
    #[arg(long, global = true)]
    pub no_cpu_simd: bool,
    /// Force the CPU Pippenger's window width, 2..=24 (debug.cpu_msm_window_bits).
    #[arg(long, global = true)]
    pub cpu_msm_window_bits: Option<u32>,
}

impl CpuFlags {
    /// `base` with the flags that were given applied.
    pub fn apply(&self, mut base: CpuOptions) -> anyhow::Result<CpuOptions> {
        if self.no_cpu_simd {
            base.simd = false;
        }
        if let Some(c) = self.cpu_msm_window_bits {
            anyhow::ensure!(
                CpuOptions::WINDOW_BITS.contains(&c),
                "--cpu-msm-window-bits must be 2..=24"
            );
            base.msm_window_bits = Some(c);
        }
        Ok(base)
    }
}

/// Options of `cuzk bench msm`.
#[derive(Debug, clap::Args)]
pub struct MsmBenchArgs {
    /// log2 of the G1 sizes to measure (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "16,18,20,22")]
    pub g1: Vec<u32>,
    /// log2 of the G2 sizes to measure (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "16,18")]
    pub g2: Vec<u32>,
    /// log2 of the sizes at which to measure the sum of points whose scalars are all one,
    /// in G1 and G2, against blst's batch addition (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "20")]
    pub ones: Vec<u32>,
    /// Timed runs of each implementation per size (the median is reported).
    #[arg(long, default_value_t = 3)]
    pub timed_runs: usize,
}

/// Distinct random bases; larger inputs tile them (as sppark's and our GPU benchmarks do).
const DISTINCT_BASES: usize = 1 << 12;

/// Times blst and our MSM on one curve at size 2^log, checks that both agree and prints a
/// row. `ones` makes every scalar one, with blst's batch addition as the reference; else the
/// scalars are uniformly random against blst's Pippenger. (A macro because blst's
/// `MultiPoint` is implemented per raw point type.)
macro_rules! bench_size {
    ($curve:ident, $affine:ty, $proj:ty, $raw_affine:ty, $raw_proj:ty, $ours:path,
     $log:expr, $ones:expr, $args:expr, $options:expr, $rng:expr) => {{
        let (log, ones) = ($log, $ones);
        let n = 1usize << log;
        let distinct: Vec<$affine> = (0..DISTINCT_BASES.min(n))
            .map(|_| <$proj>::random(&mut $rng).to_affine())
            .collect();
        let bases: Vec<$affine> = (0..n).map(|i| distinct[i % distinct.len()]).collect();
        let scalars: Vec<Scalar> = (0..n)
            .map(|_| {
                if ones {
                    Scalar::ONE
                } else {
                    Scalar::random(&mut $rng)
                }
            })
            .collect();
        let bytes = scalar_bytes(&scalars);
        // SAFETY: blstrs' affine and projective points are transparent wrappers over blst's.
        let raw = unsafe { std::slice::from_raw_parts(bases.as_ptr() as *const $raw_affine, n) };
        let (t_ref, reference) = median($args.timed_runs, || {
            if ones {
                raw.add()
            } else {
                raw.mult(&bytes, 255)
            }
        });
        let (t_ours, ours) = median($args.timed_runs, || $ours($options, &bases, &scalars));
        // SAFETY: as above.
        let reference = unsafe { std::mem::transmute::<$raw_proj, $proj>(reference) };
        let name = if ones {
            concat!(stringify!($curve), " ones")
        } else {
            stringify!($curve)
        };
        anyhow::ensure!(
            reference == ours,
            "{name} 2^{log}: results differ from blst's"
        );
        row(name, log, t_ref, t_ours);
    }};
}

/// [`bench_size!`] on G1 and on G2.
macro_rules! bench_g1 {
    ($log:expr, $ones:expr, $args:expr, $options:expr, $rng:expr) => {
        bench_size!(
            G1,
            G1Affine,
            G1Projective,
            blst_p1_affine,
            blst_p1,
            msm::msm_g1_with,
            $log,
            $ones,
            $args,
            $options,
            $rng
        )
    };
}

macro_rules! bench_g2 {
    ($log:expr, $ones:expr, $args:expr, $options:expr, $rng:expr) => {
        bench_size!(
            G2,
            G2Affine,
            G2Projective,
            blst_p2_affine,
            blst_p2,
            msm::msm_g2_with,
            $log,
            $ones,
            $args,
            $options,
            $rng
        )
    };
}

/// Runs the benchmark with our MSM computing as `options` say, and prints one row per curve
/// and size.
pub fn run(args: MsmBenchArgs, options: &CpuOptions) -> anyhow::Result<()> {
    anyhow::ensure!(args.timed_runs > 0, "--timed-runs must be at least 1");
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x6d736d);
    println!(
        "median of {} runs, {} threads; scalars uniformly random (\"ones\": all one, \
         the sum of the points); cpu = process CPU time",
        args.timed_runs,
        rayon::current_num_threads()
    );
    println!(
        "{:<8} {:>6} {:>10} {:>10} {:>8} {:>10} {:>10} {:>8}",
        "curve", "size", "blst ms", "cuzk ms", "ratio", "blst cpu", "cuzk cpu", "ratio"
    );
    for &log in &args.g1 {
        bench_g1!(log, false, args, options, rng);
    }
    for &log in &args.g2 {
        bench_g2!(log, false, args, options, rng);
    }
    for &log in &args.ones {
        bench_g1!(log, true, args, options, rng);
        bench_g2!(log, true, args, options, rng);
    }
    Ok(())
}

fn scalar_bytes(scalars: &[Scalar]) -> Vec<u8> {
    scalars.iter().flat_map(|s| s.to_bytes_le()).collect()
}

/// Wall and CPU time of one run.
#[derive(Clone, Copy, PartialEq, PartialOrd)]
struct Timing {
    wall: Duration,
    cpu: Duration,
}

/// User + system CPU time of the whole process so far.
fn process_cpu_time() -> Duration {
    use nix::sys::resource::{getrusage, UsageWho};
    getrusage(UsageWho::RUSAGE_SELF)
        .map(|u| {
            let t = |tv: nix::sys::time::TimeVal| {
                Duration::new(tv.tv_sec() as u64, tv.tv_usec() as u32 * 1000)
            };
            t(u.user_time()) + t(u.system_time())
        })
        .unwrap_or_default()
}

/// Runs `f` `runs` times; the median wall time (with that run's CPU time) and the last
/// result. CPU time stays meaningful on a machine shared with other work, where wall time
/// is not.
fn median<T>(runs: usize, mut f: impl FnMut() -> T) -> (Timing, T) {
    let mut times = Vec::with_capacity(runs);
    let mut out = None;
    for _ in 0..runs {
        let (t, c) = (Instant::now(), process_cpu_time());
        out = Some(f());
        times.push(Timing {
            wall: t.elapsed(),
            cpu: process_cpu_time().saturating_sub(c),
        });
    }
    times.sort_by_key(|t| t.wall);
    (times[runs / 2], out.expect("at least one run"))
}

fn row(curve: &str, log: u32, reference: Timing, ours: Timing) {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "{curve:<8} {:>6} {:>10.1} {:>10.1} {:>7.2}x {:>10.1} {:>10.1} {:>7.2}x",
        format!("2^{log}"),
        ms(reference.wall),
        ms(ours.wall),
        ms(ours.wall) / ms(reference.wall),
        ms(reference.cpu),
        ms(ours.cpu),
        ms(ours.cpu) / ms(reference.cpu),
    );
}
