//! Tests and helpers as spans of lines, the tests of base paired with those of head (by name,
//! or by body when renamed), and what encloses a line (its blocks: `if`, loops, closures,
//! `try:`…). The rules over them: control flow added to an existing test that can leave it
//! before its assertions, an existing assertion or test put under a condition, and a test
//! helper rewritten. Pure text in, facts out.

use std::collections::HashMap;

use super::assertions::{assertions, skip_string};
use super::test_fns::{fn_name, tests_in};
use super::{is_ident, shown, Lang};

/// A test (or a helper) in a text: its name, the line that declares it, the line its body
/// opens on, and its last line (0-based, inclusive).
#[derive(Debug, Clone)]
pub(super) struct Span {
    pub(super) name: String,
    pub(super) decl: usize,
    pub(super) open: usize,
    pub(super) end: usize,
}

impl Span {
    /// The body's lines (after the line it opens on).
    fn body<'t>(&self, lines: &[&'t str]) -> Vec<&'t str> {
        lines
            .get(self.open + 1..=self.end.min(lines.len().saturating_sub(1)))
            .map(<[&str]>::to_vec)
            .unwrap_or_default()
    }
}

/// Where each line's first block closes, computed in one pass (so that the spans of every
/// test of a large file cost linear time, whatever their text): braces for Rust and
/// JavaScript, or every bracket (a JavaScript test call's `(`), indentation for Python (a line
/// ending with `:`, closed at the last line indented deeper).
pub(super) struct Blocks {
    close: Vec<u32>,
    /// Each line's code ([`code_of`]), computed once.
    codes: Vec<String>,
}

impl Blocks {
    pub(super) fn of(lang: Lang, lines: &[&str], brackets: bool) -> Blocks {
        let mut close = vec![NONE; lines.len()];
        let codes: Vec<String> = lines.iter().map(|l| code_of(lang, l)).collect();
        if lang == Lang::Python {
            let mut stack: Vec<(usize, usize)> = Vec::new();
            let mut last = 0usize;
            for (i, l) in lines.iter().enumerate() {
                let code = &codes[i];
                if code.trim().is_empty() {
                    continue;
                }
                let ind = indent_of(l);
                while stack.last().is_some_and(|s| s.0 >= ind) {
                    if let Some((_, at)) = stack.pop() {
                        close[at] = last.max(at) as u32;
                    }
                }
                if code.trim_end().ends_with(':') {
                    stack.push((ind, i));
                }
                last = i;
            }
            for (_, at) in stack {
                close[at] = last.max(at) as u32;
            }
            return Blocks { close, codes };
        }
        // (line, whether it is the line's first opener)
        let mut stack: Vec<(usize, bool)> = Vec::new();
        for (i, code) in codes.iter().enumerate() {
            let mut first = true;
            for c in code.chars() {
                let (opens, closes) = if brackets {
                    (matches!(c, '(' | '[' | '{'), matches!(c, ')' | ']' | '}'))
                } else {
                    (c == '{', c == '}')
                };
                if opens {
                    stack.push((i, first));
                    first = false;
                } else if closes {
                    if let Some((at, true)) = stack.pop() {
                        if close[at] == NONE {
                            close[at] = i as u32;
                        }
                    }
                }
            }
        }
        Blocks { close, codes }
    }
}

impl Blocks {
    /// The last line of the first block opened on line `i`, if one is.
    pub(super) fn end_of(&self, i: usize) -> Option<usize> {
        self.close
            .get(i)
            .filter(|c| **c != NONE)
            .map(|c| *c as usize)
    }
}

/// The block a declaration at line `from` opens (within the 20 lines after it): the line its
/// body opens on and its last line. `None` for a declaration without a body (`fn f();`).
fn block_end(
    lang: Lang,
    lines: &[&str],
    blocks: &Blocks,
    from: usize,
    brackets: bool,
) -> Option<(usize, usize)> {
    for j in from..lines.len().min(from + 21) {
        let code = &blocks.codes[j];
        if lang != Lang::Python && !brackets {
            let brace = code.find('{');
            if code.find(';').is_some_and(|s| brace.is_none_or(|b| s < b)) {
                return None;
            }
        }
        let end = blocks.close[j];
        if end == NONE {
            continue;
        }
        let end = end as usize;
        // A JavaScript test's body opens on the line of its callback's `{`, not its `(`.
        let open = if brackets {
            (j..=end.min(lines.len() - 1))
                .find(|k| blocks.codes[*k].contains('{'))
                .unwrap_or(j)
        } else {
            j
        };
        return Some((open, end.max(open)));
    }
    None
}

