//! Admission to synthesis: which waiting partition starts next. Pure bookkeeping, no
//! threads or clocks; [`super::Stages`] drives it under a lock.
//!
//! A partition needs a synthesis permit and a reservation of its host bytes. Waiting
//! partitions are admitted strictly in rank order (class, then job, then partition): when the
//! best one cannot start, nothing behind it overtakes, so a large partition is never starved
//! by smaller ones. Critical partitions may also take the permits held back for them, so a
//! WinningPoSt does not wait for a synthesis slot behind a queue of PoRep partitions, and
//! memory is held back for them too: as much as the largest critical partition admitted so
//! far, which other partitions may not reserve.

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap};

use crate::pipeline::control::Due;

/// The class of critical work (WinningPoSt): the highest.
pub const CRITICAL: u8 = 3;
/// The class of work with a deadline (WindowPoSt), below critical.
pub const HIGH: u8 = 2;

/// A partition's place in line: class first (higher first), then when its job is due
/// (earlier first, no deadline last), then the job's submission sequence, then the partition
/// index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    class: Reverse<u8>,
    due: Due,
    seq: u64,
    partition: usize,
}

impl Key {
    /// The key of partition `partition` of the job ranked (`class`, `seq`).
    pub fn new(class: u8, seq: u64, partition: usize) -> Self {
        Self {
            class: Reverse(class),
            due: Due::Never,
            seq,
            partition,
        }
    }

    /// The same place for a job due at `due`.
    pub fn due(self, due: Due) -> Self {
        Self { due, ..self }
    }

    /// Its class.
    pub fn class(&self) -> u8 {
        self.class.0
    }

    /// Its job's sequence number.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Its partition index.
    pub fn partition(&self) -> usize {
        self.partition
    }
}

/// Permits: how many partitions are synthesized at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GateConfig {
    /// Permits any partition may take.
    pub permits: usize,
    /// Further permits only critical partitions may take.
    pub critical_permits: usize,
}

#[derive(Debug)]
struct Granted {
    bytes: u64,
    /// Holds a synthesis permit (until [`Gate::synthesized`]).
    permit: Option<Permit>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Permit {
    Shared,
    Critical,
}

/// The admission state.
#[derive(Debug)]
pub struct Gate {
    config: GateConfig,
    busy: usize,
    busy_critical: usize,
    reserved: u64,
    /// Of `reserved`, what critical partitions hold.
    reserved_critical: u64,
    /// The largest critical partition admitted so far: held back from other partitions.
    critical_peak: u64,
    waiting: BTreeMap<Key, u64>,
    granted: HashMap<Key, Granted>,
}

impl Gate {
    /// An empty gate.
    pub fn new(config: GateConfig) -> Self {
        Self {
            config: GateConfig {
                permits: config.permits.max(1),
                critical_permits: config.critical_permits,
            },
            busy: 0,
            busy_critical: 0,
            reserved: 0,
            reserved_critical: 0,
            critical_peak: 0,
            waiting: BTreeMap::new(),
            granted: HashMap::new(),
        }
    }

    /// Queues `key`, which will need `bytes` of host memory until [`Gate::release`].
    pub fn wait(&mut self, key: Key, bytes: u64) {
        self.waiting.insert(key, bytes);
    }

    /// Removes a waiting `key` (its job was cancelled); returns whether it was waiting.
    pub fn withdraw(&mut self, key: &Key) -> bool {
        self.waiting.remove(key).is_some()
    }

    /// Removes every waiting key of the job `seq`; returns how many.
    pub fn withdraw_job(&mut self, seq: u64) -> usize {
        let before = self.waiting.len();
        self.waiting.retain(|k, _| k.seq != seq);
        before - self.waiting.len()
    }

    /// Admits waiting partitions in rank order while a permit is free and their bytes fit
    /// within `capacity` beside what is reserved; returns the admitted keys.
    pub fn grant(&mut self, capacity: u64) -> Vec<Key> {
        let mut admitted = Vec::new();
        while let Some((&key, &bytes)) = self.waiting.first_key_value() {
            let permit = if self.busy < self.config.permits {
                Permit::Shared
            } else if key.class() >= CRITICAL && self.busy_critical < self.config.critical_permits {
                Permit::Critical
            } else {
                break;
            };
            let critical = key.class() >= CRITICAL;
            // Memory held back for critical work that is not holding it now.
            let headroom = if critical {
                0
            } else {
                self.critical_peak.saturating_sub(self.reserved_critical)
            };
            if self.reserved.saturating_add(bytes).saturating_add(headroom) > capacity {
                break;
            }
            if critical {
                self.reserved_critical += bytes;
                self.critical_peak = self.critical_peak.max(bytes);
            }
            self.waiting.remove(&key);
            match permit {
                Permit::Shared => self.busy += 1,
                Permit::Critical => self.busy_critical += 1,
            }
            self.reserved += bytes;
            self.granted.insert(
                key,
                Granted {
                    bytes,
                    permit: Some(permit),
                },
            );
            admitted.push(key);
        }
        admitted
    }

