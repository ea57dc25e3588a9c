//! One query's points in host memory, held only while something needs them there.
//!
//! A device that keeps a query resident has no use for the host's copy: for a 32 GiB PoRep
//! set that copy is most of the process's memory. Each user that may read a query's host
//! points (a CPU prover, a device that streams it or has not uploaded it yet) holds a
//! [`Want`] on it; [`HostPoints::release_unwanted`] drops the copy once none does, and
//! [`HostPoints::get`] reads it again from the parameter file when someone needs it after
//! all (a device that lost its copy, a proof that fell back to the CPU). Points built in
//! memory come back from the function that built them where there is one
//! ([`HostPoints::rebuildable`]: a benchmark's synthetic points), and are never dropped where
//! there is none.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Instant, SystemTime};

use blstrs::{G1Affine, G2Affine};

use super::read::{decode_g1, decode_g2, Reader, Section, G1_LEN, G2_LEN};
use super::SrsError;

/// A point type as the parameter file stores it.
pub trait FilePoint: Copy + Send + Sync + 'static {
    /// Bytes of one point in the file.
    const FILE_LEN: usize;
    /// The point, checked to be on its curve; `None` where it is not.
    fn decode(bytes: &[u8]) -> Option<Self>;
}

impl FilePoint for G1Affine {
    const FILE_LEN: usize = G1_LEN;
    fn decode(bytes: &[u8]) -> Option<Self> {
        decode_g1(bytes)
    }
}

impl FilePoint for G2Affine {
    const FILE_LEN: usize = G2_LEN;
    fn decode(bytes: &[u8]) -> Option<Self> {
        decode_g2(bytes)
    }
}

/// Where a query's points lie in the parameter file, and the file as it was when they were
/// read (a file changed since is refused rather than read into a mismatched set).
#[derive(Clone, Debug)]
pub(super) struct Origin {
    pub(super) path: PathBuf,
    pub(super) section: Section,
    /// Offset of the first point.
    pub(super) offset: u64,
    pub(super) file_len: u64,
    pub(super) modified: Option<SystemTime>,
}

/// Where a released host copy comes back from.
enum Source<T> {
    /// Read again from the parameter file.
    File(Origin),
    /// Made again by the function that made it.
    Built(Arc<dyn Fn() -> Vec<T> + Send + Sync>),
}

/// A query's points, held in host memory while anyone wants them (see the module's doc).
pub struct HostPoints<T> {
    len: usize,
    source: Option<Source<T>>,
    held: Mutex<Option<Arc<Vec<T>>>>,
    /// Bytes of `held` (read without its lock, which a reload holds for seconds).
    held_bytes: AtomicU64,
    wants: Arc<AtomicUsize>,
}

/// A claim that the host copy of a query may be read: while one is alive,
/// [`HostPoints::release_unwanted`] keeps the copy. Dropping it gives the claim up.
#[derive(Debug)]
pub struct Want {
    wants: Arc<AtomicUsize>,
}

impl Drop for Want {
    fn drop(&mut self) {
        self.wants.fetch_sub(1, Ordering::AcqRel);
    }
}

impl<T: FilePoint> HostPoints<T> {
    /// Points built in memory: held for good.
    pub fn in_memory(points: Vec<T>) -> Self {
        Self::held_from(points, None)
    }

    /// Points made by `make`, which makes them again when they are needed after a release.
    /// `make` must give the same points each time.
    pub fn rebuildable(make: impl Fn() -> Vec<T> + Send + Sync + 'static) -> Self {
        let points = make();
        Self::held_from(points, Some(Source::Built(Arc::new(make))))
    }

    /// Points read from the file at `origin`, which can be read again after a release.
    pub(super) fn from_file(points: Vec<T>, origin: Origin) -> Self {
        Self::held_from(points, Some(Source::File(origin)))
    }

