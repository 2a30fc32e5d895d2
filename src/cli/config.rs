//! One configuration surface: every option of `http` and `stdio` (and the
//! global ones) is a flag, an `MCP_SHIM_*` environment variable and a key
//! of the `--config` file, read with the precedence flag > env > file >
//! default; and `mcp-tasks-shim config`, which prints the result.
//!
//! clap does flags, environment variables and defaults. The file's values
//! are made the arguments' defaults, and the command line read again:
//! clap's own precedence then puts them under flag and env, and its value
//! parsers check them, so no option is described twice. The environment
//! names and the file's keys both come from the argument's id, set here
//! for every option at once.

use std::collections::HashSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::builder::Resettable;
use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches, Command, CommandFactory};

use super::options::{LISTENING, LOGGING, RECORDING, SESSIONS, TASKS, TIMEOUTS, UPSTREAM};

/// The subcommands whose options the surface covers (`config` takes
/// theirs).
const PROXIES: [&str; 2] = ["http", "stdio"];

/// Options whose values are secrets or may hold one (a Redis password, a
/// URL's user info): their environment values are never shown by
/// `--help`, and `config` prints them masked.
const SECRETS: [&str; 3] = ["tokens", "ledger", "upstream_url"];

/// What a mask stands in for.
const MASK: &str = "***";

/// Spellings of the options that took a number of milliseconds or
/// seconds before durations were written with their unit: the old flag,
/// the new one and the unit the number was in. A clap alias cannot carry
/// the unit, so the old spelling is rewritten before clap reads the line
/// (the same flag then, with the same checks), and a warning says so.
const RENAMED: [(&str, &str, &str); 8] = [
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

/// The config file's key that the renamed `default_poll_interval` had.
const RENAMED_KEY: (&str, &str) = ("default_poll_ms", "default_poll_interval");

/// The environment variable of the option `id`.
pub(crate) fn env_name(id: &str) -> String {
    format!("MCP_SHIM_{}", id.to_ascii_uppercase())
}

/// The whole command line definition: [`super::Cli`] with the
/// environment variable of every option of the proxies.
pub(crate) fn command() -> Command {
    let stdio_in_config = |c: Command| {
        // `config stdio` prints what would run: the upstream may be left out.
        with_env(c).mut_arg("upstream", |a| a.required(false))
    };
    with_env(super::Cli::command())
        .mut_subcommand("http", with_env)
        .mut_subcommand("stdio", with_env)
        .mut_subcommand("config", |c| {
            with_env(c)
                .mut_subcommand("http", with_env)
                .mut_subcommand("stdio", stdio_in_config)
        })
}

/// An option the surface covers: not a positional (the upstream command),
/// not `--help` or `--version`.
fn is_option(a: &Arg) -> bool {
    !a.is_positional()
        && !matches!(
            a.get_action(),
            ArgAction::Help | ArgAction::HelpShort | ArgAction::HelpLong | ArgAction::Version
        )
}

/// Gives each option of `cmd` (not its subcommands') its `MCP_SHIM_*`
/// variable; a repeatable option takes several values there, comma-separated.
fn with_env(cmd: Command) -> Command {
    cmd.mut_args(|a| {
        if !is_option(&a) {
            return a;
        }
        let id = a.get_id().as_str().to_owned();
        let mut a = a.env(env_name(&id));
        match a.get_action() {
            ArgAction::Append => a = a.value_delimiter(','),
            // What environment files write for a switch: 1/0, yes/no,
            // on/off as well as true/false.
            ArgAction::SetTrue => a = a.value_parser(clap::builder::BoolishValueParser::new()),
            _ => {}
        }
        if SECRETS.contains(&id.as_str()) {
            a = a.hide_env_values(true);
        }
        a
    })
}

/// The command line as read, with the config file under it.
#[derive(Debug)]
pub(crate) struct Loaded {
    /// The merged arguments.
    pub matches: ArgMatches,
    /// The config file, when one was named.
    pub file: Option<FileUse>,
    /// A warning for each old option spelling used.
    pub renamed: Vec<String>,
}

/// What the config file gave.
#[derive(Debug)]
pub(crate) struct FileUse {
    /// Its path.
    pub path: PathBuf,
    /// The ids of the options it set (each a default now).
    pub applied: HashSet<String>,
    /// Its keys not used here, each with why: options of the other proxy
    /// subcommand only, or an `upstream_url` where a command is given.
    pub ignored: Vec<(String, String)>,
}

/// Why the command line and file cannot be used.
#[derive(Debug)]
pub(crate) enum LoadError {
    /// The command line itself (clap prints it and exits 2).
    Usage(clap::Error),
    /// A value of an `MCP_SHIM_*` variable (exit 2, as a bad flag).
    Env(String),
    /// The config file, and the command line read without it (for the
    /// log settings the message goes out with).
    File {
        /// Names the file and the key.
        message: String,
        /// The command line alone.
        matches: Box<ArgMatches>,
    },
}

/// Reads `argv` (the program name first) with the config file it names.
pub(crate) fn load(argv: Vec<OsString>) -> Result<Loaded, LoadError> {
    let (argv, renamed) = rename_deprecated(argv);
    let cmd = command();
    let first = cmd
        .clone()
        .try_get_matches_from(&argv)
        .map_err(|e| from_env(&cmd, &argv, e))?;
    let path = subcommand_path(&first);
    let config = leaf(&first)
        .try_get_one::<PathBuf>("config")
        .ok()
        .flatten()
        .cloned();
    let Some(file) = config else {
        return Ok(Loaded {
            matches: first,
            file: None,
            renamed,
        });
    };
    let fail = |message: String| LoadError::File {
        message,
        matches: Box::new(first.clone()),
    };
    // A command after `--` is the command line's upstream: the file's
    // --upstream-url must not win over it.
    let has_command = leaf(&first)
        .try_get_raw("upstream")
        .ok()
        .flatten()
        .is_some_and(|mut v| v.next().is_some());
    let (cmd, file_use) = apply_file(cmd, &path, &file, has_command).map_err(fail)?;
    let matches = cmd.clone().try_get_matches_from(&argv).map_err(|e| {
        // Every value was checked as the file was read: whatever is left
        // is still the file's, as the line alone was read without error.
        fail(format!("bad config {}: {}", file.display(), reason(&e)))
    })?;
    Ok(Loaded {
        matches,
        file: Some(file_use),
        renamed,
    })
}

/// The names of the subcommands `m` went through, outermost first.
fn subcommand_path(m: &ArgMatches) -> Vec<String> {
    let mut path = Vec::new();
    let mut at = m;
    while let Some((name, sub)) = at.subcommand() {
        path.push(name.to_owned());
        at = sub;
    }
    path
}

/// The matches of the innermost subcommand.
fn leaf(m: &ArgMatches) -> &ArgMatches {
    let mut at = m;
    while let Some((_, sub)) = at.subcommand() {
        at = sub;
    }
    at
}

/// The subcommand at `path` in a built `cmd`.
fn find<'c>(cmd: &'c Command, path: &[String]) -> &'c Command {
    path.iter().fold(cmd, |c, name| {
        c.find_subcommand(name)
            .expect("a path read from matches of this command")
    })
}

