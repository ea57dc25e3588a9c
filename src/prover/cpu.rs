//! The CPU backend: rayon NTTs and a batch-affine Pippenger (blst's for small MSMs).

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};

use super::{msm, ntt, Backend, ProverError};

/// How the CPU prover computes, built once at start from the configuration (`[debug]`
/// `cpu_simd` and `cpu_msm_window_bits`, see cuzk.toml(5)) or from `cuzk bench` flags, and
/// handed to [`CpuBackend::new`]. The defaults are what production runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuOptions {
    /// Whether the eight-lane AVX-512 IFMA paths (the MSM's batch solver and the quotient's
    /// passes) may run. They run where this is set and the CPU has the instructions; unset,
    /// the portable paths run everywhere (for A/B runs and for testing the portable paths on
    /// an IFMA machine). Both give the same bits.
    pub simd: bool,
    /// A window width (2..=24 bits) forced on our Pippenger for sweeps; `None` chooses it per
    /// MSM from the size (the production setting).
    pub msm_window_bits: Option<u32>,
}

impl Default for CpuOptions {
    fn default() -> Self {
        CpuOptions {
            simd: true,
            msm_window_bits: None,
        }
    }
}

impl CpuOptions {
    /// The smallest and largest window width [`CpuOptions::msm_window_bits`] may force.
    pub const WINDOW_BITS: std::ops::RangeInclusive<u32> = 2..=24;

    /// Whether the eight-lane paths run with these options on this CPU.
    pub fn vector_paths(&self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            self.simd && super::simd::detected()
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    }

    /// The options the configuration's `[debug]` keys `cpu_simd` and `cpu_msm_window_bits`
    /// describe (their ranges were checked when it was parsed).
    pub fn from_config(config: &crate::config::Config) -> Self {
        CpuOptions {
            simd: config.debug.cpu_simd,
            msm_window_bits: config.debug.cpu_msm_window_bits,
        }
    }

    /// The quotient's arithmetic with these options on this CPU.
    pub fn arith(&self) -> ntt::Arith {
        if self.vector_paths() {
            ntt::Arith::Ifma
        } else {
            ntt::Arith::Scalar
        }
    }
}

/// Proves on the CPU with every core rayon (and, for small MSMs, blst) is given.
#[derive(Debug, Default, Clone)]
pub struct CpuBackend {
    options: CpuOptions,
}

impl CpuBackend {
    /// A CPU backend computing as `options` say.
    pub fn new(options: CpuOptions) -> Self {
        CpuBackend { options }
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

    fn quotient(
        &self,
        a: Vec<Scalar>,
        b: Vec<Scalar>,
        c: Vec<Scalar>,
    ) -> Result<Vec<Scalar>, ProverError> {
        ntt::quotient_using(a, b, c, self.options.arith())
    }

    fn msm_g1(&self, bases: &[G1Affine], scalars: &[Scalar]) -> Result<G1Projective, ProverError> {
        check_len(bases.len(), scalars.len())?;
        Ok(msm::msm_g1_with(&self.options, bases, scalars))
    }

    fn msm_g2(&self, bases: &[G2Affine], scalars: &[Scalar]) -> Result<G2Projective, ProverError> {
        check_len(bases.len(), scalars.len())?;
        Ok(msm::msm_g2_with(&self.options, bases, scalars))
    }

    /// Small circuits (PoSt) leave most of a many-core machine idle in each MSM alone;
    /// rayon's work stealing keeps the cores busy when the MSMs run together.
    fn concurrent_msms(&self) -> bool {
        true
    }
}

fn check_len(bases: usize, scalars: usize) -> Result<(), ProverError> {
    if bases == scalars {
        Ok(())
    } else {
        Err(ProverError::Backend(format!(
            "{bases} bases for {scalars} scalars"
        )))
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
