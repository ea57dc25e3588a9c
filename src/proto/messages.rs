//! The messages exchanged over the socket.
//!
//! These types *are* the wire format: postcard encodes structs as their fields in order and
//! enums as a varint variant index followed by the variant's fields, so the order of fields
//! and variants below must never change. New variants go at the end; anything else needs a
//! new [`PROTOCOL_VERSION`](super::PROTOCOL_VERSION). `docs/protocol.md` documents every
//! message byte by byte and `tests/proto_vectors.rs` checks it against this file.

use serde::{Deserialize, Serialize};

/// A message from a client to the daemon.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// 0: the first message on every connection.
    Hello(Hello),
    /// 1: queue a proof; answered [`Response::Accepted`].
    Submit(Submit),
    /// 2: wait for a job; answered [`Response::Proof`], [`Response::Pending`] (timeout) or an error.
    Await(AwaitJob),
    /// 3: Submit then Await on one round trip; answered [`Response::Proof`] or an error.
    Prove(Submit),
    /// 4: cancel a job; answered [`Response::Cancelled`]. Another uid's job is
    /// [`ErrorCode::UnknownJob`] to a client that is not an admin (as for Await and Status).
    Cancel(JobRef),
    /// 5: the daemon's state with the jobs the client sees (its own; an admin's: all), or one
    /// job's; answered [`Response::Status`].
    Status(StatusQuery),
    /// 6: Prometheus text metrics; answered [`Response::Metrics`].
    Metrics,
    /// 7: load a parameter set into memory; answered [`Response::Params`]. For admins only
    /// ([`ErrorCode::AdminRequired`]).
    Preload(ParamSpec),
    /// 8: drop a parameter set from memory; answered [`Response::Params`]. For admins only
    /// ([`ErrorCode::AdminRequired`]); refused with [`ErrorCode::InUse`] while queued or
    /// running jobs need the set, a proof holds it or it is being loaded.
    Evict(ParamSpec),
    /// 9: where the resident parameter sets are held (host and device bytes); answered
    /// [`Response::Residency`]. A daemon older than this variant answers
    /// [`ErrorCode::MalformedFrame`].
    Residency,
    /// 10: what the proving stages hold (partitions per stage, the host memory budget);
    /// answered [`Response::Pipeline`]. A daemon older than this variant answers
    /// [`ErrorCode::MalformedFrame`].
    Pipeline,
    /// 11: the proving devices (their placement, work and resident parameter sets); answered
    /// [`Response::Devices`]. A daemon older than this variant answers
    /// [`ErrorCode::MalformedFrame`].
    Devices,
    /// 12: the known jobs a page at a time, for lists that do not fit in one Status
    /// answer; answered [`Response::Jobs`]. A daemon older than this variant answers
    /// [`ErrorCode::MalformedFrame`].
    Jobs(JobsQuery),
    /// 13: answered [`Response::Pong`] at once with the same nonce, before or after Hello
    /// (it needs no session and queues nothing). A daemon older than this variant answers
    /// [`ErrorCode::MalformedFrame`].
    Ping(Ping),
    /// 14: the newest known job submitted under a request id, for a client that lost the
    /// job id (a restarted miner); answered [`Response::Job`]. A daemon older than this
    /// variant answers [`ErrorCode::MalformedFrame`].
    Lookup(LookupQuery),
    /// 15: what the daemon proves on and how its queue is shared; answered
    /// [`Response::Info`]. A daemon older than this variant answers
    /// [`ErrorCode::MalformedFrame`]. (A request of its own rather than fields appended to
    /// [`Welcome`]: a decoder refuses trailing bytes, so a longer Welcome would break every
    /// client built before it at Hello.)
    Info,
    /// 16: [`Request::Preload`] of the parameter set of a proof named by Filecoin's integer
    /// id; answered [`Response::Params`]. A daemon older than this variant answers
    /// [`ErrorCode::MalformedFrame`].
    PreloadProof(RegisteredProof),
    /// 17: [`Request::Evict`] of the parameter set of a proof named by Filecoin's integer
    /// id; answered [`Response::Params`]. A daemon older than this variant answers
    /// [`ErrorCode::MalformedFrame`].
    EvictProof(RegisteredProof),
    /// 18: follow a job: answered by [`Response::Progress`] frames as the job moves (queued,
    /// started, each partition's stages, verification), then by exactly what an Await
    /// without a timeout answers ([`Response::Proof`] or an error). Another uid's job is
    /// [`ErrorCode::UnknownJob`] to a client that is not an admin. A daemon older than this
    /// variant answers [`ErrorCode::MalformedFrame`].
    Watch(JobRef),
    /// 19: whether this host can take a job of a kind and class now: the queue per class,
    /// the room left for the class, the memory budget left, and when such a job would start
    /// and how long it would prove, from the proving times measured since start; answered
    /// [`Response::Capacity`]. A daemon older than this variant answers
    /// [`ErrorCode::MalformedFrame`].
    Capacity(CapacityQuery),
    /// 20: the proving devices' health (failures, quarantine); answered
    /// [`Response::Health`]. Anyone allowed to connect may ask. A daemon older than this
    /// variant answers [`ErrorCode::MalformedFrame`].
    Health,
    /// 21: [`Request::Submit`] of an input too large for a frame, or one the client keeps in
    /// a file: the input's payload (PoRep's `c1`, the others' `input`) is empty here, and
    /// the daemon reads it from the file descriptor that comes with this frame (SCM_RIGHTS
    /// on the frame's bytes: a memfd, or the file itself), from its start to its end, at
    /// most `protocol.max_input_size` bytes; answered as Submit. Without a descriptor, or
    /// with a payload, [`ErrorCode::InvalidInput`]. A daemon older than this variant
    /// answers [`ErrorCode::MalformedFrame`].
    SubmitFd(Submit),
    /// 22: [`Request::Prove`] with its input read from a passed descriptor, as
    /// [`Request::SubmitFd`]; answered as Prove. A daemon older than this variant answers
    /// [`ErrorCode::MalformedFrame`].
    ProveFd(Submit),
    /// 23: each device's memory (budget, held, peak) and the memory plan each resident
    /// parameter set's proofs follow on it; answered [`Response::DeviceMemory`]. Anyone
    /// allowed to connect may ask. Appended to version 1: a daemon older than this variant
    /// answers [`ErrorCode::MalformedFrame`].
    DeviceMemory,
    /// 24: [`Request::Submit`] of a job the client needs done within `finish_within_ms`:
    /// within its class it goes before the jobs due later and those without a deadline, at
    /// every stage; answered as Submit. A resubmission under a request id keeps the job's
    /// deadline. A daemon older than this variant answers [`ErrorCode::MalformedFrame`].
    SubmitWithin(SubmitWithin),
    /// 25: [`Request::Prove`] with a deadline, as [`Request::SubmitWithin`]; answered as
    /// Prove. A daemon older than this variant answers [`ErrorCode::MalformedFrame`].
    ProveWithin(SubmitWithin),
    /// 26: the queued and running jobs with a deadline that the client sees (its own; an
    /// admin's: all, as for [`Request::Jobs`]), earliest due first, with the time left to
    /// each deadline and when the proving times measured since start say each job ends;
    /// answered [`Response::Deadlines`]. A daemon older than this variant answers
    /// [`ErrorCode::MalformedFrame`].
    Deadlines(DeadlinesQuery),
}

