//! Parameter identities and file names, as Filecoin's parameter cache lays them out.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The four kinds of Groth16 proof a storage provider needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ProofKind {
    /// PoRep C2: the SNARK over a sector's SealCommitPhase1Output.
    PoRep,
    /// SnapDeals: the empty-sector-update proof.
    SnapDeals,
    /// One WindowPoSt partition proof.
    WindowPoSt,
    /// A WinningPoSt proof.
    WinningPoSt,
}

impl ProofKind {
    /// Every kind, in a stable order.
    pub const ALL: [ProofKind; 4] = [
        ProofKind::PoRep,
        ProofKind::SnapDeals,
        ProofKind::WindowPoSt,
        ProofKind::WinningPoSt,
    ];

    /// The lower-case name used on the command line and in logs (`porep`, `snap`,
    /// `window-post`, `winning-post`).
    pub fn as_str(self) -> &'static str {
        match self {
            ProofKind::PoRep => "porep",
            ProofKind::SnapDeals => "snap",
            ProofKind::WindowPoSt => "window-post",
            ProofKind::WinningPoSt => "winning-post",
        }
    }
}

impl std::fmt::Display for ProofKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for ProofKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ProofKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| {
                format!("unknown proof kind {s:?} (porep, snap, window-post, winning-post)")
            })
    }
}

/// The parameter-file version prefix filecoin-proofs 19 uses.
pub const PARAMS_VERSION: usize = 28;

/// One parameter set: which proof it serves and its cache identifier
/// (`<prefix>-<sha256 of the circuit identifier>`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ParamsId {
    /// The proof kind.
    pub kind: ProofKind,
    /// The sector size in bytes.
    pub sector_size: u64,
    /// filecoin-proofs' cache identifier.
    pub cache_id: String,
}

impl ParamsId {
    fn file(&self, dir: &Path, ext: &str) -> PathBuf {
        dir.join(format!("v{}-{}.{}", PARAMS_VERSION, self.cache_id, ext))
    }
    /// The `.params` file in `dir`.
    pub fn params_file(&self, dir: &Path) -> PathBuf {
        self.file(dir, "params")
    }
    /// The `.vk` file in `dir`.
    pub fn vk_file(&self, dir: &Path) -> PathBuf {
        self.file(dir, "vk")
    }
    /// The `.meta` file in `dir`.
    pub fn meta_file(&self, dir: &Path) -> PathBuf {
        self.file(dir, "meta")
    }
}

/// filecoin-proofs' default parameter cache, where `FIL_PROOFS_PARAMETER_CACHE` is not set (the
/// variable is read by the binaries, never here).
pub const DEFAULT_PARAM_DIR: &str = "/var/tmp/filecoin-proof-parameters";

/// A `.params` file found in the cache directory.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ListedParams {
    /// The file.
    pub path: PathBuf,
    /// What it serves, when it is one of the parameter sets cuzk knows.
    pub id: Option<ParamsId>,
    /// Its size on disk.
    pub size: u64,
    /// Whether a `.vk` file sits next to it.
    pub has_vk: bool,
}

/// Lists the `.params` files in `dir`, identified against `known` parameter sets.
pub fn list_param_dir(dir: &Path, known: &[ParamsId]) -> std::io::Result<Vec<ListedParams>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().and_then(|e| e.to_str()) != Some("params") {
            continue;
        }
        let size = std::fs::metadata(&path)?.len();
        let id = known.iter().find(|k| k.params_file(dir) == path).cloned();
        let has_vk = path.with_extension("vk").exists();
        out.push(ListedParams {
            path,
            id,
            size,
            has_vk,
        });
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}
