//! [`GpuBackend`]: the prover's boundary on one CUDA device.
//!
//! A parameter set prepared here ([`GpuPrepared`]) owns its points on the device: they go up
//! once, with [`GpuBackend::prepare_gpu`] (the B queries with the first proof, see there), and
//! are freed when the handle is dropped. Where the device runs out of memory, the backend
//! drops the other sets' points and its NTT tables and tries once more; a set whose points
//! were dropped that way uploads them again when it next needs them.
//!
//! This file holds the backend's public face; the work is in its children, each owning one
//! concern, lowest first (tests/tidy.rs keeps each to the ones below it): `host` (where points
//! are on the host), `residency` (what the device holds between calls: `State`), `turns`
//! (callers taking turns on that state, and a set's claim on it), `sums` (a proof's device
//! calls where its plan holds everything), `planned` (the same in the forms of a plan that
//! does not) and `prepared` (a parameter set on the device, choosing between them).

use std::sync::Arc;

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ff::Field;

use super::bytes::{bytes, bytes_mut};
use super::device::{DeviceInfo, Gpu, MemoryUse};
use super::ntt::FR_BYTES;
use super::plan::{self, Plan, Sizes};
use super::{GpuError, GpuOptions};
use crate::prover::{
    count_set, Backend, DeviceMemory, DevicePauses, HostAllocator, PreparedSrs, ProverError,
    WitnessSums,
};
use crate::srs::Srs;

mod critical;
mod host;
mod planned;
mod prepared;
mod refit;
mod residency;
mod sums;
mod turns;

pub use prepared::GpuPrepared;
use prepared::{pin_streamed, plan_within};
use residency::{Points, Query};
use sums::AuxPoints;
use turns::{DeviceGuard, SetGuard, Shared};

/// NTTs and MSMs on one CUDA device. Calls are serialised on the device (one stream).
pub struct GpuBackend {
    shared: Arc<Shared>,
}

/// The four aux MSMs from host slices ([`GpuBackend::aux_msms_gpu`], for tests and
/// benchmarks): `l` has one point per aux value, `a` one per set flag of `a_density`, `b_g1`
/// and `b_g2` one per set flag of `b_density`; both densities have one flag per aux value.
pub struct AuxQueries<'a> {
    /// The aux part of the assignment.
    pub aux: &'a [Scalar],
    /// Which aux variables the A query uses.
    pub a_density: &'a [bool],
    /// Which aux variables the B queries use.
    pub b_density: &'a [bool],
    /// The L query.
    pub l: &'a [G1Affine],
    /// The aux part of the A query.
    pub a: &'a [G1Affine],
    /// The aux part of the B query in G1.
    pub b_g1: &'a [G1Affine],
    /// The aux part of the B query in G2.
    pub b_g2: &'a [G2Affine],
}

impl GpuBackend {
    /// Opens the CUDA device `options` name and loads the kernels; the NTTs and MSMs then run
    /// as `options` say.
    pub fn new(options: &GpuOptions) -> Result<Self, GpuError> {
        let gpu = Gpu::open(options)?;
        Ok(GpuBackend {
            shared: Arc::new(Shared::new(gpu)),
        })
    }

    /// The device this backend runs on.
    pub fn info(&self) -> &DeviceInfo {
        &self.shared.info
    }

