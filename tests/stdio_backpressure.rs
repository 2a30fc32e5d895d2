//! A stdio client that stops reading the shim's stdout for a while.
//!
//! The shim writes answers to its stdout from the threads that produce
//! them, without blocking (`src/transport/stdout.rs`); once the pipe is
//! full, lines queue for a writer thread. Here a client pipes thousands of
//! calls whose answers are far more than a pipe holds, reads nothing until
//! all are written, then reads: every answer must arrive, once, whole and
//! valid for the client's revision, for a translating session and a
//! pass-through one.

mod support;

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::http as h;
use support::schema::{Revision, assert_valid};
use support::wire::{modern_reference, shim_bin};

/// Calls piped before the client reads anything.
const CALLS: usize = 2000;
/// Each answer greets a name this long: 2000 answers are ~4 MB, about 60
/// times what a pipe holds.
const NAME_BYTES: usize = 2000;

/// The shim, killed if the test fails before it exits.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Whether process `pid`'s stdout is a pipe with no room left: its next
/// write would block (or, written without waiting, queue). Asked through
/// a write end of the same pipe opened from `/proc`, polled for
/// `POLLOUT` without waiting, and closed at once.
fn pipe_full(pid: u32) -> bool {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let end = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(format!("/proc/{pid}/fd/1"))
        .expect("the shim's stdout, opened for writing");
    let mut probe = libc::pollfd {
        fd: end.as_raw_fd(),
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: one valid pollfd, a zero timeout; no memory of ours is kept.
    let ready = unsafe { libc::poll(&mut probe, 1, 0) };
    assert!(ready >= 0, "poll: {}", std::io::Error::last_os_error());
    ready == 0
}

fn stalled_reader_gets_every_answer(client: Revision) {
    let mut cmd = Command::new(shim_bin());
    cmd.arg("stdio").arg("--").args(modern_reference());
    let mut shim = KillOnDrop(
        cmd.env("RUST_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn the shim"),
    );
    let mut stdin = shim.0.stdin.take().expect("piped stdin");
    let (tx, lines) = mpsc::channel::<String>();
    let (go_tx, go) = mpsc::channel::<()>();
    let stdout = shim.0.stdout.take().expect("piped stdout");
    // Reads the first answer (the handshake), then nothing until told.
    std::thread::spawn(move || {
        let mut stdout = BufReader::new(stdout);
        let mut read_one = |tx: &mpsc::Sender<String>| {
            let mut line = String::new();
            match stdout.read_line(&mut line) {
                Ok(n) if n > 0 => tx.send(line).is_ok(),
                _ => false,
            }
        };
        if !read_one(&tx) || go.recv().is_err() {
            return;
        }
        while read_one(&tx) {}
    });
    // Legacy calls carry no `_meta`; modern ones must.
    let meta = |mut params: Value| {
        if client == Revision::Modern {
            params["_meta"] = h::modern_meta(false);
        }
        params
    };
    let first = match client {
        Revision::Legacy => json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "stalled", "version": "1"}}}),
        Revision::Modern => {
            json!({"jsonrpc": "2.0", "id": 0, "method": "server/discover", "params": meta(json!({}))})
        }
    };
    writeln!(stdin, "{first}").expect("write the handshake");
    let hello = lines
        .recv_timeout(Duration::from_secs(20))
        .expect("a handshake answer");
    let hello: Value = serde_json::from_str(&hello).expect("a JSON handshake answer");
    assert!(hello.get("result").is_some(), "{hello}");
    assert_valid(client, &hello, first["method"].as_str());
    if client == Revision::Legacy {
        writeln!(
            stdin,
            "{}",
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
        )
        .expect("write initialized");
    }
    let name = |i: usize| format!("{i:05}-{}", "n".repeat(NAME_BYTES));
    let calls: Vec<String> = (1..=CALLS)
        .map(|i| {
            json!({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                "params": meta(json!({"name": "greet", "arguments": {"name": name(i)}}))})
            .to_string()
        })
        .collect();
    // The shim must keep reading while its stdout is stuck: if it did not,
    // these writes would block, so they run on a thread and are waited for
    // with a bound.
    let (written_tx, written) = mpsc::channel();
    let writer = std::thread::spawn(move || {
        for call in calls {
            if writeln!(stdin, "{call}").is_err() {
                return None;
            }
        }
        let _ = stdin.flush();
        let _ = written_tx.send(());
        Some(stdin)
    });
    written
        .recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("{client:?}: the shim stopped reading its stdin"));
    let stdin = writer.join().expect("writer").expect("all calls written");
    // The answers pile up behind the full pipe: wait until it is full.
    support::poll::until(
        "the shim's stdout pipe full",
        Duration::from_secs(60),
        || pipe_full(shim.0.id()).then_some(()),
    );
    go_tx.send(()).expect("reader alive");
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = HashSet::new();
    while seen.len() < CALLS {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = lines.recv_timeout(left).unwrap_or_else(|_| {
            panic!(
                "{client:?}: {} of {CALLS} answers arrived; the rest were lost",
                seen.len()
            )
        });
        let msg: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
            panic!("{client:?}: a line that is not whole JSON ({e}): {line:.200}")
        });
        assert_valid(client, &msg, Some("tools/call"));
        let id = msg["id"].as_u64().expect("an answer with a numeric id") as usize;
        assert!(seen.insert(id), "{client:?}: answer {id} arrived twice");
        let text = msg["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default();
        assert!(
            text.contains(&name(id)),
            "{client:?}: answer {id} greets someone else"
        );
    }
    assert_eq!(seen, (1..=CALLS).collect::<HashSet<_>>());
    drop(stdin);
    let what = format!("{client:?}: the shim (it outlived its client)");
    support::wire::exited_within(&mut shim.0, Duration::from_secs(10), &what);
}

#[test]
fn a_translating_session_loses_nothing_while_its_client_stops_reading() {
    stalled_reader_gets_every_answer(Revision::Legacy);
}

#[test]
fn a_pass_through_session_loses_nothing_while_its_client_stops_reading() {
    stalled_reader_gets_every_answer(Revision::Modern);
}
