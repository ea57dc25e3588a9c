//! A discrete-event model of the stages, for `cuzk plan`: how long a batch of jobs takes on a
//! given host, from per-partition costs measured once.
//!
//! The model follows the real pipeline step by step, with time as plain seconds and no
//! threads, clocks or randomness, so that the same [`Plan`] always gives the same
//! [`Prediction`]:
//!
//! * all jobs are queued at time 0 (one class, ranked by their index), and at most
//!   `workers` of them are in flight; a job keeps its slot until its proof is verified;
//! * a job asks admission for its partitions in order, the next one as soon as the previous
//!   one was admitted; admission is the real [`Gate`], so the plan follows the real rules
//!   (rank order, a synthesis permit per CPU, the partition's bytes under the budget);
//! * a synthesis takes `synthesis` seconds, frees its permit and queues the partition for
//!   the device in rank order ([`Key`]); each of `devices` workers takes the best queued
//!   partition and proves it in `device` seconds, then the partition's bytes are free;
//! * when all of a job's partitions are proved it verifies for `verification` seconds and
//!   then frees its slot for the next queued job.
//!
//! Not modelled: synthesis threads slowing each other down (memory bandwidth), parameter
//! loading, the resident parameters' share of the budget (pass the budget less them), and
//! critical (WinningPoSt) work.

use std::cmp::Ordering;
use std::collections::{BTreeSet, BinaryHeap};

use super::gate::{Gate, GateConfig, Key};

/// The class every simulated job has (normal work, like `cuzk bench pipeline`'s PoRep).
const CLASS: u8 = 1;

/// A host and a batch of identical jobs to predict.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// Synthesis threads (one per CPU in the daemon's default configuration).
    pub cpus: usize,
    /// Device workers (one per GPU).
    pub devices: usize,
    /// Jobs in flight at once (the daemon's `proving.workers`; see [`Plan::default_workers`]).
    pub workers: usize,
    /// Host bytes partitions may reserve together (the budget less resident parameters).
    pub memory_budget: u64,
    /// Host bytes one partition reserves from admission until the device consumed it.
    pub partition_bytes: u64,
    /// Jobs queued at time 0.
    pub jobs: usize,
    /// Partitions of each job.
    pub partitions_per_job: usize,
    /// Seconds one partition's synthesis takes on one CPU thread.
    pub synthesis: f64,
    /// Seconds one partition takes on a device.
    pub device: f64,
    /// Seconds a job's verification takes once all its partitions are proved.
    pub verification: f64,
}

impl Plan {
    /// The daemon's default jobs in flight for `cpus` synthesis threads (`proving.workers =
    /// 0`): enough that jobs of one partition keep every synthesis thread busy.
    pub fn default_workers(cpus: usize) -> usize {
        cpus + 2
    }
}

/// What the simulation predicts.
#[derive(Clone, Debug, PartialEq)]
pub struct Prediction {
    /// Seconds from time 0 until the last job is verified.
    pub wall: f64,
    /// Jobs (proofs) completed per minute over `wall`.
    pub proofs_per_min: f64,
    /// Fraction of `wall` the devices were proving, averaged over the devices.
    pub device_busy: f64,
    /// Fraction of `wall` the synthesis threads were synthesizing, averaged over them.
    pub synthesis_busy: f64,
    /// Most host bytes reserved by partitions at once.
    pub peak_reserved_bytes: u64,
    /// Most partitions admitted and not yet consumed by a device at once.
    pub peak_partitions_in_flight: usize,
}

/// Why a plan cannot be simulated.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum PlanError {
    /// A count that must be positive is 0.
    #[error("{what} must be at least 1")]
    Zero {
        /// The count's name.
        what: &'static str,
    },
    /// A duration is negative, infinite or not a number.
    #[error("{what} must be a finite number of seconds, at least 0 (found {value})")]
    BadTime {
        /// The duration's name.
        what: &'static str,
        /// Its value.
        value: f64,
    },
    /// Every stage takes no time: the rate would be infinite.
    #[error("synthesis, device and verification times are all 0")]
    NoTime,
    /// One partition needs more than the whole budget, so none could ever start.
    #[error("a partition needs {needed} bytes, more than the memory budget of {budget} bytes")]
    ExceedsBudget {
        /// The partition's bytes.
        needed: u64,
        /// The budget.
        budget: u64,
    },
    /// Jobs were left unfinished with nothing to happen next (a bug in the model).
    #[error("the simulation stalled with {left} jobs unfinished")]
    Stalled {
        /// Jobs not finished.
        left: usize,
    },
}

