//! mcp-tasks-edge: a stateless MCP 2026-07-28 server with durable tasks
//! (`io.modelcontextprotocol/tasks`) for edge runtimes.
//!
//! The core (everything but [`platform`]) is bytes in, bytes out: it never
//! panics, takes time and randomness from the caller, and reaches storage
//! only through the [`store::Store`] trait. Platform adapters turn a
//! runtime's requests, clocks and storage into core types.
//!
//! Layers, top to bottom: [`http`] (Streamable HTTP rules) → [`server`]
//! (JSON-RPC, negotiation, dispatch) → [`tasks`] (records, state machine,
//! service, runner) → [`tools`] → [`store`] → [`protocol`] (wire types).

// Request paths never index or slice unchecked (Cargo.toml also denies
// unwrap, expect and panic).
#![cfg_attr(not(test), deny(clippy::indexing_slicing))]

pub mod alloc;
pub mod auth;
mod catalog;
pub mod config;
#[cfg(feature = "conformance-tools")]
pub mod conformance;
pub mod crypto;
#[cfg(feature = "demo")]
pub mod demo;
pub mod error;
pub mod http;
pub mod ids;
mod json;
mod kept;
#[cfg(feature = "legacy")]
pub mod legacy;
pub mod limits;
pub mod mrtr;
pub mod outbound;
pub mod owner;
pub mod platform;
pub mod prompts;
pub mod protocol;
pub mod resources;
mod schema;
pub mod server;
mod sorted;
pub mod store;
pub mod tasks;
pub mod testing;
pub mod time;
pub mod tools;

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

/// Drives a future to completion on the current thread.
///
/// For stores whose operations complete without waiting on an external
/// event (the in-memory store, WASI host imports), the first poll finishes.
/// Anything that stays pending is polled again after yielding the thread.
pub fn block_on<F: Future>(fut: F) -> F::Output {
    let mut fut = pin!(fut);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::yield_now();
    }
}

/// The README's code, compiled with the doc tests so that it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeExamples;
