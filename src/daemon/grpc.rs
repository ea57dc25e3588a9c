//! The gRPC endpoint (`[grpc]`): Curio's `cuzk.v1.ProvingEngine` on a second Unix socket.
//!
//! A thin shell over the same handler as the postcard socket: each call becomes one of
//! this protocol's requests (`proto::grpc` maps the messages) and is answered by
//! `handler::handle` with the peer's access, so the queue, priorities, journal, request ids,
//! ownership and admin rules are the same. Each connection's peer credentials are read once
//! (SO_PEERCRED) and checked against the allow lists and the per-uid connection limit as on
//! the first socket; a refused peer's calls are all answered PERMISSION_DENIED (or
//! RESOURCE_EXHAUSTED past a limit), since HTTP/2 has no frame to refuse a connection with.
//! Server reflection is served beside it (`Services`), to the same peers.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use std::time::Instant;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::Semaphore;
use tonic::{Request as GrpcRequest, Response as GrpcResponse, Status};

use super::access::Access;
use super::connection::SharedUidSlot;
use super::handler::{handle, Session};
use super::{ratelimit, Context};
use crate::engine::{JobState, Priority};
use crate::proto::grpc::pb::proving_engine_server::{ProvingEngine, ProvingEngineServer};
use crate::proto::grpc::{self, pb};
use crate::proto::{AwaitJob, JobRef, ParamSpec, Request, Response};

/// Why a connection's calls are refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Refusal {
    /// Not in `socket.allowed_uids`/`allowed_gids`.
    NotAllowed,
    /// Past `socket.max_connections` or the uid's share of it.
    TooMany,
}

/// Who is at the other end of a connection (tonic hands it to every call).
#[derive(Clone, Copy, Debug)]
struct Peer {
    uid: u32,
    refusal: Option<Refusal>,
    admin: bool,
}

/// An accepted connection, with what its peer may do and the slots it holds.
struct GrpcConn {
    stream: UnixStream,
    peer: Peer,
    _slots: Option<(SharedUidSlot, tokio::sync::OwnedSemaphorePermit)>,
    _open: OpenConnection,
}

/// Counts the connection among the daemon's open ones (the metrics) while it lives.
struct OpenConnection(Arc<Context>);

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::Relaxed);
    }
}

impl tonic::transport::server::Connected for GrpcConn {
    type ConnectInfo = Peer;
    fn connect_info(&self) -> Peer {
        self.peer
    }
}

impl AsyncRead for GrpcConn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for GrpcConn {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }
    fn poll_shutdown(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// The peer of a new connection and the slots it takes (none when refused).
fn admit(ctx: &Arc<Context>, stream: UnixStream, slots: &Arc<Semaphore>) -> Option<GrpcConn> {
    let cred = match stream.peer_cred() {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!("grpc: cannot read peer credentials, closing: {e}");
            return None;
        }
    };
    let (uid, gid) = (cred.uid(), cred.gid());
    ctx.connections.fetch_add(1, Ordering::Relaxed);
    ctx.connections_total.fetch_add(1, Ordering::Relaxed);
    let open = OpenConnection(ctx.clone());
    let access = Access::of(uid, ctx.own_uid, &ctx.config.socket.admin_uids);
    let mut peer = Peer {
        uid,
        refusal: None,
        admin: access.admin,
    };
    let taken = if !super::connection::allowed(ctx, uid, gid) {
        peer.refusal = Some(Refusal::NotAllowed);
        None
    } else {
        let limit = ctx.config.socket.per_uid_limit();
        let slot = SharedUidSlot::take(ctx, uid, limit);
        let permit = slots.clone().try_acquire_owned().ok();
        match slot.zip(permit) {
            Some(both) => Some(both),
            None => {
                peer.refusal = Some(Refusal::TooMany);
                None
            }
        }
    };
    if let Some(refusal) = peer.refusal {
        ctx.connections_refused.fetch_add(1, Ordering::Relaxed);
        if let Some(suppressed) = ratelimit::REFUSED.allow(Instant::now()) {
            tracing::warn!(uid, gid, ?refusal, suppressed, "grpc connection refused");
        }
    } else {
        tracing::info!(
            uid,
            gid,
            pid = cred.pid(),
            admin = access.admin,
            "grpc client connected"
        );
    }
    Some(GrpcConn {
        stream,
        peer,
        _slots: taken,
        _open: open,
    })
}

