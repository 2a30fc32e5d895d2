//! The 2025-11-25 reference server against a real third-party peer: the
//! official TypeScript SDK client (`@modelcontextprotocol/sdk` 1.32.2, pinned
//! in `tests/peers/package.json`), driven by `tests/peers/legacy_client.mjs`.
//!
//! The script checks the task surface (create, poll, blocking result,
//! elicitation while `input_required`, list with cursors, cancel, double
//! cancel, unknown ids) and records the conversation; this test then
//! validates every recorded message against the 2025-11-25 schema.
//!
//! Needs Node and `tests/peers/node_modules`: run `scripts/test.sh`.
//! Set `MCP_SHIM_RECORD=1` to refresh `tests/corpus/recorded/ts-sdk-legacy.jsonl`.

mod support;

use std::path::Path;
use std::time::Duration;

use support::peers::{REFERENCE_PROFILE_CHECKS, read_transcript, require_peers, run_legacy_client};
use support::schema::{Revision, assert_conversation_valid};

/// The script bounds itself at 60 s; this is the backstop.
const TIMEOUT: Duration = Duration::from_secs(90);

#[test]
fn ts_sdk_client_drives_the_legacy_reference_server() {
    require_peers();
    let transcript = std::env::temp_dir().join(format!(
        "mcp-tasks-shim-ts-legacy-{}.jsonl",
        std::process::id()
    ));
    let bin = env!("CARGO_BIN_EXE_mcp-tasks-shim");
    let command = [bin, "reference-server", "--revision", "2025-11-25"];
    let run = run_legacy_client("reference", &transcript, &command, TIMEOUT);
    run.assert_checks(REFERENCE_PROFILE_CHECKS);

    let conversation = read_transcript(&transcript);
    if std::env::var_os("MCP_SHIM_RECORD").is_some() {
        let dest =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/recorded/ts-sdk-legacy.jsonl");
        std::fs::copy(&transcript, dest).expect("store the recorded transcript");
    }
    let _ = std::fs::remove_file(&transcript);
    assert!(
        conversation.len() > 50,
        "transcript too short: {}",
        conversation.len()
    );
    // Every message either side sent is valid 2025-11-25.
    assert_conversation_valid(
        conversation
            .iter()
            .map(|(dir, msg)| (Revision::Legacy, dir.as_str(), msg)),
    );
    // The elicitation sent on the tasks/result path names its task.
    assert!(conversation.iter().any(|(dir, m)| {
        dir == "s2c"
            && m["method"] == "elicitation/create"
            && m.pointer("/params/_meta/io.modelcontextprotocol~1related-task/taskId")
                .is_some()
    }));
}
