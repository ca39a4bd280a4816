//! Input requests sent to a 2025-11-25 client, and its answers.
//!
//! The server asks on a response stream (`elicitation/create`,
//! `sampling/createMessage`, ...) with a request id that says where the
//! answer goes, so that the client's JSON-RPC response, POSTed to any
//! replica, is routed with no server memory:
//!
//! `mti1.<kind>.<target>.<base64url(input key)>.<tag>`
//!
//! where `kind` is `t` (the target is a task id: the answer becomes that
//! task's `tasks/update`) or `r` (the target is a pending round of a
//! synchronous call, see [`Round`]). The tag is a truncated HMAC over the
//! kind, target, key and the caller's tenant and principal: an id altered,
//! invented, or answered by another principal is refused before any store
//! read. An answer to a key that is no longer outstanding (already
//! answered, superseded) is ignored, as `tasks/update` ignores it.
//!
//! An error response refuses the request it answers: an elicitation reads
//! as cancelled (`{"action": "cancel"}`, which the tool sees); any other
//! request (a sampling request the user rejected) ends what asked for it,
//! a synchronous call with an error result, a task `failed`, both saying
//! which request the client refused.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::crypto::{StateKey, b64url, b64url_decode};
use crate::error::RpcError;
use crate::ids::IdSource;
use crate::owner::Owner;
use crate::protocol::tools::{ELICITATION_CREATE, InputRequests};
use crate::store::{Store, StoreError, Version};
use crate::tasks::{TaskError, TaskService, scratch};
use crate::time::Millis;

const LABEL: &[u8] = b"mcp-tasks-edge/legacy-input/v1";
const PREFIX: &str = "mti1";

/// Where an answer goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A task's outstanding input request.
    Task(String),
    /// A synchronous call's pending round (a scratch record key).
    Round(String),
}

impl Target {
    fn parts(&self) -> (&'static str, &str) {
        match self {
            Target::Task(id) => ("t", id),
            Target::Round(key) => ("r", key),
        }
    }
}

fn with_parts<R>(
    owner: &Owner,
    kind: &str,
    target: &str,
    key: &str,
    f: impl FnOnce(&[&[u8]]) -> R,
) -> R {
    f(&[
        LABEL,
        kind.as_bytes(),
        target.as_bytes(),
        key.as_bytes(),
        owner.tenant.as_bytes(),
        owner.principal.as_bytes(),
    ])
}

/// The request id for input `key` of `target`, asked of `owner`.
pub fn request_id(secret: &StateKey, owner: &Owner, target: &Target, key: &str) -> String {
    let (kind, target) = target.parts();
    let tag = with_parts(owner, kind, target, key, |p| secret.short_tag(p));
    format!("{PREFIX}.{kind}.{target}.{}.{tag}", b64url(key.as_bytes()))
}

/// The target and input key `id` stands for, if this server made it for
/// `owner`.
pub fn parse_id(secret: &StateKey, owner: &Owner, id: &str) -> Option<(Target, String)> {
    let [kind, target, key, tag] = super::token_fields(id, PREFIX)?;
    let key = String::from_utf8(b64url_decode(key)?).ok()?;
    if !with_parts(owner, kind, target, &key, |p| {
        secret.short_tag_matches(p, tag)
    }) {
        return None;
    }
    let target = match kind {
        "t" => Target::Task(target.to_owned()),
        "r" => Target::Round(target.to_owned()),
        _ => return None,
    };
    Some((target, key))
}

/// A client's answer: the `result` of its response, or what an `error`
/// response means for the request it answers.
pub fn answer_value(method: &str, outcome: Result<Value, Value>) -> Option<Value> {
    match outcome {
        Ok(result) => Some(result),
        // A client that fails an elicitation has not accepted it.
        Err(_) if method == ELICITATION_CREATE => Some(serde_json::json!({ "action": "cancel" })),
        Err(_) => None,
    }
}

/// Records `owner`'s answer to input `key` of `target`.
pub async fn deliver<S: Store>(
    service: TaskService<'_, S>,
    owner: &Owner,
    target: &Target,
    key: &str,
    outcome: Result<Value, Value>,
    now: Millis,
) -> Result<(), RpcError> {
    let store = service.store;
    match target {
        Target::Task(id) => {
            let value = match outcome {
                Ok(result) => result,
                Err(error) => {
                    let Some(method) = service.pending_method(owner, id, key, now).await? else {
                        return Ok(());
                    };
                    let Some(value) = answer_value(&method, Err(error)) else {
                        // Refused: the task ends with that said, rather
                        // than wait for an answer that will not come.
                        return service
                            .refuse_input(owner, id, key, now)
                            .await
                            .map_err(RpcError::from);
                    };
                    value
                }
            };
            let mut responses = Map::new();
            responses.insert(key.to_owned(), value);
            service
                .update(owner, id, &responses, now)
                .await
                .map_err(RpcError::from)
        }
        Target::Round(round) => Round::answer(store, round, owner, key, outcome, now).await,
    }
}

