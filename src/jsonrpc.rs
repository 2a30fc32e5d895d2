//! JSON-RPC 2.0 envelope over `serde_json::Value`.
//!
//! The shim treats payloads as opaque JSON and only types the envelope, so
//! fields it does not understand survive a round trip unchanged. Batches
//! (JSON arrays) were removed from MCP and are refused with `-32600`.
//!
//! ```
//! use mcp_tasks_shim::jsonrpc::{Message, Id};
//! let msg = Message::parse(br#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#).unwrap();
//! assert_eq!(msg.id(), Some(&Id::Num(7)));
//! assert_eq!(msg.method(), Some("ping"));
//! ```

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::fmt;

use crate::error::ShimError;

/// Largest message the parser accepts (bytes). Bigger input is refused with
/// `-32600` instead of being buffered without bound.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// A JSON-RPC request id: MCP allows strings and integers (never null).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, PartialOrd, Ord)]
#[serde(untagged)]
pub enum Id {
    /// An integer id.
    Num(i64),
    /// A string id.
    Str(String),
}

/// An integer that fits `i64`, or a string; nothing else. (Written out
/// rather than derived as `untagged`: that buffers the value and builds
/// an error message for every string id it tries as an integer first,
/// which made reading an answer's id a tenth of a translated round trip.)
impl<'de> Deserialize<'de> for Id {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Id, D::Error> {
        d.deserialize_any(IdVisitor(std::marker::PhantomData))
    }
}

/// An id read only to know it is one: what [`Id`] accepts, nothing kept
/// (no string allocated).
pub(crate) struct ValidId;

impl<'de> Deserialize<'de> for ValidId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<ValidId, D::Error> {
        d.deserialize_any(IdVisitor(std::marker::PhantomData))
    }
}

/// What an id is read into: [`Id`] keeps it, [`ValidId`] only checks it.
trait ReadId {
    fn num(n: i64) -> Self;
    fn str(s: &str) -> Self;
    /// An owned string; taken as it is by those that keep it.
    fn string(s: String) -> Self;
}

impl ReadId for Id {
    fn num(n: i64) -> Self {
        Id::Num(n)
    }
    fn str(s: &str) -> Self {
        Id::Str(s.to_owned())
    }
    fn string(s: String) -> Self {
        Id::Str(s)
    }
}

impl ReadId for ValidId {
    fn num(_: i64) -> Self {
        ValidId
    }
    fn str(_: &str) -> Self {
        ValidId
    }
    fn string(_: String) -> Self {
        ValidId
    }
}

/// The one rule both read by.
struct IdVisitor<T>(std::marker::PhantomData<T>);

impl<T: ReadId> serde::de::Visitor<'_> for IdVisitor<T> {
    type Value = T;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an integer or a string")
    }
    fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<T, E> {
        Ok(T::num(n))
    }
    fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<T, E> {
        i64::try_from(n)
            .map(T::num)
            .map_err(|_| E::invalid_value(serde::de::Unexpected::Unsigned(n), &self))
    }
    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<T, E> {
        Ok(T::str(s))
    }
    fn visit_string<E: serde::de::Error>(self, s: String) -> Result<T, E> {
        Ok(T::string(s))
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Id::Num(n) => write!(f, "{n}"),
            Id::Str(s) => write!(f, "{s:?}"),
        }
    }
}

impl From<i64> for Id {
    fn from(n: i64) -> Self {
        Id::Num(n)
    }
}

impl From<&str> for Id {
    fn from(s: &str) -> Self {
        Id::Str(s.to_owned())
    }
}

/// The `error` member of an error response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorObject {
    /// JSON-RPC or MCP error code.
    pub code: i64,
    /// Human-readable message.
    pub message: String,
    /// Optional structured detail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl ErrorObject {
    /// Builds an error object without data.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }
}

/// A request: has an id and expects exactly one response.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// Correlates the response.
    pub id: Id,
    /// The method name, e.g. `tools/call`.
    pub method: String,
    /// The params object (absent when the sender omitted it).
    pub params: Option<Value>,
}

/// A map keyed by request id, for the maps every request passes through
/// (an upstream's waiting requests, a session's running ones): foldhash
/// instead of SipHash, a few hundred instructions less per request. Its
/// seed is still random per map.
pub type IdMap<V> = std::collections::HashMap<Id, V, foldhash::fast::RandomState>;

/// A notification: no id, no response.
#[derive(Debug, Clone, PartialEq)]
pub struct Notification {
    /// The method name, e.g. `notifications/tasks/status`.
    pub method: String,
    /// The params object (absent when the sender omitted it).
    pub params: Option<Value>,
}

/// A successful response.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    /// The id of the request answered.
    pub id: Id,
    /// The result object.
    pub result: Value,
}

/// An error response. The id is `None` only when the request id could not be
/// read (parse errors).
#[derive(Debug, Clone, PartialEq)]
pub struct ErrorResponse {
    /// The id of the request answered, if known.
    pub id: Option<Id>,
    /// What went wrong.
    pub error: ErrorObject,
}

/// Any JSON-RPC 2.0 message MCP allows on the wire.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// A request.
    Request(Request),
    /// A notification.
    Notification(Notification),
    /// A successful response.
    Response(Response),
    /// An error response.
    Error(ErrorResponse),
}

/// Deserialises a member that is there, `null` included, as `Some`
/// (`Option`'s own reading makes `null` `None`).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// The envelope as it is on the wire; every member optional so the shape
/// can be judged after parsing, with a precise complaint.
#[derive(Serialize, Deserialize)]
struct Envelope {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    jsonrpc: Option<Value>,
    /// `Some(Null)` for `"id": null`, which is not the absent id of a
    /// notification.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    id: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    method: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    params: Option<Value>,
    /// `Some(Null)` for `"result": null`: a success whose value is null
    /// (JSON-RPC allows it), which must reach whoever waits on the id.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<Value>,
}

impl Message {
    /// Parses one message from bytes, refusing batches, oversized input and
    /// envelopes that are not JSON-RPC 2.0.
    pub fn parse(bytes: &[u8]) -> Result<Message, ShimError> {
        Self::parse_bounded(bytes, DEFAULT_MAX_MESSAGE_BYTES)
    }

    /// [`Message::parse`] with an explicit size bound.
    pub fn parse_bounded(bytes: &[u8], max: usize) -> Result<Message, ShimError> {
        if bytes.len() > max {
            return Err(ShimError::InvalidRequest(format!(
                "message of {} bytes exceeds the limit of {max} bytes",
                bytes.len()
            )));
        }
        // Fast path: one pass from bytes straight into the envelope, so the
        // payload tree is built once instead of parsed and then rebuilt.
        // Anything it does not take (non-objects, syntax errors) goes the
        // original way below, so errors read exactly as before.
        if let Ok(FastEnvelope(env)) = from_utf8_json(bytes) {
            return Self::from_envelope(env);
        }
        let value: Value =
            serde_json::from_slice(bytes).map_err(|e| ShimError::Parse(e.to_string()))?;
        Self::from_value(value)
    }

