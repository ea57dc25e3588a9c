//! The schedule of `cuzk bench day`: its options and the arrivals they describe — a WinningPoSt
//! every period, the WindowPoSt deadline's partitions at their time, a PoRep load topped up
//! all day — as pure functions of the time since the day began (the caller passes the time
//! in, so tests need no clock; `--plan` prints it). The command (`bench_day.rs`) and the
//! runner that drives the day (`bench_day_run.rs`) both read it, so it sits below both.

use std::ops::Range;
use std::path::PathBuf;
use std::time::Duration;

use crate::config::{parse_duration, parse_size};
use crate::proofs::shapes::parse_sector_size;

/// Options of `cuzk bench day` (host memory: see `--window-post-sectors`; device memory:
/// the global `--gpu-memory-limit SIZE` runs the day as a card of that size).
#[derive(clap::Args, Debug, Clone)]
pub struct DayBenchArgs {
    /// Sector size of every proof of the day.
    #[arg(long, value_parser = parse_sector_size, default_value = "32GiB")]
    pub sector_size: u64,
    /// How long the day runs: no proof is started after it (those running finish).
    #[arg(long, value_parser = parse_duration, default_value = "15m")]
    pub duration: Duration,
    /// A WinningPoSt arrives every this long, the first one after one period.
    #[arg(long, value_parser = parse_duration, default_value = "30s")]
    pub winning_post_every: Duration,
    /// When the WindowPoSt deadline's partitions arrive, all at once.
    #[arg(long, value_parser = parse_duration, default_value = "1m")]
    pub deadline_at: Duration,
    /// Partitions of the WindowPoSt deadline (0: none).
    #[arg(long, default_value_t = 10)]
    pub deadline_partitions: usize,
    /// The deadline's partitions must all be proved this long after they arrive.
    #[arg(long, value_parser = parse_duration, default_value = "10m")]
    pub deadline_within: Duration,
    /// PoRep proofs kept in flight for the whole day (the continuous load).
    #[arg(long, default_value_t = 2)]
    pub porep_in_flight: usize,
    /// Before the day, PoRep alone this long (the same load): sectors per hour without the
    /// PoSt work.
    #[arg(long, value_parser = parse_duration, default_value = "1m")]
    pub reference_for: Duration,
    /// Before that, WinningPoSt alone this many times, after the warm-ups: its idle latency.
    #[arg(long, default_value_t = 3)]
    pub idle_runs: usize,
    /// Sector slots of each WindowPoSt partition [default: all, the real partition: 2,349 at
    /// 32 GiB, 125 M constraints]. Memory: at 32 GiB PoRep's synthetic parameters take
    /// 44 GiB and a whole WindowPoSt partition's 57 GiB (1000 slots: 25 GiB; 600: 14 GiB;
    /// each slot adds 53,344 constraints). They are made one set at a time, and a card that
    /// holds a set lets its host copy go (an H200 holds both); where the copies stay on the
    /// host (the CPU, a smaller card) the two do not fit 125 GiB beside a PoRep load: pass
    /// e.g. 600. The sizes are printed first, and a set that would not fit the stages'
    /// budget beside the host copies kept so far is refused.
    #[arg(long)]
    pub window_post_sectors: Option<usize>,
    /// The stages' host memory budget [default: as cuzkd's, the host's memory less an eighth].
    #[arg(long, value_parser = parse_size)]
    pub memory_budget: Option<u64>,
    /// Write every partition's stage times as Chrome trace events (Perfetto opens them), as
    /// cuzkd's debug.trace_file does.
    #[arg(long)]
    pub trace_file: Option<PathBuf>,
    /// Seed of the first proof's synthetic values (each proof takes the next).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print the day's arrivals and stop.
    #[arg(long)]
    pub plan: bool,
}

/// Why a day cannot be planned.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum DayError {
    /// A WinningPoSt period of zero would arrive without end.
    #[error("--winning-post-every must be more than zero")]
    NoPeriod,
    /// The day is empty.
    #[error("--duration must be more than zero")]
    NoDay,
}

/// The proof classes of a day.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// Latency-critical: one block's proof.
    WinningPoSt,
    /// One partition of the deadline, with its index.
    WindowPoSt(usize),
}

/// One scheduled arrival: when, what, and by when it must be proved, if it has a deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arrival {
    /// Time since the day began.
    pub at: Duration,
    /// What arrives.
    pub class: Class,
    /// When it must be proved by, since the day began.
    pub due: Option<Duration>,
}

