//! The verdicts every kind gives its proofs: the vanilla verifier's answer as an input error,
//! the Groth16 check of the proved partitions, and the proof bytes as filecoin-proofs writes
//! them.

use std::time::{Duration, Instant};

use bellperson::groth16::{verify_proofs_batch, Proof};
use blstrs::{Bls12, Scalar};
use rand_core::OsRng;

use crate::pipeline::ProveError;
use crate::srs::Srs;

/// A storage-proofs vanilla verifier's answer (`verify_all_partitions`) as an input error:
/// `Ok(true)` passes; `Ok(false)` is `refused`, and the verifier's own error is named, both
/// prefixed with what the input is (`input`).
pub(crate) fn vanilla_verdict(
    verified: anyhow::Result<bool>,
    input: &str,
    refused: &str,
) -> Result<(), ProveError> {
    match verified {
        Ok(true) => Ok(()),
        Ok(false) => Err(ProveError::InvalidInput(format!("{input}: {refused}"))),
        Err(e) => Err(ProveError::InvalidInput(format!(
            "{input}: vanilla proofs: {e}"
        ))),
    }
}

/// Verifies `proofs` against `inputs` (one input vector per proof) with the verifying key.
pub(crate) fn verify(
    srs: &Srs,
    proofs: &[Proof<Bls12>],
    inputs: &[Vec<Scalar>],
) -> Result<Duration, ProveError> {
    let start = Instant::now();
    if proofs.len() != inputs.len() {
        return Err(ProveError::VerificationFailed(format!(
            "{} proofs for {} public-input sets",
            proofs.len(),
            inputs.len()
        )));
    }
    let refs: Vec<&Proof<Bls12>> = proofs.iter().collect();
    let ok = verify_proofs_batch(&srs.pvk, &mut OsRng, &refs, inputs)
        .map_err(|e| ProveError::VerificationFailed(e.to_string()))?;
    if !ok {
        return Err(ProveError::VerificationFailed(
            "the Groth16 verifier rejected the proof (inputs of another sector, miner or randomness?)"
                .into(),
        ));
    }
    Ok(start.elapsed())
}

/// Serialises proofs as filecoin-proofs does: 192 bytes each, in order.
pub(crate) fn proof_bytes(proofs: &[Proof<Bls12>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(proofs.len() * 192);
    for p in proofs {
        // Writing into a Vec cannot fail.
        let _ = p.write(&mut out);
    }
    out
}
