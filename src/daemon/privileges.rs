//! Running unprivileged: refuse root unless allowed, drop every capability not needed.
//!
//! Capabilities are per thread on Linux and inherited by threads created later, so
//! [`drop_capabilities`] must run before any other thread exists (the runtime, the workers,
//! rayon's pool).

use caps::{CapSet, Capability, CapsHashSet};
use nix::sys::resource::{getrlimit, Resource};
use nix::unistd::geteuid;

use super::DaemonError;
use crate::config::Config;

/// Refuses to run as root unless `daemon.allow_root` is set.
pub fn check_root(config: &Config) -> Result<(), DaemonError> {
    if geteuid().is_root() {
        if !config.daemon.allow_root {
            return Err(DaemonError::Root);
        }
        tracing::warn!("running as root because daemon.allow_root = true");
    }
    Ok(())
}

/// The capabilities the configuration needs: `CAP_IPC_LOCK` only when the pinned memory
/// exceeds the soft `RLIMIT_MEMLOCK`; nothing else.
fn needed(config: &Config) -> CapsHashSet {
    let mut keep = CapsHashSet::new();
    let limit = getrlimit(Resource::RLIMIT_MEMLOCK)
        .map(|(soft, _)| soft)
        .unwrap_or(0);
    if config.proving.pinned_memory > limit {
        keep.insert(Capability::CAP_IPC_LOCK);
    }
    keep
}

fn names(set: &CapsHashSet) -> String {
    if set.is_empty() {
        return "none".into();
    }
    let mut v: Vec<String> = set.iter().map(|c| c.to_string()).collect();
    v.sort();
    v.join(",")
}

/// Logs the effective capabilities, then drops every capability the configuration does not
/// need from the effective, permitted, inheritable, ambient and (when allowed) bounding sets,
/// and sets `no_new_privs` so that executing a setuid binary cannot regain any.
pub fn drop_capabilities(config: &Config) -> Result<(), DaemonError> {
    let err =
        |what: &str, e: caps::errors::CapsError| DaemonError::Capabilities(format!("{what}: {e}"));
    let effective = caps::read(None, CapSet::Effective).map_err(|e| err("reading", e))?;
    let permitted = caps::read(None, CapSet::Permitted).map_err(|e| err("reading", e))?;
    tracing::info!(effective = %names(&effective), permitted = %names(&permitted), "capabilities at start");
    let wanted = needed(config);
    let keep: CapsHashSet = wanted.intersection(&permitted).copied().collect();
    if keep != wanted {
        tracing::warn!(
            pinned_memory = config.proving.pinned_memory,
            "proving.pinned_memory exceeds RLIMIT_MEMLOCK and CAP_IPC_LOCK is not available; \
             raise LimitMEMLOCK= instead"
        );
    }
    // The bounding set can only shrink while CAP_SETPCAP is effective, so it goes first. An
    // unprivileged process has nothing there it could use anyway, so failures are harmless.
    if effective.contains(&Capability::CAP_SETPCAP) {
        for cap in caps::all().difference(&keep) {
            let _ = caps::drop(None, CapSet::Bounding, *cap);
        }
    }
    caps::clear(None, CapSet::Ambient).map_err(|e| err("clearing the ambient set", e))?;
    caps::clear(None, CapSet::Inheritable).map_err(|e| err("clearing the inheritable set", e))?;
    caps::set(None, CapSet::Effective, &keep).map_err(|e| err("setting the effective set", e))?;
    caps::set(None, CapSet::Permitted, &keep).map_err(|e| err("setting the permitted set", e))?;
    nix::sys::prctl::set_no_new_privs()
        .map_err(|e| DaemonError::Capabilities(format!("no_new_privs: {e}")))?;
    let after = caps::read(None, CapSet::Effective).map_err(|e| err("reading", e))?;
    tracing::info!(effective = %names(&after), "capabilities dropped; no_new_privs set");
    Ok(())
}
