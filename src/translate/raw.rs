//! Rows on JSON text instead of trees: a plain answer passes through the
//! shim on the hot path without its result being built as a tree and
//! written again. Each function here gives the same JSON as its tree twin
//! or says `None`, and the caller then reads the text as a tree.

use std::borrow::Cow;

use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

use crate::jsonrpc::JsonText;
use crate::revision::META_SERVER_INFO;
use crate::wire::modern::result_type;

/// [`super::session::result_to_legacy_owned`] on a result's text: the
/// members a 2025-11-25 client has no use for are left out and the others
/// are copied as they came, in their order. `None` when the result is not
/// a plain one (its `resultType` is `task` or `input_required`), is not
/// an object, or repeats a member (the tree keeps one of them): read
/// those as a tree.
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
    let members = members(result.as_str())?;
    let mut out = String::with_capacity(result.as_str().len());
    out.push('{');
    for (key, value) in &members {
        if key == "resultType" {
            if !is_plain(value) {
                return None;
            }
            continue;
        }
        if super::session::dropped_for_legacy(&key.0, method) {
            continue;
        }
        if key == "_meta" {
            if let Some(meta) = meta_without_server_info(value)? {
                push_member(&mut out, key, &meta);
            }
            continue;
        }
        push_member(&mut out, key, value.get());
    }
    out.push('}');
    Some(JsonText::trusted(out))
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

/// `_meta` without the server's name, as [`super::remove_meta_key`] has
/// it: `Some(None)` when nothing is left of it, the text unchanged when it
/// is not an object or does not name the server; `None` when it repeats a
/// member.
fn meta_without_server_info(meta: &RawValue) -> Option<Option<Cow<'_, str>>> {
    if !meta.get().starts_with('{') {
        return Some(Some(Cow::Borrowed(meta.get())));
    }
    let members = members(meta.get())?;
    if members.is_empty() {
        return Some(None);
    }
    if !members.iter().any(|(k, _)| k == META_SERVER_INFO) {
        return Some(Some(Cow::Borrowed(meta.get())));
    }
    let mut out = String::with_capacity(meta.get().len());
    out.push('{');
    for (key, value) in members.iter().filter(|(k, _)| k != META_SERVER_INFO) {
        push_member(&mut out, key, value.get());
    }
    out.push('}');
    Some((out.len() > 2).then_some(Cow::Owned(out)))
}

/// Appends `"key":value` to an object being written (a comma first unless
/// it is the first member).
fn push_member(out: &mut String, key: &Key<'_>, value: &str) {
    if out.len() > 1 {
        out.push(',');
    }
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
    out.push_str(value);
}

/// A member name, borrowed from the text when it has no escapes.
struct Key<'a>(Cow<'a, str>);

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

/// The members of an object's text, each value as its text; `None` when
/// the text is not an object or repeats a member.
fn members(object: &str) -> Option<Vec<(Key<'_>, &RawValue)>> {
    struct Members;
    impl<'de> Visitor<'de> for Members {
        type Value = Vec<(Key<'de>, &'de RawValue)>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out: Self::Value = Vec::with_capacity(map.size_hint().unwrap_or(8));
            while let Some(key) = map.next_key::<Key<'de>>()? {
                if out.iter().any(|(k, _)| k.0 == key.0) {
                    return Err(serde::de::Error::custom("repeated member"));
                }
                out.push((key, map.next_value()?));
            }
            Ok(out)
        }
    }
    let mut de = serde_json::Deserializer::from_str(object);
    let members = de.deserialize_map(Members).ok()?;
    de.end().ok()?;
    Some(members)
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
            json!({"content": [], "_meta": "odd"}),
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

    fn member_name() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("resultType".to_owned()),
            Just("ttlMs".to_owned()),
            Just("cacheScope".to_owned()),
            Just("_meta".to_owned()),
            Just("content".to_owned()),
            "[a-z\"é]{1,5}",
        ]
    }

    proptest! {
        /// Any object: the text row's JSON is the tree row's, unless the
        /// text row declines, which it does only for a non-plain result.
        #[test]
        fn text_row_matches_tree_row(
            members in prop::collection::vec((member_name(), json_value()), 0..6),
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
            match plain_result_to_legacy(&raw(&modern), method) {
                Some(text) => prop_assert_eq!(text.to_value(), tree),
                None => prop_assert!(matches!(
                    modern["resultType"].as_str(),
                    Some(result_type::TASK | result_type::INPUT_REQUIRED)
                )),
            }
        }
    }
}
