//! `cuzk bench gpu`: our MSM and NTT times on this GPU next to sppark's figures, which are
//! not measured in this run: sppark 0.1.15 on the project's H200 on 2026-11-29, best of 3
//! (ANCHORS.md); the ratio is our best of this run's timed runs to that best. Bases are
//! random points tiled on the device from 4096; scalars are
//! uniformly random, read from pinned host memory; NTT data is on the device. Also the quotient
//! with its H-query MSM, H through host memory against H left on the device, and the four aux
//! MSMs with the assignment sent once against once per query.

use std::path::PathBuf;
use std::time::Instant;

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ff::Field;
use group::{prime::PrimeCurveAffine, Curve as _, Group};
use rand::{rngs::StdRng, SeedableRng};
use rayon::prelude::*;

use crate::gpu::bytes::{bytes, bytes_mut};
use crate::gpu::device::{DevBuf, Gpu};
use crate::gpu::msm::{self, Curve};
use crate::gpu::ntt::{Domain, FR_BYTES};
use crate::gpu::pinned::Registration;
use crate::gpu::GpuOptions;
use crate::prover::{PinnedPool, Scalars};

/// Flags of `cuzk bench` that set the GPU options of the run: the `[gpu]` and `[debug]` keys of
/// cuzkd's configuration (cuzk.toml(5)), named alike. Unset flags keep the options `cuzk`
/// started with.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct GpuFlags {
    /// CUDA device ordinal (one of the daemon's proving.gpus) [default: 0].
    #[arg(long = "gpu-device", global = true)]
    pub device: Option<usize>,
    /// Compiled-kernel cache directory (gpu.kernel_cache) [default: $XDG_CACHE_HOME/cuzk or
    /// ~/.cache/cuzk].
    #[arg(long, global = true, value_name = "DIR")]
    pub kernel_cache: Option<PathBuf>,
    /// A kernel variant: NVRTC definition NAME or NAME=VALUE, e.g. CUZK_FP_INLINE
    /// (debug.nvrtc_defines; repeat the flag or separate with commas).
    #[arg(
        long = "nvrtc-define",
        global = true,
        value_delimiter = ',',
        value_name = "NAME[=V]"
    )]
    pub nvrtc_defines: Vec<String>,
    /// Page-locked memory of the two upload staging buffers, e.g. 64MiB; 0 turns staging off
    /// (gpu.staging_memory).
    #[arg(long, global = true, value_parser = parse_size_flag, value_name = "SIZE")]
    pub staging_memory: Option<u64>,
    /// Force the MSM window width, 4..=24 (debug.gpu_msm_window_bits).
    #[arg(long, global = true)]
    pub msm_window_bits: Option<u32>,
    /// Smallest bucket-accumulation chunk of the MSM, in points (debug.gpu_msm_chunk_min).
    #[arg(long, global = true)]
    pub msm_chunk_min: Option<u64>,
    /// Scalars per piece of the MSM's overlapped upload (debug.gpu_msm_upload_chunk).
    #[arg(long, global = true)]
    pub msm_upload_chunk: Option<usize>,
    /// Sum large G1 MSMs' buckets with batch-affine additions (debug.gpu_msm_batch_affine).
    #[arg(long, global = true)]
    pub msm_batch_affine: bool,
    /// Most butterfly stages per NTT pass, 1..=10 (debug.gpu_ntt_max_stages).
    #[arg(long, global = true)]
    pub ntt_max_stages: Option<u32>,
    /// Fewest threads per NTT pass block (debug.gpu_ntt_min_threads).
    #[arg(long, global = true)]
    pub ntt_min_threads: Option<u32>,
    /// Stages per NTT pass, e.g. 10,9,8, for the domain they add up to (debug.gpu_ntt_split).
    #[arg(long, global = true, value_delimiter = ',')]
    pub ntt_split: Vec<u32>,
    /// Upload each quotient input after all earlier work (debug.gpu_quotient_serial).
    #[arg(long, global = true)]
    pub quotient_serial: bool,
    /// Per-phase MSM and per-pass NTT timings as debug events on stderr (debug.gpu_trace; a
    /// CUZK_LOG filter, if set, must let cuzk::gpu=debug through). Synchronizes after every
    /// phase.
    #[arg(long, global = true)]
    pub trace: bool,
    /// Device memory the backend may hold (gpu.memory_limit), e.g. 16GiB; 0: what is free
    /// less a margin. `bench partition` takes a list (24GiB,16GiB) and runs its device stage
    /// under each, comparing the proofs; the other benchmarks use the last.
    #[arg(
        long,
        global = true,
        value_delimiter = ',',
        value_parser = parse_size_flag,
        value_name = "SIZE"
    )]
    pub gpu_memory_limit: Vec<u64>,
}

