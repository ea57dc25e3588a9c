//! The stages with a fake device: ranks, the critical worker, cancellation, the budget.

use std::sync::atomic::AtomicU64;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use bellperson::groth16::Proof;
use blstrs::{Bls12, G1Affine, G2Affine, Scalar};
use ff::Field;
use group::prime::PrimeCurveAffine;

use super::*;
use crate::srs::ProofKind;
use crate::synth::Synthesized;

const WAIT: Duration = Duration::from_secs(10);

/// Proves nothing: records which partitions it was given, and holds the first one until
/// released, so that tests can fill the queue behind it.
#[derive(Default)]
struct FakeDevice {
    log: Mutex<Vec<(u64, usize)>>,
    gate: Mutex<Option<bool>>,
    changed: Condvar,
}

impl FakeDevice {
    fn holding_the_first() -> Arc<Self> {
        let d = Self::default();
        *d.gate.lock().unwrap() = Some(false);
        Arc::new(d)
    }
    fn release(&self) {
        *self.gate.lock().unwrap() = Some(true);
        self.changed.notify_all();
    }
    fn wait_started(&self, n: usize) {
        let mut log = self.log.lock().unwrap();
        while log.len() < n {
            log = self.changed.wait_timeout(log, WAIT).unwrap().0;
        }
    }
    fn log(&self) -> Vec<(u64, usize)> {
        self.log.lock().unwrap().clone()
    }
}

/// Partitions carry their job's sequence number in `input[0]` for the log.
struct Work(Arc<FakeDevice>, u64);

impl DeviceWork for Work {
    fn prove(&self, _device: usize, s: Staged) -> Result<Proof<Bls12>, ProveError> {
        let Staged::Evaluated(s) = s else {
            panic!("the fake device takes evaluated partitions")
        };
        let first = {
            let mut log = self.0.log.lock().unwrap();
            log.push((self.1, s.aux.len()));
            log.len() == 1
        };
        self.0.changed.notify_all();
        if first {
            let mut gate = self.0.gate.lock().unwrap();
            while *gate == Some(false) {
                gate = self.0.changed.wait_timeout(gate, WAIT).unwrap().0;
            }
        }
        Ok(Proof {
            a: G1Affine::identity(),
            b: G2Affine::identity(),
            c: G1Affine::identity(),
        })
    }
}

fn stages(threads: usize, budget: u64) -> Stages {
    Stages::start(
        &PipelineOptions {
            synthesis_threads: threads,
            memory_budget: budget,
            device_workers: 1,
            yield_to_critical: true,
            recorded_shapes: false,
            partition_threads: 1,
            health: Default::default(),
        },
        &[],
    )
    .unwrap()
}

fn id() -> ParamsId {
    ParamsId {
        kind: ProofKind::PoRep,
        sector_size: 2048,
        cache_id: "test".into(),
    }
}

/// Partition `k` of size `scalars` (32 bytes each); its index is recorded as `aux.len()`.
fn partition(k: usize, scalars: usize) -> Partition {
    let mut s = Synthesized {
        aux: vec![Scalar::ONE; k],
        ..Default::default()
    };
    s.aux.shrink_to_fit();
    s.a = Vec::with_capacity(scalars);
    s.into()
}

/// Partition `k` of `job`, of `scalars` scalars, for the fake device.
fn handover(
    device: &Arc<FakeDevice>,
    job: &Arc<JobRun>,
    k: usize,
    scalars: usize,
    tx: &Sender<PartitionDone>,
) -> Handover {
    Handover {
        job: job.clone(),
        partition: k,
        synthesized: Staged::Evaluated(partition(k, scalars)),
        synthesis: Duration::ZERO,
        work: Arc::new(Work(device.clone(), job.seq)),
        reply: tx.clone(),
        claim: None,
        expected: None,
        avoid: Vec::new(),
    }
}

/// Admits and hands over partition `k` of `job`, as a job's synthesis thread does.
fn submit(
    st: &Stages,
    device: &Arc<FakeDevice>,
    job: &Arc<JobRun>,
    k: usize,
    tx: &Sender<PartitionDone>,
) {
    assert!(st.admit(job, k, 0).unwrap());
    st.to_device(&id(), handover(device, job, k, 0, tx));
}

