//! Synthetic PoSt partitions of the real 32 and 64 GiB shapes (`proofs::post::synthetic`)
//! against bellperson's own constraint systems on storage-proofs-post's circuit: the
//! constraints bellperson's `TestConstraintSystem` records (its structural hash), the
//! assignment its `WitnessCS` computes, and the A, B, C evaluations and densities of that
//! assignment, bit for bit what cuzk's recording systems keep. WinningPoSt at 32 GiB whole;
//! WindowPoSt at a few of its 2,349 (2,300 at 64 GiB) sector slots, a prefix of the whole
//! partition (about 130 M constraints, beyond a test machine), whose full count is checked
//! against the per-slot count.

use bellperson::gadgets::test::TestConstraintSystem;
use bellperson::util_cs::witness_cs::WitnessCS;
use bellperson::{Circuit, ConstraintSystem, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use cuzk::proofs::porep::PartitionVisitor;
use cuzk::proofs::post::synthetic;
use cuzk::proofs::ProofKind;
use cuzk::synth::{R1cs, Witness, INPUT};

const GIB32: u64 = 32 << 30;
const GIB64: u64 = 64 << 30;

/// bellperson's `TestConstraintSystem::hash` computed from a recorded shape: BLAKE2s over
/// the variable and constraint counts, then every circuit constraint's A, B and C as
/// (input-then-aux ordered) terms with big-endian coefficients. The shape's input
/// constraints (`x · 0 = 0`, last) are the prover's, not the circuit's: left out.
fn bellperson_hash(shape: &R1cs) -> String {
    let circuit_rows = shape.num_constraints() - shape.num_inputs;
    let mut h = blake2s_simd::Params::new().hash_length(32).to_state();
    for n in [shape.num_inputs, shape.num_aux, circuit_rows] {
        h.update(&(n as u64).to_be_bytes());
    }
    for r in 0..circuit_rows {
        for m in [&shape.a, &shape.b, &shape.c] {
            let terms = &m.terms[m.starts[r] as usize..m.starts[r + 1] as usize];
            // Inputs before aux variables, each by index, as bellperson orders them.
            let mut sorted: Vec<_> = terms
                .iter()
                .map(|t| (t.var & INPUT == 0, t.var & !INPUT, t.coeff))
                .collect();
            sorted.sort();
            h.update(&(sorted.len() as u64).to_be_bytes());
            for (aux, index, coeff) in sorted {
                let mut buf = [0u8; 41];
                buf[0] = if aux { b'A' } else { b'I' };
                buf[1..9].copy_from_slice(&u64::from(index).to_be_bytes());
                buf[9..].copy_from_slice(&shape.coeffs()[coeff as usize].to_bytes_be());
                h.update(&buf);
            }
        }
    }
    h.finalize().to_hex().to_string()
}

/// bellperson's `WitnessCS` on the circuit's sequential path. Told that its system is
/// extensible (as `WitnessCS` says), `FallbackPoStCircuit` synthesizes sector groups in
/// systems of their own, each given a "temp ONE" input that `extend` drops, which assumes a
/// new system starts without inputs; `WitnessCS::new` starts with ONE, so every group would
/// leave a second ONE behind. The prover's systems, bellperson's and ours, take the
/// sequential path, as this wrapper makes the circuit do.
struct Sequential(WitnessCS<Scalar>);

impl ConstraintSystem<Scalar> for Sequential {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, a: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.0.alloc(a, f)
    }

    fn alloc_input<F, A, AR>(&mut self, a: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.0.alloc_input(a, f)
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, a: A, la: LA, lb: LB, lc: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        self.0.enforce(a, la, lb, lc)
    }

    fn push_namespace<NR: Into<String>, N: FnOnce() -> NR>(&mut self, name: N) {
        self.0.push_namespace(name)
    }

    fn pop_namespace(&mut self) {
        self.0.pop_namespace()
    }

    fn get_root(&mut self) -> &mut Self {
        self
    }
}

/// What one comparison found, for the caller's assertions on sizes.
struct Compared {
    constraints: usize,
    inputs: usize,
}

/// Synthesizes the circuit with cuzk's recording systems and with bellperson's, and asserts
/// they agree bit for bit.
struct AgainstBellperson;

