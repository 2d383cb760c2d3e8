//! What one command line runs, reads as configuration, or only names, as the judge surface
//! reads it: [`scan`] follows the shell's folder and variables across its simple commands,
//! what they nest (`sh -c`, `$(…)`, `eval`, a wrapper's command, a pipe into an interpreter,
//! a here-document), and each program's arguments ([`arguments`]).

use std::collections::BTreeMap;

use super::shell::{self, is_node, is_shell, program_and_arguments, simple_commands};
use super::{follow, shadow, Role};

/// Interpreters: the first word after them (and their options) is a file they run.
pub(super) const INTERPRETERS: &[&str] = &[
    ".", "source", "sh", "bash", "dash", "zsh", "ksh", "python", "python3", "python2", "node",
    "nodejs", "ruby", "perl", "php", "lua", "ts-node", "tsx", "bun", "deno", "Rscript", "pwsh",
];

/// Extensions of files that are code or configuration (a word with one is a path).
const FILE_EXTS: &[&str] = &[
    "sh", "bash", "zsh", "py", "js", "mjs", "cjs", "ts", "mts", "cts", "rb", "pl", "php", "lua",
    "mk", "toml", "json", "jsonc", "ini", "cfg", "yml", "yaml", "conf", "txt", "ps1", "r", "R",
    "nix", "cmake", "gradle", "kts", "xml",
];

/// The configuration files a program reads wherever it runs, by the program (and, for cargo,
/// its subcommand).
fn program_configs(program: &str, sub: Option<&str>) -> &'static [&'static str] {
    match (program, sub) {
        ("cargo", Some("clippy")) => &["clippy.toml", ".clippy.toml"],
        ("cargo", Some("fmt")) => &["rustfmt.toml", ".rustfmt.toml"],
        ("cargo", Some("deny")) => &["deny.toml"],
        ("cargo", Some("make")) => &["Makefile.toml"],
        ("rustfmt", _) => &["rustfmt.toml", ".rustfmt.toml"],
        ("make" | "gmake", _) => &["Makefile", "makefile", "GNUmakefile"],
        ("just", _) => &["justfile", "Justfile", ".justfile"],
        ("rake", _) => &["Rakefile"],
        ("task", _) => &["Taskfile.yml", "Taskfile.yaml"],
        ("pre-commit", _) => &[".pre-commit-config.yaml"],
        ("ruff", _) => &["ruff.toml", ".ruff.toml"],
        ("flake8", _) => &[".flake8"],
        ("mypy", _) => &["mypy.ini", ".mypy.ini"],
        ("eslint", _) => &[
            ".eslintrc",
            ".eslintrc.js",
            ".eslintrc.cjs",
            ".eslintrc.json",
            ".eslintrc.yml",
            "eslint.config.js",
            "eslint.config.mjs",
            "eslint.config.cjs",
        ],
        ("prettier", _) => &[".prettierrc", ".prettierrc.json", "prettier.config.js"],
        ("tsc", _) => &["tsconfig.json"],
        ("cmake", _) => &["CMakeLists.txt"],
        ("meson", _) => &["meson.build"],
        ("ninja", _) => &["build.ninja"],
        ("gradle" | "./gradlew", _) => &["build.gradle", "build.gradle.kts", "settings.gradle"],
        ("mvn", _) => &["pom.xml"],
        _ => &[],
    }
}

/// Where a shell is: its working directory (`""`: the root), its `pushd` stack, and the
/// variables it was given values for (`D=tests`, `for f in tests/*.sh`).
#[derive(Default, Clone)]
pub(super) struct Shell {
    pub(super) cwd: String,
    pub(super) stack: Vec<String>,
    pub(super) vars: BTreeMap<String, Vec<String>>,
}

impl Shell {
    /// A shell for a command run from this one (`sh -c`, `$(…)`): its folder and variables.
    fn nested(&self) -> Shell {
        Shell {
            cwd: self.cwd.clone(),
            stack: Vec::new(),
            vars: self.vars.clone(),
        }
    }

