//! The gRPC endpoint (`[grpc]`): Curio's `cuzk.v1.ProvingEngine` on a second Unix socket.
//!
//! A thin shell over the same handler as the postcard socket: each call becomes one of
//! this protocol's requests (`proto::grpc` maps the messages) and is answered by
//! `handler::handle` with the peer's access, so the queue, priorities, journal, request ids,
//! ownership and admin rules are the same. Each connection is admitted when it is accepted,
//! by the front door both sockets share (`admission`: peer credentials, allow lists, one
//! connection limit), before a byte of it is read; a refused one gets a GOAWAY with the
//! reason and is closed at once. An admitted connection is closed when it makes no call
//! within `protocol.hello_timeout`, or none for `protocol.idle_timeout` after its last
//! (`GrpcConn`); it may have [`MAX_STREAMS`] calls open at once, and its request messages
//! reach the decoder whole, their bytes bounded as they arrive (`Messages`). Server
//! reflection is served beside the engine (`Services`), to the same peers.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use http_body::Frame;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::OwnedSemaphorePermit;
use tonic::{Request as GrpcRequest, Response as GrpcResponse, Status};

use super::access::Access;
use super::admission::{self, AcceptBackoff, Admitted, Socket};
use super::handler::{handle, Session};
use super::{ratelimit, Context};
use crate::engine::{JobState, Priority};
use crate::proto::grpc::pb::proving_engine_server::{ProvingEngine, ProvingEngineServer};
use crate::proto::grpc::{self, pb};
use crate::proto::{AwaitJob, JobRef, ParamSpec, Request, Response, Submit, SubmitWithin};

/// Calls (HTTP/2 streams) one connection may have open at once, advertised in the server's
/// SETTINGS (SETTINGS_MAX_CONCURRENT_STREAMS); a client opening more has them refused
/// (REFUSED_STREAM), which gRPC clients retry.
pub const MAX_STREAMS: u32 = 128;

/// The largest header block a call may send (SETTINGS_MAX_HEADER_LIST_SIZE).
const MAX_HEADER_LIST: u32 = 16 << 10;

/// The bytes of a call's message it may have buffered before they count against
/// `protocol.input_memory` (only against the connection's own bound): the small calls
/// (GetStatus, AwaitProof, ...) are served whatever large ones hold.
const SMALL_MESSAGE: usize = 16 << 10;

/// The length prefix of a gRPC message: a compression flag and a big-endian u32 length.
const MESSAGE_HEADER: usize = 5;

/// Who is at the other end of a connection (tonic hands it to every call), and the state of
/// its calls.
#[derive(Clone, Debug)]
struct Peer {
    uid: u32,
    admin: bool,
    calls: Arc<Calls>,
}

/// A connection's calls, for its hello and idle deadlines and its memory bound.
#[derive(Debug)]
struct Calls {
    /// Calls in progress.
    active: AtomicUsize,
    /// Whether a call was ever made (the gRPC counterpart of Hello).
    started: AtomicBool,
    /// When the last call ended (or the connection was accepted).
    last_end: Mutex<tokio::time::Instant>,
    /// Message bytes buffered by the connection's calls, not yet handed to the decoder.
    buffered: AtomicUsize,
    /// The bound on `buffered`: one message of the largest size.
    max_buffered: usize,
}

impl Calls {
    fn new(max_buffered: usize) -> Self {
        Self {
            active: AtomicUsize::new(0),
            started: AtomicBool::new(false),
            last_end: Mutex::new(tokio::time::Instant::now()),
            buffered: AtomicUsize::new(0),
            max_buffered,
        }
    }

    /// What the connection's deadline says at `now`: close it (and why), or look again at
    /// the instant returned.
    fn expired(
        &self,
        now: tokio::time::Instant,
        accepted: tokio::time::Instant,
        hello: Duration,
        idle: Option<Duration>,
    ) -> Result<tokio::time::Instant, &'static str> {
        // A call in progress is never idle; looked at again a hello timeout later.
        if self.active.load(Ordering::Acquire) > 0 {
            return Ok(now + hello);
        }
        if !self.started.load(Ordering::Acquire) {
            let deadline = accepted + hello;
            return if now >= deadline {
                Err("no call within protocol.hello_timeout")
            } else {
                Ok(deadline)
            };
        }
        let Some(idle) = idle else {
            return Ok(now + hello);
        };
        let last = *self.last_end.lock().unwrap_or_else(PoisonError::into_inner);
        let deadline = last + idle;
        if now >= deadline {
            Err("idle past protocol.idle_timeout")
        } else {
            Ok(deadline)
        }
    }
}

