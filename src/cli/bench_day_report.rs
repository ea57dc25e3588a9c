//! What `cuzk bench day` reports, made from the proofs a run finished (pure: the times are
//! passed in) and printed with issue 41's goals beside the figures.

use std::time::Duration;

/// The goals of issue 41 for WinningPoSt under the day's load: its largest latency at most
/// this many times its idle latency, and at most [`WINNING_MAX`].
pub(super) const WINNING_RATIO: f64 = 1.5;
/// The largest WinningPoSt latency the goal allows.
pub(super) const WINNING_MAX: Duration = Duration::from_secs(2);

/// What a proof of the day was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Work {
    /// A synthetic sector's PoRep (every partition).
    PoRep,
    /// A synthetic WinningPoSt partition (the critical class).
    Winning,
    /// Partition `k` of the synthetic WindowPoSt deadline.
    Window(usize),
}

/// One finished proof: what, when it arrived (PoRep: when it started) and when it ended,
/// both since its run began, its partitions' synthesis and device stages summed (zero where
/// it failed), and its error if it failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Done {
    pub work: Work,
    pub arrived: Duration,
    pub ended: Duration,
    pub synthesis: Duration,
    pub device: Duration,
    pub error: Option<String>,
}

impl Done {
    /// From arrival to the end.
    pub fn latency(&self) -> Duration {
        self.ended.saturating_sub(self.arrived)
    }

    /// Its latency as synthesis, device stage (the wait for the device's turn included) and
    /// the rest (the job's own work before its partition is admitted and after it is
    /// proved, and any wait between the stages), for one partition's proof.
    pub fn parts(&self) -> [Duration; 3] {
        let rest = self.latency().saturating_sub(self.synthesis + self.device);
        [self.synthesis, self.device, rest]
    }
}

/// Each WinningPoSt of `done` in order of arrival: `latency (synthesis + device + rest)`, so
/// that a slow one says which part of it was slow.
pub(super) fn winning_parts(done: &[Done]) -> String {
    let mut w: Vec<&Done> = done
        .iter()
        .filter(|d| d.work == Work::Winning && d.error.is_none())
        .collect();
    w.sort_by_key(|d| d.arrived);
    let each = w.iter().map(|d| {
        let [syn, dev, rest] = d.parts();
        format!("{} ({} + {} + {})", s(d.latency()), s(syn), s(dev), s(rest))
    });
    each.collect::<Vec<_>>().join(", ")
}

/// A latency distribution.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Dist {
    pub count: usize,
    pub p50: Duration,
    pub p90: Duration,
    pub max: Duration,
}

impl Dist {
    /// Of `times`, any order (nearest rank; all zero when empty).
    pub fn of(times: &[Duration]) -> Self {
        let mut t = times.to_vec();
        t.sort();
        let rank = |p: usize| {
            let i = (p * t.len()).div_ceil(100).max(1) - 1;
            t.get(i).copied().unwrap_or_default()
        };
        Dist {
            count: t.len(),
            p50: rank(50),
            p90: rank(90),
            max: t.last().copied().unwrap_or_default(),
        }
    }

    /// The latencies of `done`'s successful proofs that `which` selects.
    pub fn of_done(done: &[Done], which: impl Fn(Work) -> bool) -> Self {
        let t: Vec<Duration> = done
            .iter()
            .filter(|d| d.error.is_none() && which(d.work))
            .map(Done::latency)
            .collect();
        Self::of(&t)
    }
}

/// Sectors per hour: `proved` PoReps in `wall`.
pub(super) fn per_hour(proved: usize, wall: Duration) -> f64 {
    proved as f64 * 3600.0 / wall.as_secs_f64().max(1e-9)
}

/// What one run of proofs (the reference stretch or the day) gives.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Stretch {
    /// From its start until its last proof ended.
    pub wall: Duration,
    pub porep: Dist,
    /// From its start until its last PoRep sector ended (`wall` where none did).
    pub porep_span: Duration,
    /// Sectors per hour over `porep_span`: PoSt proofs that end after the last sector (a
    /// deadline arriving late in the day) do not count as time PoRep had.
    pub porep_per_hour: f64,
    pub failures: Vec<String>,
}

impl Stretch {
    /// Of the proofs `done` in `wall`.
    pub fn of(done: &[Done], wall: Duration) -> Self {
        let porep = Dist::of_done(done, |w| w == Work::PoRep);
        let porep_span = done
            .iter()
            .filter(|d| d.error.is_none() && d.work == Work::PoRep)
            .map(|d| d.ended)
            .max()
            .unwrap_or(wall);
        let failures = done
            .iter()
            .filter_map(|d| Some(format!("{:?}: {}", d.work, d.error.as_ref()?)))
            .collect();
        Stretch {
            wall,
            porep,
            porep_span,
            porep_per_hour: per_hour(porep.count, porep_span),
            failures,
        }
    }
}

