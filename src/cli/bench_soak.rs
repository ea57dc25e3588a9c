//! `cuzk bench soak`: many proofs through one real `cuzkd`, a bounded number in flight, and
//! the daemon's resident memory (`VmRSS`) and open descriptors sampled as they finish. The
//! goal (issue 16): RSS drift under 5 % over 1,000 proofs after a warm-up, and no growth in
//! open descriptors.
//!
//! The warm-up is the first tenth of the proofs, at least 20 (parameters loaded, shapes
//! recorded, pools grown); the baseline is the first sample at or after it. Drift and slope
//! compare samples taken under the same load: only samples taken while proofs remained to
//! submit (the queue refilled to `--in-flight`) count, so the end of the drift is the last
//! of those, not the sample after the queue drained. Drift is (end − baseline) / baseline;
//! the slope is a least-squares fit of RSS against proofs over those samples from the
//! baseline on.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};

use super::bench_daemon::{Daemon, DaemonFlags};
use crate::proto::ClientError;

const CLIENT: &str = "cuzk-bench-soak";
/// The goal of issue 16: RSS drift after warm-up over 1,000 proofs.
const GOAL_DRIFT: f64 = 0.05;
/// The shortest warm-up, in proofs.
const MIN_WARM_UP: usize = 20;
/// Failure messages kept for the report (all are counted).
const KEPT_FAILURES: usize = 5;

/// `cuzk bench soak …`
#[derive(Debug, clap::Args)]
pub struct SoakBenchArgs {
    /// Proofs to run.
    #[arg(long, default_value_t = 1000)]
    pub proofs: usize,
    /// Proofs in flight at once (submitted and not yet finished).
    #[arg(long, default_value_t = 3)]
    pub in_flight: usize,
    /// Every this many proofs is a WinningPoSt, the others PoRep C2 (0: PoRep only, 1:
    /// WinningPoSt only).
    #[arg(long, default_value_t = 10)]
    pub winning_every: usize,
    /// Sample the daemon's RSS and descriptors after every this many proofs (and always
    /// after the warm-up and the last proof).
    #[arg(long, default_value_t = 1)]
    pub sample_every: usize,
    /// Write the samples to this file as CSV (proofs, seconds, rss_bytes, open_fds).
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// The daemon and its inputs.
    #[command(flatten)]
    pub daemon: DaemonFlags,
}

/// The daemon after `proofs` proofs had finished, `secs` into the run.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Sample {
    proofs: usize,
    secs: f64,
    rss: u64,
    fds: usize,
    /// Whether proofs remained to submit: the daemon had `--in-flight` jobs, the load of
    /// the run; the last samples, as the queue drains, have fewer.
    steady: bool,
}

/// The proofs of the warm-up: a tenth of the run, at least [`MIN_WARM_UP`], at most the run.
fn warm_up(proofs: usize) -> usize {
    proofs.div_ceil(10).max(MIN_WARM_UP).min(proofs)
}

/// What the samples say, for a run with a warm-up of `warm_up` proofs.
#[derive(Debug, PartialEq)]
struct Summary {
    start: Sample,
    /// The last sample, after the queue drained.
    end: Sample,
    /// The last sample under the run's load: the end of the drift.
    end_steady: Option<Sample>,
    /// The first sample at or after the warm-up, when a later one exists (else the run is
    /// too short to measure drift).
    baseline: Option<Sample>,
    max_rss: u64,
    max_fds: usize,
    /// (end under load − baseline) / baseline.
    drift: Option<f64>,
    /// The same between the medians of the first and the last tenth of the samples under
    /// load after the warm-up: one sample at either end may catch a transient (a batch of
    /// buffers alive for a moment), a tenth's median does not.
    drift_windowed: Option<f64>,
    /// RSS bytes per 100 proofs, least squares over the samples from the baseline on.
    slope_per_100: Option<f64>,
}

impl Summary {
    fn of(samples: &[Sample], warm_up: usize) -> Option<Self> {
        let (start, end) = (*samples.first()?, *samples.last()?);
        let steady: Vec<Sample> = samples
            .iter()
            .filter(|s| s.steady && s.proofs >= warm_up)
            .copied()
            .collect();
        let (baseline, end_steady) = match steady.as_slice() {
            [first, .., last] => (Some(*first), Some(*last)),
            _ => (None, None),
        };
        let drift = baseline
            .zip(end_steady)
            .filter(|(b, _)| b.rss > 0)
            .map(|(b, e)| (e.rss as f64 - b.rss as f64) / b.rss as f64);
        let drift_windowed = windowed_drift(&steady);
        let slope_per_100 = baseline
            .and_then(|_| slope(steady.iter().map(|s| (s.proofs as f64, s.rss as f64))))
            .map(|b| b * 100.0);
        Some(Self {
            start,
            end,
            end_steady,
            baseline,
            max_rss: samples.iter().map(|s| s.rss).max().unwrap_or(0),
            max_fds: samples.iter().map(|s| s.fds).max().unwrap_or(0),
            drift,
            drift_windowed,
            slope_per_100,
        })
    }
}

