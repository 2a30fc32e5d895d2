//! Round-trip overhead of the shim against a direct connection and a bare
//! relay, over stdio and Streamable HTTP, in one run.
//!
//! For every scenario three targets run side by side, each a real process
//! tree started once:
//!
//! - **direct**: the client talks to the reference server itself;
//! - **relay**: the same, through a bare relay (this binary re-executed with
//!   `OVERHEAD_ROLE`, see `overhead/relay.rs`): the cost of any extra hop;
//! - **shim**: the same client through `mcp-tasks-shim stdio` / `http`.
//!
//! The translating scenarios add a fourth, **upstream**: a 2026-07-28
//! client talking directly to the 2026-07-28 server the shim forwards to.
//! Direct and relay talk to the 2025-11-25 server, as the target says, so
//! the shim/relay ratio also counts what the newer server costs more; the
//! run prints that part beside the verdict. A fifth, **relay26**, is a
//! 2026-07-28 client through the same bare relay to that same 2026-07-28
//! server: shim/relay26 is the translating path against a base whose
//! server cost is the shim's own (a verdict of its own, same target).
//!
//! The peer-gateway scenario puts the shim beside **mcp-proxy** 0.6
//! (`scripts/bench.sh` installs it under `.tools/mcp-proxy`;
//! `OVERHEAD_MCP_PROXY` names another binary; without one the comparison
//! is skipped with a message), both passing through: a 2025-11-25 client
//! through either to the same 2025-11-25 reference server (mcp-proxy 0.6
//! connects to its backends with `initialize` only, which the 2026-07-28
//! server refuses), beside direct and relay targets to that server.
//! Measured on `tools/call` (mcp-proxy namespaces the tool as `ref/greet`
//! and does not forward the tasks utility). Target: shim p50 no slower
//! than mcp-proxy's (≤ 1.00×).
//!
//! Scenarios: pass-through (modern client, modern server) and translating
//! (legacy client; the shim in front of a modern server, direct and relay
//! talking to the legacy reference server), each over stdio and HTTP, each
//! for `tools/call greet` and `tasks/get` of a task that runs for an hour.
//!
//! Latency: sequential requests after a warm-up, taken in batches that
//! rotate over the targets, so load on this shared machine hits all three
//! alike; p50 and p99 over all samples. Throughput: a window of pipelined
//! requests (stdio, one connection) or concurrent request loops (HTTP, one
//! keep-alive connection each) for a fixed span, in slices rotating over the
//! targets; the median of the slices. The target: shim p50 within 10 % of
//! the relay's.
//!
//! Rounds: the whole measurement runs several times, every process tree
//! started afresh, and the verdict is on the median of the rounds' ratios.
//! Interleaved batches even out load within a round, but not what differs
//! between process trees (where the scheduler puts their threads, which
//! core their sockets wake): on a 2-vCPU VM one run's HTTP ratio moved by
//! more than the 10 % target between runs of the same code. Each HTTP
//! scenario also starts its own reference servers, so that no scenario
//! measures servers an earlier one has loaded.
//!
//! `cargo bench --bench overhead [-- FILTER]` (FILTER: part of a scenario
//! name, e.g. `stdio` or `HTTP translating`). Knobs (environment):
//! `OVERHEAD_REQUESTS` (sequential requests per target and request, 2000),
//! `OVERHEAD_ROUNDS` (3), `OVERHEAD_BATCH` (100), `OVERHEAD_WARMUP` (300), `OVERHEAD_SPAN_MS`
//! (throughput slice, 1000), `OVERHEAD_SLICES` (3), `OVERHEAD_WINDOW`
//! (pipelined stdio requests, 16), `OVERHEAD_CLIENTS` (concurrent HTTP
//! loops, 16), `OVERHEAD_SHIM_PREFIX` (a command the shim runs under, e.g.
//! `valgrind --tool=callgrind`, for profiling).

#[path = "overhead/client.rs"]
mod client;
#[path = "overhead/relay.rs"]
mod relay;
#[allow(dead_code, unreachable_pub, missing_docs)]
#[path = "../tests/support/schema.rs"]
mod schema;

use std::process::{ExitCode, Stdio};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::{Child, Command};

