//! Steps that do I/O: the `run_job` demo against an in-process upstream,
//! retries with backoff, the attempt cap, the allow-list, cancellation seen
//! by a running step, idempotency keys, and poison tasks.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use mcp_tasks_edge::block_on;
use mcp_tasks_edge::outbound::{
    FakeOutbound, OutboundError, OutboundPolicy, OutboundRequest, OutboundResponse,
};
use mcp_tasks_edge::server::Config;
use mcp_tasks_edge::store::MemoryStore;
use mcp_tasks_edge::tasks::runner::UNLEASED_WINDOW_MS;
use mcp_tasks_edge::tasks::runner::{ClaimOutcome, CommitOutcome, idempotency_key};
use mcp_tasks_edge::tools::{
    Requirements, Start, Step, StepContext, StepOutcome, TaskSupport, TaskTool, ToolSet, task_tool,
};
use serde_json::{Value, json};

use crate::support::{Harness, claimed, config};

const API: &str = "http://jobs.test/api";

/// A job API in memory: `POST /jobs` answers from `submit` first (a queued
/// status code), then creates (or finds, by idempotency key) a job that
/// runs for `polls` polls.
#[derive(Default)]
struct Upstream {
    submit: RefCell<VecDeque<u16>>,
    polls: Cell<u32>,
    jobs: RefCell<BTreeMap<String, (String, u32)>>,
    /// Jobs end `failed` (with a reason) instead of `succeeded`.
    jobs_fail: Cell<bool>,
}

fn respond(status: u16, body: Value) -> Result<OutboundResponse, OutboundError> {
    Ok(OutboundResponse {
        status,
        headers: vec![("content-type".into(), "application/json".into())],
        body: body.to_string().into_bytes(),
    })
}

impl Upstream {
    fn answer(&self, req: &OutboundRequest) -> Result<OutboundResponse, OutboundError> {
        let path = req.url.strip_prefix(API).unwrap_or("");
        match (req.method.as_str(), path) {
            ("POST", "/jobs") => {
                if let Some(code) = self.submit.borrow_mut().pop_front() {
                    return respond(code, json!({"error": "try later"}));
                }
                let key = req
                    .headers
                    .iter()
                    .find(|(n, _)| n == "idempotency-key")
                    .map(|(_, v)| v.clone())
                    .unwrap_or_default();
                let mut jobs = self.jobs.borrow_mut();
                let n = jobs.len();
                let (id, _) = jobs
                    .entry(key)
                    .or_insert_with(|| (format!("job-{}", n + 1), self.polls.get()));
                respond(202, json!({"id": id}))
            }
            ("GET", p) if p.starts_with("/jobs/") => {
                let id = &p["/jobs/".len()..];
                let mut jobs = self.jobs.borrow_mut();
                let Some((_, left)) = jobs.values_mut().find(|(j, _)| j == id) else {
                    return respond(404, json!({}));
                };
                if *left > 0 {
                    *left -= 1;
                    return respond(200, json!({"status": "running"}));
                }
                if self.jobs_fail.get() {
                    return respond(
                        200,
                        json!({"status": "failed", "error": "the input has no rows"}),
                    );
                }
                respond(
                    200,
                    json!({"status": "succeeded", "result": {"answer": 42}}),
                )
            }
            _ => respond(404, json!({})),
        }
    }
}

fn job_config() -> Config {
    Config {
        outbound: OutboundPolicy::allowing(&["http://jobs.test".to_owned()], 64 * 1024).unwrap(),
        ..config()
    }
}

/// A harness whose steps reach `upstream` through a fake client.
fn harness(upstream: Rc<Upstream>, cfg: Config) -> (Harness, Rc<FakeOutbound>) {
    let fake = Rc::new(FakeOutbound::new(move |req| upstream.answer(req)));
    let h = serving(Arc::new(MemoryStore::new()), 1, fake.clone(), cfg);
    (h, fake)
}

/// A harness over `store` whose steps reach the fake client `out`.
fn serving(store: Arc<MemoryStore>, seed: u64, out: Rc<FakeOutbound>, cfg: Config) -> Harness {
    Harness::with_config(store, seed, cfg).with_server(|s| {
        s.with_outbound(Box::new(out))
            .with_tool_settings(Box::new(|name: &str| match name {
                "JOB_API_URL" => Some(API.to_owned()),
                "JOB_API_KEY" => Some("sk-test".to_owned()),
                "MCP_STATE_SECRET" => Some("leaked".to_owned()),
                _ => None,
            }))
    })
}

fn keys(fake: &FakeOutbound, method: &str) -> Vec<String> {
    fake.requests()
        .iter()
        .filter(|r| r.method == method)
        .map(|r| {
            r.headers
                .iter()
                .find(|(n, _)| n == "idempotency-key")
                .map(|(_, v)| v.clone())
                .unwrap_or_default()
        })
        .collect()
}

fn confirm(h: &Harness, task: &str, confirmed: bool) {
    h.ok(
        "tasks/update",
        json!({"taskId": task, "inputResponses": {
            "confirm_result": {"action": "accept", "content": {"confirmed": confirmed}}
        }}),
    );
}

