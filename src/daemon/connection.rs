//! One client connection: credentials, framing, and one request at a time.

use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use tokio::io::Interest;
use tokio::net::UnixStream;
use tokio::sync::watch;
use tokio_util::codec::Framed;

use super::admission::Admitted;
use super::fdinput::{self, FdInputError, FdStream};
use super::handler::{handle, Session};
use super::{ratelimit, wire, Context};
use crate::proto::{
    decode_payload, encode_payload, ErrorCode, FrameCodec, FrameError, Request, Response,
    LENGTH_PREFIX,
};

/// How long a refusal (busy, permission denied) may take to write before the socket is
/// simply closed.
const REFUSAL_TIMEOUT: Duration = Duration::from_secs(2);

/// How often a connection whose request waits on a job checks that its peer is still there,
/// once its socket has turned readable (see [`hung_up`]).
const HANGUP_POLL: Duration = Duration::from_secs(1);

/// A client connection, framed, its passed descriptors kept (`fdinput`).
pub(super) type Conn = Framed<FdStream, FrameCodec>;

/// Writes one error frame and closes, without waiting on a slow peer for long.
pub async fn refuse(stream: UnixStream, code: ErrorCode, message: &str, max_frame: u32) {
    let mut framed = Framed::new(stream, FrameCodec::new(max_frame));
    let Response::Error(e) = wire::error(code, message, None) else {
        return;
    };
    if let Ok(payload) = encode_payload(&Response::Error(e)) {
        let _ = tokio::time::timeout(REFUSAL_TIMEOUT, framed.send(&payload[..])).await;
    }
}

/// Serves a connection until the peer closes it, a framing error makes it unusable, or the
/// daemon finishes draining (`closing`).
pub async fn serve(
    stream: UnixStream,
    peer: Admitted,
    ctx: Arc<Context>,
    mut closing: watch::Receiver<bool>,
) {
    let max = ctx.config.protocol.max_frame_size;
    let (uid, pid) = (peer.uid, peer.pid);
    let mut session = Session {
        hello: false,
        client: String::new(),
        access: peer.access,
        request_ids: crate::engine::RequestIds::Strict,
    };
    let mut framed = Framed::new(FdStream::new(stream), FrameCodec::new(max));
    // Stream bytes taken by the frames read so far: where the next frame starts.
    let mut consumed: u64 = 0;
    let hello_deadline = tokio::time::Instant::now() + ctx.config.protocol.hello_timeout;
    let idle_timeout = ctx.config.protocol.idle_timeout;
    // Idle time counts from the last answer (Welcome, after Hello): a request in progress
    // is never idle, since the loop only waits for a frame between requests.
    let mut answered = tokio::time::Instant::now();
    loop {
        let idle_deadline = idle_timeout.map(|t| answered + t);
        let frame = tokio::select! {
            f = framed.next() => f,
            _ = wait_closing(&mut closing) => break,
            _ = tokio::time::sleep_until(hello_deadline), if !session.hello => {
                if let Some(suppressed) = ratelimit::MISBEHAVED.allow(Instant::now()) {
                    tracing::info!(uid, pid, suppressed, "closing: no Hello in time");
                }
                let timeout = wire::error(ErrorCode::HelloRequired, "no Hello in time; closing", None);
                let _ = send(&mut framed, &timeout).await;
                break;
            }
            _ = sleep_until(idle_deadline), if session.hello => {
                // Closed without a frame: the client's next request would read one as its
                // answer. It finds the connection closed and connects again.
                if let Some(suppressed) = ratelimit::MISBEHAVED.allow(Instant::now()) {
                    tracing::info!(uid, pid, client = %session.client, suppressed, "closing: idle past protocol.idle_timeout");
                }
                break;
            }
        };
        let response = match frame {
            None => break,
            Some(Err(FrameError::TooLarge { len, max })) => {
                if let Some(suppressed) = ratelimit::MISBEHAVED.allow(Instant::now()) {
                    tracing::warn!(
                        uid,
                        pid,
                        len,
                        max,
                        suppressed,
                        "frame too large; closing the connection"
                    );
                }
                let msg = format!("frame of {len} bytes exceeds the limit of {max} bytes; closing");
                let _ = send(
                    &mut framed,
                    &wire::error(ErrorCode::FrameTooLarge, msg, None),
                )
                .await;
                break;
            }
            Some(Err(e)) => {
                tracing::debug!(uid, "connection error: {e}");
                break;
            }
            Some(Ok(payload)) => {
                let start = consumed;
                consumed += (LENGTH_PREFIX + payload.len()) as u64;
                let passed = framed.get_mut().take_fd(start, consumed);
                match decode_payload::<Request>(&payload) {
                    // A Watch pushes events on the connection before its answer; `None` as below.
                    Ok(Request::Watch(w)) if session.hello => {
                        match super::watchers::serve(w.job_id, session.access, &ctx, &mut framed)
                            .await
                        {
                            Some(response) => response,
                            None => break,
                        }
                    }
                    Ok(request @ (Request::SubmitFd(_) | Request::ProveFd(_))) if session.hello => {
                        match passed_input(request, passed, &mut session, &ctx, &framed).await {
                            Some(response) => response,
                            None => break,
                        }
                    }
                    // `None`: the client hung up while its Await or Prove waited for a job, for
                    // hours where the job queues behind others; its slot must not wait that long.
                    Ok(request) => {
                        let hang_up = hung_up(framed.get_ref().get_ref());
                        match handle(request, &mut session, &ctx, hang_up).await {
                            Some(response) => response,
                            None => break,
                        }
                    }
                    Err(e) => {
                        let e = crate::engine::bounded(&e.to_string(), crate::engine::MAX_MESSAGE);
                        if let Some(suppressed) = ratelimit::MALFORMED.allow(Instant::now()) {
                            tracing::info!(uid, client = %session.client, suppressed, "malformed frame: {e}");
                        }
                        wire::error(ErrorCode::MalformedFrame, e.to_string(), None)
                    }
                }
            }
        };
        if let Err(e) = send(&mut framed, &response).await {
            tracing::debug!(uid, "cannot answer: {e}");
            break;
        }
        answered = tokio::time::Instant::now();
    }
    tracing::debug!(uid, client = %session.client, "client disconnected");
}

