//! Which devices take partitions: each device's failures, its quarantine and its re-probe.
//! Pure decision logic (time passed in); the stages call it under their lock and log what
//! changed.
//!
//! A device that failed `quarantine_after` partitions in a row (a device error, out of
//! memory, or a wrong result caught by verification) is quarantined: it takes no partition
//! for its back-off, then one of its workers takes one partition as a probe. The probe's
//! success ends the quarantine; its failure doubles the back-off (up to `max_backoff`). A
//! quarantined device is never the only way to prove: where no usable device is left for a
//! partition, the stages prove it on a CPU prover.

use std::time::{Duration, Instant};

/// When a device is quarantined, and for how long.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HealthPolicy {
    /// Consecutive failures that quarantine a device (at least 1).
    pub quarantine_after: u32,
    /// The first back-off.
    pub quarantine_time: Duration,
    /// The longest back-off.
    pub max_backoff: Duration,
}

impl Default for HealthPolicy {
    /// 3 failures, 5 minutes, at most an hour.
    fn default() -> Self {
        Self {
            quarantine_after: 3,
            quarantine_time: Duration::from_secs(300),
            max_backoff: Duration::from_secs(3600),
        }
    }
}

/// A device's state as Health shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HealthState {
    /// It takes partitions.
    Healthy,
    /// It takes none until its back-off ends.
    Quarantined,
    /// Its back-off ended: one partition is on it as a probe.
    Probing,
}

/// One device's health, for Health, Status and the metrics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceHealth {
    /// The device's name.
    pub name: String,
    /// Whether it takes partitions.
    pub state: HealthState,
    /// Failed partitions since start.
    pub failures: u64,
    /// Failed partitions since its last success.
    pub consecutive_failures: u32,
    /// How long it has been quarantined (probes included); zero when healthy.
    pub quarantined_for: Duration,
    /// Until when (from now) it stays out before its next probe; zero when healthy, probing
    /// or due for a probe.
    pub probe_in: Duration,
    /// Its latest failure (escaped, at most [`MAX_ERROR`] bytes).
    pub last_error: Option<String>,
}

impl DeviceHealth {
    /// Whether it is quarantined (a probe in progress included): what the status line and
    /// `cuzk_device_quarantined` count.
    pub fn is_quarantined(&self) -> bool {
        self.state != HealthState::Healthy
    }
}

/// The most bytes of a device's last error kept (and logged).
pub const MAX_ERROR: usize = 256;

/// `text` made safe to keep, send and log: control characters escaped (a newline cannot
/// forge a log line, an ESC cannot reach a terminal) and at most `max` bytes (cut on a
/// character boundary), the rest counted. The engine and the daemon use it too (re-exported
/// as `engine::bounded`): this is the lowest layer that needs it.
pub fn bounded(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max) + 24);
    for (i, c) in text.char_indices() {
        let before = out.len();
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
        if out.len() > max {
            out.truncate(before);
            out.push_str(&format!("… ({} more bytes)", text.len() - i));
            return out;
        }
    }
    out
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Healthy,
    Quarantined {
        since: Instant,
        until: Instant,
        backoff: Duration,
    },
    Probing {
        since: Instant,
        backoff: Duration,
    },
}

#[derive(Clone, Debug)]
struct One {
    mode: Mode,
    failures: u64,
    consecutive: u32,
    last_error: Option<String>,
}

/// What a result changed, for the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// The device was quarantined (again, after a failed probe) for `backoff`.
    Quarantined {
        /// Its consecutive failures.
        consecutive: u32,
        /// How long it stays out.
        backoff: Duration,
    },
    /// Its probe succeeded: it takes partitions again.
    Released {
        /// How long it was out.
        after: Duration,
    },
}

/// Every device's health.
#[derive(Clone, Debug)]
pub(crate) struct Health {
    policy: HealthPolicy,
    devices: Vec<One>,
}

impl Health {
    /// `devices` healthy devices.
    pub(crate) fn new(policy: HealthPolicy, devices: usize) -> Self {
        Self {
            policy,
            devices: vec![
                One {
                    mode: Mode::Healthy,
                    failures: 0,
                    consecutive: 0,
                    last_error: None,
                };
                devices
            ],
        }
    }

    /// Whether device `d` takes partitions (healthy).
    pub(crate) fn usable(&self, d: usize) -> bool {
        self.devices.get(d).is_some_and(|o| o.mode == Mode::Healthy)
    }

