//! The settings of a package-manager file that `deps` does not read: every key of
//! `pyproject.toml`, `package.json`, `setup.cfg` and `Pipfile` outside the dependency tables
//! [`super::python`] and [`super::package_json`] parse and outside a short list of keys known to
//! be inert (a name, a description, linters' tables), each as a [`Dep`] of kind [`KIND`], so that
//! a change to one (added, changed or removed) is a finding and not silence. A package manager
//! reads more keys than any reviewer can list (`[tool.uv] extra-index-url`,
//! `"pnpm": {"packageExtensions"}`, `[tool.setuptools.dynamic]`): what is not known to be inert
//! is judged as what it could be.

use super::{flat, Dep};

/// The kind of an unread setting (what the finding calls it).
pub(super) const KIND: &str = "a package-manager setting the reviewer does not read";

fn push(out: &mut Vec<Dep>, name: &str, value: String) {
    out.push(Dep::new(KIND, name, &value, ""));
}

/// `[project]` keys that describe the package and install nothing (PEP 621).
const PROJECT_INERT: &[&str] = &[
    "name",
    "version",
    "description",
    "readme",
    "requires-python",
    "license",
    "license-files",
    "authors",
    "maintainers",
    "keywords",
    "classifiers",
    "urls",
];

/// `[tool.poetry]` keys that describe the package.
const POETRY_INERT: &[&str] = &[
    "name",
    "version",
    "description",
    "readme",
    "license",
    "authors",
    "maintainers",
    "keywords",
    "classifiers",
    "homepage",
    "repository",
    "documentation",
    "urls",
];

/// `[tool.*]` tables of linters, formatters and type checkers: they install nothing. Every other
/// tool's table (a package manager's, a build backend's, a test runner's) is unread.
const PY_LINTERS: &[&str] = &[
    "ruff",
    "black",
    "isort",
    "mypy",
    "pyright",
    "pylint",
    "flake8",
    "pydocstyle",
    "codespell",
    "yapf",
    "autopep8",
    "docformatter",
    "bandit",
    "pyupgrade",
];

fn table_keys(prefix: &str, v: &toml::Value, read: &[&str], inert: &[&str], out: &mut Vec<Dep>) {
    match v.as_table() {
        Some(t) => {
            for (k, v) in t {
                if !read.contains(&k.as_str()) && !inert.contains(&k.as_str()) {
                    push(out, &format!("{prefix}.{k}"), flat(v));
                }
            }
        }
        None => push(out, prefix, flat(v)),
    }
}

/// pyproject.toml's unread keys.
pub(super) fn pyproject(t: &toml::Table) -> Vec<Dep> {
    let mut out = Vec::new();
    for (key, v) in t {
        match key.as_str() {
            "project" => table_keys(
                "project",
                v,
                &["dependencies", "optional-dependencies"],
                PROJECT_INERT,
                &mut out,
            ),
            "build-system" => table_keys(
                "build-system",
                v,
                &["requires", "build-backend", "backend-path"],
                &[],
                &mut out,
            ),
            "dependency-groups" => {}
            "tool" => {
                for (tool, tv) in v.as_table().into_iter().flatten() {
                    let prefix = format!("tool.{tool}");
                    match tool.as_str() {
                        _ if PY_LINTERS.contains(&tool.as_str()) => {}
                        "poetry" => poetry(&prefix, tv, &mut out),
                        "uv" => table_keys(&prefix, tv, &["index", "sources"], &[], &mut out),
                        _ => push(&mut out, &prefix, flat(tv)),
                    }
                }
            }
            _ => push(&mut out, key, flat(v)),
        }
    }
    out
}

fn poetry(prefix: &str, v: &toml::Value, out: &mut Vec<Dep>) {
    let read = ["dependencies", "dev-dependencies", "source", "group"];
    table_keys(prefix, v, &read, POETRY_INERT, out);
    for (g, gv) in v
        .get("group")
        .and_then(|g| g.as_table())
        .into_iter()
        .flatten()
    {
        let p = format!("{prefix}.group.{g}");
        table_keys(&p, gv, &["dependencies"], &["optional"], out);
    }
}