fn parse_size_flag(s: &str) -> Result<u64, String> {
    crate::config::parse_size(s)
}

impl GpuFlags {
    /// `base` with the flags that were given applied.
    pub fn apply(&self, mut base: GpuOptions) -> anyhow::Result<GpuOptions> {
        if let Some(d) = self.device {
            base.ordinal = d;
        }
        if let Some(dir) = &self.kernel_cache {
            base.kernel_cache = Some(dir.clone());
        }
        base.nvrtc_defines
            .extend(self.nvrtc_defines.iter().cloned());
        if let Some(bytes) = self.staging_memory {
            base.staging_bytes = usize::try_from(bytes)?;
        }
        if let Some(c) = self.msm_window_bits {
            anyhow::ensure!((4..=24).contains(&c), "--msm-window-bits must be 4..=24");
            base.msm.window_bits = Some(c);
        }
        if let Some(k) = self.msm_chunk_min {
            anyhow::ensure!(k > 0, "--msm-chunk-min must be at least 1");
            base.msm.chunk_min = k;
        }
        if let Some(k) = self.msm_upload_chunk {
            anyhow::ensure!(k > 0, "--msm-upload-chunk must be at least 1");
            base.msm.upload_chunk = k;
        }
        if self.msm_batch_affine {
            base.msm.batch_affine_min_chains = Some(crate::gpu::msm::AFFINE_MIN_CHAINS);
        }
        if let Some(t) = self.ntt_max_stages {
            anyhow::ensure!((1..=10).contains(&t), "--ntt-max-stages must be 1..=10");
            base.ntt.max_stages = t;
        }
        if let Some(t) = self.ntt_min_threads {
            anyhow::ensure!(
                (1..=1024).contains(&t),
                "--ntt-min-threads must be 1..=1024"
            );
            base.ntt.min_threads = t;
        }
        if !self.ntt_split.is_empty() {
            base.ntt.split = self.ntt_split.clone();
        }
        base.ntt.quotient_serial |= self.quotient_serial;
        base.trace |= self.trace;
        if let Some(&limit) = self.gpu_memory_limit.last() {
            base.memory_limit = (limit != 0).then_some(limit);
        }
        Ok(base)
    }
}

/// Options of `cuzk bench gpu`.
#[derive(clap::Args, Debug, Clone)]
pub struct GpuBenchArgs {
    /// log2 sizes of the G1 MSMs (`--g1` with no value: none).
    #[arg(long, value_delimiter = ',', num_args = 0.., default_value = "20,22,24,26,27")]
    pub g1: Vec<u32>,
    /// log2 sizes of the G2 MSMs (`--g2` with no value: none).
    #[arg(long, value_delimiter = ',', num_args = 0.., default_value = "20,22,24,26")]
    pub g2: Vec<u32>,
    /// log2 sizes of the NTTs (`--ntt` with no value: none).
    #[arg(long, value_delimiter = ',', num_args = 0.., default_value = "20,22,24,26,27")]
    pub ntt: Vec<u32>,
    /// log2 domain sizes of the quotient and its H-query MSM, timed both ways: H through host
    /// memory, and H left on the device (`--h` with no value: none).
    #[arg(long, value_delimiter = ',', num_args = 0.., default_value = "24")]
    pub h: Vec<u32>,
    /// log2 sizes of an aux assignment for the four aux MSMs (L, A, B in G1 and G2), timed
    /// both ways: one upload per query with the selections made on the host, and the
    /// assignment uploaded once (`--aux` with no value: none).
    #[arg(long, value_delimiter = ',', num_args = 0.., default_value = "24")]
    pub aux: Vec<u32>,
    /// log2 numbers of scalars uploaded to the device, timed from pageable memory (through
    /// the staging buffers) and from the page-locked pool a daemon with
    /// `proving.pinned_memory` copies partitions into (`--upload` with no value: none).
    #[arg(long, value_delimiter = ',', num_args = 0.., default_value = "22,24")]
    pub upload: Vec<u32>,
    /// Timed runs per measurement, after one warm-up (named apart from `cuzk bench --runs`,
    /// which counts proof runs).
    #[arg(long = "timed-runs", default_value_t = 3)]
    pub runs: usize,
    /// Also check each MSM's smallest size against blst's own Pippenger on the CPU.
    #[arg(long)]
    pub check: bool,
}

