//! What the eight-lane AVX-512 IFMA paths share (`fr52` for the quotient, `pippenger::fp52`
//! for the MSM): the run-time check that chooses them and the smallest vector helpers.

#![cfg(target_arch = "x86_64")]

use std::arch::x86_64::{__m512i, _mm512_set1_epi64};

/// Field elements per vector: eight 64-bit lanes of a 512-bit register.
pub const LANES: usize = 8;

/// The low 52 bits of a lane, one radix-2^52 limb.
pub const MASK52: u64 = (1 << 52) - 1;

/// Whether this CPU has the instructions of the eight-lane paths (AVX-512F, DQ and IFMA),
/// checked once per process. Whether they run is [`super::cpu::CpuOptions::vector_paths`]:
/// this and the `simd` option.
pub fn detected() -> bool {
    static DETECTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *DETECTED.get_or_init(|| {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512dq")
            && std::arch::is_x86_feature_detected!("avx512ifma")
    })
}

/// `v` in every lane.
#[inline]
#[target_feature(enable = "avx512f")]
pub fn splat(v: u64) -> __m512i {
    _mm512_set1_epi64(v as i64)
}
