//! A proof's device work in the forms of a memory plan that does not hold everything
//! ([`crate::gpu::plan`]): the quotient with its vectors parked in host memory, A, B and C
//! evaluated from a shape streamed in pieces of rows, and MSMs cut into pieces whose points are
//! resident or streamed from host memory through two device buffers. A device whose plan holds
//! everything takes the paths of [`super::sums`] instead. What a plan keeps on the device
//! between proofs, and what it frees, is [`super::residency`]'s to decide
//! ([`State::make_room`]); these methods use the state only through its methods.

use std::sync::Arc;

use blstrs::{G1Projective, G2Projective, Scalar};
use cudarc::driver::PinnedHostSlice;
use rayon::prelude::*;

use super::host::HostBytes;
use super::residency::{Points, State};
use super::sums::AuxPoints;
use crate::gpu::bytes::bytes;
use crate::gpu::device::{DevBuf, DevView, Gpu, Ring};
use crate::gpu::msm::{self, MsmParts};
use crate::gpu::ntt::{Domain, FR_BYTES};
use crate::gpu::plan::{self, Plan, Quotient, SHAPE_SLOT_BYTES};
use crate::gpu::r1cs::{DeviceShape, StreamedShape};
use crate::gpu::GpuError;
use crate::prover::WitnessSums;
use crate::synth::R1cs;

/// The assignment the evaluations read: on the device for the whole proof, or uploaded for
/// each evaluation (and freed after it).
pub(super) enum Assignment<'a> {
    Kept(&'a DevBuf),
    Reload(&'a [Scalar]),
}

/// How A, B and C are made on the device.
pub(super) enum Fill<'a> {
    /// Uploaded from host evaluations.
    Host([&'a [Scalar]; 3]),
    /// Evaluated from the shape kept on the device.
    Resident {
        shape: &'a DeviceShape,
        input: &'a DevBuf,
        aux: Assignment<'a>,
    },
    /// Evaluated from the shape's rows streamed from host memory.
    Streamed {
        shape: &'a StreamedShape,
        input: &'a DevBuf,
        aux: Assignment<'a>,
    },
}

impl Fill<'_> {
    /// The ring a streamed shape's rows go through, made before the quotient's first vector so
    /// that the rows of B and C travel while A's and B's transforms run.
    fn ring(&self, gpu: &Gpu) -> Result<Option<Ring>, GpuError> {
        match self {
            Fill::Streamed { .. } => Some(gpu.ring(SHAPE_SLOT_BYTES as usize)).transpose(),
            _ => Ok(None),
        }
    }

    /// Vector `v` (0 = A, 1 = B, 2 = C) into the first `n` elements of `out` (a streamed
    /// shape's rows through `ring`).
    fn fill(
        &self,
        gpu: &Gpu,
        v: usize,
        out: &mut DevBuf,
        ring: &mut Option<Ring>,
    ) -> Result<(), GpuError> {
        let with_aux = |aux: &Assignment<'_>, eval: &dyn Fn(&DevBuf) -> Result<(), GpuError>| {
            match aux {
                Assignment::Kept(buf) => eval(buf),
                // Freed in stream order after the evaluation that reads it.
                Assignment::Reload(host) => eval(&gpu.upload_new(bytes(host))?),
            }
        };
        match self {
            Fill::Host(vs) => gpu.upload(out, bytes(vs[v])),
            Fill::Resident { shape, input, aux } => with_aux(aux, &|a| {
                shape.evaluate_matrix(gpu, v, input, a, out.view())
            }),
            Fill::Streamed { shape, input, aux } => {
                let ring = ring
                    .as_mut()
                    .ok_or_else(|| GpuError::Input("a streamed shape without its ring".into()))?;
                let out = out.view();
                match aux {
                    Assignment::Kept(buf) => shape.evaluate_matrix(gpu, v, input, buf, out, ring),
                    // Freed in stream order after the evaluation that reads it.
                    Assignment::Reload(host) => {
                        let buf = gpu.upload_new(bytes(host))?;
                        shape.evaluate_matrix(gpu, v, input, &buf, out, ring)
                    }
                }
            }
        }
    }
}