/// `cmd` with the subcommand at `path` passed through `f`.
fn mut_path(cmd: Command, path: &[String], f: &dyn Fn(Command) -> Command) -> Command {
    match path.split_first() {
        None => f(cmd),
        Some((name, rest)) => cmd.mut_subcommand(name, |c| mut_path(c, rest, f)),
    }
}

/// Rewrites the old `-ms`/`-s` spellings of a proxy subcommand's options
/// (see [`RENAMED`]); what follows `--` is the upstream's and is left alone.
fn rename_deprecated(argv: Vec<OsString>) -> (Vec<OsString>, Vec<String>) {
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

/// Makes the config file's values the defaults of the options they name,
/// in the subcommand at `path` (and the global ones).
fn apply_file(
    cmd: Command,
    path: &[String],
    file: &Path,
    has_command: bool,
) -> Result<(Command, FileUse), String> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| format!("cannot read config {}: {e}", file.display()))?;
    let table: toml::Table =
        toml::from_str(&text).map_err(|e| format!("bad config {}: {e}", file.display()))?;
    let bad = |key: &str, why: &str| format!("bad config {}: {key}: {why}", file.display());
    let mut built = cmd.clone();
    built.build();
    let here = find(&built, path);
    // Which of the proxies' options `config` stands for: those of `http`
    // when none is named.
    let known: HashSet<String> = PROXIES
        .iter()
        .filter_map(|p| built.find_subcommand(p))
        .flat_map(|c| c.get_arguments())
        .chain(built.get_arguments())
        .filter(|a| is_option(a))
        .map(|a| a.get_id().as_str().to_owned())
        .collect();
    let mut root = Vec::new();
    let mut local = Vec::new();
    let mut ignored = Vec::new();
    for (key, value) in table {
        let (key, value) = if key == RENAMED_KEY.0 {
            let Some(ms) = value.as_integer() else {
                return Err(bad(&key, "expected a number of milliseconds"));
            };
            tracing_note(format!(
                "config key {} is deprecated: write {} = \"{ms}ms\"",
                RENAMED_KEY.0, RENAMED_KEY.1
            ));
            (
                RENAMED_KEY.1.to_owned(),
                toml::Value::String(format!("{ms}ms")),
            )
        } else {
            (key, value)
        };
        if key == "config" {
            return Err(bad(&key, "a config file cannot name another one"));
        }
        if key == "upstream_url" && has_command {
            ignored.push((key, "the command after -- is the upstream".to_owned()));
            continue;
        }
        if key == "tokens" {
            warn_if_exposed(file);
        }
        let in_root = built.get_arguments().find(|a| a.get_id() == key.as_str());
        let arg = match in_root
            .or_else(|| here.get_arguments().find(|a| a.get_id() == key.as_str()))
        {
            Some(a) if is_option(a) => a,
            _ if known.contains(&key) => {
                ignored.push((key, format!("not an option of {}", proxy_name(path))));
                continue;
            }
            _ => {
                let hint = if known.contains(&key.replace('-', "_")) {
                    format!(" (write {})", key.replace('-', "_"))
                } else {
                    String::new()
                };
                return Err(format!(
                    "bad config {}: unknown key `{key}`{hint}; the keys are the options' long names with _ for - (see `mcp-tasks-shim {} --help` and docs/guide.md)",
                    file.display(),
                    proxy_name(path),
                ));
            }
        };
        let values = file_values(arg, &value).map_err(|w| bad(&key, &w))?;
        check(arg, &values).map_err(|w| {
            if SECRETS.contains(&key.as_str()) {
                bad(&key, &w)
            } else {
                bad(&format!("{key} = {value}"), &w)
            }
        })?;
        if in_root.is_some() {
            root.push((key, values));
        } else {
            local.push((key, values));
        }
    }
    let applied = root.iter().chain(&local).map(|(k, _)| k.clone()).collect();
    let mut cmd = cmd;
    for (id, values) in root {
        cmd = cmd.mut_arg(id, |a| a.default_values(values));
    }
    let cmd = mut_path(cmd, path, &|mut c| {
        for (id, values) in &local {
            c = c.mut_arg(id, |a| a.default_values(values.clone()));
        }
        c
    });
    Ok((
        cmd,
        FileUse {
            path: file.to_owned(),
            applied,
            ignored,
        },
    ))
}

