//! Parameter sets prepared on the device (`Backend::prepare`): proofs through them equal
//! bellperson's byte for byte, on the joint aux path and on the one-by-one path a device short
//! of memory takes, and with urgent proofs let in at the pause points of the path that holds
//! everything and of the planned path a memory limit forces; their points occupy device
//! memory while the handle lives, and Evict (the proving service's cache drops the handle with
//! the host copy) frees it. A test binary of its own, so that no other GPU test allocates
//! while these measure the device's memory. They need a CUDA device, so they are
//! `#[ignore]`d: without one they are reported as ignored, never as passed; run with
//! `--ignored` on a GPU host, where a missing device fails them.

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bellperson::groth16::{create_proof, generate_random_parameters, Parameters};
use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::{Bls12, G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use cuzk::gpu::device::Gpu;
use cuzk::gpu::plan::{self, Sizes};
use cuzk::gpu::{test_backend, GpuBackend, GpuOptions};
use cuzk::pipeline::ProvingService;
use cuzk::proofs::{registry, ProofKind};
use cuzk::prover::{
    prove_with_randomness, prove_witness_with_randomness, Backend, Partition, PinnedPool,
    WitnessPartition,
};
use cuzk::srs::{load_srs, Srs};
use cuzk::synth::{record_shape, synthesize};
use ff::Field;
use group::{Curve, Group};
use rand::{rngs::StdRng, Rng, SeedableRng};

/// The GPU options of these tests: the default tuning, with the kernel cache that
/// scripts/gpu-device-run.sh names in `CUZK_GPU_CACHE` (a test may read the environment; the
/// library takes options).
fn gpu_options() -> GpuOptions {
    GpuOptions {
        kernel_cache: std::env::var_os("CUZK_GPU_CACHE").map(Into::into),
        ..GpuOptions::default()
    }
}

fn device() -> GpuBackend {
    test_backend(&gpu_options()).unwrap_or_else(|e| {
        panic!("no usable CUDA device, but the GPU tests were asked for (--ignored): {e}")
    })
}

/// Bits chained through products with the inputs: inputs in A and B, aux values that are 0, 1
/// or full width.
#[derive(Clone)]
struct Chain {
    seed: u64,
    inputs: usize,
    steps: usize,
}

impl Circuit<Scalar> for Chain {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let mut rng = StdRng::seed_from_u64(self.seed);
        let mut ins = Vec::new();
        for i in 0..self.inputs.max(1) {
            let v = Scalar::from(rng.gen::<u64>());
            ins.push((cs.alloc_input(|| format!("in{i}"), || Ok(v))?, v));
        }
        let mut prev = ins[0];
        for i in 0..self.steps {
            let b = Scalar::from(rng.gen::<bool>() as u64);
            let bit = cs.alloc(|| format!("bit{i}"), || Ok(b))?;
            cs.enforce(
                || format!("bool{i}"),
                |lc| lc + bit,
                |lc| lc + CS::one() - bit,
                |lc| lc,
            );
            let (x, xv) = ins[i % ins.len()];
            let pv = prev.1 * xv + b;
            let p = cs.alloc(|| format!("p{i}"), || Ok(pv))?;
            cs.enforce(
                || format!("mul{i}"),
                |lc| lc + prev.0,
                |lc| lc + x,
                |lc| lc + p - bit,
            );
            prev = (p, pv);
        }
        Ok(())
    }
}

fn write_params(
    params: &Parameters<Bls12>,
    params_path: &std::path::Path,
    vk_path: &std::path::Path,
) {
    let mut f = std::fs::File::create(params_path).unwrap();
    params.write(&mut f).unwrap();
    f.flush().unwrap();
    let mut vk = std::fs::File::create(vk_path).unwrap();
    params.vk.write(&mut vk).unwrap();
}

/// A [`Chain`] circuit's parameter set, written to a directory and loaded as the daemon
/// loads one, with bellperson's proof of it under random r and s.
struct ChainSet {
    circuit: Chain,
    srs: Arc<Srs>,
    r: Scalar,
    s: Scalar,
    theirs: bellperson::groth16::Proof<Bls12>,
}

