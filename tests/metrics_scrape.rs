//! `/metrics` of the real `http` binary in front of the reference server,
//! scraped over loopback after legacy and modern traffic and a task, and
//! read with a Prometheus text parser (`prometheus-parse`), as a scraper
//! would: the latency histogram (buckets, sum, count) per revision and
//! method, errors by code, upstream health, sessions, ledger latency.

mod support;

use prometheus_parse::{Sample, Scrape, Value as Prom};
use reqwest::StatusCode;
use serde_json::json;
use support::http::{HttpShim, client, initialize, legacy, modern, rpc, send, set_header};
use support::schema::{Revision, assert_valid};
use support::wire::modern_reference;

const LEGACY: &str = "2025-11-25";
const MODERN: &str = "2026-07-28";

/// `GET /metrics`: the text, checked to be Prometheus text as a scraper
/// reads it, and parsed.
async fn scrape(c: &reqwest::Client, base: &str) -> (String, Scrape) {
    let resp = tokio::time::timeout(support::http::STEP, c.get(format!("{base}/metrics")).send())
        .await
        .expect("/metrics in time")
        .expect("/metrics answers");
    assert_eq!(resp.status(), StatusCode::OK);
    let ctype = resp.headers()["content-type"].to_str().unwrap().to_owned();
    assert!(ctype.starts_with("text/plain; version=0.0.4"), "{ctype}");
    let text = resp.text().await.expect("/metrics body");
    for line in text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        // name{labels} value: the value is the last field, and a number.
        let value = line.rsplit(' ').next().unwrap();
        assert!(
            value.parse::<f64>().is_ok() || value == "+Inf",
            "not a sample line: {line}"
        );
    }
    let scrape = Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).expect("parses");
    (text, scrape)
}

/// The samples of `metric` whose labels include all of `labels`.
fn find<'a>(scrape: &'a Scrape, metric: &str, labels: &[(&str, &str)]) -> Vec<&'a Sample> {
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == metric && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .collect()
}

/// The one value of a counter, gauge or untyped sample.
fn scalar(scrape: &Scrape, metric: &str, labels: &[(&str, &str)]) -> f64 {
    let found = find(scrape, metric, labels);
    assert_eq!(found.len(), 1, "one {metric}{labels:?}: {found:?}");
    match &found[0].value {
        Prom::Counter(v) | Prom::Gauge(v) | Prom::Untyped(v) => *v,
        other => panic!("{metric}{labels:?} is not a scalar: {other:?}"),
    }
}

/// Asserts `metric` is a histogram with labels `labels`, its buckets
/// cumulative and ending in `+Inf`, with `_sum` and `_count` series beside
/// them; returns its count.
fn histogram_count(scrape: &Scrape, text: &str, metric: &str, labels: &[(&str, &str)]) -> f64 {
    let found = find(scrape, metric, labels);
    assert_eq!(found.len(), 1, "one {metric}{labels:?}:\n{text}");
    let Prom::Histogram(buckets) = &found[0].value else {
        panic!("{metric}{labels:?} is no histogram: {:?}", found[0].value);
    };
    assert!(buckets.len() > 2, "{buckets:?}");
    assert!(
        buckets
            .windows(2)
            .all(|w| w[0].less_than < w[1].less_than && w[0].count <= w[1].count),
        "cumulative buckets: {buckets:?}"
    );
    let last = buckets.last().unwrap();
    assert_eq!(last.less_than, f64::INFINITY, "{buckets:?}");
    let count = scalar(scrape, &format!("{metric}_count"), labels);
    assert_eq!(count, last.count, "_count is the +Inf bucket");
    let sum = scalar(scrape, &format!("{metric}_sum"), labels);
    assert!(sum > 0.0, "{metric}_sum{labels:?} = {sum}");
    let bucket_lines = text
        .lines()
        .filter(|l| {
            l.starts_with(&format!("{metric}_bucket{{"))
                && labels
                    .iter()
                    .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        })
        .count();
    assert_eq!(
        bucket_lines,
        buckets.len(),
        "{metric}_bucket lines:\n{text}"
    );
    count
}