/// (median of the last tenth − median of the first tenth) / median of the first tenth, of
/// the samples' RSS; `None` for fewer than two samples.
fn windowed_drift(samples: &[Sample]) -> Option<f64> {
    if samples.len() < 2 {
        return None;
    }
    let k = (samples.len() / 10).max(1);
    let median = |w: &[Sample]| {
        let mut r: Vec<u64> = w.iter().map(|s| s.rss).collect();
        r.sort_unstable();
        r.get(r.len() / 2).copied()
    };
    let first = median(samples.get(..k)?)?;
    let last = median(samples.get(samples.len() - k..)?)?;
    (first > 0).then(|| (last as f64 - first as f64) / first as f64)
}

/// The least-squares slope of y on x; `None` for fewer than two distinct x.
fn slope(points: impl Iterator<Item = (f64, f64)> + Clone) -> Option<f64> {
    let n = points.clone().count() as f64;
    if n < 2.0 {
        return None;
    }
    let (sx, sy) = points
        .clone()
        .fold((0.0, 0.0), |(a, b), (x, y)| (a + x, b + y));
    let (mx, my) = (sx / n, sy / n);
    let (sxy, sxx) = points.fold((0.0, 0.0), |(a, b), (x, y)| {
        (a + (x - mx) * (y - my), b + (x - mx) * (x - mx))
    });
    (sxx > 0.0).then(|| sxy / sxx)
}

/// Whether the proof of index `i` (from 0) is a WinningPoSt.
fn is_winning(i: usize, winning_every: usize) -> bool {
    winning_every > 0 && (i + 1).is_multiple_of(winning_every)
}

fn mib(bytes: f64) -> String {
    format!("{:.1} MiB", bytes / (1u64 << 20) as f64)
}

fn met(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "not met"
    }
}

fn sample(daemon: &Daemon, proofs: usize, steady: bool, start: Instant) -> anyhow::Result<Sample> {
    let rss = daemon
        .rss()
        .context("cannot read the daemon's VmRSS from /proc")?;
    Ok(Sample {
        proofs,
        secs: start.elapsed().as_secs_f64(),
        rss,
        fds: daemon.open_fds()?,
        steady,
    })
}

