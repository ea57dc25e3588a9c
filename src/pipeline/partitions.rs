//! Proving a job's partition circuits through the shared stages: each partition is admitted
//! (a synthesis permit and its host bytes), synthesized on a scoped thread of the job (the
//! circuits borrow the job's parsed input), and proved by a device worker; the job gathers
//! the proofs in order.

use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use bellperson::groth16::Proof;
use blstrs::Bls12;

use super::control::{catch_panic, JobControl, ProveError, ProvedOn, StageTimings};
use super::progress::Step;
use super::recorded::Claim;
use super::service::ProvingService;
use super::stages::{
    bounded_text, is_device_fault, lower_this_thread, synthesis_nice, yield_to_critical,
    CriticalClaim, DeviceWork, Form, Handover, JobRun, PartThreads, PartitionDone, Staged,
    CRITICAL,
};
use crate::prover::{Partition, ProverError, WitnessPartition};
use crate::srs::{ParamsId, Srs};
use crate::synth::{
    record, record_on, with_yield_point, RecordError, Recorded, Recording, ShapeError, Synthesize,
    Synthesized,
};

/// Proofs of all partitions, the parameters used, the timings so far and who proved them.
pub(crate) struct Proved {
    pub proofs: Vec<Proof<Bls12>>,
    pub srs: Arc<Srs>,
    pub timings: StageTimings,
    pub on: ProvedOn,
}

/// A partition's circuit: whole, or cut into parts that are synthesized at once on the
/// stages' part threads and stitched (see [`crate::synth::synthesize_split`] for what the
/// parts must be).
pub(crate) enum PartitionCircuit<C> {
    /// Synthesized on the partition's own thread.
    Whole(C),
    /// The same prefix, then contiguous runs of the independent sub-circuits whose first
    /// top-level namespace starts with `marker`.
    Split {
        /// The parts, in order.
        parts: Vec<C>,
        /// The sub-circuits' namespace prefix.
        marker: &'static str,
    },
}

/// Synthesizes `make_circuit(0..partitions)` and proves each with the parameters `id`,
/// through the service's stages; a cancel of `control` drops the job's waiting and queued
/// partitions at once.
pub(crate) fn prove_partitions<C, F>(
    svc: &ProvingService,
    id: &ParamsId,
    partitions: usize,
    make_circuit: F,
    control: &JobControl,
) -> Result<Proved, ProveError>
where
    C: Synthesize + Send,
    F: Fn(usize) -> Result<C, ProveError> + Sync,
{
    let whole = |k, _| make_circuit(k).map(PartitionCircuit::Whole);
    prove_split_partitions(svc, id, partitions, whole, control)
}

/// [`prove_partitions`] for circuits that can be cut: `make_circuit(k, n)` makes partition
/// `k`'s circuit in at most `n` parts.
pub(crate) fn prove_split_partitions<C, F>(
    svc: &ProvingService,
    id: &ParamsId,
    partitions: usize,
    make_circuit: F,
    control: &JobControl,
) -> Result<Proved, ProveError>
where
    C: Synthesize + Send,
    F: Fn(usize, usize) -> Result<PartitionCircuit<C>, ProveError> + Sync,
{
    control.check()?;
    control.set_total(partitions);
    if !svc.is_resident(id) {
        control.report(Step::ParamsLoading, None, Duration::ZERO);
    }
    let (prepared, param_load) = svc.prepared(id)?;
    control.report(Step::ParamsReady, None, param_load);
    let srs = match prepared.first() {
        Some(p) => p.srs().clone(),
        None => {
            return Err(ProveError::Backend(ProverError::Device(
                "no proving device".into(),
            )))
        }
    };
    let stages = &svc.stages;
    let job = JobRun::due(
        control.class(),
        control.due(),
        control.seq(),
        control.progress_sink(),
    );
    control.set_on_cancel(Some(stages.stopper(&job)));
    // The hook is removed however this returns: a later cancel has nothing to drop.
    struct Unhook<'a>(&'a JobControl);
    impl Drop for Unhook<'_> {
        fn drop(&mut self) {
            self.0.set_on_cancel(None);
        }
    }
    let _unhook = Unhook(control);
    if control.is_cancelled() {
        return Err(ProveError::Cancelled);
    }
    let flight = Flight {
        svc,
        id,
        srs: &srs,
        control,
        job: &job,
        work: Arc::new(svc.device_work(prepared.clone())),
        make_circuit: &make_circuit,
        avoid_job: control.avoided_devices(),
    };
    let mut gathered = Gathered::new(partitions, param_load);
    let (tx, rx) = mpsc::channel::<PartitionDone>();
    std::thread::scope(|scope| {
        for k in 0..partitions {
            match flight.start(scope, k, tx.clone(), flight.avoid_job.clone()) {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => {
                    gathered.failure = Some(e);
                    stages.stop(&job);
                    break;
                }
            }
        }
        drop(tx);
        // Every started partition holds a sender until its result is sent; a retry takes
        // over the failed attempt's.
        for done in rx.iter() {
            flight.take(scope, &mut gathered, done);
        }
    });
    gathered.finish(control, srs)
}

