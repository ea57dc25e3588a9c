//! PoRep C2 end to end at 2 KiB: seal a fresh sector with filecoin-proofs, prove C2 with
//! cuzk's synthesis and CPU prover, verify with filecoin-proofs.

mod common;

use std::sync::Arc;

use bellperson::groth16::{create_proof, Parameters};
use blstrs::{Bls12, Scalar};
use cuzk::pipeline::{JobControl, PipelineOptions, ProveError, ProvingService};
use cuzk::proofs::porep::{visit_partition, PartitionVisitor};
use cuzk::proofs::{PoRepRequest, ProofKind, ProofRequest};
use cuzk::prover::{cpu::CpuBackend, prove_with_randomness, Backend};
use cuzk::sealing::{seal_sector, SealedSector};
use cuzk::srs::SrsCache;
use ff::Field;
use filecoin_proofs_api::RegisteredSealProof;

const MINER: u64 = 1000;

fn service(dir: &std::path::Path) -> ProvingService {
    ProvingService::new(dir.to_path_buf(), Arc::new(CpuBackend::default()))
}

fn seal(proof: RegisteredSealProof, sector: u64) -> (tempfile::TempDir, SealedSector) {
    let dir = tempfile::tempdir().unwrap();
    let sealed = seal_sector(dir.path(), proof, MINER, sector).expect("sealing a 2 KiB sector");
    (dir, sealed)
}

fn request(sealed: &SealedSector, miner_id: u64) -> ProofRequest {
    ProofRequest::PoRep(PoRepRequest {
        c1: sealed.c1_json.clone(),
        miner_id,
        sector_number: Some(sealed.sector_number),
    })
}

#[test]
fn porep_v1_1_proof_verifies_with_filecoin_proofs_and_bad_inputs_are_errors() {
    let params = common::init(&[ProofKind::PoRep]);
    let (_dir, sealed) = seal(RegisteredSealProof::StackedDrg2KiBV1_1, 7);
    let svc = service(&params);

    let out = svc
        .prove(&request(&sealed, MINER), &JobControl::new())
        .expect("C2");
    assert_eq!(out.partitions, 1);
    assert_eq!(out.proof.len(), 192);
    assert!(
        sealed.verify_porep(&out.proof, &params).unwrap(),
        "filecoin-proofs rejects our proof"
    );

    // lotus-bench's c1.json wrapper, sector number taken from it; parameters now resident.
    let wrapped = ProofRequest::PoRep(PoRepRequest {
        c1: sealed.lotus_c1_wrapper(),
        miner_id: MINER,
        sector_number: None,
    });
    let out = svc
        .prove(&wrapped, &JobControl::new())
        .expect("C2 from the wrapper");
    assert_eq!(out.timings.param_load, std::time::Duration::ZERO);
    assert!(sealed.verify_porep(&out.proof, &params).unwrap());

    request(&sealed, MINER)
        .check_vanilla()
        .expect("a sealed sector's vanilla proofs verify");

    // Another miner's id or sector number: its replica id is not the C1 output's, so the
    // input check refuses it, and so does the job before proving anything.
    for (miner, sector) in [
        (MINER + 1, sealed.sector_number),
        (MINER, sealed.sector_number + 1),
    ] {
        let other = ProofRequest::PoRep(PoRepRequest {
            c1: sealed.c1_json.clone(),
            miner_id: miner,
            sector_number: Some(sector),
        });
        let why = match other.check() {
            Err(ProveError::InvalidInput(why)) => why,
            r => panic!("miner {miner} sector {sector}: the check gave {r:?}"),
        };
        assert!(why.contains("replica id"), "{why}");
        let start = std::time::Instant::now();
        match svc.prove(&other, &JobControl::new()) {
            Err(ProveError::InvalidInput(why)) => assert!(why.contains("replica id"), "{why}"),
            r => panic!(
                "miner {miner} sector {sector}: expected InvalidInput, got {:?}",
                r.map(|o| o.proof.len())
            ),
        }
        assert!(start.elapsed() < std::time::Duration::from_secs(2));
    }

    // A vanilla proof changed (a comm_d leaf): the input parses and passes the check, the
    // proof is made and fails verification, and the vanilla proofs' check then names the
    // input as the cause (InvalidInput) instead of proving it again without the device.
    let mut c1: serde_json::Value = serde_json::from_slice(&sealed.c1_json).unwrap();
    let first = c1["vanilla_proofs"]
        .as_object_mut()
        .unwrap()
        .values_mut()
        .next();
    let leaf = &mut first.unwrap()[0][0]["comm_d_proofs"]["data"]["Single"]["leaf"][0];
    *leaf = (leaf.as_u64().unwrap() ^ 1).into();
    let bad = ProofRequest::PoRep(PoRepRequest {
        c1: serde_json::to_vec(&c1).unwrap(),
        miner_id: MINER,
        sector_number: Some(sealed.sector_number),
    });
    bad.check().expect("a changed leaf still parses");
    match svc.prove(&bad, &JobControl::new()) {
        Err(ProveError::InvalidInput(why)) => {
            assert!(why.contains("vanilla proofs do not verify"), "{why}")
        }
        r => panic!(
            "a changed leaf: expected InvalidInput, got {:?}",
            r.map(|o| o.proof.len())
        ),
    }

    // Corrupt, truncated and mismatched C1 inputs.
    let json = &sealed.c1_json;
    let mut corrupt = json.clone();
    corrupt[json.len() / 2] = b'#';
    let mut wrong_size: serde_json::Value =
        serde_json::from_slice(&sealed.lotus_c1_wrapper()).unwrap();
    wrong_size["SectorSize"] = serde_json::json!(8u64 << 20);
    let mut wrong_type: serde_json::Value = serde_json::from_slice(json).unwrap();
    wrong_type["registered_proof"] = serde_json::json!("StackedDrg8MiBV1_1");
    for (what, c1, sector) in [
        ("corrupt JSON", corrupt, Some(7)),
        ("truncated JSON", json[..json.len() / 3].to_vec(), Some(7)),
        (
            "wrapper size mismatch",
            wrong_size.to_string().into_bytes(),
            None,
        ),
        (
            "vanilla proofs of another sector size",
            wrong_type.to_string().into_bytes(),
            Some(7),
        ),
        ("no sector number", json.clone(), None),
    ] {
        let req = ProofRequest::PoRep(PoRepRequest {
            c1,
            miner_id: MINER,
            sector_number: sector,
        });
        match svc.prove(&req, &JobControl::new()) {
            Err(ProveError::InvalidInput(msg)) => assert!(!msg.is_empty()),
            other => panic!(
                "{what}: expected InvalidInput, got {:?}",
                other.map(|o| o.proof.len())
            ),
        }
    }

    // A cancelled job stops before proving anything.
    let control = JobControl::new();
    control.cancel();
    assert!(matches!(
        svc.prove(&request(&sealed, MINER), &control),
        Err(ProveError::Cancelled)
    ));
}