/// Serves `listener` until `stop` resolves, then lets the calls in progress finish.
pub async fn serve(ctx: Arc<Context>, listener: UnixListener, stop: impl Future<Output = ()>) {
    let max = usize::try_from(ctx.config.grpc.max_message_size).unwrap_or(usize::MAX);
    let slots = Arc::new(Semaphore::new(ctx.config.socket.max_connections));
    let engine = ProvingEngineServer::new(Endpoint { ctx: ctx.clone() })
        .max_decoding_message_size(max)
        .max_encoding_message_size(max);
    let (v1, v1alpha) = reflection();
    let service = Services {
        engine,
        v1,
        v1alpha,
    };
    let accept_ctx = ctx.clone();
    let incoming = futures::stream::unfold(listener, move |listener| {
        let (ctx, slots) = (accept_ctx.clone(), slots.clone());
        async move {
            loop {
                match listener.accept().await {
                    Ok((stream, _)) => {
                        if let Some(conn) = admit(&ctx, stream, &slots) {
                            return Some((Ok::<_, std::io::Error>(conn), listener));
                        }
                    }
                    Err(e) => {
                        // EMFILE and friends: back off instead of spinning.
                        tracing::error!("grpc accept failed: {e}");
                        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    }
                }
            }
        }
    });
    let served = tonic::transport::Server::builder()
        .serve_with_incoming_shutdown(service, incoming, stop)
        .await;
    if let Err(e) = served {
        tracing::error!("grpc endpoint stopped: {e}");
    }
}

/// Server reflection's two versions over the committed descriptor set; one that cannot be
/// built (a bug: tests build both) is logged and left out, and the service is served without
/// it.
#[allow(clippy::type_complexity)]
fn reflection() -> (
    Option<
        tonic_reflection::server::v1::ServerReflectionServer<
            impl tonic_reflection::server::v1::ServerReflection,
        >,
    >,
    Option<
        tonic_reflection::server::v1alpha::ServerReflectionServer<
            impl tonic_reflection::server::v1alpha::ServerReflection,
        >,
    >,
) {
    let builder = || {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(grpc::FILE_DESCRIPTOR_SET)
    };
    let kept = |version: &str, e: tonic_reflection::server::Error| {
        tracing::error!("grpc reflection {version} unavailable: {e}");
    };
    (
        builder().build_v1().map_err(|e| kept("v1", e)).ok(),
        builder()
            .build_v1alpha()
            .map_err(|e| kept("v1alpha", e))
            .ok(),
    )
}

/// The gRPC services on the socket: `cuzk.v1.ProvingEngine`, and server reflection (both
/// versions grpcurl and the like ask) so that a client can list and describe it without the
/// .proto. One dispatcher by path rather than tonic's router (which would bring axum in).
#[derive(Clone)]
struct Services<E, V1, V1a> {
    engine: E,
    /// Reflection's versions, where they could be built.
    v1: Option<V1>,
    v1alpha: Option<V1a>,
}

/// What every generated tonic server's `call` returns.
type CallFuture = tonic::codegen::BoxFuture<
    tonic::codegen::http::Response<tonic::body::Body>,
    std::convert::Infallible,
>;

impl<E, V1, V1a> tonic::codegen::Service<tonic::codegen::http::Request<tonic::body::Body>>
    for Services<E, V1, V1a>
