//! `mcp-tasks-shim stdio -- <upstream command> [args…]`.

use std::sync::{Arc, OnceLock};

use super::options::ShimArgs;
use crate::driver::stdio::{self, Ending};

/// Arguments of `stdio`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Bridge options.
    #[command(flatten)]
    pub shim: ShimArgs,
    /// Append the client-side conversation to FILE as a JSONL transcript
    /// (the input format of `translate`).
    #[arg(long, value_name = "FILE", help_heading = super::options::RECORDING)]
    pub record: Option<std::path::PathBuf>,
    /// Append the upstream-side conversation to FILE, in the same format:
    /// what the shim sent the upstream server (`c2s`) and what it got back
    /// (`s2c`), labelled `upstream-1` (`upstream-2`… after a restart).
    /// With --record, one run shows both revisions of one conversation.
    #[arg(long, value_name = "FILE", help_heading = super::options::RECORDING)]
    pub record_upstream: Option<std::path::PathBuf>,
    /// The upstream server command and its arguments (after `--`).
    #[arg(last = true, required = true, value_name = "UPSTREAM")]
    pub upstream: Vec<String>,
}

pub(crate) fn run(args: Args) -> Result<(), String> {
    let mut opts = args.shim.proxy_options()?;
    opts.record = args.record;
    opts.record_upstream = args.record_upstream;
    let rt = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    let ledger = rt.block_on(args.shim.open_ledger())?;
    // Installed before the child is started and stdin is read, so that no
    // signal meets the default action: that killed the shim outright,
    // left pending requests unanswered and the child running on,
    // re-parented to init (a server that does not exit at the end of its
    // input never did).
    let signals = {
        let _rt = rt.enter();
        Signals::install().map_err(|e| format!("cannot handle SIGTERM and SIGINT: {e}"))?
    };
    let (stop, stops) = tokio::sync::mpsc::unbounded_channel();
    let first_signal = Arc::new(OnceLock::new());
    rt.spawn(forward_signals(signals, stop, first_signal.clone()));
    // The session runs on a worker, not on this thread inside `block_on`:
    // there every message to or from a task would cross threads (a futex
    // wake-up each way), where on a worker the tasks it wakes run in turn on
    // the same thread.
    let session = async move {
        let (program, rest) = args
            .upstream
            .split_first()
            .ok_or("missing upstream command after --")?;
        stdio::run_stdio(program, rest, ledger, opts, stops)
            .await
            .map_err(|e| e.to_string())
    };
    let outcome = rt.block_on(async move {
        tokio::spawn(session)
            .await
            .unwrap_or_else(|e| Err(format!("the session failed: {e}")))
    });
    // stdin is read by a blocking read on a thread that cannot be
    // cancelled: waiting for it would wait for the client to close stdin, so
    // a shim whose upstream died would never exit. The proxy has flushed
    // everything by now.
    rt.shutdown_background();
    match outcome? {
        Ending::ClientClosed => Ok(()),
        Ending::UpstreamGone(reason) => Err(reason),
        // 128 + the signal's number, as a shell reports a process the
        // signal killed: whoever runs the shim can tell "stopped" from
        // "finished" (0: the client closed the session) and from "failed"
        // (1). Exiting here, as `main` only knows those two.
        Ending::Stopped(_) => {
            let signal = first_signal.get().copied().unwrap_or(SIGTERM.1);
            std::process::exit(128 + signal)
        }
    }
}

/// A signal's name and number.
type Named = (&'static str, i32);

const SIGTERM: Named = ("SIGTERM", libc::SIGTERM);
const SIGINT: Named = ("SIGINT", libc::SIGINT);

/// Tells the session of each SIGTERM or SIGINT (see [`crate::driver::stdio::Stops`]):
/// the first stops it, another kills the upstream at once. The first
/// decides the exit status.
async fn forward_signals(
    mut signals: Signals,
    stop: tokio::sync::mpsc::UnboundedSender<String>,
    first: Arc<OnceLock<i32>>,
) {
    while let Some((name, number)) = signals.next().await {
        if first.set(number).is_ok() {
            tracing::warn!(
                signal = name,
                "received {name}: answering pending requests, stopping the upstream and exiting"
            );
        } else {
            tracing::warn!(
                signal = name,
                "received {name} while stopping: killing the upstream and exiting now"
            );
        }
        if stop.send(format!("the shim received {name}")).is_err() {
            return;
        }
    }
}

/// SIGTERM and SIGINT. (Unix only, as the rest of the stdio proxy: it
/// works on file descriptors.)
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl Signals {
    /// Installs the handlers now (inside a runtime), so that no signal
    /// from here on takes its default action.
    fn install() -> std::io::Result<Signals> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Signals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
        })
    }

    /// The next signal; `None` once none can come.
    async fn next(&mut self) -> Option<Named> {
        tokio::select! {
            got = self.term.recv() => got.map(|()| SIGTERM),
            got = self.int.recv() => got.map(|()| SIGINT),
        }
    }
}
