//! The [`Store`] contract as an executable suite. Every store implementation
//! runs it: `MemoryStore` in the unit tests, the WASI host store through the
//! component boundary, the Durable Object store through a test-only route.
//!
//! The suite works on a store that also holds other data: every key it
//! writes starts with `prefix`, its due times lie in a window before 1970
//! that real tasks never use, and each check deletes what it wrote.

use super::{Store, StoreError, Version};
use crate::time::Millis;

/// The outcome of one run.
#[derive(Debug, Default)]
pub struct Report {
    pub passed: usize,
    pub failures: Vec<(&'static str, String)>,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "store contract: {} passed, {} failed",
            self.passed,
            self.failures.len()
        )?;
        for (name, why) in &self.failures {
            write!(f, "\n  {name}: {why}")?;
        }
        Ok(())
    }
}

type Check = Result<(), String>;

fn ensure(cond: bool, what: impl FnOnce() -> String) -> Check {
    if cond { Ok(()) } else { Err(what()) }
}

fn io<T>(r: Result<T, StoreError>, op: &str) -> Result<T, String> {
    r.map_err(|e| format!("{op}: {e}"))
}

/// Start of the due-time window the suite uses (1653, long before any task).
const WINDOW: Millis = -10_000_000_000_000;

/// Runs every check against `store`, with keys under `prefix`.
pub async fn run<S: Store>(store: &S, prefix: &str) -> Report {
    let mut report = Report::default();
    if let Err(e) = sweep_leftovers(store, prefix).await {
        report.failures.push(("setup", e));
        return report;
    }
    macro_rules! check {
        ($name:literal, $f:ident) => {{
            let key = |n: u32| format!("{prefix}{}-{n}", $name);
            let result = $f(store, &key).await;
            cleanup(store, &key).await;
            match result {
                Ok(()) => report.passed += 1,
                Err(e) => report.failures.push(($name, e)),
            }
        }};
    }
    check!("get-absent", get_absent);
    check!("create-if-absent", create_if_absent);
    check!("replace-if-version", replace_if_version);
    check!("expected-on-absent", expected_on_absent);
    check!("versions-increase", versions_increase);
    check!("conflict-changes-nothing", conflict_changes_nothing);
    check!("delete", delete);
    check!("recreated-keys-move-on", recreated_keys_move_on);
    check!("bodies-round-trip", bodies_round_trip);
    check!("due-order-and-limit", due_order_and_limit);
    check!("due-follows-writes", due_follows_writes);
    check!("due-follows-deletes", due_follows_deletes);
    check!("one-writer-wins", one_writer_wins);
    report
}

/// Deletes keys a crashed earlier run may have left in the window.
async fn sweep_leftovers<S: Store>(store: &S, prefix: &str) -> Check {
    let keys = io(store.due(WINDOW + 1_000_000, 10_000).await, "due")?;
    for k in keys.iter().filter(|k| k.starts_with(prefix)) {
        if let Some(e) = io(store.get(k).await, "get")? {
            let _ = store.delete(k, e.version).await;
        }
    }
    Ok(())
}

async fn cleanup<S: Store>(store: &S, key: &dyn Fn(u32) -> String) {
    for n in 0..8 {
        let k = key(n);
        if let Ok(Some(e)) = store.get(&k).await {
            let _ = store.delete(&k, e.version).await;
        }
    }
}

type KeyFn<'a> = &'a dyn Fn(u32) -> String;

async fn get_absent<S: Store>(s: &S, key: KeyFn<'_>) -> Check {
    let got = io(s.get(&key(0)).await, "get")?;
    ensure(got.is_none(), || format!("absent key returned {got:?}"))
}

async fn create_if_absent<S: Store>(s: &S, key: KeyFn<'_>) -> Check {
    let k = key(0);
    let v = io(s.put(&k, None, "one", None).await, "create")?;
    ensure(v >= 1, || format!("versions start at 1, got {v}"))?;
    let again = s.put(&k, None, "two", None).await;
    ensure(
        again == Err(StoreError::Conflict { current: Some(v) }),
        || format!("second create must conflict with current {v}, got {again:?}"),
    )?;
    let e = io(s.get(&k).await, "get")?.ok_or("created key is missing")?;
    ensure(e.version == v && e.body == "one", || {
        format!("read back {e:?}")
    })
}

