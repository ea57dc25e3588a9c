//! Commands that talk to a running `cuzkd` over its Unix socket: `submit`, `await`,
//! `cancel`, `status`, `metrics`, `capacity`, `deadlines`, `preload`, `evict` (and `prove`
//! through [`prove_via_daemon`]), plus `demo`, which runs a daemon in-process.

#[path = "deadlines.rs"]
pub mod deadlines;
#[path = "demo.rs"]
pub mod demo;

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Subcommand;

use super::request::{request_of, ProveWhat};
use crate::proofs::ProofRequest;
use crate::proto::{
    self, Client, ClientError, DevicesReport, ErrorCode, HealthReport, HealthState, JobInfo,
    ParamSpec, PipelineReport, ProofResult, ResidencyReport, StatusReport, Submit, Timings,
};

/// Options shared by every command that talks to the daemon.
#[derive(Debug, Clone, clap::Args)]
pub struct DaemonOpts {
    /// The daemon's socket.
    #[arg(
        long,
        env = "CUZK_SOCKET",
        default_value = "/run/cuzk/cuzk.sock",
        global = true
    )]
    pub socket: std::path::PathBuf,
    /// How long to wait for an answer that should come at once (e.g. 30s, 2m; 0 waits
    /// forever). A daemon that keeps failing to start still has its connections accepted by
    /// systemd's socket, but never answers: the client then stops with an error naming the
    /// socket and where to look (`journalctl -u cuzkd`).
    #[arg(
        long,
        env = "CUZK_ANSWER_TIMEOUT",
        default_value = "60s",
        value_parser = parse_duration_arg,
        global = true
    )]
    pub answer_timeout: Duration,
    /// Print machine-readable JSON instead of text.
    #[arg(long, global = true)]
    pub json: bool,
    /// Show no progress while waiting for a job (without it: one updating line on a
    /// terminal, a line per step otherwise, on stderr).
    #[arg(long, short, global = true)]
    pub quiet: bool,
}

/// Scheduling priority on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PriorityArg {
    /// Background work.
    Low,
    /// PoRep and SnapDeals default.
    Normal,
    /// WindowPoSt default.
    High,
    /// WinningPoSt default.
    Critical,
}

impl From<PriorityArg> for proto::Priority {
    fn from(p: PriorityArg) -> Self {
        match p {
            PriorityArg::Low => proto::Priority::Low,
            PriorityArg::Normal => proto::Priority::Normal,
            PriorityArg::High => proto::Priority::High,
            PriorityArg::Critical => proto::Priority::Critical,
        }
    }
}

/// Per-job options of `submit` (and of `prove` through [`prove_via_daemon_with`]).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct JobOpts {
    /// Priority class [default: critical for winning-post, high for window-post, normal
    /// otherwise].
    #[arg(long, value_enum)]
    pub priority: Option<PriorityArg>,
    /// Idempotency key: submitting the same id and input again returns the same job.
    #[arg(long)]
    pub request_id: Option<String>,
    /// Needed within this long (e.g. 10m, at most 30 days): within its class the job goes
    /// before the jobs due later and those without a deadline (SubmitWithin).
    #[arg(long, value_parser = parse_duration_arg)]
    pub finish_within: Option<Duration>,
}

/// `cuzk submit …`
#[derive(Debug, clap::Args)]
pub struct SubmitArgs {
    /// What to prove.
    #[command(subcommand)]
    pub what: ProveWhat,
    /// Job options.
    #[command(flatten)]
    pub job: JobOpts,
    /// Daemon connection.
    #[command(flatten)]
    pub daemon: DaemonOpts,
}

/// `cuzk await …`
#[derive(Debug, clap::Args)]
pub struct AwaitArgs {
    /// The job id `submit` printed.
    pub job: u64,
    /// Give up after this long (e.g. 30s, 5m) and report the job's state; exit status 3.
    /// Without it, the job's progress is followed step by step until it ends.
    #[arg(long, value_parser = parse_duration_arg)]
    pub timeout: Option<Duration>,
    /// Write the proof bytes here instead of printing them in hex.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Daemon connection.
    #[command(flatten)]
    pub daemon: DaemonOpts,
}