#[test]
fn run_job_submits_polls_asks_and_returns_the_result() {
    let upstream = Rc::new(Upstream::default());
    upstream.polls.set(2);
    let (h, fake) = harness(upstream.clone(), job_config());
    let task = h.start("run_job", json!({"input": "numbers.csv"}));
    let t = h.run_until_settled(&task, 300, 40);
    assert_eq!(t["status"], "input_required", "{t}");
    assert!(t["inputRequests"]["confirm_result"].is_object(), "{t}");
    confirm(&h, &task, true);
    let t = h.run_until_settled(&task, 100, 5);
    assert_eq!(t["status"], "completed", "{t}");
    let sc = &t["result"]["structuredContent"];
    assert_eq!(sc["job"], "job-1");
    assert_eq!(sc["confirmed"], true);
    assert_eq!(sc["result"]["answer"], 42);

    let reqs = fake.requests();
    let posts: Vec<_> = reqs.iter().filter(|r| r.method == "POST").collect();
    assert_eq!(posts.len(), 1);
    assert_eq!(posts[0].body, br#"{"input":"numbers.csv"}"#);
    assert!(
        posts[0]
            .headers
            .contains(&("authorization".into(), "Bearer sk-test".into())),
        "the secret is sent where the tool puts it"
    );
    assert_eq!(reqs.iter().filter(|r| r.method == "GET").count(), 3);
    let key = &keys(&fake, "POST")[0];
    assert!(key.starts_with("idem_"), "{key}");
    assert!(!key.contains(&task), "the key does not reveal the task id");
}

#[test]
fn declining_completes_without_the_result() {
    let (h, _) = harness(Rc::new(Upstream::default()), job_config());
    let task = h.start("run_job", json!({"input": "x"}));
    assert_eq!(
        h.run_until_settled(&task, 300, 20)["status"],
        "input_required"
    );
    confirm(&h, &task, false);
    let t = h.run_until_settled(&task, 100, 5);
    assert_eq!(t["status"], "completed", "{t}");
    assert_eq!(t["result"]["structuredContent"]["confirmed"], false);
    assert!(t["result"]["structuredContent"].get("result").is_none());
}

/// A tick whose outbound client is bounded (a Worker invocation's
/// subrequests) claims no task once fewer requests are left than one of
/// its steps used: the tasks left over are not attempted, keep their
/// attempts, and are stepped by the next tick, with a client of its own.
/// Claimed, their requests would be refused mid-step and count attempts.
#[test]
fn a_bounded_outbound_client_holds_tasks_back_instead_of_failing_their_steps() {
    use mcp_tasks_edge::outbound::Budgeted;
    let upstream = Rc::new(Upstream::default());
    let fake = Rc::new(FakeOutbound::new({
        let upstream = upstream.clone();
        move |req| upstream.answer(req)
    }));
    let store = Arc::new(MemoryStore::new());
    let bounded = |seed: u64, budget: usize| {
        Harness::with_config(store.clone(), seed, job_config()).with_server(|s| {
            s.with_outbound(Box::new(Budgeted::new(fake.clone(), budget)))
                .with_tool_settings(Box::new(|name: &str| match name {
                    "JOB_API_URL" => Some(API.to_owned()),
                    "JOB_API_KEY" => Some("sk-test".to_owned()),
                    _ => None,
                }))
        })
    };
    let h = bounded(1, 4);
    let tasks: Vec<String> = (0..6)
        .map(|i| h.start("run_job", json!({"input": format!("f{i}.csv")})))
        .collect();
    let report = h.tick();
    // Each first step submits once: four fit, two are held back.
    assert_eq!((report.stepped, report.held_back), (4, 2), "{report}");
    // The slices of one round (the local host's) add up what each held back.
    let mut round = mcp_tasks_edge::tasks::runner::TickReport::default();
    round.absorb(&report);
    round.absorb(&report);
    assert_eq!(round.held_back, 4, "{round}");
    assert_eq!(keys(&fake, "POST").len(), 4);
    let messages: Vec<String> = tasks
        .iter()
        .map(|t| h.get(t)["statusMessage"].as_str().unwrap_or("").to_owned())
        .collect();
    assert!(
        messages.iter().all(|m| !m.contains("failed")),
        "no step met a refused request: {messages:?}"
    );
    // The next invocation, with its own budget, steps the two.
    let next = bounded(2, 4);
    next.now.set(h.now.get());
    let report = next.tick();
    assert_eq!((report.stepped, report.held_back), (2, 0), "{report}");
    assert_eq!(keys(&fake, "POST").len(), 6);
    for t in &tasks {
        let task = next.get(t);
        assert_eq!(task["statusMessage"], "The job is running.", "{task}");
    }
}

#[test]
fn upstream_errors_are_retried_with_backoff_and_the_same_key() {
    let upstream = Rc::new(Upstream::default());
    upstream.submit.borrow_mut().extend([500, 429, 503]);
    let (h, fake) = harness(upstream, job_config());
    let task = h.start("run_job", json!({"input": "x"}));
    h.tick();
    let t = h.get(&task);
    assert_eq!(t["status"], "working");
    assert!(
        t["statusMessage"]
            .as_str()
            .unwrap()
            .contains("Attempt 1 failed"),
        "{t}"
    );
    // The backoff doubles: nothing is due 999 ms later, the retry is at 1 s.
    h.advance(999);
    assert_eq!(h.tick().stepped, 0);
    h.advance(1);
    assert_eq!(h.tick().stepped, 1);
    h.advance(1_999);
    assert_eq!(h.tick().stepped, 0);
    h.advance(1);
    assert_eq!(h.tick().stepped, 1);
    let t = h.run_until_settled(&task, 1_000, 40);
    assert_eq!(t["status"], "input_required", "{t}");
    let submitted = keys(&fake, "POST");
    assert_eq!(submitted.len(), 4, "three failures, then success");
    assert!(
        submitted.iter().all(|k| *k == submitted[0]),
        "{submitted:?}"
    );
    // The next step (a poll) has a key of its own.
    let claim_key = idempotency_key(b"test-secret-key-of-at-least-32-bytes", &task, 0);
    assert_eq!(submitted[0], claim_key);
    assert_ne!(
        idempotency_key(b"test-secret-key-of-at-least-32-bytes", &task, 1),
        claim_key
    );
}

#[test]
fn a_key_rotation_keeps_a_running_tasks_idempotency_keys() {
    let upstream = Rc::new(Upstream::default());
    upstream.submit.borrow_mut().push_back(500);
    let fake = Rc::new(FakeOutbound::new(move |req| upstream.answer(req)));
    let store = Arc::new(MemoryStore::new());
    let h = serving(store.clone(), 1, fake.clone(), job_config());
    let task = h.start("run_job", json!({"input": "x"}));
    h.tick();
    // The state key is rotated between the failed attempt and its retry.
    let mut rotated = job_config();
    rotated.state_keys =
        mcp_tasks_edge::crypto::Keyring::new(b"a-brand-new-state-key-of-32-bytes!!".to_vec())
            .with_previous(b"test-secret-key-of-at-least-32-bytes".to_vec());
    let r = serving(store, 2, fake.clone(), rotated);
    r.now.set(h.now.get() + 1_000);
    assert_eq!(r.tick().stepped, 1);
    let submitted = keys(&fake, "POST");
    assert_eq!(submitted.len(), 2, "{submitted:?}");
    assert_eq!(submitted[1], submitted[0], "the retry keeps its key");
    assert_eq!(
        submitted[0],
        idempotency_key(b"test-secret-key-of-at-least-32-bytes", &task, 0)
    );
}

#[test]
fn an_upstream_failing_for_good_fails_the_task_after_the_maximum_attempts() {
    let upstream = Rc::new(Upstream::default());
    upstream.submit.borrow_mut().extend([500; 20]);
    let mut cfg = job_config();
    cfg.retry.max_attempts = 3;
    let (h, fake) = harness(upstream, cfg);
    let task = h.start("run_job", json!({"input": "x"}));
    let t = h.run_until_settled(&task, 5_000, 20);
    assert_eq!(t["status"], "failed", "{t}");
    let msg = t["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("failed after 3 attempts") && msg.contains("answered 500"),
        "{msg}"
    );
    assert_eq!(keys(&fake, "POST").len(), 3);
}

/// What the model should hear about is the tool's answer, not a fault of
/// the server: the API refusing the job, or the job failing, completes the
/// task with an error result (`failed` is for JSON-RPC errors only).
#[test]
fn a_refused_or_failed_job_completes_with_an_error_result() {
    let refused = Rc::new(Upstream::default());
    refused.submit.borrow_mut().push_back(422);
    let (h, fake) = harness(refused, job_config());
    let task = h.start("run_job", json!({"input": "x"}));
    let t = h.run_until_settled(&task, 1_000, 5);
    assert_eq!(t["status"], "completed", "{t}");
    assert_eq!(t["result"]["isError"], true, "{t}");
    assert_eq!(
        t["result"]["content"][0]["text"], "submit: the job API answered 422",
        "{t}"
    );
    assert!(t.get("error").is_none(), "{t}");
    assert_eq!(keys(&fake, "POST").len(), 1, "a refusal is not retried");

    let failing = Rc::new(Upstream::default());
    failing.jobs_fail.set(true);
    let (h, _) = harness(failing, job_config());
    let task = h.start("run_job", json!({"input": "empty.csv"}));
    let t = h.run_until_settled(&task, 1_000, 10);
    assert_eq!(t["status"], "completed", "{t}");
    assert_eq!(t["result"]["isError"], true, "{t}");
    assert_eq!(
        t["result"]["content"][0]["text"], "The job failed: the input has no rows",
        "{t}"
    );
}

#[test]
fn an_origin_off_the_allow_list_is_refused_in_the_step() {
    let (h, fake) = harness(Rc::new(Upstream::default()), config());
    let task = h.start("run_job", json!({"input": "x"}));
    let t = h.run_until_settled(&task, 1_000, 3);
    assert_eq!(t["status"], "failed", "{t}");
    let msg = t["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("http://jobs.test is not on the allow-list"),
        "{msg}"
    );
    assert!(fake.requests().is_empty(), "nothing was sent");
}

#[test]
fn a_cancel_during_a_running_poll_is_seen_by_the_step() {
    let upstream = Rc::new(Upstream::default());
    upstream.polls.set(100);
    let (h, fake) = harness(upstream, job_config());
    let task = h.start("run_job", json!({"input": "x"}));
    h.tick(); // submitted
    h.advance(300);
    let runner = h.server.runner();
    let claim = claimed(block_on(runner.claim(&task, h.now.get())).unwrap());
    h.send("tasks/cancel", json!({"taskId": task}));
    assert_eq!(h.status(&task), "working", "only the intent is recorded");
    let gets_before = keys(&fake, "GET").len();
    let outcome = block_on(runner.step(&claim, h.now.get()));
    assert!(matches!(outcome, StepOutcome::Cancel(_)), "{outcome:?}");
    assert_eq!(
        keys(&fake, "GET").len(),
        gets_before,
        "the step stopped early"
    );
    assert_eq!(
        block_on(runner.commit(claim, outcome, h.now.get())).unwrap(),
        CommitOutcome::Committed(mcp_tasks_edge::protocol::tasks::TaskStatus::Cancelled)
    );
    assert_eq!(h.status(&task), "cancelled");
}

/// A tool without arguments.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct NoArgs {}

#[test]
fn tool_settings_never_expose_the_servers_own() {
    struct Peek;
    impl TaskTool for Peek {
        type Args = NoArgs;
        type State = ();
        type Output = String;
        const NAME: &'static str = "peek";
        const DESCRIPTION: &'static str = "reads settings";
        fn start(&self, _: &NoArgs) -> Start<()> {
            Start::now(())
        }
        async fn step(&self, _: NoArgs, _: (), s: &StepContext<'_>) -> Step<(), String> {
            Step::Done(format!(
                "{:?} {:?} {:?}",
                s.setting("MCP_STATE_SECRET"),
                s.setting("JOB_API_URL"),
                s.secret("JOB_API_KEY")
            ))
        }
    }
    let store = Arc::new(MemoryStore::new());
    let h = Harness::with_config(store, 1, config()).with_server(|s| {
        let cfg = s.config().clone();
        let store = s.store().clone();
        mcp_tasks_edge::server::Server::new(
            store,
            cfg,
            ToolSet::from_tools(vec![task_tool(Peek)]),
            Box::new(mcp_tasks_edge::ids::SequentialIds::starting_at(9)),
        )
        .unwrap()
        .with_tool_settings(Box::new(|name: &str| Some(format!("value-of-{name}"))))
    });
    let task = h.start("peek", json!({}));
    let t = h.run_until_settled(&task, 10, 3);
    assert_eq!(
        t["result"]["content"][0]["text"],
        r#"None Some("value-of-JOB_API_URL") Some(Secret(***))"#
    );
}

/// A task tool that counts its steps and never finishes on its own.
struct Counting(Arc<AtomicUsize>);

impl TaskTool for Counting {
    type Args = NoArgs;
    type State = ();
    type Output = String;
    const NAME: &'static str = "counting";
    const DESCRIPTION: &'static str = "counts steps";
    fn start(&self, _: &NoArgs) -> Start<()> {
        Start::now(())
    }
    async fn step(&self, _: NoArgs, _: (), _: &StepContext<'_>) -> Step<(), String> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Step::after((), 1_000)
    }
}

/// A task tool with replayable steps that counts them and asks to retry
/// its first one, due 1 ms after the create (so the runner, not the create,
/// runs it).
struct ReplayCounting(Arc<AtomicUsize>);

impl TaskTool for ReplayCounting {
    type Args = NoArgs;
    type State = ();
    type Output = String;
    const NAME: &'static str = "replay_counting";
    const DESCRIPTION: &'static str = "counts replayable steps";
    fn requirements(&self) -> Requirements {
        Requirements::new(TaskSupport::Required).with_replayable_steps()
    }
    fn start(&self, _: &NoArgs) -> Start<()> {
        Start::now(()).after_ms(1)
    }
    async fn step(&self, _: NoArgs, _: (), cx: &StepContext<'_>) -> Step<(), String> {
        self.0.fetch_add(1, Ordering::SeqCst);
        if cx.step_number() == 0 {
            return Step::Retry {
                error: "not yet".to_owned(),
                after_ms: Some(10),
            };
        }
        Step::after((), 1_000)
    }
}

/// A replayable task tool that (wrongly) calls the job API.
struct ReplayFetch;

impl TaskTool for ReplayFetch {
    type Args = NoArgs;
    type State = ();
    type Output = String;
    const NAME: &'static str = "replay_fetch";
    const DESCRIPTION: &'static str = "calls out from a replayable step";
    fn requirements(&self) -> Requirements {
        Requirements::new(TaskSupport::Required).with_replayable_steps()
    }
    fn start(&self, _: &NoArgs) -> Start<()> {
        Start::now(())
    }
    async fn step(&self, _: NoArgs, _: (), cx: &StepContext<'_>) -> Step<(), String> {
        let sent = cx
            .fetch(mcp_tasks_edge::outbound::OutboundRequest::get(&format!(
                "{API}/jobs/x"
            )))
            .await;
        Step::Done(match sent {
            Ok(r) => format!("sent: {}", r.status),
            Err(e) => format!("refused: {e}"),
        })
    }
}

/// Operator log lines written by the servers of these tests.
static LOG: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

fn log_line(line: &str) {
    LOG.lock().unwrap().push(line.to_owned());
}

/// The logged lines that mention `needle`.
fn logged(needle: &str) -> Vec<String> {
    LOG.lock()
        .unwrap()
        .iter()
        .filter(|l| l.contains(needle))
        .cloned()
        .collect()
}

fn counting_harness(max_attempts: u32) -> (Harness, Arc<AtomicUsize>) {
    let steps = Arc::new(AtomicUsize::new(0));
    let mut cfg = config();
    cfg.retry.max_attempts = max_attempts;
    let tools = mcp_tasks_edge::demo::tools(mcp_tasks_edge::demo::DEFAULT_OUTLINE_MS)
        .with(task_tool(Counting(steps.clone())))
        .with(task_tool(ReplayCounting(steps.clone())));
    let h = Harness::with_config(Arc::new(MemoryStore::new()), 1, config()).with_server(|s| {
        mcp_tasks_edge::server::Server::new(
            s.store().clone(),
            cfg,
            tools,
            Box::new(mcp_tasks_edge::ids::SequentialIds::starting_at(7)),
        )
        .unwrap()
        .with_log(log_line)
    });
    (h, steps)
}

#[test]
fn a_commit_that_loses_a_race_does_not_run_the_step_again() {
    let (h, steps) = counting_harness(5);
    let task = h.start("counting", json!({}));
    let runner = h.server.runner();
    let claim = claimed(block_on(runner.claim(&task, h.now.get())).unwrap());
    let outcome = block_on(runner.step(&claim, h.now.get()));
    h.send("tasks/cancel", json!({"taskId": task}));
    assert_eq!(
        block_on(runner.commit(claim, outcome, h.now.get())).unwrap(),
        CommitOutcome::Committed(mcp_tasks_edge::protocol::tasks::TaskStatus::Cancelled)
    );
    assert_eq!(steps.load(Ordering::SeqCst), 1, "the step ran once");
}

#[test]
fn a_poison_task_whose_runner_keeps_dying_fails_and_others_go_on() {
    let (h, _) = counting_harness(3);
    let poison = h.start("counting", json!({}));
    let report = h.start("generate_report", json!({"size": "small"}));
    let lease = h.server.config().lease_ms as i64;
    // Three runners claim the poison task and die before committing.
    for _ in 0..3 {
        let runner = h.server.runner();
        assert!(matches!(
            block_on(runner.claim(&poison, h.now.get())).unwrap(),
            ClaimOutcome::Claimed(_)
        ));
        h.advance(lease + 1);
    }
    // The next tick gives up on it, and the other task goes on.
    let r = h.tick();
    assert!(r.errors >= 1 && r.finished >= 1, "{r:?}");
    let t = h.get(&poison);
    assert_eq!(t["status"], "failed", "{t}");
    assert!(
        t["error"]["message"]
            .as_str()
            .unwrap()
            .contains("did not finish after 3 attempts"),
        "{t}"
    );
    assert_eq!(h.status(&report), "input_required");
    // Nothing is left due for the poison task but its purge at expiry.
    assert_eq!(h.tick().due, 0);
    let lines = logged(&poison);
    assert_eq!(lines.len(), 1, "logged once: {lines:?}");
    let line: Value = serde_json::from_str(&lines[0]).unwrap();
    assert_eq!(line["event"], "task-gave-up");
    assert_eq!(line["attempts"], 3);
}

#[test]
fn a_steady_task_resets_its_attempts_at_every_step() {
    let (h, steps) = counting_harness(2);
    let task = h.start("counting", json!({}));
    for _ in 0..6 {
        h.tick();
        h.advance(1_000);
    }
    assert_eq!(steps.load(Ordering::SeqCst), 6);
    assert_eq!(h.status(&task), "working");
}

/// The platform clock of `a_step_past_its_deadline_sends_nothing`: its
/// first reading after a tick starts (the claim's) is `LATE_BASE`, every
/// later one (the step's, the commit's) `LATE_CLOCK`.
static LATE_BASE: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);
static LATE_CLOCK: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);
static LATE_READS: AtomicUsize = AtomicUsize::new(0);

