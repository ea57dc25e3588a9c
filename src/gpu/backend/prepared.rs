//! A parameter set prepared on the device ([`GpuPrepared`], the prover's [`PreparedSrs`]): its
//! claim on the device and its memory plan, and how each proof runs under them. A plan that
//! holds everything takes [`super::sums`]'s calls; any other takes [`super::planned`]'s forms,
//! under a smaller plan where the device has less free than planned, and once more under a
//! smaller one still where it runs out of memory anyway (that budget kept for the next
//! proofs). The assignment goes up from page-locked memory ([`StagedAux`]), and the host
//! vectors a proof is done with are freed off the device's thread ([`release`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use blstrs::{G1Affine, G1Projective, G2Affine, Scalar};
use rayon::prelude::*;

use super::planned;
use super::refit::refit;
use super::residency::{domain_size, Points, Query, State};
use super::sums::{check_aux, AuxPoints};
use super::turns::{Held, SetGuard};
use crate::gpu::bytes::bytes;
use crate::gpu::device::{DevBuf, Gpu};
use crate::gpu::msm::Curve;
use crate::gpu::ntt::FR_BYTES;
use crate::gpu::pinned::PinnedHost;
use crate::gpu::plan::{self, Plan, Sizes};
use crate::gpu::GpuError;
use crate::prover::{
    dense, HostAllocator, PreparedSrs, ProverError, RawBlock, Scalars, Sums, Witness, WitnessSums,
};
use crate::srs::Srs;
use crate::synth::R1cs;

/// Heap vectors at least this large are freed on a thread of their own by [`release`].
const RELEASE_APART: usize = 256 << 20;

/// Frees `s`, a large heap vector on a short-lived thread of its own: handing 4 GiB back to
/// the kernel takes it a while, which the device would otherwise spend waiting for the next
/// call. Page-locked blocks go back to their pool at once, here.
fn release(s: Scalars) {
    if matches!(&s, Scalars::Heap(v) if v.capacity() * 32 >= RELEASE_APART) {
        // A failed spawn drops the closure, and `s` with it, here.
        let _ = std::thread::Builder::new()
            .name("cuzk-release".into())
            .spawn(move || drop(s));
    } else {
        drop(s);
    }
}

/// The aux MSMs of witness `w` over the aux parts of `p`.
fn aux_points<'a, 'p>(w: &'a Witness, p: &WitnessPoints<'p>) -> AuxPoints<'a, 'p> {
    AuxPoints {
        aux: &w.aux,
        a_density: &w.a_aux_density,
        b_density: &w.b_aux_density,
        a_set: w.a_aux_density.count(),
        b_set: w.b_aux_density.count(),
        l: p.l,
        a: p.a_aux,
        b_g1: p.b1_aux,
        b_g2: p.b2_aux,
    }
}

/// The plan for `sizes` within `budget` on `gpu`, with its MSM window widths.
pub(super) fn plan_within(gpu: &Gpu, sizes: &Sizes, budget: u64) -> Result<Plan, plan::TooSmall> {
    let tuning = &gpu.options().msm;
    let bits = |n: u64, g2: bool| {
        let curve = if g2 { Curve::G2 } else { Curve::G1 };
        tuning.window_bits(n as usize, curve)
    };
    plan::plan(budget, sizes, &bits)
}

/// The host copies of the queries a plan streams, held (and page-locked) for the set's life.
pub(super) struct StreamedCopies {
    g1: Vec<Arc<Vec<G1Affine>>>,
    g2: Vec<Arc<Vec<G2Affine>>>,
}