/// A message from the daemon to a client.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Response {
    /// 0: answer to Hello.
    Welcome(Welcome),
    /// 1: a job was queued (or an earlier job with the same request id found).
    Accepted(Accepted),
    /// 2: a finished job's verified proof.
    Proof(ProofResult),
    /// 3: Await's timeout passed before the job finished.
    Pending(JobInfo),
    /// 4: a job was cancelled.
    Cancelled(Cancelled),
    /// 5: daemon status.
    Status(StatusReport),
    /// 6: Prometheus text exposition format, version 0.0.4.
    Metrics(String),
    /// 7: the parameter sets now resident.
    Params(ParamsReport),
    /// 8: a typed error; see [`ErrorCode`].
    Error(ErrorResponse),
    /// 9: the resident parameter sets with their host and device bytes.
    Residency(ResidencyReport),
    /// 10: the proving stages now.
    Pipeline(PipelineReport),
    /// 11: the proving devices.
    Devices(DevicesReport),
    /// 12: a page of the known jobs.
    Jobs(JobsPage),
    /// 13: the answer to [`Request::Ping`].
    Pong(Pong),
    /// 14: the answer to [`Request::Lookup`]: the job, as Status reports it.
    Job(JobInfo),
    /// 15: the answer to [`Request::Info`].
    Info(InfoReport),
    /// 16: a step of a watched job, pushed after [`Request::Watch`] until its final answer.
    Progress(ProgressEvent),
    /// 17: the answer to [`Request::Capacity`].
    Capacity(CapacityReport),
    /// 18: the answer to [`Request::Health`].
    Health(HealthReport),
    /// 19: the answer to [`Request::DeviceMemory`].
    DeviceMemory(MemoryReport),
    /// 20: the answer to [`Request::Deadlines`].
    Deadlines(DeadlinesReport),
}

