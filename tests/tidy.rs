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
    // Monotonic time is read in one place: limits on running programs, and the durations
    // telemetry records (`process::Stopwatch`).
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
    // Within cli/, text for people goes out through `out` and `note!`, which make it printable
    // (GOVERNANCE.md, "How to approve"); only cli/mod.rs writes to stdout and stderr itself.
    let v = violations(
        |p| !p.starts_with("src/cli/") || p == "src/cli/mod.rs",
        &["println!", "print!(", "eprintln!", "eprint!("],
    );
    assert!(
        v.is_empty(),
        "print with cli::out or cli::note!, which make the text printable:\n{}",
        v.join("\n")
    );
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
    // `atelier ui` serves its own pages over HTTP (hyper) and speaks to no forge. The
    // configuration names GitHub's default API address and checks that a configured one is a URL.
    let v = violations(
        |p| p.starts_with("src/forge/") || p == "src/cli/ui.rs" || p == "src/config.rs",
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

/// Every refusal code has exactly one row in GOVERNANCE.md's "Refusal codes" tables, which says
/// what it means and what to do about it; and every row there is a code that exists.
#[test]
fn every_code_is_documented_once_with_what_to_do() {
    use atelier::governance::Code;
    let text = include_str!("../GOVERNANCE.md");
    let section = text
        .split("\n## Refusal codes\n")
        .nth(1)
        .expect("GOVERNANCE.md has a Refusal codes section");
    let section = section.split("\n## ").next().unwrap_or(section);
    let mut rows: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    let mut problems = Vec::new();
    for line in section.lines().filter(|l| l.starts_with("| `E_")) {
        let cells: Vec<&str> = line
            .trim_start_matches('|')
            .trim_end_matches('|')
            .split(" | ")
            .map(str::trim)
            .collect();
        let code = cells[0].trim_matches('`');
        if code.parse::<Code>().is_err() {
            problems.push(format!("{code}: documented, but no such code"));
        }
        if cells.len() != 3 || cells[1].is_empty() || cells[2].is_empty() {
            problems.push(format!(
                "{code}: expected `| code | meaning | what to do |`, found {line}"
            ));
        }
        *rows.entry(code).or_default() += 1;
    }
    for code in Code::ALL {
        match rows.get(code.as_str()) {
            None => problems.push(format!("{code}: not documented")),
            Some(1) => {}
            Some(n) => problems.push(format!("{code}: documented {n} times")),
        }
    }
    assert!(
        problems.is_empty(),
        "GOVERNANCE.md, Refusal codes:\n{}",
        problems.join("\n")
    );
}

/// A code is a `Code` everywhere but in its own list: never a string that is compared, matched
/// or written into an error message (where the CLI could not see it, and it would exit 2).
#[test]
fn codes_are_typed_never_text() {
    let mut found = Vec::new();
    for (path, code) in files() {
        if path == "src/governance/code.rs" {
            continue;
        }
        for (i, line) in code.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            let bytes = line.as_bytes();
            for (at, _) in line.match_indices("E_") {
                let before = at.checked_sub(1).map(|b| bytes[b]);
                let after = bytes.get(at + 2);
                if !before.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
                    && after.is_some_and(u8::is_ascii_uppercase)
                {
                    found.push(format!("{path}:{}: {}", i + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "use `governance::Code::X`, not the text:\n{}",
        found.join("\n")
    );
}

/// Every error type that knows its kind is one `cli::classified` recognises, so that its kind
/// (a refusal's code above all) reaches the exit code whatever wrapped it; and every error type
/// that carries a code knows its kind.
#[test]
fn every_classified_error_reaches_the_edge() {
    let all = files();
    let cli = &all
        .iter()
        .find(|(p, _)| p == "src/cli/mod.rs")
        .expect("src/cli/mod.rs")
        .1;
    let start = cli.find("fn classified<").expect("cli::classified");
    let body = &cli[start..start + cli[start..].find("\n}\n").expect("end of classified")];
    let implemented = |marker: &str| {
        let mut names = Vec::new();
        for (path, code) in &all {
            for (at, _) in code.match_indices(marker) {
                let name: String = code[at + marker.len()..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                    .collect();
                let short = name.rsplit("::").next().unwrap_or_default().to_string();
                names.push((path.clone(), short));
            }
        }
        names
    };
    let classified = implemented("Classify for ");
    assert!(
        classified.len() >= 15,
        "found only {} Classify types",
        classified.len()
    );
    let missing: Vec<String> = classified
        .iter()
        .filter(|(_, name)| !body.contains(&format!("::{name},")))
        .map(|(path, name)| format!("{path}: {name}"))
        .collect();
    assert!(
        missing.is_empty(),
        "name these in cli::classified:\n{}",
        missing.join("\n")
    );
    let unkinded: Vec<String> = implemented("impl Coded for ")
        .into_iter()
        .filter(|(_, name)| !classified.iter().any(|(_, c)| c == name))
        .map(|(path, name)| format!("{path}: {name}"))
        .collect();
    assert!(
        unkinded.is_empty(),
        "these carry a code but do not implement errors::Classify:\n{}",
        unkinded.join("\n")
    );
}

#[test]
fn anyhow_stays_at_the_cli_edge() {
    // Domain modules return their own error types (thiserror); the CLI turns them into exit
    // codes in one place.
    let v = violations(|p| p.starts_with("src/cli/"), &["anyhow::", "use anyhow"]);
    assert!(v.is_empty(), "{}", v.join("\n"));
}

/// Errors are told apart by their kind (`errors::Classify`), decided where they are made: no
/// code below the CLI reads an error's text to decide what to do, nor catches bad input by
/// matching the `Input` variant's message.
#[test]
fn errors_are_told_apart_by_kind_never_by_text() {
    let mut found = violations(|_| false, &[".to_string().contains("]);
    for (path, code) in files() {
        for (i, line) in code.lines().enumerate() {
            let t = line.trim_start();
            if t.starts_with("//") || !t.contains("=>") {
                continue;
            }
            // Only a pattern: the side of `=>` that matches.
            let pattern = &t[..t.find("=>").expect("checked")];
            if let Some(at) = pattern.find("Input(") {
                let bound = &pattern[at + "Input(".len()..];
                if !bound.starts_with("_)") && pattern[..at].ends_with("::") {
                    found.push(format!("{path}:{}: {}", i + 1, t));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "decide by the error's kind (errors::Classify) or a variant of its own, not by its text:\n{}",
        found.join("\n")
    );
}
