//! Device room for critical work ([`crate::prover::urgency`]): what urgent callers (a
//! WinningPoSt) keep on the device while other proofs run under memory plans, and how much
//! working memory their turns take. A plan that does not hold everything (a 16 or 24 GB card)
//! frees whatever it does not keep before each proof ([`super::residency::State::make_room`]);
//! without this record it evicted a WinningPoSt's points, tables and shape every time, so
//! that each WinningPoSt uploaded them again, and planned for the whole budget, so that an
//! urgent caller given the device between two phases could find no room for its working
//! buffers. The record is pure: the state notes what urgent callers touched and how far their
//! turns rose, and asks it what a non-urgent caller must leave alone and hold back.

use std::collections::HashSet;

/// What urgent callers have used on the device.
#[derive(Clone, Debug, Default)]
pub(super) struct Critical {
    /// Sets whose points an urgent caller made resident.
    sets: HashSet<u64>,
    /// Log2 sizes of the domains whose NTT tables an urgent caller used.
    domains: HashSet<u32>,
    /// Recorded shapes (their host shapes' addresses) an urgent caller copied to the device.
    shapes: HashSet<usize>,
    /// The most working memory one urgent turn took beyond what it kept (bytes).
    work: u64,
}

impl Critical {
    /// An urgent caller made the points of `set` resident.
    pub(super) fn note_set(&mut self, set: u64) {
        self.sets.insert(set);
    }

    /// An urgent caller used the NTT tables of a domain of 2^`lg`.
    pub(super) fn note_domain(&mut self, lg: u32) {
        self.domains.insert(lg);
    }

    /// An urgent caller copied the recorded shape at `addr` to the device.
    pub(super) fn note_shape(&mut self, addr: usize) {
        self.shapes.insert(addr);
    }

    /// An urgent turn ended having risen `work` bytes above what it left held.
    pub(super) fn note_work(&mut self, work: u64) {
        self.work = self.work.max(work);
    }

    /// The set `set` is gone: its points no longer need room.
    pub(super) fn forget_set(&mut self, set: u64) {
        self.sets.remove(&set);
    }

    /// Whether a caller (urgent or not) must leave the points of `set` resident when it makes
    /// room under its plan: an urgent caller may take anything, another leaves what urgent
    /// callers use.
    pub(super) fn keeps_set(&self, set: u64, caller_urgent: bool) -> bool {
        !caller_urgent && self.sets.contains(&set)
    }

    /// [`Critical::keeps_set`] for the NTT tables of a domain of 2^`lg`.
    pub(super) fn keeps_domain(&self, lg: u32, caller_urgent: bool) -> bool {
        !caller_urgent && self.domains.contains(&lg)
    }

    /// [`Critical::keeps_set`] for the device copy of the recorded shape at `addr`.
    pub(super) fn keeps_shape(&self, addr: usize, caller_urgent: bool) -> bool {
        !caller_urgent && self.shapes.contains(&addr)
    }

    /// Bytes a caller's plan holds back for urgent callers' working buffers: none for an
    /// urgent caller, the most an urgent turn has taken for another.
    pub(super) fn reserve(&self, caller_urgent: bool) -> u64 {
        if caller_urgent {
            0
        } else {
            self.work
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn other_callers_leave_what_urgent_ones_use_and_hold_back_their_work() {
        let mut c = Critical::default();
        assert!(
            !c.keeps_set(3, false) && c.reserve(false) == 0,
            "nothing noted yet"
        );
        c.note_set(3);
        c.note_domain(22);
        c.note_shape(0x1000);
        c.note_work(700 << 20);
        c.note_work(500 << 20);
        // Not urgent: the urgent set's points, tables and shape stay; its largest turn is held
        // back.
        assert!(c.keeps_set(3, false) && !c.keeps_set(4, false));
        assert!(c.keeps_domain(22, false) && !c.keeps_domain(27, false));
        assert!(c.keeps_shape(0x1000, false) && !c.keeps_shape(0x2000, false));
        assert_eq!(c.reserve(false), 700 << 20);
        // Urgent: it may take everything and holds nothing back.
        assert!(!c.keeps_set(3, true) && !c.keeps_domain(22, true) && !c.keeps_shape(0x1000, true));
        assert_eq!(c.reserve(true), 0);
        // A closed set needs no room any more; the work stays (another set of the kind will
        // take as much).
        c.forget_set(3);
        assert!(!c.keeps_set(3, false));
        assert_eq!(c.reserve(false), 700 << 20);
    }
}
