//! Transcripts for migration tests: read them, mask what differs by nature
//! between two runs of one conversation, and compare them.
//!
//! A transcript is JSONL, one [`Record`] a line (what `--record` writes and
//! `translate` reads). Two runs of the same conversation differ in request
//! ids, task ids, timestamps and poll hints; [`Masks::default`] masks those,
//! consistently within a transcript (the same task id is `<task-1>`
//! everywhere it appears), so what is left to differ is what a client would
//! notice.
//!
//! ```
//! use mcp_tasks_shim::testing::{Masks, Transcript, compare};
//! let a = Transcript::parse(r#"{"dir":"c2s","msg":{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"taskId":"aa"}}}"#).unwrap();
//! let b = Transcript::parse(r#"{"dir":"c2s","msg":{"jsonrpc":"2.0","id":9,"method":"tasks/get","params":{"taskId":"bb"}}}"#).unwrap();
//! let masks = Masks::default();
//! assert!(compare(&a, &b, &masks).is_equal());
//! assert_eq!(a.normalized(&masks)[0]["msg"]["params"]["taskId"], "<task-1>");
//! ```
//!
//! In a test of your own, the normalised form is what an insta snapshot
//! holds: record a run (`--record`, or `replay`), normalise it, snapshot it.
//! The next run, against the upgraded server or through the shim, must
//! match it (see docs/migration-testing.md and
//! `examples/migration_snapshot.rs`):
//!
//! ```
//! use mcp_tasks_shim::testing::{Masks, Transcript};
//! let recorded = Transcript::parse(concat!(
//!     r#"{"t":0,"session":"stdio","dir":"c2s","msg":{"jsonrpc":"2.0","id":4,"method":"tasks/get","params":{"taskId":"9f2c"}}}"#, "\n",
//!     r#"{"t":3,"session":"stdio","dir":"s2c","msg":{"jsonrpc":"2.0","id":4,"result":{"taskId":"9f2c","status":"completed","#,
//!     r#""createdAt":"2026-03-01T10:00:00Z","lastUpdatedAt":"2026-03-01T10:00:02Z","ttl":60000,"pollInterval":500}}}"#,
//! )).unwrap();
//! insta::assert_json_snapshot!(recorded.normalized(&Masks::default()), @r#"
//! [
//!   {
//!     "dir": "c2s",
//!     "session": "<session-1>",
//!     "msg": {
//!       "jsonrpc": "2.0",
//!       "id": "<id-1>",
//!       "method": "tasks/get",
//!       "params": {
//!         "taskId": "<task-1>"
//!       }
//!     }
//!   },
//!   {
//!     "dir": "s2c",
//!     "session": "<session-1>",
//!     "msg": {
//!       "jsonrpc": "2.0",
//!       "id": "<id-1>",
//!       "result": {
//!         "taskId": "<task-1>",
//!         "status": "completed",
//!         "createdAt": "<timestamp>",
//!         "lastUpdatedAt": "<timestamp>",
//!         "ttl": 60000,
//!         "pollInterval": "<poll-interval>"
//!       }
//!     }
//!   }
//! ]
//! "#);
//! ```

mod mask;
pub mod replay;
#[cfg(feature = "testing")]
pub mod schema;

use std::collections::HashMap;
use std::fmt::Write as _;

use serde_json::{Map, Value};

pub use crate::translate::transcript::{Dir, Record, RecordError};
pub use mask::{MaskPath, MaskPathError};

/// A header map of `pairs`, one value each, for the crate's header tests.
#[cfg(test)]
pub(crate) fn header_map(pairs: &[(&'static str, &str)]) -> axum::http::HeaderMap {
    let mut m = axum::http::HeaderMap::new();
    for (k, v) in pairs {
        m.insert(*k, v.parse().unwrap());
    }
    m
}

/// Why a transcript could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TranscriptReadError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The failure.
        source: std::io::Error,
    },
    /// A line is not JSON.
    #[error("line {line}: invalid JSON: {source}")]
    Json {
        /// 1-based line.
        line: usize,
        /// The parser's complaint.
        source: serde_json::Error,
    },
    /// A line is JSON but no transcript record.
    #[error("line {line}: {source}")]
    Record {
        /// 1-based line.
        line: usize,
        /// What is wrong with it.
        source: RecordError,
    },
}

/// A transcript: its records, each with the line it was read from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Transcript {
    /// (1-based line, record), in order.
    pub records: Vec<(usize, Record)>,
}

