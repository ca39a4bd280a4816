//! Hostile load from one principal with a valid token: stored bytes,
//! creation rate, open listen streams and task size are bounded per
//! principal, with a clear 429 (or a tool argument error) and nothing
//! stored; another principal is unaffected; a corrupt counter is refused,
//! never reset.

use mcp_tasks_edge::block_on;
use mcp_tasks_edge::http::{HttpBody, Next};
use mcp_tasks_edge::store::Store;
use serde_json::{Value, json};

use crate::support::{Harness, caps, config, input_keys, meta, owner, standard_headers};

fn harness(edit: impl FnOnce(&mut mcp_tasks_edge::limits::Limits)) -> Harness {
    let mut c = config();
    edit(&mut c.limits);
    Harness::with_config(
        std::sync::Arc::new(mcp_tasks_edge::store::MemoryStore::new()),
        1,
        c,
    )
}

/// `tools/call` of `slow_compute` with a label of `label_bytes`.
fn create(h: &Harness, label_bytes: usize) -> (u16, Value) {
    h.send(
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 60, "label": "x".repeat(label_bytes)}}),
    )
}

#[test]
fn junk_arguments_are_refused_and_nothing_is_stored() {
    let h = Harness::new();
    let mut junk = serde_json::Map::new();
    for i in 0..14 {
        junk.insert(format!("junk{i}"), json!("j".repeat(60_000)));
    }
    junk.insert("size".into(), json!("small"));
    let before = h.store.bytes();
    for _ in 0..50 {
        let (status, v) = h.send(
            "tools/call",
            json!({"name": "generate_report", "arguments": junk}),
        );
        assert_eq!(status, 200);
        assert_eq!(v["result"]["isError"], true, "{v}");
        let text = v["result"]["content"][0]["text"].as_str().unwrap();
        assert!(
            text.contains("is not an argument of generate_report"),
            "{text}"
        );
    }
    assert_eq!(h.store.bytes(), before, "nothing stored");
    // Arguments the schema allows, but more of them than a task may store.
    let h = harness(|l| l.max_argument_bytes = 10_000);
    let (_, v) = create(&h, 20_000);
    assert_eq!(v["result"]["isError"], true, "{v}");
    assert!(
        v["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("more than the 10000 allowed")
    );
    assert_eq!(h.store.len(), 0);
}

#[test]
fn the_byte_budget_bounds_what_a_principal_stores() {
    const BUDGET: u64 = 1_000_000;
    let h = harness(|l| {
        l.max_stored_bytes = BUDGET;
        l.max_outstanding_tasks = 0;
    });
    let bob = Harness::over(h.store.clone(), 2).owned_by(owner("acme", "bob"));
    // The loop from the issue: big tasks, each cancelled at once.
    let mut accepted = 0;
    let mut refused = None;
    for _ in 0..50 {
        let (status, v) = create(&h, 60_000);
        if status == 429 {
            refused = Some(v);
            break;
        }
        let id = v["result"]["taskId"].as_str().unwrap().to_owned();
        h.ok("tasks/cancel", json!({"taskId": id}));
        accepted += 1;
    }
    let refused = refused.expect("the budget never refused");
    assert_eq!(refused["error"]["code"], -32602);
    assert_eq!(refused["error"]["data"]["reason"], "storage");
    assert_eq!(refused["error"]["data"]["maxStoredBytes"], BUDGET);
    let stored = h.store.bytes() as u64;
    println!(
        "byte budget: {accepted} tasks of 60 kB accepted, then 429; {stored} bytes stored (budget {BUDGET})"
    );
    // Within the budget, plus the small quota record.
    assert!(stored <= BUDGET + 4_096, "{stored}");
    // Nothing more is stored by refused creates.
    for _ in 0..5 {
        assert_eq!(create(&h, 60_000).0, 429);
    }
    assert_eq!(h.store.bytes() as u64, stored);
    // Another principal is unaffected.
    let (status, v) = create(&bob, 60_000);
    assert_eq!(status, 200, "{v}");
    // Once the tasks expire (and are purged), the budget is free again.
    let ttl = h.server.config().task_ttl_ms as i64;
    h.advance(ttl);
    h.tick();
    let (status, v) = create(&h, 60_000);
    assert_eq!(status, 200, "{v}");
}

#[test]
fn creates_are_rate_limited_per_principal() {
    let h = harness(|l| l.max_tasks_per_minute = 5);
    let bob = Harness::over(h.store.clone(), 2).owned_by(owner("acme", "bob"));
    for _ in 0..5 {
        assert_eq!(create(&h, 1).0, 200);
    }
    let (status, v) = create(&h, 1);
    assert_eq!(status, 429, "{v}");
    assert_eq!(v["error"]["data"]["reason"], "rate");
    assert_eq!(v["error"]["data"]["retryAfterMs"], 12_000);
    // The header says the same wait.
    let msg = json!({"jsonrpc": "2.0", "id": 99, "method": "tools/call", "params": {
        "name": "slow_compute", "arguments": {"seconds": 60}, "_meta": meta(caps())}});
    let hs = standard_headers(&msg);
    let refs: Vec<(&str, &str)> = hs.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    let r = h.post_raw(&refs, &serde_json::to_vec(&msg).unwrap());
    assert_eq!(r.status, 429);
    assert_eq!(r.header("retry-after"), Some("12"));
    let len = h.store.len();
    assert_eq!(create(&h, 1).0, 429);
    assert_eq!(h.store.len(), len, "nothing stored");
    assert_eq!(create(&bob, 1).0, 200, "another principal is unaffected");
    // One token back every 12 s.
    h.advance(12_000);
    bob.advance(12_000);
    assert_eq!(create(&h, 1).0, 200);
    assert_eq!(create(&h, 1).0, 429);
}

fn listen(h: &Harness) -> Result<mcp_tasks_edge::http::EventStream, Value> {
    let mut params = json!({"notifications": {"toolsListChanged": true}});
    params["_meta"] = meta(caps());
    let msg =
        json!({"jsonrpc": "2.0", "id": "l", "method": "subscriptions/listen", "params": params});
    let hs = standard_headers(&msg);
    let refs: Vec<(&str, &str)> = hs.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    let resp = h.post_raw(&refs, &serde_json::to_vec(&msg).unwrap());
    match resp.body {
        HttpBody::Events(s) => Ok(s),
        _ => Err(serde_json::from_slice(resp.body_bytes()).unwrap()),
    }
}

#[test]
fn open_listen_streams_are_capped_per_principal() {
    let h = harness(|l| l.max_listen_streams = 2);
    let bob = Harness::over(h.store.clone(), 2).owned_by(owner("acme", "bob"));
    let mut a = listen(&h).unwrap();
    let b = listen(&h).unwrap();
    let refused = listen(&h).unwrap_err();
    assert_eq!(refused["error"]["code"], -32602);
    assert_eq!(refused["error"]["data"]["reason"], "streams");
    assert!(listen(&bob).is_ok(), "another principal is unaffected");
    // The open ones keep working.
    assert!(matches!(
        block_on(a.next(&h.server, h.now.get())),
        Next::Send(_)
    ));
    // A stream that ends gives its slot back.
    let max = h.server.config().listen_max_ms as i64;
    h.advance(max + 1);
    let mut ended = false;
    for _ in 0..10 {
        if block_on(a.next(&h.server, h.now.get())) == Next::End {
            ended = true;
            break;
        }
    }
    assert!(ended);
    // `b` was never driven again (its client went away): its lease runs
    // out, so both slots are free.
    drop(b);
    h.advance(mcp_tasks_edge::tasks::streams::LEASE_MS);
    assert!(listen(&h).is_ok());
    assert!(listen(&h).is_ok());
    assert!(listen(&h).is_err());
}

/// A stream whose client stopped reading until its lease ran out has lost
/// its slot once another stream took the room: read again, it ends (with
/// its result) instead of running beside the new one past the cap.
#[test]
fn a_stream_whose_lapsed_slot_was_taken_ends_when_read_again() {
    let h = harness(|l| l.max_listen_streams = 1);
    // A stream on a task that runs for ten minutes: it has more to send.
    let task = h.start("slow_compute", json!({"seconds": 600, "label": "long"}));
    let (_, mut a) = crate::listen::open(&h, json!([task]));
    h.advance(mcp_tasks_edge::tasks::streams::LEASE_MS + 1);
    let _b = listen(&h).unwrap();
    let mut frames = 0;
    let ended = (0..10).any(|_| match block_on(a.next(&h.server, h.now.get())) {
        Next::End => true,
        Next::Send(_) => {
            frames += 1;
            false
        }
        Next::Wait(_) => false,
    });
    assert!(ended, "the stream went on without its slot");
    assert!(frames >= 1, "it ended with its result");
    assert!(listen(&h).is_err(), "still one stream at most");
}

#[test]
fn a_task_larger_than_allowed_is_refused_or_fails() {
    let h = harness(|l| l.max_task_bytes = 8_000);
    let (_, v) = create(&h, 20_000);
    assert_eq!(v["error"]["code"], -32602, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("more than the 8000 allowed")
    );
    assert_eq!(h.store.len(), 0, "nothing stored, the quota not charged");
    // A result that would pass the limit fails the task instead.
    let (_, v) = create(&h, 4_000);
    let id = v["result"]["taskId"].as_str().unwrap().to_owned();
    let t = h.run_until_settled(&id, 61_000, 3);
    assert_eq!(t["status"], "failed", "{t}");
    assert!(
        t["error"]["message"]
            .as_str()
            .unwrap()
            .contains("larger than the 8000 bytes"),
        "{t}"
    );
}

#[test]
fn a_corrupt_quota_record_is_refused_not_reset() {
    let h = Harness::new();
    let key = mcp_tasks_edge::tasks::quota::key(&h.owner);
    block_on(h.store.put(&key, None, "{\"tasks\": 12", None)).unwrap();
    let before = block_on(h.store.get(&key)).unwrap();
    let (status, v) = create(&h, 1);
    assert_eq!(status, 500, "{v}");
    assert_eq!(v["error"]["code"], -32603);
    assert_eq!(
        block_on(h.store.get(&key)).unwrap(),
        before,
        "left as it was"
    );
    assert_eq!(h.store.len(), 1, "no task created");
}

#[test]
fn an_answer_that_would_make_a_task_too_large_is_refused() {
    let h = harness(|l| l.max_task_bytes = 16_000);
    let id = h.start("generate_report", json!({"size": "small"}));
    let t = h.run_until_settled(&id, 1_000, 10);
    assert_eq!(t["status"], "input_required", "{t}");
    let key = input_keys(&t)[0].clone();
    let big = json!({"taskId": id, "inputResponses": {&key: {"action": "accept",
        "content": {"approved": true, "note": "n".repeat(30_000)}}}});
    let before = block_on(h.store.get(&id)).unwrap();
    let (_, v) = h.send("tasks/update", big);
    assert_eq!(v["error"]["code"], -32602, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("more than the 16000 allowed"),
        "{v}"
    );
    assert_eq!(
        block_on(h.store.get(&id)).unwrap(),
        before,
        "nothing changed"
    );
    // A normal answer still works.
    h.ok(
        "tasks/update",
        json!({"taskId": id, "inputResponses": {&key: {"action": "accept", "content": {"approved": true}}}}),
    );
}

/// Creates whose tasks finish leave the record a create reads and rewrites
/// small: the finished ones move to the owner's finished list (still
/// listed, still charged until they expire).
#[test]
fn the_record_a_create_rewrites_holds_the_unfinished_tasks_only() {
    use mcp_tasks_edge::tasks::quota;
    let h = harness(|l| {
        l.max_outstanding_tasks = 10;
        l.max_tasks_per_minute = 0;
    });
    let key = quota::key(&h.owner);
    let mut ids = Vec::new();
    let mut largest = 0;
    for i in 0..300 {
        if i % 10 == 0 {
            // One rescan a second at most: a caller at its limit waits it.
            h.advance(1_000);
        }
        let (status, v) = create(&h, 1);
        assert_eq!(status, 200, "create {i}: {v}");
        let id = v["result"]["taskId"].as_str().unwrap().to_owned();
        h.ok("tasks/cancel", json!({"taskId": id}));
        ids.push(id);
        let record = block_on(h.store.get(&key)).unwrap().unwrap();
        largest = largest.max(record.body.len());
    }
    println!("quota record: at most {largest} bytes over 300 finished tasks");
    // Ten listed tasks (id, expiry, bytes) and the bucket, no more.
    assert!(largest < 1_800, "{largest}");
    // Every task is still listed, each once.
    let mut listed: Vec<String> = block_on(quota::listed(h.store.as_ref(), &h.owner, h.now.get()))
        .unwrap()
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    listed.sort();
    ids.sort();
    assert_eq!(listed, ids);
}

/// The finished tasks' bytes stay charged after they leave the record.
#[test]
fn finished_tasks_stay_charged_until_they_expire() {
    const BUDGET: u64 = 400_000;
    let h = harness(|l| {
        l.max_outstanding_tasks = 2;
        l.max_stored_bytes = BUDGET;
        l.max_tasks_per_minute = 0;
    });
    let mut accepted = 0;
    let refused = loop {
        h.advance(1_000);
        let (status, v) = create(&h, 30_000);
        if status == 429 {
            break v;
        }
        assert_eq!(status, 200, "{v}");
        let id = v["result"]["taskId"].as_str().unwrap().to_owned();
        h.ok("tasks/cancel", json!({"taskId": id}));
        accepted += 1;
        assert!(accepted < 100, "the budget never refused");
    };
    assert_eq!(refused["error"]["data"]["reason"], "storage", "{refused}");
    // More tasks than the unfinished limit were accepted, so most of the
    // charge is of tasks no longer in the record.
    assert!(
        accepted > 2 && accepted * 30_000 <= BUDGET as usize,
        "{accepted}"
    );
    let record = block_on(h.store.get(&mcp_tasks_edge::tasks::quota::key(&h.owner)))
        .unwrap()
        .unwrap();
    assert!(record.body.len() < 2_000, "{}", record.body);
    let ttl = h.server.config().task_ttl_ms as i64;
    h.advance(ttl);
    h.tick();
    assert_eq!(create(&h, 30_000).0, 200, "free once they expired");
}

/// A record written before the finished list existed (finished tasks kept
/// in the record) is read, and its finished tasks move to the list on the
/// next write, still listed and charged.
#[test]
fn a_quota_record_of_the_earlier_layout_moves_its_finished_tasks() {
    use mcp_tasks_edge::tasks::quota;
    let h = harness(|l| {
        l.max_outstanding_tasks = 10;
        l.max_stored_bytes = 1_000_000;
        l.max_tasks_per_minute = 0;
    });
    let key = quota::key(&h.owner);
    let exp = h.now.get() + 3_600_000;
    let old = json!({
        "tasks": {"tsk_AAAAAAAAAAAAAAAAAAAAAAAA": exp},
        "finished": {"tsk_BBBBBBBBBBBBBBBBBBBBBBBB": exp, "tsk_CCCCCCCCCCCCCCCCCCCCCCCC": exp},
        "bytes": {"tsk_AAAAAAAAAAAAAAAAAAAAAAAA": 1_000, "tsk_BBBBBBBBBBBBBBBBBBBBBBBB": 500_000,
                  "tsk_CCCCCCCCCCCCCCCCCCCCCCCC": 450_000},
    });
    block_on(h.store.put(&key, None, &old.to_string(), None)).unwrap();
    // 951,000 bytes charged: a task of 60 kB does not fit, a small one
    // does.
    let (status, v) = create(&h, 60_000);
    assert_eq!(status, 429, "{v}");
    let (status, v) = create(&h, 1);
    assert_eq!(status, 200, "{v}");
    let record = block_on(h.store.get(&key)).unwrap().unwrap().body;
    assert!(
        !record.contains("tsk_BBBB") && !record.contains("tsk_CCCC"),
        "{record}"
    );
    let listed: Vec<String> = block_on(quota::listed(h.store.as_ref(), &h.owner, h.now.get()))
        .unwrap()
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    // The new task and the two finished ones; the listed unfinished one was
    // never stored, so the rescan the first create made dropped it.
    assert_eq!(listed.len(), 3, "{listed:?}");
    assert!(listed.contains(&"tsk_BBBBBBBBBBBBBBBBBBBBBBBB".to_owned()));
    h.advance(1_000);
    let (status, v) = create(&h, 60_000);
    assert_eq!(status, 429, "still charged: {v}");
}

/// A create whose id turns out to be taken is not charged.
#[test]
fn a_charge_for_a_task_never_created_is_released() {
    use mcp_tasks_edge::tasks::quota::{self, Charge, Quota, Reserved};
    let h = Harness::new();
    let q = Quota {
        max_outstanding: 5,
        max_stored_bytes: 0,
        max_per_minute: 0,
    };
    let charge = Charge {
        task_id: "tsk_AAAAAAAAAAAAAAAAAAAAAAAA",
        expires_at: h.now.get() + 60_000,
        bytes: 10,
    };
    let store = h.store.as_ref();
    let now = h.now.get();
    assert_eq!(
        block_on(quota::reserve(store, &h.owner, charge, now, q)).unwrap(),
        Reserved::Charged
    );
    assert_eq!(
        block_on(quota::reserve(store, &h.owner, charge, now, q)).unwrap(),
        Reserved::Nothing
    );
    block_on(quota::release(store, &h.owner, charge.task_id)).unwrap();
    assert!(
        block_on(quota::listed(store, &h.owner, now))
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        block_on(quota::reserve(store, &h.owner, charge, now, q)).unwrap(),
        Reserved::Charged
    );
}

/// A store on which another writer creates the same task first: the
/// concurrent replay of a round, landing between a create's quota charge
/// and its own task write (`body` of `None`: the same task; `Some`: the
/// text to write under the id instead).
struct ReplayedFirst<'a> {
    inner: &'a mcp_tasks_edge::store::MemoryStore,
    armed: std::cell::Cell<bool>,
    body: Option<String>,
}

