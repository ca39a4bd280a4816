//! The Worker's settings (the core's [`Config`] plus what only this platform
//! has: the store mode, the shard count, budgets) and its log line. Pure
//! code: it builds and is tested on the host too.

use serde_json::{Value, json};

use super::wire::{DEFAULT_SHARDS, DEFAULT_SWEEP_SHARDS, Layout, MAX_CAPACITY, MAX_SHARDS};
use crate::config::{Config, ConfigError};
use crate::server::Trace;
use crate::time::Millis;

/// Where task records live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreMode {
    /// Durable Object shards only (the default).
    Do,
    /// Durable Object shards, with terminal records cached in KV.
    DoKvCache,
}

impl StoreMode {
    pub fn as_str(self) -> &'static str {
        match self {
            StoreMode::Do => "do",
            StoreMode::DoKvCache => "do+kv-cache",
        }
    }
}

/// Subrequests one `subscriptions/listen` request may make before its stream
/// ends gracefully. Workers Paid allows 1,000 per request; the rest is
/// headroom for KV cache writes. On Workers Free (50 per request) set
/// `MCP_LISTEN_SUBREQUESTS` to 40 or less.
pub const DEFAULT_LISTEN_SUBREQUESTS: u32 = 900;

/// Outbound requests the steps of one alarm or sweep may make (a Durable
/// Object invocation's subrequests: Workers Paid allows 1,000; on Workers
/// Free, 50, set `MCP_TICK_SUBREQUESTS` to 40 or less).
pub const DEFAULT_TICK_SUBREQUESTS: u32 = 900;

/// The largest `MCP_MAX_TASK_BYTES` a shard can store: a SQLite-backed
/// Durable Object holds at most 2 MB in one row (Cloudflare's limits), and
/// a task's row also carries its key and due time. A larger record would
/// fail every write as the store being unavailable, and its step would run
/// again on each retry; with this bound it is refused as too large, once.
pub const MAX_TASK_BYTES_ON_DO: u64 = 1_900_000;

/// Everything the Worker and the shards read from the environment.
#[derive(Clone, Debug)]
pub struct Settings {
    pub config: Config,
    pub store: StoreMode,
    /// Where keys live (the original shard count and the capacity).
    pub layout: Layout,
    /// Shards one cron run sweeps.
    pub sweep_shards: u32,
    pub listen_subrequests: u32,
    /// Outbound requests one alarm or sweep's steps may make.
    pub tick_subrequests: u32,
}

