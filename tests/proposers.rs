//! `atelier propose --from lint`: the protected branch's fix command, run contained in a fresh
//! worktree for one lint family, proposed only when it changed something and the gauntlet
//! still passes on the fixed tree. The fix command is a scripted program that fixes, breaks,
//! does nothing, or attacks, on purpose.

use crate::swarm::Swarm;

/// A swarm whose branch holds `src/messy.txt` (double spaces), a gauntlet step that refuses
/// double spaces, and `[proposers.lint]` naming the scripted fixer.
fn linted() -> Swarm {
    let s = Swarm::configured(
        "",
        "\n[[gauntlet.steps]]\nname = \"tidy\"\nrun = \"! grep -q '  ' src/messy.txt\"\ntimeout = \"30s\"\n\n[proposers.lint]\ncommand = [\"FIXER\", \"{family}\"]\nfamilies = [\"spaces\", \"breaks\", \"nothing\", \"hostile\"]\ntimeout = \"30s\"\n",
    );
    let fixer = s.fake.join("fix.sh");
    let repo = s.env.repo.display().to_string();
    std::fs::write(
        &fixer,
        format!(
            "#!/bin/sh\ncase \"$1\" in\n  spaces) sed -i 's/  */ /g' src/messy.txt ;;\n  breaks) echo extra > src/other.txt ;;\n  nothing) : ;;\n  hostile)\n    echo pwned > '{repo}/pwned.txt'\n    echo 0000000000000000000000000000000000000000 > '{repo}/.git/refs/heads/pwned'\n    sed -i 's/  */ /g' src/messy.txt ;;\nesac\n"
        ),
    )
    .expect("write fixer");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fixer, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let config = s
        .env
        .read("atelier.toml")
        .replace("FIXER", &fixer.display().to_string());
    s.env.write("atelier.toml", &config);
    s.env.write("src/messy.txt", "a  b   c\n");
    s.env.git(&["add", "atelier.toml", "src/messy.txt"]);
    s.env.git(&["commit", "-qm", "A messy file and a fixer"]);
    s
}

fn proposals(s: &Swarm) -> usize {
    s.run(&["proposals", "--json"])
        .ok()
        .json()
        .as_array()
        .map_or(0, Vec::len)
}

fn nothing_left_behind(s: &Swarm) {
    let dir = s.env.repo.join(".atelier/proposers");
    let left: Vec<_> = std::fs::read_dir(&dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "worktrees left: {left:?}");
    let branches = s.env.git(&["branch", "--list", "atelier/proposers/*"]);
    assert!(branches.trim().is_empty(), "{branches}");
}

#[test]
fn lint_proposes_one_familys_fixes_when_the_gauntlet_passes() {
    let s = linted();
    // An uncommitted edit of the working tree's fix command is not what runs: the branch's is.
    let fixer = s.fake.join("fix.sh").display().to_string();
    let config = s.env.read("atelier.toml");
    let edited = config.replace(
        &format!("command = [\"{fixer}\""),
        "command = [\"sh\", \"-c\", \"echo hacked > src/messy.txt\"",
    );
    assert_ne!(edited, config);
    s.env.write("atelier.toml", &edited);
    let done = s
        .run(&["propose", "--from", "lint", "--family", "spaces", "--json"])
        .ok()
        .json();
    let id = done["proposal"]["id"]
        .as_str()
        .expect("a proposal")
        .to_string();
    assert_eq!(
        done["lint"]["changed"],
        serde_json::json!(["src/messy.txt"])
    );
    assert_eq!(done["lint"]["steps"][0]["name"], "tidy");
    assert_eq!(done["lint"]["steps"][0]["passed"], true);
    assert_eq!(done["lint"]["contained"], true);
    let shown = s.run(&["show", &id]).ok().stdout;
    assert!(
        shown.contains("-a  b   c")
            && shown.contains("+a b c")
            && !shown.contains("hacked")
            && shown.contains("lint: spaces fixes in 1 file(s)"),
        "{shown}"
    );
    let record = s.run(&["audit", "show", &id, "--json"]).ok().stdout;
    assert!(record.contains("agent atelier-lint"), "{record}");
    // The main working tree is untouched: the fixes live on the proposal's branch.
    assert_eq!(s.env.read("src/messy.txt"), "a  b   c\n");
    nothing_left_behind(&s);
}

