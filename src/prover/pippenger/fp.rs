//! Inlined additive arithmetic in Fp on blst's representation (six little-endian 64-bit
//! limbs, Montgomery form, fully reduced).
//!
//! A bucket addition does as many additions, subtractions and comparisons as products. blst
//! exports them only as out-of-line calls (and a derived `==` on the limbs becomes a
//! `memcmp` call), which cost a third of the addition's time in profiles; written here they
//! inline into the bucket loop. Products and inversions stay with blst's assembly.

use blst::blst_fp;

/// The BLS12-381 base field modulus p, little-endian limbs.
const P: [u64; 6] = [
    0xb9fe_ffff_ffff_aaab,
    0x1eab_fffe_b153_ffff,
    0x6730_d2a0_f6b0_f624,
    0x6477_4b84_f385_12bf,
    0x4b1b_a7b6_434b_acd7,
    0x1a01_11ea_397f_e69a,
];

/// `a − b` over six limbs and the final borrow.
#[inline(always)]
fn sub_limbs(a: &[u64; 6], b: &[u64; 6]) -> ([u64; 6], bool) {
    let mut out = [0u64; 6];
    let mut borrow = false;
    for k in 0..6 {
        let (d1, b1) = a[k].overflowing_sub(b[k]);
        let (d2, b2) = d1.overflowing_sub(borrow as u64);
        out[k] = d2;
        borrow = b1 | b2;
    }
    (out, borrow)
}

/// `a + b` over six limbs (no carry out: both are below p < 2^381).
#[inline(always)]
fn add_limbs(a: &[u64; 6], b: &[u64; 6]) -> [u64; 6] {
    let mut out = [0u64; 6];
    let mut carry = false;
    for k in 0..6 {
        let (s1, c1) = a[k].overflowing_add(b[k]);
        let (s2, c2) = s1.overflowing_add(carry as u64);
        out[k] = s2;
        carry = c1 | c2;
    }
    out
}

/// `a + b mod p`.
#[inline(always)]
pub fn add(a: &blst_fp, b: &blst_fp) -> blst_fp {
    let s = add_limbs(&a.l, &b.l);
    let (t, borrow) = sub_limbs(&s, &P);
    blst_fp {
        l: if borrow { s } else { t },
    }
}

/// `a − b mod p`.
#[inline(always)]
pub fn sub(a: &blst_fp, b: &blst_fp) -> blst_fp {
    let (d, borrow) = sub_limbs(&a.l, &b.l);
    blst_fp {
        l: if borrow { add_limbs(&d, &P) } else { d },
    }
}

/// `−a mod p` when `flag`, else `a` (zero stays zero).
#[inline(always)]
pub fn cneg(a: &blst_fp, flag: bool) -> blst_fp {
    if flag && !is_zero(a) {
        blst_fp {
            l: sub_limbs(&P, &a.l).0,
        }
    } else {
        *a
    }
}

/// `a == b` (both fully reduced).
#[inline(always)]
pub fn eq(a: &blst_fp, b: &blst_fp) -> bool {
    (0..6).fold(0u64, |acc, k| acc | (a.l[k] ^ b.l[k])) == 0
}

/// `a == 0`.
#[inline(always)]
pub fn is_zero(a: &blst_fp) -> bool {
    a.l.iter().fold(0u64, |acc, l| acc | l) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use blstrs::Fp;
    use ff::Field;
    use rand::SeedableRng;

    fn raw(x: Fp) -> blst_fp {
        // SAFETY: blstrs' Fp is a transparent wrapper over blst_fp.
        unsafe { std::mem::transmute::<Fp, blst_fp>(x) }
    }

    #[test]
    fn agrees_with_blst_on_random_and_edge_values() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(21);
        let mut values = vec![Fp::ZERO, Fp::ONE, -Fp::ONE, Fp::from(2u64), -Fp::from(2u64)];
        values.extend((0..50).map(|_| Fp::random(&mut rng)));
        for &a in &values {
            for &b in &values {
                assert_eq!(add(&raw(a), &raw(b)), raw(a + b));
                assert_eq!(sub(&raw(a), &raw(b)), raw(a - b));
                assert_eq!(eq(&raw(a), &raw(b)), a == b);
            }
            assert_eq!(cneg(&raw(a), true), raw(-a));
            assert_eq!(cneg(&raw(a), false), raw(a));
            assert_eq!(is_zero(&raw(a)), a == Fp::ZERO);
        }
    }
}
