//! Which callers go first where a backend serialises access to a device.
//!
//! The stages mark the thread that proves a critical partition (WinningPoSt) as urgent for
//! the length of the proof. A backend that takes turns on a device gives urgent callers the
//! next turn, and gives other callers none while an urgent proof is in progress (between its
//! device calls too), so that a critical proof waits for at most the one device call in
//! progress when it arrives, not for a whole partition of another job.
//!
//! A critical partition still being synthesized can be announced too ([`expect`]), with the
//! instant its synthesis is expected to end: a backend may then let the device go at a
//! pause point shortly before it arrives ([`expected_soon`]), so that it finds the device
//! free instead of waiting for the next point.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Threads inside [`urgently`], process-wide.
static ACTIVE: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static URGENT: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` with the calling thread marked urgent.
pub fn urgently<T>(f: impl FnOnce() -> T) -> T {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            URGENT.with(|u| u.set(self.0));
            ACTIVE.fetch_sub(1, Ordering::SeqCst);
        }
    }
    ACTIVE.fetch_add(1, Ordering::SeqCst);
    let _restore = Restore(URGENT.with(|u| u.replace(true)));
    f()
}

/// Whether some thread is inside [`urgently`] now.
pub fn any_urgent() -> bool {
    ACTIVE.load(Ordering::SeqCst) > 0
}

/// Whether the calling thread runs inside [`urgently`].
pub fn is_urgent() -> bool {
    URGENT.with(Cell::get)
}

/// How long before an announced critical partition is expected that a caller holding the
/// device lets it go at a pause point ([`expected_soon`]): about the longest stretch between
/// two pause points, so that the last point before the arrival is the one that pauses.
pub const LEAD: Duration = Duration::from_millis(120);

/// How long after its expected instant an announced partition that has not arrived still
/// holds the device: a synthesis a little slower than the last one is still waited for, one
/// much slower is not (the device would stand idle for it).
pub const GRACE: Duration = Duration::from_millis(100);

/// Critical partitions announced and not yet arrived: an id and the expected instant. As
/// many as critical partitions in synthesis, which admission bounds.
static EXPECTED: Mutex<Vec<(u64, Instant)>> = Mutex::new(Vec::new());
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// A critical partition announced as expected at an instant; dropping it withdraws the
/// announcement (when the partition's device stage ends, or it fails or is dropped before).
#[derive(Debug)]
pub struct Expectation {
    id: u64,
}

/// Announces a critical partition expected on the device at `at`.
pub fn expect(at: Instant) -> Expectation {
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    expected().push((id, at));
    Expectation { id }
}

impl Drop for Expectation {
    fn drop(&mut self) {
        expected().retain(|&(id, _)| id != self.id);
    }
}

/// The announcements; a panic while the list was held leaves it usable.
fn expected() -> std::sync::MutexGuard<'static, Vec<(u64, Instant)>> {
    EXPECTED.lock().unwrap_or_else(|p| p.into_inner())
}

/// Whether an announced critical partition is expected on the device within [`LEAD`] of
/// `now`, and is not more than [`GRACE`] overdue.
pub fn expected_soon(now: Instant) -> bool {
    let list = expected();
    soon(list.iter().map(|&(_, at)| at), now, LEAD, GRACE)
}

/// Whether one of the instants `at` lies in [now − grace, now + lead].
fn soon(
    mut at: impl Iterator<Item = Instant>,
    now: Instant,
    lead: Duration,
    grace: Duration,
) -> bool {
    at.any(|at| at <= now + lead && now <= at + grace)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_arrival_is_soon_from_the_lead_before_it_to_the_grace_after() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let (lead, grace) = (ms(120), ms(100));
        let at = t0 + ms(1_000);
        // (now, soon)
        for (now, want) in [
            (t0, false),
            (at - ms(121), false),
            (at - ms(120), true),
            (at, true),
            (at + ms(100), true),
            (at + ms(101), false),
        ] {
            assert_eq!(
                soon([at].into_iter(), now, lead, grace),
                want,
                "{:?} after t0",
                now - t0
            );
        }
        assert!(
            !soon(std::iter::empty(), t0, lead, grace),
            "nothing announced"
        );
        let two = [t0 + ms(5_000), at];
        assert!(soon(two.into_iter(), at, lead, grace), "any of several");
    }

    #[test]
    fn an_announcement_lasts_until_it_is_dropped() {
        // Far in the future, so that other tests' announcements (none exist) and this one
        // cannot be mistaken for each other.
        let far = Instant::now() + Duration::from_secs(3_600);
        assert!(!expected_soon(far));
        let e = expect(far);
        assert!(expected_soon(far), "announced");
        let other = expect(far);
        drop(e);
        assert!(expected_soon(far), "the other still announced");
        drop(other);
        assert!(!expected_soon(far), "withdrawn");
    }

    #[test]
    fn urgency_holds_inside_and_is_restored_after() {
        assert!(!is_urgent());
        urgently(|| {
            assert!(is_urgent() && any_urgent());
            urgently(|| assert!(is_urgent()));
            assert!(is_urgent());
        });
        assert!(!is_urgent());
        let _ = std::panic::catch_unwind(|| urgently(|| panic!("x")));
        assert!(!is_urgent(), "restored after a panic");
    }
}
