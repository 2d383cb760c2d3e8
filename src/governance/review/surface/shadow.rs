//! A new file that a module resolver would pick in place of an existing one: it changes what
//! an import loads, so what runs, without touching the file a reader sees. Python: a module
//! and a package of the same name in one folder (`X.py`, `X/__init__.py`, an extension module
//! `X.*.so`), or a module named like the test runner or its plugins, which the working
//! directory on `sys.path` puts before the installed one, or like a standard library module
//! (`signal.py`, which `unittest` imports) in a folder that is on `sys.path` rather than in a
//! package. JavaScript: `require('./X')` and
//! `import './X'` try `X`, then `X.js`, `X.json`…, then `X/index.js`: a new one among those
//! beside an existing one.
//!
//! Also the files an import or `-m` names (`python_module_files`, `node_module_files`), and
//! those a check's inline code imports as its judge (`inline_imports`).

/// Top-level modules of the Python test runners and the plugins they load: a module of the
/// same name in the working directory (or a test's folder) is imported in their place.
pub const RUNNER_MODULES: &[&str] = &[
    "pytest",
    "_pytest",
    "pluggy",
    "unittest",
    "nose",
    "nose2",
    "hypothesis",
    "coverage",
    "pytest_cov",
    "xdist",
    "iniconfig",
    // What pytest imports on start: its dependencies and the plugins it loads by entry point.
    "packaging",
    "py",
    "typing_extensions",
    "exceptiongroup",
    "tomli",
    "pygments",
    "colorama",
    "anyio",
];

/// The extensions a JavaScript resolver (Node's, a bundler's, a TypeScript runner's) tries.
const JS_EXTS: &[&str] = &[
    "js", "mjs", "cjs", "jsx", "ts", "tsx", "mts", "cts", "json", "node",
];

/// Why the new file `path` would be loaded in place of an existing one, if it would:
/// `exists` says which files are there at base.
pub fn shadowing(path: &str, exists: &dyn Fn(&str) -> bool) -> Option<String> {
    python(path, exists).or_else(|| javascript(path, exists))
}

/// The folder and name Python imports `path` as (`a/b.py`, `a/b/__init__.py` and
/// `a/b.cpython-312-x86_64-linux-gnu.so` are `a`'s `b`), if it is a module.
fn python_module(path: &str) -> Option<(&str, &str)> {
    let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
    if name == "__init__.py" {
        if dir.is_empty() {
            return None;
        }
        return Some(dir.rsplit_once('/').unwrap_or(("", dir)));
    }
    let (stem, ext) = name.split_once('.')?;
    let module = matches!(ext, "py" | "pyw")
        || [".so", ".pyd"]
            .iter()
            .any(|e| format!(".{ext}").ends_with(e));
    (module && !stem.is_empty()).then_some((dir, stem))
}

fn python(path: &str, exists: &dyn Fn(&str) -> bool) -> Option<String> {
    let (dir, name) = python_module(path)?;
    // `pytest_*` modules are what pytest loads as plugins (`pytest_mock`, `pytest_cov`…).
    if RUNNER_MODULES.contains(&name) || name.starts_with("pytest_") {
        return Some(format!(
            "a new module named like the test runner's own `{name}`, which Python imports in its place (the working directory comes first on its path)"
        ));
    }
    // A folder that is not a package is a `sys.path` entry when Python runs there (the
    // working directory, the test folders pytest inserts), so its `signal.py` is `signal`; and
    // a test folder is one whatever it holds (`unittest discover -s tests` puts it first, and
    // so does running a script in it).
    let package = !dir.is_empty() && exists(&format!("{dir}/__init__.py"));
    let test_folder = dir.split('/').any(|c| c == "tests" || c == "test");
    let stdlib = super::stdlib::STDLIB_MODULES.binary_search(&name).is_ok()
        || super::stdlib::NEWER.contains(&name);
    if (!package || test_folder) && stdlib {
        return Some(format!(
            "a new module named like the standard library's `{name}`, which Python imports in its place from a folder on its path, for the test runner too"
        ));
    }
    let at = |p: String| {
        if dir.is_empty() {
            p
        } else {
            format!("{dir}/{p}")
        }
    };
    [at(format!("{name}.py")), at(format!("{name}/__init__.py"))]
        .into_iter()
        .find(|other| other != path && exists(other))
        .map(|other| {
            format!("a new module that Python's import of `{name}` loads in place of {other}")
        })
}