    /// Whether device `d` is quarantined and its back-off is over: one of its workers may
    /// take a partition as a probe.
    pub(crate) fn may_probe(&self, d: usize, now: Instant) -> bool {
        matches!(self.devices.get(d), Some(One { mode: Mode::Quarantined { until, .. }, .. }) if *until <= now)
    }

    /// When device `d`'s back-off ends, where it is quarantined.
    pub(crate) fn probe_at(&self, d: usize) -> Option<Instant> {
        match self.devices.get(d)?.mode {
            Mode::Quarantined { until, .. } => Some(until),
            _ => None,
        }
    }

    /// A worker of device `d` took a partition as its probe.
    pub(crate) fn start_probe(&mut self, d: usize) {
        if let Some(o) = self.devices.get_mut(d) {
            if let Mode::Quarantined { since, backoff, .. } = o.mode {
                o.mode = Mode::Probing { since, backoff };
            }
        }
    }

    /// Device `d` proved a partition. Ends its quarantine where that was its probe.
    pub(crate) fn succeeded(&mut self, d: usize, now: Instant) -> Option<Change> {
        let o = self.devices.get_mut(d)?;
        o.consecutive = 0;
        match o.mode {
            Mode::Probing { since, .. } => {
                o.mode = Mode::Healthy;
                Some(Change::Released {
                    after: now.saturating_duration_since(since),
                })
            }
            // A partition taken before the quarantine: the probe decides.
            Mode::Quarantined { .. } | Mode::Healthy => None,
        }
    }

    /// Device `d` failed a partition with `error`. Quarantines it after `quarantine_after`
    /// failures in a row, or again (with twice the back-off) where it failed its probe.
    pub(crate) fn failed(&mut self, d: usize, now: Instant, error: &str) -> Option<Change> {
        let policy = self.policy;
        let o = self.devices.get_mut(d)?;
        o.failures += 1;
        o.consecutive = o.consecutive.saturating_add(1);
        o.last_error = Some(bounded(error, MAX_ERROR));
        let (since, backoff) = match o.mode {
            Mode::Healthy if o.consecutive >= policy.quarantine_after.max(1) => {
                (now, policy.quarantine_time.min(policy.max_backoff))
            }
            Mode::Probing { since, backoff } => {
                (since, backoff.saturating_mul(2).min(policy.max_backoff))
            }
            // Healthy below the threshold, or already out (a partition taken before).
            Mode::Healthy | Mode::Quarantined { .. } => return None,
        };
        o.mode = Mode::Quarantined {
            since,
            until: now + backoff,
            backoff,
        };
        Some(Change::Quarantined {
            consecutive: o.consecutive,
            backoff,
        })
    }

    /// Device `d`'s partition ended neither proved nor failed by the device (cancelled, bad
    /// input): where it was a probe, the device is due for another at once.
    pub(crate) fn inconclusive(&mut self, d: usize, now: Instant) {
        if let Some(o) = self.devices.get_mut(d) {
            if let Mode::Probing { since, backoff } = o.mode {
                o.mode = Mode::Quarantined {
                    since,
                    until: now,
                    backoff,
                };
            }
        }
    }

