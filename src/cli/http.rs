//! `mcp-tasks-shim http --listen ADDR -- <upstream command> [args…]`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

mod tokens;

use std::time::Duration;

use super::options::{LISTENING, RECORDING, SESSIONS, ShimArgs, TIMEOUTS, UPSTREAM};
use crate::driver::http::{self, ConfiguredPrincipals, HttpOptions, ReloadablePrincipals};
use crate::driver::stdio::ProxyOptions;

/// Arguments of `http`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// An upstream reached over Streamable HTTP (either revision), instead
    /// of a command after `--`.
    #[arg(long, value_name = "URL", conflicts_with = "upstream", help_heading = UPSTREAM)]
    pub upstream_url: Option<String>,
    /// At start, wait up to this long (`30s`, `5m`) for the upstream: an
    /// --upstream-url server is asked again until it answers, a child that
    /// exits before its first probe is started again, and that probe may
    /// take this long.
    ///
    /// Meanwhile /healthz answers 200 and /readyz 503 with the reason; past
    /// it the shim exits with the last error [default: no wait: an upstream
    /// that cannot be reached or probed at once ends the start].
    #[arg(long, value_name = "DURATION", value_parser = super::options::duration,
          help_heading = UPSTREAM)]
    pub upstream_wait: Option<Duration>,
    /// Address to listen on: HOST:PORT, a host name (`localhost:8080`, resolved
    /// at start) or `:PORT`, which keeps the loopback address.
    ///
    /// Write `0.0.0.0:PORT` or `[::]:PORT` to accept other machines.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080", value_parser = parse_listen,
          help_heading = LISTENING)]
    pub listen: String,
    /// The MCP endpoint path.
    #[arg(long, default_value = http::DEFAULT_PATH, value_parser = parse_path,
          help_heading = LISTENING)]
    pub path: String,
    /// Largest accepted request body in bytes (larger: HTTP 413, at once
    /// when its Content-Length says so).
    #[arg(long, value_name = "BYTES", default_value_t = http::DEFAULT_MAX_BODY_BYTES as u64,
          value_parser = super::options::at_least_one, help_heading = LISTENING)]
    pub max_body_bytes: u64,
    /// Most client connections open at once; more are closed as they come.
    #[arg(long, value_name = "N", default_value_t = http::DEFAULT_MAX_CONNECTIONS,
          value_parser = super::options::at_least_one, help_heading = LISTENING)]
    pub max_connections: u64,
    /// Also serve /healthz, /readyz and /metrics on this address (for
    /// probes and scrapers kept off the MCP listener); same forms as --listen.
    #[arg(long, value_name = "ADDR", value_parser = parse_listen, help_heading = LISTENING)]
    pub admin_listen: Option<String>,
    /// Allow browser requests from this Origin (e.g. `https://app.example`);
    /// loopback origins are always allowed, others get 403.
    ///
    /// Repeatable.
    #[arg(long = "allow-origin", value_name = "ORIGIN", value_parser = parse_origin,
          help_heading = LISTENING)]
    pub allow_origin: Vec<String>,
    /// Serve a 2026-07-28 request that lacks the Mcp-Name header when its
    /// body names the task, tool, prompt or resource (some clients omit
    /// it on tasks/get), instead of -32020. A mismatched Mcp-Name is still
    /// refused. Counted in /metrics (mcp_shim_missing_mcp_name_total); the
    /// first of each principal logged at warn.
    #[arg(long, help_heading = LISTENING)]
    pub accept_missing_mcp_name: bool,
    /// A bearer token and the principal it stands for (TOKEN=PRINCIPAL).
    ///
    /// Repeatable. Visible to every local user in the process list: prefer
    /// --token-file, or MCP_SHIM_TOKENS="t1=alice,t2=bob" in the environment.
    #[arg(long = "token", value_name = "TOKEN=PRINCIPAL", value_parser = parse_token,
          help_heading = SESSIONS)]
    pub tokens: Vec<(String, String)>,
    /// A file of bearer tokens, one TOKEN=PRINCIPAL a line (`#` starts a
    /// comment line), read again on SIGHUP.
    ///
    /// Refused if group or others can access it (chmod 600).
    #[arg(long, value_name = "FILE", help_heading = SESSIONS)]
    pub token_file: Option<PathBuf>,
    /// Trust this header as the principal (set by an authenticating proxy).
    #[arg(long, value_name = "HEADER", value_parser = parse_header_name, help_heading = SESSIONS)]
    pub principal_header: Option<String>,
    /// Refuse legacy `tasks/list` from requests without a principal.
    #[arg(long, help_heading = SESSIONS)]
    pub require_principal: bool,
    /// Most 2025-11-25 sessions open at once; one more `initialize` gets
    /// HTTP 503.
    #[arg(long, value_name = "N", default_value_t = http::DEFAULT_MAX_SESSIONS,
          value_parser = super::options::at_least_one, help_heading = SESSIONS)]
    pub max_sessions: u64,
    /// Most of those sessions that have no principal (no --token, no
    /// --principal-header), so that anonymous clients cannot take every
    /// session from authenticated ones; one more anonymous `initialize`
    /// gets HTTP 503 [default: half of --max-sessions, or all of them when
    /// no caller can have a principal].
    #[arg(long, value_name = "N", value_parser = super::options::at_least_one,
          help_heading = SESSIONS)]
    pub max_anonymous_sessions: Option<u64>,
    /// Most of those sessions one principal may hold; one more of its
    /// `initialize`s gets HTTP 503 while other principals are still served
    /// [default: a tenth of --max-sessions].
    #[arg(long, value_name = "N", value_parser = super::options::at_least_one,
          help_heading = SESSIONS)]
    pub max_sessions_per_principal: Option<u64>,
    /// Bridge options.
    #[command(flatten)]
    pub shim: ShimArgs,
    /// End a 2025-11-25 session after this long with no request being
    /// answered and no stream open, as if the client had sent DELETE (its
    /// later requests get 404, and it initializes again). 0: never.
    #[arg(long, value_name = "DURATION", default_value = "30m",
          value_parser = super::options::duration, help_heading = TIMEOUTS)]
    pub session_idle_timeout: Duration,
    /// How long a client may take to send a request's headers, and then
    /// its body; a slower one is disconnected (headers) or answered 408
    /// (body). A keep-alive connection idle this long is closed.
    #[arg(long, value_name = "DURATION", default_value = "30s",
          value_parser = super::options::positive_millis, help_heading = TIMEOUTS)]
    pub read_timeout: Duration,
    /// Append every message between clients and the shim, both ways, to
    /// FILE as a JSONL transcript (the input format of `translate`), each
    /// line labelled with its session (`session-1`, `session-2`… in order
    /// of appearance; never a session id or token).
    #[arg(long, value_name = "FILE", help_heading = RECORDING)]
    pub record: Option<PathBuf>,
    /// Append every message between the shim and its upstream, both ways,
    /// to FILE in the same format (`c2s`: shim→upstream), labelled by
    /// upstream session: `session-1`… for a 2025-11-25 HTTP upstream's or
    /// a relayed session's process, `upstream` for a stateless 2026-07-28
    /// URL, `upstream-1` for a child process.
    #[arg(long, value_name = "FILE", help_heading = RECORDING)]
    pub record_upstream: Option<PathBuf>,
    /// The upstream server command and its arguments (after `--`).
    // One of the two is needed; `run` checks, so that its message names both.
    #[arg(last = true, value_name = "UPSTREAM")]
    pub upstream: Vec<String>,
}

