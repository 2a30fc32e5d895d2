//! `mcp-tasks-shim demo` as a person reads it in a terminal: every line
//! fits the width (`COLUMNS`), and its figures say their unit.

use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_mcp-tasks-shim");

fn demo(columns: &str) -> String {
    let out = Command::new(BIN)
        .arg("demo")
        .env("COLUMNS", columns)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .expect("run the demo");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8")
}

#[test]
fn the_demo_fits_columns_and_gives_units() {
    let text = demo("60");
    let long: Vec<&str> = text.lines().filter(|l| l.chars().count() > 60).collect();
    assert!(long.is_empty(), "lines over 60 columns: {long:#?}");
    // Both the transcript and the live runs are there, wrapped rather
    // than cut: the translated task's input requests are still in full.
    for needle in [
        "server/discover",
        "Live: a 2025-11-25 client",
        "Live: a 2026-07-28 client",
    ] {
        assert!(text.contains(needle), "{needle:?} missing:\n{text}");
    }
    let joined: String = text.lines().map(str::trim_start).collect();
    assert!(joined.contains("\"How many copies?\""), "{text}");
    // Every time offset carries its unit, and the legend gives the unit
    // of the durations inside the messages.
    let offsets: Vec<&str> = text.lines().filter(|l| l.contains(" t=")).collect();
    assert!(!offsets.is_empty(), "{text}");
    for line in offsets {
        let after = line.split(" t=").nth(1).unwrap_or_default();
        let figure: String = after.chars().take_while(char::is_ascii_digit).collect();
        assert!(after[figure.len()..].starts_with(" ms"), "no unit: {line}");
    }
    let words: Vec<&str> = text.split_whitespace().collect();
    let prose = words.join(" ");
    assert!(prose.contains("pollIntervalMs are milliseconds"), "{text}");
}

#[test]
fn a_wide_terminal_gets_longer_lines() {
    let wide = demo("200");
    assert!(wide.lines().any(|l| l.chars().count() > 100), "{wide}");
    assert!(wide.lines().all(|l| l.chars().count() <= 200), "{wide}");
}
