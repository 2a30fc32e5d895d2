//! Traffic counters per revision and method, in Prometheus text form, so
//! operators can see when the legacy path is no longer used.

use std::collections::BTreeMap;
use std::sync::Mutex;

use crate::revision::Revision;

/// Request counters.
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    counts: Mutex<BTreeMap<(&'static str, String), u64>>,
}

impl Metrics {
    /// Counts one message of `revision` for `method`.
    pub(crate) fn count(&self, revision: Revision, method: &str) {
        // Bound the label set: unknown methods share one label.
        let method = if method.len() <= 64 && method.bytes().all(|b| b.is_ascii_graphic()) {
            method
        } else {
            "(other)"
        };
        *self
            .counts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry((revision.version(), method.to_owned()))
            .or_default() += 1;
    }

    /// The Prometheus exposition text, with `gauges` (name, help, value)
    /// appended.
    pub(crate) fn render(&self, gauges: &[(&str, &str, u64)]) -> String {
        let mut out = String::from(
            "# HELP mcp_shim_requests_total Client messages by protocol revision and method.\n# TYPE mcp_shim_requests_total counter\n",
        );
        for ((rev, method), n) in self.counts.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            out.push_str(&format!(
                "mcp_shim_requests_total{{revision=\"{rev}\",method=\"{}\"}} {n}\n",
                method.replace('"', "'")
            ));
        }
        for (name, help, value) in gauges {
            out.push_str(&format!(
                "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}\n"
            ));
        }
        out
    }
}
