//! The HTTP front's metrics, recorded with the `metrics` crate into a
//! Prometheus recorder of the front's own (`metrics-exporter-prometheus`),
//! and rendered by [`crate::driver::http::HttpShim::metrics_router`].
//!
//! The recorder is never installed as the process's global one: a program
//! that embeds the shim may have its own (installing a second fails, and
//! taking the slot would leave its `metrics::counter!` calls in our
//! output), and two fronts in one process (tests, or an app serving two
//! upstreams) must not add up each other's gauges. Every record goes
//! through [`metrics::with_local_recorder`] with the front's recorder.
//!
//! Label values are bounded: methods outside [`KNOWN_METHODS`] are
//! `other`, error codes outside [`KNOWN_CODES`] are `other`, so a client
//! inventing method names or an upstream inventing codes cannot grow the
//! shim's memory and every scrape without bound.

use std::time::{Duration, Instant};

use metrics::{Unit, counter, describe_counter, describe_gauge, describe_histogram, gauge};
use metrics_exporter_prometheus::{
    Matcher, PrometheusBuilder, PrometheusHandle, PrometheusRecorder,
};

use crate::revision::Revision;

/// Client request latency, by revision and method.
pub const REQUEST_DURATION: &str = "mcp_shim_request_duration_seconds";
/// Client messages, by revision and method.
pub const REQUESTS: &str = "mcp_shim_requests_total";
/// JSON-RPC errors answered to clients, by revision and code.
pub const ERRORS: &str = "mcp_shim_errors_total";
/// 2026-07-28 requests served without `Mcp-Name`.
pub const MISSING_MCP_NAME: &str = "mcp_shim_missing_mcp_name_total";
/// Ledger call latency, by store and operation.
pub const LEDGER_DURATION: &str = "mcp_shim_ledger_operation_duration_seconds";
/// 1 while the upstream can serve requests.
pub const UPSTREAM_UP: &str = "mcp_shim_upstream_up";
/// Upstream children restarted.
pub const UPSTREAM_RESTARTS: &str = "mcp_shim_upstream_restarts_total";
/// Upstream liveness and restart probes that failed.
pub const UPSTREAM_PROBE_FAILURES: &str = "mcp_shim_upstream_probe_failures_total";
/// Sessions by kind.
pub const SESSIONS: &str = "mcp_shim_sessions";
/// Clients waiting on a task.
pub const TASK_WAITERS: &str = "mcp_shim_task_waiters";
/// Task pollers running.
pub const TASK_POLLERS: &str = "mcp_shim_task_pollers";

/// The `method` labels: the client messages of both revisions, the HTTP
/// methods and client answers the legacy front counts, each a label of
/// its own, and last `other` for every method not listed.
pub const KNOWN_METHODS: &[&str] = &[
    "initialize",
    "ping",
    "logging/setLevel",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "tasks/get",
    "tasks/result",
    "tasks/list",
    "tasks/cancel",
    "tasks/update",
    "server/discover",
    "subscriptions/listen",
    "notifications/initialized",
    "notifications/cancelled",
    "notifications/progress",
    "notifications/roots/list_changed",
    "GET",
    "DELETE",
    "(response)",
    "other",
];

/// The JSON-RPC and MCP error codes that get a label of their own.
pub const KNOWN_CODES: &[i64] = &[
    -32700, -32600, -32601, -32602, -32603, -32002, -32020, -32021, -32022, -32042,
];

/// The `method` label of `method`.
pub fn method_label(method: &str) -> &'static str {
    KNOWN_METHODS[method_index(method)]
}

/// Where `method` is in [`KNOWN_METHODS`] (`"other"`, the last, for any
/// method not listed).
fn method_index(method: &str) -> usize {
    KNOWN_METHODS
        .iter()
        .position(|m| *m == method)
        .unwrap_or(KNOWN_METHODS.len() - 1)
}

/// The `code` label of `code`.
fn code_label(code: i64) -> String {
    if KNOWN_CODES.contains(&code) {
        code.to_string()
    } else {
        "other".into()
    }
}

/// Request latencies: from a millisecond (a cached answer) to ten minutes
/// (a blocking `tasks/result` of a long task).
const REQUEST_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    300.0, 600.0,
];

/// Ledger calls: microseconds in memory, milliseconds on disk or Redis.
const LEDGER_BUCKETS: &[f64] = &[
    0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
    0.1, 0.25, 1.0,
];

/// One front's recorder and what renders it.
pub struct Telemetry {
    recorder: PrometheusRecorder,
    handle: PrometheusHandle,
    /// The per-request series, one per revision and method label, each
    /// made on its first use (a series appears once it has a value): the
    /// macros build, hash and look up a labelled key on every call.
    per_request: Box<[RequestSeries]>,
}

