//! The tool set both reference servers expose, and what each tool does.
//!
//! Names, argument names, input-request shapes and texts follow the
//! `tasks-*` scenarios of `@modelcontextprotocol/conformance` 0.2.0-alpha.12,
//! so the modern server (and the legacy one behind the shim) passes them.

use std::time::Duration;

use serde_json::{Value, json};

use super::tasks::{Outcome, TaskCtx};
use crate::error::ShimError;
use crate::jsonrpc::ErrorObject;
use crate::wire::legacy::TaskSupport;

/// The key under which `test_tool_with_task` asks its MRTR question; the
/// conformance scenario names it `user_name`.
pub(crate) const USER_NAME_KEY: &str = "user_name";

/// A validated tool call, ready to run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Call {
    Greet {
        name: String,
    },
    SlowCompute {
        seconds: f64,
        label: String,
    },
    FailingJob,
    ProtocolErrorJob,
    ConfirmDelete {
        filename: String,
    },
    MultiInput,
    /// `name` is the answer gathered before the task existed.
    WithTask {
        name: String,
    },
    Summarize {
        text: String,
    },
    /// A job handed to an outside worker; third-party 2025-11-25 suites
    /// call this fixture.
    ExternalJob {
        job_id: String,
    },
}

const TOOLS: &[(&str, &str, TaskSupport)] = &[
    ("greet", "Says hello.", TaskSupport::Forbidden),
    (
        "slow_compute",
        "Waits `seconds` seconds, then reports `label`. Cancellable.",
        TaskSupport::Optional,
    ),
    (
        "failing_job",
        "Ends with a tool error (isError) after about one second.",
        TaskSupport::Required,
    ),
    (
        "protocol_error_job",
        "Ends with a JSON-RPC error.",
        TaskSupport::Required,
    ),
    (
        "confirm_delete",
        "Asks for confirmation mid-task before (pretending to) delete a file.",
        TaskSupport::Required,
    ),
    (
        "multi_input",
        "Asks two questions at once mid-task.",
        TaskSupport::Required,
    ),
    (
        "test_tool_with_task",
        "Asks for a name before the task exists, then greets inside a task.",
        TaskSupport::Required,
    ),
    (
        "summarize",
        "Asks the client's model (sampling) mid-task to summarise `text`.",
        TaskSupport::Required,
    ),
    (
        "external_job",
        "Hands job `job_id` to an outside worker; it completes about a second later.",
        TaskSupport::Required,
    ),
];

/// The `taskSupport` of a tool, `None` for an unknown tool.
pub(crate) fn task_support(name: &str) -> Option<TaskSupport> {
    TOOLS.iter().find(|t| t.0 == name).map(|t| t.2)
}

fn input_schema(name: &str) -> Value {
    match name {
        "greet" => json!({"type": "object",
            "properties": {"name": {"type": "string", "description": "Who to greet"}},
            "required": ["name"]}),
        "slow_compute" => json!({"type": "object",
            "properties": {
                "seconds": {"type": "number", "minimum": 0, "description": "How long to work"},
                "label": {"type": "string", "description": "Echoed in the result"}},
            "required": ["seconds"]}),
        "confirm_delete" => json!({"type": "object",
            "properties": {"filename": {"type": "string"}},
            "required": ["filename"]}),
        "summarize" => json!({"type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"]}),
        "external_job" => json!({"type": "object",
            "properties": {"job_id": {"type": "string"}},
            "required": ["job_id"]}),
        _ => json!({"type": "object", "properties": {}}),
    }
}

/// Tool definitions; `with_execution` adds the 2025-11-25 `execution` member.
pub(crate) fn list(with_execution: bool) -> Vec<Value> {
    TOOLS
        .iter()
        .map(|(name, description, support)| {
            let mut t = json!({"name": name, "description": description,
                "inputSchema": input_schema(name)});
            if with_execution {
                t["execution"] = json!({"taskSupport": support.as_str()});
            }
            t
        })
        .collect()
}

fn arg_str(args: &Value, key: &str, tool: &str) -> Result<String, ShimError> {
    args.get(key)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| ShimError::InvalidParams(format!("{tool}: \"{key}\" must be a string")))
}