/// Where [`sppark_ms`]'s figures come from: printed beside every ratio to them.
const SPPARK_SOURCE: &str = "sppark 0.1.15 on the project's H200, measured 2026-11-29 in \
     another process (ANCHORS.md), best of 3";

/// sppark 0.1.15 on the project's H200 (ANCHORS.md, [`SPPARK_SOURCE`]), milliseconds.
fn sppark_ms(op: &str, lg: u32) -> Option<f64> {
    let t: &[(u32, f64)] = match op {
        "G1 MSM" => &[
            (20, 22.7),
            (22, 55.5),
            (24, 162.5),
            (26, 569.4),
            (27, 1110.9),
        ],
        "G2 MSM" => &[(20, 50.0), (22, 141.0), (24, 457.5), (26, 1653.3)],
        "NTT" => &[(20, 0.29), (24, 4.74), (26, 23.81), (27, 44.35)],
        "coset NTT" => &[(20, 0.33), (24, 5.35), (26, 26.20), (27, 49.14)],
        _ => &[],
    };
    t.iter().find(|(k, _)| *k == lg).map(|(_, v)| *v)
}

struct Row {
    op: &'static str,
    lg: u32,
    ms: Vec<f64>,
    note: String,
}

fn stats(v: &[f64]) -> (f64, f64, f64) {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    (s[s.len() / 2], s[0], s[s.len() - 1])
}

fn random_scalars(n: usize, seed: u64) -> Vec<Scalar> {
    let mut v = vec![Scalar::ZERO; n];
    v.par_chunks_mut(1 << 16).enumerate().for_each(|(k, c)| {
        let mut rng = StdRng::seed_from_u64(seed ^ (k as u64).wrapping_mul(0x9e3779b97f4a7c15));
        c.iter_mut().for_each(|s| *s = Scalar::random(&mut rng));
    });
    v
}

pub(super) const TILE: usize = 4096;

pub(super) fn random_g1(n: usize, seed: u64) -> Vec<G1Affine> {
    let p: Vec<G1Projective> = (0..n)
        .into_par_iter()
        .map(|i| G1Projective::random(StdRng::seed_from_u64(seed + i as u64)))
        .collect();
    let mut a = vec![G1Affine::identity(); n];
    G1Projective::batch_normalize(&p, &mut a);
    a
}

pub(super) fn random_g2(n: usize, seed: u64) -> Vec<G2Affine> {
    let p: Vec<G2Projective> = (0..n)
        .into_par_iter()
        .map(|i| G2Projective::random(StdRng::seed_from_u64(seed + i as u64)))
        .collect();
    let mut a = vec![G2Affine::identity(); n];
    G2Projective::batch_normalize(&p, &mut a);
    a
}

/// `n` bases on the device: `tile` repeated.
fn tiled(gpu: &Gpu, tile: &[u8], n: usize, point: usize) -> anyhow::Result<DevBuf> {
    let mut buf = gpu.alloc(n * point)?;
    let first = tile.len().min(n * point);
    gpu.upload(&mut buf, &tile[..first])?;
    let mut have = first;
    while have < n * point {
        let len = have.min(n * point - have);
        gpu.copy_within(&mut buf, 0, have, len)?;
        have += len;
    }
    gpu.sync()?;
    Ok(buf)
}

