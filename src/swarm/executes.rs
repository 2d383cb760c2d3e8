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
    /// The symbolic links among `files`, each with the path it points at in the repository.
    pub links: Vec<(String, String)>,
    pub gauntlet: Vec<(String, String)>,
    pub lookup: Reader<'a>,
}

impl Reach<'_> {
    /// No files and no gauntlet: nothing is in reach (plans checked on their own).
    pub fn none() -> Reach<'static> {
        Reach {
            files: Vec::new(),
            links: Vec::new(),
            gauntlet: Vec::new(),
            lookup: Box::new(|_| None),
        }
    }

    /// The files at the base a path the reader found stands for: itself, the files a glob
    /// (`tests/*.sh`, `tests/{a,b}.sh`) matches, and what a symbolic link on the way points at.
    pub fn files_for(&self, judged: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut todo = vec![judged.to_string()];
        while let Some(p) = todo.pop() {
            if out.contains(&p) || out.len() > 1000 {
                continue;
            }
            for (link, target) in &self.links {
                if p == *link {
                    todo.push(target.clone());
                } else if let Some(rest) = p.strip_prefix(&format!("{link}/")) {
                    todo.push(format!("{target}/{rest}"));
                }
            }
            if p.contains(['*', '?', '[', '{']) {
                if let Ok(g) = globset::GlobBuilder::new(&p)
                    .literal_separator(true)
                    .build()
                {
                    let m = g.compile_matcher();
                    out.extend(self.files.iter().filter(|f| m.is_match(f)).cloned());
                }
            }
            out.push(p);
        }
        out.retain(|f| self.files.contains(f));
        out.sort();
        out.dedup();
        out
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
    let runs = |command: &str, step: bool| -> Vec<String> {
        let mut files: Vec<String> = executed(command, step, lookup)
            .into_iter()
            .flat_map(|(f, _)| reach.files_for(&f))
            .collect();
        files.dedup();
        files
    };
    let mut refusals = judges_claimed(plans, reach);
    for plan in plans {
        for task in &plan.tasks {
            for check in &task.contract.checks {
                for file in runs(check, false) {
                    let Some(by) = claimer(&file) else { continue };
                    refusals.push(Refusal {
                        code: Code::CheckInReach,
                        file: plan.file.clone(),
                        task: Some(task.id.clone()),
                        field: Some("contract.checks".into()),
                        message: format!(
                            "the check `{check}` runs {file}, which task {by} may change: its worker could make the check pass. \
                             Assert in the check itself (in Python, with your module and its folder: \
                             `PYTHONPATH=src python3 -c 'import calc; assert calc.sub(5, 3) == 2'`), run a test file \
                             the task adds or no task claims, or take {file} out of the task's `files`"
                        ),
                    });
                }
            }
        }
    }
    for (step, command) in &reach.gauntlet {
        for file in runs(command, true) {
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

/// Refuses a task that claims a file at the base that judges every change in any repository
/// (`surface::BUILTIN`: a `conftest.py`, `pytest.ini`, `.cargo/config.toml`, `build.rs`, CI):
/// the test runners and builds run it whatever the checks say, so its worker could make them
/// pass, and the scrutiny validator would refuse the run's change to it anyway.
fn judges_claimed(plans: &[Plan], reach: &Reach) -> Vec<Refusal> {
    let judges: Vec<globset::GlobMatcher> = surface::BUILTIN
        .iter()
        .filter_map(|g| {
            globset::GlobBuilder::new(g)
                .literal_separator(true)
                .build()
                .ok()
        })
        .map(|g| g.compile_matcher())
        .collect();
    let mut out = Vec::new();
    for plan in plans {
        for task in &plan.tasks {
            for file in reach.files.iter().filter(|f| task.claims(f)) {
                if judges.iter().any(|j| j.is_match(file)) {
                    out.push(Refusal {
                        code: Code::CheckInReach,
                        file: plan.file.clone(),
                        task: Some(task.id.clone()),
                        field: Some("files".into()),
                        message: format!(
                            "the task claims {file}, which the test runners or the build run whatever the checks are: its worker could make them pass. \
                             Leave it out of the task's `files` (claim by name the files the task should change, not a folder that holds it) \
                             and change {file} in a proposal of its own"
                        ),
                    });
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// Whether `plan check` refuses `check` for a task claiming `src/**` and `tests/**`, in a
    /// repository whose scripts run nothing but say they passed.
    fn refused(check: &str) -> bool {
        let plan = crate::swarm::plan::parse(
            "p.toml",
            &format!(
                "[plan]\nid = \"p\"\ntitle = \"t\"\n[[task]]\nid = \"A\"\ntitle = \"t\"\nrole = \"r\"\ngoal = \"g\"\nfiles = [\"src/**\", \"tests/**\"]\n[task.contract]\ncriteria = [\"c\"]\nchecks = [{}]\n",
                toml::Value::String(check.into())
            ),
        )
        .expect("plan");
        let texts: BTreeMap<&str, &str> = BTreeMap::from([
            ("tests/check.sh", "exit 0\n"),
            ("tests/check.js", "process.exit(0)\n"),
            ("tests/verify.py", "pass\n"),
            ("tests/x.awk", "BEGIN { exit 0 }\n"),
            ("src/judge.py", "pass\n"),
            ("src/calc.py", "def sub(a, b):\n    return a - b\n"),
            ("ci/wrap.sh", "exec \"$@\"\n"),
            ("Makefile", "test:\n\tsh tests/check.sh\n"),
            ("web/Makefile", "lint:\n\ttrue\n"),
            ("runner", "tests/check.sh"),
            ("tlink", "tests"),
            ("tests/Makefile", "check:\n\tsh check.sh\n"),
            ("src/bin/check.rs", "fn main() {}\n"),
            ("src/main.rs", "fn main() {}\n"),
        ]);
        let reach = Reach {
            files: texts.keys().map(|k| k.to_string()).collect(),
            links: vec![
                ("runner".into(), "tests/check.sh".into()),
                ("tlink".into(), "tests".into()),
            ],
            gauntlet: Vec::new(),
            lookup: Box::new(move |p: &str| texts.get(p).map(|t| t.to_string())),
        };
        !in_reach(&[plan], &reach).is_empty()
    }

    #[test]
    fn a_check_that_runs_what_its_task_claims_is_refused_however_it_is_written() {
        let missed: Vec<&str> = [
            // Options and their values, clustered flags.
            "bash -ec 'sh tests/check.sh'",
            "bash -lc 'sh tests/check.sh'",
            "sh -ceu 'sh tests/check.sh'",
            "python3 -u tests/verify.py",
            "python3 -O tests/verify.py",
            "sh -u tests/check.sh",
            "bash -euo pipefail tests/check.sh",
            "sh +x tests/check.sh",
            // Lines, here-documents, globs, variables, substitutions.
            "set -e\nsh tests/check.sh",
            "sh <<EOF\nsh tests/check.sh\nEOF",
            "sh tests/*.sh",
            "sh tests/che?k.sh",
            "sh tests/{check,x}.sh",
            "for f in tests/*.sh; do sh $f; done",
            "D=tests; sh $D/check.sh",
            "sh \"$(pwd)/tests/check.sh\"",
            "test \"$(sh tests/check.sh)\" = ok",
            // Programs that run their arguments, or what a pipe feeds them.
            "eval 'sh tests/check.sh'",
            "echo tests/check.sh | xargs sh",
            "find tests -name check.sh -exec sh {} \\;",
            "cat tests/check.sh | sh",
            "cat tests/check.sh | bash -s",
            "setsid sh tests/check.sh",
            "flock /tmp/l sh tests/check.sh",
            "chrt 1 sh tests/check.sh",
            "strace -o /dev/null sh tests/check.sh",
            "script -qc 'sh tests/check.sh' /dev/null",
            "su -c 'sh tests/check.sh'",
            "busybox sh tests/check.sh",
            "env -S 'sh tests/check.sh'",
            "sh ci/wrap.sh sh tests/check.sh",
            "python3.12 tests/verify.py",
            "pypy3 tests/verify.py",
            "node -p \"require('./tests/check')\"",
            "awk -f tests/x.awk",
            // Inline code whose verdict is a claimed module's.
            "PYTHONPATH=src python3 -c 'import judge'",
            "python3 -c 'from tests import verify'",
            "python3 -c 'import tests.verify  # assert'",
            "python3 -c 'print(\"assert\"); import tests.verify'",
            // Links to what is claimed.
            "sh runner",
            "sh tlink/check.sh",
            // Files loaded first, scripts on standard input with arguments, positional
            // parameters, working directories, text used as code, compiled programs.
            "BASH_ENV=tests/check.sh bash -c true",
            "env BASH_ENV=tests/check.sh bash -c true",
            "ENV=tests/check.sh sh -i -c true",
            "NODE_OPTIONS=--require=./tests/check.js node -e 'process.exit(0)'",
            "PYTHONSTARTUP=tests/verify.py python3 -i",
            "sh -s arg < tests/check.sh",
            "python3 /dev/stdin < tests/verify.py",
            "cat tests/check.sh | sh -s arg",
            "sh -c 'sh \"$1\"' _ tests/check.sh",
            "set -- tests/check.sh; sh \"$1\"",
            "find tests -name check.sh | xargs sh",
            "env -C tests sh check.sh",
            "make --directory=tests check",
            "sh $'tests/check.sh'",
            "trap 'sh tests/check.sh' EXIT",
            "python3 -m pytest -p tests.verify",
            "python3 -c 'exec(open(\"tests/verify.py\").read())'",
            "cargo run --bin check",
            "cargo run -q",
        ]
        .into_iter()
        .filter(|c| !refused(c))
        .collect();
        assert!(missed.is_empty(), "not refused: {missed:#?}");
    }

    #[test]
    fn a_claim_over_what_every_test_run_loads_is_refused() {
        let plan = |files: &str| {
            crate::swarm::plan::parse(
                "p.toml",
                &format!("[plan]\nid = \"p\"\ntitle = \"t\"\n[[task]]\nid = \"A\"\ntitle = \"t\"\nrole = \"r\"\ngoal = \"g\"\nfiles = [{files}]\n[task.contract]\ncriteria = [\"c\"]\nchecks = [\"python3 -m pytest -q\"]\n"),
            )
            .expect("plan")
        };
        let reach = Reach {
            files: vec!["tests/conftest.py".into(), "tests/test_calc.py".into()],
            ..Reach::none()
        };
        let r = in_reach(&[plan("\"tests/**\"")], &reach);
        assert_eq!(r.len(), 1, "{r:?}");
        assert!(
            r[0].message.contains("the task claims tests/conftest.py"),
            "{}",
            r[0].message
        );
        assert!(in_reach(&[plan("\"tests/test_calc.py\"")], &reach).is_empty());
    }

    #[test]
    fn a_check_of_the_work_is_not_refused() {
        let refused: Vec<&str> = [
            "cargo test",
            "python3 -m pytest -q",
            "grep -q 'def sub' src/calc.py",
            "sh -n tests/check.sh",
            "PYTHONPATH=src python3 -c 'import calc; assert calc.sub(5, 3) == 2'",
            "node -e \"process.exit(require('./src/calc').sub(5,3)===2?0:1)\"",
            "python3 -c 'import src.calc as c, sys; sys.exit(c.sub(5,3)!=2)'",
            "make -C web lint",
            "node --check src/calc.js",
        ]
        .into_iter()
        .filter(|c| refused(c))
        .collect();
        assert!(refused.is_empty(), "refused: {refused:#?}");
    }

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
