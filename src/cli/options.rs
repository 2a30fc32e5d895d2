//! Options shared by the proxy subcommands, and the config file.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::bridge::BridgeConfig;
use crate::driver::stdio::ProxyOptions;
use crate::ledger::{DiskLedger, MemoryLedger, RedisLedger, TaskLedger, shared};
use crate::translate::tools::TaskPolicy;
use crate::wire::legacy::TaskSupport;

/// Options of the shim's bridges.
///
/// Every option is also an `MCP_SHIM_*` environment variable and a key of
/// the `--config` file (see [`super::config`]), so the defaults and
/// checks here are the only ones.
#[derive(Debug, Clone, clap::Args)]
pub struct ShimArgs {
    /// TOML config file: keys are the options' names with `_` for `-`
    /// (`max_sessions = 200`, `probe_timeout = "5s"`).
    ///
    /// Flags and MCP_SHIM_* variables win over it (see docs/guide.md,
    /// "Configuration").
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// When the upstream child exits, stops answering or writes garbage, start
    /// it again (with backoff) instead of giving up.
    ///
    /// Requests in flight at the fault still fail with -32603.
    #[arg(long, help_heading = UPSTREAM)]
    pub restart_upstream: bool,
    /// Legacy clients waiting on a 2026-07-28 upstream's task: at most N
    /// `subscriptions/listen` streams (one per watched task) so the wait
    /// ends when the upstream pushes the change; polling continues
    /// regardless. 0: poll only.
    #[arg(long, value_name = "N", default_value_t = 256, help_heading = UPSTREAM)]
    pub max_listen_streams: usize,
    /// `execution.taskSupport` told to legacy clients for one tool
    /// (TOOL=required|optional|forbidden).
    ///
    /// Repeatable; replaces the config file's list. A call of a forbidden tool
    /// with params.task gets -32601.
    #[arg(long = "task-support", value_name = "TOOL=SUPPORT", value_parser = TaskPolicy::parse_rule,
          help_heading = TASKS)]
    pub task_support: Vec<(String, TaskSupport)>,
    /// `execution.taskSupport` of the tools no --task-support names
    /// [default: decided by what the upstream offers].
    #[arg(long, value_name = "SUPPORT", value_parser = parse_support, help_heading = TASKS)]
    pub default_task_support: Option<TaskSupport>,
    /// `tasks/list` page size.
    #[arg(long, value_name = "N", default_value_t = 50, value_parser = at_least_one_of::<usize>,
          help_heading = TASKS)]
    pub page_size: usize,
    /// How often a waiting legacy client's task is polled when the
    /// upstream suggests no interval.
    #[arg(long, value_name = "DURATION", default_value = "500ms", value_parser = positive_millis,
          help_heading = TASKS)]
    pub default_poll_interval: Duration,
    /// Most tasks one client (session or principal) may hold; finished
    /// ones count until their retention (ttl) ends.
    #[arg(long, value_name = "N", default_value_t = 10_000,
          value_parser = at_least_one, help_heading = TASKS)]
    pub max_tasks_per_client: u64,
    /// How long to wait for the upstream's answer to `server/discover`.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = positive_millis,
          help_heading = TIMEOUTS)]
    pub probe_timeout: Duration,
    /// How long any upstream request may take.
    ///
    /// A task may run longer: the shim's own wait for a task's outcome is
    /// renewed while it runs.
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = positive_millis,
          help_heading = TIMEOUTS)]
    pub request_timeout: Duration,
    /// Modern clients without the tasks extension calling a legacy tool whose
    /// `taskSupport` is `required`: run it as a task inside the shim and
    /// answer with the final result, instead of `-32021`.
    #[arg(long, help_heading = TASKS)]
    pub drive_required_tasks: bool,
    /// The `params.task.ttl` the shim asks a legacy server for
    /// [default: the client's, or none].
    #[arg(long, value_name = "DURATION", value_parser = positive_millis, help_heading = TASKS)]
    pub task_ttl: Option<Duration>,
    /// Longest retention granted to a task the shim keeps itself (a
    /// synthetic task for a server's plain answer, its result cached in
    /// the ledger): a client's `params.task.ttl` above it is lowered (one
    /// that is no positive integer is refused with -32602).
    /// Also how long the shim keeps its record of a server's task granted
    /// no ttl (`null`), from its creation.
    #[arg(long, value_name = "DURATION", default_value = "1h", value_parser = positive_millis,
          help_heading = TASKS)]
    pub max_task_ttl: Duration,
    /// Keep the task ledger (ownership, cancel pins, cached results) in this
    /// file so a restart loses none of it; created if missing.
    ///
    /// One shim process per file. Or a Redis server (`redis://host:port/db`,
    /// `redis+unix:///path/to/socket`) that several shim instances share, so
    /// any of them serves a principal's tasks. Default: in memory.
    #[arg(long, value_name = "PATH|URL", help_heading = TASKS)]
    pub ledger: Option<PathBuf>,
    /// With a Redis `--ledger`: the key prefix.
    ///
    /// Instances that share tasks use the same one; unrelated deployments on
    /// one server, different ones.
    #[arg(long, value_name = "PREFIX", default_value = DEFAULT_LEDGER_PREFIX, help_heading = TASKS)]
    pub ledger_prefix: String,
    /// While upstream requests are outstanding, check this often that the
    /// upstream (child or --upstream-url) still answers (`ping`, or
    /// `server/discover` for a 2026-07-28 server); 0 turns the check off.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = duration,
          help_heading = TIMEOUTS)]
    pub upstream_ping: Duration,
    /// A liveness check unanswered this long means the upstream hung: what
    /// waits on it fails with -32603 and a child is killed (and restarted
    /// with --restart-upstream); an HTTP upstream is tried again by the
    /// next request.
    #[arg(long, value_name = "DURATION", default_value = "15s",
          value_parser = positive_millis, help_heading = TIMEOUTS)]
    pub upstream_ping_timeout: Duration,
}

