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
    out.par_chunks_mut(MIN_TASK)
        .enumerate()
        .for_each(|(k, chunk)| {
            let mut cur = start * step.pow_vartime([(k * MIN_TASK) as u64]);
            for v in chunk {
                *v = cur;
                cur *= step;
            }
        });
    out
}

/// `i` with its lowest `bits` bits reversed.
#[inline]
fn rev(i: usize, bits: u32) -> usize {
    if bits == 0 {
        0
    } else {
        i.reverse_bits() >> (usize::BITS - bits)
    }
}

/// Reorders `values` into bit-reversed index order, in parallel (out of place).
pub fn bit_reverse_permute(values: &mut Vec<Scalar>) {
    let n = values.len();
    let bits = n.trailing_zeros();
    if n <= 2 {
        return;
    }
    let src = std::mem::take(values);
    let mut dst = vec![Scalar::ZERO; n];
    dst.par_chunks_mut(MIN_TASK)
        .enumerate()
        .for_each(|(k, chunk)| {
            for (i, d) in chunk.iter_mut().enumerate() {
                *d = src[rev(k * MIN_TASK + i, bits)];
            }
        });
    *values = dst;
}

/// Blocks of this many elements are transformed through their first (DIT) or last (DIF)
/// stages while they sit in the core's cache: 2^13 elements are 256 KiB.
const CACHE_BLOCK: usize = 1 << 13;

/// Cooley–Tukey butterflies of one stage over a block of `2·half` elements.
#[inline]
fn dit_stage(block: &mut [Scalar], half: usize, twiddles: &[Scalar], stride: usize) {
    let (lo, hi) = block.split_at_mut(half);
    for (j, (l, h)) in lo.iter_mut().zip(hi.iter_mut()).enumerate() {
        let t = *h * twiddles[j * stride];
        *h = *l - t;
        *l += t;
    }
}

/// Gentleman–Sande butterflies of one stage over a block of `2·half` elements.
#[inline]
fn dif_stage(block: &mut [Scalar], half: usize, twiddles: &[Scalar], stride: usize) {
    let (lo, hi) = block.split_at_mut(half);
    for (j, (l, h)) in lo.iter_mut().zip(hi.iter_mut()).enumerate() {
        let u = *l;
        *l = u + *h;
        *h = (u - *h) * twiddles[j * stride];
    }
}

/// Runs one stage over the whole vector: in parallel over blocks when there are many, else
/// over slices of the butterflies inside each block.
fn wide_stage(values: &mut [Scalar], half: usize, twiddles: &[Scalar], stride: usize, dit: bool) {
    for block in values.chunks_mut(2 * half) {
        let (lo, hi) = block.split_at_mut(half);
        lo.par_chunks_mut(MIN_TASK)
            .zip(hi.par_chunks_mut(MIN_TASK))
            .enumerate()
            .for_each(|(k, (lo, hi))| {
                let base = k * MIN_TASK;
                for j in 0..lo.len() {
                    let w = twiddles[(base + j) * stride];
                    if dit {
                        let t = hi[j] * w;
                        hi[j] = lo[j] - t;
                        lo[j] += t;
                    } else {
                        let u = lo[j];
                        lo[j] = u + hi[j];
                        hi[j] = (u - hi[j]) * w;
                    }
                }
            });
    }
}

/// DIT transform: bit-reversed input, natural-order output.
fn dit_from_bitrev(values: &mut [Scalar], twiddles: &[Scalar]) {
    let n = values.len();
    let block = CACHE_BLOCK.min(n);
    // Stages whose butterflies stay inside one cache block: all of them per block.
    values.par_chunks_mut(block).for_each(|chunk| {
        let mut half = 1;
        while 2 * half <= block {
            let stride = n / (2 * half);
            for b in chunk.chunks_mut(2 * half) {
                dit_stage(b, half, twiddles, stride);
            }
            half *= 2;
        }
    });
    let mut half = block;
    while half < n {
        wide_stage(values, half, twiddles, n / (2 * half), true);
        half *= 2;
    }
}

/// DIF transform: natural-order input, bit-reversed output.
fn dif_to_bitrev(values: &mut [Scalar], twiddles: &[Scalar]) {
    let n = values.len();
    let block = CACHE_BLOCK.min(n);
    let mut half = n / 2;
    while half >= block {
        wide_stage(values, half, twiddles, n / (2 * half), false);
        half /= 2;
    }
    values.par_chunks_mut(block).for_each(|chunk| {
        let mut half = block / 2;
        while half >= 1 {
            let stride = n / (2 * half);
            for b in chunk.chunks_mut(2 * half) {
                dif_stage(b, half, twiddles, stride);
            }
            half /= 2;
        }
    });
}