/// The answer to [`Request::DeviceMemory`]: every proving device's memory, in the devices'
/// order (as [`Request::Devices`] lists them).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryReport {
    /// The devices.
    pub devices: Vec<DeviceMemoryReport>,
}

/// One device's memory and the plans of the parameter sets prepared on it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceMemoryReport {
    /// The device's name, as in [`DeviceReport`].
    pub name: String,
    /// What the device may hold at most (what was free when it was opened less a margin, or
    /// `gpu.memory_limit` where that is less), held now, and the most held at once; `None`
    /// for a CPU device.
    pub memory: Option<DeviceMemoryUse>,
    /// The resident sets' plans on it (none on a CPU device).
    pub plans: Vec<MemoryPlan>,
}

/// A GPU's memory, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceMemoryUse {
    /// Its budget.
    pub budget_bytes: u64,
    /// Held now.
    pub used_bytes: u64,
    /// The most held at once since the daemon started.
    pub peak_bytes: u64,
}

/// How one resident parameter set's proofs use a device's memory.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryPlan {
    /// The set.
    pub spec: ParamSpec,
    /// The plan made when the set was prepared, in a line (which queries' points stay
    /// resident, which stages stream and park what; with the smaller budget the proofs keep
    /// to after one ran out of device memory; or why the device is too small for the set,
    /// whose proofs then go to the CPU prover). Cut at 512 bytes, with a note of how many
    /// more there were.
    pub plan: String,
    /// Bytes of the set's points held on the device now.
    pub device_bytes: u64,
    /// Page-locked host bytes the device holds for the set beside the parameters (parked
    /// quotient vectors, the staged assignment); counted against `proving.memory_budget`.
    pub pinned_host_bytes: u64,
}

/// Asks whether the daemon can take a job of `kind` at `priority`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapacityQuery {
    /// The kind of the job the client would send.
    pub kind: ProofKind,
    /// Its class; `None`: the kind's default (as at Submit).
    pub priority: Option<Priority>,
}

/// The answer to [`Request::Capacity`]. Counts are all users' (a client learns how many
/// jobs wait, never whose).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapacityReport {
    /// The class the answer is for (the one asked for, or the kind's default).
    pub priority: Priority,
    /// Queued jobs per class, indexed by [`Priority`]'s wire index (4 entries: Low, Normal,
    /// High, Critical; a later version may append classes).
    pub queued: Vec<u32>,
    /// Running jobs per class, as `queued`.
    pub running: Vec<u32>,
    /// Workers that take any job (as [`Welcome::workers`]; one more takes critical jobs
    /// only).
    pub workers: u32,
    /// Jobs of this class that may still be queued now: `max_queued`, less the critical
    /// reserve for a class other than Critical, less the jobs queued. 0: a Submit would be
    /// answered `QueueFull`.
    pub queue_room: u32,
    /// The host memory budget not reserved by partitions or resident parameters
    /// (`u64::MAX`: no budget).
    pub budget_free_bytes: u64,
    /// When a job of this kind and class submitted now would start, in milliseconds from
    /// now (0: at once); `None` when that depends on the proving time of a kind no job of
    /// which has succeeded since the daemon started.
    pub estimated_start_ms: Option<u64>,
    /// The kind's measured proving time (from a worker taking a job to its verified proof,
    /// less parameter loading; a running average), `None` before a job of it succeeded.
    pub estimated_proof_ms: Option<u64>,
    /// Succeeded jobs of the kind measured since the daemon started.
    pub measured_jobs: u32,
}

/// The answer to [`Request::Health`]: every proving device's health, in the devices' order
/// (as [`Request::Devices`] lists them).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HealthReport {
    /// The devices.
    pub devices: Vec<DeviceHealth>,
}

