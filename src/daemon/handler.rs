//! Answers one request: maps it onto the engine or the parameter cache.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::access::Access;
use super::{wire, Context};
use crate::engine::{JobPhase, JobSnapshot, RequestIds};
use crate::pipeline::Due;
use crate::proofs::{registry, ProofRequest};
use crate::proto::{
    self, AwaitJob, ErrorCode, ParamResidency, ParamSpec, ParamsReport, Request, ResidencyReport,
    Response, StatusReport, Submit, Welcome, PROTOCOL_VERSION,
};
use crate::srs::ParamsId;

/// Longest request id accepted (bytes).
const MAX_REQUEST_ID: usize = 256;

/// Per-connection state.
pub struct Session {
    /// Whether Hello succeeded.
    pub hello: bool,
    /// The client's name from Hello.
    pub client: String,
    /// The peer's uid (SO_PEERCRED) and what it may see and do.
    pub access: Access,
    /// What its request ids mean: keys bound to their input (the socket protocol), or
    /// labels (Curio's, on the gRPC endpoint).
    pub request_ids: RequestIds,
}

/// Answers `request`, or `None` when `hung_up` resolves while the request waits for a job
/// (Await, Prove): the client is gone, and no one is left to answer. The job runs on. Only
/// the wait watches `hung_up`: a Prove's submission always completes (and is logged).
pub async fn handle(
    request: Request,
    session: &mut Session,
    ctx: &Arc<Context>,
    hung_up: impl Future<Output = ()>,
) -> Option<Response> {
    // Ping needs no session: it is answered before Hello too, so that a liveness probe can
    // check that the daemon's event loop answers without opening one (it does not extend
    // the Hello timeout, which the connection loop keeps on its own).
    if !session.hello && !matches!(request, Request::Hello(_) | Request::Ping(_)) {
        return Some(wire::error(
            ErrorCode::HelloRequired,
            "send Hello first",
            None,
        ));
    }
    let access = session.access;
    if access.refuses(&request) {
        if let Some(suppressed) = super::ratelimit::FORBIDDEN.allow(Instant::now()) {
            tracing::info!(
                uid = access.uid,
                client = %session.client,
                suppressed,
                "request refused: parameter sets are managed by admins only"
            );
        }
        return Some(wire::error(
            ErrorCode::AdminRequired,
            "loading and dropping parameter sets is for admins only (root, the daemon's own \
             user and socket.admin_uids)",
            None,
        ));
    }
    let answer = match request {
        Request::Hello(h) => hello(h, session, ctx),
        Request::Submit(s) => submit(s, Due::Never, session, ctx)
            .await
            .unwrap_or_else(|e| e),
        Request::SubmitWithin(s) => match due_within(s.finish_within_ms) {
            Some(due) => submit(s.submit, due, session, ctx)
                .await
                .unwrap_or_else(|e| e),
            None => too_long(s.finish_within_ms),
        },
        Request::Await(a) => return await_job(a, access, ctx, hung_up).await,
        Request::Prove(s) => return prove(s, Due::Never, session, ctx, hung_up).await,
        Request::ProveWithin(s) => match due_within(s.finish_within_ms) {
            Some(due) => return prove(s.submit, due, session, ctx, hung_up).await,
            None => too_long(s.finish_within_ms),
        },
        Request::Cancel(j) => cancel(j.job_id, access, ctx),
        Request::Status(q) => status(q.job_id, access, ctx),
        Request::Metrics => Response::Metrics(super::metrics::render(ctx)),
        Request::Preload(spec) => params(params_of_spec(&spec), true, ctx).await,
        Request::Evict(spec) => params(params_of_spec(&spec), false, ctx).await,
        Request::PreloadProof(p) => params(params_of_proof(p), true, ctx).await,
        Request::EvictProof(p) => params(params_of_proof(p), false, ctx).await,
        Request::Residency => Response::Residency(residency(ctx)),
        Request::Pipeline => Response::Pipeline(pipeline(ctx)),
        Request::Devices => Response::Devices(devices(ctx)),
        Request::Jobs(q) => Response::Jobs(jobs_page(q, access, ctx)),
        Request::Ping(p) => Response::Pong(proto::Pong { nonce: p.nonce }),
        Request::Lookup(q) => lookup(&q.request_id, access, ctx),
        Request::Info => Response::Info(info(ctx)),
        Request::Capacity(q) => Response::Capacity(capacity(q, ctx)),
        Request::Health => Response::Health(health(ctx)),
        Request::DeviceMemory => Response::DeviceMemory(device_memory(ctx)),
        Request::Deadlines(q) => Response::Deadlines(deadlines(q, access, ctx)),
        // The connection reads a passed input itself (`connection::passed_input`); one that
        // reaches here came another way, with no descriptor.
        Request::SubmitFd(_) | Request::ProveFd(_) => wire::error(
            ErrorCode::InvalidInput,
            "SubmitFd and ProveFd take their input from a file descriptor passed on the Unix \
             socket",
            None,
        ),
        // The connection serves a Watch itself (it pushes events on the socket:
        // `watchers::serve`); without one to push on, a Watch is an Await without a timeout.
        Request::Watch(j) => {
            let wait = AwaitJob {
                job_id: j.job_id,
                timeout_ms: None,
            };
            return await_job(wait, access, ctx, hung_up).await;
        }
    };
    Some(answer)
}