#[test]
fn fixes_that_break_the_gauntlet_or_change_nothing_are_not_proposed() {
    let s = linted();
    let broken = s
        .run(&["propose", "--from", "lint", "--family", "breaks"])
        .code(1);
    assert!(
        broken
            .stderr
            .contains("nothing proposed: with the fixes, the gauntlet fails (tidy"),
        "{}",
        broken.stderr
    );
    assert!(
        broken.stdout.contains("gauntlet tidy: FAILED"),
        "{}",
        broken.stdout
    );
    let nothing = s
        .run(&["propose", "--from", "lint", "--family", "nothing"])
        .code(1);
    assert!(
        nothing
            .stderr
            .contains("the fix command changed nothing for family nothing"),
        "{}",
        nothing.stderr
    );
    let unlisted = s
        .run(&["propose", "--from", "lint", "--family", "perf"])
        .code(2);
    assert!(
        unlisted.stderr.contains(
            "not one of [proposers.lint] families on main (spaces, breaks, nothing, hostile)"
        ),
        "{}",
        unlisted.stderr
    );
    let odd = s
        .run(&["propose", "--from", "lint", "--family", "a b"])
        .code(2);
    assert!(
        odd.stderr.contains("a lint family is letters"),
        "{}",
        odd.stderr
    );
    let missing = s.run(&["propose", "--from", "lint"]).code(2);
    assert!(
        missing.stderr.contains("needs --family"),
        "{}",
        missing.stderr
    );
    assert_eq!(proposals(&s), 0);
    nothing_left_behind(&s);
}

#[test]
fn a_hostile_fix_command_cannot_write_the_main_tree_or_refs() {
    let s = linted();
    let done = s
        .run(&["propose", "--from", "lint", "--family", "hostile", "--json"])
        .ok()
        .json();
    assert!(
        !s.env.repo.join("pwned.txt").exists(),
        "wrote the main tree"
    );
    assert!(
        !s.env.repo.join(".git/refs/heads/pwned").exists(),
        "wrote a ref"
    );
    assert_eq!(
        done["lint"]["changed"],
        serde_json::json!(["src/messy.txt"])
    );
    nothing_left_behind(&s);
}

#[test]
fn without_a_lint_section_on_the_branch_lint_says_what_to_add() {
    let s = Swarm::new("");
    let r = s
        .run(&["propose", "--from", "lint", "--family", "style"])
        .code(2);
    assert!(
        r.stderr
            .contains("atelier.toml at main has no [proposers.lint]")
            && r.stderr.contains("clippy::{family}"),
        "{}",
        r.stderr
    );
}

/// Gives `s` a command role `role` run by the script `text` (in the fake agent's directory,
/// which the role may write), committed on the branch.
pub(crate) fn add_role(s: &Swarm, role: &str, text: &str) {
    let script = s.fake.join(format!("{role}.sh"));
    std::fs::write(&script, text).expect("write script");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let config = s.env.read("atelier.toml");
    s.env.write(
        "atelier.toml",
        &format!(
            "{config}\n[roles.{role}]\nbackend = \"command\"\ncommand = [\"{}\"]\nenv = [\"FAKE_AGENT_DIR\"]\nwritable = [\"{}\"]\n",
            script.display(),
            s.fake.display()
        ),
    );
    s.env.git(&["commit", "-qam", &format!("A {role} role")]);
}

/// The scripted validator: saves its prompt, prints `validator-answer.txt`.
pub(crate) const VALIDATOR: &str = "#!/bin/sh\ncat > \"$FAKE_AGENT_DIR/validator-prompt.txt\"\ncat \"$FAKE_AGENT_DIR/validator-answer.txt\"\n";

