//! The `cuzk` command line: operator and client commands.
//!
//! Each subcommand's arguments and implementation live in their own file; this module only
//! assembles them. `cuzk` talks to the daemon by default; `prove --standalone`, `params` and
//! `bench` work in-process.

pub mod bench;
mod bench_msm;
pub mod client;
pub mod params;
pub mod prove;
pub mod sample;

use clap::{Parser, Subcommand};

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
    Bench(bench::BenchArgs),
    /// Seal a fresh 2 KiB test sector and write an input file for every proof kind.
    Sample(sample::SampleArgs),
    /// Commands that talk to a running cuzkd.
    #[command(flatten)]
    Client(client::ClientCommand),
}

/// Runs the parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Prove(args) => prove::run(args),
        Command::Params(cmd) => params::run(cmd),
        Command::Bench(cmd) => bench::run(cmd),
        Command::Sample(args) => sample::run(args),
        Command::Client(cmd) => client::run(cmd),
    }
}
