//! What a test harness printed, read as per-test outcomes — only in the exact shapes the harness
//! prints, and only where it prints them, and checked against the harness's own summary.
//!
//! The code under test writes into the same stream as the harness (libtest prints a failing
//! test's captured stdout after its `FAILED` line; unittest's tests write to the stderr its
//! runner writes to; anything can print after the run). So a line that looks like a report is
//! not believed on its shape alone:
//! - the worst outcome read for a test wins (failed over skipped over passed): a later or a
//!   duplicate line never improves one ([`worst`]);
//! - libtest's outcome lines are read only in a test binary's result section (after `running N
//!   tests`, before its `failures:` / `---- NAME stdout ----` blocks and its `test result:`
//!   summary), and every binary's summary must count what was read;
//! - unittest's lines are read in the shape `name (dotted.id) ... RESULT` only, every
//!   `FAIL:` / `ERROR:` entry of its report marks its test failed, and `Ran N tests` and
//!   `FAILED (failures=…, errors=…)` must agree with what was read;
//! - pytest's short summary is read between its header and its final counts, which must agree;
//! - TAP's test points are read outside YAML blocks, and `# pass` / `# fail` / `# skipped` /
//!   `# todo` / `# cancelled` must agree.
//!
//! A report that disagrees with itself is `Err`: the reviewer cannot judge it (blocking for an
//! agent's change). What this cannot see: code that writes a complete, consistent report of its
//! own — every line and every summary — where the harness's would be, or a change that replaces
//! the harness; forging can still add tests that do not exist, never improve a real one.

use std::collections::BTreeMap;

use super::{Outcome, TestCase};

/// How bad an outcome is: failed over skipped over passed.
fn rank(o: Outcome) -> u8 {
    match o {
        Outcome::Passed => 0,
        Outcome::Skipped => 1,
        Outcome::Failed => 2,
    }
}

/// One case per test (file and name), in the order first read, with the worst outcome read for
/// it: a duplicate line never improves an outcome.
pub fn worst(tests: Vec<TestCase>) -> Vec<TestCase> {
    let mut at: BTreeMap<(Option<String>, String), usize> = BTreeMap::new();
    let mut out: Vec<TestCase> = Vec::new();
    for t in tests {
        match at.get(&(t.file.clone(), t.name.clone())) {
            Some(&i) => {
                if rank(t.outcome) > rank(out[i].outcome) {
                    out[i].outcome = t.outcome;
                }
            }
            None => {
                at.insert((t.file.clone(), t.name.clone()), out.len());
                out.push(t);
            }
        }
    }
    out
}

/// `N word` pieces of a summary (`1 passed; 0 failed`, `failures=1, errors=2`,
/// `1 failed, 2 passed in 0.1s`): word → N. The separator splits the pieces.
fn counts(s: &str, sep: char) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for piece in s.split(sep) {
        let piece = piece.trim();
        let (n, word) = if let Some((w, n)) = piece.split_once('=') {
            (n, w)
        } else if let Some((n, w)) = piece.split_once(' ') {
            (n, w)
        } else {
            continue;
        };
        let word = word.split(" in ").next().unwrap_or(word).trim();
        if let Ok(n) = n.trim().parse::<usize>() {
            *out.entry(word.to_string()).or_insert(0) += n;
        }
    }
    out
}

fn count(tests: &[TestCase], o: Outcome) -> usize {
    tests.iter().filter(|t| t.outcome == o).count()
}

/// One libtest binary's result section being read.
struct Block {
    expected: usize,
    tests: Vec<TestCase>,
    /// In its captured-output blocks (`failures:`, `successes:`, `---- NAME stdout ----`).
    captured: bool,
}

