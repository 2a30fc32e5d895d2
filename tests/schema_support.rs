//! Proves that the schema-validation support module can both pass and fail.

mod support;

use serde_json::{Value, json};
use support::schema::{
    Revision, SchemaFile, assert_valid, error_def, method_def, result_def, validate,
    validate_conversation, validate_def,
};

const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";

fn legacy_task(status: &str) -> Value {
    json!({
        "taskId": "t-1",
        "status": status,
        "createdAt": "2025-11-25T10:00:00Z",
        "lastUpdatedAt": "2025-11-25T10:00:00Z",
        "ttl": 60000,
        "pollInterval": 1000
    })
}

fn modern_task(status: &str) -> serde_json::Map<String, Value> {
    let Value::Object(map) = json!({
        "taskId": "t-1",
        "status": status,
        "createdAt": "2026-07-28T10:00:00Z",
        "lastUpdatedAt": "2026-07-28T10:00:00Z",
        "ttlMs": 60000,
        "pollIntervalMs": 1000
    }) else {
        unreachable!()
    };
    map
}

fn modern_meta() -> Value {
    json!({
        PROTOCOL_VERSION: "2026-07-28",
        CLIENT_CAPABILITIES: {"extensions": {"io.modelcontextprotocol/tasks": {}}},
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"}
    })
}

