//! Replaying the client side of a recorded conversation against a live
//! server, for migration tests: record an old server with an old client,
//! replay the recording against the new server (through the shim when the
//! new server speaks the other revision), then [`compare`](super::compare)
//! the two transcripts.
//!
//! The replayer speaks the transcript's revision (read from its first
//! client message: `initialize` means 2025-11-25, modern `_meta` means
//! 2026-07-28). It probes the server as the shim probes an upstream
//! (`server/discover`); a server of the same revision is talked to
//! directly, one of the other revision through the shim's bridge, running
//! in this process. It then:
//!
//! - sends each recorded client message (`dir: c2s`) in order, with its
//!   recorded request id, paced by the records' `t` (or at once with
//!   [`Replay::fast`]), never before the server messages recorded ahead of
//!   it have arrived live;
//! - learns what the live server assigned differently (task ids, input
//!   request keys, `requestState`, any string at the same place in a
//!   recorded and a live answer) and puts the live values into later client
//!   messages;
//! - answers the server's own requests (elicitation, sampling, roots) with
//!   the recorded answers, matched to the live requests by method and
//!   shape, under the live request ids;
//! - reports every recorded message it could not place (no live
//!   counterpart within the timeout, an answer to a question never asked)
//!   in [`Replayed::unplaced`], with its transcript line.
//!
//! Against a server in the same process (here the crate's 2026-07-28
//! reference server, so this 2025-11-25 recording goes through the bridge):
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use std::time::Duration;
//! use mcp_tasks_shim::reference::ReferenceServer;
//! use mcp_tasks_shim::revision::Revision;
//! use mcp_tasks_shim::testing::{Transcript, replay::Replay};
//! use mcp_tasks_shim::upstream::{Link, channel};
//!
//! let (conn, events, mut server_end) = channel::pair(Duration::from_secs(5));
//! let server = ReferenceServer::new(Revision::Modern, server_end.to_shim.clone());
//! tokio::spawn(async move {
//!     while let Some(msg) = server_end.from_shim.recv().await {
//!         server.handle(msg);
//!     }
//! });
//! let link = Link::probe(conn, events, Duration::from_secs(5)).await;
//!
//! let recorded = Transcript::parse(r#"
//! {"t":0,"dir":"c2s","msg":{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"old-client","version":"1"}}}}
//! {"t":4,"dir":"s2c","msg":{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"old-server","version":"1"}}}}
//! {"t":5,"dir":"c2s","msg":{"jsonrpc":"2.0","method":"notifications/initialized"}}
//! {"t":6,"dir":"c2s","msg":{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"greet","arguments":{"name":"Ada"}}}}
//! {"t":9,"dir":"s2c","msg":{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"Hello, Ada!"}]}}}
//! "#).unwrap();
//! let replayed = Replay::new(recorded).fast(true).against_link(link).await.unwrap();
//! assert!(replayed.unplaced.is_empty(), "{:?}", replayed.unplaced);
//! let last = replayed.transcript.records.last().unwrap().1.msg.as_ref().unwrap().to_value();
//! assert_eq!(last["result"]["content"][0]["text"], "Hello, Ada!");
//! # }
//! ```
//!
//! Against a command, then compared with the recording:
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use mcp_tasks_shim::testing::{Masks, Transcript, compare, replay::Replay};
//! let recorded = Transcript::read("old-server.jsonl")?;
//! let replayed = Replay::new(recorded.clone())
//!     .fast(true)
//!     .against_command("node", &["new-server.js".to_owned()])
//!     .await?;
//! assert!(replayed.unplaced.is_empty(), "{:?}", replayed.unplaced);
//! let diff = compare(&recorded, &replayed.transcript, &Masks::default());
//! assert!(diff.is_equal(), "{}", diff.render(false));
//! # Ok(()) }
//! ```

mod assigned;
mod peer;

use std::collections::HashMap;
use std::time::Duration;

use serde_json::{Map, Value};
use tokio::time::Instant;

use super::{Dir, Record, Transcript};
use crate::jsonrpc::{Id, Message};
use crate::revision::{self, ClientSignal, Revision};
use crate::upstream::Link;
use assigned::Assigned;
use peer::Peer;

/// How long the replayer waits for each server message it expects, unless
/// told otherwise ([`Replay::timeout`]).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// A replay of one recorded client session, ready to run against a server.
#[derive(Debug, Clone)]
pub struct Replay {
    transcript: Transcript,
    fast: bool,
    timeout: Duration,
}

/// The outcome of a replay.
#[derive(Debug, Clone, Default)]
pub struct Replayed {
    /// What went over the wire this time, in the recording's format
    /// (`t`, `session`, `dir`, `msg`).
    pub transcript: Transcript,
    /// Recorded messages that found no live counterpart, in transcript order.
    pub unplaced: Vec<Unplaced>,
}

