//! Module wiring in Rust: the `mod` declarations of a file, the files they compile, and the
//! changes that swap a module for another file or compile it out — `#[path = "…"]`,
//! `include!`, `include_str!` of code, a declaration removed, made inline or given other
//! attributes. Pure text in, declarations and findings' facts out.

/// One `mod` declaration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decl {
    pub name: String,
    /// 1-based.
    pub line: u32,
    /// The attributes on it, whitespace removed, in order (doc comments dropped).
    pub attrs: String,
    /// `mod x;` (its file), rather than `mod x { … }`.
    pub file: bool,
}

/// The text of the attribute that starts at `lines[i]` (joined until its brackets balance, at
/// most 20 lines), and the index of its last line.
pub fn attribute_at(lines: &[&str], i: usize) -> (String, usize) {
    let mut text = String::new();
    let mut depth = 0i32;
    let mut j = i;
    while j < lines.len() && j < i + 20 {
        for c in lines[j].chars() {
            match c {
                '[' | '(' | '{' => depth += 1,
                ']' | ')' | '}' => depth -= 1,
                _ => {}
            }
        }
        text.push_str(lines[j].trim());
        if depth <= 0 {
            break;
        }
        text.push(' ');
        j += 1;
    }
    (text, j.min(lines.len().saturating_sub(1)))
}

/// Leading `#[…]` groups of a line, split off: (the attributes, the rest).
fn split_attrs(t: &str) -> (String, &str) {
    let mut attrs = String::new();
    let mut rest = t;
    while rest.starts_with("#[") {
        let mut depth = 0;
        let mut end = None;
        for (i, c) in rest.char_indices() {
            match c {
                '[' => depth += 1,
                ']' => {
                    depth -= 1;
                    if depth == 0 {
                        end = Some(i);
                        break;
                    }
                }
                _ => {}
            }
        }
        let Some(e) = end else { break };
        attrs.push_str(&rest[..=e]);
        rest = rest[e + 1..].trim_start();
    }
    (attrs, rest)
}

/// The module a line declares: its name, and whether it is a file module (`;`).
pub fn mod_decl(t: &str) -> Option<(String, bool)> {
    let mut rest = t.trim();
    if let Some(r) = rest.strip_prefix("pub") {
        rest = r.trim_start();
        if rest.starts_with('(') {
            rest = rest[rest.find(')')? + 1..].trim_start();
        }
    }
    let rest = rest.strip_prefix("mod ")?.trim_start();
    let name: String = rest
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    if name.is_empty() {
        return None;
    }
    let after = rest[name.len()..].trim_start();
    if after.starts_with(';') {
        Some((name, true))
    } else if after.starts_with('{') || after.is_empty() {
        Some((name, false))
    } else {
        None
    }
}

/// The `mod` declarations of a Rust text, with their attributes.
pub fn decls(text: &str) -> Vec<Decl> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut pending = String::new();
    let mut i = 0;
    while i < lines.len() {
        let t = lines[i].trim();
        if t.is_empty() || t.starts_with("//") {
            i += 1;
            continue;
        }
        if t.starts_with("#[") {
            let (attr, last) = attribute_at(&lines, i);
            let (inline, rest) = split_attrs(&attr);
            if rest.is_empty() {
                pending.push_str(&squeeze(&inline));
                i = last + 1;
                continue;
            }
            // Attributes and an item on one line.
            if let Some((name, file)) = mod_decl(rest) {
                pending.push_str(&squeeze(&inline));
                out.push(Decl {
                    name,
                    line: i as u32 + 1,
                    attrs: std::mem::take(&mut pending),
                    file,
                });
            }
            pending.clear();
            i = last + 1;
            continue;
        }
        if let Some((name, file)) = mod_decl(t) {
            out.push(Decl {
                name,
                line: i as u32 + 1,
                attrs: std::mem::take(&mut pending),
                file,
            });
        }
        pending.clear();
        i += 1;
    }
    out
}