/// A swarm with a `proposer` role: a scripted model that saves its prompt and prints
/// `proposer-reply.txt`, after trying to write into the main working tree.
pub(crate) fn with_proposer() -> Swarm {
    let s = Swarm::configured("", "");
    let text = format!(
        "#!/bin/sh\ncat > \"$FAKE_AGENT_DIR/proposer-prompt.txt\"\necho pwned > '{}/pwned-by-proposer.txt' 2>/dev/null\ncat \"$FAKE_AGENT_DIR/proposer-reply.txt\"\n",
        s.env.repo.display()
    );
    add_role(&s, "proposer", &text);
    s
}

pub(crate) fn reply(s: &Swarm, text: &str) {
    std::fs::write(s.fake.join("proposer-reply.txt"), text).expect("write reply");
}

#[test]
fn the_agent_proposer_plans_the_swarm_runs_it_and_the_run_becomes_the_proposal() {
    let s = with_proposer();
    reply(
        &s,
        &format!(
            "Here is my plan.\n```toml\n{}```\n",
            crate::swarm::plan(
                "hello",
                &[crate::swarm::task(
                    "A",
                    &["src/a.rs"],
                    &[],
                    "grep -q 'pub fn a' src/a.rs"
                )]
            )
        ),
    );
    s.scenario("hello:A", "echo 'pub fn a() {}' > src/a.rs");
    let done = s
        .run(&[
            "propose",
            "--from",
            "agent",
            "--goal",
            "Add a function a",
            "--json",
        ])
        .ok()
        .json();
    let id = done["proposal"]["id"]
        .as_str()
        .expect("a proposal")
        .to_string();
    assert_eq!(done["run"]["run"], "r1");
    let prompt = std::fs::read_to_string(s.fake.join("proposer-prompt.txt")).expect("prompt");
    assert!(
        prompt.contains("# The goal\nAdd a function a")
            && prompt.contains("atelier.toml")
            && prompt.contains("one of: implementer"),
        "{prompt}"
    );
    let shown = s.run(&["show", &id]).ok().stdout;
    assert!(
        shown.contains("+pub fn a() {}") && shown.contains("toward the goal: Add a function a"),
        "{shown}"
    );
    let record = s.run(&["audit", "show", &id, "--json"]).ok().stdout;
    assert!(
        record.contains("agent atelier-agent, swarm run r1"),
        "{record}"
    );
    assert!(
        !s.env.repo.join("pwned-by-proposer.txt").exists(),
        "the proposer wrote the main working tree"
    );
    nothing_left_behind_but_plans(&s);
}

/// The proposer's worktrees are gone; only the kept plans remain.
fn nothing_left_behind_but_plans(s: &Swarm) {
    let left: Vec<String> = std::fs::read_dir(s.env.repo.join(".atelier/proposers"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| !(n.starts_with("plan-") && n.ends_with(".toml")))
                .collect()
        })
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_plan_the_contract_validator_refuses_never_runs() {
    let s = with_proposer();
    // A check that cannot fail: the contract validator refuses it.
    reply(
        &s,
        &crate::swarm::plan(
            "vague",
            &[crate::swarm::task("A", &["src/a.rs"], &[], "true")],
        ),
    );
    let r = s
        .run(&["propose", "--from", "agent", "--goal", "Anything"])
        .code(1);
    assert!(
        r.stdout.contains("refused: E_CONTRACT_VAGUE"),
        "{}",
        r.stdout
    );
    assert!(r.stderr.contains("no worker ran"), "{}", r.stderr);
    assert!(!s.env.repo.join(".atelier/runs").exists(), "a run started");
    reply(&s, "I would rather not.");
    let r = s
        .run(&["propose", "--from", "agent", "--goal", "Anything"])
        .code(1);
    assert!(r.stdout.contains("not a plan"), "{}", r.stdout);
    assert!(!s.env.repo.join(".atelier/runs").exists(), "a run started");
    let dry_plan = crate::swarm::plan(
        "ok",
        &[crate::swarm::task(
            "A",
            &["src/a.rs"],
            &[],
            "grep -q a src/a.rs",
        )],
    );
    reply(&s, &dry_plan);
    let dry = s
        .run(&[
            "propose",
            "--from",
            "agent",
            "--goal",
            "Anything",
            "--dry-run",
        ])
        .ok();
    assert!(dry.stdout.contains("[plan]"), "{}", dry.stdout);
    assert!(!s.env.repo.join(".atelier/runs").exists(), "a dry run ran");
    nothing_left_behind_but_plans(&s);
}