fn bench_msm(
    gpu: &Gpu,
    curve: Curve,
    sizes: &[u32],
    args: &GpuBenchArgs,
    rows: &mut Vec<Row>,
) -> anyhow::Result<()> {
    let (op, tile_bytes, g1, g2) = match curve {
        Curve::G1 => {
            let t = random_g1(TILE, 1);
            (("G1 MSM"), bytes(&t).to_vec(), t, Vec::new())
        }
        Curve::G2 => {
            let t = random_g2(TILE, 2);
            (("G2 MSM"), bytes(&t).to_vec(), Vec::new(), t)
        }
    };
    for (i, &lg) in sizes.iter().enumerate() {
        let n = 1usize << lg;
        let bases = tiled(gpu, &tile_bytes, n, curve.affine_bytes())?;
        // Scalars in pinned memory, as sppark's figures were taken.
        let host = random_scalars(n, 7 + lg as u64);
        let mut pinned = gpu.pinned(n * FR_BYTES)?;
        pinned.as_mut_slice()?.copy_from_slice(bytes(&host));
        let sc = pinned.as_slice()?;
        let mut note = String::new();
        let mut ms = Vec::new();
        let mut result = None;
        for run in 0..=args.runs {
            gpu.sync()?;
            let t0 = Instant::now();
            let parts = msm::msm(gpu, curve, &bases, n, sc)?;
            let r = match curve {
                Curve::G1 => (Some(msm::finish_g1(&parts)), None),
                Curve::G2 => (None, Some(msm::finish_g2(&parts))),
            };
            let dt = t0.elapsed().as_secs_f64() * 1e3;
            if run > 0 {
                ms.push(dt);
            }
            note = format!("c={}", parts.window_bits);
            result = Some(r);
        }
        if args.check && i == 0 {
            let ok = match (curve, result) {
                (Curve::G1, Some((Some(got), _))) => {
                    let b: Vec<G1Affine> = (0..n).map(|k| g1[k % TILE]).collect();
                    crate::prover::msm::blst_msm_g1(&b, &host) == got
                }
                (Curve::G2, Some((_, Some(got)))) => {
                    let b: Vec<G2Affine> = (0..n).map(|k| g2[k % TILE]).collect();
                    crate::prover::msm::blst_msm_g2(&b, &host) == got
                }
                _ => false,
            };
            note.push_str(if ok {
                " blst check ok"
            } else {
                " blst check FAIL"
            });
            if !ok {
                anyhow::bail!("{op} 2^{lg}: GPU result differs from blst's Pippenger");
            }
        }
        eprintln!("{op} 2^{lg}: {ms:.1?} ms {note}");
        rows.push(Row { op, lg, ms, note });
    }
    Ok(())
}

fn bench_ntt(
    gpu: &Gpu,
    sizes: &[u32],
    args: &GpuBenchArgs,
    rows: &mut Vec<Row>,
) -> anyhow::Result<()> {
    for &lg in sizes {
        let n = 1usize << lg;
        let dom = Domain::new(gpu, lg)?;
        let data = gpu.upload_new(bytes(&random_scalars(n, 11)))?;
        let mut out = gpu.alloc(n * FR_BYTES)?;
        for (op, coset) in [("NTT", false), ("coset NTT", true)] {
            let mut ms = Vec::new();
            for run in 0..=args.runs {
                gpu.sync()?;
                let t0 = Instant::now();
                dom.transform(gpu, &data, &mut out, false, coset)?;
                gpu.sync()?;
                if run > 0 {
                    ms.push(t0.elapsed().as_secs_f64() * 1e3);
                }
            }
            eprintln!("{op} 2^{lg}: {ms:.2?} ms");
            rows.push(Row {
                op,
                lg,
                ms,
                note: String::new(),
            });
        }
    }
    Ok(())
}