impl Transcript {
    /// Parses JSONL text (blank lines skipped; a leading byte order mark
    /// dropped).
    pub fn parse(text: &str) -> Result<Transcript, TranscriptReadError> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let mut records = Vec::new();
        for (n, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let value: Value =
                serde_json::from_str(line).map_err(|source| TranscriptReadError::Json {
                    line: n + 1,
                    source,
                })?;
            let record =
                Record::from_value(&value).map_err(|source| TranscriptReadError::Record {
                    line: n + 1,
                    source,
                })?;
            records.push((n + 1, record));
        }
        Ok(Transcript { records })
    }

    /// Reads and parses the file at `path`.
    pub fn read(path: impl AsRef<std::path::Path>) -> Result<Transcript, TranscriptReadError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| TranscriptReadError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Transcript::parse(&text)
    }

    /// The JSONL form, one record a line.
    pub fn to_jsonl(&self) -> String {
        let mut out = String::new();
        for (_, r) in &self.records {
            out.push_str(&r.to_value().to_string());
            out.push('\n');
        }
        out
    }

    /// Every message record, masked by `masks`: `{"dir", "session"?, "msg"}`
    /// each (record times dropped, sessions labelled), stable from run to
    /// run of one conversation, as an insta snapshot needs. Note-only
    /// records are left out.
    pub fn normalized(&self, masks: &Masks) -> Vec<Value> {
        let mut labels = Labels::default();
        self.messages()
            .map(|(_, r, msg)| normalize_record(r, msg, masks, &mut labels))
            .collect()
    }

    fn messages(&self) -> impl Iterator<Item = (usize, &Record, Value)> {
        self.records
            .iter()
            .filter_map(|(line, r)| Some((*line, r, r.msg.as_ref()?.to_value())))
    }
}

/// What a mask puts in place of a value.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Replace {
    /// `<kind-N>`, N counted by first appearance in the transcript, so
    /// that what was equal stays equal.
    Label(&'static str),
    /// One fixed text.
    Fixed(&'static str),
}

/// The parts of a message that differ by nature between runs.
#[derive(Debug, Clone)]
pub struct Masks {
    paths: Vec<(MaskPath, Replace)>,
}

impl Default for Masks {
    /// Request ids (`$.id`), task ids (`$..taskId`), MRTR `requestState`,
    /// listen subscription ids, `createdAt`/`lastUpdatedAt`, and the poll
    /// hints `pollInterval`/`pollIntervalMs`. Retention (`ttl`, `ttlMs`) is
    /// kept unless asked for ([`Masks::with_ttl`]).
    fn default() -> Self {
        let label = |p: &str, kind| (path(p), Replace::Label(kind));
        let fixed = |p: &str, text| (path(p), Replace::Fixed(text));
        Masks {
            paths: vec![
                label("$.id", "id"),
                label("$..taskId", "task"),
                label("$..requestState", "state"),
                label(
                    "$..['io.modelcontextprotocol/subscriptionId']",
                    "subscription",
                ),
                fixed("$..createdAt", "<timestamp>"),
                fixed("$..lastUpdatedAt", "<timestamp>"),
                fixed("$..pollInterval", "<poll-interval>"),
                fixed("$..pollIntervalMs", "<poll-interval>"),
            ],
        }
    }
}

fn path(p: &str) -> MaskPath {
    MaskPath::parse(p).unwrap_or_else(|e| unreachable!("a built-in mask: {e}"))
}

impl Masks {
    /// No masks at all.
    pub fn none() -> Masks {
        Masks { paths: Vec::new() }
    }

    /// Also masks task retention (`ttl`, `ttlMs`), which a shim may lower
    /// or bound.
    pub fn with_ttl(self) -> Masks {
        self.mask(path("$..ttl")).mask(path("$..ttlMs"))
    }

    /// Also masks `path` (its values become `<masked>`).
    pub fn mask(mut self, path: MaskPath) -> Masks {
        self.paths.push((path, Replace::Fixed("<masked>")));
        self
    }

    /// Stops masking `path` (written as a default or an added mask is).
    pub fn keep(mut self, path: &MaskPath) -> Masks {
        self.paths.retain(|(p, _)| p != path);
        self
    }

    /// The paths masked, as written.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.paths.iter().map(|(p, _)| p.as_str())
    }

    fn replacement(&self, at: &[Option<&str>]) -> Option<&Replace> {
        self.paths
            .iter()
            .find(|(p, _)| p.matches(at))
            .map(|(_, r)| r)
    }
}