/// The host points of the queries `plan` streams, page-locked in place (the driver's refusals
/// logged: those points go through the staging buffers).
pub(super) fn pin_streamed(
    ctx: &cudarc::driver::CudaContext,
    srs: &Arc<Srs>,
    plan: &Plan,
) -> Result<PinnedHost<StreamedCopies>, GpuError> {
    let start = Instant::now();
    let resident = plan.resident;
    let g1 = [
        (plan::Query::H, &srs.h),
        (plan::Query::L, &srs.l),
        (plan::Query::A, &srs.a),
        (plan::Query::BG1, &srs.b_g1),
    ]
    .into_iter()
    .filter(|(q, _)| !resident.has(*q))
    .map(|(_, points)| points.get())
    .collect::<Result<Vec<_>, _>>()?;
    let g2 = match resident.has(plan::Query::BG2) {
        true => Vec::new(),
        false => vec![srs.b_g2.get()?],
    };
    let copies = Arc::new(StreamedCopies { g1, g2 });
    let (pinned, refused) = PinnedHost::new(ctx, copies, |c: &StreamedCopies| {
        let g1 = c.g1.iter().map(|v| bytes(v));
        g1.chain(c.g2.iter().map(|v| bytes(v))).collect()
    });
    for e in refused {
        tracing::warn!(error = %e, params = %srs.path.display(), "streamed points stay pageable: they go through the staging buffers (slower)");
    }
    tracing::info!(
        params = %srs.path.display(),
        ranges = pinned.registered(),
        ms = start.elapsed().as_millis() as u64,
        "streamed points page-locked in place"
    );
    Ok(pinned)
}

/// An assignment in page-locked memory for a planned proof.
enum StagedAux<'a> {
    /// It was there already.
    AsIs(&'a Scalars),
    /// Copied into the set's staging block, held by the guard.
    Copied {
        guard: MutexGuard<'a, Option<Box<dyn RawBlock>>>,
        len: usize,
    },
}

impl StagedAux<'_> {
    fn scalars(&self) -> &[Scalar] {
        match self {
            StagedAux::AsIs(s) => s,
            StagedAux::Copied { guard, len } => match guard.as_ref() {
                // SAFETY: the block holds `len` scalars copied in by `staged_aux` (its bytes
                // are at least that long, page-aligned, so aligned for Scalar), and the guard
                // keeps every other writer out while this borrow lives.
                Some(block) => unsafe {
                    std::slice::from_raw_parts(block.ptr().cast::<Scalar>(), *len)
                },
                None => &[],
            },
        }
    }
}

/// A parameter set on the device ([`GpuBackend::prepare_gpu`]). Dropping it frees its points
/// (and unlocks the pages of its streamed ones, after the points: field order).
///
/// [`GpuBackend::prepare_gpu`]: super::GpuBackend::prepare_gpu
pub struct GpuPrepared {
    set: SetGuard,
    srs: Arc<Srs>,
    sizes: Sizes,
    /// How its proofs use the device; an error where even the smallest form does not fit (its
    /// proofs then fail with it, as out of memory, and go to another device or the CPU).
    plan: Result<Plan, plan::TooSmall>,
    /// The streamed queries' host points, page-locked (plans that stream some).
    #[allow(dead_code)]
    pinned: Option<PinnedHost<StreamedCopies>>,
    /// The budget a proof had to be retried under after running out of memory (a plan's
    /// estimate short of what the device took, or memory another process took); `u64::MAX`
    /// until then.
    lowered: AtomicU64,
    /// What the device had available when `lowered` was set.
    lowered_at: AtomicU64,
    /// The plan the last proof ran under where its room fitted less than the set's plan
    /// ([`refit`]); `None` where it ran under the set's plan. Described without the room's
    /// bytes: the plan is a metric's label, whose values stay as few as the plan's forms.
    last_refit: Mutex<Option<String>>,
    /// A page-locked block the assignment is copied into before a planned proof takes its turn
    /// on the device (made on first use, reused): it goes up once or more per proof, at the
    /// bus's rate instead of the staging copies'.
    staged: Mutex<Option<Box<dyn RawBlock>>>,
    /// Makes that block.
    host_alloc: HostAllocator,
}

/// The points of a proof's witness queries, split where the inputs' parts end.
#[derive(Clone, Copy)]
struct WitnessPoints<'p> {
    l: Points<'p>,
    a_in: Points<'p>,
    a_aux: Points<'p>,
    b1_in: Points<'p>,
    b1_aux: Points<'p>,
    b2_in: Points<'p>,
    b2_aux: Points<'p>,
}

