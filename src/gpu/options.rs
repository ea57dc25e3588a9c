//! [`GpuOptions`]: everything the GPU backend can be told, built once at start (by `cuzkd`
//! from its configuration's `[gpu]` and `[debug]` tables, by `cuzk` from its flags) and handed
//! to [`super::Gpu::open`] / [`super::GpuBackend::new`]. The host drivers of the kernels read
//! their tuning from the device handle they are given; nothing here reads the environment.

use std::path::PathBuf;

use super::msm::{Curve, ACCUMULATE_PIECE, AFFINE_MIN_CHAINS, CHUNK_MIN, UPLOAD_CHUNK};

/// Bytes of page-locked host memory for the two upload staging buffers by default (two of
/// 32 MiB: see `device.rs`'s `Staging` for what they buy).
pub const DEFAULT_STAGING_BYTES: usize = 64 << 20;

/// Smallest staging budget that is used at all: two buffers of 1 MiB, the piece the host fills
/// them in. Budgets below it (other than 0, which turns staging off) are refused by the
/// configuration.
pub const MIN_STAGING_BYTES: usize = 2 << 20;

/// The GPU backend's options. [`Default`] is the production setting on device 0 without an
/// on-disk kernel cache.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuOptions {
    /// CUDA device ordinal (one of `proving.gpus`).
    pub ordinal: usize,
    /// Directory of the compiled-kernel cache (`gpu.kernel_cache`); `None`: no cache, every
    /// start compiles the kernels (about 10 s).
    pub kernel_cache: Option<PathBuf>,
    /// Extra NVRTC `-D` definitions, `NAME` or `NAME=VALUE`, for kernel variants in A/B runs
    /// (`debug.nvrtc_defines`); they take part in the cache key.
    pub nvrtc_defines: Vec<String>,
    /// Page-locked host memory for the two upload staging buffers, in bytes (`gpu.staging_memory`);
    /// each buffer gets half. 0: no staging, pageable uploads go through the driver (slower).
    pub staging_bytes: usize,
    /// The MSM's tuning (`debug.gpu_msm_*`).
    pub msm: MsmTuning,
    /// The NTT's and quotient's tuning (`debug.gpu_ntt_*`, `debug.gpu_quotient_serial`).
    pub ntt: NttTuning,
    /// Per-phase timings as `tracing` debug events (`debug.gpu_trace`). Synchronizes the device
    /// after every phase, so only for diagnosis.
    pub trace: bool,
    /// Device memory the backend may hold at most (`gpu.memory_limit`), in bytes; `None`: what
    /// is free when the device is opened, less a margin ([`super::budget::device_budget`]).
    pub memory_limit: Option<u64>,
}

impl Default for GpuOptions {
    fn default() -> Self {
        GpuOptions {
            ordinal: 0,
            kernel_cache: None,
            nvrtc_defines: Vec::new(),
            staging_bytes: DEFAULT_STAGING_BYTES,
            msm: MsmTuning::default(),
            ntt: NttTuning::default(),
            trace: false,
            memory_limit: None,
        }
    }
}

/// How the MSM is cut up. The defaults are the measured best on the H200 (docs/gpu-notes.md).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MsmTuning {
    /// A window width forced on every MSM (clamped to 4..=24); `None`: chosen per MSM by
    /// [`super::msm::window_bits`].
    pub window_bits: Option<u32>,
    /// Smallest chunk of the balanced bucket accumulation, in points (at least 1).
    pub chunk_min: u64,
    /// Scalars per piece of the overlapped scalar upload (at least 1).
    pub upload_chunk: usize,
    /// Entries of the bucket-sorted list per launch of the bucket sums (a G2 launch a third of
    /// them): the steps of [`super::msm::MsmRun`].
    pub accumulate_piece: u64,
    /// G1 bucket sums of at least this many chunks in the batch-affine walk
    /// (`cuda/msm_affine.cu`) instead of mixed XYZZ additions; `None`: never
    /// (`debug.gpu_msm_batch_affine`, a tuning variant).
    pub batch_affine_min_chains: Option<u64>,
}

