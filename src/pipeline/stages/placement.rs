//! Where and how the stages' threads run on the host's CPUs.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Critical partitions admitted and not yet through the device stage, process-wide.
static CRITICAL_IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);

/// A critical partition's claim on the host from its admission until its device stage ends
/// (it travels with the partition and is dropped with it, whichever way it leaves). While
/// one exists, non-critical synthesis pauses at its yield points ([`yield_to_critical`]).
/// Made only after admission: a critical partition never waits for anything a paused
/// thread holds.
pub(crate) struct CriticalClaim(());

impl CriticalClaim {
    pub(crate) fn new() -> Self {
        CRITICAL_IN_FLIGHT.fetch_add(1, Ordering::SeqCst);
        CriticalClaim(())
    }
}

impl Drop for CriticalClaim {
    fn drop(&mut self) {
        CRITICAL_IN_FLIGHT.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The longest one pause lasts: a critical partition that stays in flight this long (a
/// large WinningPoSt) lets the others go on between its checks rather than starve them.
const MAX_PAUSE: Duration = Duration::from_secs(2);

/// A non-critical synthesis thread's yield point (`synth::with_yield_point`): waits while a
/// critical partition is in flight, up to [`MAX_PAUSE`].
pub(crate) fn yield_to_critical() {
    wait_while_claimed(&CRITICAL_IN_FLIGHT, MAX_PAUSE);
}

/// Waits while `claims` is above 0, up to `most`.
fn wait_while_claimed(claims: &AtomicUsize, most: Duration) {
    if claims.load(Ordering::Relaxed) == 0 {
        return;
    }
    let start = Instant::now();
    while claims.load(Ordering::SeqCst) > 0 && start.elapsed() < most {
        std::thread::sleep(Duration::from_micros(500));
    }
}

/// How much lower than the daemon's other threads the synthesis of non-critical partitions
/// runs (a nice increment): when every core synthesizes, the threads that feed the device
/// and the whole of a critical proof (its synthesis, device calls, verification) still get
/// a core when they need one.
pub const BACKGROUND_NICE: i32 = 10;

/// How much lower the synthesis of high partitions (WindowPoSt) runs: above the background
/// (CFS gives a nice +5 thread about three times a nice +10 one's share), below the threads
/// that feed the device and critical proofs.
pub const AHEAD_NICE: i32 = 5;

/// The nice increment of a synthesis thread of `class`: none for critical work.
pub(crate) fn synthesis_nice(class: u8) -> Option<i32> {
    match class {
        c if c >= super::CRITICAL => None,
        c if c >= super::HIGH => Some(AHEAD_NICE),
        _ => Some(BACKGROUND_NICE),
    }
}

/// The calling thread's id for getpriority / setpriority.
fn this_tid() -> Option<libc::id_t> {
    libc::id_t::try_from(nix::unistd::gettid().as_raw()).ok()
}

/// The calling thread's nice value.
pub(crate) fn this_thread_nice() -> Option<i32> {
    let tid = this_tid()?;
    // getpriority may return -1 as a value: errno, cleared first, tells an error apart.
    nix::errno::Errno::clear();
    // SAFETY: getpriority takes only integers and reads this thread's own nice value.
    let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, tid) };
    (nix::errno::Errno::last_raw() == 0).then_some(nice)
}

/// Raises the calling thread's nice value by `increment` (Linux sets it per thread). Raising
/// needs no privilege; a failure (a seccomp filter, say) leaves the thread as it was.
pub(crate) fn lower_this_thread(increment: i32) {
    let (Some(tid), Some(now)) = (this_tid(), this_thread_nice()) else {
        return;
    };
    // SAFETY: setpriority takes only integers; PRIO_PROCESS with this thread's own id changes
    // nothing but this thread's nice value.
    let rc = unsafe {
        libc::setpriority(
            libc::PRIO_PROCESS,
            tid,
            now.saturating_add(increment).min(19),
        )
    };
    if rc != 0 {
        tracing::debug!(
            "cannot lower a synthesis thread's priority: {}",
            std::io::Error::last_os_error()
        );
    }
}

/// Pins the calling thread to `cpus` (a device worker to its GPU's NUMA node). A failure (a
/// seccomp filter, CPUs taken away by a cpuset) leaves the thread where it was: placement
/// is a speed-up, never a reason to fail.
pub(crate) fn pin_this_thread(cpus: &[usize]) {
    if let Err(e) = crate::topology::pin_current_thread(cpus) {
        tracing::debug!(error = %e, "cannot pin a thread to its NUMA node");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthesis_pauses_while_a_critical_partition_is_in_flight() {
        // A counter of its own: the process-wide one also counts other tests' critical
        // partitions, which may be in flight now.
        static CLAIMS: AtomicUsize = AtomicUsize::new(0);
        CLAIMS.fetch_add(1, Ordering::SeqCst);
        let paused = std::thread::spawn(|| {
            let t = Instant::now();
            wait_while_claimed(&CLAIMS, MAX_PAUSE);
            t.elapsed()
        });
        std::thread::sleep(Duration::from_millis(50));
        CLAIMS.fetch_sub(1, Ordering::SeqCst);
        let waited = paused.join().unwrap();
        assert!(waited >= Duration::from_millis(40), "{waited:?}");
        assert!(waited < MAX_PAUSE, "{waited:?}");
        // A claim held past the most a pause lasts lets the waiting thread go.
        CLAIMS.fetch_add(1, Ordering::SeqCst);
        let t = Instant::now();
        wait_while_claimed(&CLAIMS, Duration::from_millis(30));
        assert!(t.elapsed() >= Duration::from_millis(30));
        CLAIMS.fetch_sub(1, Ordering::SeqCst);
    }

    #[test]
    fn lowers_only_the_calling_thread() {
        let own = || {
            let tid = libc::id_t::try_from(nix::unistd::gettid().as_raw()).unwrap();
            // SAFETY: as above; reads this thread's nice value.
            unsafe { libc::getpriority(libc::PRIO_PROCESS, tid) }
        };
        let before = own();
        let lowered = std::thread::spawn(move || {
            lower_this_thread(BACKGROUND_NICE);
            own()
        })
        .join()
        .unwrap();
        assert_eq!(lowered, (before + BACKGROUND_NICE).min(19));
        assert_eq!(own(), before, "the spawning thread keeps its priority");
    }
}
