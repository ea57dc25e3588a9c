//! [`GpuBackend`]: the prover's boundary on one CUDA device.
//!
//! A parameter set prepared here ([`GpuPrepared`]) owns its points on the device: they go up
//! once, with [`GpuBackend::prepare_gpu`] (the B queries with the first proof, see there), and
//! are freed when the handle is dropped. Where the device runs out of memory, the backend
//! drops the other sets' points and its NTT tables and tries once more; a set whose points
//! were dropped that way uploads them again when it next needs them.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ff::Field;
use group::Group;
use rayon::prelude::*;

use cudarc::driver::PinnedHostSlice;

use super::bytes::{bytes, bytes_mut};
use super::device::{DevBuf, DeviceInfo, Gpu, Ledger, MemoryUse};
use super::msm::{self, Curve};
use super::ntt::{Domain, FR_BYTES};
use super::pinned::PinnedHost;
use super::plan::{self, Plan, Sizes};
use super::r1cs::{self, DeviceShape, StreamedShape};
use super::{GpuError, GpuOptions};
use crate::prover::{
    count_set, dense, Backend, DeviceMemory, HostAllocator, PreparedSrs, ProverError, RawBlock,
    Scalars, Sums, Witness, WitnessSums,
};
use crate::srs::{HostPoints, Srs, Want};
use crate::synth::R1cs;

mod host;
mod planned;

use host::{covers, Host, HostBytes};

/// A query of a parameter set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Query {
    H,
    L,
    A,
    BG1,
    BG2,
    /// Points a caller of [`ResidentPoints`] named.
    Named(usize),
}

/// Names a device buffer of points: a range of one query of one prepared set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct SlotKey {
    set: u64,
    query: Query,
    start: usize,
    end: usize,
}

/// The points of one MSM: the buffer that holds them on the device, or will once
/// [`State::ensure`] uploaded them from their host copy.
#[derive(Clone, Copy)]
struct Points<'a> {
    key: SlotKey,
    host: Host<'a>,
    n: usize,
    curve: Curve,
}

impl<'a> Points<'a> {
    fn g1(
        set: u64,
        query: Query,
        all: &'a [G1Affine],
        range: Range<usize>,
    ) -> Result<Self, GpuError> {
        Self::new(set, query, all, range, Curve::G1)
    }

    fn g2(
        set: u64,
        query: Query,
        all: &'a [G2Affine],
        range: Range<usize>,
    ) -> Result<Self, GpuError> {
        Self::new(set, query, all, range, Curve::G2)
    }

    /// A range of a parameter set's G1 query (its host copy read only where an upload
    /// needs it).
    fn of_g1(
        set: u64,
        query: Query,
        all: &'a HostPoints<G1Affine>,
        range: Range<usize>,
    ) -> Result<Self, GpuError> {
        Self::of_query(set, query, Host::G1(all), all.len(), range, Curve::G1)
    }

    /// The same in G2.
    fn of_g2(
        set: u64,
        query: Query,
        all: &'a HostPoints<G2Affine>,
        range: Range<usize>,
    ) -> Result<Self, GpuError> {
        Self::of_query(set, query, Host::G2(all), all.len(), range, Curve::G2)
    }

    fn new<T: super::bytes::Plain>(
        set: u64,
        query: Query,
        all: &'a [T],
        range: Range<usize>,
        curve: Curve,
    ) -> Result<Self, GpuError> {
        let points = all
            .get(range.clone())
            .ok_or_else(|| out_of(&range, query, all.len()))?;
        Self::of_query(
            set,
            query,
            Host::Bytes(bytes(points)),
            all.len(),
            range,
            curve,
        )
    }

    /// Points `range` of a query of `len` points whose host side is `host` (a query, or the
    /// range's own bytes).
    fn of_query(
        set: u64,
        query: Query,
        host: Host<'a>,
        len: usize,
        range: Range<usize>,
        curve: Curve,
    ) -> Result<Self, GpuError> {
        if range.start > range.end || range.end > len {
            return Err(out_of(&range, query, len));
        }
        Ok(Points {
            key: SlotKey {
                set,
                query,
                start: range.start,
                end: range.end,
            },
            host,
            n: range.len(),
            curve,
        })
    }

    /// Bytes of the points on the device.
    fn byte_len(&self) -> usize {
        self.n * self.curve.affine_bytes()
    }

