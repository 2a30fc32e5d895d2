//! Errors by cause, and the one place that maps them to JSON-RPC codes.
//!
//! Every failure inside the shim becomes a [`ShimError`]; whatever reaches a
//! peer goes through [`ShimError::to_error_object`]. Keeping the mapping here
//! means a code (say `-32021`) is chosen in exactly one line.

use serde_json::{Value, json};

use crate::jsonrpc::ErrorObject;
use crate::revision::{MODERN_VERSION, TASKS_EXTENSION};

/// The HTTP status a 2026-07-28 Streamable HTTP server answers a JSON-RPC
/// error `code` with: 400 for what is wrong with the request itself
/// (headers, version, capability, framing), 404 for a method the revision
/// does not have, 200 (the error in the body) for the rest. The shim's
/// modern front, its relay and the reference server all answer through
/// this one mapping.
///
/// ```
/// use mcp_tasks_shim::error::{codes, modern_http_status};
/// assert_eq!(modern_http_status(codes::METHOD_NOT_FOUND), 404);
/// assert_eq!(modern_http_status(codes::INVALID_PARAMS), 200);
/// ```
pub fn modern_http_status(code: i64) -> u16 {
    use codes::*;
    match code {
        HEADER_MISMATCH | MISSING_CAPABILITY | UNSUPPORTED_VERSION | PARSE_ERROR
        | INVALID_REQUEST => 400,
        METHOD_NOT_FOUND => 404,
        _ => 200,
    }
}

/// JSON-RPC and MCP error codes the shim emits or recognises.
pub mod codes {
    /// Invalid JSON.
    pub const PARSE_ERROR: i64 = -32700;
    /// Not a valid JSON-RPC request.
    pub const INVALID_REQUEST: i64 = -32600;
    /// Unknown method (also: a method the revision removed).
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// Bad params, unknown task id, bad cursor.
    pub const INVALID_PARAMS: i64 = -32602;
    /// Internal error, upstream faults.
    pub const INTERNAL_ERROR: i64 = -32603;
    /// 2026-07-28: HTTP headers disagree with the body.
    pub const HEADER_MISMATCH: i64 = -32020;
    /// 2026-07-28: the request needs a client capability it did not declare.
    pub const MISSING_CAPABILITY: i64 = -32021;
    /// 2026-07-28: unsupported protocol version.
    pub const UNSUPPORTED_VERSION: i64 = -32022;
    /// MCP: no resource has this URI.
    pub const RESOURCE_NOT_FOUND: i64 = -32002;
}

/// Everything that can go wrong, sorted by who is at fault.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum ShimError {
    /// The peer sent bytes that are not JSON.
    #[error("Parse error: {0}")]
    Parse(String),
    /// The peer sent JSON that is not a valid JSON-RPC message.
    #[error("Invalid request: {0}")]
    InvalidRequest(String),
    /// The method does not exist in the revision spoken.
    #[error("Method not found: {0}")]
    MethodNotFound(String),
    /// Credentials the shim refuses (HTTP 401).
    #[error("Unauthorized: {0}")]
    Unauthorized(String),
    /// The params are malformed.
    #[error("Invalid params: {0}")]
    InvalidParams(String),
    /// The task id is unknown, expired or belongs to someone else: all
    /// three must be indistinguishable, so this variant carries no detail.
    #[error("Failed to retrieve task: Task not found")]
    UnknownTask,
    /// A `tasks/cancel` for a task that already ended (2025-11-25 rule).
    #[error("Cannot cancel task: already in terminal status '{0}'")]
    TaskTerminal(String),
    /// A 2025-11-25 `tasks/result` for a task that was cancelled: the spec
    /// leaves this open, the shim answers an error that says so.
    #[error("Task was cancelled; it has no result")]
    TaskCancelled,
    /// 2026-07-28 HTTP header and body disagree (`-32020`).
    #[error("Header mismatch: {0}")]
    HeaderMismatch(String),
    /// The request needs the tasks extension, which the client did not declare.
    #[error("Missing required client capability: {TASKS_EXTENSION}")]
    TasksExtensionRequired,
    /// The protocol version is not one the shim speaks (`-32022`).
    #[error("Unsupported protocol version: {requested}")]
    UnsupportedVersion {
        /// What the client asked for.
        requested: String,
        /// What the shim accepts.
        supported: Vec<String>,
    },
    /// The upstream failed (exited, timed out, sent garbage).
    #[error("Upstream error: {0}")]
    Upstream(String),
    /// The upstream answered that it has no such task, for one the shim
    /// holds as still running: it restarted, or dropped the task early.
    /// Carries the upstream's own message.
    #[error(
        "Upstream error: the upstream no longer knows this task (it restarted, or dropped the task before its TTL): {0}"
    )]
    TaskLost(String),
    /// No resource has this URI (the reference servers' `resources/*`).
    #[error("Resource not found")]
    ResourceNotFound(String),
    /// A bug or resource limit inside the shim.
    #[error("Internal error: {0}")]
    Internal(String),
}

