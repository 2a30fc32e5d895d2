//! `mcp-tasks-shim translate`.

use std::path::PathBuf;

use crate::revision::Revision;

/// Arguments of `translate`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The revision to translate into: 2025-11-25 or 2026-07-28.
    #[arg(long, value_parser = super::parse_revision)]
    pub to: Revision,
    /// Input transcript (JSONL); `-` or absent for stdin.
    pub file: Option<PathBuf>,
}

pub(crate) fn run(_args: Args) -> Result<(), String> {
    Err("translate: not implemented yet".into())
}
