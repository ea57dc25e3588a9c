//! Keeps converted parameter sets resident for the life of the process.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

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

type Slot = Arc<Mutex<Option<Arc<Srs>>>>;

/// Loads each parameter set at most once and hands out shared references.
///
/// Two requests for the same set that arrive together load it once: the second waits on the
/// first's slot. Requests for different sets load in parallel.
pub struct SrsCache {
    dir: PathBuf,
    slots: Mutex<HashMap<ParamsId, Slot>>,
}

impl SrsCache {
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

    fn slot(&self, id: &ParamsId) -> Slot {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots.entry(id.clone()).or_default().clone()
    }

    /// The parameter set `id`, loading it if needed. Returns the time spent loading (zero when
    /// it was already resident).
    pub fn get(&self, id: &ParamsId) -> Result<(Arc<Srs>, Duration), SrsError> {
        let slot = self.slot(id);
        let mut guard = slot.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(srs) = guard.as_ref() {
            return Ok((srs.clone(), Duration::ZERO));
        }
        let srs = Arc::new(load_srs(&id.params_file(&self.dir))?);
        tracing::info!(
            params = %srs.path.display(),
            load_ms = srs.load_time.as_millis() as u64,
            gb_per_s = format!("{:.2}", srs.load_rate_gbps()),
            "parameters loaded"
        );
        let load_time = srs.load_time;
        *guard = Some(srs.clone());
        Ok((srs, load_time))
    }

    /// Drops the resident copy of `id` (running proofs keep theirs until they finish).
    /// Returns whether it was resident.
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

    /// The resident sets.
    pub fn loaded(&self) -> Vec<LoadedParams> {
        let slots: Vec<(ParamsId, Slot)> = {
            let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            slots.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
        };
        slots
            .into_iter()
            .filter_map(|(id, slot)| {
                // A slot being loaded right now is skipped rather than waited for.
                let guard = slot.try_lock().ok()?;
                let srs = guard.as_ref()?;
                Some(LoadedParams {
                    id,
                    resident_bytes: srs.resident_bytes(),
                    load_time: srs.load_time,
                })
            })
            .collect()
    }
}