fn hello(h: proto::Hello, session: &mut Session, ctx: &Context) -> Response {
    if h.protocol_version != PROTOCOL_VERSION {
        return wire::error(
            ErrorCode::UnsupportedVersion,
            format!(
                "protocol version {} is not supported; this daemon speaks version {PROTOCOL_VERSION}",
                h.protocol_version
            ),
            None,
        );
    }
    session.hello = true;
    session.client = crate::engine::bounded(&h.client_name, 128);
    tracing::debug!(
        client = %session.client,
        uid = session.access.uid,
        admin = session.access.admin,
        "hello"
    );
    Response::Welcome(Welcome {
        protocol_version: PROTOCOL_VERSION,
        server_version: format!("cuzkd {}", env!("CARGO_PKG_VERSION")),
        backend: ctx.backend.clone(),
        proof_kinds: proto::ProofKind::ALL.to_vec(),
        max_frame_size: ctx.config.protocol.max_frame_size,
        max_queued: ctx.config.queue.max_queued.min(u32::MAX as usize) as u32,
        workers: ctx.workers.min(u32::MAX as usize) as u32,
    })
}

/// The refusal of a request id that no Submit would accept (empty, or too long).
fn request_id_refusal(request_id: &str) -> Option<Response> {
    (request_id.is_empty() || request_id.len() > MAX_REQUEST_ID).then(|| {
        wire::error(
            ErrorCode::InvalidInput,
            format!("request id must be 1 to {MAX_REQUEST_ID} bytes"),
            None,
        )
    })
}

/// Submits `s` due at `due` and waits for its job (Prove, ProveWithin); `None` when the
/// client hangs up meanwhile.
async fn prove(
    s: Submit,
    due: Due,
    session: &Session,
    ctx: &Arc<Context>,
    hung_up: impl Future<Output = ()>,
) -> Option<Response> {
    match submit(s, due, session, ctx).await {
        Ok(Response::Accepted(a)) => {
            let wait = AwaitJob {
                job_id: a.job_id,
                timeout_ms: None,
            };
            await_job(wait, session.access, ctx, hung_up).await
        }
        Ok(other) | Err(other) => Some(other),
    }
}

/// The longest deadline a SubmitWithin may name.
const MAX_FINISH_WITHIN: Duration = Duration::from_secs(30 * 24 * 3600);

/// When a job asked for within `ms` milliseconds from now is due; `None` past
/// [`MAX_FINISH_WITHIN`].
fn due_within(ms: u64) -> Option<Due> {
    let within = Duration::from_millis(ms);
    (within <= MAX_FINISH_WITHIN).then(|| Due::At(Instant::now() + within))
}

/// The refusal of a deadline past [`MAX_FINISH_WITHIN`].
fn too_long(ms: u64) -> Response {
    wire::error(
        ErrorCode::InvalidInput,
        format!(
            "finish_within_ms {ms} is longer than {} days",
            MAX_FINISH_WITHIN.as_secs() / 86_400
        ),
        None,
    )
}

