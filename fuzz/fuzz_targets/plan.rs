//! Swarm plan files (`plans/*.toml`), checked together as `atelier plan check` does: the input is
//! split at NUL bytes into up to three files. Parsing, validating and scheduling never panic;
//! task keys are plan-qualified; and a plan set with no refusal schedules every task exactly
//! once, after everything it depends on.
#![no_main]

use std::collections::{BTreeSet, HashMap};

use atelier::swarm::{self, plan};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let files: Vec<(String, String)> = text
        .splitn(3, '\0')
        .enumerate()
        .map(|(i, t)| (format!("plans/p{i}.toml"), t.to_string()))
        .collect();
    for (f, t) in &files {
        if let Ok(p) = plan::parse(f, t) {
            for task in &p.tasks {
                assert_eq!(task.key, format!("{}:{}", p.id, task.id));
                assert!(task.depends_on.iter().all(|d| d.contains(':')));
            }
        }
    }
    let roles: BTreeSet<String> = ["implementer", "tester"].map(String::from).into();
    let Ok(report) = swarm::check(&files, &roles) else {
        return;
    };
    if !report.refusals.is_empty() {
        return;
    }
    let mut wave_of: HashMap<&str, usize> = HashMap::new();
    for (i, wave) in report.waves.iter().enumerate() {
        for key in wave {
            assert!(wave_of.insert(key, i).is_none(), "{key} scheduled twice");
        }
    }
    assert_eq!(wave_of.len(), report.tasks);
    let plans: Vec<plan::Plan> = files
        .iter()
        .map(|(f, t)| plan::parse(f, t).expect("parsed above"))
        .collect();
    for task in plans.iter().flat_map(|p| &p.tasks) {
        for dep in &task.depends_on {
            assert!(wave_of[dep.as_str()] < wave_of[task.key.as_str()]);
        }
    }
});
