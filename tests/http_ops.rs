//! Operating `mcp-tasks-shim http` (the real binary over loopback HTTP):
//! `/healthz` and `/readyz` as the upstream child dies and comes back, the
//! admin listener, and bearer tokens from a file reloaded on SIGHUP.
//!
//! Every JSON-RPC body the shim answers is validated against the schema of
//! its revision.

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use support::http::{
    HttpReference, HttpShim, LEGACY, STEP, alive, children_of, client, legacy, rpc, send,
};
use support::poll;
use support::schema::{Revision, assert_valid};
use support::wire::{modern_reference, shim_bin, temp_path};
use wait_timeout::ChildExt;

/// Failure guard of every polling loop: far above what a busy 2-core
/// machine needs (restart backoff included), never a timing assertion.
const GUARD: Duration = Duration::from_secs(60);

/// `GET url`: status and JSON body.
async fn get(c: &reqwest::Client, url: &str) -> (StatusCode, Value) {
    let resp = tokio::time::timeout(STEP, c.get(url).send())
        .await
        .expect("timed out")
        .expect("GET failed");
    let status = resp.status();
    let text = resp.text().await.expect("read body");
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// Polls `GET url` until its status is `want`; returns the body then.
async fn until_status(c: &reqwest::Client, url: &str, want: StatusCode) -> Value {
    let what = format!("{url} to answer {want}");
    poll::until_async(&what, GUARD, || async move {
        let (status, body) = get(c, url).await;
        (status == want).then_some(body)
    })
    .await
}

/// A legacy `initialize`, optionally with a bearer token.
async fn legacy_initialize(
    c: &reqwest::Client,
    url: &str,
    token: Option<&str>,
) -> (StatusCode, Value, reqwest::header::HeaderMap) {
    let body = rpc(
        0,
        "initialize",
        json!({
            "protocolVersion": LEGACY,
            "capabilities": {},
            "clientInfo": {"name": "ops-test", "version": "0"},
        }),
    );
    let mut req = legacy(c, url, None, &body);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    send(req).await
}

/// The only live child of the shim: its upstream (a failed restart
/// attempt may linger as a zombie until it is reaped).
fn upstream_pid(shim: &HttpShim) -> u32 {
    poll::until("a single upstream child", GUARD, || {
        let live: Vec<u32> = children_of(shim.pid())
            .into_iter()
            .filter(|p| alive(*p))
            .collect();
        if let [pid] = live[..] {
            Some(pid)
        } else {
            None
        }
    })
}

fn kill(signal: &str, pid: u32) {
    let ok = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .expect("run kill")
        .success();
    assert!(ok, "kill {signal} {pid} failed");
}

/// The value of the unlabelled series `name` on `/metrics`.
async fn metric(c: &reqwest::Client, base: &str, name: &str) -> f64 {
    let resp = tokio::time::timeout(STEP, c.get(format!("{base}/metrics")).send())
        .await
        .expect("/metrics in time")
        .expect("/metrics answers");
    let text = resp.text().await.expect("/metrics body");
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("/metrics has no {name}:\n{text}"))
}

/// Polls `metric` until `ok` holds of it; returns it then.
async fn until_metric(
    c: &reqwest::Client,
    base: &str,
    name: &str,
    ok: impl Fn(f64) -> bool,
) -> f64 {
    let ok = &ok;
    poll::until_async(name, GUARD, || async move {
        let v = metric(c, base, name).await;
        ok(v).then_some(v)
    })
    .await
}

/// The upstream command, run only while `gate` exists: with it removed a
/// restart fails (and is retried with backoff) until it is back, so the
/// shim stays "restarting" for as long as the test needs.
fn gated_reference(gate: &Path) -> Vec<String> {
    let mut cmd = vec![
        "sh".to_owned(),
        "-c".to_owned(),
        format!("test -e '{}' && exec \"$@\"", gate.display()),
        "sh".to_owned(),
    ];
    cmd.extend(modern_reference());
    cmd
}

