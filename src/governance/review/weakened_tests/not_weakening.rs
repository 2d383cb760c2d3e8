//! Changes to an assertion that do not weaken it: a rename (the test reads the same with
//! identifiers renamed one for one) and a check made exact (`assert!(v.contains(x))` →
//! `assert_eq!(v, [x])`). Tokenises assertions and the functions around them.

use std::collections::HashMap;

use super::assertions::{depth_change, skip_string, Unit};
use super::test_fns::{fn_name, JS_TESTS};
use super::{is_ident, Lang};

/// A text's tokens: string literals whole, identifiers and numbers, and every other character
/// alone; whitespace dropped.
pub(super) fn tokens(lang: Lang, s: &str) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let end = if c.is_whitespace() {
            i += 1;
            continue;
        } else if c == '"' || (lang != Lang::Rust && (c == '\'' || c == '`')) {
            skip_string(&chars, i, c) + 1
        } else if is_ident(c) {
            i + chars[i..].iter().take_while(|c| is_ident(**c)).count()
        } else {
            i + 1
        };
        let end = end.min(chars.len());
        out.push(chars[i..end].iter().collect());
        i = end;
    }
    out
}

pub(super) fn is_word(t: &str) -> bool {
    t.starts_with(|c: char| c.is_alphabetic() || c == '_')
}

/// Words a rename may not touch: literals and keywords, the assertion's own names, and
/// JavaScript's matchers (`toBe`, `toEqual`, …).
pub(super) fn fixed(w: &str) -> bool {
    const FIXED: &[&str] = &[
        "true",
        "false",
        "True",
        "False",
        "None",
        "null",
        "undefined",
        "Some",
        "Ok",
        "Err",
        "not",
        "and",
        "or",
        "is",
        "in",
        "expect",
        "self",
        "Self",
    ];
    FIXED.contains(&w)
        || w.contains("assert")
        || w.strip_prefix("to")
            .is_some_and(|m| m.starts_with(|c: char| c.is_ascii_uppercase()))
}

/// The text of the function (or test) around 1-based `line`, or the whole text when the line
/// is in none.
pub(super) fn enclosing(lang: Lang, text: &str, line: u32) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let at = (line as usize).saturating_sub(1).min(lines.len());
    let starts = |l: &str| {
        let t = l.trim();
        fn_name(l).is_some() || (lang == Lang::Js && JS_TESTS.iter().any(|c| t.starts_with(c)))
    };
    let Some(first) = (0..=at.min(lines.len().saturating_sub(1)))
        .rev()
        .find(|i| starts(lines[*i]))
    else {
        return text.to_string();
    };
    let indent = |l: &str| l.len() - l.trim_start().len();
    let mut last = first;
    if lang == Lang::Python {
        while last + 1 < lines.len()
            && (lines[last + 1].trim().is_empty() || indent(lines[last + 1]) > indent(lines[first]))
        {
            last += 1;
        }
    } else {
        let mut depth = 0;
        let mut opened = false;
        for (i, l) in lines.iter().enumerate().skip(first) {
            depth += depth_change(lang, l);
            opened |= depth > 0;
            last = i;
            if opened && depth <= 0 {
                break;
            }
        }
    }
    if last < at {
        return text.to_string();
    }
    lines[first..=last].join("\n")
}

/// Whether `toks` declare `name` as a local: after `let`, `mut`, `for`, `const` or `var`, or
/// assigned (`name = …`, not `x.name = …`).
pub(super) fn declares(toks: &[String], name: &str) -> bool {
    toks.iter().enumerate().any(|(i, t)| {
        let prev = i.checked_sub(1).map(|p| toks[p].as_str());
        let next = |k: usize| toks.get(i + k).map(String::as_str);
        t == name
            && (matches!(prev, Some("let" | "mut" | "for" | "const" | "var"))
                || (next(1) == Some("=") && next(2) != Some("=") && prev != Some(".")))
    })
}