fn indent_of(l: &str) -> usize {
    l.len() - l.trim_start().len()
}

/// A line without its string and character literals' contents and its trailing comment.
pub(super) fn code_of(lang: Lang, line: &str) -> String {
    let chars: Vec<char> = line.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '"' | '`' => {
                i = skip_string(&chars, i, c);
                out.push_str("\"\"");
            }
            '\'' if lang != Lang::Rust => {
                i = skip_string(&chars, i, c);
                out.push_str("''");
            }
            '\'' => {
                if chars.get(i + 1) == Some(&'\\') {
                    i = skip_string(&chars, i, '\'');
                } else if chars.get(i + 2) == Some(&'\'') {
                    i += 2;
                } else {
                    out.push(c);
                }
            }
            '/' if lang != Lang::Python && chars.get(i + 1) == Some(&'/') => break,
            '#' if lang == Lang::Python => break,
            _ => out.push(c),
        }
        i += 1;
    }
    out
}

/// The tests a text declares, as spans.
pub(super) fn test_spans(lang: Lang, text: &str) -> Vec<Span> {
    let lines: Vec<&str> = text.lines().collect();
    let blocks = Blocks::of(lang, &lines, lang == Lang::Js);
    let mut out = Vec::new();
    for (line, name) in tests_in(lang, text) {
        let at = line as usize - 1;
        let decl = match lang {
            // The `fn` after the attribute.
            Lang::Rust => {
                match (at..lines.len().min(at + 13)).find(|i| fn_name(lines[*i]).is_some()) {
                    Some(d) => d,
                    None => continue,
                }
            }
            _ => at,
        };
        if let Some((open, end)) = block_end(lang, &lines, &blocks, decl, lang == Lang::Js) {
            out.push(Span {
                name,
                decl,
                open,
                end,
            });
        }
    }
    out
}

/// The functions a text declares that are not tests (helpers), as spans: Rust `fn`, Python
/// `def`, JavaScript `function f(` and `const f = (…) =>`.
pub(super) fn helper_spans(lang: Lang, text: &str) -> Vec<Span> {
    let lines: Vec<&str> = text.lines().collect();
    let tests: std::collections::HashSet<usize> =
        test_spans(lang, text).into_iter().map(|s| s.decl).collect();
    let blocks = Blocks::of(lang, &lines, false);
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if tests.contains(&i) {
            continue;
        }
        let name = match lang {
            Lang::Rust | Lang::Python => fn_name(l),
            Lang::Js => js_function(l),
        };
        let Some(name) = name else { continue };
        if lang == Lang::Python && name.starts_with("test") {
            continue;
        }
        if let Some((open, end)) = block_end(lang, &lines, &blocks, i, false) {
            out.push(Span {
                name,
                decl: i,
                open,
                end,
            });
        }
    }
    out
}

/// The function a JavaScript line declares: `function f(`, `async function f(`, or
/// `const f = (…) =>` / `= function`.
fn js_function(l: &str) -> Option<String> {
    let t = l.trim();
    let t = t.strip_prefix("export ").unwrap_or(t);
    let t = t.strip_prefix("async ").unwrap_or(t);
    if let Some(rest) = t.strip_prefix("function ") {
        let name: String = rest
            .trim_start()
            .chars()
            .take_while(|c| is_ident(*c) || *c == '$')
            .collect();
        return (!name.is_empty()).then_some(name);
    }
    for kw in ["const ", "let ", "var "] {
        if let Some(rest) = t.strip_prefix(kw) {
            let name: String = rest
                .chars()
                .take_while(|c| is_ident(*c) || *c == '$')
                .collect();
            let after = rest[name.len()..].trim_start();
            let rhs = after.strip_prefix('=')?.trim_start();
            let func =
                rhs.starts_with("function") || rhs.starts_with("async") || rhs.contains("=>");
            return (!name.is_empty() && func).then_some(name);
        }
    }
    None
}