/// `--listen`'s forms, checked when the arguments are read: a host (or
/// none) and a port. The host is resolved in [`resolve_listen`], at start.
fn parse_listen(s: &str) -> Result<String, String> {
    let bad = |why: &str| {
        format!("{why}: write HOST:PORT (127.0.0.1:8080, localhost:8080, [::1]:8080) or :PORT")
    };
    let (host, port) = s.rsplit_once(':').ok_or_else(|| match s.parse::<u16>() {
        Ok(_) => bad(&format!("a port alone is written :{s}")),
        Err(_) => bad("no port"),
    })?;
    port.parse::<u16>()
        .map_err(|_| bad(&format!("{port:?} is not a port")))?;
    if host.contains(':') && !(host.starts_with('[') && host.ends_with(']')) {
        return Err(bad("an IPv6 address goes in brackets"));
    }
    Ok(s.to_owned())
}

/// The address to bind for a `--listen` value: `:PORT` on loopback (the
/// default's host: listening on every interface is written out), a host
/// name resolved now, its first address taken.
pub(crate) fn resolve_listen(flag: &str, s: &str) -> Result<SocketAddr, String> {
    use std::net::ToSocketAddrs;
    let spelled = match s.strip_prefix(':') {
        Some(port) => format!("127.0.0.1:{port}"),
        None => s.to_owned(),
    };
    let mut addrs = spelled
        .to_socket_addrs()
        .map_err(|e| format!("{flag} {s}: cannot resolve the host: {e}"))?;
    let first = addrs
        .next()
        .ok_or_else(|| format!("{flag} {s}: the host has no address"))?;
    if addrs.next().is_some() {
        tracing::info!(%first, "{flag} {s} has several addresses: listening on the first");
    }
    Ok(first)
}

