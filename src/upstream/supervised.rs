//! A child-process upstream under watch: faults are detected, reported to
//! everyone waiting, and (when asked) the child is started again.
//!
//! ```text
//!            fault: exit │ EOF │ invalid line │ unanswered liveness check
//!   Up(gen n) ──────────────────────────────────────────▶ Down(reason)
//!       ▲                        │ restart on
//!       │ probe + handshake ok   ▼
//!       └──────────────── Restarting(reason) ◀─┐ spawn/probe failed:
//!                                │             │ back off, try again
//!                                └─────────────┘
//! ```
//!
//! Each child is one *generation*: its own [`Connection`], reader, process
//! monitor and liveness check. A fault fails the generation's waiting
//! requests with the reason, sends [`UpstreamEvent::Closed`] and, without
//! restart, ends the event stream; later requests fail at once with the
//! same reason. With restart, requests made while the successor starts
//! wait for it (bounded) and the client `initialize` seen earlier (a
//! legacy upstream's session) is replayed to it, its answer swallowed,
//! followed by the last `logging/setLevel`, if the client sent one, and
//! each `resources/subscribe` the client has not unsubscribed.

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

// tokio's Instant, the clock of the sleeps that check it.
use tokio::time::Instant;

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio::process::ChildStdout;
use tokio::sync::{Notify, mpsc, watch};
use tokio::task::JoinHandle;

use super::{
    AnswerHandler, Connection, ModernUpstream, Readiness, RpcResult, TaskAnswer, TextAnswer,
    Upstream, UpstreamEvent, UpstreamStream, lock,
};
use crate::error::ShimError;
use crate::inline::InlineWakes;
use crate::jsonrpc::{Id, Message, Peeked};
use crate::revision::{ProbeVerdict, Revision};
use crate::translate::raw::Params;
use crate::translate::session::ModernMeta;
use crate::transport::child::ChildInput;
use crate::transport::lines::{BlockingLines, LineReader};
use crate::transport::record::Labelled;
use crate::transport::{self, Inbound, LineSink};

/// First delay before a restart; doubled after each failed attempt.
const BACKOFF_START: Duration = Duration::from_millis(100);
/// Longest delay between restart attempts.
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// After the child's output ends, how long to wait for its exit status so
/// the error can say how it ended.
const EXIT_GRACE: Duration = Duration::from_millis(500);
/// How long a stopping child may take to exit before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(3);
/// How often relayed requests are checked against `request_timeout`.
const RELAYED_SWEEP: Duration = Duration::from_secs(1);

/// How the upstream child is watched.
#[derive(Debug, Clone)]
pub struct SuperviseOptions {
    /// How long any upstream request may take.
    pub request_timeout: Duration,
    /// How long the `server/discover` probe (and a replayed `initialize`)
    /// may take.
    pub probe_timeout: Duration,
    /// Largest accepted message (bytes).
    pub max_message_bytes: usize,
    /// While requests are outstanding, check liveness this often (`None`:
    /// never).
    pub ping_interval: Option<Duration>,
    /// A liveness check unanswered this long means the upstream hung.
    pub ping_timeout: Duration,
    /// Start the child again after a fault.
    pub restart: bool,
    /// `--record-upstream`: every message to and from each child, labelled
    /// `upstream-1`, `upstream-2`… (one label per child process).
    pub record: Option<crate::transport::record::Recorder>,
}

impl Default for SuperviseOptions {
    fn default() -> Self {
        SuperviseOptions {
            request_timeout: Duration::from_secs(300),
            probe_timeout: Duration::from_secs(5),
            max_message_bytes: crate::jsonrpc::DEFAULT_MAX_MESSAGE_BYTES,
            ping_interval: Some(Duration::from_secs(5)),
            ping_timeout: Duration::from_secs(15),
            restart: false,
            record: None,
        }
    }
}

/// A supervised upstream and what its first probe learnt.
#[derive(Debug)]
pub struct SupervisedLink {
    /// Requests go here.
    pub upstream: Arc<Supervised>,
    /// Notifications, server requests, relayed answers and one `Closed`
    /// per fault. Ends when the upstream is gone for good.
    pub events: mpsc::UnboundedReceiver<UpstreamEvent>,
    /// The revision it speaks.
    pub revision: Revision,
    /// Its `server/discover` result (modern upstreams).
    pub discover: Value,
}

impl From<SupervisedLink> for super::Link {
    fn from(s: SupervisedLink) -> Self {
        super::Link {
            upstream: super::AnyUpstream::speaking(s.upstream, s.revision),
            events: s.events,
            discover: s.discover,
            child: None,
        }
    }
}

/// How the child's output is read once it moves to a thread.
#[derive(Clone, Debug)]
struct OnThread {
    /// A pass-through client's stdout, for the lines that are its own.
    relay_to: Option<Arc<dyn LineSink>>,
}

/// One child process and the connection to it.
#[derive(Debug)]
struct Generation {
    n: u64,
    /// `--record-upstream`, labelled for this child.
    record: Option<Labelled>,
    conn: Arc<Connection>,
    /// The child's stdin: the connection's messages and relayed lines.
    input: Arc<ChildInput>,
    /// Client request ids relayed unchanged and not answered yet, with
    /// when each went (for `request_timeout`).
    relayed: Mutex<HashMap<Id, Instant>>,
    /// Why it failed, once it did (first reason wins).
    dead: watch::Sender<Option<String>>,
    /// Its output has been read to the end.
    drained: watch::Sender<bool>,
    kill: Notify,
    monitor: Mutex<Option<JoinHandle<()>>>,
}

impl Generation {
    fn is_dead(&self) -> bool {
        self.dead.borrow().is_some()
    }
}