/// Each head test paired with the base test it was: same name first, then (renamed) the base
/// test whose body shares the most lines with it, at least half of the larger body's.
pub(super) fn pair(lang: Lang, base: &str, head: &str) -> Vec<(Span, Span)> {
    let b_lines: Vec<&str> = base.lines().collect();
    let h_lines: Vec<&str> = head.lines().collect();
    let before = test_spans(lang, base);
    let after = test_spans(lang, head);
    let mut used = vec![false; before.len()];
    let mut by_name: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, b) in before.iter().enumerate().rev() {
        by_name.entry(b.name.as_str()).or_default().push(i);
    }
    let mut out = Vec::new();
    let mut unpaired = Vec::new();
    for h in after {
        match by_name.get_mut(h.name.as_str()).and_then(Vec::pop) {
            Some(i) => {
                used[i] = true;
                out.push((before[i].clone(), h));
            }
            None => unpaired.push(h),
        }
    }
    // Renames: bounded, as the gate runs this at every evaluation.
    if unpaired.len() * before.len() > 20_000 {
        return out;
    }
    for h in unpaired {
        let hb = trimmed(&h.body(&h_lines));
        let best = before
            .iter()
            .enumerate()
            .filter(|(i, _)| !used[*i])
            .map(|(i, b)| {
                let bb = trimmed(&b.body(&b_lines));
                (i, common(&bb, &hb), bb.len().max(hb.len()))
            })
            .filter(|(_, c, n)| *n > 0 && c * 2 >= *n)
            .max_by_key(|(_, c, _)| *c);
        if let Some((i, _, _)) = best {
            used[i] = true;
            out.push((before[i].clone(), h));
        }
    }
    out
}

fn trimmed<'t>(lines: &[&'t str]) -> Vec<&'t str> {
    lines
        .iter()
        .map(|l| l.trim())
        .filter(|l| !l.is_empty())
        .collect()
}

/// How many lines two bodies share (as multisets).
fn common(a: &[&str], b: &[&str]) -> usize {
    let mut pool: HashMap<&str, usize> = HashMap::new();
    for l in a {
        *pool.entry(l).or_default() += 1;
    }
    b.iter()
        .filter(|l| match pool.get_mut(**l) {
            Some(n) if *n > 0 => {
                *n -= 1;
                true
            }
            _ => false,
        })
        .count()
}

/// What encloses each line: the innermost block open at its start (the line that opened it),
/// and each block's own enclosing block — a tree over the lines, in linear space. Blocks are
/// braces in Rust and JavaScript, lines ending with `:` in Python.
pub(super) struct Nest {
    top: Vec<u32>,
    parent: Vec<u32>,
}

const NONE: u32 = u32::MAX;

impl Nest {
    pub(super) fn of(lang: Lang, lines: &[&str]) -> Nest {
        let mut top = vec![NONE; lines.len()];
        let mut parent = vec![NONE; lines.len()];
        if lang == Lang::Python {
            let mut stack: Vec<(usize, usize)> = Vec::new();
            for (i, l) in lines.iter().enumerate() {
                let code = code_of(lang, l);
                if code.trim().is_empty() {
                    top[i] = stack.last().map_or(NONE, |s| s.1 as u32);
                    continue;
                }
                let ind = indent_of(l);
                while stack.last().is_some_and(|s| s.0 >= ind) {
                    stack.pop();
                }
                top[i] = stack.last().map_or(NONE, |s| s.1 as u32);
                if code.trim_end().ends_with(':') {
                    parent[i] = top[i];
                    stack.push((ind, i));
                }
            }
            return Nest { top, parent };
        }
        let mut stack: Vec<usize> = Vec::new();
        for (i, l) in lines.iter().enumerate() {
            top[i] = stack.last().map_or(NONE, |s| *s as u32);
            for c in code_of(lang, l).chars() {
                match c {
                    '{' => {
                        if stack.last() != Some(&i) {
                            parent[i] = stack.last().map_or(NONE, |s| *s as u32);
                        }
                        stack.push(i);
                    }
                    '}' => {
                        stack.pop();
                    }
                    _ => {}
                }
            }
        }
        Nest { top, parent }
    }

    /// The lines that opened the blocks around line `i`, innermost first, down to (and not
    /// including) line `floor`.
    pub(super) fn chain(&self, i: usize, floor: Option<usize>) -> Vec<usize> {
        let mut out = Vec::new();
        let mut at = self.top.get(i).copied().unwrap_or(NONE);
        while at != NONE && out.len() < 64 {
            let a = at as usize;
            if floor.is_some_and(|f| a <= f) {
                break;
            }
            if out.last() != Some(&a) {
                out.push(a);
            }
            at = self.parent.get(a).copied().unwrap_or(NONE);
        }
        out
    }
}

