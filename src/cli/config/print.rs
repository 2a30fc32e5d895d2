//! `mcp-tasks-shim config`: the merged configuration, each value with
//! where it came from.

use clap::parser::ValueSource;
use clap::{Arg, ArgAction};

use super::{Loaded, command, env_name, find, is_option, leaf, subcommand_path};
use crate::cli::options::{LISTENING, LOGGING, RECORDING, SESSIONS, TASKS, TIMEOUTS, UPSTREAM};

/// What a mask stands in for.
const MASK: &str = "***";

/// Arguments of `config`: those of `http`, or `config http …` /
/// `config stdio …`.
#[derive(Debug, clap::Args)]
pub struct ConfigArgs {
    /// Print `stdio`'s configuration, or `http`'s, with these arguments.
    #[command(subcommand)]
    pub which: Option<Which>,
    /// `http`'s arguments.
    #[command(flatten)]
    pub http: crate::cli::http::Args,
}

/// The subcommand whose configuration `config` prints.
#[derive(Debug, clap::Subcommand)]
pub enum Which {
    /// What `http` would run with.
    Http(Box<crate::cli::http::Args>),
    /// What `stdio` would run with.
    Stdio(Box<crate::cli::stdio::Args>),
}

/// The order of `config`'s sections, as `--help` has them.
pub(super) const SECTIONS: [&str; 7] = [
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
    /// As TOML; `None` when unset.
    value: Option<String>,
    source: String,
}

fn render(name: &str, upstream: &[String], loaded: &Loaded) -> String {
    let mut out = header(name, upstream, loaded);
    let sections = sections(loaded);
    let lines = || sections.iter().flat_map(|(_, l)| l);
    let width = lines().map(|l| l.key.len()).max().unwrap_or(0);
    let vwidth = lines()
        .filter_map(|l| l.value.as_ref().map(String::len))
        .max()
        .unwrap_or(0)
        .min(40);
    for (heading, lines) in &sections {
        out += &format!("\n# {heading}\n");
        for l in lines {
            match &l.value {
                Some(v) => out += &format!("{:width$} = {v:vwidth$}  # {}\n", l.key, l.source),
                None => out += &format!("# {:width$}   (unset)\n", l.key),
            }
        }
    }
    out
}

/// The comment lines above the values: the subcommand, the precedence,
/// the file (and the keys it had that are not used here), the upstream.
fn header(name: &str, upstream: &[String], loaded: &Loaded) -> String {
    let mut out = format!(
        "# mcp-tasks-shim {name}: the configuration it would run with\n\
         # precedence: flag > env (MCP_SHIM_*) > config file > default\n"
    );
    match &loaded.file {
        Some(f) => {
            let whence = match leaf(&loaded.matches).value_source("config") {
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
    out
}

/// Each option's line, under its `--help` heading, in [`SECTIONS`] order.
fn sections(loaded: &Loaded) -> Vec<(String, Vec<Line>)> {
    // The order of the definition: the file's defaults moved their options
    // to the end of the command's list.
    let mut cmd = command();
    cmd.build();
    let here = find(&cmd, &subcommand_path(&loaded.matches));
    let mut sections: Vec<(String, Vec<Line>)> = Vec::new();
    for arg in here
        .get_arguments()
        .filter(|a| is_option(a) && a.get_id() != "config")
    {
        let heading = arg.get_help_heading().unwrap_or("Options").to_owned();
        let line = line(arg, loaded);
        match sections.iter_mut().find(|(h, _)| *h == heading) {
            Some((_, lines)) => lines.push(line),
            None => sections.push((heading, vec![line])),
        }
    }
    let rank = |h: &str| {
        SECTIONS
            .iter()
            .position(|s| *s == h)
            .unwrap_or(SECTIONS.len())
    };
    sections.sort_by_key(|(h, _)| rank(h));
    sections
}

/// `arg`'s value in the merged arguments, and where it came from.
fn line(arg: &Arg, loaded: &Loaded) -> Line {
    let m = leaf(&loaded.matches);
    let id = arg.get_id().as_str();
    let from_file = loaded.file.as_ref().is_some_and(|f| f.applied.contains(id));
    let repeatable = matches!(arg.get_action(), ArgAction::Append);
    let source = match m.value_source(id) {
        Some(ValueSource::CommandLine) => format!("flag --{}", arg.get_long().unwrap_or(id)),
        Some(ValueSource::EnvVariable) => format!("env {}", env_name(id)),
        Some(ValueSource::DefaultValue) if from_file => "file".to_owned(),
        Some(ValueSource::DefaultValue) => "default".to_owned(),
        _ if repeatable => "default".to_owned(),
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
    Line {
        key: id.to_owned(),
        value: (!raw.is_empty() || repeatable).then(|| toml_value(id, arg, &raw)),
        source,
    }
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
        "upstream_url" => match url::Url::parse(s) {
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
