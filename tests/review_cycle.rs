//! An adversarial review of `atelier cycle` (d5443b7). Each test shows, through the CLI, a way
//! around one of the cycle's promises; each fails now and passes once that hole is closed.

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use serde_json::Value;

use crate::cycle::flaky_cycle;

use crate::proposers::add_role;
use crate::support::Env;
use crate::swarm::Swarm;

/// The swarm and scenario of tests/cycle.rs.
pub(crate) use crate::cycle::{tuned, SCENARIO};

pub(crate) fn improvements(s: &Swarm) -> Value {
    s.run(&["proposals", "--improvements", "--json"])
        .ok()
        .json()
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

/// Promise 2. The evidence was measured on one change; someone with push access then changes
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

/// Promise 2 (what people read). The digest in the ledger covers evidence.json only; the
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

/// Promise 2 (on GitHub). The pull request body shows `proposals/<id>-<slug>/evidence.md` under
/// "Evidence (`atelier cycle`)" whenever the file exists in the head — whether or not the cycle
/// ever recorded evidence for the proposal. A plain patch (or an agent's change outside the
/// cycle) that writes its own record's evidence.md gets a forged evidence section.
#[test]
fn a_patch_that_writes_its_own_evidence_md_gets_an_evidence_section_on_github() {
    let hub = crate::github::Hub::new();
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

/// Promise 6 (and the user-testing validator's, in future cycles). `[validators.user_testing]`
/// judges every cycle's change, but judge-tamper's judging sections of atelier.toml are
/// gauntlet, forge, gate, review and governance only: an agent's change that empties the
/// scenario (`true`) is not judge tampering, and the panel approves it.
#[test]
fn an_agent_neutering_the_user_testing_scenario_is_not_judge_tamper() {
    let env = Env::new();
    let config = env.read("atelier.toml")
        + "\n[validators.user_testing]\nscenario = [\"sh scenario.sh\"]\ntimeout = \"60s\"\n";
    env.write("atelier.toml", &config);
    env.git(&["commit", "-qam", "A user-testing scenario"]);
    let weakened = config.replace("scenario = [\"sh scenario.sh\"]", "scenario = [\"true\"]");
    let patch = env.patch(&[("atelier.toml", &weakened)]);
    let id = env
        .atelier(&[
            "propose",
            "--patch",
            patch.to_str().expect("utf8"),
            "--title",
            "Simplify validation",
            "--agent",
            "claude-code",
        ])
        .ok()
        .stdout
        .trim()
        .to_string();
    let r = env.atelier(&["review", &id, "--json"]);
    let v = r.json();
    assert_eq!(
        v["verdict"], "block",
        "an agent replaced the user-testing scenario with `true` and the panel let it through: {v:#}"
    );
}

/// Promise 6, in Atelier's own panel (the one `init` installs): the cycle's judging code — the
/// outcome and objections (src/swarm/evidence.rs), the user-testing validator
/// (src/swarm/usertest.rs), the evidence record and the improvement curve
/// (src/workflow/cycle.rs), the cycle itself (src/cli/cycle.rs) — are not judge paths, while
/// missions/** and src/swarm/bench.rs are. An agent's change making `objections()` return
/// nothing is reviewed like any other code.
#[test]
fn an_agent_changing_the_cycles_own_judging_code_is_not_judge_tamper() {
    // Atelier's own panel (reviewers/judge-tamper.toml of this repository).
    let env = Env::new();
    env.write(
        "reviewers/judge-tamper.toml",
        include_str!("../reviewers/judge-tamper.toml"),
    );
    env.git(&["commit", "-qam", "Atelier's own judge-tamper reviewer"]);
    for path in [
        "src/swarm/evidence.rs",
        "src/swarm/usertest.rs",
        "src/workflow/cycle.rs",
        "src/cli/cycle.rs",
    ] {
        let patch = env.patch(&[(path, "// objections: none\n")]);
        let id = env
            .atelier(&[
                "propose",
                "--patch",
                patch.to_str().expect("utf8"),
                "--title",
                &format!("Tidy {path}"),
                "--agent",
                "claude-code",
            ])
            .ok()
            .stdout
            .trim()
            .to_string();
        let v = env.atelier(&["review", &id, "--json"]).json();
        assert_eq!(
            v["verdict"], "block",
            "an agent's change to {path} (what judges a cycle's change) passes the panel: {v:#}"
        );
    }
}

/// Promise 5. The scenario's *command* comes from the protected branch, but the command runs
/// in the proposal's tree, so the files it runs (`sh scenario.sh`, the pattern tests/cycle.rs
/// and the docs use) are the proposal's. An agent whose change breaks what the scenario checks
/// also rewrites scenario.sh to `exit 0`: the user-testing validator reports "passed", the
/// panel sees nothing to block, and the cycle submits it.
#[test]
fn the_agent_rewrites_the_scenario_the_user_testing_validator_runs() {
    let s = Swarm::configured(
        "failure_budget = 3",
        "\n[validators.user_testing]\nscenario = [\"sh scenario.sh\"]\ntimeout = \"60s\"\n",
    );
    // What users rely on: answer() exists.
    s.env.write(
        "scenario.sh",
        "set -e\ngrep -q 'pub fn answer' src/lib.rs\n",
    );
    s.env.git(&["add", "scenario.sh"]);
    s.env.git(&["commit", "-qm", "The user-testing scenario"]);
    let plan = crate::swarm::plan(
        "simplify",
        &[crate::swarm::task(
            "A",
            &["src/lib.rs", "scenario.sh"],
            &[],
            "grep -q simplified src/lib.rs",
        )],
    );
    add_role(
        &s,
        "proposer",
        "#!/bin/sh\ncat > /dev/null\ncat \"$FAKE_AGENT_DIR/proposer-reply.txt\"\n",
    );
    std::fs::write(s.fake.join("proposer-reply.txt"), &plan).expect("reply");
    s.scenario(
        "simplify:A",
        "echo '// simplified: answer() removed' > src/lib.rs\nprintf 'exit 0\\n' > scenario.sh",
    );
    let r = s.run(&[
        "cycle",
        "--from",
        "agent",
        "--goal",
        "Simplify the library",
        "--json",
    ]);
    let c: Value = serde_json::from_str(&r.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}\n{}", r.stdout, r.stderr));
    assert!(
        c["proposal"].is_string(),
        "setup: the agent proposed\n{}",
        r.stderr
    );
    let user = c["evidence"]["validators"]
        .as_array()
        .and_then(|v| v.iter().find(|v| v["name"] == "user-testing"))
        .cloned()
        .unwrap_or(Value::Null);
    assert!(
        c["submitted"] == false,
        "the change removed what the merged scenario checks and rewrote the scenario; user-testing: {user}; submitted: {}\n{}",
        c["submitted"],
        r.stderr
    );
}

/// Promise 4 (and 3). The proposal is opened — on the local forge, approvable and mergeable —
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

/// Promise 1. A registration is once per proposal, not once per change: the same change can be
/// put through the cycle again under a new proposal with another `--metric`, and the one whose
/// metric came out best merged. The improvement curve shows it as a clean pre-registered
/// result, with nothing about the other registrations of the identical change.
#[test]
fn the_metric_can_be_shopped_by_running_the_same_change_through_the_cycle_again() {
    let s = tuned(SCENARIO);
    let first = flaky_cycle(
        &s,
        &["--metric", "failed_tasks", "--submit-anyway", "--json"],
    );
    assert_eq!(first.code, 0, "{}", first.stderr);
    let first = first.json();
    assert_eq!(first["evidence"]["outcome"], "regressed", "{first}");
    // Not the result wanted: again, same change, another metric.
    let second = flaky_cycle(
        &s,
        &["--metric", "wasted_attempts", "--submit-anyway", "--json"],
    );
    assert_eq!(second.code, 0, "{}", second.stderr);
    let second = second.json();
    let (a, b) = (
        first["proposal"].as_str().expect("id"),
        second["proposal"].as_str().expect("id"),
    );
    assert_ne!(a, b);
    // The same atelier.toml measured twice (the records differ only by their folder).
    let diff = s.env.git(&[
        "diff",
        "--stat",
        first["evidence"]["measured_head"].as_str().expect("head"),
        second["evidence"]["measured_head"].as_str().expect("head"),
        "--",
        ".",
        ":(exclude)proposals",
    ]);
    assert!(diff.trim().is_empty(), "setup: the same change: {diff}");
    s.env.approve(b, "alice").ok();
    s.env.approve(b, "bob").ok();
    s.run(&["merge", b]).ok();
    let curve = improvements(&s);
    let row = &curve[0];
    assert_eq!(row["proposal"], b, "{curve}");
    assert!(
        row["warning"].as_str().is_some_and(|w| w.contains(a)),
        "the curve shows {b}'s metric as pre-registered, though the same change was registered as proposal {a} with failed_tasks (which regressed): {row:#}"
    );
}

/// Promise 3, on GitHub. `--submit-anyway` opens the pull request with a warning ("submitted
/// although its registered metric regressed"), but `caveat` only speaks for the head the
/// ledger's evidence names. One later push through `atelier submit` that drops the evidence
/// files (or changes anything) and the body says nothing of the regression any more: no
/// caveat, no evidence section, though the ledger still holds the regressed evidence.
#[test]
fn on_github_one_push_after_submit_anyway_erases_the_regression_warning() {
    let hub = crate::github::Hub::new();
    let env = &hub.env;
    // The swarm of tests/swarm.rs, by hand (Swarm owns its Env; the hub owns this one).
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
        &crate::swarm::plan(
            "p",
            &[
                crate::swarm::task("A", &["src/a.rs"], &[], "grep -q ok src/a.rs"),
                crate::swarm::task("B", &["src/b.rs"], &[], "grep -q ok src/b.rs"),
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
