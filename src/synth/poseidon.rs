//! Poseidon's witness on field values: the variables neptune's `poseidon_hash` circuit
//! allocates, in its order, without building its linear combinations.
//!
//! The circuit carries the state between S-boxes as linear combinations (each round's MDS
//! product scales and adds them) and allocates only at S-boxes: the input when it is not yet
//! a variable, its square, its fourth power and the fifth power plus the round key; then
//! the result. Here the state is plain field elements, put through the same optimized
//! constants (compressed round keys, the pre-sparse and sparse matrices) in the same order,
//! so every allocated value is the circuit's. Checked against neptune in the tests below
//! and on whole partitions in `porep_e2e`.

use blstrs::Scalar;
use ff::Field;
use filecoin_hashers::PoseidonArity;

/// The witness of a Poseidon hash of `preimage` (as many elements as `A`'s arity) pushed to
/// `aux`, all but the result, which is returned; and the constraints enforced up to and
/// including the result's.
pub(crate) fn poseidon_witness<A: PoseidonArity>(
    aux: &mut Vec<Scalar>,
    preimage: &[Scalar],
) -> (Scalar, usize) {
    let c = A::PARAMETERS();
    let width = preimage.len() + 1;
    let keys = &c.compressed_round_constants;
    let start = aux.len();
    let mut s: Vec<Scalar> = Vec::with_capacity(width);
    s.push(c.domain_tag);
    s.extend_from_slice(preimage);
    let mut mds = Mds {
        round: 0,
        half: c.half_full_rounds,
        partial: c.partial_rounds,
    };
    // The first round adds a key before and after each S-box; the domain tag is a
    // constant, so its S-box allocates nothing.
    let (pre, post) = keys[..2 * width].split_at(width);
    let mut off = 2 * width;
    s[0] = pow5(s[0] + pre[0]) + post[0];
    for i in 1..width {
        let x = s[i] + pre[i];
        let x2 = x.square();
        let x4 = x2.square();
        s[i] = x4 * x + post[i];
        aux.extend_from_slice(&[x2, x4, s[i]]);
    }
    mds.apply(&mut s, c);
    full_rounds(aux, &mut s, &keys[off..], &mut mds, c);
    off += (c.half_full_rounds - 1) * width;
    for _ in 0..c.partial_rounds {
        s[0] = s_box(aux, s[0], Some(keys[off]));
        off += 1;
        mds.apply(&mut s, c);
    }
    full_rounds(aux, &mut s, &keys[off..], &mut mds, c);
    // The terminal round has no key after its S-boxes.
    for x in s.iter_mut() {
        *x = s_box(aux, *x, None);
    }
    mds.apply(&mut s, c);
    // Every allocation has its one constraint; the result is allocated by the caller.
    (s[1], aux.len() - start + 1)
}

/// The full rounds between the first (or the partial rounds) and the terminal one, each with
/// its key after every S-box, the keys from the start of `keys`.
fn full_rounds<A: PoseidonArity>(
    aux: &mut Vec<Scalar>,
    s: &mut [Scalar],
    keys: &[Scalar],
    mds: &mut Mds,
    c: &neptune::poseidon::PoseidonConstants<Scalar, A>,
) {
    for round in keys.chunks(s.len()).take(c.half_full_rounds - 1) {
        for (x, key) in s.iter_mut().zip(round) {
            *x = s_box(aux, *x, Some(*key));
        }
        mds.apply(s, c);
    }
}

/// An S-box on a state element that is a linear combination: it is allocated, then its
/// square, fourth power and fifth power (plus `key`).
fn s_box(aux: &mut Vec<Scalar>, x: Scalar, key: Option<Scalar>) -> Scalar {
    let x2 = x.square();
    let x4 = x2.square();
    let x5 = x4 * x + key.unwrap_or(Scalar::ZERO);
    aux.extend_from_slice(&[x, x2, x4, x5]);
    x5
}

fn pow5(x: Scalar) -> Scalar {
    x.square().square() * x
}

/// Which matrix each round's linear layer multiplies by, as neptune orders them: the dense
/// MDS matrix, the pre-sparse matrix before the partial rounds, a sparse one in each.
struct Mds {
    round: usize,
    half: usize,
    partial: usize,
}

impl Mds {
    fn apply<A: PoseidonArity>(
        &mut self,
        s: &mut [Scalar],
        c: &neptune::poseidon::PoseidonConstants<Scalar, A>,
    ) {
        let sparse_from = self.half - 1;
        if self.round == sparse_from {
            dense(s, &c.pre_sparse_matrix);
        } else if self.round > sparse_from && self.round < self.half + self.partial {
            let m = &c.sparse_matrixes[self.round - sparse_from - 1];
            let first: Scalar = s.iter().zip(&m.w_hat).map(|(x, w)| *x * w).sum();
            let s0 = s[0];
            for (x, v) in s[1..].iter_mut().zip(&m.v_rest) {
                *x += s0 * v;
            }
            s[0] = first;
        } else {
            dense(s, &c.mds_matrices.m);
        }
        self.round += 1;
    }
}

/// `s ← s · m` (the state a row vector).
fn dense(s: &mut [Scalar], m: &[Vec<Scalar>]) {
    let out: Vec<Scalar> = (0..s.len())
        .map(|j| s.iter().zip(m).map(|(x, row)| *x * row[j]).sum())
        .collect();
    s.copy_from_slice(&out);
}

#[cfg(test)]
mod tests {
    use bellperson::gadgets::num::AllocatedNum;
    use bellperson::SynthesisError;
    use blstrs::Scalar;
    use ff::Field;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    use crate::synth::{synthesize_witness, Gadgets, Synthesize};

    /// Allocates `preimage` and hashes it, natively or with neptune's circuit.
    struct Hash {
        preimage: Vec<Scalar>,
        native: bool,
    }

    impl Synthesize for Hash {
        fn synthesize_into<CS: Gadgets>(self, cs: &mut CS) -> Result<(), SynthesisError> {
            let nums = self
                .preimage
                .iter()
                .map(|&v| AllocatedNum::alloc(&mut *cs, || Ok(v)))
                .collect::<Result<Vec<_>, _>>()?;
            if self.native {
                cs.poseidon(&nums)?;
            } else {
                crate::synth::poseidon_gadget(cs, &nums)?;
            }
            Ok(())
        }
    }

    #[test]
    fn the_native_witness_is_neptunes() {
        let mut rng = StdRng::seed_from_u64(3);
        for arity in [2, 4, 8, 11] {
            for edge in [false, true] {
                let preimage: Vec<Scalar> = (0..arity)
                    .map(|i| match (edge, i % 2) {
                        (true, 0) => Scalar::ZERO,
                        (true, _) => -Scalar::ONE,
                        _ => Scalar::random(&mut rng),
                    })
                    .collect();
                let ours = synthesize_witness(Hash {
                    preimage: preimage.clone(),
                    native: true,
                })
                .unwrap();
                let theirs = synthesize_witness(Hash {
                    preimage,
                    native: false,
                })
                .unwrap();
                assert_eq!(ours.constraints, theirs.constraints, "arity {arity}");
                assert_eq!(ours.aux.len(), theirs.aux.len(), "arity {arity}");
                assert!(ours == theirs, "arity {arity}: a variable differs");
            }
        }
    }
}