#[derive(Debug, Clone)]
enum State {
    Up(Arc<Generation>),
    Restarting(String),
    Down(String),
}

/// Client requests whose params a restarted child is sent again, in this
/// order, after its probe: the session a legacy server keeps. (An
/// unsubscribe is not sent again; it takes its subscribe off the list.)
const REPLAYED: [&str; 4] = [
    "initialize",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
];

/// What a client said to open its session, replayed to a restarted child.
#[derive(Debug, Default)]
struct Handshake {
    initialize: Option<Value>,
    initialized: bool,
    /// Params of the last `logging/setLevel`: session state a legacy
    /// server keeps, which a new child would otherwise not have.
    log_level: Option<Value>,
    /// Params of each `resources/subscribe` not since unsubscribed, by
    /// URI, in the order first asked.
    subscriptions: Vec<(String, Value)>,
}

impl Handshake {
    /// Keeps a subscription (the latest params for its URI).
    fn subscribe(&mut self, params: Value) {
        let Some(uri) = params.get("uri").and_then(Value::as_str) else {
            return; // The child refuses it; nothing to replay.
        };
        match self.subscriptions.iter_mut().find(|(u, _)| u == uri) {
            Some((_, kept)) => *kept = params,
            None => self.subscriptions.push((uri.to_owned(), params)),
        }
    }

    fn unsubscribe(&mut self, params: Option<&Value>) {
        let uri = params.and_then(|p| p.get("uri")).and_then(Value::as_str);
        self.subscriptions.retain(|(u, _)| Some(u.as_str()) != uri);
    }
}

/// An [`Upstream`] over a child process that is watched and may be
/// restarted; see the module documentation.
#[derive(Debug)]
pub struct Supervised {
    program: String,
    args: Vec<String>,
    opts: SuperviseOptions,
    revision: Mutex<Option<Revision>>,
    state: watch::Sender<State>,
    last: Mutex<Option<Arc<Generation>>>,
    handshake: Mutex<Handshake>,
    events: Mutex<Option<mpsc::UnboundedSender<UpstreamEvent>>>,
    stopping: AtomicBool,
    generations: AtomicU64,
    /// Successors that came up ([`Upstream::faults`]).
    restarts: AtomicU64,
    /// Liveness pings unanswered, successors that failed their probe.
    probe_failures: AtomicU64,
    /// Set once the child's output should be read on a thread (see
    /// [`Supervised::read_on_thread`]); with the sink of a pass-through
    /// client that wants its lines untouched.
    threaded: watch::Sender<Option<OnThread>>,
}

/// Starts `program args…` under supervision and probes its revision.
/// Fails when the program cannot be started at all, or, without
/// [`SuperviseOptions::restart`], when it is gone before the probe ends
/// (a wrong command, a missing config, a crash at start): a server that
/// serves nothing but "the upstream exited" for good helps nobody, and
/// the stdio proxy ends then too. With restarts the supervisor keeps
/// trying.
pub async fn connect(
    program: &str,
    args: &[String],
    opts: SuperviseOptions,
) -> std::io::Result<SupervisedLink> {
    let first_probe = opts.probe_timeout;
    connect_within(program, args, opts, first_probe).await
}

/// [`connect`] with the first probe allowed `first_probe` instead of
/// [`SuperviseOptions::probe_timeout`] (a server known to be slow to
/// start, `--upstream-wait`); restarts keep the probe timeout.
pub async fn connect_within(
    program: &str,
    args: &[String],
    opts: SuperviseOptions,
    first_probe: Duration,
) -> std::io::Result<SupervisedLink> {
    let restart = opts.restart;
    let started = start(program, args, opts)?;
    let first = started.generation.clone();
    let link = started.probe_within(first_probe).await;
    let gone = first.dead.borrow().clone();
    if let Some(why) = gone.filter(|_| !restart) {
        link.upstream.stop(&why);
        return Err(std::io::Error::other(format!(
            "the upstream server failed during start-up: {why}"
        )));
    }
    Ok(link)
}

/// A child started by [`start`] whose revision is still to be probed.
#[derive(Debug)]
pub struct Started {
    sup: Arc<Supervised>,
    events: mpsc::UnboundedReceiver<UpstreamEvent>,
    generation: Arc<Generation>,
}

/// [`connect`] in two steps, for a caller that may have to stop the
/// upstream while it is still being probed (a probe can take
/// `probe_timeout`; [`Supervised::stop`] ends it at once).
pub fn start(program: &str, args: &[String], opts: SuperviseOptions) -> std::io::Result<Started> {
    let (tx, events) = mpsc::unbounded_channel();
    let sup = Arc::new(Supervised {
        program: program.to_owned(),
        args: args.to_vec(),
        opts,
        revision: Mutex::new(None),
        state: watch::Sender::new(State::Down("the upstream has not started".into())),
        last: Mutex::new(None),
        handshake: Mutex::new(Handshake::default()),
        events: Mutex::new(Some(tx)),
        stopping: AtomicBool::new(false),
        generations: AtomicU64::new(0),
        restarts: AtomicU64::new(0),
        probe_failures: AtomicU64::new(0),
        threaded: watch::Sender::new(None),
    });
    // Current from the start, so a death during the probe is a fault like
    // any other (restarted or reported).
    let generation = sup.launch(true)?;
    Ok(Started {
        sup,
        events,
        generation,
    })
}

impl Started {
    /// The upstream being started.
    pub fn upstream(&self) -> &Arc<Supervised> {
        &self.sup
    }

    /// Probes the child's revision (see [`connect`]).
    pub async fn probe(self) -> SupervisedLink {
        let timeout = self.sup.opts.probe_timeout;
        self.probe_within(timeout).await
    }

