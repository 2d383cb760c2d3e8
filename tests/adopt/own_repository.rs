//! Atelier adopts itself: its own configuration, constitution, panel and prompts parse, cover its
//! code, and differ from the defaults `init` installs only as documented.

use std::path::{Path, PathBuf};

use atelier::config::{Config, ForgeConfig};
use atelier::governance::policy::Policy;

use crate::support::Env;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The files under `src/defaults/`, relative to it (`policies/governance.toml`, …).
fn defaults() -> Vec<String> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("src/defaults") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                walk(&path, out);
            } else {
                out.push(path);
            }
        }
    }
    let base = root().join("src/defaults");
    let mut files = Vec::new();
    walk(&base, &mut files);
    let mut rels: Vec<String> = files
        .iter()
        .map(|p| {
            p.strip_prefix(&base)
                .expect("under src/defaults")
                .display()
                .to_string()
        })
        .collect();
    rels.sort();
    rels
}

/// `text` cut around its constitution's `paths` array: what comes before, and what after.
fn around_constitution_paths(text: &str) -> (&str, &str) {
    let open = "[constitution]\npaths = [\n";
    let start = text.find(open).expect("[constitution] paths = [") + open.len();
    let end = start + text[start..].find("\n]\n").expect("the closing ]") + 1;
    (&text[..start], &text[end..])
}

#[test]
fn atelier_s_own_configuration_parses_and_its_gauntlet_is_what_ci_runs() {
    let text = read("atelier.toml");
    let config = Config::parse("atelier.toml", &text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        (config.forge.kind.as_str(), config.forge.branch.as_str()),
        ("local", "main")
    );
    // The gauntlet runs .ci/run's checks, the same commands in the same order.
    let ci = read(".ci/run");
    let ci: Vec<&str> = ci.lines().filter(|l| l.starts_with("cargo ")).collect();
    let steps: Vec<&str> = config
        .gauntlet
        .steps
        .iter()
        .map(|s| s.run.as_str())
        .collect();
    assert_eq!(
        steps, ci,
        "atelier.toml's [gauntlet] and .ci/run drifted apart"
    );
    assert_eq!(ci.len(), 3, "{ci:?}");
    // The lint proposer fixes one named family at a time.
    let lint = config.proposers.lint.as_ref().expect("[proposers.lint]");
    assert!(lint.command.iter().any(|a| a.contains("{family}")));
    assert!(!lint.families.is_empty());
    // Above Atelier's additions is exactly what `atelier init` writes for this repository.
    let init = Config {
        forge: ForgeConfig {
            repository: config.forge.repository.clone(),
            branch: config.forge.branch.clone(),
            ..ForgeConfig::default_local()
        },
        gate: Default::default(),
        roles: Default::default(),
        gauntlet: Default::default(),
        conductor: Default::default(),
        swarm: Default::default(),
        review: Default::default(),
        proposers: Default::default(),
        validators: Default::default(),
        budget: Default::default(),
        prices: Default::default(),
    }
    .render();
    assert!(
        text.starts_with(&init),
        "atelier.toml must start with what `atelier init` writes:\n{init}"
    );
}