fn late_clock() -> i64 {
    if LATE_READS.fetch_add(1, Ordering::SeqCst) == 0 {
        LATE_BASE.load(Ordering::SeqCst)
    } else {
        LATE_CLOCK.load(Ordering::SeqCst)
    }
}

#[test]
fn a_step_past_its_deadline_sends_nothing() {
    let (h, fake) = harness(Rc::new(Upstream::default()), job_config());
    let h = h.with_server(|s| s.with_clock(late_clock));
    let task = h.start("run_job", json!({"input": "x"}));
    // By the platform clock the step's deadline (its lease's end less a
    // margin) has come when it calls out: the call is not made, and the
    // step's retry still commits inside the lease.
    let lease = h.server.config().lease_ms as i64;
    LATE_BASE.store(h.now.get(), Ordering::SeqCst);
    LATE_CLOCK.store(
        h.now.get() + lease - (lease / 5).min(5_000),
        Ordering::SeqCst,
    );
    LATE_READS.store(0, Ordering::SeqCst);
    assert_eq!(h.tick().stepped, 1);
    let t = h.get(&task);
    assert_eq!(t["status"], "working", "{t}");
    assert!(
        t["statusMessage"].as_str().unwrap().contains("timed out"),
        "{t}"
    );
    assert!(fake.requests().is_empty(), "nothing was sent");

    // A step that ends after its lease is abandoned: nothing is committed.
    h.advance(lease);
    LATE_BASE.store(h.now.get(), Ordering::SeqCst);
    LATE_CLOCK.store(h.now.get() + 10 * lease, Ordering::SeqCst);
    LATE_READS.store(0, Ordering::SeqCst);
    let r = h.tick();
    assert_eq!((r.stepped, r.fenced), (0, 1), "{r:?}");
}