    /// Interprets an already-parsed JSON value as a message.
    pub fn from_value(value: Value) -> Result<Message, ShimError> {
        if value.is_array() {
            return Err(ShimError::InvalidRequest(
                "JSON-RPC batches are not supported by MCP; send one message at a time".into(),
            ));
        }
        if !value.is_object() {
            return Err(ShimError::InvalidRequest(
                "a JSON-RPC message must be a JSON object".into(),
            ));
        }
        let env: Envelope =
            serde_json::from_value(value).map_err(|e| ShimError::InvalidRequest(e.to_string()))?;
        Self::from_envelope(env)
    }

    fn from_envelope(env: Envelope) -> Result<Message, ShimError> {
        if env.jsonrpc.as_ref().and_then(Value::as_str) != Some("2.0") {
            return Err(ShimError::InvalidRequest(
                "\"jsonrpc\" must be the string \"2.0\"".into(),
            ));
        }
        let id = match env.id {
            None => None,
            // A request with a null id is no notification (that has no id
            // at all): taken for one, its sender would wait forever.
            Some(Value::Null) if env.method.is_some() => {
                return Err(ShimError::InvalidRequest(
                    "a request id must be a string or an integer, not null".into(),
                ));
            }
            // How JSON-RPC answers a request whose id could not be read.
            Some(Value::Null) => None,
            Some(v) => Some(parse_id(v)?),
        };
        if let Some(params) = &env.params
            && !params.is_object()
        {
            return Err(ShimError::InvalidRequest(
                "\"params\" must be an object in MCP".into(),
            ));
        }
        // A null result beside a method or an error is read as absent, as
        // before null results were kept.
        let result = match env.result {
            Some(Value::Null) if env.method.is_some() || env.error.is_some() => None,
            result => result,
        };
        match (env.method, result, env.error) {
            (Some(method), None, None) => {
                let method = match method {
                    Value::String(s) => s,
                    _ => {
                        return Err(ShimError::InvalidRequest(
                            "\"method\" must be a string".into(),
                        ));
                    }
                };
                Ok(match id {
                    Some(id) => Message::Request(Request {
                        id,
                        method,
                        params: env.params,
                    }),
                    None => Message::Notification(Notification {
                        method,
                        params: env.params,
                    }),
                })
            }
            (None, Some(result), None) => {
                let id = id.ok_or_else(|| {
                    ShimError::InvalidRequest("a response needs the id of its request".into())
                })?;
                Ok(Message::Response(Response { id, result }))
            }
            (None, None, Some(error)) => {
                let error: ErrorObject = serde_json::from_value(error).map_err(|e| {
                    ShimError::InvalidRequest(format!("malformed \"error\" member: {e}"))
                })?;
                Ok(Message::Error(ErrorResponse { id, error }))
            }
            _ => Err(ShimError::InvalidRequest(
                "a message must have exactly one of \"method\", \"result\" or \"error\"".into(),
            )),
        }
    }

    /// The message as a JSON value (`jsonrpc: "2.0"` included).
    pub fn to_value(&self) -> Value {
        let mut map = Map::new();
        map.insert("jsonrpc".into(), Value::from("2.0"));
        match self {
            Message::Request(r) => {
                map.insert("id".into(), id_value(&r.id));
                map.insert("method".into(), Value::from(r.method.clone()));
                if let Some(p) = &r.params {
                    map.insert("params".into(), p.clone());
                }
            }
            Message::Notification(n) => {
                map.insert("method".into(), Value::from(n.method.clone()));
                if let Some(p) = &n.params {
                    map.insert("params".into(), p.clone());
                }
            }
            Message::Response(r) => {
                map.insert("id".into(), id_value(&r.id));
                map.insert("result".into(), r.result.clone());
            }
            Message::Error(e) => {
                // Both MCP schemas make the id optional but never null.
                if let Some(id) = &e.id {
                    map.insert("id".into(), id_value(id));
                }
                map.insert(
                    "error".into(),
                    serde_json::to_value(&e.error).unwrap_or(Value::Null),
                );
            }
        }
        Value::Object(map)
    }

    /// Serialises the message to a compact JSON string (one line, no newline).
    pub fn to_json(&self) -> String {
        let mut out = Vec::with_capacity(128);
        self.write_json(&mut out);
        // serde_json only writes valid UTF-8.
        String::from_utf8(out).unwrap_or_default()
    }

    /// Writes the compact JSON form into `out` without building an
    /// intermediate `Value` (large results are not copied).
    pub fn write_json(&self, out: &mut Vec<u8>) {
        let env = EnvelopeRef::from(self);
        // Serialising owned JSON values into a Vec cannot fail.
        let _ = serde_json::to_writer(out, &env);
    }

    /// The message as one line of the line transport, newline included.
    pub fn to_line(&self) -> Vec<u8> {
        let mut line = Vec::with_capacity(256);
        self.write_json(&mut line);
        line.push(b'\n');
        line
    }

    /// The id, for requests and responses.
    pub fn id(&self) -> Option<&Id> {
        match self {
            Message::Request(r) => Some(&r.id),
            Message::Response(r) => Some(&r.id),
            Message::Error(e) => e.id.as_ref(),
            Message::Notification(_) => None,
        }
    }

    /// The method, for requests and notifications.
    pub fn method(&self) -> Option<&str> {
        match self {
            Message::Request(r) => Some(&r.method),
            Message::Notification(n) => Some(&n.method),
            _ => None,
        }
    }

    /// The params, for requests and notifications.
    pub fn params(&self) -> Option<&Value> {
        match self {
            Message::Request(r) => r.params.as_ref(),
            Message::Notification(n) => n.params.as_ref(),
            _ => None,
        }
    }

    /// Builds a request.
    pub fn request(id: impl Into<Id>, method: impl Into<String>, params: Value) -> Message {
        Message::Request(Request {
            id: id.into(),
            method: method.into(),
            params: Some(params),
        })
    }

    /// Builds a notification.
    pub fn notification(method: impl Into<String>, params: Value) -> Message {
        Message::Notification(Notification {
            method: method.into(),
            params: Some(params),
        })
    }

    /// Builds a success response.
    pub fn response(id: Id, result: Value) -> Message {
        Message::Response(Response { id, result })
    }

