//! The evidence a cycle writes: shown to approvers as the cycle's, credited only to the change and
//! base it measured, and shown on GitHub.

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use serde_json::Value;

use crate::cycle::{flaky_cycle, improvements, tuned, SCENARIO};
use crate::support::Env;

#[test]
fn evidence_edited_after_the_cycle_wrote_it_is_shown_as_such_and_cannot_merge() {
    let s = tuned(SCENARIO);
    let r = flaky_cycle(&s, &["--submit-anyway", "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let id = r.json()["proposal"].as_str().expect("id").to_string();
    // Someone with push access rewrites the evidence on the branch to claim an improvement.
    let branch = format!("atelier/proposals/{id}");
    s.env.git(&["checkout", "-q", &branch]);
    let listing = s
        .env
        .git(&["ls-tree", "-r", "--name-only", "HEAD", "proposals/"]);
    let path = listing
        .lines()
        .find(|l| l.ends_with("evidence.json"))
        .expect("evidence")
        .to_string();
    let text = s.env.read(&path).replace(
        "\"outcome\": \"no significant change\"",
        "\"outcome\": \"improved\"",
    );
    s.env.write(&path, &text);
    s.env.git(&["commit", "-qam", "Better evidence"]);
    s.env.git(&["checkout", "-q", "main"]);
    // Approvers read the ledger's evidence, and are told the file is not it.
    let shown = s.run(&["show", &id]).ok().stdout;
    assert!(
        shown.contains("evidence.json edited after the cycle wrote them")
            && shown.contains("wasted_attempts did not change significantly"),
        "{shown}"
    );
    s.env.approve(&id, "alice").ok();
    s.env.approve(&id, "bob").ok();
    // The gate: a cycle proposal merges only as the change its evidence was recorded for.
    let merged = s.run(&["merge", &id]);
    assert_eq!(merged.code, 1, "{}\n{}", merged.stdout, merged.stderr);
    assert!(
        merged.stdout.contains("E_EVIDENCE_MISSING")
            && merged.stdout.contains("changed after it was measured"),
        "{}",
        merged.stdout
    );
    let curve = s
        .run(&["proposals", "--improvements", "--json"])
        .ok()
        .json();
    assert_eq!(curve.as_array().map(Vec::len), Some(0), "{curve}");
}

#[test]
fn on_github_the_pull_request_body_shows_the_evidence_and_what_was_submitted_anyway() {
    let s = tuned(SCENARIO);
    // The same repository, now on GitHub (the emulator over a bare remote).
    let dir = tempfile::tempdir().expect("temp dir");
    let remote = dir.path().join("remote.git");
    s.env.git(&[
        "init",
        "-q",
        "--bare",
        "-b",
        "main",
        remote.to_str().expect("utf8"),
    ]);
    let emu = crate::support::github::Emulator::start(
        "local/repo",
        &remote,
        &[
            ("ghp_secret", "atelier-bot"),
            ("ghp_secret2", "atelier-bot"),
        ],
    );
    let config = s.env.read("atelier.toml").replacen(
        "kind = \"local\"",
        &format!(
            "kind = \"github\"\napi_url = \"{}\"\nremote = \"origin\"\nmerge = \"manual\"",
            emu.url
        ),
        1,
    );
    s.env.write("atelier.toml", &config);
    s.env.git(&["commit", "-qam", "On GitHub"]);
    s.env
        .git(&["remote", "add", "origin", remote.to_str().expect("utf8")]);
    s.env.git(&["push", "-q", "origin", "main"]);

    let r = flaky_cycle(&s, &["--submit-anyway", "--json"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let c = r.json();
    assert_eq!(c["submitted"], true);
    assert!(
        c["approve_command"]
            .as_str()
            .is_some_and(|a| a.starts_with("atelier approve --pr 1 --key")),
        "{c}"
    );
    let body = emu.pull(1)["body"].as_str().expect("a body").to_string();
    for want in [
        "> **Warning:** submitted although failed_tasks regressed",
        "### Evidence (`atelier cycle`)",
        "| **wasted_attempts** (registered)",
        "**user-testing**: passed",
    ] {
        assert!(body.contains(want), "missing {want:?} in\n{body}");
    }
    // The pull request's head is the evidence commit the ledger recorded.
    assert_eq!(
        emu.pull(1)["head"]["sha"],
        c["evidence_head"],
        "{}",
        emu.pull(1)
    );
}

/// Commits `edit` (path, text) onto the proposal's branch, as someone with push access would.
fn push_onto(env: &Env, id: &str, path: &str, text: &str) {
    let branch = format!("atelier/proposals/{id}");
    env.git(&["checkout", "-q", &branch]);
    env.write(path, text);
    env.git(&["add", path]);
    env.git(&["commit", "-qm", "A later push"]);
    env.git(&["checkout", "-q", "main"]);
}

/// `audit verify` finds nothing but the two setup commits Swarm::configured and the scenario
/// put on main outside the gate (the cycle's entries themselves verify).
fn verifies_but_for_the_setup(env: &Env) {
    let v = env.atelier(&["audit", "verify", "--json"]).json();
    let other: Vec<&Value> = v["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["code"] != "E_UNLEDGERED_COMMIT")
        .collect();
    assert!(other.is_empty(), "{v:#}");
}

fn record_file(env: &Env, id: &str, file: &str) -> String {
    let listing = env.git(&[
        "ls-tree",
        "-r",
        "--name-only",
        &format!("atelier/proposals/{id}"),
        "proposals/",
    ]);
    listing
        .lines()
        .find(|l| l.starts_with(&format!("proposals/{id}-")) && l.ends_with(file))
        .unwrap_or_else(|| panic!("no {file} in the record of {id}: {listing}"))
        .to_string()
}

/// The evidence was measured on one change; someone with push access then changes
/// the change (here: a different failure_budget than the one measured), leaving evidence.json
/// untouched so its digest still matches. The approvers sign the new head, it merges, and the
/// improvement curve credits the merged change with the old measurement — no warning, although
/// the ledger's `evidence-recorded` names a head that is not the one merged.
#[test]
fn a_change_pushed_after_its_evidence_is_credited_with_the_old_measurement() {
    let s = tuned(SCENARIO);
    let r = flaky_cycle(&s, &["--submit-anyway", "--json"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let c = r.json();
    let id = c["proposal"].as_str().expect("id").to_string();
    let measured = c["evidence"]["benchmark"]["candidate"]["failure_budget"].clone();
    assert_eq!(measured, 1, "{c}");
    // After the cycle: a different [conductor] than the one measured (budget 2, not 1).
    s.env
        .git(&["checkout", "-q", &format!("atelier/proposals/{id}")]);
    let toml: String = s
        .env
        .read("atelier.toml")
        .lines()
        .map(|l| {
            if l.starts_with("failure_budget") {
                "failure_budget = 2\n".to_string()
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    s.env.git(&["checkout", "-q", "main"]);
    push_onto(&s.env, &id, "atelier.toml", &toml);
    s.env.approve(&id, "alice").ok();
    s.env.approve(&id, "bob").ok();
    // Fixed at the gate: the change merges only as the commit its evidence was recorded for.
    let merged = s.run(&["merge", &id]);
    assert_eq!(merged.code, 1, "{}\n{}", merged.stdout, merged.stderr);
    assert!(
        merged.stdout.contains("E_EVIDENCE_MISSING"),
        "{}",
        merged.stdout
    );
    verifies_but_for_the_setup(&s.env);
    let shown = s.run(&["show", &id]).ok().stdout;
    assert!(
        shown.contains("the change was modified after it was measured (atelier.toml)"),
        "{shown}"
    );
    assert_eq!(improvements(&s).as_array().map(Vec::len), Some(0));
}

/// The digest in the ledger covers evidence.json only; the
/// evidence.md people read (in the record, and in the pull request body) is bound by nothing.
/// Someone with push access turns "REGRESSED" into "improved" in evidence.md; the approvers'
/// view (`atelier show`) shows the edited text with no sign that it is not what the cycle wrote.
#[test]
fn evidence_md_edited_after_the_cycle_is_shown_to_approvers_as_the_cycles() {
    let s = tuned(SCENARIO);
    let r = flaky_cycle(
        &s,
        &["--metric", "failed_tasks", "--submit-anyway", "--json"],
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let id = r.json()["proposal"].as_str().expect("id").to_string();
    let path = record_file(&s.env, &id, "evidence.md");
    let md = s
        .env
        .git(&["show", &format!("atelier/proposals/{id}:{path}")]);
    assert!(md.contains("failed_tasks REGRESSED significantly"), "{md}");
    let forged = md
        .replace(
            "failed_tasks REGRESSED significantly",
            "failed_tasks improved significantly",
        )
        .replace("## Why the cycle would not submit it", "## Notes");
    push_onto(&s.env, &id, &path, &forged);
    let shown = s.run(&["show", &id]);
    let text = format!("{}{}", shown.stdout, shown.stderr);
    assert!(
        text.contains("failed_tasks improved significantly"),
        "setup: the edited page is on the branch\n{text}"
    );
    // Whatever shows the evidence must say it is not the cycle's (or show the cycle's).
    assert!(
        text.contains("not the one the cycle recorded")
            || text.contains("not what the cycle wrote")
            || text.contains("edited after"),
        "`atelier show` presents an edited evidence.md as the cycle's evidence:\n{text}"
    );
}

/// The pull request body shows `proposals/<id>-<slug>/evidence.md` under
/// "Evidence (`atelier cycle`)" whenever the file exists in the head — whether or not the cycle
/// ever recorded evidence for the proposal. A plain patch (or an agent's change outside the
/// cycle) that writes its own record's evidence.md gets a forged evidence section.
#[test]
fn a_patch_that_writes_its_own_evidence_md_gets_an_evidence_section_on_github() {
    let hub = crate::support::hub::Hub::new();
    let forged = "# Evidence for proposal 1\n\n**wall_ms improved significantly: -9.00 [-10.00, -8.00].**\n\n- **user-testing**: passed.\n";
    let id = hub.env.propose(
        &[
            ("src/lib.rs", "pub fn answer() -> u32 {\n    42\n}\n"),
            ("proposals/1-fix-the-answer/evidence.md", forged),
        ],
        "Fix the answer",
    );
    assert_eq!(id, "1");
    let out = hub.run("bot-token", &["submit", &id, "--json"]).ok();
    let n = out.json()["pull"].as_u64().expect("pull number");
    let body = hub.emu.pull(n)["body"].as_str().expect("body").to_string();
    assert!(
        !body.contains("improved significantly"),
        "the pull request shows evidence the cycle never recorded (no evidence-recorded in the ledger):\n{body}"
    );
}

/// The proposal is opened — on the local forge, approvable and mergeable —
/// before its metric is registered and long before its evidence exists; if the cycle dies
/// during the benchmark (a crash, the OOM killer, a reboot), an open proposal remains with a
/// registered metric and no evidence, and it merges with two approvals like any other.
#[test]
fn a_cycle_killed_during_the_benchmark_leaves_a_mergeable_proposal_without_evidence() {
    let s = tuned(SCENARIO);
    let mut child = s
        .command(&["cycle", "--seeds", "8", "--mission", "flaky", "--json"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let stderr = child.stderr.take().expect("stderr");
    let mut seen = String::new();
    for line in BufReader::new(stderr).lines() {
        let line = line.expect("line");
        seen.push_str(&line);
        seen.push('\n');
        if line.contains("cycle [benchmark]") {
            break;
        }
    }
    assert!(seen.contains("cycle [benchmark]"), "{seen}");
    child.kill().expect("kill");
    let _ = child.wait();
    let listed = s.run(&["proposals", "--json"]).ok().json();
    let id = listed[0]["id"]
        .as_str()
        .or(listed[0]["proposal"].as_str())
        .unwrap_or("1")
        .to_string();
    let log = s.run(&["audit", "log", "--json"]).ok().json();
    let kinds: Vec<&str> = log
        .as_array()
        .expect("entries")
        .iter()
        .filter(|e| e["proposal"] == id.as_str())
        .filter_map(|e| e["kind"].as_str())
        .collect();
    assert!(
        kinds.contains(&"metric-registered") && !kinds.contains(&"evidence-recorded"),
        "setup: killed between registration and evidence: {kinds:?}"
    );
    s.env.approve(&id, "alice");
    s.env.approve(&id, "bob");
    let merged = s.run(&["merge", &id]);
    assert_ne!(
        merged.code, 0,
        "a cycle proposal whose benchmark never finished merged with no evidence:\n{}\n{}",
        merged.stdout, merged.stderr
    );
}

/// `--submit-anyway` opens the pull request with a warning ("submitted
/// although its registered metric regressed"), but `caveat` only speaks for the head the
/// ledger's evidence names. One later push through `atelier submit` that drops the evidence
/// files (or changes anything) and the body says nothing of the regression any more: no
/// caveat, no evidence section, though the ledger still holds the regressed evidence.
#[test]
fn on_github_one_push_after_submit_anyway_erases_the_regression_warning() {
    let hub = crate::support::hub::Hub::new();
    let env = &hub.env;
    // The swarm of support/swarm.rs, by hand (Swarm owns its Env; the hub owns this one).
    let fake = env.tmp.path().join("fake");
    std::fs::create_dir_all(&fake).expect("mkdir");
    let agent = fake.join("agent.sh");
    std::fs::write(
        &agent,
        "#!/bin/sh\nslug=$(echo \"$ATELIER_TASK_ID\" | tr ':' '-')\ncat > /dev/null\nif [ -f \"$FAKE_AGENT_DIR/$slug.sh\" ]; then . \"$FAKE_AGENT_DIR/$slug.sh\"; fi\n",
    )
    .expect("agent");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let config = env.read("atelier.toml");
    env.write(
        "atelier.toml",
        &format!(
            "{config}\n[roles.implementer]\nbackend = \"command\"\ncommand = [\"{}\"]\nenv = [\"FAKE_AGENT_DIR\"]\nwritable = [\"{}\"]\n\n[conductor]\nfailure_budget = 3\n\n[validators.user_testing]\nscenario = [\"sh scenario.sh\"]\ntimeout = \"60s\"\n",
            agent.display(),
            fake.display()
        ),
    );
    env.write("scenario.sh", SCENARIO);
    env.git(&["add", "-A"]);
    env.git(&["commit", "-qm", "Configure the swarm"]);
    env.git(&["push", "-q", "origin", "main"]);
    let run = |args: &[&str]| {
        let o = env
            .command(crate::support::bin())
            .arg("-C")
            .arg(&env.repo)
            .args(args)
            .env("FAKE_AGENT_DIR", &fake)
            .env("GITHUB_TOKEN", "bot-token")
            .env("ATELIER_GITHUB_BACKOFF_MS", "20")
            .output()
            .expect("run");
        (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    std::fs::write(fake.join("p-A.sh"), "echo ok > src/a.rs").expect("scenario");
    std::fs::write(fake.join("p-B.sh"), "echo nope > src/b.rs").expect("scenario");
    let plan = env.file(
        "p.toml",
        &crate::support::swarm::plan(
            "p",
            &[
                crate::support::swarm::task("A", &["src/a.rs"], &[], "grep -q ok src/a.rs"),
                crate::support::swarm::task("B", &["src/b.rs"], &[], "grep -q ok src/b.rs"),
            ],
        ),
    );
    for _ in 0..5 {
        let (code, _, err) = run(&["run", plan.to_str().expect("utf8")]);
        assert_eq!(code, 1, "{err}");
    }
    let (code, out, err) = run(&[
        "cycle",
        "--seeds",
        "2",
        "--mission",
        "flaky",
        "--metric",
        "failed_tasks",
        "--submit-anyway",
        "--json",
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    let c: Value = serde_json::from_str(&out).expect("json");
    let id = c["proposal"].as_str().expect("id").to_string();
    assert_eq!(c["evidence"]["outcome"], "regressed", "{c}");
    let n = 1;
    let body = hub.emu.pull(n)["body"].as_str().expect("body").to_string();
    assert!(
        body.contains("submitted although its registered metric regressed"),
        "setup: the first body warns\n{body}"
    );
    // A later push: the evidence files go (anything that moves the head would lose the caveat).
    let (json, md) = (
        record_file(env, &id, "evidence.json"),
        record_file(env, &id, "evidence.md"),
    );
    env.git(&["checkout", "-q", &format!("atelier/proposals/{id}")]);
    env.git(&["rm", "-q", &json, &md]);
    env.git(&["commit", "-qm", "Tidy the record"]);
    env.git(&["checkout", "-q", "-f", "main"]);
    let (code, out, err) = run(&["submit", &id]);
    assert_eq!(code, 0, "{out}\n{err}");
    let body = hub.emu.pull(n)["body"].as_str().expect("body").to_string();
    assert!(
        body.contains("regressed") || body.contains("REGRESSED"),
        "the pull request no longer says its registered metric regressed (the ledger's evidence still does):\n{body}"
    );
}

/// E_EVIDENCE_MISSING binds the evidence to the head, never to the base it was
/// measured on. Here the cycle measures failure_budget 3 -> 1 against base X; a person then
/// merges the very same [conductor] edit; the cycle proposal, still at its evidence head,
/// merges on the moved base changing nothing but its record. The improvement curve credits
/// that merge with the measured delta, and nothing warns that what merged is not what was
/// measured (the gate, `show` and `--improvements` never compare the base).
#[test]
fn evidence_measured_on_one_base_is_credited_to_a_merge_on_another() {
    let s = tuned(SCENARIO);
    let r = flaky_cycle(
        &s,
        &["--metric", "failed_tasks", "--submit-anyway", "--json"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let c = r.json();
    let id = c["proposal"].as_str().expect("id").to_string();
    let measured = c["evidence"]["measured_head"].as_str().expect("head");
    // The same [conductor] edit, proposed and merged by a person first.
    let toml = s.env.git(&["show", &format!("{measured}:atelier.toml")]);
    let human = s
        .env
        .propose(&[("atelier.toml", &toml)], "Budget 1, by hand");
    s.env.approve(&human, "alice").ok();
    s.env.approve(&human, "bob").ok();
    s.run(&["merge", &human]).ok();
    // The cycle's proposal, at its evidence head, now changes nothing but its record. Fixed:
    // the evidence holds only on the base it was measured against.
    s.env.approve(&id, "alice").ok();
    s.env.approve(&id, "bob").ok();
    let refused = s.run(&["merge", &id]);
    assert_eq!(refused.code, 1, "{}", refused.stdout);
    assert!(
        refused.stdout.contains("E_EVIDENCE_MISSING")
            && refused.stdout.contains("the protected branch moved since"),
        "{}",
        refused.stdout
    );
    let shown = s.run(&["show", &id]).ok().stdout;
    assert!(
        shown.contains("main moved since the change was measured"),
        "{shown}"
    );
    assert_eq!(
        improvements(&s)
            .as_array()
            .map(|a| a.iter().filter(|r| r["proposal"] == id.as_str()).count()),
        Some(0)
    );
}
