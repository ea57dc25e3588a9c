//! Parsing bellperson's parameter layout from the file, in parallel, straight into the
//! points' final vectors.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use bellperson::groth16::{prepare_verifying_key, PreparedVerifyingKey, VerifyingKey};
use blstrs::{Bls12, G1Affine, G2Affine};

use super::points::{FilePoint, HostPoints, Origin};
use super::read::{decode_g1, Reader, Section, CHUNK_POINTS, G1_LEN, G2_LEN};
use super::SrsError;

/// A parameter set converted into the provers' layout.
pub struct Srs {
    /// Where it came from.
    pub path: PathBuf,
    /// The verifying key.
    pub vk: VerifyingKey<Bls12>,
    /// The verifying key prepared for pairings.
    pub pvk: PreparedVerifyingKey<Bls12>,
    /// `h` query (domain size − 1 points).
    pub h: HostPoints<G1Affine>,
    /// `l` query (one point per aux variable).
    pub l: HostPoints<G1Affine>,
    /// `a` query.
    pub a: HostPoints<G1Affine>,
    /// `b` query in G1.
    pub b_g1: HostPoints<G1Affine>,
    /// `b` query in G2.
    pub b_g2: HostPoints<G2Affine>,
    /// Size of the file.
    pub file_len: u64,
    /// How long mapping and converting took.
    pub load_time: Duration,
}

impl Srs {
    /// Bytes the converted points occupy in host memory now (queries released while a device
    /// holds them count nothing).
    pub fn resident_bytes(&self) -> u64 {
        [
            self.h.held_bytes(),
            self.l.held_bytes(),
            self.a.held_bytes(),
            self.b_g1.held_bytes(),
            self.b_g2.held_bytes(),
        ]
        .iter()
        .sum()
    }

    /// Bytes the converted points take when every query is held.
    pub fn points_bytes(&self) -> u64 {
        let g1 = self.h.len() + self.l.len() + self.a.len() + self.b_g1.len();
        (g1 * std::mem::size_of::<G1Affine>() + self.b_g2.len() * std::mem::size_of::<G2Affine>())
            as u64
    }

    /// Drops the host copy of every query that no one wants (see [`HostPoints`]); returns
    /// the bytes dropped.
    pub fn release_unwanted(&self) -> u64 {
        self.h.release_unwanted()
            + self.l.release_unwanted()
            + self.a.release_unwanted()
            + self.b_g1.release_unwanted()
            + self.b_g2.release_unwanted()
    }

    /// Gigabytes of file converted per second of load time.
    pub fn load_rate_gbps(&self) -> f64 {
        self.file_len as f64 / 1e9 / self.load_time.as_secs_f64().max(1e-9)
    }
}

/// The reader's one step that builds a query's `HostPoints`, which sit above `read.rs`
/// (`points.rs` reads through it), so it is written here rather than beside the others.
impl Reader<'_> {
    /// Reads a counted section of points as a query that can be released and read again.
    fn query<P: FilePoint>(
        &mut self,
        section: Section,
        modified: Option<SystemTime>,
    ) -> Result<HostPoints<P>, SrsError> {
        let count = self.u32(section)?;
        let len = (count as u64).saturating_mul(P::FILE_LEN as u64);
        let offset = self.extent(section, len)?;
        let points = self.points_at(section, offset, count, P::FILE_LEN, P::decode)?;
        let origin = Origin {
            path: self.path.to_path_buf(),
            section,
            offset,
            file_len: self.file_len,
            modified,
        };
        Ok(HostPoints::from_file(points, origin))
    }
}