    /// [`Started::probe`] allowed `timeout` for the answer.
    pub async fn probe_within(self, timeout: Duration) -> SupervisedLink {
        let Started {
            sup,
            events,
            generation,
        } = self;
        let verdict = super::probe(&*generation.conn, timeout, || generation.is_dead()).await;
        tracing::info!(%verdict, "upstream probe");
        let (revision, discover) = verdict.into_revision();
        *lock(&sup.revision) = Some(revision);
        sup.watch_liveness(&generation);
        SupervisedLink {
            upstream: sup,
            events,
            revision,
            discover,
        }
    }
}

impl Supervised {
    /// The state a fault of the live generation leads to: restarting when
    /// restarts are on, else down (saying why it stays down, unless the
    /// shim itself is stopping).
    fn after_fault(&self, reason: &str) -> Readiness {
        let stopping = self.stopping.load(Ordering::SeqCst);
        if self.opts.restart && !stopping {
            Readiness::Restarting(reason.to_owned())
        } else if stopping {
            Readiness::Down(reason.to_owned())
        } else {
            Readiness::Down(format!(
                "{reason}; it was not restarted (see --restart-upstream)"
            ))
        }
    }

    /// Relays a client message unchanged (pass-through). Requests are
    /// remembered so their answers come back as [`UpstreamEvent::Relayed`].
    /// While a successor starts, waits for it (bounded); fails at once when
    /// the upstream is down.
    pub async fn send_raw(&self, msg: Message) -> Result<(), ShimError> {
        let generation = self.live().await?;
        let mut line = Vec::with_capacity(256);
        msg.write_json(&mut line);
        line.push(b'\n');
        let id = match &msg {
            Message::Request(r) => {
                self.remember_session_state(&r.method, r.params.as_ref());
                Some(&r.id)
            }
            _ => None,
        };
        self.relay(&generation, id, msg.method(), &line)
    }

    /// [`Supervised::send_raw`] from a thread, with `line` (newline
    /// included) the bytes `head` was peeked from, written untouched. Only
    /// while a child is up, and not for the `REPLAYED` methods (their
    /// params are kept for restarts): `false` means nothing was
    /// sent, and the caller should parse the line and take the `send_raw`
    /// way, which waits for a restart and says what failed.
    pub fn relay_now(&self, head: &Peeked, line: &[u8]) -> bool {
        let (id, method) = match head {
            Peeked::Request { method, .. } if REPLAYED.contains(&method.as_str()) => return false,
            Peeked::Request { id, method } => (Some(id), Some(method.as_str())),
            Peeked::Notification { method } => (None, Some(method.as_str())),
            Peeked::Response { .. } => (None, None),
        };
        self.with_current(|generation| self.relay(generation, id, method, line).is_ok())
            .unwrap_or(false)
    }

    /// Has the child's output that a pass-through client should see
    /// (answers to relayed requests, the upstream's notifications and
    /// requests) written to `sink` as read, by a thread per child instead
    /// of through the event stream: the path a bare relay takes. Everything
    /// else still arrives as events.
    pub fn relay_output_to(&self, sink: Arc<dyn LineSink>) {
        self.threaded.send_replace(Some(OnThread {
            relay_to: Some(sink),
        }));
    }

    /// The client closed its side: the child's input is closed (asking it
    /// to stop) and nothing more is sent, but the answers it still writes
    /// to requests already sent reach their waiters, until it exits (see
    /// [`Upstream::finish`]); whoever is still waiting then fails with
    /// `reason`. No restart follows.
    pub fn close_input(&self, reason: &str) {
        self.stopping.store(true, Ordering::SeqCst);
        let old = self.state.send_replace(State::Down(reason.to_owned()));
        if let State::Up(generation) = old {
            generation.conn.close_input(reason);
        }
    }

    /// The shim is being stopped (a signal): as with
    /// [`Supervised::close_input`], the child's input is closed and no
    /// restart follows, and [`Upstream::finish`] gives it the same grace
    /// before killing it. But nobody will wait for what it still writes:
    /// every request waiting on it, the shim's own and those relayed for a
    /// pass-through client, fails with `reason` now.
    pub fn stop(&self, reason: &str) {
        let live = self.current().ok();
        Upstream::shutdown(self, reason);
        if let Some(generation) = live {
            self.fail_relayed(&generation, reason);
        }
    }

    /// Cuts [`Upstream::finish`]'s grace short: the child is killed now.
    pub fn kill(&self) {
        if let Some(generation) = lock(&self.last).as_ref() {
            generation.kill.notify_one();
        }
    }

    /// Has the child's output read by a thread per child with blocking
    /// reads, instead of a task: answers to the shim's own requests are
    /// delivered from there, and the request futures they wake (started
    /// with `inline::start_here`) continue there too, with no
    /// runtime worker woken. For a translating session on stdio.
    pub fn read_on_thread(&self) {
        self.threaded
            .send_replace(Some(OnThread { relay_to: None }));
    }

    /// Writes one client line: `id` when it is a request (its answer is
    /// the client's), `method` when it is a request or notification.
    fn relay(
        &self,
        generation: &Generation,
        id: Option<&Id>,
        method: Option<&str>,
        line: &[u8],
    ) -> Result<(), ShimError> {
        match id {
            Some(id) => {
                lock(&generation.relayed).insert(id.clone(), Instant::now());
            }
            None if method == Some("notifications/initialized") => {
                lock(&self.handshake).initialized = true;
            }
            None => {}
        }
        let failed = match generation.dead.borrow().clone() {
            Some(reason) => Some(ShimError::Upstream(reason)),
            None => generation
                .input
                .write_line(line)
                .err()
                .map(|e| ShimError::Upstream(format!("cannot write to the upstream: {e}"))),
        };
        let Some(error) = failed else { return Ok(()) };
        // A fault that ran meanwhile has taken the id and answers it; only
        // an id still here is ours to fail.
        match id {
            Some(id) if lock(&generation.relayed).remove(id).is_none() => Ok(()),
            _ => Err(error),
        }
    }

