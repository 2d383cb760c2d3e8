//! The gate enforces the review panel: a change the panel blocks never merges unless the
//! constitution quorum approves that exact change; the panel is read from the base however the
//! proposal or the working tree is edited; a verdict the agent reviewers must give is required
//! and bound to the change; `audit verify` re-runs the built-ins on every merge. Each test tries
//! to get around it through the CLI, as an attacker would.

use atelier::audit::ledger;
use git2::Repository;
use serde_json::Value;

use crate::github::Hub;
use crate::support::{unmet, Env, Setup};

/// A repository adopted with a test in it.
fn with_test() -> Env {
    Env::with(Setup {
        files: vec![(
            "tests/answer.rs".into(),
            "#[test]\nfn answers() {\n    assert_eq!(demo::answer(), 41);\n}\n".into(),
        )],
        ..Setup::default()
    })
}

/// An agent's proposal that comments the test's assertion out.
fn weakened(env: &Env) -> String {
    let patch = env.patch(&[(
        "tests/answer.rs",
        "#[test]\nfn answers() {\n    // assert_eq!(demo::answer(), 41);\n}\n",
    )]);
    env.atelier(&[
        "propose",
        "--patch",
        patch.to_str().expect("utf8"),
        "--title",
        "Quiet the test",
        "--agent",
        "claude-code",
    ])
    .ok()
    .stdout
    .trim()
    .to_string()
}

fn requirement<'a>(v: &'a Value, code: &str) -> &'a Value {
    v["requirements"]
        .as_array()
        .expect("requirements")
        .iter()
        .find(|r| r["code"] == code)
        .unwrap_or_else(|| panic!("no {code} requirement: {v:#}"))
}

#[test]
fn a_blocked_change_merges_only_when_the_constitution_quorum_overrules_the_panel() {
    let env = with_test();
    let id = weakened(&env);
    let (code, v) = env.gate(&id);
    assert_eq!(code, 1);
    assert!(unmet(&v).contains(&"E_REVIEW_BLOCKED".to_string()), "{v:#}");
    let found = requirement(&v, "E_REVIEW_BLOCKED")["found"]
        .as_str()
        .expect("found");
    assert!(
        found.contains("tests-tamper") && found.contains("tests/answer.rs"),
        "{found}"
    );
    assert_eq!(v["review"]["verdict"], "block", "{v:#}");
    // The panel's verdict is recorded, bound to the change.
    let review = env.atelier(&["review", &id, "--json"]).code(1).json();
    assert_eq!(review["verdict"], "block");
    // The quorum for the path is met, but the panel still refuses: approving is not enough.
    env.approve(&id, "alice").ok();
    let (code, v) = env.gate(&id);
    assert_eq!(
        (code, unmet(&v)),
        (1, vec!["E_REVIEW_BLOCKED".to_string()]),
        "{v:#}"
    );
    let run = env.atelier(&["merge", &id]).code(1);
    assert!(run.stdout.contains("E_REVIEW_BLOCKED"), "{run:?}");
    // The constitution quorum (alice and bob) overrules the panel.
    env.approve(&id, "bob").ok();
    let (code, v) = env.gate(&id);
    assert_eq!(code, 0, "{v:#}");
    assert_eq!(
        v["review"]["overruled_by"],
        serde_json::json!(["alice@example.org", "bob@example.org"])
    );
    let human = env.atelier(&["gate", &id]).ok().stdout;
    assert!(
        human.contains("review panel: block") && human.contains("overruled by"),
        "{human}"
    );
    env.atelier(&["merge", &id]).ok();
    // The overrule never changes what the panel said; audit re-runs the built-ins at the
    // merge's base and accepts the overrule.
    let log = env.atelier(&["audit", "log", "--json"]).ok().json();
    let verdicts: Vec<&str> = log
        .as_array()
        .expect("entries")
        .iter()
        .filter(|e| e["kind"] == "review-recorded")
        .map(|e| e["verdict"].as_str().expect("verdict"))
        .collect();
    assert_eq!(verdicts, ["block"]);
    env.atelier(&["audit", "verify"]).ok();
}

