//! Validates JSON-RPC messages against the official MCP JSON Schemas of the
//! revision they are emitted in.
//!
//! Three schema files are used (all definitions live under `$defs`):
//! - [`SchemaFile::Legacy`] is `mcp-2025-11-25.schema.json`,
//! - [`SchemaFile::ModernCore`] is `mcp-2026-07-28.schema.json`,
//! - [`SchemaFile::TasksExtension`] is `tasks-extension-2026-07-28.schema.json`.
//!
//! They are bundled in the crate (copies of the official files, kept equal
//! to them by the project's tests). Each file is parsed once; each
//! definition is compiled once (on first use) and cached for the process.
//!
//! ```
//! use mcp_tasks_shim::revision::Revision;
//! use mcp_tasks_shim::testing::schema::validate;
//! let ping = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
//! assert!(validate(Revision::Legacy, &ping, None).is_ok());
//! assert!(validate(Revision::Legacy, &serde_json::json!({"id": 1}), None).is_err());
//! ```
//!
//! # How the definition is chosen
//!
//! Every message is first checked against its envelope definition in the
//! revision's core file (`JSONRPCRequest`, `JSONRPCNotification`,
//! `JSONRPCResultResponse`, `JSONRPCErrorResponse`; a message that is none of
//! these is checked against `JSONRPCMessage`). Then:
//!
//! - **Requests / notifications**: by `method`, through a table derived from
//!   the schemas (every def whose `properties.method.const`, possibly inside
//!   `allOf`, is a string and which is a JSON-RPC message). Modern methods come
//!   from the core file, then from the tasks extension (`tasks/get`,
//!   `tasks/update`, `tasks/cancel`, `notifications/tasks`). A modern
//!   extension request's `params` is additionally checked against the core
//!   `RequestParams` (the core requires `_meta` on every request; the
//!   extension's request types omit it). Unknown methods: envelope only.
//! - **Result responses**, by the answered method (see [`result_def`]).
//! - **Error responses**: `JSONRPCErrorResponse`, plus the specific error
//!   def whose `error.code` const matches (derived from the schemas: modern
//!   -32020/-32021/-32022, legacy -32042).
//!
//! Format assertions (`format: uri`, …) are not checked (the 2020-12 default).

use std::borrow::Borrow;
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

use jsonschema::error::ValidationErrorKind;
use jsonschema::{ValidationError, Validator};
use serde_json::{Value, json};

pub use crate::revision::Revision;

const DRAFT_2020_12: &str = "https://json-schema.org/draft/2020-12/schema";
/// Above this many lines, a report for one definition is cut short.
const MAX_LINES_PER_DEF: usize = 60;
/// `anyOf` / `oneOf` branches are expanded this many levels deep.
const MAX_BRANCH_DEPTH: usize = 3;

/// One of the three official schema files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SchemaFile {
    /// MCP 2025-11-25.
    Legacy,
    /// MCP 2026-07-28, core.
    ModernCore,
    /// The `io.modelcontextprotocol/tasks` extension for 2026-07-28.
    TasksExtension,
}

impl SchemaFile {
    /// All files.
    pub const ALL: [SchemaFile; 3] = [
        SchemaFile::Legacy,
        SchemaFile::ModernCore,
        SchemaFile::TasksExtension,
    ];

    /// The file name inside the schema directory.
    pub fn file_name(self) -> &'static str {
        match self {
            SchemaFile::Legacy => "mcp-2025-11-25.schema.json",
            SchemaFile::ModernCore => "mcp-2026-07-28.schema.json",
            SchemaFile::TasksExtension => "tasks-extension-2026-07-28.schema.json",
        }
    }

    /// The core file of a revision.
    pub fn core(rev: Revision) -> SchemaFile {
        match rev {
            Revision::Legacy => SchemaFile::Legacy,
            Revision::Modern => SchemaFile::ModernCore,
        }
    }

    fn index(self) -> usize {
        match self {
            SchemaFile::Legacy => 0,
            SchemaFile::ModernCore => 1,
            SchemaFile::TasksExtension => 2,
        }
    }
}