/// Counts a call among its connection's active ones while it lives.
struct ActiveCall(Arc<Calls>);

impl ActiveCall {
    fn start(calls: Arc<Calls>) -> Self {
        calls.started.store(true, Ordering::Release);
        calls.active.fetch_add(1, Ordering::AcqRel);
        Self(calls)
    }
}

impl Drop for ActiveCall {
    fn drop(&mut self) {
        *self
            .0
            .last_end
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = tokio::time::Instant::now();
        self.0.active.fetch_sub(1, Ordering::AcqRel);
    }
}

/// An admitted connection: its peer, the slots it holds, and its hello/idle deadline. When
/// the deadline passes with no call in progress, reads end (end of stream) and the HTTP/2
/// connection closes, giving its slots back.
struct GrpcConn {
    stream: UnixStream,
    peer: Peer,
    _admitted: Admitted,
    accepted: tokio::time::Instant,
    hello: Duration,
    idle: Option<Duration>,
    timer: Pin<Box<tokio::time::Sleep>>,
    closed: bool,
}

impl tonic::transport::server::Connected for GrpcConn {
    type ConnectInfo = Peer;
    fn connect_info(&self) -> Peer {
        self.peer.clone()
    }
}

impl AsyncRead for GrpcConn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        while !this.closed && this.timer.as_mut().poll(cx).is_ready() {
            let now = tokio::time::Instant::now();
            match this
                .peer
                .calls
                .expired(now, this.accepted, this.hello, this.idle)
            {
                Ok(next) => this.timer.as_mut().reset(next),
                Err(why) => {
                    if let Some(suppressed) = ratelimit::MISBEHAVED.allow(Instant::now()) {
                        tracing::info!(uid = this.peer.uid, suppressed, "grpc: closing: {why}");
                    }
                    this.closed = true;
                }
            }
        }
        if this.closed {
            // End of stream: hyper closes the connection.
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.stream).poll_read(cx, buf)
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

/// An admitted connection (the front door, `admission::accept`, closed the refused ones),
/// its hello deadline starting now.
fn connection(ctx: &Context, stream: UnixStream, admitted: Admitted) -> GrpcConn {
    let protocol = &ctx.config.protocol;
    let max_buffered = usize::try_from(ctx.config.grpc.max_message_size)
        .unwrap_or(usize::MAX)
        .saturating_add(MESSAGE_HEADER);
    let accepted = tokio::time::Instant::now();
    GrpcConn {
        peer: Peer {
            uid: admitted.uid,
            admin: admitted.access.admin,
            calls: Arc::new(Calls::new(max_buffered)),
        },
        stream,
        _admitted: admitted,
        accepted,
        hello: protocol.hello_timeout,
        idle: protocol.idle_timeout,
        timer: Box::pin(tokio::time::sleep_until(accepted + protocol.hello_timeout)),
        closed: false,
    }
}

/// Serves `listener` until `stop` resolves, then lets the calls in progress finish.
pub async fn serve(ctx: Arc<Context>, listener: UnixListener, stop: impl Future<Output = ()>) {
    let max = usize::try_from(ctx.config.grpc.max_message_size).unwrap_or(usize::MAX);
    let engine = ProvingEngineServer::new(Endpoint { ctx: ctx.clone() })
        .max_decoding_message_size(max)
        .max_encoding_message_size(max);
    let (v1, v1alpha) = reflection();
    let service = Services {
        engine,
        v1,
        v1alpha,
        ctx: ctx.clone(),
        max_message: max,
    };
    let accept_ctx = ctx.clone();
    let incoming = futures::stream::unfold(
        (listener, AcceptBackoff::default()),
        move |(listener, mut backoff)| {
            let ctx = accept_ctx.clone();
            async move {
                let (stream, admitted) =
                    admission::accept(&ctx, &listener, Socket::Grpc, &mut backoff).await;
                let conn = connection(&ctx, stream, admitted);
                Some((Ok::<_, std::io::Error>(conn), (listener, backoff)))
            }
        },
    );
    let served = tonic::transport::Server::builder()
        .max_concurrent_streams(MAX_STREAMS)
        .http2_max_header_list_size(MAX_HEADER_LIST)
        .serve_with_incoming_shutdown(service, incoming, stop)
        .await;
    if let Err(e) = served {
        tracing::error!("grpc endpoint stopped: {e}");
    }
}

