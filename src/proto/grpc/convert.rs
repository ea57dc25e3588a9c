//! Curio's messages to this protocol's requests, and its answers back.
//!
//! What Curio sends: the C1 output as it keeps it (its base64 wrapper), the PoSt and
//! SnapDeals vanilla proofs raw (bincode, one `bytes` each), Filecoin's integer proof ids,
//! and proto3's zero for every field it leaves unset. Those become this protocol's inputs:
//! the C1 unchanged, the others as binary inputs (`proofs::binary`), so nothing is
//! base64-encoded on the way. Job ids are ours, in decimal.

use tonic::{Code, Status};

use super::pb;
use crate::proofs::binary;
use crate::proto::{
    Accepted, ErrorCode, ErrorResponse, ParamSpec, Priority, ProofInput, ProofKind, Response,
    Submit,
};

/// A `SubmitProofRequest` that names no proof cuzk can take.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GrpcInputError {
    /// `proof_kind` is unset or unknown.
    #[error("proof_kind {0} is not one of POREP_SEAL_COMMIT, SNAP_DEALS_UPDATE, WINDOW_POST_PARTITION, WINNING_POST")]
    Kind(i32),
    /// `priority` is unknown.
    #[error("priority {0} is not one of LOW, NORMAL, HIGH, CRITICAL (or unset)")]
    Priority(i32),
    /// A fixed-size field has another length.
    #[error("{field} must be 32 bytes, not {len}")]
    Length {
        /// The field.
        field: &'static str,
        /// Its length.
        len: usize,
    },
    /// A field the kind needs is empty, or one it does not use is set.
    #[error("{0}")]
    Shape(&'static str),
}

impl From<GrpcInputError> for Status {
    fn from(e: GrpcInputError) -> Self {
        Status::invalid_argument(e.to_string())
    }
}

fn bytes32(field: &'static str, v: &[u8]) -> Result<[u8; 32], GrpcInputError> {
    v.try_into().map_err(|_| GrpcInputError::Length {
        field,
        len: v.len(),
    })
}

fn priority(p: i32) -> Result<Option<Priority>, GrpcInputError> {
    use pb::Priority as P;
    Ok(match P::try_from(p) {
        Ok(P::Unspecified) => None,
        Ok(P::Low) => Some(Priority::Low),
        Ok(P::Normal) => Some(Priority::Normal),
        Ok(P::High) => Some(Priority::High),
        Ok(P::Critical) => Some(Priority::Critical),
        Err(_) => return Err(GrpcInputError::Priority(p)),
    })
}

/// The deadline a `SubmitProofRequest` names, in milliseconds from receipt (`None` for 0).
pub fn finish_within(r: &pb::SubmitProofRequest) -> Option<u64> {
    (r.finish_within_ms > 0).then_some(r.finish_within_ms)
}