/// Whether the function around `r` at base is the one around `a` at head with identifiers
/// renamed, one for one: a refactor, not a new expectation. Each renamed name is either gone
/// from the whole file and new to it (a helper or a constant renamed everywhere), or a local
/// both functions declare (`let before` → `let tip`), so that swapping in another existing
/// name (`LIMIT` → `OTHER_LIMIT`) still counts as a changed expectation.
/// `before` and `after` are the two functions' tokens, and `cx` the whole file's.
pub(super) fn renamed(before: &[String], after: &[String], cx: &FileWords) -> bool {
    if before.len() != after.len() || before == after {
        return false;
    }
    let mut map: HashMap<&str, &str> = HashMap::new();
    let mut back: HashMap<&str, &str> = HashMap::new();
    for (x, y) in before.iter().zip(after) {
        if x == y {
            continue;
        }
        if !is_word(x) || !is_word(y) || fixed(x) || fixed(y) {
            return false;
        }
        if *map.entry(x).or_insert(y) != y.as_str() || *back.entry(y).or_insert(x) != x.as_str() {
            return false;
        }
    }
    if map.is_empty() {
        return false;
    }
    map.iter().all(|(old, new)| {
        let fresh = !before.iter().any(|t| t == new) && !after.iter().any(|t| t == old);
        let everywhere = !cx.base.contains(*new) && !cx.head.contains(*old);
        let local = declares(before, old) && declares(after, new);
        fresh && (everywhere || local)
    })
}

/// A file's tokens at base and at head, as sets (for `renamed`, computed once per file).
pub(super) struct FileWords {
    pub(super) base: std::collections::HashSet<String>,
    pub(super) head: std::collections::HashSet<String>,
}

/// An assertion's parts: (the condition's tokens, the tokens of each side when it checks an
/// equality). Rust: the macro's arguments (a plain `assert!`'s first, `assert_eq!`'s first
/// two); Python: the expression after `assert`, split at a top-level `==`; JavaScript:
/// `expect(X)`, and `Y` of `.toBe(Y)`, `.toEqual(Y)` or `.toStrictEqual(Y)`.
pub(super) struct Shape {
    pub(super) condition: Vec<String>,
    pub(super) sides: Option<(Vec<String>, Vec<String>)>,
    pub(super) compound: bool,
}

/// The index of the bracket closing the one at `open`.
pub(super) fn closing(toks: &[String], open: usize) -> Option<usize> {
    let mut depth = 0;
    (open..toks.len()).find(|i| {
        match toks[*i].as_str() {
            "(" | "[" | "{" => depth += 1,
            ")" | "]" | "}" => depth -= 1,
            _ => {}
        }
        depth == 0
    })
}

