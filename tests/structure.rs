//! The structure ARCHITECTURE.md describes, checked on the source: every module is in the
//! codemap and on a layer; imports point down the layers and form no cycle; no file and no
//! function is longer than a reader can hold.
//!
//! ARCHITECTURE.md is the one place the layers are written: its "Layers" section is a numbered
//! list, bottom first, each item naming its modules in backticks (`swarm::runtime` covers that
//! module and everything under it; the longest name that covers a module decides its layer).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The most production lines (not blank, not a comment, before the file's `#[cfg(test)]`
/// module) a source file may hold.
const FILE_LINES: usize = 1000;
/// The most lines a function may span, from `fn` to its closing brace.
const FN_LINES: usize = 150;
/// The same, in `src/cli/`: a command parses arguments and calls one domain function.
const CLI_FN_LINES: usize = 80;

/// One source file: its module path (`audit::history`; empty for lib.rs), its path under the
/// crate, and its production code with comments, strings and characters blanked (lines kept).
struct Source {
    module: Vec<String>,
    path: String,
    code: String,
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            walk(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn sources() -> Vec<Source> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut paths = Vec::new();
    walk(&root.join("src"), &mut paths);
    paths.sort();
    paths
        .into_iter()
        .filter(|p| !p.ends_with("main.rs"))
        .map(|p| {
            let rel = p
                .strip_prefix(root.join("src"))
                .expect("under src")
                .to_string_lossy()
                .into_owned();
            let mut module: Vec<String> = rel
                .trim_end_matches(".rs")
                .split('/')
                .map(str::to_string)
                .collect();
            if matches!(module.last().map(String::as_str), Some("mod" | "lib")) {
                module.pop();
            }
            let text = std::fs::read_to_string(&p).expect("read");
            let code = blank(production(&text));
            Source {
                module,
                path: format!("src/{rel}"),
                code,
            }
        })
        .collect()
}

/// A file's text before its test module (which comes last by convention).
fn production(text: &str) -> &str {
    text.find("\n#[cfg(test)]")
        .map_or(text, |at| &text[..at + 1])
}

/// `code` with comments, string and character literals replaced by spaces, newlines kept, so
/// that braces and paths are the code's own.
fn blank(code: &str) -> String {
    let c: Vec<char> = code.chars().collect();
    let mut out = String::with_capacity(code.len());
    let mut i = 0;
    let keep = |ch: char| if ch == '\n' { '\n' } else { ' ' };
    while i < c.len() {
        let rest = |k: usize| c.get(i + k).copied();
        if c[i] == '/' && rest(1) == Some('/') {
            while i < c.len() && c[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c[i] == '/' && rest(1) == Some('*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(keep(c[i]));
                    i += 1;
                }
            }
        } else if c[i] == 'r'
            && (rest(1) == Some('"')
                || (rest(1) == Some('#') && matches!(rest(2), Some('"' | '#'))))
            && !(i > 0 && (c[i - 1].is_alphanumeric() || c[i - 1] == '_'))
        {
            // A raw string: r"…", r#"…"#, …
            let mut j = i + 1;
            let mut hashes = 0;
            while c.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            j += 1;
            while j < c.len() {
                if c[j] == '"' && (0..hashes).all(|h| c.get(j + 1 + h) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            for &ch in &c[i..j.min(c.len())] {
                out.push(keep(ch));
            }
            i = j;
        } else if c[i] == '"' {
            let mut j = i + 1;
            while j < c.len() && c[j] != '"' {
                j += if c[j] == '\\' { 2 } else { 1 };
            }
            for &ch in &c[i..(j + 1).min(c.len())] {
                out.push(keep(ch));
            }
            i = j + 1;
        } else if c[i] == '\'' && (rest(2) == Some('\'') || rest(1) == Some('\\')) {
            // A character literal ('x', '\n', '\u{1F600}'); a lifetime has no closing quote.
            let mut j = i + 1;
            if c[j] == '\\' {
                j += 2;
            } else {
                j += 1;
            }
            while j < c.len() && c[j] != '\'' {
                j += 1;
            }
            for &ch in &c[i..(j + 1).min(c.len())] {
                out.push(keep(ch));
            }
            i = j + 1;
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// The paths a piece of code names from `at` on: `crate::a::b`, `super::x::{y, z::{self, w}}`,
/// each as its segments (a group yields one path per leaf).
fn paths_at(c: &[char], at: usize) -> (Vec<Vec<String>>, usize) {
    let mut segs = Vec::new();
    let mut i = at;
    loop {
        let start = i;
        while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
            i += 1;
        }
        if i > start {
            segs.push(c[start..i].iter().collect::<String>());
        }
        if c.get(i) == Some(&':') && c.get(i + 1) == Some(&':') {
            i += 2;
            while c.get(i).is_some_and(|ch| ch.is_whitespace()) {
                i += 1;
            }
            if c.get(i) == Some(&'{') {
                i += 1;
                let mut all = Vec::new();
                loop {
                    while c.get(i).is_some_and(|ch| ch.is_whitespace() || *ch == ',') {
                        i += 1;
                    }
                    match c.get(i) {
                        None => break,
                        Some('}') => {
                            i += 1;
                            break;
                        }
                        _ => {}
                    }
                    let (inner, next) = paths_at(c, i);
                    for p in inner {
                        let mut full = segs.clone();
                        full.extend(p.into_iter().filter(|s| s != "self"));
                        all.push(full);
                    }
                    // Skip an `as name` or a `*`.
                    i = next;
                    while i < c.len() && !matches!(c[i], ',' | '}') {
                        i += 1;
                    }
                    if next == i && i < c.len() && c[i] != ',' && c[i] != '}' {
                        i += 1;
                    }
                }
                return (all, i);
            }
            continue;
        }
        return (vec![segs], i);
    }
}

/// The modules each module's production code names, resolved to the longest module a path
/// reaches (a path to an item names the module holding it).
fn imports(all: &[Source]) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let known: BTreeSet<&Vec<String>> = all.iter().map(|s| &s.module).collect();
    let mut edges = BTreeMap::new();
    for s in all {
        let c: Vec<char> = s.code.chars().collect();
        let mut found = BTreeSet::new();
        let mut i = 0;
        while i < c.len() {
            let starts = ["crate::", "super::", "self::"]
                .iter()
                .find(|p| c[i..].starts_with(&p.chars().collect::<Vec<_>>()));
            let glued = i > 0 && (c[i - 1].is_alphanumeric() || c[i - 1] == '_' || c[i - 1] == '$');
            let Some(_) = starts.filter(|_| !glued) else {
                i += 1;
                continue;
            };
            let (paths, next) = paths_at(&c, i);
            for p in paths {
                let mut base: Vec<String> = Vec::new();
                let mut rest = p.as_slice();
                match rest.first().map(String::as_str) {
                    Some("crate") => rest = &rest[1..],
                    Some("self" | "super") => {
                        base = s.module.clone();
                        while let Some(first) = rest.first() {
                            match first.as_str() {
                                "super" => {
                                    base.pop();
                                }
                                "self" => {}
                                _ => break,
                            }
                            rest = &rest[1..];
                        }
                    }
                    _ => continue,
                }
                base.extend(rest.iter().cloned());
                while !base.is_empty() && !known.contains(&base) {
                    base.pop();
                }
                if !base.is_empty() && base != s.module {
                    found.insert(base);
                }
            }
            i = next.max(i + 1);
        }
        edges.insert(s.module.clone(), found);
    }
    edges
}

fn architecture() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("ARCHITECTURE.md"))
        .expect("ARCHITECTURE.md")
}

/// The section of ARCHITECTURE.md under the heading `## {title}`.
fn section(doc: &str, title: &str) -> String {
    let head = format!("\n## {title}\n");
    let at = doc
        .find(&head)
        .unwrap_or_else(|| panic!("ARCHITECTURE.md has no `## {title}` section"));
    let body = &doc[at + head.len()..];
    body[..body.find("\n## ").unwrap_or(body.len())].to_string()
}

/// The layers as ARCHITECTURE.md lists them: each named module and its level (1 = bottom).
fn layers() -> Vec<(Vec<String>, usize)> {
    let mut out = Vec::new();
    // An item runs on over indented lines; anything else ends it.
    let mut level = None;
    for line in section(&architecture(), "Layers").lines() {
        let t = line.trim_start();
        let numbered = t.find(". ").and_then(|dot| t[..dot].parse::<usize>().ok());
        if numbered.is_some() {
            level = numbered;
        } else if !line.starts_with("   ") {
            level = None;
        }
        let Some(level) = level else { continue };
        // Only the names before the dash that starts the item's description.
        let names = t.split(" — ").next().unwrap_or_default();
        for (k, name) in names.split('`').enumerate() {
            if k % 2 == 1
                && name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c == '_' || c == ':')
            {
                out.push((name.split("::").map(str::to_string).collect(), level));
            }
        }
    }
    assert!(
        out.len() >= 10,
        "ARCHITECTURE.md, Layers: found only {out:?}"
    );
    out
}

fn level_of(layers: &[(Vec<String>, usize)], module: &[String]) -> Option<usize> {
    layers
        .iter()
        .filter(|(m, _)| module.starts_with(m))
        .max_by_key(|(m, _)| m.len())
        .map(|(_, l)| *l)
}

fn name(m: &[String]) -> String {
    if m.is_empty() {
        "crate".into()
    } else {
        m.join("::")
    }
}

#[test]
fn every_module_is_on_a_layer_and_imports_only_its_own_or_lower_ones() {
    let all = sources();
    let layers = layers();
    let mut unplaced = Vec::new();
    let mut upward = Vec::new();
    for (from, tos) in imports(&all) {
        if from.is_empty() {
            continue;
        }
        let Some(l) = level_of(&layers, &from) else {
            unplaced.push(name(&from));
            continue;
        };
        for to in tos {
            if let Some(k) = level_of(&layers, &to) {
                if k > l {
                    upward.push(format!(
                        "{} (layer {l}) imports {} (layer {k})",
                        name(&from),
                        name(&to)
                    ));
                }
            }
        }
    }
    assert!(
        unplaced.is_empty(),
        "put these on a layer in ARCHITECTURE.md, \"Layers\":\n{}",
        unplaced.join("\n")
    );
    assert!(
        upward.is_empty(),
        "a lower layer imports a higher one (move the item down, or pass it in):\n{}",
        upward.join("\n")
    );
}

#[test]
fn no_modules_import_each_other_in_a_cycle() {
    let all = sources();
    let related = |a: &[String], b: &[String]| a.starts_with(b) || b.starts_with(a);
    let edges: BTreeMap<Vec<String>, Vec<Vec<String>>> = imports(&all)
        .into_iter()
        .map(|(from, tos)| {
            let tos = tos.into_iter().filter(|to| !related(&from, to)).collect();
            (from, tos)
        })
        .collect();
    // Tarjan's strongly connected components.
    struct Walk<'a> {
        edges: &'a BTreeMap<Vec<String>, Vec<Vec<String>>>,
        index: BTreeMap<&'a Vec<String>, (usize, usize)>,
        stack: Vec<&'a Vec<String>>,
        on: BTreeSet<&'a Vec<String>>,
        next: usize,
        cycles: Vec<Vec<String>>,
    }
    fn visit<'a>(w: &mut Walk<'a>, v: &'a Vec<String>) {
        w.index.insert(v, (w.next, w.next));
        w.next += 1;
        w.stack.push(v);
        w.on.insert(v);
        for to in w.edges.get(v).into_iter().flatten() {
            let Some((to, _)) = w.edges.get_key_value(to) else {
                continue;
            };
            if !w.index.contains_key(to) {
                visit(w, to);
                let low = w.index[to].1.min(w.index[v].1);
                w.index.get_mut(v).expect("visited").1 = low;
            } else if w.on.contains(to) {
                let low = w.index[to].0.min(w.index[v].1);
                w.index.get_mut(v).expect("visited").1 = low;
            }
        }
        if w.index[v].0 == w.index[v].1 {
            let mut comp = Vec::new();
            while let Some(x) = w.stack.pop() {
                w.on.remove(x);
                comp.push(name(x));
                if x == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                w.cycles.push(comp);
            }
        }
    }
    let mut w = Walk {
        edges: &edges,
        index: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        next: 0,
        cycles: Vec::new(),
    };
    for v in edges.keys() {
        if !w.index.contains_key(v) {
            visit(&mut w, v);
        }
    }
    let cycles: Vec<String> = w.cycles.iter().map(|c| c.join(" ⇄ ")).collect();
    assert!(
        cycles.is_empty(),
        "modules that import each other (other than a module and its own children):\n{}",
        cycles.join("\n")
    );
}

