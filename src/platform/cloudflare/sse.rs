//! A streamed SSE response (`subscriptions/listen`, or a 2025-11-25
//! client's held-open response): the core's
//! [`EventStream`] is pulled as the client reads, reading the tasks through
//! the request's store, sleeping with `worker::Delay` between polls.
//!
//! Every poll reads each subscribed, unfinished task: one subrequest per task
//! (two in KV mode). The Worker platform caps subrequests per request, so
//! the whole request (opening the subscription included) stays within
//! `MCP_LISTEN_SUBREQUESTS`: when the next poll would cross it, that poll is
//! the last one and the listen result follows; the client listens again to
//! continue. Polls never cost more than the one before, because the set of
//! subscribed tasks only shrinks.

use std::rc::Rc;
use std::time::Duration;

use futures_util::stream;
use worker::{Delay, Response, ResponseBuilder, console_log};

use super::now_ms;
use super::settings::{RequestLog, StoreMode};
use super::store::WorkerStore;
use crate::http::{EventStream, Next};
use crate::server::Server;

/// A stream's state; its log line is written when it is dropped (the stream
/// ended, or the client went away).
struct Listen {
    events: EventStream,
    server: Server<Rc<WorkerStore>>,
    store: Rc<WorkerStore>,
    budget: u32,
    /// Subrequests the latest poll made.
    poll_cost: u32,
    log: RequestLog,
    sent: u32,
    mode: StoreMode,
}

impl Drop for Listen {
    fn drop(&mut self) {
        self.log.events = Some(self.sent);
        self.log.subrequests = self.store.subrequests();
        console_log!("{}", self.log.line(now_ms(), self.mode));
    }
}

impl Listen {
    async fn next_frame(&mut self) -> Option<Vec<u8>> {
        loop {
            let now = now_ms();
            let before = self.store.subrequests();
            let next = self.events.next(&self.server, now).await;
            let cost = self.store.subrequests().saturating_sub(before);
            if cost > 0 {
                self.poll_cost = cost;
            }
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
                    let spent = self.store.subrequests();
                    // Room for the next poll, the last ones after it (one
                    // per stream a batch still holds), and giving back the
                    // stream's slot?
                    let reserve = self
                        .poll_cost
                        .saturating_mul(self.events.last_polls().saturating_add(1))
                        .saturating_add(self.events.closing_cost());
                    if spent.saturating_add(reserve) > self.budget {
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
    server: Server<Rc<WorkerStore>>,
    store: Rc<WorkerStore>,
    budget: u32,
    log: RequestLog,
    mode: StoreMode,
) -> Response {
    let listen = Listen {
        events,
        server,
        store,
        budget,
        poll_cost: 0,
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
        Err(e) => super::env::misconfigured("sse", &e.to_string()),
    }
}
