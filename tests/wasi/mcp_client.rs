//! A real MCP client against the local host: rmcp 3.11's Streamable HTTP
//! client (Discover lifecycle, protocol 2026-07-28, tasks extension and
//! elicitation declared) drives the hyper host serving the component, with
//! the host's own ticker advancing the tasks on the system clock.

use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ClientCapabilities,
    DetailedTask, GetTaskParams, Implementation, InputRequest, InputResponses, ProtocolVersion,
    TaskPayload, TaskStatus, UpdateTaskParams,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientLifecycleMode, ClientServiceExt, RoleClient, ServiceError};
use serde_json::{Value, json};

use crate::runtime::{Clock, Settings};
use crate::support::{TempDir, env, runtime};

type Client = rmcp::service::RunningService<RoleClient, rmcp::model::ClientConfig>;

fn args(v: Value) -> serde_json::Map<String, Value> {
    v.as_object().unwrap().clone()
}

/// Polls `tasks/get` at the task's interval until `done` holds (at most 400
/// polls).
async fn poll_until(
    client: &Client,
    id: &str,
    interval: Duration,
    done: impl Fn(&DetailedTask) -> bool,
) -> DetailedTask {
    for _ in 0..400 {
        let got = client
            .peer()
            .get_task(GetTaskParams::new(id.to_owned()))
            .await
            .unwrap();
        if done(&got.task) {
            return got.task;
        }
        tokio::time::sleep(interval).await;
    }
    panic!("task {id} never reached the expected state")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_client_runs_answers_and_cancels_tasks_over_http() {
    rmcp_scenario("rmcp", Vec::new()).await;
}

/// The same with connections served by worker threads, each running its
/// own single-threaded runtime (what `host --threads N` does).
#[tokio::test(flavor = "current_thread")]
async fn rmcp_client_is_served_on_worker_threads() {
    let workers = crate::serve::worker_threads(2).unwrap();
    rmcp_scenario("rmcp-workers", workers).await;
}

async fn rmcp_scenario(name: &str, workers: Vec<tokio::runtime::Handle>) {
    let dir = TempDir::new(name);
    let mut settings = Settings::new(env(&[("MCP_POLL_INTERVAL_MS", "50")]));
    settings.clock = Clock::System;
    settings.guest_stderr = false;
    let rt = runtime(dir.path(), settings);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let served_by = workers.clone();
    let host = crate::serve::start_on(
        rt.clone(),
        listener,
        true,
        crate::serve::Mode::Component,
        crate::serve::Limits::default(),
        workers,
    )
    .unwrap();

    let caps = ClientCapabilities::builder()
        .enable_elicitation()
        .enable_tasks()
        .build();
    let client: Client =
        rmcp::model::ClientConfig::new(caps, Implementation::new("wasi-it", "0.1.0"))
            .serve_with_lifecycle(
                StreamableHttpClientTransport::from_uri(host.url()),
                ClientLifecycleMode::Discover {
                    preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                },
            )
            .await
            .unwrap();
    let info = client.peer_info().unwrap();
    assert_eq!(info.protocol_version, ProtocolVersion::V_2026_07_28);
    if !served_by.is_empty() {
        // A connection held open (no request yet: it waits under the
        // 10-second header timeout) is served on one of the worker
        // threads, not by the runtime that accepted it.
        let addr = host.url();
        let addr = addr
            .trim_start_matches("http://")
            .trim_end_matches("/mcp")
            .to_owned();
        let _held = tokio::net::TcpStream::connect(addr).await.unwrap();
        let on_workers = || -> usize {
            served_by
                .iter()
                .map(|w| w.metrics().num_alive_tasks())
                .sum()
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(3);
        while on_workers() == 0 && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(on_workers() >= 1, "no connection task on any worker thread");
    }
    assert!(info.capabilities.supports_tasks());

    // A task that needs input: poll at its interval, answer with tasks/update.
    let created = client
        .call_tool_once(
            CallToolRequestParams::new("generate_report")
                .with_arguments(args(json!({"size": "small"}))),
        )
        .await
        .unwrap();
    let CallToolResponse::Task(created) = created else {
        panic!("expected a task: {created:?}")
    };
    assert_eq!(created.task.status, TaskStatus::Working);
    let interval = Duration::from_millis(created.task.poll_interval_ms.unwrap());
    assert_eq!(interval, Duration::from_millis(50));
    let id = created.task.task_id.clone();
    let waiting = poll_until(&client, &id, interval, |t| {
        t.status() != TaskStatus::Working
    })
    .await;
    let TaskPayload::InputRequired { input_requests } = &waiting.payload else {
        panic!("expected input_required: {waiting:?}")
    };
    let mut answers = InputResponses::new();
    for (key, request) in input_requests {
        assert!(
            matches!(request, InputRequest::Elicitation(_)),
            "{request:?}"
        );
        answers.insert(
            key.clone(),
            json!({"action": "accept", "content": {"approved": true}}),
        );
    }
    assert_eq!(answers.len(), 1);
    client
        .peer()
        .update_task(UpdateTaskParams::new(id.clone(), answers))
        .await
        .unwrap();
    let done = poll_until(&client, &id, interval, |t| t.status().is_terminal()).await;
    let TaskPayload::Completed { result } = done.payload else {
        panic!("expected completed: {done:?}")
    };
    let result: CallToolResult = serde_json::from_value(Value::Object(result)).unwrap();
    assert_eq!(result.is_error, Some(false));
    assert_eq!(result.structured_content.unwrap()["approved"], true);

    // Another task, cancelled while it works.
    let created = client
        .call_tool_once(
            CallToolRequestParams::new("slow_compute")
                .with_arguments(args(json!({"seconds": 60, "label": "rmcp"}))),
        )
        .await
        .unwrap();
    let CallToolResponse::Task(created) = created else {
        panic!("expected a task: {created:?}")
    };
    let id = created.task.task_id.clone();
    client
        .peer()
        .cancel_task(CancelTaskParams::new(id.clone()))
        .await
        .unwrap();
    let done = poll_until(&client, &id, interval, |t| t.status().is_terminal()).await;
    assert_eq!(done.status(), TaskStatus::Cancelled);

    // An id nobody owns is -32602, as for any unknown task.
    match client
        .peer()
        .get_task(GetTaskParams::new("tsk_not-a-taskAAAAAAAAAAAA".to_owned()))
        .await
    {
        Err(ServiceError::McpError(e)) => assert_eq!(e.code.0, -32602),
        other => panic!("expected -32602: {other:?}"),
    }

    client.cancel().await.unwrap();
    host.stop().await;
    assert_eq!(rt.traps(), 0);
}