/// The Submit a `SubmitProofRequest` asks for (its byte fields moved, not copied, where the
/// input keeps them as they are).
pub fn submit_from_pb(r: pb::SubmitProofRequest) -> Result<Submit, GrpcInputError> {
    use pb::ProofKind as K;
    let priority = priority(r.priority)?;
    let request_id = (!r.request_id.is_empty()).then_some(r.request_id);
    let post_only = |single: &[u8]| {
        if single.is_empty() {
            Ok(())
        } else {
            Err(GrpcInputError::Shape(
                "vanilla_proof is PoRep's; this kind's vanilla proofs go in vanilla_proofs",
            ))
        }
    };
    let input = match K::try_from(r.proof_kind) {
        Ok(K::PorepSealCommit) => {
            if r.vanilla_proof.is_empty() {
                return Err(GrpcInputError::Shape(
                    "a PoRep needs its C1 output in vanilla_proof",
                ));
            }
            // Curio always sends the sector number; the wrapper's is the same.
            ProofInput::PoRep {
                c1: r.vanilla_proof,
                miner_id: r.miner_id,
                sector_number: Some(r.sector_number),
            }
        }
        Ok(K::SnapDealsUpdate) => {
            post_only(&r.vanilla_proof)?;
            let snap = binary::Snap {
                registered_proof: r.registered_proof,
                comm_r_old: bytes32("comm_r_old", &r.comm_r_old)?,
                comm_r_new: bytes32("comm_r_new", &r.comm_r_new)?,
                comm_d_new: bytes32("comm_d_new", &r.comm_d_new)?,
                vanilla_proofs: r.vanilla_proofs,
            };
            ProofInput::SnapDeals {
                input: binary::encode(&snap),
            }
        }
        Ok(K::WindowPostPartition) => {
            post_only(&r.vanilla_proof)?;
            // proto3 cannot tell an unset partition_index from 0: Curio's client always
            // means one partition, and 0 is its first.
            let window = binary::WindowPost {
                registered_proof: r.registered_proof,
                miner_id: r.miner_id,
                randomness: bytes32("randomness", &r.randomness)?,
                partition_index: Some(u64::from(r.partition_index)),
                vanilla_proofs: r.vanilla_proofs,
            };
            ProofInput::WindowPoSt {
                input: binary::encode(&window),
            }
        }
        Ok(K::WinningPost) => {
            post_only(&r.vanilla_proof)?;
            let winning = binary::WinningPost {
                registered_proof: r.registered_proof,
                miner_id: r.miner_id,
                randomness: bytes32("randomness", &r.randomness)?,
                vanilla_proofs: r.vanilla_proofs,
            };
            ProofInput::WinningPoSt {
                input: binary::encode(&winning),
            }
        }
        Ok(K::Unspecified) | Err(_) => return Err(GrpcInputError::Kind(r.proof_kind)),
    };
    Ok(Submit {
        request_id,
        priority,
        input,
    })
}

/// Our job id of a job id Curio holds; `None` for one we never gave.
pub fn job_id(s: &str) -> Option<u64> {
    s.parse().ok()
}

/// The gRPC status of an error answer.
pub fn status_of(e: &ErrorResponse) -> Status {
    use ErrorCode as E;
    let code = match e.code {
        E::MalformedFrame | E::InvalidInput => Code::InvalidArgument,
        E::FrameTooLarge | E::QueueFull | E::Busy | E::ResourceExhausted | E::ResponseTooLarge => {
            Code::ResourceExhausted
        }
        E::UnsupportedVersion => Code::Unimplemented,
        E::UnknownJob => Code::NotFound,
        E::Cancelled => Code::Cancelled,
        E::ShuttingDown => Code::Unavailable,
        E::RequestIdConflict => Code::AlreadyExists,
        E::PermissionDenied | E::AdminRequired => Code::PermissionDenied,
        E::ParamsUnavailable | E::JobFinished | E::PriorityConflict | E::InUse => {
            Code::FailedPrecondition
        }
        E::ProvingFailed | E::HelloRequired | E::Internal => Code::Internal,
    };
    Status::new(code, format!("{:?}: {}", e.code, e.message))
}

fn unexpected(r: &Response) -> Status {
    Status::internal(format!("unexpected answer {r:?}"))
}

/// The Accepted of a Submit's answer, or its error as a status.
pub fn submit_answer(r: Response) -> Result<Accepted, Status> {
    match r {
        Response::Accepted(a) => Ok(a),
        Response::Error(e) => Err(status_of(&e)),
        other => Err(unexpected(&other)),
    }
}

/// Whether an error answer is a job's own result (it failed, was cancelled, or the daemon
/// stopped before proving it) rather than a refusal of the request.
fn is_job_result(e: &ErrorResponse) -> bool {
    use ErrorCode as E;
    e.job_id.is_some()
        && matches!(
            e.code,
            E::InvalidInput
                | E::ProvingFailed
                | E::Cancelled
                | E::ShuttingDown
                | E::Internal
                | E::ResourceExhausted
        )
}

