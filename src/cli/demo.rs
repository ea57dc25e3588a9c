//! `cuzk demo`: the whole path on an embedded default — test parameters, an in-process
//! daemon on a temporary socket, a freshly sealed 2 KiB sector, its PoRep C2 proved over the
//! socket, checked with filecoin-proofs' own verifier, and the timing table.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context as _};
use filecoin_proofs_api::RegisteredSealProof;

use crate::config::Config;
use crate::daemon::InProcess;
use crate::params_gen::{ensure_params_with, GenOutcome, Generator};
use crate::pipeline::ProvingService;
use crate::proofs::{ProofKind, ProofRequest};
use crate::proto::{ProofResult, Submit};

/// `cuzk demo`
#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Parameter directory [default: $CUZK_TEST_PARAMS, else
    /// /var/tmp/filecoin-proof-parameters]. Missing 2 KiB PoRep parameters are generated
    /// there with cuzk's own setup on every core (fresh random secrets, NOT the ceremony's;
    /// existing files are never modified).
    #[arg(long)]
    pub param_dir: Option<PathBuf>,
    /// Use the CPU backend even when a GPU is present.
    #[arg(long)]
    pub cpu: bool,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// The demo's miner and sector.
const MINER_ID: u64 = 1000;
const SECTOR_NUMBER: u64 = 1;
const SECTOR_SIZE: u64 = 2048;

/// A private temporary directory, removed on drop.
struct WorkDir(PathBuf);

