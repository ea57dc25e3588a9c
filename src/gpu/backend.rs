//! [`GpuBackend`]: the prover's NTT/MSM boundary on one CUDA device.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Mutex, MutexGuard};

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ff::Field;
use group::Group;

use super::device::{DevBuf, DeviceInfo, Gpu};
use super::msm::{self, Curve};
use super::ntt::{scalar_bytes, scalar_bytes_mut, Domain, FR_BYTES};
use super::{GpuError, GpuOptions};
use crate::prover::{count_set, AuxQueries, AuxSums, Backend, ProverError};

/// Identifies a host base slice: address, length, group and a fingerprint of its first and last
/// points, so that a freed and reused address with other points is not mistaken for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct BaseKey {
    addr: usize,
    len: usize,
    curve: Curve,
    print: u64,
}

impl BaseKey {
    fn new(bytes: &[u8], n: usize, curve: Curve) -> Self {
        let pb = curve.affine_bytes();
        let mut h = std::collections::hash_map::DefaultHasher::new();
        let k = n.min(2) * pb;
        bytes[..k].hash(&mut h);
        bytes[bytes.len() - k..].hash(&mut h);
        BaseKey {
            addr: bytes.as_ptr() as usize,
            len: n,
            curve,
            print: h.finish(),
        }
    }
}

pub(super) struct State {
    pub(super) gpu: Gpu,
    /// Parameter bases resident on the device (they live as long as the process).
    bases: HashMap<BaseKey, DevBuf>,
    /// NTT tables per log2 domain size.
    domains: HashMap<u32, Domain>,
}

/// NTTs and MSMs on one CUDA device. Calls are serialised on the device (one stream).
pub struct GpuBackend {
    info: DeviceInfo,
    state: Mutex<State>,
}

/// Device memory an MSM over n scalars from a device buffer takes besides its scalars, as an
/// estimate for [`GpuBackend::aux_msms_gpu`]'s fit check, per scalar: the 0 / 1 / other
/// index lists (8 bytes), the signed digits and their bucket-sorted list (4 bytes each per
/// window, up to 16 windows) and the chunk sums of the bucket phase (two XYZZ points per 128
/// list entries, about 40 bytes in G1); and once: the buckets (1.3 GB for G1 at 20-bit
/// windows). Read from `msm.rs`'s allocations, not measured.
const AUX_WORK_PER_SCALAR: usize = 8 + 2 * 4 * 16 + 40;
const AUX_WORK_FIXED: usize = 2 << 30;

/// The quotient's domain for `n` constraints: the next power of two, at least 2.
fn domain_size(n: usize) -> usize {
    n.next_power_of_two().max(2)
}

