//! Inputs of real size through a real cuzkd: a 32 GiB WindowPoSt partition's vanilla proofs
//! (2,349 sectors, binary: about 58 MB) and a 32 GiB C1 output (about 50 MB), passed as
//! memfds (SubmitFd, SCM_RIGHTS) and in a frame, with the daemon's peak RSS while it reads
//! and checks them. The content is synthetic: every challenge and Merkle path of the real
//! shape, random values (`post::synthetic_vanilla`, `porep::synthetic::c1_json`). What is
//! asserted: the daemon reads the whole input, parses and checks it (it decodes into the
//! real number of sectors or partitions) and queues it (Accepted), and the job then ends
//! with a typed error, since there are no 32 GiB parameters here and the values are random;
//! the daemon stays up and answers.

mod daemon_support;

use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};

use cuzk::proofs::binary;
use cuzk::proto::{ErrorCode, ProofInput, Submit};
use daemon_support::{code, vm, Daemon};
use filecoin_proofs_api::RegisteredPoStProof;

/// The input in a sealed memfd, as a client passes it.
fn memfd(bytes: &[u8]) -> OwnedFd {
    let fd =
        nix::sys::memfd::memfd_create(c"cuzk-input", nix::sys::memfd::MemFdCreateFlag::MFD_CLOEXEC)
            .expect("memfd_create");
    let mut file = std::fs::File::from(fd);
    file.write_all(bytes).expect("write the memfd");
    OwnedFd::from(file)
}

fn mib(b: u64) -> f64 {
    b as f64 / f64::from(1 << 20)
}

/// How far the daemon's peak RSS may rise while it reads and checks an input, as a
/// multiple of the input's size: its read buffer, the copy the parser makes of the
/// vanilla proofs, and their decoded structures (docs/inputs.md has the measured figures).
const PEAK_PER_INPUT_BYTE: u64 = 4;

fn window_post_32g() -> Vec<u8> {
    let proof = RegisteredPoStProof::StackedDrgWindow32GiBV1_2;
    let vanilla = cuzk::proofs::post::synthetic_vanilla(proof, 2349, 7).expect("synthetic");
    let mut randomness = [9; 32];
    randomness[31] &= 0x3f;
    binary::encode(&binary::WindowPost {
        registered_proof: 13,
        miner_id: 1000,
        randomness,
        partition_index: Some(0),
        vanilla_proofs: vanilla,
    })
}

fn window_submit(input: Vec<u8>, tag: &str) -> Submit {
    Submit {
        request_id: Some(format!("large-{tag}")),
        priority: None,
        input: ProofInput::WindowPoSt { input },
    }
}

/// A job that was accepted ends with a typed error (no 32 GiB parameters, random values).
fn ends_with_a_typed_error(d: &Daemon, job: u64) -> ErrorCode {
    let mut c = d.client();
    let e = c
        .await_job(job, None)
        .expect_err("a synthetic 32 GiB input cannot be proved here");
    let code = code(&e);
    assert!(
        matches!(code, ErrorCode::ProvingFailed | ErrorCode::InvalidInput),
        "job {job}: {e}; stderr:\n{}",
        d.env.stderr()
    );
    eprintln!("job {job} ended: {e}");
    code
}

#[test]
fn a_32gib_window_post_partition_is_read_from_a_memfd_and_checked() {
    let input = window_post_32g();
    let len = input.len() as u64;
    eprintln!("2,349 sectors' vanilla proofs, binary: {:.1} MiB", mib(len));
    assert!((50 << 20..64 << 20).contains(&len), "{len} bytes");
    let fd = memfd(&input);
    drop(input);
    let d = Daemon::start(&[
        ("debug.check_input", "true"),
        ("protocol.input_memory", "\"64MiB\""),
    ]);
    let pid = d.child.id();
    let mut c = d.client();
    let before = vm(pid, "VmRSS");
    let empty = window_submit(Vec::new(), "window");
    let accepted = c.submit_fd(empty, fd.as_fd()).unwrap_or_else(|e| {
        panic!(
            "SubmitFd of the 32 GiB partition: {e}; stderr:\n{}",
            d.env.stderr()
        )
    });
    let peak = vm(pid, "VmHWM");
    eprintln!(
        "daemon RSS {:.1} MiB before; peak {:.1} MiB after reading and checking {:.1} MiB \
         ({:.2}x the input above the start)",
        mib(before),
        mib(peak),
        mib(len),
        (peak.saturating_sub(before)) as f64 / len as f64
    );
    assert!(
        peak.saturating_sub(before) <= PEAK_PER_INPUT_BYTE * len,
        "peak RSS rose by {:.1} MiB for a {:.1} MiB input",
        mib(peak - before),
        mib(len)
    );
    ends_with_a_typed_error(&d, accepted.job_id);
    // The binary input fits in an ordinary frame too (its base64 JSON would not: ~78 MB).
    let again = window_post_32g();
    let framed = c.submit(window_submit(again, "window-frame")).unwrap();
    ends_with_a_typed_error(&d, framed.job_id);
    assert!(c.ping(1).is_ok(), "the daemon still answers");
}

