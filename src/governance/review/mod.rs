//! The review panel's pure core: reviewer definitions (`reviewers/<name>.toml`, read from the
//! proposal's base like the policy), the built-in reviewers, typed findings, and the critic that
//! turns findings into one verdict. No IO: the change arrives as plain data (the changed files'
//! text at base and head, the proposal's origin and declared files).
//!
//! The gate (`decision`) weighs the built-in findings and a recorded verdict given to it as a
//! [`PanelInput`]; `panel` (the crate's module) gathers that from git for the gate and for
//! `audit verify`. `answer` reads an agent reviewer's JSON answer and holds the
//! `distinct_family` rule; running agent reviewers is `agent::reviewer`'s (IO).

pub mod answer;
mod code_lines;
pub mod deps;
pub mod inventory;
pub mod key_material;
pub mod secrets;
pub mod surface;
pub mod weakened_tests;
pub mod wiring;

pub use deps::gitlink_text;
use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::{Deserialize, Serialize};

/// How much a finding matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Minor,
    Major,
    Blocking,
}

/// One thing a reviewer found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    pub reviewer: String,
    pub severity: Severity,
    pub category: String,
    pub file: Option<String>,
    pub line: Option<u32>,
    pub message: String,
    /// What would resolve it.
    pub hint: String,
}

/// One changed file: its text at base and at head (`None` where it does not exist; bytes that
/// are not UTF-8 arrive replaced with U+FFFD, never hidden).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileChange {
    pub path: String,
    pub base: Option<String>,
    pub head: Option<String>,
}

impl FileChange {
    pub fn added(&self) -> bool {
        self.base.is_none() && self.head.is_some()
    }
    pub fn removed(&self) -> bool {
        self.base.is_some() && self.head.is_none()
    }
    /// Lines present at head and not at base, with their 1-based line numbers at head (a plain
    /// multiset difference: moved lines count as unchanged).
    pub fn added_lines(&self) -> Vec<(u32, &str)> {
        diff_lines(self.base.as_deref(), self.head.as_deref())
    }
    /// Lines present at base and not at head, with their 1-based line numbers at base.
    pub fn removed_lines(&self) -> Vec<(u32, &str)> {
        diff_lines(self.head.as_deref(), self.base.as_deref())
    }
}

/// Lines of `to` not in `from` (as a multiset), numbered in `to`.
fn diff_lines<'a>(from: Option<&str>, to: Option<&'a str>) -> Vec<(u32, &'a str)> {
    let mut pool: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for l in from.unwrap_or("").lines() {
        *pool.entry(l.trim()).or_default() += 1;
    }
    let mut out = Vec::new();
    for (i, l) in to.unwrap_or("").lines().enumerate() {
        match pool.get_mut(l.trim()) {
            Some(n) if *n > 0 => *n -= 1,
            _ => out.push((i as u32 + 1, l)),
        }
    }
    out
}

/// The change a panel reviews.
#[derive(Debug, Clone, Copy)]
pub struct ChangeView<'a> {
    pub files: &'a [FileChange],
    /// Whether an agent wrote it (a swarm run, the cycle, a patch proposed with `--agent`).
    pub agent_origin: bool,
    /// The files the proposal declared it would change (a swarm run's claims), if it did.
    pub declared: Option<&'a [String]>,
    /// The paths the repository's configuration at base names as judging (its gauntlet steps'
    /// and user-testing scenario's files, what its plans' contract checks run), gathered by
    /// the caller ([`surface::derive`]).
    pub judged: &'a [surface::Judged],
}

/// What a reviewer is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    Builtin(Builtin),
    Agent,
    /// `kind = "tests"`: runs the test suites at base and head and compares what ran
    /// (`inventory`; run by `agent::suites`, its verdict recorded like an agent reviewer's).
    Tests,
}

/// The built-in reviewers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Builtin {
    JudgeTamper,
    TestsTamper,
    Secrets,
    Scope,
    Deps,
    Size,
}

impl Builtin {
    pub const ALL: [(&'static str, Builtin); 6] = [
        ("judge-tamper", Builtin::JudgeTamper),
        ("tests-tamper", Builtin::TestsTamper),
        ("secrets", Builtin::Secrets),
        ("scope", Builtin::Scope),
        ("deps", Builtin::Deps),
        ("size", Builtin::Size),
    ];
}

/// `reviewers/<name>.toml`, as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDef {
    name: String,
    flavour: String,
    kind: String,
    #[serde(default)]
    role: Option<String>,
    #[serde(default)]
    template: Option<String>,
    #[serde(default = "yes")]
    blocking: bool,
    #[serde(default)]
    paths: Vec<String>,
    /// `size`: the most changed lines a change may have.
    #[serde(default)]
    max_lines: Option<usize>,
    /// `judge-tamper`: more paths that judge (globs), besides the ones every repository has.
    #[serde(default)]
    judges: Vec<String>,
    /// `tests`: the most seconds one suite run may take.
    #[serde(default)]
    timeout: Option<u64>,
    /// `tests`: the command that runs each ecosystem's suite (an empty list: not run).
    #[serde(default)]
    rust: Option<Vec<String>>,
    #[serde(default)]
    python: Option<Vec<String>>,
    #[serde(default)]
    javascript: Option<Vec<String>>,
    /// `tests`: also compare test strength with cargo-mutants on the Rust files the change touches.
    #[serde(default)]
    mutants: Option<bool>,
}

fn yes() -> bool {
    true
}

/// A reviewer definition, checked.
#[derive(Debug, Clone)]
pub struct ReviewerDef {
    pub name: String,
    pub flavour: String,
    pub kind: Kind,
    pub role: Option<String>,
    /// Its prompt template's name under `reviewers/templates/`.
    pub template: Option<String>,
    /// Whether its blocking findings can block (otherwise they count as major).
    pub blocking: bool,
    /// Where it applies (every file when empty).
    pub paths: Option<GlobSet>,
    pub max_lines: usize,
    pub judges: Vec<String>,
    /// `tests`: how it runs the suites.
    pub suites: SuiteSettings,
}

