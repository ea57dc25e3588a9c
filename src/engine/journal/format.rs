//! The journal's bytes, as pure code: the log's frames and records, and the encoding of a
//! stored input. No I/O: the daemon's `journal.rs` reads and writes the files.
//!
//! **The log** is a sequence of frames, each `"CZKJ" | length (u32 LE) | check (8 bytes) |
//! payload`, where the check is the first 8 bytes of SHA-256 over the magic, the length and
//! the payload, and the payload is one [`Record`] in postcard. A frame that does not check out
//! (a flipped bit, a torn write, garbage) is skipped by [`scan`], which finds the next frame
//! by its magic and checks it in turn: one bad record costs only itself, and a torn write at
//! the end (a crash in the middle of an append) only the record being written.
//!
//! **A stored input** is the byte stream [`digest`] hashes: each field as
//! its length (u64 LE) and its bytes — the kind's name, then for PoRep the miner id, the
//! sector number (8 bytes, or `"none"`) and the C1 output, for the others the input. So the
//! file's SHA-256 is the job's digest, its name: a stored input is found by its content,
//! stored once however many jobs share it, and checked when it is read back.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::engine::{FailureKind, JobOutput, JobResult, JobTimings, Priority};
use crate::pipeline::{ProofOutput, StageTimings};
use crate::proofs::{PoRepRequest, ProofKind, ProofRequest};

/// The first bytes of every frame.
pub const MAGIC: [u8; 4] = *b"CZKJ";

/// Magic, length and check.
pub const FRAME_HEADER: usize = 16;

/// The largest record payload: far above any real one (a finished SnapDeals job's 16
/// partition proofs are 3 KiB, a request id at most 256 bytes, an error 1 KiB), and a corrupt
/// length cannot make a reader take the rest of the file for one record.
pub const MAX_RECORD: usize = 1 << 20;

/// The format's version, in the [`Record::Header`] every compacted log starts with.
pub const VERSION: u32 = 1;

/// Why bytes are not a record, or a record not a frame.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    /// A record larger than [`MAX_RECORD`].
    #[error("record of {0} bytes is larger than the journal's limit")]
    TooLarge(usize),
    /// postcard could not encode or decode it.
    #[error("postcard: {0}")]
    Postcard(String),
    /// It decoded, but a field is out of range.
    #[error("invalid {0}")]
    Invalid(&'static str),
    /// A stored input that does not parse.
    #[error("stored input: {0}")]
    Input(&'static str),
}

/// Something that happened to a job, or to the journal; appended variants only, so that an
/// older log stays readable.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Record {
    /// The first record of a compacted log.
    Header {
        /// [`VERSION`].
        version: u32,
    },
    /// Job ids below `below` may have been given out: a restarted daemon starts at or above
    /// it. Made durable before any id of its block is.
    Reserve {
        /// The first id not reserved.
        below: u64,
    },
    /// A job was queued.
    Accepted(Accepted),
    /// A worker took the job.
    Started {
        /// The job.
        id: u64,
    },
    /// A resubmission raised the queued job's priority.
    Priority {
        /// The job.
        id: u64,
        /// [`priority_code`].
        priority: u8,
    },
    /// The job finished: a proof, or why not.
    Finished(Finished),
}

/// A queued job.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Accepted {
    /// The job id.
    pub id: u64,
    /// The submitter's uid.
    pub owner: u32,
    /// The client's request id.
    pub request_id: Option<String>,
    /// [`priority_code`].
    pub priority: u8,
    /// [`kind_code`].
    pub kind: u8,
    /// For logs and Status (PoRep).
    pub miner: Option<u64>,
    /// For logs and Status (PoRep).
    pub sector: Option<u64>,
    /// The request's digest, and the name of its stored input.
    pub digest: [u8; 32],
    /// Whether the input was stored (it is not when the journal was full or failed to write
    /// it: such a job is reported failed after a restart, not lost).
    pub input_stored: bool,
    /// When it was submitted, Unix milliseconds.
    pub submitted_ms: u64,
}

