//! Assembly of a Groth16 proof from the backend's results.

use std::time::{Duration, Instant};

use bellperson::groth16::Proof;
use blstrs::{Bls12, G1Projective, G2Projective, Scalar};
use ff::Field;
use group::{prime::PrimeCurveAffine, Curve};
use rand_core::OsRng;
use rayon::prelude::*;

use super::{AuxQueries, Backend, ProverError};
use crate::srs::Srs;
use crate::synth::Synthesized;

/// Where the time of one partition proof went.
#[derive(Clone, Copy, Debug, Default)]
pub struct ProofTimings {
    /// The quotient polynomial (NTTs), and the H query's MSM on a backend that fuses the two
    /// (`Backend::fuses_h_query`: the GPU).
    pub quotient: Duration,
    /// The multi-scalar multiplications, which follow the quotient (on backends that allow
    /// it, all five at once).
    pub msm: Duration,
}

/// The MSMs over the witness.
struct WitnessSums {
    l: G1Projective,
    a: G1Projective,
    b_g1: G1Projective,
    b_g2: G2Projective,
}

/// Runs `f` and `g`, side by side on rayon when `parallel`, else one after the other.
fn both<A: Send, B: Send>(
    parallel: bool,
    f: impl FnOnce() -> A + Send,
    g: impl FnOnce() -> B + Send,
) -> (A, B) {
    if parallel {
        rayon::join(f, g)
    } else {
        (f(), g())
    }
}

/// What the quotient stage hands to the H query.
enum HStage {
    /// The H query's sum already (a backend that fuses the two, see `Backend::fuses_h_query`).
    Sum(G1Projective),
    /// The coefficients of H, for `Backend::msm_g1`.
    Coefficients(Vec<Scalar>),
}

/// Runs one MSM stage and traces how long it took.
fn timed<T>(what: &str, f: impl FnOnce() -> Result<T, ProverError>) -> Result<T, ProverError> {
    let t = Instant::now();
    let out = f();
    tracing::trace!(msm = what, ms = t.elapsed().as_millis() as u64, "msm done");
    out
}

