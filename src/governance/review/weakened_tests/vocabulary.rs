//! The assertion vocabulary redefined: a change that makes `assert_eq!`, `assertEqual` or
//! `expect` mean something else (a local `macro_rules!` that shadows the standard macro, a
//! monkeypatched `unittest.TestCase.assertEqual`, `expect = () => …`, a matcher replaced with
//! `expect.extend`), so that every existing assertion passes unchanged. Pure text in, the words
//! of a finding out.

use super::bodies::code_of;
use super::{is_ident, Lang};

/// Rust's assertion and failure macros (a local macro of one of these names shadows it).
pub(super) const RUST_MACROS: &[&str] = &[
    "assert",
    "assert_eq",
    "assert_ne",
    "debug_assert",
    "debug_assert_eq",
    "debug_assert_ne",
    "assert_matches",
    "debug_assert_matches",
    "panic",
    "unreachable",
    "todo",
    "unimplemented",
];

/// Crates whose assertion macros replace the standard ones with stricter or clearer output.
const RUST_ASSERT_CRATES: &[&str] = &["std", "core", "pretty_assertions", "similar_asserts"];

/// JavaScript names tests and assertions are made of.
const JS_NAMES: &[&str] = &[
    "expect", "assert", "it", "test", "describe", "jest", "vi", "chai",
];

/// Jest's and Vitest's own matchers (`expect.extend` may add others, never replace these).
const JS_MATCHERS: &[&str] = &[
    "toBe",
    "toEqual",
    "toStrictEqual",
    "toBeTruthy",
    "toBeFalsy",
    "toBeNull",
    "toBeDefined",
    "toBeUndefined",
    "toBeNaN",
    "toContain",
    "toContainEqual",
    "toMatch",
    "toMatchObject",
    "toMatchSnapshot",
    "toThrow",
    "toThrowError",
    "toHaveLength",
    "toHaveProperty",
    "toBeCloseTo",
    "toBeGreaterThan",
    "toBeGreaterThanOrEqual",
    "toBeLessThan",
    "toBeLessThanOrEqual",
    "toBeInstanceOf",
    "toHaveBeenCalled",
    "toHaveBeenCalledWith",
    "toHaveBeenCalledTimes",
];

/// Python's: unittest's `assert…` methods (camel case), `fail`, pytest's helpers, the
/// exception an assertion raises.
fn python_vocabulary(name: &str) -> bool {
    let camel = name
        .strip_prefix("assert")
        .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_uppercase()));
    camel
        || matches!(
            name,
            "fail" | "failureException" | "AssertionError" | "raises" | "approx" | "assert_"
        )
}

fn ident(s: &str) -> String {
    s.chars()
        .take_while(|c| is_ident(*c) || *c == '$')
        .collect()
}

/// The last name of a dotted target (`unittest.TestCase.assertEqual` → `assertEqual`), and
/// whether it had a dot.
fn last_name(target: &str) -> (String, bool) {
    let t = target.trim();
    let (dotted, last) = match t.rsplit_once('.') {
        Some((_, l)) => (true, l),
        None => (false, t),
    };
    // `global['expect']`, `self["assertEqual"]`.
    let last = last
        .rsplit(['[', '\'', '"'])
        .find(|p| !p.is_empty() && *p != "]")
        .unwrap_or(last);
    (
        ident(last.trim_start_matches(['\'', '"'])),
        dotted || t.contains('['),
    )
}

/// The target and value of an assignment on a line (`a.b = c`, not `==`, `=>`, `<=`, `!=`,
/// `+=`), outside strings.
fn assignment(code: &str) -> Option<(&str, &str)> {
    let bytes: Vec<char> = code.chars().collect();
    for (k, (i, c)) in code.char_indices().enumerate() {
        if c != '=' {
            continue;
        }
        let prev = if k > 0 { bytes[k - 1] } else { ' ' };
        let next = bytes.get(k + 1).copied().unwrap_or(' ');
        if next == '=' || next == '>' || "=!<>+-*/%&|^:".contains(prev) {
            return None;
        }
        return Some((&code[..i], &code[i + 1..]));
    }
    None
}