/// `cuzk cancel …` and `cuzk status …`
#[derive(Debug, clap::Args)]
pub struct JobArgs {
    /// The job id.
    pub job: u64,
    /// Daemon connection.
    #[command(flatten)]
    pub daemon: DaemonOpts,
}

/// `cuzk status [JOB]`
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// One job; without it, the daemon and every job of yours it knows (an admin's: every
    /// job).
    pub job: Option<u64>,
    /// Daemon connection.
    #[command(flatten)]
    pub daemon: DaemonOpts,
}

/// `cuzk metrics`
#[derive(Debug, clap::Args)]
pub struct MetricsArgs {
    /// Print the Prometheus text exposition format 0.0.4, as the daemon renders it (and as
    /// metrics.textfile holds it). cuzk metrics prints the same without the flag: it is the
    /// only format, and the flag lets a script say which one it expects. Not with --json.
    #[arg(long, conflicts_with = "json")]
    pub prometheus: bool,
    /// Daemon connection.
    #[command(flatten)]
    pub daemon: DaemonOpts,
}

/// `cuzk preload …` and `cuzk evict …`
#[derive(Debug, clap::Args)]
pub struct ParamArgs {
    /// Proof kind: porep, snap, window-post or winning-post.
    pub kind: crate::proofs::ProofKind,
    /// Sector size: 2KiB, 8MiB, 512MiB, 32GiB or 64GiB.
    #[arg(value_parser = crate::proofs::shapes::parse_sector_size)]
    pub sector_size: u64,
    /// Daemon connection.
    #[command(flatten)]
    pub daemon: DaemonOpts,
}

/// `cuzk capacity …`
#[derive(Debug, clap::Args)]
pub struct CapacityArgs {
    /// Proof kind of the job you would send: porep, snap, window-post or winning-post.
    pub kind: crate::proofs::ProofKind,
    /// Its priority class [default: the kind's, as at submit].
    #[arg(long, value_enum)]
    pub priority: Option<PriorityArg>,
    /// Daemon connection.
    #[command(flatten)]
    pub daemon: DaemonOpts,
}

/// Daemon client subcommands (flattened into `cuzk`'s top level).
#[derive(Debug, Subcommand)]
pub enum ClientCommand {
    /// Queue a proof on the daemon and print its job id.
    Submit(SubmitArgs),
    /// Wait for a job and print (or write) its proof.
    Await(AwaitArgs),
    /// Cancel a queued or running job.
    Cancel(JobArgs),
    /// Show the daemon's status and your jobs (an admin: every job), or one job's; with the
    /// proving stages and each device's placement, health, memory and memory plans.
    Status(StatusArgs),
    /// Print the daemon's metrics in the Prometheus text format.
    Metrics(MetricsArgs),
    /// Whether the daemon can take a job of a kind now: jobs per class, queue room, memory
    /// budget left, and when such a job would start (estimated from the proving times the
    /// daemon measured since it started; unknown until a job of each kind it waits for has
    /// succeeded).
    Capacity(CapacityArgs),
    /// The queued and running jobs with a deadline (yours; an admin's: every one), earliest
    /// due first: the time left to each deadline (or past it) and when each job ends by the
    /// proving times the daemon measured since it started.
    Deadlines(deadlines::DeadlinesArgs),
    /// Load a parameter set into the daemon's memory (admins only).
    Preload(ParamArgs),
    /// Drop a parameter set from the daemon's memory (admins only; refused while queued or
    /// running jobs need it).
    Evict(ParamArgs),
    /// Generate 2 KiB test parameters if missing, start an in-process daemon, seal a 2 KiB
    /// sector, prove it over the socket, verify it and print the timings.
    Demo(demo::DemoArgs),
}

