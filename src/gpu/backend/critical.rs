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
    /// The most working memory one urgent turn took ([`turn_work`], bytes).
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

    /// An urgent turn ended having taken `work` bytes of working memory ([`turn_work`]).
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

/// The device bytes an urgent turn counted at its start, its peak and its end, and of them
/// the state's ([`super::residency::State::kept_bytes`]: resident points, tables, shapes)
/// at its start and end.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct TurnBytes {
    pub start: u64,
    pub peak: u64,
    pub end: u64,
    pub state_start: u64,
    pub state_end: u64,
}

/// The working memory an urgent turn took that other callers must leave it: its rise above
/// the least of what it began and ended with, counting only what is not the state's. The
/// state's growth (points, tables, a shape uploaded for it) stays resident and is kept from
/// eviction for urgent callers, so the next urgent turn finds it there; the state's changes
/// are taken as made before the peak (a turn makes room and uploads first). A turn that
/// ends holding more than it began (an assignment kept for its proof's next turn) counts
/// that too: a caller that lets the device go before such a turn must leave room for it,
/// and for the next turn's rise above it.
pub(super) fn turn_work(t: TurnBytes) -> u64 {
    let other = |total: u64, state: u64| total.saturating_sub(state);
    let peak = other(t.peak, t.state_end);
    let least = other(t.start, t.state_start).min(other(t.end, t.state_end));
    peak.saturating_sub(least)
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

    const MB: u64 = 1 << 20;

    /// A turn that uploads its set's points, rises by its working buffers and gives them back
    /// takes only the buffers: the points stay for the next turn.
    #[test]
    fn a_turns_work_leaves_out_the_state_it_keeps() {
        let t = TurnBytes {
            start: 500 * MB,
            peak: 500 * MB + 60 * MB + 200 * MB,
            end: 560 * MB,
            state_start: 100 * MB,
            state_end: 160 * MB,
        };
        assert_eq!(turn_work(t), 200 * MB);
    }

    /// A proof of two urgent turns that keeps its assignment between them: the first turn's
    /// work counts the assignment it leaves held, the second's the assignment it frees, so
    /// that either turn finds room where a caller let the device go before it.
    #[test]
    fn an_assignment_kept_between_urgent_turns_is_work() {
        let kept = 86 * MB;
        let first = TurnBytes {
            start: 400 * MB,
            peak: 400 * MB + kept + 150 * MB,
            end: 400 * MB + kept,
            state_start: 100 * MB,
            state_end: 100 * MB,
        };
        assert_eq!(turn_work(first), kept + 150 * MB);
        let second = TurnBytes {
            start: 400 * MB + kept,
            peak: 400 * MB + kept + 260 * MB,
            end: 400 * MB,
            state_start: 100 * MB,
            state_end: 100 * MB,
        };
        assert_eq!(turn_work(second), kept + 260 * MB);
    }

    /// A single turn that holds nothing after it measures as before: its peak above its end.
    #[test]
    fn a_single_turn_is_its_peak_above_its_end() {
        let t = TurnBytes {
            start: 300 * MB,
            peak: 700 * MB,
            end: 300 * MB,
            state_start: 120 * MB,
            state_end: 120 * MB,
        };
        assert_eq!(turn_work(t), 400 * MB);
        // An urgent turn that evicted another set's points first: what it freed is not work.
        let evicting = TurnBytes {
            start: 800 * MB,
            peak: 700 * MB,
            end: 300 * MB,
            state_start: 620 * MB,
            state_end: 120 * MB,
        };
        assert_eq!(turn_work(evicting), 400 * MB);
        assert_eq!(turn_work(TurnBytes::default()), 0);
    }
}
