//! What the journal knows, as pure code: the jobs its records describe, which stored inputs
//! they still need, the job id high-water mark, what expires, what a compacted log holds, and
//! what a restarted engine takes up. Time is passed in (Unix milliseconds); no I/O.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use super::format::{self, Accepted, Finished, Outcome, Record, Scanned};
use super::{RecoveredJob, RecoveredState};
use crate::engine::{FailureKind, JobId};

/// Job ids are reserved this many at a time: a block's [`Record::Reserve`] is made durable
/// before its first id is given out, so a restarted daemon starts above every id given out
/// before, whichever records were lost, at the cost of one synced record per block.
pub const ID_BLOCK: u64 = 1024;

/// A stored input's name: the job's digest.
pub type InputKey = [u8; 32];

/// One job as the records describe it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobEntry {
    /// Its acceptance (with the priority it was queued at).
    pub accepted: Accepted,
    /// Its priority now (a resubmission may have raised it).
    pub priority: u8,
    /// Whether a worker took it.
    pub started: bool,
    /// Its result, once finished.
    pub finished: Option<Finished>,
}

/// Who needs a stored input.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Refs {
    /// Unfinished jobs whose input it is.
    unfinished: usize,
    /// Submissions that stored it and have not yet made a job or given up.
    pending: usize,
}

/// What applying a record did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Applied {
    /// It changed what the journal knows.
    Done,
    /// As `Done`, and the job's stored input is needed no more: it may be deleted once this
    /// record is durable.
    Freed(InputKey),
    /// It contradicts what came before (a second acceptance of an id, a result for an
    /// unknown job): ignored.
    Ignored(&'static str),
}

/// The jobs and ids the journal's records describe.
#[derive(Clone, Debug, Default)]
pub struct JournalState {
    /// Ids below this may have been given out.
    reserved: u64,
    jobs: BTreeMap<u64, JobEntry>,
    inputs: HashMap<InputKey, Refs>,
}

impl JournalState {
    /// Takes `record` into account.
    pub fn apply(&mut self, record: &Record) -> Applied {
        match record {
            Record::Header { .. } => Applied::Done,
            Record::Reserve { below } => {
                self.reserved = self.reserved.max(*below);
                Applied::Done
            }
            Record::Accepted(a) => {
                if self.jobs.contains_key(&a.id) {
                    return Applied::Ignored("a second acceptance of a job id");
                }
                self.reserved = self.reserved.max(a.id.saturating_add(1));
                if a.input_stored {
                    self.inputs.entry(a.digest).or_default().unfinished += 1;
                }
                self.jobs.insert(
                    a.id,
                    JobEntry {
                        accepted: a.clone(),
                        priority: a.priority,
                        started: false,
                        finished: None,
                    },
                );
                Applied::Done
            }
            Record::Started { id } => match self.jobs.get_mut(id) {
                Some(j) if j.finished.is_none() => {
                    j.started = true;
                    Applied::Done
                }
                Some(_) => Applied::Ignored("a start after the job finished"),
                None => Applied::Ignored("a start of an unknown job"),
            },
            Record::Priority { id, priority } => match self.jobs.get_mut(id) {
                Some(j) if j.finished.is_none() => {
                    j.priority = *priority;
                    Applied::Done
                }
                Some(_) => Applied::Ignored("a priority change after the job finished"),
                None => Applied::Ignored("a priority change of an unknown job"),
            },
            Record::Finished(f) => {
                let Some(j) = self.jobs.get_mut(&f.id) else {
                    return Applied::Ignored("a result of an unknown job");
                };
                if j.finished.is_some() {
                    return Applied::Ignored("a second result of a job");
                }
                j.finished = Some(f.clone());
                if !j.accepted.input_stored {
                    return Applied::Done;
                }
                let key = j.accepted.digest;
                let refs = self.inputs.entry(key).or_default();
                refs.unfinished = refs.unfinished.saturating_sub(1);
                if self.deletable(&key) {
                    Applied::Freed(key)
                } else {
                    Applied::Done
                }
            }
        }
    }

