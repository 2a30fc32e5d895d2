//! Rows on JSON text instead of trees: a plain answer passes through the
//! shim on the hot path without its result being built as a tree and
//! written again. Each function here gives the same JSON as its tree twin
//! or says `None`, and the caller then reads the text as a tree.

use std::borrow::Cow;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

use serde_json::Value;

use crate::jsonrpc::{Id, JsonText, Request};
use crate::revision::META_SERVER_INFO;
use crate::wire::modern::result_type;

/// [`super::session::result_to_legacy_owned`] on a result's text: the
/// members a 2025-11-25 client has no use for are left out and the others
/// are copied as they came, in their order. `None` when the result is not
/// a plain one (its `resultType` is `task` or `input_required`), is not
/// an object, repeats a member (the tree keeps one of them) or has a
/// `_meta` that is not an object: read those as a tree.
///
/// ```
/// use mcp_tasks_shim::translate::raw::plain_result_to_legacy;
/// use mcp_tasks_shim::jsonrpc::result_answer;
/// let answer = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s","version":"1"}}}}"#;
/// let (_, result) = result_answer(answer).unwrap();
/// let modern = mcp_tasks_shim::jsonrpc::JsonText::from_raw(result);
/// let legacy = plain_result_to_legacy(&modern, "tools/call").unwrap();
/// assert_eq!(legacy.as_str(), r#"{"content":[]}"#);
/// ```
pub fn plain_result_to_legacy(result: &JsonText, method: &str) -> Option<JsonText> {
    let mut de = serde_json::Deserializer::from_str(result.as_str());
    let legacy = LegacyResult { method }.deserialize(&mut de).ok()?;
    de.end().ok()?;
    Some(legacy)
}

/// [`plain_result_to_legacy`] on a whole answer (`jsonrpc` "2.0", an id,
/// a `result`, nothing else, nothing twice), read in one pass: the result
/// is not copied out of the answer to be read again. `None` for any other
/// answer (an error, a result that is not plain): parse those.
///
/// ```
/// use mcp_tasks_shim::translate::raw::plain_answer_to_legacy;
/// let answer = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s","version":"1"}}}}"#;
/// assert_eq!(plain_answer_to_legacy(answer, "tools/call").unwrap().as_str(), r#"{"content":[]}"#);
/// let task = r#"{"jsonrpc":"2.0","id":1,"result":{"taskId":"t","resultType":"task"}}"#;
/// assert!(plain_answer_to_legacy(task, "tools/call").is_none());
/// ```
pub fn plain_answer_to_legacy(answer: &str, method: &str) -> Option<JsonText> {
    struct Answer<'m> {
        method: &'m str,
    }
    impl<'de> Visitor<'de> for Answer<'_> {
        type Value = JsonText;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a JSON-RPC result answer")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<JsonText, A::Error> {
            let (mut version, mut id, mut result) = (None, None, None);
            while let Some(key) = map.next_key::<Key<'de>>()? {
                let fresh = match &*key.0 {
                    "jsonrpc" => version
                        .replace(map.next_value::<Key<'de>>()? == "2.0")
                        .is_none(),
                    // Read only as valid: whose answer it is was known
                    // before (its waiter was found by it).
                    "id" => id
                        .replace(map.next_value::<crate::jsonrpc::ValidId>()?)
                        .is_none(),
                    "result" => result
                        .replace(map.next_value_seed(LegacyResult {
                            method: self.method,
                        })?)
                        .is_none(),
                    _ => false,
                };
                if !fresh {
                    return Err(serde::de::Error::custom("not a plain result answer"));
                }
            }
            match (version, id, result) {
                (Some(true), Some(_), Some(result)) => Ok(result),
                _ => Err(serde::de::Error::custom("not a plain result answer")),
            }
        }
    }
    let mut de = serde_json::Deserializer::from_str(answer);
    let legacy = de.deserialize_map(Answer { method }).ok()?;
    de.end().ok()?;
    Some(legacy)
}

/// Reads a result object as its legacy text (see
/// [`plain_result_to_legacy`]); fails on anything that is not a plain
/// result, or repeats a member.
struct LegacyResult<'m> {
    method: &'m str,
}

