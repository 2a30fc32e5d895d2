//! Generators shared by the `fuzz_*` property tests.
//!
//! The point of structure here is depth: uniformly random bytes are refused
//! by the JSON parser on the first character, so most cases start from the
//! real messages in `tests/corpus/*.jsonl` and are *mutated* (members
//! deleted, retyped, duplicated, nested), or are JSON-RPC envelopes built
//! from both revisions' method names with ids of every type. Mutations are
//! plain data (path choice + kind), so proptest shrinks them well.
//!
//! Case counts: proptest's own `PROPTEST_CASES` overrides every test's
//! default; `SHIM_FUZZ_SCALE` multiplies the defaults instead (so the cheap
//! tests stay proportionally longer than the engine ones).
#![allow(dead_code, unreachable_pub)]

use std::path::Path;
use std::sync::OnceLock;

use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence};
use serde_json::{Map, Value, json};

/// Method names of both revisions, plus near misses and junk.
pub const METHODS: &[&str] = &[
    "initialize",
    "notifications/initialized",
    "ping",
    "server/discover",
    "tools/list",
    "tools/call",
    "tasks/get",
    "tasks/result",
    "tasks/list",
    "tasks/cancel",
    "tasks/update",
    "subscriptions/listen",
    "notifications/tasks/status",
    "notifications/tasks",
    "notifications/cancelled",
    "notifications/progress",
    "notifications/message",
    "logging/setLevel",
    "elicitation/create",
    "sampling/createMessage",
    "roots/list",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "resources/subscribe",
    "completion/complete",
    "",
    "tasks/",
    "tools/call/",
    "TOOLS/CALL",
    "rpc.discover",
    "notifications/",
    "\u{0}",
];

/// Strings that mean something to the shim somewhere.
pub const WORDS: &[&str] = &[
    "2.0",
    "1.0",
    "2025-11-25",
    "2026-07-28",
    "2025-06-18",
    "1999-01-01",
    "working",
    "input_required",
    "completed",
    "failed",
    "cancelled",
    "complete",
    "task",
    "required",
    "optional",
    "forbidden",
    "form",
    "url",
    "accept",
    "decline",
    "cancel",
    "greet",
    "slow_compute",
    "failing_job",
    "protocol_error_job",
    "confirm_delete",
    "multi_input",
    "test_tool_with_task",
    "io.modelcontextprotocol/tasks",
    "io.modelcontextprotocol/related-task",
    "io.modelcontextprotocol/protocolVersion",
    "io.modelcontextprotocol/clientCapabilities",
    "task-1",
    "",
    "\u{feff}",
    "\u{10ffff}",
];

/// Member names that mean something to the shim somewhere.
pub const KEYS: &[&str] = &[
    "jsonrpc",
    "id",
    "method",
    "params",
    "result",
    "error",
    "code",
    "message",
    "data",
    "_meta",
    "task",
    "taskId",
    "status",
    "statusMessage",
    "createdAt",
    "lastUpdatedAt",
    "ttl",
    "ttlMs",
    "pollInterval",
    "pollIntervalMs",
    "resultType",
    "inputRequests",
    "inputResponses",
    "requestState",
    "tools",
    "name",
    "arguments",
    "execution",
    "taskSupport",
    "capabilities",
    "extensions",
    "tasks",
    "requests",
    "call",
    "protocolVersion",
    "clientInfo",
    "serverInfo",
    "supportedVersions",
    "content",
    "isError",
    "action",
    "mode",
    "elicitationId",
    "nextCursor",
    "cursor",
    "seconds",
    "label",
    "io.modelcontextprotocol/protocolVersion",
    "io.modelcontextprotocol/clientCapabilities",
    "io.modelcontextprotocol/clientInfo",
    "io.modelcontextprotocol/related-task",
    "io.modelcontextprotocol/subscriptionId",
    "io.modelcontextprotocol/tasks",
];

/// The default case count for a test, times `SHIM_FUZZ_SCALE` (default 1).
pub fn cases(default: u32) -> u32 {
    let scale = std::env::var("SHIM_FUZZ_SCALE")
        .ok()
        .and_then(|s| s.parse::<u32>().ok())
        .unwrap_or(1)
        .max(1);
    default.saturating_mul(scale)
}

