//! The reference tool set served by the official Rust SDK, `rmcp` 3.x
//! (feature `rmcp`): what a Rust server maintainer would write, used by the
//! `rmcp_*` examples and their tests.
//!
//! Same tools, arguments, texts and input requests as the crate's own
//! 2026-07-28 reference server (`modern`), built on rmcp's own APIs:
//! [`TaskManager`] materialises the tasks and answers `tasks/get`,
//! `tasks/update` and `tasks/cancel`; [`TaskContext::request_input`] asks
//! the client mid-task; `test_tool_with_task` asks before its task exists
//! with rmcp's MRTR [`InputRequiredResult`], its `requestState` sealed by
//! [`RequestStateCodec`].
//!
//! Where it differs from `modern`, because rmcp has no API for it:
//! - no `subscriptions/listen` for tasks (rmcp's subscription filter has no
//!   `taskIds`): clients poll;
//! - cancellation is rmcp's, cooperative: `tasks/cancel` is acknowledged at
//!   once and the task reads `working` until its work notices, a moment later;
//! - an `input_required` task carries no `statusMessage`, and a task whose
//!   TTL runs out while working ends `failed` (rmcp's sweep) instead of
//!   disappearing.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ClientCapabilities,
    ContentBlock, CreateTaskResult, ElicitRequest, GetTaskParams, GetTaskResult, Implementation,
    InputRequest, InputRequests, InputRequiredResult, ListToolsResult, PaginatedRequestParams,
    RequestStateCodec, SealOptions, ServerCapabilities, ServerConfig, TaskPayload, Tool,
    UpdateTaskParams,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::task_manager::{TaskContext, TaskExit, TaskManager, TaskOptions};
use rmcp::{ErrorData as McpError, ServerHandler};
use serde_json::Value;

use super::tasks::{DEFAULT_TTL_MS, POLL_INTERVAL_MS, refusal};
use super::tools::{self, Call, USER_NAME_KEY};
use crate::error::ShimError;
use crate::translate::tools::TaskPolicy;
use crate::wire::legacy::TaskSupport;

/// How long an MRTR `requestState` stays redeemable (as in `modern`).
const REQUEST_STATE_TTL: Duration = Duration::from_secs(600);

/// Binds a sealed `requestState` to the one tool that issues it.
const STATE_CONTEXT: &[u8] = b"tools/call test_tool_with_task";

/// The rmcp reference server: a [`ServerHandler`] for any rmcp transport
/// (stdio, a duplex pair, `StreamableHttpService`).
///
/// Clones share one task table, so a Streamable HTTP service factory can
/// hand out clones (`move || Ok(server.clone())`).
#[derive(Clone)]
pub struct RmcpReferenceServer {
    tasks: TaskManager,
    states: Arc<RequestStateCodec>,
}

impl std::fmt::Debug for RmcpReferenceServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RmcpReferenceServer")
            .field("running_tasks", &self.tasks.running_task_count())
            .finish_non_exhaustive()
    }
}

impl Default for RmcpReferenceServer {
    fn default() -> Self {
        Self::new()
    }
}

impl RmcpReferenceServer {
    /// A server with an empty task table and a fresh `requestState` key.
    pub fn new() -> Self {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).expect("the OS random source is available");
        Self {
            tasks: TaskManager::new(),
            states: Arc::new(
                RequestStateCodec::try_new(key.to_vec()).expect("a 32-byte key is long enough"),
            ),
        }
    }

    /// The 2025-11-25 view of this server's tools, for the shim's
    /// `BridgeConfig::policy`: `greet` forbidden, `slow_compute` optional,
    /// the tools that only run as tasks required. (2026-07-28 tools carry
    /// no `taskSupport`: the server decides per call.)
    pub fn task_policy() -> TaskPolicy {
        let per_tool = tool_list()
            .iter()
            .filter_map(|t| Some((t.name.to_string(), tools::task_support(&t.name)?)))
            .collect();
        TaskPolicy {
            default: Some(TaskSupport::Optional),
            per_tool,
        }
    }

    /// MRTR round one of `test_tool_with_task`: no task yet, just a question.
    fn ask_name(&self) -> Result<CallToolResponse, McpError> {
        let question = elicitation(tools::name_question())?;
        let requests = InputRequests::from([(USER_NAME_KEY.to_owned(), question)]);
        let options = SealOptions::new()
            .associated_data(STATE_CONTEXT)
            .ttl(REQUEST_STATE_TTL);
        let state = self.states.seal_with(b"ask_name", &options);
        Ok(InputRequiredResult::new(Some(requests), Some(state)).into())
    }

    /// A retry may omit `requestState` (it is optional in MRTR), but one we
    /// did not seal, or one that expired, is refused.
    fn redeem_state(&self, state: Option<&str>) -> Result<(), McpError> {
        let Some(state) = state else { return Ok(()) };
        self.states
            .open_with(state, STATE_CONTEXT)
            .map(drop)
            .map_err(|_| invalid("unknown or expired requestState"))
    }
}