impl GpuPrepared {
    /// The handle of set `set`, with `srs` of `sizes` and its `plan` ([`pin_streamed`] made
    /// `pinned` for the plan; `host_alloc` makes the staging block).
    pub(super) fn new(
        set: SetGuard,
        srs: Arc<Srs>,
        sizes: Sizes,
        plan: Result<Plan, plan::TooSmall>,
        pinned: Option<PinnedHost<StreamedCopies>>,
        host_alloc: HostAllocator,
    ) -> Self {
        GpuPrepared {
            set,
            srs,
            sizes,
            plan,
            pinned,
            lowered: AtomicU64::new(u64::MAX),
            lowered_at: AtomicU64::new(0),
            last_refit: Mutex::new(None),
            staged: Mutex::new(None),
            host_alloc,
        }
    }

    /// The plan's forms where they differ from holding everything; `None` where the set's proofs
    /// take the paths that hold everything; its error where no form fits.
    fn planned(&self) -> Result<Option<&Plan>, GpuError> {
        match &self.plan {
            Ok(p) if p.is_all_resident(&self.sizes) => Ok(None),
            Ok(p) => Ok(Some(p)),
            Err(e) => Err(GpuError::OutOfMemory(e.to_string())),
        }
    }

    /// The domain's log2 size.
    fn lg(&self) -> u32 {
        self.sizes.domain.trailing_zeros()
    }