fn response(id: i64, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

#[track_caller]
fn expect_err(res: Result<(), String>, needles: &[&str]) -> String {
    let err = res.expect_err("validation should have failed");
    for needle in needles {
        assert!(err.contains(needle), "error lacks {needle:?}:\n{err}");
    }
    err
}

#[test]
fn legacy_create_task_result_passes() {
    let msg = response(1, json!({"task": legacy_task("working")}));
    assert_valid(Revision::Legacy, &msg, Some("tools/call"));
    assert_eq!(
        result_def(Revision::Legacy, Some("tools/call"), &msg["result"]),
        (SchemaFile::Legacy, "CreateTaskResult")
    );
}

#[test]
fn modern_create_task_result_without_result_type_fails() {
    let result = Value::Object(modern_task("working"));
    // As a tools/call response, an absent resultType means "complete", so the
    // result is checked as CallToolResult, which requires resultType.
    let err = expect_err(
        validate(
            Revision::Modern,
            &response(1, result.clone()),
            Some("tools/call"),
        ),
        &[
            "CallToolResult",
            "/result",
            "\"resultType\" is a required property",
        ],
    );
    eprintln!("{err}");
    // Against the extension's CreateTaskResult itself.
    expect_err(
        validate_def(SchemaFile::TasksExtension, "CreateTaskResult", &result),
        &["CreateTaskResult", "\"resultType\" is a required property"],
    );
    // With it, the same result passes.
    let mut ok = modern_task("working");
    ok.insert("resultType".into(), json!("task"));
    assert_valid(
        Revision::Modern,
        &response(1, Value::Object(ok)),
        Some("tools/call"),
    );
}

#[test]
fn legacy_task_with_ttl_ms_instead_of_ttl_fails() {
    let mut task = legacy_task("working");
    let obj = task.as_object_mut().unwrap();
    obj.remove("ttl");
    obj.insert("ttlMs".into(), json!(60000));
    let err = expect_err(
        validate(
            Revision::Legacy,
            &response(1, task.clone()),
            Some("tasks/get"),
        ),
        &[
            "GetTaskResult",
            "\"ttl\" is a required property",
            "at /result",
        ],
    );
    eprintln!("{err}");
    expect_err(
        validate(
            Revision::Legacy,
            &response(1, json!({"task": task})),
            Some("tools/call"),
        ),
        &[
            "CreateTaskResult",
            "at /result/task",
            "\"ttl\" is a required property",
        ],
    );
}

#[test]
fn modern_get_task_input_required_without_input_requests_fails() {
    let mut result = modern_task("input_required");
    result.insert("resultType".into(), json!("complete"));
    let err = expect_err(
        validate(
            Revision::Modern,
            &response(1, Value::Object(result.clone())),
            Some("tasks/get"),
        ),
        &["GetTaskResult", "\"inputRequests\" is a required property"],
    );
    eprintln!("{err}");
    result.insert(
        "inputRequests".into(),
        json!({"confirm-1": {
            "method": "elicitation/create",
            "params": {
                "mode": "form",
                "message": "Delete it?",
                "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}}
            }
        }}),
    );
    assert_valid(
        Revision::Modern,
        &response(1, Value::Object(result)),
        Some("tasks/get"),
    );
}

#[test]
fn missing_capability_error_requires_required_capabilities() {
    let bad = json!({"jsonrpc": "2.0", "id": 7, "error": {
        "code": -32021, "message": "tasks extension required", "data": {}
    }});
    let err = expect_err(
        validate(Revision::Modern, &bad, Some("tasks/get")),
        &[
            "MissingRequiredClientCapabilityError",
            "\"requiredCapabilities\" is a required property",
        ],
    );
    eprintln!("{err}");
    let no_data = json!({"jsonrpc": "2.0", "id": 7, "error": {"code": -32021, "message": "x"}});
    expect_err(
        validate(Revision::Modern, &no_data, None),
        &["\"data\" is a required property"],
    );
    let good = json!({"jsonrpc": "2.0", "id": 7, "error": {
        "code": -32021, "message": "tasks extension required",
        "data": {"requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}
    }});
    assert_valid(Revision::Modern, &good, Some("tasks/get"));
    // The same code means nothing special in 2025-11-25.
    assert_valid(Revision::Legacy, &bad, Some("tools/call"));
}

#[test]
fn modern_error_defs_are_derived_from_the_schema() {
    assert_eq!(
        error_def(Revision::Modern, -32020),
        Some((SchemaFile::ModernCore, "HeaderMismatchError"))
    );
    assert_eq!(
        error_def(Revision::Modern, -32021),
        Some((
            SchemaFile::ModernCore,
            "MissingRequiredClientCapabilityError"
        ))
    );
    assert_eq!(
        error_def(Revision::Modern, -32022),
        Some((SchemaFile::ModernCore, "UnsupportedProtocolVersionError"))
    );
    assert_eq!(
        error_def(Revision::Legacy, -32042),
        Some((SchemaFile::Legacy, "URLElicitationRequiredError"))
    );
    assert_eq!(error_def(Revision::Modern, -32602), None);
    let unsupported = json!({"jsonrpc": "2.0", "id": 1, "error": {
        "code": -32022, "message": "unsupported", "data": {"supported": ["2026-07-28"]}
    }});
    expect_err(
        validate(Revision::Modern, &unsupported, None),
        &["\"requested\" is a required property"],
    );
}

#[test]
fn envelope_without_jsonrpc_fails() {
    for rev in [Revision::Legacy, Revision::Modern] {
        let request = json!({"id": 1, "method": "tools/list", "params": {}});
        expect_err(
            validate(rev, &request, None),
            &["JSONRPCRequest", "\"jsonrpc\" is a required property"],
        );
        let resp = json!({"id": 1, "result": {}});
        expect_err(
            validate(rev, &resp, None),
            &[
                "JSONRPCResultResponse",
                "\"jsonrpc\" is a required property",
            ],
        );
        let note = json!({"method": "notifications/unknown"});
        expect_err(validate(rev, &note, None), &["JSONRPCNotification"]);
        expect_err(
            validate(rev, &json!({"jsonrpc": "2.0", "id": 1}), None),
            &["JSONRPCMessage"],
        );
        let wrong = json!({"jsonrpc": "1.0", "id": 1, "method": "x/y"});
        expect_err(validate(rev, &wrong, None), &["\"2.0\" was expected"]);
    }
}

#[test]
fn legacy_conversation_with_task_creation_validates() {
    let conversation = vec![
        (
            Revision::Legacy,
            "c2s",
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": "slow_compute", "arguments": {"seconds": 1}, "task": {"ttl": 60000}}}),
        ),
        (
            Revision::Legacy,
            "s2c",
            response(1, json!({"task": legacy_task("working")})),
        ),
        (
            Revision::Legacy,
            "s2c",
            json!({"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": legacy_task("completed")}),
        ),
        (
            Revision::Legacy,
            "c2s",
            json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/result", "params": {"taskId": "t-1"}}),
        ),
        (
            Revision::Legacy,
            "s2c",
            response(
                2,
                json!({"content": [{"type": "text", "text": "done"}],
                               "_meta": {"io.modelcontextprotocol/related-task": {"taskId": "t-1"}}}),
            ),
        ),
    ];
    validate_conversation(conversation.iter().map(|(r, d, m)| (*r, *d, m))).unwrap();
    validate_conversation(conversation).unwrap();
}

#[test]
fn modern_conversation_with_task_creation_validates() {
    let mut created = modern_task("working");
    created.insert("resultType".into(), json!("task"));
    let mut done = modern_task("completed");
    done.insert("resultType".into(), json!("complete"));
    done.insert(
        "result".into(),
        json!({"content": [{"type": "text", "text": "ok"}], "isError": false}),
    );
    let conversation = [
        (
            Revision::Modern,
            "c2s",
            json!({"jsonrpc": "2.0", "id": "a", "method": "tools/call",
                   "params": {"name": "slow_compute", "arguments": {}, "_meta": modern_meta()}}),
        ),
        (
            Revision::Modern,
            "s2c",
            json!({"jsonrpc": "2.0", "id": "a", "result": created}),
        ),
        (
            Revision::Modern,
            "c2s",
            json!({"jsonrpc": "2.0", "id": "b", "method": "tasks/get",
                   "params": {"taskId": "t-1", "_meta": modern_meta()}}),
        ),
        (
            Revision::Modern,
            "s2c",
            json!({"jsonrpc": "2.0", "id": "b", "result": done}),
        ),
        (
            Revision::Modern,
            "c2s",
            json!({"jsonrpc": "2.0", "id": "c", "method": "tasks/cancel",
                   "params": {"taskId": "t-1", "_meta": modern_meta()}}),
        ),
        (
            Revision::Modern,
            "s2c",
            json!({"jsonrpc": "2.0", "id": "c", "result": {"resultType": "complete"}}),
        ),
    ];
    validate_conversation(conversation).unwrap();
}

#[test]
fn conversation_checks_results_against_the_answered_method() {
    // The same `{task}` body answers tasks/get here, where it is no Task.
    let conversation = [
        (
            Revision::Legacy,
            "c2s",
            json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"taskId": "t-1"}}),
        ),
        (
            Revision::Legacy,
            "s2c",
            response(1, json!({"task": legacy_task("working")})),
        ),
    ];
    let err = expect_err(
        validate_conversation(conversation),
        &["message #1", "GetTaskResult"],
    );
    eprintln!("{err}");

    // A response nobody asked for, and a direction typo.
    let stray = [
        (Revision::Legacy, "s2c", response(9, json!({}))),
        (
            Revision::Legacy,
            "up",
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        ),
    ];
    expect_err(
        validate_conversation(stray),
        &["answers no pending c2s request", "direction \"up\""],
    );

    // Ids are per direction: a server→client request may reuse a client id.
    let crossing = [
        (
            Revision::Legacy,
            "c2s",
            json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/result", "params": {"taskId": "t"}}),
        ),
        (
            Revision::Legacy,
            "s2c",
            json!({"jsonrpc": "2.0", "id": 1, "method": "elicitation/create", "params": {
                "mode": "form", "message": "ok?", "requestedSchema": {"type": "object", "properties": {}},
                "_meta": {"io.modelcontextprotocol/related-task": {"taskId": "t"}}}}),
        ),
        (
            Revision::Legacy,
            "c2s",
            response(1, json!({"action": "accept", "content": {}})),
        ),
        (
            Revision::Legacy,
            "s2c",
            response(1, json!({"content": [], "isError": true})),
        ),
    ];
    validate_conversation(crossing).unwrap();
}