/// libtest's report, as `cargo test` prints it: `Running unittests src/lib.rs (…)` or
/// `Running tests/it.rs (…)` or `Doc-tests name` before each binary's block, then `running N
/// tests`, `test NAME ... ok | ignored | FAILED`, the captured output, and `test result: …. P
/// passed; F failed; I ignored; M measured; …`, which must count the lines read (see the
/// module's header). `Err` says why the report cannot be believed.
pub fn libtest(output: &str) -> Result<Vec<TestCase>, String> {
    let mut target: Option<String> = None;
    let mut block: Option<Block> = None;
    let mut out = Vec::new();
    for line in output.lines() {
        let t = line.trim_end();
        let trimmed = t.trim();
        // cargo's own lines (on its stderr, indented): a binary's report starts.
        let cargo = t.starts_with(' ')
            && (trimmed.starts_with("Doc-tests ")
                || (trimmed.starts_with("Running ") && trimmed.ends_with(')')));
        let running = t
            .strip_prefix("running ")
            .and_then(|r| r.strip_suffix(" tests").or_else(|| r.strip_suffix(" test")))
            .and_then(|n| n.parse::<usize>().ok());
        if block.as_ref().is_some_and(|b| !b.captured) && (cargo || running.is_some()) {
            return Err(format!(
                "a test binary's report ({}) is interrupted before its summary",
                target.as_deref().unwrap_or("?")
            ));
        }
        let Some(b) = block.as_mut() else {
            if !cargo {
                if let Some(n) = running {
                    block = Some(Block {
                        expected: n,
                        tests: Vec::new(),
                        captured: false,
                    });
                } else if t.starts_with("test result: ") {
                    return Err(
                        "a `test result:` summary is printed outside a test binary's report".into(),
                    );
                }
            } else if let Some(rest) = trimmed.strip_prefix("Running ") {
                let rest = rest.strip_prefix("unittests ").unwrap_or(rest);
                target = Some(rest.split(" (").next().unwrap_or(rest).trim().to_string());
            } else if let Some(name) = trimmed.strip_prefix("Doc-tests ") {
                target = Some(format!("doc-tests {}", name.trim()));
            }
            continue;
        };
        if let Some(summary) = t.strip_prefix("test result: ") {
            let c = counts(summary.split_once(". ").map_or("", |(_, s)| s), ';');
            let get = |w: &str| c.get(w).copied().unwrap_or(0);
            let read = (
                count(&b.tests, Outcome::Passed),
                count(&b.tests, Outcome::Failed),
                count(&b.tests, Outcome::Skipped),
            );
            let said = (get("passed"), get("failed"), get("ignored"));
            if read != said || b.expected != said.0 + said.1 + said.2 + get("measured") {
                return Err(format!(
                    "a test binary's summary ({}: `{}`) disagrees with the {} outcome line(s) read ({} passed, {} failed, {} ignored) of the {} test(s) it ran",
                    target.as_deref().unwrap_or("?"),
                    t.trim(),
                    b.tests.len(),
                    read.0,
                    read.1,
                    read.2,
                    b.expected
                ));
            }
            out.append(&mut b.tests);
            block = None;
            continue;
        }
        if t == "failures:" || t == "successes:" || (t.starts_with("---- ") && t.ends_with(" ----"))
        {
            b.captured = true;
        }
        if b.captured {
            continue;
        }
        let Some((name, result)) = t.strip_prefix("test ").and_then(|r| r.split_once(" ... "))
        else {
            continue;
        };
        let outcome = match result {
            "ok" => Outcome::Passed,
            r if r == "ignored" || r.starts_with("ignored, ") => Outcome::Skipped,
            r if r == "FAILED" || r.starts_with("FAILED (") => Outcome::Failed,
            _ => continue,
        };
        // libtest adds a test's mode to its name (`--list` does not) and pads a bench's name.
        let name = name.trim_end();
        let name = [" - should panic", " - compile fail", " - compile"]
            .iter()
            .find_map(|m| name.strip_suffix(m))
            .unwrap_or(name);
        b.tests.push(TestCase {
            name: name.to_string(),
            file: target.clone(),
            outcome,
        });
    }
    if block.is_some() {
        return Err(format!(
            "a test binary's report ({}) ends without its summary",
            target.as_deref().unwrap_or("?")
        ));
    }
    Ok(worst(out))
}

/// The tests `cargo test -- --list` names, as (target, name) the way [`libtest`] reads them:
/// cargo's `Running …` / `Doc-tests …` lines, then `NAME: test` per test. No test runs then, so
/// nothing the code under test prints while a test runs can be among them.
pub fn libtest_list(output: &str) -> Vec<(Option<String>, String)> {
    let mut target: Option<String> = None;
    let mut out = Vec::new();
    for line in output.lines() {
        let t = line.trim_end();
        let trimmed = t.trim();
        if t.starts_with(' ') {
            if let Some(rest) = trimmed.strip_prefix("Running ") {
                let rest = rest.strip_prefix("unittests ").unwrap_or(rest);
                target = Some(rest.split(" (").next().unwrap_or(rest).trim().to_string());
            } else if let Some(name) = trimmed.strip_prefix("Doc-tests ") {
                target = Some(format!("doc-tests {}", name.trim()));
            }
            continue;
        }
        if let Some(name) = t
            .strip_suffix(": test")
            .or_else(|| t.strip_suffix(": benchmark"))
        {
            out.push((target.clone(), name.to_string()));
        }
    }
    out
}

