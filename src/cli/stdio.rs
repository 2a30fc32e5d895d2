//! `mcp-tasks-shim stdio -- <upstream command> [args…]`.

use super::options::ShimArgs;
use crate::proxy::{self, Ending};

/// Arguments of `stdio`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Bridge options.
    #[command(flatten)]
    pub shim: ShimArgs,
    /// Append the client-side conversation to FILE as a JSONL transcript
    /// (the input format of `translate`).
    #[arg(long, value_name = "FILE")]
    pub record: Option<std::path::PathBuf>,
    /// The upstream server command and its arguments (after `--`).
    #[arg(last = true, required = true, value_name = "UPSTREAM")]
    pub upstream: Vec<String>,
}

pub(crate) fn run(args: Args) -> Result<(), String> {
    let mut opts = args.shim.proxy_options()?;
    opts.record = args.record;
    let ledger = args.shim.open_ledger()?;
    let rt = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    // The session runs on a worker, not on this thread inside `block_on`:
    // there every message to or from a task would cross threads (a futex
    // wake-up each way), where on a worker the tasks it wakes run in turn on
    // the same thread.
    let session = async move {
        let (program, rest) = args
            .upstream
            .split_first()
            .ok_or("missing upstream command after --")?;
        let ending = proxy::run_stdio(program, rest, ledger, opts)
            .await
            .map_err(|e| e.to_string())?;
        match ending {
            Ending::ClientClosed => Ok(()),
            Ending::UpstreamGone(reason) => Err(reason),
        }
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
    outcome
}
