//! `cuzk bench day` (issue 41): a storage provider's day at one sector size — a continuous
//! PoRep load, a WindowPoSt deadline of N partitions arriving at a set time, a WinningPoSt
//! every period. What is built so far is the day's arrival schedule, as pure functions of the
//! time since the day began (the caller passes the time in, so tests need no clock), and
//! `--plan`, which prints it. Running the day through the engine's stages and reporting each
//! class's latencies comes next.

use std::ops::Range;
use std::time::Duration;

use crate::config::{format_duration, parse_duration};
use crate::proofs::shapes::{format_sector_size, parse_sector_size};

/// Options of `cuzk bench day`.
#[derive(clap::Args, Debug, Clone)]
pub struct DayBenchArgs {
    /// Sector size of every proof of the day.
    #[arg(long, value_parser = parse_sector_size, default_value = "32GiB")]
    pub sector_size: u64,
    /// How long the day runs: no proof is started after it.
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
    /// Print the day's arrivals and stop (the only mode built yet).
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
}

/// Runs `cuzk bench day`: with `--plan` prints the day's arrivals.
pub fn run(args: DayBenchArgs) -> anyhow::Result<()> {
    let day = Day::new(&args)?;
    anyhow::ensure!(
        args.plan,
        "cuzk bench day runs only with --plan so far: the day's arrivals are planned, running \
         them through the engine's stages is not built yet"
    );
    let arrivals = day.arrivals();
    println!(
        "a {} day of {} proofs, {} arrivals:",
        format_duration(day.duration()),
        format_sector_size(args.sector_size),
        arrivals.len()
    );
    println!(
        "{:>8}  start {} PoRep, and another whenever one ends until {}",
        "0s",
        day.porep_to_start(0, Duration::ZERO),
        format_duration(day.duration())
    );
    // Walked as the runner will issue them: at each arrival's time, whatever is due.
    let mut issued = 0;
    while let Some(next) = arrivals.get(issued) {
        let batch = Day::due(&arrivals, issued, next.at);
        for a in &arrivals[batch.clone()] {
            print_arrival(a);
        }
        issued = batch.end.max(issued + 1);
    }
    Ok(())
}

fn print_arrival(a: &Arrival) {
    let what = match a.class {
        Class::WinningPoSt => "WinningPoSt".to_string(),
        Class::WindowPoSt(k) => format!("WindowPoSt partition {k}"),
    };
    match a.due {
        Some(due) => println!(
            "{:>8}  {what}, due at {}",
            format_duration(a.at),
            format_duration(due)
        ),
        None => println!("{:>8}  {what}", format_duration(a.at)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> DayBenchArgs {
        DayBenchArgs {
            sector_size: 32 << 30,
            duration: Duration::from_secs(120),
            winning_post_every: Duration::from_secs(30),
            deadline_at: Duration::from_secs(60),
            deadline_partitions: 3,
            deadline_within: Duration::from_secs(600),
            porep_in_flight: 2,
            plan: true,
        }
    }

    #[test]
    fn a_day_is_winning_posts_each_period_and_the_deadline_at_its_time() {
        let day = Day::new(&args()).unwrap();
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
        let mut late = args();
        late.deadline_at = Duration::from_secs(120);
        let a = Day::new(&late).unwrap().arrivals();
        assert_eq!(a.len(), 3);
        assert!(a.iter().all(|a| a.class == Class::WinningPoSt));
        let mut none = args();
        none.deadline_partitions = 0;
        assert_eq!(Day::new(&none).unwrap().arrivals().len(), 3);
    }

    #[test]
    fn due_arrivals_are_those_up_to_now_not_yet_started() {
        let a = Day::new(&args()).unwrap().arrivals();
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
        let day = Day::new(&args()).unwrap();
        assert_eq!(day.porep_to_start(0, Duration::ZERO), 2);
        assert_eq!(day.porep_to_start(1, Duration::from_secs(50)), 1);
        assert_eq!(day.porep_to_start(3, Duration::from_secs(50)), 0);
        assert_eq!(day.porep_to_start(0, Duration::from_secs(120)), 0);
    }

    #[test]
    fn empty_periods_and_days_are_refused() {
        let mut a = args();
        a.winning_post_every = Duration::ZERO;
        assert_eq!(Day::new(&a), Err(DayError::NoPeriod));
        let mut a = args();
        a.duration = Duration::ZERO;
        assert_eq!(Day::new(&a), Err(DayError::NoDay));
    }
}