/// Queues a job due at `due`; `Err` carries the error response.
async fn submit(
    s: Submit,
    due: Due,
    session: &Session,
    ctx: &Arc<Context>,
) -> Result<Response, Response> {
    if let Some(refusal) = s.request_id.as_deref().and_then(request_id_refusal) {
        return Err(refusal);
    }
    let mut request = ProofRequest::from(s.input);
    let (miner, sector) = match &request {
        ProofRequest::PoRep(r) => (Some(r.miner_id), r.sector_number),
        _ => (None, None),
    };
    let kind = request.kind();
    let priority = s.priority.map(wire::priority_from_wire);
    let request_id = s.request_id.clone();
    let owner = session.access.uid;
    let ids = session.request_ids;
    let engine = ctx.engine.clone();
    // Checking and hashing a large C1 output takes a while: keep it off the runtime. So does
    // parsing a JSON input whose proof type is an integer id, to put its name in its place.
    let submitted =
        tokio::task::spawn_blocking(move || -> Result<_, proto::RegisteredProofError> {
            named_proof(&mut request)?;
            Ok(engine.submit_as(owner, request, priority, request_id, ids, due))
        })
        .await
        .map_err(|e| {
            wire::error(
                ErrorCode::Internal,
                format!("submit task failed: {e}"),
                None,
            )
        })?
        .map_err(|e: proto::RegisteredProofError| {
            let why = crate::engine::bounded(&e.to_string(), crate::engine::MAX_MESSAGE);
            refused_submission(kind, &session.client, &why);
            wire::error(ErrorCode::InvalidInput, why, None)
        })?
        .map_err(|e| {
            let why = crate::engine::bounded(&e.to_string(), crate::engine::MAX_MESSAGE);
            refused_submission(kind, &session.client, &why);
            wire::submit_error(&e)
        })?;
    if submitted.raised {
        tracing::info!(
            cuzk_job_id = submitted.id,
            proof_kind = %kind,
            job_priority = submitted.priority.as_str(),
            client = %session.client,
            "queued job's priority raised by a resubmission"
        );
    } else if !submitted.existing {
        tracing::info!(
            cuzk_job_id = submitted.id,
            proof_kind = %kind,
            miner,
            sector,
            job_priority = submitted.priority.as_str(),
            request_id = s.request_id.as_deref(),
            client = %session.client,
            uid = owner,
            "job accepted"
        );
    }
    Ok(Response::Accepted(proto::Accepted {
        job_id: submitted.id,
        existing: submitted.existing,
        state: wire::state_to_wire(submitted.state),
        priority: wire::priority_to_wire(submitted.priority),
    }))
}

/// Replaces an integer `registered_proof` in a JSON input by the proof's name (see
/// [`proto::input_with_proof_name`]); leaves every other input as it is.
fn named_proof(request: &mut ProofRequest) -> Result<(), proto::RegisteredProofError> {
    let kind = proto::ProofKind::from(request.kind());
    if let ProofRequest::SnapDeals { input }
    | ProofRequest::WindowPoSt { input }
    | ProofRequest::WinningPoSt { input } = request
    {
        if let Some(named) = proto::input_with_proof_name(kind, input)? {
            *input = named;
        }
    }
    Ok(())
}

/// The snapshot of job `id`, if `access` sees it: to a peer that does not, another user's
/// job is as unknown as one that never existed.
pub(super) fn visible_job(id: u64, access: Access, ctx: &Context) -> Option<JobSnapshot> {
    ctx.engine.snapshot(id).filter(|s| access.sees(s.owner))
}

/// The answer about a job that does not exist, or that the peer may not see.
pub(super) fn unknown_job(id: u64) -> Response {
    wire::error(ErrorCode::UnknownJob, format!("unknown job {id}"), Some(id))
}

