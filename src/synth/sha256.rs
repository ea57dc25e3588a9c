//! SHA-256's witness on machine words: the variables bellperson's `sha256` gadget allocates,
//! in its order, without running the gadget.
//!
//! The gadget spends most of its time building linear combinations (every `UInt32`
//! addition sums its operands' bits into one, and `MultiEq` folds those together) that a
//! witness-only synthesis throws away. Here a 32-bit word keeps, besides its value, which of
//! its bits are constants and which variables are read negated — the only things that decide
//! what the gadget allocates — so one word operation replaces 32 boolean gadgets and no
//! linear combination is ever made. The result is checked against the gadget itself (tests
//! below; `porep_e2e` on whole partitions).

use bellperson::gadgets::boolean::Boolean;
use bellperson::SynthesisError;
use blstrs::Scalar;
use ff::{Field, PrimeField};

/// A 32-bit word as bellperson's `UInt32` holds it (bit `i` least significant first).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Word {
    /// Each bit's value.
    v: u32,
    /// Bits that are constants (`Boolean::Constant`).
    c: u32,
    /// Variable bits read negated (`Boolean::Not`); never set where `c` is.
    n: u32,
}

/// The variables an operation allocates, lowest bit first: one per set bit of `mask`, holding
/// its bit of `val`, followed (for the bits set in `then`) by a second one holding its bit of
/// `then_val`.
#[derive(Clone, Copy, Debug, Default)]
struct Alloc {
    mask: u32,
    val: u32,
    then: u32,
    then_val: u32,
}

impl Alloc {
    const fn one(mask: u32, val: u32) -> Alloc {
        Alloc {
            mask,
            val,
            then: 0,
            then_val: 0,
        }
    }
}

impl Word {
    const fn constant(v: u32) -> Word {
        Word { v, c: !0, n: 0 }
    }

    /// Freshly allocated variables holding `v`.
    const fn variables(v: u32) -> Word {
        Word { v, c: 0, n: 0 }
    }

    fn rotr(self, by: u32) -> Word {
        Word {
            v: self.v.rotate_right(by),
            c: self.c.rotate_right(by),
            n: self.n.rotate_right(by),
        }
    }

    /// `by` in 1..32: the bits shifted in are constant zeros.
    fn shr(self, by: u32) -> Word {
        Word {
            v: self.v >> by,
            c: (self.c >> by) | !(!0u32 >> by),
            n: self.n >> by,
        }
    }

    fn not(self) -> Word {
        Word {
            v: !self.v,
            c: self.c,
            n: self.n ^ !self.c,
        }
    }

    /// `self` where `mask` is set, `other` elsewhere.
    fn select(self, mask: u32, other: Word) -> Word {
        Word {
            v: (self.v & mask) | (other.v & !mask),
            c: (self.c & mask) | (other.c & !mask),
            n: (self.n & mask) | (other.n & !mask),
        }
    }
}

impl Alloc {
    /// `self` where `mask` is set, `other` elsewhere.
    fn select(self, mask: u32, other: Alloc) -> Alloc {
        let pick = |a: u32, b: u32| (a & mask) | (b & !mask);
        Alloc {
            mask: pick(self.mask, other.mask),
            val: pick(self.val, other.val),
            then: pick(self.then, other.then),
            then_val: pick(self.then_val, other.then_val),
        }
    }
}

/// `Boolean::xor` on every bit: a constant passes the other bit through (negated when it is
/// one); two variables allocate their XOR, read negated when exactly one of them was.
fn xor(a: Word, b: Word) -> (Word, Alloc) {
    let v = a.v ^ b.v;
    let both = !a.c & !b.c;
    let n = (a.c & !b.c & (b.n ^ a.v)) | (b.c & !a.c & (a.n ^ b.v)) | (both & (a.n ^ b.n));
    let w = Word { v, c: a.c & b.c, n };
    // The allocated variable holds the XOR of the two variables as stored.
    (w, Alloc::one(both, v ^ n))
}

