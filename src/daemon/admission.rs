//! The front door both sockets share ([`accept`]): a new connection's peer credentials
//! (SO_PEERCRED), the allow lists, and the one connection limit (`socket.max_connections`
//! and each uid's share of it, counted over the protocol's socket and the gRPC endpoint
//! together). A connection is admitted or refused here, at accept, before a byte of it is
//! read; a refused one is told why in its socket's own way (an error frame on the
//! protocol's socket, a GOAWAY on the gRPC one) and closed here ([`close_refused`]), never
//! served.
//!
//! Also the accept loops' handling of accept errors (EMFILE and friends): a back-off that
//! grows while they last, and a log line rate limited like the ones clients cause.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::access::Access;
use super::{frames, ratelimit, Context};
use crate::proto::ErrorCode;

/// Which socket a connection came in on (for the log).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Socket {
    /// The protocol's socket (`socket.path`).
    Protocol,
    /// The gRPC endpoint (`grpc.path`).
    Grpc,
}

/// Why a connection is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// Its credentials could not be read.
    #[error("peer credentials unreadable")]
    NoCredentials,
    /// Not in `socket.allowed_uids`/`allowed_gids`.
    #[error("peer uid/gid not allowed (socket.allowed_uids, socket.allowed_gids)")]
    NotAllowed,
    /// The uid holds `socket.max_connections_per_uid` connections.
    #[error("too many connections for this uid (socket.max_connections_per_uid)")]
    UidBusy,
    /// `socket.max_connections` are open, over both sockets.
    #[error("too many connections (socket.max_connections)")]
    Busy,
}

/// The connection limits: one for both sockets.
#[derive(Debug)]
pub struct Admission {
    /// `socket.max_connections`.
    total: Arc<Semaphore>,
    /// Each uid's share.
    uids: UidSlots,
}

impl Admission {
    /// Limits of `max` connections in all.
    pub fn new(max: usize) -> Self {
        Self {
            total: Arc::new(Semaphore::new(max)),
            uids: UidSlots::default(),
        }
    }
}

/// An admitted connection: its peer, and the slots it holds until dropped.
pub struct Admitted {
    /// The peer's uid.
    pub uid: u32,
    /// The peer's pid (0 where the kernel gave none).
    pub pid: i32,
    /// What the peer may do.
    pub access: Access,
    _uid_slot: SharedUidSlot,
    _permit: OwnedSemaphorePermit,
    _open: OpenConnection,
}

/// Counts the connection among the daemon's open ones (the metrics) while it lives.
struct OpenConnection(Arc<Context>);

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Accepts `listener`'s connections until one is admitted, and returns it with its
/// admission (held for as long as the connection lives). A refused one is closed here
/// ([`close_refused`]); a failed accept pauses the loop ([`AcceptBackoff`]). Cancel-safe:
/// nothing is held across its awaits but the listener's own accept.
pub async fn accept(
    ctx: &Arc<Context>,
    listener: &UnixListener,
    socket: Socket,
    backoff: &mut AcceptBackoff,
) -> (UnixStream, Admitted) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                backoff.reset();
                match admit(ctx, &stream, socket) {
                    Ok(admitted) => return (stream, admitted),
                    Err(refusal) => close_refused(ctx, stream, socket, refusal),
                }
            }
            Err(e) => tokio::time::sleep(backoff.failed(socket, &e)).await,
        }
    }
}

/// Tells a refused peer why, in its socket's way, and closes the connection: on the
/// protocol's socket one error frame (written on a task of its own, given up after a
/// moment: a slow peer never holds the accept loop), on the gRPC endpoint a GOAWAY written
/// only if the socket takes it at once (an accepted socket's buffer is empty). A peer whose
/// credentials could not be read has nothing to be answered: it is just closed.
pub fn close_refused(ctx: &Context, stream: UnixStream, socket: Socket, refusal: Refusal) {
    let (code, message) = match refusal {
        Refusal::NoCredentials => return,
        Refusal::NotAllowed => (ErrorCode::PermissionDenied, "peer uid/gid not allowed"),
        Refusal::UidBusy => (ErrorCode::Busy, "too many connections for this uid"),
        Refusal::Busy => (ErrorCode::Busy, "too many connections"),
    };
    match socket {
        Socket::Protocol => {
            let max = ctx.config.protocol.max_frame_size;
            tokio::spawn(frames::refuse(stream, code, message, max));
        }
        Socket::Grpc => {
            let _ = stream.try_write(&goaway(&refusal.to_string()));
        }
    }
}

