//! The Python side of `deps`: requirements files, `pyproject.toml` (PEP 621, PEP 735, Poetry,
//! uv), `setup.cfg`, `Pipfile` and `Pipfile.lock`, read into [`Dep`]s.

use super::{flat, json_str, without_fragment, Dep};

/// A Python package name, normalised as pip compares them.
fn py_name(s: &str) -> String {
    s.to_ascii_lowercase().replace(['_', '.'], "-")
}

/// One PEP 508 requirement (`name[extras] specifiers ; markers`, or `name @ url`), or a URL.
pub(super) fn pep508(kind: &str, s: &str) -> Result<Dep, String> {
    let s = s.trim();
    let url_like =
        s.starts_with("git+") || s.contains("://") && !s.contains(" @ ") && !s.contains('@');
    if url_like || s.starts_with('.') || s.starts_with('/') {
        let url = s.split_whitespace().next().unwrap_or(s);
        let name = url
            .split("egg=")
            .nth(1)
            .map(|e| e.split('&').next().unwrap_or(e))
            .unwrap_or(url);
        return Ok(Dep::new(kind, &py_name(name), without_fragment(url), ""));
    }
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || "-_.".contains(c)))
        .unwrap_or(s.len());
    if end == 0 {
        return Err(format!("`{s}` is not a requirement"));
    }
    let mut d = Dep::new(kind, &py_name(&s[..end]), "pypi", "");
    let mut rest = s[end..].trim_start();
    let (body, markers) = rest.split_once(';').unwrap_or((rest, ""));
    rest = body.trim();
    let mut extra = Vec::new();
    if let Some(r) = rest.strip_prefix('[') {
        let (extras, after) = r.split_once(']').ok_or("an unclosed `[` of extras")?;
        extra.push(format!("extras [{extras}]"));
        rest = after.trim();
    }
    if let Some(url) = rest.strip_prefix('@') {
        d.source = without_fragment(url.trim()).to_string();
    } else {
        d.version = rest.split_whitespace().collect::<Vec<_>>().join(" ");
    }
    if !markers.trim().is_empty() {
        extra.push(format!("; {}", markers.trim()));
    }
    d.rest = extra.join(" ");
    Ok(d)
}

/// Options of a requirements file that change where packages come from or what is read.
const PIP_OPTIONS: &[&str] = &[
    "-i",
    "--index-url",
    "--extra-index-url",
    "-f",
    "--find-links",
    "--trusted-host",
    "-r",
    "--requirement",
    "-c",
    "--constraint",
    "-e",
    "--editable",
    "--no-index",
    "--pre",
    "--prefer-binary",
    "--only-binary",
    "--no-binary",
];

/// A requirements file's logical lines, as pip's `join_lines` makes them: a line ending in `\`
/// continues on the next, except a comment line (pip never joins one, so the line after it is
/// read on its own), and a comment line ends a continuation.
fn join_lines(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut pending: Option<String> = None;
    for line in text.lines() {
        let comment = line.trim_start().starts_with('#');
        if !line.ends_with('\\') || comment {
            let line = if comment {
                format!(" {line}")
            } else {
                line.to_string()
            };
            out.push(match pending.take() {
                Some(p) => p + &line,
                None => line,
            });
        } else {
            let part = line.trim_matches('\\');
            pending = Some(pending.unwrap_or_default() + part);
        }
    }
    out.extend(pending);
    out
}

/// A line without its comment: from the first `#` at the start or after white space (pip's
/// `COMMENT_RE`).
fn without_comment(line: &str) -> &str {
    let at = line.char_indices().find(|&(i, c)| {
        c == '#'
            && line[..i]
                .chars()
                .next_back()
                .is_none_or(char::is_whitespace)
    });
    at.map_or(line, |(i, _)| &line[..i])
}