/// A finished job.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finished {
    /// The job.
    pub id: u64,
    /// When it finished, Unix milliseconds.
    pub finished_ms: u64,
    /// Its result.
    pub outcome: Outcome,
}

/// A finished job's result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    /// The verified proof.
    Proof {
        /// The proof bytes.
        proof: Vec<u8>,
        /// Partitions proved.
        partitions: u32,
        /// The backend that proved it.
        backend: String,
        /// Queue wait, parameter load, synthesis, proving, verification, total: microseconds.
        timings_us: [u64; 6],
    },
    /// No proof.
    Failed {
        /// [`failure_code`].
        kind: u8,
        /// Why (bounded when it was made).
        message: String,
    },
}

/// A priority's code in records.
pub fn priority_code(p: Priority) -> u8 {
    p.class()
}

/// The priority of a code.
pub fn priority_of(code: u8) -> Result<Priority, FormatError> {
    match code {
        0 => Ok(Priority::Low),
        1 => Ok(Priority::Normal),
        2 => Ok(Priority::High),
        3 => Ok(Priority::Critical),
        _ => Err(FormatError::Invalid("priority")),
    }
}

/// A proof kind's code in records: its place in [`ProofKind::ALL`].
pub fn kind_code(k: ProofKind) -> u8 {
    ProofKind::ALL.iter().position(|&x| x == k).unwrap_or(0) as u8
}

/// The proof kind of a code.
pub fn kind_of(code: u8) -> Result<ProofKind, FormatError> {
    ProofKind::ALL
        .get(usize::from(code))
        .copied()
        .ok_or(FormatError::Invalid("proof kind"))
}

const FAILURES: [FailureKind; 6] = [
    FailureKind::InvalidInput,
    FailureKind::ProvingFailed,
    FailureKind::Cancelled,
    FailureKind::ShuttingDown,
    FailureKind::Internal,
    FailureKind::ResourceExhausted,
];

/// A failure kind's code in records.
pub fn failure_code(k: FailureKind) -> u8 {
    FAILURES.iter().position(|&x| x == k).unwrap_or(4) as u8
}

/// The failure kind of a code.
pub fn failure_of(code: u8) -> Result<FailureKind, FormatError> {
    FAILURES
        .get(usize::from(code))
        .copied()
        .ok_or(FormatError::Invalid("failure kind"))
}

fn us(d: Duration) -> u64 {
    d.as_micros().min(u128::from(u64::MAX)) as u64
}

impl Outcome {
    /// A job's result as a record's.
    pub fn of(result: &JobResult) -> Self {
        match result {
            Ok(out) => {
                let t = &out.timings;
                Outcome::Proof {
                    proof: out.output.proof.clone(),
                    partitions: out.output.partitions.min(u32::MAX as usize) as u32,
                    backend: out.output.backend.clone(),
                    timings_us: [
                        us(t.queue_wait),
                        us(t.param_load),
                        us(t.synthesis),
                        us(t.proving),
                        us(t.verification),
                        us(t.total),
                    ],
                }
            }
            Err(f) => Outcome::Failed {
                kind: failure_code(f.kind),
                message: f.message.clone(),
            },
        }
    }

    /// The job result this outcome records, for a job of `kind`.
    pub fn result(&self, kind: ProofKind) -> Result<JobResult, FormatError> {
        match self {
            Outcome::Proof {
                proof,
                partitions,
                backend,
                timings_us,
            } => {
                let [queue_wait, param_load, synthesis, proving, verification, total] =
                    timings_us.map(Duration::from_micros);
                Ok(Ok(Arc::new(JobOutput {
                    output: ProofOutput {
                        kind,
                        proof: proof.clone(),
                        partitions: *partitions as usize,
                        timings: StageTimings {
                            param_load,
                            synthesis,
                            proving,
                            verification,
                        },
                        backend: backend.clone(),
                    },
                    timings: JobTimings {
                        queue_wait,
                        param_load,
                        synthesis,
                        proving,
                        verification,
                        total,
                    },
                })))
            }
            Outcome::Failed { kind, message } => Ok(Err(crate::engine::Failure::new(
                failure_of(*kind)?,
                message.clone(),
            ))),
        }
    }
}

