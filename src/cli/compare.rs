//! `mcp-tasks-shim compare`: two transcripts of one conversation, masked
//! and paired, and what a client would notice between them.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use crate::testing::{MaskPath, Masks, Transcript, compare};

/// Arguments of `compare`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Masked by default (they differ by nature from run to run): request ids ($.id), \
task ids ($..taskId), requestState, listen subscription ids, createdAt, \
lastUpdatedAt, pollInterval and pollIntervalMs. Ids are replaced by labels \
numbered by first appearance (<task-1>, <id-3>), so what was equal stays equal.

Exit status: 0 when the transcripts are equal, 1 on a difference, 2 on an error.")]
pub struct Args {
    /// The first transcript (JSONL, as --record writes it).
    #[arg(required_unless_present = "normalize")]
    pub a: Option<PathBuf>,
    /// The second transcript.
    #[arg(required_unless_present = "normalize")]
    pub b: Option<PathBuf>,
    /// Print FILE's masked form (JSONL, stable for snapshots) instead of
    /// comparing.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["a", "b"])]
    pub normalize: Option<PathBuf>,
    /// Also mask this path (a JSONPath subset: $.a.b, $..name, [*], ['a/b']).
    #[arg(long, value_name = "JSONPATH")]
    pub mask: Vec<MaskPath>,
    /// Stop masking this path (one of the defaults, as listed above).
    #[arg(long, value_name = "JSONPATH")]
    pub keep: Vec<MaskPath>,
    /// Also mask task retention (ttl, ttlMs), which a shim may bound.
    #[arg(long)]
    pub mask_ttl: bool,
    /// Colour the report: auto (on a terminal), always, never.
    #[arg(long, value_enum, default_value = "auto")]
    pub color: Color,
}

/// When to colour the report.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Color {
    /// On a terminal.
    Auto,
    /// Always.
    Always,
    /// Never.
    Never,
}

/// Whether the transcripts are equal (`Ok(true)`); `Err` for an error.
pub(crate) fn run(args: Args) -> Result<bool, String> {
    let mut masks = Masks::default();
    if args.mask_ttl {
        masks = masks.with_ttl();
    }
    for p in args.mask {
        masks = masks.mask(p);
    }
    for p in &args.keep {
        if !masks.paths().any(|m| m == p.as_str()) {
            return Err(format!(
                "--keep {p}: not a mask in force (masked: {})",
                masks.paths().collect::<Vec<_>>().join(", ")
            ));
        }
        masks = masks.keep(p);
    }
    let read = |p: &PathBuf| {
        Transcript::read(p).map_err(|e| match e {
            crate::testing::TranscriptReadError::Io { .. } => e.to_string(),
            e => format!("{}: {e}", p.display()),
        })
    };
    let mut out = std::io::stdout().lock();
    let written = |r: std::io::Result<()>| r.map_err(|e| format!("writing stdout: {e}"));
    if let Some(file) = &args.normalize {
        for v in read(file)?.normalized(&masks) {
            written(writeln!(out, "{v}"))?;
        }
        return Ok(true);
    }
    let (Some(a), Some(b)) = (&args.a, &args.b) else {
        return Err("compare needs two transcripts (or --normalize FILE)".into());
    };
    let cmp = compare(&read(a)?, &read(b)?, &masks);
    let color = match args.color {
        Color::Always => true,
        Color::Never => false,
        Color::Auto => std::io::stdout().is_terminal(),
    };
    written(out.write_all(cmp.render(color).as_bytes()))?;
    Ok(cmp.is_equal())
}
