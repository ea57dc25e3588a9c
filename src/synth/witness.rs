//! Witness-only synthesis: a circuit's assignment without its constraints, for a circuit whose
//! shape is recorded ([`super::R1cs`]). Linear combinations are never built: `enforce` only
//! counts, so a circuit costs its gadgets' value computations and nothing more.

use bellperson::{ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use ff::Field;
use rayon::prelude::*;

use bellperson::gadgets::boolean::Boolean;
use bellperson::gadgets::num::AllocatedNum;

use super::cs::{count_constraint, count_constraints, Mark, Marking};
use super::gadgets::{Gadgets, Synthesize};
use super::poseidon::poseidon_witness;
use super::sha256::{sha256_packed, Sink};
use super::split::{append_tails, SplitError};

/// A circuit's assignment: what a proof needs of it besides its recorded shape.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Witness {
    /// Public inputs, the constant ONE first.
    pub input: Vec<Scalar>,
    /// Auxiliary (private) variables.
    pub aux: Vec<Scalar>,
    /// Constraints the circuit enforced, input constraints included: checked against the
    /// shape's.
    pub constraints: usize,
}

impl Witness {
    /// Host bytes it holds.
    pub fn host_bytes(&self) -> u64 {
        ((self.input.capacity() + self.aux.capacity()) * std::mem::size_of::<Scalar>()) as u64
    }
}

/// A `ConstraintSystem` that keeps the assignment and counts constraints.
#[derive(Default)]
pub struct WitnessCs {
    input: Vec<Scalar>,
    aux: Vec<Scalar>,
    constraints: usize,
    since_yield: u32,
    marking: Marking,
}

impl WitnessCs {
    fn here(&self) -> Mark {
        Mark {
            constraints: self.constraints,
            aux: self.aux.len(),
            inputs: self.input.len(),
        }
    }
}

impl Gadgets for WitnessCs {
    /// On machine words (`sha256.rs`): the gadget's variables and constraint count, and the
    /// packed digest allocated as the gadget's packing allocates it.
    fn sha256_packed(&mut self, input: &[Boolean]) -> Result<AllocatedNum<Scalar>, SynthesisError> {
        self.marking.recording();
        let mut sink = Sink::new(&mut self.aux);
        let packed = sha256_packed(&mut sink, input)?;
        let n = sink.constraints();
        self.constraints += n;
        count_constraints(&mut self.since_yield, n);
        let num = AllocatedNum::alloc(&mut *self, || Ok(packed))?;
        // The packing constraint.
        self.enforce(|| "pack", |lc| lc, |lc| lc, |lc| lc);
        Ok(num)
    }

    /// On field values (`poseidon.rs`): the circuit's variables, then the result allocated
    /// as the circuit allocates it.
    fn poseidon(
        &mut self,
        preimage: &[AllocatedNum<Scalar>],
    ) -> Result<AllocatedNum<Scalar>, SynthesisError> {
        use typenum::{U11, U2, U4, U8};
        self.marking.recording();
        let values = preimage
            .iter()
            .map(|n| n.get_value().ok_or(SynthesisError::AssignmentMissing))
            .collect::<Result<Vec<_>, _>>()?;
        let aux = &mut self.aux;
        let (hash, n) = match values.len() {
            2 => poseidon_witness::<U2>(aux, &values),
            4 => poseidon_witness::<U4>(aux, &values),
            8 => poseidon_witness::<U8>(aux, &values),
            11 => poseidon_witness::<U11>(aux, &values),
            _ => return Err(SynthesisError::Unsatisfiable),
        };
        // All but the result's constraint; the result's comes with its allocation.
        self.constraints += n - 1;
        count_constraints(&mut self.since_yield, n - 1);
        let num = AllocatedNum::alloc(&mut *self, || Ok(hash))?;
        self.enforce(|| "result", |lc| lc, |lc| lc, |lc| lc);
        Ok(num)
    }
}