    /// The answer to `id` with `outcome`: a response or an error
    /// response.
    pub fn answer(id: Id, outcome: Result<Reply, ErrorObject>) -> Message {
        match outcome {
            Ok(reply) => reply.into_message(id),
            Err(error) => Message::error(Some(id), error),
        }
    }

    /// Builds an error response.
    pub fn error(id: Option<Id>, error: ErrorObject) -> Message {
        Message::Error(ErrorResponse { id, error })
    }
}

/// [`Envelope`] read straight from bytes, with the semantics of the
/// two-step path (`Value`, then `Envelope` from it): a repeated member keeps
/// its last value, `null` counts as absent, and unknown members are parsed
/// as JSON values (so they are validated the same way) and dropped.
struct FastEnvelope(Envelope);

/// Envelope member names, read without allocating.
enum EnvelopeKey {
    Jsonrpc,
    Id,
    Method,
    Params,
    Result,
    Error,
    Other,
}

impl<'de> Deserialize<'de> for EnvelopeKey {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl serde::de::Visitor<'_> for KeyVisitor {
            type Value = EnvelopeKey;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a member name")
            }
            fn visit_str<E: serde::de::Error>(self, k: &str) -> Result<EnvelopeKey, E> {
                Ok(match k {
                    "jsonrpc" => EnvelopeKey::Jsonrpc,
                    "id" => EnvelopeKey::Id,
                    "method" => EnvelopeKey::Method,
                    "params" => EnvelopeKey::Params,
                    "result" => EnvelopeKey::Result,
                    "error" => EnvelopeKey::Error,
                    _ => EnvelopeKey::Other,
                })
            }
        }
        d.deserialize_identifier(KeyVisitor)
    }
}

impl<'de> Deserialize<'de> for FastEnvelope {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct EnvVisitor;
        impl<'de> serde::de::Visitor<'de> for EnvVisitor {
            type Value = FastEnvelope;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON-RPC message object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<FastEnvelope, A::Error> {
                let mut env = Envelope {
                    jsonrpc: None,
                    id: None,
                    method: None,
                    params: None,
                    result: None,
                    error: None,
                };
                while let Some(key) = map.next_key::<EnvelopeKey>()? {
                    let value: Value = map.next_value()?;
                    // `Option<Value>` reads `null` as `None` in the two-step
                    // path; the id and the result keep it there (`present`),
                    // and here.
                    let unless_null = |v: Value| (!v.is_null()).then_some(v);
                    match key {
                        EnvelopeKey::Jsonrpc => env.jsonrpc = unless_null(value),
                        EnvelopeKey::Id => env.id = Some(value),
                        EnvelopeKey::Method => env.method = unless_null(value),
                        EnvelopeKey::Params => env.params = unless_null(value),
                        EnvelopeKey::Result => env.result = Some(value),
                        EnvelopeKey::Error => env.error = unless_null(value),
                        EnvelopeKey::Other => {}
                    }
                }
                Ok(FastEnvelope(env))
            }
        }
        d.deserialize_map(EnvVisitor)
    }
}

/// JSON text passed on as text: a result read from one peer and written
/// to the other without building its tree (see [`result_answer`]). Always
/// one well-formed JSON value: it is made from text a parser read
/// ([`JsonText::from_raw`]), from pieces of such text joined by the
/// crate's own rules, or by serialising a tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonText(String);

impl JsonText {
    /// The text of `raw`, as it came.
    pub fn from_raw(raw: &serde_json::value::RawValue) -> JsonText {
        JsonText(raw.get().to_owned())
    }

    /// `value`, serialised.
    pub fn of<T: Serialize + ?Sized>(value: &T) -> JsonText {
        // Only maps with keys that are not strings fail to serialise, and
        // no wire type of the crate has one.
        JsonText(serde_json::to_string(value).unwrap_or_else(|_| "null".into()))
    }

    /// Text the caller built from parsed pieces; well-formed by its
    /// construction, which is what the type promises.
    pub(crate) fn trusted(text: String) -> JsonText {
        JsonText(text)
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The tree the text stands for.
    pub fn to_value(&self) -> Value {
        // Well-formed by construction; `Null` only past the parser's
        // nesting limit, which text read by the same parser never is.
        serde_json::from_str(&self.0).unwrap_or(Value::Null)
    }
}

/// The result of a successful answer: a tree, or [`JsonText`] passed on
/// without building one.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// A JSON tree.
    Tree(Value),
    /// JSON text.
    Text(JsonText),
}

impl Reply {
    /// The result as a tree (text is parsed).
    pub fn into_value(self) -> Value {
        match self {
            Reply::Tree(v) => v,
            Reply::Text(t) => t.to_value(),
        }
    }

    /// The answer to `id` carrying this result.
    pub fn into_message(self, id: Id) -> Message {
        Message::response(id, self.into_value())
    }

    /// Writes the answer to `id` carrying this result, as
    /// [`Message::write_json`] writes a response (member order included),
    /// text spliced in as it is.
    pub fn write_answer(&self, out: &mut Vec<u8>, id: &Id) {
        // Serialising ids and values into a Vec cannot fail.
        out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
        let _ = serde_json::to_writer(&mut *out, id);
        out.extend_from_slice(br#","result":"#);
        match self {
            Reply::Tree(v) => {
                let _ = serde_json::to_writer(&mut *out, v);
            }
            Reply::Text(t) => out.extend_from_slice(t.as_str().as_bytes()),
        }
        out.push(b'}');
    }
}

/// A success answer as [`result_answer`] takes it: exactly the three
/// members, each once.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ResultAnswer<'a> {
    #[serde(borrow)]
    jsonrpc: &'a str,
    id: Id,
    #[serde(borrow)]
    result: &'a serde_json::value::RawValue,
}

/// Reads a success answer (`jsonrpc` "2.0", an integer or string id, a
/// `result`, nothing else, nothing twice) without building its result:
/// its id and the result's text. `None` for anything else, doubtful
/// shapes included: parse those in full, which also says what is wrong.
///
/// ```
/// use mcp_tasks_shim::jsonrpc::{Id, result_answer};
/// let (id, result) = result_answer(r#"{"jsonrpc":"2.0","id":3,"result":{"a":[1]}}"#).unwrap();
/// assert_eq!((id, result.get()), (Id::Num(3), r#"{"a":[1]}"#));
/// assert!(result_answer(r#"{"jsonrpc":"2.0","id":3,"error":{"code":1,"message":"x"}}"#).is_none());
/// ```
pub fn result_answer(text: &str) -> Option<(Id, &serde_json::value::RawValue)> {
    let a: ResultAnswer<'_> = serde_json::from_str(text).ok()?;
    (a.jsonrpc == "2.0").then_some((a.id, a.result))
}