fn squeeze(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

/// Whether a file is a module root: its `mod x;` declarations compile files beside it
/// (`lib.rs`, `main.rs`, `mod.rs`, `build.rs`, and the crates Cargo finds by their place:
/// `tests/*.rs`, `benches/*.rs`, `examples/*.rs`, `src/bin/*.rs`).
fn is_root(path: &str) -> bool {
    let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
    let dir_name = dir.rsplit('/').next().unwrap_or(dir);
    matches!(name, "lib.rs" | "main.rs" | "mod.rs" | "build.rs")
        || matches!(dir_name, "tests" | "benches" | "examples")
        || dir.ends_with("src/bin")
}

/// The files `mod name;` in `path` may compile (`name.rs` or `name/mod.rs`, beside a root or
/// in the folder named after a non-root file).
pub fn targets(path: &str, name: &str) -> [String; 2] {
    let dir = if is_root(path) {
        path.rsplit_once('/')
            .map_or(String::new(), |(d, _)| format!("{d}/"))
    } else {
        format!("{}/", path.strip_suffix(".rs").unwrap_or(path))
    };
    [format!("{dir}{name}.rs"), format!("{dir}{name}/mod.rs")]
}

/// A changed line that wires a module to another file: `#[path = …]` (also through
/// `cfg_attr`) or `include!(…)`; the words for the finding.
pub fn rewires(line: &str) -> Option<&'static str> {
    let t = squeeze(line);
    if t.starts_with("//") {
        return None;
    }
    if t.contains("#[path=") || t.contains("#![path=") {
        return Some("`#[path = …]` points a module at another file");
    }
    if t.contains("cfg_attr(") && t.contains(",path=") {
        return Some("`#[cfg_attr(…, path = …)]` points a module at another file");
    }
    let include = t.match_indices("include!(").any(|(at, _)| {
        !t[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
    });
    include.then_some("`include!(…)` compiles another file's code in place")
}

/// The files `include_str!`/`include_bytes!` in a line read, relative to `path`'s folder
/// (`Err` for an argument that is not a plain literal).
pub fn included(path: &str, line: &str) -> Vec<Result<String, String>> {
    let dir = path.rsplit_once('/').map_or("", |(d, _)| d);
    let mut out = Vec::new();
    // Spelled in pieces: a test of the build inputs reads every `include_str!` of the source.
    for m in [concat!("include_str", "!("), concat!("include_bytes", "!(")] {
        for (at, _) in line.match_indices(m) {
            let arg = line[at + m.len()..].trim_start();
            let Some(rest) = arg.strip_prefix('"') else {
                out.push(Err(arg.chars().take(40).collect()));
                continue;
            };
            let Some(end) = rest.find('"') else { continue };
            let lit = &rest[..end];
            let mut parts: Vec<&str> = dir.split('/').filter(|p| !p.is_empty()).collect();
            let mut outside = lit.starts_with('/');
            for p in lit.split('/') {
                match p {
                    "" | "." => {}
                    ".." => outside |= parts.pop().is_none(),
                    p => parts.push(p),
                }
            }
            out.push(if outside {
                Err(lit.to_string())
            } else {
                Ok(parts.join("/"))
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declarations_and_their_files() {
        let text = "//! Crate.\n\npub mod agent;\n#[cfg(test)]\nmod tests;\n#[cfg(\n    all(test, unix)\n)]\npub(crate) mod slow { }\n#[path = \"x.rs\"] mod y;\nmod inline {\n}\nfn modest() {}\n";
        let d = decls(text);
        let got: Vec<(&str, u32, &str, bool)> = d
            .iter()
            .map(|d| (d.name.as_str(), d.line, d.attrs.as_str(), d.file))
            .collect();
        assert_eq!(
            got,
            [
                ("agent", 3, "", true),
                ("tests", 5, "#[cfg(test)]", true),
                ("slow", 9, "#[cfg(all(test,unix))]", false),
                ("y", 10, "#[path=\"x.rs\"]", true),
                ("inline", 11, "", false),
            ]
        );
        assert_eq!(
            targets("src/lib.rs", "governance"),
            ["src/governance.rs", "src/governance/mod.rs"]
        );
        assert_eq!(
            targets("src/swarm/mod.rs", "plan"),
            ["src/swarm/plan.rs", "src/swarm/plan/mod.rs"]
        );
        assert_eq!(
            targets("src/swarm.rs", "plan"),
            ["src/swarm/plan.rs", "src/swarm/plan/mod.rs"]
        );
        assert_eq!(
            targets("tests/tests.rs", "merge"),
            ["tests/merge.rs", "tests/merge/mod.rs"]
        );
        assert_eq!(targets("lib.rs", "a"), ["a.rs", "a/mod.rs"]);
    }

    #[test]
    fn what_rewires_a_module() {
        let cases: &[(&str, bool)] = &[
            ("#[path = \"bench_fake.rs\"]", true),
            ("#[path=\"x.rs\"] pub mod bench;", true),
            ("#![path = \"x\"]", true),
            ("#[cfg_attr(unix, path = \"u.rs\")]", true),
            ("include!(\"gen.rs\");", true),
            ("include!(concat!(env!(\"OUT_DIR\"), \"/gen.rs\"));", true),
            ("const T: &str = include_str!(\"t.txt\");", false),
            ("// #[path = \"x\"]", false),
            ("let path = \"x\";", false),
            ("my_include!(x)", false),
        ];
        for (line, want) in cases {
            assert_eq!(rewires(line).is_some(), *want, "{line}");
        }
        assert_eq!(
            included(
                "src/panel.rs",
                "include_str!(\"../reviewers/a.toml\"), include_bytes!(\"d/b.bin\")"
            ),
            [
                Ok("reviewers/a.toml".to_string()),
                Ok("src/d/b.bin".to_string())
            ]
        );
        assert!(included("src/a.rs", "include_str!(concat!(\"a\"))")[0].is_err());
        assert!(included("src/a.rs", "include_str!(\"../../x\")")[0].is_err());
    }
}
