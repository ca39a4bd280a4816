//! The Worker's entry points, `fetch` and `scheduled`, as functions that the
//! user's crate exports with [`crate::cloudflare_worker!`].

use std::rc::Rc;

use futures_util::future::join_all;
use worker::{
    Context, Env, Headers, Request, Response, ResponseBuilder, ScheduleContext, ScheduledEvent,
    console_error, console_log,
};

use super::EntryFuture;
use super::env::{
    early_error, env_lookup, misconfigured, now_ms, open_store, settings, with_step_env,
};
use super::settings::{RequestLog, known_http_method};
use super::sse;
use super::store::DoStore;
use super::wire::{Op, Reply, SweepReport};
use crate::error::RpcError;
use crate::http::{self, HttpBody, HttpRequest};
use crate::ids::SystemRandom;
use crate::server::Server;
use crate::tools::ToolFactory;

/// The Worker's `fetch` handler, serving the tools `tools` builds (boxed:
/// see [`EntryFuture`]). It always answers: every failure is a response of
/// its own (a JSON-RPC error, an HTTP status), so the handler that
/// [`crate::cloudflare_worker!`] declares cannot fail either, and the error
/// path `worker` generates for a handler's `Err` (which formats a
/// `worker::Error`) is not compiled.
pub fn fetch(
    req: Request,
    env: Env,
    ctx: Context,
    tools: ToolFactory,
) -> EntryFuture<'static, Response> {
    Box::pin(serve(req, env, ctx, tools))
}

async fn serve(mut req: Request, env: Env, ctx: Context, tools: ToolFactory) -> Response {
    let started = now_ms();
    let path = req.path();
    #[cfg(feature = "test-hooks")]
    if let Some(hook) = path.strip_prefix("/__test/") {
        return super::test_hooks::route(hook, req, &env).await;
    }
    let settings = match settings(&env) {
        Ok(s) => s,
        Err(e) => return misconfigured("settings", &e),
    };
    let method = req.method();
    let method: &str = method.as_ref();
    let mut log = RequestLog {
        http_method: known_http_method(method),
        started,
        ..RequestLog::default()
    };
    let owned: Vec<(String, String)> = req.headers().entries().collect();
    let headers = http::header_refs(&owned);
    // Refusals the head decides (path, method, Origin, Content-Length,
    // Host, credentials) come before a byte of the body is read.
    if let Some(refused) = http::check_head(&settings.config, method, &path, &headers) {
        log.status = refused.status;
        log.trace = refused.trace;
        console_log!("{}", log.line(now_ms(), settings.store));
        let builder = response_head(refused.status, &refused.headers, false);
        return match refused.body {
            HttpBody::Bytes(bytes) => builder.fixed(bytes),
            _ => builder.empty(),
        };
    }
    let max_body = settings.config.max_body_bytes;
    let body = match read_capped(&mut req, max_body).await {
        Ok(b) => b,
        Err(status) => {
            let e = RpcError::invalid_request(if status == 413 {
                "The request body is too large."
            } else {
                "The request body could not be read."
            });
            log.status = status;
            console_log!("{}", log.line(now_ms(), settings.store));
            return early_error(status, &e);
        }
    };
    let store = match open_store(&env, &settings) {
        Ok(s) => Rc::new(s),
        Err(e) => return misconfigured("bindings", &e.to_string()),
    };
    let mode = settings.store;
    let listen_budget = settings.listen_subrequests;
    let tools = match tools(&crate::tools::factory_settings(&env_lookup(&env))) {
        Ok(t) => t,
        Err(e) => return misconfigured("tools", &e),
    };
    let server = match Server::new(
        store.clone(),
        settings.config,
        tools,
        Box::new(SystemRandom),
    ) {
        // A replayable step may run inline in a create or an update.
        Ok(s) => with_step_env(
            s.with_verifier(Box::new(super::webcrypto::WebCrypto))
                .with_verifications(super::env::verifications()),
            &env,
        ),
        Err(e) => return early_error(e.http_status(), &e),
    };
    let request = HttpRequest {
        method,
        path: &path,
        headers: &headers,
        body: &body,
    };
    // Judged at the time its body has arrived, as on the component: a
    // token, a request state or a quota's clock read before a slow upload
    // would be read at a time the client chose.
    let response = http::handle(&server, &request, now_ms()).await;

    let fills = store.take_fills();
    if !fills.is_empty() {
        ctx.wait_until(async move {
            join_all(fills).await;
        });
    }

    log.status = response.status;
    log.trace = response.trace;
    log.subrequests = store.subrequests();
    let events = matches!(response.body, HttpBody::Events(_));
    let builder = response_head(response.status, &response.headers, events);
    match response.body {
        HttpBody::Events(stream) => {
            sse::respond(builder, stream, server, store, listen_budget, log, mode)
        }
        HttpBody::Bytes(bytes) => {
            console_log!("{}", log.line(now_ms(), mode));
            builder.fixed(bytes)
        }
        HttpBody::Empty => {
            console_log!("{}", log.line(now_ms(), mode));
            builder.empty()
        }
    }
}

