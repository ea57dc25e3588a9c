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
mod split;

pub use cs::{synthesize, synthesize_all, with_yield_point, Mark, RecordingCs, Synthesized};
pub use split::{stitch, synthesize_part, synthesize_split, synthesize_split_on, Part, SplitError};