impl Store for ReplayedFirst<'_> {
    async fn get(
        &self,
        key: &str,
    ) -> Result<Option<mcp_tasks_edge::store::Entry>, mcp_tasks_edge::store::StoreError> {
        self.inner.get(key).await
    }
    async fn put(
        &self,
        key: &str,
        expected: Option<mcp_tasks_edge::store::Version>,
        body: &str,
        due_at: Option<i64>,
    ) -> Result<mcp_tasks_edge::store::Version, mcp_tasks_edge::store::StoreError> {
        if expected.is_none() && mcp_tasks_edge::tasks::is_task_id(key) && self.armed.replace(false)
        {
            let first = self.body.as_deref().unwrap_or(body);
            self.inner.put(key, None, first, due_at).await?;
        }
        self.inner.put(key, expected, body, due_at).await
    }
    async fn delete(
        &self,
        key: &str,
        expected: mcp_tasks_edge::store::Version,
    ) -> Result<(), mcp_tasks_edge::store::StoreError> {
        self.inner.delete(key, expected).await
    }
    async fn due(
        &self,
        now: i64,
        limit: usize,
    ) -> Result<Vec<String>, mcp_tasks_edge::store::StoreError> {
        self.inner.due(now, limit).await
    }
    async fn next_due(&self) -> Result<Option<i64>, mcp_tasks_edge::store::StoreError> {
        self.inner.next_due().await
    }
}