/// A key created again after a delete starts above every version it had,
/// so a writer still holding one of them is refused.
async fn recreated_keys_move_on<S: Store>(s: &S, key: KeyFn<'_>) -> Check {
    let k = key(0);
    let v1 = io(s.put(&k, None, "a", None).await, "create")?;
    let v2 = io(s.put(&k, Some(v1), "b", None).await, "replace")?;
    io(s.delete(&k, v2).await, "delete")?;
    let v3 = io(s.put(&k, None, "c", None).await, "create again")?;
    ensure(v3 > v2, || {
        format!("re-created at version {v3}, not above its last ({v2})")
    })?;
    for stale in [v1, v2] {
        let r = s.put(&k, Some(stale), "stale", None).await;
        ensure(r == Err(StoreError::Conflict { current: Some(v3) }), || {
            format!("a write expecting the old version {stale} must conflict, got {r:?}")
        })?;
    }
    let e = io(s.get(&k).await, "get")?.ok_or("re-created key is missing")?;
    ensure(e.version == v3 && e.body == "c", || {
        format!("read back {e:?}")
    })
}

async fn replace_if_version<S: Store>(s: &S, key: KeyFn<'_>) -> Check {
    let k = key(0);
    let v1 = io(s.put(&k, None, "a", None).await, "create")?;
    let v2 = io(s.put(&k, Some(v1), "b", None).await, "replace")?;
    ensure(v2 > v1, || format!("version must grow: {v1} -> {v2}"))?;
    let stale = s.put(&k, Some(v1), "c", None).await;
    ensure(
        stale == Err(StoreError::Conflict { current: Some(v2) }),
        || format!("stale replace must conflict with current {v2}, got {stale:?}"),
    )?;
    let future = s.put(&k, Some(v2 + 7), "d", None).await;
    ensure(matches!(future, Err(StoreError::Conflict { .. })), || {
        format!("replace with a version never issued must conflict, got {future:?}")
    })?;
    let e = io(s.get(&k).await, "get")?.ok_or("key vanished")?;
    ensure(e.version == v2 && e.body == "b", || {
        format!("read back {e:?}")
    })
}

async fn expected_on_absent<S: Store>(s: &S, key: KeyFn<'_>) -> Check {
    let r = s.put(&key(0), Some(1), "x", None).await;
    ensure(r == Err(StoreError::Conflict { current: None }), || {
        format!("replace of an absent key must conflict with current None, got {r:?}")
    })?;
    let got = io(s.get(&key(0)).await, "get")?;
    ensure(got.is_none(), || "a failed replace created the key".into())
}

async fn versions_increase<S: Store>(s: &S, key: KeyFn<'_>) -> Check {
    let k = key(0);
    let mut v: Option<Version> = None;
    for i in 0..20 {
        let next = io(s.put(&k, v, &format!("body {i}"), None).await, "put")?;
        if let Some(prev) = v {
            ensure(next > prev, || format!("version went {prev} -> {next}"))?;
        }
        v = Some(next);
    }
    let e = io(s.get(&k).await, "get")?.ok_or("key vanished")?;
    ensure(Some(e.version) == v && e.body == "body 19", || {
        format!("read back {e:?}")
    })
}

async fn conflict_changes_nothing<S: Store>(s: &S, key: KeyFn<'_>) -> Check {
    let k = key(0);
    let v = io(s.put(&k, None, "kept", Some(WINDOW + 10)).await, "create")?;
    let _ = s.put(&k, Some(v + 1), "lost", Some(WINDOW + 20)).await;
    let _ = s.put(&k, None, "lost", None).await;
    let e = io(s.get(&k).await, "get")?.ok_or("key vanished")?;
    ensure(
        e.version == v && e.body == "kept" && e.due_at == Some(WINDOW + 10),
        || format!("a conflicting write changed the entry: {e:?}"),
    )
}

async fn delete<S: Store>(s: &S, key: KeyFn<'_>) -> Check {
    let k = key(0);
    let v = io(s.put(&k, None, "x", None).await, "create")?;
    let wrong = s.delete(&k, v + 1).await;
    ensure(
        wrong == Err(StoreError::Conflict { current: Some(v) }),
        || format!("delete with a wrong version must conflict, got {wrong:?}"),
    )?;
    ensure(io(s.get(&k).await, "get")?.is_some(), || {
        "conflicting delete removed the key".into()
    })?;
    io(s.delete(&k, v).await, "delete")?;
    ensure(io(s.get(&k).await, "get")?.is_none(), || {
        "deleted key still readable".into()
    })?;
    let again = s.delete(&k, v).await;
    ensure(again == Err(StoreError::Conflict { current: None }), || {
        format!("delete of an absent key must conflict with None, got {again:?}")
    })
}

