//! A Groth16 setup with fresh secrets from a circuit's recorded shape ([`R1cs`]): the scalars
//! of every parameter query, exactly as bellperson 0.27's `generate_parameters` makes them
//! (`groth16/generator.rs`), so that bellperson's prover and verifier and filecoin-proofs take
//! the result. NOT the parameters of Filecoin's trusted-setup ceremony: whoever ran the setup
//! knows its secrets and could forge proofs; they serve tests and measurements only.
//!
//! With the domain size m (the first power of two at or above the constraint count, the
//! inputs' `x · 0 = 0` constraints included, which the recorded shape holds):
//! * `h[i] = τ^i · (τ^m − 1) / δ` for i < m − 1;
//! * `A_v, B_v, C_v` for every variable v (inputs, then aux): the sums over the constraints j
//!   that use v of its coefficient times the Lagrange polynomial `L_j(τ)`;
//! * `a`: the non-zero `A_v`; `b` (G1 and G2): the non-zero `B_v`;
//! * `ic[v] = (β A_v + α B_v + C_v) / γ` for the inputs, `l[v]` the same over δ for aux
//!   variables (a zero one is an unconstrained variable, an error as in bellperson).

use blstrs::Scalar;
use ff::{BatchInverter, Field, PrimeField};
use rand::rngs::StdRng;
use rand::SeedableRng;
use rayon::prelude::*;

use crate::synth::{Matrix, R1cs, INPUT};

/// Why a setup could not be made.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// More constraints than BLS12-381's largest radix-2 domain.
    #[error("{0} constraints: no radix-2 domain of the scalar field is that large")]
    DomainTooLarge(usize),
    /// τ fell on the domain (probability about 2^-228): choose another seed.
    #[error("tau is a root of unity of the domain; choose another seed")]
    TauInDomain,
    /// An aux variable no constraint uses (bellperson refuses such a circuit too).
    #[error("aux variable {0} is unconstrained")]
    Unconstrained(usize),
}

/// The secrets of a setup ("toxic waste"), drawn from a seed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Secrets {
    /// The evaluation point.
    pub tau: Scalar,
    /// α.
    pub alpha: Scalar,
    /// β.
    pub beta: Scalar,
    /// γ.
    pub gamma: Scalar,
    /// δ.
    pub delta: Scalar,
}

impl Secrets {
    /// The secrets `seed` gives: the same seed, the same parameters (a fresh random seed
    /// for a real use; a fixed one to compare two ways of making them).
    pub fn from_seed(seed: [u8; 32]) -> Self {
        let mut rng = StdRng::from_seed(seed);
        Secrets {
            tau: Scalar::random(&mut rng),
            alpha: Scalar::random(&mut rng),
            beta: Scalar::random(&mut rng),
            gamma: Scalar::random(&mut rng),
            delta: Scalar::random(&mut rng),
        }
    }
}

/// The scalars of every query; the points are these times a generator.
pub struct Queries {
    /// The domain size m.
    pub domain: usize,
    /// H: m − 1 scalars (G1).
    pub h: Vec<Scalar>,
    /// L: one per aux variable (G1).
    pub l: Vec<Scalar>,
    /// A: the non-zero ones, inputs then aux (G1).
    pub a: Vec<Scalar>,
    /// B: the non-zero ones, inputs then aux (G1 and G2).
    pub b: Vec<Scalar>,
    /// IC: one per input (G1, in the verifying key).
    pub ic: Vec<Scalar>,
}

/// The query scalars of `shape`'s circuit for `secrets`, on the current rayon pool.
pub fn queries(shape: &R1cs, secrets: &Secrets) -> Result<Queries, SetupError> {
    let (domain, omega) = domain(shape.num_constraints())?;
    let Secrets {
        tau,
        alpha,
        beta,
        gamma,
        delta,
    } = *secrets;
    let z = tau.pow_vartime([domain as u64]) - Scalar::ONE;
    if bool::from(z.is_zero()) {
        return Err(SetupError::TauInDomain);
    }
    let (gamma_inv, delta_inv) = (inverse(gamma)?, inverse(delta)?);
    let h = powers(tau, z * delta_inv, domain - 1);
    let lagrange = lagrange(tau, omega, domain, z)?;
    let [at, bt, ct] = [&shape.a, &shape.b, &shape.c].map(|m| column_sums(shape, m, &lagrange));
    drop(lagrange);
    let nonzero = |v: &Vec<Scalar>| -> Vec<Scalar> {
        v.par_iter()
            .filter(|s| !bool::from(s.is_zero()))
            .copied()
            .collect()
    };
    let (a, b) = (nonzero(&at), nonzero(&bt));
    let ext = |range: std::ops::Range<usize>, inv: Scalar| -> Vec<Scalar> {
        range
            .into_par_iter()
            .map(|v| (beta * at[v] + alpha * bt[v] + ct[v]) * inv)
            .collect()
    };
    let inputs = shape.num_inputs;
    let ic = ext(0..inputs, gamma_inv);
    let l = ext(inputs..inputs + shape.num_aux, delta_inv);
    if let Some(v) = l.par_iter().position_first(|s| bool::from(s.is_zero())) {
        return Err(SetupError::Unconstrained(v));
    }
    Ok(Queries {
        domain,
        h,
        l,
        a,
        b,
        ic,
    })
}