impl<'de> DeserializeSeed<'de> for LegacyResult<'_> {
    type Value = JsonText;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<JsonText, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for LegacyResult<'_> {
    type Value = JsonText;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a plain result object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<JsonText, A::Error> {
        let mut out = String::with_capacity(256);
        out.push('{');
        let mut members = Members::new();
        while let Some(key) = members.next(&mut map)? {
            if key == "resultType" {
                if !is_plain(map.next_value::<&RawValue>()?) {
                    return Err(serde::de::Error::custom("not a plain result"));
                }
            } else if super::session::dropped_for_legacy(&key.0, self.method) {
                map.next_value::<serde::de::IgnoredAny>()?;
            } else if key == "_meta" {
                // Written in place, and taken back if nothing is left of it.
                let before = out.len();
                push_member(&mut out, key, "");
                let opened = out.len();
                map.next_value_seed(MetaWithoutServerInfo(&mut out))?;
                if out.len() == opened + 2 {
                    out.truncate(before);
                }
            } else {
                push_member(&mut out, key, map.next_value::<&RawValue>()?.get());
            }
        }
        out.push('}');
        Ok(JsonText::trusted(out))
    }
}

/// Writes `_meta` without the server's name, as [`super::remove_meta_key`]
/// has it, into the text being written: an object, `{}` when nothing is
/// left. Fails when it is no object, or repeats a member: the tree says
/// what to make of those.
struct MetaWithoutServerInfo<'o>(&'o mut String);

impl<'de> DeserializeSeed<'de> for MetaWithoutServerInfo<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for MetaWithoutServerInfo<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a _meta object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let out = self.0;
        out.push('{');
        let first = out.len();
        let mut members = Members::new();
        while let Some(key) = members.next(&mut map)? {
            if key == META_SERVER_INFO {
                map.next_value::<serde::de::IgnoredAny>()?;
            } else {
                if out.len() > first {
                    out.push(',');
                }
                push_key(out, key);
                out.push_str(map.next_value::<&RawValue>()?.get());
            }
        }
        out.push('}');
        Ok(())
    }
}

/// A client's 2025-11-25 `tools/call` whose translation leaves its params
/// as they are: it asks for no task, carries no `_meta` (no progress token
/// to route; the session's `_meta` goes in whole) and none of the members
/// the translation removes. Its params stay the text the client sent, so
/// the call goes upstream without its arguments being built as a tree and
/// written again. Read with [`client_request`].
#[derive(Debug)]
pub struct PlainCall {
    /// The client's request id.
    pub id: Id,
    /// `params.name`.
    pub name: String,
    /// `params`, as sent.
    pub params: PlainParams,
}

impl PlainCall {
    /// The same request as a tree, for the paths that need one.
    pub fn into_request(self) -> Request {
        self.params.call_request(self.id)
    }
}

/// The params of a [`PlainCall`] (or of a request about one task): the
/// text of an object without `_meta`, so a session's `_meta` is added by
/// writing it before the closing brace ([`PlainParams::write_with_meta`]).
#[derive(Debug)]
pub struct PlainParams(Box<RawValue>);

impl PlainParams {
    /// The `tools/call` request `id` with these params, as a tree.
    pub fn call_request(&self, id: Id) -> Request {
        Request {
            id,
            method: "tools/call".into(),
            params: Some(self.to_value()),
        }
    }

    /// `{"taskId":…}`, the params of a request about one task, written
    /// without a tree (`None` only if serialising a string failed, which
    /// it does not).
    pub fn task_id(task_id: &str) -> Option<PlainParams> {
        #[derive(serde::Serialize)]
        struct TaskId<'a> {
            #[serde(rename = "taskId")]
            task_id: &'a str,
        }
        serde_json::value::to_raw_value(&TaskId { task_id })
            .ok()
            .map(PlainParams)
    }

    /// The text, as the client sent it.
    pub fn get(&self) -> &str {
        self.0.get()
    }

    /// Appends the params with `"_meta":meta` (the text of an object) as
    /// their last member: what writing the tree with `_meta` added gives,
    /// the client's own spacing aside.
    pub fn write_with_meta(&self, out: &mut Vec<u8>, meta: &str) {
        // An object's text: `{`, the members, `}` (a parser's raw value
        // has no space around it).
        let text = self.0.get();
        let open = text[..text.len() - 1].trim_end();
        out.extend_from_slice(open.as_bytes());
        if open.len() > 1 {
            out.push(b',');
        }
        out.extend_from_slice(br#""_meta":"#);
        out.extend_from_slice(meta.as_bytes());
        out.push(b'}');
    }

    /// The tree the text stands for.
    pub fn to_value(&self) -> Value {
        // Read by the same parser, within the nesting it accepts
        // (`jsonrpc::TEXT_PARAMS_MAX_OPENINGS`).
        serde_json::from_str(self.0.get()).unwrap_or_else(|_| Value::Object(Default::default()))
    }
}

