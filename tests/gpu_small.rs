//! A real 2 KiB PoRep partition proved on the GPU under memory limits that force every form of
//! the device memory plan (`gpu.memory_limit`, `cuzk::gpu::plan`): the quotient parked in
//! host memory, the recorded shape streamed in pieces of rows, the assignment reloaded, the
//! points of every query streamed from host memory and MSMs cut into pieces. Under each limit
//! the proofs from host evaluations and from the recorded shape equal, byte for byte, those
//! the device makes without a limit (fixed randomness), the planner's estimate of the peak
//! covers what the device's buffers held at their most, no proof had to be retried under a
//! smaller plan, and whole proofs through the proving service verify with filecoin-proofs,
//! proved on the device (a CPU fallback fails the test). Two sets proved on a device that
//! another holder leaves little memory, one set's proof between the other's two turns (its
//! assignment kept on the device, its points evicted by the other set's proof), keep the
//! driver's own free memory above half the margin. The MSM's working estimate
//! (`plan::msm_work_bytes`) is checked against the buffers the device's MSMs take.
//!
//! They need a CUDA device, so they are `#[ignore]`d: without one they are reported as
//! ignored, never as passed; `scripts/gpu-device-run.sh tests` runs them with `--ignored`
//! (carried as carry/gpu_small), where a missing device fails them. They need the 2 KiB PoRep
//! test parameters in `$CUZK_TEST_PARAMS` and seal a sector.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use blstrs::Scalar;
use cuzk::gpu::device::{hold_memory, FreeWatch};
use cuzk::gpu::msm::Curve;
use cuzk::gpu::plan::{self, Plan, Quotient, Sizes};
use cuzk::gpu::{GpuBackend, GpuOptions, MsmTuning};
use cuzk::pipeline::{Device, JobControl, PipelineOptions, ProvingService};
use cuzk::proofs::porep::{record_partition_by, CircuitCode};
use cuzk::proofs::{registry, PoRepRequest, ProofKind, ProofRequest};
use cuzk::prover::{
    prove_with_randomness, prove_witness_with_randomness, urgency, Backend, WitnessPartition,
};
use cuzk::sealing::seal_sector;
use cuzk::srs::load_srs;
use cuzk::synth::{Recorded, Recording};
use filecoin_proofs_api::RegisteredSealProof;

fn options(limit: Option<u64>) -> GpuOptions {
    GpuOptions {
        kernel_cache: std::env::var_os("CUZK_GPU_CACHE").map(Into::into),
        memory_limit: limit,
        ..GpuOptions::default()
    }
}

fn gpu(limit: Option<u64>) -> Arc<dyn Backend> {
    cuzk::gpu::try_backend(&options(limit)).unwrap_or_else(|e| {
        panic!("no usable CUDA device, but the GPU tests were asked for (--ignored): {e}")
    })
}

/// The MSM driver's window width for n points (G2 when true), as the backends use it.
fn bits(n: u64, g2: bool) -> u32 {
    let curve = if g2 { Curve::G2 } else { Curve::G1 };
    MsmTuning::default().window_bits(n as usize, curve)
}

/// The device's free memory may not go below this while proofs run: half the margin the
/// budget leaves the driver (its own allocations, the pool's rounding take the rest).
const FREE_FLOOR: u64 = plan::MARGIN / 2;

/// What a plan's description says once a proof ran out of device memory and was proved again
/// under a smaller plan.
const RETRIED: &str = "ran out of device memory";

/// What tells plans apart for this test: the forms of every stage, whether any query is
/// streamed, and whether the MSMs are cut.
fn form(p: &Plan, s: &Sizes) -> (bool, bool, bool, bool, bool, bool) {
    (
        p.quotient == Quotient::Parked,
        p.shape_resident,
        p.keep_assignment,
        p.resident == plan::Queries::ALL,
        p.resident == plan::Queries::NONE,
        p.piece_g1 < s.longest(false),
    )
}

/// One limit per form the planner picks between the smallest budget that fits and one that
/// holds everything, smallest first, and `None` (no limit) last.
fn limits_of_every_form(sizes: &Sizes) -> Vec<Option<u64>> {
    let need = plan::plan(1 << 20, sizes, &bits)
        .expect_err("a MiB is too small")
        .need;
    let mut forms = BTreeMap::new();
    let mut budget = need;
    loop {
        let p = plan::plan(budget, sizes, &bits).expect("the smallest need fits");
        forms.entry(form(&p, sizes)).or_insert(budget);
        if p.is_all_resident(sizes) {
            break;
        }
        budget += budget / 16;
    }
    let mut limits: Vec<u64> = forms.into_values().collect();
    limits.sort();
    println!("{} forms between {need} and {budget} bytes", limits.len());
    limits.into_iter().map(Some).chain([None]).collect()
}