/// A proptest config with `default` cases (see [`cases`]); `PROPTEST_CASES`
/// still wins when set. Failures of test file `file` (pass `file!()`) are
/// persisted in `proptest-regressions/<file stem>.txt`, so they replay
/// first on every later run.
pub fn config(file: &str, default: u32) -> Config {
    let mut c = Config::with_cases(cases(default));
    if let Some(n) = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        c.cases = n;
    }
    let stem = Path::new(file)
        .file_stem()
        .map_or_else(|| "fuzz".into(), |s| s.to_string_lossy().into_owned());
    // Relative to the crate root, where `cargo test` runs test binaries.
    let path: &'static str = Box::leak(format!("proptest-regressions/{stem}.txt").into_boxed_str());
    c.failure_persistence = Some(Box::new(FileFailurePersistence::Direct(path)));
    // Shrinking a slow engine case can take long; a few hundred steps find
    // a readable input without eating the CI budget.
    if std::env::var_os("PROPTEST_MAX_SHRINK_ITERS").is_none() {
        c.max_shrink_iters = 512;
    }
    // An engine case that hangs takes its whole deadline on every shrink
    // step: bound shrinking in time too (ms).
    if std::env::var_os("PROPTEST_MAX_SHRINK_TIME").is_none() {
        c.max_shrink_time = 120_000;
    }
    c
}

/// How many panics this test process has seen, on any thread. A panic in
/// a spawned engine task does not fail the test by itself (tokio catches
/// it and the request merely goes unanswered), so engine tests compare
/// this before and after each case.
pub fn panics_seen() -> usize {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static COUNT: AtomicUsize = AtomicUsize::new(0);
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            COUNT.fetch_add(1, Ordering::SeqCst);
            default(info);
        }));
    });
    COUNT.load(Ordering::SeqCst)
}

// ---------------------------------------------------------------------------
// The corpus
// ---------------------------------------------------------------------------

/// One corpus file: its records (`{"dir", "msg", …}`) in order.
pub struct CorpusFile {
    /// File name (`legacy-input.jsonl`, …).
    pub name: String,
    /// The records.
    pub records: Vec<Value>,
}

impl CorpusFile {
    /// Legacy (2025-11-25) transcript?
    pub fn is_legacy(&self) -> bool {
        self.name.starts_with("legacy") || self.name.starts_with("ts-sdk")
    }
}

/// Every transcript under `tests/corpus` (recorded ones included).
pub fn corpus() -> &'static [CorpusFile] {
    static CORPUS: OnceLock<Vec<CorpusFile>> = OnceLock::new();
    CORPUS.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
        let mut files = Vec::new();
        for dir in [root.clone(), root.join("recorded")] {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            let mut paths: Vec<_> = entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
                .collect();
            paths.sort();
            for p in paths {
                let text = std::fs::read_to_string(&p).expect("read corpus file");
                let records = text
                    .lines()
                    .filter(|l| !l.trim().is_empty())
                    .filter_map(|l| serde_json::from_str(l).ok())
                    .collect();
                files.push(CorpusFile {
                    name: p.file_name().unwrap().to_string_lossy().into_owned(),
                    records,
                });
            }
        }
        assert!(!files.is_empty(), "no corpus under {}", root.display());
        files
    })
}

/// Every corpus message (the `msg` of each record).
pub fn corpus_messages() -> &'static [Value] {
    static MSGS: OnceLock<Vec<Value>> = OnceLock::new();
    MSGS.get_or_init(|| {
        corpus()
            .iter()
            .flat_map(|f| f.records.iter())
            .filter_map(|r| r.get("msg").cloned())
            .collect()
    })
}

/// Corpus messages sent in `dir` (`c2s`/`s2c`) by transcripts of one revision.
pub fn corpus_messages_of(legacy: bool, dir: &str) -> Vec<Value> {
    corpus()
        .iter()
        .filter(|f| f.is_legacy() == legacy)
        .flat_map(|f| f.records.iter())
        .filter(|r| r.get("dir").and_then(Value::as_str) == Some(dir))
        .filter_map(|r| r.get("msg").cloned())
        .collect()
}