/// The proxy subcommand whose options the subcommand at `path` takes
/// (`config` alone takes `http`'s).
fn proxy_name(path: &[String]) -> &'static str {
    match path.last().map(String::as_str) {
        Some("stdio") => "stdio",
        _ => "http",
    }
}

/// Tokens are secrets: a file holding them that others can read is
/// worth a warning (not a refusal, as for `--token-file`: the rest of a
/// config file is no secret, and it may be shared on purpose).
fn warn_if_exposed(file: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(meta) = std::fs::metadata(file)
            && meta.permissions().mode() & 0o077 != 0
        {
            tracing_note(format!(
                "config {} holds tokens and group or others can read it (mode {:03o}): run `chmod 600 {}`, or move the tokens to --token-file",
                file.display(),
                meta.permissions().mode() & 0o777,
                file.display()
            ));
        }
    }
    #[cfg(not(unix))]
    let _ = file;
}

/// A value clap refused names only its flag: when it came from the
/// environment (set there, the flag not on the line), say so, or an
/// operator looks for a flag nobody typed.
fn from_env(cmd: &Command, argv: &[OsString], e: clap::Error) -> LoadError {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if !matches!(
        e.kind(),
        ErrorKind::InvalidValue | ErrorKind::ValueValidation
    ) {
        return LoadError::Usage(e);
    }
    let Some(ContextValue::String(flag)) = e.get(ContextKind::InvalidArg) else {
        return LoadError::Usage(e);
    };
    let long = flag
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_owned();
    let on_line = argv.iter().filter_map(|a| a.to_str()).any(|a| {
        a == long
            || a.strip_prefix(long.as_str())
                .is_some_and(|r| r.starts_with('='))
    });
    let Some(id) = long.strip_prefix("--").map(|l| {
        let mut built = cmd.clone();
        built.build();
        all_args(&built)
            .find(|a| a.get_long() == Some(l))
            .map(|a| a.get_id().as_str().to_owned())
    }) else {
        return LoadError::Usage(e);
    };
    match id {
        Some(id) if !on_line && std::env::var_os(env_name(&id)).is_some() => {
            let value = match std::env::var(env_name(&id)) {
                Ok(v) if !SECRETS.contains(&id.as_str()) => format!("={v}"),
                _ => String::new(),
            };
            LoadError::Env(format!(
                "{}{value}: {} (as {long})",
                env_name(&id),
                reason(&e)
            ))
        }
        _ => LoadError::Usage(e),
    }
}