/// Whether the codemap names a file: its path, or its name in backticks on the bullet of a
/// folder it is in (`- \`swarm/runtime/\` … \`attempt.rs\``), or, for a folder's `mod.rs`, the
/// folder (`\`weakened_tests/\``).
fn named(map: &str, path: &str) -> bool {
    let bullets: Vec<&str> = map.split("\n- ").collect();
    let (dir, file) = path.rsplit_once('/').unwrap_or(("", path));
    let tick = |t: &str| format!("`{t}`");
    if map.contains(&tick(path)) {
        return true;
    }
    bullets.iter().any(|b| {
        let head = b.split_whitespace().next().unwrap_or_default();
        let Some(folder) = head.strip_prefix('`').and_then(|h| h.strip_suffix("/`")) else {
            // A bullet of top-level files: `keys.rs` and the like.
            return dir.is_empty() && b.contains(&tick(file));
        };
        let Some(rest) = path.strip_prefix(&format!("{folder}/")) else {
            return false;
        };
        if file == "mod.rs" {
            let sub = rest.trim_end_matches("mod.rs");
            sub.is_empty() || b.contains(&tick(sub)) || b.contains(&tick(&format!("{sub}mod.rs")))
        } else {
            b.contains(&tick(rest)) || b.contains(&tick(file))
        }
    })
}