/// The schedule of a day, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Day {
    duration: Duration,
    winning_every: Duration,
    deadline_at: Duration,
    deadline_partitions: usize,
    deadline_within: Duration,
    porep_in_flight: usize,
}

impl Day {
    /// The day `args` describe.
    pub fn new(args: &DayBenchArgs) -> Result<Self, DayError> {
        if args.winning_post_every.is_zero() {
            return Err(DayError::NoPeriod);
        }
        if args.duration.is_zero() {
            return Err(DayError::NoDay);
        }
        Ok(Day {
            duration: args.duration,
            winning_every: args.winning_post_every,
            deadline_at: args.deadline_at,
            deadline_partitions: args.deadline_partitions,
            deadline_within: args.deadline_within,
            porep_in_flight: args.porep_in_flight,
        })
    }

    /// Every scheduled arrival of the day, in time order: a WinningPoSt at each whole period
    /// before the day ends, and the deadline's partitions at its time if that is before the
    /// end. At the same time a WinningPoSt comes first (it is the one that cannot wait).
    pub fn arrivals(&self) -> Vec<Arrival> {
        let mut out: Vec<Arrival> = (1u32..)
            .map(|k| self.winning_every * k)
            .take_while(|&at| at < self.duration)
            .map(|at| Arrival {
                at,
                class: Class::WinningPoSt,
                due: None,
            })
            .collect();
        if self.deadline_at < self.duration {
            let due = Some(self.deadline_at + self.deadline_within);
            out.extend((0..self.deadline_partitions).map(|k| Arrival {
                at: self.deadline_at,
                class: Class::WindowPoSt(k),
                due,
            }));
        }
        // Stable: the WinningPoSts stay ahead of the partitions arriving with them.
        out.sort_by_key(|a| (a.at, matches!(a.class, Class::WindowPoSt(_))));
        out
    }

    /// Of `arrivals` (as [`Day::arrivals`] gives them), the ones due to start at `now` when
    /// the first `issued` have been started: all of them up to `now`, in order.
    pub fn due(arrivals: &[Arrival], issued: usize, now: Duration) -> Range<usize> {
        let end = arrivals.partition_point(|a| a.at <= now).max(issued);
        issued.min(end)..end
    }

    /// How many PoRep proofs to start at `now` with `in_flight` running: enough to keep the
    /// day's load in flight, none once the day is over.
    pub fn porep_to_start(&self, in_flight: usize, now: Duration) -> usize {
        if now >= self.duration {
            return 0;
        }
        self.porep_in_flight.saturating_sub(in_flight)
    }

    /// The day's length.
    pub fn duration(&self) -> Duration {
        self.duration
    }

    /// How long to wait at `now`, with the first `issued` of `arrivals` started, for the next
    /// thing the schedule starts: the next arrival, or the day's end (when top-ups stop);
    /// after both, a second (only proofs ending are left to wait for).
    pub fn next_wake(&self, arrivals: &[Arrival], issued: usize, now: Duration) -> Duration {
        let end = (now < self.duration).then_some(self.duration);
        let next = arrivals
            .get(issued)
            .map(|a| a.at)
            .into_iter()
            .chain(end)
            .min();
        match next {
            Some(t) => t.saturating_sub(now),
            None => Duration::from_secs(1),
        }
    }

    /// The same PoRep load alone for `duration` (the reference stretch).
    pub fn porep_alone(&self, duration: Duration) -> Day {
        Day {
            duration,
            deadline_partitions: 0,
            ..self.clone()
        }
    }
}