/// Exit status of `cuzk await` when its timeout passed.
pub const EXIT_PENDING: i32 = 3;

/// Runs a daemon client subcommand.
pub fn run(cmd: ClientCommand) -> anyhow::Result<()> {
    match cmd {
        ClientCommand::Submit(a) => submit(a),
        ClientCommand::Await(a) => await_cmd(a),
        ClientCommand::Cancel(a) => cancel(a),
        ClientCommand::Status(a) => status(a),
        ClientCommand::Metrics(a) => {
            print!("{}", connect_to(&a.daemon)?.metrics()?);
            Ok(())
        }
        ClientCommand::Capacity(a) => capacity(a),
        ClientCommand::Deadlines(a) => deadlines::run(a),
        ClientCommand::Preload(a) => params(a, true),
        ClientCommand::Evict(a) => params(a, false),
        ClientCommand::Demo(a) => demo::run(a),
    }
}

const CLIENT_NAME: &str = concat!("cuzk/", env!("CARGO_PKG_VERSION"));

/// Connects to `socket` and says Hello, with the default answer timeout.
pub fn connect(socket: &Path) -> anyhow::Result<Client> {
    Ok(Client::connect(socket, CLIENT_NAME)?)
}

/// Connects as the command line's options say and says Hello.
pub fn connect_to(opts: &DaemonOpts) -> anyhow::Result<Client> {
    Ok(Client::connect_with(
        &opts.socket,
        CLIENT_NAME,
        Some(opts.answer_timeout),
    )?)
}

fn submission(request: ProofRequest, job: &JobOpts) -> Submit {
    Submit {
        request_id: job.request_id.clone(),
        priority: job.priority.map(Into::into),
        input: request.into(),
    }
}

/// Queues `request` with `job`'s options: a SubmitWithin where it names a deadline.
fn send(
    client: &mut Client,
    request: ProofRequest,
    job: &JobOpts,
) -> Result<proto::Accepted, ClientError> {
    let s = submission(request, job);
    match job.finish_within {
        Some(within) => client.submit_within(s, within),
        None => client.submit(s),
    }
}

/// Proves `request` through the daemon and returns the proof bytes.
pub fn prove_via_daemon(request: ProofRequest, opts: &DaemonOpts) -> anyhow::Result<Vec<u8>> {
    prove_via_daemon_with(request, opts, &JobOpts::default())
}

/// Like [`prove_via_daemon`], with a priority and request id. Shows progress on a terminal
/// and the stage timings on stderr (or the whole result as JSON on stdout with `--json`).
pub fn prove_via_daemon_with(
    request: ProofRequest,
    opts: &DaemonOpts,
    job: &JobOpts,
) -> anyhow::Result<Vec<u8>> {
    let mut client = connect_to(opts)?;
    let accepted = send(&mut client, request, job)?;
    let result = follow(&mut client, accepted.job_id, opts.quiet)?;
    report_result(&result, opts.json);
    Ok(result.proof)
}

fn submit(a: SubmitArgs) -> anyhow::Result<()> {
    let request = request_of(&a.what)?;
    let accepted = send(&mut connect_to(&a.daemon)?, request, &a.job)?;
    if a.daemon.json {
        println!("{}", serde_json::to_string(&accepted)?);
    } else {
        println!("{}", accepted.job_id);
        if accepted.existing {
            eprintln!(
                "(request id matched job {}, already {:?})",
                accepted.job_id, accepted.state
            );
        }
    }
    Ok(())
}

/// Waits for a job until it ends, following its progress (`Watch`; from a daemon that
/// predates it, polling with Await), shown on stderr unless `quiet`.
fn follow(client: &mut Client, job: u64, quiet: bool) -> anyhow::Result<ProofResult> {
    let display = super::progress::Display::for_stderr(quiet);
    match super::progress::watch(client, job, display)? {
        Some(result) => Ok(result),
        None => wait(client, job, None, quiet)?
            .ok_or_else(|| anyhow::anyhow!("job {job} did not finish")),
    }
}

