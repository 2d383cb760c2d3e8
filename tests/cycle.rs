//! `atelier cycle`: a proposer's change, its metric registered in the ledger before the replay
//! benchmark runs, the validators, the evidence committed into the record, the panel, and
//! submission — or a clear stop — driven through the CLI with scripted agents.

use serde_json::Value;

use crate::stats::runs_with_a_hopeless_task;
use crate::swarm::Swarm;

/// The user-testing scenario: runs in the patched tree, with an empty HOME and no forge token.
pub(crate) const SCENARIO: &str = "set -e\ngrep -q '^failure_budget' atelier.toml\ntest -z \"$GITHUB_TOKEN\"\ntest -z \"$(ls -A \"$HOME\")\"\ntest \"$GREETING\" = hello\ncase \"$TOOLS\" in /*/tools) ;; *) exit 9 ;; esac\necho scenario ok\n";

/// A swarm with five recorded runs where one task never passes (so `tune` proposes cutting
/// failure_budget 3 -> 1) and a user-testing scenario.
pub(crate) fn tuned(scenario: &str) -> Swarm {
    let s = Swarm::configured(
        "failure_budget = 3",
        "\n[validators.user_testing]\nscenario = [\"sh scenario.sh\"]\ntimeout = \"60s\"\nenv = [\"GREETING=hello\", \"TOOLS=~/tools\"]\n",
    );
    s.env.write("scenario.sh", scenario);
    s.env.git(&["add", "scenario.sh"]);
    s.env.git(&["commit", "-qm", "The user-testing scenario"]);
    runs_with_a_hopeless_task(&s, 5);
    s
}

/// `atelier cycle --seeds 2 --mission flaky ARGS`: the quick cycle the tests run.
pub(crate) fn flaky_cycle(s: &Swarm, args: &[&str]) -> crate::support::Run {
    let mut all = vec!["cycle", "--seeds", "2", "--mission", "flaky"];
    all.extend_from_slice(args);
    s.run(&all)
}

fn ledger(s: &Swarm) -> Vec<Value> {
    let v = s.run(&["audit", "log", "--json"]).ok().json();
    v.as_array().cloned().unwrap_or_default()
}

fn kinds_of(s: &Swarm, id: &str) -> Vec<String> {
    ledger(s)
        .iter()
        .filter(|e| e["proposal"] == id)
        .map(|e| e["kind"].as_str().unwrap_or_default().to_string())
        .collect()
}

pub(crate) fn on_branch(s: &Swarm, id: &str, file: &str) -> String {
    let listing = s.env.git(&[
        "ls-tree",
        "-r",
        "--name-only",
        &format!("atelier/proposals/{id}"),
        "proposals/",
    ]);
    let path = listing
        .lines()
        .find(|l| l.starts_with(&format!("proposals/{id}-")) && l.ends_with(file))
        .unwrap_or_else(|| panic!("no {file} in the record of {id}: {listing}"))
        .to_string();
    s.env
        .git(&["show", &format!("atelier/proposals/{id}:{path}")])
}

