//! Our synthesis and prover against bellperson's: for the same r and s, byte-identical
//! proofs, which can only happen when the recorded A/B/C evaluations, the assignment, the
//! densities, H and every MSM agree.

use std::io::Write;
use std::sync::Arc;

use bellperson::groth16::{
    create_proof, generate_random_parameters, prepare_verifying_key, verify_proof, Parameters,
};
use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::{Bls12, Scalar};
use cuzk::prover::{
    cpu::{CpuBackend, CpuOptions},
    prove_with_randomness, Backend, ProverError,
};
use cuzk::srs::{load_srs, SrsError};
use cuzk::synth::synthesize;
use ff::Field;
use rand::{Rng, SeedableRng};

/// A circuit shaped like Filecoin's: many boolean variables, a few full-width ones, inputs
/// used in B, and linear combinations with zero, one and arbitrary coefficients.
#[derive(Clone)]
struct BitsCircuit {
    seed: u64,
    bits: usize,
    inputs: usize,
}

impl Circuit<Scalar> for BitsCircuit {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(self.seed);
        let mut inputs = Vec::new();
        for i in 0..self.inputs {
            let v = Scalar::from(rng.gen::<u64>());
            inputs.push((cs.alloc_input(|| format!("in{i}"), || Ok(v))?, v));
        }
        let mut acc_val = Scalar::ZERO;
        let acc = cs.alloc(|| "acc0", || Ok(Scalar::ZERO))?;
        cs.enforce(|| "acc0 zero", |lc| lc + acc, |lc| lc + CS::one(), |lc| lc);
        let mut acc_var = acc;
        for i in 0..self.bits {
            let bit = rng.gen::<bool>();
            let b = if bit { Scalar::ONE } else { Scalar::ZERO };
            let v = cs.alloc(|| format!("bit{i}"), || Ok(b))?;
            // Booleanity: v · (1 − v) = 0.
            cs.enforce(
                || format!("bool{i}"),
                |lc| lc + v,
                |lc| lc + CS::one() - v,
                |lc| lc,
            );
            // acc' = acc + v · coeff, with the coefficient sometimes 1, sometimes random.
            let coeff = if i % 3 == 0 {
                Scalar::ONE
            } else {
                Scalar::random(&mut rng)
            };
            let next_val = acc_val + b * coeff;
            let next = cs.alloc(|| format!("acc{}", i + 1), || Ok(next_val))?;
            let (input_var, input_val) = inputs[i % inputs.len().max(1)];
            // (acc + coeff·v + 0·input) · 1 = next, and input · v = input·b
            cs.enforce(
                || format!("sum{i}"),
                |lc| lc + acc_var + (coeff, v) + (Scalar::ZERO, input_var),
                |lc| lc + CS::one(),
                |lc| lc + next,
            );
            let prod = cs.alloc(|| format!("prod{i}"), || Ok(input_val * b))?;
            cs.enforce(
                || format!("mul{i}"),
                |lc| lc + v,
                |lc| lc + input_var,
                |lc| lc + prod,
            );
            acc_var = next;
            acc_val = next_val;
        }
        Ok(())
    }
}

fn write_params(params: &Parameters<Bls12>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut f = std::fs::File::create(dir.path().join("p.params")).unwrap();
    params.write(&mut f).unwrap();
    f.flush().unwrap();
    let mut vk = std::fs::File::create(dir.path().join("p.vk")).unwrap();
    params.vk.write(&mut vk).unwrap();
    dir
}

/// The CPU backend as production runs it (the eight-lane AVX-512 IFMA paths where the CPU
/// has them).
fn cpu() -> CpuBackend {
    CpuBackend::new(CpuOptions::default())
}

/// The CPU backend on its portable paths whatever the CPU has (`CpuOptions::simd` off, the
/// typed option the library takes), so that both prove the whole circuit on an IFMA machine.
fn portable_cpu() -> CpuBackend {
    CpuBackend::new(CpuOptions {
        simd: false,
        ..CpuOptions::default()
    })
}

