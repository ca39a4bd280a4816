//! Ownership and expiry: a foreign, an expired, a purged and a never-issued
//! id answer byte-identically, and nothing foreign changes.

use mcp_tasks_edge::block_on;
use mcp_tasks_edge::store::Store;
use serde_json::{Value, json};

use crate::support::{Harness, owner, standard_headers};

/// The raw response bytes for `method` on `task`, always with request id 42.
fn probe(h: &Harness, method: &str, task: &str) -> (u16, Vec<u8>) {
    let mut params = json!({"taskId": task});
    if method == "tasks/update" {
        params["inputResponses"] =
            json!({"confirm": {"action": "accept", "content": {"confirm": true}}});
    }
    params["_meta"] = crate::support::meta(crate::support::caps());
    let msg = json!({"jsonrpc": "2.0", "id": 42, "method": method, "params": params});
    let hs = standard_headers(&msg);
    let refs: Vec<(&str, &str)> = hs.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    let r = h.post_raw(&refs, &serde_json::to_vec(&msg).unwrap());
    (r.status, r.body_bytes().to_vec())
}

#[test]
fn foreign_expired_purged_and_unknown_ids_are_indistinguishable() {
    let alice = Harness::new();
    let store = alice.store.clone();
    let mine = alice.start("confirm_delete", json!({"filename": "a"}));
    alice.run_until_settled(&mine, 100, 3);
    let expiring = alice.start("slow_compute", json!({"seconds": 60}));
    let purged = alice.start("slow_compute", json!({"seconds": 60}));

    let ttl = alice.server.config().task_ttl_ms as i64;
    let bob = Harness::over(store.clone(), 2).owned_by(owner("acme", "bob"));
    let mallory = Harness::over(store.clone(), 3).owned_by(owner("evil-corp", "alice"));
    // Move everyone past the TTL of the two slow tasks but not of `mine`?
    // All were created at the same instant, so expire by moving alice's
    // clock only for the expired probes below.
    let reference = probe(&alice, "tasks/get", "tsk_never_issuedAAAAAAAAAA");
    assert_eq!(reference.0, 200);
    let v: Value = serde_json::from_slice(&reference.1).unwrap();
    assert_eq!(v["error"]["code"], -32602);

    for method in ["tasks/get", "tasks/update", "tasks/cancel"] {
        let unknown = probe(&alice, method, "tsk_never_issuedAAAAAAAAAA");
        assert_eq!(
            probe(&bob, method, &mine),
            unknown,
            "{method}: other principal, same tenant"
        );
        assert_eq!(
            probe(&mallory, method, &mine),
            unknown,
            "{method}: same principal name, other tenant"
        );
        // The unknown answer names no id, so it is the same for any id.
        assert_eq!(
            probe(&alice, method, "tsk_someOtherIdAAAAAAAAAAA"),
            unknown,
            "{method}"
        );
    }
    // Nothing foreign changed the task.
    let before = block_on(store.get(&mine)).unwrap();
    for h in [&bob, &mallory] {
        probe(h, "tasks/update", &mine);
        probe(h, "tasks/cancel", &mine);
    }
    assert_eq!(block_on(store.get(&mine)).unwrap(), before);
    assert_eq!(alice.status(&mine), "input_required");

    // Expired but not yet purged: the owner learns it expired; anyone else
    // gets the unknown answer. Then the sweep purges it.
    alice.advance(ttl);
    bob.advance(ttl);
    for method in ["tasks/get", "tasks/update", "tasks/cancel"] {
        let unknown = probe(&alice, method, "tsk_never_issuedAAAAAAAAAA");
        let (status, own) = probe(&alice, method, &expiring);
        let v: Value = serde_json::from_slice(&own).unwrap();
        assert_eq!(status, 200);
        assert_eq!(v["error"]["code"], -32602, "{method}");
        assert_eq!(
            v["error"]["message"], "Failed to retrieve task: Task has expired",
            "{method}"
        );
        assert_eq!(
            probe(&bob, method, &expiring),
            probe(&bob, method, "tsk_never_issuedAAAAAAAAAA"),
            "{method}: foreign and expired"
        );
        assert_eq!(
            unknown.1,
            probe(&bob, method, "tsk_never_issuedAAAAAAAAAA").1
        );
    }
    let report = alice.tick();
    // The three tasks, and alice's quota record with them.
    assert_eq!(report.purged, 4, "{report}");
    for id in [&mine, &expiring, &purged] {
        assert_eq!(
            block_on(store.get(id)).unwrap(),
            None,
            "purged from the store"
        );
    }
    for method in ["tasks/get", "tasks/update", "tasks/cancel"] {
        assert_eq!(
            probe(&alice, method, &purged),
            probe(&alice, method, "tsk_never_issuedAAAAAAAAAA"),
            "{method}: purged"
        );
    }
}

#[test]
fn a_malformed_id_is_refused_as_such() {
    let h = Harness::new();
    for bad in [
        "garbage!!",
        "",
        "tsk_",
        "tsk_short",
        "job_AAAAAAAAAAAAAAAAAAAAAA",
        "tsk_AAAAAAAAAAAAAAAAAAAAAAA",
    ] {
        for method in ["tasks/get", "tasks/update", "tasks/cancel"] {
            let (status, body) = probe(&h, method, bad);
            let v: Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(status, 200, "{method} {bad:?}");
            assert_eq!(v["error"]["code"], -32602, "{method} {bad:?}");
            assert_eq!(
                v["error"]["message"],
                "Invalid taskId: not a task id (expected tsk_ and 22, 24, 30 or 32 base64url characters)",
                "{method} {bad:?}"
            );
        }
    }
    // A well-formed unknown id gets the one not-found answer.
    let (_, body) = probe(&h, "tasks/get", "tsk_AAAAAAAAAAAAAAAAAAAAAA");
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        v["error"]["message"],
        "Failed to retrieve task: Task not found"
    );
}

#[test]
fn a_task_stays_readable_until_its_ttl() {
    let h = Harness::new();
    let task = h.start("slow_compute", json!({"seconds": 1}));
    let created = h.get(&task);
    let ttl = created["ttlMs"].as_i64().unwrap();
    h.advance(ttl - 1);
    h.tick();
    assert_eq!(h.status(&task), "completed");
    h.advance(1);
    let (_, e) = h.send("tasks/get", json!({"taskId": task}));
    assert_eq!(e["error"]["code"], -32602);
}

#[test]
fn listen_acknowledges_only_the_callers_own_tasks() {
    let alice = Harness::new();
    let mine = alice.start("slow_compute", json!({"seconds": 60}));
    let bob = Harness::over(alice.store.clone(), 2).owned_by(owner("acme", "bob"));
    let theirs = bob.start("slow_compute", json!({"seconds": 60}));
    let ack = crate::listen::open(&alice, json!([mine, theirs, "tsk_unknown"])).0;
    assert_eq!(ack["params"]["notifications"]["taskIds"], json!([mine]));
}