#[test]
fn the_agent_proposer_needs_its_role_and_a_goal() {
    let s = Swarm::new("");
    let r = s
        .run(&["propose", "--from", "agent", "--goal", "x"])
        .code(2);
    assert!(r.stderr.contains("has no [roles.proposer]"), "{}", r.stderr);
    let r = s.run(&["propose", "--from", "agent"]).code(2);
    assert!(r.stderr.contains("needs --goal"), "{}", r.stderr);
}

/// A swarm with a `validator` role ([`VALIDATOR`]).
fn with_validator() -> Swarm {
    let s = Swarm::configured("", "");
    add_role(&s, "validator", VALIDATOR);
    s
}

#[test]
fn the_validator_reads_the_contracts_and_a_plan_it_rejects_never_runs() {
    let s = with_validator();
    s.scenario("p:A", "echo 'pub fn a() {}' > src/a.rs");
    let p = s.plan(
        "p.toml",
        &crate::swarm::plan(
            "p",
            &[crate::swarm::task(
                "A",
                &["src/a.rs"],
                &[],
                "grep -q 'pub fn a' src/a.rs",
            )],
        ),
    );
    std::fs::write(
        s.fake.join("validator-answer.txt"),
        r#"{"verdict": "revise", "findings": [{"severity": "major", "category": "weak-check", "message": "the grep passes on a comment", "hint": "call a()"}]}"#,
    )
    .expect("answer");
    let r = s.run(&["run", &p]).code(1);
    assert!(
        r.stderr.contains("E_CONTRACT_REJECTED")
            && r.stderr.contains("is revise (expected: approve)")
            && r.stderr
                .contains("major weak-check: the grep passes on a comment (call a())"),
        "{}",
        r.stderr
    );
    assert!(!s.env.repo.join(".atelier/runs").exists(), "a run started");
    let prompt = std::fs::read_to_string(s.fake.join("validator-prompt.txt")).expect("prompt");
    assert!(
        prompt.contains("grep -q 'pub fn a' src/a.rs") && prompt.contains("\"verdict\""),
        "the validator sees the contracts: {prompt}"
    );
    // An answer that cannot be read fails closed.
    std::fs::write(s.fake.join("validator-answer.txt"), "LGTM!").expect("answer");
    let r = s.run(&["run", &p]).code(1);
    assert!(r.stderr.contains("unreadable-answer"), "{}", r.stderr);
    // Approved: the run starts and records the verdict.
    std::fs::write(
        s.fake.join("validator-answer.txt"),
        r#"{"verdict": "approve", "findings": []}"#,
    )
    .expect("answer");
    s.run(&["run", &p]).ok();
    assert!(s.events("r1").iter().any(|e| matches!(
        e,
        atelier::swarm::events::RunEvent::ContractValidated { verdict, .. } if verdict == "approve"
    )));
}

#[test]
fn the_scrutiny_validator_refuses_a_run_whose_worker_edited_its_own_check() {
    let s = Swarm::new("");
    s.env
        .write("tests/check.sh", "grep -q 'pub fn a' src/a.rs\n");
    s.env.git(&["add", "tests/check.sh"]);
    s.env.git(&["commit", "-qm", "A check script"]);
    // The worker does no work and rewrites the check to pass.
    s.scenario(
        "p:A",
        "echo 'exit 0' > tests/check.sh; echo nothing > src/a.rs",
    );
    let p = s.plan(
        "p.toml",
        &crate::swarm::plan(
            "p",
            &[crate::swarm::task(
                "A",
                &["src/a.rs", "tests/check.sh"],
                &[],
                "sh tests/check.sh",
            )],
        ),
    );
    let r = s.run(&["run", &p, "--propose"]).code(1);
    assert!(
        r.stderr.contains("E_SCRUTINY_FAILED")
            && r.stderr.contains("check-edited")
            && r.stderr
                .contains("may execute tests/check.sh, which the run changed"),
        "{}",
        r.stderr
    );
    assert_eq!(proposals(&s), 0);
    let v = s.run(&["validate", "r1", "--json"]).code(1).json();
    assert_eq!(v["verdict"], "block");
    assert!(s.env.repo.join(".atelier/runs/r1/scrutiny.json").exists());
}