where
    E: tonic::codegen::Service<
        tonic::codegen::http::Request<tonic::body::Body>,
        Response = tonic::codegen::http::Response<tonic::body::Body>,
        Error = std::convert::Infallible,
        Future = CallFuture,
    >,
    V1: tonic::codegen::Service<
        tonic::codegen::http::Request<tonic::body::Body>,
        Response = tonic::codegen::http::Response<tonic::body::Body>,
        Error = std::convert::Infallible,
        Future = CallFuture,
    >,
    V1a: tonic::codegen::Service<
        tonic::codegen::http::Request<tonic::body::Body>,
        Response = tonic::codegen::http::Response<tonic::body::Body>,
        Error = std::convert::Infallible,
        Future = CallFuture,
    >,
{
    type Response = tonic::codegen::http::Response<tonic::body::Body>;
    type Error = std::convert::Infallible;
    type Future = CallFuture;

    fn poll_ready(&mut self, cx: &mut TaskContext<'_>) -> Poll<Result<(), Self::Error>> {
        // Tonic's generated servers are always ready; polled all the same, as the trait asks.
        for ready in [
            self.engine.poll_ready(cx),
            self.v1
                .as_mut()
                .map_or(Poll::Ready(Ok(())), |s| s.poll_ready(cx)),
            self.v1alpha
                .as_mut()
                .map_or(Poll::Ready(Ok(())), |s| s.poll_ready(cx)),
        ] {
            match ready {
                Poll::Ready(Ok(())) => {}
                other => return other,
            }
        }
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: tonic::codegen::http::Request<tonic::body::Body>) -> CallFuture {
        let path = request.uri().path();
        let reflection_v1 = path.starts_with("/grpc.reflection.v1.ServerReflection/");
        let reflection_v1alpha = path.starts_with("/grpc.reflection.v1alpha.ServerReflection/");
        if reflection_v1 || reflection_v1alpha {
            // A peer the allow lists refuse learns nothing, as from the engine's calls.
            if let Err(refused) = admitted(request.extensions().get::<Peer>().copied()) {
                return Box::pin(std::future::ready(Ok(refused.into_http())));
            }
        }
        // A version that could not be built: the engine answers UNIMPLEMENTED.
        match (&mut self.v1, &mut self.v1alpha) {
            (Some(v1), _) if reflection_v1 => v1.call(request),
            (_, Some(v1alpha)) if reflection_v1alpha => v1alpha.call(request),
            _ => self.engine.call(request),
        }
    }
}

/// The call's peer where it may call, else the status its calls are refused with.
fn admitted(peer: Option<Peer>) -> Result<Peer, Status> {
    let peer = peer.ok_or_else(|| Status::internal("no peer credentials for this call"))?;
    match peer.refusal {
        Some(Refusal::NotAllowed) => Err(Status::permission_denied(
            "peer uid/gid not allowed (socket.allowed_uids, socket.allowed_gids)",
        )),
        Some(Refusal::TooMany) => Err(Status::resource_exhausted(
            "too many connections (socket.max_connections, max_connections_per_uid)",
        )),
        None => Ok(peer),
    }
}

/// The service: every call through `handler::handle`.
struct Endpoint {
    ctx: Arc<Context>,
}

impl Endpoint {
    /// The caller's session, or the status its connection's calls are refused with.
    fn session<T>(&self, request: &GrpcRequest<T>) -> Result<Session, Status> {
        let peer = admitted(request.extensions().get::<Peer>().copied())?;
        Ok(Session {
            hello: true,
            client: "grpc".into(),
            access: Access {
                uid: peer.uid,
                admin: peer.admin,
            },
            // Curio names a request after its sector and proves it again under that name.
            request_ids: crate::engine::RequestIds::Label,
        })
    }

    /// `request` answered by the handler. A call's wait ends when the client cancels it
    /// (tonic drops this future); the job runs on, as after a hang-up on the first socket.
    async fn ask(&self, request: Request, session: &mut Session) -> Result<Response, Status> {
        handle(request, session, &self.ctx, std::future::pending())
            .await
            .ok_or_else(|| Status::cancelled("the call ended while waiting"))
    }

    /// Queued jobs that start before job `id` (the engine's rule: class, then submission).
    fn queue_position(&self, id: u64) -> u32 {
        let jobs = self.ctx.engine.snapshots();
        let Some(me) = jobs
            .iter()
            .find(|j| j.id == id && j.state == JobState::Queued)
        else {
            return 0;
        };
        let ahead = |p: Priority, j: u64| p > me.priority || (p == me.priority && j < me.id);
        let n = jobs
            .iter()
            .filter(|j| j.state == JobState::Queued && ahead(j.priority, j.id))
            .count();
        u32::try_from(n).unwrap_or(u32::MAX)
    }

    fn resident(&self) -> Vec<(ParamSpec, u64, crate::srs::ParamsId)> {
        self.ctx
            .service
            .resident()
            .into_iter()
            .map(|r| {
                let id = r.params.id.clone();
                let spec = ParamSpec {
                    kind: id.kind.into(),
                    sector_size: id.sector_size,
                };
                (spec, r.params.resident_bytes, id)
            })
            .collect()
    }
}

