//! The hex test vectors of docs/protocol.md, checked against the code in both directions:
//! each message encodes to exactly the documented frame, and each documented frame decodes
//! to the message. `PRINT_VECTORS=1 cargo test --release --test proto_vectors -- --nocapture`
//! prints the vectors the code produces.

use cuzk::proto::*;

/// A message of either direction.
#[derive(Debug, PartialEq)]
enum Message {
    Request(Request),
    Response(Response),
}

impl Message {
    fn frame(&self) -> Vec<u8> {
        match self {
            Message::Request(r) => encode_frame(r).unwrap(),
            Message::Response(r) => encode_frame(r).unwrap(),
        }
    }
    fn decode_like(&self, payload: &[u8]) -> Message {
        match self {
            Message::Request(_) => {
                Message::Request(decode_payload(payload).expect("decodes as a Request"))
            }
            Message::Response(_) => {
                Message::Response(decode_payload(payload).expect("decodes as a Response"))
            }
        }
    }
}

fn vectors() -> Vec<(&'static str, Message)> {
    use Message::{Request as Q, Response as A};
    let timings = Timings {
        queue_wait_us: 1_000,
        param_load_us: 0,
        synthesis_us: 300,
        proving_us: 200_000,
        verification_us: 5,
        total_us: 201_305,
    };
    vec![
        (
            "hello",
            Q(Request::Hello(Hello {
                protocol_version: 1,
                client_name: "curio".into(),
            })),
        ),
        (
            "welcome",
            A(Response::Welcome(Welcome {
                protocol_version: 1,
                server_version: "cuzkd 0.1.0".into(),
                backend: "cpu".into(),
                proof_kinds: ProofKind::ALL.to_vec(),
                max_frame_size: 64 << 20,
                max_queued: 64,
                workers: 1,
            })),
        ),
        (
            "submit-porep",
            Q(Request::Submit(Submit {
                request_id: None,
                priority: None,
                input: ProofInput::PoRep {
                    c1: b"{}".to_vec(),
                    miner_id: 1000,
                    sector_number: Some(7),
                },
            })),
        ),
        (
            "submit-winning",
            Q(Request::Submit(Submit {
                request_id: Some("w-1".into()),
                priority: Some(Priority::Critical),
                input: ProofInput::WinningPoSt {
                    input: b"{}".to_vec(),
                },
            })),
        ),
        (
            "prove-window",
            Q(Request::Prove(Submit {
                request_id: None,
                priority: Some(Priority::High),
                input: ProofInput::WindowPoSt {
                    input: b"[]".to_vec(),
                },
            })),
        ),
        (
            "await",
            Q(Request::Await(AwaitJob {
                job_id: 42,
                timeout_ms: Some(30_000),
            })),
        ),
        (
            "await-forever",
            Q(Request::Await(AwaitJob {
                job_id: 300,
                timeout_ms: None,
            })),
        ),
        ("cancel", Q(Request::Cancel(JobRef { job_id: 42 }))),
        (
            "status-all",
            Q(Request::Status(StatusQuery { job_id: None })),
        ),
        ("metrics", Q(Request::Metrics)),
        (
            "preload",
            Q(Request::Preload(ParamSpec {
                kind: ProofKind::PoRep,
                sector_size: 2048,
            })),
        ),
        (
            "evict",
            Q(Request::Evict(ParamSpec {
                kind: ProofKind::WinningPoSt,
                sector_size: 32 << 30,
            })),
        ),
        (
            "accepted",
            A(Response::Accepted(Accepted {
                job_id: 42,
                existing: false,
                state: JobState::Queued,
                priority: Priority::Normal,
            })),
        ),
        (
            "proof",
            A(Response::Proof(ProofResult {
                job_id: 42,
                kind: ProofKind::PoRep,
                proof: vec![0xaa, 0xbb, 0xcc],
                partitions: 1,
                backend: "cpu".into(),
                timings,
            })),
        ),
        (
            "pending",
            A(Response::Pending(JobInfo {
                job_id: 42,
                request_id: None,
                kind: ProofKind::SnapDeals,
                priority: Priority::Normal,
                state: JobState::Running,
                partitions_done: 3,
                partitions_total: 16,
                age_ms: 1_500,
                error: None,
            })),
        ),
        (
            "cancelled",
            A(Response::Cancelled(Cancelled {
                job_id: 42,
                was_running: true,
            })),
        ),
        (
            "status",
            A(Response::Status(StatusReport {
                server_version: "cuzkd 0.1.0".into(),
                backend: "cpu".into(),
                uptime_s: 60,
                queued: 0,
                running: 0,
                succeeded: 2,
                failed: 1,
                cancelled: 0,
                jobs: vec![],
                params_loaded: vec![ParamSpec {
                    kind: ProofKind::PoRep,
                    sector_size: 2048,
                }],
            })),
        ),
        (
            "metrics-text",
            A(Response::Metrics("cuzk_jobs_queued 0\n".into())),
        ),
        (
            "params",
            A(Response::Params(ParamsReport {
                loaded: vec![ParamSpec {
                    kind: ProofKind::PoRep,
                    sector_size: 2048,
                }],
                elapsed_ms: 12,
            })),
        ),
        (
            "error-queue-full",
            A(Response::Error(ErrorResponse {
                code: ErrorCode::QueueFull,
                message: "queue full".into(),
                job_id: None,
            })),
        ),
        (
            "error-cancelled",
            A(Response::Error(ErrorResponse {
                code: ErrorCode::Cancelled,
                message: "cancelled".into(),
                job_id: Some(42),
            })),
        ),
        ("residency", Q(Request::Residency)),
        ("pipeline", Q(Request::Pipeline)),
        ("devices", Q(Request::Devices)),
        (
            "devices-report",
            A(Response::Devices(DevicesReport {
                placement: "off".into(),
                devices: vec![DeviceReport {
                    name: "cpu".into(),
                    cpus: String::new(),
                    running: 0,
                    busy_ms: 5,
                    partitions_proved: 7,
                    params: Vec::new(),
                }],
            })),
        ),
        (
            "pipeline-report",
            A(Response::Pipeline(PipelineReport {
                synthesis_threads: 16,
                waiting: 3,
                synthesizing: 16,
                device_queued: 2,
                device_running: 1,
                budget_bytes: 1_000_000,
                reserved_bytes: 300,
                params_bytes: 0,
                device_busy_ms: 5,
                partitions_proved: 7,
            })),
        ),
        (
            "residency-report",
            A(Response::Residency(ResidencyReport {
                params: vec![ParamResidency {
                    spec: ParamSpec {
                        kind: ProofKind::WinningPoSt,
                        sector_size: 2048,
                    },
                    host_bytes: 1_000_000,
                    device_bytes: 300,
                }],
            })),
        ),
        (
            "error-resource-exhausted",
            A(Response::Error(ErrorResponse {
                code: ErrorCode::ResourceExhausted,
                message: "oom".into(),
                job_id: Some(7),
            })),
        ),
        (
            "jobs",
            Q(Request::Jobs(JobsQuery {
                after: Some(42),
                max: 100,
            })),
        ),
        (
            "jobs-page",
            A(Response::Jobs(JobsPage {
                jobs: vec![JobInfo {
                    job_id: 42,
                    request_id: None,
                    kind: ProofKind::SnapDeals,
                    priority: Priority::Normal,
                    state: JobState::Running,
                    partitions_done: 3,
                    partitions_total: 16,
                    age_ms: 1500,
                    error: None,
                }],
                more: 3,
            })),
        ),
        (
            "error-priority-conflict",
            A(Response::Error(ErrorResponse {
                code: ErrorCode::PriorityConflict,
                message: "priority".into(),
                job_id: Some(42),
            })),
        ),
        (
            "error-response-too-large",
            A(Response::Error(ErrorResponse {
                code: ErrorCode::ResponseTooLarge,
                message: "too large".into(),
                job_id: None,
            })),
        ),
        (
            "error-in-use",
            A(Response::Error(ErrorResponse {
                code: ErrorCode::InUse,
                message: "in use".into(),
                job_id: Some(7),
            })),
        ),
        (
            "error-admin-required",
            A(Response::Error(ErrorResponse {
                code: ErrorCode::AdminRequired,
                message: "admins only".into(),
                job_id: None,
            })),
        ),
        ("ping", Q(Request::Ping(Ping { nonce: 300 }))),
        ("pong", A(Response::Pong(Pong { nonce: 300 }))),
        ("info", Q(Request::Info)),
        (
            "preload-proof",
            Q(Request::PreloadProof(RegisteredProof::Seal(8))),
        ),
        (
            "evict-proof",
            Q(Request::EvictProof(RegisteredProof::PoSt(13))),
        ),
        (
            "info-report",
            A(Response::Info(InfoReport {
                backend_kind: BackendKind::Gpu,
                gpu_devices: 2,
                cpu_devices: 1,
                critical_reserve: 4,
                result_retention_ms: 600_000,
            })),
        ),
        ("watch", Q(Request::Watch(JobRef { job_id: 42 }))),
        ("health", Q(Request::Health)),
        (
            "submit-fd",
            Q(Request::SubmitFd(Submit {
                request_id: None,
                priority: None,
                input: ProofInput::WindowPoSt { input: vec![] },
            })),
        ),
        (
            "prove-fd",
            Q(Request::ProveFd(Submit {
                request_id: None,
                priority: None,
                input: ProofInput::PoRep {
                    c1: vec![],
                    miner_id: 1000,
                    sector_number: Some(7),
                },
            })),
        ),
        ("device-memory", Q(Request::DeviceMemory)),
        (
            "deadlines",
            Q(Request::Deadlines(DeadlinesQuery { max: 1000 })),
        ),
        (
            "deadlines-report",
            A(Response::Deadlines(DeadlinesReport {
                jobs: vec![
                    DeadlineInfo {
                        job_id: 7,
                        kind: ProofKind::WindowPoSt,
                        priority: Priority::High,
                        state: JobState::Running,
                        partitions_done: 1,
                        partitions_total: 2,
                        due_in_ms: 250_000,
                        overdue_ms: 0,
                        ends_in_ms: Some(182_000),
                    },
                    DeadlineInfo {
                        job_id: 9,
                        kind: ProofKind::WinningPoSt,
                        priority: Priority::Critical,
                        state: JobState::Queued,
                        partitions_done: 0,
                        partitions_total: 0,
                        due_in_ms: 0,
                        overdue_ms: 1_500,
                        ends_in_ms: None,
                    },
                ],
                more: 3,
            })),
        ),
        (
            "submit-within",
            Q(Request::SubmitWithin(SubmitWithin {
                submit: Submit {
                    request_id: None,
                    priority: None,
                    input: ProofInput::WindowPoSt {
                        input: b"{}".to_vec(),
                    },
                },
                finish_within_ms: 600_000,
            })),
        ),
        (
            "device-memory-report",
            A(Response::DeviceMemory(MemoryReport {
                devices: vec![DeviceMemoryReport {
                    name: "cuda:0".into(),
                    memory: Some(DeviceMemoryUse {
                        budget_bytes: 1 << 34,
                        used_bytes: 1 << 30,
                        peak_bytes: 3 << 30,
                    }),
                    plans: vec![MemoryPlan {
                        spec: ParamSpec {
                            kind: ProofKind::PoRep,
                            sector_size: 2048,
                        },
                        plan: "all resident".into(),
                        device_bytes: 300_000,
                        pinned_host_bytes: 0,
                    }],
                }],
            })),
        ),
        (
            "health-report",
            A(Response::Health(HealthReport {
                devices: vec![DeviceHealth {
                    name: "cpu".into(),
                    state: HealthState::Quarantined,
                    failures: 3,
                    consecutive_failures: 3,
                    quarantined_for_ms: 1500,
                    probe_in_ms: 298_500,
                    last_error: Some("boom".into()),
                }],
            })),
        ),
        (
            "progress-queued",
            A(Response::Progress(ProgressEvent {
                job_id: 42,
                stage: ProgressStage::Queued,
                partition: None,
                partitions_done: 0,
                partitions_total: 0,
                age_ms: 5,
                stage_ms: 0,
                dropped: 0,
            })),
        ),
        (
            "progress-device-done",
            A(Response::Progress(ProgressEvent {
                job_id: 42,
                stage: ProgressStage::DeviceDone,
                partition: Some(3),
                partitions_done: 4,
                partitions_total: 10,
                age_ms: 1500,
                stage_ms: 300,
                dropped: 2,
            })),
        ),
        (
            "capacity",
            Q(Request::Capacity(CapacityQuery {
                kind: ProofKind::PoRep,
                priority: Some(Priority::Normal),
            })),
        ),
        (
            "capacity-report",
            A(Response::Capacity(CapacityReport {
                priority: Priority::Normal,
                queued: vec![0, 3, 1, 0],
                running: vec![0, 1, 0, 0],
                workers: 1,
                queue_room: 52,
                budget_free_bytes: u64::MAX,
                estimated_start_ms: Some(300_000),
                estimated_proof_ms: Some(150_000),
                measured_jobs: 4,
            })),
        ),
        (
            "capacity-report-unmeasured",
            A(Response::Capacity(CapacityReport {
                priority: Priority::High,
                queued: vec![0, 0, 2, 0],
                running: vec![0, 0, 1, 0],
                workers: 1,
                queue_room: 0,
                budget_free_bytes: 1_000_000,
                estimated_start_ms: None,
                estimated_proof_ms: None,
                measured_jobs: 0,
            })),
        ),
        (
            "lookup",
            Q(Request::Lookup(LookupQuery {
                request_id: "s-7".into(),
            })),
        ),
        (
            "job",
            A(Response::Job(JobInfo {
                job_id: 42,
                request_id: Some("s-7".into()),
                kind: ProofKind::PoRep,
                priority: Priority::Normal,
                state: JobState::Queued,
                partitions_done: 0,
                partitions_total: 0,
                age_ms: 1500,
                error: None,
            })),
        ),
    ]
}

