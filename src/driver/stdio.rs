//! The stdio proxy driver: one client on a byte stream (the shim's own
//! stdin/stdout), one upstream child process, and the engine chosen by the
//! revisions the two speak.
//!
//! ```text
//!  client lines ──▶ Inbound ──▶ ┌────────┐ ──▶ Supervised ──▶ child stdin
//!  client lines ◀── outbox  ◀── │ driver │ ◀── events     ◀── child stdout
//!                               └────────┘     (restarted on faults if asked)
//!        mode: probing → passthrough | legacy-front | modern-front
//! ```
//!
//! On the shim's own stdio ([`run_stdio`]) the driver steps aside once the
//! first message has chosen the mode (see `Lane`): the stdin thread takes
//! each client line where it goes, and a thread per child reads the
//! child's output. Pass-through lines are relayed as read; a translating
//! session's engine is fed on the stdin thread, which translates a request
//! and writes it upstream before it first waits, and the answer finishes
//! the request on the child's reader thread (`src/inline.rs`). Either
//! way a round trip crosses the two threads a bare relay has, and the
//! client's lines are written to stdout by whichever thread has them
//! ([`crate::transport::stdout`]).

use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;

use crate::bridge::legacy_front::{LegacyFront, LegacySession};
use crate::bridge::modern_front::{ModernFront, ModernSession};
use crate::bridge::{BridgeConfig, Deliver, Outbox, PeerGone, Route};
use crate::error::ShimError;
use crate::jsonrpc::{Id, Message, Reply};
use crate::ledger::TaskLedger;
use crate::revision::{self, ClientSignal, Revision};
use crate::scope::Scope;
use crate::transport::stdout::SharedStdout;
use crate::transport::{self, Inbound, LineSink};
use crate::upstream::supervised::{self, SuperviseOptions, Supervised};
use crate::upstream::{AnyUpstream, Link, Upstream, UpstreamEvent};

/// How the proxy was configured.
#[derive(Debug, Clone)]
pub struct ProxyOptions {
    /// Engine settings.
    pub bridge: BridgeConfig,
    /// How long to wait for the `server/discover` probe.
    pub probe_timeout: Duration,
    /// How long any upstream request may take.
    pub request_timeout: Duration,
    /// Largest accepted message (bytes).
    pub max_message_bytes: usize,
    /// Where to append the client-side transcript (JSONL), if anywhere.
    pub record: Option<std::path::PathBuf>,
    /// Where to append the upstream-side transcript (JSONL): what the shim
    /// sent the upstream and what it answered, if anywhere. For the child
    /// [`run`] and [`run_stdio`] start; [`serve_stdio`] is handed a
    /// connected [`Link`] and ignores it (build that upstream recording
    /// itself: [`SuperviseOptions::record`],
    /// [`crate::upstream::http::connect_recorded`]).
    pub record_upstream: Option<std::path::PathBuf>,
    /// While upstream requests are outstanding, check the upstream's
    /// liveness this often (`None`: never).
    pub ping_interval: Option<Duration>,
    /// An unanswered liveness check fails the upstream after this long.
    pub ping_timeout: Duration,
    /// Start the upstream again after it exits, hangs or garbles.
    pub restart_upstream: bool,
}

impl Default for ProxyOptions {
    fn default() -> Self {
        let s = SuperviseOptions::default();
        ProxyOptions {
            bridge: BridgeConfig::default(),
            probe_timeout: s.probe_timeout,
            request_timeout: s.request_timeout,
            max_message_bytes: s.max_message_bytes,
            record: None,
            record_upstream: None,
            ping_interval: s.ping_interval,
            ping_timeout: s.ping_timeout,
            restart_upstream: s.restart,
        }
    }
}

impl ProxyOptions {
    /// How the upstream child is supervised.
    pub fn supervise(&self) -> SuperviseOptions {
        SuperviseOptions {
            request_timeout: self.request_timeout,
            probe_timeout: self.probe_timeout,
            max_message_bytes: self.max_message_bytes,
            ping_interval: self.ping_interval,
            ping_timeout: self.ping_timeout,
            restart: self.restart_upstream,
            record: None,
        }
    }
}

/// How the session was resolved.
enum Mode {
    /// Same revision both sides: messages relayed unchanged (the upstream
    /// answers the requests it loses; see [`Supervised`]).
    Passthrough,
    /// A legacy client in front of a modern server.
    LegacyFront(Arc<LegacyFront>, Arc<LegacySession>),
    /// A modern client in front of a legacy server.
    ModernFront(Arc<ModernFront>, Arc<ModernSession>),
}

/// Why the proxy stopped.
#[derive(Debug, PartialEq, Eq)]
pub enum Ending {
    /// The client closed its side; the upstream was shut down.
    ClientClosed,
    /// The upstream exited or broke; pending requests were answered with errors.
    UpstreamGone(String),
    /// Stopped from outside (see [`Stops`]), for the reason given: pending
    /// requests were answered with it and the upstream was shut down.
    Stopped(String),
}

/// Requests to stop a session from outside the protocol, each naming why
/// (the `stdio` command's signal handlers send "the shim received
/// SIGTERM"). On the first, whatever is still pending is answered with
/// that reason and the upstream is stopped as when the client leaves (end
/// of input, killed after a grace period); another, or one that comes
/// while the session is already ending, kills the upstream at once.
pub type Stops = mpsc::UnboundedReceiver<String>;

