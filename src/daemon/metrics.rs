//! Prometheus text exposition (format 0.0.4) of the daemon's counters.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use super::Context;
use crate::engine::EngineStats;
use crate::pipeline::{DeviceHealth, PipelineStats};
use crate::proofs::ProofKind;

/// Writes a metric family's HELP and TYPE lines.
fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// Writes an unlabelled metric with its HELP and TYPE lines.
fn single(out: &mut String, name: &str, kind: &str, help: &str, value: impl std::fmt::Display) {
    family(out, name, kind, help);
    let _ = writeln!(out, "{name} {value}");
}

/// Renders every metric.
pub fn render(ctx: &Context) -> String {
    let stats = ctx.engine.stats();
    let mut out = String::new();
    daemon(&mut out, ctx, &stats);
    pipeline(&mut out, &ctx.service.pipeline());
    if let Some((resident, peak)) = super::host::resident_and_peak() {
        family(
            &mut out,
            "cuzk_process_memory_bytes",
            "gauge",
            "The daemon's resident memory now (VmRSS) and the most it ever was (VmHWM).",
        );
        let _ = writeln!(
            out,
            "cuzk_process_memory_bytes{{kind=\"resident\"}} {resident}"
        );
        let _ = writeln!(out, "cuzk_process_memory_bytes{{kind=\"peak\"}} {peak}");
    }
    health(&mut out, &ctx.service.health());
    if let Some(p) = ctx.service.pinned() {
        pinned(&mut out, &p);
    }
    if let Some(j) = &ctx.journal {
        journal(&mut out, &j.metrics());
    }
    connections(&mut out, ctx, &stats);
    jobs(&mut out, &stats);
    params(&mut out, ctx);
    let devices = ctx.service.device_memory();
    device_memory(&mut out, &devices);
    device_pauses(&mut out, &devices);
    out
}

/// The daemon itself: version and backend, uptime, jobs queued and running, workers.
fn daemon(out: &mut String, ctx: &Context, stats: &EngineStats) {
    family(
        out,
        "cuzk_info",
        "gauge",
        "Daemon version and proving backend.",
    );
    let _ = writeln!(
        out,
        "cuzk_info{{version=\"{}\",backend=\"{}\"}} 1",
        env!("CARGO_PKG_VERSION"),
        escape(&ctx.backend)
    );
    let uptime = format!("{:.3}", ctx.started.elapsed().as_secs_f64());
    single(
        out,
        "cuzk_uptime_seconds",
        "gauge",
        "Seconds since the daemon started.",
        uptime,
    );
    single(
        out,
        "cuzk_jobs_queued",
        "gauge",
        "Jobs waiting for a worker.",
        stats.queued,
    );
    single(
        out,
        "cuzk_jobs_running",
        "gauge",
        "Jobs being proved.",
        stats.running,
    );
    single(
        out,
        "cuzk_workers",
        "gauge",
        "Jobs in flight at once (besides the critical worker).",
        ctx.workers,
    );
}

/// Refusals and connections.
fn connections(out: &mut String, ctx: &Context, stats: &EngineStats) {
    single(
        out,
        "cuzk_queue_full_total",
        "counter",
        "Submissions refused because the queue was full.",
        stats.rejected_queue_full,
    );
    single(
        out,
        "cuzk_connections",
        "gauge",
        "Open client connections.",
        ctx.connections.load(Ordering::Relaxed),
    );
    single(
        out,
        "cuzk_connections_total",
        "counter",
        "Client connections accepted since start.",
        ctx.connections_total.load(Ordering::Relaxed),
    );
    single(
        out,
        "cuzk_connections_refused_total",
        "counter",
        "Connections refused (too many in all or for the peer's uid, or peer not allowed).",
        ctx.connections_refused.load(Ordering::Relaxed),
    );
}