/// `--help` sections. Each option names one, so that `--help` reads by
/// topic rather than by the order the fields were written in.
pub(crate) const UPSTREAM: &str = "Upstream";
/// See [`UPSTREAM`].
pub(crate) const LISTENING: &str = "Listening";
/// See [`UPSTREAM`].
pub(crate) const SESSIONS: &str = "Sessions & principals";
/// See [`UPSTREAM`].
pub(crate) const TASKS: &str = "Tasks";
/// See [`UPSTREAM`].
pub(crate) const TIMEOUTS: &str = "Timeouts";
/// See [`UPSTREAM`].
pub(crate) const RECORDING: &str = "Recording";
/// See [`UPSTREAM`].
pub(crate) const LOGGING: &str = "Logging";

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

/// A duration as people write it (`30s`, `5m`, `250ms`, `1h 30m`); `0`
/// alone is zero.
pub(crate) fn duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s.trim())
        .map_err(|e| format!("{e} (write a duration such as 30s, 5m or 250ms)"))
}

/// A [`duration`] of at least a millisecond, where 0 would make the shim
/// useless (every request timed out at once, every task expired), and
/// which the shim counts in milliseconds.
pub(crate) fn positive_millis(s: &str) -> Result<Duration, String> {
    match duration(s)? {
        d if d < Duration::from_millis(1) => Err("must be at least 1ms".into()),
        d => Ok(d),
    }
}

/// A duration in whole milliseconds, as the wire's `ttl` counts them.
pub(crate) fn millis_i64(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

fn parse_support(s: &str) -> Result<TaskSupport, String> {
    s.parse()
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
        let swept = ledger.drop_session_scopes().map_err(|e| e.to_string())?;
        if swept > 0 {
            tracing::info!(
                swept,
                "dropped tasks of sessions that ended with the last process"
            );
        }
        Ok(Arc::new(ledger))
    }

    /// The proxy options these arguments describe.
    pub fn proxy_options(&self) -> Result<ProxyOptions, String> {
        let per_tool: HashMap<_, _> = self.task_support.iter().cloned().collect();
        // Unset: still decided by what the upstream offers.
        let policy =
            (!per_tool.is_empty() || self.default_task_support.is_some()).then_some(TaskPolicy {
                default: self.default_task_support,
                per_tool,
            });
        let bridge = BridgeConfig {
            page_size: self.page_size,
            default_poll_ms: u64::try_from(self.default_poll_interval.as_millis())
                .unwrap_or(u64::MAX),
            drive_required_tasks: self.drive_required_tasks,
            max_listen_streams: self.max_listen_streams,
            max_task_ttl_ms: millis_i64(self.max_task_ttl),
            task_ttl_ms: self.task_ttl.map(millis_i64),
            policy,
            ..BridgeConfig::default()
        };
        Ok(ProxyOptions {
            bridge,
            probe_timeout: self.probe_timeout,
            request_timeout: self.request_timeout,
            ping_interval: (!self.upstream_ping.is_zero()).then_some(self.upstream_ping),
            ping_timeout: self.upstream_ping_timeout,
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

    fn parse(args: &[&str]) -> Result<ShimArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("x").chain(args.iter().copied())).map(|c| c.shim)
    }

    fn policy(args: &[&str]) -> Option<TaskPolicy> {
        parse(args).unwrap().proxy_options().unwrap().bridge.policy
    }

    #[test]
    fn a_rule_for_one_tool_leaves_the_others_to_the_upstream() {
        assert_eq!(policy(&[]), None);
        let p = policy(&["--task-support", "b=forbidden"]).unwrap();
        // Not `optional`: an upstream without tasks still makes it
        // `forbidden` (the engine decides from server/discover).
        assert_eq!(p.default, None);
        assert_eq!(p.per_tool.get("b"), Some(&TaskSupport::Forbidden));
        let p = policy(&["--default-task-support", "optional"]).unwrap();
        assert_eq!(p.default, Some(TaskSupport::Optional));
    }

    #[test]
    fn zero_where_it_would_break_everything_is_refused() {
        for flag in [
            "--request-timeout",
            "--probe-timeout",
            "--max-tasks-per-client",
            "--upstream-ping-timeout",
            "--page-size",
            "--task-ttl",
            "--max-task-ttl",
            "--default-poll-interval",
        ] {
            let e = parse(&[flag, "0"]).unwrap_err();
            assert!(e.to_string().contains("at least 1"), "{flag}: {e}");
        }
    }

    #[test]
    fn durations_read_as_people_write_them() {
        let a = parse(&[
            "--probe-timeout",
            "250ms",
            "--request-timeout",
            "2m",
            "--upstream-ping",
            "0",
        ])
        .unwrap();
        let o = a.proxy_options().unwrap();
        assert_eq!(o.probe_timeout, Duration::from_millis(250));
        assert_eq!(o.request_timeout, Duration::from_secs(120));
        assert_eq!(o.ping_interval, None);
        let e = parse(&["--probe-timeout", "5000"]).unwrap_err().to_string();
        assert!(e.contains("30s, 5m or 250ms"), "{e}");
        let a = parse(&["--task-ttl", "1s 500ms"]).unwrap();
        assert_eq!(a.proxy_options().unwrap().bridge.task_ttl_ms, Some(1500));
    }
}