impl Call {
    /// Validates a call's arguments. `pre_answer` is the name gathered
    /// before the task (only `test_tool_with_task` uses it).
    pub(crate) fn parse(
        name: &str,
        args: Option<&Value>,
        pre_answer: Option<String>,
    ) -> Result<Call, ShimError> {
        let empty = json!({});
        let args = args.unwrap_or(&empty);
        if !args.is_object() {
            return Err(ShimError::InvalidParams(
                "\"arguments\" must be an object".into(),
            ));
        }
        Ok(match name {
            "greet" => Call::Greet {
                name: arg_str(args, "name", name)?,
            },
            "slow_compute" => {
                let seconds = args
                    .get("seconds")
                    .and_then(Value::as_f64)
                    .filter(|s| s.is_finite() && (0.0..=3600.0).contains(s))
                    .ok_or_else(|| {
                        ShimError::InvalidParams(
                            "slow_compute: \"seconds\" must be a number from 0 to 3600".into(),
                        )
                    })?;
                let label = match args.get("label") {
                    None => String::new(),
                    Some(_) => arg_str(args, "label", name)?,
                };
                Call::SlowCompute { seconds, label }
            }
            "failing_job" => Call::FailingJob,
            "protocol_error_job" => Call::ProtocolErrorJob,
            "confirm_delete" => Call::ConfirmDelete {
                filename: arg_str(args, "filename", name)?,
            },
            "multi_input" => Call::MultiInput,
            "test_tool_with_task" => Call::WithTask {
                name: pre_answer.unwrap_or_default(),
            },
            "summarize" => Call::Summarize {
                text: arg_str(args, "text", name)?,
            },
            "external_job" => Call::ExternalJob {
                job_id: arg_str(args, "job_id", name)?,
            },
            _ => return Err(ShimError::InvalidParams(format!("Unknown tool: {name}"))),
        })
    }
}

/// A successful text result.
pub(crate) fn text(t: impl Into<String>) -> Value {
    json!({"content": [{"type": "text", "text": t.into()}], "isError": false})
}

/// The elicitation `test_tool_with_task` sends before its task exists.
pub(crate) fn name_question() -> Value {
    json!({"mode": "form", "message": "What is your name?",
        "requestedSchema": {"type": "object",
            "properties": {"name": {"type": "string", "title": "Name"}},
            "required": ["name"]}})
}

/// The name in an elicitation answer, if the user accepted and gave one.
pub(crate) fn accepted_name(answer: &Value) -> Option<String> {
    if answer.get("action").and_then(Value::as_str) != Some("accept") {
        return None;
    }
    answer
        .get("content")?
        .get("name")?
        .as_str()
        .map(str::to_owned)
}

/// Runs a call to its end. `ctx` is present when the call runs as a task
/// (the only way tools that ask questions can run).
pub(crate) async fn run(call: Call, ctx: Option<TaskCtx>) -> Outcome {
    match call {
        Call::Greet { name } => Ok(text(greet_text(&name))),
        Call::SlowCompute { seconds, label } => {
            tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
            Ok(text(slow_text(&label, seconds)))
        }
        Call::FailingJob => {
            tokio::time::sleep(FAILING_JOB_DELAY).await;
            Ok(json!({"content": [{"type": "text", "text": FAILING_JOB_TEXT}], "isError": true}))
        }
        Call::ProtocolErrorJob => {
            tokio::time::sleep(PROTOCOL_ERROR_DELAY).await;
            Err(ErrorObject::new(
                crate::error::codes::INTERNAL_ERROR,
                PROTOCOL_ERROR_TEXT,
            ))
        }
        Call::ConfirmDelete { filename } => {
            let ctx = ctx.ok_or_else(needs_task)?;
            let answer = ctx.elicit("confirm", confirm_question(&filename)).await;
            Ok(text(confirm_text(&filename, &answer)))
        }
        Call::MultiInput => {
            let ctx = ctx.ok_or_else(needs_task)?;
            // Both questions are registered before either is awaited, so the
            // task shows two outstanding input requests at once.
            let (a, b) = tokio::join!(
                ctx.elicit("name", name_question()),
                ctx.elicit("confirm", proceed_question())
            );
            Ok(text(multi_input_text(&a, &b)))
        }
        Call::WithTask { name } => Ok(text(with_task_text(&name))),
        Call::ExternalJob { job_id } => {
            tokio::time::sleep(EXTERNAL_JOB_DELAY).await;
            Ok(text(external_job_text(&job_id)))
        }
        Call::Summarize { text: input } => {
            let ctx = ctx.ok_or_else(needs_task)?;
            let reply = ctx
                .ask("summary", "sampling/createMessage", summary_request(&input))
                .await;
            Ok(text(summary_text(&reply)))
        }
    }
}

