//! systemd notifications: readiness, status line, watchdog, stopping and drain extensions.
//!
//! Every function is a no-op when `NOTIFY_SOCKET` is not set (or for the in-process daemon of
//! `cuzk demo`, which passes none). The variables come from [`super::Environment`]; nothing here
//! reads the environment.

use std::ffi::OsStr;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::sync::Arc;
use std::time::Duration;

use sd_notify::NotifyState;

use crate::engine::{Engine, JobState};
use crate::pipeline::ProvingService;

/// Sends notifications to systemd, or nowhere.
///
/// Datagrams are sent non-blocking: a service manager that does not read its socket (a full
/// queue holds only `net.unix.max_dgram_qlen` datagrams, 10 by default) must never stall the
/// daemon, so a notification that does not fit is dropped (and logged at debug level).
#[derive(Clone, Debug)]
pub struct Notifier {
    target: Option<Arc<SocketAddr>>,
}

impl Notifier {
    /// A notifier that talks to `socket`, the value of `NOTIFY_SOCKET` (a path, or `@name` in
    /// the abstract namespace), or nowhere for `None`.
    pub fn new(socket: Option<&OsStr>) -> Self {
        let target = socket.and_then(|raw| match notify_addr(raw) {
            Ok(addr) => Some(Arc::new(addr)),
            Err(e) => {
                tracing::warn!("ignoring NOTIFY_SOCKET={raw:?}: {e}");
                None
            }
        });
        Self { target }
    }

    /// Sends `states`; failures are logged, never fatal, and never block.
    pub fn send(&self, states: &[NotifyState<'_>]) {
        let Some(addr) = &self.target else { return };
        let mut msg = String::new();
        for s in states {
            msg.push_str(&format!("{s}\n"));
        }
        let sent = UnixDatagram::unbound().and_then(|sock| {
            sock.set_nonblocking(true)?;
            sock.send_to_addr(msg.as_bytes(), addr)
        });
        if let Err(e) = sent {
            tracing::debug!("sd_notify {:?} not delivered: {e}", msg.trim_end());
        }
    }
}

fn notify_addr(raw: &std::ffi::OsStr) -> std::io::Result<SocketAddr> {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::ffi::OsStrExt;
    match raw.as_bytes().strip_prefix(b"@") {
        Some(name) => SocketAddr::from_abstract_name(name),
        None => SocketAddr::from_pathname(raw),
    }
}

/// The watchdog interval systemd asked for: `usec` (`WATCHDOG_USEC`), for this process if
/// `pid` (`WATCHDOG_PID`) is given, if any.
pub fn watchdog_interval(usec: Option<&str>, pid: Option<&str>) -> Option<Duration> {
    let usec: u64 = usec?.parse().ok()?;
    if let Some(pid) = pid {
        if pid.parse::<u32>().ok()? != std::process::id() {
            return None;
        }
    }
    (usec > 0).then(|| Duration::from_micros(usec))
}

/// The one-line summary systemd shows in `systemctl status`: the jobs, and how many devices
/// are quarantined where any is. Counts only, never a device's name or error (`cuzk status`
/// has those), so the line stays short whatever the devices say.
pub fn status_line(engine: &Engine, service: &ProvingService) -> String {
    let s = engine.stats();
    let mut line = format!(
        "queued {}, running {}, done {}, failed {}, cancelled {}",
        s.queued,
        s.running,
        s.count(JobState::Succeeded),
        s.count(JobState::Failed),
        s.count(JobState::Cancelled)
    );
    line.push_str(&quarantine_note(quarantined(service)));
    line
}

/// Devices quarantined now (a probe in progress included).
fn quarantined(service: &ProvingService) -> usize {
    service
        .health()
        .iter()
        .filter(|d| d.is_quarantined())
        .count()
}

/// The status line's note of `n` quarantined devices: nothing for none.
fn quarantine_note(n: usize) -> String {
    match n {
        0 => String::new(),
        1 => ", 1 device quarantined".into(),
        n => format!(", {n} devices quarantined"),
    }
}

/// Sends `WATCHDOG=1` every half interval, but only while the workers pass the liveness
/// check: a wedged engine stops the keep-alives and systemd restarts the daemon.
pub async fn watchdog_loop(notifier: Notifier, engine: Arc<Engine>, interval: Duration) {
    let period = interval / 2;
    tracing::info!(
        interval_ms = interval.as_millis() as u64,
        "watchdog enabled"
    );
    loop {
        tokio::time::sleep(period).await;
        let probe = engine.clone();
        let within = (period / 4).max(Duration::from_millis(10));
        match tokio::task::spawn_blocking(move || probe.liveness(within)).await {
            Ok(Ok(())) => notifier.send(&[NotifyState::Watchdog]),
            Ok(Err(why)) => tracing::error!("liveness check failed, withholding WATCHDOG=1: {why}"),
            Err(e) => tracing::error!("liveness check panicked, withholding WATCHDOG=1: {e}"),
        }
    }
}

/// Keeps `STATUS=` up to date as jobs change state and devices enter or leave quarantine
/// (which happens in the middle of a job), until the drain takes over the line.
pub async fn status_loop(notifier: Notifier, engine: Arc<Engine>, service: Arc<ProvingService>) {
    let mut changes = engine.changes();
    let mut health = service.health_changes();
    let mut last = String::new();
    loop {
        if engine.is_shutting_down() {
            return;
        }
        let line = status_line(&engine, &service);
        if line != last {
            notifier.send(&[NotifyState::Status(&line)]);
            last = line;
        }
        let engine_gone = tokio::select! {
            r = changes.changed() => r.is_err(),
            // The stages live as long as the service this holds: their sender never goes.
            Ok(()) = health.changed() => false,
        };
        if engine_gone {
            return;
        }
        // Coalesce bursts (a queue of submissions) into one update.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nothing for no quarantined device; a count, singular or plural, otherwise.
    #[test]
    fn the_quarantine_note_is_a_count() {
        assert_eq!(quarantine_note(0), "");
        assert_eq!(quarantine_note(1), ", 1 device quarantined");
        assert_eq!(quarantine_note(3), ", 3 devices quarantined");
    }
}