#[test]
fn a_tune_cycle_registers_its_metric_first_and_a_regression_is_recorded_not_submitted() {
    let s = tuned(SCENARIO);
    let r = flaky_cycle(&s, &["--json"]);
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    let c = r.json();
    let id = c["proposal"].as_str().expect("a proposal").to_string();
    // Budget 1 instead of 3: the flaky mission's late passers now fail, every seed.
    assert_eq!(c["registered"]["metric"], "wasted_attempts", "{c}");
    assert_eq!(c["submitted"], false);
    let stopped = c["stopped"].as_str().expect("why it stopped");
    assert!(
        stopped.contains("not submitted: failed_tasks regressed"),
        "{stopped}"
    );
    let e = &c["evidence"];
    assert_eq!(e["outcome"], "no significant change", "{e}");
    assert_eq!(e["regressions"][0], "failed_tasks");
    let user = e["validators"]
        .as_array()
        .and_then(|v| v.iter().find(|v| v["name"] == "user-testing"))
        .expect("the user-testing validator");
    assert_eq!(user["result"], "passed", "{user}");
    assert!(
        r.stderr.contains("cycle [register]") && r.stderr.contains("cycle [benchmark]"),
        "{}",
        r.stderr
    );

    // The ledger: registered before the evidence, for the head that was measured, then the
    // panel's verdict on the change as it now is, then closed.
    let kinds = kinds_of(&s, &id);
    assert_eq!(
        kinds,
        [
            "proposal-opened",
            "metric-registered",
            "evidence-recorded",
            "review-recorded",
            "closed"
        ],
        "{kinds:?}"
    );
    let entries = ledger(&s);
    let reg = entries
        .iter()
        .find(|x| x["kind"] == "metric-registered")
        .expect("registered");
    assert_eq!(reg["head"], e["measured_head"]);
    assert_eq!(reg["seq"], e["registered_entry"]);
    assert_eq!(reg["missions"][0], "flaky");
    let evidence_head = c["evidence_head"].as_str().expect("evidence head");
    assert_eq!(
        s.env
            .git(&["rev-parse", &format!("atelier/proposals/{id}")])
            .trim(),
        evidence_head
    );
    assert_eq!(
        s.env
            .git(&["rev-parse", &format!("{evidence_head}^")])
            .trim(),
        e["measured_head"].as_str().expect("measured")
    );

    // The record people read, committed on the branch.
    let md = on_branch(&s, &id, "evidence.md");
    for want in [
        "wasted_attempts did not change significantly",
        "- failed_tasks regressed",
        "| **wasted_attempts** (registered)",
        "**user-testing**: passed",
    ] {
        assert!(md.contains(want), "missing {want:?}:\n{md}");
    }
    let json: Value = serde_json::from_str(&on_branch(&s, &id, "evidence.json")).expect("json");
    assert_eq!(json["metric"], "wasted_attempts");
    let listed = s.run(&["proposals", "--json"]).ok().json();
    assert_eq!(listed[0]["state"], "closed", "{listed}");
}