/// Waits for a job by polling Await, with a progress line on a terminal unless `quiet`;
/// `None` when `timeout` passed.
fn wait(
    client: &mut Client,
    job: u64,
    timeout: Option<Duration>,
    quiet: bool,
) -> anyhow::Result<Option<ProofResult>> {
    let tty = !quiet && std::io::stderr().is_terminal();
    let start = Instant::now();
    let tick = if tty {
        Duration::from_millis(500)
    } else {
        Duration::from_secs(3600)
    };
    loop {
        let step = match timeout {
            Some(t) => t.saturating_sub(start.elapsed()).min(tick),
            None => tick,
        };
        match client.await_job(job, Some(step))? {
            Ok(result) => {
                if tty {
                    eprint!("\r\x1b[2K");
                }
                return Ok(Some(result));
            }
            Err(info) => {
                if tty {
                    eprint!("\r\x1b[2K{}", progress_line(&info, start.elapsed()));
                    let _ = std::io::stderr().flush();
                }
                if timeout.is_some_and(|t| start.elapsed() >= t) {
                    if tty {
                        eprintln!();
                    }
                    return Ok(None);
                }
            }
        }
    }
}

fn progress_line(info: &JobInfo, waited: Duration) -> String {
    let partitions = if info.partitions_total > 0 {
        format!(
            ", partition {}/{}",
            info.partitions_done, info.partitions_total
        )
    } else {
        String::new()
    };
    format!(
        "job {} ({}, {:?}): {:?}{partitions}, {:.1} s",
        info.job_id,
        info.kind,
        info.priority,
        info.state,
        waited.as_secs_f64()
    )
}

fn await_cmd(a: AwaitArgs) -> anyhow::Result<()> {
    let mut client = connect_to(&a.daemon)?;
    // With a timeout: polled (Watch has none); without: followed step by step.
    let waited = match a.timeout {
        None => Some(follow(&mut client, a.job, a.daemon.quiet)?),
        Some(_) => wait(&mut client, a.job, a.timeout, a.daemon.quiet)?,
    };
    let Some(result) = waited else {
        let info = client.status(Some(a.job))?.jobs.into_iter().next();
        match (&info, a.daemon.json) {
            (Some(i), true) => println!("{}", serde_json::to_string(i)?),
            (Some(i), false) => eprintln!(
                "still {:?} after the timeout: {}",
                i.state,
                progress_line(i, Duration::ZERO)
            ),
            (None, _) => eprintln!("job {} is gone", a.job),
        }
        std::process::exit(EXIT_PENDING);
    };
    report_result(&result, a.daemon.json);
    match &a.out {
        Some(path) => std::fs::write(path, &result.proof)
            .with_context(|| format!("writing {}", path.display()))?,
        None if !a.daemon.json => println!("{}", hex::encode(&result.proof)),
        None => {}
    }
    Ok(())
}

/// Prints a finished job: the timing table on stderr, or the JSON document on stdout.
fn report_result(r: &ProofResult, json: bool) {
    if json {
        let doc = serde_json::json!({
            "job_id": r.job_id,
            "kind": r.kind.as_str(),
            "proof": hex::encode(&r.proof),
            "partitions": r.partitions,
            "backend": r.backend,
            "timings_us": r.timings,
        });
        println!("{doc}");
    } else {
        eprintln!(
            "job {}: {} proof, {} partition(s) on {}",
            r.job_id, r.kind, r.partitions, r.backend
        );
        eprint!("{}", timing_table(&r.timings));
    }
}

/// The per-stage timing table.
pub fn timing_table(t: &Timings) -> String {
    let rows = [
        ("queue wait", t.queue_wait_us),
        ("parameter load", t.param_load_us),
        ("synthesis", t.synthesis_us),
        ("proving", t.proving_us),
        ("verification", t.verification_us),
        ("total", t.total_us),
    ];
    let mut out = String::new();
    for (name, us) in rows {
        out.push_str(&format!("  {name:<16}{:>10.3} s\n", us as f64 / 1e6));
    }
    out
}

