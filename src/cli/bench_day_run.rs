//! The I/O of `cuzk bench day` around its pure schedule (`bench_day_schedule.rs`): the
//! synthetic parameters of the day's three kinds made resident in one proving service, and
//! the loop that starts each proof through the service's stages when the schedule says, in
//! the class the engine gives its kind, and gathers when it ended.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::bench_day_report::{Done, Work};
use super::bench_day_schedule::{Arrival, Class, Day};
use super::bench_partition::{srs_of, Sections};
use crate::engine::Priority;
use crate::pipeline::{
    JobControl, ProveError, ProvingService, SpanObserver, Stage, StageSpan, StageTimings,
};
use crate::proofs::porep::synthetic as porep;
use crate::proofs::post::synthetic as post;
use crate::srs::{ParamsId, ProofKind};

/// The day's proofs, all through one service: a synthetic sector's PoRep, a synthetic
/// WinningPoSt partition, a synthetic WindowPoSt partition of `window_sectors` slots.
pub(super) struct DayProver {
    pub svc: ProvingService,
    pub sector_size: u64,
    pub window_sectors: Option<usize>,
    /// The next proof's seed: every proof has values of its own.
    seeds: AtomicU64,
    /// The WinningPoSt partition, made once ahead: a WinningPoSt arrives with its vanilla
    /// proofs made, so its latency counts what the job does with them, not the making of
    /// random Merkle paths (every WinningPoSt of the day proves these same values).
    winning: post::Prebuilt,
}

impl DayProver {
    /// Over `svc`, with the day's sets already resident.
    pub fn new(
        svc: ProvingService,
        sector_size: u64,
        window_sectors: Option<usize>,
        seed: u64,
    ) -> Result<Self, ProveError> {
        let winning = post::prebuild(ProofKind::WinningPoSt, sector_size, None, seed)?;
        Ok(DayProver {
            svc,
            sector_size,
            window_sectors,
            seeds: AtomicU64::new(seed + 1),
            winning,
        })
    }

    /// Proves one `work` through the stages, in its kind's class: its stage timings.
    pub fn prove(&self, work: Work) -> Result<StageTimings, ProveError> {
        let seed = self.seeds.fetch_add(1, Ordering::Relaxed);
        let control = |kind| JobControl::with_class(Priority::for_kind(kind).class());
        let size = self.sector_size;
        match work {
            Work::PoRep => porep::prove_sector(&self.svc, size, seed, &control(ProofKind::PoRep)),
            Work::Winning => {
                let c = control(ProofKind::WinningPoSt);
                post::prove_prebuilt(&self.svc, &self.winning, &c)
            }
            Work::Window(_) => {
                let (c, slots) = (control(ProofKind::WindowPoSt), self.window_sectors);
                post::prove_partition(&self.svc, ProofKind::WindowPoSt, size, slots, seed, &c)
            }
        }
    }
}

/// One parameter set the day needs: its id, what it is, its sections.
pub(super) struct Set {
    pub id: ParamsId,
    pub what: String,
    pub sections: Sections,
}