/// One device's health.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceHealth {
    /// The device's name, as in [`DeviceReport`].
    pub name: String,
    /// Whether it takes partitions.
    pub state: HealthState,
    /// Partitions it failed since start (device errors, out of memory, wrong results).
    pub failures: u64,
    /// Partitions it failed since its last success.
    pub consecutive_failures: u32,
    /// How long it has been quarantined (probes included), in milliseconds; 0 when healthy.
    pub quarantined_for_ms: u64,
    /// How long until its next probe, in milliseconds; 0 when healthy, probing or due.
    pub probe_in_ms: u64,
    /// Its latest failure (at most 256 bytes and a note, control characters escaped).
    pub last_error: Option<String>,
}

/// Whether a device takes partitions. States may be appended: a client should read one it
/// does not know as "not healthy".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum HealthState {
    /// 0: it takes partitions.
    Healthy,
    /// 1: it failed `proving.quarantine_after` partitions in a row and takes none until its
    /// back-off ends.
    Quarantined,
    /// 2: its back-off ended; one partition is on it as a probe.
    Probing,
}

/// What happened to a watched job ([`ProgressEvent::stage`]). Stages may be appended: a
/// client should skip a `Progress` frame it cannot decode (its first byte is the Progress
/// variant, `0x10`) and read on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ProgressStage {
    /// 0: the job waits in the queue (sent first, when it does).
    Queued,
    /// 1: a worker took the job.
    Started,
    /// 2: its parameter set is not resident and is being loaded (minutes at 32 GiB).
    ParamsLoading,
    /// 3: its parameter set is resident; `stage_ms`: getting it took this long.
    ParamsReady,
    /// 4: partition `partition` was admitted and is being synthesized; `stage_ms`: its wait
    /// for a synthesis thread and host memory.
    SynthesisStarted,
    /// 5: partition `partition` is synthesized and queued for a device; `stage_ms`: its
    /// synthesis time.
    SynthesisDone,
    /// 6: a device took partition `partition`; `stage_ms`: its wait in the device queue.
    DeviceStarted,
    /// 7: partition `partition` is proved; `stage_ms`: its time on the device.
    DeviceDone,
    /// 8: every partition is proved; the proof is being verified.
    Verifying,
}

/// One pushed step of a watched job.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgressEvent {
    /// The job.
    pub job_id: u64,
    /// What happened.
    pub stage: ProgressStage,
    /// The partition it happened to (0-based, in proof order); `None` for the job's own
    /// stages (queued, started, parameters, verifying).
    pub partition: Option<u32>,
    /// Partitions proved so far (as in [`JobInfo`]).
    pub partitions_done: u32,
    /// Partitions in total (0 until the job started proving).
    pub partitions_total: u32,
    /// Milliseconds since the job was submitted.
    pub age_ms: u64,
    /// Milliseconds spent in the stage this one ends (see [`ProgressStage`]); 0 where it
    /// ends none.
    pub stage_ms: u64,
    /// Events the daemon dropped just before this one because the client read too slowly
    /// (each watcher has a small buffer; the final answer is never dropped).
    pub dropped: u32,
}

/// A proof type by Filecoin's integer id, as Lotus and Curio hold it (go-state-types
/// numbering; `docs/protocol.md` has the table). The families number independently, hence
/// one variant each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RegisteredProof {
    /// 0: an `abi.RegisteredSealProof` (PoRep), 0–19.
    Seal(u64),
    /// 1: an `abi.RegisteredPoStProof`: WinningPoSt 0–4, WindowPoSt 5–14.
    PoSt(u64),
    /// 2: an `abi.RegisteredUpdateProof` (SnapDeals), 0–4.
    Update(u64),
}

/// The kind of hardware the daemon proves on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BackendKind {
    /// 0: the host's CPUs only.
    Cpu,
    /// 1: at least one GPU (CUDA); CPU devices may prove beside it
    /// (`proving.cpu_device`), never a critical partition.
    Gpu,
}