fn recv(rx: &Receiver<PartitionDone>) -> PartitionDone {
    rx.recv_timeout(WAIT).expect("a partition's result")
}

#[test]
fn a_critical_partition_is_proved_beside_the_running_one() {
    let st = stages(1, u64::MAX);
    let device = FakeDevice::holding_the_first();
    let (tx, rx) = mpsc::channel();
    let porep = JobRun::new(1, 10);
    for k in 0..3 {
        submit(&st, &device, &porep, k, &tx);
    }
    device.wait_started(1);
    assert_eq!(st.stats().device_queued, 2);
    let (ctx, crx) = mpsc::channel();
    let winning = JobRun::new(CRITICAL, 11);
    submit(&st, &device, &winning, 0, &ctx);
    // Proved while partition 0 of the PoRep job still holds the device worker.
    assert!(recv(&crx).result.is_ok());
    assert_eq!(device.log(), [(10, 0), (11, 0)]);
    device.release();
    let order: Vec<usize> = (0..3).map(|_| recv(&rx).partition).collect();
    assert_eq!(order, [0, 1, 2]);
}

#[test]
fn a_critical_partitions_synthesis_time_is_kept_and_its_announcement_ends_with_its_proof() {
    use crate::prover::urgency::{expect, expected_soon};
    let st = stages(1, u64::MAX);
    let device = Arc::new(FakeDevice::default());
    assert_eq!(st.critical_synthesis(&id()), None, "none measured yet");
    // Far from the instants other tests announce, so that theirs cannot be taken for this.
    let far = Instant::now() + Duration::from_secs(7_200);
    for (class, seq, took) in [(1, 20, 900), (CRITICAL, 21, 150), (1, 22, 700)] {
        let (tx, rx) = mpsc::channel();
        let job = JobRun::new(class, seq);
        assert!(st.admit(&job, 0, 0).unwrap());
        let mut to = handover(&device, &job, 0, 0, &tx);
        to.synthesis = Duration::from_millis(took);
        to.expected = (class == CRITICAL).then(|| expect(far));
        assert_eq!(to.expected.is_some(), expected_soon(far));
        st.to_device(&id(), to);
        assert!(recv(&rx).result.is_ok());
        assert!(!expected_soon(far), "withdrawn once proved (job {seq})");
    }
    // Only the critical partition's synthesis counts, and it stays the last one measured.
    assert_eq!(
        st.critical_synthesis(&id()),
        Some(Duration::from_millis(150))
    );
}

#[test]
fn a_higher_class_overtakes_queued_partitions() {
    let st = stages(1, u64::MAX);
    let device = FakeDevice::holding_the_first();
    let (tx, rx) = mpsc::channel();
    let low = JobRun::new(1, 20);
    for k in 0..3 {
        submit(&st, &device, &low, k, &tx);
    }
    device.wait_started(1);
    let high = JobRun::new(2, 21);
    submit(&st, &device, &high, 0, &tx);
    device.release();
    for _ in 0..4 {
        assert!(recv(&rx).result.is_ok());
    }
    assert_eq!(device.log(), [(20, 0), (21, 0), (20, 1), (20, 2)]);
}

#[test]
fn stopping_a_job_drops_its_queued_partitions_at_once() {
    let st = stages(1, u64::MAX);
    let device = FakeDevice::holding_the_first();
    let (tx, rx) = mpsc::channel();
    let job = JobRun::new(1, 30);
    for k in 0..3 {
        submit(&st, &device, &job, k, &tx);
    }
    device.wait_started(1);
    st.stop(&job);
    let dropped: Vec<_> = (0..2).map(|_| recv(&rx)).collect();
    assert!(dropped
        .iter()
        .all(|d| matches!(d.result, Err(ProveError::Cancelled))));
    assert_eq!(st.stats().device_queued, 0);
    // Nothing more of the job is admitted.
    assert!(!st.admit(&job, 3, 0).unwrap());
    device.release();
    assert!(recv(&rx).result.is_ok(), "the running partition completes");
    assert_eq!(device.log().len(), 1);
    assert_eq!(st.stats().reserved_bytes, 0);
}