    fn held_from(points: Vec<T>, source: Option<Source<T>>) -> Self {
        let len = points.len();
        HostPoints {
            len,
            source,
            held_bytes: AtomicU64::new(bytes_of::<T>(len)),
            held: Mutex::new(Some(Arc::new(points))),
            wants: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// How many points the query has (whether or not they are held).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the query has no points.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The points: the held copy, or, where it was released, the points read again from
    /// the parameter file (and held from then on, until the next release). The read is the
    /// one in flight for this query: other callers wait for it and share its result.
    pub fn get(&self) -> Result<Arc<Vec<T>>, SrsError> {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(points) = &*held {
            return Ok(points.clone());
        }
        let start = Instant::now();
        let points = match &self.source {
            Some(Source::File(origin)) => {
                let points = read_again::<T>(origin, self.len)?;
                tracing::warn!(
                    params = %origin.path.display(),
                    query = origin.section.name(),
                    bytes = bytes_of::<T>(self.len),
                    ms = start.elapsed().as_millis() as u64,
                    "host copy of a query read again from the parameter file (it had been released while a device held it)"
                );
                points
            }
            Some(Source::Built(make)) => {
                let points = make();
                if points.len() != self.len {
                    return Err(built_mismatch(points.len(), self.len));
                }
                tracing::info!(
                    bytes = bytes_of::<T>(self.len),
                    ms = start.elapsed().as_millis() as u64,
                    "host copy of a query built again (it had been released while a device held it)"
                );
                points
            }
            None => return Err(built_mismatch(0, self.len)),
        };
        let points = Arc::new(points);
        *held = Some(points.clone());
        self.held_bytes
            .store(bytes_of::<T>(self.len), Ordering::Relaxed);
        Ok(points)
    }

    /// The held copy, without reading it again where it was released.
    pub fn held(&self) -> Option<Arc<Vec<T>>> {
        self.held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// A claim on the host copy (see [`Want`]).
    pub fn want(&self) -> Want {
        self.wants.fetch_add(1, Ordering::AcqRel);
        Want {
            wants: self.wants.clone(),
        }
    }

    /// Drops the held copy where it can be read again and no [`Want`] is alive; returns the
    /// bytes dropped (freed once the last reader still holding the copy is done with it).
    pub fn release_unwanted(&self) -> u64 {
        if self.source.is_none() || self.wants.load(Ordering::Acquire) > 0 {
            return 0;
        }
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        // Checked again under the lock: a `want` taken meanwhile keeps the copy.
        if self.wants.load(Ordering::Acquire) > 0 || held.take().is_none() {
            return 0;
        }
        self.held_bytes.store(0, Ordering::Relaxed);
        bytes_of::<T>(self.len)
    }

    /// Bytes of the held copy (0 where it was released).
    pub fn held_bytes(&self) -> u64 {
        self.held_bytes.load(Ordering::Relaxed)
    }
}

/// A released copy that could not be made again as it was (`made` points of `len`; none
/// where nothing can make it).
fn built_mismatch(made: usize, len: usize) -> SrsError {
    SrsError::Mismatch {
        path: PathBuf::from("(parameters built in memory)"),
        detail: if made == 0 {
            "points released without a file or a function to make them again".into()
        } else {
            format!("made again as {made} points, not the {len} released")
        },
    }
}

fn bytes_of<T>(len: usize) -> u64 {
    (len as u64).saturating_mul(std::mem::size_of::<T>() as u64)
}

/// The `len` points at `origin`, after checking that the file is the one they were read
/// from (same length and modification time).
fn read_again<T: FilePoint>(origin: &Origin, len: usize) -> Result<Vec<T>, SrsError> {
    let io = |e: std::io::Error| SrsError::Io {
        path: origin.path.clone(),
        source: e,
    };
    let file = File::open(&origin.path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if meta.len() != origin.file_len || meta.modified().ok() != origin.modified {
        return Err(changed(&origin.path));
    }
    let reader = Reader::new(&origin.path, &file, origin.file_len);
    reader.points_at(origin.section, origin.offset, len, T::FILE_LEN, T::decode)
}

fn changed(path: &Path) -> SrsError {
    SrsError::Mismatch {
        path: path.to_path_buf(),
        detail: "the file changed since it was loaded; its points cannot be read again (evict \
                 the set and load it anew)"
            .into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use group::prime::PrimeCurveAffine;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn built_points_nobody_wants_are_released_and_made_again_the_same() {
        let made = Arc::new(AtomicUsize::new(0));
        let counter = made.clone();
        let g = G1Affine::generator();
        let points = HostPoints::rebuildable(move || {
            counter.fetch_add(1, Ordering::Relaxed);
            (0..5u64)
                .map(|i| G1Affine::from(g * blstrs::Scalar::from(i + 1)))
                .collect()
        });
        let first = points.get().unwrap();
        assert_eq!((points.len(), points.held_bytes()), (5, 5 * 96));

        // A claim keeps the copy; without one it goes, and a reader keeps what it holds.
        let want = points.want();
        assert_eq!(points.release_unwanted(), 0);
        drop(want);
        assert_eq!(points.release_unwanted(), 5 * 96);
        assert!(points.held().is_none() && points.held_bytes() == 0);
        assert_eq!(first.len(), 5);

        // Made again, the same points, and held until the next release.
        assert_eq!(points.get().unwrap().as_slice(), first.as_slice());
        assert_eq!(points.held_bytes(), 5 * 96);
        assert_eq!(made.load(Ordering::Relaxed), 2);

        // A function that makes other points than it did is refused, not held.
        let calls = Arc::new(AtomicUsize::new(0));
        let shrinking = HostPoints::rebuildable(move || {
            vec![g; 3 - calls.fetch_add(1, Ordering::Relaxed).min(2)]
        });
        assert_eq!(shrinking.release_unwanted(), 3 * 96);
        assert!(matches!(shrinking.get(), Err(SrsError::Mismatch { .. })));
        assert!(shrinking.held().is_none());

        // Points with nothing to make them again are never released.
        let fixed = HostPoints::in_memory(vec![g; 2]);
        assert_eq!((fixed.release_unwanted(), fixed.held_bytes()), (0, 2 * 96));
    }
}