/// The quotient of a size-2^lg domain and the MSM of its m − 1 coefficients over the H bases,
/// both ways the prover can run them: "H via host" downloads H and sends it back up as the
/// MSM's scalars (the separate `quotient` and `msm_g1` of the prover's backend boundary), "H
/// fused" hands the device buffer to the MSM (`GpuBackend::quotient_h_query_gpu`). Inputs A, B,
/// C from pageable host memory, sent as the prover's are (`Domain::quotient_from_host`); the two
/// results must agree.
fn bench_h(
    gpu: &Gpu,
    sizes: &[u32],
    args: &GpuBenchArgs,
    rows: &mut Vec<Row>,
) -> anyhow::Result<()> {
    let tile = random_g1(TILE, 3);
    let tile_bytes = bytes(&tile).to_vec();
    for &lg in sizes {
        let m = 1usize << lg;
        let dom = Domain::new(gpu, lg)?;
        let bases = tiled(gpu, &tile_bytes, m - 1, Curve::G1.affine_bytes())?;
        let inputs: Vec<Vec<Scalar>> = (0..3u64)
            .map(|k| random_scalars(m, 40 + 3 * lg as u64 + k))
            .collect();
        let mut times = [Vec::new(), Vec::new()];
        let mut sums = [None, None];
        for run in 0..=args.runs {
            for (way, fused) in [false, true].into_iter().enumerate() {
                gpu.sync()?;
                let t0 = Instant::now();
                let h = dom.quotient_from_host(gpu, &inputs[0], &inputs[1], &inputs[2])?;
                let parts = if fused {
                    msm::msm_device(gpu, Curve::G1, &bases, m - 1, h)?
                } else {
                    let mut host = vec![Scalar::ZERO; m - 1];
                    gpu.download(&h, bytes_mut(&mut host))?;
                    drop(h);
                    msm::msm(gpu, Curve::G1, &bases, m - 1, bytes(&host))?
                };
                let sum = msm::finish_g1(&parts);
                if run > 0 {
                    times[way].push(t0.elapsed().as_secs_f64() * 1e3);
                }
                sums[way] = Some(sum);
            }
        }
        if sums[0] != sums[1] {
            anyhow::bail!("H query 2^{lg}: the fused result differs from the one via host");
        }
        let ratio = stats(&times[1]).0 / stats(&times[0]).0;
        eprintln!(
            "H query 2^{lg}: via host {:.1?} ms, fused {:.1?} ms",
            times[0], times[1]
        );
        let [via_host, fused] = times;
        rows.push(Row {
            op: "H via host",
            lg,
            ms: via_host,
            note: "quotient + H MSM".into(),
        });
        rows.push(Row {
            op: "H fused",
            lg,
            ms: fused,
            note: format!("{ratio:.2}× via host, same sum"),
        });
    }
    Ok(())
}

/// A witness-like aux assignment of `n` values: 45% zeros, 45% ones, the rest uniform. (A
/// guess at the shape of a PoRep partition's assignment, mostly bits; not measured from one.)
fn witness_scalars(n: usize, seed: u64) -> Vec<Scalar> {
    let mut v = random_scalars(n, seed);
    v.par_iter_mut().enumerate().for_each(|(i, s)| {
        match (i as u64).wrapping_mul(0x9e3779b97f4a7c15) >> 44 & 0xfff {
            0..=1842 => *s = Scalar::ZERO,
            1843..=3685 => *s = Scalar::ONE,
            _ => {}
        }
    });
    v
}

/// Flags set for about `per_mille`/1000 of `n` variables.
fn density(n: usize, per_mille: u64, seed: u64) -> Vec<bool> {
    (0..n as u64)
        .map(|i| (i ^ seed).wrapping_mul(0xbf58476d1ce4e5b9) >> 40 & 1023 < per_mille * 1024 / 1000)
        .collect()
}

/// `n` host bases: `tile` repeated.
pub(super) fn repeat<T: Copy + Send + Sync>(tile: &[T], n: usize) -> Vec<T> {
    (0..n)
        .into_par_iter()
        .map(|i| tile[i % tile.len()])
        .collect()
}

