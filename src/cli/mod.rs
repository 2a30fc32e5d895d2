//! The command line: thin subcommands over the library.

use std::process::ExitCode;

use clap::{FromArgMatches, Parser, Subcommand};

use crate::revision::Revision;

mod compare;
mod config;
mod demo;
mod demo_live;
mod http;
mod options;
mod otel;
mod reference;
mod replay;
mod stdio;
mod translate;

/// A compatibility shim between the MCP 2025-11-25 task design and the
/// 2026-07-28 tasks extension.
#[derive(Debug, Parser)]
#[command(name = "mcp-tasks-shim", version, propagate_version = true, about, long_about = None)]
pub struct Cli {
    /// Log filter (tracing EnvFilter syntax), e.g. `info` or `mcp_tasks_shim=debug`.
    #[arg(long, global = true, default_value = "warn", help_heading = options::LOGGING)]
    pub log: String,
    /// Log line format on stderr.
    #[arg(long, global = true, value_enum, default_value = "text", help_heading = options::LOGGING)]
    pub log_format: LogFormat,
    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Rewrite a JSONL transcript as the other revision would see it.
    ///
    /// Each input line is `{"dir":"c2s"|"s2c","msg":<JSON-RPC message>}`;
    /// other keys are kept. Messages with no counterpart become records
    /// with a "note" saying how the shim emulates them.
    Translate(translate::Args),
    /// Compare two transcripts of one conversation, masking what differs
    /// by nature (ids, task ids, timestamps, poll hints).
    Compare(compare::Args),
    /// Replay the client side of a recorded transcript against a server
    /// (directly, or through the shim's bridge when the server speaks the
    /// other revision) and write the new transcript.
    Replay(replay::Args),
    /// Show a built-in 2025-11-25 transcript beside its 2026-07-28 translation,
    /// then live runs through both bridges.
    Demo(demo::Args),
    /// Run a reference MCP server of one revision over stdio or HTTP (test fixture).
    ReferenceServer(reference::Args),
    /// Proxy one client on stdin/stdout to an upstream server started as a
    /// child process, translating between task revisions as needed.
    Stdio(stdio::Args),
    /// Serve Streamable HTTP (both revisions side by side) in front of an
    /// upstream server: a child process or an HTTP URL.
    Http(Box<http::Args>),
    /// Print the configuration `http` would run with, given the same
    /// arguments (or `config stdio …` for `stdio`'s): flags, MCP_SHIM_*
    /// variables and the config file merged, as TOML, each value with
    /// where it came from. Secrets are masked.
    #[command(args_conflicts_with_subcommands = true)]
    Config(Box<config::ConfigArgs>),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    ///
    /// For example: `mcp-tasks-shim completions bash > /etc/bash_completion.d/mcp-tasks-shim`.
    Completions {
        /// The shell to complete for.
        shell: clap_complete::Shell,
    },
}

/// Entry point of the binary.
pub fn main() -> ExitCode {
    let loaded = match load() {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    let cli = Cli::from_arg_matches(&loaded.matches).unwrap_or_else(|e| e.exit());
    if let Err(code) = start_logging(&cli, &loaded) {
        return code;
    }
    for note in loaded.warnings() {
        tracing::warn!("{note}");
    }
    let result = match cli.command {
        // Its own exit status: 1 is "they differ", so an error is 2.
        Command::Compare(args) => return verdict(compare::run(args)),
        // As compare: 1 means "some recorded messages were not placed".
        Command::Replay(args) => return verdict(replay::run(args)),
        Command::Translate(args) => translate::run(args),
        Command::Demo(args) => demo::run(args),
        Command::ReferenceServer(args) => reference::run(args),
        Command::Stdio(args) => stdio::run(args),
        Command::Http(args) => http::run(*args),
        Command::Config(args) => config::run(&args, &loaded),
        Command::Completions { shell } => completions(shell),
    };
    otel::flush();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            crate::console::fail(&format!("mcp-tasks-shim: {e}"), &e);
            ExitCode::FAILURE
        }
    }
}

/// Flags, `MCP_SHIM_*` and the config file, merged; a usage error exits
/// as clap does, a bad variable with 2, an unreadable file with 1.
fn load() -> Result<config::Loaded, ExitCode> {
    match config::load(std::env::args_os().collect()) {
        Ok(loaded) => Ok(loaded),
        Err(config::LoadError::Usage(e)) => e.exit(),
        Err(config::LoadError::Env(message)) => {
            crate::console::fail(&format!("mcp-tasks-shim: {message}"), &message);
            Err(ExitCode::from(2))
        }
        Err(config::LoadError::File { message, matches }) => {
            // The file's own log settings are what could not be read.
            let log = matches
                .get_one::<String>("log")
                .map_or("warn", String::as_str);
            let format = matches
                .get_one::<LogFormat>("log_format")
                .copied()
                .unwrap_or(LogFormat::Text);
            let _ = init_logging(log, format);
            crate::console::fail(&format!("mcp-tasks-shim: {message}"), &message);
            Err(ExitCode::FAILURE)
        }
    }
}