    /// A word with the variables this shell knows put in: `$f` alone becomes each of its
    /// values; `$D/check.sh`, `${D}/check.sh` their one value. Unknown variables stay.
    fn expand(&self, word: &str) -> Vec<String> {
        let name = |w: &str| {
            w.strip_prefix("${")
                .and_then(|r| r.strip_suffix('}'))
                .or_else(|| w.strip_prefix('$'))
                .map(str::to_string)
        };
        if let Some(values) = name(word).and_then(|n| self.vars.get(&n)) {
            return values.clone();
        }
        let mut w = word.to_string();
        for (k, v) in self.vars.iter().filter(|(_, v)| v.len() == 1) {
            w = w
                .replace(&format!("${{{k}}}"), &v[0])
                .replace(&format!("${k}"), &v[0]);
        }
        vec![w]
    }

    /// `$first`, `$first+1`… are `values` (`sh -c '…' NAME ARG…` gives `$0` and `$1`…).
    fn positional(&mut self, values: &[String], first: usize) {
        for (i, v) in values.iter().enumerate() {
            self.vars.insert((first + i).to_string(), vec![v.clone()]);
        }
        self.vars.insert(
            "@".into(),
            values.iter().skip(1 - first.min(1)).cloned().collect(),
        );
    }

    /// Takes in what a simple command assigns: `X=v` alone, `for f in a b; do`. True when
    /// the command did nothing else.
    fn assign(&mut self, words: &[String]) -> bool {
        if words.first().is_some_and(|w| w == "for") && words.get(2).is_some_and(|w| w == "in") {
            self.vars.insert(words[1].clone(), words[3..].to_vec());
            return true;
        }
        // `set -- a b`: the positional parameters.
        if words.first().is_some_and(|w| w == "set") && words.get(1).is_some_and(|w| w == "--") {
            self.positional(&words[2..], 1);
            return true;
        }
        let assignments: Vec<(&str, &str)> = words
            .iter()
            .map_while(|w| {
                w.split_once('=').filter(|(k, _)| {
                    !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                })
            })
            .collect();
        for (k, v) in &assignments {
            let v = self.expand(v).join(" ");
            self.vars.insert(k.to_string(), vec![v]);
        }
        !assignments.is_empty() && assignments.len() == words.len()
    }
}

/// The command lines inside a word: `$(…)` and `` `…` `` substitutions, which run.
fn substitutions(word: &str) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(i) = word.find("$(") {
        if let Some(j) = word.rfind(')').filter(|&j| j > i + 2) {
            out.push(word[i + 2..j].to_string());
        }
    }
    let ticks: Vec<&str> = word.split('`').collect();
    out.extend(ticks.iter().skip(1).step_by(2).map(|s| s.to_string()));
    out
}