/// An opener's text, as a rule reads it: its line, with the line before when it is a lone
/// `{`, and (Rust) the attributes above it; whitespace removed.
pub(super) fn opener_text(lang: Lang, lines: &[&str], i: usize) -> String {
    let mut text = code_of(lang, lines[i]).trim().to_string();
    let mut j = i;
    if text.starts_with('{') && j > 0 {
        j -= 1;
        text = format!("{}{text}", code_of(lang, lines[j]).trim());
    }
    if lang == Lang::Rust {
        let mut k = j;
        while k > 0 && k + 5 > j && lines[k - 1].trim().starts_with("#[") {
            k -= 1;
            text = format!("{}{text}", lines[k].trim());
        }
    }
    text.chars().filter(|c| !c.is_whitespace()).collect()
}

/// [`opener_text`] of a text's lines, each computed once.
struct Openers<'t> {
    lang: Lang,
    lines: &'t [&'t str],
    cache: HashMap<usize, String>,
}

impl<'t> Openers<'t> {
    fn new(lang: Lang, lines: &'t [&'t str]) -> Openers<'t> {
        Openers {
            lang,
            lines,
            cache: HashMap::new(),
        }
    }

    fn text(&mut self, i: usize) -> &str {
        let (lang, lines) = (self.lang, self.lines);
        self.cache
            .entry(i)
            .or_insert_with(|| opener_text(lang, lines, i))
    }
}

/// Which pairs of tests to read closely: all of them, unless their spans hold more lines than
/// [`MAX_SPAN_LINES`]; then those whose head span holds a line the file gained (a line whose
/// count at head exceeds its count at base), found in linear time.
fn worth_reading<'p>(
    b_lines: &[&str],
    h_lines: &[&str],
    pairs: &'p [(Span, Span)],
) -> Vec<&'p (Span, Span)> {
    let total: usize = pairs
        .iter()
        .map(|(b, h)| (b.end - b.open) + (h.end - h.open))
        .sum();
    if total <= MAX_SPAN_LINES {
        return pairs.iter().collect();
    }
    let mut count: HashMap<&str, i64> = HashMap::new();
    for l in b_lines {
        *count.entry(l.trim()).or_default() -= 1;
    }
    for l in h_lines {
        *count.entry(l.trim()).or_default() += 1;
    }
    let mut hot = vec![0usize; h_lines.len() + 1];
    for (i, l) in h_lines.iter().enumerate() {
        hot[i + 1] = hot[i] + usize::from(count.get(l.trim()).is_some_and(|c| *c > 0));
    }
    pairs
        .iter()
        .filter(|(_, h)| {
            let end = (h.end + 1).min(h_lines.len());
            hot[end] > hot[(h.open + 1).min(end)]
        })
        .collect()
}

/// The most lines of tests' spans the rules read pair by pair (a larger file is read where it
/// changed).
const MAX_SPAN_LINES: usize = 300_000;

/// An opener's line as [`block`] reads it: with the line before when it is a lone `{`.
pub(super) fn opener_raw(lang: Lang, lines: &[&str], i: usize) -> String {
    let t = code_of(lang, lines[i]);
    if t.trim().starts_with('{') && i > 0 {
        format!("{} {}", code_of(lang, lines[i - 1]).trim(), t.trim())
    } else {
        t.trim().to_string()
    }
}

fn words(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut w = String::new();
    for c in code.chars() {
        if is_ident(c) {
            w.push(c);
        } else if !w.is_empty() {
            out.push(std::mem::take(&mut w));
        }
    }
    if !w.is_empty() {
        out.push(w);
    }
    out
}

/// What kind of block a line opens (its raw text).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Block {
    /// Always runs what it holds once: a plain block, a module, a test class or suite.
    Plain,
    /// Runs what it holds under a condition, in a loop, or maybe never: `if`, `match`, loops,
    /// `try`, `with`, closures and nested functions, callbacks.
    Conditional,
    /// A function of its own (a closure, a nested function, a callback): `return` there
    /// leaves it, not the test.
    Function,
    Loop,
}

/// Whether a Rust block opener is an item's initialiser or a bare block (`const _: () = {`,
/// `static S: () = {`, `{`): a test declared in one is an inner item, which the harness never
/// runs.
fn item_block(raw: &str) -> bool {
    let code = code_of(Lang::Rust, raw);
    let t = code.trim();
    let w = words(t);
    t == "{" || w.first().is_some_and(|f| f == "const" || f == "static") || t.ends_with("= {")
}