/// `<!-- vector: NAME -->` followed by a ```hex block: NAME → bytes.
fn documented() -> Vec<(String, Vec<u8>)> {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/protocol.md"))
        .expect("docs/protocol.md");
    let mut out = Vec::new();
    let mut lines = doc.lines();
    while let Some(line) = lines.next() {
        let Some(name) = line
            .trim()
            .strip_prefix("<!-- vector: ")
            .and_then(|r| r.strip_suffix(" -->"))
        else {
            continue;
        };
        let fence = lines
            .by_ref()
            .find(|l| !l.trim().is_empty())
            .unwrap_or_default();
        assert_eq!(
            fence.trim(),
            "```hex",
            "vector {name}: expected a ```hex block"
        );
        let hex_text: String = lines
            .by_ref()
            .take_while(|l| l.trim() != "```")
            .flat_map(|l| l.chars())
            .filter(|c| !c.is_whitespace())
            .collect();
        let bytes =
            hex::decode(&hex_text).unwrap_or_else(|e| panic!("vector {name}: bad hex: {e}"));
        out.push((name.to_string(), bytes));
    }
    out
}

/// Hex in groups: the 4-byte length, then 16 bytes per line.
fn pretty(frame: &[u8]) -> String {
    let mut s = hex::encode(&frame[..4]);
    for (i, chunk) in frame[4..].chunks(16).enumerate() {
        s.push(if i == 0 { ' ' } else { '\n' });
        if i > 0 {
            s.push_str("         ");
        }
        let bytes: Vec<String> = chunk.iter().map(|b| format!("{b:02x}")).collect();
        s.push_str(&bytes.join(" "));
    }
    s
}

