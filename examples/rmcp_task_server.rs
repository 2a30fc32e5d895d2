//! A 2026-07-28 MCP server built on the official Rust SDK (`rmcp` 3.11),
//! serving the tasks extension (`io.modelcontextprotocol/tasks`) on stdio.
//!
//! One tool, `slow {seconds, label?}`: when the request declares the tasks
//! extension (as the shim always does upstream), the server materialises a
//! task with `rmcp::task_manager::TaskManager`; the work honours
//! `tasks/cancel` cooperatively and ends `cancelled`. Without the extension
//! it answers plainly.
//!
//! Used by `tests/legacy_front_rmcp.rs` as a third-party modern server behind
//! the shim:
//!
//! ```text
//! mcp-tasks-shim stdio -- target/debug/examples/rmcp_task_server
//! ```

use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ContentBlock,
    CreateTaskResult, GetTaskParams, GetTaskResult, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool, UpdateTaskParams,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::task_manager::{TaskExit, TaskManager, TaskOptions};
use rmcp::{ErrorData as McpError, ServerHandler, ServiceExt};
use serde_json::{Value, json};

/// Suggested poll interval (ms): small, so tests run fast.
const POLL_MS: u64 = 50;

#[derive(Clone, Default)]
struct SlowServer {
    tasks: TaskManager,
}

fn slow_tool() -> Tool {
    let schema = json!({
        "type": "object",
        "properties": {
            "seconds": {"type": "number", "minimum": 0, "description": "How long to work"},
            "label": {"type": "string", "description": "Echoed in the result"}
        },
        "required": ["seconds"]
    });
    let Value::Object(schema) = schema else {
        unreachable!("a JSON object literal")
    };
    Tool::new(
        "slow",
        "Waits `seconds` seconds, then reports `label`. Runs as a task; cancellable.",
        schema,
    )
}

fn done(label: &str, seconds: f64) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(format!(
        "slow '{label}' finished after {seconds} s"
    ))])
}

impl ServerHandler for SlowServer {
    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(vec![slow_tool()]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        if request.name != "slow" {
            return Err(McpError::invalid_params(
                format!("Unknown tool: {}", request.name),
                None,
            ));
        }
        let args = request.arguments.unwrap_or_default();
        let seconds = args
            .get("seconds")
            .and_then(Value::as_f64)
            .filter(|s| s.is_finite() && (0.0..=3600.0).contains(s))
            .ok_or_else(|| McpError::invalid_params("\"seconds\" must be 0..=3600", None))?;
        let label = args
            .get("label")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let wants_task = context
            .client_capabilities()
            .is_some_and(|caps| caps.supports_tasks());
        if !wants_task {
            tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
            return Ok(CallToolResponse::Complete(done(&label, seconds)));
        }
        let options = TaskOptions::new()
            .with_poll_interval_ms(POLL_MS)
            .with_ttl_ms(600_000);
        let task = self.tasks.spawn(options, move |ctx| {
            Box::pin(async move {
                tokio::select! {
                    _ = ctx.cancelled() => Err(TaskExit::Cancelled),
                    _ = tokio::time::sleep(Duration::from_secs_f64(seconds)) => Ok(done(&label, seconds)),
                }
            })
        });
        Ok(CallToolResponse::Task(CreateTaskResult::new(task)))
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        Ok(GetTaskResult::new(self.tasks.get_task(&request.task_id)?))
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.tasks
            .update_task(&request.task_id, request.input_responses)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.tasks.cancel_task(&request.task_id)
    }

    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tasks()
                .build(),
        )
        .with_server_info(Implementation::new("rmcp-task-server", "0.1.0"))
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let service = SlowServer::default()
        .serve(rmcp::transport::stdio())
        .await?;
    service.waiting().await?;
    Ok(())
}