/// The reference tool definitions, as rmcp `Tool`s (converted once).
fn tool_list() -> &'static [Tool] {
    static TOOLS: LazyLock<Vec<Tool>> = LazyLock::new(|| {
        tools::list(false)
            .into_iter()
            .map(|t| serde_json::from_value(t).expect("the reference tools are valid rmcp tools"))
            .collect()
    });
    &TOOLS
}

fn invalid(message: impl Into<String>) -> McpError {
    McpError::invalid_params(message.into(), None)
}

fn shim_error(e: ShimError) -> McpError {
    let obj = e.to_error_object();
    McpError::new(rmcp::model::ErrorCode(obj.code as i32), obj.message, None)
}

/// `{mode, message, requestedSchema}` → an rmcp elicitation input request.
fn elicitation(params: Value) -> Result<InputRequest, McpError> {
    let request: ElicitRequest = serde_json::from_value(
        serde_json::json!({"method": "elicitation/create", "params": params}),
    )
    .map_err(|e| McpError::internal_error(format!("elicitation request: {e}"), None))?;
    Ok(InputRequest::Elicitation(request))
}

/// `summarize` asks the client's model, as the reference servers' tool does,
/// although SEP-2577 deprecates sampling.
#[allow(deprecated)]
fn sampling(params: Value) -> Result<InputRequest, McpError> {
    let request: rmcp::model::CreateMessageRequest = serde_json::from_value(
        serde_json::json!({"method": "sampling/createMessage", "params": params}),
    )
    .map_err(|e| McpError::internal_error(format!("sampling request: {e}"), None))?;
    Ok(InputRequest::CreateMessage(request))
}

fn text(t: String) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(t)])
}

/// Input-request keys are never reused within a task (ext-tasks rule):
/// `prefix-N`, numbered per task, as `modern` names them.
struct Keys(u32);

impl Keys {
    fn next(&mut self, prefix: &str) -> String {
        self.0 += 1;
        format!("{prefix}-{}", self.0)
    }
}

/// A call that runs without a task: `greet`, or `slow_compute` for a client
/// without the tasks extension.
async fn run_plain(call: Call) -> Result<CallToolResult, McpError> {
    match call {
        Call::Greet { name } => Ok(text(tools::greet_text(&name))),
        Call::SlowCompute { seconds, label } => {
            tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
            Ok(text(tools::slow_text(&label, seconds)))
        }
        _ => Err(McpError::internal_error(
            "this tool only runs as a task",
            None,
        )),
    }
}