fn javascript(path: &str, exists: &dyn Fn(&str) -> bool) -> Option<String> {
    let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
    let stem = match name.rsplit_once('.') {
        Some(("index", e)) if JS_EXTS.contains(&e) && !dir.is_empty() => dir.to_string(),
        Some((s, e)) if JS_EXTS.contains(&e) && !s.is_empty() => {
            path[..path.len() - e.len() - 1].to_string()
        }
        None if !name.is_empty() => path.to_string(),
        _ => return None,
    };
    let mut candidates = vec![stem.clone(), format!("{stem}/package.json")];
    for e in JS_EXTS {
        candidates.push(format!("{stem}.{e}"));
        candidates.push(format!("{stem}/index.{e}"));
    }
    let shown = stem.rsplit('/').next().unwrap_or(&stem).to_string();
    candidates
        .into_iter()
        .find(|other| other != path && exists(other))
        .map(|other| {
            format!("a new file that `require('./{shown}')` or `import './{shown}'` may load in place of {other}")
        })
}

/// The files `python -m a.b` (or `import a.b`) runs: `a`'s and `a.b`'s `__init__.py`, then
/// `a/b.py` or the package's `__init__.py` and `__main__.py`.
pub fn python_module_files(module: &str) -> Vec<String> {
    let m = module.replace('.', "/");
    let mut files: Vec<String> = m
        .match_indices('/')
        .map(|(i, _)| format!("{}/__init__.py", &m[..i]))
        .collect();
    files.extend([
        format!("{m}.py"),
        format!("{m}/__init__.py"),
        format!("{m}/__main__.py"),
    ]);
    files
}

/// The files a relative `require('./x')` (or `node -r ./x`) may load: `x`, `x.js`…,
/// `x/index.js`…; a package name (no `./`) is not the repository's file.
pub fn node_module_files(spec: &str) -> Vec<String> {
    if !(spec.starts_with("./") || spec.starts_with("../")) {
        return Vec::new();
    }
    let mut files = vec![spec.to_string()];
    files.extend(JS_EXTS.iter().map(|e| format!("{spec}.{e}")));
    files.extend(JS_EXTS.iter().map(|e| format!("{spec}/index.{e}")));
    files
}

/// Whether inline code decides its own exit status: a Python `assert` statement, or an exit
/// whose status is a comparison (`sys.exit(c.sub(5, 3) != 2)`); in JavaScript an `assert`
/// call (`assert(…)`, `assert.equal(…)`, `require('assert')…`) or `process.exit` of a
/// comparison. Comments and strings that only mention `assert` do not count.
fn judges_itself(prog: &str, code: &str) -> bool {
    let compares = |s: &str| {
        ["==", "!=", "<", ">", " in ", " is ", "?"]
            .iter()
            .any(|o| s.contains(o))
    };
    if prog.starts_with("python") {
        return code.split(['\n', ';']).map(str::trim).any(|stmt| {
            stmt.starts_with("assert ")
                || stmt.starts_with("assert(")
                || (["sys.exit(", "exit(", "raise SystemExit("]
                    .iter()
                    .any(|e| stmt.starts_with(e))
                    && compares(stmt))
        });
    }
    let code: String = code
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    // Text in quotes is data.
    let mut bare = String::new();
    let mut quote = None;
    for c in code.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => bare.push(' '),
            None if matches!(c, '\'' | '"' | '`') => quote = Some(c),
            None => bare.push(c),
        }
    }
    bare.contains("assert(")
        || bare.contains("assert.")
        || code.contains("require('assert')")
        || code.contains("require(\"assert\")")
        || code.contains("node:assert")
        || bare
            .split("process.exit(")
            .skip(1)
            .any(|rest| compares(rest.split([';', '\n']).next().unwrap_or("")))
}

