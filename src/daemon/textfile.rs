//! `metrics.textfile`: the metrics ([`super::metrics::render`]) written to a file for
//! node_exporter's textfile collector, every `metrics.textfile_interval` and once more when
//! the daemon stops. A thin shell: the rendering is `metrics.rs`'s, this only replaces the
//! file atomically and logs what fails, at most once every 10 minutes
//! ([`super::ratelimit::TEXTFILE`]); a failure never stops the daemon.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

use super::Context;

/// The file and what its writes last did.
struct Textfile {
    path: PathBuf,
    /// Whether the last write failed, so that the next one that works says so.
    failing: AtomicBool,
    /// One write at a time: the periodic write and the last one share the temporary file.
    lock: Mutex<()>,
}

impl Textfile {
    /// Renders the metrics and replaces the file with them, logging a failure.
    fn update(&self, ctx: &Context) {
        let text = super::metrics::render(ctx);
        let _one = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        match write_atomically(&self.path, text.as_bytes()) {
            Ok(()) => {
                if self.failing.swap(false, Ordering::Relaxed) {
                    tracing::info!(path = %self.path.display(), "metrics textfile written again");
                }
            }
            Err(e) => {
                self.failing.store(true, Ordering::Relaxed);
                if let Some(suppressed) = super::ratelimit::TEXTFILE.allow(Instant::now()) {
                    tracing::warn!(
                        path = %self.path.display(),
                        suppressed,
                        "cannot write the metrics textfile (metrics.textfile): {e}; retrying \
                         every metrics.textfile_interval"
                    );
                }
            }
        }
    }
}

/// The running writer (see [`start`]).
pub(super) struct Writer {
    file: Arc<Textfile>,
    task: JoinHandle<()>,
}

/// Starts rewriting `metrics.textfile` every `metrics.textfile_interval`, the first time at
/// once; `None` where the key is not set.
pub(super) fn start(ctx: &Arc<Context>) -> Option<Writer> {
    let path = ctx.config.metrics.textfile.clone()?;
    let interval = ctx.config.metrics.textfile_interval;
    tracing::info!(path = %path.display(), interval_s = interval.as_secs(), "writing the metrics textfile");
    let file = Arc::new(Textfile {
        path,
        failing: AtomicBool::new(false),
        lock: Mutex::new(()),
    });
    let task = tokio::spawn(periodic(file.clone(), ctx.clone(), interval));
    Some(Writer { file, task })
}

impl Writer {
    /// Stops the periodic writes and writes the file one last time (at shutdown, after the
    /// drain, so that it holds the final counters).
    pub(super) async fn finish(self, ctx: &Arc<Context>) {
        self.task.abort();
        let (file, ctx) = (self.file, ctx.clone());
        // A write the aborted task had begun finishes first (the lock); this one comes last.
        let _ = tokio::task::spawn_blocking(move || file.update(&ctx)).await;
    }
}

async fn periodic(file: Arc<Textfile>, ctx: Arc<Context>, interval: Duration) {
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let (file, ctx) = (file.clone(), ctx.clone());
        // File system calls block (an fsync can take a while): off the runtime's threads.
        let _ = tokio::task::spawn_blocking(move || file.update(&ctx)).await;
    }
}

/// Replaces `path` with `bytes` so that a reader finds the old file or the new one, whole,
/// never a part: the bytes go to a temporary file in the same directory (hidden and not
/// named `*.prom`, so that node_exporter never reads it), which is fsynced and renamed over
/// `path`. The file gets the process's umask, like every file cuzkd creates.
pub(super) fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let invalid = || io::Error::new(io::ErrorKind::InvalidInput, "not a file path");
    let dir = path.parent().ok_or_else(invalid)?;
    let name = path.file_name().ok_or_else(invalid)?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    let written = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    // The rename made durable too; a file system that cannot fsync a directory still has
    // the new file in place, which is all a reader needs.
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn the_file_is_replaced_whole_and_no_temporary_file_stays() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cuzk.prom");
        write_atomically(&path, b"a 1\n").unwrap();
        let first = fs::metadata(&path).unwrap().ino();
        write_atomically(&path, b"a 2\n").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "a 2\n");
        assert_ne!(
            fs::metadata(&path).unwrap().ino(),
            first,
            "not renamed over"
        );
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["cuzk.prom"]);
    }

    #[test]
    fn a_failed_write_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        // A directory where the file should be: the rename fails.
        let path = dir.path().join("cuzk.prom");
        fs::create_dir(&path).unwrap();
        assert!(write_atomically(&path, b"a 1\n").is_err());
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
        let missing = dir.path().join("no/such/dir/cuzk.prom");
        assert!(write_atomically(&missing, b"a 1\n").is_err());
    }
}
