//! The judge surface: what decides whether a change's tests pass, beyond the panel's and the
//! policy's own files. Three parts, all pure (text in, paths and findings out):
//!
//! - [`BUILTIN`]: paths that judge in every repository (CI of the usual forges, the replay
//!   missions, the test runners' own configuration, build scripts);
//! - [`keyed_changes`]: files of which some keys judge and others do not (`Cargo.toml`'s
//!   `[lib]`, `[[test]]`, `[profile]`…; `pyproject.toml`'s `[tool.pytest]`…; `setup.cfg`'s
//!   `[tool:pytest]`; `package.json`'s `scripts` and `jest`), compared key by key;
//! - [`derive`]: the paths the repository's own configuration at base runs or reads: every
//!   file a `[gauntlet]` step or the `[validators.user_testing]` build and scenario runs or
//!   reads as configuration or expected output, and what those scripts run in turn (followed a
//!   few levels deep), the scripts the plans' contract checks under `plans/` run, and the
//!   configuration files of the programs those commands start (`cargo clippy` reads
//!   `clippy.toml`, `make` its `Makefile`). A file a command only names as the subject of its
//!   check (`sh -n src/app.sh`, `grep -q ok src/a.rs`) is the code being checked, not a judge. The
//!   caller reads the base (`panel::surface`) and passes the result in as [`Judged`] paths on
//!   the `ChangeView`, so that a new gauntlet step's script is covered the day it is added.

use std::collections::BTreeMap;

mod command;
mod follow;
pub mod shadow;
mod shell;
mod stdlib;

use command::{scan, Shell};
use follow::{folder, is_recipe, is_script};

/// A path that judges the change because the repository's configuration at base names it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Judged {
    /// A path in the repository (or a glob, `tests/*.sh`).
    pub path: String,
    /// Why it judges, for the finding (`the gauntlet step \`test\` (\`sh run.sh\`) runs or
    /// reads it`).
    pub why: String,
}

/// Paths that judge a change in every repository, besides the policy, the panel and
/// GOVERNANCE.md ([`super::JUDGES`]): CI, the replay missions, what configures the test
/// runners of Rust, Python and JavaScript, and build scripts.
pub const BUILTIN: &[&str] = &[
    // CI, on any forge.
    ".gitlab-ci.yml",
    ".gitlab/**",
    ".circleci/**",
    ".travis.yml",
    "azure-pipelines.yml",
    ".azure-pipelines/**",
    "Jenkinsfile",
    ".buildkite/**",
    ".drone.yml",
    ".woodpecker.yml",
    ".woodpecker/**",
    "bitbucket-pipelines.yml",
    "appveyor.yml",
    ".appveyor.yml",
    // The replay benchmark's missions: what measures a change to the conductor.
    "missions/**",
    // Rust: cargo's configuration (a `runner` decides what running a test means), the
    // toolchain, nextest's profiles, build scripts (they set the cfgs the tests compile with).
    "**/.cargo/config",
    "**/.cargo/config.toml",
    "rust-toolchain",
    "rust-toolchain.toml",
    "**/.config/nextest.toml",
    "**/build.rs",
    // Python: pytest's and tox's configuration, fixtures and hooks, coverage thresholds, and
    // what runs before any test (site customisation, .pth files).
    "**/conftest.py",
    "**/pytest.ini",
    "**/.pytest.ini",
    "**/pytest.toml",
    "**/.pytest.toml",
    "**/tox.ini",
    "**/noxfile.py",
    "**/.coveragerc",
    "**/sitecustomize.py",
    "**/usercustomize.py",
    "**/*.pth",
    // JavaScript: the runners' configuration and the transforms that run on every test.
    "**/jest.config.*",
    "**/vitest.config.*",
    "**/vitest.workspace.*",
    "**/vite.config.*",
    "**/.mocharc*",
    "**/karma.conf.*",
    "**/playwright.config.*",
    "**/cypress.config.*",
    "**/ava.config.*",
    "**/babel.config.*",
    "**/.babelrc*",
    "**/.nycrc*",
    "**/.c8rc*",
    // What runs without being source anyone reads: installed packages and the programs
    // they put on PATH (`npm test` runs `node_modules/.bin` first), and compiled bytecode
    // (Python loads a `.pyc` in `__pycache__/` in place of its source).
    // The package managers' own settings: `.npmrc` can set `node-options` and `script-shell`
    // for every script they run, `.pnpmfile.cjs` runs on every install.
    "**/.npmrc",
    "**/.yarnrc",
    "**/.yarnrc.yml",
    "**/.pnpmfile.cjs",
    "**/node_modules/**",
    "**/__pycache__/**",
    "**/*.pyc",
];

/// A file of which some keys judge: its name (in any folder), its format, and those keys
/// (dotted; a key judges with everything beneath it).
struct Keyed {
    name: &'static str,
    format: Format,
    keys: &'static [&'static str],
}

#[derive(Clone, Copy)]
enum Format {
    Toml,
    Json,
    Ini,
}

