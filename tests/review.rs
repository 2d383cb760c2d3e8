//! The review panel's built-in reviewers, through `atelier review`; the gate enforcing them is in
//! tests/review_gate.rs.

use serde_json::Value;

use crate::support::Env;

fn propose_as_agent(env: &Env, edits: &[(&str, &str)], title: &str) -> String {
    let patch = env.patch(edits);
    env.atelier(&[
        "propose",
        "--patch",
        patch.to_str().expect("utf8"),
        "--title",
        title,
        "--agent",
        "claude-code",
    ])
    .ok()
    .stdout
    .trim()
    .to_string()
}

fn review(env: &Env, id: &str) -> (i32, Value) {
    let run = env.atelier(&["review", id, "--json"]);
    assert!(
        run.stderr.contains("the verdict is recorded in the ledger"),
        "{run:?}"
    );
    (run.code, run.json())
}

fn categories(v: &Value) -> Vec<String> {
    v["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| f["category"].as_str().expect("category").to_string())
        .collect()
}

#[test]
fn an_agent_changing_the_policy_is_blocked_and_a_person_is_not() {
    let env = Env::new();
    let gov = env.read("policies/governance.toml") + "\n# tweak\n";
    let person = env.propose(&[("policies/governance.toml", &gov)], "Tweak the policy");
    let (code, v) = review(&env, &person);
    assert_eq!((code, v["verdict"].as_str()), (0, Some("approve")), "{v:#}");
    let agent = propose_as_agent(&env, &[("policies/governance.toml", &gov)], "Agent tweak");
    let (code, v) = review(&env, &agent);
    assert_eq!((code, v["verdict"].as_str()), (1, Some("block")), "{v:#}");
    assert_eq!(categories(&v), ["judge-tamper"]);
    assert_eq!(v["findings"][0]["severity"], "blocking");
    assert_eq!(v["findings"][0]["file"], "policies/governance.toml");
    // The ledger says who wrote it.
    let log = env.atelier(&["audit", "log", "--json"]).ok().stdout;
    assert!(log.contains("agent claude-code"), "{log}");
}

#[test]
fn a_new_dependency_asks_for_a_revision() {
    let env = Env::new();
    let id = env.propose(
        &[(
            "Cargo.toml",
            "[package]\nname = \"demo\"\nversion = \"0.1.0\"\n\n[dependencies]\nleftpad = \"0.1\"\n",
        )],
        "Add a dependency",
    );
    let (code, v) = review(&env, &id);
    assert_eq!((code, v["verdict"].as_str()), (1, Some("revise")), "{v:#}");
    assert_eq!(categories(&v), ["deps"]);
    assert!(
        v["findings"][0]["message"]
            .as_str()
            .expect("message")
            .contains("leftpad = \"0.1\""),
        "{v:#}"
    );
    // The plain change is approved.
    let code_change = env.propose_code();
    let run = env.atelier(&["review", &code_change]).ok();
    assert!(run.stdout.contains("panel: APPROVE"), "{}", run.stdout);
}

#[test]
fn the_panel_is_read_from_the_base_and_a_broken_definition_is_named() {
    let env = Env::new();
    // A proposal that would make the size reviewer accept nothing cannot judge itself.
    let strict = "name = \"size\"\nflavour = \"Tiny changes only.\"\nkind = \"builtin:size\"\nmax_lines = 1\n";
    let id = env.propose(
        &[
            ("reviewers/size.toml", strict),
            ("src/lib.rs", "pub fn answer() -> u32 {\n    42\n}\n"),
        ],
        "Stricter size",
    );
    let (code, v) = review(&env, &id);
    assert_eq!(
        code, 0,
        "the panel at base (init's defaults) judges, not the proposal's: {v:#}"
    );
    // A definition at base with an unknown field: exit 2 naming file and field.
    env.write(
        "reviewers/size.toml",
        "name = \"size\"\nflavour = \"f\"\nkind = \"builtin:size\"\ncolour = \"red\"\n",
    );
    env.git(&["add", "-A"]);
    env.git(&["commit", "-q", "-m", "a broken reviewer"]);
    let next = env.propose_code();
    let run = env.atelier(&["review", &next]).code(2);
    assert!(
        run.stderr.contains("reviewers/size.toml") && run.stderr.contains("colour"),
        "{run:?}"
    );
}

#[test]
fn atelier_s_own_panel_parses() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("reviewers");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).expect("reviewers/") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "toml") {
            let rel = format!(
                "reviewers/{}",
                path.file_name().expect("name").to_string_lossy()
            );
            let text = std::fs::read_to_string(&path).expect("read");
            if atelier::panel::is_disabled(&text) {
                continue;
            }
            atelier::governance::review::ReviewerDef::parse(&rel, &text)
                .unwrap_or_else(|e| panic!("{e}"));
            n += 1;
        }
    }
    assert!(n >= 6, "{n} reviewers");
    // The agent reviewer ships switched off, with the prompt `init` installs.
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let adversary = std::fs::read_to_string(dir.join("adversary.toml")).expect("adversary");
    assert!(atelier::panel::is_disabled(&adversary));
    // Switched on as its comment says, it is a valid agent reviewer.
    let on: String = adversary
        .lines()
        .filter_map(|l| l.strip_prefix("# "))
        .filter(|l| l.contains(" = "))
        .map(|l| format!("{l}\n"))
        .collect();
    let def = atelier::governance::review::ReviewerDef::parse("reviewers/adversary.toml", &on)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(def.kind, atelier::governance::review::Kind::Agent);
    assert_eq!(
        std::fs::read_to_string(root.join("reviewers/templates/adversary.md.j2"))
            .expect("template"),
        atelier::agent::reviewer::DEFAULT_TEMPLATE
    );
}