#[test]
fn synthesis_waits_for_memory_the_device_frees() {
    let st = Arc::new(stages(4, 100));
    let device = FakeDevice::holding_the_first();
    let (tx, rx) = mpsc::channel();
    let job = JobRun::new(1, 40);
    assert!(st.admit(&job, 0, 64).unwrap());
    // Measured after synthesis: two scalars, 64 bytes.
    st.to_device(&id(), handover(&device, &job, 0, 2, &tx));
    device.wait_started(1);
    let waiter = {
        let (st, job) = (st.clone(), job.clone());
        std::thread::spawn(move || st.admit(&job, 1, 64).unwrap())
    };
    while st.stats().waiting == 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(50));
    assert!(!waiter.is_finished(), "admitted beyond the budget");
    assert_eq!(st.stats().reserved_bytes, 64);
    assert_eq!(st.measured(&id(), Form::Evaluated), Some(64));
    device.release();
    assert!(recv(&rx).result.is_ok());
    assert!(
        waiter.join().unwrap(),
        "admitted once the device freed the bytes"
    );
    assert_eq!(st.stats().reserved_bytes, 64);
    st.abandon(&job, 1);
    assert_eq!(st.stats().reserved_bytes, 0);
}

#[test]
fn a_stopped_job_stops_waiting() {
    let st = Arc::new(stages(1, u64::MAX));
    let (a, b) = (JobRun::new(1, 50), JobRun::new(1, 51));
    assert!(st.admit(&a, 0, 0).unwrap());
    let waiter = {
        let (st, b) = (st.clone(), b.clone());
        std::thread::spawn(move || st.admit(&b, 0, 0).unwrap())
    };
    while st.stats().waiting == 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    st.stop(&b);
    assert!(!waiter.join().unwrap());
    assert_eq!(st.stats().waiting, 0);
}

#[test]
fn a_partition_that_can_no_longer_fit_fails_instead_of_blocking_the_line() {
    let st = Arc::new(stages(4, 100));
    let (a, b) = (JobRun::new(1, 60), JobRun::new(1, 61));
    assert!(st.admit(&a, 0, 50).unwrap());
    let waiter = {
        let (st, b) = (st.clone(), b.clone());
        std::thread::spawn(move || st.admit(&b, 0, 80))
    };
    while st.stats().waiting == 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    // Parameters are loaded: 80 bytes can never fit in what is left.
    st.set_held(|h| h.params = 30);
    let err = waiter.join().unwrap().unwrap_err();
    assert!(matches!(
        err,
        ProveError::ExceedsMemoryBudget {
            needed: 80,
            available: 70
        }
    ));
    assert_eq!(st.stats().waiting, 0);
}

/// A parameter load waits for room beside the partitions in flight, and while it waits no
/// partition admitted after it takes that room; once the loaded set counts, the reservation
/// goes.
#[test]
fn a_parameter_load_waits_for_room_and_partitions_do_not_overtake_it() {
    let st = Arc::new(stages(4, 100));
    let (a, b) = (JobRun::new(1, 70), JobRun::new(1, 71));
    assert!(st.admit(&a, 0, 50).unwrap());
    let load = {
        let st = st.clone();
        std::thread::spawn(move || {
            let r = st.reserve_load(60).unwrap();
            st.set_held(|h| h.params = 55);
            drop(r);
        })
    };
    while st.stats().held.loading == 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    // 50 reserved, 60 waiting to load: a partition of 10 waits too.
    let waiter = {
        let (st, b) = (st.clone(), b.clone());
        std::thread::spawn(move || st.admit(&b, 0, 10).unwrap())
    };
    while st.stats().waiting == 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!((st.stats().waiting, st.stats().reserved_bytes), (1, 50));
    assert!(!load.is_finished());
    // The first partition is done: the load goes, then the waiting partition.
    st.abandon(&a, 0);
    load.join().unwrap();
    assert!(waiter.join().unwrap());
    let stats = st.stats();
    assert_eq!((stats.held.loading, stats.held.params), (0, 55));
    assert_eq!((stats.reserved_bytes, stats.params_bytes), (10, 55));
    // A load that can never fit beside what is held is an error, not a wait.
    assert!(matches!(
        st.reserve_load(46),
        Err(ProveError::ParamsExceedMemoryBudget {
            needed: 46,
            available: 45
        })
    ));
    assert_eq!(st.stats().held.loading, 0);
}