/// The series every request of one revision and method updates.
#[derive(Default)]
struct RequestSeries {
    count: std::sync::OnceLock<metrics::Counter>,
    took: std::sync::OnceLock<metrics::Histogram>,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry").finish_non_exhaustive()
    }
}

impl Default for Telemetry {
    fn default() -> Self {
        Telemetry::new()
    }
}

impl Telemetry {
    /// A recorder with the shim's buckets and metric descriptions.
    pub fn new() -> Telemetry {
        // Both calls fail only on an empty bucket list.
        let builder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Full(REQUEST_DURATION.into()), REQUEST_BUCKETS)
            .and_then(|b| {
                b.set_buckets_for_metric(Matcher::Full(LEDGER_DURATION.into()), LEDGER_BUCKETS)
            })
            .expect("bucket lists are not empty");
        let recorder = builder.build_recorder();
        let handle = recorder.handle();
        let per_request = std::iter::repeat_with(RequestSeries::default)
            .take(2 * KNOWN_METHODS.len())
            .collect();
        let t = Telemetry {
            recorder,
            handle,
            per_request,
        };
        t.with(describe_all);
        t
    }

    fn with<T>(&self, f: impl FnOnce() -> T) -> T {
        metrics::with_local_recorder(&self.recorder, f)
    }

    /// Counts one message of `revision` for `method`.
    pub fn count(&self, revision: Revision, method: &str) {
        let (series, method) = self.series(revision, method);
        let count = series.count.get_or_init(|| {
            self.with(|| counter!(REQUESTS, "revision" => revision.version(), "method" => method))
        });
        count.increment(1);
    }

    /// The series of requests of `revision` for `method`, and its label.
    fn series(&self, revision: Revision, method: &str) -> (&RequestSeries, &'static str) {
        let index = method_index(method);
        let row = match revision {
            Revision::Legacy => 0,
            Revision::Modern => KNOWN_METHODS.len(),
        };
        (&self.per_request[row + index], KNOWN_METHODS[index])
    }

    /// Counts one request served without its `Mcp-Name`.
    pub fn count_missing_mcp_name(&self) {
        self.with(|| counter!(MISSING_MCP_NAME).increment(1));
    }

    /// Counts one JSON-RPC error answered to a client of `revision`
    /// (`None`: refused before its revision was known).
    pub fn count_error(&self, revision: Option<Revision>, code: i64) {
        let revision = revision.map_or("unknown", Revision::version);
        let code = code_label(code);
        self.with(|| counter!(ERRORS, "revision" => revision, "code" => code).increment(1));
    }

    /// Records how long a request of `revision` for `method` took.
    pub fn request_took(&self, revision: Revision, method: &str, took: Duration) {
        let (series, method) = self.series(revision, method);
        let histogram = series.took.get_or_init(|| {
            self.with(|| {
                metrics::histogram!(REQUEST_DURATION, "revision" => revision.version(), "method" => method)
            })
        });
        histogram.record(took.as_secs_f64());
    }

    /// Records how long ledger call `op` on `store` took.
    pub fn ledger_took(&self, store: &'static str, op: &'static str, took: Duration) {
        self.with(|| {
            metrics::histogram!(LEDGER_DURATION, "store" => store, "op" => op)
                .record(took.as_secs_f64());
        });
    }

    /// Sets gauge `name` to `value`, with `labels`.
    pub fn set_gauge(
        &self,
        name: &'static str,
        labels: &[(&'static str, &'static str)],
        value: f64,
    ) {
        let labels: Vec<metrics::Label> = labels
            .iter()
            .map(|(k, v)| metrics::Label::new(*k, *v))
            .collect();
        self.with(|| gauge!(name, labels).set(value));
    }

    /// Raises counter `name` to `value` (a count kept elsewhere, such as
    /// the upstream supervisor's restarts).
    pub fn set_counter(&self, name: &'static str, value: u64) {
        self.with(|| counter!(name).absolute(value));
    }

    /// The Prometheus exposition text.
    pub fn render(&self) -> String {
        self.handle.render()
    }

    /// Drains histogram samples into their buckets. Rendering does it too;
    /// this bounds the memory held between scrapes when nobody scrapes.
    pub fn upkeep(&self) {
        self.handle.run_upkeep();
    }

    /// The handle that renders this recorder, for an application that
    /// serves it its own way.
    pub fn handle(&self) -> &PrometheusHandle {
        &self.handle
    }
}

/// A timer for one request: records its latency when dropped (the
/// response body finished, or the client went away).
#[derive(Debug)]
pub struct RequestTimer {
    telemetry: std::sync::Arc<Telemetry>,
    revision: Revision,
    method: &'static str,
    started: Instant,
}

