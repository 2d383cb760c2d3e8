//! The `tests` reviewer's pure core: what a test run printed, read as per-test outcomes, and the
//! inventory at base compared with the inventory at head. Running the suites is
//! `agent::suites`' (IO); here the runs arrive as text,
//! read by [`reports`] (only where and as each harness prints its report, and only if it adds up).
//!
//! The comparison judges what ran, not how the change is spelled: a test that passed at base is
//! a blocking finding at head when it fails, is skipped or ignored, or is no longer reported —
//! unless a new test that passes at head takes its place as a rename (see [`compare`]). A suite
//! that ran tests at base and cannot run, or runs none, at head is blocking too.
//!
//! What it cannot see: a test that still passes but no longer checks anything (an assertion
//! macro shadowed by one that does nothing, an early `return` inside a test's body, an
//! assertion loosened). Only test strength (mutants the base's tests kill) sees those.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

pub mod reports;

use super::{finding, Finding, Severity};
pub use reports::{libtest, pytest, tap, unittest};

/// The test ecosystems the reviewer runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Ecosystem {
    Rust,
    Python,
    JavaScript,
}

impl Ecosystem {
    pub const ALL: [Ecosystem; 3] = [Ecosystem::Rust, Ecosystem::Python, Ecosystem::JavaScript];

    pub fn as_str(self) -> &'static str {
        match self {
            Ecosystem::Rust => "rust",
            Ecosystem::Python => "python",
            Ecosystem::JavaScript => "javascript",
        }
    }

    /// Where a test's name ends: `a::b::adds`, `pkg.mod.Class.test_x`, `group > it`.
    fn separator(self) -> &'static str {
        match self {
            Ecosystem::Rust => "::",
            Ecosystem::Python => ".",
            Ecosystem::JavaScript => " > ",
        }
    }
}

/// The ecosystems a tree holds, from its file paths: Rust with a `Cargo.toml` at the root;
/// Python with a `test_*.py` or `*_test.py` file; JavaScript with a `package.json` at the root or
/// a `*.test.js` / `*.test.mjs` / `*.test.cjs` file, or a `.js` file under a `test/` folder.
pub fn ecosystems<'a>(paths: impl IntoIterator<Item = &'a str>) -> Vec<Ecosystem> {
    let mut found = BTreeSet::new();
    for p in paths {
        let name = p.rsplit('/').next().unwrap_or(p);
        if p == "Cargo.toml" {
            found.insert(Ecosystem::Rust);
        }
        if name.ends_with(".py") && (name.starts_with("test_") || name.ends_with("_test.py")) {
            found.insert(Ecosystem::Python);
        }
        let js = [".js", ".mjs", ".cjs"].iter().any(|e| name.ends_with(e));
        let in_test_dir = p.split('/').rev().skip(1).any(|d| d == "test");
        let vendored = p.split('/').any(|d| d == "node_modules");
        if p == "package.json" || (js && (name.contains(".test.") || in_test_dir) && !vendored) {
            found.insert(Ecosystem::JavaScript);
        }
    }
    found.into_iter().collect()
}

/// How one test ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Passed,
    /// Ignored, skipped, a to-do, an expected failure: it did not run to a pass.
    Skipped,
    Failed,
}

/// One test's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TestCase {
    /// Its full name within its file or target (`tests::adds`, `tests.test_a.T.test_x`).
    pub name: String,
    /// The file or test target it is in, where the runner says (`src/lib.rs`, `tests/it.rs`).
    pub file: Option<String>,
    pub outcome: Outcome,
}

/// One ecosystem's suite, run once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SuiteRun {
    pub ecosystem: Ecosystem,
    pub tests: Vec<TestCase>,
    /// Why the suite did not run to its end (a build that failed, a time-out, an output too long
    /// to read whole, a program missing), if it did not.
    pub failure: Option<String>,
}

