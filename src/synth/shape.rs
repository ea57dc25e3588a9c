//! A circuit's constraints recorded once ([`R1cs`]), so that later circuits of the same shape
//! need only their witness ([`super::witness`]) and the A, B, C evaluations become sparse
//! products ([`R1cs::evaluate`]).
//!
//! Every partition of a proof type is the same circuit with other values: the same
//! constraints over the same variables, in the same order. Recording them costs as much as a
//! [`super::RecordingCs`] synthesis plus the terms' memory; from then on a partition skips
//! building and evaluating linear combinations, and keeps only its assignment until its A, B
//! and C are needed.

use std::collections::HashMap;
use std::mem::MaybeUninit;

use bellperson::{ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use ff::Field;
use rayon::prelude::*;

use super::cs::{count_constraint, Mark, Marking};
use super::density::Density;
use super::gadgets::{Gadgets, Synthesize};
use super::split::SplitError;
use super::witness::Witness;
use super::Synthesized;

/// Set in [`Term::var`] for an input; clear for an aux variable.
pub const INPUT: u32 = 1 << 31;

/// One non-zero term of a linear combination: a variable and its coefficient.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(C)]
pub struct Term {
    /// The variable: an input's index with [`INPUT`] set, or an aux variable's index.
    pub var: u32,
    /// The coefficient's index in [`R1cs::coeffs`].
    pub coeff: u32,
}

impl Term {
    /// Input `index` (below 2^31) times coefficient `coeff`.
    pub fn input(index: u32, coeff: u32) -> Self {
        Term {
            var: INPUT | index,
            coeff,
        }
    }

    /// Aux variable `index` (below 2^31) times coefficient `coeff`.
    pub fn aux(index: u32, coeff: u32) -> Self {
        Term { var: index, coeff }
    }
}

/// One of A, B, C: row `r`'s terms are `terms[starts[r]..starts[r + 1]]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Matrix {
    /// Where each row starts in `terms`, and the end of the last row.
    pub starts: Vec<u32>,
    /// Every row's terms, in order.
    pub terms: Vec<Term>,
}

impl Default for Matrix {
    fn default() -> Self {
        Self {
            starts: vec![0],
            terms: Vec::new(),
        }
    }
}

impl Matrix {
    /// Number of rows (constraints).
    pub fn rows(&self) -> usize {
        self.starts.len() - 1
    }

    fn row(&self, r: usize) -> &[Term] {
        &self.terms[self.starts[r] as usize..self.starts[r + 1] as usize]
    }

    /// Appends one row from a linear combination, marking the variables it uses in the
    /// densities given (zero coefficients are skipped, as in the parameter generator).
    fn push(
        &mut self,
        lc: &LinearCombination<Scalar>,
        coeffs: &mut Coeffs,
        mut input_density: Option<&mut Vec<bool>>,
        mut aux_density: Option<&mut Vec<bool>>,
    ) -> Result<(), ShapeError> {
        for (&i, c) in lc.iter_inputs() {
            if let Some(coeff) = coeffs.index(c) {
                self.terms.push(Term {
                    var: var_index(i, INPUT)?,
                    coeff,
                });
                if let Some(d) = input_density.as_deref_mut() {
                    d[i] = true;
                }
            }
        }
        for (&i, c) in lc.iter_aux() {
            if let Some(coeff) = coeffs.index(c) {
                self.terms.push(Term {
                    var: var_index(i, 0)?,
                    coeff,
                });
                if let Some(d) = aux_density.as_deref_mut() {
                    d[i] = true;
                }
            }
        }
        let end = u32::try_from(self.terms.len()).map_err(|_| ShapeError::TooLarge)?;
        self.starts.push(end);
        Ok(())
    }

    /// Bytes it holds.
    fn bytes(&self) -> u64 {
        (self.starts.capacity() * 4 + self.terms.capacity() * std::mem::size_of::<Term>()) as u64
    }
}

fn var_index(i: usize, tag: u32) -> Result<u32, ShapeError> {
    match u32::try_from(i) {
        Ok(v) if v < INPUT => Ok(v | tag),
        _ => Err(ShapeError::TooLarge),
    }
}

