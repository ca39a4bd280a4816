//! Server settings, and reading them from a platform's environment
//! (Worker variables and secrets, WASI environment variables).

use crate::auth::{Auth, JwtAuth, MAX_LEEWAY_MS, parse_jwks};
use crate::crypto::Keyring;
use crate::limits::Limits;
use crate::outbound::OutboundPolicy;
use crate::owner::Owner;
use crate::tasks::runner::RetryPolicy;

/// Server settings. Every duration is in milliseconds.
#[derive(Clone, Debug)]
pub struct Config {
    pub server_name: String,
    pub server_version: String,
    pub instructions: Option<String>,
    /// Task lifetime from creation (`ttlMs`).
    pub task_ttl_ms: u64,
    /// Suggested polling interval (`pollIntervalMs`).
    pub poll_interval_ms: u64,
    /// How long a runner's claim on a task lasts.
    pub lease_ms: u64,
    /// Most tasks one tick advances.
    pub tick_budget: usize,
    /// Keys for `requestState` integrity tags and derived ids: the current
    /// one and, during a rotation, the previous one. Secret and shared by
    /// every replica.
    pub state_keys: Keyring,
    /// How long a `requestState` stays valid (at most `task_ttl_ms`).
    pub request_state_ttl_ms: u64,
    /// Cache hints on `server/discover` and the lists.
    pub discover_ttl_ms: u64,
    pub list_ttl_ms: u64,
    /// How often a listen stream looks for changes, and its longest life.
    pub listen_poll_ms: u64,
    pub listen_max_ms: u64,
    /// The MCP endpoint's path.
    pub endpoint_path: String,
    /// Largest request body accepted (HTTP 413 beyond).
    pub max_body_bytes: usize,
    /// Origins a browser may call from. An entry may end in `:*` to allow
    /// any port. Requests without an `Origin` header are not affected.
    pub allowed_origins: Vec<String>,
    /// How callers are identified.
    pub auth: Auth,
    /// Input limits and quotas.
    pub limits: Limits,
    /// Origins task steps may call, and the largest response body read.
    pub outbound: OutboundPolicy,
    /// New task ids are placed on one of this many stores
    /// ([`crate::ids::placed_task_id`]); 0 mints unplaced ids. The Worker
    /// sets it to its shard capacity.
    pub task_placements: u16,
    /// How failing steps are tried again.
    pub retry: RetryPolicy,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            server_name: "mcp-tasks-edge".to_owned(),
            server_version: env!("CARGO_PKG_VERSION").to_owned(),
            instructions: None,
            task_ttl_ms: 3_600_000,
            poll_interval_ms: 1_000,
            lease_ms: 30_000,
            tick_budget: 100,
            state_keys: Keyring::default(),
            request_state_ttl_ms: 600_000,
            discover_ttl_ms: 3_600_000,
            list_ttl_ms: 300_000,
            listen_poll_ms: 500,
            listen_max_ms: 300_000,
            endpoint_path: "/mcp".to_owned(),
            max_body_bytes: 1024 * 1024,
            allowed_origins: vec![
                "http://localhost:*".to_owned(),
                "http://127.0.0.1:*".to_owned(),
            ],
            auth: Auth::Unconfigured,
            limits: Limits::default(),
            outbound: OutboundPolicy::default(),
            task_placements: 0,
            retry: RetryPolicy::default(),
        }
    }
}

/// A comma-separated setting: its non-empty items, trimmed.
fn list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect()
}

/// False when a key set was configured and none of its keys verifies
/// signatures.
fn keys_configured_or_none(
    get: &dyn Fn(&str) -> Option<String>,
    keys: &[crate::auth::PublicKey],
) -> bool {
    get("MCP_JWT_KEYS").is_none() || !keys.is_empty()
}