/// How a program that ran a suite ended, as the runner saw it.
#[derive(Debug, Clone, Default)]
pub struct Ran {
    pub code: Option<i32>,
    pub output: String,
    pub timed_out: bool,
    pub truncated: bool,
    /// The runner's own reason when the program could not start.
    pub not_started: Option<String>,
}

/// Reads a suite's output into per-test outcomes (`reports`: the worst outcome read for a test
/// wins), and decides whether the suite ran to its end and its report can be believed: not when
/// it timed out, its output was cut, it could not start, its report disagrees with its own
/// summary, or it exited non-zero while no test was read as failing (a build that failed, a
/// crash, a failing test whose report was forged). Python's exit code 5 means "no tests ran",
/// which is a result (none), not a failure.
pub fn read_run(ecosystem: Ecosystem, ran: &Ran) -> SuiteRun {
    let read = match ecosystem {
        Ecosystem::Rust => libtest(&ran.output),
        Ecosystem::Python if ran.output.contains("short test summary info") => pytest(&ran.output),
        Ecosystem::Python => unittest(&ran.output),
        Ecosystem::JavaScript => tap(&ran.output),
    };
    let (tests, unbelievable) = match read {
        Ok(t) => (t, None),
        Err(why) => (Vec::new(), Some(why)),
    };
    let failing = tests.iter().any(|t| t.outcome == Outcome::Failed);
    let tail = || tail_of(&ran.output);
    let failure = if let Some(why) = &ran.not_started {
        Some(why.clone())
    } else if ran.timed_out {
        Some(format!("it timed out{}", tail()))
    } else if ran.truncated {
        Some("its output was longer than the reviewer reads".to_string())
    } else if ecosystem == Ecosystem::Rust && ran.output.contains("error: could not compile") {
        Some(format!("it did not build{}", tail()))
    } else if let Some(why) = unbelievable {
        Some(format!("its report cannot be believed: {why}"))
    } else {
        match ran.code {
            Some(0) => None,
            Some(5) if ecosystem == Ecosystem::Python => None,
            Some(_) if failing => None,
            Some(c) if tests.is_empty() => Some(format!("it exited with code {c}{}", tail())),
            Some(c) => Some(format!(
                "it exited with code {c} while no test was read as failing: its report cannot be believed{}",
                tail()
            )),
            None => Some(format!("it was killed by a signal{}", tail())),
        }
    };
    SuiteRun {
        ecosystem,
        tests,
        failure,
    }
}