/// A call's request body as the decoder sees it: whole messages only. The bytes of a
/// message are gathered here as they arrive and handed on once all of it is in, so that the
/// decoder, which reserves a message's claimed length when it reads its length prefix, only
/// reserves what has arrived. Each byte gathered counts against the connection's bound (one
/// message of `grpc.max_message_size`) and, past the first [`SMALL_MESSAGE`] bytes, against
/// `protocol.input_memory`; a message that does not fit ends the call RESOURCE_EXHAUSTED.
/// A length prefix over `grpc.max_message_size` is handed on at once, for the decoder to
/// refuse (OUT_OF_RANGE) before anything is reserved. A request that has not arrived whole
/// within `protocol.idle_timeout` ends DEADLINE_EXCEEDED.
struct Messages {
    inner: tonic::body::Body,
    ctx: Arc<Context>,
    calls: Arc<Calls>,
    max_message: usize,
    pending: BytesMut,
    /// Bytes of `pending` counted against the connection.
    charged: usize,
    /// Their room in `protocol.input_memory`.
    room: Option<OwnedSemaphorePermit>,
    /// Hand `pending` on as it is (an oversized prefix, or the body ended).
    pass: bool,
    ended: bool,
    /// When the request must have arrived whole (`protocol.idle_timeout` after its headers,
    /// as a frame in progress on the first socket); none where that is off.
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Messages {
    fn new(inner: tonic::body::Body, ctx: Arc<Context>, calls: Arc<Calls>, max: usize) -> Self {
        let ctx_idle = ctx.config.protocol.idle_timeout;
        Self {
            inner,
            ctx,
            calls,
            max_message: max,
            pending: BytesMut::new(),
            charged: 0,
            room: None,
            pass: false,
            ended: false,
            deadline: ctx_idle.map(|t| Box::pin(tokio::time::sleep(t))),
        }
    }

    /// The length of the message at the head of `pending`, prefix included, once known.
    fn head_len(&self) -> Option<usize> {
        let header = self.pending.get(..MESSAGE_HEADER)?;
        let len = u32::from_be_bytes([header[1], header[2], header[3], header[4]]) as usize;
        Some(len.saturating_add(MESSAGE_HEADER))
    }

    /// Counts `n` more bytes against the bounds.
    fn charge(&mut self, n: usize) -> Result<(), Status> {
        let calls = &self.calls;
        let before = calls.buffered.fetch_add(n, Ordering::AcqRel);
        self.charged += n;
        if before.saturating_add(n) > calls.max_buffered {
            return Err(Status::resource_exhausted(
                "the connection's calls hold more message bytes than grpc.max_message_size",
            ));
        }
        let over = self.pending.len().saturating_sub(SMALL_MESSAGE);
        let held = self.room.as_ref().map_or(0, |r| r.num_permits());
        let want = self.ctx.input_memory.units(over as u64);
        if want > held {
            let more = self
                .ctx
                .input_memory
                .try_reserve_units(want - held)
                .ok_or_else(|| {
                    Status::resource_exhausted(
                        "no room for the message in protocol.input_memory now; try again",
                    )
                })?;
            match &mut self.room {
                Some(room) => room.merge(more),
                None => self.room = Some(more),
            }
        }
        Ok(())
    }

    /// Gives back what `pending`'s handed-on bytes held.
    fn release(&mut self) {
        if self.pending.is_empty() {
            self.calls
                .buffered
                .fetch_sub(std::mem::take(&mut self.charged), Ordering::AcqRel);
            self.room = None;
        }
    }

    fn hand_on(&mut self, n: usize) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let data = self.pending.split_to(n).freeze();
        self.release();
        Poll::Ready(Some(Ok(Frame::data(data))))
    }
}

impl Drop for Messages {
    fn drop(&mut self) {
        self.calls
            .buffered
            .fetch_sub(self.charged, Ordering::AcqRel);
    }
}

