//! The wire protocol between `cuzkd` and its clients.
//!
//! Each frame is a big-endian `u32` payload length followed by one postcard-encoded message
//! ([`Request`] from the client, [`Response`] from the daemon). The first exchange is
//! [`Hello`] → [`Welcome`]; after that, one request at a time per connection, each answered by
//! exactly one response. `docs/protocol.md` is the specification.

mod client;
mod codec;
mod convert;
pub mod grpc;
pub mod h2raw;
mod messages;
mod registered;

pub use client::{read_response, Client, ClientError};
pub use codec::{
    decode_payload, encode_frame, encode_payload, FrameCodec, FrameError, LENGTH_PREFIX,
};
pub use messages::*;
pub use registered::{input_with_proof_name, Registered, RegisteredProofError};

/// The protocol version this build speaks.
pub const PROTOCOL_VERSION: u32 = 1;

/// The default maximum frame payload (64 MiB: a 32 GiB PoRep C1 output is about 50 MiB).
pub const DEFAULT_MAX_FRAME_SIZE: u32 = 64 << 20;