/// Predicts `plan`'s wall time and resource use.
pub fn simulate(plan: &Plan) -> Result<Prediction, PlanError> {
    validate(plan)?;
    let mut sim = Sim::new(plan);
    sim.run();
    sim.prediction()
}

fn validate(plan: &Plan) -> Result<(), PlanError> {
    let counts = [
        ("cpus", plan.cpus),
        ("devices", plan.devices),
        ("workers", plan.workers),
        ("jobs", plan.jobs),
        ("partitions per job", plan.partitions_per_job),
    ];
    if let Some(&(what, _)) = counts.iter().find(|(_, n)| *n == 0) {
        return Err(PlanError::Zero { what });
    }
    let times = [
        ("synthesis", plan.synthesis),
        ("device", plan.device),
        ("verification", plan.verification),
    ];
    if let Some(&(what, value)) = times.iter().find(|(_, t)| !(t.is_finite() && *t >= 0.0)) {
        return Err(PlanError::BadTime { what, value });
    }
    if times.iter().all(|(_, t)| *t == 0.0) {
        return Err(PlanError::NoTime);
    }
    if plan.partition_bytes > plan.memory_budget {
        return Err(PlanError::ExceedsBudget {
            needed: plan.partition_bytes,
            budget: plan.memory_budget,
        });
    }
    Ok(())
}

#[derive(Clone, Copy, Debug)]
enum Event {
    /// A partition's synthesis ended.
    Synthesized(Key),
    /// Device `device` finished proving a partition.
    Proved { device: usize, key: Key },
    /// A job's verification ended.
    Verified,
}

/// An event at a time; `order` breaks ties by scheduling order, so that equal times (common
/// with identical costs) resolve the same way every run.
struct Scheduled {
    at: f64,
    order: u64,
    event: Event,
}

impl Ord for Scheduled {
    /// Reversed, so that [`BinaryHeap`] pops the earliest first.
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .at
            .total_cmp(&self.at)
            .then(other.order.cmp(&self.order))
    }
}

impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Scheduled {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Scheduled {}

struct Sim<'a> {
    plan: &'a Plan,
    now: f64,
    scheduled: u64,
    events: BinaryHeap<Scheduled>,
    gate: Gate,
    /// Synthesized partitions waiting for a device, best first.
    device_queue: BTreeSet<Key>,
    /// Idle devices, lowest index first.
    idle: BTreeSet<usize>,
    /// Partitions proved per job.
    proved: Vec<usize>,
    /// Jobs not yet started (the next one's index).
    next_job: usize,
    finished: usize,
    in_flight: usize,
    device_time: f64,
    synthesis_time: f64,
    peak_reserved: u64,
    peak_in_flight: usize,
}

impl<'a> Sim<'a> {
    fn new(plan: &'a Plan) -> Self {
        Self {
            plan,
            now: 0.0,
            scheduled: 0,
            events: BinaryHeap::new(),
            // The daemon holds one more permit back for critical work; no simulated job is
            // critical, so it never counts.
            gate: Gate::new(GateConfig {
                permits: plan.cpus,
                critical_permits: 1,
            }),
            device_queue: BTreeSet::new(),
            idle: (0..plan.devices).collect(),
            proved: vec![0; plan.jobs],
            next_job: 0,
            finished: 0,
            in_flight: 0,
            device_time: 0.0,
            synthesis_time: 0.0,
            peak_reserved: 0,
            peak_in_flight: 0,
        }
    }

    fn run(&mut self) {
        while self.next_job < self.plan.jobs.min(self.plan.workers) {
            self.start_job();
        }
        self.step();
        while let Some(Scheduled { at, event, .. }) = self.events.pop() {
            self.now = at;
            self.handle(event);
            self.step();
        }
    }

    /// After every change: admit what may start, then hand idle devices their work.
    fn step(&mut self) {
        self.admit();
        self.dispatch();
    }