/// First pause between two attempts to reach the upstream at start;
/// doubled after each, up to [`WAIT_BACKOFF_MAX`].
const WAIT_BACKOFF_START: std::time::Duration = std::time::Duration::from_millis(100);
/// Longest pause between two attempts.
const WAIT_BACKOFF_MAX: std::time::Duration = std::time::Duration::from_secs(2);

/// Reaches and probes the upstream, within `--upstream-wait` if given
/// (each setback reported to `startup`, which `/readyz` shows), else at
/// the first attempt as before.
async fn connect_upstream(
    url: Option<String>,
    command: Vec<String>,
    proxy: crate::driver::stdio::ProxyOptions,
    wait: Option<std::time::Duration>,
    record: Option<crate::transport::record::Recorder>,
    startup: http::Startup,
) -> Result<crate::upstream::Link, String> {
    let deadline = wait.map(|w| tokio::time::Instant::now() + w);
    let mut pause = WAIT_BACKOFF_START;
    let mut attempt = 0u32;
    loop {
        attempt += 1;
        let left = deadline.map(|d| d.saturating_duration_since(tokio::time::Instant::now()));
        let tried: Result<crate::upstream::Link, String> = match &url {
            Some(url) => {
                let connect = crate::upstream::http::connect_recorded(
                    url,
                    proxy.request_timeout,
                    record.clone(),
                );
                // A server that accepts and never answers must not hold
                // the start past the wait.
                let answered = match left {
                    Some(left) => tokio::time::timeout(left, connect)
                        .await
                        .unwrap_or_else(|_| {
                            Err(crate::error::ShimError::Upstream(format!(
                                "cannot probe {url}: no answer"
                            )))
                        }),
                    None => connect.await,
                };
                answered
                    .map(|link| {
                        if let Some(every) = proxy.ping_interval {
                            link.upstream.watch_liveness(every, proxy.ping_timeout);
                        }
                        link.into()
                    })
                    .map_err(|e| e.to_string())
            }
            None => {
                let (program, rest) = command
                    .split_first()
                    .ok_or("missing upstream command after -- (or --upstream-url)")?;
                let first_probe = left.map_or(proxy.probe_timeout, |l| l.max(proxy.probe_timeout));
                let supervise = crate::upstream::supervised::SuperviseOptions {
                    record: record.clone(),
                    ..proxy.supervise()
                };
                crate::upstream::supervised::connect_within(program, rest, supervise, first_probe)
                    .await
                    .map(Into::into)
                    .map_err(|e| e.to_string())
            }
        };
        let e = match tried {
            Ok(link) => return Ok(link),
            Err(e) => e,
        };
        let Some(deadline) = deadline else {
            return Err(format!(
                "{e} (or give it time with --upstream-wait DURATION, e.g. --upstream-wait 30s)"
            ));
        };
        let now = tokio::time::Instant::now();
        if now >= deadline {
            let waited = humantime::format_duration(wait.unwrap_or_default());
            return Err(format!(
                "{e}; still not ready after --upstream-wait {waited} ({attempt} attempts)"
            ));
        }
        tracing::warn!(error = %e, attempt, "upstream not ready yet; trying again (--upstream-wait)");
        startup.report(e);
        tokio::time::sleep(pause.min(deadline - now)).await;
        pause = (pause * 2).min(WAIT_BACKOFF_MAX);
    }
}

/// An endpoint path the router can serve, and not the metrics path.
fn parse_path(s: &str) -> Result<String, String> {
    http::check_path(s)?;
    if s == http::METRICS_PATH {
        return Err("/metrics is where the shim serves its metrics".into());
    }
    if s == http::HEALTHZ_PATH || s == http::READYZ_PATH {
        return Err(format!("{s} is where the shim serves its health checks"));
    }
    Ok(s.to_owned())
}

