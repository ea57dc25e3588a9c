//! The job journal's files: the thin I/O layer under [`crate::engine::journal`], which holds
//! the format and every decision (what a log means, which inputs are needed, what expires).
//!
//! In the journal directory (`queue.journal_dir`, or `$STATE_DIRECTORY/journal`; mode 0700,
//! files 0600):
//!
//! * `journal.log` — an append-only log of framed, checksummed records (acceptances, starts,
//!   priority changes, results, id reservations). Appends are buffered under the engine's
//!   lock and written and `fdatasync`ed by [`Recorder::sync`] outside it, before a
//!   submission is answered and after a job finishes (one sync covers every record before
//!   it). An append log rather than a file per job: a job's life is four small records, and
//!   a record costs one write and one sync, no directory churn; a crash mid-append tears
//!   only the last record, which the checksum finds and replay skips.
//! * `inputs/<sha256>` — each queued job's input, stored once by content (its name is the
//!   job's digest, checked when read back), written as a temporary file, fsynced, renamed
//!   and the directory fsynced: inputs are large and written once, and go as a whole when
//!   no unfinished job needs them (after the result that frees them is durable).
//! * `lock` — held (`flock`) while a daemon uses the journal.
//!
//! The log is compacted — rewritten from what the journal knows, expired results dropped,
//! through a temporary file, fsync, rename, directory fsync — at every start and whenever
//! it has doubled since the last compaction (at least 1 MiB), or a write failed. The log and
//! the inputs together stay under `queue.journal_max_size`: an input that would pass it is
//! not stored, and its job runs unrecorded (reported failed after a restart, never lost).

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use super::ratelimit::LogLimit;
use crate::engine::journal::format::{self, Record};
use crate::engine::journal::replay::{self, Applied, InputKey, JournalState};
use crate::engine::journal::{Journal, Recorder, RecoveredJob, RecoveredState};
use crate::proofs::ProofRequest;

const LOG: &str = "journal.log";
const LOG_TMP: &str = "journal.log.tmp";
const INPUTS: &str = "inputs";
const LOCK: &str = "lock";
/// Inputs being written; a start deletes the ones a crash left.
const TMP_PREFIX: &str = ".tmp-";
/// The log is compacted once it has doubled since the last compaction and is at least this
/// large.
const COMPACT_MIN: u64 = 1 << 20;
/// Skipped records logged one by one at start; the rest are counted in one more line.
const SKIPPED_LOGGED: usize = 10;

/// A failing disk is said once every ten minutes, not on every job.
static WRITE_FAILED: LogLimit = LogLimit::with(1, Duration::from_secs(600));
static FULL: LogLimit = LogLimit::with(1, Duration::from_secs(600));

/// Where and how large.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// The journal directory.
    pub dir: PathBuf,
    /// The log and the stored inputs together stay under this many bytes.
    pub max_bytes: u64,
    /// `queue.result_retention`: how long results are kept.
    pub retention: Duration,
    /// `queue.max_finished`: results kept at most.
    pub max_finished: usize,
}

/// Why the journal could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// A file or directory could not be made, read or written.
    #[error("{path}: {source}")]
    Io {
        /// What.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Another daemon holds the journal's lock.
    #[error("{0}: another cuzkd is using this journal")]
    Locked(PathBuf),
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> JournalError + '_ {
    move |source| JournalError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Now, in Unix milliseconds.
fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis().min(u128::from(u64::MAX)) as u64)
}

/// The upper bounds, in seconds, of the sync-time histogram's buckets (`+Inf` besides):
/// from a fast SSD's fdatasync to a disk in trouble.
pub const SYNC_BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

/// What the journal did since start, counted as it happens (atomics: the metrics read them
/// without taking the journal's locks).
#[derive(Debug, Default)]
struct Counters {
    /// Log syncs that wrote records, per [`SYNC_BUCKETS`] bucket (not cumulative), the
    /// last one `+Inf`.
    sync_buckets: [AtomicU64; SYNC_BUCKETS.len() + 1],
    /// Their time in all, nanoseconds.
    sync_nanos: AtomicU64,
    /// Failed writes of the log, of inputs, of compactions.
    failed_log: AtomicU64,
    failed_input: AtomicU64,
    failed_compaction: AtomicU64,
    /// Compactions that succeeded (the one at start included).
    compactions: AtomicU64,
    /// Inputs not stored because the journal was full.
    refused_inputs: AtomicU64,
}