/// Runs the proxy over `program args…` (started, and restarted if so
/// configured, under [`supervised`]) until the client or the upstream goes
/// away for good.
pub async fn run<R, W>(
    client_in: R,
    client_out: W,
    program: &str,
    args: &[String],
    ledger: Arc<dyn TaskLedger>,
    opts: ProxyOptions,
) -> std::io::Result<Ending>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (client_rx, to_client) = open_client_stream(client_in, client_out, &opts)?;
    // Nothing stops this session but its ends.
    let (_, stops) = mpsc::unbounded_channel();
    drive(
        client_rx, to_client, None, stops, program, args, ledger, opts,
    )
    .await
}

/// Serves one stdio client on `client_in`/`client_out` (newline-delimited
/// JSON-RPC, either revision) in front of an upstream you already
/// connected: a server in your own process ([`crate::upstream::io::connect`]
/// over [`tokio::io::duplex`], [`crate::upstream::channel`]), an HTTP one,
/// or any [`Link`]. The session bridges as `mcp-tasks-shim stdio` does
/// (the first client message picks the mode), and returns when the client
/// closes its side, answering what the upstream still owes it first
/// ([`Ending::ClientClosed`]; the upstream is then shut down) or when the
/// upstream goes away ([`Ending::UpstreamGone`], what was pending answered
/// with an error). No child process is started or restarted: the
/// supervision options of `opts` are ignored.
///
/// A 2026-07-28 server in this process, served to a 2025-11-25 client on
/// the process's stdio:
///
/// ```no_run
/// # async fn run() -> std::io::Result<()> {
/// use std::sync::Arc;
/// use std::time::Duration;
/// use mcp_tasks_shim::ledger::MemoryLedger;
/// use mcp_tasks_shim::driver::stdio::{self, ProxyOptions};
/// use mcp_tasks_shim::upstream;
///
/// let (shim_end, server_end) = tokio::io::duplex(64 * 1024);
/// // … run your stdio server's loop on `server_end` …
/// # drop(server_end);
/// let (from_server, to_server) = tokio::io::split(shim_end);
/// let opts = ProxyOptions::default();
/// let link = upstream::io::connect(
///     from_server,
///     to_server,
///     opts.request_timeout,
///     opts.probe_timeout,
///     opts.max_message_bytes,
/// )
/// .await;
/// let ending = stdio::serve_stdio(
///     tokio::io::stdin(),
///     tokio::io::stdout(),
///     link,
///     Arc::new(MemoryLedger::default()),
///     opts,
/// )
/// .await?;
/// println!("{ending:?}");
/// # Ok(()) }
/// ```
pub async fn serve_stdio<R, W>(
    client_in: R,
    client_out: W,
    link: Link,
    ledger: Arc<dyn TaskLedger>,
    opts: ProxyOptions,
) -> std::io::Result<Ending>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (mut client_rx, to_client) = open_client_stream(client_in, client_out, &opts)?;
    let recorder = to_client.recorder.clone();
    let Link {
        upstream,
        mut events,
        discover,
        ..
    } = link;
    let mut mode: Option<Mode> = None;
    let mut last_fault = String::from("the upstream is gone");
    let ending = loop {
        tokio::select! {
            inbound = client_rx.recv() => {
                let Some(inbound) = inbound else { break Ending::ClientClosed };
                let setup = Setup { upstream: &upstream, discover: &discover, ledger: &ledger, opts: &opts };
                link_client(inbound, &mut mode, &to_client, &recorder, &setup);
            }
            event = events.recv() => {
                let Some(event) = event else { break Ending::UpstreamGone(last_fault) };
                if let UpstreamEvent::Closed(reason) = &event {
                    last_fault.clone_from(reason);
                }
                route_upstream(event, mode.as_mut(), &*upstream, &to_client.outbox).await;
            }
        }
    };
    match &ending {
        Ending::UpstreamGone(_) => {
            if let Some(Mode::ModernFront(front, _)) = &mode {
                front.upstream_ended();
            }
        }
        _ => {
            let reason = "the client closed the session";
            if let Some(Mode::LegacyFront(_, session)) = &mode {
                session.client_closed(reason);
            }
            upstream.shutdown(reason);
            upstream.finish().await;
        }
    }
    // Whatever the engines answered as the session ended is written.
    upstream.events_handled().await;
    drop(mode);
    drop(recorder);
    to_client.finish().await;
    Ok(ending)
}

/// What both stdio loops do first with a client message: refuse a
/// malformed one, record it, and let the first decided message pick the
/// session's mode. `None` when nothing is left to route.
fn admit<'m>(
    inbound: Inbound,
    mode: &'m mut Option<Mode>,
    to_client: &ClientWriter,
    recorder: &Recorder,
    setup: &Setup<'_>,
) -> Option<(Message, &'m mut Mode)> {
    let msg = match inbound {
        Inbound::Message(m) => m,
        Inbound::Invalid { id, error, .. } => {
            tracing::warn!(error = %error, "refusing a malformed client message");
            to_client.send(Message::error(id, error.into()));
            return None;
        }
    };
    record(recorder, "c2s", &msg);
    if mode.is_none() && undecided(&msg, setup.upstream.revision(), to_client) {
        return None;
    }
    let mode = mode.get_or_insert_with(|| choose(&msg, setup, &to_client.outbox));
    Some((msg, mode))
}

