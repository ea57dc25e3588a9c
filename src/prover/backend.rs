//! The boundary between the Groth16 assembly and the number crunching.
//!
//! A [`Backend`] prepares a parameter set once ([`Backend::prepare`]: the GPU uploads its
//! points and keeps them as long as the handle lives) and the [`PreparedSrs`] handle then
//! answers the two sums a proof needs: the H query's ([`PreparedSrs::h_sum`]) and the witness
//! queries' ([`PreparedSrs::witness_sums`]). How a backend computes them — what it overlaps,
//! what it fuses, how it falls back when memory runs short — stays behind these two calls.
//! The assembly of the proof from the sums lives in [`super::groth16`] and is shared by all
//! backends. The CPU backend is [`super::cpu::CpuBackend`]; the GPU backend lives in
//! `crate::gpu`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use blstrs::{G1Projective, G2Projective, Scalar};
use rayon::prelude::*;

use super::{ProverError, Scalars};
use crate::srs::Srs;
use crate::synth::Density;

/// A way to compute Groth16 proofs: a CPU or a device.
///
/// Implementations must be usable from several threads at once; a backend that serialises
/// access to a device does so internally.
pub trait Backend: Send + Sync {
    /// A short human-readable name (`"cpu"`, `"cuda:0 NVIDIA H200"`), used in logs and timings.
    fn name(&self) -> String;

    /// Makes `srs` ready for proving on this backend: the GPU uploads its points (what does
    /// not fit now goes up when it is used). Dropping the handle (the last clone of it)
    /// releases whatever the backend holds for it; running proofs keep their own clone.
    fn prepare(&self, srs: Arc<Srs>) -> Result<Arc<dyn PreparedSrs>, ProverError>;

    /// Whether this is an accelerator (a GPU) rather than the host's CPUs: beside one, the
    /// CPU proves no critical partition (a WinningPoSt would wait far longer on it).
    fn is_accelerator(&self) -> bool {
        false
    }

    /// The device's PCI address as sysfs names it (`0000:1b:00.0`), whose NUMA node its
    /// workers are placed on; `None` for the CPU.
    fn pci_bus_id(&self) -> Option<String> {
        None
    }

    /// Makes page-locked host blocks this device uploads from directly, for the pool that
    /// synthesized partitions are copied into; `None`: the device reads host memory as it is
    /// (the CPU).
    fn host_allocator(&self) -> Option<super::HostAllocator> {
        None
    }

    /// The device's memory as the backend accounts for it, read without waiting for the
    /// device; `None` for the CPU.
    fn memory(&self) -> Option<DeviceMemory> {
        None
    }

    /// Starts the peak of [`Backend::memory`] again from what is held now.
    fn reset_memory_peak(&self) {}

    /// How often calls let the device go part way to urgent callers; `None` where the
    /// backend takes no turns (the CPU).
    fn pauses(&self) -> Option<DevicePauses> {
        None
    }
}

/// How often calls on a device let it go part way through to an urgent caller, by where
/// (counters since the backend was opened).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DevicePauses {
    /// After the assignment's upload.
    pub assignment: u64,
    /// Before one of the quotient's transforms to the coset.
    pub quotient: u64,
    /// Between the quotient and the H MSM.
    pub before_h: u64,
    /// Before or between the pieces of an MSM's bucket sums.
    pub msm_piece: u64,
    /// Before one of the aux MSMs.
    pub aux_msm: u64,
    /// Of all of these, the pauses made for an urgent proof announced but not yet on the
    /// device (its synthesis about to end), so that it found the device free.
    pub ahead: u64,
}

impl DevicePauses {
    /// Each counter with its label, for metrics.
    pub fn labelled(&self) -> [(&'static str, u64); 5] {
        [
            ("assignment", self.assignment),
            ("quotient", self.quotient),
            ("before_h", self.before_h),
            ("msm_piece", self.msm_piece),
            ("aux_msm", self.aux_msm),
        ]
    }
}

/// A device's memory as its backend accounts for it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceMemory {
    /// What the backend may hold at most (`gpu.memory_limit`, or what was free at start less a
    /// margin).
    pub budget: u64,
    /// Bytes held now.
    pub used: u64,
    /// The most held at once since the start or the last reset.
    pub peak: u64,
}

/// A parameter set prepared by a [`Backend`]: the two sums of a proof.
///
/// The prover checks every query's length against the circuit before it calls these, so an
/// implementation may rely on the lengths documented on [`Witness`].
pub trait PreparedSrs: Send + Sync {
    /// The parameter set.
    fn srs(&self) -> &Arc<Srs>;