#[test]
fn a_weakened_test_and_a_token_are_blocked_through_the_cli() {
    let env = Env::new();
    env.write(
        "tests/answer.rs",
        "#[test]\nfn answers() {\n    assert_eq!(demo::answer(), 41);\n}\n",
    );
    env.git(&["add", "-A"]);
    env.git(&["commit", "-q", "-m", "a test"]);
    let weakened = env.propose(
        &[(
            "tests/answer.rs",
            "#[test]\nfn answers() {\n    // assert_eq!(demo::answer(), 41);\n}\n",
        )],
        "Quiet the test",
    );
    let (code, v) = review(&env, &weakened);
    assert_eq!((code, v["verdict"].as_str()), (1, Some("block")), "{v:#}");
    assert!(categories(&v).iter().all(|c| c == "tests-tamper"), "{v:#}");
    // A token-shaped literal (assembled here so this file carries none).
    let token = format!("gh{}_{}", "p", "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8");
    let leaked = env.propose(
        &[(
            "src/config.rs",
            &format!("pub const TOKEN: &str = \"{token}\";\n"),
        )],
        "Configure",
    );
    let (code, v) = review(&env, &leaked);
    assert_eq!((code, v["verdict"].as_str()), (1, Some("block")), "{v:#}");
    assert!(categories(&v).contains(&"secrets".to_string()), "{v:#}");
    let text = serde_json::to_string(&v).expect("json");
    assert!(
        !text.contains(&token),
        "the review repeats the secret: {text}"
    );
}

#[test]
fn init_installs_the_default_panel_and_it_runs_offline() {
    let env = Env::new();
    for name in [
        "judge-tamper",
        "tests-tamper",
        "secrets",
        "scope",
        "deps",
        "size",
    ] {
        let text = env.read(&format!("reviewers/{name}.toml"));
        assert!(
            text.contains(&format!("kind = \"builtin:{name}\"")),
            "{text}"
        );
    }
    assert!(env
        .read("reviewers/README.md")
        .contains("## Agent reviewers"));
    // The agent reviewer is there, switched off, so the default panel runs offline.
    assert!(env
        .read("reviewers/adversary.toml")
        .contains("# kind = \"agent\""));
    assert!(env
        .read("reviewers/templates/adversary.md.j2")
        .contains("{{ handoff.title }}"));
    let id = env.propose_code();
    let (code, v) = review(&env, &id);
    assert_eq!(code, 0, "{v:#}");
    assert_eq!(
        v["reviewers"],
        serde_json::json!([
            "deps",
            "judge-tamper",
            "scope",
            "secrets",
            "size",
            "tests-tamper"
        ])
    );
}
