//! Keeps converted parameter sets resident for the life of the process, each with what a
//! backend prepared from it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
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

/// A resident set and what was prepared from it.
struct Entry<P> {
    srs: Arc<Srs>,
    prepared: P,
}

type Slot<P> = Arc<Mutex<Option<Entry<P>>>>;

/// Loads each parameter set at most once, prepares it once (`P`: what a backend keeps for it,
/// e.g. its points on a device; this layer knows nothing of backends) and hands out shared
/// references. Evicting a set drops both, so that a prepared device copy goes with the host
/// copy.
///
/// Two requests for the same set that arrive together load it once: the second waits on the
/// first's slot. Requests for different sets load in parallel.
pub struct SrsCache<P = ()> {
    dir: PathBuf,
    slots: Mutex<HashMap<ParamsId, Slot<P>>>,
}

impl<P: Clone> SrsCache<P> {
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

    fn slot(&self, id: &ParamsId) -> Slot<P> {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots.entry(id.clone()).or_default().clone()
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
    pub fn get_prepared_or<E>(
        &self,
        id: &ParamsId,
        load: impl FnOnce() -> Result<Arc<Srs>, E>,
        prepare: impl FnOnce(&Arc<Srs>) -> Result<P, E>,
    ) -> Result<(Arc<Srs>, P, Duration), E> {
        let slot = self.slot(id);
        let mut guard = slot.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = guard.as_ref() {
            return Ok((e.srs.clone(), e.prepared.clone(), Duration::ZERO));
        }
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
        *guard = Some(Entry {
            srs: srs.clone(),
            prepared: prepared.clone(),
        });
        Ok((srs.clone(), prepared, srs.load_time + prepare_time))
    }

    /// Drops the resident copy of `id` and what was prepared from it (running proofs keep
    /// theirs until they finish). Returns whether it was resident.
    pub fn evict(&self, id: &ParamsId) -> bool {
        let slot = {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            slots.remove(id)
        };
        slot.map(|s| s.lock().unwrap_or_else(|p| p.into_inner()).take().is_some())
            .unwrap_or(false)
    }

    /// Drops every resident set; returns how many there were.
    pub fn evict_all(&self) -> usize {
        let ids: Vec<ParamsId> = {
            let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            slots.keys().cloned().collect()
        };
        ids.iter().filter(|id| self.evict(id)).count()
    }

    /// The resident sets, each with what was prepared from it.
    pub fn loaded_prepared(&self) -> Vec<(LoadedParams, P)> {
        let slots: Vec<(ParamsId, Slot<P>)> = {
            let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            slots.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
        };
        slots
            .into_iter()
            .filter_map(|(id, slot)| {
                // A slot being loaded right now is skipped rather than waited for.
                let guard = slot.try_lock().ok()?;
                let e = guard.as_ref()?;
                Some((
                    LoadedParams {
                        id,
                        resident_bytes: e.srs.resident_bytes(),
                        load_time: e.srs.load_time,
                    },
                    e.prepared.clone(),
                ))
            })
            .collect()
    }

    /// The resident sets.
    pub fn loaded(&self) -> Vec<LoadedParams> {
        self.loaded_prepared().into_iter().map(|(p, _)| p).collect()
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
