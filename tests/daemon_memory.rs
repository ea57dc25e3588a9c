//! `proving.memory_budget` is a cap on the real cuzkd: real 2 KiB PoRep proofs (parameters
//! from `$CUZK_TEST_PARAMS`, a freshly sealed sector) with a budget just above what one job
//! holds: room for one partition's reservation beside another's measured size, not for two
//! reservations. A second job's partition waits while the first's is synthesized, and the
//! daemon's VmHWM (its `/proc/<pid>/status`) stays under the budget from the parameters'
//! load to the last proof. Every proof is checked with filecoin-proofs' verifier.
//!
//! Each proof takes about half a minute on two CPU cores.

mod daemon_support;

use cuzk::proto::{Client, ParamSpec, ProofKind};
use daemon_support::*;

/// The value of the metric line that starts with `name ` (labels included in `name`).
fn metric(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in\n{text}"))
}

const POREP_2K: ParamSpec = ParamSpec {
    kind: ProofKind::PoRep,
    sector_size: 2048,
};

fn cpu_daemon(extra: &[(&str, &str)]) -> Daemon {
    let mut keys = vec![
        ("proving.backend", "\"cpu\""),
        ("debug.check_input", "true"),
    ];
    keys.extend_from_slice(extra);
    Daemon::start(&keys)
}

#[test]
fn a_budget_just_above_one_job_makes_the_second_wait_and_caps_the_process() {
    let dir = params();
    // What one job holds as the budget counts it, under the default budget: everything
    // held besides partitions once the first proof recorded the set's shape (parameters,
    // shape, the CPU worker's working memory, the process's own), and the partition a job
    // reserves from then on (the largest measured).
    let calibration = cpu_daemon(&[("proving.partition_threads", "2")]);
    let sector = sealed(calibration.env.dir.path(), 1);
    let mut c = calibration.client();
    c.preload(POREP_2K).expect("preload");
    let proof = c.prove(porep(&sector)).expect("a proof");
    assert!(sector.verify_porep(&proof.proof, &dir).unwrap());
    let m = c.metrics().unwrap();
    let held = metric(&m, "cuzk_memory_params_bytes");
    let measured = metric(&m, "cuzk_partition_host_bytes_sum");
    // Its reservation: in two parts, one part's copy beside the stitched vector.
    let partition = measured + measured / 2;
    assert_eq!(metric(&m, "cuzk_partition_host_bytes_count"), 1, "{m}");
    assert!(
        metric(&m, "cuzk_memory_held_bytes{part=\"shapes\"}") > 0,
        "{m}"
    );
    let calibration_peak = vm(calibration.child.id(), "VmHWM:");
    stop(calibration);

    // Room for one partition beside another's measured size, not for two reservations
    // (less a little: what the process holds of its own varies between two daemons).
    let budget = held + 2 * partition - partition / 4;
    let trace_dir = tempfile::tempdir().unwrap();
    let trace = trace_dir.path().join("stages.json");
    let daemon = cpu_daemon(&[
        ("proving.memory_budget", &budget.to_string()),
        ("proving.workers", "3"),
        ("proving.partition_threads", "2"),
        (
            "debug.trace_file",
            &format!("{:?}", trace.display().to_string()),
        ),
    ]);
    let pid = daemon.child.id();
    let mut c = daemon.client();
    c.preload(POREP_2K).expect("preload");
    // The first job records the shape; then three at once.
    let first = c.prove(porep(&sector)).expect("a proof");
    assert!(sector.verify_porep(&first.proof, &dir).unwrap());
    let jobs: Vec<_> = (0..3)
        .map(|i| {
            let (socket, submit) = (daemon.env.socket.clone(), porep(&sector));
            std::thread::spawn(move || {
                let mut c = Client::connect(&socket, &format!("client-{i}")).unwrap();
                c.prove(submit).expect("a proof")
            })
        })
        .collect();
    for j in jobs {
        let r = j.join().unwrap();
        assert!(sector.verify_porep(&r.proof, &dir).unwrap());
    }
    let m = c.metrics().unwrap();
    let peak = vm(pid, "VmHWM:");
    eprintln!(
        "budget {budget}: held {held}, partition {partition}; VmHWM {peak} (one job under the \
         default budget: {calibration_peak})"
    );
    // The budget had no room for two partitions' reservations: the waits below are its
    // doing.
    let held_now = metric(&m, "cuzk_memory_params_bytes");
    assert!(held_now + 2 * partition > budget, "{m}");
    assert_eq!(metric(&m, "cuzk_partitions_proved_total"), 4, "{m}");
    // No partition was admitted while another was being synthesized (a synthesized one's
    // reservation falls to its measured size, a witness partition's 32 B per variable, which
    // leaves room for the next), and never more than two were held at once.
    let text = std::fs::read_to_string(&trace).unwrap();
    let closed = format!("{}]", text.trim_end().trim_end_matches(','));
    let events: Vec<serde_json::Value> = serde_json::from_str(&closed).expect("a trace array");
    let end = |e: &serde_json::Value| e["ts"].as_u64().unwrap() + e["dur"].as_u64().unwrap();
    let mut held_spans: Vec<(u64, u64, u64)> = events
        .iter()
        .filter(|e| e["name"] == "admission")
        .map(|a| {
            let device = events
                .iter()
                .find(|e| e["name"] == "device" && e["pid"] == a["pid"] && e["tid"] == a["tid"])
                .expect("every admitted partition reached the device");
            let synthesis = events
                .iter()
                .find(|e| e["name"] == "synthesis" && e["pid"] == a["pid"] && e["tid"] == a["tid"])
                .expect("every admitted partition was synthesized");
            (end(a), end(synthesis), end(device))
        })
        .collect();
    held_spans.sort();
    assert_eq!(held_spans.len(), 4, "{text}");
    for w in held_spans.windows(2) {
        assert!(
            w[0].1 <= w[1].0,
            "admitted while another was synthesized: {held_spans:?}"
        );
    }
    for w in held_spans.windows(3) {
        assert!(
            w[0].2 <= w[2].0,
            "three partitions held at once: {held_spans:?}"
        );
    }
    // And the process itself stayed under the budget, the parameters' load included.
    assert!(
        peak <= budget,
        "VmHWM {peak} passed the budget {budget} (held {held_now}, partition {partition})"
    );
    stop(daemon);
}
