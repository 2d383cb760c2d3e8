//! `deps`: what the package managers would install, compared structurally at base and head.
//!
//! Each manifest, lock file and package-manager configuration the change touches is parsed on
//! both sides into entries (where declared, name, source, version, the rest that selects code),
//! and the two sets are compared: a new package, a new source (registry, git URL, path, rename),
//! a dependency moved to another kind (dev → normal), a new registry or index, an install hook,
//! a submodule, or executable packaging (`setup.py`) is a blocking finding in an agent's change
//! (major in a person's: the rationale should name it). A version bump of a package from the
//! same source, and a removal, are minor. A manifest that does not parse at head is blocking in
//! an agent's change: what cannot be read was not judged.

use std::collections::BTreeMap;

use super::{finding, ChangeView, FileChange, Finding, Severity};

mod python;
mod unread;
use python::{pipfile, pipfile_lock, pyproject, requirements, setup_cfg};

const CATEGORY: &str = "deps";

/// The text a submodule (gitlink) side of a change reads as (`git diff` shows the same).
pub fn gitlink_text(commit: &str) -> String {
    format!("Subproject commit {commit}\n")
}

fn gitlink_of(text: Option<&str>) -> Option<&str> {
    let c = text?
        .strip_prefix("Subproject commit ")?
        .strip_suffix('\n')?;
    (c.len() >= 40 && c.chars().all(|c| c.is_ascii_hexdigit())).then_some(c)
}

/// One thing a package manager would act on: a dependency, a locked package, a source or
/// registry, an index option, an install hook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Dep {
    /// Where it is declared (`dependencies`, `dev-dependencies`, `patch.crates-io`, `source`).
    pub(super) kind: String,
    pub(super) name: String,
    /// Where it comes from (a registry, a git URL, a path, a rename).
    pub(super) source: String,
    pub(super) version: String,
    /// Everything else that selects code (features, extras, default-features, optional).
    pub(super) rest: String,
}

impl Dep {
    pub(super) fn new(kind: &str, name: &str, source: &str, version: &str) -> Dep {
        Dep {
            kind: kind.to_string(),
            name: name.to_string(),
            source: source.to_string(),
            version: version.to_string(),
            rest: String::new(),
        }
    }
}

/// What kind of file a path is, for this reviewer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Manifest {
    CargoToml,
    /// `[[package]]` tables: Cargo.lock, poetry.lock, uv.lock.
    TomlLock,
    CargoConfig,
    Requirements,
    Pyproject,
    SetupCfg,
    Pipfile,
    PipfileLock,
    PackageJson,
    PackageLock,
    YarnLock,
    /// `.npmrc`, `.yarnrc`, `pip.conf`, `rust-toolchain.toml`: registries, indexes, tokens,
    /// toolchains.
    Config,
    /// Deno's `imports` and `scopes`: module URLs.
    ImportMap,
    Gitmodules,
    /// Code that runs when packages are built or installed (`setup.py`, `.pnpmfile.cjs`).
    Executable,
    /// Files this reviewer does not parse: every added line counts.
    Lines,
}

/// What `path` is, its letter case aside (a case-insensitive file system opens `cargo.toml`
/// for `Cargo.toml`).
fn manifest(path: &str) -> Option<Manifest> {
    let path = &path.to_ascii_lowercase();
    let name = path.rsplit('/').next().unwrap_or(path);
    let parent = path
        .rsplit('/')
        .nth(1)
        .filter(|_| path.contains('/'))
        .unwrap_or("");
    Some(match name {
        "cargo.toml" => Manifest::CargoToml,
        "cargo.lock" | "poetry.lock" | "uv.lock" | "pdm.lock" => Manifest::TomlLock,
        "config.toml" | "config" if parent == ".cargo" => Manifest::CargoConfig,
        "pyproject.toml" => Manifest::Pyproject,
        "setup.cfg" => Manifest::SetupCfg,
        "pipfile" => Manifest::Pipfile,
        "pipfile.lock" => Manifest::PipfileLock,
        "package.json" => Manifest::PackageJson,
        "package-lock.json" | "npm-shrinkwrap.json" => Manifest::PackageLock,
        "yarn.lock" => Manifest::YarnLock,
        ".npmrc"
        | ".yarnrc"
        | ".yarnrc.yml"
        | "pip.conf"
        | "pip.ini"
        | ".pypirc"
        | ".condarc"
        | "uv.toml"
        | "poetry.toml"
        | "rust-toolchain"
        | "rust-toolchain.toml" => Manifest::Config,
        "deno.json" | "deno.jsonc" | "import_map.json" => Manifest::ImportMap,
        // Yarn runs the release its `yarnPath` names, and its plugins.
        _ if [".yarn/releases/", ".yarn/plugins/"]
            .iter()
            .any(|d| path.starts_with(d) || path.contains(&format!("/{d}"))) =>
        {
            Manifest::Executable
        }
        ".gitmodules" => Manifest::Gitmodules,
        "setup.py" | ".pnpmfile.cjs" | "conanfile.py" => Manifest::Executable,
        "pnpm-lock.yaml"
        | "pnpm-workspace.yaml"
        | "go.mod"
        | "go.sum"
        | "gemfile"
        | "gemfile.lock" => Manifest::Lines,
        // pip reads any file it is given: every name that says it holds requirements.
        _ if (name.ends_with(".txt") || name.ends_with(".in"))
            && (name.contains("requirements")
                || name.contains("constraints")
                || parent == "requirements") =>
        {
            Manifest::Requirements
        }
        _ => return None,
    })
}