/// Whether a Rust block opener is a macro's invocation (`suite! {`, `m::wrap! {`), not a
/// definition (`macro_rules! m {`).
fn macro_invocation(raw: &str) -> bool {
    let code = code_of(Lang::Rust, raw);
    let t: String = code.chars().filter(|c| !c.is_whitespace()).collect();
    let Some(bang) = t
        .find("!{")
        .or_else(|| t.find("!("))
        .or_else(|| t.find("!["))
    else {
        return false;
    };
    let before = &t[..bang];
    let name: String = before
        .chars()
        .rev()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    !name.is_empty() && !before.ends_with("macro_rules")
}

pub(super) fn block(lang: Lang, raw: &str) -> Block {
    let code = code_of(lang, raw);
    let t = code.trim();
    let w = words(t);
    let has = |k: &str| w.iter().any(|x| x == k);
    match lang {
        Lang::Rust => {
            if has("for") || has("while") || has("loop") {
                Block::Loop
            } else if has("fn")
                || (t.contains('|') && !has("if") && !has("match"))
                || (has("async") && !has("if"))
            {
                Block::Function
            } else if has("if") || has("else") || has("match") || t.contains("=>") {
                Block::Conditional
            } else {
                Block::Plain
            }
        }
        Lang::Js => {
            let suite = ["describe", "context", "suite"]
                .iter()
                .any(|s| t.starts_with(&format!("{s}(")) || t.starts_with(&format!("{s}.each")));
            if suite {
                Block::Plain
            } else if has("for") || has("while") || has("do") {
                Block::Loop
            } else if has("if")
                || has("else")
                || has("switch")
                || has("case")
                || has("try")
                || has("catch")
                || has("finally")
            {
                Block::Conditional
            } else if has("function") || t.contains("=>") {
                Block::Function
            } else {
                Block::Plain
            }
        }
        Lang::Python => {
            let first = w.first().map(String::as_str).unwrap_or("");
            let first = if first == "async" {
                w.get(1).map(String::as_str).unwrap_or("")
            } else {
                first
            };
            match first {
                "class" => Block::Plain,
                "for" | "while" => Block::Loop,
                "def" | "lambda" => Block::Function,
                "with" if t.contains("subTest(") => Block::Plain,
                "if" | "elif" | "else" | "try" | "except" | "finally" | "with" | "match"
                | "case" => Block::Conditional,
                _ => Block::Plain,
            }
        }
    }
}

/// An added line's statement that leaves the test whatever encloses it: an exit, a skip.
pub(super) fn always_exits(lang: Lang, line: &str) -> Option<&'static str> {
    let code = code_of(lang, line);
    let t: String = code.chars().filter(|c| !c.is_whitespace()).collect();
    let w = words(&code);
    let has = |k: &str| w.iter().any(|x| x == k);
    let calls = |p: &str| {
        t.match_indices(p).any(|(at, _)| {
            !t[..at]
                .chars()
                .next_back()
                .is_some_and(|c| is_ident(c) || c == '.')
        })
    };
    match lang {
        Lang::Rust => {
            if t.contains("process::exit(")
                || t.contains("process::abort(")
                || t.contains("libc::exit(")
                || t.contains("libc::_exit(")
            {
                Some("exits the test binary")
            } else {
                None
            }
        }
        Lang::Python => {
            for (p, what) in [
                ("pytest.skip(", "skips it"),
                ("pytest.xfail(", "marks it an expected failure"),
                ("pytest.exit(", "ends the test run"),
                ("pytest.importorskip(", "skips it"),
                ("self.skipTest(", "skips it"),
                ("sys.exit(", "exits the interpreter"),
                ("os._exit(", "exits the interpreter"),
            ] {
                if t.contains(p) {
                    return Some(what);
                }
            }
            if has("raise") && (t.contains("SkipTest") || t.contains("skip.Exception")) {
                return Some("skips it");
            }
            if calls("exit(") || calls("quit(") {
                return Some("exits the interpreter");
            }
            None
        }
        Lang::Js => {
            if t.contains("process.exit(") {
                Some("exits the test run")
            } else if [
                "this.skip(",
                "ctx.skip(",
                "context.skip(",
                "t.skip(",
                "pending(",
            ]
            .iter()
            .any(|p| calls(p))
            {
                Some("skips it")
            } else {
                None
            }
        }
    }
}

/// Whether an added line returns (`return`, in any spelling) or breaks out of a loop.
pub(super) fn jumps(lang: Lang, line: &str) -> Option<&'static str> {
    let w = words(&code_of(lang, line));
    if w.iter().any(|x| x == "return") {
        Some("return")
    } else if w.iter().any(|x| x == "break" || x == "continue") {
        Some("loop")
    } else {
        None
    }
}