#[test]
fn the_scrutiny_validator_finds_a_criterion_without_a_passing_record() {
    let s = Swarm::new("");
    s.scenario("p:A", "echo 'pub fn a() {}' > src/a.rs");
    let p = s.plan(
        "p.toml",
        &crate::swarm::plan(
            "p",
            &[crate::swarm::task(
                "A",
                &["src/a.rs"],
                &[],
                "grep -q 'pub fn a' src/a.rs",
            )],
        ),
    );
    s.run(&["run", &p]).ok();
    let ok = s.run(&["validate"]).ok().stdout;
    assert!(
        ok.contains("run r1: scrutiny approve") && ok.contains("passed at attempt 1"),
        "{ok}"
    );
    // The record of the check's pass removed from the log: the criterion has no evidence.
    let log = s.env.repo.join(".atelier/runs/r1/events.jsonl");
    let text = std::fs::read_to_string(&log).expect("log");
    let kept: Vec<&str> = text
        .lines()
        .filter(|l| !(l.contains("\"step-finished\"") && l.contains("\"check 1\"")))
        .collect();
    std::fs::write(&log, kept.join("\n") + "\n").expect("write");
    let bad = s.run(&["validate", "r1"]).code(1).stdout;
    assert!(
        bad.contains("NO passing record") && bad.contains("criterion-unchecked"),
        "{bad}"
    );
}

#[test]
fn bench_replay_measures_false_kills_with_a_paired_interval() {
    let s = Swarm::new("");
    s.env.write(
        "base.toml",
        "[conductor]\nnudge_after = \"1s\"\nrestart_after = \"1s\"\nfailure_budget = 2\n",
    );
    s.env.write(
        "cand.toml",
        "[conductor]\nnudge_after = \"1s\"\nrestart_after = \"4s\"\nfailure_budget = 2\n",
    );
    let base = s.env.repo.join("base.toml").display().to_string();
    let cand = s.env.repo.join("cand.toml").display().to_string();
    let v = s
        .run(&[
            "bench",
            "replay",
            "--baseline-config",
            &base,
            "--candidate-config",
            &cand,
            "--seeds",
            "2",
            "--mission",
            "silent",
            "--json",
        ])
        .ok()
        .json();
    assert_eq!(v["samples"].as_array().map(Vec::len), Some(4));
    // Interleaved: seed 0 runs the baseline first, seed 1 the candidate.
    assert_eq!(v["samples"][0]["side"], "baseline");
    assert_eq!(v["samples"][2]["side"], "candidate");
    let kills = v["deltas"]
        .as_array()
        .expect("deltas")
        .iter()
        .find(|d| d["metric"] == "false_kills")
        .expect("false_kills")
        .clone();
    // Both silent tasks are quiet for 1.5 s (seed 0) or 2.5 s (seed 1) before they deliver:
    // a 1 s restart kills both, every seed; a 4 s one never does.
    assert_eq!(kills["baseline_mean"], 2.0, "{kills:#}");
    assert_eq!(kills["candidate_mean"], 0.0, "{kills:#}");
    assert_eq!(kills["verdict"], "improved", "{kills:#}");
    let bad = s.run(&["bench", "replay", "--baseline", "HEAD~1"]).code(2);
    assert!(
        bad.stderr.contains("not atelier's package"),
        "{}",
        bad.stderr
    );
    let unknown = s
        .run(&[
            "bench",
            "replay",
            "--baseline-config",
            &base,
            "--mission",
            "nope",
        ])
        .code(2);
    assert!(
        unknown
            .stderr
            .contains("no such mission (built in or on the protected branch: silent, flaky)"),
        "{}",
        unknown.stderr
    );
}