impl WorkDir {
    fn new() -> anyhow::Result<Self> {
        use std::os::unix::fs::DirBuilderExt;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let path = std::env::temp_dir().join(format!("cuzk-demo-{}-{nanos}", std::process::id()));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .with_context(|| format!("creating {}", path.display()))?;
        Ok(Self(path))
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The demo's parameter directory: `--param-dir`, else `CUZK_TEST_PARAMS` (from `env`), else
/// filecoin-proofs' default. `cuzk`'s `main` points filecoin-proofs' verifier at it.
pub fn param_dir(args: &DemoArgs, env: &crate::cli::Environment) -> PathBuf {
    args.param_dir
        .clone()
        .or_else(|| env.test_params.clone())
        .unwrap_or_else(|| PathBuf::from(crate::srs::DEFAULT_PARAM_DIR))
}

/// Runs the demo with the built-in defaults for what `cuzk` takes from its environment (the
/// command line goes through [`run_with`]).
pub fn run(args: DemoArgs) -> anyhow::Result<()> {
    run_with(args, &crate::cli::Environment::default())
}

/// Runs the demo. filecoin-proofs' verifier reads its verifying key from
/// `FIL_PROOFS_PARAMETER_CACHE`, which `cuzk`'s `main` set to [`param_dir`] before any thread
/// existed.
pub fn run_with(args: DemoArgs, env: &crate::cli::Environment) -> anyhow::Result<()> {
    let dir = param_dir(&args, env);
    let params_time = test_params(&dir)?;
    let work = WorkDir::new()?;
    step("sealing a fresh 2 KiB sector (PC1, PC2, C1) …");
    let t = Instant::now();
    let sector = crate::sealing::seal_sector(
        &work.0.join("sector"),
        RegisteredSealProof::StackedDrg2KiBV1_1,
        MINER_ID,
        SECTOR_NUMBER,
    )
    .context("sealing the demo sector")?;
    let seal_time = t.elapsed();
    let result = prove_over_the_socket(&dir, &work.0, &sector, args.cpu, env)?;

    let t = Instant::now();
    let valid = sector
        .verify_porep(&result.proof, &dir)
        .context("verifying with filecoin-proofs")?;
    let verify_time = t.elapsed();
    ensure!(valid, "filecoin-proofs rejected the proof");
    let times = Times {
        params: params_time,
        seal: seal_time,
        verify: verify_time,
    };
    if args.json {
        print_json(&result, &times);
    } else {
        print_table(&result, &times);
    }
    Ok(())
}

fn step(msg: &str) {
    eprintln!("cuzk demo: {msg}");
}

/// The 2 KiB PoRep test parameters in `dir`, generated where missing; how long that took.
fn test_params(dir: &Path) -> anyhow::Result<Duration> {
    let t = Instant::now();
    let mut meter = crate::cli::meter::Meter::new(
        "cuzk demo",
        crate::cli::progress::Display::for_stderr(false),
    );
    let (_, outcome) = ensure_params_with(
        dir,
        ProofKind::PoRep,
        SECTOR_SIZE,
        Generator::Setup,
        &mut meter,
    )
    .context("generating 2 KiB test parameters")?;
    drop(meter);
    match outcome {
        GenOutcome::Existing => step(&format!(
            "2 KiB PoRep parameters found in {}",
            dir.display()
        )),
        GenOutcome::Generated(d) => step(&format!(
            "generated 2 KiB PoRep parameters in {:.1} s",
            d.as_secs_f64()
        )),
    }
    Ok(t.elapsed())
}

/// The sector's PoRep C2 proved by an in-process daemon on a socket in `work`, followed
/// over the socket until done.
fn prove_over_the_socket(
    params: &Path,
    work: &Path,
    sector: &crate::sealing::SealedSector,
    force_cpu: bool,
    env: &crate::cli::Environment,
) -> anyhow::Result<ProofResult> {
    let daemon = start_daemon(params, work, force_cpu, env)?;
    step(&format!(
        "daemon listening on {}",
        daemon.socket().display()
    ));
    let mut client = super::connect(daemon.socket())?;
    let request = ProofRequest::PoRep(crate::proofs::PoRepRequest {
        c1: sector.c1_json.clone(),
        miner_id: MINER_ID,
        sector_number: Some(SECTOR_NUMBER),
    });
    let accepted = client.submit(Submit {
        request_id: None,
        priority: None,
        input: request.into(),
    })?;
    step(&format!(
        "proving job {} over the socket …",
        accepted.job_id
    ));
    let result = super::follow(&mut client, accepted.job_id, false)?;
    drop(client);
    daemon.stop();
    Ok(result)
}

/// How long the demo's steps around the proof took.
struct Times {
    params: Duration,
    seal: Duration,
    verify: Duration,
}

fn print_json(result: &ProofResult, times: &Times) {
    let doc = serde_json::json!({
        "sector_size": SECTOR_SIZE,
        "proof": hex::encode(&result.proof),
        "backend": result.backend,
        "verified_by_filecoin_proofs": true,
        "seal_s": times.seal.as_secs_f64(),
        "params_s": times.params.as_secs_f64(),
        "timings_us": result.timings,
    });
    println!("{doc}");
}

fn print_table(result: &ProofResult, times: &Times) {
    println!(
        "2 KiB PoRep C2 proved by cuzkd ({}) and verified by filecoin-proofs",
        result.backend
    );
    println!(
        "  {:<16}{:>10.3} s",
        "test parameters",
        times.params.as_secs_f64()
    );
    println!("  {:<16}{:>10.3} s", "sealing", times.seal.as_secs_f64());
    print!("{}", super::timing_table(&result.timings));
    println!(
        "  {:<16}{:>10.3} s",
        "fil-proofs check",
        times.verify.as_secs_f64()
    );
    println!(
        "proof ({} bytes): {}",
        result.proof.len(),
        hex::encode(&result.proof)
    );
}

/// Starts the in-process daemon on a socket in `work`.
fn start_daemon(
    params: &Path,
    work: &Path,
    force_cpu: bool,
    env: &crate::cli::Environment,
) -> anyhow::Result<InProcess> {
    let mut config = Config::default();
    config.socket.path = work.join("cuzk.sock");
    config.socket.mode = 0o600;
    config.params.dir = params.to_path_buf();
    let backend = crate::cli::backend::select_backend(force_cpu, &env.gpu, &env.cpu);
    let devices = crate::daemon::DeviceCounts::of(std::slice::from_ref(&backend));
    let service = Arc::new(ProvingService::new(params.to_path_buf(), backend));
    Ok(InProcess::start(config, service, devices)?)
}