/// `Boolean::and` on every bit: a constant zero gives zero, a constant one the other bit;
/// two variables allocate their AND (whichever of `and`, `and_not`, `nor` it takes).
fn and(a: Word, b: Word) -> (Word, Alloc) {
    let v = a.v & b.v;
    let zero = (a.c & !a.v) | (b.c & !b.v);
    let both = !a.c & !b.c;
    let passed = (a.c & !b.c & b.n) | (b.c & !a.c & a.n);
    let w = Word {
        v,
        c: zero | (a.c & b.c),
        n: !zero & passed,
    };
    (w, Alloc::one(both, v))
}

fn not_of((w, a): (Word, Alloc)) -> (Word, Alloc) {
    (w.not(), a)
}

/// Cases tried in order, each claiming the bits its mask selects among those left; the bits
/// no case claims allocate as `general` does.
fn by_cases(value: u32, general: Alloc, cases: &[(u32, (Word, Alloc))]) -> (Word, Alloc) {
    let mut left = !0u32;
    let mut w = Word::variables(value);
    let mut alloc = general;
    for &(mask, (cw, ca)) in cases {
        let take = mask & left;
        w = cw.select(take, w);
        alloc = ca.select(take, alloc);
        left &= !take;
    }
    (w, alloc)
}

/// `Boolean::sha256_ch` on every bit: `(e ∧ f) ⊕ (¬e ∧ g)`, with its shortcuts for constants
/// taken in its order.
fn ch(e: Word, f: Word, g: Word) -> (Word, Alloc) {
    let value = (e.v & f.v) ^ (!e.v & g.v);
    let general = Alloc::one(!0, value);
    if e.c | f.c | g.c == 0 {
        return (Word::variables(value), general);
    }
    let none = Alloc::default();
    by_cases(
        value,
        general,
        &[
            (e.c & f.c & g.c, (Word::constant(value), none)),
            (e.c & !e.v, (g, none)),
            (f.c & !f.v, and(e.not(), g)),
            (g.c & !g.v, and(e, f)),
            (g.c & g.v, not_of(and(e, f.not()))),
            (f.c & f.v, not_of(and(e.not(), g.not()))),
        ],
    )
}

/// `Boolean::sha256_maj` on every bit: `(a ∧ b) ⊕ (a ∧ c) ⊕ (b ∧ c)`, shortcuts in its order.
/// Three variables allocate the majority and then `b ∧ c`, which its constraint uses.
fn maj(a: Word, b: Word, c: Word) -> (Word, Alloc) {
    let value = (a.v & b.v) ^ (a.v & c.v) ^ (b.v & c.v);
    let general = Alloc {
        mask: !0,
        val: value,
        then: !0,
        then_val: b.v & c.v,
    };
    if a.c | b.c | c.c == 0 {
        return (Word::variables(value), general);
    }
    let none = Alloc::default();
    by_cases(
        value,
        general,
        &[
            (a.c & b.c & c.c, (Word::constant(value), none)),
            (a.c & !a.v, and(b, c)),
            (b.c & !b.v, and(a, c)),
            (c.c & !c.v, and(a, b)),
            (c.c & c.v, not_of(and(a.not(), b.not()))),
            (b.c & b.v, not_of(and(a.not(), c.not()))),
            (a.c & a.v, not_of(and(b.not(), c.not()))),
        ],
    )
}

/// Where the witness goes: the assignment's auxiliary variables, and the constraints the
/// gadget would have enforced.
pub(crate) struct Sink<'a> {
    aux: &'a mut Vec<Scalar>,
    constraints: usize,
    /// Bits the current compression's `MultiEq` holds (it enforces one constraint each time
    /// the next addition would not fit a field element, and one at the end).
    multieq_bits: usize,
}