/// The input requests of a synchronous call that is waiting for answers,
/// kept in a scratch record until the answers are in (or it expires and
/// the runner purges it).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Round {
    pub owner: Owner,
    pub expires_at: Millis,
    pub requests: InputRequests,
    #[serde(default)]
    pub answers: BTreeMap<String, Value>,
    /// Why the call cannot go on: the client answered one of its requests
    /// with an error (a user who rejected a sampling request).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

impl Round {
    /// Whether every request has its answer.
    pub fn complete(&self) -> bool {
        self.requests.keys().all(|k| self.answers.contains_key(k))
    }

    /// Persists a new round; returns its key.
    pub async fn create<S: Store>(
        store: &S,
        ids: &dyn IdSource,
        round: &Round,
    ) -> Result<String, RpcError> {
        let body = encode(round)?;
        for _ in 0..3 {
            let mut raw = [0u8; 16];
            ids.fill(&mut raw)?;
            let key = scratch::key(&b64url(&raw));
            match store.put(&key, None, &body, Some(round.expires_at)).await {
                Ok(_) => return Ok(key),
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(TaskError::from(e).into()),
            }
        }
        Err(RpcError::internal("Internal error: no round key was free."))
    }

    /// The round stored under `key`, if any.
    pub async fn load<S: Store>(
        store: &S,
        key: &str,
    ) -> Result<Option<(Version, Round)>, RpcError> {
        let Some(entry) = store.get(key).await.map_err(TaskError::from)? else {
            return Ok(None);
        };
        let round = crate::json::from_str(&entry.body)
            .map_err(|_| RpcError::internal("Internal error: a pending round is unreadable."))?;
        Ok(Some((entry.version, round)))
    }

    /// Replaces the round under `key` (the next round of the same call).
    pub async fn replace<S: Store>(
        store: &S,
        key: &str,
        version: Version,
        round: &Round,
    ) -> Result<(), RpcError> {
        store
            .put(key, Some(version), &encode(round)?, Some(round.expires_at))
            .await
            .map(|_| ())
            .map_err(|e| TaskError::from(e).into())
    }

    /// Removes the round under `key` once the call has its answer.
    pub async fn remove<S: Store>(store: &S, key: &str, version: Version) {
        // Best effort: an entry left behind expires and is purged.
        let _ = store.delete(key, version).await;
    }

    async fn answer<S: Store>(
        store: &S,
        key: &str,
        owner: &Owner,
        input: &str,
        outcome: Result<Value, Value>,
        now: Millis,
    ) -> Result<(), RpcError> {
        for _ in 0..8 {
            let Some((version, mut round)) = Self::load(store, key).await? else {
                return Ok(());
            };
            if round.owner != *owner || round.expires_at <= now {
                return Ok(());
            }
            let Some(request) = round.requests.get(input) else {
                return Ok(());
            };
            if round.answers.contains_key(input) {
                return Ok(());
            }
            let Some(value) = answer_value(&request.method, outcome.clone()) else {
                // Refused: the call ends with that said, rather than wait
                // for an answer that will not come.
                round.refused = Some(format!(
                    "The client refused the {} request.",
                    crate::error::truncate(&request.method, 64)
                ));
                match Self::replace(store, key, version, &round).await {
                    Ok(()) => return Ok(()),
                    Err(_) => continue,
                }
            };
            crate::tasks::input::validate(request, &value).map_err(|why| {
                RpcError::invalid_params(format!(
                    "Invalid input response for {}: {why}.",
                    crate::error::truncate(input, 64)
                ))
            })?;
            round.answers.insert(input.to_owned(), value);
            match Self::replace(store, key, version, &round).await {
                Ok(()) => return Ok(()),
                Err(_) => continue,
            }
        }
        Err(RpcError::internal(
            "Internal error: the answer could not be recorded; retry.",
        ))
    }
}

fn encode(round: &Round) -> Result<String, RpcError> {
    serde_json::to_string(round)
        .map_err(|_| RpcError::internal("Internal error: a round could not be encoded."))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(p: &str) -> Owner {
        Owner {
            tenant: "t".into(),
            principal: p.into(),
        }
    }

    #[test]
    fn ids_route_and_bind() {
        let s = &StateKey::new(b"0123456789abcdef0123456789abcdef".to_vec());
        let t = Target::Task("tsk_abc".into());
        let id = request_id(s, &owner("a"), &t, "confirm.v1");
        assert_eq!(
            parse_id(s, &owner("a"), &id),
            Some((t.clone(), "confirm.v1".to_owned()))
        );
        assert_eq!(parse_id(s, &owner("b"), &id), None, "another principal");
        let other = id.replace("tsk_abc", "tsk_abd");
        assert_eq!(parse_id(s, &owner("a"), &other), None, "another task");
        assert_eq!(parse_id(s, &owner("a"), "mti1.t.x.y.z"), None);
        let r = Target::Round("scr_x".into());
        let id = request_id(s, &owner("a"), &r, "k");
        assert_eq!(parse_id(s, &owner("a"), &id), Some((r, "k".into())));
    }
}
