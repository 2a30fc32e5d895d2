//! Lines the shim writes to stderr itself, outside `tracing`: the address
//! it listens on (whatever the log level, since a client needs it), and
//! what the upstream child writes to its own stderr. Under
//! `--log-format json` they are JSON objects shaped like the log
//! events (`timestamp`, `level`, `fields.message`, `target`), so that
//! every stderr line is one object for a log collector.

use std::sync::atomic::{AtomicBool, Ordering};

static JSON: AtomicBool = AtomicBool::new(false);

/// Writes the lines of [`say`] as JSON objects from now on.
pub(crate) fn use_json() {
    JSON.store(true, Ordering::Relaxed);
}

/// Writes one line to stderr: `text` as it is, or, in JSON mode,
/// `message` as an `INFO` event of `target`.
pub(crate) fn say(target: &str, text: &str, message: &str) {
    line("INFO", target, text, message);
}

/// [`say`] for the error a run ends with.
pub(crate) fn fail(text: &str, message: &str) {
    line("ERROR", "mcp_tasks_shim", text, message);
}

/// `eprintln!` panics when stderr is gone (a closed pipe): a log line
/// nobody can read must not turn into a crash, so write errors are dropped.
fn line(level: &str, target: &str, text: &str, message: &str) {
    use std::io::Write;
    let mut err = std::io::stderr().lock();
    let _ = if JSON.load(Ordering::Relaxed) {
        writeln!(err, "{}", json_line(level, target, message))
    } else {
        writeln!(err, "{text}")
    };
}

fn json_line(level: &str, target: &str, message: &str) -> serde_json::Value {
    serde_json::json!({
        "timestamp": crate::ids::now_iso(),
        "level": level,
        "fields": {"message": message},
        "target": target,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_json_line_is_one_object_whatever_the_message() {
        let line = super::json_line("INFO", "upstream", "a \"quoted\"\nline").to_string();
        assert!(!line.contains('\n'), "{line}");
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["fields"]["message"], "a \"quoted\"\nline");
        assert_eq!(v["target"], "upstream");
    }
}