#[test]
fn editing_the_panel_in_the_proposal_or_the_working_tree_does_not_unblock_it() {
    let env = with_test();
    // A person's proposal that both weakens the test and makes tests-tamper non-blocking.
    let id = env.propose(
        &[
            (
                "tests/answer.rs",
                "#[test]\n#[ignore]\nfn answers() {\n    assert_eq!(demo::answer(), 41);\n}\n",
            ),
            (
                "reviewers/tests-tamper.toml",
                "name = \"tests-tamper\"\nflavour = \"Relaxed.\"\nkind = \"builtin:tests-tamper\"\nblocking = false\n",
            ),
        ],
        "Skip a slow test",
    );
    let (code, v) = env.gate(&id);
    assert_eq!(code, 1);
    assert!(unmet(&v).contains(&"E_REVIEW_BLOCKED".to_string()), "{v:#}");
    // The same edit in the working tree, and a panel folder emptied there: still the base's.
    env.write(
        "reviewers/tests-tamper.toml",
        "name = \"tests-tamper\"\nflavour = \"Relaxed.\"\nkind = \"builtin:tests-tamper\"\nblocking = false\n",
    );
    std::fs::remove_file(env.repo.join("reviewers/secrets.toml")).expect("rm");
    env.approve(&id, "alice").ok();
    let (code, v) = env.gate(&id);
    assert_eq!(code, 1);
    assert!(unmet(&v).contains(&"E_REVIEW_BLOCKED".to_string()), "{v:#}");
    env.atelier(&["merge", &id]).code(1);
}

#[test]
fn a_broken_reviewer_definition_at_base_halts_merges() {
    let env = Env::new();
    // Committed by hand to main (as a bad merge would leave it): the gate fails closed.
    env.write(
        "reviewers/size.toml",
        "name = \"size\"\nflavour = \"f\"\nkind = \"builtin:size\"\nmax_lines = \"many\"\n",
    );
    env.git(&["add", "-A"]);
    env.git(&["commit", "-q", "-m", "a broken reviewer"]);
    let id = env.propose_code();
    env.approve(&id, "alice").ok();
    let (code, v) = env.gate(&id);
    assert_eq!(code, 1);
    assert_eq!(unmet(&v), ["E_REVIEW_INVALID"], "{v:#}");
    let found = requirement(&v, "E_REVIEW_INVALID")["found"]
        .as_str()
        .expect("found");
    assert!(
        found.contains("reviewers/size.toml") && found.contains("max_lines"),
        "{found}"
    );
    env.atelier(&["merge", &id]).code(1);
}

/// An agent reviewer `adversary` defined at base (in the adoption commit), run by the role
/// `critic` that `role` defines (TOML lines after `[roles.critic]`), with `governance` lines
/// added to the policy's `[review]`.
pub(crate) fn with_agent_reviewer(role: &str, governance: &str) -> Env {
    with_agent_reviewer_and(role, governance, "")
}

/// [`with_agent_reviewer`], with `config` (more atelier.toml tables) in the adoption commit.
fn with_agent_reviewer_and(role: &str, governance: &str, config: &str) -> Env {
    let mut gov = atelier::governance::policy::DEFAULT_GOVERNANCE_TOML.to_string();
    for line in governance.lines() {
        // The setting replaces the default policy's line for the same key.
        let key = line.split('=').next().expect("key").trim();
        let default = gov
            .lines()
            .find(|l| l.starts_with(&format!("{key} = ")))
            .expect("a default line")
            .to_string();
        gov = gov.replace(&format!("{default}\n"), &format!("{line}\n"));
    }
    Env::with(Setup {
        governance: gov,
        config_replace: vec![(
            "# Swarm roles".into(),
            format!("[roles.critic]\n{role}\n\n{config}\n\n# Swarm roles"),
        )],
        files: vec![
            (
                "reviewers/adversary.toml".into(),
                "name = \"adversary\"\nflavour = \"Assume the author is gaming the gate.\"\nkind = \"agent\"\nrole = \"critic\"\ntemplate = \"adversary.md.j2\"\n".into(),
            ),
            (
                "reviewers/templates/adversary.md.j2".into(),
                "Review {{ handoff.title }} as {{ reviewer.name }}.\n{{ handoff.diff }}\n{{ answer_schema }}\n".into(),
            ),
        ],
        ..Setup::default()
    })
}

