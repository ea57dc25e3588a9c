//! Filecoin Groth16 parameters: finding, reading, checking and converting them.
//!
//! A `.params` file is bellperson's layout: the verifying key, then the sections `h`, `l`, `a`,
//! `b_g1` and `b_g2`, each a big-endian `u32` count followed by uncompressed points (G1: 96
//! bytes, G2: 192 bytes). [`parse`] checks every section's extent against the file size before
//! it reads a point, so a truncated or corrupt file is a typed [`SrsError`] naming the file and
//! the section. Points are converted once into blst's affine form, which both provers use, and
//! kept for the life of the process by [`SrsCache`].

mod cache;
mod error;
mod ids;
mod parse;
mod points;
mod read;

pub use cache::{EvictError, Handle, LoadedParams, SrsCache};
pub use error::SrsError;
pub use ids::{list_param_dir, ListedParams, ParamsId, ProofKind, DEFAULT_PARAM_DIR};
pub use parse::{load_bytes, load_srs, Srs};
pub use points::{FilePoint, HostPoints, Want};
pub use read::Section;
