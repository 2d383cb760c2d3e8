//! The test functions a file declares, per language (Rust's `#[test]` and runtimes'
//! `#[<crate>::test]`, Python's `def test…`, JavaScript's `it(`/`test(` and kin), and what item
//! an attribute or decorator applies to. Pure text in, names and lines out.

use super::{first_string, ident_at, Lang};

/// `#[test]`, or a runtime's `#[<crate>::test]` / `#[<crate>::test(...)]`.
pub(super) fn is_test_attr(t: &str) -> bool {
    let Some(inner) = t.strip_prefix("#[") else {
        return false;
    };
    let path = inner.split([']', '(']).next().unwrap_or("").trim();
    path == "test" || path.ends_with("::test")
}

/// The function a line declares, if it does.
pub(super) fn fn_name(line: &str) -> Option<String> {
    let t = line.trim();
    if t.starts_with("//") || t.starts_with("#[") {
        return None;
    }
    let mut words = t.split_whitespace();
    while let Some(w) = words.next() {
        if w == "fn" || w == "def" {
            let name = ident_at(words.next()?);
            return (!name.is_empty()).then_some(name);
        }
        if w.contains('(') || w.contains('{') {
            break;
        }
    }
    None
}

/// JavaScript calls that declare a test (the skipped and focused ones count as tests too: they
/// have their own rule).
pub(super) const JS_TESTS: &[&str] = &[
    "it(",
    "test(",
    "it.only(",
    "test.only(",
    "it.skip(",
    "test.skip(",
    "xit(",
    "xtest(",
    "fit(",
    "it.concurrent(",
    "test.concurrent(",
];

/// The tests a file declares: (1-based line, name).
pub(super) fn tests_in(lang: Lang, text: &str) -> Vec<(u32, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let t = l.trim();
        let n = i as u32 + 1;
        match lang {
            Lang::Rust if is_test_attr(t) => {
                let mut name = None;
                for next in lines.iter().skip(i + 1).take(12) {
                    if is_test_attr(next.trim()) {
                        break;
                    }
                    if let Some(f) = fn_name(next) {
                        name = Some(f);
                        break;
                    }
                }
                out.push((n, name.unwrap_or_else(|| format!("(the test at line {n})"))));
            }
            Lang::Python => {
                let def = t.strip_prefix("async ").unwrap_or(t);
                if let Some(rest) = def.strip_prefix("def test") {
                    out.push((n, format!("test{}", ident_at(rest))));
                }
            }
            Lang::Js => {
                if let Some(call) = JS_TESTS.iter().find(|c| t.starts_with(**c)) {
                    let name = first_string(&t[call.len()..])
                        .map(str::to_string)
                        .unwrap_or_else(|| format!("(the test at line {n})"));
                    out.push((n, name));
                }
            }
            _ => {}
        }
    }
    out
}

/// What the item after line `idx` (0-based) is, skipping attributes, decorators, comments.
pub(super) enum Target {
    Fn(String),
    Mod(String),
    Other,
}

pub(super) fn target_after(lang: Lang, lines: &[&str], idx: usize) -> Target {
    for l in lines.iter().skip(idx + 1).take(12) {
        let t = l.trim();
        if t.is_empty() || t.starts_with(lang.comment()) || t.starts_with("#[") {
            continue;
        }
        if lang == Lang::Python && t.starts_with('@') {
            continue;
        }
        if lang == Lang::Rust {
            if let Some((name, _)) = crate::governance::review::wiring::mod_decl(t) {
                return Target::Mod(name);
            }
        }
        return fn_name(t).map_or(Target::Other, Target::Fn);
    }
    Target::Other
}
