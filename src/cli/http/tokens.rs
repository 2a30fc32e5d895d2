//! Bearer tokens kept out of argv: a token file (reloaded on SIGHUP). (The
//! `MCP_SHIM_TOKENS` environment variable is `--token`'s, read by clap.)

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Why a token source cannot be used. Never shows a token.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TokenError {
    /// The file cannot be read.
    #[error("--token-file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Group or others may access it: the tokens are secrets.
    #[error(
        "--token-file {path}: group or others can access it (mode {mode:03o}), and its tokens are secrets; run `chmod 600 {path}`"
    )]
    Exposed { path: PathBuf, mode: u32 },
    /// A line that is not `TOKEN=PRINCIPAL` (or a comment).
    #[error("{source_name} line {line}: expected TOKEN=PRINCIPAL")]
    Malformed { source_name: String, line: usize },
    /// One token standing for two principals.
    #[error("{source_name}: one token is given twice (for {first:?} and {second:?})")]
    Twice {
        source_name: String,
        first: String,
        second: String,
    },
}

/// `TOKEN=PRINCIPAL` pairs, one a line; blank lines and lines starting
/// with `#` are skipped. `source_name` names where they came from in errors.
pub(crate) fn parse_lines(
    text: &str,
    source_name: &str,
    separator: char,
) -> Result<Vec<(String, String)>, TokenError> {
    let mut pairs = Vec::new();
    for (n, entry) in text.split(separator).enumerate() {
        let entry = entry.trim();
        if entry.is_empty() || entry.starts_with('#') {
            continue;
        }
        match entry.split_once('=') {
            Some((t, p)) if !t.trim().is_empty() && !p.trim().is_empty() => {
                pairs.push((t.trim().to_owned(), p.trim().to_owned()));
            }
            _ => {
                return Err(TokenError::Malformed {
                    source_name: source_name.to_owned(),
                    line: n + 1,
                });
            }
        }
    }
    Ok(pairs)
}

/// The pairs of a token file, refused when group or others can access it.
pub(crate) fn read_file(path: &Path) -> Result<Vec<(String, String)>, TokenError> {
    let read = |source| TokenError::Read {
        path: path.to_owned(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(read)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(TokenError::Exposed {
                path: path.to_owned(),
                mode,
            });
        }
    }
    #[cfg(not(unix))]
    let _ = meta;
    let text = std::fs::read_to_string(path).map_err(read)?;
    parse_lines(&text, &format!("--token-file {}", path.display()), '\n')
}

/// One principal per token across every source: a token given twice
/// would silently stand for the last principal named.
pub(crate) fn merge<'a>(
    sources: impl IntoIterator<Item = (&'a str, &'a [(String, String)])>,
) -> Result<HashMap<String, String>, TokenError> {
    let mut map = HashMap::new();
    for (source_name, pairs) in sources {
        for (token, principal) in pairs {
            if let Some(first) = map.insert(token.clone(), principal.clone()) {
                return Err(TokenError::Twice {
                    source_name: source_name.to_owned(),
                    first,
                    second: principal.clone(),
                });
            }
        }
    }
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_comments_and_errors_without_the_token() {
        let pairs = parse_lines("# ops\n\nt1=alice\n  t2 = bob \n", "f", '\n').unwrap();
        assert_eq!(
            pairs,
            [("t1".into(), "alice".into()), ("t2".into(), "bob".into())]
        );
        let env = parse_lines("t1=alice,t2=bob", "MCP_SHIM_TOKENS", ',').unwrap();
        assert_eq!(env.len(), 2);
        let e = parse_lines("t1=alice\ns3cret\n", "f", '\n').unwrap_err();
        assert_eq!(e.to_string(), "f line 2: expected TOKEN=PRINCIPAL");
        let twice = [
            ("s3cret".to_owned(), "a".to_owned()),
            ("s3cret".into(), "b".into()),
        ];
        let e = merge([("x", &twice[..])]).unwrap_err().to_string();
        assert!(e.contains("given twice") && !e.contains("s3cret"), "{e}");
    }
}