    /// Runs `f` on the device under `plan`, after freeing what the plan does not keep, or under
    /// a plan for less where the device has less free now than the plan's budget (another
    /// process took some, another proof keeps its assignment there, or the driver's own
    /// allocations grew); where it runs out of memory even so, once more under a plan for what
    /// is free then, less a further margin. `own` says how many device bytes the caller holds
    /// that its plan counts (its kept assignment). `f` holds the turn as a [`Held`], which it
    /// may let go to urgent callers at its pause points.
    fn run_planned<T>(
        &self,
        plan: &Plan,
        shape: Option<&Arc<R1cs>>,
        own: &dyn Fn() -> u64,
        f: impl Fn(&mut Held<'_>, &Plan) -> Result<T, GpuError>,
    ) -> Result<T, GpuError> {
        let (id, lg) = (self.set.id, self.lg());
        let mut s = self.set.shared.lock()?;
        s.make_room(id, plan, lg, shape);
        let (available, reserve) = self.available(&s, own())?;
        let budget = available.min(self.kept_budget(available, plan));
        let now = self.fitted(&s, plan, budget, reserve);
        let plan = match &now {
            Some(smaller) => {
                // Freed for the smaller plan too: what the first kept, it may not.
                s.make_room(id, smaller, lg, shape);
                smaller
            }
            None => plan,
        };
        // Pauses only once an urgent turn's working memory was measured (before, an urgent
        // caller given the device in the middle of this proof's phases could find no room
        // for its buffers), and then only where that much is free at the pause point
        // (`Held::pause`).
        let room = s.critical_reserve() > 0;
        let mut held = Held::new(s);
        held.set_lets_go(room);
        held.set_tight(true)?;
        let result = match f(&mut held, plan) {
            Err(e) if e.is_out_of_memory() => self.retry(&mut held, plan, shape, e, own(), &f),
            r => r,
        };
        // The turn ends here, and this call's setting with it (a turn lost in a pause has
        // nothing to reset: the result is the error the pause met taking it back).
        if let Ok(s) = held.into_guard() {
            s.gpu.set_tight(false);
        }
        result
    }

    /// `f` once more, under a plan for what the device has free after `plan` ran out of
    /// memory with `error`, less a sixteenth of `plan`'s budget; where it succeeds, its budget
    /// is kept for the next proofs. `error` where no smaller plan fits.
    fn retry<T>(
        &self,
        held: &mut Held<'_>,
        plan: &Plan,
        shape: Option<&Arc<R1cs>>,
        error: GpuError,
        own: u64,
        f: &impl Fn(&mut Held<'_>, &Plan) -> Result<T, GpuError>,
    ) -> Result<T, GpuError> {
        let s = held.state()?;
        s.evict_except(None);
        let (available, reserve) = self.available(s, own)?;
        let budget = available.saturating_sub(plan.budget / 16);
        let Some(smaller) = self.fitted(s, plan, budget, reserve) else {
            return Err(error);
        };
        tracing::warn!(error = %error, plan = %smaller.describe(&self.sizes), "out of device memory: proving again under a smaller plan (kept for the next proofs)");
        s.make_room(self.set.id, &smaller, self.lg(), shape);
        let r = f(held, &smaller);
        if r.is_ok() {
            self.lowered.store(smaller.budget, Ordering::Relaxed);
            self.lowered_at.store(available, Ordering::Relaxed);
        }
        r
    }

    /// The budget a retry had to lower, for the next proofs (no limit where none did): given
    /// up once the device has clearly more available than when it was lowered (another
    /// process that held memory has let it go).
    fn kept_budget(&self, available: u64, plan: &Plan) -> u64 {
        let lowered = self.lowered.load(Ordering::Relaxed);
        let at = self.lowered_at.load(Ordering::Relaxed);
        if lowered != u64::MAX && available > at.saturating_add(plan.budget / 16) {
            tracing::info!(
                available,
                "more device memory available than when a proof ran out: the full plan again"
            );
            self.lowered.store(u64::MAX, Ordering::Relaxed);
            return u64::MAX;
        }
        lowered
    }

    /// What the device can give this set's proofs now ([`plan::available_budget`]): what the
    /// driver has free after the work so far and what the state holds that a plan frees or
    /// keeps, with the caller's `own` bytes (its kept assignment), less the margin, at most
    /// what the ledger's cap leaves beside the rest it holds (another proof's kept
    /// assignment), and less the room urgent callers' turns take ([`State::critical_reserve`]:
    /// an urgent caller may be given the device between this proof's phases). Returns that
    /// and the reserve taken off (at most the whole room).
    fn available(&self, s: &State, own: u64) -> Result<(u64, u64), GpuError> {
        s.gpu.settle()?;
        let (free, _) = s.gpu.mem_info()?;
        let held = s.gpu.memory();
        let budget =
            plan::available_budget(free as u64, held.used, s.reclaimable() + own, held.budget);
        let reserve = s.critical_reserve().min(budget);
        Ok((budget - reserve, reserve))
    }

    /// The plan to run under within `budget` where that is less than `plan`'s ([`refit`]:
    /// the `reserve` taken off the room for urgent callers given up where nothing fits beside
    /// it, the smallest form where nothing fits at all); `None` where `plan` fits.
    fn fitted(&self, s: &State, plan: &Plan, budget: u64, reserve: u64) -> Option<Plan> {
        let smaller = refit(plan, budget, reserve, |b| {
            plan_within(&s.gpu, &self.sizes, b)
        });
        let last = smaller.as_ref().map(|p| {
            let described = p.describe(&self.sizes);
            tracing::debug!(budget, reserve, plan = %described, "less device memory free than planned");
            described
        });
        *self.last_refit.lock().unwrap_or_else(|p| p.into_inner()) = last;
        smaller
    }

    /// `aux` in page-locked memory: as it is where it is there already (a partition pinned by
    /// the stages), else copied (on every core, before the proof's turn on the device) into
    /// the set's staging block, which the guard holds for the proof.
    fn staged_aux<'a>(&'a self, aux: &'a Scalars) -> Result<StagedAux<'a>, GpuError> {
        if let Scalars::Pinned(_) = aux {
            return Ok(StagedAux::AsIs(aux));
        }
        let bytes_in = bytes(aux);
        let mut guard = self.staged.lock().unwrap_or_else(|p| p.into_inner());
        if guard.as_ref().is_none_or(|b| b.bytes() < bytes_in.len()) {
            *guard = None;
            match (self.host_alloc)(bytes_in.len()) {
                Ok(block) => *guard = Some(block),
                Err(e) => {
                    tracing::debug!(error = %e, "no page-locked block for the assignment: it goes up through the staging buffers");
                    return Ok(StagedAux::AsIs(aux));
                }
            }
        }
        let Some(block) = guard.as_ref() else {
            return Ok(StagedAux::AsIs(aux));
        };
        // SAFETY: the block is at least `bytes_in.len()` bytes of host memory that only this
        // set's guard (held until the proof is done with it) reads or writes.
        let dst = unsafe { std::slice::from_raw_parts_mut(block.ptr(), bytes_in.len()) };
        dst.par_chunks_mut(1 << 20)
            .zip(bytes_in.par_chunks(1 << 20))
            .for_each(|(d, s)| d.copy_from_slice(s));
        Ok(StagedAux::Copied {
            guard,
            len: aux.len(),
        })
    }

    /// The aux sums under `plan` over `x` where given (the assignment kept on the device
    /// since the evaluations), else over a fresh upload of `aux` (`w.aux`, or its staged
    /// copy); `shape` is the proof's recorded shape, which a plan that keeps shapes keeps (and
    /// no other).
    fn aux_sums_planned(
        &self,
        plan: &Plan,
        q: &AuxPoints<'_, '_>,
        x: Option<DevBuf>,
        aux: &[Scalar],
        shape: Option<&Arc<R1cs>>,
    ) -> Result<WitnessSums, GpuError> {
        if check_aux(q)?.is_none() {
            return Ok(WitnessSums::identity());
        }
        let x = Mutex::new(x);
        let own = || {
            let kept = x.lock().unwrap_or_else(|p| p.into_inner());
            kept.as_ref().map_or(0, |b| b.len() as u64)
        };
        self.run_planned(plan, shape, &own, |held, pl| {
            let kept = x.lock().unwrap_or_else(|p| p.into_inner()).take();
            let x = match kept {
                Some(x) => x,
                None => held.state()?.gpu.upload_new(bytes(aux))?,
            };
            planned::aux_planned(held, pl, q, x)
        })
    }

    /// The witness sums under `plan` (see [`GpuPrepared::aux_sums_planned`]), the inputs'
    /// parts added.
    fn witness_planned(
        &self,
        plan: &Plan,
        w: Witness,
        x: Option<DevBuf>,
        aux: &[Scalar],
        shape: Option<&Arc<R1cs>>,
    ) -> Result<WitnessSums, GpuError> {
        let p = self.witness_points(w.input.len(), w.b_in)?;
        let b_input = dense(&w.input, &w.b_input_density);
        // `w.aux` may have been moved out for staging: the aux values are `aux`.
        let q = AuxPoints {
            aux,
            ..aux_points(&w, &p)
        };
        let sums = self.aux_sums_planned(plan, &q, x, aux, shape)?;
        self.with_inputs(sums, w, &p, &b_input)
    }

    /// The H sum of a shaped proof under `plan`, and the assignment's copy on the device where
    /// the plan keeps it for the witness sums.
    fn h_shaped_planned(
        &self,
        plan: &Plan,
        shape: &Arc<R1cs>,
        input: &[Scalar],
        aux: &[Scalar],
    ) -> Result<(G1Projective, Option<DevBuf>), GpuError> {
        let h = Points::of_g1(self.set.id, Query::H, &self.srs.h, 0..self.srs.h.len())?;
        let n = shape.num_constraints();
        let m = domain_size(n);
        self.run_planned(plan, Some(shape), &|| 0, |held, pl| {
            let input = held.state()?.gpu.upload_new(bytes(input))?;
            if pl.keep_assignment {
                let x = held.state()?.gpu.upload_new(bytes(aux))?;
                let fill = planned::Assignment::Kept(&x);
                let sum = planned::h_shaped_planned(held, pl, &h, shape, &input, fill, n, m)?;
                Ok((sum, Some(x)))
            } else {
                let fill = planned::Assignment::Reload(aux);
                let sum = planned::h_shaped_planned(held, pl, &h, shape, &input, fill, n, m)?;
                Ok((sum, None))
            }
        })
    }

    /// The witness queries' points for `n_in` inputs of which the B queries use `b_in`.
    fn witness_points(&self, n_in: usize, b_in: usize) -> Result<WitnessPoints<'_>, GpuError> {
        let (srs, id) = (&*self.srs, self.set.id);
        Ok(WitnessPoints {
            l: Points::of_g1(id, Query::L, &srs.l, 0..srs.l.len())?,
            a_in: Points::of_g1(id, Query::A, &srs.a, 0..n_in)?,
            a_aux: Points::of_g1(id, Query::A, &srs.a, n_in..srs.a.len())?,
            b1_in: Points::of_g1(id, Query::BG1, &srs.b_g1, 0..b_in)?,
            b1_aux: Points::of_g1(id, Query::BG1, &srs.b_g1, b_in..srs.b_g1.len())?,
            b2_in: Points::of_g2(id, Query::BG2, &srs.b_g2, 0..b_in)?,
            b2_aux: Points::of_g2(id, Query::BG2, &srs.b_g2, b_in..srs.b_g2.len())?,
        })
    }

    /// The witness sums: the four aux MSMs jointly where they fit on the device together,
    /// else one by one; the inputs' parts (a few points) as separate MSMs.
    fn witness(&self, w: Witness) -> Result<WitnessSums, GpuError> {
        let p = self.witness_points(w.input.len(), w.b_in)?;
        let b_input = dense(&w.input, &w.b_input_density);
        let t = Instant::now();
        let joint = self.set.shared.aux_joint(&aux_points(&w, &p));
        let sums = match joint {
            Err(e) if e.is_out_of_memory() => {
                // Nothing was lost: the queries go one at a time instead, each with room for
                // its own working buffers.
                tracing::debug!(error = %e, "aux MSMs one by one");
                return self.witness_apart(w, &p, &b_input);
            }
            r => r?,
        };
        tracing::trace!(msm = "aux", ms = t.elapsed().as_millis() as u64, "msm done");
        self.with_inputs(sums, w, &p, &b_input)
    }

    /// The witness sums from the aux MSMs' `sums`: the inputs' parts added.
    fn with_inputs(
        &self,
        sums: WitnessSums,
        w: Witness,
        p: &WitnessPoints<'_>,
        b_input: &[Scalar],
    ) -> Result<WitnessSums, GpuError> {
        release(w.aux);
        let shared = &self.set.shared;
        Ok(WitnessSums {
            l: sums.l,
            a: sums.a + shared.sum_g1(&p.a_in, &w.input)?,
            b_g1: sums.b_g1 + shared.sum_g1(&p.b1_in, b_input)?,
            b_g2: sums.b_g2 + shared.sum_g2(&p.b2_in, b_input)?,
        })
    }

    /// The witness MSMs one at a time, with the A and B selections made on the host: where the
    /// four aux MSMs do not fit on the device together.
    fn witness_apart(
        &self,
        w: Witness,
        p: &WitnessPoints<'_>,
        b_input: &[Scalar],
    ) -> Result<WitnessSums, GpuError> {
        let shared = &self.set.shared;
        let b_aux = dense(&w.aux, &w.b_aux_density);
        let l = shared.sum_g1(&p.l, &w.aux)?;
        let a = shared.sum_g1(&p.a_in, &w.input)?
            + shared.sum_g1(&p.a_aux, &dense(&w.aux, &w.a_aux_density))?;
        // The assignment is not needed any more: B's selection is made.
        drop(w.aux);
        Ok(WitnessSums {
            l,
            a,
            b_g1: shared.sum_g1(&p.b1_in, b_input)? + shared.sum_g1(&p.b1_aux, &b_aux)?,
            b_g2: shared.sum_g2(&p.b2_in, b_input)? + shared.sum_g2(&p.b2_aux, &b_aux)?,
        })
    }
}

impl GpuPrepared {
    /// [`PreparedSrs::witness_sums`] before the host copies are let go of.
    fn witness_sums_of(&self, mut w: Witness) -> Result<WitnessSums, ProverError> {
        if let Some(plan) = self.planned()? {
            let aux = std::mem::replace(&mut w.aux, Scalars::Heap(Vec::new()));
            let staged = self.staged_aux(&aux)?;
            let sums = self.witness_planned(plan, w, None, staged.scalars(), None);
            drop(staged);
            release(aux);
            return Ok(sums?);
        }
        Ok(self.witness(w)?)
    }

