//! Platform adapters. Each is compiled only for its target; nothing outside
//! this module names a platform type. None exports anything by itself: the
//! user's crate declares its entry points with the two macros here,
//! [`crate::cloudflare_worker!`] and [`crate::wasi_component!`], which
//! expand to nothing on other targets (so one crate can invoke both).

/// Cloudflare Workers (wasm32-unknown-unknown). Its pure parts (the shard
/// protocol, shard routing, the KV cache format) also build on the host so
/// that `cargo test` covers them.
#[cfg(any(test, all(target_arch = "wasm32", target_os = "unknown")))]
pub mod cloudflare;
#[cfg(target_os = "wasi")]
pub mod wasi;

/// Declares the Cloudflare Worker in the user's crate: the `fetch` and
/// `scheduled` handlers and the `TaskShard` Durable Object class (the
/// `class_name` in wrangler.toml), all serving the tools the factory
/// builds. The crate needs `worker` as a dependency (the handler macros
/// name it); the items live in a module of their own
/// (`mcp_tasks_edge_worker`).
///
/// ```ignore
/// fn tools(_settings: &dyn mcp_tasks_edge::tools::ToolSettings)
///     -> Result<mcp_tasks_edge::tools::ToolSet, String> {
///     Ok(mcp_tasks_edge::tools::ToolSet::from_tools(vec![/* your tools */]))
/// }
/// mcp_tasks_edge::cloudflare_worker!(tools);
/// ```
///
/// Expands to nothing unless the target is `wasm32-unknown-unknown`.
#[macro_export]
macro_rules! cloudflare_worker {
    ($tools:path) => {
        #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
        const MCP_TASKS_EDGE_TOOLS: $crate::tools::ToolFactory = $tools;

        /// The Worker's handlers and the shard Durable Object class
        /// (`TaskShard` in wrangler.toml), declared by
        /// `mcp_tasks_edge::cloudflare_worker!`.
        #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
        mod mcp_tasks_edge_worker {
            // The handler macros' expansions name `wasm_bindgen`.
            use ::worker::wasm_bindgen;

            #[::worker::event(fetch)]
            async fn fetch(
                req: ::worker::Request,
                env: ::worker::Env,
                ctx: ::worker::Context,
            ) -> ::std::result::Result<::worker::Response, ::std::convert::Infallible> {
                Ok(
                    $crate::platform::cloudflare::fetch(req, env, ctx, super::MCP_TASKS_EDGE_TOOLS)
                        .await,
                )
            }

            #[::worker::event(scheduled)]
            async fn scheduled(
                event: ::worker::ScheduledEvent,
                env: ::worker::Env,
                ctx: ::worker::ScheduleContext,
            ) {
                $crate::platform::cloudflare::scheduled(event, env, ctx).await
            }

            /// The shard Durable Object class.
            #[::worker::durable_object(alarm)]
            pub struct TaskShard($crate::platform::cloudflare::Shard);

            impl ::worker::DurableObject for TaskShard {
                fn new(state: ::worker::State, env: ::worker::Env) -> Self {
                    TaskShard($crate::platform::cloudflare::Shard::new(
                        state,
                        env,
                        super::MCP_TASKS_EDGE_TOOLS,
                    ))
                }

                async fn fetch(
                    &self,
                    req: ::worker::Request,
                ) -> ::worker::Result<::worker::Response> {
                    Ok(self.0.fetch(req).await)
                }

                async fn alarm(&self) -> ::worker::Result<::worker::Response> {
                    self.0.alarm().await
                }
            }
        }
    };
}

/// Exports the WASI component (world `server` of this crate's `wit/`) from
/// the user's crate, serving the tools its factory builds.
///
/// ```ignore
/// fn tools(_settings: &dyn mcp_tasks_edge::tools::ToolSettings)
///     -> Result<mcp_tasks_edge::tools::ToolSet, String> {
///     Ok(mcp_tasks_edge::tools::ToolSet::from_tools(vec![/* your tools */]))
/// }
/// mcp_tasks_edge::wasi_component!(tools);
/// ```
///
/// Expands to nothing unless the target is `wasm32-wasip2`.
#[macro_export]
macro_rules! wasi_component {
    ($tools:path) => {
        #[cfg(target_os = "wasi")]
        const _: () = {
            struct McpTasksEdgeApp;
            impl $crate::platform::wasi::App for McpTasksEdgeApp {
                const TOOLS: $crate::tools::ToolFactory = $tools;
            }
            type McpTasksEdgeComponent = $crate::platform::wasi::Component<McpTasksEdgeApp>;
            $crate::platform::wasi::bindings::export!(
                McpTasksEdgeComponent with_types_in $crate::platform::wasi::bindings
            );
        };
    };
}
