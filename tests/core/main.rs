#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

//! Host tests of the core through its HTTP function, with `MemoryStore` and
//! a fixed clock.

mod auth;
mod catalog;
mod errors;
mod fencing;
#[cfg(feature = "legacy")]
mod legacy;
mod lifecycle;
mod listen;
mod model;
mod ownership;
mod quotas;
mod round_trips;
mod steps;
mod stored;
mod support;
mod transcript;