    /// [`PreparedSrs::sums_shaped`] before the host copies are let go of.
    fn sums_shaped_of(&self, shape: &Arc<R1cs>, w: Witness) -> Result<Sums, ProverError> {
        if let Some(plan) = self.planned()? {
            // The assignment copied once into page-locked memory, for every upload of it. Two
            // turns on the device: an urgent caller waiting takes its turn between them
            // (beside the kept assignment, where the plan keeps it).
            let mut w = w;
            let aux = std::mem::replace(&mut w.aux, Scalars::Heap(Vec::new()));
            let staged = self.staged_aux(&aux)?;
            let start = Instant::now();
            let (h, x) = self.h_shaped_planned(plan, shape, &w.input, staged.scalars())?;
            let h_done = start.elapsed();
            let witness = self.witness_planned(plan, w, x, staged.scalars(), Some(shape));
            drop(staged);
            release(aux);
            return Ok(Sums {
                h,
                witness: witness?,
                h_done,
            });
        }
        let h = Points::of_g1(self.set.id, Query::H, &self.srs.h, 0..self.srs.h.len())?;
        let p = self.witness_points(w.input.len(), w.b_in)?;
        let q = aux_points(&w, &p);
        let joint = self.with_room(Some(shape), || {
            self.set.shared.sums_shaped(shape, &w.input, &h, &q)
        });
        let (h, h_done, aux) = match joint {
            Err(e) if e.is_out_of_memory() => {
                tracing::debug!(error = %e, "the H sum and the witness sums apart");
                let start = Instant::now();
                let h = self.h_sum_shaped(shape, &w.input, &w.aux)?;
                let h_done = start.elapsed();
                let witness = self.witness(w)?;
                return Ok(Sums { h, witness, h_done });
            }
            r => r?,
        };
        tracing::trace!(
            msm = "h",
            ms = h_done.as_millis() as u64,
            "msm done (shaped)"
        );
        let witness = match aux {
            Some(sums) => {
                let b_input = dense(&w.input, &w.b_input_density);
                self.with_inputs(sums, w, &p, &b_input)?
            }
            None => self.witness(w)?,
        };
        Ok(Sums { h, witness, h_done })
    }