/// Every argument of a built command and its subcommands.
fn all_args(cmd: &Command) -> Box<dyn Iterator<Item = &Arg> + '_> {
    Box::new(
        cmd.get_arguments()
            .chain(cmd.get_subcommands().flat_map(all_args)),
    )
}

/// Warnings found before logging starts go out once it has.
fn tracing_note(note: String) {
    DEFERRED
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(note);
}

static DEFERRED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// The warnings [`load`] kept for when logging has started.
pub(crate) fn deferred_warnings(loaded: &Loaded) -> Vec<String> {
    let mut notes = loaded.renamed.clone();
    notes.append(&mut DEFERRED.lock().unwrap_or_else(|p| p.into_inner()));
    notes
}

/// A key's TOML value as the strings the option would take on the
/// command line: a list for a repeatable option (a table for
/// `task_support`: `tool = "required"`), a boolean for a switch.
fn file_values(arg: &Arg, value: &toml::Value) -> Result<Vec<String>, String> {
    use toml::Value as V;
    let scalar = |v: &V| match v {
        V::String(s) => Ok(s.clone()),
        V::Integer(n) => Ok(n.to_string()),
        V::Float(f) => Ok(f.to_string()),
        V::Boolean(b) => Ok(b.to_string()),
        V::Datetime(d) => Ok(d.to_string()),
        V::Array(_) | V::Table(_) => Err("expected one value, not a list or table".to_owned()),
    };
    match arg.get_action() {
        ArgAction::SetTrue | ArgAction::SetFalse => match value {
            V::Boolean(b) => Ok(vec![b.to_string()]),
            _ => Err("expected true or false".into()),
        },
        ArgAction::Append => match value {
            V::Array(items) => items.iter().map(scalar).collect(),
            V::Table(t) => t
                .iter()
                .map(|(k, v)| scalar(v).map(|v| format!("{k}={v}")))
                .collect(),
            v => scalar(v).map(|s| vec![s]),
        },
        _ => scalar(value).map(|s| vec![s]),
    }
}

/// Runs the option's own value parser on the file's values, alone, so
/// that a bad one is named as the file's (and clap's check of defaults,
/// which panics in debug builds, never sees it).
fn check(arg: &Arg, values: &[String]) -> Result<(), String> {
    if matches!(arg.get_action(), ArgAction::SetTrue | ArgAction::SetFalse) {
        return Ok(());
    }
    let Some(long) = arg.get_long() else {
        return Ok(());
    };
    let alone = arg
        .clone()
        .env(Resettable::Reset)
        .default_value(Resettable::Reset)
        .conflicts_with(Resettable::Reset)
        .requires(Resettable::Reset)
        .required(false)
        .global(false);
    let argv = std::iter::once("config-file".to_owned())
        .chain(values.iter().map(|v| format!("--{long}={v}")));
    Command::new("config-file")
        .arg(alone)
        .try_get_matches_from(argv)
        .map(drop)
        .map_err(|e| reason(&e))
}

