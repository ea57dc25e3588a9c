//! One client connection: credentials, framing, and one request at a time.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use tokio::net::UnixStream;
use tokio::sync::watch;
use tokio_util::codec::Framed;

use super::handler::{handle, Session};
use super::{ratelimit, wire, Context};
use crate::proto::{
    decode_payload, encode_payload, ErrorCode, FrameCodec, FrameError, Request, Response,
};

/// How long a refusal (busy, permission denied) may take to write before the socket is
/// simply closed.
const REFUSAL_TIMEOUT: Duration = Duration::from_secs(2);

/// Whether the peer may connect under the allow-lists.
fn allowed(ctx: &Context, uid: u32, gid: u32) -> bool {
    let s = &ctx.config.socket;
    (s.allowed_uids.is_empty() && s.allowed_gids.is_empty())
        || s.allowed_uids.contains(&uid)
        || s.allowed_gids.contains(&gid)
}

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
pub async fn serve(stream: UnixStream, ctx: Arc<Context>, mut closing: watch::Receiver<bool>) {
    let max = ctx.config.protocol.max_frame_size;
    let cred = match stream.peer_cred() {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!("cannot read peer credentials, closing: {e}");
            return;
        }
    };
    let (uid, gid, pid) = (cred.uid(), cred.gid(), cred.pid());
    if !allowed(&ctx, uid, gid) {
        if let Some(suppressed) = ratelimit::REFUSED.allow(Instant::now()) {
            tracing::warn!(
                uid,
                gid,
                pid,
                suppressed,
                "connection refused: peer not in socket.allowed_uids/allowed_gids"
            );
        }
        ctx.connections_refused.fetch_add(1, Ordering::Relaxed);
        refuse(
            stream,
            ErrorCode::PermissionDenied,
            "peer uid/gid not allowed",
            max,
        )
        .await;
        return;
    }
    tracing::info!(uid, gid, pid, "client connected");
    let mut session = Session {
        hello: false,
        client: String::new(),
        uid,
    };
    let mut framed = Framed::new(stream, FrameCodec::new(max));
    let hello_deadline = tokio::time::Instant::now() + ctx.config.protocol.hello_timeout;
    loop {
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
            Some(Ok(payload)) => match decode_payload::<Request>(&payload) {
                Ok(request) => handle(request, &mut session, &ctx).await,
                Err(e) => {
                    let e = crate::engine::bounded(&e.to_string(), crate::engine::MAX_MESSAGE);
                    if let Some(suppressed) = ratelimit::MALFORMED.allow(Instant::now()) {
                        tracing::info!(uid, client = %session.client, suppressed, "malformed frame: {e}");
                    }
                    wire::error(ErrorCode::MalformedFrame, e.to_string(), None)
                }
            },
        };
        if let Err(e) = send(&mut framed, &response).await {
            tracing::debug!(uid, "cannot answer: {e}");
            break;
        }
    }
    tracing::debug!(uid, client = %session.client, "client disconnected");
}

/// Resolves once the daemon has finished draining (or the sender is gone).
async fn wait_closing(closing: &mut watch::Receiver<bool>) {
    let _ = closing.wait_for(|c| *c).await;
}

async fn send(
    framed: &mut Framed<UnixStream, FrameCodec>,
    response: &Response,
) -> Result<(), FrameError> {
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
