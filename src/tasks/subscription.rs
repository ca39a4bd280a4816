//! `subscriptions/listen` for tasks, as a sequence of events that a platform
//! adapter streams as SSE. The core stays stateless: the adapter polls
//! [`Subscription::poll`] on a timer while the stream is open, and each poll
//! emits a `notifications/tasks` for every subscribed task whose snapshot
//! changed since the last one sent.

use crate::sorted::SortedMap;

use serde_json::{Map, Value, json};

use super::load_view;
use crate::error::RpcError;
use crate::owner::Owner;
use crate::protocol::jsonrpc::{Id, close_with_members, notification_bytes, result_bytes};
use crate::protocol::tasks::SubscriptionFilter;
use crate::protocol::{meta_keys, methods, result_type};
use crate::store::Store;
use crate::time::Millis;

/// How a listen stream behaves.
#[derive(Clone, Debug)]
pub struct ListenSettings {
    /// The longest a stream stays open before it ends gracefully.
    pub max_ms: u64,
    /// How often the adapter should poll.
    pub poll_interval_ms: u64,
    /// The server's identity, for completed results in snapshots.
    pub server_info: Value,
}

/// One open listen stream.
#[derive(Debug)]
pub struct Subscription {
    id: Id,
    /// The `_meta` every event carries, as JSON.
    meta_json: Vec<u8>,
    owner: Owner,
    /// Acknowledged task ids and the last snapshot sent for each (`None`
    /// until the first one); removed once terminal or gone.
    tasks: SortedMap<Option<String>>,
    acknowledged: Vec<String>,
    server_info: Value,
    /// When the stream ends on its own (then the client may listen again).
    pub ends_at: Millis,
    /// How often the adapter should poll.
    pub poll_interval_ms: u64,
    /// The stream's slot in the caller's open-stream quota, if counted.
    pub slot: Option<Box<super::streams::Slot>>,
}

impl Subscription {
    /// Agrees to the subset of `filter` this server honours: the caller's own
    /// visible tasks among `taskIds`. Other ids, and the core list-change
    /// notifications this server does not emit, are left out.
    pub async fn open<S: Store>(
        store: &S,
        id: Id,
        owner: Owner,
        filter: &SubscriptionFilter,
        now: Millis,
        settings: ListenSettings,
    ) -> Result<Subscription, RpcError> {
        let mut tasks = SortedMap::new();
        let mut acknowledged = Vec::new();
        for task_id in filter.task_ids.iter().flatten().take(100) {
            if tasks.contains_key(task_id) {
                continue;
            }
            if load_view(store, task_id, &owner, now, &settings.server_info)
                .await?
                .is_some()
            {
                tasks.insert(task_id.clone(), None);
                acknowledged.push(task_id.clone());
            }
        }
        let meta_json =
            serde_json::to_vec(&subscription_meta(&id)).unwrap_or_else(|_| b"{}".to_vec());
        Ok(Subscription {
            id,
            meta_json,
            owner,
            tasks,
            acknowledged,
            server_info: settings.server_info,
            ends_at: now.saturating_add(settings.max_ms.min(i64::MAX as u64) as i64),
            poll_interval_ms: settings.poll_interval_ms,
            slot: None,
        })
    }

    fn meta(&self) -> Value {
        subscription_meta(&self.id)
    }

    /// The first event: `notifications/subscriptions/acknowledged`.
    pub fn acknowledgement(&self) -> Vec<u8> {
        let mut notifications = Map::new();
        if !self.acknowledged.is_empty() {
            notifications.insert("taskIds".into(), json!(self.acknowledged));
        }
        notification_bytes(
            methods::NOTIFICATION_ACKNOWLEDGED,
            &json!({ "notifications": notifications, "_meta": self.meta() }),
        )
    }

    /// Reads the subscribed tasks and returns a `notifications/tasks` event
    /// for each whose snapshot changed. A task that reached a terminal
    /// status (after its last event) or disappeared is dropped.
    pub async fn poll<S: Store>(
        &mut self,
        store: &S,
        now: Millis,
    ) -> Result<Vec<Vec<u8>>, RpcError> {
        let mut events = Vec::new();
        let ids: Vec<String> = self.tasks.keys().cloned().collect();
        for task_id in ids {
            let Some(view) =
                load_view(store, &task_id, &self.owner, now, &self.server_info).await?
            else {
                self.tasks.remove(&task_id);
                continue;
            };
            let last = self.tasks.get(&task_id).cloned().flatten();
            if last.as_deref() != Some(view.snapshot.as_str()) {
                events.push(self.notification(&view.snapshot));
            }
            if view.status.is_terminal() {
                self.tasks.remove(&task_id);
            } else {
                self.tasks.insert(task_id, Some(view.snapshot));
            }
        }
        Ok(events)
    }

    /// `notifications/tasks` around a stored snapshot (the same object
    /// `tasks/get` returns, tagged with the subscription id).
    fn notification(&self, snapshot: &str) -> Vec<u8> {
        let mut head = Vec::with_capacity(snapshot.len() + self.meta_json.len() + 64);
        head.extend_from_slice(br#"{"jsonrpc":"2.0","method":""#);
        head.extend_from_slice(methods::NOTIFICATION_TASKS.as_bytes());
        head.extend_from_slice(br#"","params":{"_meta":"#);
        close_with_members(head, &self.meta_json, snapshot)
    }

    /// Whether nothing more can be sent: every task is terminal or gone, or
    /// the stream reached its maximum length.
    pub fn finished(&self, now: Millis) -> bool {
        self.tasks.is_empty() || now >= self.ends_at
    }

    /// The graceful end: the listen request's result (its `_meta` names
    /// the subscription and, as every result's does, the server).
    pub fn closing(&self) -> Vec<u8> {
        let mut meta = self.meta();
        if let Value::Object(m) = &mut meta {
            m.insert(meta_keys::SERVER_INFO.to_owned(), self.server_info.clone());
        }
        result_bytes(
            &self.id,
            &json!({ "resultType": result_type::COMPLETE, "_meta": meta }),
        )
    }
}

/// The `_meta` of every event of the subscription opened by request `id`.
fn subscription_meta(id: &Id) -> Value {
    json!({ meta_keys::SUBSCRIPTION_ID: id.to_value() })
}
