//! `metrics.textfile`: a real cuzkd writes its metrics for node_exporter's textfile
//! collector, replaces the file atomically, writes it once more at shutdown, and survives a
//! directory it cannot write. The text is checked by a small parser of the exposition format
//! here and, where `promtool` is on PATH, by Prometheus's own (`promtool check metrics`);
//! scripts/check-prometheus.sh makes sure of promtool in CI.

mod daemon_support;

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use daemon_support::*;
use nix::sys::signal::Signal;

/// Checks `text` against the exposition format 0.0.4 as cuzkd writes it: every line is a
/// `# HELP name text`, a `# TYPE name kind` or a sample `name{label="value",…} value`; every
/// sample belongs to a family (its name, or for a summary or histogram the name less
/// `_sum`, `_count` or `_bucket`) whose HELP and TYPE came before it; each family is declared
/// once and its samples are contiguous; the text ends with a newline. Returns the samples,
/// `name{labels}` → value.
fn check_exposition(text: &str) -> Result<BTreeMap<String, f64>, String> {
    if !text.ends_with('\n') {
        return Err("does not end with a newline (a partial file?)".into());
    }
    let mut help: BTreeMap<&str, &str> = BTreeMap::new();
    let mut kinds: BTreeMap<&str, &str> = BTreeMap::new();
    let mut closed: Vec<&str> = Vec::new();
    let mut current: Option<&str> = None;
    let mut samples = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let at = |what: &str| format!("line {}: {what}: {line:?}", i + 1);
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, doc) = rest
                .split_once(' ')
                .ok_or_else(|| at("HELP without text"))?;
            if !is_name(name) || doc.trim().is_empty() || help.insert(name, doc).is_some() {
                return Err(at("bad or repeated HELP"));
            }
            if let Some(prev) = current.replace(name) {
                closed.push(prev);
            }
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest
                .split_once(' ')
                .ok_or_else(|| at("TYPE without kind"))?;
            let known = ["counter", "gauge", "summary", "histogram", "untyped"];
            if current != Some(name) || !known.contains(&kind) || kinds.insert(name, kind).is_some()
            {
                return Err(at("TYPE not right after its HELP, unknown or repeated"));
            }
            continue;
        }
        if line.starts_with('#') || line.trim().is_empty() {
            return Err(at("a comment or blank line cuzkd does not write"));
        }
        let (series, value) = line.rsplit_once(' ').ok_or_else(|| at("no value"))?;
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v.parse().map_err(|_| at("value is not a number"))?,
        };
        let name = match series.split_once('{') {
            Some((name, labels)) => {
                let labels = labels
                    .strip_suffix('}')
                    .ok_or_else(|| at("unclosed labels"))?;
                check_labels(labels).map_err(|e| at(&e))?;
                name
            }
            None => series,
        };
        if !is_name(name) {
            return Err(at("bad metric name"));
        }
        let family = ["_sum", "_count", "_bucket"]
            .iter()
            .find_map(|s| name.strip_suffix(s))
            .filter(|f| matches!(kinds.get(f), Some(&"summary" | &"histogram")))
            .unwrap_or(name);
        if current != Some(family) || !kinds.contains_key(family) || closed.contains(&family) {
            return Err(at("sample outside its family's HELP and TYPE"));
        }
        if samples.insert(series.to_string(), value).is_some() {
            return Err(at("repeated series"));
        }
    }
    if let Some(missing) = help.keys().find(|n| !kinds.contains_key(*n)) {
        return Err(format!("{missing} has HELP but no TYPE"));
    }
    Ok(samples)
}

fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// `k="v",k2="v2"` with escaped values (`\\`, `\"`, `\n`).
fn check_labels(mut s: &str) -> Result<(), String> {
    while !s.is_empty() {
        let (key, rest) = s.split_once("=\"").ok_or("label without =\"")?;
        if !is_name(key) || key.contains(':') {
            return Err(format!("bad label name {key:?}"));
        }
        let mut chars = rest.char_indices();
        let end = loop {
            match chars.next() {
                Some((_, '\\')) => match chars.next() {
                    Some((_, '\\' | '"' | 'n')) => {}
                    _ => return Err("bad escape in a label value".into()),
                },
                Some((i, '"')) => break i,
                Some(_) => {}
                None => return Err("unterminated label value".into()),
            }
        };
        s = &rest[end + 1..];
        if let Some(next) = s.strip_prefix(',') {
            s = next;
        } else if !s.is_empty() {
            return Err("labels not separated by commas".into());
        }
    }
    Ok(())
}

/// Runs `promtool check metrics` on `text` where promtool is on PATH: it must accept it with
/// no lint problem. Says so on stderr where it is not.
fn promtool_check(text: &str) {
    let child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let Ok(mut child) = child else {
        eprintln!(
            "promtool is not on PATH: the text was checked by this test's parser only \
             (scripts/check-prometheus.sh runs promtool in CI)"
        );
        return;
    };
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && said.trim().is_empty(),
        "promtool check metrics ({}): {said}\non:\n{text}",
        out.status
    );
}

fn quoted(path: &Path) -> String {
    format!("{:?}", path.display().to_string())
}

