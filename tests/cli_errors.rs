//! What the binary says when it refuses to start: options that can never
//! work, a config file with such a value, a `--ledger` it cannot use. Each
//! message must name what to fix (the flag, the file and key, the schemes
//! accepted) and never echo a Redis password.

use std::net::TcpListener;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_mcp-tasks-shim");

/// Runs the binary with `args`, stdin closed. Every case here exits on its
/// own (refused at start, or its upstream `true` exits at once).
fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .expect("run mcp-tasks-shim")
}

/// `stdio` in front of an upstream that exits at once, with `flags`.
fn stdio_with(flags: &[&str]) -> Output {
    let mut args = vec!["stdio"];
    args.extend_from_slice(flags);
    args.extend(["--", "true"]);
    run(&args)
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A 0 that cannot work is a usage error like any other: exit 2 and
/// clap's message naming the flag, before anything starts. An upstream
/// ping timeout of 0 used to become 1 ms and kill a healthy upstream.
#[test]
fn zero_where_it_cannot_work_is_refused_naming_the_flag() {
    for flag in [
        "--upstream-ping-timeout",
        "--page-size",
        "--task-ttl",
        "--max-task-ttl",
        "--max-tasks-per-client",
        "--probe-timeout",
        "--request-timeout",
    ] {
        let out = stdio_with(&[flag, "0"]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{flag}: {err}");
        assert!(
            err.contains(&format!("invalid value '0' for '{flag}"))
                && err.contains("must be at least 1"),
            "{flag}: {err}"
        );
    }
}

/// Zero still means "off" where the help says so.
#[test]
fn zero_that_means_off_is_still_accepted() {
    for flag in ["--upstream-ping", "--max-listen-streams"] {
        let out = stdio_with(&[flag, "0"]);
        let err = stderr(&out);
        assert_ne!(out.status.code(), Some(2), "{flag}: {err}");
        assert!(!err.contains("invalid value"), "{flag}: {err}");
    }
}

#[test]
fn a_zero_page_size_in_the_config_file_names_the_file_and_the_key() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("shim.toml");
    std::fs::write(
        &config,
        "default_poll_interval = \"100ms\"\npage_size = 0\n",
    )
    .expect("write config");
    let out = stdio_with(&["--config", config.to_str().expect("utf-8 path")]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(config.to_str().unwrap()), "{err}");
    assert!(err.contains("page_size"), "{err}");
    assert!(err.contains("at least 1"), "{err}");
}

/// A URL that names no store the shim has is not a file path either.
#[test]
fn a_ledger_url_of_another_scheme_is_refused_naming_the_accepted_ones() {
    for url in [
        "http://foo",
        "HTTPS://user:S3cretPassw0rd@foo/x",
        "rediss://foo",
    ] {
        let out = stdio_with(&["--ledger", url]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{url}: {err}");
        assert!(!err.contains("No such file"), "{url}: {err}");
        assert!(
            err.contains("file path") && err.contains("redis://") && err.contains("redis+unix://"),
            "{url}: {err}"
        );
        assert!(!err.contains("S3cretPassw0rd"), "{url}: {err}");
    }
}

/// URL schemes are case-insensitive (RFC 3986, 3.1): `REDIS://` is Redis.
#[test]
fn an_upper_case_redis_scheme_is_read_as_redis() {
    let port = closed_port();
    let url = format!("REDIS://127.0.0.1:{port}/0");
    let out = stdio_with(&["--ledger", &url]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(!err.contains("cannot open ledger"), "{err}");
    assert!(err.contains("redis: "), "{err}");
}

/// The fatal start-up error echoes the ledger URL, password masked, in
/// both log formats; so does a URL the Redis client cannot parse.
#[test]
fn a_redis_password_never_reaches_stderr() {
    let port = closed_port();
    let cases = [
        (
            format!("redis://:S3cretPassw0rd@127.0.0.1:{port}/99"),
            format!("redis://:***@127.0.0.1:{port}/99"),
        ),
        (
            format!("redis://alice:S3cretPassw0rd@127.0.0.1:{port}/99"),
            format!("redis://alice:***@127.0.0.1:{port}/99"),
        ),
        (
            "redis+unix:///nonexistent/redis.sock?db=2&pass=S3cretPassw0rd".to_owned(),
            "redis+unix:///nonexistent/redis.sock?db=2&pass=***".to_owned(),
        ),
        (
            "redis://:S3cretPassw0rd@127.0.0.1:notaport/99".to_owned(),
            "redis://…".to_owned(),
        ),
    ];
    for (url, shown) in &cases {
        for format in ["text", "json"] {
            let out = run(&[
                "--log",
                "debug",
                "--log-format",
                format,
                "stdio",
                "--ledger",
                url,
                "--",
                "true",
            ]);
            let err = stderr(&out);
            assert_eq!(out.status.code(), Some(1), "{url} {format}: {err}");
            assert!(!err.contains("S3cretPassw0rd"), "{url} {format}: {err}");
            assert!(err.contains(shown.as_str()), "{url} {format}: {err}");
        }
    }
}

/// A Redis that accepts connections and never answers (frozen, or the
/// wrong service) is reported as a timeout with its bound, not as the
/// `EAGAIN` the socket read returns.
#[test]
fn a_redis_that_never_answers_is_reported_as_a_timeout() {
    let silent = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!(
        "redis://127.0.0.1:{}/0",
        silent.local_addr().unwrap().port()
    );
    let started = std::time::Instant::now();
    let out = stdio_with(&["--ledger", &url]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(started.elapsed() < Duration::from_secs(30), "{err}");
    assert!(err.contains("timed out") && err.contains("2s"), "{err}");
    assert!(!err.contains("os error 11"), "{err}");
    drop(silent);
}

/// A local port nothing listens on: bound, then released.
fn closed_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// The start-up refusals an operator meets first say what to do: `http`
/// without an upstream names both ways to give one, an upstream URL
/// without a scheme says to add `http://`, and a `--ledger` in a missing
/// directory names the directory (redb said only "No such file").
#[test]
fn start_up_mistakes_say_what_to_fix() {
    let out = run(&["http"]);
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("-- ") && err.contains("--upstream-url"),
        "{err}"
    );

    let out = run(&[
        "http",
        "--listen",
        "127.0.0.1:0",
        "--upstream-url",
        "127.0.0.1:9/mcp",
    ]);
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("add http://"), "{err}");

    let out = stdio_with(&["--ledger", "/nonexistent-mcp-shim-dir/tasks.redb"]);
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("the directory /nonexistent-mcp-shim-dir does not exist"),
        "{err}"
    );
}

/// Every subcommand answers `--version`.
#[test]
fn every_subcommand_has_a_version() {
    for sub in [
        "stdio",
        "http",
        "translate",
        "compare",
        "replay",
        "demo",
        "reference-server",
    ] {
        let out = run(&[sub, "--version"]);
        let said = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "{sub}: {}", stderr(&out));
        assert!(said.contains(env!("CARGO_PKG_VERSION")), "{sub}: {said}");
    }
}

/// An upstream child that exits at once is one error, said once: no
/// warning about the revision its failed probe would have implied, no
/// second "upstream failed" line before it.
#[test]
fn a_child_that_exits_at_start_logs_only_the_fatal_error() {
    let out = run(&[
        "http",
        "--listen",
        "127.0.0.1:0",
        "--",
        "sh",
        "-c",
        "exit 3",
    ]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.matches("exit status: 3").count(), 1, "{err}");
    assert!(!err.contains("2025-11-25"), "a revision warning: {err}");
    assert!(!err.contains("WARN") && !err.contains("ERROR"), "{err}");
    let last = err.lines().last().unwrap_or_default();
    assert!(last.contains("failed during start-up"), "{err}");
}