/// The role lines for a scripted reviewer, in an environment made only to know its path.
pub(crate) fn script_role(name: &str, body: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("temp");
    let prog = dir.path().join(name);
    std::fs::write(&prog, format!("#!/bin/sh\n{body}")).expect("write");
    std::fs::set_permissions(&prog, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let role = format!("backend = \"command\"\ncommand = [\"{}\"]", prog.display());
    (dir, role)
}

fn finding_categories(v: &Value) -> Vec<String> {
    v["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| f["category"].as_str().unwrap_or("?").to_string())
        .collect()
}

#[test]
fn agent_reviewers_need_a_recorded_verdict_bound_to_the_change() {
    let (_dir, role) = script_role(
        "approve.sh",
        "cat >/dev/null\necho 'Looks fine to me.'\necho '{\"verdict\": \"approve\", \"findings\": []}'\n",
    );
    let env = with_agent_reviewer(&role, "");
    let id = env.propose_code();
    env.approve(&id, "alice").ok();
    let (code, v) = env.gate(&id);
    assert_eq!((code, unmet(&v)), (1, vec!["E_REVIEW_MISSING".to_string()]));
    env.atelier(&["merge", &id]).code(1);
    let review = env.atelier(&["review", &id, "--json"]).ok();
    let rv = review.json();
    assert_eq!(rv["verdict"], "approve", "{rv:#}");
    assert_eq!(
        rv["reviewers"],
        serde_json::json!([
            "adversary",
            "deps",
            "judge-tamper",
            "scope",
            "secrets",
            "size",
            "tests-tamper"
        ])
    );
    let (_, v) = env.gate(&id);
    assert!(
        !unmet(&v).contains(&"E_REVIEW_MISSING".to_string()),
        "{v:#}"
    );
    assert_eq!(v["review"]["recorded"], "current");
    // The author pushes another head: the verdict no longer describes the change.
    let repo = Repository::open(&env.repo).expect("open");
    let head = repo
        .find_reference("refs/heads/atelier/proposals/1")
        .expect("branch")
        .peel_to_commit()
        .expect("commit");
    let mut index = git2::Index::new().expect("index");
    index.read_tree(&head.tree().expect("tree")).expect("read");
    let blob = repo
        .blob(b"pub fn answer() -> u32 {\n    43\n}\n")
        .expect("blob");
    index
        .add(&git2::IndexEntry {
            ctime: git2::IndexTime::new(0, 0),
            mtime: git2::IndexTime::new(0, 0),
            dev: 0,
            ino: 0,
            mode: 0o100644,
            uid: 0,
            gid: 0,
            file_size: 0,
            id: blob,
            flags: 0,
            flags_extended: 0,
            path: b"src/lib.rs".to_vec(),
        })
        .expect("add");
    let tree = repo
        .find_tree(index.write_tree_to(&repo).expect("tree"))
        .expect("tree");
    let sig = git2::Signature::now("p", "proposer@example.org").expect("sig");
    let pushed = repo
        .commit(None, &sig, &sig, "another head", &tree, &[&head])
        .expect("commit");
    repo.reference("refs/heads/atelier/proposals/1", pushed, true, "push")
        .expect("ref");
    let (code, v) = env.gate(&id);
    assert_eq!(code, 1);
    assert!(unmet(&v).contains(&"E_REVIEW_STALE".to_string()), "{v:#}");
    let stale = requirement(&v, "E_REVIEW_STALE");
    assert!(
        stale["expected"]
            .as_str()
            .expect("expected")
            .contains(&pushed.to_string()),
        "{stale:#}"
    );
}

/// The gate's holder lands proposal `id` by hand and records the merge with the gate key,
/// carrying alice's approval; returns what `audit verify --json` says.
fn landed_by_the_gate_holder(env: &Env, id: &str) -> Value {
    env.approve(id, "alice").ok();
    let log = env.atelier(&["audit", "log", "--json"]).ok().json();
    let token = log
        .as_array()
        .expect("entries")
        .iter()
        .find(|e| e["kind"] == "token-recorded" && e["proposal"] == id)
        .and_then(|e| e["token"].as_str())
        .expect("a recorded token")
        .to_string();
    let repo = Repository::open(&env.repo).expect("open");
    let base = repo.refname_to_id("refs/heads/main").expect("main");
    let head = repo
        .refname_to_id(&format!("refs/heads/atelier/proposals/{id}"))
        .expect("head");
    let tree = atelier::git::merge_tree(&repo, base, head)
        .expect("merge")
        .expect("clean");
    let sig = git2::Signature::now("gate", "gate@example.org").expect("sig");
    let commit = repo
        .commit(
            None,
            &sig,
            &sig,
            &format!("Merge proposal {id}\n\nAtelier-Proposal: {id}\n\n{token}"),
            &repo.find_tree(tree).expect("tree"),
            &[
                &repo.find_commit(base).expect("c"),
                &repo.find_commit(head).expect("c"),
            ],
        )
        .expect("commit");
    repo.reference("refs/heads/main", commit, true, "force")
        .expect("ref");
    let key = atelier::workflow::read_signing_key(&env.gate_key()).expect("key");
    let event = ledger::Event::Merged(ledger::MergeRecord {
        proposal: id.to_string(),
        pull: id.parse().expect("n"),
        commit: commit.to_string(),
        base: base.to_string(),
        head: head.to_string(),
        tree: tree.to_string(),
    });
    ledger::append(&repo, "local/repo", vec![event], 1_795_946_400, &key).expect("append");
    env.atelier(&["audit", "verify", "--json"]).code(1).json()
}

#[test]
fn a_gate_operator_merging_a_blocked_change_is_caught_by_audit() {
    // Alice's approval is enough for the path, not for an overrule.
    let env = with_test();
    let id = weakened(&env);
    let v = landed_by_the_gate_holder(&env, &id);
    let findings = v["findings"].as_array().expect("findings");
    assert_eq!(findings.len(), 1, "{v:#}");
    assert_eq!(findings[0]["code"], "E_MERGE_NOT_APPROVED");
    let detail = findings[0]["detail"].as_str().expect("detail");
    assert!(
        detail.contains("E_REVIEW_BLOCKED") && detail.contains("tests-tamper"),
        "{detail}"
    );
}

#[test]
fn a_gate_operator_merging_without_the_agent_reviewers_verdict_is_caught_by_audit() {
    let (_dir, role) = script_role(
        "approve.sh",
        "cat >/dev/null\necho '{\"verdict\": \"approve\", \"findings\": []}'\n",
    );
    let env = with_agent_reviewer(&role, "");
    let id = env.propose_code();
    let v = landed_by_the_gate_holder(&env, &id);
    let findings = v["findings"].as_array().expect("findings");
    assert_eq!(findings.len(), 1, "{v:#}");
    let detail = findings[0]["detail"].as_str().expect("detail");
    assert!(detail.contains("E_REVIEW_MISSING"), "{detail}");
}

#[test]
fn on_github_the_summary_and_the_pull_request_body_show_the_panel() {
    let hub = Hub::new();
    let token = format!("gh{}_{}", "p", "Zq8xR2mK7vT4nB9wL3pY6cJ1hF5dS0aGe2Qw");
    let id = hub.env.propose(
        &[(
            "src/lib.rs",
            &format!("pub const TOKEN: &str = \"{token}\";\n"),
        )],
        "Add the deploy token",
    );
    let n = hub.run("bot-token", &["submit", &id, "--json"]).ok().json()["pull"]
        .as_u64()
        .expect("pull");
    let body = hub.emu.pull(n)["body"].as_str().expect("body").to_string();
    assert!(body.contains("No panel verdict recorded"), "{body}");
    hub.run("bot-token", &["review", "--pr", &n.to_string()])
        .code(1);
    let body = hub.emu.pull(n)["body"].as_str().expect("body").to_string();
    assert!(
        body.contains("Review panel: block") && body.contains("secrets"),
        "{body}"
    );
    let summary = hub
        .emu
        .comments(n)
        .iter()
        .filter_map(|c| c["body"].as_str().map(str::to_string))
        .find(|b| b.contains("atelier:gate-summary"))
        .expect("a summary comment");
    assert!(
        summary.contains("Review panel: block") && summary.contains("E_REVIEW_BLOCKED"),
        "{summary}"
    );
    // Neither repeats the secret.
    assert!(!body.contains(&token) && !summary.contains(&token));
    let (code, v) = hub.gate(n);
    assert_eq!(code, 1);
    assert!(unmet(&v).contains(&"E_REVIEW_BLOCKED".to_string()), "{v:#}");
}

#[test]
fn an_agent_reviewer_that_blocks_refuses_the_merge() {
    let (_dir, role) = script_role(
        "block.sh",
        "cat >/dev/null\ncat <<'EOF'\nThinking...\n```json\n{\"verdict\": \"block\", \"findings\": [{\"severity\": \"blocking\", \"category\": \"gaming\", \"file\": \"src/lib.rs\", \"line\": 2, \"message\": \"the answer is hard-coded to pass the check\", \"hint\": \"compute it\"}]}\n```\nEOF\n",
    );
    let env = with_agent_reviewer(&role, "");
    let id = env.propose_code();
    env.approve(&id, "alice").ok();
    let rv = env.atelier(&["review", &id, "--json"]).code(1).json();
    assert_eq!(rv["verdict"], "block", "{rv:#}");
    let f = &rv["findings"][0];
    assert_eq!(
        (f["reviewer"].as_str(), f["category"].as_str()),
        (Some("adversary"), Some("gaming")),
        "{rv:#}"
    );
    let (code, v) = env.gate(&id);
    assert_eq!((code, unmet(&v)), (1, vec!["E_REVIEW_BLOCKED".to_string()]));
    let found = requirement(&v, "E_REVIEW_BLOCKED")["found"]
        .as_str()
        .expect("found");
    assert!(found.contains("hard-coded"), "{found}");
    env.atelier(&["merge", &id]).code(1);
    // The constitution quorum overrules it.
    env.approve(&id, "bob").ok();
    env.atelier(&["merge", &id]).ok();
    env.atelier(&["audit", "verify"]).ok();
}

#[test]
fn garbage_is_asked_for_again_then_counts_as_a_failed_reviewer_never_an_approval() {
    let (dir, role) = script_role(
        "garbage.sh",
        "cat >/dev/null\necho asked >> \"$(dirname \"$0\")/asked\"\necho 'LGTM, ship it!'\n",
    );
    // The reviewer counts its askings next to itself: a place its role lists as writable.
    let role = format!("{role}\nwritable = [\"{}\"]", dir.path().display());
    let env = with_agent_reviewer(&role, "");
    let id = env.propose_code();
    let run = env.atelier(&["review", &id, "--json"]).code(1);
    let rv = run.json();
    assert_eq!(rv["verdict"], "revise", "{rv:#}");
    assert_eq!(finding_categories(&rv), ["reviewer-failed"], "{rv:#}");
    let asked = std::fs::read_to_string(dir.path().join("asked")).expect("asked");
    assert_eq!(
        asked.lines().count(),
        2,
        "asked once more after a malformed answer"
    );
    assert!(run.stderr.contains("adversary"), "{run:?}");
    // Stricter policy: `revise` refuses too.
    let (_dir2, role) = script_role("garbage2.sh", "cat >/dev/null\necho '{\"verdict\": 3}'\n");
    let env = with_agent_reviewer(&role, "block_on = \"revise\"");
    let id = env.propose_code();
    env.approve(&id, "alice").ok();
    env.atelier(&["review", &id]).code(1);
    let (code, v) = env.gate(&id);
    assert_eq!((code, unmet(&v)), (1, vec!["E_REVIEW_BLOCKED".to_string()]));
}

#[test]
fn a_reviewer_that_hangs_is_stopped_and_fails() {
    let (_dir, role) = script_role("hang.sh", "cat >/dev/null\nsleep 30\n");
    let env = with_agent_reviewer_and(&role, "", "[review]\ntimeout = \"1s\"");
    let id = env.propose_code();
    let started = std::time::Instant::now();
    let rv = env.atelier(&["review", &id, "--json"]).code(1).json();
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "{:?} {rv:#}",
        started.elapsed()
    );
    assert_eq!(finding_categories(&rv), ["reviewer-failed"], "{rv:#}");
    assert!(
        rv["findings"][0]["message"]
            .as_str()
            .expect("message")
            .contains("timed out"),
        "{rv:#}"
    );
}

#[test]
fn an_http_reviewer_answers_through_an_openai_compatible_endpoint() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().expect("accept");
        let mut req = Vec::new();
        let mut buf = [0u8; 65536];
        // Read the headers and the body (Content-Length).
        loop {
            let n = s.read(&mut buf).expect("read");
            req.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&req);
            if let Some(end) = text.find("\r\n\r\n") {
                let len = text[..end]
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length:")
                            .map(|v| v.trim().parse::<usize>().expect("length"))
                    })
                    .unwrap_or(0);
                if req.len() >= end + 4 + len {
                    break;
                }
            }
        }
        let answer = serde_json::json!({"verdict": "block", "findings": [{"severity": "blocking", "category": "design", "message": "the change hides a side channel", "hint": "remove it"}]});
        let body = serde_json::json!({"choices": [{"message": {"role": "assistant", "content": answer.to_string()}}]}).to_string();
        write!(
            s,
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .expect("write");
        String::from_utf8_lossy(&req).into_owned()
    });
    let env = with_agent_reviewer(
        &format!(
            "backend = \"http\"\nbase_url = \"http://127.0.0.1:{port}/v1\"\nmodel = \"critic-1\""
        ),
        "",
    );
    let id = env.propose_code();
    let rv = env.atelier(&["review", &id, "--json"]).code(1).json();
    assert_eq!(rv["verdict"], "block", "{rv:#}");
    assert_eq!(rv["findings"][0]["reviewer"], "adversary");
    let request = server.join().expect("server");
    assert!(
        request.starts_with("POST /v1/chat/completions"),
        "{request}"
    );
    assert!(
        request.contains("critic-1") && request.contains("Fix the answer"),
        "{request}"
    );
    let (code, v) = env.gate(&id);
    assert_eq!(code, 1);
    assert!(unmet(&v).contains(&"E_REVIEW_BLOCKED".to_string()), "{v:#}");
}