    /// Keeps the params of a client request a restarted child must see
    /// again (see [`REPLAYED`]).
    fn remember_session_state(&self, method: &str, params: Option<&Value>) {
        let owned = || params.cloned().unwrap_or_else(|| json!({}));
        match method {
            "initialize" => lock(&self.handshake).initialize = Some(owned()),
            "logging/setLevel" => lock(&self.handshake).log_level = Some(owned()),
            "resources/subscribe" => lock(&self.handshake).subscribe(owned()),
            "resources/unsubscribe" => lock(&self.handshake).unsubscribe(params),
            _ => {}
        }
    }

    /// The live generation, or why there is none (without waiting).
    fn current(&self) -> Result<Arc<Generation>, ShimError> {
        match &*self.state.borrow() {
            State::Up(g) => Ok(g.clone()),
            State::Restarting(r) => Err(ShimError::Upstream(format!(
                "{r}; the upstream is being restarted"
            ))),
            State::Down(r) => Err(ShimError::Upstream(r.clone())),
        }
    }

    /// `f` on the live generation, borrowed: a clone's count would be
    /// written by the client's thread on a cache line the child's reader
    /// reads, once per line relayed.
    fn with_current<T>(&self, f: impl FnOnce(&Arc<Generation>) -> T) -> Option<T> {
        match &*self.state.borrow() {
            State::Up(g) => Some(f(g)),
            _ => None,
        }
    }

    /// The live generation; while one is being started, waits for it (at
    /// most a probe timeout and a bit).
    async fn live(&self) -> Result<Arc<Generation>, ShimError> {
        if let Ok(up) = self.current() {
            return Ok(up);
        }
        let mut rx = self.state.subscribe();
        let wait = self.opts.probe_timeout + BACKOFF_MAX;
        let _ =
            tokio::time::timeout(wait, rx.wait_for(|s| !matches!(s, State::Restarting(_)))).await;
        self.current()
    }

    fn make_current(&self, generation: &Arc<Generation>) {
        *lock(&self.last) = Some(generation.clone());
        self.state.send_replace(State::Up(generation.clone()));
    }

    fn emit(&self, ev: UpstreamEvent) {
        if let Some(tx) = lock(&self.events).as_ref() {
            let _ = tx.send(ev);
        }
    }

    /// Spawns the child and its reader, monitor and liveness tasks; a
    /// `current` generation is made current before any of them runs (a
    /// child that exits at once is then a fault of the current upstream,
    /// restarted or reported, not a retired one's end).
    fn launch(self: &Arc<Self>, current: bool) -> std::io::Result<Arc<Generation>> {
        let spawned = transport::child::spawn(&self.program, &self.args)?;
        let n = self.generations.fetch_add(1, Ordering::Relaxed) + 1;
        let (out, out_rx) = mpsc::unbounded_channel();
        let record = self.opts.record.clone().map(|rec| Labelled {
            rec,
            label: Arc::from(format!("upstream-{n}")),
        });
        let input = ChildInput::start_recorded(spawned.stdin, out_rx, record.clone())?;
        let generation = Arc::new(Generation {
            n,
            record,
            input: input.clone(),
            conn: Arc::new(
                Connection::with_id_prefix(
                    out,
                    self.opts.request_timeout,
                    &format!("mcp-tasks-shim-{n}-"),
                )
                .writing_lines_to(input),
            ),
            relayed: Mutex::new(HashMap::new()),
            dead: watch::Sender::new(None),
            drained: watch::Sender::new(false),
            kill: Notify::new(),
            monitor: Mutex::new(None),
        });
        if current {
            self.make_current(&generation);
        }
        tokio::spawn(self.clone().read(generation.clone(), spawned.stdout));
        tokio::spawn(self.clone().time_out_relayed(generation.clone()));
        let monitor = tokio::spawn(self.clone().monitor(generation.clone(), spawned.child));
        *lock(&generation.monitor) = Some(monitor);
        tracing::debug!(generation = n, program = %self.program, "upstream started");
        Ok(generation)
    }

    /// Reads and routes what the child writes, in one task (a reader task
    /// feeding a router task cost a hand-off per message); an invalid line
    /// or the end of its output is a fault.
    ///
    /// Once [`Supervised::relay_output_to`] or
    /// [`Supervised::read_on_thread`] asks for it, the reading moves to a
    /// thread of its own (see [`Supervised::read_blocking`]), bytes already
    /// buffered included.
    async fn read(self: Arc<Self>, generation: Arc<Generation>, stdout: ChildStdout) {
        let mut lines = LineReader::new(stdout, self.opts.max_message_bytes);
        let mut threaded = self.threaded.subscribe();
        loop {
            let next = tokio::select! {
                biased;
                Ok(wanted) = threaded.wait_for(Option::is_some) => {
                    let how = wanted.clone();
                    drop(wanted);
                    if let Some(how) = how {
                        self.go_thread(generation, lines, how);
                        return;
                    }
                    continue;
                }
                next = lines.next() => next,
            };
            // A read error ends the output as EOF does.
            let Ok(Some(inbound)) = next else { break };
            if let (Some(rec), Inbound::Message(m)) = (&generation.record, &inbound) {
                rec.record("s2c", m);
            }
            if generation.is_dead() || self.route(&generation, inbound, None).is_break() {
                return;
            }
        }
        self.output_ended(generation).await;
    }