/// How a `tests` reviewer runs the suites.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SuiteSettings {
    /// The most seconds one suite run may take (at base or at head).
    pub timeout_secs: u64,
    /// Commands that replace an ecosystem's default (an empty one: that ecosystem is not run).
    pub commands: Vec<(inventory::Ecosystem, Vec<String>)>,
    /// Whether to run cargo-mutants on the Rust files the change touches, at base and at head.
    pub mutants: bool,
}

/// The default time limit of one suite run, in seconds.
pub const DEFAULT_SUITE_TIMEOUT: u64 = 600;

impl Default for SuiteSettings {
    fn default() -> Self {
        SuiteSettings {
            timeout_secs: DEFAULT_SUITE_TIMEOUT,
            commands: Vec::new(),
            mutants: false,
        }
    }
}

/// A reviewer file that cannot be used: which file, which field, why, what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {field}: {reason}")]
pub struct DefError {
    pub file: String,
    pub field: String,
    pub reason: String,
}

/// The most text (bytes of the changed files at base and head together) the built-in reviewers
/// read; a larger change is blocked unread.
pub const MAX_READ_BYTES: usize = 8 * 1024 * 1024;

/// The default largest change (changed lines) the `size` reviewer accepts.
pub const DEFAULT_MAX_LINES: usize = 400;

impl ReviewerDef {
    /// Parses `reviewers/<name>.toml` (`file` is its path, for messages).
    pub fn parse(file: &str, text: &str) -> Result<ReviewerDef, DefError> {
        let err = |field: &str, reason: String| DefError {
            file: file.to_string(),
            field: field.to_string(),
            reason,
        };
        let raw: RawDef = toml::from_str(text).map_err(|e| {
            let msg = e.message().to_string();
            // The field: named by an unknown-field message, or the key on the line the error
            // points at (a value of the wrong type).
            let at_span = e.span().and_then(|s| {
                let start = text[..s.start.min(text.len())]
                    .rfind('\n')
                    .map_or(0, |i| i + 1);
                let line = text[start..].lines().next()?;
                let key = line.split_once('=')?.0.trim();
                (!key.is_empty() && !key.starts_with('#')).then(|| key.to_string())
            });
            let field = msg
                .split('`')
                .nth(1)
                .filter(|_| msg.starts_with("unknown field"))
                .map(str::to_string)
                .or(at_span)
                .unwrap_or_else(|| "(file)".to_string());
            err(
                &field,
                format!("{}; see reviewers/README.md for the fields", msg.trim_end()),
            )
        })?;
        let stem = file
            .rsplit('/')
            .next()
            .and_then(|f| f.strip_suffix(".toml"))
            .unwrap_or(file);
        if raw.name != stem {
            return Err(err(
                "name",
                format!(
                    "is `{}`, but the file is {stem}.toml: name the file after the reviewer",
                    raw.name
                ),
            ));
        }
        let kind = match raw.kind.strip_prefix("builtin:") {
            Some(b) => Kind::Builtin(
                Builtin::ALL
                    .iter()
                    .find(|(n, _)| *n == b)
                    .map(|(_, b)| *b)
                    .ok_or_else(|| {
                        err(
                            "kind",
                            format!(
                                "`{}` is not a built-in reviewer; the built-ins are {}",
                                raw.kind,
                                Builtin::ALL
                                    .iter()
                                    .map(|(n, _)| format!("builtin:{n}"))
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            ),
                        )
                    })?,
            ),
            None if raw.kind == "agent" => Kind::Agent,
            None if raw.kind == "tests" => Kind::Tests,
            None => {
                return Err(err(
                    "kind",
                    format!(
                        "`{}`: expected `builtin:<name>`, `agent` or `tests`",
                        raw.kind
                    ),
                ))
            }
        };
        let suites = suite_settings(&raw, kind == Kind::Tests).map_err(|(f, r)| err(f, r))?;
        if kind == Kind::Agent {
            if raw.role.is_none() {
                return Err(err(
                    "role",
                    "an agent reviewer names the atelier.toml role that runs it".into(),
                ));
            }
            if raw.template.is_none() {
                return Err(err(
                    "template",
                    "an agent reviewer names its prompt template under reviewers/templates/".into(),
                ));
            }
        }
        // The template: a file under reviewers/templates/, named with or without that prefix.
        let template = match raw.template {
            None => None,
            Some(t) => {
                let name = t.strip_prefix("reviewers/templates/").unwrap_or(&t);
                if name.is_empty()
                    || name.starts_with('/')
                    || name
                        .split('/')
                        .any(|c| c.is_empty() || c == "." || c == "..")
                {
                    return Err(err(
                        "template",
                        format!("`{t}`: name a file under reviewers/templates/, e.g. \"adversary.md.j2\""),
                    ));
                }
                Some(name.to_string())
            }
        };
        if raw.flavour.trim().is_empty() || raw.flavour.contains('\n') {
            return Err(err(
                "flavour",
                "the reviewer's perspective, in one sentence".into(),
            ));
        }
        let globs = |field: &str, list: &[String]| -> Result<Option<GlobSet>, DefError> {
            if list.is_empty() {
                return Ok(None);
            }
            let mut b = GlobSetBuilder::new();
            for g in list {
                b.add(Glob::new(g).map_err(|e| err(field, format!("`{g}`: {e}")))?);
            }
            b.build().map(Some).map_err(|e| err(field, e.to_string()))
        };
        let paths = globs("paths", &raw.paths)?;
        globs("judges", &raw.judges)?;
        if raw.max_lines == Some(0) {
            return Err(err("max_lines", "must be at least 1".into()));
        }
        Ok(ReviewerDef {
            name: raw.name,
            flavour: raw.flavour,
            kind,
            role: raw.role,
            template,
            blocking: raw.blocking,
            paths,
            max_lines: raw.max_lines.unwrap_or(DEFAULT_MAX_LINES),
            judges: raw.judges,
            suites,
        })
    }

    fn applies(&self, path: &str) -> bool {
        self.paths.as_ref().is_none_or(|g| g.is_match(path))
    }
}