/// The policy as the gate reads it: committed, then taken from the commit's tree.
#[test]
fn atelier_s_own_constitution_covers_all_of_its_code() {
    let env = Env::bare_repo();
    for rel in ["policies/governance.toml", "policies/allowed_signers"] {
        env.write(rel, &read(rel));
    }
    env.git(&["add", "policies"]);
    env.git(&["commit", "-q", "-m", "Atelier's policy"]);
    let repo = git2::Repository::open(&env.repo).expect("open");
    let tree = repo
        .head()
        .and_then(|h| h.peel_to_tree())
        .expect("the commit's tree");
    let files = atelier::git::policy_files(&repo, &tree).expect("policy files");
    let policy = Policy::load(&files).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(policy.constitution.quorum, 2);
    let rules = |path: &str| -> Vec<String> {
        policy
            .touched(&[path.to_string()])
            .iter()
            .map(|r| r.name.clone())
            .collect()
    };
    for path in [
        "src/lib.rs",
        "src/swarm/runtime/mod.rs",
        "src/main.rs",
        "src/defaults/policies/governance.toml",
        "tests/tidy.rs",
        "tests/fixtures/hackbench/cases.toml",
        "missions/flaky.toml",
        "benches/swarm.rs",
        "fuzz/Cargo.toml",
        "clippy.toml",
        "Cargo.lock",
        ".ci/run",
        "atelier.toml",
        "policies/allowed_signers",
        "reviewers/size.toml",
        "prompts/proposer.j2",
        "GOVERNANCE.md",
    ] {
        assert_eq!(rules(path), ["constitution", "any change"], "{path}");
    }
    for path in [
        "README.md",
        "ARCHITECTURE.md",
        "docs/performance.md",
        "proposals/1-x/proposal.toml",
    ] {
        assert_eq!(rules(path), ["any change"], "{path}");
    }
}

#[test]
fn atelier_s_own_files_differ_from_the_defaults_only_as_documented() {
    let defaults = defaults();
    assert!(
        defaults.contains(&"policies/governance.toml".to_string()),
        "{defaults:?}"
    );
    for rel in &defaults {
        let (own, default) = (read(rel), read(&format!("src/defaults/{rel}")));
        if rel == "policies/governance.toml" {
            // Only the constitution's paths differ: Atelier's covers all of its code.
            assert_eq!(
                around_constitution_paths(&own),
                around_constitution_paths(&default),
                "{rel}: Atelier's own may differ from src/defaults/{rel} only in [constitution] paths"
            );
        } else {
            // Atelier's own adds to the default at its end (its judge paths, its size limit,
            // how its maintainers list their keys), and changes nothing in it.
            assert!(
                own.starts_with(&default),
                "{rel}: Atelier's own must start with src/defaults/{rel}, then add to it"
            );
        }
    }
    // The built-in prompts are Atelier's own.
    for (builtin, rel) in [
        (
            atelier::improve::planner::DEFAULT_TEMPLATE,
            "prompts/proposer.j2",
        ),
        (
            atelier::improve::validator::DEFAULT_TEMPLATE,
            "prompts/validator.j2",
        ),
        (
            atelier::agent::prompt::DEFAULT_TEMPLATE,
            "prompts/worker.j2",
        ),
        (
            atelier::workflow::body::DEFAULT_TEMPLATE,
            "prompts/pull_request.j2",
        ),
        (
            atelier::agent::reviewer::DEFAULT_TEMPLATE,
            "reviewers/templates/adversary.md.j2",
        ),
    ] {
        assert_eq!(builtin, read(rel), "{rel}");
    }
}

#[test]
fn init_installs_atelier_s_own_files_or_the_defaults_they_extend() {
    let env = Env::bare_repo();
    env.atelier(&["init"]).ok();
    for rel in [
        "GOVERNANCE.md",
        "proposals/README.md",
        "reviewers/README.md",
        "reviewers/adversary.toml",
        "reviewers/templates/adversary.md.j2",
        "reviewers/deps.toml",
        "reviewers/scope.toml",
        "reviewers/secrets.toml",
        "reviewers/tests-tamper.toml",
    ] {
        assert_eq!(
            env.read(rel),
            read(rel),
            "{rel}: init installs Atelier's own"
        );
    }
    for rel in defaults() {
        assert_eq!(
            env.read(&rel),
            read(&format!("src/defaults/{rel}")),
            "{rel}: init installs src/defaults/{rel}"
        );
    }
    // The built-in panel is what init installs.
    for (rel, text) in atelier::panel::DEFAULT_PANEL {
        assert_eq!(env.read(rel), *text, "{rel}");
    }
}
