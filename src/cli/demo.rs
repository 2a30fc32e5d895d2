//! `mcp-tasks-shim demo`: a built-in legacy transcript beside its modern
//! translation, for a person to read.

use std::io::Write;

use serde_json::Value;

use crate::jsonrpc::Message;
use crate::revision::Revision;
use crate::translate::transcript::{Dir, Record, translate_grouped};

/// The built-in conversation: a task that needs two answers mid-way, then
/// a URL-mode elicitation (the richest mapping in the corpus).
const BUILT_IN: &str = include_str!("../../tests/corpus/legacy-input.jsonl");

/// Arguments of `demo`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only the built-in transcript and its translation (no live runs).
    #[arg(long, conflicts_with = "live_only")]
    pub transcript_only: bool,
    /// Only the live runs through the bridges.
    #[arg(long = "live-only")]
    pub live_only: bool,
}

/// Columns when neither `COLUMNS` nor the terminal says (output to a
/// file or a pipe).
const DEFAULT_COLUMNS: usize = 100;
/// Narrowest width honoured: below it a line holds too little to read.
const MIN_COLUMNS: usize = 40;

/// The width to fit: `COLUMNS` if set to a number (what shells export
/// and what a user overrides), else the width of the terminal on stdout,
/// else [`DEFAULT_COLUMNS`]; never under [`MIN_COLUMNS`].
pub(crate) fn columns() -> usize {
    let from_env = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok());
    let from_terminal = || {
        terminal_size::terminal_size_of(std::io::stdout())
            .map(|(terminal_size::Width(w), _)| usize::from(w))
    };
    from_env
        .or_else(from_terminal)
        .unwrap_or(DEFAULT_COLUMNS)
        .max(MIN_COLUMNS)
}

/// Writes to `inner` with every line longer than `width` characters
/// wrapped: at the last space (or after the last comma) that fits, else
/// at the width, each continuation indented by [`Fit::INDENT`].
pub(crate) struct Fit<W: Write> {
    inner: W,
    width: usize,
    line: Vec<u8>,
}

impl<W: Write> Fit<W> {
    /// Continuation lines start this far in, so they read as one message.
    const INDENT: usize = 6;

    pub(crate) fn new(inner: W, width: usize) -> Self {
        Fit {
            inner,
            width,
            line: Vec::new(),
        }
    }

    fn emit(&mut self) -> std::io::Result<()> {
        let text = String::from_utf8_lossy(&self.line).into_owned();
        self.line.clear();
        for piece in wrap(&text, self.width, Self::INDENT) {
            writeln!(self.inner, "{piece}")?;
        }
        Ok(())
    }
}

impl<W: Write> Write for Fit<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        for &b in buf {
            if b == b'\n' {
                self.emit()?;
            } else {
                self.line.push(b);
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if !self.line.is_empty() {
            let text = String::from_utf8_lossy(&self.line).into_owned();
            self.line.clear();
            let pieces = wrap(&text, self.width, Self::INDENT);
            let last = pieces.len().saturating_sub(1);
            for (n, piece) in pieces.iter().enumerate() {
                if n == last {
                    write!(self.inner, "{piece}")?;
                } else {
                    writeln!(self.inner, "{piece}")?;
                }
            }
        }
        self.inner.flush()
    }
}

/// `text` as lines of at most `width` characters, the later ones
/// indented by `indent`.
fn wrap(text: &str, width: usize, indent: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= width {
        return vec![text.to_owned()];
    }
    let mut lines = Vec::new();
    let mut rest = &chars[..];
    let mut room = width;
    let pad = " ".repeat(indent);
    while rest.len() > room {
        // Break after a space or comma in the later half, else hard.
        let cut = (room / 2..room)
            .rev()
            .find(|&i| rest[i - 1] == ' ' || rest[i - 1] == ',')
            .unwrap_or(room);
        let head: String = rest[..cut].iter().collect();
        let prefix = if lines.is_empty() { "" } else { pad.as_str() };
        lines.push(format!("{prefix}{}", head.trim_end()));
        rest = &rest[cut..];
        room = width.saturating_sub(indent).max(1);
    }
    if !rest.is_empty() {
        let tail: String = rest.iter().collect();
        let prefix = if lines.is_empty() { "" } else { pad.as_str() };
        lines.push(format!("{prefix}{tail}"));
    }
    lines
}

