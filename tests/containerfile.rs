//! The `Containerfile` cannot be built here (no container engine on the
//! project's machines), so its structure is checked instead, against the
//! crate it packages: a rename of the binary or a dropped instruction
//! fails this test rather than the first `docker build` someone runs.

use std::path::Path;

/// The Containerfile's instructions: continuation lines joined, comments
/// and blank lines dropped, each as (upper-case keyword, arguments).
fn instructions() -> Vec<(String, String)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("Containerfile");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut joined = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') || (line.is_empty() && current.is_empty()) {
            continue;
        }
        match line.strip_suffix('\\') {
            Some(start) => {
                current.push_str(start);
                current.push(' ');
            }
            None => {
                current.push_str(line);
                joined.push(std::mem::take(&mut current));
            }
        }
    }
    joined
        .into_iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let (keyword, args) = l.trim().split_once(char::is_whitespace).unwrap_or((&l, ""));
            (keyword.to_ascii_uppercase(), args.trim().to_owned())
        })
        .collect()
}

/// `[[bin]]`'s name in Cargo.toml.
fn bin_name() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    let manifest: toml::Value = std::fs::read_to_string(path)
        .expect("Cargo.toml")
        .parse()
        .expect("Cargo.toml is TOML");
    manifest["bin"][0]["name"]
        .as_str()
        .expect("[[bin]] name")
        .to_owned()
}

#[test]
fn the_containerfile_builds_the_binary_and_runs_it_as_a_non_root_http_front() {
    let all = instructions();
    let bin = bin_name();
    let of = |keyword: &str| -> Vec<&str> {
        all.iter()
            .filter(|(k, _)| k == keyword)
            .map(|(_, a)| a.as_str())
            .collect()
    };
    // Two stages: a Rust 1.95 builder, a slim Debian runtime.
    let froms = of("FROM");
    assert_eq!(froms.len(), 2, "{froms:?}");
    let builder: Vec<&str> = froms[0].split_whitespace().collect();
    assert!(
        builder[0].starts_with("rust:1.95") && builder[1..] == ["AS", "builder"],
        "{builder:?}"
    );
    assert_eq!(froms[1], "debian:bookworm-slim");
    // Everything after this is the runtime stage.
    let runtime_start = all
        .iter()
        .rposition(|(k, _)| k == "FROM")
        .expect("two FROMs");
    let runtime = &all[runtime_start..];
    let builds = all[..runtime_start]
        .iter()
        .any(|(k, a)| k == "RUN" && a.contains("cargo build --release") && a.contains(&bin));
    assert!(builds, "the builder never builds {bin}: {all:?}");
    // The binary the builder made, copied to where the ENTRYPOINT finds it.
    let copied = runtime
        .iter()
        .find_map(|(k, a)| {
            (k == "COPY" && a.starts_with("--from=builder")).then(|| {
                let parts: Vec<&str> = a.split_whitespace().collect();
                (parts[1].to_owned(), parts[2].to_owned())
            })
        })
        .expect("a COPY --from=builder in the runtime stage");
    assert_eq!(copied.0, format!("/src/target/release/{bin}"), "{copied:?}");
    assert_eq!(copied.1, format!("/usr/local/bin/{bin}"), "{copied:?}");
    // Not root, in the stage that runs.
    let user = runtime
        .iter()
        .rev()
        .find_map(|(k, a)| (k == "USER").then_some(a.as_str()))
        .expect("USER in the runtime stage");
    let name = user.split(':').next().unwrap_or_default();
    assert!(!["root", "0", ""].contains(&name), "USER {user}");
    let health = runtime
        .iter()
        .find_map(|(k, a)| (k == "HEALTHCHECK").then_some(a.as_str()))
        .expect("HEALTHCHECK");
    assert!(
        health.contains("CMD") && health.contains("http://127.0.0.1:8080/healthz"),
        "{health}"
    );
    assert!(
        runtime.iter().any(|(k, a)| k == "EXPOSE" && a == "8080"),
        "{runtime:?}"
    );
    let entrypoint = runtime
        .iter()
        .find_map(|(k, a)| (k == "ENTRYPOINT").then_some(a.as_str()))
        .expect("ENTRYPOINT");
    let argv: Vec<String> = serde_json::from_str(entrypoint)
        .unwrap_or_else(|e| panic!("ENTRYPOINT is not an exec-form array ({e}): {entrypoint}"));
    assert_eq!(argv, [bin.as_str(), "http", "--listen", "0.0.0.0:8080"]);
}