    /// `key`'s synthesis ended: its permit is free, and its reservation becomes `bytes`
    /// (what the synthesized partition measured), or nothing when it failed.
    pub fn synthesized(&mut self, key: &Key, bytes: u64) {
        let Some(g) = self.granted.get_mut(key) else {
            return;
        };
        match g.permit.take() {
            Some(Permit::Shared) => self.busy -= 1,
            Some(Permit::Critical) => self.busy_critical -= 1,
            None => {}
        }
        self.reserved = self.reserved - g.bytes + bytes;
        if key.class() >= CRITICAL {
            self.reserved_critical = self.reserved_critical - g.bytes + bytes;
        }
        g.bytes = bytes;
    }

    /// `key`'s host memory is free again (the device consumed it, or it was dropped).
    pub fn release(&mut self, key: &Key) {
        self.synthesized(key, 0);
        self.granted.remove(key);
    }

    /// Bytes reserved now.
    pub fn reserved(&self) -> u64 {
        self.reserved
    }

    /// Of [`Gate::reserved`], what synthesized partitions hold (their measured bytes).
    pub fn synthesized_bytes(&self) -> u64 {
        self.granted
            .values()
            .filter(|g| g.permit.is_none())
            .map(|g| g.bytes)
            .sum()
    }

    /// Partitions waiting for admission.
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    /// Partitions being synthesized.
    pub fn synthesizing(&self) -> usize {
        self.busy + self.busy_critical
    }

    /// Whether `bytes` could ever be admitted for a partition of `class` with `capacity`:
    /// with nothing else reserved.
    pub fn can_fit(&self, class: u8, bytes: u64, capacity: u64) -> bool {
        let headroom = if class >= CRITICAL {
            0
        } else {
            self.critical_peak
        };
        bytes.saturating_add(headroom) <= capacity
    }

    /// Whether `key` is admitted (and not yet released).
    pub fn is_granted(&self, key: &Key) -> bool {
        self.granted.contains_key(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(permits: usize, critical: usize) -> Gate {
        Gate::new(GateConfig {
            permits,
            critical_permits: critical,
        })
    }

    /// The next `n` partitions granted, one at a time (each released before the next).
    fn granted_one_by_one(g: &mut Gate, n: usize) -> Vec<Key> {
        let mut order = Vec::new();
        for _ in 0..n {
            let k = g.grant(u64::MAX);
            assert_eq!(k.len(), 1);
            order.push(k[0]);
            g.release(&k[0]);
        }
        order
    }

    #[test]
    fn within_a_class_the_job_due_first_goes_first_and_no_deadline_last() {
        let now = std::time::Instant::now();
        let at = |s| Due::At(now + std::time::Duration::from_secs(s));
        let mut g = gate(1, 0);
        let keys = [
            Key::new(1, 1, 0),
            Key::new(1, 2, 0).due(at(600)),
            Key::new(1, 3, 0).due(at(60)),
            Key::new(1, 3, 1).due(at(60)),
            Key::new(2, 4, 0),
            Key::new(0, 5, 0).due(at(1)),
        ];
        for k in keys {
            g.wait(k, 1);
        }
        assert_eq!(
            granted_one_by_one(&mut g, keys.len()),
            [keys[4], keys[2], keys[3], keys[1], keys[0], keys[5]],
            "class first, then the earliest due, then the job, then the partition"
        );
    }

    #[test]
    fn rank_orders_class_then_job_then_partition() {
        let mut g = gate(1, 0);
        g.wait(Key::new(1, 5, 0), 1);
        g.wait(Key::new(1, 2, 1), 1);
        g.wait(Key::new(1, 2, 0), 1);
        g.wait(Key::new(2, 9, 0), 1);
        assert_eq!(
            granted_one_by_one(&mut g, 4),
            [
                Key::new(2, 9, 0),
                Key::new(1, 2, 0),
                Key::new(1, 2, 1),
                Key::new(1, 5, 0)
            ]
        );
    }

    #[test]
    fn critical_takes_the_held_back_permit() {
        let mut g = gate(2, 1);
        for p in 0..3 {
            g.wait(Key::new(1, 1, p), 10);
        }
        assert_eq!(g.grant(u64::MAX).len(), 2);
        g.wait(Key::new(CRITICAL, 2, 0), 10);
        assert_eq!(g.grant(u64::MAX), [Key::new(CRITICAL, 2, 0)]);
        // The normal partition still waits: the held-back permit is not its to take.
        assert_eq!(g.waiting(), 1);
        assert_eq!(g.synthesizing(), 3);
    }

    #[test]
    fn a_partition_that_does_not_fit_blocks_those_behind_it() {
        let mut g = gate(4, 0);
        g.wait(Key::new(1, 1, 0), 60);
        g.wait(Key::new(1, 2, 0), 60);
        g.wait(Key::new(1, 3, 0), 10);
        assert_eq!(g.grant(100), [Key::new(1, 1, 0)]);
        assert_eq!(g.reserved(), 60);
        // Synthesis measured less: the rest fits now.
        g.synthesized(&Key::new(1, 1, 0), 30);
        assert_eq!(g.grant(100), [Key::new(1, 2, 0), Key::new(1, 3, 0)]);
        assert_eq!(g.reserved(), 100);
        g.release(&Key::new(1, 1, 0));
        assert_eq!(g.reserved(), 70);
    }

    #[test]
    fn memory_is_held_back_for_critical_work_once_it_was_seen() {
        let mut g = gate(8, 1);
        g.wait(Key::new(CRITICAL, 1, 0), 30);
        assert_eq!(g.grant(100), [Key::new(CRITICAL, 1, 0)]);
        g.release(&Key::new(CRITICAL, 1, 0));
        // Normal partitions may now use 70 of the 100 only.
        for p in 0..3 {
            g.wait(Key::new(1, 2, p), 30);
        }
        assert_eq!(g.grant(100).len(), 2);
        assert!(!g.can_fit(1, 80, 100) && g.can_fit(CRITICAL, 80, 100));
        // A WinningPoSt arriving now finds its 30 free.
        g.wait(Key::new(CRITICAL, 3, 0), 30);
        assert_eq!(g.grant(100), [Key::new(CRITICAL, 3, 0)]);
        assert_eq!(g.reserved(), 90);
    }

    #[test]
    fn withdrawing_a_job_drops_its_waiting_partitions() {
        let mut g = gate(1, 0);
        for p in 0..3 {
            g.wait(Key::new(1, 7, p), 1);
        }
        g.wait(Key::new(1, 8, 0), 1);
        assert_eq!(g.withdraw_job(7), 3);
        assert_eq!(g.grant(u64::MAX), [Key::new(1, 8, 0)]);
    }

    /// A small deterministic generator, so that the property test needs no extra crate.
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self, n: u64) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (self.0 >> 33) % n
        }
    }

