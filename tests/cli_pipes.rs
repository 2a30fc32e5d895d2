//! The binary when its own streams misbehave, or its log filter is wrong:
//! a reader that stops early, a stderr nobody reads, a bad `MCP_SHIM_LOG`.
//! Each is a user's shell pipeline, not a protocol peer: exit codes and
//! messages are what they see.

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use support::wire::shim_bin;

/// Waits (bounded) for `child` and returns its exit code.
fn exit_code(child: &mut std::process::Child) -> i32 {
    support::wire::exited_within(child, Duration::from_secs(30), "the shim")
        .code()
        .unwrap_or(-1)
}

/// `demo | head -1`: the reader has what it wanted; the demo ends quietly
/// with 0, not "Broken pipe" and 1.
#[test]
fn demo_into_a_reader_that_stops_exits_quietly() {
    let mut child = Command::new(shim_bin())
        .arg("demo")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.contains("2025-11-25"), "{first}");
    // The reader is dropped here: the demo's next writes meet a closed pipe.
    let code = exit_code(&mut child);
    let mut stderr = String::new();
    let _ = std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr);
    assert_eq!(code, 0, "{stderr}");
    assert!(!stderr.contains("Broken pipe"), "{stderr}");
}

/// A stderr nobody reads (its pipe closed) is no reason to crash: the
/// error a run ends with cannot be shown, but the exit code still says
/// what happened (1, not the 101 of a panic).
#[test]
fn a_closed_stderr_does_not_turn_an_error_into_a_crash() {
    let config = support::wire::temp_path("bad-config.toml");
    std::fs::write(&config, "page_size = \"x\"\n").unwrap();
    for _ in 0..5 {
        let mut child = Command::new(shim_bin())
            .args(["stdio", "--config"])
            .arg(&config)
            .args(["--", "true"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stderr.take());
        assert_eq!(exit_code(&mut child), 1);
    }
    let _ = std::fs::remove_file(&config);
}

/// A bad filter in `MCP_SHIM_LOG` is named as coming from there: a user
/// who typed no `--log` would look for it in vain.
#[test]
fn a_bad_log_filter_names_where_it_came_from() {
    for (env, flag, named) in [
        (Some("bad[["), None, "MCP_SHIM_LOG \"bad[[\""),
        (None, Some("bad[["), "--log \"bad[[\""),
        (Some("info"), Some("bad[["), "--log \"bad[[\""),
    ] {
        let mut cmd = Command::new(shim_bin());
        cmd.env_remove("MCP_SHIM_LOG");
        if let Some(v) = env {
            cmd.env("MCP_SHIM_LOG", v);
        }
        if let Some(v) = flag {
            cmd.args(["--log", v]);
        }
        let out = cmd
            .args(["stdio", "--", "true"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(named), "{env:?} {flag:?}: {stderr}");
    }
}

/// `completions <shell>` prints a script for each shell clap_complete
/// knows, naming the subcommands; a closed pipe is no crash.
#[test]
fn completions_are_generated_for_each_shell() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcp-tasks-shim"))
            .args(["completions", shell])
            .output()
            .expect("run completions");
        let script = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{shell}");
        for sub in ["stdio", "http", "compare", "reference-server"] {
            assert!(script.contains(sub), "{shell} completes {sub}");
        }
    }
}
