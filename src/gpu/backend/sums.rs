//! The device calls a proof makes on a turn where its set's plan holds everything: the H sum
//! fused onto the quotient, single MSMs, and the four aux MSMs run jointly from one upload of
//! the assignment where they fit beside each other ([`AuxPoints`], the fit checked before
//! anything is touched), each with its retry after making room. A plan that holds less takes
//! [`super::planned`]'s forms instead; both reach the device's caches only through
//! [`State`]'s methods.

use std::sync::Arc;
use std::time::{Duration, Instant};

use blstrs::{G1Projective, G2Projective, Scalar};
use group::Group;

use super::residency::{domain_size, Evaluated, Points, State};
use super::turns::{DeviceGuard, Pause, Shared};
use crate::gpu::bytes::bytes;
use crate::gpu::device::DevBuf;
use crate::gpu::msm::{self, Curve};
use crate::gpu::ntt::{Domain, FR_BYTES};
use crate::gpu::plan;
use crate::gpu::GpuError;
use crate::prover::WitnessSums;
use crate::synth::R1cs;

/// Device memory the four aux MSMs take beyond their points, for the joint aux MSMs' fit
/// check: they run one after another ([`aux_sums`]), so the most any one of them holds at
/// once, its selected scalars (A and B; the L query's MSM rewrites the assignment in place)
/// and its working buffers as the planner counts msm.rs's allocations
/// ([`plan::msm_work_bytes`], every scalar taken as full), with the assignment's copy where it
/// is not on the device already, and [`AUX_SLACK`]. `n` aux values, `na` A and `nb` B points.
///
/// An estimate of 176 bytes per aux value and 2 GiB (the working buffers of every query
/// counted at once) refused the joint MSMs of a 32 GiB partition on an H100 80GB with the
/// parameters and shape resident (27.2 GiB asked, 20.4 GiB free): the queries then ran one by
/// one, and the witness MSMs took 1.1–1.24 s instead of 0.48–0.53 s (docs/gpu-notes.md).
fn aux_work_bytes(n: usize, na: usize, nb: usize, aux_resident: bool) -> usize {
    let work = |g2: bool, m: usize| {
        let curve = if g2 { Curve::G2 } else { Curve::G1 };
        let bits = msm::window_bits(m, curve);
        usize::try_from(plan::msm_work_bytes(g2, m as u64, bits)).unwrap_or(usize::MAX)
    };
    let each = [
        work(false, n),
        na * FR_BYTES + work(false, na),
        nb * FR_BYTES + work(false, nb),
        nb * FR_BYTES + work(true, nb),
    ];
    let copy = if aux_resident { 0 } else { n * FR_BYTES };
    copy + each.into_iter().max().unwrap_or(0) + AUX_SLACK
}

/// Room [`aux_work_bytes`] keeps beyond its count: the compaction's flags and scan, the
/// allocator's rounding.
const AUX_SLACK: usize = 512 << 20;

impl Shared {
    /// Σ h_i·H_i for the quotient H of `a`, `b`, `c`, with H left on the device between the
    /// transforms and the MSM: no download and upload of its m·32 bytes (8.6 GB of PCIe
    /// traffic for a 2^27 domain). `h` are the m − 1 points of the H query.
    pub(super) fn h_sum(
        &self,
        a: &[Scalar],
        b: &[Scalar],
        c: &[Scalar],
        h: &Points<'_>,
    ) -> Result<G1Projective, GpuError> {
        // The inputs are still on the host: a retry after freeing the rest needs nothing else.
        self.h_sum_of(domain_size(a.len()), h, |s| {
            s.quotient_on_device(a, b, c).map(|(hs, _)| hs)
        })
    }

    /// [`Shared::h_sum`] with A, B and C evaluated on the device from `shape` and the
    /// assignment: nothing of them crosses the bus but the assignment.
    pub(super) fn h_sum_shaped(
        &self,
        shape: &Arc<R1cs>,
        input: &[Scalar],
        aux: &[Scalar],
        h: &Points<'_>,
    ) -> Result<G1Projective, GpuError> {
        // A retry copies the shape again (freeing the rest drops it).
        self.h_sum_of(domain_size(shape.num_constraints()), h, |s| {
            s.ensure_shape(shape, &h.key)?;
            s.quotient_from_shape(shape, input, aux)
        })
    }