/// Starts the task of round `nonce` for `owner` over `store`.
fn start_from_round<S: Store>(
    store: &S,
    owner: &mcp_tasks_edge::tasks::record::Owner,
    nonce: &str,
    now: i64,
) -> Result<String, mcp_tasks_edge::tasks::TaskError> {
    start_from_round_within(store, owner, nonce, now, 5)
}

/// [`start_from_round`] with at most `max_outstanding` unfinished tasks.
fn start_from_round_within<S: Store>(
    store: &S,
    owner: &mcp_tasks_edge::tasks::record::Owner,
    nonce: &str,
    now: i64,
    max_outstanding: usize,
) -> Result<String, mcp_tasks_edge::tasks::TaskError> {
    use mcp_tasks_edge::tasks::{NewTask, NewTaskId, StartLimits, TaskService, quota::Quota};
    let info = json!({"name": "test", "version": "0"});
    let new = NewTask {
        owner,
        tool: "slow_compute",
        arguments: serde_json::Map::new(),
        capabilities: Default::default(),
        state: Value::Null,
        first_step_in_ms: 1_000,
        message: None,
        now,
        ttl_ms: 60_000,
        poll_interval_ms: 1_000,
        key_id: None,
        result: None,
    };
    let limits = StartLimits {
        quota: Quota {
            max_outstanding,
            max_stored_bytes: 0,
            max_per_minute: 0,
        },
        max_task_bytes: 0,
        placements: 0,
    };
    let id = NewTaskId::FromRound {
        secret: b"round secret",
        nonce,
        placements: 0,
    };
    block_on(TaskService::new(store, &info).start(new, id, limits)).map(|r| r.id)
}