/// The answer to [`Request::Info`]: facts about the daemon that Welcome predates.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InfoReport {
    /// Whether a GPU proves here.
    pub backend_kind: BackendKind,
    /// The GPUs proving.
    pub gpu_devices: u32,
    /// The CPU devices proving (`proving.cpu_device`; 1 when there is no GPU).
    pub cpu_devices: u32,
    /// Of [`Welcome::max_queued`], the queue slots only critical jobs may take
    /// (`queue.critical_reserve`): other jobs get `QueueFull` when `max_queued -
    /// critical_reserve` wait.
    pub critical_reserve: u32,
    /// How long a finished job stays known (`queue.result_retention`), for Await, Status and
    /// Lookup, in milliseconds.
    pub result_retention_ms: u64,
}

/// Asks for the job submitted under a request id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LookupQuery {
    /// The request id the job was submitted with (1 to 256 bytes, as at Submit).
    pub request_id: String,
}

/// Asks the daemon to answer at once: a liveness and round-trip check that touches no job.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ping {
    /// Any value; the [`Pong`] carries it back, so that a client with several pings in
    /// flight on one connection (written back to back) can match the answers.
    pub nonce: u64,
}

/// The answer to [`Ping`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pong {
    /// The ping's nonce.
    pub nonce: u64,
}

/// Asks for the known jobs after `after`, in job id order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobsQuery {
    /// Only jobs with a larger id (the last id of the previous page); `None`: from the
    /// first.
    pub after: Option<u64>,
    /// At most this many; 0: as many as fit in one frame.
    pub max: u32,
}

/// The answer to [`Request::Jobs`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobsPage {
    /// Jobs in id order, as many as asked for and fit in one frame.
    pub jobs: Vec<JobInfo>,
    /// How many known jobs come after the last one listed (0: this was the last page).
    pub more: u64,
}

/// What [`Request::Deadlines`] asks for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeadlinesQuery {
    /// At most this many jobs, earliest due first; 0, or more than
    /// [`MAX_DEADLINES`]: [`MAX_DEADLINES`] (fewer where they would not fit in a frame).
    pub max: u32,
}

/// The most jobs one [`DeadlinesReport`] lists: the queue may hold far more, and the ones due
/// first are the ones an operator acts on.
pub const MAX_DEADLINES: u32 = 1000;

/// The answer to [`Request::Deadlines`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeadlinesReport {
    /// The jobs, earliest due first (then by id).
    pub jobs: Vec<DeadlineInfo>,
    /// How many more jobs with a deadline the client sees that were left out.
    pub more: u64,
}

/// One job with a deadline in a [`DeadlinesReport`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeadlineInfo {
    /// The job.
    pub job_id: u64,
    /// The proof kind.
    pub kind: ProofKind,
    /// Its priority.
    pub priority: Priority,
    /// Its state: queued or running.
    pub state: JobState,
    /// Partitions proved so far.
    pub partitions_done: u32,
    /// Partitions in total (0 until synthesis knows).
    pub partitions_total: u32,
    /// Milliseconds until its deadline; 0 once it has passed.
    pub due_in_ms: u64,
    /// Milliseconds since its deadline passed; 0 before it does.
    pub overdue_ms: u64,
    /// Milliseconds until it ends by the proving times measured since start; `None` where
    /// its kind, or a kind it waits behind, has not been measured yet.
    pub ends_in_ms: Option<u64>,
}

impl DeadlineInfo {
    /// Milliseconds after its deadline that the projection says it ends; `None` when on
    /// time or not measured (the daemon's own verdict, as its at-risk gauge counts it).
    pub fn late_by_ms(&self) -> Option<u64> {
        let end_after_due = self.ends_in_ms?.saturating_add(self.overdue_ms);
        end_after_due
            .checked_sub(self.due_in_ms)
            .filter(|&late| late > 0)
    }
}

/// Opens a session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// The protocol version the client speaks ([`super::PROTOCOL_VERSION`]).
    pub protocol_version: u32,
    /// Free text identifying the client, for logs (e.g. `"curio/1.24"`).
    pub client_name: String,
}

/// The daemon's answer to Hello.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Welcome {
    /// The protocol version the daemon speaks.
    pub protocol_version: u32,
    /// The daemon's version (`cuzkd 0.1.0`).
    pub server_version: String,
    /// The proving backend (`cpu`, `cuda:0 NVIDIA H200`).
    pub backend: String,
    /// The proof kinds this daemon proves.
    pub proof_kinds: Vec<ProofKind>,
    /// Largest frame payload the daemon accepts or sends.
    pub max_frame_size: u32,
    /// Jobs that may wait in the queue at once.
    pub max_queued: u32,
    /// Jobs in flight at once (`proving.workers`, resolved), not counting the worker kept
    /// for critical jobs.
    pub workers: u32,
}

