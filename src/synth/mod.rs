//! Circuit synthesis into the prover's inputs.
//!
//! [`RecordingCs`] is a `ConstraintSystem` that keeps no linear combinations: on every
//! `enforce` it evaluates A, B and C against the assignment made so far and records the three
//! values, together with which variables the A and B queries touch (their densities). This is
//! everything a Groth16 prover needs from a circuit, in O(constraints) memory.

//!
//! A circuit made of independent sub-circuits (PoRep's challenges) can be synthesized in
//! parts on several threads and stitched bit-identically (`split.rs`).

mod cs;
mod density;
mod gadgets;
mod poseidon;
mod sha256;
mod shape;
mod split;
mod witness;

pub use cs::{synthesize, synthesize_all, with_yield_point, Mark, RecordingCs, Synthesized};
pub use density::Density;
pub use gadgets::{poseidon_gadget, sha256_packed_gadget, Gadgets, Synthesize};
pub use shape::{
    record_blank_shape, record_shape, record_shape_part, record_shape_split, stitch_shape, Matrix,
    R1cs, ShapeError, ShapePart, Term, INPUT,
};
pub use split::{
    run_parts_on, stitch, synthesize_part, synthesize_split, synthesize_split_on, Part, SplitError,
};
pub use witness::{
    stitch_witness, synthesize_witness, synthesize_witness_part, synthesize_witness_split, Witness,
    WitnessPart,
};

/// What a synthesis keeps of a circuit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recording {
    /// The A, B, C evaluations, the assignment and the densities ([`synthesize`]).
    Evaluations,
    /// The constraints and the assignment ([`record_shape`]).
    Shape,
    /// The assignment alone ([`synthesize_witness`]).
    Witness,
}

/// What [`Recording`] asked for.
pub enum Recorded {
    /// [`Recording::Evaluations`].
    Evaluations(Synthesized),
    /// [`Recording::Shape`].
    Shape(R1cs, Witness),
    /// [`Recording::Witness`].
    Witness(Witness),
}

/// Why [`record`] failed.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// See [`SplitError`].
    #[error(transparent)]
    Split(#[from] SplitError),
    /// See [`ShapeError`].
    #[error(transparent)]
    Shape(#[from] ShapeError),
}

impl From<bellperson::SynthesisError> for RecordError {
    fn from(e: bellperson::SynthesisError) -> Self {
        RecordError::Split(e.into())
    }
}

/// Synthesizes a circuit, whole (one part) or cut into `parts` (see [`synthesize_split`]),
/// on the current rayon pool, keeping `what`.
pub fn record<C: Synthesize + Send>(
    mut parts: Vec<C>,
    marker: &'static str,
    what: Recording,
) -> Result<Recorded, RecordError> {
    if parts.len() == 1 {
        if let Some(c) = parts.pop() {
            return Ok(match what {
                Recording::Evaluations => Recorded::Evaluations(synthesize(c)?),
                Recording::Shape => {
                    let (s, w) = record_shape(c)?;
                    Recorded::Shape(s, w)
                }
                Recording::Witness => Recorded::Witness(synthesize_witness(c)?),
            });
        }
    }
    Ok(match what {
        Recording::Evaluations => Recorded::Evaluations(synthesize_split(parts, marker, None)?),
        Recording::Shape => {
            let (s, w) = record_shape_split(parts, marker)?;
            Recorded::Shape(s, w)
        }
        Recording::Witness => Recorded::Witness(synthesize_witness_split(parts, marker)?),
    })
}

/// [`record`] with the parts queued on `pool` and stitched on `stitch_pool`, as
/// [`synthesize_split_on`] does.
pub fn record_on<C: Synthesize + Send>(
    pool: &rayon::ThreadPool,
    stitch_pool: &rayon::ThreadPool,
    parts: Vec<C>,
    marker: &'static str,
    what: Recording,
    yield_point: Option<fn()>,
    stopped: &(dyn Fn() -> bool + Sync),
) -> Result<Recorded, RecordError> {
    Ok(match what {
        Recording::Evaluations => Recorded::Evaluations(synthesize_split_on(
            pool,
            stitch_pool,
            parts,
            marker,
            yield_point,
            stopped,
        )?),
        Recording::Shape => {
            let parts = run_parts_on(pool, parts, yield_point, stopped, |c, i| {
                record_shape_part(c, marker, i)
            })?;
            let (s, w) = stitch_pool.install(|| stitch_shape(parts))?;
            Recorded::Shape(s, w)
        }
        Recording::Witness => {
            let parts = run_parts_on(pool, parts, yield_point, stopped, |c, i| {
                synthesize_witness_part(c, marker, i)
            })?;
            Recorded::Witness(stitch_pool.install(|| stitch_witness(parts))?)
        }
    })
}

impl RecordError {
    /// Whether the synthesis stopped because its job was stopped.
    pub fn is_stopped(&self) -> bool {
        matches!(
            self,
            RecordError::Split(SplitError::Stopped)
                | RecordError::Shape(ShapeError::Split(SplitError::Stopped))
        )
    }
}
