//! Number-theoretic transforms over Fr on the CPU, and the quotient polynomial built on them.
//!
//! The transform is an iterative radix-2 decimation-in-time NTT after a bit-reversal
//! permutation. Early stages (many small blocks) parallelise over blocks; late stages (few
//! large blocks) parallelise over the butterflies inside a block, so both cores stay busy at
//! every stage.

use blstrs::Scalar;
use ff::{Field, PrimeField};
use rayon::prelude::*;

use super::ProverError;

/// Work per rayon task, in butterflies; below this, splitting costs more than it saves.
const MIN_TASK: usize = 1 << 12;

/// The largest transform Fr supports (its two-adicity).
pub const MAX_LOG_SIZE: u32 = Scalar::S;

/// A primitive `2^log_n`-th root of unity.
pub fn root_of_unity(log_n: u32) -> Scalar {
    let mut w = Scalar::ROOT_OF_UNITY;
    for _ in log_n..Scalar::S {
        w = w.square();
    }
    w
}

/// `[start, start·step, start·step², …]` of length `len`, computed in parallel chunks.
pub fn powers(start: Scalar, step: Scalar, len: usize) -> Vec<Scalar> {
    let mut out = vec![Scalar::ZERO; len];
    out.par_chunks_mut(MIN_TASK).enumerate().for_each(|(k, chunk)| {
        let mut cur = start * step.pow_vartime([(k * MIN_TASK) as u64]);
        for v in chunk {
            *v = cur;
            cur *= step;
        }
    });
    out
}

fn bit_reverse_permute(values: &mut [Scalar]) {
    let n = values.len();
    let log_n = n.trailing_zeros();
    if n < 2 {
        return;
    }
    for i in 0..n {
        let j = i.reverse_bits() >> (usize::BITS - log_n);
        if i < j {
            values.swap(i, j);
        }
    }
}

/// In-place NTT of `values` (length a power of two) with the primitive root `omega` of that
/// length: `values[k] ← Σ_j values[j]·omega^(jk)`.
pub fn ntt_in_place(values: &mut [Scalar], omega: Scalar) {
    let n = values.len();
    assert!(n.is_power_of_two(), "NTT size must be a power of two");
    if n < 2 {
        return;
    }
    bit_reverse_permute(values);
    let twiddles = powers(Scalar::ONE, omega, n / 2);
    let mut half = 1;
    while half < n {
        let stride = n / (2 * half);
        let blocks = n / (2 * half);
        if blocks * half >= MIN_TASK && blocks >= rayon::current_num_threads() * 4 {
            values
                .par_chunks_mut(2 * half)
                .for_each(|block| butterflies(block, half, 0, half, &twiddles, stride));
        } else {
            for block in values.chunks_mut(2 * half) {
                let (lo, hi) = block.split_at_mut(half);
                lo.par_chunks_mut(MIN_TASK)
                    .zip(hi.par_chunks_mut(MIN_TASK))
                    .enumerate()
                    .for_each(|(k, (lo, hi))| {
                        let base = k * MIN_TASK;
                        for j in 0..lo.len() {
                            let t = hi[j] * twiddles[(base + j) * stride];
                            hi[j] = lo[j] - t;
                            lo[j] += t;
                        }
                    });
            }
        }
        half *= 2;
    }
}

#[inline]
fn butterflies(
    block: &mut [Scalar],
    half: usize,
    from: usize,
    to: usize,
    twiddles: &[Scalar],
    stride: usize,
) {
    let (lo, hi) = block.split_at_mut(half);
    for j in from..to {
        let t = hi[j] * twiddles[j * stride];
        hi[j] = lo[j] - t;
        lo[j] += t;
    }
}

/// Multiplies `values[i]` by `scale · step^i`.
fn scale_by_powers(values: &mut [Scalar], scale: Scalar, step: Scalar) {
    values.par_chunks_mut(MIN_TASK).enumerate().for_each(|(k, chunk)| {
        let mut cur = scale * step.pow_vartime([(k * MIN_TASK) as u64]);
        for v in chunk {
            *v *= cur;
            cur *= step;
        }
    });
}

/// The evaluation domain of size `2^log_n` and the constants the quotient needs.
struct Domain {
    size: usize,
    omega: Scalar,
    omega_inv: Scalar,
    size_inv: Scalar,
    g: Scalar,
    g_inv: Scalar,
}

impl Domain {
    fn new(size: usize) -> Result<Self, ProverError> {
        let log_n = size.trailing_zeros();
        if !size.is_power_of_two() || log_n > MAX_LOG_SIZE {
            return Err(ProverError::Unsupported(format!("domain of size {size}")));
        }
        let omega = root_of_unity(log_n);
        let inv = |x: Scalar| Option::<Scalar>::from(x.invert()).unwrap_or(Scalar::ZERO);
        let g = Scalar::MULTIPLICATIVE_GENERATOR;
        Ok(Self {
            size,
            omega,
            omega_inv: inv(omega),
            size_inv: inv(Scalar::from(size as u64)),
            g,
            g_inv: inv(g),
        })
    }

    /// Evaluations on the domain → evaluations on the coset g·domain.
    fn domain_to_coset(&self, v: &mut [Scalar]) {
        ntt_in_place(v, self.omega_inv);
        // The inverse transform's 1/n and the coset shift g^i are one pass.
        scale_by_powers(v, self.size_inv, self.g);
        ntt_in_place(v, self.omega);
    }