/// A Rust suite's outcomes checked against what `cargo test -- --list` names (`list`: that
/// command's run): every test listed must have an outcome, and no outcome may name a test that is
/// not listed — else the report is not believed (a failure: blocking). A suite that already did
/// not run to its end is left as it is.
pub fn check_listed(mut run: SuiteRun, list: &Ran) -> SuiteRun {
    if run.failure.is_some() {
        return run;
    }
    if list.code != Some(0) || list.timed_out || list.truncated || list.not_started.is_some() {
        run.failure = Some(format!(
            "`cargo test -- --list` did not list the tests{}",
            tail_of(&list.output)
        ));
        return run;
    }
    let listed: BTreeSet<(Option<String>, String)> =
        reports::libtest_list(&list.output).into_iter().collect();
    let read: BTreeSet<(Option<String>, String)> = run
        .tests
        .iter()
        .map(|t| (t.file.clone(), t.name.clone()))
        .collect();
    let show = |s: Vec<&(Option<String>, String)>| {
        s.iter()
            .take(5)
            .map(|(_, n)| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let unlisted: Vec<_> = read.difference(&listed).collect();
    let unread: Vec<_> = listed.difference(&read).collect();
    if !unlisted.is_empty() {
        run.failure = Some(format!(
            "its report cannot be believed: it names test(s) `cargo test -- --list` does not: {}",
            show(unlisted)
        ));
    } else if !unread.is_empty() {
        run.failure = Some(format!(
            "its report cannot be believed: test(s) `cargo test -- --list` names have no outcome: {}",
            show(unread)
        ));
    }
    run
}

/// `: …` and the last lines of `output` (at most 400 characters), or nothing.
fn tail_of(output: &str) -> String {
    let t = output.trim();
    if t.is_empty() {
        return String::new();
    }
    let chars: Vec<char> = t.chars().collect();
    let tail: String = chars[chars.len().saturating_sub(400)..]
        .iter()
        .map(|c| if c.is_control() { ' ' } else { *c })
        .collect();
    format!(": …{tail}")
}

/// Compares the suites run at base with the same suites at head (the base's ecosystems), one
/// blocking finding per test that passed at base and does not pass at head:
/// - it fails, or is skipped or ignored, at head (same file and name);
/// - it is not reported at head at all, and no new test takes its place. A new test (absent at
///   base) that passes at head takes the place of one vanished test: first one with the same
///   last name segment (a test moved to another file or module), then one in the same file and
///   module (a test renamed in place); each new test takes one place only.
///
/// A suite that ran tests at base and cannot run at head, or reports none there, is one blocking
/// finding (its tests are not listed one by one then). A suite that could not run at base leaves
/// the reviewer unable to judge: [`could_not_run`] (blocking for an agent's change). New tests,
/// and tests that failed or were skipped at base, are never findings.
pub fn compare(
    reviewer: &str,
    agent_origin: bool,
    base: &[SuiteRun],
    head: &[SuiteRun],
) -> Vec<Finding> {
    let mut out = Vec::new();
    for b in base {
        let b = &SuiteRun {
            tests: reports::worst(b.tests.clone()),
            ..b.clone()
        };
        let eco = b.ecosystem;
        let label = eco.as_str();
        if let Some(why) = &b.failure {
            out.push(could_not_run(
                reviewer,
                agent_origin,
                &format!("the {label} suite did not run at base: {why}"),
            ));
            continue;
        }
        let passed: Vec<&TestCase> = b
            .tests
            .iter()
            .filter(|t| t.outcome == Outcome::Passed)
            .collect();
        if passed.is_empty() {
            continue;
        }
        let h = head.iter().find(|h| h.ecosystem == eco);
        let suite_gone = match h {
            None => Some("it is no longer found at head".to_string()),
            Some(SuiteRun {
                failure: Some(why), ..
            }) => Some(format!("it could not run at head: {why}")),
            Some(h) if h.tests.is_empty() => Some("it reports no test at head".to_string()),
            _ => None,
        };
        if let Some(why) = suite_gone {
            out.push(finding(
                reviewer,
                Severity::Blocking,
                "tests-not-run",
                None,
                None,
                format!(
                    "the {label} suite ran {} passing test(s) at base, {}: {}",
                    passed.len(),
                    why,
                    names(&passed)
                ),
                "the change stops the tests from running: undo what does (a build error, a runner or configuration, a collector), or propose it as a person",
            ));
            continue;
        }
        let h = h.expect("a head suite");
        out.extend(compare_suite(reviewer, eco, &passed, b, h));
    }
    out
}

fn compare_suite(
    reviewer: &str,
    eco: Ecosystem,
    passed: &[&TestCase],
    base: &SuiteRun,
    head: &SuiteRun,
) -> Vec<Finding> {
    let key = |t: &TestCase| (t.file.clone(), t.name.clone());
    // The worst outcome read for a test wins: a duplicate never improves one.
    let mut at_head: BTreeMap<_, Outcome> = BTreeMap::new();
    for t in &head.tests {
        let o = at_head.entry(key(t)).or_insert(t.outcome);
        if *o == Outcome::Passed || t.outcome == Outcome::Failed {
            *o = t.outcome;
        }
    }
    let at_base: BTreeSet<_> = base.tests.iter().map(key).collect();
    let mut out = Vec::new();
    let mut vanished = Vec::new();
    for t in passed {
        match at_head.get(&key(t)).copied() {
            Some(Outcome::Passed) => {}
            Some(o) => out.push(test_finding(
                reviewer,
                eco,
                t,
                if o == Outcome::Skipped {
                    "passed at base and is skipped or ignored at head"
                } else {
                    "passed at base and fails at head"
                },
            )),
            None => vanished.push(*t),
        }
    }
    // New passing tests, each able to take one vanished test's place.
    let mut new: Vec<Option<&TestCase>> = head
        .tests
        .iter()
        .filter(|t| t.outcome == Outcome::Passed && !at_base.contains(&key(t)))
        .map(Some)
        .collect();
    let sep = eco.separator();
    let last = |t: &TestCase| t.name.rsplit(sep).next().unwrap_or(&t.name).to_string();
    let container = |t: &TestCase| {
        (
            t.file.clone(),
            t.name
                .rsplit_once(sep)
                .map(|(c, _)| c.to_string())
                .unwrap_or_default(),
        )
    };
    let mut unmatched = Vec::new();
    for v in &vanished {
        if let Some(slot) = new
            .iter_mut()
            .find(|n| n.is_some_and(|n| last(n) == last(v)))
        {
            *slot = None;
        } else {
            unmatched.push(*v);
        }
    }
    for v in unmatched {
        match new
            .iter_mut()
            .find(|n| n.is_some_and(|n| container(n) == container(v)))
        {
            Some(slot) => *slot = None,
            None => out.push(test_finding(
                reviewer,
                eco,
                v,
                "passed at base and no longer runs at head (no new test takes its place)",
            )),
        }
    }
    out
}

fn test_finding(reviewer: &str, eco: Ecosystem, t: &TestCase, what: &str) -> Finding {
    finding(
        reviewer,
        Severity::Blocking,
        "test-stopped",
        t.file.as_deref().filter(|f| !f.starts_with("doc-tests ")),
        None,
        format!("{} test `{}`{} {what}", eco.as_str(), t.name, in_file(t)),
        "restore the test (whatever stops it: an attribute, a cfg, a skip, a macro, a runner or configuration, an early exit), or propose its removal as a person",
    )
}

fn in_file(t: &TestCase) -> String {
    t.file
        .as_deref()
        .map(|f| format!(" ({f})"))
        .unwrap_or_default()
}

/// At most ten names, then how many more.
fn names(tests: &[&TestCase]) -> String {
    let mut s: Vec<String> = tests
        .iter()
        .take(10)
        .map(|t| format!("`{}`", t.name))
        .collect();
    if tests.len() > 10 {
        s.push(format!("and {} more", tests.len() - 10));
    }
    s.join(", ")
}

/// One mutant cargo-mutants tested, and whether the tests caught it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mutant {
    /// What it is, independent of where its function sits in the file: the file, the function,
    /// the mutant's place relative to the function's first line, the replacement.
    pub key: String,
    /// cargo-mutants' own name for it (`src/lib.rs:2:7: replace + with * in add`).
    pub name: String,
    pub caught: bool,
}

/// Reads cargo-mutants' `mutants.out/outcomes.json`: the mutants it built (unviable ones, which
/// do not build, are left out), caught when a test failed or timed out. An unmutated baseline
/// that did not pass is an error: then nothing was measured.
pub fn mutants(outcomes_json: &str) -> Result<Vec<Mutant>, String> {
    let v: serde_json::Value = serde_json::from_str(outcomes_json)
        .map_err(|e| format!("cargo-mutants' outcomes.json does not parse: {e}"))?;
    let outcomes = v["outcomes"]
        .as_array()
        .ok_or("cargo-mutants' outcomes.json has no outcomes")?;
    let mut out = Vec::new();
    for o in outcomes {
        let summary = o["summary"].as_str().unwrap_or("");
        if o["scenario"] == "Baseline" {
            if summary != "Success" {
                return Err(format!(
                    "the unmutated tree did not pass its tests ({summary})"
                ));
            }
            continue;
        }
        let m = &o["scenario"]["Mutant"];
        let caught = match summary {
            "CaughtMutant" | "Timeout" => true,
            "MissedMutant" => false,
            _ => continue,
        };
        let line = |p: &serde_json::Value| p["line"].as_i64().unwrap_or(0);
        let fn_start = line(&m["function"]["span"]["start"]);
        let key = format!(
            "{} {} +{}:{}..+{}:{} {} {}",
            m["file"].as_str().unwrap_or("?"),
            m["function"]["function_name"].as_str().unwrap_or("?"),
            line(&m["span"]["start"]) - fn_start,
            m["span"]["start"]["column"].as_i64().unwrap_or(0),
            line(&m["span"]["end"]) - fn_start,
            m["span"]["end"]["column"].as_i64().unwrap_or(0),
            m["genre"].as_str().unwrap_or("?"),
            m["replacement"].as_str().unwrap_or("?"),
        );
        out.push(Mutant {
            key,
            name: m["name"].as_str().unwrap_or("?").to_string(),
            caught,
        });
    }
    Ok(out)
}

/// Test strength: every mutant the base's tests catch that the head's tests miss (the same
/// mutant, of code present at both) is a blocking finding. Mutants of code the change rewrote
/// have no counterpart and are not compared. A run that measured nothing at base leaves the
/// reviewer unable to judge ([`could_not_run`]); at head, where the base measured, it blocks.
pub fn compare_mutants(
    reviewer: &str,
    agent_origin: bool,
    base: &Result<Vec<Mutant>, String>,
    head: &Result<Vec<Mutant>, String>,
) -> Vec<Finding> {
    let base = match base {
        Ok(b) => b,
        Err(why) => {
            return vec![could_not_run(
                reviewer,
                agent_origin,
                &format!("mutation testing did not run at base: {why}"),
            )]
        }
    };
    let head = match head {
        Ok(h) => h,
        Err(why) if base.iter().any(|m| m.caught) => {
            return vec![finding(
                reviewer,
                Severity::Blocking,
                "mutants-not-run",
                None,
                None,
                format!("mutation testing ran at base and did not at head: {why}"),
                "the change stops the tests from being measured: undo what does, or propose it as a person",
            )]
        }
        Err(_) => return Vec::new(),
    };
    let at_head: BTreeMap<&str, bool> = head.iter().map(|m| (m.key.as_str(), m.caught)).collect();
    base.iter()
        .filter(|m| m.caught && at_head.get(m.key.as_str()) == Some(&false))
        .map(|m| {
            let file = m.key.split(' ').next().filter(|f| *f != "?");
            finding(
                reviewer,
                Severity::Blocking,
                "tests-weakened",
                file,
                None,
                format!(
                    "the mutant `{}` is caught by the base's tests and missed by the head's: the tests still run, but no longer check it",
                    m.name
                ),
                "restore what the tests checked (an assertion, a macro, a comparison), or propose the weakening as a person",
            )
        })
        .collect()
}

/// The finding for a `tests` reviewer that could not judge the change (no toolchain, an export
/// that failed, a time-out at base): blocking for an agent's change — a change must not escape
/// the reviewer by making it fail — and major for a person's.
pub fn could_not_run(reviewer: &str, agent_origin: bool, why: &str) -> Finding {
    finding(
        reviewer,
        if agent_origin {
            Severity::Blocking
        } else {
            Severity::Major
        },
        "reviewer-failed",
        None,
        None,
        format!("the tests reviewer could not run the suites: {why}"),
        "run the review again where the toolchains are installed; a change an agent wrote is blocked until the reviewer has judged it",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(name: &str, file: Option<&str>, outcome: Outcome) -> TestCase {
        TestCase {
            name: name.into(),
            file: file.map(str::to_string),
            outcome,
        }
    }

    fn suite(eco: Ecosystem, tests: Vec<TestCase>) -> SuiteRun {
        SuiteRun {
            ecosystem: eco,
            tests,
            failure: None,
        }
    }

    const CARGO: &str = "     Running unittests src/lib.rs (target/debug/deps/fx-0123)

running 2 tests
test tests::adds ... ok
test tests::breaks ... FAILED

failures:

---- tests::breaks stdout ----
test tests::breaks ... ok

failures:
    tests::breaks

test result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out
";

    const PASSING: &str = "     Running unittests src/lib.rs (target/debug/deps/fx-0123)

running 1 test
test tests::adds ... ok

test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out
";

    #[test]
    fn a_suite_that_did_not_run_to_its_end_is_a_failure() {
        let ran = |code, output: &str, timed_out| Ran {
            code,
            output: output.into(),
            timed_out,
            ..Ran::default()
        };
        let cases: &[(Ecosystem, Ran, bool)] = &[
            (Ecosystem::Rust, ran(Some(0), CARGO, false), false),
            (Ecosystem::Rust, ran(Some(101), CARGO, false), false),
            (Ecosystem::Rust, ran(Some(0), PASSING, false), false),
            // A non-zero exit while every test read passed: the report is not the whole story.
            (Ecosystem::Rust, ran(Some(101), PASSING, false), true),
            (
                Ecosystem::Rust,
                ran(Some(0), &PASSING.replace("1 passed", "2 passed"), false),
                true,
            ),
            (
                Ecosystem::Rust,
                ran(Some(101), "error: could not compile `fx`", false),
                true,
            ),
            (Ecosystem::Rust, ran(None, "", true), true),
            (Ecosystem::Rust, ran(Some(0), "", false), false),
            (
                Ecosystem::Python,
                ran(Some(5), "NO TESTS RAN", false),
                false,
            ),
            (Ecosystem::Python, ran(Some(1), "ImportError", false), true),
            (Ecosystem::JavaScript, ran(None, "", false), true),
        ];
        for (eco, r, fails) in cases {
            let s = read_run(*eco, r);
            assert_eq!(s.failure.is_some(), *fails, "{eco:?} {r:?}: {s:?}");
        }
        let cut = Ran {
            code: Some(0),
            truncated: true,
            ..Ran::default()
        };
        assert!(read_run(Ecosystem::Rust, &cut).failure.is_some());
    }

    /// What cargo lists without running a test is what the report must name: a test read that
    /// is not listed (a forged report of a test that does not exist), or one listed and not read,
    /// makes the report unbelievable.
    #[test]
    fn a_rust_report_must_name_the_tests_cargo_lists() {
        let list = |names: &[&str], code| {
            Ran {
            code: Some(code),
            output: format!(
                "     Running unittests src/lib.rs (target/debug/deps/fx-0123)\n{}\n{} tests, 0 benchmarks\n",
                names.iter().map(|n| format!("{n}: test\n")).collect::<String>(),
                names.len()
            ),
            ..Ran::default()
        }
        };
        let run = || {
            read_run(
                Ecosystem::Rust,
                &Ran {
                    code: Some(0),
                    output: PASSING.into(),
                    ..Ran::default()
                },
            )
        };
        assert_eq!(run().failure, None);
        let rows: &[(&[&str], i32, bool)] = &[
            (&["tests::adds"], 0, false),
            (&[], 0, true),
            (&["tests::adds", "tests::other"], 0, true),
            (&["tests::other"], 0, true),
            (&["tests::adds"], 101, true),
        ];
        for (names, code, fails) in rows {
            let checked = check_listed(run(), &list(names, *code));
            assert_eq!(checked.failure.is_some(), *fails, "{names:?}: {checked:?}");
        }
    }

    /// (case, base tests, head tests, the names blocked)
    type Row = (
        &'static str,
        Vec<TestCase>,
        Vec<TestCase>,
        &'static [&'static str],
    );

    #[test]
    fn passing_tests_that_stop_passing_block_and_renames_do_not() {
        use Outcome::*;
        let lib = Some("src/lib.rs");
        let base = || {
            vec![
                case("tests::adds", lib, Passed),
                case("tests::subtracts", lib, Passed),
                case("tests::slow", lib, Skipped),
            ]
        };
        let rows: Vec<Row> = vec![
            ("unchanged", base(), base(), &[]),
            (
                "a new test",
                base(),
                [base(), vec![case("tests::multiplies", lib, Passed)]].concat(),
                &[],
            ),
            (
                "renamed in place",
                base(),
                vec![
                    case("tests::adds_two", lib, Passed),
                    case("tests::subtracts", lib, Passed),
                ],
                &[],
            ),
            (
                "renamed in place beside a new test",
                base(),
                vec![
                    case("tests::adds_two_numbers", lib, Passed),
                    case("tests::adds_zero", lib, Passed),
                    case("tests::subtracts", lib, Passed),
                ],
                &[],
            ),
            (
                "moved to another file",
                base(),
                vec![
                    case("adds", Some("tests/it.rs"), Passed),
                    case("tests::subtracts", lib, Passed),
                ],
                &[],
            ),
            (
                "ignored",
                base(),
                vec![
                    case("tests::adds", lib, Skipped),
                    case("tests::subtracts", lib, Passed),
                ],
                &["tests::adds"],
            ),
            (
                "failing",
                base(),
                vec![
                    case("tests::adds", lib, Failed),
                    case("tests::subtracts", lib, Passed),
                ],
                &["tests::adds"],
            ),
            (
                "gone",
                base(),
                vec![case("tests::subtracts", lib, Passed)],
                &["tests::adds"],
            ),
            (
                "two gone, one new: one place only",
                base(),
                vec![case("tests::other", lib, Passed)],
                &["tests::subtracts"],
            ),
            (
                "a new test that is skipped takes no place",
                base(),
                vec![
                    case("tests::adds_two", lib, Skipped),
                    case("tests::subtracts", lib, Passed),
                ],
                &["tests::adds"],
            ),
            (
                "a new test elsewhere, another name, takes no place",
                base(),
                vec![
                    case("other", Some("tests/it.rs"), Passed),
                    case("tests::subtracts", lib, Passed),
                ],
                &["tests::adds"],
            ),
            (
                "a skipped test at base may go",
                base(),
                vec![
                    case("tests::adds", lib, Passed),
                    case("tests::subtracts", lib, Passed),
                ],
                &[],
            ),
        ];
        for (name, b, h, want) in rows {
            let found = compare(
                "t",
                true,
                &[suite(Ecosystem::Rust, b)],
                &[suite(Ecosystem::Rust, h)],
            );
            let blocked: Vec<String> = found
                .iter()
                .filter(|f| f.severity == Severity::Blocking)
                .map(|f| f.message.split('`').nth(1).unwrap_or("?").to_string())
                .collect();
            assert_eq!(blocked, want.to_vec(), "{name}: {found:#?}");
        }
    }

    #[test]
    fn a_suite_that_stops_running_blocks_once() {
        let b = vec![suite(
            Ecosystem::Python,
            vec![case("t.T.test_a", Some("t.py"), Outcome::Passed)],
        )];
        let none = vec![suite(Ecosystem::Python, vec![])];
        let failed = vec![SuiteRun {
            failure: Some("it timed out".into()),
            ..suite(Ecosystem::Python, vec![])
        }];
        for head in [none, failed, vec![]] {
            let found = compare("t", false, &b, &head);
            assert_eq!(found.len(), 1, "{found:#?}");
            assert_eq!(found[0].severity, Severity::Blocking);
            assert_eq!(found[0].category, "tests-not-run");
            assert!(
                found[0].message.contains("t.T.test_a"),
                "{}",
                found[0].message
            );
        }
        // A base that could not run leaves nothing judged: an agent's change is blocked.
        let broken = vec![SuiteRun {
            failure: Some("it did not build".into()),
            ..suite(Ecosystem::Rust, vec![])
        }];
        let found = compare("t", true, &broken, &[]);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].severity, Severity::Blocking);
        assert_eq!(found[0].category, "reviewer-failed");
        let found = compare("t", false, &broken, &[]);
        assert_eq!(found[0].severity, Severity::Major);
        // A failure to run blocks an agent's change, never only revises it.
        assert_eq!(could_not_run("t", true, "x").severity, Severity::Blocking);
        assert_eq!(could_not_run("t", false, "x").severity, Severity::Major);
    }

    fn outcome(line: i64, fn_line: i64, replacement: &str, summary: &str) -> serde_json::Value {
        serde_json::json!({
            "scenario": {"Mutant": {
                "name": format!("src/lib.rs:{line}:7: replace + with {replacement} in add"),
                "file": "src/lib.rs",
                "function": {"function_name": "add", "span": {"start": {"line": fn_line, "column": 1}}},
                "span": {"start": {"line": line, "column": 7}, "end": {"line": line, "column": 8}},
                "replacement": replacement,
                "genre": "BinaryOperator"
            }},
            "summary": summary
        })
    }

    fn outcomes(rows: Vec<serde_json::Value>) -> String {
        let mut all = vec![serde_json::json!({"scenario": "Baseline", "summary": "Success"})];
        all.extend(rows);
        serde_json::json!({ "outcomes": all }).to_string()
    }

    #[test]
    fn a_mutant_the_base_catches_and_the_head_misses_blocks() {
        let base = mutants(&outcomes(vec![
            outcome(2, 1, "-", "CaughtMutant"),
            outcome(2, 1, "*", "MissedMutant"),
            outcome(2, 1, "/", "Unviable"),
        ]))
        .expect("read");
        assert_eq!(base.len(), 2, "unviable mutants are left out");
        // The same code four lines lower at head (something added above it): the same mutants.
        let weakened = mutants(&outcomes(vec![
            outcome(6, 5, "-", "MissedMutant"),
            outcome(6, 5, "*", "MissedMutant"),
        ]));
        let found = compare_mutants("t", true, &Ok(base.clone()), &weakened);
        assert_eq!(found.len(), 1, "{found:#?}");
        assert_eq!(found[0].severity, Severity::Blocking);
        assert!(
            found[0].message.contains("replace + with - in add"),
            "{}",
            found[0].message
        );
        let kept = mutants(&outcomes(vec![outcome(6, 5, "-", "Timeout")]));
        assert!(compare_mutants("t", true, &Ok(base.clone()), &kept).is_empty());
        // A head that cannot be measured blocks; a base that cannot leaves nothing judged.
        let failed: Result<Vec<Mutant>, String> = Err("it timed out".into());
        let f = compare_mutants("t", false, &Ok(base.clone()), &failed);
        assert_eq!(f[0].severity, Severity::Blocking);
        let f = compare_mutants("t", true, &failed, &Ok(base));
        assert_eq!(f[0].category, "reviewer-failed");
        let broken =
            serde_json::json!({"outcomes": [{"scenario": "Baseline", "summary": "Failure"}]});
        assert!(mutants(&broken.to_string()).is_err());
    }

    #[test]
    fn ecosystems_are_found_by_their_files() {
        let e = |paths: &[&str]| ecosystems(paths.iter().copied());
        assert_eq!(e(&["Cargo.toml", "src/lib.rs"]), [Ecosystem::Rust]);
        assert_eq!(e(&["crates/a/Cargo.toml"]), []);
        assert_eq!(e(&["tests/test_x.py"]), [Ecosystem::Python]);
        assert_eq!(e(&["x_test.py", "util.py"]), [Ecosystem::Python]);
        assert_eq!(e(&["test/a.js"]), [Ecosystem::JavaScript]);
        assert_eq!(e(&["src/a.test.mjs"]), [Ecosystem::JavaScript]);
        assert_eq!(e(&["node_modules/x/test/a.js"]), []);
        assert_eq!(e(&["package.json"]), [Ecosystem::JavaScript]);
        assert_eq!(e(&["src/app.js", "README.md"]), []);
    }
}
