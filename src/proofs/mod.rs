//! The Filecoin proof kinds: inputs, circuits, public inputs and verification.
//!
//! A [`ProofRequest`] is what the daemon and the CLI hand the
//! [`ProvingService`](crate::pipeline::ProvingService) (it implements
//! [`ProofJob`](crate::pipeline::ProofJob)); each kind builds its partition circuits and
//! public inputs, proves them through [`crate::pipeline`] and verifies the proof before it
//! returns.

pub mod binary;
mod bytes;
mod inputs;
pub mod porep;
pub mod post;
mod proof_types;
pub mod registry;
mod request;
pub mod shapes;
pub mod snap;
mod verdict;

pub use request::{PoRepRequest, ProofKind, ProofRequest};
