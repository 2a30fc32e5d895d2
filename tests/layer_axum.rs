//! Issue 28, the shim as a tower layer inside a Rust server: the crate's
//! 2026-07-28 reference server as an axum `Router`, mounted behind
//! `TasksCompatLayer` with one line, served on 127.0.0.1:0.
//!
//! - The official TypeScript SDK 1.32.2 legacy client
//!   (`tests/peers/legacy_client.mjs --profile shim`, as against the CLI
//!   proxy in `http_legacy_ts.rs`) runs its whole task repertoire through
//!   the layer; everything it saw validates against 2025-11-25.
//! - A 2026-07-28 request reaches the inner service with the very bytes
//!   sent, and its answer is the bytes the bare service answers.
//! - No socket is opened between the layer and the inner service: during
//!   a 2025-11-25 task the process holds the front's listener and the
//!   test client's connections, nothing else.
//! - The per-tool `taskSupport` policy and principals (from an auth
//!   layer's extension) come from the config; a 2025-11-25 inner service
//!   serves 2026-07-28 clients through it (the reverse direction).
//!
//! Needs Node and `tests/peers/node_modules`: run `scripts/test.sh`.

mod support;

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::middleware::{self, Next};
use mcp_tasks_shim::layer::{AuthenticatedPrincipal, TasksCompatConfig, TasksCompatLayer};
use mcp_tasks_shim::reference;
use mcp_tasks_shim::revision::Revision as Rev;
use mcp_tasks_shim::scope::Principal;
use mcp_tasks_shim::wire::legacy::TaskSupport;
use reqwest::StatusCode;
use serde_json::{Value, json};
use support::http::{block_on, client, initialize, legacy, modern, rpc, send};
use support::peers::{assert_shim_http_run, require_peers, run_legacy_client_http};
use support::schema::{Revision, assert_valid};
use support::wire::temp_path;

/// The script bounds itself at 60 s; this is the backstop.
const TIMEOUT: Duration = Duration::from_secs(90);

/// The socket census sees every TCP socket of the process: the tests of
/// this file take turns.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// Serves `app` on 127.0.0.1:0 on the current runtime; its MCP URL.
async fn serve(app: Router) -> (String, SocketAddr) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}/mcp"), addr)
}

/// The one line a server adds: the reference server behind the layer.
fn layered(config: TasksCompatConfig, inner: Router) -> Router {
    Router::new().nest_service("/mcp", TasksCompatLayer::new(config).layer(inner))
}

fn modern_inner() -> Router {
    reference::router(Rev::Modern, "/")
}

#[test]
fn ts_sdk_legacy_client_through_the_layer() {
    let _turn = serial();
    require_peers();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut config = TasksCompatConfig::default();
    config.http.bridge.page_size = 4;
    let (url, _) = rt.block_on(async { serve(layered(config, modern_inner())).await });
    let client_view = temp_path("layer-ts-client-view.jsonl");
    let run = run_legacy_client_http("shim", &client_view, &url, TIMEOUT);
    assert_shim_http_run(&run, &client_view);
}

/// What the inner service received, recorded in front of it.
#[derive(Clone, Default)]
struct Received(Arc<Mutex<Vec<Bytes>>>);

async fn record(
    axum::extract::State(seen): axum::extract::State<Received>,
    req: Request,
    next: Next,
) -> axum::response::Response {
    let (parts, body) = req.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    seen.0.lock().unwrap().push(bytes.clone());
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

/// A 2026-07-28 `tools/call` written the way no serialiser writes it
/// (spacing, member order): re-serialised, it would not survive.
fn odd_modern_call() -> String {
    let meta = support::http::modern_meta(true);
    format!(
        "{{ \"method\" : \"tools/call\",\"jsonrpc\":\"2.0\",  \"params\":{{\"arguments\":{{\"name\":\"Ada\"}},\"name\":\"greet\",\"_meta\":{meta}}},\"id\":7 }}"
    )
}

async fn post_raw(url: &str, body: &str) -> (StatusCode, String, Bytes) {
    let resp = client()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "greet")
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    let status = resp.status();
    let ctype = resp.headers()["content-type"].to_str().unwrap().to_owned();
    (status, ctype, resp.bytes().await.unwrap())
}