    /// Σ h_i · H_i over the H query for the coefficients h of the quotient
    /// H(X) = (A(X)·B(X) − C(X)) / Z(X).
    ///
    /// `a`, `b` and `c` are the evaluations of the constraint polynomials over the constraint
    /// domain, all of the same length `n` (the number of constraints, inputs' `x·0 = 0`
    /// constraints included). The domain is the smallest power of two `m ≥ n` (at least 2);
    /// the vectors are zero-padded to `m`, and the H query has `m − 1` points. Called before
    /// [`PreparedSrs::witness_sums`]; the evaluations are consumed here, so that they never
    /// coexist with the witness MSMs' working copies.
    fn h_sum(&self, a: Scalars, b: Scalars, c: Scalars) -> Result<G1Projective, ProverError>;

    /// The sums over the witness: the L query over the aux assignment, and the A and B
    /// queries over the assignment values their densities select.
    fn witness_sums(&self, w: Witness) -> Result<WitnessSums, ProverError>;

    /// Both sums of one proof, as the prover asks for them: by default [`PreparedSrs::h_sum`],
    /// then [`PreparedSrs::witness_sums`]. A backend that can run the H query's MSM beside the
    /// witness MSMs overrides this (the CPU does), but still lets the quotient consume the
    /// evaluations before any witness MSM starts.
    fn sums(&self, a: Scalars, b: Scalars, c: Scalars, w: Witness) -> Result<Sums, ProverError> {
        let start = Instant::now();
        let h = self.h_sum(a, b, c)?;
        let h_done = start.elapsed();
        Ok(Sums {
            h,
            witness: self.witness_sums(w)?,
            h_done,
        })
    }

    /// Whether this backend evaluates a recorded shape's A, B and C itself
    /// ([`PreparedSrs::h_sum_shaped`]); otherwise the caller evaluates them on the host.
    fn evaluates_shapes(&self) -> bool {
        false
    }

    /// [`PreparedSrs::h_sum`] of a partition given by its circuit's recorded shape and its
    /// assignment (`input`, ONE first, and `aux`, of the shape's lengths): A, B and C are
    /// evaluated where the sum is computed (on a device: no host copy of them, and no upload).
    /// Called only where [`PreparedSrs::evaluates_shapes`].
    fn h_sum_shaped(
        &self,
        shape: &Arc<crate::synth::R1cs>,
        input: &[Scalar],
        aux: &[Scalar],
    ) -> Result<G1Projective, ProverError> {
        let _ = (shape, input, aux);
        Err(ProverError::Device(
            "this backend does not evaluate recorded shapes".into(),
        ))
    }

    /// Both sums of a proof given by its recorded shape and its witness (where
    /// [`PreparedSrs::evaluates_shapes`]): by default [`PreparedSrs::h_sum_shaped`], then
    /// [`PreparedSrs::witness_sums`]. A device overrides it to send the assignment over once
    /// for both.
    fn sums_shaped(
        &self,
        shape: &Arc<crate::synth::R1cs>,
        w: Witness,
    ) -> Result<Sums, ProverError> {
        let start = Instant::now();
        let h = self.h_sum_shaped(shape, &w.input, &w.aux)?;
        let h_done = start.elapsed();
        Ok(Sums {
            h,
            witness: self.witness_sums(w)?,
            h_done,
        })
    }

    /// Bytes of this set's points held on a device now (0 on the CPU), for Status. A device
    /// that ran short of memory may have dropped some of them; they go up again when used.
    fn device_bytes(&self) -> u64 {
        0
    }

    /// How this set's proofs use the device's memory (a device's plan, in a line), for logs
    /// and Status; `None` for the CPU.
    fn memory_plan(&self) -> Option<String> {
        None
    }

    /// Host bytes this backend holds for the set beside the parameters themselves (a device's
    /// page-locked vectors for the quotient's parked cosets), counted against the memory
    /// budget.
    fn host_bytes(&self) -> u64 {
        0
    }
}

/// The witness of one proof, as the witness MSMs need it. Owned, so that a backend can drop
/// each vector as soon as it is done with it (the aux assignment of a 32 GiB partition is
/// 4 GiB).
///
/// The prover has checked the lengths against the parameter set `srs`:
/// `srs.a` has `input.len()` points for the inputs, then one per set flag of
/// `a_aux_density`; `srs.b_g1` and `srs.b_g2` have `b_in` points for the inputs (the set
/// flags of `b_input_density`), then one per set flag of `b_aux_density`; `srs.l` has one point
/// per aux value, and both aux densities one flag per aux value.
pub struct Witness {
    /// The input part of the assignment (the constant one first).
    pub input: Vec<Scalar>,
    /// The aux part of the assignment (page-locked where the partition was pinned).
    pub aux: Scalars,
    /// Which aux variables the A query uses (a recorded shape's own, shared).
    pub a_aux_density: Density,
    /// Which inputs the B queries use.
    pub b_input_density: Density,
    /// Which aux variables the B queries use.
    pub b_aux_density: Density,
    /// The number of set flags of `b_input_density`: where the B queries' aux part starts.
    pub b_in: usize,
}

