//! What the device holds between calls, owned by [`State`]: the resident points of every
//! prepared set (with the counts their handles read and their claims on the host copies), the
//! recorded shapes' device and streamed forms, the NTT tables and the parked cosets' host
//! vectors. Every cache of the device is here, so that one place decides what stays and what
//! goes when memory runs short; the device calls ([`super::sums`], [`super::planned`]) reach
//! it only through these methods, on a turn ([`super::turns`]).

use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use blstrs::{G1Affine, G2Affine, Scalar};
use cudarc::driver::PinnedHostSlice;

use super::critical::Critical;
use super::host::{covers, Host, HostBytes};
use crate::gpu::bytes::bytes;
use crate::gpu::device::{DevBuf, Gpu};
use crate::gpu::msm::Curve;
use crate::gpu::ntt::{Domain, FR_BYTES};
use crate::gpu::plan::{self, Plan};
use crate::gpu::r1cs::{self, DeviceShape, StreamedShape};
use crate::gpu::GpuError;
use crate::prover::urgency::is_urgent;
use crate::srs::{HostPoints, Srs, Want};
use crate::synth::R1cs;

/// A query of a parameter set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Query {
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
pub(super) struct SlotKey {
    set: u64,
    pub(super) query: Query,
    start: usize,
    end: usize,
}

/// The points of one MSM: the buffer that holds them on the device, or will once
/// [`State::ensure`] uploaded them from their host copy.
#[derive(Clone, Copy)]
pub(super) struct Points<'a> {
    pub(super) key: SlotKey,
    host: Host<'a>,
    pub(super) n: usize,
    pub(super) curve: Curve,
}

impl<'a> Points<'a> {
    pub(super) fn g1(
        set: u64,
        query: Query,
        all: &'a [G1Affine],
        range: Range<usize>,
    ) -> Result<Self, GpuError> {
        Self::new(set, query, all, range, Curve::G1)
    }

    pub(super) fn g2(
        set: u64,
        query: Query,
        all: &'a [G2Affine],
        range: Range<usize>,
    ) -> Result<Self, GpuError> {
        Self::new(set, query, all, range, Curve::G2)
    }

    /// A range of a parameter set's G1 query (its host copy read only where an upload
    /// needs it).
    pub(super) fn of_g1(
        set: u64,
        query: Query,
        all: &'a HostPoints<G1Affine>,
        range: Range<usize>,
    ) -> Result<Self, GpuError> {
        Self::of_query(set, query, Host::G1(all), all.len(), range, Curve::G1)
    }

    /// The same in G2.
    pub(super) fn of_g2(
        set: u64,
        query: Query,
        all: &'a HostPoints<G2Affine>,
        range: Range<usize>,
    ) -> Result<Self, GpuError> {
        Self::of_query(set, query, Host::G2(all), all.len(), range, Curve::G2)
    }

    fn new<T: crate::gpu::bytes::Plain>(
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
    pub(super) fn byte_len(&self) -> usize {
        self.n * self.curve.affine_bytes()
    }

    /// The points' host bytes (a released query's read again from its file).
    pub(super) fn host_bytes(&self) -> Result<HostBytes<'a>, GpuError> {
        self.host.bytes(self.key.start..self.key.end)
    }
}

fn out_of(range: &Range<usize>, query: Query, len: usize) -> GpuError {
    GpuError::Input(format!("points {range:?} of a {query:?} query of {len}"))
}

/// The device and what it holds between calls (see the module's doc).
pub(in crate::gpu) struct State {
    pub(in crate::gpu) gpu: Gpu,
    /// Points resident on the device, per prepared set and query range.
    bases: HashMap<SlotKey, DevBuf>,
    /// Bytes of `bases` per set, shared with the set's handle, which reads them without
    /// waiting for the device (Status).
    resident: HashMap<u64, Arc<AtomicU64>>,
    /// NTT tables per log2 domain size.
    domains: HashMap<u32, Arc<Domain>>,
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
    /// What urgent callers use here, which other callers' plans leave alone.
    critical: Critical,
}