impl<'a> Sink<'a> {
    pub(crate) fn new(aux: &'a mut Vec<Scalar>) -> Self {
        Sink {
            aux,
            constraints: 0,
            multieq_bits: 0,
        }
    }

    /// Constraints enforced so far.
    pub(crate) fn constraints(&self) -> usize {
        self.constraints
    }

    /// One boolean variable per allocated bit, each with its one constraint.
    fn bits(&mut self, a: Alloc) {
        let mut m = a.mask | a.then;
        while m != 0 {
            let i = m.trailing_zeros();
            if (a.mask >> i) & 1 == 1 {
                self.push_bit((a.val >> i) & 1 == 1);
            }
            if (a.then >> i) & 1 == 1 {
                self.push_bit((a.then_val >> i) & 1 == 1);
            }
            m &= m - 1;
        }
        self.constraints += (a.mask.count_ones() + a.then.count_ones()) as usize;
    }

    fn push_bit(&mut self, b: bool) {
        self.aux.push(if b { Scalar::ONE } else { Scalar::ZERO });
    }

    fn op(&mut self, (w, a): (Word, Alloc)) -> Word {
        self.bits(a);
        w
    }

    /// `UInt32::addmany`: every result bit of the sum (carries included) is allocated, and
    /// the equation goes to the compression's `MultiEq`.
    fn add(&mut self, ops: &[Word]) -> Word {
        let sum: u64 = ops.iter().map(|w| u64::from(w.v)).sum();
        if ops.iter().all(|w| w.c == !0) {
            return Word::constant(sum as u32);
        }
        let max = ops.len() as u64 * u64::from(u32::MAX);
        let bits = (u64::BITS - max.leading_zeros()) as usize;
        for i in 0..bits {
            self.push_bit((sum >> i) & 1 == 1);
        }
        self.constraints += bits;
        if Scalar::CAPACITY as usize <= self.multieq_bits + bits {
            self.constraints += 1;
            self.multieq_bits = 0;
        }
        self.multieq_bits += bits;
        Word::variables(sum as u32)
    }

    fn xor3(&mut self, a: Word, b: Word, c: Word) -> Word {
        let ab = self.op(xor(a, b));
        self.op(xor(ab, c))
    }

    /// `sha256_compression_function`.
    fn compress(&mut self, block: &[Word], cur: &[Word; 8]) -> [Word; 8] {
        let mut w = [Word::constant(0); 64];
        w[..16].copy_from_slice(block);
        for i in 16..64 {
            let x = w[i - 15];
            let s0 = self.xor3(x.rotr(7), x.rotr(18), x.shr(3));
            let y = w[i - 2];
            let s1 = self.xor3(y.rotr(17), y.rotr(19), y.shr(10));
            w[i] = self.add(&[w[i - 16], s0, w[i - 7], s1]);
        }
        // `a` and `e` stay unsummed until a round reads them, so that their additions take
        // every operand at once (the gadget's `Maybe::Deferred`).
        let mut a: Vec<Word> = vec![cur[0]];
        let mut e: Vec<Word> = vec![cur[4]];
        let [_, mut b, mut c, mut d, _, mut f, mut g, mut h] = *cur;
        for (i, &k) in ROUND_CONSTANTS.iter().enumerate() {
            let new_e = self.settle(&e);
            let s1 = self.xor3(new_e.rotr(6), new_e.rotr(11), new_e.rotr(25));
            let chv = self.op(ch(new_e, f, g));
            let temp1 = [h, s1, chv, Word::constant(k), w[i]];
            let new_a = self.settle(&a);
            let s0 = self.xor3(new_a.rotr(2), new_a.rotr(13), new_a.rotr(22));
            let majv = self.op(maj(new_a, b, c));
            h = g;
            g = f;
            f = new_e;
            e = temp1.iter().copied().chain([d]).collect();
            d = c;
            c = b;
            b = new_a;
            a = temp1.iter().copied().chain([s0, majv]).collect();
        }
        a.push(cur[0]);
        e.push(cur[4]);
        let out = [
            self.add(&a),
            self.add(&[cur[1], b]),
            self.add(&[cur[2], c]),
            self.add(&[cur[3], d]),
            self.add(&e),
            self.add(&[cur[5], f]),
            self.add(&[cur[6], g]),
            self.add(&[cur[7], h]),
        ];
        if self.multieq_bits > 0 {
            self.constraints += 1;
            self.multieq_bits = 0;
        }
        out
    }

