//! Assembly of a Groth16 proof from the backend's sums.

use std::time::{Duration, Instant};

use bellperson::groth16::Proof;
use blstrs::{Bls12, G1Projective, G2Projective, Scalar};
use ff::Field;
use group::{prime::PrimeCurveAffine, Curve};
use rand_core::OsRng;

use super::{
    PinnedPool, PreparedSrs, ProverError, Scalars, Witness, WitnessPartition, WitnessSums,
};
use crate::srs::Srs;
use crate::synth::{Density, Synthesized};

/// Where the time of one partition proof went.
#[derive(Clone, Copy, Debug, Default)]
pub struct ProofTimings {
    /// The quotient polynomial (NTTs) and the H query's MSM ([`PreparedSrs::h_sum`]).
    pub quotient: Duration,
    /// The MSMs over the witness ([`PreparedSrs::witness_sums`]), which follow.
    pub msm: Duration,
}

/// A synthesized circuit on its way to a backend: [`Synthesized`] with the large vectors —
/// the A, B, C evaluations and the aux assignment — as [`Scalars`], which may be page-locked
/// copies a GPU uploads directly ([`Partition::pin`]).
#[derive(Debug)]
pub struct Partition {
    /// A(x) at each constraint.
    pub a: Scalars,
    /// B(x) at each constraint.
    pub b: Scalars,
    /// C(x) at each constraint.
    pub c: Scalars,
    /// Public inputs, the constant ONE first.
    pub input: Vec<Scalar>,
    /// Auxiliary variables.
    pub aux: Scalars,
    /// Whether aux variable i occurs in some A combination.
    pub a_aux_density: Density,
    /// Whether input i occurs in some B combination.
    pub b_input_density: Density,
    /// Whether aux variable i occurs in some B combination.
    pub b_aux_density: Density,
}

impl From<Synthesized> for Partition {
    fn from(s: Synthesized) -> Self {
        Partition {
            a: s.a.into(),
            b: s.b.into(),
            c: s.c.into(),
            input: s.input,
            aux: s.aux.into(),
            a_aux_density: s.a_aux_density.into(),
            b_input_density: s.b_input_density.into(),
            b_aux_density: s.b_aux_density.into(),
        }
    }
}

impl Partition {
    /// Number of constraints, input constraints included.
    pub fn num_constraints(&self) -> usize {
        self.a.len()
    }

    /// Moves the evaluations and the aux assignment into blocks of `pool` where it has room
    /// (each vector on its own: what does not fit stays on the heap). Copies on the calling
    /// thread: a synthesis thread's, so that the device does not wait for it.
    pub fn pin(self, pool: &PinnedPool) -> Partition {
        Partition {
            a: self.a.pin(pool),
            b: self.b.pin(pool),
            c: self.c.pin(pool),
            aux: self.aux.pin(pool),
            ..self
        }
    }

    /// Host bytes it holds.
    pub fn host_bytes(&self) -> u64 {
        let scalars = [&self.a, &self.b, &self.c, &self.aux]
            .iter()
            .map(|s| s.host_bytes() as u64)
            .sum::<u64>();
        let input = (self.input.capacity() * std::mem::size_of::<Scalar>()) as u64;
        let flags = self.a_aux_density.host_bytes() + self.b_input_density.host_bytes();
        scalars + input + (flags + self.b_aux_density.host_bytes()) as u64
    }
}

/// Proves `circuit` with fresh `r` and `s` from the operating system's random source.
pub fn prove(
    prepared: &dyn PreparedSrs,
    circuit: impl Into<Partition>,
) -> Result<(Proof<Bls12>, ProofTimings), ProverError> {
    let r = Scalar::random(OsRng);
    let s = Scalar::random(OsRng);
    prove_with_randomness(prepared, circuit, r, s)
}

/// The lengths every query of `srs` must have for `c`, checked before any work so that
/// another circuit's parameters give a clear error instead of a wrong proof. Returns the
/// number of inputs the B queries use.
fn check_shape(srs: &Srs, c: &Partition, domain: usize) -> Result<usize, ProverError> {
    let densities = [&c.a_aux_density, &c.b_input_density, &c.b_aux_density];
    check_lengths(
        srs,
        c.input.len(),
        c.aux.len(),
        densities.map(|d| (d.len(), d.count())),
        domain,
    )
}