impl Counters {
    fn observe_sync(&self, took: Duration) {
        let secs = took.as_secs_f64();
        let bucket = SYNC_BUCKETS
            .iter()
            .position(|&le| secs <= le)
            .unwrap_or(SYNC_BUCKETS.len());
        if let Some(b) = self.sync_buckets.get(bucket) {
            b.fetch_add(1, Ordering::Relaxed);
        }
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.sync_nanos.fetch_add(nanos, Ordering::Relaxed);
    }
}

/// The journal's metrics at one moment ([`FileJournal::metrics`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Metrics {
    /// Log syncs that wrote records: cumulative counts per [`SYNC_BUCKETS`] bound, then
    /// the count of all (`+Inf`).
    pub sync_cumulative: [u64; SYNC_BUCKETS.len() + 1],
    /// Their time in all.
    pub sync_seconds: f64,
    /// Failed writes: of the log (append and fdatasync), of an input, of a compaction.
    pub failed_log: u64,
    pub failed_input: u64,
    pub failed_compaction: u64,
    /// Compactions that succeeded.
    pub compactions: u64,
    /// Inputs not stored because the journal was full (`queue.journal_max_size`).
    pub refused_inputs: u64,
    /// The log's size, records not yet written included.
    pub log_bytes: u64,
    /// The stored inputs' size.
    pub input_bytes: u64,
    /// `queue.journal_max_size`.
    pub max_bytes: u64,
    /// What the start took up ([`Report`]).
    pub requeued: usize,
    pub results: usize,
    pub lost: usize,
}

/// The journal the engine records to.
pub struct FileJournal {
    dir: PathBuf,
    inputs: PathBuf,
    options: Options,
    shared: Mutex<Shared>,
    log: Mutex<LogFile>,
    /// Names temporary input files apart.
    tmp_counter: AtomicU64,
    /// Held for the journal's life: a second daemon on the same directory is refused.
    _lock: File,
    counters: Counters,
    /// What the start took up, for the metrics.
    taken_up: (usize, usize, usize),
}

/// What records and submissions change, under a lock held only for a moment.
struct Shared {
    state: JournalState,
    /// Framed records not yet written.
    buffer: Vec<u8>,
    /// Inputs freed by results in `buffer`: deleted once it is durable.
    freed: Vec<InputKey>,
    /// Stored inputs and their sizes.
    present: HashMap<InputKey, u64>,
    inputs_bytes: u64,
    /// The log's size, `buffer` included.
    log_bytes: u64,
}

struct LogFile {
    file: File,
    /// Its size after the last compaction.
    compacted: u64,
    /// A write failed: the next sync rewrites the log from the state.
    broken: bool,
}

/// What [`open`] found, for the start-up log.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Unfinished jobs queued again.
    pub requeued: usize,
    /// Of those, jobs a worker had taken.
    pub were_running: usize,
    /// Jobs reported failed because their input could not be read back.
    pub lost: usize,
    /// Results kept.
    pub results: usize,
    /// Stretches of the log skipped.
    pub skipped: usize,
    /// The first job id given out.
    pub next_id: u64,
    /// The log and the inputs, bytes.
    pub bytes: u64,
}