/// A Worker response's status and headers; `events` for an event stream.
fn response_head(status: u16, headers: &[(&str, String)], events: bool) -> ResponseBuilder {
    let out = Headers::new();
    for (name, value) in headers {
        let _ = out.append(name, value);
    }
    if events {
        // `wrangler dev` compresses (and so buffers until the end) responses
        // to clients that accept gzip unless an encoding is set.
        let _ = out.set("content-encoding", "identity");
    }
    ResponseBuilder::new().with_status(status).with_headers(out)
}

/// The request body, read as a stream and abandoned (413) as soon as it
/// passes `max` bytes, whatever `Content-Length` said; 400 if it cannot be
/// read.
async fn read_capped(req: &mut Request, max: usize) -> Result<Vec<u8>, u16> {
    use futures_util::StreamExt;
    let Ok(mut stream) = req.stream() else {
        // No body at all.
        return Ok(Vec::new());
    };
    let mut body = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|_| 400u16)?;
        if body.len() + chunk.len() > max {
            return Err(413);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The Worker's `scheduled` (cron) handler (boxed: see [`EntryFuture`]).
///
/// The cron backstop: every shard sweeps (advances its due work up to the
/// tick budget, purges expired tasks, sets its alarm again). The Worker only
/// waits on one subrequest per shard; the work and its CPU time are the
/// shards'.
pub fn scheduled(
    event: ScheduledEvent,
    env: Env,
    ctx: ScheduleContext,
) -> EntryFuture<'static, ()> {
    Box::pin(cron(event, env, ctx))
}

async fn cron(event: ScheduledEvent, env: Env, _ctx: ScheduleContext) {
    let started = now_ms();
    let settings = match settings(&env) {
        Ok(s) => s,
        Err(e) => {
            console_error!(
                "{}",
                serde_json::json!({"event": "cron", "error": "misconfigured", "detail": e})
            );
            return;
        }
    };
    let shards = match DoStore::new(&env, settings.layout) {
        Ok(s) => s,
        Err(e) => {
            console_error!(
                "{}",
                serde_json::json!({"event": "cron", "error": "bindings", "detail": e.to_string()})
            );
            return;
        }
    };
    // A window of the shards, in turn: one run stays within the
    // invocation's subrequest limit however many shards there are.
    let minute = u64::try_from(event.schedule() as i64 / 60_000).unwrap_or(0);
    let window = settings.layout.sweep_window(minute, settings.sweep_shards);
    let replies = shards.on_shards(&window, &Op::Sweep).await;
    let (mut due, mut stepped, mut finished, mut purged, mut errors, mut failed) =
        (0, 0, 0, 0, 0, 0);
    for reply in replies {
        match reply {
            Ok(Reply::Swept(SweepReport { tick: r, .. })) => {
                due += r.due;
                stepped += r.stepped;
                finished += r.finished;
                purged += r.purged;
                errors += r.errors;
            }
            _ => failed += 1,
        }
    }
    let line = serde_json::json!({
        "event": "cron", "cron": event.cron(), "shards": shards.layout().total(),
        "swept_shards": window.len(), "first_shard": window.first(), "failed_shards": failed,
        "due": due, "stepped": stepped, "finished": finished, "purged": purged, "errors": errors,
        "ms": now_ms() - started,
    });
    if failed > 0 {
        console_error!("{line}");
    } else {
        console_log!("{line}");
    }
}
