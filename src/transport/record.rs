//! The transcript recorder behind `--record`: one writer task per file, so
//! that messages from concurrent sessions never interleave partial lines.
//!
//! Each record carries `t` (ms since the recording started, on tokio's
//! clock) and `session` (a stable label, never a raw session id or token),
//! in the JSONL format [`crate::testing::Transcript`] reads.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::json;
use tokio::sync::mpsc;

use crate::jsonrpc::Message;

enum Entry {
    Record(Arc<str>, &'static str, Message),
    /// Answered once every record sent before it is written.
    Flush(tokio::sync::oneshot::Sender<()>),
}

/// A handle on one transcript file; clones share the file, its clock and
/// its session labels.
#[derive(Debug, Clone)]
pub struct Recorder {
    tx: mpsc::UnboundedSender<Entry>,
    /// One numbering per file: whoever records sessions into it (the
    /// bridge's own upstream session, each relayed session) gets labels
    /// that never collide.
    labels: SessionLabels,
}

impl Recorder {
    /// Opens (appends to) `path` and starts its writer task. `flag` names
    /// the option in the error, e.g. `--record`.
    pub fn open(
        path: &std::path::Path,
        flag: &str,
    ) -> std::io::Result<(Recorder, tokio::task::JoinHandle<()>)> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| {
                std::io::Error::new(e.kind(), format!("{flag} {}: {e}", path.display()))
            })?;
        let (tx, rx) = mpsc::unbounded_channel();
        let recorder = Recorder {
            tx,
            labels: SessionLabels::default(),
        };
        Ok((recorder, tokio::spawn(write_records(file, rx))))
    }

    /// The `session` label of the session known as `key` (see
    /// [`SessionLabels`]), numbered across this file.
    pub fn session_label(&self, key: &str) -> Arc<str> {
        self.labels.label(key)
    }

    /// Records `msg` going `dir` (`c2s` or `s2c`) in the session `label`.
    pub fn record(&self, label: &Arc<str>, dir: &'static str, msg: &Message) {
        let _ = self.tx.send(Entry::Record(label.clone(), dir, msg.clone()));
    }

    /// Returns once everything recorded before is in the file (at once if
    /// the writer has stopped): for a recorder whose clones outlive the
    /// run (an upstream keeps one), so its writer cannot be awaited.
    pub async fn flushed(&self) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        if self.tx.send(Entry::Flush(tx)).is_ok() {
            let _ = rx.await;
        }
    }
}

/// A [`Recorder`] with the label of the one conversation it records, for
/// a connection that has a single session (a child process).
#[derive(Debug, Clone)]
pub struct Labelled {
    /// Where the records go.
    pub rec: Recorder,
    /// Their `session`.
    pub label: Arc<str>,
}

impl Labelled {
    /// Records `msg` going `dir`.
    pub fn record(&self, dir: &'static str, msg: &Message) {
        self.rec.record(&self.label, dir, msg);
    }

    /// Records the message encoded in `line` (newline or not); a line that
    /// is no JSON-RPC message is not recorded (the reader reports it).
    pub fn record_line(&self, dir: &'static str, line: &[u8]) {
        if let Ok(msg) = Message::parse_bounded(line, usize::MAX) {
            self.record(dir, &msg);
        }
    }
}

/// Stable labels for client sessions, `session-1`, `session-2`, … in order
/// of first appearance, so that a transcript never holds a raw session id.
#[derive(Debug, Default, Clone)]
pub struct SessionLabels {
    seen: Arc<Mutex<HashMap<String, Arc<str>>>>,
}

impl SessionLabels {
    /// The label of the session known to the shim as `key`.
    pub fn label(&self, key: &str) -> Arc<str> {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let n = seen.len() + 1;
        seen.entry(key.to_owned())
            .or_insert_with(|| Arc::from(format!("session-{n}")))
            .clone()
    }
}

async fn write_records(file: std::fs::File, mut rx: mpsc::UnboundedReceiver<Entry>) {
    use std::io::Write;
    let mut file = std::io::BufWriter::new(file);
    let started = tokio::time::Instant::now();
    while let Some(entry) = rx.recv().await {
        let (session, dir, msg) = match entry {
            Entry::Record(session, dir, msg) => (session, dir, msg),
            Entry::Flush(done) => {
                let _ = done.send(());
                continue;
            }
        };
        let t = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let line = json!({"t": t, "session": &*session, "dir": dir, "msg": msg});
        if writeln!(file, "{line}").and_then(|_| file.flush()).is_err() {
            tracing::warn!("cannot write the transcript; recording stops");
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_follow_first_appearance_and_hide_the_key() {
        let labels = SessionLabels::default();
        assert_eq!(&*labels.label("b7f3-secret"), "session-1");
        assert_eq!(&*labels.label("a001"), "session-2");
        assert_eq!(&*labels.label("b7f3-secret"), "session-1");
    }

    #[tokio::test]
    async fn concurrent_sessions_write_whole_lines_that_read_back() {
        let dir = std::env::temp_dir().join(format!("shim-rec-{}", std::process::id()));
        let _ = std::fs::remove_file(&dir);
        let (rec, task) = Recorder::open(&dir, "--record").unwrap();
        let labels = SessionLabels::default();
        let mut joins = Vec::new();
        for s in ["x", "y"] {
            let (rec, label) = (rec.clone(), labels.label(s));
            joins.push(tokio::spawn(async move {
                for i in 0..50 {
                    rec.record(&label, "c2s", &Message::notification("n", json!({"i": i})));
                }
            }));
        }
        for j in joins {
            j.await.unwrap();
        }
        rec.flushed().await;
        assert_eq!(std::fs::read_to_string(&dir).unwrap().lines().count(), 100);
        drop(rec);
        task.await.unwrap();
        let text = std::fs::read_to_string(&dir).unwrap();
        let _ = std::fs::remove_file(&dir);
        let t = crate::testing::Transcript::parse(&text).unwrap();
        assert_eq!(t.records.len(), 100);
        let sessions: std::collections::BTreeSet<_> = text
            .lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["session"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        assert_eq!(sessions.len(), 2);
    }
}