#[cfg(test)]
impl DayBenchArgs {
    /// The tests' day: two minutes at 32 GiB, a WinningPoSt every 30 s, a deadline of three
    /// partitions at 60 s due 600 s later, two PoReps in flight; `--plan`.
    pub(super) fn example() -> Self {
        DayBenchArgs {
            sector_size: 32 << 30,
            duration: Duration::from_secs(120),
            winning_post_every: Duration::from_secs(30),
            deadline_at: Duration::from_secs(60),
            deadline_partitions: 3,
            deadline_within: Duration::from_secs(600),
            porep_in_flight: 2,
            reference_for: Duration::from_secs(10),
            idle_runs: 1,
            window_post_sectors: None,
            memory_budget: None,
            trace_file: None,
            seed: 1,
            plan: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_day_is_winning_posts_each_period_and_the_deadline_at_its_time() {
        let day = Day::new(&DayBenchArgs::example()).unwrap();
        let a = day.arrivals();
        let s = |x| Duration::from_secs(x);
        let got: Vec<_> = a.iter().map(|a| (a.at, a.class)).collect();
        assert_eq!(
            got,
            vec![
                (s(30), Class::WinningPoSt),
                (s(60), Class::WinningPoSt),
                (s(60), Class::WindowPoSt(0)),
                (s(60), Class::WindowPoSt(1)),
                (s(60), Class::WindowPoSt(2)),
                (s(90), Class::WinningPoSt),
            ],
            "none at the day's end (120 s)"
        );
        assert!(a.iter().all(|a| match a.class {
            Class::WinningPoSt => a.due.is_none(),
            Class::WindowPoSt(_) => a.due == Some(s(660)),
        }));
    }

    #[test]
    fn a_deadline_after_the_day_or_of_no_partitions_does_not_arrive() {
        let mut late = DayBenchArgs::example();
        late.deadline_at = Duration::from_secs(120);
        let a = Day::new(&late).unwrap().arrivals();
        assert_eq!(a.len(), 3);
        assert!(a.iter().all(|a| a.class == Class::WinningPoSt));
        let mut none = DayBenchArgs::example();
        none.deadline_partitions = 0;
        assert_eq!(Day::new(&none).unwrap().arrivals().len(), 3);
    }

    #[test]
    fn due_arrivals_are_those_up_to_now_not_yet_started() {
        let a = Day::new(&DayBenchArgs::example()).unwrap().arrivals();
        let s = |x| Duration::from_secs(x);
        assert_eq!(Day::due(&a, 0, s(29)), 0..0);
        assert_eq!(Day::due(&a, 0, s(30)), 0..1);
        assert_eq!(Day::due(&a, 1, s(59)), 1..1);
        assert_eq!(
            Day::due(&a, 1, s(60)),
            1..5,
            "the WinningPoSt and the deadline"
        );
        assert_eq!(
            Day::due(&a, 0, s(1000)),
            0..6,
            "late: everything not yet started"
        );
        assert_eq!(Day::due(&a, 6, s(1000)), 6..6);
    }

    #[test]
    fn porep_is_topped_up_to_its_load_until_the_day_ends() {
        let day = Day::new(&DayBenchArgs::example()).unwrap();
        assert_eq!(day.porep_to_start(0, Duration::ZERO), 2);
        assert_eq!(day.porep_to_start(1, Duration::from_secs(50)), 1);
        assert_eq!(day.porep_to_start(3, Duration::from_secs(50)), 0);
        assert_eq!(day.porep_to_start(0, Duration::from_secs(120)), 0);
    }

    #[test]
    fn the_runner_wakes_for_the_next_arrival_then_the_end() {
        let day = Day::new(&DayBenchArgs::example()).unwrap();
        let a = day.arrivals();
        let s = |x| Duration::from_secs(x);
        assert_eq!(day.next_wake(&a, 0, s(10)), s(20), "the first WinningPoSt");
        assert_eq!(
            day.next_wake(&a, 1, s(30)),
            s(30),
            "the deadline, with a WinningPoSt"
        );
        assert_eq!(day.next_wake(&a, 6, s(100)), s(20), "the day's end");
        assert_eq!(day.next_wake(&a, 6, s(130)), s(1), "only endings left");
        let alone = day.porep_alone(s(10));
        assert_eq!(alone.duration(), s(10));
        assert!(alone
            .arrivals()
            .iter()
            .all(|a| a.class == Class::WinningPoSt));
        assert_eq!(alone.porep_to_start(0, s(5)), 2);
    }

    /// A whole tiny day on the CPU: every class proved, the deadline done, the report's
    /// figures consistent with each other, the stage trace written. About a minute on two
    #[test]
    fn empty_periods_and_days_are_refused() {
        let mut a = DayBenchArgs::example();
        a.winning_post_every = Duration::ZERO;
        assert_eq!(Day::new(&a), Err(DayError::NoPeriod));
        let mut a = DayBenchArgs::example();
        a.duration = Duration::ZERO;
        assert_eq!(Day::new(&a), Err(DayError::NoDay));
    }
}