/// Finished jobs by kind and outcome, and the time their stages took.
fn jobs(out: &mut String, stats: &EngineStats) {
    family(
        out,
        "cuzk_jobs_finished_total",
        "counter",
        "Finished jobs by proof kind and outcome.",
    );
    for ((kind, state), n) in &stats.finished {
        let _ = writeln!(
            out,
            "cuzk_jobs_finished_total{{kind=\"{kind}\",outcome=\"{}\"}} {n}",
            state.as_str()
        );
    }
    if !stats.deadlines.is_empty() {
        family(
            out,
            "cuzk_jobs_deadlines_total",
            "counter",
            "Jobs submitted with a deadline (SubmitWithin) that ended, by proof kind and \
             whether they succeeded by it (met) or not (missed: late or failed).",
        );
        for ((kind, met), n) in &stats.deadlines {
            let outcome = if *met { "met" } else { "missed" };
            let _ = writeln!(
                out,
                "cuzk_jobs_deadlines_total{{kind=\"{kind}\",outcome=\"{outcome}\"}} {n}"
            );
        }
    }
    family(
        out,
        "cuzk_jobs_deadline_at_risk",
        "gauge",
        "Queued and running jobs with a deadline that the proving times measured so far \
         (the kind's mean; a running job's own pace once a partition is done) take past it, \
         by proof kind.",
    );
    for kind in ProofKind::ALL {
        let n = stats.at_risk.get(&kind).copied().unwrap_or(0);
        let _ = writeln!(out, "cuzk_jobs_deadline_at_risk{{kind=\"{kind}\"}} {n}");
    }
    family(
        out,
        "cuzk_job_stage_seconds_total",
        "counter",
        "Time spent per stage by succeeded jobs.",
    );
    for (kind, t) in &stats.stage_sums {
        for (stage, d) in [
            ("queue_wait", t.queue_wait),
            ("param_load", t.param_load),
            ("synthesis", t.synthesis),
            ("proving", t.proving),
            ("verification", t.verification),
            ("total", t.total),
        ] {
            let _ = writeln!(
                out,
                "cuzk_job_stage_seconds_total{{kind=\"{kind}\",stage=\"{stage}\"}} {:.6}",
                d.as_secs_f64()
            );
        }
    }
}

/// The resident parameter sets, on the host and on the GPU.
fn params(out: &mut String, ctx: &Context) {
    family(
        out,
        "cuzk_params_resident_bytes",
        "gauge",
        "Parameter sets resident in memory.",
    );
    let resident = ctx.service.resident();
    for p in &resident {
        let _ = writeln!(
            out,
            "cuzk_params_resident_bytes{{kind=\"{}\",sector_size=\"{}\"}} {}",
            p.params.id.kind, p.params.id.sector_size, p.params.resident_bytes
        );
    }
    family(
        out,
        "cuzk_params_device_bytes",
        "gauge",
        "Points of the resident parameter sets held on the GPU.",
    );
    for p in &resident {
        let _ = writeln!(
            out,
            "cuzk_params_device_bytes{{kind=\"{}\",sector_size=\"{}\"}} {}",
            p.params.id.kind,
            p.params.id.sector_size,
            p.device_bytes()
        );
    }
}

/// A device memory gauge: its name, help, and how to read it.
type Gauge = (
    &'static str,
    &'static str,
    fn(&crate::prover::DeviceMemory) -> u64,
);

/// Each GPU's memory and the plan each resident set follows on it (`device` is its index,
/// as in Status; CPU devices have neither).
fn device_memory(out: &mut String, devices: &[crate::pipeline::DeviceMemoryReport]) {
    let gpus = || {
        devices
            .iter()
            .enumerate()
            .filter_map(|(i, d)| Some((i, d.memory?)))
    };
    let gauges: [Gauge; 3] = [
        (
            "cuzk_device_memory_budget_bytes",
            "What each GPU may hold at most (what was free when it was opened less a margin, \
             or gpu.memory_limit where that is less).",
            |m| m.budget,
        ),
        (
            "cuzk_device_memory_used_bytes",
            "Device memory each GPU's backend holds now.",
            |m| m.used,
        ),
        (
            "cuzk_device_memory_peak_bytes",
            "The most device memory each GPU's backend held at once since the daemon started.",
            |m| m.peak,
        ),
    ];
    // Families without samples are left out: a CPU-only daemon has none of these.
    if gpus().next().is_none() {
        return;
    }
    for (name, help, value) in gauges {
        family(out, name, "gauge", help);
        for (i, m) in gpus() {
            let _ = writeln!(out, "{name}{{device=\"{i}\"}} {}", value(&m));
        }
    }
    if devices.iter().all(|d| d.plans.is_empty()) {
        return;
    }
    family(
        out,
        "cuzk_device_plan_info",
        "gauge",
        "The memory plan a resident parameter set's proofs follow on each GPU, in the plan \
         label (always 1).",
    );
    for (i, d) in devices.iter().enumerate() {
        for p in &d.plans {
            let plan = escape(&p.plan);
            let _ = writeln!(
                out,
                "cuzk_device_plan_info{{device=\"{i}\",kind=\"{}\",sector_size=\"{}\",plan=\"{plan}\"}} 1",
                p.id.kind, p.id.sector_size
            );
        }
    }
    family(
        out,
        "cuzk_device_pinned_host_bytes",
        "gauge",
        "Page-locked host memory each GPU holds for a resident parameter set beside its \
         points (parked quotient vectors, the staged assignment); counted against \
         proving.memory_budget.",
    );
    for (i, d) in devices.iter().enumerate() {
        for p in &d.plans {
            let _ = writeln!(
                out,
                "cuzk_device_pinned_host_bytes{{device=\"{i}\",kind=\"{}\",sector_size=\"{}\"}} {}",
                p.id.kind, p.id.sector_size, p.host_bytes
            );
        }
    }
}