/// One job's partitions in flight: what their admission, their synthesis threads and their
/// retries share.
struct Flight<'a, F> {
    svc: &'a ProvingService,
    id: &'a ParamsId,
    srs: &'a Srs,
    control: &'a JobControl,
    job: &'a Arc<JobRun>,
    work: Arc<dyn DeviceWork>,
    make_circuit: &'a F,
    /// Devices the job's partitions avoid: those that made a proof of it that failed
    /// verification.
    avoid_job: Vec<usize>,
}

impl<C, F> Flight<'_, F>
where
    C: Synthesize + Send,
    F: Fn(usize, usize) -> Result<PartitionCircuit<C>, ProveError> + Sync,
{
    /// What partition `k` reserves, decided at its admission: its assignment alone once the
    /// shape it will be synthesized against is recorded (the job's first partition may be
    /// the one recording it), else its evaluations too.
    fn reserve(&self) -> u64 {
        let svc = self.svc;
        let shaped = self.control.class() < CRITICAL
            && svc.uses_recorded_shapes()
            && svc.shapes.is_recorded(self.id);
        let form = if shaped {
            Form::Witness
        } else {
            Form::Evaluated
        };
        svc.stages.partition_bytes(self.id, self.srs, form)
    }

    /// Waits for partition `k`'s admission; `Ok(false)`: the job was stopped.
    fn admit(&self, k: usize) -> Result<bool, ProveError> {
        let stages = &self.svc.stages;
        match stages.admit(self.job, k, self.reserve()) {
            // Sized while the job's first partition was recording the shape, which then
            // took its own room: sized again, as the shaped partition it now is.
            Err(ProveError::ExceedsMemoryBudget { needed, .. }) if self.reserve() < needed => {
                stages.admit(self.job, k, self.reserve())
            }
            r => r,
        }
    }

    /// Admits partition `k` and synthesizes it on a thread of its own, which hands it to the
    /// device queue; its result comes back on `tx`. `Ok(false)`: the job was stopped.
    fn start<'scope, 'env>(
        &'env self,
        scope: &'scope std::thread::Scope<'scope, 'env>,
        k: usize,
        tx: mpsc::Sender<PartitionDone>,
        avoid: Vec<usize>,
    ) -> Result<bool, ProveError> {
        let admitting = Instant::now();
        if !self.admit(k)? {
            return Ok(false);
        }
        self.control
            .report(Step::SynthesisStarted, Some(k), admitting.elapsed());
        let admitted = Instant::now();
        let spawned = std::thread::Builder::new()
            .name(format!("cuzk-synth-{k}"))
            .spawn_scoped(scope, move || self.synthesize(k, tx, avoid, admitted));
        if let Err(e) = spawned {
            self.svc.stages.abandon(self.job, k);
            return Err(ProveError::Synthesis(format!("cannot start a thread: {e}")));
        }
        Ok(true)
    }

    /// Partition `k`'s synthesis thread: synthesizes it and hands it to the device queue,
    /// or sends its failure on `tx`.
    fn synthesize(
        &self,
        k: usize,
        tx: mpsc::Sender<PartitionDone>,
        avoid: Vec<usize>,
        admitted: Instant,
    ) {
        let running = Instant::now();
        let (stages, run) = (&self.svc.stages, self.job);
        if run.is_stopped() {
            // Stopped between its admission and here: not worth synthesizing.
            stages.abandon(run, k);
            let _ = tx.send(PartitionDone::failed(
                k,
                ProveError::Cancelled,
                Duration::ZERO,
            ));
            return;
        }
        let critical = run.class() >= CRITICAL;
        if let Some(nice) = synthesis_nice(run.class()) {
            lower_this_thread(nice);
        }
        // Made after admission: a critical partition never waits for what a paused
        // synthesis thread holds.
        let yielding = stages.yields_to_critical();
        let claim = (critical && yielding).then(CriticalClaim::new);
        // On the node with the fewest synthesis threads for its CPUs (pinned only on a host
        // of several NUMA nodes).
        let slot = self.svc.placement.enter_synthesis();
        slot.pin_current_thread();
        let start = Instant::now();
        if critical {
            // Where a critical partition's time between its admission and its synthesis
            // went: its thread's start, or its claim and placement.
            tracing::debug!(
                partition = k,
                thread_start_us = running.duration_since(admitted).as_micros() as u64,
                claim_and_pin_us = start.duration_since(running).as_micros() as u64,
                "critical partition's synthesis begins"
            );
        }
        // A critical partition tells the device when it will be there, by the last one's
        // synthesis, so that a long call on it can make way just before.
        let expected = match critical {
            true => stages.critical_synthesis(self.id),
            false => None,
        }
        .map(|took| crate::prover::urgency::expect(start + took));
        let what = format!("partition {k} synthesis");
        let result = catch_panic(&what, || self.staged(k, critical, yielding));
        match result {
            Ok(synthesized) => {
                // Before the handover: a partition's steps are reported in order.
                self.control
                    .report(Step::SynthesisDone, Some(k), start.elapsed());
                let to = Handover {
                    job: run.clone(),
                    partition: k,
                    synthesized,
                    synthesis: start.elapsed(),
                    work: self.work.clone(),
                    reply: tx,
                    claim,
                    expected,
                    avoid,
                };
                stages.to_device(self.id, to);
            }
            Err(e) => {
                stages.abandon(run, k);
                stages.stop(run);
                let _ = tx.send(PartitionDone::failed(k, e, start.elapsed()));
            }
        }
    }

    /// Partition `k` synthesized as the device queue takes it: against the recorded shape
    /// where it can be (a critical partition records it only where nobody is recording it,
    /// and waits for nobody), else with its evaluations.
    fn staged(&self, k: usize, critical: bool, yielding: bool) -> Result<Staged, ProveError> {
        let (svc, run) = (self.svc, self.job);
        let pool = svc.stages.parts_pool(run.class());
        let pause = !critical && yielding;
        let stopped = || run.is_stopped();
        let synthesis = Synthesis {
            k,
            most: pool.map_or(1, |(_, threads)| threads),
            pool,
            point: pause.then_some(yield_to_critical as fn()),
            stopped: &stopped,
        };
        if svc.uses_recorded_shapes() {
            let wait = !critical;
            if let Some(staged) = synthesis.with_shape(svc, self.id, self.make_circuit, wait)? {
                return Ok(staged);
            }
        }
        let s = synthesis.evaluations(self.make_circuit)?;
        Ok(Staged::Evaluated(svc.stage_for_device(Partition::from(s))))
    }

    /// Takes one partition's result: its proof, or its failure, proving it again elsewhere
    /// when a device failed it and attempts are left.
    fn take<'scope, 'env>(
        &'env self,
        scope: &'scope std::thread::Scope<'scope, 'env>,
        gathered: &mut Gathered,
        done: PartitionDone,
    ) {
        gathered.timings.synthesis += done.synthesis;
        gathered.timings.proving += done.device;
        tracing::debug!(
            partition = done.partition,
            synthesis_ms = done.synthesis.as_millis() as u64,
            device_wait_ms = done.device_wait.as_millis() as u64,
            device_ms = done.device.as_millis() as u64,
            "partition proved"
        );
        let stages = &self.svc.stages;
        match done.result {
            Ok(proof) => gathered.proved(self.control, done.partition, proof, done.on, done.device),
            Err(e) if is_device_fault(&e) => {
                let k = done.partition;
                let Some(attempts) = gathered.tried.get_mut(k) else {
                    return;
                };
                attempts.push((done.on, e));
                let again = attempts.len() < ATTEMPTS
                    && gathered.failure.is_none()
                    && !self.job.is_stopped();
                if let (true, Some(tx)) = (again, done.resend) {
                    match self.retry(scope, k, attempts, tx) {
                        // Proved again, or the job was stopped meanwhile (cancelled, or
                        // failed elsewhere).
                        Ok(_) => return,
                        Err(e) => {
                            gathered.failure.get_or_insert(e);
                        }
                    }
                }
                if gathered.failure.is_none() && !self.control.is_cancelled() {
                    let names = self.svc.device_names();
                    gathered.failure = Some(gave_up(k, &gathered.tried[k], &names));
                }
                stages.stop(self.job);
            }
            // The first real failure is the job's; the rest of its partitions go.
            Err(e) => {
                if gathered.failure.is_none() && !matches!(e, ProveError::Cancelled) {
                    gathered.failure = Some(e);
                }
                stages.stop(self.job);
            }
        }
    }

    /// Starts partition `k` again after the device failures in `attempts`, on a device that
    /// has not failed it (or the CPU prover), its result going to `tx`.
    fn retry<'scope, 'env>(
        &'env self,
        scope: &'scope std::thread::Scope<'scope, 'env>,
        k: usize,
        attempts: &[(Option<usize>, ProveError)],
        tx: mpsc::Sender<PartitionDone>,
    ) -> Result<bool, ProveError> {
        let mut avoid = self.avoid_job.clone();
        avoid.extend(attempts.iter().filter_map(|(d, _)| *d));
        let names = self.svc.device_names();
        let (on, error) = attempts.last().map(|(d, e)| (*d, e)).unzip();
        let device = on
            .flatten()
            .and_then(|d| names.get(d))
            .map_or("the CPU prover", String::as_str);
        tracing::warn!(
            partition = k,
            device = %bounded_text(device),
            error = %error.map(|e| bounded_text(&e.to_string())).unwrap_or_default(),
            attempt = attempts.len(),
            "a device failed a partition; proving it again elsewhere"
        );
        self.start(scope, k, tx, avoid)
    }
}