fn bytes_of<T>(v: &[T]) -> &[u8] {
    // SAFETY: only used for blstrs affine points (repr(transparent) over blst's affine structs:
    // plain u64 limbs, no padding); any byte view of initialised memory is valid.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

impl GpuBackend {
    /// Opens the CUDA device `options` name and loads the kernels; the NTTs and MSMs then run
    /// as `options` say.
    pub fn new(options: &GpuOptions) -> Result<Self, GpuError> {
        let gpu = Gpu::open(options)?;
        let info = gpu.info.clone();
        Ok(GpuBackend {
            info,
            state: Mutex::new(State {
                gpu,
                bases: HashMap::new(),
                domains: HashMap::new(),
            }),
        })
    }

    /// The device this backend runs on.
    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    pub(super) fn lock(&self) -> Result<MutexGuard<'_, State>, GpuError> {
        self.state.lock().map_err(|_| GpuError::Cuda {
            context: "lock",
            message: "a previous GPU call panicked".into(),
        })
    }

    /// Drops the resident bases (and NTT tables), freeing their device memory.
    pub fn clear_cache(&self) -> Result<(), GpuError> {
        let mut s = self.lock()?;
        s.bases.clear();
        s.domains.clear();
        Ok(())
    }

    fn domain(s: &mut State, lg: u32) -> Result<&Domain, GpuError> {
        if !s.domains.contains_key(&lg) {
            let d = Domain::new(&s.gpu, lg)?;
            s.domains.insert(lg, d);
        }
        s.domains
            .get(&lg)
            .ok_or_else(|| GpuError::Input("domain cache".into()))
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
        Self::domain(&mut s, lg)?;
        let s = &*s;
        let d = s
            .domains
            .get(&lg)
            .ok_or_else(|| GpuError::Input("domain cache".into()))?;
        let data = s.gpu.upload_new(scalar_bytes(values))?;
        let mut out = s.gpu.alloc(n * FR_BYTES)?;
        d.transform(&s.gpu, &data, &mut out, inverse, coset)?;
        s.gpu.download(&out, scalar_bytes_mut(values))
    }

    fn quotient_gpu(
        &self,
        a: Vec<Scalar>,
        b: Vec<Scalar>,
        c: Vec<Scalar>,
    ) -> Result<Vec<Scalar>, GpuError> {
        // The inputs stay on the host until the transform succeeds, so a retry after freeing the
        // resident bases and NTT tables (out of memory beside them) needs no copies.
        match self.quotient_once(&a, &b, &c) {
            Err(e) if e.is_out_of_memory() => {
                Self::evict_except(&mut *self.lock()?, None);
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
        let (h, m) = Self::quotient_on_device(&mut s, a, b, c)?;
        let mut out = vec![Scalar::ZERO; m - 1];
        s.gpu.download(&h, scalar_bytes_mut(&mut out))?;
        Ok(out)
    }

    /// The quotient's m coefficients (m the domain size; the top one is 0 when the constraints
    /// hold) in a device buffer, and m.
    fn quotient_on_device(
        s: &mut State,
        a: &[Scalar],
        b: &[Scalar],
        c: &[Scalar],
    ) -> Result<(DevBuf, usize), GpuError> {
        let n = a.len();
        if b.len() != n || c.len() != n {
            return Err(GpuError::Input("A, B and C have different lengths".into()));
        }
        let m = domain_size(n);
        let lg = m.trailing_zeros();
        Self::domain(s, lg)?;
        let d = s
            .domains
            .get(&lg)
            .ok_or_else(|| GpuError::Input("domain cache".into()))?;
        Ok((d.quotient_from_host(&s.gpu, a, b, c)?, m))
    }

    /// Σ h_i·bases[i] for the quotient H of `a`, `b`, `c`, with H left on the device between
    /// the transforms and the MSM: no download and upload of its m·32 bytes (8.6 GB of PCIe
    /// traffic for a 2^27 domain). `bases` are the m − 1 points of the H query.
    pub fn quotient_h_query_gpu(
        &self,
        a: Vec<Scalar>,
        b: Vec<Scalar>,
        c: Vec<Scalar>,
        bases: &[G1Affine],
    ) -> Result<G1Projective, GpuError> {
        let m = domain_size(a.len());
        if bases.len() != m - 1 {
            return Err(GpuError::Input(format!(
                "{} H bases for a domain of {m}",
                bases.len()
            )));
        }
        let base_bytes = bytes_of(bases);
        let key = BaseKey::new(base_bytes, bases.len(), Curve::G1);
        let run = |s: &mut State| -> Result<msm::MsmParts, GpuError> {
            let (h, _) = Self::quotient_on_device(s, &a, &b, &c)?;
            msm::msm_device(&s.gpu, Curve::G1, Self::resident(s, &key)?, m - 1, h)
        };
        let mut s = self.lock()?;
        Self::ensure_bases(&mut s, key, base_bytes)?;
        let parts = match run(&mut s) {
            // The inputs are still on the host: after freeing the other resident bases and the
            // NTT tables, once more (as in the separate quotient and MSM).
            Err(e) if e.is_out_of_memory() && Self::evict_except(&mut s, Some(&key)) => run(&mut s),
            r => r,
        }?;
        Ok(msm::finish_g1(&parts))
    }

    fn msm_parts(
        &self,
        curve: Curve,
        base_bytes: &[u8],
        n: usize,
        scalars: &[Scalar],
    ) -> Result<msm::MsmParts, GpuError> {
        if scalars.len() != n {
            return Err(GpuError::Input(format!(
                "{n} bases for {} scalars",
                scalars.len()
            )));
        }
        let mut s = self.lock()?;
        let key = BaseKey::new(base_bytes, n, curve);
        Self::ensure_bases(&mut s, key, base_bytes)?;
        let run = |s: &State| -> Result<msm::MsmParts, GpuError> {
            msm::msm(
                &s.gpu,
                curve,
                Self::resident(s, &key)?,
                n,
                scalar_bytes(scalars),
            )
        };
        match run(&s) {
            Err(e) if e.is_out_of_memory() && Self::evict_except(&mut s, Some(&key)) => {
                // The working buffers did not fit beside the resident bases of other slices
                // (parameters of an earlier proof, say) or the NTT tables: keep only this
                // slice's bases and retry once.
                run(&s)
            }
            r => r,
        }
    }

    /// Makes the bases of `key` resident (uploaded once, kept for later proofs); where the
    /// upload runs out of memory, the other resident bases and the NTT tables go first and it
    /// is tried once more.
    fn ensure_bases(s: &mut State, key: BaseKey, bytes: &[u8]) -> Result<(), GpuError> {
        if s.bases.contains_key(&key) {
            return Ok(());
        }
        let buf = match s.gpu.upload_new(bytes) {
            Err(e) if e.is_out_of_memory() && Self::evict_except(s, None) => {
                s.gpu.upload_new(bytes)?
            }
            r => r?,
        };
        s.bases.insert(key, buf);
        Ok(())
    }

    /// The resident bases of `key` (see [`GpuBackend::ensure_bases`]).
    fn resident<'a>(s: &'a State, key: &BaseKey) -> Result<&'a DevBuf, GpuError> {
        s.bases
            .get(key)
            .ok_or_else(|| GpuError::Input("base cache".into()))
    }

    /// Drops every resident base slice but `keep` and every NTT domain's tables (a 2^27
    /// domain's twiddle table is 2 GiB; the tables are rebuilt in milliseconds when next
    /// needed). Returns whether anything was freed.
    fn evict_except(s: &mut State, keep: Option<&BaseKey>) -> bool {
        let before = s.bases.len() + s.domains.len();
        s.bases.retain(|k, _| Some(k) == keep);
        s.domains.clear();
        s.bases.len() + s.domains.len() < before
    }

    /// The four aux MSMs with the assignment uploaded once ([`Backend::aux_msms`]): the A and
    /// B queries' scalars are selected on the device ([`msm::compact`]) before the L query's
    /// MSM runs on the uploaded copy (an MSM's front end rewrites its scalars in place, so the
    /// B selection is copied once, one for each group). For a 32 GiB partition that sends
    /// 4.2 GB over PCIe instead of about 10 GB, and the host makes no copies of the
    /// selections. All four base slices must be resident at once: where the free memory
    /// cannot hold the missing ones and the working buffers (estimated, see
    /// [`AUX_WORK_PER_SCALAR`]) this returns the out-of-memory error at once, touching nothing,
    /// and the caller runs the queries one by one (which evicts and uploads per query as
    /// needed); an out-of-memory error later on is returned the same way.
    pub fn aux_msms_gpu(&self, q: &AuxQueries<'_>) -> Result<AuxSums, GpuError> {
        let n = q.aux.len();
        if q.l.len() != n || q.a_density.len() != n || q.b_density.len() != n {
            return Err(GpuError::Input(format!(
                "{n} aux values for {} L points and densities of {} and {}",
                q.l.len(),
                q.a_density.len(),
                q.b_density.len()
            )));
        }
        if q.b_g1.len() != q.b_g2.len() {
            return Err(GpuError::Input(format!(
                "B query of {} points in G1 and {} in G2",
                q.b_g1.len(),
                q.b_g2.len()
            )));
        }
        let nb = q.b_g1.len();
        let (a_set, b_set) = (count_set(q.a_density), count_set(q.b_density));
        if a_set != q.a.len() || b_set != nb {
            return Err(GpuError::Input(format!(
                "A query of {} points for {a_set} flags, B of {nb} for {b_set}",
                q.a.len()
            )));
        }
        if n == 0 {
            return Ok(AuxSums {
                l: G1Projective::identity(),
                a: G1Projective::identity(),
                b_g1: G1Projective::identity(),
                b_g2: G2Projective::identity(),
            });
        }
        let queries = [
            (bytes_of(q.l), q.l.len(), Curve::G1),
            (bytes_of(q.a), q.a.len(), Curve::G1),
            (bytes_of(q.b_g1), q.b_g1.len(), Curve::G1),
            (bytes_of(q.b_g2), q.b_g2.len(), Curve::G2),
        ];
        let keys = queries.map(|(bytes, len, curve)| BaseKey::new(bytes, len, curve));
        let mut s = self.lock()?;
        let missing: usize = queries
            .iter()
            .zip(&keys)
            .filter(|(_, key)| !s.bases.contains_key(key))
            .map(|((bytes, _, _), _)| bytes.len())
            .sum();
        let work = (n + 2 * nb) * FR_BYTES + n * AUX_WORK_PER_SCALAR + AUX_WORK_FIXED;
        let (free, _) = s.gpu.mem_info()?;
        if missing + work > free {
            return Err(GpuError::OutOfMemory(format!(
                "the aux MSMs together need about {} MiB more, {} MiB free",
                (missing + work) >> 20,
                free >> 20
            )));
        }
        for ((bytes, len, _), key) in queries.iter().zip(&keys) {
            if *len > 0 {
                Self::ensure_bases(&mut s, *key, bytes)?;
            }
        }
        // Making room for one slice may have evicted another: then they do not fit together.
        if queries
            .iter()
            .zip(&keys)
            .any(|((_, len, _), key)| *len > 0 && !s.bases.contains_key(key))
        {
            return Err(GpuError::OutOfMemory(
                "the L, A and B bases do not fit on the device together".into(),
            ));
        }
        let gpu = &s.gpu;
        // Query i's MSM over `scalars` (consumed: rewritten, then freed), None when empty.
        let sum = |i: usize, scalars: DevBuf| -> Result<Option<msm::MsmParts>, GpuError> {
            let (_, len, curve) = queries[i];
            if len == 0 {
                return Ok(None);
            }
            msm::msm_device(gpu, curve, Self::resident(&s, &keys[i])?, len, scalars).map(Some)
        };
        let g1 =
            |p: Option<msm::MsmParts>| p.map_or(G1Projective::identity(), |p| msm::finish_g1(&p));
        // A first, so that its selection (as large as the assignment) is freed before the
        // others are made; the L query last of those reading `aux`.
        let aux = gpu.upload_new(scalar_bytes(q.aux))?;
        let a = sum(1, msm::compact(gpu, &aux, q.a_density, q.a.len())?)?;
        let b1 = msm::compact(gpu, &aux, q.b_density, nb)?;
        let mut b2 = gpu.alloc(nb.max(1) * FR_BYTES)?;
        if nb > 0 {
            gpu.copy(&b1, &mut b2, nb * FR_BYTES)?;
        }
        let l = sum(0, aux)?;
        let b1 = sum(2, b1)?;
        let b2 = sum(3, b2)?;
        Ok(AuxSums {
            l: g1(l),
            a: g1(a),
            b_g1: g1(b1),
            b_g2: b2.map_or(G2Projective::identity(), |p| msm::finish_g2(&p)),
        })
    }

    /// Σ scalars[i]·bases[i] in G1 on the GPU.
    pub fn msm_g1_gpu(
        &self,
        bases: &[G1Affine],
        scalars: &[Scalar],
    ) -> Result<G1Projective, GpuError> {
        if bases.is_empty() && scalars.is_empty() {
            return Ok(G1Projective::identity());
        }
        let parts = self.msm_parts(Curve::G1, bytes_of(bases), bases.len(), scalars)?;
        Ok(msm::finish_g1(&parts))
    }

    /// Σ scalars[i]·bases[i] in G2 on the GPU.
    pub fn msm_g2_gpu(
        &self,
        bases: &[G2Affine],
        scalars: &[Scalar],
    ) -> Result<G2Projective, GpuError> {
        if bases.is_empty() && scalars.is_empty() {
            return Ok(G2Projective::identity());
        }
        let parts = self.msm_parts(Curve::G2, bytes_of(bases), bases.len(), scalars)?;
        Ok(msm::finish_g2(&parts))
    }
}

