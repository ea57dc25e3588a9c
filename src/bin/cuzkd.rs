//! `cuzkd`, the cuzk proving daemon. Everything lives in [`cuzk::daemon`]; this is the one place
//! that reads the daemon's environment, once, before anything else runs.

use std::env::var_os;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// Frees of gigabytes hand their pages back in pieces, so that they do not hold up the
/// threads that map memory meanwhile (`cuzk::prover::gentle`).
#[global_allocator]
static ALLOCATOR: cuzk::prover::gentle::GentleAlloc = cuzk::prover::gentle::GentleAlloc;

/// The variables cuzkd honours (cuzkd(8), ENVIRONMENT). Empty values count as unset.
fn environment() -> cuzk::daemon::Environment {
    let set = |name: &str| var_os(name).filter(|v| !v.is_empty());
    let text = |name: &str| set(name).and_then(|v| v.into_string().ok());
    cuzk::daemon::Environment {
        param_cache: set("FIL_PROOFS_PARAMETER_CACHE").map(PathBuf::from),
        log_filter: text("CUZK_LOG"),
        notify_socket: set("NOTIFY_SOCKET"),
        watchdog_usec: text("WATCHDOG_USEC"),
        watchdog_pid: text("WATCHDOG_PID"),
        journal_stream: set("JOURNAL_STREAM"),
        kernel_cache: cuzk::config::default_kernel_cache(
            set("CACHE_DIRECTORY").as_deref(),
            set("XDG_CACHE_HOME").as_deref(),
            set("HOME").as_deref(),
        ),
        state_directory: set("STATE_DIRECTORY"),
    }
}

/// Exit 0 after a clean stop (or a good `--check-config`), 78 on a configuration error, 1
/// otherwise.
fn main() -> ExitCode {
    let env = environment();
    let args = cuzk::daemon::cli::Args::parse();
    let startup = match cuzk::daemon::load(&args, &env) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("cuzkd: {e}");
            return ExitCode::from(cuzk::config::EXIT_CONFIG);
        }
    };
    if args.check_config {
        if let Some(c) = &startup.conflict {
            eprintln!("cuzkd: warning: {c}");
        }
        print!("{}", startup.config.to_toml());
        return ExitCode::SUCCESS;
    }
    cuzk::daemon::serve(startup, env)
}