impl Record {
    /// Checks the fields that decode into more than their type allows.
    fn validate(&self) -> Result<(), FormatError> {
        match self {
            Record::Accepted(a) => {
                priority_of(a.priority)?;
                kind_of(a.kind)?;
            }
            Record::Priority { priority, .. } => {
                priority_of(*priority)?;
            }
            Record::Finished(Finished {
                outcome: Outcome::Failed { kind, .. },
                ..
            }) => {
                failure_of(*kind)?;
            }
            _ => {}
        }
        Ok(())
    }
}

/// The check of a frame of `len` (its bytes as written) over `payload`.
fn check(len: [u8; 4], payload: &[u8]) -> [u8; 8] {
    let mut h = Sha256::new();
    h.update(MAGIC);
    h.update(len);
    h.update(payload);
    let digest = h.finalize();
    let mut out = [0u8; 8];
    out.copy_from_slice(&digest[..8]);
    out
}

/// `record` as one frame of the log.
pub fn encode(record: &Record) -> Result<Vec<u8>, FormatError> {
    let payload =
        postcard::to_allocvec(record).map_err(|e| FormatError::Postcard(e.to_string()))?;
    frame(&payload)
}

/// `payload` framed: magic, length, check, payload.
pub fn frame(payload: &[u8]) -> Result<Vec<u8>, FormatError> {
    if payload.len() > MAX_RECORD {
        return Err(FormatError::TooLarge(payload.len()));
    }
    let len = (payload.len() as u32).to_le_bytes();
    let mut out = Vec::with_capacity(FRAME_HEADER + payload.len());
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&len);
    out.extend_from_slice(&check(len, payload));
    out.extend_from_slice(payload);
    Ok(out)
}

/// The record in a frame's payload.
pub fn decode(payload: &[u8]) -> Result<Record, FormatError> {
    let record: Record =
        postcard::from_bytes(payload).map_err(|e| FormatError::Postcard(e.to_string()))?;
    record.validate()?;
    Ok(record)
}

/// What [`scan`] found at a place in the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scanned<'a> {
    /// A frame that checks out.
    Frame {
        /// Where it starts.
        offset: usize,
        /// Its payload.
        payload: &'a [u8],
    },
    /// Bytes that are no frame, followed by one that is: skipped.
    Corrupt {
        /// Where they start.
        offset: usize,
        /// How many.
        len: usize,
    },
    /// Bytes at the end that are no frame (a torn write, or garbage at the end).
    Truncated {
        /// Where they start.
        offset: usize,
        /// How many.
        len: usize,
    },
}

/// The payload of a valid frame at `pos`, if one starts there.
fn frame_at(bytes: &[u8], pos: usize) -> Option<&[u8]> {
    let head = bytes.get(pos..pos.checked_add(FRAME_HEADER)?)?;
    if head[..4] != MAGIC {
        return None;
    }
    let len_bytes: [u8; 4] = head[4..8].try_into().ok()?;
    let len = u32::from_le_bytes(len_bytes) as usize;
    if len > MAX_RECORD {
        return None;
    }
    let start = pos + FRAME_HEADER;
    let payload = bytes.get(start..start.checked_add(len)?)?;
    (head[8..16] == check(len_bytes, payload)).then_some(payload)
}

/// Where the next valid frame at or after `from` starts.
fn next_frame(bytes: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    loop {
        let rest = bytes.get(i..)?;
        let at = i + rest.windows(MAGIC.len()).position(|w| w == MAGIC)?;
        if frame_at(bytes, at).is_some() {
            return Some(at);
        }
        i = at + 1;
    }
}

/// The frames of a log, with the bad stretches between them.
pub fn scan(bytes: &[u8]) -> Vec<Scanned<'_>> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < bytes.len() {
        if let Some(payload) = frame_at(bytes, pos) {
            out.push(Scanned::Frame {
                offset: pos,
                payload,
            });
            pos += FRAME_HEADER + payload.len();
            continue;
        }
        match next_frame(bytes, pos + 1) {
            Some(next) => {
                out.push(Scanned::Corrupt {
                    offset: pos,
                    len: next - pos,
                });
                pos = next;
            }
            None => {
                out.push(Scanned::Truncated {
                    offset: pos,
                    len: bytes.len() - pos,
                });
                break;
            }
        }
    }
    out
}

