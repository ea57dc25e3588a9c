//! Logging: natively to journald (structured fields, journald's own timestamps) when stderr is
//! the journal, else human-readable lines with timestamps on stderr. The variables involved
//! (`JOURNAL_STREAM`, `CUZK_LOG`) come from [`super::Environment`].

use std::ffi::OsStr;
use std::io::IsTerminal;
use std::os::fd::AsRawFd;

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::EnvFilter;

/// Whether stderr is connected to the journal: systemd sets `JOURNAL_STREAM=<dev>:<inode>`
/// (`journal_stream`) for the service's stdout/stderr; a child process that inherited the
/// variable but not the stream must not log to journald.
fn stderr_is_journal(journal_stream: Option<&OsStr>) -> bool {
    let Some(value) = journal_stream else {
        return false;
    };
    let Some((dev, ino)) = value.to_str().and_then(|v| v.split_once(':')) else {
        return false;
    };
    let (Ok(dev), Ok(ino)) = (dev.parse::<u64>(), ino.parse::<u64>()) else {
        return false;
    };
    match nix::sys::stat::fstat(std::io::stderr().as_raw_fd()) {
        Ok(st) => st.st_dev == dev && st.st_ino == ino,
        Err(_) => false,
    }
}

/// Crates below cuzk that log each parameter set they look at, a score of lines at every
/// start, at info: shown only where the configured level is debug or trace.
const CHATTY: &[&str] = &[
    "storage_proofs_core",
    "storage_proofs_porep",
    "storage_proofs_post",
    "storage_proofs_update",
    "filecoin_proofs",
];

/// The filter for the configured `level`: at info and below, the [`CHATTY`] crates' info
/// lines are left out (their warnings and errors kept).
fn directives(level: &str) -> String {
    let quiet = matches!(
        level.trim().to_ascii_lowercase().as_str(),
        "info" | "warn" | "error" | "off"
    );
    if !quiet {
        return level.to_string();
    }
    let mut out = level.trim().to_string();
    for krate in CHATTY {
        let demoted = if level.trim().eq_ignore_ascii_case("info") {
            "warn"
        } else {
            level.trim()
        };
        out.push_str(&format!(",{krate}={demoted}"));
    }
    out
}

/// Installs the global subscriber. `env.log_filter` (`CUZK_LOG`) overrides the configured
/// filter `level` where it parses.
pub fn init(level: &str, env: &super::Environment) {
    let filter = env
        .log_filter
        .as_deref()
        .and_then(|f| EnvFilter::try_new(f).ok())
        .unwrap_or_else(|| EnvFilter::new(directives(level)));
    if stderr_is_journal(env.journal_stream.as_deref()) {
        match tracing_journald::layer() {
            Ok(journald) => {
                // No prefix: fields arrive as CUZK_JOB_ID, PROOF_KIND, MINER, SECTOR, JOB_PRIORITY.
                let journald = journald
                    .with_field_prefix(None)
                    .with_syslog_identifier("cuzkd".into());
                tracing_subscriber::registry()
                    .with(filter)
                    .with(journald)
                    .init();
                return;
            }
            Err(e) => {
                // The journal keeps stderr with its own timestamps: do not add ours.
                tracing_subscriber::fmt()
                    .with_env_filter(filter)
                    .without_time()
                    .with_ansi(false)
                    .with_writer(std::io::stderr)
                    .init();
                tracing::warn!("cannot log to journald natively ({e}); logging to stderr");
                return;
            }
        }
    }
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .init();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_info_the_parameter_crates_log_warnings_only_and_at_debug_everything() {
        let info = directives("info");
        assert!(info.starts_with("info,"));
        assert!(info.contains("storage_proofs_core=warn"));
        assert!(EnvFilter::try_new(&info).is_ok());
        assert!(directives("error").contains("storage_proofs_core=error"));
        assert_eq!(directives("debug"), "debug");
        assert_eq!(directives("info,cuzk=trace"), "info,cuzk=trace");
    }
}
