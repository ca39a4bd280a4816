//! Task steps that call a real HTTP API from inside the component: the
//! `run_job` demo against a job API on 127.0.0.1, through
//! `wasi:http/outgoing-handler` and the host's allow-list.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::runtime::{Clock, Runtime};
use crate::sqlite::SqliteStore;
use crate::support::{Client, T0, TempDir, env, fresh_engine, settings};
use crate::upstream::{Behave, Upstream};

/// A host over `dir` whose steps may call `up`.
fn host(dir: &std::path::Path, clock: &Clock, up: &Upstream, extra: &[(&str, &str)]) -> Client {
    let (engine, component) = fresh_engine();
    let store = Arc::new(SqliteStore::open(dir).unwrap());
    let mut s = settings(clock);
    let origin = up.origin();
    let url = up.url();
    let mut vars = vec![
        ("MCP_OUTBOUND_ALLOW", origin.as_str()),
        ("JOB_API_URL", url.as_str()),
        ("JOB_API_KEY", "sk-wasi"),
        ("MCP_RETRY_BASE_MS", "100"),
        ("MCP_RETRY_CAP_MS", "400"),
    ];
    vars.extend_from_slice(extra);
    s.env = env(&vars);
    Client::new(Runtime::from_component(&engine, &component, store, s).unwrap())
}

/// Ticks every `step_ms` until the task leaves `working`.
async fn settle(c: &Client, clock: &Clock, task: &str, step_ms: i64, ticks: usize) -> Value {
    for _ in 0..ticks {
        let t = c.get(task).await;
        if t["status"] != "working" {
            return t;
        }
        clock.advance(step_ms);
        c.rt.tick(clock.now_ms()).await.unwrap();
    }
    c.get(task).await
}