/// The HTTP/2 bytes that refuse a connection: the server's preface (an empty SETTINGS
/// frame) and a GOAWAY that lets no stream through (last stream 0, REFUSED_STREAM) with the
/// reason as its debug data.
fn goaway(reason: &str) -> Vec<u8> {
    let debug = &reason.as_bytes()[..reason.len().min(256)];
    let mut out = vec![0, 0, 0, 0x4, 0, 0, 0, 0, 0];
    let len = (8 + debug.len()) as u32;
    out.extend_from_slice(&len.to_be_bytes()[1..]);
    out.extend_from_slice(&[0x7, 0, 0, 0, 0, 0]);
    out.extend_from_slice(&0u32.to_be_bytes());
    out.extend_from_slice(&0x7u32.to_be_bytes());
    out.extend_from_slice(debug);
    out
}

/// Admits `stream`'s peer, or says why not (the refusal is counted and logged, rate
/// limited). Checked in this order: credentials, allow lists (so that a peer not allowed
/// hears that, not "busy"), the uid's share, the total.
pub fn admit(ctx: &Arc<Context>, stream: &UnixStream, socket: Socket) -> Result<Admitted, Refusal> {
    let refused = |refusal: Refusal, uid: Option<u32>, gid: Option<u32>| {
        ctx.connections_refused.fetch_add(1, Ordering::Relaxed);
        if let Some(suppressed) = ratelimit::REFUSED.allow(Instant::now()) {
            tracing::warn!(
                ?socket,
                uid,
                gid,
                suppressed,
                "connection refused: {refusal}"
            );
        }
        refusal
    };
    let cred = stream
        .peer_cred()
        .map_err(|_| refused(Refusal::NoCredentials, None, None))?;
    let (uid, gid) = (cred.uid(), cred.gid());
    if !allowed(ctx, uid, gid) {
        return Err(refused(Refusal::NotAllowed, Some(uid), Some(gid)));
    }
    let limit = ctx.config.socket.per_uid_limit();
    let uid_slot = SharedUidSlot::take(ctx, uid, limit)
        .ok_or_else(|| refused(Refusal::UidBusy, Some(uid), Some(gid)))?;
    let permit = ctx
        .admission
        .total
        .clone()
        .try_acquire_owned()
        .map_err(|_| refused(Refusal::Busy, Some(uid), Some(gid)))?;
    ctx.connections.fetch_add(1, Ordering::Relaxed);
    ctx.connections_total.fetch_add(1, Ordering::Relaxed);
    let access = Access::of(uid, ctx.own_uid, &ctx.config.socket.admin_uids);
    let pid = cred.pid().unwrap_or(0);
    tracing::info!(
        ?socket,
        uid,
        gid,
        pid,
        admin = access.admin,
        "client connected"
    );
    Ok(Admitted {
        uid,
        pid,
        access,
        _uid_slot: uid_slot,
        _permit: permit,
        _open: OpenConnection(ctx.clone()),
    })
}

/// Whether the peer may connect under the allow lists.
fn allowed(ctx: &Context, uid: u32, gid: u32) -> bool {
    let s = &ctx.config.socket;
    (s.allowed_uids.is_empty() && s.allowed_gids.is_empty())
        || s.allowed_uids.contains(&uid)
        || s.allowed_gids.contains(&gid)
}

/// Connections open per peer uid, for `socket.max_connections_per_uid`.
#[derive(Debug, Default)]
pub struct UidSlots {
    open: Mutex<HashMap<u32, usize>>,
}

impl UidSlots {
    /// Takes one of `uid`'s `limit` slots; false when it holds all of them.
    fn take(&self, uid: u32, limit: usize) -> bool {
        // One counter updated per step: usable after a panic elsewhere.
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let held = open.entry(uid).or_insert(0);
        if *held >= limit {
            if *held == 0 {
                open.remove(&uid);
            }
            return false;
        }
        *held += 1;
        true
    }

    fn release(&self, uid: u32) {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(held) = open.get_mut(&uid) {
            *held = held.saturating_sub(1);
            // No entry per uid that ever connected: the map stays as small as the open
            // connections.
            if *held == 0 {
                open.remove(&uid);
            }
        }
    }