/// The `AwaitProofResponse` of an Await's (or Prove's) answer about job `job`: a job's
/// result, failure included, is a response; a refusal (unknown job, a full queue, an
/// invalid input refused at submission) a status, as Curio's client reads them.
pub fn await_answer(job: &str, r: Response) -> Result<pb::AwaitProofResponse, Status> {
    use pb::await_proof_response::Status as S;
    let ms = |us: u64| us / 1000;
    let mut out = pb::AwaitProofResponse {
        job_id: job.to_string(),
        ..Default::default()
    };
    match r {
        Response::Proof(p) => {
            out.job_id = p.job_id.to_string();
            out.status = S::Completed.into();
            out.proof = p.proof;
            out.queue_wait_ms = ms(p.timings.queue_wait_us);
            out.srs_load_ms = ms(p.timings.param_load_us);
            out.synthesis_ms = ms(p.timings.synthesis_us);
            out.gpu_compute_ms = ms(p.timings.proving_us);
            out.total_ms = ms(p.timings.total_us);
        }
        Response::Pending(info) => {
            out.job_id = info.job_id.to_string();
            out.status = S::Timeout.into();
        }
        Response::Error(e) if is_job_result(&e) => {
            if let Some(id) = e.job_id {
                out.job_id = id.to_string();
            }
            out.status = if e.code == ErrorCode::Cancelled {
                S::Cancelled
            } else {
                S::Failed
            }
            .into();
            out.error_message = format!("{:?}: {}", e.code, e.message);
        }
        Response::Error(e) => return Err(status_of(&e)),
        other => return Err(unexpected(&other)),
    }
    Ok(out)
}

/// The `CancelProofResponse` of a Cancel's answer.
pub fn cancel_answer(r: Response) -> Result<pb::CancelProofResponse, Status> {
    match r {
        Response::Cancelled(c) => Ok(pb::CancelProofResponse {
            was_running: c.was_running,
        }),
        Response::Error(e) => Err(status_of(&e)),
        other => Err(unexpected(&other)),
    }
}

/// Curio's sizes in circuit ids, by sector size.
const SIZES: [(&str, u64); 5] = [
    ("2k", 2 << 10),
    ("8m", 8 << 20),
    ("512m", 512 << 20),
    ("32g", 32 << 30),
    ("64g", 64 << 30),
];

/// Curio's kinds in circuit ids.
const KINDS: [(&str, ProofKind); 4] = [
    ("porep", ProofKind::PoRep),
    ("snap", ProofKind::SnapDeals),
    ("wpost", ProofKind::WindowPoSt),
    ("winning", ProofKind::WinningPoSt),
];

/// Curio's name of a parameter set (`porep-32g`).
pub fn circuit_id(spec: &ParamSpec) -> String {
    let kind = KINDS.iter().find(|(_, k)| *k == spec.kind).map(|(n, _)| *n);
    let size = SIZES
        .iter()
        .find(|(_, s)| *s == spec.sector_size)
        .map(|(n, _)| *n);
    match (kind, size) {
        (Some(k), Some(s)) => format!("{k}-{s}"),
        _ => format!("{}-{}", spec.kind, spec.sector_size),
    }
}

