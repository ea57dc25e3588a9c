//! Keeps converted parameter sets resident for the life of the process, each with what a
//! backend prepared from it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::{load_srs, ParamsId, Srs, SrsError};

/// A parameter set that is resident.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LoadedParams {
    /// Which set.
    pub id: ParamsId,
    /// Bytes of converted points in memory.
    pub resident_bytes: u64,
    /// How long loading took.
    pub load_time: Duration,
}

/// What the cache keeps next to a set (`P`), seen as a shared handle: how many handles to
/// it exist, the cache's own included. A set whose handle someone else holds (a running
/// proof) is in use, and is not evicted: dropping the cache's handle would leave that copy
/// alive while the next request loaded another.
pub trait Handle: Clone {
    /// Handles to this value alive now, this one included (1: only the cache's).
    fn holders(&self) -> usize;
}

impl<T: ?Sized> Handle for Arc<T> {
    fn holders(&self) -> usize {
        Arc::strong_count(self)
    }
}

/// Nothing prepared: nothing to hold (the set's users hold its `Arc<Srs>`, which the cache
/// does not count).
impl Handle for () {
    fn holders(&self) -> usize {
        1
    }
}

/// Why [`SrsCache::evict`] left a set resident.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EvictError {
    /// The set is being loaded (or prepared) right now, for a preload or a proof.
    #[error("parameter set {0} is being loaded; evict it once the load has finished")]
    Loading(String),
    /// Something besides the cache holds the set: a proof running on it.
    #[error(
        "parameter set {id} is in use ({users} holder(s) besides the cache: running proofs); \
         evict it once they have finished"
    )]
    InUse {
        /// The set's cache identifier.
        id: String,
        /// Holders besides the cache.
        users: usize,
    },
}

/// How long [`SrsCache::evict`] lets other holders of a set let go before it calls the set
/// in use: a report of the resident sets holds each one for microseconds, a proof for
/// minutes.
const EVICT_GRACE: Duration = Duration::from_millis(50);

/// A resident set and what was prepared from it.
struct Entry<P> {
    srs: Arc<Srs>,
    prepared: P,
}

/// Where one set stands. The slot's lock is only ever held for a moment: loading,
/// preparing and freeing happen outside it, the state telling others to wait.
enum State<P> {
    /// Not resident.
    Empty,
    /// Someone is loading and preparing it; others wait for the outcome.
    Loading,
    /// Resident.
    Ready(Entry<P>),
    /// Being freed by an eviction; a load waits until it is gone.
    Dropping,
}

/// One set's place in the cache, made on the first request for it and never removed, so
/// that every request for a set meets every other at the same slot.
struct Slot<P> {
    state: Mutex<State<P>>,
    /// Signalled whenever `state` leaves `Loading` or `Dropping`.
    changed: Condvar,
}

impl<P> Slot<P> {
    fn lock(&self) -> MutexGuard<'_, State<P>> {
        // Every change is one assignment: the state is consistent after a panic elsewhere.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn set(&self, state: State<P>) {
        *self.lock() = state;
        self.changed.notify_all();
    }
}

/// Puts a slot back to `Empty` when a load or a drop ends without reaching its own end
/// (an error, or a panic in `load`, `prepare` or a destructor), so that waiters go on.
struct Reset<'a, P> {
    slot: &'a Slot<P>,
    armed: bool,
}

impl<P> Drop for Reset<'_, P> {
    fn drop(&mut self) {
        if self.armed {
            self.slot.set(State::Empty);
        }
    }
}

/// Loads each parameter set at most once, prepares it once (`P`: what a backend keeps for it,
/// e.g. its points on a device; this layer knows nothing of backends) and hands out shared
/// references. Evicting a set drops both, so that a prepared device copy goes with the host
/// copy.
///
/// **Single flight.** At most one load of a set is in flight, and at most one copy of it is
/// alive, whatever the interleaving of requests and evictions: requests for a set that is
/// being loaded wait for that load (and share its result, or load again after it failed);
/// an eviction never drops a set that is being loaded ([`EvictError::Loading`]) or that
/// someone else still holds ([`EvictError::InUse`]), and a load that arrives while an
/// eviction frees the set waits until it is gone. Requests for different sets load in
/// parallel.
pub struct SrsCache<P = ()> {
    dir: PathBuf,
    slots: Mutex<HashMap<ParamsId, Arc<Slot<P>>>>,
}

impl<P: Handle> SrsCache<P> {
    /// A cache over the parameter directory `dir`.
    pub fn new(dir: PathBuf) -> Self {
        Self {
            dir,
            slots: Mutex::new(HashMap::new()),
        }
    }