#[test]
fn documented_vectors_match_the_code() {
    let code = vectors();
    if std::env::var_os("PRINT_VECTORS").is_some() {
        for (name, msg) in &code {
            println!(
                "<!-- vector: {name} -->\n```hex\n{}\n```\n",
                pretty(&msg.frame())
            );
        }
    }
    let doc = documented();
    for (name, msg) in &code {
        let (_, bytes) = doc
            .iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("vector {name} is not in docs/protocol.md"));
        assert_eq!(
            hex::encode(bytes),
            hex::encode(msg.frame()),
            "vector {name}: encoding differs"
        );
        let len = u32::from_be_bytes(bytes[..4].try_into().unwrap()) as usize;
        assert_eq!(len, bytes.len() - 4, "vector {name}: length prefix");
        assert_eq!(
            &msg.decode_like(&bytes[4..]),
            msg,
            "vector {name}: decoding differs"
        );
    }
    for (name, _) in &doc {
        assert!(
            code.iter().any(|(n, _)| n == name),
            "docs/protocol.md has vector {name} the test does not know"
        );
    }
    assert!(doc.len() >= 20);
}

/// Every error code and job state in the documented order (a reorder would break clients).
#[test]
fn enum_indices_are_stable() {
    let codes = [
        ErrorCode::MalformedFrame,
        ErrorCode::FrameTooLarge,
        ErrorCode::UnsupportedVersion,
        ErrorCode::HelloRequired,
        ErrorCode::UnknownJob,
        ErrorCode::QueueFull,
        ErrorCode::InvalidInput,
        ErrorCode::ProvingFailed,
        ErrorCode::Cancelled,
        ErrorCode::ShuttingDown,
        ErrorCode::RequestIdConflict,
        ErrorCode::PermissionDenied,
        ErrorCode::Busy,
        ErrorCode::ParamsUnavailable,
        ErrorCode::Internal,
        ErrorCode::JobFinished,
        ErrorCode::ResourceExhausted,
        ErrorCode::PriorityConflict,
        ErrorCode::ResponseTooLarge,
        ErrorCode::InUse,
        ErrorCode::AdminRequired,
    ];
    for (i, c) in codes.iter().enumerate() {
        assert_eq!(encode_payload(c).unwrap(), vec![i as u8], "{c:?}");
    }
    let stages = [
        ProgressStage::Queued,
        ProgressStage::Started,
        ProgressStage::ParamsLoading,
        ProgressStage::ParamsReady,
        ProgressStage::SynthesisStarted,
        ProgressStage::SynthesisDone,
        ProgressStage::DeviceStarted,
        ProgressStage::DeviceDone,
        ProgressStage::Verifying,
    ];
    for (i, s) in stages.iter().enumerate() {
        assert_eq!(encode_payload(s).unwrap(), vec![i as u8], "{s:?}");
    }
    let states = [
        JobState::Queued,
        JobState::Running,
        JobState::Succeeded,
        JobState::Failed,
        JobState::Cancelled,
    ];
    for (i, s) in states.iter().enumerate() {
        assert_eq!(encode_payload(s).unwrap(), vec![i as u8]);
    }
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/protocol.md")).unwrap();
    for (i, c) in codes.iter().enumerate() {
        assert!(
            doc.contains(&format!("| {i} | `{c:?}` |")),
            "error code {i} {c:?} is not in the table"
        );
    }
    for (i, s) in stages.iter().enumerate() {
        assert!(
            doc.contains(&format!("| {i} | `{s:?}` |")),
            "progress stage {i} {s:?} is not in the table"
        );
    }
}