fn parse(m: Manifest, text: &str) -> Result<Vec<Dep>, String> {
    match m {
        Manifest::CargoToml => cargo_toml(&table(text)?),
        Manifest::TomlLock => toml_lock(&table(text)?),
        Manifest::CargoConfig => cargo_config(&table(text)?),
        Manifest::Requirements => requirements(text),
        Manifest::Pyproject => {
            let t = table(text)?;
            Ok([pyproject(&t)?, unread::pyproject(&t)].concat())
        }
        Manifest::SetupCfg => Ok([setup_cfg(text)?, unread::setup_cfg(text)].concat()),
        Manifest::Pipfile => {
            let t = table(text)?;
            Ok([pipfile(&t)?, unread::pipfile(&t)].concat())
        }
        Manifest::PipfileLock => pipfile_lock(&json(text)?),
        Manifest::PackageJson => {
            let v = json(text)?;
            let unread = v.as_object().map(unread::package_json).unwrap_or_default();
            Ok([package_json(&v)?, unread].concat())
        }
        Manifest::PackageLock => package_lock(&json(text)?),
        Manifest::YarnLock => Ok(yarn_lock(text)),
        Manifest::Config => Ok(config_lines(text)),
        Manifest::ImportMap => import_map(&json(text)?),
        Manifest::Gitmodules => Ok(gitmodules(text)),
        Manifest::Executable | Manifest::Lines => Ok(Vec::new()),
    }
}

fn table(text: &str) -> Result<toml::Table, String> {
    text.parse::<toml::Table>()
        .map_err(|e| e.message().trim().to_string())
}

fn json(text: &str) -> Result<serde_json::Value, String> {
    serde_json::from_str(text).map_err(|e| e.to_string())
}

/// A TOML value as one line, tables with their keys sorted (toml's tables are ordered maps).
pub(super) fn flat(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        toml::Value::Table(t) => {
            let parts: Vec<String> = t.iter().map(|(k, v)| format!("{k}={}", flat(v))).collect();
            format!("{{{}}}", parts.join(", "))
        }
        toml::Value::Array(a) => {
            format!("[{}]", a.iter().map(flat).collect::<Vec<_>>().join(", "))
        }
        other => other.to_string(),
    }
}

/// `dev_dependencies` is Cargo's old spelling of `dev-dependencies`.
fn norm_key(k: &str) -> String {
    k.replace('_', "-")
}

const CARGO_DEP_TABLES: &[&str] = &["dependencies", "dev-dependencies", "build-dependencies"];