/// [`handle_client`] for [`serve_stdio`]: the same modes, over any
/// [`Upstream`]. Pass-through requests go by [`Upstream::request`] (the
/// client's id is kept for the answer), so none waits on another.
fn link_client(
    inbound: Inbound,
    mode: &mut Option<Mode>,
    to_client: &ClientWriter,
    recorder: &Recorder,
    setup: &Setup<'_>,
) {
    let Some((msg, mode)) = admit(inbound, mode, to_client, recorder, setup) else {
        return;
    };
    match mode {
        Mode::Passthrough => relay_to_link(msg, setup.upstream, &to_client.outbox),
        Mode::LegacyFront(_, session) => session.handle_client(msg),
        Mode::ModernFront(_, session) => session.handle_client(msg),
    }
}

/// One pass-through client message to an [`Upstream`].
fn relay_to_link(msg: Message, upstream: &AnyUpstream, outbox: &Outbox) {
    match msg {
        Message::Request(r) => {
            let upstream = upstream.clone();
            let outbox = outbox.clone();
            tokio::spawn(async move {
                let params = r.params.unwrap_or_else(|| json!({}));
                let id = r.id.clone();
                let answer = match upstream.request(&r.method, params).await {
                    Ok(Ok(result)) => Message::response(r.id, result),
                    Ok(Err(error)) => Message::error(Some(r.id), error),
                    Err(e) => Message::error(Some(r.id), e.into()),
                };
                // Progress the upstream sent before answering goes first.
                upstream.events_handled().await;
                let _ = outbox.send(Route::Answer(id), answer);
            });
        }
        Message::Notification(n) => {
            if let Err(e) = upstream.notify(&n.method, n.params.unwrap_or_else(|| json!({}))) {
                tracing::debug!(error = %e, "notification not relayed");
            }
        }
        Message::Response(r) => {
            let _ = upstream.respond(r.id, Ok(r.result));
        }
        Message::Error(e) => match e.id {
            Some(id) => {
                let _ = upstream.respond(id, Err(e.error));
            }
            None => tracing::debug!("client error without an id; dropped"),
        },
    }
}

/// The fast lane of a stdio session on the shim's own stdio: once the
/// first message has chosen the mode, the stdin thread takes each client
/// line to its destination itself, instead of waking the driver for it.
/// Pass-through lines go straight into the child's stdin (a thread per
/// child writes its answers straight to stdout, as a bare relay would);
/// translated sessions get each message fed to their engine on the stdin
/// thread, which translates a request and writes it upstream before it
/// first waits (see `inline::start_here`). Anything that needs the
/// driver (a malformed line, an upstream being restarted) goes the usual
/// way, and lines never overtake one another.
#[derive(Debug)]
struct Lane {
    /// Set once the mode is known.
    target: std::sync::OnceLock<LaneTarget>,
    /// Client messages handed to the driver and not yet relayed by it:
    /// while any are, later ones queue behind them.
    behind_driver: std::sync::atomic::AtomicUsize,
    /// The shim's stdout, shared by everyone with a line for the client.
    out: Arc<SharedStdout>,
}

/// Where the [`Lane`] takes client lines.
#[derive(Debug)]
enum LaneTarget {
    /// Unchanged, into the child's stdin.
    Relay(Arc<Supervised>),
    /// To the engine of a legacy client's session. (Weak: the stdin
    /// thread may outlive the session, blocked on a read, and the session
    /// holds the client's outbox, whose last drop ends the stdout writer.)
    Legacy(std::sync::Weak<LegacySession>),
    /// To the engine of a modern client's session.
    Modern(std::sync::Weak<ModernSession>),
}

impl Lane {
    /// Takes `line` where it goes if it can; `false` hands it to the
    /// driver. Pass-through lines go on their envelope alone (see
    /// [`crate::jsonrpc::peek`]), parsed only as far as routing needs.
    fn relay(&self, line: &[u8], max: usize) -> bool {
        if self.behind_driver.load(Ordering::SeqCst) != 0 || line.len() > max {
            return false;
        }
        let upstream = match self.target.get() {
            None => return false,
            Some(LaneTarget::Relay(upstream)) => upstream,
            Some(LaneTarget::Legacy(session)) => {
                let Some(session) = session.upgrade() else {
                    return false;
                };
                // A request's envelope is read once, and a plain
                // `tools/call` goes up with its params as sent.
                use crate::translate::raw::{ClientRequest, client_request};
                match client_request(line) {
                    Some(ClientRequest::Plain(call)) => session.handle_plain_call(call),
                    Some(ClientRequest::Poll(poll)) => session.handle_poll(poll),
                    Some(ClientRequest::Tree(req)) => session.handle_client(Message::Request(req)),
                    None => return feed(line, max, |m| session.handle_client(m)),
                }
                return true;
            }
            Some(LaneTarget::Modern(session)) => {
                let Some(session) = session.upgrade() else {
                    return false;
                };
                return feed(line, max, |m| session.handle_client(m));
            }
        };
        let Some(head) = crate::jsonrpc::peek(line) else {
            return false;
        };
        upstream.relay_now(&head, &transport::lines::with_newline(line))
    }
}