use client::{HttpPeer, Ops, Result, StdioPeer};
use schema::Revision;

/// The environment variable that selects a relay role.
const ROLE: &str = "OVERHEAD_ROLE";
/// Shim p50 may be at most this many times the relay's.
const TARGET: f64 = 1.10;
/// Shim p50 may be at most this many times the peer gateway's.
const PEER_TARGET: f64 = 1.00;
/// Label of the relay to the same 2026-07-28 server (translating scenarios).
const RELAY26: &str = "relay26";
/// Label of the peer gateway's target.
const MCP_PROXY: &str = "mcp-proxy";
/// The backend name mcp-proxy prefixes the tool names with.
const MCP_PROXY_BACKEND: &str = "ref";
const SHIM: &str = env!("CARGO_BIN_EXE_mcp-tasks-shim");

fn main() -> ExitCode {
    match std::env::var(ROLE).as_deref() {
        Ok("stdio-relay") => return relay::stdio_main(),
        Ok("http-relay") => return relay::http_main(),
        _ => {}
    }
    let cfg = Config::from_env();
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("overhead: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(&cfg)) {
        Ok(verdicts) => {
            // A missed target is a result to report, not a failure of the bench.
            summarise(cfg.rounds, &verdicts);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("overhead: {e}");
            ExitCode::FAILURE
        }
    }
}

struct Config {
    rounds: usize,
    requests: usize,
    batch: usize,
    warmup: usize,
    span: Duration,
    slices: usize,
    window: usize,
    clients: usize,
    filter: Option<String>,
    shim_prefix: Vec<String>,
}

impl Config {
    fn from_env() -> Config {
        let num = |k: &str, d: usize| {
            std::env::var(k)
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(d)
        };
        Config {
            rounds: num("OVERHEAD_ROUNDS", 3).max(1),
            requests: num("OVERHEAD_REQUESTS", 2000),
            batch: num("OVERHEAD_BATCH", 100).max(1),
            warmup: num("OVERHEAD_WARMUP", 300),
            span: Duration::from_millis(num("OVERHEAD_SPAN_MS", 1000) as u64),
            slices: num("OVERHEAD_SLICES", 3),
            window: num("OVERHEAD_WINDOW", 16).max(1),
            clients: num("OVERHEAD_CLIENTS", 16).max(1),
            // cargo passes `--bench`; the first other argument filters.
            filter: std::env::args().skip(1).find(|a| !a.starts_with("--")),
            shim_prefix: std::env::var("OVERHEAD_SHIM_PREFIX")
                .unwrap_or_default()
                .split_whitespace()
                .map(str::to_owned)
                .collect(),
        }
    }

    fn wants(&self, scenario: &str) -> bool {
        self.filter
            .as_ref()
            .is_none_or(|f| scenario.to_lowercase().contains(&f.to_lowercase()))
    }
}

/// A client connection to one target.
enum Peer {
    // Boxed: the stdio client holds its read buffer inline.
    Stdio(Box<StdioPeer>),
    Http(HttpPeer),
}

impl Peer {
    async fn latency(&mut self, op: &client::Op, n: usize, out: &mut Vec<f64>) -> Result<()> {
        match self {
            Peer::Stdio(p) => p.latency(op, n, out).await,
            Peer::Http(p) => p.latency(op, n, out).await,
        }
    }

    async fn throughput(&mut self, op: &client::Op, cfg: &Config) -> Result<f64> {
        match self {
            Peer::Stdio(p) => p.throughput(op, cfg.window, cfg.span).await,
            Peer::Http(p) => p.throughput(op, cfg.clients, cfg.span).await,
        }
    }
}

struct Target {
    label: &'static str,
    peer: Peer,
    ops: Ops,
}

/// The shim against one base for one request in one round.
struct Verdict {
    scenario: &'static str,
    request: &'static str,
    /// The label of the target the shim is compared with.
    base: &'static str,
    target: f64,
    /// p50 shim / base.
    ratio: f64,
    /// Translating only: the ratio free translation would still give.
    floor: Option<f64>,
}

