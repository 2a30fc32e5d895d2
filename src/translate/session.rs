//! Session rows: `initialize` ↔ `server/discover`, capabilities, the
//! per-request `_meta` of 2026-07-28, and `resultType` on results.

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use super::{as_object, meta_mut};
use crate::error::ShimError;
use crate::jsonrpc::{Id, Request};
use crate::revision::{
    LEGACY_VERSION, LEGACY_VERSIONS, META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_LOG_LEVEL,
    META_PROTOCOL_VERSION, META_SERVER_INFO, MODERN_VERSION, TASKS_EXTENSION,
};
use crate::translate::raw::Params;
use crate::wire::from_value;
use crate::wire::legacy::ServerTasksCapability;
use crate::wire::modern::{RequestMeta, result_type};

/// Results that are `CacheableResult`s in 2026-07-28 (`ttlMs`, `cacheScope`).
const CACHEABLE_METHODS: &[&str] = &[
    "server/discover",
    "tools/list",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
];

/// What a legacy client declared in `initialize` (and later `logging/setLevel`).
#[derive(Debug, Clone, PartialEq)]
pub struct LegacyClient {
    /// The version the client asked for.
    pub protocol_version: String,
    /// `params.capabilities` as sent.
    pub capabilities: Value,
    /// `params.clientInfo` as sent.
    pub client_info: Value,
    /// Set by `logging/setLevel`; injected per request upstream.
    pub log_level: Option<String>,
}

impl LegacyClient {
    /// A client that has not said who it is (no `initialize` seen):
    /// our version, no capabilities, `name` as its `clientInfo`.
    pub(crate) fn undeclared(name: &str) -> LegacyClient {
        LegacyClient {
            protocol_version: LEGACY_VERSION.into(),
            capabilities: json!({}),
            client_info: json!({"name": name, "version": "0"}),
            log_level: None,
        }
    }

    /// Reads an `initialize` request's params.
    pub fn from_initialize(params: Option<&Value>) -> Result<Self, ShimError> {
        let p = params.ok_or_else(|| ShimError::InvalidParams("initialize needs params".into()))?;
        let p = as_object("initialize params", p)?;
        let version = p
            .get("protocolVersion")
            .and_then(Value::as_str)
            .ok_or_else(|| ShimError::InvalidParams("initialize needs protocolVersion".into()))?;
        Ok(LegacyClient {
            protocol_version: version.to_owned(),
            capabilities: p.get("capabilities").cloned().unwrap_or_else(|| json!({})),
            client_info: p
                .get("clientInfo")
                .cloned()
                .unwrap_or_else(|| json!({"name": "unknown", "version": "0"})),
            log_level: None,
        })
    }

    /// The version the shim answers `initialize` with: the client's own if it
    /// is a legacy version we know, else ours.
    pub fn negotiated_version(&self) -> &str {
        if LEGACY_VERSIONS.contains(&self.protocol_version.as_str()) {
            &self.protocol_version
        } else {
            LEGACY_VERSION
        }
    }

    /// True when the client declared what server→client request `method`
    /// (with `params`) needs (see [`super::input::can_take`]).
    pub fn takes(&self, method: &str, params: Option<&Value>) -> bool {
        super::input::can_take(Some(&self.capabilities), method, params)
    }
}

/// Legacy client capabilities → the modern per-request set. `tasks`
/// (client-hosted tasks) has no modern counterpart and is dropped; the tasks
/// extension is declared because the shim itself handles task results.
pub fn client_caps_to_modern(caps: &Value) -> Value {
    let mut out = caps.as_object().cloned().unwrap_or_default();
    out.remove("tasks");
    let ext = out.entry("extensions").or_insert_with(|| json!({}));
    if !ext.is_object() {
        *ext = json!({});
    }
    ext[TASKS_EXTENSION] = json!({});
    Value::Object(out)
}

/// Modern per-request client capabilities → the capabilities a legacy
/// `initialize` declares. `extensions` has no 2025-11-25 form (the tasks
/// extension in particular is served by the shim), so it goes; client-hosted
/// `tasks` cannot be recovered (2026-07-28 has no such capability).
pub fn client_caps_to_legacy(caps: &Value) -> Value {
    let mut out = caps.as_object().cloned().unwrap_or_default();
    out.remove("extensions");
    Value::Object(out)
}

/// The `initialize` params the shim sends a legacy upstream on behalf of a
/// modern client, read from that client's per-request `_meta`.
pub fn initialize_params_from_meta(meta: &RequestMeta) -> Value {
    let caps = meta
        .client_capabilities
        .as_ref()
        .map_or_else(|| json!({}), client_caps_to_legacy);
    let info = meta
        .client_info
        .clone()
        .unwrap_or_else(|| json!({"name": "unknown", "version": "0"}));
    json!({"protocolVersion": LEGACY_VERSION, "capabilities": caps, "clientInfo": info})
}

