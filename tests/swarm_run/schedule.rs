//! The schedule in a real run: overlapping claims never run at once, cross-plan dependencies in
//! order.

use std::collections::BTreeMap;

use atelier::swarm::events::RunEvent;

use crate::support::swarm::{plan, task, Swarm};

#[test]
fn twenty_tasks_with_overlapping_claims_never_hold_overlapping_claims_at_once() {
    let s = Swarm::new("");
    let mut tasks = Vec::new();
    for i in 0..24 {
        let file = format!("src/m{}/f{i}.rs", i % 5);
        let claim = if i % 3 == 0 {
            format!("src/m{}/*.rs", i % 5)
        } else {
            file.clone()
        };
        let deps: Vec<String> = if i >= 6 {
            vec![format!("T{}", i - 6)]
        } else {
            Vec::new()
        };
        let deps: Vec<&str> = deps.iter().map(String::as_str).collect();
        s.scenario(
            &format!("p:T{i}"),
            &format!(
                "mkdir -p src/m{m} && echo '// {i}' > {file} && sleep 0.05",
                m = i % 5
            ),
        );
        tasks.push(task(
            &format!("T{i}"),
            &[&claim],
            &deps,
            &format!("test -f {file}"),
        ));
    }
    let p = s.plan("p.toml", &plan("p", &tasks));
    let run = s.run(&["run", &p, "--max-parallel", "4", "--json"]).ok();
    let summary = run.json();
    assert_eq!(
        summary["succeeded"].as_array().expect("list").len(),
        24,
        "{}",
        run.stdout
    );
    // Replay the events: claims held at once never overlap, dependencies finish first.
    let plans = [atelier::swarm::plan::parse("p.toml", &plan("p", &tasks)).expect("plan")];
    let by_key: BTreeMap<String, atelier::swarm::plan::Task> = plans[0]
        .tasks
        .iter()
        .map(|t| (t.key.clone(), t.clone()))
        .collect();
    let mut held: BTreeMap<String, ()> = BTreeMap::new();
    let mut integrated = std::collections::BTreeSet::new();
    let mut max_held = 0;
    for e in s.events("r1") {
        match e {
            RunEvent::AttemptStarted { task, .. } => {
                let t = &by_key[&task];
                for d in &t.depends_on {
                    assert!(
                        integrated.contains(d),
                        "{task} started before {d} was integrated"
                    );
                }
                for other in held.keys() {
                    assert!(
                        !atelier::swarm::schedule::claims_overlap(t, &by_key[other]),
                        "{task} and {other} held overlapping claims"
                    );
                }
                held.insert(task, ());
                max_held = max_held.max(held.len());
            }
            RunEvent::ClaimsReleased { task, .. } => {
                held.remove(&task);
            }
            RunEvent::Integrated { task, .. } => {
                integrated.insert(task);
            }
            _ => {}
        }
    }
    assert!((2..=4).contains(&max_held), "parallelism used: {max_held}");
    let files = s
        .env
        .git(&["ls-tree", "-r", "--name-only", "atelier/runs/r1"]);
    assert_eq!(
        files.lines().filter(|l| l.starts_with("src/m")).count(),
        24,
        "{files}"
    );
}

#[test]
fn cross_plan_dependencies_run_in_order() {
    let s = Swarm::new("");
    s.scenario("a:T1", "echo one > src/one.rs");
    s.scenario("b:T1", "test -f src/one.rs && echo two > src/two.rs");
    let a = s.plan(
        "a.toml",
        &plan(
            "a",
            &[task("T1", &["src/one.rs"], &[], "test -f src/one.rs")],
        ),
    );
    let b = s.plan(
        "b.toml",
        &plan(
            "b",
            &[task("T1", &["src/two.rs"], &["a:T1"], "test -f src/two.rs")],
        ),
    );
    s.run(&["run", &b, &a]).ok();
    let files = s
        .env
        .git(&["ls-tree", "-r", "--name-only", "atelier/runs/r1"]);
    assert!(
        files.contains("src/one.rs") && files.contains("src/two.rs"),
        "{files}"
    );
    // a:T1 passed on its first attempt: a golden path, shown to the next task of its role.
    let prompt = s.prompt("b:T1", 1);
    assert!(
        prompt.contains("A worked example") && prompt.contains("+one"),
        "{prompt}"
    );
    assert!(!s.prompt("a:T1", 1).contains("A worked example"));
}
