//! Executable architecture rules: the invariants ARCHITECTURE.md states, checked on the source.

use std::path::{Path, PathBuf};

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Each source file's text without its `#[cfg(test)]` module (which comes last by convention).
fn files() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut paths = Vec::new();
    sources(&root.join("src"), &mut paths);
    paths
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("read");
            let code = text.split("#[cfg(test)]").next().unwrap_or("").to_string();
            (
                p.strip_prefix(root)
                    .expect("under root")
                    .display()
                    .to_string(),
                code,
            )
        })
        .collect()
}

fn violations(allowed: impl Fn(&str) -> bool, needles: &[&str]) -> Vec<String> {
    let mut found = Vec::new();
    for (path, code) in files() {
        if allowed(&path) {
            continue;
        }
        for (i, line) in code.lines().enumerate() {
            let trimmed = line.trim_start();
            if trimmed.starts_with("//") {
                continue;
            }
            for n in needles {
                if line.contains(n) {
                    found.push(format!("{path}:{}: `{n}`", i + 1));
                }
            }
        }
    }
    found
}

#[test]
fn governance_does_no_io_no_clock_no_git() {
    let v = violations(
        |p| !p.starts_with("src/governance/"),
        &[
            "std::fs",
            "std::process",
            "std::net",
            "std::env",
            "git2",
            "SystemTime",
            "tokio",
            "File::",
            "println!",
            "eprintln!",
        ],
    );
    assert!(v.is_empty(), "governance must stay pure:\n{}", v.join("\n"));
}

#[test]
fn only_the_clock_reads_the_time() {
    let v = violations(|p| p == "src/clock.rs", &["SystemTime::now"]);
    assert!(v.is_empty(), "{}", v.join("\n"));
    // Monotonic time is for limits on running programs only.
    let v = violations(|p| p == "src/agent/process.rs", &["Instant::now"]);
    assert!(v.is_empty(), "{}", v.join("\n"));
}

#[test]
fn only_cli_prints() {
    let v = violations(
        |p| p.starts_with("src/cli/"),
        &[
            "println!",
            "print!(",
            "eprintln!",
            "eprint!(",
            "std::io::stdout",
            "dbg!(",
        ],
    );
    assert!(v.is_empty(), "{}", v.join("\n"));
}

#[test]
fn no_bare_unwrap_outside_tests() {
    let v = violations(|_| false, &[".unwrap()"]);
    assert!(
        v.is_empty(),
        "use expect(\"why this holds\"):\n{}",
        v.join("\n")
    );
}

#[test]
fn only_the_agent_edge_spawns_programs() {
    let v = violations(
        |p| p == "src/agent/process.rs" || p == "src/git.rs",
        &["std::process::Command", "Command::new"],
    );
    assert!(v.is_empty(), "{}", v.join("\n"));
}

#[test]
fn github_stays_behind_the_forge_trait() {
    // The workflow, the gate and the audit are written once for every forge: GitHub's models,
    // HTTP statuses and addresses live in src/forge/ (and the agent HTTP backend talks to model
    // endpoints, not to a forge).
    let v = violations(
        |p| p.starts_with("src/forge/"),
        &[
            "octocrab",
            "api.github.com",
            "StatusCode",
            "hyper::",
            "http::Uri",
            "http::Method",
            "use http",
        ],
    );
    assert!(v.is_empty(), "{}", v.join("\n"));
    let v = violations(
        |p| p.starts_with("src/forge/") || p == "src/agent/http.rs",
        &[".as_u16()", "409", "github.com/"],
    );
    assert!(v.is_empty(), "{}", v.join("\n"));
    // One loop: no second implementation of the governed commands for one forge.
    let v = violations(
        |p| p.starts_with("src/forge/"),
        &[
            "fn gate_pr",
            "fn merge_pr",
            "fn approve_pr",
            "ForgeKind::GitHub =>",
        ],
    );
    assert!(v.is_empty(), "{}", v.join("\n"));
}