/// Opens (making it where missing) the journal in `options.dir`, reads what it recorded,
/// and returns what the engine starts with, what it found, and the journal itself for the
/// metrics ([`FileJournal::metrics`]; the engine's recorder is the same). Skipped records
/// are logged (a bounded number, escaped), never fatal; what cannot be read back is
/// reported failed. Errors only when the directory cannot be made or used, or another
/// daemon holds it.
pub fn open(
    options: Options,
    now: SystemTime,
) -> Result<(Journal, Report, Arc<FileJournal>), JournalError> {
    let dir = options.dir.clone();
    let inputs = dir.join(INPUTS);
    let (lock, lock_path) = lock_dir(&dir, &inputs)?;
    let replayed = read_log(&dir.join(LOG))?;
    let mut state = replayed.state;
    let now_ms = unix_ms(now);
    state.expire(now_ms, options.retention, options.max_finished);
    let mut present = clean_inputs(&inputs, &state)?;
    let (jobs, lost) = state.recover(now_ms, |a| read_input(&inputs, &a.digest));
    // Inputs the failures freed (unreadable ones) go too.
    present.retain(|key, _| {
        let keep = state.needs(key);
        if !keep {
            let _ = fs::remove_file(inputs.join(hex::encode(key)));
        }
        keep
    });
    let next_id = state.next_id();
    if let Some(reserve) = state.reservation_for(next_id) {
        state.apply(&reserve);
    }
    let inputs_bytes = present.values().sum();
    let mut report = Report {
        lost: lost.len(),
        skipped: replayed.skipped.len(),
        next_id,
        ..Report::default()
    };
    report.count(&jobs);
    let journal = Arc::new(FileJournal {
        inputs,
        options,
        shared: Mutex::new(Shared {
            state,
            buffer: Vec::new(),
            freed: Vec::new(),
            present,
            inputs_bytes,
            log_bytes: 0,
        }),
        // Replaced by the compaction below.
        log: Mutex::new(LogFile {
            file: lock.try_clone().map_err(io_err(&lock_path))?,
            compacted: 0,
            broken: true,
        }),
        tmp_counter: AtomicU64::new(0),
        _lock: lock,
        counters: Counters::default(),
        taken_up: (report.requeued, report.results, report.lost),
        dir,
    });
    {
        let mut log = journal.log_file();
        journal
            .compact(&mut log)
            .map_err(|e| io_err(&journal.dir.join(LOG))(e))?;
    }
    let sh = journal.shared();
    report.bytes = sh.log_bytes + sh.inputs_bytes;
    drop(sh);
    let recorder: Arc<dyn Recorder> = journal.clone();
    Ok((
        Journal {
            recorder,
            next_id,
            jobs,
        },
        report,
        journal,
    ))
}

/// Makes `dir` and `inputs` where missing (owner only) and takes the journal's lock file,
/// held for the daemon's life: another daemon holding it is [`JournalError::Locked`].
fn lock_dir(dir: &Path, inputs: &Path) -> Result<(fs::File, PathBuf), JournalError> {
    for d in [dir, inputs] {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(d)
            .map_err(io_err(d))?;
    }
    let lock_path = dir.join(LOCK);
    let lock = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&lock_path)
        .map_err(io_err(&lock_path))?;
    match lock.try_lock() {
        Ok(()) => Ok((lock, lock_path)),
        Err(fs::TryLockError::WouldBlock) => Err(JournalError::Locked(dir.to_path_buf())),
        Err(fs::TryLockError::Error(e)) => Err(io_err(&lock_path)(e)),
    }
}

/// Replays the log at `log_path` (none: an empty journal), logging a bounded number of the
/// damaged stretches it skipped.
fn read_log(log_path: &Path) -> Result<replay::Replay, JournalError> {
    let bytes = match fs::read(log_path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(io_err(log_path)(e)),
    };
    let replayed = replay::replay(&bytes);
    for s in replayed.skipped.iter().take(SKIPPED_LOGGED) {
        tracing::warn!(path = %log_path.display(), "journal: {}", crate::engine::bounded(&s.to_string(), crate::engine::MAX_MESSAGE));
    }
    if replayed.skipped.len() > SKIPPED_LOGGED {
        tracing::warn!(
            path = %log_path.display(),
            "journal: {} more damaged stretches skipped",
            replayed.skipped.len() - SKIPPED_LOGGED
        );
    }
    Ok(replayed)
}

impl Report {
    /// Counts the recovered `jobs`: requeued (and of those, the ones that were running) and
    /// finished with a result.
    fn count(&mut self, jobs: &[RecoveredJob]) {
        for j in jobs {
            match j.state {
                RecoveredState::Queued(_) => {
                    self.requeued += 1;
                    self.were_running += usize::from(j.was_running);
                }
                RecoveredState::Finished { .. } => self.results += 1,
            }
        }
    }
}