/// How often calls on each GPU let it go part way to an urgent proof, by where (CPU devices
/// have none).
fn device_pauses(out: &mut String, devices: &[crate::pipeline::DeviceMemoryReport]) {
    if devices.iter().all(|d| d.pauses.is_none()) {
        return;
    }
    family(
        out,
        "cuzk_device_pauses_total",
        "counter",
        "Times a proof on each GPU let it go part way to an urgent one (WinningPoSt), by \
         where: after a quotient transform, before the H MSM, between pieces of an MSM's \
         bucket sums, before an aux MSM.",
    );
    for (i, d) in devices.iter().enumerate() {
        for (at, n) in d.pauses.iter().flat_map(|p| p.labelled()) {
            let _ = writeln!(
                out,
                "cuzk_device_pauses_total{{device=\"{i}\",at=\"{at}\"}} {n}"
            );
        }
    }
    family(
        out,
        "cuzk_device_pauses_ahead_total",
        "counter",
        "Of cuzk_device_pauses_total, the times a GPU was let go for an urgent proof whose \
         synthesis was about to end, so that it found the device free on arrival.",
    );
    for (i, d) in devices.iter().enumerate() {
        if let Some(p) = d.pauses {
            let _ = writeln!(
                out,
                "cuzk_device_pauses_ahead_total{{device=\"{i}\"}} {}",
                p.ahead
            );
        }
    }
}

/// The stages: partitions per stage, the memory budget, device busy time, stage sums.
fn pipeline(out: &mut String, p: &PipelineStats) {
    family(
        out,
        "cuzk_partitions",
        "gauge",
        "Partitions in each stage now, from all jobs.",
    );
    for (stage, n) in [
        ("waiting", p.waiting),
        ("synthesizing", p.synthesizing),
        ("device_queued", p.device_queued),
        ("device_running", p.device_running),
    ] {
        let _ = writeln!(out, "cuzk_partitions{{stage=\"{stage}\"}} {n}");
    }
    memory(out, p);
    single(
        out,
        "cuzk_device_busy_seconds_total",
        "counter",
        "Time the proving device had at least one partition.",
        format!("{:.6}", p.device_busy.as_secs_f64()),
    );
    devices(out, p);
    single(
        out,
        "cuzk_partitions_proved_total",
        "counter",
        "Partitions proved since start.",
        p.partitions_proved,
    );
    single(
        out,
        "cuzk_partitions_fallback_total",
        "counter",
        "Partitions proved on the CPU prover because no usable device was left for them \
         (every device quarantined, or each failed them).",
        p.fallback_proved,
    );
    family(
        out,
        "cuzk_partition_stage_seconds_total",
        "counter",
        "Time spent per stage by proved partitions, summed.",
    );
    for (stage, d) in [
        ("synthesis", p.synthesis_time),
        ("device_wait", p.device_wait),
        ("device", p.device_time),
    ] {
        let _ = writeln!(
            out,
            "cuzk_partition_stage_seconds_total{{stage=\"{stage}\"}} {:.6}",
            d.as_secs_f64()
        );
    }
    family(
        out,
        "cuzk_partition_host_bytes",
        "summary",
        "Host bytes of synthesized partitions, measured.",
    );
    let _ = writeln!(out, "cuzk_partition_host_bytes_sum {}", p.measured.0);
    let _ = writeln!(out, "cuzk_partition_host_bytes_count {}", p.measured.1);
}

