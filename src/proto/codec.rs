//! Framing: a big-endian u32 payload length, then the payload (one postcard message).

use bytes::{Buf, BufMut, BytesMut};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio_util::codec::{Decoder, Encoder};

/// Bytes of the length prefix.
pub const LENGTH_PREFIX: usize = 4;

/// A framing or encoding failure.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The length prefix announces more than the limit. Nothing was allocated for it.
    #[error("frame of {len} bytes exceeds the limit of {max} bytes")]
    TooLarge {
        /// The announced payload length.
        len: u32,
        /// The limit.
        max: u32,
    },
    /// The payload is not a valid message.
    #[error("malformed message: {0}")]
    Malformed(String),
    /// The socket failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Most bytes reserved ahead of a frame's arrival at a time.
const RESERVE_STEP: usize = 64 << 10;

/// Splits a byte stream into frame payloads, refusing any announced length over `max`
/// before reserving memory for it, and reserving only as the payload arrives.
#[derive(Clone, Debug)]
pub struct FrameCodec {
    max: u32,
}

impl FrameCodec {
    /// A codec accepting and producing payloads of at most `max` bytes.
    pub fn new(max: u32) -> Self {
        Self { max }
    }
}

impl Decoder for FrameCodec {
    type Item = BytesMut;
    type Error = FrameError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<BytesMut>, FrameError> {
        let Some(prefix) = src.get(..LENGTH_PREFIX) else {
            return Ok(None);
        };
        let mut len_bytes = [0u8; LENGTH_PREFIX];
        len_bytes.copy_from_slice(prefix);
        let len = u32::from_be_bytes(len_bytes);
        if len > self.max {
            return Err(FrameError::TooLarge { len, max: self.max });
        }
        let total = LENGTH_PREFIX + len as usize;
        if src.len() < total {
            // Room for the next piece only: memory follows the bytes that arrive, not the
            // length announced (many connections announcing the maximum and sending nothing
            // would otherwise hold max_frame_size each).
            src.reserve((total - src.len()).min(RESERVE_STEP));
            return Ok(None);
        }
        src.advance(LENGTH_PREFIX);
        Ok(Some(src.split_to(len as usize)))
    }
}

impl Encoder<&[u8]> for FrameCodec {
    type Error = FrameError;

    fn encode(&mut self, payload: &[u8], dst: &mut BytesMut) -> Result<(), FrameError> {
        let len = u32::try_from(payload.len())
            .ok()
            .filter(|&l| l <= self.max)
            .ok_or(FrameError::TooLarge {
                len: payload.len().min(u32::MAX as usize) as u32,
                max: self.max,
            })?;
        dst.reserve(LENGTH_PREFIX + payload.len());
        dst.put_u32(len);
        dst.put_slice(payload);
        Ok(())
    }
}

/// Encodes a message as a frame payload (no length prefix).
pub fn encode_payload<T: Serialize>(message: &T) -> Result<Vec<u8>, FrameError> {
    postcard::to_allocvec(message).map_err(|e| FrameError::Malformed(e.to_string()))
}

/// Encodes a message as a complete frame: length prefix and payload.
pub fn encode_frame<T: Serialize>(message: &T) -> Result<Vec<u8>, FrameError> {
    let payload = encode_payload(message)?;
    let len = u32::try_from(payload.len()).map_err(|_| FrameError::TooLarge {
        len: u32::MAX,
        max: u32::MAX,
    })?;
    let mut frame = Vec::with_capacity(LENGTH_PREFIX + payload.len());
    frame.extend_from_slice(&len.to_be_bytes());
    frame.extend_from_slice(&payload);
    Ok(frame)
}

/// Decodes a frame payload into exactly one message; trailing bytes are an error, so that a
/// message that a newer peer extended is never half-understood. The error names the byte
/// where decoding stopped (and the variant, where the first byte names none this side
/// knows), not the message's contents.
pub fn decode_payload<T: DeserializeOwned>(payload: &[u8]) -> Result<T, FrameError> {
    let at = std::rc::Rc::new(std::cell::Cell::new(0));
    let mut de = postcard::Deserializer::from_flavor(Counting {
        data: payload,
        at: at.clone(),
    });
    let message = T::deserialize(&mut de).map_err(|e| malformed(&e, payload, at.get()))?;
    let rest = payload.len() - at.get();
    if rest > 0 {
        return Err(FrameError::Malformed(format!(
            "{rest} trailing bytes after the message, at byte {} of {}",
            at.get(),
            payload.len()
        )));
    }
    Ok(message)
}

/// The error of a payload whose decoding failed at byte `at`.
fn malformed(e: &postcard::Error, payload: &[u8], at: usize) -> FrameError {
    let what = match e {
        // serde's own message (which variant, which value) is lost in postcard's error; the
        // first byte is the message's variant, so an error there is an unknown variant.
        postcard::Error::SerdeDeCustom if at <= 1 => match payload.first() {
            Some(v) if *v < 0x80 => format!("unknown variant {v}"),
            _ => "unknown variant".to_string(),
        },
        e => e.to_string(),
    };
    FrameError::Malformed(format!("{what}, at byte {at} of {}", payload.len()))
}