/// A request's params as an upstream writes them: a tree, or a
/// [`PlainCall`]'s text.
#[derive(Debug, Clone, Copy)]
pub enum Params<'a> {
    /// Parsed params.
    Tree(&'a Value),
    /// A plain call's params, as the client sent them.
    Text(&'a PlainParams),
}

impl Params<'_> {
    /// The tree, for an upstream that sends trees.
    pub fn to_value(self) -> Value {
        match self {
            Params::Tree(v) => v.clone(),
            Params::Text(t) => t.to_value(),
        }
    }
}

/// A client's request as a legacy session takes it from a line.
#[derive(Debug)]
pub enum ClientRequest {
    /// A `tools/call` whose params stay text.
    Plain(PlainCall),
    /// A `tasks/get` whose params are its `taskId` alone.
    Poll(Poll),
    /// Any other request, its params parsed.
    Tree(Request),
}

/// Reads a client's line as a request, a [`PlainCall`] where it is one:
/// its envelope read once, and only the params of a request that is no
/// plain call built as a tree. `None` for anything else (a notification,
/// an answer, a line [`crate::jsonrpc::peek_request`] leaves to the full
/// parse): parse those with [`crate::jsonrpc::Message::parse`], which
/// also says what is wrong.
///
/// ```
/// use mcp_tasks_shim::translate::raw::{ClientRequest, client_request};
/// let line = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"greet","arguments":{}}}"#;
/// let Some(ClientRequest::Plain(call)) = client_request(line) else { panic!() };
/// assert_eq!((call.name.as_str(), call.params.get()), ("greet", r#"{"name":"greet","arguments":{}}"#));
/// let task = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"greet","task":{}}}"#;
/// assert!(matches!(client_request(task), Some(ClientRequest::Tree(_))));
/// assert!(client_request(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).is_none());
/// ```
pub fn client_request(line: &[u8]) -> Option<ClientRequest> {
    let (id, method, params) = crate::jsonrpc::peek_request(line)?;
    if method == "tools/call"
        && let Some(params) = params
        && let Some(name) = plain_call_name(params)
    {
        return Some(ClientRequest::Plain(PlainCall {
            id,
            name,
            params: PlainParams(params.to_owned()),
        }));
    }
    if method == "tasks/get"
        && let Some(task_id) = params.and_then(poll_task_id)
    {
        return Some(ClientRequest::Poll(Poll { id, task_id }));
    }
    let params = match params {
        // An object within the nesting the parser takes (`peek_request`).
        Some(params) => Some(serde_json::from_str(params.get()).ok()?),
        None => None,
    };
    Some(ClientRequest::Tree(Request { id, method, params }))
}

/// A client's `tasks/get` whose params are `{"taskId": …}` and nothing
/// else: the common poll, read without a tree.
#[derive(Debug, Clone, PartialEq)]
pub struct Poll {
    /// The request's id.
    pub id: Id,
    /// The task asked about.
    pub task_id: String,
}

impl Poll {
    /// The same request as a tree.
    pub fn into_request(self) -> Request {
        Request {
            id: self.id,
            method: "tasks/get".into(),
            params: Some(serde_json::json!({ "taskId": self.task_id })),
        }
    }
}

/// The `taskId` of `params` made of that string alone; `None` for any
/// other params (another member, a repeated one, a value of another
/// type), which are read as a tree.
fn poll_task_id(params: &RawValue) -> Option<String> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct PollParams {
        #[serde(rename = "taskId")]
        task_id: String,
    }
    serde_json::from_str::<PollParams>(params.get())
        .ok()
        .map(|p| p.task_id)
}

