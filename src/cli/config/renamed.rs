//! The option spellings from before durations took a unit.

use std::ffi::OsString;

use super::PROXIES;

/// Spellings of the options that took a number of milliseconds or
/// seconds before durations were written with their unit: the old flag,
/// the new one and the unit the number was in. A clap alias cannot carry
/// the unit, so the old spelling is rewritten before clap reads the line
/// (the same flag then, with the same checks), and a warning says so.
pub(super) const RENAMED: [(&str, &str, &str); 8] = [
    ("--probe-timeout-ms", "--probe-timeout", "ms"),
    ("--request-timeout-s", "--request-timeout", "s"),
    ("--task-ttl-ms", "--task-ttl", "ms"),
    ("--max-task-ttl-ms", "--max-task-ttl", "ms"),
    ("--upstream-ping-ms", "--upstream-ping", "ms"),
    (
        "--upstream-ping-timeout-ms",
        "--upstream-ping-timeout",
        "ms",
    ),
    ("--session-idle-timeout-s", "--session-idle-timeout", "s"),
    ("--read-timeout-s", "--read-timeout", "s"),
];

/// Rewrites the old `-ms`/`-s` spellings of a proxy subcommand's options
/// (see [`RENAMED`]); what follows `--` is the upstream's and is left alone.
pub(super) fn rename_deprecated(argv: Vec<OsString>) -> (Vec<OsString>, Vec<String>) {
    let mut notes = Vec::new();
    let mut out = Vec::with_capacity(argv.len());
    let mut in_proxy = false;
    let mut unit: Option<&str> = None;
    let mut rest = argv.into_iter();
    if let Some(program) = rest.next() {
        out.push(program);
    }
    for token in rest.by_ref() {
        let Some(s) = token.to_str() else {
            out.push(token);
            continue;
        };
        if s == "--" {
            out.push(token);
            break;
        }
        if let Some(u) = unit.take() {
            out.push(with_unit(s, u).into());
            continue;
        }
        if !in_proxy && (PROXIES.contains(&s) || s == "config") {
            in_proxy = true;
        }
        let (flag, value) = match s.split_once('=') {
            Some((f, v)) => (f, Some(v)),
            None => (s, None),
        };
        match RENAMED.iter().find(|(old, _, _)| in_proxy && *old == flag) {
            Some((old, new, u)) => {
                notes.push(format!(
                    "{old} is deprecated: write {new} with a unit (250ms, 30s, 5m; {old} N is {new} N{u})"
                ));
                match value {
                    Some(v) => out.push(format!("{new}={}", with_unit(v, u)).into()),
                    None => {
                        out.push((*new).into());
                        unit = Some(u);
                    }
                }
            }
            None => out.push(token),
        }
    }
    out.extend(rest);
    (out, notes)
}

/// A bare number of the old options with its unit; anything else as it
/// is, for the duration parser to refuse with its own message.
fn with_unit(v: &str, unit: &str) -> String {
    if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) {
        format!("{v}{unit}")
    } else {
        v.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(args: &[&str]) -> Vec<OsString> {
        std::iter::once("mcp-tasks-shim")
            .chain(args.iter().copied())
            .map(OsString::from)
            .collect()
    }

    #[test]
    fn old_spellings_become_the_new_flags_with_their_unit() {
        let (out, notes) = rename_deprecated(argv(&[
            "http",
            "--probe-timeout-ms",
            "250",
            "--read-timeout-s=3",
            "--",
            "server",
            "--probe-timeout-ms",
            "1",
        ]));
        let out: Vec<_> = out.iter().map(|s| s.to_str().unwrap()).collect();
        assert_eq!(
            out,
            [
                "mcp-tasks-shim",
                "http",
                "--probe-timeout",
                "250ms",
                "--read-timeout=3s",
                "--",
                "server",
                "--probe-timeout-ms",
                "1"
            ]
        );
        assert_eq!(notes.len(), 2);
        // Another subcommand's option of the same name is its own.
        let (out, notes) = rename_deprecated(argv(&["reference-server", "--task-ttl-ms", "5"]));
        assert_eq!(out[2], "--task-ttl-ms");
        assert!(notes.is_empty());
    }
}