/// The job's result, `Pending` after `a.timeout_ms`, or `None` once `hung_up` resolves.
async fn await_job(
    a: AwaitJob,
    access: Access,
    ctx: &Context,
    hung_up: impl Future<Output = ()>,
) -> Option<Response> {
    let unknown = || unknown_job(a.job_id);
    // A job's owner never changes: seen now, seen until it expires.
    if visible_job(a.job_id, access, ctx).is_none() {
        return Some(unknown());
    }
    let Some(mut rx) = ctx.engine.watch(a.job_id) else {
        return Some(unknown());
    };
    let finished = rx.wait_for(|p| matches!(p, JobPhase::Finished(_)));
    let limit = a.timeout_ms.map(Duration::from_millis);
    let waited = tokio::select! {
        r = async {
            match limit {
                None => Ok(finished.await.map(|p| p.clone())),
                Some(t) => tokio::time::timeout(t, finished).await.map(|r| r.map(|p| p.clone())),
            }
        } => r,
        _ = hung_up => {
            // The job is the queue's, not the connection's: it runs on, for an Await on
            // another connection or a resubmission under its request id.
            tracing::debug!(cuzk_job_id = a.job_id, "client hung up while waiting for the job");
            return None;
        }
    };
    Some(match waited {
        Ok(Ok(JobPhase::Finished(result))) => wire::result(a.job_id, &result),
        Err(_elapsed) => match ctx.engine.snapshot(a.job_id) {
            Some(snap) => Response::Pending(wire::job_info(&snap)),
            None => unknown(),
        },
        _ => unknown(),
    })
}

fn cancel(job: u64, access: Access, ctx: &Context) -> Response {
    if visible_job(job, access, ctx).is_none() {
        return unknown_job(job);
    }
    match ctx.engine.cancel(job) {
        Ok(was_running) => {
            tracing::info!(cuzk_job_id = job, was_running, "job cancelled");
            Response::Cancelled(proto::Cancelled {
                job_id: job,
                was_running,
            })
        }
        Err(crate::engine::CancelError::UnknownJob(_)) => unknown_job(job),
        Err(e @ crate::engine::CancelError::AlreadyFinished(..)) => {
            wire::error(ErrorCode::JobFinished, e.to_string(), Some(job))
        }
    }
}

/// The newest known job the peer submitted under `request_id`, as Status reports one job;
/// for an admin without one, the newest of any user's.
fn lookup(request_id: &str, access: Access, ctx: &Context) -> Response {
    if let Some(refusal) = request_id_refusal(request_id) {
        return refusal;
    }
    let own = ctx.engine.lookup(request_id, Some(access.uid));
    let found = match own {
        None if access.admin => ctx.engine.lookup(request_id, None),
        own => own,
    };
    match found {
        Some(snap) => Response::Job(wire::job_info(&snap)),
        None => wire::error(
            ErrorCode::UnknownJob,
            format!(
                "no known job has request id {request_id:?} (never submitted, or its result expired)"
            ),
            None,
        ),
    }
}

/// The daemon's status with the jobs the peer sees (an admin: all; others: their own). The
/// counters are the daemon's, as in the metrics.
fn status(job: Option<u64>, access: Access, ctx: &Context) -> Response {
    let jobs = match job {
        Some(id) => match visible_job(id, access, ctx) {
            Some(s) => vec![wire::job_info(&s)],
            None => return unknown_job(id),
        },
        None => ctx
            .engine
            .snapshots()
            .iter()
            .filter(|s| access.sees(s.owner))
            .map(wire::job_info)
            .collect(),
    };
    let stats = ctx.engine.stats();
    use crate::engine::JobState as S;
    let report = StatusReport {
        server_version: format!("cuzkd {}", env!("CARGO_PKG_VERSION")),
        backend: ctx.backend.clone(),
        uptime_s: ctx.started.elapsed().as_secs(),
        queued: stats.queued.min(u32::MAX as usize) as u32,
        running: stats.running.min(u32::MAX as usize) as u32,
        succeeded: stats.count(S::Succeeded),
        failed: stats.count(S::Failed),
        cancelled: stats.count(S::Cancelled),
        jobs,
        params_loaded: loaded(ctx),
    };
    Response::Status(fit_jobs(
        report,
        ctx.config.protocol.max_frame_size as usize,
    ))
}

/// The jobs the peer sees after `q.after`, as many as asked for and fit in a frame, and the
/// count of the rest.
fn jobs_page(q: proto::JobsQuery, access: Access, ctx: &Context) -> proto::JobsPage {
    let all: Vec<proto::JobInfo> = ctx
        .engine
        .snapshots()
        .iter()
        .filter(|s| access.sees(s.owner) && q.after.is_none_or(|after| s.id > after))
        .map(wire::job_info)
        .collect();
    let wanted = match usize::try_from(q.max) {
        Ok(0) | Err(_) => all.len(),
        Ok(n) => n.min(all.len()),
    };
    let page = |n: usize| proto::JobsPage {
        jobs: all[..n].to_vec(),
        more: (all.len() - n) as u64,
    };
    let fits = |n: usize| {
        proto::encode_payload(&Response::Jobs(page(n)))
            .is_ok_and(|p| p.len() <= ctx.config.protocol.max_frame_size as usize)
    };
    page(most_that_fit(wanted, fits))
}