#[test]
fn modern_get_task_with_result_type_task_fails() {
    // The extension schema pins GetTaskResult.resultType to "complete"
    // (allOf member #2: {"const": "complete"}), although the prose shows "task".
    let mut result = modern_task("working");
    result.insert("resultType".into(), json!("task"));
    let err = expect_err(
        validate(
            Revision::Modern,
            &response(1, Value::Object(result.clone())),
            Some("tasks/get"),
        ),
        &[
            "GetTaskResult",
            "/result/resultType",
            "\"complete\" was expected",
        ],
    );
    eprintln!("{err}");
    result.insert("resultType".into(), json!("complete"));
    assert_valid(
        Revision::Modern,
        &response(1, Value::Object(result)),
        Some("tasks/get"),
    );
}

#[test]
fn method_table_is_derived_from_the_schemas() {
    let cases = [
        (
            Revision::Legacy,
            "tools/call",
            SchemaFile::Legacy,
            "CallToolRequest",
        ),
        (
            Revision::Legacy,
            "tasks/get",
            SchemaFile::Legacy,
            "GetTaskRequest",
        ),
        (
            Revision::Legacy,
            "tasks/result",
            SchemaFile::Legacy,
            "GetTaskPayloadRequest",
        ),
        (
            Revision::Legacy,
            "tasks/list",
            SchemaFile::Legacy,
            "ListTasksRequest",
        ),
        (
            Revision::Legacy,
            "tasks/cancel",
            SchemaFile::Legacy,
            "CancelTaskRequest",
        ),
        (
            Revision::Legacy,
            "notifications/tasks/status",
            SchemaFile::Legacy,
            "TaskStatusNotification",
        ),
        (
            Revision::Legacy,
            "elicitation/create",
            SchemaFile::Legacy,
            "ElicitRequest",
        ),
        (
            Revision::Legacy,
            "initialize",
            SchemaFile::Legacy,
            "InitializeRequest",
        ),
        (
            Revision::Modern,
            "tools/call",
            SchemaFile::ModernCore,
            "CallToolRequest",
        ),
        (
            Revision::Modern,
            "server/discover",
            SchemaFile::ModernCore,
            "DiscoverRequest",
        ),
        (
            Revision::Modern,
            "subscriptions/listen",
            SchemaFile::ModernCore,
            "SubscriptionsListenRequest",
        ),
        (
            Revision::Modern,
            "notifications/cancelled",
            SchemaFile::ModernCore,
            "CancelledNotification",
        ),
        (
            Revision::Modern,
            "tasks/get",
            SchemaFile::TasksExtension,
            "GetTaskRequest",
        ),
        (
            Revision::Modern,
            "tasks/update",
            SchemaFile::TasksExtension,
            "UpdateTaskRequest",
        ),
        (
            Revision::Modern,
            "tasks/cancel",
            SchemaFile::TasksExtension,
            "CancelTaskRequest",
        ),
        (
            Revision::Modern,
            "notifications/tasks",
            SchemaFile::TasksExtension,
            "TaskStatusNotification",
        ),
    ];
    for (rev, method, file, def) in cases {
        assert_eq!(method_def(rev, method), Some((file, def)), "{rev} {method}");
    }
    // Not JSON-RPC messages in 2026-07-28 (only InputRequest shapes), or gone.
    for method in [
        "elicitation/create",
        "sampling/createMessage",
        "roots/list",
        "tasks/result",
        "tasks/list",
        "initialize",
    ] {
        assert_eq!(method_def(Revision::Modern, method), None, "{method}");
    }
    let discover = json!({"resultType": "complete"});
    assert_eq!(
        result_def(Revision::Modern, Some("server/discover"), &discover),
        (SchemaFile::ModernCore, "DiscoverResult")
    );
    assert_eq!(
        result_def(
            Revision::Modern,
            Some("tools/call"),
            &json!({"resultType": "input_required"})
        ),
        (SchemaFile::ModernCore, "InputRequiredResult")
    );
    assert_eq!(
        result_def(Revision::Modern, Some("tasks/update"), &discover),
        (SchemaFile::TasksExtension, "UpdateTaskResult")
    );
    assert_eq!(
        result_def(Revision::Modern, Some("ping"), &discover),
        (SchemaFile::ModernCore, "Result")
    );
    assert_eq!(
        result_def(Revision::Legacy, Some("ping"), &json!({})),
        (SchemaFile::Legacy, "Result")
    );
}