/// Parses one client line for an engine: a message goes to `engine`, a
/// blank line nowhere, and a malformed one back to the driver (`false`),
/// which answers it.
fn feed(line: &[u8], max: usize, engine: impl FnOnce(Message)) -> bool {
    match transport::lines::classify(line, max) {
        Some(Inbound::Message(m)) => {
            engine(m);
            true
        }
        Some(Inbound::Invalid { .. }) => false,
        None => true,
    }
}

/// [`run`] on the process's own stdin and stdout, each served by a
/// dedicated thread doing blocking reads or writes: tokio's `Stdin` and
/// `Stdout` run every read and write on its blocking pool, a hand-off and
/// a wake-up each, which cost more than everything else the shim does per
/// message. `stops` stops the session from outside (see [`Stops`]).
pub async fn run_stdio(
    program: &str,
    args: &[String],
    ledger: Arc<dyn TaskLedger>,
    opts: ProxyOptions,
    stops: Stops,
) -> std::io::Result<Ending> {
    use std::os::fd::AsFd;
    // Plain files on fds 0 and 1: `std::io::Stdout` would line-buffer and
    // copy, and the writer batches whole lines itself.
    let stdin = std::fs::File::from(std::io::stdin().as_fd().try_clone_to_owned()?);
    let stdout = std::fs::File::from(std::io::stdout().as_fd().try_clone_to_owned()?);
    let lane = Arc::new(Lane {
        target: std::sync::OnceLock::new(),
        behind_driver: std::sync::atomic::AtomicUsize::new(0),
        out: Arc::new(SharedStdout::new(stdout)),
    });
    let (client_tx, client_rx) = mpsc::unbounded_channel();
    let max = opts.max_message_bytes;
    let reader_lane = lane.clone();
    let rt = tokio::runtime::Handle::current();
    // Never joined: a blocking read cannot be cancelled, and the process
    // exits without waiting for the client to close its side.
    std::thread::Builder::new()
        .name("client-stdin".into())
        .spawn(move || {
            // Engines fed here spawn tasks and arm timers.
            let _rt = rt.enter();
            if let Err(e) = read_client(stdin, &client_tx, max, &reader_lane) {
                tracing::warn!(error = %e, "reading stdin failed; treating it as closed");
            }
        })?;
    let to_client = spawn_client_writer(
        opts.record.clone(),
        // (`Sink`: no byte stream; stdout is written through `lane.out`.)
        ClientSide::<tokio::io::Sink>::Stdout(lane.out.clone()),
    )?;
    drive(
        client_rx,
        to_client,
        Some(lane),
        stops,
        program,
        args,
        ledger,
        opts,
    )
    .await
}

/// The stdin thread: each line relayed on the [`Lane`] when it can be,
/// else handed to the driver.
fn read_client(
    stdin: std::fs::File,
    to_driver: &mpsc::UnboundedSender<Inbound>,
    max: usize,
    lane: &Lane,
) -> std::io::Result<()> {
    let mut lines = transport::lines::BlockingLines::new(stdin, max);
    // A client's answer to the shim's question wakes the request waiting
    // for it: it goes on here, writing its next upstream request at once.
    let wakes = crate::inline::InlineWakes::start();
    while let Some(line) = lines.next_raw()? {
        if lane.relay(line, max) {
            wakes.run();
            continue;
        }
        let Some(inbound) = transport::lines::classify(line, max) else {
            continue;
        };
        lane.behind_driver.fetch_add(1, Ordering::SeqCst);
        if to_driver.send(inbound).is_err() {
            break;
        }
    }
    Ok(())
}

// Both callers are in this file; a struct to carry the arguments would
// only rename them.
#[allow(clippy::too_many_arguments)]
async fn drive(
    client_rx: mpsc::UnboundedReceiver<Inbound>,
    to_client: ClientWriter,
    lane: Option<Arc<Lane>>,
    mut stops: Stops,
    program: &str,
    args: &[String],
    ledger: Arc<dyn TaskLedger>,
    opts: ProxyOptions,
) -> std::io::Result<Ending> {
    let mut supervise = opts.supervise();
    if let Some(path) = &opts.record_upstream {
        // Its writer is never awaited: the upstream keeps clones of the
        // recorder as long as it lives. `flushed` in `finish` stands in.
        let (rec, _writer) = transport::record::Recorder::open(path, "--record-upstream")?;
        supervise.record = Some(rec);
    }
    let upstream_recorder = supervise.record.clone();
    let started = supervised::start(program, args, supervise)?;
    let sup = started.upstream().clone();
    let (link, stopped) = probe_unless_stopped(started.probe(), &sup, &mut stops).await;
    let upstream = AnyUpstream::speaking(sup.clone(), link.revision);
    let discover = link.discover;
    tokio::spawn(crate::bridge::summary::log_startup_summary(
        upstream.clone(),
        discover.clone(),
        opts.bridge.clone(),
        "none (stdio: one client)".to_owned(),
    ));
    let mut session = Session {
        mode: None,
        recorder: to_client.recorder.clone(),
        to_client,
        sup,
        lane,
        setup: Setup {
            upstream: &upstream,
            discover: &discover,
            ledger: &ledger,
            opts: &opts,
        },
        client_rx,
        events: link.events,
        stops,
        stopped,
        killed: false,
    };
    let ending = session.serve().await;
    match &ending {
        Ending::UpstreamGone(_) => session.answer_the_rest().await,
        Ending::ClientClosed | Ending::Stopped(_) => session.wind_down(&ending).await,
    }
    session.finish(ending, upstream_recorder).await
}

