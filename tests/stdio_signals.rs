//! SIGTERM and SIGINT to `mcp-tasks-shim stdio`: the real binary over
//! real pipes, in front of a real child process.
//!
//! - A request still pending is answered with `-32603` naming the signal
//!   (translating and pass-through sessions alike).
//! - The shim exits 128 + the signal's number (143, 130), within seconds.
//! - The child is gone once the shim has exited: asked to stop by the end
//!   of its input, and killed after the grace period when it ignores that
//!   (and SIGTERM); a second signal cuts the grace period short.
//!
//! Every wait is bounded; a child a failing test leaves behind is killed.

mod support;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::schema::Revision;
use support::wire::{Wire, modern_reference, shim_bin, temp_path};

/// How long the shim may take to exit after a signal: the child's 3 s
/// grace period, and some slack for a loaded machine.
const EXIT: Duration = Duration::from_secs(20);

/// Sends `signal` to process `pid`.
fn send_signal(pid: u32, signal: libc::c_int) {
    let pid = libc::pid_t::try_from(pid).expect("a pid");
    // SAFETY: kill(2) takes plain integers and touches no memory of ours.
    let rc = unsafe { libc::kill(pid, signal) };
    assert_eq!(rc, 0, "kill({pid}, {signal}) failed");
}

/// The upstream's pid, written by the `sh` wrapping it; killed when the
/// test ends, so that a shim that leaks it does not leak it past the test.
struct Upstream {
    pidfile: PathBuf,
    pid: Option<u32>,
}

impl Upstream {
    fn new() -> Upstream {
        Upstream {
            pidfile: temp_path("upstream.pid"),
            pid: None,
        }
    }

    /// `sh -c 'echo $$ > pidfile; <script>'`.
    fn command(&self, script: &str) -> Vec<String> {
        vec![
            "sh".into(),
            "-c".into(),
            format!("echo $$ > '{}'; {script}", self.pidfile.display()),
        ]
    }

    /// `upstream…` under [`Upstream::command`], same pid (`exec`).
    fn exec(&self, upstream: &[String]) -> Vec<String> {
        let inner = upstream
            .iter()
            .map(|a| format!("'{a}'"))
            .collect::<Vec<_>>()
            .join(" ");
        self.command(&format!("exec {inner}"))
    }

    /// The pid, once the wrapper has written it.
    fn pid(&mut self) -> u32 {
        let pid = support::poll::until("the upstream's pid", Duration::from_secs(10), || {
            let read = std::fs::read_to_string(&self.pidfile).unwrap_or_default();
            read.trim().parse().ok()
        });
        self.pid = Some(pid);
        pid
    }

    /// Whether it has exited, waiting a little for it (its parent, the
    /// shim, has reaped it; once the shim is gone, init does).
    fn gone_within(&self, within: Duration) -> bool {
        support::http::gone_within(self.pid.expect("pid read"), within)
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        if let Some(pid) = self.pid.filter(|&p| support::http::alive(p)) {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
        let _ = std::fs::remove_file(&self.pidfile);
    }
}

/// Signals the shim and returns its exit status and how long it took,
/// panicking if it is still running after [`EXIT`].
fn signal_and_wait(shim: &mut Wire, signal: libc::c_int) -> (std::process::ExitStatus, Duration) {
    let started = Instant::now();
    send_signal(shim.pid(), signal);
    let status = shim
        .wait_exit(EXIT)
        .unwrap_or_else(|| panic!("the shim was still running {EXIT:?} after signal {signal}"));
    (status, started.elapsed())
}

/// The error answering `id`, which names `signal`.
/// The 3 s a stopped child gets before it is killed (docs/guide.md), and
/// a margin for a loaded machine: still half the 30 s the pending calls
/// take, so a shim that waited for them fails.
const GRACE_AND_MARGIN: Duration = Duration::from_secs(15);
/// The grace period itself: a shim that let the child have it took at
/// least this long.
const GRACE: Duration = Duration::from_secs(3);
/// How long a killed upstream may take to be gone (reaped) once the shim
/// exited: a failure guard only.
const REAPED: Duration = Duration::from_secs(10);

#[track_caller]
fn answered_naming(shim: &mut Wire, id: &Value, signal: &str) {
    let r = shim.response(id);
    let e = r
        .get("error")
        .unwrap_or_else(|| panic!("expected an error: {r}"));
    assert_eq!(e["code"], -32603, "{r}");
    let message = e["message"].as_str().unwrap_or_default();
    assert!(message.contains(signal), "{r}");
}

/// Gives the shim time to relay `id` upstream before the signal comes:
/// the answer to a later request proves the earlier one went.
fn settle(shim: &mut Wire) {
    shim.ok("ping", json!({}));
}

/// A 2025-11-25 client's session over `upstream` with a call still
/// running there, stopped by `signal`: the call is answered naming it,
/// the shim exits 128 + the signal, and the upstream is gone.
fn stop_a_legacy_clients_session(upstream_cmd: &[String], signal: libc::c_int, name: &str) {
    let mut upstream = Upstream::new();
    let mut shim = Wire::spawn(&[], &upstream.exec(upstream_cmd));
    shim.initialize();
    let pid = upstream.pid();
    let call = shim.request(
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 30, "label": "cut short"}}),
    );
    settle(&mut shim);
    assert!(support::http::alive(pid));

    let (status, took) = signal_and_wait(&mut shim, signal);
    assert_eq!(status.code(), Some(128 + signal), "exit status {status}");
    // Within the child's grace: a reference server answers what it was
    // asked before its input ended for up to 3 s (this call takes 30 s),
    // and the shim kills it after the same 3 s.
    assert!(took < GRACE_AND_MARGIN, "{name} took {took:?}");
    answered_naming(&mut shim, &call, name);
    assert!(
        upstream.gone_within(REAPED),
        "upstream {pid} outlived the shim"
    );
}