/// The largest n ≤ `wanted` for which `fits(n)` holds, where `fits` holds up to some n and not
/// beyond (0 where none fits): how many entries of a list go in one frame.
fn most_that_fit(wanted: usize, fits: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, wanted);
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    lo
}

/// The jobs with a deadline the peer sees (as [`jobs_page`]), earliest due first: at most
/// `q.max` ([`proto::MAX_DEADLINES`] at most), as many of those as fit in a frame, and the
/// count of the rest.
fn deadlines(q: proto::DeadlinesQuery, access: Access, ctx: &Context) -> proto::DeadlinesReport {
    let all: Vec<proto::DeadlineInfo> = ctx
        .engine
        .deadlines()
        .iter()
        .filter(|v| access.sees(v.owner))
        .map(wire::deadline_info)
        .collect();
    let cap = match q.max {
        0 => proto::MAX_DEADLINES,
        n => n.min(proto::MAX_DEADLINES),
    };
    let wanted = usize::try_from(cap).map_or(all.len(), |n| n.min(all.len()));
    let report = |n: usize| proto::DeadlinesReport {
        jobs: all[..n].to_vec(),
        more: (all.len() - n) as u64,
    };
    let fits = |n: usize| {
        proto::encode_payload(&Response::Deadlines(report(n)))
            .is_ok_and(|p| p.len() <= ctx.config.protocol.max_frame_size as usize)
    };
    report(most_that_fit(wanted, fits))
}

