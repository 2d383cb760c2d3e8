//! The `tests-tamper` built-in reviewer: a change that weakens the tests that judge it. Every
//! finding blocks.
//!
//! Heuristics on the text at base and head, per language (Rust, Python, JavaScript/TypeScript)
//! and for the CI scripts:
//! - test functions removed (fewer at head than at base, naming the missing ones; a test that
//!   moved to another file of the change is not missing), test files removed or moved out of the
//!   test tree;
//! - assertions removed, commented out, or changed (a different expected value, a different
//!   number: tolerances and thresholds); an assertion is the whole macro or call, over several
//!   lines if it spans them, compared without whitespace. Two changes are not weakening: a
//!   rename (the test reads the same with identifiers renamed one for one, each a local both
//!   versions declare or a name renamed in the whole file), and an assertion made exact (a
//!   check of no equality, not compound, replaced by an equality of two different sides that
//!   names everything it checked: `assert!(v.contains(x))` → `assert_eq!(v, [x])`);
//! - tests disabled (`#[ignore]`, `#[should_panic]`, a `cfg` that is never true, pytest's skip
//!   and xfail marks, `.skip`/`.only`/`xit` in JavaScript) on a test that existed at base;
//! - an early `return` added inside a test that existed at base;
//! - a CI script that no longer runs the tests.
//!
//! Adding tests or assertions is never a finding.
//!
//! Here: [`check`] and its rules, with the language and text helpers they share. The test
//! functions a file declares are found in `test_fns`, its assertions in `assertions`, and the
//! changes to an assertion that do not weaken it are recognised in `not_weakening`.

mod assertions;
mod not_weakening;
mod test_fns;

use super::{finding, ChangeView, FileChange, Finding, Severity};
use assertions::{assertions, depth_change, normalize, numbers, subject, units_minus, Unit};
use not_weakening::{enclosing, renamed, shape, strengthens, tokens, FileWords, Shape};
use std::collections::HashMap;
use test_fns::{target_after, tests_in, Target};

const CATEGORY: &str = "tests-tamper";
const HINT: &str = "restore the test/assertion, or propose the change as a person with the reason";

/// The attribute that marks a test module (spelled in two pieces so that the source's own
/// test-module split, see tests/tidy.rs, does not see it here).
const CFG_TEST: &str = concat!("#[cfg(", "test)]");

/// Commands that run a test suite, in a CI script.
const TEST_COMMANDS: &[&str] = &[
    "cargo test",
    "cargo nextest",
    "pytest",
    "npm test",
    "npm run test",
    "yarn test",
    "pnpm test",
    "go test",
];