impl fmt::Display for SchemaFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SchemaFile::Legacy => "2025-11-25 schema",
            SchemaFile::ModernCore => "2026-07-28 core schema",
            SchemaFile::TasksExtension => "2026-07-28 tasks-extension schema",
        })
    }
}

/// A definition: the file it lives in and its name under `$defs`.
pub type Def = (SchemaFile, &'static str);

// ---------------------------------------------------------------------------
// Schema documents and the tables derived from them
// ---------------------------------------------------------------------------

/// One parsed schema file and the tables derived from it.
struct Doc {
    /// The file's `$defs` object.
    defs: serde_json::Map<String, Value>,
    /// Method → JSON-RPC request/notification def, from `method` consts.
    methods: HashMap<String, String>,
    /// Error code → error-response def, from `error.code` consts.
    error_codes: HashMap<i64, String>,
}

/// The bundled text of each schema file.
fn bundled(file: SchemaFile) -> &'static str {
    match file {
        SchemaFile::Legacy => include_str!("../../tests/schemas/mcp-2025-11-25.schema.json"),
        SchemaFile::ModernCore => include_str!("../../tests/schemas/mcp-2026-07-28.schema.json"),
        SchemaFile::TasksExtension => {
            include_str!("../../tests/schemas/tasks-extension-2026-07-28.schema.json")
        }
    }
}

/// The bundled text of `file` (for a test that checks it against the
/// official copy).
pub fn bundled_text(file: SchemaFile) -> &'static str {
    bundled(file)
}

fn doc(file: SchemaFile) -> &'static Doc {
    static DOCS: [OnceLock<Doc>; 3] = [OnceLock::new(), OnceLock::new(), OnceLock::new()];
    DOCS[file.index()].get_or_init(|| load(file))
}

fn load(file: SchemaFile) -> Doc {
    // Bundled data, checked by the crate's own tests: a panic here is a
    // broken build, not bad input.
    let mut root: Value = serde_json::from_str(bundled(file))
        .unwrap_or_else(|e| panic!("the bundled {file} is not JSON: {e}"));
    let defs = match root.get_mut("$defs").map(Value::take) {
        Some(Value::Object(defs)) => defs,
        _ => panic!("the bundled {file} has no `$defs` object"),
    };

    // method -> candidate defs
    let mut candidates: HashMap<String, Vec<String>> = HashMap::new();
    let mut error_codes = HashMap::new();
    for (name, def) in &defs {
        if let Some(method) = method_const(def)
            && is_jsonrpc_message(def)
        {
            candidates
                .entry(method.to_owned())
                .or_default()
                .push(name.clone());
        }
        if let Some(code) = def
            .pointer("/properties/error")
            .and_then(|e| const_in(e, "code"))
            .and_then(Value::as_i64)
            && let Some(previous) = error_codes.insert(code, name.clone())
        {
            panic!("{file}: error code {code} is defined by both {previous} and {name}");
        }
    }
    let methods = candidates
        .into_iter()
        .map(|(method, mut names)| {
            // A one-member union (modern `ClientNotification` is the inlined
            // `CancelledNotification`) carries the same const: prefer the
            // specific def over the Client*/Server* union name.
            if names.len() > 1 {
                names.retain(|n| !n.starts_with("Client") && !n.starts_with("Server"));
            }
            names.sort();
            assert!(
                names.len() == 1,
                "{file}: method {method} is claimed by several defs: {names:?}"
            );
            (method, names.pop().expect("one name"))
        })
        .collect();

    Doc {
        defs,
        methods,
        error_codes,
    }
}

/// `properties.<prop>.const` of a schema, looking through `allOf` members
/// (not through `$ref`).
fn const_in<'a>(schema: &'a Value, prop: &str) -> Option<&'a Value> {
    if let Some(c) = schema
        .get("properties")
        .and_then(|p| p.get(prop))
        .and_then(|p| p.get("const"))
    {
        return Some(c);
    }
    schema
        .get("allOf")?
        .as_array()?
        .iter()
        .find_map(|member| const_in(member, prop))
}

