//! `cuzk bench day` (issue 41): a storage provider's day at one sector size — a continuous
//! PoRep load, a WindowPoSt deadline of N partitions arriving at a set time, a WinningPoSt
//! every period. What is built so far is the day's arrival schedule, as pure functions of the
//! time since the day began (the caller passes the time in, so tests need no clock), and
//! `--plan`, which prints it. Running the day through the engine's stages and reporting each
//! class's latencies comes next.

//! `cuzk bench day` (issue 41): a storage provider's day at one sector size, run for real
//! through the engine's proving stages on the GPU where there is one (the CPU otherwise) — a
//! continuous PoRep load (`--porep-in-flight` synthetic sectors, topped up all day), a
//! WindowPoSt deadline of N synthetic partitions arriving at `--deadline-at`, a synthetic
//! WinningPoSt every `--winning-post-every` — each proof a job in the class the engine gives
//! its kind (WinningPoSt critical, WindowPoSt high, PoRep normal).
//!
//! Before the day, in the same process: the synthetic parameters (random points of each
//! kind's section sizes) are made and made resident, a PoRep sector and a WinningPoSt are
//! proved as warm-ups (the PoRep circuit's shape is recorded then; WindowPoSt's is recorded
//! by the deadline's first partition, as in a daemon's first deadline), WinningPoSt is timed
//! alone (its idle latency, the reference of its goal), and PoRep runs alone for `--reference-for` (sectors
//! per hour without the PoSt work). Then the day; the report (`bench_day_report.rs`) gives
//! each class's latencies, the deadline's completion time after it arrived, PoRep sectors
//! per hour with and without the PoSt work, the device's busy fraction and the peak RSS,
//! beside issue 41's goals. Synthetic proofs are never verified (their witnesses are random).
//!
//! The schedule is pure — functions of the time since the day began, passed in, so tests
//! need no clock (`--plan` prints it); `bench_day_run.rs` is the I/O around it.

use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::bench_day_report::{self as report, DayReport, Dist};
use super::bench_day_run::{self as runner, DayProver};
use super::rss::{peak_rss, reset_peak_rss};
use crate::config::{format_duration, parse_duration, parse_size};
use crate::pipeline::{PipelineOptions, ProvingService};
use crate::proofs::shapes::{format_sector_size, parse_sector_size};
use crate::prover::Backend;

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
    /// 32 GiB, 125 M constraints]. Host memory: the three kinds' synthetic parameters are
    /// resident together; at 32 GiB PoRep's take 44 GiB and a whole WindowPoSt partition's
    /// 57 GiB (1000 slots: 25 GiB; 600: 14 GiB; each slot adds 53,344 constraints), which
    /// with a PoRep load in flight does not fit 125 GiB: pass e.g. 600. The sizes are printed
    /// before the parameters are made, and a day whose parameters exceed the stages' budget
    /// is refused.
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

/// Runs `cuzk bench day`: with `--plan` prints the day's arrivals; otherwise runs the day on
/// the backend `open` gives (the GPU, or the CPU where there is none).
pub fn run(args: DayBenchArgs, open: &dyn Fn() -> Arc<dyn Backend>) -> anyhow::Result<()> {
    let day = Day::new(&args)?;
    if args.plan {
        print_plan(&args, &day);
        return Ok(());
    }
    let r = run_day(&args, &day, open())?;
    report::print(&r);
    let failures = r.failures();
    anyhow::ensure!(
        failures.is_empty(),
        "{} proofs failed: {}",
        failures.len(),
        failures.join("; ")
    );
    Ok(())
}

/// The service, its parameters (sized, refused past the budget, made), then the run.
fn run_day(args: &DayBenchArgs, day: &Day, backend: Arc<dyn Backend>) -> anyhow::Result<DayReport> {
    let budget = super::bench_partition::stages_budget(args.memory_budget)?;
    let options = PipelineOptions {
        memory_budget: budget,
        ..PipelineOptions::default()
    };
    let svc = ProvingService::with_pipeline(PathBuf::from("/nonexistent"), backend, &options)?;
    let trace = match &args.trace_file {
        Some(path) => Some(crate::daemon::trace::open(path)?),
        None => None,
    };
    let device = Arc::new(runner::DeviceTime::default());
    svc.observe_stages(device.observer(trace));
    reset_peak_rss();
    let start = Instant::now();
    let sets = runner::sizes(args.sector_size, args.window_post_sectors)?;
    let bytes: u64 = sets.iter().map(|s| s.sections.bytes()).sum();
    let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
    println!(
        "generating synthetic {} parameters (random points; sized in {:.1} s): {}; {:.1} GiB of host memory in all, the stages' budget {:.1} GiB",
        format_sector_size(args.sector_size),
        start.elapsed().as_secs_f64(),
        sets.iter()
            .map(|s| format!("{} {:.2} GiB", s.what, gib(s.sections.bytes())))
            .collect::<Vec<_>>()
            .join(", "),
        gib(bytes),
        gib(budget)
    );
    anyhow::ensure!(
        bytes < budget,
        "the parameters would not fit the stages' memory budget: pass --window-post-sectors \
         (fewer WindowPoSt sector slots) or --memory-budget"
    );
    println!(
        "{:.1} GiB of the budget left for the partitions in flight (admission waits for room)",
        gib(budget - bytes)
    );
    let took = runner::generate(&svc, &sets)?;
    println!(
        "parameters generated and resident (on {}) in {:.1} s; synthetic proofs are never verified: their witnesses are random",
        svc.backend_name(),
        took.as_secs_f64()
    );
    let p = DayProver::new(svc, args.sector_size, args.window_post_sectors, args.seed);
    stretches(args, day, &p, &device)
}

