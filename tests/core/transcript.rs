//! The seed lesson's transcript as a golden test through the HTTP function:
//! discover, create, poll, tick, input, update, tick, result, and a restart
//! (a new server over the same store) that still answers.
//!
//! `tests/fixtures/seed_transcript.json` holds each request with its exact
//! expected status and body. Run with `UPDATE_GOLDEN=1` to rewrite the
//! expectations after an intended change, then review the diff.

use std::sync::Arc;

use mcp_tasks_edge::store::MemoryStore;
use serde_json::{Value, json};

use crate::support::{Harness, T0};

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/seed_transcript.json"
);

#[test]
fn seed_transcript() {
    let text = std::fs::read_to_string(FIXTURE).unwrap();
    let mut doc: Value = serde_json::from_str(&text).unwrap();
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let store = Arc::new(MemoryStore::new());
    let mut h = Harness::over(store.clone(), 1);
    let mut restarts = 1;
    let steps = doc["steps"].as_array_mut().unwrap();
    for (i, step) in steps.iter_mut().enumerate() {
        if step.get("restart").is_some() {
            restarts += 1;
            h = Harness::over(store.clone(), restarts);
            continue;
        }
        h.now.set(T0 + step["at"].as_i64().unwrap());
        if let Some(want) = step.get("tick") {
            let report = h.tick();
            let got = json!({"stepped": report.stepped, "finished": report.finished});
            if update {
                step["tick"] = got;
            } else {
                assert_eq!(&got, want, "step {i}: tick");
            }
            continue;
        }
        let (status, body) = h.post(&step["request"]);
        if update {
            step["status"] = json!(status);
            step["response"] = body;
        } else {
            assert_eq!(
                json!(status),
                step["status"],
                "step {i}: status of {}",
                step["request"]
            );
            assert_eq!(
                body, step["response"],
                "step {i}: body of {}",
                step["request"]
            );
        }
    }
    if update {
        std::fs::write(FIXTURE, serde_json::to_string_pretty(&doc).unwrap() + "\n").unwrap();
    }
}