/// In-place NTT of `values` (length a power of two) with the primitive root `omega` of that
/// length: `values[k] ← Σ_j values[j]·omega^(jk)`.
pub fn ntt_in_place(values: &mut Vec<Scalar>, omega: Scalar) {
    let n = values.len();
    assert!(n.is_power_of_two(), "NTT size must be a power of two");
    if n < 2 {
        return;
    }
    let twiddles = powers(Scalar::ONE, omega, n / 2);
    dif_to_bitrev(values, &twiddles);
    bit_reverse_permute(values);
}

/// Multiplies `values[j]` by `scale · step^rev(j)` (the coset twist of bit-reversed
/// coefficients). `rev(j)` splits into a low and a high half of the index bits, so two small
/// tables replace a 2^L-entry gather: `step^rev(j) = lo[j mod 2^k] · hi[j >> k]`.
fn scale_by_bitrev_powers(values: &mut [Scalar], scale: Scalar, step: Scalar) {
    let n = values.len();
    let bits = n.trailing_zeros();
    let k = bits / 2;
    let big = step.pow_vartime([1u64 << (bits - k)]);
    let lo_nat = powers(Scalar::ONE, big, 1 << k);
    let lo: Vec<Scalar> = (0..1usize << k).map(|x| lo_nat[rev(x, k)]).collect();
    let hi_nat = powers(scale, step, 1 << (bits - k));
    values
        .par_chunks_mut(1 << k)
        .enumerate()
        .for_each(|(y, chunk)| {
            let f = hi_nat[rev(y, bits - k)];
            for (v, l) in chunk.iter_mut().zip(&lo) {
                *v *= *l * f;
            }
        });
}

/// The evaluation domain of size `2^log_n` and the constants the quotient needs.
struct Domain {
    size: usize,
    twiddles: Vec<Scalar>,
    twiddles_inv: Vec<Scalar>,
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
        let omega_inv = inv(omega);
        Ok(Self {
            size,
            twiddles: powers(Scalar::ONE, omega, size / 2),
            twiddles_inv: powers(Scalar::ONE, omega_inv, size / 2),
            size_inv: inv(Scalar::from(size as u64)),
            g,
            g_inv: inv(g),
        })
    }

    /// Evaluations on the domain → evaluations on the coset g·domain, both natural order.
    fn domain_to_coset(&self, v: &mut [Scalar]) {
        // DIF inverse transform leaves n·coefficients in bit-reversed order; the 1/n and the
        // coset shift g^i are one pass in that order; the DIT forward transform takes
        // bit-reversed input and gives natural order back. No permutation is needed.
        dif_to_bitrev(v, &self.twiddles_inv);
        scale_by_bitrev_powers(v, self.size_inv, self.g);
        dit_from_bitrev(v, &self.twiddles);
    }

    /// Evaluations on the coset → coefficients in natural order.
    fn coset_to_coefficients(&self, v: &mut Vec<Scalar>) {
        dif_to_bitrev(v, &self.twiddles_inv);
        scale_by_bitrev_powers(v, self.size_inv, self.g_inv);
        bit_reverse_permute(v);
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
        return Err(ProverError::Backend(
            "A, B and C have different lengths".into(),
        ));
    }
    let domain = Domain::new(n.next_power_of_two().max(2))?;
    for v in [&mut a, &mut b, &mut c] {
        v.resize(domain.size, Scalar::ZERO);
    }
    rayon::join(
        || domain.domain_to_coset(&mut a),
        || {
            rayon::join(
                || domain.domain_to_coset(&mut b),
                || domain.domain_to_coset(&mut c),
            )
        },
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
    fn large_ntt_matches_the_dft_at_sampled_points() {
        // Larger than a cache block, so the wide stages run too; checked at a few outputs.
        let mut rng = rand::rngs::StdRng::seed_from_u64(9);
        let log_n = 15;
        let v: Vec<Scalar> = (0..1 << log_n).map(|_| Scalar::random(&mut rng)).collect();
        let omega = root_of_unity(log_n);
        let mut fast = v.clone();
        ntt_in_place(&mut fast, omega);
        for k in [0usize, 1, 2, 4097, (1 << log_n) - 1] {
            let wk = omega.pow_vartime([k as u64]);
            let want = v.iter().rev().fold(Scalar::ZERO, |acc, x| acc * wk + x);
            assert_eq!(fast[k], want, "output {k}");
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
        ntt_in_place(
            &mut v,
            Option::from(root_of_unity(n.trailing_zeros()).invert()).unwrap(),
        );
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
        for n in [3usize, 1000, (1 << 15) + 1] {
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
            assert_eq!(
                eval(&ac, x) * eval(&bc, x) - eval(&cc, x),
                eval(&h, x) * z,
                "n = {n}"
            );
        }
    }
}
