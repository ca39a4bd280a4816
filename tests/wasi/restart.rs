//! Restart recovery: everything but the database file is dropped (engine,
//! compiled component, instances, store connections) and rebuilt; tasks
//! answer and run to completion, including one whose runner died mid-step
//! holding a lease.

use std::sync::Arc;

use mcp_tasks_edge::block_on;
use mcp_tasks_edge::tasks::record::TaskRecord;
use mcp_tasks_edge::tasks::runner::{ClaimOutcome, Runner};
use serde_json::json;

use crate::runtime::{Clock, Runtime};
use crate::sqlite::SqliteStore;
use crate::support::{Client, T0, TempDir, fresh_engine, settings};

/// A host "process": its own engine, component, store handle and instances.
fn boot(dir: &std::path::Path, clock: &Clock) -> Client {
    let (engine, component) = fresh_engine();
    let store = Arc::new(SqliteStore::open(dir).unwrap());
    Client::new(Runtime::from_component(&engine, &component, store, settings(clock)).unwrap())
}

fn record(dir: &std::path::Path, id: &str) -> TaskRecord {
    let store = SqliteStore::open(dir).unwrap();
    mcp_tasks_edge::tasks::decode(&store.get(id).unwrap().unwrap().body).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_survive_a_restart_and_a_runner_that_died_mid_step() {
    let dir = TempDir::new("restart");
    let clock = Clock::manual(T0);

    let first = boot(dir.path(), &clock);
    let report = first
        .start("generate_report", json!({"size": "small"}))
        .await;
    let compute = first.start("slow_compute", json!({"seconds": 5})).await;
    clock.advance(1_000);
    assert_eq!(first.rt.tick(clock.now_ms()).await.unwrap().stepped, 1);
    assert_eq!(first.status(&report).await, "input_required");
    assert_eq!(first.rt.traps(), 0);
    drop(first);

    // A runner claims the compute task when it is due, then dies before
    // committing: its lease stays in the record.
    clock.set(T0 + 5_000);
    {
        let store = SqliteStore::open(dir.path()).unwrap();
        let tools = mcp_tasks_edge::conformance::tools().and(mcp_tasks_edge::demo::tools(
            mcp_tasks_edge::demo::DEFAULT_OUTLINE_MS,
        ));
        let info = serde_json::json!({"name": "mcp-tasks-edge", "version": "0"});
        let keys = mcp_tasks_edge::crypto::Keyring::new(b"secret".to_vec());
        let runner = Runner::new(&store, &tools, "crashed-runner", 30_000, &info, &keys);
        let claim = block_on(runner.claim(&compute, clock.now_ms())).unwrap();
        assert!(matches!(claim, ClaimOutcome::Claimed(_)), "{claim:?}");
    }

    let second = boot(dir.path(), &clock);
    let r = second.get(&report).await;
    assert_eq!(r["status"], "input_required");
    assert!(r["inputRequests"]["approve_outline"].is_object(), "{r}");
    assert_eq!(second.status(&compute).await, "working");

    // The lease holds until it expires: the task is not due before then.
    clock.set(T0 + 6_000);
    let tick = second.rt.tick(clock.now_ms()).await.unwrap();
    assert_eq!((tick.due, tick.stepped), (0, 0), "{tick}");
    assert_eq!(tick.next_due, Some(T0 + 5_000 + 30_000), "{tick}");

    second
        .ok(
            "tasks/update",
            json!({"taskId": report, "inputResponses": {"approve_outline": {"action": "accept", "content": {"approved": true}}}}),
        )
        .await;
    // The report's last step is replayable: it ran inside the update.
    let r = second.get(&report).await;
    assert_eq!(r["status"], "completed");
    let tick = second.rt.tick(clock.now_ms()).await.unwrap();
    assert_eq!((tick.stepped, tick.finished), (0, 0), "{tick}");
    assert_eq!(r["result"]["structuredContent"]["approved"], true);

    // After the dead runner's lease expires, the task is taken over.
    clock.set(T0 + 5_000 + 30_000);
    let tick = second.rt.tick(clock.now_ms()).await.unwrap();
    assert_eq!((tick.stepped, tick.finished), (1, 1), "{tick}");
    let c = second.get(&compute).await;
    assert_eq!(c["status"], "completed", "{c}");
    assert_eq!(second.rt.traps(), 0);

    assert_eq!(record(dir.path(), &report).steps, 2);
    assert_eq!(record(dir.path(), &compute).steps, 1);
    assert_eq!(record(dir.path(), &compute).lease, None);
}

/// A task id leads with its creation time, as the component read it from
/// the host's clock (48 bits of milliseconds before the random part, after
/// a placement if there is one), so tasks made about the same time sit
/// together in the store's key order; the time it carries is the task's
/// creation time, across a restart too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_ids_lead_with_their_creation_time() {
    let dir = TempDir::new("id-time");
    let clock = Clock::manual(T0);
    let time = |id: &str| {
        let bytes = mcp_tasks_edge::crypto::b64url_decode(&id[4..]).unwrap();
        let skip = bytes.len() - 22;
        bytes[skip..skip + 6]
            .iter()
            .fold(0i64, |t, b| (t << 8) | i64::from(*b))
    };
    let client = boot(dir.path(), &clock);
    let first = client.start("slow_compute", json!({"seconds": 5})).await;
    clock.advance(1_500);
    let second = client.start("slow_compute", json!({"seconds": 5})).await;
    drop(client);
    clock.advance(70_000);
    let client = boot(dir.path(), &clock);
    let third = client.start("slow_compute", json!({"seconds": 5})).await;
    assert_eq!(
        [time(&first), time(&second), time(&third)],
        [T0, T0 + 1_500, T0 + 71_500]
    );
    for id in [&first, &second, &third] {
        assert_eq!(client.status(id).await, "working", "{id}");
        assert_eq!(record(dir.path(), id).created_at, time(id), "{id}");
    }
}