/// Corpus messages of one revision's transcripts sent in `dir`, each with
/// the method it carries or answers (responses paired with their request).
pub fn corpus_with_methods(legacy: bool, dir: &str) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for f in corpus().iter().filter(|f| f.is_legacy() == legacy) {
        let mut asked = std::collections::HashMap::new();
        for r in &f.records {
            let (Some(d), Some(msg)) = (r.get("dir").and_then(Value::as_str), r.get("msg")) else {
                continue;
            };
            let method = match msg.get("method").and_then(Value::as_str) {
                Some(m) => {
                    if let Some(id) = msg.get("id") {
                        asked.insert((d.to_owned(), id.to_string()), m.to_owned());
                    }
                    m.to_owned()
                }
                None => {
                    let other = if d == "c2s" { "s2c" } else { "c2s" };
                    let id = msg.get("id").map(Value::to_string).unwrap_or_default();
                    match asked.get(&(other.to_owned(), id)) {
                        Some(m) => m.clone(),
                        None => continue,
                    }
                }
            };
            if d == dir {
                out.push((method, msg.clone()));
            }
        }
    }
    out
}

/// Corpus `params`/`result` objects: realistic payload shapes.
pub fn corpus_payloads() -> &'static [Value] {
    static P: OnceLock<Vec<Value>> = OnceLock::new();
    P.get_or_init(|| {
        corpus_messages()
            .iter()
            .flat_map(|m| [m.get("params"), m.get("result"), m.get("error")])
            .flatten()
            .cloned()
            .collect()
    })
}

// ---------------------------------------------------------------------------
// Arbitrary JSON
// ---------------------------------------------------------------------------

/// A string: mostly meaningful words, sometimes arbitrary Unicode.
pub fn arb_string() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(WORDS).prop_map(str::to_owned),
        1 => prop::sample::select(METHODS).prop_map(str::to_owned),
        2 => any::<String>(),
        1 => "[a-z/_\\-]{0,12}",
    ]
}

fn arb_key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(KEYS).prop_map(str::to_owned),
        1 => any::<String>(),
    ]
}

/// A number of any JSON flavour: small ints, extremes, floats.
pub fn arb_number() -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => (-3i64..100).prop_map(Value::from),
        1 => any::<i64>().prop_map(Value::from),
        1 => any::<u64>().prop_map(Value::from),
        1 => prop::sample::select(vec![i64::MIN, i64::MAX, -32700, -32600, -32601, -32602,
            -32603, -32000, -32768, -32769, -31999, -32021, -32022, -32042]).prop_map(Value::from),
        1 => (-1e6f64..1e6).prop_map(Value::from),
        1 => prop::sample::select(vec![0.5, -0.0, 1e300, -1e-300, 1.0, f64::MAX, f64::MIN_POSITIVE])
            .prop_map(Value::from),
    ]
}

/// Arbitrary JSON, up to a few levels deep, keys biased to the shim's.
pub fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        arb_number(),
        arb_string().prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((arb_key(), inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// Arbitrary JSON object.
pub fn arb_object() -> impl Strategy<Value = Value> {
    prop::collection::vec((arb_key(), arb_json()), 0..6)
        .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>()))
}

// ---------------------------------------------------------------------------
// Mutations
// ---------------------------------------------------------------------------

/// One edit of a JSON tree. `at` picks a node (modulo the node count).
#[derive(Debug, Clone)]
pub enum Mutation {
    /// Remove the node from its parent.
    Delete { at: usize },
    /// Replace the node with other JSON.
    Retype { at: usize, with: Value },
    /// Copy the node under another member name of its parent object (or
    /// append it again to its parent array).
    Duplicate { at: usize, key: String },
    /// Wrap the node in an array or an object.
    Nest { at: usize, in_array: bool },
    /// Replace the node with a meaningful word.
    Word { at: usize, word: String },
    /// Add a member to an object node.
    Add { at: usize, key: String, with: Value },
    /// Replace the node with a copy of another corpus payload.
    Graft { at: usize, from: usize },
}

impl Mutation {
    fn at(&self) -> usize {
        match self {
            Mutation::Delete { at }
            | Mutation::Retype { at, .. }
            | Mutation::Duplicate { at, .. }
            | Mutation::Nest { at, .. }
            | Mutation::Word { at, .. }
            | Mutation::Add { at, .. }
            | Mutation::Graft { at, .. } => *at,
        }
    }
}

/// A random mutation.
pub fn arb_mutation() -> impl Strategy<Value = Mutation> {
    let at = any::<usize>();
    prop_oneof![
        3 => at.prop_map(|at| Mutation::Delete { at }),
        3 => (at, arb_json()).prop_map(|(at, with)| Mutation::Retype { at, with }),
        1 => (at, arb_key()).prop_map(|(at, key)| Mutation::Duplicate { at, key }),
        1 => (at, any::<bool>()).prop_map(|(at, in_array)| Mutation::Nest { at, in_array }),
        2 => (at, arb_string()).prop_map(|(at, word)| Mutation::Word { at, word }),
        2 => (at, arb_key(), arb_json()).prop_map(|(at, key, with)| Mutation::Add { at, key, with }),
        1 => (at, any::<usize>()).prop_map(|(at, from)| Mutation::Graft { at, from }),
    ]
}