impl Default for MsmTuning {
    fn default() -> Self {
        MsmTuning {
            window_bits: None,
            chunk_min: CHUNK_MIN,
            upload_chunk: UPLOAD_CHUNK,
            accumulate_piece: ACCUMULATE_PIECE,
            batch_affine_min_chains: None,
        }
    }
}

impl MsmTuning {
    /// The window width for `m` full scalars: the forced one, else the measured table's.
    pub fn window_bits(&self, m: usize, curve: Curve) -> u32 {
        match self.window_bits {
            Some(c) => c.clamp(4, 24),
            None => super::msm::window_bits(m, curve),
        }
    }
}

/// How the NTT passes are cut and launched, and how the quotient's inputs go up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NttTuning {
    /// Most butterfly stages per shared-memory pass (1..=10).
    pub max_stages: u32,
    /// Fewest threads per pass block (1..=1024).
    pub min_threads: u32,
    /// Stages per pass for A/B runs (e.g. `[10, 9, 8]`), used for the domains whose size they
    /// add up to when none exceeds 10; empty: spread evenly under `max_stages`.
    pub split: Vec<u32>,
    /// Each quotient input uploaded after all earlier work instead of overlapping the
    /// transforms of the one before (A/B runs).
    pub quotient_serial: bool,
}

impl Default for NttTuning {
    fn default() -> Self {
        NttTuning {
            max_stages: super::ntt::MAX_STAGES,
            min_threads: super::ntt::MIN_THREADS,
            split: Vec::new(),
            quotient_serial: false,
        }
    }
}

impl GpuOptions {
    /// The options the configuration's `[gpu]` table and `[debug]` tuning keys describe. The
    /// configuration checked every range when it was parsed.
    pub fn from_config(config: &crate::config::Config) -> Self {
        let (gpu, debug) = (&config.gpu, &config.debug);
        GpuOptions {
            // Each device's backend sets its own (`proving.gpus`).
            ordinal: 0,
            kernel_cache: gpu.kernel_cache.clone(),
            nvrtc_defines: debug.nvrtc_defines.clone(),
            // A budget beyond the address space cannot be allocated anyway: as much as fits.
            staging_bytes: usize::try_from(gpu.staging_memory).unwrap_or(usize::MAX),
            msm: MsmTuning {
                window_bits: debug.gpu_msm_window_bits,
                chunk_min: debug.gpu_msm_chunk_min,
                upload_chunk: debug.gpu_msm_upload_chunk,
                accumulate_piece: ACCUMULATE_PIECE,
                batch_affine_min_chains: debug.gpu_msm_batch_affine.then_some(AFFINE_MIN_CHAINS),
            },
            ntt: NttTuning {
                max_stages: debug.gpu_ntt_max_stages,
                min_threads: debug.gpu_ntt_min_threads,
                split: debug.gpu_ntt_split.clone(),
                quotient_serial: debug.gpu_quotient_serial,
            },
            trace: debug.gpu_trace,
            memory_limit: gpu.memory_limit,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    /// The configuration's documented defaults are the library's: `cuzkd` with an empty
    /// configuration tunes exactly as the built-in defaults do.
    #[test]
    fn the_configuration_defaults_are_the_built_in_ones() {
        assert_eq!(
            GpuOptions::from_config(&Config::default()),
            GpuOptions::default()
        );
    }

    #[test]
    fn forced_window_widths_are_clamped() {
        let mut t = MsmTuning::default();
        assert_eq!(t.window_bits(1 << 24, Curve::G1), 20);
        t.window_bits = Some(30);
        assert_eq!(t.window_bits(1 << 24, Curve::G1), 24);
        t.window_bits = Some(13);
        assert_eq!(t.window_bits(1 << 10, Curve::G2), 13);
    }
}