impl PartitionVisitor for AgainstBellperson {
    type Output = Compared;
    fn visit<C: Circuit<Scalar> + Clone + Send>(self, circuit: C, inputs: Vec<Scalar>) -> Compared {
        let ours = cuzk::synth::synthesize(circuit.clone()).unwrap();
        let (shape, recorded) = cuzk::synth::record_shape(circuit.clone()).unwrap();
        let witness_only = cuzk::synth::synthesize_witness(circuit.clone()).unwrap();

        let mut theirs = Sequential(WitnessCS::<Scalar>::new());
        circuit.clone().synthesize(&mut theirs).unwrap();
        let (input, aux) = (theirs.0.scalar_inputs(), theirs.0.scalar_aux());
        assert_eq!(input.len(), ours.input.len(), "inputs");
        assert_eq!(aux.len(), ours.aux.len(), "aux variables");
        assert!(input == ours.input, "the inputs differ from bellperson's");
        assert!(aux == ours.aux, "the witness differs from bellperson's");
        assert!(
            recorded == witness_only,
            "the shape's and the witness-only assignments differ"
        );
        assert!(
            witness_only.aux == aux,
            "the witness-only assignment differs from bellperson's"
        );
        // The verifier's public inputs: only the witness is made up.
        assert!(
            ours.input[1..] == inputs[..],
            "inputs differ from generate_public_inputs"
        );

        let mut test_cs = TestConstraintSystem::<Scalar>::new();
        circuit.synthesize(&mut test_cs).unwrap();
        assert_eq!(
            test_cs.num_constraints() + test_cs.num_inputs(),
            ours.num_constraints(),
            "circuit constraints plus one per input"
        );
        assert_eq!(
            test_cs.hash(),
            bellperson_hash(&shape),
            "the constraints differ"
        );
        assert!(
            !test_cs.is_satisfied(),
            "random values satisfy the circuit?"
        );

        // A, B, C and the densities of bellperson's assignment under bellperson's constraints
        // (the same shape, by the hash): what cuzk recorded.
        let constraints = ours.num_constraints();
        let theirs = Witness {
            input,
            aux,
            constraints,
        };
        assert!(
            shape.synthesized(theirs).unwrap() == ours,
            "A, B, C or densities differ"
        );
        assert!(!ours.is_satisfied(), "random values satisfy the circuit?");
        Compared {
            constraints,
            inputs: ours.input.len(),
        }
    }
}

fn compare(kind: ProofKind, size: u64, sectors: Option<usize>) -> Compared {
    let t = std::time::Instant::now();
    let c = synthetic::visit(kind, size, sectors, 5, AgainstBellperson).unwrap();
    println!(
        "{kind} at {} GiB, {sectors:?} slots: {} constraints, {} inputs, identical to bellperson's ({:.1} s)",
        size >> 30,
        c.constraints,
        c.inputs,
        t.elapsed().as_secs_f64()
    );
    c
}

#[test]
fn winning_post_32gib_synthesizes_what_bellperson_does_whole() {
    let c = compare(ProofKind::WinningPoSt, GIB32, None);
    // 66 slots of one challenge: comm_r and the challenged leaf are inputs, with ONE.
    assert_eq!(c.inputs, 1 + 66 * 2);
    assert_eq!(
        c.constraints,
        synthetic::count_constraints(ProofKind::WinningPoSt, GIB32, None).unwrap()
    );
}

#[test]
fn window_post_prefixes_synthesize_what_bellperson_does() {
    let c = compare(ProofKind::WindowPoSt, GIB32, Some(2));
    assert_eq!(c.inputs, 1 + 2 * 11);
    // 64 GiB: the top tree's binary level too.
    let c = compare(ProofKind::WindowPoSt, GIB64, Some(1));
    assert_eq!(c.inputs, 1 + 11);
}