/// What a simple command runs besides its own arguments: a command line it is given as an
/// option's value or as `eval`'s arguments; a command a wrapper Atelier does not know starts
/// (any later word that is an interpreter: `flock /tmp/l sh x.sh`, `sh wrap.sh sh x.sh`);
/// the files `find … -exec` runs; a here-document or here-string an interpreter reads; and
/// what a pipe feeds an interpreter that names no script (`cat x.sh | sh`, `… | xargs sh`):
/// `named`, the files the command before the pipe names.
fn nested(
    shell: &Shell,
    prog: &str,
    words: &[String],
    seg: &shell::Segment,
    named: &[String],
) -> Scan {
    let mut out = Scan::default();
    let add = |out: &mut Scan, found: Scan| {
        out.files.extend(found.files);
        out.scripts.extend(found.scripts);
    };
    if let Some(cmd) = command_argument(prog, words) {
        add(&mut out, scan(&mut shell.nested(), &cmd));
    }
    let quoted = |ws: &[String]| {
        ws.iter()
            .map(|w| format!("'{}'", w.replace('\'', "'\\''")))
            .collect::<Vec<_>>()
            .join(" ")
    };
    if let Some(i) = (1..words.len())
        .find(|&i| INTERPRETERS.contains(&shell::canonical(&words[i])) && i + 1 < words.len())
    {
        add(&mut out, scan(&mut shell.nested(), &quoted(&words[i..])));
    }
    let cwd = shell.cwd.clone();
    if prog == "find" {
        if let Some(e) = words.iter().position(|w| w == "-exec" || w == "-execdir") {
            let runs = words.get(e + 1).is_some_and(|w| {
                w == "{}"
                    || (INTERPRETERS.contains(&shell::canonical(w))
                        && words.get(e + 2).is_some_and(|x| x == "{}"))
            });
            if runs {
                if let Some(p) = find_glob(words).and_then(|g| normalize(&cwd, &g)) {
                    out.files.push((p, Role::Run, cwd.clone()));
                }
            }
        }
    }
    let interpreter = INTERPRETERS.contains(&prog);
    let no_script = reads_stdin(prog, words);
    if interpreter && no_script {
        if let Some(text) = &seg.stdin_text {
            if is_shell(prog) {
                add(&mut out, scan(&mut shell.nested(), text));
            } else {
                for p in shadow::inline_imports(prog, text) {
                    if let Some(p) = normalize(&cwd, &p) {
                        out.files.push((p, Role::Run, cwd.clone()));
                    }
                }
            }
        }
        if seg.piped {
            for w in named {
                if let Some(p) = normalize(&cwd, w) {
                    out.files.push((p, Role::Run, cwd.clone()));
                }
            }
        }
    }
    out
}

/// The sources `cargo run` builds into the program it runs: `--bin N`'s, `--example N`'s or
/// the package's `src/main.rs` (in `-p NAME`'s folder when it is one of the workspace's).
fn cargo_run(prog: &str, words: &[String]) -> Vec<String> {
    if prog != "cargo"
        || words
            .iter()
            .skip(1)
            .find(|w| !w.starts_with('-'))
            .is_none_or(|w| w != "run")
    {
        return Vec::new();
    }
    let value = |names: &[&str]| {
        words.iter().enumerate().find_map(|(i, w)| {
            names.iter().find_map(|n| {
                w.strip_prefix(&format!("{n}="))
                    .map(str::to_string)
                    .or_else(|| (w == n).then(|| words.get(i + 1).cloned()).flatten())
            })
        })
    };
    let dir = value(&["-p", "--package"]).map_or(String::new(), |p| format!("{p}/"));
    if let Some(b) = value(&["--bin"]) {
        vec![
            format!("{dir}src/bin/{b}.rs"),
            format!("{dir}src/bin/{b}/main.rs"),
            format!("{dir}src/main.rs"),
        ]
    } else if let Some(e) = value(&["--example"]) {
        vec![
            format!("{dir}examples/{e}.rs"),
            format!("{dir}examples/{e}/main.rs"),
        ]
    } else {
        vec![format!("{dir}src/main.rs")]
    }
}

/// What a command's words set up before its program runs: the `PYTHONPATH` its Python sees,
/// a command line `env -S` runs, the folder `env -C` runs it in (the shell's folder before is
/// returned, to be put back after it), and the files a variable makes it load first.
fn prepare(
    shell: &mut Shell,
    expanded: &[String],
    out: &mut Scan,
) -> (Vec<String>, Option<String>) {
    let mut moved = None;
    let pythonpath: Vec<String> = expanded
        .iter()
        .map_while(|w| w.split_once('=').filter(|(k, _)| !k.contains('/')))
        .filter(|(k, _)| *k == "PYTHONPATH")
        .flat_map(|(_, v)| v.split(':').map(str::to_string).collect::<Vec<_>>())
        .chain(shell.vars.get("PYTHONPATH").into_iter().flatten().cloned())
        .collect();
    // `env -S 'cmd'`: the wrapper is skipped below, its command line is read here; `env
    // -C dir`: the command runs there.
    if let Some(i) = expanded.iter().position(|w| shell::canonical(w) == "env") {
        if let Some(cmd) = command_argument("env", &expanded[i..]) {
            let found = scan(&mut shell.nested(), &cmd);
            out.files.extend(found.files);
            out.scripts.extend(found.scripts);
        }
        let dir = expanded[i + 1..].iter().enumerate().find_map(|(k, w)| {
            w.strip_prefix("--chdir=").map(str::to_string).or_else(|| {
                (w == "-C" || w == "--chdir")
                    .then(|| expanded.get(i + 2 + k).cloned())
                    .flatten()
            })
        });
        if let Some(d) = dir.and_then(|d| normalize_dir(&shell.cwd, &d)) {
            moved = Some(std::mem::replace(&mut shell.cwd, d));
        }
    }
    out.files.extend(
        loaded_first(expanded)
            .into_iter()
            .filter_map(|p| normalize(&shell.cwd, &p))
            .map(|p| (p, Role::Run, shell.cwd.clone())),
    );
    (pythonpath, moved)
}