/// What a job gathers from its partitions: their proofs in order, the timings, who proved
/// them, each partition's failed attempts on devices (device, error), and the job's failure.
struct Gathered {
    timings: StageTimings,
    proofs: Vec<Option<Proof<Bls12>>>,
    on: ProvedOn,
    tried: Vec<Vec<(Option<usize>, ProveError)>>,
    failure: Option<ProveError>,
}

impl Gathered {
    fn new(partitions: usize, param_load: Duration) -> Self {
        Gathered {
            timings: StageTimings {
                param_load,
                ..Default::default()
            },
            proofs: vec![None; partitions],
            on: ProvedOn::default(),
            tried: (0..partitions).map(|_| Vec::new()).collect(),
            failure: None,
        }
    }

    /// Partition `k`'s proof, made on device `on` (`None`: the CPU prover) in `device`.
    fn proved(
        &mut self,
        control: &JobControl,
        k: usize,
        proof: Proof<Bls12>,
        on: Option<usize>,
        device: Duration,
    ) {
        if let Some(slot) = self.proofs.get_mut(k) {
            *slot = Some(proof);
        }
        if let Some(d) = on {
            control.proved_on(d);
        }
        self.on.record(on);
        control.partition_done();
        control.report(Step::DeviceDone, Some(k), device);
    }