/// The four proof kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ProofKind {
    /// 0
    PoRep,
    /// 1
    SnapDeals,
    /// 2
    WindowPoSt,
    /// 3
    WinningPoSt,
}

impl ProofKind {
    /// Every kind, in wire order.
    pub const ALL: [ProofKind; 4] = [
        ProofKind::PoRep,
        ProofKind::SnapDeals,
        ProofKind::WindowPoSt,
        ProofKind::WinningPoSt,
    ];
}

/// Scheduling priority. Higher classes always start first; within a class, first come first
/// served.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Priority {
    /// 0
    Low,
    /// 1: PoRep and SnapDeals by default.
    Normal,
    /// 2: WindowPoSt by default.
    High,
    /// 3: WinningPoSt by default.
    Critical,
}

/// What to prove. Payloads are the miner's bytes, unchanged.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ProofInput {
    /// 0: PoRep C2.
    PoRep {
        /// SealCommitPhase1Output JSON (or lotus-bench's wrapper).
        c1: Vec<u8>,
        /// Miner actor id (`f01234` → 1234).
        miner_id: u64,
        /// Sector number (optional with lotus-bench's wrapper, which carries it).
        sector_number: Option<u64>,
    },
    /// 1: SnapDeals update proof; JSON input.
    SnapDeals {
        /// The input JSON.
        input: Vec<u8>,
    },
    /// 2: WindowPoSt of one partition (the JSON has a `partition_index`) or of a whole
    /// deadline (it has none); JSON input.
    WindowPoSt {
        /// The input JSON.
        input: Vec<u8>,
    },
    /// 3: WinningPoSt proof; JSON input.
    WinningPoSt {
        /// The input JSON.
        input: Vec<u8>,
    },
}

/// A proof to queue.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Submit {
    /// Client-chosen idempotency key: the same id with the same input returns the same job;
    /// with a different input, the error `RequestIdConflict`.
    pub request_id: Option<String>,
    /// Overrides the kind's default priority.
    pub priority: Option<Priority>,
    /// What to prove.
    pub input: ProofInput,
}

/// A Submit with a deadline ([`Request::SubmitWithin`], [`Request::ProveWithin`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubmitWithin {
    /// The job.
    pub submit: Submit,
    /// Milliseconds from the daemon's receipt of the request within which the client needs
    /// the proof (a WindowPoSt's time left in its deadline, less the time to send it on
    /// chain); at most 30 days.
    pub finish_within_ms: u64,
}

/// Waits for a job.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AwaitJob {
    /// The job.
    pub job_id: u64,
    /// Give up after this many milliseconds with [`Response::Pending`]; `None` waits forever.
    pub timeout_ms: Option<u64>,
}

/// Names a job.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobRef {
    /// The job.
    pub job_id: u64,
}

/// Asks for the daemon's status, or one job's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusQuery {
    /// One job, or `None` for every known job.
    pub job_id: Option<u64>,
}

/// A parameter set: the circuit of one proof kind at one sector size.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ParamSpec {
    /// The proof kind.
    pub kind: ProofKind,
    /// Sector size in bytes (2048, 8388608, 536870912, 34359738368, 68719476736).
    pub sector_size: u64,
}

/// A job was queued.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Accepted {
    /// The job id, for Await, Cancel and Status.
    pub job_id: u64,
    /// True when the request id matched an existing job with the same input.
    pub existing: bool,
    /// The job's state now.
    pub state: JobState,
    /// The priority it was queued with.
    pub priority: Priority,
}

/// Where a job is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum JobState {
    /// 0: waiting for a worker.
    Queued,
    /// 1: being proved.
    Running,
    /// 2: proved and verified.
    Succeeded,
    /// 3: failed (invalid input, proving or verification failure, shutdown).
    Failed,
    /// 4: cancelled by a client.
    Cancelled,
}

/// Microseconds spent in each stage of a job.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timings {
    /// From Submit to a worker taking the job.
    pub queue_wait_us: u64,
    /// Loading parameters (0 when resident).
    pub param_load_us: u64,
    /// Circuit synthesis.
    pub synthesis_us: u64,
    /// NTTs, MSMs and proof assembly.
    pub proving_us: u64,
    /// Verifying the proof with filecoin-proofs.
    pub verification_us: u64,
    /// From Submit to the result.
    pub total_us: u64,
}

