//! The pure translator: one function per row of the mapping, each direction.
//!
//! Nothing in here does IO, reads a clock or draws randomness: ids and
//! timestamps come in as arguments, so the bridge engines and the
//! `translate` command share these functions unchanged.
//!
//! Naming: `*_to_legacy` turns a 2026-07-28 shape into its 2025-11-25
//! counterpart, `*_to_modern` the reverse.
//!
//! | row | legacy → modern | modern → legacy |
//! |---|---|---|
//! | task fields | [`task::task_to_modern`] | [`task::task_to_legacy`] |
//! | creation result | [`task::create_result_to_modern`] | [`task::create_result_to_legacy`] |
//! | `tasks/get` | [`task::get_result_to_modern`] | [`task::get_result_to_legacy`] |
//! | `tasks/result` payload | [`task::strip_related_task`] | [`task::task_result_to_legacy`] |
//! | `tasks/cancel` | [`task::cancel_result_to_modern`] | [`task::cancelled_view`] |
//! | `tasks/list` | (no counterpart) | [`task::list_page`] |
//! | `tools/list` | [`tools::tools_list_to_modern`] | [`tools::tools_list_to_legacy`] |
//! | `tools/call` params | [`tools::call_params_to_modern`] | [`tools::call_params_to_legacy`] |
//! | request `_meta` | [`session::request_to_modern`] | [`session::request_to_legacy`] |
//! | `initialize` ↔ `server/discover` | [`session::initialize_to_discover`] | [`session::discover_to_initialize`] |
//! | results in general | [`session::result_to_modern`] | [`session::result_to_legacy`] |
//! | a plain result's text | (no counterpart) | [`raw::plain_result_to_legacy`] |
//! | mid-task input | [`input::legacy_request_to_input`] | [`input::input_request_to_legacy`] |
//! | status notifications | [`notify::status_to_modern`] | [`notify::status_to_legacy`] |
//! | whole transcripts | [`transcript::translate_transcript`] | [`transcript::translate_transcript`] |

pub mod input;
pub mod notify;
pub mod raw;
pub mod session;
pub mod task;
pub mod tools;
pub mod transcript;

use serde_json::{Map, Value};

/// `value` as an object, or an `-32602` naming `what`.
pub(crate) fn as_object<'a>(
    what: &str,
    value: &'a Value,
) -> Result<&'a Map<String, Value>, crate::error::ShimError> {
    value
        .as_object()
        .ok_or_else(|| crate::error::ShimError::InvalidParams(format!("{what} must be an object")))
}

/// The `_meta` object inside `obj`, created if missing (or replaced if it
/// was not an object).
pub(crate) fn meta_mut(obj: &mut Map<String, Value>) -> &mut Map<String, Value> {
    // Looked up before `entry`, which would allocate the key on every call
    // even when `_meta` is there (the common case on the hot path).
    if !matches!(obj.get("_meta"), Some(Value::Object(_))) {
        // Replaces in place when present, so the member keeps its position.
        obj.insert("_meta".into(), Value::Object(Map::new()));
    }
    match obj.get_mut("_meta") {
        Some(Value::Object(m)) => m,
        _ => unreachable!("just made it an object"),
    }
}

/// Removes `key` from `obj._meta`, and `_meta` itself if that emptied it.
pub(crate) fn remove_meta_key(obj: &mut Map<String, Value>, key: &str) -> Option<Value> {
    let meta = obj.get_mut("_meta")?.as_object_mut()?;
    let removed = meta.remove(key);
    if meta.is_empty() {
        obj.remove("_meta");
    }
    removed
}
