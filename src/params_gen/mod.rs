//! Test-parameter generation: random Groth16 parameters for the real circuits.
//!
//! Production parameters come from Filecoin's trusted setup; for tests and the demo, cuzk
//! generates random parameters for the same blank circuits, under the exact names
//! filecoin-proofs looks for, so both cuzk and filecoin-proofs' verifier use them
//! ([`ensure_params`]): by default with cuzk's own setup from the circuit's recorded shape
//! ([`setup::generate_fresh`]: `fresh.rs` the scalars, `setup.rs` the points on every core or
//! the GPU and the files; the 2 KiB PoRep set in minutes on two cores, the 32 GiB set in
//! minutes on a GPU host), or with bellperson's generator ([`Generator::Bellperson`], about
//! six times slower on the CPU). Neither is the ceremony's.

pub mod fresh;
pub mod setup;

use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::pipeline::ProveError;
use crate::proofs::{registry, ProofKind};
use crate::srs::ParamsId;

/// Why parameters could not be generated.
#[derive(Debug, thiserror::Error)]
pub enum GenError {
    /// The kind or size is not known, or the circuit failed.
    #[error(transparent)]
    Circuit(#[from] ProveError),
    /// The fresh setup failed (see [`setup`]).
    #[error("parameter setup: {0}")]
    Setup(String),
    /// Writing the files failed.
    #[error("cannot write {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}

/// What a generator tells while it works: a line at each step, and how far the long step
/// (making the points) has come. Any `FnMut(&str)` takes the lines and leaves the rest.
pub trait Progress {
    /// A step begins or ends.
    fn note(&mut self, msg: &str);
    /// `done` of the current step's `total` units are made (a step that cannot tell is
    /// never reported this way).
    fn advance(&mut self, done: u64, total: u64) {
        let _ = (done, total);
    }
}

impl<F: FnMut(&str)> Progress for F {
    fn note(&mut self, msg: &str) {
        self(msg)
    }
}

/// Which generator makes missing parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Generator {
    /// cuzk's own Groth16 setup ([`setup::generate_fresh`]) on every core, with fresh random
    /// secrets; a note beside the files says they are not the ceremony's.
    #[default]
    Setup,
    /// bellperson's `generate_random_parameters` (no progress between its start and end).
    Bellperson,
}

/// What [`ensure_params`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GenOutcome {
    /// `.params` and `.vk` were there already; nothing was touched.
    Existing,
    /// They were generated, taking this long.
    Generated(Duration),
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> GenError + '_ {
    move |source| GenError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Holds an exclusive lock on a lock file (`File::lock`, an `flock` on Linux), so that
/// concurrent generators (parallel tests, two terminals) generate each parameter set once.
/// The lock is released when the file is closed, on drop.
struct DirLock(#[allow(dead_code)] File);

impl DirLock {
    /// Takes the lock, calling `waiting` first when another process holds it.
    fn acquire(path: &Path, waiting: impl FnOnce()) -> Result<Self, GenError> {
        let file = File::create(path).map_err(io_err(path))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                waiting();
                // Blocks until the lock is granted.
                file.lock().map_err(io_err(path))?;
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(io_err(path)(e)),
        }
        Ok(Self(file))
    }
}

fn write_atomically(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<File>) -> std::io::Result<()>,
) -> Result<(), GenError> {
    let tmp = path.with_extension("tmp-cuzk");
    let file = File::create(&tmp).map_err(io_err(&tmp))?;
    let mut w = BufWriter::new(file);
    write(&mut w)
        .and_then(|_| w.flush())
        .map_err(io_err(&tmp))?;
    w.get_ref().sync_all().map_err(io_err(&tmp))?;
    fs::rename(&tmp, path).map_err(io_err(path))
}

/// Generates test parameters for `kind` at `sector_size` in `dir` with cuzk's own setup
/// ([`Generator::Setup`]) unless its `.params` and `.vk` exist. Existing files are never
/// modified.
pub fn ensure_params(
    dir: &Path,
    kind: ProofKind,
    sector_size: u64,
    mut progress: &mut dyn FnMut(&str),
) -> Result<(ParamsId, GenOutcome), GenError> {
    ensure_params_with(dir, kind, sector_size, Generator::Setup, &mut progress)
}

/// Generates test parameters for `kind` at `sector_size` in `dir` with `generator` unless
/// its `.params` and `.vk` exist, one process at a time (a lock file beside them). Existing
/// files are never modified: where only one of the two exists, cuzk's setup refuses
/// ([`GenError::Setup`]) and bellperson's generator writes both.
pub fn ensure_params_with(
    dir: &Path,
    kind: ProofKind,
    sector_size: u64,
    generator: Generator,
    progress: &mut dyn Progress,
) -> Result<(ParamsId, GenOutcome), GenError> {
    let id = registry::params_id(kind, sector_size)?;
    fs::create_dir_all(dir).map_err(io_err(dir))?;
    let (params, vk, meta) = (id.params_file(dir), id.vk_file(dir), id.meta_file(dir));
    let lock = dir.join(format!("{}.cuzk-lock", id.cache_id));
    let _lock = DirLock::acquire(&lock, || {
        progress.note(&format!(
            "waiting for another process generating {} …",
            params.display()
        ))
    })?;
    if params.exists() && vk.exists() {
        return Ok((id, GenOutcome::Existing));
    }
    let start = Instant::now();
    if generator == Generator::Setup {
        progress.note(&format!(
            "generating {kind} parameters with cuzk's setup (fresh secrets, not the \
             ceremony's) in {} …",
            dir.display()
        ));
        let seed: [u8; 32] = rand::random();
        let r = setup::generate_fresh(dir, kind, sector_size, seed, &setup::Device::Cpu, progress)?;
        progress.note(&format!(
            "wrote {} ({:.1} MB) and its .vk in {:.1} s",
            params.display(),
            r.bytes as f64 / 1e6,
            start.elapsed().as_secs_f64()
        ));
        return Ok((id, GenOutcome::Generated(start.elapsed())));
    }
    progress.note(&format!(
        "generating {kind} parameters with bellperson's generator ({}) …",
        params.display()
    ));
    let generated = registry::generate(kind, sector_size)?;
    progress.note(&format!(
        "generated {kind} parameters in {:.1} s; writing {} …",
        start.elapsed().as_secs_f64(),
        params.display()
    ));
    let writing = Instant::now();
    write_atomically(&meta, |w| write!(w, "{{\"sector_size\":{sector_size}}}"))?;
    write_atomically(&vk, |w| generated.vk.write(w))?;
    write_atomically(&params, |w| generated.write(w))?;
    let size = fs::metadata(&params).map_or(0, |m| m.len());
    progress.note(&format!(
        "wrote {} ({:.1} MB) and its .vk in {:.1} s; done in {:.1} s",
        params.display(),
        size as f64 / 1e6,
        writing.elapsed().as_secs_f64(),
        start.elapsed().as_secs_f64()
    ));
    Ok((id, GenOutcome::Generated(start.elapsed())))
}