// What each tool says and asks, shared by the crate's own servers and the
// rmcp one (`super::rmcp`), so they stay word for word the same.

/// How long `failing_job` works before its tool error.
pub(crate) const FAILING_JOB_DELAY: Duration = Duration::from_secs(1);
/// How long `protocol_error_job` works before its JSON-RPC error.
pub(crate) const PROTOCOL_ERROR_DELAY: Duration = Duration::from_millis(300);
/// How long the outside worker of `external_job` takes.
pub(crate) const EXTERNAL_JOB_DELAY: Duration = Duration::from_secs(1);
pub(crate) const FAILING_JOB_TEXT: &str = "failing_job: the job failed (simulated tool error)";
pub(crate) const PROTOCOL_ERROR_TEXT: &str = "protocol_error_job: simulated internal failure";

pub(crate) fn greet_text(name: &str) -> String {
    format!("Hello, {name}!")
}

pub(crate) fn slow_text(label: &str, seconds: f64) -> String {
    format!("slow_compute '{label}' finished after {seconds} s")
}

pub(crate) fn with_task_text(name: &str) -> String {
    format!("Hello, {name}! (name gathered before the task was created)")
}

pub(crate) fn external_job_text(job_id: &str) -> String {
    format!("Job {job_id} completed by the external worker")
}

/// The elicitation `confirm_delete` sends mid-task.
pub(crate) fn confirm_question(filename: &str) -> Value {
    json!({"mode": "form",
    "message": format!("Delete {filename}?"),
    "requestedSchema": {"type": "object",
        "properties": {"confirm": {"type": "boolean", "title": "Confirm",
            "description": format!("Really delete {filename}?")}},
        "required": ["confirm"]}})
}

pub(crate) fn confirm_text(filename: &str, answer: &Value) -> String {
    let yes = answer.get("action").and_then(Value::as_str) == Some("accept")
        && answer.pointer("/content/confirm").and_then(Value::as_bool) == Some(true);
    if yes {
        format!("Deleted {filename}")
    } else {
        format!("Deletion of {filename} cancelled")
    }
}

/// The second of `multi_input`'s two questions (the first is [`name_question`]).
pub(crate) fn proceed_question() -> Value {
    json!({"mode": "form", "message": "Proceed?",
    "requestedSchema": {"type": "object",
        "properties": {"confirm": {"type": "boolean", "title": "Proceed"}},
        "required": ["confirm"]}})
}

pub(crate) fn multi_input_text(first: &Value, second: &Value) -> String {
    format!(
        "multi_input answers: first = {}, second = {}",
        describe(first),
        describe(second)
    )
}

/// The `sampling/createMessage` params `summarize` sends mid-task.
pub(crate) fn summary_request(input: &str) -> Value {
    json!({"messages": [{"role": "user",
        "content": {"type": "text", "text": format!("Summarise: {input}")}}],
        "maxTokens": 100})
}

pub(crate) fn summary_text(reply: &Value) -> String {
    match reply.pointer("/content/text").and_then(Value::as_str) {
        Some(summary) => format!("Summary: {summary}"),
        None => "No summary: the client's model gave no text".to_owned(),
    }
}

fn needs_task() -> ErrorObject {
    ShimError::Internal("this tool only runs as a task".into()).to_error_object()
}

/// `accept {"name":"x"}` style summary of an elicitation answer.
fn describe(answer: &Value) -> String {
    let action = answer.get("action").and_then(Value::as_str).unwrap_or("?");
    match answer.get("content") {
        Some(c) => format!("{action} {c}"),
        None => action.to_owned(),
    }
}
