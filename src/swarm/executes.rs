//! What a check runs, as opposed to what it reads: the files a contract check runs, and those a
//! gauntlet step runs or reads as configuration, found by the judge surface's reading of shell
//! commands (`governance::review::surface::derive`, the panel's own): scripts given to an
//! interpreter or on its standard input, programs started by their path, modules run with
//! `-m` or imported by inline code that asserts nothing itself, recipes of the runners, and
//! what those scripts run in turn. A file it only names as its subject (`grep -q ok
//! src/calc.py`, `sh -n x.sh`) is the code being checked. A worker that may change what its
//! check runs can make the check pass: `in_reach` refuses such plans before any worker starts,
//! and the scrutiny validator applies the same reading to what a run changed.
//!
//! Pure: callers pass the files at the run's base, a reader of their text, and the gauntlet.

use crate::governance::review::surface::{self, Lookup};
use crate::governance::Code;
use crate::swarm::plan::{Plan, Refusal};

/// The files `command` runs (a contract check) or, for a gauntlet step (`step`), runs or reads
/// as configuration, each with why; `lookup` reads the scripts it follows at the base.
pub fn executed(command: &str, step: bool, lookup: Lookup) -> Vec<(String, String)> {
    let via = if step {
        surface::Reach::Step
    } else {
        surface::Reach::Check
    };
    surface::derive(&[(String::new(), command.to_string(), via)], lookup)
        .into_iter()
        .map(|j| (j.path, j.why))
        .collect()
}

/// A reader of the base's files: a file's text, `None` when no text file is there.
pub type Reader<'a> = Box<dyn Fn(&str) -> Option<String> + 'a>;

/// What `in_reach` needs besides the plans: the files at the base the run would start from, a
/// reader of their text, and the gauntlet's steps (`(name, command)`).
pub struct Reach<'a> {
    pub files: Vec<String>,
    pub gauntlet: Vec<(String, String)>,
    pub lookup: Reader<'a>,
}

impl Reach<'_> {
    /// No files and no gauntlet: nothing is in reach (plans checked on their own).
    pub fn none() -> Reach<'static> {
        Reach {
            files: Vec::new(),
            gauntlet: Vec::new(),
            lookup: Box::new(|_| None),
        }
    }
}

/// Refuses each check or gauntlet step that runs a file existing at the base that a task of
/// `plans` claims: that task's worker could make the check pass by editing it. A file a task
/// adds is its deliverable (a check that runs it runs the work), so only files already there
/// count, as in the scrutiny validator.
pub fn in_reach(plans: &[Plan], reach: &Reach) -> Vec<Refusal> {
    let tasks: Vec<_> = plans.iter().flat_map(|p| p.tasks.iter()).collect();
    let claimer = |file: &str| -> Option<&str> {
        if !reach.files.iter().any(|f| f == file) {
            return None;
        }
        tasks
            .iter()
            .find(|t| t.claims(file))
            .map(|t| t.key.as_str())
    };
    let lookup: Lookup = &*reach.lookup;
    let mut refusals = Vec::new();
    for plan in plans {
        for task in &plan.tasks {
            for check in &task.contract.checks {
                for (file, _) in executed(check, false, lookup) {
                    let Some(by) = claimer(&file) else { continue };
                    refusals.push(Refusal {
                        code: Code::CheckInReach,
                        file: plan.file.clone(),
                        task: Some(task.id.clone()),
                        field: Some("contract.checks".into()),
                        message: format!(
                            "the check `{check}` runs {file}, which task {by} may change: its worker could make the check pass. \
                             Assert in the check itself (`python3 -c 'import calc; assert calc.sub(5, 3) == 2'`), run a test file \
                             the task adds or no task claims, or take {file} out of the task's `files`"
                        ),
                    });
                }
            }
        }
    }
    for (step, command) in &reach.gauntlet {
        for (file, _) in executed(command, true, lookup) {
            let Some(by) = claimer(&file) else { continue };
            let plan = plans
                .iter()
                .find(|p| p.tasks.iter().any(|t| t.key == by))
                .map_or(String::new(), |p| p.file.clone());
            refusals.push(Refusal {
                code: Code::CheckInReach,
                file: plan,
                task: by.rsplit_once(':').map(|(_, t)| t.to_string()),
                field: Some("files".into()),
                message: format!(
                    "gauntlet step {step} (`{command}`, atelier.toml) runs or reads {file}, which this task claims: \
                     its worker could make every check pass. Take {file} out of the task's `files` \
                     (change it in a proposal of its own), or change the step"
                ),
            });
        }
    }
    refusals
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runs(command: &str) -> Vec<String> {
        let lookup = |p: &str| (p == "tests/check.sh").then(|| "sh tests/lib.sh\n".to_string());
        executed(command, false, &lookup)
            .into_iter()
            .map(|(p, _)| p)
            .collect()
    }

    #[test]
    fn what_a_check_runs() {
        for c in [
            "bash -c 'sh tests/check.sh'",
            "sh \"$PWD/tests//./check.sh\"",
            "env -u HOME sh tests/check.sh",
            "timeout -s KILL 30 sh tests/check.sh",
            "sh -o errexit tests/check.sh",
            "sh < tests/check.sh",
            "if sh tests/check.sh; then exit 0; else exit 1; fi",
            "{ sh tests/check.sh; }",
        ] {
            assert_eq!(runs(c), ["tests/check.sh", "tests/lib.sh"], "{c}");
        }
        assert_eq!(runs("./verify && grep -q x a.rs"), ["verify"]);
        assert!(runs("make check").contains(&"Makefile".to_string()));
        assert!(runs("python3 -c 'import tools.verify'").contains(&"tools/verify.py".to_string()));
        assert!(runs("node -e \"require('./verify')\"").contains(&"verify.js".to_string()));
        assert!(runs("python3 -m verify").contains(&"verify.py".to_string()));
        // What a check names as its subject is the code being checked.
        assert!(runs("grep -q 'def sub' src/calc.py").is_empty());
        assert!(runs("sh -n tests/check.sh").is_empty());
        // Inline code that asserts judges by its own text: what it imports is under test.
        assert!(
            runs("PYTHONPATH=src python3 -c 'import calc; assert calc.sub(5, 3) == 2'").is_empty()
        );
        assert!(runs(
            "node -e \"const c = require('./calc'); require('assert').equal(c.sub(5, 3), 2)\""
        )
        .is_empty());
    }
}