    /// A deferred sum read: one operand is the word itself, more are added now.
    fn settle(&mut self, ops: &[Word]) -> Word {
        match ops {
            [one] => *one,
            many => self.add(many),
        }
    }

    /// bellperson's `sha256` over `input`, the padded message's words: the digest's words.
    fn sha256(&mut self, input: &[Word]) -> [Word; 8] {
        let mut cur = IV.map(Word::constant);
        for block in input.chunks(16) {
            cur = self.compress(block, &cur);
        }
        cur
    }
}

/// The padded message's length in bits: one 1 bit, zeros, and the 64-bit length, to a whole
/// number of 512-bit blocks.
fn padded_len(bits: u64) -> u64 {
    (bits + 1 + 64).div_ceil(512) * 512
}

/// The padded message as words, from the gadget's input booleans.
fn words(input: &[Boolean]) -> Result<Vec<Word>, SynthesisError> {
    let len = input.len() as u64;
    let total = padded_len(len) as usize;
    let mut words = vec![Word::constant(0); total / 32];
    for (i, bit) in input.iter().enumerate() {
        let (value, constant, negated) = match bit {
            Boolean::Constant(b) => (*b, true, false),
            Boolean::Is(x) => (
                x.get_value().ok_or(SynthesisError::AssignmentMissing)?,
                false,
                false,
            ),
            Boolean::Not(x) => (
                !x.get_value().ok_or(SynthesisError::AssignmentMissing)?,
                false,
                true,
            ),
        };
        // Bits arrive most significant first within each word.
        let at = 1u32 << (31 - (i % 32));
        let w = &mut words[i / 32];
        w.c &= !at;
        if value {
            w.v |= at;
        }
        if constant {
            w.c |= at;
        }
        if negated {
            w.n |= at;
        }
    }
    let one = input.len();
    words[one / 32].v |= 1 << (31 - (one % 32));
    let n = words.len();
    words[n - 2].v = (len >> 32) as u32;
    words[n - 1].v = len as u32;
    Ok(words)
}

/// The witness of bellperson's `sha256` over `input` (a whole number of bytes) pushed to
/// `sink`, and the digest as filecoin packs it into a field element: each byte's bits least
/// significant first, the first `Scalar::CAPACITY` bits.
pub(crate) fn sha256_packed(
    sink: &mut Sink<'_>,
    input: &[Boolean],
) -> Result<Scalar, SynthesisError> {
    if !input.len().is_multiple_of(8) {
        return Err(SynthesisError::Unsatisfiable);
    }
    let words = words(input)?;
    let digest = sink.sha256(&words);
    let mut bytes = [0u8; 32];
    for (chunk, w) in bytes.chunks_exact_mut(4).zip(digest) {
        chunk.copy_from_slice(&w.v.to_be_bytes());
    }
    // 254 bits: the last byte keeps its low six.
    bytes[31] &= 0x3f;
    Option::from(Scalar::from_bytes_le(&bytes)).ok_or(SynthesisError::Unsatisfiable)
}

const ROUND_CONSTANTS: [u32; 64] = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
];

const IV: [u32; 8] = [
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
];

#[cfg(test)]
mod tests {
    use bellperson::gadgets::boolean::{AllocatedBit, Boolean};
    use bellperson::SynthesisError;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use sha2::{Digest, Sha256};

    use crate::synth::{sha256_packed_gadget, synthesize_witness, Gadgets, Synthesize};