/// The memory budget and what is counted against it, by part.
fn memory(out: &mut String, p: &PipelineStats) {
    let budget = if p.budget_bytes == u64::MAX {
        "+Inf".to_string()
    } else {
        p.budget_bytes.to_string()
    };
    single(
        out,
        "cuzk_memory_budget_bytes",
        "gauge",
        "proving.memory_budget: host memory for resident parameters and partitions in flight.",
        budget,
    );
    single(
        out,
        "cuzk_memory_reserved_bytes",
        "gauge",
        "Host memory reserved by partitions in flight.",
        p.reserved_bytes,
    );
    single(
        out,
        "cuzk_memory_params_bytes",
        "gauge",
        "Host memory held besides partitions (the parts of cuzk_memory_held_bytes), counted \
         against the budget.",
        p.params_bytes,
    );
    family(
        out,
        "cuzk_memory_held_bytes",
        "gauge",
        "Host memory held besides partitions, by part: parameters' host copies, the devices' \
         page-locked blocks, the page-locked pool's limit, recorded shapes, the CPU workers' \
         working memory, parameter loads in progress (their upper bound), the process's own \
         memory at start.",
    );
    for (part, n) in p.held.parts() {
        let _ = writeln!(out, "cuzk_memory_held_bytes{{part=\"{part}\"}} {n}");
    }
}

/// Each device's name, busy time and partitions (`device` is its index, as in Status).
fn devices(out: &mut String, p: &PipelineStats) {
    family(
        out,
        "cuzk_device_info",
        "gauge",
        "A proving device: its backend's name (always 1).",
    );
    for (i, d) in p.devices.iter().enumerate() {
        let name = escape(&d.name);
        let _ = writeln!(out, "cuzk_device_info{{device=\"{i}\",name=\"{name}\"}} 1");
    }
    family(
        out,
        "cuzk_device_work_seconds_total",
        "counter",
        "Time each proving device had at least one partition.",
    );
    for (i, d) in p.devices.iter().enumerate() {
        let secs = d.busy.as_secs_f64();
        let _ = writeln!(
            out,
            "cuzk_device_work_seconds_total{{device=\"{i}\"}} {secs:.6}"
        );
    }
    family(
        out,
        "cuzk_device_partitions_total",
        "counter",
        "Partitions each proving device proved.",
    );
    for (i, d) in p.devices.iter().enumerate() {
        let n = d.partitions_proved;
        let _ = writeln!(out, "cuzk_device_partitions_total{{device=\"{i}\"}} {n}");
    }
}

/// Each device's failures and quarantine (`device` is its index, as in Status).
fn health(out: &mut String, health: &[DeviceHealth]) {
    family(
        out,
        "cuzk_device_failures_total",
        "counter",
        "Partitions each proving device failed (device errors, out of memory, wrong results \
         caught by verification); each was proved again elsewhere or failed its job.",
    );
    for (i, d) in health.iter().enumerate() {
        let _ = writeln!(
            out,
            "cuzk_device_failures_total{{device=\"{i}\"}} {}",
            d.failures
        );
    }
    family(
        out,
        "cuzk_device_quarantined",
        "gauge",
        "Whether each proving device is quarantined (1: it takes no partitions but a probe; \
         proving.quarantine_after, proving.quarantine_time).",
    );
    for (i, d) in health.iter().enumerate() {
        let q = u8::from(d.is_quarantined());
        let _ = writeln!(out, "cuzk_device_quarantined{{device=\"{i}\"}} {q}");
    }
}

/// The page-locked pool partitions are copied into for the GPUs.
fn pinned(out: &mut String, p: &crate::prover::PinnedStats) {
    family(
        out,
        "cuzk_pinned_bytes",
        "gauge",
        "Page-locked memory for partitions: proving.pinned_memory (limit), the blocks made \
         (held) and those holding a partition now (lent).",
    );
    for (state, n) in [("limit", p.limit), ("held", p.held), ("lent", p.lent)] {
        let _ = writeln!(out, "cuzk_pinned_bytes{{state=\"{state}\"}} {n}");
    }
    single(
        out,
        "cuzk_pinned_leases_total",
        "counter",
        "Partition vectors copied into page-locked memory.",
        p.leases,
    );
    single(
        out,
        "cuzk_pinned_misses_total",
        "counter",
        "Partition vectors left in pageable memory (no room in the pool).",
        p.misses,
    );
}