pub(super) fn requirements(text: &str) -> Result<Vec<Dep>, String> {
    let mut out = Vec::new();
    for line in join_lines(text) {
        let line = without_comment(&line).trim();
        if line.is_empty() {
            continue;
        }
        if line.starts_with('-') {
            let (opt, value) = match line.split_once(['=', ' ']) {
                Some((o, v)) => (o, v.trim()),
                None => (line, ""),
            };
            if opt == "-e" || opt == "--editable" {
                out.push(pep508("editable", value)?);
            } else if PIP_OPTIONS.contains(&opt) {
                out.push(Dep::new("option", &format!("{opt} {value}"), value, ""));
            } else {
                out.push(Dep::new("option", line, line, ""));
            }
            continue;
        }
        // `--hash` options after a requirement pin what was already named.
        let req = line.split(" --").next().unwrap_or(line);
        out.push(pep508("requirements", req)?);
    }
    Ok(out)
}

fn str_list(kind: &str, v: &toml::Value, out: &mut Vec<Dep>) -> Result<(), String> {
    for item in v.as_array().ok_or(format!("`{kind}` is not a list"))? {
        match item.as_str() {
            Some(s) => out.push(pep508(kind, s)?),
            // A `{include-group = …}` of dependency-groups.
            None => out.push(Dep::new(kind, &flat(item), &flat(item), "")),
        }
    }
    Ok(())
}

pub(super) fn pyproject(t: &toml::Table) -> Result<Vec<Dep>, String> {
    let mut out = Vec::new();
    let at = |path: &[&str]| -> Option<&toml::Value> {
        let mut v = t.get(path[0])?;
        for p in &path[1..] {
            v = v.get(p)?;
        }
        Some(v)
    };
    if let Some(v) = at(&["project", "dependencies"]) {
        str_list("project.dependencies", v, &mut out)?;
    }
    for (group, table) in [
        (
            "optional-dependencies",
            at(&["project", "optional-dependencies"]),
        ),
        ("dependency-groups", t.get("dependency-groups")),
    ] {
        for (g, v) in table.and_then(|v| v.as_table()).into_iter().flatten() {
            str_list(&format!("{group}.{g}"), v, &mut out)?;
        }
    }
    if let Some(v) = at(&["build-system", "requires"]) {
        str_list("build-system.requires", v, &mut out)?;
    }
    for field in ["build-backend", "backend-path"] {
        if let Some(v) = at(&["build-system", field]) {
            out.push(Dep::new("build-system", field, &flat(v), ""));
        }
    }
    let poetry = |path: &[&str]| at(&[&["tool", "poetry"], path].concat()).cloned();
    for (kind, v) in [
        ("poetry.dependencies", poetry(&["dependencies"])),
        ("poetry.dev-dependencies", poetry(&["dev-dependencies"])),
    ] {
        if let Some(v) = v {
            poetry_deps(kind, &v, &mut out);
        }
    }
    for (g, v) in poetry(&["group"])
        .and_then(|v| v.as_table().cloned())
        .unwrap_or_default()
    {
        if let Some(d) = v.get("dependencies") {
            poetry_deps(&format!("poetry.group.{g}"), d, &mut out);
        }
    }
    for (kind, v) in [
        ("source", poetry(&["source"])),
        ("uv.index", at(&["tool", "uv", "index"]).cloned()),
    ] {
        for s in v.as_ref().and_then(|v| v.as_array()).into_iter().flatten() {
            let name = s.get("name").map(flat).unwrap_or_default();
            out.push(Dep::new(kind, &name, &flat(s), ""));
        }
    }
    for (name, spec) in at(&["tool", "uv", "sources"])
        .and_then(|v| v.as_table())
        .into_iter()
        .flatten()
    {
        out.push(Dep::new("uv.sources", &py_name(name), &flat(spec), ""));
    }
    Ok(out)
}

/// Keys of a Poetry or Pipenv dependency that say where it comes from.
const PY_SOURCE_KEYS: &[&str] = &[
    "git", "branch", "tag", "rev", "ref", "path", "file", "url", "source", "index", "editable",
    "develop",
];