/// What `find DIR -name NAME` lists, as a glob (`DIR/**/NAME`).
fn find_glob(words: &[String]) -> Option<String> {
    let dir = words
        .get(1)
        .filter(|w| !w.starts_with('-'))
        .map_or(".", |w| w.as_str());
    let name = words
        .iter()
        .position(|w| w == "-name" || w == "-path")
        .and_then(|i| words.get(i + 1))
        .map_or("*", |w| w.as_str());
    Some(format!("{dir}/**/{name}"))
}

/// Files a variable makes a program load before its own: `BASH_ENV=x.sh bash -c …`, `ENV=`
/// (sh -i), `PYTHONSTARTUP=`, `NODE_OPTIONS=--require=./x.js`.
fn loaded_first(words: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for (k, v) in words.iter().filter_map(|w| w.split_once('=')) {
        match k {
            "BASH_ENV" | "ENV" | "PYTHONSTARTUP" => out.push(v.to_string()),
            "NODE_OPTIONS" => {
                let opts: Vec<&str> = v.split_whitespace().collect();
                for (i, o) in opts.iter().enumerate() {
                    let module = ["--require=", "--import=", "-r="]
                        .iter()
                        .find_map(|p| o.strip_prefix(p))
                        .or_else(|| {
                            matches!(*o, "-r" | "--require" | "--import")
                                .then(|| opts.get(i + 1).copied())
                                .flatten()
                        });
                    out.extend(module.map(shadow::node_module_files).unwrap_or_default());
                }
            }
            _ => {}
        }
    }
    out
}

/// Options of programs that take a command line as their value (`su -c CMD`, `script -qc CMD`,
/// `env -S CMD`), and `eval`'s arguments.
fn command_argument(prog: &str, words: &[String]) -> Option<String> {
    match prog {
        "eval" => Some(words[1..].join(" ")),
        // `trap 'sh x.sh' EXIT`: its first argument runs.
        "trap" => words.get(1).filter(|w| !w.starts_with('-')).cloned(),
        "su" | "runuser" | "script" => words
            .iter()
            .position(|w| w.starts_with('-') && !w.starts_with("--") && w.ends_with('c'))
            .and_then(|i| words.get(i + 1).cloned()),
        "env" => words
            .iter()
            .position(|w| w == "-S" || w == "--split-string")
            .and_then(|i| words.get(i + 1).cloned()),
        _ => None,
    }
}

/// What one command line runs: the files it names (each with its role and the folder the
/// command that names it runs in), and the package.json scripts it runs (`(folder, script)`).
#[derive(Default)]
pub(super) struct Scan {
    pub(super) files: Vec<(String, Role, String)>,
    pub(super) scripts: Vec<(String, String)>,
}

