//! The parameter file at the level of bytes: its sections, the encoding of its points, and a
//! bounds-checked reader that decodes them. The load (`parse.rs`) and a released query's
//! second read (`points.rs`) both read through it, so it sits below both.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use blstrs::{G1Affine, G2Affine};
use rayon::prelude::*;

use super::SrsError;

pub(super) const G1_LEN: usize = 96;
pub(super) const G2_LEN: usize = 192;

/// The sections of a `.params` file, in file order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Section {
    /// The verifying key.
    Vk,
    /// Powers of tau times Z(tau)/delta, for the quotient polynomial.
    H,
    /// The auxiliary variables' (beta·A + alpha·B + C)/delta.
    L,
    /// A query (inputs, then aux where the A density is set).
    A,
    /// B query in G1.
    BG1,
    /// B query in G2.
    BG2,
}

impl Section {
    /// The section's name as used in errors.
    pub fn name(self) -> &'static str {
        match self {
            Section::Vk => "vk",
            Section::H => "h",
            Section::L => "l",
            Section::A => "a",
            Section::BG1 => "b_g1",
            Section::BG2 => "b_g2",
        }
    }
}

/// A bounds-checked reader over the parameter file. Points are read at offsets a piece at a
/// time into small per-task buffers and decoded straight into their final vectors, so the
/// file's pages are never part of the process (a mapping would count every page read in the
/// process's RSS until it is unmapped: a second copy of the parameters at the end of a load).
pub(super) struct Reader<'a> {
    pub(super) path: &'a Path,
    file: &'a File,
    pub(super) file_len: u64,
    pub(super) offset: u64,
}

/// Points decoded per task: 1.5 MiB of G1 or 3 MiB of G2 bytes in each task's buffer, and
/// enough tasks for every core (a 32 GiB set's `h` alone is thousands of them).
pub(super) const CHUNK_POINTS: usize = 1 << 14;

impl<'a> Reader<'a> {
    /// A reader at the start of `file` (`file_len` bytes long).
    pub(super) fn new(path: &'a Path, file: &'a File, file_len: u64) -> Self {
        Reader {
            path,
            file,
            file_len,
            offset: 0,
        }
    }

    /// Checks that `len` bytes follow the current offset and moves past them; returns where
    /// they start.
    pub(super) fn extent(&mut self, section: Section, len: u64) -> Result<u64, SrsError> {
        let end = self
            .offset
            .checked_add(len)
            .filter(|&end| end <= self.file_len);
        match end {
            Some(end) => {
                let start = self.offset;
                self.offset = end;
                Ok(start)
            }
            None => Err(SrsError::Truncated {
                path: self.path.to_path_buf(),
                section: section.name(),
                needed: len,
                offset: self.offset,
                file_len: self.file_len,
            }),
        }
    }

    pub(super) fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<(), SrsError> {
        self.file
            .read_exact_at(buf, offset)
            .map_err(|e| SrsError::Io {
                path: self.path.to_path_buf(),
                source: e,
            })
    }

    fn take<const N: usize>(&mut self, section: Section) -> Result<[u8; N], SrsError> {
        let at = self.extent(section, N as u64)?;
        let mut b = [0; N];
        self.read_at(&mut b, at)?;
        Ok(b)
    }

    pub(super) fn u32(&mut self, section: Section) -> Result<usize, SrsError> {
        Ok(u32::from_be_bytes(self.take(section)?) as usize)
    }

    pub(super) fn g1(&mut self, section: Section) -> Result<G1Affine, SrsError> {
        let b = self.take::<G1_LEN>(section)?;
        decode_g1(&b).ok_or_else(|| invalid(self.path, section, 0))
    }

    pub(super) fn g2(&mut self, section: Section) -> Result<G2Affine, SrsError> {
        let b = self.take::<G2_LEN>(section)?;
        decode_g2(&b).ok_or_else(|| invalid(self.path, section, 0))
    }

    /// Reads a counted section of points; the whole extent is checked before any byte of it
    /// is read or the vector allocated.
    pub(super) fn points<P: Copy + Send>(
        &mut self,
        section: Section,
        point_len: usize,
        decode: impl Fn(&[u8]) -> Option<P> + Sync,
    ) -> Result<Vec<P>, SrsError> {
        let count = self.u32(section)?;
        let start = self.extent(section, (count as u64).saturating_mul(point_len as u64))?;
        self.points_at(section, start, count, point_len, decode)
    }

    /// Reads `count` points from `start`, in parallel, each task a run of [`CHUNK_POINTS`]
    /// into its own slots of the vector. The extent must be checked by the caller.
    pub(super) fn points_at<P: Copy + Send>(
        &self,
        section: Section,
        start: u64,
        count: usize,
        point_len: usize,
        decode: impl Fn(&[u8]) -> Option<P> + Sync,
    ) -> Result<Vec<P>, SrsError> {
        let mut out: Vec<P> = Vec::with_capacity(count);
        out.spare_capacity_mut()[..count]
            .par_chunks_mut(CHUNK_POINTS)
            .enumerate()
            .try_for_each_init(
                || vec![0u8; CHUNK_POINTS * point_len],
                |buf, (c, slots)| {
                    let first = c * CHUNK_POINTS;
                    let bytes = &mut buf[..slots.len() * point_len];
                    self.read_at(bytes, start + (first * point_len) as u64)?;
                    for (i, (slot, b)) in slots
                        .iter_mut()
                        .zip(bytes.chunks_exact(point_len))
                        .enumerate()
                    {
                        let p = decode(b).ok_or_else(|| invalid(self.path, section, first + i))?;
                        slot.write(p);
                    }
                    Ok(())
                },
            )?;
        // SAFETY: the chunks above cover slots 0..count of the capacity exactly once each,
        // and every chunk wrote each of its slots or returned an error, which returned before
        // this line; `P` is `Copy`, so nothing needs dropping either way.
        unsafe { out.set_len(count) };
        Ok(out)
    }
}

fn invalid(path: &Path, section: Section, index: usize) -> SrsError {
    SrsError::InvalidPoint {
        path: path.to_path_buf(),
        section: section.name(),
        index,
    }
}

/// Decodes an uncompressed G1 point, checking that it is on the curve. The subgroup check is
/// skipped: it costs more than the whole conversion, and the files come from the operator's
/// own parameter cache (filecoin-proofs makes the same choice).
pub(super) fn decode_g1(b: &[u8]) -> Option<G1Affine> {
    let arr: &[u8; G1_LEN] = b.try_into().ok()?;
    Option::from(G1Affine::from_uncompressed_unchecked(arr))
}

pub(super) fn decode_g2(b: &[u8]) -> Option<G2Affine> {
    let arr: &[u8; G2_LEN] = b.try_into().ok()?;
    Option::from(G2Affine::from_uncompressed_unchecked(arr))
}