/// The tool a `tools/call`'s `params` name, if the call is plain (see
/// [`PlainCall`]). Every value is read as the full parse reads it (a
/// number out of range, say, is refused there and must not go upstream).
fn plain_call_name(params: &RawValue) -> Option<String> {
    struct CallParams;
    impl<'de> Visitor<'de> for CallParams {
        type Value = String;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("the params of a plain call")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<String, A::Error> {
            let mut members = Members::new();
            let mut name = None;
            while let Some(key) = members.next(&mut map)? {
                match &*key.0 {
                    "name" => name = Some(map.next_value::<String>()?),
                    "task" | "_meta" | "inputResponses" | "requestState" => {
                        return Err(serde::de::Error::custom("not a plain call"));
                    }
                    _ => {
                        map.next_value::<crate::jsonrpc::Shape>()?;
                    }
                }
            }
            name.ok_or_else(|| serde::de::Error::custom("no name"))
        }
    }
    let mut de = serde_json::Deserializer::from_str(params.get());
    let name = de.deserialize_map(CallParams).ok()?;
    de.end().ok()?;
    Some(name)
}

/// `resultType`'s value read as the trees read it: anything but the
/// strings `task` and `input_required` is a plain (complete) result.
fn is_plain(value: &RawValue) -> bool {
    let text = value.get();
    if !text.starts_with('"') {
        return true;
    }
    // Only a string with escapes needs decoding to be compared.
    let kind = if text.contains('\\') {
        match serde_json::from_str::<String>(text) {
            Ok(s) => Cow::Owned(s),
            Err(_) => return true,
        }
    } else {
        Cow::Borrowed(&text[1..text.len() - 1])
    };
    !matches!(&*kind, result_type::TASK | result_type::INPUT_REQUIRED)
}

/// Appends `"key":value` to an object being written (a comma first unless
/// it is the first member).
fn push_member(out: &mut String, key: &Key<'_>, value: &str) {
    if out.len() > 1 {
        out.push(',');
    }
    push_key(out, key);
    out.push_str(value);
}

/// Appends `"key":`.
fn push_key(out: &mut String, key: &Key<'_>) {
    match key {
        // Read without escapes, so the text is the key as written.
        Key(Cow::Borrowed(k)) => {
            out.push('"');
            out.push_str(k);
            out.push('"');
        }
        Key(Cow::Owned(k)) => out.push_str(&serde_json::Value::from(k.as_str()).to_string()),
    }
    out.push(':');
}

/// A member name, borrowed from the text when it has no escapes.
struct Key<'a>(Cow<'a, str>);

/// The member names of one object as it is read: a repeated one is
/// refused, since the tree keeps only one of them and the text rows could
/// not say which.
struct Members<'de>(smallvec::SmallVec<[Key<'de>; 8]>);

impl<'de> Members<'de> {
    fn new() -> Self {
        Members(smallvec::SmallVec::new())
    }

    /// The next member's name, unless it repeats an earlier one.
    fn next<A: MapAccess<'de>>(&mut self, map: &mut A) -> Result<Option<&Key<'de>>, A::Error> {
        let Some(key) = map.next_key::<Key<'de>>()? else {
            return Ok(None);
        };
        if self.0.iter().any(|k| k.0 == key.0) {
            return Err(serde::de::Error::custom("repeated member"));
        }
        self.0.push(key);
        Ok(self.0.last())
    }
}

