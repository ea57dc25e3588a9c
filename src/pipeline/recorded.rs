//! Recorded circuit shapes ([`R1cs`]), one per parameter set, shared by every job: the first
//! partition of a set records its circuit's constraints; the others, of any job, then
//! synthesize their witness alone (see `crate::synth::shape`). A critical partition never
//! waits for another's recording.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use crate::srs::ParamsId;
use crate::synth::R1cs;

/// The shapes, by parameter set.
#[derive(Default)]
pub(crate) struct ShapeCache {
    slots: Mutex<HashMap<ParamsId, Slot>>,
    /// Signalled when a recording ends (recorded, failed or dropped).
    changed: Condvar,
}

enum Slot {
    /// A partition is recording it.
    Recording,
    Ready(Arc<R1cs>),
}

/// What [`ShapeCache::claim`] gives.
pub(crate) enum Claim<'a> {
    /// The shape is recorded.
    Ready(Arc<R1cs>),
    /// Nobody has recorded it: the caller records it and hands it to [`Recording::done`].
    Record(Recording<'a>),
}

/// The right and duty to record a set's shape; dropped without [`Recording::done`] (the
/// recording failed), the next claimant records it.
pub(crate) struct Recording<'a> {
    cache: &'a ShapeCache,
    id: ParamsId,
    done: bool,
}

/// How often a waiting claimant checks whether its job was stopped.
const POLL: Duration = Duration::from_millis(50);

impl ShapeCache {
    fn lock(&self) -> MutexGuard<'_, HashMap<ParamsId, Slot>> {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The shape of set `id`, or the duty to record it. Waits while another partition
    /// records it (its synthesis uses every part thread: waiting costs nothing); `None` when
    /// `stopped()` turned true meanwhile.
    pub(crate) fn claim(&self, id: &ParamsId, stopped: &dyn Fn() -> bool) -> Option<Claim<'_>> {
        let mut slots = self.lock();
        loop {
            match slots.get(id) {
                Some(Slot::Ready(shape)) => return Some(Claim::Ready(shape.clone())),
                None => {
                    slots.insert(id.clone(), Slot::Recording);
                    return Some(Claim::Record(Recording {
                        cache: self,
                        id: id.clone(),
                        done: false,
                    }));
                }
                Some(Slot::Recording) if stopped() => return None,
                Some(Slot::Recording) => {
                    slots = self
                        .changed
                        .wait_timeout(slots, POLL)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0;
                }
            }
        }
    }

    /// [`ShapeCache::claim`] without waiting: `None` while another partition records it (a
    /// critical partition then records its evaluations rather than wait).
    pub(crate) fn try_claim(&self, id: &ParamsId) -> Option<Claim<'_>> {
        self.claim(id, &|| true)
    }

    /// Whether the shape of set `id` is recorded (not merely being recorded).
    pub(crate) fn is_recorded(&self, id: &ParamsId) -> bool {
        matches!(self.lock().get(id), Some(Slot::Ready(_)))
    }

    /// The shape of set `id`, if recorded.
    #[cfg(test)]
    pub(crate) fn get(&self, id: &ParamsId) -> Option<Arc<R1cs>> {
        match self.lock().get(id) {
            Some(Slot::Ready(shape)) => Some(shape.clone()),
            _ => None,
        }
    }

    /// Drops the shape of set `id` (its parameters were evicted); a recording under way is
    /// not kept when it ends.
    pub(crate) fn evict(&self, id: &ParamsId) {
        let dropped = self.lock().remove(id);
        self.changed.notify_all();
        // Freeing gigabytes happens outside the lock.
        drop(dropped);
    }

    /// Host bytes of the recorded shapes, and of `workers` partitions' working memory on
    /// each (the workers of devices that do not evaluate shapes themselves evaluate and
    /// prove one partition each at a time on the host: [`host_work_bytes`]).
    pub(crate) fn bytes(&self, workers: usize) -> (u64, u64) {
        self.lock()
            .values()
            .filter_map(|slot| match slot {
                Slot::Ready(shape) => {
                    Some((shape.host_bytes(), workers as u64 * host_work_bytes(shape)))
                }
                Slot::Recording => None,
            })
            .fold((0, 0), |(s, w), (a, b)| (s + a, w + b))
    }
}