/// Whether an added line redefines the assertion vocabulary; the words for the finding.
/// `head` and `at` (0-based) give the lines after it, for `expect.extend({ … })`; `known`
/// tells whether the base of the change already invokes a macro (`name!`), for a local macro
/// that shadows a crate's own assertion.
pub(super) fn redefines(
    lang: Lang,
    head: &[&str],
    at: usize,
    known: &dyn Fn(&str) -> bool,
) -> Option<String> {
    let line = head.get(at)?;
    let code = code_of(lang, line);
    let t = code.trim();
    match lang {
        Lang::Rust => rust(head, at, t, known),
        Lang::Python => {
            let joined = continued(head, at);
            python(&joined, code_of(lang, &joined).trim())
        }
        Lang::Js => js(line, t, head, at),
    }
}

/// A Python line joined with the lines its trailing backslashes continue it on.
fn continued(head: &[&str], at: usize) -> String {
    let mut out = String::new();
    for l in head.iter().skip(at).take(20) {
        match l.trim_end().strip_suffix('\\') {
            Some(part) => {
                out.push_str(part);
                out.push(' ');
            }
            None => {
                out.push_str(l);
                break;
            }
        }
    }
    out
}

/// Text with its `/* … */` comments removed.
fn without_block_comments(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("/*") {
        out.push_str(&rest[..i]);
        out.push(' ');
        rest = rest[i + 2..]
            .find("*/")
            .map_or("", |j| &rest[i + 2 + j + 2..]);
    }
    out.push_str(rest);
    out
}

/// The name a `macro_rules!` that starts on `head[at]` defines, read by tokens: comments,
/// whitespace and newlines between them, and a raw identifier's `r#`, do not count.
fn macro_name(head: &[&str], at: usize) -> Option<String> {
    let code = code_of(Lang::Rust, head.get(at)?);
    let starts = code.match_indices("macro_rules").any(|(i, _)| {
        !code[..i].chars().next_back().is_some_and(is_ident)
            && !code[i + "macro_rules".len()..].starts_with(is_ident)
    });
    if !starts {
        return None;
    }
    let mut text = String::new();
    for l in head.iter().skip(at).take(8) {
        text.push_str(&code_of(Lang::Rust, l));
        text.push('\n');
    }
    let text = without_block_comments(&text);
    let i = text.find("macro_rules")?;
    let rest = text[i + "macro_rules".len()..]
        .trim_start()
        .strip_prefix('!')?;
    let rest = rest.trim_start();
    let rest = rest.strip_prefix("r#").unwrap_or(rest);
    Some(ident(rest))
}

fn rust(head: &[&str], at: usize, t: &str, known: &dyn Fn(&str) -> bool) -> Option<String> {
    if let Some(name) = macro_name(head, at) {
        if RUST_MACROS.contains(&name.as_str()) || (name.contains("assert") && known(&name)) {
            return Some(format!(
                "a local `macro_rules! {name}` shadows the assertion `{name}!`"
            ));
        }
    }
    let stmt = t.strip_prefix("pub ").unwrap_or(t);
    let stmt = stmt.strip_prefix("pub(crate) ").unwrap_or(stmt);
    if let Some(path) = stmt.strip_prefix("use ") {
        let path = &path.replace("r#", "");
        let root = ident(path.trim_start_matches("::"));
        let items: Vec<String> = path
            .split(|c: char| !(is_ident(c)))
            .filter(|w| !w.is_empty())
            .map(str::to_string)
            .collect();
        // `use x as assert_eq;`, `use x::noop as test;`
        if let Some(pos) = items.iter().position(|w| w == "as") {
            if let Some(alias) = items.get(pos + 1) {
                if RUST_MACROS.contains(&alias.as_str()) || alias == "test" {
                    return Some(format!("`use … as {alias}` replaces `{alias}`"));
                }
            }
        }
        if !RUST_ASSERT_CRATES.contains(&root.as_str()) {
            if let Some(m) = items
                .iter()
                .skip(1)
                .find(|w| RUST_MACROS.contains(&w.as_str()))
            {
                return Some(format!("`use {root}::…::{m}` replaces the standard `{m}!`"));
            }
        }
    }
    None
}

/// The objects of Python's test frameworks: an attribute set on one changes every test.
const PY_FRAMEWORK: &[&str] = &[
    "unittest",
    "TestCase",
    "IsolatedAsyncioTestCase",
    "FunctionTestCase",
    "TestResult",
    "TextTestResult",
    "TestLoader",
    "TextTestRunner",
    "TestSuite",
    "TestProgram",
    "pytest",
    "_pytest",
    "pluggy",
];