/// The four MSMs over an aux assignment of 2^lg values (densities as a 32 GiB PoRep
/// partition's: A 99.7%, B 25.4%, ANCHORS.md), both ways the prover can run them on this GPU:
/// "aux apart" is four `msm_*_gpu` calls, each uploading its scalars, with the A and B
/// selections made on the host as the prover does; "aux joint" is `aux_msms_gpu` (the
/// assignment sent once, selected on the device). Pageable inputs; bases resident (uploaded
/// in the warm-up); the sums must agree.
fn bench_aux(
    options: &GpuOptions,
    sizes: &[u32],
    args: &GpuBenchArgs,
    rows: &mut Vec<Row>,
) -> anyhow::Result<()> {
    use crate::gpu::backend::AuxQueries;
    if sizes.is_empty() {
        return Ok(());
    }
    let backend = crate::gpu::GpuBackend::new(options)?;
    let tile1 = random_g1(TILE, 5);
    let tile2 = random_g2(TILE / 8, 6);
    for &lg in sizes {
        let n = 1usize << lg;
        let aux = witness_scalars(n, 50 + lg as u64);
        let a_density = density(n, 997, 1);
        let b_density = density(n, 254, 2);
        let l = repeat(&tile1, n);
        let a = repeat(&tile1[1..], a_density.iter().filter(|&&f| f).count());
        let nb = b_density.iter().filter(|&&f| f).count();
        let b_g1 = repeat(&tile1[2..], nb);
        let b_g2 = repeat(&tile2, nb);
        let q = AuxQueries {
            aux: &aux,
            a_density: &a_density,
            b_density: &b_density,
            l: &l,
            a: &a,
            b_g1: &b_g1,
            b_g2: &b_g2,
        };
        let mut times = [Vec::new(), Vec::new()];
        let mut sums = [None, None];
        let points = backend.resident_points()?;
        for run in 0..=args.runs {
            for (way, joint) in [false, true].into_iter().enumerate() {
                let t0 = Instant::now();
                let sum = if joint {
                    let s = points.aux_msms(&q)?;
                    (s.l, s.a, s.b_g1, s.b_g2)
                } else {
                    let a_sel = crate::prover::dense(&aux, &a_density);
                    let b_sel = crate::prover::dense(&aux, &b_density);
                    (
                        points.msm_g1(0, &l, &aux)?,
                        points.msm_g1(1, &a, &a_sel)?,
                        points.msm_g1(2, &b_g1, &b_sel)?,
                        points.msm_g2(3, &b_g2, &b_sel)?,
                    )
                };
                if run > 0 {
                    times[way].push(t0.elapsed().as_secs_f64() * 1e3);
                }
                sums[way] = Some(sum);
            }
        }
        if sums[0] != sums[1] {
            anyhow::bail!("aux MSMs 2^{lg}: the joint sums differ from the separate ones");
        }
        let ratio = stats(&times[1]).0 / stats(&times[0]).0;
        eprintln!(
            "aux MSMs 2^{lg}: apart {:.1?} ms, joint {:.1?} ms",
            times[0], times[1]
        );
        let [apart, joint] = times;
        rows.push(Row {
            op: "aux apart",
            lg,
            ms: apart,
            note: "L, A, B G1, B G2; 45% 0, 45% 1".into(),
        });
        rows.push(Row {
            op: "aux joint",
            lg,
            ms: joint,
            note: format!("{ratio:.2}× apart, same sums"),
        });
    }
    backend.clear_cache()?;
    Ok(())
}