/// Two replays of one round at once: the one that charged the task finds
/// it created by the other (which found it charged), and keeps the charge.
/// Undoing it left a live task uncounted and out of `tasks/list`, and
/// repeating the race let an owner past `max_outstanding`.
#[test]
fn a_round_replayed_concurrently_keeps_its_task_charged() {
    use mcp_tasks_edge::tasks::quota;
    let h = Harness::new();
    let now = h.now.get();
    let racing = ReplayedFirst {
        inner: &h.store,
        armed: std::cell::Cell::new(true),
        body: None,
    };
    let id = start_from_round(&racing, &h.owner, "nonce-1", now).unwrap();
    assert!(
        !racing.armed.get(),
        "the other replay created the task first"
    );
    assert!(block_on(h.store.get(&id)).unwrap().is_some());
    let listed = block_on(quota::listed(h.store.as_ref(), &h.owner, now)).unwrap();
    assert!(
        listed.iter().any(|(listed, _)| *listed == id),
        "{id} is charged: {listed:?}"
    );

    // The same id held by another owner's task (a stand-in for any id
    // taken by a task this create did not make): this create's charge is
    // undone, and the create is refused.
    let other = owner("acme", "mallory");
    let h2 = Harness::new();
    let theirs = start_from_round(h2.store.as_ref(), &other, "nonce-2", now).unwrap();
    let their_body = block_on(h2.store.get(&theirs)).unwrap().unwrap().body;
    let racing = ReplayedFirst {
        inner: &h2.store,
        armed: std::cell::Cell::new(true),
        body: Some(their_body),
    };
    let version = block_on(h2.store.get(&theirs)).unwrap().unwrap().version;
    block_on(h2.store.delete(&theirs, version)).unwrap();
    assert!(start_from_round(&racing, &h2.owner, "nonce-2", now).is_err());
    assert!(
        block_on(quota::listed(h2.store.as_ref(), &h2.owner, now))
            .unwrap()
            .is_empty(),
        "nothing charged to the refused owner"
    );
}

