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
//! The schedule (`bench_day_schedule.rs`) is pure — functions of the time since the day
//! began, passed in, so tests need no clock (`--plan` prints it); `bench_day_run.rs` is the
//! I/O around it.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::bench_day_report::{self as report, DayReport, Dist};
use super::bench_day_run::{self as runner, DayProver};
use super::bench_day_schedule::{Arrival, Class, Day, DayBenchArgs};
use super::rss::{peak_rss, reset_peak_rss};
use crate::config::format_duration;
use crate::pipeline::{PipelineOptions, ProvingService};
use crate::proofs::shapes::format_sector_size;
use crate::prover::Backend;

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
        "generating synthetic {} parameters (random points; sized in {:.1} s): {}; {:.1} GiB in all, the stages' budget {:.1} GiB",
        format_sector_size(args.sector_size),
        start.elapsed().as_secs_f64(),
        sets.iter()
            .map(|s| format!("{} {:.2} GiB", s.what, gib(s.sections.bytes())))
            .collect::<Vec<_>>()
            .join(", "),
        gib(bytes),
        gib(budget)
    );
    let took = runner::generate(&svc, &sets, budget)?;
    let held = runner::params_host_bytes(&svc);
    println!(
        "parameters generated and resident (on {}) in {:.1} s, {:.1} GiB of their host copies kept ({:.1} GiB of the budget left for the partitions in flight; admission waits for room); synthetic proofs are never verified: their witnesses are random",
        svc.backend_name(),
        took.as_secs_f64(),
        gib(held),
        gib(budget.saturating_sub(held))
    );
    let p = DayProver::new(svc, args.sector_size, args.window_post_sectors, args.seed)?;
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
    let pauses_before = pauses(p);
    let (done, wall) = runner::drive(p, day, &day.arrivals(), &print_done);
    let (b, a) = (pauses_before, pauses(p));
    println!(
        "the day's pauses of proofs on the device for WinningPoSt: {} after an assignment's upload, {} before a quotient transform, {} before an H MSM, {} before or between MSM pieces, {} before an aux MSM; {} of them ahead of its arrival",
        a.assignment.saturating_sub(b.assignment),
        a.quotient.saturating_sub(b.quotient),
        a.before_h.saturating_sub(b.before_h),
        a.msm_piece.saturating_sub(b.msm_piece),
        a.aux_msm.saturating_sub(b.aux_msm),
        a.ahead.saturating_sub(b.ahead)
    );
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
        winning_each: report::winning_parts(&done),
    })
}

/// The pauses counted on every device so far (none on the CPU).
fn pauses(p: &DayProver) -> crate::prover::DevicePauses {
    let mut sum = crate::prover::DevicePauses::default();
    for d in p.svc.device_memory().iter().filter_map(|d| d.pauses) {
        sum.assignment += d.assignment;
        sum.quotient += d.quotient;
        sum.before_h += d.before_h;
        sum.msm_piece += d.msm_piece;
        sum.aux_msm += d.aux_msm;
        sum.ahead += d.ahead;
    }
    sum
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

    /// The CPU keeps every host copy, so with room for the first set only the second is
    /// refused before it is made, and what was made stays counted (the sections' bytes
    /// count the verifying key's points too, which are not a query's).
    #[test]
    fn a_set_that_would_not_fit_beside_the_kept_copies_is_refused_before_it_is_made() {
        let cpu = crate::prover::cpu::CpuBackend::new(Default::default());
        let options = PipelineOptions {
            memory_budget: 1 << 30,
            ..PipelineOptions::default()
        };
        let svc =
            ProvingService::with_pipeline(PathBuf::from("/nonexistent"), Arc::new(cpu), &options)
                .unwrap();
        let sets = runner::sizes(2048, None).unwrap();
        let first = sets[0].sections.bytes();
        assert!(sets.len() > 1 && sets[1].sections.bytes() > 0);
        let err = runner::generate(&svc, &sets, first + 1).unwrap_err();
        assert!(
            err.to_string().contains("would not fit") && err.to_string().contains(&sets[1].what),
            "{err}"
        );
        let kept = runner::params_host_bytes(&svc);
        assert!(
            first - first / 100 < kept && kept <= first,
            "{kept} of {first}"
        );
        let all: u64 = sets.iter().map(|s| s.sections.bytes()).sum();
        runner::generate(&svc, &sets, all + 1).unwrap();
        let kept = runner::params_host_bytes(&svc);
        assert!(all - all / 100 < kept && kept <= all, "{kept} of {all}");
    }

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
            ..DayBenchArgs::example()
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
        assert!(r.day.porep_span <= r.day.wall);
        let per_hour = r.day.porep.count as f64 * 3600.0 / r.day.porep_span.as_secs_f64();
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
}