impl Settings {
    /// Reads the settings. Besides the core's variables (see
    /// [`Config::from_env`]):
    ///
    /// | variable | meaning |
    /// |---|---|
    /// | `MCP_STORE` | `do` (default) or `do+kv-cache` |
    /// | `MCP_TASK_SHARDS` | the deployment's original shard count, 1..=512, default 16; fixed: quota records, scratch records and task ids minted before placement live by hash over it |
    /// | `MCP_TASK_CAPACITY` | shards new tasks are placed over (the shard is in the task id), 1..=65535, default `MCP_TASK_SHARDS`; raise it at any time to add capacity (never lower it below a value used before: the sweep covers the shards up to it) |
    /// | `MCP_SWEEP_SHARDS` | shards one cron run sweeps, in turn (default 32) |
    /// | `MCP_LISTEN_SUBREQUESTS` | subrequests one listen request may make (default 900) |
    /// | `MCP_TICK_SUBREQUESTS` | outbound requests the steps of one alarm or sweep may make (default 900); a tick claims no task once fewer are left than one of its steps used, and the rest run in the next invocation |
    ///
    /// `MCP_MAX_TASK_BYTES` is held to [`MAX_TASK_BYTES_ON_DO`] here (0,
    /// no limit, means that bound; more is refused): a Durable Object's
    /// row is bounded.
    pub fn from_env(lookup: impl Fn(&str) -> Option<String>) -> Result<Settings, ConfigError> {
        let get = |name: &str| {
            lookup(name)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let number = |name: &str, min: u64, max: u64| -> Result<Option<u64>, ConfigError> {
            get(name)
                .map(|v| match v.parse::<u64>() {
                    Ok(n) if (min..=max).contains(&n) => Ok(n),
                    _ => Err(ConfigError(format!(
                        "{name} must be a whole number from {min} to {max}"
                    ))),
                })
                .transpose()
        };
        let mut config = Config::from_env(&lookup)?;
        match config.limits.max_task_bytes as u64 {
            // No limit of the deployment's own: the row's applies.
            0 => config.limits.max_task_bytes = MAX_TASK_BYTES_ON_DO as usize,
            n if n > MAX_TASK_BYTES_ON_DO => {
                return Err(ConfigError(format!(
                    "MCP_MAX_TASK_BYTES must be at most {MAX_TASK_BYTES_ON_DO} on Workers (a Durable Object's SQLite row holds at most 2 MB)"
                )));
            }
            _ => {}
        }
        let store = match get("MCP_STORE").as_deref() {
            None | Some("do") => StoreMode::Do,
            Some("do+kv-cache") => StoreMode::DoKvCache,
            Some(_) => return Err(ConfigError("MCP_STORE must be do or do+kv-cache".into())),
        };
        let shards = number("MCP_TASK_SHARDS", 1, u64::from(MAX_SHARDS))?
            .map_or(DEFAULT_SHARDS, |n| n as u32);
        let capacity =
            number("MCP_TASK_CAPACITY", 1, u64::from(MAX_CAPACITY))?.map_or(shards, |n| n as u32);
        let sweep_shards =
            number("MCP_SWEEP_SHARDS", 1, 1_000)?.map_or(DEFAULT_SWEEP_SHARDS, |n| n as u32);
        // New ids name their shard (placement p lives in shard p).
        config.task_placements = u16::try_from(capacity).unwrap_or(u16::MAX);
        let listen_subrequests = number("MCP_LISTEN_SUBREQUESTS", 1, 100_000)?
            .map_or(DEFAULT_LISTEN_SUBREQUESTS, |n| n as u32);
        let tick_subrequests = number("MCP_TICK_SUBREQUESTS", 1, 100_000)?
            .map_or(DEFAULT_TICK_SUBREQUESTS, |n| n as u32);
        Ok(Settings {
            config,
            store,
            layout: Layout {
                base: shards,
                capacity,
            },
            sweep_shards,
            listen_subrequests,
            tick_subrequests,
        })
    }
}

/// What the log line of one request says.
#[derive(Clone, Debug, Default)]
pub struct RequestLog {
    pub http_method: &'static str,
    pub status: u16,
    pub trace: Trace,
    pub started: Millis,
    /// For listen streams: frames sent before the stream ended.
    pub events: Option<u32>,
    /// Subrequests made (shard calls and KV operations).
    pub subrequests: u32,
}

/// The HTTP methods worth naming in a log line; anything else is "other"
/// (the line never carries raw request input).
pub fn known_http_method(m: &str) -> &'static str {
    match m {
        "GET" => "GET",
        "POST" => "POST",
        "PUT" => "PUT",
        "DELETE" => "DELETE",
        "HEAD" => "HEAD",
        "OPTIONS" => "OPTIONS",
        "PATCH" => "PATCH",
        _ => "other",
    }
}

impl RequestLog {
    /// One JSON object on one line: what was asked (known method and tool
    /// names only), the outcome (HTTP status, JSON-RPC error code, why
    /// authentication failed as a fixed phrase), the task concerned and the
    /// duration. Never tokens, bodies or other input.
    pub fn line(&self, now: Millis, store: StoreMode) -> String {
        let mut v = json!({
            "at": crate::time::iso8601(now),
            "http": self.http_method,
            "status": self.status,
            "method": self.trace.method,
            "tool": self.trace.tool,
            "error": self.trace.error,
            "task": self.trace.task_id,
            "auth": self.trace.auth,
            "ms": (now - self.started).max(0),
            "store": store.as_str(),
            "subrequests": self.subrequests,
        });
        if let Value::Object(map) = &mut v {
            if let Some(n) = self.events {
                map.insert("events".into(), Value::from(n));
            }
            if let Some(detail) = &self.trace.detail {
                map.insert("detail".into(), Value::from(detail.as_str()));
            }
        }
        v.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let mut m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        m.entry("MCP_STATE_SECRET".into())
            .or_insert_with(|| "worker-settings-test-state-secret".into());
        move |k| m.get(k).cloned()
    }

    /// A task record must fit a Durable Object's row: `MCP_MAX_TASK_BYTES`
    /// past the bound is refused, naming it, and 0 (no limit) is the
    /// bound.
    #[test]
    fn task_bytes_fit_a_durable_object_row() {
        assert_eq!(
            Settings::from_env(env(&[]))
                .unwrap()
                .config
                .limits
                .max_task_bytes,
            1024 * 1024
        );
        let at_bound = MAX_TASK_BYTES_ON_DO.to_string();
        let s = Settings::from_env(env(&[("MCP_MAX_TASK_BYTES", at_bound.as_str())])).unwrap();
        assert_eq!(s.config.limits.max_task_bytes as u64, MAX_TASK_BYTES_ON_DO);
        let unlimited = Settings::from_env(env(&[("MCP_MAX_TASK_BYTES", "0")])).unwrap();
        assert_eq!(
            unlimited.config.limits.max_task_bytes as u64,
            MAX_TASK_BYTES_ON_DO
        );
        let past = (MAX_TASK_BYTES_ON_DO + 1).to_string();
        for v in [past.as_str(), "3000000"] {
            let e = Settings::from_env(env(&[("MCP_MAX_TASK_BYTES", v)])).unwrap_err();
            assert!(e.0.contains("1900000"), "{v}: {}", e.0);
        }
    }