impl ShimError {
    /// The JSON-RPC code for this error.
    pub fn code(&self) -> i64 {
        use codes::*;
        match self {
            ShimError::Parse(_) => PARSE_ERROR,
            ShimError::InvalidRequest(_) | ShimError::Unauthorized(_) => INVALID_REQUEST,
            ShimError::MethodNotFound(_) => METHOD_NOT_FOUND,
            ShimError::InvalidParams(_)
            | ShimError::UnknownTask
            | ShimError::TaskTerminal(_)
            | ShimError::TaskCancelled => INVALID_PARAMS,
            ShimError::HeaderMismatch(_) => HEADER_MISMATCH,
            ShimError::TasksExtensionRequired => MISSING_CAPABILITY,
            ShimError::UnsupportedVersion { .. } => UNSUPPORTED_VERSION,
            ShimError::ResourceNotFound(_) => RESOURCE_NOT_FOUND,
            ShimError::Upstream(_) | ShimError::TaskLost(_) | ShimError::Internal(_) => {
                INTERNAL_ERROR
            }
        }
    }

    /// Structured `data` the spec requires for some codes.
    fn data(&self) -> Option<Value> {
        match self {
            ShimError::TasksExtensionRequired => Some(json!({
                "requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}
            })),
            ShimError::UnsupportedVersion {
                requested,
                supported,
            } => Some(json!({"supported": supported, "requested": requested})),
            ShimError::ResourceNotFound(uri) => Some(json!({"uri": uri})),
            _ => None,
        }
    }

    /// The wire form of this error.
    ///
    /// ```
    /// use mcp_tasks_shim::error::ShimError;
    /// let e = ShimError::TasksExtensionRequired.to_error_object();
    /// assert_eq!(e.code, -32021);
    /// assert!(e.data.unwrap()["requiredCapabilities"]["extensions"]
    ///     ["io.modelcontextprotocol/tasks"].is_object());
    /// ```
    pub fn to_error_object(&self) -> ErrorObject {
        ErrorObject {
            code: self.code(),
            message: self.to_string(),
            data: self.data(),
        }
    }

    /// The HTTP status a 2026-07-28 server answers this error with: the
    /// code's status ([`modern_http_status`]), except that a refused
    /// credential is 401 whatever code it carries.
    pub fn http_status(&self) -> u16 {
        match self {
            ShimError::Unauthorized(_) => 401,
            e => modern_http_status(e.code()),
        }
    }

    /// `-32022` for a version the shim does not speak.
    pub fn unsupported_version(requested: impl Into<String>) -> Self {
        ShimError::UnsupportedVersion {
            requested: requested.into(),
            supported: vec![MODERN_VERSION.to_owned()],
        }
    }
}

impl From<ShimError> for ErrorObject {
    fn from(e: ShimError) -> Self {
        e.to_error_object()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_follow_the_specs() {
        assert_eq!(ShimError::UnknownTask.code(), -32602);
        assert_eq!(ShimError::TaskTerminal("completed".into()).code(), -32602);
        assert_eq!(
            ShimError::MethodNotFound("tasks/list".into()).code(),
            -32601
        );
        assert_eq!(ShimError::HeaderMismatch("x".into()).code(), -32020);
        assert_eq!(ShimError::TasksExtensionRequired.code(), -32021);
        assert_eq!(ShimError::unsupported_version("1999-01-01").code(), -32022);
    }

    #[test]
    fn unsupported_version_carries_both_lists() {
        let e = ShimError::unsupported_version("1999-01-01").to_error_object();
        let d = e.data.unwrap();
        assert_eq!(d["requested"], "1999-01-01");
        assert_eq!(d["supported"][0], MODERN_VERSION);
    }

    #[test]
    fn unknown_task_message_leaks_nothing() {
        // Foreign and unknown ids must read the same: no id in the message.
        assert_eq!(
            ShimError::UnknownTask.to_error_object().message,
            "Failed to retrieve task: Task not found"
        );
    }
}
