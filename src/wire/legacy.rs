//! 2025-11-25 task shapes (tasks in the core, experimental).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{Extra, TaskStatus};

revision_task! {
    /// A task as 2025-11-25 describes it (`ttl`, `pollInterval`).
    ttl: ttl = "ttl",
    poll: poll_interval = "pollInterval",
}

/// `params.task` of a task-augmented request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskMetadata {
    /// Requested retention in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<i64>,
    /// Unknown members.
    #[serde(flatten)]
    pub extra: Extra,
}

/// The answer to a task-augmented request: `{ task: Task }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CreateTaskResult {
    /// The created task.
    pub task: Task,
    /// Result `_meta` and unknown members.
    #[serde(flatten)]
    pub extra: Extra,
}

impl CreateTaskResult {
    /// [`super::from_value`] for an owned value: the same result (or the
    /// same error), without copying unknown members.
    pub fn from_owned_value(v: Value) -> Result<CreateTaskResult, crate::error::ShimError> {
        let fast = v.as_object().is_some_and(|m| {
            m.get("task")
                .and_then(Value::as_object)
                .is_some_and(|t| super::task_fields_ok(t, Task::TTL_KEY, Task::POLL_KEY))
        });
        let Value::Object(m) = v else {
            return super::from_value("CreateTaskResult", &v);
        };
        if !fast {
            return super::from_value("CreateTaskResult", &Value::Object(m));
        }
        let mut task = None;
        let mut extra = Map::new();
        for (k, v) in m {
            match (k.as_str(), v) {
                ("task", Value::Object(t)) => task = Task::try_from_map(t).ok(),
                (_, v) => {
                    extra.insert(k, v);
                }
            }
        }
        match task {
            Some(task) => Ok(CreateTaskResult { task, extra }),
            None => Err(crate::error::ShimError::Internal(
                "CreateTaskResult: checked task did not read".into(),
            )),
        }
    }
}

/// `tasks/list` result page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTasksResult {
    /// The tasks on this page.
    pub tasks: Vec<Task>,
    /// Opaque cursor of the next page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// Unknown members.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `_meta["io.modelcontextprotocol/related-task"]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RelatedTask {
    /// The task a message belongs to.
    pub task_id: String,
}

/// `capabilities.tasks` of a 2025-11-25 server.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerTasksCapability {
    /// Present if the server supports `tasks/list`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list: Option<Value>,
    /// Present if the server supports `tasks/cancel`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancel: Option<Value>,
    /// Which requests may be task-augmented (`{tools: {call: {}}}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<Value>,
    /// Unknown members.
    #[serde(flatten)]
    pub extra: Extra,
}

impl ServerTasksCapability {
    /// True when `tools/call` may be task-augmented.
    pub fn tool_calls(&self) -> bool {
        self.requests
            .as_ref()
            .and_then(|r| r.get("tools"))
            .and_then(|t| t.get("call"))
            .is_some()
    }
}

/// `Tool.execution.taskSupport`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskSupport {
    /// The tool must not be called as a task (the default).
    #[default]
    Forbidden,
    /// The client may ask for a task.
    Optional,
    /// The tool must be called as a task.
    Required,
}

impl TaskSupport {
    /// The `taskSupport` of a tool definition (absent means forbidden).
    pub fn of_tool(tool: &Value) -> TaskSupport {
        tool.get("execution")
            .and_then(|e| e.get("taskSupport"))
            .and_then(|t| serde_json::from_value(t.clone()).ok())
            .unwrap_or_default()
    }

    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskSupport::Forbidden => "forbidden",
            TaskSupport::Optional => "optional",
            TaskSupport::Required => "required",
        }
    }
}

impl std::str::FromStr for TaskSupport {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "forbidden" => Ok(TaskSupport::Forbidden),
            "optional" => Ok(TaskSupport::Optional),
            "required" => Ok(TaskSupport::Required),
            _ => Err(format!(
                "unknown taskSupport {s:?} (expected required, optional or forbidden)"
            )),
        }
    }
}

/// `notifications/tasks/status` params: the task, nothing more.
pub type TaskStatusNotificationParams = Task;
