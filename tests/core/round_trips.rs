//! Store round trips per method: the minimum each method's semantics need.

use std::sync::Arc;

use mcp_tasks_edge::block_on;
use mcp_tasks_edge::http::{HttpRequest, serve};
use mcp_tasks_edge::ids::SequentialIds;
use mcp_tasks_edge::server::{RequestContext, Server};
use mcp_tasks_edge::store::{CountingStore, Counts, MemoryStore};
use serde_json::{Value, json};

use crate::support::{T0, caps, config, meta, owner, standard_headers};

type Counted = Arc<CountingStore<MemoryStore>>;

fn send(s: &Server<Counted>, now: i64, method: &str, params: Value) -> Value {
    let mut params = params;
    params["_meta"] = meta(caps());
    let msg = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let headers: Vec<(String, String)> = standard_headers(&msg)
        .into_iter()
        .map(|(a, b)| (a.to_owned(), b))
        .collect();
    let body = serde_json::to_vec(&msg).unwrap();
    let req = HttpRequest {
        method: "POST",
        path: "/mcp",
        headers: &mcp_tasks_edge::http::header_refs(&headers),
        body: &body,
    };
    let r = block_on(serve(
        s,
        &req,
        &RequestContext {
            owner: owner("acme", "alice"),
            now,
        },
    ));
    serde_json::from_slice(r.body_bytes()).unwrap()
}

fn counts(gets: u64, puts: u64, deletes: u64, due_queries: u64) -> Counts {
    Counts {
        gets,
        puts,
        deletes,
        due_queries,
    }
}

fn server(quota: usize) -> (Server<Counted>, Counted) {
    let store: Counted = Arc::new(CountingStore::new(MemoryStore::new()));
    let mut c = config();
    c.limits.max_outstanding_tasks = quota;
    if quota == 0 {
        // Every per-caller quota off: no quota record at all.
        c.limits.max_stored_bytes = 0;
        c.limits.max_tasks_per_minute = 0;
    }
    (
        Server::new(
            store.clone(),
            c,
            crate::support::all_tools(),
            Box::new(SequentialIds::starting_at(1)),
        )
        .unwrap(),
        store,
    )
}

