//! An upstream server as a child process speaking over its stdio.

use std::process::Stdio;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// A spawned upstream with its pipes taken out.
#[derive(Debug)]
pub struct ChildUpstream {
    /// The process handle (to wait for or kill).
    pub child: Child,
    /// Its stdin (we write requests here).
    pub stdin: ChildStdin,
    /// Its stdout (we read responses here).
    pub stdout: ChildStdout,
}

/// Spawns `program args…`; its stderr is forwarded line by line to ours,
/// prefixed so a user can tell whose output it is.
pub fn spawn(program: &str, args: &[String]) -> std::io::Result<ChildUpstream> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| {
            std::io::Error::new(e.kind(), format!("cannot start upstream {program:?}: {e}"))
        })?;
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(std::io::Error::other("upstream pipes were not created"));
    };
    tokio::spawn(async move {
        let mut lines = BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            crate::console::say("upstream", &format!("[upstream] {line}"), &line);
        }
    });
    Ok(ChildUpstream {
        child,
        stdin,
        stdout,
    })
}

/// A child's stdin shared by two kinds of writer: a thread relaying a
/// client's lines as they arrive (pass-through over stdio, one wake-up per
/// message as a plain relay has) and the async side's own messages.
///
/// Every line is written whole and in the order the writers got the lock:
/// straight into the pipe while it takes them, and, once it is full, into a
/// queue that an async task drains as the child reads; until the queue is
/// empty every later line joins it. Nobody ever blocks on a child that
/// stopped reading.
#[derive(Debug)]
pub struct ChildInput {
    state: std::sync::Mutex<InputState>,
    wake: tokio::sync::Notify,
    /// `--record-upstream`: every line, as `c2s`.
    record: Option<super::record::Labelled>,
}

#[derive(Debug)]
struct InputState {
    /// A second handle on the (non-blocking) pipe; `None` once closed.
    pipe: Option<std::fs::File>,
    /// Lines (or the rest of one) waiting for room in the pipe.
    queue: std::collections::VecDeque<Vec<u8>>,
    /// The draining task is writing a line taken from the queue.
    draining: bool,
}

impl ChildInput {
    /// Takes over `stdin`. Messages sent to `rx` are written as lines;
    /// when `rx` closes, what is queued is written and the pipe is closed,
    /// so the child sees the end of its input.
    pub fn start(
        stdin: ChildStdin,
        rx: tokio::sync::mpsc::UnboundedReceiver<crate::jsonrpc::Message>,
    ) -> std::io::Result<std::sync::Arc<ChildInput>> {
        Self::start_recorded(stdin, rx, None)
    }

    /// [`ChildInput::start`], recording every line written (whichever
    /// writer it came from) to `record`, in the order they go in.
    pub fn start_recorded(
        stdin: ChildStdin,
        rx: tokio::sync::mpsc::UnboundedReceiver<crate::jsonrpc::Message>,
        record: Option<super::record::Labelled>,
    ) -> std::io::Result<std::sync::Arc<ChildInput>> {
        use std::os::fd::AsFd;
        let pipe = std::fs::File::from(stdin.as_fd().try_clone_to_owned()?);
        let input = std::sync::Arc::new(ChildInput {
            state: std::sync::Mutex::new(InputState {
                pipe: Some(pipe),
                queue: std::collections::VecDeque::new(),
                draining: false,
            }),
            wake: tokio::sync::Notify::new(),
            record,
        });
        tokio::spawn(input.clone().run(stdin, rx));
        Ok(input)
    }