impl Backend for GpuBackend {
    fn name(&self) -> String {
        format!("cuda:{} {}", self.info.ordinal, self.info.name)
    }

    fn quotient(
        &self,
        a: Vec<Scalar>,
        b: Vec<Scalar>,
        c: Vec<Scalar>,
    ) -> Result<Vec<Scalar>, ProverError> {
        Ok(self.quotient_gpu(a, b, c)?)
    }

    fn quotient_h_query(
        &self,
        a: Vec<Scalar>,
        b: Vec<Scalar>,
        c: Vec<Scalar>,
        bases: &[G1Affine],
    ) -> Result<G1Projective, ProverError> {
        Ok(self.quotient_h_query_gpu(a, b, c, bases)?)
    }

    fn fuses_h_query(&self) -> bool {
        true
    }

    fn aux_msms(&self, queries: &AuxQueries<'_>) -> Option<Result<AuxSums, ProverError>> {
        match self.aux_msms_gpu(queries) {
            Err(e) if e.is_out_of_memory() => {
                // Nothing was lost: the prover sends the queries one at a time instead, each
                // with room for its own working buffers.
                tracing::debug!(error = %e, "aux MSMs one by one");
                None
            }
            r => Some(r.map_err(ProverError::from)),
        }
    }

    fn msm_g1(&self, bases: &[G1Affine], scalars: &[Scalar]) -> Result<G1Projective, ProverError> {
        Ok(self.msm_g1_gpu(bases, scalars)?)
    }

    fn msm_g2(&self, bases: &[G2Affine], scalars: &[Scalar]) -> Result<G2Projective, ProverError> {
        Ok(self.msm_g2_gpu(bases, scalars)?)
    }
}
