//! The recording constraint system.

use bellperson::{ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use ff::Field;
use rayon::prelude::*;

use super::gadgets::{Gadgets, Synthesize};

/// A synthesized circuit: the A/B/C evaluations, the assignment and the query densities.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Synthesized {
    /// A(x) evaluated at each constraint (inputs' `x · 0 = 0` constraints last).
    pub a: Vec<Scalar>,
    /// B(x) evaluated at each constraint.
    pub b: Vec<Scalar>,
    /// C(x) evaluated at each constraint.
    pub c: Vec<Scalar>,
    /// Public inputs, the constant ONE first.
    pub input: Vec<Scalar>,
    /// Auxiliary (private) variables.
    pub aux: Vec<Scalar>,
    /// Whether aux variable i occurs in some A combination.
    pub a_aux_density: Vec<bool>,
    /// Whether input i occurs in some B combination.
    pub b_input_density: Vec<bool>,
    /// Whether aux variable i occurs in some B combination.
    pub b_aux_density: Vec<bool>,
}

impl Synthesized {
    /// Number of constraints, input constraints included.
    pub fn num_constraints(&self) -> usize {
        self.a.len()
    }

    /// Whether every constraint holds: a·b = c.
    pub fn is_satisfied(&self) -> bool {
        self.a
            .par_iter()
            .zip(self.b.par_iter())
            .zip(self.c.par_iter())
            .all(|((a, b), c)| *a * b == *c)
    }
}

/// A `ConstraintSystem` that records evaluations instead of constraints.
#[derive(Default)]
pub struct RecordingCs {
    pub(super) out: Synthesized,
    /// Constraints since the last yield point.
    since_yield: u32,
    /// Where the split's prefix ends.
    pub(super) marking: Marking,
}

/// What a constraint system that may synthesize one part of a split circuit tracks: where
/// the prefix ends (the first top-level namespace named `marker…`) and whether the circuit
/// keeps the split's shape after it.
#[derive(Default)]
pub(super) struct Marking {
    /// Namespaces open now.
    depth: u32,
    /// The top-level namespace prefix whose first occurrence is marked, if any.
    marker: Option<&'static str>,
    /// What had been recorded when the marker's namespace was first opened.
    mark: Option<Mark>,
    /// Whether something was recorded at the top level after the mark, or a top-level
    /// namespace without the marker's prefix opened: the circuit is not a prefix followed by
    /// independent sub-circuits, and cannot be split.
    unsplittable: bool,
}

impl Marking {
    /// Marks where the first top-level namespace named `prefix…` begins.
    pub(super) fn new(prefix: &'static str) -> Self {
        Self {
            marker: Some(prefix),
            ..Self::default()
        }
    }

    /// Notes a record made now: at the top level after the mark it breaks the split's shape.
    pub(super) fn recording(&mut self) {
        if self.depth == 0 && self.mark.is_some() {
            self.unsplittable = true;
        }
    }

    /// Notes a namespace opened now, `here` being what had been recorded so far.
    pub(super) fn push<NR: Into<String>>(&mut self, name: impl FnOnce() -> NR, here: Mark) {
        // Names are made only at the top level of a marking system: a few per circuit.
        if let (0, Some(prefix)) = (self.depth, self.marker) {
            let marked = name().into().starts_with(prefix);
            match (self.mark, marked) {
                (None, true) => self.mark = Some(here),
                // After the first sub-circuit, only sub-circuits may follow.
                (Some(_), false) => self.unsplittable = true,
                _ => {}
            }
        }
        self.depth += 1;
    }

