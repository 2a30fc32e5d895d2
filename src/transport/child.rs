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
            eprintln!("[upstream] {line}");
        }
    });
    Ok(ChildUpstream {
        child,
        stdin,
        stdout,
    })
}