#[test]
fn an_undecodable_record_is_quarantined_once_and_others_go_on() {
    use mcp_tasks_edge::store::Store as _;
    let (h, steps) = counting_harness(3);
    let a = h.start("counting", json!({}));
    let b = h.start("counting", json!({}));
    // Poison records due before the real tasks: one whose view line still
    // names its expiry, one that is garbage throughout.
    let expiry = h.now.get() + 600_000;
    let store = h.store.clone();
    let poison_view = "tsk_poisonViewAAAAAAAAAAAA";
    let poison_junk = "tsk_poisonJunkAAAAAAAAAAAA";
    block_on(store.put(
        poison_view,
        None,
        &format!("{{\"expires_at\":{expiry}}}\n{{not a record"),
        Some(h.now.get() - 10),
    ))
    .unwrap();
    block_on(store.put(poison_junk, None, "\u{0}garbage", Some(h.now.get() - 5))).unwrap();
    h.advance(1_000);
    let r = h.tick();
    assert_eq!(r.errors, 2, "{r:?}");
    // The real tasks were not held up.
    assert_eq!(steps.load(Ordering::SeqCst), 2);
    assert_eq!(h.status(&a), "working");
    assert_eq!(h.status(&b), "working");
    // Both poison records moved out of the due index, kept for an operator.
    for id in [poison_view, poison_junk] {
        assert_eq!(block_on(store.get(id)).unwrap(), None, "{id}");
        let kept = block_on(store.get(&format!("qrn_{id}"))).unwrap().unwrap();
        assert!(
            kept.due_at.unwrap() > h.now.get(),
            "{id} is not due again soon"
        );
        let lines = logged(id);
        assert_eq!(lines.len(), 1, "logged once: {lines:?}");
        let line: Value = serde_json::from_str(&lines[0]).unwrap();
        assert_eq!(line["event"], "quarantine");
    }
    assert_eq!(
        block_on(store.get(&format!("qrn_{poison_view}")))
            .unwrap()
            .unwrap()
            .due_at,
        Some(expiry),
        "purged when the task would have expired"
    );
    // Nothing more is due, so nothing is retried in a loop or logged again.
    for _ in 0..5 {
        h.advance(1_000);
        let r = h.tick();
        assert_eq!(r.errors, 0, "{r:?}");
    }
    assert_eq!(
        steps.load(Ordering::SeqCst),
        12,
        "the real tasks kept going"
    );
    assert_eq!(logged(poison_view).len(), 1);
    // At its expiry, the quarantined record is purged.
    h.advance(600_000);
    let r = h.tick();
    assert!(r.purged >= 1, "{r:?}");
    assert_eq!(
        block_on(store.get(&format!("qrn_{poison_view}"))).unwrap(),
        None
    );
}

