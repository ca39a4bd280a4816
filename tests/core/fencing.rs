//! Leases and fencing: a runner that lost its lease cannot commit, a client
//! write that races a step is kept, every step commits exactly once.

use std::cell::Cell;
use std::sync::Arc;

use mcp_tasks_edge::block_on;
use mcp_tasks_edge::protocol::tasks::TaskStatus;
use mcp_tasks_edge::store::{MemoryStore, Store};
use mcp_tasks_edge::tasks::runner::{ClaimOutcome, CommitOutcome};
use serde_json::json;

use crate::support::{Harness, Interleaved, claimed};

#[test]
fn a_runner_paused_past_its_lease_cannot_commit() {
    let store = Arc::new(MemoryStore::new());
    let a = Harness::over(store.clone(), 1);
    let b = Harness::over(store.clone(), 2);
    assert_ne!(a.server.runner_id(), b.server.runner_id());
    let task = a.start("slow_compute", json!({"seconds": 1}));
    let t1 = a.now.get() + 1_000;
    let lease = a.server.config().lease_ms as i64;

    // A claims, then stalls past its lease.
    let claim_a = claimed(block_on(a.server.runner().claim(&task, t1)).unwrap());
    let out_a = block_on(a.server.runner().step(&claim_a, t1));
    // While A holds the lease, B cannot take the task.
    assert!(matches!(
        block_on(b.server.runner().claim(&task, t1 + 10)).unwrap(),
        ClaimOutcome::Skipped
    ));
    // After it expires, B takes over and commits.
    let t2 = t1 + lease + 1;
    let claim_b = claimed(block_on(b.server.runner().claim(&task, t2)).unwrap());
    let out_b = block_on(b.server.runner().step(&claim_b, t2));
    assert_eq!(
        block_on(b.server.runner().commit(claim_b, out_b, t2)).unwrap(),
        CommitOutcome::Committed(TaskStatus::Completed)
    );

    // A wakes up: by its own clock the lease is gone...
    assert_eq!(
        block_on(
            a.server
                .runner()
                .commit(claim_a.clone(), out_a.clone(), t2 + 5)
        )
        .unwrap(),
        CommitOutcome::LeaseExpired
    );
    // ...and even with a clock that lags (thinking the lease still runs), the
    // version fence stops it.
    assert_eq!(
        block_on(a.server.runner().commit(claim_a, out_a, t1 + 1)).unwrap(),
        CommitOutcome::Fenced
    );
    b.now.set(t2);
    let t = b.get(&task);
    assert_eq!(t["status"], "completed");
    let entry = block_on(store.get(&task)).unwrap().unwrap();
    let record = mcp_tasks_edge::tasks::decode(&entry.body).unwrap();
    assert_eq!(record.steps, 1, "exactly one step committed");
}

#[test]
fn a_crashed_runners_task_comes_back_after_the_lease() {
    let h = Harness::new();
    let task = h.start("slow_compute", json!({"seconds": 1}));
    h.advance(1_000);
    // Claim and never commit (the runner died).
    let _lost = claimed(block_on(h.server.runner().claim(&task, h.now.get())).unwrap());
    assert_eq!(h.tick().stepped, 0, "leased: nobody else steps it");
    h.advance(h.server.config().lease_ms as i64);
    assert_eq!(h.tick().stepped, 1);
    assert_eq!(h.status(&task), "completed");
}

#[test]
fn concurrent_updates_to_different_keys_both_land() {
    let h = Harness::new();
    let task = h.start("multi_input", json!({}));
    let t = h.run_until_settled(&task, 100, 5);
    assert_eq!(t["status"], "input_required");
    let store = h.store.clone();
    let owner = h.owner.clone();
    let now = h.now.get();
    let task2 = task.clone();
    // Another client's update for "approval" lands between our read and write.
    let interleaved = Interleaved {
        inner: &store,
        arm: Cell::new(true),
        interloper: Box::new(move |inner| {
            let info = json!({"name": "test", "version": "0"});
            let other = mcp_tasks_edge::tasks::TaskService::new(inner, &info);
            let answer = json!({"approval": {"action": "accept", "content": {"confirm": true}}});
            block_on(other.update(&owner, &task2, answer.as_object().unwrap(), now)).unwrap();
        }),
    };
    let info = json!({"name": "test", "version": "0"});
    let ours = mcp_tasks_edge::tasks::TaskService::new(&interleaved, &info);
    let answer = json!({"reviewer": {"action": "accept", "content": {"name": "carol"}}});
    block_on(ours.update(&h.owner, &task, answer.as_object().unwrap(), now)).unwrap();
    assert_eq!(h.status(&task), "working", "both answers arrived");
    let t = h.run_until_settled(&task, 100, 3);
    assert_eq!(
        t["result"]["structuredContent"],
        json!({"reviewer": "carol", "approved": true})
    );
}

