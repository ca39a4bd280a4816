//! Two replicas, each with its own instances and its own SQLite connections
//! over one database file, tick concurrently on real threads while a client
//! (a third replica) answers inputs and cancels tasks. Every step commits
//! exactly once, no update or cancel is lost, no task finishes twice.

use std::sync::Barrier;

use mcp_tasks_edge::tasks::record::{Phase, TaskRecord};
use mcp_tasks_edge::tasks::runner::TickReport;
use serde_json::json;

use crate::runtime::Clock;
use crate::sqlite::SqliteStore;
use crate::support::{Client, T0, TempDir, runtime, settings};

const PER_GROUP: usize = 30;
const ROUNDS: usize = 30;
const TICKS_PER_ROUND: usize = 3;
/// Cancels are spread over the first rounds: before the first step, while
/// it runs, and while the task waits for input.
const CANCEL_ROUNDS: usize = 8;
const SIZES: [&str; 3] = ["small", "medium", "large"];

fn tokio() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn two_replicas_tick_concurrently_without_losing_or_repeating_work() {
    let dir = TempDir::new("replicas");
    let clock = Clock::manual(T0);
    let barrier = Barrier::new(3);

    // Every runtime is opened before any thread waits on the barrier, so
    // that a failure here fails the test instead of stranding the others.
    let runtimes = [
        runtime(dir.path(), settings(&clock)),
        runtime(dir.path(), settings(&clock)),
    ];
    let client = runtime(dir.path(), settings(&clock));

    let (reports, approve, cancel) = std::thread::scope(|s| {
        let [rt_a, rt_b] = runtimes;
        let replica = |name: &'static str, rt: std::sync::Arc<crate::runtime::Runtime>| {
            let (barrier, clock) = (&barrier, &clock);
            s.spawn(move || {
                let tokio = tokio();
                let mut total = TickReport::default();
                for _ in 0..ROUNDS {
                    barrier.wait();
                    for _ in 0..TICKS_PER_ROUND {
                        let r = tokio.block_on(rt.tick(clock.now_ms())).unwrap();
                        total.absorb(&r);
                    }
                    barrier.wait();
                }
                assert_eq!(rt.traps(), 0, "{name}");
                total
            })
        };
        let a = replica("a", rt_a);
        let b = replica("b", rt_b);

        let tokio = tokio();
        let c = Client::new(client);
        let (approve, cancel) = tokio.block_on(async {
            let mut approve = Vec::new();
            let mut cancel = Vec::new();
            for i in 0..PER_GROUP {
                let size = json!({"size": SIZES[i % SIZES.len()]});
                approve.push(c.start("generate_report", size.clone()).await);
                cancel.push(c.start("generate_report", size).await);
            }
            (approve, cancel)
        });
        let mut updated = [false; PER_GROUP];
        for round in 0..ROUNDS {
            clock.advance(250);
            barrier.wait();
            // Concurrently with both replicas' ticks:
            tokio.block_on(async {
                for (i, task) in cancel.iter().enumerate() {
                    if i % CANCEL_ROUNDS == round {
                        c.ok("tasks/cancel", json!({"taskId": task})).await;
                    }
                }
                for (i, task) in approve.iter().enumerate() {
                    if !updated[i] && c.status(task).await == "input_required" {
                        let answer = json!({"approve_outline": {"action": "accept", "content": {"approved": true}}});
                        c.ok(
                            "tasks/update",
                            json!({"taskId": task, "inputResponses": answer}),
                        )
                        .await;
                        updated[i] = true;
                    }
                }
            });
            barrier.wait();
        }
        assert_eq!(c.rt.traps(), 0, "client");
        assert!(updated.iter().all(|u| *u), "every approval was sent");
        ([a.join().unwrap(), b.join().unwrap()], approve, cancel)
    });

    let store = SqliteStore::open(dir.path()).unwrap();
    let load = |id: &str| -> TaskRecord {
        mcp_tasks_edge::tasks::decode(&store.get(id).unwrap().unwrap().body).unwrap()
    };
    let mut steps = 0;
    for id in &approve {
        let r = load(id);
        let Phase::Completed { result } = &r.phase else {
            panic!("{id}: the approval was lost: {:?}", r.phase)
        };
        assert_eq!(
            result.structured_content.as_ref().unwrap()["approved"],
            true,
            "{id}"
        );
        assert_eq!(r.steps, 2, "{id}: outline and render, once each");
        assert_eq!(r.lease, None, "{id}");
        steps += r.steps;
    }
    for id in &cancel {
        let r = load(id);
        assert_eq!(r.phase, Phase::Cancelled, "{id}: the cancel was lost");
        assert!(r.steps <= 1, "{id}: {} steps after a cancel", r.steps);
        assert_eq!(r.lease, None, "{id}");
        steps += r.steps;
    }
    let mut total = TickReport::default();
    for r in &reports {
        total.absorb(r);
    }
    eprintln!("replica a: {}\nreplica b: {}", reports[0], reports[1]);
    assert_eq!(total.errors, 0, "{total}");
    // Each approval ran its task's last (replayable) step inside the
    // update, once; every other step is a replica's commit.
    assert_eq!(
        total.stepped as u64 + PER_GROUP as u64,
        steps,
        "commits reported by the replicas + one inline step per approval = steps recorded in the tasks"
    );
    assert_eq!(
        total.finished, total.cancelled,
        "every completion ran inside its approval; the replicas finished only the cancellations they honoured"
    );
    assert!(total.cancelled <= PER_GROUP);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hosts_sliced_ticks_step_every_task_once() {
    let dir = TempDir::new("sliced");
    let clock = Clock::manual(T0);
    let mut s = settings(&clock);
    s.tick_slices = 4;
    let client = Client::new(runtime(dir.path(), s));
    let mut tasks = Vec::new();
    for _ in 0..24 {
        tasks.push(client.start("slow_compute", json!({"seconds": 1})).await);
    }
    clock.advance(1_000);
    let report = client.rt.tick(clock.now_ms()).await.unwrap();
    assert_eq!(
        (report.due, report.stepped, report.finished),
        (24, 24, 24),
        "{report}"
    );
    assert_eq!(
        (report.skipped, report.fenced, report.errors),
        (0, 0, 0),
        "{report}"
    );
    let again = client.rt.tick(clock.now_ms()).await.unwrap();
    assert_eq!(again.due, 0, "{again}");
    let store = SqliteStore::open(dir.path()).unwrap();
    for task in &tasks {
        let record: TaskRecord =
            mcp_tasks_edge::tasks::decode(&store.get(task).unwrap().unwrap().body).unwrap();
        assert_eq!(record.steps, 1, "{task}");
        assert_eq!(client.status(task).await, "completed");
    }
    // With a budget of 8, a round of 8 slices advances at most one task
    // each, and rounds go on until every task is done.
    let dir = TempDir::new("sliced-budget");
    let mut s = settings(&clock);
    s.env.push(("MCP_TICK_BUDGET".into(), "8".into()));
    let budgeted = Client::new(runtime(dir.path(), s));
    for _ in 0..24 {
        budgeted.start("slow_compute", json!({"seconds": 1})).await;
    }
    clock.advance(1_000);
    let mut rounds = Vec::new();
    loop {
        let r = budgeted.rt.tick(clock.now_ms()).await.unwrap();
        if r.stepped == 0 {
            break;
        }
        assert!(r.stepped <= 8 && r.errors == 0, "{r}");
        rounds.push(r.stepped);
    }
    assert_eq!(rounds.iter().sum::<usize>(), 24, "{rounds:?}");
    assert!(rounds.len() >= 3, "{rounds:?}");
    // A slice outside the range does nothing and says so.
    let bad = client.rt.tick_slice(clock.now_ms(), 4, 4).await.unwrap();
    assert_eq!((bad.due, bad.errors), (0, 1), "{bad}");
    assert_eq!(client.rt.traps(), 0);
}