/// A recorded message the replay could not place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unplaced {
    /// Its 1-based line in the recorded transcript.
    pub line: usize,
    /// Why.
    pub reason: String,
}

/// Why a replay could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// No client message says which revision the transcript speaks.
    #[error(
        "the transcript has no client message that tells its revision (an initialize \
         request, or a request with io.modelcontextprotocol/protocolVersion in params._meta)"
    )]
    UnknownRevision,
    /// A client message names a protocol version the shim does not know.
    #[error(
        "line {line}: the client speaks protocol version {version:?}, which the shim does not know"
    )]
    UnknownVersion {
        /// The transcript line.
        line: usize,
        /// The version named.
        version: String,
    },
    /// The server command could not be started.
    #[error("{0}")]
    Start(std::io::Error),
    /// The server URL could not be reached or probed.
    #[error("{0}")]
    Connect(String),
}

impl Replay {
    /// A replay of `transcript`'s first client session (the session of its
    /// first client message; records of other sessions are reported as
    /// unplaced), paced by the records' `t`, waiting up to
    /// [`DEFAULT_TIMEOUT`] for each expected server message.
    pub fn new(transcript: Transcript) -> Replay {
        Replay {
            transcript,
            fast: false,
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// `true`: send each client message as soon as the server messages
    /// recorded before it have arrived, ignoring the recorded times.
    pub fn fast(mut self, fast: bool) -> Replay {
        self.fast = fast;
        self
    }

    /// How long to wait for each expected server message (and for the
    /// probe) before reporting it unplaced.
    pub fn timeout(mut self, timeout: Duration) -> Replay {
        self.timeout = timeout;
        self
    }

    /// The revision the transcript's client speaks.
    pub fn revision(&self) -> Result<Revision, ReplayError> {
        let session = first_session(&self.transcript);
        for (line, r) in self.session_records(session.as_ref()) {
            let (Dir::C2s, Some(msg)) = (r.dir, &r.msg) else {
                continue;
            };
            match revision::detect_client(msg) {
                ClientSignal::Is(rev) => return Ok(rev),
                ClientSignal::UnknownVersion(version) => {
                    return Err(ReplayError::UnknownVersion {
                        line: *line,
                        version,
                    });
                }
                ClientSignal::Ambiguous => {}
            }
        }
        Err(ReplayError::UnknownRevision)
    }

    /// Replays against `program args…` on stdio: directly when it speaks
    /// the transcript's revision, else through the shim's bridge.
    pub async fn against_command(
        self,
        program: &str,
        args: &[String],
    ) -> Result<Replayed, ReplayError> {
        let rev = self.revision()?;
        let mut peer = Peer::spawn(program, args).map_err(ReplayError::Start)?;
        let verdict = peer.probe(self.timeout).await;
        let speaks = verdict.clone().into_revision().0;
        tracing::info!(%verdict, transcript = %rev, "replay: server probed");
        let peer = if speaks == rev {
            peer
        } else {
            Peer::through_shim(peer.into_link(verdict, self.timeout), self.timeout)
        };
        Ok(self.drive(peer).await)
    }

    /// Replays against a Streamable HTTP server at `url`, through the
    /// shim's HTTP upstream (which relays unchanged when the server speaks
    /// the transcript's revision, and bridges when it does not).
    pub async fn against_url(self, url: &str) -> Result<Replayed, ReplayError> {
        self.revision()?;
        let link = crate::upstream::http::connect(url, self.timeout)
            .await
            .map_err(|e| ReplayError::Connect(e.to_string()))?;
        self.against_link(link.into()).await
    }

    /// Replays against an upstream already connected and probed (an
    /// in-process server, see [`crate::upstream::channel`]), through the
    /// shim's stdio front: relayed when `link` speaks the transcript's
    /// revision, bridged when it does not.
    pub async fn against_link(self, link: Link) -> Result<Replayed, ReplayError> {
        self.revision()?;
        let peer = Peer::through_shim(link, self.timeout);
        Ok(self.drive(peer).await)
    }

    fn session_records<'a>(
        &'a self,
        session: Option<&'a Value>,
    ) -> impl Iterator<Item = &'a (usize, Record)> + 'a {
        self.transcript
            .records
            .iter()
            .filter(move |(_, r)| in_session(r, session))
    }

    async fn drive(self, peer: Peer) -> Replayed {
        let session = first_session(&self.transcript);
        let mut run = Run::new(peer, self.timeout, session.clone());
        let t0 = self
            .session_records(session.as_ref())
            .find_map(|(_, r)| record_t(r))
            .unwrap_or(0);
        let mut deferred = Vec::new();
        for (line, r) in &self.transcript.records {
            let line = *line;
            let Some(msg) = r.msg.clone().filter(|_| in_session(r, session.as_ref())) else {
                run.unplaced(line, skipped_why(r));
                continue;
            };
            match r.dir {
                Dir::C2s => {
                    if !self.fast
                        && let Some(t) = record_t(r)
                    {
                        let at = Duration::from_millis(t.saturating_sub(t0));
                        tokio::time::sleep_until(run.started + at).await;
                    }
                    run.send_client(line, msg);
                }
                Dir::S2c => {
                    if let Some(later) = run.expect_server(line, msg).await {
                        deferred.push(later);
                    }
                }
            }
        }
        run.finish(deferred).await
    }
}

/// Why a record is not replayed.
fn skipped_why(r: &Record) -> String {
    match (&r.msg, r.extra.get("session")) {
        (None, _) => "a note without a message (a translation's output); nothing to send".into(),
        (Some(_), Some(s)) => {
            format!("belongs to session {s}; a replay plays one session, the transcript's first")
        }
        (Some(_), None) => "belongs to no session".into(),
    }
}

fn first_session(t: &Transcript) -> Option<Value> {
    t.records
        .iter()
        .find(|(_, r)| r.dir == Dir::C2s && r.msg.is_some())
        .and_then(|(_, r)| r.extra.get("session").cloned())
}

/// A record without a session label belongs to every session (transcripts
/// written before records carried one).
fn in_session(r: &Record, session: Option<&Value>) -> bool {
    match (r.extra.get("session"), session) {
        (Some(s), Some(want)) => s == want,
        _ => true,
    }
}

fn record_t(r: &Record) -> Option<u64> {
    r.extra.get("t").and_then(Value::as_u64)
}

/// A server message recorded as a notification, matched at the end.
struct Deferred {
    line: usize,
    method: String,
}

/// One replay in progress.
struct Run {
    peer: Peer,
    timeout: Duration,
    started: Instant,
    session: Value,
    out: Vec<(usize, Record)>,
    /// Received and not yet matched to a recorded message.
    inbox: Vec<Message>,
    closed: bool,
    assigned: Assigned,
    /// Recorded id of a server request → the live request's id.
    asked: HashMap<Id, Id>,
    unplaced: Vec<Unplaced>,
}

impl Run {
    fn new(peer: Peer, timeout: Duration, session: Option<Value>) -> Run {
        Run {
            peer,
            timeout,
            started: Instant::now(),
            session: session.unwrap_or_else(|| Value::from("session-1")),
            out: Vec::new(),
            inbox: Vec::new(),
            closed: false,
            assigned: Assigned::default(),
            asked: HashMap::new(),
            unplaced: Vec::new(),
        }
    }