#[test]
fn an_unleased_step_that_never_commits_is_claimed_and_counted_after_the_window() {
    let (h, _) = counting_harness(3);
    let poison = h.start("replay_counting", json!({}));
    let lease = h.server.config().lease_ms as i64;
    let due = h.now.get() + 1;
    // Within the window, runners that die mid-step leave nothing behind:
    // each next runner steps it unleased again.
    let mut versions = Vec::new();
    for t in [due, due + UNLEASED_WINDOW_MS - 1] {
        let claim = claimed(block_on(h.server.runner().claim(&poison, t)).unwrap());
        assert!(!claim.leased && claim.record.attempts == 0, "{claim:?}");
        versions.push(claim.version);
    }
    assert_eq!(versions[0], versions[1], "an unleased claim writes nothing");
    // Past it, every start is claimed and counted, and the third runner
    // to die makes the task fail.
    let mut t = due + UNLEASED_WINDOW_MS;
    for attempt in 1..=3 {
        let claim = claimed(block_on(h.server.runner().claim(&poison, t)).unwrap());
        assert!(
            claim.leased && claim.record.attempts == attempt,
            "{claim:?}"
        );
        t += lease + 1;
    }
    assert!(matches!(
        block_on(h.server.runner().claim(&poison, t)).unwrap(),
        ClaimOutcome::GaveUp
    ));
    h.now.set(t);
    let failed = h.get(&poison);
    assert_eq!(failed["status"], "failed", "{failed}");
}