/// A round replayed after its task finished (and left the owner's list of
/// unfinished tasks) answers with that task: it is not charged again, and
/// an owner at the unfinished limit is not refused for it.
#[test]
fn a_round_replayed_after_its_task_finished_returns_it_uncharged() {
    use mcp_tasks_edge::tasks::{TaskService, quota};
    let h = Harness::new();
    let now = h.now.get();
    let info = json!({"name": "test", "version": "0"});
    let store = h.store.as_ref();
    let first = start_from_round_within(store, &h.owner, "nonce-a", now, 1).unwrap();
    block_on(TaskService::new(store, &info).cancel(&h.owner, &first, now)).unwrap();
    // The next create finds the first task finished and takes its place.
    let second = start_from_round_within(store, &h.owner, "nonce-b", now, 1).unwrap();
    assert_ne!(first, second);
    let before = block_on(store.get(&quota::key(&h.owner))).unwrap().unwrap();
    let again = start_from_round_within(store, &h.owner, "nonce-a", now, 1)
        .expect("the round's own task, not a refusal");
    assert_eq!(again, first);
    let after = block_on(store.get(&quota::key(&h.owner))).unwrap().unwrap();
    assert_eq!(after.version, before.version, "nothing charged again");
    let task = block_on(store.get(&first)).unwrap().unwrap();
    assert!(task.body.contains("cancelled"), "{}", task.body);
}