/// A unittest result word, exactly as its verbose runner prints it.
fn unittest_outcome(r: &str) -> Option<Outcome> {
    match r {
        "ok" => Some(Outcome::Passed),
        "expected failure" => Some(Outcome::Skipped),
        r if r.starts_with("skipped '") || r.starts_with("skipped \"") => Some(Outcome::Skipped),
        "FAIL" | "ERROR" | "unexpected success" => Some(Outcome::Failed),
        _ => None,
    }
}

/// `python3 -m unittest -v`: `test_x (pkg.mod.Class.test_x) ... ok`, the result possibly on the
/// next line after a docstring (`Doc line. ... ok`); `skipped '…'`, `expected failure`, `FAIL`,
/// `ERROR`, `unexpected success`. Python before 3.11 prints `(pkg.mod.Class)`: the name is
/// appended. Every `FAIL: …` / `ERROR: …` entry after a `=====` line marks its test failed; the
/// `Ran N tests` line and `FAILED (failures=F, errors=E)` must agree with what was read.
pub fn unittest(output: &str) -> Result<Vec<TestCase>, String> {
    let mut out = Vec::new();
    let mut pending: Option<String> = None;
    let mut entries = 0;
    let mut after_rule = false;
    let mut ran: Vec<(usize, Option<String>)> = Vec::new();
    let mut lines = output.lines().peekable();
    while let Some(line) = lines.next() {
        let rule = !line.is_empty() && line.chars().all(|c| c == '=');
        if std::mem::replace(&mut after_rule, rule) {
            let entry = line
                .strip_prefix("FAIL: ")
                .or_else(|| line.strip_prefix("ERROR: "));
            if let Some(id) = entry.and_then(unittest_id) {
                entries += 1;
                out.push(unittest_case(id, Outcome::Failed));
                continue;
            }
        }
        if let Some(n) = line
            .strip_prefix("Ran ")
            .and_then(|r| r.split_once(' '))
            .filter(|(_, r)| r.starts_with("test"))
            .and_then(|(n, _)| n.parse::<usize>().ok())
        {
            let status = lines.by_ref().find(|l| !l.trim().is_empty());
            ran.push((n, status.map(str::to_string)));
            continue;
        }
        let (desc, result) = match line.split_once(" ... ") {
            Some((d, r)) => (d, Some(r)),
            None => (line, None),
        };
        let id = unittest_id(desc).filter(|_| !desc.contains(") "));
        // The test a result is for: its own line's, or the one awaiting its result (after its
        // docstring's line, or after output the test wrote before the runner's word).
        let (id, result) = match (id, result) {
            (Some(id), None) => {
                pending = Some(id);
                continue;
            }
            (Some(id), Some(r)) => (Some(id), r),
            (None, Some(r)) => (pending.take(), r),
            (None, None) if unittest_outcome(line).is_none() => continue,
            (None, None) if pending.is_none() && ran.is_empty() => {
                return Err(format!(
                    "unittest's report has a result (`{line}`) no test is awaiting"
                ))
            }
            (None, None) => (pending.take(), line),
        };
        let Some(id) = id else { continue };
        match unittest_outcome(result) {
            Some(o) => out.push(unittest_case(id, o)),
            None => pending = Some(id),
        }
    }
    let out = worst(out);
    let fixture = |t: &&TestCase| {
        let last = t.name.rsplit('.').next().unwrap_or("");
        [
            "setUpClass",
            "tearDownClass",
            "setUpModule",
            "tearDownModule",
        ]
        .contains(&last)
    };
    let tests = out.iter().filter(|t| !fixture(t)).count();
    match ran.as_slice() {
        [] if out.is_empty() => Ok(out),
        [] => Err("unittest's report has no `Ran N tests` summary".into()),
        [(n, status)] => {
            let status = status.as_deref().unwrap_or("").trim();
            let c = counts(
                status
                    .split_once('(')
                    .map_or("", |(_, r)| r.trim_end_matches(')')),
                ',',
            );
            let bad =
                c.get("failures").copied().unwrap_or(0) + c.get("errors").copied().unwrap_or(0);
            let failed = out.iter().any(|t| t.outcome == Outcome::Failed);
            let skips = c.get("skipped").copied().unwrap_or(0)
                + c.get("expected failures").copied().unwrap_or(0);
            let shape = status == "OK"
                || status.starts_with("OK (")
                || status.starts_with("FAILED (")
                || status == "NO TESTS RAN";
            let skipped = count(&out, Outcome::Skipped);
            if !shape
                || *n != tests
                || bad != entries
                || skips != skipped
                || (status.starts_with("FAILED") && !failed)
            {
                Err(format!(
                    "unittest's summary (`Ran {n} tests`, `{status}`) disagrees with what was read: {tests} test(s), {entries} failure or error entr(ies)"
                ))
            } else {
                Ok(out)
            }
        }
        _ => Err("unittest's report has more than one `Ran N tests` summary".into()),
    }
}