fn jwt_from_env(
    get: &dyn Fn(&str) -> Option<String>,
    number: &dyn Fn(&str) -> Result<Option<u64>, ConfigError>,
) -> Result<JwtAuth, ConfigError> {
    let required = |name: &str| {
        get(name).ok_or_else(|| ConfigError(format!("{name} is required with MCP_AUTH=jwt")))
    };
    let resource = required("MCP_RESOURCE_URL")?;
    if !(resource.starts_with("https://") || resource.starts_with("http://")) {
        return Err(ConfigError(
            "MCP_RESOURCE_URL must be an http(s) URL".into(),
        ));
    }
    let issuer = required("MCP_JWT_ISSUER")?;
    let hs256_secret = match get("MCP_JWT_HS256_SECRET") {
        Some(s) if s.len() >= 32 => Some(s.into_bytes()),
        Some(_) => {
            return Err(ConfigError(
                "MCP_JWT_HS256_SECRET must be at least 32 bytes".into(),
            ));
        }
        None => None,
    };
    let keys = match get("MCP_JWT_KEYS") {
        Some(text) => parse_jwks(&text).map_err(|e| ConfigError(format!("MCP_JWT_KEYS: {e}")))?,
        None => Vec::new(),
    };
    if !keys_configured_or_none(&get, &keys) {
        return Err(ConfigError(
            "MCP_JWT_KEYS has no key usable for signatures (Ed25519 or P-256; use \"sig\", alg EdDSA or ES256, key_ops with \"verify\")".into(),
        ));
    }
    if hs256_secret.is_none() && keys.is_empty() {
        return Err(ConfigError(
            "MCP_AUTH=jwt needs MCP_JWT_HS256_SECRET or MCP_JWT_KEYS".into(),
        ));
    }
    let authorization_servers = get("MCP_AUTHORIZATION_SERVERS")
        .map(|v| list(&v))
        .unwrap_or_else(|| vec![issuer.clone()]);
    let leeway_ms = match number("MCP_JWT_LEEWAY_MS")? {
        None => 60_000,
        Some(v) if v <= MAX_LEEWAY_MS as u64 => v as i64,
        Some(_) => {
            return Err(ConfigError(format!(
                "MCP_JWT_LEEWAY_MS must be at most {MAX_LEEWAY_MS} (five minutes)"
            )));
        }
    };
    let tenant_claim = get("MCP_JWT_TENANT_CLAIM");
    let tenant_required = match get("MCP_JWT_TENANT_REQUIRED").as_deref() {
        None => tenant_claim.is_some(),
        Some("true") => true,
        Some("false") => false,
        Some(_) => {
            return Err(ConfigError(
                "MCP_JWT_TENANT_REQUIRED must be true or false".into(),
            ));
        }
    };
    Ok(JwtAuth {
        issuer,
        resource,
        hs256_secret,
        keys,
        tenant_claim: tenant_claim.unwrap_or_else(|| "tenant".to_owned()),
        tenant_required,
        types: get("MCP_JWT_TYPES").map(|v| list(&v)).unwrap_or_default(),
        leeway_ms,
        authorization_servers,
    })
}

/// The shortest state secret: 32 bytes, or 64 hexadecimal digits (a hex
/// string carries half a byte per character).
pub const MIN_STATE_SECRET_BYTES: usize = 32;

/// Refuses a state secret with less than 32 bytes of key material: shorter
/// than 32 characters, or hexadecimal and shorter than 64, or one
/// character repeated.
fn strong_secret(name: &str, value: &str) -> Result<(), ConfigError> {
    let hex = value.bytes().all(|b| b.is_ascii_hexdigit());
    let needed = if hex {
        2 * MIN_STATE_SECRET_BYTES
    } else {
        MIN_STATE_SECRET_BYTES
    };
    let repeated = value.bytes().all(|b| Some(b) == value.bytes().next());
    if value.len() < needed || repeated {
        return Err(ConfigError(format!(
            "{name} must be at least {MIN_STATE_SECRET_BYTES} random bytes (for example `openssl rand -hex 32`)"
        )));
    }
    Ok(())
}