    /// The job's proofs, or its failure.
    fn finish(self, control: &JobControl, srs: Arc<Srs>) -> Result<Proved, ProveError> {
        if let Some(e) = self.failure {
            return Err(e);
        }
        control.check()?;
        let proofs = self
            .proofs
            .into_iter()
            .collect::<Option<Vec<_>>>()
            .ok_or(ProveError::Cancelled)?;
        // Every kind verifies its proofs next, before it returns.
        control.report(Step::Verifying, None, Duration::ZERO);
        Ok(Proved {
            proofs,
            srs,
            timings: self.timings,
            on: self.on,
        })
    }
}

/// Attempts at one partition on devices: the first and two more, each on a device that has
/// not failed it yet (or the CPU prover where none is left).
const ATTEMPTS: usize = 3;

/// The job's error for partition `k`, which failed every attempt.
fn gave_up(k: usize, attempts: &[(Option<usize>, ProveError)], names: &[String]) -> ProveError {
    let devices = attempts
        .iter()
        .map(|(d, _)| {
            d.and_then(|d| names.get(d).cloned())
                .unwrap_or_else(|| "the CPU prover".into())
        })
        .collect();
    let (cause, out_of_memory) = match attempts.last() {
        Some((_, e)) => (
            bounded_text(&e.to_string()),
            matches!(e, ProveError::Backend(ProverError::OutOfMemory(_))),
        ),
        None => (String::new(), false),
    };
    ProveError::DeviceFailed {
        partition: k,
        devices,
        cause,
        out_of_memory,
    }
}