impl http_body::Body for Messages {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = &mut *self;
        loop {
            if !this.pending.is_empty() {
                if this.pass || this.ended {
                    let n = this.pending.len();
                    return this.hand_on(n);
                }
                match this.head_len() {
                    Some(n) if n - MESSAGE_HEADER > this.max_message => {
                        this.pass = true;
                        continue;
                    }
                    Some(n) if this.pending.len() >= n => return this.hand_on(n),
                    _ => {}
                }
            }
            if this.ended {
                return Poll::Ready(None);
            }
            if let Some(deadline) = &mut this.deadline {
                if deadline.as_mut().poll(cx).is_ready() {
                    this.deadline = None;
                    return Poll::Ready(Some(Err(Status::deadline_exceeded(
                        "the request did not arrive within protocol.idle_timeout",
                    ))));
                }
            }
            match std::task::ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
                None => this.ended = true,
                Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(mut data) => {
                        if this.pass {
                            return Poll::Ready(Some(Ok(Frame::data(data))));
                        }
                        let n = data.remaining();
                        this.pending.extend_from_slice(&data.copy_to_bytes(n));
                        if let Err(status) = this.charge(n) {
                            return Poll::Ready(Some(Err(status)));
                        }
                    }
                    // Trailers: after the messages.
                    Err(frame) => {
                        if this.pending.is_empty() {
                            return Poll::Ready(Some(Ok(frame)));
                        }
                        this.ended = true;
                    }
                },
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended && self.pending.is_empty()
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
    ctx: Arc<Context>,
    /// `grpc.max_message_size`.
    max_message: usize,
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
        // Every connection was admitted at accept (`admit`): a refused peer has none.
        let Some(peer) = request.extensions().get::<Peer>().cloned() else {
            let status = Status::internal("no peer credentials for this call");
            return Box::pin(std::future::ready(Ok(status.into_http())));
        };
        let active = ActiveCall::start(peer.calls.clone());
        let (ctx, max) = (self.ctx.clone(), self.max_message);
        let request =
            request.map(|body| tonic::body::Body::new(Messages::new(body, ctx, peer.calls, max)));
        let path = request.uri().path();
        let reflection_v1 = path.starts_with("/grpc.reflection.v1.ServerReflection/");
        let reflection_v1alpha = path.starts_with("/grpc.reflection.v1alpha.ServerReflection/");
        // A version that could not be built: the engine answers UNIMPLEMENTED.
        let call = match (&mut self.v1, &mut self.v1alpha) {
            (Some(v1), _) if reflection_v1 => v1.call(request),
            (_, Some(v1alpha)) if reflection_v1alpha => v1alpha.call(request),
            _ => self.engine.call(request),
        };
        Box::pin(async move {
            let response = call.await;
            drop(active);
            response
        })
    }
}

/// The call's peer (every connection was admitted at accept).
fn admitted(peer: Option<Peer>) -> Result<Peer, Status> {
    peer.ok_or_else(|| Status::internal("no peer credentials for this call"))
}

/// The service: every call through `handler::handle`.
struct Endpoint {
    ctx: Arc<Context>,
}

impl Endpoint {
    /// The caller's session, or the status its connection's calls are refused with.
    fn session<T>(&self, request: &GrpcRequest<T>) -> Result<Session, Status> {
        let peer = admitted(request.extensions().get::<Peer>().cloned())?;
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

/// The socket request a gRPC SubmitProof (`wait` false) or Prove (`wait` true) makes: with
/// its deadline where it names one.
fn submit_request(submit: Submit, within: Option<u64>, wait: bool) -> Request {
    match within {
        Some(finish_within_ms) => {
            let s = SubmitWithin {
                submit,
                finish_within_ms,
            };
            if wait {
                Request::ProveWithin(s)
            } else {
                Request::SubmitWithin(s)
            }
        }
        None if wait => Request::Prove(submit),
        None => Request::Submit(submit),
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
        let r = request.into_inner();
        let within = grpc::finish_within(&r);
        let submit = grpc::submit_from_pb(r)?;
        let request = submit_request(submit, within, false);
        let accepted = grpc::submit_answer(self.ask(request, &mut session).await?)?;
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
        let within = grpc::finish_within(&submit);
        let submit = grpc::submit_from_pb(submit)?;
        let request = submit_request(submit, within, true);
        let answer = self.ask(request, &mut session).await?;
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
    fn a_connection_closes_past_its_hello_or_idle_deadline_and_never_during_a_call() {
        let calls = Arc::new(Calls::new(1 << 20));
        let t0 = tokio::time::Instant::now();
        let (hello, idle) = (Duration::from_secs(10), Some(Duration::from_secs(60)));
        let s = Duration::from_secs;
        // No call yet: the hello deadline.
        assert_eq!(calls.expired(t0 + s(3), t0, hello, idle), Ok(t0 + s(10)));
        assert!(calls.expired(t0 + s(10), t0, hello, idle).is_err());
        // A call in progress: never, however long.
        let call = ActiveCall::start(calls.clone());
        let later = t0 + s(1000);
        assert_eq!(calls.expired(later, t0, hello, idle), Ok(later + hello));
        drop(call);
        // Idle from the end of the last call.
        let ended = *calls.last_end.lock().unwrap();
        assert_eq!(
            calls.expired(ended + s(1), t0, hello, idle),
            Ok(ended + s(60))
        );
        assert!(calls.expired(ended + s(60), t0, hello, idle).is_err());
        // protocol.idle_timeout "0s": never idle.
        assert!(calls.expired(ended + s(100_000), t0, hello, None).is_ok());
    }
}