fn poetry_deps(kind: &str, v: &toml::Value, out: &mut Vec<Dep>) {
    for (name, spec) in v.as_table().into_iter().flatten() {
        let mut d = Dep::new(kind, &py_name(name), "pypi", "");
        match spec {
            toml::Value::String(s) => d.version = s.clone(),
            toml::Value::Table(t) => {
                let (mut source, mut rest) = (Vec::new(), Vec::new());
                for (k, v) in t {
                    if k == "version" {
                        d.version = flat(v);
                    } else if PY_SOURCE_KEYS.contains(&k.as_str()) {
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

pub(super) fn pipfile(t: &toml::Table) -> Result<Vec<Dep>, String> {
    let mut out = Vec::new();
    for (key, v) in t {
        match key.as_str() {
            "source" => {
                for s in v.as_array().ok_or("`source` is not an array of tables")? {
                    let name = s.get("name").map(flat).unwrap_or_default();
                    out.push(Dep::new("source", &name, &flat(s), ""));
                }
            }
            "requires" | "scripts" | "pipenv" => {}
            // Every other table is a category of packages (`packages`, `dev-packages`, …).
            category => poetry_deps(category, v, &mut out),
        }
    }
    Ok(out)
}

pub(super) fn pipfile_lock(v: &serde_json::Value) -> Result<Vec<Dep>, String> {
    let obj = v.as_object().ok_or("not a JSON object")?;
    let mut out = Vec::new();
    for (key, section) in obj {
        if key == "_meta" {
            for s in section["sources"].as_array().into_iter().flatten() {
                out.push(Dep::new(
                    "source",
                    &json_str(&s["name"]),
                    &s.to_string(),
                    "",
                ));
            }
            continue;
        }
        for (name, spec) in section.as_object().into_iter().flatten() {
            let mut d = Dep::new(key, &py_name(name), "pypi", "");
            let mut source = Vec::new();
            for (k, v) in spec.as_object().into_iter().flatten() {
                if k == "version" {
                    d.version = json_str(v);
                } else if PY_SOURCE_KEYS.contains(&k.as_str()) {
                    source.push(format!("{k} {}", json_str(v)));
                }
            }
            if !source.is_empty() {
                d.source = source.join(", ");
            }
            out.push(d);
        }
    }
    Ok(out)
}

/// setup.cfg's requirement lists (`[options]` install/setup/tests requires, dependency links,
/// `[options.extras_require]`).
pub(super) fn setup_cfg(text: &str) -> Result<Vec<Dep>, String> {
    let mut out = Vec::new();
    let mut section = String::new();
    let mut key = String::new();
    for line in text.lines() {
        if line.trim().is_empty() || line.trim_start().starts_with(['#', ';']) {
            continue;
        }
        let continued = line.starts_with([' ', '\t']);
        let l = line.trim();
        let value = if continued {
            l
        } else if l.starts_with('[') {
            section = l.trim_matches(['[', ']']).trim().to_ascii_lowercase();
            key.clear();
            continue;
        } else {
            let (k, v) = l.split_once(['=', ':']).unwrap_or((l, ""));
            // setuptools reads `install-requires` as `install_requires`, in any letter case.
            key = super::unread::cfg_key(k);
            v.trim()
        };
        let kind = match (section.as_str(), key.as_str()) {
            ("options", k @ ("install_requires" | "setup_requires" | "tests_require")) => {
                k.to_string()
            }
            ("options", "dependency_links") => {
                if !value.is_empty() {
                    out.push(Dep::new("dependency_links", value, value, ""));
                }
                continue;
            }
            ("options.extras_require", k) => format!("extras_require.{k}"),
            _ => continue,
        };
        for item in value
            .split(';')
            .next()
            .into_iter()
            .filter(|v| !v.is_empty())
        {
            out.push(pep508(&kind, item)?);
        }
    }
    Ok(out)
}