/// Deletes what a crash left in `inputs` (temporary files, inputs no unfinished job needs)
/// and returns the stored inputs that stay, with their sizes.
fn clean_inputs(
    inputs: &Path,
    state: &JournalState,
) -> Result<HashMap<InputKey, u64>, JournalError> {
    let mut present = HashMap::new();
    for entry in fs::read_dir(inputs).map_err(io_err(inputs))? {
        let entry = entry.map_err(io_err(inputs))?;
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let key: Option<InputKey> = hex::decode(name.as_bytes())
            .ok()
            .and_then(|k| k.try_into().ok());
        match key {
            Some(key) if state.needs(&key) => {
                let size = entry.metadata().map_err(io_err(&path))?.len();
                present.insert(key, size);
            }
            Some(_) => {
                let _ = fs::remove_file(&path);
            }
            None if name.starts_with(TMP_PREFIX) => {
                let _ = fs::remove_file(&path);
            }
            None => tracing::warn!(
                path = %crate::engine::bounded(&path.display().to_string(), 512),
                "journal: a file that is not the journal's, left alone"
            ),
        }
    }
    Ok(present)
}

/// The request stored under `key`, checked against its name.
fn read_input(inputs: &Path, key: &InputKey) -> Result<ProofRequest, String> {
    let bytes = fs::read(inputs.join(hex::encode(key))).map_err(|e| e.to_string())?;
    if format::sha256(&bytes) != *key {
        return Err("the stored input does not match its digest".into());
    }
    format::decode_input(&bytes).map_err(|e| e.to_string())
}

/// Writes `bytes` as the directory's log (temporary file, fsync, rename, directory fsync)
/// and returns it open for appending.
fn write_log(dir: &Path, bytes: &[u8]) -> std::io::Result<File> {
    let tmp = dir.join(LOG_TMP);
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    fs::rename(&tmp, dir.join(LOG))?;
    File::open(dir)?.sync_all()?;
    Ok(file)
}

impl FileJournal {
    /// The journal's metrics now: its counters, and its sizes (under its lock, for a
    /// moment).
    pub fn metrics(&self) -> Metrics {
        let c = &self.counters;
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let mut sync_cumulative = [0; SYNC_BUCKETS.len() + 1];
        let mut total = 0;
        for (out, bucket) in sync_cumulative.iter_mut().zip(&c.sync_buckets) {
            total += load(bucket);
            *out = total;
        }
        let (log_bytes, input_bytes) = {
            let sh = self.shared();
            (sh.log_bytes, sh.inputs_bytes)
        };
        let (requeued, results, lost) = self.taken_up;
        Metrics {
            sync_cumulative,
            sync_seconds: Duration::from_nanos(load(&c.sync_nanos)).as_secs_f64(),
            failed_log: load(&c.failed_log),
            failed_input: load(&c.failed_input),
            failed_compaction: load(&c.failed_compaction),
            compactions: load(&c.compactions),
            refused_inputs: load(&c.refused_inputs),
            log_bytes,
            input_bytes,
            max_bytes: self.options.max_bytes,
            requeued,
            results,
            lost,
        }
    }

    fn shared(&self) -> MutexGuard<'_, Shared> {
        // Every field is consistent on its own between statements: keep recording after a
        // panic elsewhere rather than lose the journal.
        self.shared.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn log_file(&self) -> MutexGuard<'_, LogFile> {
        self.log.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn input_path(&self, key: &InputKey) -> PathBuf {
        self.inputs.join(hex::encode(key))
    }

    /// Applies `record` and appends it to the buffer.
    fn append(&self, sh: &mut Shared, record: &Record) -> Applied {
        let applied = sh.state.apply(record);
        match format::encode(record) {
            Ok(frame) => {
                sh.log_bytes += frame.len() as u64;
                sh.buffer.extend_from_slice(&frame);
            }
            // Cannot happen for the engine's records (all far below the limit); said anyway.
            Err(e) => tracing::error!("journal: a record not written: {e}"),
        }
        applied
    }