/// The sections of the day's three sets: PoRep's from one synthesized partition (in parts on
/// every core), WinningPoSt's from its whole partition, WindowPoSt's from its first one and
/// two sector slots (the slots are identical sub-circuits: every section grows by the same
/// amount per slot), so the whole 130 M-constraint partition is never synthesized for it.
pub(super) fn sizes(
    sector_size: u64,
    window_sectors: Option<usize>,
) -> Result<Vec<Set>, ProveError> {
    let of = |r: Result<crate::synth::Synthesized, ProveError>| r.map(|s| Sections::of(&s));
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let porep_set = Set {
        id: porep::params_id(sector_size),
        what: "PoRep partition".into(),
        sections: of(porep::synthesize(sector_size, 0, threads, 1))?,
    };
    let winning = Set {
        id: post::params_id(ProofKind::WinningPoSt, sector_size),
        what: "WinningPoSt partition".into(),
        sections: of(post::synthesize(
            ProofKind::WinningPoSt,
            sector_size,
            None,
            1,
        ))?,
    };
    let all = post::shape(ProofKind::WindowPoSt, sector_size)?.sectors;
    let slots = window_sectors.unwrap_or(all);
    let prefix = |n: usize| {
        of(post::synthesize(
            ProofKind::WindowPoSt,
            sector_size,
            Some(n),
            1,
        ))
    };
    let window_sections = match slots {
        0 => {
            return Err(ProveError::InvalidInput(
                "no WindowPoSt sector slots".into(),
            ))
        }
        1 | 2 => prefix(slots)?,
        n if n > all => {
            return Err(ProveError::InvalidInput(format!(
                "{n} WindowPoSt sector slots: a partition has {all}"
            )))
        }
        n => extrapolate(&prefix(1)?, &prefix(2)?, n),
    };
    let window = Set {
        id: post::params_id(ProofKind::WindowPoSt, sector_size),
        what: format!("WindowPoSt partition of {slots} of {all} sectors"),
        sections: window_sections,
    };
    Ok(vec![porep_set, winning, window])
}

/// The sections of a circuit of `n` identical slots from those of its first one and two.
pub(super) fn extrapolate(one: &Sections, two: &Sections, n: usize) -> Sections {
    let f = |a: usize, b: usize| a + (n - 1) * (b - a);
    Sections {
        constraints: f(one.constraints, two.constraints),
        inputs: f(one.inputs, two.inputs),
        aux: f(one.aux, two.aux),
        a_aux: f(one.a_aux, two.a_aux),
        b: f(one.b, two.b),
    }
}

/// Makes each set's parameters of random points and makes them resident in `svc` (on its
/// devices too), one set at a time (those resident already skipped): a device that holds a
/// set's points lets its host copy go before the next is made. Refused before a set whose
/// host copy would not fit the budget beside the copies kept so far. Returns the time taken.
pub(super) fn generate(
    svc: &ProvingService,
    sets: &[Set],
    budget: u64,
) -> anyhow::Result<Duration> {
    let start = Instant::now();
    for set in sets.iter().filter(|s| !svc.is_resident(&s.id)) {
        let (kept, bytes) = (params_host_bytes(svc), set.sections.bytes());
        anyhow::ensure!(
            kept.saturating_add(bytes) < budget,
            "the {} parameters ({bytes} bytes) would not fit the stages' memory budget of \
             {budget} bytes beside the {kept} bytes of host copies kept so far: pass \
             --window-post-sectors (fewer WindowPoSt sector slots) or --memory-budget",
            set.what
        );
        svc.preload_built(&set.id, Arc::new(srs_of(&set.sections)))?;
    }
    Ok(start.elapsed())
}

/// Bytes of the resident sets' host copies held now.
pub(super) fn params_host_bytes(svc: &ProvingService) -> u64 {
    svc.resident().iter().map(|p| p.params.resident_bytes).sum()
}

/// The warm-ups, side by side: a PoRep sector (its first records the circuit's shape, as a
/// daemon's first sector does, so that the reference stretch is steady) and a WinningPoSt.
/// Then WinningPoSt alone, `runs` timed one after another.
pub(super) fn idle_winning(p: &DayProver, runs: usize) -> Result<Vec<Duration>, ProveError> {
    std::thread::scope(|scope| {
        let porep = scope.spawn(|| p.prove(Work::PoRep));
        let winning = p.prove(Work::Winning);
        let porep = porep
            .join()
            .unwrap_or_else(|_| Err(ProveError::Synthesis("the PoRep warm-up panicked".into())));
        porep.and(winning).map(drop)
    })?;
    (0..runs)
        .map(|_| {
            let start = Instant::now();
            p.prove(Work::Winning).map(|_| start.elapsed())
        })
        .collect()
}

/// Device time per class (0 low to 3 critical), summed from the stages' spans.
#[derive(Default)]
pub(super) struct DeviceTime(Mutex<[Duration; 4]>);

