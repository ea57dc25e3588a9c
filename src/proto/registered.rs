//! Filecoin's integer proof-type ids, as Lotus and Curio hold them (go-state-types
//! `abi.RegisteredSealProof`, `abi.RegisteredPoStProof`, `abi.RegisteredUpdateProof`), and
//! the filecoin-proofs-api registered proofs they name. `docs/protocol.md` has the table and
//! says where the numbers come from. The tables themselves are the library's
//! (`proofs::registry`), which reads the ids of binary inputs too.

use filecoin_proofs_api::{RegisteredPoStProof, RegisteredSealProof, RegisteredUpdateProof};

use super::messages::{ProofKind, RegisteredProof};
use crate::pipeline::ProveError;
use crate::proofs::registry::{
    FIRST_WINDOW_POST, POST_BY_ID as POST, SEAL_BY_ID as SEAL, UPDATE_BY_ID as UPDATE,
};
use crate::srs::ParamsId;

/// A proof-type id that names no proof, or not one that fits where it was given.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RegisteredProofError {
    /// No registered proof of the family has this id.
    #[error("no {family} has id {id} (known: 0 to {last})")]
    UnknownId {
        /// `RegisteredSealProof`, `RegisteredPoStProof` or `RegisteredUpdateProof`.
        family: &'static str,
        /// The id given.
        id: u64,
        /// The largest id known.
        last: usize,
    },
    /// The id names a proof of another kind than the input's.
    #[error("registered_proof {id} is {name}, a {found} proof; this is a {wanted} input")]
    WrongKind {
        /// The id given.
        id: u64,
        /// The proof it names.
        name: String,
        /// The kind of that proof.
        found: ProofKind,
        /// The input's kind.
        wanted: ProofKind,
    },
    /// `registered_proof` is a number that no id can be (negative, fractional, too large).
    #[error("registered_proof {0} is not a proof-type id (a non-negative integer) or name")]
    NotAnId(String),
    /// The input could not be written back with the name in place of the id.
    #[error("cannot replace registered_proof in the input: {0}")]
    Rewrite(String),
}

/// A registered proof of filecoin-proofs-api, of one of the three families.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Registered {
    /// A seal (PoRep) proof.
    Seal(RegisteredSealProof),
    /// A WinningPoSt or WindowPoSt proof.
    PoSt(RegisteredPoStProof),
    /// A SnapDeals update proof.
    Update(RegisteredUpdateProof),
}

fn by_id<T: Copy>(table: &[T], family: &'static str, id: u64) -> Result<T, RegisteredProofError> {
    usize::try_from(id)
        .ok()
        .and_then(|i| table.get(i).copied())
        .ok_or(RegisteredProofError::UnknownId {
            family,
            id,
            last: table.len().saturating_sub(1),
        })
}

impl RegisteredProof {
    /// The registered proof this id names.
    pub fn resolve(self) -> Result<Registered, RegisteredProofError> {
        Ok(match self {
            RegisteredProof::Seal(id) => Registered::Seal(by_id(&SEAL, "RegisteredSealProof", id)?),
            RegisteredProof::PoSt(id) => Registered::PoSt(by_id(&POST, "RegisteredPoStProof", id)?),
            RegisteredProof::Update(id) => {
                Registered::Update(by_id(&UPDATE, "RegisteredUpdateProof", id)?)
            }
        })
    }

    /// The proof kind of the proof this id names.
    pub fn proof_kind(self) -> Result<ProofKind, RegisteredProofError> {
        self.resolve()?;
        Ok(match self {
            RegisteredProof::Seal(_) => ProofKind::PoRep,
            RegisteredProof::PoSt(id) if id < FIRST_WINDOW_POST => ProofKind::WinningPoSt,
            RegisteredProof::PoSt(_) => ProofKind::WindowPoSt,
            RegisteredProof::Update(_) => ProofKind::SnapDeals,
        })
    }
}

impl Registered {
    /// filecoin-proofs-api's name of the proof (`StackedDrgWindow2KiBV1_2`), as its JSON has
    /// it.
    pub fn name(self) -> String {
        // serde names unit variants by their identifiers: the Debug output.
        match self {
            Registered::Seal(p) => format!("{p:?}"),
            Registered::PoSt(p) => format!("{p:?}"),
            Registered::Update(p) => format!("{p:?}"),
        }
    }

    /// The parameter set the proof proves with.
    pub fn params_id(self) -> Result<ParamsId, ProveError> {
        match self {
            Registered::Seal(p) => crate::proofs::porep::params_id(p),
            Registered::PoSt(p) => crate::proofs::post::params_id(p),
            Registered::Update(p) => crate::proofs::snap::params_id(p),
        }
    }
}

/// Only the field looked at: serde skips the others without keeping them.
#[derive(serde::Deserialize)]
struct Probe {
    registered_proof: Option<serde_json::Value>,
}

