//! A proof's device work in the forms of a memory plan that does not hold everything
//! ([`crate::gpu::plan`]): the quotient with its vectors parked in host memory, A, B and C
//! evaluated from a shape streamed in pieces of rows, and MSMs cut into pieces whose points are
//! resident or streamed from host memory through two device buffers. A device whose plan holds
//! everything takes the paths of [`super::sums`] instead. What a plan keeps on the device
//! between proofs, and what it frees, is [`super::residency`]'s to decide
//! ([`State::make_room`]); these functions use the state only through its methods.
//!
//! They run on a turn that lets the device go to urgent callers part way through ([`Held`]):
//! before each of the quotient's transforms to the coset, before each MSM's first piece and
//! between two pieces of the stream of MSMs where an urgent caller waits. So they reach the
//! state anew after each pause (what it holds may have been evicted meanwhile), and keep what
//! they took out of it (a shape's form, the park) or made themselves (the ring, the quotient's
//! vectors, selected scalars) with them, the former put back on every path.

use std::sync::Arc;

use blstrs::{G1Projective, G2Projective, Scalar};
use cudarc::driver::PinnedHostSlice;
use rayon::prelude::*;

use super::host::HostBytes;
use super::residency::{Points, State};
use super::sums::AuxPoints;
use super::turns::{room_for, Held, Pause};
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
            Fill::Streamed { shape, .. } => {
                let slot = shape.ring_slot_bytes(SHAPE_SLOT_BYTES as usize);
                Some(gpu.ring(slot)).transpose()
            }
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

/// The quotient's m coefficients in a new device buffer, in `plan`'s form, from `fill`'s A, B
/// and C (n values each); before each vector's transform to the coset an urgent caller
/// waiting gets the device ([`Pause::Quotient`]), the vectors made so far, the park and the
/// domain's tables kept meanwhile.
fn quotient_planned(
    held: &mut Held<'_>,
    plan: &Plan,
    fill: &Fill<'_>,
    n: usize,
    m: usize,
) -> Result<DevBuf, GpuError> {
    let lg = m.trailing_zeros();
    let s = held.state()?;
    // Shared with the state: tables that a caller going first during a pause evicts live on
    // until this quotient is done.
    let d = s.domain(lg)?;
    let mut park = match plan.quotient {
        Quotient::Parked => Some(s.take_park(m * FR_BYTES)?),
        Quotient::Resident => None,
    };
    let result = match park.as_mut() {
        None => resident_quotient(held, &d, fill, n, m),
        Some(park) => parked_quotient(held, &d, park, fill, n, m),
    };
    // Put back on every path where the turn is still held; a pause that lost it ends the
    // proof with its error, and the park goes with it.
    if let Ok(s) = held.state() {
        s.put_park(park);
        if !plan.keep_tables {
            s.drop_domain(lg);
        }
    }
    result
}

impl State {
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

    /// The device views of the resident points of `msms` from MSM `from` on (`resident`
    /// says which; `None` for the others), looked up anew after each pause: a caller that
    /// went first may have evicted them, and they go up again. Where they no longer fit
    /// beside each other, the out-of-memory error: the proof is retried under a smaller plan.
    fn kept_views(
        &mut self,
        msms: &[PlannedMsm<'_>],
        resident: &[bool],
        from: usize,
    ) -> Result<Vec<Option<DevView>>, GpuError> {
        let needed = |i: usize| resident[i] && i >= from;
        for (i, m) in msms.iter().enumerate() {
            if needed(i) {
                self.ensure(&m.p)?;
            }
        }
        let view = |i: usize, m: &PlannedMsm<'_>| match self.resident(&m.p.key) {
            Ok(buf) => Ok(buf.view()),
            // Another query's upload made room by evicting this one.
            Err(_) => Err(GpuError::OutOfMemory(format!(
                "the {:?} points no longer fit beside the other queries' (MSM {i})",
                m.p.key.query
            ))),
        };
        let views = msms.iter().enumerate().map(|(i, m)| match needed(i) {
            true => view(i, m).map(Some),
            false => Ok(None),
        });
        views.collect()
    }
}