fn method_const(def: &Value) -> Option<&str> {
    const_in(def, "method")?.as_str()
}

/// A JSON-RPC request or notification, as opposed to the modern `InputRequest`
/// shapes (`{method, params}` without `jsonrpc`/`id`) that reuse method names.
fn is_jsonrpc_message(def: &Value) -> bool {
    let has_jsonrpc = def
        .get("properties")
        .and_then(|p| p.get("jsonrpc"))
        .is_some();
    let wraps_envelope = def
        .get("allOf")
        .and_then(Value::as_array)
        .is_some_and(|members| {
            members.iter().any(|m| {
                matches!(
                    m.get("$ref").and_then(Value::as_str),
                    Some("#/$defs/JSONRPCRequest" | "#/$defs/JSONRPCNotification")
                )
            })
        });
    has_jsonrpc || wraps_envelope
}

/// Resolves a def name to `'static` storage, if the file defines it.
fn def_in(file: SchemaFile, name: &str) -> Option<Def> {
    doc(file)
        .defs
        .get_key_value(name)
        .map(|(k, _)| (file, k.as_str()))
}

fn must_def(file: SchemaFile, name: &str) -> Def {
    def_in(file, name).unwrap_or_else(|| panic!("{file} has no def {name}"))
}

// ---------------------------------------------------------------------------
// Compiled validators
// ---------------------------------------------------------------------------

fn validator(def: Def) -> Arc<Validator> {
    type Slot = Arc<OnceLock<Arc<Validator>>>;
    static CACHE: OnceLock<Mutex<HashMap<Def, Slot>>> = OnceLock::new();
    let slot = {
        let mut cache = CACHE
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        cache.entry(def).or_default().clone()
    };
    // Compile outside the map lock: other defs compile in parallel, and a
    // second thread asking for the same def waits for the first.
    slot.get_or_init(|| Arc::new(compile(def))).clone()
}

fn compile(def @ (file, name): Def) -> Validator {
    let schema = json!({
        "$schema": DRAFT_2020_12,
        "$defs": doc(file).defs,
        "$ref": format!("#/$defs/{name}"),
    });
    jsonschema::draft202012::options()
        .build(&schema)
        .unwrap_or_else(|e| panic!("cannot compile {} ({}): {e}", def.1, def.0))
}

/// Validates `instance` against one def; `prefix` is the JSON pointer of
/// `instance` inside the message, used in the report. Returns report lines.
fn check(def: Def, instance: &Value, prefix: &str) -> Vec<String> {
    let validator = validator(def);
    let mut lines = Vec::new();
    for err in validator.iter_errors(instance) {
        render(&err, prefix, 1, &mut lines);
    }
    if lines.is_empty() {
        return lines;
    }
    if lines.len() > MAX_LINES_PER_DEF {
        let cut = lines.len() - MAX_LINES_PER_DEF;
        lines.truncate(MAX_LINES_PER_DEF);
        lines.push(format!("    … {cut} more lines"));
    }
    let at = if prefix.is_empty() {
        "the message"
    } else {
        prefix
    };
    lines.insert(0, format!("- {} ({}) rejects {at}:", def.1, def.0));
    lines
}

fn render(err: &ValidationError<'_>, prefix: &str, depth: usize, out: &mut Vec<String>) {
    let indent = "  ".repeat(depth);
    let path = format!("{prefix}{}", err.instance_path());
    let path = if path.is_empty() {
        "/".to_owned()
    } else {
        path
    };
    out.push(format!(
        "{indent}at {path}: {} [schema {}]",
        err.masked_with(short_json(err.instance())),
        err.schema_path()
    ));
    if let ValidationErrorKind::AnyOf { context } | ValidationErrorKind::OneOfNotValid { context } =
        err.kind()
        && depth < MAX_BRANCH_DEPTH * 2
    {
        for (i, branch) in context.iter().enumerate() {
            out.push(format!("{indent}  option {i}:"));
            for e in branch {
                render(e, prefix, depth + 2, out);
            }
        }
    }
}