/// A task's work. Every tool stops when `tasks/cancel` arrives and the task
/// ends `cancelled`, as the crate's servers (which abort the work) do.
async fn run_task(call: Call, ctx: TaskContext) -> Result<CallToolResult, TaskExit> {
    let work = async {
        let mut keys = Keys(0);
        match call {
            Call::Greet { .. } | Call::SlowCompute { .. } => Ok(run_plain(call).await?),
            Call::FailingJob => {
                tokio::time::sleep(tools::FAILING_JOB_DELAY).await;
                Ok(CallToolResult::error(vec![ContentBlock::text(
                    tools::FAILING_JOB_TEXT,
                )]))
            }
            Call::ProtocolErrorJob => {
                tokio::time::sleep(tools::PROTOCOL_ERROR_DELAY).await;
                ctx.set_status_message(format!(
                    "Tool execution failed: {}",
                    tools::PROTOCOL_ERROR_TEXT
                ));
                Err(TaskExit::Error(McpError::internal_error(
                    tools::PROTOCOL_ERROR_TEXT,
                    None,
                )))
            }
            Call::ConfirmDelete { filename } => {
                let question = elicitation(tools::confirm_question(&filename))?;
                let answer = ctx.request_input(keys.next("confirm"), question).await?;
                Ok(text(tools::confirm_text(&filename, &answer)))
            }
            Call::MultiInput => {
                // Both questions are filed before either is awaited, so the
                // task shows two outstanding input requests at once.
                let (first, second) = (keys.next("name"), keys.next("confirm"));
                let (a, b) = tokio::join!(
                    ctx.request_input(first, elicitation(tools::name_question())?),
                    ctx.request_input(second, elicitation(tools::proceed_question())?)
                );
                Ok(text(tools::multi_input_text(&a?, &b?)))
            }
            Call::WithTask { name } => Ok(text(tools::with_task_text(&name))),
            Call::ExternalJob { job_id } => {
                tokio::time::sleep(tools::EXTERNAL_JOB_DELAY).await;
                Ok(text(tools::external_job_text(&job_id)))
            }
            Call::Summarize { text: input } => {
                let request = sampling(tools::summary_request(&input))?;
                let reply = ctx.request_input(keys.next("summary"), request).await?;
                Ok(text(tools::summary_text(&reply)))
            }
        }
    };
    tokio::select! {
        _ = ctx.cancelled() => Err(TaskExit::Cancelled),
        out = work => out,
    }
}

impl ServerHandler for RmcpReferenceServer {
    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(tool_list().to_vec()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        tool_list().iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let name = request.name.as_ref();
        let support =
            tools::task_support(name).ok_or_else(|| invalid(format!("Unknown tool: {name}")))?;
        let ext = context
            .client_capabilities()
            .is_some_and(|caps| caps.supports_tasks());
        if support == TaskSupport::Required && !ext {
            return Err(McpError::missing_required_client_capability(
                ClientCapabilities::builder().enable_tasks().build(),
            ));
        }
        // A 2025 `params.task` hint never reaches here (rmcp's typed params
        // drop it); the server alone decides, as the extension says.
        let pre_answer = if name == "test_tool_with_task" {
            match request
                .input_responses
                .as_ref()
                .and_then(|r| r.get(USER_NAME_KEY))
            {
                None => return self.ask_name(),
                Some(answer) => {
                    self.redeem_state(request.request_state.as_deref())?;
                    Some(tools::accepted_name(answer).unwrap_or_else(|| "anonymous".into()))
                }
            }
        } else {
            None
        };
        let args = request.arguments.map(Value::Object);
        let call = Call::parse(name, args.as_ref(), pre_answer).map_err(shim_error)?;
        if !ext || support == TaskSupport::Forbidden {
            return Ok(CallToolResponse::Complete(run_plain(call).await?));
        }
        let options = TaskOptions::new()
            .with_poll_interval_ms(POLL_INTERVAL_MS as u64)
            .with_ttl_ms(DEFAULT_TTL_MS as u64);
        let task = self
            .tasks
            .spawn(options, move |ctx| Box::pin(run_task(call, ctx)));
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
        // rmcp's task manager takes any answer; an accepted form that lacks
        // a required member is refused here first, all or nothing, leaving
        // every question open for a retry (as `modern` does).
        let task = self.tasks.get_task(&request.task_id)?;
        if let TaskPayload::InputRequired { input_requests } = &task.payload {
            for (key, answer) in &request.input_responses {
                let Some(asked) = input_requests.get(key) else {
                    continue;
                };
                let asked = serde_json::to_value(asked).unwrap_or_default();
                if let Some(why) = refusal(&asked, key, answer) {
                    return Err(invalid(why));
                }
            }
        }
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
        .with_server_info(Implementation::new(
            "mcp-tasks-shim-rmcp-reference",
            env!("CARGO_PKG_VERSION"),
        ))
        .with_instructions(
            "Reference MCP server of mcp-tasks-shim on rmcp (2026-07-28 + tasks extension): a test fixture.",
        )
    }
}