/// A sealed 2 KiB sector, the 2 KiB PoRep parameters and the sizes of their queries.
struct Sealed2KiB {
    params: std::path::PathBuf,
    /// Holds the sector's files.
    _dir: tempfile::TempDir,
    sealed: cuzk::sealing::SealedSector,
    srs: Arc<cuzk::srs::Srs>,
    sizes: Sizes,
}

impl Sealed2KiB {
    fn new(sector: u64) -> Self {
        let params = common::init(&[ProofKind::PoRep]);
        let _dir = tempfile::tempdir().unwrap();
        let sealed = seal_sector(
            _dir.path(),
            RegisteredSealProof::StackedDrg2KiBV1_1,
            1000,
            sector,
        )
        .expect("sealing a 2 KiB sector");
        let id = registry::params_id(ProofKind::PoRep, 2048).unwrap();
        let srs = Arc::new(load_srs(&id.params_file(&params)).expect("the 2 KiB PoRep parameters"));
        let sizes = Sizes::from_queries(
            srs.h.len() as u64,
            srs.l.len() as u64,
            srs.a.len() as u64,
            srs.b_g1.len() as u64,
        );
        Sealed2KiB {
            params,
            _dir,
            sealed,
            srs,
            sizes,
        }
    }
}

#[test]
#[ignore = "needs a CUDA device: run with --ignored on a GPU host (scripts/gpu-device-run.sh)"]
fn every_memory_plan_proves_the_same_bytes_and_verifies() {
    let Sealed2KiB {
        params,
        _dir,
        sealed,
        srs,
        sizes,
    } = Sealed2KiB::new(5);
    let c1 = &sealed.c1_json[..];
    let Recorded::Evaluations(partition) =
        record_partition_by(c1, 0, 2, Recording::Evaluations, CircuitCode::Ours).unwrap()
    else {
        panic!("evaluations expected");
    };
    let Recorded::Shape(shape, witness) =
        record_partition_by(c1, 0, 2, Recording::Shape, CircuitCode::Ours).unwrap()
    else {
        panic!("a shape expected");
    };
    let shape = Arc::new(shape);
    let (r, s) = (Scalar::from(5u64), Scalar::from(7u64));

    let limits = limits_of_every_form(&sizes);
    // The device without a limit gives the reference bytes (its paths are checked against
    // bellperson's by gpu_prepared).
    let prove = |backend: &Arc<dyn Backend>| {
        let prepared = backend.prepare(srs.clone()).unwrap();
        let from_evaluations = prove_with_randomness(prepared.as_ref(), partition.clone(), r, s)
            .expect("proof from host evaluations")
            .0;
        let w = WitnessPartition::new(witness.clone(), shape.clone()).unwrap();
        let from_shape = prove_witness_with_randomness(prepared.as_ref(), w, r, s)
            .expect("proof from the recorded shape")
            .0;
        (from_evaluations, from_shape, prepared.memory_plan())
    };
    let (want, want_shaped, _) = prove(&gpu(None));
    assert_eq!(want, want_shaped, "both paths give the same proof");

    let request = ProofRequest::PoRep(PoRepRequest {
        c1: sealed.c1_json.clone(),
        miner_id: 1000,
        sector_number: Some(sealed.sector_number),
    });
    for limit in limits {
        let backend = gpu(limit);
        backend.reset_memory_peak();
        let watch = FreeWatch::start(0, std::time::Duration::from_micros(200)).unwrap();
        let free_before = watch.lowest();
        let (ours, ours_shaped, plan) = prove(&backend);
        let lowest = watch.stop();
        let memory = backend.memory().expect("a device accounts for its memory");
        let plan = plan.unwrap_or_default();
        // The planner's estimate for the budget the device planned with (the limit, or what
        // was free less the margin).
        let planned = plan::plan(memory.budget, &sizes, &bits).expect("a plan for every limit");
        // A plan that holds everything takes the paths the model does not follow step by step
        // (at 32 GiB they measured 0.5 % over the estimate): they must fit the room the planner
        // keeps, the 2 % of the budget beside the estimate; the planned paths the estimate.
        let estimate = if planned.is_all_resident(&sizes) {
            planned.peak * 1000 / 980
        } else {
            planned.peak
        };
        let device = free_before.saturating_sub(lowest);
        println!(
            "limit {limit:?}: {plan}; buffers' peak {} of an estimated {estimate} bytes; \
             the driver's free memory fell by {device} bytes",
            memory.peak
        );
        assert_eq!(ours, want, "from host evaluations under {limit:?}");
        assert_eq!(ours_shaped, want, "from the shape under {limit:?}");
        assert!(
            !plan.contains(RETRIED),
            "a proof was retried under {limit:?}: {plan}"
        );
        assert!(
            memory.peak <= estimate,
            "under {limit:?} the buffers held {} bytes, over the estimate of {estimate}",
            memory.peak
        );
        assert!(
            device <= estimate + FREE_FLOOR,
            "under {limit:?} the driver's free memory fell by {device} bytes, the estimate \
             is {estimate}"
        );

        // Whole proofs through the service, which records the shape with the first and proves
        // the second from it; both verify.
        let svc = ProvingService::with_devices(
            params.clone(),
            vec![Device::new(backend)],
            &PipelineOptions::default(),
        )
        .expect("the device workers start");
        for round in 0..2 {
            let out = svc
                .prove(&request, &JobControl::new())
                .unwrap_or_else(|e| panic!("proof {round} under {limit:?}: {e}"));
            assert!(
                sealed.verify_porep(&out.proof, &params).unwrap(),
                "proof {round} under {limit:?} verifies"
            );
            // A device error falls back to the CPU, which proves the same bytes: the test is
            // of the device.
            let stats = svc.pipeline();
            assert_eq!(
                stats.fallback_proved, 0,
                "proof {round} under {limit:?} was proved on the CPU after a device error \
                 ({}): {stats:?}",
                out.backend
            );
        }
    }
}