/// Labels handed out so far in one transcript.
#[derive(Debug, Default)]
struct Labels {
    given: HashMap<(&'static str, String), usize>,
    next: HashMap<&'static str, usize>,
}

impl Labels {
    fn label(&mut self, kind: &'static str, value: String) -> String {
        let n = match self.given.get(&(kind, value.clone())) {
            Some(n) => *n,
            None => {
                let n = self.next.entry(kind).or_default();
                *n += 1;
                self.given.insert((kind, value), *n);
                *n
            }
        };
        format!("<{kind}-{n}>")
    }
}

fn normalize_record(r: &Record, mut msg: Value, masks: &Masks, labels: &mut Labels) -> Value {
    // A request's id and its answer's share a label; the two directions
    // number their requests apart, so the key says whose request it is.
    let asker = match msg.get("method") {
        Some(_) => r.dir,
        None => r.dir.other(),
    };
    if let Some(id) = msg
        .get_mut("id")
        .filter(|_| masks.replacement(&[Some("id")]).is_some())
    {
        let key = format!("{}:{id}", asker.as_str());
        *id = Value::from(labels.label("id", key));
    }
    let mut at = Vec::new();
    mask_value(&mut msg, &mut at, masks, labels, true);
    let mut out = Map::new();
    out.insert("dir".into(), Value::from(r.dir.as_str()));
    if let Some(session) = r.extra.get("session") {
        out.insert(
            "session".into(),
            Value::from(labels.label("session", session.to_string())),
        );
    }
    out.insert("msg".into(), msg);
    Value::Object(out)
}

fn mask_value(
    v: &mut Value,
    at: &mut Vec<Option<String>>,
    masks: &Masks,
    labels: &mut Labels,
    top: bool,
) {
    if !top {
        let path: Vec<Option<&str>> = at.iter().map(Option::as_deref).collect();
        // The top-level id has its own rule (see `normalize_record`).
        if path != [Some("id")]
            && let Some(r) = masks.replacement(&path)
        {
            *v = match r {
                Replace::Fixed(text) => Value::from(*text),
                Replace::Label(kind) => Value::from(labels.label(kind, v.to_string())),
            };
            return;
        }
    }
    match v {
        Value::Object(map) => {
            for (k, child) in map.iter_mut() {
                at.push(Some(k.clone()));
                mask_value(child, at, masks, labels, false);
                at.pop();
            }
        }
        Value::Array(items) => {
            for child in items {
                at.push(None);
                mask_value(child, at, masks, labels, false);
                at.pop();
            }
        }
        _ => {}
    }
}

/// One difference between two transcripts.
#[derive(Debug, Clone, PartialEq)]
pub enum Difference {
    /// A message of one transcript with no counterpart in the other.
    Unpaired {
        /// Which transcript has it: `'A'` or `'B'`.
        side: char,
        /// Its line there.
        line: usize,
        /// What it is (direction and method).
        what: String,
    },
    /// Paired messages whose masked forms differ.
    Changed {
        /// What they are (direction and method).
        what: String,
        /// Their lines in A and B.
        lines: (usize, usize),
        /// Each differing location (a JSON pointer into the message), with
        /// the masked value in A and in B (`None`: absent).
        at: Vec<(String, Option<Value>, Option<Value>)>,
    },
}

/// The outcome of [`compare`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Comparison {
    /// Every difference, in the order of A.
    pub differences: Vec<Difference>,
    /// How many message pairs were compared.
    pub paired: usize,
}

impl Comparison {
    /// No difference at all.
    pub fn is_equal(&self) -> bool {
        self.differences.is_empty()
    }

    /// A readable report; `color` adds ANSI colours (A red, B green).
    pub fn render(&self, color: bool) -> String {
        let (red, green, off) = if color {
            ("\x1b[31m", "\x1b[32m", "\x1b[0m")
        } else {
            ("", "", "")
        };
        let mut out = String::new();
        for d in &self.differences {
            match d {
                Difference::Unpaired { side, line, what } => {
                    let c = if *side == 'A' { red } else { green };
                    let _ = writeln!(out, "{c}only in {side}{off} (line {line}): {what}");
                }
                Difference::Changed { what, lines, at } => {
                    let _ = writeln!(out, "{what} (A line {}, B line {}):", lines.0, lines.1);
                    for (pointer, a, b) in at {
                        let show = |v: &Option<Value>| {
                            v.as_ref().map_or("(absent)".to_owned(), Value::to_string)
                        };
                        let _ = writeln!(out, "  {pointer}");
                        let _ = writeln!(out, "    {red}- A {}{off}", show(a));
                        let _ = writeln!(out, "    {green}+ B {}{off}", show(b));
                    }
                }
            }
        }
        let _ = writeln!(
            out,
            "{} message pairs compared, {} difference(s)",
            self.paired,
            self.differences.len()
        );
        out
    }
}