#[test]
fn the_codemap_names_every_module() {
    let map = section(&architecture(), "Codemap");
    let missing: Vec<String> = sources()
        .iter()
        .map(|s| s.path.trim_start_matches("src/").to_string())
        .filter(|p| !named(&map, p))
        .collect();
    assert!(
        missing.is_empty(),
        "name these in ARCHITECTURE.md, \"Codemap\" (on their folder's line):\n{}",
        missing.join("\n")
    );
}

/// Every `fn` in a file's production code, with the line it starts on and how many lines it
/// spans to its closing brace.
fn functions(code: &str) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = code.lines().collect();
    let mut out = Vec::new();
    for (k, line) in lines.iter().enumerate() {
        let words: Vec<&str> = line
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .collect();
        let Some(at) = words.iter().position(|w| *w == "fn") else {
            continue;
        };
        let Some(fn_name) = words[at + 1..].iter().find(|w| !w.is_empty()) else {
            continue;
        };
        let mut depth = 0i64;
        let mut opened = false;
        for (j, l) in lines.iter().enumerate().skip(k) {
            for ch in l.chars() {
                match ch {
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' => depth -= 1,
                    ';' if !opened && depth == 0 => break,
                    _ => {}
                }
            }
            if opened && depth <= 0 {
                out.push((fn_name.to_string(), k + 1, j - k + 1));
                break;
            }
            if !opened && l.trim_end().ends_with(';') {
                break;
            }
        }
    }
    out
}