impl RequestTimer {
    /// A timer started at `started`.
    pub fn new(
        telemetry: std::sync::Arc<Telemetry>,
        revision: Revision,
        method: &str,
        started: Instant,
    ) -> RequestTimer {
        RequestTimer {
            telemetry,
            revision,
            method: method_label(method),
            started,
        }
    }
}

impl RequestTimer {
    /// Counts an error answered to this request (one found in its SSE
    /// answer).
    pub fn count_error(&self, code: i64) {
        self.telemetry.count_error(Some(self.revision), code);
    }
}

impl Drop for RequestTimer {
    fn drop(&mut self) {
        self.telemetry
            .request_took(self.revision, self.method, self.started.elapsed());
    }
}

fn describe_all() {
    describe_histogram!(
        REQUEST_DURATION,
        Unit::Seconds,
        "Client requests on the HTTP front, from the request to the end of its answer, by protocol revision and method."
    );
    describe_counter!(REQUESTS, "Client messages by protocol revision and method.");
    describe_counter!(
        ERRORS,
        "JSON-RPC errors answered to clients, by protocol revision (unknown: refused before it was read) and code."
    );
    describe_counter!(
        MISSING_MCP_NAME,
        "2026-07-28 requests served without the Mcp-Name header their body called for (--accept-missing-mcp-name)."
    );
    describe_histogram!(
        LEDGER_DURATION,
        Unit::Seconds,
        "Task ledger calls, by store (memory, disk, redis) and operation."
    );
    describe_gauge!(
        UPSTREAM_UP,
        "1 while the upstream can serve requests, 0 while it restarts or is down."
    );
    describe_counter!(
        UPSTREAM_RESTARTS,
        "Upstream child processes restarted (--restart-upstream)."
    );
    describe_counter!(
        UPSTREAM_PROBE_FAILURES,
        "Upstream liveness pings unanswered in time, and restarted children that failed their probe."
    );
    describe_gauge!(
        SESSIONS,
        "Sessions in memory by kind: legacy (2025-11-25 HTTP sessions bridged), relayed (2025-11-25 sessions relayed to a process of their own), modern (2026-07-28 requests and listen streams in progress)."
    );
    describe_gauge!(
        TASK_WAITERS,
        "Clients waiting on a task: blocking tasks/result and driven calls of 2025-11-25 clients, and open subscriptions/listen streams of 2026-07-28 clients."
    );
    describe_gauge!(
        TASK_POLLERS,
        "Tasks of a 2026-07-28 upstream the shim polls with tasks/get for a waiting 2025-11-25 client."
    );
    describe_gauge!(
        "mcp_shim_ledger_tasks",
        "Task records held in the ledger (expired ones until swept)."
    );
    describe_gauge!(
        "mcp_shim_tracked_tasks",
        "Tasks of a 2025-11-25 upstream the modern bridge tracks."
    );
    describe_gauge!(
        "mcp_shim_legacy_sessions",
        "2025-11-25 HTTP sessions in memory (open, or deleted and finishing)."
    );
    describe_gauge!(
        "mcp_shim_watched_tasks",
        "Tasks of a 2026-07-28 upstream watched for a waiting 2025-11-25 client: task pollers plus upstream listen streams."
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_up_methods_and_codes_share_one_label() {
        let m = Telemetry::new();
        m.count(Revision::Legacy, "tools/call");
        for i in 0..1000 {
            m.count(Revision::Legacy, &format!("notifications/made-up-{i}"));
            m.count_error(Some(Revision::Legacy), -31000 - i);
        }
        m.count(Revision::Modern, "x\"} 1\nfake_metric{a=\"");
        let text = m.render();
        let requests: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("mcp_shim_requests_total{"))
            .collect();
        assert_eq!(requests.len(), 3, "{text}");
        // Whether a series has every label of `labels` and the count `n`.
        let counted = |labels: &[&str], n: &str| {
            requests
                .iter()
                .any(|l| labels.iter().all(|s| l.contains(s)) && l.ends_with(n))
        };
        assert!(counted(&[r#"method="tools/call""#], " 1"), "{text}");
        let other = r#"method="other""#;
        assert!(
            counted(&[r#"revision="2025-11-25""#, other], " 1000"),
            "{text}"
        );
        assert!(
            counted(&[r#"revision="2026-07-28""#, other], " 1"),
            "{text}"
        );
        let errors: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("mcp_shim_errors_total{"))
            .collect();
        assert_eq!(errors.len(), 1, "{text}");
        assert!(errors[0].contains(r#"code="other""#), "{text}");
        assert!(!text.contains("fake_metric"), "{text}");
    }
}