/// A finding's facts: (1-based line, message).
pub(super) type Fact = (u32, String);

/// Control flow added to an existing test that can leave it before its assertions, and an
/// existing assertion put under a condition (`conditions`: agent-written changes only).
pub(super) fn weakened_bodies(
    lang: Lang,
    base: &str,
    head: &str,
    pairs: &[(Span, Span)],
    conditions: bool,
) -> Vec<Fact> {
    let b_lines: Vec<&str> = base.lines().collect();
    let h_lines: Vec<&str> = head.lines().collect();
    if pairs.is_empty() {
        return Vec::new();
    }
    let h_nest = Nest::of(lang, &h_lines);
    let b_nest = Nest::of(lang, &b_lines);
    let h_asserts = assertions(lang, head);
    let b_asserts = assertions(lang, base);
    let mut b_open = Openers::new(lang, &b_lines);
    let mut h_open = Openers::new(lang, &h_lines);
    let mut out = Vec::new();
    for (b, h) in worth_reading(&b_lines, &h_lines, pairs) {
        let b_body: Vec<&str> = b.body(&b_lines);
        let mut pool: HashMap<&str, usize> = HashMap::new();
        for l in &b_body {
            *pool.entry(l.trim()).or_default() += 1;
        }
        let old = |t: &str| pool.contains_key(t.trim());
        // Lines the test's body gained.
        let mut left = pool.clone();
        let added: Vec<usize> = (h.open + 1..=h.end.min(h_lines.len().saturating_sub(1)))
            .filter(|i| match left.get_mut(h_lines[*i].trim()) {
                Some(n) if *n > 0 => {
                    *n -= 1;
                    false
                }
                _ => true,
            })
            .collect();
        for i in &added {
            let text = h_lines[*i];
            if let Some(what) = always_exits(lang, text) {
                out.push((
                    *i as u32 + 1,
                    format!(
                        "returns early from the test `{}`: {what}: {}",
                        h.name,
                        shown(text)
                    ),
                ));
                continue;
            }
            let Some(kind) = jumps(lang, text) else {
                continue;
            };
            let chain = h_nest.chain(*i, Some(h.open));
            let inner = chain
                .iter()
                .map(|o| (o, block(lang, &opener_raw(lang, &h_lines, *o))));
            let leaves = match kind {
                // A return leaves the test unless a closure or nested function is around it
                // (or opens on its own line: `xs.map(|x| { return x })`).
                "return" => {
                    block(lang, text) != Block::Function
                        && !inner.clone().any(|(_, k)| k == Block::Function)
                }
                // A break skips the rest of a loop that was there: the test's own code.
                _ => inner
                    .take_while(|(_, k)| *k != Block::Function)
                    .find(|(_, k)| *k == Block::Loop)
                    .is_some_and(|(o, _)| old(h_lines[*o])),
            };
            if leaves {
                out.push((
                    *i as u32 + 1,
                    format!("returns early from the test `{}`: {}", h.name, shown(text)),
                ));
            }
        }
        if !conditions {
            continue;
        }
        // Existing assertions under a block that was not around them at base (the assertions
        // come in line order: each test's are found by bisection).
        let in_span = |all: &'_ [super::assertions::Unit], s: &Span| -> std::ops::Range<usize> {
            let from = all.partition_point(|u| (u.line as usize) <= s.open + 1);
            let to = all.partition_point(|u| (u.line as usize) <= s.end + 1);
            from..to.max(from)
        };
        let mut before: HashMap<&str, Vec<String>> = HashMap::new();
        for u in &b_asserts[in_span(&b_asserts, b)] {
            let openers: Vec<String> = b_nest
                .chain(u.line as usize - 1, Some(b.open))
                .into_iter()
                .map(|o| b_open.text(o).to_string())
                .collect();
            before.entry(u.key.as_str()).or_default().extend(openers);
        }
        for u in &h_asserts[in_span(&h_asserts, h)] {
            let Some(was) = before.get(u.key.as_str()) else {
                continue;
            };
            let new = h_nest
                .chain(u.line as usize - 1, Some(h.open))
                .into_iter()
                .find(|o| {
                    let text = h_open.text(*o);
                    !was.iter().any(|w| w == text)
                        && block(lang, &opener_raw(lang, &h_lines, *o)) != Block::Plain
                });
            if let Some(o) = new {
                out.push((
                    u.line,
                    format!(
                        "puts the assertion `{}` of the test `{}` under `{}`, which may not run it",
                        u.shown,
                        h.name,
                        shown(h_lines[o])
                    ),
                ));
            }
        }
    }
    out
}