/// Calls `field` with each field of `request`'s stored form, in order (see the module's
/// documentation); the same fields make the job's digest.
pub fn input_fields(request: &ProofRequest, mut field: impl FnMut(&[u8])) {
    field(request.kind().as_str().as_bytes());
    match request {
        ProofRequest::PoRep(r) => {
            field(&r.miner_id.to_le_bytes());
            match r.sector_number {
                Some(n) => field(&n.to_le_bytes()),
                None => field(b"none"),
            }
            field(&r.c1);
        }
        ProofRequest::SnapDeals { input }
        | ProofRequest::WindowPoSt { input }
        | ProofRequest::WinningPoSt { input } => field(input),
    }
}

/// Calls `write` with the bytes of `request`'s stored form, a field's length and then its
/// bytes at a time (no copy of a large input is made).
pub fn write_input(request: &ProofRequest, mut write: impl FnMut(&[u8])) {
    input_fields(request, |f| {
        write(&(f.len() as u64).to_le_bytes());
        write(f);
    });
}

/// The size of `request`'s stored form.
pub fn input_len(request: &ProofRequest) -> u64 {
    let mut n = 0u64;
    input_fields(request, |f| n = n.saturating_add(8 + f.len() as u64));
    n
}

/// The fields of a stored input, one at a time.
struct Fields<'a>(&'a [u8]);

impl<'a> Fields<'a> {
    fn next(&mut self) -> Result<&'a [u8], FormatError> {
        let (len, rest) = self
            .0
            .split_first_chunk::<8>()
            .ok_or(FormatError::Input("a field's length is cut off"))?;
        let len = usize::try_from(u64::from_le_bytes(*len))
            .map_err(|_| FormatError::Input("a field is too long"))?;
        if len > rest.len() {
            return Err(FormatError::Input("a field is cut off"));
        }
        let (field, rest) = rest.split_at(len);
        self.0 = rest;
        Ok(field)
    }

    fn u64(&mut self) -> Result<u64, FormatError> {
        let f: [u8; 8] = self
            .next()?
            .try_into()
            .map_err(|_| FormatError::Input("a number is not 8 bytes"))?;
        Ok(u64::from_le_bytes(f))
    }
}

/// The request a stored input holds (the caller checks its digest first).
pub fn decode_input(bytes: &[u8]) -> Result<ProofRequest, FormatError> {
    let mut fields = Fields(bytes);
    let kind: ProofKind = std::str::from_utf8(fields.next()?)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or(FormatError::Input("unknown proof kind"))?;
    let request = match kind {
        ProofKind::PoRep => {
            let miner_id = fields.u64()?;
            let sector_number = match fields.next()? {
                b"none" => None,
                n => Some(u64::from_le_bytes(n.try_into().map_err(|_| {
                    FormatError::Input("a sector number is not 8 bytes")
                })?)),
            };
            let c1 = fields.next()?.to_vec();
            ProofRequest::PoRep(PoRepRequest {
                c1,
                miner_id,
                sector_number,
            })
        }
        ProofKind::SnapDeals => ProofRequest::SnapDeals {
            input: fields.next()?.to_vec(),
        },
        ProofKind::WindowPoSt => ProofRequest::WindowPoSt {
            input: fields.next()?.to_vec(),
        },
        ProofKind::WinningPoSt => ProofRequest::WinningPoSt {
            input: fields.next()?.to_vec(),
        },
    };
    if !fields.0.is_empty() {
        return Err(FormatError::Input("bytes after the last field"));
    }
    Ok(request)
}