    /// Deletes the stored input `key` if nothing needs it (under the lock, so that no
    /// submission stores it again meanwhile).
    fn delete_input(&self, sh: &mut Shared, key: &InputKey) {
        if !sh.state.deletable(key) {
            return;
        }
        if let Some(size) = sh.present.remove(key) {
            sh.inputs_bytes = sh.inputs_bytes.saturating_sub(size);
            let path = self.input_path(key);
            if let Err(e) = fs::remove_file(&path) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    tracing::warn!(path = %path.display(), "journal: cannot delete a finished job's input: {e}");
                }
            }
        }
        sh.state.deleted(key);
    }

    /// Writes `request`'s stored form under `key`: temporary file, fsync, rename, directory
    /// fsync.
    fn write_input(&self, request: &ProofRequest, key: &InputKey) -> std::io::Result<()> {
        let n = self.tmp_counter.fetch_add(1, Ordering::Relaxed);
        let name = hex::encode(key);
        let tmp = self.inputs.join(format!("{TMP_PREFIX}{name}-{n}"));
        let written = (|| {
            let file = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)?;
            let mut w = BufWriter::with_capacity(1 << 20, file);
            let mut result = Ok(());
            format::write_input(request, |bytes| {
                if result.is_ok() {
                    result = w.write_all(bytes);
                }
            });
            result?;
            w.flush()?;
            w.get_ref().sync_all()?;
            fs::rename(&tmp, self.inputs.join(&name))?;
            File::open(&self.inputs)?.sync_all()
        })();
        if written.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        written
    }

    /// Rewrites the log from the state (expired results dropped).
    fn compact(&self, log: &mut LogFile) -> std::io::Result<()> {
        let now_ms = unix_ms(SystemTime::now());
        let (bytes, freed) = {
            let mut sh = self.shared();
            sh.state
                .expire(now_ms, self.options.retention, self.options.max_finished);
            let mut bytes = Vec::new();
            for r in sh.state.snapshot() {
                bytes.extend(format::encode(&r).map_err(std::io::Error::other)?);
            }
            // The snapshot says everything the buffer does.
            sh.buffer.clear();
            sh.log_bytes = bytes.len() as u64;
            (bytes, std::mem::take(&mut sh.freed))
        };
        match write_log(&self.dir, &bytes) {
            Ok(file) => {
                self.counters.compactions.fetch_add(1, Ordering::Relaxed);
                log.file = file;
                log.compacted = bytes.len() as u64;
                log.broken = false;
                let mut sh = self.shared();
                for key in &freed {
                    self.delete_input(&mut sh, key);
                }
                Ok(())
            }
            Err(e) => {
                self.counters
                    .failed_compaction
                    .fetch_add(1, Ordering::Relaxed);
                log.broken = true;
                self.shared().freed.extend(freed);
                Err(e)
            }
        }
    }

    fn warn_write_failed(&self, what: &str, e: &std::io::Error) {
        if let Some(suppressed) = WRITE_FAILED.allow(Instant::now()) {
            tracing::warn!(
                dir = %self.dir.display(),
                suppressed,
                "journal: {what}: {e}; jobs run on, but may not survive a restart"
            );
        }
    }
}

impl Recorder for FileJournal {
    fn store_input(&self, request: &ProofRequest, digest: &[u8; 32]) -> bool {
        let size = format::input_len(request);
        {
            let mut sh = self.shared();
            if sh.present.contains_key(digest) {
                sh.state.stage(*digest);
                return true;
            }
            let used = sh.log_bytes + sh.inputs_bytes;
            if used.saturating_add(size) > self.options.max_bytes {
                drop(sh);
                self.counters.refused_inputs.fetch_add(1, Ordering::Relaxed);
                if let Some(suppressed) = FULL.allow(Instant::now()) {
                    tracing::warn!(
                        dir = %self.dir.display(),
                        used,
                        input = size,
                        max = self.options.max_bytes,
                        suppressed,
                        "journal full (queue.journal_max_size): a job is queued without its \
                         input stored, and is reported failed if the daemon restarts before \
                         it finishes"
                    );
                }
                return false;
            }
            sh.inputs_bytes += size;
            sh.state.stage(*digest);
        }
        let written = self.write_input(request, digest);
        let mut sh = self.shared();
        match written {
            Ok(()) => {
                if sh.present.insert(*digest, size).is_some() {
                    // Another submission of the same input stored it meanwhile.
                    sh.inputs_bytes = sh.inputs_bytes.saturating_sub(size);
                }
                true
            }
            Err(e) => {
                sh.inputs_bytes = sh.inputs_bytes.saturating_sub(size);
                sh.state.unstage(digest);
                drop(sh);
                self.counters.failed_input.fetch_add(1, Ordering::Relaxed);
                self.warn_write_failed("cannot store a job's input", &e);
                false
            }
        }
    }