impl ConstraintSystem<Scalar> for WitnessCs {
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
        self.aux.push(f()?);
        Ok(Variable::new_unchecked(Index::Aux(self.aux.len() - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.marking.recording();
        self.input.push(f()?);
        Ok(Variable::new_unchecked(Index::Input(self.input.len() - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, _: LA, _: LB, _: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        self.marking.recording();
        self.constraints += 1;
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

/// The ONE input and the circuit.
fn record<C: Synthesize>(circuit: C, mut cs: WitnessCs) -> Result<WitnessCs, SynthesisError> {
    cs.alloc_input(|| "one", || Ok(Scalar::ONE))?;
    circuit.synthesize_into(&mut cs)?;
    Ok(cs)
}

fn finish(mut cs: WitnessCs) -> Witness {
    // What a partition in flight holds is counted by capacity: give the growth back.
    cs.aux.shrink_to_fit();
    // One `x · 0 = 0` constraint per input follows the circuit's.
    Witness {
        constraints: cs.constraints + cs.input.len(),
        input: cs.input,
        aux: cs.aux,
    }
}

/// The assignment of `circuit` (ONE first), and its constraint count with the input
/// constraints.
pub fn synthesize_witness<C: Synthesize>(circuit: C) -> Result<Witness, SynthesisError> {
    Ok(finish(record(circuit, WitnessCs::default())?))
}

/// One part of a split circuit's witness.
pub struct WitnessPart {
    cs: WitnessCs,
    mark: Mark,
}

/// Synthesizes one part's witness (as [`super::synthesize_part`] records one part).
pub fn synthesize_witness_part<C: Synthesize>(
    circuit: C,
    marker: &'static str,
    part: usize,
) -> Result<WitnessPart, SplitError> {
    let cs = WitnessCs {
        marking: Marking::new(marker),
        ..WitnessCs::default()
    };
    let cs = record(circuit, cs)?;
    let mark = cs.marking.prefix_end(part)?;
    Ok(WitnessPart { cs, mark })
}

/// Part 0's witness whole, then every other part's after its prefix: the witness of the
/// whole circuit.
pub fn stitch_witness(parts: Vec<WitnessPart>) -> Result<Witness, SplitError> {
    let mut parts = parts.into_iter();
    let WitnessPart { mut cs, mark } = parts.next().ok_or(SplitError::NoParts)?;
    let rest: Vec<WitnessPart> = parts.collect();
    for (i, p) in rest.iter().enumerate() {
        let differs = |what| SplitError::PrefixDiffers { part: i + 1, what };
        if p.mark != mark {
            return Err(differs("its length"));
        }
        if p.cs.aux[..mark.aux] != cs.aux[..mark.aux]
            || p.cs.input[..mark.inputs] != cs.input[..mark.inputs]
        {
            return Err(differs("a variable's value"));
        }
    }
    let mut rest = rest;
    for p in &rest {
        cs.constraints += p.cs.constraints - mark.constraints;
    }
    let tails = rest
        .iter_mut()
        .map(|p| std::mem::take(&mut p.cs.aux))
        .collect();
    append_tails(&mut cs.aux, tails, mark.aux);
    let tails = rest
        .iter_mut()
        .map(|p| std::mem::take(&mut p.cs.input))
        .collect();
    append_tails(&mut cs.input, tails, mark.inputs);
    Ok(finish(cs))
}

/// [`synthesize_witness`] of a circuit cut into parts, on the current rayon pool.
pub fn synthesize_witness_split<C: Synthesize + Send>(
    parts: Vec<C>,
    marker: &'static str,
) -> Result<Witness, SplitError> {
    let parts = parts
        .into_par_iter()
        .enumerate()
        .map(|(i, c)| synthesize_witness_part(c, marker, i))
        .collect::<Result<Vec<_>, _>>()?;
    stitch_witness(parts)
}