/// Answers a SubmitFd or ProveFd: reads the passed input (within `protocol.input_memory`,
/// waiting for room), submits it as a Submit with that payload, and for ProveFd then waits
/// for the job as Prove does. The memory is given back once the job is queued (or refused):
/// the engine holds the input from there. `None`: the client hung up while waiting.
async fn passed_input(
    request: Request,
    fd: Option<std::os::fd::OwnedFd>,
    session: &mut Session,
    ctx: &Arc<Context>,
    framed: &Conn,
) -> Option<Response> {
    let (mut submit, prove) = match request {
        Request::SubmitFd(s) => (s, false),
        Request::ProveFd(s) => (s, true),
        other => return handle(other, session, ctx, hung_up(framed.get_ref().get_ref())).await,
    };
    let refuse = |e: FdInputError| {
        let why = crate::engine::bounded(&e.to_string(), crate::engine::MAX_MESSAGE);
        if let Some(suppressed) = ratelimit::SUBMISSION.allow(Instant::now()) {
            tracing::warn!(client = %session.client, suppressed, "passed input refused: {why}");
        }
        Some(wire::error(ErrorCode::InvalidInput, why, None))
    };
    let payload = match &mut submit.input {
        crate::proto::ProofInput::PoRep { c1, .. } => c1,
        crate::proto::ProofInput::SnapDeals { input }
        | crate::proto::ProofInput::WindowPoSt { input }
        | crate::proto::ProofInput::WinningPoSt { input } => input,
    };
    if !payload.is_empty() {
        return refuse(FdInputError::Payload);
    }
    let Some(fd) = fd else {
        return refuse(FdInputError::Missing);
    };
    let len = match fdinput::input_size(&fd, ctx.config.protocol.max_input_size) {
        Ok(len) => len,
        Err(e) => return refuse(e),
    };
    let room = tokio::select! {
        room = ctx.input_memory.reserve(len) => room,
        _ = hung_up(framed.get_ref().get_ref()) => return None,
    };
    // Given up at protocol.input_timeout, or when the client hangs up: the buffer and the
    // room go at once (`InputMemory::read`).
    let timeout = ctx.config.protocol.input_timeout;
    let read = tokio::select! {
        read = ctx.input_memory.read(std::fs::File::from(fd), len, timeout) => read,
        _ = hung_up(framed.get_ref().get_ref()) => return None,
    };
    match read {
        Ok(bytes) => *payload = bytes,
        Err(e) => return refuse(e),
    }
    let hang_up = hung_up(framed.get_ref().get_ref());
    let accepted = handle(Request::Submit(submit), session, ctx, hang_up).await;
    drop(room);
    match accepted {
        Some(Response::Accepted(a)) if prove => {
            let wait = crate::proto::AwaitJob {
                job_id: a.job_id,
                timeout_ms: None,
            };
            let hang_up = hung_up(framed.get_ref().get_ref());
            handle(Request::Await(wait), session, ctx, hang_up).await
        }
        other => other,
    }
}

