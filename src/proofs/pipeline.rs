//! Proving a sequence of partition circuits: synthesis on rayon, overlapped with proving.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use bellperson::groth16::{verify_proofs_batch, Proof};
use bellperson::Circuit;
use blstrs::{Bls12, Scalar};
use rand_core::OsRng;
use rayon::prelude::*;

use super::{JobControl, ProveError, ProvingService, StageTimings};
use crate::prover;
use crate::srs::{ParamsId, Srs};
use crate::synth::{synthesize, Synthesized};

/// Proofs of all partitions, the parameters used and the timings so far.
pub(crate) struct Proved {
    pub proofs: Vec<Proof<Bls12>>,
    pub srs: std::sync::Arc<Srs>,
    pub timings: StageTimings,
}

/// Synthesizes `make_circuit(0..partitions)` and proves each with the parameters `id`,
/// checking `control` at every partition boundary.
pub(crate) fn prove_partitions<C, F>(
    svc: &ProvingService,
    id: &ParamsId,
    partitions: usize,
    make_circuit: F,
    control: &JobControl,
) -> Result<Proved, ProveError>
where
    C: Circuit<Scalar> + Send,
    F: Fn(usize) -> Result<C, ProveError> + Sync,
{
    control.check()?;
    control.set_total(partitions);
    let (prepared, param_load) = svc.prepared(id)?;
    let srs = prepared.srs().clone();
    let mut timings = StageTimings {
        param_load,
        ..Default::default()
    };
    let group = svc.synthesis_parallelism.clamp(1, partitions.max(1));
    let (tx, rx) = mpsc::sync_channel::<Result<(Synthesized, Duration), ProveError>>(group);
    let mut proofs = Vec::with_capacity(partitions);
    std::thread::scope(|scope| -> Result<(), ProveError> {
        let make_circuit = &make_circuit;
        let synth_one = move |k: usize| {
            let start = Instant::now();
            catch_panic(&format!("partition {k} synthesis"), || {
                make_circuit(k).and_then(|c| {
                    synthesize(c).map_err(|e| ProveError::Synthesis(format!("partition {k}: {e}")))
                })
            })
            .map(|s| (s, start.elapsed()))
        };
        // `tx` moves into the thread, so that the channel closes however the thread ends
        // (a panic in a circuit included) and the prover's `recv` cannot wait forever.
        // Partitions are synthesized `group` at a time (each circuit's synthesis is mostly
        // sequential), handed over in order.
        scope.spawn(move || {
            for first in (0..partitions).step_by(group) {
                if control.is_cancelled() {
                    let _ = tx.send(Err(ProveError::Cancelled));
                    return;
                }
                let ks: Vec<usize> = (first..(first + group).min(partitions)).collect();
                let done: Vec<_> = ks.into_par_iter().map(synth_one).collect();
                for result in done {
                    if tx.send(result).is_err() {
                        return; // The prover stopped; nobody wants the rest.
                    }
                }
            }
        });
        for _ in 0..partitions {
            let (synthesized, synth_time) = rx
                .recv()
                .map_err(|_| ProveError::Synthesis("synthesis thread ended early".into()))??;
            timings.synthesis += synth_time;
            control.check()?;
            let start = Instant::now();
            let (proof, stages) = prover::prove(prepared.as_ref(), synthesized)?;
            timings.proving += start.elapsed();
            tracing::debug!(
                partition = proofs.len(),
                synthesis_ms = synth_time.as_millis() as u64,
                quotient_ms = stages.quotient.as_millis() as u64,
                msm_ms = stages.msm.as_millis() as u64,
                "partition proved"
            );
            proofs.push(proof);
            control.partition_done();
        }
        Ok(())
    })?;
    Ok(Proved {
        proofs,
        srs,
        timings,
    })
}

/// Runs `f`, turning a panic into an error. The storage-proofs circuits assert on inputs
/// that do not fit together (e.g. vanilla proofs of another sector); such input must fail the
/// job, not the process.
pub(crate) fn catch_panic<T>(
    what: &str,
    f: impl FnOnce() -> Result<T, ProveError>,
) -> Result<T, ProveError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|payload| {
        let msg = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        Err(ProveError::InvalidInput(format!(
            "{what} rejected the input: {msg}"
        )))
    })
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
