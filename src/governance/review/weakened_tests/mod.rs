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
//! - tests disabled (`#[ignore]`, `#[should_panic]`, a `cfg` the test run need not satisfy —
//!   anything but `test` or `any(test, …)`, over several lines or inner —, `cfg_attr(…,
//!   ignore)`, a test module's `mod` line gated, pytest's skip and xfail marks, `pytestmark`,
//!   `.skip`/`.only`/`xit`/`.skipIf`/`.failing` in JavaScript) on a test that existed at base
//!   (by name, or by body when renamed);
//! - the assertion vocabulary redefined, in any file (`vocabulary`);
//! - control flow added to a test that existed at base that can leave it before its
//!   assertions, in any spelling (`bodies`); in an agent's change, also an existing assertion or
//!   test put under a new condition, loop, closure or `try:`, a test helper rewritten, and a
//!   `mod` line removed while its file stays;
//! - a CI script that no longer runs the tests;
//! - in an agent's change, anywhere: code that can end the test process, Rust load-time code,
//!   and lints allowed wholesale (`escapes`).
//!
//! Adding tests, assertions, helpers or test modules is never a finding.
//!
//! Here: [`check`] and its rules, with the language and text helpers they share. The test
//! functions a file declares are found in `test_fns`, its assertions in `assertions`, tests and
//! helpers as spans and what encloses a line in `bodies`, and the changes to an assertion that
//! do not weaken it are recognised in `not_weakening`.

mod assertions;
mod bodies;
mod escapes;
mod not_weakening;
mod test_fns;
mod vocabulary;