fn short_json(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() <= 80 {
        s
    } else {
        format!("{}…", s.chars().take(77).collect::<String>())
    }
}

// ---------------------------------------------------------------------------
// Choosing the definition
// ---------------------------------------------------------------------------

/// The JSON-RPC request/notification def for `method` in `rev`, derived from
/// the schemas' `method` consts; `None` for a method the revision does not
/// define as a JSON-RPC message.
pub fn method_def(rev: Revision, method: &str) -> Option<Def> {
    let files: &[SchemaFile] = match rev {
        Revision::Legacy => &[SchemaFile::Legacy],
        Revision::Modern => &[SchemaFile::ModernCore, SchemaFile::TasksExtension],
    };
    files.iter().find_map(|&file| {
        doc(file)
            .methods
            .get(method)
            .map(|name| must_def(file, name))
    })
}

/// The def a result answering `answered_method` is validated against.
///
/// Legacy: `tools/call`, `sampling/createMessage`, `elicitation/create` with a
/// `task` member → `CreateTaskResult` (the 2025 unions omit it);
/// `tasks/result` → the original result, guessed by shape
/// (`model` → `CreateMessageResult`, `action` → `ElicitResult`,
/// `content` → `CallToolResult`, else `Result`).
///
/// Modern: `tools/call` with `resultType: "task"` → extension
/// `CreateTaskResult`; `resultType: "input_required"` on a method whose params
/// accept `inputResponses` (tools/call, prompts/get, resources/read) → core
/// `InputRequiredResult`.
///
/// Otherwise, both: the method's request def `FooRequest` → `FooResult` in
/// the same file when it exists (`tasks/get` → `GetTaskResult`, `initialize`
/// → `InitializeResult`, `server/discover` → `DiscoverResult`, …), else the
/// revision's core `Result` (which requires `resultType` in modern).
pub fn result_def(rev: Revision, answered_method: Option<&str>, result: &Value) -> Def {
    let core = SchemaFile::core(rev);
    let Some(method) = answered_method else {
        return must_def(core, "Result");
    };
    let has = |key: &str| result.get(key).is_some();
    match rev {
        Revision::Legacy => match method {
            "tools/call" | "sampling/createMessage" | "elicitation/create" if has("task") => {
                return must_def(core, "CreateTaskResult");
            }
            "tasks/result" => {
                let name = if has("model") {
                    "CreateMessageResult"
                } else if has("action") {
                    "ElicitResult"
                } else if has("content") {
                    "CallToolResult"
                } else {
                    "Result"
                };
                return must_def(core, name);
            }
            _ => {}
        },
        Revision::Modern => match result.get("resultType").and_then(Value::as_str) {
            Some("task") if method == "tools/call" => {
                return must_def(SchemaFile::TasksExtension, "CreateTaskResult");
            }
            Some("input_required") if accepts_input_responses(method) => {
                return must_def(core, "InputRequiredResult");
            }
            _ => {}
        },
    }
    method_def(rev, method)
        .and_then(|(file, request)| {
            let base = request.strip_suffix("Request")?;
            def_in(file, &format!("{base}Result"))
        })
        .unwrap_or_else(|| must_def(core, "Result"))
}

/// Modern core requests whose params take `inputResponses` (MRTR retries) may
/// be answered with `InputRequiredResult`.
fn accepts_input_responses(method: &str) -> bool {
    let Some((file, request)) = method_def(Revision::Modern, method) else {
        return false;
    };
    let defs = &doc(file).defs;
    let Some(params) = defs[request].pointer("/properties/params") else {
        return false;
    };
    let params = match params.get("$ref").and_then(Value::as_str) {
        Some(r) => match r.strip_prefix("#/$defs/").and_then(|n| defs.get(n)) {
            Some(target) => target,
            None => return false,
        },
        None => params,
    };
    params.pointer("/properties/inputResponses").is_some()
}