/// `cfg` predicates that are never true (`#[cfg(FALSE)]` and its kin).
const NEVER_CFGS: &[&str] = &[
    "any()",
    "not(all())",
    "FALSE",
    "false",
    "never",
    "disabled",
    "off",
    "skip",
    "ignore",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lang {
    Rust,
    Python,
    Js,
}

impl Lang {
    fn of(path: &str) -> Option<Lang> {
        let (_, ext) = file_name(path).rsplit_once('.')?;
        match ext {
            "rs" => Some(Lang::Rust),
            "py" => Some(Lang::Python),
            "js" | "ts" | "jsx" | "tsx" | "mjs" | "cjs" | "mts" | "cts" => Some(Lang::Js),
            _ => None,
        }
    }

    fn comment(self) -> &'static str {
        match self {
            Lang::Python => "#",
            Lang::Rust | Lang::Js => "//",
        }
    }
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// A path in the test tree: under `tests/` (or `test/`, `__tests__/`), or named like a test file.
fn is_test_path(path: &str) -> bool {
    let name = file_name(path);
    let in_tests_dir = path
        .split('/')
        .rev()
        .skip(1)
        .any(|c| c == "tests" || c == "test" || c == "__tests__");
    in_tests_dir
        || name == "tests.rs"
        || name.ends_with("_test.rs")
        || name.ends_with("_tests.rs")
        || (name.starts_with("test_") && name.ends_with(".py"))
        || name.ends_with("_test.py")
        || name == "conftest.py"
        || name.contains(".test.")
        || name.contains(".spec.")
}

fn is_ci_path(path: &str) -> bool {
    path.starts_with(".ci/")
        || (path.starts_with(".github/workflows/")
            && (path.ends_with(".yml") || path.ends_with(".yaml")))
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

fn ident_at(s: &str) -> String {
    s.chars().take_while(|c| is_ident(*c)).collect()
}

/// The first string literal's contents in `s`.
fn first_string(s: &str) -> Option<&str> {
    let start = s.find(['"', '\'', '`'])?;
    let q = s[start..].chars().next()?;
    let rest = &s[start + 1..];
    rest.find(q).map(|end| &rest[..end])
}

/// At most 80 characters of a line, for a message.
fn shown(line: &str) -> String {
    let t = line.trim();
    if t.chars().count() <= 80 {
        t.to_string()
    } else {
        format!("{}…", t.chars().take(80).collect::<String>())
    }
}

/// What the change adds, across all its files: the tests and assertions that appear somewhere,
/// so that one that moved between files is not counted as removed.
struct Moves {
    /// Test name → files that gained it.
    tests: HashMap<String, Vec<String>>,
    /// Assertion keys files gained.
    assertions: HashMap<String, usize>,
}

fn moves(files: &[FileChange]) -> Moves {
    let mut m = Moves {
        tests: HashMap::new(),
        assertions: HashMap::new(),
    };
    for f in files {
        let (Some(lang), Some(head)) = (Lang::of(&f.path), f.head.as_deref()) else {
            continue;
        };
        let base = f.base.as_deref().unwrap_or("");
        let before: Vec<String> = tests_in(lang, base).into_iter().map(|t| t.1).collect();
        for (_, name) in tests_in(lang, head) {
            if !before.contains(&name) {
                m.tests.entry(name).or_default().push(f.path.clone());
            }
        }
        for u in units_minus(&assertions(lang, head), &assertions(lang, base)) {
            *m.assertions.entry(u.key).or_default() += 1;
        }
    }
    m
}

pub fn check(reviewer: &str, change: &ChangeView) -> Vec<Finding> {
    let moved = moves(change.files);
    let base_tests: std::collections::HashSet<String> = change
        .files
        .iter()
        .filter_map(|f| Some(tests_in(Lang::of(&f.path)?, f.base.as_deref()?)))
        .flatten()
        .map(|t| t.1)
        .collect();
    let mut out = Vec::new();
    let mut push = |file: &str, line: Option<u32>, message: String| {
        out.push(finding(
            reviewer,
            Severity::Blocking,
            CATEGORY,
            Some(file),
            line,
            message,
            HINT,
        ));
    };
    for f in change.files {
        if is_ci_path(&f.path) {
            ci(f, &mut push);
        }
        let Some(lang) = Lang::of(&f.path) else {
            continue;
        };
        if f.removed() {
            removed_file(f, lang, change.files, &moved, &mut push);
            continue;
        }
        let base = f.base.as_deref().unwrap_or("");
        let head = f.head.as_deref().unwrap_or("");
        removed_tests(f, lang, base, head, &moved, &mut push);
        changed_assertions(f, lang, base, head, &moved, &mut push);
        disabled_tests(f, lang, base, head, &base_tests, &mut push);
        if lang == Lang::Rust {
            early_returns(f, base, head, &mut push);
        }
    }
    out
}

type Push<'p> = dyn FnMut(&str, Option<u32>, String) + 'p;

/// A test file removed (or moved out of the test tree).
fn removed_file(f: &FileChange, lang: Lang, files: &[FileChange], moved: &Moves, push: &mut Push) {
    let base = f.base.as_deref().unwrap_or("");
    let tests = tests_in(lang, base);
    let test_path = is_test_path(&f.path);
    if !(test_path || base.contains(CFG_TEST) || !tests.is_empty()) {
        return;
    }
    // A test may live anywhere that runs tests; one under the test tree must stay in it.
    let fits = |dest: &str| is_test_path(dest) || !test_path;
    let twin = files
        .iter()
        .find(|g| g.added() && g.head.as_deref() == Some(base));
    if let Some(twin) = twin {
        if fits(&twin.path) {
            return;
        }
        push(
            &f.path,
            None,
            format!(
                "test file {} moved out of the test tree to {}, where its tests no longer run",
                f.path, twin.path
            ),
        );
        return;
    }
    let all_moved = !tests.is_empty()
        && tests.iter().all(|(_, name)| {
            moved
                .tests
                .get(name)
                .is_some_and(|dests| dests.iter().any(|d| fits(d)))
        });
    if all_moved {
        return;
    }
    push(
        &f.path,
        None,
        format!(
            "test file {} removed ({} test{})",
            f.path,
            tests.len(),
            if tests.len() == 1 { "" } else { "s" }
        ),
    );
}

/// Fewer tests at head than at base.
fn removed_tests(
    f: &FileChange,
    lang: Lang,
    base: &str,
    head: &str,
    moved: &Moves,
    push: &mut Push,
) {
    let before = tests_in(lang, base);
    let after = tests_in(lang, head);
    if after.len() >= before.len() {
        return;
    }
    let mut left: Vec<&str> = after.iter().map(|t| t.1.as_str()).collect();
    let mut missing = Vec::new();
    let mut moved_out = 0;
    for (line, name) in &before {
        if let Some(at) = left.iter().position(|n| n == name) {
            left.swap_remove(at);
        } else if moved
            .tests
            .get(name)
            .is_some_and(|d| d.iter().any(|p| *p != f.path))
        {
            moved_out += 1;
        } else {
            missing.push((*line, name));
        }
    }
    if before.len() - after.len() <= moved_out {
        return;
    }
    if missing.is_empty() {
        push(
            &f.path,
            None,
            format!(
                "{} has {} tests at head, {} at base",
                f.path,
                after.len(),
                before.len()
            ),
        );
    }
    for (line, name) in missing {
        push(
            &f.path,
            Some(line),
            format!("removes the test `{name}` from {}", f.path),
        );
    }
}

/// The most assertions one file's change may remove or rewrite for them to be paired one by one.
const MAX_REMOVED: usize = 1000;
/// The most (removed, added) assertion pairs one file's change may have to weigh.
const MAX_PAIRS: usize = 100_000;

/// Assertions removed, commented out, or changed. The steps: the assertions removed and added
/// (less those that moved to another file of the change), a bound on how many are paired, those
/// commented out ([`commented_out`]), then each removed one paired with an added one that
/// renames it, makes it exact, changes a number or changes what it expects ([`paired`]).
fn changed_assertions(
    f: &FileChange,
    lang: Lang,
    base: &str,
    head: &str,
    moved: &Moves,
    push: &mut Push,
) {
    let before = assertions(lang, base);
    let after = assertions(lang, head);
    let mut removed = units_minus(&before, &after);
    let added = units_minus(&after, &before);
    // Assertions that moved to another file of the change are not removed.
    let mut elsewhere = moved.assertions.clone();
    for u in &added {
        if let Some(n) = elsewhere.get_mut(&u.key) {
            *n = n.saturating_sub(1);
        }
    }
    removed.retain(|u| match elsewhere.get_mut(&u.key) {
        Some(n) if *n > 0 => {
            *n -= 1;
            false
        }
        _ => true,
    });
    // Pairing weighs each removed assertion against each added one (and against each line
    // commenting one out): past a bound, one finding instead of minutes of work for the gate
    // at every evaluation, holding the lock (a change this large is a person's call anyway).
    if removed.len() > MAX_REMOVED || removed.len().saturating_mul(added.len()) > MAX_PAIRS {
        push(
            &f.path,
            removed.first().map(|u| u.line),
            format!(
                "removes or rewrites {} assertions and adds {} at once, more than the reviewer pairs one by one ({MAX_REMOVED} removed, or {MAX_PAIRS} pairs): split the change",
                removed.len(),
                added.len()
            ),
        );
        return;
    }
    commented_out(f, lang, &mut removed, push);
    paired(f, lang, base, head, removed, added, push);
}

/// Assertions commented out: a line comment that starts with an assertion (doc comments are
/// prose and examples, not code put aside). Each is a finding, and the removed assertion it
/// matches is accounted for.
fn commented_out(f: &FileChange, lang: Lang, removed: &mut Vec<Unit>, push: &mut Push) {
    for (line, text) in f.added_lines() {
        let t = text.trim();
        let Some(rest) = t.strip_prefix(lang.comment()) else {
            continue;
        };
        if lang != Lang::Python && (rest.starts_with('/') || rest.starts_with('!')) {
            continue;
        }
        let rest = rest.trim_start_matches(lang.comment()).trim();
        let leading = match lang {
            Lang::Rust => {
                let name = ident_at(rest);
                name.contains("assert") && rest[name.len()..].starts_with('!')
            }
            Lang::Python | Lang::Js => ["assert ", "assert(", "assert.", "self.assert", "expect("]
                .iter()
                .any(|p| rest.starts_with(p)),
        };
        if !leading {
            continue;
        }
        let key = normalize(rest);
        if let Some(at) = removed
            .iter()
            .position(|u| u.key.starts_with(key.trim_end_matches(';')))
        {
            removed.remove(at);
        }
        push(
            &f.path,
            Some(line),
            format!("comments out an assertion: {}", shown(t)),
        );
    }
}

/// Pairs each removed assertion with an added one: a rename or an assertion made exact is no
/// finding; a changed number, or a changed expectation of the same subject, is one; an
/// assertion nothing pairs with is removed. Each pair uses up the added assertion.
fn paired(
    f: &FileChange,
    lang: Lang,
    base: &str,
    head: &str,
    removed: Vec<Unit>,
    mut added: Vec<Unit>,
    push: &mut Push,
) {
    // For renames: the file's words, and the function around each added assertion, once.
    let (words, around) = if removed.is_empty() || added.is_empty() {
        (None, HashMap::new())
    } else {
        let words = FileWords {
            base: tokens(lang, base).into_iter().collect(),
            head: tokens(lang, head).into_iter().collect(),
        };
        let around: HashMap<u32, Vec<String>> = added
            .iter()
            .map(|a| (a.line, tokens(lang, &enclosing(lang, head, a.line))))
            .collect();
        (Some(words), around)
    };
    let mut shapes: Vec<Option<Shape>> = added.iter().map(|a| shape(lang, a)).collect();
    let mut added_numbers: Vec<(String, Vec<String>)> =
        added.iter().map(|a| numbers(&a.key)).collect();
    for r in removed {
        // A rename or an assertion made exact: no finding, and the pair is used up.
        let r_shape = shape(lang, &r);
        let before = words
            .as_ref()
            .map(|_| tokens(lang, &enclosing(lang, base, r.line)));
        let kept = added.iter().zip(&shapes).position(|(a, a_shape)| {
            let rename = match (&words, &before, around.get(&a.line)) {
                (Some(cx), Some(before), Some(after)) => renamed(before, after, cx),
                _ => false,
            };
            rename || strengthens(r_shape.as_ref(), a_shape.as_ref())
        });
        if let Some(at) = kept {
            added.remove(at);
            shapes.remove(at);
            added_numbers.remove(at);
            continue;
        }
        let (skeleton, nums) = numbers(&r.key);
        let number = added_numbers
            .iter()
            .position(|(s, n)| *s == skeleton && *n != nums);
        if let Some(at) = number {
            let a = added.remove(at);
            shapes.remove(at);
            added_numbers.remove(at);
            push(
                &f.path,
                Some(a.line),
                format!(
                    "changes a number in an assertion (a tolerance, threshold or expected value): `{}` (line {} at base) became `{}`",
                    r.shown, r.line, a.shown
                ),
            );
            continue;
        }
        let same_subject = subject(&r.key).and_then(|s| {
            added
                .iter()
                .position(|a| subject(&a.key) == Some(s) && a.key != r.key)
        });
        if let Some(at) = same_subject {
            let a = added.remove(at);
            shapes.remove(at);
            added_numbers.remove(at);
            push(
                &f.path,
                Some(a.line),
                format!(
                    "changes what an assertion expects: `{}` (line {} at base) became `{}`",
                    r.shown, r.line, a.shown
                ),
            );
            continue;
        }
        push(
            &f.path,
            Some(r.line),
            format!("removes an assertion: `{}`", r.shown),
        );
    }
}

/// Tests that existed at base, ignored, expected to panic, compiled out or skipped at head
/// (and, in JavaScript, any focused test: it silences the others).
fn disabled_tests(
    f: &FileChange,
    lang: Lang,
    base: &str,
    head: &str,
    base_tests: &std::collections::HashSet<String>,
    push: &mut Push,
) {
    let lines: Vec<&str> = head.lines().collect();
    for (line, text) in f.added_lines() {
        let t = text.trim();
        let idx = line as usize - 1;
        let existing = |lines: &[&str]| match target_after(lang, lines, idx) {
            Target::Fn(name) => base_tests.contains(&name),
            Target::Other => true,
        };
        let what = match lang {
            Lang::Rust => rust_disabling(t).filter(|_| existing(&lines)),
            Lang::Python => {
                let marks = [
                    "@pytest.mark.skip",
                    "@pytest.mark.xfail",
                    "@unittest.skip",
                    "@unittest.expectedFailure",
                ];
                marks
                    .iter()
                    .find(|m| t.starts_with(**m))
                    .filter(|_| existing(&lines))
                    .map(|m| m.to_string())
            }
            Lang::Js => js_disabling(t, base),
        };
        if let Some(what) = what {
            push(
                &f.path,
                Some(line),
                format!("disables a test with {what}: {}", shown(t)),
            );
        }
    }
}

fn rust_disabling(t: &str) -> Option<String> {
    if t.starts_with("#[ignore") {
        return Some("#[ignore]".into());
    }
    if t.starts_with("#[should_panic") {
        return Some("#[should_panic]".into());
    }
    if t.starts_with("#[cfg_attr(") && t.contains("ignore") {
        return Some("#[cfg_attr(…, ignore)]".into());
    }
    let inner = t.strip_prefix("#[cfg(")?.strip_suffix(")]")?;
    let inner: String = inner.chars().filter(|c| !c.is_whitespace()).collect();
    (NEVER_CFGS.contains(&inner.as_str()) || inner.contains("any()"))
        .then(|| format!("#[cfg({inner})], which is never true"))
}

fn js_disabling(t: &str, base: &str) -> Option<String> {
    const FOCUS: &[&str] = &[
        "it.only(",
        "test.only(",
        "describe.only(",
        "fit(",
        "fdescribe(",
    ];
    const SKIP: &[&str] = &[
        "it.skip(",
        "test.skip(",
        "describe.skip(",
        "xit(",
        "xtest(",
        "xdescribe(",
    ];
    if let Some(call) = FOCUS.iter().find(|c| t.starts_with(**c)) {
        return Some(format!(
            "`{}` (every other test stops running)",
            &call[..call.len() - 1]
        ));
    }
    let call = SKIP.iter().find(|c| t.starts_with(**c))?;
    // Only a test (or suite) whose title was there at base.
    let title = first_string(&t[call.len()..])?;
    base.contains(title)
        .then(|| format!("`{}`", &call[..call.len() - 1]))
}

/// `return;` added inside a test that existed at base.
fn early_returns(f: &FileChange, base: &str, head: &str, push: &mut Push) {
    let before: Vec<String> = tests_in(Lang::Rust, base)
        .into_iter()
        .map(|t| t.1)
        .collect();
    let lines: Vec<&str> = head.lines().collect();
    // (first line, last line, name) of each test at head, 1-based.
    let mut spans = Vec::new();
    for (attr, name) in tests_in(Lang::Rust, head) {
        if !before.contains(&name) {
            continue;
        }
        let mut depth = 0;
        let mut opened = false;
        for (i, l) in lines.iter().enumerate().skip(attr as usize - 1) {
            depth += depth_change(Lang::Rust, l);
            opened |= l.contains('{');
            if opened && depth <= 0 {
                spans.push((attr, i as u32 + 1, name.clone()));
                break;
            }
        }
    }
    for (line, text) in f.added_lines() {
        if !is_early_return(text.trim()) {
            continue;
        }
        if let Some((_, _, name)) = spans.iter().find(|(a, z, _)| *a <= line && line <= *z) {
            push(
                &f.path,
                Some(line),
                format!("returns early from the test `{name}`: {}", shown(text)),
            );
        }
    }
}

fn is_early_return(t: &str) -> bool {
    ["return;", "return Ok(());"].iter().any(|r| {
        t.match_indices(r).any(|(at, _)| {
            t[..at]
                .chars()
                .next_back()
                .is_none_or(|c| c == ' ' || c == '{')
        })
    })
}

/// A CI script that no longer runs the tests, or no longer fails when they do.
fn ci(f: &FileChange, push: &mut Push) {
    let runs = |l: &str| {
        let t = l.trim();
        !t.starts_with('#') && TEST_COMMANDS.iter().any(|c| t.contains(c))
    };
    let swallowed =
        |l: &str| l.contains("|| true") || l.contains("|| :") || l.contains("|| exit 0");
    let added = f.added_lines();
    let mut weakened = false;
    for (line, text) in &added {
        if runs(text) && swallowed(text) {
            weakened = true;
            push(
                &f.path,
                Some(*line),
                format!("the tests' failure no longer fails CI: {}", shown(text)),
            );
        }
        if text.trim() == "continue-on-error: true" {
            push(
                &f.path,
                Some(*line),
                "a CI step may now fail without failing the run (continue-on-error)".into(),
            );
        }
    }
    let still_runs = added.iter().any(|(_, l)| runs(l) && !swallowed(l));
    if still_runs || weakened {
        return;
    }
    if let Some((line, text)) = f.removed_lines().into_iter().find(|(_, l)| runs(l)) {
        push(
            &f.path,
            Some(line),
            format!(
                "{} no longer runs the tests: `{}` is gone",
                f.path,
                text.trim()
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::assertions::rust_assert_macro;
    use super::not_weakening::declares;
    use super::test_fns::is_test_attr;
    use super::*;

    fn fc(path: &str, base: Option<&str>, head: Option<&str>) -> FileChange {
        FileChange {
            path: path.into(),
            base: base.map(str::to_string),
            head: head.map(str::to_string),
        }
    }

    fn run(files: &[FileChange]) -> Vec<Finding> {
        check(
            "tests-tamper",
            &ChangeView {
                files,
                agent_origin: true,
                declared: None,
            },
        )
    }

    /// Found with a large input to the `builtins` fuzz target: every removed assertion was paired with every added
    /// one, tokenising both again for each pair: under the fuzzer, 200 rewritten tests took 27 s (now each
    /// unit is tokenised once; the pairing itself stays quadratic, but cheap).
    #[test]
    fn many_rewritten_assertions_are_tokenised_once_each() {
        let n = 300;
        let base: String = (0..n)
            .map(|i| format!("#[test]\nfn t{i}() {{\n    assert_eq!(f({i}), {i});\n}}\n"))
            .collect();
        let head: String = (0..n)
            .map(|i| format!("#[test]\nfn t{i}() {{\n    assert!(f({i}) > 0);\n}}\n"))
            .collect();
        let started = std::time::Instant::now();
        let found = run(&[fc("tests/t.rs", Some(&base), Some(&head))]);
        assert_eq!(found.len(), n);
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "took {:?}",
            started.elapsed()
        );
    }

    const RS: &str = "\
pub fn add(a: i32, b: i32) -> i32 {
    a + b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds() {
        assert_eq!(add(1, 2), 3);
        assert!(add(0, 0) == 0);
    }

    #[tokio::test(flavor = \"multi_thread\")]
    async fn adds_async() {
        let x = add(2, 2);
        assert_eq!(
            x,
            4
        );
    }

    #[test]
    fn close_enough() {
        let err = 0.001;
        assert!(err < 0.01, \"tolerance\");
    }
}
";

    fn rs(from: &str, to: &str) -> String {
        assert!(RS.contains(from), "fixture lacks {from}");
        RS.replacen(from, to, 1)
    }

    /// (name, files, expected number of findings, a word every message should contain).
    type Case = (&'static str, Vec<FileChange>, usize, &'static str);

    fn cases() -> Vec<Case> {
        let one = |path: &str, base: &str, head: &str| vec![fc(path, Some(base), Some(head))];
        vec![
            // --- Rust: weakening.
            (
                "removed test",
                one(
                    "src/a.rs",
                    RS,
                    &rs(
                        "    #[test]\n    fn close_enough() {\n        let err = 0.001;\n        assert!(err < 0.01, \"tolerance\");\n    }\n",
                        "",
                    ),
                ),
                2, // the test, and its assertion
                "",
            ),
            (
                "removed async test",
                one(
                    "src/a.rs",
                    RS,
                    &rs("    #[tokio::test(flavor = \"multi_thread\")]\n", ""),
                ),
                1,
                "adds_async",
            ),
            (
                "removed assertion",
                one(
                    "src/a.rs",
                    RS,
                    &rs("        assert!(add(0, 0) == 0);\n", ""),
                ),
                1,
                "removes an assertion",
            ),
            (
                "removed multi-line assertion",
                one(
                    "src/a.rs",
                    RS,
                    &rs("        assert_eq!(\n            x,\n            4\n        );\n", ""),
                ),
                1,
                "removes an assertion",
            ),
            (
                "removed debug_assert in code",
                one(
                    "src/b.rs",
                    "fn f(x: u8) {\n    debug_assert!(x < 8);\n    g(x);\n}\n",
                    "fn f(x: u8) {\n    g(x);\n}\n",
                ),
                1,
                "removes an assertion",
            ),
            (
                "commented-out assertion",
                one(
                    "src/a.rs",
                    RS,
                    &rs(
                        "        assert!(add(0, 0) == 0);",
                        "        // assert!(add(0, 0) == 0);",
                    ),
                ),
                1,
                "comments out",
            ),
            (
                "changed expected value",
                one(
                    "src/a.rs",
                    RS,
                    &rs("assert_eq!(add(1, 2), 3);", "assert_eq!(add(1, 2), add(2, 1));"),
                ),
                1,
                "changes what an assertion expects",
            ),
            (
                "changed expected number",
                one(
                    "src/a.rs",
                    RS,
                    &rs("assert_eq!(add(1, 2), 3);", "assert_eq!(add(1, 2), 4);"),
                ),
                1,
                "changes a number",
            ),
            (
                "loosened tolerance",
                one(
                    "src/a.rs",
                    RS,
                    &rs("assert!(err < 0.01,", "assert!(err < 0.5,"),
                ),
                1,
                "changes a number",
            ),
            (
                "loosened number in a multi-line assertion",
                one("src/a.rs", RS, &rs("            4\n", "            5\n")),
                1,
                "changes a number",
            ),
            (
                "ignored test",
                one("src/a.rs", RS, &rs("    #[test]\n    fn adds()", "    #[test]\n    #[ignore]\n    fn adds()")),
                1,
                "#[ignore]",
            ),
            (
                "should_panic",
                one("src/a.rs", RS, &rs("    #[test]\n    fn adds()", "    #[test]\n    #[should_panic]\n    fn adds()")),
                1,
                "should_panic",
            ),
            (
                "compiled-out test module",
                one("src/a.rs", RS, &rs(CFG_TEST, "#[cfg(any())]")),
                1,
                "never true",
            ),
            (
                "cfg(FALSE) on a test",
                one("src/a.rs", RS, &rs("    #[test]\n    fn adds()", "    #[cfg(FALSE)]\n    #[test]\n    fn adds()")),
                1,
                "never true",
            ),
            (
                "early return",
                one("src/a.rs", RS, &rs("        let err = 0.001;\n", "        let err = 0.001;\n        return;\n")),
                1,
                "returns early",
            ),
            (
                "removed test file",
                vec![fc("tests/cli.rs", Some("#[test]\nfn runs() {\n    assert!(true);\n}\n"), None)],
                1,
                "removed (1 test)",
            ),
            (
                "removed file with a test module",
                vec![fc("src/util.rs", Some(RS), None)],
                1,
                "removed (3 tests)",
            ),
            (
                "test file moved out of the test tree",
                vec![
                    fc("tests/cli.rs", Some("#[test]\nfn runs() {\n    assert!(true);\n}\n"), None),
                    fc("examples/cli.rs", None, Some("#[test]\nfn runs() {\n    assert!(true);\n}\n")),
                ],
                1,
                "moved out of the test tree",
            ),
            (
                "CI no longer runs the tests",
                one(".ci/run", "#!/bin/sh\nset -e\ncargo fmt --check\ncargo test --all\n", "#!/bin/sh\nset -e\ncargo fmt --check\n"),
                1,
                "no longer runs the tests",
            ),
            (
                "workflow comments the tests out",
                one(".github/workflows/ci.yml", "steps:\n  - run: cargo nextest run\n", "steps:\n  # - run: cargo nextest run\n"),
                1,
                "no longer runs the tests",
            ),
            (
                "CI swallows test failures",
                one(".ci/run", "cargo test\n", "cargo test || true\n"),
                1,
                "no longer fails",
            ),
            // --- Python.
            (
                "python test removed",
                one("tests/test_x.py", "def test_a():\n    assert f() == 1\n\ndef test_b():\n    pass\n", "def test_b():\n    pass\n"),
                2,
                "",
            ),
            (
                "python assertion removed",
                one("tests/test_x.py", "def test_a():\n    x = f()\n    assert x == 'a'\n", "def test_a():\n    x = f()\n"),
                1,
                "removes an assertion",
            ),
            (
                "python skip",
                one("tests/test_x.py", "def test_a():\n    assert f()\n", "@pytest.mark.skip(reason='flaky')\ndef test_a():\n    assert f()\n"),
                1,
                "pytest.mark.skip",
            ),
            (
                "python xfail",
                one("tests/test_x.py", "def test_a():\n    assert f()\n", "@pytest.mark.xfail\ndef test_a():\n    assert f()\n"),
                1,
                "xfail",
            ),
            // --- JavaScript / TypeScript.
            (
                "js test removed",
                one("src/a.test.ts", "it('adds', () => {\n  expect(add(1, 2)).toBe(3);\n});\n", ""),
                2,
                "",
            ),
            (
                "js expectation removed",
                one("src/a.test.ts", "test('adds', () => {\n  const x = add(1, 2);\n  expect(x).toEqual({ a: 1 });\n});\n", "test('adds', () => {\n  const x = add(1, 2);\n});\n"),
                1,
                "removes an assertion",
            ),
            (
                "js skip",
                one("src/a.spec.js", "it('adds', () => {\n  expect(add(1, 2)).toBe(3);\n});\n", "it.skip('adds', () => {\n  expect(add(1, 2)).toBe(3);\n});\n"),
                1,
                "it.skip",
            ),
            (
                "js xdescribe",
                one("src/a.spec.js", "describe('math', () => {\n});\n", "xdescribe('math', () => {\n});\n"),
                1,
                "xdescribe",
            ),
            (
                "js focus",
                one("src/a.spec.js", "it('a', () => {});\n", "it('a', () => {});\nit.only('b', () => {});\n"),
                1,
                "it.only",
            ),
            // --- Benign: nothing.
            (
                "new test",
                one("src/a.rs", RS, &rs("    #[test]\n    fn close_enough()", "    #[test]\n    fn subtracts() {\n        assert_eq!(add(3, -1), 2);\n    }\n\n    #[test]\n    fn close_enough()")),
                0,
                "",
            ),
            (
                "new ignored and should_panic tests",
                one("src/a.rs", RS, &rs("    #[test]\n    fn close_enough()", "    #[test]\n    #[ignore = \"slow\"]\n    fn big() {}\n\n    #[test]\n    #[should_panic]\n    fn overflows() {\n        add(i32::MAX, 1);\n    }\n\n    #[test]\n    fn close_enough()")),
                0,
                "",
            ),
            (
                "assertion strengthened",
                one("src/a.rs", RS, &rs("        assert!(add(0, 0) == 0);\n", "        assert!(add(0, 0) == 0);\n        assert_eq!(add(-1, 1), 0);\n")),
                0,
                "",
            ),
            (
                "reformatted assertion",
                one("src/a.rs", RS, &rs("        assert_eq!(\n            x,\n            4\n        );\n", "        assert_eq!(x, 4);\n")),
                0,
                "",
            ),
            (
                "refactor moving a function",
                vec![
                    fc("src/a.rs", Some("pub fn helper() -> u8 {\n    debug_assert!(true);\n    1\n}\n\npub fn other() {}\n"), Some("pub fn other() {}\n")),
                    fc("src/b.rs", Some("use x;\n"), Some("use x;\n\npub fn helper() -> u8 {\n    debug_assert!(true);\n    1\n}\n")),
                ],
                0,
                "",
            ),
            (
                "test moved between files",
                vec![
                    fc("tests/a.rs", Some("#[test]\nfn one() {\n    assert!(f());\n}\n\n#[test]\nfn two() {}\n"), Some("#[test]\nfn two() {}\n")),
                    fc("tests/b.rs", Some(""), Some("#[test]\nfn one() {\n    assert!(f());\n}\n")),
                ],
                0,
                "",
            ),
            (
                "test file renamed within the test tree",
                vec![
                    fc("tests/cli.rs", Some("#[test]\nfn runs() {\n    assert!(true);\n}\n"), None),
                    fc("tests/command_line.rs", None, Some("#[test]\nfn runs() {\n    assert!(true);\n}\n")),
                ],
                0,
                "",
            ),
            (
                "doc and message edits",
                one("src/a.rs", "/// Adds.\npub fn add() {}\nfn e() -> String { \"bad input\".into() }\n", "/// Adds two numbers.\npub fn add() {}\nfn e() -> String { \"bad input: expected a number\".into() }\n"),
                0,
                "",
            ),
            (
                "new module with tests",
                vec![fc("src/new.rs", None, Some(RS))],
                0,
                "",
            ),
            (
                "removed file without tests",
                vec![fc("src/old.rs", Some("pub fn old() {}\n"), None)],
                0,
                "",
            ),
            (
                "return in ordinary code",
                one("src/a.rs", RS, &rs("    a + b\n", "    if a == 0 {\n        return b;\n    }\n    a + b\n")),
                0,
                "",
            ),
            (
                "CI gains a step",
                one(".ci/run", "cargo test\n", "cargo fmt --check\ncargo test --all-features\n"),
                0,
                "",
            ),
            (
                "python test added",
                one("tests/test_x.py", "def test_a():\n    assert f()\n", "def test_a():\n    assert f()\n    assert g()\n\n@pytest.mark.skip\ndef test_new():\n    pass\n"),
                0,
                "",
            ),
            (
                "js test added",
                one("src/a.test.ts", "it('a', () => {\n  expect(a()).toBe(1);\n});\n", "it('a', () => {\n  expect(a()).toBe(1);\n  expect(b()).toBe(2);\n});\nit.skip('new one', () => {});\n"),
                0,
                "",
            ),
            // --- Renames and assertions made exact: nothing; their look-alikes: a finding.
            (
                "local variable renamed, assertion reflowed",
                one("src/a.rs", RS, &rs("        let x = add(2, 2);\n        assert_eq!(\n            x,\n", "        let sum = add(2, 2);\n        assert_eq!(\n            sum,\n")),
                0,
                "",
            ),
            (
                "not a rename: a new local checked instead",
                one("src/a.rs", RS, &rs("        assert_eq!(\n            x,\n", "        let y = 4;\n        assert_eq!(\n            y,\n")),
                1,
                "removes an assertion",
            ),
            (
                "not a rename: another existing constant expected",
                one(
                    "src/b.rs",
                    "const LIMIT: u32 = 3;\nconst LOOSE: u32 = 9;\n\n#[test]\nfn limit() {\n    assert!(count() <= LIMIT);\n}\n",
                    "const LIMIT: u32 = 3;\nconst LOOSE: u32 = 9;\n\n#[test]\nfn limit() {\n    assert!(count() <= LOOSE);\n}\n",
                ),
                1,
                "removes an assertion",
            ),
            (
                "helper renamed everywhere, in assertions too",
                one("src/a.rs", RS, &RS.replace("add(", "sum(")),
                0,
                "",
            ),
            (
                "assert! made exact",
                one("src/a.rs", RS, &rs("        assert!(add(0, 0) == 0);", "        assert_eq!(add(0, 0), 0);")),
                0,
                "",
            ),
            (
                "made \"exact\" by a tautology",
                one("src/a.rs", RS, &rs("        assert!(add(0, 0) == 0);", "        assert_eq!(add(0, 0), add(0, 0));")),
                1,
                "removes an assertion",
            ),
            (
                "half of a compound condition made exact",
                one("src/b.rs", "#[test]\nfn t() {\n    assert!(ok(x) && small(y));\n}\n", "#[test]\nfn t() {\n    assert_eq!(ok(x), true);\n}\n"),
                1,
                "removes an assertion",
            ),
            (
                "exact made loose",
                one("src/a.rs", RS, &rs("assert_eq!(add(1, 2), 3);", "assert!(add(1, 2) > 0);")),
                1,
                "",
            ),
            (
                "python truthiness made exact, and a local renamed",
                one("tests/test_x.py", "def test_a():\n    rows = f()\n    assert rows\n\ndef test_b():\n    rows = f()\n    assert rows == [1]\n", "def test_a():\n    rows = f()\n    assert rows == [1, 2]\n\ndef test_b():\n    found = f()\n    assert found == [1]\n"),
                0,
                "",
            ),
            (
                "js truthiness made exact",
                one("src/a.test.ts", "it('a', () => {\n  expect(a()).toBeTruthy();\n});\n", "it('a', () => {\n  expect(a()).toBe(3);\n});\n"),
                0,
                "",
            ),
            (
                "js exact made truthy",
                one("src/a.test.ts", "it('a', () => {\n  expect(a()).toBe(3);\n});\n", "it('a', () => {\n  expect(a()).toBeTruthy();\n});\n"),
                1,
                "changes what an assertion expects",
            ),
            (
                "doc comments and prose mentioning assertions",
                one("src/a.rs", RS, &rs("pub fn add", "/// ```\n/// assert_eq!(add(1, 1), 2);\n/// ```\n// we check it with `assert_eq!` below\npub fn add")),
                0,
                "",
            ),
            (
                "python commented-out assertion",
                one("tests/test_x.py", "def test_a():\n    assert f() == 1\n", "def test_a():\n    # assert f() == 1\n    pass\n"),
                1,
                "comments out",
            ),
            (
                "a file that is not code",
                one("README.md", "assert_eq!(a, 1)\n#[test]\n", "nothing\n"),
                0,
                "",
            ),
        ]
    }

    #[test]
    fn the_table() {
        let mut failures = Vec::new();
        let all = cases();
        for (name, files, count, word) in &all {
            let found = run(files);
            let ok = found.len() == *count
                && found.iter().all(|f| {
                    f.message.contains(word)
                        && f.severity == Severity::Blocking
                        && f.category == "tests-tamper"
                        && f.hint.contains("restore the test/assertion")
                });
            if !ok {
                failures.push(format!(
                    "{name}: expected {count} finding(s) with `{word}`, got {:#?}",
                    found
                        .iter()
                        .map(|f| format!("{:?}:{:?} {}", f.file, f.line, f.message))
                        .collect::<Vec<_>>()
                ));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
        assert!(all.len() >= 40, "{} cases", all.len());
    }

    #[test]
    fn lines_are_at_base_for_removals_and_at_head_for_additions() {
        let removed = run(&[fc(
            "src/a.rs",
            Some(RS),
            Some(&rs("        assert!(add(0, 0) == 0);\n", "")),
        )]);
        assert_eq!(removed[0].line, Some(12));
        let changed = run(&[fc(
            "src/a.rs",
            Some(RS),
            Some(&rs("pub fn add", "// Adds.\npub fn add").replace("), 3)", "), 4)")),
        )]);
        assert_eq!(changed[0].line, Some(12), "{:?}", changed[0]);
        let test = run(&[fc(
            "src/a.rs",
            Some(RS),
            Some(&rs("    #[test]\n    fn adds() {\n", "    fn adds() {\n")),
        )]);
        assert_eq!(test.len(), 1);
        assert_eq!(test[0].line, Some(9));
        assert!(test[0].message.contains("`adds`"), "{}", test[0].message);
    }

    #[test]
    fn matchers() {
        assert!(is_test_attr("#[test]"));
        assert!(is_test_attr("#[async_std::test]"));
        assert!(!is_test_attr("#[testing]"));
        assert!(!is_test_attr("#[cfg(test)]"));
        assert!(rust_assert_macro("prop_assert_eq!(a, b);"));
        assert!(!rust_assert_macro("let assertion = 1;"));
        assert!(!rust_assert_macro("msg(\"assert!(x)\")"));
        assert_eq!(numbers("assert!(x1<0.5e3,1.0.max(y))").1, ["0.5e3", "1.0"]);
        assert_eq!(subject("assert_eq!(f(1),2)"), Some("assert_eq!(f(1)"));
        assert_eq!(subject("expect(x).toBe(1)"), Some("expect(x"));
        assert!(is_early_return("if skip { return; }"));
        assert!(!is_early_return("noreturn;"));
        assert_eq!(depth_change(Lang::Rust, "f('(', \"((\", x::<'a>( // ("), 2);
        assert_eq!(
            tokens(Lang::Rust, "assert_eq!(x.len(), \"a b\", 1.5);"),
            [
                "assert_eq",
                "!",
                "(",
                "x",
                ".",
                "len",
                "(",
                ")",
                ",",
                "\"a b\"",
                ",",
                "1",
                ".",
                "5",
                ")",
                ";"
            ]
        );
        let toks = |s: &str| tokens(Lang::Python, s);
        assert!(declares(&toks("rows = f()"), "rows") && !declares(&toks("rows == f()"), "rows"));
        assert!(!declares(&toks("self.rows = f()"), "rows"));
        assert_eq!(
            enclosing(
                Lang::Rust,
                "fn a() {\n    x();\n}\n\nfn b() {\n    y();\n}\n",
                6
            ),
            "fn b() {\n    y();\n}"
        );
        assert_eq!(
            enclosing(Lang::Python, "def a():\n    x()\n\ndef b():\n    y()\n", 2),
            "def a():\n    x()\n"
        );
        assert!(is_test_path("crates/x/tests/it.rs"));
        assert!(!is_test_path("src/testing.rs"));
    }
}
