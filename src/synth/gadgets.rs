//! Gadgets a constraint system may compute its own way, and the circuits that ask for them.
//!
//! A circuit written against [`Gadgets`] gets bellperson's gadget from a system that records
//! constraints and a native computation from one that keeps only the witness
//! ([`super::WitnessCs`]). Both give the same assignment and constraint count; only the time
//! differs.

use bellperson::gadgets::boolean::Boolean;
use bellperson::gadgets::multipack;
use bellperson::gadgets::num::AllocatedNum;
use bellperson::gadgets::sha256::sha256;
use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar;
use ff::PrimeField;

/// A root constraint system's choice of gadget implementations.
pub trait Gadgets: ConstraintSystem<Scalar, Root = Self> {
    /// SHA-256 of `input` (a whole number of bytes) packed as filecoin's hashers and labels
    /// pack a digest: each byte's bits least significant first, the first
    /// `Scalar::CAPACITY` bits as one allocated number.
    fn sha256_packed(&mut self, input: &[Boolean]) -> Result<AllocatedNum<Scalar>, SynthesisError> {
        sha256_packed_gadget(self, input)
    }

    /// Poseidon hash of `preimage` (2, 4, 8 or 11 elements) with filecoin's constants for
    /// that arity, as its trees and columns hash.
    fn poseidon(
        &mut self,
        preimage: &[AllocatedNum<Scalar>],
    ) -> Result<AllocatedNum<Scalar>, SynthesisError> {
        poseidon_gadget(self, preimage)
    }
}

/// [`Gadgets::poseidon`] with neptune's circuit.
pub fn poseidon_gadget<CS: ConstraintSystem<Scalar>>(
    cs: &mut CS,
    preimage: &[AllocatedNum<Scalar>],
) -> Result<AllocatedNum<Scalar>, SynthesisError> {
    use filecoin_hashers::poseidon::PoseidonFunction;
    use filecoin_hashers::HashFunction;
    use typenum::{U11, U2, U4, U8};
    let cs = cs.namespace(|| "poseidon");
    match preimage.len() {
        2 => PoseidonFunction::hash_multi_leaf_circuit::<U2, _>(cs, preimage, 0),
        4 => PoseidonFunction::hash_multi_leaf_circuit::<U4, _>(cs, preimage, 0),
        8 => PoseidonFunction::hash_multi_leaf_circuit::<U8, _>(cs, preimage, 0),
        11 => PoseidonFunction::hash_multi_leaf_circuit::<U11, _>(cs, preimage, 0),
        _ => Err(SynthesisError::Unsatisfiable),
    }
}

/// [`Gadgets::sha256_packed`] with bellperson's gadgets.
pub fn sha256_packed_gadget<CS: ConstraintSystem<Scalar>>(
    cs: &mut CS,
    input: &[Boolean],
) -> Result<AllocatedNum<Scalar>, SynthesisError> {
    let digest = sha256(cs.namespace(|| "hash"), input)?;
    let bits: Vec<Boolean> = digest
        .chunks(8)
        .flat_map(|byte| byte.iter().rev())
        .take(Scalar::CAPACITY as usize)
        .cloned()
        .collect();
    multipack::pack_bits(cs.namespace(|| "pack"), &bits)
}

/// A circuit our constraint systems can synthesize: any bellperson [`Circuit`], or one that
/// uses [`Gadgets`].
pub trait Synthesize {
    /// Synthesizes the circuit into `cs`.
    fn synthesize_into<CS: Gadgets>(self, cs: &mut CS) -> Result<(), SynthesisError>;
}

impl<C: Circuit<Scalar>> Synthesize for C {
    fn synthesize_into<CS: Gadgets>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        self.synthesize(cs)
    }
}