    fn release_input(&self, digest: &[u8; 32]) {
        let mut sh = self.shared();
        if sh.state.unstage(digest) {
            self.delete_input(&mut sh, digest);
        }
    }

    fn record(&self, record: Record) {
        let mut sh = self.shared();
        if let Record::Accepted(a) = &record {
            // The id's block is reserved first: in the same sync, before the answer.
            if let Some(reserve) = sh.state.reservation_for(a.id) {
                self.append(&mut sh, &reserve);
            }
        }
        let applied = self.append(&mut sh, &record);
        if let Record::Accepted(a) = &record {
            if a.input_stored {
                // The job holds the input now; the submission lets go.
                sh.state.unstage(&a.digest);
            }
        }
        if let Applied::Freed(key) = applied {
            sh.freed.push(key);
        }
    }

    fn sync(&self) {
        let mut log = self.log_file();
        let (buffer, freed) = {
            let mut sh = self.shared();
            (
                std::mem::take(&mut sh.buffer),
                std::mem::take(&mut sh.freed),
            )
        };
        let mut ok = !log.broken;
        if ok && !buffer.is_empty() {
            let began = Instant::now();
            let written = log
                .file
                .write_all(&buffer)
                .and_then(|_| log.file.sync_data());
            match written {
                Ok(()) => self.counters.observe_sync(began.elapsed()),
                Err(e) => {
                    self.counters.failed_log.fetch_add(1, Ordering::Relaxed);
                    self.warn_write_failed("cannot write the log", &e);
                    log.broken = true;
                    ok = false;
                }
            }
        }
        let mut sh = self.shared();
        if ok {
            for key in &freed {
                self.delete_input(&mut sh, key);
            }
        } else {
            // Kept until the rewrite below has made their results durable.
            sh.freed.extend(freed);
        }
        let grown = sh.log_bytes > COMPACT_MIN.max(2 * log.compacted);
        let over =
            sh.log_bytes + sh.inputs_bytes > self.options.max_bytes && sh.log_bytes > log.compacted;
        drop(sh);
        if log.broken || grown || over {
            if let Err(e) = self.compact(&mut log) {
                self.warn_write_failed("cannot rewrite the log", &e);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::journal::format::{Accepted, Finished, Outcome};
    use crate::engine::journal::replay::ID_BLOCK;
    use crate::engine::FailureKind;

    fn options(dir: &Path, max_bytes: u64) -> Options {
        Options {
            dir: dir.join("journal"),
            max_bytes,
            retention: Duration::from_secs(600),
            max_finished: 100,
        }
    }

    fn request(n: u64, size: usize) -> ProofRequest {
        ProofRequest::PoRep(crate::proofs::PoRepRequest {
            c1: vec![n as u8; size],
            miner_id: 1000,
            sector_number: Some(n),
        })
    }

    fn digest(r: &ProofRequest) -> [u8; 32] {
        let mut bytes = Vec::new();
        format::write_input(r, |b| bytes.extend_from_slice(b));
        format::sha256(&bytes)
    }

    /// Submits `r` as job `id` the way the engine does; returns whether its input was stored.
    fn submit(j: &Journal, id: u64, r: &ProofRequest) -> bool {
        let d = digest(r);
        let stored = j.recorder.store_input(r, &d);
        j.recorder.record(Record::Accepted(Accepted {
            id,
            owner: 1000,
            request_id: Some(format!("sector-{id}")),
            priority: 1,
            kind: 0,
            miner: Some(1000),
            sector: Some(id),
            digest: d,
            input_stored: stored,
            submitted_ms: unix_ms(SystemTime::now()),
        }));
        j.recorder.sync();
        stored
    }

    fn finish(j: &Journal, id: u64) {
        j.recorder.record(Record::Finished(Finished {
            id,
            finished_ms: unix_ms(SystemTime::now()),
            outcome: Outcome::Proof {
                proof: vec![id as u8; 192],
                partitions: 1,
                backend: "cpu".into(),
                timings_us: [0; 6],
            },
        }));
        j.recorder.sync();
    }

    fn stored_inputs(o: &Options) -> usize {
        fs::read_dir(o.dir.join(INPUTS)).unwrap().count()
    }

    /// What was recorded comes back after the process is gone (the journal dropped without
    /// any shutdown): unfinished jobs with their inputs, results, and ids above the block.
    #[test]
    fn jobs_survive_a_reopen_and_ids_move_on() {
        let tmp = tempfile::tempdir().unwrap();
        let o = options(tmp.path(), 1 << 30);
        let (j, report, files) = open(o.clone(), SystemTime::now()).unwrap();
        assert_eq!((report.next_id, j.jobs.len()), (1, 0));
        let m = files.metrics();
        assert_eq!(
            (m.compactions, m.sync_cumulative[SYNC_BUCKETS.len()]),
            (1, 0)
        );
        // A second daemon on the same directory is refused.
        assert!(matches!(
            open(o.clone(), SystemTime::now()),
            Err(JournalError::Locked(_))
        ));
        let (a, b) = (request(1, 1000), request(2, 1000));
        assert!(submit(&j, 1, &a) && submit(&j, 2, &b));
        // The same input again (a resubmission without request id): stored once.
        assert!(submit(&j, 3, &a));
        assert_eq!(stored_inputs(&o), 2);
        // One sync per submission, each counted in the histogram's buckets and its sum.
        let m = files.metrics();
        assert_eq!(m.sync_cumulative[SYNC_BUCKETS.len()], 3, "{m:?}");
        assert!(m.sync_cumulative.windows(2).all(|w| w[0] <= w[1]), "{m:?}");
        assert!(m.sync_seconds > 0.0 && m.log_bytes > 0, "{m:?}");
        assert_eq!(m.input_bytes, 2 * format::input_len(&a), "{m:?}");
        assert_eq!((m.failed_log, m.failed_input, m.refused_inputs), (0, 0, 0));
        finish(&j, 2);
        assert_eq!(stored_inputs(&o), 1, "job 2's input deleted, job 1's kept");
        assert_eq!(files.metrics().input_bytes, format::input_len(&a));
        finish(&j, 1);
        assert_eq!(stored_inputs(&o), 1, "job 3 still needs it");
        drop((j, files));
        let (j, report, files) = open(o.clone(), SystemTime::now()).unwrap();
        assert_eq!(report.requeued, 1);
        assert_eq!(report.results, 2);
        let m = files.metrics();
        assert_eq!((m.requeued, m.results, m.lost), (1, 2, 0));
        drop(files);
        assert_eq!(
            report.next_id,
            1 + ID_BLOCK,
            "the first block may have been used"
        );
        let three = j.jobs.iter().find(|x| x.id == 3).unwrap();
        match &three.state {
            RecoveredState::Queued(r) => assert_eq!(r, &a),
            other => panic!("{other:?}"),
        }
        assert_eq!(three.request_id.as_deref(), Some("sector-3"));
        let two = j.jobs.iter().find(|x| x.id == 2).unwrap();
        match &two.state {
            RecoveredState::Finished { result, .. } => {
                assert_eq!(result.as_ref().unwrap().output.proof, vec![2u8; 192])
            }
            other => panic!("{other:?}"),
        }
        // A job in the second run takes an id of a new block; the next start is above it.
        submit(&j, report.next_id, &b);
        drop(j);
        let (_, report, _) = open(o.clone(), SystemTime::now()).unwrap();
        assert_eq!(report.next_id, 1 + 2 * ID_BLOCK);
        let mode = |p: &Path| {
            use std::os::unix::fs::PermissionsExt;
            fs::metadata(p).unwrap().permissions().mode() & 0o777
        };
        assert_eq!(mode(&o.dir), 0o700);
        assert_eq!(mode(&o.dir.join(INPUTS)), 0o700);
        assert_eq!(mode(&o.dir.join(LOG)), 0o600);
    }

    /// A torn last record and a corrupt one in the middle are skipped; the rest is there.
    /// A stored input that does not match its name reports its job failed.
    #[test]
    fn damaged_logs_and_inputs_are_skipped_not_fatal() {
        let tmp = tempfile::tempdir().unwrap();
        let o = options(tmp.path(), 1 << 30);
        let (j, _, _) = open(o.clone(), SystemTime::now()).unwrap();
        for id in 1..=4 {
            submit(&j, id, &request(id, 100));
        }
        drop(j);
        let log = o.dir.join(LOG);
        let mut bytes = fs::read(&log).unwrap();
        // Job 2's acceptance: a flipped byte in its payload.
        let scanned = format::scan(&bytes);
        let offsets: Vec<usize> = scanned
            .iter()
            .filter_map(|s| match s {
                format::Scanned::Frame { offset, .. } => Some(*offset),
                _ => None,
            })
            .collect();
        // The start wrote a header and the first block's reservation; then come the four
        // acceptances.
        let n = offsets.len();
        bytes[offsets[n - 3] + format::FRAME_HEADER + 3] ^= 0xff;
        // Job 4's acceptance: torn.
        bytes.truncate(offsets[n - 1] + 20);
        fs::write(&log, &bytes).unwrap();
        // Job 3's input: damaged.
        let three = o
            .dir
            .join(INPUTS)
            .join(hex::encode(digest(&request(3, 100))));
        fs::write(&three, b"not what it was").unwrap();
        let (j, report, _) = open(o.clone(), SystemTime::now()).unwrap();
        assert_eq!(report.skipped, 2, "{report:?}");
        assert_eq!((report.requeued, report.lost), (1, 1), "{report:?}");
        let ids: Vec<u64> = j.jobs.iter().map(|x| x.id).collect();
        assert_eq!(ids, [1, 3]);
        let lost = &j.jobs[1].state;
        assert!(
            matches!(lost, RecoveredState::Finished { result: Err(f), .. } if f.kind == FailureKind::ShuttingDown),
            "{lost:?}"
        );
        // The unreadable input and those of the skipped jobs are gone; job 1's stays.
        assert_eq!(stored_inputs(&o), 1);
        // The rewritten log is clean.
        drop(j);
        let (_, report, _) = open(o, SystemTime::now()).unwrap();
        assert_eq!(report.skipped, 0);
    }

    /// The log and the inputs stay under the limit: an input that would pass it is not
    /// stored (its job still recorded, and reported after a restart); finished jobs' inputs
    /// are deleted; the log is compacted as results come and expire.
    #[test]
    fn the_journal_stays_under_its_size_limit() {
        let tmp = tempfile::tempdir().unwrap();
        let limit = 64 * 1024;
        let mut o = options(tmp.path(), limit);
        o.max_finished = 20;
        let (j, _, files) = open(o.clone(), SystemTime::now()).unwrap();
        let size = |o: &Options| -> u64 {
            let log = fs::metadata(o.dir.join(LOG)).unwrap().len();
            let inputs: u64 = fs::read_dir(o.dir.join(INPUTS))
                .unwrap()
                .map(|e| e.unwrap().metadata().unwrap().len())
                .sum();
            log + inputs
        };
        // 18 KB inputs: three fit, the fourth does not.
        let stored: Vec<bool> = (1..=4)
            .map(|id| submit(&j, id, &request(id, 18_000)))
            .collect();
        assert_eq!(stored, [true, true, true, false]);
        assert!(size(&o) <= limit);
        assert_eq!(files.metrics().refused_inputs, 1);
        // Finishing frees room again.
        finish(&j, 1);
        assert!(submit(&j, 5, &request(5, 18_000)));
        // Hundreds of small jobs later the log is still bounded: results beyond
        // max_finished are compacted away.
        for id in 6..500 {
            submit(&j, id, &request(id, 10));
            finish(&j, id);
            assert!(size(&o) <= limit + 4096, "job {id}: {} bytes", size(&o));
        }
        drop((j, files));
        let (j, report, files) = open(o.clone(), SystemTime::now()).unwrap();
        assert_eq!(report.lost, 1, "job 4, whose input was not stored");
        assert_eq!(files.metrics().lost, 1);
        drop(files);
        assert_eq!(report.requeued, 3, "jobs 2, 3 and 5");
        assert!(report.results <= 21, "{report:?}");
        assert!(report.bytes <= limit);
        drop(j);
    }
}