    pub(super) fn lock(&self) -> Result<DeviceGuard<'_>, GpuError> {
        self.shared.lock()
    }

    /// Free and total memory of the device, in bytes.
    pub fn mem_info(&self) -> Result<(usize, usize), GpuError> {
        self.lock()?.gpu.mem_info()
    }

    /// Drops the NTT tables and the resident points of every prepared set, freeing their
    /// device memory (the sets upload their points again when next used).
    pub fn clear_cache(&self) -> Result<(), GpuError> {
        let mut s = self.lock()?;
        s.evict_except(None);
        s.gpu.sync()
    }

    /// Uploads the points of `srs` that every proof with it uses: H, L and A. The B queries
    /// are split between the inputs and the aux variables at a point only the circuit knows
    /// (the inputs the B queries use), so they go up with the first proof. Points that do not
    /// fit now (beside other sets, once those were evicted) go up when they are used.
    pub fn prepare_gpu(&self, srs: Arc<Srs>) -> Result<GpuPrepared, GpuError> {
        let sizes = Sizes::from_queries(
            srs.h.len() as u64,
            srs.l.len() as u64,
            srs.a.len() as u64,
            srs.b_g1.len() as u64,
        );
        let plan = self.plan(&sizes, None)?;
        let set = SetGuard::new(&self.shared)?;
        let n_in = srs.vk.ic.len().min(srs.a.len());
        let all = plan.as_ref().is_ok_and(|p| p.is_all_resident(&sizes));
        let keep = |q| all || plan.as_ref().is_ok_and(|p| p.resident.has(q));
        let ctx = {
            let queries = [
                (
                    plan::Query::H,
                    Points::of_g1(set.id, Query::H, &srs.h, 0..srs.h.len())?,
                ),
                (
                    plan::Query::L,
                    Points::of_g1(set.id, Query::L, &srs.l, 0..srs.l.len())?,
                ),
                (
                    plan::Query::A,
                    Points::of_g1(set.id, Query::A, &srs.a, 0..n_in)?,
                ),
                (
                    plan::Query::A,
                    Points::of_g1(set.id, Query::A, &srs.a, n_in..srs.a.len())?,
                ),
            ];
            let mut s = self.lock()?;
            s.want_host_copies(set.id, &srs);
            for (_, p) in queries.iter().filter(|(q, p)| p.n > 0 && keep(*q)) {
                match s.ensure(p) {
                    Err(e) if e.is_out_of_memory() => {
                        tracing::debug!(error = %e, params = %srs.path.display(), "parameters partly on the device");
                        break;
                    }
                    r => r?,
                }
            }
            s.gpu.context()
        };
        let pinned = match &plan {
            Ok(p) if !all => Some(pin_streamed(&ctx, &srs, p)?),
            _ => None,
        };
        match &plan {
            Ok(p) => tracing::info!(
                device = self.shared.info.ordinal,
                params = %srs.path.display(),
                plan = %p.describe(&sizes),
                "device memory plan"
            ),
            Err(e) => tracing::warn!(
                device = self.shared.info.ordinal,
                params = %srs.path.display(),
                error = %e,
                "no device memory plan: proofs of this set fail over to other devices or the CPU"
            ),
        }
        let host_alloc = super::pinned::allocator(ctx);
        Ok(GpuPrepared::new(set, srs, sizes, plan, pinned, host_alloc))
    }

    /// The plan for proofs of `sizes` within `budget` (the device's budget where `None`).
    fn plan(
        &self,
        sizes: &Sizes,
        budget: Option<u64>,
    ) -> Result<Result<Plan, plan::TooSmall>, GpuError> {
        let s = self.lock()?;
        Ok(plan_within(
            &s.gpu,
            sizes,
            budget.unwrap_or(s.gpu.memory().budget),
        ))
    }

    /// The device memory this backend holds, against its budget (without waiting for the
    /// device).
    pub fn memory_use(&self) -> MemoryUse {
        self.shared.ledger.snapshot()
    }

    /// In-place natural-order NTT of `values` (length a power of two, ≤ 2^28), with the same
    /// roots as the CPU prover. `inverse` includes the 1/n; `coset` uses the coset g·H with
    /// g = 7 (for an inverse, it interpolates from that coset).
    pub fn ntt(&self, values: &mut [Scalar], inverse: bool, coset: bool) -> Result<(), GpuError> {
        let n = values.len();
        if !n.is_power_of_two() {
            return Err(GpuError::Input(format!(
                "NTT size {n} is not a power of two"
            )));
        }
        let lg = n.trailing_zeros();
        let mut s = self.lock()?;
        s.domain(lg)?;
        let s = &*s;
        let d = s
            .cached_domain(lg)
            .ok_or_else(|| GpuError::Input("domain cache".into()))?;
        let data = s.gpu.upload_new(bytes(values))?;
        let mut out = s.gpu.alloc(n * FR_BYTES)?;
        d.transform(&s.gpu, &data, &mut out, inverse, coset)?;
        s.gpu.download(&out, bytes_mut(values))
    }

    /// The m − 1 lowest coefficients of H(X) = (A(X)·B(X) − C(X)) / Z(X) (m the domain size),
    /// downloaded to the host.
    pub fn quotient_gpu(
        &self,
        a: Vec<Scalar>,
        b: Vec<Scalar>,
        c: Vec<Scalar>,
    ) -> Result<Vec<Scalar>, GpuError> {
        // The inputs stay on the host until the transform succeeds, so a retry after freeing
        // the resident points and NTT tables (out of memory beside them) needs no copies.
        match self.quotient_once(&a, &b, &c) {
            Err(e) if e.is_out_of_memory() => {
                self.lock()?.evict_except(None);
                self.quotient_once(&a, &b, &c)
            }
            r => r,
        }
    }

    fn quotient_once(
        &self,
        a: &[Scalar],
        b: &[Scalar],
        c: &[Scalar],
    ) -> Result<Vec<Scalar>, GpuError> {
        let mut s = self.lock()?;
        let (h, m) = s.quotient_on_device(a, b, c)?;
        let mut out = vec![Scalar::ZERO; m - 1];
        s.gpu.download(&h, bytes_mut(&mut out))?;
        Ok(out)
    }

    /// The H sum as a prepared set computes it, for host points `bases` that are uploaded for
    /// this call only (tests, benchmarks).
    pub fn quotient_h_query_gpu(
        &self,
        a: Vec<Scalar>,
        b: Vec<Scalar>,
        c: Vec<Scalar>,
        bases: &[G1Affine],
    ) -> Result<G1Projective, GpuError> {
        let set = SetGuard::new(&self.shared)?;
        let h = Points::g1(set.id, Query::H, bases, 0..bases.len())?;
        self.shared.h_sum(&a, &b, &c, &h)
    }

    /// Points kept on the device across calls for ad-hoc MSMs (tests, benchmarks); see
    /// [`ResidentPoints`].
    pub fn resident_points(&self) -> Result<ResidentPoints, GpuError> {
        Ok(ResidentPoints {
            set: SetGuard::new(&self.shared)?,
        })
    }

    /// The four aux MSMs as a prepared set computes them jointly (the assignment uploaded
    /// once), for host points uploaded for this call only. Out of memory is an error here; a
    /// prepared set then runs the MSMs one by one.
    pub fn aux_msms_gpu(&self, q: &AuxQueries<'_>) -> Result<WitnessSums, GpuError> {
        self.resident_points()?.aux_msms(q)
    }

    /// Σ scalars[i]·bases[i] in G1 on the GPU, the bases uploaded for this call only.
    pub fn msm_g1_gpu(
        &self,
        bases: &[G1Affine],
        scalars: &[Scalar],
    ) -> Result<G1Projective, GpuError> {
        self.resident_points()?.msm_g1(0, bases, scalars)
    }

    /// Σ scalars[i]·bases[i] in G2 on the GPU, the bases uploaded for this call only.
    pub fn msm_g2_gpu(
        &self,
        bases: &[G2Affine],
        scalars: &[Scalar],
    ) -> Result<G2Projective, GpuError> {
        self.resident_points()?.msm_g2(0, bases, scalars)
    }
}