/// A translating session (a 2025-11-25 client in front of a 2026-07-28
/// server) with a call still running upstream.
#[test]
fn sigterm_answers_a_pending_call_and_stops_the_upstream() {
    stop_a_legacy_clients_session(&modern_reference(), libc::SIGTERM, "SIGTERM");
}

/// A pass-through session (2025-11-25 on both sides): the pending
/// request was relayed unchanged, and is answered all the same.
#[test]
fn sigint_answers_a_relayed_call_and_stops_the_upstream() {
    let legacy = [shim_bin(), "reference-server", "--revision", "2025-11-25"].map(str::to_owned);
    stop_a_legacy_clients_session(&legacy, libc::SIGINT, "SIGINT");
}

/// A translating session the other way round (a 2026-07-28 client in
/// front of a 2025-11-25 server).
#[test]
fn sigterm_answers_a_modern_clients_pending_call() {
    let mut upstream = Upstream::new();
    let legacy = [shim_bin(), "reference-server", "--revision", "2025-11-25"].map(str::to_owned);
    let mut cmd = std::process::Command::new(shim_bin());
    cmd.arg("stdio").arg("--").args(upstream.exec(&legacy));
    cmd.env("RUST_LOG", "warn");
    let mut shim = Wire::from_command(cmd, Revision::Modern);
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "stdio-signals", "version": "1"}});
    shim.ok("server/discover", json!({"_meta": meta}));
    let pid = upstream.pid();
    let call = shim.request(
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 30}, "_meta": meta}),
    );
    shim.ok("tools/list", json!({"_meta": meta}));

    let (status, took) = signal_and_wait(&mut shim, libc::SIGTERM);
    assert_eq!(status.code(), Some(143), "exit status {status}");
    assert!(took < GRACE_AND_MARGIN, "SIGTERM took {took:?}");
    answered_naming(&mut shim, &call, "SIGTERM");
    assert!(
        upstream.gone_within(REAPED),
        "upstream {pid} outlived the shim"
    );
}

/// Answers the shim's `server/discover` probe as a 2026-07-28 server,
/// copies what comes next to `asked` up to the first `tools/list`, then
/// reads nothing more and ignores SIGTERM: it never exits by itself.
/// (The shim's upstream ids are strings, `mcp-tasks-shim-1-1`.)
fn stubborn_script(asked: &std::path::Path) -> String {
    let script = r#"trap '' TERM
read -r line
id=$(printf '%s' "$line" | sed -n 's/^{"jsonrpc":"2.0","id":\("[^"]*"\|[0-9]*\),.*/\1/p')
printf '{"jsonrpc":"2.0","id":%s,"result":{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{},"extensions":{"io.modelcontextprotocol/tasks":{}}},"resultType":"complete","ttlMs":0,"cacheScope":"public"}}\n' "$id"
while read -r line; do
  printf '%s\n' "$line" >> 'ASKED'
  case $line in *'"tools/list"'*) break;; esac
done
while :; do sleep 1; done"#;
    script.replace("ASKED", &asked.display().to_string())
}

/// A shim in front of [`stubborn_script`], initialized, with a
/// `tools/list` the child will never answer (and has read); returns the
/// request's id.
fn stubborn_session(upstream: &mut Upstream) -> (Wire, Value) {
    let asked = temp_path("stubborn-asked.jsonl");
    let mut shim = Wire::spawn(&[], &upstream.command(&stubborn_script(&asked)));
    shim.initialize();
    upstream.pid();
    let list = shim.request("tools/list", json!({}));
    // The child never answers; what it read says the request went.
    support::poll::until("the tools/list at the child", EXIT, || {
        let read = std::fs::read_to_string(&asked).unwrap_or_default();
        read.contains("\"tools/list\"").then_some(())
    });
    let _ = std::fs::remove_file(&asked);
    (shim, list)
}

#[test]
fn a_child_ignoring_sigterm_and_its_input_closing_is_killed_after_the_grace_period() {
    let mut upstream = Upstream::new();
    let (mut shim, list) = stubborn_session(&mut upstream);

    let (status, took) = signal_and_wait(&mut shim, libc::SIGTERM);
    assert_eq!(status.code(), Some(143), "exit status {status}");
    // The child had its 3 s to exit before it was killed.
    assert!(took >= Duration::from_millis(2500), "SIGTERM took {took:?}");
    answered_naming(&mut shim, &list, "SIGTERM");
    assert!(
        upstream.gone_within(REAPED),
        "the stubborn upstream outlived the shim"
    );
}

#[test]
fn a_second_signal_kills_the_child_at_once() {
    let mut upstream = Upstream::new();
    let (mut shim, list) = stubborn_session(&mut upstream);

    let started = Instant::now();
    send_signal(shim.pid(), libc::SIGTERM);
    // The pending request is answered once the first signal was handled:
    // only then comes the second (two pending signals have no order).
    answered_naming(&mut shim, &list, "SIGTERM");
    send_signal(shim.pid(), libc::SIGINT);
    let status = shim
        .wait_exit(EXIT)
        .expect("the shim exits after a second signal");
    let took = started.elapsed();
    // The first signal decides the status.
    assert_eq!(status.code(), Some(143), "exit status {status}");
    // The grace period began after the first signal was sent: had the
    // child been given it, the shim would have taken at least that long.
    assert!(
        took < GRACE,
        "the second signal did not cut the grace period short: {took:?}"
    );
    assert!(
        upstream.gone_within(REAPED),
        "the stubborn upstream outlived the shim"
    );
}
