//! How the CPU prover computes ([`CpuOptions`]): the prover's MSMs and NTTs read them, and
//! `super::cpu` proves with them (and re-exports them, where callers name them).

use super::ntt;

/// How the CPU prover computes, built once at start from the configuration (`[debug]`
/// `cpu_simd` and `cpu_msm_window_bits`, see cuzk.toml(5)) or from `cuzk bench` flags, and
/// handed to [`CpuBackend::new`](super::cpu::CpuBackend::new). The defaults are what production runs.
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