/// The file's text once it exists and holds `needle`.
fn wait_for(path: &Path, needle: &str, daemon: &Daemon) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            if text.contains(needle) {
                return text;
            }
        }
        assert!(
            Instant::now() < deadline,
            "{} never held {needle:?}; stderr:\n{}",
            path.display(),
            daemon.env.stderr()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_textfile_is_valid_exposition_text_replaced_atomically() {
    let env = Env::new();
    let dir = env.dir.path().join("textfile");
    std::fs::create_dir(&dir).unwrap();
    let path = dir.join("cuzk.prom");
    // With a job journal, so that its families are checked too.
    let journal = env.dir.path().join("journal");
    let config = env
        .config()
        .set("metrics.textfile", &quoted(&path))
        .set("metrics.textfile_interval", "\"1s\"")
        .set("queue.journal_dir", &quoted(&journal));
    let mut daemon = Daemon::start_with(env, config);
    let first = wait_for(&path, "cuzk_uptime_seconds", &daemon);
    let samples = check_exposition(&first).unwrap_or_else(|e| panic!("{e}\n{first}"));
    assert_eq!(samples.get("cuzk_jobs_queued"), Some(&0.0), "{first}");
    assert!(first.contains("cuzk_info{version=\""), "{first}");
    // The start compacted the journal and synced nothing yet.
    assert_eq!(samples.get("cuzk_journal_compactions_total"), Some(&1.0));
    assert_eq!(samples.get("cuzk_journal_sync_seconds_count"), Some(&0.0));

    // Counters move in the file: a job that fails fast, and (where the test parameters are
    // there) a resident parameter set, whose labelled samples the text then holds.
    let mut c = daemon.client();
    let _ = c.prove(bogus_porep("textfile"));
    let spec = cuzk::proto::ParamSpec {
        kind: cuzk::proto::ProofKind::PoRep,
        sector_size: 2048,
    };
    let preloaded = c.preload(spec).is_ok();
    drop(c);
    let mut text = wait_for(
        &path,
        "cuzk_jobs_finished_total{kind=\"porep\",outcome=\"failed\"} 1",
        &daemon,
    );
    if preloaded {
        text = wait_for(&path, "cuzk_params_resident_bytes{", &daemon);
    }
    let samples = check_exposition(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    promtool_check(&text);
    check_journal_metrics(&samples, &text);
    // docs/operating.md names every family an operator may see.
    let docs =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/operating.md")).unwrap();
    for family in text.lines().filter_map(|l| l.strip_prefix("# TYPE ")) {
        let name = family.split(' ').next().unwrap();
        assert!(
            docs.contains(&format!("`{name}")),
            "docs/operating.md does not mention {name}"
        );
    }

    // Rewritten by rename, every interval: a reader sees whole files only, and the inode
    // changes between writes.
    let mut inodes = std::collections::BTreeSet::new();
    let mut reads = 0;
    let until = Instant::now() + Duration::from_millis(3500);
    while Instant::now() < until {
        let inode = std::fs::metadata(&path).unwrap().ino();
        let text = std::fs::read_to_string(&path).unwrap();
        check_exposition(&text).unwrap_or_else(|e| panic!("read {reads}: {e}\n{text}"));
        inodes.insert(inode);
        reads += 1;
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(
        inodes.len() >= 2,
        "one inode in 3.5 s of 1 s writes ({reads} reads): not replaced by rename"
    );

    daemon.signal(Signal::SIGTERM);
    assert!(daemon.wait_exit(Duration::from_secs(30)).success());
    // What stays: the file alone, no temporary file beside it.
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["cuzk.prom"]);
    let last = std::fs::read_to_string(&path).unwrap();
    check_exposition(&last).unwrap_or_else(|e| panic!("{e}\n{last}"));
}

/// The journal's metrics once a job was accepted and finished: at least two syncs (the
/// acceptance's before the answer, the result's), counted in the histogram's cumulative
/// buckets and its sum; a log on disk; no failures; the finished job's input deleted.
fn check_journal_metrics(samples: &BTreeMap<String, f64>, text: &str) {
    let get = |s: &str| {
        *samples
            .get(s)
            .unwrap_or_else(|| panic!("no {s} in\n{text}"))
    };
    let count = get("cuzk_journal_sync_seconds_count");
    assert!(count >= 2.0, "{text}");
    assert_eq!(get("cuzk_journal_sync_seconds_bucket{le=\"+Inf\"}"), count);
    let buckets: Vec<f64> = samples
        .iter()
        .filter(|(k, _)| k.starts_with("cuzk_journal_sync_seconds_bucket{"))
        .map(|(_, v)| *v)
        .collect();
    assert!(
        buckets.len() > 2 && buckets.iter().all(|&b| b <= count),
        "{text}"
    );
    assert!(get("cuzk_journal_sync_seconds_sum") > 0.0, "{text}");
    assert!(get("cuzk_journal_log_bytes") > 0.0, "{text}");
    assert_eq!(get("cuzk_journal_input_bytes"), 0.0, "{text}");
    for op in ["log", "input", "compaction"] {
        let series = format!("cuzk_journal_write_failures_total{{operation=\"{op}\"}}");
        assert_eq!(get(&series), 0.0, "{text}");
    }
    assert_eq!(get("cuzk_journal_inputs_refused_total"), 0.0, "{text}");
    assert_eq!(get("cuzk_journal_replayed_jobs{state=\"queued\"}"), 0.0);
}

/// After a kill -9 with a job in flight, the restarted daemon's metrics count the job the
/// journal queued again, and its stored input.
#[test]
fn the_journal_metrics_count_what_a_restart_took_up() {
    let env = Env::new();
    let journal = env.dir.path().join("journal");
    let config = env
        .config()
        .set("queue.journal_dir", &quoted(&journal))
        .set("debug.job_delay", "\"30s\"");
    let mut daemon = Daemon::start_with(env, config.clone());
    let accepted = daemon
        .client()
        .submit(bogus_porep("replayed"))
        .expect("submit");
    let text = daemon.client().metrics().expect("metrics");
    let samples = check_exposition(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert!(samples["cuzk_journal_sync_seconds_count"] >= 1.0, "{text}");
    assert!(samples["cuzk_journal_input_bytes"] > 0.0, "{text}");
    daemon.signal(Signal::SIGKILL);
    daemon.wait_exit(Duration::from_secs(30));
    daemon.child = daemon.env.command(&config).spawn().expect("spawn cuzkd");
    daemon
        .env
        .wait_notify("READY=1", Duration::from_secs(60), &mut daemon.child);
    let text = daemon.client().metrics().expect("metrics");
    let samples = check_exposition(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    promtool_check(&text);
    assert_eq!(
        samples["cuzk_journal_replayed_jobs{state=\"queued\"}"], 1.0,
        "{text}"
    );
    assert_eq!(samples["cuzk_journal_replayed_jobs{state=\"lost\"}"], 0.0);
    assert!(samples["cuzk_journal_input_bytes"] > 0.0, "{text}");
    let info = daemon.client().status(Some(accepted.job_id));
    assert!(info.is_ok(), "the job is known again: {info:?}");
}

#[test]
fn the_textfile_is_written_once_more_at_shutdown() {
    let env = Env::new();
    let path = env.dir.path().join("cuzk.prom");
    // An interval far beyond the test: only the first write (at start) and the last (at
    // shutdown) can happen.
    let config = env
        .config()
        .set("metrics.textfile", &quoted(&path))
        .set("metrics.textfile_interval", "\"1h\"");
    let mut daemon = Daemon::start_with(env, config);
    let first = wait_for(&path, "cuzk_jobs_finished_total", &daemon);
    assert!(!first.contains("outcome=\"failed\"} 1"), "{first}");
    let mut c = daemon.client();
    let _ = c.prove(bogus_porep("shutdown"));
    drop(c);
    daemon.signal(Signal::SIGTERM);
    assert!(daemon.wait_exit(Duration::from_secs(30)).success());
    let last = std::fs::read_to_string(&path).unwrap();
    let samples = check_exposition(&last).unwrap_or_else(|e| panic!("{e}\n{last}"));
    assert_eq!(
        samples.get("cuzk_jobs_finished_total{kind=\"porep\",outcome=\"failed\"}"),
        Some(&1.0),
        "the shutdown write is missing:\n{last}"
    );
    assert_eq!(samples.get("cuzk_connections"), Some(&0.0), "{last}");
}

#[test]
fn a_textfile_that_cannot_be_written_is_a_warning_not_a_stop() {
    let env = Env::new();
    let dir = env.dir.path().join("not-yet");
    let path = dir.join("cuzk.prom");
    let config = env
        .config()
        .set("metrics.textfile", &quoted(&path))
        .set("metrics.textfile_interval", "\"1s\"");
    let mut daemon = Daemon::start_with(env, config);
    let warning = "cannot write the metrics textfile";
    eventually("the warning", Duration::from_secs(30), || {
        daemon.env.stderr().contains(warning).then_some(())
    });
    // Three more failed writes: still one line (rate limited), and the daemon serves.
    std::thread::sleep(Duration::from_millis(3200));
    let stderr = daemon.env.stderr();
    assert_eq!(stderr.matches(warning).count(), 1, "{stderr}");
    daemon.client().status(None).expect("still serving");
    std::fs::create_dir(&dir).unwrap();
    let text = wait_for(&path, "cuzk_uptime_seconds", &daemon);
    check_exposition(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    eventually("the recovery line", Duration::from_secs(10), || {
        daemon
            .env
            .stderr()
            .contains("metrics textfile written again")
            .then_some(())
    });
    daemon.signal(Signal::SIGTERM);
    assert!(daemon.wait_exit(Duration::from_secs(30)).success());
}

#[test]
fn the_checker_catches_what_it_should() {
    let good = "# HELP a_total A.\n# TYPE a_total counter\na_total{k=\"v\\\"\"} 1\n\
                # HELP s S.\n# TYPE s summary\ns_sum 2\ns_count 1\n";
    assert_eq!(check_exposition(good).unwrap().len(), 3);
    for bad in [
        "a 1\n",                                                           // no HELP/TYPE
        "# HELP a A.\n# TYPE a gauge\na 1",                                // no final newline
        "# HELP a A.\n# TYPE a gauge\na one\n",                            // not a number
        "# HELP a A.\n# TYPE a gauge\na{k=\"v} 1\n",                       // unterminated label
        "# HELP a A.\n# TYPE a gauge\n# HELP b B.\n# TYPE b gauge\na 1\n", // a's samples apart
        "# HELP a A.\n# TYPE a gauge\na_sum 1\n",                          // _sum of a gauge
        "# HELP a A.\n",                                                   // no TYPE
    ] {
        assert!(check_exposition(bad).is_err(), "accepted {bad:?}");
    }
}
