// tidy-fixture: as src/proofs/planted.rs
//! A well-behaved module of `proofs`: lower layers only, values instead of environment reads,
//! `tracing` instead of prints, and every unsafe explained. It mentions println!, env::var and
//! crate::daemon only in comments and strings ("println!", "env::var", "crate::daemon").

use crate::prover::{prove, Backend};
use crate::srs::{ParamsId, SrsCache};
use crate::{gpu::GpuBackend, synth::synthesize};
use super::request::ProofKind;

/// Options the caller fills from the configuration.
pub struct Options {
    pub threads: usize,
}

pub fn run(opts: &Options, label: &'static str) -> char {
    tracing::debug!(threads = opts.threads, "running {label}");
    let quote = '"';
    let escaped = '\'';
    let brace = '{';
    // SAFETY: a zero-length slice from a dangling, aligned pointer is valid.
    let empty: &[u8] = unsafe { std::slice::from_raw_parts(std::ptr::NonNull::dangling().as_ptr(), 0) };
    let raw = r#"a "quoted" unsafe { println!() }"#;
    quote
}
