//! The HTTP front embedded as a library (`HttpShim`): merged into an axum
//! application of the test's own, with its own route and layer, served on
//! a real socket on 127.0.0.1, in front of a server that lives in the same
//! process (`upstream::channel`, probed with `Link::probe`).
//!
//! Every JSON-RPC body read here is validated against its revision's schema.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::Request;
use axum::middleware::{self, Next};
use axum::response::Response;
use mcp_tasks_shim::driver::http::{ConfiguredPrincipals, HttpOptions, HttpShim};
use mcp_tasks_shim::ledger::MemoryLedger;
use mcp_tasks_shim::reference::ReferenceServer;
use mcp_tasks_shim::revision::Revision as Rev;
use mcp_tasks_shim::upstream::{Link, channel};
use reqwest::StatusCode;
use serde_json::{Value, json};
use support::http::{block_on, client, initialize, legacy, modern, rpc, send};
use support::schema::{Revision, assert_valid};

/// An in-process reference server of `revision`, probed.
async fn in_process(revision: Rev) -> Link {
    let (conn, events, mut server_end) = channel::pair(Duration::from_secs(30));
    let server = ReferenceServer::new(revision, server_end.to_shim.clone());
    tokio::spawn(async move {
        while let Some(msg) = server_end.from_shim.recv().await {
            server.handle(msg);
        }
    });
    Link::probe(conn, events, Duration::from_secs(5)).await
}

/// The application's own layer: stamps every response.
async fn stamp(req: Request, next: Next) -> Response {
    let mut resp = next.run(req).await;
    resp.headers_mut()
        .insert("x-app", "embedding-test".parse().unwrap());
    resp
}

/// The shim merged into an app with `/health` and the stamping layer,
/// served on 127.0.0.1; returns the shim and the endpoint's URL.
async fn serve_app(link: Link, path: &str) -> (HttpShim, String) {
    let opts = HttpOptions {
        path: path.into(),
        ..HttpOptions::default()
    };
    let shim = HttpShim::new(
        opts,
        link,
        Arc::new(MemoryLedger::default()),
        Arc::new(ConfiguredPrincipals::default()),
    )
    .unwrap();
    let app = Router::new()
        .route("/health", axum::routing::get(|| async { "ok" }))
        .merge(shim.router())
        .merge(shim.metrics_router("/ops/metrics"))
        .layer(middleware::from_fn(stamp));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (shim, format!("http://{addr}{path}"))
}