fn count_nodes(v: &Value) -> usize {
    1 + match v {
        Value::Array(a) => a.iter().map(count_nodes).sum(),
        Value::Object(m) => m.values().map(count_nodes).sum(),
        _ => 0,
    }
}

/// Applies `m` to `root` (pre-order node numbering; node 0 is the root).
pub fn apply(root: &mut Value, m: &Mutation) {
    let n = count_nodes(root);
    let target = m.at() % n;
    if target == 0 {
        // The root cannot be deleted from a parent: edit it in place.
        edit_node(root, m);
        return;
    }
    let mut counter = 0;
    visit_parent(root, target, &mut counter, m);
}

/// Walks to the parent of node `target`, then edits the child there.
fn visit_parent(v: &mut Value, target: usize, counter: &mut usize, m: &Mutation) -> bool {
    match v {
        Value::Array(a) => {
            for i in 0..a.len() {
                *counter += 1;
                if *counter == target {
                    edit_child_of_array(a, i, m);
                    return true;
                }
                if visit_parent(&mut a[i], target, counter, m) {
                    return true;
                }
            }
            false
        }
        Value::Object(obj) => {
            let keys: Vec<String> = obj.keys().cloned().collect();
            for k in keys {
                *counter += 1;
                if *counter == target {
                    edit_child_of_object(obj, &k, m);
                    return true;
                }
                if let Some(child) = obj.get_mut(&k)
                    && visit_parent(child, target, counter, m)
                {
                    return true;
                }
            }
            false
        }
        _ => false,
    }
}

fn edit_child_of_array(a: &mut Vec<Value>, i: usize, m: &Mutation) {
    match m {
        Mutation::Delete { .. } => {
            a.remove(i);
        }
        Mutation::Duplicate { .. } => {
            let copy = a[i].clone();
            a.insert(i, copy);
        }
        _ => edit_node(&mut a[i], m),
    }
}

fn edit_child_of_object(obj: &mut Map<String, Value>, k: &str, m: &Mutation) {
    match m {
        Mutation::Delete { .. } => {
            obj.shift_remove(k);
        }
        Mutation::Duplicate { key, .. } => {
            let copy = obj[k].clone();
            obj.insert(key.clone(), copy);
        }
        _ => {
            if let Some(v) = obj.get_mut(k) {
                edit_node(v, m);
            }
        }
    }
}

fn edit_node(v: &mut Value, m: &Mutation) {
    match m {
        Mutation::Delete { .. } => *v = Value::Null,
        Mutation::Retype { with, .. } => *v = with.clone(),
        Mutation::Duplicate { .. } => *v = json!([v.clone(), v.clone()]),
        Mutation::Nest { in_array, .. } => {
            let inner = v.take();
            *v = if *in_array {
                json!([inner])
            } else {
                json!({ "x": inner })
            };
        }
        Mutation::Word { word, .. } => *v = Value::from(word.clone()),
        Mutation::Add { key, with, .. } => {
            if let Value::Object(o) = v {
                o.insert(key.clone(), with.clone());
            } else {
                *v = with.clone();
            }
        }
        Mutation::Graft { from, .. } => {
            let p = corpus_payloads();
            *v = p[from % p.len()].clone();
        }
    }
}

/// `base` with 0..=`max` mutations applied.
pub fn mutated(base: Value, max: usize) -> impl Strategy<Value = Value> {
    prop::collection::vec(arb_mutation(), 0..=max).prop_map(move |ms| {
        let mut v = base.clone();
        for m in &ms {
            apply(&mut v, m);
        }
        v
    })
}

/// One of `pool`, mutated up to `max` times.
pub fn mutated_from(pool: Vec<Value>, max: usize) -> impl Strategy<Value = Value> {
    assert!(!pool.is_empty());
    (
        prop::sample::select(pool),
        prop::collection::vec(arb_mutation(), 0..=max),
    )
        .prop_map(|(base, ms)| {
            let mut v = base;
            for m in &ms {
                apply(&mut v, m);
            }
            v
        })
}

// ---------------------------------------------------------------------------
// JSON-RPC shapes
// ---------------------------------------------------------------------------