    /// Connections `uid` holds now.
    #[cfg(test)]
    fn held(&self, uid: u32) -> usize {
        let open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        open.get(&uid).copied().unwrap_or(0)
    }
}

/// One of a uid's slots; given back when dropped.
struct SharedUidSlot {
    ctx: Arc<Context>,
    uid: u32,
}

impl SharedUidSlot {
    fn take(ctx: &Arc<Context>, uid: u32, limit: usize) -> Option<Self> {
        ctx.admission.uids.take(uid, limit).then(|| Self {
            ctx: ctx.clone(),
            uid,
        })
    }
}

impl Drop for SharedUidSlot {
    fn drop(&mut self) {
        self.ctx.admission.uids.release(self.uid);
    }
}

/// The shortest and longest pause after a failed accept.
const BACKOFF_MIN: Duration = Duration::from_millis(50);
const BACKOFF_MAX: Duration = Duration::from_secs(1);

/// An accept loop's back-off: doubles while accepts fail, back to the shortest after one
/// succeeds.
#[derive(Debug, Default)]
pub struct AcceptBackoff {
    next: Option<Duration>,
}

impl AcceptBackoff {
    /// An accept succeeded.
    pub fn reset(&mut self) {
        self.next = None;
    }

    /// An accept failed with `e`: logs it (rate limited: [`ratelimit::ACCEPT`]) and returns
    /// how long to pause before the next.
    pub fn failed(&mut self, socket: Socket, e: &std::io::Error) -> Duration {
        let pause = self.next.unwrap_or(BACKOFF_MIN);
        self.next = Some((pause * 2).min(BACKOFF_MAX));
        if let Some(suppressed) = ratelimit::ACCEPT.allow(Instant::now()) {
            tracing::error!(
                ?socket,
                suppressed,
                pause_ms = pause.as_millis() as u64,
                "accept failed: {e}"
            );
        }
        pause
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_uid_holds_at_most_its_limit_and_a_closed_connection_gives_its_slot_back() {
        let slots = UidSlots::default();
        assert!(slots.take(1000, 2) && slots.take(1000, 2));
        assert!(!slots.take(1000, 2), "a third over the limit");
        // Another uid has slots of its own.
        assert!(slots.take(1001, 2), "another uid");
        assert_eq!((slots.held(1000), slots.held(1001)), (2, 1));
        slots.release(1000);
        assert!(slots.take(1000, 2), "a slot freed");
        for uid in [1000, 1000, 1001] {
            slots.release(uid);
        }
        assert_eq!((slots.held(1000), slots.held(1001)), (0, 0));
        assert!(!slots.take(7, 0), "a limit of none");
        assert!(
            slots.open.lock().unwrap().is_empty(),
            "no entry left behind"
        );
        // Root is counted like any uid.
        assert!(slots.take(0, 1));
        assert!(!slots.take(0, 1));
    }

    #[test]
    fn a_refusal_is_a_settings_frame_and_a_goaway_with_the_reason() {
        let bytes = goaway("peer uid/gid not allowed");
        // SETTINGS: empty, stream 0.
        assert_eq!(&bytes[..9], &[0, 0, 0, 4, 0, 0, 0, 0, 0]);
        let frame = &bytes[9..];
        let len = u32::from_be_bytes([0, frame[0], frame[1], frame[2]]) as usize;
        assert_eq!((frame[3], len), (7, frame.len() - 9), "GOAWAY, its length");
        assert_eq!(&frame[9..13], &[0, 0, 0, 0], "last stream 0");
        assert_eq!(&frame[13..17], &[0, 0, 0, 7], "REFUSED_STREAM");
        assert_eq!(&frame[17..], b"peer uid/gid not allowed");
        assert_eq!(goaway(&"x".repeat(1000)).len(), 9 + 9 + 8 + 256, "bounded");
    }

    #[test]
    fn accept_backoff_doubles_to_a_second_and_resets() {
        let mut b = AcceptBackoff::default();
        let e = std::io::Error::from_raw_os_error(libc::EMFILE);
        let pauses: Vec<_> = (0..8).map(|_| b.failed(Socket::Grpc, &e)).collect();
        assert_eq!(pauses[0], BACKOFF_MIN);
        assert_eq!(pauses[1], BACKOFF_MIN * 2);
        assert_eq!(*pauses.last().unwrap(), BACKOFF_MAX);
        b.reset();
        assert_eq!(b.failed(Socket::Grpc, &e), BACKOFF_MIN);
    }
}