    /// The parameter directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The slot of `id`, made if it has none yet.
    fn slot(&self, id: &ParamsId) -> Arc<Slot<P>> {
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        slots
            .entry(id.clone())
            .or_insert_with(|| {
                Arc::new(Slot {
                    state: Mutex::new(State::Empty),
                    changed: Condvar::new(),
                })
            })
            .clone()
    }

    /// Every slot made so far.
    fn slots(&self) -> Vec<(ParamsId, Arc<Slot<P>>)> {
        let slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        slots.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }

    /// The parameter set `id` and what `prepare` made of it, loading and preparing it if
    /// needed. Returns the time spent loading and preparing (zero when it was resident). When
    /// `prepare` fails nothing is kept: the next call loads the set again.
    pub fn get_prepared<E: From<SrsError>>(
        &self,
        id: &ParamsId,
        prepare: impl FnOnce(&Arc<Srs>) -> Result<P, E>,
    ) -> Result<(Arc<Srs>, P, Duration), E> {
        let file = id.params_file(&self.dir);
        let load = || load_srs(&file).map(Arc::new).map_err(E::from);
        self.get_prepared_or(id, load, prepare)
    }

    /// [`Self::get_prepared`] with `load` making the set where it is not resident (instead
    /// of reading its file): parameters built in memory, such as a benchmark's synthetic set.
    /// While one call loads a set, the others for it wait and then share it (or, when that
    /// load failed, the next of them loads it).
    pub fn get_prepared_or<E>(
        &self,
        id: &ParamsId,
        load: impl FnOnce() -> Result<Arc<Srs>, E>,
        prepare: impl FnOnce(&Arc<Srs>) -> Result<P, E>,
    ) -> Result<(Arc<Srs>, P, Duration), E> {
        let slot = self.slot(id);
        {
            let mut state = slot.lock();
            loop {
                match &*state {
                    State::Ready(e) => {
                        return Ok((e.srs.clone(), e.prepared.clone(), Duration::ZERO))
                    }
                    State::Empty => break,
                    State::Loading | State::Dropping => {
                        state = slot
                            .changed
                            .wait(state)
                            .unwrap_or_else(PoisonError::into_inner);
                    }
                }
            }
            *state = State::Loading;
        }
        // From here until it is resident, this call is the set's one load in flight.
        let mut reset = Reset {
            slot: &slot,
            armed: true,
        };
        let srs = load()?;
        tracing::info!(
            params = %srs.path.display(),
            load_ms = srs.load_time.as_millis() as u64,
            gb_per_s = format!("{:.2}", srs.load_rate_gbps()),
            "parameters loaded"
        );
        let t = Instant::now();
        let prepared = prepare(&srs)?;
        let prepare_time = t.elapsed();
        tracing::debug!(
            params = %srs.path.display(),
            prepare_ms = prepare_time.as_millis() as u64,
            "parameters prepared"
        );
        reset.armed = false;
        slot.set(State::Ready(Entry {
            srs: srs.clone(),
            prepared: prepared.clone(),
        }));
        Ok((srs.clone(), prepared, srs.load_time + prepare_time))
    }

    /// Drops the resident copy of `id` and what was prepared from it. Returns whether it was
    /// resident (a set that is not is not an error). Refused, and the set left as it is,
    /// while the set is being loaded ([`EvictError::Loading`]: an eviction neither waits for
    /// a load nor cancels it) or while something besides the cache still holds it after a
    /// short grace ([`EvictError::InUse`]: a proof running on it), so that no copy outlives
    /// its eviction beside the next load's.
    pub fn evict(&self, id: &ParamsId) -> Result<bool, EvictError> {
        let slot = {
            let slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
            match slots.get(id) {
                Some(slot) => slot.clone(),
                None => return Ok(false),
            }
        };
        let deadline = Instant::now() + EVICT_GRACE;
        let entry = loop {
            let mut state = slot.lock();
            match &*state {
                // Gone, or going: another eviction frees it.
                State::Empty | State::Dropping => return Ok(false),
                State::Loading => return Err(EvictError::Loading(id.cache_id.clone())),
                State::Ready(e) => {
                    let users = e.prepared.holders().saturating_sub(1);
                    if users == 0 {
                        match std::mem::replace(&mut *state, State::Dropping) {
                            State::Ready(e) => break e,
                            // Unreachable: matched Ready under the same lock.
                            other => {
                                *state = other;
                                return Ok(false);
                            }
                        }
                    }
                    if Instant::now() >= deadline {
                        return Err(EvictError::InUse {
                            id: id.cache_id.clone(),
                            users,
                        });
                    }
                }
            }
            drop(state);
            std::thread::sleep(Duration::from_millis(1));
        };
        // Freed outside the lock (gigabytes; a device's memory), with loads of the set held
        // off until it is gone.
        let reset = Reset {
            slot: &slot,
            armed: true,
        };
        let path = entry.srs.path.clone();
        drop(entry);
        drop(reset);
        tracing::info!(params = %path.display(), "parameters evicted");
        Ok(true)
    }

