//! Signed-digit recoding of scalars for Pippenger's windows.
//!
//! A scalar v < 2^255 is written as Σ d_j·2^(c·j) with digits d_j in [−2^(c−1), 2^(c−1))
//! (the top window keeps its digit in [0, 2^(c−1)]), so every window needs only 2^(c−1)
//! buckets: a negative digit adds the negated point to the bucket of |d|.
//!
//! The digits are computed per window without walking the carry chain: the carry into window
//! j is 1 exactly when the low c·j bits of v exceed the largest value that windows 0..j can
//! represent, (2^(c−1) − 1)·(2^(c·j) − 1)/(2^c − 1) — the bit pattern 0111…1 repeated
//! per window. That lets each window be processed by a different thread, in any order.

/// The digits of one window for any scalar.
#[derive(Clone, Debug)]
pub struct WindowDigits {
    /// Bit offset of the window, c·j.
    lo: u32,
    /// Window width c.
    c: u32,
    /// Whether this is the most significant window (no wrap to negative digits).
    top: bool,
    /// The largest value the lower windows represent; `carry_in` compares against it.
    max_below: [u64; 4],
}

/// The number of windows of width `c` that cover scalars below 2^256 with the top window's
/// digit never reaching 2^(c−1)+1.
pub fn window_count(c: u32) -> u32 {
    256u32.div_ceil(c)
}

impl WindowDigits {
    /// The recoding of window `j` (of [`window_count`]`(c)`), for `1 ≤ c ≤ 31`.
    pub fn new(c: u32, j: u32) -> Self {
        assert!((1..32).contains(&c), "window width {c} out of range");
        let lo = c * j;
        let mut max_below = [0u64; 4];
        for w in 0..j {
            // Each lower window contributes c−1 one bits under a zero top bit.
            for bit in c * w..c * w + c - 1 {
                if bit < 256 {
                    max_below[(bit / 64) as usize] |= 1 << (bit % 64);
                }
            }
        }
        WindowDigits {
            lo,
            c,
            top: j + 1 == window_count(c),
            max_below,
        }
    }

    /// The signed digit of scalar `v` (little-endian canonical limbs) in this window.
    #[inline]
    pub fn digit(&self, v: &[u64; 4]) -> i64 {
        let t = bits(v, self.lo, self.c) as i64 + self.carry_in(v) as i64;
        let half = 1i64 << (self.c - 1);
        if !self.top && t >= half {
            t - (1i64 << self.c)
        } else {
            t
        }
    }

    /// Whether the low `lo` bits of `v` exceed `max_below`.
    #[inline]
    fn carry_in(&self, v: &[u64; 4]) -> bool {
        if self.lo == 0 {
            return false;
        }
        for limb in (0..4).rev() {
            let start = limb as u32 * 64;
            if start >= self.lo {
                continue;
            }
            let width = self.lo - start;
            let x = if width >= 64 {
                v[limb]
            } else {
                v[limb] & ((1u64 << width) - 1)
            };
            let m = self.max_below[limb];
            if x != m {
                return x > m;
            }
        }
        false
    }
}

/// Bits `[lo, lo + n)` of `v` (bits past 256 read as zero), `n ≤ 32`.
#[inline]
fn bits(v: &[u64; 4], lo: u32, n: u32) -> u64 {
    if lo >= 256 {
        return 0;
    }
    let limb = (lo / 64) as usize;
    let shift = lo % 64;
    let mut x = v[limb] >> shift;
    if shift + n > 64 && limb + 1 < 4 {
        x |= v[limb + 1] << (64 - shift);
    }
    x & ((1u64 << n) - 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// The digits by the textbook sequential carry chain.
    fn sequential(v: &[u64; 4], c: u32) -> Vec<i64> {
        let w = window_count(c);
        let mut carry = 0i64;
        (0..w)
            .map(|j| {
                let t = bits(v, c * j, c) as i64 + carry;
                if j + 1 < w && t >= 1 << (c - 1) {
                    carry = 1;
                    t - (1 << c)
                } else {
                    carry = 0;
                    t
                }
            })
            .collect()
    }

    /// Σ d_j·2^(c·j) in 320-bit two's complement (wrapping), as little-endian limbs.
    fn value_of(digits: &[i64], c: u32) -> [u64; 5] {
        let mut acc = [0u64; 5];
        for (j, &d) in digits.iter().enumerate() {
            // Sign-extend d to 320 bits, shift it left by c·j, add.
            let fill = if d < 0 { u64::MAX } else { 0 };
            let mut term = [d as u64, fill, fill, fill, fill];
            let shift = c as usize * j;
            for _ in 0..shift {
                let mut carry = 0;
                for limb in term.iter_mut() {
                    let next = *limb >> 63;
                    *limb = (*limb << 1) | carry;
                    carry = next;
                }
            }
            let mut carry = false;
            for (a, t) in acc.iter_mut().zip(term) {
                let (s1, o1) = a.overflowing_add(t);
                let (s2, o2) = s1.overflowing_add(carry as u64);
                *a = s2;
                carry = o1 || o2;
            }
        }
        acc
    }

    fn scalar_below_2_255(rng: &mut impl Rng) -> [u64; 4] {
        let mut v: [u64; 4] = rng.gen();
        v[3] &= u64::MAX >> 1;
        v
    }

    #[test]
    fn windowed_digits_equal_the_carry_chain_and_sum_to_the_scalar() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let edge = [
            [0u64; 4],
            [1, 0, 0, 0],
            [u64::MAX, u64::MAX, u64::MAX, u64::MAX >> 1],
            // 0111…1 patterns hit the carry comparison's equality case.
            [0x7fff_7fff_7fff_7fff; 4],
            [0x7fff_ffff_ffff_ffff; 4],
        ];
        for c in [1u32, 2, 3, 7, 8, 12, 13, 15, 16, 17, 20, 22] {
            let windows: Vec<WindowDigits> = (0..window_count(c))
                .map(|j| WindowDigits::new(c, j))
                .collect();
            let mut scalars: Vec<[u64; 4]> = edge.to_vec();
            scalars.extend((0..200).map(|_| scalar_below_2_255(&mut rng)));
            for v in &scalars {
                let got: Vec<i64> = windows.iter().map(|w| w.digit(v)).collect();
                assert_eq!(got, sequential(v, c), "c = {c}, v = {v:x?}");
                let half = 1i64 << (c - 1);
                assert!(got.iter().all(|&d| -half <= d && d <= half), "c = {c}");
                let want = [v[0], v[1], v[2], v[3], 0];
                assert_eq!(value_of(&got, c), want, "c = {c}");
            }
        }
    }
}