fn unknown_job(id: &str) -> Status {
    Status::not_found(format!("unknown job {id:?}"))
}

#[tonic::async_trait]
impl ProvingEngine for Endpoint {
    async fn submit_proof(
        &self,
        request: GrpcRequest<pb::SubmitProofRequest>,
    ) -> Result<GrpcResponse<pb::SubmitProofResponse>, Status> {
        let mut session = self.session(&request)?;
        let submit = grpc::submit_from_pb(request.into_inner())?;
        let accepted = grpc::submit_answer(self.ask(Request::Submit(submit), &mut session).await?)?;
        Ok(GrpcResponse::new(pb::SubmitProofResponse {
            job_id: accepted.job_id.to_string(),
            queue_position: self.queue_position(accepted.job_id),
            assigned_gpu: String::new(),
        }))
    }

    async fn await_proof(
        &self,
        request: GrpcRequest<pb::AwaitProofRequest>,
    ) -> Result<GrpcResponse<pb::AwaitProofResponse>, Status> {
        let mut session = self.session(&request)?;
        let r = request.into_inner();
        let job_id = grpc::job_id(&r.job_id).ok_or_else(|| unknown_job(&r.job_id))?;
        let wait = AwaitJob {
            job_id,
            timeout_ms: (r.timeout_ms > 0).then_some(r.timeout_ms),
        };
        let answer = self.ask(Request::Await(wait), &mut session).await?;
        grpc::await_answer(&r.job_id, answer).map(GrpcResponse::new)
    }

    async fn prove(
        &self,
        request: GrpcRequest<pb::ProveRequest>,
    ) -> Result<GrpcResponse<pb::ProveResponse>, Status> {
        let mut session = self.session(&request)?;
        let submit = request
            .into_inner()
            .submit
            .ok_or_else(|| Status::invalid_argument("ProveRequest without submit"))?;
        let submit = grpc::submit_from_pb(submit)?;
        let answer = self.ask(Request::Prove(submit), &mut session).await?;
        let result = grpc::await_answer("", answer)?;
        Ok(GrpcResponse::new(pb::ProveResponse {
            result: Some(result),
        }))
    }

    async fn cancel_proof(
        &self,
        request: GrpcRequest<pb::CancelProofRequest>,
    ) -> Result<GrpcResponse<pb::CancelProofResponse>, Status> {
        let mut session = self.session(&request)?;
        let r = request.into_inner();
        let job_id = grpc::job_id(&r.job_id).ok_or_else(|| unknown_job(&r.job_id))?;
        let answer = self
            .ask(Request::Cancel(JobRef { job_id }), &mut session)
            .await?;
        grpc::cancel_answer(answer).map(GrpcResponse::new)
    }

    async fn get_status(
        &self,
        request: GrpcRequest<pb::GetStatusRequest>,
    ) -> Result<GrpcResponse<pb::GetStatusResponse>, Status> {
        self.session(&request)?;
        Ok(GrpcResponse::new(status(self)))
    }

    async fn get_metrics(
        &self,
        request: GrpcRequest<pb::GetMetricsRequest>,
    ) -> Result<GrpcResponse<pb::GetMetricsResponse>, Status> {
        self.session(&request)?;
        Ok(GrpcResponse::new(pb::GetMetricsResponse {
            prometheus_text: super::metrics::render(&self.ctx),
        }))
    }

    async fn preload_srs(
        &self,
        request: GrpcRequest<pb::PreloadSrsRequest>,
    ) -> Result<GrpcResponse<pb::PreloadSrsResponse>, Status> {
        let mut session = self.session(&request)?;
        let spec = circuit(&request.into_inner().circuit_id)?;
        let before = self.resident().iter().any(|(s, _, _)| *s == spec);
        match self.ask(Request::Preload(spec), &mut session).await? {
            Response::Params(p) => Ok(GrpcResponse::new(pb::PreloadSrsResponse {
                already_loaded: before,
                load_time_ms: p.elapsed_ms,
            })),
            Response::Error(e) => Err(grpc::status_of(&e)),
            other => Err(Status::internal(format!("unexpected answer {other:?}"))),
        }
    }

