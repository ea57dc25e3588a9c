//! A small blocking client, used by the `cuzk` command line and the tests.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use super::codec::{decode_payload, encode_frame, FrameError, LENGTH_PREFIX};
use super::messages::*;
use super::{DEFAULT_MAX_FRAME_SIZE, PROTOCOL_VERSION};

/// Why a client call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Connecting, reading or writing failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        source: std::io::Error,
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
    move |source| ClientError::Io { context, source }
}

/// A connection to `cuzkd`, past the Hello/Welcome exchange.
pub struct Client {
    stream: UnixStream,
    welcome: Welcome,
}

impl Client {
    /// Connects to the daemon at `socket` and says Hello as `client_name`.
    pub fn connect(socket: &Path, client_name: &str) -> Result<Self, ClientError> {
        let stream = UnixStream::connect(socket).map_err(io(format!(
            "cannot connect to cuzkd at {}",
            socket.display()
        )))?;
        let mut client = Client {
            stream,
            welcome: placeholder_welcome(),
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
        let frame = encode_frame(request)?;
        self.stream
            .write_all(&frame)
            .map_err(io("sending to cuzkd"))?;
        match self.read_response()? {
            Response::Error(e) => Err(ClientError::Server(e)),
            r => Ok(r),
        }
    }

    /// Reads one response frame.
    pub fn read_response(&mut self) -> Result<Response, ClientError> {
        read_response(
            &mut self.stream,
            self.welcome.max_frame_size.max(DEFAULT_MAX_FRAME_SIZE),
        )
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
}

/// Reads one response frame from `stream`, refusing a length over `max` before allocating.
pub fn read_response(stream: &mut impl Read, max: u32) -> Result<Response, ClientError> {
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
    Ok(decode_payload(&payload)?)
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