#[test]
fn submit_anyway_submits_and_the_improvement_curve_shows_what_merged() {
    let s = tuned(SCENARIO);
    let r = flaky_cycle(&s, &["--submit-anyway"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let id = r
        .stdout
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("proposal "))
        .expect("id")
        .to_string();
    // atelier.toml is in the constitution: two approvals.
    assert!(
        r.stdout.contains("awaiting approval: 0 of 2")
            && r.stdout
                .contains(&format!("to approve: atelier approve {id} --key")),
        "{}",
        r.stdout
    );
    assert!(
        r.stderr
            .contains("submitted anyway (--submit-anyway) despite: failed_tasks regressed"),
        "{}",
        r.stderr
    );
    assert_eq!(
        s.run(&["proposals", "--improvements"])
            .ok()
            .stdout
            .lines()
            .nth(1),
        Some("(no merged proposals from `atelier cycle` yet)")
    );
    s.env.approve(&id, "alice").ok();
    s.env.approve(&id, "bob").ok();
    s.run(&["merge", &id]).ok();
    let curve = s
        .run(&["proposals", "--improvements", "--json"])
        .ok()
        .json();
    let row = &curve[0];
    assert_eq!(row["proposal"], id.as_str(), "{curve}");
    assert_eq!(row["metric"], "wasted_attempts");
    assert_eq!(row["outcome"], "no significant change");
    assert!(row["delta"]["low"].is_number(), "{row}");
    assert!(row["warning"].is_null(), "{row}");
    let text = s.run(&["proposals", "--improvements"]).ok().stdout;
    assert!(
        text.contains("wasted_attempts") && text.contains("no significant change"),
        "{text}"
    );
    // Merged onto the base it was measured on: nothing to warn about, though main moved (to
    // the merge itself).
    let shown = s.run(&["show", &id]).ok().stdout;
    assert!(
        shown.contains("evidence (atelier cycle") && !shown.contains("moved since"),
        "{shown}"
    );
}

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
fn a_failing_user_scenario_or_nothing_to_propose_stops_the_cycle_clearly() {
    // Nothing recorded yet: tune proposes nothing and the cycle says so, recording nothing.
    let s = Swarm::configured(
        "failure_budget = 3",
        "\n[validators.user_testing]\nscenario = [\"sh scenario.sh\"]\n",
    );
    let r = s.run(&["cycle", "--json"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    let c = r.json();
    assert_eq!(c["stage"], "propose");
    assert!(c["proposal"].is_null());
    assert!(
        r.stderr.contains("tune proposes nothing from fewer than 5"),
        "{}",
        r.stderr
    );
    assert_eq!(
        s.run(&["proposals", "--json"])
            .ok()
            .json()
            .as_array()
            .map(Vec::len),
        Some(0)
    );
    for (args, want) in [
        (&["cycle", "--seeds", "1"][..], "--seeds 1: at least 2"),
        (
            &["cycle", "--metric", "speed"][..],
            "--metric speed: not a replay metric",
        ),
        (
            &["cycle", "--mission", "nope"][..],
            "--mission nope: no such mission",
        ),
    ] {
        let bad = s.run(args);
        assert_eq!(bad.code, 2, "{args:?}: {}", bad.stderr);
        assert!(bad.stderr.contains(want), "{args:?}: {}", bad.stderr);
    }

    // The scenario fails on the patched tree: recorded with its evidence, not submitted.
    let s = tuned("echo 'the demo broke' >&2\nexit 3\n");
    let r = flaky_cycle(&s, &["--metric", "failed_tasks", "--json"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    let c = r.json();
    assert_eq!(c["registered"]["metric"], "failed_tasks");
    assert_eq!(c["evidence"]["outcome"], "regressed");
    let stopped = c["stopped"].as_str().expect("stopped");
    assert!(
        stopped.contains("the registered metric failed_tasks regressed")
            && stopped.contains(
                "the user-testing validator failed: scenario `sh scenario.sh` exited with 3"
            ),
        "{stopped}"
    );
    let md = on_branch(&s, c["proposal"].as_str().expect("id"), "evidence.md");
    assert!(md.contains("the demo broke"), "{md}");
    assert!(md.contains("failed_tasks REGRESSED significantly"), "{md}");
}

#[test]
fn a_proposer_whose_change_edits_the_replay_missions_is_blocked_by_the_panel() {
    // A repository that keeps its missions (as Atelier's own does) and names them judge paths.
    let s = crate::proposers::with_proposer();
    s.env.write(
        "missions/flaky.toml",
        "[mission]\nid = \"flaky\"\ntitle = \"t\"\n\n[[task]]\nid = \"A\"\nbehaviour = \"flaky\"\n",
    );
    s.env.write(
        "reviewers/judge-tamper.toml",
        "name = \"judge-tamper\"\nflavour = \"An agent must never change what judges it.\"\nkind = \"builtin:judge-tamper\"\njudges = [\"missions/**\"]\n",
    );
    s.env.git(&["add", "-A"]);
    s.env.git(&["commit", "-qm", "Missions are judge paths"]);
    crate::proposers::reply(
        &s,
        &format!(
            "```toml\n{}```\n",
            crate::swarm::plan(
                "easier",
                &[crate::swarm::task(
                    "A",
                    &["missions/flaky.toml"],
                    &[],
                    "grep -q steady missions/flaky.toml"
                )]
            )
        ),
    );
    // The worker makes the benchmark easy: no more flaky task.
    s.scenario(
        "easier:A",
        "sed -i 's/behaviour = \"flaky\"/behaviour = \"steady\"/' missions/flaky.toml",
    );
    let r = s.run(&[
        "cycle",
        "--from",
        "agent",
        "--goal",
        "Do better on the replay benchmark",
    ]);
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("E_SCRUTINY_FAILED") && r.stderr.contains("missions/flaky.toml"),
        "{}",
        r.stderr
    );
    assert_eq!(
        s.run(&["proposals", "--json"])
            .ok()
            .json()
            .as_array()
            .map(Vec::len),
        Some(0),
        "nothing proposed, nothing to approve"
    );
    assert!(
        s.env
            .read("missions/flaky.toml")
            .contains("behaviour = \"flaky\""),
        "the main tree's missions are untouched"
    );
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

#[test]
fn bench_replay_against_another_build_of_atelier() {
    let s = Swarm::configured("failure_budget = 3", "");
    let bin = crate::support::bin();
    // Another build given as a binary: the same code on both sides, so every count is equal.
    let r = s
        .run(&[
            "bench",
            "replay",
            "--baseline-bin",
            bin,
            "--seeds",
            "2",
            "--mission",
            "flaky",
            "--json",
        ])
        .ok()
        .json();
    assert_eq!(r["baseline_build"], bin, "{r}");
    for d in r["deltas"].as_array().expect("deltas") {
        if d["metric"] != "wall_ms" {
            assert_eq!(d["delta"], 0.0, "{d}");
            assert_eq!(d["verdict"], "no significant change", "{d}");
        }
    }
    // A build that predates `bench sample` says so.
    let old = s.run(&[
        "bench",
        "replay",
        "--baseline-bin",
        "/bin/true",
        "--seeds",
        "2",
        "--mission",
        "flaky",
    ]);
    assert_eq!(old.code, 2, "{}", old.stderr);
    assert!(
        old.stderr.contains("predates `bench sample`"),
        "{}",
        old.stderr
    );

    // A build that leaves a metric out (it would count as 0) is refused, naming what it gave.
    let partial = s
        .env
        .file("partial.sh", "#!/bin/sh\necho '{\"failed_tasks\": 0}'\n");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&partial, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let r = s.run(&[
        "bench",
        "replay",
        "--baseline-bin",
        &partial.display().to_string(),
        "--seeds",
        "2",
        "--mission",
        "flaky",
    ]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("with the metrics failed_tasks instead of attempts, failed_tasks"),
        "{}",
        r.stderr
    );

    // --baseline REV builds the revision (here a stand-in cargo that "builds" by copying this
    // atelier), once, in a worktree it removes afterwards.
    let not_atelier = s.run(&["bench", "replay", "--baseline", "HEAD", "--seeds", "2"]);
    assert_eq!(not_atelier.code, 2);
    assert!(
        not_atelier.stderr.contains("not atelier's package"),
        "{}",
        not_atelier.stderr
    );
    s.env.write(
        "Cargo.toml",
        "[package]\nname = \"atelier\"\nversion = \"0.1.0\"\n",
    );
    s.env.git(&["add", "Cargo.toml"]);
    s.env.git(&["commit", "-qm", "Atelier's manifest"]);
    let cargo = s.env.file(
        "fake-cargo.sh",
        &format!(
            "#!/bin/sh\necho \"built in $(pwd)\" >> \"{}/cargo.log\"\nmkdir -p \"$CARGO_TARGET_DIR/release\"\ncp '{bin}' \"$CARGO_TARGET_DIR/release/atelier\"\n",
            s.env.tmp.path().display()
        ),
    );
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&cargo, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    for _ in 0..2 {
        let out = s
            .command(&[
                "bench",
                "replay",
                "--baseline",
                "HEAD",
                "--seeds",
                "2",
                "--mission",
                "flaky",
                "--json",
            ])
            .env("CARGO", &cargo)
            .output()
            .expect("run");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        assert!(
            v["baseline_build"]
                .as_str()
                .is_some_and(|b| b.starts_with("HEAD (")),
            "{v}"
        );
    }
    let log = std::fs::read_to_string(s.env.tmp.path().join("cargo.log")).expect("built");
    assert_eq!(log.lines().count(), 1, "built once, then reused: {log}");
    assert!(log.contains(".atelier/bench/bench-"), "{log}");
    let worktrees = s.env.git(&["worktree", "list"]);
    assert_eq!(worktrees.lines().count(), 1, "{worktrees}");
    assert!(!s
        .env
        .git(&["branch", "--list", "atelier/bench/*"])
        .contains("bench"));
}

#[test]
fn agent_reviewers_get_the_validators_and_the_benchmark_in_their_handoff() {
    let s = tuned(SCENARIO);
    let critic = s.fake.join("critic.sh");
    std::fs::write(
        &critic,
        "#!/bin/sh\ncat > \"$FAKE_AGENT_DIR/critic-prompt.txt\"\necho '{\"verdict\": \"approve\", \"findings\": []}'\n",
    )
    .expect("critic");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&critic, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let config = s.env.read("atelier.toml");
    s.env.write(
        "atelier.toml",
        &format!(
            "{config}\n[roles.critic]\nbackend = \"command\"\ncommand = [\"{}\"]\nenv = [\"FAKE_AGENT_DIR\"]\nwritable = [\"{}\"]\n",
            critic.display(),
            s.fake.display()
        ),
    );
    s.env.write(
        "reviewers/adversary.toml",
        "name = \"adversary\"\nflavour = \"Assume the author is gaming the gate.\"\nkind = \"agent\"\nrole = \"critic\"\ntemplate = \"adversary.md.j2\"\n",
    );
    s.env.write(
        "reviewers/templates/adversary.md.j2",
        "Review {{ handoff.title }}.\n{% for c in handoff.checks %}CHECK {{ c.name }} {{ c.passed }}: {{ c.detail }}\n{% endfor %}{{ answer_schema }}\n",
    );
    s.env.git(&["add", "-A"]);
    s.env.git(&["commit", "-qm", "An agent reviewer"]);
    let r = flaky_cycle(&s, &["--submit-anyway"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let prompt = std::fs::read_to_string(s.fake.join("critic-prompt.txt")).expect("the critic ran");
    for want in [
        "CHECK validator user-testing True: passed:",
        "CHECK replay benchmark False: wasted_attempts did not change significantly",
    ] {
        assert!(prompt.contains(want), "missing {want:?} in\n{prompt}");
    }
    assert!(
        !prompt.contains("validator scrutiny"),
        "a validator that did not run is no check: {prompt}"
    );
}

/// A stand-in for Atelier's own repository: `Cargo.toml` names the `atelier` package, its
/// "code" is `src/atelier.sh` (which answers `bench sample` with metrics in which
/// `FAILED` tasks fail), and a stand-in cargo "builds" it by copying it into the target
/// directory, first running `build.sh` when there is one (as cargo runs a build script).
/// `[proposers.lint]`'s fixer edits the code: `fewer` makes fewer tasks fail, `worse` more,
/// `hostile` adds a build script and code that try to reach the repository and the gate key.
pub(crate) fn atelier_stand_in() -> (Swarm, std::path::PathBuf) {
    let s = Swarm::configured(
        "failure_budget = 3",
        "\n[gauntlet]\nwritable = [\"FAKEDIR\"]\n\n[[gauntlet.steps]]\nname = \"syntax\"\nrun = \"sh -n src/atelier.sh\"\ntimeout = \"30s\"\n\n[proposers.lint]\ncommand = [\"FIXER\", \"{family}\"]\nfamilies = [\"fewer\", \"worse\", \"hostile\"]\ntimeout = \"30s\"\n",
    );
    let repo = s.env.repo.display().to_string();
    let key = s.env.gate_key().display().to_string();
    let fixer = s.fake.join("fix.sh");
    let hostile_build = format!(
        "if cat '{key}' >/dev/null 2>&1; then echo 'LEAK: read the gate key'; exit 1; fi\nif echo x > '{repo}/pwned-build.txt' 2>/dev/null; then echo 'LEAK: wrote the main tree'; exit 1; fi\nif echo 0000000000000000000000000000000000000000 > '{repo}/.git/refs/heads/pwned' 2>/dev/null; then echo 'LEAK: wrote a ref'; exit 1; fi\n"
    );
    std::fs::write(
        &fixer,
        format!(
            "#!/bin/sh\ncase \"$1\" in\n  fewer) sed -i 's/^FAILED=1$/FAILED=0/' src/atelier.sh ;;\n  worse) sed -i 's/^FAILED=1$/FAILED=2/' src/atelier.sh ;;\n  hostile)\n    cat > build.sh <<'B'\n{hostile_build}B\n    sed -i 's/^FAILED=1$/FAILED=0/' src/atelier.sh\n    sed -i \"/^FAILED=0$/a echo x > '{repo}/pwned-run.txt' 2>/dev/null; cat '{key}' > /dev/null 2>\\&1 \\&\\& FAILED=9\" src/atelier.sh ;;\nesac\n"
        ),
    )
    .expect("write fixer");
    let cargo = s.fake.join("cargo.sh");
    std::fs::write(
        &cargo,
        format!(
            "#!/bin/sh\necho \"built in $(pwd)\" >> '{}/cargo.log'\nif [ -f build.sh ]; then sh build.sh || exit 101; fi\nmkdir -p \"$CARGO_TARGET_DIR/release\"\ncp src/atelier.sh \"$CARGO_TARGET_DIR/release/atelier\"\nchmod +x \"$CARGO_TARGET_DIR/release/atelier\"\n",
            s.fake.display()
        ),
    )
    .expect("write cargo");
    use std::os::unix::fs::PermissionsExt;
    for f in [&fixer, &cargo] {
        std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let config = s
        .env
        .read("atelier.toml")
        .replace("FIXER", &fixer.display().to_string())
        .replace("FAKEDIR", &s.fake.display().to_string());
    s.env.write("atelier.toml", &config);
    s.env.write(
        "Cargo.toml",
        "[package]\nname = \"atelier\"\nversion = \"0.1.0\"\n",
    );
    s.env.write(
        "src/atelier.sh",
        "#!/bin/sh\nFAILED=1\n[ \"$1 $2\" = 'bench sample' ] || exit 2\nprintf '{\"wall_ms\":100,\"attempts\":3,\"wasted_attempts\":1,\"nudges\":0,\"restarts\":0,\"false_kills\":0,\"failed_tasks\":%s}\\n' \"$FAILED\"\n",
    );
    s.env.git(&["add", "-A"]);
    s.env.git(&["commit", "-qm", "Atelier's stand-in code"]);
    (s, cargo)
}

pub(crate) fn cycle_with(s: &Swarm, cargo: &std::path::Path, args: &[&str]) -> crate::support::Run {
    let mut all = vec!["cycle", "--seeds", "2", "--mission", "flaky", "--json"];
    all.extend_from_slice(args);
    let out = s
        .command(&all)
        .env("CARGO", cargo)
        .output()
        .expect("run atelier");
    crate::support::Run::from(out)
}

#[test]
fn a_change_to_atelier_s_own_code_is_measured_by_two_builds() {
    let (s, cargo) = atelier_stand_in();
    let r = cycle_with(
        &s,
        &cargo,
        &[
            "--from",
            "lint",
            "--family",
            "fewer",
            "--metric",
            "failed_tasks",
        ],
    );
    let v = r.json();
    assert_eq!(
        v["stage"], "awaiting-approval",
        "{}\n{}",
        r.stdout, r.stderr
    );
    let e = &v["evidence"];
    assert_eq!(e["metric"], "failed_tasks", "{e}");
    assert_eq!(e["outcome"], "improved", "{e}");
    let b = &e["benchmark"];
    assert!(
        b["baseline_build"]
            .as_str()
            .is_some_and(|l| l.starts_with("the base (main at ")),
        "{b}"
    );
    assert!(
        b["candidate_build"]
            .as_str()
            .is_some_and(|l| l.starts_with("the change (")),
        "{b}"
    );
    let failed = b["deltas"]
        .as_array()
        .expect("deltas")
        .iter()
        .find(|d| d["metric"] == "failed_tasks")
        .expect("failed_tasks")
        .clone();
    assert_eq!(failed["baseline_mean"], 1.0, "{failed}");
    assert_eq!(failed["candidate_mean"], 0.0, "{failed}");
    assert!(
        r.stderr.contains("cycle [build]") && r.stderr.contains("contained like a gauntlet step"),
        "{}",
        r.stderr
    );
    // Two builds: the base (trusted, in a worktree under .atelier/bench) and the change
    // (contained, in a discarded worktree); nothing left behind.
    let log = std::fs::read_to_string(s.fake.join("cargo.log")).expect("built");
    assert_eq!(log.lines().count(), 2, "{log}");
    assert!(log.contains(".atelier/bench/bench-"), "{log}");
    assert!(log.contains(".atelier/proposers/build-"), "{log}");
    assert_eq!(s.env.git(&["worktree", "list"]).lines().count(), 1);
    // The record people read says which builds ran it.
    let id = v["proposal"].as_str().expect("an id");
    let md = on_branch(&s, id, "evidence.md");
    assert!(md.contains("Run by two builds of Atelier"), "{md}");

    // With no metric named, the two builds still run: a code change that makes more tasks fail
    // is recorded and not submitted.
    let worse = cycle_with(&s, &cargo, &["--from", "lint", "--family", "worse"]);
    assert_eq!(worse.code, 1, "{}", worse.stderr);
    let w = worse.json();
    assert_eq!(w["evidence"]["outcome"], "no metric named", "{w}");
    assert!(
        w["evidence"]["regressions"]
            .as_array()
            .is_some_and(|r| r.iter().any(|x| x == "failed_tasks")),
        "{w}"
    );
    assert!(
        w["stopped"]
            .as_str()
            .is_some_and(|x| x.contains("failed_tasks regressed")),
        "{w}"
    );
    assert!(
        log.lines().count() == 2
            && std::fs::read_to_string(s.fake.join("cargo.log"))
                .expect("log")
                .lines()
                .count()
                == 3,
        "the base's build is reused; the change is built again"
    );
}

#[test]
fn a_hostile_change_cannot_reach_the_repository_or_the_gate_key_when_it_is_built_and_run() {
    let (s, cargo) = atelier_stand_in();
    let main_before = s.env.git(&["rev-parse", "main"]);
    let r = cycle_with(
        &s,
        &cargo,
        &[
            "--from",
            "lint",
            "--family",
            "hostile",
            "--metric",
            "failed_tasks",
        ],
    );
    // Its build script found every door shut (it fails the build on any that opens), and its
    // code, run for the benchmark, could neither write the main tree nor read the key.
    assert!(!r.stderr.contains("LEAK"), "{}", r.stderr);
    let v = r.json();
    assert!(
        v["evidence"]["benchmark"]["candidate_build"]
            .as_str()
            .is_some(),
        "the change was built and measured: {}\n{}",
        r.stdout,
        r.stderr
    );
    let failed = v["evidence"]["benchmark"]["deltas"]
        .as_array()
        .expect("deltas")
        .iter()
        .find(|d| d["metric"] == "failed_tasks")
        .expect("failed_tasks")
        .clone();
    assert_eq!(
        failed["candidate_mean"], 0.0,
        "the gate key was not readable: {failed}"
    );
    for f in ["pwned-build.txt", "pwned-run.txt"] {
        assert!(!s.env.repo.join(f).exists(), "{f} written");
    }
    assert!(!s.env.repo.join(".git/refs/heads/pwned").exists());
    assert_eq!(s.env.git(&["rev-parse", "main"]), main_before);
}

#[test]
fn a_run_recorded_as_a_mission_replays_from_the_protected_branch_only() {
    let s = Swarm::new("failure_budget = 3");
    s.scenario("p:A", "echo ok > src/a.rs");
    s.scenario(
        "p:B",
        "if [ \"$ATELIER_ATTEMPT\" = 1 ]; then echo 'error: first try'; exit 3; fi; echo ok > src/b.rs",
    );
    let p = s.plan(
        "p.toml",
        &crate::swarm::plan(
            "p",
            &[
                crate::swarm::task("A", &["src/a.rs"], &[], "grep -q ok src/a.rs"),
                crate::swarm::task("B", &["src/b.rs"], &[], "grep -q ok src/b.rs"),
            ],
        ),
    );
    let run = s.run(&["run", &p, "--json"]).ok().json();
    let id = run["run"].as_str().expect("a run id").to_string();
    let rec = s.run(&["bench", "record", &id, "--id", "late-b"]).ok();
    assert!(
        rec.stdout.contains("missions/late-b.toml"),
        "{}",
        rec.stdout
    );
    let text = s.env.read("missions/late-b.toml");
    assert!(
        text.contains("id = \"p-B\"")
            && text.contains("then = \"fail\"")
            && text.contains("then = \"pass\""),
        "{text}"
    );
    // Recording again under the same id overwrites nothing.
    let again = s.run(&["bench", "record", &id, "--id", "late-b"]).code(2);
    assert!(
        again.stderr.contains("exists in the working tree"),
        "{}",
        again.stderr
    );

    let configs = |budget_a: u32, budget_b: u32| {
        for (f, b) in [("base.toml", budget_a), ("cand.toml", budget_b)] {
            s.env.file(
                f,
                &format!("[conductor]\nnudge_after = \"5s\"\nrestart_after = \"10s\"\nattempt_timeout = \"60s\"\nfailure_budget = {b}\n"),
            );
        }
    };
    configs(3, 1);
    let base = s.env.tmp.path().join("base.toml").display().to_string();
    let cand = s.env.tmp.path().join("cand.toml").display().to_string();
    let replay = |extra: &[&str]| {
        let mut a = vec![
            "bench",
            "replay",
            "--baseline-config",
            &base,
            "--candidate-config",
            &cand,
            "--seeds",
            "2",
            "--json",
        ];
        a.extend_from_slice(extra);
        s.run(&a)
    };
    // Only the protected branch's missions run: the working tree's file is not one yet.
    let unmerged = replay(&["--mission", "late-b"]).code(2);
    assert!(
        unmerged
            .stderr
            .contains("--mission late-b: no such mission (built in or on the protected branch: silent, flaky)"),
        "{}",
        unmerged.stderr
    );
    // A title is text, never plan syntax, whatever it holds.
    let titled: String = text
        .lines()
        .map(|l| {
            if l.starts_with("title = ") {
                r#"title = "Late \"B\"\n[[task]]\nid = \"Z\"""#.to_string() + "\n"
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    s.env.write("missions/late-b.toml", &titled);
    s.env.git(&["add", "missions/late-b.toml"]);
    s.env
        .git(&["commit", "-qm", "A mission recorded from our own run"]);
    let v = replay(&["--mission", "late-b"]).ok().json();
    assert_eq!(v["missions"], serde_json::json!(["late-b"]), "{v}");
    let failed = v["deltas"]
        .as_array()
        .expect("deltas")
        .iter()
        .find(|d| d["metric"] == "failed_tasks")
        .expect("failed_tasks")
        .clone();
    // B failed its first attempt in the run: with one attempt allowed it fails every time.
    assert_eq!(failed["baseline_mean"], 0.0, "{failed}");
    assert_eq!(failed["candidate_mean"], 1.0, "{failed}");
    assert_eq!(failed["verdict"], "regressed", "{failed}");

    // A broken mission on the branch is refused with its file and field.
    s.env.write(
        "missions/broken.toml",
        "[mission]\nid = \"broken\"\ntitle = \"t\"\n[[task]]\nid = \"A\"\nbehaviour = \"recorded\"\n",
    );
    s.env.git(&["add", "missions/broken.toml"]);
    s.env.git(&["commit", "-qm", "A broken mission"]);
    let broken = replay(&["--mission", "late-b"]).code(2);
    assert!(
        broken.stderr.contains(
            "missions/broken.toml on main: task A: behaviour \"recorded\" needs attempts"
        ),
        "{}",
        broken.stderr
    );
}