/// Reads one command line in `shell`, which its `cd`, `pushd` and `popd` move.
pub(super) fn scan(shell: &mut Shell, command: &str) -> Scan {
    let mut out = Scan::default();
    let command = command.replace("$(pwd)", "$PWD").replace("`pwd`", "$PWD");
    let mut previous: Vec<String> = Vec::new();
    let mut restore: Option<String> = None;
    for seg in simple_commands(&command) {
        if let Some(cwd) = restore.take() {
            shell.cwd = cwd;
        }
        // What the command's words run inside them, and what it assigns.
        for inner in seg.words.iter().flat_map(|w| substitutions(w)) {
            let found = scan(&mut shell.nested(), &inner);
            out.files.extend(found.files);
            out.scripts.extend(found.scripts);
        }
        let named = std::mem::take(&mut previous);
        if shell.assign(&seg.words) {
            continue;
        }
        let expanded: Vec<String> = seg.words.iter().flat_map(|w| shell.expand(w)).collect();
        let (pythonpath, moved) = prepare(shell, &expanded, &mut out);
        if moved.is_some() {
            restore = moved;
        }
        let words = program_and_arguments(&expanded);
        previous = words
            .iter()
            .skip(1)
            .filter(|w| path_like(w))
            .cloned()
            .collect();
        let Some(program) = words.first() else {
            continue;
        };
        let prog = shell::canonical(program).to_string();
        if prog == "find" {
            previous = find_glob(words).into_iter().collect();
        }
        let found = nested(shell, &prog, words, &seg, &named);
        out.files.extend(found.files);
        out.scripts.extend(found.scripts);
        match prog.as_str() {
            "cd" | "pushd" => {
                let target = words.iter().skip(1).find(|w| !w.starts_with('-'));
                if let Some(dir) = target.and_then(|d| normalize_dir(&shell.cwd, d)) {
                    if prog == "pushd" {
                        shell.stack.push(shell.cwd.clone());
                    }
                    shell.cwd = dir;
                }
                continue;
            }
            "popd" => {
                if let Some(dir) = shell.stack.pop() {
                    shell.cwd = dir;
                }
                continue;
            }
            _ => {}
        }
        let cwd = shell.cwd.clone();
        // `sh -c '…'`: the inner command; `python3 -c '…'`, `node -e '…'`: inline code.
        if INTERPRETERS.contains(&prog.as_str()) {
            let (found, inline) = interpreted(shell, &prog, words, &seg, &pythonpath);
            out.files.extend(found.files);
            out.scripts.extend(found.scripts);
            if inline {
                continue;
            }
        }
        if let Some((dir, script)) = follow::package_script(&prog, words) {
            let dir = match dir {
                Some(d) => normalize_dir(&cwd, &d),
                None => Some(cwd.clone()),
            };
            if let Some(dir) = dir {
                out.scripts.push((dir, script));
            }
        }
        let at = |w: &str| normalize(&cwd, w);
        let mut files = Vec::new();
        // The program itself, when named by a path.
        if program.contains('/') {
            if let Some(p) = at(program) {
                files.push((p, Role::Run));
            }
        }
        let sub = words
            .iter()
            .skip(1)
            .find(|w| !w.starts_with('-'))
            .map(String::as_str);
        // `make -C dir`, `make -f x.mk`, `just -f j`: not the recipe here.
        let elsewhere = words.iter().any(|w| {
            w.starts_with("--directory=")
                || w.starts_with("--file=")
                || w.starts_with("--makefile=")
                || (w.len() > 2
                    && (w.starts_with("-C") || w.starts_with("-f"))
                    && !w.starts_with("--"))
                || matches!(
                    w.as_str(),
                    "-C" | "-f" | "--file" | "--makefile" | "--directory" | "--justfile"
                )
        });
        if !elsewhere {
            for c in program_configs(&prog, sub) {
                if let Some(p) = at(c) {
                    files.push((p, Role::Config));
                }
            }
        }
        arguments(&prog, words, &at, &mut files);
        files.extend(
            cargo_run(&prog, words)
                .into_iter()
                .filter_map(|p| at(&p))
                .map(|p| (p, Role::Run)),
        );
        // `PYTHONPATH=src python3 -m verify`: the module there too.
        if prog.starts_with("python") {
            let extra: Vec<(String, Role)> = files
                .iter()
                .filter(|(p, r)| *r == Role::Run && p.ends_with(".py"))
                .flat_map(|(p, _)| {
                    pythonpath
                        .iter()
                        .filter_map(move |d| at(&format!("{d}/{p}")))
                })
                .map(|p| (p, Role::Run))
                .collect();
            files.extend(extra);
        }
        out.files
            .extend(files.into_iter().map(|(p, r)| (p, r, cwd.clone())));
    }
    out
}

