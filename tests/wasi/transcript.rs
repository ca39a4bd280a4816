//! The seed transcript (`tests/fixtures/seed_transcript.json`, the core's
//! golden test) end to end through the component: the same requests at the
//! same (host-controlled) wall-clock times, and ticks through `runner.tick`.
//! Responses must equal the golden ones exactly, except for the task id,
//! which the component draws from `wasi:random`: the first id it returns is
//! mapped onto the golden one, both ways, for the rest of the run. A
//! "restart" step drops the engine, the instances and the store handle, and
//! continues on new ones over the same database file.

use serde_json::{Value, json};

use crate::runtime::{Clock, Runtime};
use crate::sqlite::SqliteStore;
use crate::support::{Client, T0, TempDir, Via, fresh_engine, runtime, settings};

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/seed_transcript.json"
);

/// Replaces every occurrence of `from` in the JSON text of `v`.
fn substitute(v: &Value, from: &str, to: &str) -> Value {
    serde_json::from_str(&v.to_string().replace(from, to)).unwrap()
}

/// A new task id, as the component mints them (unplaced, 128 random bits).
fn is_task_id(id: &str) -> bool {
    id.len() == mcp_tasks_edge::tasks::TASK_ID_LEN && mcp_tasks_edge::tasks::is_task_id(id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_transcript_through_wasi_http() {
    seed_transcript(Via::WasiHttp).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_transcript_through_the_exchange_export() {
    seed_transcript(Via::Exchange).await;
}

async fn seed_transcript(via: Via) {
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(FIXTURE).unwrap()).unwrap();
    let dir = TempDir::new("transcript");
    let clock = Clock::manual(T0);
    let mut client = Client::new(runtime(dir.path(), settings(&clock))).via(via);
    // (golden id, actual id), fixed by the first task the component creates.
    let mut ids: Option<(String, String)> = None;
    let mut requests = 0;
    for (i, step) in doc["steps"].as_array().unwrap().iter().enumerate() {
        if step.get("restart").is_some() {
            assert_eq!(client.rt.traps(), 0);
            drop(client);
            let (engine, component) = fresh_engine();
            let store = std::sync::Arc::new(SqliteStore::open(dir.path()).unwrap());
            let rt = Runtime::from_component(&engine, &component, store, settings(&clock)).unwrap();
            client = Client::new(rt).via(via);
            continue;
        }
        clock.set(T0 + step["at"].as_i64().unwrap());
        if let Some(want) = step.get("tick") {
            let report = client.rt.tick(clock.now_ms()).await.unwrap();
            let got = json!({"stepped": report.stepped, "finished": report.finished});
            assert_eq!(&got, want, "step {i}: tick");
            continue;
        }
        let mut request = step["request"].clone();
        if let Some((golden, actual)) = &ids {
            request = substitute(&request, golden, actual);
        }
        let (status, mut body) = client.post(&request).await;
        requests += 1;
        if ids.is_none()
            && let Some(actual) = body["result"]["taskId"].as_str()
        {
            let golden = step["response"]["result"]["taskId"].as_str().unwrap();
            assert!(is_task_id(actual), "step {i}: task id {actual}");
            assert_ne!(actual, golden, "ids come from wasi:random");
            ids = Some((golden.to_owned(), actual.to_owned()));
        }
        if let Some((golden, actual)) = &ids {
            body = substitute(&body, actual, golden);
        }
        assert_eq!(
            json!(status),
            step["status"],
            "step {i}: status of {request}"
        );
        assert_eq!(body, step["response"], "step {i}: body of {request}");
    }
    assert!(ids.is_some(), "the transcript creates a task");
    assert_eq!(requests, 11);
    assert_eq!(client.rt.traps(), 0);
}
