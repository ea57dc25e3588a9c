//! Which plan a proof runs under when the device has less room now than its set's plan was
//! made for (another proof keeps its assignment there, another process took some, or urgent
//! callers' turns need room held back). Pure: the room is measured by the caller, and the
//! planner is passed in.

use crate::gpu::plan::{Plan, TooSmall};

/// The plan a proof runs under where `available` bytes are its room now, `reserve` of them
/// already held back for urgent callers' turns, and `plan` is the set's plan: `None` where
/// `plan` fits. Otherwise, in order, the best plan `within` finds for `available`; where none
/// fits, the best for `available + reserve` (the reserve is given up: this proof's pause
/// points then find no room to let an urgent caller in, and it waits for the turn's end);
/// where none fits either, the smallest form, the least any plan asks (`plan` would ask
/// more, and fail where the smallest might not). `None` where the smallest is no smaller
/// than `plan`.
pub(super) fn refit(
    plan: &Plan,
    available: u64,
    reserve: u64,
    within: impl Fn(u64) -> Result<Plan, TooSmall>,
) -> Option<Plan> {
    if available >= plan.budget {
        return None;
    }
    let e = match within(available) {
        Ok(p) => return Some(p),
        Err(e) => e,
    };
    if reserve > 0 {
        if let Ok(p) = within(available.saturating_add(reserve)) {
            return (p.budget < plan.budget).then_some(p);
        }
    }
    let smallest = within(e.need).ok()?;
    (smallest.budget < plan.budget).then_some(smallest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::plan::{self, tests::bits, tests::porep_2k};

    fn within(budget: u64) -> Result<Plan, TooSmall> {
        plan::plan(budget, &porep_2k(), &bits)
    }

    /// The least budget any plan of the 2 KiB set fits.
    fn least() -> u64 {
        match within(0) {
            Err(e) => e.need,
            Ok(_) => panic!("a plan within no memory"),
        }
    }

    #[test]
    fn a_plan_that_fits_is_kept() {
        let full = within(4 << 30).unwrap();
        assert_eq!(refit(&full, full.budget, 0, within), None);
        assert_eq!(refit(&full, full.budget + 1, 1 << 20, within), None);
    }

    #[test]
    fn less_room_gets_the_best_plan_for_it() {
        let full = within(4 << 30).unwrap();
        let room = (least() + full.peak) / 2;
        let got = refit(&full, room, 0, within).expect("a smaller plan");
        assert_eq!(got, within(room).unwrap());
        assert!(got.budget <= room && got.peak < full.peak);
    }

    /// Where nothing fits beside the reserve, the reserve is given up before the smallest
    /// form is taken.
    #[test]
    fn the_reserve_is_given_up_before_the_smallest_form() {
        let full = within(4 << 30).unwrap();
        let least = least();
        let reserve = 100 << 20;
        let room = least - reserve / 2;
        let got = refit(&full, room, reserve, within).expect("a smaller plan");
        assert_eq!(got, within(room + reserve).unwrap());
        assert!(got.budget <= room + reserve);
    }

    /// Where nothing fits at all, the smallest form runs, never the set's full plan, which
    /// asks for more than the whole room.
    #[test]
    fn where_nothing_fits_the_smallest_form_runs() {
        let full = within(4 << 30).unwrap();
        let least = least();
        let got = refit(&full, least / 2, 0, within).expect("the smallest form");
        assert_eq!(got, within(least).unwrap());
        assert!(got.peak < full.peak);
        assert!(
            refit(&full, 0, 50 << 20, within).is_some(),
            "with a reserve too"
        );
        // Already the smallest: nothing smaller to take.
        assert_eq!(refit(&got, least / 2, 0, within), None);
    }
}