use super::{finding, ChangeView, FileChange, Finding, Severity};
use assertions::{assertions, normalize, numbers, subject, units_minus, Unit};
use not_weakening::{enclosing, renamed, shape, strengthens, tokens, FileWords, Shape};
use std::collections::{HashMap, HashSet};
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
pub(crate) fn is_test_path(path: &str) -> bool {
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

/// Whether the test runners collect a test file moved from `from` to `to` as they collected it
/// at `from`. Python's and JavaScript's runners find tests by folder and by file name
/// (`unittest discover -s tests`, `test_*.py`, `*.test.js`, `test/`), so an agent's test file
/// must keep its folder, and a name they collect if its old one was. Cargo builds each
/// top-level `tests/*.rs` (and `tests/*/main.rs`) as a test target, so one must stay one;
/// elsewhere Rust runs what the `mod` lines wire, which are judged on their own. Whatever the
/// language, the file keeps an extension its runner reads (`it.rs` → `it.rs.txt` runs nothing).
fn collected_alike(lang: Lang, from: &str, to: &str) -> bool {
    let folder = |p: &str| p.rsplit_once('/').map_or("", |(d, _)| d).to_string();
    let kept_kind = runner_reads(lang, from) <= runner_reads(lang, to);
    kept_kind
        && match lang {
            Lang::Rust => !cargo_test_target(from) || cargo_test_target(to),
            Lang::Python | Lang::Js => {
                folder(from) == folder(to)
                    && runners(lang)
                        .iter()
                        .all(|collects| !collects(from) || collects(to))
            }
        }
}

/// The default collection of each runner of `lang` (which files it takes as test files): a
/// test file an agent moves must stay collected by every runner that collected it, since the
/// repository may use any of them.
fn runners(lang: Lang) -> Vec<fn(&str) -> bool> {
    match lang {
        Lang::Python => vec![unittest_collects, pytest_collects],
        Lang::Js => vec![node_collects, jest_collects],
        Lang::Rust => Vec::new(),
    }
}

/// `python -m unittest discover`'s default pattern, `test*.py`.
fn unittest_collects(path: &str) -> bool {
    let name = file_name(path);
    name.starts_with("test") && name.ends_with(".py")
}

/// pytest's default `python_files`, `test_*.py` and `*_test.py`.
fn pytest_collects(path: &str) -> bool {
    let name = file_name(path);
    (name.starts_with("test_") && name.ends_with(".py")) || name.ends_with("_test.py")
}

/// `node --test`'s default patterns: `*.test.{js,cjs,mjs}`, `*-test.*`, `*_test.*`, `test-*.*`,
/// `test.*`, and any file under a `test/` folder.
fn node_collects(path: &str) -> bool {
    let name = file_name(path);
    let Some((stem, ext)) = name.rsplit_once('.') else {
        return false;
    };
    if !["js", "cjs", "mjs"].contains(&ext) {
        return false;
    }
    stem.ends_with(".test")
        || stem.ends_with("-test")
        || stem.ends_with("_test")
        || stem.starts_with("test-")
        || stem == "test"
        || path.split('/').rev().skip(1).any(|c| c == "test")
}

/// Jest's default `testMatch`: `*.test.*` and `*.spec.*` of JavaScript and TypeScript, and any
/// such file under `__tests__/`.
fn jest_collects(path: &str) -> bool {
    let name = file_name(path);
    let Some((stem, ext)) = name.rsplit_once('.') else {
        return false;
    };
    if !["js", "jsx", "ts", "tsx", "mjs", "cjs"].contains(&ext) {
        return false;
    }
    stem.ends_with(".test")
        || stem.ends_with(".spec")
        || path.split('/').rev().skip(1).any(|c| c == "__tests__")
}

/// Whether `lang`'s test runners read a file named like `path` at all (its extension).
fn runner_reads(lang: Lang, path: &str) -> bool {
    let ext = file_name(path).rsplit_once('.').map_or("", |(_, e)| e);
    match lang {
        Lang::Rust => ext == "rs",
        Lang::Python => ext == "py",
        Lang::Js => ["js", "mjs", "cjs", "jsx", "ts", "mts", "cts", "tsx"].contains(&ext),
    }
}

/// Whether cargo builds `path` as an integration test target on its own.
fn cargo_test_target(path: &str) -> bool {
    let Some(rest) = path.strip_prefix("tests/") else {
        return false;
    };
    match rest.split_once('/') {
        None => rest.ends_with(".rs"),
        Some((_, inner)) => inner == "main.rs",
    }
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
        let before: HashSet<String> = tests_in(lang, base).into_iter().map(|t| t.1).collect();
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
    let base_tests: HashSet<String> = change
        .files
        .iter()
        .filter_map(|f| Some(tests_in(Lang::of(&f.path)?, f.base.as_deref()?)))
        .flatten()
        .map(|t| t.1)
        .collect();
    // The assertion macros the change's files invoke at base (`name!`): a local macro of one
    // of those names shadows it.
    let invoked: HashSet<String> = change
        .files
        .iter()
        .filter_map(|f| f.base.as_deref())
        .flat_map(|b| {
            b.match_indices("assert").filter_map(move |(at, _)| {
                let start = b[..at]
                    .char_indices()
                    .rev()
                    .take_while(|(_, c)| is_ident(*c))
                    .take(64)
                    .last()
                    .map_or(at, |(i, _)| i);
                let name: String = b[start..]
                    .chars()
                    .take_while(|c| is_ident(*c))
                    .take(128)
                    .collect();
                b[start + name.len()..].starts_with('!').then_some(name)
            })
        })
        .collect();
    let known = |name: &str| invoked.contains(name);
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
            removed_file(f, lang, change, &moved, &mut push);
            continue;
        }
        let base = f.base.as_deref().unwrap_or("");
        let head = f.head.as_deref().unwrap_or("");
        let added = f.added_lines();
        redefined_vocabulary(f, lang, head, &added, &known, &mut push);
        let mut escapes = if change.agent_origin {
            escapes::findings(f, lang, head, &added)
        } else {
            Vec::new()
        };
        if f.base.is_none() {
            // A new file: its tests are new; what it redefines or ends the process with was
            // read above.
            for (line, message) in escapes {
                push(&f.path, Some(line), message);
            }
            continue;
        }
        removed_tests(
            f,
            (lang, change.agent_origin),
            base,
            head,
            &moved,
            &mut push,
        );
        changed_assertions(f, lang, base, head, &moved, &mut push);
        let pairs = bodies::pair(lang, base, head);
        let mut existing = base_tests.clone();
        existing.extend(pairs.iter().map(|(_, h)| h.name.clone()));
        disabled_tests(
            f,
            lang,
            base,
            head,
            &existing,
            change.agent_origin,
            &mut push,
        );
        for (line, message) in
            bodies::weakened_bodies(lang, base, head, &pairs, change.agent_origin)
        {
            // The early exit in an existing test is said once, by the rule over its body.
            escapes.retain(|(l, _)| *l != line);
            push(&f.path, Some(line), message);
        }
        for (line, message) in escapes {
            push(&f.path, Some(line), message);
        }
        if change.agent_origin {
            for (line, message) in bodies::enclosed_tests(lang, base, head, &pairs) {
                push(&f.path, Some(line), message);
            }
            helpers(f, lang, base, head, &mut push);
            if lang == Lang::Rust {
                orphaned_modules(f, change.files, &mut push);
            }
        }
    }
    out
}

/// Added lines that redefine the assertion vocabulary (see `vocabulary`), in any file.
fn redefined_vocabulary(
    f: &FileChange,
    lang: Lang,
    head: &str,
    added: &[(u32, &str)],
    known: &dyn Fn(&str) -> bool,
    push: &mut Push,
) {
    let lines: Vec<&str> = head.lines().collect();
    for &(line, _) in added {
        if let Some(what) = vocabulary::redefines(lang, &lines, line as usize - 1, known) {
            push(
                &f.path,
                Some(line),
                format!("redefines the assertion vocabulary: {what}, so existing assertions check nothing"),
            );
        }
    }
}

/// Helpers of the test tree (and of Rust's test modules) an agent rewrote: what existing
/// tests call decides whether they pass.
fn helpers(f: &FileChange, lang: Lang, base: &str, head: &str, push: &mut Push) {
    let in_test_tree = is_test_path(&f.path);
    let modules = if in_test_tree || lang != Lang::Rust {
        None
    } else {
        Some(test_modules(head))
    };
    if !in_test_tree && modules.as_ref().is_none_or(Vec::is_empty) {
        return;
    }
    for (line, message) in bodies::rewritten_helpers(lang, base, head) {
        let inside = modules
            .as_ref()
            .is_none_or(|m| m.iter().any(|(a, z)| *a < line && line <= *z));
        if inside {
            push(&f.path, Some(line), message);
        }
    }
}

