//! A new file that a module resolver would pick in place of an existing one: it changes what
//! an import loads, so what runs, without touching the file a reader sees. Python: a module
//! and a package of the same name in one folder (`X.py`, `X/__init__.py`, an extension module
//! `X.*.so`), or a module named like the test runner or its plugins, which the working
//! directory on `sys.path` puts before the installed one, or like a standard library module
//! (`signal.py`, which `unittest` imports) in a folder that is on `sys.path` rather than in a
//! package. JavaScript: `require('./X')` and
//! `import './X'` try `X`, then `X.js`, `X.json`…, then `X/index.js`: a new one among those
//! beside an existing one.

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
