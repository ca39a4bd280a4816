//! `subscriptions/listen` through `wasi:http`: the component writes and
//! flushes each event while the response is open, waits on a monotonic-clock
//! pollable between polls, ends gracefully when the tasks are done, and
//! stops when the client goes away.

use std::time::Duration;

use http_body_util::BodyExt;
use serde_json::{Value, json};
use wasmtime_wasi_http::p2::body::HyperOutgoingBody;

use crate::runtime::{Clock, build_request};
use crate::support::{Client, T0, TempDir, caps, meta, runtime, settings, standard_headers};

/// Reads SSE events (one JSON message per `data:` line) as they arrive.
pub struct Events {
    body: HyperOutgoingBody,
    buf: Vec<u8>,
}

impl Events {
    pub fn new(body: HyperOutgoingBody) -> Self {
        Events {
            body,
            buf: Vec::new(),
        }
    }

    /// The next event, or `None` when the stream ended.
    pub async fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(end) = self.buf.windows(2).position(|w| w == b"\n\n") {
                let event: Vec<u8> = self.buf.drain(..end + 2).collect();
                let text = std::str::from_utf8(&event).unwrap();
                if text.starts_with(':') {
                    continue; // keep-alive comment
                }
                let data = text
                    .strip_prefix("data: ")
                    .and_then(|t| t.strip_suffix("\n\n"))
                    .unwrap_or_else(|| panic!("not one data line: {text:?}"));
                return Some(serde_json::from_str(data).unwrap());
            }
            let frame = tokio::time::timeout(Duration::from_secs(30), self.body.frame())
                .await
                .expect("no event within 30 s");
            match frame {
                None => {
                    assert!(self.buf.is_empty(), "partial event at the end");
                    return None;
                }
                Some(frame) => {
                    if let Ok(data) = frame.unwrap().into_data() {
                        self.buf.extend_from_slice(&data);
                    }
                }
            }
        }
    }
}

async fn open(c: &Client, task_ids: Value) -> Events {
    let mut params = json!({"notifications": {"taskIds": task_ids}});
    params["_meta"] = meta(caps());
    let msg =
        json!({"jsonrpc": "2.0", "id": 77, "method": "subscriptions/listen", "params": params});
    let headers = standard_headers(&msg);
    let refs: Vec<(&str, &[u8])> = headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_bytes()))
        .collect();
    let req = build_request("POST", "/mcp", &refs, serde_json::to_vec(&msg).unwrap()).unwrap();
    let resp = c.rt.handle(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(
        resp.headers().get("content-type").unwrap(),
        "text/event-stream"
    );
    Events {
        body: resp.into_body(),
        buf: Vec::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_stream_while_the_task_runs_and_the_stream_ends_with_it() {
    let dir = TempDir::new("listen");
    let clock = Clock::manual(T0);
    let c = Client::new(runtime(dir.path(), settings(&clock)));
    let task = c.start("slow_compute", json!({"seconds": 1})).await;
    let mut events = open(&c, json!([task])).await;

    let ack = events.next().await.unwrap();
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(ack["params"]["notifications"]["taskIds"], json!([task]));
    let working = events.next().await.unwrap();
    assert_eq!(working["method"], "notifications/tasks");
    assert_eq!(working["params"]["status"], "working");
    // The stream is still open (the call has not returned) while the task
    // waits; it moves on when a tick completes the task.
    assert_eq!(c.rt.in_flight(), 1);
    clock.advance(1_000);
    assert_eq!(c.rt.tick(clock.now_ms()).await.unwrap().finished, 1);
    let done = events.next().await.unwrap();
    assert_eq!(done["params"]["status"], "completed");
    assert_eq!(done["params"]["taskId"], task);
    let closing = events.next().await.unwrap();
    assert_eq!(closing["id"], 77);
    assert_eq!(closing["result"]["resultType"], "complete");
    assert_eq!(events.next().await, None);
    assert_eq!(c.rt.traps(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stream_stops_when_the_client_goes_away() {
    let dir = TempDir::new("listen-gone");
    let clock = Clock::manual(T0);
    let c = Client::new(runtime(dir.path(), settings(&clock)));
    let task = c.start("slow_compute", json!({"seconds": 60})).await;
    let mut events = open(&c, json!([task])).await;
    assert!(events.next().await.is_some());
    assert!(events.next().await.is_some());
    assert_eq!(c.rt.in_flight(), 1);
    drop(events);
    // The next event the component writes finds the client gone.
    c.ok("tasks/cancel", json!({"taskId": task})).await;
    let mut waited = 0;
    while c.rt.in_flight() > 0 {
        assert!(waited < 300, "the component kept streaming to nobody");
        tokio::time::sleep(Duration::from_millis(100)).await;
        waited += 1;
    }
    assert_eq!(c.rt.traps(), 0);
}

/// A stream that stays open far longer than the call deadline lives on, as
/// long as it keeps polling the store; the deadline only stops calls that
/// make no progress.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_stream_outlives_many_call_deadlines() {
    let dir = TempDir::new("listen-deadline");
    let clock = Clock::manual(T0);
    let mut s = settings(&clock);
    s.call_deadline = Duration::from_millis(50);
    let c = Client::new(runtime(dir.path(), s));
    let task = c.start("slow_compute", json!({"seconds": 60})).await;
    let mut events = open(&c, json!([task])).await;
    assert!(events.next().await.is_some(), "acknowledgement");
    assert_eq!(events.next().await.unwrap()["params"]["status"], "working");
    // Nothing changes for 1.5 s: about 30 deadlines pass while the stream
    // waits between polls.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(c.rt.in_flight(), 1, "the stream is still open");
    c.ok("tasks/cancel", json!({"taskId": task})).await;
    assert_eq!(
        events.next().await.unwrap()["params"]["status"],
        "cancelled"
    );
    assert_eq!(events.next().await.unwrap()["id"], 77);
    assert_eq!(events.next().await, None);
    let stats = c.rt.limit_stats();
    assert_eq!(c.rt.traps(), 0);
    assert_eq!(
        stats.interrupts.load(std::sync::atomic::Ordering::SeqCst),
        0
    );
    assert!(
        stats.extensions.load(std::sync::atomic::Ordering::SeqCst) > 0,
        "the deadline was extended"
    );
}