    /// The first id a restarted engine may give out: above every id reserved or recorded.
    pub fn next_id(&self) -> JobId {
        let recorded = self.jobs.keys().next_back().map_or(1, |id| id + 1);
        self.reserved.max(recorded).max(1)
    }

    /// The reservation that must be recorded before job `id` is given out, if its block is
    /// not reserved yet.
    pub fn reservation_for(&self, id: JobId) -> Option<Record> {
        (id >= self.reserved).then(|| Record::Reserve {
            below: id.saturating_add(ID_BLOCK),
        })
    }

    /// A submission stored the input `key`: keep it until the submission made its job or
    /// gave up ([`JournalState::unstage`]).
    pub fn stage(&mut self, key: InputKey) {
        self.inputs.entry(key).or_default().pending += 1;
    }

    /// The submission that staged `key` made its job (recorded before this call) or gave up;
    /// returns whether the stored input is needed no more.
    pub fn unstage(&mut self, key: &InputKey) -> bool {
        if let Some(refs) = self.inputs.get_mut(key) {
            refs.pending = refs.pending.saturating_sub(1);
        }
        self.deletable(key)
    }

    /// Whether no unfinished job and no submission needs the stored input `key`.
    pub fn deletable(&self, key: &InputKey) -> bool {
        self.inputs
            .get(key)
            .is_none_or(|r| r.unfinished == 0 && r.pending == 0)
    }

    /// Forgets the bookkeeping of a deleted input.
    pub fn deleted(&mut self, key: &InputKey) {
        if self.deletable(key) {
            self.inputs.remove(key);
        }
    }

    /// Whether an unfinished job or a submission needs the stored input `key`.
    pub fn needs(&self, key: &InputKey) -> bool {
        !self.deletable(key)
    }

    /// Drops the results older than `retention` at `now_ms`, then the oldest beyond
    /// `max_finished`, as the engine does; returns how many were dropped.
    pub fn expire(&mut self, now_ms: u64, retention: Duration, max_finished: usize) -> usize {
        let retention_ms = retention.as_millis().min(u128::from(u64::MAX)) as u64;
        let before = self.jobs.len();
        self.jobs.retain(|_, j| {
            j.finished
                .as_ref()
                .is_none_or(|f| now_ms.saturating_sub(f.finished_ms) < retention_ms)
        });
        let mut finished: Vec<(u64, u64)> = self
            .jobs
            .iter()
            .filter_map(|(&id, j)| j.finished.as_ref().map(|f| (f.finished_ms, id)))
            .collect();
        if finished.len() > max_finished {
            finished.sort_unstable();
            let excess = finished.len() - max_finished;
            for (_, id) in finished.into_iter().take(excess) {
                self.jobs.remove(&id);
            }
        }
        before - self.jobs.len()
    }

    /// The records of a compacted log that says all this journal knows: a header, the id
    /// reservation, and each job's acceptance (at its current priority), start and result.
    pub fn snapshot(&self) -> Vec<Record> {
        let mut out = vec![
            Record::Header {
                version: format::VERSION,
            },
            Record::Reserve {
                below: self.reserved,
            },
        ];
        for j in self.jobs.values() {
            let mut accepted = j.accepted.clone();
            accepted.priority = j.priority;
            out.push(Record::Accepted(accepted));
            if j.started && j.finished.is_none() {
                out.push(Record::Started { id: j.accepted.id });
            }
            if let Some(f) = &j.finished {
                out.push(Record::Finished(f.clone()));
            }
        }
        out
    }

    /// The jobs, by id.
    pub fn jobs(&self) -> impl Iterator<Item = &JobEntry> {
        self.jobs.values()
    }

    /// Jobs recorded and not finished.
    pub fn unfinished(&self) -> usize {
        self.jobs.values().filter(|j| j.finished.is_none()).count()
    }