#[test]
fn requests_and_notifications_are_checked_by_method() {
    // Legacy initialize without clientInfo.
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                      "params": {"protocolVersion": "2025-11-25", "capabilities": {}}});
    expect_err(
        validate(Revision::Legacy, &init, None),
        &["InitializeRequest", "\"clientInfo\" is a required property"],
    );

    // Modern core request without _meta.
    let call =
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "greet"}});
    expect_err(
        validate(Revision::Modern, &call, None),
        &["CallToolRequest", "\"_meta\" is a required property"],
    );
    // Modern extension request without _meta: the core RequestParams catches it.
    let update = json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/update",
                        "params": {"taskId": "t-1", "inputResponses": {"k": {"action": "accept", "content": {}}}}});
    expect_err(
        validate(Revision::Modern, &update, None),
        &["RequestParams", "at /params"],
    );
    let mut update = update;
    update["params"]["_meta"] = modern_meta();
    assert_valid(Revision::Modern, &update, None);

    // Modern discover, its result, and a task notification on a listen stream.
    let discover = json!({"jsonrpc": "2.0", "id": 3, "method": "server/discover", "params": {"_meta": modern_meta()}});
    assert_valid(Revision::Modern, &discover, None);
    let discovered = response(
        3,
        json!({
            "resultType": "complete", "supportedVersions": ["2026-07-28"],
            "capabilities": {"tools": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}},
            "ttlMs": 0, "cacheScope": "public",
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "shim", "version": "0.1.0"}}
        }),
    );
    if let Err(e) = validate(Revision::Modern, &discovered, Some("server/discover")) {
        panic!("{e}");
    }
    let mut params = modern_task("working");
    params.insert(
        "_meta".into(),
        json!({"io.modelcontextprotocol/subscriptionId": 5}),
    );
    let note = json!({"jsonrpc": "2.0", "method": "notifications/tasks", "params": params});
    assert_valid(Revision::Modern, &note, None);
    // The legacy status notification carries a legacy Task: ttlMs is wrong there.
    let legacy_note =
        json!({"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": params});
    expect_err(
        validate(Revision::Legacy, &legacy_note, None),
        &["TaskStatusNotification", "\"ttl\""],
    );

    // Unknown methods: envelope only.
    assert_valid(
        Revision::Modern,
        &json!({"jsonrpc": "2.0", "id": 4, "method": "x/custom"}),
        None,
    );
}