/// The whole WindowPoSt partition is its first slot's constraints once per slot, plus ONE's
/// input constraint: the count of a prefix of slots (bellperson's counting system on the
/// blank circuit) is what synthesis records, grows by the same count per slot, and the whole
/// partition's count equals filecoin-proofs' own figure (its constants' comments count the
/// circuit without the prover's input constraints, one per input).
#[test]
fn a_whole_window_post_partition_is_its_slots() {
    for (size, slots, theirs) in [(GIB32, 2349, 125_279_217), (GIB64, 2300, 129_887_900)] {
        let count = |n| synthetic::count_constraints(ProofKind::WindowPoSt, size, n).unwrap();
        let one = synthetic::synthesize(ProofKind::WindowPoSt, size, Some(1), 3).unwrap();
        let two = synthetic::synthesize(ProofKind::WindowPoSt, size, Some(2), 3).unwrap();
        assert_eq!(count(Some(1)), one.num_constraints());
        assert_eq!(count(Some(2)), two.num_constraints());
        assert!(two.aux[..one.aux.len()] == one.aux[..], "a prefix of slots");
        let per_slot = two.num_constraints() - one.num_constraints();
        let fixed = one.num_constraints() - per_slot;
        assert_eq!(fixed, 1, "ONE's input constraint");
        let t = std::time::Instant::now();
        assert_eq!(count(Some(25)), fixed + 25 * per_slot);
        let t = t.elapsed();
        let whole = count(None);
        println!(
            "WindowPoSt at {} GiB: {per_slot} constraints per slot, {whole} in the whole \
             partition (25 slots counted in {:.1} s)",
            size >> 30,
            t.as_secs_f64()
        );
        assert_eq!(whole, fixed + slots * per_slot);
        let inputs = 1 + slots * 11;
        assert_eq!(
            whole,
            theirs + inputs,
            "filecoin-proofs' count plus the inputs"
        );
    }
}

/// Records partition `kind` (its first `sectors` slots) whole and in each of `runs` runs of
/// its slots, and asserts that every cut records exactly what the whole does: the
/// evaluations, the shape with its witness, and the witness alone. Returns the whole
/// partition's evaluations.
fn runs_record_the_whole(
    kind: ProofKind,
    sectors: Option<usize>,
    seed: u64,
    runs: &[usize],
) -> cuzk::synth::Synthesized {
    use cuzk::synth::{Recorded, Recording};
    let record = |parts, what| synthetic::record_in_parts(kind, GIB32, sectors, seed, parts, what);
    let Recorded::Evaluations(whole) = record(1, Recording::Evaluations).unwrap() else {
        panic!("evaluations asked for")
    };
    let Recorded::Shape(shape, witness) = record(1, Recording::Shape).unwrap() else {
        panic!("a shape asked for")
    };
    for &parts in runs {
        let Recorded::Evaluations(split) = record(parts, Recording::Evaluations).unwrap() else {
            panic!("evaluations asked for")
        };
        assert!(split == whole, "{parts} runs: the evaluations differ");
        let Recorded::Shape(s, w) = record(parts, Recording::Shape).unwrap() else {
            panic!("a shape asked for")
        };
        assert!(
            s == shape && w == witness,
            "{parts} runs: the shape or its witness differ"
        );
        let Recorded::Witness(w) = record(parts, Recording::Witness).unwrap() else {
            panic!("a witness asked for")
        };
        assert!(w == witness, "{parts} runs: the witness alone differs");
    }
    whole
}

/// A WindowPoSt partition cut into runs of its sectors (as the stages synthesize it, on
/// several threads) records exactly what it records whole, also with uneven runs and more
/// runs than sectors.
#[test]
fn window_post_sector_runs_record_what_the_whole_partition_does() {
    let whole = runs_record_the_whole(ProofKind::WindowPoSt, Some(5), 9, &[2, 3, 8]);
    // Sector slots are the runs' unit: five sectors' inputs (comm_r and each of the ten
    // challenges' packed path bits) and ONE.
    assert_eq!(whole.input.len(), 1 + 5 * 11);
    println!(
        "5 sectors in 2, 3 and 8 runs: {} constraints, identical",
        whole.num_constraints()
    );
}

/// A 32 GiB WinningPoSt (66 slots of one challenge each) cut into runs of its slots (as the
/// stages synthesize a critical partition, on the critical part threads) records exactly
/// what it records whole, also with uneven runs and more runs than slots.
#[test]
fn winning_post_slot_runs_record_what_the_whole_partition_does() {
    let whole = runs_record_the_whole(ProofKind::WinningPoSt, None, 5, &[2, 7, 16, 100]);
    // ONE, then each slot's comm_r and its challenge's packed path bits.
    assert_eq!(whole.input.len(), 1 + 66 * 2);
    println!(
        "66 slots in 2, 7, 16 and 100 runs: {} constraints, identical",
        whole.num_constraints()
    );
}