/// The modern `_meta` members for a request made on behalf of `client`.
pub fn modern_meta(client: &LegacyClient) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert(META_PROTOCOL_VERSION.into(), Value::from(MODERN_VERSION));
    m.insert(
        META_CLIENT_CAPABILITIES.into(),
        client_caps_to_modern(&client.capabilities),
    );
    m.insert(META_CLIENT_INFO.into(), client.client_info.clone());
    if let Some(level) = &client.log_level {
        m.insert(META_LOG_LEVEL.into(), Value::from(level.clone()));
    }
    m
}

/// A legacy request made modern: the modern `_meta` members are merged into
/// `params._meta` (members the client set itself, such as `progressToken`,
/// are kept).
pub fn request_to_modern(req: &Request, client: &LegacyClient) -> Request {
    request_to_modern_owned(req.clone(), client)
}

/// [`request_to_modern`] consuming the request (params moved, not copied).
/// A session that sends many requests keeps a [`ModernMeta`] instead.
pub fn request_to_modern_owned(req: Request, client: &LegacyClient) -> Request {
    Request {
        id: req.id,
        method: req.method,
        params: Some(merge_meta(req.params, &modern_meta(client))),
    }
}

/// `params` (an object; anything else counts as `{}`) with `modern` merged
/// into its `_meta` (created at the end if missing, made an object if it
/// was not one): the client's members first, in order, those the shim
/// also sets taking the shim's value in place, then the shim's others.
fn merge_meta(params: Option<Value>, modern: &Map<String, Value>) -> Value {
    let mut params = match params {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    };
    let meta = meta_mut(&mut params);
    // Built at its final size: growing the client's small `_meta` member by
    // member reallocated and rehashed it twice per request. (Cloning the
    // shim's members as one map and inserting the client's in front costs
    // more: the cloned table is full, so the first insert rehashes it.)
    let mut merged = Map::with_capacity(meta.len() + modern.len());
    for (k, v) in std::mem::take(meta) {
        merged.insert(k, v);
    }
    for (k, v) in modern {
        merged.insert(k.clone(), v.clone());
    }
    *meta = merged;
    Value::Object(params)
}

/// The modern `_meta` members a legacy session adds to each of its
/// upstream requests ([`modern_meta`]), kept as values and pre-serialised.
///
/// Every request on the session's behalf carries them, and they are the
/// larger part of a small request: copying the values into each request's
/// tree, then writing and freeing them, was most of what translating a
/// `tools/call` cost beyond parsing it. [`ModernMeta::write_request`]
/// writes them from their serialised form instead.
///
/// ```
/// use mcp_tasks_shim::jsonrpc::{Id, Message};
/// use mcp_tasks_shim::translate::session::{LegacyClient, ModernMeta};
/// use serde_json::json;
///
/// let client = LegacyClient::from_initialize(Some(&json!({
///     "protocolVersion": "2025-11-25", "capabilities": {},
///     "clientInfo": {"name": "c", "version": "1"}}))).unwrap();
/// let meta = ModernMeta::for_client(&client);
/// let params = json!({"taskId": "t1", "_meta": {"progressToken": 7}});
/// let mut spliced = Vec::new();
/// meta.write_request(&mut spliced, &Id::Num(3), "tasks/get", Some(&params));
/// let merged = Message::request(Id::Num(3), "tasks/get", meta.merge_into(Some(params)));
/// assert_eq!(spliced, merged.to_line().strip_suffix(b"\n").unwrap());
/// ```
#[derive(Debug, Clone)]
pub struct ModernMeta {
    members: Map<String, Value>,
    raw: Vec<(String, Box<RawValue>)>,
    /// The `_meta` of a request that has none of its own: every member,
    /// serialised.
    object: Box<RawValue>,
}

