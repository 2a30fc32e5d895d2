//! Options shared by the proxy subcommands, and the config file.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use crate::bridge::BridgeConfig;
use crate::ledger::{DiskLedger, MemoryLedger, RedisLedger, TaskLedger, shared};
use crate::proxy::ProxyOptions;
use crate::translate::tools::TaskPolicy;
use crate::wire::legacy::TaskSupport;

/// Options of the shim's bridges.
#[derive(Debug, Clone, clap::Args)]
pub struct ShimArgs {
    /// `execution.taskSupport` told to legacy clients for one tool
    /// (TOOL=required|optional|forbidden). Repeatable; wins over --config.
    /// A call of a forbidden tool with params.task gets -32601.
    #[arg(long = "task-support", value_name = "TOOL=SUPPORT", value_parser = TaskPolicy::parse_rule)]
    pub task_support: Vec<(String, TaskSupport)>,
    /// TOML config file (see docs/guide.md, "Configuration").
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// `tasks/list` page size [default: 50, or the config file's].
    #[arg(long, value_name = "N", value_parser = at_least_one_of::<usize>)]
    pub page_size: Option<usize>,
    /// Most tasks one client (session or principal) may hold; finished
    /// ones count until their retention (ttl) ends.
    #[arg(long, value_name = "N", default_value_t = 10_000,
          value_parser = at_least_one)]
    pub max_tasks_per_client: u64,
    /// How long to wait for the upstream's answer to `server/discover` (ms).
    #[arg(long, value_name = "MS", default_value_t = 5_000,
          value_parser = at_least_one)]
    pub probe_timeout_ms: u64,
    /// How long any upstream request may take (s). A task may run longer:
    /// the shim's own wait for a task's outcome is renewed while it runs.
    #[arg(long, value_name = "S", default_value_t = 300,
          value_parser = at_least_one)]
    pub request_timeout_s: u64,
    /// Modern clients without the tasks extension calling a legacy tool whose
    /// `taskSupport` is `required`: run it as a task inside the shim and
    /// answer with the final result, instead of `-32021`.
    #[arg(long)]
    pub drive_required_tasks: bool,
    /// The `params.task.ttl` the shim asks a legacy server for (ms).
    #[arg(long, value_name = "MS", value_parser = at_least_one_of::<i64>)]
    pub task_ttl_ms: Option<i64>,
    /// Longest retention granted to a task the shim keeps itself (a
    /// synthetic task for a server's plain answer, its result cached in
    /// the ledger): a client's `params.task.ttl` above it is lowered (ms;
    /// one that is no positive integer is refused with -32602).
    /// Also how long the shim keeps its record of a server's task granted
    /// no ttl (`null`), from its creation.
    #[arg(long, value_name = "MS", default_value_t = 3_600_000,
          value_parser = at_least_one_of::<i64>)]
    pub max_task_ttl_ms: i64,
    /// Keep the task ledger (ownership, cancel pins, cached results) in
    /// this file so a restart loses none of it; created if missing. One
    /// shim process per file. Or a Redis server (`redis://host:port/db`,
    /// `redis+unix:///path/to/socket`) that several shim instances share,
    /// so any of them serves a principal's tasks. Default: in memory.
    #[arg(long, value_name = "PATH|URL")]
    pub ledger: Option<PathBuf>,
    /// With a Redis `--ledger`: the key prefix. Instances that share tasks
    /// use the same one; unrelated deployments on one server, different ones.
    #[arg(long, value_name = "PREFIX", default_value = DEFAULT_LEDGER_PREFIX)]
    pub ledger_prefix: String,
    /// When the upstream child exits, stops answering or writes garbage,
    /// start it again (with backoff) instead of giving up. Requests in
    /// flight at the fault still fail with -32603.
    #[arg(long)]
    pub restart_upstream: bool,
    /// While upstream requests are outstanding, check every MS ms that the
    /// upstream (child or --upstream-url) still answers (`ping`, or
    /// `server/discover` for a 2026-07-28 server); 0 turns the check off.
    #[arg(long, value_name = "MS", default_value_t = 5_000)]
    pub upstream_ping_ms: u64,
    /// A liveness check unanswered for MS ms means the upstream hung: what
    /// waits on it fails with -32603 and a child is killed (and restarted
    /// with --restart-upstream); an HTTP upstream is tried again by the
    /// next request.
    #[arg(long, value_name = "MS", default_value_t = 15_000,
          value_parser = at_least_one)]
    pub upstream_ping_timeout_ms: u64,
    /// Legacy clients waiting on a 2026-07-28 upstream's task: at most N
    /// `subscriptions/listen` streams (one per watched task) so the wait
    /// ends when the upstream pushes the change; polling continues
    /// regardless. 0: poll only.
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub max_listen_streams: usize,
}

/// The Redis key prefix when `--ledger-prefix` is not given.
const DEFAULT_LEDGER_PREFIX: &str = "mcp-tasks-shim";