fn cancel(a: JobArgs) -> anyhow::Result<()> {
    let c = connect_to(&a.daemon)?.cancel(a.job)?;
    if a.daemon.json {
        println!("{}", serde_json::to_string(&c)?);
    } else if c.was_running {
        println!(
            "job {} cancelled; it stops at its next partition boundary",
            c.job_id
        );
    } else {
        println!("job {} cancelled (it was queued)", c.job_id);
    }
    Ok(())
}

/// An answer to a request appended after version 1 began, or None from a daemon that
/// predates the request (it answers MalformedFrame, as for any request it does not know).
fn known<T>(answer: Result<T, ClientError>) -> anyhow::Result<Option<T>> {
    match answer {
        Ok(r) => Ok(Some(r)),
        Err(e @ ClientError::Server(_)) if e.code() == Some(ErrorCode::MalformedFrame) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

fn status(a: StatusArgs) -> anyhow::Result<()> {
    let mut client = connect_to(&a.daemon)?;
    let s = client.status(a.job)?;
    let residency = known(client.residency())?;
    let pipeline = known(client.pipeline())?;
    let devices = known(client.devices())?;
    let health = known(client.health())?;
    let memory = known(client.device_memory())?;
    // The budget's parts and the process's memory travel in the metrics, not the protocol.
    let held = known(client.metrics())?.map(|m| HostMemory::from_metrics(&m));
    if a.daemon.json {
        let mut v = serde_json::to_value(&s)?;
        if let (Some(obj), Some(r)) = (v.as_object_mut(), &residency) {
            obj.insert("residency".into(), serde_json::to_value(&r.params)?);
        }
        if let (Some(obj), Some(p)) = (v.as_object_mut(), &pipeline) {
            obj.insert("pipeline".into(), serde_json::to_value(p)?);
        }
        if let (Some(obj), Some(d)) = (v.as_object_mut(), &devices) {
            obj.insert("devices".into(), serde_json::to_value(d)?);
        }
        if let (Some(obj), Some(h)) = (v.as_object_mut(), &health) {
            obj.insert("health".into(), serde_json::to_value(&h.devices)?);
        }
        if let (Some(obj), Some(m)) = (v.as_object_mut(), &memory) {
            obj.insert("memory".into(), serde_json::to_value(&m.devices)?);
        }
        if let (Some(obj), Some(h)) = (v.as_object_mut(), &held) {
            obj.insert("host_memory".into(), serde_json::to_value(h)?);
        }
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        print!("{}", status_text(&s, residency.as_ref()));
        if let Some(p) = &pipeline {
            print!("{}", pipeline_text(p));
        }
        if let Some(h) = &held {
            print!("{}", h.text());
        }
        if let Some(d) = &devices {
            print!("{}", devices_text(d));
        }
        if let Some(h) = &health {
            print!("{}", health_text(h));
        }
        if let Some(m) = &memory {
            print!("{}", memory_text(m));
        }
    }
    Ok(())
}

/// Each GPU's memory and the plan each resident set follows on it (nothing for CPU
/// devices).
fn memory_text(m: &proto::MemoryReport) -> String {
    let mut out = String::new();
    for (i, d) in m.devices.iter().enumerate() {
        let Some(u) = &d.memory else { continue };
        out += &format!(
            "device {i} memory: {} held of {} (peak {})\n",
            gib(u.used_bytes),
            gib(u.budget_bytes),
            gib(u.peak_bytes)
        );
        for p in &d.plans {
            let pinned = if p.pinned_host_bytes == 0 {
                String::new()
            } else {
                format!(", {} page-locked on the host", gib(p.pinned_host_bytes))
            };
            out += &format!(
                "  {} {}: {}; {} on the device{pinned}\n",
                p.spec.kind,
                crate::proofs::shapes::format_sector_size(p.spec.sector_size),
                p.plan,
                gib(p.device_bytes),
            );
        }
    }
    out
}

fn capacity(a: CapacityArgs) -> anyhow::Result<()> {
    let mut client = connect_to(&a.daemon)?;
    let kind = proto::ProofKind::from(a.kind);
    let report = match client.capacity(kind, a.priority.map(Into::into)) {
        Err(e @ ClientError::Server(_)) if e.code() == Some(ErrorCode::MalformedFrame) => {
            anyhow::bail!(
                "this daemon predates the Capacity request: see `cuzk status` for its counts"
            )
        }
        r => r?,
    };
    if a.daemon.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", capacity_text(a.kind, &report));
    }
    Ok(())
}

fn capacity_text(kind: crate::proofs::ProofKind, c: &proto::CapacityReport) -> String {
    let per_class = |v: &[u32]| v.iter().map(u32::to_string).collect::<Vec<_>>().join(" ");
    let budget = if c.budget_free_bytes == u64::MAX {
        "no budget".to_string()
    } else {
        format!("{} free", gib(c.budget_free_bytes))
    };
    let seconds = |ms: u64| format!("{:.1} s", ms as f64 / 1e3);
    let start = match c.estimated_start_ms {
        Some(0) => "at once".to_string(),
        Some(ms) => format!("in about {}", seconds(ms)),
        None => "unknown: a kind it waits for has no measured proof yet".to_string(),
    };
    let proof = match c.estimated_proof_ms {
        Some(ms) => format!("about {} ({} measured)", seconds(ms), c.measured_jobs),
        None => format!("unknown: no {kind} proof has succeeded since the daemon started"),
    };
    format!(
        "{kind} at priority {:?}\n\
         queued per class (low normal high critical): {}\n\
         running per class (low normal high critical): {}\n\
         workers: {} (and one for critical jobs); queue room for this class: {}\n\
         host memory budget: {budget}\n\
         would start: {start}\n\
         would prove: {proof}\n",
        c.priority,
        per_class(&c.queued),
        per_class(&c.running),
        c.workers,
        c.queue_room,
    )
}

/// The devices that are quarantined or failed partitions (nothing where all are healthy and
/// none ever failed).
fn health_text(h: &HealthReport) -> String {
    let mut out = String::new();
    for (i, d) in h.devices.iter().enumerate() {
        let secs = |ms: u64| ms as f64 / 1000.0;
        let state = match d.state {
            HealthState::Healthy if d.failures == 0 => continue,
            HealthState::Healthy => "healthy".to_string(),
            HealthState::Quarantined => format!(
                "QUARANTINED for {:.1} s, next probe in {:.1} s",
                secs(d.quarantined_for_ms),
                secs(d.probe_in_ms)
            ),
            HealthState::Probing => format!(
                "QUARANTINED for {:.1} s, being probed",
                secs(d.quarantined_for_ms)
            ),
        };
        out.push_str(&format!(
            "device {i} {}: {state}; {} failed partitions ({} in a row){}\n",
            d.name,
            d.failures,
            d.consecutive_failures,
            d.last_error
                .as_ref()
                .map(|e| format!("; last: {e}"))
                .unwrap_or_default()
        ));
    }
    out
}

fn devices_text(d: &DevicesReport) -> String {
    let mut out = format!("placement: {}\n", d.placement);
    for (i, dev) in d.devices.iter().enumerate() {
        let cpus = if dev.cpus.is_empty() {
            String::new()
        } else {
            format!(" on cpus {}", dev.cpus)
        };
        let sets: Vec<String> = dev
            .params
            .iter()
            .map(|p| format!("{} {}", p.spec.kind, gib(p.device_bytes)))
            .collect();
        let sets = if sets.is_empty() {
            String::new()
        } else {
            format!("; holds {}", sets.join(", "))
        };
        out += &format!(
            "device {i}: {}{cpus}: {} proved, {} running, busy {:.1} s{sets}\n",
            dev.name,
            dev.partitions_proved,
            dev.running,
            dev.busy_ms as f64 / 1e3
        );
    }
    out
}

fn pipeline_text(p: &PipelineReport) -> String {
    let budget = if p.budget_bytes == u64::MAX {
        "no budget".to_string()
    } else {
        format!("budget {}", gib(p.budget_bytes))
    };
    format!(
        "partitions: {} waiting, {} synthesizing (of {} threads), {} queued for the device, {} on it; \
         {} proved\nhost memory: {} reserved by partitions, {} held besides them, {budget}\n",
        p.waiting,
        p.synthesizing,
        p.synthesis_threads,
        p.device_queued,
        p.device_running,
        p.partitions_proved,
        gib(p.reserved_bytes),
        gib(p.params_bytes),
    )
}

/// What the daemon's memory budget counts besides partitions, by part, and the process's
/// own resident memory, as its metrics give them.
#[derive(Debug, Default, serde::Serialize)]
struct HostMemory {
    /// `cuzk_memory_held_bytes` by part, in the metrics' order.
    held: Vec<(String, u64)>,
    /// VmRSS, VmHWM.
    resident_bytes: Option<u64>,
    peak_bytes: Option<u64>,
}

impl HostMemory {
    fn from_metrics(text: &str) -> Self {
        let mut out = Self::default();
        for line in text.lines() {
            let Some((name, value)) = line.rsplit_once(' ') else {
                continue;
            };
            let Ok(value) = value.parse::<u64>() else {
                continue;
            };
            let label = |prefix: &str| {
                name.strip_prefix(prefix)
                    .and_then(|l| l.strip_suffix("\"}"))
                    .map(str::to_owned)
            };
            if let Some(part) = label("cuzk_memory_held_bytes{part=\"") {
                out.held.push((part, value));
            } else if let Some(kind) = label("cuzk_process_memory_bytes{kind=\"") {
                match kind.as_str() {
                    "resident" => out.resident_bytes = Some(value),
                    "peak" => out.peak_bytes = Some(value),
                    _ => {}
                }
            }
        }
        out
    }

    fn text(&self) -> String {
        let mut out = String::new();
        if !self.held.is_empty() {
            let parts: Vec<String> = self
                .held
                .iter()
                .map(|(part, n)| format!("{} {}", part.replace('_', " "), gib(*n)))
                .collect();
            out += &format!("held besides partitions: {}\n", parts.join(", "));
        }
        if let (Some(rss), Some(peak)) = (self.resident_bytes, self.peak_bytes) {
            out += &format!("process: {} resident, peak {}\n", gib(rss), gib(peak));
        }
        out
    }
}

/// Bytes in GiB with two decimals (parameter sets are hundreds of MiB to tens of GiB).
fn gib(bytes: u64) -> String {
    format!("{:.2} GiB", bytes as f64 / (1u64 << 30) as f64)
}

fn status_text(s: &StatusReport, residency: Option<&ResidencyReport>) -> String {
    let mut out = format!(
        "{} on {}, up {} s\nqueued {}, running {}, succeeded {}, failed {}, cancelled {}\n",
        s.server_version,
        s.backend,
        s.uptime_s,
        s.queued,
        s.running,
        s.succeeded,
        s.failed,
        s.cancelled
    );
    if !s.params_loaded.is_empty() {
        let loaded: Vec<String> = s
            .params_loaded
            .iter()
            .map(|p| {
                format!(
                    "{} {}",
                    p.kind,
                    crate::proofs::shapes::format_sector_size(p.sector_size)
                )
            })
            .collect();
        out.push_str(&format!("parameters resident: {}\n", loaded.join(", ")));
    }
    for p in residency.map(|r| r.params.as_slice()).unwrap_or_default() {
        out.push_str(&format!(
            "  {} {}: {} in memory, {} on the GPU\n",
            p.spec.kind,
            crate::proofs::shapes::format_sector_size(p.spec.sector_size),
            gib(p.host_bytes),
            gib(p.device_bytes)
        ));
    }
    if !s.jobs.is_empty() {
        out.push_str(&format!(
            "{:>6}  {:<13}{:<9}{:<10}{:>10}  {}\n",
            "JOB", "KIND", "PRIORITY", "STATE", "AGE", "DETAIL"
        ));
        for j in &s.jobs {
            let detail = j
                .error
                .clone()
                .or_else(|| j.request_id.as_ref().map(|r| format!("request {r}")))
                .unwrap_or_default();
            out.push_str(&format!(
                "{:>6}  {:<13}{:<9}{:<10}{:>9.1}s  {}\n",
                j.job_id,
                j.kind.as_str(),
                format!("{:?}", j.priority).to_lowercase(),
                format!("{:?}", j.state).to_lowercase(),
                j.age_ms as f64 / 1000.0,
                detail
            ));
        }
    }
    out
}

fn params(a: ParamArgs, load: bool) -> anyhow::Result<()> {
    let mut client = connect_to(&a.daemon)?;
    let spec = ParamSpec {
        kind: a.kind.into(),
        sector_size: a.sector_size,
    };
    let report = if load {
        client.preload(spec)?
    } else {
        client.evict(spec)?
    };
    if a.daemon.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        let verb = if load { "loaded" } else { "evicted" };
        println!(
            "{verb} in {} ms; resident: {}",
            report.elapsed_ms,
            report.loaded.len()
        );
        for p in &report.loaded {
            println!(
                "  {} {}",
                p.kind,
                crate::proofs::shapes::format_sector_size(p.sector_size)
            );
        }
    }
    Ok(())
}