/// What a relay needs to know of a message, read without building its
/// payload (see [`peek`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Peeked {
    /// A request: its id and method.
    Request {
        /// The request id.
        id: Id,
        /// The method.
        method: String,
    },
    /// A notification.
    Notification {
        /// The method.
        method: String,
    },
    /// A successful answer.
    Response {
        /// The id of the request it answers.
        id: Id,
    },
}

/// Reads the envelope of `bytes` without building the payload: `Some` only
/// for a message [`Message::parse`] accepts as a request, notification or
/// result answer (the same rules: `jsonrpc` "2.0", an integer or string
/// id, an object `params`, exactly one of `method` and `result`, `null`
/// read as absent). Error answers, `"result": null` answers and anything
/// doubtful give `None`: parse those in full, which also explains what is
/// wrong.
///
/// ```
/// use mcp_tasks_shim::jsonrpc::{Id, Peeked, peek};
/// let p = peek(br#"{"jsonrpc":"2.0","id":3,"result":{"big":[1,2,3]}}"#);
/// assert_eq!(p, Some(Peeked::Response { id: Id::Num(3) }));
/// assert_eq!(peek(br#"{"jsonrpc":"2.0","id":3,"params":[]}"#), None);
/// ```
pub fn peek(bytes: &[u8]) -> Option<Peeked> {
    let PeekEnvelope {
        version,
        id,
        method,
        params,
        result,
        error,
    } = from_utf8_json(bytes).ok()?;
    let params_ok = matches!(params, Shape::Absent | Shape::Object);
    if version != Shape::Version || !params_ok || error != Shape::Absent {
        return None;
    }
    let id = match id {
        None => None,
        // A null id: the full parse refuses a request with one.
        Some(Value::Null) => return None,
        Some(v) => Some(parse_id(v).ok()?),
    };
    match (method, result, id) {
        (Some(method), Shape::Absent, Some(id)) => Some(Peeked::Request { id, method }),
        (Some(method), Shape::Absent, None) => Some(Peeked::Notification { method }),
        (None, result, Some(id)) if result != Shape::Absent => Some(Peeked::Response { id }),
        _ => None,
    }
}

/// [`peek`] for a request, with its params as the text they came in:
/// its id, its method and its params (`None` when absent or `null`).
/// `None` for anything [`peek`] does not read as a request, and for params
/// with more than [`TEXT_PARAMS_MAX_OPENINGS`] `{` or `[` in them: read as
/// text, params are not parsed far enough to meet the nesting limit a full
/// parse enforces, so those that might are left to it.
///
/// ```
/// use mcp_tasks_shim::jsonrpc::{Id, peek_request};
/// let line = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name": "x"}}"#;
/// let (id, method, params) = peek_request(line).unwrap();
/// assert_eq!((id, method.as_str(), params.unwrap().get()), (Id::Num(7), "tools/call", r#"{"name": "x"}"#));
/// assert!(peek_request(br#"{"jsonrpc":"2.0","id":7,"method":"m","params":[1]}"#).is_none());
/// assert!(peek_request(br#"{"jsonrpc":"2.0","method":"m"}"#).is_none());
/// ```
pub fn peek_request(bytes: &[u8]) -> Option<(Id, String, Option<&RawValue>)> {
    let env: PeekEnvelope<Option<&RawValue>> = from_utf8_json(bytes).ok()?;
    let params_ok = env.params.is_none_or(|p| {
        let text = p.get().as_bytes();
        text.first() == Some(&b'{')
            && text.iter().filter(|&&b| b == b'{' || b == b'[').count() <= TEXT_PARAMS_MAX_OPENINGS
    });
    if env.version != Shape::Version
        || !params_ok
        || env.result != Shape::Absent
        || env.error != Shape::Absent
    {
        return None;
    }
    let id = match env.id? {
        Value::Null => return None,
        v => parse_id(v).ok()?,
    };
    Some((id, env.method?, env.params))
}

/// The most `{` and `[` (in strings too) params [`peek_request`] keeps as
/// text: far enough below the parser's nesting limit of 128 that the full
/// parse would take them too.
pub const TEXT_PARAMS_MAX_OPENINGS: usize = 100;

/// `serde_json::from_slice`, with the UTF-8 check done once for the whole
/// message instead of string by string (a sixth of the work of reading a
/// typical message's envelope). The same results: JSON text is UTF-8
/// throughout, and invalid bytes outside strings are syntax errors either
/// way; invalid input is refused here, and callers that need the reason
/// parse it again.
fn from_utf8_json<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, ()> {
    let text = std::str::from_utf8(bytes).map_err(drop)?;
    serde_json::from_str(text).map_err(drop)
}

/// The envelope as [`peek`] reads it (the last of repeated members wins,
/// as in [`FastEnvelope`]).
struct PeekEnvelope<P = Shape> {
    version: Shape,
    id: Option<Value>,
    method: Option<String>,
    /// [`Shape`], or the text itself for [`peek_request`].
    params: P,
    result: Shape,
    error: Shape,
}

/// What a member held, its content skipped: read, it checks what a full
/// parse checks (numbers in range, string escapes, nesting).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Shape {
    /// Missing or `null`.
    #[default]
    Absent,
    /// An object.
    Object,
    /// The string "2.0".
    Version,
    /// Anything else.
    Other,
}

