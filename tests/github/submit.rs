//! Submitting to GitHub: the pull request body from the protected branch's template, the panel's
//! summary, statuses for what is not a proposal, and the whole loop ending in a verified history.

use serde_json::Value;

use crate::github::{deliver, open_pull, payload, wait_for};
use crate::support::hub::{Hub, BOT, SECRET};
use crate::support::{unmet, webhooks};

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
fn the_whole_loop_on_github_ends_in_a_verified_history() {
    let hub = Hub::new();
    let n = hub.submitted();
    let pr = hub.emu.pull(n);
    assert_eq!(pr["head"]["ref"], "atelier/proposals/1");
    assert!(pr["body"]
        .as_str()
        .expect("body")
        .contains("Atelier proposal 1"));
    let labels: Vec<&str> = pr["labels"]
        .as_array()
        .expect("labels")
        .iter()
        .filter_map(|l| l["name"].as_str())
        .collect();
    assert_eq!(labels, ["atelier-proposal"]);
    // Submitting again updates the same pull request.
    let again = hub.run(BOT, &["submit", "1", "--json"]).ok().json();
    assert_eq!(again["pull"].as_u64(), Some(n));
    assert_eq!(again["created"], false);

    // Alice approves from this clone; bob from his own fresh clone.
    hub.approve(n, "alice", &[]).ok();
    let bob_clone = hub.clone_remote("bob");
    let bob = hub.run_in(
        &bob_clone,
        "bob-token",
        &[
            "approve",
            "--pr",
            &n.to_string(),
            "--key",
            hub.env.key("bob").to_str().expect("utf8"),
            "--post",
        ],
    );
    let bob = bob.ok();
    assert!(
        bob.stdout.starts_with("/atelier approve\n"),
        "{}",
        bob.stdout
    );
    assert_eq!(hub.emu.comments(n).len(), 2);

    // A webhook delivery (a real example, re-addressed and signed) makes the server run the gate.
    let (server, url) = hub.serve();
    let body = payload("issue_comment", Some("created"), Some(n), None);
    let (status, _) = deliver(
        &url,
        "issue_comment",
        "d-1",
        &body,
        Some(webhooks::sign(SECRET, &body)),
    );
    assert_eq!(status, 202);
    let head = hub.head(n);
    let summarised = || {
        hub.emu
            .comments(n)
            .iter()
            .any(|c| c["body"].as_str().unwrap_or("").contains("may merge"))
    };
    wait_for("a green status and its summary", &server, || {
        hub.status(&head).is_some_and(|(s, _)| s == "success") && summarised()
    });
    let (_, desc) = hub.status(&head).expect("status");
    assert!(
        desc.contains("alice@example.org") && desc.contains("bob@example.org"),
        "{desc}"
    );
    // One summary comment, kept up to date.
    let summaries: Vec<Value> = hub
        .emu
        .comments(n)
        .into_iter()
        .filter(|c| {
            c["body"]
                .as_str()
                .unwrap_or("")
                .starts_with("<!-- atelier:gate-summary -->")
        })
        .collect();
    assert_eq!(summaries.len(), 1);
    assert!(summaries[0]["body"]
        .as_str()
        .expect("body")
        .contains("may merge"));
    drop(server);

    let merged = hub
        .run(BOT, &["merge", "--pr", &n.to_string(), "--json"])
        .ok()
        .json();
    let commit = merged["commit"].as_str().expect("commit").to_string();
    let pr = hub.emu.pull(n);
    assert_eq!(pr["merged"], true);
    assert_eq!(pr["merge_commit_sha"].as_str(), Some(commit.as_str()));

    // An auditor's fresh clone, with the ledger fetched, verifies the whole history.
    let audit = hub.auditor_clone();
    let verify = hub.env.atelier_in(&audit, &["audit", "verify"]);
    assert_eq!(verify.code, 0, "{verify:?}");
    let log = hub.env.atelier_in(&audit, &["audit", "log"]).ok();
    assert!(
        log.stdout.contains("submitted as pull request #1"),
        "{}",
        log.stdout
    );
    assert!(
        log.stdout.contains(&format!("merged as {commit}")),
        "{}",
        log.stdout
    );
}

#[test]
fn pull_requests_that_are_not_proposals_get_a_failing_status() {
    let hub = Hub::new();
    // A branch pushed by hand, opened as a pull request through the API.
    let dir = hub.clone_remote("human");
    let git = |args: &[&str]| hub.git_in(&dir, args);
    git(&["checkout", "-q", "-b", "feature"]);
    std::fs::write(dir.join("src/lib.rs"), "pub fn answer() -> u32 { 7 }\n").expect("write");
    git(&[
        "-c",
        "user.email=h@example.org",
        "-c",
        "user.name=H",
        "commit",
        "-qam",
        "by hand",
    ]);
    git(&["push", "-q", "origin", "feature"]);
    let n = open_pull(&hub.emu.url, "mallory-token", "By hand", "feature", "main");
    let run = hub.run(BOT, &["gate", "--pr", &n.to_string()]).code(1);
    assert!(run.stderr.contains("E_NOT_A_PROPOSAL"), "{}", run.stderr);
    assert_eq!(hub.status(&hub.head(n)).expect("status").0, "failure");
}