#[test]
fn proofs_equal_bellpersons_for_the_same_randomness() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(42);
    for (bits, inputs) in [(1usize, 1usize), (7, 2), (300, 3), (2000, 5)] {
        let circuit = BitsCircuit {
            seed: bits as u64,
            bits,
            inputs,
        };
        let params = generate_random_parameters::<Bls12, _, _>(circuit.clone(), &mut rng).unwrap();
        let dir = write_params(&params);
        let srs = Arc::new(load_srs(&dir.path().join("p.params")).unwrap());
        let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));
        let theirs = create_proof(circuit.clone(), &params, r, s).unwrap();
        let pvk = prepare_verifying_key(&params.vk);
        // The real CPU backend (its vector and its portable paths) through the
        // prepared-parameters boundary, twice with one handle: a prepared set serves any
        // number of proofs.
        for backend in [cpu(), portable_cpu()] {
            let prepared = backend.prepare(srs.clone()).unwrap();
            assert_eq!(
                prepared.device_bytes(),
                0,
                "the CPU holds nothing on a device"
            );
            for round in 0..2 {
                let synthesized = synthesize(circuit.clone()).unwrap();
                assert!(synthesized.is_satisfied());
                let public: Vec<Scalar> = synthesized.input[1..].to_vec();
                let (ours, _) =
                    prove_with_randomness(prepared.as_ref(), synthesized, r, s).unwrap();
                let name = backend.name();
                assert_eq!(
                    ours, theirs,
                    "{name}, round {round}: bits {bits}, inputs {inputs}"
                );
                assert!(verify_proof(&pvk, &ours, &public).unwrap());
            }
        }
    }
}

#[test]
fn another_circuits_parameters_are_a_typed_error() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    let small = BitsCircuit {
        seed: 1,
        bits: 10,
        inputs: 2,
    };
    let params = generate_random_parameters::<Bls12, _, _>(small, &mut rng).unwrap();
    let dir = write_params(&params);
    let srs = Arc::new(load_srs(&dir.path().join("p.params")).unwrap());
    let other = synthesize(BitsCircuit {
        seed: 2,
        bits: 40,
        inputs: 2,
    })
    .unwrap();
    let prepared = cpu().prepare(srs).unwrap();
    let err =
        prove_with_randomness(prepared.as_ref(), other, Scalar::ONE, Scalar::ONE).unwrap_err();
    assert!(
        matches!(err, ProverError::ParamsMismatch { .. }),
        "expected a parameter mismatch, got {err}"
    );
    assert!(err.to_string().contains("section h has"), "{err}");
    assert!(!err.is_retryable());
}