const KEYED: &[Keyed] = &[
    Keyed {
        name: "Cargo.toml",
        format: Format::Toml,
        keys: &[
            // Which targets are tests and whether they run (`test = false`, `harness`).
            "lib",
            "bin",
            "test",
            "bench",
            "example",
            // How tests are compiled (`debug-assertions`, `overflow-checks`, `panic`).
            "profile",
            // What `cfg(feature = …)` the tests see by default.
            "features",
            // What clippy's `-D warnings` refuses.
            "lints",
            "package.build",
            "package.autotests",
            "package.autobenches",
            "package.autobins",
            "package.autoexamples",
            "package.autolib",
            "workspace.members",
            "workspace.default-members",
            "workspace.exclude",
            "workspace.lints",
        ],
    },
    Keyed {
        name: "pyproject.toml",
        format: Format::Toml,
        keys: &[
            "tool.pytest",
            "tool.tox",
            "tool.nox",
            "tool.coverage",
            "tool.hatch",
            "tool.poe",
            "tool.pdm.scripts",
            "tool.ruff",
            "tool.mypy",
            "tool.black",
            "tool.isort",
            "tool.pyright",
            "build-system",
        ],
    },
    Keyed {
        name: "setup.cfg",
        format: Format::Ini,
        keys: &["tool:pytest", "coverage:", "flake8", "mypy", "aliases"],
    },
    Keyed {
        name: "package.json",
        format: Format::Json,
        keys: &["scripts", "jest", "mocha", "ava", "nyc", "c8", "babel"],
    },
    Keyed {
        name: "deno.json",
        format: Format::Json,
        keys: &["tasks", "test"],
    },
    Keyed {
        name: "deno.jsonc",
        format: Format::Json,
        keys: &["tasks", "test"],
    },
];

/// A plan task's contract checks and claims.
type Contract = (Vec<String>, Vec<String>);

/// What an agent's change takes away from a plan's contracts (a plan is any TOML file with a
/// `[plan]` table and `[[task]]`s, wherever it lives: `atelier run` takes any path): each check
/// a task ran at base that the same task (by id) no longer runs, changed, removed, or gone with
/// the task or its renaming; and each path a task's claims gain (what its workers may write
/// next, the files that judge them among them). Each contract check decides whether a swarm
/// attempt passes, so an agent may add checks, not take one away. `None` when neither side is
/// a plan.
pub fn plan_checks_dropped(
    path: &str,
    base: Option<&str>,
    head: Option<&str>,
) -> Option<Vec<String>> {
    if !path.ends_with(".toml") {
        return None;
    }
    let tasks = |text: Option<&str>| -> Option<BTreeMap<String, Contract>> {
        let t = text?.parse::<toml::Table>().ok()?;
        t.get("plan")?.as_table()?;
        let strings = |v: Option<&toml::Value>| -> Vec<String> {
            v.and_then(|v| v.as_array())
                .into_iter()
                .flatten()
                .filter_map(|c| c.as_str().map(str::to_string))
                .collect()
        };
        let list = t.get("task").and_then(|v| v.as_array());
        Some(
            list.into_iter()
                .flatten()
                .map(|task| {
                    let id = task.get("id").and_then(|v| v.as_str()).unwrap_or("?");
                    let checks = strings(task.get("contract").and_then(|c| c.get("checks")));
                    (id.to_string(), (checks, strings(task.get("files"))))
                })
                .collect(),
        )
    };
    let was = tasks(base);
    let now = tasks(head);
    if was.is_none() && now.is_none() {
        // Neither side is a plan; a plan's path whose head no longer parses still drops all.
        let plan_path = path.starts_with("plans/") && base.is_some();
        if !plan_path {
            return None;
        }
    }
    let was = was.unwrap_or_default();
    let now = now.unwrap_or_default();
    let mut out = Vec::new();
    for (id, (checks, files)) in &was {
        let (kept, claims) = now
            .get(id)
            .map(|(c, f)| (c.as_slice(), f.as_slice()))
            .unwrap_or((&[], &[]));
        for c in checks.iter().filter(|c| !kept.contains(c)) {
            out.push(format!("task {id}'s check `{c}`"));
        }
        for f in claims.iter().filter(|f| !files.contains(f)) {
            out.push(format!("task {id}'s new claim `{f}`"));
        }
    }
    Some(out)
}

/// Whether `path` is a file [`keyed_changes`] reads key by key (whole-file rules leave it alone).
pub fn is_keyed(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    path == "atelier.toml" || KEYED.iter().any(|k| k.name == name)
}

