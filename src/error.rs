//! Error codes and the JSON-RPC error object every failure becomes. They
//! are wire types and live in [`crate::protocol::error`]; this module keeps
//! the short path the rest of the crate (and its users) name.

pub use crate::protocol::error::*;
