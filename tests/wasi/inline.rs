//! A replayable step that a request makes due at once runs inside that
//! request, in the component as in the core: `generate_report` with no
//! outline delay is `input_required` in the answer to its `tools/call`, and
//! the answer to its approval completes it, each with one store write.

use serde_json::json;

use crate::runtime::Clock;
use crate::support::{Client, T0, TempDir, Via, env, runtime};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayable_step_due_at_once_runs_inside_the_request_on_both_exports() {
    for via in [Via::WasiHttp, Via::Exchange] {
        let dir = TempDir::new("inline");
        let mut settings = crate::runtime::Settings::new(env(&[("MCP_REPORT_OUTLINE_MS", "0")]));
        settings.clock = Clock::manual(T0);
        settings.guest_stderr = false;
        let rt = runtime(dir.path(), settings);
        let c = Client::new(rt.clone()).via(via);

        let created = c
            .ok(
                "tools/call",
                json!({"name": "generate_report", "arguments": {"size": "small"}}),
            )
            .await;
        assert_eq!(created["resultType"], "task", "{via:?}: {created}");
        assert_eq!(created["status"], "input_required", "{via:?}: {created}");
        let id = created["taskId"].as_str().unwrap().to_owned();
        let stored = rt.store().get(&id).unwrap().unwrap();
        assert_eq!(
            stored.version, 1,
            "{via:?}: one write, the create with its step"
        );

        let t = c.get(&id).await;
        let key = t["inputRequests"]
            .as_object()
            .and_then(|m| m.keys().next().cloned())
            .unwrap();
        c.ok(
            "tasks/update",
            json!({"taskId": id, "inputResponses": {key: {"action": "accept", "content": {"approved": true}}}}),
        )
        .await;
        // No tick in between: the step ran inside the update.
        let done = c.get(&id).await;
        assert_eq!(done["status"], "completed", "{via:?}: {done}");
        assert_eq!(rt.store().get(&id).unwrap().unwrap().version, 2, "{via:?}");
    }
}

/// The host wakes its ticker only for work a request made due before the
/// next planned tick: the runtime reports the earliest due time the
/// component's writes stored. A create whose step ran inline leaves its
/// task due only at its expiry; one whose first step waits is due then; a
/// read stores nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_learns_the_earliest_due_time_a_request_stored() {
    let dir = TempDir::new("written-due");
    let mut settings = crate::runtime::Settings::new(env(&[("MCP_REPORT_OUTLINE_MS", "0")]));
    settings.clock = Clock::manual(T0);
    settings.guest_stderr = false;
    let rt = runtime(dir.path(), settings);
    let c = Client::new(rt.clone()).via(Via::Exchange);
    assert_eq!(rt.take_written_due(), None);

    let id = c.start("generate_report", json!({"size": "small"})).await;
    let due = rt.take_written_due().expect("the create stored a due time");
    assert!(due > T0 + 60_000, "due only at its expiry: {due}");
    c.get(&id).await;
    assert_eq!(rt.written_due(), None, "a read stores nothing");

    c.start("slow_compute", json!({"seconds": 2})).await;
    let due = rt.take_written_due();
    assert!(due.is_some_and(|d| d <= T0 + 2_000), "{due:?}");
    assert_eq!(rt.written_due(), None, "taken");
}