impl ChainSet {
    fn new(rng: &mut StdRng, dir: &Path, name: &str, inputs: usize, steps: usize) -> Self {
        let circuit = Chain {
            seed: rng.gen(),
            inputs,
            steps,
        };
        let params = generate_random_parameters::<Bls12, _, _>(circuit.clone(), &mut *rng).unwrap();
        let path = dir.join(format!("{name}.params"));
        write_params(&params, &path, &dir.join(format!("{name}.vk")));
        let srs = Arc::new(load_srs(&path).unwrap());
        let (r, s) = (Scalar::random(&mut *rng), Scalar::random(&mut *rng));
        let theirs = create_proof(circuit.clone(), &params, r, s).unwrap();
        ChainSet {
            circuit,
            srs,
            r,
            s,
            theirs,
        }
    }

    /// Runs `long` for rounds 0 to 11 on this thread while another proves this set urgently
    /// on `prepared` now and then; returns each round's span and when each urgent proof
    /// ended, both from the first round's start.
    fn urgently_beside(
        &self,
        prepared: &dyn cuzk::prover::PreparedSrs,
        mut long: impl FnMut(usize),
    ) -> (Vec<(Duration, Duration)>, Vec<Duration>) {
        let done = AtomicBool::new(false);
        let t0 = Instant::now();
        std::thread::scope(|sc| {
            let urgent = sc.spawn(|| self.prove_urgently_until(prepared, &done, t0));
            let spans = (0..12)
                .map(|round| {
                    let start = t0.elapsed();
                    long(round);
                    (start, t0.elapsed())
                })
                .collect();
            done.store(true, Ordering::Relaxed);
            (spans, urgent.join().unwrap())
        })
    }

    /// Proves the circuit urgently on `prepared` every 2 ms until `done` (a thousand times at
    /// most), each proof checked against bellperson's; returns when each ended, since `t0`.
    fn prove_urgently_until(
        &self,
        prepared: &dyn cuzk::prover::PreparedSrs,
        done: &AtomicBool,
        t0: Instant,
    ) -> Vec<Duration> {
        let mut finished = Vec::new();
        while !done.load(Ordering::Relaxed) && finished.len() < 1000 {
            std::thread::sleep(Duration::from_millis(2));
            let proof = cuzk::prover::urgency::urgently(|| {
                let p = synthesize(self.circuit.clone()).unwrap();
                prove_with_randomness(prepared, p, self.r, self.s)
            })
            .unwrap()
            .0;
            assert_eq!(proof, self.theirs, "the urgent proof");
            finished.push(t0.elapsed());
        }
        finished
    }
}

#[test]
#[ignore = "needs a CUDA device: run with --ignored on a GPU host (scripts/gpu-device-run.sh)"]
fn prepared_proofs_equal_bellpersons() {
    let gpu = device();
    let seed: u64 = rand::thread_rng().gen();
    println!("seed {seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    for (inputs, steps) in [(1usize, 1usize), (3, 2000), (5, 40_000)] {
        let circuit = Chain {
            seed: rng.gen(),
            inputs,
            steps,
        };
        let params = generate_random_parameters::<Bls12, _, _>(circuit.clone(), &mut rng).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.params");
        write_params(&params, &path, &dir.path().join("p.vk"));
        let srs = Arc::new(load_srs(&path).unwrap());
        let prepared = gpu.prepare(srs).unwrap();
        assert!(prepared.device_bytes() > 0, "nothing went up to the device");
        let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));
        let theirs = create_proof(circuit.clone(), &params, r, s).unwrap();
        // Twice: the first proof uploads the B queries, the second finds every point resident.
        for round in 0..2 {
            let ours = prove_with_randomness(
                prepared.as_ref(),
                synthesize(circuit.clone()).unwrap(),
                r,
                s,
            )
            .unwrap()
            .0;
            assert_eq!(ours, theirs, "{steps} steps, round {round}");
            // From a recorded shape and a witness alone: A, B and C evaluated on the device.
            let (shape, witness) = record_shape(circuit.clone()).unwrap();
            let w = WitnessPartition::new(witness, Arc::new(shape)).unwrap();
            assert!(prepared.evaluates_shapes());
            let ours = prove_witness_with_randomness(prepared.as_ref(), w, r, s)
                .unwrap()
                .0;
            assert_eq!(ours, theirs, "{steps} steps, round {round}, from the shape");
        }
        // From page-locked copies (the daemon's proving.pinned_memory): uploaded by DMA, the
        // same proof. The blocks are portable: another context sees them as pinned too.
        let alloc = gpu
            .host_allocator()
            .expect("a GPU makes page-locked blocks");
        let pool = PinnedPool::new(1 << 30, alloc);
        let pinned = Partition::from(synthesize(circuit.clone()).unwrap()).pin(&pool);
        assert!(pinned.a.is_pinned() && pinned.aux.is_pinned(), "{pinned:?}");
        let other = Gpu::open(&gpu_options()).unwrap();
        let bytes = |s: &[Scalar]| s.len() * 32;
        // SAFETY: a byte view of the scalars' own memory, read only while `pinned` lives.
        let a_bytes =
            unsafe { std::slice::from_raw_parts(pinned.a.as_ptr().cast::<u8>(), bytes(&pinned.a)) };
        assert!(other.is_pinned(a_bytes), "portable to another context");
        drop(other);
        let ours = prove_with_randomness(prepared.as_ref(), pinned, r, s)
            .unwrap()
            .0;
        assert_eq!(ours, theirs, "{steps} steps, from pinned memory");
        assert_eq!(pool.stats().lent, 0, "the blocks are back in the pool");
        // All but 1 GiB of the device's free memory held elsewhere: the four aux MSMs no
        // longer fit together (their estimate alone is 2 GiB), so the set runs them one by one;
        // the proof must not change.
        let hog = Gpu::open(&gpu_options()).unwrap();
        let (free, _) = hog.mem_info().unwrap();
        let held = hog.alloc(free.saturating_sub(1 << 30)).unwrap();
        let ours = prove_with_randomness(
            prepared.as_ref(),
            synthesize(circuit.clone()).unwrap(),
            r,
            s,
        )
        .unwrap()
        .0;
        assert_eq!(ours, theirs, "{steps} steps, one MSM at a time");
        drop(held);
        drop(hog);
    }
}

