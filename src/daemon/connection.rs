//! One admitted client connection of the postcard socket: its session, and its requests
//! answered one at a time until it closes, idles or the daemon drains. The peer was admitted
//! before (`admission`); frames are read and written through `frames`.

use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use tokio::net::UnixStream;
use tokio::sync::watch;
use tokio_util::codec::Framed;

use super::admission::Admitted;
use super::fdinput::{self, FdInputError, FdStream};
use super::frames::{hung_up, send, Conn};
use super::handler::{handle, Session};
use super::{ratelimit, watchers, wire, Context};
use crate::proto::{
    decode_payload, ErrorCode, FrameCodec, FrameError, Request, Response, LENGTH_PREFIX,
};

/// Serves a connection until the peer closes it, a framing error makes it unusable, or the
/// daemon finishes draining (`closing`).
pub(super) async fn serve(
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
            Some(Err(e)) => {
                frame_failed(&mut framed, e, uid, pid).await;
                break;
            }
            Some(Ok(payload)) => {
                let start = consumed;
                consumed += (LENGTH_PREFIX + payload.len()) as u64;
                let passed = framed.get_mut().take_fd(start, consumed);
                match answer(&payload, passed, &mut session, &ctx, &mut framed).await {
                    Some(response) => response,
                    None => break,
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

/// A frame that ends the connection: one too large is answered with its own error first.
async fn frame_failed(framed: &mut Conn, e: FrameError, uid: u32, pid: i32) {
    let FrameError::TooLarge { len, max } = e else {
        tracing::debug!(uid, "connection error: {e}");
        return;
    };
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
    let _ = send(framed, &wire::error(ErrorCode::FrameTooLarge, msg, None)).await;
}

/// The answer to one request frame (`passed`: the descriptor that came with it). `None`:
/// the client hung up while its request waited (for a job, for room for its input);
/// nothing is left to answer.
async fn answer(
    payload: &[u8],
    passed: Option<OwnedFd>,
    session: &mut Session,
    ctx: &Arc<Context>,
    framed: &mut Conn,
) -> Option<Response> {
    match decode_payload::<Request>(payload) {
        // A Watch pushes events on the connection before its answer.
        Ok(Request::Watch(w)) if session.hello => {
            watchers::serve(w.job_id, session.access, ctx, framed).await
        }
        Ok(request @ (Request::SubmitFd(_) | Request::ProveFd(_))) if session.hello => {
            passed_input(request, passed, session, ctx, framed).await
        }
        // An Await or Prove may wait for hours where the job queues behind others: a client
        // that hangs up meanwhile must not hold its slot that long.
        Ok(request) => {
            let hang_up = hung_up(framed.get_ref().get_ref());
            handle(request, session, ctx, hang_up).await
        }
        Err(e) => {
            let e = crate::engine::bounded(&e.to_string(), crate::engine::MAX_MESSAGE);
            if let Some(suppressed) = ratelimit::MALFORMED.allow(Instant::now()) {
                tracing::info!(uid = session.access.uid, client = %session.client, suppressed, "malformed frame: {e}");
            }
            Some(wire::error(ErrorCode::MalformedFrame, e.to_string(), None))
        }
    }
}

/// Answers a SubmitFd or ProveFd: reads the passed input (within `protocol.input_memory`,
/// waiting for room), submits it as a Submit with that payload, and for ProveFd then waits
/// for the job as Prove does. The memory is given back once the job is queued (or refused):
/// the engine holds the input from there. `None`: the client hung up while waiting.
async fn passed_input(
    request: Request,
    fd: Option<OwnedFd>,
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

/// Resolves once the daemon has finished draining (or the sender is gone).
async fn wait_closing(closing: &mut watch::Receiver<bool>) {
    let _ = closing.wait_for(|c| *c).await;
}