/// The job journal: its syncs, failures, sizes and what the start took up.
fn journal(out: &mut String, m: &super::journal::Metrics) {
    family(
        out,
        "cuzk_journal_sync_seconds",
        "histogram",
        "Writes of the job journal's buffered records with their fdatasync (before a \
         submission or a cancellation is answered, after a job finishes).",
    );
    let bounds = super::journal::SYNC_BUCKETS.iter().map(|b| b.to_string());
    for (le, n) in bounds.chain(["+Inf".to_string()]).zip(m.sync_cumulative) {
        let _ = writeln!(out, "cuzk_journal_sync_seconds_bucket{{le=\"{le}\"}} {n}");
    }
    let _ = writeln!(out, "cuzk_journal_sync_seconds_sum {:.6}", m.sync_seconds);
    let count = m.sync_cumulative.last().copied().unwrap_or(0);
    let _ = writeln!(out, "cuzk_journal_sync_seconds_count {count}");
    family(
        out,
        "cuzk_journal_write_failures_total",
        "counter",
        "Failed writes to the job journal (jobs run on, but may not survive a restart): of \
         the log, of a job's input, of a compaction.",
    );
    for (what, n) in [
        ("log", m.failed_log),
        ("input", m.failed_input),
        ("compaction", m.failed_compaction),
    ] {
        let _ = writeln!(
            out,
            "cuzk_journal_write_failures_total{{operation=\"{what}\"}} {n}"
        );
    }
    single(
        out,
        "cuzk_journal_compactions_total",
        "counter",
        "Rewrites of the job journal's log (at start, and as it grows).",
        m.compactions,
    );
    single(
        out,
        "cuzk_journal_inputs_refused_total",
        "counter",
        "Jobs queued without their input stored because the journal was full \
         (queue.journal_max_size): reported failed if the daemon restarts before they finish.",
        m.refused_inputs,
    );
    single(
        out,
        "cuzk_journal_log_bytes",
        "gauge",
        "Size of the job journal's log, records not yet written included.",
        m.log_bytes,
    );
    single(
        out,
        "cuzk_journal_input_bytes",
        "gauge",
        "Size of the inputs the job journal stores for unfinished jobs.",
        m.input_bytes,
    );
    single(
        out,
        "cuzk_journal_max_bytes",
        "gauge",
        "queue.journal_max_size: the log and the inputs together stay under it.",
        m.max_bytes,
    );
    family(
        out,
        "cuzk_journal_replayed_jobs",
        "gauge",
        "Jobs the journal gave back at start: queued again, finished (their results kept), \
         and lost (reported failed: their input could not be read back).",
    );
    for (state, n) in [
        ("queued", m.requeued),
        ("finished", m.results.saturating_sub(m.lost)),
        ("lost", m.lost),
    ] {
        let _ = writeln!(out, "cuzk_journal_replayed_jobs{{state=\"{state}\"}} {n}");
    }
}