/// An id of any JSON type (most are valid MCP ids).
pub fn arb_id() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => (0i64..1000).prop_map(Value::from),
        3 => arb_string().prop_map(Value::from),
        1 => any::<i64>().prop_map(Value::from),
        1 => Just(Value::Null),
        1 => prop::sample::select(vec![json!(1.5), json!(1.0), json!(-0.0), json!(u64::MAX),
            json!(true), json!([1]), json!({"id": 1}), json!(1e300)]),
    ]
}

/// A JSON-RPC envelope of any kind, mostly well formed, with payloads from
/// the corpus (mutated) or arbitrary.
pub fn arb_envelope() -> impl Strategy<Value = Value> {
    let jsonrpc = prop_oneof![
        8 => Just(Some(json!("2.0"))),
        1 => Just(None),
        1 => prop::sample::select(vec![json!("1.0"), json!(2.0), json!(null), json!("2.0 ")])
            .prop_map(Some),
    ];
    let payload = prop_oneof![
        3 => mutated_from(corpus_payloads().to_vec(), 3),
        1 => arb_object(),
        1 => arb_json(),
    ];
    let method = prop_oneof![
        6 => prop::sample::select(METHODS).prop_map(Value::from),
        1 => arb_string().prop_map(Value::from),
        1 => arb_json(),
    ];
    let error = prop_oneof![
        3 => (arb_number(), arb_string(), prop::option::of(arb_json())).prop_map(|(c, m, d)| {
            let mut e = json!({"code": c, "message": m});
            if let Some(d) = d {
                e["data"] = d;
            }
            e
        }),
        1 => arb_json(),
    ];
    let kind = 0u8..6;
    (
        jsonrpc,
        prop::option::of(arb_id()),
        method,
        prop::option::of(payload),
        error,
        kind,
    )
        .prop_map(|(jsonrpc, id, method, payload, error, kind)| {
            let mut m = Map::new();
            if let Some(j) = jsonrpc {
                m.insert("jsonrpc".into(), j);
            }
            if let Some(id) = id {
                m.insert("id".into(), id);
            }
            match kind {
                // request / notification (by id presence)
                0..=2 => {
                    m.insert("method".into(), method);
                    if let Some(p) = payload {
                        m.insert("params".into(), p);
                    }
                }
                3 => {
                    m.insert("result".into(), payload.unwrap_or_else(|| json!({})));
                }
                4 => {
                    m.insert("error".into(), error);
                }
                // both a method and a result: must be refused
                _ => {
                    m.insert("method".into(), method);
                    m.insert("result".into(), payload.unwrap_or(Value::Null));
                }
            }
            Value::Object(m)
        })
}

/// A message-ish JSON value: mutated corpus messages, envelopes, anything.
pub fn arb_message_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => mutated_from(corpus_messages().to_vec(), 4),
        4 => arb_envelope(),
        1 => arb_json(),
    ]
}

/// Bytes of a message-ish value, damaged in one of the ways a broken peer
/// damages them.
pub fn arb_wire_bytes() -> impl Strategy<Value = Vec<u8>> {
    let text = arb_message_value()
        .prop_map(|v| v.to_string().into_bytes())
        .boxed();
    let bad_utf8: Vec<&'static [u8]> = vec![
        b"\xff",
        b"\xc3\x28",
        b"\xed\xa0\x80",
        b"\xf0\x28\x8c\x28",
        b"\\ud800",
        b"\\u0000",
    ];
    let tails: Vec<&'static [u8]> = vec![b" x", b"}", b"{}", b"\n{}", b"\0"];
    prop_oneof![
        // whole
        4 => text.clone(),
        // truncated prefix
        3 => (text.clone(), any::<prop::sample::Index>()).prop_map(|(b, i)| {
            let cut = i.index(b.len().max(1));
            b[..cut].to_vec()
        }),
        // bytes flipped, some to invalid UTF-8
        2 => (text.clone(), prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4))
            .prop_map(|(mut b, edits)| {
                if !b.is_empty() {
                    for (i, byte) in edits {
                        let at = i.index(b.len());
                        b[at] = byte;
                    }
                }
                b
            }),
        // invalid UTF-8 inside a string
        1 => (text.clone(), prop::sample::select(bad_utf8))
            .prop_map(|(b, bad)| {
                let s = String::from_utf8_lossy(&b).replacen("\"2.0\"", "\"2.0", 1);
                let mut out = s.into_bytes();
                out.extend_from_slice(bad);
                out.extend_from_slice(b"\"}");
                out
            }),
        // a batch
        1 => prop::collection::vec(arb_message_value(), 0..3)
            .prop_map(|v| Value::Array(v).to_string().into_bytes()),
        // trailing garbage / a second message on the same line
        1 => (text.clone(), prop::sample::select(tails))
            .prop_map(|(mut b, tail)| { b.extend_from_slice(tail); b }),
        // deep nesting, within and far past serde_json's recursion limit
        1 => (1usize..5000, 0u8..4).prop_map(|(depth, shape)| deep(depth, shape)),
        // raw noise
        1 => prop::collection::vec(any::<u8>(), 0..64),
    ]
}