impl<'de> Deserialize<'de> for Shape {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::{IgnoredAny, MapAccess, SeqAccess};
        struct ShapeVisitor;
        impl<'de> serde::de::Visitor<'de> for ShapeVisitor {
            type Value = Shape;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_unit<E>(self) -> Result<Shape, E> {
                Ok(Shape::Absent)
            }
            fn visit_none<E>(self) -> Result<Shape, E> {
                Ok(Shape::Absent)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Shape, E> {
                Ok(Shape::Other)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Shape, E> {
                Ok(Shape::Other)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Shape, E> {
                Ok(Shape::Other)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Shape, E> {
                Ok(Shape::Other)
            }
            fn visit_str<E>(self, v: &str) -> Result<Shape, E> {
                Ok(if v == "2.0" {
                    Shape::Version
                } else {
                    Shape::Other
                })
            }
            // Nested values are read as `Shape` too, not `IgnoredAny`: that
            // way the parser's recursion limit applies exactly as when it
            // builds a `Value`, and peek refuses what parse refuses.
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Shape, A::Error> {
                while seq.next_element::<Shape>()?.is_some() {}
                Ok(Shape::Other)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Shape, A::Error> {
                while map.next_entry::<IgnoredAny, Shape>()?.is_some() {}
                Ok(Shape::Object)
            }
        }
        d.deserialize_any(ShapeVisitor)
    }
}

impl<'de, P: Deserialize<'de> + Default> Deserialize<'de> for PeekEnvelope<P> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct PeekVisitor<P>(std::marker::PhantomData<P>);
        impl<'de, P: Deserialize<'de> + Default> serde::de::Visitor<'de> for PeekVisitor<P> {
            type Value = PeekEnvelope<P>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON-RPC message object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<PeekEnvelope<P>, A::Error> {
                let mut env = PeekEnvelope {
                    version: Shape::Absent,
                    id: None,
                    method: None,
                    params: P::default(),
                    result: Shape::Absent,
                    error: Shape::Absent,
                };
                while let Some(key) = map.next_key::<EnvelopeKey>()? {
                    match key {
                        EnvelopeKey::Jsonrpc => env.version = map.next_value()?,
                        // `Value`, not `Option`: a null id must not read
                        // as absent.
                        EnvelopeKey::Id => env.id = Some(map.next_value::<Value>()?),
                        // A method that is not a string (or null) fails
                        // here, and the full parse says why.
                        EnvelopeKey::Method => env.method = map.next_value()?,
                        EnvelopeKey::Params => env.params = map.next_value()?,
                        EnvelopeKey::Result => env.result = map.next_value()?,
                        EnvelopeKey::Error => env.error = map.next_value()?,
                        // Read as `Shape` for the recursion limit (see there).
                        EnvelopeKey::Other => {
                            map.next_value::<Shape>()?;
                        }
                    }
                }
                Ok(env)
            }
        }
        d.deserialize_map(PeekVisitor(std::marker::PhantomData))
    }
}

/// Borrowing twin of [`Envelope`] so serialisation does not clone payloads.
#[derive(Serialize)]
struct EnvelopeRef<'a> {
    jsonrpc: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<IdOrNull<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    method: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a ErrorObject>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum IdOrNull<'a> {
    Id(&'a Id),
}

impl<'a> From<&'a Message> for EnvelopeRef<'a> {
    fn from(m: &'a Message) -> Self {
        let mut env = EnvelopeRef {
            jsonrpc: "2.0",
            id: None,
            method: None,
            params: None,
            result: None,
            error: None,
        };
        match m {
            Message::Request(r) => {
                env.id = Some(IdOrNull::Id(&r.id));
                env.method = Some(&r.method);
                env.params = r.params.as_ref();
            }
            Message::Notification(n) => {
                env.method = Some(&n.method);
                env.params = n.params.as_ref();
            }
            Message::Response(r) => {
                env.id = Some(IdOrNull::Id(&r.id));
                env.result = Some(&r.result);
            }
            Message::Error(e) => {
                env.id = e.id.as_ref().map(IdOrNull::Id);
                env.error = Some(&e.error);
            }
        }
        env
    }
}

impl Serialize for Message {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        EnvelopeRef::from(self).serialize(s)
    }
}

fn id_value(id: &Id) -> Value {
    match id {
        Id::Num(n) => Value::from(*n),
        Id::Str(s) => Value::from(s.clone()),
    }
}

fn parse_id(v: Value) -> Result<Id, ShimError> {
    match v {
        Value::String(s) => Ok(Id::Str(s)),
        Value::Number(n) => n.as_i64().map(Id::Num).ok_or_else(|| {
            // Past i64 serde_json reads an integer as u64, then as f64.
            let too_big = n.is_u64()
                || n.as_f64()
                    .is_some_and(|f| f.fract() == 0.0 && f.abs() >= 2f64.powi(63));
            ShimError::InvalidRequest(if too_big {
                format!(
                    "numeric id {n} is out of range: it must fit a signed 64-bit integer \
                     (send a string id instead)"
                )
            } else {
                format!(
                    "numeric id {n} is not written as an integer (no fraction, no exponent): \
                     an id is a string or an integer"
                )
            })
        }),
        _ => Err(ShimError::InvalidRequest(
            "\"id\" must be a string or an integer".into(),
        )),
    }
}

/// Best-effort id recovery from bytes that failed to parse as a message, so
/// the error response can still be correlated: from the whole message, or,
/// when that cannot be read (valid JSON nested deeper than the parser's
/// limit, say), from the members before the trouble, unless those show an
/// answer: an error under that id would read as the answer to the
/// reader's own request of that id.
pub fn salvage_id(bytes: &[u8]) -> Option<Id> {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(v) => parse_id(v.get("id")?.clone()).ok(),
        Err(_) => Some(salvage_prefix(bytes)).filter(|p| !p.is_answer)?.id,
    }
}

/// The id of a result answer that opens as serialisers write one,
/// `{"jsonrpc":"2.0","id":ID,"result":`, with an integer id (no leading
/// zero) or a string id without escapes: read from those bytes alone, for
/// a reader that hands the line to whoever waits for that id, which then
/// reads the whole of it. `None` for any other opening (other orders,
/// spaces, escapes): [`salvage_prefix`] reads those.
///
/// ```
/// use mcp_tasks_shim::jsonrpc::{Id, answer_id};
/// assert_eq!(answer_id(r#"{"jsonrpc":"2.0","id":12,"result":{}}"#), Some(Id::Num(12)));
/// assert_eq!(answer_id(r#"{"jsonrpc":"2.0","id":"a-1","result":{}}"#), Some(Id::Str("a-1".into())));
/// assert_eq!(answer_id(r#"{"jsonrpc":"2.0","id":1,"error":{}}"#), None);
/// assert_eq!(answer_id(r#"{"id":1,"jsonrpc":"2.0","result":{}}"#), None);
/// ```
pub fn answer_id(line: &str) -> Option<Id> {
    answer_id_and_rest(line).map(|(id, _)| id)
}

/// [`answer_id`], and the rest of the line after the id: all of the
/// answer but its id, from `,"result":` on.
///
/// ```
/// use mcp_tasks_shim::jsonrpc::{Id, answer_id_and_rest};
/// let (id, rest) = answer_id_and_rest(r#"{"jsonrpc":"2.0","id":12,"result":{}}"#).unwrap();
/// assert_eq!((id, rest), (Id::Num(12), r#","result":{}}"#));
/// ```
pub fn answer_id_and_rest(line: &str) -> Option<(Id, &str)> {
    let (id, rest) = opening_id_and_rest(line)?;
    let id = match id {
        IdText::Num(n) => Id::Num(n),
        IdText::Str(s) => Id::Str(s.to_owned()),
    };
    Some((id, rest))
}

/// The rest of an answer after its id, as [`answer_id_and_rest`] reads
/// it, for a caller that needs no id (and so allocates none).
///
/// ```
/// use mcp_tasks_shim::jsonrpc::answer_rest;
/// assert_eq!(answer_rest(r#"{"jsonrpc":"2.0","id":"a","result":{}}"#), Some(r#","result":{}}"#));
/// assert_eq!(answer_rest(r#"{"jsonrpc":"2.0","id":1,"error":{}}"#), None);
/// ```
pub fn answer_rest(line: &str) -> Option<&str> {
    opening_id_and_rest(line).map(|(_, rest)| rest)
}