impl ModernMeta {
    /// Pre-serialises `members`.
    pub fn new(members: Map<String, Value>) -> ModernMeta {
        let raw = members
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), serde_json::value::to_raw_value(v).ok()?)))
            .collect();
        let mut meta = ModernMeta {
            members,
            raw,
            object: RawValue::NULL.to_owned(),
        };
        if let Ok(object) = serde_json::value::to_raw_value(&SplicedMeta {
            own: None,
            meta: &meta,
        }) {
            meta.object = object;
        }
        meta
    }

    /// [`modern_meta`] of `client`, pre-serialised.
    pub fn for_client(client: &LegacyClient) -> ModernMeta {
        ModernMeta::new(modern_meta(client))
    }

    /// The members as values.
    pub fn members(&self) -> &Map<String, Value> {
        &self.members
    }

    /// `params` with the members merged into `params._meta`, as
    /// [`request_to_modern`] does.
    pub fn merge_into(&self, params: Option<Value>) -> Value {
        merge_meta(params, &self.members)
    }

    /// Writes the request `{"jsonrpc":"2.0","id":…,"method":…,"params":…}`
    /// with the members merged into `params._meta`: the same bytes as
    /// writing `Message::request(id, method, self.merge_into(params))`,
    /// without copying the members into `params`.
    pub fn write_request(&self, out: &mut Vec<u8>, id: &Id, method: &str, params: Option<&Value>) {
        let request = SplicedRequest {
            id,
            method,
            params: SplicedParams {
                params: params.and_then(Value::as_object),
                meta: self,
            },
        };
        // Serialising values and raw JSON into a Vec cannot fail.
        let _ = serde_json::to_writer(out, &request);
    }

    /// [`ModernMeta::write_request`] for params a tree or a plain call's
    /// text ([`Params`]): the same request, the text's own spacing aside.
    pub fn write_request_with(&self, out: &mut Vec<u8>, id: &Id, method: &str, params: Params<'_>) {
        match params {
            Params::Tree(params) => self.write_request(out, id, method, Some(params)),
            Params::Text(params) => {
                // Ids and method names serialise without fail.
                out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
                let _ = serde_json::to_writer(&mut *out, id);
                out.extend_from_slice(br#","method":"#);
                let _ = serde_json::to_writer(&mut *out, method);
                out.extend_from_slice(br#","params":"#);
                params.write_with_meta(out, self.object.get());
                out.push(b'}');
            }
        }
    }

    fn raw(&self, key: &str) -> Option<&RawValue> {
        self.raw.iter().find(|(k, _)| k == key).map(|(_, v)| &**v)
    }
}

/// The same members (their serialised form follows from them).
impl PartialEq for ModernMeta {
    fn eq(&self, other: &Self) -> bool {
        self.members == other.members
    }
}

/// A request as [`crate::jsonrpc::Message::write_json`] writes it, with
/// `params` spliced.
struct SplicedRequest<'a> {
    id: &'a Id,
    method: &'a str,
    params: SplicedParams<'a>,
}

impl Serialize for SplicedRequest<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(4))?;
        m.serialize_entry("jsonrpc", "2.0")?;
        m.serialize_entry("id", self.id)?;
        m.serialize_entry("method", self.method)?;
        m.serialize_entry("params", &self.params)?;
        m.end()
    }
}

/// `params` with the session's members merged into its `_meta`, in the
/// order [`merge_meta`] gives them.
struct SplicedParams<'a> {
    params: Option<&'a Map<String, Value>>,
    meta: &'a ModernMeta,
}

impl Serialize for SplicedParams<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let own_meta = self.params.and_then(|p| p.get("_meta"));
        let mut m = s.serialize_map(None)?;
        for (k, v) in self.params.into_iter().flatten() {
            if k == "_meta" {
                m.serialize_entry(k, &self.merged(v.as_object()))?;
            } else {
                m.serialize_entry(k, v)?;
            }
        }
        if own_meta.is_none() {
            m.serialize_entry("_meta", &*self.meta.object)?;
        }
        m.end()
    }
}

impl<'a> SplicedParams<'a> {
    fn merged(&self, own: Option<&'a Map<String, Value>>) -> SplicedMeta<'a> {
        SplicedMeta {
            own,
            meta: self.meta,
        }
    }
}

/// The client's own `_meta` members, then the session's.
struct SplicedMeta<'a> {
    own: Option<&'a Map<String, Value>>,
    meta: &'a ModernMeta,
}

impl Serialize for SplicedMeta<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        for (k, v) in self.own.into_iter().flatten() {
            match self.meta.raw(k) {
                Some(raw) => m.serialize_entry(k, raw)?,
                None => m.serialize_entry(k, v)?,
            }
        }
        for (k, raw) in &self.meta.raw {
            if !self.own.is_some_and(|o| o.contains_key(k)) {
                m.serialize_entry(k, &**raw)?;
            }
        }
        m.end()
    }
}

/// Checks a modern request's `_meta`: protocol version and client
/// capabilities are required (`-32602`), the version must be ours (`-32022`).
pub fn check_modern_meta(params: Option<&Value>) -> Result<RequestMeta, ShimError> {
    let meta = params.and_then(|p| p.get("_meta")).ok_or_else(|| {
        ShimError::InvalidParams("missing params._meta (required in 2026-07-28)".into())
    })?;
    let meta: RequestMeta = from_value("params._meta", meta)?;
    let version = meta.protocol_version.as_deref().ok_or_else(|| {
        ShimError::InvalidParams(format!("missing params._meta[\"{META_PROTOCOL_VERSION}\"]"))
    })?;
    if version != MODERN_VERSION {
        return Err(ShimError::unsupported_version(version));
    }
    // The schema's `LoggingLevel`: a level outside it would otherwise be
    // taken silently as "no log messages".
    if let Some(level) = meta.log_level.as_deref()
        && !crate::wire::LOG_LEVELS.contains(&level)
    {
        return Err(ShimError::InvalidParams(format!(
            "params._meta[\"{META_LOG_LEVEL}\"] must be one of {}, not {level:?}",
            crate::wire::LOG_LEVELS.join(", ")
        )));
    }
    // `Implementation` in the schema, when given: an object with a
    // string `name` and `version`.
    if meta
        .client_info
        .as_ref()
        .is_some_and(|i| !is_implementation(i))
    {
        return Err(ShimError::InvalidParams(format!(
            "params._meta[\"{META_CLIENT_INFO}\"] must be an object with string \"name\" and \"version\""
        )));
    }
    match &meta.client_capabilities {
        Some(Value::Object(_)) => Ok(meta),
        None | Some(Value::Null) => Err(ShimError::InvalidParams(format!(
            "missing params._meta[\"{META_CLIENT_CAPABILITIES}\"]"
        ))),
        Some(_) => Err(ShimError::InvalidParams(format!(
            "params._meta[\"{META_CLIENT_CAPABILITIES}\"] must be an object"
        ))),
    }
}

