//! The parameter set of each proof kind and sector size, and the kinds' parameter
//! generation and blank shapes by kind; the registered proof types themselves are in
//! [`super::proof_types`] (re-exported here).

use super::{porep, post, snap};
use crate::pipeline::ProveError;
use crate::srs::{ParamsId, ProofKind};

pub use super::proof_types::{
    post_proof, post_proof_by_id, seal_proof, seal_proof_by_id, update_proof, update_proof_by_id,
    FIRST_WINDOW_POST, POST_BY_ID, SEAL_BY_ID, UPDATE_BY_ID,
};

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

/// The recorded shape of the blank circuit of `kind` at `sector_size`, for cuzk's own setup
/// (PoRep's is recorded from a synthetic partition instead: `params_gen::setup`).
#[cfg(feature = "scaffolding")] // only params_gen generates parameters
pub(crate) fn blank_shape(
    kind: ProofKind,
    sector_size: u64,
) -> Result<crate::synth::R1cs, ProveError> {
    match kind {
        ProofKind::PoRep => Err(ProveError::InvalidInput(
            "PoRep's shape is recorded from a synthetic partition".into(),
        )),
        ProofKind::SnapDeals => snap::blank_shape(update_proof(sector_size)?),
        ProofKind::WindowPoSt | ProofKind::WinningPoSt => {
            post::blank_shape(post_proof(kind, sector_size)?)
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