/// The error-response def for an error code in `rev`, if the schema has one.
pub fn error_def(rev: Revision, code: i64) -> Option<Def> {
    let file = SchemaFile::core(rev);
    doc(file)
        .error_codes
        .get(&code)
        .map(|name| must_def(file, name))
}

// ---------------------------------------------------------------------------
// Public entry points
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Request,
    Notification,
    Result,
    Error,
    Unknown,
}

fn kind(msg: &Value) -> Kind {
    let Some(obj) = msg.as_object() else {
        return Kind::Unknown;
    };
    if obj.contains_key("method") {
        if obj.contains_key("id") {
            Kind::Request
        } else {
            Kind::Notification
        }
    } else if obj.contains_key("result") {
        Kind::Result
    } else if obj.contains_key("error") {
        Kind::Error
    } else {
        Kind::Unknown
    }
}

/// Validates `instance` against one def of `file` only (no envelope, no dispatch).
pub fn validate_def(file: SchemaFile, def: &str, instance: &Value) -> Result<(), String> {
    let def = def_in(file, def).ok_or_else(|| format!("{file} has no def {def}"))?;
    let lines = check(def, instance, "");
    if lines.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{}\ninstance: {}",
            lines.join("\n"),
            short_json(instance)
        ))
    }
}

/// What one message was checked against, and what each check refused.
#[derive(Default)]
struct Checks {
    lines: Vec<String>,
    checked: Vec<&'static str>,
}

impl Checks {
    fn run(&mut self, def: Def, instance: &Value, prefix: &str) {
        self.checked.push(def.1);
        self.lines.extend(check(def, instance, prefix));
    }
}

/// Validates one message. `answered_method` is the method of the request a
/// response answers (None for requests/notifications).
pub fn validate(rev: Revision, msg: &Value, answered_method: Option<&str>) -> Result<(), String> {
    let core = SchemaFile::core(rev);
    let kind = kind(msg);
    let method = msg.get("method").and_then(Value::as_str);
    let mut checks = Checks::default();
    match kind {
        Kind::Request | Kind::Notification => check_call(&mut checks, rev, kind, msg),
        Kind::Result => {
            checks.run(must_def(core, "JSONRPCResultResponse"), msg, "");
            if msg.get("error").is_some() {
                checks
                    .lines
                    .push("- JSON-RPC 2.0: a response carries both `result` and `error`".into());
            }
            let result = &msg["result"];
            if result.is_object() {
                checks.run(result_def(rev, answered_method, result), result, "/result");
            }
        }
        Kind::Error => {
            checks.run(must_def(core, "JSONRPCErrorResponse"), msg, "");
            if let Some(def) = msg
                .pointer("/error/code")
                .and_then(Value::as_i64)
                .and_then(|code| error_def(rev, code))
            {
                checks.run(def, msg, "");
            }
        }
        Kind::Unknown => {
            checks.lines.push(
                "- not a request (`method` + `id`), notification (`method`), \
                 result response (`result`) or error response (`error`)"
                    .to_owned(),
            );
            checks.run(must_def(core, "JSONRPCMessage"), msg, "");
        }
    }
    if checks.lines.is_empty() {
        return Ok(());
    }
    let what = match (kind, method, answered_method) {
        (Kind::Request | Kind::Notification, Some(m), _) => format!("{kind:?} {m}"),
        (Kind::Result | Kind::Error, _, Some(m)) => format!("{kind:?} response to {m}"),
        _ => format!("{kind:?}"),
    };
    Err(format!(
        "{rev} {what} violates the schema (checked: {}):\n{}\nmessage: {}",
        checks.checked.join(", "),
        checks.lines.join("\n"),
        truncate(&msg.to_string(), 2000)
    ))
}

