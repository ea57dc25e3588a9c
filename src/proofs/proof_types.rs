//! Filecoin's registered proof types: by their integer ids, and by proof kind and sector
//! size. The kinds and the binary inputs read them; [`super::registry`] re-exports them.

use filecoin_proofs_api::{RegisteredPoStProof, RegisteredSealProof, RegisteredUpdateProof};

use crate::pipeline::ProveError;
use crate::srs::ProofKind;

// Filecoin's integer proof-type ids, as Lotus and Curio hold them (go-state-types
// `abi.RegisteredSealProof`, `abi.RegisteredPoStProof`, `abi.RegisteredUpdateProof`): written
// out rather than derived from the API enums' declaration order, since the ids are Filecoin's
// (on chain, never renumbered) and one family is named differently on each side (Lotus's
// `StackedDrgWindow*V1_1` = 10–14 is the API's `StackedDrgWindow*V1_2`, the WindowPoSt
// grindability fix, as filecoin-ffi maps it). `docs/protocol.md` has the table.

/// `abi.RegisteredSealProof` 0–19, by id.
pub const SEAL_BY_ID: [RegisteredSealProof; 20] = {
    use RegisteredSealProof::*;
    [
        StackedDrg2KiBV1,
        StackedDrg8MiBV1,
        StackedDrg512MiBV1,
        StackedDrg32GiBV1,
        StackedDrg64GiBV1,
        StackedDrg2KiBV1_1,
        StackedDrg8MiBV1_1,
        StackedDrg512MiBV1_1,
        StackedDrg32GiBV1_1,
        StackedDrg64GiBV1_1,
        StackedDrg2KiBV1_1_Feat_SyntheticPoRep,
        StackedDrg8MiBV1_1_Feat_SyntheticPoRep,
        StackedDrg512MiBV1_1_Feat_SyntheticPoRep,
        StackedDrg32GiBV1_1_Feat_SyntheticPoRep,
        StackedDrg64GiBV1_1_Feat_SyntheticPoRep,
        StackedDrg2KiBV1_2_Feat_NonInteractivePoRep,
        StackedDrg8MiBV1_2_Feat_NonInteractivePoRep,
        StackedDrg512MiBV1_2_Feat_NonInteractivePoRep,
        StackedDrg32GiBV1_2_Feat_NonInteractivePoRep,
        StackedDrg64GiBV1_2_Feat_NonInteractivePoRep,
    ]
};

/// `abi.RegisteredPoStProof` 0–14, by id: WinningPoSt 0–4, WindowPoSt 5–14.
pub const POST_BY_ID: [RegisteredPoStProof; 15] = {
    use RegisteredPoStProof::*;
    [
        StackedDrgWinning2KiBV1,
        StackedDrgWinning8MiBV1,
        StackedDrgWinning512MiBV1,
        StackedDrgWinning32GiBV1,
        StackedDrgWinning64GiBV1,
        StackedDrgWindow2KiBV1,
        StackedDrgWindow8MiBV1,
        StackedDrgWindow512MiBV1,
        StackedDrgWindow32GiBV1,
        StackedDrgWindow64GiBV1,
        // go-state-types `StackedDrgWindow*V1_1`: filecoin-ffi maps them to these.
        StackedDrgWindow2KiBV1_2,
        StackedDrgWindow8MiBV1_2,
        StackedDrgWindow512MiBV1_2,
        StackedDrgWindow32GiBV1_2,
        StackedDrgWindow64GiBV1_2,
    ]
};

/// The WinningPoSt ids of [`POST_BY_ID`] are below this one.
pub const FIRST_WINDOW_POST: u64 = 5;

/// `abi.RegisteredUpdateProof` 0–4, by id.
pub const UPDATE_BY_ID: [RegisteredUpdateProof; 5] = {
    use RegisteredUpdateProof::*;
    [
        StackedDrg2KiBV1,
        StackedDrg8MiBV1,
        StackedDrg512MiBV1,
        StackedDrg32GiBV1,
        StackedDrg64GiBV1,
    ]
};

/// The PoSt proof `abi.RegisteredPoStProof` id `id` names, if any.
pub fn post_proof_by_id(id: u64) -> Option<RegisteredPoStProof> {
    usize::try_from(id)
        .ok()
        .and_then(|i| POST_BY_ID.get(i).copied())
}

/// The update proof `abi.RegisteredUpdateProof` id `id` names, if any.
pub fn update_proof_by_id(id: u64) -> Option<RegisteredUpdateProof> {
    usize::try_from(id)
        .ok()
        .and_then(|i| UPDATE_BY_ID.get(i).copied())
}

/// The seal proof `abi.RegisteredSealProof` id `id` names, if any.
pub fn seal_proof_by_id(id: u64) -> Option<RegisteredSealProof> {
    usize::try_from(id)
        .ok()
        .and_then(|i| SEAL_BY_ID.get(i).copied())
}

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