impl State {
    /// The quotient's m coefficients in a new device buffer, in the plan's form, from `fill`'s
    /// A, B and C (n values each).
    fn quotient_planned(
        &mut self,
        plan: &Plan,
        fill: &Fill<'_>,
        n: usize,
        m: usize,
    ) -> Result<DevBuf, GpuError> {
        let lg = m.trailing_zeros();
        self.domain(lg)?;
        let mut park = match plan.quotient {
            Quotient::Parked => Some(self.take_park(m * FR_BYTES)?),
            Quotient::Resident => None,
        };
        let result = {
            let d = self
                .cached_domain(lg)
                .ok_or_else(|| GpuError::Input("domain not resident".into()))?;
            match park.as_mut() {
                None => resident_quotient(&self.gpu, d, fill, n, m),
                Some(park) => parked_quotient(&self.gpu, d, park, fill, n, m),
            }
        };
        self.put_park(park);
        if !plan.keep_tables {
            self.drop_domain(lg);
        }
        result
    }

    /// Which of `msms` have their points resident now: those the plan keeps, made resident
    /// where they fit (the others stream).
    fn resident_now(&mut self, msms: &[PlannedMsm<'_>]) -> Result<Vec<bool>, GpuError> {
        let mut resident = Vec::with_capacity(msms.len());
        for m in msms {
            resident.push(m.resident && m.p.n > 0 && self.ensure_or_stream(&m.p)?);
        }
        // A later query's upload that ran out of memory evicts the points made resident for an
        // earlier one: those are streamed instead.
        for (r, m) in resident.iter_mut().zip(msms) {
            *r &= self.is_resident(&m.p.key);
        }
        Ok(resident)
    }

    /// The parts of each MSM of `msms` (Σ scalars·points over its query, in pieces), in order:
    /// one stream of pieces for all of them, so that the points of one MSM's first piece travel
    /// while the last piece of the one before is summed. A query's points are resident where
    /// planned (made so now; streamed instead where they do not fit) or streamed from host
    /// memory through two device buffers.
    fn msms_planned(&mut self, msms: &[PlannedMsm<'_>]) -> Result<Vec<Vec<MsmParts>>, GpuError> {
        let resident = self.resident_now(msms)?;
        let (pieces, bounds) = cut_into_pieces(msms, &resident)?;
        let gpu = &self.gpu;
        let affine = |p: &Piece| msms[p.msm].p.curve.affine_bytes();
        let streamed = |p: &&Piece| !resident[p.msm];
        let slot = pieces
            .iter()
            .filter(streamed)
            .map(|p| p.len() * affine(p))
            .max()
            .unwrap_or(0);
        let selected = pieces
            .iter()
            .filter(|p| matches!(msms[p.msm].scalars, Selection::Of { .. }))
            .map(|p| p.len() * FR_BYTES)
            .max()
            .map(|b| gpu.alloc(b))
            .transpose()?;
        let kept: Vec<Option<DevView>> = msms
            .iter()
            .zip(&resident)
            .map(|(m, &r)| {
                r.then(|| self.resident(&m.p.key).map(|b| b.view()))
                    .transpose()
            })
            .collect::<Result<_, _>>()?;
        // The streamed queries' host bytes, held while they stream (a released query's read
        // again from its file).
        let hosts: Vec<Option<HostBytes<'_>>> = msms
            .iter()
            .zip(&kept)
            .map(|(m, k)| match k {
                Some(_) => Ok(None),
                None => m.p.host_bytes().map(Some),
            })
            .collect::<Result<_, GpuError>>()?;
        let mut ring = gpu.ring(slot)?;
        let mut out: Vec<Vec<MsmParts>> = msms.iter().map(|_| Vec::new()).collect();
        gpu.stream(
            &mut ring,
            pieces.len(),
            |j| {
                let p = &pieces[j];
                match &hosts[p.msm] {
                    None => Vec::new(),
                    Some(host) => {
                        let a = affine(p);
                        vec![&host[p.first * a..p.end * a]]
                    }
                }
            },
            |j, view| {
                let p = &pieces[j];
                let (m, a) = (&msms[p.msm], affine(p));
                let bases = match kept[p.msm] {
                    Some(all) => all.range(p.first * a..p.end * a)?,
                    None => view,
                };
                let scalars = match (m.scalars, &bounds[p.msm], &selected) {
                    (Selection::Dense(v), _, _) => v.range(p.first * FR_BYTES..p.end * FR_BYTES)?,
                    (Selection::Of { aux, flags }, Some(b), Some(buf)) => {
                        let (f0, f1) = (b[p.k], b[p.k + 1]);
                        let src = aux.range(f0 * FR_BYTES..f1 * FR_BYTES)?;
                        msm::compact_into(gpu, src, &flags[f0..f1], p.len(), buf.view())?;
                        buf.view()
                    }
                    _ => return Err(GpuError::Input("selection without its bounds".into())),
                };
                out[p.msm].push(msm::msm_view(gpu, m.p.curve, bases, p.len(), scalars)?);
                Ok(())
            },
        )?;
        Ok(out)
    }

    /// Makes `p`'s points resident; `false` (stream them, in fallback pieces) where they do not
    /// fit now.
    fn ensure_or_stream(&mut self, p: &Points<'_>) -> Result<bool, GpuError> {
        match self.ensure(p) {
            Ok(()) => Ok(true),
            Err(e) if e.is_out_of_memory() => {
                tracing::debug!(error = %e, query = ?p.key.query, "points streamed: they do not fit now");
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// The four aux MSMs of the plan over the assignment `aux` on the device (consumed: the L
    /// query's MSM, last, rewrites it): the A and B queries' scalars selected from it piece by
    /// piece.
    pub(super) fn aux_planned(
        &mut self,
        plan: &Plan,
        q: &AuxPoints<'_, '_>,
        aux: DevBuf,
    ) -> Result<WitnessSums, GpuError> {
        let x = aux.view();
        let sel = |flags| Selection::Of { aux: x, flags };
        // The L query last: its MSM rewrites the assignment the others select from.
        let msms = [
            (q.a, plan::Query::A, sel(q.a_density)),
            (q.b_g1, plan::Query::BG1, sel(q.b_density)),
            (q.b_g2, plan::Query::BG2, sel(q.b_density)),
            (q.l, plan::Query::L, Selection::Dense(x)),
        ]
        .map(|(p, query, scalars)| PlannedMsm {
            p,
            resident: plan.resident.has(query),
            piece: plan.stream_piece(query),
            fallback: plan.fallback_piece(query, p.n as u64),
            scalars,
        });
        let parts = self.msms_planned(&msms)?;
        drop(aux);
        let [a, b1, b2, l] = parts.as_slice() else {
            return Err(GpuError::Input("four MSMs expected".into()));
        };
        Ok(WitnessSums {
            l: sum_g1(l),
            a: sum_g1(a),
            b_g1: sum_g1(b1),
            b_g2: parts_g2(b2),
        })
    }

    /// Σ h_i·H_i for the quotient of `fill`'s A, B and C (n constraints, a domain of m), in the
    /// plan's forms.
    pub(super) fn h_planned(
        &mut self,
        plan: &Plan,
        h: &Points<'_>,
        fill: &Fill<'_>,
        n: usize,
        m: usize,
    ) -> Result<G1Projective, GpuError> {
        if h.n != m - 1 {
            return Err(GpuError::Input(format!(
                "{} H bases for a domain of {m}",
                h.n
            )));
        }
        let coeffs = self.quotient_planned(plan, fill, n, m)?;
        let parts = self.msms_planned(&[PlannedMsm {
            p: *h,
            resident: plan.resident.has(plan::Query::H),
            piece: plan.stream_piece(plan::Query::H),
            fallback: plan.fallback_piece(plan::Query::H, h.n as u64),
            scalars: Selection::Dense(coeffs.view_of(0..(m - 1) * FR_BYTES)?),
        }])?;
        drop(coeffs);
        Ok(parts.iter().map(|p| sum_g1(p)).sum())
    }
}

impl State {
    /// [`State::h_planned`] of a shaped proof: A, B and C evaluated from `shape`, kept on the
    /// device where the plan says so and it fits, else streamed from host memory.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn h_shaped_planned(
        &mut self,
        plan: &Plan,
        h: &Points<'_>,
        shape: &Arc<R1cs>,
        input: &DevBuf,
        aux: Assignment<'_>,
        n: usize,
        m: usize,
    ) -> Result<G1Projective, GpuError> {
        let resident = plan.shape_resident
            && match self.ensure_shape(shape, &h.key) {
                Ok(()) => true,
                Err(e) if e.is_out_of_memory() => {
                    tracing::debug!(error = %e, "recorded shape streamed: it does not fit now");
                    false
                }
                Err(e) => return Err(e),
            };
        // The shape's form is taken out of the state while the sum runs (which borrows the
        // state mutably), and put back after.
        if resident {
            let (host, copy) = self.take_shape(shape)?;
            let fill = Fill::Resident {
                shape: &copy,
                input,
                aux,
            };
            let sum = self.h_planned(plan, h, &fill, n, m);
            self.put_shape((host, copy));
            sum
        } else {
            let streamed = self.take_streamed_shape(shape)?;
            let fill = Fill::Streamed {
                shape: &streamed,
                input,
                aux,
            };
            let sum = self.h_planned(plan, h, &fill, n, m);
            self.put_streamed_shape(streamed);
            sum
        }
    }
}

/// One MSM of [`State::msms_planned`].
struct PlannedMsm<'a> {
    /// The query's points.
    pub p: Points<'a>,
    /// Whether the plan keeps them resident.
    pub resident: bool,
    /// Points per piece.
    pub piece: usize,
    /// Points per piece where the plan keeps the points resident but they are not
    /// ([`Plan::fallback_piece`]).
    pub fallback: usize,
    /// Its scalars.
    pub scalars: Selection<'a>,
}

/// A piece of one of [`State::msms_planned`]'s MSMs: points `first..end` of MSM `msm`, its
/// `k`-th piece.
struct Piece {
    msm: usize,
    k: usize,
    first: usize,
    end: usize,
}

impl Piece {
    fn len(&self) -> usize {
        self.end - self.first
    }
}

/// The scalars of an MSM over a query.
#[derive(Clone, Copy)]
enum Selection<'a> {
    /// One per point, at the start of a device view (rewritten by the MSM).
    Dense(DevView),
    /// The values of the assignment `aux` (one per flag) whose flag is set, one per point.
    Of { aux: DevView, flags: &'a [bool] },
}

fn sum_g1(parts: &[MsmParts]) -> G1Projective {
    parts.iter().map(msm::finish_g1).sum()
}

fn parts_g2(parts: &[MsmParts]) -> G2Projective {
    parts.iter().map(msm::finish_g2).sum()
}

/// Per MSM, where each piece's selected scalars begin among the set flags (`None`: dense).
type SelectionBounds = Vec<Option<Vec<usize>>>;

/// Every MSM's pieces, in order, and where each piece's selected scalars are (`resident`:
/// whether each MSM's points are resident now).
fn cut_into_pieces(
    msms: &[PlannedMsm<'_>],
    resident: &[bool],
) -> Result<(Vec<Piece>, SelectionBounds), GpuError> {
    let mut pieces = Vec::new();
    let mut bounds = Vec::with_capacity(msms.len());
    for (i, m) in msms.iter().enumerate() {
        let n = m.p.n;
        // Points the plan keeps but that are not resident now stream in pieces whose ring
        // takes no more than the copy the plan counted.
        let piece = if m.resident && !resident[i] {
            m.fallback
        } else {
            m.piece
        };
        let piece = piece.clamp(1, n.max(1));
        bounds.push(match m.scalars {
            Selection::Of { flags, .. } if n > 0 => Some(selection_bounds(flags, piece, n)?),
            Selection::Dense(v) if v.len() < n * FR_BYTES => {
                return Err(GpuError::Input(format!(
                    "{} scalar bytes for {n} points",
                    v.len()
                )))
            }
            _ => None,
        });
        for k in 0..n.div_ceil(piece) {
            pieces.push(Piece {
                msm: i,
                k,
                first: k * piece,
                end: ((k + 1) * piece).min(n),
            });
        }
    }
    Ok((pieces, bounds))
}

/// Where each piece of `piece` selected values begins in `flags` (one more entry: the end of
/// the flags): entry k is the index of set flag number k·piece. `count` must be the number of
/// set flags.
fn selection_bounds(flags: &[bool], piece: usize, count: usize) -> Result<Vec<usize>, GpuError> {
    const CHUNK: usize = 1 << 16;
    let per_chunk: Vec<usize> = flags
        .par_chunks(CHUNK)
        .map(|c| c.iter().filter(|&&f| f).count())
        .collect();
    let set: usize = per_chunk.iter().sum();
    if set != count {
        return Err(GpuError::Input(format!(
            "{set} set flags select scalars for {count} points"
        )));
    }
    let pieces = count.div_ceil(piece.max(1));
    let mut bounds = Vec::with_capacity(pieces + 1);
    bounds.push(0);
    let (mut chunk, mut before) = (0, 0);
    for k in 1..pieces {
        let target = k * piece;
        while before + per_chunk[chunk] <= target {
            before += per_chunk[chunk];
            chunk += 1;
        }
        // Set flag number `target` lies in `chunk`, after `before` set flags.
        let start = chunk * CHUNK;
        let mut seen = before;
        let mut at = start;
        for (i, &f) in flags[start..].iter().enumerate() {
            if f {
                if seen == target {
                    at = start + i;
                    break;
                }
                seen += 1;
            }
        }
        bounds.push(at);
    }
    bounds.push(flags.len());
    Ok(bounds)
}

/// The quotient with its four vectors on the device together.
fn resident_quotient(
    gpu: &Gpu,
    d: &Domain,
    fill: &Fill<'_>,
    n: usize,
    m: usize,
) -> Result<DevBuf, GpuError> {
    let mut bufs = [
        gpu.alloc(m * FR_BYTES)?,
        gpu.alloc(m * FR_BYTES)?,
        gpu.alloc(m * FR_BYTES)?,
        gpu.alloc(m * FR_BYTES)?,
    ];
    let mut ring = fill.ring(gpu)?;
    // Each vector taken to the coset as soon as it is made: the next one's rows travel while
    // its transforms run.
    for v in 0..3 {
        let (vs, scratch) = bufs.split_at_mut(3);
        fill.fill(gpu, v, &mut vs[v], &mut ring)?;
        gpu.zero_range(&mut vs[v], n * FR_BYTES, (m - n) * FR_BYTES)?;
        d.to_coset(gpu, &mut vs[v], &mut scratch[0])?;
    }
    drop(ring);
    d.quotient_from_cosets(gpu, bufs)
}

/// The quotient with two vectors on the device: A and B each made, taken to the coset and
/// parked in `park`; C made and taken to the coset; then A and B streamed back in pieces for
/// the pointwise step, which writes into C's vector; then the inverse transform. A parked
/// vector's download is not waited for: its buffer is freed in the stream's order after it,
/// and the next vector's rows travel meanwhile.
fn parked_quotient(
    gpu: &Gpu,
    d: &Domain,
    park: &mut [PinnedHostSlice<u8>; 2],
    fill: &Fill<'_>,
    n: usize,
    m: usize,
) -> Result<DevBuf, GpuError> {
    let bytes_v = m * FR_BYTES;
    let mut ring = fill.ring(gpu)?;
    let mut c = None;
    for v in 0..3 {
        let mut x = gpu.alloc(bytes_v)?;
        fill.fill(gpu, v, &mut x, &mut ring)?;
        gpu.zero_range(&mut x, n * FR_BYTES, (m - n) * FR_BYTES)?;
        let mut scratch = gpu.alloc(bytes_v)?;
        d.to_coset(gpu, &mut x, &mut scratch)?;
        match park.get_mut(v) {
            Some(host) => {
                let host = host
                    .as_mut_slice()
                    .map_err(|e| GpuError::driver("pinned buffer", e))?;
                // SAFETY: the park is page-locked and nothing reads or writes it until the
                // ring below (made after this download, so its copies wait for it) streams it
                // back; the caller keeps it until then.
                unsafe { gpu.download_view_async(x.view(), &mut host[..bytes_v])? };
            }
            None => c = Some(x),
        }
    }
    drop(ring);
    let c = c.ok_or_else(|| GpuError::Input("no third vector".into()))?;
    // A piece of A and the same piece of B in each of the stream's two slots.
    let per = (m / 4).max(1);
    let mut ring = gpu.ring(2 * per * FR_BYTES)?;
    let [pa, pb] = park;
    let pa = &pa
        .as_slice()
        .map_err(|e| GpuError::driver("pinned buffer", e))?[..bytes_v];
    let pb = &pb
        .as_slice()
        .map_err(|e| GpuError::driver("pinned buffer", e))?[..bytes_v];
    let range = |k: usize| k * per * FR_BYTES..((k + 1) * per).min(m) * FR_BYTES;
    gpu.stream(
        &mut ring,
        m.div_ceil(per),
        |k| vec![&pa[range(k)], &pb[range(k)]],
        |k, view| {
            let len = view.len() / 2;
            let (a, b) = (view.range(0..len)?, view.range(len..2 * len)?);
            let c_part = c.view_of(range(k))?;
            d.pointwise(gpu, a, b, c_part, len / FR_BYTES)?;
            gpu.copy_view(a, c_part)
        },
    )?;
    drop(ring);
    let mut h = gpu.alloc(bytes_v)?;
    d.coset_to_coefficients(gpu, &c, &mut h)?;
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bounds put exactly `piece` set flags in every piece but the last, whatever the chunk
    /// borders, and refuse a count that is not the flags'.
    #[test]
    fn selection_bounds_cut_at_every_piece_of_set_flags() {
        let n = 300_007;
        let flags: Vec<bool> = (0..n)
            .map(|i| (i * 2_654_435_761usize) % 1000 < 254)
            .collect();
        let count = flags.iter().filter(|&&f| f).count();
        for piece in [1, 7, 1000, 65_536, count - 1, count, count + 5] {
            let b = selection_bounds(&flags, piece, count).unwrap();
            assert_eq!(b.len(), count.div_ceil(piece) + 1, "{piece}");
            assert_eq!((b[0], *b.last().unwrap()), (0, n));
            for (k, w) in b.windows(2).enumerate() {
                let set = flags[w[0]..w[1]].iter().filter(|&&f| f).count();
                let want = piece.min(count - k * piece);
                assert_eq!(set, want, "piece {piece}, part {k}");
                if k > 0 {
                    assert!(flags[w[0]], "a piece starts at a set flag");
                }
            }
        }
        assert!(selection_bounds(&flags, 10, count + 1).is_err());
        assert_eq!(selection_bounds(&[], 4, 0).unwrap(), vec![0, 0]);
    }
}