fn cargo_toml(t: &toml::Table) -> Result<Vec<Dep>, String> {
    let mut out = Vec::new();
    for (key, v) in t {
        let k = norm_key(key);
        let sub = |v: &toml::Value| v.as_table().cloned().unwrap_or_default();
        match k.as_str() {
            _ if CARGO_DEP_TABLES.contains(&k.as_str()) => cargo_deps(&k, &sub(v), &mut out),
            "target" => {
                for (cfg, tt) in sub(v) {
                    for (kk, vv) in sub(&tt) {
                        let kk = norm_key(&kk);
                        if CARGO_DEP_TABLES.contains(&kk.as_str()) {
                            cargo_deps(&format!("target.{cfg}.{kk}"), &sub(&vv), &mut out);
                        }
                    }
                }
            }
            "workspace" => {
                if let Some(d) = v.get("dependencies") {
                    cargo_deps("workspace.dependencies", &sub(d), &mut out);
                }
            }
            "patch" => {
                for (registry, tt) in sub(v) {
                    cargo_deps(&format!("patch.{registry}"), &sub(&tt), &mut out);
                }
            }
            "replace" => cargo_deps("replace", &sub(v), &mut out),
            "package" => {
                for field in ["build", "links", "metabuild"] {
                    if let Some(x) = v.get(field) {
                        out.push(Dep::new("package", field, &flat(x), ""));
                    }
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

/// Keys of a Cargo dependency that say where it comes from.
const CARGO_SOURCE_KEYS: &[&str] = &[
    "package",
    "git",
    "branch",
    "tag",
    "rev",
    "path",
    "registry",
    "registry-index",
    "workspace",
    "base",
];

fn cargo_deps(kind: &str, deps: &toml::Table, out: &mut Vec<Dep>) {
    for (name, spec) in deps {
        let mut d = Dep::new(kind, name, "crates.io", "");
        match spec {
            toml::Value::String(v) => d.version = v.clone(),
            toml::Value::Table(t) => {
                let mut source = Vec::new();
                let mut rest = Vec::new();
                for (k, v) in t {
                    let k = norm_key(k);
                    if k == "version" {
                        d.version = flat(v);
                    } else if CARGO_SOURCE_KEYS.contains(&k.as_str()) {
                        source.push(format!("{k} {}", flat(v)));
                    } else {
                        rest.push(format!("{k}={}", flat(v)));
                    }
                }
                if !source.is_empty() {
                    d.source = source.join(", ");
                }
                d.rest = rest.join(", ");
            }
            other => d.source = flat(other),
        }
        out.push(d);
    }
}

/// A git source's commit (`#…`) changes with every update; the repository is the source.
pub(super) fn without_fragment(s: &str) -> &str {
    s.split('#').next().unwrap_or(s)
}

fn toml_lock(t: &toml::Table) -> Result<Vec<Dep>, String> {
    let Some(packages) = t.get("package") else {
        return Ok(Vec::new());
    };
    let packages = packages
        .as_array()
        .ok_or("`package` is not an array of tables")?;
    let mut out = Vec::new();
    for p in packages {
        let name = p
            .get("name")
            .and_then(|n| n.as_str())
            .ok_or("a [[package]] without a name")?;
        let version = p.get("version").map(flat).unwrap_or_default();
        let source = match p.get("source") {
            None => "local".to_string(),
            Some(toml::Value::String(s)) => without_fragment(s).to_string(),
            Some(toml::Value::Table(s)) => {
                let mut s = s.clone();
                for volatile in ["resolved_reference", "revision", "rev"] {
                    s.remove(volatile);
                }
                flat(&toml::Value::Table(s))
            }
            Some(other) => flat(other),
        };
        out.push(Dep::new("package", name, &source, &version));
    }
    Ok(out)
}

fn cargo_config(t: &toml::Table) -> Result<Vec<Dep>, String> {
    let mut out = Vec::new();
    for (key, v) in t {
        match key.as_str() {
            "source" | "registries" => {
                for (name, spec) in v.as_table().cloned().unwrap_or_default() {
                    out.push(Dep::new(key, &name, &flat(&spec), ""));
                }
            }
            "registry" => out.push(Dep::new("registry", "registry", &flat(v), "")),
            "patch" => {
                for (registry, tt) in v.as_table().cloned().unwrap_or_default() {
                    let deps = tt.as_table().cloned().unwrap_or_default();
                    cargo_deps(&format!("patch.{registry}"), &deps, &mut out);
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

pub(super) fn json_str(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

const NPM_KINDS: &[&str] = &[
    "dependencies",
    "devDependencies",
    "peerDependencies",
    "optionalDependencies",
];

/// Scripts npm, yarn and pnpm run by themselves when a package is installed.
const INSTALL_HOOKS: &[&str] = &[
    "preinstall",
    "install",
    "postinstall",
    "prepare",
    "preprepare",
    "postprepare",
    "prepublish",
    "prepack",
    "postpack",
    "dependencies",
];

/// Where an npm spec comes from, and its version range.
fn npm_spec(spec: &str) -> (String, String) {
    if let Some(alias) = spec.strip_prefix("npm:") {
        let at = alias[1..].find('@').map_or(alias.len(), |i| i + 1);
        return (
            format!("npm:{}", &alias[..at]),
            alias[at..].trim_start_matches('@').into(),
        );
    }
    const NOT_REGISTRY: &[&str] = &[
        "git+",
        "git:",
        "github:",
        "gitlab:",
        "bitbucket:",
        "gist:",
        "http:",
        "https:",
        "file:",
        "link:",
        "portal:",
        "patch:",
        ".",
        "/",
        "~",
    ];
    if let Some(rest) = spec.strip_prefix("workspace:") {
        return ("workspace".into(), rest.into());
    }
    if NOT_REGISTRY.iter().any(|p| spec.starts_with(p)) || spec.contains('/') {
        // A URL, a path, or `user/repo` (GitHub).
        return (without_fragment(spec).to_string(), String::new());
    }
    ("registry".into(), spec.to_string())
}

fn package_json(v: &serde_json::Value) -> Result<Vec<Dep>, String> {
    let obj = v.as_object().ok_or("not a JSON object")?;
    let mut out = Vec::new();
    for kind in NPM_KINDS {
        for (name, spec) in obj
            .get(*kind)
            .and_then(|d| d.as_object())
            .into_iter()
            .flatten()
        {
            let (source, version) = npm_spec(&json_str(spec));
            out.push(Dep::new(kind, name, &source, &version));
        }
    }
    for kind in ["bundledDependencies", "bundleDependencies"] {
        for name in obj
            .get(kind)
            .and_then(|d| d.as_array())
            .into_iter()
            .flatten()
        {
            out.push(Dep::new(
                "bundledDependencies",
                &json_str(name),
                "bundled",
                "",
            ));
        }
    }
    fn overrides(kind: &str, prefix: &str, v: &serde_json::Value, out: &mut Vec<Dep>) {
        for (k, v) in v.as_object().into_iter().flatten() {
            let name = format!("{prefix}{k}");
            match v {
                serde_json::Value::Object(_) => overrides(kind, &format!("{name}>"), v, out),
                other => {
                    let (source, version) = npm_spec(&json_str(other));
                    out.push(Dep::new(kind, &name, &source, &version));
                }
            }
        }
    }
    for (kind, v) in [
        ("overrides", obj.get("overrides")),
        ("resolutions", obj.get("resolutions")),
        (
            "pnpm.overrides",
            obj.get("pnpm").and_then(|p| p.get("overrides")),
        ),
    ] {
        if let Some(v) = v {
            overrides(kind, "", v, &mut out);
        }
    }
    for hook in INSTALL_HOOKS {
        if let Some(cmd) = obj.get("scripts").and_then(|s| s.get(*hook)) {
            out.push(Dep::new("install script", hook, &json_str(cmd), ""));
        }
    }
    if let Some(pm) = obj.get("packageManager") {
        let pm = json_str(pm);
        let (name, version) = pm.split_once('@').unwrap_or((&pm, ""));
        out.push(Dep::new("packageManager", name, "corepack", version));
    }
    Ok(out)
}

/// An import map's `imports` and `scopes` (Deno): each specifier and the URL it loads.
fn import_map(v: &serde_json::Value) -> Result<Vec<Dep>, String> {
    let mut out = Vec::new();
    let mut add = |kind: &str, map: Option<&serde_json::Value>| {
        for (name, url) in map.and_then(|m| m.as_object()).into_iter().flatten() {
            out.push(Dep::new(kind, name, &json_str(url), ""));
        }
    };
    add("imports", v.get("imports"));
    for (scope, map) in v
        .get("scopes")
        .and_then(|s| s.as_object())
        .into_iter()
        .flatten()
    {
        add(&format!("scopes.{scope}"), Some(map));
    }
    Ok(out)
}

/// Where a lock file's `resolved` URL comes from: a registry tarball's package URL (its
/// version is in the rest), or the URL without its commit.
fn resolved_source(url: &str) -> String {
    match url.split_once("/-/") {
        Some((pkg, _)) => pkg.to_string(),
        None => without_fragment(url).to_string(),
    }
}

fn package_lock(v: &serde_json::Value) -> Result<Vec<Dep>, String> {
    let obj = v.as_object().ok_or("not a JSON object")?;
    let mut out = Vec::new();
    let source = |info: &serde_json::Value| match info.get("resolved") {
        Some(r) => resolved_source(&json_str(r)),
        None if info.get("link").is_some() => "link".to_string(),
        None => "registry".to_string(),
    };
    if let Some(packages) = obj.get("packages").and_then(|p| p.as_object()) {
        for (path, info) in packages {
            if path.is_empty() {
                continue;
            }
            let name = info
                .get("name")
                .map(json_str)
                .unwrap_or_else(|| path.rsplit("node_modules/").next().unwrap_or(path).into());
            let version = info.get("version").map(json_str).unwrap_or_default();
            out.push(Dep::new("package", &name, &source(info), &version));
        }
        return Ok(out);
    }
    fn v1(
        deps: &serde_json::Value,
        source: &dyn Fn(&serde_json::Value) -> String,
        out: &mut Vec<Dep>,
    ) {
        for (name, info) in deps.as_object().into_iter().flatten() {
            let version = info.get("version").map(json_str).unwrap_or_default();
            out.push(Dep::new("package", name, &source(info), &version));
            if let Some(nested) = info.get("dependencies") {
                v1(nested, source, out);
            }
        }
    }
    if let Some(deps) = obj.get("dependencies") {
        v1(deps, &source, &mut out);
    }
    Ok(out)
}

/// yarn.lock (v1 and Berry): an entry per header line, its `version` and where it resolves.
fn yarn_lock(text: &str) -> Vec<Dep> {
    let mut out: Vec<Dep> = Vec::new();
    for line in text.lines() {
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        if !line.starts_with(' ') && line.ends_with(':') {
            let first = line.trim_end_matches(':').split(',').next().unwrap_or("");
            let spec = first.trim().trim_matches('"');
            let at = spec[1.min(spec.len())..]
                .find('@')
                .map_or(spec.len(), |i| i + 1);
            out.push(Dep::new("package", &spec[..at], "registry", ""));
            continue;
        }
        let Some(last) = out.last_mut() else { continue };
        let l = line.trim();
        let value = |key: &str| {
            l.strip_prefix(key).map(|v| {
                v.trim_start_matches(':')
                    .trim()
                    .trim_matches('"')
                    .to_string()
            })
        };
        if let Some(v) = value("version") {
            last.version = v;
        } else if let Some(v) = value("resolved") {
            last.source = resolved_source(&v);
        } else if let Some(v) = value("resolution") {
            // `name@npm:1.2.3`: the protocol is the source.
            let proto = v[1.min(v.len())..]
                .split_once('@')
                .map(|(_, p)| p.split(':').next().unwrap_or(p).to_string());
            last.source = proto.unwrap_or(v);
        }
    }
    out
}

/// `key=value`, `key value` or `key: value` lines (comments `#` and `;` left out).
fn config_lines(text: &str) -> Vec<Dep> {
    let mut section = String::new();
    let mut out = Vec::new();
    for line in text.lines() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') || l.starts_with(';') {
            continue;
        }
        if l.starts_with('[') && l.ends_with(']') {
            section = format!("{l} ");
            continue;
        }
        let (k, v) = l
            .split_once(['=', ':', ' '])
            .map_or((l, ""), |(k, v)| (k.trim(), v.trim()));
        out.push(Dep::new("setting", &format!("{section}{k}"), v, ""));
    }
    out
}

/// `[submodule "name"]` sections: each submodule's path, URL and branch as its source.
fn gitmodules(text: &str) -> Vec<Dep> {
    let mut out: Vec<Dep> = Vec::new();
    for line in text.lines() {
        let l = line.trim();
        if l.starts_with('[') {
            out.push(Dep::new("submodule", l, "", ""));
        } else if let (Some(last), Some((k, v))) = (out.last_mut(), l.split_once('=')) {
            last.source = format!("{} {}={}", last.source, k.trim(), v.trim())
                .trim()
                .to_string();
        }
    }
    out
}

/// How much a difference matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    /// A new package, source, registry, hook, submodule; a kind moved; unreadable; executable.
    New,
    /// Features, extras, optional: more of a package already there.
    Changed,
    /// A version of a package from the same source, or a removal.
    Bump,
}

/// A URL's user and password (`https://user:secret@host/…`) replaced, so that a message never
/// repeats a credential.
fn redact(s: &str) -> String {
    s.split(' ')
        .map(|w| match (w.find("://"), w.rfind('@')) {
            (Some(scheme), Some(at)) if at > scheme && !w[scheme + 3..at].contains('/') => {
                format!("{}***{}", &w[..scheme + 3], &w[at..])
            }
            _ => w.to_string(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn describe(d: &Dep) -> String {
    // A setting's value may be a credential (`_authToken=…`): only its name is shown.
    if d.kind == "setting" {
        return d.name.clone();
    }
    let mut s = if d.version.is_empty() {
        d.name.clone()
    } else {
        format!("{} = \"{}\"", d.name, d.version)
    };
    if !d.source.is_empty() && !["crates.io", "pypi", "registry"].contains(&d.source.as_str()) {
        s.push_str(&format!(" from {}", d.source));
    }
    redact(&s)
}

fn compare(base: &[Dep], head: &[Dep]) -> Vec<(Class, String)> {
    let group = |deps: &[Dep]| {
        let mut m: BTreeMap<(String, String), Vec<Dep>> = BTreeMap::new();
        for d in deps {
            m.entry((d.kind.clone(), d.name.clone()))
                .or_default()
                .push(d.clone());
        }
        m
    };
    let (b, h) = (group(base), group(head));
    let mut out = Vec::new();
    // A setting the reviewer does not read: any change to it (removal too) is judged unseen.
    let keys: std::collections::BTreeSet<_> = b.keys().chain(h.keys()).collect();
    for key in keys {
        if key.0 == unread::KIND && b.get(key) != h.get(key) {
            let how = match (b.contains_key(key), h.contains_key(key)) {
                (false, _) => "is set",
                (_, false) => "is removed",
                _ => "changes",
            };
            out.push((Class::New, format!("{} {how}: {}", key.1, unread::KIND)));
        }
    }
    for ((kind, name), ds) in h.iter().filter(|(k, _)| k.0 != unread::KIND) {
        let Some(was) = b.get(&(kind.clone(), name.clone())) else {
            let moved = base
                .iter()
                .find(|d| &d.name == name && !h.contains_key(&(d.kind.clone(), name.clone())));
            out.push(match moved {
                Some(m) => (
                    Class::New,
                    format!("{name} moved from [{}] to [{kind}]", m.kind),
                ),
                None => (Class::New, format!("new in [{kind}]: {}", describe(&ds[0]))),
            });
            continue;
        };
        for d in ds {
            if was.contains(d) {
                continue;
            }
            match was.iter().find(|w| w.source == d.source) {
                None => out.push((
                    Class::New,
                    format!(
                        "new source in [{kind}]: {} (was {})",
                        describe(d),
                        describe(&was[0])
                    ),
                )),
                Some(w) if w.rest != d.rest => out.push((
                    Class::Changed,
                    format!(
                        "[{kind}] {name}: {} → {}",
                        or_none(&w.rest),
                        or_none(&d.rest)
                    ),
                )),
                Some(w) => out.push((
                    Class::Bump,
                    format!(
                        "[{kind}] {name}: version {} → {}",
                        or_none(&w.version),
                        or_none(&d.version)
                    ),
                )),
            }
        }
    }
    for ((kind, name), _) in b
        .iter()
        .filter(|(k, _)| !h.contains_key(k) && k.0 != unread::KIND)
    {
        if !head.iter().any(|d| &d.name == name) {
            out.push((Class::Bump, format!("removed from [{kind}]: {name}")));
        }
    }
    out
}

fn or_none(s: &str) -> &str {
    if s.is_empty() {
        "(none)"
    } else {
        s
    }
}

/// The differences a changed file makes to what would be installed.
fn judge(f: &FileChange, m: Manifest) -> Vec<(Class, String)> {
    let (base, head) = (f.base.as_deref(), f.head.as_deref());
    match m {
        Manifest::Executable if head.is_some() => {
            return vec![(
                Class::New,
                format!(
                    "{} is code that runs when the package is built or installed; it changes",
                    f.path
                ),
            )];
        }
        Manifest::Executable => return vec![(Class::Bump, format!("{} is removed", f.path))],
        Manifest::Lines => {
            let added: Vec<String> = f
                .added_lines()
                .iter()
                .map(|(_, l)| l.trim().to_string())
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .take(10)
                .collect();
            return if !added.is_empty() {
                vec![(
                    Class::New,
                    format!(
                        "lines added (this file is compared by line): {}",
                        added.join("; ")
                    ),
                )]
            } else if f.removed_lines().is_empty() {
                Vec::new()
            } else {
                vec![(Class::Bump, "lines removed only".into())]
            };
        }
        _ => {}
    }
    let parsed = |t: Option<&str>| t.map_or(Ok(Vec::new()), |t| parse(m, t));
    match (parsed(base), parsed(head)) {
        (_, Err(e)) => vec![(
            Class::New,
            format!(
                "{} does not parse at head ({e}): what cannot be read was not judged",
                f.path
            ),
        )],
        // Unreadable before, readable now: everything in it is new to the reviewer.
        (Err(_), Ok(h)) => compare(&[], &h),
        (Ok(b), Ok(h)) => compare(&b, &h),
    }
}

/// `deps`: what the change adds to what the package managers would install (module docs).
pub fn check(reviewer: &str, change: &ChangeView) -> Vec<Finding> {
    let agent = change.agent_origin;
    let (new, hint_new) = if agent {
        (Severity::Blocking, "an agent may not add a package, source, registry, install hook or submodule, nor move a dependency to another kind: propose this part as a person, naming each in the rationale")
    } else {
        (
            Severity::Major,
            "name each new package, source or registry in the rationale, and why",
        )
    };
    let mut out = Vec::new();
    for f in change.files {
        let name = f.path.rsplit('/').next().unwrap_or(&f.path);
        let (b, h) = (gitlink_of(f.base.as_deref()), gitlink_of(f.head.as_deref()));
        let found: Vec<(Class, String)> = if h.is_some() && b != h {
            vec![(Class::New, format!("{} is a submodule at head ({}): code from another repository that no reviewer reads", f.path, if b.is_some() { "its commit moved" } else { "new" }))]
        } else if b.is_some() {
            if h.is_none() && f.head.is_some() {
                vec![(
                    Class::New,
                    format!("a submodule at {} becomes a file", f.path),
                )]
            } else {
                Vec::new()
            }
        } else if name == "build.rs" && f.added() {
            vec![(
                Class::New,
                format!("a new build script {} runs at every build", f.path),
            )]
        } else if let Some(m) = manifest(&f.path) {
            judge(f, m)
        } else {
            Vec::new()
        };
        for (class, message) in found {
            let (severity, hint) = match class {
                Class::New => (new, hint_new),
                // Features and extras switch on code (and optional packages) of their own.
                Class::Changed if agent => (
                    Severity::Blocking,
                    "an agent may not change which features or extras of a package are built: propose it as a person, saying which and why",
                ),
                Class::Changed => (
                    Severity::Major,
                    "say in the rationale which features or extras the change turns on, and why",
                ),
                Class::Bump => (Severity::Minor, "name the version change in the rationale"),
            };
            let line = f.head.as_deref().and_then(|t| line_of(t, &message));
            out.push(finding(
                reviewer,
                severity,
                CATEGORY,
                Some(&f.path),
                line,
                format!("dependencies change in {}: {message}", f.path),
                hint,
            ));
        }
    }
    out
}

/// The first line of `text` holding a word of the message (a package name), 1-based.
fn line_of(text: &str, message: &str) -> Option<u32> {
    let word = message
        .split(|c: char| c.is_whitespace() || c == ':')
        .find(|w| w.len() > 2 && !w.starts_with('[') && !w.starts_with("new"))?;
    text.lines()
        .position(|l| l.contains(word))
        .map(|i| i as u32 + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The worst severity the reviewer gives one file's change (`None`: no finding).
    fn worst(path: &str, base: Option<&str>, head: Option<&str>, agent: bool) -> Option<Severity> {
        let files = [FileChange {
            path: path.into(),
            base: base.map(str::to_string),
            head: head.map(str::to_string),
        }];
        let view = ChangeView {
            files: &files,
            agent_origin: agent,
            declared: None,
            judged: &[],
        };
        check("deps", &view).iter().map(|f| f.severity).max()
    }

    const CARGO: &str = "[package]\nname = \"d\"\nversion = \"0.1.0\"\n\n[dependencies]\nserde = \"1.0.1\"\nregex = { version = \"1\", default-features = false }\n\n[dev-dependencies]\nhmac = \"0.12\"\n";
    const LOCK: &str = "version = 4\n\n[[package]]\nname = \"serde\"\nversion = \"1.0.1\"\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"\n\n[[package]]\nname = \"d\"\nversion = \"0.1.0\"\n";
    const REQS: &str = "# pins\nrequests==2.31.0\nflask>=2.0 ; python_version > \"3.8\"\n";
    const PKG: &str = "{\n  \"name\": \"web\",\n  \"scripts\": { \"test\": \"jest\" },\n  \"dependencies\": { \"left-pad\": \"^1.3.0\" },\n  \"devDependencies\": { \"jest\": \"29.0.0\" }\n}\n";
    const PYPROJECT: &str = "[project]\nname = \"p\"\ndependencies = [\"requests>=2\"]\n\n[project.optional-dependencies]\ntest = [\"pytest\"]\n\n[build-system]\nrequires = [\"setuptools\"]\nbuild-backend = \"setuptools.build_meta\"\n";
    const PIPFILE: &str = "[[source]]\nname = \"pypi\"\nurl = \"https://pypi.org/simple\"\nverify_ssl = true\n\n[packages]\nrequests = \"==2.31.0\"\n\n[dev-packages]\npytest = \"*\"\n";

    fn with(base: &str, from: &str, to: &str) -> String {
        assert!(base.contains(from), "{from}");
        base.replacen(from, to, 1)
    }

    #[test]
    fn what_would_be_installed_is_compared_not_the_lines() {
        use Severity::*;
        let b = Some(Blocking);
        let cases: Vec<(&str, &str, String, String, Option<Severity>)> = vec![
            // Cargo: new, patched to a fork, moved kind, renamed, new source; bumps and removals.
            ("new crate", "Cargo.toml", CARGO.into(), with(CARGO, "hmac", "leftpad = \"0.1\"\nhmac"), b),
            ("patch to a git fork", "Cargo.toml", CARGO.into(), format!("{CARGO}\n[patch.crates-io]\nserde = {{ git = \"https://example.org/serde\" }}\n"), b),
            ("dev moved to normal", "Cargo.toml", CARGO.into(), "[package]\nname = \"d\"\nversion = \"0.1.0\"\n\n[dependencies]\nserde = \"1.0.1\"\nregex = { version = \"1\", default-features = false }\nhmac = \"0.12\"\n\n[dev-dependencies]\n".into(), b),
            ("renamed package", "Cargo.toml", CARGO.into(), with(CARGO, "serde = \"1.0.1\"", "serde = { version = \"1\", package = \"serde-fork\" }"), b),
            ("alternate registry", "Cargo.toml", CARGO.into(), with(CARGO, "serde = \"1.0.1\"", "serde = { version = \"1.0.1\", registry = \"mine\" }"), b),
            ("target-specific new crate", "Cargo.toml", CARGO.into(), format!("{CARGO}\n[target.'cfg(unix)'.dependencies]\nnix = \"0.29\"\n"), b),
            ("build key", "Cargo.toml", CARGO.into(), with(CARGO, "version = \"0.1.0\"\n", "version = \"0.1.0\"\nbuild = \"tools/gen.rs\"\n"), b),
            ("version bump", "Cargo.toml", CARGO.into(), with(CARGO, "serde = \"1.0.1\"", "serde = \"1.0.2\""), Some(Minor)),
            ("dev-dependency removed", "Cargo.toml", CARGO.into(), with(CARGO, "hmac = \"0.12\"\n", ""), Some(Minor)),
            ("features turned on", "Cargo.toml", CARGO.into(), with(CARGO, "default-features = false", "default-features = true"), b),
            ("not toml", "Cargo.toml", CARGO.into(), format!("{CARGO}\n[dependencies\n"), b),
            ("only the package's version", "Cargo.toml", CARGO.into(), with(CARGO, "version = \"0.1.0\"", "version = \"0.2.0\""), None),
            // Cargo.lock: a new package, a new source; a bump.
            ("lock: new package", "Cargo.lock", LOCK.into(), format!("{LOCK}\n[[package]]\nname = \"evil\"\nversion = \"0.1.0\"\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"\n"), b),
            ("lock: git source", "Cargo.lock", LOCK.into(), with(LOCK, "registry+https://github.com/rust-lang/crates.io-index", "git+https://example.org/serde#abc"), b),
            ("lock: bump", "Cargo.lock", LOCK.into(), with(LOCK, "1.0.1", "1.0.2"), Some(Minor)),
            // .cargo/config.toml
            ("source replacement", ".cargo/config.toml", "[build]\njobs = 2\n".into(), "[build]\njobs = 2\n\n[source.crates-io]\nreplace-with = \"mirror\"\n\n[source.mirror]\nregistry = \"sparse+https://example.org/index/\"\n".into(), b),
            ("cargo config: jobs only", ".cargo/config.toml", "[build]\njobs = 2\n".into(), "[build]\njobs = 4\n".into(), None),
            // Python
            ("requirements: new package", "requirements-dev.txt", REQS.into(), format!("{REQS}colorama==0.4.6\n"), b),
            ("requirements: index", "requirements.txt", REQS.into(), format!("--extra-index-url https://example.org/simple\n{REQS}"), b),
            ("requirements: git", "requirements.txt", REQS.into(), with(REQS, "requests==2.31.0", "requests @ git+https://example.org/requests.git"), b),
            ("requirements: editable", "requirements.txt", REQS.into(), format!("{REQS}-e git+https://example.org/x.git#egg=x\n"), b),
            ("requirements: bump", "requirements.txt", REQS.into(), with(REQS, "2.31.0", "2.32.3"), Some(Minor)),
            ("requirements: case and separators", "requirements.txt", REQS.into(), with(REQS, "requests==", "Requests=="), None),
            ("pyproject: new dependency", "pyproject.toml", PYPROJECT.into(), with(PYPROJECT, "[\"requests>=2\"]", "[\"requests>=2\", \"httpx\"]"), b),
            ("pyproject: optional moved to main", "pyproject.toml", PYPROJECT.into(), with(with(PYPROJECT, "[\"requests>=2\"]", "[\"requests>=2\", \"pytest\"]").as_str(), "test = [\"pytest\"]", "test = []"), b),
            ("pyproject: build backend", "pyproject.toml", PYPROJECT.into(), with(PYPROJECT, "setuptools.build_meta", "backend"), b),
            ("pyproject: bump", "pyproject.toml", PYPROJECT.into(), with(PYPROJECT, "requests>=2", "requests>=2.31"), Some(Minor)),
            ("pipfile: new package", "Pipfile", PIPFILE.into(), with(PIPFILE, "pytest = \"*\"", "pytest = \"*\"\nrich = \"*\""), b),
            ("pipfile: new source", "Pipfile", PIPFILE.into(), format!("{PIPFILE}\n[[source]]\nname = \"mine\"\nurl = \"https://example.org/simple\"\nverify_ssl = true\n"), b),
            ("setup.py changed", "setup.py", "from setuptools import setup\nsetup()\n".into(), "from setuptools import setup\nsetup(install_requires=[\"x\"])\n".into(), b),
            ("setup.cfg: new requirement", "setup.cfg", "[options]\ninstall_requires =\n    requests\n".into(), "[options]\ninstall_requires =\n    requests\n    evil\n".into(), b),
            // JavaScript
            ("package.json: new dependency", "package.json", PKG.into(), with(PKG, "\"^1.3.0\"", "\"^1.3.0\", \"lodash\": \"4\""), b),
            ("package.json: git dependency", "package.json", PKG.into(), with(PKG, "\"^1.3.0\"", "\"git+https://example.org/left-pad.git\""), b),
            ("package.json: file dependency", "package.json", PKG.into(), with(PKG, "\"^1.3.0\"", "\"file:../left-pad\""), b),
            ("package.json: install script", "package.json", PKG.into(), with(PKG, "\"test\": \"jest\"", "\"test\": \"jest\", \"postinstall\": \"node x.js\""), b),
            ("package.json: override", "package.json", PKG.into(), with(PKG, "\"name\": \"web\",", "\"name\": \"web\",\n  \"overrides\": { \"jest\": { \"glob\": \"npm:evil@1\" } },"), b),
            ("package.json: dev moved", "package.json", PKG.into(), with(with(PKG, "\"^1.3.0\"", "\"^1.3.0\", \"jest\": \"29.0.0\"").as_str(), "{ \"jest\": \"29.0.0\" }", "{}"), b),
            ("package.json: bump", "package.json", PKG.into(), with(PKG, "^1.3.0", "^1.3.1"), Some(Minor)),
            ("package.json: test script", "package.json", PKG.into(), with(PKG, "\"jest\" }", "\"jest --ci\" }"), None),
            (".npmrc", ".npmrc", "".into(), "registry=https://example.org/npm/\n".into(), b),
            ("toolchain", "rust-toolchain.toml", "[toolchain]\nchannel = \"1.89\"\n".into(), "[toolchain]\nchannel = \"1.89\"\npath = \"/opt/evil\"\n".into(), b),
            ("yarn release", ".yarn/releases/yarn-4.cjs", "a\n".into(), "b\n".into(), b),
            ("another letter case", "PIPFILE", PIPFILE.into(), with(PIPFILE, "pytest = \"*\"", "pytest = \"*\"\nrich = \"*\""), b),
            ("deno import", "deno.json", "{\"imports\": {\"std/\": \"jsr:@std/\"}}".into(), "{\"imports\": {\"std/\": \"https://example.org/std/\"}}".into(), b),
            ("deno: not json", "deno.json", "{}".into(), "{ // x\n}".into(), b),
            (".npmrc changed", "web/.npmrc", "save-exact=true\n".into(), "save-exact=true\n@acme:registry=https://example.org/\n".into(), b),
            ("submodule declared", ".gitmodules", "".into(), "[submodule \"vendor/x\"]\n\tpath = vendor/x\n\turl = https://example.org/x.git\n".into(), b),
            ("go.mod line", "go.mod", "module m\n".into(), "module m\nrequire example.org/x v1.0.0\n".into(), b),
            // Settings the reviewer does not read are judged unseen; linters' tables are not.
            ("uv: extra index", "pyproject.toml", PYPROJECT.into(), format!("{PYPROJECT}\n[tool.uv]\nextra-index-url = [\"https://example.org/simple\"]\n"), b),
            ("uv: override", "pyproject.toml", PYPROJECT.into(), format!("{PYPROJECT}\n[tool.uv]\noverride-dependencies = [\"requests @ git+https://example.org/r.git\"]\n"), b),
            ("uv: dev-dependencies", "pyproject.toml", PYPROJECT.into(), format!("{PYPROJECT}\n[tool.uv]\ndev-dependencies = [\"evil\"]\n"), b),
            ("pdm dev-dependencies", "pyproject.toml", PYPROJECT.into(), format!("{PYPROJECT}\n[tool.pdm.dev-dependencies]\ntest = [\"evil @ git+https://example.org/e.git\"]\n"), b),
            ("pdm source", "pyproject.toml", PYPROJECT.into(), format!("{PYPROJECT}\n[[tool.pdm.source]]\nname = \"m\"\nurl = \"https://example.org/simple\"\n"), b),
            ("hatch env", "pyproject.toml", PYPROJECT.into(), format!("{PYPROJECT}\n[tool.hatch.envs.default]\ndependencies = [\"evil @ git+https://example.org/e.git\"]\n"), b),
            ("dynamic dependencies", "pyproject.toml", PYPROJECT.into(), with(PYPROJECT, "dependencies = [\"requests>=2\"]", "dynamic = [\"dependencies\"]\n\n[tool.setuptools.dynamic]\ndependencies = { file = [\"deps.in\"] }\n"), b),
            ("unread setting removed", "pyproject.toml", format!("{PYPROJECT}\n[tool.uv]\nrequire-hashes = true\n"), PYPROJECT.into(), b),
            ("ruff table", "pyproject.toml", PYPROJECT.into(), format!("{PYPROJECT}\n[tool.ruff]\nline-length = 100\n\n[tool.black]\nline-length = 100\n"), None),
            ("project description", "pyproject.toml", PYPROJECT.into(), with(PYPROJECT, "name = \"p\"", "name = \"p\"\ndescription = \"a tool\"\nkeywords = [\"x\"]"), None),
            ("requirements: a comment ending in a backslash", "requirements.txt", REQS.into(), format!("{REQS}# see below \\\nevilpkg @ git+https://example.org/e.git\n"), b),
            ("requirements: a continued requirement", "requirements.txt", REQS.into(), with(REQS, "requests==2.31.0", "requests==\\\n2.31.0"), None),
            ("dev-requirements.txt", "dev-requirements.txt", "".into(), "evil==1\n".into(), b),
            ("setup.cfg: dash form", "setup.cfg", "[options]\ninstall_requires =\n    requests\n".into(), "[options]\ninstall_requires =\n    requests\ninstall-requires =\n    evil\n".into(), b),
            ("setup.cfg: easy_install index", "setup.cfg", "[metadata]\nname = x\n".into(), "[metadata]\nname = x\n\n[easy_install]\nindex_url = https://example.org/simple\n".into(), b),
            ("setup.cfg: metadata and flake8", "setup.cfg", "[metadata]\nname = x\n".into(), "[metadata]\nname = x\ndescription = y\n\n[flake8]\nmax-line-length = 100\n".into(), None),
            ("pnpm packageExtensions", "package.json", PKG.into(), with(PKG, "\"name\": \"web\",", "\"name\": \"web\",\n  \"pnpm\": { \"packageExtensions\": { \"jest\": { \"dependencies\": { \"x\": \"github:evil/x\" } } } },"), b),
            ("package.json: workspaces", "package.json", PKG.into(), with(PKG, "\"name\": \"web\",", "\"name\": \"web\",\n  \"workspaces\": [\"../evil\"],"), b),
            ("package.json: description", "package.json", PKG.into(), with(PKG, "\"name\": \"web\",", "\"name\": \"web\",\n  \"description\": \"a site\",\n  \"private\": true,"), None),
            ("pipfile: pipenv settings", "Pipfile", PIPFILE.into(), format!("{PIPFILE}\n[pipenv]\nallow_prereleases = true\n"), b),
        ];
        for (about, path, base, head, expected) in &cases {
            assert_eq!(
                worst(path, Some(base), Some(head), true),
                *expected,
                "{about}: {path}"
            );
        }
        // A person's new dependency asks for the rationale; it does not block.
        let (_, path, base, head, _) = &cases[0];
        assert_eq!(worst(path, Some(base), Some(head), false), Some(Major));
    }

    #[test]
    fn messages_do_not_repeat_credentials() {
        let secret = format!("s3{}", "cr3tvalue");
        let npmrc = format!("//registry.example.org/:_authToken={secret}\n");
        let reqs = format!("--index-url https://ci:{secret}@example.org/simple\nrequests==2\n");
        for (path, text) in [(".npmrc", npmrc), ("requirements.txt", reqs)] {
            let files = [FileChange {
                path: path.into(),
                base: None,
                head: Some(text),
            }];
            let view = ChangeView {
                files: &files,
                agent_origin: true,
                declared: None,
                judged: &[],
            };
            let found = check("deps", &view);
            assert!(!found.is_empty(), "{path}");
            assert!(
                found.iter().all(|f| !f.message.contains(&secret)),
                "{found:#?}"
            );
        }
    }

    #[test]
    fn a_submodule_is_seen_as_one() {
        let link = gitlink_text(&"a".repeat(40));
        let moved = gitlink_text(&"b".repeat(40));
        assert_eq!(
            worst("vendor/x", None, Some(&link), true),
            Some(Severity::Blocking)
        );
        assert_eq!(
            worst("vendor/x", Some(&link), Some(&moved), true),
            Some(Severity::Blocking)
        );
        assert_eq!(
            worst("vendor/x", Some("text\n"), Some(&link), true),
            Some(Severity::Blocking)
        );
        assert_eq!(worst("vendor/x", Some(&link), None, true), None);
        assert_eq!(
            worst("vendor/x", None, Some(&link), false),
            Some(Severity::Major)
        );
    }

    #[test]
    fn a_lock_file_bump_with_its_manifest_is_minor() {
        let files = [
            FileChange {
                path: "Cargo.toml".into(),
                base: Some(CARGO.into()),
                head: Some(with(CARGO, "serde = \"1.0.1\"", "serde = \"1.0.2\"")),
            },
            FileChange {
                path: "Cargo.lock".into(),
                base: Some(LOCK.into()),
                head: Some(with(LOCK, "1.0.1", "1.0.2")),
            },
        ];
        let view = ChangeView {
            files: &files,
            agent_origin: true,
            declared: None,
            judged: &[],
        };
        let found = check("deps", &view);
        assert_eq!(found.len(), 2, "{found:#?}");
        assert!(
            found.iter().all(|f| f.severity == Severity::Minor),
            "{found:#?}"
        );
        assert!(
            found[0].message.contains("1.0.1 → 1.0.2"),
            "{}",
            found[0].message
        );
    }
}