/// package.json keys that describe the package or configure linters, and install nothing.
const NPM_INERT: &[&str] = &[
    "name",
    "version",
    "description",
    "keywords",
    "homepage",
    "bugs",
    "license",
    "author",
    "contributors",
    "maintainers",
    "funding",
    "repository",
    "private",
    "files",
    "main",
    "module",
    "types",
    "typings",
    "type",
    "exports",
    "sideEffects",
    "browserslist",
    "prettier",
    "eslintConfig",
    "stylelint",
];

/// package.json keys [`super::package_json`] reads (`scripts`: its install hooks; the others are
/// for the test runner's reviewers to judge).
const NPM_READ: &[&str] = &[
    "dependencies",
    "devDependencies",
    "peerDependencies",
    "optionalDependencies",
    "bundledDependencies",
    "bundleDependencies",
    "overrides",
    "resolutions",
    "scripts",
    "packageManager",
];

/// package.json's unread keys (`pnpm`'s besides its `overrides`).
pub(super) fn package_json(obj: &serde_json::Map<String, serde_json::Value>) -> Vec<Dep> {
    let mut out = Vec::new();
    for (k, v) in obj {
        if NPM_INERT.contains(&k.as_str()) || NPM_READ.contains(&k.as_str()) {
            continue;
        }
        match (k.as_str(), v.as_object()) {
            ("pnpm", Some(p)) => {
                for (pk, pv) in p.iter().filter(|(pk, _)| *pk != "overrides") {
                    push(&mut out, &format!("pnpm.{pk}"), pv.to_string());
                }
            }
            _ => push(&mut out, k, v.to_string()),
        }
    }
    out
}

/// Pipfile's unread keys: `[pipenv]` (its settings choose sources and pre-releases); every other
/// table is a category of packages, read, or `requires` and `scripts`.
pub(super) fn pipfile(t: &toml::Table) -> Vec<Dep> {
    let mut out = Vec::new();
    if let Some(v) = t.get("pipenv") {
        table_keys("pipenv", v, &[], &[], &mut out);
    }
    out
}

/// A setup.cfg key as setuptools reads it: lower case, dashes as underscores.
pub(super) fn cfg_key(k: &str) -> String {
    k.trim().to_ascii_lowercase().replace('-', "_")
}

/// setup.cfg sections that install nothing: the package's metadata and linters'.
const CFG_INERT_SECTIONS: &[&str] = &[
    "metadata",
    "flake8",
    "pycodestyle",
    "pep8",
    "pydocstyle",
    "isort",
    "mypy",
    "pylint",
    "codespell",
    "yapf",
    "bdist_wheel",
    "options.packages.find",
    "options.package_data",
    "options.exclude_package_data",
    "options.extras_require",
];

/// `[options]` keys read by [`super::python::setup_cfg`] or that only choose what is packaged.
const CFG_OPTIONS_KNOWN: &[&str] = &[
    "install_requires",
    "setup_requires",
    "tests_require",
    "dependency_links",
    "python_requires",
    "zip_safe",
    "include_package_data",
    "packages",
    "package_dir",
    "py_modules",
];

/// setup.cfg's unread keys, `[section] key` with the key normalised (configparser syntax:
/// indented lines continue the value before them).
pub(super) fn setup_cfg(text: &str) -> Vec<Dep> {
    let mut out: Vec<Dep> = Vec::new();
    let mut section = String::new();
    let mut current: Option<usize> = None;
    for line in text.lines() {
        let l = line.trim();
        if l.is_empty() || l.starts_with(['#', ';']) {
            continue;
        }
        if line.starts_with([' ', '\t']) {
            if let Some(i) = current {
                out[i].source = format!("{} {l}", out[i].source);
            }
            continue;
        }
        current = None;
        if l.starts_with('[') {
            section = l.trim_matches(['[', ']']).trim().to_ascii_lowercase();
            continue;
        }
        let (k, v) = l.split_once(['=', ':']).unwrap_or((l, ""));
        let k = cfg_key(k);
        let inert = CFG_INERT_SECTIONS.contains(&section.as_str())
            || section.starts_with("mypy-")
            || (section == "options" && CFG_OPTIONS_KNOWN.contains(&k.as_str()));
        if !inert {
            push(&mut out, &format!("[{section}] {k}"), v.trim().to_string());
            current = Some(out.len() - 1);
        }
    }
    out
}
