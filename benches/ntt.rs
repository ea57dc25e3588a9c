//! CPU quotient benchmark: `cargo bench --bench ntt [-- LOG_SIZE…]`.
//!
//! For each domain size (2^18 … 2^22 unless sizes are given), times in one process
//! `cuzk::prover::ntt::quotient` with blst's scalar products and with eight-lane AVX-512 IFMA
//! products (where the CPU has them), the implementation it replaced (kept below, only here,
//! as the "before" of docs/benchmarks.md) and bellperson 0.27's own CPU path — the
//! `EvaluationDomain` sequence its prover runs (`ifft_many`, `coset_fft_many`, `mul_assign`,
//! `sub_assign`, `divide_by_z_on_coset`, `icoset_fft`). Every result is checked to be
//! identical to bellperson's. Prints the median, minimum and maximum of the runs and the ratios.
//! `NTT_BENCH_RUNS` sets the number of runs (default 5, at least 3); `NTT_BENCH_ONLY` runs a
//! single implementation, for profiling. The CPU time of each implementation's runs is
//! printed beside the wall time, since other processes' load inflates it less.

use std::time::{Duration, Instant};

use bellperson::domain::EvaluationDomain;
use blstrs::Scalar;
use cuzk::prover::ntt::{self, Arith};
use ff::Field;
use rand::SeedableRng;

/// The CPU quotient as it was before the per-block-twiddle rewrite (commit 98df371), for
/// same-process before/after numbers.
mod old {
    use blstrs::Scalar;
    use cuzk::prover::ProverError;
    use ff::{Field, PrimeField};
    use rayon::prelude::*;

    /// Work per rayon task, in butterflies; below this, splitting costs more than it saves.
    const MIN_TASK: usize = 1 << 12;

    /// The largest transform Fr supports (its two-adicity).
    const MAX_LOG_SIZE: u32 = Scalar::S;

    /// A primitive `2^log_n`-th root of unity.
    fn root_of_unity(log_n: u32) -> Scalar {
        let mut w = Scalar::ROOT_OF_UNITY;
        for _ in log_n..Scalar::S {
            w = w.square();
        }
        w
    }

    /// `[start, start·step, start·step², …]` of length `len`, computed in parallel chunks.
    fn powers(start: Scalar, step: Scalar, len: usize) -> Vec<Scalar> {
        let mut out = vec![Scalar::ZERO; len];
        out.par_chunks_mut(MIN_TASK)
            .enumerate()
            .for_each(|(k, chunk)| {
                let mut cur = start * step.pow_vartime([(k * MIN_TASK) as u64]);
                for v in chunk {
                    *v = cur;
                    cur *= step;
                }
            });
        out
    }

    /// `i` with its lowest `bits` bits reversed.
    #[inline]
    fn rev(i: usize, bits: u32) -> usize {
        if bits == 0 {
            0
        } else {
            i.reverse_bits() >> (usize::BITS - bits)
        }
    }

    /// Reorders `values` into bit-reversed index order, in parallel (out of place).
    fn bit_reverse_permute(values: &mut Vec<Scalar>) {
        let n = values.len();
        let bits = n.trailing_zeros();
        if n <= 2 {
            return;
        }
        let src = std::mem::take(values);
        let mut dst = vec![Scalar::ZERO; n];
        dst.par_chunks_mut(MIN_TASK)
            .enumerate()
            .for_each(|(k, chunk)| {
                for (i, d) in chunk.iter_mut().enumerate() {
                    *d = src[rev(k * MIN_TASK + i, bits)];
                }
            });
        *values = dst;
    }

    /// Blocks of this many elements are transformed through their first (DIT) or last (DIF)
    /// stages while they sit in the core's cache: 2^13 elements are 256 KiB.
    const CACHE_BLOCK: usize = 1 << 13;

    /// Cooley–Tukey butterflies of one stage over a block of `2·half` elements.
    #[inline]
    fn dit_stage(block: &mut [Scalar], half: usize, twiddles: &[Scalar], stride: usize) {
        let (lo, hi) = block.split_at_mut(half);
        for (j, (l, h)) in lo.iter_mut().zip(hi.iter_mut()).enumerate() {
            let t = *h * twiddles[j * stride];
            *h = *l - t;
            *l += t;
        }
    }

