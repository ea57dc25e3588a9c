//! A long local step's progress for a person (making test parameters): on a terminal, a bar
//! redrawn in place with the percentage, the time elapsed and an estimate of the time left;
//! anywhere else (a log, a pipe, CI), a plain line at least every [`LINE_EVERY`], so that a
//! step of minutes never looks hung. Steps that cannot tell how far they are show the elapsed
//! time only. Everything goes to stderr; escape sequences only to a terminal.

use std::io::Write;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::progress::Display;
use crate::params_gen::Progress;

/// The longest a plain output goes without a line while a step runs.
pub const LINE_EVERY: Duration = Duration::from_secs(10);
/// How often the bar on a terminal is redrawn.
const TICK: Duration = Duration::from_millis(250);
/// The bar's width in characters.
const BAR: usize = 30;

/// The current step, shared with the thread that draws it.
#[derive(Debug)]
struct Step {
    started: Instant,
    /// Units done and in all; `total` 0 while the step cannot tell.
    done: u64,
    total: u64,
    /// When the last plain line was written.
    last_line: Instant,
    /// Whether a bar is on the screen (to be cleared before a line).
    drawn: bool,
    stop: bool,
}

/// Shows a step's progress on stderr as [`Display`] says, until dropped.
pub struct Meter {
    prefix: String,
    display: Display,
    shared: Arc<(Mutex<Step>, Condvar)>,
    ticker: Option<JoinHandle<()>>,
}

fn lock(m: &Mutex<Step>) -> std::sync::MutexGuard<'_, Step> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `2h05m`, `1m05s`, `42s`: whole seconds, minutes above one, hours above sixty minutes.
pub fn clock(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, s / 60 % 60),
    }
}

/// The time left at the rate so far; `None` before there is a rate.
pub fn time_left(done: u64, total: u64, elapsed: Duration) -> Option<Duration> {
    if done == 0 || total == 0 || done > total {
        return None;
    }
    let rate = elapsed.as_secs_f64() / done as f64;
    Some(Duration::from_secs_f64(rate * (total - done) as f64))
}

/// The progress after the prefix: `42% (1m05s elapsed, about 1m30s left)`, or `1m05s
/// elapsed` for a step that cannot tell how far it is; with `bar`, a bar in front.
pub fn describe(done: u64, total: u64, elapsed: Duration, bar: bool) -> String {
    if total == 0 {
        return format!("{} elapsed", clock(elapsed));
    }
    let fraction = (done.min(total) as f64 / total as f64).clamp(0.0, 1.0);
    let percent = (fraction * 100.0).floor() as u32;
    let left = match time_left(done, total, elapsed) {
        Some(d) => format!("about {} left", clock(d)),
        None => "estimating the time left".to_string(),
    };
    if bar {
        let filled = ((fraction * BAR as f64).round() as usize).min(BAR);
        format!(
            "[{}{}] {percent:>3}%  {} elapsed, {left}",
            "#".repeat(filled),
            "-".repeat(BAR - filled),
            clock(elapsed)
        )
    } else {
        format!("{percent}% ({} elapsed, {left})", clock(elapsed))
    }
}

impl Meter {
    /// A meter whose lines start with `prefix` (`cuzk demo`), drawn as `display` says.
    pub fn new(prefix: &str, display: Display) -> Self {
        let now = Instant::now();
        let shared = Arc::new((
            Mutex::new(Step {
                started: now,
                done: 0,
                total: 0,
                last_line: now,
                drawn: false,
                stop: false,
            }),
            Condvar::new(),
        ));
        let ticker = (display != Display::Quiet).then(|| {
            let shared = shared.clone();
            let prefix = prefix.to_string();
            std::thread::spawn(move || tick(&shared, &prefix, display))
        });
        Meter {
            prefix: prefix.to_string(),
            display,
            shared,
            ticker,
        }
    }
}