#[test]
fn embedded_front_serves_legacy_clients_beside_the_apps_routes() {
    block_on(async {
        let link = in_process(Rev::Modern).await;
        assert_eq!(
            link.revision(),
            Rev::Modern,
            "the probe found the modern server"
        );
        let (shim, url) = serve_app(link, "/api/mcp").await;
        let base = url.trim_end_matches("/api/mcp").to_owned();
        let c = client();

        // The app's own route, beside the shim's.
        let health = c.get(format!("{base}/health")).send().await.unwrap();
        assert_eq!(health.status(), StatusCode::OK);
        assert_eq!(health.text().await.unwrap(), "ok");

        // A 2025-11-25 session through the embedded front, at the
        // configured path, under the app's layer.
        let (sid, init) = initialize(&c, &url, None).await;
        assert_eq!(init["protocolVersion"], "2025-11-25");
        let tools = send(legacy(
            &c,
            &url,
            Some(&sid),
            &rpc(1, "tools/list", json!({})),
        ))
        .await;
        assert_valid(Revision::Legacy, &tools.1, Some("tools/list"));
        assert_eq!(tools.2.get("x-app").unwrap(), "embedding-test");
        let slow = tools.1["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == "slow_compute")
            .expect("slow_compute listed")
            .clone();
        assert_eq!(
            slow["execution"]["taskSupport"], "optional",
            "taskSupport synthesised for the legacy client: {slow}"
        );
        let call = rpc(
            2,
            "tools/call",
            json!({"name": "slow_compute", "arguments": {"seconds": 0.1, "label": "embedded"},
                   "task": {"ttl": 60000}}),
        );
        let (status, created, _) = send(legacy(&c, &url, Some(&sid), &call)).await;
        assert_eq!(status, StatusCode::OK, "{created}");
        assert_valid(Revision::Legacy, &created, Some("tools/call"));
        let task_id = created["result"]["task"]["taskId"]
            .as_str()
            .expect("a task was created")
            .to_owned();
        let wait = rpc(3, "tasks/result", json!({"taskId": task_id}));
        let (status, result, _) = send(legacy(&c, &url, Some(&sid), &wait)).await;
        assert_eq!(status, StatusCode::OK, "{result}");
        assert_valid(Revision::Legacy, &result, Some("tasks/result"));
        assert!(
            result["result"]["content"][0]["text"]
                .as_str()
                .is_some_and(|t| t.contains("'embedded' finished")),
            "the blocking tasks/result carried the tool's result: {result}"
        );

        // The metrics, where the app put them, counted this traffic.
        let metrics = c
            .get(format!("{base}/ops/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(
            metrics.contains("method=\"tasks/result\""),
            "metrics count the session's methods:\n{metrics}"
        );
        // Not at the CLI's path: the app chose its own.
        let elsewhere = c.get(format!("{base}/metrics")).send().await.unwrap();
        assert_eq!(elsewhere.status(), StatusCode::NOT_FOUND);

        shim.begin_shutdown("the test is over");
        shim.finish().await;
    });
}

#[test]
fn embedded_front_serves_modern_clients_of_a_legacy_server() {
    block_on(async {
        let link = in_process(Rev::Legacy).await;
        assert_eq!(
            link.revision(),
            Rev::Legacy,
            "the probe fell back to legacy"
        );
        let (shim, url) = serve_app(link, "/mcp").await;
        let c = client();
        let call = modern(
            &c,
            &url,
            1,
            "tools/call",
            json!({"name": "greet", "arguments": {"name": "embedder"}}),
        );
        let (status, answer, headers) = send(call).await;
        assert_eq!(status, StatusCode::OK, "{answer}");
        assert_valid(Revision::Modern, &answer, Some("tools/call"));
        assert_eq!(headers.get("x-app").unwrap(), "embedding-test");
        assert_eq!(answer["result"]["resultType"], "complete", "{answer}");
        let text: &Value = &answer["result"]["content"][0]["text"];
        assert!(
            text.as_str().is_some_and(|t| t.contains("embedder")),
            "{answer}"
        );
        shim.finish().await;
    });
}

/// The guide's shutdown: `begin_shutdown` in the server's graceful-shutdown
/// future. A 2025-11-25 client holding its GET stream open (as such
/// clients do) must not keep the server from stopping.
#[test]
fn graceful_shutdown_ends_open_streams() {
    block_on(async {
        let link = in_process(Rev::Modern).await;
        let shim = HttpShim::new(
            HttpOptions::default(),
            link,
            Arc::new(MemoryLedger::default()),
            Arc::new(ConfiguredPrincipals::default()),
        )
        .unwrap();
        let app: Router = shim.router();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let stopping = shim.clone();
        let server = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stopped.await;
                    stopping.begin_shutdown("the application is stopping");
                })
                .await
        });
        let c = client();
        let (sid, _) = initialize(&c, &url, None).await;
        let get = c
            .get(&url)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", &sid)
            .header("mcp-protocol-version", "2025-11-25")
            .send()
            .await
            .unwrap();
        assert_eq!(get.status(), StatusCode::OK);
        let mut events = get.bytes_stream();
        let _ = stop.send(());
        let asked = Instant::now();
        tokio::time::timeout(Duration::from_secs(3), server)
            .await
            .expect("the server stopped with the GET stream open")
            .unwrap()
            .unwrap();
        // The client sees its stream end, not hang.
        let end = tokio::time::timeout(Duration::from_secs(3), async {
            use futures_util::StreamExt;
            while let Some(Ok(_)) = events.next().await {}
        })
        .await;
        assert!(end.is_ok(), "the GET stream ended");
        assert!(asked.elapsed() < Duration::from_secs(3));
        shim.finish().await;
    });
}

/// Mistakes an embedding makes are refused with a message naming them,
/// not an axum panic or a silent mix-up of scopes.
#[test]
fn bad_paths_are_refused_and_principal_names_do_not_mix_scopes() {
    block_on(async {
        for path in ["mcp", "", "/mcp/", "/{x}", "/*rest"] {
            let opts = HttpOptions {
                path: path.into(),
                ..HttpOptions::default()
            };
            let e = HttpShim::new(
                opts,
                in_process(Rev::Modern).await,
                Arc::new(MemoryLedger::default()),
                Arc::new(ConfiguredPrincipals::default()),
            )
            .expect_err(path);
            assert!(e.to_string().starts_with("HttpOptions.path"), "{path}: {e}");
        }

        // A token whose principal is named like the anonymous callers'
        // scope: its tasks are still its own.
        let resolver = ConfiguredPrincipals {
            tokens: [("t".to_owned(), "anonymous".to_owned())].into(),
            trusted_header: None,
        };
        let shim = HttpShim::new(
            HttpOptions::default(),
            in_process(Rev::Modern).await,
            Arc::new(MemoryLedger::default()),
            Arc::new(resolver),
        )
        .unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        let app: Router = shim.router();
        tokio::spawn(async move { axum::serve(listener, app).await });
        let c = client();
        let call = json!({"name": "slow_compute", "arguments": {"seconds": 0.2, "label": "t"}});
        let (status, made, _) =
            send(modern(&c, &url, 1, "tools/call", call).bearer_auth("t")).await;
        assert_eq!(status, StatusCode::OK, "{made}");
        assert_valid(Revision::Modern, &made, Some("tools/call"));
        let task = made["result"]["taskId"].as_str().expect("a task");
        let get = |id: i64| modern(&c, &url, id, "tasks/get", json!({"taskId": task}));
        let (_, anonymous, _) = send(get(2)).await;
        assert_valid(Revision::Modern, &anonymous, Some("tasks/get"));
        assert_eq!(anonymous["error"]["code"], -32602, "{anonymous}");
        let (_, owner, _) = send(get(3).bearer_auth("t")).await;
        assert_valid(Revision::Modern, &owner, Some("tasks/get"));
        assert!(owner["result"]["status"].is_string(), "{owner}");
        shim.finish().await;
    });
}

