//! The CPU backend: rayon NTTs and a batch-affine Pippenger (blst's for small MSMs).

use std::sync::Arc;
use std::time::Instant;

use blstrs::{G1Projective, Scalar};

use super::{
    dense, msm, ntt, Backend, PreparedSrs, ProverError, Scalars, Sums, Witness, WitnessSums,
};
use crate::srs::{Srs, Want};

pub use super::options::CpuOptions;

/// Proves on the CPU with every core rayon (and, for small MSMs, blst) is given.
#[derive(Debug, Default, Clone)]
pub struct CpuBackend {
    options: CpuOptions,
    /// The fallback of devices: it claims no host copy of the points (see `prepare`).
    fallback: bool,
}

impl CpuBackend {
    /// A CPU backend computing as `options` say.
    pub fn new(options: CpuOptions) -> Self {
        CpuBackend {
            options,
            fallback: false,
        }
    }

    /// The CPU prover behind devices, for partitions a device failed: it keeps no host copy
    /// of the points alive. A proof on it reads again, from the parameter file, the queries
    /// whose copies were released while the devices held them; they go again at the next
    /// release (after the next proof on a device).
    pub fn fallback(options: CpuOptions) -> Self {
        CpuBackend {
            options,
            fallback: true,
        }
    }

    /// The options it was built with.
    pub fn options(&self) -> &CpuOptions {
        &self.options
    }
}

impl Backend for CpuBackend {
    fn name(&self) -> String {
        format!("cpu ({} threads)", rayon::current_num_threads())
    }

    /// The CPU reads the points where the parameter cache keeps them. A CPU proving device
    /// claims every query's host copy for as long as it may prove with the set; the fallback
    /// of devices claims none, and reads the released ones again when it proves.
    fn prepare(&self, srs: Arc<Srs>) -> Result<Arc<dyn PreparedSrs>, ProverError> {
        let wants = (!self.fallback).then(|| {
            [
                srs.h.want(),
                srs.l.want(),
                srs.a.want(),
                srs.b_g1.want(),
                srs.b_g2.want(),
            ]
        });
        Ok(Arc::new(CpuPrepared {
            srs,
            options: self.options.clone(),
            _wants: wants,
        }))
    }
}

/// A parameter set on the CPU: the host points themselves, and how to compute with them.
struct CpuPrepared {
    srs: Arc<Srs>,
    options: CpuOptions,
    /// The claims that keep the host copies (see [`crate::srs::HostPoints`]); none for the
    /// fallback of devices.
    _wants: Option<[Want; 5]>,
}

impl CpuPrepared {
    /// The quotient's coefficients h, checked against the H query's length.
    fn quotient(
        &self,
        a: Vec<Scalar>,
        b: Vec<Scalar>,
        c: Vec<Scalar>,
    ) -> Result<Vec<Scalar>, ProverError> {
        let h = ntt::quotient_using(a, b, c, self.options.arith())?;
        check_len("H query", self.srs.h.len(), h.len())?;
        Ok(h)
    }

    /// Σ h_i · H_i.
    fn h_msm(&self, h: &[Scalar]) -> Result<G1Projective, ProverError> {
        let points = self.srs.h.get()?;
        timed("h", || Ok(msm::msm_g1_with(&self.options, &points, h)))
    }
}

impl PreparedSrs for CpuPrepared {
    fn srs(&self) -> &Arc<Srs> {
        &self.srs
    }

    /// The quotient runs alone, before any MSM: its passes are short parallel loops, and
    /// beside long MSM tasks they would wait for free threads (a 2^17 quotient took 0.3 s
    /// instead of 0.02 s next to the witness MSMs on 16 cores).
    fn h_sum(&self, a: Scalars, b: Scalars, c: Scalars) -> Result<G1Projective, ProverError> {
        let h = self.quotient(a.into_vec(), b.into_vec(), c.into_vec())?;
        self.h_msm(&h)
    }

    /// The quotient alone (see [`CpuPrepared::h_sum`]), then the H query's MSM beside the
    /// four witness MSMs: on a many-core machine one MSM alone leaves cores idle, and rayon's
    /// work stealing keeps them busy when they run together.
    fn sums(&self, a: Scalars, b: Scalars, c: Scalars, w: Witness) -> Result<Sums, ProverError> {
        let start = Instant::now();
        let h = self.quotient(a.into_vec(), b.into_vec(), c.into_vec())?;
        let h_done = start.elapsed();
        let (h, witness) = rayon::join(|| self.h_msm(&h), || self.witness_sums(w));
        Ok(Sums {
            h: h?,
            witness: witness?,
            h_done,
        })
    }

    /// The four witness MSMs side by side: small circuits (PoSt) leave most of a many-core
    /// machine idle in each MSM alone, and rayon's work stealing keeps the cores busy when
    /// they run together. Each closure owns the vectors it reads and drops them as soon as its
    /// MSMs are done (the aux assignment of a 32 GiB partition is 4 GiB).
    fn witness_sums(&self, w: Witness) -> Result<WitnessSums, ProverError> {
        let (srs, o) = (&*self.srs, &self.options);
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
        let (l, a, b_g1, b_g2) = (srs.l.get()?, srs.a.get()?, srs.b_g1.get()?, srs.b_g2.get()?);
        let (l, a, b_g1, b_g2) = (&l[..], &a[..], &b_g1[..], &b_g2[..]);
        let l_and_a = move || {
            rayon::join(
                move || timed("l", || Ok(msm::msm_g1_with(o, l, &aux))),
                move || {
                    timed("a", || {
                        Ok(msm::msm_g1_with(o, &a[..n_in], &input)
                            + msm::msm_g1_with(o, &a[n_in..], &a_aux))
                    })
                },
            )
        };
        let b_queries = || {
            rayon::join(
                || {
                    timed("b_g1", || {
                        Ok(msm::msm_g1_with(o, &b_g1[..b_in], &b_input)
                            + msm::msm_g1_with(o, &b_g1[b_in..], &b_aux))
                    })
                },
                || {
                    timed("b_g2", || {
                        Ok(msm::msm_g2_with(o, &b_g2[..b_in], &b_input)
                            + msm::msm_g2_with(o, &b_g2[b_in..], &b_aux))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configuration_defaults_are_the_built_in_ones() {
        let config = crate::config::Config::default();
        assert_eq!(CpuOptions::from_config(&config), CpuOptions::default());
    }

    #[test]
    fn simd_off_runs_the_portable_arithmetic() {
        let portable = CpuOptions {
            simd: false,
            ..CpuOptions::default()
        };
        assert!(!portable.vector_paths());
        assert_eq!(portable.arith(), ntt::Arith::Scalar);
        assert_eq!(CpuOptions::default().arith(), ntt::Arith::best());
    }
}