/// A `tests` reviewer's settings from its file; the fields are refused on any other kind.
fn suite_settings(raw: &RawDef, tests: bool) -> Result<SuiteSettings, (&'static str, String)> {
    use inventory::Ecosystem;
    let given = [
        ("rust", Ecosystem::Rust, &raw.rust),
        ("python", Ecosystem::Python, &raw.python),
        ("javascript", Ecosystem::JavaScript, &raw.javascript),
    ];
    if !tests {
        if raw.mutants.is_some() {
            return Err((
                "mutants",
                "only a `kind = \"tests\"` reviewer has it".into(),
            ));
        }
        if raw.timeout.is_some() {
            return Err((
                "timeout",
                "only a `kind = \"tests\"` reviewer has it".into(),
            ));
        }
        if let Some((field, _, _)) = given.iter().find(|(_, _, c)| c.is_some()) {
            return Err((field, "only a `kind = \"tests\"` reviewer has it".into()));
        }
        return Ok(SuiteSettings::default());
    }
    let timeout_secs = raw.timeout.unwrap_or(DEFAULT_SUITE_TIMEOUT);
    if timeout_secs == 0 {
        return Err(("timeout", "must be at least 1 (seconds)".into()));
    }
    let mut commands = Vec::new();
    for (field, eco, c) in given {
        if let Some(c) = c {
            if c.first().is_some_and(|p| p.trim().is_empty()) {
                return Err((field, "the program's name is empty".into()));
            }
            commands.push((eco, c.clone()));
        }
    }
    Ok(SuiteSettings {
        timeout_secs,
        commands,
        mutants: raw.mutants.unwrap_or(false),
    })
}

/// The panel's verdict, ordered from the mildest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Approve,
    Revise,
    Block,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Approve => "approve",
            Verdict::Revise => "revise",
            Verdict::Block => "block",
        }
    }
}

/// A panel verdict the ledger recorded (`atelier review`), bound to the change it judged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedReview {
    pub base: String,
    pub head: String,
    /// The merge tree it judged (`None`: head did not merge cleanly).
    pub tree: Option<String>,
    /// [`panel_digest`] of the definitions at base.
    pub panel: String,
    pub verdict: Verdict,
    pub findings: Vec<Finding>,
}

/// The panel at a change's base, as the gate needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PanelAtBase {
    /// [`panel_digest`] of its definitions.
    pub digest: String,
    /// Its agent reviewers, by name.
    pub agents: Vec<String>,
}

/// What the gate is told about the review panel, gathered by the caller: the panel at base (or
/// why its definitions cannot be used), the built-in reviewers' findings on the change as it
/// would merge now, and the verdict last recorded for the proposal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PanelInput {
    pub panel: Result<PanelAtBase, String>,
    pub builtin: Vec<Finding>,
    pub recorded: Option<RecordedReview>,
}

impl PanelInput {
    /// A panel of built-in reviewers that found nothing (for callers weighing tokens alone).
    pub fn quiet() -> PanelInput {
        PanelInput {
            panel: Ok(PanelAtBase {
                digest: String::new(),
                agents: Vec::new(),
            }),
            builtin: Vec::new(),
            recorded: None,
        }
    }
}

/// SHA-256 over the panel's definition files (`path NUL length NUL bytes`, sorted by path), hex.
pub fn panel_digest(files: &[(String, String)]) -> String {
    use sha2::{Digest, Sha256};
    let mut sorted: Vec<&(String, String)> = files.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let mut h = Sha256::new();
    for (path, text) in sorted {
        h.update(path.as_bytes());
        h.update([0]);
        h.update(text.len().to_string().as_bytes());
        h.update([0]);
        h.update(text.as_bytes());
    }
    hex::encode(h.finalize())
}

/// Paths that judge a change in every repository: the policy and the panel, CI, and the gate's
/// own configuration; [`surface::BUILTIN`] adds the rest of what decides whether tests pass.
pub const JUDGES: &[&str] = &[
    "policies/**",
    "reviewers/**",
    "GOVERNANCE.md",
    ".ci/**",
    ".github/**",
];

/// Runs every built-in reviewer the panel defines on the change, each on the files it applies
/// to. Agent reviewers are not run here.
pub fn run_builtins(defs: &[ReviewerDef], change: &ChangeView) -> Vec<Finding> {
    // A change larger than the panel reads is refused unread: no reviewer may pass what it did
    // not look at, and no change may make every gate evaluation slow.
    let bytes: usize = change
        .files
        .iter()
        .map(|f| f.base.as_ref().map_or(0, String::len) + f.head.as_ref().map_or(0, String::len))
        .sum();
    if bytes > MAX_READ_BYTES && defs.iter().any(|d| matches!(d.kind, Kind::Builtin(_))) {
        return vec![finding(
            "size",
            Severity::Blocking,
            "size",
            None,
            None,
            format!(
                "the change's files hold {bytes} bytes at base and head, more than the {MAX_READ_BYTES} the built-in reviewers read: it was not reviewed"
            ),
            "split the change, or keep large generated or vendored files out of the repository; the constitution quorum can overrule",
        )];
    }
    let mut out = Vec::new();
    for def in defs {
        let Kind::Builtin(b) = def.kind else { continue };
        let files: Vec<FileChange> = change
            .files
            .iter()
            .filter(|f| def.applies(&f.path))
            .cloned()
            .collect();
        let view = ChangeView {
            files: &files,
            ..*change
        };
        let name = def.name.as_str();
        let mut found = match b {
            Builtin::JudgeTamper => judge_tamper(name, &view, &def.judges),
            Builtin::TestsTamper => weakened_tests::check(name, &view),
            Builtin::Secrets => secrets::check(name, &view),
            Builtin::Scope => scope(name, &view),
            Builtin::Deps => deps(name, &view),
            Builtin::Size => size(name, &view, def.max_lines),
        };
        if !def.blocking {
            for f in &mut found {
                if f.severity == Severity::Blocking {
                    f.severity = Severity::Major;
                }
            }
        }
        out.extend(found);
    }
    out
}

/// The critic: any blocking finding → `block`; else any major one → `revise`; else `approve`.
/// (Findings from non-blocking reviewers were already capped at major.)
pub fn critic(findings: &[Finding]) -> Verdict {
    match findings.iter().map(|f| f.severity).max() {
        Some(Severity::Blocking) => Verdict::Block,
        Some(Severity::Major) => Verdict::Revise,
        _ => Verdict::Approve,
    }
}