/// Waits (bounded) until a line of the shim's log contains `needle`.
async fn until_logged(shim: &HttpShim, needle: &str) {
    let seen = shim.wait_logged(needle, GUARD).await;
    assert!(!seen.is_empty(), "never logged {needle:?}");
}

/// A port nothing listens on (bound, then released).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// The upstream command, started only once `gate` exists: until then the
/// child is running but says nothing, so its first probe waits.
fn reference_after(gate: &Path) -> Vec<String> {
    let mut cmd = vec![
        "sh".to_owned(),
        "-c".to_owned(),
        format!(
            "while ! test -e '{}'; do sleep 0.02; done; exec \"$@\"",
            gate.display()
        ),
        "sh".to_owned(),
    ];
    cmd.extend(modern_reference());
    cmd
}

/// The port opens before the upstream answers its probe: a load balancer
/// sees 200 on /healthz and 503 on /readyz (with why), and an MCP request
/// gets 503 with a JSON-RPC error rather than a refused connection.
#[test]
fn readyz_answers_503_before_the_first_probe_and_200_after() {
    support::http::block_on(async {
        let gate = temp_path("slow-start-gate");
        let shim =
            HttpShim::spawn_starting(&["--probe-timeout-ms", "60000"], &reference_after(&gate));
        let c = client();
        let (status, body) = get(&c, &format!("{}/healthz", shim.base)).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let readyz = format!("{}/readyz", shim.base);
        let (status, body) = get(&c, &readyz).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
        assert_eq!(body["ready"], false, "{body}");
        assert_eq!(body["upstream"], "starting", "{body}");
        assert!(
            body["reason"]
                .as_str()
                .is_some_and(|r| r.contains("not been probed")),
            "{body}"
        );
        let (status, body, headers) = legacy_initialize(&c, &shim.url, None).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
        assert_valid(Revision::Legacy, &body, None);
        assert_eq!(body["id"], 0, "the request's id: {body}");
        assert_eq!(body["error"]["code"], -32603, "{body}");
        assert!(headers.get("retry-after").is_some(), "{headers:?}");
        assert!(
            shim.logged("listening on").is_empty(),
            "announced too early"
        );

        std::fs::write(&gate, "").unwrap();
        let body = until_status(&c, &readyz, StatusCode::OK).await;
        assert_eq!(body["upstream"], "up", "{body}");
        until_logged(&shim, "listening on").await;
        let (status, body, _) = legacy_initialize(&c, &shim.url, None).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_valid(Revision::Legacy, &body, Some("initialize"));
        assert!(body["result"].is_object(), "{body}");
        let _ = std::fs::remove_file(&gate);
    });
}

/// `--upstream-url` with nothing behind it: with `--upstream-wait` the
/// shim waits (503 naming why), serves once a server appears there, and
/// /readyz follows that server going away again (it used to say "up" for
/// any HTTP upstream).
#[test]
fn an_http_upstream_is_waited_for_and_readyz_follows_it() {
    support::http::block_on(async {
        let addr: std::net::SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let url = format!("http://{addr}/mcp");
        let shim = HttpShim::spawn_starting(
            &["--upstream-url", &url, "--upstream-wait", "5m"],
            &[] as &[&str],
        );
        let c = client();
        let readyz = format!("{}/readyz", shim.base);
        // The first reason is "not probed yet"; the first refused attempt
        // replaces it.
        let (c, ready_url) = (&c, readyz.as_str());
        let body = poll::until_async("an unreachable reason", GUARD, || async move {
            let (status, body) = get(c, ready_url).await;
            assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
            body["reason"]
                .as_str()
                .is_some_and(|r| r.contains("unreachable"))
                .then_some(body)
        })
        .await;
        assert_eq!(body["ready"], false, "{body}");

        let server = HttpReference::start_at("2026-07-28", &[], addr);
        let body = until_status(c, &readyz, StatusCode::OK).await;
        assert_eq!(body["upstream"], "up", "{body}");
        until_logged(&shim, "listening on").await;

        drop(server);
        let body = until_status(c, &readyz, StatusCode::SERVICE_UNAVAILABLE).await;
        assert_eq!(body["upstream"], "down", "{body}");
        assert!(
            body["reason"]
                .as_str()
                .is_some_and(|r| r.contains("unreachable")),
            "{body}"
        );
        let _server = HttpReference::start_at("2026-07-28", &[], addr);
        until_status(c, &readyz, StatusCode::OK).await;
    });
}