/// Whether a Python expression names a test framework's object (`unittest.TestCase`,
/// `_pytest.python.Function`).
fn framework_object(expr: &str) -> Option<String> {
    expr.split(|c: char| !(is_ident(c) || c == '.'))
        .flat_map(|w| w.split('.'))
        .find(|w| PY_FRAMEWORK.contains(w))
        .map(str::to_string)
}

fn python(line: &str, t: &str) -> Option<String> {
    // `setattr(TestCase, …)`, `type.__setattr__(unittest.TestCase, …)`, in a loop or not.
    for call in ["__setattr__(", "setattr("] {
        if let Some((_, rest)) = t.split_once(call) {
            let first = rest.split(',').next().unwrap_or("");
            if let Some(obj) = framework_object(first) {
                return Some(format!(
                    "`{call}{first}, …)` changes the test framework's `{obj}`"
                ));
            }
        }
    }
    if let Some(rest) = t
        .strip_prefix("def ")
        .or_else(|| t.strip_prefix("async def "))
    {
        let name = ident(rest.trim_start());
        if python_vocabulary(&name) && name != "assert_" {
            return Some(format!("`def {name}` overrides the assertion `{name}`"));
        }
    }
    // setattr(X, "assertEqual", …), monkeypatch.setattr("unittest.TestCase.assertEqual", …)
    if t.contains("setattr(") {
        let raw = line.trim();
        let names = raw
            .split(['"', '\''])
            .skip(1)
            .step_by(2)
            .map(|s| s.rsplit('.').next().unwrap_or(s).to_string())
            .collect::<Vec<_>>();
        if let Some(n) = names.iter().find(|n| python_vocabulary(n)) {
            return Some(format!("`setattr` replaces the assertion `{n}`"));
        }
    }
    let (target, _) = assignment(line.trim())?;
    let target = target.trim();
    if target.starts_with("builtins.") || target.starts_with("__builtins__") {
        return Some(format!("assigning `{target}` changes a built-in"));
    }
    if target.starts_with("pytest.") {
        return Some(format!("assigning `{target}` replaces a part of pytest"));
    }
    let (name, dotted) = last_name(target);
    let plain = target.chars().all(|c| is_ident(c) || c == '.');
    if let Some((object, _)) = target.rsplit_once('.').filter(|_| plain) {
        if let Some(obj) = framework_object(object) {
            return Some(format!(
                "assigning `{target}` changes the test framework's `{obj}`"
            ));
        }
    }
    let bare_ok = name.starts_with("assert") || name == "AssertionError";
    (python_vocabulary(&name) && (dotted || bare_ok))
        .then(|| format!("assigning `{target}` replaces the assertion `{name}`"))
}