/// Probes the started upstream; a stop meanwhile stops it at once, instead
/// of after `probe_timeout` (a server that is slow to start, or never
/// answers), and is returned for the session to end with.
async fn probe_unless_stopped(
    probing: impl std::future::Future<Output = supervised::SupervisedLink>,
    sup: &Supervised,
    stops: &mut Stops,
) -> (supervised::SupervisedLink, Option<String>) {
    tokio::pin!(probing);
    let mut stopped = None;
    loop {
        tokio::select! {
            link = &mut probing => return (link, stopped),
            Some(reason) = stops.recv(), if stopped.is_none() => {
                sup.stop(&reason);
                stopped = Some(reason);
            }
        }
    }
}

/// What [`drive`]'s phases share once the upstream is probed: serving,
/// answering what is left after the upstream went, winding down after the
/// client closed or a stop, and the last flush.
struct Session<'a> {
    mode: Option<Mode>,
    to_client: ClientWriter,
    /// The driver's clone of the transcript recorder; dropped before the
    /// last flush, or the transcript writer never sees its channel close.
    recorder: Recorder,
    sup: Arc<Supervised>,
    lane: Option<Arc<Lane>>,
    setup: Setup<'a>,
    client_rx: mpsc::UnboundedReceiver<Inbound>,
    events: mpsc::UnboundedReceiver<UpstreamEvent>,
    stops: Stops,
    /// Why the session was stopped from outside, once it was.
    stopped: Option<String>,
    /// Whether a second stop killed the upstream.
    killed: bool,
}

impl Session<'_> {
    /// Client messages and upstream events until one side ends or a stop.
    async fn serve(&mut self) -> Ending {
        if let Some(reason) = self.stopped.take() {
            return Ending::Stopped(reason);
        }
        let mut last_fault = String::from("the upstream is gone");
        loop {
            tokio::select! {
                Some(reason) = self.stops.recv() => return Ending::Stopped(reason),
                inbound = self.client_rx.recv() => {
                    let Some(inbound) = inbound else { return Ending::ClientClosed };
                    self.client(inbound, true).await;
                }
                event = self.events.recv() => {
                    let Some(event) = event else {
                        return Ending::UpstreamGone(last_fault);
                    };
                    if let UpstreamEvent::Closed(reason) = &event {
                        last_fault.clone_from(reason);
                    }
                    self.upstream(event).await;
                }
            }
        }
    }

    /// One client message through the mode (the first picks it). With
    /// `open_lane`, the first one also hands the stdin thread the lane, so
    /// that it takes client lines where they go by itself from then on
    /// (not with a transcript: that records what passes through here).
    async fn client(&mut self, inbound: Inbound, open: bool) {
        let Session {
            mode,
            to_client,
            recorder,
            sup,
            setup,
            ..
        } = self;
        handle_client(inbound, mode, to_client, recorder, sup, setup).await;
        if let Some(lane) = &self.lane {
            if open && self.recorder.is_none() && lane.target.get().is_none() {
                open_lane(lane, self.mode.as_ref(), &self.sup);
            }
            lane.behind_driver.fetch_sub(1, Ordering::SeqCst);
        }
    }

    async fn upstream(&mut self, event: UpstreamEvent) {
        route_upstream(
            event,
            self.mode.as_mut(),
            &*self.sup,
            &self.to_client.outbox,
        )
        .await;
    }

    /// The upstream is gone for good. Open listen streams are answered
    /// (the error naming why), not cut off by the end of output alone; the
    /// engines get a moment to flush their error answers; and what the
    /// client sent meanwhile, or before the upstream's end was taken (the
    /// select picks either when both are ready, as when the server dies
    /// during the probe), is answered too: an error naming why, not
    /// silence.
    async fn answer_the_rest(&mut self) {
        if let Some(Mode::ModernFront(front, _)) = &self.mode {
            front.upstream_ended();
        }
        let flush = tokio::time::sleep(Duration::from_millis(50));
        tokio::pin!(flush);
        loop {
            tokio::select! {
                biased;
                inbound = self.client_rx.recv() => {
                    let Some(inbound) = inbound else { break };
                    self.client(inbound, false).await;
                }
                () = &mut flush => break,
            }
        }
    }

    /// The client closed, or a stop came: the upstream's input is closed
    /// (or the session stopped), and the child still answers what the
    /// client sent last (a client may close its side right after writing):
    /// its output is relayed until it has exited, as the reader thread
    /// does with what it writes to stdout itself.
    async fn wind_down(&mut self, ending: &Ending) {
        if let Ending::Stopped(reason) = ending {
            stop_session(reason, &self.sup, self.mode.as_ref()).await;
            self.stopped = Some(reason.clone());
        } else {
            let reason = "the client closed the session";
            self.sup.close_input(reason);
            // After closing its input, so that work resumed by a failed
            // question finds the upstream gone too, and ends instead of
            // asking anew.
            if let Some(Mode::LegacyFront(_, session)) = &self.mode {
                session.client_closed(reason);
            }
        }
        let sup = self.sup.clone();
        let finish = sup.finish();
        tokio::pin!(finish);
        loop {
            tokio::select! {
                () = &mut finish => break,
                Some(event) = self.events.recv() => self.upstream(event).await,
                // A client still writing after a stop is answered, the
                // error naming why, rather than left waiting.
                Some(inbound) = self.client_rx.recv(), if self.stopped.is_some() => {
                    self.client(inbound, false).await;
                }
                Some(reason) = self.stops.recv() => {
                    // Whoever sends another stop will not wait out the
                    // grace period.
                    if self.stopped.is_none() {
                        stop_session(&reason, &self.sup, self.mode.as_ref()).await;
                        self.stopped = Some(reason);
                    }
                    tracing::debug!("killing the upstream now");
                    self.sup.kill();
                    self.killed = true;
                }
            }
        }
        while let Ok(event) = self.events.try_recv() {
            self.upstream(event).await;
        }
    }

    /// The last answers to the client, and the upstream transcript
    /// flushed. A client that stopped reading must not keep a stopped shim
    /// alive: what it has not taken within the grace period is lost.
    async fn finish(
        self,
        ending: Ending,
        upstream_recorder: Option<transport::record::Recorder>,
    ) -> std::io::Result<Ending> {
        let Session {
            mode,
            to_client,
            recorder,
            stopped,
            killed,
            mut stops,
            ..
        } = self;
        drop(mode);
        drop(recorder);
        if let Some(rec) = upstream_recorder {
            let _ = tokio::time::timeout(STOP_FLUSH, rec.flushed()).await;
        }
        let Some(reason) = stopped else {
            to_client.finish().await;
            return Ok(ending);
        };
        let grace = if killed { KILLED_FLUSH } else { STOP_FLUSH };
        tokio::select! {
            () = to_client.finish() => {}
            () = tokio::time::sleep(grace) => {
                tracing::warn!("the client did not read the last answers; exiting without them");
            }
            Some(_) = stops.recv() => {}
        }
        Ok(Ending::Stopped(reason))
    }
}