impl DeviceTime {
    /// An observer of the stages that adds each device span to its class, then hands every
    /// span to `then` (the trace writer) where there is one.
    pub fn observer(self: &Arc<Self>, then: Option<SpanObserver>) -> SpanObserver {
        let me = self.clone();
        Arc::new(move |span: &StageSpan| {
            if span.stage == Stage::Device {
                let mut t = me.0.lock().unwrap_or_else(PoisonError::into_inner);
                if let Some(c) = t.get_mut(usize::from(span.class)) {
                    *c += span.end.saturating_duration_since(span.start);
                }
            }
            if let Some(then) = &then {
                then(span);
            }
        })
    }

    /// Device time so far of the classes `from..`.
    pub fn of_classes_from(&self, from: usize) -> Duration {
        let t = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        t.iter().skip(from).sum()
    }
}

fn work_of(class: Class) -> Work {
    match class {
        Class::WinningPoSt => Work::Winning,
        Class::WindowPoSt(k) => Work::Window(k),
    }
}

/// Runs `day` (its PoRep load) with `arrivals` through `p`: each proof on a thread of its
/// own, started when the schedule says; returns every finished proof and the wall time until
/// the last one ended, and tells `each` of every proof as it ends. After a PoRep fails, none
/// is started again (a failing load would spin).
pub(super) fn drive(
    p: &DayProver,
    day: &Day,
    arrivals: &[Arrival],
    each: &dyn Fn(&Done),
) -> (Vec<Done>, Duration) {
    let start = Instant::now();
    let (tx, rx) = mpsc::channel::<Done>();
    let mut done = Vec::new();
    std::thread::scope(|scope| {
        let spawn = |work: Work, arrived: Duration| {
            let tx = tx.clone();
            scope.spawn(move || {
                let (timings, error) = match p.prove(work) {
                    Ok(t) => (t, None),
                    Err(e) => (StageTimings::default(), Some(e.to_string())),
                };
                let ended = start.elapsed();
                // The receiver outlives every sender of the scope.
                let _ = tx.send(Done {
                    work,
                    arrived,
                    ended,
                    synthesis: timings.synthesis,
                    device: timings.proving,
                    error,
                });
            });
        };
        let (mut issued, mut porep, mut running, mut porep_failed) = (0, 0, 0, false);
        loop {
            let now = start.elapsed();
            let top_up = if porep_failed {
                0
            } else {
                day.porep_to_start(porep, now)
            };
            for _ in 0..top_up {
                spawn(Work::PoRep, now);
                (porep, running) = (porep + 1, running + 1);
            }
            let due = Day::due(arrivals, issued, now);
            for a in &arrivals[due.clone()] {
                spawn(work_of(a.class), a.at);
                running += 1;
            }
            issued = due.end;
            if running == 0 && now >= day.duration() {
                break;
            }
            if let Ok(d) = rx.recv_timeout(day.next_wake(arrivals, issued, now)) {
                if d.work == Work::PoRep {
                    porep -= 1;
                    porep_failed |= d.error.is_some();
                }
                running -= 1;
                each(&d);
                done.push(d);
            }
        }
    });
    (done, start.elapsed())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_of_identical_slots_extrapolate_exactly() {
        let size = 2048;
        let of = |n| {
            let s = post::synthesize(ProofKind::WinningPoSt, size, n, 3).unwrap();
            Sections::of(&s)
        };
        let whole = of(None);
        let slots = post::shape(ProofKind::WinningPoSt, size).unwrap().sectors;
        assert_eq!(slots, 66);
        assert_eq!(extrapolate(&of(Some(1)), &of(Some(2)), slots), whole);
        assert!(whole.bytes() > 96 * whole.constraints as u64);
        // The 32 GiB WindowPoSt partition's slots, as the day sizes its 2,349.
        let window = |n| {
            let s = post::synthesize(ProofKind::WindowPoSt, 32 << 30, Some(n), 3).unwrap();
            Sections::of(&s)
        };
        assert_eq!(extrapolate(&window(1), &window(2), 3), window(3));
    }
}
