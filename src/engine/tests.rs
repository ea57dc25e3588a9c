//! Engine tests with a fake runner that sleeps instead of proving.

use std::sync::Mutex;

use super::*;
use crate::pipeline::StageTimings;
use crate::proofs::ProofKind;
use crate::prover::ProverError;

/// Sleeps `step` × `steps`, checking cancellation between steps like the prover does between
/// partitions; records the order in which jobs started.
struct FakeRunner {
    step: Duration,
    steps: usize,
    started: Mutex<Vec<Vec<u8>>>,
}

impl FakeRunner {
    fn new(step_ms: u64, steps: usize) -> Arc<Self> {
        Arc::new(Self {
            step: Duration::from_millis(step_ms),
            steps,
            started: Mutex::new(Vec::new()),
        })
    }
    fn started(&self) -> Vec<Vec<u8>> {
        self.started.lock().unwrap().clone()
    }
}

impl Runner for FakeRunner {
    fn run(&self, request: &ProofRequest, control: &JobControl) -> Result<ProofOutput, ProveError> {
        let (ProofRequest::WindowPoSt { input } | ProofRequest::WinningPoSt { input }) = request
        else {
            return Err(ProveError::InvalidInput("fake runner: PoSt only".into()));
        };
        self.started.lock().unwrap().push(input.clone());
        if input == b"panic" {
            panic!("boom");
        }
        if input == b"oom" {
            let e = std::io::Error::new(std::io::ErrorKind::OutOfMemory, "fake device memory");
            return Err(ProveError::Backend(ProverError::OutOfMemory(Box::new(e))));
        }
        // A job labelled "quick…" takes one step: a WinningPoSt beside a long PoRep.
        let steps = if input.starts_with(b"quick") {
            1
        } else {
            self.steps
        };
        for _ in 0..steps {
            control.check()?;
            std::thread::sleep(self.step);
        }
        Ok(ProofOutput {
            kind: request.kind(),
            proof: input.clone(),
            partitions: 1,
            timings: StageTimings {
                proving: self.step,
                ..Default::default()
            },
            backend: "fake".into(),
        })
    }
}

/// The owner of the tests' jobs.
const UID: Owner = 1000;

fn config(workers: usize, max_queued: usize, reserve: usize) -> EngineConfig {
    EngineConfig {
        workers,
        max_queued,
        critical_reserve: reserve,
        result_retention: Duration::from_secs(60),
        max_finished: 100,
    }
}

fn engine(runner: Arc<FakeRunner>, config: EngineConfig) -> Engine {
    Engine::start(config, runner, Arc::new(|_| {})).unwrap()
}

fn window(label: &str) -> ProofRequest {
    ProofRequest::WindowPoSt {
        input: label.as_bytes().to_vec(),
    }
}