/// Host bytes a worker that evaluates a partition of `shape` on the host and proves it with
/// the CPU prover holds besides the witness: A, B and C, extended to the evaluation domain
/// by the quotient's transforms, the quotient's scalars for the H MSM, and the
/// assignment's scalar copies for the witness MSMs (`docs/host-memory.md` has the
/// measurement this is checked against).
pub(crate) fn host_work_bytes(shape: &R1cs) -> u64 {
    let domain = (shape.num_constraints() as u64).next_power_of_two();
    let vars = (shape.num_inputs + shape.num_aux) as u64;
    32 * (4 * domain + 2 * vars)
}

impl Recording<'_> {
    /// Makes `shape` the set's.
    pub(crate) fn done(mut self, shape: Arc<R1cs>) {
        let mut slots = self.cache.lock();
        // Evicted meanwhile: not kept.
        if let Some(slot @ Slot::Recording) = slots.get_mut(&self.id) {
            *slot = Slot::Ready(shape);
        }
        self.done = true;
        drop(slots);
        self.cache.changed.notify_all();
    }
}

impl Drop for Recording<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let mut slots = self.cache.lock();
        if matches!(slots.get(&self.id), Some(Slot::Recording)) {
            slots.remove(&self.id);
        }
        drop(slots);
        self.cache.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::srs::ProofKind;

    fn id() -> ParamsId {
        ParamsId {
            kind: ProofKind::PoRep,
            sector_size: 2048,
            cache_id: "test".into(),
        }
    }

    fn shape() -> Arc<R1cs> {
        let (shape, _) = crate::synth::record_shape(Noop).unwrap();
        Arc::new(shape)
    }

    struct Noop;
    impl bellperson::Circuit<blstrs::Scalar> for Noop {
        fn synthesize<CS: bellperson::ConstraintSystem<blstrs::Scalar>>(
            self,
            _: &mut CS,
        ) -> Result<(), bellperson::SynthesisError> {
            Ok(())
        }
    }

    #[test]
    fn one_claimant_records_the_others_wait_and_a_failed_recording_passes_the_duty_on() {
        let cache = ShapeCache::default();
        let never = || false;
        let Some(Claim::Record(first)) = cache.claim(&id(), &never) else {
            panic!("the first claimant records");
        };
        // Another claimant whose job stops while it waits gives up.
        assert!(cache.claim(&id(), &|| true).is_none());
        // The recording fails: the next claimant records.
        drop(first);
        let Some(Claim::Record(second)) = cache.claim(&id(), &never) else {
            panic!("after a failure the next claimant records");
        };
        std::thread::scope(|s| {
            let waiter = s.spawn(|| matches!(cache.claim(&id(), &never), Some(Claim::Ready(_))));
            std::thread::sleep(Duration::from_millis(100));
            second.done(shape());
            assert!(waiter.join().unwrap(), "the waiter gets the recorded shape");
        });
        assert!(cache.get(&id()).is_some());
        assert!(cache.bytes(1).0 > 0 && cache.bytes(1).1 > 0);
        cache.evict(&id());
        assert!(cache.get(&id()).is_none());
        assert_eq!(cache.bytes(1), (0, 0));
    }

    /// A claimant that must not wait records where nobody is, gets the shape where it is
    /// recorded, and gets nothing (at once) while another records it.
    #[test]
    fn a_claimant_that_cannot_wait_records_takes_or_passes() {
        let cache = ShapeCache::default();
        let Some(Claim::Record(r)) = cache.try_claim(&id()) else {
            panic!("nobody records: it records");
        };
        let start = std::time::Instant::now();
        assert!(cache.try_claim(&id()).is_none(), "another records");
        assert!(start.elapsed() < POLL, "without waiting");
        r.done(shape());
        assert!(matches!(cache.try_claim(&id()), Some(Claim::Ready(_))));
    }

    #[test]
    fn a_shape_recorded_after_an_evict_is_not_kept() {
        let cache = ShapeCache::default();
        let Some(Claim::Record(r)) = cache.claim(&id(), &|| false) else {
            panic!("the first claimant records");
        };
        cache.evict(&id());
        r.done(shape());
        assert!(cache.get(&id()).is_none());
    }
}
