//! `debug.trace_file`: every partition's stage times as Chrome trace events (the JSON Array
//! Format, which Perfetto and chrome://tracing open as written, unterminated array
//! included). Each job is a process (`pid` = its sequence number) with a row per partition;
//! the device's partitions are also drawn on row 0 of process 0.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::pipeline::{SpanObserver, Stage, StageSpan};

/// Events written at most: a daemon that runs for weeks must not fill its disk with a trace
/// left on (about 150 bytes an event).
const MAX_EVENTS: u64 = 1_000_000;

struct Writer {
    out: BufWriter<File>,
    events: u64,
}

/// Creates (or truncates) `path` and returns the observer that appends to it.
pub fn open(path: &Path) -> std::io::Result<SpanObserver> {
    let mut out = BufWriter::new(File::create(path)?);
    out.write_all(b"[\n")?;
    out.flush()?;
    let writer = Mutex::new(Writer { out, events: 0 });
    let origin = Instant::now();
    Ok(Arc::new(move |span: &StageSpan| {
        let mut w = writer.lock().unwrap_or_else(|p| p.into_inner());
        if w.events >= MAX_EVENTS {
            return;
        }
        let lines = events(span, origin);
        w.events += lines.len() as u64;
        let written = lines.iter().try_for_each(|l| writeln!(w.out, "{l},"));
        if written.and_then(|()| w.out.flush()).is_err() || w.events >= MAX_EVENTS {
            // A full disk or the cap: stop here rather than log once per partition.
            tracing::warn!(events = w.events, "the stage trace stops here");
            w.events = MAX_EVENTS;
        }
    }))
}

/// The trace events of one span: on its job's row, and for the device stage also on the
/// device's row (process 0, one thread per device).
fn events(span: &StageSpan, origin: Instant) -> Vec<String> {
    let ts = span.start.saturating_duration_since(origin).as_micros();
    let dur = span.end.saturating_duration_since(span.start).as_micros();
    let name = span.stage.as_str();
    let mut out = vec![format!(
        "{{\"name\":\"{name}\",\"cat\":\"partition\",\"ph\":\"X\",\"ts\":{ts},\"dur\":{dur},\
         \"pid\":{},\"tid\":{},\"args\":{{\"class\":{}}}}}",
        span.job, span.partition, span.class
    )];
    if span.stage == Stage::Device {
        out.push(format!(
            "{{\"name\":\"job {} partition {}\",\"cat\":\"device\",\"ph\":\"X\",\"ts\":{ts},\
             \"dur\":{dur},\"pid\":0,\"tid\":{},\"args\":{{\"class\":{}}}}}",
            span.job, span.partition, span.device, span.class
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn spans_become_complete_events_that_parse() {
        let origin = Instant::now();
        let span = StageSpan {
            job: 7,
            class: 1,
            partition: 2,
            stage: Stage::Device,
            device: 1,
            start: origin + Duration::from_micros(1500),
            end: origin + Duration::from_micros(1750),
        };
        let lines = events(&span, origin);
        assert_eq!(lines.len(), 2, "the job's row and the device's");
        let doc: serde_json::Value =
            serde_json::from_str(&format!("[{}]", lines.join(","))).unwrap();
        let e = &doc[0];
        assert_eq!(
            (e["name"].as_str(), e["ph"].as_str()),
            (Some("device"), Some("X"))
        );
        assert_eq!(
            (e["ts"].as_u64(), e["dur"].as_u64()),
            (Some(1500), Some(250))
        );
        assert_eq!((e["pid"].as_u64(), e["tid"].as_u64()), (Some(7), Some(2)));
        assert_eq!(
            (doc[1]["pid"].as_u64(), doc[1]["tid"].as_u64()),
            (Some(0), Some(1)),
            "the device's own row"
        );
        let synthesis = StageSpan {
            stage: Stage::Synthesis,
            ..span
        };
        assert_eq!(events(&synthesis, origin).len(), 1);
    }

    #[test]
    fn the_file_is_a_trace_array() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.json");
        let observe = open(&path).unwrap();
        let now = Instant::now();
        for stage in [
            Stage::Admission,
            Stage::Synthesis,
            Stage::DeviceQueue,
            Stage::Device,
        ] {
            observe(&StageSpan {
                job: 1,
                class: 3,
                partition: 0,
                stage,
                device: 0,
                start: now,
                end: now,
            });
        }
        let text = std::fs::read_to_string(&path).unwrap();
        // As written the array is open; closed, it parses.
        let closed = format!("{}]", text.trim_end().trim_end_matches(','));
        let doc: Vec<serde_json::Value> = serde_json::from_str(&closed).unwrap();
        assert_eq!(doc.len(), 5);
    }
}