    /// Σ h_i·H_i over a domain of `m` for the quotient `quotient` leaves on the device; where
    /// that runs out of memory, once more after freeing every resident point but H's and the
    /// NTT tables.
    fn h_sum_of(
        &self,
        m: usize,
        h: &Points<'_>,
        quotient: impl Fn(&mut State) -> Result<DevBuf, GpuError>,
    ) -> Result<G1Projective, GpuError> {
        if h.n != m - 1 {
            return Err(GpuError::Input(format!(
                "{} H bases for a domain of {m}",
                h.n
            )));
        }
        let run = |s: &mut State| -> Result<msm::MsmParts, GpuError> {
            let hs = quotient(s)?;
            msm::msm_device(&s.gpu, Curve::G1, s.resident(&h.key)?, m - 1, hs)
        };
        let mut s = self.lock()?;
        s.ensure(h)?;
        let parts = match run(&mut s) {
            Err(e) if e.is_out_of_memory() && s.evict_except(Some(&h.key)) => run(&mut s),
            r => r,
        }?;
        Ok(msm::finish_g1(&parts))
    }

    /// Σ scalars[i]·points[i] (the parts of the sum; see [`msm::finish_g1`]).
    fn msm(&self, p: &Points<'_>, scalars: &[Scalar]) -> Result<msm::MsmParts, GpuError> {
        if scalars.len() != p.n {
            return Err(GpuError::Input(format!(
                "{} bases for {} scalars",
                p.n,
                scalars.len()
            )));
        }
        let mut s = self.lock()?;
        s.ensure(p)?;
        let run = |s: &State| -> Result<msm::MsmParts, GpuError> {
            msm::msm(&s.gpu, p.curve, s.resident(&p.key)?, p.n, bytes(scalars))
        };
        match run(&s) {
            Err(e) if e.is_out_of_memory() && s.evict_except(Some(&p.key)) => {
                // The working buffers did not fit beside the resident points of other sets
                // (parameters of an earlier proof, say) or the NTT tables: keep only these
                // points and retry once.
                run(&s)
            }
            r => r,
        }
    }

    /// Σ scalars[i]·points[i] in G1 (the identity for none).
    pub(super) fn sum_g1(
        &self,
        p: &Points<'_>,
        scalars: &[Scalar],
    ) -> Result<G1Projective, GpuError> {
        if p.n == 0 && scalars.is_empty() {
            return Ok(G1Projective::identity());
        }
        Ok(msm::finish_g1(&self.msm(p, scalars)?))
    }

    /// Σ scalars[i]·points[i] in G2 (the identity for none).
    pub(super) fn sum_g2(
        &self,
        p: &Points<'_>,
        scalars: &[Scalar],
    ) -> Result<G2Projective, GpuError> {
        if p.n == 0 && scalars.is_empty() {
            return Ok(G2Projective::identity());
        }
        Ok(msm::finish_g2(&self.msm(p, scalars)?))
    }

    /// The four aux MSMs with the assignment uploaded once: the A and B queries' scalars are
    /// selected on the device ([`msm::compact`]) before the L query's MSM runs on the uploaded
    /// copy (an MSM's front end rewrites its scalars in place). For a 32 GiB partition that sends 4.2 GB over PCIe instead of
    /// about 10 GB, and the host makes no copies of the selections. All four point ranges must
    /// be resident at once: where the free memory cannot hold the missing ones and the working
    /// buffers (estimated, see [`aux_work_bytes`]) this returns the out-of-memory error at
    /// once, touching nothing, and the caller runs the queries one by one (which evicts and
    /// uploads per query as needed); an out-of-memory error later on is returned the same way.
    /// The sums over the inputs are not included (`a`, `b_g1`, `b_g2` are over aux only).
    pub(super) fn aux_joint(&self, q: &AuxPoints<'_, '_>) -> Result<WitnessSums, GpuError> {
        let Some(nb) = check_aux(q)? else {
            return Ok(WitnessSums::identity());
        };
        let mut s = self.lock()?;
        s.fit_aux(q, false)?;
        let aux = s.gpu.upload_new(bytes(q.aux))?;
        self.aux_sums(s, q, nb, aux)
    }