    /// How one input bit is held.
    #[derive(Clone, Copy)]
    enum Kind {
        Constant,
        Is,
        Not,
    }

    /// Allocates `bits` (value, kind) and hashes them, natively or with bellperson's gadget.
    struct Hash {
        bits: Vec<(bool, Kind)>,
        native: bool,
    }

    impl Synthesize for Hash {
        fn synthesize_into<CS: Gadgets>(self, cs: &mut CS) -> Result<(), SynthesisError> {
            let mut input = Vec::with_capacity(self.bits.len());
            for (i, (v, kind)) in self.bits.into_iter().enumerate() {
                let mut alloc =
                    |v| AllocatedBit::alloc(cs.namespace(|| format!("bit {i}")), Some(v));
                input.push(match kind {
                    Kind::Constant => Boolean::constant(v),
                    Kind::Is => Boolean::from(alloc(v)?),
                    Kind::Not => Boolean::from(alloc(!v)?).not(),
                });
            }
            if self.native {
                cs.sha256_packed(&input)?;
            } else {
                sha256_packed_gadget(cs, &input)?;
            }
            Ok(())
        }
    }

    fn bits_of(bytes: &[u8], kind: impl Fn(usize) -> Kind) -> Vec<(bool, Kind)> {
        (0..bytes.len() * 8)
            .map(|i| ((bytes[i / 8] >> (7 - i % 8)) & 1 == 1, kind(i)))
            .collect()
    }

    /// The native witness equals the gadget's, variable for variable, with the same
    /// constraint count; the packed digest is SHA-256's.
    fn check(bytes: &[u8], kind: impl Fn(usize) -> Kind) {
        let bits = bits_of(bytes, kind);
        let gadget = synthesize_witness(Hash {
            bits: bits.clone(),
            native: false,
        })
        .unwrap();
        let native = synthesize_witness(Hash { bits, native: true }).unwrap();
        assert_eq!(
            native.constraints,
            gadget.constraints,
            "{} bytes",
            bytes.len()
        );
        assert_eq!(native.aux.len(), gadget.aux.len(), "{} bytes", bytes.len());
        assert!(
            native == gadget,
            "{} bytes: a variable differs",
            bytes.len()
        );
        let mut digest: [u8; 32] = Sha256::digest(bytes).into();
        digest[31] &= 0x3f;
        let packed = blstrs::Scalar::from_bytes_le(&digest).unwrap();
        assert_eq!(native.aux.last(), Some(&packed));
    }

    #[test]
    fn variables_alone() {
        let mut rng = StdRng::seed_from_u64(1);
        for len in [0, 1, 55, 56, 64, 119, 1248] {
            let bytes: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
            check(&bytes, |_| Kind::Is);
        }
    }

    #[test]
    fn constants_and_negations_mixed_per_bit() {
        let mut rng = StdRng::seed_from_u64(2);
        for len in [4, 32, 64, 100, 200] {
            let bytes: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
            let kinds: Vec<Kind> = (0..len * 8)
                .map(|_| match rng.gen_range(0..3) {
                    0 => Kind::Constant,
                    1 => Kind::Is,
                    _ => Kind::Not,
                })
                .collect();
            check(&bytes, |i| kinds[i]);
        }
    }

    #[test]
    fn edge_inputs() {
        // All constants: nothing but the packed digest is allocated.
        check(&[0xa5; 64], |_| Kind::Constant);
        check(&[0; 64], |_| Kind::Not);
        check(&[0xff; 64], |_| Kind::Not);
        check(&[0xff; 64], |_| Kind::Is);
        // Filecoin's layouts: whole constant words (padding, a layer index) among variables,
        // and one constant bit per 32-byte field element.
        check(&[0x3c; 1248], |i| {
            if (256..288).contains(&i) || (352..512).contains(&i) || i % 256 == 248 {
                Kind::Constant
            } else {
                Kind::Is
            }
        });
    }
}