/// The SHA-256 of bytes (a stored input's name is the SHA-256 of its content).
pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// A digest of a request's kind and input, to tell "same request again" from "different
/// request under a reused id". It is also the name of the job's stored input in the journal,
/// whose content is the stream hashed here ([`write_input`]).
pub(in crate::engine) fn digest(request: &ProofRequest) -> [u8; 32] {
    let mut h = Sha256::new();
    write_input(request, |bytes| h.update(bytes));
    h.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Failure;

    fn accepted(id: u64) -> Record {
        Record::Accepted(Accepted {
            id,
            owner: 1000,
            request_id: Some("sector-7".into()),
            priority: 1,
            kind: 0,
            miner: Some(1000),
            sector: Some(7),
            digest: [7; 32],
            input_stored: true,
            submitted_ms: 1_700_000_000_000,
        })
    }

    fn log(records: &[Record]) -> Vec<u8> {
        records.iter().flat_map(|r| encode(r).unwrap()).collect()
    }

    fn decoded(bytes: &[u8]) -> Vec<Result<Record, FormatError>> {
        scan(bytes)
            .into_iter()
            .filter_map(|s| match s {
                Scanned::Frame { payload, .. } => Some(decode(payload)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn records_round_trip() {
        let records = vec![
            Record::Header { version: VERSION },
            Record::Reserve { below: 1025 },
            accepted(1),
            Record::Started { id: 1 },
            Record::Priority { id: 1, priority: 3 },
            Record::Finished(Finished {
                id: 1,
                finished_ms: 1_700_000_000_500,
                outcome: Outcome::Failed {
                    kind: 2,
                    message: "cancelled".into(),
                },
            }),
        ];
        let bytes = log(&records);
        let back: Vec<Record> = decoded(&bytes).into_iter().map(Result::unwrap).collect();
        assert_eq!(back, records);
    }

    /// A torn write at the end (the crash came in the middle of an append) costs that record
    /// only, whatever byte the write stopped at.
    #[test]
    fn a_truncated_record_is_skipped() {
        let bytes = log(&[accepted(1), accepted(2)]);
        let first = encode(&accepted(1)).unwrap().len();
        for cut in first + 1..bytes.len() {
            let scanned = scan(&bytes[..cut]);
            assert_eq!(scanned.len(), 2, "cut at {cut}");
            assert!(matches!(scanned[0], Scanned::Frame { offset: 0, .. }));
            assert_eq!(
                scanned[1],
                Scanned::Truncated {
                    offset: first,
                    len: cut - first
                }
            );
        }
    }

    /// A flipped bit anywhere in a record (magic, length, check, payload) costs that record
    /// only: the records after it are found again.
    #[test]
    fn a_corrupt_record_is_skipped_and_the_next_found() {
        let bytes = log(&[accepted(1), accepted(2), accepted(3)]);
        let one = encode(&accepted(1)).unwrap().len();
        for at in one..2 * one {
            for bit in [0x01u8, 0x80] {
                let mut bad = bytes.clone();
                bad[at] ^= bit;
                let ids: Vec<u64> = decoded(&bad)
                    .into_iter()
                    .map(|r| match r {
                        Ok(Record::Accepted(a)) => a.id,
                        other => panic!("{other:?}"),
                    })
                    .collect();
                assert_eq!(ids, [1, 3], "byte {at} bit {bit:#x}");
                let skipped = scan(&bad)
                    .into_iter()
                    .filter(|s| matches!(s, Scanned::Corrupt { .. }))
                    .count();
                assert_eq!(skipped, 1, "byte {at}");
            }
        }
        // Garbage that happens to hold the magic is not taken for a frame.
        let mut junk = b"CZKJ\xff\xff\xff\x7fgarbage CZKJ".to_vec();
        junk.extend(log(&[accepted(4)]));
        let scanned = scan(&junk);
        assert!(matches!(scanned[0], Scanned::Corrupt { offset: 0, .. }));
        assert!(matches!(scanned[1], Scanned::Frame { .. }));
        // Nothing but garbage.
        assert_eq!(
            scan(b"\0\0\0\0"),
            vec![Scanned::Truncated { offset: 0, len: 4 }]
        );
    }

    /// A frame that checks out but holds an out-of-range code is refused when decoded.
    #[test]
    fn out_of_range_codes_are_refused() {
        let mut a = match accepted(1) {
            Record::Accepted(a) => a,
            _ => unreachable!(),
        };
        a.priority = 9;
        let payload = postcard::to_allocvec(&Record::Accepted(a)).unwrap();
        assert_eq!(decode(&payload), Err(FormatError::Invalid("priority")));
        assert!(matches!(
            decode(b"\x63garbage"),
            Err(FormatError::Postcard(_))
        ));
        assert_eq!(
            frame(&vec![0; MAX_RECORD + 1]),
            Err(FormatError::TooLarge(MAX_RECORD + 1))
        );
    }

    #[test]
    fn outcomes_round_trip_to_job_results() {
        let failure = Failure::new(FailureKind::ResourceExhausted, "oom");
        let back = Outcome::of(&Err(failure.clone()))
            .result(ProofKind::PoRep)
            .unwrap();
        assert_eq!(back.unwrap_err(), failure);
        let orig = Arc::new(JobOutput {
            output: ProofOutput {
                kind: ProofKind::WindowPoSt,
                proof: vec![1, 2, 3],
                partitions: 2,
                timings: StageTimings {
                    param_load: Duration::from_micros(1),
                    synthesis: Duration::from_micros(2),
                    proving: Duration::from_micros(3),
                    verification: Duration::from_micros(4),
                },
                backend: "cpu".into(),
            },
            timings: JobTimings {
                queue_wait: Duration::from_micros(5),
                param_load: Duration::from_micros(1),
                synthesis: Duration::from_micros(2),
                proving: Duration::from_micros(3),
                verification: Duration::from_micros(4),
                total: Duration::from_micros(20),
            },
        });
        let outcome = Outcome::of(&Ok(orig.clone()));
        let back = outcome.result(ProofKind::WindowPoSt).unwrap().unwrap();
        assert_eq!(back.output.proof, orig.output.proof);
        assert_eq!(back.output.partitions, 2);
        assert_eq!(back.timings, orig.timings);
        assert_eq!(back.output.timings.proving, orig.output.timings.proving);
        for p in [
            Priority::Low,
            Priority::Normal,
            Priority::High,
            Priority::Critical,
        ] {
            assert_eq!(priority_of(priority_code(p)), Ok(p));
        }
        for k in ProofKind::ALL {
            assert_eq!(kind_of(kind_code(k)), Ok(k));
        }
        for f in FAILURES {
            assert_eq!(failure_of(failure_code(f)), Ok(f));
        }
    }

    /// A stored input's SHA-256 is the job's digest, and it reads back as the request.
    #[test]
    fn stored_inputs_are_named_by_the_digest_and_read_back() {
        let requests = [
            ProofRequest::PoRep(PoRepRequest {
                c1: b"{\"c1\": 1}".to_vec(),
                miner_id: 1000,
                sector_number: Some(7),
            }),
            ProofRequest::PoRep(PoRepRequest {
                c1: b"lotus wrapper".to_vec(),
                miner_id: 1,
                sector_number: None,
            }),
            ProofRequest::WindowPoSt {
                input: b"{}".to_vec(),
            },
            ProofRequest::SnapDeals { input: Vec::new() },
            ProofRequest::WinningPoSt {
                input: b"w".to_vec(),
            },
        ];
        for r in requests {
            let mut bytes = Vec::new();
            write_input(&r, |b| bytes.extend_from_slice(b));
            assert_eq!(bytes.len() as u64, input_len(&r));
            assert_eq!(sha256(&bytes), digest(&r));
            assert_eq!(decode_input(&bytes).unwrap(), r);
            // Every cut and a byte too many are refused, never a panic.
            for cut in 0..bytes.len() {
                assert!(decode_input(&bytes[..cut]).is_err(), "cut at {cut}");
            }
            bytes.push(0);
            assert!(decode_input(&bytes).is_err());
        }
        let mut huge = Vec::new();
        huge.extend_from_slice(&(5u64).to_le_bytes());
        huge.extend_from_slice(b"porep");
        huge.extend_from_slice(&u64::MAX.to_le_bytes());
        assert!(decode_input(&huge).is_err());
    }
}
