//! The JSON inputs of the SnapDeals, WindowPoSt and WinningPoSt kinds (`docs/inputs.md`):
//! what the kinds prove and what a binary input (`super::binary`) decodes into. PoRep's
//! C1 output is parsed by `super::porep` itself.

use filecoin_proofs_api::{RegisteredPoStProof, RegisteredUpdateProof};
use serde::{Deserialize, Serialize};

use super::bytes::{b64_32, b64_list};

/// A WinningPoSt request, as JSON (or binary: [`super::binary::WinningPost`]).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WinningPostInput {
    /// The registered PoSt proof (`StackedDrgWinning2KiBV1`, …).
    pub registered_proof: RegisteredPoStProof,
    /// The 32-byte challenge randomness, base64.
    #[serde(with = "b64_32")]
    pub randomness: [u8; 32],
    /// The miner's actor id.
    pub miner_id: u64,
    /// The sectors' vanilla proofs as filecoin-proofs-api returns them
    /// (`generate_single_vanilla_proof`), base64.
    #[serde(with = "b64_list")]
    pub vanilla_proofs: Vec<Vec<u8>>,
}

/// A WindowPoSt request, as JSON (or binary: [`super::binary::WindowPost`]): one partition of a deadline (`partition_index` set), or
/// the whole deadline (`partition_index` absent), as filecoin-proofs'
/// `generate_window_post_with_vanilla` proves it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WindowPostInput {
    /// The registered PoSt proof (`StackedDrgWindow2KiBV1_2`, …).
    pub registered_proof: RegisteredPoStProof,
    /// The 32-byte challenge randomness, base64.
    #[serde(with = "b64_32")]
    pub randomness: [u8; 32],
    /// The miner's actor id.
    pub miner_id: u64,
    /// Which partition of the deadline this is; absent (or `null`): the whole deadline,
    /// every partition proved and the proofs concatenated in partition order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition_index: Option<usize>,
    /// The per-sector vanilla proofs, base64: the partition's, or the whole deadline's (any
    /// order: they are sorted by sector id, as the verifier orders them).
    #[serde(with = "b64_list")]
    pub vanilla_proofs: Vec<Vec<u8>>,
}

/// A SnapDeals request, as JSON (or binary: [`super::binary::Snap`]).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SnapInput {
    /// The registered update proof (`StackedDrg2KiBV1`, …).
    pub registered_proof: RegisteredUpdateProof,
    /// The sector's old replica commitment, base64.
    #[serde(with = "b64_32")]
    pub comm_r_old: [u8; 32],
    /// The new replica commitment, base64.
    #[serde(with = "b64_32")]
    pub comm_r_new: [u8; 32],
    /// The new data commitment, base64.
    #[serde(with = "b64_32")]
    pub comm_d_new: [u8; 32],
    /// The partition vanilla proofs as filecoin-proofs-api's `generate_partition_proofs`
    /// returns them, base64.
    #[serde(with = "b64_list")]
    pub vanilla_proofs: Vec<Vec<u8>>,
}
