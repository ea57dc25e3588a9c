//! Parsing bellperson's parameter layout from a memory map.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bellperson::groth16::{prepare_verifying_key, PreparedVerifyingKey, VerifyingKey};
use blstrs::{Bls12, G1Affine, G2Affine};
use memmap2::Mmap;
use rayon::prelude::*;

use super::SrsError;

const G1_LEN: usize = 96;
const G2_LEN: usize = 192;

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

/// A parameter set converted into the provers' layout.
pub struct Srs {
    /// Where it came from.
    pub path: PathBuf,
    /// The verifying key.
    pub vk: VerifyingKey<Bls12>,
    /// The verifying key prepared for pairings.
    pub pvk: PreparedVerifyingKey<Bls12>,
    /// `h` query (domain size − 1 points).
    pub h: Vec<G1Affine>,
    /// `l` query (one point per aux variable).
    pub l: Vec<G1Affine>,
    /// `a` query.
    pub a: Vec<G1Affine>,
    /// `b` query in G1.
    pub b_g1: Vec<G1Affine>,
    /// `b` query in G2.
    pub b_g2: Vec<G2Affine>,
    /// Size of the file.
    pub file_len: u64,
    /// How long mapping and converting took.
    pub load_time: Duration,
}

impl Srs {
    /// Bytes the converted points occupy in memory.
    pub fn resident_bytes(&self) -> u64 {
        let g1 = self.h.len() + self.l.len() + self.a.len() + self.b_g1.len();
        (g1 * std::mem::size_of::<G1Affine>() + self.b_g2.len() * std::mem::size_of::<G2Affine>())
            as u64
    }

    /// Gigabytes of file converted per second of load time.
    pub fn load_rate_gbps(&self) -> f64 {
        self.file_len as f64 / 1e9 / self.load_time.as_secs_f64().max(1e-9)
    }
}

/// A bounds-checked reader over the mapped file.
struct Cursor<'a> {
    path: &'a Path,
    bytes: &'a [u8],
    offset: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, section: Section, len: usize) -> Result<&'a [u8], SrsError> {
        let end = self
            .offset
            .checked_add(len)
            .filter(|&end| end <= self.bytes.len());
        match end {
            Some(end) => {
                let out = &self.bytes[self.offset..end];
                self.offset = end;
                Ok(out)
            }
            None => Err(SrsError::Truncated {
                path: self.path.to_path_buf(),
                section: section.name(),
                needed: len as u64,
                offset: self.offset as u64,
                file_len: self.bytes.len() as u64,
            }),
        }
    }

    fn u32(&mut self, section: Section) -> Result<usize, SrsError> {
        let b = self.take(section, 4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize)
    }

    fn g1(&mut self, section: Section) -> Result<G1Affine, SrsError> {
        let b = self.take(section, G1_LEN)?;
        decode_g1(b).ok_or_else(|| invalid(self.path, section, 0))
    }

    fn g2(&mut self, section: Section) -> Result<G2Affine, SrsError> {
        let b = self.take(section, G2_LEN)?;
        decode_g2(b).ok_or_else(|| invalid(self.path, section, 0))
    }

    /// Reads a counted section of points; the whole extent is checked before any decoding.
    fn points<P: Send>(
        &mut self,
        section: Section,
        point_len: usize,
        decode: impl Fn(&[u8]) -> Option<P> + Sync,
    ) -> Result<Vec<P>, SrsError> {
        let count = self.u32(section)?;
        let bytes = self.take(section, count.saturating_mul(point_len))?;
        let path = self.path;
        bytes
            .par_chunks_exact(point_len)
            .enumerate()
            .map(|(i, b)| decode(b).ok_or_else(|| invalid(path, section, i)))
            .collect()
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
fn decode_g1(b: &[u8]) -> Option<G1Affine> {
    let arr: &[u8; G1_LEN] = b.try_into().ok()?;
    Option::from(G1Affine::from_uncompressed_unchecked(arr))
}

fn decode_g2(b: &[u8]) -> Option<G2Affine> {
    let arr: &[u8; G2_LEN] = b.try_into().ok()?;
    Option::from(G2Affine::from_uncompressed_unchecked(arr))
}

fn read_vk(cur: &mut Cursor<'_>) -> Result<VerifyingKey<Bls12>, SrsError> {
    let s = Section::Vk;
    let alpha_g1 = cur.g1(s)?;
    let beta_g1 = cur.g1(s)?;
    let beta_g2 = cur.g2(s)?;
    let gamma_g2 = cur.g2(s)?;
    let delta_g1 = cur.g1(s)?;
    let delta_g2 = cur.g2(s)?;
    let ic = cur.points(s, G1_LEN, decode_g1)?;
    Ok(VerifyingKey {
        alpha_g1,
        beta_g1,
        beta_g2,
        gamma_g2,
        delta_g1,
        delta_g2,
        ic,
    })
}

fn map_file(path: &Path) -> Result<Mmap, SrsError> {
    let file = File::open(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => SrsError::Missing {
            path: path.to_path_buf(),
        },
        _ => SrsError::Io {
            path: path.to_path_buf(),
            source: e,
        },
    })?;
    // SAFETY: the map is read-only and private to this function's caller for the duration of
    // the parse. Parameter files are written once and never modified in place; a concurrent
    // truncation would at worst raise SIGBUS, which is the same exposure every Filecoin
    // prover accepts for its parameter cache.
    unsafe { Mmap::map(&file) }.map_err(|e| SrsError::Io {
        path: path.to_path_buf(),
        source: e,
    })
}

/// Maps `params_path`, checks and converts every section, and checks that the `.vk` file next
/// to it (if present) equals the verifying key inside the `.params` file.
pub fn load_srs(params_path: &Path) -> Result<Srs, SrsError> {
    let start = Instant::now();
    let map = map_file(params_path)?;
    let mut cur = Cursor {
        path: params_path,
        bytes: &map,
        offset: 0,
    };
    let vk = read_vk(&mut cur)?;
    let vk_len = cur.offset;
    let h = cur.points(Section::H, G1_LEN, decode_g1)?;
    let l = cur.points(Section::L, G1_LEN, decode_g1)?;
    let a = cur.points(Section::A, G1_LEN, decode_g1)?;
    let b_g1 = cur.points(Section::BG1, G1_LEN, decode_g1)?;
    let b_g2 = cur.points(Section::BG2, G2_LEN, decode_g2)?;
    if cur.offset != map.len() {
        return Err(SrsError::Mismatch {
            path: params_path.to_path_buf(),
            detail: format!(
                "{} unexpected bytes after section b_g2",
                map.len() - cur.offset
            ),
        });
    }
    check_vk_file(params_path, &map[..vk_len])?;
    let pvk = prepare_verifying_key(&vk);
    Ok(Srs {
        path: params_path.to_path_buf(),
        vk,
        pvk,
        h,
        l,
        a,
        b_g1,
        b_g2,
        file_len: map.len() as u64,
        load_time: start.elapsed(),
    })
}

/// The `.vk` file must be byte-for-byte the verifying key at the start of the `.params` file;
/// otherwise the two belong to different parameter sets and proofs would not verify.
fn check_vk_file(params_path: &Path, vk_bytes: &[u8]) -> Result<(), SrsError> {
    let vk_path = params_path.with_extension("vk");
    match std::fs::read(&vk_path) {
        Ok(file) if file == vk_bytes => Ok(()),
        Ok(_) => Err(SrsError::Mismatch {
            path: vk_path,
            detail: format!(
                "it differs from the verifying key in {}",
                params_path.display()
            ),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(SrsError::Io {
            path: vk_path,
            source: e,
        }),
    }
}