/// The C1 output as Curio sends it: lotus-bench's wrapper, the SealCommitPhase1Output JSON
/// in base64 (about 37 MiB of JSON at 32 GiB, about 50 MB wrapped).
#[test]
fn a_32gib_c1_output_is_read_from_a_memfd_and_checked() {
    use base64::Engine as _;
    let inner =
        cuzk::proofs::porep::synthetic::c1_json(32 << 30, 3, 1000, 1).expect("synthetic C1");
    eprintln!(
        "32 GiB C1 output: {:.1} MiB of JSON",
        mib(inner.len() as u64)
    );
    let c1 = format!(
        r#"{{"SectorNum":1,"Phase1Out":"{}","SectorSize":34359738368}}"#,
        base64::engine::general_purpose::STANDARD.encode(&inner)
    )
    .into_bytes();
    drop(inner);
    let len = c1.len() as u64;
    eprintln!(
        "wrapped as Curio sends it: {:.1} MiB ({len} bytes)",
        mib(len)
    );
    assert!((45 << 20..64 << 20).contains(&len), "{len} bytes");
    let fd = memfd(&c1);
    drop(c1);
    let d = Daemon::start(&[("debug.check_input", "true")]);
    let pid = d.child.id();
    let mut c = d.client();
    let before = vm(pid, "VmRSS");
    let submit = Submit {
        request_id: Some("large-c1".into()),
        priority: None,
        input: ProofInput::PoRep {
            c1: Vec::new(),
            miner_id: 1000,
            sector_number: Some(1),
        },
    };
    let accepted = c.submit_fd(submit, fd.as_fd()).unwrap_or_else(|e| {
        panic!(
            "SubmitFd of the 32 GiB C1: {e}; stderr:\n{}",
            d.env.stderr()
        )
    });
    let peak = vm(pid, "VmHWM");
    eprintln!(
        "daemon RSS {:.1} MiB before; peak {:.1} MiB after reading and checking the C1 \
         ({:.2}x its size above the start)",
        mib(before),
        mib(peak),
        (peak.saturating_sub(before)) as f64 / len as f64
    );
    assert!(peak.saturating_sub(before) <= PEAK_PER_INPUT_BYTE * len);
    ends_with_a_typed_error(&d, accepted.job_id);
}

/// A SubmitFd without a descriptor, with a payload as well, of something that is not a
/// file, or larger than `protocol.max_input_size` is refused as invalid input, and the
/// connection goes on.
#[test]
fn bad_passed_inputs_are_refused() {
    let d = Daemon::start(&[
        ("protocol.max_input_size", "\"1KiB\""),
        ("debug.check_input", "true"),
    ]);
    let mut c = d.client();
    let refused = |r: Result<cuzk::proto::Accepted, cuzk::proto::ClientError>| {
        let e = r.expect_err("refused");
        assert_eq!(code(&e), ErrorCode::InvalidInput, "{e}");
        e.to_string()
    };
    // No descriptor: an ordinary frame.
    let e = c.call(&cuzk::proto::Request::SubmitFd(window_submit(
        Vec::new(),
        "none",
    )));
    assert_eq!(code(&e.unwrap_err()), ErrorCode::InvalidInput);
    let small = memfd(b"0123456789");
    let why = refused(c.submit_fd(window_submit(vec![1], "payload"), small.as_fd()));
    assert!(why.contains("leave the payload empty"), "{why}");
    let big = memfd(&[0; 2048]);
    let why = refused(c.submit_fd(window_submit(Vec::new(), "big"), big.as_fd()));
    assert!(why.contains("max_input_size"), "{why}");
    let (sock, _other) = std::os::unix::net::UnixStream::pair().unwrap();
    let why = refused(c.submit_fd(window_submit(Vec::new(), "sock"), sock.as_fd()));
    assert!(why.contains("not a regular file"), "{why}");
    // A small file that is read, then refused by the input check.
    let why = refused(c.submit_fd(window_submit(Vec::new(), "junk"), small.as_fd()));
    assert!(why.contains("WindowPoSt input"), "{why}");
    assert!(c.ping(2).is_ok());
}