    /// The points' host bytes (a released query's read again from its file).
    fn host_bytes(&self) -> Result<HostBytes<'a>, GpuError> {
        self.host.bytes(self.key.start..self.key.end)
    }
}

fn out_of(range: &Range<usize>, query: Query, len: usize) -> GpuError {
    GpuError::Input(format!("points {range:?} of a {query:?} query of {len}"))
}

pub(super) struct State {
    pub(super) gpu: Gpu,
    /// Points resident on the device, per prepared set and query range.
    bases: HashMap<SlotKey, DevBuf>,
    /// Bytes of `bases` per set, shared with the set's handle, which reads them without
    /// waiting for the device (Status).
    resident: HashMap<u64, Arc<AtomicU64>>,
    /// NTT tables per log2 domain size.
    domains: HashMap<u32, Domain>,
    /// Recorded shapes on the device, each with the host shape it copies; dropped when that
    /// is gone (its parameter set evicted) or to make room.
    shapes: Vec<(Weak<R1cs>, DeviceShape)>,
    /// Recorded shapes streamed from host memory (plans that do not keep the shape), each
    /// holding its host shape until no one else does.
    streamed: Vec<StreamedShape>,
    /// Page-locked host vectors for the parked cosets of plans that park them (allocated on
    /// first use, reused by every later proof, grown for a larger domain).
    park: Option<[PinnedHostSlice<u8>; 2]>,
    /// The id of the next set.
    next_set: u64,
    /// Each set's claims on the host copies of its queries, with the query's length: kept
    /// until the query's points are all resident here (see [`crate::srs::HostPoints`]).
    wants: HashMap<(u64, Query), (usize, Want)>,
}

/// The device, shared by the backend and the sets prepared on it.
struct Shared {
    info: DeviceInfo,
    /// The device's memory ledger, read without the lock (Status, metrics).
    ledger: Arc<Ledger>,
    state: Mutex<State>,
    /// Whose turn on the device is next: urgent callers first ([`crate::prover::urgency`]).
    turn: Mutex<Turn>,
    turn_changed: Condvar,
}

/// The device's turn-taking: whether a call holds it, and how many urgent callers wait.
#[derive(Default)]
struct Turn {
    busy: bool,
    urgent_waiting: usize,
}

/// A turn on the device: the state, and the turn released for the next caller on drop.
pub(super) struct DeviceGuard<'a> {
    state: MutexGuard<'a, State>,
    shared: &'a Shared,
}

impl std::ops::Deref for DeviceGuard<'_> {
    type Target = State;
    fn deref(&self) -> &State {
        &self.state
    }
}

impl std::ops::DerefMut for DeviceGuard<'_> {
    fn deref_mut(&mut self) -> &mut State {
        &mut self.state
    }
}

impl Drop for DeviceGuard<'_> {
    fn drop(&mut self) {
        self.shared.end_turn();
    }
}

/// NTTs and MSMs on one CUDA device. Calls are serialised on the device (one stream).
pub struct GpuBackend {
    shared: Arc<Shared>,
}

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

/// The quotient's domain for `n` constraints: the next power of two, at least 2.
fn domain_size(n: usize) -> usize {
    n.next_power_of_two().max(2)
}

/// The quotient's four buffers of a domain of `m`, the first three holding A, B and C
/// evaluated from `copy` and the assignment (`input`, `aux` on the device).
fn evaluate(
    gpu: &Gpu,
    copy: &DeviceShape,
    m: usize,
    input: &DevBuf,
    aux: &DevBuf,
) -> Result<[DevBuf; 4], GpuError> {
    let mut bufs = [
        gpu.alloc(m * FR_BYTES)?,
        gpu.alloc(m * FR_BYTES)?,
        gpu.alloc(m * FR_BYTES)?,
        gpu.alloc(m * FR_BYTES)?,
    ];
    {
        let [a, b, c, _] = &mut bufs;
        copy.evaluate_into(gpu, input, aux, [a, b, c])?;
    }
    Ok(bufs)
}