    /// Hands the child's output, and whatever of it is already buffered,
    /// to a thread running [`Supervised::read_blocking`].
    fn go_thread(
        self: Arc<Self>,
        generation: Arc<Generation>,
        lines: LineReader<ChildStdout>,
        how: OnThread,
    ) {
        let (buffered, stdout) = lines.into_parts();
        // The descriptor comes back in blocking mode, for plain reads.
        let started = stdout.into_owned_fd().and_then(|fd| {
            let reader =
                std::io::Read::chain(std::io::Cursor::new(buffered), std::fs::File::from(fd));
            let me = self.clone();
            let (generation, rt) = (generation.clone(), tokio::runtime::Handle::current());
            std::thread::Builder::new()
                .name(format!("upstream-{}-out", generation.n))
                .spawn(move || me.read_blocking(generation, reader, how.relay_to, rt))
        });
        if let Err(e) = started {
            self.fault(
                &generation,
                format!("cannot read the upstream's output: {e}"),
            );
        }
    }

    /// [`Supervised::read`] on a thread with blocking reads. With
    /// `relay_to`, what a pass-through client should see is written there
    /// from this thread, with no task hand-off, no re-serialising and no
    /// extra wake-up. Request futures woken by the answers routed here are
    /// polled here (see [`InlineWakes`]).
    fn read_blocking(
        self: Arc<Self>,
        generation: Arc<Generation>,
        reader: impl std::io::Read,
        relay_to: Option<Arc<dyn LineSink>>,
        rt: tokio::runtime::Handle,
    ) {
        // Faults start restarts with `tokio::spawn`; woken futures arm timers.
        let _rt = rt.enter();
        let wakes = InlineWakes::start();
        let max = self.opts.max_message_bytes;
        let mut lines = BlockingLines::new(reader, max);
        // A read error ends the output as EOF does.
        while let Ok(Some(line)) = lines.next_raw() {
            if generation.is_dead() {
                return;
            }
            if let Some(rec) = &generation.record
                && line.len() <= max
            {
                rec.record_line("s2c", line);
            }
            // The common case of pass-through, an answer to a relayed
            // request, is forwarded on its envelope alone; everything else
            // is parsed in full.
            if let Some(sink) = &relay_to
                && line.len() <= max
                && let Some(Peeked::Response { id }) = crate::jsonrpc::peek(line)
                && lock(&generation.relayed).remove(&id).is_some()
            {
                forward(&**sink, line);
                continue;
            }
            // An answer its request reads from the bytes itself (a task, a result's text).
            if line.len() <= max && generation.conn.take_answer(line) {
                wakes.run();
                continue;
            }
            let Some(inbound) = transport::lines::classify(line, max) else {
                continue;
            };
            let raw = relay_to.as_ref().map(|sink| (line, &**sink));
            if self.route(&generation, inbound, raw).is_break() {
                return;
            }
            wakes.run();
        }
        drop(wakes);
        rt.spawn(self.output_ended(generation));
    }

    /// One line read from the child; `Break` when it broke the stream.
    fn route(
        self: &Arc<Self>,
        generation: &Arc<Generation>,
        inbound: Inbound,
        raw: Option<(&[u8], &dyn LineSink)>,
    ) -> ControlFlow<()> {
        match inbound {
            Inbound::Message(m) => self.inbound(generation, m, raw),
            Inbound::Invalid {
                oversized,
                error,
                answer_to,
                ..
            } if oversized || answer_to.is_some() => {
                // Too big for us, or an answer we cannot hold: the stream
                // itself is fine.
                tracing::warn!(%error, id = ?answer_to, "upstream message refused");
                if let Some(id) = answer_to {
                    // Whoever waits for that answer learns why, now.
                    self.inbound(generation, super::oversized_answer(id, &error), None);
                }
            }
            Inbound::Invalid { error, excerpt, .. } => {
                let reason = format!("upstream sent invalid JSON-RPC: {excerpt:?} ({error})");
                tracing::error!(generation = generation.n, %reason, "upstream stream broken");
                self.fault(generation, reason);
                return ControlFlow::Break(());
            }
        }
        ControlFlow::Continue(())
    }

    /// The child's output ended: a fault, named after the exit status when
    /// there is one.
    async fn output_ended(self: Arc<Self>, generation: Arc<Generation>) {
        generation.drained.send_replace(true);
        // The exit status says more than "EOF": give the monitor a moment.
        let mut dead = generation.dead.subscribe();
        let _ = tokio::time::timeout(EXIT_GRACE, dead.wait_for(Option::is_some)).await;
        self.fault(&generation, "upstream closed its output".into());
    }

    fn inbound(&self, generation: &Generation, m: Message, raw: Option<(&[u8], &dyn LineSink)>) {
        let relayed = match &m {
            Message::Response(_) | Message::Error(_) => m
                .id()
                .is_some_and(|id| lock(&generation.relayed).remove(id).is_some()),
            _ => false,
        };
        let event = if relayed {
            Some(UpstreamEvent::Relayed(m))
        } else {
            generation.conn.on_inbound(m)
        };
        match (event, raw) {
            (
                Some(
                    UpstreamEvent::Relayed(_)
                    | UpstreamEvent::Notification(_)
                    | UpstreamEvent::Request(_),
                ),
                Some((line, sink)),
            ) => forward(sink, line),
            (Some(ev), _) => self.emit(ev),
            (None, _) => {}
        }
    }