pub(super) fn shape(lang: Lang, u: &Unit) -> Option<Shape> {
    let toks = tokens(lang, &u.raw);
    // Top-level (depth 1 for a call's arguments, 0 for Python) pieces between commas.
    let split = |toks: &[String], level: i32, at: &[&str]| -> Vec<Vec<String>> {
        let mut parts = vec![Vec::new()];
        let mut depth = 0;
        for t in toks {
            match t.as_str() {
                "(" | "[" | "{" => depth += 1,
                ")" | "]" | "}" => depth -= 1,
                _ => {}
            }
            if depth == level && at.contains(&t.as_str()) {
                parts.push(Vec::new());
            } else if let Some(p) = parts.last_mut() {
                p.push(t.clone());
            }
        }
        parts
    };
    let top_compound = |toks: &[String], level: i32| {
        let mut depth = 0;
        toks.windows(2).any(|w| {
            match w[0].as_str() {
                "(" | "[" | "{" => depth += 1,
                ")" | "]" | "}" => depth -= 1,
                _ => {}
            }
            depth == level
                && ((w[0] == "&" && w[1] == "&")
                    || (w[0] == "|" && w[1] == "|")
                    || w[1] == "and"
                    || w[1] == "or")
        })
    };
    match lang {
        Lang::Rust => {
            let name = toks.iter().position(|t| t.contains("assert"))?;
            let open = toks.iter().skip(name).position(|t| t == "(")? + name;
            let inner: Vec<String> = toks[open + 1..closing(&toks, open)?].to_vec();
            let args = split(&inner, 0, &[","]);
            let macro_name = toks[name].as_str();
            if macro_name.ends_with("assert_eq") {
                let (x, y) = (args.first()?.clone(), args.get(1)?.clone());
                Some(Shape {
                    condition: [x.clone(), y.clone()].concat(),
                    sides: Some((x, y)),
                    compound: false,
                })
            } else {
                let n = if macro_name.ends_with("assert") { 1 } else { 2 };
                let condition: Vec<String> = args.iter().take(n).flatten().cloned().collect();
                Some(Shape {
                    compound: top_compound(&inner, 0),
                    condition,
                    sides: None,
                })
            }
        }
        Lang::Python => {
            let at = toks.iter().position(|t| t == "assert")?;
            let expr = split(&toks[at + 1..], 0, &[","]).into_iter().next()?;
            let eq: Vec<usize> = (0..expr.len().saturating_sub(1))
                .filter(|i| expr[*i] == "=" && expr[*i + 1] == "=")
                .collect();
            let sides = match eq.as_slice() {
                [i] => {
                    let before_ok =
                        *i == 0 || !["!", "<", ">", "="].contains(&expr[i - 1].as_str());
                    before_ok.then(|| (expr[..*i].to_vec(), expr[i + 2..].to_vec()))
                }
                _ => None,
            };
            Some(Shape {
                compound: top_compound(&expr, 0),
                condition: expr,
                sides,
            })
        }
        Lang::Js => {
            let open = toks.iter().position(|t| t == "expect")? + 1;
            let close = closing(&toks, open)?;
            let subject = toks[open + 1..close].to_vec();
            let dot = toks.get(close + 1).is_some_and(|t| t == ".");
            let exact = matches!(
                toks.get(close + 2).map(String::as_str),
                Some("toBe" | "toEqual" | "toStrictEqual")
            );
            let args = close + 3;
            let sides = match (
                dot && exact && toks.get(args).is_some_and(|t| t == "("),
                closing(&toks, args),
            ) {
                (true, Some(end)) => Some((subject.clone(), toks[args + 1..end].to_vec())),
                _ => None,
            };
            Some(Shape {
                compound: top_compound(&subject, 0),
                condition: subject,
                sides,
            })
        }
    }
}

/// Whether `a` makes `r` exact: `r` checks no equality and is not a compound condition, `a`
/// checks an equality of two different sides, and every name `r` checks (not a method or
/// field) appears in `a` (`assert!(v.contains(x))` → `assert_eq!(v, [x])`, Python's
/// `assert rows` → `assert rows == [...]`, `expect(x).toBeTruthy()` → `expect(x).toBe(3)`).
/// Takes each side's [`shape`], computed once per unit by the caller: pairing every removed
/// assertion with every added one must not tokenise them again for each pair.
pub(super) fn strengthens(r: Option<&Shape>, a: Option<&Shape>) -> bool {
    let (Some(r), Some(a)) = (r, a) else {
        return false;
    };
    let Some((x, y)) = &a.sides else {
        return false;
    };
    if r.sides.is_some() || r.compound || x == y || x.is_empty() || y.is_empty() {
        return false;
    }
    let used: Vec<&String> = x.iter().chain(y).collect();
    let names: Vec<&String> = r
        .condition
        .iter()
        .enumerate()
        .filter(|(i, t)| is_word(t) && !fixed(t) && (*i == 0 || r.condition[i - 1] != "."))
        .map(|(_, t)| t)
        .collect();
    !names.is_empty() && names.iter().all(|n| used.contains(n))
}