/// The tokens of every source but the file, and the file's (`None`
/// without --token-file), checked together.
fn all_tokens(
    fixed: &[(String, String)],
    file: Option<&std::path::Path>,
) -> Result<std::collections::HashMap<String, String>, tokens::TokenError> {
    let from_file = match file {
        Some(path) => tokens::read_file(path)?,
        None => Vec::new(),
    };
    tokens::merge([
        ("--token (or MCP_SHIM_TOKENS)", fixed),
        ("--token-file", &from_file[..]),
    ])
}

/// Reads the token file again on each SIGHUP; a file that cannot be used
/// (unreadable, exposed, malformed) leaves the tokens in force as they were.
#[cfg(unix)]
fn reload_on_hangup(
    resolver: Arc<ReloadablePrincipals>,
    fixed: Vec<(String, String)>,
    path: PathBuf,
) -> Result<(), String> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut hangups = signal(SignalKind::hangup()).map_err(|e| format!("SIGHUP: {e}"))?;
    tokio::spawn(async move {
        while hangups.recv().await.is_some() {
            match all_tokens(&fixed, Some(&path)) {
                Ok(map) => {
                    tracing::info!(tokens = map.len(), file = %path.display(), "token file reloaded");
                    resolver.replace_tokens(map);
                }
                Err(e) => {
                    tracing::error!(error = %e, "token file not reloaded; the tokens in force stay");
                }
            }
        }
    });
    Ok(())
}

/// A name a request header can have (a header named otherwise would never
/// be seen, and every caller would be anonymous).
fn parse_header_name(s: &str) -> Result<String, String> {
    axum::http::HeaderName::from_bytes(s.as_bytes())
        .map(|h| h.as_str().to_owned())
        .map_err(|_| format!("{s:?} is not an HTTP header name"))
}

/// An origin as browsers send it: `scheme://host[:port]`, nothing after.
fn parse_origin(s: &str) -> Result<String, String> {
    let bad = || format!("{s:?} is not an origin (scheme://host[:port], e.g. https://app.example)");
    let uri: axum::http::Uri = s.parse().map_err(|_| bad())?;
    let bare = uri.scheme().is_some()
        && uri.authority().is_some()
        && uri.query().is_none()
        && !s.ends_with('/')
        && uri.path() == "/";
    if bare { Ok(s.to_owned()) } else { Err(bad()) }
}

/// Who a caller is, for the start-up summary: how many tokens (never
/// the tokens), the trusted header, or nobody.
fn principal_mode(tokens: usize, trusted_header: Option<&str>) -> String {
    let mut modes = Vec::new();
    if tokens > 0 {
        modes.push(format!("bearer tokens ({tokens})"));
    }
    if let Some(header) = trusted_header {
        modes.push(format!("trusted header {header}"));
    }
    if modes.is_empty() {
        "anonymous (no --token, no --principal-header)".to_owned()
    } else {
        modes.join(" and ")
    }
}

/// One TOKEN=PRINCIPAL (of `--token`, or of the comma-separated
/// MCP_SHIM_TOKENS). Never echoes the value: it holds a secret.
fn parse_token(s: &str) -> Result<(String, String), String> {
    match s.trim().split_once('=') {
        Some((t, p)) if !t.trim().is_empty() && !p.trim().is_empty() => {
            Ok((t.trim().to_owned(), p.trim().to_owned()))
        }
        _ => Err("expected TOKEN=PRINCIPAL".to_owned()),
    }
}

pub(crate) fn run(args: Args) -> Result<(), String> {
    if args.upstream.is_empty() && args.upstream_url.is_none() {
        return Err(
            "http needs an upstream: a server command after `--` (mcp-tasks-shim http -- path/to/server), or --upstream-url http://HOST:PORT/mcp"
                .into(),
        );
    }
    let tokens = all_tokens(&args.tokens, args.token_file.as_deref()).map_err(|e| e.to_string())?;
    let token_count = tokens.len();
    let proxy = args.shim.proxy_options()?;
    let opts = http_options(&args, &proxy, !tokens.is_empty())?;
    let resolver = Arc::new(ReloadablePrincipals::new(
        ConfiguredPrincipals {
            tokens,
            trusted_header: args.principal_header.clone(),
        },
        args.token_file.is_some(),
    ));
    let rt = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    let ledger = rt.block_on(args.shim.open_ledger())?;
    rt.block_on(serve(args, opts, proxy, resolver, ledger, token_count))
}

