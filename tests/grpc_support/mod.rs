//! Shared by the tests of the gRPC endpoint's hostile clients (`daemon_grpc_hostile`,
//! `fuzz`): HTTP/2 written byte by byte (`cuzk::proto::h2raw`, which `cuzk bench hostile
//! --grpc` uses too), the daemon's memory from /proc, and an honest client on the `h2`
//! crate that reads the grpc-status.
#![allow(dead_code)]

use std::path::Path;

pub use cuzk::proto::h2raw::*;

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