/// With a probe of the process's memory, a partition waits while the process's measured
/// memory and the partitions being synthesized leave no room for it, whatever the
/// accounting says; with nothing in flight it goes by the accounting alone.
#[test]
fn admission_waits_for_the_processs_measured_memory() {
    let st = Arc::new(stages(4, 100));
    let rss = Arc::new(AtomicU64::new(5));
    let probe = rss.clone();
    assert!(st.measure_with(Box::new(move || Some(probe.load(Ordering::SeqCst)))));
    assert!(!st.measure_with(Box::new(|| None)));
    assert_eq!(st.stats().held.process_base, 5);
    assert_eq!(st.stats().process_bytes, Some(5));
    // Nothing in flight: measured memory far past the budget does not stop the first.
    rss.store(500, Ordering::SeqCst);
    let (a, b) = (JobRun::new(1, 80), JobRun::new(1, 81));
    assert!(st.admit(&a, 0, 20).unwrap());
    // 20 being synthesized; the process holds 75 (say, a backend's buffers): 75 + 20 + 10
    // would pass 100.
    rss.store(75, Ordering::SeqCst);
    let waiter = {
        let (st, b) = (st.clone(), b.clone());
        std::thread::spawn(move || st.admit(&b, 0, 10).unwrap())
    };
    std::thread::sleep(Duration::from_millis(150));
    assert_eq!(st.stats().waiting, 1);
    // The process's memory falls with no wake-up of its own: the wait looks again.
    rss.store(70, Ordering::SeqCst);
    assert!(waiter.join().unwrap());
    assert_eq!(st.stats().reserved_bytes, 30);
}

#[test]
fn a_partition_cut_into_parts_reserves_one_parts_copy_beside_its_measured_size() {
    assert_eq!(stitched_bytes(1600, 16), 1700);
    assert_eq!(stitched_bytes(1600, 1), 1600);
    assert_eq!(stitched_bytes(1600, 0), 1600);
    assert_eq!(stitched_bytes(u64::MAX, 2), u64::MAX);
}

/// Records which device proved each partition; every partition takes `hold`.
struct OnDevice(Arc<Mutex<Vec<(usize, usize)>>>, Duration);

impl DeviceWork for OnDevice {
    fn prove(&self, device: usize, s: Staged) -> Result<Proof<Bls12>, ProveError> {
        let Staged::Evaluated(s) = s else {
            panic!("the fake device takes evaluated partitions")
        };
        std::thread::sleep(self.1);
        self.0.lock().unwrap().push((device, s.aux.len()));
        Ok(Proof {
            a: G1Affine::identity(),
            b: G2Affine::identity(),
            c: G1Affine::identity(),
        })
    }
}

fn two_devices(second_critical: bool) -> Stages {
    let options = PipelineOptions {
        synthesis_threads: 8,
        memory_budget: u64::MAX,
        device_workers: 1,
        yield_to_critical: true,
        recorded_shapes: false,
        partition_threads: 1,
        health: Default::default(),
    };
    let cpu = DeviceSpec {
        critical: second_critical,
        ..DeviceSpec::any("cpu")
    };
    Stages::start(&options, &[DeviceSpec::any("gpu"), cpu]).unwrap()
}

/// Admits and hands over partition `k` of `job` (recorded as `aux.len() = index`), for
/// [`OnDevice`] to prove in `hold`.
fn submit_on(
    st: &Stages,
    log: &Arc<Mutex<Vec<(usize, usize)>>>,
    hold: Duration,
    (job, k, index): (&Arc<JobRun>, usize, usize),
    tx: &Sender<PartitionDone>,
) {
    assert!(st.admit(job, k, 0).unwrap());
    let to = Handover {
        job: job.clone(),
        partition: k,
        synthesized: Staged::Evaluated(partition(index, 0)),
        synthesis: Duration::ZERO,
        work: Arc::new(OnDevice(log.clone(), hold)),
        reply: tx.clone(),
        claim: None,
        expected: None,
        avoid: Vec::new(),
    };
    st.to_device(&id(), to);
}