/// The judging keys whose values differ between a keyed file's two texts (`None` for a file
/// that is not keyed). A side that does not parse while the other does counts as every key
/// changed; a file added or removed counts the keys it has.
pub fn keyed_changes(path: &str, base: Option<&str>, head: Option<&str>) -> Option<Vec<String>> {
    let name = path.rsplit('/').next().unwrap_or(path);
    let k = KEYED.iter().find(|k| k.name == name)?;
    let read = |t: Option<&str>| -> Option<Result<BTreeMap<String, String>, ()>> {
        let t = t?;
        Some(match k.format {
            Format::Toml => t
                .parse::<toml::Table>()
                .map(|v| flatten_toml(&toml::Value::Table(v), k.keys))
                .map_err(|_| ()),
            Format::Json => serde_json::from_str::<serde_json::Value>(&strip_jsonc(t))
                .map(|v| flatten_json(&v, k.keys))
                .map_err(|_| ()),
            Format::Ini => Ok(ini_sections(t, k.keys)),
        })
    };
    let all = || k.keys.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    Some(match (read(base), read(head)) {
        (None, None) => Vec::new(),
        (Some(Ok(b)), Some(Ok(h))) => k
            .keys
            .iter()
            .filter(|key| b.get(**key) != h.get(**key))
            .map(|s| s.to_string())
            .collect(),
        (Some(Ok(one)), None) | (None, Some(Ok(one))) => k
            .keys
            .iter()
            .filter(|key| one.contains_key(**key))
            .map(|s| s.to_string())
            .collect(),
        (Some(Err(())), Some(Err(()))) => {
            if base == head {
                Vec::new()
            } else {
                all()
            }
        }
        _ => all(),
    })
}

/// Each judging key's value, as text (absent keys are left out).
fn flatten_toml(v: &toml::Value, keys: &[&str]) -> BTreeMap<String, String> {
    keys.iter()
        .filter_map(|k| {
            let mut at = v;
            for part in k.split('.') {
                at = at.get(part)?;
            }
            Some((k.to_string(), at.to_string()))
        })
        .collect()
}

fn flatten_json(v: &serde_json::Value, keys: &[&str]) -> BTreeMap<String, String> {
    keys.iter()
        .filter_map(|k| {
            let mut at = v;
            for part in k.split('.') {
                at = at.get(part)?;
            }
            Some((k.to_string(), at.to_string()))
        })
        .collect()
}

/// A JSON-with-comments text without its `//` line comments (deno.jsonc); strings kept.
fn strip_jsonc(t: &str) -> String {
    t.lines()
        .map(|l| {
            let mut in_str = false;
            let mut prev = '\0';
            for (i, c) in l.char_indices() {
                if c == '"' && prev != '\\' {
                    in_str = !in_str;
                }
                if !in_str && c == '/' && prev == '/' {
                    return &l[..i - 1];
                }
                prev = c;
            }
            l
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// An INI file's sections whose name is a judging key, or starts with one ending in `:`
/// (`coverage:` covers `[coverage:run]`), each section's lines trimmed and joined.
fn ini_sections(t: &str, keys: &[&str]) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    let mut current: Option<String> = None;
    for l in t.lines() {
        let l = l.trim();
        if l.is_empty() || l.starts_with('#') || l.starts_with(';') {
            continue;
        }
        if let Some(name) = l.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
            let name = name.trim();
            current = keys
                .iter()
                .find(|k| {
                    name == **k
                        || (k.ends_with(':') && name.starts_with(**k))
                        || name.starts_with(&format!("{k}-"))
                })
                .map(|k| k.to_string());
            if let Some(k) = &current {
                out.entry(k.clone())
                    .or_default()
                    .push_str(&format!("[{name}]\n"));
            }
            continue;
        }
        if let Some(k) = &current {
            let s = out.entry(k.clone()).or_default();
            s.push_str(l);
            s.push('\n');
        }
    }
    out
}

/// What the base's files are, for [`derive`]: a file's text (`None` when no file is there).
pub type Lookup<'a> = &'a dyn Fn(&str) -> Option<String>;

/// How a command's files are taken: a gauntlet step or the scenario judges what it runs and
/// the configuration it reads; a contract check only what it runs (what else it names is the
/// task's work). Neither judges a file it merely names as its subject (`sh -n src/app.sh`,
/// `shellcheck x.sh`, `grep -q ok src/a.rs`): that is the code being checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    Step,
    Check,
}

/// What a command does with a file it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Runs it: a script given to an interpreter, a program started by its path, a module.
    Run,
    /// Reads it as configuration: a tool's own file (`clippy.toml`, a `Makefile`), a file
    /// passed to a `--config`-like option, or one with a configuration's extension.
    Config,
    /// Only names it: the subject of a check, or data.
    Named,
}