    fn schedule(&mut self, after: f64, event: Event) {
        self.scheduled += 1;
        self.events.push(Scheduled {
            at: self.now + after,
            order: self.scheduled,
            event,
        });
    }

    fn key(job: usize, partition: usize) -> Key {
        Key::new(CLASS, job as u64, partition)
    }

    /// A job thread takes the next queued job and asks admission for its first partition.
    fn start_job(&mut self) {
        let job = self.next_job;
        self.next_job += 1;
        self.gate.wait(Self::key(job, 0), self.plan.partition_bytes);
    }

    /// Grants until nothing more fits. An admitted partition starts synthesis, and its job
    /// at once asks for its next partition, which may be admitted in the same round.
    fn admit(&mut self) {
        loop {
            let admitted = self.gate.grant(self.plan.memory_budget);
            if admitted.is_empty() {
                break;
            }
            for key in admitted {
                self.in_flight += 1;
                self.synthesis_time += self.plan.synthesis;
                self.schedule(self.plan.synthesis, Event::Synthesized(key));
                let next = key.partition() + 1;
                if next < self.plan.partitions_per_job {
                    let next = Key::new(key.class(), key.seq(), next);
                    self.gate.wait(next, self.plan.partition_bytes);
                }
            }
            self.peak_reserved = self.peak_reserved.max(self.gate.reserved());
            self.peak_in_flight = self.peak_in_flight.max(self.in_flight);
        }
    }

    /// Every idle device takes the best queued partition.
    fn dispatch(&mut self) {
        while !self.device_queue.is_empty() {
            let Some(device) = self.idle.pop_first() else {
                break;
            };
            let Some(key) = self.device_queue.pop_first() else {
                break;
            };
            self.device_time += self.plan.device;
            self.schedule(self.plan.device, Event::Proved { device, key });
        }
    }

    fn handle(&mut self, event: Event) {
        match event {
            Event::Synthesized(key) => {
                // The model's measured size is its estimate: the reservation stays.
                self.gate.synthesized(&key, self.plan.partition_bytes);
                self.device_queue.insert(key);
            }
            Event::Proved { device, key } => {
                self.gate.release(&key);
                self.in_flight -= 1;
                self.idle.insert(device);
                self.partition_proved(key);
            }
            Event::Verified => {
                self.finished += 1;
                if self.next_job < self.plan.jobs {
                    self.start_job();
                }
            }
        }
    }

    fn partition_proved(&mut self, key: Key) {
        let Ok(job) = usize::try_from(key.seq()) else {
            return;
        };
        let Some(proved) = self.proved.get_mut(job) else {
            return;
        };
        *proved += 1;
        if *proved == self.plan.partitions_per_job {
            self.schedule(self.plan.verification, Event::Verified);
        }
    }