fn js(line: &str, t: &str, head: &[&str], at: usize) -> Option<String> {
    let lang = Lang::Js;

    let t = t.strip_prefix("export ").unwrap_or(t);
    if let Some(rest) = t
        .strip_prefix("function ")
        .or_else(|| t.strip_prefix("async function "))
    {
        let name = ident(rest.trim_start());
        if JS_NAMES.contains(&name.as_str()) {
            return Some(format!("`function {name}` replaces `{name}`"));
        }
    }
    for m in ["jest.mock(", "vi.mock(", "jest.doMock(", "vi.doMock("] {
        if let Some(rest) = line.trim().split(m).nth(1) {
            let module = rest.trim_start().trim_start_matches(['\'', '"', '`']);
            let module: String = module
                .chars()
                .take_while(|c| !matches!(c, '\'' | '"' | '`'))
                .collect();
            if matches!(
                module.as_str(),
                "assert"
                    | "node:assert"
                    | "assert/strict"
                    | "node:assert/strict"
                    | "expect"
                    | "chai"
                    | "@jest/globals"
                    | "vitest"
                    | "@jest/expect"
            ) {
                return Some(format!("`{m}'{module}')` replaces the assertions"));
            }
        }
    }
    // `Object.assign(assert, { equal() {} })`: the assertion object's own methods replaced.
    for call in [
        "Object.assign(",
        "Object.defineProperty(",
        "Object.defineProperties(",
        "Object.setPrototypeOf(",
        "Reflect.set(",
        "Reflect.defineProperty(",
    ] {
        for (i, _) in t.match_indices(call) {
            let first = t[i + call.len()..].trim_start();
            let name = ident(first);
            let whole = first[name.len()..].trim_start().starts_with([',', '.']);
            if whole && JS_NAMES.contains(&name.as_str()) {
                return Some(format!(
                    "`{call}{name}, …)` replaces the methods of `{name}`"
                ));
            }
        }
    }
    if t.contains("Object.defineProperty(") || t.contains("Reflect.set(") {
        let raw = line.trim();
        if let Some(n) = raw
            .split(['"', '\''])
            .skip(1)
            .step_by(2)
            .find(|n| JS_NAMES.contains(n) || JS_MATCHERS.contains(n))
        {
            return Some(format!("`defineProperty` replaces `{n}`"));
        }
    }
    if t.contains("expect.extend(") {
        let window = head.iter().skip(at).take(40);
        for l in window {
            let c = code_of(lang, l);
            let c = c.trim().trim_start_matches("async ");
            let key = ident(c);
            let defines = c[key.len()..].trim_start().starts_with([':', '(']);
            if JS_MATCHERS.contains(&key.as_str()) && defines {
                return Some(format!("`expect.extend` replaces the matcher `{key}`"));
            }
        }
    }
    for kw in ["const ", "let ", "var "] {
        if let Some(rest) = t.strip_prefix(kw) {
            let name = ident(rest);
            if !JS_NAMES.contains(&name.as_str()) {
                return None;
            }
            let value = rest[name.len()..]
                .trim_start()
                .strip_prefix('=')?
                .trim_start();
            let made_up = value.contains("=>")
                || value.starts_with("function")
                || value.starts_with("async")
                || value.starts_with('{')
                || value.starts_with('(')
                || value.starts_with("new ");
            return made_up
                .then(|| format!("`{kw}{name} = …` replaces `{name}` with a function of its own"));
        }
    }
    let (target, _) = assignment(line.trim())?;
    let target = target.trim();
    let (name, dotted) = last_name(target);
    let object = target.split(['.', '[']).next().unwrap_or("").trim();
    let global = matches!(object, "global" | "globalThis" | "window" | "self");
    // `globalThis['exp' + 'ect'] = …`: a computed key may be any name.
    let key = code_of(lang, target);
    // Browser code sets `window[name]` for its own ends; Node's globals are the test runner's.
    if matches!(object, "global" | "globalThis") {
        if let Some((_, k)) = key.split_once('[') {
            let k = k.trim_end().trim_end_matches(']').trim();
            if k != "''" && k != "\"\"" {
                return Some(format!(
                    "assigning `{target}` sets a global by a computed name"
                ));
            }
        }
    }
    let replaced = (JS_NAMES.contains(&name.as_str()) && (!dotted || global))
        || (dotted && JS_MATCHERS.contains(&name.as_str()))
        || (dotted && matches!(object, "assert" | "expect" | "chai"));
    replaced.then(|| format!("assigning `{target}` replaces `{name}`"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redefinitions_of_the_assertion_vocabulary() {
        let known = |n: &str| n == "assert_close";
        // (language, line, whether it redefines)
        let cases: &[(Lang, &str, bool)] = &[
            (Lang::Rust, "macro_rules! assert_eq {", true),
            (
                Lang::Rust,
                "macro_rules! assert_eq { ($($t:tt)*) => {} }",
                true,
            ),
            (Lang::Rust, "macro_rules! assert_close {", true),
            (Lang::Rust, "macro_rules! assert_json_matches {", false),
            (Lang::Rust, "use crate::noop as assert;", true),
            (Lang::Rust, "macro_rules! r#assert_eq {", true),
            (Lang::Rust, "macro_rules! /* local */ assert_eq {", true),
            (Lang::Rust, "macro_rules! r#assert_json_matches {", false),
            (Lang::Rust, "use crate::noop as r#assert;", true),
            (
                Lang::Python,
                "type.__setattr__(unittest.TestCase, \"assert\" \"Equal\", lambda *a: None)",
                true,
            ),
            (
                Lang::Python,
                "        setattr(TestCase, name, lambda *a, **k: None)",
                true,
            ),
            (
                Lang::Python,
                "unittest.TestCase._baseAssertEqual = lambda *a: None",
                true,
            ),
            (
                Lang::Python,
                "_pytest.python.Function.runtest = lambda self: None",
                true,
            ),
            (Lang::Python, "setattr(config, \"timeout\", 3)", false),
            (Lang::Python, "self.maxDiff = None", false),
            (
                Lang::Js,
                "globalThis['exp' + 'ect'] = () => ({ toBe() {} });",
                true,
            ),
            (Lang::Js, "global['fetch'] = fakeFetch;", false),
            (Lang::Js, "window[callbackName] = onData;", false),
            (
                Lang::Rust,
                "use noop_asserts::{assert_eq, assert_ne};",
                true,
            ),
            (Lang::Rust, "use pretty_assertions::assert_eq;", false),
            (Lang::Rust, "use std::collections::HashMap;", false),
            (
                Lang::Python,
                "unittest.TestCase.assertEqual = lambda *a, **k: None",
                true,
            ),
            (Lang::Python, "TestCase.assertTrue = _ok", true),
            (Lang::Python, "self.assertEqual = print", true),
            (
                Lang::Python,
                "setattr(unittest.TestCase, 'assertEqual', noop)",
                true,
            ),
            (
                Lang::Python,
                "monkeypatch.setattr('unittest.TestCase.assertIn', noop)",
                true,
            ),
            (Lang::Python, "    def assertEqual(self, a, b):", true),
            (Lang::Python, "builtins.AssertionError = Exception", true),
            (Lang::Python, "pytest.fail = lambda *a: None", true),
            (Lang::Python, "def assert_valid(row):", false),
            (Lang::Python, "result = self.assertEqual(a, b)", false),
            (Lang::Python, "expected = 3", false),
            (Lang::Js, "expect = () => ({ toBe() {} });", true),
            (Lang::Js, "global.expect = () => ({});", true),
            (Lang::Js, "globalThis['expect'] = noop;", true),
            (Lang::Js, "const expect = () => ({ toEqual() {} });", true),
            (Lang::Js, "function assert() {}", true),
            (Lang::Js, "jest.mock('assert', () => () => {});", true),
            (Lang::Js, "assert.strictEqual = () => {};", true),
            (
                Lang::Js,
                "Object.defineProperty(global, 'expect', { value: noop });",
                true,
            ),
            (
                Lang::Js,
                "Object.assign(assert, { strictEqual() {}, deepEqual() {} });",
                true,
            ),
            (
                Lang::Js,
                "Object.defineProperty(assert.strict, 'equal', { value: () => {} });",
                true,
            ),
            (Lang::Js, "Object.setPrototypeOf(expect, noop);", true),
            (Lang::Js, "Object.assign(options, defaults);", false),
            (Lang::Js, "Object.assign(tests, more);", false),
            (Lang::Js, "const assert = require('node:assert');", false),
            (
                Lang::Js,
                "const { expect } = require('@jest/globals');",
                false,
            ),
            (Lang::Js, "const expect = chai.expect;", false),
            (Lang::Js, "const expected = () => 3;", false),
            (Lang::Js, "if (a === b) { c = d; }", false),
        ];
        let mut failures = Vec::new();
        for (lang, line, want) in cases {
            let got = redefines(*lang, &[line], 0, &known);
            if got.is_some() != *want {
                failures.push(format!("{line}: {got:?}"));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
        let extend = [
            "expect.extend({",
            "  toBe(received, expected) {",
            "    return { pass: true };",
            "  },",
            "});",
        ];
        assert!(redefines(Lang::Js, &extend, 0, &known).is_some());
        let custom = [
            "expect.extend({",
            "  toBeWithinRange(x, a, b) {",
            "  },",
            "});",
        ];
        assert!(redefines(Lang::Js, &custom, 0, &known).is_none());
        // Over several lines: the macro's name on the next line or after a comment, an
        // assignment continued with a backslash.
        let spread: &[&[&str]] = &[
            &[
                "macro_rules!",
                "    assert_eq {",
                "    ($($t:tt)*) => {};",
                "}",
            ],
            &["macro_rules! /* a", " comment */ r#assert_eq {"],
            &[
                "unittest.TestCase.assertEqual \\",
                "    = lambda *a, **k: None",
            ],
        ];
        for lines in spread {
            let lang = if lines[0].starts_with("macro") {
                Lang::Rust
            } else {
                Lang::Python
            };
            assert!(redefines(lang, lines, 0, &known).is_some(), "{lines:?}");
        }
    }
}