fn unittest_case(id: String, outcome: Outcome) -> TestCase {
    let module = id.rsplitn(3, '.').nth(2).unwrap_or("");
    TestCase {
        file: (!module.is_empty()).then(|| format!("{}.py", module.replace('.', "/"))),
        name: id,
        outcome,
    }
}

/// The test id of a unittest description `name (dotted.id)`, possibly followed by a subtest's
/// parameters (` (i=1)`, ` [msg]`), if it is one.
fn unittest_id(line: &str) -> Option<String> {
    let (name, rest) = line.split_once(" (")?;
    let (inner, _) = rest.split_once(')')?;
    let word = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_alphanumeric() || c == '_' || c == '.')
    };
    if !word(name) || name.contains('.') || !word(inner) || !inner.contains('.') {
        return None;
    }
    Some(if inner.ends_with(&format!(".{name}")) {
        inner.to_string()
    } else {
        format!("{inner}.{name}")
    })
}

/// `pytest -rA`'s short summary, between its `short test summary info` header and the final
/// `== 1 failed, 2 passed in 0.1s ==` line: `PASSED path::test`, `FAILED path::test - …`,
/// `ERROR …`, `XFAIL path::test`, `XPASS …`, whose numbers must be the final line's. (Skipped
/// tests appear there by location, not by name; a test that passed at base and is skipped at
/// head is then reported as no longer run.)
pub fn pytest(output: &str) -> Result<Vec<TestCase>, String> {
    let mut parts = output.split("short test summary info");
    parts.next();
    let (Some(summary), None) = (parts.next(), parts.next()) else {
        return Err("pytest's report has not exactly one short test summary".into());
    };
    let mut out = Vec::new();
    let mut read: BTreeMap<&str, usize> = BTreeMap::new();
    let mut last = None;
    for line in summary.lines().skip(1) {
        if line.starts_with('=') && line.ends_with('=') {
            last = Some(line.trim_matches(|c| c == '=' || c == ' ').to_string());
            break;
        }
        let Some((word, rest)) = line.split_once(' ') else {
            continue;
        };
        let (outcome, key) = match word {
            "PASSED" => (Outcome::Passed, "passed"),
            "XFAIL" => (Outcome::Skipped, "xfailed"),
            "FAILED" => (Outcome::Failed, "failed"),
            "ERROR" => (Outcome::Failed, "errors"),
            "XPASS" => (Outcome::Failed, "xpassed"),
            _ => continue,
        };
        let id = rest.split(" - ").next().unwrap_or(rest);
        let Some((file, name)) = id.split_once("::").filter(|_| !id.contains(' ')) else {
            continue;
        };
        *read.entry(key).or_insert(0) += 1;
        out.push(TestCase {
            name: name.replace("::", "."),
            file: Some(file.to_string()),
            outcome,
        });
    }
    let Some(last) = last else {
        return Err("pytest's short test summary has no final counts".into());
    };
    let mut said = counts(&last, ',');
    if let Some(e) = said.remove("error") {
        said.insert("errors".into(), e);
    }
    let disagree = ["passed", "xfailed", "failed", "errors", "xpassed"]
        .iter()
        .find(|k| read.get(*k).copied().unwrap_or(0) != said.get(**k).copied().unwrap_or(0));
    match disagree {
        Some(k) => Err(format!(
            "pytest's final counts (`{last}`) disagree with the short summary's lines ({k})"
        )),
        None => Ok(worst(out)),
    }
}

