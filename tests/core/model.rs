//! A property test: random sequences of create, get, update, cancel, tick
//! and expiry against a simple model of the task lifecycle.

use proptest::prelude::*;
use serde_json::json;

use crate::support::{Harness, T0};

const TTL: i64 = 20_000;

#[derive(Clone, Debug)]
enum Op {
    /// A timer task that needs `secs` seconds.
    CreateTimer(u8),
    /// A task that asks one question, then completes.
    CreateInput,
    /// Only reads (every op ends by reading every task).
    Get,
    /// Answer the question of task `i` (accept or decline).
    Answer(usize, bool),
    Cancel(usize),
    /// Move the clock by `ms`, then tick.
    Tick(u16),
    /// Move the clock by `ms` without ticking.
    Wait(u16),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (1u8..4).prop_map(Op::CreateTimer),
        Just(Op::CreateInput),
        Just(Op::Get),
        ((0usize..8), any::<bool>()).prop_map(|(i, a)| Op::Answer(i, a)),
        (0usize..8).prop_map(Op::Cancel),
        (0u16..6_000).prop_map(Op::Tick),
        (0u16..6_000).prop_map(Op::Wait),
    ]
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum St {
    Working,
    InputRequired,
    Completed,
    Cancelled,
}

#[derive(Debug)]
struct Model {
    id: String,
    input: bool,
    created: i64,
    /// When the next step is due, while working.
    due: i64,
    status: St,
    asked: bool,
}

impl Model {
    fn visible(&self, now: i64) -> bool {
        now < self.created + TTL
    }
    fn expected(&self, now: i64) -> Option<&'static str> {
        if !self.visible(now) {
            return None;
        }
        Some(match self.status {
            St::Working => "working",
            St::InputRequired => "input_required",
            St::Completed => "completed",
            St::Cancelled => "cancelled",
        })
    }
    fn tick(&mut self, now: i64) {
        if self.status != St::Working || now < self.due {
            return;
        }
        if self.input && !self.asked {
            self.asked = true;
            self.status = St::InputRequired;
        } else {
            self.status = St::Completed;
        }
    }
}

fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut cfg = crate::support::config();
    cfg.task_ttl_ms = TTL as u64;
    let h = Harness::with_config(
        std::sync::Arc::new(mcp_tasks_edge::store::MemoryStore::new()),
        1,
        cfg,
    );
    let mut tasks: Vec<Model> = Vec::new();
    for op in ops {
        let now = h.now.get();
        match op {
            Op::CreateTimer(secs) => {
                let id = h.start("slow_compute", json!({"seconds": secs}));
                tasks.push(Model {
                    id,
                    input: false,
                    created: now,
                    due: now + i64::from(secs) * 1000,
                    status: St::Working,
                    asked: false,
                });
            }
            Op::CreateInput => {
                let id = h.start("confirm_delete", json!({"filename": "f"}));
                tasks.push(Model {
                    id,
                    input: true,
                    created: now,
                    due: now,
                    status: St::Working,
                    asked: false,
                });
            }
            Op::Get => {}
            Op::Answer(i, accept) => {
                if let Some(t) = tasks.get_mut(i) {
                    let answer = if accept {
                        json!({"action": "accept", "content": {"confirm": true}})
                    } else {
                        json!({"action": "decline"})
                    };
                    let (_, r) = h.send(
                        "tasks/update",
                        json!({"taskId": t.id, "inputResponses": {"confirm": answer}}),
                    );
                    if t.visible(now) {
                        prop_assert_eq!(&r["result"], &crate::support::ack());
                        if t.status == St::InputRequired {
                            t.status = St::Working;
                            t.due = now;
                        }
                    } else {
                        prop_assert_eq!(&r["error"]["code"], &json!(-32602));
                    }
                }
            }
            Op::Cancel(i) => {
                if let Some(t) = tasks.get_mut(i) {
                    let (_, r) = h.send("tasks/cancel", json!({"taskId": t.id}));
                    if t.visible(now) {
                        prop_assert_eq!(&r["result"], &crate::support::ack());
                        if matches!(t.status, St::Working | St::InputRequired) {
                            t.status = St::Cancelled;
                        }
                    } else {
                        prop_assert_eq!(&r["error"]["code"], &json!(-32602));
                    }
                }
            }
            Op::Tick(ms) => {
                h.advance(i64::from(ms));
                let now = h.now.get();
                h.tick();
                for t in &mut tasks {
                    if t.visible(now) {
                        t.tick(now);
                    }
                }
            }
            Op::Wait(ms) => h.advance(i64::from(ms)),
        }
        // After every operation, every task reads as the model says.
        let now = h.now.get();
        for t in &tasks {
            let (_, r) = h.send("tasks/get", json!({"taskId": t.id}));
            match t.expected(now) {
                Some(status) => prop_assert_eq!(
                    &r["result"]["status"],
                    &json!(status),
                    "{:?} at {}",
                    t,
                    now - T0
                ),
                None => prop_assert_eq!(
                    &r["error"]["code"],
                    &json!(-32602),
                    "{:?} at {}",
                    t,
                    now - T0
                ),
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn lifecycle_matches_the_model(ops in proptest::collection::vec(op(), 1..40)) {
        run(ops)?;
    }
}
