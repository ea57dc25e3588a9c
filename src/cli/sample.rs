//! `cuzk sample`: seal a fresh test sector and write an input file for every proof kind.

use std::path::PathBuf;

use clap::Args;
use filecoin_proofs_api::RegisteredSealProof;

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
}

/// Runs `cuzk sample`.
pub fn run(args: SampleArgs) -> anyhow::Result<()> {
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
