//! A small blocking client, used by the `cuzk` command line and the tests.

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::codec::{decode_payload, encode_frame, FrameError, LENGTH_PREFIX};
use super::messages::*;
use super::{DEFAULT_MAX_FRAME_SIZE, PROTOCOL_VERSION};

/// How long a client waits for an answer that should come at once (the Welcome, a Status,
/// a Submit's Accepted) before it gives up: long enough for a socket-activated daemon to
/// start, short enough that a daemon failing to start is reported instead of waited on.
pub const DEFAULT_ANSWER_TIMEOUT: Duration = Duration::from_secs(60);

/// Where a daemon's troubles are explained: said in every error that means "no daemon".
const WHERE_TO_LOOK: &str = "see `systemctl status cuzkd.socket cuzkd` and `journalctl -u cuzkd`";

/// Why a client call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Nothing accepts connections at the socket path.
    #[error("cannot connect to cuzkd at {}: {error}; is cuzkd.socket (or cuzkd) running? {WHERE_TO_LOOK}", socket.display())]
    Connect {
        /// The socket path.
        socket: PathBuf,
        /// The underlying error.
        error: std::io::Error,
    },
    /// The daemon accepted the connection but did not answer in time: typically a
    /// socket-activated daemon that keeps failing to start, so systemd holds the connection
    /// and nobody reads it.
    #[error("cuzkd at {} did not answer within {} s; it may be failing to start: {WHERE_TO_LOOK}", socket.display(), waited.as_secs_f64())]
    NoAnswer {
        /// The socket path.
        socket: PathBuf,
        /// How long the client waited.
        waited: Duration,
    },
    /// Connecting, reading or writing failed. (The I/O errors are fields, not `source`s: the
    /// message already says them, and a source would print them twice in an error chain.)
    #[error("{context}: {error}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        error: std::io::Error,
    },
    /// The daemon closed the connection without answering: it stopped, crashed, or (socket
    /// activated) failed to start, and systemd dropped the waiting connection.
    #[error("cuzkd at {} closed the connection without answering ({error}); it may have failed to start or be stopping: {WHERE_TO_LOOK}", socket.display())]
    Closed {
        /// The socket path.
        socket: PathBuf,
        /// The underlying error.
        error: std::io::Error,
    },
    /// The daemon sent something that is not a valid frame or message.
    #[error("bad response from the daemon: {0}")]
    Frame(#[from] FrameError),
    /// The daemon answered with a typed error.
    #[error("daemon error {0}")]
    Server(ErrorResponse),
    /// The daemon answered with a response of the wrong kind for the request.
    #[error("unexpected response from the daemon: {0}")]
    Unexpected(String),
    /// The request is larger than the daemon accepts (its `protocol.max_frame_size`, from
    /// Welcome): refused here rather than cut off by the daemon mid-write.
    #[error("the request is {len} bytes; cuzkd accepts at most {max} (protocol.max_frame_size)")]
    TooLarge {
        /// The request's payload bytes.
        len: usize,
        /// The daemon's limit.
        max: u32,
    },
}

impl ClientError {
    /// The daemon's error code, when the daemon answered with an error.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            ClientError::Server(e) => Some(e.code),
            _ => None,
        }
    }
}

fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> ClientError {
    let context = context.into();
    move |error| ClientError::Io { context, error }
}

/// A connection to `cuzkd`, past the Hello/Welcome exchange.
pub struct Client {
    stream: UnixStream,
    welcome: Welcome,
    socket: PathBuf,
    answer_timeout: Option<Duration>,
}

impl Client {
    /// Connects to the daemon at `socket` and says Hello as `client_name`, waiting at most
    /// [`DEFAULT_ANSWER_TIMEOUT`] for each answer that should come at once.
    pub fn connect(socket: &Path, client_name: &str) -> Result<Self, ClientError> {
        Self::connect_with(socket, client_name, Some(DEFAULT_ANSWER_TIMEOUT))
    }