#[test]
fn distinct_family_blocks_a_reviewer_of_the_proposers_family() {
    let (_dir, role) = script_role(
        "approve.sh",
        "cat >/dev/null\necho '{\"verdict\": \"approve\", \"findings\": []}'\n",
    );
    // The writer's role and the reviewer's share provider and family.
    let env = with_agent_reviewer_and(
        &format!("{role}\nprovider = \"anthropic\"\nfamily = \"claude\""),
        "distinct_family = true",
        "[roles.writer]\nbackend = \"claude\"\nprovider = \"anthropic\"\nfamily = \"claude\"",
    );
    let patch = env.patch(&[("src/lib.rs", "pub fn answer() -> u32 {\n    42\n}\n")]);
    let id = env
        .atelier(&[
            "propose",
            "--patch",
            patch.to_str().expect("utf8"),
            "--title",
            "Fix",
            "--agent",
            "writer",
        ])
        .ok()
        .stdout
        .trim()
        .to_string();
    let rv = env.atelier(&["review", &id, "--json"]).code(1).json();
    assert_eq!(rv["verdict"], "block", "{rv:#}");
    assert_eq!(finding_categories(&rv), ["distinct-family"], "{rv:#}");
    let message = rv["findings"][0]["message"].as_str().expect("message");
    assert!(
        message.contains("the proposer's own model (anthropic/claude)"),
        "{message}"
    );
    // A person's change is not held to it: the reviewer runs and approves.
    let person = env.propose(&[("README.md", "# demo\n\nmore\n")], "Docs");
    env.atelier(&["review", &person]).ok();
}