#[test]
fn partitions_of_one_job_spread_over_two_devices() {
    let st = two_devices(true);
    let log = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = mpsc::channel();
    let job = JobRun::new(1, 70);
    for k in 0..8 {
        submit_on(&st, &log, Duration::from_millis(20), (&job, k, k), &tx);
    }
    for _ in 0..8 {
        assert!(recv(&rx).result.is_ok());
    }
    let log = log.lock().unwrap().clone();
    let on = |d: usize| log.iter().filter(|(dev, _)| *dev == d).count();
    assert!(on(0) >= 2 && on(1) >= 2, "both devices prove: {log:?}");
    let stats = st.stats();
    let names: Vec<&str> = stats.devices.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["gpu", "cpu"]);
    let proved: Vec<u64> = stats.devices.iter().map(|d| d.partitions_proved).collect();
    assert_eq!(proved, [on(0) as u64, on(1) as u64]);
    assert!(stats.devices.iter().all(|d| d.busy > Duration::ZERO));
}

#[test]
fn a_cpu_beside_a_gpu_never_takes_a_critical_partition() {
    let st = two_devices(false);
    let log = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = mpsc::channel();
    // Enough critical partitions at once that an idle CPU worker would take some.
    for k in 0..6 {
        let job = JobRun::new(CRITICAL, 80 + k as u64);
        submit_on(&st, &log, Duration::from_millis(10), (&job, 0, k), &tx);
    }
    for _ in 0..6 {
        assert!(recv(&rx).result.is_ok());
    }
    let log = log.lock().unwrap().clone();
    assert!(log.iter().all(|(dev, _)| *dev == 0), "{log:?}");
}

#[test]
fn partitions_handed_over_together_are_all_taken() {
    // Two devices that rotate: a worker that defers a partition to the other device must not
    // leave the second of two partitions handed over at once waiting for the next handover.
    let st = two_devices(true);
    let log = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = mpsc::channel();
    for round in 0..20u64 {
        let job = JobRun::new(1, 100 + round);
        for k in 0..2 {
            submit_on(&st, &log, Duration::from_millis(2), (&job, k, k), &tx);
        }
        for _ in 0..2 {
            assert!(recv(&rx).result.is_ok(), "round {round}");
        }
    }
    assert_eq!(st.stats().device_queued, 0);
}

#[test]
fn an_idle_gpu_goes_before_an_idle_cpu() {
    let st = two_devices(false);
    let log = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = mpsc::channel();
    // One partition at a time: the GPU is idle when each arrives (its worker is waiting
    // well within the pause before each partition, the first included: on a loaded 2-core
    // machine the workers had not all started when the first came at once, and 20 ms between
    // partitions was too short).
    for k in 0..6 {
        std::thread::sleep(Duration::from_millis(200));
        let job = JobRun::new(1, 120 + k as u64);
        submit_on(&st, &log, Duration::from_millis(2), (&job, 0, k), &tx);
        assert!(recv(&rx).result.is_ok());
    }
    let log = log.lock().unwrap().clone();
    assert!(log.iter().all(|(dev, _)| *dev == 0), "{log:?}");
}

/// Records which device proved each partition (`usize::MAX`: the CPU prover); fails every
/// partition on device `failing` while it is set.
struct Flaky {
    log: Arc<Mutex<Vec<usize>>>,
    failing: Arc<Mutex<Option<usize>>>,
}

impl DeviceWork for Flaky {
    fn prove(&self, device: usize, _s: Staged) -> Result<Proof<Bls12>, ProveError> {
        if *self.failing.lock().unwrap() == Some(device) {
            return Err(ProveError::Backend(crate::prover::ProverError::Device(
                "boom\nsecond line".into(),
            )));
        }
        self.log.lock().unwrap().push(device);
        Ok(Proof {
            a: G1Affine::identity(),
            b: G2Affine::identity(),
            c: G1Affine::identity(),
        })
    }
    fn prove_fallback(&self, _s: Staged) -> Result<Proof<Bls12>, ProveError> {
        self.log.lock().unwrap().push(usize::MAX);
        Ok(Proof {
            a: G1Affine::identity(),
            b: G2Affine::identity(),
            c: G1Affine::identity(),
        })
    }
}

