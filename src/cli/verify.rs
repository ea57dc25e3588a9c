//! `cuzk verify`: check a proof with filecoin-proofs' own verifier, outside any daemon.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::sealing::verify_c1_proof;

/// `cuzk verify …`
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// What to verify.
    #[command(subcommand)]
    pub what: VerifyWhat,
    /// Parameter directory holding the `.vk` file [default: $FIL_PROOFS_PARAMETER_CACHE or
    /// /var/tmp/filecoin-proof-parameters].
    #[arg(long, global = true)]
    pub param_dir: Option<PathBuf>,
}

/// The proofs `cuzk verify` checks.
#[derive(Debug, Subcommand)]
pub enum VerifyWhat {
    /// A PoRep C2 proof, with filecoin-proofs' `verify_seal` against the commitments, ticket
    /// and seed of its C1 output. Exits 0 when accepted, 1 when refused.
    Porep {
        /// The C1 output the proof was made from.
        #[arg(long)]
        c1: PathBuf,
        /// The proof bytes (`cuzk prove --out`).
        #[arg(long)]
        proof: PathBuf,
        /// The miner's actor id.
        #[arg(long)]
        miner_id: u64,
        /// The sector number.
        #[arg(long)]
        sector_number: u64,
    },
}

/// Runs `cuzk verify`: `Ok(true)` when the proof is accepted.
pub fn run(args: VerifyArgs) -> anyhow::Result<bool> {
    match args.what {
        VerifyWhat::Porep {
            c1,
            proof,
            miner_id,
            sector_number,
        } => {
            let read = |p: &PathBuf| {
                std::fs::read(p).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", p.display()))
            };
            let ok = verify_c1_proof(&read(&c1)?, miner_id, sector_number, &read(&proof)?)?;
            println!(
                "porep proof {}: {}",
                proof.display(),
                if ok {
                    "accepted by filecoin-proofs' verify_seal"
                } else {
                    "REFUSED"
                }
            );
            Ok(ok)
        }
    }
}