    /// Gentleman–Sande butterflies of one stage over a block of `2·half` elements.
    #[inline]
    fn dif_stage(block: &mut [Scalar], half: usize, twiddles: &[Scalar], stride: usize) {
        let (lo, hi) = block.split_at_mut(half);
        for (j, (l, h)) in lo.iter_mut().zip(hi.iter_mut()).enumerate() {
            let u = *l;
            *l = u + *h;
            *h = (u - *h) * twiddles[j * stride];
        }
    }

    /// Runs one stage over the whole vector: in parallel over blocks when there are many, else
    /// over slices of the butterflies inside each block.
    fn wide_stage(
        values: &mut [Scalar],
        half: usize,
        twiddles: &[Scalar],
        stride: usize,
        dit: bool,
    ) {
        for block in values.chunks_mut(2 * half) {
            let (lo, hi) = block.split_at_mut(half);
            lo.par_chunks_mut(MIN_TASK)
                .zip(hi.par_chunks_mut(MIN_TASK))
                .enumerate()
                .for_each(|(k, (lo, hi))| {
                    let base = k * MIN_TASK;
                    for j in 0..lo.len() {
                        let w = twiddles[(base + j) * stride];
                        if dit {
                            let t = hi[j] * w;
                            hi[j] = lo[j] - t;
                            lo[j] += t;
                        } else {
                            let u = lo[j];
                            lo[j] = u + hi[j];
                            hi[j] = (u - hi[j]) * w;
                        }
                    }
                });
        }
    }

    /// DIT transform: bit-reversed input, natural-order output.
    fn dit_from_bitrev(values: &mut [Scalar], twiddles: &[Scalar]) {
        let n = values.len();
        let block = CACHE_BLOCK.min(n);
        // Stages whose butterflies stay inside one cache block: all of them per block.
        values.par_chunks_mut(block).for_each(|chunk| {
            let mut half = 1;
            while 2 * half <= block {
                let stride = n / (2 * half);
                for b in chunk.chunks_mut(2 * half) {
                    dit_stage(b, half, twiddles, stride);
                }
                half *= 2;
            }
        });
        let mut half = block;
        while half < n {
            wide_stage(values, half, twiddles, n / (2 * half), true);
            half *= 2;
        }
    }

    /// DIF transform: natural-order input, bit-reversed output.
    fn dif_to_bitrev(values: &mut [Scalar], twiddles: &[Scalar]) {
        let n = values.len();
        let block = CACHE_BLOCK.min(n);
        let mut half = n / 2;
        while half >= block {
            wide_stage(values, half, twiddles, n / (2 * half), false);
            half /= 2;
        }
        values.par_chunks_mut(block).for_each(|chunk| {
            let mut half = block / 2;
            while half >= 1 {
                let stride = n / (2 * half);
                for b in chunk.chunks_mut(2 * half) {
                    dif_stage(b, half, twiddles, stride);
                }
                half /= 2;
            }
        });
    }

    /// Multiplies `values[j]` by `scale · step^rev(j)` (the coset twist of bit-reversed
    /// coefficients). `rev(j)` splits into a low and a high half of the index bits, so two small
    /// tables replace a 2^L-entry gather: `step^rev(j) = lo[j mod 2^k] · hi[j >> k]`.
    fn scale_by_bitrev_powers(values: &mut [Scalar], scale: Scalar, step: Scalar) {
        let n = values.len();
        let bits = n.trailing_zeros();
        let k = bits / 2;
        let big = step.pow_vartime([1u64 << (bits - k)]);
        let lo_nat = powers(Scalar::ONE, big, 1 << k);
        let lo: Vec<Scalar> = (0..1usize << k).map(|x| lo_nat[rev(x, k)]).collect();
        let hi_nat = powers(scale, step, 1 << (bits - k));
        values
            .par_chunks_mut(1 << k)
            .enumerate()
            .for_each(|(y, chunk)| {
                let f = hi_nat[rev(y, bits - k)];
                for (v, l) in chunk.iter_mut().zip(&lo) {
                    *v *= *l * f;
                }
            });
    }