/// The parts of each MSM of `msms` (Σ scalars·points over its query, in pieces), in order:
/// one stream of pieces for all of them, so that the points of one MSM's first piece travel
/// while the last piece of the one before is summed. A query's points are resident where
/// planned (made so now; streamed instead where they do not fit) or streamed from host memory
/// through two device buffers. Before the first piece, and between two pieces where an urgent
/// caller waits ([`Shared::would_pause`](super::turns::Shared::would_pause), asked before
/// each piece's copy), the device is let go ([`pause_before`] says where it counts): the
/// ring, the selected scalars and the parts so far stay with this call, and the resident
/// points are looked up again after.
fn msms_planned(
    held: &mut Held<'_>,
    msms: &[PlannedMsm<'_>],
) -> Result<Vec<Vec<MsmParts>>, GpuError> {
    let resident = held.state()?.resident_now(msms)?;
    let (pieces, bounds) = cut_into_pieces(msms, &resident)?;
    let affine = |p: &Piece| msms[p.msm].p.curve.affine_bytes();
    let streamed = |p: &&Piece| !resident[p.msm];
    let slot = pieces
        .iter()
        .filter(streamed)
        .map(|p| p.len() * affine(p))
        .max()
        .unwrap_or(0);
    let selected_bytes = pieces
        .iter()
        .filter(|p| matches!(msms[p.msm].scalars, Selection::Of { .. }))
        .map(|p| p.len() * FR_BYTES)
        .max();
    // The streamed queries' host bytes, held while they stream (a released query's read
    // again from its file).
    let hosts: Vec<Option<HostBytes<'_>>> = msms
        .iter()
        .zip(&resident)
        .map(|(m, &r)| match r {
            true => Ok(None),
            false => m.p.host_bytes().map(Some),
        })
        .collect::<Result<_, GpuError>>()?;
    let (mut ring, selected, flags) = {
        let gpu = &held.state()?.gpu;
        let selected = selected_bytes.map(|b| gpu.alloc(b)).transpose()?;
        let flags = SelectionFlags::upload(gpu, msms)?;
        (gpu.ring(slot)?, selected, flags)
    };
    // Asked between pieces while the state is borrowed for the stream: an urgent caller
    // waits, and the ledger has room for its working memory (`Held::pause` asks the driver
    // too).
    let (shared, lets_go) = (held.shared(), held.lets_go());
    let (ledger, reserve) = {
        let s = held.state()?;
        (s.gpu.ledger(), s.critical_reserve())
    };
    let room = || {
        let m = ledger.snapshot();
        room_for(reserve, m.budget, m.used, u64::MAX)
    };
    let firsts: Vec<Pause> = msms.iter().map(|m| m.first).collect();
    let mut out: Vec<Vec<MsmParts>> = msms.iter().map(|_| Vec::new()).collect();
    let mut next = 0;
    while let Some(piece) = pieces.get(next) {
        held.pause(pause_before(&pieces, next, &firsts))?;
        let s = held.state()?;
        let kept = s.kept_views(msms, &resident, piece.msm)?;
        let on = PieceWork {
            gpu: &s.gpu,
            msms,
            bounds: &bounds,
            selected: selected.as_ref(),
            flags: &flags.views,
            kept: &kept,
        };
        next = s.gpu.stream_while(
            &mut ring,
            next..pieces.len(),
            |_| !(lets_go && shared.would_pause() && room()),
            |j| piece_bytes(&pieces[j], &hosts, affine(&pieces[j])),
            |j, view| {
                let p = &pieces[j];
                out[p.msm].push(on.msm(p, view)?);
                Ok(())
            },
        )?;
    }
    Ok(out)
}

/// Where a pause before piece `k` of `pieces` counts: before the first piece of an MSM, at
/// that MSM's own point (`firsts`, one per MSM: [`Pause::BeforeH`], [`Pause::AuxMsm`]);
/// between the pieces of one, [`Pause::MsmPiece`].
fn pause_before(pieces: &[Piece], k: usize, firsts: &[Pause]) -> Pause {
    match pieces.get(k) {
        Some(p) if p.k == 0 => firsts.get(p.msm).copied().unwrap_or(Pause::MsmPiece),
        _ => Pause::MsmPiece,
    }
}

/// The host bytes of piece `p`'s points (`a` bytes each) where its query streams; none where
/// its points are resident.
fn piece_bytes<'h>(p: &Piece, hosts: &'h [Option<HostBytes<'_>>], a: usize) -> Vec<&'h [u8]> {
    match hosts.get(p.msm) {
        Some(Some(host)) => vec![&host[p.first * a..p.end * a]],
        _ => Vec::new(),
    }
}

/// What the work on a piece of [`msms_planned`] reads, for one stream between two pauses.
struct PieceWork<'w, 'm> {
    gpu: &'w Gpu,
    msms: &'w [PlannedMsm<'m>],
    bounds: &'w SelectionBounds,
    /// The buffer a piece's selected scalars are compacted into (MSMs that select).
    selected: Option<&'w DevBuf>,
    /// The selection flags on the device, per MSM (`None` for dense scalars).
    flags: &'w [Option<DevView>],
    /// The resident points' views, per MSM.
    kept: &'w [Option<DevView>],
}

impl PieceWork<'_, '_> {
    /// The parts of piece `p`'s MSM, its points in `view` where they streamed (else in the
    /// resident copy), its scalars selected into the buffer where its MSM selects them.
    fn msm(&self, p: &Piece, view: DevView) -> Result<MsmParts, GpuError> {
        let (m, a) = (&self.msms[p.msm], self.msms[p.msm].p.curve.affine_bytes());
        let bases = match self.kept.get(p.msm).copied().flatten() {
            Some(all) => all.range(p.first * a..p.end * a)?,
            None => view,
        };
        let bounds = self.bounds.get(p.msm).and_then(Option::as_ref);
        let flags = self.flags.get(p.msm).copied().flatten();
        let scalars = match (m.scalars, bounds, self.selected, flags) {
            (Selection::Dense(v), ..) => v.range(p.first * FR_BYTES..p.end * FR_BYTES)?,
            (Selection::Of { aux, .. }, Some(b), Some(buf), Some(flags)) => {
                // The bounds were cut at every piece's share of set flags (selection_bounds
                // counted them): the piece's range holds exactly p.len() of them.
                let (f0, f1) = (b[p.k], b[p.k + 1]);
                let src = aux.range(f0 * FR_BYTES..f1 * FR_BYTES)?;
                msm::compact_flagged(self.gpu, src, flags.range(f0..f1)?, p.len(), buf.view())?;
                buf.view()
            }
            _ => return Err(GpuError::Input("selection without its bounds".into())),
        };
        msm::msm_view(self.gpu, m.p.curve, bases, p.len(), scalars)
    }
}

/// The selection flags of [`msms_planned`]'s selecting MSMs, on the device for the whole
/// stream of pieces: uploaded once, before it, one buffer per distinct slice (B's G1 and G2
/// queries share theirs). Uploaded with each piece instead, a range of flags went up on the
/// copy stream behind the next piece's points, and the host waited for both before it issued
/// the work on the piece in hand, so that copies and work took turns.
struct SelectionFlags {
    /// The buffers, held for the stream.
    _bufs: Vec<DevBuf>,
    /// Per MSM, its flags' device view (`None` for dense scalars).
    views: Vec<Option<DevView>>,
}

impl SelectionFlags {
    fn upload(gpu: &Gpu, msms: &[PlannedMsm<'_>]) -> Result<SelectionFlags, GpuError> {
        let mut up: Vec<(&[bool], DevBuf)> = Vec::new();
        let mut views = Vec::with_capacity(msms.len());
        for m in msms {
            let Selection::Of { flags, .. } = m.scalars else {
                views.push(None);
                continue;
            };
            let same = |(f, _): &&(&[bool], DevBuf)| std::ptr::eq(*f, flags);
            let view = match up.iter().find(same) {
                Some((_, buf)) => buf.view(),
                None => {
                    let buf = gpu.upload_new(bytes(flags))?;
                    let view = buf.view();
                    up.push((flags, buf));
                    view
                }
            };
            views.push(Some(view));
        }
        Ok(SelectionFlags {
            _bufs: up.into_iter().map(|(_, buf)| buf).collect(),
            views,
        })
    }
}

/// The four aux MSMs of the plan over the assignment `aux` on the device (consumed: the L
/// query's MSM, last, rewrites it): the A and B queries' scalars selected from it piece by
/// piece. Before each MSM and between its pieces, an urgent caller waiting gets the device.
pub(super) fn aux_planned(
    held: &mut Held<'_>,
    plan: &Plan,
    q: &AuxPoints<'_, '_>,
    aux: DevBuf,
) -> Result<WitnessSums, GpuError> {
    let x = aux.view();
    let sel = |flags| Selection::Of { aux: x, flags };
    let queries = [
        (q.a, plan::Query::A, sel(q.a_density)),
        (q.b_g1, plan::Query::BG1, sel(q.b_density)),
        (q.b_g2, plan::Query::BG2, sel(q.b_density)),
        (q.l, plan::Query::L, Selection::Dense(x)),
    ];
    let order = aux_order(queries.map(|(_, query, _)| plan.resident.has(query)));
    let msms = order.map(|i| {
        let (p, query, scalars) = queries[i];
        PlannedMsm {
            p,
            resident: plan.resident.has(query),
            piece: plan.stream_piece(query),
            fallback: plan.fallback_piece(query, p.n as u64),
            scalars,
            first: Pause::AuxMsm,
        }
    });
    let done = msms_planned(held, &msms)?;
    drop(aux);
    // Back in the queries' order: A, B G1, B G2, L.
    let mut parts: [&[MsmParts]; 4] = [&[]; 4];
    for (k, &i) in order.iter().enumerate() {
        parts[i] = done
            .get(k)
            .ok_or_else(|| GpuError::Input("four MSMs expected".into()))?;
    }
    let [a, b1, b2, l] = parts;
    Ok(WitnessSums {
        l: sum_g1(l),
        a: sum_g1(a),
        b_g1: sum_g1(b1),
        b_g2: parts_g2(b2),
    })
}

/// The order in which [`aux_planned`] runs the A, B G1, B G2 and L queries' MSMs (indices
/// into that list), given whether the plan keeps each one's points resident: the resident
/// selecting queries first, so that the first streamed piece's points travel under their work
/// instead of before any work (and no resident piece sits between two streamed ones, where
/// only one copy can travel under its work), the others in their order, and L last in every
/// case, since its MSM rewrites the assignment the others select from.
fn aux_order(resident: [bool; 4]) -> [usize; 4] {
    let mut order = [0, 1, 2, 3];
    order[..3].sort_by_key(|&i| !resident[i]);
    order
}

/// Σ h_i·H_i for the quotient of `fill`'s A, B and C (n constraints, a domain of m), in the
/// plan's forms, an urgent caller waiting given the device before each of the quotient's
/// transforms to the coset, before the H MSM and between its pieces.
pub(super) fn h_planned(
    held: &mut Held<'_>,
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
    let coeffs = quotient_planned(held, plan, fill, n, m)?;
    let parts = msms_planned(
        held,
        &[PlannedMsm {
            p: *h,
            resident: plan.resident.has(plan::Query::H),
            piece: plan.stream_piece(plan::Query::H),
            fallback: plan.fallback_piece(plan::Query::H, h.n as u64),
            scalars: Selection::Dense(coeffs.view_of(0..(m - 1) * FR_BYTES)?),
            first: Pause::BeforeH,
        }],
    )?;
    drop(coeffs);
    Ok(parts.iter().map(|p| sum_g1(p)).sum())
}

/// [`h_planned`] of a shaped proof: A, B and C evaluated from `shape`, kept on the device
/// where the plan says so and it fits, else streamed from host memory.
#[allow(clippy::too_many_arguments)]
pub(super) fn h_shaped_planned(
    held: &mut Held<'_>,
    plan: &Plan,
    h: &Points<'_>,
    shape: &Arc<R1cs>,
    input: &DevBuf,
    aux: Assignment<'_>,
    n: usize,
    m: usize,
) -> Result<G1Projective, GpuError> {
    let s = held.state()?;
    let resident = plan.shape_resident
        && match s.ensure_shape(shape, &h.key) {
            Ok(()) => true,
            Err(e) if e.is_out_of_memory() => {
                tracing::debug!(error = %e, "recorded shape streamed: it does not fit now");
                false
            }
            Err(e) => return Err(e),
        };
    // The shape's form is taken out of the state while the sum runs (which lets the state go
    // to other callers at its pauses), and put back after, on every path where the turn is
    // still held (a pause that lost it ends the proof with its error).
    if resident {
        let (host, copy) = s.take_shape(shape)?;
        let fill = Fill::Resident {
            shape: &copy,
            input,
            aux,
        };
        let sum = h_planned(held, plan, h, &fill, n, m);
        if let Ok(s) = held.state() {
            s.put_shape((host, copy));
        }
        sum
    } else {
        let streamed = s.take_streamed_shape(shape)?;
        let fill = Fill::Streamed {
            shape: &streamed,
            input,
            aux,
        };
        let sum = h_planned(held, plan, h, &fill, n, m);
        if let Ok(s) = held.state() {
            s.put_streamed_shape(streamed);
        }
        sum
    }
}

/// One MSM of [`msms_planned`].
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
    /// Where a pause before its first piece counts.
    pub first: Pause,
}

/// A piece of one of [`msms_planned`]'s MSMs: points `first..end` of MSM `msm`, its `k`-th
/// piece.
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

/// The quotient with its four vectors on the device together, an urgent caller waiting
/// given the device before each vector's transform to the coset.
fn resident_quotient(
    held: &mut Held<'_>,
    d: &Domain,
    fill: &Fill<'_>,
    n: usize,
    m: usize,
) -> Result<DevBuf, GpuError> {
    let (mut bufs, mut ring) = {
        let gpu = &held.state()?.gpu;
        let bufs = [
            gpu.alloc(m * FR_BYTES)?,
            gpu.alloc(m * FR_BYTES)?,
            gpu.alloc(m * FR_BYTES)?,
            gpu.alloc(m * FR_BYTES)?,
        ];
        (bufs, fill.ring(gpu)?)
    };
    // Each vector taken to the coset as soon as it is made: the next one's rows travel while
    // its transforms run.
    for v in 0..3 {
        let (vs, scratch) = bufs.split_at_mut(3);
        let gpu = &held.state()?.gpu;
        fill.fill(gpu, v, &mut vs[v], &mut ring)?;
        gpu.zero_range(&mut vs[v], n * FR_BYTES, (m - n) * FR_BYTES)?;
        // After the vector is made, so that its rows (streamed from the host) travelled
        // while the transforms before ran.
        held.pause(Pause::Quotient)?;
        d.to_coset(&held.state()?.gpu, &mut vs[v], &mut scratch[0])?;
    }
    drop(ring);
    d.quotient_from_cosets(&held.state()?.gpu, bufs)
}

/// The quotient with two vectors on the device: A and B each made, taken to the coset and
/// parked in `park`; C made and taken to the coset; then A and B streamed back in pieces for
/// the pointwise step, which writes into C's vector; then the inverse transform. A parked
/// vector's download is not waited for: its buffer is freed in the stream's order after it,
/// and the next vector's rows travel meanwhile. Before each vector's transform to the coset
/// an urgent caller waiting gets the device (the pause's synchronization ends the downloads
/// before it).
fn parked_quotient(
    held: &mut Held<'_>,
    d: &Domain,
    park: &mut [PinnedHostSlice<u8>; 2],
    fill: &Fill<'_>,
    n: usize,
    m: usize,
) -> Result<DevBuf, GpuError> {
    let bytes_v = m * FR_BYTES;
    let mut ring = fill.ring(&held.state()?.gpu)?;
    let mut c = None;
    for v in 0..3 {
        let gpu = &held.state()?.gpu;
        let mut x = gpu.alloc(bytes_v)?;
        fill.fill(gpu, v, &mut x, &mut ring)?;
        gpu.zero_range(&mut x, n * FR_BYTES, (m - n) * FR_BYTES)?;
        held.pause(Pause::Quotient)?;
        let gpu = &held.state()?.gpu;
        let mut scratch = gpu.alloc(bytes_v)?;
        d.to_coset(gpu, &mut x, &mut scratch)?;
        match park.get_mut(v) {
            Some(host) => {
                let host = host
                    .as_mut_slice()
                    .map_err(|e| GpuError::driver("pinned buffer", e))?;
                // SAFETY: the park is page-locked and nothing reads or writes it until the
                // ring below (made after this download, so its copies wait for it) streams it
                // back; the caller keeps it until then (across pauses too: it is taken out of
                // the state, so no caller going first can reach it, and the pause's
                // synchronization waits for the download).
                unsafe { gpu.download_view_async(x.view(), &mut host[..bytes_v])? };
            }
            None => c = Some(x),
        }
    }
    drop(ring);
    let gpu = &held.state()?.gpu;
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

    /// A pause before an MSM's first piece counts at that MSM's own point, one between its
    /// pieces as a piece's, and one past the end as a piece's too.
    #[test]
    fn resident_aux_queries_go_first_and_l_last() {
        // A, B G1, B G2, L.
        assert_eq!(aux_order([false; 4]), [0, 1, 2, 3]);
        assert_eq!(aux_order([true; 4]), [0, 1, 2, 3]);
        // The 22 GiB plan: B G2 resident, the others streamed.
        assert_eq!(aux_order([false, false, true, false]), [2, 0, 1, 3]);
        assert_eq!(aux_order([false, true, true, false]), [1, 2, 0, 3]);
        // L resident stays last.
        assert_eq!(aux_order([false, false, false, true]), [0, 1, 2, 3]);
        assert_eq!(aux_order([true, false, true, true]), [0, 2, 1, 3]);
    }

    #[test]
    fn a_pause_counts_at_the_msms_point_before_its_first_piece() {
        let piece = |msm, k| Piece {
            msm,
            k,
            first: k * 10,
            end: k * 10 + 10,
        };
        // The H MSM in three pieces, then an aux MSM in two.
        let pieces = [
            piece(0, 0),
            piece(0, 1),
            piece(0, 2),
            piece(1, 0),
            piece(1, 1),
        ];
        let firsts = [Pause::BeforeH, Pause::AuxMsm];
        let at: Vec<Pause> = (0..=pieces.len())
            .map(|k| pause_before(&pieces, k, &firsts))
            .collect();
        use Pause::*;
        assert_eq!(
            at,
            [BeforeH, MsmPiece, MsmPiece, AuxMsm, MsmPiece, MsmPiece]
        );
    }
}