/// The HTTP front's options from the flags (recorders are opened later,
/// inside the runtime).
fn http_options(
    args: &Args,
    proxy: &ProxyOptions,
    has_tokens: bool,
) -> Result<HttpOptions, String> {
    // A token file may be empty now and filled before the next SIGHUP.
    let tokens_configured = has_tokens || args.token_file.is_some();
    if args.require_principal && !tokens_configured && args.principal_header.is_none() {
        return Err(
            "--require-principal needs --token, --token-file or --principal-header: without them no caller has a principal"
                .into(),
        );
    }
    let anyone_has_a_principal = tokens_configured || args.principal_header.is_some();
    let max_sessions = usize::try_from(args.max_sessions).unwrap_or(usize::MAX);
    let count = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
    // With no way to have a principal every session is anonymous: halving
    // them would protect nobody.
    let max_anonymous_sessions = args
        .max_anonymous_sessions
        .map(count)
        .or((!anyone_has_a_principal).then_some(max_sessions));
    let admin_listen = args
        .admin_listen
        .as_deref()
        .map(|a| resolve_listen("--admin-listen", a))
        .transpose()?;
    Ok(HttpOptions {
        listen: resolve_listen("--listen", &args.listen)?,
        path: args.path.clone(),
        max_body_bytes: usize::try_from(args.max_body_bytes).unwrap_or(usize::MAX),
        require_principal: args.require_principal,
        allowed_origins: args.allow_origin.clone(),
        session_idle_timeout: (!args.session_idle_timeout.is_zero())
            .then_some(args.session_idle_timeout),
        max_sessions,
        max_anonymous_sessions,
        max_sessions_per_principal: args.max_sessions_per_principal.map(count),
        accept_missing_mcp_name: args.accept_missing_mcp_name,
        admin_listen,
        read_timeout: args.read_timeout,
        max_connections: usize::try_from(args.max_connections).unwrap_or(usize::MAX),
        bridge: proxy.bridge.clone(),
        legacy_relay: legacy_relay(args, proxy)?,
        record: None,
        record_upstream: None,
    })
}

/// Where 2025-11-25 HTTP sessions get an upstream of their own when the
/// upstream speaks 2025-11-25 too (ignored when it turns out 2026-07-28):
/// a process each from the upstream's command, a session each on its URL.
fn legacy_relay(args: &Args, proxy: &ProxyOptions) -> Result<Option<http::LegacyRelay>, String> {
    if let Some((program, rest)) = args.upstream.split_first() {
        return Ok(Some(http::LegacyRelay::Process(http::RelayCommand {
            program: program.clone(),
            args: rest.to_vec(),
        })));
    }
    let Some(url) = &args.upstream_url else {
        return Ok(None);
    };
    let relay = crate::upstream::http::LegacyHttpRelay::new(url, proxy.request_timeout)
        .map_err(|e| e.to_string())?;
    Ok(Some(http::LegacyRelay::Url(relay)))
}