    /// Waits for the child to exit (or kills it when told to).
    async fn monitor(
        self: Arc<Self>,
        generation: Arc<Generation>,
        mut child: tokio::process::Child,
    ) {
        let status = tokio::select! {
            s = child.wait() => {
                // What it wrote before exiting may still be in the pipe
                // (answers to a client that has just closed its side,
                // typically), and the fault below ends the reading: let
                // the reader reach the end first.
                let mut drained = generation.drained.subscribe();
                let _ = tokio::time::timeout(EXIT_GRACE, drained.wait_for(|d| *d)).await;
                s
            }
            () = generation.kill.notified() => {
                let _ = child.start_kill();
                match tokio::time::timeout(STOP_GRACE, child.wait()).await {
                    Ok(s) => s,
                    Err(_) => Err(std::io::Error::other("the process did not die")),
                }
            }
        };
        let reason = match status {
            Ok(s) => format!("upstream exited ({s})"),
            Err(e) => format!("upstream process lost: {e}"),
        };
        self.fault(&generation, reason);
    }

    /// Relayed requests get `request_timeout` as the shim's own do: one
    /// unanswered that long is answered `-32603`, cancelled upstream and
    /// forgotten, so a late answer from the child is dropped rather than
    /// sent twice. The shim's own requests that no future waits on
    /// ([`Connection::expire_callbacks`]) time out here too. The check
    /// wakes when the oldest of either is due, and once a second while
    /// none is waiting.
    async fn time_out_relayed(self: Arc<Self>, generation: Arc<Generation>) {
        let limit = self.opts.request_timeout;
        let mut dead = generation.dead.subscribe();
        let mut wait = RELAYED_SWEEP.min(limit);
        loop {
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                _ = dead.wait_for(Option::is_some) => return,
            }
            let now = Instant::now();
            // The shim's own requests answered by callbacks time out here
            // too (no timer of their own); their handlers run outside the
            // lock below.
            let callbacks = generation.conn.expire_callbacks(now);
            let mut expired = Vec::new();
            {
                let mut relayed = lock(&generation.relayed);
                relayed.retain(|id, since| {
                    let due = now.duration_since(*since) >= limit;
                    if due {
                        expired.push(id.clone());
                    }
                    !due
                });
                // Wake when the oldest one left is due (a tick after, at
                // most), not a whole sweep late.
                wait = relayed
                    .values()
                    .map(|since| *since + limit)
                    .chain(callbacks)
                    .min()
                    .map_or(RELAYED_SWEEP.min(limit), |due| {
                        due.saturating_duration_since(now)
                            .max(Duration::from_millis(1))
                    });
            }
            for id in expired {
                tracing::warn!(
                    ?id,
                    "a relayed request went unanswered for --request-timeout; cancelled"
                );
                let why = format!(
                    "no answer within {} s (--request-timeout)",
                    limit.as_secs_f64()
                );
                // The server stops the work nobody waits for any more, as
                // for the shim's own requests.
                if let Err(e) = generation
                    .conn
                    .send(super::stream::cancel_message(&id, &why))
                {
                    tracing::debug!(error = %e, "could not cancel a timed-out relayed request");
                }
                let error = ShimError::Upstream(why);
                self.emit(UpstreamEvent::Relayed(Message::error(
                    Some(id),
                    error.into(),
                )));
            }
        }
    }

    /// Starts the liveness check of a probed generation. (Not earlier: a
    /// slow start is the probe timeout's business, and the check needs the
    /// revision to pick its request.)
    fn watch_liveness(self: &Arc<Self>, generation: &Arc<Generation>) {
        if let Some(every) = self.opts.ping_interval {
            tokio::spawn(self.clone().check_liveness(generation.clone(), every));
        }
    }

    /// While requests are outstanding, asks for a sign of life; silence
    /// past the timeout means the upstream hung.
    async fn check_liveness(self: Arc<Self>, generation: Arc<Generation>, every: Duration) {
        let mut dead = generation.dead.subscribe();
        loop {
            tokio::select! {
                () = tokio::time::sleep(every) => {}
                _ = dead.wait_for(Option::is_some) => return,
            }
            if generation.conn.pending() == 0 && lock(&generation.relayed).is_empty() {
                continue;
            }
            // `ping` is legacy only; a modern server's cheapest request is
            // `server/discover`. Any answer, even an error, proves life.
            let (method, params) = match *lock(&self.revision) {
                Some(Revision::Modern) => ("server/discover", super::probe_params()),
                _ => ("ping", json!({})),
            };
            let timeout = self.opts.ping_timeout;
            match tokio::time::timeout(timeout, generation.conn.request(method, params)).await {
                Ok(Ok(_)) => {}
                // The connection closed: whoever closed it gave the reason.
                Ok(Err(_)) => return,
                Err(_) => {
                    self.probe_failures.fetch_add(1, Ordering::Relaxed);
                    let reason = format!(
                        "upstream stopped answering: no reply to {method} within {} ms",
                        timeout.as_millis()
                    );
                    self.fault(&generation, reason);
                    return;
                }
            }
        }
    }

    /// Records the first fault of a generation: its waiters fail with
    /// `reason`, the child is killed, and if it was the live generation the
    /// fronts hear of it and a restart begins (when configured).
    fn fault(self: &Arc<Self>, generation: &Arc<Generation>, reason: String) {
        let first = generation.dead.send_if_modified(|d| {
            if d.is_some() {
                return false;
            }
            *d = Some(reason.clone());
            true
        });
        if !first {
            return;
        }
        let was_live = matches!(&*self.state.borrow(), State::Up(g) if Arc::ptr_eq(g, generation));
        let stopping = self.stopping.load(Ordering::SeqCst);
        let restart = self.opts.restart && !stopping;
        // A first child gone before its probe ended, with no restart to
        // come, is the fatal error its caller reports (`connect`, the
        // stdio proxy): said here too, it was logged twice. Read before
        // the connection closes below, which ends the probe.
        let fatal_at_start = generation.n == 1 && lock(&self.revision).is_none() && !restart;
        // The state changes before anyone hears of the fault: a client
        // told below that its request failed may send the next one at
        // once, and that one must wait for the successor (or fail with
        // this reason), not reach the dead connection.
        if was_live {
            let state = match self.after_fault(&reason) {
                Readiness::Restarting(why) => State::Restarting(why),
                other => State::Down(other.why_not().unwrap_or(&reason).to_owned()),
            };
            self.state.send_replace(state);
        }
        generation.conn.close(&reason);
        // Relayed requests are answered here, before `Closed`, so a client
        // hears why its request failed whichever way the answer would
        // have come.
        self.fail_relayed(generation, &reason);
        // A hung or garbling child must not linger; for an exited one this
        // is a no-op.
        generation.kill.notify_one();
        if !was_live {
            tracing::debug!(generation = generation.n, %reason, "retired upstream ended");
            return;
        }
        if fatal_at_start {
            tracing::debug!(generation = generation.n, %reason, "upstream failed during start-up");
        } else if !stopping {
            tracing::error!(generation = generation.n, %reason, "upstream failed");
        }
        self.emit(UpstreamEvent::Closed(reason.clone()));
        if restart {
            tokio::spawn(self.clone().restart(reason));
        } else {
            // No successor: the event stream ends here.
            lock(&self.events).take();
        }
    }

    /// Answers each client request relayed to `generation` and still
    /// unanswered with `reason`. Taking an id out of `relayed` is what
    /// makes an answer ours to give: one the child sends later finds no
    /// id, and the client never gets two.
    fn fail_relayed(&self, generation: &Generation, reason: &str) {
        let orphans: Vec<Id> = lock(&generation.relayed)
            .drain()
            .map(|(id, _)| id)
            .collect();
        for id in orphans {
            let error = ShimError::Upstream(reason.to_owned()).into();
            self.emit(UpstreamEvent::Relayed(Message::error(Some(id), error)));
        }
    }

    /// Starts successors with backoff until one answers its probe.
    async fn restart(self: Arc<Self>, cause: String) {
        let mut delay = BACKOFF_START;
        let mut attempt = 0u32;
        loop {
            tokio::time::sleep(delay).await;
            if self.stopping.load(Ordering::SeqCst) {
                return;
            }
            attempt += 1;
            match self.bring_up().await {
                Ok(generation) => {
                    if self.stopping.load(Ordering::SeqCst) {
                        generation.conn.close("the shim is shutting down");
                        return;
                    }
                    tracing::warn!(
                        generation = generation.n,
                        attempt,
                        after = %cause,
                        "upstream restarted"
                    );
                    self.restarts.fetch_add(1, Ordering::Relaxed);
                    self.make_current(&generation);
                    self.watch_liveness(&generation);
                    return;
                }
                Err(e) => {
                    self.probe_failures.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(attempt, error = %e, "upstream restart failed; retrying");
                    delay = (delay * 2).min(BACKOFF_MAX);
                }
            }
        }
    }

    /// A new generation that answered its probe with the same revision and
    /// has seen the client's handshake again.
    async fn bring_up(self: &Arc<Self>) -> Result<Arc<Generation>, String> {
        let generation = self.launch(false).map_err(|e| e.to_string())?;
        let result = self.prepare(&generation).await;
        if let Err(e) = &result {
            self.fault(&generation, e.clone());
        }
        result.map(|()| generation)
    }

    async fn prepare(&self, generation: &Arc<Generation>) -> Result<(), String> {
        let verdict = self.probe(generation).await;
        if let Some(reason) = generation.dead.borrow().clone() {
            return Err(reason);
        }
        let revision = match verdict {
            ProbeVerdict::Legacy => Revision::Legacy,
            _ => Revision::Modern,
        };
        let expected = *lock(&self.revision);
        if expected.is_some_and(|r| r != revision) {
            return Err(format!(
                "the restarted upstream speaks {revision}, not {}",
                expected.map_or_else(String::new, |r| r.to_string())
            ));
        }
        let (initialize, initialized, state) = {
            let h = lock(&self.handshake);
            let state: Vec<(&str, Value)> = h
                .log_level
                .iter()
                .map(|p| ("logging/setLevel", p.clone()))
                .chain(
                    h.subscriptions
                        .iter()
                        .map(|(_, p)| ("resources/subscribe", p.clone())),
                )
                .collect();
            (h.initialize.clone(), h.initialized, state)
        };
        if let Some(params) = initialize {
            // The answer is the client's business only the first time.
            let ask = generation.conn.request("initialize", params);
            match tokio::time::timeout(self.opts.probe_timeout, ask).await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => return Err(format!("replaying initialize failed: {e}")),
                Err(_) => return Err("no answer to the replayed initialize".into()),
            }
            if initialized {
                // Written at once, not queued behind the connection's
                // channel: relayed lines may follow as soon as this
                // generation is current, and must come after it.
                let mut line = Vec::with_capacity(64);
                Message::notification("notifications/initialized", json!({})).write_json(&mut line);
                line.push(b'\n');
                generation
                    .input
                    .write_line(&line)
                    .map_err(|e| format!("replaying notifications/initialized failed: {e}"))?;
            }
        }
        for (method, params) in state {
            let ask = generation.conn.request(method, params);
            match tokio::time::timeout(self.opts.probe_timeout, ask).await {
                Ok(Ok(Ok(_))) => {}
                // The client heard the first answer; a refusal now changes
                // nothing it can act on, and the child is otherwise fine.
                Ok(Ok(Err(e))) => {
                    tracing::warn!(method, error = %e.message, "the restarted upstream refused a replayed request");
                }
                Ok(Err(e)) => return Err(format!("replaying {method} failed: {e}")),
                Err(_) => return Err(format!("no answer to the replayed {method}")),
            }
        }
        Ok(())
    }

    async fn probe(&self, generation: &Generation) -> ProbeVerdict {
        super::probe(&*generation.conn, self.opts.probe_timeout, || {
            generation.is_dead()
        })
        .await
    }
}

