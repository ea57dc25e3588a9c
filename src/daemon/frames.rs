//! The postcard socket's frames: a connection framed ([`Conn`]), one response sent, a refused
//! peer's one error frame, and the hang-up check a waiting request races against. No state
//! of a connection lives here: the per-connection loop (`connection`) and the Watch stream
//! (`watchers`) both write through it.

use std::os::fd::AsFd;
use std::time::Duration;

use futures::SinkExt;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use tokio::io::Interest;
use tokio::net::UnixStream;
use tokio_util::codec::Framed;

use super::fdinput::FdStream;
use super::wire;
use crate::proto::{encode_payload, ErrorCode, FrameCodec, FrameError, Response};

/// How long a refusal (busy, permission denied) may take to write before the socket is
/// simply closed.
const REFUSAL_TIMEOUT: Duration = Duration::from_secs(2);

/// How often a connection whose request waits on a job checks that its peer is still there,
/// once its socket has turned readable (see [`hung_up`]).
const HANGUP_POLL: Duration = Duration::from_secs(1);

/// A client connection, framed, its passed descriptors kept (`fdinput`).
pub(super) type Conn = Framed<FdStream, FrameCodec>;

/// Writes one error frame and closes, without waiting on a slow peer for long.
pub(super) async fn refuse(stream: UnixStream, code: ErrorCode, message: &str, max_frame: u32) {
    let mut framed = Framed::new(stream, FrameCodec::new(max_frame));
    let Response::Error(e) = wire::error(code, message, None) else {
        return;
    };
    if let Ok(payload) = encode_payload(&Response::Error(e)) {
        let _ = tokio::time::timeout(REFUSAL_TIMEOUT, framed.send(&payload[..])).await;
    }
}

/// Sends `response` as one frame; a response larger than the frame limit is answered with
/// an error frame of its own code instead.
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
