//! Mapping between the engine's types and the wire protocol's.

use std::time::Duration;

use crate::engine::{
    self, bounded, DeadlineView, Failure, FailureKind, JobId, JobResult, JobSnapshot, SubmitError,
    MAX_MESSAGE,
};
use crate::proto::{self, ErrorCode, ErrorResponse, JobInfo, ProofResult, Response, Timings};

/// Saturating microseconds.
fn us(d: Duration) -> u64 {
    d.as_micros().min(u64::MAX as u128) as u64
}

/// Saturating u32.
fn u32_of(n: usize) -> u32 {
    n.min(u32::MAX as usize) as u32
}

pub fn priority_from_wire(p: proto::Priority) -> engine::Priority {
    match p {
        proto::Priority::Low => engine::Priority::Low,
        proto::Priority::Normal => engine::Priority::Normal,
        proto::Priority::High => engine::Priority::High,
        proto::Priority::Critical => engine::Priority::Critical,
    }
}

pub fn priority_to_wire(p: engine::Priority) -> proto::Priority {
    match p {
        engine::Priority::Low => proto::Priority::Low,
        engine::Priority::Normal => proto::Priority::Normal,
        engine::Priority::High => proto::Priority::High,
        engine::Priority::Critical => proto::Priority::Critical,
    }
}

pub fn state_to_wire(s: engine::JobState) -> proto::JobState {
    match s {
        engine::JobState::Queued => proto::JobState::Queued,
        engine::JobState::Running => proto::JobState::Running,
        engine::JobState::Succeeded => proto::JobState::Succeeded,
        engine::JobState::Failed => proto::JobState::Failed,
        engine::JobState::Cancelled => proto::JobState::Cancelled,
    }
}

pub fn job_info(s: &JobSnapshot) -> JobInfo {
    JobInfo {
        job_id: s.id,
        request_id: s.request_id.clone(),
        kind: s.kind.into(),
        priority: priority_to_wire(s.priority),
        state: state_to_wire(s.state),
        partitions_done: u32_of(s.progress.0),
        partitions_total: u32_of(s.progress.1),
        age_ms: s.age.as_millis().min(u64::MAX as u128) as u64,
        error: s.error.clone(),
    }
}

pub fn deadline_info(v: &DeadlineView) -> proto::DeadlineInfo {
    let ms = |d: Duration| d.as_millis().min(u64::MAX as u128) as u64;
    proto::DeadlineInfo {
        job_id: v.id,
        kind: v.kind.into(),
        priority: priority_to_wire(v.priority),
        state: state_to_wire(v.state),
        partitions_done: u32_of(v.progress.0),
        partitions_total: u32_of(v.progress.1),
        due_in_ms: ms(v.due_in),
        overdue_ms: ms(v.overdue),
        ends_in_ms: v.ends_in.map(ms),
    }
}

pub fn error(code: ErrorCode, message: impl Into<String>, job_id: Option<JobId>) -> Response {
    Response::Error(ErrorResponse {
        code,
        message: bounded(&message.into(), MAX_MESSAGE),
        job_id,
    })
}

pub fn failure(f: &Failure, job: JobId) -> Response {
    let code = match f.kind {
        FailureKind::InvalidInput => ErrorCode::InvalidInput,
        FailureKind::ProvingFailed => ErrorCode::ProvingFailed,
        FailureKind::Cancelled => ErrorCode::Cancelled,
        FailureKind::ShuttingDown => ErrorCode::ShuttingDown,
        FailureKind::Internal => ErrorCode::Internal,
        FailureKind::ResourceExhausted => ErrorCode::ResourceExhausted,
    };
    error(code, f.message.clone(), Some(job))
}

pub fn submit_error(e: &SubmitError) -> Response {
    let code = match e {
        SubmitError::QueueFull { .. } => ErrorCode::QueueFull,
        SubmitError::RequestIdConflict { .. } => ErrorCode::RequestIdConflict,
        SubmitError::ShuttingDown => ErrorCode::ShuttingDown,
        SubmitError::InvalidInput(_) => ErrorCode::InvalidInput,
        SubmitError::PriorityConflict { .. } => ErrorCode::PriorityConflict,
    };
    let job = match e {
        SubmitError::RequestIdConflict { job, .. } | SubmitError::PriorityConflict { job, .. } => {
            Some(*job)
        }
        _ => None,
    };
    error(code, e.to_string(), job)
}

pub fn result(job: JobId, r: &JobResult) -> Response {
    match r {
        Ok(out) => {
            let t = &out.timings;
            Response::Proof(ProofResult {
                job_id: job,
                kind: out.output.kind.into(),
                proof: out.output.proof.clone(),
                partitions: u32_of(out.output.partitions),
                backend: out.output.backend.clone(),
                timings: Timings {
                    queue_wait_us: us(t.queue_wait),
                    param_load_us: us(t.param_load),
                    synthesis_us: us(t.synthesis),
                    proving_us: us(t.proving),
                    verification_us: us(t.verification),
                    total_us: us(t.total),
                },
            })
        }
        Err(f) => failure(f, job),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::ProveError;
    use crate::prover::ProverError;

    /// A device out of memory reaches the client as its own, retryable code; other backend
    /// failures stay ProvingFailed.
    #[test]
    fn out_of_memory_has_its_own_code() {
        let code = |e: ProveError| match failure(&Failure::from_prove_error(&e), 1) {
            Response::Error(e) => e.code,
            other => panic!("{other:?}"),
        };
        let oom = std::io::Error::new(std::io::ErrorKind::OutOfMemory, "device");
        assert_eq!(
            code(ProveError::Backend(ProverError::OutOfMemory(Box::new(oom)))),
            ErrorCode::ResourceExhausted
        );
        let other = std::io::Error::other("launch failed");
        assert_eq!(
            code(ProveError::Backend(ProverError::Device(Box::new(other)))),
            ErrorCode::ProvingFailed
        );
    }
}