#[test]
fn synthetic_porep_proof_verifies() {
    let params = common::init(&[ProofKind::PoRep]);
    let (_dir, sealed) = seal(
        RegisteredSealProof::StackedDrg2KiBV1_1_Feat_SyntheticPoRep,
        8,
    );
    let out = service(&params)
        .prove(&request(&sealed, MINER), &JobControl::new())
        .expect("C2");
    assert!(sealed.verify_porep(&out.proof, &params).unwrap());
}

#[test]
fn ni_porep_partition_proofs_verify() {
    let params = common::init(&[ProofKind::PoRep]);
    let (_dir, sealed) = seal(
        RegisteredSealProof::StackedDrg2KiBV1_2_Feat_NonInteractivePoRep,
        9,
    );
    // Three partitions synthesized at a time, each in two parts, two on the device:
    // thirteen partitions go through the stages out of step and must come back in order.
    // With recorded shapes, one partition records the shape while the others wait for it,
    // then they synthesize their witness alone and the device workers evaluate A, B and C.
    let mut held = Vec::new();
    for recorded_shapes in [true, false] {
        let options = PipelineOptions {
            synthesis_threads: 3,
            memory_budget: u64::MAX,
            device_workers: 2,
            yield_to_critical: true,
            partition_threads: 2,
            recorded_shapes,
            health: Default::default(),
        };
        let backend = Arc::new(CpuBackend::default());
        let svc = ProvingService::with_pipeline(params.clone(), backend, &options).unwrap();
        let out = svc
            .prove(&request(&sealed, MINER), &JobControl::new())
            .expect("C2");
        assert_eq!(out.partitions, 13);
        assert_eq!(out.proof.len(), 13 * 192);
        assert!(
            sealed.verify_porep(&out.proof, &params).unwrap(),
            "recorded shapes: {recorded_shapes}"
        );
        let (bytes, partitions) = svc.pipeline().measured;
        let per_partition = bytes as f64 / partitions.max(1) as f64;
        println!("recorded shapes {recorded_shapes}: {per_partition:.0} bytes held per partition waiting for the device");
        held.push(per_partition);
    }
    // The assignment alone (32 bytes per variable) against A, B, C and the assignment (130).
    assert!(
        held[0] < 0.3 * held[1],
        "a witness partition holds {:.0} bytes, an evaluated one {:.0}",
        held[0],
        held[1]
    );
}

