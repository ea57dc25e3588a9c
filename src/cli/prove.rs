//! `cuzk prove`: prove one input, in-process (`--standalone`) or through the daemon.

use std::path::PathBuf;

use clap::Args;

use super::backend::select_backend;
use super::client::{prove_via_daemon_with, DaemonOpts, JobOpts};
pub use super::request::{request_of, ProveWhat};
use super::Environment;
use crate::pipeline::ProvingService;

/// `cuzk prove …`
#[derive(Debug, Args)]
pub struct ProveArgs {
    /// What to prove.
    #[command(subcommand)]
    pub what: ProveWhat,
    /// Where to write the proof bytes.
    #[arg(long, global = true)]
    pub out: Option<PathBuf>,
    /// Prove in this process instead of asking the daemon.
    #[arg(long, global = true)]
    pub standalone: bool,
    /// Parameter directory for --standalone [default: $FIL_PROOFS_PARAMETER_CACHE or
    /// /var/tmp/filecoin-proof-parameters].
    #[arg(long, global = true)]
    pub param_dir: Option<PathBuf>,
    /// Use the CPU backend even when a GPU is present (--standalone).
    #[arg(long, global = true)]
    pub cpu: bool,
    /// Daemon connection.
    #[command(flatten)]
    pub daemon: DaemonOpts,
    /// Priority and request id of the job (daemon only).
    #[command(flatten)]
    pub job: JobOpts,
}

/// Runs `cuzk prove …`.
pub fn run(args: ProveArgs, env: &Environment) -> anyhow::Result<()> {
    let request = request_of(&args.what)?;
    let proof = if args.standalone {
        let dir = args.param_dir.clone().unwrap_or_else(|| env.param_dir());
        let svc = ProvingService::new(dir, select_backend(args.cpu, &env.gpu, &env.cpu));
        let control = crate::pipeline::JobControl::new();
        let out = svc.prove(&request, &control)?;
        let t = &out.timings;
        eprintln!(
            "{} proof: {} partition(s) on {}; params {:.2} s, synthesis {:.2} s, proving {:.2} s, verification {:.3} s",
            out.kind,
            out.partitions,
            out.backend,
            t.param_load.as_secs_f64(),
            t.synthesis.as_secs_f64(),
            t.proving.as_secs_f64(),
            t.verification.as_secs_f64()
        );
        out.proof
    } else {
        prove_via_daemon_with(request, &args.daemon, &args.job)?
    };
    match &args.out {
        Some(path) => std::fs::write(path, &proof)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?,
        None => println!("{}", hex::encode(&proof)),
    }
    Ok(())
}
