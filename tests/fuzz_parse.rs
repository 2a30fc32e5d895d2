//! Fuzzing the JSON-RPC parser (`jsonrpc::Message`): arbitrary JSON,
//! arbitrary JSON-RPC shapes, truncated, oversized, invalid UTF-8, batches
//! and deep nesting. See docs/fuzzing.md.
//!
//! Properties:
//! - parsing never panics and never overflows the stack;
//! - a refusal maps to an error object a peer can be sent: a code in the
//!   JSON-RPC reserved range, a non-empty message, and (with the salvaged
//!   id) an error response valid for both revisions' schemas;
//! - a parsed message re-serialises to one line of JSON that parses back
//!   to the same message (both serialisers agree);
//! - the one-pass fast path reads exactly what the two-step path reads;
//! - the size bound holds at every size.

mod fuzz_gen;
mod support;

use std::collections::BTreeSet;
use std::sync::Mutex;

use fuzz_gen::*;
use mcp_tasks_shim::error::ShimError;
use mcp_tasks_shim::jsonrpc::{self, Message, Peeked, salvage_id};
use proptest::prelude::*;
use serde_json::Value;
use support::schema::{Revision, validate};

/// What a caller that refused `bytes` would send back.
fn check_refusal(bytes: &[u8], err: &ShimError) -> Result<(), TestCaseError> {
    let obj = err.to_error_object();
    prop_assert!(
        is_reserved_code(obj.code),
        "code {} outside -32768..=-32000",
        obj.code
    );
    prop_assert!(!obj.message.is_empty());
    let reply = Message::error(salvage_id(bytes), obj).to_value();
    check_jsonrpc(&reply).map_err(TestCaseError::fail)?;
    // Schema validity depends only on the code and the id's type; checking
    // each combination once keeps the debug-build run short.
    static CHECKED: Mutex<BTreeSet<(i64, u8)>> = Mutex::new(BTreeSet::new());
    let id_kind = match reply.get("id") {
        None => 0,
        Some(Value::String(_)) => 1,
        Some(_) => 2,
    };
    if CHECKED
        .lock()
        .unwrap()
        .insert((reply["error"]["code"].as_i64().unwrap_or(0), id_kind))
    {
        for rev in [Revision::Legacy, Revision::Modern] {
            validate(rev, &reply, None).map_err(TestCaseError::fail)?;
        }
    }
    Ok(())
}

fn check_round_trip(msg: &Message) -> Result<(), TestCaseError> {
    let text = msg.to_json();
    prop_assert!(!text.contains('\n'), "a message must serialise to one line");
    let back = Message::parse(text.as_bytes());
    prop_assert_eq!(back.as_ref(), Ok(msg), "re-parse of {}", text);
    // The streaming writer and the Value builder must agree.
    let as_value: Value =
        serde_json::from_str(&text).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(&as_value, &msg.to_value());
    check_envelope(&as_value).or_else(|e| {
        // The parser accepts any JSON as `result` (JSON-RPC does); the
        // envelope checker only insists on the member set.
        if matches!(msg, Message::Response(_)) {
            Ok(())
        } else {
            Err(TestCaseError::fail(e))
        }
    })?;
    Ok(())
}

/// The two-step reference path the fast parser must match.
fn two_step(bytes: &[u8]) -> Result<Message, ShimError> {
    serde_json::from_slice::<Value>(bytes)
        .map_err(|e| ShimError::Parse(e.to_string()))
        .and_then(Message::from_value)
}

fn check_bytes(bytes: &[u8]) -> Result<(), TestCaseError> {
    let parsed = Message::parse(bytes);
    prop_assert_eq!(&parsed, &two_step(bytes), "fast path disagrees");
    // The relay lane's envelope peek never accepts what the parser refuses,
    // and reads the same kind, id and method.
    if let Some(p) = jsonrpc::peek(bytes) {
        let agrees = match (&p, &parsed) {
            (Peeked::Request { id, method }, Ok(Message::Request(r))) => {
                *id == r.id && *method == r.method
            }
            (Peeked::Notification { method }, Ok(Message::Notification(n))) => *method == n.method,
            (Peeked::Response { id }, Ok(Message::Response(r))) => *id == r.id,
            _ => false,
        };
        prop_assert!(agrees, "peek {:?} vs parse {:?}", p, parsed);
    }
    match &parsed {
        Ok(msg) => check_round_trip(msg)?,
        Err(e) => check_refusal(bytes, e)?,
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(file!(), 1000))]

    #[test]
    fn damaged_bytes_parse_or_refuse_cleanly(bytes in arb_wire_bytes()) {
        check_bytes(&bytes)?;
    }

    #[test]
    fn message_shaped_json_parses_or_refuses_cleanly(v in arb_message_value()) {
        check_bytes(v.to_string().as_bytes())?;
        // The pretty form (newlines and indentation) reads the same.
        let pretty = serde_json::to_vec_pretty(&v).unwrap();
        prop_assert_eq!(Message::parse(&pretty), Message::parse(v.to_string().as_bytes()));
    }

    #[test]
    fn the_size_bound_holds_at_every_size(v in arb_message_value(), slack in 0usize..4) {
        let bytes = v.to_string().into_bytes();
        let max = bytes.len().saturating_sub(slack);
        let r = Message::parse_bounded(&bytes, max);
        if bytes.len() > max {
            match r {
                Err(ShimError::InvalidRequest(m)) => prop_assert!(m.contains("exceeds"), "{}", m),
                other => prop_assert!(false, "{} bytes over a bound of {} gave {:?}", bytes.len(), max, other),
            }
        } else {
            prop_assert_eq!(r, Message::parse(&bytes));
        }
    }
}

/// Nesting far past serde_json's recursion limit is refused, not a crash,
/// on every path that parses client bytes (message, id salvage).
#[test]
fn very_deep_nesting_is_refused_without_overflow() {
    for depth in [127, 128, 129, 1_000, 100_000, 1_000_000] {
        for shape in 0..4 {
            let bytes = deep(depth, shape);
            let r = Message::parse(&bytes);
            if depth > 200 {
                assert!(r.is_err(), "depth {depth} shape {shape} parsed");
            }
            if let Err(e) = &r {
                check_refusal(&bytes, e).unwrap();
            }
            let _ = salvage_id(&bytes);
        }
    }
}

/// A message far over the bound is refused before any parsing.
#[test]
fn oversized_input_is_refused_with_invalid_request() {
    let mut big = br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":""#.to_vec();
    big.extend(std::iter::repeat_n(b'x', 1 << 20));
    big.extend_from_slice(br#""}}"#);
    let e = Message::parse_bounded(&big, 1 << 19).unwrap_err();
    assert_eq!(e.code(), -32600);
    check_refusal(&big, &e).unwrap();
    assert!(Message::parse_bounded(&big, big.len()).is_ok());
}