/// [`check_modern_meta`] for callers that need only the verdict: the
/// usual valid `_meta` is judged in place, without copying it; any other
/// shape takes the full check, so every error reads the same.
pub fn validate_modern_meta(params: Option<&Value>) -> Result<(), ShimError> {
    if let Some(Value::Object(meta)) = params.and_then(|p| p.get("_meta"))
        && usual_valid_meta(meta)
    {
        return Ok(());
    }
    check_modern_meta(params).map(|_| ())
}

/// The usual valid `_meta`, judged in place: one [`check_modern_meta`]
/// accepts, and whose members read the same taken out by hand as through
/// [`RequestMeta`]'s serde (a `null` member is an absent one).
fn usual_valid_meta(meta: &Map<String, Value>) -> bool {
    let version_ok = matches!(meta.get(META_PROTOCOL_VERSION),
        Some(Value::String(v)) if v == MODERN_VERSION);
    let caps_ok = matches!(meta.get(META_CLIENT_CAPABILITIES), Some(Value::Object(_)));
    let level_ok = matches!(meta.get(META_LOG_LEVEL), None | Some(Value::Null))
        || matches!(meta.get(META_LOG_LEVEL),
        Some(Value::String(l)) if crate::wire::LOG_LEVELS.contains(&l.as_str()));
    let info_ok = match meta.get(META_CLIENT_INFO) {
        None | Some(Value::Null) => true,
        Some(info) => is_implementation(info),
    };
    version_ok && caps_ok && level_ok && info_ok
}

/// An `Implementation` as the schema requires it: an object whose `name`
/// and `version` are strings (other members are optional).
fn is_implementation(info: &Value) -> bool {
    info.get("name").is_some_and(Value::is_string)
        && info.get("version").is_some_and(Value::is_string)
}

/// The `_meta` members a 2026-07-28 request carries for itself (what a
/// 2025-11-25 session declares once), taken out when it is made legacy.
const PER_REQUEST: [&str; 4] = [
    META_PROTOCOL_VERSION,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
];

/// The per-request members moved out of a `_meta` that
/// [`usual_valid_meta`] accepted, in the order and with the removals
/// (swapping) that [`request_to_legacy_owned`] has always made; the other
/// members stay, and are copied into [`RequestMeta::extra`] in their
/// order, as serde's `flatten` reads them.
fn take_usual_meta(meta: &mut Map<String, Value>) -> RequestMeta {
    let extra = meta
        .iter()
        .filter(|(k, _)| !PER_REQUEST.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let string = |v: Option<Value>| match v {
        Some(Value::String(s)) => Some(s),
        _ => None,
    };
    let present = |v: Option<Value>| v.filter(|v| !v.is_null());
    let protocol_version = string(meta.remove(META_PROTOCOL_VERSION));
    let client_capabilities = present(meta.remove(META_CLIENT_CAPABILITIES));
    let client_info = present(meta.remove(META_CLIENT_INFO));
    let log_level = string(meta.remove(META_LOG_LEVEL));
    RequestMeta {
        protocol_version,
        client_capabilities,
        client_info,
        log_level,
        extra,
    }
}

/// A modern client's notification params made legacy: the per-request
/// `io.modelcontextprotocol/*` `_meta` members a 2026-07-28 client puts on
/// everything it sends mean nothing to a 2025-11-25 server, whose schema
/// has no place for them. Nothing is checked: a notification has no answer
/// to carry an error.
///
/// ```
/// use mcp_tasks_shim::translate::session::notification_params_to_legacy;
/// use serde_json::json;
/// let modern = json!({"progressToken": 1, "progress": 5,
///     "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "trace": "x"}});
/// assert_eq!(notification_params_to_legacy(Some(modern)),
///     json!({"progressToken": 1, "progress": 5, "_meta": {"trace": "x"}}));
/// ```
pub fn notification_params_to_legacy(params: Option<Value>) -> Value {
    let mut params = match params {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    };
    for key in PER_REQUEST {
        super::remove_meta_key(&mut params, key);
    }
    Value::Object(params)
}

/// A modern request made legacy: its `_meta` is checked, the
/// `io.modelcontextprotocol/*` per-request members are taken out and
/// returned; other `_meta` members stay.
pub fn request_to_legacy(req: &Request) -> Result<(Request, RequestMeta), ShimError> {
    request_to_legacy_owned(req.clone())
}

/// [`request_to_legacy`] consuming the request (params moved, not copied).
/// The usual valid `_meta` has its members moved out where it lies,
/// instead of checked through a copy first.
pub fn request_to_legacy_owned(req: Request) -> Result<(Request, RequestMeta), ShimError> {
    let had_params = req.params.is_some();
    let mut params = match req.params {
        Some(Value::Object(m)) => m,
        other => {
            // No object, no `_meta`: this fails, saying so.
            check_modern_meta(other.as_ref())?;
            Map::new()
        }
    };
    let usual = match params.get_mut("_meta") {
        Some(Value::Object(meta)) if usual_valid_meta(meta) => {
            let taken = take_usual_meta(meta);
            let emptied = meta.is_empty();
            Some((taken, emptied))
        }
        _ => None,
    };
    let meta = match usual {
        Some((taken, emptied)) => {
            if emptied {
                params.remove("_meta");
            }
            taken
        }
        None => {
            let params_value = Value::Object(std::mem::take(&mut params));
            let meta = check_modern_meta(Some(&params_value))?;
            if let Value::Object(m) = params_value {
                params = m;
            }
            for key in PER_REQUEST {
                super::remove_meta_key(&mut params, key);
            }
            meta
        }
    };
    let params = (!params.is_empty() || had_params).then_some(Value::Object(params));
    Ok((
        Request {
            id: req.id,
            method: req.method,
            params,
        },
        meta,
    ))
}

/// Modern server capabilities → legacy: the tasks extension becomes
/// `capabilities.tasks` with list, cancel and task-augmented tool calls (the
/// shim emulates list and cancel); other extensions have no legacy form.
pub fn server_caps_to_legacy(caps: &Value) -> Value {
    let mut out = caps.as_object().cloned().unwrap_or_default();
    // The legacy `tasks` capability says what the shim serves, and that
    // follows from the extension alone. A modern server's own `tasks`
    // member is no 2026 capability: relayed, it could promise a legacy
    // client things nobody implements, or break the 2025 schema (a fuzzed
    // `"tasks": null` did).
    out.remove("tasks");
    out.remove("extensions");
    if crate::revision::declares_tasks(caps) {
        out.insert(
            "tasks".into(),
            json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}),
        );
    }
    Value::Object(out)
}