/// The verdicts of all rounds, per comparison: each round's ratio, and
/// the verdict on their median.
fn summarise(rounds: usize, verdicts: &[Verdict]) {
    println!("\n## summary over {rounds} round(s): p50 shim / base, verdict on the median\n");
    let mut keys: Vec<(&str, &str, &str, f64)> = Vec::new();
    for v in verdicts {
        let key = (v.scenario, v.request, v.base, v.target);
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    let mut passed = 0;
    for &(scenario, request, base, target) in &keys {
        let of = |v: &&Verdict| v.scenario == scenario && v.request == request && v.base == base;
        let mut ratios: Vec<f64> = verdicts.iter().filter(of).map(|v| v.ratio).collect();
        let each = ratios
            .iter()
            .map(|r| format!("{r:.2}"))
            .collect::<Vec<_>>()
            .join(", ");
        let mid = middle(&mut ratios);
        let pass = mid <= target;
        passed += usize::from(pass);
        let mut floors: Vec<f64> = verdicts.iter().filter(of).filter_map(|v| v.floor).collect();
        let floor = if floors.is_empty() {
            String::new()
        } else {
            format!("; floor median {:.2}×", middle(&mut floors))
        };
        println!(
            "{scenario:<27} {request:<11} shim/{base:<9} rounds {each}: median {mid:.2}× (≤ {target:.2}×) {}{floor}",
            if pass { "PASS" } else { "MISS" }
        );
    }
    println!(
        "\nsummary: {passed} of {} comparisons within their targets at p50 (median of {rounds} round(s))",
        keys.len()
    );
}

fn ref_cmd(rev: &str) -> Vec<String> {
    [SHIM, "reference-server", "--revision", rev]
        .map(str::to_owned)
        .to_vec()
}

fn relay_cmd(server: &[String]) -> Result<Vec<String>> {
    let me = std::env::current_exe()?.to_string_lossy().into_owned();
    Ok(std::iter::once(me).chain(server.iter().cloned()).collect())
}

fn shim_cmd(cfg: &Config, args: &[&str], upstream: &[String]) -> Vec<String> {
    let mut cmd = cfg.shim_prefix.clone();
    cmd.push(SHIM.to_owned());
    cmd.extend(args.iter().map(|a| (*a).to_owned()));
    cmd.extend(upstream.iter().cloned());
    cmd
}

const QUIET: (&str, &str) = ("MCP_SHIM_LOG", "warn");
/// In the translating scenarios: a 2026-07-28 client talking directly to
/// the 2026-07-28 server the shim forwards to, so the run shows how much
/// more that server costs than the 2025-11-25 one behind direct and relay.
const UPSTREAM: &str = "upstream";

async fn stdio_targets(cfg: &Config, rev: Revision) -> Result<Vec<Target>> {
    let (server, shim_upstream) = match rev {
        Revision::Modern => (ref_cmd("2026-07-28"), ref_cmd("2026-07-28")),
        Revision::Legacy => (ref_cmd("2025-11-25"), ref_cmd("2026-07-28")),
    };
    let mut shim_upstream_args = vec!["--".to_owned()];
    shim_upstream_args.extend(shim_upstream);
    let mut cmds = vec![
        ("direct", server.clone(), vec![QUIET], rev),
        (
            "relay",
            relay_cmd(&server)?,
            vec![QUIET, (ROLE, "stdio-relay")],
            rev,
        ),
        (
            "shim",
            shim_cmd(cfg, &["stdio"], &shim_upstream_args),
            vec![QUIET],
            rev,
        ),
    ];
    if rev == Revision::Legacy {
        cmds.push((
            UPSTREAM,
            ref_cmd("2026-07-28"),
            vec![QUIET],
            Revision::Modern,
        ));
        cmds.push((
            RELAY26,
            relay_cmd(&ref_cmd("2026-07-28"))?,
            vec![QUIET, (ROLE, "stdio-relay")],
            Revision::Modern,
        ));
    }
    let mut targets = Vec::new();
    for (label, cmd, envs, rev) in cmds {
        let (peer, ops) = StdioPeer::start(&cmd, &envs, rev)
            .await
            .map_err(|e| format!("{label}: {e}"))?;
        targets.push(Target {
            label,
            peer: Peer::Stdio(Box::new(peer)),
            ops,
        });
    }
    Ok(targets)
}

/// The HTTP processes; killed when dropped.
#[derive(Default)]
struct HttpFleet {
    children: Vec<Child>,
    /// Configuration files of children that read one.
    configs: Vec<tempfile::TempDir>,
}

impl HttpFleet {
    /// Starts `cmd` and returns the URL it prints after "listening on ".
    async fn spawn(&mut self, cmd: &[String], envs: &[(&str, &str)]) -> Result<String> {
        let (program, args) = cmd.split_first().ok_or("empty command")?;
        let mut child = Command::new(program)
            .args(args)
            .envs(envs.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start {program}: {e}"))?;
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let out = child.stdout.take().ok_or("no stdout")?;
        let err = child.stderr.take().ok_or("no stderr")?;
        tokio::spawn(forward_lines(out, tx.clone()));
        tokio::spawn(forward_lines(err, tx));
        self.children.push(child);
        wait_url(rx).await
    }

    /// Starts mcp-proxy with one HTTP backend, `server`; returns its MCP
    /// endpoint once it accepts connections (it prints no address).
    async fn spawn_mcp_proxy(&mut self, bin: &std::path::Path, server: &str) -> Result<String> {
        // A free port: mcp-proxy binds the configured one and does not
        // report an ephemeral one back.
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let dir = tempfile::tempdir()?;
        let config = dir.path().join("proxy.toml");
        // No middleware: the gateway's bare forwarding path, as the shim's.
        std::fs::write(
            &config,
            format!(
                "[proxy]\nname = \"overhead\"\nseparator = \"/\"\n\n\
                 [proxy.listen]\nhost = \"127.0.0.1\"\nport = {port}\n\n\
                 [observability]\nlog_level = \"warn\"\n\n\
                 [[backends]]\nname = \"{MCP_PROXY_BACKEND}\"\ntransport = \"http\"\nurl = \"{server}\"\n"
            ),
        )?;
        let mut child = Command::new(bin)
            .arg("--config")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        let out = child.stdout.take().ok_or("no stdout")?;
        let err = child.stderr.take().ok_or("no stderr")?;
        tokio::spawn(forward_lines(out, tx.clone()));
        tokio::spawn(forward_lines(err, tx));
        self.children.push(child);
        self.configs.push(dir);
        let addr = format!("127.0.0.1:{port}");
        let ready = async {
            while tokio::net::TcpStream::connect(&addr).await.is_err() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        tokio::time::timeout(client::STEP, ready)
            .await
            .map_err(|_| format!("mcp-proxy did not listen on {addr} in time"))?;
        Ok(format!("http://{addr}/"))
    }
}

/// Copies a child's output lines to our stderr, handing the first
/// "listening on URL" to `tx`; keeps draining so the child never blocks.
async fn forward_lines(
    from: impl AsyncRead + Unpin,
    tx: tokio::sync::mpsc::UnboundedSender<String>,
) {
    let mut lines = BufReader::new(from).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        match line.split(relay::LISTENING).nth(1) {
            Some(url) => {
                let _ = tx.send(url.split_whitespace().next().unwrap_or("").to_owned());
            }
            None => eprintln!("  | {line}"),
        }
    }
}

async fn wait_url(mut rx: tokio::sync::mpsc::UnboundedReceiver<String>) -> Result<String> {
    match tokio::time::timeout(client::STEP, rx.recv()).await {
        Ok(Some(url)) if url.starts_with("http://") => Ok(url),
        _ => Err("a server did not report its address in time".into()),
    }
}

/// `http://host:port/mcp` → `http://host:port`.
fn origin(url: &str) -> &str {
    let after = url.find("://").map_or(0, |i| i + 3);
    url[after..].find('/').map_or(url, |i| &url[..after + i])
}

/// URLs of the HTTP servers, shared by the HTTP scenarios.
struct HttpServers {
    modern: String,
    legacy: String,
}

async fn http_servers(fleet: &mut HttpFleet) -> Result<HttpServers> {
    let serve = |rev: &str| {
        let mut cmd = ref_cmd(rev);
        cmd.extend(["--http".to_owned(), "127.0.0.1:0".to_owned()]);
        cmd
    };
    let modern_cmd = serve("2026-07-28");
    let legacy_cmd = serve("2025-11-25");
    Ok(HttpServers {
        modern: fleet.spawn(&modern_cmd, &[QUIET]).await?,
        legacy: fleet.spawn(&legacy_cmd, &[QUIET]).await?,
    })
}

/// The HTTP scenarios: which client revision, and which server the shim
/// forwards to.
#[derive(Clone, Copy, PartialEq)]
enum HttpScenario {
    /// 2026-07-28 client, shim in front of the 2026-07-28 server.
    PassModern,
    /// 2025-11-25 client, shim in front of the 2026-07-28 server.
    Translating,
    /// 2025-11-25 client, the shim and mcp-proxy passing through to the
    /// 2025-11-25 server (the one server both can reach).
    PeerGateway,
}

/// A bare relay to `server` (a URL with its path); the relayed URL.
async fn http_relay(fleet: &mut HttpFleet, server: &str) -> Result<String> {
    let base = fleet
        .spawn(
            &relay_cmd(&[origin(server).to_owned()])?,
            &[(ROLE, "http-relay")],
        )
        .await?;
    Ok(format!("{base}{}", &server[origin(server).len()..]))
}

async fn http_targets(
    cfg: &Config,
    fleet: &mut HttpFleet,
    servers: &HttpServers,
    scenario: HttpScenario,
) -> Result<Vec<Target>> {
    let (rev, server, upstream) = match scenario {
        HttpScenario::PassModern => (Revision::Modern, &servers.modern, &servers.modern),
        HttpScenario::Translating => (Revision::Legacy, &servers.legacy, &servers.modern),
        HttpScenario::PeerGateway => (Revision::Legacy, &servers.legacy, &servers.legacy),
    };
    let shim = shim_cmd(
        cfg,
        &[
            "http",
            "--listen",
            "127.0.0.1:0",
            "--upstream-url",
            upstream,
        ],
        &[],
    );
    let shim_url = fleet.spawn(&shim, &[QUIET]).await?;
    let relay_url = http_relay(fleet, server).await?;
    let mut urls = vec![
        ("direct", server.clone(), rev),
        ("relay", relay_url, rev),
        ("shim", shim_url, rev),
    ];
    if scenario == HttpScenario::Translating {
        urls.push((UPSTREAM, servers.modern.clone(), Revision::Modern));
        let relay26 = http_relay(fleet, &servers.modern).await?;
        urls.push((RELAY26, relay26, Revision::Modern));
    }
    let mut targets = Vec::new();
    for (label, url, rev) in urls {
        let (peer, ops) = HttpPeer::start(&url, rev)
            .await
            .map_err(|e| format!("{label} ({url}): {e}"))?;
        targets.push(Target {
            label,
            peer: Peer::Http(peer),
            ops,
        });
    }
    if scenario == HttpScenario::PeerGateway {
        match mcp_proxy_binary() {
            Some(bin) => {
                let url = fleet.spawn_mcp_proxy(&bin, server).await?;
                let tool = format!("{MCP_PROXY_BACKEND}/greet");
                let (peer, ops) = HttpPeer::start_greet_only(&url, rev, &tool)
                    .await
                    .map_err(|e| format!("{MCP_PROXY} ({url}): {e}"))?;
                targets.push(Target {
                    label: MCP_PROXY,
                    peer: Peer::Http(peer),
                    ops,
                });
            }
            None => println!(
                "\n(mcp-proxy not found at {}: the shim / mcp-proxy comparison is skipped; \
                 scripts/bench.sh installs it, OVERHEAD_MCP_PROXY names another binary)",
                default_mcp_proxy().display()
            ),
        }
    }
    Ok(targets)
}

/// Where `scripts/bench.sh` installs mcp-proxy.
fn default_mcp_proxy() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".tools/mcp-proxy/bin/mcp-proxy")
}