#[test]
fn modern_requests_pass_through_untouched() {
    let _turn = serial();
    block_on(async {
        let bare_seen = Received::default();
        let bare = Router::new().nest_service(
            "/mcp",
            modern_inner().layer(middleware::from_fn_with_state(bare_seen.clone(), record)),
        );
        let layered_seen = Received::default();
        let inner =
            modern_inner().layer(middleware::from_fn_with_state(layered_seen.clone(), record));
        let config = TasksCompatConfig::default().inner_revision(Rev::Modern);
        let (bare_url, _) = serve(bare).await;
        let (layer_url, _) = serve(layered(config, inner)).await;

        let body = odd_modern_call();
        let direct = post_raw(&bare_url, &body).await;
        let through = post_raw(&layer_url, &body).await;
        assert_eq!(direct.0, StatusCode::OK, "{:?}", direct.2);
        assert_eq!(
            through, direct,
            "the layer's answer is the inner's, byte for byte"
        );
        let answer: Value = serde_json::from_slice(&through.2).unwrap();
        assert_eq!(answer["result"]["content"][0]["text"], "Hello, Ada!");
        assert_valid(Revision::Modern, &answer, Some("tools/call"));
        // The inner service got the bytes the client sent, and nothing
        // else (no probe: the config named its revision).
        assert_eq!(*layered_seen.0.lock().unwrap(), vec![Bytes::from(body)]);
    });
}

/// One TCP socket of this process: (local port, remote port, listening).
type Socket = (u16, u16, bool);

/// Every TCP socket this process holds open (its descriptors matched to
/// the kernel's tables, IPv4 and IPv6).
fn tcp_sockets() -> Vec<Socket> {
    let ours: HashSet<String> = std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|l| {
            let l = l.to_string_lossy().into_owned();
            Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_owned())
        })
        .collect();
    let port = |addr: &str| u16::from_str_radix(addr.rsplit(':').next().unwrap(), 16).unwrap();
    let mut found = Vec::new();
    for table in ["/proc/self/net/tcp", "/proc/self/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() > 9 && ours.contains(f[9]) {
                found.push((port(f[1]), port(f[2]), f[3] == "0A"));
            }
        }
    }
    found
}

#[test]
fn no_socket_between_the_layer_and_the_inner_service() {
    let _turn = serial();
    block_on(async {
        let (url, front) = serve(layered(TasksCompatConfig::default(), modern_inner())).await;
        let c = client();
        let (sid, _) = initialize(&c, &url, None).await;
        let call = json!({"name": "slow_compute", "arguments": {"seconds": 1, "label": "census"},
            "task": {"ttl": 60000}});
        let (s, created, _) = send(legacy(&c, &url, Some(&sid), &rpc(1, "tools/call", call))).await;
        assert_eq!(s, StatusCode::OK, "{created}");
        assert_valid(Revision::Legacy, &created, Some("tools/call"));
        let task = created["result"]["task"]["taskId"]
            .as_str()
            .unwrap()
            .to_owned();
        let (_, got, _) = send(legacy(
            &c,
            &url,
            Some(&sid),
            &rpc(2, "tasks/get", json!({"taskId": task})),
        ))
        .await;
        assert_valid(Revision::Legacy, &got, Some("tasks/get"));

        // While the task runs upstream, every TCP socket of the process is
        // the front's listener or one end of the test client's connections
        // to it. A loopback hop to the inner service would add a listener
        // and a connection on another port.
        let census = tcp_sockets();
        let listening: Vec<_> = census.iter().filter(|s| s.2).collect();
        assert_eq!(listening, [&(front.port(), 0, true)], "{census:?}");
        assert!(
            census.iter().any(|s| s.1 == front.port()),
            "the census sees the client's own connection: {census:?}"
        );
        for s in &census {
            assert!(
                s.0 == front.port() || s.1 == front.port(),
                "a socket that is neither the front's nor its client's: {s:?} in {census:?}"
            );
        }

        let (_, done, _) = send(legacy(
            &c,
            &url,
            Some(&sid),
            &rpc(3, "tasks/result", json!({"taskId": task})),
        ))
        .await;
        assert_valid(Revision::Legacy, &done, Some("tasks/result"));
        assert!(
            done["result"]["content"][0]["text"]
                .as_str()
                .unwrap()
                .contains("census"),
            "{done}"
        );
        let after = tcp_sockets();
        assert!(
            after
                .iter()
                .all(|s| s.0 == front.port() || s.1 == front.port()),
            "{after:?}"
        );
    });
}