/// What [`PreparedSrs::sums`] returns.
#[derive(Clone, Copy, Debug)]
pub struct Sums {
    /// Σ h_i · H_i.
    pub h: G1Projective,
    /// The witness sums.
    pub witness: WitnessSums,
    /// How long the H sum took (by default), or the quotient alone (where the H query's MSM
    /// ran beside the witness MSMs): the time the prover reports as its quotient stage.
    pub h_done: Duration,
}

/// The sums of [`PreparedSrs::witness_sums`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WitnessSums {
    /// Σ aux_i · l_i.
    pub l: G1Projective,
    /// The A query over the inputs and the A-dense aux values.
    pub a: G1Projective,
    /// The B query in G1 over the B-dense inputs and aux values.
    pub b_g1: G1Projective,
    /// The same in G2.
    pub b_g2: G2Projective,
}

impl WitnessSums {
    /// Every sum the identity (no aux values).
    pub fn identity() -> Self {
        use group::Group;
        WitnessSums {
            l: G1Projective::identity(),
            a: G1Projective::identity(),
            b_g1: G1Projective::identity(),
            b_g2: G2Projective::identity(),
        }
    }
}

/// Selects `values[i]` where `density[i]` is set, in order: the scalars of a query that
/// uses only the variables its density marks. For a 32 GiB partition this copies up to 4 GiB,
/// so it runs in parallel, in two passes over chunks: count the flags of each chunk, then
/// copy each chunk's values to its own part of the output. (2^24 values at A's density on
/// the 2-core machine, in a standalone copy: one thread 229 ms, this 109 ms, rayon's
/// filter-collect 355 ms.)
pub fn dense(values: &[Scalar], density: &[bool]) -> Vec<Scalar> {
    const CHUNK: usize = 1 << 16;
    let n = values.len().min(density.len());
    let (values, density) = (&values[..n], &density[..n]);
    let counts: Vec<usize> = density
        .par_chunks(CHUNK)
        .map(|c| c.iter().filter(|&&f| f).count())
        .collect();
    let total = counts.iter().sum();
    let mut out: Vec<Scalar> = Vec::with_capacity(total);
    let mut rest = &mut out.spare_capacity_mut()[..total];
    let mut parts = Vec::with_capacity(counts.len());
    for &c in &counts {
        let (part, tail) = rest.split_at_mut(c);
        parts.push(part);
        rest = tail;
    }
    parts
        .into_par_iter()
        .zip(values.par_chunks(CHUNK).zip(density.par_chunks(CHUNK)))
        .for_each(|(part, (vs, ds))| {
            let selected = vs.iter().zip(ds).filter(|(_, &f)| f).map(|(v, _)| v);
            for (slot, v) in part.iter_mut().zip(selected) {
                slot.write(*v);
            }
        });
    // SAFETY: the first `total` elements are initialised: part k has exactly as many slots as
    // chunk k has set flags (counted from the same slice), and the loop above wrote each of
    // them with one of that chunk's selected values.
    unsafe { out.set_len(total) };
    out
}

/// Number of set flags of a density (in parallel: a 32 GiB partition's have 130M each).
pub fn count_set(density: &[bool]) -> usize {
    density
        .par_chunks(1 << 16)
        .map(|c| c.iter().filter(|&&d| d).count())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `dense` against the obvious sequential selection: empty, none, all, chunk borders,
    /// and a density longer or shorter than the values (the shorter one decides).
    #[test]
    fn dense_selects_in_order() {
        let v: Vec<Scalar> = (0..200_003u64).map(Scalar::from).collect();
        let patterns: [&dyn Fn(usize) -> bool; 4] =
            [&|_| false, &|_| true, &|i| i % 3 == 0, &|i| {
                (i * 2_654_435_761) % 1000 < 254
            }];
        for f in patterns {
            for (nv, nd) in [
                (0, 0),
                (1, 1),
                (65_536, 65_536),
                (200_003, 200_003),
                (70_000, 200_003),
                (200_003, 131_073),
            ] {
                let d: Vec<bool> = (0..nd).map(f).collect();
                let want: Vec<Scalar> = v[..nv]
                    .iter()
                    .zip(&d)
                    .filter(|(_, &b)| b)
                    .map(|(x, _)| *x)
                    .collect();
                assert_eq!(dense(&v[..nv], &d), want, "{nv} values, {nd} flags");
            }
        }
    }
}