async fn bodies_round_trip<S: Store>(s: &S, key: KeyFn<'_>) -> Check {
    let big = "x".repeat(100_000);
    let bodies = [
        "",
        "{\"a\":\"quote \\\" and backslash \\\\\"}",
        "unicode: é 中文 🚀 \u{0}\u{1f}",
        big.as_str(),
    ];
    for (i, body) in bodies.iter().enumerate() {
        let k = key(i as u32);
        io(s.put(&k, None, body, None).await, "create")?;
        let e = io(s.get(&k).await, "get")?.ok_or("key vanished")?;
        ensure(e.body == *body, || {
            format!(
                "body {i} changed in the store ({} bytes back)",
                e.body.len()
            )
        })?;
    }
    Ok(())
}

async fn due_order_and_limit<S: Store>(s: &S, key: KeyFn<'_>) -> Check {
    let t = WINDOW;
    io(s.put(&key(0), None, "", Some(t + 30)).await, "put")?;
    io(s.put(&key(1), None, "", Some(t + 10)).await, "put")?;
    io(s.put(&key(2), None, "", Some(t + 20)).await, "put")?;
    io(s.put(&key(3), None, "", None).await, "put")?;
    io(s.put(&key(4), None, "", Some(t + 1_000)).await, "put")?;
    let ours = |v: Vec<String>| -> Vec<String> {
        v.into_iter()
            .filter(|k| (0..8).any(|n| *k == key(n)))
            .collect()
    };
    let d = ours(io(s.due(t + 20, 100).await, "due")?);
    ensure(d == vec![key(1), key(2)], || format!("due(t+20) = {d:?}"))?;
    let d = ours(io(s.due(t + 30, 2).await, "due")?);
    ensure(d == vec![key(1), key(2)], || {
        format!("due(t+30, limit 2) = {d:?}")
    })?;
    let d = ours(io(s.due(t + 5_000, 100).await, "due")?);
    ensure(d == vec![key(1), key(2), key(0), key(4)], || {
        format!("due(t+5000) = {d:?}")
    })?;
    let d = io(s.due(t + 9, 100).await, "due")?;
    ensure(ours(d).is_empty(), || {
        "due returned an entry that is not yet due".into()
    })?;
    let next = io(s.next_due().await, "next_due")?;
    ensure(next.is_some_and(|n| n <= t + 10), || {
        format!("next_due = {next:?}")
    })
}

async fn due_follows_writes<S: Store>(s: &S, key: KeyFn<'_>) -> Check {
    let t = WINDOW + 100_000;
    let k = key(0);
    let v = io(s.put(&k, None, "", Some(t)).await, "put")?;
    let mine = |d: Vec<String>| d.contains(&k);
    ensure(mine(io(s.due(t, 100).await, "due")?), || {
        "entry not due at its due time".into()
    })?;
    let v = io(s.put(&k, Some(v), "", Some(t + 500)).await, "put")?;
    ensure(!mine(io(s.due(t, 100).await, "due")?), || {
        "old due time still indexed".into()
    })?;
    ensure(mine(io(s.due(t + 500, 100).await, "due")?), || {
        "new due time not indexed".into()
    })?;
    io(s.put(&k, Some(v), "", None).await, "put")?;
    ensure(!mine(io(s.due(t + 5_000, 100).await, "due")?), || {
        "cleared due time still indexed".into()
    })
}

async fn due_follows_deletes<S: Store>(s: &S, key: KeyFn<'_>) -> Check {
    let t = WINDOW + 200_000;
    let k = key(0);
    let v = io(s.put(&k, None, "", Some(t)).await, "put")?;
    io(s.delete(&k, v).await, "delete")?;
    let d = io(s.due(t, 100).await, "due")?;
    ensure(!d.contains(&k), || "deleted entry is still due".into())
}

async fn one_writer_wins<S: Store>(s: &S, key: KeyFn<'_>) -> Check {
    let k = key(0);
    let v = io(s.put(&k, None, "base", None).await, "create")?;
    let mut wins = 0;
    for i in 0..5 {
        if s.put(&k, Some(v), &format!("writer {i}"), None)
            .await
            .is_ok()
        {
            wins += 1;
        }
    }
    ensure(wins == 1, || {
        format!("{wins} writers with the same expected version succeeded")
    })
}