    /// `f` on the device as a plan that holds everything does it: where it runs out of
    /// memory, once more after what that plan does not keep is freed (other sets' points,
    /// tables and shapes that no urgent caller uses), before anyone falls back to a slower
    /// form. Other sets' points otherwise stay on the card while there is room: a card that
    /// holds this set whole may hold another's too (an H200 holds a 32 GiB PoRep set and a
    /// WindowPoSt set), and one that cannot finds out here, not by evicting everything.
    fn with_room<T>(
        &self,
        shape: Option<&Arc<R1cs>>,
        f: impl Fn() -> Result<T, GpuError>,
    ) -> Result<T, GpuError> {
        match f() {
            Err(e) if e.is_out_of_memory() => {
                let Ok(plan) = &self.plan else {
                    return Err(e);
                };
                let freed = {
                    let mut s = self.set.shared.lock()?;
                    let before = s.gpu.memory().used;
                    s.make_room(self.set.id, plan, self.lg(), shape);
                    before.saturating_sub(s.gpu.memory().used)
                };
                if freed == 0 {
                    return Err(e);
                }
                tracing::debug!(error = %e, freed, "out of device memory beside other sets: freed what this set's plan does not keep, once more");
                f()
            }
            r => r,
        }
    }

    /// Releases the host copies of the queries no one wants any more (the B queries go up
    /// with the first proof, after which this device no longer needs the host's copy).
    fn let_go_of_host_copies(&self) {
        let bytes = self.srs.release_unwanted();
        if bytes > 0 {
            tracing::info!(
                params = %self.srs.path.display(),
                bytes,
                "host copy of parameter points released: the devices hold them"
            );
        }
    }
}

impl PreparedSrs for GpuPrepared {
    fn srs(&self) -> &Arc<Srs> {
        &self.srs
    }