fn read_vk(cur: &mut Reader<'_>) -> Result<VerifyingKey<Bls12>, SrsError> {
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

fn open_file(path: &Path) -> Result<(File, u64), SrsError> {
    let io = |e: std::io::Error| match e.kind() {
        std::io::ErrorKind::NotFound => SrsError::Missing {
            path: path.to_path_buf(),
        },
        _ => SrsError::Io {
            path: path.to_path_buf(),
            source: e,
        },
    };
    let file = File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    Ok((file, len))
}

/// Host bytes a load of `params_path` holds at most: its points converted, which take no
/// more than the file's bytes (96 per G1 point, 192 per G2 point, as in the file), and the
/// reading tasks' buffers, a few MiB. Known before the load, so that it can wait for room.
pub fn load_bytes(params_path: &Path) -> Result<u64, SrsError> {
    let (_, len) = open_file(params_path)?;
    Ok(len.saturating_add(LOAD_BUFFERS))
}

/// An upper bound on the reading tasks' buffers at once: one G2 chunk per task, and no more
/// tasks alive than a few per core of a large host.
const LOAD_BUFFERS: u64 = 256 * (CHUNK_POINTS * G2_LEN) as u64;

/// Reads `params_path`, checks and converts every section, and checks that the `.vk` file
/// next to it (if present) equals the verifying key inside the `.params` file. The points go
/// straight into their vectors: the load's peak host memory is what it keeps, plus the
/// reading tasks' buffers.
pub fn load_srs(params_path: &Path) -> Result<Srs, SrsError> {
    let start = Instant::now();
    let (file, file_len) = open_file(params_path)?;
    let modified = file.metadata().and_then(|m| m.modified()).ok();
    let mut cur = Reader::new(params_path, &file, file_len);
    let vk = read_vk(&mut cur)?;
    let vk_len = cur.offset;
    let h = cur.query(Section::H, modified)?;
    let l = cur.query(Section::L, modified)?;
    let a = cur.query(Section::A, modified)?;
    let b_g1 = cur.query(Section::BG1, modified)?;
    let b_g2 = cur.query(Section::BG2, modified)?;
    if cur.offset != file_len {
        return Err(SrsError::Mismatch {
            path: params_path.to_path_buf(),
            detail: format!(
                "{} unexpected bytes after section b_g2",
                file_len - cur.offset
            ),
        });
    }
    // The verifying key is a few KiB: read again as bytes for the comparison.
    let mut vk_bytes = vec![0; vk_len as usize];
    cur.read_at(&mut vk_bytes, 0)?;
    check_vk_file(params_path, &vk_bytes)?;
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
        file_len,
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

#[cfg(test)]
impl Srs {
    /// Parameters built in memory for tests, every point the generator: `h` H points, `l`
    /// aux points, `inputs` input points, one point in each of the A and B queries.
    pub(crate) fn of_generators(h: usize, l: usize, inputs: usize) -> Srs {
        use group::prime::PrimeCurveAffine;
        let (g1, g2) = (G1Affine::generator(), G2Affine::generator());
        let vk = VerifyingKey {
            alpha_g1: g1,
            beta_g1: g1,
            beta_g2: g2,
            gamma_g2: g2,
            delta_g1: g1,
            delta_g2: g2,
            ic: vec![g1; inputs],
        };
        let pvk = prepare_verifying_key(&vk);
        Srs {
            path: PathBuf::from("generators"),
            vk,
            pvk,
            h: HostPoints::in_memory(vec![g1; h]),
            l: HostPoints::in_memory(vec![g1; l]),
            a: HostPoints::in_memory(vec![g1]),
            b_g1: HostPoints::in_memory(vec![g1]),
            b_g2: HostPoints::in_memory(vec![g2]),
            file_len: 0,
            load_time: Duration::ZERO,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use blstrs::{G1Projective, G2Projective};
    use group::prime::PrimeCurveAffine;
    use group::{Curve, Group};

    /// `n` distinct points: multiples of the generator.
    fn g1s(n: usize) -> Vec<G1Affine> {
        let mut p = G1Projective::generator();
        let mut out = vec![G1Projective::identity(); n];
        for o in &mut out {
            p += G1Projective::generator();
            *o = p;
        }
        let mut affine = vec![G1Affine::identity(); n];
        G1Projective::batch_normalize(&out, &mut affine);
        affine
    }

    /// A `.params` file in bellperson's layout whose `h` and `l` span several reading tasks
    /// (and end in a partial one), and where each section's first point is the identity.
    fn write_file(path: &Path, h: &[G1Affine], l: &[G1Affine]) -> usize {
        let g2 = G2Affine::from(G2Projective::generator());
        let mut f = Vec::new();
        for p in [G1Affine::generator(), h[0]] {
            f.extend_from_slice(&p.to_uncompressed());
        }
        for p in [g2, g2] {
            f.extend_from_slice(&p.to_uncompressed());
        }
        f.extend_from_slice(&l[0].to_uncompressed());
        f.extend_from_slice(&g2.to_uncompressed());
        let section = |f: &mut Vec<u8>, points: &[Vec<u8>]| {
            f.extend_from_slice(&(points.len() as u32).to_be_bytes());
            for p in points {
                f.extend_from_slice(p);
            }
        };
        let bytes = |ps: &[G1Affine]| -> Vec<Vec<u8>> {
            ps.iter().map(|p| p.to_uncompressed().to_vec()).collect()
        };
        section(&mut f, &bytes(&h[..2]));
        let vk_len = f.len();
        section(&mut f, &bytes(h));
        section(&mut f, &bytes(l));
        section(&mut f, &bytes(&l[..3]));
        section(&mut f, &bytes(&[]));
        section(
            &mut f,
            &[
                g2.to_uncompressed().to_vec(),
                G2Affine::identity().to_uncompressed().to_vec(),
            ],
        );
        std::fs::write(path, &f).unwrap();
        vk_len
    }

    #[test]
    fn sections_of_many_tasks_load_in_order_and_a_bad_point_is_named_by_its_index() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.params");
        let mut h = g1s(2 * CHUNK_POINTS + 1234);
        h[0] = G1Affine::identity();
        let l = g1s(CHUNK_POINTS + 7);
        let vk_len = write_file(&path, &h, &l);
        let srs = load_srs(&path).unwrap();
        assert_eq!(
            (
                srs.h.get().unwrap().as_slice(),
                srs.l.get().unwrap().as_slice()
            ),
            (h.as_slice(), l.as_slice())
        );
        assert_eq!(srs.a.get().unwrap()[..], l[..3]);
        assert!(srs.b_g1.is_empty());
        assert_eq!(srs.b_g2.len(), 2);
        assert_eq!(srs.vk.ic, h[..2]);
        assert_eq!(srs.file_len, std::fs::metadata(&path).unwrap().len());
        assert!(load_bytes(&path).unwrap() >= srs.resident_bytes());

        // A point off the curve in the second task of `h`, and one in the last, partial task:
        // each named by its index in the section.
        let bytes = std::fs::read(&path).unwrap();
        for index in [CHUNK_POINTS + 5, h.len() - 1] {
            let mut bad = bytes.clone();
            bad[vk_len + 4 + index * G1_LEN + 60] ^= 0x01;
            std::fs::write(&path, &bad).unwrap();
            match load_srs(&path) {
                Err(SrsError::InvalidPoint {
                    section, index: i, ..
                }) => {
                    assert_eq!((section, i), ("h", index))
                }
                other => panic!("expected an invalid point, got {:?}", other.err()),
            }
        }
        // Trailing bytes after the last section.
        let mut long = bytes.clone();
        long.push(0);
        std::fs::write(&path, &long).unwrap();
        assert!(matches!(load_srs(&path), Err(SrsError::Mismatch { .. })));
    }

    #[test]
    fn a_query_nobody_wants_is_released_and_read_again_the_same_from_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.params");
        let (h, l) = (g1s(CHUNK_POINTS + 3), g1s(40));
        write_file(&path, &h, &l);
        let srs = load_srs(&path).unwrap();
        let all = srs.resident_bytes();
        assert_eq!(all, srs.points_bytes());

        // A claim keeps its query; the others go.
        let want_l = srs.l.want();
        let reader = srs.h.get().unwrap();
        let released = srs.release_unwanted();
        assert_eq!(released, all - srs.l.held_bytes());
        assert_eq!(srs.resident_bytes(), (l.len() * 96) as u64);
        assert!(srs.h.held().is_none() && srs.l.held().is_some());
        assert_eq!(
            reader.as_slice(),
            h.as_slice(),
            "a reader keeps what it holds"
        );
        drop(reader);

        // Read again, the same points; held from then on until the next release.
        assert_eq!(srs.h.get().unwrap().as_slice(), h.as_slice());
        assert_eq!(srs.b_g2.get().unwrap().len(), 2);
        assert!(srs.h.held().is_some());
        drop(want_l);
        // `a` was not read again: everything but it is released now.
        assert_eq!(srs.release_unwanted(), srs.points_bytes() - 3 * 96);
        assert_eq!((srs.resident_bytes(), srs.release_unwanted()), (0, 0));

        // A file changed since the load is refused, not read into the set.
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.push(0);
        std::fs::write(&path, &bytes).unwrap();
        assert!(matches!(srs.l.get(), Err(SrsError::Mismatch { .. })));

        // Points built in memory have no file: never released.
        let built = Srs::of_generators(4, 2, 1);
        assert_eq!(built.release_unwanted(), 0);
        assert_eq!(built.resident_bytes(), built.points_bytes());
    }
}