    #[test]
    fn defaults_and_overrides() {
        let s = Settings::from_env(env(&[])).unwrap();
        assert_eq!(s.store, StoreMode::Do);
        assert_eq!(
            s.layout,
            Layout {
                base: 16,
                capacity: 16
            }
        );
        assert_eq!(s.config.task_placements, 16);
        assert_eq!(s.sweep_shards, DEFAULT_SWEEP_SHARDS);
        assert_eq!(s.listen_subrequests, DEFAULT_LISTEN_SUBREQUESTS);
        assert_eq!(s.tick_subrequests, DEFAULT_TICK_SUBREQUESTS);
        assert_eq!(s.config.tick_budget, 100);

        let s = Settings::from_env(env(&[
            ("MCP_STORE", "do+kv-cache"),
            ("MCP_TASK_SHARDS", "4"),
            ("MCP_TICK_BUDGET", "25"),
            ("MCP_LISTEN_POLL_MS", "250"),
            ("MCP_LISTEN_MAX_MS", "60000"),
            ("MCP_LISTEN_SUBREQUESTS", "40"),
            ("MCP_TICK_SUBREQUESTS", "40"),
        ]))
        .unwrap();
        assert_eq!(s.store, StoreMode::DoKvCache);
        assert_eq!(s.tick_subrequests, 40);
        assert_eq!(
            s.layout,
            Layout {
                base: 4,
                capacity: 4
            }
        );
        let grown = Settings::from_env(env(&[
            ("MCP_TASK_SHARDS", "4"),
            ("MCP_TASK_CAPACITY", "1000"),
            ("MCP_SWEEP_SHARDS", "20"),
        ]))
        .unwrap();
        assert_eq!(
            grown.layout,
            Layout {
                base: 4,
                capacity: 1000
            }
        );
        assert_eq!(grown.config.task_placements, 1000);
        assert_eq!(grown.sweep_shards, 20);
        assert!(Settings::from_env(env(&[("MCP_TASK_CAPACITY", "65536")])).is_err());
        assert_eq!(s.config.tick_budget, 25);
        assert_eq!(s.config.listen_poll_ms, 250);
        assert_eq!(s.config.listen_max_ms, 60_000);
        assert_eq!(s.listen_subrequests, 40);
    }

    #[test]
    fn refuses_bad_values() {
        for bad in [
            ("MCP_STORE", "kv"),
            ("MCP_TASK_SHARDS", "0"),
            ("MCP_TASK_SHARDS", "513"),
            ("MCP_TASK_SHARDS", "many"),
            ("MCP_TICK_BUDGET", "0"),
            ("MCP_TICK_SUBREQUESTS", "0"),
            ("MCP_LISTEN_POLL_MS", "1"),
        ] {
            assert!(Settings::from_env(env(&[bad])).is_err(), "{bad:?}");
        }
        let core_error = Settings::from_env(|_| None).unwrap_err();
        assert!(core_error.0.contains("MCP_STATE_SECRET"));
    }

    #[test]
    fn the_log_line_is_one_json_object_without_input() {
        let log = RequestLog {
            http_method: known_http_method("POST"),
            status: 400,
            trace: Trace {
                method: Some("tasks/get"),
                tool: None,
                task_id: Some("tsk_1".into()),
                error: Some(-32602),
                auth: None,
                detail: None,
            },
            started: 1_000,
            events: None,
            subrequests: 1,
        };
        let line = log.line(1_250, StoreMode::Do);
        assert!(!line.contains('\n'));
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(
            v,
            json!({
                "at": "1970-01-01T00:00:01.250Z", "http": "POST", "status": 400, "auth": null,
                "method": "tasks/get", "tool": null, "error": -32602, "task": "tsk_1",
                "ms": 250, "store": "do", "subrequests": 1
            })
        );
        let mut failed = log;
        failed.trace.detail = Some("database disk image is malformed".into());
        let v: Value = serde_json::from_str(&failed.line(1_250, StoreMode::Do)).unwrap();
        assert_eq!(v["detail"], "database disk image is malformed");
        assert_eq!(known_http_method("BREW"), "other");
    }
}