/// Proves `circuit` with fresh `r` and `s` from the operating system's random source.
pub fn prove(
    backend: &dyn Backend,
    srs: &Srs,
    circuit: Synthesized,
) -> Result<(Proof<Bls12>, ProofTimings), ProverError> {
    let r = Scalar::random(OsRng);
    let s = Scalar::random(OsRng);
    prove_with_randomness(backend, srs, circuit, r, s)
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

/// The lengths every query of `srs` must have for `c`, checked before any work so that
/// another circuit's parameters give a clear error instead of a wrong proof.
fn check_shape(srs: &Srs, c: &Synthesized, domain: usize) -> Result<(usize, usize), ProverError> {
    let n_in = c.input.len();
    let a_len = n_in + count_set(&c.a_aux_density);
    let b_in = count_set(&c.b_input_density);
    let b_len = b_in + count_set(&c.b_aux_density);
    let checks = [
        ("ic", srs.vk.ic.len(), n_in),
        ("h", srs.h.len(), domain - 1),
        ("l", srs.l.len(), c.aux.len()),
        ("a", srs.a.len(), a_len),
        ("b_g1", srs.b_g1.len(), b_len),
        ("b_g2", srs.b_g2.len(), b_len),
    ];
    for (name, have, want) in checks {
        if have != want {
            return Err(ProverError::ParamsMismatch(format!(
                "{}: section {name} has {have} points, the circuit needs {want}",
                srs.path.display()
            )));
        }
    }
    if bool::from(srs.vk.delta_g1.is_identity() | srs.vk.delta_g2.is_identity()) {
        return Err(ProverError::ParamsMismatch("delta is the identity".into()));
    }
    Ok((n_in, b_in))
}

/// Proves `circuit` with the given randomness. Deterministic: bellperson's
/// `create_proof(circuit, params, r, s)` yields the same proof.
pub fn prove_with_randomness(
    backend: &dyn Backend,
    srs: &Srs,
    circuit: Synthesized,
    r: Scalar,
    s: Scalar,
) -> Result<(Proof<Bls12>, ProofTimings), ProverError> {
    let domain = circuit.num_constraints().next_power_of_two().max(2);
    let (n_in, b_in) = check_shape(srs, &circuit, domain)?;
    let Synthesized {
        a,
        b,
        c,
        input,
        aux,
        a_aux_density,
        b_input_density,
        b_aux_density,
    } = circuit;

    let overlap = backend.concurrent_msms();
    let start = Instant::now();
    // The quotient runs first and alone: its passes are short parallel loops, and beside
    // long MSM tasks they would wait for free threads (a 2^17 quotient took 0.3 s instead of
    // 0.02 s next to the witness MSMs on 16 cores). The five MSMs are independent and then
    // run together where the backend allows it.
    // A backend that fuses them computes H and its MSM in one call, H never leaving the device.
    let h_stage = if backend.fuses_h_query() {
        HStage::Sum(timed("h", || backend.quotient_h_query(a, b, c, &srs.h))?)
    } else {
        HStage::Coefficients(backend.quotient(a, b, c)?)
    };
    let quotient = start.elapsed();
    // Each closure owns the vectors it reads and drops them as soon as its MSMs are done, so
    // a backend that runs the MSMs one after the other never holds H, or the aux assignment
    // during the B queries (each is 4 GiB for a 32 GiB partition).
    let h_query = move || match h_stage {
        HStage::Sum(acc) => Ok(acc),
        HStage::Coefficients(h) => {
            let acc = timed("h", || backend.msm_g1(&srs.h, &h));
            drop(h);
            acc
        }
    };
    let witness = move || -> Result<WitnessSums, ProverError> {
        let b_input = dense(&input, &b_input_density);
        // A backend that can send the aux assignment once and select the A and B scalars where
        // it went does the four aux MSMs in one call; the inputs' parts (a few points) stay
        // separate calls.
        let t = Instant::now();
        let joint = backend.aux_msms(&AuxQueries {
            aux: &aux,
            a_density: &a_aux_density,
            b_density: &b_aux_density,
            l: &srs.l,
            a: &srs.a[n_in..],
            b_g1: &srs.b_g1[b_in..],
            b_g2: &srs.b_g2[b_in..],
        });
        if let Some(sums) = joint {
            let sums = sums?;
            tracing::trace!(msm = "aux", ms = t.elapsed().as_millis() as u64, "msm done");
            drop(aux);
            return Ok(WitnessSums {
                l: sums.l,
                a: sums.a + backend.msm_g1(&srs.a[..n_in], &input)?,
                b_g1: sums.b_g1 + backend.msm_g1(&srs.b_g1[..b_in], &b_input)?,
                b_g2: sums.b_g2 + backend.msm_g2(&srs.b_g2[..b_in], &b_input)?,
            });
        }
        let b_aux = dense(&aux, &b_aux_density);
        let l_and_a = move || {
            let sums = both(
                overlap,
                || timed("l", || backend.msm_g1(&srs.l, &aux)),
                || {
                    timed("a", || {
                        Ok(backend.msm_g1(&srs.a[..n_in], &input)?
                            + backend.msm_g1(&srs.a[n_in..], &dense(&aux, &a_aux_density))?)
                    })
                },
            );
            drop(aux);
            sums
        };
        let b_queries = || {
            both(
                overlap,
                || {
                    timed("b_g1", || {
                        Ok(backend.msm_g1(&srs.b_g1[..b_in], &b_input)?
                            + backend.msm_g1(&srs.b_g1[b_in..], &b_aux)?)
                    })
                },
                || {
                    timed("b_g2", || {
                        Ok(backend.msm_g2(&srs.b_g2[..b_in], &b_input)?
                            + backend.msm_g2(&srs.b_g2[b_in..], &b_aux)?)
                    })
                },
            )
        };
        let ((l, a), (b_g1, b_g2)) = both(overlap, l_and_a, b_queries);
        Ok(WitnessSums {
            l: l?,
            a: a?,
            b_g1: b_g1?,
            b_g2: b_g2?,
        })
    };
    let (h_result, witness_result) = both(overlap, h_query, witness);
    let h_acc = h_result?;
    let WitnessSums {
        l: l_acc,
        a: a_acc,
        b_g1: b1_acc,
        b_g2: b2_acc,
    } = witness_result?;
    let msm = start.elapsed().saturating_sub(quotient);

    let vk = &srs.vk;
    let g_a = vk.delta_g1 * r + vk.alpha_g1 + a_acc;
    let g_b: G2Projective = vk.delta_g2 * s + vk.beta_g2 + b2_acc;
    let g_c: G1Projective = a_acc * s
        + b1_acc * r
        + vk.delta_g1 * (r * s)
        + vk.alpha_g1 * s
        + vk.beta_g1 * r
        + h_acc
        + l_acc;
    let proof = Proof {
        a: g_a.to_affine(),
        b: g_b.to_affine(),
        c: g_c.to_affine(),
    };
    Ok((proof, ProofTimings { quotient, msm }))
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