impl State {
    /// Makes the points of `p` resident (kept until their set is dropped or evicted); where
    /// the upload runs out of memory, the other resident points and the NTT tables go first
    /// and it is tried once more.
    fn ensure(&mut self, p: &Points<'_>) -> Result<(), GpuError> {
        if self.bases.contains_key(&p.key) {
            return Ok(());
        }
        let host = p.host_bytes()?;
        let buf = match self.gpu.upload_new(&host) {
            Err(e) if e.is_out_of_memory() && self.evict_except(None) => {
                self.gpu.upload_new(&host)?
            }
            r => r?,
        };
        if let Some(bytes) = self.resident.get(&p.key.set) {
            bytes.fetch_add(buf.len() as u64, Ordering::Relaxed);
        }
        self.bases.insert(p.key, buf);
        self.settle_want(p.key.set, p.key.query);
        Ok(())
    }

    /// Claims the host copies of `srs`'s queries for set `set` until each is resident.
    fn want_host_copies(&mut self, set: u64, srs: &Srs) {
        let queries = [
            (Query::H, srs.h.len(), srs.h.want()),
            (Query::L, srs.l.len(), srs.l.want()),
            (Query::A, srs.a.len(), srs.a.want()),
            (Query::BG1, srs.b_g1.len(), srs.b_g1.want()),
            (Query::BG2, srs.b_g2.len(), srs.b_g2.want()),
        ];
        for (q, len, want) in queries {
            self.wants.insert((set, q), (len, want));
        }
    }

    /// Gives up the claim on a query's host copy once all its points are resident: the
    /// process may then release that copy. Points evicted later are read again from the file
    /// when next uploaded.
    fn settle_want(&mut self, set: u64, query: Query) {
        let Some(&(len, _)) = self.wants.get(&(set, query)) else {
            return;
        };
        let ranges = self
            .bases
            .keys()
            .filter(|k| k.set == set && k.query == query)
            .map(|k| (k.start, k.end));
        if covers(ranges, len) {
            self.wants.remove(&(set, query));
        }
    }

    /// The resident points of `key` (see [`State::ensure`]).
    fn resident(&self, key: &SlotKey) -> Result<&DevBuf, GpuError> {
        self.bases
            .get(key)
            .ok_or_else(|| GpuError::Input("points not resident".into()))
    }

    /// Device bytes a proof's plan frees or counts as its own: every set's resident points,
    /// the NTT tables and the shapes' device copies (not what a proof holds outside the state,
    /// such as an assignment kept between its two turns).
    fn reclaimable(&self) -> u64 {
        let points: u64 = self.bases.values().map(|b| b.len() as u64).sum();
        let tables: u64 = self.domains.values().map(Domain::device_bytes).sum();
        let shapes: u64 = self.shapes.iter().map(|(_, c)| c.device_bytes()).sum();
        points + tables + shapes
    }

    /// Drops the resident points for which `drop` holds, keeping the byte counts.
    fn drop_bases(&mut self, drop: impl Fn(&SlotKey) -> bool) -> usize {
        let keys: Vec<SlotKey> = self.bases.keys().filter(|k| drop(k)).copied().collect();
        for key in &keys {
            if let (Some(buf), Some(bytes)) = (self.bases.remove(key), self.resident.get(&key.set))
            {
                bytes.fetch_sub(buf.len() as u64, Ordering::Relaxed);
            }
        }
        keys.len()
    }

    /// Drops every resident point range but `keep` and every NTT domain's tables (a 2^27
    /// domain's twiddle table is 2 GiB; the tables are rebuilt in milliseconds when next
    /// needed). Returns whether anything was freed.
    fn evict_except(&mut self, keep: Option<&SlotKey>) -> bool {
        let tables = self.domains.len() + self.shapes.len();
        self.domains.clear();
        self.shapes.clear();
        self.drop_bases(|k| Some(k) != keep) + tables > 0
    }

