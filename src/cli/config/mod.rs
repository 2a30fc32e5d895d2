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

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Arg, ArgAction, ArgMatches, Command, CommandFactory};

mod file;
mod print;
mod renamed;

pub(crate) use file::FileUse;
pub(crate) use print::ConfigArgs;
pub(crate) use print::run;

/// The subcommands whose options the surface covers (`config` takes
/// theirs).
const PROXIES: [&str; 2] = ["http", "stdio"];

/// Options whose values are secrets or may hold one (a Redis password, a
/// URL's user info): their environment values are never shown by
/// `--help`, and `config` prints them masked.
const SECRETS: [&str; 3] = ["tokens", "ledger", "upstream_url"];

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

impl Loaded {
    /// The warnings found while reading, for once logging has started.
    pub(crate) fn warnings(&self) -> impl Iterator<Item = &String> {
        let from_file = self.file.iter().flat_map(|f| &f.notes);
        self.renamed.iter().chain(from_file)
    }
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
    let (argv, renamed) = renamed::rename_deprecated(argv);
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
    let (cmd, file_use) = file::apply(cmd, &path, &file, has_command).map_err(fail)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Calls `check` with each option of each proxy subcommand (its
    /// subcommand's name, the option, its id).
    fn each_proxy_option(mut check: impl FnMut(&str, &Arg, &str)) {
        let mut cmd = command();
        cmd.build();
        for name in PROXIES {
            let sub = cmd.find_subcommand(name).unwrap();
            for arg in sub.get_arguments().filter(|a| is_option(a)) {
                check(name, arg, arg.get_id().as_str());
            }
        }
    }

    #[test]
    fn every_proxy_option_has_its_environment_variable() {
        each_proxy_option(|name, arg, id| {
            assert_eq!(
                arg.get_env().and_then(|e| e.to_str()),
                Some(env_name(id).as_str()),
                "{name} --{id}"
            );
        });
        let mut cmd = command();
        cmd.build();
        let http = cmd.find_subcommand("http").unwrap();
        let listen = http
            .get_arguments()
            .find(|a| a.get_id() == "listen")
            .unwrap();
        assert_eq!(listen.get_env().unwrap(), "MCP_SHIM_LISTEN");
    }

    /// A new option gets its section in `--help` and its row in the
    /// guide's table (flag, variable, key, default) like the others.
    #[test]
    fn every_proxy_option_has_a_help_section_and_a_row_in_the_guide() {
        let guide = include_str!("../../../docs/guide.md");
        each_proxy_option(|name, arg, id| {
            let long = arg.get_long().unwrap_or(id);
            let row = format!("| `{}` | `{id}` |", env_name(id));
            assert!(
                guide.contains(&row),
                "docs/guide.md, Configuration: no row for {name} --{long} ({row})"
            );
            if id != "config" {
                let heading = arg.get_help_heading();
                assert!(
                    heading.is_some_and(|h| print::SECTIONS.contains(&h)),
                    "{name} --{long}: help_heading {heading:?} is none of {:?}",
                    print::SECTIONS
                );
            }
        });
    }
}