/// A JSON input of `kind` (SnapDeals, WindowPoSt, WinningPoSt: the inputs of
/// docs/inputs.md, which clients write) whose top-level `registered_proof` is an integer id:
/// the same input with filecoin-proofs-api's name in its place, which is what the prover
/// parses. `None` for every other input, which is passed on unchanged (byte for byte, so a
/// request id's digest is as before): one with a name, one that is not a JSON object (the
/// prover reports that), and PoRep's C1 output, which filecoin-proofs-api writes itself
/// and always names its proof.
pub fn input_with_proof_name(
    kind: ProofKind,
    input: &[u8],
) -> Result<Option<Vec<u8>>, RegisteredProofError> {
    if kind == ProofKind::PoRep {
        return Ok(None);
    }
    // Only an object can name its proof: serde would also read a struct from a JSON array
    // (its fields in order), so anything else is left for the prover to refuse.
    if input.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Ok(None);
    }
    let Ok(Probe {
        registered_proof: Some(serde_json::Value::Number(n)),
    }) = serde_json::from_slice::<Probe>(input)
    else {
        return Ok(None);
    };
    let id = n
        .as_u64()
        .ok_or_else(|| RegisteredProofError::NotAnId(n.to_string()))?;
    let given = match kind {
        ProofKind::SnapDeals => RegisteredProof::Update(id),
        _ => RegisteredProof::PoSt(id),
    };
    let registered = given.resolve()?;
    let found = given.proof_kind()?;
    if found != kind {
        return Err(RegisteredProofError::WrongKind {
            id,
            name: registered.name(),
            found,
            wanted: kind,
        });
    }
    let rewrite = |e: serde_json::Error| RegisteredProofError::Rewrite(e.to_string());
    let mut object: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(input).map_err(rewrite)?;
    object.insert(
        "registered_proof".into(),
        serde_json::Value::String(registered.name()),
    );
    serde_json::to_vec(&object).map(Some).map_err(rewrite)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names are the ones serde writes and reads (the JSON inputs use them).
    #[test]
    fn names_are_serdes() {
        for id in 0..20 {
            let r = RegisteredProof::Seal(id).resolve().unwrap();
            let Registered::Seal(p) = r else { panic!() };
            assert_eq!(serde_json::to_value(p).unwrap(), r.name());
        }
        for id in 0..15 {
            let r = RegisteredProof::PoSt(id).resolve().unwrap();
            let Registered::PoSt(p) = r else { panic!() };
            assert_eq!(serde_json::to_value(p).unwrap(), r.name());
        }
        for id in 0..5 {
            let r = RegisteredProof::Update(id).resolve().unwrap();
            let Registered::Update(p) = r else { panic!() };
            assert_eq!(serde_json::to_value(p).unwrap(), r.name());
        }
    }

    #[test]
    fn ids_resolve_as_lotus_numbers_them() {
        let name = |p: RegisteredProof| p.resolve().unwrap().name();
        assert_eq!(name(RegisteredProof::Seal(8)), "StackedDrg32GiBV1_1");
        assert_eq!(
            name(RegisteredProof::Seal(13)),
            "StackedDrg32GiBV1_1_Feat_SyntheticPoRep"
        );
        assert_eq!(
            name(RegisteredProof::Seal(18)),
            "StackedDrg32GiBV1_2_Feat_NonInteractivePoRep"
        );
        assert_eq!(name(RegisteredProof::PoSt(3)), "StackedDrgWinning32GiBV1");
        assert_eq!(name(RegisteredProof::PoSt(8)), "StackedDrgWindow32GiBV1");
        assert_eq!(name(RegisteredProof::PoSt(13)), "StackedDrgWindow32GiBV1_2");
        assert_eq!(name(RegisteredProof::Update(3)), "StackedDrg32GiBV1");
        assert_eq!(
            RegisteredProof::PoSt(4).proof_kind(),
            Ok(ProofKind::WinningPoSt)
        );
        assert_eq!(
            RegisteredProof::PoSt(5).proof_kind(),
            Ok(ProofKind::WindowPoSt)
        );
        for unknown in [
            RegisteredProof::Seal(20),
            RegisteredProof::PoSt(15),
            RegisteredProof::Update(5),
            RegisteredProof::Seal(u64::MAX),
        ] {
            assert!(matches!(
                unknown.resolve(),
                Err(RegisteredProofError::UnknownId { .. })
            ));
        }
    }

    #[test]
    fn an_integer_registered_proof_is_replaced_by_its_name() {
        let input = br#"{"registered_proof": 10, "miner_id": 18446744073709551615, "x": [1]}"#;
        let out = input_with_proof_name(ProofKind::WindowPoSt, input)
            .unwrap()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["registered_proof"], "StackedDrgWindow2KiBV1_2");
        assert_eq!(v["miner_id"], u64::MAX);
        assert_eq!(v["x"], serde_json::json!([1]));
        // Names, non-objects and PoRep are left alone.
        let named = br#"{"registered_proof": "StackedDrgWinning2KiBV1"}"#;
        assert_eq!(
            input_with_proof_name(ProofKind::WinningPoSt, named),
            Ok(None)
        );
        assert_eq!(
            input_with_proof_name(ProofKind::WinningPoSt, b"[1]"),
            Ok(None)
        );
        assert_eq!(
            input_with_proof_name(ProofKind::WinningPoSt, b"not json"),
            Ok(None)
        );
        assert_eq!(
            input_with_proof_name(ProofKind::PoRep, br#"{"registered_proof": 5}"#),
            Ok(None)
        );
        // A WindowPoSt id in a WinningPoSt input; an unknown id; a negative one.
        assert!(matches!(
            input_with_proof_name(ProofKind::WinningPoSt, br#"{"registered_proof": 10}"#),
            Err(RegisteredProofError::WrongKind {
                found: ProofKind::WindowPoSt,
                ..
            })
        ));
        assert!(matches!(
            input_with_proof_name(ProofKind::SnapDeals, br#"{"registered_proof": 5}"#),
            Err(RegisteredProofError::UnknownId { .. })
        ));
        assert!(matches!(
            input_with_proof_name(ProofKind::SnapDeals, br#"{"registered_proof": -1}"#),
            Err(RegisteredProofError::NotAnId(_))
        ));
    }
}