#[test]
fn a_cancel_racing_a_lease_is_kept() {
    let h = Harness::new();
    let task = h.start("slow_compute", json!({"seconds": 1}));
    h.advance(1_000);
    let store = h.store.clone();
    let owner = h.owner.clone();
    let now = h.now.get();
    let t2 = task.clone();
    let interleaved = Interleaved {
        inner: &store,
        arm: Cell::new(true),
        interloper: Box::new(move |inner| {
            block_on(
                mcp_tasks_edge::tasks::TaskService::new(
                    inner,
                    &json!({"name": "test", "version": "0"}),
                )
                .cancel(&owner, &t2, now),
            )
            .unwrap();
        }),
    };
    let tools = crate::support::all_tools();
    let info = json!({"name": "test", "version": "0"});
    let keys =
        mcp_tasks_edge::crypto::Keyring::new(b"test-secret-key-of-at-least-32-bytes".to_vec());
    let runner =
        mcp_tasks_edge::tasks::runner::Runner::new(&interleaved, &tools, "r", 30_000, &info, &keys);
    // The claim's write conflicts with the cancel: the runner backs off.
    assert!(matches!(
        block_on(runner.claim(&task, now)).unwrap(),
        ClaimOutcome::Skipped
    ));
    assert_eq!(h.status(&task), "cancelled");
}

#[test]
fn two_runners_ticking_in_turn_commit_every_step_once() {
    let store = Arc::new(MemoryStore::new());
    let a = Harness::over(store.clone(), 1);
    let b = Harness::over(store.clone(), 2);
    let mut ids = Vec::new();
    for i in 0..50 {
        let h = if i % 2 == 0 { &a } else { &b };
        ids.push(h.start("slow_compute", json!({"seconds": 1 + (i % 3)})));
    }
    let mut stepped = 0;
    for round in 0..10 {
        for h in [&a, &b] {
            h.now.set(crate::support::T0 + 500 * round);
            stepped += h.tick().stepped;
        }
    }
    assert_eq!(stepped, 50, "one step per task, whichever runner took it");
    for id in &ids {
        let e = block_on(store.get(id)).unwrap().unwrap();
        let r = mcp_tasks_edge::tasks::decode(&e.body).unwrap();
        assert_eq!((r.status(), r.steps), (TaskStatus::Completed, 1), "{id}");
    }
}

#[test]
fn ticks_on_disjoint_slices_advance_every_due_task_exactly_once() {
    use mcp_tasks_edge::tasks::runner::Slice;
    let store = Arc::new(MemoryStore::new());
    let h = Harness::over(store.clone(), 1);
    let tasks: Vec<String> = (0..40)
        .map(|_| h.start("slow_compute", json!({"seconds": 1})))
        .collect();
    let now = h.now.get() + 1_000;
    let slices: Vec<Slice> = (0..4).map(|i| Slice::new(i, 4).unwrap()).collect();
    let mut stepped = 0;
    for slice in &slices {
        let mine = tasks.iter().filter(|t| slice.owns(t)).count();
        assert!(mine > 0, "every slice owns some of 40 tasks");
        let report = block_on(h.server.tick_slice(now, *slice));
        assert_eq!((report.due, report.stepped), (mine, mine), "{report}");
        stepped += report.stepped;
    }
    assert_eq!(stepped, tasks.len());
    // Nothing is left for any slice, nor for a whole tick.
    for slice in &slices {
        assert_eq!(block_on(h.server.tick_slice(now, *slice)).due, 0);
    }
    assert_eq!(block_on(h.server.tick(now)).due, 0);
    for task in &tasks {
        let entry = block_on(store.get(task)).unwrap().unwrap();
        let record = mcp_tasks_edge::tasks::decode(&entry.body).unwrap();
        assert_eq!(record.steps, 1, "{task}: one step, committed once");
        assert_eq!(record.status(), TaskStatus::Completed);
    }
    // Each key is in exactly one slice.
    for task in &tasks {
        assert_eq!(slices.iter().filter(|s| s.owns(task)).count(), 1);
    }
}

