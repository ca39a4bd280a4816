//! Wire types of MCP 2026-07-28 and the `io.modelcontextprotocol/tasks`
//! extension, one file per spec area. Method names, `_meta` keys and other
//! protocol literals live here and nowhere else.

pub mod content;
pub mod error;
pub mod jsonrpc;
pub mod meta;
pub(crate) mod scan;
pub mod tasks;
pub mod tools;

/// The protocol revisions this server speaks, newest first.
pub const SUPPORTED_VERSIONS: &[&str] = &["2026-07-28"];

/// The identifier of the tasks extension, used in capabilities on both sides.
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// `_meta` keys defined by the core protocol.
pub mod meta_keys {
    pub const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
    pub const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
    pub const CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
    pub const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
    pub const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
}

/// Method and notification names.
pub mod methods {
    pub const SERVER_DISCOVER: &str = "server/discover";
    pub const TOOLS_LIST: &str = "tools/list";
    pub const TOOLS_CALL: &str = "tools/call";
    pub const TASKS_GET: &str = "tasks/get";
    pub const TASKS_UPDATE: &str = "tasks/update";
    pub const TASKS_CANCEL: &str = "tasks/cancel";
    pub const SUBSCRIPTIONS_LISTEN: &str = "subscriptions/listen";
    pub const PROMPTS_LIST: &str = "prompts/list";
    pub const PROMPTS_GET: &str = "prompts/get";
    pub const RESOURCES_LIST: &str = "resources/list";
    pub const RESOURCE_TEMPLATES_LIST: &str = "resources/templates/list";
    pub const RESOURCES_READ: &str = "resources/read";
    pub const COMPLETION_COMPLETE: &str = "completion/complete";

    pub const NOTIFICATION_ACKNOWLEDGED: &str = "notifications/subscriptions/acknowledged";
    pub const NOTIFICATION_TASKS: &str = "notifications/tasks";
    pub const NOTIFICATION_PROGRESS: &str = "notifications/progress";

    /// Methods that earlier revisions had and this one removed; they answer
    /// -32601 like any unknown method, with a reason in `data`.
    pub const REMOVED: &[&str] = &[
        "initialize",
        "ping",
        "logging/setLevel",
        "tasks/result",
        "tasks/list",
        "tasks/status",
        "resources/subscribe",
        "resources/unsubscribe",
    ];
}

/// `resultType` discriminators.
pub mod result_type {
    pub const COMPLETE: &str = "complete";
    pub const INPUT_REQUIRED: &str = "input_required";
    pub const TASK: &str = "task";
}
