//! Where an MSM's points are on the host: a caller's slice, or a range of a parameter set's
//! query, whose host copy the process may have released while the device held the query
//! (read again from the parameter file when an upload needs it).

use std::ops::{Deref, Range};
use std::sync::Arc;

use blstrs::{G1Affine, G2Affine};

use crate::gpu::bytes::bytes;
use crate::gpu::GpuError;
use crate::srs::HostPoints;

/// The host side of some points.
#[derive(Clone, Copy)]
pub(super) enum Host<'a> {
    /// The bytes of the points themselves (a caller's slice).
    Bytes(&'a [u8]),
    /// A query of a parameter set in G1; the points are a range of it.
    G1(&'a HostPoints<G1Affine>),
    /// The same in G2.
    G2(&'a HostPoints<G2Affine>),
}

/// The bytes of some points, held while they are read.
pub(super) enum HostBytes<'a> {
    Borrowed(&'a [u8]),
    G1(Arc<Vec<G1Affine>>, Range<usize>),
    G2(Arc<Vec<G2Affine>>, Range<usize>),
}

impl Deref for HostBytes<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            HostBytes::Borrowed(b) => b,
            HostBytes::G1(v, r) => bytes(&v[r.clone()]),
            HostBytes::G2(v, r) => bytes(&v[r.clone()]),
        }
    }
}

impl<'a> Host<'a> {
    /// The bytes of the points `range` of a query names (a slice's bytes are already just
    /// its points); a query's host copy is read again from its file where it was released.
    pub(super) fn bytes(&self, range: Range<usize>) -> Result<HostBytes<'a>, GpuError> {
        let checked = |len: usize| {
            (range.start <= range.end && range.end <= len)
                .then(|| range.clone())
                .ok_or_else(|| GpuError::Input(format!("points {range:?} of a query of {len}")))
        };
        Ok(match *self {
            Host::Bytes(b) => HostBytes::Borrowed(b),
            Host::G1(q) => HostBytes::G1(q.get()?, checked(q.len())?),
            Host::G2(q) => HostBytes::G2(q.get()?, checked(q.len())?),
        })
    }
}

/// Whether the ranges `(start, end)` together cover `0..len`.
pub(super) fn covers(ranges: impl Iterator<Item = (usize, usize)>, len: usize) -> bool {
    let mut ranges: Vec<(usize, usize)> = ranges.collect();
    ranges.sort_unstable();
    let mut reached = 0;
    for (start, end) in ranges {
        if start > reached {
            break;
        }
        reached = reached.max(end);
    }
    reached >= len
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_cover_a_query_only_without_a_gap() {
        assert!(covers([(0, 4), (4, 10)].into_iter(), 10));
        assert!(
            covers([(4, 10), (0, 5)].into_iter(), 10),
            "in any order, overlapping"
        );
        assert!(!covers([(0, 4), (5, 10)].into_iter(), 10), "a gap");
        assert!(!covers([(0, 9)].into_iter(), 10), "short of the end");
        assert!(!covers([(1, 10)].into_iter(), 10), "not from the start");
        assert!(covers(std::iter::empty(), 0), "an empty query");
        assert!(!covers(std::iter::empty(), 1));
    }

    #[test]
    fn a_range_past_the_query_is_refused() {
        let q = HostPoints::in_memory(vec![G1Affine::default(); 3]);
        let host = Host::G1(&q);
        assert_eq!(host.bytes(1..3).map(|b| b.len()).ok(), Some(2 * 96));
        assert!(matches!(host.bytes(2..4), Err(GpuError::Input(_))));
    }
}