/// With more unfinished tasks allowed than one rescan reads, rescans take
/// the listed tasks in turn: long-running tasks listed first never hide
/// the finished ones after them.
#[test]
fn rescans_read_every_listed_task_in_turn() {
    let h = harness(|l| {
        l.max_outstanding_tasks = 150;
        l.max_tasks_per_minute = 0;
    });
    let mut ids: Vec<String> = (0..150)
        .map(|_| {
            let (status, v) = create(&h, 1);
            assert_eq!(status, 200, "{v}");
            v["result"]["taskId"].as_str().unwrap().to_owned()
        })
        .collect();
    // The record lists them in id order: the last 30 of it finish, the
    // first 120 keep running.
    ids.sort();
    for id in &ids[120..] {
        h.ok("tasks/cancel", json!({"taskId": id}));
    }
    // The first rescan reads the first 100 listed (all still running);
    // the next, a second later, the rest.
    let mut attempts = 0;
    loop {
        attempts += 1;
        h.advance(1_000);
        let (status, v) = create(&h, 1);
        if status == 200 {
            break;
        }
        assert_eq!(v["error"]["data"]["reason"], "quota", "{v}");
        assert!(attempts < 4, "the finished tasks were never found");
    }
    assert_eq!(attempts, 2);
}

/// With the unfinished-task limit off (the byte budget on), finished tasks
/// still leave the record: a long list is rescanned before any limit is
/// near.
#[test]
fn the_record_stays_short_with_the_unfinished_limit_off() {
    let h = harness(|l| {
        l.max_outstanding_tasks = 0;
        l.max_tasks_per_minute = 0;
    });
    let key = mcp_tasks_edge::tasks::quota::key(&h.owner);
    let mut largest = 0;
    for i in 0..800 {
        if i % 50 == 0 {
            h.advance(1_000);
        }
        let (status, v) = create(&h, 1);
        assert_eq!(status, 200, "create {i}: {v}");
        let id = v["result"]["taskId"].as_str().unwrap().to_owned();
        h.ok("tasks/cancel", json!({"taskId": id}));
        largest = largest.max(block_on(h.store.get(&key)).unwrap().unwrap().body.len());
    }
    println!("quota record: at most {largest} bytes over 800 finished tasks");
    // About 250 listed tasks at most (200, and the creates of the second
    // before the next rescan), not 800.
    assert!(largest < 25_000, "{largest}");
}