#[async_trait]
impl Upstream for Supervised {
    async fn request(&self, method: &str, params: Value) -> Result<RpcResult, ShimError> {
        self.remember_session_state(method, Some(&params));
        self.live().await?.conn.request(method, params).await
    }

    fn notify(&self, method: &str, params: Value) -> Result<(), ShimError> {
        if method == "notifications/initialized" {
            lock(&self.handshake).initialized = true;
        }
        self.current()?.conn.notify(method, params)
    }

    fn respond(&self, id: Id, outcome: RpcResult) -> Result<(), ShimError> {
        self.current()?.conn.respond(id, outcome)
    }

    /// Read from the supervisor's state, the one place that changes as
    /// children fail and successors come up.
    fn readiness(&self) -> Readiness {
        match &*self.state.borrow() {
            State::Up(generation) if !generation.is_dead() => Readiness::Up,
            // Dead, and the fault not handled yet: what the handler is
            // about to say, so that no reader sees a state in between.
            State::Up(generation) => {
                let reason = generation.dead.borrow().clone();
                self.after_fault(&reason.unwrap_or_else(|| "the upstream failed".into()))
            }
            State::Restarting(why) => Readiness::Restarting(why.clone()),
            State::Down(why) => Readiness::Down(why.clone()),
        }
    }

