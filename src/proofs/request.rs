//! What a client asks to have proved, independent of any wire format.

use filecoin_proofs_api::{RegisteredPoStProof, RegisteredSealProof, RegisteredUpdateProof};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

pub use super::porep::PoRepRequest;
use super::{binary, registry};
use crate::pipeline::control::catch_panic;
use crate::pipeline::{JobControl, ProofJob, ProofOutput, ProveError, ProvingService};
use crate::srs::ParamsId;

/// The four kinds of proof; defined with the parameter identities (`srs`), which name the kind
/// each parameter set serves, so that `srs` needs nothing from this layer.
pub use crate::srs::ProofKind;

/// A proving request. Every payload is the raw bytes a miner produces (JSON), so that the
/// request can be hashed for idempotency and parsed (and rejected) by the library.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ProofRequest {
    /// PoRep C2.
    PoRep(PoRepRequest),
    /// SnapDeals update proof; `input` is the JSON of [`super::snap::SnapInput`], or its
    /// binary form ([`binary::Snap`]).
    SnapDeals { input: Vec<u8> },
    /// WindowPoSt partition proof; `input` is the JSON of [`super::post::WindowPostInput`],
    /// or its binary form ([`binary::WindowPost`]).
    WindowPoSt { input: Vec<u8> },
    /// WinningPoSt proof; `input` is the JSON of [`super::post::WinningPostInput`], or its
    /// binary form ([`binary::WinningPost`]).
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
        catch_panic("the input check", || match self {
            ProofRequest::PoRep(r) => super::porep::check(r),
            ProofRequest::SnapDeals { input } => super::snap::check(input),
            ProofRequest::WindowPoSt { input } => super::post::check_window(input),
            ProofRequest::WinningPoSt { input } => super::post::check_winning(input),
        })
    }
}

impl ProofRequest {
    /// Whether the request's vanilla proofs verify against its public inputs, as the
    /// storage-proofs crates' own vanilla verifiers say (no parameters needed; about the cost
    /// of the vanilla check the C1 or PoSt vanilla phase already made, far below proving).
    /// The service runs it after a proof failed verification: an `InvalidInput` error says
    /// the input itself is bad, so proving it again on other devices could not help; `Ok`
    /// leaves a wrong device result as the suspect.
    pub fn check_vanilla(&self) -> Result<(), ProveError> {
        catch_panic("the vanilla proofs' check", || match self {
            ProofRequest::PoRep(r) => super::porep::check_vanilla(r),
            ProofRequest::SnapDeals { input } => super::snap::check_vanilla(input),
            ProofRequest::WindowPoSt { input } => super::post::check_vanilla_window(input),
            ProofRequest::WinningPoSt { input } => super::post::check_vanilla_winning(input),
        })
    }

    /// The parameter set proving this request needs, read from the proof type its input
    /// names. A partial parse, cheaper than [`Self::check`]: the rest of the input is
    /// skipped, not checked, so an `Ok` says nothing of the input's validity. For the
    /// engine, which keeps the set of every queued and running job, so that an eviction can
    /// tell which jobs need a set.
    pub fn params_id(&self) -> Result<ParamsId, ProveError> {
        match self {
            ProofRequest::PoRep(r) => super::porep::params_id(c1_proof(&r.c1)?),
            ProofRequest::SnapDeals { input } if binary::is_binary(input) => {
                let id = binary::registered_id(input)?;
                let proof = registry::update_proof_by_id(id).ok_or_else(|| unknown(id))?;
                super::snap::params_id(proof)
            }
            ProofRequest::WindowPoSt { input } | ProofRequest::WinningPoSt { input }
                if binary::is_binary(input) =>
            {
                let id = binary::registered_id(input)?;
                let proof = registry::post_proof_by_id(id).ok_or_else(|| unknown(id))?;
                super::post::params_id(proof)
            }
            ProofRequest::SnapDeals { input } => {
                super::snap::params_id(proof_type::<RegisteredUpdateProof>(input)?)
            }
            ProofRequest::WindowPoSt { input } | ProofRequest::WinningPoSt { input } => {
                super::post::params_id(proof_type::<RegisteredPoStProof>(input)?)
            }
        }
    }
}

