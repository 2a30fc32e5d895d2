//! The notes translated records carry: why a message has no counterpart,
//! or how the shim emulates it.

use crate::revision::MODERN_VERSION;
use crate::wire::TaskStatus;
use crate::wire::legacy;
use crate::wire::modern::Payload;

/// A completed task must carry `result` in 2026-07-28; if the transcript
/// never shows its `tasks/result`, the translation cannot invent one.
pub(super) fn unknown_payload(t: &legacy::Task, payload: &Payload) -> Option<String> {
    (t.status == TaskStatus::Completed && *payload == Payload::None).then(|| {
        format!(
            "task {} completed but this transcript never shows its tasks/result: the shim fetches it \
             and inlines it as `result` ({MODERN_VERSION} requires it)",
            t.task_id
        )
    })
}

pub(super) fn client_only_note(method: &str) -> &'static str {
    match method {
        "ping" => "2026-07-28 has no ping: the shim answers it itself",
        "logging/setLevel" => {
            "2026-07-28 has no logging/setLevel: the shim remembers the level and sends it as \
             _meta io.modelcontextprotocol/logLevel on every later request"
        }
        "tasks/result" => {
            "2026-07-28 has no tasks/result: the shim polls tasks/get and answers with its inline \
             result or error; input requests come as inputRequests"
        }
        "tasks/list" => {
            "2026-07-28 has no tasks/list: the shim answers from its ledger of this session's tasks"
        }
        _ => {
            "2026-07-28 replaced resource subscriptions with subscriptions/listen {resourceSubscriptions}"
        }
    }
}

pub(super) fn answer_note(method: &str) -> String {
    match method {
        "tasks/result" => {
            "answered by the shim from the result/error that tasks/get carries inline".into()
        }
        "tasks/list" => {
            "answered by the shim from its ledger (current statuses, opaque cursors)".into()
        }
        m => format!("answered by the shim itself ({m} has no 2026-07-28 counterpart)"),
    }
}

/// The note on the answer to a request that became a note itself.
pub(super) fn noted_answer(method: &str) -> &'static str {
    match method {
        "tasks/update" => {
            "acknowledges tasks/update: its answers went to the server's requests above"
        }
        "subscriptions/listen" => "closes the listen stream: 2025-11-25 has no counterpart",
        "server/discover" => {
            "the server's answer to a later server/discover: the shim answers it from the session's initialize"
        }
        "tools/call" => "answers an MRTR retry: the shim resumes the call it holds open upstream",
        _ => "answers a request that has no 2025-11-25 counterpart",
    }
}

/// Why a modern client request has no 2025-11-25 form (`None`: it has one).
pub(super) fn modern_only_note(method: &str, is_retry: bool) -> Option<&'static str> {
    Some(match method {
        "subscriptions/listen" => {
            "2025-11-25 has no listen streams: the server pushes notifications/tasks/status \
             unasked; the shim forwards those for the subscribed taskIds"
        }
        "tasks/result" | "tasks/list" => {
            "2026-07-28 removed this method: the server answers -32601"
        }
        "ping"
        | "initialize"
        | "logging/setLevel"
        | "resources/subscribe"
        | "resources/unsubscribe" => {
            "not a 2026-07-28 method (a 2025-11-25 client's): a 2026-07-28 server answers -32601"
        }
        "tools/call" if is_retry => {
            "MRTR retry: 2025-11-25 has no counterpart; the shim answers the server→client \
             requests of the call it holds open upstream and resumes it"
        }
        _ => return None,
    })
}