    /// What a restarted engine takes up at `now_ms`: every unfinished job queued again with
    /// its input (`input` reads a job's stored input back, or says why it cannot), every
    /// finished one with its result. A job whose input cannot be read back is finished here
    /// with a failure (ShuttingDown: the daemon stopped before it could run; submit it again),
    /// and the record that says so is returned, to be made durable: a job is reported, never
    /// lost.
    pub fn recover<E: std::fmt::Display>(
        &mut self,
        now_ms: u64,
        mut input: impl FnMut(&Accepted) -> Result<crate::proofs::ProofRequest, E>,
    ) -> (Vec<RecoveredJob>, Vec<Record>) {
        let mut lost = Vec::new();
        let mut queued = HashMap::new();
        for j in self.jobs.values().filter(|j| j.finished.is_none()) {
            let read = if j.accepted.input_stored {
                input(&j.accepted).map_err(|e| e.to_string())
            } else {
                Err("the journal had no room for it, or could not write it".to_string())
            };
            match read {
                Ok(request) => {
                    queued.insert(j.accepted.id, request);
                }
                Err(why) => lost.push(Record::Finished(Finished {
                    id: j.accepted.id,
                    finished_ms: now_ms,
                    outcome: Outcome::Failed {
                        kind: format::failure_code(FailureKind::ShuttingDown),
                        message: crate::engine::bounded(
                            &format!(
                                "the daemon restarted before the job finished, and its input \
                                 could not be read back from the journal ({why}); submit it again"
                            ),
                            crate::engine::MAX_MESSAGE,
                        ),
                    },
                })),
            }
        }
        for r in &lost {
            self.apply(r);
        }
        let ago = |ms: u64| Duration::from_millis(now_ms.saturating_sub(ms));
        let jobs = self
            .jobs
            .values()
            .filter_map(|j| {
                let a = &j.accepted;
                // Codes were checked when the records were decoded.
                let kind = format::kind_of(a.kind).ok()?;
                let state = match &j.finished {
                    Some(f) => RecoveredState::Finished {
                        result: f.outcome.result(kind).ok()?,
                        finished_ago: ago(f.finished_ms),
                    },
                    None => RecoveredState::Queued(queued.remove(&a.id)?),
                };
                Some(RecoveredJob {
                    id: a.id,
                    owner: a.owner,
                    request_id: a.request_id.clone(),
                    kind,
                    priority: format::priority_of(j.priority).ok()?,
                    miner: a.miner,
                    sector: a.sector,
                    digest: a.digest,
                    submitted_ago: ago(a.submitted_ms),
                    was_running: j.started,
                    state,
                })
            })
            .collect();
        (jobs, lost)
    }
}

/// A stretch of the log that was skipped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Skipped {
    /// Bytes that are no frame (a frame follows).
    Corrupt {
        /// Where.
        offset: usize,
        /// How many bytes.
        len: usize,
    },
    /// Bytes at the end that are no frame: a torn write.
    Truncated {
        /// Where.
        offset: usize,
        /// How many bytes.
        len: usize,
    },
    /// A frame whose payload is no record this version knows.
    Undecodable {
        /// Where.
        offset: usize,
        /// Why.
        why: String,
    },
    /// A record that contradicts the ones before it.
    Ignored {
        /// Where.
        offset: usize,
        /// Why.
        why: &'static str,
    },
}

impl std::fmt::Display for Skipped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Skipped::Corrupt { offset, len } => {
                write!(f, "{len} corrupt bytes at offset {offset} skipped")
            }
            Skipped::Truncated { offset, len } => write!(
                f,
                "a truncated record ({len} bytes) at offset {offset} skipped: a write cut short"
            ),
            Skipped::Undecodable { offset, why } => {
                write!(f, "the record at offset {offset} skipped: {why}")
            }
            Skipped::Ignored { offset, why } => {
                write!(f, "the record at offset {offset} ignored: {why}")
            }
        }
    }
}