    /// The evaluation domain of size `2^log_n` and the constants the quotient needs.
    struct Domain {
        size: usize,
        twiddles: Vec<Scalar>,
        twiddles_inv: Vec<Scalar>,
        size_inv: Scalar,
        g: Scalar,
        g_inv: Scalar,
    }

    impl Domain {
        fn new(size: usize) -> Result<Self, ProverError> {
            let log_n = size.trailing_zeros();
            if !size.is_power_of_two() || log_n > MAX_LOG_SIZE {
                return Err(ProverError::DomainTooLarge {
                    size,
                    max_log: MAX_LOG_SIZE,
                });
            }
            let omega = root_of_unity(log_n);
            let inv = |x: Scalar| Option::<Scalar>::from(x.invert()).unwrap_or(Scalar::ZERO);
            let g = Scalar::MULTIPLICATIVE_GENERATOR;
            let omega_inv = inv(omega);
            Ok(Self {
                size,
                twiddles: powers(Scalar::ONE, omega, size / 2),
                twiddles_inv: powers(Scalar::ONE, omega_inv, size / 2),
                size_inv: inv(Scalar::from(size as u64)),
                g,
                g_inv: inv(g),
            })
        }

        /// Evaluations on the domain → evaluations on the coset g·domain, both natural order.
        fn domain_to_coset(&self, v: &mut [Scalar]) {
            // DIF inverse transform leaves n·coefficients in bit-reversed order; the 1/n and the
            // coset shift g^i are one pass in that order; the DIT forward transform takes
            // bit-reversed input and gives natural order back. No permutation is needed.
            dif_to_bitrev(v, &self.twiddles_inv);
            scale_by_bitrev_powers(v, self.size_inv, self.g);
            dit_from_bitrev(v, &self.twiddles);
        }

        /// Evaluations on the coset → coefficients in natural order.
        fn coset_to_coefficients(&self, v: &mut Vec<Scalar>) {
            dif_to_bitrev(v, &self.twiddles_inv);
            scale_by_bitrev_powers(v, self.size_inv, self.g_inv);
            bit_reverse_permute(v);
        }

        /// 1 / Z(x) on the coset, where Z(x) = x^n − 1 is the constant g^n − 1 there.
        fn z_inv_on_coset(&self) -> Scalar {
            let z = self.g.pow_vartime([self.size as u64]) - Scalar::ONE;
            Option::<Scalar>::from(z.invert()).unwrap_or(Scalar::ZERO)
        }
    }

    /// H(X) = (A·B − C)/Z on the CPU; as `cuzk::prover::ntt::quotient`.
    pub fn quotient(
        mut a: Vec<Scalar>,
        mut b: Vec<Scalar>,
        mut c: Vec<Scalar>,
    ) -> Result<Vec<Scalar>, ProverError> {
        let n = a.len();
        if b.len() != n || c.len() != n {
            return Err(ProverError::LengthMismatch {
                what: "A and B, or A and C",
                left: n,
                right: if b.len() != n { b.len() } else { c.len() },
            });
        }
        let domain = Domain::new(n.next_power_of_two().max(2))?;
        for v in [&mut a, &mut b, &mut c] {
            v.resize(domain.size, Scalar::ZERO);
        }
        rayon::join(
            || domain.domain_to_coset(&mut a),
            || {
                rayon::join(
                    || domain.domain_to_coset(&mut b),
                    || domain.domain_to_coset(&mut c),
                )
            },
        );
        let z_inv = domain.z_inv_on_coset();
        a.par_iter_mut()
            .zip(b.par_iter())
            .zip(c.par_iter())
            .for_each(|((a, b), c)| *a = (*a * b - c) * z_inv);
        drop((b, c));
        domain.coset_to_coefficients(&mut a);
        a.truncate(domain.size - 1);
        Ok(a)
    }
}