    /// Both sums of a shaped proof with the assignment sent over once: A, B and C evaluated
    /// on the device, the quotient, the H query's MSM, and then the four aux MSMs of
    /// [`Shared::aux_joint`] on the copy of `aux` the evaluation read. Before the H MSM, between
    /// the pieces of every MSM's bucket sums ([`msm::MsmRun`]) and before each aux MSM, an
    /// urgent caller waiting gets its turn (the quotient and the copy stay on the device
    /// meanwhile). Returns
    /// Σ h_i·H_i, how long it took, and the aux sums, or `None` where they do not fit on the
    /// device together (the caller runs them as [`GpuPrepared::witness`] does). Out of memory
    /// before the H sum is done is returned as the error, nothing kept: the caller then makes
    /// the two calls apart, each with its own retry.
    ///
    /// [`GpuPrepared::witness`]: super::prepared::GpuPrepared::witness
    pub(super) fn sums_shaped(
        &self,
        shape: &Arc<R1cs>,
        input: &[Scalar],
        h: &Points<'_>,
        q: &AuxPoints<'_, '_>,
    ) -> Result<(G1Projective, Duration, Option<WitnessSums>), GpuError> {
        let m = domain_size(shape.num_constraints());
        if h.n != m - 1 {
            return Err(GpuError::Input(format!(
                "{} H bases for a domain of {m}",
                h.n
            )));
        }
        let nb = check_aux(q)?;
        let start = Instant::now();
        let mut s = self.lock()?;
        // With `debug.gpu_trace`, each step's time (the device synchronized after each).
        let mut tr = msm::Trace::new(&s.gpu);
        s.ensure(h)?;
        s.ensure_shape(shape, &h.key)?;
        tr.mark(&s.gpu, "lock, resident")?;
        let input = s.gpu.upload_new(bytes(input))?;
        let aux = s.gpu.upload_new(bytes(q.aux))?;
        tr.mark(&s.gpu, "assignment up")?;
        // The assignment's upload is the turn's first stretch: an urgent caller waiting goes
        // next, the copy kept (its own retry may have evicted the shape, which goes up again).
        s.gpu.sync()?;
        let mut s = self.yield_to_urgent(s, Pause::Assignment)?;
        s.ensure_shape(shape, &h.key)?;
        let Evaluated { domain, bufs, aux } = s.evaluate_shape(shape, input, aux, true)?;
        let aux =
            aux.ok_or_else(|| GpuError::Input("the assignment's copy was not kept".into()))?;
        let (s, hs) = self.quotient_yielding(s, domain, bufs, shape.num_constraints())?;
        tr.mark(&s.gpu, "A, B, C, quotient")?;
        // The H MSM is most of this turn: an urgent caller waiting goes first, the quotient
        // and the assignment's copy kept on the device meanwhile (its own retry may have
        // evicted H's points, which then go up again).
        s.gpu.sync()?;
        let mut s = self.yield_to_urgent(s, Pause::BeforeH)?;
        s.ensure(h)?;
        let (mut s, parts) = self.msm_yielding(s, h, hs)?;
        let h_sum = msm::finish_g1(&parts);
        let h_done = start.elapsed();
        tr.mark(&s.gpu, "H")?;
        let Some(nb) = nb else {
            return Ok((h_sum, h_done, Some(WitnessSums::identity())));
        };
        let fitted = s.fit_aux(q, true);
        tr.mark(&s.gpu, "turn, fit")?;
        tr.emit("shaped sums, to the aux sums");
        // Out of memory here, or after an urgent caller's turn between the aux MSMs: the
        // caller runs them one by one.
        let sums = match fitted.and_then(|()| self.aux_sums(s, q, nb, aux)) {
            Err(e) if e.is_out_of_memory() => {
                tracing::debug!(error = %e, "aux MSMs apart, after the H sum");
                return Ok((h_sum, h_done, None));
            }
            r => r?,
        };
        Ok((h_sum, h_done, Some(sums)))
    }
}