#[test]
fn an_unleased_step_that_asks_to_retry_counts_its_attempt() {
    let (h, steps) = counting_harness(5);
    let task = h.start("replay_counting", json!({}));
    let runner = h.server.runner();
    let now = h.now.get() + 1;
    let claim = claimed(block_on(runner.claim(&task, now)).unwrap());
    assert!(!claim.leased);
    let outcome = block_on(runner.step(&claim, now));
    assert!(matches!(outcome, StepOutcome::Retry { .. }), "{outcome:?}");
    assert_eq!(
        block_on(runner.commit(claim, outcome, now)).unwrap(),
        CommitOutcome::Committed(mcp_tasks_edge::protocol::tasks::TaskStatus::Working)
    );
    // The retry is counted, so the step's next start is claimed.
    let again = claimed(block_on(runner.claim(&task, now + 10)).unwrap());
    assert!(again.leased && again.record.attempts == 2, "{again:?}");
    assert_eq!(steps.load(Ordering::SeqCst), 1);
}

#[test]
fn two_unleased_retries_of_one_step_count_once() {
    let (h, steps) = counting_harness(5);
    let task = h.start("replay_counting", json!({}));
    let now = h.now.get() + 1;
    let (a, b) = (h.server.runner(), h.server.runner());
    let claim_a = claimed(block_on(a.claim(&task, now)).unwrap());
    let claim_b = claimed(block_on(b.claim(&task, now)).unwrap());
    let out_a = block_on(a.step(&claim_a, now));
    let out_b = block_on(b.step(&claim_b, now));
    assert_eq!(steps.load(Ordering::SeqCst), 2, "both ran the step");
    assert_eq!(
        block_on(a.commit(claim_a, out_a, now)).unwrap(),
        CommitOutcome::Committed(mcp_tasks_edge::protocol::tasks::TaskStatus::Working)
    );
    // The same step number, but the attempt count moved: fenced.
    assert_eq!(
        block_on(b.commit(claim_b, out_b, now)).unwrap(),
        CommitOutcome::Fenced
    );
    let next = claimed(block_on(a.claim(&task, now + 10)).unwrap());
    assert!(next.leased && next.record.attempts == 2, "{next:?}");
}

#[test]
fn an_unleased_step_cannot_commit_over_a_claim_taken_after_the_window() {
    let (h, _) = counting_harness(5);
    let task = h.start("replay_counting", json!({}));
    let now = h.now.get() + 1;
    let slow = h.server.runner();
    let unleased = claimed(block_on(slow.claim(&task, now)).unwrap());
    let outcome = block_on(slow.step(&unleased, now));
    // Past the window another runner claims it.
    let later = now + UNLEASED_WINDOW_MS;
    let claim = claimed(block_on(h.server.runner().claim(&task, later)).unwrap());
    assert!(claim.leased && claim.record.attempts == 1);
    assert_eq!(
        block_on(slow.commit(unleased, outcome, later)).unwrap(),
        CommitOutcome::Fenced
    );
    // The claim is kept as it was written: still leased, so skipped.
    let again = block_on(h.server.runner().claim(&task, later + 1)).unwrap();
    assert!(matches!(again, ClaimOutcome::Skipped), "{again:?}");
}

