//! The `cuzk` command-line tool. This is the one place that reads `cuzk`'s environment, once,
//! before anything else runs (see cuzk(1), ENVIRONMENT):
//!
//! * `FIL_PROOFS_PARAMETER_CACHE`, `CUZK_TEST_PARAMS`: default parameter directories;
//! * `CUZK_LOG`: the log filter;
//! * `XDG_CACHE_HOME`, `HOME`: the default kernel cache;
//! * for developers' A/B runs only (not for operators: cuzkd takes the same settings from its
//!   configuration's `[gpu]` and `[debug]` tables), the variables below, which set the options
//!   `cuzk bench`, `prove --standalone` and `demo` start from (`cuzk bench` flags win):
//!   `CUZK_GPU_CACHE` or `CUZK_KERNEL_CACHE` (gpu.kernel_cache), `CUZK_NVRTC_DEFINES=A,B=1`
//!   (debug.nvrtc_defines), `CUZK_GPU_NO_STAGING` (gpu.staging_memory = 0), `CUZK_MSM_C`,
//!   `CUZK_MSM_CHUNK`, `CUZK_MSM_UPLOAD_CHUNK` (debug.gpu_msm_*), `CUZK_NTT_MAX_STAGES`,
//!   `CUZK_NTT_MIN_THREADS`, `CUZK_NTT_SPLIT=10,9,8` (debug.gpu_ntt_*), `CUZK_QUOTIENT_SERIAL`
//!   (debug.gpu_quotient_serial), `CUZK_GPU_TRACE` (debug.gpu_trace; the log filter then
//!   defaults to `warn,cuzk::gpu=debug`), `CUZK_CPU_SIMD=off` (debug.cpu_simd = false),
//!   `CUZK_CPU_MSM_C` (debug.cpu_msm_window_bits).

use std::env::var_os;
use std::io::IsTerminal;
use std::path::PathBuf;

use clap::Parser;
use cuzk::gpu::GpuOptions;
use cuzk::prover::cpu::CpuOptions;

/// Frees of gigabytes hand their pages back in pieces, so that they do not hold up the
/// threads that map memory meanwhile (`cuzk::prover::gentle`).
#[global_allocator]
static ALLOCATOR: cuzk::prover::gentle::GentleAlloc = cuzk::prover::gentle::GentleAlloc;

/// A set, non-empty variable.
fn set(name: &str) -> Option<std::ffi::OsString> {
    var_os(name).filter(|v| !v.is_empty())
}

/// A set variable parsed as `T`; a value that does not parse is reported and ignored.
fn number<T: std::str::FromStr>(name: &str) -> Option<T> {
    let text = set(name)?.into_string().ok()?;
    match text.trim().parse() {
        Ok(v) => Some(v),
        Err(_) => {
            eprintln!("cuzk: warning: ignoring {name}={text:?} (not a number)");
            None
        }
    }
}

/// A comma-separated list variable.
fn list(name: &str) -> Vec<String> {
    set(name)
        .and_then(|v| v.into_string().ok())
        .map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|d| !d.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// The GPU options in-process proving starts from: the kernel cache, and the developer
/// variables (ranges are clamped where the options are used).
fn gpu_options() -> GpuOptions {
    let mut o = GpuOptions {
        kernel_cache: ["CUZK_GPU_CACHE", "CUZK_KERNEL_CACHE"]
            .iter()
            .find_map(|v| set(v))
            .map(PathBuf::from)
            .or_else(|| {
                cuzk::config::default_kernel_cache(
                    None,
                    set("XDG_CACHE_HOME").as_deref(),
                    set("HOME").as_deref(),
                )
            }),
        nvrtc_defines: list("CUZK_NVRTC_DEFINES"),
        trace: var_os("CUZK_GPU_TRACE").is_some(),
        ..GpuOptions::default()
    };
    if var_os("CUZK_GPU_NO_STAGING").is_some() {
        o.staging_bytes = 0;
    }
    o.msm.window_bits = number("CUZK_MSM_C");
    if let Some(k) = number("CUZK_MSM_CHUNK") {
        o.msm.chunk_min = k;
    }
    if let Some(k) = number("CUZK_MSM_UPLOAD_CHUNK") {
        o.msm.upload_chunk = k;
    }
    if let Some(t) = number("CUZK_NTT_MAX_STAGES") {
        o.ntt.max_stages = t;
    }
    if let Some(t) = number("CUZK_NTT_MIN_THREADS") {
        o.ntt.min_threads = t;
    }
    o.ntt.split = list("CUZK_NTT_SPLIT")
        .iter()
        .filter_map(|t| t.parse().ok())
        .collect();
    o.ntt.quotient_serial = var_os("CUZK_QUOTIENT_SERIAL").is_some();
    o
}

/// The CPU options in-process proving starts from (developer variables).
fn cpu_options() -> CpuOptions {
    CpuOptions {
        simd: set("CUZK_CPU_SIMD").is_none_or(|v| v != "off"),
        msm_window_bits: number("CUZK_CPU_MSM_C"),
    }
}

fn environment() -> cuzk::cli::Environment {
    cuzk::cli::Environment {
        param_cache: set("FIL_PROOFS_PARAMETER_CACHE").map(PathBuf::from),
        test_params: set("CUZK_TEST_PARAMS").map(PathBuf::from),
        gpu: gpu_options(),
        cpu: cpu_options(),
    }
}

fn main() -> std::process::ExitCode {
    let cli = cuzk::cli::Cli::parse();
    let env = environment();
    let options_traced =
        env.gpu.trace || matches!(&cli.command, cuzk::cli::Command::Bench(b) if b.gpu.trace);
    let default_filter = if options_traced {
        "warn,cuzk::gpu=debug"
    } else {
        "warn"
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            set("CUZK_LOG")
                .and_then(|v| v.into_string().ok())
                .and_then(|f| tracing_subscriber::EnvFilter::try_new(f).ok())
                .unwrap_or_else(|| tracing_subscriber::EnvFilter::new(default_filter)),
        )
        // Colours only for a person at a terminal: no escape codes in logs and pipes.
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .init();
    // filecoin-proofs reads its parameter directory from the environment once per process:
    // point it at the one this command uses while the process is still single-threaded.
    if let Some(dir) = cli.filecoin_proofs_param_dir(&env) {
        std::env::set_var("FIL_PROOFS_PARAMETER_CACHE", dir);
    }
    match cuzk::cli::run(cli, &env) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cuzk: error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
