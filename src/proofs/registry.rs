//! The parameter set of each proof kind and sector size.

use filecoin_proofs_api::{RegisteredPoStProof, RegisteredSealProof, RegisteredUpdateProof};

use super::{porep, post, snap, ProofKind, ProveError};
use crate::srs::ParamsId;

/// The registered seal proof whose parameters serve PoRep at `size` (every seal-proof
/// variant of one sector size shares them).
pub fn seal_proof(size: u64) -> Result<RegisteredSealProof, ProveError> {
    use RegisteredSealProof::*;
    Ok(match size {
        2048 => StackedDrg2KiBV1_1,
        s if s == 8 << 20 => StackedDrg8MiBV1_1,
        s if s == 512 << 20 => StackedDrg512MiBV1_1,
        s if s == 32 << 30 => StackedDrg32GiBV1_1,
        s if s == 64 << 30 => StackedDrg64GiBV1_1,
        other => return Err(unsupported(other)),
    })
}

/// The registered WinningPoSt or WindowPoSt proof at `size`.
pub fn post_proof(kind: ProofKind, size: u64) -> Result<RegisteredPoStProof, ProveError> {
    use RegisteredPoStProof::*;
    let winning = kind == ProofKind::WinningPoSt;
    Ok(match (size, winning) {
        (2048, true) => StackedDrgWinning2KiBV1,
        (2048, false) => StackedDrgWindow2KiBV1_2,
        (s, true) if s == 8 << 20 => StackedDrgWinning8MiBV1,
        (s, false) if s == 8 << 20 => StackedDrgWindow8MiBV1_2,
        (s, true) if s == 512 << 20 => StackedDrgWinning512MiBV1,
        (s, false) if s == 512 << 20 => StackedDrgWindow512MiBV1_2,
        (s, true) if s == 32 << 30 => StackedDrgWinning32GiBV1,
        (s, false) if s == 32 << 30 => StackedDrgWindow32GiBV1_2,
        (s, true) if s == 64 << 30 => StackedDrgWinning64GiBV1,
        (s, false) if s == 64 << 30 => StackedDrgWindow64GiBV1_2,
        (other, _) => return Err(unsupported(other)),
    })
}

/// The registered update proof at `size`.
pub fn update_proof(size: u64) -> Result<RegisteredUpdateProof, ProveError> {
    use RegisteredUpdateProof::*;
    Ok(match size {
        2048 => StackedDrg2KiBV1,
        s if s == 8 << 20 => StackedDrg8MiBV1,
        s if s == 512 << 20 => StackedDrg512MiBV1,
        s if s == 32 << 30 => StackedDrg32GiBV1,
        s if s == 64 << 30 => StackedDrg64GiBV1,
        other => return Err(unsupported(other)),
    })
}

fn unsupported(size: u64) -> ProveError {
    ProveError::InvalidInput(format!("unsupported sector size {size}"))
}

/// The parameter set that proofs of `kind` at `sector_size` use.
pub fn params_id(kind: ProofKind, sector_size: u64) -> Result<ParamsId, ProveError> {
    match kind {
        ProofKind::PoRep => porep::params_id(seal_proof(sector_size)?),
        ProofKind::SnapDeals => snap::params_id(update_proof(sector_size)?),
        ProofKind::WindowPoSt | ProofKind::WinningPoSt => {
            post::params_id(post_proof(kind, sector_size)?)
        }
    }
}

/// Random Groth16 parameters for the blank circuit of `kind` at `sector_size` (test use).
#[cfg(feature = "scaffolding")] // only params_gen generates parameters
pub(crate) fn generate(
    kind: ProofKind,
    sector_size: u64,
) -> Result<bellperson::groth16::Parameters<blstrs::Bls12>, ProveError> {
    match kind {
        ProofKind::PoRep => porep::generate_params(seal_proof(sector_size)?),
        ProofKind::SnapDeals => snap::generate_params(update_proof(sector_size)?),
        ProofKind::WindowPoSt | ProofKind::WinningPoSt => {
            post::generate_params(post_proof(kind, sector_size)?)
        }
    }
}

/// Every parameter set cuzk knows, for listing the cache.
pub fn known_params() -> Vec<ParamsId> {
    let mut out = Vec::new();
    for size in super::shapes::SECTOR_SIZES {
        for kind in ProofKind::ALL {
            if let Ok(id) = params_id(kind, size) {
                out.push(id);
            }
        }
    }
    out
}
