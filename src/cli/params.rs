//! `cuzk params`: generate test parameters (cuzk's own setup, or bellperson's generator), list
//! the cache.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::meter::Meter;
use super::progress::Display;
use super::Environment;
use crate::params_gen::setup::{generate_fresh, Device, NOT_THE_CEREMONY};
use crate::params_gen::{ensure_params_with, GenOutcome, Generator};
use crate::proofs::registry::known_params;
use crate::proofs::shapes::{format_sector_size, parse_sector_size};
use crate::proofs::ProofKind;
use crate::srs::{list_param_dir, load_srs};

/// `cuzk params …`
#[derive(Debug, Subcommand)]
pub enum ParamsCommand {
    /// Generate random test parameters for the real circuits, with cuzk's own setup on every
    /// core (fresh secrets, NOT the ceremony's) unless --generator says otherwise; existing
    /// files are left alone.
    Generate(GenerateArgs),
    /// List the parameter files in the cache and whether cuzk can use them.
    List(ListArgs),
    /// Make one kind's parameters with cuzk's own Groth16 setup from the circuit's recorded
    /// shape, with fresh random secrets (or a given seed), on the CPU or the GPU (for 32 GiB).
    /// NOT the ceremony's parameters: for tests and measurements only.
    Setup(SetupArgs),
}

/// Options of `cuzk params setup`.
#[derive(Debug, Args)]
pub struct SetupArgs {
    /// Sector size (2KiB … 64GiB; 32GiB needs a GPU host with ~100 GB of memory).
    #[arg(long, value_parser = parse_sector_size)]
    pub sector_size: u64,
    /// Which proof kind (one).
    #[arg(long, value_enum, default_value = "porep")]
    pub kind: KindArg,
    /// Parameter directory [default: $FIL_PROOFS_PARAMETER_CACHE or
    /// /var/tmp/filecoin-proof-parameters]; it must not hold the set already.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Make the points on the GPU (the CPU otherwise).
    #[arg(long)]
    pub gpu: bool,
    /// The secrets' seed, 64 hex digits (printed when drawn at random): the same seed makes
    /// the same files.
    #[arg(long)]
    pub seed: Option<String>,
}

/// Which kinds to generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum KindArg {
    /// PoRep C2.
    Porep,
    /// SnapDeals.
    Snap,
    /// WinningPoSt.
    WinningPost,
    /// WindowPoSt.
    WindowPost,
    /// All four.
    All,
}

impl KindArg {
    fn kinds(self) -> Vec<ProofKind> {
        match self {
            KindArg::Porep => vec![ProofKind::PoRep],
            KindArg::Snap => vec![ProofKind::SnapDeals],
            KindArg::WinningPost => vec![ProofKind::WinningPoSt],
            KindArg::WindowPost => vec![ProofKind::WindowPoSt],
            // Smallest first, so that quick kinds are usable while PoRep still generates.
            KindArg::All => vec![
                ProofKind::WindowPoSt,
                ProofKind::WinningPoSt,
                ProofKind::SnapDeals,
                ProofKind::PoRep,
            ],
        }
    }
}

/// Which generator `cuzk params generate` uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GeneratorArg {
    /// cuzk's own Groth16 setup on every core, fresh random secrets (2 KiB PoRep: about 3
    /// minutes on 2 cores).
    Setup,
    /// bellperson's generate_random_parameters (2 KiB PoRep: about 17 minutes on 2 cores).
    Bellperson,
}

impl From<GeneratorArg> for Generator {
    fn from(g: GeneratorArg) -> Self {
        match g {
            GeneratorArg::Setup => Generator::Setup,
            GeneratorArg::Bellperson => Generator::Bellperson,
        }
    }
}

/// Options of `cuzk params generate`.
#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// Sector size (only test sizes are practical: 2KiB).
    #[arg(long, default_value = "2KiB", value_parser = parse_sector_size)]
    pub sector_size: u64,
    /// Which proof kinds.
    #[arg(long, value_enum, default_value = "all")]
    pub kind: KindArg,
    /// Parameter directory [default: $FIL_PROOFS_PARAMETER_CACHE or
    /// /var/tmp/filecoin-proof-parameters].
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// How the parameters are made.
    #[arg(long, value_enum, default_value = "setup")]
    pub generator: GeneratorArg,
}