/// Escapes a label value.
fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::{DeviceMemoryReport, SetPlan};

    fn gpu(plan: &str) -> DeviceMemoryReport {
        DeviceMemoryReport {
            name: "cuda:0".into(),
            memory: Some(crate::prover::DeviceMemory {
                budget: 16 << 30,
                used: 1 << 30,
                peak: 3 << 30,
            }),
            pauses: Some(crate::prover::DevicePauses {
                msm_piece: 7,
                ahead: 2,
                ..Default::default()
            }),
            plans: vec![SetPlan {
                id: crate::srs::ParamsId {
                    kind: crate::srs::ProofKind::PoRep,
                    sector_size: 2048,
                    cache_id: "v28-test".into(),
                },
                plan: plan.into(),
                device_bytes: 300_000,
                host_bytes: 4096,
            }],
        }
    }

    fn cpu() -> DeviceMemoryReport {
        DeviceMemoryReport {
            name: "cpu".into(),
            memory: None,
            pauses: None,
            plans: vec![],
        }
    }

    #[test]
    fn a_gpus_memory_and_plan_are_gauges_and_a_cpu_has_none() {
        let mut out = String::new();
        device_memory(
            &mut out,
            &[cpu(), gpu("quotient parked, \"shape\" streamed\n")],
        );
        for line in [
            "cuzk_device_memory_budget_bytes{device=\"1\"} 17179869184",
            "cuzk_device_memory_used_bytes{device=\"1\"} 1073741824",
            "cuzk_device_memory_peak_bytes{device=\"1\"} 3221225472",
            // Quotes and a newline escaped as label values want them.
            "cuzk_device_plan_info{device=\"1\",kind=\"porep\",sector_size=\"2048\",\
             plan=\"quotient parked, \\\"shape\\\" streamed\\n\"} 1",
            "cuzk_device_pinned_host_bytes{device=\"1\",kind=\"porep\",sector_size=\"2048\"} 4096",
        ] {
            assert!(
                out.lines().any(|l| l == line),
                "{line:?} missing from\n{out}"
            );
        }
        assert!(
            !out.contains("device=\"0\""),
            "the CPU device has no memory gauges: {out}"
        );
    }

    #[test]
    fn a_cpu_only_daemon_writes_no_device_memory_families() {
        let mut out = String::new();
        device_memory(&mut out, &[cpu(), cpu()]);
        device_pauses(&mut out, &[cpu(), cpu()]);
        assert_eq!(out, "");
    }

    #[test]
    fn jobs_at_risk_are_a_gauge_per_kind_zero_where_none() {
        let mut stats = EngineStats::default();
        stats.at_risk.insert(ProofKind::WindowPoSt, 2);
        let mut out = String::new();
        jobs(&mut out, &stats);
        for line in [
            "# TYPE cuzk_jobs_deadline_at_risk gauge",
            "cuzk_jobs_deadline_at_risk{kind=\"window-post\"} 2",
            "cuzk_jobs_deadline_at_risk{kind=\"winning-post\"} 0",
            "cuzk_jobs_deadline_at_risk{kind=\"porep\"} 0",
        ] {
            assert!(out.lines().any(|l| l == line), "{line} in {out}");
        }
    }

    #[test]
    fn deadlines_are_counted_met_or_missed_by_kind_and_absent_without_any() {
        let mut stats = EngineStats::default();
        let mut out = String::new();
        jobs(&mut out, &stats);
        assert!(!out.contains("cuzk_jobs_deadlines_total"), "{out}");
        stats
            .deadlines
            .insert((crate::proofs::ProofKind::WindowPoSt, true), 3);
        stats
            .deadlines
            .insert((crate::proofs::ProofKind::WindowPoSt, false), 1);
        let mut out = String::new();
        jobs(&mut out, &stats);
        for line in [
            "# TYPE cuzk_jobs_deadlines_total counter",
            "cuzk_jobs_deadlines_total{kind=\"window-post\",outcome=\"met\"} 3",
            "cuzk_jobs_deadlines_total{kind=\"window-post\",outcome=\"missed\"} 1",
        ] {
            assert!(
                out.lines().any(|l| l == line),
                "{line:?} missing from\n{out}"
            );
        }
    }

    #[test]
    fn a_gpus_pauses_are_counters_by_where_and_a_cpu_has_none() {
        let mut out = String::new();
        device_pauses(&mut out, &[cpu(), gpu("all resident")]);
        assert!(
            out.contains("# TYPE cuzk_device_pauses_total counter"),
            "{out}"
        );
        for (at, n) in [
            ("assignment", 0),
            ("quotient", 0),
            ("before_h", 0),
            ("msm_piece", 7),
            ("aux_msm", 0),
        ] {
            let line = format!("cuzk_device_pauses_total{{device=\"1\",at=\"{at}\"}} {n}");
            assert!(
                out.lines().any(|l| l == line),
                "{line:?} missing from\n{out}"
            );
        }
        assert!(
            out.lines()
                .any(|l| l == "cuzk_device_pauses_ahead_total{device=\"1\"} 2"),
            "{out}"
        );
        assert!(
            !out.contains("device=\"0\""),
            "the CPU takes no turns: {out}"
        );
    }
}