/// A principal who goes away leaves nothing stored: its quota record,
/// finished list and listen-stream record are each written due when
/// nothing in them is live, and the runner deletes them then (not before).
#[test]
fn a_principal_who_goes_away_leaves_no_record_behind() {
    use mcp_tasks_edge::tasks::{quota, streams};
    let h = harness(|l| {
        l.max_outstanding_tasks = 1;
        l.max_tasks_per_minute = 2;
        l.max_listen_streams = 4;
    });
    let ttl = h.server.config().task_ttl_ms as i64;
    for _ in 0..2 {
        // One rescan a second at most: the second create waits it, finds
        // the first task finished and moves it to the finished list.
        h.advance(1_000);
        let (status, v) = create(&h, 1);
        assert_eq!(status, 200, "{v}");
        let id = v["result"]["taskId"].as_str().unwrap().to_owned();
        h.ok("tasks/cancel", json!({"taskId": id}));
    }
    let (first_at, last_at) = (h.now.get() - 1_000, h.now.get());
    let record = |k: &str| block_on(h.store.get(k)).unwrap();
    let (own, done) = (quota::key(&h.owner), quota::finished_key(&h.owner));
    assert_eq!(record(&own).unwrap().due_at, Some(last_at + ttl), "own");
    assert_eq!(record(&done).unwrap().due_at, Some(first_at + ttl), "done");
    let mut s = listen(&h).unwrap();
    assert!(matches!(
        block_on(s.next(&h.server, h.now.get())),
        Next::Send(_)
    ));
    drop(s);
    let lsn = streams::key(&h.owner);
    let lease_out = h.now.get() + streams::LEASE_MS;
    assert_eq!(
        record(&lsn).unwrap().due_at,
        Some(lease_out + streams::KEEP_MS)
    );

    // The finished list lapses with the first task; the quota and stream
    // records stay until the last one expires.
    h.now.set(first_at + ttl);
    h.tick();
    assert!(record(&own).is_some() && record(&lsn).is_some());
    assert!(record(&done).is_none(), "the finished list lapsed");
    h.now.set(last_at + ttl);
    let report = h.tick();
    assert!(record(&own).is_none(), "{report:?}");
    assert!(record(&lsn).is_some(), "the stream record is kept an hour");
    h.now.set(lease_out + streams::KEEP_MS);
    h.tick();
    assert_eq!(h.store.len(), 0, "nothing is left");

    // The principal comes back: counted from zero, limits intact.
    assert_eq!(create(&h, 1).0, 200);
    let (status, v) = create(&h, 1);
    assert_eq!(
        (status, &v["error"]["data"]["reason"]),
        (429, &json!("quota")),
        "{v}"
    );
}