impl PartialEq<str> for Key<'_> {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for Key<'_> {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl<'de> serde::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a member name")
            }
            fn visit_borrowed_str<E>(self, k: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(k)))
            }
            fn visit_str<E>(self, k: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(k.to_owned())))
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::translate::session::result_to_legacy_owned;
    use proptest::prelude::*;
    use serde_json::{Value, json};

    fn raw(v: &Value) -> JsonText {
        JsonText::of(v)
    }

    fn text(s: &str) -> JsonText {
        let raw: Box<RawValue> = serde_json::from_str(s).unwrap();
        JsonText::from_raw(&raw)
    }

    /// The text row gives the tree row's JSON, or `None` exactly where a
    /// tree is needed.
    #[test]
    fn text_and_tree_agree_on_the_shapes_that_matter() {
        let server = json!({"name": "s", "version": "1"});
        let cases = [
            json!({"content": [{"type": "text", "text": "hi"}], "isError": false, "resultType": "complete", "_meta": {META_SERVER_INFO: server}}),
            json!({"resultType": "complete", "content": [], "_meta": {META_SERVER_INFO: server, "k": 1}}),
            json!({"content": [], "_meta": {}}),
            json!({"content": [], "resultType": 7}),
            json!({"content": [], "resultType": null}),
            json!({"tools": [], "ttlMs": 5, "cacheScope": "private", "resultType": "complete"}),
            json!({"x\"y": "é\n", "résumé": {"ttlMs": 1}}),
            json!({}),
        ];
        for case in cases {
            for method in ["tools/call", "tools/list"] {
                let text = plain_result_to_legacy(&raw(&case), method).expect("plain");
                let tree = result_to_legacy_owned(case.clone(), method);
                assert_eq!(text.to_value(), tree, "{case} via {method}");
            }
        }
        for not_plain in [
            json!({"resultType": "task", "taskId": "t"}),
            json!({"resultType": "input_required", "inputRequests": {}}),
            json!({"resultType": "\u{0074}ask"}),
            // A `_meta` that is no object (the schemas allow none): the
            // tree decides what becomes of it.
            json!({"content": [], "_meta": "odd"}),
            json!([1, 2]),
            json!("done"),
            Value::Null,
        ] {
            assert_eq!(
                plain_result_to_legacy(&raw(&not_plain), "tools/call"),
                None,
                "{not_plain}"
            );
        }
        let escaped = text(r#"{"resultType":"\u0074ask"}"#);
        assert_eq!(plain_result_to_legacy(&escaped, "tools/call"), None);
        let repeated = text(r#"{"a":1,"a":2}"#);
        assert_eq!(plain_result_to_legacy(&repeated, "tools/call"), None);
        let repeated_meta = text(r#"{"_meta":{"a":1,"a":2}}"#);
        assert_eq!(plain_result_to_legacy(&repeated_meta, "tools/call"), None);
    }

    /// Only a result answer reads as one: not an error, not a repeated or
    /// unknown member, not another version.
    #[test]
    fn only_result_answers_read_in_one_pass() {
        let ok = r#"{"jsonrpc":"2.0","id":"a","result":{"content":[]}}"#;
        assert_eq!(
            plain_answer_to_legacy(ok, "tools/call").unwrap().as_str(),
            r#"{"content":[]}"#
        );
        for not in [
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"m"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"id":2,"result":{}}"#,
            r#"{"jsonrpc":"1.0","jsonrpc":"2.0","id":1,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{},"extra":1}"#,
            r#"{"jsonrpc":"1.0","id":1,"result":{}}"#,
            r#"{"jsonrpc":"2.0","result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1.5,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{}} trailing"#,
        ] {
            assert_eq!(plain_answer_to_legacy(not, "tools/call"), None, "{not}");
        }
    }

    /// Member order is the upstream's, less what is left out, and values
    /// keep their text (a number is not rewritten).
    #[test]
    fn members_keep_their_order_and_their_text() {
        let modern = text(
            r#"{"resultType":"complete","z":1e2,"a":[ 1, 2 ],"_meta":{"k":true,"io.modelcontextprotocol/serverInfo":{}},"m":"\u00e9"}"#,
        );
        let legacy = plain_result_to_legacy(&modern, "tools/call").unwrap();
        assert_eq!(
            legacy.as_str(),
            r#"{"z":1e2,"a":[ 1, 2 ],"_meta":{"k":true},"m":"\u00e9"}"#
        );
    }

    fn json_leaf() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            "[a-z\"\\\\é]{0,6}".prop_map(Value::from),
        ]
    }

    fn json_value() -> impl Strategy<Value = Value> {
        json_leaf().prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                prop::collection::btree_map("[a-z_]{1,4}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// One of `known` (each as likely as any other name), or another.
    fn member_name(known: &'static [&'static str]) -> impl Strategy<Value = String> {
        let weight = known.len() as u32;
        prop_oneof![
            weight => prop::sample::select(known).prop_map(str::to_owned),
            1 => "[a-z\"é]{1,5}",
        ]
    }

    proptest! {
        /// Any object: the text row's JSON is the tree row's, unless the
        /// text row declines, which it does only for a non-plain result or
        /// a `_meta` that is no object. Read from the whole answer, the
        /// text is the same.
        #[test]
        fn text_row_matches_tree_row(
            members in prop::collection::vec((member_name(&["resultType", "ttlMs", "cacheScope", "_meta", "content"]), json_value()), 0..6),
            with_server in any::<bool>(),
            cacheable in any::<bool>(),
        ) {
            let mut obj = serde_json::Map::new();
            for (k, v) in members {
                obj.insert(k, v);
            }
            if with_server {
                let meta = crate::translate::meta_mut(&mut obj);
                meta.insert(META_SERVER_INFO.into(), json!({"name": "s"}));
            }
            let modern = Value::Object(obj);
            let method = if cacheable { "tools/list" } else { "tools/call" };
            let tree = result_to_legacy_owned(modern.clone(), method);
            let answer = json!({"jsonrpc": "2.0", "id": 4, "result": modern}).to_string();
            prop_assert_eq!(
                plain_answer_to_legacy(&answer, method),
                plain_result_to_legacy(&raw(&modern), method)
            );
            match plain_result_to_legacy(&raw(&modern), method) {
                Some(text) => prop_assert_eq!(text.to_value(), tree),
                None => prop_assert!(
                    matches!(
                        modern["resultType"].as_str(),
                        Some(result_type::TASK | result_type::INPUT_REQUIRED)
                    ) || modern.get("_meta").is_some_and(|m| !m.is_object())
                ),
            }
        }
    }

    fn call_params() -> impl Strategy<Value = Value> {
        let name = member_name(&[
            "name",
            "arguments",
            "task",
            "_meta",
            "inputResponses",
            "requestState",
        ]);
        prop::collection::vec((name, json_value()), 0..5)
            .prop_map(|members| Value::Object(members.into_iter().collect()))
    }

    /// The session's `_meta` of a 2025-11-25 client.
    fn session_meta() -> crate::translate::session::ModernMeta {
        let client = crate::translate::session::LegacyClient::from_initialize(Some(&json!({
            "protocolVersion": "2025-11-25", "capabilities": {"sampling": {}},
            "clientInfo": {"name": "c", "version": "1"}})))
        .unwrap();
        crate::translate::session::ModernMeta::for_client(&client)
    }

    /// Written with its params as text, a plain call is the JSON written
    /// from its tree, whatever the client's spacing.
    #[test]
    fn text_params_write_as_the_tree_does() {
        let meta = session_meta();
        for params in [
            r#"{"name":"greet","arguments":{"name":"bench"}}"#,
            r#"{ "name" : "greet" , "arguments" : { "a" : [ 1 , 2 ] } }"#,
            r#"{"name":"g\u00e9","x":1e2}"#,
        ] {
            let line =
                format!(r#"{{"jsonrpc":"2.0","id":"r1","method":"tools/call","params":{params}}}"#);
            let Some(ClientRequest::Plain(call)) = client_request(line.as_bytes()) else {
                panic!("{params} is a plain call");
            };
            let (mut text, mut tree) = (Vec::new(), Vec::new());
            let id = Id::Str("u7".into());
            meta.write_request_with(&mut text, &id, "tools/call", Params::Text(&call.params));
            let parsed: Value = serde_json::from_str(params).unwrap();
            meta.write_request(&mut tree, &id, "tools/call", Some(&parsed));
            let (text, tree): (Value, Value) = (
                serde_json::from_slice(&text).unwrap(),
                serde_json::from_slice(&tree).unwrap(),
            );
            assert_eq!(text, tree, "{params}");
            // The session's `_meta` comes last, as from the tree.
            let keys: Vec<_> = text["params"]
                .as_object()
                .unwrap()
                .keys()
                .cloned()
                .collect();
            assert_eq!(keys.last().map(String::as_str), Some("_meta"), "{params}");
        }
    }

    /// What is not a plain call: another method, a task asked for, a
    /// `_meta`, a name that is no string, a repeated member; params too
    /// deep to read as text; lines that are no request.
    #[test]
    fn only_plain_calls_stay_text() {
        let line = |method: &str, params: &str| {
            format!(r#"{{"jsonrpc":"2.0","id":1,"method":"{method}","params":{params}}}"#)
        };
        for params in [
            r#"{"name":"t","task":{"ttl":1000}}"#,
            r#"{"name":"t","_meta":{"progressToken":1}}"#,
            r#"{"name":"t","\u005fmeta":{}}"#,
            r#"{"name":"t","inputResponses":{}}"#,
            r#"{"name":"t","requestState":"s"}"#,
            r#"{"name":7}"#,
            r#"{"arguments":{}}"#,
            r#"{"name":"t","name":"u"}"#,
            // Refused by the full parse, so not sent upstream either.
            r#"{"name":"t","arguments":{"x":1e400}}"#,
            r#"{"name":"t","arguments":{"x":"\ud800"}}"#,
        ] {
            let l = line("tools/call", params);
            // A tree, or (what no tree holds) the full parse's to refuse.
            let read = client_request(l.as_bytes());
            assert!(!matches!(read, Some(ClientRequest::Plain(_))), "{params}");
        }
        // (A `tasks/get` of the same params is a poll: see
        // `a_poll_is_the_task_id_alone_read_as_the_full_parse`.)
        let other = line("tasks/result", r#"{"taskId":"t"}"#);
        assert!(matches!(
            client_request(other.as_bytes()),
            Some(ClientRequest::Tree(_))
        ));
        let deep = format!("{}1{}", "[".repeat(101), "]".repeat(101));
        let deep = line(
            "tools/call",
            &format!(r#"{{"name":"t","arguments":{deep}}}"#),
        );
        assert!(client_request(deep.as_bytes()).is_none());
        for not_request in [
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[]}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}"#,
        ] {
            assert!(
                client_request(not_request.as_bytes()).is_none(),
                "{not_request}"
            );
        }
    }

    /// A `tasks/get` is read as a poll only when its params are the
    /// task id alone, and then as the full parse reads it.
    #[test]
    fn a_poll_is_the_task_id_alone_read_as_the_full_parse() {
        let line = |params: &str| {
            format!(r#"{{"jsonrpc":"2.0","id":"p","method":"tasks/get","params":{params}}}"#)
        };
        for (params, poll) in [
            (r#"{"taskId":"t1"}"#, true),
            (r#"{ "taskId" : "t\u0031" }"#, true),
            (r#"{"taskId":"t1","_meta":{"progressToken":1}}"#, false),
            (r#"{"taskId":"t1","taskId":"t2"}"#, false),
            (r#"{"taskId":1}"#, false),
            (r#"{}"#, false),
        ] {
            let line = line(params);
            let parsed = match crate::jsonrpc::Message::parse(line.as_bytes()).unwrap() {
                crate::jsonrpc::Message::Request(r) => r,
                other => panic!("{other:?}"),
            };
            let read = match client_request(line.as_bytes()).expect("a request") {
                ClientRequest::Poll(p) => {
                    assert!(poll, "{line} read as a poll");
                    assert_eq!(p.task_id, "t1");
                    p.into_request()
                }
                ClientRequest::Tree(req) => {
                    assert!(!poll, "{line} read as a tree");
                    req
                }
                ClientRequest::Plain(call) => panic!("{call:?}"),
            };
            assert_eq!(read, parsed, "{line}");
        }
    }

    proptest! {
        /// Whatever the params, the request read from the line is the
        /// one the full parse reads, as text or as a tree.
        #[test]
        fn client_request_reads_as_the_full_parse(
            params in call_params(),
            method in prop_oneof![Just("tools/call"), Just("tasks/get")],
        ) {
            let line = json!({"jsonrpc": "2.0", "id": 5, "method": method, "params": params}).to_string();
            let parsed = match crate::jsonrpc::Message::parse(line.as_bytes()).unwrap() {
                crate::jsonrpc::Message::Request(r) => r,
                other => panic!("{other:?}"),
            };
            let read = match client_request(line.as_bytes()).expect("a request") {
                ClientRequest::Plain(call) => {
                    prop_assert_eq!(Some(call.name.as_str()), params["name"].as_str());
                    call.into_request()
                }
                ClientRequest::Poll(poll) => poll.into_request(),
                ClientRequest::Tree(req) => req,
            };
            prop_assert_eq!(read, parsed);
        }
    }
}