#[test]
fn each_method_costs_the_minimum() {
    let (s, store) = server(0);
    let measure = |name: &str, want: Counts, f: &mut dyn FnMut() -> Value| {
        store.take();
        let r = f();
        assert!(r.get("error").is_none(), "{name}: {r}");
        let got = store.take();
        println!("round trips {name}: {got:?}");
        assert_eq!(got, want, "{name}");
        r
    };
    measure("server/discover", counts(0, 0, 0, 0), &mut || {
        send(&s, T0, "server/discover", json!({}))
    });
    measure("tools/list", counts(0, 0, 0, 0), &mut || {
        send(&s, T0, "tools/list", json!({}))
    });
    measure("tools/call (synchronous)", counts(0, 0, 0, 0), &mut || {
        send(
            &s,
            T0,
            "tools/call",
            json!({"name": "greet", "arguments": {"name": "x"}}),
        )
    });
    // Create: one conditional write, nothing else.
    let r = measure(
        "tools/call (create a task)",
        counts(0, 1, 0, 0),
        &mut || {
            send(
                &s,
                T0,
                "tools/call",
                json!({"name": "confirm_delete", "arguments": {"filename": "f"}}),
            )
        },
    );
    let id = r["result"]["taskId"].as_str().unwrap().to_owned();
    // Get: one read.
    measure("tasks/get", counts(1, 0, 0, 0), &mut || {
        send(&s, T0, "tasks/get", json!({"taskId": id}))
    });
    // Tick on one due task: the due query, a read, the lease write, the
    // commit, and the next-due query that schedules the next tick.
    store.take();
    assert_eq!(block_on(s.tick(T0)).stepped, 1);
    assert_eq!(
        store.take(),
        counts(1, 2, 0, 2),
        "tick: due query, read, lease, commit, next due"
    );
    let tick_counts = || {
        store.take();
        assert_eq!(block_on(s.tick(T0)).stepped, 0);
        store.take()
    };
    assert_eq!(
        tick_counts(),
        counts(0, 0, 0, 2),
        "an idle tick only asks the index"
    );
    // Update: read, conditional write.
    measure("tasks/update", counts(1, 1, 0, 0), &mut || {
        send(
            &s,
            T0,
            "tasks/update",
            json!({"taskId": id, "inputResponses": {"confirm": {"action": "accept", "content": {"confirm": true}}}}),
        )
    });
    // Update with nothing outstanding: the read only.
    measure("tasks/update (ignored)", counts(1, 0, 0, 0), &mut || {
        send(
            &s,
            T0,
            "tasks/update",
            json!({"taskId": id, "inputResponses": {"nope": {}}}),
        )
    });
    store.take();
    assert_eq!(block_on(s.tick(T0 + 1)).stepped, 1);
    assert_eq!(
        store.take(),
        counts(1, 2, 0, 2),
        "tick: due query, read, lease, commit, next due"
    );
    // Cancel on a terminal task: the read only. On a waiting one: read + write.
    measure("tasks/cancel (terminal)", counts(1, 0, 0, 0), &mut || {
        send(&s, T0, "tasks/cancel", json!({"taskId": id}))
    });
    let r = send(
        &s,
        T0,
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 60}}),
    );
    let waiting = r["result"]["taskId"].as_str().unwrap().to_owned();
    measure("tasks/cancel (waiting)", counts(1, 1, 0, 0), &mut || {
        send(&s, T0, "tasks/cancel", json!({"taskId": waiting}))
    });
    // Unknown ids that are not task-shaped cost nothing.
    store.take();
    send(&s, T0, "tasks/get", json!({"taskId": "junk"}));
    assert_eq!(store.take(), counts(0, 0, 0, 0));
    // Purge of an expired task: due query, read, delete, next due.
    store.take();
    let ttl = s.config().task_ttl_ms as i64;
    assert_eq!(block_on(s.tick(T0 + ttl)).purged, 2);
    assert_eq!(store.take(), counts(2, 0, 2, 2));
    let later = T0 + ttl;
    // A replayable step (generate_report) skips the lease: the due query,
    // a read, the commit, the next due.
    let r = send(
        &s,
        later,
        "tools/call",
        json!({"name": "generate_report", "arguments": {"size": "small"}}),
    );
    assert!(r["result"]["taskId"].is_string(), "{r}");
    store.take();
    let outline = mcp_tasks_edge::demo::DEFAULT_OUTLINE_MS as i64;
    assert_eq!(block_on(s.tick(later + outline)).stepped, 1);
    assert_eq!(
        store.take(),
        counts(1, 1, 0, 2),
        "replayable step: due query, read, commit, next due"
    );
    // The answer that makes its next step due runs that step inside the
    // update: one read, one write, and the task is completed.
    let id = r["result"]["taskId"].as_str().unwrap().to_owned();
    let t = send(&s, later + outline, "tasks/get", json!({"taskId": id}));
    let key = t["result"]["inputRequests"]
        .as_object()
        .and_then(|m| m.keys().next().cloned())
        .unwrap();
    store.take();
    let u = send(
        &s,
        later + outline,
        "tasks/update",
        json!({"taskId": id, "inputResponses": {key: {"action": "accept", "content": {"approved": true}}}}),
    );
    assert_eq!(u["result"]["resultType"], "complete", "{u}");
    assert_eq!(
        store.take(),
        counts(1, 1, 0, 0),
        "update with its step inline"
    );
    let t = send(&s, later + outline, "tasks/get", json!({"taskId": id}));
    assert_eq!(t["result"]["status"], "completed", "{t}");
    assert_eq!(block_on(s.tick(later + outline)).stepped, 0);
}

/// A replayable step due at once runs inside the `tools/call` that creates
/// its task: one write stores the task as the step left it, and no runner
/// has anything left to do.
#[test]
fn a_replayable_first_step_due_at_once_runs_inside_the_create() {
    let store: Counted = Arc::new(CountingStore::new(MemoryStore::new()));
    let mut c = config();
    c.limits.max_outstanding_tasks = 0;
    c.limits.max_stored_bytes = 0;
    c.limits.max_tasks_per_minute = 0;
    let s = Server::new(
        store.clone(),
        c,
        mcp_tasks_edge::demo::tools(0),
        Box::new(SequentialIds::starting_at(1)),
    )
    .unwrap();
    store.take();
    let r = send(
        &s,
        T0,
        "tools/call",
        json!({"name": "generate_report", "arguments": {"size": "small"}}),
    );
    assert_eq!(r["result"]["resultType"], "task", "{r}");
    assert_eq!(r["result"]["status"], "input_required", "{r}");
    assert_eq!(store.take(), counts(0, 1, 0, 0), "one conditional write");
    let id = r["result"]["taskId"].as_str().unwrap();
    let t = send(&s, T0, "tasks/get", json!({"taskId": id}));
    assert_eq!(t["result"]["status"], "input_required", "{t}");
    assert!(t["result"]["inputRequests"].is_object(), "{t}");
    let tick = block_on(s.tick(T0));
    assert_eq!((tick.due, tick.stepped), (0, 0), "{tick:?}");
}

#[test]
fn the_quota_costs_one_read_and_one_write_per_create() {
    let (s, store) = server(10);
    store.take();
    send(
        &s,
        T0,
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 60}}),
    );
    assert_eq!(store.take(), counts(1, 2, 0, 0));
}