/// Why a shape could not be recorded or used.
#[derive(Debug, thiserror::Error)]
pub enum ShapeError {
    /// The circuit failed to synthesize.
    #[error(transparent)]
    Synthesis(#[from] SynthesisError),
    /// A split recording failed.
    #[error(transparent)]
    Split(#[from] SplitError),
    /// More than 2^31 variables, or more than 2^32 terms in one matrix.
    #[error("the circuit is too large for a recorded shape")]
    TooLarge,
    /// A witness does not fit the shape: another circuit, or one whose constraints depend on
    /// its values.
    #[error("the witness has {what} {have}, the recorded shape {want}")]
    Mismatch {
        /// What differs.
        what: &'static str,
        /// The witness's.
        have: usize,
        /// The shape's.
        want: usize,
    },
}

/// The distinct coefficients of a shape, ONE first.
#[derive(Clone, Debug)]
struct Coeffs {
    values: Vec<Scalar>,
    index: HashMap<[u64; 4], u32>,
}

/// Equal when their values are, in order (the index is made from them).
impl PartialEq for Coeffs {
    fn eq(&self, other: &Self) -> bool {
        self.values == other.values
    }
}

impl Default for Coeffs {
    fn default() -> Self {
        let mut c = Self {
            values: Vec::new(),
            index: HashMap::new(),
        };
        c.insert(Scalar::ONE);
        c
    }
}

impl Coeffs {
    fn key(c: &Scalar) -> [u64; 4] {
        blst::blst_fr::from(*c).l
    }

    fn insert(&mut self, c: Scalar) -> u32 {
        let next = self.values.len() as u32;
        let i = *self.index.entry(Self::key(&c)).or_insert(next);
        if i == next {
            self.values.push(c);
        }
        i
    }

    /// The index of `c`; `None` for zero, which is no term at all.
    fn index(&mut self, c: &Scalar) -> Option<u32> {
        if *c == Scalar::ONE {
            Some(ONE)
        } else if bool::from(c.is_zero()) {
            None
        } else {
            Some(self.insert(*c))
        }
    }
}

/// [`R1cs::coeffs`]'s index of ONE.
const ONE: u32 = 0;

/// A circuit's constraints: A, B and C as sparse matrices over its variables (the inputs'
/// `x · 0 = 0` constraints last), and the query densities they imply.
#[derive(Clone, Debug, PartialEq)]
pub struct R1cs {
    /// A's rows.
    pub a: Matrix,
    /// B's rows.
    pub b: Matrix,
    /// C's rows.
    pub c: Matrix,
    coeffs: Coeffs,
    /// Inputs, ONE included.
    pub num_inputs: usize,
    /// Aux variables.
    pub num_aux: usize,
    /// Whether aux variable i occurs in some A combination (shared with every witness
    /// proved on this shape, not copied).
    pub a_aux_density: Density,
    /// Whether input i occurs in some B combination.
    pub b_input_density: Density,
    /// Whether aux variable i occurs in some B combination.
    pub b_aux_density: Density,
}

impl R1cs {
    /// Number of constraints, input constraints included.
    pub fn num_constraints(&self) -> usize {
        self.a.rows()
    }

    /// The distinct coefficients; [`Term::coeff`] indexes them, ONE is the first.
    pub fn coeffs(&self) -> &[Scalar] {
        &self.coeffs.values
    }

    /// Host bytes it holds.
    pub fn host_bytes(&self) -> u64 {
        let flags = self.a_aux_density.host_bytes()
            + self.b_input_density.host_bytes()
            + self.b_aux_density.host_bytes();
        self.a.bytes() + self.b.bytes() + self.c.bytes() + flags as u64
    }

    /// Every matrix's terms.
    pub fn terms(&self) -> usize {
        self.a.terms.len() + self.b.terms.len() + self.c.terms.len()
    }

    /// Checks that `w` is an assignment of this shape's variables.
    pub fn check(&self, w: &Witness) -> Result<(), ShapeError> {
        let mismatch = |what, have, want| Err(ShapeError::Mismatch { what, have, want });
        if w.input.len() != self.num_inputs {
            return mismatch("inputs", w.input.len(), self.num_inputs);
        }
        if w.aux.len() != self.num_aux {
            return mismatch("aux variables", w.aux.len(), self.num_aux);
        }
        if w.constraints != self.num_constraints() {
            return mismatch("constraints", w.constraints, self.num_constraints());
        }
        Ok(())
    }

    /// A, B and C at every constraint for the assignment `w`, into `a`, `b` and `c` (each
    /// [`R1cs::num_constraints`] long), in parallel on the current rayon pool.
    pub fn evaluate_into(
        &self,
        w: &Witness,
        a: &mut [Scalar],
        b: &mut [Scalar],
        c: &mut [Scalar],
    ) -> Result<(), ShapeError> {
        for (m, out) in [(&self.a, a), (&self.b, b), (&self.c, c)] {
            // SAFETY: `MaybeUninit<Scalar>` has `Scalar`'s layout, and `evaluate` only
            // writes valid scalars through the view (it never writes uninitialized values).
            let out = unsafe {
                std::slice::from_raw_parts_mut(
                    out.as_mut_ptr().cast::<MaybeUninit<Scalar>>(),
                    out.len(),
                )
            };
            self.evaluate(m, w, out)?;
        }
        Ok(())
    }

    /// One matrix (`self.a`, `self.b` or `self.c`) at every constraint for the assignment
    /// `w`, into `out` ([`R1cs::num_constraints`] long), every element written, in parallel
    /// on the current rayon pool.
    pub fn evaluate(
        &self,
        m: &Matrix,
        w: &Witness,
        out: &mut [MaybeUninit<Scalar>],
    ) -> Result<(), ShapeError> {
        self.check(w)?;
        let n = self.num_constraints();
        if out.len() != n || m.rows() != n {
            return Err(ShapeError::Mismatch {
                what: "evaluations",
                have: out.len(),
                want: n,
            });
        }
        let (input, aux) = (&w.input[..], &w.aux[..]);
        out.par_chunks_mut(EVAL_CHUNK)
            .enumerate()
            .for_each(|(k, chunk)| {
                let first = k * EVAL_CHUNK;
                for (j, o) in chunk.iter_mut().enumerate() {
                    o.write(self.eval_row(m.row(first + j), input, aux));
                }
            });
        Ok(())
    }

    /// [`R1cs::evaluate_into`] into new vectors, with the densities: exactly what
    /// [`super::synthesize`] records for the same circuit.
    pub fn synthesized(&self, w: Witness) -> Result<Synthesized, ShapeError> {
        let n = self.num_constraints();
        let mut a = vec![Scalar::ZERO; n];
        let mut b = vec![Scalar::ZERO; n];
        let mut c = vec![Scalar::ZERO; n];
        self.evaluate_into(&w, &mut a, &mut b, &mut c)?;
        Ok(Synthesized {
            a,
            b,
            c,
            input: w.input,
            aux: w.aux,
            a_aux_density: self.a_aux_density.to_vec(),
            b_input_density: self.b_input_density.to_vec(),
            b_aux_density: self.b_aux_density.to_vec(),
        })
    }

    #[inline]
    fn eval_row(&self, row: &[Term], input: &[Scalar], aux: &[Scalar]) -> Scalar {
        let mut acc = Scalar::ZERO;
        for t in row {
            let v = if t.var & INPUT != 0 {
                &input[(t.var & !INPUT) as usize]
            } else {
                &aux[t.var as usize]
            };
            // Most of a Filecoin witness is bits and most coefficients are one: skip the
            // multiplication where either factor makes it trivial.
            if t.coeff == ONE {
                acc += v;
            } else if !bool::from(v.is_zero()) {
                acc += *v * self.coeffs.values[t.coeff as usize];
            }
        }
        acc
    }
}

/// Rows evaluated by one task.
const EVAL_CHUNK: usize = 1 << 14;

/// A `ConstraintSystem` that records the constraints as sparse rows (and the assignment, so
/// that the circuit it records is not synthesized twice).
#[derive(Default)]
pub struct ShapeCs {
    a: Matrix,
    b: Matrix,
    c: Matrix,
    coeffs: Coeffs,
    input: Vec<Scalar>,
    aux: Vec<Scalar>,
    a_aux_density: Vec<bool>,
    b_input_density: Vec<bool>,
    b_aux_density: Vec<bool>,
    since_yield: u32,
    marking: Marking,
    /// The first error; later calls do nothing (`enforce` cannot return one).
    error: Option<ShapeError>,
    /// A blank circuit's: values are never asked for (each is recorded as zero).
    blank: bool,
}

impl ShapeCs {
    fn here(&self) -> Mark {
        Mark {
            constraints: self.a.rows(),
            aux: self.aux.len(),
            inputs: self.input.len(),
        }
    }

    fn row(
        &mut self,
        a: &LinearCombination<Scalar>,
        b: &LinearCombination<Scalar>,
        c: &LinearCombination<Scalar>,
    ) -> Result<(), ShapeError> {
        self.a
            .push(a, &mut self.coeffs, None, Some(&mut self.a_aux_density))?;
        self.b.push(
            b,
            &mut self.coeffs,
            Some(&mut self.b_input_density),
            Some(&mut self.b_aux_density),
        )?;
        self.c.push(c, &mut self.coeffs, None, None)
    }

    /// The shape and the assignment it was recorded with, the input constraints appended.
    fn finish(mut self) -> Result<(R1cs, Witness), ShapeError> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        for i in 0..self.input.len() {
            let lc = LinearCombination::zero() + Variable::new_unchecked(Index::Input(i));
            let zero = LinearCombination::zero();
            self.row(&lc, &zero, &zero)?;
        }
        for m in [&mut self.a, &mut self.b, &mut self.c] {
            m.starts.shrink_to_fit();
            m.terms.shrink_to_fit();
        }
        let witness = Witness {
            constraints: self.a.rows(),
            input: self.input,
            aux: self.aux,
        };
        let shape = R1cs {
            a: self.a,
            b: self.b,
            c: self.c,
            coeffs: self.coeffs,
            num_inputs: witness.input.len(),
            num_aux: witness.aux.len(),
            a_aux_density: self.a_aux_density.into(),
            b_input_density: self.b_input_density.into(),
            b_aux_density: self.b_aux_density.into(),
        };
        Ok((shape, witness))
    }
}

impl Gadgets for ShapeCs {}

impl ConstraintSystem<Scalar> for ShapeCs {
    type Root = Self;