/// What a clap error says is wrong with a value, without clap's framing.
fn reason(e: &clap::Error) -> String {
    if let Some(inner) = std::error::Error::source(e) {
        return inner.to_string();
    }
    let text = e.render().to_string();
    let said: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("For more information"))
        .collect();
    let said = said.join(" ");
    said.strip_prefix("error: ").unwrap_or(&said).to_owned()
}

/// Arguments of `config`: those of `http`, or `config http …` /
/// `config stdio …`.
#[derive(Debug, clap::Args)]
pub struct ConfigArgs {
    /// Print `stdio`'s configuration, or `http`'s, with these arguments.
    #[command(subcommand)]
    pub which: Option<Which>,
    /// `http`'s arguments.
    #[command(flatten)]
    pub http: super::http::Args,
}

/// The subcommand whose configuration `config` prints.
#[derive(Debug, clap::Subcommand)]
pub enum Which {
    /// What `http` would run with.
    Http(Box<super::http::Args>),
    /// What `stdio` would run with.
    Stdio(Box<super::stdio::Args>),
}

/// The order of `config`'s sections, as `--help` has them.
const SECTIONS: [&str; 7] = [
    UPSTREAM, LISTENING, SESSIONS, TASKS, TIMEOUTS, RECORDING, LOGGING,
];

/// `mcp-tasks-shim config`: the merged configuration as TOML (a config
/// file, once the masks are filled in), each value followed by where it
/// came from.
pub(crate) fn run(args: &ConfigArgs, loaded: &Loaded) -> Result<(), String> {
    let (name, upstream) = match &args.which {
        Some(Which::Stdio(a)) => ("stdio", &a.upstream),
        Some(Which::Http(a)) => ("http", &a.upstream),
        None => ("http", &args.http.upstream),
    };
    let text = render(name, upstream, loaded);
    use std::io::Write;
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(format!("writing stdout: {e}")),
        _ => Ok(()),
    }
}

/// One option's line of `config`.
struct Line {
    key: String,
    value: Option<String>,
    source: String,
}

fn render(name: &str, upstream: &[String], loaded: &Loaded) -> String {
    // The order of the definition: the file's defaults moved their options
    // to the end of the command's list.
    let mut cmd = command();
    cmd.build();
    let path = subcommand_path(&loaded.matches);
    let here = find(&cmd, &path);
    let m = leaf(&loaded.matches);
    let applied = loaded.file.as_ref().map(|f| &f.applied);
    let mut sections: Vec<(String, Vec<Line>)> = Vec::new();
    for arg in here.get_arguments().filter(|a| is_option(a)) {
        let id = arg.get_id().as_str();
        if id == "config" {
            continue;
        }
        let source = match m.value_source(id) {
            Some(ValueSource::CommandLine) => format!("flag --{}", arg.get_long().unwrap_or(id)),
            Some(ValueSource::EnvVariable) => format!("env {}", env_name(id)),
            Some(ValueSource::DefaultValue) if applied.is_some_and(|a| a.contains(id)) => {
                "file".to_owned()
            }
            Some(ValueSource::DefaultValue) => "default".to_owned(),
            _ if matches!(arg.get_action(), ArgAction::Append) => "default".to_owned(),
            _ => "unset".to_owned(),
        };
        let raw: Vec<String> = if matches!(arg.get_action(), ArgAction::SetTrue) {
            // As parsed: the environment may have said `1` or `yes`.
            vec![m.get_flag(id).to_string()]
        } else {
            m.get_raw(id)
                .map(|vals| vals.map(|v| v.to_string_lossy().into_owned()).collect())
                .unwrap_or_default()
        };
        let value = (!raw.is_empty() || matches!(arg.get_action(), ArgAction::Append))
            .then(|| toml_value(id, arg, &raw));
        let heading = arg.get_help_heading().unwrap_or("Options").to_owned();
        let line = Line {
            key: id.to_owned(),
            value,
            source,
        };
        match sections.iter_mut().find(|(h, _)| *h == heading) {
            Some((_, lines)) => lines.push(line),
            None => sections.push((heading, vec![line])),
        }
    }
    sections.sort_by_key(|(h, _)| {
        SECTIONS
            .iter()
            .position(|s| s == h)
            .unwrap_or(SECTIONS.len())
    });
    let width = sections
        .iter()
        .flat_map(|(_, l)| l)
        .map(|l| l.key.len())
        .max()
        .unwrap_or(0);
    let vwidth = sections
        .iter()
        .flat_map(|(_, l)| l)
        .filter_map(|l| l.value.as_ref().map(String::len))
        .max()
        .unwrap_or(0)
        .min(40);
    let mut out = format!(
        "# mcp-tasks-shim {name}: the configuration it would run with\n\
         # precedence: flag > env (MCP_SHIM_*) > config file > default\n"
    );
    match &loaded.file {
        Some(f) => {
            let whence = match m.value_source("config") {
                Some(ValueSource::EnvVariable) => "env MCP_SHIM_CONFIG",
                _ => "flag --config",
            };
            out += &format!("# config file: {} ({whence})\n", f.path.display());
            for (key, why) in &f.ignored {
                out += &format!("# ignored here: {key} ({why})\n");
            }
        }
        None => out += "# config file: none (--config FILE or MCP_SHIM_CONFIG)\n",
    }
    if !upstream.is_empty() {
        out += &format!("# upstream command: -- {}\n", upstream.join(" "));
    }
    for (heading, lines) in sections {
        out += &format!("\n# {heading}\n");
        for l in lines {
            match &l.value {
                Some(v) => {
                    out += &format!("{:width$} = {v:vwidth$}  # {}\n", l.key, l.source);
                }
                None => out += &format!("# {:width$}   (unset)\n", l.key),
            }
        }
    }
    out
}