#[test]
fn no_file_or_function_is_longer_than_a_reader_can_hold() {
    let mut long = Vec::new();
    for s in sources() {
        let lines = s.code.lines().filter(|l| !l.trim().is_empty()).count();
        if lines > FILE_LINES {
            long.push(format!(
                "{}: {lines} production lines (at most {FILE_LINES})",
                s.path
            ));
        }
        let limit = if s.path.starts_with("src/cli/") {
            CLI_FN_LINES
        } else {
            FN_LINES
        };
        for (f, line, n) in functions(&s.code) {
            if n > limit {
                long.push(format!(
                    "{}:{line}: fn {f} is {n} lines (at most {limit})",
                    s.path
                ));
            }
        }
    }
    assert!(
        long.is_empty(),
        "split these into named steps or modules:\n{}",
        long.join("\n")
    );
}

/// The checks above parse Rust by hand: they must see what they claim to.
#[test]
fn the_structure_checks_read_paths_comments_and_functions_right() {
    let code = blank(
        "use crate::a::{b, c::{self, d as e}, f::*};\n// crate::hidden\nlet s = \"crate::x\";\nlet c = '{';\nfn g<'a>(x: &'a str) {\n    super::h();\n}\n",
    );
    assert!(!code.contains("hidden") && !code.contains("crate::x") && !code.contains("'{'"));
    let c: Vec<char> = code.chars().collect();
    let (paths, _) = paths_at(&c, code.find("crate").expect("use"));
    let joined: Vec<String> = paths.iter().map(|p| p.join("::")).collect();
    assert_eq!(
        joined,
        [
            "crate::a::b",
            "crate::a::c",
            "crate::a::c::d",
            "crate::a::f"
        ]
    );
    assert_eq!(functions(&code), [("g".to_string(), 5, 3)]);
}
