//! Masks: which parts of a message differ by nature between two runs of
//! the same conversation, written as a small JSONPath subset.
//!
//! A mask path starts at the message (`$`) and is a list of steps:
//! `.name` or `['name']` a member, `[*]` or `.*` any member or element,
//! `..name` a member at any depth. `$.id` is the JSON-RPC id, `$..taskId`
//! every task id, `$..['io.modelcontextprotocol/related-task']` the
//! related-task `_meta`.

use std::fmt;

/// One step of a [`MaskPath`].
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    /// A member of this name.
    Member(String),
    /// Any member or element.
    Any,
    /// A member of this name, at this level or any below.
    Descend(String),
}

/// A path to mask (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MaskPath {
    text: String,
    steps: Vec<Step>,
}

/// A path that is not of the supported JSONPath subset.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "bad mask path {path:?}: {why} (examples: $.id, $..taskId, $.result.content[*].text, $..['a/b'])"
)]
pub struct MaskPathError {
    path: String,
    why: &'static str,
}

impl MaskPath {
    /// Parses `text` (`$` followed by steps).
    pub fn parse(text: &str) -> Result<MaskPath, MaskPathError> {
        let err = |why| MaskPathError {
            path: text.to_owned(),
            why,
        };
        let mut rest = text
            .strip_prefix('$')
            .ok_or_else(|| err("it must start with $"))?;
        let mut steps = Vec::new();
        while !rest.is_empty() {
            let descend = rest.starts_with("..");
            if descend {
                rest = &rest[2..];
            } else if let Some(r) = rest.strip_prefix('.') {
                rest = r;
            } else if !rest.starts_with('[') {
                return Err(err("expected . or [ between steps"));
            }
            let (name, after) = if let Some(r) = rest.strip_prefix("['") {
                let end = r.find("']").ok_or_else(|| err("unclosed ['"))?;
                (Some(r[..end].to_owned()), &r[end + 2..])
            } else if let Some(r) = rest.strip_prefix("[*]") {
                (None, r)
            } else if let Some(r) = rest.strip_prefix('*') {
                (None, r)
            } else {
                let end = rest.find(['.', '[']).unwrap_or(rest.len());
                if end == 0 {
                    return Err(err("empty step"));
                }
                (Some(rest[..end].to_owned()), &rest[end..])
            };
            steps.push(match (descend, name) {
                (true, Some(n)) => Step::Descend(n),
                (true, None) => return Err(err("..* is not supported")),
                (false, Some(n)) => Step::Member(n),
                (false, None) => Step::Any,
            });
            rest = after;
        }
        if steps.is_empty() {
            return Err(err("a path needs at least one step"));
        }
        Ok(MaskPath {
            text: text.to_owned(),
            steps,
        })
    }

    /// The path as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether the location `at` (member names; array elements as `None`)
    /// is one this path names.
    pub(crate) fn matches(&self, at: &[Option<&str>]) -> bool {
        matches_from(&self.steps, at)
    }
}

fn matches_from(steps: &[Step], at: &[Option<&str>]) -> bool {
    match (steps.first(), at.first()) {
        (None, None) => true,
        (None, Some(_)) | (Some(_), None) => false,
        (Some(Step::Any), Some(_)) => matches_from(&steps[1..], &at[1..]),
        (Some(Step::Member(n)), Some(Some(k))) if n == k => matches_from(&steps[1..], &at[1..]),
        (Some(Step::Member(_)), Some(_)) => false,
        (Some(Step::Descend(n)), Some(here)) => {
            (*here == Some(n.as_str()) && matches_from(&steps[1..], &at[1..]))
                || matches_from(steps, &at[1..])
        }
    }
}

impl fmt::Display for MaskPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::str::FromStr for MaskPath {
    type Err = MaskPathError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        MaskPath::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(path: &[&str]) -> Vec<Option<&'static str>> {
        path.iter()
            .map(|s| {
                let s: &'static str = Box::leak(s.to_string().into_boxed_str());
                (s != "#").then_some(s)
            })
            .collect()
    }

    #[test]
    fn paths_match_what_they_name() {
        let p = |s: &str| MaskPath::parse(s).unwrap();
        assert!(p("$.id").matches(&at(&["id"])));
        assert!(!p("$.id").matches(&at(&["result", "id"])));
        assert!(p("$..taskId").matches(&at(&["result", "tasks", "#", "taskId"])));
        assert!(p("$..taskId").matches(&at(&["taskId"])));
        assert!(p("$.result.content[*].text").matches(&at(&["result", "content", "#", "text"])));
        assert!(
            p("$..['io.modelcontextprotocol/related-task']").matches(&at(&[
                "result",
                "_meta",
                "io.modelcontextprotocol/related-task"
            ]))
        );
        assert!(p("$.params.*").matches(&at(&["params", "x"])));
    }

    #[test]
    fn bad_paths_say_why() {
        for bad in ["id", "$", "$.", "$..*", "$['x", "$a"] {
            assert!(MaskPath::parse(bad).is_err(), "{bad}");
        }
    }
}
