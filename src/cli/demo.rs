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

pub(crate) fn run(args: Args) -> Result<(), String> {
    let mut stdout = std::io::stdout().lock();
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
            if !written(super::demo_live::print(conversation, &mut stdout))? {
                return Ok(());
            }
        }
    }
    Ok(())
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
    for (n, (rec, group)) in records.iter().zip(&groups).enumerate() {
        let t = rec
            .extra
            .get("t")
            .map(|t| format!(" t={t}"))
            .unwrap_or_default();
        writeln!(out, "\n── #{}{t} {}", n + 1, "─".repeat(60))?;
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
