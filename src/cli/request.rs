//! What `cuzk prove` and `cuzk bench` are asked to prove, and the request it makes.

use std::path::PathBuf;

use clap::Subcommand;

use crate::proofs::{PoRepRequest, ProofRequest};

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