#[test]
fn task_support_policy_comes_from_the_config() {
    let _turn = serial();
    block_on(async {
        let config = TasksCompatConfig::default()
            .task_support("greet", TaskSupport::Forbidden)
            .task_support("failing_job", TaskSupport::Required);
        let (url, _) = serve(layered(config, modern_inner())).await;
        let c = client();
        let (sid, init) = initialize(&c, &url, None).await;
        assert_eq!(init["protocolVersion"], "2025-11-25");
        assert!(
            init["capabilities"]["tasks"]["requests"]["tools"]["call"].is_object(),
            "{init}"
        );

        let (_, listed, _) = send(legacy(
            &c,
            &url,
            Some(&sid),
            &rpc(1, "tools/list", json!({})),
        ))
        .await;
        assert_valid(Revision::Legacy, &listed, Some("tools/list"));
        let support = |name: &str| {
            listed["result"]["tools"]
                .as_array()
                .unwrap()
                .iter()
                .find(|t| t["name"] == name)
                .map(|t| t["execution"]["taskSupport"].clone())
        };
        assert_eq!(support("greet"), Some(json!("forbidden")));
        assert_eq!(support("failing_job"), Some(json!("required")));
        assert_eq!(support("slow_compute"), Some(json!("optional")));

        let call = json!({"name": "greet", "arguments": {"name": "x"}, "task": {"ttl": 1000}});
        let (_, refused, _) = send(legacy(&c, &url, Some(&sid), &rpc(2, "tools/call", call))).await;
        assert_eq!(refused["error"]["code"], -32601, "{refused}");
        assert_valid(Revision::Legacy, &refused, None);
    });
}

/// The application's own auth layer: `x-user` names the caller.
async fn auth(mut req: Request, next: Next) -> axum::response::Response {
    let user = req
        .headers()
        .get("x-user")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    if let Some(user) = user {
        req.extensions_mut()
            .insert(AuthenticatedPrincipal(Principal::new(user)));
    }
    next.run(req).await
}

#[test]
fn principals_come_from_the_auth_layer_extension() {
    let _turn = serial();
    block_on(async {
        let app =
            layered(TasksCompatConfig::default(), modern_inner()).layer(middleware::from_fn(auth));
        let (url, _) = serve(app).await;
        let c = client();
        let as_user = |user: &'static str, sid: Option<&str>, body: &Value| {
            legacy(&c, &url, sid, body).header("x-user", user)
        };
        let mut sessions = Vec::new();
        for user in ["alice", "bob"] {
            let init = rpc(
                0,
                "initialize",
                json!({"protocolVersion": "2025-11-25",
                "capabilities": {}, "clientInfo": {"name": user, "version": "0"}}),
            );
            let (s, _, headers) = send(as_user(user, None, &init)).await;
            assert_eq!(s, StatusCode::OK);
            let sid = headers["mcp-session-id"].to_str().unwrap().to_owned();
            let call = json!({"name": "slow_compute", "arguments": {"seconds": 0.1, "label": user},
                "task": {"ttl": 60000}});
            let (_, created, _) =
                send(as_user(user, Some(&sid), &rpc(1, "tools/call", call))).await;
            sessions.push((user, sid, created["result"]["task"]["taskId"].clone()));
        }
        for (user, sid, task) in &sessions {
            let (_, listed, _) =
                send(as_user(user, Some(sid), &rpc(2, "tasks/list", json!({})))).await;
            assert_valid(Revision::Legacy, &listed, Some("tasks/list"));
            let ids: Vec<_> = listed["result"]["tasks"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["taskId"].clone())
                .collect();
            assert_eq!(
                ids,
                std::slice::from_ref(task),
                "{user} sees its own task only"
            );
        }
        // A session is its principal's: another caller cannot use it.
        let (alice_sid, bob) = (&sessions[0].1, "bob");
        let (s, _, _) = send(as_user(
            bob,
            Some(alice_sid),
            &rpc(3, "tasks/list", json!({})),
        ))
        .await;
        assert_ne!(s, StatusCode::OK, "bob may not use alice's session");
    });
}

#[test]
fn a_legacy_inner_service_serves_modern_clients_through_the_layer() {
    let _turn = serial();
    block_on(async {
        let inner = reference::router(Rev::Legacy, "/");
        let (url, _) = serve(layered(TasksCompatConfig::default(), inner)).await;
        let c = client();
        let (s, discover, _) = send(modern(&c, &url, 1, "server/discover", json!({}))).await;
        assert_eq!(s, StatusCode::OK, "{discover}");
        assert_valid(Revision::Modern, &discover, Some("server/discover"));
        assert!(
            discover["result"]["capabilities"]["extensions"]["io.modelcontextprotocol/tasks"]
                .is_object(),
            "{discover}"
        );
        let call = json!({"name": "slow_compute", "arguments": {"seconds": 0.1, "label": "rev"}});
        let (_, created, _) = send(modern(&c, &url, 2, "tools/call", call)).await;
        assert_eq!(created["result"]["resultType"], "task", "{created}");
        assert_valid(Revision::Modern, &created, Some("tools/call"));

        // 2025-11-25 sessions are the inner service's own: served as it is.
        let (sid, init) = initialize(&c, &url, None).await;
        assert!(!sid.is_empty());
        assert_valid(
            Revision::Legacy,
            &json!({"jsonrpc": "2.0", "id": 0, "result": init}),
            Some("initialize"),
        );
    });
}
