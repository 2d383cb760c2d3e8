//! How [`super::derive`] follows a file into what it runs: a shell script's lines with the
//! working directory tracked across them (`cd`, `pushd`, `popd`) and its own folder
//! (`$(dirname "$0")`, `${0%/*}`, a `SCRIPT_DIR=` set from them) resolved; a Makefile's recipe
//! lines with the variables it defines expanded, and the files it includes; and the command a
//! `package.json` script runs (`npm test`, `npm run x`, `yarn x`, `pnpm x`, `bun run x`).

/// The marker a script's own folder is written as before lexing: a path from the repository's
/// root, whatever the working directory is then (see [`super::normalize`]).
pub(super) const ROOT: &str = "@ROOT@";

/// Whether the file's lines are a recipe's (a Makefile, a `.mk`, a justfile).
pub(super) fn is_recipe(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    matches!(
        name,
        "Makefile" | "makefile" | "GNUmakefile" | "justfile" | "Justfile" | ".justfile"
    ) || name.ends_with(".mk")
}

/// A shell script (by its extension or its `#!` line) or a recipe whose lines are commands.
pub(super) fn is_script(path: &str, text: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    let ext = name.rsplit_once('.').map(|(_, e)| e);
    is_recipe(path)
        || matches!(ext, Some("sh" | "bash" | "zsh" | "ksh"))
        || text
            .lines()
            .next()
            .is_some_and(|l| l.starts_with("#!") && (l.contains("sh") || l.contains("bash")))
}

/// The folder of `path` (`""` at the root).
pub(super) fn folder(path: &str) -> &str {
    path.rsplit_once('/').map(|(d, _)| d).unwrap_or("")
}

/// The spellings of a script's own folder, longest first.
const SELF_DIR: &[&str] = &[
    "\"$(cd \"$(dirname \"$0\")\" && pwd)\"",
    "\"$(cd \"$(dirname \"${BASH_SOURCE[0]}\")\" && pwd)\"",
    "$(cd \"$(dirname \"$0\")\" && pwd)",
    "$(cd \"$(dirname \"${BASH_SOURCE[0]}\")\" && pwd)",
    "$(cd $(dirname $0) && pwd)",
    "\"$(dirname \"${BASH_SOURCE[0]}\")\"",
    "$(dirname \"${BASH_SOURCE[0]}\")",
    "\"$(dirname \"$0\")\"",
    "$(dirname \"$0\")",
    "$(dirname $0)",
    "`dirname $0`",
    "\"${0%/*}\"",
    "${0%/*}",
    "\"${BASH_SOURCE%/*}\"",
    "${BASH_SOURCE%/*}",
];

/// A shell script's lines with continuations joined, its own folder written as [`ROOT`]`/dir`
/// (and a variable set to it, `SCRIPT_DIR="$(dirname "$0")"`, replaced where it is used).
pub(super) fn shell_lines(path: &str, text: &str) -> Vec<String> {
    let own = format!("{ROOT}/{}", folder(path));
    let own = own.trim_end_matches('/').to_string();
    let mut vars: Vec<String> = Vec::new();
    joined(text, false)
        .into_iter()
        .map(|l| {
            let mut l = l;
            for s in SELF_DIR {
                l = l.replace(s, &own);
            }
            for v in &vars {
                for spelling in [
                    format!("\"${{{v}}}\""),
                    format!("\"${v}\""),
                    format!("${{{v}}}"),
                    format!("${v}"),
                ] {
                    l = l.replace(&spelling, &own);
                }
            }
            // `SCRIPT_DIR=@ROOT@/scripts`: later lines' `$SCRIPT_DIR` is that folder.
            if let Some((name, value)) = l.trim().trim_start_matches("export ").split_once('=') {
                let name = name
                    .trim_start_matches("readonly ")
                    .trim_start_matches("local ");
                if value.trim() == own
                    && !name.is_empty()
                    && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                {
                    vars.push(name.to_string());
                }
            }
            l
        })
        .collect()
}

/// The files a recipe includes (`include`, `-include`, `sinclude`), from the repository's root:
/// make reads them from its working directory `dir`, whichever file includes them (a glob
/// stays a glob; a path with a variable is not followed).
pub(super) fn includes(dir: &str, text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for l in text.lines().filter(|l| !l.starts_with('\t')) {
        let t = l.trim();
        let Some(rest) = ["include ", "-include ", "sinclude "]
            .iter()
            .find_map(|p| t.strip_prefix(p))
        else {
            continue;
        };
        for w in rest.split_whitespace() {
            let w = w.strip_prefix("./").unwrap_or(w);
            if w.contains('$') || w.starts_with('/') || w.contains("..") {
                continue;
            }
            out.push(if dir.is_empty() {
                w.to_string()
            } else {
                format!("{dir}/{w}")
            });
        }
    }
    out
}