/// The journal's state after reading a log, and what was skipped on the way.
#[derive(Clone, Debug, Default)]
pub struct Replay {
    /// What the readable records say.
    pub state: JournalState,
    /// Records applied.
    pub records: usize,
    /// What was skipped, in order.
    pub skipped: Vec<Skipped>,
}

/// Reads a log: every record that checks out and decodes, in order; the rest skipped.
pub fn replay(bytes: &[u8]) -> Replay {
    let mut out = Replay::default();
    for s in format::scan(bytes) {
        match s {
            Scanned::Frame { offset, payload } => match format::decode(payload) {
                Ok(record) => match out.state.apply(&record) {
                    Applied::Ignored(why) => out.skipped.push(Skipped::Ignored { offset, why }),
                    Applied::Done | Applied::Freed(_) => out.records += 1,
                },
                Err(e) => out.skipped.push(Skipped::Undecodable {
                    offset,
                    why: e.to_string(),
                }),
            },
            Scanned::Corrupt { offset, len } => out.skipped.push(Skipped::Corrupt { offset, len }),
            Scanned::Truncated { offset, len } => {
                out.skipped.push(Skipped::Truncated { offset, len })
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::JobState;
    use crate::proofs::ProofRequest;

    const T0: u64 = 1_700_000_000_000;

    fn accepted(id: u64, digest: u8, stored: bool) -> Record {
        Record::Accepted(Accepted {
            id,
            owner: 1000,
            request_id: Some(format!("r{id}")),
            priority: 1,
            kind: 2,
            miner: None,
            sector: None,
            digest: [digest; 32],
            input_stored: stored,
            submitted_ms: T0,
        })
    }

    fn finished(id: u64, at: u64) -> Record {
        Record::Finished(Finished {
            id,
            finished_ms: at,
            outcome: Outcome::Proof {
                proof: vec![id as u8; 192],
                partitions: 1,
                backend: "cpu".into(),
                timings_us: [1, 2, 3, 4, 5, 15],
            },
        })
    }

    fn log(records: &[Record]) -> Vec<u8> {
        records
            .iter()
            .flat_map(|r| format::encode(r).unwrap())
            .collect()
    }

    fn window(_: &Accepted) -> Result<ProofRequest, String> {
        Ok(ProofRequest::WindowPoSt {
            input: b"{}".to_vec(),
        })
    }

    /// The high-water mark: ids start above every reserved and every recorded id, even when
    /// the records of the last block's jobs were lost, and a block is reserved before its
    /// first id is used.
    #[test]
    fn ids_start_above_every_id_reserved_or_recorded() {
        let mut st = JournalState::default();
        assert_eq!(st.next_id(), 1);
        assert_eq!(st.reservation_for(1), Some(Record::Reserve { below: 1025 }));
        st.apply(&Record::Reserve { below: 1025 });
        assert_eq!(st.reservation_for(1024), None);
        assert_eq!(st.next_id(), 1025, "the whole block may have been used");
        st.apply(&accepted(3, 1, true));
        assert_eq!(st.next_id(), 1025);
        assert_eq!(
            st.reservation_for(1025),
            Some(Record::Reserve { below: 2049 })
        );
        // A job recorded beyond the reservation (its Reserve record lost): above it too.
        st.apply(&accepted(5000, 1, true));
        assert_eq!(st.next_id(), 5001);
        // Replayed from a log whose last Reserve was torn: the earlier one still holds.
        let bytes = log(&[
            Record::Reserve { below: 1025 },
            accepted(1, 1, true),
            Record::Reserve { below: 2049 },
        ]);
        let torn = &bytes[..bytes.len() - 3];
        let r = replay(torn);
        assert_eq!(r.state.next_id(), 1025);
        assert!(matches!(r.skipped[..], [Skipped::Truncated { .. }]));
        // The snapshot keeps the mark, even with no job left.
        let mut st = replay(&bytes).state;
        st.apply(&finished(1, T0));
        st.expire(T0 + 1_000_000, Duration::from_secs(1), 10);
        assert_eq!(st.jobs().count(), 0);
        let again = replay(&log(&st.snapshot())).state;
        assert_eq!(again.next_id(), 2049);
    }

    /// Inputs are shared by content: deletable once no unfinished job and no submission in
    /// progress needs them.
    #[test]
    fn inputs_are_freed_when_no_job_needs_them() {
        let mut st = JournalState::default();
        let key = [9u8; 32];
        st.stage(key);
        st.apply(&accepted(1, 9, true));
        assert!(!st.unstage(&key), "job 1 needs it");
        st.stage(key); // a second submission of the same input
        st.apply(&accepted(2, 9, true));
        assert!(!st.unstage(&key));
        assert_eq!(st.apply(&finished(1, T0)), Applied::Done, "job 2 needs it");
        st.stage(key); // a third, refused (queue full): gives up
        assert_eq!(st.apply(&finished(2, T0)), Applied::Done, "staged");
        assert!(st.unstage(&key));
        assert!(st.deletable(&key));
        // Freed by a result when nothing else needs it.
        let mut st = JournalState::default();
        st.apply(&accepted(1, 3, true));
        assert_eq!(st.apply(&finished(1, T0)), Applied::Freed([3; 32]));
        // An input never stored is nobody's.
        st.apply(&accepted(2, 4, false));
        assert!(st.deletable(&[4; 32]));
        assert_eq!(st.apply(&finished(2, T0)), Applied::Done);
    }

    #[test]
    fn contradictions_are_ignored() {
        let mut st = JournalState::default();
        st.apply(&accepted(1, 1, true));
        assert!(matches!(
            st.apply(&accepted(1, 2, true)),
            Applied::Ignored(_)
        ));
        assert!(matches!(st.apply(&finished(7, T0)), Applied::Ignored(_)));
        st.apply(&finished(1, T0));
        assert!(matches!(st.apply(&finished(1, T0)), Applied::Ignored(_)));
        assert!(matches!(
            st.apply(&Record::Priority { id: 1, priority: 3 }),
            Applied::Ignored(_)
        ));
    }

    /// Results expire after the retention time, and beyond max_finished the oldest go.
    #[test]
    fn results_expire_like_the_engines() {
        let mut st = JournalState::default();
        for id in 1..=5 {
            st.apply(&accepted(id, id as u8, true));
        }
        for id in 1..=4 {
            st.apply(&finished(id, T0 + id * 1000));
        }
        assert_eq!(st.expire(T0 + 2500, Duration::from_secs(60), 10), 0);
        // Two kept at most: 1 and 2 go.
        assert_eq!(st.expire(T0 + 4500, Duration::from_secs(60), 2), 2);
        // 3 is 2.5 s old at T0 + 5500: gone with a 2 s retention; 4 stays; 5 never expires.
        assert_eq!(st.expire(T0 + 5500, Duration::from_secs(2), 10), 1);
        let ids: Vec<u64> = st.jobs().map(|j| j.accepted.id).collect();
        assert_eq!(ids, [4, 5]);
    }

    /// A compacted log says the same as the records it replaces.
    #[test]
    fn a_snapshot_replays_to_the_same_state() {
        let mut st = JournalState::default();
        for r in [
            Record::Reserve { below: 1025 },
            accepted(1, 1, true),
            accepted(2, 2, true),
            accepted(3, 3, false),
            Record::Started { id: 1 },
            Record::Priority { id: 2, priority: 3 },
            finished(3, T0),
        ] {
            st.apply(&r);
        }
        let again = replay(&log(&st.snapshot()));
        assert!(again.skipped.is_empty());
        let a: Vec<JobEntry> = st.jobs().cloned().collect();
        let b: Vec<JobEntry> = again.state.jobs().cloned().collect();
        assert_eq!(a[0], b[0]);
        assert_eq!(b[1].priority, 3);
        assert_eq!(a[2], b[2]);
        assert_eq!(again.state.next_id(), st.next_id());
        assert!(again.state.needs(&[1; 32]) && again.state.needs(&[2; 32]));
        assert!(!again.state.needs(&[3; 32]));
    }

    /// A restarted engine gets every unfinished job queued again (same id, owner, request
    /// id, priority) and every result; a job whose input is gone is reported failed.
    #[test]
    fn recovery_requeues_unfinished_jobs_and_reports_lost_inputs() {
        let mut st = JournalState::default();
        for r in [
            accepted(1, 1, true),
            accepted(2, 2, true),
            accepted(3, 3, false),
            accepted(4, 4, true),
            Record::Started { id: 2 },
            Record::Priority { id: 1, priority: 2 },
            finished(4, T0 + 1000),
        ] {
            st.apply(&r);
        }
        let (jobs, lost) = st.recover(T0 + 5000, |a| {
            if a.id == 2 {
                Err("the file is gone".to_string())
            } else {
                window(a)
            }
        });
        assert_eq!(
            lost.len(),
            2,
            "job 2 (input unreadable) and job 3 (never stored)"
        );
        let by_id: BTreeMap<u64, &RecoveredJob> = jobs.iter().map(|j| (j.id, j)).collect();
        assert_eq!(by_id.len(), 4);
        let one = by_id[&1];
        assert!(matches!(one.state, RecoveredState::Queued(_)));
        assert_eq!(one.priority, crate::engine::Priority::High);
        assert_eq!(one.owner, 1000);
        assert_eq!(one.request_id.as_deref(), Some("r1"));
        assert_eq!(one.submitted_ago, Duration::from_secs(5));
        for id in [2, 3] {
            let RecoveredState::Finished { result, .. } = &by_id[&id].state else {
                panic!("job {id} not finished");
            };
            let f = result.as_ref().unwrap_err();
            assert_eq!(f.kind, FailureKind::ShuttingDown);
            assert!(f.message.contains("submit it again"), "{}", f.message);
        }
        assert!(by_id[&2].was_running);
        let RecoveredState::Finished {
            result,
            finished_ago,
        } = &by_id[&4].state
        else {
            panic!("job 4");
        };
        assert_eq!(result.as_ref().unwrap().output.proof, vec![4u8; 192]);
        assert_eq!(*finished_ago, Duration::from_secs(4));
        // The failures are in the state now: a second restart reports them the same way.
        let (again, lost) = st.recover(T0 + 6000, window);
        assert!(lost.is_empty());
        let states: Vec<JobState> = again
            .iter()
            .map(|j| match &j.state {
                RecoveredState::Queued(_) => JobState::Queued,
                RecoveredState::Finished { result: Ok(_), .. } => JobState::Succeeded,
                RecoveredState::Finished { .. } => JobState::Failed,
            })
            .collect();
        assert_eq!(
            states,
            [
                JobState::Queued,
                JobState::Failed,
                JobState::Failed,
                JobState::Succeeded
            ]
        );
    }

    /// Replay skips what does not check out and keeps the rest, whatever the damage.
    #[test]
    fn replay_survives_corruption_anywhere() {
        let records = [
            Record::Reserve { below: 1025 },
            accepted(1, 1, true),
            accepted(2, 2, true),
            finished(1, T0),
        ];
        let bytes = log(&records);
        for at in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[at] ^= 0x5a;
            let r = replay(&bad);
            assert!(!r.skipped.is_empty(), "byte {at}");
            assert!(
                r.records >= 2,
                "byte {at}: one record lost, and the result it names"
            );
            assert!(r.state.next_id() >= 3, "byte {at}");
            let cut = replay(&bytes[..at]);
            assert!(cut.records <= records.len());
        }
    }
}