fn two_gpus(quarantine: Duration) -> Stages {
    let options = PipelineOptions {
        synthesis_threads: 8,
        memory_budget: u64::MAX,
        device_workers: 1,
        yield_to_critical: true,
        recorded_shapes: false,
        partition_threads: 1,
        health: HealthPolicy {
            quarantine_after: 1,
            quarantine_time: quarantine,
            max_backoff: quarantine * 4,
        },
    };
    Stages::start(
        &options,
        &[DeviceSpec::any("gpu0"), DeviceSpec::any("gpu1")],
    )
    .unwrap()
}

/// Hands over partition `k` of `job`, avoiding `avoid`, and waits for its result.
fn run_flaky(
    st: &Stages,
    work: &Arc<Flaky>,
    job: &Arc<JobRun>,
    k: usize,
    avoid: Vec<usize>,
) -> PartitionDone {
    let (tx, rx) = mpsc::channel();
    assert!(st.admit(job, k, 0).unwrap());
    let to = Handover {
        job: job.clone(),
        partition: k,
        synthesized: Staged::Evaluated(partition(k, 0)),
        synthesis: Duration::ZERO,
        work: work.clone(),
        reply: tx,
        claim: None,
        expected: None,
        avoid,
    };
    st.to_device(&id(), to);
    recv(&rx)
}

#[test]
fn a_failing_device_is_quarantined_and_partitions_avoid_it_or_fall_back_to_the_cpu() {
    let st = two_gpus(Duration::from_secs(3600));
    let work = Arc::new(Flaky {
        log: Arc::new(Mutex::new(Vec::new())),
        failing: Arc::new(Mutex::new(Some(0))),
    });
    let job = JobRun::new(1, 200);
    // Avoiding device 1, the partition goes to device 0, which fails it: a device fault, with
    // a sender for the retry, and the job is not stopped (the job decides).
    let done = run_flaky(&st, &work, &job, 0, vec![1]);
    assert!(matches!(&done.result, Err(e) if is_device_fault(e)));
    assert_eq!(done.on, Some(0));
    assert!(done.resend.is_some());
    assert!(!job.is_stopped());
    let health = st.health();
    assert_eq!(health[0].state, HealthState::Quarantined);
    assert_eq!((health[0].failures, health[0].consecutive_failures), (1, 1));
    assert_eq!(health[0].last_error.as_deref(), Some("boom\\nsecond line"));
    assert_eq!(health[1].state, HealthState::Healthy);
    assert_eq!(st.stats().devices[0].partitions_failed, 1);
    // The retry avoids device 0, and so does every new partition while it is quarantined.
    for k in 1..5 {
        let done = run_flaky(&st, &work, &job, k, vec![0]);
        assert!(done.result.is_ok());
        assert_eq!(done.on, Some(1));
        let done = run_flaky(&st, &work, &job, k + 10, Vec::new());
        assert_eq!(done.on, Some(1));
    }
    // No usable device left for a partition that avoids device 1: the CPU prover.
    let done = run_flaky(&st, &work, &job, 20, vec![1]);
    assert!(done.result.is_ok());
    assert_eq!(done.on, None);
    assert_eq!(work.log.lock().unwrap().last(), Some(&usize::MAX));
    assert_eq!(st.stats().fallback_proved, 1);
    assert_eq!(st.health()[0].state, HealthState::Quarantined);
}