/// A recipe's command lines, with the variables `defs` (its file and the files it includes)
/// define expanded (`$(PYTEST)`, `${PYTEST}`).
pub(super) fn recipe_lines(text: &str, defs: &[&str]) -> Vec<String> {
    let mut vars: Vec<(String, String)> = Vec::new();
    for l in defs.iter().flat_map(|d| d.lines()) {
        if l.starts_with('\t') {
            continue;
        }
        let t = l.trim();
        let t = t
            .trim_start_matches("export ")
            .trim_start_matches("override ");
        for op in ["::=", ":=", "?=", "+=", "="] {
            if let Some((name, value)) = t.split_once(op) {
                let name = name.trim();
                if !name.is_empty()
                    && name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
                {
                    vars.push((name.to_string(), value.trim().to_string()));
                }
                break;
            }
        }
    }
    joined(text, true)
        .into_iter()
        .map(|mut l| {
            for (name, value) in vars.iter().rev() {
                l = l
                    .replace(&format!("$({name})"), value)
                    .replace(&format!("${{{name}}}"), value);
            }
            l
        })
        .collect()
}

/// A script's commands: its lines with continuations joined (a recipe's are its indented
/// lines, their `@`/`-` prefixes dropped).
fn joined(text: &str, recipe: bool) -> Vec<String> {
    let mut out = Vec::new();
    let mut acc = String::new();
    for l in text.lines() {
        let t = if recipe {
            if !(l.starts_with('\t') || l.starts_with("    ")) {
                continue;
            }
            l.trim().trim_start_matches(['@', '-'])
        } else {
            l.trim()
        };
        if let Some(cont) = t.strip_suffix('\\') {
            acc.push_str(cont);
            acc.push(' ');
            continue;
        }
        acc.push_str(t);
        if !acc.trim().is_empty() && !acc.trim_start().starts_with('#') {
            out.push(std::mem::take(&mut acc));
        }
        acc.clear();
    }
    out
}

/// The package.json script a package manager's command runs: `(the folder option's value, the
/// script)`. `npm test`, `npm run x`, `yarn x`, `yarn run x`, `pnpm x`, `bun run x` (a `bun
/// run` of a file is the file's, see `arguments`).
pub(super) fn package_script(prog: &str, words: &[String]) -> Option<(Option<String>, String)> {
    const BUILTIN: &[&str] = &[
        "install",
        "i",
        "ci",
        "add",
        "remove",
        "rm",
        "uninstall",
        "update",
        "upgrade",
        "up",
        "init",
        "create",
        "workspace",
        "workspaces",
        "why",
        "info",
        "view",
        "config",
        "cache",
        "global",
        "link",
        "unlink",
        "pack",
        "publish",
        "version",
        "dlx",
        "exec",
        "x",
        "audit",
        "outdated",
        "list",
        "ls",
        "prune",
        "rebuild",
        "dedupe",
        "import",
        "store",
        "env",
        "help",
        "login",
        "logout",
        "whoami",
        "set",
        "plugin",
        "node",
        "bin",
        "root",
        "patch",
    ];
    if !matches!(prog, "npm" | "yarn" | "pnpm" | "bun") {
        return None;
    }
    let mut dir = None;
    let mut rest = Vec::new();
    let mut it = words.iter().skip(1);
    while let Some(w) = it.next() {
        match w.as_str() {
            "--prefix" | "--cwd" | "-C" | "--dir" => dir = it.next().cloned(),
            w if w.starts_with('-') => {
                if let Some((f, v)) = w.split_once('=') {
                    if matches!(f, "--prefix" | "--cwd" | "--dir") {
                        dir = Some(v.to_string());
                    }
                }
            }
            _ => rest.push(w.clone()),
        }
    }
    let sub = rest.first()?.as_str();
    let script = match (prog, sub) {
        (_, "run" | "run-script" | "rum" | "urn") => rest.get(1)?.clone(),
        ("npm" | "pnpm", "t" | "tst" | "test") => "test".into(),
        ("npm", "start" | "stop" | "restart") => sub.into(),
        ("npm" | "bun", _) => return None,
        (_, s) if BUILTIN.contains(&s) => return None,
        (_, s) => s.into(),
    };
    Some((dir, script))
}

/// The commands `package.json`'s `scripts` runs for `script`: its `pre` script, itself and its
/// `post` script (`None` when it has no such script or does not parse).
pub(super) fn script_commands(package_json: &str, script: &str) -> Vec<String> {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(package_json) else {
        return Vec::new();
    };
    let scripts = v.get("scripts");
    [
        format!("pre{script}"),
        script.to_string(),
        format!("post{script}"),
    ]
    .iter()
    .filter_map(|k| scripts?.get(k)?.as_str().map(str::to_string))
    .collect()
}
