//! The shim as a tower layer inside the server, against the alternatives,
//! in one run:
//!
//! - **2026-07-28 pass-through**: `tools/call greet` and `tasks/get` from
//!   a 2026-07-28 client, through `TasksCompatLayer` vs straight to the
//!   bare inner service (the same `Router`, served on two listeners).
//!   Target: layer p50 ≤ 1.05 × bare.
//! - **2025-11-25 through the shim**: the same requests from a 2025-11-25
//!   client (a session, a task running for an hour), through the layer vs
//!   through the CLI proxy (`mcp-tasks-shim http --upstream-url`, a child
//!   process) in front of that same inner service. Target: the layer is
//!   faster (it saves the proxy's hop).
//!
//! With `--features rmcp` the pass-through comparison also runs with an
//! rmcp 3.x `StreamableHttpService` (the rmcp reference server) as the
//! inner service: the layer vs the bare rmcp service.
//!
//! The inner service is the crate's 2026-07-28 reference server as an
//! axum `Router`, served with the layer on a runtime of its own; the
//! client (`overhead/client.rs`, shared with `benches/overhead.rs`) runs on
//! another. Sequential requests after a warm-up, in batches rotating over
//! the two targets of each comparison, so load on a shared machine hits
//! both alike; p50 and p99 over all samples.
//!
//! `cargo bench --bench layer [--features rmcp]`. Knobs (environment): `LAYER_REQUESTS`
//! (sequential requests per target and request, 2000), `LAYER_BATCH` (100),
//! `LAYER_WARMUP` (300).

#[allow(dead_code)]
#[path = "overhead/client.rs"]
mod client;
#[allow(dead_code, unreachable_pub, missing_docs)]
#[path = "../tests/support/schema.rs"]
mod schema;

use std::net::SocketAddr;
use std::process::{ExitCode, Stdio};

use axum::Router;
use mcp_tasks_shim::layer::{TasksCompatConfig, TasksCompatLayer};
use mcp_tasks_shim::reference;
use mcp_tasks_shim::revision::Revision as Rev;
use tokio::io::{AsyncBufReadExt, BufReader};

use client::{HttpPeer, Op, Result};
use schema::Revision;

const SHIM: &str = env!("CARGO_BIN_EXE_mcp-tasks-shim");
/// Layer p50 over bare p50, 2026-07-28 requests, at most.
const PASS_TARGET: f64 = 1.05;

struct Config {
    requests: usize,
    batch: usize,
    warmup: usize,
}

fn knob(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() -> ExitCode {
    let cfg = Config {
        requests: knob("LAYER_REQUESTS", 2000),
        batch: knob("LAYER_BATCH", 100).max(1),
        warmup: knob("LAYER_WARMUP", 300),
    };
    let servers = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let (bare, layered) = servers.block_on(start_servers());
    let rmcp_pair = servers.block_on(start_rmcp_servers());
    let client = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    match client.block_on(run(&cfg, &bare, &layered, rmcp_pair.as_ref())) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(2),
        Err(e) => {
            eprintln!("layer bench failed: {e}");
            ExitCode::FAILURE
        }
    }
}

/// One inner service on two listeners: bare, and behind the layer.
async fn start_servers() -> (String, String) {
    let inner = reference::router(Rev::Modern, "/");
    let bare = Router::new().nest_service("/mcp", inner.clone());
    let layered = Router::new().nest_service(
        "/mcp",
        TasksCompatLayer::new(TasksCompatConfig::default()).layer(inner),
    );
    (serve(bare).await, serve(layered).await)
}

/// rmcp's `StreamableHttpService` serving the rmcp reference server, on
/// two listeners: bare, and behind the layer (with the server's policy).
#[cfg(feature = "rmcp")]
async fn start_rmcp_servers() -> Option<(String, String)> {
    use std::sync::Arc;

    use mcp_tasks_shim::reference::rmcp::RmcpReferenceServer;
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    let server = RmcpReferenceServer::new();
    let inner = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let bare = Router::new().nest_service("/mcp", inner.clone());
    let mut config = TasksCompatConfig::default().inner_revision(Rev::Modern);
    config.http.bridge.policy = Some(RmcpReferenceServer::task_policy());
    let layered = Router::new().nest_service("/mcp", TasksCompatLayer::new(config).layer(inner));
    Some((serve(bare).await, serve(layered).await))
}

#[cfg(not(feature = "rmcp"))]
async fn start_rmcp_servers() -> Option<(String, String)> {
    None
}

async fn serve(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0");
    let addr: SocketAddr = listener.local_addr().expect("an address");
    // As the CLI's front does: SSE answers go out in several writes.
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}/mcp")
}