/// A verified proof.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProofResult {
    /// The job.
    pub job_id: u64,
    /// The proof kind.
    pub kind: ProofKind,
    /// The proof bytes as filecoin-proofs returns them (192 bytes per partition).
    pub proof: Vec<u8>,
    /// Partition proofs in `proof`.
    pub partitions: u32,
    /// The provers that made its partitions: the device's name where one proved them all,
    /// else each device and the CPU fallback with its count (docs/protocol.md).
    pub backend: String,
    /// Per-stage timings.
    pub timings: Timings,
}

/// One job, as Status and Pending report it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobInfo {
    /// The job.
    pub job_id: u64,
    /// The client's request id, if any.
    pub request_id: Option<String>,
    /// The proof kind.
    pub kind: ProofKind,
    /// Its priority.
    pub priority: Priority,
    /// Its state.
    pub state: JobState,
    /// Partitions proved so far.
    pub partitions_done: u32,
    /// Partitions in total (0 until synthesis knows).
    pub partitions_total: u32,
    /// Milliseconds since it was submitted.
    pub age_ms: u64,
    /// For failed or cancelled jobs, why.
    pub error: Option<String>,
}

/// A job was cancelled.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cancelled {
    /// The job.
    pub job_id: u64,
    /// False: it was removed from the queue. True: it was running and stops at the next
    /// partition boundary.
    pub was_running: bool,
}

/// The daemon's status.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusReport {
    /// The daemon's version.
    pub server_version: String,
    /// The proving backend.
    pub backend: String,
    /// Seconds since the daemon started.
    pub uptime_s: u64,
    /// Jobs waiting.
    pub queued: u32,
    /// Jobs being proved.
    pub running: u32,
    /// Jobs that succeeded since start.
    pub succeeded: u64,
    /// Jobs that failed since start.
    pub failed: u64,
    /// Jobs cancelled since start.
    pub cancelled: u64,
    /// The jobs asked about: one, or every job still known.
    pub jobs: Vec<JobInfo>,
    /// Parameter sets resident in memory.
    pub params_loaded: Vec<ParamSpec>,
}

/// The parameter sets resident after a Preload or Evict.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParamsReport {
    /// Resident parameter sets.
    pub loaded: Vec<ParamSpec>,
    /// Milliseconds the operation took.
    pub elapsed_ms: u64,
}

/// The answer to [`Request::Residency`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResidencyReport {
    /// Each resident parameter set.
    pub params: Vec<ParamResidency>,
}

/// The answer to [`Request::Pipeline`]: partitions of all jobs per stage, and the host
/// memory budget they reserve against.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PipelineReport {
    /// Partitions synthesized at once at most (not counting the critical one).
    pub synthesis_threads: u32,
    /// Partitions waiting for a synthesis thread or for memory.
    pub waiting: u32,
    /// Partitions being synthesized.
    pub synthesizing: u32,
    /// Synthesized partitions waiting for the device.
    pub device_queued: u32,
    /// Partitions on the device.
    pub device_running: u32,
    /// `proving.memory_budget` in bytes (`u64::MAX`: none).
    pub budget_bytes: u64,
    /// Host bytes reserved by partitions in flight.
    pub reserved_bytes: u64,
    /// Host bytes held besides partitions and counted against the budget: the resident
    /// parameters, page-locked pools and blocks, recorded shapes, loads in progress, the
    /// daemon's own memory at start.
    pub params_bytes: u64,
    /// Milliseconds the device had at least one partition, since start.
    pub device_busy_ms: u64,
    /// Partitions proved since start.
    pub partitions_proved: u64,
}

/// The answer to [`Request::Devices`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DevicesReport {
    /// Where threads run, in one line (as the start-up log has it): `"off"`, `"1 node, not
    /// pinned: …"`, `"2 nodes: node0 cpus 0-7 (device 0, 4 synthesis threads), …"`.
    pub placement: String,
    /// Each device, in configuration order (`proving.gpus`, then the CPU devices): its index
    /// here is the `device` label of the metrics.
    pub devices: Vec<DeviceReport>,
}

