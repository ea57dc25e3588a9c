//! HTTP/2 written byte by byte (RFC 9113 frames, HPACK literals) for the gRPC endpoint's
//! hostile clients: `cuzk bench hostile --grpc` and the tests send what no well-behaved
//! client library would (a length prefix claiming 256 MiB, a thousand streams, frames cut
//! short). [`get_status`] is the one honest call made the same way, so that the benchmark
//! needs no HTTP/2 client library.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

/// The client's connection preface.
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Frame types.
pub const DATA: u8 = 0x0;
/// HEADERS.
pub const HEADERS: u8 = 0x1;
/// RST_STREAM.
pub const RST_STREAM: u8 = 0x3;
/// SETTINGS.
pub const SETTINGS: u8 = 0x4;
/// PING.
pub const PING: u8 = 0x6;
/// GOAWAY.
pub const GOAWAY: u8 = 0x7;
/// WINDOW_UPDATE.
pub const WINDOW_UPDATE: u8 = 0x8;
/// Flag END_STREAM (DATA, HEADERS).
pub const END_STREAM: u8 = 0x1;
/// Flag ACK (SETTINGS, PING).
pub const ACK: u8 = 0x1;
/// Flag END_HEADERS.
pub const END_HEADERS: u8 = 0x4;
/// SETTINGS_MAX_CONCURRENT_STREAMS.
pub const MAX_CONCURRENT_STREAMS: u16 = 0x3;

/// The engine's GetStatus, whose request message is empty.
pub const GET_STATUS: &str = "/cuzk.v1.ProvingEngine/GetStatus";

/// What an exchange read back at most: the answers of interest are small, and a hostile
/// client's reader must not grow without bound either.
const MAX_READ_BACK: usize = 1 << 20;

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

/// `streams` calls of `path` (client stream ids 1, 3, …), each opened with a length prefix
/// claiming `claim` bytes and never sent further: what a peer does to make the server reserve
/// room for bytes that never come.
pub fn claiming_streams(path: &str, streams: u32, claim: u32) -> Vec<u8> {
    let prefix = message_prefix(claim);
    (0..streams)
        .flat_map(|j| call(2 * j + 1, path, &prefix, false))
        .collect()
}

/// `streams` calls of `path`, each sending a whole message of `len` bytes (in 16 KiB DATA
/// frames, within the initial flow-control windows) and never ending its stream: real bytes
/// the server holds while it waits for the end.
pub fn unended_messages(path: &str, streams: u32, len: u32) -> Vec<u8> {
    let mut data = message_prefix(len);
    data.resize(data.len() + len as usize, 0x0a);
    let mut bytes = Vec::new();
    for j in 0..streams {
        let id = 2 * j + 1;
        bytes.extend(frame(HEADERS, END_HEADERS, id, &header_block(path)));
        for piece in data.chunks(16 << 10) {
            bytes.extend(frame(DATA, 0, id, piece));
        }
    }
    bytes
}

/// One frame read back: type, flags, stream and payload.
pub type Frame = (u8, u8, u32, Vec<u8>);

/// The frames in `bytes`, up to the first incomplete one.
pub fn frames(bytes: &[u8]) -> Vec<Frame> {
    let mut out = Vec::new();
    let mut rest = bytes;
    while let Some((f, used)) = one_frame(rest) {
        out.push(f);
        rest = &rest[used..];
    }
    out
}

/// The first frame of `bytes` and its length, if it is whole.
fn one_frame(bytes: &[u8]) -> Option<(Frame, usize)> {
    let head = bytes.get(..9)?;
    let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
    let payload = bytes.get(9..9 + len)?;
    let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
    Some(((head[3], head[4], stream, payload.to_vec()), 9 + len))
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
        .find(|(ty, flags, _, _)| *ty == SETTINGS && flags & ACK == 0)?;
    payload.chunks_exact(6).find_map(|s| {
        (u16::from_be_bytes([s[0], s[1]]) == id)
            .then(|| u32::from_be_bytes([s[2], s[3], s[4], s[5]]))
    })
}