/// Host points kept on the device across calls, for MSMs outside a prepared parameter set
/// (tests, benchmarks): each slice goes up on its first use and stays until this is dropped.
/// The caller names each slice of [`ResidentPoints::msm_g1`] / [`ResidentPoints::msm_g2`] and
/// promises that a name always means the same points (of the same length); the queries of
/// [`ResidentPoints::aux_msms`] are names 0 to 3 in the order of [`AuxQueries`] (L, A, B in G1,
/// B in G2), so that separate MSMs over the same points share them.
pub struct ResidentPoints {
    set: SetGuard,
}

impl ResidentPoints {
    /// Σ scalars[i]·bases[i] in G1, the bases resident under `name`.
    pub fn msm_g1(
        &self,
        name: usize,
        bases: &[G1Affine],
        scalars: &[Scalar],
    ) -> Result<G1Projective, GpuError> {
        let p = Points::g1(self.set.id, Query::Named(name), bases, 0..bases.len())?;
        self.set.shared.sum_g1(&p, scalars)
    }

    /// Σ scalars[i]·bases[i] in G2, the bases resident under `name`.
    pub fn msm_g2(
        &self,
        name: usize,
        bases: &[G2Affine],
        scalars: &[Scalar],
    ) -> Result<G2Projective, GpuError> {
        let p = Points::g2(self.set.id, Query::Named(name), bases, 0..bases.len())?;
        self.set.shared.sum_g2(&p, scalars)
    }

    /// The four aux MSMs jointly, as a prepared set computes them (the assignment uploaded
    /// once); the four queries' points resident.
    pub fn aux_msms(&self, q: &AuxQueries<'_>) -> Result<WitnessSums, GpuError> {
        let id = self.set.id;
        self.set.shared.aux_joint(&AuxPoints {
            aux: q.aux,
            a_density: q.a_density,
            b_density: q.b_density,
            a_set: count_set(q.a_density),
            b_set: count_set(q.b_density),
            l: Points::g1(id, Query::Named(0), q.l, 0..q.l.len())?,
            a: Points::g1(id, Query::Named(1), q.a, 0..q.a.len())?,
            b_g1: Points::g1(id, Query::Named(2), q.b_g1, 0..q.b_g1.len())?,
            b_g2: Points::g2(id, Query::Named(3), q.b_g2, 0..q.b_g2.len())?,
        })
    }
}

impl Backend for GpuBackend {
    fn name(&self) -> String {
        format!(
            "cuda:{} {}",
            self.shared.info.ordinal, self.shared.info.name
        )
    }

    fn prepare(&self, srs: Arc<Srs>) -> Result<Arc<dyn PreparedSrs>, ProverError> {
        Ok(Arc::new(self.prepare_gpu(srs)?))
    }

    fn is_accelerator(&self) -> bool {
        true
    }

    fn pci_bus_id(&self) -> Option<String> {
        Some(self.shared.info.pci_bus_id.clone())
    }

    fn pauses(&self) -> Option<DevicePauses> {
        Some(self.shared.pauses())
    }

    fn memory(&self) -> Option<DeviceMemory> {
        let m = self.shared.ledger.snapshot();
        Some(DeviceMemory {
            budget: m.budget,
            used: m.used,
            peak: m.peak,
        })
    }

    fn reset_memory_peak(&self) {
        self.shared.ledger.reset_peak();
    }

    fn host_allocator(&self) -> Option<HostAllocator> {
        let s = self.shared.state_outside_turn();
        Some(super::pinned::allocator(s.gpu.context()))
    }
}