/// Sleeps until `deadline`; forever where there is none.
async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// Resolves once the peer has closed the connection (or it failed), without reading from it.
///
/// Reading is not an option: a request the client pipelined behind this one must stay in
/// the socket, to be read in order after the answer. Nor is end-of-stream a hang-up: a
/// client may shut down its sending side after its last request and still read the answer.
/// What tells is poll(2)'s POLLHUP, which a Unix stream socket reports only when the peer
/// shut down both directions, as closing the socket or exiting does. Readiness wakes the
/// check; since tokio keeps the socket readable for as long as unread bytes (or an
/// end-of-stream) wait, later checks come every [`HANGUP_POLL`] instead.
pub(super) async fn hung_up(stream: &UnixStream) {
    // An error here (the runtime shutting down) falls through to the checks.
    let _ = stream.ready(Interest::READABLE).await;
    let mut every = tokio::time::interval(HANGUP_POLL);
    loop {
        every.tick().await;
        if peer_closed(stream) {
            return;
        }
    }
}

/// Whether poll(2) reports the peer gone (POLLHUP or POLLERR), without waiting.
fn peer_closed(stream: &UnixStream) -> bool {
    // POLLHUP and POLLERR are reported whatever the events asked for.
    let mut fds = [PollFd::new(stream.as_fd(), PollFlags::empty())];
    match poll(&mut fds, PollTimeout::ZERO) {
        Ok(n) if n > 0 => fds[0]
            .revents()
            .is_some_and(|r| r.intersects(PollFlags::POLLHUP | PollFlags::POLLERR)),
        // Nothing to report, or EINTR: the next check sees it.
        _ => false,
    }
}

/// Resolves once the daemon has finished draining (or the sender is gone).
async fn wait_closing(closing: &mut watch::Receiver<bool>) {
    let _ = closing.wait_for(|c| *c).await;
}

pub(super) async fn send(framed: &mut Conn, response: &Response) -> Result<(), FrameError> {
    let payload = match encode_payload(response) {
        Ok(p) => p,
        Err(e) => encode_payload(&wire::error(
            ErrorCode::Internal,
            format!("cannot encode the response: {e}"),
            None,
        ))?,
    };
    match framed.send(&payload[..]).await {
        // A response larger than the frame limit: say so, with a code of its own, rather
        // than close silently.
        Err(FrameError::TooLarge { len, max }) => {
            let msg = format!(
                "response of {len} bytes exceeds the frame limit of {max} bytes \
                 (protocol.max_frame_size)"
            );
            let payload = encode_payload(&wire::error(ErrorCode::ResponseTooLarge, msg, None))?;
            framed.send(&payload[..]).await
        }
        other => other,
    }
}
