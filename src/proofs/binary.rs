//! Binary inputs: the SnapDeals, WindowPoSt and WinningPoSt inputs of `docs/inputs.md` with
//! their byte strings raw rather than base64 in JSON, for inputs of real size (a 32 GiB
//! WindowPoSt partition's 2,349 vanilla proofs are about 58 MB raw, a third more as base64).
//!
//! An input is binary when it starts with [`MAGIC`]; what follows is one postcard-encoded
//! struct of this file (postcard: unsigned integers as LEB128 varints, a `[u8; 32]` as its 32
//! bytes, a list or byte string as its varint length and then its items, an option as a byte
//! 0 or 1 and then its value). The proof type is Filecoin's integer id, as Lotus and Curio
//! hold it (`registry::post_proof_by_id`, `registry::update_proof_by_id`). The field order is
//! the format: never reorder; a new layout gets a new magic. `docs/inputs.md` documents it
//! byte by byte, and the Go client writes it (`clients/go/ffi`).

use filecoin_proofs_api::{RegisteredPoStProof, RegisteredUpdateProof};
use serde::{Deserialize, Serialize};

use super::inputs::{SnapInput, WindowPostInput, WinningPostInput};
use super::proof_types as registry;
use crate::pipeline::ProveError;

/// The first bytes of a binary input (version 1). A JSON input cannot start with them.
pub const MAGIC: [u8; 4] = *b"CZB1";

/// Whether `bytes` is a binary input (starts with [`MAGIC`]).
pub fn is_binary(bytes: &[u8]) -> bool {
    bytes.starts_with(&MAGIC)
}

/// A WinningPoSt input, binary.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WinningPost {
    /// `abi.RegisteredPoStProof` id (0–4).
    pub registered_proof: u64,
    /// The miner's actor id.
    pub miner_id: u64,
    /// The challenge randomness.
    pub randomness: [u8; 32],
    /// The sectors' vanilla proofs (filecoin-proofs-api's `generate_single_vanilla_proof`).
    pub vanilla_proofs: Vec<Vec<u8>>,
}

/// A WindowPoSt input, binary: one partition (`partition_index` set) or a whole deadline.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WindowPost {
    /// `abi.RegisteredPoStProof` id (5–14).
    pub registered_proof: u64,
    /// The miner's actor id.
    pub miner_id: u64,
    /// The challenge randomness.
    pub randomness: [u8; 32],
    /// The partition of the deadline; `None`: the whole deadline.
    pub partition_index: Option<u64>,
    /// The sectors' vanilla proofs.
    pub vanilla_proofs: Vec<Vec<u8>>,
}

/// A SnapDeals input, binary.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snap {
    /// `abi.RegisteredUpdateProof` id (0–4).
    pub registered_proof: u64,
    /// The old replica commitment.
    pub comm_r_old: [u8; 32],
    /// The new replica commitment.
    pub comm_r_new: [u8; 32],
    /// The new data commitment.
    pub comm_d_new: [u8; 32],
    /// The partition vanilla proofs (filecoin-proofs-api's `generate_partition_proofs`).
    pub vanilla_proofs: Vec<Vec<u8>>,
}

/// [`MAGIC`] followed by `value`, postcard-encoded.
pub fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    let out = MAGIC.to_vec();
    // postcard fails only on types it cannot express (maps with unknown length, …),
    // never on these structs.
    match postcard::to_extend(value, out) {
        Ok(out) => out,
        Err(e) => unreachable!("postcard cannot encode a binary input: {e}"),
    }
}

fn invalid(what: &str, e: impl std::fmt::Display) -> ProveError {
    ProveError::InvalidInput(format!("binary {what} input: {e}"))
}

/// Decodes a binary input of `what` (its magic included); trailing bytes are an error.
fn decode<'a, T: Deserialize<'a>>(what: &str, bytes: &'a [u8]) -> Result<T, ProveError> {
    let body = bytes
        .strip_prefix(&MAGIC)
        .ok_or_else(|| invalid(what, "no magic"))?;
    let (value, rest) = postcard::take_from_bytes(body).map_err(|e| invalid(what, e))?;
    if !rest.is_empty() {
        return Err(invalid(
            what,
            format!("{} trailing bytes after the input", rest.len()),
        ));
    }
    Ok(value)
}

/// The registered proof id a binary input starts with (its first field), the rest skipped.
pub fn registered_id(bytes: &[u8]) -> Result<u64, ProveError> {
    let body = bytes
        .strip_prefix(&MAGIC)
        .ok_or_else(|| invalid("", "no magic"))?;
    postcard::take_from_bytes::<u64>(body)
        .map(|(id, _)| id)
        .map_err(|e| invalid("", e))
}

fn post_proof(id: u64) -> Result<RegisteredPoStProof, ProveError> {
    registry::post_proof_by_id(id)
        .ok_or_else(|| ProveError::InvalidInput(format!("no RegisteredPoStProof has id {id}")))
}