/// What a message is, for pairing: its direction and method; an answer by
/// the method of the request it answers (looked up in its transcript).
fn kinds(t: &Transcript) -> Vec<(usize, String, Value)> {
    let mut asked: HashMap<(Dir, String), String> = HashMap::new();
    let mut out = Vec::new();
    for (line, r, msg) in t.messages() {
        let id = msg.get("id").map(Value::to_string).unwrap_or_default();
        let what = match msg.get("method").and_then(Value::as_str) {
            Some(m) => {
                if msg.get("id").is_some() {
                    asked.insert((r.dir, id), m.to_owned());
                }
                format!("{} {m}", r.dir.as_str())
            }
            None => {
                let of = asked
                    .get(&(r.dir.other(), id))
                    .map_or("a request not in the transcript", String::as_str);
                let kind = if msg.get("error").is_some() {
                    "error"
                } else {
                    "answer"
                };
                format!("{} {kind} to {of}", r.dir.as_str())
            }
        };
        out.push((line, what, msg));
    }
    out
}

/// Compares two transcripts of one conversation, masked by `masks`.
/// Messages pair by direction, method and order: the k-th `c2s tasks/get`
/// of A with the k-th of B, the k-th answer to a `tools/call` with the
/// k-th, and so on. What is left unpaired, and every paired message whose
/// masked form differs, is a [`Difference`].
pub fn compare(a: &Transcript, b: &Transcript, masks: &Masks) -> Comparison {
    let (norm_a, norm_b) = (a.normalized(masks), b.normalized(masks));
    let (kinds_a, kinds_b) = (kinds(a), kinds(b));
    let mut b_by_kind: HashMap<&str, std::collections::VecDeque<usize>> = HashMap::new();
    for (i, (_, what, _)) in kinds_b.iter().enumerate() {
        b_by_kind.entry(what).or_default().push_back(i);
    }
    // A transcript without session labels (recorded before they existed,
    // or written by hand) is compared on its messages alone.
    let labelled = |n: &[Value]| n.iter().any(|v| v.get("session").is_some());
    let both_labelled = labelled(&norm_a) && labelled(&norm_b);
    let mut cmp = Comparison::default();
    let mut b_used = vec![false; kinds_b.len()];
    for (i, (line_a, what, _)) in kinds_a.iter().enumerate() {
        let Some(j) = b_by_kind.get_mut(what.as_str()).and_then(|q| q.pop_front()) else {
            cmp.differences.push(Difference::Unpaired {
                side: 'A',
                line: *line_a,
                what: what.clone(),
            });
            continue;
        };
        b_used[j] = true;
        cmp.paired += 1;
        let mut at = Vec::new();
        diff_values(
            "",
            Some(&norm_a[i]["msg"]),
            Some(&norm_b[j]["msg"]),
            &mut at,
        );
        if both_labelled && norm_a[i].get("session") != norm_b[j].get("session") {
            at.push((
                "(session)".into(),
                norm_a[i].get("session").cloned(),
                norm_b[j].get("session").cloned(),
            ));
        }
        if !at.is_empty() {
            cmp.differences.push(Difference::Changed {
                what: what.clone(),
                lines: (*line_a, kinds_b[j].0),
                at,
            });
        }
    }
    for (j, used) in b_used.iter().enumerate() {
        if !used {
            cmp.differences.push(Difference::Unpaired {
                side: 'B',
                line: kinds_b[j].0,
                what: kinds_b[j].1.clone(),
            });
        }
    }
    cmp
}