/// Reading a setting failed.
#[derive(Debug, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl Config {
    /// Reads the settings from a platform's environment. Unset variables keep
    /// their defaults. Secrets are read through the same lookup and are never
    /// echoed in errors.
    ///
    /// | variable | meaning |
    /// |---|---|
    /// | `MCP_STATE_SECRET` | key for `requestState` tags and derived ids (secret, required, at least 32 random bytes: 32 characters, or 64 hex digits) |
    /// | `MCP_STATE_SECRET_PREVIOUS` | the key before a rotation: what it signed still verifies while it is set (keep it at least `MCP_TASK_TTL_MS`) |
    /// | `MCP_TASK_TTL_MS`, `MCP_POLL_INTERVAL_MS`, `MCP_LEASE_MS` | task timings |
    /// | `MCP_TICK_BUDGET` | most tasks one tick (an alarm or sweep per shard on a Worker; on the local host, one round of its sliced calls, rounded up to a multiple of the slice count) advances (default 100) |
    /// | `MCP_LISTEN_POLL_MS` | how often a listen stream reads its tasks (default 500, at most 20000) |
    /// | `MCP_LISTEN_MAX_MS` | longest life of a listen stream (default 300000) |
    /// | `MCP_ALLOWED_ORIGINS` | comma-separated browser origins (`:*` = any port) |
    /// | `MCP_AUTH` | `jwt` (bearer tokens), or `insecure-local` for local development only (see [`Auth`]); unset = serve nothing |
    /// | `MCP_INSECURE_PRINCIPAL` | `tenant/principal` used by `insecure-local` |
    /// | `MCP_RESOURCE_URL` | this server's MCP URL: the required token audience (`jwt`) |
    /// | `MCP_JWT_ISSUER` | the required token issuer (`jwt`) |
    /// | `MCP_JWT_HS256_SECRET` | shared secret for HS256 tokens (secret, >= 32 bytes) |
    /// | `MCP_JWT_KEYS` | JWKS with Ed25519 (`OKP`) and P-256 (`EC`) public keys |
    /// | `MCP_JWT_TENANT_CLAIM` | the claim naming the tenant (default `tenant`); setting it makes the claim required |
    /// | `MCP_JWT_TENANT_REQUIRED` | `true`/`false`: whether tokens must carry the tenant claim (default: `true` when `MCP_JWT_TENANT_CLAIM` is set); without it a token's tenant is `iss:` and the issuer |
    /// | `MCP_JWT_TYPES` | comma-separated accepted `typ` values (for example `at+jwt`); unset = not checked |
    /// | `MCP_JWT_LEEWAY_MS` | clock skew allowed on `exp`/`nbf` (default 60000, at most 300000) |
    /// | `MCP_AUTHORIZATION_SERVERS` | comma-separated, for the protected resource metadata (default: the issuer) |
    /// | `MCP_MAX_OUTSTANDING_TASKS` | unfinished tasks per principal (default 100; 0 = no limit) |
    /// | `MCP_MAX_STORED_BYTES` | bytes one principal's tasks may store until they expire, finished ones included (default 33554432; 0 = no limit) |
    /// | `MCP_MAX_TASK_BYTES` | largest stored task: arguments, state and result (default 1048576; 0 = no limit; on Workers at most 1900000, and 0 means that) |
    /// | `MCP_MAX_ARGUMENT_BYTES` | largest `arguments` of a tool call, as JSON (default 262144; 0 = no limit) |
    /// | `MCP_MAX_TASKS_PER_MINUTE` | tasks one principal may create per minute, as a bucket of that size (default 600; 0 = no limit) |
    /// | `MCP_MAX_LISTEN_STREAMS` | open `subscriptions/listen` streams per principal (default 16; 0 = no limit) |
    /// | `MCP_OUTBOUND_ALLOW` | comma-separated origins (`https://api.example.com`) task steps may call; unset = none |
    /// | `MCP_OUTBOUND_MAX_BYTES` | largest outbound response body read (default 1048576) |
    /// | `MCP_STEP_MAX_ATTEMPTS` | attempts a task step may start before the task fails (default 5) |
    /// | `MCP_RETRY_BASE_MS`, `MCP_RETRY_CAP_MS` | a retried step's first and longest backoff (default 1000, 60000) |
    /// | `MCP_SERVER_NAME`, `MCP_SERVER_VERSION` | the `serverInfo` every result names (default `mcp-tasks-edge` and this library's version; at most 128 and 64 characters) |
    /// | `MCP_INSTRUCTIONS` | `server/discover`'s `instructions` for the model (at most 16384 characters; unset = none) |
    pub fn from_env(lookup: impl Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
        let mut c = Config::default();
        let get = |name: &str| {
            lookup(name)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let number = |name: &str| -> Result<Option<u64>, ConfigError> {
            get(name)
                .map(|v| {
                    v.parse::<u64>().map_err(|_| {
                        ConfigError(format!("{name} must be a whole number of milliseconds"))
                    })
                })
                .transpose()
        };
        if let Some(v) = number("MCP_TASK_TTL_MS")? {
            if v == 0 {
                return Err(ConfigError("MCP_TASK_TTL_MS must be positive".into()));
            }
            c.task_ttl_ms = v;
        }
        let ranged = |name: &str, min: u64, max: u64| -> Result<Option<u64>, ConfigError> {
            match number(name)? {
                Some(n) if !(min..=max).contains(&n) => Err(ConfigError(format!(
                    "{name} must be a whole number from {min} to {max}"
                ))),
                n => Ok(n),
            }
        };
        if let Some(n) = ranged("MCP_TICK_BUDGET", 1, 10_000)? {
            c.tick_budget = n as usize;
        }
        // At most 20 s: a stream renews its slot lease (60 s) at a poll.
        if let Some(n) = ranged("MCP_LISTEN_POLL_MS", 50, 20_000)? {
            c.listen_poll_ms = n;
        }
        if let Some(n) = ranged("MCP_LISTEN_MAX_MS", 1_000, 3_600_000)? {
            c.listen_max_ms = n;
        }
        if let Some(v) = number("MCP_POLL_INTERVAL_MS")? {
            c.poll_interval_ms = v.max(1);
        }
        if let Some(v) = number("MCP_LEASE_MS")? {
            c.lease_ms = v.max(1);
        }
        // At most `max` characters; with `one_line`, no control characters.
        let text =
            |name: &str, max: usize, one_line: bool| -> Result<Option<String>, ConfigError> {
                match get(name) {
                    Some(v)
                        if v.chars().count() > max
                            || (one_line && v.chars().any(char::is_control)) =>
                    {
                        let lines = if one_line {
                            ", without control characters"
                        } else {
                            ""
                        };
                        Err(ConfigError(format!(
                            "{name} must be at most {max} characters{lines}"
                        )))
                    }
                    v => Ok(v),
                }
            };
        if let Some(v) = text("MCP_SERVER_NAME", 128, true)? {
            c.server_name = v;
        }
        if let Some(v) = text("MCP_SERVER_VERSION", 64, true)? {
            c.server_version = v;
        }
        // Instructions may run over several lines.
        if let Some(v) = text("MCP_INSTRUCTIONS", 16_384, false)? {
            c.instructions = Some(v);
        }
        if let Some(o) = get("MCP_ALLOWED_ORIGINS") {
            c.allowed_origins = list(&o);
        }
        let current = get("MCP_STATE_SECRET")
            .ok_or_else(|| ConfigError("MCP_STATE_SECRET is not set".into()))?;
        strong_secret("MCP_STATE_SECRET", &current)?;
        c.state_keys = Keyring::new(current.into_bytes());
        if let Some(previous) = get("MCP_STATE_SECRET_PREVIOUS") {
            strong_secret("MCP_STATE_SECRET_PREVIOUS", &previous)?;
            c.state_keys = c.state_keys.with_previous(previous.into_bytes());
        }
        c.auth = match get("MCP_AUTH").as_deref() {
            None => Auth::Unconfigured,
            Some("insecure-local") => {
                let who =
                    get("MCP_INSECURE_PRINCIPAL").unwrap_or_else(|| "local/developer".to_owned());
                let (tenant, principal) = who.split_once('/').ok_or_else(|| {
                    ConfigError("MCP_INSECURE_PRINCIPAL must look like tenant/principal".into())
                })?;
                Auth::InsecureLocal(Owner {
                    tenant: tenant.to_owned(),
                    principal: principal.to_owned(),
                })
            }
            Some("jwt") => Auth::Jwt(Box::new(jwt_from_env(&get, &number)?)),
            Some(_) => return Err(ConfigError("MCP_AUTH must be jwt or insecure-local".into())),
        };
        if let Some(v) = number("MCP_MAX_OUTSTANDING_TASKS")? {
            c.limits.max_outstanding_tasks = usize::try_from(v).unwrap_or(usize::MAX);
        }
        if let Some(v) = number("MCP_MAX_STORED_BYTES")? {
            c.limits.max_stored_bytes = v;
        }
        if let Some(v) = number("MCP_MAX_TASK_BYTES")? {
            c.limits.max_task_bytes = usize::try_from(v).unwrap_or(usize::MAX);
        }
        if let Some(v) = number("MCP_MAX_ARGUMENT_BYTES")? {
            c.limits.max_argument_bytes = usize::try_from(v).unwrap_or(usize::MAX);
        }
        if let Some(v) = number("MCP_MAX_TASKS_PER_MINUTE")? {
            c.limits.max_tasks_per_minute = u32::try_from(v).unwrap_or(u32::MAX);
        }
        if let Some(v) = number("MCP_MAX_LISTEN_STREAMS")? {
            c.limits.max_listen_streams = usize::try_from(v).unwrap_or(usize::MAX);
        }
        if let Some(v) = number("MCP_OUTBOUND_MAX_BYTES")? {
            c.outbound.max_response_bytes = usize::try_from(v).unwrap_or(usize::MAX);
        }
        if let Some(allow) = get("MCP_OUTBOUND_ALLOW") {
            c.outbound = OutboundPolicy::allowing(&list(&allow), c.outbound.max_response_bytes)
                .map_err(|bad| {
                    ConfigError(format!(
                        "MCP_OUTBOUND_ALLOW: {:?} is not an http(s) origin",
                        crate::error::truncate(&bad, 80)
                    ))
                })?;
        }
        if let Some(v) = number("MCP_STEP_MAX_ATTEMPTS")? {
            c.retry.max_attempts = u32::try_from(v).unwrap_or(u32::MAX).max(1);
        }
        if let Some(v) = number("MCP_RETRY_BASE_MS")? {
            c.retry.base_ms = v;
        }
        if let Some(v) = number("MCP_RETRY_CAP_MS")? {
            c.retry.cap_ms = v;
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn names_the_server_from_its_settings() {
        let secret = ("MCP_STATE_SECRET", "state-secret-for-config-tests-0123");
        let c = Config::from_env(env(&[secret])).unwrap();
        assert_eq!(
            (c.server_name.as_str(), c.instructions.as_deref()),
            ("mcp-tasks-edge", None)
        );
        let c = Config::from_env(env(&[
            secret,
            ("MCP_SERVER_NAME", " acme-reports "),
            ("MCP_SERVER_VERSION", "2.1.0"),
            (
                "MCP_INSTRUCTIONS",
                "Call generate_report first.\nThen wait.",
            ),
        ]))
        .unwrap();
        assert_eq!(
            (c.server_name.as_str(), c.server_version.as_str()),
            ("acme-reports", "2.1.0")
        );
        assert_eq!(
            c.instructions.as_deref(),
            Some("Call generate_report first.\nThen wait.")
        );
        let long = "x".repeat(129);
        for bad in [
            ("MCP_SERVER_NAME", long.as_str()),
            ("MCP_SERVER_NAME", "a\u{7}b"),
            ("MCP_SERVER_VERSION", "1\n2"),
        ] {
            assert!(Config::from_env(env(&[secret, bad])).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn reads_settings() {
        let c = Config::from_env(env(&[
            ("MCP_STATE_SECRET", "state-secret-for-config-tests-0123"),
            ("MCP_TASK_TTL_MS", "60000"),
            (
                "MCP_ALLOWED_ORIGINS",
                "https://a.example, http://localhost:*",
            ),
            ("MCP_AUTH", "insecure-local"),
            ("MCP_INSECURE_PRINCIPAL", "dev/me"),
            (
                "MCP_OUTBOUND_ALLOW",
                "https://API.example.com:443, http://127.0.0.1:9000/x",
            ),
            ("MCP_STEP_MAX_ATTEMPTS", "7"),
        ]))
        .unwrap();
        assert_eq!(c.task_ttl_ms, 60_000);
        assert_eq!(
            c.outbound.allow,
            ["https://api.example.com", "http://127.0.0.1:9000"]
        );
        assert_eq!(c.retry.max_attempts, 7);
        assert_eq!(
            c.allowed_origins,
            ["https://a.example", "http://localhost:*"]
        );
        assert_eq!(
            c.auth,
            Auth::InsecureLocal(Owner {
                tenant: "dev".into(),
                principal: "me".into()
            })
        );
    }

    #[test]
    fn refuses_bad_settings_without_echoing_secrets() {
        let secret = "short-secret";
        for bad in [
            env(&[]),
            env(&[("MCP_STATE_SECRET", secret)]),
            env(&[
                ("MCP_STATE_SECRET", "state-secret-for-config-tests-0123"),
                ("MCP_OUTBOUND_ALLOW", "ftp://files.example"),
            ]),
            env(&[
                ("MCP_STATE_SECRET", "state-secret-for-config-tests-0123"),
                ("MCP_TASK_TTL_MS", "soon"),
            ]),
            env(&[
                ("MCP_STATE_SECRET", "state-secret-for-config-tests-0123"),
                ("MCP_AUTH", "none"),
            ]),
        ] {
            let e = Config::from_env(bad).unwrap_err();
            assert!(!e.0.contains(secret));
        }
        for bad_jwt in [
            env(&[
                ("MCP_STATE_SECRET", "state-secret-for-config-tests-0123"),
                ("MCP_AUTH", "jwt"),
            ]),
            env(&[
                ("MCP_STATE_SECRET", "state-secret-for-config-tests-0123"),
                ("MCP_AUTH", "jwt"),
                ("MCP_RESOURCE_URL", "http://a/mcp"),
                ("MCP_JWT_ISSUER", "i"),
            ]),
            env(&[
                ("MCP_STATE_SECRET", "state-secret-for-config-tests-0123"),
                ("MCP_AUTH", "jwt"),
                ("MCP_RESOURCE_URL", "http://a/mcp"),
                ("MCP_JWT_ISSUER", "i"),
                ("MCP_JWT_HS256_SECRET", secret),
            ]),
            env(&[
                ("MCP_STATE_SECRET", "state-secret-for-config-tests-0123"),
                ("MCP_AUTH", "jwt"),
                ("MCP_RESOURCE_URL", "http://a/mcp"),
                ("MCP_JWT_ISSUER", "i"),
                (
                    "MCP_JWT_KEYS",
                    r#"{"keys":[{"kty":"OKP","crv":"Ed25519","x":"AAAA","d":"d-value-do-not-echo"}]}"#,
                ),
            ]),
        ] {
            let e = Config::from_env(bad_jwt).unwrap_err();
            assert!(
                !e.0.contains(secret) && !e.0.contains("d-value-do-not-echo"),
                "{e}"
            );
        }
        let c = Config::from_env(env(&[
            ("MCP_STATE_SECRET", "state-secret-for-config-tests-0123"),
            ("MCP_AUTH", "jwt"),
            ("MCP_RESOURCE_URL", "http://127.0.0.1:8787/mcp"),
            ("MCP_JWT_ISSUER", "https://issuer.example"),
            ("MCP_JWT_HS256_SECRET", "0123456789abcdef0123456789abcdef"),
        ]))
        .unwrap();
        let jwt = c.auth.jwt().unwrap();
        assert_eq!(jwt.authorization_servers, ["https://issuer.example"]);
        assert_eq!(
            jwt.metadata_url(),
            "http://127.0.0.1:8787/.well-known/oauth-protected-resource/mcp"
        );
        assert!(
            !format!("{:?}", c.auth).contains("0123456789abcdef0123456789abcdef"),
            "Debug never shows the secret"
        );
        let jwt_env = |extra: &[(&'static str, &'static str)]| {
            let mut pairs = vec![
                ("MCP_STATE_SECRET", "state-secret-for-config-tests-0123"),
                ("MCP_AUTH", "jwt"),
                ("MCP_RESOURCE_URL", "http://127.0.0.1:8787/mcp"),
                ("MCP_JWT_ISSUER", "https://issuer.example"),
                ("MCP_JWT_HS256_SECRET", "0123456789abcdef0123456789abcdef"),
            ];
            pairs.extend_from_slice(extra);
            Config::from_env(env(&pairs))
        };
        // Leeway is capped at five minutes.
        assert!(jwt_env(&[("MCP_JWT_LEEWAY_MS", "300000")]).is_ok());
        assert!(jwt_env(&[("MCP_JWT_LEEWAY_MS", "300001")]).is_err());
        // Naming the tenant claim makes it required, unless said otherwise.
        let jwt = |c: Config| c.auth.jwt().unwrap().clone();
        assert!(!jwt(jwt_env(&[]).unwrap()).tenant_required);
        assert!(jwt(jwt_env(&[("MCP_JWT_TENANT_CLAIM", "org")]).unwrap()).tenant_required);
        assert!(
            !jwt(jwt_env(&[
                ("MCP_JWT_TENANT_CLAIM", "org"),
                ("MCP_JWT_TENANT_REQUIRED", "false")
            ])
            .unwrap())
            .tenant_required
        );
        assert!(jwt_env(&[("MCP_JWT_TENANT_REQUIRED", "yes")]).is_err());
        assert_eq!(
            jwt(jwt_env(&[("MCP_JWT_TYPES", "at+jwt, jwt")]).unwrap()).types,
            ["at+jwt", "jwt"]
        );
        // A key set with no signature key is a configuration error.
        assert!(jwt_env(&[(
            "MCP_JWT_KEYS",
            r#"{"keys":[{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo","use":"enc"}]}"#
        )])
        .is_err());
        let c = Config::from_env(env(&[(
            "MCP_STATE_SECRET",
            "state-secret-for-config-tests-0123",
        )]))
        .unwrap();
        assert_eq!(
            c.auth,
            Auth::Unconfigured,
            "no auth configured means no tasks served"
        );
    }
}