/// The quotient's domain for `n` constraints: the next power of two, at least 2.
pub(super) fn domain_size(n: usize) -> usize {
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

/// A, B and C of a shape evaluated on the device ([`State::evaluate_shape`]).
pub(super) struct Evaluated {
    /// The domain whose transforms take them on (shared: one evicted from the state meanwhile
    /// lives on until they are done).
    pub(super) domain: Arc<Domain>,
    /// A, B and C in the first three (a whole domain long each), scratch in the fourth.
    pub(super) bufs: [DevBuf; 4],
    /// The assignment's copy, where kept.
    pub(super) aux: Option<DevBuf>,
}

impl State {
    /// The state of a device just opened: nothing resident yet.
    pub(super) fn new(gpu: Gpu) -> Self {
        State {
            gpu,
            bases: HashMap::new(),
            resident: HashMap::new(),
            domains: HashMap::new(),
            shapes: Vec::new(),
            streamed: Vec::new(),
            park: None,
            next_set: 0,
            wants: HashMap::new(),
            critical: Critical::default(),
        }
    }

    /// Makes the points of `p` resident (kept until their set is dropped or evicted); where
    /// the upload runs out of memory, the other resident points and the NTT tables go first
    /// and it is tried once more.
    pub(super) fn ensure(&mut self, p: &Points<'_>) -> Result<(), GpuError> {
        // Noted whether or not they are resident already: a set's points may have gone up
        // when it was prepared, before any urgent caller asked for them.
        if is_urgent() {
            self.critical.note_set(p.key.set);
        }
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
    pub(super) fn want_host_copies(&mut self, set: u64, srs: &Srs) {
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
    pub(super) fn resident(&self, key: &SlotKey) -> Result<&DevBuf, GpuError> {
        self.bases
            .get(key)
            .ok_or_else(|| GpuError::Input("points not resident".into()))
    }

    /// Device bytes a proof's plan frees or counts as its own: every set's resident points,
    /// the NTT tables and the shapes' device copies (not what a proof holds outside the state,
    /// such as an assignment kept between its two turns), but for a caller that is not urgent
    /// none of what urgent callers use ([`Critical`]): its plan leaves that alone.
    pub(super) fn reclaimable(&self) -> u64 {
        let urgent = is_urgent();
        let c = &self.critical;
        let points: u64 = (self.bases.iter())
            .filter(|(k, _)| !c.keeps_set(k.set, urgent))
            .map(|(_, b)| b.len() as u64)
            .sum();
        let tables: u64 = (self.domains.iter())
            .filter(|(lg, _)| !c.keeps_domain(**lg, urgent))
            .map(|(_, d)| d.device_bytes())
            .sum();
        let shapes: u64 = (self.shapes.iter())
            .filter(|(host, _)| !c.keeps_shape(host.as_ptr() as usize, urgent))
            .map(|(_, copy)| copy.device_bytes())
            .sum();
        points + tables + shapes
    }

    /// Device bytes the state holds: every resident point range, NTT table and shape copy
    /// (what an urgent turn's uploads leave resident, see [`super::critical::turn_work`]).
    pub(super) fn kept_bytes(&self) -> u64 {
        let points: u64 = self.bases.values().map(|b| b.len() as u64).sum();
        let tables: u64 = self.domains.values().map(|d| d.device_bytes()).sum();
        let shapes: u64 = self.shapes.iter().map(|(_, c)| c.device_bytes()).sum();
        points + tables + shapes
    }

    /// Bytes the caller's plan holds back for urgent callers' working buffers
    /// ([`Critical::reserve`]).
    pub(super) fn critical_reserve(&self) -> u64 {
        self.critical.reserve(is_urgent())
    }

    /// An urgent turn ends having used `work` bytes beyond what it left held.
    pub(super) fn note_critical_work(&mut self, work: u64) {
        self.critical.note_work(work);
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

    /// Bytes available for a call of `own`'s set that needs `need`: where the device has less,
    /// other sets' resident points go first, the set holding most first, until it has enough
    /// or none is left. A memory plan counts those points as reclaimable (an eviction uploads
    /// them again when their set's next proof needs them), so a call the plan let through
    /// must not fail for them; this set's own points stay.
    pub(super) fn room_beside_other_sets(
        &mut self,
        own: &SlotKey,
        need: usize,
    ) -> Result<usize, GpuError> {
        let mut available = self.gpu.available()?;
        while available < need {
            let Some(set) = self.largest_other_set(own.set) else {
                break;
            };
            self.drop_bases(|k| k.set == set);
            self.gpu.settle()?;
            available = self.gpu.available()?;
        }
        Ok(available)
    }

    /// The set other than `own` whose resident points take the most device memory.
    fn largest_other_set(&self, own: u64) -> Option<u64> {
        let mut bytes: HashMap<u64, usize> = HashMap::new();
        for (key, buf) in self.bases.iter().filter(|(k, _)| k.set != own) {
            *bytes.entry(key.set).or_default() += buf.len();
        }
        bytes
            .into_iter()
            .max_by_key(|&(_, b)| b)
            .map(|(set, _)| set)
    }

    /// Drops every resident point range but `keep`, every NTT domain's tables (a 2^27
    /// domain's twiddle table is 2 GiB; the tables are rebuilt in milliseconds when next
    /// needed) and every shape's copy, except, for a caller that is not urgent, those urgent
    /// callers use ([`Critical`]: a PoRep proof out of memory on a full card evicted a
    /// WinningPoSt's points, which its next proof then waited to upload). Returns whether
    /// anything was freed.
    pub(super) fn evict_except(&mut self, keep: Option<&SlotKey>) -> bool {
        let (urgent, c) = (is_urgent(), self.critical.clone());
        let held = self.domains.len() + self.shapes.len();
        self.domains.retain(|l, _| c.keeps_domain(*l, urgent));
        self.shapes.retain(|(host, _)| {
            host.strong_count() > 0 && c.keeps_shape(host.as_ptr() as usize, urgent)
        });
        let tables = held - (self.domains.len() + self.shapes.len());
        self.drop_bases(|k| Some(k) != keep && !c.keeps_set(k.set, urgent)) + tables > 0
    }

    /// Copies `shape` to the device unless it is there (dropping the copies of shapes whose
    /// host shape is gone); where that runs out of memory, the other resident points, the
    /// NTT tables and the other shapes go first and it is tried once more.
    pub(super) fn ensure_shape(
        &mut self,
        shape: &Arc<R1cs>,
        keep: &SlotKey,
    ) -> Result<(), GpuError> {
        self.shapes.retain(|(host, _)| host.strong_count() > 0);
        if is_urgent() {
            self.critical.note_shape(Arc::as_ptr(shape) as usize);
        }
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
    pub(super) fn quotient_from_shape(
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
    pub(super) fn quotient_of_shape(
        &mut self,
        shape: &Arc<R1cs>,
        input: DevBuf,
        aux: DevBuf,
        keep_aux: bool,
    ) -> Result<(DevBuf, Option<DevBuf>), GpuError> {
        let e = self.evaluate_shape(shape, input, aux, keep_aux)?;
        let h = e
            .domain
            .quotient_from_device(&self.gpu, e.bufs, shape.num_constraints())?;
        Ok((h, e.aux))
    }

    /// The first step of [`State::quotient_of_shape`]: A, B and C evaluated into the first
    /// three of the quotient's four buffers, with the domain whose transforms take them on
    /// (shared, so that the caller may let the device go between the transforms: a domain
    /// evicted meanwhile lives on until they are done).
    pub(super) fn evaluate_shape(
        &mut self,
        shape: &Arc<R1cs>,
        input: DevBuf,
        aux: DevBuf,
        keep_aux: bool,
    ) -> Result<Evaluated, GpuError> {
        let m = domain_size(shape.num_constraints());
        let d = self.domain(m.trailing_zeros())?;
        let Some(copy) = self.shape(shape) else {
            return Err(GpuError::Input("shape not resident".into()));
        };
        let bufs = evaluate(&self.gpu, copy, m, &input, &aux)?;
        drop(input);
        Ok(Evaluated {
            domain: d,
            bufs,
            aux: keep_aux.then_some(aux),
        })
    }

    pub(super) fn domain(&mut self, lg: u32) -> Result<Arc<Domain>, GpuError> {
        if is_urgent() {
            self.critical.note_domain(lg);
        }
        if let Some(d) = self.domains.get(&lg) {
            return Ok(Arc::clone(d));
        }
        let d = Arc::new(Domain::new(&self.gpu, lg)?);
        self.domains.insert(lg, Arc::clone(&d));
        Ok(d)
    }

    /// The quotient's m coefficients (m the domain size; the top one is 0 when the constraints
    /// hold) in a device buffer, and m.
    pub(super) fn quotient_on_device(
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
        let d = self.domain(m.trailing_zeros())?;
        Ok((d.quotient_from_host(&self.gpu, a, b, c)?, m))
    }

    /// A new set's id, and the count of its resident bytes that its handle reads.
    pub(super) fn open_set(&mut self) -> (u64, Arc<AtomicU64>) {
        let id = self.next_set;
        self.next_set += 1;
        let bytes = Arc::new(AtomicU64::new(0));
        self.resident.insert(id, bytes.clone());
        (id, bytes)
    }

    /// Frees the points of set `id` and forgets the set (its handle is dropped).
    pub(super) fn close_set(&mut self, id: u64) {
        // The points are freed in the device's context whichever thread drops the set.
        let _ = self.gpu.bind();
        self.drop_bases(|k| k.set == id);
        self.resident.remove(&id);
        self.critical.forget_set(id);
        self.wants.retain(|(set, _), _| *set != id);
        // Freed memory returns to the driver at the next synchronization (CUDA's stream-ordered
        // allocator): make it visible at once. A failure here means the context has failed,
        // which the next call reports.
        let _ = self.gpu.sync();
    }

    /// Whether the points of `key` are resident.
    pub(super) fn is_resident(&self, key: &SlotKey) -> bool {
        self.bases.contains_key(key)
    }

    /// The NTT tables of the log2 domain size `lg`, if they are built ([`State::domain`]
    /// builds them).
    pub(super) fn cached_domain(&self, lg: u32) -> Option<&Domain> {
        self.domains.get(&lg).map(Arc::as_ref)
    }

    /// Drops the NTT tables of the log2 domain size `lg`.
    pub(super) fn drop_domain(&mut self, lg: u32) {
        self.domains.remove(&lg);
    }

    /// Frees what the plan of set `set` does not keep beside its proofs: other sets' points and
    /// this set's streamed ones, the NTT tables unless the plan keeps them (those of domain
    /// `lg` only), the device copies of shapes unless the plan keeps `shape`'s, and the
    /// streamed shapes nobody else holds any more; but a caller that is not urgent leaves
    /// what urgent callers use ([`Critical`]), which its plan's budget counts as held
    /// ([`State::reclaimable`]).
    pub(super) fn make_room(&mut self, set: u64, plan: &Plan, lg: u32, shape: Option<&Arc<R1cs>>) {
        let (urgent, c) = (is_urgent(), self.critical.clone());
        self.drop_bases(|k| !kept(plan, set, k) && !c.keeps_set(k.set, urgent));
        (self.domains).retain(|l, _| (plan.keep_tables && *l == lg) || c.keeps_domain(*l, urgent));
        let critical = |host: &Weak<R1cs>| {
            host.strong_count() > 0 && c.keeps_shape(host.as_ptr() as usize, urgent)
        };
        match (plan.shape_resident, shape) {
            (false, _) => self.shapes.retain(|(host, _)| critical(host)),
            (true, Some(s)) => self
                .shapes
                .retain(|(host, _)| std::ptr::eq(host.as_ptr(), Arc::as_ptr(s)) || critical(host)),
            // A proof from host evaluations: the shapes still recorded stay for the next
            // shaped proof.
            (true, None) => self.shapes.retain(|(host, _)| host.strong_count() > 0),
        }
        // A streamed shape holds its host shape (and its pages locked): it is the last holder
        // once the set that recorded it is gone.
        self.streamed.retain(|s| Arc::strong_count(s.shape()) > 1);
    }

    /// The streamed form of `shape` (checked and registered once).
    fn streamed_shape(&mut self, shape: &Arc<R1cs>) -> Result<usize, GpuError> {
        if let Some(i) = self
            .streamed
            .iter()
            .position(|s| Arc::ptr_eq(s.shape(), shape))
        {
            return Ok(i);
        }
        let s = StreamedShape::new(&self.gpu, shape.clone())?;
        tracing::debug!(
            registered = s.registered(),
            rows = s.rows(),
            "recorded shape streamed from host memory"
        );
        self.streamed.push(s);
        Ok(self.streamed.len() - 1)
    }

    /// The two page-locked host vectors of `bytes` each that parked cosets go to.
    pub(super) fn take_park(&mut self, bytes: usize) -> Result<[PinnedHostSlice<u8>; 2], GpuError> {
        match self.park.take() {
            Some(p) if p[0].len() >= bytes => Ok(p),
            old => {
                drop(old);
                Ok([self.gpu.pinned(bytes)?, self.gpu.pinned(bytes)?])
            }
        }
    }
    /// Keeps `park` (the vectors [`State::take_park`] gave, or none) for the next proof.
    pub(super) fn put_park(&mut self, park: Option<[PinnedHostSlice<u8>; 2]>) {
        self.park = park;
    }

    /// The device copy of `shape` (made resident by [`State::ensure_shape`]), taken out of the
    /// state with its host shape while a sum borrows the state; [`State::put_shape`] puts it
    /// back.
    pub(super) fn take_shape(
        &mut self,
        shape: &Arc<R1cs>,
    ) -> Result<(Weak<R1cs>, DeviceShape), GpuError> {
        let i = self
            .shapes
            .iter()
            .position(|(host, _)| std::ptr::eq(host.as_ptr(), Arc::as_ptr(shape)))
            .ok_or_else(|| GpuError::Input("shape not resident".into()))?;
        Ok(self.shapes.swap_remove(i))
    }

    /// Puts back what [`State::take_shape`] took, unless a caller that went first while it
    /// was out (at a pause) copied the same shape meanwhile: one copy is kept.
    pub(super) fn put_shape(&mut self, entry: (Weak<R1cs>, DeviceShape)) {
        if !self
            .shapes
            .iter()
            .any(|(host, _)| Weak::ptr_eq(host, &entry.0))
        {
            self.shapes.push(entry);
        }
    }

    /// The streamed form of `shape` ([`State::streamed_shape`]), taken out of the state while a
    /// sum borrows the state; [`State::put_streamed_shape`] puts it back.
    pub(super) fn take_streamed_shape(
        &mut self,
        shape: &Arc<R1cs>,
    ) -> Result<StreamedShape, GpuError> {
        let i = self.streamed_shape(shape)?;
        Ok(self.streamed.swap_remove(i))
    }

    /// Puts back what [`State::take_streamed_shape`] took, unless a caller that went first
    /// while it was out (at a pause) registered the same shape meanwhile: one form is kept.
    pub(super) fn put_streamed_shape(&mut self, streamed: StreamedShape) {
        let shape = streamed.shape();
        if !self.streamed.iter().any(|s| Arc::ptr_eq(s.shape(), shape)) {
            self.streamed.push(streamed);
        }
    }
}

/// The plan's name for a query of the parent module (none for the tests' named points).
fn plan_query(q: Query) -> Option<plan::Query> {
    match q {
        Query::H => Some(plan::Query::H),
        Query::L => Some(plan::Query::L),
        Query::A => Some(plan::Query::A),
        Query::BG1 => Some(plan::Query::BG1),
        Query::BG2 => Some(plan::Query::BG2),
        Query::Named(_) => None,
    }
}

/// Whether the plan keeps `key`'s points resident.
fn kept(plan: &Plan, set: u64, key: &SlotKey) -> bool {
    key.set == set && plan_query(key.query).is_some_and(|q| plan.resident.has(q))
}
