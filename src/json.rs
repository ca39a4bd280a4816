//! One JSON reader for the whole crate.
//!
//! `serde_json` compiles a separate deserializer for every pair of a type
//! and an input kind (`&str`, `&[u8]`, `Value`). Reading every text through
//! the byte-slice reader keeps one instance per type, which is most of what
//! the Worker's wasm spends on parsing.

use serde::Deserialize;

/// [`serde_json::from_str`], through the byte-slice reader.
pub(crate) fn from_str<'a, T: Deserialize<'a>>(text: &'a str) -> serde_json::Result<T> {
    serde_json::from_slice(text.as_bytes())
}