#[test]
fn a_quarantined_device_is_probed_after_its_backoff() {
    let backoff = Duration::from_millis(100);
    let st = two_gpus(backoff);
    let work = Arc::new(Flaky {
        log: Arc::new(Mutex::new(Vec::new())),
        failing: Arc::new(Mutex::new(Some(0))),
    });
    let job = JobRun::new(1, 300);
    // The daemon's status line follows the quarantine through this watch.
    let mut changes = st.health_changes();
    let mut changed = move || {
        let seen = changes.has_changed().unwrap();
        changes.mark_unchanged();
        seen
    };
    assert!(run_flaky(&st, &work, &job, 0, vec![1]).result.is_err());
    assert_eq!(st.health()[0].state, HealthState::Quarantined);
    assert!(changed(), "entering quarantine is a change");
    // Still failing: the probe fails and the back-off doubles.
    std::thread::sleep(backoff + Duration::from_millis(20));
    let done = run_flaky(&st, &work, &job, 1, Vec::new());
    assert_eq!(done.on, Some(0), "the probe goes to the quarantined device");
    assert!(done.result.is_err());
    let h = st.health();
    assert_eq!(h[0].state, HealthState::Quarantined);
    assert!(h[0].probe_in > backoff, "doubled: {:?}", h[0]);
    assert!(changed(), "a failed probe quarantines it again");
    // Healthy again: after the back-off, the probe succeeds and ends the quarantine.
    *work.failing.lock().unwrap() = None;
    std::thread::sleep(2 * backoff + Duration::from_millis(20));
    let done = run_flaky(&st, &work, &job, 2, Vec::new());
    assert_eq!(done.on, Some(0), "the probe goes to the quarantined device");
    assert!(done.result.is_ok());
    let h = st.health();
    assert_eq!(h[0].state, HealthState::Healthy);
    assert_eq!((h[0].failures, h[0].consecutive_failures), (2, 0));
    assert!(changed(), "the release is a change");
    // A partition proved on a healthy device changes nothing.
    assert!(run_flaky(&st, &work, &job, 3, Vec::new()).result.is_ok());
    assert!(!changed());
}

/// A partition synthesized against a recorded shape reserves its assignment's bound, not its
/// evaluations' too (a 32 GiB one: 4.3 of 17.4 GB), and a measured evaluated partition sizes
/// evaluated ones only: the job that records the shape must not size the shaped partitions
/// after the one that recorded it.
#[test]
fn a_witness_partition_is_sized_apart_from_an_evaluated_one() {
    let st = Arc::new(stages(4, 1 << 30));
    let srs = Srs::of_generators(1023, 1000, 2);
    let witness = (1024 + 2) * 32;
    assert_eq!(st.partition_bytes(&id(), &srs, Form::Witness), witness);
    assert_eq!(
        st.partition_bytes(&id(), &srs, Form::Evaluated),
        3 * 1024 * 32 + witness + 2 * 1024 + 2
    );
    let device = FakeDevice::holding_the_first();
    let (tx, rx) = mpsc::channel();
    let job = JobRun::new(1, 40);
    assert!(st.admit(&job, 0, 64).unwrap());
    st.to_device(&id(), handover(&device, &job, 0, 2, &tx));
    device.wait_started(1);
    assert_eq!(st.partition_bytes(&id(), &srs, Form::Evaluated), 64);
    assert_eq!(st.partition_bytes(&id(), &srs, Form::Witness), witness);
    device.release();
    assert!(recv(&rx).result.is_ok());
}

/// The part pools' threads run at the nice value of the thread that started the stages plus
/// their class's (none critical, +5 high, +10 the rest), also when the first partition to use them comes
/// from a synthesis thread already lowered: pools are made at the start, not by it.
#[test]
fn part_pools_run_at_their_class_nice_whoever_uses_them_first() {
    let start = placement::this_thread_nice().unwrap();
    let stages = Stages::start(
        &PipelineOptions {
            partition_threads: 2,
            ..PipelineOptions::default()
        },
        &[],
    )
    .unwrap();
    let nice_in = |class: u8| {
        let (threads, n) = stages.parts_pool(class).expect("part pools");
        assert_eq!(n, 2);
        let parts = threads
            .parts
            .install(|| placement::this_thread_nice().unwrap());
        let stitch = threads
            .stitch
            .install(|| placement::this_thread_nice().unwrap());
        (parts, stitch)
    };
    let (critical, high, normal) = std::thread::scope(|s| {
        s.spawn(|| {
            lower_this_thread(BACKGROUND_NICE);
            (nice_in(CRITICAL), nice_in(HIGH), nice_in(1))
        })
        .join()
        .unwrap()
    });
    let at = |n: i32| (start + n).min(19);
    assert_eq!(
        high,
        (at(AHEAD_NICE), at(AHEAD_NICE)),
        "high partitions' pools"
    );
    assert_eq!(
        normal,
        (at(BACKGROUND_NICE), at(BACKGROUND_NICE)),
        "the others'"
    );
    assert_eq!(critical, (at(0), at(0)), "critical partitions' pools");
}