/// Synthesizes partition 0 with our constraint system and proves it with our prover and
/// with bellperson's, with the same r and s.
struct CompareWithBellperson {
    params: Parameters<Bls12>,
    srs: Arc<cuzk::srs::Srs>,
}

impl PartitionVisitor for CompareWithBellperson {
    type Output = ();
    fn visit<C: bellperson::Circuit<Scalar> + Clone + Send>(
        self,
        circuit: C,
        public_inputs: Vec<Scalar>,
    ) {
        let synthesized = cuzk::synth::synthesize(circuit.clone()).unwrap();
        assert!(synthesized.is_satisfied(), "a constraint does not hold");
        assert_eq!(synthesized.input[0], Scalar::ONE);
        assert_eq!(
            synthesized.input[1..],
            public_inputs[..],
            "inputs differ from generate_public_inputs"
        );
        // 2,687,921 circuit constraints plus one `x · 0 = 0` constraint per public input (40).
        assert_eq!(
            synthesized.num_constraints(),
            2_687_921 + 40,
            "2 KiB PoRep partition size"
        );
        let mut rng = rand::thread_rng();
        let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));
        let prepared = CpuBackend::default().prepare(self.srs.clone()).unwrap();
        let (ours, _) = prove_with_randomness(prepared.as_ref(), synthesized, r, s).unwrap();
        let theirs = create_proof(circuit, &self.params, r, s).unwrap();
        assert_eq!(ours, theirs);
    }
}

#[test]
fn porep_partition_synthesis_and_proof_equal_bellpersons() {
    let params = common::init(&[ProofKind::PoRep]);
    let (_dir, sealed) = seal(RegisteredSealProof::StackedDrg2KiBV1_1, 10);
    let id = cuzk::proofs::registry::params_id(ProofKind::PoRep, 2048).unwrap();
    let cache: SrsCache = SrsCache::new(params.clone());
    let (srs, _) = cache.get(&id).unwrap();
    let file = std::fs::File::open(id.params_file(&params)).unwrap();
    let theirs = Parameters::<Bls12>::read(std::io::BufReader::new(file), false).unwrap();
    visit_partition(
        &sealed.c1_json,
        0,
        CompareWithBellperson {
            params: theirs,
            srs,
        },
    )
    .unwrap();
}

/// Split synthesis (the challenges in parts on several threads, stitched) records exactly
/// what one thread records: a/b/c, the assignment, the inputs and the densities.
#[test]
fn porep_partition_split_synthesis_is_bit_identical_to_sequential() {
    let (_dir, sealed) = seal(RegisteredSealProof::StackedDrg2KiBV1_1, 11);
    let whole = cuzk::proofs::porep::synthesize_partition(&sealed.c1_json, 0, 1).unwrap();
    assert!(whole.is_satisfied());
    for parts in [2, 64] {
        let split = cuzk::proofs::porep::synthesize_partition(&sealed.c1_json, 0, parts).unwrap();
        assert!(
            split == whole,
            "{parts} parts differ from sequential synthesis"
        );
        println!(
            "{parts} parts: {} constraints, identical",
            split.num_constraints()
        );
    }
}

/// A synthetic partition has a real one's shape: the same constraints, variables, inputs and
/// densities (only values differ), and splits bit-identically too.
#[test]
fn a_synthetic_partition_has_the_real_shape() {
    use cuzk::proofs::porep::synthetic;
    let (_dir, sealed) = seal(RegisteredSealProof::StackedDrg2KiBV1_1, 12);
    let real = cuzk::proofs::porep::synthesize_partition(&sealed.c1_json, 0, 1).unwrap();
    let fake = synthetic::synthesize(2048, 0, 1, 7).unwrap();
    assert_eq!(fake.num_constraints(), real.num_constraints());
    assert_eq!(fake.aux.len(), real.aux.len());
    assert_eq!(fake.input.len(), real.input.len());
    assert!(
        fake.a_aux_density == real.a_aux_density,
        "A densities differ"
    );
    assert!(
        fake.b_aux_density == real.b_aux_density,
        "B densities differ"
    );
    assert_eq!(fake.b_input_density, real.b_input_density);
    assert!(!fake.is_satisfied(), "random values satisfy the circuit?");
    let split = synthetic::synthesize(2048, 0, 3, 7).unwrap();
    assert!(split == fake, "split synthetic synthesis differs");
    let shape = synthetic::shape(2048).unwrap();
    println!("2 KiB: {shape:?}, {} constraints", fake.num_constraints());
}