#[test]
fn a_replayable_step_gets_no_outbound_http() {
    let upstream = Rc::new(Upstream::default());
    let fake = Rc::new(FakeOutbound::new(move |req| upstream.answer(req)));
    let h = Harness::with_config(Arc::new(MemoryStore::new()), 1, job_config()).with_server(|s| {
        mcp_tasks_edge::server::Server::new(
            s.store().clone(),
            job_config(),
            mcp_tasks_edge::demo::tools(mcp_tasks_edge::demo::DEFAULT_OUTLINE_MS)
                .with(task_tool(ReplayFetch)),
            Box::new(mcp_tasks_edge::ids::SequentialIds::starting_at(7)),
        )
        .unwrap()
        .with_outbound(Box::new(fake.clone()))
    });
    let task = h.start("replay_fetch", json!({}));
    let t = h.run_until_settled(&task, 10, 3);
    let text = t["result"]["structuredContent"]["result"]
        .as_str()
        .or(t["result"]["content"][0]["text"].as_str())
        .unwrap_or_default()
        .to_owned();
    assert!(text.starts_with("refused: "), "{t}");
    assert!(fake.requests().is_empty(), "nothing was sent");
}

/// A replayable task tool due at once whose result is larger than a task
/// may store.
struct ReplayLarge;

impl TaskTool for ReplayLarge {
    type Args = NoArgs;
    type State = ();
    type Output = String;
    const NAME: &'static str = "replay_large";
    const DESCRIPTION: &'static str = "a replayable step with a large result";
    fn requirements(&self) -> Requirements {
        Requirements::new(TaskSupport::Required).with_replayable_steps()
    }
    fn start(&self, _: &NoArgs) -> Start<()> {
        Start::now(())
    }
    async fn step(&self, _: NoArgs, _: (), _: &StepContext<'_>) -> Step<(), String> {
        Step::Done("x".repeat(20_000))
    }
}

#[test]
fn an_inline_step_whose_result_is_too_large_is_left_to_the_runner_which_fails_it() {
    let mut cfg = config();
    cfg.limits.max_task_bytes = 16_000;
    let h = Harness::with_config(Arc::new(MemoryStore::new()), 1, config()).with_server(|s| {
        mcp_tasks_edge::server::Server::new(
            s.store().clone(),
            cfg,
            mcp_tasks_edge::tools::ToolSet::empty().with(task_tool(ReplayLarge)),
            Box::new(mcp_tasks_edge::ids::SequentialIds::starting_at(7)),
        )
        .unwrap()
    });
    let task = h.start("replay_large", json!({}));
    // The create stored the task as it was before the step, still due.
    assert_eq!(h.status(&task), "working");
    assert_eq!(h.tick().stepped, 1);
    let t = h.get(&task);
    assert_eq!(t["status"], "failed", "{t}");
    assert!(
        t["error"]["message"]
            .as_str()
            .unwrap()
            .contains("larger than the 16000 bytes"),
        "{t}"
    );
}

/// The platform clock of `an_inline_step_that_overruns_its_lease_is_dropped`.
static OVERRUN_CLOCK: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);

#[test]
fn an_inline_step_that_overruns_its_lease_is_dropped() {
    let h = Harness::with_config(Arc::new(MemoryStore::new()), 1, config()).with_server(|s| {
        mcp_tasks_edge::server::Server::new(
            s.store().clone(),
            config(),
            mcp_tasks_edge::demo::tools(0),
            Box::new(mcp_tasks_edge::ids::SequentialIds::starting_at(7)),
        )
        .unwrap()
        .with_clock(|| OVERRUN_CLOCK.load(Ordering::SeqCst))
    });
    // By the platform clock the step ends when its lease would have.
    let lease = h.server.config().lease_ms as i64;
    OVERRUN_CLOCK.store(h.now.get() + lease, Ordering::SeqCst);
    let task = h.start("generate_report", json!({"size": "small"}));
    assert_eq!(h.status(&task), "working", "the step's outcome was dropped");
    // The runner steps it as any due task.
    OVERRUN_CLOCK.store(0, Ordering::SeqCst);
    assert_eq!(h.tick().stepped, 1);
    assert_eq!(h.status(&task), "input_required");
}

/// Steps run by [`ReplayCounted`].
static COUNTED_STEPS: AtomicUsize = AtomicUsize::new(0);

/// A replayable task tool due at once that counts its steps.
struct ReplayCounted;

impl TaskTool for ReplayCounted {
    type Args = NoArgs;
    type State = ();
    type Output = String;
    const NAME: &'static str = "replay_counted";
    const DESCRIPTION: &'static str = "a replayable step that counts itself";
    fn requirements(&self) -> Requirements {
        Requirements::new(TaskSupport::Required).with_replayable_steps()
    }
    fn start(&self, _: &NoArgs) -> Start<()> {
        Start::now(())
    }
    async fn step(&self, _: NoArgs, _: (), _: &StepContext<'_>) -> Step<(), String> {
        COUNTED_STEPS.fetch_add(1, Ordering::SeqCst);
        Step::Continue {
            state: (),
            wake_in_ms: 60_000,
            message: None,
        }
    }
}