    fn unplaced(&mut self, line: usize, reason: impl Into<String>) {
        self.unplaced.push(Unplaced {
            line,
            reason: reason.into(),
        });
    }

    fn log(&mut self, dir: Dir, msg: &Message) {
        let t = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let mut extra = Map::new();
        extra.insert("t".into(), Value::from(t));
        extra.insert("session".into(), self.session.clone());
        let record = Record {
            extra,
            ..Record::message(dir, msg.clone())
        };
        self.out.push((self.out.len() + 1, record));
    }

    /// Sends one recorded client message, rewritten for the live run.
    fn send_client(&mut self, line: usize, msg: Message) {
        let msg = match msg {
            Message::Response(mut r) => {
                let Some(live) = self.asked.get(&r.id) else {
                    return self.unplaced(line, unasked(&r.id));
                };
                r.id = live.clone();
                self.assigned.apply(&mut r.result);
                Message::Response(r)
            }
            Message::Error(mut e) => {
                let Some(live) = e.id.as_ref().and_then(|id| self.asked.get(id)) else {
                    return self.unplaced(line, unasked(e.id.as_ref().unwrap_or(&Id::Num(0))));
                };
                e.id = Some(live.clone());
                Message::Error(e)
            }
            Message::Request(mut r) => {
                if let Some(p) = r.params.as_mut() {
                    self.assigned.apply(p);
                }
                Message::Request(r)
            }
            Message::Notification(mut n) => {
                if let Some(p) = n.params.as_mut() {
                    self.assigned.apply(p);
                }
                Message::Notification(n)
            }
        };
        if self.closed || self.peer.tx.send(msg.clone()).is_err() {
            self.closed = true;
            return self.unplaced(line, "the server had closed the connection");
        }
        self.log(Dir::C2s, &msg);
    }