/// A proof from a recorded shape lets an urgent caller (WinningPoSt's thread, marked by
/// `urgency::urgently`) take the device between its steps: the transforms of the quotient,
/// the pieces of every MSM's bucket sums (small pieces here, so that there are hundreds) and
/// the aux MSMs. While one thread proves from the shape again and again, another proves a
/// small circuit urgently now and then, on a set of its own; the device must have been let go
/// between pieces of an MSM (the backend counts where), and every proof of both must still
/// equal bellperson's.
#[test]
#[ignore = "needs a CUDA device: run with --ignored on a GPU host (scripts/gpu-device-run.sh)"]
fn shaped_proofs_let_urgent_callers_go_between_their_steps() {
    let mut options = gpu_options();
    options.msm.accumulate_piece = 3000;
    let gpu = test_backend(&options).expect("a CUDA device");
    let seed: u64 = rand::thread_rng().gen();
    println!("seed {seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let long = ChainSet::new(&mut rng, dir.path(), "long", 5, 60_000);
    let short = ChainSet::new(&mut rng, dir.path(), "short", 2, 500);
    let long_set = gpu.prepare(long.srs.clone()).unwrap();
    let short_set = gpu.prepare(short.srs.clone()).unwrap();
    let (lr, ls, long_theirs) = (long.r, long.s, long.theirs.clone());
    let long = long.circuit;
    let (shape, witness) = record_shape(long.clone()).unwrap();
    let shape = Arc::new(shape);
    let before = gpu.pauses().expect("a GPU counts its pauses");
    let (spans, urgent_done) = short.urgently_beside(short_set.as_ref(), |round| {
        let w = WitnessPartition::new(witness.clone(), shape.clone()).unwrap();
        let ours = prove_witness_with_randomness(long_set.as_ref(), w, lr, ls)
            .unwrap()
            .0;
        assert_eq!(ours, long_theirs, "shaped proof {round} beside urgent ones");
    });
    let after = gpu.pauses().expect("a GPU counts its pauses");
    // One more planned proof with no urgent caller about: where the long set's plan fits
    // beside them, it leaves the urgent set's points on the device (room for critical work).
    let p = synthesize(long.clone()).unwrap();
    let last = prove_with_randomness(long_set.as_ref(), p, lr, ls)
        .unwrap()
        .0;
    assert_eq!(last, long_theirs, "the planned proof after the urgent ones");
    println!(
        "after a planned proof: the urgent set holds {} device bytes, the long set's plan {}",
        short_set.device_bytes(),
        long_set.memory_plan().unwrap_or_default()
    );
    let inside = urgent_done
        .iter()
        .filter(|t| spans.iter().any(|(a, b)| a < *t && *t < b))
        .count();
    println!(
        "{inside} of {} urgent proofs finished inside a shaped proof; pauses before {before:?}, \
         after {after:?}; spans {spans:?}",
        urgent_done.len()
    );
    assert!(
        after.msm_piece > before.msm_piece,
        "no shaped proof let the device go between pieces of an MSM: {after:?}"
    );
}

/// The MSM driver's window width for n points (G2 when true), as the backends use it.
fn window_bits(n: u64, g2: bool) -> u32 {
    let curve = if g2 {
        cuzk::gpu::msm::Curve::G2
    } else {
        cuzk::gpu::msm::Curve::G1
    };
    cuzk::gpu::MsmTuning::default().window_bits(n as usize, curve)
}

/// The sizes of a parameter set's queries, as the memory planner takes them.
fn sizes_of(srs: &cuzk::srs::Srs) -> Sizes {
    Sizes::from_queries(
        srs.h.len() as u64,
        srs.l.len() as u64,
        srs.a.len() as u64,
        srs.b_g1.len() as u64,
    )
}

/// A memory limit under which a set of `long`'s sizes takes the planned path with its longest
/// G1 query cut into four pieces or more, while a set of `short`'s holds everything (its
/// proofs fit in the room every phase of the long set's plan keeps free): the smallest budget
/// from the long set's least need up, in steps of a sixteenth.
fn streaming_limit(long: &Sizes, short: &Sizes) -> u64 {
    let need = plan::plan(1 << 20, long, &window_bits)
        .expect_err("a MiB is too small")
        .need;
    let mut budget = need;
    loop {
        let p = plan::plan(budget, long, &window_bits).expect("the least need fits");
        assert!(
            !p.is_all_resident(long),
            "no budget from {need} to {budget} streams the long set while the short one \
             holds everything"
        );
        let short_holds_all =
            plan::plan(budget, short, &window_bits).is_ok_and(|s| s.is_all_resident(short));
        if short_holds_all && p.piece_g1 * 4 <= long.longest(false) {
            println!("limit {budget}: the long set's plan {}", p.describe(long));
            return budget;
        }
        budget += budget / 16;
    }
}

/// A proof under a memory plan that does not hold everything (the planned path of a 16 or
/// 24 GB card: the quotient in the plan's form, the MSMs one stream of pieces) lets an
/// urgent caller take the device at its pause points: before each of the quotient's
/// transforms to the coset, before each MSM's first piece and between the pieces of the
/// stream. Under a limit that makes one set's proofs stream their MSMs in pieces and leaves
/// another's holding everything, one thread proves the first set from the recorded shape and
/// from host evaluations in turn, again and again, while another proves the second urgently
/// now and then; the device must have been let go between pieces, and every proof of both
/// must still equal bellperson's.
#[test]
#[ignore = "needs a CUDA device: run with --ignored on a GPU host (scripts/gpu-device-run.sh)"]
fn planned_proofs_let_urgent_callers_go_between_their_pieces() {
    let seed: u64 = rand::thread_rng().gen();
    println!("seed {seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let long = ChainSet::new(&mut rng, dir.path(), "long", 5, 60_000);
    let short = ChainSet::new(&mut rng, dir.path(), "short", 2, 500);
    let limit = streaming_limit(&sizes_of(&long.srs), &sizes_of(&short.srs));
    let mut options = gpu_options();
    options.memory_limit = Some(limit);
    let gpu = test_backend(&options).expect("a CUDA device");
    let long_set = gpu.prepare(long.srs.clone()).unwrap();
    let short_set = gpu.prepare(short.srs.clone()).unwrap();
    let (lr, ls, long_theirs) = (long.r, long.s, long.theirs.clone());
    let long = long.circuit;
    println!(
        "long set: {}; short set: {}",
        long_set.memory_plan().unwrap_or_default(),
        short_set.memory_plan().unwrap_or_default()
    );
    let (shape, witness) = record_shape(long.clone()).unwrap();
    let shape = Arc::new(shape);
    let before = gpu.pauses().expect("a GPU counts its pauses");
    let (spans, urgent_done) = short.urgently_beside(short_set.as_ref(), |round| {
        let ours = if round % 2 == 0 {
            let w = WitnessPartition::new(witness.clone(), shape.clone()).unwrap();
            prove_witness_with_randomness(long_set.as_ref(), w, lr, ls)
        } else {
            let p = synthesize(long.clone()).unwrap();
            prove_with_randomness(long_set.as_ref(), p, lr, ls)
        }
        .unwrap()
        .0;
        assert_eq!(
            ours, long_theirs,
            "planned proof {round} beside urgent ones"
        );
    });
    let after = gpu.pauses().expect("a GPU counts its pauses");
    let inside = urgent_done
        .iter()
        .filter(|t| spans.iter().any(|(a, b)| a < *t && *t < b))
        .count();
    println!(
        "{inside} of {} urgent proofs finished inside a planned proof; pauses before \
         {before:?}, after {after:?}; the long set's plan after: {}; spans {spans:?}",
        urgent_done.len(),
        long_set.memory_plan().unwrap_or_default()
    );
    assert!(
        after.msm_piece > before.msm_piece,
        "no planned proof let the device go between pieces of its MSMs: {after:?}"
    );
    let planned_points =
        |p: &cuzk::prover::DevicePauses| p.quotient + p.before_h + p.msm_piece + p.aux_msm;
    assert!(planned_points(&after) > planned_points(&before));
}

/// `n` points repeating a tile of random ones (random points for every entry take long to
/// make; the device holds `n` of them either way).
fn g1_points(rng: &mut StdRng, n: usize) -> Vec<G1Affine> {
    let tile: Vec<G1Affine> = (0..256)
        .map(|_| G1Projective::random(&mut *rng).to_affine())
        .collect();
    (0..n).map(|i| tile[i % tile.len()]).collect()
}

fn g2_points(rng: &mut StdRng, n: usize) -> Vec<G2Affine> {
    let tile: Vec<G2Affine> = (0..64)
        .map(|_| G2Projective::random(&mut *rng).to_affine())
        .collect();
    (0..n).map(|i| tile[i % tile.len()]).collect()
}

/// Preload through the proving service puts the set's points on the device (Status's device
/// bytes, and the device's used memory, rise by them); Evict drops the host copy and the
/// prepared one, and the device's used memory falls back.
#[test]
#[ignore = "needs a CUDA device: run with --ignored on a GPU host (scripts/gpu-device-run.sh)"]
fn evict_frees_device_memory() {
    let gpu = Arc::new(device());
    let mut rng = StdRng::seed_from_u64(7);
    // A small circuit's verifying key with large synthetic queries: 2^20 + 2^20 + 2^19 G1
    // points (240 MiB) go up at preparation, well above the allocator's granularity.
    let tiny = Chain {
        seed: 1,
        inputs: 2,
        steps: 4,
    };
    let mut params = generate_random_parameters::<Bls12, _, _>(tiny, &mut rng).unwrap();
    params.h = Arc::new(g1_points(&mut rng, 1 << 20));
    params.l = Arc::new(g1_points(&mut rng, 1 << 20));
    params.a = Arc::new(g1_points(&mut rng, 1 << 19));
    params.b_g1 = Arc::new(g1_points(&mut rng, 1 << 10));
    params.b_g2 = Arc::new(g2_points(&mut rng, 1 << 10));
    let expected = ((1u64 << 20) * 2 + (1 << 19)) * std::mem::size_of::<G1Affine>() as u64;
    // Written under the file names of a real parameter set, in a directory of its own.
    let id = registry::params_id(ProofKind::WinningPoSt, 2048).unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_params(
        &params,
        &id.params_file(dir.path()),
        &id.vk_file(dir.path()),
    );
    let svc = ProvingService::new(dir.path().to_path_buf(), gpu.clone());

    let used = || {
        let (free, total) = gpu.mem_info().unwrap();
        (total - free) as u64
    };
    let before = used();
    svc.preload(&id).unwrap();
    let resident = svc.resident();
    assert_eq!(resident.len(), 1);
    let device_bytes = resident[0].device_bytes();
    assert_eq!(
        device_bytes, expected,
        "H, L and A go up at preparation (B with the first proof)"
    );
    let loaded = used();
    println!("device memory used: {before} before, {loaded} with the set ({device_bytes} bytes of points)");
    assert!(
        loaded >= before + expected * 9 / 10,
        "used memory rose by {} bytes for {expected} bytes of points",
        loaded.saturating_sub(before)
    );

    assert_eq!(svc.evict(&id), Ok(true), "the set was resident");
    assert!(svc.resident().is_empty());
    let after = used();
    println!("device memory used after Evict: {after}");
    assert!(
        after + expected * 9 / 10 <= loaded,
        "Evict freed only {} bytes of {expected}",
        loaded.saturating_sub(after)
    );
}