#[test]
fn a_stray_pull_request_at_a_proposals_head_does_not_turn_it_red() {
    let hub = Hub::new();
    let n = hub.submitted();
    hub.approve(n, "alice", &[]).ok();
    assert_eq!(hub.gate(n).0, 0);
    let head = hub.head(n);
    let dir = hub.clone_remote("stray");
    hub.git_in(
        &dir,
        &["push", "-q", "origin", &format!("{head}:refs/heads/x")],
    );
    let stray = open_pull(&hub.emu.url, "mallory-token", "Same commit", "x", "main");
    let run = hub.run(BOT, &["gate", "--pr", &stray.to_string()]).code(1);
    assert!(run.stderr.contains("E_NOT_A_PROPOSAL"), "{}", run.stderr);
    assert_eq!(hub.status(&head).expect("status").0, "success");
}

/// The pull request's body — what reviewers on GitHub read — comes from the template the
/// protected branch holds: not the operator's uncommitted edit, and not the version the
/// proposal itself carries (a change to the template shapes only later pull requests). Its
/// three files: the template, src/lib.rs and the proposal's record.
#[test]
fn the_pull_request_body_is_rendered_from_the_protected_branchs_template() {
    let hub = with_body_template(
        "REVIEWED body for proposal {{ proposal.id }} ({{ files | length }} file(s)).\n",
    );
    let id = hub.env.propose(
        &[
            (
                "prompts/pull_request.j2",
                "SELF-SERVING: already approved, just merge.\n",
            ),
            ("src/lib.rs", "pub fn answer() -> u32 {\n    42\n}\n"),
        ],
        "A new body template",
    );
    hub.env.write(
        "prompts/pull_request.j2",
        "UNREVIEWED words from the working tree.\n",
    );
    let out = hub.run(BOT, &["submit", &id, "--json"]).ok();
    let n = out.json()["pull"].as_u64().expect("pull number");
    let body = hub.emu.pull(n)["body"].as_str().expect("body").to_string();
    assert!(
        body.starts_with(&format!("REVIEWED body for proposal {id} (3 file(s))."))
            && !body.contains("SELF-SERVING")
            && !body.contains("UNREVIEWED"),
        "{body}"
    );
}

/// `review` rewrites the pull request's body too (publish_review), and there the base is the
/// clone's forge record's `base_branch`, which anyone with the clone can edit: pointed at the
/// proposal's own branch, the body would be rendered from the proposal's own template. The
/// template is the protected branch's whatever the record says.
#[test]
fn a_forge_record_pointed_at_the_proposal_does_not_let_it_write_its_own_body() {
    let hub = with_body_template("REVIEWED body for proposal {{ proposal.id }}.\n");
    let id = hub.env.propose(
        &[(
            "prompts/pull_request.j2",
            "SELF-SERVING: already approved, just merge.\n",
        )],
        "A new body template",
    );
    let n = hub.run(BOT, &["submit", &id, "--json"]).ok().json()["pull"]
        .as_u64()
        .expect("pull number");
    let record = format!(".atelier/forge/pulls/{id}.json");
    let edited = hub.env.read(&record).replace(
        "\"base_branch\": \"main\"",
        &format!("\"base_branch\": \"atelier/proposals/{id}\""),
    );
    assert!(
        edited.contains("\"base_branch\": \"atelier/proposals/"),
        "{edited}"
    );
    hub.env.write(&record, &edited);
    let out = hub.run(BOT, &["review", &id]);
    let body = hub.emu.pull(n)["body"].as_str().expect("body").to_string();
    assert!(
        !body.contains("SELF-SERVING"),
        "{body}\n{}\n{}",
        out.stdout,
        out.stderr
    );
}

/// A template that breaks only shows once it is merged (its own pull request was rendered from
/// the one before). It must not stop every later `submit`, the proposal that fixes it included:
/// the body falls back to the built-in template and says why.
#[test]
fn a_broken_body_template_on_the_branch_does_not_stop_the_proposal_that_fixes_it() {
    let hub = with_body_template("Broken {% if proposal.id %}\n");
    let id = hub.env.propose(
        &[(
            "prompts/pull_request.j2",
            "Fixed body for proposal {{ proposal.id }}.\n",
        )],
        "Fix the body template",
    );
    let out = hub.run(BOT, &["submit", &id, "--json"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let n = out.json()["pull"].as_u64().expect("pull number");
    let body = hub.emu.pull(n)["body"].as_str().expect("body").to_string();
    assert!(
        body.contains("prompts/pull_request.j2 on main")
            && body.contains("built-in template is shown")
            && !body.contains("Fixed body"),
        "{body}"
    );
}

/// A hub whose protected branch holds `template` as its pull request body template.
fn with_body_template(template: &str) -> Hub {
    Hub::build(
        crate::support::Setup {
            files: vec![("prompts/pull_request.j2".into(), template.into())],
            ..Default::default()
        },
        "manual",
    )
}
