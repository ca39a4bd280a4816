//! The guest's limits: a 128 MiB memory cap (a `ResourceLimiter`) and an
//! epoch deadline per call that only progress (store calls, response bytes)
//! extends. A normal workload stays inside both; the same limits stop the
//! real component when set too low, and stop a runaway component (a loop
//! that never ends, a growth past the cap), while a long, idle listen
//! stream outlives many deadlines.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::json;
use wasmtime::component::{Component, Linker};
use wasmtime::{Store, Trap};

use crate::runtime::{Clock, LimitStats, MEMORY_LIMIT, MemoryCap, Runtime, Strategy};
use crate::support::{Client, T0, TempDir, runtime, settings, standard_headers};

fn is_interrupt(e: &anyhow::Error) -> bool {
    e.chain()
        .any(|c| c.downcast_ref::<Trap>() == Some(&Trap::Interrupt))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_normal_workload_stays_inside_the_limits() {
    let dir = TempDir::new("limits-normal");
    let clock = Clock::manual(T0);
    // One caller starts 120 tasks here: more than the default quota.
    let mut s = settings(&clock);
    s.env.push(("MCP_MAX_OUTSTANDING_TASKS".into(), "0".into()));
    // One call per tick: this test is about the heaviest single call.
    s.tick_slices = 1;
    let c = Client::new(runtime(dir.path(), s));
    let mut tasks = Vec::new();
    for i in 0..60 {
        tasks.push(c.start("generate_report", json!({"size": "large"})).await);
        tasks.push(
            c.start(
                "slow_compute",
                json!({"seconds": 1, "label": format!("w{i}")}),
            )
            .await,
        );
    }
    clock.advance(1_000);
    // One tick over 100 due tasks: the heaviest single call here.
    let first = c.rt.tick(clock.now_ms()).await.unwrap();
    assert_eq!(first.due, 100);
    let mut rest = c.rt.tick(clock.now_ms()).await.unwrap();
    assert_eq!(first.stepped + rest.stepped, 120);
    for t in tasks.iter().step_by(2) {
        let update = json!({"taskId": t, "inputResponses": {"approve_outline": {"action": "accept", "content": {"approved": true}}}});
        c.ok("tasks/update", update).await;
    }
    // Each approval ran the report's last (replayable) step inside it.
    rest = c.rt.tick(clock.now_ms()).await.unwrap();
    assert_eq!(rest.stepped, 0);
    for t in &tasks {
        assert_eq!(c.status(t).await, "completed");
    }
    let tools = c.ok("tools/list", json!({})).await;
    assert!(tools["tools"].as_array().unwrap().len() > 5);

    let stats = c.rt.limit_stats();
    let peak_memory = stats.peak_memory.load(Ordering::SeqCst);
    eprintln!(
        "normal workload: peak guest memory {} KiB of {} KiB, no call near its deadline",
        peak_memory / 1024,
        MEMORY_LIMIT / 1024
    );
    assert_eq!(c.rt.traps(), 0);
    assert_eq!(stats.memory_denied.load(Ordering::SeqCst), 0);
    assert_eq!(stats.interrupts.load(Ordering::SeqCst), 0);
    assert!(peak_memory > 0 && peak_memory <= MEMORY_LIMIT);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_past_its_deadline_is_stopped_and_the_host_carries_on() {
    let dir = TempDir::new("limits-deadline");
    let mut s = settings(&Clock::System);
    // A deadline already reached when the call starts: the first epoch
    // check in guest code, before any progress, interrupts it.
    s.call_deadline = std::time::Duration::ZERO;
    let starved = runtime(dir.path(), s);
    let msg = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": crate::support::meta(json!({}))}});
    let headers = standard_headers(&msg);
    let refs: Vec<(&str, &[u8])> = headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_bytes()))
        .collect();
    let body = serde_json::to_vec(&msg).unwrap();
    let e = starved
        .request("POST", "/mcp", &refs, body.clone())
        .await
        .unwrap_err();
    assert!(is_interrupt(&e), "{e:?}");
    assert_eq!(starved.traps(), 1);
    let e = starved.tick(T0).await.unwrap_err();
    assert!(is_interrupt(&e), "{e:?}");
    assert_eq!(starved.traps(), 2);
    assert_eq!(starved.limit_stats().interrupts.load(Ordering::SeqCst), 2);
    // The same store with the normal deadline: served.
    let fed = runtime(dir.path(), settings(&Clock::System));
    let ok = fed.request("POST", "/mcp", &refs, body).await.unwrap();
    assert_eq!(ok.status, 200);
    assert_eq!(fed.traps(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_low_memory_cap_stops_the_component() {
    let dir = TempDir::new("limits-memory");
    // The component's initial memory, as the limiter saw it.
    let probe = runtime(dir.path(), settings(&Clock::System));
    drop(probe.instantiate().await.unwrap());
    let initial = probe.limit_stats().peak_memory.load(Ordering::SeqCst);
    assert!(initial > 0);

    // A cap just above it: instantiation works, buffering a 1 MiB body
    // cannot, and the guest's allocator traps.
    let mut s = settings(&Clock::System);
    s.memory_limit = initial + 256 * 1024;
    s.strategy = Strategy::Fresh;
    let capped = runtime(dir.path(), s);
    let msg = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": crate::support::meta(json!({}))}});
    let headers = standard_headers(&msg);
    let refs: Vec<(&str, &[u8])> = headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_bytes()))
        .collect();
    let mut body = serde_json::to_vec(&msg).unwrap();
    body.resize(1024 * 1024, b' ');
    let e = capped
        .request("POST", "/mcp", &refs, body)
        .await
        .unwrap_err();
    assert_eq!(capped.traps(), 1, "{e:?}");
    assert!(
        capped.limit_stats().memory_denied.load(Ordering::SeqCst) >= 1,
        "{e:?}"
    );
    // Small requests still fit under that cap.
    let small = serde_json::to_vec(&msg).unwrap();
    let ok = capped.request("POST", "/mcp", &refs, small).await.unwrap();
    assert_eq!(ok.status, 200);
}

/// A component that never returns, and one that asks for 256 MiB.
const RUNAWAY: &str = r#"
(component
  (core module $m
    (memory 1)
    (func (export "spin") (loop $forever (br $forever)))
    (func (export "grow") (param i32) (result i32) (memory.grow (local.get 0))))
  (core instance $i (instantiate $m))
  (func (export "spin") (canon lift (core func $i "spin")))
  (func (export "grow") (param "pages" u32) (result s32) (canon lift (core func $i "grow"))))
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runaway_component_is_stopped_by_the_same_limits() {
    // The host's engine configuration and the host's limiter and budget.
    let engine = Runtime::engine().unwrap();
    let component = Component::new(&engine, RUNAWAY).unwrap();
    let stats = Arc::new(LimitStats::default());
    let mut store = Store::new(
        &engine,
        MemoryCap {
            max_bytes: MEMORY_LIMIT,
            stats: stats.clone(),
            granted: 0,
        },
    );
    store.limiter(|cap| cap);
    store.epoch_deadline_trap();
    store.set_epoch_deadline(1_000);
    let instance = Linker::new(&engine)
        .instantiate_async(&mut store, &component)
        .await
        .unwrap();

    let grow = instance
        .get_typed_func::<(u32,), (i32,)>(&mut store, "grow")
        .unwrap();
    let (pages,) = grow.call_async(&mut store, (16,)).await.unwrap();
    assert_eq!(pages, 1, "a small growth is granted (old size 1 page)");
    let (refused,) = grow.call_async(&mut store, (4096,)).await.unwrap();
    assert_eq!(refused, -1, "256 MiB more is refused");
    assert_eq!(stats.memory_denied.load(Ordering::SeqCst), 1);

    // A deadline a few ticks away: the loop makes no progress and is stopped.
    store.set_epoch_deadline(5);
    let spin = instance
        .get_typed_func::<(), ()>(&mut store, "spin")
        .unwrap();
    let e = spin.call_async(&mut store, ()).await.unwrap_err();
    assert_eq!(e.downcast_ref::<Trap>(), Some(&Trap::Interrupt), "{e:?}");
}