/// An id as the text of an answer's opening holds it.
enum IdText<'a> {
    Num(i64),
    Str(&'a str),
}

/// [`answer_id_and_rest`], the id borrowed from the line.
fn opening_id_and_rest(line: &str) -> Option<(IdText<'_>, &str)> {
    let rest = line.strip_prefix(r#"{"jsonrpc":"2.0","id":"#)?;
    // Bytes, not chars: every byte looked for is ASCII, so each position
    // found is a char boundary.
    let (id, rest) = if let Some(quoted) = rest.strip_prefix('"') {
        let end = quoted
            .bytes()
            .position(|b| b == b'"' || b == b'\\' || b < b' ')?;
        if quoted.as_bytes()[end] != b'"' {
            return None;
        }
        (IdText::Str(&quoted[..end]), &quoted[end + 1..])
    } else {
        let end = rest
            .bytes()
            .position(|b| b != b'-' && !b.is_ascii_digit())?;
        let digits = rest[..end].trim_start_matches('-');
        if digits.len() > 1 && digits.starts_with('0') {
            return None;
        }
        (IdText::Num(rest[..end].parse().ok()?), &rest[end..])
    };
    rest.starts_with(r#","result":"#).then_some((id, rest))
}

/// What the first bytes of a message too large to read whole say about
/// it (see [`salvage_prefix`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Prefix {
    /// The message's `id`, if it comes before the cut.
    pub id: Option<Id>,
    /// A `result` or `error` member came before the cut: an answer.
    pub is_answer: bool,
}

/// Reads `id` (and whether the message is an answer) from the start of a
/// message cut short, such as a line over the size limit, so that the
/// request it belongs to can still be answered instead of left waiting.
/// Members are read in order and skipped without being kept; reading
/// stops as soon as the id and the kind are known, or at the cut. An id
/// written after a large member is not found.
///
/// ```
/// use mcp_tasks_shim::jsonrpc::{salvage_prefix, Id};
/// let cut = br#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"aaaa"#;
/// let p = salvage_prefix(cut);
/// assert_eq!(p.id, Some(Id::Num(7)));
/// assert!(p.is_answer);
/// ```
pub fn salvage_prefix(bytes: &[u8]) -> Prefix {
    use serde::de::{DeserializeSeed, Error as _, IgnoredAny, MapAccess, Visitor};

    struct Seed<'a>(&'a mut Prefix);
    impl<'de> DeserializeSeed<'de> for Seed<'_> {
        type Value = ();
        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_map(self)
        }
    }
    impl<'de> Visitor<'de> for Seed<'_> {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a JSON-RPC message")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            let mut kind_known = false;
            while let Some(key) = map.next_key::<String>()? {
                match key.as_str() {
                    // Read here (a later duplicate too, which is skipped),
                    // so every member's value is read exactly once.
                    "id" => {
                        let id = map.next_value::<Value>()?;
                        if self.0.id.is_none() {
                            self.0.id = parse_id(id).ok();
                        }
                    }
                    // The kind is known before the member's (large) value.
                    "result" | "error" => {
                        self.0.is_answer = true;
                        kind_known = true;
                    }
                    "method" => kind_known = true,
                    _ => {}
                }
                if kind_known && self.0.id.is_some() {
                    // Nothing more to learn: stop without reading the rest.
                    return Err(A::Error::custom("enough"));
                }
                if key != "id" {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            Ok(())
        }
    }

    let mut found = Prefix::default();
    let mut de = serde_json::Deserializer::from_slice(bytes);
    // Fails at the cut (or where it stopped on purpose): what was read stays.
    let _ = Seed(&mut found).deserialize(&mut de);
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The opening's id is the one the full parse reads, or `None` (and
    /// the general reader decides): never another id.
    #[test]
    fn answer_id_reads_only_what_it_can_vouch_for() {
        let line = |id: &str| format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#);
        for (id, read) in [
            ("7", Some(Id::Num(7))),
            ("-3", Some(Id::Num(-3))),
            ("0", Some(Id::Num(0))),
            ("9223372036854775807", Some(Id::Num(i64::MAX))),
            (r#""a b""#, Some(Id::Str("a b".into()))),
            (r#""""#, Some(Id::Str(String::new()))),
            ("07", None),
            ("1e3", None),
            ("1.0", None),
            ("9223372036854775808", None),
            ("-", None),
            (r#""a\"b""#, None),
            (r#""\u0041""#, None),
            ("null", None),
        ] {
            let l = line(id);
            assert_eq!(answer_id(&l), read, "{l}");
            if let Some(read) = read {
                let Ok(Message::Response(r)) = Message::parse(l.as_bytes()) else {
                    panic!("{l} parses");
                };
                assert_eq!(r.id, read, "{l}");
            }
        }
        assert_eq!(answer_id(r#"{"jsonrpc":"2.0","id":1 ,"result":{}}"#), None);
        assert_eq!(answer_id(r#"{"jsonrpc":"2.0","id":1,"method":"m"}"#), None);
    }

    /// An id reads as an integer that fits `i64` or a string, and nothing
    /// else, in the answers read without a tree as in the others.
    #[test]
    fn ids_are_integers_or_strings() {
        let id = |text: &str| serde_json::from_str::<Id>(text).ok();
        assert_eq!(id("7"), Some(Id::Num(7)));
        assert_eq!(id("-7"), Some(Id::Num(-7)));
        assert_eq!(id(r#""s-1""#), Some(Id::Str("s-1".into())));
        assert_eq!(id(r#""\u0041""#), Some(Id::Str("A".into())));
        for refused in [
            "9223372036854775808",
            "1.0",
            "1e3",
            "null",
            "true",
            "[1]",
            "{}",
        ] {
            assert_eq!(id(refused), None, "{refused}");
        }
        let answer = |id: &str| format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#);
        assert_eq!(
            result_answer(&answer("3")).map(|(id, _)| id),
            Some(Id::Num(3))
        );
        assert!(result_answer(&answer("3.5")).is_none());
    }

    /// Only a plain success answer is read as text: anything doubtful is
    /// left to the full parse, which explains what is wrong.
    #[test]
    fn result_answer_takes_plain_answers_only() {
        let (id, result) = result_answer(r#"{"result":{"a":[1, 2]},"id":"x","jsonrpc":"2.0"}"#)
            .expect("members in any order");
        assert_eq!((id, result.get()), (Id::Str("x".into()), r#"{"a":[1, 2]}"#));
        for doubtful in [
            r#"{"jsonrpc":"2.0","id":1,"result":{},"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"m"}}"#,
            r#"{"jsonrpc":"1.0","id":1,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":null,"result":{}}"#,
            r#"{"jsonrpc":"2.0","result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{},"extra":1}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"a":}}"#,
        ] {
            assert!(result_answer(doubtful).is_none(), "{doubtful}");
        }
    }

    /// A reply written as text is the same line as the message it stands
    /// for, member order included.
    #[test]
    fn text_replies_write_the_response_line() {
        let result = json!({"content": [{"type": "text", "text": "é\n\"q\""}]});
        for id in [Id::Num(4), Id::Str("a\"b".into())] {
            let mut tree = Vec::new();
            Reply::Tree(result.clone()).write_answer(&mut tree, &id);
            let mut text = Vec::new();
            Reply::Text(JsonText::of(&result)).write_answer(&mut text, &id);
            assert_eq!(text, tree);
            assert_eq!(
                tree,
                Message::response(id, result.clone()).to_json().into_bytes()
            );
        }
    }

    #[test]
    fn ids_are_salvaged_from_valid_json_too_deep_to_read() {
        let deep = |kind: &str| {
            format!(
                r#"{{"jsonrpc":"2.0","id":4,{kind}:{{"x":{}{}}}}}"#,
                "[".repeat(200),
                "]".repeat(200)
            )
        };
        let request = deep(r#""method":"tools/call","params""#);
        assert!(Message::parse(request.as_bytes()).is_err());
        assert_eq!(salvage_id(request.as_bytes()), Some(Id::Num(4)));
        // An answer's id is not one to answer under.
        let answer = deep(r#""result""#);
        assert_eq!(salvage_id(answer.as_bytes()), None);
        assert_eq!(salvage_prefix(answer.as_bytes()).id, Some(Id::Num(4)));
        assert_eq!(salvage_id(b"{not json"), None);
    }

    fn parse(v: Value) -> Result<Message, ShimError> {
        Message::parse(v.to_string().as_bytes())
    }

    /// Whatever `peek` accepts, the full parse accepts as the same kind,
    /// id and method.
    #[test]
    fn peek_agrees_with_parse() {
        let cases = [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"a":[1,{"b":null}]}}"#,
            r#"{"jsonrpc":"2.0","id":"x","method":"m"}"#,
            r#"{"jsonrpc":"2.0","method":"n","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":[1]}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":null}"#,
            r#"{"jsonrpc":"2.0","id":null,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1.5,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":[1]}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":null}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":7}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"x"}}"#,
            r#"{"jsonrpc":"1.0","id":1,"method":"m"}"#,
            r#"{"id":1,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","jsonrpc":3,"id":1,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{},"x":{"y":[true]}}"#,
            r#"[1]"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{}"#,
        ];
        let mut peeked = 0;
        for case in cases {
            let Some(p) = peek(case.as_bytes()) else {
                continue;
            };
            peeked += 1;
            let m = Message::parse(case.as_bytes()).unwrap_or_else(|e| panic!("{case}: {e}"));
            let agrees = match (&p, &m) {
                (Peeked::Request { id, method }, Message::Request(r)) => {
                    *id == r.id && *method == r.method
                }
                (Peeked::Notification { method }, Message::Notification(n)) => *method == n.method,
                (Peeked::Response { id }, Message::Response(r)) => *id == r.id,
                _ => false,
            };
            assert!(agrees, "{case}: {p:?} vs {m:?}");
        }
        assert_eq!(peeked, 7, "the valid ones are peeked");
    }

    /// The UTF-8 check is made once per message, not per string: text in
    /// any language still passes, and a stray byte anywhere is refused by
    /// both readers, with the parser's reason.
    #[test]
    fn utf8_is_checked_once_for_the_whole_message() {
        let ok = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"grüße","arguments":{"text":"日本語 ✓","emoji":"\ud83d\ude00"}}}"#;
        assert!(peek(ok.as_bytes()).is_some());
        let Ok(Message::Request(r)) = Message::parse(ok.as_bytes()) else {
            panic!("valid UTF-8 parses");
        };
        assert_eq!(r.params.unwrap()["arguments"]["emoji"], "😀");
        // A lone byte, a truncated sequence, an encoded surrogate; in a
        // value and in a key.
        let mut bad_messages = Vec::new();
        for bytes in [&[0xffu8][..], &[0xc3], &[0xed, 0xa0, 0x80]] {
            for (head, tail) in [
                (
                    &br#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":"ok "#[..],
                    &br#""}}"#[..],
                ),
                (
                    &br#"{"jsonrpc":"2.0","id":1,"result":{""#[..],
                    &br#"":1}}"#[..],
                ),
            ] {
                bad_messages.push([head, bytes, tail].concat());
            }
        }
        for bad in &bad_messages {
            let bad = bad.as_slice();
            assert_eq!(peek(bad), None);
            match Message::parse(bad) {
                Err(ShimError::Parse(why)) => assert!(why.contains("unicode"), "{why}"),
                other => panic!("invalid UTF-8 must not parse: {other:?}"),
            }
        }
    }

    #[test]
    fn kinds_are_told_apart() {
        assert!(matches!(
            parse(json!({"jsonrpc":"2.0","id":"a","method":"x"})),
            Ok(Message::Request(_))
        ));
        assert!(matches!(
            parse(json!({"jsonrpc":"2.0","method":"x"})),
            Ok(Message::Notification(_))
        ));
        assert!(matches!(
            parse(json!({"jsonrpc":"2.0","id":1,"result":{}})),
            Ok(Message::Response(_))
        ));
        assert!(matches!(
            parse(json!({"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}})),
            Ok(Message::Error(ErrorResponse { id: None, .. }))
        ));
    }

    /// JSON-RPC lets a success carry `null`; read as "no result", the
    /// answer was refused and whoever asked waited for good.
    #[test]
    fn a_null_result_is_an_answer() {
        let text = r#"{"jsonrpc":"2.0","id":4,"result":null}"#;
        for m in [
            Message::parse(text.as_bytes()),
            Message::from_value(serde_json::from_str(text).unwrap()),
        ] {
            match m {
                Ok(Message::Response(r)) => {
                    assert_eq!(r.id, Id::Num(4));
                    assert_eq!(r.result, Value::Null);
                }
                other => panic!("{other:?}"),
            }
        }
        let back = Message::parse(text.as_bytes()).unwrap().to_json();
        assert_eq!(
            serde_json::from_str::<Value>(&back).unwrap()["result"],
            Value::Null
        );
        assert!(back.contains("\"result\":null"), "{back}");
        // Beside a method or an error it stays what it was: absent.
        assert!(matches!(
            parse(json!({"jsonrpc":"2.0","id":1,"method":"m","result":null})),
            Ok(Message::Request(_))
        ));
        assert!(matches!(
            parse(json!({"jsonrpc":"2.0","id":1,"result":null,"error":{"code":1,"message":"x"}})),
            Ok(Message::Error(_))
        ));
    }

    #[test]
    fn batches_are_refused_with_invalid_request() {
        let err = parse(json!([{"jsonrpc":"2.0","id":1,"method":"ping"}])).unwrap_err();
        assert_eq!(err.code(), -32600);
        assert!(err.to_string().contains("batch"));
    }

    #[test]
    fn malformed_json_is_a_parse_error() {
        assert_eq!(Message::parse(b"{\"jsonrpc\":").unwrap_err().code(), -32700);
    }

    #[test]
    fn bad_envelopes_are_invalid_requests() {
        for bad in [
            json!({"id":1,"method":"x"}),
            json!({"jsonrpc":"1.0","id":1,"method":"x"}),
            json!({"jsonrpc":"2.0","id":1.5,"method":"x"}),
            json!({"jsonrpc":"2.0","id":{},"method":"x"}),
            json!({"jsonrpc":"2.0","id":1,"method":"x","params":[1]}),
            json!({"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":""}}),
            json!({"jsonrpc":"2.0","result":{}}),
            json!("string"),
        ] {
            assert_eq!(parse(bad.clone()).unwrap_err().code(), -32600, "{bad}");
        }
    }

    #[test]
    fn oversized_input_is_refused() {
        let err = Message::parse_bounded(&[b' '; 100], 10).unwrap_err();
        assert_eq!(err.code(), -32600);
    }

    #[test]
    fn round_trip_keeps_unknown_fields_in_params_and_results() {
        let src = json!({"jsonrpc":"2.0","id":"x","result":{"z":1,"a":{"deep":[1,2]}}});
        let m = parse(src.clone()).unwrap();
        assert_eq!(m.to_value(), src);
        let text = m.to_json();
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), src);
    }

    #[test]
    fn one_pass_parse_matches_the_two_step_path() {
        for text in [
            r#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":[1,2.5,"s",null]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"x","id":2}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"x","params":null}"#,
            r#"{"jsonrpc":"2.0","id":"a","result":null}"#,
            r#"{"jsonrpc":"2.0","id":"a","result":{"z":1,"a":2},"extra":{"deep":[{}]}}"#,
            r#"{"jsonrpc":"2.0","id":"a","error":{"code":-1,"message":"m","data":[1]}}"#,
            r#"{"jsonrpc":"2.0","method":"x","unknown":1e400}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"x"}"#,
            r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"x"} trailing"#,
            r#""string""#,
            "{",
            "",
        ] {
            let two_step = serde_json::from_slice::<Value>(text.as_bytes())
                .map_err(|e| ShimError::Parse(e.to_string()))
                .and_then(Message::from_value);
            assert_eq!(Message::parse(text.as_bytes()), two_step, "{text}");
        }
    }

    #[test]
    fn numeric_ids_out_of_range_or_fractional_say_which() {
        for (line, want) in [
            ("18446744073709551616", "out of range"),
            ("9223372036854775808", "out of range"),
            ("-1e300", "out of range"),
            ("1.5", "not written as an integer"),
            ("1e3", "not written as an integer"),
        ] {
            let bytes = format!(r#"{{"jsonrpc":"2.0","id":{line},"method":"ping"}}"#);
            let e = Message::parse(bytes.as_bytes()).unwrap_err();
            assert!(
                matches!(&e, ShimError::InvalidRequest(m) if m.contains(want)),
                "{line}: {e}"
            );
        }
        let ok = Message::parse(br#"{"jsonrpc":"2.0","id":-9223372036854775808,"method":"ping"}"#);
        assert!(ok.is_ok(), "{ok:?}");
    }

    #[test]
    fn the_start_of_a_cut_message_gives_its_id_and_kind() {
        let cases: [(&[u8], Option<Id>, bool); 7] = [
            (
                br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"a":"xx"#,
                Some(Id::Num(3)),
                false,
            ),
            (
                br#"{"jsonrpc":"2.0","method":"tools/call","id":"r-1","params":{"#,
                Some(Id::from("r-1")),
                false,
            ),
            (
                br#"{"id":9,"jsonrpc":"2.0","result":{"content":[{"text":"#,
                Some(Id::Num(9)),
                true,
            ),
            (
                br#"{"jsonrpc":"2.0","error":{"code":1,"message":"x"},"id":4"#,
                Some(Id::Num(4)),
                true,
            ),
            // The id after the cut, or no valid id: nothing to answer.
            (
                br#"{"jsonrpc":"2.0","method":"tools/call","params":{"a":"xxxx"#,
                None,
                false,
            ),
            (
                br#"{"jsonrpc":"2.0","id":null,"method":"x","params":{"#,
                None,
                false,
            ),
            // A repeated id: the first counts, and reading goes on past it.
            (
                br#"{"id":1,"id":2,"jsonrpc":"2.0","result":{"a":"#,
                Some(Id::Num(1)),
                true,
            ),
        ];
        for (bytes, id, is_answer) in cases {
            let p = salvage_prefix(bytes);
            let text = String::from_utf8_lossy(bytes);
            assert_eq!(p.id, id, "{text}");
            assert_eq!(p.is_answer, is_answer, "{text}");
        }
        assert_eq!(salvage_prefix(b"[1,2"), Prefix::default());
        assert_eq!(salvage_prefix(b"not json"), Prefix::default());
    }

    #[test]
    fn a_null_id_is_not_a_notification() {
        for text in [
            r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","method":"ping","id":null,"params":{}}"#,
        ] {
            let m = Message::parse(text.as_bytes());
            assert!(
                matches!(&m, Err(ShimError::InvalidRequest(e)) if e.contains("null")),
                "{text}: {m:?}"
            );
            assert_eq!(peek(text.as_bytes()), None, "{text}");
            let v: Value = serde_json::from_str(text).unwrap();
            assert_eq!(Message::from_value(v), m, "{text}: both paths agree");
        }
        // How JSON-RPC answers a request whose id could not be read.
        let e =
            Message::parse(br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}"#);
        assert!(
            matches!(e, Ok(Message::Error(ErrorResponse { id: None, .. }))),
            "{e:?}"
        );
    }

    #[test]
    fn error_with_unknown_id_leaves_the_id_out() {
        // The MCP schemas allow an absent id on errors, not a null one.
        let m = Message::error(None, ErrorObject::new(-32700, "bad"));
        assert!(m.to_value().get("id").is_none());
        let v = serde_json::from_str::<Value>(&m.to_json()).unwrap();
        assert!(v.get("id").is_none());
        assert_eq!(v["error"]["code"], -32700);
    }
}