/// Host-to-device uploads of 2^lg scalars (a partition's A, B, C or aux vector), from
/// pageable memory and from a page-locked pool block; the note gives GB/s.
fn bench_upload(
    gpu: &Gpu,
    sizes: &[u32],
    args: &GpuBenchArgs,
    rows: &mut Vec<Row>,
) -> anyhow::Result<()> {
    let pool = PinnedPool::new(8 << 30, crate::gpu::pinned::allocator(gpu.context()));
    for &lg in sizes {
        let heap = random_scalars(1 << lg, u64::from(lg));
        let pinned = Scalars::from(heap.clone()).pin(&pool);
        anyhow::ensure!(
            pinned.is_pinned(),
            "no page-locked block for 2^{lg} scalars"
        );
        // Memory owned elsewhere and registered in place (the parameters a small plan
        // streams), in 4 KiB pages and, where the kernel grants them, in 2 MiB pages.
        let huge = HugeVec::new(&heap);
        let reg_huge = Registration::new(&gpu.context(), huge.bytes())?;
        let mut reg = None;
        let mut dst = gpu.alloc(std::mem::size_of_val(heap.as_slice()))?;
        let sources: [(&'static str, &[u8]); 4] = [
            ("upload", bytes(&heap)),
            ("upload pin", bytes(&pinned[..])),
            ("upload reg", bytes(&heap)),
            ("upload reg2M", huge.bytes()),
        ];
        for (i, (op, src)) in sources.into_iter().enumerate() {
            if i == 2 {
                // The pageable run is over: from here on the heap vector is registered.
                reg = Some(Registration::new(&gpu.context(), bytes(&heap))?);
            }
            let mut ms = Vec::new();
            for run in 0..=args.runs {
                let t = Instant::now();
                gpu.upload(&mut dst, src)?;
                gpu.sync()?;
                if run > 0 {
                    ms.push(t.elapsed().as_secs_f64() * 1e3);
                }
            }
            let (med, _, _) = stats(&ms);
            let note = format!("{:.1} GB/s", src.len() as f64 / med / 1e6);
            rows.push(Row { op, lg, ms, note });
        }
        drop((reg, reg_huge));
    }
    Ok(())
}

/// A copy of some scalars in memory aligned to 2 MiB and advised to the kernel as huge pages
/// before it is touched (where transparent huge pages are on, it gets 2 MiB pages).
struct HugeVec {
    ptr: *mut u8,
    layout: std::alloc::Layout,
}

impl HugeVec {
    fn new(src: &[Scalar]) -> Self {
        let len = std::mem::size_of_val(src).max(1);
        let layout = std::alloc::Layout::from_size_align(len, 2 << 20)
            .unwrap_or_else(|_| std::alloc::Layout::new::<u8>());
        // SAFETY: a non-zero layout; the memory is written below before anything reads it.
        let ptr = unsafe { std::alloc::alloc(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        // SAFETY: `ptr` starts `len` bytes of a live allocation, 2 MiB-aligned (page-aligned as
        // madvise needs); the advice changes no contents. Its result is only a hint.
        unsafe { libc::madvise(ptr.cast(), len, libc::MADV_HUGEPAGE) };
        // SAFETY: `ptr` is valid for `len` bytes, which `bytes(src)` has.
        unsafe { std::ptr::copy_nonoverlapping(bytes(src).as_ptr(), ptr, len) };
        HugeVec { ptr, layout }
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: `ptr` holds `layout.size()` initialised bytes for the life of self.
        unsafe { std::slice::from_raw_parts(self.ptr, self.layout.size()) }
    }
}

impl Drop for HugeVec {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout, freed once.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) };
    }
}

/// Runs the benchmark on the device `options` name, tuned as they say, and prints the table.
pub fn run(args: GpuBenchArgs, options: &GpuOptions) -> anyhow::Result<()> {
    let gpu = Gpu::open(options)?;
    let i = &gpu.info;
    println!(
        "device {}: {} ({} SMs, {:.0} GiB, sm_{}, driver {}), kernels {} in {:.0} ms",
        i.ordinal,
        i.name,
        i.sm_count,
        i.total_mem as f64 / (1u64 << 30) as f64,
        i.arch,
        i.driver_version,
        if i.module_cached {
            "from cache"
        } else {
            "compiled"
        },
        i.module_ms
    );
    let mut rows = Vec::new();
    bench_ntt(&gpu, &args.ntt, &args, &mut rows)?;
    bench_msm(&gpu, Curve::G1, &args.g1, &args, &mut rows)?;
    bench_msm(&gpu, Curve::G2, &args.g2, &args, &mut rows)?;
    bench_h(&gpu, &args.h, &args, &mut rows)?;
    bench_aux(options, &args.aux, &args, &mut rows)?;
    bench_upload(&gpu, &args.upload, &args, &mut rows)?;
    println!(
        "{} timed runs each after a warm-up; ours = median (min–max); sppark: {SPPARK_SOURCE}; \
         ratio = our min / sppark's best (not measured side by side)",
        args.runs
    );
    println!(
        "{:<10} {:>5} {:>12} {:>19} {:>10} {:>7}  note",
        "op", "size", "ours ms", "min–max", "sppark ms", "ratio"
    );
    for r in &rows {
        let (med, lo, hi) = stats(&r.ms);
        let (sp, ratio) = match sppark_ms(r.op, r.lg) {
            Some(s) => (format!("{s:.2}"), format!("{:.2}", lo / s)),
            None => ("–".into(), "–".into()),
        };
        println!(
            "{:<10} {:>5} {:>12.2} {:>19} {:>10} {:>7}  {}",
            r.op,
            format!("2^{}", r.lg),
            med,
            format!("{lo:.2}–{hi:.2}"),
            sp,
            ratio,
            r.note
        );
    }
    Ok(())
}