pub(crate) fn run(args: Args) -> Result<(), String> {
    let width = columns();
    let mut stdout = Fit::new(std::io::stdout().lock(), width);
    // A reader that stopped (`demo | head`) has seen what it wanted: done.
    let written = |r: std::io::Result<()>| match r {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
        Err(e) => Err(format!("writing stdout: {e}")),
        Ok(()) => Ok(true),
    };
    if !args.live_only {
        let records = parse_built_in()?;
        if !written(render(&mut stdout, &records, Revision::Legacy))? {
            return Ok(());
        }
    }
    if !args.transcript_only {
        for client in [Revision::Legacy, Revision::Modern] {
            let conversation = super::demo_live::run(client)?;
            if !written(writeln!(stdout))? {
                return Ok(());
            }
            if !written(super::demo_live::print(conversation, &mut stdout, width))? {
                return Ok(());
            }
        }
    }
    written(stdout.flush()).map(drop)
}

fn parse_built_in() -> Result<Vec<Record>, String> {
    BUILT_IN
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: Value = serde_json::from_str(l).map_err(|e| e.to_string())?;
            Record::from_value(&v).map_err(|e| e.to_string())
        })
        .collect()
}

/// Writes `records` (a `from` transcript) and their translation into the
/// other revision as alternating blocks: each original message, then what
/// the other revision carries instead.
pub(crate) fn render(
    out: &mut dyn Write,
    records: &[Record],
    from: Revision,
) -> std::io::Result<()> {
    let to = from.other();
    let groups =
        translate_grouped(records, to).map_err(|e| std::io::Error::other(e.to_string()))?;
    writeln!(
        out,
        "MCP {from} transcript and what a {to} peer sees (via mcp-tasks-shim)"
    )?;
    writeln!(
        out,
        "C→S: client to server   S→C: server to client   ·: note   ✗: no counterpart"
    )?;
    writeln!(
        out,
        "t: milliseconds since the first message; in the messages, ttl, ttlMs, pollInterval and pollIntervalMs are milliseconds"
    )?;
    for (n, (rec, group)) in records.iter().zip(&groups).enumerate() {
        let t = rec
            .extra
            .get("t")
            .map(|t| format!(" t={t} ms"))
            .unwrap_or_default();
        writeln!(out, "\n── #{}{t} {}", n + 1, "─".repeat(30))?;
        line(out, from, rec)?;
        for r in group {
            line(out, to, r)?;
        }
    }
    Ok(())
}

fn line(out: &mut dyn Write, rev: Revision, rec: &Record) -> std::io::Result<()> {
    let arrow = match rec.dir {
        Dir::C2s => "C→S",
        Dir::S2c => "S→C",
    };
    match &rec.msg {
        Some(msg) => writeln!(out, "{rev}  {arrow}  {}", describe(msg))?,
        None => writeln!(out, "{rev}  {arrow}  ✗ (no message)")?,
    }
    if let Some(note) = &rec.note {
        writeln!(out, "{:12}· {note}", "")?;
    }
    Ok(())
}

/// `method #id {params}` / `result #id {result}` / `error #id {error}`.
fn describe(msg: &Message) -> String {
    let compact = |v: Option<&Value>| v.map(Value::to_string).unwrap_or_default();
    match msg {
        Message::Request(r) => format!("{} #{}  {}", r.method, r.id, compact(r.params.as_ref())),
        Message::Notification(n) => format!("{}  {}", n.method, compact(n.params.as_ref())),
        Message::Response(r) => format!("result #{}  {}", r.id, r.result),
        Message::Error(e) => {
            let id =
                e.id.as_ref()
                    .map(ToString::to_string)
                    .unwrap_or_else(|| "null".into());
            format!(
                "error #{id}  {}",
                serde_json::to_value(&e.error).unwrap_or(Value::Null)
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lines_wrap_within_the_width_and_keep_every_character() {
        let text = format!(
            "2026-07-28  S→C  result #3  {}",
            "{\"a\":1,\"bb\":22}".repeat(20)
        );
        let lines = wrap(&text, 60, 6);
        assert!(lines.len() > 1);
        assert!(lines.iter().all(|l| l.chars().count() <= 60), "{lines:#?}");
        let joined: String = lines.iter().map(|l| l.trim_start()).collect();
        assert_eq!(joined.replace(' ', ""), text.replace(' ', ""));
        assert_eq!(wrap("short", 60, 6), ["short"]);
    }

    #[test]
    fn demo_shows_both_revisions_and_the_task_methods() {
        let mut out = Vec::new();
        render(&mut out, &parse_built_in().unwrap(), Revision::Legacy).unwrap();
        let text = String::from_utf8(out).unwrap();
        for needle in [
            "2025-11-25",
            "2026-07-28",
            "initialize",
            "server/discover",
            "tasks/update",
            "inputRequests",
            "·",
        ] {
            assert!(
                text.contains(needle),
                "demo output lacks {needle:?}:\n{text}"
            );
        }
    }
}