    /// What a waiter does whose partition can no longer fit (the memory held back for
    /// critical work grew): it leaves, failing its job. Returns how many left.
    fn withdraw_unfit(g: &mut Gate, capacity: u64) -> usize {
        let unfit: Vec<Key> = g
            .waiting
            .iter()
            .filter(|(k, &b)| !g.can_fit(k.class(), b, capacity))
            .map(|(k, _)| *k)
            .collect();
        unfit.iter().filter(|k| g.withdraw(k)).count()
    }

    /// Random arrivals, sizes, completions and cancellations: the reservation never exceeds
    /// the capacity, permits are never over-used, and every partition is eventually admitted
    /// or withdrawn.
    #[test]
    fn the_budget_is_never_exceeded() {
        for seed in 0..200 {
            let mut rng = Lcg(seed);
            let capacity = 1 + rng.next(1000);
            let permits = 1 + rng.next(4) as usize;
            let mut g = gate(permits, 1);
            let mut admitted: Vec<(Key, u64)> = Vec::new();
            let mut synthesized: Vec<Key> = Vec::new();
            let mut total = 0;
            for seq in 0..300u64 {
                match rng.next(4) {
                    0 | 1 => {
                        // A job of 1-3 partitions that each fit on their own.
                        let class = if rng.next(10) == 0 { CRITICAL } else { 1 };
                        for p in 0..=rng.next(3) as usize {
                            g.wait(Key::new(class, seq, p), 1 + rng.next(capacity));
                            total += 1;
                        }
                    }
                    2 if !admitted.is_empty() => {
                        let (k, b) = admitted.remove(rng.next(admitted.len() as u64) as usize);
                        g.synthesized(&k, rng.next(b + 1));
                        synthesized.push(k);
                    }
                    3 if !synthesized.is_empty() => {
                        let k = synthesized.remove(rng.next(synthesized.len() as u64) as usize);
                        g.release(&k);
                        total -= 1;
                    }
                    _ => {
                        let seq = rng.next(seq + 1);
                        total -= g.withdraw_job(seq);
                    }
                }
                total -= withdraw_unfit(&mut g, capacity);
                for k in g.grant(capacity) {
                    admitted.push((k, g.granted[&k].bytes));
                }
                assert!(g.reserved() <= capacity, "seed {seed}");
                assert!(g.reserved_critical <= g.reserved, "seed {seed}");
                assert!(g.busy <= permits && g.busy_critical <= 1, "seed {seed}");
            }
            // Drain: everything admitted ends, everything waiting gets in.
            while total > 0 {
                for (k, _) in admitted.drain(..) {
                    g.release(&k);
                    total -= 1;
                }
                for k in synthesized.drain(..) {
                    g.release(&k);
                    total -= 1;
                }
                total -= withdraw_unfit(&mut g, capacity);
                for k in g.grant(capacity) {
                    admitted.push((k, 0));
                }
                assert!(g.reserved() <= capacity);
            }
            assert_eq!((g.waiting(), g.reserved()), (0, 0), "seed {seed}");
        }
    }
}