#[test]
fn distinct_family_runs_a_reviewer_of_another_family_and_fails_closed_on_an_unknown_writer() {
    let (_dir, role) = script_role(
        "approve.sh",
        "cat >/dev/null\necho '{\"verdict\": \"approve\", \"findings\": []}'\n",
    );
    let env = with_agent_reviewer_and(
        &format!("{role}\nprovider = \"openai\"\nfamily = \"gpt\""),
        "distinct_family = true",
        "[roles.writer]\nbackend = \"claude\"\nprovider = \"anthropic\"\nfamily = \"claude\"",
    );
    let propose = |agent: &str, text: &str| {
        let patch = env.patch(&[("src/lib.rs", text)]);
        env.atelier(&[
            "propose",
            "--patch",
            patch.to_str().expect("utf8"),
            "--title",
            "Fix",
            "--agent",
            agent,
        ])
        .ok()
        .stdout
        .trim()
        .to_string()
    };
    let id = propose("writer", "pub fn answer() -> u32 {\n    42\n}\n");
    let rv = env.atelier(&["review", &id, "--json"]).ok().json();
    assert_eq!(rv["verdict"], "approve", "{rv:#}");
    // An agent no role describes: its family is unknown, so the rule fails closed.
    let id = propose("mystery-bot", "pub fn answer() -> u32 {\n    43\n}\n");
    let rv = env.atelier(&["review", &id, "--json"]).code(1).json();
    assert_eq!(finding_categories(&rv), ["distinct-family"], "{rv:#}");
}

