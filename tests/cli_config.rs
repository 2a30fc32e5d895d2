//! The configuration surface of the real binary: each option as a flag,
//! an `MCP_SHIM_*` variable and a config-file key, the flag winning over
//! the variable, the variable over the file, the file over the default;
//! `mcp-tasks-shim config` printing the merge with secrets masked;
//! `--listen` forms; the old `-ms`/`-s` spellings.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc::channel;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_mcp-tasks-shim");

/// Bound on the wait for a shim to start listening.
const START: Duration = Duration::from_secs(30);

/// The binary with `args` and exactly the `MCP_SHIM_*` variables in
/// `env` (none inherited from whoever runs the tests).
fn shim(args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(BIN);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("MCP_SHIM_") {
            cmd.env_remove(k);
        }
    }
    cmd.args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null());
    cmd
}

fn output(args: &[&str], env: &[(&str, &str)]) -> Output {
    shim(args, env)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .expect("run mcp-tasks-shim")
}

/// A config file with `text`, in a directory that lives as long as the
/// returned guard.
fn config_file(text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("shim.toml");
    std::fs::write(&path, text).expect("write config");
    (dir, path)
}

fn utf8(p: &Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}

/// `config`'s line for `key`: its value (TOML) and its source.
fn shown(stdout: &str, key: &str) -> (String, String) {
    let line = stdout
        .lines()
        .find(|l| l.split_whitespace().next() == Some(key))
        .unwrap_or_else(|| panic!("no line for {key} in:\n{stdout}"));
    let (_, rest) = line.split_once('=').expect("key = value");
    let (value, source) = rest.rsplit_once('#').expect("value  # source");
    (value.trim().to_owned(), source.trim().to_owned())
}

/// `mcp-tasks-shim config <args>` with `env`: stdout, after checking it
/// succeeded.
fn config(args: &[&str], env: &[(&str, &str)]) -> String {
    let mut all = vec!["config"];
    all.extend_from_slice(args);
    let out = output(&all, env);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "config {args:?}: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Three options of different kinds (a duration, a count, an address),
/// each given by the file, then by the environment as well, then by a
/// flag as well: the more direct source wins each time, and `config`
/// says which it was.
#[test]
fn a_flag_beats_the_environment_which_beats_the_file_which_beats_the_default() {
    let (_dir, file) =
        config_file("probe_timeout = \"2s\"\nmax_sessions = 7\nlisten = \"localhost:9001\"\n");
    let file = utf8(&file);
    let cases = [
        (
            "probe_timeout",
            "--probe-timeout",
            "MCP_SHIM_PROBE_TIMEOUT",
            ["\"5s\"", "\"2s\"", "\"3m\"", "\"250ms\""],
        ),
        (
            "max_sessions",
            "--max-sessions",
            "MCP_SHIM_MAX_SESSIONS",
            ["10000", "7", "8", "9"],
        ),
        (
            "listen",
            "--listen",
            "MCP_SHIM_LISTEN",
            [
                "\"127.0.0.1:8080\"",
                "\"localhost:9001\"",
                "\":9002\"",
                "\"[::1]:9003\"",
            ],
        ),
    ];
    for (key, flag, env, [default, in_file, in_env, in_flag]) in cases {
        let out = config(&[], &[]);
        assert_eq!(
            shown(&out, key),
            (default.into(), "default".into()),
            "{key}"
        );
        let out = config(&["--config", file], &[]);
        assert_eq!(shown(&out, key), (in_file.into(), "file".into()), "{key}");
        let env_value = in_env.trim_matches('"');
        let out = config(&["--config", file], &[(env, env_value)]);
        assert_eq!(
            shown(&out, key),
            (in_env.into(), format!("env {env}")),
            "{key}"
        );
        let flag_value = in_flag.trim_matches('"');
        let out = config(&["--config", file, flag, flag_value], &[(env, env_value)]);
        assert_eq!(
            shown(&out, key),
            (in_flag.into(), format!("flag {flag}")),
            "{key}"
        );
    }
    // The file named through the environment, as any other option.
    let out = config(&[], &[("MCP_SHIM_CONFIG", file)]);
    assert_eq!(shown(&out, "max_sessions"), ("7".into(), "file".into()));
    assert!(
        out.contains(&format!("# config file: {file} (env MCP_SHIM_CONFIG)")),
        "{out}"
    );
}

/// What is merged is what runs: a shim whose only address is the file's
/// listens there, and one whose environment says otherwise listens there.
#[test]
fn the_merged_address_is_the_one_served() {
    let (_dir, file) = config_file("listen = \"localhost:0\"\nmax_sessions = 3\n");
    let mut from_file = Serving::start(&[], &[("MCP_SHIM_CONFIG", utf8(&file))]);
    from_file.healthz();
    // The environment's `:0` over the file's host: loopback, by number.
    let mut from_env = Serving::start(&["--config", utf8(&file)], &[("MCP_SHIM_LISTEN", ":0")]);
    assert!(from_env.addr.starts_with("127.0.0.1:"), "{}", from_env.addr);
    from_env.healthz();
}

/// Tokens given in the environment and in the file are masked (their
/// principal shown), and so is a Redis password; nothing secret reaches
/// stdout or stderr.
#[test]
fn config_prints_where_each_value_came_from_and_masks_secrets() {
    let (_dir, file) = config_file(
        "tokens = [\"f1l3s3cret=bob\"]\nledger = \"redis://:pa55word@127.0.0.1:1/0\"\nrequire_principal = true\n",
    );
    let file = utf8(&file);
    let out = output(&["config", "--config", file], &[]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        shown(&stdout, "tokens"),
        ("[\"***=bob\"]".into(), "file".into())
    );
    assert_eq!(
        shown(&stdout, "require_principal"),
        ("true".into(), "file".into())
    );
    let (ledger, source) = shown(&stdout, "ledger");
    assert_eq!(source, "file");
    assert!(
        ledger.contains("127.0.0.1") && !ledger.contains("pa55word"),
        "{ledger}"
    );
    for text in [&stdout, &stderr] {
        assert!(
            !text.contains("f1l3s3cret") && !text.contains("pa55word"),
            "{text}"
        );
    }

    let out = output(
        &["config", "--config", file],
        &[("MCP_SHIM_TOKENS", "3nvs3cret=alice,other=carol")],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        shown(&stdout, "tokens"),
        (
            "[\"***=alice\", \"***=carol\"]".into(),
            "env MCP_SHIM_TOKENS".into()
        )
    );
    assert!(!stdout.contains("3nvs3cret"), "{stdout}");
    // Nor does --help show the environment's tokens.
    let help = output(
        &["http", "--help"],
        &[("MCP_SHIM_TOKENS", "3nvs3cret=alice")],
    );
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("MCP_SHIM_TOKENS") && !help.contains("3nvs3cret"),
        "{help}"
    );
}