fn parse_duration_arg(s: &str) -> Result<Duration, String> {
    crate::config::parse_duration(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_shows_the_budgets_parts_and_the_processs_memory_from_the_metrics() {
        let metrics = "# HELP cuzk_memory_held_bytes …\n\
                       cuzk_memory_held_bytes{part=\"params\"} 1073741824\n\
                       cuzk_memory_held_bytes{part=\"process_base\"} 10737418\n\
                       cuzk_memory_params_bytes 1084479242\n\
                       cuzk_process_memory_bytes{kind=\"resident\"} 2147483648\n\
                       cuzk_process_memory_bytes{kind=\"peak\"} 3221225472\n\
                       cuzk_process_memory_bytes{kind=\"other\"} 1\n";
        let h = HostMemory::from_metrics(metrics);
        assert_eq!(
            h.text(),
            "held besides partitions: params 1.00 GiB, process base 0.01 GiB\n\
             process: 2.00 GiB resident, peak 3.00 GiB\n"
        );
        // An older daemon without them: nothing.
        assert_eq!(
            HostMemory::from_metrics("cuzk_memory_params_bytes 5\n").text(),
            ""
        );
    }

    #[test]
    fn status_prints_each_gpus_memory_and_plans_and_nothing_for_a_cpu() {
        let m = proto::MemoryReport {
            devices: vec![
                proto::DeviceMemoryReport {
                    name: "cpu".into(),
                    memory: None,
                    plans: vec![],
                },
                proto::DeviceMemoryReport {
                    name: "cuda:0 NVIDIA H200".into(),
                    memory: Some(proto::DeviceMemoryUse {
                        budget_bytes: 16 << 30,
                        used_bytes: 12 << 30,
                        peak_bytes: 15 << 30,
                    }),
                    plans: vec![proto::MemoryPlan {
                        spec: ParamSpec {
                            kind: proto::ProofKind::PoRep,
                            sector_size: 32 << 30,
                        },
                        plan: "quotient parked, shape streamed".into(),
                        device_bytes: 8 << 30,
                        pinned_host_bytes: 1 << 30,
                    }],
                },
            ],
        };
        assert_eq!(
            memory_text(&m),
            "device 1 memory: 12.00 GiB held of 16.00 GiB (peak 15.00 GiB)\n  \
             porep 32GiB: quotient parked, shape streamed; 8.00 GiB on the device, \
             1.00 GiB page-locked on the host\n"
        );
    }
}