/// What the application's own auth layer leaves in a request's extensions.
#[derive(Clone)]
struct Caller(String);

/// The application's auth layer: a bearer token names the caller.
async fn authenticate(mut req: Request, next: Next) -> Response {
    let caller = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer user-"))
        .map(str::to_owned);
    if let Some(name) = caller {
        req.extensions_mut().insert(Caller(name));
    }
    next.run(req).await
}

/// Principals from the auth layer's extension, not from headers.
#[derive(Debug)]
struct FromAuthLayer;

impl mcp_tasks_shim::driver::http::PrincipalResolver for FromAuthLayer {
    fn authenticate(
        &self,
        _: &axum::http::HeaderMap,
        extensions: &axum::http::Extensions,
    ) -> Result<Option<mcp_tasks_shim::scope::Principal>, String> {
        Ok(extensions
            .get::<Caller>()
            .map(|c| mcp_tasks_shim::scope::Principal::new(c.0.clone())))
    }
}

/// An application's own authentication decides the principals: alice's
/// task is hers alone, through sessions of either caller.
#[test]
fn principals_can_come_from_the_applications_auth_layer() {
    block_on(async {
        let shim = HttpShim::new(
            HttpOptions::default(),
            in_process(Rev::Modern).await,
            Arc::new(MemoryLedger::default()),
            Arc::new(FromAuthLayer),
        )
        .unwrap();
        let app: Router = shim.router().layer(middleware::from_fn(authenticate));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        let c = client();
        let (alice, _) = initialize(&c, &url, Some("user-alice")).await;
        let (bob, _) = initialize(&c, &url, Some("user-bob")).await;
        let call = rpc(
            1,
            "tools/call",
            json!({"name": "slow_compute", "arguments": {"seconds": 5, "label": "hers"},
                   "task": {"ttl": 60000}}),
        );
        let (_, created, _) =
            send(legacy(&c, &url, Some(&alice), &call).bearer_auth("user-alice")).await;
        assert_valid(Revision::Legacy, &created, Some("tools/call"));
        let task = created["result"]["task"]["taskId"].clone();
        assert!(task.is_string(), "{created}");
        let list = rpc(2, "tasks/list", json!({}));
        let (_, hers, _) =
            send(legacy(&c, &url, Some(&alice), &list).bearer_auth("user-alice")).await;
        assert_valid(Revision::Legacy, &hers, Some("tasks/list"));
        assert_eq!(hers["result"]["tasks"][0]["taskId"], task, "{hers}");
        let (_, his, _) = send(legacy(&c, &url, Some(&bob), &list).bearer_auth("user-bob")).await;
        assert_valid(Revision::Legacy, &his, Some("tasks/list"));
        assert_eq!(his["result"]["tasks"], json!([]), "{his}");
        let get = rpc(3, "tasks/get", json!({"taskId": task}));
        let (_, foreign, _) =
            send(legacy(&c, &url, Some(&bob), &get).bearer_auth("user-bob")).await;
        assert_valid(Revision::Legacy, &foreign, Some("tasks/get"));
        assert_eq!(foreign["error"]["code"], -32602, "{foreign}");
        // Alice's session is hers: bob's credentials on it find nothing.
        let (status, unknown, _) =
            send(legacy(&c, &url, Some(&alice), &get).bearer_auth("user-bob")).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert_valid(Revision::Legacy, &unknown, None);
        shim.finish().await;
    });
}

/// `HttpShim::new` outside a tokio runtime says so, as an error an
/// application can report, instead of panicking inside tokio.
#[test]
fn new_outside_a_runtime_is_an_error() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let link = rt.block_on(in_process(Rev::Modern));
    let made = HttpShim::new(
        HttpOptions::default(),
        link,
        Arc::new(MemoryLedger::default()),
        Arc::new(ConfiguredPrincipals::default()),
    );
    let e = made.expect_err("no runtime here");
    assert!(e.to_string().contains("tokio runtime"), "{e}");
}
