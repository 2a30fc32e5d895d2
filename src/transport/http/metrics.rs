//! Traffic counters per revision and method, in Prometheus text form, so
//! operators can see when the legacy path is no longer used.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::revision::Revision;

/// Request counters.
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    counts: Mutex<BTreeMap<(&'static str, &'static str), u64>>,
    /// 2026-07-28 requests served without the `Mcp-Name` they should have
    /// had (`--accept-missing-mcp-name`).
    missing_mcp_name: AtomicU64,
}

/// The client messages of both revisions, and the HTTP methods and
/// client answers the legacy front counts.
const KNOWN: &[&str] = &[
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
];

impl Metrics {
    /// Counts one message of `revision` for `method`.
    pub(crate) fn count(&self, revision: Revision, method: &str) {
        // Only methods MCP defines get a label of their own: any client
        // can send any method name, and a label per name would grow the
        // shim's memory and every scrape without bound.
        let method = KNOWN
            .iter()
            .find(|m| **m == method)
            .copied()
            .unwrap_or("(other)");
        *self
            .counts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry((revision.version(), method))
            .or_default() += 1;
    }

    /// Counts one request served without its `Mcp-Name`.
    pub(crate) fn count_missing_mcp_name(&self) {
        self.missing_mcp_name.fetch_add(1, Ordering::Relaxed);
    }

    /// The Prometheus exposition text, with `gauges` (name, help, value)
    /// appended.
    pub(crate) fn render(&self, gauges: &[(&str, &str, u64)]) -> String {
        let mut out = String::from(
            "# HELP mcp_shim_requests_total Client messages by protocol revision and method.\n# TYPE mcp_shim_requests_total counter\n",
        );
        for ((rev, method), n) in self.counts.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            out.push_str(&format!(
                "mcp_shim_requests_total{{revision=\"{rev}\",method=\"{method}\"}} {n}\n"
            ));
        }
        out.push_str(&format!(
            "# HELP mcp_shim_missing_mcp_name_total 2026-07-28 requests served without the Mcp-Name header their body called for (--accept-missing-mcp-name).\n# TYPE mcp_shim_missing_mcp_name_total counter\nmcp_shim_missing_mcp_name_total {}\n",
            self.missing_mcp_name.load(Ordering::Relaxed)
        ));
        for (name, help, value) in gauges {
            out.push_str(&format!(
                "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}\n"
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_up_methods_share_one_label() {
        let m = Metrics::default();
        m.count(Revision::Legacy, "tools/call");
        for i in 0..1000 {
            m.count(Revision::Legacy, &format!("notifications/made-up-{i}"));
        }
        m.count(Revision::Modern, "x\"} 1\nfake_metric{a=\"");
        let text = m.render(&[]);
        assert!(text.contains(r#"method="tools/call"} 1"#), "{text}");
        assert!(
            text.contains(r#"revision="2025-11-25",method="(other)"} 1000"#),
            "{text}"
        );
        assert!(
            text.contains(r#"revision="2026-07-28",method="(other)"} 1"#),
            "{text}"
        );
        assert!(!text.contains("fake_metric"), "{text}");
        assert_eq!(text.lines().count(), 2 + 3 + 3, "{text}");
    }
}
