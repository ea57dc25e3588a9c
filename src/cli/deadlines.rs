//! `cuzk deadlines`: every queued and running job with a deadline, earliest due first, with
//! the time left to its deadline and when the daemon's measured proving times say it ends.

use std::time::Duration;

use crate::proto::{DeadlineInfo, DeadlinesReport, ErrorCode};

use super::{connect_to, ClientError, DaemonOpts};

/// `cuzk deadlines …`
#[derive(Debug, clap::Args)]
pub struct DeadlinesArgs {
    /// List at most this many jobs, the earliest due first (0: the daemon's bound, 1000).
    #[arg(long, default_value_t = 0)]
    pub max: u32,
    /// Daemon connection.
    #[command(flatten)]
    pub daemon: DaemonOpts,
}

pub fn run(a: DeadlinesArgs) -> anyhow::Result<()> {
    let mut client = connect_to(&a.daemon)?;
    let report = match client.deadlines(a.max) {
        Err(e @ ClientError::Server(_)) if e.code() == Some(ErrorCode::MalformedFrame) => {
            anyhow::bail!("this daemon predates the Deadlines request: see `cuzk status`")
        }
        r => r?,
    };
    if a.daemon.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", text(&report));
    }
    Ok(())
}

/// One line per job, then how many were left out.
fn text(r: &DeadlinesReport) -> String {
    if r.jobs.is_empty() && r.more == 0 {
        return "no queued or running job has a deadline\n".to_string();
    }
    let mut out: String = r.jobs.iter().map(line).collect();
    if r.more > 0 {
        out.push_str(&format!("… and {} more due later\n", r.more));
    }
    out
}

/// `job 7  window-post  running  3/10  due in 4m10s  projected end in 3m02s: on time
/// (1m08s spare)`.
fn line(j: &DeadlineInfo) -> String {
    let due = if j.overdue_ms > 0 {
        format!("{} late", span(j.overdue_ms))
    } else {
        format!("due in {}", span(j.due_in_ms))
    };
    let end = match j.ends_in_ms {
        None => "not measured yet".to_string(),
        Some(ends) => {
            let verdict = match j.late_by_ms() {
                Some(late) => format!("likely late by {}", span(late)),
                None => format!("on time ({} spare)", span(j.due_in_ms - ends)),
            };
            format!("projected end in {}: {verdict}", span(ends))
        }
    };
    format!(
        "job {}  {}  {}  {}/{}  {due}  {end}\n",
        j.job_id,
        j.kind,
        format!("{:?}", j.state).to_lowercase(),
        j.partitions_done,
        j.partitions_total
    )
}

fn span(ms: u64) -> String {
    crate::cli::meter::clock(Duration::from_millis(ms))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto;

    fn job(id: u64, due_in_ms: u64, overdue_ms: u64, ends_in_ms: Option<u64>) -> DeadlineInfo {
        DeadlineInfo {
            job_id: id,
            kind: proto::ProofKind::WindowPoSt,
            priority: proto::Priority::High,
            state: proto::JobState::Running,
            partitions_done: 3,
            partitions_total: 10,
            due_in_ms,
            overdue_ms,
            ends_in_ms,
        }
    }

    #[test]
    fn each_job_shows_its_time_to_the_deadline_and_the_verdict_of_its_projected_end() {
        let report = DeadlinesReport {
            jobs: vec![
                job(1, 0, 120_000, Some(10_000)),
                job(2, 250_000, 0, Some(182_000)),
                job(3, 60_000, 0, Some(100_000)),
                job(4, 9_000_000, 0, None),
            ],
            more: 2,
        };
        let shown = text(&report);
        let lines: Vec<&str> = shown.lines().collect();
        assert_eq!(
            lines,
            vec![
                "job 1  window-post  running  3/10  2m00s late  projected end in 10s: likely late by 2m10s",
                "job 2  window-post  running  3/10  due in 4m10s  projected end in 3m02s: on time (1m08s spare)",
                "job 3  window-post  running  3/10  due in 1m00s  projected end in 1m40s: likely late by 40s",
                "job 4  window-post  running  3/10  due in 2h30m  not measured yet",
                "… and 2 more due later",
            ]
        );
        let empty = DeadlinesReport {
            jobs: vec![],
            more: 0,
        };
        assert_eq!(text(&empty), "no queued or running job has a deadline\n");
    }
}