/// What an interpreter runs besides its script argument: the command or code given inline
/// (`sh -c`, `bash -ec`, `python3 -c`, `node -e`; true when there is some, and nothing else is
/// read) or a script on its standard input (`sh < x.sh`).
fn interpreted(
    shell: &Shell,
    prog: &str,
    words: &[String],
    seg: &shell::Segment,
    pythonpath: &[String],
) -> (Scan, bool) {
    let mut out = Scan::default();
    let cwd = shell.cwd.clone();
    let cluster =
        |w: &str, c: char| w.starts_with('-') && !w.starts_with("--") && w[1..].contains(c);
    let inline = words.iter().position(|w| {
        if is_node(prog) {
            matches!(w.as_str(), "-e" | "--eval" | "-p" | "--print")
        } else if is_shell(prog) {
            cluster(w, 'c')
        } else {
            w == "-c" || (cluster(w, 'c') && w.ends_with('c'))
        }
    });
    if let Some(i) = inline {
        if let Some(inner) = words.get(i + 1) {
            if is_shell(prog) {
                let mut nested = shell.nested();
                nested.positional(&words[(i + 2).min(words.len())..], 0);
                let inner = scan(&mut nested, inner);
                out.files.extend(inner.files);
                out.scripts.extend(inner.scripts);
            } else {
                let at = |w: &str| normalize(&cwd, w);
                let imported = shadow::inline_imports(prog, inner);
                let mut files: Vec<(String, Role)> = imported
                    .iter()
                    .flat_map(|p| {
                        std::iter::once(p.clone())
                            .chain(pythonpath.iter().map(move |d| format!("{d}/{p}")))
                    })
                    .filter_map(|p| at(&p).map(|p| (p, Role::Run)))
                    .collect();
                // The options before the code (`node -r ./hook.js -e …`).
                arguments(prog, &words[..i], &at, &mut files);
                out.files
                    .extend(files.into_iter().map(|(p, r)| (p, r, cwd.clone())));
            }
        }
        return (out, true);
    }
    // `sh < check.sh`, `sh -s arg < check.sh`, `python3 /dev/stdin < x.py`: a script on
    // standard input runs.
    if let Some(script) = seg.stdin.as_deref() {
        if reads_stdin(prog, words) {
            if let Some(p) = normalize(&cwd, script) {
                out.files.push((p, Role::Run, cwd.clone()));
            }
        }
    }
    (out, false)
}

/// Whether an interpreter reads its program from standard input: no script named (only
/// options), a shell's `-s` (what follows are arguments), or `/dev/stdin` as the script.
pub(super) fn reads_stdin(prog: &str, words: &[String]) -> bool {
    let args: Vec<&String> = words.iter().skip(1).collect();
    args.iter().all(|w| w.starts_with('-'))
        || (is_shell(prog)
            && args
                .iter()
                .take_while(|w| w.starts_with('-'))
                .any(|w| w.contains('s')))
        || args
            .iter()
            .find(|w| !w.starts_with('-'))
            .is_some_and(|w| *w == "/dev/stdin" || w.starts_with("/dev/fd/") || *w == "-")
}

