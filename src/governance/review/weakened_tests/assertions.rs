//! Assertions as the reviewer compares them: each a [`Unit`] (the whole macro or call, over
//! several lines if it spans them, keyed without whitespace), the difference of two files'
//! assertions, and the parts a changed one is weighed by (its numbers, its subject).

use std::collections::HashMap;

use super::{ident_at, is_ident, shown, Lang};

/// One assertion: where it starts, its text without whitespace (the key), its first line, and
/// its text as written (its lines joined).
#[derive(Debug, Clone)]
pub(super) struct Unit {
    pub(super) line: u32,
    pub(super) key: String,
    pub(super) shown: String,
    pub(super) raw: String,
}

/// Whether a (trimmed, uncommented) line starts an assertion.
pub(super) fn starts_assertion(lang: Lang, t: &str) -> bool {
    match lang {
        Lang::Rust => rust_assert_macro(t),
        Lang::Python => {
            t.starts_with("assert ") || t.starts_with("assert(") || t.starts_with("self.assert")
        }
        Lang::Js => {
            t.starts_with("assert(")
                || t.starts_with("assert.")
                || t.match_indices("expect(").any(|(at, _)| {
                    !t[..at]
                        .chars()
                        .next_back()
                        .is_some_and(|c| is_ident(c) || c == '.')
                })
        }
    }
}

/// A macro whose name contains `assert` (`assert!`, `assert_eq!`, `debug_assert_ne!`,
/// `prop_assert!`, `assert_matches!`…), invoked.
pub(super) fn rust_assert_macro(t: &str) -> bool {
    t.match_indices("assert").any(|(at, _)| {
        let before_ok = t[..at].chars().next_back().is_none_or(|c| c != '"');
        let tail = &t[at..];
        let ident = ident_at(tail);
        before_ok && tail[ident.len()..].starts_with('!')
    })
}

/// Net change in bracket depth over a line, outside string and character literals and
/// trailing comments.
pub(super) fn depth_change(lang: Lang, line: &str) -> i32 {
    let chars: Vec<char> = line.chars().collect();
    let mut depth = 0;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '"' | '`' => i = skip_string(&chars, i, c),
            '\'' if lang != Lang::Rust => i = skip_string(&chars, i, c),
            '\'' => {
                // A character literal ('x', '\n'), or a lifetime (left alone).
                if chars.get(i + 1) == Some(&'\\') {
                    i = skip_string(&chars, i, '\'');
                } else if chars.get(i + 2) == Some(&'\'') {
                    i += 2;
                }
            }
            '/' if lang != Lang::Python && chars.get(i + 1) == Some(&'/') => break,
            '#' if lang == Lang::Python => break,
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            _ => {}
        }
        i += 1;
    }
    depth
}

/// The index of the closing quote of the literal opened at `start` (or the end of the line).
pub(super) fn skip_string(chars: &[char], start: usize, q: char) -> usize {
    let mut i = start + 1;
    while i < chars.len() {
        if chars[i] == '\\' {
            i += 2;
            continue;
        }
        if chars[i] == q {
            return i;
        }
        i += 1;
    }
    chars.len()
}

pub(super) fn normalize(s: &str) -> String {
    let squeezed: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    squeezed.replace(",)", ")")
}

pub(super) fn assertions(lang: Lang, text: &str) -> Vec<Unit> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let t = lines[i].trim();
        if t.starts_with(lang.comment()) || !starts_assertion(lang, t) {
            i += 1;
            continue;
        }
        let start = i;
        let mut depth = depth_change(lang, lines[i]);
        let mut text = lines[i].to_string();
        while depth > 0 && i + 1 < lines.len() && i - start < 40 {
            i += 1;
            depth += depth_change(lang, lines[i]);
            text.push('\n');
            text.push_str(lines[i]);
        }
        out.push(Unit {
            line: start as u32 + 1,
            key: normalize(&text),
            shown: shown(lines[start]),
            raw: text,
        });
        i += 1;
    }
    out
}

/// Units of `a` not in `b` (as a multiset of keys), in order.
pub(super) fn units_minus(a: &[Unit], b: &[Unit]) -> Vec<Unit> {
    let mut pool: HashMap<&str, usize> = HashMap::new();
    for u in b {
        *pool.entry(u.key.as_str()).or_default() += 1;
    }
    a.iter()
        .filter(|u| match pool.get_mut(u.key.as_str()) {
            Some(n) if *n > 0 => {
                *n -= 1;
                false
            }
            _ => true,
        })
        .cloned()
        .collect()
}

/// A text with its numbers replaced by `#`, and the numbers.
pub(super) fn numbers(s: &str) -> (String, Vec<String>) {
    let chars: Vec<char> = s.chars().collect();
    let mut skeleton = String::new();
    let mut found = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let starts = c.is_ascii_digit() && (i == 0 || !is_ident(chars[i - 1]));
        if !starts {
            skeleton.push(c);
            i += 1;
            continue;
        }
        let mut n = String::new();
        while i < chars.len() && (is_ident(chars[i]) || chars[i] == '.') {
            // `1.0.max(x)`: a method call after a number is not part of it.
            if chars[i] == '.' && !chars.get(i + 1).is_some_and(char::is_ascii_digit) {
                break;
            }
            n.push(chars[i]);
            i += 1;
        }
        skeleton.push('#');
        found.push(n);
    }
    (skeleton, found)
}

/// The assertion up to its first top-level comma or comparison (or, for `expect(x).…`, the end
/// of what it expects of): its macro and what it checks.
pub(super) fn subject(key: &str) -> Option<&str> {
    let open = key.find('(')?;
    let mut depth = 0;
    for (at, c) in key.char_indices().skip_while(|(at, _)| *at < open) {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => {
                depth -= 1;
                if depth == 0 {
                    return key[at..].starts_with(").").then(|| &key[..at]);
                }
            }
            ',' if depth == 1 => return Some(&key[..at]),
            '=' | '!' if depth == 1 && key[at + 1..].starts_with('=') => return Some(&key[..at]),
            _ => {}
        }
    }
    None
}