/// A value as TOML: a boolean for a switch, a list for a repeatable
/// option, a number where it reads as one; secrets masked.
fn toml_value(id: &str, arg: &Arg, raw: &[String]) -> String {
    use toml::Value as V;
    let one = |s: &str| -> V {
        let s = mask(id, s);
        match s.parse::<i64>() {
            Ok(n) if !(s.len() > 1 && s.starts_with('0')) => V::Integer(n),
            _ => V::String(s),
        }
    };
    let v = match arg.get_action() {
        ArgAction::SetTrue | ArgAction::SetFalse => {
            V::Boolean(raw.first().is_some_and(|v| v == "true"))
        }
        ArgAction::Append => V::Array(raw.iter().map(|s| one(s)).collect()),
        _ => raw.first().map_or(V::String(String::new()), |s| one(s)),
    };
    v.to_string()
}

/// `s` with any secret in it masked: a token (its principal kept), a
/// Redis password, a URL's user info.
fn mask(id: &str, s: &str) -> String {
    match id {
        "tokens" => match s.split_once('=') {
            Some((_, principal)) => format!("{MASK}={}", principal.trim()),
            None => MASK.to_owned(),
        },
        "ledger" if crate::ledger::shared::url_scheme(s).is_some() => {
            crate::ledger::shared::redacted(s)
        }
        "upstream_url" => match reqwest::Url::parse(s) {
            Ok(mut url) if !url.username().is_empty() || url.password().is_some() => {
                let _ = url.set_username(MASK);
                let _ = url.set_password(None);
                url.to_string()
            }
            Ok(_) => s.to_owned(),
            Err(_) => MASK.to_owned(),
        },
        _ => s.to_owned(),
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

    #[test]
    fn every_proxy_option_has_its_environment_variable() {
        let mut cmd = command();
        cmd.build();
        for name in PROXIES {
            let sub = cmd.find_subcommand(name).unwrap();
            for arg in sub.get_arguments().filter(|a| is_option(a)) {
                let id = arg.get_id().as_str();
                assert_eq!(
                    arg.get_env().and_then(|e| e.to_str()),
                    Some(env_name(id).as_str()),
                    "{name} --{id}"
                );
            }
        }
        let http = cmd.find_subcommand("http").unwrap();
        let listen = http
            .get_arguments()
            .find(|a| a.get_id() == "listen")
            .unwrap();
        assert_eq!(listen.get_env().unwrap(), "MCP_SHIM_LISTEN");
    }

    #[test]
    fn tokens_are_masked_and_principals_kept() {
        assert_eq!(mask("tokens", "s3cret=alice"), "***=alice");
        let u = mask("upstream_url", "http://user:pw@host:1/mcp");
        assert!(!u.contains("pw") && !u.contains("user"), "{u}");
        assert_eq!(
            mask("upstream_url", "http://host:1/mcp"),
            "http://host:1/mcp"
        );
        assert_eq!(mask("listen", ":0"), ":0");
    }
}
