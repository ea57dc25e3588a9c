//! `cuzk sample`: seal a fresh test sector and write an input file for every proof kind, or
//! (`--satisfiable`) write a PoRep C1 output of any sector size made without sealing.

use std::path::PathBuf;

use clap::Args;
use filecoin_proofs_api::RegisteredSealProof;

use crate::proofs::porep::satisfiable::c1_output;
use crate::proofs::shapes::parse_sector_size;
use crate::sealing::seal_sector;

/// Options of `cuzk sample`.
#[derive(Debug, Args)]
pub struct SampleArgs {
    /// Directory for the sector and the input files.
    #[arg(long)]
    pub out: PathBuf,
    /// The miner's actor id.
    #[arg(long, default_value_t = 1000)]
    pub miner_id: u64,
    /// The sector number.
    #[arg(long, default_value_t = 1)]
    pub sector_number: u64,
    /// The seal proof type (filecoin-proofs-api's name).
    #[arg(long, default_value = "StackedDrg2KiBV1_1")]
    pub proof: String,
    /// Write the PoRep C1 files only: no SnapDeals update and no PoSt inputs (minutes less
    /// at 512 MiB).
    #[arg(long)]
    pub porep_only: bool,
    /// Write a satisfiable PoRep C1 output made without sealing (any sector size: its
    /// challenged nodes are consistent, the rest of the sector does not exist) as c1.json,
    /// and what it was made for as satisfiable.json. Interactive PoRep (the V1_1 proof of
    /// --sector-size); --proof is ignored.
    #[arg(long)]
    pub satisfiable: bool,
    /// Sector size of --satisfiable.
    #[arg(long, default_value = "2KiB", value_parser = parse_sector_size)]
    pub sector_size: u64,
    /// Seed of --satisfiable's ticket, seed and random labels.
    #[arg(long, default_value_t = 1)]
    pub rng_seed: u64,
}

/// Runs `cuzk sample`.
pub fn run(args: SampleArgs) -> anyhow::Result<()> {
    if args.satisfiable {
        return satisfiable(&args);
    }
    let proof: RegisteredSealProof =
        serde_json::from_value(serde_json::Value::String(args.proof.clone()))
            .map_err(|_| anyhow::anyhow!("unknown seal proof type {:?}", args.proof))?;
    let sector_dir = args.out.join("sector");
    eprintln!("sealing a {:?} sector in {} …", proof, sector_dir.display());
    let sealed = seal_sector(&sector_dir, proof, args.miner_id, args.sector_number)?;
    let randomness: [u8; 32] = {
        let mut r: [u8; 32] = rand::random();
        r[31] &= 0x3f;
        r
    };
    let write = |name: &str, bytes: &[u8]| -> anyhow::Result<()> {
        let path = args.out.join(name);
        std::fs::write(&path, bytes)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
        println!("{}", path.display());
        Ok(())
    };
    write("c1.json", &sealed.c1_json)?;
    write("c1-lotus.json", &sealed.lotus_c1_wrapper())?;
    if args.porep_only {
        return Ok(());
    }
    write(
        "winning-post.json",
        &serde_json::to_vec_pretty(&sealed.winning_post_input(randomness)?)?,
    )?;
    write(
        "window-post.json",
        &serde_json::to_vec_pretty(&sealed.window_post_input(randomness)?)?,
    )?;
    write(
        "snap.json",
        &serde_json::to_vec_pretty(&sealed.snap_update(&args.out.join("snap"))?)?,
    )?;
    eprintln!(
        "prove with e.g.: cuzk prove porep --standalone --c1 {} --miner-id {} --sector-number {}",
        args.out.join("c1.json").display(),
        args.miner_id,
        args.sector_number
    );
    Ok(())
}

fn satisfiable(args: &SampleArgs) -> anyhow::Result<()> {
    let start = std::time::Instant::now();
    let s = c1_output(
        args.sector_size,
        args.miner_id,
        args.sector_number,
        args.rng_seed,
    )?;
    std::fs::create_dir_all(&args.out)?;
    let c1 = args.out.join("c1.json");
    std::fs::write(&c1, &s.c1_json)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", c1.display()))?;
    let about = serde_json::json!({
        "registered_proof": format!("{:?}", s.c1.registered_proof),
        "miner_id": s.miner_id,
        "sector_number": s.sector_number,
        "ticket": hex::encode(s.c1.ticket),
        "seed": hex::encode(s.c1.seed),
        "comm_r": hex::encode(s.c1.comm_r),
        "comm_d": hex::encode(s.c1.comm_d),
    });
    let meta = args.out.join("satisfiable.json");
    std::fs::write(&meta, serde_json::to_vec_pretty(&about)?)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", meta.display()))?;
    println!("{}", c1.display());
    println!("{}", meta.display());
    eprintln!(
        "made in {:.1} s; prove with e.g.: cuzk prove porep --c1 {} --miner-id {} --sector-number {}",
        start.elapsed().as_secs_f64(),
        c1.display(),
        s.miner_id,
        s.sector_number
    );
    Ok(())
}