    /// Waits for the live counterpart of one recorded server message and
    /// learns from it; a notification not there yet is left for the end.
    async fn expect_server(&mut self, line: usize, recorded: Message) -> Option<Deferred> {
        let deadline = Instant::now() + self.timeout;
        match &recorded {
            Message::Notification(n) => {
                let method = n.method.clone();
                match self.claim(|m| is_notification(m, &method)) {
                    Some(_) => None,
                    None => Some(Deferred { line, method }),
                }
            }
            Message::Request(r) => {
                let want = shape(r.params.as_ref());
                let live = self
                    .wait_for(deadline, |m| {
                        matches!(m, Message::Request(l) if l.method == r.method
                            && shape(l.params.as_ref()) == want)
                    })
                    .await;
                // Another shape of the same question still beats none.
                let live = live.or_else(|| {
                    self.claim(|m| matches!(m, Message::Request(l) if l.method == r.method))
                });
                self.placed_request(line, r, live)
            }
            Message::Response(_) | Message::Error(_) => {
                let id = recorded.id().cloned();
                let live = self
                    .wait_for(deadline, |m| is_answer(m) && m.id() == id.as_ref())
                    .await;
                match live {
                    Some(live) => self.assigned.learn(&recorded.to_value(), &live.to_value()),
                    None => self.missing(line, "no answer to the client's request"),
                }
                None
            }
        }
    }
}

impl Run {
    fn placed_request(
        &mut self,
        line: usize,
        recorded: &crate::jsonrpc::Request,
        live: Option<Message>,
    ) -> Option<Deferred> {
        match live {
            Some(Message::Request(l)) => {
                if let (Some(rp), Some(lp)) = (&recorded.params, &l.params) {
                    self.assigned.learn(rp, lp);
                }
                self.asked.insert(recorded.id.clone(), l.id);
            }
            _ => {
                let what = format!("no live {} request from the server", recorded.method);
                self.missing(line, &what);
            }
        }
        None
    }

    fn missing(&mut self, line: usize, what: &str) {
        let why = if self.closed {
            format!("{what}: the server closed the connection")
        } else {
            format!("{what} within {:?}", self.timeout)
        };
        self.unplaced(line, why);
    }

    /// Takes the first received message `pred` accepts.
    fn claim(&mut self, pred: impl Fn(&Message) -> bool) -> Option<Message> {
        let i = self.inbox.iter().position(pred)?;
        Some(self.inbox.remove(i))
    }

    /// [`Run::claim`], receiving more until `deadline` or the end.
    async fn wait_for(
        &mut self,
        deadline: Instant,
        pred: impl Fn(&Message) -> bool,
    ) -> Option<Message> {
        loop {
            if let Some(m) = self.claim(&pred) {
                return Some(m);
            }
            if self.closed {
                return None;
            }
            match tokio::time::timeout_at(deadline, self.peer.rx.recv()).await {
                Ok(Some(m)) => self.receive(m),
                Ok(None) => self.closed = true,
                Err(_) => return None,
            }
        }
    }

    fn receive(&mut self, m: Message) {
        self.log(Dir::S2c, &m);
        self.inbox.push(m);
    }

    /// Matches the notifications left for the end (one shared deadline),
    /// takes in what has already arrived, and closes the connection.
    async fn finish(mut self, deferred: Vec<Deferred>) -> Replayed {
        let deadline = Instant::now() + self.timeout;
        for d in deferred {
            let method = d.method.clone();
            if self
                .wait_for(deadline, |m| is_notification(m, &method))
                .await
                .is_none()
            {
                self.missing(d.line, &format!("no live {method} notification"));
            }
        }
        while let Ok(m) = self.peer.rx.try_recv() {
            self.receive(m);
        }
        let Run {
            peer,
            out,
            mut unplaced,
            ..
        } = self;
        drop(peer.tx);
        if let Some(mut child) = peer.child {
            // Its input closed, a stdio server ends by itself; one that
            // lingers is killed.
            if tokio::time::timeout(Duration::from_secs(2), child.wait())
                .await
                .is_err()
            {
                let _ = child.kill().await;
            }
        }
        unplaced.sort_by_key(|u| u.line);
        Replayed {
            transcript: Transcript { records: out },
            unplaced,
        }
    }
}

fn unasked(id: &Id) -> String {
    format!("answers the server's request {id}, which had no live counterpart")
}

fn is_answer(m: &Message) -> bool {
    matches!(m, Message::Response(_) | Message::Error(_))
}

fn is_notification(m: &Message, method: &str) -> bool {
    matches!(m, Message::Notification(n) if n.method == method)
}

/// The shape of a server request's params, for matching a recorded one to
/// a live one: its member names, nested (values differ from run to run).
fn shape(params: Option<&Value>) -> Value {
    match params {
        Some(Value::Object(m)) => Value::Object(
            m.iter()
                .filter(|(k, _)| k.as_str() != "_meta")
                .map(|(k, v)| (k.clone(), shape(Some(v))))
                .collect(),
        ),
        Some(Value::Array(items)) => Value::from(items.len()),
        _ => Value::Null,
    }
}
