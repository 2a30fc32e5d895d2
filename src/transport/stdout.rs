//! The shim's own stdout toward a stdio client, shared by every thread that
//! has a line for the client.
//!
//! A runtime worker finishing an answer, the stdin thread answering on the
//! spot, an upstream reader thread relaying a pass-through line: each
//! writes its line itself, straight into the pipe, instead of waking a
//! writer (a wake-up costs more than the rest of a small message's trip
//! through the shim). The write must never block a worker on a client that
//! stopped reading, and the descriptor is the client's, so the shim may not
//! switch it to non-blocking mode: a write asks the kernel not to wait
//! (`RWF_NOWAIT`, pipes and sockets on Linux), and what the pipe does not
//! take is queued for a writer thread that may block. Until that queue is
//! empty every later line joins it, so lines keep their order.

use std::collections::VecDeque;
use std::fs::File;
use std::io::Write;
use std::sync::{Condvar, Mutex, MutexGuard};

use super::LineSink;

/// The shim's stdout (or any byte stream a client reads), see the module
/// doc. [`SharedStdout::run_writer`] must run on a thread of its own.
#[derive(Debug)]
pub struct SharedStdout {
    state: Mutex<State>,
    queued: Condvar,
}

#[derive(Debug)]
struct State {
    file: File,
    /// Lines (or the rest of one) the writer thread has to write.
    queue: VecDeque<Vec<u8>>,
    /// The writer thread is writing a line it took from the queue.
    writing: bool,
    /// Writes that do not wait work on this descriptor; when they do not
    /// (a terminal, a file), every line goes through the writer thread.
    nowait: bool,
    /// No more lines will come: the writer ends once the queue is empty.
    closed: bool,
    /// A write failed: the client is gone.
    broken: bool,
}

impl SharedStdout {
    /// Shares `file` (the shim's stdout, or another stream).
    pub fn new(file: File) -> SharedStdout {
        SharedStdout {
            state: Mutex::new(State {
                file,
                queue: VecDeque::new(),
                writing: false,
                nowait: cfg!(target_os = "linux"),
                closed: false,
                broken: false,
            }),
            queued: Condvar::new(),
        }
    }

    /// Writes queued lines with plain (blocking) writes until
    /// [`LineSink::close`] and an empty queue, or a failed write.
    pub fn run_writer(&self) -> std::io::Result<()> {
        let file = self.lock().file.try_clone()?;
        loop {
            let line = {
                let mut state = self.lock();
                loop {
                    if let Some(line) = state.queue.pop_front() {
                        state.writing = true;
                        break line;
                    }
                    if state.closed || state.broken {
                        return Ok(());
                    }
                    state = self.queued.wait(state).unwrap_or_else(|p| p.into_inner());
                }
            };
            let written = (&file).write_all(&line);
            let mut state = self.lock();
            state.writing = false;
            if let Err(e) = written {
                state.broken = true;
                state.queue.clear();
                return Err(e);
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A poisoned lock only means a panic elsewhere; the data is still usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl LineSink for SharedStdout {
    fn write_line(&self, line: &[u8]) -> std::io::Result<()> {
        let mut state = self.lock();
        if state.broken {
            return Err(std::io::ErrorKind::BrokenPipe.into());
        }
        let mut done = 0;
        if state.nowait && !state.writing && state.queue.is_empty() {
            while done < line.len() {
                match write_nowait(&state.file, &line[done..]) {
                    Ok(0) => {
                        state.broken = true;
                        return Err(std::io::ErrorKind::WriteZero.into());
                    }
                    Ok(n) => done += n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == std::io::ErrorKind::Unsupported => {
                        tracing::debug!(
                            "stdout takes no writes that do not wait; using a writer thread"
                        );
                        state.nowait = false;
                        break;
                    }
                    Err(e) => {
                        state.broken = true;
                        return Err(e);
                    }
                }
            }
        }
        if done < line.len() {
            state.queue.push_back(line[done..].to_vec());
            self.queued.notify_one();
        }
        Ok(())
    }

    fn close(&self) {
        self.lock().closed = true;
        self.queued.notify_one();
    }
}

/// One write that fails with `WouldBlock` rather than wait for room, and
/// with `Unsupported` where the descriptor cannot do that.
#[cfg(target_os = "linux")]
fn write_nowait(file: &File, bytes: &[u8]) -> std::io::Result<usize> {
    use std::os::fd::AsRawFd;
    let iov = libc::iovec {
        iov_base: bytes.as_ptr() as *mut libc::c_void,
        iov_len: bytes.len(),
    };
    // SAFETY: `iov` points at `bytes`, alive and unaliased for the call;
    // offset -1 writes at the current position, as `write` does.
    let n = unsafe { libc::pwritev2(file.as_raw_fd(), &iov, 1, -1, libc::RWF_NOWAIT) };
    if n >= 0 {
        return Ok(n as usize);
    }
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        // Not on this descriptor; EINVAL/ENOSYS: a kernel without the
        // flag or without pwritev2.
        Some(libc::EOPNOTSUPP | libc::EINVAL | libc::ENOSYS) => {
            Err(std::io::ErrorKind::Unsupported.into())
        }
        _ => Err(e),
    }
}

#[cfg(not(target_os = "linux"))]
fn write_nowait(_: &File, _: &[u8]) -> std::io::Result<usize> {
    Err(std::io::ErrorKind::Unsupported.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::sync::Arc;

    fn pipe() -> (File, File) {
        let (r, w) = std::io::pipe().unwrap();
        (
            File::from(std::os::fd::OwnedFd::from(r)),
            File::from(std::os::fd::OwnedFd::from(w)),
        )
    }

    /// A reader that waits before reading: the pipe fills, lines queue for
    /// the writer thread, and every line still arrives whole, once and in
    /// order; the writer ends after `close` with the queue written.
    #[test]
    fn a_full_pipe_queues_lines_in_order_and_loses_none() {
        let (mut r, w) = pipe();
        let out = Arc::new(SharedStdout::new(w));
        let writer = {
            let out = out.clone();
            std::thread::spawn(move || out.run_writer())
        };
        let lines = 300usize;
        let pad = "x".repeat(1000);
        for i in 0..lines {
            let line = format!("{i} {pad}\n");
            out.write_line(line.as_bytes()).unwrap();
        }
        assert!(
            !out.lock().queue.is_empty() || out.lock().writing,
            "300 KB cannot all fit in a pipe nobody reads"
        );
        out.close();
        let reader = std::thread::spawn(move || {
            let mut all = String::new();
            r.read_to_string(&mut all).unwrap();
            all
        });
        writer.join().unwrap().unwrap();
        drop(out);
        let all = reader.join().unwrap();
        let seen: Vec<usize> = all
            .lines()
            .map(|l| l.split_once(' ').unwrap().0.parse().unwrap())
            .collect();
        assert_eq!(seen, (0..lines).collect::<Vec<_>>());
    }

    /// A client that closed its end: writes fail instead of piling up.
    #[test]
    fn a_closed_reader_fails_writes() {
        let (r, w) = pipe();
        drop(r);
        let out = SharedStdout::new(w);
        assert!(out.write_line(b"{}\n").is_err());
        assert!(out.write_line(b"{}\n").is_err(), "and stays failed");
    }
}
