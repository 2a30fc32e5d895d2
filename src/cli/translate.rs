//! `mcp-tasks-shim translate`: JSONL transcript in, JSONL transcript out.

use std::io::{Read, Write};
use std::path::PathBuf;

use serde_json::Value;

use crate::revision::Revision;
use crate::translate::transcript::{Record, TranscriptError, translate_transcript};

/// Arguments of `translate`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The revision to translate into: 2025-11-25 or 2026-07-28.
    #[arg(long, value_parser = super::parse_revision)]
    pub to: Revision,
    /// Input transcript (JSONL); `-` or absent for stdin.
    pub file: Option<PathBuf>,
}

pub(crate) fn run(args: Args) -> Result<(), String> {
    let (name, text) = read_input(args.file.as_ref())?;
    let out = translate_jsonl(&text, args.to).map_err(|e| format!("{name}: {e}"))?;
    // Everything was translated before the first byte is written: a bad
    // line never leaves partial output behind.
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(out.as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(|e| format!("writing stdout: {e}"))
}

/// The input's name for error messages (its path, or `stdin`) and its text.
fn read_input(file: Option<&PathBuf>) -> Result<(String, String), String> {
    let (name, bytes) = match file {
        Some(p) if p.as_os_str() != "-" => (
            p.display().to_string(),
            std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()))?,
        ),
        _ => {
            let mut b = Vec::new();
            std::io::stdin()
                .read_to_end(&mut b)
                .map_err(|e| format!("reading stdin: {e}"))?;
            ("stdin".to_owned(), b)
        }
    };
    let text = utf8_text(bytes).map_err(|e| format!("{name}: {e}"))?;
    Ok((name, text))
}

/// The input as text, a leading byte order mark dropped (RFC 8259 lets a
/// parser ignore it); bytes that are not UTF-8 are named by their line.
fn utf8_text(bytes: Vec<u8>) -> Result<String, String> {
    let text = String::from_utf8(bytes).map_err(|e| {
        let good = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let line_no = good.iter().filter(|&&b| b == b'\n').count() + 1;
        format!("line {line_no}: not UTF-8")
    })?;
    Ok(match text.strip_prefix('\u{feff}') {
        Some(rest) => rest.to_owned(),
        None => text,
    })
}

/// Parses JSONL (empty lines skipped), translates, renders JSONL. Errors
/// name the 1-based input line.
pub(crate) fn translate_jsonl(text: &str, to: Revision) -> Result<String, String> {
    let mut records = Vec::new();
    let mut line_of = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line_no = n + 1;
        if line.trim().is_empty() {
            continue;
        }
        let value: Value =
            serde_json::from_str(line).map_err(|e| format!("line {line_no}: invalid JSON: {e}"))?;
        records.push(Record::from_value(&value).map_err(|e| format!("line {line_no}: {e}"))?);
        line_of.push(line_no);
    }
    let out = translate_transcript(&records, to).map_err(|e| {
        let line_no = line_of.get(e.index()).copied().unwrap_or(0);
        let first = records
            .get(..e.index())
            .is_some_and(|before| before.iter().all(|r| r.msg.is_none()));
        let hint = match &e {
            // The very first message already speaks the target revision:
            // most likely the wrong direction, not a broken file.
            TranscriptError::WrongRevision { .. } if first => format!(
                " (the transcript looks like {to} already; --to {} translates the other way)",
                to.other()
            ),
            _ => String::new(),
        };
        format!("line {line_no}: {}{hint}", e.reason())
    })?;
    let mut text = String::new();
    for rec in out {
        text.push_str(&rec.to_value().to_string());
        text.push('\n');
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_that_are_not_utf8_are_named_by_line_and_a_bom_is_dropped() {
        let e = utf8_text(b"{}\n{}\n{\"a\": \"\xff\"}\n".to_vec()).unwrap_err();
        assert_eq!(e, "line 3: not UTF-8");
        assert_eq!(utf8_text(b"\xef\xbb\xbf{}\n".to_vec()).unwrap(), "{}\n");
    }

    #[test]
    fn errors_name_the_input_line_not_the_record() {
        let input = "\n{\"dir\":\"c2s\",\"msg\":{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}}\n\n{\"dir\":\"c2s\",\"msg\":{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tasks/update\",\"params\":{}}}\n";
        let e = translate_jsonl(input, Revision::Modern).unwrap_err();
        assert!(e.starts_with("line 4: "), "{e}");
        assert!(e.contains("2026-07-28"), "{e}");
    }
}