    /// Copies `shape` to the device unless it is there (dropping the copies of shapes whose
    /// host shape is gone); where that runs out of memory, the other resident points, the
    /// NTT tables and the other shapes go first and it is tried once more.
    fn ensure_shape(&mut self, shape: &Arc<R1cs>, keep: &SlotKey) -> Result<(), GpuError> {
        self.shapes.retain(|(host, _)| host.strong_count() > 0);
        if self.shape(shape).is_some() {
            return Ok(());
        }
        fn csr(m: &crate::synth::Matrix) -> r1cs::Csr<'_> {
            r1cs::Csr {
                starts: &m.starts,
                terms: &m.terms,
            }
        }
        let upload = |gpu: &Gpu| {
            DeviceShape::upload(
                gpu,
                csr(&shape.a),
                csr(&shape.b),
                csr(&shape.c),
                shape.coeffs(),
            )
        };
        let copy = match upload(&self.gpu) {
            Err(e) if e.is_out_of_memory() && self.evict_except(Some(keep)) => upload(&self.gpu)?,
            r => r?,
        };
        self.shapes.push((Arc::downgrade(shape), copy));
        Ok(())
    }

    /// The device's copy of `shape`, if it has one.
    fn shape(&self, shape: &Arc<R1cs>) -> Option<&DeviceShape> {
        self.shapes
            .iter()
            .find(|(host, _)| std::ptr::eq(host.as_ptr(), Arc::as_ptr(shape)))
            .map(|(_, copy)| copy)
    }

    /// The quotient's m coefficients in a device buffer, A, B and C evaluated on the device
    /// from `shape` (made resident by [`State::ensure_shape`]) and the assignment.
    fn quotient_from_shape(
        &mut self,
        shape: &Arc<R1cs>,
        input: &[Scalar],
        aux: &[Scalar],
    ) -> Result<DevBuf, GpuError> {
        let input = self.gpu.upload_new(bytes(input))?;
        let aux = self.gpu.upload_new(bytes(aux))?;
        Ok(self.quotient_of_shape(shape, input, aux, false)?.0)
    }

    /// [`State::quotient_from_shape`] from an assignment already on the device: `aux` is
    /// handed back where `keep_aux` (for the aux MSMs), else freed with `input` in the
    /// stream's order after the evaluation, making room for the transforms.
    fn quotient_of_shape(
        &mut self,
        shape: &Arc<R1cs>,
        input: DevBuf,
        aux: DevBuf,
        keep_aux: bool,
    ) -> Result<(DevBuf, Option<DevBuf>), GpuError> {
        let n = shape.num_constraints();
        let m = domain_size(n);
        self.domain(m.trailing_zeros())?;
        let (Some(copy), Some(d)) = (self.shape(shape), self.domains.get(&m.trailing_zeros()))
        else {
            return Err(GpuError::Input("shape or domain not resident".into()));
        };
        let bufs = evaluate(&self.gpu, copy, m, &input, &aux)?;
        drop(input);
        let aux = keep_aux.then_some(aux);
        Ok((d.quotient_from_device(&self.gpu, bufs, n)?, aux))
    }

    fn domain(&mut self, lg: u32) -> Result<&Domain, GpuError> {
        if !self.domains.contains_key(&lg) {
            let d = Domain::new(&self.gpu, lg)?;
            self.domains.insert(lg, d);
        }
        self.domains
            .get(&lg)
            .ok_or_else(|| GpuError::Input("domain cache".into()))
    }

    /// The quotient's m coefficients (m the domain size; the top one is 0 when the constraints
    /// hold) in a device buffer, and m.
    fn quotient_on_device(
        &mut self,
        a: &[Scalar],
        b: &[Scalar],
        c: &[Scalar],
    ) -> Result<(DevBuf, usize), GpuError> {
        let n = a.len();
        if b.len() != n || c.len() != n {
            return Err(GpuError::Input("A, B and C have different lengths".into()));
        }
        let m = domain_size(n);
        self.domain(m.trailing_zeros())?;
        let d = self
            .domains
            .get(&m.trailing_zeros())
            .ok_or_else(|| GpuError::Input("domain cache".into()))?;
        Ok((d.quotient_from_host(&self.gpu, a, b, c)?, m))
    }
}

/// A set's claim on the device: its id, under which its points are resident, and their
/// bytes. Dropping it frees the points.
struct SetGuard {
    shared: Arc<Shared>,
    id: u64,
    bytes: Arc<AtomicU64>,
}

impl SetGuard {
    fn new(shared: &Arc<Shared>) -> Result<Self, GpuError> {
        let mut s = shared.lock()?;
        let id = s.next_set;
        s.next_set += 1;
        let bytes = Arc::new(AtomicU64::new(0));
        s.resident.insert(id, bytes.clone());
        Ok(SetGuard {
            shared: shared.clone(),
            id,
            bytes,
        })
    }
}