/// The commands the configuration at base runs to judge: `(why, command, reach)`. `config` is
/// atelier.toml's text, `plans` the `(path, text)` of the plan files under `plans/`.
pub fn commands(config: Option<&str>, plans: &[(String, String)]) -> Vec<(String, String, Reach)> {
    let mut out = Vec::new();
    if let Some(t) = config.and_then(|c| c.parse::<toml::Table>().ok()) {
        let steps = t
            .get("gauntlet")
            .and_then(|g| g.get("steps"))
            .and_then(|s| s.as_array());
        for s in steps.into_iter().flatten() {
            let name = s.get("name").and_then(|n| n.as_str()).unwrap_or("?");
            if let Some(run) = s.get("run").and_then(|r| r.as_str()) {
                out.push((
                    format!("the gauntlet step `{name}`"),
                    run.to_string(),
                    Reach::Step,
                ));
            }
        }
        let ut = t.get("validators").and_then(|v| v.get("user_testing"));
        for (key, what) in [("build", "build"), ("scenario", "scenario")] {
            let list = ut.and_then(|u| u.get(key)).and_then(|s| s.as_array());
            for c in list.into_iter().flatten().filter_map(|c| c.as_str()) {
                out.push((
                    format!("the user-testing {what}"),
                    c.to_string(),
                    Reach::Step,
                ));
            }
        }
    }
    for (path, text) in plans {
        let Ok(t) = text.parse::<toml::Table>() else {
            continue;
        };
        let tasks = t.get("task").and_then(|v| v.as_array());
        for task in tasks.into_iter().flatten() {
            let id = task.get("id").and_then(|v| v.as_str()).unwrap_or("?");
            let checks = task
                .get("contract")
                .and_then(|c| c.get("checks"))
                .and_then(|c| c.as_array());
            for c in checks.into_iter().flatten().filter_map(|c| c.as_str()) {
                out.push((
                    format!("the contract check of task `{id}` in {path}"),
                    c.to_string(),
                    Reach::Check,
                ));
            }
        }
    }
    out
}

/// The most paths [`derive`] returns, and how deep it follows scripts into the scripts they
/// run: a bound on what one gate evaluation reads.
const MAX_JUDGED: usize = 200;
const MAX_DEPTH: usize = 3;
const MAX_SCRIPT_LINES: usize = 2000;

/// The paths the commands run or read as configuration (see [`Reach`]), following the scripts
/// they run (`lookup` reads them at base) up to [`MAX_DEPTH`] levels. Files with key-level
/// rules (atelier.toml, Cargo.toml, package.json…) and test files are left out (tests-tamper
/// reads those), unless a command runs the test file itself (`python3 tests/run.py`).
pub fn derive(commands: &[(String, String, Reach)], lookup: Lookup) -> Vec<Judged> {
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    let mut queue: Vec<Item> = commands
        .iter()
        .rev()
        .map(|(w, c, r)| Item {
            origin: w.clone(),
            via: None,
            command: c.clone(),
            reach: *r,
            depth: 0,
            cwd: String::new(),
            vars: BTreeMap::new(),
        })
        .collect();
    let mut seen = std::collections::BTreeSet::new();
    while let Some(item) = queue.pop() {
        let scan = scan(
            &mut Shell {
                cwd: item.cwd.clone(),
                stack: Vec::new(),
                vars: item.vars.clone(),
            },
            &item.command,
        );
        let why = || match &item.via {
            None => format!("{} (`{}`)", item.origin, short(&item.command)),
            Some(v) => format!(
                "{v} (`{}`), which {} runs,",
                short(&item.command),
                item.origin
            ),
        };
        let deeper = item.depth + 1 < MAX_DEPTH;
        for (path, role, cwd) in scan.files {
            if out.len() >= MAX_JUDGED {
                break;
            }
            let judges = match item.reach {
                Reach::Step => role != Role::Named,
                // A recipe (`make check`'s Makefile, a justfile, a Taskfile) is what the check
                // runs, not configuration beside it.
                Reach::Check => {
                    role == Role::Run
                        || is_recipe(&path)
                        || path.ends_with("Taskfile.yml")
                        || path.ends_with("Taskfile.yaml")
                        || path.ends_with("Makefile.toml")
                }
            };
            if !judges || is_keyed(&path) {
                continue;
            }
            // A test file a runner is pointed at with its options is tests-tamper's.
            // A recipe or a makefile is what a command runs, even in a test folder.
            let recipe = is_recipe(&path) || path.ends_with(".mk");
            if role != Role::Run && !recipe && super::weakened_tests::is_test_path(&path) {
                continue;
            }
            out.entry(path.clone()).or_insert_with(why);
            // What a script (or a recipe) runs judges too.
            if deeper && seen.insert(path.clone()) {
                if let Some(text) = lookup(&path).filter(|t| is_script(&path, t)) {
                    let lines = script_items(&path, &text, &cwd, lookup, &item, &mut out);
                    queue.extend(lines.into_iter().rev());
                }
            }
        }
        // A package manager's script: what its command runs, from the package's folder.
        for (dir, script) in scan.scripts {
            let manifest = if dir.is_empty() {
                "package.json".to_string()
            } else {
                format!("{dir}/package.json")
            };
            if !deeper || !seen.insert(format!("{manifest}#{script}")) {
                continue;
            }
            let text = lookup(&manifest).unwrap_or_default();
            for command in follow::script_commands(&text, &script).into_iter().rev() {
                queue.push(Item {
                    origin: item.origin.clone(),
                    via: Some(format!("{manifest}'s script `{script}`")),
                    command,
                    reach: Reach::Step,
                    depth: item.depth + 1,
                    cwd: dir.clone(),
                    vars: BTreeMap::new(),
                });
            }
        }
    }
    out.into_iter()
        .map(|(path, why)| Judged {
            path,
            why: format!("{why} runs or reads it"),
        })
        .collect()
}