#[test]
fn clean_removes_what_a_killed_proposer_left() {
    let s = Swarm::new("");
    // A proposer's worktree whose process (pid 999999999) is gone, as a SIGKILL leaves it.
    let name = "lint-999999999-1";
    let dir = s.env.repo.join(".atelier/proposers").join(name);
    s.env.git(&[
        "worktree",
        "add",
        "-q",
        "-b",
        &format!("atelier/proposers/{name}"),
        &dir.display().to_string(),
    ]);
    s.env.write(".atelier/proposers/plan-1-1.toml", "[plan]\n");
    let v = s.run(&["clean", "--json"]).ok().json();
    assert_eq!(v["worktrees"], serde_json::json!([name]), "{v:#}");
    assert!(!dir.exists());
    let branches = s.env.git(&["branch", "--list", "atelier/proposers/*"]);
    assert!(branches.trim().is_empty(), "{branches}");
    assert!(
        s.env.repo.join(".atelier/proposers/plan-1-1.toml").exists(),
        "plans are kept"
    );
    // One in use (this test's own pid) is left alone.
    let live = format!("agent-{}-2", std::process::id());
    let live_dir = s.env.repo.join(".atelier/proposers").join(&live);
    s.env.git(&[
        "worktree",
        "add",
        "-q",
        "-b",
        &format!("atelier/proposers/{live}"),
        &live_dir.display().to_string(),
    ]);
    s.run(&["clean"]).ok();
    assert!(live_dir.exists());
}

/// The validator's prompt, like the worker's, is never read through a symbolic link: git holds
/// a link's target path as its text, so `prompts/validator.j2 -> ours.j2` would have sent the
/// validator the words "ours.j2". The run is refused naming the link, and the validator is
/// never asked.
#[test]
fn a_validator_prompt_committed_as_a_symbolic_link_is_refused() {
    let s = with_validator();
    s.env
        .write("prompts/ours.j2", "{{ plans | length }} plan(s)\n");
    std::os::unix::fs::symlink("ours.j2", s.env.repo.join("prompts/validator.j2")).expect("link");
    s.env.git(&["add", "prompts"]);
    s.env
        .git(&["commit", "-qm", "Our validator prompt, linked"]);
    let p = s.plan(
        "p.toml",
        &crate::swarm::plan(
            "p",
            &[crate::swarm::task(
                "A",
                &["src/a.rs"],
                &[],
                "grep -q a src/a.rs",
            )],
        ),
    );
    std::fs::write(
        s.fake.join("validator-answer.txt"),
        r#"{"verdict": "approve", "findings": []}"#,
    )
    .expect("answer");
    let r = s.run(&["run", &p]).code(2);
    assert!(
        r.stderr
            .contains("prompts/validator.j2 on main is a symbolic link (to `ours.j2`)"),
        "{}",
        r.stderr
    );
    assert!(!s.fake.join("validator-prompt.txt").exists());
    assert!(!s.env.repo.join(".atelier/runs").exists(), "a run started");
}

/// A worker prompt the run could not use refuses the run before the contract validator is
/// asked: its verdict (an agent's time, tokens) would be spent on a run that never starts.
#[test]
fn a_broken_worker_prompt_refuses_the_run_before_the_validator_is_asked() {
    let s = with_validator();
    s.env
        .write("prompts/worker.j2", "{{ task.no_such_field }}\n");
    s.env.git(&["add", "prompts"]);
    s.env.git(&["commit", "-qm", "A broken worker prompt"]);
    let p = s.plan(
        "p.toml",
        &crate::swarm::plan(
            "p",
            &[crate::swarm::task(
                "A",
                &["src/a.rs"],
                &[],
                "grep -q a src/a.rs",
            )],
        ),
    );
    std::fs::write(
        s.fake.join("validator-answer.txt"),
        r#"{"verdict": "approve", "findings": []}"#,
    )
    .expect("answer");
    let r = s.run(&["run", &p]).code(2);
    assert!(
        r.stderr.contains("prompts/worker.j2 on main")
            && r.stderr.contains("fix it with a proposal"),
        "{}",
        r.stderr
    );
    assert!(
        !s.fake.join("validator-prompt.txt").exists(),
        "the validator was asked about a run that could not start"
    );
}