/// Logging as `--log` says; a filter that does not parse exits with 2,
/// naming where it came from: a user who typed no `--log` would look for
/// it in vain.
fn start_logging(cli: &Cli, loaded: &config::Loaded) -> Result<(), ExitCode> {
    let Err(e) = init_logging(&cli.log, cli.log_format) else {
        return Ok(());
    };
    let whence = match loaded.matches.value_source("log") {
        Some(clap::parser::ValueSource::EnvVariable) => "MCP_SHIM_LOG".to_owned(),
        Some(clap::parser::ValueSource::DefaultValue) => match &loaded.file {
            Some(f) => format!("config {} key log", f.path.display()),
            None => "--log".to_owned(),
        },
        _ => "--log".to_owned(),
    };
    crate::console::fail(
        &format!("mcp-tasks-shim: {whence} {:?}: {e}", cli.log),
        &format!("{whence} {:?}: {e}", cli.log),
    );
    Err(ExitCode::from(2))
}

/// The exit status of a command whose answer is yes or no (`compare`,
/// `replay`): 0 yes, 1 no, 2 for an error.
fn verdict(answer: Result<bool, String>) -> ExitCode {
    match answer {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            crate::console::fail(&format!("mcp-tasks-shim: {e}"), &e);
            ExitCode::from(2)
        }
    }
}

/// `completions SHELL`. Into a buffer first: clap_complete panics on a
/// write error, and `completions bash | head` closes the pipe early.
fn completions(shell: clap_complete::Shell) -> Result<(), String> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut config::command(), "mcp-tasks-shim", &mut script);
    match std::io::Write::write_all(&mut std::io::stdout().lock(), &script) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(format!("writing stdout: {e}")),
        _ => Ok(()),
    }
}

/// How log lines look.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

/// Logs go to stderr: stdout carries the protocol. Colours only on a
/// terminal (and not with `NO_COLOR`): log files and journald get plain text.
fn init_logging(filter: &str, format: LogFormat) -> Result<(), String> {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_new(filter).map_err(|e| e.to_string())?;
    let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let _ = match otel::layer() {
        // The filter is the log lines' own: exported spans have theirs,
        // so `--log warn` does not silence the traces.
        Some(otel) => tracing_subscriber::registry()
            .with(log_lines(format, colour).with_filter(filter))
            .with(otel)
            .try_init(),
        // No export: the filter is global, so `tracing::enabled!` reads
        // the log level. A layer of every level beside the lines (as the
        // export's slot was when empty) made INFO look enabled at
        // `--log warn`, and the start-up summary then sent its own
        // `tools/list` upstream before any client asked for anything.
        None => tracing_subscriber::registry()
            .with(filter)
            .with(log_lines(format, colour))
            .try_init(),
    };
    Ok(())
}

/// The log-line layer on stderr, text or JSON, for whichever subscriber
/// stack [`init_logging`] builds.
fn log_lines<S>(
    format: LogFormat,
    colour: bool,
) -> Box<dyn tracing_subscriber::Layer<S> + Send + Sync>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    use tracing_subscriber::Layer;
    let lines = tracing_subscriber::fmt::layer()
        .with_timer(IsoUtc)
        .with_ansi(colour)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => lines.boxed(),
        LogFormat::Json => {
            crate::console::use_json();
            lines.json().boxed()
        }
    }
}

/// Log timestamps as `YYYY-MM-DDTHH:MM:SS.mmmZ`, in text and JSON alike
/// and the same as the lines [`crate::console`] writes: tracing's default
/// timer writes microseconds, so one stderr stream mixed two precisions.
struct IsoUtc;

impl tracing_subscriber::fmt::time::FormatTime for IsoUtc {
    fn format_time(&self, w: &mut tracing_subscriber::fmt::format::Writer<'_>) -> std::fmt::Result {
        w.write_str(&crate::ids::now_iso())
    }
}

/// Parses a revision argument for clap.
pub(crate) fn parse_revision(s: &str) -> Result<Revision, String> {
    // Exactly the two revisions the shim writes: an older legacy date is
    // a revision it can read, not one it produces or serves.
    match s.parse()? {
        r @ Revision::Legacy if s != crate::revision::LEGACY_VERSION => Err(format!(
            "{s} is read as {r} but not written: name {} or {}",
            crate::revision::LEGACY_VERSION,
            crate::revision::MODERN_VERSION
        )),
        r => Ok(r),
    }
}