/// postcard's slice reading, counting the bytes taken, so that an error can say where.
struct Counting<'de> {
    data: &'de [u8],
    at: std::rc::Rc<std::cell::Cell<usize>>,
}

impl<'de> postcard::de_flavors::Flavor<'de> for Counting<'de> {
    type Remainder = &'de [u8];
    type Source = &'de [u8];

    fn pop(&mut self) -> postcard::Result<u8> {
        let at = self.at.get();
        let byte = *self
            .data
            .get(at)
            .ok_or(postcard::Error::DeserializeUnexpectedEnd)?;
        self.at.set(at + 1);
        Ok(byte)
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.data.len() - self.at.get())
    }

    fn try_take_n(&mut self, ct: usize) -> postcard::Result<&'de [u8]> {
        let at = self.at.get();
        let end = at
            .checked_add(ct)
            .filter(|&end| end <= self.data.len())
            .ok_or(postcard::Error::DeserializeUnexpectedEnd)?;
        self.at.set(end);
        Ok(&self.data[at..end])
    }

    fn finalize(self) -> postcard::Result<&'de [u8]> {
        Ok(&self.data[self.at.get()..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oversized_prefix_is_refused_without_allocating() {
        let mut codec = FrameCodec::new(1024);
        let mut buf = BytesMut::from(&[0xff, 0xff, 0xff, 0xff, 1, 2][..]);
        let cap = buf.capacity();
        assert!(matches!(
            codec.decode(&mut buf),
            Err(FrameError::TooLarge {
                len: u32::MAX,
                max: 1024
            })
        ));
        assert_eq!(buf.capacity(), cap);
    }

    #[test]
    fn an_announced_length_is_not_reserved_ahead_of_its_bytes() {
        let mut codec = FrameCodec::new(64 << 20);
        let mut buf = BytesMut::from(&(64u32 << 20).to_be_bytes()[..]);
        assert!(codec.decode(&mut buf).unwrap().is_none());
        assert!(buf.capacity() <= 2 * RESERVE_STEP, "{}", buf.capacity());
        // The whole frame still arrives and decodes, piece by piece.
        let body = vec![7u8; 300_000];
        let mut stream = BytesMut::from(&(body.len() as u32).to_be_bytes()[..]);
        let mut got = None;
        for piece in body.chunks(50_000) {
            assert!(codec.decode(&mut stream).unwrap().is_none());
            stream.extend_from_slice(piece);
            got = codec.decode(&mut stream).unwrap();
        }
        assert_eq!(got.as_deref(), Some(&body[..]));
    }

    #[test]
    fn frames_split_and_join() {
        let mut codec = FrameCodec::new(1024);
        let mut out = BytesMut::new();
        codec.encode(&b"abc"[..], &mut out).unwrap();
        codec.encode(&b""[..], &mut out).unwrap();
        assert_eq!(&out[..], &[0, 0, 0, 3, b'a', b'b', b'c', 0, 0, 0, 0]);
        let mut partial = BytesMut::from(&out[..5]);
        assert!(codec.decode(&mut partial).unwrap().is_none());
        assert_eq!(&codec.decode(&mut out).unwrap().unwrap()[..], b"abc");
        assert_eq!(&codec.decode(&mut out).unwrap().unwrap()[..], b"");
        assert!(codec.decode(&mut out).unwrap().is_none());
        assert!(codec.encode(&[0u8; 1025][..], &mut out).is_err());
    }

    #[test]
    fn trailing_bytes_are_malformed() {
        let ok: u32 = decode_payload(&[5]).unwrap();
        assert_eq!(ok, 5);
        assert!(decode_payload::<u32>(&[5, 0]).is_err());
    }

    #[test]
    fn errors_say_where_decoding_stopped() {
        use crate::proto::{Request, Response};
        let ping = encode_payload(&Request::Ping(crate::proto::Ping { nonce: 300 })).unwrap();
        let err = |p: &[u8]| decode_payload::<Request>(p).unwrap_err().to_string();
        assert_eq!(
            decode_payload::<Request>(&ping).unwrap(),
            Request::Ping(crate::proto::Ping { nonce: 300 })
        );
        let mut trailing = ping.clone();
        trailing.extend_from_slice(&[0, 0]);
        assert!(err(&trailing).contains(&format!(
            "2 trailing bytes after the message, at byte {}",
            ping.len()
        )));
        assert!(err(&ping[..ping.len() - 1]).contains(&format!(
            "at byte {} of {}",
            ping.len() - 1,
            ping.len() - 1
        )));
        assert!(
            err(&[0x7f]).contains("unknown variant 127, at byte 1 of 1"),
            "{}",
            err(&[0x7f])
        );
        assert!(err(&[]).contains("at byte 0 of 0"));
        // A response decodes with the same reader.
        let r = Response::Pong(crate::proto::Pong { nonce: 7 });
        assert_eq!(
            decode_payload::<Response>(&encode_payload(&r).unwrap()).unwrap(),
            r
        );
    }
}