#[test]
fn the_codec_refuses_oversized_frames_before_allocating() {
    use bytes::BytesMut;
    use tokio_util::codec::Decoder;
    let mut codec = FrameCodec::new(1 << 20);
    let mut buf = BytesMut::from(&((1u32 << 20) + 1).to_be_bytes()[..]);
    assert!(matches!(
        codec.decode(&mut buf),
        Err(FrameError::TooLarge { .. })
    ));
    let mut ok = BytesMut::from(&(1u32 << 20).to_be_bytes()[..]);
    assert!(
        codec.decode(&mut ok).unwrap().is_none(),
        "a frame at the limit waits for its bytes"
    );
}

/// The table of proof-type ids in docs/protocol.md is the code's: each family's name at each
/// id, "—" past the family's last id.
#[test]
fn registered_proof_table_matches_the_code() {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/protocol.md")).unwrap();
    let table = doc
        .split("<!-- registered-proofs -->")
        .nth(1)
        .expect("the registered-proofs table");
    let mut rows = 0;
    for id in 0..20u64 {
        let row = table
            .lines()
            .find(|l| l.starts_with(&format!("| {id} | ")))
            .unwrap_or_else(|| panic!("no row for id {id}"));
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        // "", id, seal, post, update, ""
        for (cell, proof) in cells[2..5].iter().zip([
            RegisteredProof::Seal(id),
            RegisteredProof::PoSt(id),
            RegisteredProof::Update(id),
        ]) {
            let documented = cell.split('`').nth(1).filter(|_| *cell != "—");
            let code = proof.resolve().ok().map(|r| r.name());
            assert_eq!(documented, code.as_deref(), "id {id}, {proof:?}");
        }
        rows += 1;
    }
    assert_eq!(rows, 20);
    assert!(RegisteredProof::Seal(20).resolve().is_err());
}

/// docs/integrating.md repeats protocol.md's table of proof-type ids for integrators: the
/// same rows (protocol.md's are checked against the code above).
#[test]
fn integrating_md_repeats_the_proof_type_table() {
    let table = |file: &str| {
        let doc = std::fs::read_to_string(format!("{}/docs/{file}", env!("CARGO_MANIFEST_DIR")))
            .unwrap_or_else(|e| panic!("docs/{file}: {e}"));
        let (_, rest) = doc
            .split_once("<!-- registered-proofs -->\n")
            .unwrap_or_else(|| panic!("no registered-proofs table in docs/{file}"));
        rest.split("\n\n").next().unwrap_or_default().to_string()
    };
    assert_eq!(table("integrating.md"), table("protocol.md"));
}