/// The day's report.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct DayReport {
    /// WinningPoSt alone, before anything else ran.
    pub idle_winning: Dist,
    /// PoRep alone.
    pub reference: Stretch,
    /// The day.
    pub day: Stretch,
    pub winning: Dist,
    pub window: Dist,
    /// The deadline's partitions scheduled, and when the last one ended after they
    /// arrived, if every one was proved.
    pub deadline_partitions: usize,
    pub deadline_done: Option<Duration>,
    /// What the deadline must be done within.
    pub deadline_within: Duration,
    /// The device's busy time over the day's wall time.
    pub device_busy: f64,
    /// The device time the day's PoSt partitions took (WindowPoSt and WinningPoSt).
    pub post_device: Duration,
    /// Peak RSS of the process, parameters included.
    pub peak_rss: u64,
    /// The day's WinningPoSts, each in its parts ([`winning_parts`]).
    pub winning_each: String,
}

impl DayReport {
    /// The day's figures from its proofs `done` (arrivals since the day began), ending after
    /// `wall`, the deadline arriving at `deadline_at`.
    pub fn of_day(done: &[Done], wall: Duration, deadline_at: Duration) -> DayFigures {
        let window: Vec<&Done> = done
            .iter()
            .filter(|d| matches!(d.work, Work::Window(_)))
            .collect();
        let all_proved = !window.is_empty() && window.iter().all(|d| d.error.is_none());
        DayFigures {
            day: Stretch::of(done, wall),
            winning: Dist::of_done(done, |w| w == Work::Winning),
            window: Dist::of_done(done, |w| matches!(w, Work::Window(_))),
            window_finished: window.len(),
            deadline_done: all_proved
                .then(|| window.iter().map(|d| d.ended).max())
                .flatten()
                .map(|end| end.saturating_sub(deadline_at)),
        }
    }

    /// WinningPoSt's largest latency under load over its idle median.
    pub fn winning_ratio(&self) -> f64 {
        self.winning.max.as_secs_f64() / self.idle_winning.p50.as_secs_f64().max(1e-9)
    }

    /// The share of PoRep's sectors per hour that the day lost against PoRep alone, and
    /// the share of the day's wall time the PoSt work held the device (what the goal lets
    /// it lose).
    pub fn porep_loss(&self) -> (f64, f64) {
        let alone = self.reference.porep_per_hour.max(1e-9);
        let lost = 1.0 - self.day.porep_per_hour / alone;
        let allowed = self.post_device.as_secs_f64() / self.day.wall.as_secs_f64().max(1e-9);
        (lost, allowed)
    }

    /// Whether each goal is met: WinningPoSt's, the deadline's, PoRep's throughput.
    pub fn goals(&self) -> (bool, bool, bool) {
        let (lost, allowed) = self.porep_loss();
        let winning = self.winning.count > 0
            && self.winning_ratio() <= WINNING_RATIO
            && self.winning.max <= WINNING_MAX;
        let deadline = self.deadline_partitions == 0
            || self
                .deadline_done
                .is_some_and(|d| d <= self.deadline_within);
        (winning, deadline, lost <= allowed)
    }

    /// Every failed proof of both stretches.
    pub fn failures(&self) -> Vec<String> {
        let r = self.reference.failures.iter();
        r.chain(&self.day.failures).cloned().collect()
    }
}

/// The figures [`DayReport::of_day`] makes.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct DayFigures {
    pub day: Stretch,
    pub winning: Dist,
    pub window: Dist,
    /// The deadline's partitions that ended, proved or not.
    pub window_finished: usize,
    pub deadline_done: Option<Duration>,
}

fn s(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

fn dist(d: &Dist) -> String {
    format!("{} | {} | {} | {}", d.count, s(d.p50), s(d.p90), s(d.max))
}

fn met(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "NOT met"
    }
}