impl Shared {
    /// [`Domain::quotient_from_device`] on A, B and C in `bufs` (of `n` values each), an
    /// urgent caller waiting given the device before each vector's transform to the coset
    /// (the first after A, B and C are evaluated; about 0.08 s each at 2^27; the caller's
    /// next point follows the third): the buffers and the domain's tables stay on the device
    /// meanwhile, the tables no longer than the quotient needs them.
    fn quotient_yielding<'s>(
        &'s self,
        s: DeviceGuard<'s>,
        d: Arc<Domain>,
        bufs: [DevBuf; 4],
        n: usize,
    ) -> Result<(DeviceGuard<'s>, DevBuf), GpuError> {
        let (mut s, mut bufs) = (s, bufs);
        for v in 0..3 {
            // Waited for, so that whether to let the device go is asked when the work before
            // is done (it is queued in microseconds), and the next caller's work does not
            // queue behind it.
            s.gpu.sync()?;
            s = self.yield_to_urgent(s, Pause::Quotient)?;
            d.coset_of(&s.gpu, &mut bufs, v, n)?;
        }
        let h = d.quotient_from_cosets(&s.gpu, bufs)?;
        Ok((s, h))
    }

    /// Σ hs[i]·P[i] over the `p.n` resident points of `p` in [`msm::MsmRun`]'s steps, an
    /// urgent caller waiting given the device after the front end, after the sort by bucket
    /// and between the pieces of bucket sums: the H MSM is most of a shaped proof's turn, about a second at
    /// 2^27. The run's buffers stay on the device meanwhile; points the other caller evicted
    /// go up again.
    fn msm_yielding<'s>(
        &'s self,
        s: DeviceGuard<'s>,
        p: &Points<'_>,
        hs: DevBuf,
    ) -> Result<(DeviceGuard<'s>, msm::MsmParts), GpuError> {
        let mut run = msm::MsmRun::new(&s.gpu, p.curve, s.resident(&p.key)?, p.n, hs)?;
        s.gpu.sync()?;
        let mut s = self.yield_to_urgent(s, Pause::MsmPiece)?;
        s.ensure(p)?;
        while run.step(&s.gpu, s.resident(&p.key)?)? {
            // Only between pieces, where the device is idle and the points are read again;
            // after the last one the rest reads only the run's own buffers.
            if run.between_pieces() {
                s = self.yield_to_urgent(s, Pause::MsmPiece)?;
                s.ensure(p)?;
            }
        }
        Ok((s, run.finish()?))
    }
}

/// Checks the aux MSMs' lengths: the B queries' length, or `None` when there are no aux
/// values (every sum the identity).
pub(super) fn check_aux(q: &AuxPoints<'_, '_>) -> Result<Option<usize>, GpuError> {
    let n = q.aux.len();
    if q.l.n != n || q.a_density.len() != n || q.b_density.len() != n {
        return Err(GpuError::Input(format!(
            "{n} aux values for {} L points and densities of {} and {}",
            q.l.n,
            q.a_density.len(),
            q.b_density.len()
        )));
    }
    if q.b_g1.n != q.b_g2.n {
        return Err(GpuError::Input(format!(
            "B query of {} points in G1 and {} in G2",
            q.b_g1.n, q.b_g2.n
        )));
    }
    let nb = q.b_g1.n;
    let (a_set, b_set) = (q.a_set, q.b_set);
    if a_set != q.a.n || b_set != nb {
        return Err(GpuError::Input(format!(
            "A query of {} points for {a_set} flags, B of {nb} for {b_set}",
            q.a.n
        )));
    }
    Ok((n > 0).then_some(nb))
}

impl State {
    /// Makes the four aux queries' points resident where they and the aux MSMs' working
    /// buffers fit in the free memory (the assignment's copy too, unless `aux_resident`),
    /// other sets' resident points evicted to make that room where needed; otherwise the
    /// out-of-memory error, touching nothing of this set.
    fn fit_aux(&mut self, q: &AuxPoints<'_, '_>, aux_resident: bool) -> Result<(), GpuError> {
        let n = q.aux.len();
        let queries = [q.l, q.a, q.b_g1, q.b_g2];
        let missing: usize = queries
            .iter()
            .filter(|p| !self.is_resident(&p.key))
            .map(|p| p.byte_len())
            .sum();
        let work = aux_work_bytes(n, q.a.n, q.b_g1.n, aux_resident);
        let free = self.room_beside_other_sets(&q.l.key, missing + work)?;
        if missing + work > free {
            return Err(GpuError::OutOfMemory(format!(
                "the aux MSMs together need about {} MiB more, {} MiB free",
                (missing + work) >> 20,
                free >> 20
            )));
        }
        for p in queries.iter().filter(|p| p.n > 0) {
            self.ensure(p)?;
        }
        // Making room for one range may have evicted another: then they do not fit together.
        if queries.iter().any(|p| p.n > 0 && !self.is_resident(&p.key)) {
            return Err(GpuError::OutOfMemory(
                "the L, A and B bases do not fit on the device together".into(),
            ));
        }
        Ok(())
    }
}