fn update_proof(id: u64) -> Result<RegisteredUpdateProof, ProveError> {
    registry::update_proof_by_id(id)
        .ok_or_else(|| ProveError::InvalidInput(format!("no RegisteredUpdateProof has id {id}")))
}

/// A binary WinningPoSt input, as its JSON would parse.
pub fn winning(bytes: &[u8]) -> Result<WinningPostInput, ProveError> {
    let b: WinningPost = decode("WinningPoSt", bytes)?;
    Ok(WinningPostInput {
        registered_proof: post_proof(b.registered_proof)?,
        randomness: b.randomness,
        miner_id: b.miner_id,
        vanilla_proofs: b.vanilla_proofs,
    })
}

/// A binary WindowPoSt input, as its JSON would parse.
pub fn window(bytes: &[u8]) -> Result<WindowPostInput, ProveError> {
    let b: WindowPost = decode("WindowPoSt", bytes)?;
    let partition_index = b
        .partition_index
        .map(|p| usize::try_from(p).map_err(|_| invalid("WindowPoSt", "partition index")))
        .transpose()?;
    Ok(WindowPostInput {
        registered_proof: post_proof(b.registered_proof)?,
        randomness: b.randomness,
        miner_id: b.miner_id,
        partition_index,
        vanilla_proofs: b.vanilla_proofs,
    })
}

/// A binary SnapDeals input, as its JSON would parse.
pub fn snap(bytes: &[u8]) -> Result<SnapInput, ProveError> {
    let b: Snap = decode("SnapDeals", bytes)?;
    Ok(SnapInput {
        registered_proof: update_proof(b.registered_proof)?,
        comm_r_old: b.comm_r_old,
        comm_r_new: b.comm_r_new,
        comm_d_new: b.comm_d_new,
        vanilla_proofs: b.vanilla_proofs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window_input() -> WindowPost {
        WindowPost {
            registered_proof: 10,
            miner_id: 1000,
            randomness: [7; 32],
            partition_index: Some(0),
            vanilla_proofs: vec![vec![1, 2, 3], vec![]],
        }
    }

    /// The bytes are the documented layout (docs/inputs.md has this example).
    #[test]
    fn the_layout_is_postcard_after_the_magic() {
        let bytes = encode(&window_input());
        let mut want = b"CZB1".to_vec();
        want.extend([10, 0xe8, 0x07]); // id 10, miner 1000 as a varint
        want.extend([7; 32]);
        want.extend([1, 0]); // Some(0)
        want.extend([2, 3, 1, 2, 3, 0]); // two proofs: 3 bytes, then none
        assert_eq!(bytes, want);
        assert_eq!(registered_id(&bytes).unwrap(), 10);
    }

    #[test]
    fn binary_inputs_parse_as_their_json_would() {
        let w = window(&encode(&window_input())).unwrap();
        assert_eq!(
            w.registered_proof,
            RegisteredPoStProof::StackedDrgWindow2KiBV1_2
        );
        assert_eq!((w.miner_id, w.partition_index), (1000, Some(0)));
        assert_eq!(w.vanilla_proofs, vec![vec![1, 2, 3], vec![]]);
        let win = winning(&encode(&WinningPost {
            registered_proof: 0,
            miner_id: 5,
            randomness: [1; 32],
            vanilla_proofs: vec![vec![9]],
        }))
        .unwrap();
        assert_eq!(
            win.registered_proof,
            RegisteredPoStProof::StackedDrgWinning2KiBV1
        );
        let s = snap(&encode(&Snap {
            registered_proof: 3,
            comm_r_old: [1; 32],
            comm_r_new: [2; 32],
            comm_d_new: [3; 32],
            vanilla_proofs: vec![],
        }))
        .unwrap();
        assert_eq!(s.registered_proof, RegisteredUpdateProof::StackedDrg32GiBV1);
        assert_eq!(s.comm_d_new, [3; 32]);
    }

    #[test]
    fn bad_binary_inputs_are_invalid_input() {
        let good = encode(&window_input());
        let bad = |b: &[u8]| matches!(window(b), Err(ProveError::InvalidInput(_)));
        assert!(bad(&good[..good.len() - 1]), "truncated");
        let mut trailing = good.clone();
        trailing.push(0);
        assert!(bad(&trailing), "trailing bytes");
        assert!(bad(b"{}"), "no magic");
        let mut unknown = window_input();
        unknown.registered_proof = 99;
        assert!(bad(&encode(&unknown)), "unknown id");
        // A list length far beyond the bytes is refused, not allocated.
        let mut huge = MAGIC.to_vec();
        huge.extend([10, 1]);
        huge.extend([0; 32]);
        huge.extend([0, 0xff, 0xff, 0xff, 0xff, 0x0f]);
        assert!(bad(&huge));
        assert!(!is_binary(br#"{"registered_proof": 10}"#));
    }
}
