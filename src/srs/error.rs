//! Typed errors for parameter files.

use std::path::PathBuf;

/// Why a parameter file could not be used. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum SrsError {
    /// The file does not exist.
    #[error("parameter file {path} is missing (generate test parameters with `cuzk params generate`, or fetch the production ones)")]
    Missing {
        /// The file looked for.
        path: PathBuf,
    },
    /// The file could not be opened or mapped.
    #[error("cannot read parameter file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A section extends past the end of the file.
    #[error("parameter file {path} is truncated: section {section} needs {needed} bytes at offset {offset}, the file has {file_len}")]
    Truncated {
        /// The file.
        path: PathBuf,
        /// The section being read.
        section: &'static str,
        /// Bytes the section needs.
        needed: u64,
        /// Where the section starts.
        offset: u64,
        /// The file's length.
        file_len: u64,
    },
    /// A point does not decode (not on the curve, bad flags).
    #[error("parameter file {path} is corrupt: point {index} of section {section} is not a valid curve point")]
    InvalidPoint {
        /// The file.
        path: PathBuf,
        /// The section.
        section: &'static str,
        /// The point's index in the section.
        index: usize,
    },
    /// The file's contents do not fit what they are used for.
    #[error("parameter file {path} does not match: {detail}")]
    Mismatch {
        /// The file.
        path: PathBuf,
        /// What does not match.
        detail: String,
    },
}