/// `config stdio` shows stdio's options only, and says which keys of the
/// file are another subcommand's.
#[test]
fn config_stdio_shows_stdios_options_and_the_keys_it_ignores() {
    let (_dir, file) = config_file("listen = \":9000\"\npage_size = 3\n");
    let out = config(&["stdio", "--config", utf8(&file)], &[]);
    assert_eq!(shown(&out, "page_size"), ("3".into(), "file".into()));
    assert!(!out.lines().any(|l| l.starts_with("listen")), "{out}");
    assert!(out.contains("ignored here: listen"), "{out}");
    // A switch as environment files write it.
    let out = config(&["stdio"], &[("MCP_SHIM_RESTART_UPSTREAM", "1")]);
    assert_eq!(
        shown(&out, "restart_upstream"),
        ("true".into(), "env MCP_SHIM_RESTART_UPSTREAM".into())
    );
}

/// A key no subcommand has is refused naming it and the file (exit 1),
/// before anything starts; a dashed spelling is told its key.
#[test]
fn an_unknown_key_in_the_file_is_an_error_naming_the_key() {
    for (text, needle) in [
        ("max_sesions = 5\n", "unknown key `max_sesions`"),
        ("max-sessions = 5\n", "(write max_sessions)"),
        ("probe_timeout = 5000\n", "probe_timeout = 5000"),
    ] {
        let (_dir, file) = config_file(text);
        let out = output(&["stdio", "--config", utf8(&file), "--", "true"], &[]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{text}: {err}");
        assert!(
            err.contains(needle) && err.contains(utf8(&file)),
            "{text}: {err}"
        );
    }
}

/// A bad value in the environment names its variable (the flag was never
/// typed), without echoing a token; exit 2, as for a bad flag.
#[test]
fn a_bad_value_in_the_environment_names_the_variable() {
    let out = output(&["http", "--", "true"], &[("MCP_SHIM_MAX_SESSIONS", "0")]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("MCP_SHIM_MAX_SESSIONS=0: must be at least 1"),
        "{err}"
    );
    let out = output(
        &["http", "--", "true"],
        &[("MCP_SHIM_TOKENS", "n0equalss3cret")],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("MCP_SHIM_TOKENS") && !err.contains("n0equalss3cret"),
        "{err}"
    );
}

/// The file's `upstream_url` does not override a command given after `--`.
#[test]
fn a_command_after_the_double_dash_wins_over_the_files_upstream_url() {
    let (_dir, file) = config_file("upstream_url = \"http://127.0.0.1:1/mcp\"\n");
    let out = config(&["--config", utf8(&file), "--", "my-server"], &[]);
    assert!(out.contains("# upstream command: -- my-server"), "{out}");
    assert!(out.contains("# upstream_url"), "{out}");
    assert!(out.contains("ignored here: upstream_url"), "{out}");
    let out = config(&["--config", utf8(&file)], &[]);
    assert_eq!(
        shown(&out, "upstream_url"),
        ("\"http://127.0.0.1:1/mcp\"".into(), "file".into())
    );
}

/// The file's old `default_poll_ms` still reads, as the duration it meant,
/// with a warning.
#[test]
fn the_old_poll_key_of_the_file_still_reads() {
    let (_dir, file) = config_file("default_poll_ms = 100\n");
    let out = output(&["config", "stdio", "--config", utf8(&file)], &[]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        shown(&stdout, "default_poll_interval"),
        ("\"100ms\"".into(), "file".into())
    );
    assert!(stderr.contains("default_poll_ms is deprecated"), "{stderr}");
}

/// `:0` (loopback) and a host name both serve.
#[test]
fn listen_takes_a_bare_port_and_a_host_name() {
    let mut bare = Serving::start(&["--listen", ":0"], &[]);
    assert!(bare.addr.starts_with("127.0.0.1:"), "{}", bare.addr);
    bare.healthz();
    let mut named = Serving::start(&["--listen", "localhost:0"], &[]);
    named.healthz();
    let out = output(
        &["http", "--listen", "no-such-host.invalid:0", "--", "true"],
        &[],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("--listen no-such-host.invalid:0: cannot resolve"),
        "{err}"
    );
}

/// Scripts written for the `-ms`/`-s` flags keep working, with a warning
/// naming the new spelling.
#[test]
fn the_old_millisecond_and_second_spellings_still_work() {
    let out = output(
        &[
            "config",
            "--probe-timeout-ms",
            "250",
            "--read-timeout-s=7",
            "--upstream-ping-ms",
            "0",
        ],
        &[],
    );
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    assert_eq!(shown(&stdout, "probe_timeout").0, "\"250ms\"");
    assert_eq!(shown(&stdout, "read_timeout").0, "\"7s\"");
    assert_eq!(shown(&stdout, "upstream_ping").0, "\"0ms\"");
    assert!(
        stderr.contains("--probe-timeout-ms is deprecated: write --probe-timeout"),
        "{stderr}"
    );
    let mut old = Serving::start(
        &["--listen", "127.0.0.1:0", "--probe-timeout-ms", "60000"],
        &[],
    );
    old.healthz();
}

/// `mcp-tasks-shim http <flags> -- <modern reference server>`, once it
/// listens.
struct Serving {
    child: Child,
    addr: String,
}

impl Serving {
    fn start(flags: &[&str], env: &[(&str, &str)]) -> Serving {
        let mut args = vec!["http"];
        args.extend_from_slice(flags);
        args.extend(["--", BIN, "reference-server", "--revision", "2026-07-28"]);
        let mut child = shim(&args, env)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn mcp-tasks-shim http");
        let stderr = child.stderr.take().expect("piped stderr");
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                match line.split("listening on http://").nth(1) {
                    Some(rest) if tx.is_some() => {
                        let addr = rest.trim().trim_end_matches("/mcp").to_owned();
                        let _ = tx.take().map(|tx| tx.send(addr));
                    }
                    _ => eprintln!("[shim] {line}"),
                }
            }
        });
        let addr = rx
            .recv_timeout(START)
            .unwrap_or_else(|_| panic!("http {flags:?} did not listen within {START:?}"));
        Serving { child, addr }
    }

    /// `GET /healthz` answers 200.
    fn healthz(&mut self) {
        let mut s = TcpStream::connect(&self.addr).expect("connect to the shim");
        s.set_read_timeout(Some(START)).expect("read timeout");
        write!(
            s,
            "GET /healthz HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            self.addr
        )
        .expect("send GET");
        let mut answer = String::new();
        let _ = s.read_to_string(&mut answer);
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
