//! The bare relays: what any extra hop costs, with no MCP knowledge at all.
//!
//! Both run as separate processes (the bench binary re-executed with
//! `OVERHEAD_ROLE`), so the hop pays the same process boundaries as the
//! shim does.
//!
//! - **stdio**: spawns the server command and copies bytes both ways with
//!   two threads and plain blocking `read`/`write` (like `socat` or a shell
//!   pipe would), no framing, no parsing.
//! - **HTTP**: an nginx-style reverse proxy: method, path, headers (minus
//!   hop-by-hop ones) and body forwarded unchanged over pooled keep-alive
//!   connections; the response status, headers and body streamed back.
//!   `TCP_NODELAY` on accepted sockets, as nginx does by default.

use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::process::{Command, ExitCode, Stdio};
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderName, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::serve::ListenerExt;

/// Prefix of the line the HTTP relay prints once it listens.
pub(crate) const LISTENING: &str = "listening on ";

/// `OVERHEAD_ROLE=stdio-relay <bench> <server command…>`.
pub(crate) fn stdio_main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((program, rest)) = args.split_first() else {
        eprintln!("stdio relay: missing the server command");
        return ExitCode::FAILURE;
    };
    let mut child = match Command::new(program)
        .args(rest)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("stdio relay: cannot start {program}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let (Some(child_in), Some(child_out)) = (child.stdin.take(), child.stdout.take()) else {
        return ExitCode::FAILURE;
    };
    // Our stdout as a plain file: `std::io::Stdout` is line-buffered and
    // would add a copy; a relay writes what it read, as it read it.
    let out = match std::io::stdout().as_fd().try_clone_to_owned() {
        Ok(fd) => std::fs::File::from(fd),
        Err(e) => {
            eprintln!("stdio relay: {e}");
            return ExitCode::FAILURE;
        }
    };
    let down = std::thread::spawn(move || pump(child_out, out));
    // Client → server on this thread; at the client's EOF the child's stdin
    // is dropped, so the server sees its end of input and exits.
    let _ = pump(std::io::stdin().lock(), child_in);
    let _ = child.wait();
    let _ = down.join();
    ExitCode::SUCCESS
}

fn pump(mut from: impl Read, mut to: impl Write) -> std::io::Result<()> {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        to.write_all(&buf[..n])?;
    }
}

/// The HTTP relay's state: where to forward, and the pooled client.
struct Relay {
    /// `http://host:port` of the server (no path: the request's is kept).
    origin: String,
    client: reqwest::Client,
}

/// `OVERHEAD_ROLE=http-relay <bench> <upstream origin>`: listens on a free
/// loopback port and prints `listening on http://ADDR` on stdout.
pub(crate) fn http_main() -> ExitCode {
    let Some(origin) = std::env::args().nth(1) else {
        eprintln!("http relay: missing the upstream origin");
        return ExitCode::FAILURE;
    };
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("http relay: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(serve(origin)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("http relay: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(origin: String) -> std::io::Result<()> {
    let client = reqwest::Client::builder()
        .build()
        .map_err(std::io::Error::other)?;
    let relay = Arc::new(Relay {
        origin: origin.trim_end_matches('/').to_owned(),
        client,
    });
    let app = axum::Router::new().fallback(forward).with_state(relay);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    println!("overhead relay {LISTENING}http://{addr}");
    std::io::stdout().flush()?;
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, app).await
}

/// Connection-level headers a proxy must not forward (RFC 9110 §7.6.1);
/// `host` and `content-length` are set anew for the next hop.
fn hop_by_hop(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
    )
}

async fn forward(State(relay): State<Arc<Relay>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    // Request bodies are buffered before forwarding, as nginx does by default.
    let body = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(b) => b,
        Err(e) => return (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    };
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let mut up = relay
        .client
        .request(parts.method, format!("{}{path}", relay.origin));
    for (name, value) in &parts.headers {
        if !hop_by_hop(name) && name != header::HOST && name != header::CONTENT_LENGTH {
            up = up.header(name, value);
        }
    }
    let resp = match up.body(body).send().await {
        Ok(r) => r,
        Err(e) => return (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    };
    let mut out = Response::builder().status(resp.status());
    for (name, value) in resp.headers() {
        if !hop_by_hop(name) {
            out = out.header(name, value);
        }
    }
    // Streamed, so SSE answers flow event by event.
    out.body(Body::from_stream(resp.bytes_stream()))
        .unwrap_or_else(|e| (StatusCode::BAD_GATEWAY, e.to_string()).into_response())
}