pub(crate) fn finding(
    reviewer: &str,
    severity: Severity,
    category: &str,
    file: Option<&str>,
    line: Option<u32>,
    message: String,
    hint: &str,
) -> Finding {
    Finding {
        reviewer: reviewer.to_string(),
        severity,
        category: category.to_string(),
        file: file.map(str::to_string),
        line,
        message,
        hint: hint.to_string(),
    }
}

/// The sections of `atelier.toml` that judge (the gauntlet, the forge, the gate, the cycle's
/// validators); the swarm's tuning (`[conductor]`, `[swarm]`, roles) does not.
const JUDGING_SECTIONS: &[&str] = &[
    "gauntlet",
    "forge",
    "gate",
    "review",
    "governance",
    "validators",
];

/// A glob set matching without regard to ASCII case, as the policy's globs (on macOS
/// `.GitHub/` is `.github/`).
fn case_insensitive(globs: &[String]) -> GlobSet {
    let mut b = GlobSetBuilder::new();
    for g in globs {
        if let Ok(g) = globset::GlobBuilder::new(g)
            .case_insensitive(true)
            .literal_separator(false)
            .build()
        {
            b.add(g);
        }
    }
    b.build().unwrap_or_else(|_| GlobSet::empty())
}

const JUDGE_HINT: &str =
    "an agent may not change what judges it: propose this part as a person, separately";

/// `judge-tamper`: a change an agent wrote that touches anything that judges it: the paths
/// every repository judges with ([`JUDGES`], [`surface::BUILTIN`]), the definition's own
/// `judges`, the paths the configuration at base names ([`ChangeView::judged`]), the judging
/// keys of atelier.toml and of the test runners' manifests ([`surface::keyed_changes`]), and
/// Rust's module wiring (`#[path]`, `include!`, a judged module's declaration changed).
pub fn judge_tamper(reviewer: &str, change: &ChangeView, more: &[String]) -> Vec<Finding> {
    if !change.agent_origin {
        return Vec::new();
    }
    let globs: Vec<String> = JUDGES
        .iter()
        .chain(surface::BUILTIN)
        .map(|s| s.to_string())
        .chain(more.iter().cloned())
        .collect();
    let judges = case_insensitive(&globs);
    let named: Vec<String> = change.judged.iter().map(|j| j.path.clone()).collect();
    let derived = case_insensitive(&named);
    // Why a path judges, when the configuration names it.
    let why = |path: &str| -> Option<&surface::Judged> {
        derived
            .matches(path)
            .first()
            .and_then(|i| change.judged.get(*i))
            .or_else(|| {
                change.judged.iter().find(|j| {
                    crate::governance::paths::stands_for(
                        &derived,
                        std::slice::from_ref(&j.path),
                        path,
                    )
                })
            })
    };
    let judged = |path: &str| judges.is_match(path) || derived.is_match(path);
    let mut out = Vec::new();
    let mut push = |file: &str, line: Option<u32>, message: String, hint: &str| {
        out.push(finding(
            reviewer,
            Severity::Blocking,
            "judge-tamper",
            Some(file),
            line,
            message,
            hint,
        ));
    };
    for f in change.files {
        let mut found = false;
        {
            let mut counted = |file: &str, line: Option<u32>, message: String, hint: &str| {
                found = true;
                push(file, line, message, hint);
            };
            judge_tamper_file(f, &judges, &globs, &why, &judged, &mut counted);
        }
        // What another program runs outside any sandbox (an agent CLI's hooks, `.envrc`, a
        // hook manager's config): the rule swarm workers are held to holds for an agent's patch.
        if !found && f.head.is_some() {
            if let Some(what) = crate::governance::handoff::handed_off(&f.path) {
                push(
                    &f.path,
                    None,
                    format!(
                        "an agent's change writes {}, which {what}: it would run outside any sandbox, with the rights of whoever opens, enters, checks out or pushes the tree",
                        f.path
                    ),
                    "leave files other programs run to a person's proposal",
                );
            }
        }
    }
    out
}

/// The judge-tamper findings of one file `f` of an agent's change.
fn judge_tamper_file<'j>(
    f: &FileChange,
    judges: &globset::GlobSet,
    globs: &[String],
    why: &dyn Fn(&str) -> Option<&'j surface::Judged>,
    judged: &dyn Fn(&str) -> bool,
    push: &mut JudgePush,
) {
    {
        if f.path == "atelier.toml" {
            let touched = judging_sections_changed(f.base.as_deref(), f.head.as_deref());
            if !touched.is_empty() {
                push(
                    &f.path,
                    None,
                    format!(
                        "an agent's change edits atelier.toml's [{}], which judges it",
                        touched.join("], [")
                    ),
                    "leave the gauntlet, forge and gate settings to a person's proposal; an agent may tune [conductor], [swarm] and roles",
                );
            }
        } else if judges.is_match(&f.path)
            || crate::governance::paths::stands_for(judges, globs, &f.path)
        {
            push(
                &f.path,
                None,
                format!(
                    "an agent's change touches {}, which judges the change",
                    f.path
                ),
                JUDGE_HINT,
            );
        } else if let Some(j) = why(&f.path) {
            push(
                &f.path,
                None,
                format!(
                    "an agent's change touches {}, which judges the change: {}",
                    f.path, j.why
                ),
                JUDGE_HINT,
            );
        } else if let Some(dropped) =
            surface::plan_checks_dropped(&f.path, f.base.as_deref(), f.head.as_deref())
        {
            if !dropped.is_empty() {
                push(
                    &f.path,
                    None,
                    format!(
                        "an agent's change takes from the contracts of {}: {}; the checks decide whether the swarm's attempts pass, and the claims what its workers may write",
                        f.path,
                        dropped.join(", ")
                    ),
                    "an agent may add tasks and checks to a plan; dropping or rewriting a check, or widening a task's claims, is a person's proposal",
                );
            }
        } else if let Some(keys) =
            surface::keyed_changes(&f.path, f.base.as_deref(), f.head.as_deref())
        {
            if !keys.is_empty() {
                push(
                    &f.path,
                    None,
                    format!(
                        "an agent's change edits {}'s `{}`, which decide(s) which tests run and how",
                        f.path,
                        keys.join("`, `")
                    ),
                    "leave how the tests are built and run to a person's proposal; an agent may change the rest of the file",
                );
            }
        }
        if f.path.ends_with(".rs") {
            wiring_findings(f, judged, push);
        }
    }
}