/// A message whose `params` (or the whole line) nests `depth` levels.
pub fn deep(depth: usize, shape: u8) -> Vec<u8> {
    let (open, close) = match shape {
        0 => ("[".repeat(depth), "]".repeat(depth)),
        1 => ("{\"a\":".repeat(depth), format!("1{}", "}".repeat(depth))),
        2 => (
            format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{}",
                "{\"a\":[".repeat(depth)
            ),
            format!("0{}}}", "]}".repeat(depth)),
        ),
        _ => (
            format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{}},\"x\":{}",
                "[".repeat(depth)
            ),
            format!("{}}}", "]".repeat(depth)),
        ),
    };
    format!("{open}{close}").into_bytes()
}

// ---------------------------------------------------------------------------
// JSON-RPC validity of what the shim emits
// ---------------------------------------------------------------------------

/// Checks `v` is one JSON-RPC 2.0 message as MCP allows it (envelope
/// only): `jsonrpc: "2.0"`, an id that is a string or integer (absent only
/// on notifications and id-less errors), exactly one of method / result /
/// error, params an object, an error object with integer code and a
/// non-empty message (the shim's own errors always say what went wrong).
pub fn check_jsonrpc(v: &Value) -> Result<(), String> {
    check_envelope(v)?;
    match v.get("error") {
        Some(e) => check_error_object(e),
        None => Ok(()),
    }
}

/// [`check_jsonrpc`] for a peer's message relayed as it came: JSON-RPC
/// lets an error message be empty.
pub fn check_envelope(v: &Value) -> Result<(), String> {
    let o = v.as_object().ok_or("not an object")?;
    if o.get("jsonrpc") != Some(&json!("2.0")) {
        return Err(format!("jsonrpc is not \"2.0\": {v}"));
    }
    if let Some(id) = o.get("id")
        && !(id.is_string() || id.as_i64().is_some())
    {
        return Err(format!("bad id: {v}"));
    }
    for k in o.keys() {
        if !matches!(
            k.as_str(),
            "jsonrpc" | "id" | "method" | "params" | "result" | "error"
        ) {
            return Err(format!("unexpected member {k:?}: {v}"));
        }
    }
    let kinds = ["method", "result", "error"]
        .iter()
        .filter(|k| o.contains_key(**k))
        .count();
    if kinds != 1 {
        return Err(format!("not exactly one of method/result/error: {v}"));
    }
    if let Some(m) = o.get("method") {
        if !m.is_string() {
            return Err(format!("method not a string: {v}"));
        }
        if let Some(p) = o.get("params")
            && !p.is_object()
        {
            return Err(format!("params not an object: {v}"));
        }
    }
    if o.contains_key("result") && !o.contains_key("id") {
        return Err(format!("result without id: {v}"));
    }
    if let Some(e) = o.get("error") {
        e.get("code")
            .and_then(Value::as_i64)
            .ok_or_else(|| format!("error code not an integer: {v}"))?;
        e.get("message")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("error message not a string: {v}"))?;
    }
    Ok(())
}

/// An error object: integer code, non-empty string message.
pub fn check_error_object(e: &Value) -> Result<(), String> {
    let code = e
        .get("code")
        .and_then(Value::as_i64)
        .ok_or_else(|| format!("error code not an integer: {e}"))?;
    let _ = code;
    match e.get("message").and_then(Value::as_str) {
        Some(m) if !m.is_empty() => Ok(()),
        _ => Err(format!("error message missing or empty: {e}")),
    }
}

/// True for codes the JSON-RPC spec reserves for pre-defined errors or
/// leaves to implementations (`-32768..=-32000`).
pub fn is_reserved_code(code: i64) -> bool {
    (-32768..=-32000).contains(&code)
}
