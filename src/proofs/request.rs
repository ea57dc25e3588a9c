//! What a client asks to have proved, independent of any wire format.

use serde::{Deserialize, Serialize};

use super::ProveError;

/// The four kinds of proof; defined with the parameter identities (`srs`), which name the kind
/// each parameter set serves, so that `srs` needs nothing from this layer.
pub use crate::srs::ProofKind;

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

    /// Checks the input cheaply, the way proving it starts: it parses, names a supported
    /// proof type and sector size, and its vanilla proofs decode (into the right number of
    /// partitions or sectors). Nothing is synthesized or proved, and no parameters are
    /// needed; a request that passes may still fail later (inconsistent vanilla proofs fail
    /// synthesis or verification). The parsed input is dropped: proving parses it again.
    pub fn check(&self) -> Result<(), ProveError> {
        // The storage-proofs conversions may panic on malformed inputs, as in proving.
        super::pipeline::catch_panic("the input check", || match self {
            ProofRequest::PoRep(r) => super::porep::check(r),
            ProofRequest::SnapDeals { input } => super::snap::check(input),
            ProofRequest::WindowPoSt { input } => super::post::check_window(input),
            ProofRequest::WinningPoSt { input } => super::post::check_winning(input),
        })
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