/// The 1-based line ranges of a Rust text's test modules (`#[cfg(test)] mod … { … }`).
fn test_modules(text: &str) -> Vec<(u32, u32)> {
    let lines: Vec<&str> = text.lines().collect();
    let blocks = bodies::Blocks::of(Lang::Rust, &lines, false);
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if l.trim() != CFG_TEST {
            continue;
        }
        let decl = (i + 1..lines.len().min(i + 4))
            .find(|j| super::wiring::mod_decl(lines[*j]).is_some_and(|(_, file)| !file));
        if let Some((decl, end)) = decl.and_then(|d| Some((d, blocks.end_of(d)?))) {
            out.push((decl as u32 + 1, end as u32 + 1));
        }
    }
    out
}

/// A Rust module declaration removed while its file stays: the file is no longer compiled,
/// and the tests in it stop running.
fn orphaned_modules(f: &FileChange, files: &[FileChange], push: &mut Push) {
    let before = super::wiring::decls(f.base.as_deref().unwrap_or(""));
    let after = super::wiring::decls(f.head.as_deref().unwrap_or(""));
    for d in before.iter().filter(|d| d.file) {
        if after.iter().any(|h| h.name == d.name) {
            continue;
        }
        let targets = super::wiring::targets(&f.path, &d.name);
        let gone = files
            .iter()
            .any(|g| targets.contains(&g.path) && g.head.is_none());
        if !gone {
            push(
                &f.path,
                Some(d.line),
                format!(
                    "removes `mod {};` while its file ({} or {}) stays: it is no longer compiled, and its tests stop running",
                    d.name, targets[0], targets[1]
                ),
            );
        }
    }
}

type Push<'p> = dyn FnMut(&str, Option<u32>, String) + 'p;