/// A command [`derive`] reads: what runs it at the top, the script it is a line of, the
/// command, its reach, how deep it is, and the folder it runs in.
struct Item {
    origin: String,
    via: Option<String>,
    command: String,
    reach: Reach,
    depth: usize,
    cwd: String,
    /// The variables the script set before this line.
    vars: BTreeMap<String, Vec<String>>,
}

/// The lines of a script (or a recipe) `path`, started in `cwd`, as the commands to read, each
/// in the folder it runs in; the files a recipe includes are judged here (with what they
/// include in turn, and the variables they define expanded in the recipe).
fn script_items(
    path: &str,
    text: &str,
    cwd: &str,
    lookup: Lookup,
    parent: &Item,
    out: &mut BTreeMap<String, String>,
) -> Vec<Item> {
    let item = |command: String, cwd: String, vars: BTreeMap<String, Vec<String>>| Item {
        origin: parent.origin.clone(),
        via: Some(path.to_string()),
        command,
        reach: Reach::Step,
        depth: parent.depth + 1,
        cwd,
        vars,
    };
    if !is_recipe(path) {
        // The working directory and the variables carry from line to line.
        let mut shell = Shell {
            cwd: cwd.to_string(),
            ..Shell::default()
        };
        return follow::shell_lines(path, text)
            .into_iter()
            .take(MAX_SCRIPT_LINES)
            .map(|l| {
                let (at, vars) = (shell.cwd.clone(), shell.vars.clone());
                scan(&mut shell, &l);
                item(l, at, vars)
            })
            .collect();
    }
    // make runs in its Makefile's folder (a `.mk` is read by one run from `cwd`).
    let dir = if path.ends_with(".mk") {
        cwd
    } else {
        folder(path)
    };
    let mut defs = vec![text.to_string()];
    let mut todo = follow::includes(dir, text);
    let mut depth = 0;
    while !todo.is_empty() && depth < MAX_DEPTH {
        depth += 1;
        for inc in std::mem::take(&mut todo) {
            if out.len() >= MAX_JUDGED || out.contains_key(&inc) {
                continue;
            }
            out.insert(
                inc.clone(),
                format!("{path} (`include {inc}`), which {} runs,", parent.origin),
            );
            if let Some(t) = lookup(&inc) {
                todo.extend(follow::includes(dir, &t));
                defs.push(t);
            }
        }
    }
    let defs: Vec<&str> = defs.iter().map(String::as_str).collect();
    follow::recipe_lines(text, &defs)
        .into_iter()
        .take(MAX_SCRIPT_LINES)
        .map(|l| item(l, dir.to_string(), BTreeMap::new()))
        .collect()
}

/// A command as the finding shows it: a script's own folder as its path from the root.
fn short(command: &str) -> String {
    let t = command.replace(&format!("{}/", follow::ROOT), "");
    let t = t.trim();
    if t.chars().count() <= 60 {
        t.to_string()
    } else {
        format!("{}…", t.chars().take(60).collect::<String>())
    }
}

