//! Shared by the tests of the gRPC endpoint's hostile clients (`daemon_grpc_hostile`,
//! `fuzz`): HTTP/2 written byte by byte (RFC 9113 frames, HPACK literals), so that a test
//! can send what no well-behaved client library would (a length prefix claiming 256 MiB,
//! a thousand streams, frames cut short), and an honest client on the `h2` crate.
#![allow(dead_code)]

use std::io::Read;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

/// The client's connection preface.
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Frame types.
pub const DATA: u8 = 0x0;
pub const HEADERS: u8 = 0x1;
pub const RST_STREAM: u8 = 0x3;
pub const SETTINGS: u8 = 0x4;
pub const PING: u8 = 0x6;
pub const GOAWAY: u8 = 0x7;
pub const WINDOW_UPDATE: u8 = 0x8;
/// Flags.
pub const END_STREAM: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;
/// SETTINGS_MAX_CONCURRENT_STREAMS.
pub const MAX_CONCURRENT_STREAMS: u16 = 0x3;

/// The engine's GetStatus, whose request message is empty.
pub const GET_STATUS: &str = "/cuzk.v1.ProvingEngine/GetStatus";

/// One frame.
pub fn frame(ty: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut out = Vec::with_capacity(9 + payload.len());
    out.extend_from_slice(&len.to_be_bytes()[1..]);
    out.extend_from_slice(&[ty, flags]);
    out.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// A header block of literals without indexing (names and values under 127 bytes).
pub fn header_block(path: &str) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, value) in [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", path),
        (":authority", "localhost"),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
    ] {
        out.push(0x00);
        out.push(name.len() as u8);
        out.extend_from_slice(name.as_bytes());
        out.push(value.len() as u8);
        out.extend_from_slice(value.as_bytes());
    }
    out
}

/// A gRPC message's length prefix claiming `len` bytes.
pub fn message_prefix(len: u32) -> Vec<u8> {
    let mut out = vec![0];
    out.extend_from_slice(&len.to_be_bytes());
    out
}

/// The preface and an empty SETTINGS frame.
pub fn hello() -> Vec<u8> {
    let mut out = PREFACE.to_vec();
    out.extend(frame(SETTINGS, 0, 0, &[]));
    out
}

/// Stream `id`'s HEADERS for `path`, and a DATA frame with `data` (ending the stream where
/// `end`).
pub fn call(id: u32, path: &str, data: &[u8], end: bool) -> Vec<u8> {
    let mut out = frame(HEADERS, END_HEADERS, id, &header_block(path));
    out.extend(frame(DATA, if end { END_STREAM } else { 0 }, id, data));
    out
}

/// The frames in `bytes` (type, flags, stream, payload), up to the first incomplete one.
pub fn frames(bytes: &[u8]) -> Vec<(u8, u8, u32, Vec<u8>)> {
    let mut out = Vec::new();
    let mut rest = bytes;
    while rest.len() >= 9 {
        let len = u32::from_be_bytes([0, rest[0], rest[1], rest[2]]) as usize;
        if rest.len() < 9 + len {
            break;
        }
        let stream = u32::from_be_bytes([rest[5], rest[6], rest[7], rest[8]]) & 0x7fff_ffff;
        out.push((rest[3], rest[4], stream, rest[9..9 + len].to_vec()));
        rest = &rest[9 + len..];
    }
    out
}

/// How many whole frames `bytes` holds, from its start (a client's stream, preface included
/// where it starts with it).
pub fn count_frames(bytes: &[u8]) -> u64 {
    let body = bytes.strip_prefix(PREFACE).unwrap_or(bytes);
    frames(body).len() as u64
}

/// The value of setting `id` in the server's first SETTINGS frame, if it gave one.
pub fn setting(server_bytes: &[u8], id: u16) -> Option<u32> {
    let (_, _, _, payload) = frames(server_bytes)
        .into_iter()
        .find(|(ty, flags, _, _)| *ty == SETTINGS && flags & 1 == 0)?;
    payload.chunks_exact(6).find_map(|s| {
        (u16::from_be_bytes([s[0], s[1]]) == id)
            .then(|| u32::from_be_bytes([s[2], s[3], s[4], s[5]]))
    })
}

/// Reads what the server sends until it closes the connection or `timeout` passes: the
/// bytes, and when it closed (`None`: still open at the timeout).
pub fn read_until_closed(s: &mut UnixStream, timeout: Duration) -> (Vec<u8>, Option<Duration>) {
    let start = Instant::now();
    let mut out = Vec::new();
    let mut buf = [0u8; 16 << 10];
    loop {
        let left = timeout.saturating_sub(start.elapsed());
        if left.is_zero() {
            return (out, None);
        }
        s.set_read_timeout(Some(left)).expect("read timeout");
        match s.read(&mut buf) {
            Ok(0) => return (out, Some(start.elapsed())),
            Ok(n) => {
                if out.len() < 1 << 20 {
                    out.extend_from_slice(&buf[..n]);
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return (out, None)
            }
            // A reset: closed.
            Err(_) => return (out, Some(start.elapsed())),
        }
    }
}

/// The daemon's memory from /proc: (VmSize, VmRSS, VmHWM) in bytes.
pub fn memory(pid: u32) -> (u64, u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|kb| kb.parse::<u64>().ok())
            .map_or(0, |kb| kb << 10)
    };
    (field("VmSize:"), field("VmRSS:"), field("VmHWM:"))
}

/// One unary call of `path` with `message` (the message bytes, without the length prefix)
/// through the `h2` crate: the grpc-status (from the trailers, or the headers of a
/// trailers-only answer), or what failed.
pub async fn unary(socket: &Path, path: &str, message: Vec<u8>) -> Result<u32, String> {
    let io = tokio::net::UnixStream::connect(socket)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let (send, conn) = h2::client::handshake(io)
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    let driver = tokio::spawn(async move {
        let _ = conn.await;
    });
    let status = unary_on(send, path, message).await;
    driver.abort();
    status
}

/// [`unary`] on an open connection.
pub async fn unary_on(
    send: h2::client::SendRequest<bytes::Bytes>,
    path: &str,
    message: Vec<u8>,
) -> Result<u32, String> {
    let mut send = send.ready().await.map_err(|e| format!("ready: {e}"))?;
    let request = http::Request::post(format!("http://localhost{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .map_err(|e| e.to_string())?;
    let (response, mut stream) = send
        .send_request(request, false)
        .map_err(|e| format!("send: {e}"))?;
    let mut body = message_prefix(message.len() as u32);
    body.extend_from_slice(&message);
    stream
        .send_data(body.into(), true)
        .map_err(|e| format!("data: {e}"))?;
    let response = response.await.map_err(|e| format!("response: {e}"))?;
    let grpc_status = |h: &http::HeaderMap| {
        if let Some(m) = h.get("grpc-message") {
            eprintln!("grpc-message: {}", String::from_utf8_lossy(m.as_bytes()));
        }
        h.get("grpc-status")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u32>().ok())
    };
    if let Some(code) = grpc_status(response.headers()) {
        return Ok(code);
    }
    let mut body = response.into_body();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.map_err(|e| format!("body: {e}"))?;
        let _ = body.flow_control().release_capacity(chunk.len());
    }
    let trailers = body
        .trailers()
        .await
        .map_err(|e| format!("trailers: {e}"))?
        .ok_or("no trailers")?;
    grpc_status(&trailers).ok_or_else(|| "no grpc-status".into())
}
