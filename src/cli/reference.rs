//! `mcp-tasks-shim reference-server`.

use std::net::SocketAddr;

use crate::revision::Revision;

/// Arguments of `reference-server`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Which revision to speak: 2025-11-25 or 2026-07-28.
    #[arg(long, value_parser = super::parse_revision)]
    pub revision: Revision,
    /// Serve Streamable HTTP at http://ADDR/mcp instead of stdio (port 0
    /// picks a free port; stdout gets one line ending in the URL).
    #[arg(long, value_name = "ADDR")]
    pub http: Option<SocketAddr>,
    /// Retention of tasks whose client asks for none (every task of the
    /// 2026-07-28 server), in ms; default 300000, at most 3600000.
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(i64).range(1..=3_600_000))]
    pub task_ttl_ms: Option<i64>,
    /// The polling interval every task advertises (`pollIntervalMs` /
    /// `pollInterval`), in ms; default 100.
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(i64).range(1..=3_600_000))]
    pub poll_interval_ms: Option<i64>,
    /// 2026-07-28 only: answer `subscriptions/listen` with -32601, like a
    /// server that offers no listen streams (clients must poll).
    #[arg(long)]
    pub no_listen: bool,
    /// Make task ids, session ids, requestState and timestamps
    /// reproducible from N (timestamps start at 2026-01-01T00:00:00Z and
    /// advance 1 ms per event): two runs of one conversation then match.
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
}

pub(crate) fn run(args: Args) -> Result<(), String> {
    if args.no_listen && args.revision != Revision::Modern {
        return Err("--no-listen: 2025-11-25 has no subscriptions/listen to turn off".into());
    }
    if let Some(ms) = args.task_ttl_ms {
        crate::reference::set_task_ttl_ms(ms);
    }
    if let Some(ms) = args.poll_interval_ms {
        crate::reference::set_poll_interval_ms(ms);
    }
    if args.no_listen {
        crate::reference::disable_listen();
    }
    if let Some(seed) = args.seed {
        crate::reference::set_seed(seed);
    }
    // Over stdio, one runtime thread runs the tools, the timers and the
    // stdout writer beside the stdin thread: with a pool of workers, each
    // tiny tool run also woke an idle worker to look for work, a few µs of
    // CPU per request that a 2-CPU machine pays in every latency it
    // measures.
    // HTTP keeps the pool: many connections share the server there.
    let rt = match args.http {
        Some(_) => tokio::runtime::Runtime::new(),
        None => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
    }
    .map_err(|e| e.to_string())?;
    rt.block_on(async {
        match args.http {
            Some(addr) => crate::reference::serve_http(args.revision, addr).await,
            None => crate::reference::serve_stdio(args.revision).await,
        }
    })
    .map_err(|e| e.to_string())
}