/// Serves until SIGINT/SIGTERM, then lets the transcripts finish.
async fn serve(
    args: Args,
    mut opts: HttpOptions,
    proxy: ProxyOptions,
    resolver: Arc<ReloadablePrincipals>,
    ledger: Arc<dyn crate::ledger::TaskLedger>,
    token_count: usize,
) -> Result<(), String> {
    // Installed before the server announces its address, so that a
    // SIGHUP sent once "listening on" appears reloads, not kills.
    #[cfg(unix)]
    if let Some(path) = args.token_file.clone() {
        reload_on_hangup(resolver.clone(), args.tokens.clone(), path)?;
    }
    let open = |path: &std::path::Path, flag| {
        crate::transport::record::Recorder::open(path, flag).map_err(|e| e.to_string())
    };
    let upstream_recorder = match &args.record_upstream {
        Some(path) => Some(open(path, "--record-upstream")?.0),
        None => None,
    };
    opts.record_upstream = upstream_recorder.clone();
    if let Some(url) = &args.upstream_url {
        crate::upstream::http::check_url(url).map_err(|e| e.to_string())?;
    }
    let startup = http::Startup::default();
    let principals = principal_mode(token_count, args.principal_header.as_deref());
    let bridge = proxy.bridge.clone();
    let connect = connect_upstream(
        args.upstream_url.clone(),
        args.upstream.clone(),
        proxy,
        args.upstream_wait,
        upstream_recorder.clone(),
        startup.clone(),
    );
    // The summary once the upstream is probed, as before.
    let connect = async move {
        let link = connect.await?;
        tokio::spawn(crate::bridge::summary::log_startup_summary(
            link.upstream.clone(),
            link.discover.clone(),
            bridge,
            principals,
        ));
        Ok(link)
    };
    let writer = match &args.record {
        Some(path) => {
            let (rec, task) = open(path, "--record")?;
            opts.record = Some(rec);
            Some(task)
        }
        None => None,
    };
    let served =
        http::serve_connecting(opts, connect, startup, ledger, resolver, shutdown_signal())
            .await
            .map_err(|e| e.to_string());
    // The writer ends once the front's last handle on it is gone; a
    // stream still held open past shutdown must not keep the process.
    if let Some(task) = writer {
        let _ = tokio::time::timeout(std::time::Duration::from_secs(2), task).await;
    }
    // The upstream holds clones of this one for as long as it lives.
    if let Some(rec) = upstream_recorder {
        let _ = tokio::time::timeout(std::time::Duration::from_secs(2), rec.flushed()).await;
    }
    served
}

/// SIGINT or SIGTERM. The handlers are installed here, before the server
/// announces its address, not when the future is first polled: a SIGTERM
/// sent as soon as "listening on" appears must still shut down cleanly
/// (it used to hit the default action and kill the process).
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let term = signal(SignalKind::terminate());
        let int = signal(SignalKind::interrupt());
        async move {
            match (term, int) {
                (Ok(mut term), Ok(mut int)) => {
                    tokio::select! {
                        _ = term.recv() => {}
                        _ = int.recv() => {}
                    }
                }
                _ => tokio::signal::ctrl_c().await.unwrap_or(()),
            }
        }
    }
    #[cfg(not(unix))]
    async {
        let _ = tokio::signal::ctrl_c().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        http: Args,
    }

    fn parse(flags: &[&str]) -> Result<Args, String> {
        let argv = ["x"].iter().chain(flags).chain(&["--", "server"]);
        Cli::try_parse_from(argv)
            .map(|c| c.http)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn values_that_could_never_work_are_refused_at_start() {
        for flags in [
            &["--max-body-bytes", "0"][..],
            &["--principal-header", "bad header"],
            &["--allow-origin", "not an origin"],
            &["--allow-origin", "https://app.example/path"],
            &["--allow-origin", "https://app.example/"],
        ] {
            assert!(parse(flags).is_err(), "{flags:?} was accepted");
        }
        let a = parse(&[
            "--principal-header",
            "X-User",
            "--allow-origin",
            "https://app.example",
            "--allow-origin",
            "http://localhost:3000",
        ])
        .unwrap();
        assert_eq!(a.principal_header.as_deref(), Some("x-user"));
        assert_eq!(a.allow_origin.len(), 2);
        // Nobody could have a principal: every tasks/list would be refused.
        let e = run(parse(&["--require-principal"]).unwrap()).unwrap_err();
        assert!(e.contains("--token-file or --principal-header"), "{e}");
    }

    #[test]
    fn the_principal_mode_counts_tokens_and_names_the_header() {
        assert!(principal_mode(0, None).starts_with("anonymous"));
        assert_eq!(principal_mode(3, None), "bearer tokens (3)");
        assert_eq!(principal_mode(0, Some("x-user")), "trusted header x-user");
    }

    #[test]
    fn a_token_given_twice_is_refused_without_showing_it() {
        let a = parse(&["--token", "s3cret=alice", "--token", "s3cret=bob"]).unwrap();
        let e = run(a).unwrap_err();
        assert!(e.contains("given twice"), "{e}");
        assert!(!e.contains("s3cret"), "the token leaked: {e}");
        let a = parse(&["--token", "one=alice", "--token", "two=alice"]).unwrap();
        assert_eq!(all_tokens(&a.tokens, None).unwrap().len(), 2);
    }
}