/// Records a judge-tamper finding: file, line, message, hint.
type JudgePush<'p> = dyn FnMut(&str, Option<u32>, String, &str) + 'p;

/// Rust module wiring in one file an agent changed (see [`wiring`]).
fn wiring_findings(f: &FileChange, judged: &dyn Fn(&str) -> bool, push: &mut JudgePush) {
    const HINT: &str = "wire modules with a plain `mod name;` beside their file; a module swapped for another file, or compiled out, is a person's call";
    for (line, text) in f.added_lines() {
        if let Some(what) = wiring::rewires(text) {
            push(
                &f.path,
                Some(line),
                format!(
                    "an agent's change rewires a module: {what} (`{}`)",
                    text.trim()
                ),
                HINT,
            );
            continue;
        }
        for inc in wiring::included(&f.path, text) {
            let code = |p: &str| {
                let ext = p.rsplit_once('.').map_or("", |(_, e)| e);
                matches!(ext, "rs" | "py" | "js" | "ts" | "sh")
            };
            match inc {
                Ok(p) if judged(&p) || code(&p) => push(
                    &f.path,
                    Some(line),
                    format!("an agent's change includes {p} into {}: code or a judge read in place", f.path),
                    HINT,
                ),
                Ok(_) => {}
                Err(arg) => push(
                    &f.path,
                    Some(line),
                    format!("an agent's change includes a file named by `{arg}`, which the panel cannot resolve"),
                    HINT,
                ),
            }
        }
    }
    let before = wiring::decls(f.base.as_deref().unwrap_or(""));
    let after = wiring::decls(f.head.as_deref().unwrap_or(""));
    for d in before.iter().filter(|d| d.file) {
        let Some(target) = wiring::targets(&f.path, &d.name)
            .into_iter()
            .find(|t| judged(t))
        else {
            continue;
        };
        let message = match after.iter().find(|h| h.name == d.name) {
            None => format!(
                "an agent's change stops compiling the judged module `{}` ({target}): its declaration is gone from {}",
                d.name, f.path
            ),
            Some(h) if !h.file => format!(
                "an agent's change replaces the judged module `{}` ({target}) with an inline module",
                d.name
            ),
            Some(h) if h.attrs != d.attrs => format!(
                "an agent's change changes the attributes on the judged module `{}` ({target}): `{}` became `{}`",
                d.name,
                if d.attrs.is_empty() { "(none)" } else { &d.attrs },
                if h.attrs.is_empty() { "(none)" } else { &h.attrs }
            ),
            Some(_) => continue,
        };
        let line = after.iter().find(|h| h.name == d.name).map(|h| h.line);
        push(&f.path, line, message, HINT);
    }
}

/// The judging sections whose contents differ between two `atelier.toml` texts (a file that
/// does not parse counts as every section changed).
fn judging_sections_changed(base: Option<&str>, head: Option<&str>) -> Vec<String> {
    let parse = |t: Option<&str>| t.map(|t| t.parse::<toml::Table>());
    match (parse(base), parse(head)) {
        (Some(Ok(b)), Some(Ok(h))) => JUDGING_SECTIONS
            .iter()
            .filter(|s| b.get(**s) != h.get(**s))
            .map(|s| s.to_string())
            .collect(),
        (None, None) => Vec::new(),
        _ => JUDGING_SECTIONS.iter().map(|s| s.to_string()).collect(),
    }
}

/// `scope`: files changed outside what the proposal declared.
pub fn scope(reviewer: &str, change: &ChangeView) -> Vec<Finding> {
    let Some(declared) = change.declared else {
        return Vec::new();
    };
    let mut b = GlobSetBuilder::new();
    for d in declared {
        if let Ok(g) = Glob::new(d) {
            b.add(g);
        }
    }
    let set = b.build().unwrap_or_else(|_| GlobSet::empty());
    change
        .files
        .iter()
        .filter(|f| !set.is_match(&f.path) && !f.path.starts_with("proposals/"))
        .map(|f| {
            finding(
                reviewer,
                Severity::Major,
                "scope",
                Some(&f.path),
                None,
                format!("{} changes outside the files the proposal declared", f.path),
                "declare the file in the task's claims, or leave it out of this change",
            )
        })
        .collect()
}

/// `deps`: what the change adds to what the package managers would install ([`deps`]).
pub fn deps(reviewer: &str, change: &ChangeView) -> Vec<Finding> {
    self::deps::check(reviewer, change)
}