async fn confirm(c: &Client, task: &str) {
    c.ok(
        "tasks/update",
        json!({"taskId": task, "inputResponses": {
            "confirm_result": {"action": "accept", "content": {"confirmed": true}}
        }}),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_job_runs_against_a_local_api_start_to_finish() {
    let up = Upstream::start().await;
    up.polls(2);
    let dir = TempDir::new("outbound-e2e");
    let clock = Clock::manual(T0);
    let c = host(dir.path(), &clock, &up, &[]);
    let task = c.start("run_job", json!({"input": "a.csv"})).await;
    let t = settle(&c, &clock, &task, 300, 40).await;
    assert_eq!(t["status"], "input_required", "{t}");
    confirm(&c, &task).await;
    let t = settle(&c, &clock, &task, 100, 5).await;
    assert_eq!(t["status"], "completed", "{t}");
    assert_eq!(t["result"]["structuredContent"]["result"]["rows"], 3, "{t}");
    assert_eq!(up.jobs(), 1);
    let seen = up.seen();
    let polls: Vec<_> = seen.iter().filter(|s| s.method == "GET").collect();
    assert_eq!(polls.len(), 3);
    assert!(
        polls.iter().all(|s| s.path == "/api/jobs/job-1"),
        "{polls:?}"
    );
    assert!(
        seen.iter()
            .all(|s| s.authorization.as_deref() == Some("Bearer sk-wasi"))
    );
    assert_eq!(c.rt.traps(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_errors_are_retried_with_one_key_then_succeed_or_fail() {
    let up = Upstream::start().await;
    up.then(&[
        Behave::Status(500),
        Behave::Status(429),
        Behave::Status(503),
    ]);
    let dir = TempDir::new("outbound-retry");
    let clock = Clock::manual(T0);
    let c = host(dir.path(), &clock, &up, &[]);
    let task = c.start("run_job", json!({"input": "b"})).await;
    let t = settle(&c, &clock, &task, 500, 40).await;
    assert_eq!(t["status"], "input_required", "{t}");
    let keys = up.submit_keys();
    assert_eq!(keys.len(), 4, "{keys:?}");
    assert!(keys.iter().all(|k| *k == keys[0] && k.starts_with("idem_")));
    assert_eq!(up.jobs(), 1);

    // An API that keeps failing: `failed` after the maximum attempts.
    up.then(&[Behave::Status(502); 6]);
    let dir = TempDir::new("outbound-give-up");
    let c = host(dir.path(), &clock, &up, &[("MCP_STEP_MAX_ATTEMPTS", "3")]);
    let task = c.start("run_job", json!({"input": "c"})).await;
    let t = settle(&c, &clock, &task, 500, 20).await;
    assert_eq!(t["status"], "failed", "{t}");
    let msg = t["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("failed after 3 attempts") && msg.contains("502"),
        "{msg}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_origin_off_the_allow_list_is_refused() {
    let up = Upstream::start().await;
    let dir = TempDir::new("outbound-refused");
    let clock = Clock::manual(T0);
    let c = host(
        dir.path(),
        &clock,
        &up,
        &[("MCP_OUTBOUND_ALLOW", "http://127.0.0.1:1")],
    );
    let task = c.start("run_job", json!({"input": "d"})).await;
    let t = settle(&c, &clock, &task, 500, 5).await;
    assert_eq!(t["status"], "failed", "{t}");
    let msg = t["error"]["message"].as_str().unwrap();
    assert!(msg.contains("is not on the allow-list"), "{msg}");
    assert!(up.seen().is_empty(), "nothing reached the API");
}

/// A redirect is not followed: the step sees the 307 itself (run_job
/// completes with an error result), and neither the request nor its API
/// key reaches the other origin, which the allow-list does not name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_to_another_origin_is_not_followed() {
    let up = Upstream::start().await;
    up.then(&[Behave::RedirectElsewhere]);
    let dir = TempDir::new("outbound-redirect");
    let clock = Clock::manual(T0);
    let c = host(dir.path(), &clock, &up, &[]);
    let task = c.start("run_job", json!({"input": "r"})).await;
    let t = settle(&c, &clock, &task, 500, 5).await;
    assert_eq!(t["status"], "completed", "{t}");
    assert_eq!(t["result"]["isError"], true, "{t}");
    assert_eq!(
        t["result"]["content"][0]["text"], "submit: the job API answered 307",
        "{t}"
    );
    let seen = up.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_that_dies_after_the_submit_repeats_it_with_the_same_key() {
    let up = Upstream::start().await;
    // The first submit is received, then never answered in time.
    up.then(&[Behave::Hang(Duration::from_secs(30))]);
    let dir = TempDir::new("outbound-crash");
    let clock = Clock::manual(T0);
    let extra = [("MCP_LEASE_MS", "2000")];
    let first = host(dir.path(), &clock, &up, &extra);
    let task = first.start("run_job", json!({"input": "e"})).await;
    let rt = first.rt.clone();
    let now = clock.now_ms();
    let ticking = tokio::spawn(async move { rt.tick(now).await });
    for _ in 0..200 {
        if !up.submit_keys().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(up.submit_keys().len(), 1, "the API received the submit");
    // The host dies before the step commits: its tick, instances and
    // engine are gone; only the database remains.
    ticking.abort();
    let _ = ticking.await;
    drop(first);

    let second = host(dir.path(), &clock, &up, &extra);
    assert_eq!(second.status(&task).await, "working");
    clock.advance(2_001); // the dead runner's lease ends
    let t = settle(&second, &clock, &task, 300, 40).await;
    assert_eq!(t["status"], "input_required", "{t}");
    confirm(&second, &task).await;
    let t = settle(&second, &clock, &task, 100, 5).await;
    assert_eq!(t["status"], "completed", "{t}");
    let keys = up.submit_keys();
    assert_eq!(keys.len(), 2, "{keys:?}");
    assert_eq!(keys[0], keys[1], "the repeated submit carries the same key");
    assert_eq!(up.jobs(), 1, "the job ran once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_that_traps_every_time_fails_its_task_and_others_go_on() {
    let up = Upstream::start().await;
    let dir = TempDir::new("outbound-poison");
    let clock = Clock::manual(T0);
    let c = host(
        dir.path(),
        &clock,
        &up,
        &[("MCP_LEASE_MS", "1000"), ("MCP_STEP_MAX_ATTEMPTS", "3")],
    );
    let poison = c.start("trap_step", json!({})).await;
    let job = c.start("run_job", json!({"input": "f"})).await;
    let mut traps = 0;
    for _ in 0..40 {
        clock.advance(500);
        if c.rt.tick(clock.now_ms()).await.is_err() {
            traps += 1;
        }
        if c.status(&poison).await != "working" && c.status(&job).await != "working" {
            break;
        }
    }
    assert_eq!(traps, 3, "one trap per attempt");
    let t = c.get(&poison).await;
    assert_eq!(t["status"], "failed", "{t}");
    assert!(
        t["error"]["message"]
            .as_str()
            .unwrap()
            .contains("did not finish after 3 attempts"),
        "{t}"
    );
    assert_eq!(c.status(&job).await, "input_required");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_polling_job_stops_the_polls() {
    let up = Upstream::start().await;
    up.polls(1_000);
    let dir = TempDir::new("outbound-cancel");
    let clock = Clock::manual(T0);
    let c = host(dir.path(), &clock, &up, &[]);
    let task = c.start("run_job", json!({"input": "g"})).await;
    for _ in 0..4 {
        clock.advance(300);
        c.rt.tick(clock.now_ms()).await.unwrap();
    }
    assert_eq!(c.status(&task).await, "working");
    c.ok("tasks/cancel", json!({"taskId": task})).await;
    assert_eq!(c.status(&task).await, "cancelled");
    let polls = up.seen().len();
    for _ in 0..4 {
        clock.advance(5_000);
        c.rt.tick(clock.now_ms()).await.unwrap();
    }
    assert_eq!(up.seen().len(), polls, "no request after the cancel");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_over_the_cap_is_refused() {
    let up = Upstream::start().await;
    let dir = TempDir::new("outbound-cap");
    let clock = Clock::manual(T0);
    // The submit answer (`{"id":"job-1"}`) is 14 bytes.
    let c = host(
        dir.path(),
        &clock,
        &up,
        &[
            ("MCP_OUTBOUND_MAX_BYTES", "8"),
            ("MCP_STEP_MAX_ATTEMPTS", "2"),
        ],
    );
    let task = c.start("run_job", json!({"input": "h"})).await;
    let t = settle(&c, &clock, &task, 500, 10).await;
    assert_eq!(t["status"], "failed", "{t}");
    let msg = t["error"]["message"].as_str().unwrap();
    assert!(msg.contains("larger than 8 bytes"), "{msg}");
    assert_eq!(up.submit_keys().len(), 2, "one request per attempt");
}

/// An API on 127.0.0.1 that answers every request at once with its head,
/// then sends the body (`{"id":"job-1"}`) a byte at a time, `gap` apart.
pub(crate) async fn trickling_api(gap: Duration) -> (String, tokio::task::JoinHandle<()>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                // The request's head and its (small) body.
                let mut got = Vec::new();
                let mut buf = [0u8; 4096];
                while !String::from_utf8_lossy(&got).contains("\r\n\r\n") {
                    match s.read(&mut buf).await {
                        Ok(n) if n > 0 => got.extend_from_slice(&buf[..n]),
                        _ => return,
                    }
                }
                let body = br#"{"id":"job-1"}"#;
                let head = format!(
                    "HTTP/1.1 202 Accepted\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                if s.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                for b in body {
                    tokio::time::sleep(gap).await;
                    if s.write_all(&[*b]).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (origin, task)
}

/// A response whose body arrives slowly (but steadily) keeps the step's
/// call alive past the call deadline, as a request body arriving slowly
/// does: the bytes coming in count as progress.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_body_still_arriving_outlasts_the_call_deadline() {
    let (origin, api) = trickling_api(Duration::from_millis(100)).await;
    let dir = TempDir::new("outbound-trickle");
    let clock = Clock::manual(T0);
    let (engine, component) = fresh_engine();
    let store = Arc::new(SqliteStore::open(dir.path()).unwrap());
    let mut s = settings(&clock);
    // The body takes about 1.4 s, more than four call deadlines.
    s.call_deadline = Duration::from_millis(300);
    let url = format!("{origin}/api");
    s.env = env(&[
        ("MCP_OUTBOUND_ALLOW", origin.as_str()),
        ("JOB_API_URL", url.as_str()),
        ("JOB_API_KEY", "sk-wasi"),
    ]);
    let c = Client::new(Runtime::from_component(&engine, &component, store, s).unwrap());
    let task = c.start("run_job", json!({"input": "a.csv"})).await;
    clock.advance(100);
    let report = c.rt.tick(clock.now_ms()).await;
    assert!(report.is_ok(), "{report:?}");
    assert_eq!(
        c.rt.limit_stats()
            .interrupts
            .load(std::sync::atomic::Ordering::Relaxed),
        0
    );
    assert_eq!(c.rt.traps(), 0);
    let t = c.get(&task).await;
    assert_eq!(t["status"], "working", "{t}");
    assert_eq!(
        t["statusMessage"], "The job is running.",
        "the submit's answer was read whole: {t}"
    );
    api.abort();
}

/// A response whose body arrives more slowly than the request's whole time
/// allows, each byte within it: the exchange times out at its timeout (here
/// the step's deadline, under a 2 s lease), not when the body is done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_body_slower_than_its_timeout_times_out() {
    let (origin, api) = trickling_api(Duration::from_millis(300)).await;
    let dir = TempDir::new("outbound-slow-body");
    let clock = Clock::manual(T0);
    let (engine, component) = fresh_engine();
    let store = Arc::new(SqliteStore::open(dir.path()).unwrap());
    let mut s = settings(&clock);
    let url = format!("{origin}/api");
    s.env = env(&[
        ("MCP_OUTBOUND_ALLOW", origin.as_str()),
        ("JOB_API_URL", url.as_str()),
        ("JOB_API_KEY", "sk-wasi"),
        // The step's deadline, and so its requests' timeout: 1.6 s.
        ("MCP_LEASE_MS", "2000"),
    ]);
    let c = Client::new(Runtime::from_component(&engine, &component, store, s).unwrap());
    let task = c.start("run_job", json!({"input": "a.csv"})).await;
    clock.advance(100);
    c.rt.tick(clock.now_ms()).await.unwrap();
    // The body (14 bytes, 300 ms apart) would have taken 4.2 s; the submit
    // is retried instead of read whole.
    let t = c.get(&task).await;
    assert_eq!(t["status"], "working", "{t}");
    let message = t["statusMessage"].as_str().unwrap_or("");
    assert!(message.contains("timed out"), "{t}");
    api.abort();
}

/// An API that accepts connections and never answers or reads from
/// them: over `https`, the host's TLS handshake waits on it, and a request
/// body larger than the host's few buffered chunks stalls its writer.
async fn stalled_api() -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin = format!("https://{}", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = listener.accept().await {
            held.push(s);
        }
    });
    (origin, task)
}

/// A step whose request body is never taken (a TLS handshake the API never
/// answers) times out at the exchange's timeout (the step's deadline under
/// a 2 s lease) and is retried, instead of holding the tick in a blocking
/// write that no call deadline reaches (the guest waits in the host, not
/// in its own code). The body was written in 4 KiB blocking writes, and the
/// host's body channel holds two: the third never returned. It is now
/// written as the stream has room (the host takes up to 1 MiB a write),
/// by the exchange's deadline; a body past what the host buffers (2 MiB)
/// would meet that deadline in the writing, which no step here can send
/// (a tool's argument strings are at most 64 KiB).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_body_never_taken_times_out() {
    let (origin, api) = stalled_api().await;
    let dir = TempDir::new("outbound-stalled-body");
    let clock = Clock::manual(T0);
    let (engine, component) = fresh_engine();
    let store = Arc::new(SqliteStore::open(dir.path()).unwrap());
    let mut s = settings(&clock);
    let url = format!("{origin}/api");
    s.env = env(&[
        ("MCP_OUTBOUND_ALLOW", origin.as_str()),
        ("JOB_API_URL", url.as_str()),
        ("JOB_API_KEY", "sk-wasi"),
        ("MCP_LEASE_MS", "2000"),
    ]);
    let c = Client::new(Runtime::from_component(&engine, &component, store, s).unwrap());
    // 60 KB of body: fifteen of the 4 KiB writes.
    let input = "x".repeat(60_000);
    let task = c.start("run_job", json!({"input": input})).await;
    clock.advance(100);
    let tick = tokio::time::timeout(Duration::from_secs(30), c.rt.tick(clock.now_ms())).await;
    assert!(tick.is_ok(), "the tick is still writing the body");
    assert_eq!(c.rt.traps(), 0);
    let t = c.get(&task).await;
    assert_eq!(t["status"], "working", "{t}");
    let message = t["statusMessage"].as_str().unwrap_or("");
    assert!(message.contains("timed out"), "{message}");
    api.abort();
}
