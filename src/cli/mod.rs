//! The `cuzk` command line: operator and client commands.
//!
//! Each subcommand's arguments and implementation live in their own file; this module only
//! assembles them. `cuzk` talks to the daemon by default; `prove --standalone`, `params` and
//! `bench` work in-process.

mod backend;
pub mod bench;
mod bench_daemon;
mod bench_day;
mod bench_day_report;
mod bench_day_run;
mod bench_day_schedule;
mod bench_free;
pub mod bench_gpu;
mod bench_hostile;
mod bench_hostile_args;
mod bench_hostile_grpc;
mod bench_msm;
mod bench_partition;
mod bench_pipeline;
mod bench_post;
mod bench_reference;
mod bench_soak;
pub mod client;
pub(crate) mod meter;
pub mod params;
pub mod plan;
pub(crate) mod progress;
pub mod prove;
mod request;
mod rss;
pub mod sample;
pub mod verify;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::gpu::GpuOptions;
use crate::prover::cpu::CpuOptions;

/// What `cuzk` takes from its process environment, read once by its `main` (in `src/bin`):
/// the commands read no environment themselves.
#[derive(Clone, Debug, Default)]
pub struct Environment {
    /// `FIL_PROOFS_PARAMETER_CACHE`: the default parameter directory.
    pub param_cache: Option<PathBuf>,
    /// `CUZK_TEST_PARAMS`: the default parameter directory of `cuzk demo`.
    pub test_params: Option<PathBuf>,
    /// The GPU options in-process proving starts from (kernel cache from `XDG_CACHE_HOME` or
    /// `HOME`; `cuzk bench` flags change them).
    pub gpu: GpuOptions,
    /// The CPU options in-process proving starts from (`cuzk bench` flags change them).
    pub cpu: CpuOptions,
}

impl Environment {
    /// The parameter directory where no flag names one: `FIL_PROOFS_PARAMETER_CACHE`, else
    /// filecoin-proofs' default.
    pub fn param_dir(&self) -> PathBuf {
        self.param_cache
            .clone()
            .unwrap_or_else(|| PathBuf::from(crate::srs::DEFAULT_PARAM_DIR))
    }
}

/// cuzk — Filecoin Groth16 proving (client of `cuzkd`, and standalone tools).
#[derive(Debug, Parser)]
#[command(name = "cuzk", version, about, long_about = None)]
pub struct Cli {
    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

/// Every `cuzk` subcommand.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Prove a PoRep C2, SnapDeals, WindowPoSt or WinningPoSt input (via the daemon, or
    /// in-process with --standalone).
    Prove(prove::ProveArgs),
    /// Manage Filecoin parameter files (test-parameter generation, listing).
    #[command(subcommand)]
    Params(params::ParamsCommand),
    /// Benchmarks against filecoin-proofs' own prover and sppark's GPU figures.
    Bench(Box<bench::BenchArgs>),
    /// Seal a fresh 2 KiB test sector and write an input file for every proof kind, or write a
    /// satisfiable PoRep C1 output of any size made without sealing (--satisfiable).
    Sample(sample::SampleArgs),
    /// Check a proof with filecoin-proofs' own verifier (no daemon).
    Verify(verify::VerifyArgs),
    /// Predict a batch's wall time, proofs/min, GPU busy and host memory from per-partition
    /// costs (a simulation of the proving stages; no daemon needed).
    Plan(plan::PlanArgs),
    /// Commands that talk to a running cuzkd.
    #[command(flatten)]
    Client(client::ClientCommand),
}

impl Cli {
    /// The parameter directory filecoin-proofs must see for this command (`cuzk demo` and the
    /// proof benchmarks call its verifier and prover, which read `FIL_PROOFS_PARAMETER_CACHE`
    /// once per process): `cuzk`'s `main` sets the variable to it before any thread exists.
    pub fn filecoin_proofs_param_dir(&self, env: &Environment) -> Option<PathBuf> {
        match &self.command {
            Command::Client(client::ClientCommand::Demo(args)) => {
                Some(client::demo::param_dir(args, env))
            }
            Command::Bench(args) => bench::filecoin_proofs_param_dir(args, env),
            Command::Verify(args) => {
                Some(args.param_dir.clone().unwrap_or_else(|| env.param_dir()))
            }
            _ => None,
        }
    }
}

/// Runs the parsed command line with what `cuzk` took from its environment.
pub fn run(cli: Cli, env: &Environment) -> anyhow::Result<()> {
    match cli.command {
        Command::Prove(args) => prove::run(args, env),
        Command::Params(cmd) => params::run(cmd, env),
        Command::Bench(cmd) => bench::run(*cmd, env),
        Command::Sample(args) => sample::run(args),
        Command::Verify(args) => match verify::run(args)? {
            true => Ok(()),
            false => Err(anyhow::anyhow!("the proof was refused")),
        },
        Command::Plan(args) => plan::run(args),
        Command::Client(client::ClientCommand::Demo(args)) => client::demo::run_with(args, env),
        Command::Client(cmd) => client::run(cmd),
    }
}
