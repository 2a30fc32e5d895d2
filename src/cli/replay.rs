//! `mcp-tasks-shim replay`: the client side of a recorded conversation
//! played against a live server; thin over [`crate::testing::replay`].

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use crate::testing::Transcript;
use crate::testing::replay::{Replay, Replayed};

/// Arguments of `replay`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
The replayer speaks the transcript's revision (an initialize request means 2025-11-25, \
modern _meta means 2026-07-28). It probes the server with server/discover: a server of \
the same revision is talked to directly, one of the other revision through the shim's \
bridge, run in this process. Recorded request ids are kept; what the live server assigns \
(task ids, input-request keys, requestState) is carried into later client messages; the \
server's own requests (elicitation, sampling, roots) get the recorded answers. One \
session is replayed: the transcript's first.

Examples:
  mcp-tasks-shim replay old.jsonl --fast -o new.jsonl -- node new-server.js
  mcp-tasks-shim replay old.jsonl --url http://127.0.0.1:3000/mcp > new.jsonl
  mcp-tasks-shim compare old.jsonl new.jsonl

Exit status: 0 when every recorded message was placed; 1 when some were not (each is \
named on stderr with its transcript line; the new transcript is still written); 2 on an \
error (unreadable transcript, server that cannot be started or reached).")]
pub struct Args {
    /// The recorded transcript (JSONL, as --record writes it).
    pub transcript: PathBuf,
    /// Where to write the new transcript (default: stdout).
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    pub output: Option<PathBuf>,
    /// Send each client message as soon as the answers before it are in,
    /// instead of at the recorded times (`t`).
    #[arg(long)]
    pub fast: bool,
    /// How long to wait for each expected server message, e.g. 10s, 500ms.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = super::options::positive_millis)]
    pub timeout: Duration,
    /// Replay against a Streamable HTTP server at URL instead of a command.
    #[arg(long, value_name = "URL", conflicts_with = "server")]
    pub url: Option<String>,
    /// The server to start, after `--` (spoken to on its stdio).
    #[arg(
        last = true,
        value_name = "SERVER CMD",
        required_unless_present = "url"
    )]
    pub server: Vec<String>,
}

/// Whether every message was placed (`Ok(true)`); `Err` for an error.
pub(crate) fn run(args: Args) -> Result<bool, String> {
    let recorded = Transcript::read(&args.transcript).map_err(|e| match e {
        crate::testing::TranscriptReadError::Io { .. } => e.to_string(),
        e => format!("{}: {e}", args.transcript.display()),
    })?;
    let replay = Replay::new(recorded).fast(args.fast).timeout(args.timeout);
    let rt = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    let replayed = rt
        .block_on(async {
            match (&args.url, args.server.split_first()) {
                (Some(url), _) => replay.against_url(url).await,
                (None, Some((program, rest))) => replay.against_command(program, rest).await,
                (None, None) => unreachable!("clap requires a server command or --url"),
            }
        })
        .map_err(|e| e.to_string())?;
    // The runtime's tasks (the server's pipes) end with it, not at exit.
    rt.shutdown_timeout(Duration::from_secs(2));
    write_out(&replayed, args.output.as_ref())?;
    let name = args.transcript.display();
    for u in &replayed.unplaced {
        crate::console::fail(
            &format!(
                "mcp-tasks-shim: {name}:{}: not placed: {}",
                u.line, u.reason
            ),
            &format!("{name}:{}: not placed: {}", u.line, u.reason),
        );
    }
    Ok(replayed.unplaced.is_empty())
}

fn write_out(replayed: &Replayed, output: Option<&PathBuf>) -> Result<(), String> {
    let text = replayed.transcript.to_jsonl();
    match output {
        Some(p) if p.as_os_str() != "-" => {
            std::fs::write(p, text).map_err(|e| format!("{}: {e}", p.display()))
        }
        _ => {
            let mut out = std::io::stdout().lock();
            out.write_all(text.as_bytes())
                .and_then(|()| out.flush())
                .map_err(|e| format!("writing stdout: {e}"))
        }
    }
}