/// bellperson's CPU quotient, step for step as its prover's `execute_fft` runs it.
fn bellperson_quotient(a: Vec<Scalar>, b: Vec<Scalar>, c: Vec<Scalar>) -> Vec<Scalar> {
    // bellperson takes its thread-pool handle (`ec_gpu_gen::threadpool::Worker`, a unit
    // struct) by reference but does not re-export the type; `Default` and inference name it.
    let worker = Default::default();
    let mut kern = None;
    let mut a = EvaluationDomain::from_coeffs(a).expect("domain");
    let mut b = EvaluationDomain::from_coeffs(b).expect("domain");
    let mut c = EvaluationDomain::from_coeffs(c).expect("domain");
    EvaluationDomain::ifft_many(&mut [&mut a, &mut b, &mut c], &worker, &mut kern).expect("ifft");
    EvaluationDomain::coset_fft_many(&mut [&mut a, &mut b, &mut c], &worker, &mut kern)
        .expect("coset fft");
    a.mul_assign(&worker, &b);
    drop(b);
    a.sub_assign(&worker, &c);
    drop(c);
    a.divide_by_z_on_coset(&worker);
    a.icoset_fft(&worker, &mut kern).expect("icoset fft");
    let mut h = a.into_coeffs();
    h.truncate(h.len() - 1);
    h
}

/// Evaluations of a satisfied system: random `a`, `b` and `c = a·b`, `n` of each.
fn inputs(n: usize, seed: u64) -> (Vec<Scalar>, Vec<Scalar>, Vec<Scalar>) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let a: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut rng)).collect();
    let b: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut rng)).collect();
    let c = a.iter().zip(&b).map(|(x, y)| *x * y).collect();
    (a, b, c)
}

/// A copy of `v` with the capacity a vector grown by `push` has (synthesis records A, B and C
/// that way): the next power of two, so padding to the domain does not reallocate.
fn grown(v: &[Scalar]) -> Vec<Scalar> {
    let mut out = Vec::with_capacity(v.len().next_power_of_two());
    out.extend_from_slice(v);
    out
}

/// Median, minimum and maximum of a set of timings.
fn stats(mut times: Vec<Duration>) -> Stats {
    times.sort();
    Stats {
        median: times[times.len() / 2],
        min: times[0],
        max: times[times.len() - 1],
    }
}

/// Runs `f` and returns its result and how long it took.
fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let t = Instant::now();
    let out = f();
    (out, t.elapsed())
}

struct Stats {
    median: Duration,
    min: Duration,
    max: Duration,
}

impl std::fmt::Display for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        write!(
            f,
            "{:9.1} ms [{:.1}–{:.1}]",
            ms(self.median),
            ms(self.min),
            ms(self.max)
        )
    }
}