fn wait(engine: &Engine, id: JobId) -> JobResult {
    let mut rx = engine.watch(id).expect("known job");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let JobPhase::Finished(r) = &*rx.borrow_and_update() {
            return r.clone();
        }
        assert!(Instant::now() < deadline, "job {id} did not finish");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn wait_state(engine: &Engine, id: JobId, state: JobState) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while engine.snapshot(id).map(|s| s.state) != Some(state) {
        assert!(
            Instant::now() < deadline,
            "job {id} never reached {state:?}"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn proves_and_times() {
    let e = engine(FakeRunner::new(10, 2), config(1, 8, 1));
    let s = e.submit(UID, window("a"), None, None).unwrap();
    assert_eq!(s.priority, Priority::High);
    let out = wait(&e, s.id).unwrap();
    assert_eq!(out.output.proof, b"a");
    assert!(out.timings.total >= Duration::from_millis(20));
    assert!(out.timings.total >= out.timings.queue_wait);
    assert_eq!(e.stats().count(JobState::Succeeded), 1);
}

#[test]
fn critical_starts_before_earlier_normal_jobs() {
    let runner = FakeRunner::new(20, 3);
    let e = engine(runner.clone(), config(1, 16, 2));
    let first = e
        .submit(UID, window("first"), Some(Priority::Normal), None)
        .unwrap();
    wait_state(&e, first.id, JobState::Running);
    let normals: Vec<_> = ["n1", "n2", "n3"]
        .iter()
        .map(|l| {
            e.submit(UID, window(l), Some(Priority::Normal), None)
                .unwrap()
                .id
        })
        .collect();
    let low = e
        .submit(UID, window("low"), Some(Priority::Low), None)
        .unwrap();
    let crit = e
        .submit(
            UID,
            ProofRequest::WinningPoSt {
                input: b"crit".to_vec(),
            },
            None,
            None,
        )
        .unwrap();
    assert_eq!(crit.priority, Priority::Critical);
    wait(&e, low.id).unwrap();
    for id in normals {
        wait(&e, id).unwrap();
    }
    let order: Vec<String> = runner
        .started()
        .into_iter()
        .map(|b| String::from_utf8(b).unwrap())
        .collect();
    assert_eq!(order, ["first", "crit", "n1", "n2", "n3", "low"]);
}

#[test]
fn request_ids_are_idempotent() {
    let e = engine(FakeRunner::new(10, 1), config(1, 8, 1));
    let a = e
        .submit(UID, window("x"), None, Some("req-1".into()))
        .unwrap();
    let b = e
        .submit(UID, window("x"), None, Some("req-1".into()))
        .unwrap();
    assert_eq!(a.id, b.id);
    assert!(!a.existing && b.existing);
    let c = e.submit(UID, window("y"), None, Some("req-1".into()));
    assert_eq!(
        c,
        Err(SubmitError::RequestIdConflict {
            request_id: "req-1".into(),
            job: a.id
        })
    );
    wait(&e, a.id).unwrap();
    // Still the same job once finished, while its result is retained.
    assert_eq!(
        e.submit(UID, window("x"), None, Some("req-1".into()))
            .unwrap()
            .id,
        a.id
    );
    let d = e
        .submit(UID, window("x"), None, Some("req-2".into()))
        .unwrap();
    assert_ne!(d.id, a.id);
}

/// A label (Curio's `porep-<miner>-<sector>` on the gRPC endpoint) names what is proved, not
/// one input: the same input under it is the same job; another input, whether the job under
/// it is queued, running or has succeeded, is a new job that takes the label over, and the
/// old one stays known by its job id until its result expires. The input is stored in the
/// journal only for the submissions that make a job.
#[test]
fn pure_a_label_takes_a_new_input_as_a_new_job() {
    let mut l = Labelled::new();
    let a = l.same_input_is_the_same_job();
    let b = l.another_input_while_queued_is_a_new_job(a);
    let c = l.first_input_after_success_is_a_third_job(a, b);
    l.older_results_expire(a, b, c);
    l.a_key_refuses_another_input(c);
}

/// The state of [`pure_a_label_takes_a_new_input_as_a_new_job`], its jobs all under the
/// label `porep-1000-7`.
struct Labelled {
    st: State,
    t0: Instant,
}

impl Labelled {
    /// The label.
    const RID: &'static str = "porep-1000-7";

    /// One worker, results kept for 600 s.
    fn new() -> Labelled {
        let mut c = config(1, 8, 1);
        c.result_retention = Duration::from_secs(600);
        Labelled {
            st: State::new(c),
            t0: Instant::now(),
        }
    }

    /// `s` seconds after the start.
    fn at(&self, s: u64) -> Instant {
        self.t0 + Duration::from_secs(s)
    }

    /// A job proving `label`'s input under the label.
    fn job(label: &str) -> NewJob {
        NewJob {
            request_id: Some(Self::RID.into()),
            request_ids: RequestIds::Label,
            ..window_job(label)
        }
    }

    /// Whether `label`'s input under the label, with `ids`, would make a job at the start.
    fn would_queue(&mut self, ids: RequestIds, label: &str) -> bool {
        let digest = journal::format::digest(&window(label));
        let rid = Some(Self::RID);
        self.st
            .would_queue(UID, rid, ids, &digest, Priority::Normal, self.t0)
    }

    /// The first input makes a job; the same input again is the same job, no new input
    /// stored. Returns the job.
    fn same_input_is_the_same_job(&mut self) -> JobId {
        let t0 = self.t0;
        let (a, outcome) = self.st.submit(Self::job("c1"), t0).unwrap();
        assert_eq!(outcome, state::Outcome::Queued);
        // The same input: the same job, no new input stored.
        assert!(!self.would_queue(RequestIds::Label, "c1"));
        assert_eq!(
            self.st.submit(Self::job("c1"), t0).unwrap(),
            (a, state::Outcome::Existing)
        );
        a
    }

    /// Another input while `a` is queued: a job of its own, under the label now. Returns it.
    fn another_input_while_queued_is_a_new_job(&mut self, a: JobId) -> JobId {
        let t0 = self.t0;
        // Another input while the first is queued: a job of its own, under the label now.
        assert!(self.would_queue(RequestIds::Label, "c2"));
        assert!(!self.would_queue(RequestIds::Strict, "c2"));
        let (b, outcome) = self.st.submit(Self::job("c2"), t0).unwrap();
        assert_eq!(outcome, state::Outcome::Queued);
        assert_ne!(a, b);
        assert_eq!(
            self.st.lookup(Self::RID, Some(UID), t0).map(|s| s.id),
            Some(b)
        );
        assert_eq!(
            self.st.snapshot(a, t0).map(|s| s.state),
            Some(JobState::Queued)
        );
        b
    }

    /// `a` and `b` run and succeed; `b`'s input again is `b`, the first input again a third
    /// job. Returns it.
    fn first_input_after_success_is_a_third_job(&mut self, a: JobId, b: JobId) -> JobId {
        // Both run and succeed; the first input again is a third job (the label is b's now).
        let first = self.st.next_assignment(self.at(1), Lane::Any).map(|x| x.id);
        let second = self.st.next_assignment(self.at(1), Lane::Any).map(|x| x.id);
        assert_eq!((first, second), (Some(a), Some(b)));
        self.st.finish(a, window_proved(), self.at(2));
        self.st.finish(b, window_proved(), self.at(3));
        assert_eq!(
            self.st.submit(Self::job("c2"), self.at(4)).unwrap(),
            (b, state::Outcome::Existing),
            "the same input after success is still the job that proved it"
        );
        let (c, outcome) = self.st.submit(Self::job("c1"), self.at(5)).unwrap();
        assert_eq!(outcome, state::Outcome::Queued);
        assert!(c != a && c != b);
        c
    }

    /// The older results `a` and `b` stay reachable by job id until they expire; the label
    /// stays `c`'s.
    fn older_results_expire(&mut self, a: JobId, b: JobId, c: JobId) {
        // The older results stay reachable by job id until they expire.
        assert_eq!(
            self.st.snapshot(a, self.at(5)).map(|s| s.state),
            Some(JobState::Succeeded)
        );
        assert_eq!(
            self.st.snapshot(b, self.at(5)).map(|s| s.state),
            Some(JobState::Succeeded)
        );
        self.st.reap(self.at(2 + 601));
        assert!(self.st.snapshot(a, self.at(603)).is_none());
        assert_eq!(
            self.st
                .lookup(Self::RID, Some(UID), self.at(603))
                .map(|s| s.id),
            Some(c)
        );
    }

    /// Under a key (the socket protocol) nothing changed: another input than `c`'s is refused.
    fn a_key_refuses_another_input(&mut self, c: JobId) {
        // Under a key (the socket protocol) nothing changed: another input is refused.
        let strict = NewJob {
            request_ids: RequestIds::Strict,
            ..Self::job("c3")
        };
        assert_eq!(
            self.st.submit(strict, self.at(603)),
            Err(SubmitError::RequestIdConflict {
                request_id: Self::RID.into(),
                job: c
            })
        );
    }
}

/// Through the engine: a sector proved, then proved again under the same label with another
/// input, returns two proofs, each its own input's.
#[test]
fn a_label_proves_a_sector_again_with_a_new_input() {
    let e = engine(FakeRunner::new(10, 1), config(1, 8, 1));
    // Under the label, without a deadline.
    let submit = |seed: &str| {
        let label = Some("porep-1000-7".to_string());
        e.submit_as(
            UID,
            window(seed),
            None,
            label,
            RequestIds::Label,
            Due::Never,
        )
        .unwrap()
    };
    let a = submit("seed-1");
    let first = wait(&e, a.id).unwrap();
    let b = submit("seed-2");
    assert_ne!(a.id, b.id);
    assert!(!b.existing);
    let second = wait(&e, b.id).unwrap();
    assert_ne!(first.output.proof, second.output.proof);
    // The first result is still there by its job id, and the same input is the same job.
    assert_eq!(wait(&e, a.id).unwrap().output.proof, first.output.proof);
    let again = submit("seed-2");
    assert_eq!((again.id, again.existing), (b.id, true));
}

#[test]
fn lookup_finds_the_newest_job_under_a_request_id() {
    let mut c = config(1, 8, 1);
    c.result_retention = Duration::from_secs(10);
    let mut st = State::new(c);
    let t0 = Instant::now();
    let job = |label: &str| NewJob {
        request_id: Some("sector-7".into()),
        ..window_job(label)
    };
    assert!(st.lookup("sector-7", Some(UID), t0).is_none());
    let (a, _) = st.submit(job("a"), t0).unwrap();
    let found = st.lookup("sector-7", Some(UID), t0).unwrap();
    assert_eq!((found.id, found.state), (a, JobState::Queued));
    assert!(st.lookup("sector-8", Some(UID), t0).is_none());
    // Running, cancelled: it released the id, but it is still the newest job under it.
    assert_eq!(st.next_assignment(t0, Lane::Any).map(|x| x.id), Some(a));
    st.cancel(a, t0).unwrap();
    assert_eq!(st.lookup("sector-7", Some(UID), t0).map(|s| s.id), Some(a));
    // A new job takes the id over and is found instead; it succeeds and expires before the
    // old one, which finishes later: the old one is found again until it expires too.
    let (b, _) = st.submit(job("b"), t0).unwrap();
    assert_eq!(st.lookup("sector-7", Some(UID), t0).map(|s| s.id), Some(b));
    let t1 = t0 + Duration::from_secs(1);
    st.finish(b, Err(Failure::new(FailureKind::ProvingFailed, "x")), t1);
    let t2 = t0 + Duration::from_secs(5);
    st.finish(a, Err(Failure::new(FailureKind::Cancelled, "x")), t2);
    st.reap(t1 + Duration::from_secs(10));
    assert!(st.snapshot(b, t2).is_none());
    let found = st.lookup("sector-7", Some(UID), t2).unwrap();
    assert_eq!((found.id, found.state), (a, JobState::Cancelled));
    st.reap(t2 + Duration::from_secs(10));
    assert!(st.lookup("sector-7", Some(UID), t2).is_none());
}

/// Every owner has request ids of its own: the same id under another owner is another job
/// (whatever its input), found by that owner's lookup; a lookup of any owner's finds the
/// newest. The engine keeps each job's parameter set and lists the unfinished jobs of a set.
#[test]
fn request_ids_are_each_owners_and_needing_lists_the_unfinished_jobs_of_a_set() {
    let mut st = State::new(config(1, 8, 1));
    let t0 = Instant::now();
    let set = crate::srs::ParamsId {
        kind: ProofKind::WindowPoSt,
        sector_size: 2048,
        cache_id: "window-2k".into(),
    };
    let job = |owner: Owner, label: &str| NewJob {
        owner,
        params: Some(set.clone()),
        request_id: Some("s-1".into()),
        ..window_job(label)
    };
    let (a, _) = st.submit(job(1000, "x"), t0).unwrap();
    let (b, outcome) = st.submit(job(1001, "x"), t0).unwrap();
    assert_ne!(
        a, b,
        "the same id and input of another owner is a job of its own"
    );
    assert_eq!(outcome, state::Outcome::Queued);
    let (c, _) = st
        .submit(job(1002, "y"), t0)
        .expect("another input under another owner's id is no conflict");
    assert_eq!(
        st.submit(job(1000, "x"), t0).unwrap(),
        (a, state::Outcome::Existing),
        "the owner's own id is its own job"
    );
    assert!(matches!(
        st.submit(job(1001, "z"), t0),
        Err(SubmitError::RequestIdConflict { job, .. }) if job == b
    ));
    let found = st.lookup("s-1", Some(1000), t0).unwrap();
    assert_eq!((found.id, found.owner), (a, 1000));
    assert_eq!(st.lookup("s-1", Some(1001), t0).map(|s| s.id), Some(b));
    assert!(st.lookup("s-1", Some(1003), t0).is_none());
    assert_eq!(st.lookup("s-1", None, t0).map(|s| s.id), Some(c));
    assert_eq!(st.snapshot(c, t0).map(|s| s.owner), Some(1002));

    assert_eq!(st.needing(&set), vec![a, b, c]);
    let running = st.next_assignment(t0, Lane::Any).unwrap();
    assert_eq!(running.id, a);
    assert_eq!(st.needing(&set), vec![a, b, c], "running jobs need it too");
    st.finish(a, Err(Failure::new(FailureKind::ProvingFailed, "x")), t0);
    st.cancel(b, t0).unwrap();
    assert_eq!(st.needing(&set), vec![c], "finished jobs do not");
    let other = crate::srs::ParamsId {
        cache_id: "other".into(),
        ..set.clone()
    };
    assert!(st.needing(&other).is_empty());
}

#[test]
fn cancel_queued_and_running() {
    let e = engine(FakeRunner::new(10, 500), config(1, 8, 1));
    let running = e.submit(UID, window("r"), None, None).unwrap();
    let queued = e.submit(UID, window("q"), None, None).unwrap();
    wait_state(&e, running.id, JobState::Running);
    assert_eq!(e.cancel(queued.id), Ok(false));
    assert_eq!(
        wait(&e, queued.id).unwrap_err().kind,
        FailureKind::Cancelled
    );
    let t = Instant::now();
    assert_eq!(e.cancel(running.id), Ok(true));
    assert_eq!(
        wait(&e, running.id).unwrap_err().kind,
        FailureKind::Cancelled
    );
    assert!(
        t.elapsed() < Duration::from_secs(1),
        "running job stopped at a step boundary"
    );
    assert_eq!(e.snapshot(running.id).unwrap().state, JobState::Cancelled);
    assert!(matches!(
        e.cancel(running.id),
        Err(CancelError::AlreadyFinished(..))
    ));
    assert_eq!(e.cancel(999), Err(CancelError::UnknownJob(999)));
    assert_eq!(e.stats().count(JobState::Cancelled), 2);
}

#[test]
fn bounded_queue_keeps_room_for_critical() {
    let e = engine(FakeRunner::new(10, 500), config(1, 3, 1));
    let r = e.submit(UID, window("running"), None, None).unwrap();
    wait_state(&e, r.id, JobState::Running);
    e.submit(UID, window("a"), Some(Priority::Normal), None)
        .unwrap();
    e.submit(UID, window("b"), Some(Priority::Normal), None)
        .unwrap();
    let full = e.submit(UID, window("c"), Some(Priority::Normal), None);
    assert!(
        matches!(
            full,
            Err(SubmitError::QueueFull {
                queued: 2,
                limit: 2
            })
        ),
        "{full:?}"
    );
    // The critical lane takes the first critical job at once, so the reserved slot is
    // free again for the next one; a third finds the queue full.
    let crit = e
        .submit(UID, window("crit"), Some(Priority::Critical), None)
        .unwrap();
    wait_state(&e, crit.id, JobState::Running);
    e.submit(UID, window("crit2"), Some(Priority::Critical), None)
        .unwrap();
    assert!(matches!(
        e.submit(UID, window("crit3"), Some(Priority::Critical), None),
        Err(SubmitError::QueueFull { .. })
    ));
    e.shut_down();
    e.cancel_running();
}

#[test]
fn results_expire() {
    let mut c = config(1, 8, 1);
    c.result_retention = Duration::from_millis(50);
    let e = engine(FakeRunner::new(1, 1), c);
    let a = e.submit(UID, window("a"), None, Some("id".into())).unwrap();
    wait(&e, a.id).unwrap();
    std::thread::sleep(Duration::from_millis(80));
    e.reap();
    assert!(e.snapshot(a.id).is_none());
    assert!(e.watch(a.id).is_none());
    // The request id is free again.
    assert_ne!(
        e.submit(UID, window("b"), None, Some("id".into()))
            .unwrap()
            .id,
        a.id
    );
}

#[test]
fn shutdown_fails_queued_and_lets_running_finish() {
    let e = engine(FakeRunner::new(10, 10), config(1, 8, 1));
    let running = e.submit(UID, window("r"), None, None).unwrap();
    wait_state(&e, running.id, JobState::Running);
    let queued = e.submit(UID, window("q"), None, None).unwrap();
    e.shut_down();
    assert_eq!(
        wait(&e, queued.id).unwrap_err().kind,
        FailureKind::ShuttingDown
    );
    assert_eq!(
        e.submit(UID, window("late"), None, None),
        Err(SubmitError::ShuttingDown)
    );
    assert!(wait(&e, running.id).is_ok());
    let deadline = Instant::now() + Duration::from_secs(5);
    while !e.workers_exited() {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn drain_timeout_reports_shutting_down() {
    let e = engine(FakeRunner::new(10, 500), config(1, 8, 1));
    let running = e.submit(UID, window("r"), None, None).unwrap();
    wait_state(&e, running.id, JobState::Running);
    e.shut_down();
    e.cancel_running();
    assert_eq!(
        wait(&e, running.id).unwrap_err().kind,
        FailureKind::ShuttingDown
    );
}

#[test]
fn a_panicking_job_fails_and_the_worker_survives() {
    let e = engine(FakeRunner::new(1, 1), config(1, 8, 1));
    let p = e.submit(UID, window("panic"), None, None).unwrap();
    assert_eq!(wait(&e, p.id).unwrap_err().kind, FailureKind::Internal);
    let ok = e.submit(UID, window("ok"), None, None).unwrap();
    assert!(wait(&e, ok.id).is_ok());
    assert!(e.liveness(Duration::from_millis(100)).is_ok());
}

#[test]
fn invalid_input_is_classified() {
    let e = engine(FakeRunner::new(1, 1), config(1, 8, 1));
    let req = ProofRequest::SnapDeals {
        input: b"{}".to_vec(),
    };
    let j = e.submit(UID, req, None, None).unwrap();
    assert_eq!(j.priority, Priority::for_kind(ProofKind::SnapDeals));
    assert_eq!(wait(&e, j.id).unwrap_err().kind, FailureKind::InvalidInput);
}

/// A device out of memory is its own kind of failure (the daemon answers ResourceExhausted,
/// which a client may retry), not a proving failure.
#[test]
fn out_of_memory_is_classified_as_retryable() {
    let e = engine(FakeRunner::new(1, 1), config(1, 8, 1));
    let j = e.submit(UID, window("oom"), None, None).unwrap();
    let failure = wait(&e, j.id).unwrap_err();
    assert_eq!(failure.kind, FailureKind::ResourceExhausted);
    assert!(failure.message.contains("fake device memory"), "{failure}");
}

fn winning(label: &str) -> ProofRequest {
    ProofRequest::WinningPoSt {
        input: label.as_bytes().to_vec(),
    }
}

#[test]
fn critical_job_starts_while_every_worker_is_busy() {
    // One worker, busy for about a second: the critical lane starts the WinningPoSt at once
    // and it finishes long before the job it overtook.
    let e = engine(FakeRunner::new(20, 50), config(1, 8, 1));
    let long = e
        .submit(UID, window("long"), Some(Priority::Normal), None)
        .unwrap();
    wait_state(&e, long.id, JobState::Running);
    let crit = e.submit(UID, winning("quick-crit"), None, None).unwrap();
    wait(&e, crit.id).unwrap();
    assert_eq!(
        e.snapshot(long.id).map(|s| s.state),
        Some(JobState::Running),
        "the critical job finished while the long one ran"
    );
    wait(&e, long.id).unwrap();
}

#[test]
fn critical_lane_takes_no_other_work() {
    // With the only general worker busy, a second normal job waits: the critical lane's
    // worker is idle but does not take it.
    let e = engine(FakeRunner::new(20, 10), config(1, 8, 1));
    let first = e
        .submit(UID, window("first"), Some(Priority::Normal), None)
        .unwrap();
    wait_state(&e, first.id, JobState::Running);
    let second = e
        .submit(UID, window("second"), Some(Priority::High), None)
        .unwrap();
    std::thread::sleep(Duration::from_millis(60));
    assert_eq!(
        e.snapshot(second.id).map(|s| s.state),
        Some(JobState::Queued)
    );
    wait(&e, first.id).unwrap();
    wait(&e, second.id).unwrap();
    assert_eq!(e.stats().count(JobState::Succeeded), 2);
}

/// Within a class the job due first is taken first, jobs without a deadline after those
/// with one, and submission order among equals; a higher class still goes first. A
/// resubmission that raises a job keeps its deadline, and its control carries it to the
/// stages.
#[test]
fn pure_jobs_due_earlier_go_first_within_their_class() {
    let mut st = State::new(config(1, 16, 1));
    let now = Instant::now();
    let job = |label: &str, priority, due| {
        let request = window(label);
        NewJob {
            digest: journal::format::digest(&request),
            request,
            owner: UID,
            params: None,
            priority: Some(priority),
            request_id: Some(label.to_string()),
            request_ids: RequestIds::Strict,
            due,
        }
    };
    let at = |s: u64| Due::At(now + Duration::from_secs(s));
    let mut ids = std::collections::HashMap::new();
    for (label, priority, due) in [
        ("high-none", Priority::High, Due::Never),
        ("high-600", Priority::High, at(600)),
        ("high-60", Priority::High, at(60)),
        ("high-60-later", Priority::High, at(60)),
        ("normal-10", Priority::Normal, at(10)),
        ("low-none", Priority::Low, Due::Never),
    ] {
        let (id, _) = st.submit(job(label, priority, due), now).unwrap();
        ids.insert(id, label);
    }
    // Raised from Low to High, without a deadline: after the High jobs that have one, and
    // after the High job without one submitted before it was raised.
    st.submit(job("low-none", Priority::High, Due::Never), now)
        .unwrap();
    let mut order = Vec::new();
    while let Some(a) = st.next_assignment(now, Lane::Any) {
        assert_eq!(
            a.control.due(),
            st.jobs[&a.id].due,
            "the control carries the due"
        );
        order.push(ids[&a.id]);
    }
    assert_eq!(
        order,
        [
            "high-60",
            "high-60-later",
            "high-600",
            "high-none",
            "low-none",
            "normal-10"
        ]
    );
}

/// A job with a deadline counts as met when it succeeds by it, missed when it succeeds later
/// or fails; a cancelled one and one without a deadline are not counted.
#[test]
fn pure_deadlines_are_counted_met_or_missed() {
    let mut st = State::new(config(4, 16, 1));
    let now = Instant::now();
    let at = |s: u64| now + Duration::from_secs(s);
    let job = |label: &str, due| {
        let mut j = window_job(label);
        j.due = due;
        j
    };
    let mut ids = Vec::new();
    for (label, due) in [
        ("on-time", Due::At(at(60))),
        ("late", Due::At(at(10))),
        ("failed", Due::At(at(60))),
        ("none", Due::Never),
        ("cancelled", Due::At(at(60))),
    ] {
        ids.push(st.submit(job(label, due), now).unwrap().0);
        st.next_assignment(now, Lane::Any)
            .expect("a worker for each");
    }
    st.finish(ids[0], window_proved(), at(30));
    st.finish(ids[1], window_proved(), at(30));
    st.finish(
        ids[2],
        Err(Failure::new(FailureKind::ProvingFailed, "x")),
        at(30),
    );
    st.finish(ids[3], window_proved(), at(30));
    st.cancel(ids[4], at(30)).unwrap();
    st.finish(ids[4], window_proved(), at(31));
    let count = |met| {
        st.stats
            .deadlines
            .get(&(ProofKind::WindowPoSt, met))
            .copied()
    };
    assert_eq!((count(true), count(false)), (Some(1), Some(2)));
}

#[test]
fn pure_lanes_choose_by_priority() {
    let mut st = State::new(config(1, 8, 1));
    let now = Instant::now();
    let job = |request: ProofRequest, priority| NewJob {
        digest: journal::format::digest(&request),
        request,
        owner: UID,
        params: None,
        priority: Some(priority),
        request_id: None,
        request_ids: RequestIds::Strict,
        due: Due::Never,
    };
    st.submit(job(window("n"), Priority::Normal), now).unwrap();
    assert!(st.next_assignment(now, Lane::Critical).is_none());
    st.submit(job(winning("c"), Priority::Critical), now)
        .unwrap();
    let c = st.next_assignment(now, Lane::Critical).expect("critical");
    assert_eq!(
        st.snapshot(c.id, now).map(|s| s.kind),
        Some(ProofKind::WinningPoSt)
    );
    assert!(st.next_assignment(now, Lane::Critical).is_none());
    let n = st.next_assignment(now, Lane::Any).expect("normal");
    assert_eq!(
        st.snapshot(n.id, now).map(|s| s.kind),
        Some(ProofKind::WindowPoSt)
    );
}

/// The pure rules for a request id held by a job: released by failure or cancellation,
/// kept (and re-prioritised, or refused) otherwise; a reaped old job never frees the id of
/// the newer job that took it over.
#[test]
fn pure_request_id_release_and_priority() {
    let mut c = config(1, 8, 1);
    c.result_retention = Duration::from_secs(10);
    let mut st = State::new(c);
    let t0 = Instant::now();
    let job = |label: &str, priority: Option<Priority>| NewJob {
        priority,
        request_id: Some("rid".into()),
        ..window_job(label)
    };
    let (a, outcome) = st.submit(job("a", Some(Priority::Low)), t0).unwrap();
    assert_eq!(outcome, state::Outcome::Queued);
    // Raised while queued; then a lower priority is refused.
    let (same, outcome) = st.submit(job("a", Some(Priority::High)), t0).unwrap();
    assert_eq!((same, outcome), (a, state::Outcome::Raised));
    assert_eq!(st.snapshot(a, t0).unwrap().priority, Priority::High);
    assert!(matches!(
        st.submit(job("a", Some(Priority::Normal)), t0),
        Err(SubmitError::PriorityConflict { job, .. }) if job == a
    ));
    assert_eq!(
        st.submit(job("a", None), t0).unwrap(),
        (a, state::Outcome::Existing)
    );
    // The raised job is assigned once; its stale low entry is skipped.
    assert_eq!(st.next_assignment(t0, Lane::Any).map(|x| x.id), Some(a));
    assert!(st.next_assignment(t0, Lane::Any).is_none());
    // Cancelled while running: released at once, even before it stops.
    st.cancel(a, t0).unwrap();
    let (b, outcome) = st.submit(job("b", None), t0).unwrap();
    assert_ne!(b, a);
    assert_eq!(outcome, state::Outcome::Queued);
    // The old job expires later; the id stays with the new one.
    st.finish(
        a,
        Err(Failure::new(FailureKind::Cancelled, "cancelled")),
        t0,
    );
    st.reap(t0 + Duration::from_secs(11));
    assert!(st.snapshot(a, t0).is_none());
    assert_eq!(
        st.submit(job("b", None), t0).unwrap(),
        (b, state::Outcome::Existing)
    );
}

/// Keeps what the engine records in memory, as the daemon's journal keeps it on disk: the
/// records in order (those synced apart), and the inputs stored by digest.
#[derive(Default)]
struct MemoryRecorder {
    records: Mutex<Vec<journal::Record>>,
    synced: Mutex<usize>,
    inputs: Mutex<std::collections::HashMap<[u8; 32], ProofRequest>>,
    stores: Mutex<usize>,
}

impl journal::Recorder for MemoryRecorder {
    fn store_input(&self, request: &ProofRequest, digest: &[u8; 32]) -> bool {
        self.inputs.lock().unwrap().insert(*digest, request.clone());
        *self.stores.lock().unwrap() += 1;
        true
    }
    fn release_input(&self, _: &[u8; 32]) {}
    fn record(&self, record: journal::Record) {
        self.records.lock().unwrap().push(record);
    }
    fn sync(&self) {
        *self.synced.lock().unwrap() = self.records.lock().unwrap().len();
    }
}

impl MemoryRecorder {
    /// What a daemon started after a crash now would take up: the synced records replayed.
    fn recovered(&self) -> journal::Journal {
        let synced = *self.synced.lock().unwrap();
        let mut st = journal::replay::JournalState::default();
        for r in &self.records.lock().unwrap()[..synced] {
            st.apply(r);
        }
        let inputs = self.inputs.lock().unwrap().clone();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        let (jobs, lost) = st.recover(now, |a| inputs.get(&a.digest).cloned().ok_or("gone"));
        assert!(lost.is_empty());
        journal::Journal {
            recorder: Arc::new(MemoryRecorder::default()),
            next_id: st.next_id(),
            jobs,
        }
    }
}

/// Every submission is recorded and synced before it is answered, and a new engine started
/// from the records takes the jobs up: unfinished ones queued again under their ids,
/// request ids and raised priorities, finished ones with their results; a resubmission
/// finds its job; new ids come after every recorded one.
#[test]
fn a_journal_carries_jobs_into_a_new_engine() {
    let recorder = Arc::new(MemoryRecorder::default());
    let runner = FakeRunner::new(20, 1000);
    let e = journaled_engine(runner.clone(), recorder.clone());
    let quick = e
        .submit(UID, winning("quick-1"), None, Some("w".into()))
        .unwrap();
    wait(&e, quick.id).unwrap();
    let running = e.submit(UID, window("long"), None, None).unwrap();
    wait_state(&e, running.id, JobState::Running);
    let queued = e
        .submit(UID, window("q"), Some(Priority::Low), Some("q".into()))
        .unwrap();
    // Synced before the answer.
    assert_eq!(
        *recorder.synced.lock().unwrap(),
        recorder.records.lock().unwrap().len()
    );
    let raised = e
        .submit(UID, window("q"), Some(Priority::Normal), Some("q".into()))
        .unwrap();
    assert!(raised.raised);
    // A resubmission makes no job: its input is not stored again.
    assert_eq!(*recorder.stores.lock().unwrap(), 3);
    // The crash: whatever was synced is what the next daemon knows.
    let recovered = recorder.recovered();
    e.shut_down();
    e.cancel_running();
    let e2 = Engine::start_with(
        config(1, 8, 1),
        FakeRunner::new(1, 1),
        Arc::new(|_| {}),
        Some(recovered),
    )
    .unwrap();
    // The finished job's result, by id and by request id.
    assert_eq!(wait(&e2, quick.id).unwrap().output.proof, b"quick-1");
    assert_eq!(e2.lookup("w", Some(UID)).unwrap().id, quick.id);
    // The unfinished ones run again, under their ids; the raised priority holds.
    assert_eq!(e2.snapshot(queued.id).unwrap().priority, Priority::Normal);
    assert_eq!(wait(&e2, running.id).unwrap().output.proof, b"long");
    assert_eq!(wait(&e2, queued.id).unwrap().output.proof, b"q");
    let again = e2.submit(UID, window("q"), None, Some("q".into())).unwrap();
    assert_eq!((again.id, again.existing), (queued.id, true));
    let new = e2.submit(UID, window("new"), None, None).unwrap();
    // (Above the reserved block too where the recorder reserves one, as the daemon's does.)
    assert!(new.id > queued.id, "{new:?}");
    e2.shut_down();
}

/// Capacity counts per class, gives the room of the class, and estimates from the measured
/// time of the jobs that succeeded (less parameter loading) over the real queue order.
#[test]
fn capacity_plays_the_queue_forward_with_measured_times() {
    let mut st = State::new(config(1, 10, 2));
    let t0 = Instant::now();
    let at = |s: u64| t0 + Duration::from_secs(s);
    let job = |label: &str, priority: Option<Priority>| NewJob {
        priority,
        ..window_job(label)
    };
    let ok = |kind| {
        Ok(ProofOutput {
            kind,
            proof: vec![],
            partitions: 1,
            timings: StageTimings {
                param_load: Duration::from_secs(2),
                ..Default::default()
            },
            backend: "fake".into(),
        })
    };
    // Nothing measured, nothing running: at once, no proof time.
    let idle = st.capacity(ProofKind::WindowPoSt, None, t0);
    assert_eq!(idle.priority, Priority::High);
    assert_eq!(idle.estimated_start, Some(Duration::ZERO));
    assert_eq!((idle.estimated_proof, idle.measured_jobs), (None, 0));

    // A WindowPoSt that ran 10 s, 2 of them loading parameters: 8 s measured.
    let (w1, _) = st.submit(job("w1", None), t0).unwrap();
    assert_eq!(st.next_assignment(t0, Lane::Any).unwrap().id, w1);
    st.finish(w1, ok(ProofKind::WindowPoSt), at(10));
    let (w2, _) = st.submit(job("w2", None), at(10)).unwrap();
    assert_eq!(st.next_assignment(at(10), Lane::Any).unwrap().id, w2);
    st.submit(job("n1", Some(Priority::Normal)), at(10))
        .unwrap();
    st.submit(job("l1", Some(Priority::Low)), at(10)).unwrap();
    st.submit(job("h2", None), at(10)).unwrap();

    let high = st.capacity(ProofKind::WindowPoSt, None, at(13));
    assert_eq!(high.queued, [1, 1, 1, 0]);
    assert_eq!(high.running, [0, 0, 1, 0]);
    assert_eq!((high.workers, high.queue_room), (1, 10 - 2 - 3));
    assert_eq!(high.estimated_proof, Some(Duration::from_secs(8)));
    assert_eq!(high.measured_jobs, 1);
    // w2 has 5 s left, then h2 (queued before it in its class) takes 8.
    assert_eq!(high.estimated_start, Some(Duration::from_secs(13)));
    // A low job waits for h2, n1 and l1 too.
    let low = st.capacity(ProofKind::WindowPoSt, Some(Priority::Low), at(13));
    assert_eq!(low.estimated_start, Some(Duration::from_secs(5 + 3 * 8)));
    // A PoRep of its default class waits for h2 and n1; its own kind need not be measured.
    let porep = st.capacity(ProofKind::PoRep, None, at(13));
    assert_eq!(porep.priority, Priority::Normal);
    assert_eq!(porep.estimated_start, Some(Duration::from_secs(5 + 2 * 8)));
    assert_eq!((porep.estimated_proof, porep.measured_jobs), (None, 0));
    // A WinningPoSt has the critical worker and the whole queue.
    let critical = st.capacity(ProofKind::WinningPoSt, None, at(13));
    assert_eq!(
        (critical.priority, critical.queue_room),
        (Priority::Critical, 7)
    );
    assert_eq!(critical.estimated_start, Some(Duration::ZERO));
    // A failed job is not measured.
    st.finish(
        w2,
        Err(Failure::new(FailureKind::ProvingFailed, "x")),
        at(14),
    );
    assert_eq!(
        st.capacity(ProofKind::WindowPoSt, None, at(14))
            .measured_jobs,
        1
    );
}

/// A recorder whose syncs wait while its gate is closed, counting the syncs that began: a
/// disk slow to sync, caught in the act.
#[derive(Default)]
struct GatedRecorder {
    /// (gate closed, syncs begun)
    gate: Mutex<(bool, usize)>,
    turned: std::sync::Condvar,
}

impl journal::Recorder for GatedRecorder {
    fn store_input(&self, _: &ProofRequest, _: &[u8; 32]) -> bool {
        true
    }
    fn release_input(&self, _: &[u8; 32]) {}
    fn record(&self, _: journal::Record) {}
    fn sync(&self) {
        let mut g = self.gate.lock().unwrap();
        g.1 += 1;
        self.turned.notify_all();
        while g.0 {
            g = self.turned.wait(g).unwrap();
        }
    }
}

impl GatedRecorder {
    fn set_closed(&self, closed: bool) {
        self.gate.lock().unwrap().0 = closed;
        self.turned.notify_all();
    }
    fn syncs(&self) -> usize {
        self.gate.lock().unwrap().1
    }
    /// Waits until more than `before` syncs have begun.
    fn wait_for_sync(&self, before: usize) {
        let g = self.gate.lock().unwrap();
        let (g, timeout) = self
            .turned
            .wait_timeout_while(g, Duration::from_secs(10), |g| g.1 <= before)
            .unwrap();
        drop(g);
        assert!(!timeout.timed_out(), "no sync began");
    }
}

/// A queued job's cancellation, and the "shutting down" that a stop answers queued jobs
/// with, reach nobody before the journal has synced them: while the sync waits, the job's
/// waiters (Await, Prove, Watch) still see it unfinished and the Cancel is not answered; a
/// crash then would queue the job again, and nobody was told otherwise.
#[test]
fn cancellations_are_durable_before_anyone_hears_of_them() {
    let (recorder, e, running) = gated_engine_running_a_job();
    let unfinished =
        |rx: &watch::Receiver<JobPhase>| !matches!(&*rx.borrow(), JobPhase::Finished(_));

    let queued = e.submit(UID, window("q"), None, None).unwrap();
    let phase = e.watch(queued.id).unwrap();
    recorder.set_closed(true);
    let before = recorder.syncs();
    let cancel = {
        let e = e.clone();
        std::thread::spawn(move || e.cancel(queued.id))
    };
    recorder.wait_for_sync(before);
    std::thread::sleep(Duration::from_millis(50));
    assert!(
        unfinished(&phase),
        "a waiter heard of the cancellation first"
    );
    assert!(!cancel.is_finished(), "the Cancel was answered first");
    recorder.set_closed(false);
    assert_eq!(cancel.join().unwrap(), Ok(false));
    assert_eq!(
        wait(&e, queued.id).unwrap_err().kind,
        FailureKind::Cancelled
    );

    let queued = e.submit(UID, window("q2"), None, None).unwrap();
    let phase = e.watch(queued.id).unwrap();
    recorder.set_closed(true);
    let before = recorder.syncs();
    let stop = {
        let e = e.clone();
        std::thread::spawn(move || e.shut_down())
    };
    recorder.wait_for_sync(before);
    std::thread::sleep(Duration::from_millis(50));
    assert!(unfinished(&phase), "a waiter heard \"shutting down\" first");
    recorder.set_closed(false);
    stop.join().unwrap();
    assert_eq!(
        wait(&e, queued.id).unwrap_err().kind,
        FailureKind::ShuttingDown
    );
    e.cancel_running();
    assert_eq!(
        wait(&e, running.id).unwrap_err().kind,
        FailureKind::ShuttingDown
    );
}

/// A Cancel of a running job records its result ("cancelled") and syncs it before it is
/// answered: a daemon started from the journal at that moment, before the job stopped,
/// takes it up finished, not queued. The job then ends "cancelled" with no second result
/// recorded.
#[test]
fn a_running_jobs_cancellation_is_durable_before_the_answer() {
    let recorder = Arc::new(MemoryRecorder::default());
    let e = journaled_engine(FakeRunner::new(20, 1000), recorder.clone());
    let running = e.submit(UID, window("r"), None, None).unwrap();
    wait_state(&e, running.id, JobState::Running);
    assert_eq!(e.cancel(running.id), Ok(true));
    let recovered = recorder.recovered();
    let job = recovered
        .jobs
        .iter()
        .find(|j| j.id == running.id)
        .expect("the job is in the journal");
    match &job.state {
        journal::RecoveredState::Finished { result, .. } => {
            assert_eq!(result.as_ref().unwrap_err().kind, FailureKind::Cancelled)
        }
        other => panic!("taken up as {other:?}"),
    }
    assert_eq!(
        wait(&e, running.id).unwrap_err().kind,
        FailureKind::Cancelled
    );
    let results = recorder
        .records
        .lock()
        .unwrap()
        .iter()
        .filter(|r| matches!(r, journal::Record::Finished(f) if f.id == running.id))
        .count();
    assert_eq!(results, 1);
    e.shut_down();
}

/// A running job a Cancel reached ends "cancelled" even where its proof was done first (the
/// result the Cancel recorded and promised); one whose result was made before the Cancel
/// keeps it, and the Cancel records nothing.
#[test]
fn a_cancel_decides_a_running_jobs_result_unless_it_was_made() {
    let mut st = State::new(config(1, 8, 1));
    let t0 = Instant::now();
    let job = window_job;
    let output = |label: &str| ProofOutput {
        kind: ProofKind::WindowPoSt,
        proof: label.as_bytes().to_vec(),
        partitions: 1,
        timings: StageTimings::default(),
        backend: "fake".into(),
    };
    let (a, _) = st.submit(job("a"), t0).unwrap();
    assert_eq!(st.next_assignment(t0, Lane::Any).map(|x| x.id), Some(a));
    assert!(matches!(
        st.cancel(a, t0),
        Ok(state::Cancelled::Running { record: true })
    ));
    assert!(matches!(
        st.cancel(a, t0),
        Ok(state::Cancelled::Running { record: false })
    ));
    let result = st.final_result(a, Ok(output("a")), t0).unwrap();
    assert_eq!(result.unwrap_err().kind, FailureKind::Cancelled);

    let (b, _) = st.submit(job("b"), t0).unwrap();
    assert_eq!(st.next_assignment(t0, Lane::Any).map(|x| x.id), Some(b));
    let made = st.final_result(b, Ok(output("b")), t0).unwrap();
    assert!(matches!(
        st.cancel(b, t0),
        Ok(state::Cancelled::Running { record: false })
    ));
    assert!(made.is_ok());
}

/// A WindowPoSt job's successful result, for [`State::finish`].
fn window_proved() -> Result<ProofOutput, Failure> {
    Ok(ProofOutput {
        kind: ProofKind::WindowPoSt,
        proof: vec![1],
        partitions: 1,
        timings: StageTimings::default(),
        backend: "fake".into(),
    })
}

/// A WindowPoSt job of `label` for [`State::submit`]: the test uid, no parameter set,
/// priority or request id.
fn window_job(label: &str) -> NewJob {
    let request = window(label);
    NewJob {
        digest: journal::format::digest(&request),
        request,
        owner: UID,
        params: None,
        priority: None,
        request_id: None,
        request_ids: RequestIds::Strict,
        due: Due::Never,
    }
}

/// An engine of one worker over `runner` with an empty journal kept by `recorder`.
fn journaled_engine(runner: Arc<FakeRunner>, recorder: Arc<dyn journal::Recorder>) -> Engine {
    Engine::start_with(
        config(1, 8, 1),
        runner,
        Arc::new(|_| {}),
        Some(journal::Journal {
            recorder,
            next_id: 1,
            jobs: Vec::new(),
        }),
    )
    .unwrap()
}

/// A running job's cancellation reaches nobody before the journal has synced it: neither
/// a second Cancel (which records nothing) nor the job's waiters, once its worker stopped,
/// hear of it while the first Cancel's sync waits.
#[test]
fn a_running_jobs_cancellation_is_told_only_once_synced() {
    let (recorder, e, running) = gated_engine_running_a_job();
    let phase = e.watch(running.id).unwrap();
    recorder.set_closed(true);
    let cancel = || {
        let e = e.clone();
        std::thread::spawn(move || e.cancel(running.id))
    };
    let before = recorder.syncs();
    let first = cancel();
    recorder.wait_for_sync(before);
    let before = recorder.syncs();
    let second = cancel();
    recorder.wait_for_sync(before);
    // The worker sees the cancellation at its next step (10 ms) and stops.
    std::thread::sleep(Duration::from_millis(200));
    assert!(!first.is_finished(), "the Cancel was answered first");
    assert!(
        !second.is_finished(),
        "the second Cancel was answered first"
    );
    assert!(
        !matches!(&*phase.borrow(), JobPhase::Finished(_)),
        "a waiter heard of the cancellation first"
    );
    recorder.set_closed(false);
    assert_eq!(first.join().unwrap(), Ok(true));
    assert_eq!(second.join().unwrap(), Ok(true));
    assert_eq!(
        wait(&e, running.id).unwrap_err().kind,
        FailureKind::Cancelled
    );
}

/// A settled job whose result is not yet durable (and so not shown to its waiters) is not
/// reaped, even with no retention: its waiters must find it when it is published.
#[test]
fn a_settled_job_is_reaped_only_once_published() {
    let mut c = config(1, 8, 1);
    c.result_retention = Duration::ZERO;
    let mut st = State::new(c);
    let t0 = Instant::now();
    let (a, _) = st.submit(window_job("a"), t0).unwrap();
    let Ok(state::Cancelled::Queued(result)) = st.cancel(a, t0) else {
        panic!("a queued job's cancel");
    };
    st.reap(t0);
    assert!(
        st.snapshot(a, t0).is_some(),
        "reaped before it was published"
    );
    st.publish(a, result);
    st.reap(t0);
    assert!(st.snapshot(a, t0).is_none(), "kept after it was published");
}

/// An engine of one worker with a [`GatedRecorder`] journal, and the job it runs (10 s
/// of 10 ms steps, so a Cancel stops it within one step).
fn gated_engine_running_a_job() -> (Arc<GatedRecorder>, Arc<Engine>, Submitted) {
    let recorder = Arc::new(GatedRecorder::default());
    let e = Arc::new(journaled_engine(
        FakeRunner::new(10, 1000),
        recorder.clone(),
    ));
    let running = e.submit(UID, window("r"), None, None).unwrap();
    wait_state(&e, running.id, JobState::Running);
    (recorder, e, running)
}

/// A job with a deadline is at risk when its kind's measured proving time takes it past the
/// deadline: a running one from what it has run, a queued one from its estimated start behind
/// the jobs ahead of it; an unmeasured kind is never counted, and each job is warned of once.
#[test]
fn pure_jobs_whose_measured_time_passes_their_deadline_are_at_risk() {
    let mut st = State::new(config(1, 16, 1));
    let t0 = Instant::now();
    let at = |s: u64| t0 + Duration::from_secs(s);
    let job = |label: &str, due| NewJob {
        due,
        ..window_job(label)
    };
    // One WindowPoSt measured at 100 s of proving.
    let first = st.submit(job("measured", Due::Never), t0).unwrap().0;
    st.next_assignment(t0, Lane::Any).expect("the worker");
    st.finish(first, window_proved(), at(100));
    assert!(st.at_risk(at(100)).is_empty(), "nothing queued or running");
    // At 200 s: one running (due in 50 s, 100 s to go), one queued behind it due in 160 s
    // (starts in 100 s, done in 200 s), one queued due in 1000 s, and a WinningPoSt due in
    // 1 s that no measurement covers.
    let running = st
        .submit(job("running", Due::At(at(250))), at(200))
        .unwrap()
        .0;
    st.next_assignment(at(200), Lane::Any).expect("the worker");
    let behind = st
        .submit(job("behind", Due::At(at(360))), at(200))
        .unwrap()
        .0;
    st.submit(job("later", Due::At(at(1200))), at(200)).unwrap();
    let winning = winning("unmeasured");
    st.submit(
        NewJob {
            digest: journal::format::digest(&winning),
            request: winning,
            due: Due::At(at(201)),
            ..window_job("x")
        },
        at(200),
    )
    .unwrap();
    let mut risks = st.at_risk(at(200));
    risks.sort_by_key(|r| r.id);
    let seen: Vec<(JobId, u64)> = risks.iter().map(|r| (r.id, r.late_by.as_secs())).collect();
    assert_eq!(seen, vec![(running, 50), (behind, 40)]);
    assert!(risks.iter().all(|r| r.kind == ProofKind::WindowPoSt));
    // Warned of once each; 30 s later the running job has run 30 s of its 100.
    assert_eq!(st.newly_at_risk(at(200)).len(), 2);
    assert!(st.newly_at_risk(at(230)).is_empty());
    let late: Vec<u64> = st
        .at_risk(at(230))
        .iter()
        .map(|r| r.late_by.as_secs())
        .collect();
    assert!(late.contains(&50), "{late:?}");
}

/// Every unfinished job with a deadline is listed, earliest due first, with its time to the
/// deadline (or past it) and its projected end; those projected late are exactly the ones
/// [`State::at_risk`] reports, and a job without a deadline is not listed.
#[test]
fn pure_deadlines_list_every_job_with_a_deadline_and_its_projected_end() {
    let mut st = State::new(config(1, 16, 1));
    let t0 = Instant::now();
    let at = |s: u64| t0 + Duration::from_secs(s);
    let secs = |d: Duration| d.as_secs();
    let job = |label: &str, due| NewJob {
        due,
        ..window_job(label)
    };
    assert!(st.deadlines(t0).is_empty(), "no job");
    // One WindowPoSt measured at 100 s of proving.
    let first = st.submit(job("measured", Due::Never), t0).unwrap().0;
    st.next_assignment(t0, Lane::Any).expect("the worker");
    st.finish(first, window_proved(), at(100));
    let plain = st.submit(job("plain", Due::Never), at(200)).unwrap().0;
    assert!(st.deadlines(at(200)).is_empty(), "no job has a deadline");
    // At 200 s: one running due at 250 s; queued: one due at 210 s (past due by 230 s),
    // one at 360 s, one at 1200 s; and a WinningPoSt due at 201 s that no measurement covers.
    let running = st.submit(job("running", Due::At(at(250))), at(200));
    let running = running.unwrap().0;
    st.next_assignment(at(200), Lane::Any).expect("the worker");
    let overdue = st.submit(job("overdue", Due::At(at(210))), at(200));
    let overdue = overdue.unwrap().0;
    let behind = st
        .submit(job("behind", Due::At(at(360))), at(200))
        .unwrap()
        .0;
    let later = st
        .submit(job("later", Due::At(at(1200))), at(200))
        .unwrap()
        .0;
    let request = winning("unmeasured");
    let new = NewJob {
        digest: journal::format::digest(&request),
        request,
        due: Due::At(at(201)),
        ..window_job("x")
    };
    let unmeasured = st.submit(new, at(200)).unwrap().0;
    // At 230 s the running job has 70 s left; the queue runs behind it in due order.
    let list = st.deadlines(at(230));
    let ids: Vec<JobId> = list.iter().map(|v| v.id).collect();
    assert_eq!(ids, vec![unmeasured, overdue, running, behind, later]);
    assert!(!ids.contains(&plain));
    let seen: Vec<(u64, u64, Option<u64>)> = list
        .iter()
        .map(|v| (secs(v.due_in), secs(v.overdue), v.ends_in.map(secs)))
        .collect();
    assert_eq!(
        seen,
        vec![
            (0, 29, None),
            (0, 20, Some(170)),
            (20, 0, Some(70)),
            (130, 0, Some(270)),
            (970, 0, Some(370)),
        ]
    );
    let state = |id| list.iter().find(|v| v.id == id).map(|v| v.state);
    assert_eq!(state(running), Some(JobState::Running));
    assert_eq!(state(behind), Some(JobState::Queued));
    assert_eq!(list[0].kind, ProofKind::WinningPoSt);
    let late: Vec<Option<u64>> = list.iter().map(|v| v.late_by().map(secs)).collect();
    assert_eq!(late, vec![None, Some(190), Some(50), Some(140), None]);
    // at_risk is the same projection: the late ones, with the same lateness.
    let mut risks: Vec<(JobId, u64)> = (st.at_risk(at(230)).iter())
        .map(|r| (r.id, secs(r.late_by)))
        .collect();
    risks.sort_unstable();
    let mut expected = vec![(overdue, 190), (running, 50), (behind, 140)];
    expected.sort_unstable();
    assert_eq!(risks, expected);
}