/// WinningPoSt alone, PoRep alone, then the day; the report of all three.
fn stretches(
    args: &DayBenchArgs,
    day: &Day,
    p: &DayProver,
    device: &runner::DeviceTime,
) -> anyhow::Result<DayReport> {
    let idle = runner::idle_winning(p, args.idle_runs)?;
    let idle_winning = Dist::of(&idle);
    println!(
        "WinningPoSt alone: {} runs after the warm-ups (a PoRep sector and a WinningPoSt), median {:.2} s",
        idle.len(),
        idle_winning.p50.as_secs_f64()
    );
    println!(
        "PoRep alone for {} ({} in flight; those started finish):",
        format_duration(args.reference_for),
        args.porep_in_flight
    );
    let (done, wall) = runner::drive(p, &day.porep_alone(args.reference_for), &[], &print_done);
    let reference = report::Stretch::of(&done, wall);
    println!(
        "PoRep alone: {} sectors in {:.1} s",
        reference.porep.count,
        wall.as_secs_f64()
    );
    println!(
        "the day: {} of {} synthetic proofs, {} arrivals (each proof's end below, since the day began)",
        format_duration(day.duration()),
        format_sector_size(args.sector_size),
        day.arrivals().len()
    );
    // PoSt's classes: WindowPoSt's (high, 2) and WinningPoSt's (critical, 3).
    let (busy_before, post_before) = (p.svc.pipeline().device_busy, device.of_classes_from(2));
    let (done, wall) = runner::drive(p, day, &day.arrivals(), &print_done);
    let busy = p.svc.pipeline().device_busy.saturating_sub(busy_before);
    let post_device = device.of_classes_from(2).saturating_sub(post_before);
    let f = DayReport::of_day(&done, wall, args.deadline_at.min(day.duration()));
    Ok(DayReport {
        idle_winning,
        reference,
        day: f.day,
        winning: f.winning,
        window: f.window,
        deadline_partitions: deadline_count(day),
        deadline_done: f.deadline_done,
        deadline_within: args.deadline_within,
        device_busy: busy.as_secs_f64() / wall.as_secs_f64().max(1e-9),
        post_device,
        peak_rss: peak_rss(),
    })
}

/// The day's WindowPoSt partitions (none where the deadline is after the day).
fn deadline_count(day: &Day) -> usize {
    let a = day.arrivals();
    a.iter()
        .filter(|a| matches!(a.class, Class::WindowPoSt(_)))
        .count()
}

/// One line per proof as it ends, for whoever watches the day.
fn print_done(d: &report::Done) {
    let what = match d.work {
        report::Work::PoRep => "PoRep sector".to_string(),
        report::Work::Winning => "WinningPoSt".to_string(),
        report::Work::Window(k) => format!("WindowPoSt partition {k}"),
    };
    let end = format!("{:>8.1}s", d.ended.as_secs_f64());
    match &d.error {
        None => println!("{end}  {what} done in {:.2} s", d.latency().as_secs_f64()),
        Some(e) => println!("{end}  {what} FAILED: {e}"),
    }
}

fn print_plan(args: &DayBenchArgs, day: &Day) {
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
            reference_for: Duration::from_secs(10),
            idle_runs: 1,
            window_post_sectors: None,
            memory_budget: None,
            trace_file: None,
            seed: 1,
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
    fn the_runner_wakes_for_the_next_arrival_then_the_end() {
        let day = Day::new(&args()).unwrap();
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
    /// loaded cores (the 2 KiB PoRep partition's device stage is most of it).
    #[test]
    fn a_tiny_day_runs_every_class_through_the_stages() {
        let dir = tempfile::tempdir().unwrap();
        let s = |x| Duration::from_secs(x);
        let a = DayBenchArgs {
            sector_size: 2048,
            duration: s(10),
            winning_post_every: s(3),
            deadline_at: s(2),
            deadline_partitions: 2,
            porep_in_flight: 1,
            reference_for: s(1),
            memory_budget: Some(8 << 30),
            trace_file: Some(dir.path().join("trace.json")),
            plan: false,
            ..args()
        };
        let day = Day::new(&a).unwrap();
        let cpu = crate::prover::cpu::CpuBackend::new(Default::default());
        let r = run_day(&a, &day, Arc::new(cpu)).unwrap();
        assert!(r.failures().is_empty(), "{:?}", r.failures());
        let counts = (r.idle_winning.count, r.winning.count, r.window.count);
        assert_eq!(
            counts,
            (1, 3, 2),
            "WinningPoSt at 3, 6 and 9 s; two partitions"
        );
        assert!(
            r.day.porep.count >= 1 && r.reference.porep.count >= 1,
            "{r:?}"
        );
        for d in [
            r.idle_winning,
            r.winning,
            r.window,
            r.day.porep,
            r.reference.porep,
        ] {
            assert!(
                Duration::ZERO < d.p50 && d.p50 <= d.p90 && d.p90 <= d.max,
                "{d:?}"
            );
        }
        assert_eq!(r.deadline_partitions, 2);
        assert_eq!(r.deadline_done, Some(r.window.max), "both arrived at once");
        assert!(r.day.wall >= a.duration && r.day.porep.max <= r.day.wall);
        let per_hour = r.day.porep.count as f64 * 3600.0 / r.day.wall.as_secs_f64();
        assert!((r.day.porep_per_hour - per_hour).abs() < 1e-6);
        assert!(r.reference.wall >= r.reference.porep.max);
        assert!(
            0.0 < r.device_busy && r.device_busy <= 1.01,
            "{}",
            r.device_busy
        );
        assert!(r.peak_rss > 0);
        let trace = std::fs::read_to_string(dir.path().join("trace.json")).unwrap();
        assert!(trace.contains("\"cat\":\"device\"") && trace.contains("\"class\":3"));
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