#[test]
fn truncated_and_corrupt_parameter_files_name_the_section() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(6);
    let params = generate_random_parameters::<Bls12, _, _>(
        BitsCircuit {
            seed: 3,
            bits: 50,
            inputs: 2,
        },
        &mut rng,
    )
    .unwrap();
    let dir = write_params(&params);
    let path = dir.path().join("p.params");
    let bytes = std::fs::read(&path).unwrap();

    // Cut inside the last section (b_g2).
    std::fs::write(&path, &bytes[..bytes.len() - 10]).unwrap();
    match load_srs(&path) {
        Err(SrsError::Truncated { section, .. }) => assert_eq!(section, "b_g2"),
        other => panic!("expected a truncation error, got {:?}", other.err()),
    }
    // Cut inside the verifying key.
    std::fs::write(&path, &bytes[..100]).unwrap();
    assert!(matches!(
        load_srs(&path),
        Err(SrsError::Truncated { section: "vk", .. })
    ));
    // An absurd count in h must be caught before any allocation or read.
    let vk_len = {
        let mut v = Vec::new();
        params.vk.write(&mut v).unwrap();
        v.len()
    };
    let mut huge = bytes.clone();
    huge[vk_len..vk_len + 4].copy_from_slice(&u32::MAX.to_be_bytes());
    std::fs::write(&path, &huge).unwrap();
    assert!(matches!(
        load_srs(&path),
        Err(SrsError::Truncated { section: "h", .. })
    ));
    // Flip a coordinate of the first l point: off the curve.
    let h_len = u32::from_be_bytes(bytes[vk_len..vk_len + 4].try_into().unwrap()) as usize;
    let l_first = vk_len + 4 + h_len * 96 + 4;
    let mut corrupt = bytes.clone();
    corrupt[l_first + 50] ^= 0x01;
    std::fs::write(&path, &corrupt).unwrap();
    match load_srs(&path) {
        Err(SrsError::InvalidPoint { section, index, .. }) => {
            assert_eq!((section, index), ("l", 0))
        }
        other => panic!("expected an invalid point, got {:?}", other.err()),
    }
    // A .vk that belongs to another parameter set.
    std::fs::write(&path, &bytes).unwrap();
    let mut vk = std::fs::read(dir.path().join("p.vk")).unwrap();
    vk[10] ^= 0x01;
    std::fs::write(dir.path().join("p.vk"), &vk).unwrap();
    assert!(matches!(load_srs(&path), Err(SrsError::Mismatch { .. })));
    // Missing.
    assert!(matches!(
        load_srs(&dir.path().join("nope.params")),
        Err(SrsError::Missing { .. })
    ));
}

/// The proving service's cache keeps the backend's prepared set next to the host copy: a
/// second request gets the same handle, and Evict drops the cache's handle with the host copy
/// (on a GPU that frees the device memory); while a running proof holds the set, Evict is
/// refused.
#[test]
fn evict_drops_the_prepared_set_with_the_host_copy() {
    use cuzk::pipeline::ProvingService;
    use cuzk::proofs::{registry, ProofKind};
    let mut rng = rand::rngs::StdRng::seed_from_u64(8);
    let params = generate_random_parameters::<Bls12, _, _>(
        BitsCircuit {
            seed: 4,
            bits: 20,
            inputs: 2,
        },
        &mut rng,
    )
    .unwrap();
    // Under the file names of a real parameter set, in a directory of its own.
    let id = registry::params_id(ProofKind::WinningPoSt, 2048).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut f = std::fs::File::create(id.params_file(dir.path())).unwrap();
    params.write(&mut f).unwrap();
    let mut vk = std::fs::File::create(id.vk_file(dir.path())).unwrap();
    params.vk.write(&mut vk).unwrap();
    drop((f, vk));

    let svc = ProvingService::new(dir.path().to_path_buf(), Arc::new(cpu()));
    let (prepared, _) = svc.prepared(&id).unwrap();
    let (again, load) = svc.prepared(&id).unwrap();
    assert_eq!(
        Arc::as_ptr(&prepared).cast::<()>(),
        Arc::as_ptr(&again).cast::<()>(),
        "prepared once"
    );
    assert_eq!(load, std::time::Duration::ZERO, "resident the second time");
    drop(again);
    let resident = svc.resident();
    assert_eq!(resident.len(), 1);
    assert!(resident[0].params.resident_bytes > 0);
    assert_eq!(resident[0].device_bytes(), 0);

    // A running proof holds its set: Evict is refused, and the set stays resident (dropping
    // the cache's handle would let the next load make a second copy beside the proof's).
    let handle = Arc::downgrade(&prepared);
    assert!(matches!(
        svc.evict(&id),
        Err(cuzk::srs::EvictError::InUse { users: 1, .. })
    ));
    assert_eq!(svc.resident().len(), 1, "still resident");
    drop(prepared);
    assert_eq!(svc.evict(&id), Ok(true));
    assert!(svc.resident().is_empty());
    assert!(
        handle.upgrade().is_none(),
        "Evict dropped the cache's prepared set"
    );
    assert_eq!(svc.evict(&id), Ok(false), "evicted already");
}