/// `node --test --test-reporter=tap`: `ok N - name`, `not ok N - name`, `# SKIP` and `# TODO`
/// directives; subtests are indented and printed before their parent, whose own line (a
/// `describe`) is not a test: its children are named `parent > child`. YAML blocks (`---` …
/// `...`) are not read; the final `# pass`, `# fail`, `# cancelled`, `# skipped`, `# todo`
/// counts must agree with the tests read.
pub fn tap(output: &str) -> Result<Vec<TestCase>, String> {
    // (indent, name, outcome) of the lines read, children folded into their parents' names.
    let mut acc: Vec<(usize, String, Outcome)> = Vec::new();
    let mut yaml: Option<usize> = None;
    let mut said: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for line in output.lines() {
        let indent = line.len() - line.trim_start().len();
        let t = line.trim();
        if let Some(at) = yaml {
            if indent == at && t == "..." {
                yaml = None;
            }
            continue;
        }
        if t == "---" {
            yaml = Some(indent);
            continue;
        }
        if indent == 0 {
            if let Some((k, n)) = t.strip_prefix("# ").and_then(|r| r.split_once(' ')) {
                if let Ok(n) = n.parse::<usize>() {
                    said.entry(k.to_string()).or_default().push(n);
                }
            }
        }
        let (ok, rest) = if let Some(r) = t.strip_prefix("not ok ") {
            (false, r)
        } else if let Some(r) = t.strip_prefix("ok ") {
            (true, r)
        } else {
            continue;
        };
        let Some((number, desc)) = rest.split_once(" - ") else {
            continue;
        };
        if number.parse::<usize>().is_err() {
            continue;
        }
        let (name, directive) = split_directive(desc);
        let outcome = match (ok, directive) {
            (_, Some(_)) => Outcome::Skipped,
            (true, None) => Outcome::Passed,
            (false, None) => Outcome::Failed,
        };
        let first_child = acc.iter().position(|(i, _, _)| *i > indent);
        match first_child {
            Some(at) => {
                let children: Vec<_> = acc.drain(at..).collect();
                for (_, child, o) in children {
                    // A skipped group skips its children; a failing one fails by them.
                    let o = match outcome {
                        Outcome::Skipped => Outcome::Skipped,
                        _ => o,
                    };
                    acc.push((indent, format!("{name} > {child}"), o));
                }
            }
            None => acc.push((indent, name, outcome)),
        }
    }
    let tests: Vec<TestCase> = acc
        .into_iter()
        .map(|(_, name, outcome)| TestCase {
            name,
            file: None,
            outcome,
        })
        .collect();
    let keys = ["pass", "fail", "cancelled", "skipped", "todo"];
    if tests.is_empty() && keys.iter().all(|k| !said.contains_key(*k)) {
        return Ok(tests);
    }
    let mut get = |k: &str| match said.remove(k).as_deref() {
        Some([n]) => Ok(*n),
        None if k == "cancelled" || k == "todo" => Ok(0),
        _ => Err(format!("the TAP report has not exactly one `# {k}` count")),
    };
    let (pass, fail, cancelled) = (get("pass")?, get("fail")?, get("cancelled")?);
    let (skipped, todo) = (get("skipped")?, get("todo")?);
    let read = (
        count(&tests, Outcome::Passed),
        count(&tests, Outcome::Failed),
        count(&tests, Outcome::Skipped),
    );
    if read != (pass, fail + cancelled, skipped + todo) {
        return Err(format!(
            "the TAP report's counts (pass {pass}, fail {fail}, cancelled {cancelled}, skipped {skipped}, todo {todo}) disagree with the tests read ({} passed, {} failed, {} skipped)",
            read.0, read.1, read.2
        ));
    }
    Ok(worst(tests))
}

/// A TAP description and its `# SKIP` / `# TODO` directive (an escaped `\#` is part of the name).
fn split_directive(desc: &str) -> (String, Option<String>) {
    let bytes = desc.as_bytes();
    for (i, _) in desc.match_indices(" # ") {
        if i > 0 && bytes[i - 1] == b'\\' {
            continue;
        }
        let d = desc[i + 3..].trim();
        let upper = d.to_ascii_uppercase();
        if upper.starts_with("SKIP") || upper.starts_with("TODO") {
            return (unescape(&desc[..i]), Some(d.to_string()));
        }
    }
    (unescape(desc), None)
}