/// `report` with as many of its jobs as fit in a frame of `max` bytes: the queued and
/// running ones first, then finished ones newest first; the list stays in job id order.
fn fit_jobs(mut report: StatusReport, max: usize) -> StatusReport {
    let size = |r: &StatusReport| {
        proto::encode_payload(&Response::Status(r.clone())).map_or(usize::MAX, |p| p.len())
    };
    if size(&report) <= max {
        return report;
    }
    let mut jobs = std::mem::take(&mut report.jobs);
    // Keep order: unfinished first, then the newest.
    jobs.sort_by_key(|j| {
        let finished = !matches!(j.state, proto::JobState::Queued | proto::JobState::Running);
        (finished, std::cmp::Reverse(j.job_id))
    });
    let with = |n: usize| {
        let mut r = report.clone();
        r.jobs = jobs[..n].to_vec();
        r.jobs.sort_by_key(|j| j.job_id);
        r
    };
    // The largest count that fits (0 always does: the rest of a report is small).
    let (mut lo, mut hi) = (0, jobs.len());
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if size(&with(mid)) <= max {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    with(lo)
}

fn loaded(ctx: &Context) -> Vec<ParamSpec> {
    ctx.service
        .srs()
        .loaded()
        .into_iter()
        .map(|p| ParamSpec {
            kind: p.id.kind.into(),
            sector_size: p.id.sector_size,
        })
        .collect()
}

/// The backend's kind and the queue's shares, from the start-up choices (no lock).
fn info(ctx: &Context) -> proto::InfoReport {
    let n = |v: usize| u32::try_from(v).unwrap_or(u32::MAX);
    let devices = ctx.devices;
    proto::InfoReport {
        backend_kind: if devices.gpus > 0 {
            proto::BackendKind::Gpu
        } else {
            proto::BackendKind::Cpu
        },
        gpu_devices: n(devices.gpus),
        cpu_devices: n(devices.cpus),
        critical_reserve: n(ctx.config.queue.critical_reserve),
        result_retention_ms: super::ms(ctx.config.queue.result_retention),
    }
}

/// The queue per class and the estimate for a job of `q.kind` at `q.priority`, with the
/// memory budget left (two short locks; never waits for a proof).
fn capacity(q: proto::CapacityQuery, ctx: &Context) -> proto::CapacityReport {
    let c = ctx
        .engine
        .capacity(q.kind.into(), q.priority.map(wire::priority_from_wire));
    let p = ctx.service.pipeline();
    let n = |v: usize| u32::try_from(v).unwrap_or(u32::MAX);
    let budget_free_bytes = if p.budget_bytes == u64::MAX {
        u64::MAX
    } else {
        p.budget_bytes
            .saturating_sub(p.reserved_bytes.saturating_add(p.params_bytes))
    };
    proto::CapacityReport {
        priority: wire::priority_to_wire(c.priority),
        queued: c.queued.iter().copied().map(n).collect(),
        running: c.running.iter().copied().map(n).collect(),
        workers: n(c.workers),
        queue_room: n(c.queue_room),
        budget_free_bytes,
        estimated_start_ms: c.estimated_start.map(super::ms),
        estimated_proof_ms: c.estimated_proof.map(super::ms),
        measured_jobs: u32::try_from(c.measured_jobs).unwrap_or(u32::MAX),
    }
}

/// The devices' health (a short lock; never waits for a proof).
fn health(ctx: &Context) -> proto::HealthReport {
    proto::HealthReport {
        devices: ctx
            .service
            .health()
            .into_iter()
            .map(proto::DeviceHealth::from)
            .collect(),
    }
}

/// Each device's memory and the resident sets' plans on it (counters only: never waits for
/// a device or a proof).
fn device_memory(ctx: &Context) -> proto::MemoryReport {
    let devices = ctx
        .service
        .device_memory()
        .into_iter()
        .map(|d| proto::DeviceMemoryReport {
            name: d.name,
            memory: d.memory.map(|m| proto::DeviceMemoryUse {
                budget_bytes: m.budget,
                used_bytes: m.used,
                peak_bytes: m.peak,
            }),
            plans: d
                .plans
                .into_iter()
                .map(|p| proto::MemoryPlan {
                    spec: ParamSpec {
                        kind: p.id.kind.into(),
                        sector_size: p.id.sector_size,
                    },
                    plan: p.plan,
                    device_bytes: p.device_bytes,
                    pinned_host_bytes: p.host_bytes,
                })
                .collect(),
        })
        .collect();
    proto::MemoryReport { devices }
}

/// The stages' counters (a short lock; never waits for a proof).
fn pipeline(ctx: &Context) -> proto::PipelineReport {
    let p = ctx.service.pipeline();
    let n = |v: usize| u32::try_from(v).unwrap_or(u32::MAX);
    proto::PipelineReport {
        synthesis_threads: n(p.synthesis_threads),
        waiting: n(p.waiting),
        synthesizing: n(p.synthesizing),
        device_queued: n(p.device_queued),
        device_running: n(p.device_running),
        budget_bytes: p.budget_bytes,
        reserved_bytes: p.reserved_bytes,
        params_bytes: p.params_bytes,
        device_busy_ms: super::ms(p.device_busy),
        partitions_proved: p.partitions_proved,
    }
}

/// The devices: placement, counters and what each holds of the resident sets (counters
/// only, as for Residency).
fn devices(ctx: &Context) -> proto::DevicesReport {
    let service = &ctx.service;
    let stats = service.pipeline();
    let resident = service.resident();
    let placement = service.placement();
    let devices = stats
        .devices
        .iter()
        .enumerate()
        .map(|(i, d)| proto::DeviceReport {
            name: d.name.clone(),
            cpus: placement
                .device_cpus(i)
                .map(crate::topology::format_cpulist)
                .unwrap_or_default(),
            running: u32::try_from(d.running).unwrap_or(u32::MAX),
            busy_ms: super::ms(d.busy),
            partitions_proved: d.partitions_proved,
            params: resident
                .iter()
                .map(|r| ParamResidency {
                    spec: ParamSpec {
                        kind: r.params.id.kind.into(),
                        sector_size: r.params.id.sector_size,
                    },
                    host_bytes: r.params.resident_bytes,
                    device_bytes: r.per_device.get(i).copied().unwrap_or(0),
                })
                .collect(),
        })
        .collect();
    proto::DevicesReport {
        placement: placement.to_string(),
        devices,
    }
}

/// Reads counters only: never waits for a running proof or a set being loaded.
fn residency(ctx: &Context) -> ResidencyReport {
    let params = ctx
        .service
        .resident()
        .into_iter()
        .map(|r| ParamResidency {
            spec: ParamSpec {
                kind: r.params.id.kind.into(),
                sector_size: r.params.id.sector_size,
            },
            host_bytes: r.params.resident_bytes,
            device_bytes: r.device_bytes(),
        })
        .collect();
    ResidencyReport { params }
}

/// The parameter set of a kind and sector size; `Err`: why none.
fn params_of_spec(spec: &ParamSpec) -> Result<ParamsId, String> {
    registry::params_id(spec.kind.into(), spec.sector_size).map_err(|e| e.to_string())
}

/// The parameter set of a proof named by its Filecoin id; `Err`: why none.
fn params_of_proof(proof: proto::RegisteredProof) -> Result<ParamsId, String> {
    let registered = proof.resolve().map_err(|e| e.to_string())?;
    registered
        .params_id()
        .map_err(|e| format!("{}: {e}", registered.name()))
}

/// The refusal of an Evict of `id` while queued or running jobs need it (they would load it
/// again, or fail on a GPU short of memory for a second copy): `InUse`, naming the first.
fn needed(id: &ParamsId, spec: &ParamSpec, ctx: &Context) -> Option<Response> {
    let jobs = ctx.engine.needing(id);
    let first = *jobs.first()?;
    const LISTED: usize = 8;
    let mut listed = jobs
        .iter()
        .take(LISTED)
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    if jobs.len() > LISTED {
        listed.push_str(", …");
    }
    tracing::info!(
        proof_kind = %spec.kind,
        sector_size = spec.sector_size,
        jobs = jobs.len(),
        "evict refused: queued or running jobs need the set"
    );
    Some(wire::error(
        ErrorCode::InUse,
        format!(
            "parameter set {} {} is needed by {} queued or running job(s) ({listed}); evict it \
             once they have finished, or cancel them",
            spec.kind,
            spec.sector_size,
            jobs.len()
        ),
        Some(first),
    ))
}

/// Loads or drops the parameter set `id` (`Err`: an invalid request, why).
async fn params(id: Result<ParamsId, String>, load: bool, ctx: &Arc<Context>) -> Response {
    let start = Instant::now();
    let id = match id {
        Ok(id) => id,
        Err(e) => return wire::error(ErrorCode::InvalidInput, e, None),
    };
    let spec = ParamSpec {
        kind: id.kind.into(),
        sector_size: id.sector_size,
    };
    if !load {
        if let Some(refusal) = needed(&id, &spec, ctx) {
            return refusal;
        }
    }
    let service = ctx.service.clone();
    let outcome = tokio::task::spawn_blocking(move || {
        if load {
            service
                .preload(&id)
                .map(|_| ())
                .map_err(|e| (ErrorCode::ParamsUnavailable, e.to_string()))
        } else {
            // The host copy and the backend's prepared copy (its device memory) together;
            // refused while a proof holds the set or it is being loaded.
            service
                .evict(&id)
                .map(|_| ())
                .map_err(|e| (ErrorCode::InUse, e.to_string()))
        }
    })
    .await;
    match outcome {
        Ok(Ok(())) => {
            tracing::info!(proof_kind = %spec.kind, sector_size = spec.sector_size, preload = load, "parameters updated");
            Response::Params(ParamsReport {
                loaded: loaded(ctx),
                elapsed_ms: start.elapsed().as_millis().min(u64::MAX as u128) as u64,
            })
        }
        Ok(Err((code, e))) => {
            tracing::info!(
                proof_kind = %spec.kind,
                sector_size = spec.sector_size,
                preload = load,
                "parameters not updated: {e}"
            );
            wire::error(code, e, None)
        }
        Err(e) => wire::error(
            ErrorCode::Internal,
            format!("parameter task failed: {e}"),
            None,
        ),
    }
}

/// Logs a refused submission, rate limited ([`super::ratelimit::SUBMISSION`]).
fn refused_submission(kind: impl std::fmt::Display, client: &str, why: &str) {
    if let Some(suppressed) = super::ratelimit::SUBMISSION.allow(Instant::now()) {
        tracing::warn!(proof_kind = %kind, client = %client, suppressed, "submission refused: {why}");
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn most_that_fit_is_the_largest_count_that_fits() {
        for limit in 0..20 {
            for wanted in 0..20 {
                let n = super::most_that_fit(wanted, |n| n <= limit);
                assert_eq!(n, wanted.min(limit), "wanted {wanted}, {limit} fit");
            }
        }
    }
}