    /// Evaluations on the coset → coefficients.
    fn coset_to_coefficients(&self, v: &mut [Scalar]) {
        ntt_in_place(v, self.omega_inv);
        scale_by_powers(v, self.size_inv, self.g_inv);
    }

    /// 1 / Z(x) on the coset, where Z(x) = x^n − 1 is the constant g^n − 1 there.
    fn z_inv_on_coset(&self) -> Scalar {
        let z = self.g.pow_vartime([self.size as u64]) - Scalar::ONE;
        Option::<Scalar>::from(z.invert()).unwrap_or(Scalar::ZERO)
    }
}

/// H(X) = (A·B − C)/Z on the CPU; see [`super::Backend::quotient`].
pub fn quotient(
    mut a: Vec<Scalar>,
    mut b: Vec<Scalar>,
    mut c: Vec<Scalar>,
) -> Result<Vec<Scalar>, ProverError> {
    let n = a.len();
    if b.len() != n || c.len() != n {
        return Err(ProverError::Backend("A, B and C have different lengths".into()));
    }
    let domain = Domain::new(n.next_power_of_two().max(2))?;
    for v in [&mut a, &mut b, &mut c] {
        v.resize(domain.size, Scalar::ZERO);
    }
    rayon::join(
        || domain.domain_to_coset(&mut a),
        || rayon::join(|| domain.domain_to_coset(&mut b), || domain.domain_to_coset(&mut c)),
    );
    let z_inv = domain.z_inv_on_coset();
    a.par_iter_mut()
        .zip(b.par_iter())
        .zip(c.par_iter())
        .for_each(|((a, b), c)| *a = (*a * b - c) * z_inv);
    drop((b, c));
    domain.coset_to_coefficients(&mut a);
    a.truncate(domain.size - 1);
    Ok(a)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn naive_dft(v: &[Scalar], omega: Scalar) -> Vec<Scalar> {
        (0..v.len())
            .map(|k| {
                let wk = omega.pow_vartime([k as u64]);
                let mut acc = Scalar::ZERO;
                let mut w = Scalar::ONE;
                for x in v {
                    acc += *x * w;
                    w *= wk;
                }
                acc
            })
            .collect()
    }

    #[test]
    fn ntt_matches_naive_dft_and_round_trips() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        for log_n in [0u32, 1, 2, 3, 6, 9] {
            let n = 1usize << log_n;
            let v: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut rng)).collect();
            let omega = root_of_unity(log_n);
            let mut fast = v.clone();
            ntt_in_place(&mut fast, omega);
            assert_eq!(fast, naive_dft(&v, omega), "size {n}");
            let mut back = fast.clone();
            ntt_in_place(&mut back, Option::from(omega.invert()).unwrap());
            let n_inv: Scalar = Option::from(Scalar::from(n as u64).invert()).unwrap();
            back.iter_mut().for_each(|x| *x *= n_inv);
            assert_eq!(back, v, "round trip {n}");
        }
    }

    #[test]
    fn large_parallel_ntt_round_trips() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(2);
        let log_n = 16;
        let v: Vec<Scalar> = (0..1 << log_n).map(|_| Scalar::random(&mut rng)).collect();
        let omega = root_of_unity(log_n);
        let mut x = v.clone();
        ntt_in_place(&mut x, omega);
        assert_ne!(x, v);
        ntt_in_place(&mut x, Option::from(omega.invert()).unwrap());
        let n_inv: Scalar = Option::from(Scalar::from(1u64 << log_n).invert()).unwrap();
        x.iter_mut().for_each(|y| *y *= n_inv);
        assert_eq!(x, v);
    }

    fn coefficients(evals: &[Scalar]) -> Vec<Scalar> {
        let n = evals.len();
        let mut v = evals.to_vec();
        ntt_in_place(&mut v, Option::from(root_of_unity(n.trailing_zeros()).invert()).unwrap());
        let n_inv: Scalar = Option::from(Scalar::from(n as u64).invert()).unwrap();
        v.iter_mut().for_each(|x| *x *= n_inv);
        v
    }

    fn eval(coeffs: &[Scalar], x: Scalar) -> Scalar {
        coeffs.iter().rev().fold(Scalar::ZERO, |acc, c| acc * x + c)
    }

    #[test]
    fn quotient_satisfies_the_divisibility_identity() {
        // With c = a·b on the domain, A·B − C = H·Z must hold as polynomials: check it at a
        // random point.
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        for n in [3usize, 1000, 1 << 12] {
            let m = n.next_power_of_two();
            let a: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut rng)).collect();
            let b: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut rng)).collect();
            let c: Vec<Scalar> = a.iter().zip(&b).map(|(x, y)| *x * y).collect();
            let h = quotient(a.clone(), b.clone(), c.clone()).unwrap();
            assert_eq!(h.len(), m - 1);
            let pad = |v: &[Scalar]| {
                let mut v = v.to_vec();
                v.resize(m, Scalar::ZERO);
                coefficients(&v)
            };
            let (ac, bc, cc) = (pad(&a), pad(&b), pad(&c));
            let x = Scalar::random(&mut rng);
            let z = x.pow_vartime([m as u64]) - Scalar::ONE;
            assert_eq!(eval(&ac, x) * eval(&bc, x) - eval(&cc, x), eval(&h, x) * z, "n = {n}");
        }
    }
}