/// Host copies only while something needs them: once the device holds a query, the process
/// drops the host's copy of it (H, L and A at the load, the B queries with the first proof);
/// where the device loses its copy, the points are read again from the parameter file and
/// the proofs still verify.
#[test]
#[ignore = "needs a CUDA device: run with --ignored on a GPU host (scripts/gpu-device-run.sh)"]
fn host_copies_go_while_the_device_holds_them_and_come_back_from_the_file() {
    let params = common::init(&[ProofKind::PoRep]);
    let dir = tempfile::tempdir().unwrap();
    let sealed = seal_sector(dir.path(), RegisteredSealProof::StackedDrg2KiBV1_1, 1000, 9)
        .expect("sealing a 2 KiB sector");
    let id = registry::params_id(ProofKind::PoRep, 2048).unwrap();
    let device = Arc::new(GpuBackend::new(&options(None)).expect("a CUDA device"));
    let svc = ProvingService::with_devices(
        params.clone(),
        vec![Device::new(device.clone() as Arc<dyn Backend>)],
        &PipelineOptions::default(),
    )
    .expect("the device workers start");
    let held = || {
        let (_, set) = svc
            .srs()
            .loaded_prepared()
            .pop()
            .expect("the set is resident");
        let srs = set.first().expect("one device").srs().clone();
        (
            srs.resident_bytes(),
            srs.points_bytes(),
            srs.b_g1.held_bytes() + srs.b_g2.held_bytes(),
        )
    };
    svc.preload(&id).expect("preload");
    let (after_load, all, b) = held();
    println!("after the load: {after_load} of {all} bytes held, the B queries' {b}");
    assert_eq!(
        after_load, b,
        "only the B queries, which go up with the first proof, stay"
    );
    let request = ProofRequest::PoRep(PoRepRequest {
        c1: sealed.c1_json.clone(),
        miner_id: 1000,
        sector_number: Some(sealed.sector_number),
    });
    for round in 0..3 {
        if round == 2 {
            // The device loses every point: they come back from the file.
            device.clear_cache().expect("the device's points dropped");
        }
        let out = svc
            .prove(&request, &JobControl::new())
            .unwrap_or_else(|e| panic!("proof {round}: {e}"));
        assert!(
            sealed.verify_porep(&out.proof, &params).unwrap(),
            "proof {round} verifies"
        );
        assert_eq!(svc.pipeline().fallback_proved, 0, "proved on the device");
        let (now, _, _) = held();
        assert_eq!(now, 0, "after proof {round} the host holds no points");
    }
}