/// Existing tests put under a block that was not around them at base (`if False:`, a new
/// closure, a loop that may run zero times), in the text as a whole.
pub(super) fn enclosed_tests(
    lang: Lang,
    base: &str,
    head: &str,
    pairs: &[(Span, Span)],
) -> Vec<Fact> {
    let b_lines: Vec<&str> = base.lines().collect();
    let h_lines: Vec<&str> = head.lines().collect();
    if pairs.is_empty() {
        return Vec::new();
    }
    let h_nest = Nest::of(lang, &h_lines);
    let b_nest = Nest::of(lang, &b_lines);
    let b_mods: Vec<String> = if lang == Lang::Rust {
        crate::governance::review::wiring::decls(base)
            .into_iter()
            .map(|d| d.name)
            .collect()
    } else {
        Vec::new()
    };
    let mut b_open = Openers::new(lang, &b_lines);
    let mut h_open = Openers::new(lang, &h_lines);
    let mut out = Vec::new();
    for (b, h) in worth_reading(&b_lines, &h_lines, pairs) {
        let was: Vec<String> = b_nest
            .chain(b.decl, None)
            .into_iter()
            .map(|o| b_open.text(o).to_string())
            .collect();
        let new = h_nest.chain(h.decl, None).into_iter().find(|o| {
            if was.iter().any(|w| w == h_open.text(*o)) {
                return false;
            }
            // A Rust module: one that was there has the attribute rule; a new one wrapping
            // tests counts when its attributes compile it out.
            if lang == Lang::Rust {
                if let Some((name, _)) = crate::governance::review::wiring::mod_decl(h_lines[*o]) {
                    if b_mods.contains(&name) {
                        return false;
                    }
                    let mut k = *o;
                    let mut disabled = false;
                    while k > 0 && k + 6 > *o && h_lines[k - 1].trim().starts_with("#[") {
                        k -= 1;
                        disabled |= super::rust_disabling(h_lines[k].trim()).is_some();
                    }
                    return disabled;
                }
            }
            let raw = opener_raw(lang, &h_lines, *o);
            // A macro around existing tests can expand to anything: nothing, the tests under
            // `#[cfg(any())]`, the tests inside a function (`suite! { #[test] fn … }`).
            (lang == Lang::Rust && (macro_invocation(&raw) || item_block(&raw)))
                || block(lang, &raw) != Block::Plain
        });
        if let Some(o) = new {
            out.push((
                h.decl as u32 + 1,
                format!(
                    "puts the test `{}` under `{}`, which may not define or run it",
                    h.name,
                    shown(h_lines[o])
                ),
            ));
        }
    }
    out
}

/// A helper's code as compared: its body's tokens with string literals' contents and comments
/// dropped (a message reworded is no change).
fn helper_code(lang: Lang, lines: &[&str], s: &Span) -> Vec<String> {
    let text: Vec<String> = lines
        .get(s.decl..=s.end.min(lines.len().saturating_sub(1)))
        .unwrap_or_default()
        .iter()
        .map(|l| code_of(lang, l))
        .collect();
    super::not_weakening::tokens(lang, &text.join("\n"))
}