/// Legacy server capabilities → modern: `tasks` with task-augmented tool
/// calls becomes the tasks extension.
pub fn server_caps_to_modern(caps: &Value) -> Value {
    let mut out = caps.as_object().cloned().unwrap_or_default();
    let tasks: ServerTasksCapability = out
        .remove("tasks")
        .and_then(|t| serde_json::from_value(t).ok())
        .unwrap_or_default();
    if tasks.tool_calls() {
        let ext = out.entry("extensions").or_insert_with(|| json!({}));
        // Indexing a non-object JSON value by key panics: a legacy server
        // with a malformed `extensions` must not take the shim down.
        if !ext.is_object() {
            *ext = json!({});
        }
        ext[TASKS_EXTENSION] = json!({});
    }
    Value::Object(out)
}

/// `server/discover` result → the `InitializeResult` a legacy client gets.
pub fn discover_to_initialize(discover: &Value, client: &LegacyClient) -> Result<Value, ShimError> {
    let d = as_object("server/discover result", discover)?;
    let caps = d.get("capabilities").cloned().unwrap_or_else(|| json!({}));
    let server_info = d
        .get("_meta")
        .and_then(|m| m.get(META_SERVER_INFO))
        .cloned()
        .unwrap_or_else(|| json!({"name": "mcp-tasks-shim-upstream", "version": "unknown"}));
    let mut out = Map::new();
    out.insert(
        "protocolVersion".into(),
        Value::from(client.negotiated_version()),
    );
    out.insert("capabilities".into(), server_caps_to_legacy(&caps));
    out.insert("serverInfo".into(), server_info);
    if let Some(i) = d.get("instructions") {
        out.insert("instructions".into(), i.clone());
    }
    Ok(Value::Object(out))
}

/// `InitializeResult` → the `server/discover` result a modern client gets.
pub fn initialize_to_discover(init: &Value, ttl_ms: i64) -> Result<Value, ShimError> {
    let i = as_object("initialize result", init)?;
    let caps = i.get("capabilities").cloned().unwrap_or_else(|| json!({}));
    let mut out = Map::new();
    out.insert("supportedVersions".into(), json!([MODERN_VERSION]));
    out.insert("capabilities".into(), server_caps_to_modern(&caps));
    if let Some(text) = i.get("instructions") {
        out.insert("instructions".into(), text.clone());
    }
    out.insert("resultType".into(), Value::from(result_type::COMPLETE));
    out.insert("ttlMs".into(), Value::from(ttl_ms.max(0)));
    out.insert("cacheScope".into(), Value::from("private"));
    if let Some(info) = i.get("serverInfo") {
        out.insert("_meta".into(), json!({META_SERVER_INFO: info}));
    }
    Ok(Value::Object(out))
}

/// Any legacy result made modern: `resultType: "complete"` added, cache
/// hints added to the results that require them.
pub fn result_to_modern(result: &Value, method: &str, ttl_ms: i64) -> Value {
    match result {
        Value::Object(_) => result_to_modern_owned(result.clone(), method, ttl_ms),
        _ => result_to_modern_owned(Value::Null, method, ttl_ms),
    }
}