/// [`check_shape`] from the lengths: inputs, aux variables, the densities (A aux, B input,
/// B aux: each its length and its number of set flags) and the domain.
fn check_lengths(
    srs: &Srs,
    n_in: usize,
    n_aux: usize,
    [a_aux, b_input, b_aux]: [(usize, usize); 3],
    domain: usize,
) -> Result<usize, ProverError> {
    let a_len = n_in + a_aux.1;
    let b_in = b_input.1;
    let b_len = b_in + b_aux.1;
    let checks = [
        ("ic", srs.vk.ic.len(), n_in),
        ("h", srs.h.len(), domain - 1),
        ("l", srs.l.len(), n_aux),
        ("a", srs.a.len(), a_len),
        ("b_g1", srs.b_g1.len(), b_len),
        ("b_g2", srs.b_g2.len(), b_len),
    ];
    for (section, have, want) in checks {
        if have != want {
            return Err(ProverError::ParamsMismatch {
                path: srs.path.clone(),
                section,
                have,
                want,
            });
        }
    }
    // The densities must cover their variables too: the backends select by them.
    let densities = [
        ("A aux density", a_aux.0, n_aux),
        ("B aux density", b_aux.0, n_aux),
        ("B input density", b_input.0, n_in),
    ];
    for (what, left, right) in densities {
        if left != right {
            return Err(ProverError::LengthMismatch { what, left, right });
        }
    }
    if bool::from(srs.vk.delta_g1.is_identity() | srs.vk.delta_g2.is_identity()) {
        return Err(ProverError::DegenerateParams {
            path: srs.path.clone(),
        });
    }
    Ok(b_in)
}

/// Proves a witness partition on a backend that evaluates recorded shapes itself
/// ([`PreparedSrs::evaluates_shapes`]), with fresh `r` and `s`.
pub fn prove_witness(
    prepared: &dyn PreparedSrs,
    partition: WitnessPartition,
) -> Result<(Proof<Bls12>, ProofTimings), ProverError> {
    let r = Scalar::random(OsRng);
    let s = Scalar::random(OsRng);
    prove_witness_with_randomness(prepared, partition, r, s)
}

/// [`prove_witness`] with the given randomness: the same proof as
/// [`prove_with_randomness`] of the evaluated partition.
pub fn prove_witness_with_randomness(
    prepared: &dyn PreparedSrs,
    partition: WitnessPartition,
    r: Scalar,
    s: Scalar,
) -> Result<(Proof<Bls12>, ProofTimings), ProverError> {
    let WitnessPartition { witness, shape } = partition;
    let srs = prepared.srs();
    let domain = shape.num_constraints().next_power_of_two().max(2);
    // The shape's densities are counted once, by the first partition proved on it.
    let densities = [
        &shape.a_aux_density,
        &shape.b_input_density,
        &shape.b_aux_density,
    ];
    let b_in = check_lengths(
        srs,
        witness.input.len(),
        witness.aux.len(),
        densities.map(|d| (d.len(), d.count())),
        domain,
    )?;
    let start = Instant::now();
    let w = Witness {
        input: witness.input,
        aux: witness.aux.into(),
        a_aux_density: shape.a_aux_density.clone(),
        b_input_density: shape.b_input_density.clone(),
        b_aux_density: shape.b_aux_density.clone(),
        b_in,
    };
    let sums = prepared.sums_shaped(&shape, w)?;
    let quotient = sums.h_done;
    let msm = start.elapsed().saturating_sub(quotient);
    let proof = assemble(srs, sums.h, &sums.witness, r, s);
    Ok((proof, ProofTimings { quotient, msm }))
}

/// Proves `circuit` with the given randomness. Deterministic: bellperson's
/// `create_proof(circuit, params, r, s)` yields the same proof.
///
/// Shape check, then the sums ([`PreparedSrs::sums`]: the H sum, whose quotient consumes the
/// A, B, C evaluations so that they never coexist with the witness MSMs' copies, and the
/// witness sums), then the assembly.
pub fn prove_with_randomness(
    prepared: &dyn PreparedSrs,
    circuit: impl Into<Partition>,
    r: Scalar,
    s: Scalar,
) -> Result<(Proof<Bls12>, ProofTimings), ProverError> {
    let circuit: Partition = circuit.into();
    let srs = prepared.srs();
    let domain = circuit.num_constraints().next_power_of_two().max(2);
    let b_in = check_shape(srs, &circuit, domain)?;
    let Partition {
        a,
        b,
        c,
        input,
        aux,
        a_aux_density,
        b_input_density,
        b_aux_density,
    } = circuit;

    let start = Instant::now();
    let witness = Witness {
        input,
        aux,
        a_aux_density,
        b_input_density,
        b_aux_density,
        b_in,
    };
    let sums = prepared.sums(a, b, c, witness)?;
    let quotient = sums.h_done;
    let msm = start.elapsed().saturating_sub(quotient);
    let proof = assemble(srs, sums.h, &sums.witness, r, s);
    Ok((proof, ProofTimings { quotient, msm }))
}

/// The proof from the sums, exactly as bellperson computes it.
fn assemble(srs: &Srs, h: G1Projective, w: &WitnessSums, r: Scalar, s: Scalar) -> Proof<Bls12> {
    let vk = &srs.vk;
    let g_a = vk.delta_g1 * r + vk.alpha_g1 + w.a;
    let g_b: G2Projective = vk.delta_g2 * s + vk.beta_g2 + w.b_g2;
    let g_c: G1Projective =
        w.a * s + w.b_g1 * r + vk.delta_g1 * (r * s) + vk.alpha_g1 * s + vk.beta_g1 * r + h + w.l;
    Proof {
        a: g_a.to_affine(),
        b: g_b.to_affine(),
        c: g_c.to_affine(),
    }
}