/// `mcp-tasks-shim http` in front of `upstream`; the child and its URL.
async fn start_proxy(upstream: &str) -> Result<(tokio::process::Child, String)> {
    let mut child = tokio::process::Command::new(SHIM)
        .args([
            "http",
            "--listen",
            "127.0.0.1:0",
            "--upstream-url",
            upstream,
        ])
        .env("MCP_SHIM_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    for out in [
        Box::new(child.stdout.take().ok_or("no stdout")?)
            as Box<dyn tokio::io::AsyncRead + Unpin + Send>,
        Box::new(child.stderr.take().ok_or("no stderr")?),
    ] {
        let tx = tx.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(out).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                match line.split("listening on ").nth(1) {
                    Some(url) => {
                        let _ = tx.send(url.split_whitespace().next().unwrap_or("").to_owned());
                    }
                    None => eprintln!("  | {line}"),
                }
            }
        });
    }
    match tokio::time::timeout(client::STEP, rx.recv()).await {
        Ok(Some(url)) if url.starts_with("http://") => Ok((child, url)),
        _ => Err("the CLI proxy did not report its address in time".into()),
    }
}

async fn run(
    cfg: &Config,
    bare: &str,
    layered: &str,
    rmcp_pair: Option<&(String, String)>,
) -> Result<bool> {
    println!(
        "layer bench: {} sequential requests per target and request (batches of {}, {} warm-up)",
        cfg.requests, cfg.batch, cfg.warmup
    );
    let (proxy_child, proxy) = start_proxy(bare).await?;
    let mut ok = true;

    ok &= pass_through(cfg, "bare inner service", "bare", bare, layered).await?;
    match rmcp_pair {
        Some((rmcp_bare, rmcp_layered)) => {
            let base = "bare rmcp StreamableHttpService";
            ok &= pass_through(cfg, base, "rmcp", rmcp_bare, rmcp_layered).await?;
        }
        None => println!("\n(rmcp inner service: run with --features rmcp)"),
    }

    let (layer_peer, layer_ops) = HttpPeer::start(layered, Revision::Legacy).await?;
    let (proxy_peer, proxy_ops) = HttpPeer::start(&proxy, Revision::Legacy).await?;
    println!("\n2025-11-25 through the shim: layer vs CLI proxy (target < 1.00×)");
    for (what, a, b) in [
        ("tools/call greet", &layer_ops.greet, &proxy_ops.greet),
        ("tasks/get", tasks_get(&layer_ops)?, tasks_get(&proxy_ops)?),
    ] {
        let ratio = compare(
            cfg,
            what,
            ("layer", &layer_peer, a),
            ("proxy", &proxy_peer, b),
        )
        .await?;
        ok &= verdict(ratio < 1.0);
    }
    drop(proxy_child);
    println!(
        "\n{}",
        if ok {
            "all targets met"
        } else {
            "some targets missed"
        }
    );
    Ok(ok)
}

/// 2026-07-28 `tools/call` and `tasks/get` through the layer at `layered`
/// vs straight to the service at `bare`; whether both met the target.
async fn pass_through(
    cfg: &Config,
    base: &str,
    short: &str,
    bare: &str,
    layered: &str,
) -> Result<bool> {
    let (bare_peer, bare_ops) = HttpPeer::start(bare, Revision::Modern).await?;
    let (layer_peer, layer_ops) = HttpPeer::start(layered, Revision::Modern).await?;
    println!("\n2026-07-28 pass-through: layer vs {base} (target ≤ {PASS_TARGET:.2}×)");
    let mut ok = true;
    for (what, a, b) in [
        ("tools/call greet", &layer_ops.greet, &bare_ops.greet),
        ("tasks/get", tasks_get(&layer_ops)?, tasks_get(&bare_ops)?),
    ] {
        let ratio = compare(cfg, what, ("layer", &layer_peer, a), (short, &bare_peer, b)).await?;
        ok &= verdict(ratio <= PASS_TARGET);
    }
    Ok(ok)
}

/// The `tasks/get` op of a peer set up with a task (`HttpPeer::start`).
fn tasks_get(ops: &client::Ops) -> Result<&Op> {
    ops.get
        .as_ref()
        .ok_or_else(|| "the peer was set up without a task".into())
}

fn verdict(met: bool) -> bool {
    println!("    {}", if met { "target met" } else { "TARGET MISSED" });
    met
}

/// p50 of `a` over p50 of `b`, batches alternating; prints both.
async fn compare(
    cfg: &Config,
    what: &str,
    a: (&str, &HttpPeer, &Op),
    b: (&str, &HttpPeer, &Op),
) -> Result<f64> {
    let mut scratch = Vec::new();
    a.1.latency(a.2, cfg.warmup, &mut scratch).await?;
    b.1.latency(b.2, cfg.warmup, &mut scratch).await?;
    let (mut sa, mut sb) = (Vec::new(), Vec::new());
    let mut left = cfg.requests;
    while left > 0 {
        let n = left.min(cfg.batch);
        a.1.latency(a.2, n, &mut sa).await?;
        b.1.latency(b.2, n, &mut sb).await?;
        left -= n;
    }
    let (pa, pb) = (percentiles(&mut sa), percentiles(&mut sb));
    let ratio = pa.0 / pb.0;
    println!(
        "  {what:<17} {:>6} p50 {:>7.1} µs p99 {:>7.1} µs | {:>6} p50 {:>7.1} µs p99 {:>7.1} µs | p50 ratio {ratio:.3}×",
        a.0, pa.0, pa.1, b.0, pb.0, pb.1
    );
    Ok(ratio)
}

/// (p50, p99) of `samples` (µs).
fn percentiles(samples: &mut [f64]) -> (f64, f64) {
    samples.sort_by(f64::total_cmp);
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.99))
}