impl Shared {
    /// The four aux MSMs on `aux` (the assignment on the device) with their points resident:
    /// each selection made just before its MSM and freed by it, so that no two (the A query's
    /// is as large as the assignment) are on the device together; the L query last, its MSM
    /// rewriting `aux` in place. Before each MSM an urgent caller waiting gets the device (the
    /// next query's points uploaded again if it evicted them).
    fn aux_sums<'s>(
        &'s self,
        s: DeviceGuard<'s>,
        q: &AuxPoints<'_, '_>,
        nb: usize,
        aux: DevBuf,
    ) -> Result<WitnessSums, GpuError> {
        let mut s = s;
        // With `debug.gpu_trace`, each step's time (the device synchronized after each).
        let mut tr = msm::Trace::new(&s.gpu);
        let select = |density, n| {
            let aux = &aux;
            move |s: &State| msm::compact_counted(&s.gpu, aux, density, n)
        };
        let (s1, a) = self.aux_msm(s, &q.a, select(q.a_density, q.a.n))?;
        s = s1;
        tr.mark(&s.gpu, "select A, A")?;
        let (s1, b1) = self.aux_msm(s, &q.b_g1, select(q.b_density, nb))?;
        s = s1;
        tr.mark(&s.gpu, "select B, B G1")?;
        let (s1, b2) = self.aux_msm(s, &q.b_g2, select(q.b_density, nb))?;
        s = s1;
        tr.mark(&s.gpu, "select B, B G2")?;
        let (s, l) = self.aux_msm(s, &q.l, |_: &State| Ok(aux))?;
        tr.mark(&s.gpu, "L")?;
        tr.emit("aux sums");
        let g1 =
            |p: Option<msm::MsmParts>| p.map_or(G1Projective::identity(), |p| msm::finish_g1(&p));
        Ok(WitnessSums {
            l: g1(l),
            a: g1(a),
            b_g1: g1(b1),
            b_g2: b2.map_or(G2Projective::identity(), |p| msm::finish_g2(&p)),
        })
    }

    /// One aux query's MSM over the scalars `select` makes on the device (consumed: rewritten,
    /// then freed), `None` when the query is empty; an urgent caller waiting goes first, before
    /// the selection is made.
    fn aux_msm<'s>(
        &'s self,
        s: DeviceGuard<'s>,
        p: &Points<'_>,
        select: impl FnOnce(&State) -> Result<DevBuf, GpuError>,
    ) -> Result<(DeviceGuard<'s>, Option<msm::MsmParts>), GpuError> {
        if p.n == 0 {
            return Ok((s, None));
        }
        let mut s = self.yield_to_urgent(s, Pause::AuxMsm)?;
        s.ensure(p)?;
        let scalars = select(&s)?;
        let (s, parts) = self.msm_yielding(s, p, scalars)?;
        Ok((s, Some(parts)))
    }
}

/// The aux MSMs of one proof for [`Shared::aux_joint`]: `l` has one point per aux value, `a`
/// one per set flag of `a_density`, `b_g1` and `b_g2` one per set flag of `b_density`.
pub(super) struct AuxPoints<'a, 'p> {
    pub(super) aux: &'a [Scalar],
    pub(super) a_density: &'a [bool],
    pub(super) b_density: &'a [bool],
    /// The set flags of `a_density` and `b_density` (counted once per shape).
    pub(super) a_set: usize,
    pub(super) b_set: usize,
    pub(super) l: Points<'p>,
    pub(super) a: Points<'p>,
    pub(super) b_g1: Points<'p>,
    pub(super) b_g2: Points<'p>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 32 GiB PoRep partition's aux MSMs (ANCHORS.md): aux values, A and B points.
    const N: usize = 130_169_893;
    const NA: usize = 129_753_292;
    const NB: usize = 33_112_281;

    #[test]
    fn a_32gib_partitions_aux_msms_fit_beside_everything_resident_on_an_h100() {
        // Free on an H100 80GB (2026-12-06) with the parameters, the shape and the assignment
        // resident, when the aux MSMs' turn came: 20,868 MiB.
        let free = 20_868usize << 20;
        let need = aux_work_bytes(N, NA, NB, true);
        assert!(need <= free, "{} MiB", need >> 20);
        // Not below what the A query alone allocates: its selection, digits and their sorted
        // list (13 windows of 4 bytes each per point at 20-bit windows).
        assert!(
            need >= NA * FR_BYTES + 2 * 13 * 4 * NA,
            "{} MiB",
            need >> 20
        );
    }

    #[test]
    fn the_assignments_copy_counts_where_it_is_not_resident() {
        let kept = aux_work_bytes(N, NA, NB, true);
        assert_eq!(aux_work_bytes(N, NA, NB, false), kept + N * FR_BYTES);
        // Tiny sets still keep the slack.
        assert!(aux_work_bytes(4, 2, 1, true) >= AUX_SLACK);
    }
}