/// How one partition is synthesized: where its parts run, when it pauses, when it stops.
struct Synthesis<'a> {
    k: usize,
    /// The most parts to cut it into.
    most: usize,
    pool: Option<(PartThreads<'a>, usize)>,
    point: Option<fn()>,
    stopped: &'a (dyn Fn() -> bool + Sync),
}

impl Synthesis<'_> {
    /// The circuit made by `make_circuit`, keeping `what`: in parts on the part threads
    /// where it is cut and there are some, else on this thread (at most one part without
    /// pools: never paused, since the current pool may be rayon's global one).
    fn record<C, F>(&self, make_circuit: &F, what: Recording) -> Result<Recorded, ProveError>
    where
        C: Synthesize + Send,
        F: Fn(usize, usize) -> Result<PartitionCircuit<C>, ProveError> + Sync,
    {
        let k = self.k;
        let failed = |e: RecordError| {
            if e.is_stopped() {
                ProveError::Cancelled
            } else {
                ProveError::Synthesis(format!("partition {k}: {e}"))
            }
        };
        match (make_circuit(k, self.most)?, self.pool) {
            (PartitionCircuit::Split { parts, marker }, Some((pools, _))) => record_on(
                pools.parts,
                pools.stitch,
                parts,
                marker,
                what,
                self.point,
                self.stopped,
            ),
            (PartitionCircuit::Split { parts, marker }, None) => record(parts, marker, what),
            (PartitionCircuit::Whole(c), _) => {
                let run = || record(vec![c], "", what);
                match self.point {
                    Some(p) => with_yield_point(p, run),
                    None => run(),
                }
            }
        }
        .map_err(failed)
    }

    /// The A, B, C evaluations, the assignment and the densities.
    fn evaluations<C, F>(&self, make_circuit: &F) -> Result<Synthesized, ProveError>
    where
        C: Synthesize + Send,
        F: Fn(usize, usize) -> Result<PartitionCircuit<C>, ProveError> + Sync,
    {
        evaluations(self.record(make_circuit, Recording::Evaluations)?)
    }

    /// The witness alone, on the shape recorded for set `id` (recording it first where
    /// nobody has); `None` where the witness does not fit the shape, or where another
    /// partition records it and `wait` is false (the caller records the evaluations instead).
    fn with_shape<C, F>(
        &self,
        svc: &ProvingService,
        id: &ParamsId,
        make_circuit: &F,
        wait: bool,
    ) -> Result<Option<Staged>, ProveError>
    where
        C: Synthesize + Send,
        F: Fn(usize, usize) -> Result<PartitionCircuit<C>, ProveError> + Sync,
    {
        let claim = match wait {
            true => svc
                .shapes
                .claim(id, self.stopped)
                .ok_or(ProveError::Cancelled)?,
            false => match svc.shapes.try_claim(id) {
                Some(claim) => claim,
                None => return Ok(None),
            },
        };
        let (shape, witness) = match claim {
            Claim::Ready(shape) => match self.record(make_circuit, Recording::Witness)? {
                Recorded::Witness(w) => (shape, w),
                _ => return Err(ProveError::Synthesis("not a witness".into())),
            },
            Claim::Record(recording) => match self.record(make_circuit, Recording::Shape)? {
                Recorded::Shape(shape, w) => {
                    let shape = Arc::new(shape);
                    recording.done(shape.clone());
                    svc.shape_recorded();
                    (shape, w)
                }
                _ => return Err(ProveError::Synthesis("not a shape".into())),
            },
        };
        match WitnessPartition::new(witness, shape) {
            Ok(w) => Ok(Some(Staged::Witness(w))),
            // A circuit whose constraints depend on its values: proved the long way.
            Err(e @ ShapeError::Mismatch { .. }) => {
                tracing::warn!(partition = self.k, error = %e, "the witness does not fit the recorded shape; synthesizing the whole circuit");
                Ok(None)
            }
            Err(e) => Err(ProveError::Synthesis(format!("partition {}: {e}", self.k))),
        }
    }
}

/// The evaluations of what [`Recording::Evaluations`] recorded (for any proof kind).
pub(crate) fn evaluations(r: Recorded) -> Result<Synthesized, ProveError> {
    match r {
        Recorded::Evaluations(s) => Ok(s),
        _ => Err(ProveError::Synthesis("not the evaluations".into())),
    }
}
