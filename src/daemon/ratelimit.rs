//! Log lines that a client can cause (a malformed frame, a refused connection, a refused
//! submission) are rate limited per kind, so that a hostile or broken client cannot fill
//! the journal: at most [`PER_WINDOW`] lines per [`WINDOW`], and the next line after a quiet
//! spell says how many were left out. The decision is pure logic with the time passed in. A line the daemon
//! repeats on its own (a failing `metrics.textfile` write) gets a limit of its own.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Lines of one kind logged per window at most.
pub const PER_WINDOW: u32 = 10;

/// The window.
pub const WINDOW: Duration = Duration::from_secs(60);

/// One kind of client-caused log line.
pub struct LogLimit {
    per_window: u32,
    window: Duration,
    state: Mutex<State>,
}

struct State {
    /// When the current window began (`None` before the first line).
    start: Option<Instant>,
    /// Lines logged in it.
    logged: u32,
    /// Lines left out since the last one logged.
    suppressed: u64,
}

impl LogLimit {
    /// A limit of [`PER_WINDOW`] lines per [`WINDOW`], with nothing logged yet.
    pub const fn new() -> Self {
        Self::with(PER_WINDOW, WINDOW)
    }

    /// A limit of `per_window` lines per `window`, with nothing logged yet.
    pub const fn with(per_window: u32, window: Duration) -> Self {
        LogLimit {
            per_window,
            window,
            state: Mutex::new(State {
                start: None,
                logged: 0,
                suppressed: 0,
            }),
        }
    }

    /// Whether a line may be logged at `now`: `Some(n)` with the lines left out before it,
    /// or `None` to leave this one out.
    pub fn allow(&self, now: Instant) -> Option<u64> {
        // Three counters updated in one step each: usable after a panic elsewhere.
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let expired = st
            .start
            .is_none_or(|s| now.saturating_duration_since(s) >= self.window);
        if expired {
            st.start = Some(now);
            st.logged = 0;
        }
        if st.logged >= self.per_window {
            st.suppressed += 1;
            return None;
        }
        st.logged += 1;
        Some(std::mem::take(&mut st.suppressed))
    }
}

/// Malformed frames (logged at info).
pub static MALFORMED: LogLimit = LogLimit::new();
/// Connections refused: a peer not allowed, or no slot free, in all or for the peer's uid
/// (logged at warn).
pub static REFUSED: LogLimit = LogLimit::new();
/// Frames over the size limit, clients that never said Hello, and connections closed for
/// being idle.
pub static MISBEHAVED: LogLimit = LogLimit::new();
/// Requests refused to clients that are not admins (Preload, Evict).
pub static FORBIDDEN: LogLimit = LogLimit::new();
/// Submissions refused (invalid input, a full queue, a request id conflict): the client
/// gets the reason in its answer; a client submitting garbage in a loop must not fill the
/// journal.
pub static SUBMISSION: LogLimit = LogLimit::new();
/// Accepts that failed (EMFILE and the like, logged at error): one line every 10 seconds at
/// most, while the accept loops back off.
pub static ACCEPT: LogLimit = LogLimit::with(1, Duration::from_secs(10));
/// `metrics.textfile` writes that failed: one line every 10 minutes at most, since the
/// writer retries every `metrics.textfile_interval` for as long as the cause lasts.
pub static TEXTFILE: LogLimit = LogLimit::with(1, Duration::from_secs(600));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_is_cut_and_the_next_window_says_how_much() {
        let limit = LogLimit::new();
        let t0 = Instant::now();
        let logged = (0..1000)
            .filter(|i| limit.allow(t0 + Duration::from_millis(*i)).is_some())
            .count();
        assert_eq!(logged, PER_WINDOW as usize);
        // The next window: logged again, with the count of the lines left out.
        assert_eq!(limit.allow(t0 + WINDOW + Duration::from_secs(1)), Some(990));
        assert_eq!(limit.allow(t0 + WINDOW + Duration::from_secs(2)), Some(0));
    }

    #[test]
    fn a_limit_of_its_own_counts_in_its_own_window() {
        let limit = LogLimit::with(1, Duration::from_secs(600));
        let t0 = Instant::now();
        assert_eq!(limit.allow(t0), Some(0));
        for i in 1..40 {
            assert_eq!(limit.allow(t0 + Duration::from_secs(15 * i)), None);
        }
        assert_eq!(limit.allow(t0 + Duration::from_secs(600)), Some(39));
    }
}
