//! The `--config` file: its keys made the defaults of the options they
//! name.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use clap::builder::Resettable;
use clap::{Arg, ArgAction, Command};

use super::{PROXIES, SECRETS, find, is_option, mut_path, reason};

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
    /// Warnings about it (deprecated keys, tokens others can read).
    pub notes: Vec<String>,
}

/// The config file's key that the renamed `default_poll_interval` had.
const RENAMED_KEY: (&str, &str) = ("default_poll_ms", "default_poll_interval");

/// Where a key of the file goes.
enum Place<'c> {
    /// An option of the root command (the global ones).
    Root(&'c Arg),
    /// An option of the subcommand run.
    Here(&'c Arg),
    /// Not used here, and why.
    Ignored(String),
}

/// The file's values, checked, to become the options' defaults.
#[derive(Default)]
struct Defaults {
    root: Vec<(String, Vec<String>)>,
    here: Vec<(String, Vec<String>)>,
}

/// Makes the config file's values the defaults of the options they name,
/// in the subcommand at `path` (and the global ones). `has_command`: a
/// command after `--` is given, and is the upstream whatever the file says.
pub(super) fn apply(
    cmd: Command,
    path: &[String],
    file: &Path,
    has_command: bool,
) -> Result<(Command, FileUse), String> {
    let table = read(file)?;
    let mut built = cmd.clone();
    built.build();
    let mut defaults = Defaults::default();
    let mut used = FileUse {
        path: file.to_owned(),
        applied: HashSet::new(),
        ignored: Vec::new(),
        notes: Vec::new(),
    };
    for (key, value) in table {
        let bad = |key: &str, why: &str| format!("bad config {}: {key}: {why}", file.display());
        let (key, value) =
            renamed_key(key, value, &mut used.notes).map_err(|(k, w)| bad(&k, &w))?;
        let place = match place(&built, path, &key, has_command) {
            Ok(place) => place,
            Err(why) => return Err(format!("bad config {}: {why}", file.display())),
        };
        let (arg, list) = match place {
            Place::Ignored(why) => {
                used.ignored.push((key, why));
                continue;
            }
            Place::Root(arg) => (arg, &mut defaults.root),
            Place::Here(arg) => (arg, &mut defaults.here),
        };
        if key == "tokens" {
            used.notes.extend(exposed(file));
        }
        let values = file_values(arg, &value).map_err(|w| bad(&key, &w))?;
        check(arg, &values).map_err(|w| {
            // The value beside its key, unless it is a secret.
            let shown = if SECRETS.contains(&key.as_str()) {
                key.clone()
            } else {
                format!("{key} = {value}")
            };
            bad(&shown, &w)
        })?;
        used.applied.insert(key.clone());
        list.push((key, values));
    }
    Ok((defaults.install(cmd, path), used))
}

/// The file's TOML table.
fn read(file: &Path) -> Result<toml::Table, String> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| format!("cannot read config {}: {e}", file.display()))?;
    toml::from_str(&text).map_err(|e| format!("bad config {}: {e}", file.display()))
}

/// `default_poll_ms = 500` read as `default_poll_interval = "500ms"`,
/// with a note; any other key as it is.
fn renamed_key(
    key: String,
    value: toml::Value,
    notes: &mut Vec<String>,
) -> Result<(String, toml::Value), (String, String)> {
    if key != RENAMED_KEY.0 {
        return Ok((key, value));
    }
    let Some(ms) = value.as_integer() else {
        return Err((key, "expected a number of milliseconds".into()));
    };
    notes.push(format!(
        "config key {} is deprecated: write {} = \"{ms}ms\"",
        RENAMED_KEY.0, RENAMED_KEY.1
    ));
    Ok((
        RENAMED_KEY.1.to_owned(),
        toml::Value::String(format!("{ms}ms")),
    ))
}

/// Which option `key` sets when the subcommand at `path` runs, in the
/// built command; an error naming the key when no proxy subcommand has it.
fn place<'c>(
    built: &'c Command,
    path: &[String],
    key: &str,
    has_command: bool,
) -> Result<Place<'c>, String> {
    if key == "config" {
        return Err("config: a config file cannot name another one".into());
    }
    if key == "upstream_url" && has_command {
        return Ok(Place::Ignored(
            "the command after -- is the upstream".into(),
        ));
    }
    let named = |c: &'c Command| {
        c.get_arguments()
            .find(|a| a.get_id() == key && is_option(a))
    };
    if let Some(arg) = named(built) {
        return Ok(Place::Root(arg));
    }
    if let Some(arg) = named(find(built, path)) {
        return Ok(Place::Here(arg));
    }
    // An option of the other proxy subcommand: one file serves both.
    let known = |k: &str| {
        PROXIES
            .iter()
            .filter_map(|p| built.find_subcommand(p))
            .any(|c| c.get_arguments().any(|a| a.get_id() == k && is_option(a)))
    };
    if known(key) {
        return Ok(Place::Ignored(format!(
            "not an option of {}",
            proxy_name(path)
        )));
    }
    let hint = if known(&key.replace('-', "_")) {
        format!(" (write {})", key.replace('-', "_"))
    } else {
        String::new()
    };
    Err(format!(
        "unknown key `{key}`{hint}; the keys are the options' long names with _ for - (see `mcp-tasks-shim {} --help` and docs/guide.md)",
        proxy_name(path),
    ))
}

impl Defaults {
    /// `cmd` with the values as the defaults of their options.
    fn install(self, cmd: Command, path: &[String]) -> Command {
        let mut cmd = cmd;
        for (id, values) in self.root {
            cmd = cmd.mut_arg(id, |a| a.default_values(values));
        }
        mut_path(cmd, path, &|mut c| {
            for (id, values) in &self.here {
                c = c.mut_arg(id, |a| a.default_values(values.clone()));
            }
            c
        })
    }
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
fn exposed(file: &Path) -> Option<String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(file).ok()?.permissions().mode() & 0o777;
        (mode & 0o077 != 0).then(|| {
            format!(
                "config {} holds tokens and group or others can read it (mode {mode:03o}): run `chmod 600 {}`, or move the tokens to --token-file",
                file.display(),
                file.display()
            )
        })
    }
    #[cfg(not(unix))]
    {
        let _ = file;
        None
    }
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