/// The parameter set a Curio circuit id names.
pub fn circuit_spec(id: &str) -> Option<ParamSpec> {
    let (kind, size) = id.trim().split_once('-')?;
    let kind = KINDS.iter().find(|(n, _)| *n == kind)?.1;
    let sector_size = SIZES.iter().find(|(n, _)| *n == size)?.1;
    Some(ParamSpec { kind, sector_size })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{JobInfo, JobState, ProofResult, Timings};

    fn window(partition_index: u32) -> pb::SubmitProofRequest {
        pb::SubmitProofRequest {
            proof_kind: pb::ProofKind::WindowPostPartition.into(),
            registered_proof: 10,
            miner_id: 1000,
            randomness: vec![3; 32],
            partition_index,
            vanilla_proofs: vec![vec![1, 2], vec![3]],
            ..Default::default()
        }
    }

    #[test]
    fn a_deadline_is_read_and_zero_means_none() {
        let mut r = window(0);
        assert_eq!(finish_within(&r), None, "Curio's requests name none");
        r.finish_within_ms = 600_000;
        assert_eq!(finish_within(&r), Some(600_000));
    }

    /// proto3's 0 is partition 0, and the vanilla proofs travel raw.
    #[test]
    fn a_window_post_partition_becomes_a_binary_input() {
        let s = submit_from_pb(window(0)).unwrap();
        assert_eq!((s.request_id, s.priority), (None, None));
        let ProofInput::WindowPoSt { input } = s.input else {
            panic!("{:?}", s.input)
        };
        let parsed = binary::window(&input).unwrap();
        assert_eq!(parsed.partition_index, Some(0));
        assert_eq!(parsed.vanilla_proofs, vec![vec![1, 2], vec![3]]);
        let p3 = submit_from_pb(window(3)).unwrap();
        let ProofInput::WindowPoSt { input } = p3.input else {
            panic!()
        };
        assert_eq!(binary::window(&input).unwrap().partition_index, Some(3));
    }

    #[test]
    fn bad_requests_are_invalid_arguments() {
        let mut r = window(0);
        r.randomness = vec![0; 31];
        assert_eq!(
            submit_from_pb(r),
            Err(GrpcInputError::Length {
                field: "randomness",
                len: 31
            })
        );
        let mut r = window(0);
        r.proof_kind = 0;
        assert!(matches!(submit_from_pb(r), Err(GrpcInputError::Kind(0))));
        let mut r = window(0);
        r.priority = 9;
        assert!(matches!(
            submit_from_pb(r),
            Err(GrpcInputError::Priority(9))
        ));
        let porep = pb::SubmitProofRequest {
            proof_kind: pb::ProofKind::PorepSealCommit.into(),
            ..Default::default()
        };
        assert!(matches!(
            submit_from_pb(porep),
            Err(GrpcInputError::Shape(_))
        ));
        let status = Status::from(GrpcInputError::Kind(7));
        assert_eq!(status.code(), Code::InvalidArgument);
    }

    #[test]
    fn results_are_responses_and_refusals_statuses() {
        let proof = Response::Proof(ProofResult {
            job_id: 7,
            kind: ProofKind::WinningPoSt,
            proof: vec![1; 192],
            partitions: 1,
            backend: "cpu".into(),
            timings: Timings {
                total_us: 5_000,
                ..Default::default()
            },
        });
        let done = await_answer("7", proof).unwrap();
        assert_eq!(
            done.status,
            i32::from(pb::await_proof_response::Status::Completed)
        );
        assert_eq!((done.proof.len(), done.total_ms), (192, 5));
        let failed = Response::Error(ErrorResponse {
            code: ErrorCode::ProvingFailed,
            message: "did not verify".into(),
            job_id: Some(7),
        });
        let failed = await_answer("7", failed).unwrap();
        assert_eq!(
            failed.status,
            i32::from(pb::await_proof_response::Status::Failed)
        );
        assert!(failed.error_message.contains("did not verify"));
        let pending = Response::Pending(JobInfo {
            job_id: 7,
            request_id: None,
            kind: ProofKind::PoRep,
            priority: Priority::Normal,
            state: JobState::Running,
            partitions_done: 0,
            partitions_total: 1,
            age_ms: 1,
            error: None,
        });
        assert_eq!(
            await_answer("7", pending).unwrap().status,
            i32::from(pb::await_proof_response::Status::Timeout)
        );
        let full = Response::Error(ErrorResponse::new(ErrorCode::QueueFull, "full"));
        assert_eq!(
            await_answer("", full).unwrap_err().code(),
            Code::ResourceExhausted
        );
        let unknown = Response::Error(ErrorResponse {
            code: ErrorCode::UnknownJob,
            message: "unknown job 9".into(),
            job_id: Some(9),
        });
        assert_eq!(
            await_answer("9", unknown).unwrap_err().code(),
            Code::NotFound
        );
    }

    #[test]
    fn circuit_ids_are_curios() {
        let spec = ParamSpec {
            kind: ProofKind::WindowPoSt,
            sector_size: 32 << 30,
        };
        assert_eq!(circuit_id(&spec), "wpost-32g");
        assert_eq!(circuit_spec("wpost-32g"), Some(spec));
        assert_eq!(circuit_spec("porep-2k").map(|s| s.sector_size), Some(2048));
        assert_eq!(circuit_spec("porep-3g"), None);
        assert_eq!(circuit_spec("nothing"), None);
    }
}