/// How long a stopped session may take to write its last answers.
const STOP_FLUSH: Duration = Duration::from_secs(2);
/// The same after the upstream was killed (a second stop): short, since
/// whoever sent it wants the shim gone.
const KILLED_FLUSH: Duration = Duration::from_millis(200);

/// Stops a session from outside (see [`Stops`]): everything still
/// waiting fails with `reason` now, and the upstream's input is closed.
async fn stop_session(reason: &str, sup: &Supervised, mode: Option<&Mode>) {
    tracing::info!(%reason, "stopping the session: answering pending requests, stopping the upstream");
    sup.stop(reason);
    match mode {
        // As an ended HTTP session: waits on the client (questions) and on
        // tasks (`tasks/result`, a driven `tools/call`) end now.
        Some(Mode::LegacyFront(_, session)) => session.end(reason),
        // As when the upstream is gone for good, which it soon is: the
        // tasks it keeps go with it, and listen streams are answered.
        Some(Mode::ModernFront(front, _)) => {
            // Listen streams close gracefully first (the schema's result
            // for a server tearing them down), not in error.
            front.close_listens();
            front
                .handle_upstream(UpstreamEvent::Closed(reason.to_owned()))
                .await;
            front.upstream_ended();
        }
        Some(Mode::Passthrough) | None => {}
    }
}

/// Points the lane at the session's destination once the mode is known.
fn open_lane(lane: &Lane, mode: Option<&Mode>, sup: &Arc<Supervised>) {
    let target = match mode {
        None => return,
        Some(Mode::Passthrough) => LaneTarget::Relay(sup.clone()),
        Some(Mode::LegacyFront(_, session)) => LaneTarget::Legacy(Arc::downgrade(session)),
        Some(Mode::ModernFront(_, session)) => LaneTarget::Modern(Arc::downgrade(session)),
    };
    let relay = matches!(target, LaneTarget::Relay(_));
    if lane.target.set(target).is_ok() {
        if relay {
            sup.relay_output_to(lane.out.clone());
        } else {
            // Answers then reach the request futures on the thread reading
            // them, which finishes those futures itself.
            sup.read_on_thread();
        }
        tracing::debug!(relay, "client lines go on the fast lane");
    }
}

/// What [`choose`] needs beside the first message.
struct Setup<'a> {
    /// The upstream, typed by the revision its probe found.
    upstream: &'a AnyUpstream,
    discover: &'a serde_json::Value,
    ledger: &'a Arc<dyn TaskLedger>,
    opts: &'a ProxyOptions,
}

