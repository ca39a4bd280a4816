//! `subscriptions/listen` as a streamed SSE response: the core's
//! [`EventStream`] is pulled as the client reads, reading the tasks through
//! the request's store, sleeping with `worker::Delay` between polls.
//!
//! Every poll reads each subscribed task from its shard: one subrequest per
//! task per poll. The Worker platform caps subrequests per request, so a
//! stream that has spent `MCP_LISTEN_SUBREQUESTS` ends gracefully (one last
//! poll, then the listen result); the client listens again to continue.

use std::time::Duration;

use futures_util::stream;
use worker::{Delay, Response, ResponseBuilder, console_log};

use super::now_ms;
use super::settings::{RequestLog, StoreMode};
use super::store::Shared;
use crate::http::{EventStream, Next};

/// A stream's state; its log line is written when it is dropped (the stream
/// ended, or the client went away).
struct Listen {
    events: EventStream,
    store: Shared,
    spent_before: u32,
    budget: u32,
    log: RequestLog,
    sent: u32,
    mode: StoreMode,
}

impl Drop for Listen {
    fn drop(&mut self) {
        self.log.events = Some(self.sent);
        console_log!("{}", self.log.line(now_ms(), self.mode));
    }
}

impl Listen {
    async fn next_frame(&mut self) -> Option<Vec<u8>> {
        loop {
            let now = now_ms();
            let next = self.events.next(&self.store, now).await;
            // Cache fills of terminal records read by this poll: inline, the
            // stream itself keeps the request alive.
            for fill in self.store.take_fills() {
                fill.await;
            }
            match next {
                Next::Send(frame) => {
                    self.sent += 1;
                    return Some(frame);
                }
                Next::Wait(ms) => {
                    let spent = self.store.subrequests().saturating_sub(self.spent_before);
                    if spent >= self.budget {
                        self.events.end_by(now);
                        continue;
                    }
                    Delay::from(Duration::from_millis(ms)).await;
                }
                Next::End => return None,
            }
        }
    }
}

/// The SSE response for a listen stream.
pub fn respond(
    builder: ResponseBuilder,
    events: EventStream,
    store: Shared,
    budget: u32,
    log: RequestLog,
    mode: StoreMode,
) -> Response {
    let spent_before = store.subrequests();
    let listen = Listen {
        events,
        store,
        spent_before,
        budget,
        log,
        sent: 0,
        mode,
    };
    let frames = stream::unfold(listen, |mut listen| async move {
        let frame = listen.next_frame().await?;
        Some((Ok::<Vec<u8>, worker::Error>(frame), listen))
    });
    match builder.from_stream(frames) {
        Ok(r) => r,
        Err(e) => super::entry::misconfigured("sse", &e.to_string()),
    }
}