fn inverse(s: Scalar) -> Result<Scalar, SetupError> {
    Option::from(s.invert()).ok_or(SetupError::TauInDomain)
}

/// The domain bellperson's `EvaluationDomain::from_coeffs` picks for `n` coefficients: its
/// size m (the first power of two ≥ n) and generator ω (the field's 2^S-th root of unity
/// squared down to order m).
pub fn domain(n: usize) -> Result<(usize, Scalar), SetupError> {
    let exp = n.max(1).next_power_of_two().trailing_zeros();
    if exp >= Scalar::S {
        return Err(SetupError::DomainTooLarge(n));
    }
    let mut omega = Scalar::ROOT_OF_UNITY;
    for _ in exp..Scalar::S {
        omega = omega.square();
    }
    Ok((1 << exp, omega))
}

/// Elements per parallel task of the element-wise passes.
const TASK: usize = 1 << 16;

/// `first · x^i` for i < n.
fn powers(x: Scalar, first: Scalar, n: usize) -> Vec<Scalar> {
    let mut out = vec![Scalar::ZERO; n];
    out.par_chunks_mut(TASK).enumerate().for_each(|(k, chunk)| {
        let mut p = first * x.pow_vartime([(k * TASK) as u64]);
        for o in chunk {
            *o = p;
            p *= x;
        }
    });
    out
}

/// The Lagrange basis of the domain at τ: `L_j(τ) = (τ^m − 1) / m · ω^j / (τ − ω^j)`, which
/// is what bellperson's inverse FFT of the powers of τ gives; `z` = τ^m − 1 (not zero).
fn lagrange(tau: Scalar, omega: Scalar, m: usize, z: Scalar) -> Result<Vec<Scalar>, SetupError> {
    let c = z * inverse(Scalar::from(m as u64))?;
    let mut out = powers(omega, Scalar::ONE, m);
    out.par_chunks_mut(TASK).for_each(|chunk| {
        let roots = chunk.to_vec();
        for o in chunk.iter_mut() {
            *o = tau - *o; // not zero: τ^m ≠ 1
        }
        let mut scratch = vec![Scalar::ZERO; chunk.len()];
        BatchInverter::invert_with_external_scratch(chunk, &mut scratch);
        for (o, w) in chunk.iter_mut().zip(roots) {
            *o *= c * w;
        }
    });
    Ok(out)
}

/// Σ_j coeff · L_j(τ) over the terms of matrix `m`, per variable: inputs first, then aux.
/// Each task owns a range of variables and reads every row: no two tasks write one sum.
fn column_sums(shape: &R1cs, m: &Matrix, lagrange: &[Scalar]) -> Vec<Scalar> {
    let inputs = shape.num_inputs;
    let vars = inputs + shape.num_aux;
    let mut out = vec![Scalar::ZERO; vars];
    let span = vars.div_ceil(rayon::current_num_threads().max(1)).max(1);
    let coeffs = shape.coeffs();
    out.par_chunks_mut(span).enumerate().for_each(|(k, chunk)| {
        let lo = k * span;
        for (r, l) in lagrange.iter().enumerate().take(m.rows()) {
            let terms = &m.terms[m.starts[r] as usize..m.starts[r + 1] as usize];
            for t in terms {
                let v = if t.var & INPUT != 0 {
                    (t.var & !INPUT) as usize
                } else {
                    inputs + t.var as usize
                };
                if let Some(o) = v.checked_sub(lo).and_then(|i| chunk.get_mut(i)) {
                    // Coefficient 0 is ONE (R1cs::coeffs): most terms.
                    if t.coeff == 0 {
                        *o += l;
                    } else {
                        *o += *l * coeffs[t.coeff as usize];
                    }
                }
            }
        }
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Lagrange basis interpolates: Σ_j L_j(τ) · ω^{jk} = τ^k for k < m.
    #[test]
    fn the_lagrange_basis_interpolates_the_powers_of_tau() {
        let (m, omega) = domain(13).unwrap();
        assert_eq!(m, 16);
        assert_eq!(omega.pow_vartime([16]), Scalar::ONE);
        assert_ne!(omega.pow_vartime([8]), Scalar::ONE);
        let tau = Scalar::from(123_456_789u64);
        let z = tau.pow_vartime([m as u64]) - Scalar::ONE;
        let l = lagrange(tau, omega, m, z).unwrap();
        for k in [0u64, 1, 5, 15] {
            let sum: Scalar = l
                .iter()
                .enumerate()
                .map(|(j, lj)| *lj * omega.pow_vartime([j as u64 * k]))
                .sum();
            assert_eq!(sum, tau.pow_vartime([k]), "k = {k}");
        }
        assert_eq!(domain(1).unwrap().0, 1);
        assert!(domain(1 << 40).is_err());
    }
}