#[test]
fn a_symlink_where_the_panel_folder_should_be_halts_merges() {
    // Committed by hand to main: `reviewers` is a symlink, not the folder. The gate refuses
    // rather than fall back to the default panel.
    let env = Env::new();
    std::fs::remove_dir_all(env.repo.join("reviewers")).expect("rm");
    std::os::unix::fs::symlink("docs", env.repo.join("reviewers")).expect("symlink");
    env.git(&["add", "-A"]);
    env.git(&["commit", "-q", "-m", "panel elsewhere"]);
    let id = env.propose_code();
    env.approve(&id, "alice").ok();
    let (code, v) = env.gate(&id);
    assert_eq!((code, unmet(&v)), (1, vec!["E_REVIEW_INVALID".to_string()]));
    env.atelier(&["review", &id]).code(2);
}

/// An agent reviewer's template committed as a symbolic link is not a template: git holds the
/// link's target path, which would have been the whole prompt (and a reviewer that approves
/// whatever it reads would have approved). The reviewer fails, naming the link, and blocks as
/// it was declared.
#[test]
fn an_agent_reviewers_template_committed_as_a_link_fails_the_reviewer() {
    let (_dir, role) = script_role(
        "approve.sh",
        "cat >/dev/null\necho '{\"verdict\": \"approve\", \"findings\": []}'\n",
    );
    let env = with_agent_reviewer(&role, "");
    let templates = env.repo.join("reviewers/templates");
    std::fs::rename(
        templates.join("adversary.md.j2"),
        templates.join("ours.md.j2"),
    )
    .expect("move");
    std::os::unix::fs::symlink("ours.md.j2", templates.join("adversary.md.j2")).expect("link");
    env.git(&["add", "-A"]);
    env.git(&["commit", "-q", "-m", "the reviewer's template, linked"]);
    let id = env.propose_code();
    let out = env.atelier(&["review", &id, "--json"]);
    let text = format!("{}{}", out.stdout, out.stderr);
    assert_ne!(out.code, 0, "{text}");
    assert!(
        text.contains("reviewers/templates/adversary.md.j2 on the proposal's base")
            && text.contains("is a symbolic link (to `ours.md.j2`)"),
        "{text}"
    );
}