/// The mcp-proxy binary to measure, if there is one.
fn mcp_proxy_binary() -> Option<std::path::PathBuf> {
    let path = std::env::var_os("OVERHEAD_MCP_PROXY")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(default_mcp_proxy);
    path.is_file().then_some(path)
}

async fn run(cfg: &Config) -> Result<Vec<Verdict>> {
    print_machine(cfg);
    let mut verdicts = Vec::new();
    for round in 1..=cfg.rounds {
        println!("\n# round {round} of {}", cfg.rounds);
        verdicts.extend(run_round(cfg).await?);
    }
    Ok(verdicts)
}

/// Every scenario once, each on process trees of its own.
async fn run_round(cfg: &Config) -> Result<Vec<Verdict>> {
    let mut verdicts = Vec::new();
    let stdio = [
        ("stdio pass-through (modern → modern)", Revision::Modern),
        (
            "stdio translating (legacy → shim → modern; relay/direct: legacy → legacy)",
            Revision::Legacy,
        ),
    ];
    // Per request, what the pass-through shim adds to the relay (µs).
    let mut hops = Hops::new();
    for (name, rev) in stdio {
        if !cfg.wants(name) {
            continue;
        }
        let mut targets = stdio_targets(cfg, rev).await?;
        verdicts.extend(measure(cfg, name, &mut targets, &mut hops).await?);
        for t in targets {
            if let Peer::Stdio(p) = t.peer {
                p.close().await;
            }
        }
    }
    let http = [
        (
            "HTTP pass-through (modern → modern)",
            HttpScenario::PassModern,
        ),
        (
            "HTTP translating (legacy → shim → modern; relay/direct: legacy → legacy)",
            HttpScenario::Translating,
        ),
        (
            "HTTP peer gateway (legacy → shim / mcp-proxy → legacy, pass-through)",
            HttpScenario::PeerGateway,
        ),
    ];
    if http.iter().any(|(name, _)| cfg.wants(name)) {
        let mut hops = Hops::new();
        for (name, scenario) in http {
            if !cfg.wants(name) {
                continue;
            }
            // Servers of its own too: behind servers the pass-through
            // scenario had used, the translating shim's `tools/call` read
            // 1.32–1.48× of relay26 where it reads 1.08× on fresh ones.
            let mut fleet = HttpFleet::default();
            let servers = http_servers(&mut fleet).await?;
            let mut targets = http_targets(cfg, &mut fleet, &servers, scenario).await?;
            verdicts.extend(measure(cfg, name, &mut targets, &mut hops).await?);
        }
    }
    Ok(verdicts)
}

