//! The CPU backend: rayon NTTs and a batch-affine Pippenger (blst's for small MSMs).

use std::sync::Arc;
use std::time::Instant;

use blstrs::{G1Projective, Scalar};

use super::{dense, msm, ntt, Backend, PreparedSrs, ProverError, Witness, WitnessSums};
use crate::srs::Srs;

/// Proves on the CPU with every core rayon (and, for small MSMs, blst) is given.
#[derive(Debug, Default, Clone, Copy)]
pub struct CpuBackend;

impl Backend for CpuBackend {
    fn name(&self) -> String {
        format!("cpu ({} threads)", rayon::current_num_threads())
    }

    /// Nothing to do: the CPU reads the points where the parameter cache keeps them.
    fn prepare(&self, srs: Arc<Srs>) -> Result<Arc<dyn PreparedSrs>, ProverError> {
        Ok(Arc::new(CpuPrepared { srs }))
    }
}

/// A parameter set on the CPU: the host points themselves.
struct CpuPrepared {
    srs: Arc<Srs>,
}

impl PreparedSrs for CpuPrepared {
    fn srs(&self) -> &Arc<Srs> {
        &self.srs
    }

    /// The quotient runs alone, before any MSM: its passes are short parallel loops, and
    /// beside long MSM tasks they would wait for free threads (a 2^17 quotient took 0.3 s
    /// instead of 0.02 s next to the witness MSMs on 16 cores).
    fn h_sum(
        &self,
        a: Vec<Scalar>,
        b: Vec<Scalar>,
        c: Vec<Scalar>,
    ) -> Result<G1Projective, ProverError> {
        let h = ntt::quotient(a, b, c)?;
        timed("h", || {
            check_len("H query", self.srs.h.len(), h.len())?;
            Ok(msm::msm_g1(&self.srs.h, &h))
        })
    }

    /// The four witness MSMs side by side: small circuits (PoSt) leave most of a many-core
    /// machine idle in each MSM alone, and rayon's work stealing keeps the cores busy when
    /// they run together. Each closure owns the vectors it reads and drops them as soon as its
    /// MSMs are done (the aux assignment of a 32 GiB partition is 4 GiB).
    fn witness_sums(&self, w: Witness) -> Result<WitnessSums, ProverError> {
        let srs = &*self.srs;
        let Witness {
            input,
            aux,
            a_aux_density,
            b_input_density,
            b_aux_density,
            b_in,
        } = w;
        let n_in = input.len();
        check_len("L query", srs.l.len(), aux.len())?;
        let b_input = dense(&input, &b_input_density);
        let b_aux = dense(&aux, &b_aux_density);
        let a_aux = dense(&aux, &a_aux_density);
        check_len("A query", srs.a.len(), n_in + a_aux.len())?;
        check_len("B query in G1", srs.b_g1.len(), b_in + b_aux.len())?;
        check_len("B query in G2", srs.b_g2.len(), b_in + b_aux.len())?;
        check_len("B inputs", b_in, b_input.len())?;
        let l_and_a = move || {
            rayon::join(
                move || timed("l", || Ok(msm::msm_g1(&srs.l, &aux))),
                move || {
                    timed("a", || {
                        Ok(msm::msm_g1(&srs.a[..n_in], &input)
                            + msm::msm_g1(&srs.a[n_in..], &a_aux))
                    })
                },
            )
        };
        let b_queries = || {
            rayon::join(
                || {
                    timed("b_g1", || {
                        Ok(msm::msm_g1(&srs.b_g1[..b_in], &b_input)
                            + msm::msm_g1(&srs.b_g1[b_in..], &b_aux))
                    })
                },
                || {
                    timed("b_g2", || {
                        Ok(msm::msm_g2(&srs.b_g2[..b_in], &b_input)
                            + msm::msm_g2(&srs.b_g2[b_in..], &b_aux))
                    })
                },
            )
        };
        let ((l, a), (b_g1, b_g2)) = rayon::join(l_and_a, b_queries);
        Ok(WitnessSums {
            l: l?,
            a: a?,
            b_g1: b_g1?,
            b_g2: b_g2?,
        })
    }
}

/// Runs one MSM stage and traces how long it took.
fn timed<T>(what: &str, f: impl FnOnce() -> Result<T, ProverError>) -> Result<T, ProverError> {
    let t = Instant::now();
    let out = f();
    tracing::trace!(msm = what, ms = t.elapsed().as_millis() as u64, "msm done");
    out
}

/// The prover checks every length before; this keeps a wrong call from reaching an MSM that
/// would read past a slice.
fn check_len(what: &'static str, left: usize, right: usize) -> Result<(), ProverError> {
    if left == right {
        Ok(())
    } else {
        Err(ProverError::LengthMismatch { what, left, right })
    }
}