/// A request or notification: its envelope, its method's own type and,
/// for a tasks-extension request, the core's `RequestParams`.
fn check_call(checks: &mut Checks, rev: Revision, kind: Kind, msg: &Value) {
    let core = SchemaFile::core(rev);
    let envelope = if kind == Kind::Request {
        "JSONRPCRequest"
    } else {
        "JSONRPCNotification"
    };
    checks.run(must_def(core, envelope), msg, "");
    let method = msg.get("method").and_then(Value::as_str);
    let Some(def) = method.and_then(|m| method_def(rev, m)) else {
        return;
    };
    checks.run(def, msg, "");
    if kind == Kind::Request && def.0 == SchemaFile::TasksExtension {
        // The extension's request types omit `_meta`; the core requires it
        // (protocol version, client capabilities) on every modern request.
        match msg.get("params") {
            Some(params) => checks.run(must_def(core, "RequestParams"), params, "/params"),
            None => checks.lines.push(
                "- RequestParams (2026-07-28 core schema) rejects the message: \
                 `params` (with `_meta`) is required on every modern request"
                    .to_owned(),
            ),
        }
    }
}

fn truncate(s: &str, max_chars: usize) -> String {
    if s.chars().count() <= max_chars {
        s.to_owned()
    } else {
        format!("{}…", s.chars().take(max_chars).collect::<String>())
    }
}

/// Panics with a readable message on violation.
#[track_caller]
pub fn assert_valid(rev: Revision, msg: &Value, answered_method: Option<&str>) {
    if let Err(e) = validate(rev, msg, answered_method) {
        panic!("{e}");
    }
}

/// Validates a whole conversation: walks messages in order, remembers request
/// id → method per (revision, direction) so responses are checked against the
/// right result def. Each item is `(rev, dir, msg)` with `dir` `"c2s"` or
/// `"s2c"`; `msg` may be a `Value` or a `&Value`.
///
/// Besides schema violations it reports: an unknown direction, a request id
/// reused while the earlier request with that id is still unanswered, and a
/// response (with a non-null id) that answers no pending request of the
/// opposite direction. Unanswered requests at the end are fine.
pub fn validate_conversation<I, D, M>(items: I) -> Result<(), String>
where
    I: IntoIterator<Item = (Revision, D, M)>,
    D: AsRef<str>,
    M: Borrow<Value>,
{
    let mut pending: HashMap<(Revision, &'static str, String), String> = HashMap::new();
    let mut failures = Vec::new();
    for (index, (rev, dir, msg)) in items.into_iter().enumerate() {
        let (dir, msg) = (dir.as_ref(), msg.borrow());
        let (dir, opposite) = match dir {
            "c2s" => ("c2s", "s2c"),
            "s2c" => ("s2c", "c2s"),
            other => {
                failures.push(format!(
                    "message #{index}: direction {other:?} is not c2s/s2c"
                ));
                continue;
            }
        };
        let id = msg
            .get("id")
            .filter(|id| !id.is_null())
            .map(Value::to_string);
        let mut answered = None;
        match kind(msg) {
            Kind::Request => {
                let method = msg["method"].as_str().unwrap_or_default().to_owned();
                if let Some(id) = id
                    && let Some(earlier) = pending.insert((rev, dir, id.clone()), method)
                {
                    failures.push(format!(
                        "message #{index} ({rev} {dir}): request id {id} reused while the \
                         {earlier} request with that id is unanswered"
                    ));
                }
            }
            Kind::Result | Kind::Error => {
                if let Some(id) = id {
                    answered = pending.remove(&(rev, opposite, id.clone()));
                    if answered.is_none() {
                        failures.push(format!(
                            "message #{index} ({rev} {dir}): response id {id} answers no \
                             pending {opposite} request"
                        ));
                    }
                }
            }
            Kind::Notification | Kind::Unknown => {}
        }
        if let Err(e) = validate(rev, msg, answered.as_deref()) {
            failures.push(format!("message #{index} ({rev} {dir}): {e}"));
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n\n"))
    }
}

/// [`validate_conversation`], panicking with a readable message on violation.
#[track_caller]
pub fn assert_conversation_valid<I, D, M>(items: I)
where
    I: IntoIterator<Item = (Revision, D, M)>,
    D: AsRef<str>,
    M: Borrow<Value>,
{
    if let Err(e) = validate_conversation(items) {
        panic!("{e}");
    }
}