/// One proving device.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceReport {
    /// The backend's name (`"cuda:0 NVIDIA H200"`, `"cpu"`).
    pub name: String,
    /// The CPUs its workers are pinned to, as a Linux CPU list (`"0-7,16-23"`); `""`: not
    /// pinned.
    pub cpus: String,
    /// Partitions on it now.
    pub running: u32,
    /// Milliseconds it had at least one partition, since the daemon started.
    pub busy_ms: u64,
    /// Partitions it proved since the daemon started.
    pub partitions_proved: u64,
    /// The parameter sets prepared on it: `host_bytes` is the set's host copy (shared by all
    /// devices), `device_bytes` what this device holds of it.
    pub params: Vec<ParamResidency>,
}

/// Where one resident parameter set is held.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParamResidency {
    /// The set.
    pub spec: ParamSpec,
    /// Bytes of its points in host memory.
    pub host_bytes: u64,
    /// Bytes of its points on the GPU (0 on the CPU backend; less than the host's while the
    /// B queries wait for the first proof, or after a device short of memory dropped some).
    pub device_bytes: u64,
}

/// Why a request failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ErrorCode {
    /// 0: the frame's payload is not a valid message (or has trailing bytes). The connection
    /// stays open.
    MalformedFrame,
    /// 1: the length prefix exceeds the maximum frame size. The daemon closes the connection
    /// after this error, since it cannot find the next frame.
    FrameTooLarge,
    /// 2: Hello named a protocol version the daemon does not speak. Send Hello again.
    UnsupportedVersion,
    /// 3: a request came before a successful Hello.
    HelloRequired,
    /// 4: no such job (never existed, or its result has expired).
    UnknownJob,
    /// 5: the queue is full; retry later.
    QueueFull,
    /// 6: the proof input could not be parsed or is inconsistent.
    InvalidInput,
    /// 7: proving failed (parameters, synthesis, backend, or the proof did not verify); a
    /// backend short of a resource it may have later is [`ErrorCode::ResourceExhausted`].
    ProvingFailed,
    /// 8: the job was cancelled.
    Cancelled,
    /// 9: the daemon is shutting down; the job was not (or will not be) proved.
    ShuttingDown,
    /// 10: the request id is in use by a job with a different input.
    RequestIdConflict,
    /// 11: the peer's uid/gid is not allowed.
    PermissionDenied,
    /// 12: too many connections; the daemon closes this one.
    Busy,
    /// 13: a parameter set could not be loaded or evicted.
    ParamsUnavailable,
    /// 14: a bug in the daemon.
    Internal,
    /// 15: Cancel named a job that has already finished.
    JobFinished,
    /// 16: proving ran out of a resource it may have later (GPU memory, with other parameter
    /// sets resident or other jobs running): the same request may succeed when retried.
    ResourceExhausted,
    /// 17: a resubmission under a request id named a priority its job cannot take: lower
    /// than a queued job's, or any other than a running job's (`job_id` names the job).
    /// Appended to version 1.
    PriorityConflict,
    /// 18: the answer would exceed the frame limit (`protocol.max_frame_size`); the message
    /// gives both sizes. Ask for less (Status of one job) or raise the limit. Appended to
    /// version 1.
    ResponseTooLarge,
    /// 19: Evict (EvictProof) of a parameter set that queued or running jobs need
    /// (`job_id` names the first of them), that a running proof holds, or that is being
    /// loaded: the set stays resident. Evict it again once they have finished (or cancel
    /// them). Appended to version 1.
    InUse,
    /// 20: the request is for admins only (root, the daemon's own uid and
    /// `socket.admin_uids`): Preload, Evict, PreloadProof, EvictProof. The connection stays
    /// open. Appended to version 1.
    AdminRequired,
}

/// A typed error.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorResponse {
    /// What kind of failure.
    pub code: ErrorCode,
    /// Human-readable detail.
    pub message: String,
    /// The job concerned, if any.
    pub job_id: Option<u64>,
}

impl ErrorResponse {
    /// An error without a job.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            job_id: None,
        }
    }
}

impl std::fmt::Display for ErrorResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}: {}", self.code, self.message)?;
        if let Some(job) = self.job_id {
            write!(f, " (job {job})")?;
        }
        Ok(())
    }
}

impl std::error::Error for ErrorResponse {}
