//! The boundary between the Groth16 assembly and the number crunching.
//!
//! A backend computes the quotient polynomial H and the multi-scalar multiplications; the
//! assembly of the proof from those results lives in [`super::groth16`] and is shared by all
//! backends. The CPU backend is [`super::cpu::CpuBackend`]; the GPU backend lives in
//! `crate::gpu`.

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};

use super::ProverError;

/// The NTT and MSM stages of a Groth16 prover.
///
/// Implementations must be usable from several threads at once; a backend that serialises
/// access to a device does so internally.
pub trait Backend: Send + Sync {
    /// A short human-readable name (`"cpu"`, `"cuda:0 NVIDIA H200"`), used in logs and timings.
    fn name(&self) -> String;

    /// Computes the coefficients of H(X) = (A(X)·B(X) − C(X)) / Z(X).
    ///
    /// `a`, `b` and `c` are the evaluations of the constraint polynomials over the constraint
    /// domain, all of the same length `n` (the number of constraints, inputs' `x·0 = 0`
    /// constraints included). The domain is the smallest power of two `m ≥ n`; the vectors are
    /// zero-padded to `m`. Returns the `m − 1` lowest coefficients of H (its degree is at most
    /// `m − 2` when every constraint is satisfied).
    fn quotient(
        &self,
        a: Vec<Scalar>,
        b: Vec<Scalar>,
        c: Vec<Scalar>,
    ) -> Result<Vec<Scalar>, ProverError>;

    /// Σ h_i · bases[i] for the coefficients h of [`Backend::quotient`] of `a`, `b`, `c`
    /// (`bases` are the m − 1 points of the H query). The prover calls it instead of
    /// `quotient` and `msm_g1` where [`Backend::fuses_h_query`] says so; the default is those
    /// two steps.
    fn quotient_h_query(
        &self,
        a: Vec<Scalar>,
        b: Vec<Scalar>,
        c: Vec<Scalar>,
        bases: &[G1Affine],
    ) -> Result<G1Projective, ProverError> {
        let h = self.quotient(a, b, c)?;
        self.msm_g1(bases, &h)
    }

    /// Whether the prover should compute H and its MSM in one call
    /// ([`Backend::quotient_h_query`]): worth it where H can stay where it was computed (a
    /// device: no round trip through host memory). Default false: H comes back, and its MSM
    /// runs beside the witness MSMs where [`Backend::concurrent_msms`] allows.
    fn fuses_h_query(&self) -> bool {
        false
    }

    /// The four MSMs over the aux assignment (L, and the aux parts of A, B in G1 and B in G2)
    /// in one call, or `None` where the backend has no such path or declines this time (the
    /// default; a device without the memory for it): the prover then runs them as separate
    /// [`Backend::msm_g1`] / [`Backend::msm_g2`] calls on the selected scalars. Worth it where
    /// the assignment can be sent once and the queries' scalars selected where it went (a
    /// device: one upload instead of four, and no host copies of the selections).
    fn aux_msms(&self, queries: &AuxQueries<'_>) -> Option<Result<AuxSums, ProverError>> {
        let _ = queries;
        None
    }

    /// Σ scalars[i] · bases[i] in G1. `bases.len() == scalars.len()`.
    fn msm_g1(&self, bases: &[G1Affine], scalars: &[Scalar]) -> Result<G1Projective, ProverError>;

    /// Σ scalars[i] · bases[i] in G2. `bases.len() == scalars.len()`.
    fn msm_g2(&self, bases: &[G2Affine], scalars: &[Scalar]) -> Result<G2Projective, ProverError>;

    /// Whether the prover may run its five MSMs at the same time on this backend. Worth it
    /// where they share a pool of cores that no single one of them keeps busy (the CPU); not
    /// where they queue for one device and would only hold more device memory at once (the
    /// default).
    fn concurrent_msms(&self) -> bool {
        false
    }
}

/// The MSMs over the aux assignment of one proof ([`Backend::aux_msms`]). The prover checks
/// the lengths before: `l` has one point per aux value, `a` one per set flag of `a_density`,
/// `b_g1` and `b_g2` one per set flag of `b_density`; both densities have one flag per aux value.
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

/// The sums of [`AuxQueries`].
pub struct AuxSums {
    /// Σ aux_i · l_i.
    pub l: G1Projective,
    /// Σ over the A-dense aux values.
    pub a: G1Projective,
    /// Σ over the B-dense aux values, in G1.
    pub b_g1: G1Projective,
    /// The same in G2.
    pub b_g2: G2Projective,
}
