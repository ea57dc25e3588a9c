//! Serde helpers: byte strings as base64 in JSON inputs.

use base64::Engine as _;
use serde::{Deserialize, Deserializer, Serializer};

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// `Vec<u8>` as a base64 string.
pub mod b64 {
    use super::*;
    /// Serialises as base64.
    #[allow(dead_code)]
    pub fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&B64.encode(v))
    }
    /// Parses base64.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let s = String::deserialize(d)?;
        B64.decode(s.trim()).map_err(serde::de::Error::custom)
    }
}

/// `Vec<Vec<u8>>` as a list of base64 strings.
pub mod b64_list {
    use super::*;
    /// Serialises as base64 strings.
    pub fn serialize<S: Serializer>(v: &[Vec<u8>], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(v.iter().map(|b| B64.encode(b)))
    }
    /// Parses base64 strings.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Vec<u8>>, D::Error> {
        let v = Vec::<String>::deserialize(d)?;
        v.iter()
            .map(|s| B64.decode(s.trim()).map_err(serde::de::Error::custom))
            .collect()
    }
}

/// `[u8; 32]` as a base64 string.
pub mod b64_32 {
    use super::*;
    /// Serialises as base64.
    pub fn serialize<S: Serializer>(v: &[u8; 32], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&B64.encode(v))
    }
    /// Parses base64 of exactly 32 bytes.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<[u8; 32], D::Error> {
        let v = super::b64::deserialize(d)?;
        v.try_into().map_err(|v: Vec<u8>| {
            serde::de::Error::custom(format!("expected 32 bytes, got {}", v.len()))
        })
    }
}