#[test]
fn metrics_are_scraped_and_parsed_with_histograms() {
    support::http::block_on(async {
        let shim = HttpShim::spawn(&[], &modern_reference());
        let c = client();
        let url = shim.url.as_str();

        // Refused before any session: no Mcp-Session-Id, not initialize.
        let (s, body, _) = send(legacy(&c, url, None, &rpc(1, "tools/list", json!({})))).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
        assert_eq!(body["error"]["code"], -32600, "{body}");
        assert_valid(Revision::Legacy, &body, Some("tools/list"));

        // A 2025-11-25 session: calls, and a task in the ledger.
        let (sid, _) = initialize(&c, url, None).await;
        let greet = json!({"name": "greet", "arguments": {"name": "Ada"}});
        for id in [2, 3] {
            let (s, body, _) = send(legacy(
                &c,
                url,
                Some(&sid),
                &rpc(id, "tools/call", greet.clone()),
            ))
            .await;
            assert_eq!(s, StatusCode::OK, "{body}");
            assert_valid(Revision::Legacy, &body, Some("tools/call"));
        }
        let task = json!({"name": "slow_compute", "arguments": {"seconds": 30, "label": "m"},
            "task": {"ttl": 60000}});
        let (s, body, _) = send(legacy(&c, url, Some(&sid), &rpc(4, "tools/call", task))).await;
        assert_eq!(s, StatusCode::OK, "{body}");
        assert_valid(Revision::Legacy, &body, Some("tools/call"));
        let task_id = body["result"]["task"]["taskId"]
            .as_str()
            .unwrap_or_else(|| panic!("a task: {body}"))
            .to_owned();
        let get = rpc(5, "tasks/get", json!({"taskId": task_id}));
        let (s, body, _) = send(legacy(&c, url, Some(&sid), &get)).await;
        assert_eq!(s, StatusCode::OK, "{body}");
        assert_valid(Revision::Legacy, &body, Some("tasks/get"));

        // 2026-07-28 requests: one served, one refused (Mcp-Name names
        // another tool: 400 + -32020).
        let (s, body, _) = send(modern(&c, url, 6, "tools/call", greet.clone())).await;
        assert_eq!(s, StatusCode::OK, "{body}");
        assert_valid(Revision::Modern, &body, Some("tools/call"));
        let (s, body, _) = send(set_header(
            modern(&c, url, 7, "tools/call", greet.clone()),
            "mcp-name",
            Some("other"),
        ))
        .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
        assert_eq!(body["error"]["code"], -32020, "{body}");
        assert_valid(Revision::Modern, &body, Some("tools/call"));

        let (text, scrape) = scrape(&c, &shim.base).await;

        // Latency per revision and method: the two plain legacy calls and
        // the task-creating one; the modern call served and the refused one.
        let duration = "mcp_shim_request_duration_seconds";
        let legacy_calls = [("revision", LEGACY), ("method", "tools/call")];
        assert_eq!(
            histogram_count(&scrape, &text, duration, &legacy_calls),
            3.0
        );
        let modern_calls = [("revision", MODERN), ("method", "tools/call")];
        assert_eq!(
            histogram_count(&scrape, &text, duration, &modern_calls),
            2.0
        );
        let gets = [("revision", LEGACY), ("method", "tasks/get")];
        assert_eq!(histogram_count(&scrape, &text, duration, &gets), 1.0);
        assert!(
            find(&scrape, duration, &[("method", "other")]).is_empty(),
            "no made-up methods were sent:\n{text}"
        );

        // Errors by code, each with the revision of the client refused.
        let errors = "mcp_shim_errors_total";
        assert_eq!(
            scalar(&scrape, errors, &[("revision", MODERN), ("code", "-32020")]),
            1.0
        );
        assert_eq!(
            scalar(&scrape, errors, &[("revision", LEGACY), ("code", "-32600")]),
            1.0
        );
        assert_eq!(
            scalar(&scrape, "mcp_shim_requests_total", &legacy_calls),
            3.0
        );

        // The upstream, and what the shim holds.
        assert_eq!(scalar(&scrape, "mcp_shim_upstream_up", &[]), 1.0);
        assert_eq!(
            scalar(&scrape, "mcp_shim_upstream_restarts_total", &[]),
            0.0
        );
        assert_eq!(
            scalar(&scrape, "mcp_shim_sessions", &[("kind", "legacy")]),
            1.0
        );
        assert_eq!(
            scalar(&scrape, "mcp_shim_sessions", &[("kind", "relayed")]),
            0.0
        );
        assert_eq!(scalar(&scrape, "mcp_shim_ledger_tasks", &[]), 1.0);

        // The task went into the in-memory ledger, and was read back.
        let ledger = "mcp_shim_ledger_operation_duration_seconds";
        let inserts = [("store", "memory"), ("op", "insert")];
        assert_eq!(histogram_count(&scrape, &text, ledger, &inserts), 1.0);
        assert!(
            find(&scrape, ledger, &[("store", "memory")]).len() > 1,
            "the task's reads are timed too:\n{text}"
        );

        // Every series is documented.
        for name in [
            duration,
            errors,
            ledger,
            "mcp_shim_upstream_up",
            "mcp_shim_sessions",
        ] {
            assert!(
                text.contains(&format!("# HELP {name} ")),
                "{name} has no HELP:\n{text}"
            );
        }
    });
}