/// One message (or malformed line) from the client; the first one picks
/// the mode.
async fn handle_client(
    inbound: Inbound,
    mode: &mut Option<Mode>,
    to_client: &ClientWriter,
    recorder: &Recorder,
    sup: &Arc<Supervised>,
    setup: &Setup<'_>,
) {
    let Some((msg, mode)) = admit(inbound, mode, to_client, recorder, setup) else {
        return;
    };
    match mode {
        Mode::Passthrough => {
            let id = match &msg {
                Message::Request(r) => Some(r.id.clone()),
                _ => None,
            };
            if let Err(e) = sup.send_raw(msg).await {
                // Down or restarting: answer now rather than never.
                if let Some(id) = id {
                    to_client.send(Message::error(Some(id), e.into()));
                }
            }
        }
        Mode::LegacyFront(_, session) => session.handle_client(msg),
        Mode::ModernFront(_, session) => session.handle_client(msg),
    }
}

/// Before the mode is chosen, in front of a 2026-07-28 server: a message
/// that signals neither revision (no `initialize`, no modern `_meta`) is
/// answered here and leaves the choice open, instead of making the session
/// a 2026-07-28 one for good (a legacy client that skipped the handshake
/// would then have its `initialize` refused). In front of a
/// 2025-11-25 server such a message is simply passed through, as before.
/// True when the message was dealt with.
fn undecided(msg: &Message, upstream: Revision, to_client: &ClientWriter) -> bool {
    if upstream != Revision::Modern || revision::detect_client(msg) != ClientSignal::Ambiguous {
        return false;
    }
    match msg {
        Message::Request(r) => {
            tracing::warn!(method = %r.method, "first request carries no revision; refused, revision still open");
            let error = ShimError::InvalidRequest(format!(
                "{} before the shim knows this client's revision: a 2025-11-25 client starts \
                 with initialize, a 2026-07-28 client puts \
                 io.modelcontextprotocol/protocolVersion in params._meta",
                r.method
            ));
            to_client.send(Message::error(Some(r.id.clone()), error.into()));
        }
        other => {
            tracing::warn!(method = ?other.method(), "notification before the client's revision is known; dropped");
        }
    }
    true
}

fn choose(first: &Message, setup: &Setup<'_>, outbox: &Outbox) -> Mode {
    let Setup {
        upstream,
        discover,
        ledger,
        opts,
    } = *setup;
    let client = match revision::detect_client(first) {
        ClientSignal::Is(r) => r,
        // An unknown modern version still speaks the modern transport.
        ClientSignal::UnknownVersion(_) => Revision::Modern,
        ClientSignal::Ambiguous => upstream.revision(),
    };
    tracing::info!(%client, upstream = %upstream.revision(), "session revisions");
    match (client, upstream) {
        (Revision::Legacy, AnyUpstream::Modern(up)) => {
            let front = LegacyFront::new(
                up.clone(),
                ledger.clone(),
                opts.bridge.clone(),
                discover.clone(),
            );
            crate::bridge::spawn_sweeper(
                Arc::downgrade(&front),
                |f: Arc<LegacyFront>| async move { f.sweep().await },
            );
            let session = front.session(Scope::stdio(), outbox.clone());
            Mode::LegacyFront(front, session)
        }
        (Revision::Modern, AnyUpstream::Legacy(up)) => {
            let front = ModernFront::new(up.clone(), ledger.clone(), opts.bridge.clone());
            crate::bridge::spawn_sweeper(
                Arc::downgrade(&front),
                |f: Arc<ModernFront>| async move { f.sweep().await },
            );
            let session = front.session(Scope::stdio(), outbox.clone());
            Mode::ModernFront(front, session)
        }
        _ => Mode::Passthrough,
    }
}

async fn route_upstream(
    event: UpstreamEvent,
    mode: Option<&mut Mode>,
    sup: &dyn Upstream,
    outbox: &Outbox,
) {
    match mode {
        Some(Mode::Passthrough) => match event {
            UpstreamEvent::Relayed(msg) => {
                let _ = outbox.send(Route::Session, msg);
            }
            UpstreamEvent::Notification(n) => {
                let _ = outbox.send(Route::Session, Message::Notification(n));
            }
            UpstreamEvent::Request(r) => {
                let _ = outbox.send(Route::Session, Message::Request(r));
            }
            UpstreamEvent::Closed(reason) => {
                // Its lost requests were answered just before.
                tracing::debug!(%reason, "upstream closed");
            }
            UpstreamEvent::Barrier(reached) => {
                let _ = reached.send(());
            }
        },
        Some(Mode::LegacyFront(front, _)) => front.handle_upstream(event).await,
        Some(Mode::ModernFront(front, _)) => front.handle_upstream(event).await,
        None => match event {
            UpstreamEvent::Request(r) => {
                // Nobody to ask yet: refuse rather than leave it hanging.
                let err =
                    ShimError::MethodNotFound(format!("{} before the client connected", r.method));
                let _ = sup.respond(r.id, Err(err.into()));
            }
            other => tracing::debug!(?other, "upstream traffic before the client spoke; dropped"),
        },
    }
}

type Recorder = Option<StdioRecorder>;

/// The transcript of a stdio proxy: one client, one session label.
#[derive(Clone)]
struct StdioRecorder {
    rec: transport::record::Recorder,
    label: Arc<str>,
}