    fn h_sum(&self, a: Scalars, b: Scalars, c: Scalars) -> Result<G1Projective, ProverError> {
        let h = Points::of_g1(self.set.id, Query::H, &self.srs.h, 0..self.srs.h.len())?;
        let t = Instant::now();
        if let Some(plan) = self.planned()? {
            let n = a.len();
            if b.len() != n || c.len() != n {
                return Err(GpuError::Input("A, B and C have different lengths".into()).into());
            }
            let fill = planned::Fill::Host([&a, &b, &c]);
            let m = domain_size(n);
            let sum = self.run_planned(plan, None, &|| 0, |held, pl| {
                planned::h_planned(held, pl, &h, &fill, n, m)
            });
            [a, b, c].into_iter().for_each(release);
            return Ok(sum?);
        }
        let sum = self.set.shared.h_sum(&a, &b, &c, &h);
        [a, b, c].into_iter().for_each(release);
        tracing::trace!(msm = "h", ms = t.elapsed().as_millis() as u64, "msm done");
        Ok(sum?)
    }

    fn witness_sums(&self, w: Witness) -> Result<WitnessSums, ProverError> {
        let sums = self.witness_sums_of(w);
        self.let_go_of_host_copies();
        sums
    }

    fn evaluates_shapes(&self) -> bool {
        true
    }