    pub(super) fn pop(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    /// Where the prefix ended, once the part is recorded: an error unless the part had the
    /// split's shape.
    pub(super) fn prefix_end(&self, part: usize) -> Result<Mark, super::SplitError> {
        let marker = self.marker.unwrap_or_default();
        let mark = self
            .mark
            .ok_or(super::SplitError::NoMarker { part, marker })?;
        if self.unsplittable {
            return Err(super::SplitError::NotSplittable { part, marker });
        }
        Ok(mark)
    }
}

/// Counts a constraint, calling the thread's yield point every [`YIELD_EVERY`].
pub(super) fn count_constraint(since_yield: &mut u32) {
    count_constraints(since_yield, 1);
}

/// Counts `n` constraints (a gadget computed at once), as [`count_constraint`].
pub(super) fn count_constraints(since_yield: &mut u32, n: usize) {
    *since_yield = since_yield.saturating_add(u32::try_from(n).unwrap_or(u32::MAX));
    if *since_yield >= YIELD_EVERY {
        *since_yield = 0;
        if let Some(point) = YIELD_POINT.with(std::cell::Cell::get) {
            point();
        }
    }
}

/// How much of a circuit had been recorded at some point: the length of every vector of
/// [`Synthesized`] then.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mark {
    /// Constraints (a, b, c).
    pub constraints: usize,
    /// Aux variables (and their densities).
    pub aux: usize,
    /// Inputs, ONE included (and their density).
    pub inputs: usize,
}

impl RecordingCs {
    /// A system that marks where the first top-level namespace named `prefix…` begins.
    pub fn with_marker(prefix: &'static str) -> Self {
        Self {
            marking: Marking::new(prefix),
            ..Self::default()
        }
    }

    fn recording(&mut self) {
        self.marking.recording();
    }

    fn here(&self) -> Mark {
        Mark {
            constraints: self.out.a.len(),
            aux: self.out.aux.len(),
            inputs: self.out.input.len(),
        }
    }
}

/// Constraints between two calls of the thread's yield point: rare enough to cost nothing
/// (a 2 KiB PoRep partition has millions), often enough that a pause takes effect within
/// about a millisecond.
const YIELD_EVERY: u32 = 4096;

thread_local! {
    static YIELD_POINT: std::cell::Cell<Option<fn()>> = const { std::cell::Cell::new(None) };
}

/// Runs `body` with `point` called every few thousand constraints that this thread's
/// [`RecordingCs`] records: the stages pause non-critical synthesis there while a critical
/// partition is in flight, so that a WinningPoSt has the cores (and their caches and memory
/// bandwidth) to itself.
pub fn with_yield_point<T>(point: fn(), body: impl FnOnce() -> T) -> T {
    struct Restore(Option<fn()>);
    impl Drop for Restore {
        fn drop(&mut self) {
            YIELD_POINT.with(|y| y.set(self.0));
        }
    }
    let _restore = Restore(YIELD_POINT.with(|y| y.replace(Some(point))));
    body()
}

/// Evaluates `lc`, marking in `input_density` / `aux_density` every variable it uses with a
/// non-zero coefficient. Zero coefficients are skipped so that densities match the
/// parameter generator's view of the circuit.
fn eval_tracked(
    lc: &LinearCombination<Scalar>,
    mut input_density: Option<&mut Vec<bool>>,
    mut aux_density: Option<&mut Vec<bool>>,
    input: &[Scalar],
    aux: &[Scalar],
) -> Scalar {
    let mut acc = Scalar::ZERO;
    for (&i, coeff) in lc.iter_inputs() {
        if bool::from(coeff.is_zero()) {
            continue;
        }
        acc += scaled(input[i], coeff);
        if let Some(d) = input_density.as_deref_mut() {
            d[i] = true;
        }
    }
    for (&i, coeff) in lc.iter_aux() {
        if bool::from(coeff.is_zero()) {
            continue;
        }
        acc += scaled(aux[i], coeff);
        if let Some(d) = aux_density.as_deref_mut() {
            d[i] = true;
        }
    }
    acc
}

/// `value · coeff`, skipping the multiplication for the very common coefficient one.
#[inline]
fn scaled(value: Scalar, coeff: &Scalar) -> Scalar {
    if *coeff == Scalar::ONE {
        value
    } else {
        value * coeff
    }
}