/// The client-side writer, plus an optional transcript recorder.
struct ClientWriter {
    outbox: Outbox,
    recorder: Recorder,
    writer: tokio::task::JoinHandle<std::io::Result<()>>,
    recorder_task: Option<tokio::task::JoinHandle<()>>,
}

impl ClientWriter {
    fn send(&self, msg: Message) {
        let _ = self.outbox.send(Route::Session, msg);
    }

    async fn finish(self) {
        drop(self.outbox);
        let _ = self.writer.await;
        drop(self.recorder);
        if let Some(t) = self.recorder_task {
            let _ = t.await;
        }
    }
}

/// Where the client's messages are written.
enum ClientSide<W> {
    /// Any byte stream, by a writer task.
    Stream(W),
    /// The shim's own stdout, written by whoever has a line (see
    /// [`SharedStdout`]); its writer thread takes what the pipe did not.
    Stdout(Arc<SharedStdout>),
}

/// A client on a byte-stream pair (not the shim's own stdio): its lines
/// read on a task of their own, and its writer (with the transcript,
/// when `--record` asks for one).
fn open_client_stream<R, W>(
    client_in: R,
    client_out: W,
    opts: &ProxyOptions,
) -> std::io::Result<(mpsc::UnboundedReceiver<Inbound>, ClientWriter)>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (client_tx, client_rx) = mpsc::unbounded_channel();
    tokio::spawn(transport::read_lines(
        client_in,
        client_tx,
        opts.max_message_bytes,
    ));
    let to_client = spawn_client_writer(opts.record.clone(), ClientSide::Stream(client_out))?;
    Ok((client_rx, to_client))
}

fn spawn_client_writer<W>(
    record_path: Option<std::path::PathBuf>,
    side: ClientSide<W>,
) -> std::io::Result<ClientWriter>
where
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (recorder, recorder_task) = match record_path {
        Some(path) => {
            let (rec, task) = transport::record::Recorder::open(&path, "--record")?;
            let label = Arc::from(STDIO_SESSION_LABEL);
            (Some(StdioRecorder { rec, label }), Some(task))
        }
        None => (None, None),
    };
    let (outbox, writer) = match (side, recorder.clone()) {
        (ClientSide::Stdout(out), None) => {
            let writer = start_stdout_writer(out.clone());
            (lines(out), writer)
        }
        (side, recorder) => {
            let (tx, mut rx) = mpsc::unbounded_channel::<Message>();
            // With a transcript, every message is recorded on its way out.
            let rx = match recorder {
                None => rx,
                Some(rec) => {
                    let (wtx, wrx) = mpsc::unbounded_channel();
                    tokio::spawn(async move {
                        while let Some(msg) = rx.recv().await {
                            rec.rec.record(&rec.label, "s2c", &msg);
                            if wtx.send(msg).is_err() {
                                break;
                            }
                        }
                    });
                    wrx
                }
            };
            let writer = match side {
                ClientSide::Stream(w) => tokio::spawn(transport::write_lines(w, rx)),
                ClientSide::Stdout(out) => {
                    let writer = start_stdout_writer(out.clone());
                    tokio::spawn(async move {
                        let sink = lines(out);
                        let mut rx = rx;
                        while let Some(msg) = rx.recv().await {
                            if sink.send(Route::Session, msg).is_err() {
                                break;
                            }
                        }
                        // Dropping the last outbox closes the stdout.
                        drop(sink);
                        writer
                            .await
                            .unwrap_or_else(|e| Err(std::io::Error::other(e)))
                    })
                }
            };
            (Outbox::from(tx), writer)
        }
    };
    Ok(ClientWriter {
        outbox,
        recorder,
        writer,
        recorder_task,
    })
}

/// An outbox writing each message into `sink` as a line, on the thread
/// that sends it; `sink` is closed when the last clone goes.
fn lines(sink: Arc<dyn LineSink>) -> Outbox {
    Outbox::new(Arc::new(Lines(sink)))
}

/// One pipe to the client: routes are not read, messages go in the order
/// sent.
#[derive(Debug)]
struct Lines(Arc<dyn LineSink>);

impl Deliver for Lines {
    fn deliver(&self, _: Route, msg: Message) -> Result<(), PeerGone> {
        self.0.write_line(&msg.to_line()).map_err(|_| PeerGone)
    }

    fn deliver_reply(&self, _: Route, id: Id, reply: Reply) -> Result<(), PeerGone> {
        let mut line = Vec::with_capacity(256);
        reply.write_answer(&mut line, &id);
        line.push(b'\n');
        self.0.write_line(&line).map_err(|_| PeerGone)
    }

    fn close(&self) {
        self.0.close();
    }
}

/// The thread that writes what stdout did not take at once; it ends when
/// the last outbox on `out` is dropped and the queue is written.
fn start_stdout_writer(out: Arc<SharedStdout>) -> tokio::task::JoinHandle<std::io::Result<()>> {
    tokio::task::spawn_blocking(move || out.run_writer())
}

fn record(recorder: &Recorder, dir: &'static str, msg: &Message) {
    if let Some(r) = recorder {
        r.rec.record(&r.label, dir, msg);
    }
}

/// The `session` label of a stdio recording: one client per proxy.
const STDIO_SESSION_LABEL: &str = "stdio";