/// `pytest -p plugin`, `python3 -m pytest -p plugin`: a module loaded as a plugin runs.
fn plugins(
    prog: &str,
    words: &[String],
    at: &dyn Fn(&str) -> Option<String>,
    out: &mut Vec<(String, Role)>,
) {
    let pytest = prog == "pytest" || words.iter().any(|w| w == "pytest");
    for (i, w) in words.iter().enumerate() {
        let plugin = match w.strip_prefix("-p") {
            Some("") => words.get(i + 1).map(String::as_str),
            Some(rest) if pytest => Some(rest),
            _ => None,
        };
        if let Some(m) = plugin.filter(|m| pytest && !m.starts_with("no:")) {
            for p in shadow::python_module_files(m) {
                if let Some(p) = at(&p) {
                    out.push((p, Role::Run));
                }
            }
        }
    }
}

/// Options whose value is a configuration file (`--config x.toml`, `-c pytest.ini`).
fn config_option(flag: &str) -> bool {
    let f = flag.trim_start_matches('-');
    f == "c"
        || f == "f"
        || [
            "config", "conf", "rc", "settings", "manifest", "file", "profile",
        ]
        .iter()
        .any(|w| f.contains(w))
}

/// The files a program's arguments name (see [`files_of`]).
fn arguments(
    prog: &str,
    words: &[String],
    at: &dyn Fn(&str) -> Option<String>,
    out: &mut Vec<(String, Role)>,
) {
    let shell = is_shell(prog);
    // `sh -n x.sh` and `node --check x.js` only check its syntax.
    let checks_only = (shell
        && words
            .iter()
            .skip(1)
            .take_while(|w| w.starts_with('-'))
            .any(|w| w == "-n"))
        || (is_node(prog) && words.iter().any(|w| w == "--check" || w == "-c"));
    plugins(prog, words, at, out);
    let mut run_next = INTERPRETERS.contains(&prog) && !checks_only;
    let mut module_next = false;
    let mut config_next = false;
    let mut value_next = false;
    let mut preload_next = false;
    for w in words.iter().skip(1) {
        if std::mem::take(&mut value_next) {
            continue;
        }
        if std::mem::take(&mut preload_next) {
            for p in shadow::node_module_files(w) {
                if let Some(p) = at(&p) {
                    out.push((p, Role::Run));
                }
            }
            continue;
        }
        if module_next {
            module_next = false;
            for p in shadow::python_module_files(w) {
                if let Some(p) = at(&p) {
                    out.push((p, Role::Run));
                }
            }
            continue;
        }
        // `sh -o errexit x.sh`, `bash -euo pipefail x.sh`, `python3 -W error x.py`: an
        // option's value, not the script; `sh +x x.sh` is an option too.
        let option = w.starts_with('-') || (shell && w.starts_with('+'));
        let takes_value = if shell {
            option && !w.starts_with("--") && (w.ends_with('o') || w.ends_with('O'))
        } else {
            prog.starts_with("python") && matches!(w.as_str(), "-W" | "-X")
        };
        if run_next && takes_value {
            value_next = true;
            continue;
        }
        if run_next && shell && w.starts_with('+') {
            continue;
        }
        // `make --directory=dir`, `make -Cdir`: the recipe there.
        if matches!(prog, "make" | "gmake") {
            let dir = w
                .strip_prefix("--directory=")
                .or_else(|| w.strip_prefix("-C").filter(|r| !r.is_empty()));
            if let Some(p) = dir.and_then(|d| at(&format!("{d}/Makefile"))) {
                out.push((p, Role::Config));
                continue;
            }
        }
        // `awk -f prog.awk`: the program it runs.
        if matches!(prog, "awk" | "gawk" | "mawk" | "nawk") && w == "-f" {
            run_next = true;
            continue;
        }
        // `node -r ./hook.js x.js`, `--require`, `--import`: a module loaded first runs.
        if is_node(prog) && matches!(w.as_str(), "-r" | "--require" | "--import" | "--loader") {
            preload_next = true;
            continue;
        }
        if run_next && w == "-m" && prog.starts_with("python") {
            module_next = true;
            run_next = false;
            continue;
        }
        if run_next && matches!(prog, "deno" | "bun") {
            match w.as_str() {
                "run" => continue,
                "test" | "x" | "install" | "task" | "fmt" | "lint" => {
                    run_next = false;
                    continue;
                }
                _ => {}
            }
        }
        let (flag, value) = match w.split_once('=') {
            Some((f, v)) if f.starts_with('-') => (Some(f), v),
            _ => (None, w.as_str()),
        };
        if flag.is_none() && w.starts_with('-') {
            config_next = config_option(w) && !(shell || INTERPRETERS.contains(&prog));
            // `make -C dir`: the recipe there.
            if (prog == "make" || prog == "gmake") && w == "-C" {
                config_next = false;
                module_next = false;
                run_next = false;
            }
            continue;
        }
        let after_config = std::mem::take(&mut config_next) || flag.is_some_and(config_option);
        if run_next {
            run_next = false;
            if let Some(p) = at(value) {
                out.push((p, Role::Run));
            }
            continue;
        }
        if (prog == "make" || prog == "gmake")
            && words.iter().any(|x| x == "-C")
            && words
                .iter()
                .position(|x| x == "-C")
                .and_then(|i| words.get(i + 1))
                .is_some_and(|d| d == w)
        {
            if let Some(p) = at(&format!("{value}/Makefile")) {
                out.push((p, Role::Config));
            }
            continue;
        }
        if path_like(value) {
            let ext = value
                .rsplit('/')
                .next()
                .and_then(|n| n.rsplit_once('.'))
                .map(|(_, e)| e);
            // Expected outputs a check compares with judge like its configuration.
            let expected = ["expected", "golden", "baseline", "snapshot", "fixture"]
                .iter()
                .any(|w| value.to_ascii_lowercase().contains(w));
            // What `diff` or `cmp` compares with is expected output, as a configuration.
            let compared = matches!(prog, "diff" | "cmp" | "comm");
            let config = after_config
                || expected
                || compared
                || ext.is_some_and(|e| CONFIG_EXTS.contains(&e));
            if let Some(p) = at(value) {
                out.push((p, if config { Role::Config } else { Role::Named }));
            }
        }
    }
}