/// Past `--upstream-wait` the shim gives up, naming the flag.
#[test]
fn an_upstream_that_never_comes_ends_the_wait_with_an_error() {
    let url = format!("http://127.0.0.1:{}/mcp", free_port());
    let mut child = Command::new(shim_bin())
        .args(["http", "--listen", "127.0.0.1:0", "--upstream-url", &url])
        .args(["--upstream-wait", "300ms"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the shim");
    let Some(status) = child.wait_timeout(GUARD).unwrap() else {
        let _ = child.kill();
        panic!("the shim still waits past --upstream-wait");
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("--upstream-wait 300ms"), "{stderr}");
    assert!(stderr.contains(&url), "names the upstream: {stderr}");
    assert!(!stderr.contains("listening on"), "{stderr}");
}

#[test]
fn readyz_follows_the_upstream_down_and_back_up_again() {
    support::http::block_on(async {
        let gate = temp_path("upstream-gate");
        std::fs::write(&gate, "").unwrap();
        let shim = HttpShim::spawn(&["--restart-upstream"], &gated_reference(&gate));
        let c = client();
        let (status, body) = get(&c, &format!("{}/healthz", shim.base)).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let readyz = format!("{}/readyz", shim.base);
        let body = until_status(&c, &readyz, StatusCode::OK).await;
        assert_eq!(body["ready"], true, "{body}");
        assert_eq!(body["upstream"], "up", "{body}");
        assert_eq!(metric(&c, &shim.base, "mcp_shim_upstream_up").await, 1.0);
        let restarts = "mcp_shim_upstream_restarts_total";
        assert_eq!(metric(&c, &shim.base, restarts).await, 0.0);

        std::fs::remove_file(&gate).unwrap();
        let first = upstream_pid(&shim);
        kill("-KILL", first);
        let body = until_status(&c, &readyz, StatusCode::SERVICE_UNAVAILABLE).await;
        assert_eq!(body["ready"], false, "{body}");
        assert_eq!(body["upstream"], "restarting", "{body}");
        assert!(body["reason"].is_string(), "{body}");
        // A session opened now would answer from the cached handshake and
        // fail on its first request: it is refused instead.
        let (status, body, headers) = legacy_initialize(&c, &shim.url, None).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_valid(Revision::Legacy, &body, Some("initialize"));
        assert_eq!(body["error"]["code"], -32603, "{body}");
        let msg = body["error"]["message"].as_str().unwrap_or_default();
        assert!(msg.contains("restarting"), "{msg}");
        assert!(headers.get("mcp-session-id").is_none(), "no session");
        // /metrics says it too, and counts the successors that failed to
        // start while the gate was gone.
        assert_eq!(metric(&c, &shim.base, "mcp_shim_upstream_up").await, 0.0);
        let failures = "mcp_shim_upstream_probe_failures_total";
        until_metric(&c, &shim.base, failures, |v| v >= 1.0).await;

        std::fs::write(&gate, "").unwrap();
        let body = until_status(&c, &readyz, StatusCode::OK).await;
        assert_eq!(body["upstream"], "up", "{body}");
        assert_eq!(metric(&c, &shim.base, "mcp_shim_upstream_up").await, 1.0);
        assert_eq!(metric(&c, &shim.base, restarts).await, 1.0);
        assert_ne!(upstream_pid(&shim), first, "a successor serves");
        let (status, body, _) = legacy_initialize(&c, &shim.url, None).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_valid(Revision::Legacy, &body, Some("initialize"));
        assert!(body["result"].is_object(), "{body}");
        let _ = std::fs::remove_file(&gate);
    });
}

/// Without `--restart-upstream` a killed upstream is down for good: an
/// `initialize` used to answer 200 from the cached handshake.
#[test]
fn a_legacy_initialize_with_the_upstream_down_is_an_error() {
    support::http::block_on(async {
        let shim = HttpShim::spawn(&[] as &[&str], &modern_reference());
        let c = client();
        let readyz = format!("{}/readyz", shim.base);
        until_status(&c, &readyz, StatusCode::OK).await;
        kill("-KILL", upstream_pid(&shim));
        let body = until_status(&c, &readyz, StatusCode::SERVICE_UNAVAILABLE).await;
        assert_eq!(body["upstream"], "down", "{body}");
        assert!(
            body["reason"]
                .as_str()
                .is_some_and(|r| r.contains("not restarted")),
            "{body}"
        );
        let (status, body, headers) = legacy_initialize(&c, &shim.url, None).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_valid(Revision::Legacy, &body, Some("initialize"));
        assert_eq!(body["error"]["code"], -32603, "{body}");
        let msg = body["error"]["message"].as_str().unwrap_or_default();
        assert!(msg.contains("the upstream is down"), "{msg}");
        assert!(headers.get("mcp-session-id").is_none(), "no session");
        // The process itself is still alive.
        let (status, _) = get(&c, &format!("{}/healthz", shim.base)).await;
        assert_eq!(status, StatusCode::OK);
    });
}

#[test]
fn the_admin_listener_serves_readiness_and_metrics_only() {
    support::http::block_on(async {
        let shim = HttpShim::spawn(&["--admin-listen", "127.0.0.1:0"], &modern_reference());
        let line = shim.wait_logged("admin endpoints on ", GUARD).await;
        let admin = line
            .first()
            .and_then(|l| {
                l.split("admin endpoints on ")
                    .nth(1)?
                    .split_whitespace()
                    .next()
            })
            .expect("the admin address on stderr")
            .to_owned();
        assert_ne!(admin, shim.base, "a listener of its own");
        let c = client();
        let body = until_status(&c, &format!("{admin}/readyz"), StatusCode::OK).await;
        assert_eq!(body["ready"], true, "{body}");
        let (status, _) = get(&c, &format!("{admin}/healthz")).await;
        assert_eq!(status, StatusCode::OK);
        let metrics = c.get(format!("{admin}/metrics")).send().await.unwrap();
        assert_eq!(metrics.status(), StatusCode::OK);
        assert!(metrics.text().await.unwrap().contains("mcp_shim_"));
        let (status, _) = get(&c, &format!("{admin}/mcp")).await;
        assert_eq!(
            status,
            StatusCode::NOT_FOUND,
            "no MCP on the admin listener"
        );
    });
}

fn write_private(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

#[test]
fn the_token_file_is_read_again_on_sighup() {
    support::http::block_on(async {
        let file = temp_path("tokens");
        write_private(&file, "# operators\nfirst-token=alice\n");
        let shim = HttpShim::spawn(
            &["--token-file", file.to_str().unwrap()],
            &modern_reference(),
        );
        let c = client();
        let (status, body, _) = legacy_initialize(&c, &shim.url, Some("first-token")).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_valid(Revision::Legacy, &body, Some("initialize"));
        let (status, body, _) = legacy_initialize(&c, &shim.url, Some("second-token")).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "not yet: {body}");
        assert_valid(Revision::Legacy, &body, None);

        write_private(&file, "second-token=bob\n");
        kill("-HUP", shim.pid());
        // At --log warn nothing tells of the reload: the token's answer is
        // all there is to watch.
        let (c, url) = (&c, shim.url.as_str());
        let body = poll::until_async("the new token to work", GUARD, || async move {
            let (status, body, _) = legacy_initialize(c, url, Some("second-token")).await;
            if status == StatusCode::OK {
                return Some(body);
            }
            assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
            None
        })
        .await;
        assert_valid(Revision::Legacy, &body, Some("initialize"));
        let (status, body, _) = legacy_initialize(c, &shim.url, Some("first-token")).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "a removed token: {body}");
        assert_valid(Revision::Legacy, &body, None);
        let _ = std::fs::remove_file(&file);
    });
}

#[test]
fn a_token_file_others_can_read_is_refused_at_start() {
    let file = temp_path("open-tokens");
    std::fs::write(&file, "s3cret=alice\n").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let mut child = Command::new(shim_bin())
        .args(["http", "--listen", "127.0.0.1:0", "--token-file"])
        .arg(&file)
        .arg("--")
        .args(modern_reference())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the shim");
    let status = support::wire::exited_within(
        &mut child,
        GUARD,
        "the shim (started with a token file others can read)",
    );
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(!status.success(), "{stderr}");
    assert!(stderr.contains("chmod 600"), "{stderr}");
    assert!(
        stderr.contains(file.to_str().unwrap()),
        "names the file: {stderr}"
    );
    assert!(!stderr.contains("s3cret"), "the token leaked: {stderr}");
    let _ = std::fs::remove_file(&file);
}

/// A browser page of an admitted origin (`--allow-origin`, or loopback)
/// can call the endpoint: its preflight is answered with the MCP headers,
/// and the answer lets it read `Mcp-Session-Id`. Other origins get no CORS
/// headers (and their requests 403, as before).
#[test]
fn admitted_browser_origins_get_cors_and_others_do_not() {
    support::http::block_on(async {
        let app = "https://app.example";
        let shim = HttpShim::spawn(&["--allow-origin", app], &modern_reference());
        let c = client();
        let preflight = |origin: &'static str| {
            c.request(reqwest::Method::OPTIONS, &shim.url)
                .header("origin", origin)
                .header("access-control-request-method", "POST")
                .header(
                    "access-control-request-headers",
                    "content-type,mcp-protocol-version,mcp-session-id",
                )
                .send()
        };
        for origin in [app, "http://localhost:5173"] {
            let resp = tokio::time::timeout(STEP, preflight(origin))
                .await
                .unwrap()
                .unwrap();
            assert!(resp.status().is_success(), "{origin}: {}", resp.status());
            let h = resp.headers();
            assert_eq!(h["access-control-allow-origin"], origin);
            let allowed = h["access-control-allow-headers"].to_str().unwrap();
            assert!(allowed.contains("mcp-session-id"), "{allowed}");
            assert!(allowed.contains("mcp-protocol-version"), "{allowed}");
        }
        let resp = tokio::time::timeout(STEP, preflight("https://elsewhere.example"))
            .await
            .unwrap()
            .unwrap();
        assert!(
            resp.headers().get("access-control-allow-origin").is_none(),
            "{:?}",
            resp.headers()
        );

        let body = rpc(
            0,
            "initialize",
            json!({
                "protocolVersion": LEGACY,
                "capabilities": {},
                "clientInfo": {"name": "browser", "version": "0"},
            }),
        );
        let (status, body, headers) =
            send(legacy(&c, &shim.url, None, &body).header("origin", app)).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_valid(Revision::Legacy, &body, Some("initialize"));
        assert_eq!(headers["access-control-allow-origin"], app);
        let exposed = headers["access-control-expose-headers"].to_str().unwrap();
        assert!(exposed.contains("mcp-session-id"), "{exposed}");
        let (status, body, _) = send(
            legacy(&c, &shim.url, None, &rpc(1, "ping", json!({})))
                .header("origin", "https://elsewhere.example"),
        )
        .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    });
}