/// A count or duration where 0 would make the shim useless (every task
/// refused, every request timed out at once).
pub(crate) fn at_least_one(s: &str) -> Result<u64, String> {
    at_least_one_of(s)
}

/// [`at_least_one`] for the integer types other options have: one
/// message for all of them, where clap's ranges each word it their own way.
fn at_least_one_of<T>(s: &str) -> Result<T, String>
where
    T: std::str::FromStr + PartialOrd + From<u8>,
    T::Err: std::fmt::Display,
{
    match s.parse::<T>() {
        Ok(n) if n < T::from(1) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

/// The config file's `page_size`: 0 is refused while the file is read, so
/// the error names the file and the key like any other bad value in it.
fn page_size_in_file<'de, D>(d: D) -> Result<Option<usize>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    match Option::<usize>::deserialize(d)? {
        Some(0) => Err(serde::de::Error::custom("page_size must be at least 1")),
        n => Ok(n),
    }
}

/// The config file. Every key is optional.
///
/// ```toml
/// page_size = 50
/// default_task_support = "optional"
/// [task_support]
/// slow_compute = "required"
/// ```
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ConfigFile {
    /// `tasks/list` page size.
    #[serde(default, deserialize_with = "page_size_in_file")]
    pub page_size: Option<usize>,
    /// Support for tools not listed in `task_support`.
    pub default_task_support: Option<TaskSupport>,
    /// Per-tool support.
    #[serde(default)]
    pub task_support: HashMap<String, TaskSupport>,
    /// Poll interval when the upstream suggests none (ms).
    pub default_poll_ms: Option<u64>,
    /// `http`: `--max-anonymous-sessions`.
    #[serde(default, deserialize_with = "at_least_one_in_file")]
    pub max_anonymous_sessions: Option<u64>,
    /// `http`: `--max-sessions-per-principal`.
    #[serde(default, deserialize_with = "at_least_one_in_file")]
    pub max_sessions_per_principal: Option<u64>,
    /// `http`: `--accept-missing-mcp-name`.
    #[serde(default)]
    pub accept_missing_mcp_name: bool,
}

/// A count in the config file where 0 would refuse everything (every
/// session): refused while the file is read, naming the file and the key.
fn at_least_one_in_file<'de, D>(d: D) -> Result<Option<u64>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    match Option::<u64>::deserialize(d)? {
        Some(0) => Err(serde::de::Error::custom("must be at least 1")),
        n => Ok(n),
    }
}

impl ShimArgs {
    /// The task ledger these arguments ask for: in memory, or the file of
    /// `--ledger`. Per-process scopes (stdio sessions, HTTP session ids)
    /// belong to clients of an earlier process that no client can reach
    /// again, whichever command made them, so they are swept from a
    /// durable file at start.
    /// Async for the Redis ledger, whose connection runs on the runtime
    /// this is awaited on.
    pub async fn open_ledger(&self) -> Result<Arc<dyn TaskLedger>, String> {
        let cap = usize::try_from(self.max_tasks_per_client).unwrap_or(usize::MAX);
        // A value that is not UTF-8 is no URL: a file path.
        let scheme = self
            .ledger
            .as_deref()
            .and_then(|p| p.to_str())
            .and_then(shared::url_scheme);
        let redis = scheme
            .as_deref()
            .is_some_and(|s| shared::SCHEMES.contains(&s));
        if let Some(scheme) = scheme.filter(|_| !redis) {
            // Read as a file path it failed with "No such file", which
            // hid the mistake; a file so named is still `./{scheme}://…`.
            let tls = if scheme == "rediss" {
                " (no TLS to Redis here: tunnel it)"
            } else {
                ""
            };
            return Err(format!(
                "--ledger {scheme}://…: not a ledger the shim can use{tls}: give a file \
                 path, redis://HOST[:PORT][/DB] or redis+unix:///PATH/TO/SOCKET"
            ));
        }
        if !redis && self.ledger_prefix != DEFAULT_LEDGER_PREFIX {
            return Err("--ledger-prefix applies to a redis:// --ledger only".into());
        }
        let Some(path) = &self.ledger else {
            return Ok(Arc::new(MemoryLedger::new(cap)));
        };
        if let Some(url) = path.to_str().filter(|_| redis) {
            // No sweep here: the per-process scopes in a shared ledger may
            // belong to live sessions of other instances. Their records
            // expire with their TTL like any other.
            let ledger = RedisLedger::open(url, &self.ledger_prefix, cap)
                .await
                .map_err(|e| format!("--ledger {}: {e}", shared::redacted(url)))?;
            tracing::info!(prefix = %self.ledger_prefix, "task ledger shared in redis");
            return Ok(Arc::new(ledger));
        }
        // redb's "No such file or directory" does not say that it is the
        // directory that is missing: the shim creates the file, not that.
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
            && !dir.is_dir()
        {
            return Err(format!(
                "--ledger {}: the directory {} does not exist (the shim creates the ledger file, not its directory)",
                path.display(),
                dir.display()
            ));
        }
        let ledger = DiskLedger::open(path, cap).map_err(|e| e.to_string())?;
        let mut swept = 0;
        // Only the scopes that end with their session (see `scope`): no
        // principal's key starts with their prefixes.
        for prefix in crate::scope::Scope::session_key_prefixes() {
            swept += ledger
                .drop_scopes_with_prefix(prefix)
                .map_err(|e| e.to_string())?;
        }
        if swept > 0 {
            tracing::info!(
                swept,
                "dropped tasks of sessions that ended with the last process"
            );
        }
        Ok(Arc::new(ledger))
    }