    /// Like [`Client::connect`], waiting at most `answer_timeout` (`None`: forever) for the
    /// Welcome and for every answer that does not wait on a proof. An Await waits its own
    /// timeout on top; a Prove, or an Await without a timeout, waits as long as the proof
    /// takes (a daemon that dies meanwhile closes the connection).
    pub fn connect_with(
        socket: &Path,
        client_name: &str,
        answer_timeout: Option<Duration>,
    ) -> Result<Self, ClientError> {
        let stream = UnixStream::connect(socket).map_err(|error| ClientError::Connect {
            socket: socket.to_path_buf(),
            error,
        })?;
        let mut client = Client {
            stream,
            welcome: placeholder_welcome(),
            socket: socket.to_path_buf(),
            answer_timeout: answer_timeout.filter(|t| !t.is_zero()),
        };
        let hello = Request::Hello(Hello {
            protocol_version: PROTOCOL_VERSION,
            client_name: client_name.into(),
        });
        match client.call(&hello)? {
            Response::Welcome(w) => client.welcome = w,
            other => return Err(unexpected(&other)),
        }
        Ok(client)
    }

    /// What the daemon said in its Welcome.
    pub fn welcome(&self) -> &Welcome {
        &self.welcome
    }

    /// The underlying stream (for tests that need to misbehave).
    pub fn stream(&mut self) -> &mut UnixStream {
        &mut self.stream
    }

    /// Sends one request and reads its response; a [`Response::Error`] is returned as
    /// [`ClientError::Server`].
    pub fn call(&mut self, request: &Request) -> Result<Response, ClientError> {
        self.send(request)?;
        match self.read_response()? {
            Response::Error(e) => Err(ClientError::Server(e)),
            r => Ok(r),
        }
    }

    /// Writes one request, with the read timeout of its answer set.
    fn send(&mut self, request: &Request) -> Result<(), ClientError> {
        let frame = encode_frame(request)?;
        let len = frame.len() - LENGTH_PREFIX;
        let max = self.welcome.max_frame_size;
        if len > max as usize {
            return Err(ClientError::TooLarge { len, max });
        }
        let wait = self.wait_for(request);
        self.stream
            .set_read_timeout(wait)
            .map_err(io("setting the read timeout"))?;
        if let Err(e) = self.stream.write_all(&frame) {
            // A daemon that refuses a connection (busy, uid not allowed) answers and closes
            // before reading: its error frame is still waiting in the receive buffer.
            return match self.read_response() {
                Ok(Response::Error(refusal)) => Err(ClientError::Server(refusal)),
                _ => Err(self.closed_or(io("sending to cuzkd")(e))),
            };
        }
        Ok(())
    }

