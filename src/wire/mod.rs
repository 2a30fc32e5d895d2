//! Typed task shapes of each revision, kept apart on purpose.
//!
//! [`legacy`] holds 2025-11-25 shapes, [`modern`] the 2026-07-28 core and
//! tasks-extension shapes. Nothing here mixes the two; conversions live in
//! [`crate::translate`]. Every struct keeps unknown members in `extra`, so a
//! field the shim does not understand survives a round trip.

pub mod legacy;
pub mod modern;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Unknown members of a wire object, kept verbatim.
pub type Extra = Map<String, Value>;

/// Task status: the same five values in both revisions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// The task is running.
    Working,
    /// The task waits for input from the client.
    InputRequired,
    /// The task ended with a result.
    Completed,
    /// The task ended with an error.
    Failed,
    /// The task was cancelled.
    Cancelled,
}

impl TaskStatus {
    /// Terminal states never change again.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Cancelled
        )
    }

    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Working => "working",
            TaskStatus::InputRequired => "input_required",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Cancelled => "cancelled",
        }
    }
}

impl std::fmt::Display for TaskStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Parses a typed shape out of a JSON value, naming the shape on failure.
pub fn from_value<T: serde::de::DeserializeOwned>(
    what: &str,
    v: &Value,
) -> Result<T, crate::error::ShimError> {
    T::deserialize(v).map_err(|e| crate::error::ShimError::InvalidParams(format!("{what}: {e}")))
}

/// Serialises a typed shape; our shapes always serialise.
pub fn to_value<T: Serialize>(t: &T) -> Value {
    serde_json::to_value(t).unwrap_or(Value::Null)
}
