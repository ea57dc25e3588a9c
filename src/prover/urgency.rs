//! Which callers go first where a backend serialises access to a device.
//!
//! The stages mark the thread that proves a critical partition (WinningPoSt) as urgent for
//! the length of the proof. A backend that takes turns on a device gives urgent callers the
//! next turn, and gives other callers none while an urgent proof is in progress (between its
//! device calls too), so that a critical proof waits for at most the one device call in
//! progress when it arrives, not for a whole partition of another job.

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

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

#[cfg(test)]
mod tests {
    use super::*;

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