    fn h_sum_shaped(
        &self,
        shape: &Arc<R1cs>,
        input: &[Scalar],
        aux: &[Scalar],
    ) -> Result<G1Projective, ProverError> {
        if let Some(plan) = self.planned()? {
            return Ok(self.h_shaped_planned(plan, shape, input, aux)?.0);
        }
        let h = Points::of_g1(self.set.id, Query::H, &self.srs.h, 0..self.srs.h.len())?;
        let t = Instant::now();
        let sum = self.set.shared.h_sum_shaped(shape, input, aux, &h)?;
        tracing::trace!(
            msm = "h",
            ms = t.elapsed().as_millis() as u64,
            "msm done (shaped)"
        );
        Ok(sum)
    }

    fn sums_shaped(&self, shape: &Arc<R1cs>, w: Witness) -> Result<Sums, ProverError> {
        let sums = self.sums_shaped_of(shape, w);
        self.let_go_of_host_copies();
        sums
    }

    fn device_bytes(&self) -> u64 {
        self.set.bytes.load(Ordering::Relaxed)
    }

    fn memory_plan(&self) -> Option<String> {
        let lowered = self.lowered.load(Ordering::Relaxed);
        let mut plan = match &self.plan {
            Ok(p) if lowered < p.budget => format!(
                "{}; since a proof ran out of device memory, proofs plan within {:.1} GiB",
                p.describe(&self.sizes),
                lowered as f64 / (1u64 << 30) as f64
            ),
            Ok(p) => p.describe(&self.sizes),
            Err(e) => e.to_string(),
        };
        if let Some(last) = &*self.last_refit.lock().unwrap_or_else(|p| p.into_inner()) {
            plan.push_str("; the last proof, with less room: ");
            plan.push_str(last);
        }
        Some(plan)
    }

    fn host_bytes(&self) -> u64 {
        match self.planned() {
            // The parked cosets, and the block the assignment is staged in.
            Ok(Some(p)) => p.parked_bytes(&self.sizes) + self.sizes.aux * FR_BYTES as u64,
            _ => 0,
        }
    }
}