/// The kinds plugged into the pipeline: the service proves a request by its kind's code.
impl ProofJob for ProofRequest {
    fn prove_once(
        &self,
        service: &ProvingService,
        control: &JobControl,
    ) -> Result<ProofOutput, ProveError> {
        match self {
            ProofRequest::PoRep(r) => super::porep::prove(service, r, control),
            ProofRequest::SnapDeals { input } => super::snap::prove(service, input, control),
            ProofRequest::WindowPoSt { input } => {
                super::post::prove_window(service, input, control)
            }
            ProofRequest::WinningPoSt { input } => {
                super::post::prove_winning(service, input, control)
            }
        }
    }

    fn check_vanilla(&self) -> Result<(), ProveError> {
        ProofRequest::check_vanilla(self)
    }
}

fn unknown(id: u64) -> ProveError {
    ProveError::InvalidInput(format!("the input's proof type: no proof has id {id}"))
}

/// The `registered_proof` of a JSON input, the rest skipped.
fn proof_type<T: DeserializeOwned>(json: &[u8]) -> Result<T, ProveError> {
    #[derive(Deserialize)]
    struct Named<T> {
        registered_proof: T,
    }
    serde_json::from_slice::<Named<T>>(json)
        .map(|n| n.registered_proof)
        .map_err(|e| ProveError::InvalidInput(format!("the input's proof type: {e}")))
}

/// The seal proof a C1 output names: its `registered_proof`, or, in lotus-bench's wrapper,
/// that of the C1 output it carries in base64 (as `porep::parse_c1` reads them).
fn c1_proof(c1: &[u8]) -> Result<RegisteredSealProof, ProveError> {
    #[derive(Deserialize)]
    struct Head {
        registered_proof: Option<RegisteredSealProof>,
        #[serde(rename = "Phase1Out")]
        phase1_out: Option<String>,
    }
    let bad = |e: &dyn std::fmt::Display| {
        ProveError::InvalidInput(format!("the C1 output's proof type: {e}"))
    };
    let head: Head = serde_json::from_slice(c1).map_err(|e| bad(&e))?;
    match (head.phase1_out, head.registered_proof) {
        (Some(wrapped), _) => {
            use base64::Engine as _;
            let inner = base64::engine::general_purpose::STANDARD
                .decode(wrapped.trim())
                .map_err(|e| bad(&e))?;
            proof_type::<RegisteredSealProof>(&inner)
        }
        (None, Some(proof)) => Ok(proof),
        (None, None) => Err(bad(&"no registered_proof")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proofs::registry;

    /// The set of a request is read from its proof type alone, the rest skipped; the lotus
    /// wrapper's inner C1 output is looked into. Inputs without a proof type have none.
    #[test]
    fn params_id_reads_the_proof_type_only() {
        let porep_2k = registry::params_id(ProofKind::PoRep, 2048).unwrap();
        let c1 = br#"{"comm_r":[1,2],"registered_proof":"StackedDrg2KiBV1_1","seed":"anything"}"#;
        let porep = |c1: &[u8]| {
            ProofRequest::PoRep(PoRepRequest {
                c1: c1.to_vec(),
                miner_id: 1000,
                sector_number: Some(1),
            })
        };
        assert_eq!(porep(c1).params_id().unwrap(), porep_2k);
        use base64::Engine as _;
        let wrapped = format!(
            r#"{{"SectorNum":7,"Phase1Out":"{}","SectorSize":2048}}"#,
            base64::engine::general_purpose::STANDARD.encode(c1)
        );
        assert_eq!(porep(wrapped.as_bytes()).params_id().unwrap(), porep_2k);
        let winning = ProofRequest::WinningPoSt {
            input: br#"{"vanilla_proofs":[],"registered_proof":"StackedDrgWinning2KiBV1"}"#
                .to_vec(),
        };
        assert_eq!(
            winning.params_id().unwrap(),
            registry::params_id(ProofKind::WinningPoSt, 2048).unwrap()
        );
        let window = ProofRequest::WindowPoSt {
            input: br#"{"registered_proof":"StackedDrgWindow2KiBV1_2"}"#.to_vec(),
        };
        assert_eq!(
            window.params_id().unwrap(),
            registry::params_id(ProofKind::WindowPoSt, 2048).unwrap()
        );
        let snap = ProofRequest::SnapDeals {
            input: br#"{"registered_proof":"StackedDrg2KiBV1"}"#.to_vec(),
        };
        assert_eq!(
            snap.params_id().unwrap(),
            registry::params_id(ProofKind::SnapDeals, 2048).unwrap()
        );
        for bad in [&b"not json"[..], b"{}", br#"{"Phase1Out":"%%"}"#] {
            assert!(matches!(
                porep(bad).params_id(),
                Err(ProveError::InvalidInput(_))
            ));
        }
    }
}