impl Gadgets for RecordingCs {}

impl ConstraintSystem<Scalar> for RecordingCs {
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
        self.recording();
        self.out.aux.push(f()?);
        self.out.a_aux_density.push(false);
        self.out.b_aux_density.push(false);
        Ok(Variable::new_unchecked(Index::Aux(self.out.aux.len() - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.recording();
        self.out.input.push(f()?);
        self.out.b_input_density.push(false);
        Ok(Variable::new_unchecked(Index::Input(
            self.out.input.len() - 1,
        )))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        self.recording();
        let o = &mut self.out;
        let a = a(LinearCombination::zero());
        let b = b(LinearCombination::zero());
        let c = c(LinearCombination::zero());
        // Every input has an `x · 0 = 0` constraint, so the A query is dense over the inputs
        // and only aux variables are tracked for A. C has no query of its own.
        let a = eval_tracked(&a, None, Some(&mut o.a_aux_density), &o.input, &o.aux);
        let b = eval_tracked(
            &b,
            Some(&mut o.b_input_density),
            Some(&mut o.b_aux_density),
            &o.input,
            &o.aux,
        );
        let c = eval_tracked(&c, None, None, &o.input, &o.aux);
        o.a.push(a);
        o.b.push(b);
        o.c.push(c);
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

    fn is_extensible() -> bool {
        true
    }

    /// Appends a system synthesized separately (circuits use this to synthesize parts in
    /// parallel). `other` started with its own temporary ONE input, which is the same
    /// variable as ours: its first input is merged, the rest appended.
    fn extend(&mut self, other: &Self) {
        let (o, x) = (&mut self.out, &other.out);
        o.a.extend_from_slice(&x.a);
        o.b.extend_from_slice(&x.b);
        o.c.extend_from_slice(&x.c);
        o.aux.extend_from_slice(&x.aux);
        o.a_aux_density.extend_from_slice(&x.a_aux_density);
        o.b_aux_density.extend_from_slice(&x.b_aux_density);
        if let (Some(first), Some(theirs)) =
            (o.b_input_density.first_mut(), x.b_input_density.first())
        {
            *first |= *theirs;
        }
        o.input.extend(x.input.iter().skip(1));
        o.b_input_density.extend(x.b_input_density.iter().skip(1));
    }
}

/// Synthesizes one circuit: the ONE input, the circuit, then one `x · 0 = 0` constraint per
/// input (which makes the inputs' A query linearly independent).
pub fn synthesize<C: Synthesize>(circuit: C) -> Result<Synthesized, SynthesisError> {
    let cs = record(circuit, RecordingCs::new())?;
    Ok(finish(cs.out))
}

/// The ONE input and the circuit, into `cs`: everything but the input constraints.
pub(super) fn record<C: Synthesize>(
    circuit: C,
    mut cs: RecordingCs,
) -> Result<RecordingCs, SynthesisError> {
    cs.alloc_input(|| "one", || Ok(Scalar::ONE))?;
    circuit.synthesize_into(&mut cs)?;
    Ok(cs)
}

/// Appends one `x · 0 = 0` constraint per input.
pub(super) fn finish(out: Synthesized) -> Synthesized {
    let mut cs = RecordingCs {
        out,
        ..RecordingCs::default()
    };
    for i in 0..cs.out.input.len() {
        cs.enforce(
            || "input constraint",
            |lc| lc + Variable::new_unchecked(Index::Input(i)),
            |lc| lc,
            |lc| lc,
        );
    }
    cs.out
}

/// Synthesizes every circuit in parallel, keeping their order.
pub fn synthesize_all<C: Synthesize + Send>(
    circuits: Vec<C>,
) -> Result<Vec<Synthesized>, SynthesisError> {
    circuits.into_par_iter().map(synthesize).collect()
}