/// Extensions of configuration files: a command that names one reads it as settings.
const CONFIG_EXTS: &[&str] = &[
    "toml", "json", "jsonc", "ini", "cfg", "yml", "yaml", "conf", "xml",
];

/// A word that names a file: a path with a folder, or a name with a code or configuration
/// file's extension.
pub(super) fn path_like(w: &str) -> bool {
    if w.is_empty() || w.contains("://") || w.contains('$') || w.contains('{') {
        return false;
    }
    let name = w.rsplit('/').next().unwrap_or(w);
    let ext_ok = name
        .rsplit_once('.')
        .is_some_and(|(stem, e)| !stem.is_empty() && FILE_EXTS.contains(&e));
    (w.contains('/') && !name.is_empty() && name != "." && name != "..") || ext_ok
}

/// A word as a path in the repository, relative to `cwd` (`""` for the root): `./`, `$PWD/`,
/// `a/../` and a script's own folder ([`follow::ROOT`]) resolved; `None` outside the
/// repository (absolute, `~`, variables, escaping it) or for the root itself.
pub(super) fn normalize(cwd: &str, w: &str) -> Option<String> {
    normalize_dir(cwd, w).filter(|p| !p.is_empty())
}

/// [`normalize`], with the root itself as `""` (a `cd` there).
pub(super) fn normalize_dir(cwd: &str, w: &str) -> Option<String> {
    let (cwd, w) = match w.strip_prefix(follow::ROOT) {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => ("", &rest[rest.len().min(1)..]),
        _ => {
            let w = w
                .strip_prefix("$PWD/")
                .or_else(|| w.strip_prefix("${PWD}/"))
                .unwrap_or(w);
            if w.is_empty() || w.starts_with('/') {
                return None;
            }
            (cwd, w)
        }
    };
    if w.starts_with('~') || w.contains('$') {
        return None;
    }
    let mut parts: Vec<&str> = cwd.split('/').filter(|p| !p.is_empty()).collect();
    for p in w.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p),
        }
    }
    Some(parts.join("/"))
}
