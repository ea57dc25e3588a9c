//! The front door both sockets share: a new connection's peer credentials (SO_PEERCRED),
//! the allow lists, and the one connection limit (`socket.max_connections` and each uid's
//! share of it, counted over the protocol's socket and the gRPC endpoint together). A
//! connection is admitted or refused here, at accept, before a byte of it is read; what is
//! refused is closed by the socket's own code (an error frame on the protocol's socket, a
//! GOAWAY on the gRPC one), never served.
//!
//! Also the accept loops' handling of accept errors (EMFILE and friends): a back-off that
//! grows while they last, and a log line rate limited like the ones clients cause.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::net::UnixStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::access::Access;
use super::{ratelimit, Context};

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