    async fn evict_srs(
        &self,
        request: GrpcRequest<pb::EvictSrsRequest>,
    ) -> Result<GrpcResponse<pb::EvictSrsResponse>, Status> {
        let mut session = self.session(&request)?;
        let spec = circuit(&request.into_inner().circuit_id)?;
        let bytes = self
            .resident()
            .into_iter()
            .find(|(s, _, _)| *s == spec)
            .map(|(_, b, _)| b);
        match self.ask(Request::Evict(spec), &mut session).await? {
            Response::Params(_) => Ok(GrpcResponse::new(pb::EvictSrsResponse {
                was_loaded: bytes.is_some(),
                freed_bytes: bytes.unwrap_or(0),
            })),
            Response::Error(e) => Err(grpc::status_of(&e)),
            other => Err(Status::internal(format!("unexpected answer {other:?}"))),
        }
    }
}

fn circuit(id: &str) -> Result<ParamSpec, Status> {
    grpc::circuit_spec(id).ok_or_else(|| {
        Status::invalid_argument(format!(
            "circuit id {id:?} is not <porep|snap|wpost|winning>-<2k|8m|512m|32g|64g>"
        ))
    })
}

/// Every client's jobs counted per kind (counts only, as Capacity answers them), the
/// devices, and the resident parameter sets with the jobs that need each.
fn status(e: &Endpoint) -> pb::GetStatusResponse {
    let ctx = &e.ctx;
    let n = |v: usize| u32::try_from(v).unwrap_or(u32::MAX);
    let jobs = ctx.engine.snapshots();
    let queues = crate::proofs::ProofKind::ALL
        .iter()
        .map(|&kind| {
            let count = |state| {
                jobs.iter()
                    .filter(|j| j.kind == kind && j.state == state)
                    .count()
            };
            pb::QueueStatus {
                proof_kind: kind.as_str().to_string(),
                pending: n(count(JobState::Queued)),
                in_progress: n(count(JobState::Running)),
            }
        })
        .collect();
    // A GPU's "total" is the budget cuzkd proves within (gpu.memory_limit where less than what was free
    // when it was opened less a margin), its "free" what of that it does not hold now; a
    // CPU device reports neither (0).
    let memory = ctx.service.device_memory();
    let gpus = ctx
        .service
        .pipeline()
        .devices
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let m = memory.get(i).and_then(|m| m.memory);
            pb::GpuStatus {
                ordinal: n(i),
                name: d.name.clone(),
                vram_total_bytes: m.map_or(0, |m| m.budget),
                vram_free_bytes: m.map_or(0, |m| m.budget.saturating_sub(m.used)),
                ..Default::default()
            }
        })
        .collect();
    let pinned = ctx.service.pinned();
    let loaded_srs = e
        .resident()
        .into_iter()
        .map(|(spec, bytes, id)| pb::SrsStatus {
            circuit_id: grpc::circuit_id(&spec),
            tier: pb::srs_status::Tier::Hot.into(),
            size_bytes: bytes,
            ref_count: n(ctx.engine.needing(&id).len()),
        })
        .collect();
    let stats = ctx.engine.stats();
    pb::GetStatusResponse {
        gpus,
        loaded_srs,
        queues,
        total_proofs_completed: stats.count(JobState::Succeeded),
        total_proofs_failed: stats.count(JobState::Failed),
        uptime_seconds: ctx.started.elapsed().as_secs(),
        pinned_memory_bytes: pinned.as_ref().map_or(0, |p| p.held),
        pinned_memory_limit_bytes: pinned.as_ref().map_or(0, |p| p.limit),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_reflection_versions_build_from_the_committed_descriptor_set() {
        let (v1, v1alpha) = reflection();
        assert!(v1.is_some(), "grpc.reflection.v1");
        assert!(v1alpha.is_some(), "grpc.reflection.v1alpha");
    }

    #[test]
    fn a_refused_or_unknown_peer_gets_a_status_and_an_allowed_one_none() {
        let peer = |refusal| Peer {
            uid: 1000,
            refusal,
            admin: false,
        };
        let code = |p| admitted(p).err().map(|s: Status| s.code());
        assert_eq!(code(None), Some(tonic::Code::Internal));
        assert_eq!(
            code(Some(peer(Some(Refusal::NotAllowed)))),
            Some(tonic::Code::PermissionDenied)
        );
        assert_eq!(
            code(Some(peer(Some(Refusal::TooMany)))),
            Some(tonic::Code::ResourceExhausted)
        );
        assert_eq!(code(Some(peer(None))), None);
    }
}
