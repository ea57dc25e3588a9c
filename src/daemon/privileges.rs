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

/// The capability sets a process holds, as read at start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CapState {
    /// The effective set.
    pub effective: CapsHashSet,
    /// The permitted set.
    pub permitted: CapsHashSet,
    /// The inheritable set.
    pub inheritable: CapsHashSet,
    /// The ambient set.
    pub ambient: CapsHashSet,
}

/// The changes that bring `now` down to `keep` (already limited to what is permitted). Each
/// one is a system call; a set that already holds what it should is left alone, because a
/// sandbox may forbid the call itself (systemd's `SystemCallFilter=~@privileged` denies
/// `capset` with EPERM even when the call would change nothing).
pub fn changes(now: &CapState, keep: &CapsHashSet) -> Vec<CapChange> {
    let mut out = Vec::new();
    if !now.ambient.is_empty() {
        out.push(CapChange::ClearAmbient);
    }
    if !now.inheritable.is_empty() {
        out.push(CapChange::ClearInheritable);
    }
    if now.effective != *keep || now.permitted != *keep {
        out.push(CapChange::SetEffectiveAndPermitted);
    }
    out
}

/// One change [`changes`] asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CapChange {
    /// Empty the ambient set.
    ClearAmbient,
    /// Empty the inheritable set.
    ClearInheritable,
    /// Set the effective and then the permitted set to the kept capabilities.
    SetEffectiveAndPermitted,
}

fn read_state() -> Result<CapState, DaemonError> {
    let read = |set| caps::read(None, set).map_err(|e| cap_err("reading", e));
    Ok(CapState {
        effective: read(CapSet::Effective)?,
        permitted: read(CapSet::Permitted)?,
        inheritable: read(CapSet::Inheritable)?,
        ambient: read(CapSet::Ambient)?,
    })
}

fn cap_err(what: &str, e: caps::errors::CapsError) -> DaemonError {
    DaemonError::Capabilities(format!("{what}: {e}"))
}

fn apply(change: CapChange, keep: &CapsHashSet) -> Result<(), DaemonError> {
    match change {
        CapChange::ClearAmbient => {
            caps::clear(None, CapSet::Ambient).map_err(|e| cap_err("clearing the ambient set", e))
        }
        CapChange::ClearInheritable => caps::clear(None, CapSet::Inheritable)
            .map_err(|e| cap_err("clearing the inheritable set", e)),
        CapChange::SetEffectiveAndPermitted => {
            caps::set(None, CapSet::Effective, keep)
                .map_err(|e| cap_err("setting the effective set", e))?;
            caps::set(None, CapSet::Permitted, keep)
                .map_err(|e| cap_err("setting the permitted set", e))
        }
    }
}

/// Logs the capabilities held at start, then drops every capability the configuration does
/// not need from the effective, permitted, inheritable, ambient and (when allowed) bounding
/// sets, and sets `no_new_privs` so that executing a setuid binary cannot regain any. Sets
/// that already hold nothing more than they should are not touched (see [`changes`]); a
/// change that is needed and fails is fatal.
pub fn drop_capabilities(config: &Config) -> Result<(), DaemonError> {
    let now = read_state()?;
    tracing::info!(
        effective = %names(&now.effective),
        permitted = %names(&now.permitted),
        inheritable = %names(&now.inheritable),
        ambient = %names(&now.ambient),
        "capabilities at start"
    );
    let wanted = needed(config);
    let keep: CapsHashSet = wanted.intersection(&now.permitted).copied().collect();
    if keep != wanted {
        tracing::warn!(
            pinned_memory = config.proving.pinned_memory,
            "proving.pinned_memory exceeds RLIMIT_MEMLOCK and CAP_IPC_LOCK is not available; \
             raise LimitMEMLOCK= instead"
        );
    }
    // The bounding set can only shrink while CAP_SETPCAP is effective, so it goes first. An
    // unprivileged process has nothing there it could use anyway, so failures are harmless.
    if now.effective.contains(&Capability::CAP_SETPCAP) {
        for cap in caps::all().difference(&keep) {
            let _ = caps::drop(None, CapSet::Bounding, *cap);
        }
    }
    let todo = changes(&now, &keep);
    for change in &todo {
        apply(*change, &keep)?;
    }
    set_no_new_privs()?;
    let after = caps::read(None, CapSet::Effective).map_err(|e| cap_err("reading", e))?;
    tracing::info!(
        effective = %names(&after),
        changed = todo.len(),
        "capabilities dropped; no_new_privs set"
    );
    Ok(())
}

/// Sets `no_new_privs` unless it is set already (systemd's `NoNewPrivileges=yes` does).
fn set_no_new_privs() -> Result<(), DaemonError> {
    if nix::sys::prctl::get_no_new_privs().unwrap_or(false) {
        return Ok(());
    }
    nix::sys::prctl::set_no_new_privs()
        .map_err(|e| DaemonError::Capabilities(format!("no_new_privs: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(caps: &[Capability]) -> CapsHashSet {
        caps.iter().copied().collect()
    }

    #[test]
    fn nothing_to_change_means_no_system_call() {
        // The packaged service: User=cuzk, CapabilityBoundingSet= empty, so every set is
        // empty and the sandbox forbids capset; nothing may be attempted.
        assert!(changes(&CapState::default(), &CapsHashSet::new()).is_empty());
        let ipc = set(&[Capability::CAP_IPC_LOCK]);
        let holds_ipc = CapState {
            effective: ipc.clone(),
            permitted: ipc.clone(),
            ..CapState::default()
        };
        assert!(changes(&holds_ipc, &ipc).is_empty());
    }

    #[test]
    fn every_set_holding_more_than_kept_is_changed() {
        let root = set(&[Capability::CAP_SYS_ADMIN, Capability::CAP_IPC_LOCK]);
        let now = CapState {
            effective: root.clone(),
            permitted: root.clone(),
            inheritable: set(&[Capability::CAP_SYS_ADMIN]),
            ambient: set(&[Capability::CAP_SYS_ADMIN]),
        };
        assert_eq!(
            changes(&now, &CapsHashSet::new()),
            vec![
                CapChange::ClearAmbient,
                CapChange::ClearInheritable,
                CapChange::SetEffectiveAndPermitted
            ]
        );
        // Permitted but not effective still has to go.
        let latent = CapState {
            permitted: root,
            ..CapState::default()
        };
        assert_eq!(
            changes(&latent, &CapsHashSet::new()),
            vec![CapChange::SetEffectiveAndPermitted]
        );
    }
}