#[test]
fn a_create_the_quota_refuses_runs_no_inline_step() {
    let mut cfg = config();
    cfg.limits.max_outstanding_tasks = 1;
    cfg.limits.max_tasks_per_minute = 0;
    let h = Harness::with_config(Arc::new(MemoryStore::new()), 1, cfg.clone()).with_server(|s| {
        mcp_tasks_edge::server::Server::new(
            s.store().clone(),
            cfg,
            ToolSet::empty().with(task_tool(ReplayCounted)),
            Box::new(mcp_tasks_edge::ids::SequentialIds::starting_at(7)),
        )
        .unwrap()
    });
    let task = h.start("replay_counted", json!({}));
    assert_eq!(
        COUNTED_STEPS.load(Ordering::SeqCst),
        1,
        "the create stepped it"
    );
    let t = h.get(&task);
    assert_eq!(t["status"], "working", "{t}");
    for _ in 0..5 {
        let (status, v) = h.send(
            "tools/call",
            json!({"name": "replay_counted", "arguments": {}}),
        );
        assert_eq!(status, 429, "{v}");
    }
    assert_eq!(
        COUNTED_STEPS.load(Ordering::SeqCst),
        1,
        "a refused create ran a step"
    );
}

/// The platform clock of
/// `each_task_of_a_tick_is_claimed_when_the_tick_reaches_it`.
static SLOW_CLOCK: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);

/// Two due tasks in one tick whose steps each take three fifths of a
/// lease (by the platform clock): the second is claimed when the first is
/// done, with a lease of its own time, and commits.
#[test]
fn each_task_of_a_tick_is_claimed_when_the_tick_reaches_it() {
    let lease = config().lease_ms as i64;
    let upstream = Rc::new(Upstream::default());
    let fake = Rc::new(FakeOutbound::new(move |req| {
        SLOW_CLOCK.fetch_add(lease * 3 / 5, Ordering::SeqCst);
        upstream.answer(req)
    }));
    let h = serving(Arc::new(MemoryStore::new()), 1, fake.clone(), job_config())
        .with_server(|s| s.with_clock(|| SLOW_CLOCK.load(Ordering::SeqCst)));
    let a = h.start("run_job", json!({"input": "a"}));
    let b = h.start("run_job", json!({"input": "b"}));
    SLOW_CLOCK.store(h.now.get(), Ordering::SeqCst);
    let r = h.tick();
    assert_eq!((r.stepped, r.fenced), (2, 0), "{r:?}");
    assert_eq!(fake.requests().len(), 2);
    for task in [a, b] {
        let t = h.get(&task);
        assert_eq!(t["status"], "working", "{t}");
        assert!(
            !t["statusMessage"].as_str().unwrap_or("").contains("failed"),
            "{t}"
        );
    }
}

/// A typed task tool that refuses some arguments before any task, and
/// declares `TaskSupport::Never` (read as `Required`: it always answers
/// with a task).
struct Checked;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct CheckedArgs {
    minutes: u32,
}

impl TaskTool for Checked {
    type Args = CheckedArgs;
    type State = ();
    type Output = String;
    const NAME: &'static str = "checked";
    const DESCRIPTION: &'static str = "refuses more than an hour";
    fn requirements(&self) -> Requirements {
        Requirements::new(TaskSupport::Never)
    }
    fn check(&self, args: &CheckedArgs) -> Result<(), String> {
        if args.minutes > 60 {
            return Err("minutes must be at most 60".to_owned());
        }
        Ok(())
    }
    fn start(&self, args: &CheckedArgs) -> Start<()> {
        Start::now(()).after_ms(u64::from(args.minutes) * 60_000)
    }
    async fn step(&self, _: CheckedArgs, _: (), _: &StepContext<'_>) -> Step<(), String> {
        Step::Done("done".to_owned())
    }
}

#[test]
fn a_typed_task_tool_refuses_arguments_before_any_task_and_is_always_a_task() {
    let h = Harness::with_config(Arc::new(MemoryStore::new()), 1, config()).with_server(|s| {
        mcp_tasks_edge::server::Server::new(
            s.store().clone(),
            config(),
            ToolSet::empty().with(task_tool(Checked)),
            Box::new(mcp_tasks_edge::ids::SequentialIds::starting_at(7)),
        )
        .unwrap()
    });
    let before = h.store.len();
    let r = h.ok(
        "tools/call",
        json!({"name": "checked", "arguments": {"minutes": 90}}),
    );
    assert_eq!(r["isError"], true, "{r}");
    assert_eq!(r["content"][0]["text"], "minutes must be at most 60");
    assert_eq!(h.store.len(), before, "nothing stored");
    let task = h.start("checked", json!({"minutes": 1}));
    assert_eq!(h.status(&task), "working");
    // Refused as a task-only tool to a client without the extension,
    // whatever it declared.
    let (status, e) = h.send_with(
        "tools/call",
        json!({"name": "checked", "arguments": {"minutes": 1}}),
        json!({}),
    );
    assert_eq!(
        (status, e["error"]["code"].as_i64()),
        (400, Some(-32021)),
        "{e}"
    );
    // A 2025-11-25 client sees it listed as task-only.
    let post = |body: Value, session: Option<&str>| {
        let mut headers = vec![("content-type", "application/json")];
        if let Some(s) = session {
            headers.push(("mcp-session-id", s));
            headers.push(("mcp-protocol-version", "2025-11-25"));
        }
        h.post_raw(&headers, &serde_json::to_vec(&body).unwrap())
    };
    let init = post(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "old", "version": "1"}}}),
        None,
    );
    let session = init.header("mcp-session-id").unwrap().to_owned();
    let listed = crate::support::body_json(&post(
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        Some(&session),
    ));
    assert_eq!(
        listed["result"]["tools"][0]["execution"]["taskSupport"], "required",
        "{listed}"
    );
}