/// Options of `cuzk params list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Parameter directory [default: $FIL_PROOFS_PARAMETER_CACHE or
    /// /var/tmp/filecoin-proof-parameters].
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Also parse each known file fully and report load time and GB/s.
    #[arg(long)]
    pub check: bool,
}

/// Runs `cuzk params …`.
pub fn run(cmd: ParamsCommand, env: &Environment) -> anyhow::Result<()> {
    match cmd {
        ParamsCommand::Generate(a) => generate(a, env),
        ParamsCommand::List(a) => list(a, env),
        ParamsCommand::Setup(a) => setup(a, env),
    }
}

fn setup(args: SetupArgs, env: &Environment) -> anyhow::Result<()> {
    let dir = args.dir.unwrap_or_else(|| env.param_dir());
    let seed: [u8; 32] = match &args.seed {
        Some(hex) => hex::decode(hex.trim())
            .ok()
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| anyhow::anyhow!("--seed takes 64 hex digits"))?,
        None => rand::random(),
    };
    let kind = match args.kind.kinds().as_slice() {
        [one] => *one,
        _ => anyhow::bail!("--kind takes one kind: porep, snap, winning-post or window-post"),
    };
    let device = if args.gpu {
        Device::Gpu(env.gpu.clone())
    } else {
        Device::Cpu
    };
    eprintln!(
        "cuzk: fresh setup, NOT the ceremony's parameters: {}",
        NOT_THE_CEREMONY.trim()
    );
    eprintln!("cuzk: seed {}", hex::encode(seed));
    let mut progress = Meter::new("cuzk", Display::for_stderr(false));
    let r = generate_fresh(&dir, kind, args.sector_size, seed, &device, &mut progress)?;
    drop(progress);
    println!(
        "{} written ({:.2} GB): recorded the circuit in {:.1} s, scalars in {:.1} s, points \
         and files in {:.1} s ({})",
        r.params.display(),
        r.bytes as f64 / 1e9,
        r.record.as_secs_f64(),
        r.scalars.as_secs_f64(),
        r.points.as_secs_f64(),
        if args.gpu { "GPU" } else { "CPU" }
    );
    Ok(())
}

fn generate(args: GenerateArgs, env: &Environment) -> anyhow::Result<()> {
    let dir = args.dir.unwrap_or_else(|| env.param_dir());
    for kind in args.kind.kinds() {
        let mut progress = Meter::new("cuzk", Display::for_stderr(false));
        let (id, outcome) = ensure_params_with(
            &dir,
            kind,
            args.sector_size,
            args.generator.into(),
            &mut progress,
        )?;
        drop(progress);
        match outcome {
            GenOutcome::Existing => {
                println!("{kind:<13} {} exists", id.params_file(&dir).display())
            }
            GenOutcome::Generated(t) => println!(
                "{kind:<13} {} generated in {:.1} s",
                id.params_file(&dir).display(),
                t.as_secs_f64()
            ),
        }
    }
    Ok(())
}

fn list(args: ListArgs, env: &Environment) -> anyhow::Result<()> {
    let dir = args.dir.unwrap_or_else(|| env.param_dir());
    let listed = list_param_dir(&dir, &known_params())
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", dir.display()))?;
    println!(
        "{:<13} {:>7} {:>10}  {:<8} file",
        "kind", "sector", "size", "status"
    );
    for p in listed {
        let (kind, size) = match &p.id {
            Some(id) => (id.kind.to_string(), format_sector_size(id.sector_size)),
            None => ("unknown".to_string(), "-".to_string()),
        };
        let status = if !p.has_vk {
            "no .vk".to_string()
        } else if args.check {
            match load_srs(&p.path) {
                Ok(srs) => format!(
                    "ok ({:.2} s, {:.2} GB/s)",
                    srs.load_time.as_secs_f64(),
                    srs.load_rate_gbps()
                ),
                Err(e) => format!("BAD: {e}"),
            }
        } else {
            "present".to_string()
        };
        println!(
            "{kind:<13} {size:>7} {:>9.1}M  {status:<8} {}",
            p.size as f64 / 1e6,
            p.path
                .file_name()
                .map(|f| f.to_string_lossy())
                .unwrap_or_default()
        );
    }
    Ok(())
}
