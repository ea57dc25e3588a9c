//! The host memory budget as a cap: what the process holds besides partitions, by part, and
//! the room that leaves for partitions and parameter loads. Pure arithmetic; the stages call
//! it under their lock.
//!
//! Two bounds, both kept. The accounted one: the budget less every part the service knows
//! of (parameters, their loads in progress, recorded shapes, page-locked pools and blocks,
//! the process's own memory at start). The measured one, where the daemon gave a probe of
//! the process's resident memory (RSS): everything the process holds now, plus what the
//! partitions being synthesized may still grow to (their whole reservations), plus the new
//! reservation, must fit the budget. The second catches what no part accounts for (a
//! backend's buffers, an allocator's slack, a job's parsed input). It is only applied while
//! something is in flight whose end frees memory; with nothing in flight, waiting could free
//! nothing, and admission goes by the accounted bound alone, so it never stalls.

/// What the process holds besides partitions' reservations, by part.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HeldBytes {
    /// The resident parameter sets' host copies.
    pub params: u64,
    /// Page-locked blocks the devices keep for the resident sets (parked quotient vectors).
    pub device_host: u64,
    /// The page-locked pool synthesized partitions are copied into: its whole limit.
    pub pinned_pool: u64,
    /// Recorded shapes.
    pub shapes: u64,
    /// Per worker of a device that proves on the host (the CPU), one partition's working
    /// memory on each recorded shape.
    pub host_work: u64,
    /// Parameter loads admitted or waiting for room: each its upper bound.
    pub loading: u64,
    /// The process's resident memory when it started proving (code, libraries, a device's
    /// driver state); zero without a probe.
    pub process_base: u64,
}

impl HeldBytes {
    /// All parts together.
    pub fn total(&self) -> u64 {
        [
            self.params,
            self.device_host,
            self.pinned_pool,
            self.shapes,
            self.host_work,
            self.loading,
            self.process_base,
        ]
        .into_iter()
        .fold(0u64, u64::saturating_add)
    }

    /// The parts with their names, as the metrics label them.
    pub fn parts(&self) -> [(&'static str, u64); 7] {
        [
            ("params", self.params),
            ("device_host", self.device_host),
            ("pinned_pool", self.pinned_pool),
            ("shapes", self.shapes),
            ("host_work", self.host_work),
            ("loading", self.loading),
            ("process_base", self.process_base),
        ]
    }
}

/// The process's resident memory now, in bytes; `None` where it cannot be read. The daemon
/// gives one (it reads `/proc`); the library reads nothing itself.
pub type MemoryProbe = Box<dyn Fn() -> Option<u64> + Send + Sync>;

/// What partitions hold now, as the gate counts it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct InFlight {
    /// Reserved by partitions being synthesized: not all of it is resident yet.
    pub synthesizing: u64,
    /// Reserved by synthesized partitions (queued or on a device): resident.
    pub synthesized: u64,
}

/// The most that partitions may reserve in all (what the gate compares its reservations
/// and a new one against): the budget less `held`, and, with `rss` measured while something
/// is in flight, the budget less what the process holds besides its synthesized partitions
/// (`rss − synthesized`), so that `rss + synthesizing + new ≤ budget`.
pub(crate) fn partition_capacity(
    budget: u64,
    held: u64,
    rss: Option<u64>,
    in_flight: InFlight,
) -> u64 {
    let accounted = budget.saturating_sub(held);
    match rss {
        Some(rss) if in_flight.synthesizing > 0 || in_flight.synthesized > 0 => {
            let besides = rss.saturating_sub(in_flight.synthesized);
            accounted.min(budget.saturating_sub(besides))
        }
        _ => accounted,
    }
}

/// Whether a parameter load of `bytes` may start now: it fits beside everything held and
/// reserved (`held` without the load itself), by both bounds.
pub(crate) fn load_fits(
    budget: u64,
    held: u64,
    rss: Option<u64>,
    in_flight: InFlight,
    bytes: u64,
) -> bool {
    let reserved = in_flight.synthesizing.saturating_add(in_flight.synthesized);
    reserved.saturating_add(bytes) <= partition_capacity(budget, held, rss, in_flight)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    #[test]
    fn the_accounted_bound_alone_without_a_probe_or_with_nothing_in_flight() {
        let idle = InFlight::default();
        assert_eq!(partition_capacity(10 * GIB, 4 * GIB, None, idle), 6 * GIB);
        // An RSS above the budget with nothing in flight: waiting would free nothing.
        assert_eq!(
            partition_capacity(10 * GIB, 4 * GIB, Some(11 * GIB), idle),
            6 * GIB
        );
        // Held past the budget: no room, no underflow.
        assert_eq!(partition_capacity(GIB, 2 * GIB, None, idle), 0);
        let held = HeldBytes {
            params: u64::MAX,
            shapes: 1,
            ..HeldBytes::default()
        };
        assert_eq!(held.total(), u64::MAX);
        assert_eq!(held.parts().iter().map(|p| p.1).max(), Some(u64::MAX));
    }

    #[test]
    fn the_measured_bound_counts_what_synthesis_may_still_grow_to() {
        let budget = 10 * GIB;
        // 2 GiB synthesized (resident), 1 GiB being synthesized (partly resident).
        let f = InFlight {
            synthesizing: GIB,
            synthesized: 2 * GIB,
        };
        // RSS matches the accounting (4 held + 2 synthesized + 0.5 grown so far): what
        // synthesis grew so far counts twice (in RSS and in its reservation), so the
        // measured bound is that much below the accounted 6 GiB.
        let rss = 4 * GIB + 2 * GIB + GIB / 2;
        assert_eq!(
            partition_capacity(budget, 4 * GIB, Some(rss), f),
            6 * GIB - GIB / 2
        );
        // RSS 1.5 GiB above the accounting (something unaccounted): partitions get less.
        let rss = rss + GIB;
        let cap = partition_capacity(budget, 4 * GIB, Some(rss), f);
        assert_eq!(cap, budget - (rss - 2 * GIB));
        // A new partition of `b` fits exactly when rss + synthesizing + b ≤ budget.
        let b = cap - 3 * GIB;
        assert_eq!(rss + GIB + b, budget);
        // A load is the same test.
        assert!(load_fits(budget, 4 * GIB, Some(rss), f, b));
        assert!(!load_fits(budget, 4 * GIB, Some(rss), f, b + 1));
        assert!(load_fits(budget, 4 * GIB, None, f, 3 * GIB));
        assert!(!load_fits(budget, 4 * GIB, None, f, 3 * GIB + 1));
    }
}
