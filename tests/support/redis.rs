//! A throwaway `redis-server` for the shared-ledger tests: its own unix
//! socket in a temporary directory (no port to collide on), no persistence,
//! killed when dropped. Also compiled into the ledger's unit tests
//! (`src/ledger/contract.rs`) so both use one copy.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A running `redis-server`.
pub struct RedisServer {
    child: Child,
    socket: PathBuf,
    _dir: tempfile::TempDir,
}

impl RedisServer {
    /// Starts one in a fresh temporary directory.
    pub fn start() -> RedisServer {
        let dir = tempfile::tempdir().expect("temp dir");
        let socket = dir.path().join("redis.sock");
        let child = spawn(&socket);
        RedisServer {
            child,
            socket,
            _dir: dir,
        }
    }

    /// Kills the server: its data is gone (no persistence).
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// An empty server again on the same socket, as after a Redis restart.
    pub fn restart(&mut self) {
        self.stop();
        let _ = std::fs::remove_file(&self.socket);
        self.child = spawn(&self.socket);
    }

    /// Freezes the server (`SIGSTOP`): its connections stay open and
    /// nothing on them is answered, as with a Redis that hangs.
    pub fn freeze(&self) {
        self.signal(libc::SIGSTOP);
    }

    /// Lets a frozen server run on (`SIGCONT`).
    pub fn thaw(&self) {
        self.signal(libc::SIGCONT);
    }

    fn signal(&self, signal: libc::c_int) {
        let pid = libc::pid_t::try_from(self.child.id()).expect("a pid");
        // SAFETY: kill(2) on our own child, which is not reaped until `stop`.
        let sent = unsafe { libc::kill(pid, signal) };
        assert_eq!(sent, 0, "kill({pid}, {signal})");
    }

    /// Its address for `--ledger` / `RedisLedger::open`.
    pub fn url(&self) -> String {
        format!("redis+unix://{}", self.socket.display())
    }
}

/// Starts `redis-server` on `socket` and waits (bounded) until it exists.
/// Panics with the fix when `redis-server` is not installed:
/// scripts/test.sh installs it, and a missing store must fail the run, not
/// skip it.
fn spawn(socket: &std::path::Path) -> Child {
    let mut child = Command::new("redis-server")
        .args(["--port", "0", "--save", "", "--appendonly", "no"])
        .arg("--unixsocket")
        .arg(socket)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "cannot start redis-server ({e}); scripts/test.sh installs it \
                 (apt-get install redis-server)"
            )
        });
    // Its log says when it accepts connections (the socket is bound by
    // then); the rest of the log is drained so it never blocks on it.
    let stdout = child.stdout.take().expect("piped stdout");
    let (ready_tx, ready) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if line
                .to_ascii_lowercase()
                .contains("ready to accept connections")
            {
                let _ = ready_tx.send(());
            }
        }
    });
    ready
        .recv_timeout(Duration::from_secs(10))
        .expect("redis-server did not start in 10 s");
    assert!(
        socket.exists(),
        "redis-server listens on {}",
        socket.display()
    );
    child
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