    /// The `--config` file, or an empty one without it.
    pub(crate) fn config_file(&self) -> Result<ConfigFile, String> {
        let Some(path) = &self.config else {
            return Ok(ConfigFile::default());
        };
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read config {}: {e}", path.display()))?;
        toml::from_str::<ConfigFile>(&text)
            .map_err(|e| format!("bad config {}: {e}", path.display()))
    }

    /// The proxy options these arguments describe.
    pub fn proxy_options(&self) -> Result<ProxyOptions, String> {
        self.proxy_options_with(self.config_file()?)
    }

    /// [`ShimArgs::proxy_options`] with the config file already read.
    pub(crate) fn proxy_options_with(&self, file: ConfigFile) -> Result<ProxyOptions, String> {
        let mut bridge = BridgeConfig::default();
        if let Some(n) = self.page_size.or(file.page_size) {
            bridge.page_size = n;
        }
        if let Some(ms) = file.default_poll_ms {
            bridge.default_poll_ms = ms;
        }
        bridge.drive_required_tasks = self.drive_required_tasks;
        bridge.max_listen_streams = self.max_listen_streams;
        bridge.max_task_ttl_ms = self.max_task_ttl_ms;
        bridge.task_ttl_ms = self.task_ttl_ms;
        let mut per_tool = file.task_support;
        per_tool.extend(self.task_support.iter().cloned());
        if !per_tool.is_empty() || file.default_task_support.is_some() {
            bridge.policy = Some(TaskPolicy {
                // Unset: still decided by what the upstream offers.
                default: file.default_task_support,
                per_tool,
            });
        }
        Ok(ProxyOptions {
            bridge,
            probe_timeout: Duration::from_millis(self.probe_timeout_ms),
            request_timeout: Duration::from_secs(self.request_timeout_s),
            ping_interval: (self.upstream_ping_ms > 0)
                .then(|| Duration::from_millis(self.upstream_ping_ms)),
            ping_timeout: Duration::from_millis(self.upstream_ping_timeout_ms),
            restart_upstream: self.restart_upstream,
            ..ProxyOptions::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        shim: ShimArgs,
    }

    fn policy(args: &[&str]) -> Option<TaskPolicy> {
        let cli = Cli::try_parse_from(std::iter::once("x").chain(args.iter().copied())).unwrap();
        cli.shim.proxy_options().unwrap().bridge.policy
    }

    #[test]
    fn a_rule_for_one_tool_leaves_the_others_to_the_upstream() {
        assert_eq!(policy(&[]), None);
        let p = policy(&["--task-support", "b=forbidden"]).unwrap();
        // Not `optional`: an upstream without tasks still makes it
        // `forbidden` (the engine decides from server/discover).
        assert_eq!(p.default, None);
        assert_eq!(p.per_tool.get("b"), Some(&TaskSupport::Forbidden));
    }

    #[test]
    fn zero_where_it_would_break_everything_is_refused() {
        for flag in [
            "--request-timeout-s",
            "--probe-timeout-ms",
            "--max-tasks-per-client",
            "--upstream-ping-timeout-ms",
            "--page-size",
            "--task-ttl-ms",
            "--max-task-ttl-ms",
        ] {
            let e = Cli::try_parse_from(["x", flag, "0"]).unwrap_err();
            assert!(e.to_string().contains("at least 1"), "{flag}: {e}");
        }
    }

    #[test]
    fn session_caps_in_the_config_file_must_be_at_least_one() {
        let file: ConfigFile = toml::from_str(
            "max_anonymous_sessions = 5\nmax_sessions_per_principal = 2\naccept_missing_mcp_name = true",
        )
        .unwrap();
        assert_eq!(file.max_anonymous_sessions, Some(5));
        assert_eq!(file.max_sessions_per_principal, Some(2));
        assert!(file.accept_missing_mcp_name);
        for key in ["max_anonymous_sessions", "max_sessions_per_principal"] {
            let e = toml::from_str::<ConfigFile>(&format!("{key} = 0")).unwrap_err();
            assert!(e.to_string().contains("at least 1"), "{key}: {e}");
        }
    }

    #[test]
    fn a_config_file_may_leave_the_page_size_out() {
        let file: ConfigFile = toml::from_str("default_poll_ms = 100").unwrap();
        assert_eq!(file.page_size, None);
        let file: ConfigFile = toml::from_str("page_size = 7").unwrap();
        assert_eq!(file.page_size, Some(7));
    }
}