/// CPU time of this process so far (all threads), which other processes' load inflates less
/// than wall time.
fn cpu_time() -> Duration {
    // SAFETY: `getrusage` only writes the `rusage` it is given; zeroes are a valid one.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// With `NTT_BENCH_ONLY=cuzk|scalar|ifma|before|bellperson`, runs only that implementation, `runs`
/// times per size, unchecked (for `perf record`), and prints wall and CPU times.
fn only(which: &str, sizes: &[u32], runs: usize) {
    for &log_n in sizes {
        let n = 1usize << log_n;
        let (a, b, c) = inputs(n - n / 64, u64::from(log_n));
        let (mut wall, mut cpu) = (Vec::new(), Vec::new());
        for _ in 0..runs {
            let (x, y, z) = (grown(&a), grown(&b), grown(&c));
            let cpu0 = cpu_time();
            let (_, t) = timed(|| match which {
                "cuzk" => ntt::quotient(x, y, z).expect("quotient"),
                "scalar" => ntt::quotient_using(x, y, z, Arith::Scalar).expect("quotient"),
                "ifma" => ntt::quotient_using(x, y, z, Arith::Ifma).expect("quotient"),
                "before" => old::quotient(x, y, z).expect("old quotient"),
                "bellperson" => bellperson_quotient(x, y, z),
                _ => panic!("NTT_BENCH_ONLY is cuzk, scalar, ifma, before or bellperson"),
            });
            cpu.push(cpu_time() - cpu0);
            wall.push(t);
        }
        println!(
            "2^{log_n}  {which}  wall {}  cpu {}",
            stats(wall),
            stats(cpu)
        );
    }
}

fn main() {
    // `cargo bench` passes `--bench`; any numeric arguments are the log sizes to run.
    let mut sizes: Vec<u32> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    if sizes.is_empty() {
        sizes = (18..=22).collect();
    }
    let runs: usize = std::env::var("NTT_BENCH_RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(5)
        .max(3);
    if let Ok(which) = std::env::var("NTT_BENCH_ONLY") {
        only(&which, &sizes, runs);
        return;
    }
    // A benchmark may read the environment (the library takes `CpuOptions` instead).
    let simd_allowed = std::env::var("CUZK_CPU_SIMD").map_or(true, |v| v != "off");
    let ifma = simd_allowed && Arith::best() == Arith::Ifma;
    println!(
        "CPU quotient, {} rayon threads, median of {runs} runs [min–max], wall and CPU time{}",
        rayon::current_num_threads(),
        if ifma {
            ""
        } else {
            "; no IFMA row: this CPU lacks AVX-512 IFMA or CUZK_CPU_SIMD=off"
        }
    );
    for log_n in sizes {
        let n = 1usize << log_n;
        // Like a real circuit, a little short of the power of two, so the padding runs too.
        let (a, b, c) = inputs(n - n / 64, u64::from(log_n));
        // The four run in turn, so that load from other processes hits them alike.
        let mut rows: Vec<Row> = ["bellperson", "cuzk before", "cuzk scalar", "cuzk IFMA"]
            .into_iter()
            .take(if ifma { 4 } else { 3 })
            .map(Row::new)
            .collect();
        for _ in 0..runs {
            let want = rows[0].run(&a, &b, &c, bellperson_quotient);
            for row in &mut rows[1..] {
                let got = match row.name {
                    "cuzk before" => row.run(&a, &b, &c, |x, y, z| {
                        old::quotient(x, y, z).expect("old quotient")
                    }),
                    "cuzk scalar" => row.run(&a, &b, &c, |x, y, z| {
                        ntt::quotient_using(x, y, z, Arith::Scalar).expect("quotient")
                    }),
                    _ => row.run(&a, &b, &c, |x, y, z| {
                        ntt::quotient_using(x, y, z, Arith::Ifma).expect("quotient")
                    }),
                };
                assert!(
                    got == want,
                    "{} differs from bellperson's at 2^{log_n}",
                    row.name
                );
            }
        }
        let stats: Vec<(Stats, Stats)> = rows
            .into_iter()
            .map(|r| (stats(r.wall), stats(r.cpu)))
            .collect();
        let ratio =
            |i: usize, j: usize| stats[i].0.median.as_secs_f64() / stats[j].0.median.as_secs_f64();
        let cpu_ratio =
            |i: usize, j: usize| stats[i].1.median.as_secs_f64() / stats[j].1.median.as_secs_f64();
        println!("2^{log_n}  bellperson  {}  cpu {}", stats[0].0, stats[0].1);
        println!(
            "2^{log_n}  cuzk before {}  cpu {}  {:.3}× bellperson",
            stats[1].0,
            stats[1].1,
            ratio(1, 0)
        );
        println!(
            "2^{log_n}  cuzk scalar {}  cpu {}  {:.3}× bellperson, {:.3}× before",
            stats[2].0,
            stats[2].1,
            ratio(2, 0),
            ratio(2, 1)
        );
        if ifma {
            println!(
                "2^{log_n}  cuzk IFMA   {}  cpu {}  {:.3}× bellperson, {:.3}× scalar (cpu {:.3}×)",
                stats[3].0,
                stats[3].1,
                ratio(3, 0),
                ratio(3, 2),
                cpu_ratio(3, 2)
            );
        }
    }
}

/// One implementation's wall and CPU times over the runs.
struct Row {
    name: &'static str,
    wall: Vec<Duration>,
    cpu: Vec<Duration>,
}

impl Row {
    fn new(name: &'static str) -> Row {
        Row {
            name,
            wall: Vec::new(),
            cpu: Vec::new(),
        }
    }

    /// Runs `f` on fresh copies of the inputs, records its times and returns its result.
    fn run(
        &mut self,
        a: &[Scalar],
        b: &[Scalar],
        c: &[Scalar],
        f: impl FnOnce(Vec<Scalar>, Vec<Scalar>, Vec<Scalar>) -> Vec<Scalar>,
    ) -> Vec<Scalar> {
        let (x, y, z) = (grown(a), grown(b), grown(c));
        let cpu0 = cpu_time();
        let (out, t) = timed(|| f(x, y, z));
        self.cpu.push(cpu_time() - cpu0);
        self.wall.push(t);
        out
    }
}
