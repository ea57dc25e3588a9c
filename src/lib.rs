//! cuzk: a persistent proving core for Filecoin's Groth16 proofs.
//!
//! The library is layered so that the daemon (`cuzkd`) and the command-line tool (`cuzk`) are
//! thin shells over it:
//!
//! * [`srs`] finds, maps, checks and converts Filecoin parameter files (`.params`/`.vk`).
//! * [`synth`] runs the Filecoin circuits through a constraint system of ours that records the
//!   A/B/C evaluations, the assignment and the query densities.
//! * [`prover`] turns a synthesized circuit into a Groth16 proof behind a [`prover::Backend`]
//!   boundary (CPU here, GPU in [`gpu`]).
//! * [`pipeline`] proves any kind's partitions: resident parameters, the shared stages
//!   (admission, synthesis, the devices), recorded shapes, progress and per-job control.
//! * [`proofs`] knows the Filecoin proof kinds: it parses the miner's inputs, builds the circuits
//!   and public inputs, and verifies every proof before returning it.
//!
//! Test and benchmark scaffolding — `sealing`, `params_gen`, the GPU self-test kernels, the
//! GPU benchmark and the command line in `cli` that uses them — is built only with the
//! `scaffolding` feature (on by default; plain names here, as the links would dangle without
//! it). The packaged `cuzkd` is built without it.
//!
//! See `ARCHITECTURE.md` for the map, the layers and the invariants.

#[cfg(feature = "scaffolding")]
pub mod cli;
pub mod config;
pub mod daemon;
pub mod engine;
pub mod gpu;
#[cfg(feature = "scaffolding")]
pub mod params_gen;
pub mod pipeline;
pub mod proofs;
pub mod proto;
pub mod prover;
#[cfg(feature = "scaffolding")]
pub mod sealing;
pub mod srs;
pub mod synth;
pub mod topology;