/// A limit below the smallest form's need: the device refuses the set's proofs with an error
/// naming both sizes, and the service proves them on the CPU instead, verified.
#[test]
#[ignore = "needs a CUDA device: run with --ignored on a GPU host (scripts/gpu-device-run.sh)"]
fn a_device_too_small_for_the_set_hands_its_partitions_to_the_cpu() {
    let params = common::init(&[ProofKind::PoRep]);
    let dir = tempfile::tempdir().unwrap();
    let sealed = seal_sector(dir.path(), RegisteredSealProof::StackedDrg2KiBV1_1, 1000, 6)
        .expect("sealing a 2 KiB sector");
    let backend = gpu(Some(64 << 20));
    let id = registry::params_id(ProofKind::PoRep, 2048).unwrap();
    let srs = Arc::new(load_srs(&id.params_file(&params)).unwrap());
    let plan = backend.prepare(srs).unwrap().memory_plan().unwrap();
    assert!(plan.contains("cannot hold"), "{plan}");
    let svc = ProvingService::with_devices(
        params.clone(),
        vec![Device::new(backend)],
        &PipelineOptions::default(),
    )
    .expect("the device workers start");
    let request = ProofRequest::PoRep(PoRepRequest {
        c1: sealed.c1_json.clone(),
        miner_id: 1000,
        sector_number: Some(sealed.sector_number),
    });
    let out = svc
        .prove(&request, &JobControl::new())
        .expect("proved on the CPU");
    assert!(sealed.verify_porep(&out.proof, &params).unwrap());
    assert_eq!(svc.pipeline().fallback_proved, 1);
}

/// The MSM's working estimate against the device: for G1 and G2 MSMs of several sizes over
/// the 2 KiB parameters' points and random scalars (neither 0 nor 1, the estimate's case), the
/// most the device's buffers held beyond the points and the scalars is at most
/// `plan::msm_work_bytes`, and more than a quarter of it (an estimate far over the buffers
/// would shrink every plan's pieces for nothing).
#[test]
#[ignore = "needs a CUDA device: run with --ignored on a GPU host (scripts/gpu-device-run.sh)"]
fn msm_work_covers_the_drivers_buffers() {
    use ff::Field;
    let params = common::init(&[ProofKind::PoRep]);
    let id = registry::params_id(ProofKind::PoRep, 2048).unwrap();
    let srs = load_srs(&id.params_file(&params)).expect("the 2 KiB PoRep parameters");
    let backend = GpuBackend::new(&options(None)).unwrap_or_else(|e| {
        panic!("no usable CUDA device, but the GPU tests were asked for (--ignored): {e}")
    });
    let mut rng = rand::thread_rng();
    for (n, g2) in [
        (1usize << 12, false),
        (1 << 16, false),
        (1 << 20, false),
        (1 << 12, true),
        (1 << 16, true),
        (1 << 19, true),
    ] {
        let scalars: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut rng)).collect();
        let before = backend.memory_use().used;
        Backend::reset_memory_peak(&backend);
        let points = if g2 {
            assert!(srs.b_g2.len() >= n);
            backend
                .msm_g2_gpu(&srs.b_g2.get().unwrap()[..n], &scalars)
                .unwrap();
            n as u64 * 192
        } else {
            assert!(srs.l.len() >= n);
            backend
                .msm_g1_gpu(&srs.l.get().unwrap()[..n], &scalars)
                .unwrap();
            n as u64 * 96
        };
        let peak = backend.memory_use().peak;
        let work = peak.saturating_sub(before + points + n as u64 * 32);
        let estimate = plan::msm_work_bytes(g2, n as u64, bits(n as u64, g2));
        println!("{n} points (G2 {g2}): working buffers {work} bytes, estimated {estimate}");
        assert!(
            work <= estimate,
            "{n} points (G2 {g2}): {work} > {estimate}"
        );
        assert!(
            work > estimate / 4,
            "{n} points (G2 {g2}): {work} ≪ {estimate}"
        );
    }
}

/// The smallest budget whose plan keeps the assignment and some points on the device without
/// keeping everything: a proof of it keeps its assignment between its two turns and has
/// points to evict.
fn budget_keeping_points(sizes: &Sizes) -> u64 {
    let need = plan::plan(1 << 20, sizes, &bits).expect_err("a MiB").need;
    let mut budget = need;
    loop {
        let p = plan::plan(budget, sizes, &bits).expect("the smallest need fits");
        assert!(!p.is_all_resident(sizes), "no such form below {budget}");
        if p.keep_assignment && p.resident != plan::Queries::NONE {
            return budget;
        }
        budget += budget / 32;
    }
}

