//! The wire protocol against the real cuzkd: misbehaving clients get typed errors while a
//! well-behaved client on another connection keeps being served.

mod daemon_support;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cuzk::proto::{
    encode_frame, encode_payload, read_response, AwaitJob, ErrorCode, Hello, Ping, Pong,
    ProofInput, Request, Response, StatusQuery, Submit, PROTOCOL_VERSION,
};
use daemon_support::*;
use nix::sys::signal::Signal;

fn raw(socket: &Path) -> UnixStream {
    let s = UnixStream::connect(socket).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

fn hello_frame(version: u32) -> Vec<u8> {
    encode_frame(&Request::Hello(Hello {
        protocol_version: version,
        client_name: "raw".into(),
    }))
    .unwrap()
}

fn read(s: &mut UnixStream) -> Response {
    read_response(s, 64 << 20).expect("a response frame")
}

fn error_code(r: Response) -> ErrorCode {
    match r {
        Response::Error(e) => e.code,
        other => panic!("expected an error, got {other:?}"),
    }
}

fn status_frame() -> Vec<u8> {
    encode_frame(&Request::Status(StatusQuery { job_id: None })).unwrap()
}

fn frame_of(payload: &[u8]) -> Vec<u8> {
    let mut f = (payload.len() as u32).to_be_bytes().to_vec();
    f.extend_from_slice(payload);
    f
}

/// Reads until EOF (the daemon closed the connection).
fn assert_closed(s: &mut UnixStream) {
    let mut buf = [0u8; 16];
    match s.read(&mut buf) {
        Ok(0) => {}
        Ok(n) => panic!("expected the connection to be closed, read {n} bytes"),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(e) => panic!("expected EOF, got {e}"),
    }
}

#[test]
fn misbehaving_clients_get_typed_errors_and_others_keep_being_served() {
    let mut daemon = Daemon::start(&[("protocol.max_frame_size", "\"1MiB\"")]);
    let socket = daemon.env.socket.clone();

    // A well-behaved client polls Status throughout, on its own connection.
    let stop = Arc::new(AtomicBool::new(false));
    let served = Arc::new(AtomicUsize::new(0));
    let good = {
        let (stop, served, socket) = (stop.clone(), served.clone(), socket.clone());
        std::thread::spawn(move || {
            let mut c = cuzk::proto::Client::connect(&socket, "good").unwrap();
            while !stop.load(Ordering::SeqCst) {
                c.status(None).expect("the good client is always served");
                served.fetch_add(1, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };

    eventually(
        "the good client to be served",
        Duration::from_secs(10),
        || (served.load(Ordering::SeqCst) >= 3).then_some(()),
    );

    // An input over the daemon's frame limit is refused by the client before it is sent,
    // with both sizes, not as a broken pipe; the connection stays usable.
    let mut c = cuzk::proto::Client::connect(&socket, "big").unwrap();
    let big = Submit {
        request_id: None,
        priority: None,
        input: ProofInput::WinningPoSt {
            input: vec![b'x'; 2 << 20],
        },
    };
    let err = c.submit(big).unwrap_err();
    assert!(
        matches!(err, cuzk::proto::ClientError::TooLarge { max, .. } if max == 1 << 20),
        "{err}"
    );
    assert!(err.to_string().contains("max_frame_size"), "{err}");
    c.status(None).expect("still usable");

    // A request before Hello.
    let mut s = raw(&socket);
    s.write_all(&status_frame()).unwrap();
    assert_eq!(error_code(read(&mut s)), ErrorCode::HelloRequired);
    // A wrong protocol version, then the right one: the connection stays usable.
    s.write_all(&hello_frame(PROTOCOL_VERSION + 98)).unwrap();
    assert_eq!(error_code(read(&mut s)), ErrorCode::UnsupportedVersion);
    s.write_all(&hello_frame(PROTOCOL_VERSION)).unwrap();
    assert!(matches!(read(&mut s), Response::Welcome(_)));
    // A payload that is not a message (variant 200), an empty payload, a truncated message.
    for payload in [&[200u8, 1, 2][..], &[][..], &[1u8, 0][..]] {
        s.write_all(&frame_of(payload)).unwrap();
        assert_eq!(
            error_code(read(&mut s)),
            ErrorCode::MalformedFrame,
            "{payload:?}"
        );
    }
    // A valid message with trailing bytes inside its frame.
    let mut payload = encode_payload(&Request::Status(StatusQuery { job_id: None })).unwrap();
    payload.extend_from_slice(b"junk");
    s.write_all(&frame_of(&payload)).unwrap();
    assert_eq!(error_code(read(&mut s)), ErrorCode::MalformedFrame);
    // Still usable after all of that.
    s.write_all(&status_frame()).unwrap();
    assert!(matches!(read(&mut s), Response::Status(_)));
    // Unknown jobs.
    let await_unknown = encode_frame(&Request::Await(AwaitJob {
        job_id: 424242,
        timeout_ms: Some(10),
    }))
    .unwrap();
    s.write_all(&await_unknown).unwrap();
    assert_eq!(error_code(read(&mut s)), ErrorCode::UnknownJob);

    // An oversized length prefix: a typed error, then the connection is closed (the daemon
    // cannot find the next frame), and nothing is allocated for it.
    let mut big = raw(&socket);
    big.write_all(&hello_frame(PROTOCOL_VERSION)).unwrap();
    assert!(matches!(read(&mut big), Response::Welcome(_)));
    big.write_all(&u32::MAX.to_be_bytes()).unwrap();
    assert_eq!(error_code(read(&mut big)), ErrorCode::FrameTooLarge);
    assert_closed(&mut big);

    // Just over the configured limit (1 MiB).
    let mut over = raw(&socket);
    over.write_all(&((1u32 << 20) + 1).to_be_bytes()).unwrap();
    assert_eq!(error_code(read(&mut over)), ErrorCode::FrameTooLarge);
    assert_closed(&mut over);

    // Garbage right after a valid frame, in the same write: the frame is answered, then the
    // garbage gets a typed error.
    let mut g = raw(&socket);
    let mut bytes = hello_frame(PROTOCOL_VERSION);
    bytes.extend_from_slice(b"garbage that is no frame");
    g.write_all(&bytes).unwrap();
    assert!(matches!(read(&mut g), Response::Welcome(_)));
    assert_eq!(error_code(read(&mut g)), ErrorCode::FrameTooLarge); // "garb" as a length
    assert_closed(&mut g);
    // Garbage that happens to be a plausible length: a malformed frame, connection kept.
    let mut g2 = raw(&socket);
    let mut bytes = hello_frame(PROTOCOL_VERSION);
    bytes.extend_from_slice(&frame_of(b"\xff\xfe\xfd"));
    bytes.extend_from_slice(&status_frame());
    g2.write_all(&bytes).unwrap();
    assert!(matches!(read(&mut g2), Response::Welcome(_)));
    assert_eq!(error_code(read(&mut g2)), ErrorCode::MalformedFrame);
    assert!(matches!(read(&mut g2), Response::Status(_)));
    // A flood of malformed frames is answered frame by frame, but logged a few lines a
    // minute, not a line each (issue 16, defect 7).
    for _ in 0..200 {
        g2.write_all(&frame_of(b"\xff\xfe\xfd")).unwrap();
        assert_eq!(error_code(read(&mut g2)), ErrorCode::MalformedFrame);
    }
    let logged = daemon.env.stderr().matches("malformed frame").count();
    assert!(
        (1..=10).contains(&logged),
        "{logged} lines for 201 malformed frames"
    );

    // A client that connects and sends half a frame, then hangs up.
    let mut half = raw(&socket);
    half.write_all(&[0, 0, 0, 50, 1, 2]).unwrap();
    drop(half);

    let before = served.load(Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::SeqCst);
    good.join().expect("the good client never saw an error");
    assert!(
        served.load(Ordering::SeqCst) > before,
        "the good client kept being served"
    );
    daemon.signal(Signal::SIGTERM);
    assert!(daemon.wait_exit(Duration::from_secs(20)).success());
}

#[test]
fn refused_submissions_are_answered_each_and_logged_a_few_lines_a_minute() {
    let mut daemon = Daemon::start(&[("debug.check_input", "true")]);
    let mut c = daemon.client();
    // Submissions refused at once (input that is not JSON) are answered each, but logged a
    // few lines a minute: `cuzk bench hostile` found a line per refusal.
    for i in 0..100u8 {
        let err = c
            .submit(Submit {
                request_id: None,
                priority: None,
                input: ProofInput::WinningPoSt {
                    input: vec![b'{', i],
                },
            })
            .unwrap_err();
        assert_eq!(code(&err), ErrorCode::InvalidInput);
    }
    let logged = daemon.env.stderr().matches("submission refused").count();
    assert!(
        (1..=10).contains(&logged),
        "{logged} lines for 100 refused submissions"
    );

    daemon.signal(Signal::SIGTERM);
    assert!(daemon.wait_exit(Duration::from_secs(20)).success());
}

#[test]
fn invalid_input_is_a_typed_error_from_the_job() {
    let mut daemon = Daemon::start(&[]);
    let mut c = daemon.client();
    let err = c.prove(bogus_porep("x")).unwrap_err();
    assert_eq!(code(&err), ErrorCode::InvalidInput);
    let cuzk::proto::ClientError::Server(e) = err else {
        unreachable!()
    };
    assert!(e.job_id.is_some(), "the error names the job");
    // The connection is still usable, and the job is reported as failed.
    let status = c.status(e.job_id).unwrap();
    assert_eq!(status.jobs[0].state, cuzk::proto::JobState::Failed);
    assert!(status.jobs[0]
        .error
        .as_deref()
        .unwrap()
        .contains("invalid input"));
    assert_eq!(status.failed, 1);
    let err = c.cancel(e.job_id.unwrap()).unwrap_err();
    assert_eq!(code(&err), ErrorCode::JobFinished);
    daemon.signal(Signal::SIGTERM);
    assert!(daemon.wait_exit(Duration::from_secs(20)).success());
}

#[test]
fn connections_are_bounded() {
    // The uid limit as high as the global one, which is what this test is about.
    let mut daemon = Daemon::start(&[
        ("socket.max_connections", "2"),
        ("socket.max_connections_per_uid", "2"),
    ]);
    let a = daemon.client();
    let b = daemon.client();
    let err = cuzk::proto::Client::connect(&daemon.env.socket, "third")
        .err()
        .expect("refused");
    assert_eq!(code(&err), ErrorCode::Busy);
    drop(a);
    // A slot frees up once a connection closes.
    let mut c = eventually("a free slot", Duration::from_secs(5), || {
        cuzk::proto::Client::connect(&daemon.env.socket, "again").ok()
    });
    c.status(None).unwrap();
    drop(b);
    daemon.signal(Signal::SIGTERM);
    assert!(daemon.wait_exit(Duration::from_secs(20)).success());
}

/// A raw connection past Hello.
fn raw_hello(socket: &Path) -> UnixStream {
    let mut s = raw(socket);
    s.write_all(&hello_frame(PROTOCOL_VERSION)).unwrap();
    assert!(matches!(read(&mut s), Response::Welcome(_)));
    s
}

/// A raw connection past Hello, or `None` when the daemon refuses it (Busy).
fn try_raw_hello(socket: &Path) -> Option<UnixStream> {
    let mut s = raw(socket);
    s.write_all(&hello_frame(PROTOCOL_VERSION)).ok()?;
    matches!(read_response(&mut s, 64 << 20), Ok(Response::Welcome(_))).then_some(s)
}

fn await_frame(job_id: u64) -> Vec<u8> {
    encode_frame(&Request::Await(AwaitJob {
        job_id,
        timeout_ms: None,
    }))
    .unwrap()
}

/// The value of the sample `name` (no labels) in a Metrics text.
fn sample(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in:\n{text}"))
}

#[test]
fn connections_are_bounded_per_uid() {
    let mut daemon = Daemon::start(&[
        ("socket.max_connections", "4"),
        ("socket.max_connections_per_uid", "2"),
    ]);
    let socket = daemon.env.socket.clone();
    let mut a = daemon.client();
    let b = daemon.client();
    // Every test connection has the same uid: the third is refused with the global limit's
    // typed error while two of the four slots are free.
    let err = cuzk::proto::Client::connect(&socket, "third")
        .err()
        .expect("refused");
    assert_eq!(code(&err), ErrorCode::Busy);
    assert!(err.to_string().contains("uid"), "{err}");
    // The refused connection counts as open until the daemon has written its refusal.
    let metrics = eventually("two connections open", Duration::from_secs(5), || {
        let m = a.metrics().unwrap();
        (sample(&m, "cuzk_connections") == 2.0).then_some(m)
    });
    assert_eq!(sample(&metrics, "cuzk_connections_refused_total"), 1.0);
    assert!(
        daemon.env.stderr().contains("max_connections_per_uid"),
        "the refusal is logged: {}",
        daemon.env.stderr()
    );
    // A slot of the uid frees up once one of its connections closes.
    drop(a);
    let mut c = eventually("a free slot of the uid", Duration::from_secs(5), || {
        cuzk::proto::Client::connect(&socket, "again").ok()
    });
    c.status(None).unwrap();
    drop(b);
    daemon.signal(Signal::SIGTERM);
    assert!(daemon.wait_exit(Duration::from_secs(20)).success());
}

#[test]
fn an_idle_client_is_closed_after_the_idle_timeout() {
    let mut daemon = Daemon::start(&[
        ("protocol.idle_timeout", "\"500ms\""),
        ("debug.job_delay", "\"1500ms\""),
    ]);
    let socket = daemon.env.socket.clone();
    // Silent after Welcome: closed, without a frame.
    let mut idle = raw_hello(&socket);
    let start = Instant::now();
    assert_closed(&mut idle);
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_millis(400) && waited < Duration::from_secs(10),
        "closed after {waited:?}"
    );
    assert!(
        daemon
            .env
            .stderr()
            .contains("idle past protocol.idle_timeout"),
        "{}",
        daemon.env.stderr()
    );
    // A client that keeps sending requests is not idle, however long it stays.
    let mut busy = raw_hello(&socket);
    for _ in 0..10 {
        busy.write_all(&status_frame()).unwrap();
        assert!(matches!(read(&mut busy), Response::Status(_)));
        std::thread::sleep(Duration::from_millis(200));
    }
    // Nor is one whose request is being answered: this Prove waits three idle timeouts for
    // its job (the job delay), and the idle time counts again from its answer.
    let mut prove = daemon.client();
    let err = prove.prove(bogus_porep("idle")).unwrap_err();
    assert_eq!(code(&err), ErrorCode::InvalidInput, "{err}");
    prove
        .status(None)
        .expect("still open right after the answer");
    daemon.signal(Signal::SIGTERM);
    assert!(daemon.wait_exit(Duration::from_secs(20)).success());
}

#[test]
fn a_waiting_client_that_hangs_up_frees_its_slot() {
    let mut daemon = Daemon::start(&[
        ("socket.max_connections", "3"),
        ("socket.max_connections_per_uid", "3"),
        // Far longer than the test: a slot freed by the job's end would come too late.
        ("debug.job_delay", "\"120s\""),
    ]);
    let socket = daemon.env.socket.clone();
    let mut control = daemon.client();
    // One client Awaits a job without a timeout, another Proves; both hold their slots.
    let mut waiter = raw_hello(&socket);
    waiter
        .write_all(&encode_frame(&Request::Submit(bogus_porep("await"))).unwrap())
        .unwrap();
    let Response::Accepted(accepted) = read(&mut waiter) else {
        panic!("not accepted")
    };
    waiter.write_all(&await_frame(accepted.job_id)).unwrap();
    let mut prover = raw_hello(&socket);
    prover
        .write_all(&encode_frame(&Request::Prove(bogus_porep("prove"))).unwrap())
        .unwrap();
    eventually("both jobs", Duration::from_secs(10), || {
        (control.status(None).unwrap().jobs.len() == 2).then_some(())
    });
    let err = cuzk::proto::Client::connect(&socket, "full")
        .err()
        .expect("every slot taken");
    assert_eq!(code(&err), ErrorCode::Busy);

    // Both hang up: their slots free within seconds, not when the jobs end.
    drop((waiter, prover));
    let mut pipelined = eventually("a free slot", Duration::from_secs(10), || {
        try_raw_hello(&socket)
    });
    let mut half_closed = eventually("a second free slot", Duration::from_secs(10), || {
        try_raw_hello(&socket)
    });
    // The jobs run on: they belong to the queue, not to the connections.
    let jobs = control.status(None).unwrap().jobs;
    assert!(
        jobs.iter().all(|j| matches!(
            j.state,
            cuzk::proto::JobState::Queued | cuzk::proto::JobState::Running
        )),
        "{jobs:?}"
    );

    // The watch for a hang-up reads nothing: a request pipelined behind an Await is
    // answered after it, in order; and a client that shuts down its sending side after its
    // Await still gets the answer.
    let mut bytes = await_frame(jobs[0].job_id);
    bytes.extend_from_slice(&status_frame());
    pipelined.write_all(&bytes).unwrap();
    half_closed.write_all(&await_frame(jobs[1].job_id)).unwrap();
    half_closed.shutdown(std::net::Shutdown::Write).unwrap();
    // Long enough for the watch to look more than once.
    std::thread::sleep(Duration::from_millis(2500));
    for job in &jobs {
        control.cancel(job.job_id).expect("cancel");
    }
    assert_eq!(error_code(read(&mut pipelined)), ErrorCode::Cancelled);
    assert!(matches!(read(&mut pipelined), Response::Status(_)));
    assert_eq!(error_code(read(&mut half_closed)), ErrorCode::Cancelled);
    assert_closed(&mut half_closed);
    daemon.signal(Signal::SIGTERM);
    assert!(daemon.wait_exit(Duration::from_secs(20)).success());
}

#[test]
fn a_silent_client_is_closed_after_the_hello_timeout() {
    let mut daemon = Daemon::start(&[("protocol.hello_timeout", "\"300ms\"")]);
    let mut s = raw(&daemon.env.socket);
    assert_eq!(error_code(read(&mut s)), ErrorCode::HelloRequired);
    assert_closed(&mut s);
    daemon.signal(Signal::SIGTERM);
    assert!(daemon.wait_exit(Duration::from_secs(20)).success());
}

#[test]
fn metrics_are_prometheus_text() {
    let mut daemon = Daemon::start(&[]);
    let mut c = daemon.client();
    let _ = c.prove(bogus_porep("m"));
    let text = c.metrics().unwrap();
    for needle in [
        "# TYPE cuzk_jobs_queued gauge",
        "cuzk_jobs_queued 0",
        "cuzk_jobs_running 0",
        "cuzk_jobs_finished_total{kind=\"porep\",outcome=\"failed\"} 1",
        "cuzk_connections 1",
        "cuzk_info{version=",
        "# TYPE cuzk_params_device_bytes gauge",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let value = line.rsplit(' ').next().unwrap();
        assert!(value.parse::<f64>().is_ok(), "bad sample line {line:?}");
    }
    daemon.signal(Signal::SIGTERM);
    assert!(daemon.wait_exit(Duration::from_secs(20)).success());
}

#[test]
fn preload_and_evict_report_typed_errors() {
    let env = Env::new();
    let empty = env.dir.path().join("no-params");
    std::fs::create_dir_all(&empty).unwrap();
    let config = env
        .config()
        .set("params.dir", &format!("{:?}", empty.display().to_string()));
    let mut daemon = Daemon::start_with(env, config);
    let mut c = daemon.client();
    let spec = |kind, sector_size| cuzk::proto::ParamSpec { kind, sector_size };
    let err = c
        .preload(spec(cuzk::proto::ProofKind::PoRep, 2048))
        .unwrap_err();
    assert_eq!(code(&err), ErrorCode::ParamsUnavailable, "{err}");
    let err = c
        .preload(spec(cuzk::proto::ProofKind::PoRep, 12345))
        .unwrap_err();
    assert_eq!(code(&err), ErrorCode::InvalidInput, "{err}");
    let report = c
        .evict(spec(cuzk::proto::ProofKind::WinningPoSt, 2048))
        .unwrap();
    assert!(report.loaded.is_empty());
    // Residency (request 9, appended to version 1): nothing resident, on the host or the device.
    assert!(c.residency().expect("residency").params.is_empty());
    // Pipeline (request 10, appended after it): nothing in flight, nothing reserved.
    let p = c.pipeline().expect("pipeline");
    assert_eq!((p.waiting, p.synthesizing, p.device_queued), (0, 0, 0));
    assert_eq!((p.reserved_bytes, p.partitions_proved), (0, 0));
    assert!(p.synthesis_threads >= 1 && p.budget_bytes > 0);
    // Devices (request 11, appended after Pipeline): one idle CPU device, a placement line.
    let d = c.devices().expect("devices");
    assert_eq!(d.devices.len(), 1, "{d:?}");
    assert!(d.devices[0].name.starts_with("cpu") && d.devices[0].partitions_proved == 0);
    assert!(!d.placement.is_empty(), "{d:?}");
    c.status(None).expect("still usable");
    daemon.signal(Signal::SIGTERM);
    assert!(daemon.wait_exit(Duration::from_secs(20)).success());
}

fn ping_frame(nonce: u64) -> Vec<u8> {
    encode_frame(&Request::Ping(Ping { nonce })).unwrap()
}

/// Ping (request 13, appended to version 1): answered with its nonce before and after Hello,
/// pings written back to back are answered in order, no job is made, and pinging does not
/// stand in for Hello: the Hello timeout still closes a connection that only pings.
#[test]
fn ping_is_answered_before_and_after_hello_and_makes_no_job() {
    let mut daemon = Daemon::start(&[("protocol.hello_timeout", "\"1500ms\"")]);
    let socket = daemon.env.socket.clone();
    let mut s = raw(&socket);
    // Before Hello: a Pong, while any other request is still refused.
    s.write_all(&ping_frame(u64::MAX)).unwrap();
    assert_eq!(read(&mut s), Response::Pong(Pong { nonce: u64::MAX }));
    s.write_all(&status_frame()).unwrap();
    assert_eq!(error_code(read(&mut s)), ErrorCode::HelloRequired);
    s.write_all(&hello_frame(PROTOCOL_VERSION)).unwrap();
    assert!(matches!(read(&mut s), Response::Welcome(_)));
    // After Hello, three pings in one write: three Pongs, in order.
    let burst: Vec<u8> = [1u64, 2, 3].iter().flat_map(|&n| ping_frame(n)).collect();
    s.write_all(&burst).unwrap();
    for n in [1u64, 2, 3] {
        assert_eq!(read(&mut s), Response::Pong(Pong { nonce: n }));
    }
    // The library client's ping, and no job or counter moved.
    let mut c = daemon.client();
    assert_eq!(c.ping(42).unwrap().nonce, 42);
    let status = c.status(None).unwrap();
    assert!(status.jobs.is_empty(), "{status:?}");
    assert_eq!(
        (
            status.queued,
            status.running,
            status.succeeded,
            status.failed
        ),
        (0, 0, 0, 0)
    );

    // A connection that only pings is answered each time, then closed at the Hello timeout.
    let mut p = raw(&socket);
    let start = std::time::Instant::now();
    let mut pongs = 0;
    let closing = loop {
        // The daemon may already have answered the timeout and closed: its error frame
        // is still waiting to be read when the write fails.
        if p.write_all(&ping_frame(pongs)).is_err() {
            break read(&mut p);
        }
        match read(&mut p) {
            Response::Pong(Pong { nonce }) => {
                assert_eq!(nonce, pongs);
                pongs += 1;
                std::thread::sleep(Duration::from_millis(100));
            }
            other => break other,
        }
        assert!(start.elapsed() < Duration::from_secs(10), "never closed");
    };
    assert_eq!(error_code(closing), ErrorCode::HelloRequired);
    assert!(pongs >= 3, "{pongs} pongs before the timeout");
    assert!(
        start.elapsed() >= Duration::from_millis(1000),
        "{:?}",
        start.elapsed()
    );
    daemon.signal(Signal::SIGTERM);
    assert!(daemon.wait_exit(Duration::from_secs(20)).success());
}

/// Info (request 15, appended to version 1): the backend's kind and the queue's critical
/// reserve, from the configuration; the Welcome is the same as before it (an old client
/// still decodes it).
#[test]
fn info_reports_the_backend_kind_and_the_critical_reserve() {
    let mut daemon = Daemon::start(&[
        ("queue.max_queued", "10"),
        ("queue.critical_reserve", "3"),
        ("queue.result_retention", "\"90s\""),
    ]);
    let mut c = daemon.client();
    let info = c.info().unwrap();
    assert_eq!(info.backend_kind, cuzk::proto::BackendKind::Cpu, "{info:?}");
    assert_eq!((info.gpu_devices, info.cpu_devices), (0, 1), "{info:?}");
    assert_eq!(info.critical_reserve, 3);
    assert_eq!(info.result_retention_ms, 90_000);
    // Info agrees with Devices, and the Welcome kept its seven fields.
    assert_eq!(c.devices().unwrap().devices.len(), 1);
    assert_eq!(c.welcome().max_queued, 10);
    let mut s = raw(&daemon.env.socket);
    s.write_all(&hello_frame(PROTOCOL_VERSION)).unwrap();
    let mut prefix = [0u8; 4];
    s.read_exact(&mut prefix).unwrap();
    let mut payload = vec![0u8; u32::from_be_bytes(prefix) as usize];
    s.read_exact(&mut payload).unwrap();
    let welcome: Response = cuzk::proto::decode_payload(&payload).expect("no trailing bytes");
    assert!(matches!(welcome, Response::Welcome(_)));
    daemon.signal(Signal::SIGTERM);
    assert!(daemon.wait_exit(Duration::from_secs(20)).success());
}

/// Proof types by Filecoin's integer ids (appended to version 1): PreloadProof/EvictProof
/// load and drop the set the id's proof proves with; a JSON input's integer
/// `registered_proof` is read as the proof it names (the same answer as with the name);
/// ids of no proof, or of another kind, are invalid input.
#[test]
fn proof_types_are_accepted_by_filecoin_id() {
    use cuzk::proto::{ParamSpec, ProofKind, RegisteredProof};
    let mut daemon = Daemon::start(&[("debug.check_input", "true")]);
    let mut c = daemon.client();
    for (proof, kind) in [
        (RegisteredProof::Seal(5), ProofKind::PoRep),
        (RegisteredProof::PoSt(0), ProofKind::WinningPoSt),
        (RegisteredProof::PoSt(10), ProofKind::WindowPoSt),
        (RegisteredProof::Update(0), ProofKind::SnapDeals),
    ] {
        let spec = ParamSpec {
            kind,
            sector_size: 2048,
        };
        let loaded = c.preload_proof(proof).unwrap().loaded;
        assert!(loaded.contains(&spec), "{proof:?}: {loaded:?}");
        let left = c.evict_proof(proof).unwrap().loaded;
        assert!(!left.contains(&spec), "{proof:?}: {left:?}");
    }
    for unknown in [
        RegisteredProof::Seal(20),
        RegisteredProof::PoSt(15),
        RegisteredProof::Update(5),
    ] {
        let err = c.preload_proof(unknown).unwrap_err();
        assert_eq!(code(&err), ErrorCode::InvalidInput, "{unknown:?}: {err}");
    }

    // A WinningPoSt input without vanilla proofs, its proof type by name and by id: the
    // same refusal, about the proofs; by a WindowPoSt id, a refusal naming that proof.
    let winning = |proof: &str| {
        Submit {
        request_id: None,
        priority: None,
        input: ProofInput::WinningPoSt {
            input: format!(
                r#"{{"registered_proof": {proof}, "randomness": "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", "miner_id": 1000, "vanilla_proofs": []}}"#
            )
            .into_bytes(),
        },
    }
    };
    let by_name = c
        .submit(winning("\"StackedDrgWinning2KiBV1\""))
        .unwrap_err();
    let by_id = c.submit(winning("0")).unwrap_err();
    assert_eq!(code(&by_name), ErrorCode::InvalidInput, "{by_name}");
    assert_eq!(by_id.to_string(), by_name.to_string());
    let window = c.submit(winning("10")).unwrap_err();
    assert_eq!(code(&window), ErrorCode::InvalidInput);
    assert!(
        window.to_string().contains("StackedDrgWindow2KiBV1_2"),
        "{window}"
    );
    assert!(
        c.status(None).unwrap().jobs.is_empty(),
        "refused before queueing"
    );
    daemon.signal(Signal::SIGTERM);
    assert!(daemon.wait_exit(Duration::from_secs(20)).success());
}
