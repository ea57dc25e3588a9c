//! A job's progress for a person at a terminal, from the daemon's `Watch` stream: one line
//! that updates in place on a terminal (its elapsed time ticking between events), plain
//! lines on anything else (a log, a pipe), nothing with `--quiet`. Everything goes to
//! stderr; escape sequences only to a terminal.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::proto::{Client, ClientError, ErrorCode, ProgressEvent, ProgressStage, ProofResult};

/// How often the line on a terminal is redrawn between events.
const TICK: Duration = Duration::from_millis(250);

/// Where the output goes and how.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Display {
    /// One line, redrawn in place (stderr is a terminal).
    Line,
    /// One plain line per event.
    Lines,
    /// Nothing.
    Quiet,
}

impl Display {
    /// A line on a terminal, plain lines elsewhere; nothing when `quiet`.
    pub fn for_stderr(quiet: bool) -> Self {
        if quiet {
            Display::Quiet
        } else if std::io::stderr().is_terminal() {
            Display::Line
        } else {
            Display::Lines
        }
    }
}

/// What a watched job looks like to a person, in one line without the elapsed time.
pub fn describe(e: &ProgressEvent) -> String {
    let n = e.partitions_total;
    let k = e.partition.map_or(0, |p| p.saturating_add(1));
    let took = |what: &str| {
        if e.stage_ms > 0 {
            format!(" ({what} {:.1} s)", e.stage_ms as f64 / 1e3)
        } else {
            String::new()
        }
    };
    let what = match e.stage {
        ProgressStage::Queued => "queued".to_string(),
        ProgressStage::Started => "started".to_string(),
        ProgressStage::ParamsLoading => "loading parameters".to_string(),
        ProgressStage::ParamsReady => format!("parameters ready{}", took("took")),
        ProgressStage::SynthesisStarted => {
            format!("partition {k}/{n} synthesizing{}", took("waited"))
        }
        ProgressStage::SynthesisDone => format!("partition {k}/{n} synthesized{}", took("in")),
        ProgressStage::DeviceStarted => {
            format!("partition {k}/{n} on the device{}", took("waited"))
        }
        ProgressStage::DeviceDone => format!("partition {k}/{n} proved{}", took("in")),
        ProgressStage::Verifying => "verifying".to_string(),
    };
    let done = if n > 0 && e.stage != ProgressStage::Verifying {
        format!(", {}/{n} proved", e.partitions_done)
    } else {
        String::new()
    };
    let dropped = if e.dropped > 0 {
        format!(" [{} updates skipped]", e.dropped)
    } else {
        String::new()
    };
    format!("job {}: {what}{done}{dropped}", e.job_id)
}

/// The last event shown, and when.
struct Shown {
    text: String,
    /// The job's age at `at`.
    age: Duration,
    at: Instant,
}

impl Shown {
    fn line(&self) -> String {
        let elapsed = self.age + self.at.elapsed();
        format!("{}, {:.1} s", self.text, elapsed.as_secs_f64())
    }
}

/// Follows `job` on `client` until it ends, showing its progress as `display` says, and
/// returns its proof. `Ok(None)` from a daemon that predates Watch (it answered
/// `MalformedFrame`, connection kept): the caller waits another way.
pub fn watch(
    client: &mut Client,
    job: u64,
    display: Display,
) -> Result<Option<ProofResult>, ClientError> {
    let shown: Mutex<Option<Shown>> = Mutex::new(None);
    let finished = AtomicBool::new(false);
    let lock = || shown.lock().unwrap_or_else(PoisonError::into_inner);
    let result = std::thread::scope(|scope| {
        if display == Display::Line {
            // The elapsed time keeps moving between events (a 32 GiB partition synthesizes
            // for minutes).
            scope.spawn(|| {
                while !finished.load(Ordering::SeqCst) {
                    std::thread::sleep(TICK);
                    if finished.load(Ordering::SeqCst) {
                        break;
                    }
                    if let Some(s) = lock().as_ref() {
                        eprint!("\r\x1b[2K{}", s.line());
                        let _ = std::io::stderr().flush();
                    }
                }
            });
        }
        let result = client.watch(job, |e| {
            let s = Shown {
                text: describe(e),
                age: Duration::from_millis(e.age_ms),
                at: Instant::now(),
            };
            match display {
                Display::Line => eprint!("\r\x1b[2K{}", s.line()),
                Display::Lines => eprintln!("{}", s.line()),
                Display::Quiet => {}
            }
            let _ = std::io::stderr().flush();
            *lock() = Some(s);
        });
        finished.store(true, Ordering::SeqCst);
        result
    });
    if display == Display::Line && lock().is_some() {
        eprint!("\r\x1b[2K");
        let _ = std::io::stderr().flush();
    }
    match result {
        Ok(p) => Ok(Some(p)),
        Err(e) if e.code() == Some(ErrorCode::MalformedFrame) => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(stage: ProgressStage, partition: Option<u32>) -> ProgressEvent {
        ProgressEvent {
            job_id: 42,
            stage,
            partition,
            partitions_done: 1,
            partitions_total: 10,
            age_ms: 1500,
            stage_ms: 2500,
            dropped: 0,
        }
    }

    #[test]
    fn events_read_as_partition_k_of_n() {
        assert_eq!(
            describe(&event(ProgressStage::DeviceDone, Some(0))),
            "job 42: partition 1/10 proved (in 2.5 s), 1/10 proved"
        );
        assert_eq!(
            describe(&event(ProgressStage::SynthesisStarted, Some(9))),
            "job 42: partition 10/10 synthesizing (waited 2.5 s), 1/10 proved"
        );
        let mut queued = event(ProgressStage::Queued, None);
        (queued.partitions_total, queued.stage_ms) = (0, 0);
        assert_eq!(describe(&queued), "job 42: queued");
        let mut skipped = event(ProgressStage::Verifying, None);
        skipped.dropped = 3;
        assert_eq!(describe(&skipped), "job 42: verifying [3 updates skipped]");
        let shown = Shown {
            text: "job 42: queued".into(),
            age: Duration::from_millis(1500),
            at: Instant::now(),
        };
        assert!(
            shown.line().starts_with("job 42: queued, 1."),
            "{}",
            shown.line()
        );
    }
}