/// A shape recorded once serves every partition of its proof type: the constraints of a
/// synthetic partition (recorded in parts), evaluated on a real partition's witness
/// (synthesized in parts, without building a single linear combination), give exactly what
/// recording the real partition gives.
#[test]
fn a_recorded_shape_and_a_witness_give_what_recording_gives() {
    use cuzk::proofs::porep::{record_partition, synthetic};
    use cuzk::synth::{Recorded, Recording};
    let (_dir, sealed) = seal(RegisteredSealProof::StackedDrg2KiBV1_1, 13);
    let real = cuzk::proofs::porep::synthesize_partition(&sealed.c1_json, 0, 1).unwrap();
    let Recorded::Shape(shape, fake) = synthetic::record(2048, 0, 4, 3, Recording::Shape).unwrap()
    else {
        panic!("not a shape")
    };
    assert_eq!(shape.num_constraints(), real.num_constraints());
    assert_ne!(fake.aux, real.aux);
    let Recorded::Witness(w) = record_partition(&sealed.c1_json, 0, 2, Recording::Witness).unwrap()
    else {
        panic!("not a witness")
    };
    let evaluated = shape.synthesized(w).unwrap();
    assert!(
        evaluated == real,
        "the shape's evaluation differs from recording"
    );
    assert!(evaluated.is_satisfied());
    println!(
        "2 KiB: {} constraints, {} terms, {} coefficients, shape {:.1} MB",
        shape.num_constraints(),
        shape.terms(),
        shape.coeffs().len(),
        shape.host_bytes() as f64 / 1e6
    );
}

/// Our PoRep circuit is storage-proofs-porep's, gadget for gadget: on a real partition it
/// records the same evaluations, the same shape and the same witness, whole or in parts —
/// its witness computed with SHA-256 on machine words instead of bellperson's gadgets.
#[test]
fn our_porep_circuit_synthesizes_exactly_what_storage_proofs_does() {
    use cuzk::proofs::porep::{record_partition_by, CircuitCode};
    use cuzk::synth::{Recorded, Recording};
    use std::time::Instant;
    let (_dir, sealed) = seal(RegisteredSealProof::StackedDrg2KiBV1_1, 17);
    let run = |parts, what, code| {
        let t = Instant::now();
        let r = record_partition_by(&sealed.c1_json, 0, parts, what, code).unwrap();
        (r, t.elapsed())
    };
    for parts in [1, 2] {
        let (Recorded::Witness(ours), t_ours) = run(parts, Recording::Witness, CircuitCode::Ours)
        else {
            panic!("not a witness")
        };
        let (Recorded::Witness(theirs), t_theirs) =
            run(parts, Recording::Witness, CircuitCode::Bellperson)
        else {
            panic!("not a witness")
        };
        assert_eq!(ours.constraints, theirs.constraints);
        assert_eq!(ours.input, theirs.input);
        assert_eq!(ours.aux.len(), theirs.aux.len());
        assert!(ours == theirs, "{parts} parts: the witnesses differ");
        println!(
            "2 KiB witness in {parts} part(s): ours {:.3} s, bellperson's gadgets {:.3} s ({:.2}x)",
            t_ours.as_secs_f64(),
            t_theirs.as_secs_f64(),
            t_ours.as_secs_f64() / t_theirs.as_secs_f64()
        );
    }
    let (Recorded::Shape(ours, w), _) = run(2, Recording::Shape, CircuitCode::Ours) else {
        panic!("not a shape")
    };
    let (Recorded::Shape(theirs, _), _) = run(1, Recording::Shape, CircuitCode::Bellperson) else {
        panic!("not a shape")
    };
    assert!(ours == theirs, "the shapes differ");
    let (Recorded::Evaluations(theirs), _) =
        run(1, Recording::Evaluations, CircuitCode::Bellperson)
    else {
        panic!("not evaluations")
    };
    assert!(ours.synthesized(w).unwrap() == theirs);
}