/// Helpers of a test file (functions that are not tests) that existed at base and whose code
/// changed, other than by a rename of their locals.
pub(super) fn rewritten_helpers(lang: Lang, base: &str, head: &str) -> Vec<Fact> {
    let b_lines: Vec<&str> = base.lines().collect();
    let h_lines: Vec<&str> = head.lines().collect();
    let before = helper_spans(lang, base);
    let after = helper_spans(lang, head);
    let by_name: HashMap<&str, &Span> = before.iter().rev().map(|b| (b.name.as_str(), b)).collect();
    let changed: Vec<(&Span, Vec<String>, Vec<String>)> = after
        .iter()
        .filter_map(|h| {
            let b = by_name.get(h.name.as_str())?;
            let (x, y) = (
                helper_code(lang, &b_lines, b),
                helper_code(lang, &h_lines, h),
            );
            (x != y).then_some((h, x, y))
        })
        .collect();
    if changed.is_empty() {
        return Vec::new();
    }
    // For renames: the whole file's words, once.
    let words = super::not_weakening::FileWords {
        base: super::not_weakening::tokens(lang, base)
            .into_iter()
            .collect(),
        head: super::not_weakening::tokens(lang, head)
            .into_iter()
            .collect(),
    };
    changed
        .into_iter()
        .filter(|(_, x, y)| !super::not_weakening::renamed(x, y, &words))
        .map(|(h, _, _)| {
            (
                h.decl as u32 + 1,
                format!(
                    "rewrites the test helper `{}`, which existing tests rely on",
                    h.name
                ),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_of_tests_and_helpers() {
        let rs = "fn helper(x: u8) -> u8 {\n    x\n}\n\n#[test]\nfn a() {\n    if x {\n        y();\n    }\n}\n";
        let t = test_spans(Lang::Rust, rs);
        assert_eq!(
            (t[0].name.as_str(), t[0].decl, t[0].open, t[0].end),
            ("a", 5, 5, 9)
        );
        let h = helper_spans(Lang::Rust, rs);
        assert_eq!(h.len(), 1);
        assert_eq!((h[0].name.as_str(), h[0].end), ("helper", 2));
        let py = "def helper():\n    return 1\n\ndef test_a():\n    x = 1\n    assert x\n\nx = 2\n";
        let t = test_spans(Lang::Python, py);
        assert_eq!((t[0].decl, t[0].open, t[0].end), (3, 3, 5));
        assert_eq!(helper_spans(Lang::Python, py)[0].name, "helper");
        let js =
            "const check = (x) => {\n  expect(x).toBe(1);\n};\nit('a', () => {\n  check(1);\n});\n";
        let t = test_spans(Lang::Js, js);
        assert_eq!((t[0].name.as_str(), t[0].open, t[0].end), ("a", 3, 5));
        assert_eq!(helper_spans(Lang::Js, js)[0].name, "check");
    }

    #[test]
    fn what_blocks_are() {
        let cases: &[(Lang, &str, Block)] = &[
            (
                Lang::Rust,
                "if std::env::var(\"CI\").is_ok() {",
                Block::Conditional,
            ),
            (Lang::Rust, "for x in xs {", Block::Loop),
            (Lang::Rust, "let f = |x| {", Block::Function),
            (Lang::Rust, "std::panic::catch_unwind(|| {", Block::Function),
            (Lang::Rust, "mod tests {", Block::Plain),
            (Lang::Rust, "{", Block::Plain),
            (Lang::Rust, "Some(x) => {", Block::Conditional),
            (Lang::Python, "if False:", Block::Conditional),
            (Lang::Python, "try:", Block::Conditional),
            (Lang::Python, "with self.subTest(i=i):", Block::Plain),
            (Lang::Python, "class TestA:", Block::Plain),
            (Lang::Python, "def inner():", Block::Function),
            (Lang::Js, "describe('x', () => {", Block::Plain),
            (Lang::Js, "if (process.env.CI) {", Block::Conditional),
            (Lang::Js, "setTimeout(() => {", Block::Function),
            (Lang::Js, "for (const x of xs) {", Block::Loop),
        ];
        for (lang, line, want) in cases {
            assert_eq!(block(*lang, line), *want, "{line}");
        }
        assert_eq!(jumps(Lang::Rust, "if true { return }"), Some("return"));
        assert_eq!(jumps(Lang::Rust, "return ();"), Some("return"));
        assert_eq!(jumps(Lang::Rust, "let r = \"return\"; // return"), None);
        assert!(always_exits(Lang::Rust, "std::process::exit(0);").is_some());
        assert!(always_exits(Lang::Python, "pytest.skip(\"later\")").is_some());
        assert!(always_exits(Lang::Python, "raise unittest.SkipTest('x')").is_some());
        assert!(always_exits(Lang::Python, "sys.exit(0)").is_some());
        assert!(always_exits(Lang::Python, "self.on_exit(1)").is_none());
        assert!(always_exits(Lang::Js, "process.exit(0);").is_some());
        assert!(always_exits(Lang::Js, "this.skip();").is_some());
    }

    #[test]
    fn renamed_tests_pair_by_body() {
        let base = "it('finds rows', () => {\n  const rows = f();\n  expect(rows).toBe(1);\n});\n";
        let head =
            "it('finds the rows', () => {\n  const rows = f();\n  expect(rows).toBe(1);\n});\n";
        let p = pair(Lang::Js, base, head);
        assert_eq!(p.len(), 1);
        assert_eq!(
            (p[0].0.name.as_str(), p[0].1.name.as_str()),
            ("finds rows", "finds the rows")
        );
        // Another test's body is not a rename.
        let other = "it('other', () => {\n  g();\n  expect(g()).toBe(2);\n});\n";
        assert!(pair(Lang::Js, base, other).is_empty());
    }
}
