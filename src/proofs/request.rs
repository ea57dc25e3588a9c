//! What a client asks to have proved, independent of any wire format.

use serde::{Deserialize, Serialize};

/// The four kinds of Groth16 proof a storage provider needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ProofKind {
    /// PoRep C2: the SNARK over a sector's SealCommitPhase1Output.
    PoRep,
    /// SnapDeals: the empty-sector-update proof.
    SnapDeals,
    /// One WindowPoSt partition proof.
    WindowPoSt,
    /// A WinningPoSt proof.
    WinningPoSt,
}

impl ProofKind {
    /// Every kind, in a stable order.
    pub const ALL: [ProofKind; 4] = [
        ProofKind::PoRep,
        ProofKind::SnapDeals,
        ProofKind::WindowPoSt,
        ProofKind::WinningPoSt,
    ];

    /// The lower-case name used on the command line and in logs (`porep`, `snap`,
    /// `window-post`, `winning-post`).
    pub fn as_str(self) -> &'static str {
        match self {
            ProofKind::PoRep => "porep",
            ProofKind::SnapDeals => "snap",
            ProofKind::WindowPoSt => "window-post",
            ProofKind::WinningPoSt => "winning-post",
        }
    }
}

impl std::fmt::Display for ProofKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for ProofKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ProofKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| {
                format!("unknown proof kind {s:?} (porep, snap, window-post, winning-post)")
            })
    }
}

/// A proving request. Every payload is the raw bytes a miner produces (JSON), so that the
/// request can be hashed for idempotency and parsed (and rejected) by the library.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ProofRequest {
    /// PoRep C2.
    PoRep(PoRepRequest),
    /// SnapDeals update proof; `input` is the JSON of [`super::snap::SnapInput`].
    SnapDeals { input: Vec<u8> },
    /// WindowPoSt partition proof; `input` is the JSON of [`super::post::WindowPostInput`].
    WindowPoSt { input: Vec<u8> },
    /// WinningPoSt proof; `input` is the JSON of [`super::post::WinningPostInput`].
    WinningPoSt { input: Vec<u8> },
}

impl ProofRequest {
    /// The kind of proof this request asks for.
    pub fn kind(&self) -> ProofKind {
        match self {
            ProofRequest::PoRep(_) => ProofKind::PoRep,
            ProofRequest::SnapDeals { .. } => ProofKind::SnapDeals,
            ProofRequest::WindowPoSt { .. } => ProofKind::WindowPoSt,
            ProofRequest::WinningPoSt { .. } => ProofKind::WinningPoSt,
        }
    }
}

/// A PoRep C2 request.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PoRepRequest {
    /// The C1 output: filecoin-proofs-api's `SealCommitPhase1Output` JSON, or lotus-bench's
    /// wrapper `{"SectorNum", "Phase1Out": base64(JSON), "SectorSize"}`.
    pub c1: Vec<u8>,
    /// The miner's actor id (`f01234` → 1234); the prover id is derived from it.
    pub miner_id: u64,
    /// The sector number. Required unless the C1 is a lotus-bench wrapper that carries one.
    pub sector_number: Option<u64>,
}