    fn faults(&self) -> super::Faults {
        super::Faults {
            restarts: self.restarts.load(Ordering::Relaxed),
            probe_failures: self.probe_failures.load(Ordering::Relaxed),
        }
    }

    fn shutdown(&self, reason: &str) {
        self.stopping.store(true, Ordering::SeqCst);
        let old = self.state.send_replace(State::Down(reason.to_owned()));
        if let State::Up(generation) = old {
            // Closing its input asks the child to stop; its waiters fail.
            generation.conn.close(reason);
        }
    }

    async fn events_handled(&self) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.emit(UpstreamEvent::Barrier(tx));
        let _ = rx.await;
    }

    async fn finish(&self) {
        let Some(generation) = lock(&self.last).clone() else {
            return;
        };
        let Some(mut monitor) = lock(&generation.monitor).take() else {
            return;
        };
        if tokio::time::timeout(STOP_GRACE, &mut monitor)
            .await
            .is_err()
        {
            tracing::warn!("upstream did not exit after its stdin closed; killing it");
            generation.kill.notify_one();
            let _ = tokio::time::timeout(STOP_GRACE, monitor).await;
        }
    }
}

#[async_trait]
impl ModernUpstream for Supervised {
    async fn request_with_meta(
        &self,
        method: &str,
        params: &Value,
        meta: &ModernMeta,
    ) -> Result<RpcResult, ShimError> {
        // Only legacy sessions over a 2026-07-28 child get here, which has
        // no session state to replay.
        let generation = self.live().await?;
        generation
            .conn
            .request_with_meta(method, params, meta)
            .await
    }

    async fn get_task(&self, task_id: &str, meta: &ModernMeta) -> Result<TaskAnswer, ShimError> {
        self.live().await?.conn.get_task(task_id, meta).await
    }

    async fn request_text(
        &self,
        method: &str,
        params: Params<'_>,
        meta: &ModernMeta,
    ) -> Option<Result<TextAnswer, ShimError>> {
        match self.live().await {
            Ok(generation) => generation.conn.request_text(method, params, meta).await,
            Err(e) => Some(Err(e)),
        }
    }

    /// On the live child, whose sweep keeps the request timeout. Not
    /// while one is being started: the usual way waits for it.
    fn request_with_callback(
        &self,
        method: &'static str,
        meta: &ModernMeta,
        handler: Box<dyn AnswerHandler>,
    ) -> bool {
        let state = self.state.borrow();
        let unsent = match &*state {
            State::Up(generation) => {
                match generation.conn.request_with_callback(method, meta, handler) {
                    Ok(()) => return true,
                    Err(unsent) => unsent,
                }
            }
            _ => super::Unsent::NotSent(handler),
        };
        // The handler hears of it once the state is no longer borrowed:
        // its work may read it again (a restart's wait).
        drop(state);
        // A failed write is the request's answer; not sent, not.
        let taken = matches!(unsent, super::Unsent::Failed(..));
        unsent.tell();
        taken
    }

    /// On the live child: a request of a child since gone was failed
    /// with it.
    fn abandon_for(&self, client: &dyn std::any::Any, id: &Id) -> bool {
        self.current()
            .is_ok_and(|generation| generation.conn.abandon_for(client, id))
    }

    /// On the live child. Its streams end with it (a fault closes its
    /// connection), so none outlives a restart looking alive; a successor
    /// starts without any.
    async fn open_stream(&self, method: &str, params: Value) -> Result<UpstreamStream, ShimError> {
        self.live().await?.conn.open_stream(method, params).await
    }
}

/// Writes a line the child wrote to a pass-through client, newline
/// included even for a last line without one.
fn forward(sink: &dyn LineSink, line: &[u8]) {
    if let Err(e) = sink.write_line(&transport::lines::with_newline(line)) {
        // The client is gone; its end of stdin ends the session.
        tracing::debug!(error = %e, "writing to the client failed");
    }
}