impl Drop for SetGuard {
    fn drop(&mut self) {
        // A panic in an earlier device call poisons the lock but leaves the map usable, and the
        // points must go either way.
        let mut s = self.shared.state.lock().unwrap_or_else(|p| p.into_inner());
        let id = self.id;
        // The points are freed in the device's context whichever thread drops the set.
        let _ = s.gpu.bind();
        s.drop_bases(|k| k.set == id);
        s.resident.remove(&id);
        s.wants.retain(|(set, _), _| *set != id);
        // Freed memory returns to the driver at the next synchronization (CUDA's stream-ordered
        // allocator): make it visible at once. A failure here means the context has failed,
        // which the next call reports.
        let _ = s.gpu.sync();
    }
}

impl Shared {
    /// Waits for a turn on the device (urgent callers take the next turn ahead of the
    /// others), then for its state.
    fn lock(&self) -> Result<DeviceGuard<'_>, GpuError> {
        use crate::prover::urgency::{any_urgent, is_urgent};
        let urgent = is_urgent();
        {
            let mut t = self.turn.lock().unwrap_or_else(|p| p.into_inner());
            t.urgent_waiting += usize::from(urgent);
            loop {
                if t.busy || (!urgent && t.urgent_waiting > 0) {
                    t = self.turn_changed.wait(t).unwrap_or_else(|p| p.into_inner());
                } else if !urgent && any_urgent() {
                    // An urgent proof between its device calls: it wakes nobody when it
                    // ends, so look again shortly.
                    t = self
                        .turn_changed
                        .wait_timeout(t, Duration::from_millis(1))
                        .map(|(t, _)| t)
                        .unwrap_or_else(|p| p.into_inner().0);
                } else {
                    break;
                }
            }
            t.urgent_waiting -= usize::from(urgent);
            t.busy = true;
        }
        match self.state.lock() {
            Ok(state) => {
                let guard = DeviceGuard {
                    state,
                    shared: self,
                };
                // Whatever this thread drops on the device from here on is freed in the
                // device's context (see `Gpu::bind`).
                guard.gpu.bind()?;
                Ok(guard)
            }
            Err(_) => {
                self.end_turn();
                Err(GpuError::Cuda {
                    context: "lock",
                    message: "a previous GPU call panicked".into(),
                })
            }
        }
    }

    fn end_turn(&self) {
        self.turn.lock().unwrap_or_else(|p| p.into_inner()).busy = false;
        self.turn_changed.notify_all();
    }

    /// Σ h_i·H_i for the quotient H of `a`, `b`, `c`, with H left on the device between the
    /// transforms and the MSM: no download and upload of its m·32 bytes (8.6 GB of PCIe
    /// traffic for a 2^27 domain). `h` are the m − 1 points of the H query.
    fn h_sum(
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
    fn h_sum_shaped(
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
    fn sum_g1(&self, p: &Points<'_>, scalars: &[Scalar]) -> Result<G1Projective, GpuError> {
        if p.n == 0 && scalars.is_empty() {
            return Ok(G1Projective::identity());
        }
        Ok(msm::finish_g1(&self.msm(p, scalars)?))
    }

    /// Σ scalars[i]·points[i] in G2 (the identity for none).
    fn sum_g2(&self, p: &Points<'_>, scalars: &[Scalar]) -> Result<G2Projective, GpuError> {
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
    fn aux_joint(&self, q: &AuxPoints<'_, '_>) -> Result<WitnessSums, GpuError> {
        let Some(nb) = check_aux(q)? else {
            return Ok(WitnessSums::identity());
        };
        let mut s = self.lock()?;
        s.fit_aux(q, false)?;
        let aux = s.gpu.upload_new(bytes(q.aux))?;
        aux_sums(&s, q, nb, aux)
    }

    /// Both sums of a shaped proof with the assignment sent over once: A, B and C evaluated
    /// on the device, the quotient, the H query's MSM, and then the four aux MSMs of
    /// [`Shared::aux_joint`] on the copy of `aux` the evaluation read. Between the two, an
    /// urgent caller waiting gets its turn (the copy stays on the device meanwhile). Returns
    /// Σ h_i·H_i, how long it took, and the aux sums, or `None` where they do not fit on the
    /// device together (the caller runs them as [`GpuPrepared::witness`] does). Out of memory
    /// before the H sum is done is returned as the error, nothing kept: the caller then makes
    /// the two calls apart, each with its own retry.
    fn sums_shaped(
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
        let (hs, aux) = s.quotient_of_shape(shape, input, aux, true)?;
        let aux =
            aux.ok_or_else(|| GpuError::Input("the assignment's copy was not kept".into()))?;
        tr.mark(&s.gpu, "A, B, C, quotient")?;
        let parts = msm::msm_device(&s.gpu, Curve::G1, s.resident(&h.key)?, m - 1, hs)?;
        let h_sum = msm::finish_g1(&parts);
        let h_done = start.elapsed();
        tr.mark(&s.gpu, "H")?;
        let Some(nb) = nb else {
            return Ok((h_sum, h_done, Some(WitnessSums::identity())));
        };
        let mut s = self.yield_to_urgent(s)?;
        let fitted = s.fit_aux(q, true);
        tr.mark(&s.gpu, "turn, fit")?;
        tr.emit("shaped sums, to the aux sums");
        let sums = match fitted {
            Err(e) if e.is_out_of_memory() => {
                tracing::debug!(error = %e, "aux MSMs apart, after the H sum");
                return Ok((h_sum, h_done, None));
            }
            r => r.and_then(|()| aux_sums(&s, q, nb, aux))?,
        };
        Ok((h_sum, h_done, Some(sums)))
    }

    /// `s` again, after the urgent callers waiting for the device (if any) had their turns.
    fn yield_to_urgent<'s>(&'s self, s: DeviceGuard<'s>) -> Result<DeviceGuard<'s>, GpuError> {
        let waiting = self
            .turn
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .urgent_waiting;
        if waiting == 0 && !crate::prover::urgency::any_urgent() {
            return Ok(s);
        }
        drop(s);
        self.lock()
    }
}

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

/// Checks the aux MSMs' lengths: the B queries' length, or `None` when there are no aux
/// values (every sum the identity).
fn check_aux(q: &AuxPoints<'_, '_>) -> Result<Option<usize>, GpuError> {
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
    /// buffers fit in the free memory (the assignment's copy too, unless `aux_resident`);
    /// otherwise the out-of-memory error, touching nothing.
    fn fit_aux(&mut self, q: &AuxPoints<'_, '_>, aux_resident: bool) -> Result<(), GpuError> {
        let n = q.aux.len();
        let queries = [q.l, q.a, q.b_g1, q.b_g2];
        let missing: usize = queries
            .iter()
            .filter(|p| !self.bases.contains_key(&p.key))
            .map(|p| p.byte_len())
            .sum();
        let work = aux_work_bytes(n, q.a.n, q.b_g1.n, aux_resident);
        let free = self.gpu.available()?;
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
        if queries
            .iter()
            .any(|p| p.n > 0 && !self.bases.contains_key(&p.key))
        {
            return Err(GpuError::OutOfMemory(
                "the L, A and B bases do not fit on the device together".into(),
            ));
        }
        Ok(())
    }
}

/// The four aux MSMs over `aux`, the assignment's copy on the device (consumed), the points
/// resident ([`State::fit_aux`]); `nb` is the B queries' length. The A and B queries' scalars
/// are selected on the device ([`msm::compact`]), each just before its MSM, before the L
/// query's MSM runs on `aux` (an MSM's front end rewrites its scalars in place).
fn aux_sums(
    s: &State,
    q: &AuxPoints<'_, '_>,
    nb: usize,
    aux: DevBuf,
) -> Result<WitnessSums, GpuError> {
    let queries = [q.l, q.a, q.b_g1, q.b_g2];
    let gpu = &s.gpu;
    // Query i's MSM over `scalars` (consumed: rewritten, then freed), None when empty.
    let sum = |i: usize, scalars: DevBuf| -> Result<Option<msm::MsmParts>, GpuError> {
        let p = &queries[i];
        if p.n == 0 {
            return Ok(None);
        }
        msm::msm_device(gpu, p.curve, s.resident(&p.key)?, p.n, scalars).map(Some)
    };
    let g1 = |p: Option<msm::MsmParts>| p.map_or(G1Projective::identity(), |p| msm::finish_g1(&p));
    // Each selection is made just before its MSM and freed by it, so that no two (the A
    // query's is as large as the assignment) are on the device together; the L query last,
    // its MSM rewriting `aux` in place.
    // With `debug.gpu_trace`, each step's time (the device synchronized after each).
    let mut tr = msm::Trace::new(gpu);
    let a = msm::compact_counted(gpu, &aux, q.a_density, q.a.n)?;
    tr.mark(gpu, "select A")?;
    let a = sum(1, a)?;
    tr.mark(gpu, "A")?;
    let b1 = msm::compact_counted(gpu, &aux, q.b_density, nb)?;
    tr.mark(gpu, "select B")?;
    let b1 = sum(2, b1)?;
    tr.mark(gpu, "B G1")?;
    let b2 = msm::compact_counted(gpu, &aux, q.b_density, nb)?;
    tr.mark(gpu, "select B")?;
    let b2 = sum(3, b2)?;
    tr.mark(gpu, "B G2")?;
    let l = sum(0, aux)?;
    tr.mark(gpu, "L")?;
    tr.emit("aux sums");
    Ok(WitnessSums {
        l: g1(l),
        a: g1(a),
        b_g1: g1(b1),
        b_g2: b2.map_or(G2Projective::identity(), |p| msm::finish_g2(&p)),
    })
}

/// The aux MSMs of one proof for [`Shared::aux_joint`]: `l` has one point per aux value, `a`
/// one per set flag of `a_density`, `b_g1` and `b_g2` one per set flag of `b_density`.
struct AuxPoints<'a, 'p> {
    aux: &'a [Scalar],
    a_density: &'a [bool],
    b_density: &'a [bool],
    /// The set flags of `a_density` and `b_density` (counted once per shape).
    a_set: usize,
    b_set: usize,
    l: Points<'p>,
    a: Points<'p>,
    b_g1: Points<'p>,
    b_g2: Points<'p>,
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
        let info = gpu.info.clone();
        let ledger = gpu.ledger();
        Ok(GpuBackend {
            shared: Arc::new(Shared {
                info,
                ledger,
                state: Mutex::new(State {
                    gpu,
                    bases: HashMap::new(),
                    resident: HashMap::new(),
                    domains: HashMap::new(),
                    shapes: Vec::new(),
                    streamed: Vec::new(),
                    park: None,
                    next_set: 0,
                    wants: HashMap::new(),
                }),
                turn: Mutex::new(Turn::default()),
                turn_changed: Condvar::new(),
            }),
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
        Ok(GpuPrepared {
            set,
            srs,
            sizes,
            plan,
            pinned,
            lowered: AtomicU64::new(u64::MAX),
            lowered_at: AtomicU64::new(0),
            staged: Mutex::new(None),
            host_alloc: super::pinned::allocator(ctx),
        })
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
            .domains
            .get(&lg)
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
        let s = self.shared.state.lock().unwrap_or_else(|p| p.into_inner());
        Some(super::pinned::allocator(s.gpu.context()))
    }
}

/// The plan for `sizes` within `budget` on `gpu`, with its MSM window widths.
fn plan_within(gpu: &Gpu, sizes: &Sizes, budget: u64) -> Result<Plan, plan::TooSmall> {
    let tuning = &gpu.options().msm;
    let bits = |n: u64, g2: bool| {
        let curve = if g2 { Curve::G2 } else { Curve::G1 };
        tuning.window_bits(n as usize, curve)
    };
    plan::plan(budget, sizes, &bits)
}

/// The host copies of the queries a plan streams, held (and page-locked) for the set's life.
struct StreamedCopies {
    g1: Vec<Arc<Vec<G1Affine>>>,
    g2: Vec<Arc<Vec<G2Affine>>>,
}

/// The host points of the queries `plan` streams, page-locked in place (the driver's refusals
/// logged: those points go through the staging buffers).
fn pin_streamed(
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
    /// that its plan counts (its kept assignment).
    fn run_planned<T>(
        &self,
        plan: &Plan,
        shape: Option<&Arc<R1cs>>,
        own: &dyn Fn() -> u64,
        f: impl Fn(&mut State, &Plan) -> Result<T, GpuError>,
    ) -> Result<T, GpuError> {
        let (id, lg) = (self.set.id, self.lg());
        let mut s = self.set.shared.lock()?;
        s.make_room(id, plan, lg, shape);
        let available = self.available(&s, own())?;
        let now = self.fitted(&s, plan, available.min(self.kept_budget(available, plan)));
        let plan = match &now {
            Some(smaller) => {
                // Freed for the smaller plan too: what the first kept, it may not.
                s.make_room(id, smaller, lg, shape);
                smaller
            }
            None => plan,
        };
        s.gpu.set_tight(true);
        let result = match f(&mut s, plan) {
            Err(e) if e.is_out_of_memory() => self.retry(&mut s, plan, shape, e, own(), &f),
            r => r,
        };
        s.gpu.set_tight(false);
        result
    }

    /// `f` once more, under a plan for what the device has free after `plan` ran out of
    /// memory with `error`, less a sixteenth of `plan`'s budget; where it succeeds, its budget
    /// is kept for the next proofs. `error` where no smaller plan fits.
    fn retry<T>(
        &self,
        s: &mut State,
        plan: &Plan,
        shape: Option<&Arc<R1cs>>,
        error: GpuError,
        own: u64,
        f: &impl Fn(&mut State, &Plan) -> Result<T, GpuError>,
    ) -> Result<T, GpuError> {
        s.evict_except(None);
        let available = self.available(s, own)?;
        let Some(smaller) = self.fitted(s, plan, available.saturating_sub(plan.budget / 16)) else {
            return Err(error);
        };
        tracing::warn!(error = %error, plan = %smaller.describe(&self.sizes), "out of device memory: proving again under a smaller plan (kept for the next proofs)");
        s.make_room(self.set.id, &smaller, self.lg(), shape);
        let r = f(s, &smaller);
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
    /// assignment).
    fn available(&self, s: &State, own: u64) -> Result<u64, GpuError> {
        s.gpu.settle()?;
        let (free, _) = s.gpu.mem_info()?;
        let held = s.gpu.memory();
        Ok(plan::available_budget(
            free as u64,
            held.used,
            s.reclaimable() + own,
            held.budget,
        ))
    }

    /// A plan within `budget` where that is less than `plan`'s; `None` where `plan` fits, or
    /// where nothing does (`plan` is tried).
    fn fitted(&self, s: &State, plan: &Plan, budget: u64) -> Option<Plan> {
        if budget >= plan.budget {
            return None;
        }
        let smaller = plan_within(&s.gpu, &self.sizes, budget).ok();
        if let Some(p) = &smaller {
            tracing::debug!(budget, plan = %p.describe(&self.sizes), "less device memory free than planned");
        }
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
        self.run_planned(plan, shape, &own, |s, pl| {
            let kept = x.lock().unwrap_or_else(|p| p.into_inner()).take();
            let x = match kept {
                Some(x) => x,
                None => s.gpu.upload_new(bytes(aux))?,
            };
            s.aux_planned(pl, q, x)
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
        self.run_planned(plan, Some(shape), &|| 0, |s, pl| {
            let input = s.gpu.upload_new(bytes(input))?;
            if pl.keep_assignment {
                let x = s.gpu.upload_new(bytes(aux))?;
                let fill = planned::Assignment::Kept(&x);
                let sum = s.h_shaped_planned(pl, &h, shape, &input, fill, n, m)?;
                Ok((sum, Some(x)))
            } else {
                let fill = planned::Assignment::Reload(aux);
                let sum = s.h_shaped_planned(pl, &h, shape, &input, fill, n, m)?;
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
        let joint = self
            .set
            .shared
            .sums_shaped(shape, &w.input, &h, &aux_points(&w, &p));
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
            let sum = self.run_planned(plan, None, &|| 0, |s, pl| s.h_planned(pl, &h, &fill, n, m));
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
        Some(match &self.plan {
            Ok(p) if lowered < p.budget => format!(
                "{}; since a proof ran out of device memory, proofs plan within {:.1} GiB",
                p.describe(&self.sizes),
                lowered as f64 / (1u64 << 30) as f64
            ),
            Ok(p) => p.describe(&self.sizes),
            Err(e) => e.to_string(),
        })
    }

    fn host_bytes(&self) -> u64 {
        match self.planned() {
            // The parked cosets, and the block the assignment is staged in.
            Ok(Some(p)) => p.parked_bytes(&self.sizes) + self.sizes.aux * FR_BYTES as u64,
            _ => 0,
        }
    }
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