/// Two parameter sets proved on a device that another holder leaves a small plan's worth of
/// memory (plus the margin): set Y's proof runs, urgent, between set X's two turns, while X's
/// assignment is kept on the device (which Y's plan must not count as free), and Y's turn
/// evicts X's resident points, which X's second turn puts back or streams in fallback pieces.
/// Every proof equals the unlimited device's, no proof is retried under a smaller plan, and
/// the driver's own free memory (sampled every 100 µs by a thread of its own, not the ledger)
/// never falls under half the margin.
#[test]
#[ignore = "needs a CUDA device: run with --ignored on a GPU host (scripts/gpu-device-run.sh)"]
fn a_second_set_between_a_proofs_turns_keeps_the_device_margin() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let Sealed2KiB {
        params: _,
        _dir,
        sealed,
        srs,
        sizes,
    } = Sealed2KiB::new(7);
    let Recorded::Shape(shape, witness) =
        record_partition_by(&sealed.c1_json, 0, 2, Recording::Shape, CircuitCode::Ours).unwrap()
    else {
        panic!("a shape expected");
    };
    let shape = Arc::new(shape);
    let (r, s) = (Scalar::from(5u64), Scalar::from(7u64));
    let prove = |set: &dyn cuzk::prover::PreparedSrs| {
        let w = WitnessPartition::new(witness.clone(), shape.clone()).unwrap();
        let proof = prove_witness_with_randomness(set, w, r, s).unwrap_or_else(|e| {
            panic!(
                "proof from the recorded shape: {e:?}; the set's plan: {}",
                set.memory_plan().unwrap_or_default()
            )
        });
        proof.0
    };
    let want = prove(gpu(None).prepare(srs.clone()).unwrap().as_ref());

    let budget = budget_keeping_points(&sizes);
    let held = hold_memory(0, budget + plan::MARGIN).expect("another holder of the device");
    println!("held {} bytes, {} free", held.held, held.free);
    let backend = gpu(None);
    let x = backend.prepare(srs.clone()).unwrap();
    let y = backend.prepare(srs.clone()).unwrap();
    println!("set X: {}", x.memory_plan().unwrap_or_default());
    let watch = FreeWatch::start(0, std::time::Duration::from_micros(100)).unwrap();
    let mut inside = 0;
    for round in 0..4 {
        // X's proof on this thread; Y's, urgent, once X's first turn changed what the device
        // holds (urgent, Y takes the next turn and X none until Y is done).
        let before = backend.memory().unwrap().used;
        let x_done = AtomicBool::new(false);
        let (ours_x, ours_y, y_first) = std::thread::scope(|scope| {
            let y_proof = scope.spawn(|| {
                let start = std::time::Instant::now();
                while backend.memory().unwrap().used == before
                    && start.elapsed() < std::time::Duration::from_secs(30)
                {
                    std::thread::sleep(std::time::Duration::from_micros(50));
                }
                urgency::urgently(|| {
                    let proof = prove(y.as_ref());
                    (proof, !x_done.load(Ordering::SeqCst))
                })
            });
            let ours_x = prove(x.as_ref());
            x_done.store(true, Ordering::SeqCst);
            let (ours_y, y_first) = y_proof.join().unwrap();
            (ours_x, ours_y, y_first)
        });
        println!(
            "round {round}: Y finished before X: {y_first}; lowest free so far {} bytes; Y's plan: {}",
            watch.lowest(),
            y.memory_plan().unwrap_or_default()
        );
        inside += usize::from(y_first);
        assert_eq!(ours_x, want, "set X, round {round}");
        assert_eq!(ours_y, want, "set Y, round {round}");
    }
    assert!(
        inside > 0,
        "Y's proof never ran inside X's: the case was not tried"
    );
    let samples = watch.samples();
    let lowest = watch.stop();
    for (name, set) in [("X", &x), ("Y", &y)] {
        let plan = set.memory_plan().unwrap_or_default();
        println!("set {name}: {plan}");
        assert!(!plan.contains(RETRIED), "set {name} was retried: {plan}");
    }
    println!("the driver's free memory: lowest {lowest} bytes in {samples} samples");
    assert!(
        lowest >= FREE_FLOOR,
        "the driver's free memory fell to {lowest} bytes, under half the margin ({FREE_FLOOR})"
    );
    drop(held);
}
