//! `cuzk prove`: prove one input, in-process (`--standalone`) or through the daemon.

use std::path::PathBuf;
use std::sync::Arc;

use clap::{Args, Subcommand};

use super::client::{prove_via_daemon_with, DaemonOpts, JobOpts};
use super::Environment;
use crate::gpu::GpuOptions;
use crate::pipeline::ProvingService;
use crate::proofs::{PoRepRequest, ProofRequest};
use crate::prover::cpu::{CpuBackend, CpuOptions};
use crate::prover::Backend;

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

/// The proof kinds `cuzk prove` accepts.
#[derive(Debug, Subcommand)]
pub enum ProveWhat {
    /// PoRep C2 from a C1 output (filecoin-proofs-api JSON or lotus-bench's c1.json).
    Porep {
        /// The C1 output file.
        #[arg(long)]
        c1: PathBuf,
        /// The miner's actor id (1000 for f01000).
        #[arg(long)]
        miner_id: u64,
        /// The sector number (read from a lotus-bench wrapper when omitted).
        #[arg(long)]
        sector_number: Option<u64>,
    },
    /// SnapDeals update proof from a JSON input file (see docs/inputs.md).
    Snap {
        /// The input file.
        #[arg(long)]
        input: PathBuf,
    },
    /// One WindowPoSt partition from a JSON input file (see docs/inputs.md).
    WindowPost {
        /// The input file.
        #[arg(long)]
        input: PathBuf,
    },
    /// WinningPoSt from a JSON input file (see docs/inputs.md).
    WinningPost {
        /// The input file.
        #[arg(long)]
        input: PathBuf,
    },
}

fn read(path: &PathBuf) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))
}

/// Builds the request a `cuzk prove` command line describes.
pub fn request_of(what: &ProveWhat) -> anyhow::Result<ProofRequest> {
    Ok(match what {
        ProveWhat::Porep {
            c1,
            miner_id,
            sector_number,
        } => ProofRequest::PoRep(PoRepRequest {
            c1: read(c1)?,
            miner_id: *miner_id,
            sector_number: *sector_number,
        }),
        ProveWhat::Snap { input } => ProofRequest::SnapDeals {
            input: read(input)?,
        },
        ProveWhat::WindowPost { input } => ProofRequest::WindowPoSt {
            input: read(input)?,
        },
        ProveWhat::WinningPost { input } => ProofRequest::WinningPoSt {
            input: read(input)?,
        },
    })
}

/// The best backend available, built with `gpu` or `cpu`: the GPU when one is usable, else
/// the CPU (with the reason printed to the log).
pub fn select_backend(force_cpu: bool, gpu: &GpuOptions, cpu: &CpuOptions) -> Arc<dyn Backend> {
    if !force_cpu {
        match crate::gpu::try_backend(gpu) {
            Ok(b) => return b,
            Err(e) => tracing::warn!("no GPU backend ({e}); proving on the CPU"),
        }
    }
    Arc::new(CpuBackend::new(cpu.clone()))
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