    /// Every device's health, named by `names` (in the devices' order).
    pub(crate) fn report(&self, names: &[String], now: Instant) -> Vec<DeviceHealth> {
        self.devices
            .iter()
            .zip(names)
            .map(|(o, name)| {
                let (state, since, probe_in) = match o.mode {
                    Mode::Healthy => (HealthState::Healthy, None, Duration::ZERO),
                    Mode::Quarantined { since, until, .. } => (
                        HealthState::Quarantined,
                        Some(since),
                        until.saturating_duration_since(now),
                    ),
                    Mode::Probing { since, .. } => {
                        (HealthState::Probing, Some(since), Duration::ZERO)
                    }
                };
                DeviceHealth {
                    name: name.clone(),
                    state,
                    failures: o.failures,
                    consecutive_failures: o.consecutive,
                    quarantined_for: since
                        .map_or(Duration::ZERO, |s| now.saturating_duration_since(s)),
                    probe_in,
                    last_error: o.last_error.clone(),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> HealthPolicy {
        HealthPolicy {
            quarantine_after: 3,
            quarantine_time: Duration::from_secs(60),
            max_backoff: Duration::from_secs(200),
        }
    }

    fn state(h: &Health, d: usize, now: Instant) -> HealthState {
        h.report(&["a".into(), "b".into()], now)[d].state
    }

    #[test]
    fn quarantined_after_consecutive_failures_only() {
        let t0 = Instant::now();
        let mut h = Health::new(policy(), 2);
        assert_eq!(h.failed(0, t0, "one"), None);
        assert_eq!(h.failed(0, t0, "two"), None);
        // A success in between starts the count again.
        assert_eq!(h.succeeded(0, t0), None);
        assert_eq!(h.failed(0, t0, "one"), None);
        assert_eq!(h.failed(0, t0, "two"), None);
        assert!(h.usable(0));
        assert_eq!(
            h.failed(0, t0, "three"),
            Some(Change::Quarantined {
                consecutive: 3,
                backoff: Duration::from_secs(60)
            })
        );
        assert!(!h.usable(0) && h.usable(1));
        assert_eq!(state(&h, 0, t0), HealthState::Quarantined);
        let r = &h.report(&["a".into(), "b".into()], t0 + Duration::from_secs(10))[0];
        assert_eq!((r.failures, r.consecutive_failures), (5, 3));
        assert_eq!(r.quarantined_for, Duration::from_secs(10));
        assert_eq!(r.probe_in, Duration::from_secs(50));
        assert_eq!(r.last_error.as_deref(), Some("three"));
        // A late failure of a partition taken before changes nothing but the counts.
        assert_eq!(h.failed(0, t0, "late"), None);
        // A late success does not end the quarantine: the probe does.
        assert_eq!(h.succeeded(0, t0), None);
        assert_eq!(state(&h, 0, t0), HealthState::Quarantined);
    }

    #[test]
    fn probe_after_backoff_releases_or_doubles_up_to_the_cap() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut h = Health::new(policy(), 1);
        for _ in 0..3 {
            h.failed(0, t0, "boom");
        }
        assert!(!h.may_probe(0, t0 + s(59)));
        assert!(h.may_probe(0, t0 + s(60)));
        assert_eq!(h.probe_at(0), Some(t0 + s(60)));
        h.start_probe(0);
        assert_eq!(state(&h, 0, t0 + s(60)), HealthState::Probing);
        assert!(
            !h.may_probe(0, t0 + s(61)) && !h.usable(0),
            "one probe at a time"
        );
        // The probe fails: twice the back-off, from the failure.
        assert_eq!(
            h.failed(0, t0 + s(70), "again"),
            Some(Change::Quarantined {
                consecutive: 4,
                backoff: s(120)
            })
        );
        assert_eq!(h.probe_at(0), Some(t0 + s(190)));
        h.start_probe(0);
        // Capped at max_backoff.
        assert_eq!(
            h.failed(0, t0 + s(200), "again"),
            Some(Change::Quarantined {
                consecutive: 5,
                backoff: s(200)
            })
        );
        // An inconclusive probe: due again at once, same back-off.
        h.start_probe(0);
        h.inconclusive(0, t0 + s(400));
        assert!(h.may_probe(0, t0 + s(400)));
        h.start_probe(0);
        assert_eq!(
            h.succeeded(0, t0 + s(500)),
            Some(Change::Released { after: s(500) })
        );
        assert!(h.usable(0));
        let r = &h.report(&["a".into()], t0 + s(500))[0];
        assert_eq!(
            (
                r.state,
                r.consecutive_failures,
                r.failures,
                r.quarantined_for
            ),
            (HealthState::Healthy, 0, 5, Duration::ZERO)
        );
    }

    #[test]
    fn errors_are_escaped_and_bounded() {
        let mut h = Health::new(policy(), 1);
        let long = format!("line\nbreak\u{1b}[31m{}", "x".repeat(1000));
        h.failed(0, Instant::now(), &long);
        let e = h.report(&["a".into()], Instant::now())[0]
            .last_error
            .clone()
            .unwrap();
        assert!(!e.chars().any(char::is_control), "{e:?}");
        assert!(e.starts_with("line\\nbreak\\u{1b}[31m"), "{e:?}");
        assert!(e.len() <= MAX_ERROR + 32, "{}", e.len());
        // Unknown devices are ignored.
        assert_eq!(h.failed(7, Instant::now(), "x"), None);
        assert!(!h.usable(7));
    }
}