    fn prediction(&self) -> Result<Prediction, PlanError> {
        if self.finished < self.plan.jobs {
            return Err(PlanError::Stalled {
                left: self.plan.jobs - self.finished,
            });
        }
        // The last event is the last verification: the wall time.
        let wall = self.now;
        let fraction = |busy: f64, units: usize| busy / (wall * units as f64);
        Ok(Prediction {
            wall,
            proofs_per_min: self.plan.jobs as f64 * 60.0 / wall,
            device_busy: fraction(self.device_time, self.plan.devices),
            synthesis_busy: fraction(self.synthesis_time, self.plan.cpus),
            peak_reserved_bytes: self.peak_reserved,
            peak_partitions_in_flight: self.peak_in_flight,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    /// A plan of one-partition jobs with no memory limit.
    fn plan(cpus: usize, devices: usize, jobs: usize, synthesis: f64, device: f64) -> Plan {
        Plan {
            cpus,
            devices,
            workers: Plan::default_workers(cpus),
            memory_budget: u64::MAX,
            partition_bytes: GIB,
            jobs,
            partitions_per_job: 1,
            synthesis,
            device,
            verification: 0.0,
        }
    }

    fn wall(p: &Plan) -> f64 {
        simulate(p).expect("a valid plan").wall
    }

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * b.abs()
    }

    #[test]
    fn same_plan_same_prediction() {
        let mut p = plan(7, 2, 33, 1.3, 0.4);
        p.partitions_per_job = 3;
        p.memory_budget = 5 * GIB;
        p.verification = 0.05;
        assert_eq!(simulate(&p), simulate(&p));
    }

    #[test]
    fn device_bound_wall_is_the_device_work() {
        let p = plan(16, 1, 40, 0.001, 1.0);
        let w = wall(&p);
        // Only the first synthesis is not hidden behind the device.
        assert!(close(w, 40.0, 0.01), "wall {w}");
        let pred = simulate(&p).expect("valid");
        assert!(pred.device_busy > 0.99, "{pred:?}");
    }

    #[test]
    fn synthesis_bound_wall_is_the_synthesis_rounds() {
        let p = plan(4, 1, 10, 1.0, 0.001);
        let w = wall(&p);
        // ceil(10 / 4) rounds of synthesis, plus the last partition's device time.
        assert!(close(w, 3.0, 0.01), "wall {w}");
    }

    #[test]
    fn a_job_asks_for_its_next_partition_before_synthesis_ends() {
        // One job of four partitions on four CPUs: all four synthesize together.
        let mut p = plan(4, 1, 1, 1.0, 0.01);
        p.partitions_per_job = 4;
        let pred = simulate(&p).expect("valid");
        assert!(close(pred.wall, 1.04, 0.001), "{pred:?}");
        assert_eq!(pred.peak_partitions_in_flight, 4);
    }

    #[test]
    fn the_memory_budget_is_respected_and_slows_it_down() {
        let mut p = plan(8, 1, 24, 1.0, 0.1);
        p.partitions_per_job = 4;
        let free = simulate(&p).expect("valid");
        p.memory_budget = 3 * GIB;
        let tight = simulate(&p).expect("valid");
        assert!(tight.peak_reserved_bytes <= p.memory_budget, "{tight:?}");
        assert_eq!(tight.peak_partitions_in_flight, 3);
        assert!(tight.wall > 1.5 * free.wall, "{tight:?} vs {free:?}");
    }

    #[test]
    fn two_devices_halve_a_device_bound_wall() {
        let one = wall(&plan(16, 1, 64, 0.01, 1.0));
        let two = wall(&plan(16, 2, 64, 0.01, 1.0));
        assert!(close(two, one / 2.0, 0.02), "{one} → {two}");
    }

    #[test]
    fn jobs_in_flight_hold_their_slot_through_verification() {
        // One job in flight: jobs run one after another, verification included.
        let mut p = plan(4, 1, 3, 1.0, 0.5);
        p.workers = 1;
        p.verification = 0.25;
        assert!(close(wall(&p), 3.0 * 1.75, 1e-9));
    }

    #[test]
    fn impossible_plans_are_errors() {
        let mut p = plan(4, 1, 3, 1.0, 0.5);
        p.memory_budget = GIB - 1;
        assert!(matches!(simulate(&p), Err(PlanError::ExceedsBudget { .. })));
        let p = plan(4, 0, 3, 1.0, 0.5);
        assert_eq!(simulate(&p), Err(PlanError::Zero { what: "devices" }));
        let p = plan(4, 1, 3, f64::NAN, 0.5);
        assert!(matches!(simulate(&p), Err(PlanError::BadTime { .. })));
        let p = plan(4, 1, 3, 0.0, 0.0);
        assert_eq!(simulate(&p), Err(PlanError::NoTime));
    }

    /// `cuzk bench pipeline` on the H200 host: 64 jobs of 2 KiB PoRep (one partition), 16
    /// CPUs, one GPU, 18 jobs in flight. Measured (synthesis s, device s, wall s, proofs/min,
    /// device busy) twice.
    #[test]
    fn matches_the_h200_measurements() {
        let runs = [
            (2.197, 0.152, 12.3, 312.0, 0.837),
            (2.384, 0.170, 13.5, 285.0, 0.846),
        ];
        for (synthesis, device, wall, rate, busy) in runs {
            let mut p = plan(16, 1, 64, synthesis, device);
            p.workers = 18;
            p.verification = 0.01;
            let pred = simulate(&p).expect("valid");
            assert!(close(pred.wall, wall, 0.15), "{pred:?}");
            assert!(close(pred.proofs_per_min, rate, 0.15), "{pred:?}");
            assert!(close(pred.device_busy, busy, 0.15), "{pred:?}");
        }
    }
}