/// The files the inline code of `python3 -c CODE` or `node -e CODE` imports, when that code
/// asserts nothing itself: its verdict is then the modules'. Code that asserts judges by its
/// own text, and what it imports is the code under test, as a test file's imports are.
pub fn inline_imports(prog: &str, code: &str) -> Vec<String> {
    if judges_itself(prog, code) {
        return Vec::new();
    }
    let words: Vec<&str> = code
        .split(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | '.' | '/' | '-')))
        .filter(|w| !w.is_empty())
        .collect();
    if prog.starts_with("python") {
        let mut modules = Vec::new();
        for stmt in code.split(['\n', ';']) {
            let stmt = stmt.trim();
            if let Some(rest) = stmt.strip_prefix("import ") {
                for m in rest.split(',') {
                    if let Some(name) = m.split_whitespace().next() {
                        modules.push(name.to_string());
                    }
                }
            } else if let Some(rest) = stmt.strip_prefix("from ") {
                // `from tests import verify`: `tests` and, if it is one, the module `tests.verify`.
                let mut parts = rest.split_whitespace();
                if let (Some(name), Some("import")) = (parts.next(), parts.next()) {
                    modules.push(name.to_string());
                    for item in parts.collect::<Vec<_>>().join(" ").split(',') {
                        if let Some(sub) = item.split_whitespace().next().filter(|s| *s != "*") {
                            modules.push(format!("{name}.{}", sub.trim_matches(['(', ')'])));
                        }
                    }
                }
            }
        }
        // `exec(open('x.py').read())`, `runpy.run_path('x.py')`: that file runs.
        let mut files: Vec<String> = Vec::new();
        for call in ["open(", "run_path(", "exec_file("] {
            for rest in code.split(call).skip(1) {
                let rest = rest.trim_start();
                if let Some(q) = rest.chars().next().filter(|c| *c == '\'' || *c == '"') {
                    if let Some(lit) = rest[1..].split(q).next() {
                        files.push(lit.to_string());
                    }
                }
            }
        }
        // `__import__('x')`, `importlib.import_module('x')`.
        for (i, w) in words.iter().enumerate() {
            if matches!(
                *w,
                "__import__" | "importlib.import_module" | "import_module"
            ) {
                if let Some(m) = words.get(i + 1) {
                    modules.push(m.to_string());
                }
            }
        }
        modules
            .iter()
            .filter(|m| !m.starts_with('.'))
            .flat_map(|m| python_module_files(m))
            .chain(files)
            .collect()
    } else {
        words
            .iter()
            .enumerate()
            .filter(|(i, w)| **w == "require" || (**w == "import" && *i + 1 < words.len()))
            .filter_map(|(i, _)| words.get(i + 1))
            .flat_map(|spec| node_module_files(spec))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_file_a_resolver_picks_before_an_existing_one_shadows_it() {
        let base = [
            "tests/helpers.py",
            "web/helpers.js",
            "web/lib/util.js",
            "src/app/__init__.py",
            "Makefile",
        ];
        let exists = |p: &str| base.contains(&p);
        // (new file, shadows something)
        let cases: &[(&str, bool)] = &[
            ("tests/helpers/__init__.py", true),
            ("src/app.py", true),
            ("pytest/__init__.py", true),
            ("_pytest.py", true),
            ("tests/pluggy/__init__.py", true),
            ("hypothesis.py", true),
            ("web/helpers", true),
            ("web/helpers/index.js", true),
            ("web/helpers.cjs", true),
            ("web/helpers.mjs", true),
            ("web/lib/util.ts", true),
            ("signal.py", true),
            ("tests/traceback.py", true),
            ("difflib/__init__.py", true),
            ("src/app/signal.py", false),
            ("src/app/types.py", false),
            ("tests/json.py", true),
            ("_colorize.py", true),
            ("packaging.py", true),
            ("pytest_mock.py", true),
            // New names shadow nothing.
            ("tests/helpers_more.py", false),
            ("tests/util/__init__.py", false),
            ("web/format.js", false),
            ("web/lib/index.js", false),
            ("src/app/models.py", false),
            ("README", false),
            ("Makefile.old", false),
            ("web/helpers.md", false),
        ];
        let mut failures = Vec::new();
        for (path, want) in cases {
            let got = shadowing(path, &exists);
            if got.is_some() != *want {
                failures.push(format!("{path}: got {got:?}, want shadowing = {want}"));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }
}