/// [`result_to_modern`] consuming the result (members moved, not copied).
pub fn result_to_modern_owned(result: Value, method: &str, ttl_ms: i64) -> Value {
    let mut out = match result {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    // A 2025-11-25 result has no `resultType` of its own: one that is
    // absent, or not a string (`null`, a number…), reads "complete".
    if !matches!(out.get("resultType"), Some(Value::String(_))) {
        out.insert("resultType".into(), Value::from(result_type::COMPLETE));
    }
    if CACHEABLE_METHODS.contains(&method) {
        out.entry("ttlMs")
            .or_insert_with(|| Value::from(ttl_ms.max(0)));
        out.entry("cacheScope")
            .or_insert_with(|| Value::from("private"));
    }
    Value::Object(out)
}

/// Any modern result made legacy: `resultType` and cache hints dropped.
pub fn result_to_legacy(result: &Value, method: &str) -> Value {
    match result {
        Value::Object(_) => result_to_legacy_owned(result.clone(), method),
        _ => result_to_legacy_owned(Value::Null, method),
    }
}

/// Whether a legacy client's answer to `method` leaves out result member
/// `key`: `resultType` always, the cache hints of the methods that have
/// them. (The server's name in `_meta` goes too; see
/// [`result_to_legacy_owned`].)
pub(crate) fn dropped_for_legacy(key: &str, method: &str) -> bool {
    key == "resultType"
        || ((key == "ttlMs" || key == "cacheScope") && CACHEABLE_METHODS.contains(&method))
}

/// [`result_to_legacy`] consuming the result (members moved, not copied).
pub fn result_to_legacy_owned(result: Value, method: &str) -> Value {
    let mut out = match result {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    out.retain(|k, _| !dropped_for_legacy(k, method));
    // 2026-07-28 names the server on every result; a 2025-11-25 client
    // learnt it once, from `initialize`.
    super::remove_meta_key(&mut out, META_SERVER_INFO);
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writing a request with the session's `_meta` spliced in gives the
    /// bytes of the merged request, member order included, whatever shape
    /// the params and the client's own `_meta` have.
    /// A 2026-07-28 result always carries a string `resultType`: whatever
    /// a 2025-11-25 server put there (it has no such field) reads
    /// "complete", and a result that is not an object becomes one.
    #[test]
    fn legacy_results_always_come_out_complete() {
        for (given, kept) in [
            (json!({"content": []}), json!([])),
            (json!({"content": [], "resultType": null}), json!([])),
            (json!({"content": [], "resultType": 7}), json!([])),
        ] {
            let out = result_to_modern_owned(given.clone(), "tools/call", 0);
            assert_eq!(out["resultType"], "complete", "{given}");
            assert_eq!(out["content"], kept, "{given}");
        }
        for odd in [json!([1, 2]), json!("done"), Value::Null] {
            let out = result_to_modern_owned(odd.clone(), "tools/call", 0);
            assert_eq!(out, json!({"resultType": "complete"}), "{odd}");
        }
    }

    #[test]
    fn spliced_meta_writes_the_merged_request() {
        use crate::jsonrpc::Message;
        let mut client = LegacyClient::from_initialize(Some(&json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {"elicitation": {"form": {}}, "sampling": {}},
            "clientInfo": {"name": "c", "version": "1", "title": "ünïcode \"quoted\""}
        })))
        .unwrap();
        let plain = ModernMeta::for_client(&client);
        client.log_level = Some("debug".into());
        let with_level = ModernMeta::for_client(&client);
        let params = [
            None,
            Some(json!({})),
            Some(json!({"taskId": "t1"})),
            Some(json!({"a": 1, "_meta": {"progressToken": 5}, "z": [2]})),
            Some(json!({"_meta": {META_PROTOCOL_VERSION: "stale", "k": {"x": 1}}, "b": null})),
            Some(json!({"_meta": 5, "name": "greet"})),
            Some(json!({"_meta": {}})),
            Some(json!([1, 2])),
            Some(json!("text")),
        ];
        for meta in [&plain, &with_level] {
            for id in [Id::Num(7), Id::Str("s-1".into())] {
                for p in &params {
                    let mut spliced = Vec::new();
                    meta.write_request(&mut spliced, &id, "tools/call", p.as_ref());
                    let mut merged = Vec::new();
                    let request =
                        Message::request(id.clone(), "tools/call", meta.merge_into(p.clone()));
                    request.write_json(&mut merged);
                    assert_eq!(
                        String::from_utf8_lossy(&spliced),
                        String::from_utf8_lossy(&merged),
                        "params {p:?}"
                    );
                }
            }
        }
        // The shim's members win over the client's, in the client's place.
        let mut out = Vec::new();
        plain.write_request(&mut out, &Id::Num(1), "m", params[4].as_ref());
        let v: Value = serde_json::from_slice(&out).unwrap();
        let keys: Vec<_> = v["params"]["_meta"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        assert_eq!(keys[0], META_PROTOCOL_VERSION);
        assert_eq!(v["params"]["_meta"][META_PROTOCOL_VERSION], MODERN_VERSION);
        assert_eq!(v["params"]["_meta"]["k"], json!({"x": 1}));
    }

    #[test]
    fn a_modern_servers_stray_tasks_member_does_not_reach_legacy_clients() {
        let legacy = server_caps_to_legacy(&json!({"tasks": null, "tools": {}}));
        assert_eq!(legacy, json!({"tools": {}}));
        let legacy = server_caps_to_legacy(&json!({"tasks": {"list": {}},
            "extensions": {TASKS_EXTENSION: {}}}));
        assert_eq!(legacy["tasks"]["requests"]["tools"]["call"], json!({}));
    }
    use crate::jsonrpc::Id;

    fn client() -> LegacyClient {
        LegacyClient::from_initialize(Some(&json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {"elicitation": {"form": {}}, "tasks": {"list": {}}},
            "clientInfo": {"name": "c", "version": "1"}
        })))
        .unwrap()
    }

    #[test]
    fn modern_meta_is_injected_and_client_meta_kept() {
        let req = Request {
            id: Id::Num(1),
            method: "tools/call".into(),
            params: Some(json!({"name": "x", "_meta": {"progressToken": 7}})),
        };
        let mut c = client();
        c.log_level = Some("debug".into());
        let m = request_to_modern(&req, &c);
        let meta = &m.params.as_ref().unwrap()["_meta"];
        assert_eq!(meta["progressToken"], 7);
        assert_eq!(meta[META_PROTOCOL_VERSION], MODERN_VERSION);
        assert_eq!(meta[META_LOG_LEVEL], "debug");
        let caps = &meta[META_CLIENT_CAPABILITIES];
        assert!(caps["elicitation"].is_object());
        assert!(caps.get("tasks").is_none());
        assert!(caps["extensions"][TASKS_EXTENSION].is_object());
    }

    #[test]
    fn client_capabilities_of_the_wrong_type_are_named_as_such() {
        let with = |caps: Value| json!({"_meta": {META_PROTOCOL_VERSION: MODERN_VERSION, META_CLIENT_CAPABILITIES: caps}});
        let wrong = check_modern_meta(Some(&with(json!("x")))).unwrap_err();
        assert!(wrong.to_string().contains("must be an object"), "{wrong}");
        let missing = check_modern_meta(Some(&with(Value::Null))).unwrap_err();
        assert!(missing.to_string().contains("missing"), "{missing}");
        assert!(check_modern_meta(Some(&with(json!({})))).is_ok());
    }

    #[test]
    fn client_info_that_is_no_object_is_refused_on_both_paths() {
        let with = |info: Value| {
            json!({"_meta": {META_PROTOCOL_VERSION: MODERN_VERSION,
                META_CLIENT_CAPABILITIES: {}, META_CLIENT_INFO: info}})
        };
        for bad in [
            json!("x"),
            json!(3),
            json!([]),
            json!({}),
            json!({"name": 5, "version": "1"}),
        ] {
            let e = check_modern_meta(Some(&with(bad.clone()))).unwrap_err();
            assert!(e.to_string().contains("must be an object"), "{bad}: {e}");
            assert!(validate_modern_meta(Some(&with(bad))).is_err());
        }
        for good in [json!({"name": "c", "version": "1"}), Value::Null] {
            assert!(
                validate_modern_meta(Some(&with(good.clone()))).is_ok(),
                "{good}"
            );
            assert!(check_modern_meta(Some(&with(good))).is_ok());
        }
    }

    #[test]
    fn a_null_extension_declares_nothing() {
        let meta = |ext: Value| RequestMeta {
            client_capabilities: Some(json!({"extensions": {TASKS_EXTENSION: ext}})),
            ..Default::default()
        };
        assert!(meta(json!({})).declares_tasks());
        assert!(!meta(Value::Null).declares_tasks());
        let server = |ext: Value| json!({"extensions": {TASKS_EXTENSION: ext}});
        assert!(server_caps_to_legacy(&server(json!({})))["tasks"].is_object());
        assert!(
            server_caps_to_legacy(&server(Value::Null))
                .get("tasks")
                .is_none()
        );
    }

    #[test]
    fn modern_meta_is_checked_and_stripped() {
        let ok = Request {
            id: Id::Num(1),
            method: "tools/list".into(),
            params: Some(json!({"_meta": {
                META_PROTOCOL_VERSION: MODERN_VERSION,
                META_CLIENT_CAPABILITIES: {},
                "progressToken": "p"
            }})),
        };
        let (l, meta) = request_to_legacy(&ok).unwrap();
        assert_eq!(l.params.unwrap()["_meta"], json!({"progressToken": "p"}));
        assert!(!meta.declares_tasks());

        let mut no_caps = ok.clone();
        no_caps.params = Some(json!({"_meta": {META_PROTOCOL_VERSION: MODERN_VERSION}}));
        assert_eq!(request_to_legacy(&no_caps).unwrap_err().code(), -32602);
        let mut old = ok.clone();
        old.params = Some(json!({"_meta": {META_PROTOCOL_VERSION: "2025-11-25",
                                           META_CLIENT_CAPABILITIES: {}}}));
        assert_eq!(request_to_legacy(&old).unwrap_err().code(), -32022);
        // The schema's LoggingLevel, on the fast path and the full check.
        for (level, fine) in [
            (json!("info"), true),
            (json!("bogus"), false),
            (json!(3), false),
        ] {
            let mut r = ok.clone();
            r.params = Some(json!({"_meta": {META_PROTOCOL_VERSION: MODERN_VERSION,
                                             META_CLIENT_CAPABILITIES: {},
                                             META_LOG_LEVEL: level}}));
            assert_eq!(request_to_legacy(&r).is_ok(), fine, "{level}");
            assert_eq!(
                validate_modern_meta(r.params.as_ref()).is_ok(),
                fine,
                "{level}"
            );
            if !fine {
                assert_eq!(request_to_legacy(&r).unwrap_err().code(), -32602, "{level}");
            }
        }
        let mut none = ok;
        none.params = None;
        assert_eq!(request_to_legacy(&none).unwrap_err().code(), -32602);
    }

    #[test]
    fn discover_and_initialize_mirror_each_other() {
        let discover = json!({
            "supportedVersions": [MODERN_VERSION],
            "capabilities": {"tools": {}, "extensions": {TASKS_EXTENSION: {}}},
            "instructions": "hi", "resultType": "complete", "ttlMs": 0, "cacheScope": "public",
            "_meta": {META_SERVER_INFO: {"name": "s", "version": "2"}}
        });
        let init = discover_to_initialize(&discover, &client()).unwrap();
        assert_eq!(init["protocolVersion"], "2025-11-25");
        assert_eq!(init["serverInfo"]["name"], "s");
        assert!(init["capabilities"]["tasks"]["requests"]["tools"]["call"].is_object());
        assert!(init["capabilities"].get("extensions").is_none());
        let back = initialize_to_discover(&init, 0).unwrap();
        assert!(back["capabilities"]["extensions"][TASKS_EXTENSION].is_object());
        assert!(back["capabilities"].get("tasks").is_none());
        assert_eq!(back["_meta"][META_SERVER_INFO]["version"], "2");
        assert_eq!(back["supportedVersions"][0], MODERN_VERSION);
    }

    #[test]
    fn modern_meta_becomes_initialize_params() {
        let req = Request {
            id: Id::Num(1),
            method: "server/discover".into(),
            params: Some(json!({"_meta": {
                META_PROTOCOL_VERSION: MODERN_VERSION,
                META_CLIENT_CAPABILITIES: {"elicitation": {"form": {}},
                                           "extensions": {TASKS_EXTENSION: {}}},
                META_CLIENT_INFO: {"name": "m", "version": "3"}
            }})),
        };
        let (_, meta) = request_to_legacy(&req).unwrap();
        let p = initialize_params_from_meta(&meta);
        assert_eq!(p["protocolVersion"], LEGACY_VERSION);
        assert_eq!(p["capabilities"], json!({"elicitation": {"form": {}}}));
        assert_eq!(p["clientInfo"]["name"], "m");
        let c = LegacyClient::from_initialize(Some(&p)).unwrap();
        // Back to modern: the tasks extension is declared again.
        assert!(client_caps_to_modern(&c.capabilities)["extensions"][TASKS_EXTENSION].is_object());
    }

    #[test]
    fn legacy_server_without_task_calls_gets_no_extension() {
        let caps = server_caps_to_modern(&json!({"tasks": {"list": {}}, "tools": {}}));
        assert!(caps.get("extensions").is_none());
        assert!(caps.get("tasks").is_none());
    }

    #[test]
    fn malformed_server_extensions_are_replaced_not_a_panic() {
        // Found by tests/fuzz_translate.rs: `extensions: false` beside task
        // support used to panic in serde_json's IndexMut.
        for bad in [json!(false), json!("x"), json!([1]), json!(3)] {
            let caps = json!({"tasks": {"requests": {"tools": {"call": {}}}}, "extensions": bad});
            let modern = server_caps_to_modern(&caps);
            assert_eq!(modern["extensions"], json!({TASKS_EXTENSION: {}}));
            let init = json!({"protocolVersion": LEGACY_VERSION, "capabilities": caps,
                "serverInfo": {"name": "s", "version": "1"}});
            assert!(initialize_to_discover(&init, 0).is_ok());
        }
    }

    #[test]
    fn results_gain_and_lose_result_type() {
        let m = result_to_modern(&json!({"tools": []}), "tools/list", 5);
        assert_eq!(m["resultType"], "complete");
        assert_eq!(m["ttlMs"], 5);
        let l = result_to_legacy(&m, "tools/list");
        assert_eq!(l, json!({"tools": []}));
        let c = result_to_modern(&json!({"content": []}), "tools/call", 5);
        assert!(c.get("ttlMs").is_none());
    }
}