fn diff_values(
    pointer: &str,
    a: Option<&Value>,
    b: Option<&Value>,
    out: &mut Vec<(String, Option<Value>, Option<Value>)>,
) {
    match (a, b) {
        (Some(Value::Object(x)), Some(Value::Object(y))) => {
            let mut keys: Vec<&String> = x.keys().collect();
            keys.extend(y.keys().filter(|k| !x.contains_key(*k)));
            for k in keys {
                let p = format!("{pointer}/{}", k.replace('~', "~0").replace('/', "~1"));
                diff_values(&p, x.get(k), y.get(k), out);
            }
        }
        (Some(Value::Array(x)), Some(Value::Array(y))) if x.len() == y.len() => {
            for (i, (xa, ya)) in x.iter().zip(y).enumerate() {
                diff_values(&format!("{pointer}/{i}"), Some(xa), Some(ya), out);
            }
        }
        (x, y) if x == y => {}
        (x, y) => out.push((
            if pointer.is_empty() {
                "/".into()
            } else {
                pointer.to_owned()
            },
            x.cloned(),
            y.cloned(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(lines: &[Value]) -> Transcript {
        let text: Vec<String> = lines.iter().map(Value::to_string).collect();
        Transcript::parse(&text.join("\n")).unwrap()
    }

    fn call(id: i64, task: &str, at: &str) -> Vec<Value> {
        vec![
            serde_json::json!({"t": 1, "dir": "c2s", "msg": {"jsonrpc": "2.0", "id": id,
                "method": "tasks/get", "params": {"taskId": task}}}),
            serde_json::json!({"t": 3, "dir": "s2c", "msg": {"jsonrpc": "2.0", "id": id,
                "result": {"taskId": task, "status": "working", "createdAt": at,
                    "lastUpdatedAt": at, "ttl": 60000, "pollInterval": 50}}}),
        ]
    }

    #[test]
    fn what_differs_by_nature_is_masked_consistently() {
        let a = t(&call(1, "aaaa", "2026-01-01T00:00:00Z"));
        let b = t(&call(42, "bbbb", "2026-12-02T10:00:00Z"));
        let c = compare(&a, &b, &Masks::default());
        assert!(c.is_equal(), "{}", c.render(false));
        assert_eq!(c.paired, 2);
        let n = a.normalized(&Masks::default());
        assert_eq!(
            n[0]["msg"]["id"], n[1]["msg"]["id"],
            "a request and its answer"
        );
        assert_eq!(n[1]["msg"]["result"]["taskId"], "<task-1>");
    }

    #[test]
    fn sessions_count_only_when_both_transcripts_carry_them() {
        let labelled = |session: &str| {
            let mut lines = call(1, "aaaa", "x");
            for l in &mut lines {
                l["session"] = session.into();
            }
            t(&lines)
        };
        let bare = t(&call(1, "aaaa", "x"));
        // An old recording against a new one: the messages are the same.
        assert!(compare(&bare, &labelled("stdio"), &Masks::default()).is_equal());
        let mut two = call(1, "aaaa", "x");
        two[0]["session"] = "session-1".into();
        two[1]["session"] = "session-2".into();
        let c = compare(&labelled("session-1"), &t(&two), &Masks::default());
        let Difference::Changed { at, .. } = &c.differences[0] else {
            panic!("an answer in another session: {c:?}");
        };
        assert_eq!(at[0].0, "(session)");
    }

    #[test]
    fn a_real_difference_is_reported_where_it_is() {
        let a = t(&call(1, "aaaa", "x"));
        let mut changed = call(1, "aaaa", "x");
        changed[1]["msg"]["result"]["status"] = "failed".into();
        changed[1]["msg"]["result"]["ttl"] = 5.into();
        let c = compare(&a, &t(&changed), &Masks::default());
        let Difference::Changed { at, what, .. } = &c.differences[0] else {
            panic!("{c:?}");
        };
        assert_eq!(what, "s2c answer to tasks/get");
        let pointers: Vec<&str> = at.iter().map(|(p, _, _)| p.as_str()).collect();
        assert_eq!(pointers, ["/result/status", "/result/ttl"]);
        // ttl masked on request; a kept default is compared again.
        let masks = Masks::default().with_ttl();
        assert_eq!(compare(&a, &t(&changed), &masks).differences.len(), 1);
        let keep = Masks::default().keep(&MaskPath::parse("$..taskId").unwrap());
        assert!(!compare(&a, &t(&call(1, "bbbb", "x")), &keep).is_equal());
    }

    #[test]
    fn a_message_without_a_counterpart_is_unpaired() {
        let mut longer = call(1, "aaaa", "x");
        longer.extend(call(2, "aaaa", "x"));
        let c = compare(&t(&call(1, "aaaa", "x")), &t(&longer), &Masks::default());
        assert_eq!(c.paired, 2);
        assert!(
            matches!(
                c.differences.as_slice(),
                [
                    Difference::Unpaired {
                        side: 'B',
                        line: 3,
                        ..
                    },
                    Difference::Unpaired {
                        side: 'B',
                        line: 4,
                        ..
                    }
                ]
            ),
            "{c:?}"
        );
    }
}