    /// Drops every resident set that is not in use (see [`Self::evict`]); returns how many
    /// there were.
    pub fn evict_all(&self) -> usize {
        self.slots()
            .iter()
            .filter(|(id, _)| self.evict(id) == Ok(true))
            .count()
    }

    /// The resident sets, each with what was prepared from it.
    pub fn loaded_prepared(&self) -> Vec<(LoadedParams, P)> {
        self.resident(|e| e.prepared.clone())
    }

    /// The resident sets.
    pub fn loaded(&self) -> Vec<LoadedParams> {
        self.resident(|_| ()).into_iter().map(|(p, ())| p).collect()
    }

    /// `f` of every resident set (sets being loaded or freed are not).
    fn resident<T>(&self, f: impl Fn(&Entry<P>) -> T) -> Vec<(LoadedParams, T)> {
        self.slots()
            .into_iter()
            .filter_map(|(id, slot)| {
                let state = slot.lock();
                let State::Ready(e) = &*state else {
                    return None;
                };
                Some((
                    LoadedParams {
                        id,
                        resident_bytes: e.srs.resident_bytes(),
                        load_time: e.srs.load_time,
                    },
                    f(e),
                ))
            })
            .collect()
    }
}

impl SrsCache<()> {
    /// The parameter set `id`, loading it if needed (nothing prepared). Returns the time spent
    /// loading (zero when it was already resident).
    pub fn get(&self, id: &ParamsId) -> Result<(Arc<Srs>, Duration), SrsError> {
        self.get_prepared(id, |_| Ok::<(), SrsError>(()))
            .map(|(srs, (), t)| (srs, t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::srs::ProofKind;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn id(n: u64) -> ParamsId {
        ParamsId {
            kind: ProofKind::PoRep,
            sector_size: 2048,
            cache_id: format!("test-{n}"),
        }
    }

    /// A set of one point per section, built in memory.
    fn tiny_srs() -> Arc<Srs> {
        Arc::new(Srs::of_generators(1, 1, 1))
    }

    /// Counts loads in flight and copies alive: a copy is a `Resident` value, made by the
    /// counting loader's `prepare` and counted until its last handle is dropped.
    #[derive(Default)]
    struct Counters {
        loading: AtomicUsize,
        max_loading: AtomicUsize,
        loads: AtomicUsize,
        alive: AtomicUsize,
        max_alive: AtomicUsize,
    }

    struct Resident(Arc<Counters>);

    impl Drop for Resident {
        fn drop(&mut self) {
            self.0.alive.fetch_sub(1, Ordering::SeqCst);
        }
    }

    type Cache = SrsCache<Arc<Resident>>;

    /// Loads `id` through `cache` the way the proving service does, slowly (so that loads
    /// and evictions overlap), counting.
    fn load(cache: &Cache, id: &ParamsId, c: &Arc<Counters>) -> Arc<Resident> {
        let (_, copy, _) = cache
            .get_prepared_or(
                id,
                || {
                    let now = c.loading.fetch_add(1, Ordering::SeqCst) + 1;
                    c.max_loading.fetch_max(now, Ordering::SeqCst);
                    c.loads.fetch_add(1, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(3));
                    Ok::<_, SrsError>(tiny_srs())
                },
                |_| {
                    std::thread::sleep(Duration::from_millis(2));
                    let alive = c.alive.fetch_add(1, Ordering::SeqCst) + 1;
                    c.max_alive.fetch_max(alive, Ordering::SeqCst);
                    c.loading.fetch_sub(1, Ordering::SeqCst);
                    Ok(Arc::new(Resident(c.clone())))
                },
            )
            .unwrap();
        copy
    }

    /// The hostile client loop of issue 16: threads preloading, evicting and proving (holding
    /// the set for a while) all at once. At most one load of the set is ever in flight and
    /// at most one copy of it is ever alive; evictions that meet a load or a holder are
    /// refused, the others drop the set.
    #[test]
    fn concurrent_preload_evict_and_proofs_load_once_at_a_time_and_keep_one_copy() {
        let cache = Cache::new(PathBuf::new());
        let c = Arc::new(Counters::default());
        let (evicted, loading, in_use) = (
            AtomicUsize::new(0),
            AtomicUsize::new(0),
            AtomicUsize::new(0),
        );
        std::thread::scope(|s| {
            for t in 0..8 {
                let (cache, c) = (&cache, &c);
                let (evicted, loading, in_use) = (&evicted, &loading, &in_use);
                s.spawn(move || {
                    for i in 0..150 {
                        match (t + i) % 3 {
                            // Preload: load, let go at once.
                            0 => drop(load(cache, &id(0), c)),
                            // A proof: holds the set while it runs, now and then for
                            // longer than an eviction's grace.
                            1 => {
                                let held = load(cache, &id(0), c);
                                let long = EVICT_GRACE + Duration::from_millis(10);
                                let hold = if i % 30 == 1 {
                                    long
                                } else {
                                    Duration::from_micros(300)
                                };
                                std::thread::sleep(hold);
                                drop(held);
                            }
                            _ => match cache.evict(&id(0)) {
                                Ok(true) => {
                                    evicted.fetch_add(1, Ordering::SeqCst);
                                }
                                Ok(false) => {}
                                Err(EvictError::Loading(_)) => {
                                    loading.fetch_add(1, Ordering::SeqCst);
                                }
                                Err(EvictError::InUse { users, .. }) => {
                                    assert!(users > 0);
                                    in_use.fetch_add(1, Ordering::SeqCst);
                                }
                            },
                        }
                    }
                });
            }
        });
        let n = |a: &AtomicUsize| a.load(Ordering::SeqCst);
        println!(
            "{} loads; evictions: {} done, {} refused while loading, {} while in use",
            n(&c.loads),
            n(&evicted),
            n(&loading),
            n(&in_use)
        );
        assert_eq!(n(&c.max_loading), 1, "one load in flight at most");
        assert_eq!(n(&c.max_alive), 1, "one copy alive at most");
        assert!(n(&evicted) > 0, "some evictions went through");
        assert!(
            n(&loading) > 0 && n(&in_use) > 0,
            "some met a load, some a holder"
        );
        let resident = cache.loaded().len();
        assert_eq!(
            n(&c.loads),
            n(&evicted) + resident,
            "a load only where no copy was resident"
        );
        assert_eq!(n(&c.alive), resident, "only the cache's copy is left");
        assert_eq!(cache.evict(&id(0)), Ok(resident == 1));
        assert_eq!(n(&c.alive), 0, "evicted and not held: freed");
        assert!(cache.loaded().is_empty());
    }

    /// An eviction while the set loads is refused at once (it neither waits nor cancels);
    /// one while a proof holds it is refused after the grace; once the holder is gone it
    /// goes through. A failed load leaves nothing, and the next request loads again.
    #[test]
    fn evict_is_refused_while_loading_or_held_and_a_failed_load_passes_the_duty_on() {
        let cache = Cache::new(PathBuf::new());
        let c = Arc::new(Counters::default());
        let (started, release) = (std::sync::Barrier::new(2), std::sync::Barrier::new(2));
        std::thread::scope(|s| {
            let loader = s.spawn(|| {
                cache
                    .get_prepared_or(
                        &id(1),
                        || {
                            started.wait();
                            release.wait();
                            Ok::<_, SrsError>(tiny_srs())
                        },
                        |_| {
                            c.alive.fetch_add(1, Ordering::SeqCst);
                            Ok(Arc::new(Resident(c.clone())))
                        },
                    )
                    .map(|(_, copy, _)| copy)
            });
            started.wait();
            let t = Instant::now();
            assert_eq!(
                cache.evict(&id(1)),
                Err(EvictError::Loading("test-1".into()))
            );
            assert!(t.elapsed() < EVICT_GRACE, "refused without waiting");
            assert!(cache.loaded().is_empty(), "not resident while loading");
            release.wait();
            let held = loader.join().unwrap().unwrap();
            let t = Instant::now();
            assert_eq!(
                cache.evict(&id(1)),
                Err(EvictError::InUse {
                    id: "test-1".into(),
                    users: 1
                })
            );
            assert!(t.elapsed() >= EVICT_GRACE, "the grace was given");
            assert_eq!(cache.loaded().len(), 1, "still resident");
            drop(held);
            assert_eq!(cache.evict(&id(1)), Ok(true));
            assert_eq!(c.alive.load(Ordering::SeqCst), 0);
            assert_eq!(cache.evict(&id(1)), Ok(false), "evicted already");
        });
        // A load that fails keeps nothing; the next one loads.
        let failed = cache.get_prepared_or(
            &id(2),
            || Err::<Arc<Srs>, _>(SrsError::Missing { path: "x".into() }),
            |_| unreachable!("not loaded"),
        );
        assert!(failed.is_err());
        assert!(cache.loaded().is_empty());
        drop(load(&cache, &id(2), &c));
        assert_eq!(cache.loaded().len(), 1);
        // A load that panics does not leave its waiters waiting.
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            cache.get_prepared_or(
                &id(3),
                || -> Result<Arc<Srs>, SrsError> { panic!("a loader's bug") },
                |_| unreachable!("not loaded"),
            )
        }));
        assert!(panicked.is_err());
        drop(load(&cache, &id(3), &c));
        assert_eq!(cache.evict_all(), 2);
        assert_eq!(c.alive.load(Ordering::SeqCst), 0);
    }
}
