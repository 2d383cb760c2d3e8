//! Plans and the contract validator (`atelier plan check`), and the schedule's pure rules.

use std::collections::BTreeSet;

use atelier::swarm::{plan, schedule};

use crate::support::Env;

const ROLES: &str = "\n[roles.implementer]\nbackend = \"command\"\ncommand = [\"my-agent\"]\n\n[roles.writer]\nbackend = \"claude\"\n";

fn env() -> Env {
    let env = Env::new();
    let config = env.read("atelier.toml");
    env.write("atelier.toml", &format!("{config}{ROLES}"));
    env
}

fn task(id: &str, files: &str, deps: &str) -> String {
    format!(
        "[[task]]\nid = \"{id}\"\ntitle = \"Task {id}\"\nrole = \"implementer\"\ngoal = \"Implement {id}\"\nfiles = [{files}]\ndepends_on = [{deps}]\n[task.contract]\ncriteria = [\"cargo test passes for the {id} module with the new cases\"]\nchecks = [\"cargo test -q {id}\"]\n\n"
    )
}

fn plan_text(id: &str, tasks: &[String]) -> String {
    format!(
        "[plan]\nid = \"{id}\"\ntitle = \"Plan {id}\"\n\n{}",
        tasks.concat()
    )
}

#[test]
fn a_valid_plan_shows_waves_critical_path_and_serialised_claims() {
    let env = env();
    let p = env.file(
        "17.toml",
        &plan_text(
            "17",
            &[
                task("T1", "\"src/a.rs\"", ""),
                task("T2", "\"src/*.rs\"", ""),
                task("T3", "\"docs/x.md\"", "\"T1\""),
                task("T4", "", "\"T3\", \"T2\""),
            ],
        ),
    );
    let run = env
        .atelier(&["plan", "check", p.to_str().expect("utf8")])
        .ok();
    assert!(
        run.stdout
            .contains("    1: 17:T1 17:T2\n    2: 17:T3\n    3: 17:T4\n"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("critical path (3): 17:T1 -> 17:T3 -> 17:T4"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("serialised by overlapping claims:\n  17:T1, 17:T2"),
        "{}",
        run.stdout
    );
    let v = env
        .atelier(&["plan", "check", "--json", p.to_str().expect("utf8")])
        .ok()
        .json();
    assert_eq!(v["max_width"], 2);
}

#[test]
fn cross_plan_dependencies_resolve_among_the_plans_given() {
    let env = env();
    let a = env.file("16.toml", &plan_text("16", &[task("T3", "", "")]));
    let b = env.file("17.toml", &plan_text("17", &[task("T1", "", "\"16:T3\"")]));
    let run = env
        .atelier(&["plan", "check", b.to_str().expect("utf8")])
        .code(1);
    assert!(
        run.stdout.contains("E_UNKNOWN_DEPENDENCY") && run.stdout.contains("pass its file too"),
        "{}",
        run.stdout
    );
    let run = env
        .atelier(&[
            "plan",
            "check",
            a.to_str().expect("utf8"),
            b.to_str().expect("utf8"),
        ])
        .ok();
    assert!(
        run.stdout.contains("1: 16:T3\n    2: 17:T1"),
        "{}",
        run.stdout
    );
}

#[test]
fn the_validator_refuses_each_problem_naming_file_task_and_field() {
    let env = env();
    let cases: &[(&str, String, &str)] = &[
        (
            "E_TASK_DUPLICATE_ID",
            plan_text("1", &[task("T1", "", ""), task("T1", "", "")]),
            "task T1, field id",
        ),
        (
            "E_UNKNOWN_DEPENDENCY",
            plan_text("1", &[task("T1", "", "\"T9\"")]),
            "field depends_on: `1:T9`: plan 1 has no task `T9`",
        ),
        (
            "E_DEPENDENCY_CYCLE",
            plan_text(
                "1",
                &[
                    task("T1", "", "\"T3\""),
                    task("T2", "", "\"T1\""),
                    task("T3", "", "\"T2\""),
                ],
            ),
            "dependency cycle: 1:T1 -> 1:T3 -> 1:T2 -> 1:T1",
        ),
        (
            "E_UNKNOWN_ROLE",
            plan_text("1", &[task("T1", "", "").replace("implementer", "painter")]),
            "role `painter` is not configured; atelier.toml has implementer, writer",
        ),
        (
            "E_CONTRACT_NO_CHECK",
            plan_text(
                "1",
                &[task("T1", "", "").replace("checks = [\"cargo test -q T1\"]", "checks = []")],
            ),
            "field contract.checks",
        ),
        (
            "E_CONTRACT_VAGUE",
            plan_text(
                "1",
                &[task("T1", "", "").replace("cargo test -q T1", "true")],
            ),
            "field contract.checks[0]: `true`: it cannot fail",
        ),
        (
            "E_CONTRACT_VAGUE",
            plan_text(
                "1",
                &[task("T1", "", "").replace("cargo test -q T1", "echo done")],
            ),
            "cannot fail",
        ),
        (
            "E_CONTRACT_VAGUE",
            plan_text(
                "1",
                &[task("T1", "", "").replace(
                    "cargo test passes for the T1 module with the new cases",
                    "it works",
                )],
            ),
            "field contract.criteria[0]: \"it works\"",
        ),
        (
            "E_CONTRACT_VAGUE",
            plan_text(
                "1",
                &[task("T1", "", "").replace(
                    "cargo test passes for the T1 module with the new cases",
                    "behaves as expected",
                )],
            ),
            "names no observable outcome",
        ),
        (
            "E_CONTRACT_NO_CRITERIA",
            plan_text(
                "1",
                &[task("T1", "", "").replace(
                    "criteria = [\"cargo test passes for the T1 module with the new cases\"]",
                    "criteria = []",
                )],
            ),
            "field contract.criteria",
        ),
        (
            "E_BAD_GLOB",
            plan_text("1", &[task("T1", "\"src/[\"", "")]),
            "field files[0]: `src/[`",
        ),
        (
            "E_BAD_GLOB",
            plan_text("1", &[task("T1", "\"../secrets\"", "")]),
            "may not contain `..`",
        ),
        (
            "E_TASK_NO_GOAL",
            plan_text(
                "1",
                &[task("T1", "", "").replace("goal = \"Implement T1\"", "goal = \" \"")],
            ),
            "field goal",
        ),
    ];
    for (code, text, phrase) in cases {
        let f = env.file("case.toml", text);
        let run = env
            .atelier(&["plan", "check", f.to_str().expect("utf8")])
            .code(1);
        assert!(
            run.stdout.contains(code) && run.stdout.contains(phrase),
            "{code} / {phrase}:\n{}",
            run.stdout
        );
        assert!(
            run.stdout.contains("case.toml"),
            "names the file: {}",
            run.stdout
        );
    }
}

#[test]
fn a_malformed_plan_file_is_bad_input() {
    let env = env();
    let f = env.file("broken.toml", "[plan]\nid = \"1\"\n[[task]]\nid = 3\n");
    let run = env
        .atelier(&["plan", "check", f.to_str().expect("utf8")])
        .code(2);
    assert!(run.stderr.contains("broken.toml"), "{}", run.stderr);
    let f = env.file(
        "typo.toml",
        &plan_text(
            "1",
            &[task("T1", "", "").replace("depends_on", "depend_on")],
        ),
    );
    let run = env
        .atelier(&["plan", "check", f.to_str().expect("utf8")])
        .code(2);
    assert!(run.stderr.contains("depend_on"), "{}", run.stderr);
}

#[test]
fn glob_overlap_is_conservative() {
    for (a, b, overlap) in [
        ("src/a.rs", "src/a.rs", true),
        ("src/a.rs", "src/b.rs", false),
        ("src/swarm", "src/swarm/retry.rs", true),
        ("src/*.rs", "src/a.rs", true),
        ("src/*.rs", "src/sub/a.rs", false),
        ("src/**", "src/sub/a.rs", true),
        ("src/swarm/*.toml", "src/swarm", true),
        ("src/**/*.rs", "src/x/**", true),
        ("docs/**", "src/**", false),
        ("**/*.rs", "docs/readme.md", true),
    ] {
        assert_eq!(schedule::patterns_overlap(a, b), overlap, "{a} ~ {b}");
        assert_eq!(schedule::patterns_overlap(b, a), overlap, "{b} ~ {a}");
    }
}

fn generated(n: usize) -> Vec<plan::Plan> {
    let mut tasks = Vec::new();
    for i in 0..n {
        let deps = if i >= 5 {
            format!("\"T{}\"", i - 5)
        } else {
            String::new()
        };
        tasks.push(task(
            &format!("T{i}"),
            &format!("\"src/m{}/*.rs\"", i % 7),
            &deps,
        ));
    }
    vec![plan::parse("gen.toml", &plan_text("g", &tasks)).expect("parses")]
}

#[test]
fn next_runnable_never_picks_overlapping_claims_or_unmet_dependencies() {
    let plans = generated(40);
    let roles: BTreeSet<String> = ["implementer".to_string()].into();
    assert!(plan::validate(&plans, &roles).is_empty());
    let mut completed = BTreeSet::new();
    let mut in_flight = BTreeSet::new();
    let tasks: std::collections::BTreeMap<String, plan::Task> = plans[0]
        .tasks
        .iter()
        .map(|t| (t.key.clone(), t.clone()))
        .collect();
    let mut rounds = 0;
    while completed.len() < 40 {
        let picked: Vec<String> = schedule::next_runnable(&plans, &completed, &in_flight, 4)
            .iter()
            .map(|t| t.key.clone())
            .collect();
        in_flight.extend(picked);
        assert!(in_flight.len() <= 4);
        let held: Vec<&plan::Task> = in_flight.iter().map(|k| &tasks[k]).collect();
        for (i, a) in held.iter().enumerate() {
            assert!(
                a.depends_on.iter().all(|d| completed.contains(d)),
                "{} started early",
                a.key
            );
            for b in &held[i + 1..] {
                assert!(
                    !schedule::claims_overlap(a, b),
                    "{} and {} hold overlapping claims",
                    a.key,
                    b.key
                );
            }
        }
        // Finish the oldest task in flight.
        let done = in_flight.iter().next().expect("progress").clone();
        in_flight.remove(&done);
        completed.insert(done);
        rounds += 1;
        assert!(rounds < 1000, "no progress");
    }
    assert_eq!(schedule::simulate(&plans, 4), schedule::simulate(&plans, 4));
    assert!(schedule::simulate(&plans, 4) >= schedule::waves(&plans).len());
}