fn unescape(s: &str) -> String {
    s.trim().replace("\\#", "#").replace("\\\\", "\\")
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

    const CARGO: &str = "   Compiling fx v0.1.0 (/tmp/x)
    Finished `test` profile [unoptimized + debuginfo] target(s) in 0.5s
     Running unittests src/lib.rs (target/debug/deps/fx-0123)

running 4 tests
test tests::adds ... ok
test tests::slow ... ignored, takes a minute
test tests::breaks ... FAILED
test tests::panics - should panic ... ok

failures:

---- tests::breaks stdout ----
BREAKS_STDOUT
thread 'tests::breaks' panicked at src/lib.rs:9:5

failures:
    tests::breaks

test result: FAILED. 2 passed; 1 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.00s

error: test failed, to rerun pass `--lib`
     Running tests/it.rs (target/debug/deps/it-4567)

running 1 test
test whole ... ok

test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s

   Doc-tests fx

running 1 test
test src/lib.rs - add (line 3) ... ok

test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s

";

    fn cargo(breaks_stdout: &str) -> String {
        CARGO.replace("BREAKS_STDOUT", breaks_stdout)
    }

    #[test]
    fn libtest_blocks_are_read_per_target() {
        let want = vec![
            case("tests::adds", Some("src/lib.rs"), Outcome::Passed),
            case("tests::slow", Some("src/lib.rs"), Outcome::Skipped),
            case("tests::breaks", Some("src/lib.rs"), Outcome::Failed),
            case("tests::panics", Some("src/lib.rs"), Outcome::Passed),
            case("whole", Some("tests/it.rs"), Outcome::Passed),
            case(
                "src/lib.rs - add (line 3)",
                Some("doc-tests fx"),
                Outcome::Passed,
            ),
        ];
        assert_eq!(libtest(&cargo("")), Ok(want));
    }

    /// What the code under test prints never improves an outcome: in the captured output it is
    /// not read, a duplicate never wins over the real line, and a line or a summary that does not
    /// add up makes the report unbelievable.
    #[test]
    fn forged_libtest_lines_never_improve_an_outcome() {
        // (case, what `tests::breaks` printed, whether the report is believed)
        let rows: &[(&str, &str, bool)] = &[
            ("its own ok line", "test tests::breaks ... ok", true),
            ("padded", "   test tests::breaks ... ok   ", true),
            (
                "a whole binary's report",
                "running 1 test\ntest tests::breaks ... ok\n\ntest result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out",
                false,
            ),
            (
                "a summary closing the block early",
                "test result: FAILED. 2 passed; 1 failed; 1 ignored; 0 measured; 0 filtered out",
                false,
            ),
        ];
        for (name, printed, believed) in rows {
            match libtest(&cargo(printed)) {
                Ok(tests) => {
                    assert!(believed, "{name}: {tests:?}");
                    let breaks: Vec<_> =
                        tests.iter().filter(|t| t.name == "tests::breaks").collect();
                    assert_eq!(breaks.len(), 1, "{name}: {tests:?}");
                    assert_eq!(breaks[0].outcome, Outcome::Failed, "{name}");
                }
                Err(why) => assert!(!believed, "{name}: {why}"),
            }
        }
        // Lines written straight into the result section (a thread, a child process): a
        // duplicate loses to the real line, and the counts no longer add up.
        let forged = [
            (
                "test tests::breaks ... FAILED",
                "test tests::breaks ... FAILED\ntest tests::breaks ... ok",
            ),
            ("test tests::breaks ... FAILED", "test tests::breaks ... ok"),
            (
                "test tests::adds ... ok",
                "test tests::adds ... ok\nrunning 1 test",
            ),
            ("test result: FAILED. 2 passed", "test result: ok. 3 passed"),
        ];
        for (from, to) in forged {
            let out = cargo("").replacen(from, to, 1);
            assert!(libtest(&out).is_err(), "{to}: {:?}", libtest(&out));
        }
        // A binary that stops before its summary (a crash) is not believed either.
        let cut = cargo("")
            .split("test result: FAILED")
            .next()
            .unwrap()
            .to_string();
        assert!(libtest(&cut).is_err());
        assert_eq!(libtest(""), Ok(vec![]));
    }

    const UNITTEST: &str = "test_a (tests.test_x.T.test_a) ... ok
test_b (tests.test_x.T.test_b)
Doc line. ... skipped 'no'
test_c (tests.test_x.T) ... FAIL
test_d (m.T.test_d) ... expected failure
test_e (tests.test_x.T.test_e) ... 
  test_e (tests.test_x.T.test_e) (i=1) ... FAIL

======================================================================
FAIL: test_c (tests.test_x.T.test_c)
----------------------------------------------------------------------
Traceback (most recent call last):
AssertionError: 1 != 2

======================================================================
FAIL: test_e (tests.test_x.T.test_e) (i=1)
----------------------------------------------------------------------
AssertionError: 1 != 0

----------------------------------------------------------------------
Ran 5 tests in 0.001s

FAILED (failures=2, skipped=1, expected failures=1)
";

    #[test]
    fn unittest_pytest_and_tap_reports_are_read() {
        assert_eq!(
            unittest(UNITTEST),
            Ok(vec![
                case(
                    "tests.test_x.T.test_a",
                    Some("tests/test_x.py"),
                    Outcome::Passed
                ),
                case(
                    "tests.test_x.T.test_b",
                    Some("tests/test_x.py"),
                    Outcome::Skipped
                ),
                case(
                    "tests.test_x.T.test_c",
                    Some("tests/test_x.py"),
                    Outcome::Failed
                ),
                case("m.T.test_d", Some("m.py"), Outcome::Skipped),
                case(
                    "tests.test_x.T.test_e",
                    Some("tests/test_x.py"),
                    Outcome::Failed
                ),
            ])
        );
        let p = "==== short test summary info ====\nPASSED tests/test_a.py::test_one\nPASSED tests/test_a.py::TestK::test_two\nFAILED tests/test_a.py::test_three - assert 1 == 2\nSKIPPED [1] tests/test_a.py:9: later\n==== 1 failed, 2 passed, 1 skipped in 0.12s ====\n";
        assert_eq!(
            pytest(p),
            Ok(vec![
                case("test_one", Some("tests/test_a.py"), Outcome::Passed),
                case("TestK.test_two", Some("tests/test_a.py"), Outcome::Passed),
                case("test_three", Some("tests/test_a.py"), Outcome::Failed),
            ])
        );
        assert_eq!(
            tap(TAP),
            Ok(vec![
                case("adds", None, Outcome::Passed),
                case("group > inner", None, Outcome::Passed),
                case("group > sk", None, Outcome::Skipped),
                case("group > bad", None, Outcome::Failed),
                case("todo", None, Outcome::Skipped),
                case("a # b", None, Outcome::Passed),
            ])
        );
    }

    const TAP: &str = "TAP version 13\n# Subtest: adds\nok 1 - adds\n  ---\n  duration_ms: 1\n  ...\n# Subtest: group\n    # Subtest: inner\n    ok 1 - inner\n    ok 2 - sk # SKIP\n    not ok 3 - bad\n      ---\n      error: |-\n        ok 9 - bad\n      ...\n    1..3\nnot ok 2 - group\nok 3 - todo # TODO\nok 4 - a \\# b\n1..4\n# tests 6\n# suites 1\n# pass 3\n# fail 1\n# cancelled 0\n# skipped 1\n# todo 1\n# duration_ms 5.2\n";

    /// unittest, pytest and TAP: a line the code under test writes never improves an outcome;
    /// what does not fit the harness's shape or its summary makes the report unbelievable.
    #[test]
    fn forged_unittest_pytest_and_tap_lines_never_improve_an_outcome() {
        // unittest: the code writes ` ... ok\n` to the runner's stderr during test_c.
        let forged = UNITTEST.replace(
            "test_c (tests.test_x.T) ... FAIL\n",
            "test_c (tests.test_x.T) ...  ... ok\nFAIL\n",
        );
        let got = unittest(&forged).expect("believed: the FAIL entry names it");
        let c = got
            .iter()
            .find(|t| t.name == "tests.test_x.T.test_c")
            .unwrap();
        assert_eq!(c.outcome, Outcome::Failed);
        // (from, to): each makes the report disagree with its summary.
        let unbelievable = [
            // A forged ok for a test whose real line is lost, and its FAIL entry hidden.
            (
                "FAIL: test_c (tests.test_x.T.test_c)",
                "FAIL test_c (tests.test_x.T.test_c)",
            ),
            ("Ran 5 tests", "Ran 6 tests"),
            ("FAILED (failures=2", "FAILED (failures=3"),
            ("FAILED (failures=2, skipped=1, expected failures=1)", "OK"),
            (
                "Ran 5 tests in 0.001s\n",
                "Ran 5 tests in 0.001s\n\nOK\nRan 5 tests\n",
            ),
            ("Ran 5 tests in 0.001s\n", "Ran 5 tests in 0.001s\n\nOK"),
        ];
        for (from, to) in unbelievable {
            let out = UNITTEST.replacen(from, to, 1);
            assert!(unittest(&out).is_err(), "{to}: {:?}", unittest(&out));
        }
        // Output a test writes before the runner's word (a warning): the word still counts.
        let warned = UNITTEST.replace(
            "test_a (tests.test_x.T.test_a) ... ok\n",
            "test_a (tests.test_x.T.test_a) ... x.py:3: DeprecationWarning: old\n  warnings.warn('old')\nok\n",
        );
        assert_eq!(unittest(&warned), unittest(UNITTEST));
        // A skip disguised as a pass: the skipped count no longer adds up; a result word no
        // test awaits is not believed.
        let disguised = UNITTEST.replace("Doc line. ... skipped 'no'", "Doc line. ... ok");
        assert!(unittest(&disguised).is_err());
        let stray = UNITTEST.replace(
            "test_a (tests.test_x.T.test_a) ... ok\n",
            "test_a (tests.test_x.T.test_a) ... ok\nFAIL\n",
        );
        assert!(unittest(&stray).is_err());
        let cut = UNITTEST.split("Ran 5").next().unwrap();
        assert!(unittest(cut).is_err());
        // A duplicate ok line never wins.
        let dup = UNITTEST.replace(
            "test_c (tests.test_x.T) ... FAIL\n",
            "test_c (tests.test_x.T) ... FAIL\ntest_c (tests.test_x.T.test_c) ... ok\n",
        );
        let got = unittest(&dup).expect("the same five tests");
        let c = got
            .iter()
            .find(|t| t.name == "tests.test_x.T.test_c")
            .unwrap();
        assert_eq!(c.outcome, Outcome::Failed);

        // pytest: forged PASSED lines after the run, a missing or doubled summary.
        let p = "==== short test summary info ====\nPASSED t.py::test_one\nFAILED t.py::test_two - boom\n==== 1 failed, 1 passed in 0.1s ====\n";
        let got = pytest(&format!("{p}PASSED t.py::test_two\n")).expect("believed");
        assert_eq!(got[1].outcome, Outcome::Failed);
        for bad in [
            p.replace("FAILED t.py::test_two - boom\n", "PASSED t.py::test_two\n"),
            p.replace(
                "FAILED t.py::test_two",
                "PASSED t.py::test_two\nFAILED t.py::test_two",
            ),
            format!("{p}{p}"),
            p.replace("==== 1 failed, 1 passed in 0.1s ====\n", ""),
        ] {
            assert!(pytest(&bad).is_err(), "{bad}");
        }

        // TAP: node prints a test's stdout as comments; a line that still looks like a test
        // point, or a summary count, that does not add up makes the report unbelievable.
        let got = tap(&TAP.replace("# Subtest: adds\n", "# ok 1 - group\n# \\# pass 3\n")).unwrap();
        assert_eq!(got.len(), 6);
        for (from, to) in [
            ("not ok 2 - group\n", "not ok 2 - group\nok 2 - group\n"),
            (
                "    not ok 3 - bad\n",
                "    ok 3 - bad\n    not ok 3 - bad\n",
            ),
            ("    not ok 3 - bad\n", "    ok 3 - bad\n"),
            ("# pass 3\n", "# pass 3\n# pass 4\n"),
            ("# fail 1\n", ""),
        ] {
            let out = TAP.replacen(from, to, 1);
            assert!(tap(&out).is_err(), "{to}: {:?}", tap(&out));
        }
        let dup = TAP.replace("ok 1 - adds\n", "ok 1 - adds\nnot ok 1 - adds\n");
        assert!(tap(&dup).is_err(), "{:?}", tap(&dup));
    }

    #[test]
    fn the_worst_outcome_read_for_a_test_wins() {
        use Outcome::*;
        let rows = [
            (vec![Failed, Passed], Failed),
            (vec![Passed, Failed], Failed),
            (vec![Skipped, Passed], Skipped),
            (vec![Passed, Skipped, Failed, Passed], Failed),
            (vec![Passed, Passed], Passed),
        ];
        for (seen, want) in rows {
            let tests = seen.iter().map(|o| case("x", None, *o)).collect();
            assert_eq!(worst(tests), vec![case("x", None, want)], "{seen:?}");
        }
    }
}
