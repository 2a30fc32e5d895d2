//! `mcp-tasks-shim stdio -- <upstream command> [args…]`.

use std::sync::Arc;

use super::options::ShimArgs;
use crate::ledger::MemoryLedger;
use crate::proxy::{self, Ending};

/// Arguments of `stdio`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Bridge options.
    #[command(flatten)]
    pub shim: ShimArgs,
    /// The upstream server command and its arguments (after `--`).
    #[arg(last = true, required = true, value_name = "UPSTREAM")]
    pub upstream: Vec<String>,
}

pub(crate) fn run(args: Args) -> Result<(), String> {
    let opts = args.shim.proxy_options()?;
    let ledger = Arc::new(MemoryLedger::new(args.shim.max_tasks_per_client));
    // One client, one upstream: every message hops between a handful of
    // tasks (reader, driver, engine, writer). On one thread a hop is a
    // queue push; across worker threads it is a futex wake-up each, which
    // cost more than the translation itself.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let outcome = rt.block_on(async move {
        let (program, rest) = args
            .upstream
            .split_first()
            .ok_or("missing upstream command after --")?;
        let child = crate::transport::child::spawn(program, rest).map_err(|e| e.to_string())?;
        let ending = proxy::run(tokio::io::stdin(), tokio::io::stdout(), child, ledger, opts)
            .await
            .map_err(|e| e.to_string())?;
        match ending {
            Ending::ClientClosed => Ok(()),
            Ending::UpstreamGone(reason) => Err(reason),
        }
    });
    // tokio reads stdin with a blocking read on a helper thread that cannot
    // be cancelled: a plain drop of the runtime would wait for the client to
    // close stdin, so a shim whose upstream died would never exit. The proxy
    // has flushed everything by now.
    rt.shutdown_background();
    outcome
}
