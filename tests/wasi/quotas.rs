//! The attack through the component, on the host's SQLite store:
//! one principal sends calls with ~840 kB of junk arguments (refused as a
//! tool argument error, nothing stored), then fills its byte budget with
//! tasks it cancels at once (refused with 429 once the budget is used, the
//! store within the budget); another principal is unaffected.

use serde_json::{Value, json};

use crate::runtime::Clock;
use crate::support::{Client, T0, TempDir, runtime, settings};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn junk_and_big_tasks_stay_within_the_principals_budget() {
    const BUDGET: u64 = 1_000_000;
    let dir = TempDir::new("quotas");
    let clock = Clock::manual(T0);
    let with = |principal: &str| {
        let mut s = settings(&clock);
        s.env.retain(|(k, _)| k != "MCP_INSECURE_PRINCIPAL");
        s.env
            .push(("MCP_INSECURE_PRINCIPAL".into(), principal.into()));
        s.env
            .push(("MCP_MAX_STORED_BYTES".into(), BUDGET.to_string()));
        s.env.push(("MCP_MAX_OUTSTANDING_TASKS".into(), "0".into()));
        Client::new(runtime(dir.path(), s))
    };
    let mallory = with("acme/mallory");
    let bytes = || mallory.rt.store().stored().unwrap().0;
    let mut junk = serde_json::Map::new();
    for i in 0..14 {
        junk.insert(format!("junk{i}"), json!("j".repeat(60_000)));
    }
    for _ in 0..50 {
        let (status, v) = mallory
            .send(
                "tools/call",
                json!({"name": "generate_report", "arguments": junk}),
            )
            .await;
        assert_eq!(status, 200);
        assert_eq!(v["result"]["isError"], true, "{v}");
    }
    let after_junk = bytes();
    eprintln!("junk loop: 50 calls of ~840 kB of unknown keys, {after_junk} bytes stored");
    assert!(after_junk < 4_096, "{after_junk}");

    let mut accepted = 0;
    let mut refused: Option<Value> = None;
    for _ in 0..50 {
        let (status, v) = mallory
            .send(
                "tools/call",
                json!({"name": "slow_compute", "arguments": {"seconds": 60, "label": "x".repeat(60_000)}}),
            )
            .await;
        if status == 429 {
            refused = Some(v);
            break;
        }
        assert_eq!(status, 200, "{v}");
        let id = v["result"]["taskId"].as_str().unwrap().to_owned();
        mallory.ok("tasks/cancel", json!({"taskId": id})).await;
        accepted += 1;
    }
    let refused = refused.expect("the budget never refused");
    assert_eq!(refused["error"]["data"]["reason"], "storage");
    let stored = bytes();
    eprintln!(
        "byte budget through the component: {accepted} tasks of 60 kB accepted, then 429; {stored} bytes stored (budget {BUDGET})"
    );
    assert!(stored <= BUDGET + 4_096, "{stored}");
    // Another principal on the same store is unaffected.
    let alice = with("acme/alice");
    let (status, v) = alice
        .send(
            "tools/call",
            json!({"name": "slow_compute", "arguments": {"seconds": 60, "label": "x".repeat(60_000)}}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(mallory.rt.traps() + alice.rt.traps(), 0);
}

/// Through the component, on the host's store: a principal's quota record
/// and finished list are written due when their last task expires, and the
/// tick deletes them with the tasks, so nothing of the principal is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_principal_who_goes_away_leaves_nothing_stored() {
    use mcp_tasks_edge::owner::Owner;
    use mcp_tasks_edge::tasks::quota;
    const TTL: i64 = 60_000;
    let dir = TempDir::new("quota-lapse");
    let clock = Clock::manual(T0);
    let mut s = settings(&clock);
    s.env.push(("MCP_MAX_OUTSTANDING_TASKS".into(), "1".into()));
    s.env.push(("MCP_TASK_TTL_MS".into(), TTL.to_string()));
    let c = Client::new(runtime(dir.path(), s));
    for _ in 0..2 {
        // The second create rescans (at most once a second), finds the
        // first task finished and moves it to the finished list.
        clock.advance(1_000);
        let (status, v) = c
            .send(
                "tools/call",
                json!({"name": "slow_compute", "arguments": {"seconds": 60, "label": "gone"}}),
            )
            .await;
        assert_eq!(status, 200, "{v}");
        let id = v["result"]["taskId"].as_str().unwrap().to_owned();
        c.ok("tasks/cancel", json!({"taskId": id})).await;
    }
    let owner = Owner {
        tenant: "acme".into(),
        principal: "alice".into(),
    };
    let store = c.rt.store();
    let own = store
        .get(&quota::key(&owner))
        .unwrap()
        .expect("quota record");
    let done = store
        .get(&quota::finished_key(&owner))
        .unwrap()
        .expect("finished list");
    let last = clock.now_ms();
    assert_eq!(own.due_at, Some(last + TTL));
    assert_eq!(done.due_at, Some(last - 1_000 + TTL));
    assert_eq!(store.stored().unwrap().1, 4, "two tasks and two records");

    clock.set(last + TTL - 1);
    c.rt.tick(clock.now_ms()).await.unwrap();
    assert!(
        store.get(&quota::key(&owner)).unwrap().is_some(),
        "not before"
    );
    clock.set(last + TTL);
    let report = c.rt.tick(clock.now_ms()).await.unwrap();
    assert_eq!(store.stored().unwrap(), (0, 0), "{report:?}");
    assert_eq!(c.rt.traps(), 0);
}