/// Reads what the server sends until it closes the connection or `timeout` passes: the
/// bytes (the first MiB of them), and when it closed (`None`: still open at the timeout).
pub fn read_until_closed(s: &mut UnixStream, timeout: Duration) -> (Vec<u8>, Option<Duration>) {
    let start = Instant::now();
    let mut out = Vec::new();
    let mut buf = [0u8; 16 << 10];
    loop {
        let left = timeout.saturating_sub(start.elapsed());
        if left.is_zero() || s.set_read_timeout(Some(left)).is_err() {
            return (out, None);
        }
        match s.read(&mut buf) {
            Ok(0) => return (out, Some(start.elapsed())),
            Ok(n) => {
                if out.len() < MAX_READ_BACK {
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
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            // A reset: closed.
            Err(_) => return (out, Some(start.elapsed())),
        }
    }
}

/// Why an honest [`get_status`] was not answered.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// Connecting, writing or reading failed.
    #[error("{0}: {1}")]
    Io(&'static str, std::io::Error),
    /// The server closed the connection first.
    #[error("the server closed the connection before answering")]
    Closed,
    /// The server sent GOAWAY or reset the stream.
    #[error("the server refused the call (frame type {0})")]
    Refused(u8),
    /// The call ended without an answer message (an error's trailers-only answer).
    #[error("the call ended without an answer message")]
    NoMessage,
    /// No end of the call within the timeout.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
}

/// One GetStatus on a new connection to `socket`, as an honest client makes it: served when
/// the answer's message arrives and the stream ends (an error is answered by trailers
/// alone). The server's SETTINGS are acknowledged.
pub fn get_status(socket: &Path, timeout: Duration) -> Result<(), CallError> {
    let start = Instant::now();
    let mut s = UnixStream::connect(socket).map_err(|e| CallError::Io("connect", e))?;
    let mut out = hello();
    out.extend(call(1, GET_STATUS, &message_prefix(0), true));
    s.write_all(&out).map_err(|e| CallError::Io("write", e))?;
    let (mut pending, mut message) = (Vec::new(), false);
    let mut buf = [0u8; 16 << 10];
    loop {
        let left = timeout.saturating_sub(start.elapsed());
        if left.is_zero() {
            return Err(CallError::Timeout(timeout));
        }
        s.set_read_timeout(Some(left))
            .map_err(|e| CallError::Io("set a read timeout", e))?;
        let n = match s.read(&mut buf) {
            Ok(0) => return Err(CallError::Closed),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(CallError::Timeout(timeout))
            }
            Err(e) => return Err(CallError::Io("read", e)),
        };
        if pending.len() + n > MAX_READ_BACK {
            return Err(CallError::Io(
                "read",
                std::io::Error::other("answer too long"),
            ));
        }
        pending.extend_from_slice(&buf[..n]);
        while let Some(((ty, flags, stream, payload), used)) = one_frame(&pending) {
            pending.drain(..used);
            match (ty, stream) {
                (SETTINGS, 0) if flags & ACK == 0 => s
                    .write_all(&frame(SETTINGS, ACK, 0, &[]))
                    .map_err(|e| CallError::Io("write", e))?,
                (GOAWAY, _) | (RST_STREAM, 1) => return Err(CallError::Refused(ty)),
                (DATA, 1) => message |= payload.len() >= 5,
                _ => {}
            }
            if stream == 1 && flags & END_STREAM != 0 && matches!(ty, DATA | HEADERS) {
                return if message {
                    Ok(())
                } else {
                    Err(CallError::NoMessage)
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_read_back_whole() {
        let mut bytes = frame(SETTINGS, 0, 0, &[0, 3, 0, 0, 0, 128]);
        bytes.extend(call(1, GET_STATUS, &message_prefix(7), false));
        bytes.extend_from_slice(&[0, 0, 9, 0]);
        let got = frames(&bytes);
        assert_eq!(got.len(), 3);
        assert_eq!((got[1].0, got[1].2), (HEADERS, 1));
        assert_eq!(got[2].3, message_prefix(7));
        assert_eq!(setting(&bytes, MAX_CONCURRENT_STREAMS), Some(128));
        let mut client = hello();
        client.extend(call(3, GET_STATUS, &[], true));
        assert_eq!(count_frames(&client), 3);
    }

    #[test]
    fn attack_builders_open_the_streams_they_say() {
        let claims = frames(&claiming_streams(GET_STATUS, 3, 256 << 20));
        let ids: Vec<u32> = claims.iter().map(|f| f.2).collect();
        assert_eq!(ids, [1, 1, 3, 3, 5, 5]);
        assert!(claims.iter().all(|f| f.1 & END_STREAM == 0));
        assert_eq!(claims[1].3, message_prefix(256 << 20));
        let sent = frames(&unended_messages(GET_STATUS, 2, 32 << 10));
        // Per stream: HEADERS, then 5 + 32 KiB of message in 16 KiB pieces (three frames).
        assert_eq!(sent.len(), 2 * 4);
        let data: usize = sent
            .iter()
            .filter(|f| f.0 == DATA && f.2 == 3)
            .map(|f| f.3.len())
            .sum();
        assert_eq!(data, 5 + (32 << 10));
        assert!(sent.iter().all(|f| f.1 & END_STREAM == 0));
    }
}