fn print_machine(cfg: &Config) {
    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("model name")
                    .map(|m| m.trim_start_matches([' ', '\t', ':']).to_owned())
            })
        })
        .unwrap_or_else(|| "unknown CPU".into());
    println!("machine: {cpus} CPUs, {model}");
    println!(
        "rounds: {} (every process tree started afresh each round; verdict on the median ratio)",
        cfg.rounds
    );
    println!(
        "latency: {} sequential requests per target and request (batches of {}, after {} warm-up); \
         throughput: {} slices of {} ms, {} pipelined (stdio) / {} concurrent (HTTP)",
        cfg.requests,
        cfg.batch,
        cfg.warmup,
        cfg.slices,
        cfg.span.as_millis(),
        cfg.window,
        cfg.clients
    );
}

/// Per request, what the shim on its pass-through path adds to the relay
/// at p50 (µs), measured in this run's pass-through scenario.
type Hops = std::collections::HashMap<&'static str, f64>;

/// Measures both requests on all targets of one scenario and prints them.
/// A pass-through scenario records its hops; a translating one (it has
/// an upstream target) prints the ratio it could not go below.
async fn measure(
    cfg: &Config,
    name: &'static str,
    targets: &mut [Target],
    hops: &mut Hops,
) -> Result<Vec<Verdict>> {
    println!("\n## {name}\n");
    println!(
        "{:<11} {:<9} {:>9} {:>9} {:>10}",
        "request", "target", "p50 µs", "p99 µs", "req/s"
    );
    let mut verdicts = Vec::new();
    let scenario = name.split(" (").next().unwrap_or(name);
    for which in ["tools/call", "tasks/get"] {
        let pick = |ops: &Ops| match which {
            "tools/call" => Some(ops.greet.clone()),
            _ => ops.get.clone(),
        };
        // The targets that take part in this request, with their op.
        let active: Vec<(usize, client::Op)> = targets
            .iter()
            .enumerate()
            .filter_map(|(i, t)| pick(&t.ops).map(|op| (i, op)))
            .collect();
        let n = active.len();
        for (i, op) in &active {
            targets[*i]
                .peer
                .latency(op, cfg.warmup, &mut Vec::new())
                .await?;
        }
        let mut samples = vec![Vec::with_capacity(cfg.requests); n];
        let rounds = cfg.requests.div_ceil(cfg.batch);
        for r in 0..rounds {
            for k in 0..n {
                let j = (r + k) % n;
                let (i, op) = &active[j];
                targets[*i]
                    .peer
                    .latency(op, cfg.batch, &mut samples[j])
                    .await?;
            }
        }
        let mut rates = vec![Vec::new(); n];
        for r in 0..cfg.slices {
            for k in 0..n {
                let j = (r + k) % n;
                let (i, op) = &active[j];
                rates[j].push(targets[*i].peer.throughput(op, cfg).await?);
            }
        }
        let mut p50 = Vec::new();
        for (j, (i, _)) in active.iter().enumerate() {
            let s = &mut samples[j];
            s.sort_by(f64::total_cmp);
            let (a, b) = (percentile(s, 0.50), percentile(s, 0.99));
            p50.push(a);
            println!(
                "{:<11} {:<9} {:>9.1} {:>9.1} {:>10.0}",
                which,
                targets[*i].label,
                a,
                b,
                median(&mut rates[j])
            );
        }
        let at = |label: &str| {
            active
                .iter()
                .position(|(i, _)| targets[*i].label == label)
                .map(|j| p50[j])
        };
        if let (Some(shim), Some(relay), Some(direct)) = (at("shim"), at("relay"), at("direct")) {
            let ratio = shim / relay;
            let pass = ratio <= TARGET;
            println!(
                "{which}: p50 shim/relay {ratio:.2}× {} (target ≤ {TARGET:.2}×), shim/direct {:.2}×, relay/direct {:.2}×",
                if pass { "PASS" } else { "MISS" },
                shim / direct,
                relay / direct
            );
            let mut verdict = Verdict {
                scenario,
                request: which,
                base: "relay",
                target: TARGET,
                ratio,
                floor: None,
            };
            if let Some(upstream) = at(UPSTREAM) {
                // What the shim's upstream costs beyond the relay's: the
                // ratio above counts it against the shim.
                let gap = upstream - direct;
                println!(
                    "{which}: the shim adds {:.1} µs to the relay; {gap:+.1} µs of that is the 2026-07-28 \
                     server's own cost over the 2025-11-25 one ({UPSTREAM} − direct); net of it, shim/relay \
                     {:.2}× (not the verdict)",
                    shim - relay,
                    (shim - gap) / relay
                );
                if let Some(&hop) = hops.get(which) {
                    // Translation that cost nothing would still leave the
                    // hop any shim pays and the newer server's own cost.
                    let floor = (relay + hop.max(0.0) + gap.max(0.0)) / relay;
                    verdict.floor = Some(floor);
                    println!(
                        "{which}: floor: were translating free, the shim would still add the pass-through \
                         hop ({hop:+.1} µs in this run) and the server's cost ({gap:+.1} µs): shim/relay \
                         ≥ {floor:.2}×; translating itself adds {:.1} µs (not the verdict)",
                        shim - relay - hop.max(0.0) - gap.max(0.0)
                    );
                }
            } else {
                hops.insert(which, shim - relay);
            }
            verdicts.push(verdict);
        }
        // The shim against a base other than the relay: the relay to the
        // same 2026-07-28 server, the peer gateway.
        for (base, target) in [(RELAY26, TARGET), (MCP_PROXY, PEER_TARGET)] {
            if let (Some(shim), Some(b)) = (at("shim"), at(base)) {
                let ratio = shim / b;
                println!(
                    "{which}: p50 shim/{base} {ratio:.2}× {} (target ≤ {target:.2}×)",
                    if ratio <= target { "PASS" } else { "MISS" },
                );
                verdicts.push(Verdict {
                    scenario,
                    request: which,
                    base,
                    target,
                    ratio,
                    floor: None,
                });
            }
        }
    }
    Ok(verdicts)
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// The median, the mean of the middle two for an even count.
fn middle(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    percentile(v, 0.5)
}