    /// Writes one line (`line` must end with a newline) without blocking:
    /// what the pipe does not take now is queued. Fails once the pipe is
    /// closed or broken.
    pub fn write_line(&self, line: &[u8]) -> std::io::Result<()> {
        use std::io::Write;
        let mut state = self.lock();
        let InputState {
            pipe,
            queue,
            draining,
        } = &mut *state;
        let Some(pipe) = pipe.as_ref() else {
            return Err(std::io::ErrorKind::BrokenPipe.into());
        };
        // Under the lock, so the transcript has the pipe's order.
        if let Some(rec) = &self.record {
            rec.record_line("c2s", line);
        }
        if *draining || !queue.is_empty() {
            queue.push_back(line.to_vec());
            return Ok(());
        }
        let mut written = 0;
        while written < line.len() {
            match (&*pipe).write(&line[written..]) {
                Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
                Ok(n) => written += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    queue.push_back(line[written..].to_vec());
                    self.wake.notify_one();
                    return Ok(());
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, InputState> {
        // A poisoned lock only means a panic elsewhere; the data is still usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn run(
        self: std::sync::Arc<Self>,
        mut stdin: ChildStdin,
        mut rx: tokio::sync::mpsc::UnboundedReceiver<crate::jsonrpc::Message>,
    ) {
        let mut buf = Vec::with_capacity(4096);
        let outcome = loop {
            tokio::select! {
                msg = rx.recv() => {
                    let Some(msg) = msg else { break self.drain(&mut stdin).await };
                    buf.clear();
                    msg.write_json(&mut buf);
                    buf.push(b'\n');
                    if let Err(e) = self.write_line(&buf) {
                        break Err(e);
                    }
                }
                () = self.wake.notified() => {
                    if let Err(e) = self.drain(&mut stdin).await {
                        break Err(e);
                    }
                }
            }
        };
        if let Err(e) = outcome {
            tracing::debug!(error = %e, "writing to the upstream's stdin failed");
        }
        let mut state = self.lock();
        state.pipe = None;
        state.queue.clear();
        // Dropping `stdin` closes the last handle on the pipe.
    }

    /// Writes the queue out, waiting for the child to make room.
    async fn drain(&self, stdin: &mut ChildStdin) -> std::io::Result<()> {
        use tokio::io::AsyncWriteExt;
        loop {
            let next = {
                let mut state = self.lock();
                let next = state.queue.pop_front();
                state.draining = next.is_some();
                next
            };
            let Some(chunk) = next else { return Ok(()) };
            stdin.write_all(&chunk).await?;
        }
    }
}

impl super::LineSink for ChildInput {
    fn write_line(&self, line: &[u8]) -> std::io::Result<()> {
        ChildInput::write_line(self, line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::Message;
    use serde_json::json;

    /// A child that reads nothing for a while: the pipe fills, lines queue,
    /// and every line still arrives whole, once, in order, the channel's
    /// messages among them; closing the channel ends the child's input.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_full_pipe_queues_lines_in_order_and_loses_none() {
        let spawned = spawn("sh", &["-c".into(), "sleep 0.3; cat".into()]).unwrap();
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let input = ChildInput::start(spawned.stdin, rx).unwrap();
        let lines = 600usize;
        let pad = "x".repeat(1000);
        let writer = {
            let input = input.clone();
            std::thread::spawn(move || {
                for i in 0..lines {
                    let line = format!("{{\"n\":{i},\"pad\":\"{pad}\"}}\n");
                    input.write_line(line.as_bytes()).unwrap();
                }
            })
        };
        for i in 0..20 {
            tx.send(Message::notification("m", json!({"i": i})))
                .unwrap();
        }
        writer.join().unwrap();
        drop(tx);
        let mut out = String::new();
        let mut stdout = spawned.stdout;
        tokio::time::timeout(
            std::time::Duration::from_secs(20),
            tokio::io::AsyncReadExt::read_to_string(&mut stdout, &mut out),
        )
        .await
        .expect("the child sees the end of its input")
        .unwrap();
        let mut next = 0;
        let mut notes = 0;
        for line in out.lines() {
            let v: serde_json::Value = serde_json::from_str(line).expect("whole lines only");
            match v.get("n") {
                Some(n) => {
                    assert_eq!(n, next, "in order");
                    next += 1;
                }
                None => notes += 1,
            }
        }
        assert_eq!((next as usize, notes), (lines, 20));
        assert!(
            input.write_line(b"{}\n").is_err(),
            "closed after the channel"
        );
    }
}