/// Runs the benchmark with the parameter directory `params`.
pub fn run(args: SoakBenchArgs, params: &Path) -> anyhow::Result<()> {
    if args.proofs == 0 || args.in_flight == 0 || args.sample_every == 0 {
        bail!("--proofs, --in-flight and --sample-every must be at least 1");
    }
    let exe = args.daemon.exe()?;
    let inputs = args.daemon.inputs()?;
    let mut daemon = Daemon::start(&exe, params, &args.daemon.set, CLIENT)?;
    let mut client = daemon.client()?;
    let welcome = client.welcome().clone();
    let n = args.proofs;
    let warm = warm_up(n);

    let start = Instant::now();
    let mut samples = vec![sample(&daemon, 0, false, start)?];
    let mut queue: VecDeque<(u64, usize)> = VecDeque::new();
    let (mut next, mut done, mut failed) = (0, 0, 0);
    let mut failures: Vec<String> = Vec::new();
    let report_every = n.div_ceil(20).max(1);
    while done < n {
        while queue.len() < args.in_flight && next < n {
            let submit = if is_winning(next, args.winning_every) {
                inputs.winning()
            } else {
                inputs.porep()
            };
            let accepted = client
                .submit(submit)
                .with_context(|| format!("submitting proof {next}"))?;
            queue.push_back((accepted.job_id, next));
            next += 1;
        }
        let Some((job, index)) = queue.pop_front() else {
            break;
        };
        let failure = loop {
            match client.await_job(job, Some(Duration::from_secs(60))) {
                Ok(Ok(r)) if r.proof.is_empty() => break Some("an empty proof".to_string()),
                Ok(Ok(_)) => break None,
                Ok(Err(_pending)) => daemon.check_running()?,
                Err(ClientError::Server(e)) => break Some(e.to_string()),
                Err(e) => {
                    daemon.check_running()?;
                    return Err(e).with_context(|| format!("awaiting job {job}"));
                }
            }
        };
        if let Some(why) = failure {
            failed += 1;
            if failures.len() < KEPT_FAILURES {
                failures.push(format!("proof {index} (job {job}): {why}"));
            }
        }
        done += 1;
        if done.is_multiple_of(args.sample_every) || done == warm || done == n {
            samples.push(sample(&daemon, done, next < n, start)?);
        }
        if done.is_multiple_of(report_every) {
            if let Some(s) = samples.last() {
                eprintln!(
                    "soak: {done}/{n} proofs, {:.0} s, RSS {}, {} fds, {failed} failed",
                    s.secs,
                    mib(s.rss as f64),
                    s.fds
                );
            }
        }
    }
    let wall = start.elapsed();
    drop(client);
    drop(daemon);

    if let Some(path) = &args.csv {
        std::fs::write(path, csv(&samples))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    let winning = (0..n)
        .filter(|&i| is_winning(i, args.winning_every))
        .count();
    println!(
        "cuzk bench soak: {n} proofs ({} PoRep C2, {winning} WinningPoSt), devices configured: {}, {} in flight, {failed} failed, {:.1} s ({:.1} proofs/min)",
        n - winning,
        welcome.backend,
        args.in_flight,
        wall.as_secs_f64(),
        n as f64 / wall.as_secs_f64() * 60.0
    );
    if let Some(s) = Summary::of(&samples, warm) {
        print!("{}", table(&s, warm));
    }
    for f in &failures {
        eprintln!("failed: {f}");
    }
    if failed > 0 {
        bail!("{failed} of {n} proofs failed");
    }
    Ok(())
}

/// The report's table.
fn table(s: &Summary, warm: usize) -> String {
    let mut out = String::new();
    let mut row = |cells: [&str; 4]| {
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    };
    row(["measure", "this run", "goal", "status"]);
    row(["---", "---", "---", "---"]);
    let base = s.baseline;
    let base_rss = base.map_or("–".into(), |b| mib(b.rss as f64));
    let end_steady = s.end_steady.map_or("–".into(), |e| mib(e.rss as f64));
    row([
        &format!(
            "daemon RSS: start / after warm-up ({warm} proofs) / last under load / drained / max"
        ),
        &format!(
            "{} / {base_rss} / {end_steady} / {} / {}",
            mib(s.start.rss as f64),
            mib(s.end.rss as f64),
            mib(s.max_rss as f64)
        ),
        "",
        "",
    ]);
    match (base, s.end_steady, s.drift) {
        (Some(b), Some(e), Some(d)) => row([
            &format!("RSS drift under load, proofs {} → {}", b.proofs, e.proofs),
            &format!("{:+.2} %", d * 100.0),
            &format!("< {:.0} %", GOAL_DRIFT * 100.0),
            met(d < GOAL_DRIFT),
        ]),
        _ => row([
            "RSS drift",
            &format!(
                "not measured: fewer than two samples under load after the warm-up of {warm} proofs"
            ),
            &format!("< {:.0} %", GOAL_DRIFT * 100.0),
            "not measured",
        ]),
    }
    if let Some(d) = s.drift_windowed {
        row([
            "RSS drift under load, medians of the first and last tenth after warm-up",
            &format!("{:+.2} %", d * 100.0),
            &format!("< {:.0} %", GOAL_DRIFT * 100.0),
            met(d < GOAL_DRIFT),
        ]);
    }
    if let (Some(b), Some(k)) = (base, s.slope_per_100) {
        row([
            "RSS slope after warm-up (least squares)",
            &format!(
                "{:+.2} MiB per 100 proofs ({:+.3} % of the baseline)",
                k / (1u64 << 20) as f64,
                k / b.rss.max(1) as f64 * 100.0
            ),
            "",
            "",
        ]);
    }
    row([
        "open fds: start / after warm-up / end / max",
        &format!(
            "{} / {} / {} / {}",
            s.start.fds,
            base.map_or("–".into(), |b| b.fds.to_string()),
            s.end.fds,
            s.max_fds
        ),
        "",
        "",
    ]);
    let since_start = s.end.fds as i64 - s.start.fds as i64;
    match base {
        Some(b) => {
            let growth = s.end.fds as i64 - b.fds as i64;
            row([
                "fd growth after warm-up (since start)",
                &format!("{growth:+} ({since_start:+})"),
                "0",
                met(growth <= 0),
            ]);
        }
        None => row([
            "fd growth since start",
            &format!("{since_start:+}"),
            "0",
            met(since_start <= 0),
        ]),
    }
    out
}

/// The samples as CSV.
fn csv(samples: &[Sample]) -> String {
    let mut out = String::from("proofs,seconds,rss_bytes,open_fds\n");
    for s in samples {
        let _ = writeln!(out, "{},{:.3},{},{}", s.proofs, s.secs, s.rss, s.fds);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(proofs: usize, rss: u64, fds: usize) -> Sample {
        Sample {
            proofs,
            secs: proofs as f64,
            rss,
            fds,
            steady: true,
        }
    }

    fn drained(proofs: usize, rss: u64, fds: usize) -> Sample {
        Sample {
            steady: false,
            ..at(proofs, rss, fds)
        }
    }

    #[test]
    fn the_warm_up_is_a_tenth_at_least_20_at_most_the_run() {
        assert_eq!(warm_up(1000), 100);
        assert_eq!(warm_up(1001), 101);
        assert_eq!(warm_up(200), 20);
        assert_eq!(warm_up(50), 20);
        assert_eq!(warm_up(3), 3);
    }

    #[test]
    fn slope_is_least_squares() {
        let line = [(0.0, 1.0), (1.0, 3.0), (2.0, 5.0)];
        assert_eq!(slope(line.iter().copied()), Some(2.0));
        // Noise around a flat line: no slope.
        let flat = [(0.0, 1.0), (1.0, 2.0), (2.0, 1.0), (3.0, 2.0), (4.0, 1.0)];
        assert!(slope(flat.iter().copied()).is_some_and(|k| k.abs() < 0.2));
        assert_eq!(slope([(1.0, 1.0)].iter().copied()), None);
        assert_eq!(slope([(1.0, 1.0), (1.0, 2.0)].iter().copied()), None);
    }

    #[test]
    fn drift_is_from_the_first_sample_after_the_warm_up() {
        // The warm-up grows memory; afterwards 1 % per 100 proofs.
        let mut samples = vec![at(0, 100, 10), at(10, 500, 12), at(19, 900, 12)];
        samples.extend((20..=220).step_by(20).map(|p| {
            let rss = 1000 + (p as u64 - 20) / 10;
            at(p, rss, 12)
        }));
        // The queue drains: memory falls, and that is no trend.
        samples.push(drained(221, 700, 12));
        samples.push(drained(222, 600, 12));
        let s = Summary::of(&samples, 20).unwrap();
        assert_eq!(s.baseline, Some(at(20, 1000, 12)));
        assert_eq!(s.end_steady, Some(at(220, 1020, 12)));
        assert_eq!(s.end, drained(222, 600, 12));
        assert_eq!((s.max_rss, s.max_fds), (1020, 12));
        assert!((s.drift.unwrap() - 0.02).abs() < 1e-12);
        assert!((s.slope_per_100.unwrap() - 10.0).abs() < 1e-9);
        // Eleven samples under load: tenths of one sample each, 1000 and 1020.
        assert!((s.drift_windowed.unwrap() - 0.02).abs() < 1e-12);
        let t = table(&s, 20);
        assert!(
            t.contains("| RSS drift under load, proofs 20 → 220 | +2.00 % | < 5 % | met |"),
            "{t}"
        );
        assert!(t.contains("| fd growth after warm-up (since start) | +0 (+2) | 0 | met |"));
    }

    #[test]
    fn windowed_drift_ignores_a_spike_at_the_end() {
        let mut samples: Vec<Sample> = (0..100).map(|p| at(p, 1000 + (p as u64 % 3), 1)).collect();
        samples.push(at(100, 1100, 1));
        let d = windowed_drift(&samples).unwrap();
        assert!(d.abs() < 0.002, "{d}");
        assert_eq!(windowed_drift(&samples[..1]), None);
    }

    #[test]
    fn a_run_within_its_warm_up_is_not_measured() {
        let samples = [at(0, 100, 10), at(1, 110, 11), drained(3, 120, 11)];
        let s = Summary::of(&samples, warm_up(3)).unwrap();
        assert_eq!((s.baseline, s.drift, s.slope_per_100), (None, None, None));
        let t = table(&s, 3);
        assert!(t.contains("not measured"), "{t}");
        assert!(
            t.contains("| fd growth since start | +1 | 0 | not met |"),
            "{t}"
        );
        assert_eq!(Summary::of(&[], 3), None);
    }

    #[test]
    fn the_mix_puts_a_winning_post_every_nth() {
        let kinds: Vec<bool> = (0..20).map(|i| is_winning(i, 10)).collect();
        assert_eq!(kinds.iter().filter(|&&w| w).count(), 2);
        assert!(kinds[9] && kinds[19]);
        assert!((0..5).all(|i| !is_winning(i, 0) && is_winning(i, 1)));
    }

    #[test]
    fn csv_has_a_header_and_a_row_per_sample() {
        let text = csv(&[at(0, 100, 10), at(1, 110, 11)]);
        assert_eq!(
            text,
            "proofs,seconds,rss_bytes,open_fds\n0,0.000,100,10\n1,1.000,110,11\n"
        );
    }
}