/// The drawing thread: the bar every [`TICK`] on a terminal, a plain line when
/// [`LINE_EVERY`] has passed without one elsewhere.
fn tick(shared: &(Mutex<Step>, Condvar), prefix: &str, display: Display) {
    let (m, cv) = shared;
    let mut step = lock(m);
    loop {
        // Checked under the lock before each wait: a stop set before this thread first
        // took the lock has no one to wake.
        if step.stop {
            return;
        }
        let wait = match display {
            Display::Line => TICK,
            _ => LINE_EVERY.saturating_sub(step.last_line.elapsed()),
        };
        step = cv
            .wait_timeout(step, wait)
            .unwrap_or_else(PoisonError::into_inner)
            .0;
        if step.stop {
            return;
        }
        let elapsed = step.started.elapsed();
        match display {
            Display::Line => {
                eprint!(
                    "\r\x1b[2K{prefix}: {}",
                    describe(step.done, step.total, elapsed, true)
                );
                step.drawn = true;
            }
            Display::Lines if step.last_line.elapsed() >= LINE_EVERY => {
                eprintln!(
                    "{prefix}: … {}",
                    describe(step.done, step.total, elapsed, false)
                );
                step.last_line = Instant::now();
            }
            _ => continue,
        }
        let _ = std::io::stderr().flush();
    }
}

impl Progress for Meter {
    fn note(&mut self, msg: &str) {
        let mut step = lock(&self.shared.0);
        if self.display != Display::Quiet {
            if step.drawn {
                eprint!("\r\x1b[2K");
                step.drawn = false;
            }
            eprintln!("{}: {msg}", self.prefix);
            let _ = std::io::stderr().flush();
        }
        let now = Instant::now();
        (step.started, step.done, step.total, step.last_line) = (now, 0, 0, now);
    }

    fn advance(&mut self, done: u64, total: u64) {
        let mut step = lock(&self.shared.0);
        (step.done, step.total) = (done, total);
    }
}

impl Drop for Meter {
    fn drop(&mut self) {
        {
            let mut step = lock(&self.shared.0);
            step.stop = true;
            if step.drawn {
                eprint!("\r\x1b[2K");
                let _ = std::io::stderr().flush();
                step.drawn = false;
            }
        }
        self.shared.1.notify_all();
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_tells_percent_elapsed_and_time_left() {
        let s = |secs| Duration::from_secs(secs);
        assert_eq!(
            describe(25, 100, s(30), false),
            "25% (30s elapsed, about 1m30s left)"
        );
        assert_eq!(
            describe(0, 100, s(3), false),
            "0% (3s elapsed, estimating the time left)"
        );
        assert_eq!(describe(0, 0, s(125), false), "2m05s elapsed");
        let bar = describe(50, 100, s(60), true);
        assert!(
            bar.starts_with(&format!("[{}{}]  50%", "#".repeat(15), "-".repeat(15))),
            "{bar}"
        );
        assert!(bar.ends_with("1m00s elapsed, about 1m00s left"), "{bar}");
        // Past the end (a total that was an estimate): full, nothing left.
        assert!(describe(120, 100, s(60), true).contains(&format!("[{}] 100%", "#".repeat(30))));
        assert_eq!(time_left(100, 100, s(9)), Some(Duration::ZERO));
        assert_eq!(time_left(0, 100, s(9)), None);
    }

    /// Dropped at once, a meter stops at once (its thread may not have waited yet).
    #[test]
    fn a_meter_dropped_at_once_stops_at_once() {
        for _ in 0..20 {
            let t = Instant::now();
            drop(Meter::new("test", Display::Lines));
            assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
        }
    }

    #[test]
    fn a_step_restarts_the_clock_and_the_count() {
        let mut m = Meter::new("test", Display::Quiet);
        m.advance(5, 10);
        m.note("next step");
        let step = lock(&m.shared.0);
        assert_eq!((step.done, step.total), (0, 0));
        assert!(step.started.elapsed() < Duration::from_secs(5));
    }
}