/// Prints the report: the latency table, then the deadline, throughput, device and memory.
pub(super) fn print(r: &DayReport) {
    let (winning_ok, deadline_ok, porep_ok) = r.goals();
    println!("| class | proofs | p50 | p90 | max | goal |");
    println!("|---|---|---|---|---|---|");
    println!(
        "| WinningPoSt idle (reference) | {} | |",
        dist(&r.idle_winning)
    );
    println!(
        "| WinningPoSt under the day's load | {} | max ≤ {WINNING_RATIO}× idle and ≤ {}: {:.2}× idle, {} |",
        dist(&r.winning),
        s(WINNING_MAX),
        r.winning_ratio(),
        met(winning_ok)
    );
    println!(
        "| WindowPoSt partitions | {} | deadline done ≤ {} |",
        dist(&r.window),
        crate::config::format_duration(r.deadline_within)
    );
    println!("| PoRep sectors (day) | {} | |", dist(&r.day.porep));
    println!("| PoRep sectors (alone) | {} | |", dist(&r.reference.porep));
    match r.deadline_done {
        Some(d) => println!(
            "deadline of {} partitions done {} after it arrived (goal ≤ {}): {}",
            r.deadline_partitions,
            s(d),
            crate::config::format_duration(r.deadline_within),
            met(deadline_ok)
        ),
        None if r.deadline_partitions == 0 => println!("no deadline in the day"),
        None => println!(
            "deadline of {} partitions NOT done: {} of them proved",
            r.deadline_partitions, r.window.count
        ),
    }
    let alone = r.reference.porep_per_hour;
    println!(
        "PoRep sectors per hour: {:.1} with the PoSt work ({} in {}), {:.1} alone ({} in {}): {:.0} % of alone",
        r.day.porep_per_hour,
        r.day.porep.count,
        s(r.day.porep_span),
        alone,
        r.reference.porep.count,
        s(r.reference.porep_span),
        100.0 * r.day.porep_per_hour / alone.max(1e-9)
    );
    let (lost, allowed) = r.porep_loss();
    println!(
        "WinningPoSt under the load, each (synthesis + device stage + the rest): {}",
        r.winning_each
    );
    println!(
        "PoRep lost {:.0} % of its sectors per hour; the PoSt work held the device {} ({:.0} % of the day), the most the goal lets it lose: {}",
        100.0 * lost,
        s(r.post_device),
        100.0 * allowed,
        met(porep_ok)
    );
    println!(
        "device busy during the day: {:.0} %; peak RSS (parameters included): {:.1} GiB",
        100.0 * r.device_busy,
        r.peak_rss as f64 / (1u64 << 30) as f64
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(x: u64) -> Duration {
        Duration::from_millis(x)
    }

    fn done(work: Work, arrived: u64, ended: u64) -> Done {
        Done {
            synthesis: Duration::ZERO,
            device: Duration::ZERO,
            work,
            arrived: ms(arrived),
            ended: ms(ended),
            error: None,
        }
    }

    #[test]
    fn distributions_are_nearest_rank() {
        let t: Vec<Duration> = (1..=10).rev().map(ms).collect();
        let d = Dist::of(&t);
        assert_eq!((d.count, d.p50, d.p90, d.max), (10, ms(5), ms(9), ms(10)));
        assert_eq!(Dist::of(&[ms(7)]).p50, ms(7));
        assert_eq!(Dist::of(&[]), Dist::default());
    }

    #[test]
    fn the_day_counts_successes_and_times_the_deadline_from_its_arrival() {
        let mut failed = done(Work::PoRep, 0, 50);
        failed.error = Some("boom".into());
        let d = [
            done(Work::PoRep, 0, 1000),
            failed,
            done(Work::Winning, 300, 400),
            done(Work::Window(0), 500, 900),
            done(Work::Window(1), 500, 1200),
        ];
        let f = DayReport::of_day(&d, ms(1800), ms(500));
        assert_eq!(f.day.porep.count, 1);
        // One sector ended at 1 s: the WindowPoSt partition ending at 1.2 s is not PoRep's.
        assert_eq!(f.day.porep_span, ms(1000));
        assert_eq!(f.day.porep_per_hour, 3600.0);
        assert_eq!(f.day.failures, vec!["PoRep: boom".to_string()]);
        assert_eq!(f.winning.max, ms(100));
        assert_eq!((f.window.count, f.window.max), (2, ms(700)));
        assert_eq!(f.deadline_done, Some(ms(700)));
        let mut late = d.to_vec();
        late[4].error = Some("device".into());
        assert_eq!(
            DayReport::of_day(&late, ms(1800), ms(500)).deadline_done,
            None
        );
    }

    #[test]
    fn goals_compare_with_idle_and_the_deadline() {
        let f = DayReport::of_day(&[done(Work::Winning, 0, 1200)], ms(2000), ms(0));
        let mut r = DayReport {
            idle_winning: Dist::of(&[ms(1000)]),
            reference: Stretch::of(&[], ms(1)),
            day: f.day,
            winning: f.winning,
            window: f.window,
            deadline_partitions: 1,
            deadline_done: Some(ms(600)),
            deadline_within: ms(600),
            device_busy: 0.5,
            post_device: ms(500),
            peak_rss: 0,
            winning_each: String::new(),
        };
        r.reference.porep_per_hour = 10.0;
        r.day.porep_per_hour = 7.5;
        assert_eq!(r.porep_loss(), (0.25, 0.25));
        assert_eq!(r.goals(), (true, true, true));
        r.idle_winning = Dist::of(&[ms(700)]);
        r.deadline_done = Some(ms(601));
        r.post_device = ms(400);
        assert_eq!(r.goals(), (false, false, false));
    }

    /// Each WinningPoSt in its parts, in order of arrival, failed ones left out: the rest
    /// is what neither synthesis nor the device stage took.
    #[test]
    fn each_winning_post_is_its_synthesis_device_stage_and_the_rest() {
        let with = |arrived, ended, syn, dev| Done {
            synthesis: ms(syn),
            device: ms(dev),
            ..done(Work::Winning, arrived, ended)
        };
        let mut failed = with(50, 60, 0, 0);
        failed.error = Some("device".into());
        let d = [
            with(1000, 1420, 120, 50),
            done(Work::PoRep, 0, 900),
            with(0, 180, 100, 70),
            failed,
        ];
        assert_eq!(d[0].parts(), [ms(120), ms(50), ms(250)]);
        assert_eq!(
            winning_parts(&d),
            "0.18 s (0.10 s + 0.07 s + 0.01 s), 0.42 s (0.12 s + 0.05 s + 0.25 s)"
        );
    }
}