/// The files one command line names, with what it does with each ([`Role`]).
pub fn files_of(command: &str) -> Vec<(String, Role)> {
    scan(&mut Shell::default(), command)
        .files
        .into_iter()
        .map(|(p, r, _)| (p, r))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_files_a_command_names_or_runs() {
        use Role::{Config, Named, Run};
        // (command, expected (path, role) pairs)
        let cases: &[(&str, &[(&str, Role)])] = &[
            ("cargo test", &[]),
            (
                "cargo fmt --check",
                &[("rustfmt.toml", Config), (".rustfmt.toml", Config)],
            ),
            ("sh scripts/check.sh", &[("scripts/check.sh", Run)]),
            ("python3 tests/run.py --fast", &[("tests/run.py", Run)]),
            ("./run_tests", &[("run_tests", Run)]),
            ("bash -c 'cd sub && ./x.sh'", &[("sub/x.sh", Run)]),
            (
                "python -m tools.verify",
                &[
                    ("tools/__init__.py", Run),
                    ("tools/verify.py", Run),
                    ("tools/verify/__init__.py", Run),
                    ("tools/verify/__main__.py", Run),
                ],
            ),
            (
                "make -C web test",
                // The recipe there, not the one here.
                &[("web/Makefile", Config)],
            ),
            (
                "CI=1 node scripts/a.js > out.txt 2>&1",
                &[("scripts/a.js", Run)],
            ),
            (
                "cargo run -- bench --config ./conf/x.toml --seed data/s.txt",
                // The program `cargo run` builds is run.
                &[
                    ("conf/x.toml", Config),
                    ("data/s.txt", Named),
                    ("src/main.rs", Run),
                ],
            ),
            (
                "pytest -q -c ci/pytest.cfg tests/ --cov-fail-under=90",
                &[("ci/pytest.cfg", Config)],
            ),
            (
                "deno test -A && bun run scripts/b.ts",
                &[("scripts/b.ts", Run)],
            ),
            ("echo $HOME/x /etc/passwd ../outside", &[]),
            (
                "timeout 60 sh check # a comment sh other.sh",
                &[("check", Run)],
            ),
            // The subject of a check is not a judge: only its syntax is read.
            ("sh -n src/app.sh", &[("src/app.sh", Named)]),
            (
                "set -e; . ./checks.sh && source lib/env.sh",
                &[("checks.sh", Run), ("lib/env.sh", Run)],
            ),
            (
                "shellcheck scripts/a.sh && grep -q ok src/a.rs",
                &[("scripts/a.sh", Named), ("src/a.rs", Named)],
            ),
            (
                "./bin/app > out.txt && diff -u ci/expected/out.txt out.txt",
                &[
                    ("bin/app", Run),
                    // Both sides of a comparison: either may be the expected output.
                    ("ci/expected/out.txt", Config),
                    ("out.txt", Config),
                ],
            ),
        ];
        let mut failures = Vec::new();
        for (cmd, want) in cases {
            let got = files_of(cmd);
            let want: Vec<(String, Role)> = want.iter().map(|(p, r)| (p.to_string(), *r)).collect();
            if got != want {
                failures.push(format!("{cmd}: got {got:?}, want {want:?}"));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    #[test]
    fn the_configuration_names_its_judges_and_scripts_are_followed() {
        let config = "[gauntlet]\nsteps = [\n  { name = \"syntax\", run = \"sh -n src/app.sh\" },\n  { name = \"check\", run = \"sh scripts/check.sh\" },\n  { name = \"py\", run = \"python3 tests/run.py\" },\n  { name = \"t\", run = \"pytest tests/test_a.py\" },\n]\n[validators.user_testing]\nscenario = [\"./demo.sh --config atelier.toml\"]\n";
        let plans = vec![(
            "plans/p.toml".to_string(),
            "[plan]\nid = \"p\"\n[[task]]\nid = \"A\"\n[task.contract]\nchecks = [\"grep -q x src/a.rs && sh tests/verify.sh\"]\n".to_string(),
        )];
        let cmds = commands(Some(config), &plans);
        assert_eq!(cmds.len(), 6, "{cmds:?}");
        let lookup = |p: &str| match p {
            "scripts/check.sh" => Some(
                "#!/bin/sh\nset -e\npython3 scripts/lint.py \\\n  --strict\n# sh not/this.sh\n"
                    .to_string(),
            ),
            "scripts/lint.py" => Some("import os\n".to_string()),
            _ => None,
        };
        let judged = derive(&cmds, &lookup);
        let paths: Vec<&str> = judged.iter().map(|j| j.path.as_str()).collect();
        // The contract check's grep names src/a.rs (the task's work) but runs tests/verify.sh;
        // pytest's test file is tests-tamper's; atelier.toml has its own rule.
        assert_eq!(
            paths,
            [
                "demo.sh",
                "scripts/check.sh",
                "scripts/lint.py",
                "tests/run.py",
                "tests/verify.sh"
            ],
            "{judged:#?}"
        );
        let lint = judged
            .iter()
            .find(|j| j.path == "scripts/lint.py")
            .expect("lint");
        assert!(
            lint.why
                .starts_with("scripts/check.sh (`python3 scripts/lint.py")
                && lint
                    .why
                    .ends_with("which the gauntlet step `check` runs, runs or reads it"),
            "{}",
            lint.why
        );
        // A script that runs itself is read once.
        let looping = |p: &str| (p == "a.sh").then(|| "sh a.sh\n".to_string());
        let cmds = vec![(
            "the gauntlet step `a`".to_string(),
            "sh a.sh".to_string(),
            Reach::Step,
        )];
        assert_eq!(derive(&cmds, &looping).len(), 1);
        // No configuration, or one that does not parse: nothing.
        assert!(commands(None, &[]).is_empty());
        assert!(commands(Some("[gauntlet"), &[]).is_empty());
    }

    /// What a step really runs: make's includes and the variables its recipes expand, the
    /// command of the package.json script a step runs, and a shell's working directory
    /// carried across lines and a script's own folder.
    #[test]
    fn derivation_follows_includes_package_scripts_and_the_working_directory() {
        let files: &[(&str, &str)] = &[
            (
                "scripts/check.sh",
                "#!/bin/sh\nset -e\n. \"$(dirname \"$0\")/lib.sh\"\nHERE=\"$(cd \"$(dirname \"$0\")\" && pwd)\"\nsh \"$HERE/more.sh\"\npython3 -m pytest -q tests\ncd web\nsh ./run.sh\nnpm test\npushd tools\n./t.sh\npopd\n./after.sh\n",
            ),
            ("Makefile", "include mk/vars.mk\n-include mk/local.mk\nCHECKER := tools/checker.py\ncheck:\n\t$(PYTEST) tests\n\tpython3 $(CHECKER)\n"),
            ("mk/vars.mk", "PYTEST := python3 tools/pt.py\nsinclude mk/deep.mk\n"),
            (
                "web/package.json",
                "{\"scripts\": {\"pretest\": \"node tools/setup.js\", \"test\": \"node tools/run-tests.js\", \"lint\": \"node tools/lint.js\"}}",
            ),
            ("other/go.sh", "#!/bin/sh\ncd web\nsh ./unjudged.sh\n"),
        ];
        let lookup = |p: &str| {
            files
                .iter()
                .find(|(f, _)| *f == p)
                .map(|(_, t)| t.to_string())
        };
        let step = |cmd: &str| {
            (
                "the gauntlet step `s`".to_string(),
                cmd.to_string(),
                Reach::Step,
            )
        };
        let cmds = vec![step("sh scripts/check.sh"), step("make check")];
        let judged = derive(&cmds, &lookup);
        let paths: Vec<&str> = judged.iter().map(|j| j.path.as_str()).collect();
        for want in [
            "scripts/lib.sh",
            "scripts/more.sh",
            "pytest/__init__.py",
            "pytest.py",
            "web/run.sh",
            "web/tools/setup.js",
            "web/tools/run-tests.js",
            "web/tools/t.sh",
            "web/after.sh",
            "mk/vars.mk",
            "mk/local.mk",
            "mk/deep.mk",
            "tools/pt.py",
            "tools/checker.py",
        ] {
            assert!(paths.contains(&want), "{want} not in {paths:?}");
        }
        // What nothing runs stays unjudged: another script's `cd`, a script the step does not run,
        // a package script no step runs, the root-level twin of a `cd`'s file.
        for not in [
            "web/unjudged.sh",
            "run.sh",
            "web/tools/lint.js",
            "tools/run-tests.js",
        ] {
            assert!(!paths.contains(&not), "{not} in {paths:?}");
        }
        let run_tests = judged
            .iter()
            .find(|j| j.path == "web/tools/run-tests.js")
            .expect("run-tests");
        assert!(
            run_tests
                .why
                .starts_with("web/package.json's script `test`"),
            "{}",
            run_tests.why
        );
        // A script's own folder is shown as the path it resolves to.
        let lib = judged
            .iter()
            .find(|j| j.path == "scripts/lib.sh")
            .expect("lib");
        assert!(
            lib.why
                .starts_with("scripts/check.sh (`. \"scripts/lib.sh\"`)"),
            "{}",
            lib.why
        );
        // The package managers' spellings of running a script.
        for (cmd, script) in [
            ("npm test", "test"),
            ("npm run lint", "lint"),
            ("npm run-script lint", "lint"),
            ("yarn lint", "lint"),
            ("yarn run lint", "lint"),
            ("pnpm lint", "lint"),
            ("pnpm --dir web test", "test"),
            ("bun run lint", "lint"),
        ] {
            let mut shell = Shell::default();
            let got = scan(&mut shell, cmd).scripts;
            assert!(
                got.iter().any(|(_, s)| s == script),
                "{cmd}: {got:?}, want {script}"
            );
        }
        for cmd in [
            "npm install",
            "yarn install",
            "pnpm add x",
            "bun test",
            "npm ci",
        ] {
            assert!(scan(&mut Shell::default(), cmd).scripts.is_empty(), "{cmd}");
        }
    }

    #[test]
    fn keyed_files_judge_by_their_keys() {
        // (path, base, head, the judging keys that changed)
        type Case<'a> = (&'a str, Option<&'a str>, Option<&'a str>, &'a [&'a str]);
        let cases: &[Case] = &[
            (
                "Cargo.toml",
                Some("[package]\nname = \"a\"\n"),
                Some("[package]\nname = \"a\"\n[lib]\ntest = false\n"),
                &["lib"],
            ),
            (
                "Cargo.toml",
                Some("[package]\nname = \"a\"\n"),
                Some("[package]\nname = \"a\"\nversion = \"2\"\n"),
                &[],
            ),
            (
                "crates/x/Cargo.toml",
                Some("[profile.test]\ndebug-assertions = true\n"),
                Some("[profile.test]\ndebug-assertions = false\n"),
                &["profile"],
            ),
            (
                "Cargo.toml",
                Some("[package]\n"),
                Some("[package\n"),
                &[
                    "lib",
                    "bin",
                    "test",
                    "bench",
                    "example",
                    "profile",
                    "features",
                    "lints",
                    "package.build",
                    "package.autotests",
                    "package.autobenches",
                    "package.autobins",
                    "package.autoexamples",
                    "package.autolib",
                    "workspace.members",
                    "workspace.default-members",
                    "workspace.exclude",
                    "workspace.lints",
                ],
            ),
            (
                "package.json",
                Some("{\"scripts\": {\"test\": \"jest\"}}"),
                Some("{\"scripts\": {\"test\": \"exit 0\"}}"),
                &["scripts"],
            ),
            (
                "web/package.json",
                Some("{\"name\": \"a\", \"jest\": {\"testPathIgnorePatterns\": []}}"),
                Some("{\"name\": \"b\", \"jest\": {\"testPathIgnorePatterns\": []}}"),
                &[],
            ),
            (
                "package.json",
                None,
                Some("{\"scripts\": {\"test\": \"true\"}}"),
                &["scripts"],
            ),
            (
                "pyproject.toml",
                Some("[tool.pytest.ini_options]\naddopts = \"-q\"\n"),
                Some("[tool.pytest.ini_options]\naddopts = \"-q -k nothing\"\n"),
                &["tool.pytest"],
            ),
            (
                "setup.cfg",
                Some("[metadata]\nname = a\n[tool:pytest]\naddopts = -q\n"),
                Some("[metadata]\nname = b\n[tool:pytest]\naddopts = -q -k nope\n"),
                &["tool:pytest"],
            ),
            (
                "setup.cfg",
                Some("[coverage:report]\nfail_under = 90\n"),
                Some("[coverage:report]\nfail_under = 0\n"),
                &["coverage:"],
            ),
            (
                "deno.jsonc",
                Some("{\n  // tasks\n  \"tasks\": {\"test\": \"deno test\"}\n}"),
                Some("{\n  // tasks\n  \"tasks\": {\"test\": \"true\"}\n}"),
                &["tasks"],
            ),
        ];
        let mut failures = Vec::new();
        for (path, base, head, want) in cases {
            let got = keyed_changes(path, *base, *head).expect("keyed");
            if got != *want {
                failures.push(format!(
                    "{path} {base:?} -> {head:?}: got {got:?}, want {want:?}"
                ));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
        assert!(keyed_changes("src/lib.rs", Some("a"), Some("b")).is_none());
        assert!(is_keyed("atelier.toml") && is_keyed("a/package.json") && !is_keyed("src/a.rs"));
    }

    #[test]
    fn a_plan_may_gain_checks_but_not_lose_one() {
        let plan = |tasks: &[(&str, &str, &str)]| {
            let mut t = "[plan]\nid = \"p\"\ntitle = \"P\"\n".to_string();
            for (id, checks, files) in tasks {
                t.push_str(&format!("\n[[task]]\nid = \"{id}\"\ntitle = \"T\"\nrole = \"coder\"\ngoal = \"g\"\nfiles = [{files}]\n[task.contract]\nchecks = [{checks}]\n"));
            }
            t
        };
        let both = "\"cargo test -q retry\"";
        let base = plan(&[
            ("A", &format!("{both}, \"sh ci.sh\""), "\"src/a.rs\""),
            ("B", both, "\"src/b.rs\""),
        ]);
        // (head, what it takes away)
        let cases: Vec<(String, Vec<&str>)> = vec![
            (
                plan(&[
                    (
                        "A",
                        &format!("{both}, \"sh ci.sh\", \"cargo clippy\""),
                        "\"src/a.rs\"",
                    ),
                    ("B", both, "\"src/b.rs\""),
                    ("C", "\"true\"", "\"src/c.rs\""),
                ]),
                vec![],
            ),
            (
                plan(&[
                    ("A", "\"sh ci.sh\"", "\"src/a.rs\""),
                    ("B", both, "\"src/b.rs\""),
                ]),
                vec!["task A's check `cargo test -q retry`"],
            ),
            (
                plan(&[
                    (
                        "A",
                        &format!("{both}, \"sh ci.sh\""),
                        "\"src/a.rs\", \"tests/**\"",
                    ),
                    ("B", both, "\"src/b.rs\""),
                ]),
                vec!["task A's new claim `tests/**`"],
            ),
            (
                plan(&[
                    ("A2", &format!("{both}, \"sh ci.sh\""), "\"src/a.rs\""),
                    ("B", both, "\"src/b.rs\""),
                ]),
                vec![
                    "task A's check `cargo test -q retry`",
                    "task A's check `sh ci.sh`",
                ],
            ),
            (
                "not toml [".to_string(),
                vec![
                    "task A's check `cargo test -q retry`",
                    "task A's check `sh ci.sh`",
                    "task B's check `cargo test -q retry`",
                ],
            ),
        ];
        for (head, want) in cases {
            let got =
                plan_checks_dropped("plans/p.toml", Some(&base), Some(&head)).expect("a plan");
            assert_eq!(got, want, "{head}");
        }
        assert_eq!(
            plan_checks_dropped(
                "ops/q.toml",
                Some(&base),
                Some("[plan]\nid = \"p\"\ntitle = \"P\"\n")
            )
            .map(|v| v.len()),
            Some(3)
        );
        assert_eq!(
            plan_checks_dropped("plans/p.toml", None, Some(&base)),
            Some(vec![])
        );
        assert_eq!(
            plan_checks_dropped(
                "Cargo.toml",
                Some("[package]\n"),
                Some("[package]\nname = \"x\"\n")
            ),
            None
        );
        assert_eq!(plan_checks_dropped("docs/p.md", Some(&base), None), None);
    }
}