    /// Follows a job: calls `on_event` with each [`ProgressEvent`] the daemon pushes (its
    /// state first, then each step as it happens) and returns its proof once it has
    /// finished, or its error, as [`Client::await_job`] without a timeout does. The first
    /// frame comes within the answer timeout; after it, this waits as long as the job
    /// takes. A `Progress` frame that does not decode (a stage appended after this client
    /// was built) is skipped. A daemon that predates Watch answers
    /// [`ErrorCode::MalformedFrame`]: fall back to Await.
    pub fn watch(
        &mut self,
        job_id: u64,
        mut on_event: impl FnMut(&ProgressEvent),
    ) -> Result<ProofResult, ClientError> {
        self.send(&Request::Watch(JobRef { job_id }))?;
        let mut first = true;
        loop {
            let max = self.welcome.max_frame_size.max(DEFAULT_MAX_FRAME_SIZE);
            let payload = read_payload(&mut self.stream, max).map_err(|e| self.read_error(e));
            if first {
                first = false;
                self.stream
                    .set_read_timeout(None)
                    .map_err(io("setting the read timeout"))?;
            }
            let payload = payload?;
            match decode_payload::<Response>(&payload) {
                Ok(Response::Progress(event)) => on_event(&event),
                Ok(Response::Proof(p)) => return Ok(p),
                Ok(Response::Error(e)) => return Err(ClientError::Server(e)),
                Ok(other) => return Err(unexpected(&other)),
                Err(_) if payload.first() == Some(&PROGRESS_VARIANT) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// How long an answer to `request` may take: the answer timeout, plus an Await's own
    /// timeout; unbounded for a request that waits on a proof without one.
    fn wait_for(&self, request: &Request) -> Option<Duration> {
        let base = self.answer_timeout?;
        match request {
            Request::Prove(_) | Request::ProveFd(_) | Request::ProveWithin(_) => None,
            Request::Await(AwaitJob { timeout_ms, .. }) => {
                timeout_ms.map(|ms| base.saturating_add(Duration::from_millis(ms)))
            }
            _ => Some(base),
        }
    }

    /// Reads one response frame (with the read timeout the last [`Client::call`] set).
    pub fn read_response(&mut self) -> Result<Response, ClientError> {
        read_response(
            &mut self.stream,
            self.welcome.max_frame_size.max(DEFAULT_MAX_FRAME_SIZE),
        )
        .map_err(|e| self.read_error(e))
    }

    /// A read's error as the caller should see it: a timeout as [`ClientError::NoAnswer`],
    /// a hang-up as [`ClientError::Closed`].
    fn read_error(&self, e: ClientError) -> ClientError {
        let waited = self.stream.read_timeout().ok().flatten();
        match (e, waited) {
            (ClientError::Io { error, .. }, Some(waited)) if is_timeout(&error) => {
                ClientError::NoAnswer {
                    socket: self.socket.clone(),
                    waited,
                }
            }
            (e, _) => self.closed_or(e),
        }
    }

    /// `e`, or [`ClientError::Closed`] when it means the daemon hung up.
    fn closed_or(&self, e: ClientError) -> ClientError {
        use std::io::ErrorKind::{BrokenPipe, ConnectionReset, UnexpectedEof};
        match e {
            ClientError::Io { error, .. }
                if matches!(error.kind(), BrokenPipe | ConnectionReset | UnexpectedEof) =>
            {
                ClientError::Closed {
                    socket: self.socket.clone(),
                    error,
                }
            }
            e => e,
        }
    }

    /// Writes `request` (a SubmitFd or ProveFd) in one sendmsg that passes `fd` with its
    /// bytes (SCM_RIGHTS), as the daemon expects, with the read timeout of its answer set.
    fn send_with_fd(&mut self, request: &Request, fd: BorrowedFd<'_>) -> Result<(), ClientError> {
        use nix::sys::socket::{sendmsg, ControlMessage, MsgFlags};
        let frame = encode_frame(request)?;
        self.stream
            .set_read_timeout(self.wait_for(request))
            .map_err(io("setting the read timeout"))?;
        let fds = [fd.as_raw_fd()];
        let cmsg = [ControlMessage::ScmRights(&fds)];
        let sent = sendmsg::<()>(
            self.stream.as_raw_fd(),
            &[std::io::IoSlice::new(&frame)],
            &cmsg,
            MsgFlags::MSG_NOSIGNAL,
            None,
        )
        .map_err(|e| io("passing the input's descriptor to cuzkd")(e.into()))?;
        // The frame of a SubmitFd is small (its payload is in the file): a partial write is
        // rare, and its rest goes without the descriptor, which came with its first bytes.
        self.stream
            .write_all(&frame[sent..])
            .map_err(|e| self.closed_or(io("sending to cuzkd")(e)))
    }

    /// [`Client::submit`] of an input the daemon reads from `fd` (a memfd, or the input's
    /// file): `submit`'s payload must be empty. For inputs too large for a frame, and to
    /// keep the client from holding them in memory.
    pub fn submit_fd(
        &mut self,
        submit: Submit,
        fd: BorrowedFd<'_>,
    ) -> Result<Accepted, ClientError> {
        self.send_with_fd(&Request::SubmitFd(submit), fd)?;
        match self.read_response()? {
            Response::Accepted(a) => Ok(a),
            Response::Error(e) => Err(ClientError::Server(e)),
            other => Err(unexpected(&other)),
        }
    }

    /// [`Client::prove`] of an input the daemon reads from `fd`, as [`Client::submit_fd`].
    pub fn prove_fd(
        &mut self,
        submit: Submit,
        fd: BorrowedFd<'_>,
    ) -> Result<ProofResult, ClientError> {
        self.send_with_fd(&Request::ProveFd(submit), fd)?;
        match self.read_response()? {
            Response::Proof(p) => Ok(p),
            Response::Error(e) => Err(ClientError::Server(e)),
            other => Err(unexpected(&other)),
        }
    }

    /// Queues a proof.
    pub fn submit(&mut self, submit: Submit) -> Result<Accepted, ClientError> {
        match self.call(&Request::Submit(submit))? {
            Response::Accepted(a) => Ok(a),
            other => Err(unexpected(&other)),
        }
    }

    /// Waits for a job: `Ok(Ok(proof))` when done, `Ok(Err(info))` when `timeout` passed first.
    pub fn await_job(
        &mut self,
        job_id: u64,
        timeout: Option<Duration>,
    ) -> Result<Result<ProofResult, JobInfo>, ClientError> {
        let timeout_ms = timeout.map(|t| t.as_millis().min(u64::MAX as u128) as u64);
        match self.call(&Request::Await(AwaitJob { job_id, timeout_ms }))? {
            Response::Proof(p) => Ok(Ok(p)),
            Response::Pending(info) => Ok(Err(info)),
            other => Err(unexpected(&other)),
        }
    }

    /// Submits and waits on one round trip.
    pub fn prove(&mut self, submit: Submit) -> Result<ProofResult, ClientError> {
        match self.call(&Request::Prove(submit))? {
            Response::Proof(p) => Ok(p),
            other => Err(unexpected(&other)),
        }
    }

    /// Queues a proof needed within `within` (a Submit with a deadline: within its class it
    /// goes before the jobs due later). A daemon older than the request answers
    /// `MalformedFrame`: fall back to [`Client::submit`].
    pub fn submit_within(
        &mut self,
        submit: Submit,
        within: Duration,
    ) -> Result<Accepted, ClientError> {
        let finish_within_ms = within.as_millis().min(u128::from(u64::MAX)) as u64;
        let request = Request::SubmitWithin(SubmitWithin {
            submit,
            finish_within_ms,
        });
        match self.call(&request)? {
            Response::Accepted(a) => Ok(a),
            other => Err(unexpected(&other)),
        }
    }

    /// [`Client::prove`] of a proof needed within `within`, as [`Client::submit_within`].
    pub fn prove_within(
        &mut self,
        submit: Submit,
        within: Duration,
    ) -> Result<ProofResult, ClientError> {
        let finish_within_ms = within.as_millis().min(u128::from(u64::MAX)) as u64;
        let request = Request::ProveWithin(SubmitWithin {
            submit,
            finish_within_ms,
        });
        match self.call(&request)? {
            Response::Proof(p) => Ok(p),
            other => Err(unexpected(&other)),
        }
    }

    /// Cancels a job.
    pub fn cancel(&mut self, job_id: u64) -> Result<Cancelled, ClientError> {
        match self.call(&Request::Cancel(JobRef { job_id }))? {
            Response::Cancelled(c) => Ok(c),
            other => Err(unexpected(&other)),
        }
    }

    /// The daemon's status, or one job's.
    pub fn status(&mut self, job_id: Option<u64>) -> Result<StatusReport, ClientError> {
        match self.call(&Request::Status(StatusQuery { job_id }))? {
            Response::Status(s) => Ok(s),
            other => Err(unexpected(&other)),
        }
    }

    /// Prometheus metrics text.
    pub fn metrics(&mut self) -> Result<String, ClientError> {
        match self.call(&Request::Metrics)? {
            Response::Metrics(m) => Ok(m),
            other => Err(unexpected(&other)),
        }
    }

    /// Loads a parameter set.
    pub fn preload(&mut self, spec: ParamSpec) -> Result<ParamsReport, ClientError> {
        match self.call(&Request::Preload(spec))? {
            Response::Params(p) => Ok(p),
            other => Err(unexpected(&other)),
        }
    }

    /// Drops a parameter set from memory.
    pub fn evict(&mut self, spec: ParamSpec) -> Result<ParamsReport, ClientError> {
        match self.call(&Request::Evict(spec))? {
            Response::Params(p) => Ok(p),
            other => Err(unexpected(&other)),
        }
    }

    /// Loads the parameter set of a proof named by Filecoin's integer id. A daemon that
    /// predates this request answers `MalformedFrame`, as for any unknown request.
    pub fn preload_proof(&mut self, proof: RegisteredProof) -> Result<ParamsReport, ClientError> {
        match self.call(&Request::PreloadProof(proof))? {
            Response::Params(p) => Ok(p),
            other => Err(unexpected(&other)),
        }
    }

    /// Drops the parameter set of a proof named by Filecoin's integer id. A daemon that
    /// predates this request answers `MalformedFrame`, as for any unknown request.
    pub fn evict_proof(&mut self, proof: RegisteredProof) -> Result<ParamsReport, ClientError> {
        match self.call(&Request::EvictProof(proof))? {
            Response::Params(p) => Ok(p),
            other => Err(unexpected(&other)),
        }
    }

    /// What the proving stages hold. A daemon that predates this request answers
    /// `MalformedFrame`, as for any unknown request.
    pub fn pipeline(&mut self) -> Result<PipelineReport, ClientError> {
        match self.call(&Request::Pipeline)? {
            Response::Pipeline(r) => Ok(r),
            other => Err(unexpected(&other)),
        }
    }

    /// The known jobs with an id above `after`, at most `max` (0: as many as fit in a
    /// frame), and how many more there are. A daemon that predates this request answers
    /// `MalformedFrame`, as for any unknown request.
    pub fn jobs(&mut self, after: Option<u64>, max: u32) -> Result<JobsPage, ClientError> {
        match self.call(&Request::Jobs(JobsQuery { after, max }))? {
            Response::Jobs(r) => Ok(r),
            other => Err(unexpected(&other)),
        }
    }

    /// Sends a Ping and waits for its Pong: the round trip to the daemon's event loop. A
    /// daemon that predates this request answers `MalformedFrame`, as for any unknown
    /// request.
    pub fn ping(&mut self, nonce: u64) -> Result<Pong, ClientError> {
        match self.call(&Request::Ping(Ping { nonce }))? {
            Response::Pong(p) if p.nonce == nonce => Ok(p),
            other => Err(unexpected(&other)),
        }
    }

    /// The newest job the daemon knows under `request_id` (queued, running, or finished
    /// within its retention), so that a client that lost the job id (a restart) can Await
    /// it without sending the input again. An unknown id is [`ErrorCode::UnknownJob`]; a
    /// daemon that predates this request answers `MalformedFrame`.
    pub fn lookup(&mut self, request_id: &str) -> Result<JobInfo, ClientError> {
        let query = LookupQuery {
            request_id: request_id.into(),
        };
        match self.call(&Request::Lookup(query))? {
            Response::Job(j) => Ok(j),
            other => Err(unexpected(&other)),
        }
    }

    /// What the daemon proves on and how its queue is shared. A daemon that predates this
    /// request answers `MalformedFrame`, as for any unknown request.
    pub fn info(&mut self) -> Result<InfoReport, ClientError> {
        match self.call(&Request::Info)? {
            Response::Info(r) => Ok(r),
            other => Err(unexpected(&other)),
        }
    }

    /// Whether the daemon can take a job of `kind` at `priority` (`None`: the kind's
    /// default): the queue per class, the room left, the memory budget left and the
    /// estimated start. A daemon that predates this request answers `MalformedFrame`, as
    /// for any unknown request.
    pub fn capacity(
        &mut self,
        kind: ProofKind,
        priority: Option<Priority>,
    ) -> Result<CapacityReport, ClientError> {
        match self.call(&Request::Capacity(CapacityQuery { kind, priority }))? {
            Response::Capacity(r) => Ok(r),
            other => Err(unexpected(&other)),
        }
    }

    /// The proving devices' health: failures and quarantine. A daemon that predates this
    /// request answers `MalformedFrame`, as for any unknown request.
    pub fn health(&mut self) -> Result<HealthReport, ClientError> {
        match self.call(&Request::Health)? {
            Response::Health(r) => Ok(r),
            other => Err(unexpected(&other)),
        }
    }

    /// Each proving device's memory and the plan each resident set's proofs follow on it. A
    /// daemon that predates this request answers `MalformedFrame`, as for any unknown
    /// request.
    pub fn device_memory(&mut self) -> Result<MemoryReport, ClientError> {
        match self.call(&Request::DeviceMemory)? {
            Response::DeviceMemory(r) => Ok(r),
            other => Err(unexpected(&other)),
        }
    }

    /// The queued and running jobs with a deadline that this client sees, earliest due
    /// first, at most `max` (0: the daemon's bound, [`super::MAX_DEADLINES`]), with the time
    /// left to each deadline and each job's projected end. A daemon that predates this
    /// request answers `MalformedFrame`, as for any unknown request.
    pub fn deadlines(&mut self, max: u32) -> Result<DeadlinesReport, ClientError> {
        match self.call(&Request::Deadlines(DeadlinesQuery { max }))? {
            Response::Deadlines(r) => Ok(r),
            other => Err(unexpected(&other)),
        }
    }

    /// The proving devices: placement, work and resident sets. A daemon that predates this
    /// request answers `MalformedFrame`, as for any unknown request.
    pub fn devices(&mut self) -> Result<DevicesReport, ClientError> {
        match self.call(&Request::Devices)? {
            Response::Devices(r) => Ok(r),
            other => Err(unexpected(&other)),
        }
    }

    /// Where the resident parameter sets are held (host and device bytes). A daemon that
    /// predates this request answers `MalformedFrame`, as for any unknown request.
    pub fn residency(&mut self) -> Result<ResidencyReport, ClientError> {
        match self.call(&Request::Residency)? {
            Response::Residency(r) => Ok(r),
            other => Err(unexpected(&other)),
        }
    }
}

/// The first byte of a [`Response::Progress`] payload (its variant index, 16).
const PROGRESS_VARIANT: u8 = 16;

/// Reads one response frame from `stream`, refusing a length over `max` before allocating.
pub fn read_response(stream: &mut impl Read, max: u32) -> Result<Response, ClientError> {
    Ok(decode_payload(&read_payload(stream, max)?)?)
}

/// Reads one frame's payload from `stream`, refusing a length over `max` before allocating.
fn read_payload(stream: &mut impl Read, max: u32) -> Result<Vec<u8>, ClientError> {
    let mut prefix = [0u8; LENGTH_PREFIX];
    stream
        .read_exact(&mut prefix)
        .map_err(io("reading from cuzkd"))?;
    let len = u32::from_be_bytes(prefix);
    if len > max {
        return Err(FrameError::TooLarge { len, max }.into());
    }
    let mut payload = vec![0u8; len as usize];
    stream
        .read_exact(&mut payload)
        .map_err(io("reading from cuzkd"))?;
    Ok(payload)
}

/// A read that ran into its timeout: `EAGAIN` on Linux, `TimedOut` elsewhere.
fn is_timeout(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
}

fn unexpected(r: &Response) -> ClientError {
    let name = format!("{r:?}");
    ClientError::Unexpected(name.chars().take(80).collect())
}

fn placeholder_welcome() -> Welcome {
    Welcome {
        protocol_version: PROTOCOL_VERSION,
        server_version: String::new(),
        backend: String::new(),
        proof_kinds: Vec::new(),
        max_frame_size: DEFAULT_MAX_FRAME_SIZE,
        max_queued: 0,
        workers: 0,
    }
}