#[test]
fn modern_results_require_result_type() {
    expect_err(
        validate(
            Revision::Modern,
            &response(1, json!({"tools": []})),
            Some("tools/list"),
        ),
        &["ListToolsResult", "\"resultType\" is a required property"],
    );
    expect_err(
        validate(Revision::Modern, &response(1, json!({})), None),
        &["Result", "\"resultType\""],
    );
    assert_valid(Revision::Legacy, &response(1, json!({})), None);
}

#[test]
fn repeated_validation_is_cached() {
    let msg = response(1, json!({"task": legacy_task("working")}));
    let start = std::time::Instant::now();
    for _ in 0..2000 {
        assert_valid(Revision::Legacy, &msg, Some("tools/call"));
    }
    let elapsed = start.elapsed();
    eprintln!("2000 validations (first includes compilation): {elapsed:?}");
    // Generous bound; without the cache each call would recompile the schema.
    assert!(elapsed < std::time::Duration::from_secs(20), "{elapsed:?}");
}

/// The schemas the crate bundles (what `testing::schema` validates with)
/// are the official files beside the checkout, byte for byte.
#[test]
fn the_bundled_schemas_are_the_official_ones() {
    let shared = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/schemas");
    if !shared.is_dir() {
        eprintln!(
            "no {}: nothing to compare the bundled schemas with",
            shared.display()
        );
        return;
    }
    for file in SchemaFile::ALL {
        let official =
            std::fs::read_to_string(shared.join(file.file_name())).expect("official schema");
        assert!(
            official == mcp_tasks_shim::testing::schema::bundled_text(file),
            "{file}: the bundled copy in tests/schemas differs from ../shared/schemas"
        );
    }
}
