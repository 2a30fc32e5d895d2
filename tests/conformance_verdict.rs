//! The verdict of `scripts/conformance.sh` (its `conformance-summary.js`):
//! a run of the official suite passes only with the expected number of
//! passed checks and no skip but the declared ones, so a suite version that
//! skips every scenario cannot pass by failing nothing. Checked on results
//! written here as the suite writes them, and through the script's own
//! self-test (which uses the script's real constants).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// A fresh results folder holding, per scenario, one run's `checks.json`
/// with the given (id, status) checks.
fn results(name: &str, scenarios: &[(&str, &[(&str, &str)])]) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("conformance-verdict-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for (scenario, checks) in scenarios {
        let run = dir
            .join(scenario)
            .join(format!("{scenario}-2026-01-01T00-00-00"));
        std::fs::create_dir_all(&run).expect("create the results folder");
        let list: Vec<serde_json::Value> = checks
            .iter()
            .map(|(id, status)| serde_json::json!({"id": id, "name": id, "status": status}))
            .collect();
        std::fs::write(
            run.join("checks.json"),
            serde_json::to_string(&list).expect("serialise"),
        )
        .expect("write checks.json");
    }
    dir
}

/// The summary's verdict on `dir`, expecting 3 passes and allowing the
/// skip of check `allowed`.
fn verdict(dir: &Path, scenarios: &[&str]) -> Output {
    let out = Command::new("node")
        .arg(Path::new(ROOT).join("scripts/conformance-summary.js"))
        .args(["--expected-passed", "3", "--allow-skip", "allowed"])
        .arg(dir)
        .args(scenarios)
        .output()
        .expect("run node scripts/conformance-summary.js");
    let _ = std::fs::remove_dir_all(dir);
    out
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

const PASSES: &[(&str, &str)] = &[("a", "SUCCESS"), ("b", "SUCCESS"), ("c", "SUCCESS")];

#[test]
fn the_expected_passes_and_a_declared_skip_pass() {
    let dir = results(
        "good",
        &[
            ("tasks-one", PASSES),
            ("tasks-two", &[("allowed", "SKIPPED")]),
        ],
    );
    let out = verdict(&dir, &["tasks-one", "tasks-two"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
}

#[test]
fn a_run_that_skips_everything_fails_though_nothing_failed() {
    let skipped: &[(&str, &str)] = &[("a", "SKIPPED"), ("b", "SKIPPED"), ("c", "SKIPPED")];
    let dir = results(
        "all-skipped",
        &[
            ("tasks-one", skipped),
            ("tasks-two", &[("allowed", "SKIPPED")]),
        ],
    );
    let out = verdict(&dir, &["tasks-one", "tasks-two"]);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("UNDECLARED SKIP tasks-one / a"), "{said}");
    assert!(
        said.contains("TOO FEW PASSED: 0 checks passed, 3 expected"),
        "{said}"
    );
}

#[test]
fn fewer_passes_than_expected_fail() {
    let dir = results("too-few", &[("tasks-one", &PASSES[..2])]);
    let out = verdict(&dir, &["tasks-one"]);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("TOO FEW PASSED: 2 checks passed, 3 expected"),
        "{said}"
    );
}

#[test]
fn an_undeclared_skip_fails_beside_all_the_passes() {
    let mut checks = PASSES.to_vec();
    checks.push(("new-check", "SKIPPED"));
    let dir = results("extra-skip", &[("tasks-one", &checks)]);
    let out = verdict(&dir, &["tasks-one"]);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("UNDECLARED SKIP tasks-one / new-check"),
        "{said}"
    );
}

/// The script's self-test feeds its real constants (EXPECTED_PASSED,
/// ALLOWED_SKIPS) doctored results and must see each rejected.
#[test]
fn the_script_self_test_rejects_its_doctored_results() {
    let out = Command::new("bash")
        .arg(Path::new(ROOT).join("scripts/conformance.sh"))
        .arg("self-test")
        .output()
        .expect("run scripts/conformance.sh self-test");
    let said = text(&out);
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(said.contains("self-test passed"), "{said}");
    assert!(!said.contains("BAD "), "{said}");
}