    fn new() -> Self {
        Self::default()
    }

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.marking.recording();
        let value = if self.blank { Scalar::ZERO } else { f()? };
        self.aux.push(value);
        self.a_aux_density.push(false);
        self.b_aux_density.push(false);
        Ok(Variable::new_unchecked(Index::Aux(self.aux.len() - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.marking.recording();
        let value = if self.blank { Scalar::ZERO } else { f()? };
        self.input.push(value);
        self.b_input_density.push(false);
        Ok(Variable::new_unchecked(Index::Input(self.input.len() - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        self.marking.recording();
        if self.error.is_some() {
            return;
        }
        let a = a(LinearCombination::zero());
        let b = b(LinearCombination::zero());
        let c = c(LinearCombination::zero());
        if let Err(e) = self.row(&a, &b, &c) {
            self.error = Some(e);
        }
        count_constraint(&mut self.since_yield);
    }

    fn push_namespace<NR, N>(&mut self, name: N)
    where
        NR: Into<String>,
        N: FnOnce() -> NR,
    {
        let here = self.here();
        self.marking.push(name, here);
    }

    fn pop_namespace(&mut self) {
        self.marking.pop();
    }

    fn get_root(&mut self) -> &mut Self::Root {
        self
    }
}

/// Records the shape of `circuit` (the ONE input, the circuit, the input constraints) and
/// the assignment it was synthesized with.
pub fn record_shape<C: Synthesize>(circuit: C) -> Result<(R1cs, Witness), ShapeError> {
    let mut cs = ShapeCs::default();
    cs.alloc_input(|| "one", || Ok(Scalar::ONE))?;
    circuit.synthesize_into(&mut cs)?;
    cs.finish()
}

/// Records the shape of a blank circuit (one built without an assignment, as parameter
/// generators take it): as bellperson's generator does, it never asks for a value, so the
/// shape is that of any assignment.
pub fn record_blank_shape<C: Synthesize>(circuit: C) -> Result<R1cs, ShapeError> {
    let mut cs = ShapeCs {
        blank: true,
        ..ShapeCs::default()
    };
    cs.alloc_input(|| "one", || Ok(Scalar::ONE))?;
    circuit.synthesize_into(&mut cs)?;
    Ok(cs.finish()?.0)
}

/// One part of a split circuit, recorded, and where its prefix ended.
pub struct ShapePart {
    cs: ShapeCs,
    mark: Mark,
}

/// Records one part's shape (as [`super::synthesize_part`] records one part).
pub fn record_shape_part<C: Synthesize>(
    circuit: C,
    marker: &'static str,
    part: usize,
) -> Result<ShapePart, ShapeError> {
    let mut cs = ShapeCs {
        marking: Marking::new(marker),
        ..ShapeCs::default()
    };
    cs.alloc_input(|| "one", || Ok(Scalar::ONE))?;
    circuit.synthesize_into(&mut cs)?;
    if let Some(e) = cs.error.take() {
        return Err(e);
    }
    let mark = cs.marking.prefix_end(part)?;
    Ok(ShapePart { cs, mark })
}

/// [`record_shape`] of a circuit cut into parts (as for [`super::synthesize_split`]), the
/// parts recorded in parallel on the current rayon pool: the same shape and assignment.
pub fn record_shape_split<C: Synthesize + Send>(
    parts: Vec<C>,
    marker: &'static str,
) -> Result<(R1cs, Witness), ShapeError> {
    let parts = parts
        .into_par_iter()
        .enumerate()
        .map(|(i, c)| record_shape_part(c, marker, i))
        .collect::<Result<Vec<_>, _>>()?;
    stitch_shape(parts)
}

/// Part 0's shape and witness, then every other part's after its prefix: the shape and
/// witness of the whole circuit, the input constraints appended.
pub fn stitch_shape(parts: Vec<ShapePart>) -> Result<(R1cs, Witness), ShapeError> {
    let mut parts = parts.into_iter();
    let ShapePart { mut cs, mark } = parts.next().ok_or(SplitError::NoParts)?;
    for (i, p) in parts.enumerate() {
        append_part(&mut cs, mark, p, i + 1)?;
    }
    cs.finish()
}

/// Appends what `p` recorded after its prefix to `cs`, its variables moved past `cs`'s and
/// its coefficients re-indexed; the prefix densities become the union.
fn append_part(cs: &mut ShapeCs, mark: Mark, p: ShapePart, part: usize) -> Result<(), ShapeError> {
    let differs = |what| SplitError::PrefixDiffers { part, what };
    if p.mark != mark {
        return Err(differs("its length").into());
    }
    let x = p.cs;
    if x.input[..mark.inputs] != cs.input[..mark.inputs] || x.aux[..mark.aux] != cs.aux[..mark.aux]
    {
        return Err(differs("a variable's value").into());
    }
    let coeff_map: Vec<u32> = x
        .coeffs
        .values
        .iter()
        .map(|c| cs.coeffs.insert(*c))
        .collect();
    // Moves a part's variable to its place in the whole: a prefix variable stays, a
    // sub-circuit's follows everything recorded so far.
    let (aux_shift, input_shift) = (cs.aux.len() - mark.aux, cs.input.len() - mark.inputs);
    let remap = |t: &Term| -> Result<Term, ShapeError> {
        let coeff = coeff_map[t.coeff as usize];
        let var = if t.var & INPUT != 0 {
            let i = (t.var & !INPUT) as usize;
            if i < mark.inputs {
                t.var
            } else {
                var_index(i + input_shift, INPUT)?
            }
        } else {
            let i = t.var as usize;
            if i < mark.aux {
                t.var
            } else {
                var_index(i + aux_shift, 0)?
            }
        };
        Ok(Term { var, coeff })
    };
    for (dst, src) in [(&mut cs.a, &x.a), (&mut cs.b, &x.b), (&mut cs.c, &x.c)] {
        let prefix_end = src.starts[mark.constraints] as usize;
        let same_prefix = (0..mark.constraints).all(|r| {
            let theirs = src
                .row(r)
                .iter()
                .map(|t| (t.var, x.coeffs.values[t.coeff as usize]));
            let ours = dst
                .row(r)
                .iter()
                .map(|t| (t.var, cs.coeffs.values[t.coeff as usize]));
            theirs.eq(ours)
        });
        if !same_prefix {
            return Err(differs("a constraint's terms").into());
        }
        let base = dst.terms.len();
        let tail = src.terms[prefix_end..]
            .par_iter()
            .map(remap)
            .collect::<Result<Vec<_>, _>>()?;
        dst.terms.extend_from_slice(&tail);
        for &s in &src.starts[mark.constraints + 1..] {
            let end = u32::try_from(base + (s as usize - prefix_end))
                .map_err(|_| ShapeError::TooLarge)?;
            dst.starts.push(end);
        }
    }
    or_into(&mut cs.a_aux_density[..mark.aux], &x.a_aux_density);
    or_into(&mut cs.b_aux_density[..mark.aux], &x.b_aux_density);
    or_into(&mut cs.b_input_density[..mark.inputs], &x.b_input_density);
    cs.a_aux_density
        .extend_from_slice(&x.a_aux_density[mark.aux..]);
    cs.b_aux_density
        .extend_from_slice(&x.b_aux_density[mark.aux..]);
    cs.b_input_density
        .extend_from_slice(&x.b_input_density[mark.inputs..]);
    cs.aux.extend_from_slice(&x.aux[mark.aux..]);
    cs.input.extend_from_slice(&x.input[mark.inputs..]);
    Ok(())
}

fn or_into(dst: &mut [bool], src: &[bool]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d |= *s;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::split::tests::{split, Chain};
    use crate::synth::{synthesize, synthesize_witness, synthesize_witness_split};

    fn chain(x: u64, subs: std::ops::Range<u64>) -> Chain {
        Chain {
            x,
            subs,
            stray: false,
        }
    }

    /// Every row as (variable, coefficient value): comparable across coefficient tables.
    fn rows(s: &R1cs) -> Vec<Vec<Vec<(u32, Scalar)>>> {
        [&s.a, &s.b, &s.c]
            .iter()
            .map(|m| {
                (0..m.rows())
                    .map(|r| {
                        m.row(r)
                            .iter()
                            .map(|t| (t.var, s.coeffs()[t.coeff as usize]))
                            .collect()
                    })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn a_recorded_shape_evaluates_to_what_recording_synthesis_records() {
        let whole = synthesize(chain(5, 0..9)).unwrap();
        let (shape, w) = record_shape(chain(5, 0..9)).unwrap();
        assert_eq!(shape.num_constraints(), whole.num_constraints());
        assert!(
            shape.coeffs().len() > 1,
            "the chain has coefficients other than one"
        );
        assert_eq!(shape.synthesized(w.clone()).unwrap(), whole);
        // Witness-only synthesis records the same assignment.
        assert_eq!(synthesize_witness(chain(5, 0..9)).unwrap(), w);
        // Another circuit of the same shape (other values): its witness and the first
        // circuit's shape give what recording it gives.
        let other = synthesize_witness(chain(11, 0..9)).unwrap();
        assert_ne!(other.aux, w.aux);
        assert_eq!(
            shape.synthesized(other).unwrap(),
            synthesize(chain(11, 0..9)).unwrap()
        );
    }

    #[test]
    fn any_split_records_the_same_shape_and_witness() {
        let (shape, w) = record_shape(chain(5, 0..9)).unwrap();
        for bounds in [
            &[0, 9][..],
            &[0, 1, 9],
            &[0, 4, 5, 9],
            &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
        ] {
            let (s, sw) = record_shape_split(split(5, bounds), "sub_").unwrap();
            assert_eq!(rows(&s), rows(&shape), "split at {bounds:?}");
            assert_eq!(
                (&s.a_aux_density, &s.b_aux_density, &s.b_input_density),
                (
                    &shape.a_aux_density,
                    &shape.b_aux_density,
                    &shape.b_input_density
                ),
                "split at {bounds:?}"
            );
            assert_eq!(sw, w, "split at {bounds:?}");
            let ws = synthesize_witness_split(split(5, bounds), "sub_").unwrap();
            assert_eq!(ws, w, "witness split at {bounds:?}");
        }
    }

    #[test]
    fn a_witness_of_another_shape_is_refused() {
        let (shape, _) = record_shape(chain(5, 0..9)).unwrap();
        let shorter = synthesize_witness(chain(5, 0..8)).unwrap();
        assert!(matches!(
            shape.synthesized(shorter),
            Err(ShapeError::Mismatch { .. })
        ));
    }

    #[test]
    fn split_recordings_check_their_prefixes() {
        let parts = vec![chain(5, 0..3), chain(6, 3..9)];
        let e = record_shape_split(parts, "sub_").unwrap_err();
        assert!(
            matches!(
                e,
                ShapeError::Split(SplitError::PrefixDiffers { part: 1, .. })
            ),
            "{e}"
        );
        let mut stray = split(5, &[0, 3, 9]);
        stray[1].stray = true;
        let e = record_shape_split(stray, "sub_").unwrap_err();
        assert!(
            matches!(
                e,
                ShapeError::Split(SplitError::NotSplittable { part: 1, .. })
            ),
            "{e}"
        );
    }
}