/// `size`: a change too large to review well.
pub fn size(reviewer: &str, change: &ChangeView, max_lines: usize) -> Vec<Finding> {
    let changed: usize = change
        .files
        .iter()
        .map(|f| f.added_lines().len() + f.removed_lines().len())
        .sum();
    if changed <= max_lines {
        return Vec::new();
    }
    vec![finding(
        reviewer,
        Severity::Major,
        "size",
        None,
        None,
        format!("{changed} changed lines, more than the {max_lines} a reviewer can check well"),
        "split the change into proposals a person can review in one sitting",
    )]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(path: &str, base: Option<&str>, head: Option<&str>) -> FileChange {
        FileChange {
            path: path.into(),
            base: base.map(str::to_string),
            head: head.map(str::to_string),
        }
    }

    fn def(text: &str) -> Result<ReviewerDef, DefError> {
        ReviewerDef::parse("reviewers/x.toml", text)
    }

    #[test]
    fn a_change_larger_than_the_panel_reads_is_blocked_unread() {
        let defs = vec![ReviewerDef::parse(
            "reviewers/secrets.toml",
            "name = \"secrets\"\nflavour = \"f\"\nkind = \"builtin:secrets\"\n",
        )
        .expect("def")];
        let big = "x".repeat(MAX_READ_BYTES / 2 + 1);
        let files = vec![change("vendor/a.txt", Some(&big), Some(&format!("{big}y")))];
        let view = ChangeView {
            files: &files,
            agent_origin: false,
            declared: None,
            judged: &[],
        };
        let found = run_builtins(&defs, &view);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].severity, Severity::Blocking);
        assert!(
            found[0].message.contains("not reviewed")
                || found[0].message.contains("was not reviewed")
        );
        assert_eq!(critic(&found), Verdict::Block);
        // Just under the limit, it is read as usual.
        let small = "x".repeat(1000);
        let files = vec![change("vendor/a.txt", Some(&small), Some(&small))];
        let view = ChangeView {
            files: &files,
            ..view
        };
        assert!(run_builtins(&defs, &view).is_empty());
    }

    #[test]
    fn definitions_are_strict() {
        let ok =
            "name = \"x\"\nflavour = \"Looks for tampering.\"\nkind = \"builtin:judge-tamper\"\n";
        assert!(def(ok).is_ok());
        let cases: &[(&str, &str)] = &[
            (
                "name = \"x\"\nflavour = \"f\"\nkind = \"builtin:nope\"\n",
                "kind",
            ),
            ("name = \"x\"\nflavour = \"f\"\nkind = \"weird\"\n", "kind"),
            (
                "name = \"y\"\nflavour = \"f\"\nkind = \"builtin:size\"\n",
                "name",
            ),
            (
                "name = \"x\"\nflavour = \"f\"\nkind = \"agent\"\ntemplate = \"t.j2\"\n",
                "role",
            ),
            (
                "name = \"x\"\nflavour = \"f\"\nkind = \"agent\"\nrole = \"r\"\n",
                "template",
            ),
            (
                "name = \"x\"\nflavour = \"f\"\nkind = \"builtin:size\"\ncolour = 1\n",
                "colour",
            ),
            (
                "name = \"x\"\nflavour = \"\"\nkind = \"builtin:size\"\n",
                "flavour",
            ),
            (
                "name = \"x\"\nflavour = \"f\"\nkind = \"builtin:size\"\npaths = [\"[\"]\n",
                "paths",
            ),
            (
                "name = \"x\"\nflavour = \"f\"\nkind = \"builtin:size\"\nmax_lines = 0\n",
                "max_lines",
            ),
        ];
        for (text, field) in cases {
            let e = def(text).expect_err(text);
            assert_eq!(&e.field, field, "{text}: {e}");
            assert!(e.file == "reviewers/x.toml", "{e}");
        }
    }

    #[test]
    fn a_tests_reviewer_takes_a_time_limit_and_commands_and_no_other_kind_does() {
        let d = def("name = \"x\"\nflavour = \"f\"\nkind = \"tests\"\ntimeout = 30\npython = [\"python3\", \"-m\", \"pytest\"]\njavascript = []\n")
            .expect("a tests reviewer");
        assert_eq!(d.kind, Kind::Tests);
        assert_eq!(d.suites.timeout_secs, 30);
        assert_eq!(
            d.suites.commands,
            vec![
                (
                    inventory::Ecosystem::Python,
                    vec!["python3".to_string(), "-m".into(), "pytest".into()]
                ),
                (inventory::Ecosystem::JavaScript, vec![]),
            ]
        );
        let d = def("name = \"x\"\nflavour = \"f\"\nkind = \"tests\"\n").expect("defaults");
        assert_eq!(d.suites, SuiteSettings::default());
        for (text, field) in [
            ("kind = \"tests\"\ntimeout = 0\n", "timeout"),
            ("kind = \"tests\"\nrust = [\"\"]\n", "rust"),
            ("kind = \"builtin:size\"\ntimeout = 5\n", "timeout"),
            ("kind = \"builtin:size\"\nmutants = true\n", "mutants"),
            (
                "kind = \"agent\"\nrole = \"r\"\ntemplate = \"t.j2\"\nrust = [\"cargo\"]\n",
                "rust",
            ),
        ] {
            let e = def(&format!("name = \"x\"\nflavour = \"f\"\n{text}")).expect_err(text);
            assert_eq!(e.field, field, "{text}: {e}");
        }
    }

    #[test]
    fn judge_tamper_blocks_an_agent_touching_what_judges_it() {
        let files = [
            change("policies/governance.toml", Some("a"), Some("b")),
            change("src/lib.rs", Some("a"), Some("b")),
            change(
                "atelier.toml",
                Some("[gauntlet]\nsteps = [\"cargo test\"]\n[swarm]\nmax_parallel = 2\n"),
                Some("[gauntlet]\nsteps = []\n[swarm]\nmax_parallel = 4\n"),
            ),
        ];
        let agent = ChangeView {
            files: &files,
            agent_origin: true,
            declared: None,
            judged: &[],
        };
        let found = judge_tamper("j", &agent, &["src/governance/**".into()]);
        let paths: Vec<_> = found.iter().filter_map(|f| f.file.as_deref()).collect();
        assert_eq!(paths, ["policies/governance.toml", "atelier.toml"]);
        assert!(
            found[1].message.contains("[gauntlet]"),
            "{}",
            found[1].message
        );
        assert!(found.iter().all(|f| f.severity == Severity::Blocking));
        // Tuning the swarm only is fine.
        let tuning = [change(
            "atelier.toml",
            Some("[gauntlet]\nsteps = [\"t\"]\n[swarm]\nmax_parallel = 2\n"),
            Some("[gauntlet]\nsteps = [\"t\"]\n[swarm]\nmax_parallel = 4\n"),
        )];
        let view = ChangeView {
            files: &tuning,
            ..agent
        };
        assert!(judge_tamper("j", &view, &[]).is_empty());
        // A link standing for a judging folder, and a judging path in another letter case.
        let links = [
            change(".ci", None, Some("tools/ci")),
            change(".GitHub/workflows/ci.yml", None, Some("on: push\n")),
            change("src/governance", None, Some("../lib/gov")),
            change("docs/ci.md", None, Some("text\n")),
        ];
        let view = ChangeView {
            files: &links,
            ..agent
        };
        let found = judge_tamper("j", &view, &["src/governance/**".into()]);
        let paths: Vec<_> = found.iter().filter_map(|f| f.file.as_deref()).collect();
        assert_eq!(paths, [".ci", ".GitHub/workflows/ci.yml", "src/governance"]);
        // A person's change is not this reviewer's business.
        let person = ChangeView {
            agent_origin: false,
            ..agent
        };
        assert!(judge_tamper("j", &person, &[]).is_empty());
        // The definition's own judges count too.
        let code = [change("src/governance/decision.rs", Some("a"), Some("b"))];
        let view = ChangeView {
            files: &code,
            ..agent
        };
        assert_eq!(
            judge_tamper("j", &view, &["src/governance/**".into()]).len(),
            1
        );
    }

    /// Issue 25: what decides whether tests pass judges an agent's change, in every
    /// repository, and what the configuration at base names judges too.
    #[test]
    fn the_judge_surface_by_what_it_is() {
        let judged = vec![surface::Judged {
            path: "scripts/check.sh".into(),
            why: "the gauntlet step `check` (`sh scripts/check.sh`) runs or reads it".into(),
        }];
        let lib = "pub mod audit;\npub mod governance;\npub mod swarm;\n";
        // (what, files, the paths with a finding, a word of the first finding)
        type Case = (
            &'static str,
            Vec<FileChange>,
            Vec<&'static str>,
            &'static str,
        );
        let cases: Vec<Case> = vec![
            (
                "pytest's configuration under its other names",
                vec![
                    change(
                        ".pytest.ini",
                        None,
                        Some("[pytest]\naddopts = --collect-only\n"),
                    ),
                    change(
                        "pytest.toml",
                        None,
                        Some("[pytest]\naddopts = [\"--co\"]\n"),
                    ),
                ],
                vec![".pytest.ini", "pytest.toml"],
                "",
            ),
            (
                "a program on npm's PATH and compiled bytecode",
                vec![
                    change(
                        "web/node_modules/.bin/node",
                        None,
                        Some("#!/bin/sh\nexit 0\n"),
                    ),
                    change(
                        "tests/__pycache__/helpers.cpython-311.pyc",
                        None,
                        Some("\u{fffd}"),
                    ),
                ],
                vec![
                    "web/node_modules/.bin/node",
                    "tests/__pycache__/helpers.cpython-311.pyc",
                ],
                "",
            ),
            (
                "conftest deselecting",
                vec![change(
                    "conftest.py",
                    None,
                    Some("def pytest_collection_modifyitems(items):\n    items.clear()\n"),
                )],
                vec!["conftest.py"],
                "judges the change",
            ),
            (
                "nested conftest",
                vec![change(
                    "tests/unit/conftest.py",
                    Some("import pytest\n"),
                    Some("import pytest\ncollect_ignore = ['.']\n"),
                )],
                vec!["tests/unit/conftest.py"],
                "",
            ),
            (
                "pytest.ini -k",
                vec![change(
                    "pytest.ini",
                    Some("[pytest]\naddopts = -q\n"),
                    Some("[pytest]\naddopts = -q -k nothing\n"),
                )],
                vec!["pytest.ini"],
                "",
            ),
            (
                "jest config",
                vec![change(
                    "web/jest.config.js",
                    None,
                    Some("module.exports = { testPathIgnorePatterns: ['.*'] };\n"),
                )],
                vec!["web/jest.config.js"],
                "",
            ),
            (
                "cargo runner",
                vec![change(
                    ".cargo/config.toml",
                    None,
                    Some("[target.x86_64-unknown-linux-gnu]\nrunner = \"true\"\n"),
                )],
                vec![".cargo/config.toml"],
                "",
            ),
            (
                "a mission",
                vec![change(
                    "missions/easy.toml",
                    None,
                    Some("[mission]\nid = \"easy\"\n"),
                )],
                vec!["missions/easy.toml"],
                "",
            ),
            (
                "GitLab CI",
                vec![change(
                    ".gitlab-ci.yml",
                    Some("test:\n  script: cargo test\n"),
                    Some("test:\n  script: 'true'\n"),
                )],
                vec![".gitlab-ci.yml"],
                "",
            ),
            (
                "a build script edited",
                vec![change(
                    "build.rs",
                    Some("fn main() {}\n"),
                    Some("fn main() { println!(\"cargo:rustc-cfg=skip\"); }\n"),
                )],
                vec!["build.rs"],
                "",
            ),
            (
                "package.json test script",
                vec![change(
                    "package.json",
                    Some("{\"name\": \"a\", \"scripts\": {\"test\": \"jest\"}}\n"),
                    Some("{\"name\": \"a\", \"scripts\": {\"test\": \"exit 0\"}}\n"),
                )],
                vec!["package.json"],
                "`scripts`",
            ),
            (
                "package.json jest key",
                vec![change(
                    "package.json",
                    Some("{\"jest\": {}}\n"),
                    Some("{\"jest\": {\"testMatch\": []}}\n"),
                )],
                vec!["package.json"],
                "`jest`",
            ),
            (
                "package.json description (benign)",
                vec![change(
                    "package.json",
                    Some("{\"name\": \"a\"}\n"),
                    Some("{\"name\": \"a\", \"description\": \"b\"}\n"),
                )],
                vec![],
                "",
            ),
            (
                "Cargo.toml lib test = false",
                vec![change(
                    "Cargo.toml",
                    Some("[package]\nname = \"a\"\n"),
                    Some("[package]\nname = \"a\"\n\n[lib]\ntest = false\n"),
                )],
                vec!["Cargo.toml"],
                "`lib`",
            ),
            (
                "pyproject pytest options",
                vec![change(
                    "pyproject.toml",
                    Some("[tool.pytest.ini_options]\naddopts = \"-q\"\n"),
                    Some("[tool.pytest.ini_options]\naddopts = \"-q --deselect tests\"\n"),
                )],
                vec!["pyproject.toml"],
                "`tool.pytest`",
            ),
            (
                "a script the gauntlet runs",
                vec![change(
                    "scripts/check.sh",
                    Some("cargo test\n"),
                    Some("exit 0\n"),
                )],
                vec!["scripts/check.sh"],
                "the gauntlet step `check`",
            ),
            (
                "another script (benign)",
                vec![change("scripts/release.sh", Some("a\n"), Some("b\n"))],
                vec![],
                "",
            ),
            (
                "a link standing for the script's folder",
                vec![change("scripts", None, Some("elsewhere"))],
                vec!["scripts"],
                "",
            ),
            (
                "#[path] swaps a judged module",
                vec![change(
                    "src/lib.rs",
                    Some(lib),
                    Some(&lib.replace(
                        "pub mod governance;",
                        "#[path = \"gov/mod.rs\"]\npub mod governance;",
                    )),
                )],
                vec!["src/lib.rs", "src/lib.rs"],
                "rewires a module",
            ),
            (
                "#[path] anywhere",
                vec![change(
                    "src/swarm/mod.rs",
                    Some("pub mod plan;\n"),
                    Some("pub mod plan;\n#[path = \"../bench_fake.rs\"]\npub mod bench;\n"),
                )],
                vec!["src/swarm/mod.rs"],
                "`#[path = …]`",
            ),
            (
                "a judged module compiled out",
                vec![change(
                    "src/lib.rs",
                    Some(lib),
                    Some(&lib.replace("pub mod governance;", "#[cfg(any())]\npub mod governance;")),
                )],
                vec!["src/lib.rs"],
                "changes the attributes on the judged module `governance`",
            ),
            (
                "a judged module's declaration removed",
                vec![change(
                    "src/lib.rs",
                    Some(lib),
                    Some(&lib.replace("pub mod governance;\n", "")),
                )],
                vec!["src/lib.rs"],
                "stops compiling the judged module",
            ),
            (
                "a judged module made inline",
                vec![change(
                    "src/lib.rs",
                    Some(lib),
                    Some(&lib.replace(
                        "pub mod governance;",
                        "pub mod governance {\n    pub use crate::audit::*;\n}",
                    )),
                )],
                vec!["src/lib.rs"],
                "inline module",
            ),
            (
                "include! of code",
                vec![change(
                    "src/a.rs",
                    Some("fn a() {}\n"),
                    Some("fn a() {}\ninclude!(\"gen.rs\");\n"),
                )],
                vec!["src/a.rs"],
                "`include!(…)`",
            ),
            (
                "include_str! of a judge",
                vec![change(
                    "src/a.rs",
                    Some("fn a() {}\n"),
                    Some("const P: &str = include_str!(\"../scripts/check.sh\");\n"),
                )],
                vec!["src/a.rs"],
                "includes scripts/check.sh",
            ),
            (
                "a new module and a data file (benign)",
                vec![change(
                    "src/lib.rs",
                    Some(lib),
                    Some(&format!(
                        "{lib}pub mod backoff;\nconst T: &str = include_str!(\"t.txt\");\n"
                    )),
                )],
                vec![],
                "",
            ),
        ];
        let mut failures = Vec::new();
        for (what, files, want, word) in &cases {
            let view = ChangeView {
                files,
                agent_origin: true,
                declared: None,
                judged: &judged,
            };
            let found = judge_tamper("j", &view, &["src/governance/**".into()]);
            let paths: Vec<&str> = found.iter().filter_map(|f| f.file.as_deref()).collect();
            let ok = paths == *want
                && found.first().is_none_or(|f| f.message.contains(word))
                && found
                    .iter()
                    .all(|f| f.severity == Severity::Blocking && f.category == "judge-tamper");
            if !ok {
                failures.push(format!(
                    "{what}: {:#?}",
                    found
                        .iter()
                        .map(|f| format!("{:?}:{:?} {}", f.file, f.line, f.message))
                        .collect::<Vec<_>>()
                ));
            }
            // A person's change is not this reviewer's business.
            let person = ChangeView {
                agent_origin: false,
                ..view
            };
            assert!(judge_tamper("j", &person, &[]).is_empty(), "{what}");
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    #[test]
    fn deps_size_scope_and_the_critic() {
        let files = [
            change(
                "Cargo.toml",
                Some("[dependencies]\nserde = \"1\"\n"),
                Some("[dependencies]\nserde = \"1\"\nleftpad = \"0.1\"\n"),
            ),
            change("build.rs", None, Some("fn main() {}\n")),
            change("src/a.rs", Some(""), Some(&"x\n".repeat(450))),
        ];
        let declared = vec!["src/**".to_string()];
        let view = ChangeView {
            files: &files,
            agent_origin: false,
            declared: Some(&declared),
            judged: &[],
        };
        let d = deps("deps", &view);
        assert_eq!(d.len(), 2);
        assert!(
            d[0].message.contains("leftpad = \"0.1\""),
            "{}",
            d[0].message
        );
        assert_eq!(size("size", &view, 400).len(), 1);
        assert!(size("size", &view, 1000).is_empty());
        let s = scope("scope", &view);
        let outside: Vec<_> = s.iter().filter_map(|f| f.file.as_deref()).collect();
        assert_eq!(outside, ["Cargo.toml", "build.rs"]);
        assert_eq!(critic(&[]), Verdict::Approve);
        assert_eq!(critic(&d), Verdict::Revise);
        let mut blocked = d.clone();
        blocked[0].severity = Severity::Blocking;
        assert_eq!(critic(&blocked), Verdict::Block);
    }

    #[test]
    fn an_agent_s_new_dependency_or_build_script_blocks() {
        let files = [
            change(
                "Cargo.toml",
                Some("[dependencies]\nserde = \"1\"\n"),
                Some("[dependencies]\nserde = \"1\"\nleftpad = \"0.1\"\n"),
            ),
            change("build.rs", None, Some("fn main() {}\n")),
            change(
                "web/package.json",
                Some("{\"dependencies\": {\n\"a\": \"1\"\n}}\n"),
                Some("{\"dependencies\": {\n}}\n"),
            ),
        ];
        let agent = ChangeView {
            files: &files,
            agent_origin: true,
            declared: None,
            judged: &[],
        };
        let d = deps("deps", &agent);
        let severities: Vec<_> = d.iter().map(|f| f.severity).collect();
        // Removing a dependency only is minor: nothing new is installed.
        assert_eq!(
            severities,
            [Severity::Blocking, Severity::Blocking, Severity::Minor],
            "{d:#?}"
        );
        assert!(d[0].hint.contains("as a person"), "{}", d[0].hint);
        assert_eq!(critic(&d), Verdict::Block);
    }

    #[test]
    fn a_non_blocking_reviewer_cannot_block() {
        let d = ReviewerDef::parse(
            "reviewers/j.toml",
            "name = \"j\"\nflavour = \"f\"\nkind = \"builtin:judge-tamper\"\nblocking = false\n",
        )
        .expect("def");
        let files = [change("policies/governance.toml", Some("a"), Some("b"))];
        let view = ChangeView {
            files: &files,
            agent_origin: true,
            declared: None,
            judged: &[],
        };
        let found = run_builtins(&[d], &view);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].severity, Severity::Major);
        assert_eq!(critic(&found), Verdict::Revise);
    }
}