/// A test file removed (or moved out of the test tree, or, by an agent, to where its runner
/// does not collect it).
fn removed_file(f: &FileChange, lang: Lang, change: &ChangeView, moved: &Moves, push: &mut Push) {
    let base = f.base.as_deref().unwrap_or("");
    let tests = tests_in(lang, base);
    let test_path = is_test_path(&f.path);
    if !(test_path || base.contains(CFG_TEST) || !tests.is_empty()) {
        return;
    }
    // A test may live anywhere that runs tests; one under the test tree must stay in it, and an
    // agent's must stay where its runner collects it.
    let alike = |dest: &str| !change.agent_origin || collected_alike(lang, &f.path, dest);
    let fits = |dest: &str| (is_test_path(dest) || !test_path) && alike(dest);
    let twin = change
        .files
        .iter()
        .find(|g| g.added() && g.head.as_deref() == Some(base));
    if let Some(twin) = twin {
        if fits(&twin.path) {
            return;
        }
        let message = if is_test_path(&twin.path) || !test_path {
            format!(
                "test file {} moved to {}, a folder or a name its test runner does not collect as it collected the old one, where its tests may no longer run",
                f.path, twin.path
            )
        } else {
            format!(
                "test file {} moved out of the test tree to {}, where its tests no longer run",
                f.path, twin.path
            )
        };
        push(&f.path, None, message);
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
    (lang, agent): (Lang, bool),
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
        } else if moved.tests.get(name).is_some_and(|d| {
            d.iter()
                .any(|p| *p != f.path && (!agent || collected_alike(lang, &f.path, p)))
        }) {
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
/// (and, in JavaScript, any focused test: it silences the others); and what disables a whole
/// file's tests from its top (`#![cfg(…)]`, `pytestmark`, a top-level `return`).
fn disabled_tests(
    f: &FileChange,
    lang: Lang,
    base: &str,
    head: &str,
    existing: &HashSet<String>,
    agent: bool,
    push: &mut Push,
) {
    let lines: Vec<&str> = head.lines().collect();
    let base_mods = if lang == Lang::Rust {
        super::wiring::decls(base)
    } else {
        Vec::new()
    };
    let has_tests = !tests_in(lang, base).is_empty() || base.contains(CFG_TEST);
    let mut seen_attr_end = 0usize;
    for (line, text) in f.added_lines() {
        let t = text.trim();
        let idx = line as usize - 1;
        if idx < seen_attr_end {
            continue;
        }
        let what = match lang {
            Lang::Rust if t.starts_with("#[") || t.starts_with("#![") => {
                // The whole attribute, over several lines if it spans them.
                let (attr, last) = super::wiring::attribute_at(&lines, idx);
                seen_attr_end = last + 1;
                let Some(what) = rust_disabling(&attr) else {
                    continue;
                };
                let applies = if attr.starts_with("#![") {
                    // An inner attribute: the file's (or the module's) tests.
                    has_tests
                } else {
                    match target_after(lang, &lines, last) {
                        Target::Fn(name) => existing.contains(&name),
                        Target::Mod(name) => base_mods.iter().any(|d| {
                            d.name == name
                                && (agent || name.contains("test") || d.attrs.contains(CFG_TEST))
                        }),
                        Target::Other => false,
                    }
                };
                applies.then_some(what)
            }
            Lang::Rust => None,
            Lang::Python => {
                let marks = [
                    "@pytest.mark.skip",
                    "@pytest.mark.xfail",
                    "@unittest.skip",
                    "@unittest.expectedFailure",
                ];
                let decorated = marks.iter().find(|m| t.starts_with(**m)).filter(|_| {
                    match target_after(lang, &lines, idx) {
                        Target::Fn(name) => existing.contains(&name),
                        // A class of tests.
                        _ => has_tests,
                    }
                });
                // Any other decorator an agent puts on an existing test may replace it with a
                // function that checks nothing (`def fast(f): return lambda *a: None`).
                let wrapped = (agent && t.starts_with('@') && !known_decorator(t))
                    .then(|| target_after(lang, &lines, idx))
                    .filter(|target| match target {
                        Target::Fn(name) => existing.contains(name),
                        _ => false,
                    })
                    .map(|_| {
                        format!("a decorator of the change's own (`{}`), which may replace the test with one that checks nothing", shown(t))
                    });
                decorated.map(|m| m.to_string()).or(wrapped).or_else(|| {
                    let top = !text.starts_with([' ', '\t']);
                    let module = [
                        "pytestmark",
                        "__test__ = False",
                        "__test__=False",
                        "collect_ignore",
                    ]
                    .iter()
                    .find(|m| t.starts_with(**m))
                    .map(|m| format!("`{m}`"))
                    .or_else(|| {
                        top.then(|| bodies::always_exits(lang, t))
                            .flatten()
                            .map(|w| format!("a top-level statement that {w}"))
                    });
                    module.filter(|_| has_tests)
                })
            }
            Lang::Js => js_disabling(t, base, &lines, idx, existing).or_else(|| {
                let top = !text.starts_with([' ', '\t']);
                let exits = bodies::always_exits(lang, t).is_some()
                    || (top && bodies::jumps(lang, t) == Some("return"));
                (top && exits && has_tests).then(|| "a top-level exit".to_string())
            }),
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

/// Decorators of the test libraries that run the test they decorate (pytest's marks other than
/// skip and xfail, mocks, hypothesis): an agent may add these to an existing test.
fn known_decorator(t: &str) -> bool {
    [
        "@pytest.mark.",
        "@mock.patch",
        "@unittest.mock.patch",
        "@patch(",
        "@patch.object(",
        "@patch.dict(",
        "@given(",
        "@settings(",
        "@example(",
        "@staticmethod",
        "@classmethod",
    ]
    .iter()
    .any(|k| t.starts_with(k))
}

/// Whether a `cfg` predicate is true whenever the tests are compiled: `test`, or `any(…)` of
/// it. A platform, a feature, an unknown or misspelled name, or `all(test, …)` may be false
/// there.
fn test_true(pred: &str) -> bool {
    let p: String = pred.chars().filter(|c| !c.is_whitespace()).collect();
    if p == "test" {
        return true;
    }
    // Nested past what anyone writes: not read, so not sure to be true.
    if p.len() > 1000 {
        return false;
    }
    let Some(inner) = p.strip_prefix("any(").and_then(|r| r.strip_suffix(')')) else {
        return false;
    };
    let mut depth = 0;
    let mut part = String::new();
    let mut parts = Vec::new();
    for c in inner.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(std::mem::take(&mut part));
                continue;
            }
            _ => {}
        }
        part.push(c);
    }
    parts.push(part);
    parts.iter().any(|p| test_true(p))
}

/// What an attribute does to the item it is on, when that disables a test: ignored, expected
/// to panic, compiled only under a `cfg` the test run need not have, or one of those through
/// `cfg_attr`.
pub(super) fn rust_disabling(attr: &str) -> Option<String> {
    let t: String = attr.chars().filter(|c| !c.is_whitespace()).collect();
    let inner = t
        .strip_prefix("#![")
        .or_else(|| t.strip_prefix("#["))?
        .strip_suffix(']')?;
    if inner.starts_with("ignore") {
        return Some("#[ignore]".into());
    }
    if inner.starts_with("should_panic") {
        return Some("#[should_panic]".into());
    }
    if let Some(args) = inner.strip_prefix("cfg_attr(") {
        if ["ignore", "should_panic", "cfg(", "path="]
            .iter()
            .any(|w| args.contains(w))
        {
            return Some("#[cfg_attr(…, ignore)]".into());
        }
        return None;
    }
    let pred = inner.strip_prefix("cfg(")?.strip_suffix(')')?;
    if test_true(pred) {
        return None;
    }
    if NEVER_CFGS.contains(&pred) || pred.contains("any()") {
        return Some(format!("#[cfg({pred})], which is never true"));
    }
    Some(format!(
        "#[cfg({pred})], which the test run need not satisfy (only `test` is sure to be set), so the test may be compiled out"
    ))
}

fn js_disabling(
    t: &str,
    base: &str,
    lines: &[&str],
    idx: usize,
    existing: &HashSet<String>,
) -> Option<String> {
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
        "it.skipIf(",
        "test.skipIf(",
        "describe.skipIf(",
        "it.runIf(",
        "test.runIf(",
        "describe.runIf(",
        "it.failing(",
        "test.failing(",
        "it.todo(",
        "test.todo(",
    ];
    if let Some(call) = FOCUS.iter().find(|c| t.starts_with(**c)) {
        return Some(format!(
            "`{}` (every other test stops running)",
            &call[..call.len() - 1]
        ));
    }
    let call = SKIP.iter().find(|c| t.starts_with(**c))?;
    // Only a test (or suite) whose title was there at base (or that a renamed one continues).
    let rest = lines
        .get(idx..(idx + 2).min(lines.len()))
        .map(|l| l.join(" "))
        .unwrap_or_default();
    let title = first_string(&t[call.len()..])
        .or_else(|| {
            // `it.skipIf(cond)('title', …)`: the title follows the condition.
            first_string(rest.split(")(").nth(1)?)
        })?
        .to_string();
    (base.contains(&title) || existing.contains(&title))
        .then(|| format!("`{}`", &call[..call.len() - 1]))
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
    use super::assertions::{depth_change, rust_assert_macro};
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
                judged: &[],
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

    /// The rules over tests' bodies, helpers and module lines read each file in linear time:
    /// unclosed blocks, thousands of tests and helpers, a giant identifier, deep `any(…)`.
    /// Judged by how the time grows, not by a wall-clock limit: four times the input may take
    /// at most eight times as long (linear is four, quadratic sixteen), so a loaded machine
    /// slows both sides alike.
    #[test]
    fn pathological_files_are_read_in_linear_time() {
        let cases = |n: usize| {
            let unclosed: String = (0..n).map(|i| format!("#[test]\nfn t{i}() {{\n")).collect();
            let tests: String = (0..n)
                .map(|i| format!("#[test]\nfn t{i}() {{\n    assert_eq!(f({i}), {i});\n}}\n"))
                .collect();
            let helpers: String = (0..n)
                .map(|i| format!("fn h{i}() -> u8 {{\n    {i}\n}}\n"))
                .collect();
            let py: String = (0..n)
                .map(|i| format!("{}def test_{i}():\n", " ".repeat(i % 200)))
                .collect();
            let js: String = (0..n)
                .map(|i| format!("it('t{i}', () => {{\n  expect(a).toBe({i});\n"))
                .collect();
            let giant = format!("fn x() {{ {}! }}\n", "assert".repeat(10 * n));
            let deep = format!(
                "#[cfg({}test{})]\nmod tests {{}}\n",
                "any(".repeat(n / 4),
                ")".repeat(n / 4)
            );
            vec![
                (
                    "tests/a.rs",
                    unclosed.clone(),
                    format!("{unclosed}return;\n"),
                ),
                (
                    "tests/b.rs",
                    tests.clone(),
                    tests.replace("assert_eq!(f(1), 1)", "return;"),
                ),
                (
                    "tests/c.rs",
                    helpers.clone(),
                    helpers.replace("    7\n", "    8\n"),
                ),
                ("tests/test_d.py", py.clone(), format!("{py}    return\n")),
                ("web/e.test.js", js.clone(), format!("{js}  return;\n")),
                (
                    "src/f.rs",
                    giant.clone(),
                    format!("{giant}macro_rules! assert_x {{}}\n"),
                ),
                ("src/g.rs", "mod tests {}\n".to_string(), deep),
            ]
        };
        let time = |path: &str, base: &str, head: &str| {
            let started = std::time::Instant::now();
            let _ = run(&[fc(path, Some(base), Some(head))]);
            started.elapsed()
        };
        let (small, big) = (cases(2_500), cases(10_000));
        for ((path, sb, sh), (_, bb, bh)) in small.iter().zip(&big) {
            let t_small = time(path, sb, sh);
            let t_big = time(path, bb, bh);
            eprintln!("{path}: {t_small:?} for n, {t_big:?} for 4n");
            assert!(
                t_big <= t_small * 8 + std::time::Duration::from_millis(50),
                "{path}: {t_small:?} for n but {t_big:?} for 4n: the rules grow faster than linearly"
            );
        }
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
            (
                "an existing rust test moved into a const block",
                one("tests/it.rs", "#[test]\nfn holds() {\n    assert!(f());\n}\n", "const _: () = {\n#[test]\nfn holds() {\n    assert!(f());\n}\n};\n"),
                1,
                "const _",
            ),
            (
                "existing rust tests wrapped in a local macro",
                one("tests/it.rs", "#[test]\nfn holds() {\n    assert!(f());\n}\n", "macro_rules! suite {\n    ($($i:item)*) => { const _: () = (); };\n}\n\nsuite! {\n#[test]\nfn holds() {\n    assert!(f());\n}\n}\n"),
                1,
                "suite!",
            ),
            (
                "python decorator of the change's own on an existing test",
                one("tests/test_x.py", "def test_a():\n    assert f()\n", "def fast(fn):\n    return lambda *a, **k: None\n\n@fast\ndef test_a():\n    assert f()\n"),
                1,
                "a decorator of the change's own",
            ),
            (
                "python mock on an existing test",
                one("tests/test_x.py", "def test_a():\n    assert f()\n", "@mock.patch('app.clock')\ndef test_a(clock):\n    assert f()\n"),
                0,
                "",
            ),
            (
                "python decorator on a new test",
                one("tests/test_x.py", "def test_a():\n    assert f()\n", "def test_a():\n    assert f()\n\n@retry\ndef test_b():\n    assert g()\n"),
                0,
                "",
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
                "python test file moved out of the folder its runner discovers",
                vec![
                    fc("tests/test_calc.py", Some("import unittest\n\nclass TestAdd(unittest.TestCase):\n    def test_adds(self):\n        self.assertEqual(add(2, 3), 5)\n"), None),
                    fc("test_calc.py", None, Some("import unittest\n\nclass TestAdd(unittest.TestCase):\n    def test_adds(self):\n        self.assertEqual(add(2, 3), 5)\n")),
                ],
                1,
                "a folder or a name its test runner does not collect",
            ),
            (
                "python test file renamed to a name the runners do not collect",
                vec![
                    fc("tests/test_calc.py", Some("import unittest\n\nclass TestAdd(unittest.TestCase):\n    def test_adds(self):\n        self.assertEqual(add(2, 3), 5)\n"), None),
                    fc("tests/calc_checks.py", None, Some("import unittest\n\nclass TestAdd(unittest.TestCase):\n    def test_adds(self):\n        self.assertEqual(add(2, 3), 5)\n")),
                ],
                1,
                "a folder or a name its test runner does not collect",
            ),
            (
                "python test file renamed to another collected name",
                vec![
                    fc("tests/test_calc.py", Some("import unittest\n\nclass TestAdd(unittest.TestCase):\n    def test_adds(self):\n        self.assertEqual(add(2, 3), 5)\n"), None),
                    fc("tests/test_arithmetic.py", None, Some("import unittest\n\nclass TestAdd(unittest.TestCase):\n    def test_adds(self):\n        self.assertEqual(add(2, 3), 5)\n")),
                ],
                0,
                "",
            ),
            (
                "rust test target moved to a file cargo does not build as one",
                vec![
                    fc("tests/cli.rs", Some("#[test]\nfn runs() {\n    assert!(true);\n}\n"), None),
                    fc("tests/support/cli.rs", None, Some("#[test]\nfn runs() {\n    assert!(true);\n}\n")),
                ],
                1,
                "a folder or a name its test runner does not collect",
            ),
            (
                "rust test file renamed to an extension nothing reads",
                vec![
                    fc("tests/cli.rs", Some("#[test]\nfn runs() {\n    assert!(true);\n}\n"), None),
                    fc("tests/cli.rs.txt", None, Some("#[test]\nfn runs() {\n    assert!(true);\n}\n")),
                ],
                1,
                "a folder or a name its test runner does not collect",
            ),
            (
                "rust test target moved into a folder target",
                vec![
                    fc("tests/cli.rs", Some("#[test]\nfn runs() {\n    assert!(true);\n}\n"), None),
                    fc("tests/cli/main.rs", None, Some("#[test]\nfn runs() {\n    assert!(true);\n}\n")),
                ],
                0,
                "",
            ),
            (
                "python test file renamed to a name only pytest collects",
                vec![
                    fc("tests/test_calc.py", Some("import unittest\n\nclass TestAdd(unittest.TestCase):\n    def test_adds(self):\n        self.assertEqual(add(2, 3), 5)\n"), None),
                    fc("tests/calc_test.py", None, Some("import unittest\n\nclass TestAdd(unittest.TestCase):\n    def test_adds(self):\n        self.assertEqual(add(2, 3), 5)\n")),
                ],
                1,
                "",
            ),
            (
                "javascript test file renamed to a name node --test does not collect",
                vec![
                    fc("test_calc/calc.test.js", Some("const test = require('node:test');\ntest('adds', () => { assert.equal(add(2, 3), 5); });\n"), None),
                    fc("test_calc/calc.spec.js", None, Some("const test = require('node:test');\ntest('adds', () => { assert.equal(add(2, 3), 5); });\n")),
                ],
                1,
                "",
            ),
            (
                "javascript test file renamed to a backup name",
                vec![
                    fc("test/calc.test.js", Some("const test = require('node:test');\ntest('adds', () => { assert.equal(add(2, 3), 5); });\n"), None),
                    fc("test/calc.test.js.orig", None, Some("const test = require('node:test');\ntest('adds', () => { assert.equal(add(2, 3), 5); });\n")),
                ],
                1,
                "",
            ),
            (
                "javascript test file moved out of test/",
                vec![
                    fc("test/calc.js", Some("const test = require('node:test');\ntest('adds', () => { assert.equal(add(2, 3), 5); });\n"), None),
                    fc("lib/calc_checks.js", None, Some("const test = require('node:test');\ntest('adds', () => { assert.equal(add(2, 3), 5); });\n")),
                ],
                1,
                "",
            ),
            (
                "python test moved into a file of another folder",
                vec![
                    fc("tests/test_a.py", Some("import unittest\n\nclass TestAdd(unittest.TestCase):\n    def test_adds(self):\n        self.assertEqual(add(2, 3), 5)\n\n    def test_subs(self):\n        self.assertEqual(sub(5, 3), 2)\n"), Some("import unittest\n\nclass TestAdd(unittest.TestCase):\n    def test_adds(self):\n        self.assertEqual(add(2, 3), 5)\n")),
                    fc("tests/slow/test_b.py", None, Some("import unittest\n\nclass TestSub(unittest.TestCase):\n    def test_subs(self):\n        self.assertEqual(sub(5, 3), 2)\n")),
                ],
                1,
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
            // --- Issue 25: tests compiled out by a cfg the test run need not have.
            (
                "test module compiled for another platform",
                one("src/a.rs", RS, &rs(CFG_TEST, "#[cfg(target_os = \"windows\")]")),
                1,
                "need not satisfy",
            ),
            (
                "misspelled cfg on the test module",
                one("src/a.rs", RS, &rs(CFG_TEST, "#[cfg(tset)]")),
                1,
                "need not satisfy",
            ),
            (
                "cfg(test) narrowed with all(test, …), over several lines",
                one("src/a.rs", RS, &rs(CFG_TEST, "#[cfg(\n    all(test, feature = \"slow\")\n)]")),
                1,
                "need not satisfy",
            ),
            (
                "a feature nobody enables on one test",
                one("src/a.rs", RS, &rs("    #[test]\n    fn adds()", "    #[cfg(feature = \"never-on\")]\n    #[test]\n    fn adds()")),
                1,
                "need not satisfy",
            ),
            (
                "cfg_attr(…, ignore) on a test",
                one("src/a.rs", RS, &rs("    #[test]\n    fn adds()", "    #[test]\n    #[cfg_attr(not(target_os = \"windows\"), ignore)]\n    fn adds()")),
                1,
                "cfg_attr",
            ),
            (
                "an inner cfg compiles a test file out",
                one("tests/cli.rs", "#[test]\nfn runs() {\n    assert!(true);\n}\n", "#![cfg(windows)]\n#[test]\nfn runs() {\n    assert!(true);\n}\n"),
                1,
                "need not satisfy",
            ),
            (
                "a file module of tests compiled out",
                one("tests/tests.rs", "mod support;\nmod merge;\n", "mod support;\n#[cfg(feature = \"ci-only\")]\nmod merge;\n"),
                1,
                "need not satisfy",
            ),
            (
                "cfg(test) broadened (benign)",
                one("src/a.rs", RS, &rs(CFG_TEST, "#[cfg(any(test, feature = \"testing\"))]")),
                0,
                "",
            ),
            (
                "a new feature-gated module of new tests (benign)",
                one("src/a.rs", RS, &format!("{RS}\n#[cfg(feature = \"slow\")]\nmod slow {{\n    #[test]\n    fn big() {{\n        assert_eq!(super::add(1, 1), 2);\n    }}\n}}\n")),
                0,
                "",
            ),
            (
                "a new cfg(test) module with new tests (benign)",
                one("src/b.rs", "pub fn one() -> u8 {\n    1\n}\n", &format!("pub fn one() -> u8 {{\n    1\n}}\n\n{CFG_TEST}\nmod tests {{\n    #[test]\n    fn is_one() {{\n        assert_eq!(super::one(), 1);\n    }}\n}}\n")),
                0,
                "",
            ),
            // --- The assertion vocabulary redefined.
            (
                "a local macro shadows assert_eq!",
                one("src/a.rs", RS, &rs("    use super::*;\n", "    use super::*;\n\n    macro_rules! assert_eq {\n        ($($t:tt)*) => {};\n    }\n")),
                1,
                "redefines the assertion vocabulary",
            ),
            (
                "a no-op imported as assert!",
                one("src/a.rs", RS, &rs("    use super::*;\n", "    use super::*;\n    use crate::quiet as assert;\n")),
                1,
                "redefines the assertion vocabulary",
            ),
            (
                "unittest's assertEqual monkeypatched",
                one("tests/test_x.py", "import unittest\n\nclass T(unittest.TestCase):\n    def test_a(self):\n        self.assertEqual(f(), 1)\n", "import unittest\nunittest.TestCase.assertEqual = lambda *a, **k: None\n\nclass T(unittest.TestCase):\n    def test_a(self):\n        self.assertEqual(f(), 1)\n"),
                1,
                "redefines the assertion vocabulary",
            ),
            (
                "expect replaced in JavaScript",
                one("src/a.test.ts", "it('a', () => {\n  expect(a()).toBe(1);\n});\n", "expect = () => ({ toBe() {} });\nit('a', () => {\n  expect(a()).toBe(1);\n});\n"),
                1,
                "redefines the assertion vocabulary",
            ),
            (
                "pretty_assertions' assert_eq (benign)",
                one("src/a.rs", RS, &rs("    use super::*;\n", "    use super::*;\n    use pretty_assertions::assert_eq;\n")),
                0,
                "",
            ),
            // --- Early exits in any spelling, and conditions around assertions.
            (
                "return ();",
                one("src/a.rs", RS, &rs("        let err = 0.001;\n", "        let err = 0.001;\n        return ();\n")),
                1,
                "returns early",
            ),
            (
                "if true { return }",
                one("src/a.rs", RS, &rs("        let x = add(2, 2);\n", "        if true { return }\n        let x = add(2, 2);\n")),
                1,
                "returns early",
            ),
            (
                "process::exit(0) in a test",
                one("src/a.rs", RS, &rs("        let err = 0.001;\n", "        let err = 0.001;\n        std::process::exit(0);\n")),
                1,
                "returns early",
            ),
            (
                "a break out of the test's own loop",
                one("tests/l.rs", "#[test]\nfn each() {\n    for x in xs() {\n        assert!(ok(x));\n    }\n}\n", "#[test]\nfn each() {\n    for x in xs() {\n        break;\n        assert!(ok(x));\n    }\n}\n"),
                1,
                "returns early",
            ),
            (
                "an assertion put under a condition",
                one("src/a.rs", RS, &rs("        assert!(add(0, 0) == 0);\n", "        if std::env::var_os(\"CI\").is_none() {\n        assert!(add(0, 0) == 0);\n        }\n")),
                1,
                "puts the assertion",
            ),
            (
                "a return inside a new closure, and a new loop with a break (benign)",
                one("src/a.rs", RS, &rs("        let err = 0.001;\n", "        let err = 0.001;\n        let next = |x: i32| { return x + 1; };\n        for i in 0..3 {\n            if i > 1 {\n                break;\n            }\n            assert!(next(i) > i);\n        }\n")),
                0,
                "",
            ),
            (
                "python return at the top of a test",
                one("tests/test_x.py", "def test_a():\n    assert f() == 1\n", "def test_a():\n    return\n    assert f() == 1\n"),
                1,
                "returns early",
            ),
            (
                "python pytest.skip() in a test",
                one("tests/test_x.py", "def test_a():\n    assert f() == 1\n", "def test_a():\n    pytest.skip(\"later\")\n    assert f() == 1\n"),
                1,
                "returns early",
            ),
            (
                "python assertion swallowed by try",
                one("tests/test_x.py", "def test_a():\n    assert f() == 1\n", "def test_a():\n    try:\n        assert f() == 1\n    except AssertionError:\n        pass\n"),
                1,
                "puts the assertion",
            ),
            (
                "python tests under if False",
                one("tests/test_x.py", "def test_a():\n    assert f() == 1\n", "if False:\n    def test_a():\n        assert f() == 1\n"),
                1,
                "puts the test",
            ),
            (
                "pytestmark skips the module",
                one("tests/test_x.py", "import pytest\n\ndef test_a():\n    assert f() == 1\n", "import pytest\npytestmark = pytest.mark.skip(reason=\"slow\")\n\ndef test_a():\n    assert f() == 1\n"),
                1,
                "pytestmark",
            ),
            (
                "python nested helper with a return (benign)",
                one("tests/test_x.py", "def test_a():\n    x = f()\n    assert x == 1\n", "def test_a():\n    def first(xs):\n        return xs[0]\n    x = f()\n    assert x == 1\n    assert first([x]) == 1\n"),
                0,
                "",
            ),
            (
                "js return; at the top of a test",
                one("src/a.test.ts", "it('a', () => {\n  expect(a()).toBe(1);\n});\n", "it('a', () => {\n  return;\n  expect(a()).toBe(1);\n});\n"),
                1,
                "returns early",
            ),
            (
                "js test renamed and skipped at once",
                one("src/a.test.ts", "it('a', () => {\n  const x = a();\n  expect(x).toBe(1);\n});\n", "it.skip('b', () => {\n  const x = a();\n  expect(x).toBe(1);\n});\n"),
                1,
                "it.skip",
            ),
            (
                "js return in a callback, and a test renamed (benign)",
                one("src/a.test.ts", "it('finds rows', () => {\n  const rows = a();\n  expect(rows).toBe(1);\n});\n", "it('finds the rows', () => {\n  const rows = a();\n  const doubled = [rows].map((r) => { return r * 2; });\n  expect(rows).toBe(1);\n  expect(doubled).toEqual([2]);\n});\n"),
                0,
                "",
            ),
            // --- Module wiring and helpers.
            (
                "a test module's declaration removed while its file stays",
                one("tests/tests.rs", "mod support;\nmod merge;\n", "mod support;\n"),
                1,
                "no longer compiled",
            ),
            (
                "a module removed with its file (benign)",
                vec![
                    fc("src/lib.rs", Some("pub mod a;\nmod b;\n"), Some("pub mod a;\n")),
                    fc("src/b.rs", Some("pub fn b() {}\n"), None),
                ],
                0,
                "",
            ),
            (
                "a test helper rewritten",
                one("tests/support.rs", "pub fn valid(x: u8) -> bool {\n    x > 3\n}\n", "pub fn valid(x: u8) -> bool {\n    true\n}\n"),
                1,
                "rewrites the test helper",
            ),
            (
                "a new helper in a test module (benign)",
                one("src/a.rs", RS, &rs("    use super::*;\n", "    use super::*;\n\n    fn near(a: f64, b: f64) -> bool {\n        (a - b).abs() < 1e-9\n    }\n")),
                0,
                "",
            ),
            (
                "a helper in a test module rewritten",
                one(
                    "src/a.rs",
                    &rs("    use super::*;\n", "    use super::*;\n\n    fn near(a: f64, b: f64) -> bool {\n        (a - b).abs() < 1e-9\n    }\n"),
                    &rs("    use super::*;\n", "    use super::*;\n\n    fn near(a: f64, b: f64) -> bool {\n        a == a || b == b\n    }\n"),
                ),
                1,
                "rewrites the test helper `near`",
            ),
            (
                "a helper's message reworded, and a helper added (benign)",
                one("tests/support.rs", "pub fn run() -> String {\n    go().expect(\"spawn\")\n}\n", "pub fn run() -> String {\n    go().expect(\"the program runs\")\n}\n\npub fn twice() -> String {\n    run() + &run()\n}\n"),
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