#[test]
fn two_runners_may_run_a_replayable_step_at_once_and_exactly_one_commits() {
    let store = Arc::new(MemoryStore::new());
    let a = Harness::over(store.clone(), 1);
    let b = Harness::over(store.clone(), 2);
    let task = a.start("generate_report", json!({"size": "small"}));
    let t = a.now.get() + 1_000;
    let claim_a = claimed(block_on(a.server.runner().claim(&task, t)).unwrap());
    let claim_b = claimed(block_on(b.server.runner().claim(&task, t)).unwrap());
    assert!(!claim_a.leased && !claim_b.leased);
    let out_a = block_on(a.server.runner().step(&claim_a, t));
    let out_b = block_on(b.server.runner().step(&claim_b, t));
    assert_eq!(
        block_on(b.server.runner().commit(claim_b, out_b, t)).unwrap(),
        CommitOutcome::Committed(TaskStatus::InputRequired)
    );
    assert_eq!(
        block_on(a.server.runner().commit(claim_a, out_a, t)).unwrap(),
        CommitOutcome::Fenced
    );
    let got = a.get(&task);
    assert_eq!(got["status"], "input_required", "{got}");
    assert_eq!(
        got["inputRequests"].as_object().map(|m| m.len()),
        Some(1),
        "{got}"
    );
}

/// A task cancelled after its step's lease ran out (the runner slow or
/// gone) is due only when it expires, not at that lease's end for ever
/// (every tick read it again, and a Worker's alarm fired each second).
#[test]
fn a_task_cancelled_after_its_lease_ran_out_is_not_due_again() {
    let h = Harness::new();
    let task = h.start("slow_compute", json!({"seconds": 1}));
    h.advance(1_000);
    let _lost = claimed(block_on(h.server.runner().claim(&task, h.now.get())).unwrap());
    h.advance(h.server.config().lease_ms as i64 + 1);
    let info = json!({"name": "test", "version": "0"});
    let service = mcp_tasks_edge::tasks::TaskService::new(h.store.as_ref(), &info);
    block_on(service.cancel(&h.owner, &task, h.now.get())).unwrap();
    assert_eq!(h.status(&task), "cancelled");
    let entry = block_on(h.store.get(&task)).unwrap().unwrap();
    let record = mcp_tasks_edge::tasks::decode(&entry.body).unwrap();
    assert_eq!(entry.due_at, Some(record.expires_at()));
    assert_eq!(h.tick().due, 0);
}

/// A slice finds its own due task behind another slice's backlog: with a
/// budget of 4 and two slices, five tasks of slice 0 due first do not hide
/// slice 1's task due after them.
#[test]
fn a_slice_finds_its_due_task_behind_another_slices_backlog() {
    use mcp_tasks_edge::tasks::runner::Slice;
    let mut cfg = crate::support::config();
    cfg.tick_budget = 4;
    let h = Harness::with_config(Arc::new(MemoryStore::new()), 1, cfg);
    let (first, second) = (Slice::new(0, 2).unwrap(), Slice::new(1, 2).unwrap());
    // Tasks of one slice only: another's is cancelled (due at expiry only).
    let start_in = |slice: Slice, seconds: u64| loop {
        let task = h.start("slow_compute", json!({"seconds": seconds}));
        if slice.owns(&task) {
            break task;
        }
        h.send("tasks/cancel", json!({"taskId": task}));
    };
    let backlog: Vec<String> = (0..5).map(|_| start_in(first, 1)).collect();
    let behind = start_in(second, 2);
    let now = h.now.get() + 2_000;
    let report = block_on(h.server.tick_slice(now, second));
    assert_eq!((report.due, report.stepped), (1, 1), "{report}");
    assert_eq!(h.status(&behind), "completed");
    let report = block_on(h.server.tick_slice(now, first));
    assert_eq!(report.due, 2, "its share of the budget: {report}");
    assert_eq!(backlog.len(), 5);
}
