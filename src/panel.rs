//! The review panel as git holds it: the definitions at a proposal's base (`reviewers/*.toml`,
//! or the default panel), the changed files' text, and the plain [`PanelInput`] the gate weighs.
//! Shared by the gate (`workflow`) and by `audit verify`, which re-runs the built-in reviewers at
//! every merge exactly as the gate did.

use git2::{Oid, Repository, Tree};

use crate::git::{self, GitError};
use crate::governance::review::{
    self, surface, ChangeView, FileChange, Kind, PanelAtBase, PanelInput, RecordedReview,
    ReviewerDef,
};

/// The panel every repository has when its base carries no `reviewers/*.toml`, and the files
/// `atelier init` installs for it: Atelier's own `reviewers/*.toml` where Atelier uses the
/// default as it is, and `src/defaults/reviewers/` where Atelier's own file adds to it (its
/// judge paths, an explicit size limit; `tests/own_repository.rs` holds them to that).
pub const DEFAULT_PANEL: &[(&str, &str)] = &[
    (
        "reviewers/judge-tamper.toml",
        include_str!("defaults/reviewers/judge-tamper.toml"),
    ),
    (
        "reviewers/tests-tamper.toml",
        include_str!("../reviewers/tests-tamper.toml"),
    ),
    (
        "reviewers/secrets.toml",
        include_str!("../reviewers/secrets.toml"),
    ),
    (
        "reviewers/scope.toml",
        include_str!("../reviewers/scope.toml"),
    ),
    (
        "reviewers/deps.toml",
        include_str!("../reviewers/deps.toml"),
    ),
    (
        "reviewers/size.toml",
        include_str!("defaults/reviewers/size.toml"),
    ),
];

/// The panel at one commit: its definition files and what they define, or why they cannot be
/// used (the gate fails closed on that).
pub struct Panel {
    pub files: Vec<(String, String)>,
    pub defs: Result<Vec<ReviewerDef>, String>,
    digest: String,
}

impl Panel {
    /// [`review::panel_digest`] of its files.
    pub fn digest(&self) -> String {
        self.digest.clone()
    }

    /// The reviewers whose verdict only a recording carries — agent reviewers and `tests`
    /// reviewers, which run programs — by name (none when the definitions cannot be used).
    pub fn agents(&self) -> Vec<&ReviewerDef> {
        self.defs
            .as_ref()
            .map(|d| {
                d.iter()
                    .filter(|d| matches!(d.kind, Kind::Agent | Kind::Tests))
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// The panel defined in `tree` (a proposal's base): `reviewers/*.toml`, or [`DEFAULT_PANEL`]
/// when none of them defines a reviewer.
pub fn at(repo: &Repository, tree: &Tree<'_>) -> Result<Panel, GitError> {
    let mut files: Vec<(String, String)> = Vec::new();
    let mut problems: Vec<String> = Vec::new();
    if let Some(entry) = tree.get_name("reviewers") {
        // Anything but a folder (a file, a symlink, a submodule) is no panel: fail closed
        // rather than fall back to the default one.
        if entry.kind() != Some(git2::ObjectType::Tree) {
            problems.push(
                "reviewers: not a folder (a file, a symlink or a submodule stands where the panel's folder should be)"
                    .to_string(),
            );
        } else if let Ok(dir) = entry.to_object(repo).and_then(|o| o.peel_to_tree()) {
            for e in dir.iter() {
                let Some(name) = e.name().filter(|n| n.ends_with(".toml")) else {
                    continue;
                };
                let path = format!("reviewers/{name}");
                let Some(bytes) = git::read_file(repo, tree, &path)? else {
                    problems.push(format!("{path}: not a file"));
                    continue;
                };
                match String::from_utf8(bytes) {
                    Ok(text) => files.push((path, text)),
                    Err(_) => problems.push(format!("{path}: not UTF-8 text")),
                }
            }
        }
    }
    // No reviewer switched on (no folder, or only commented-out files): the default panel.
    if files.iter().all(|(_, t)| is_disabled(t)) && problems.is_empty() {
        files.extend(
            DEFAULT_PANEL
                .iter()
                .map(|(p, t)| (p.to_string(), t.to_string())),
        );
    }
    let defs = if problems.is_empty() {
        files
            .iter()
            .filter(|(_, t)| !is_disabled(t))
            .map(|(p, t)| ReviewerDef::parse(p, t).map_err(|e| e.to_string()))
            .collect()
    } else {
        Err(problems.join("; "))
    };
    let digest = review::panel_digest(&files);
    Ok(Panel {
        files,
        defs,
        digest,
    })
}

/// A definition file of comments and blank lines only: a reviewer switched off (`init` ships the
/// agent reviewer so, for the default panel to run offline).
pub fn is_disabled(text: &str) -> bool {
    text.lines()
        .map(str::trim)
        .all(|l| l.is_empty() || l.starts_with('#'))
}

/// The files that differ between two trees, with their text on each side (`None` where absent;
/// a submodule as [`review::gitlink_text`]). Bytes that are not UTF-8 are replaced with U+FFFD rather than hidden: a
/// reviewer sees every file's text, whatever its encoding or its name's.
pub fn changed_files(
    repo: &Repository,
    from: &Tree<'_>,
    to: &Tree<'_>,
) -> Result<Vec<FileChange>, GitError> {
    files_of(repo, &git::changed_entries(repo, from, to)?)
}

/// The text on each side of changed entries, read by blob id (see [`changed_files`]). A
/// submodule (gitlink) side reads as [`review::gitlink_text`] of its commit, so that reviewers
/// see a submodule added or moved, not a file that vanished.
pub fn files_of(
    repo: &Repository,
    entries: &[git::ChangedEntry],
) -> Result<Vec<FileChange>, GitError> {
    let text = |blob: Option<Oid>, link: Option<Oid>| -> Result<Option<String>, GitError> {
        Ok(match (blob, link) {
            (Some(id), _) => {
                Some(String::from_utf8_lossy(repo.find_blob(id)?.content()).into_owned())
            }
            (None, Some(commit)) => Some(review::gitlink_text(&commit.to_string())),
            (None, None) => None,
        })
    };
    entries
        .iter()
        .map(|c| {
            Ok(FileChange {
                base: text(c.old, c.old_gitlink)?,
                head: text(c.new, c.new_gitlink)?,
                path: c.path.clone(),
            })
        })
        .collect()
}

/// The change a panel reviews: what merging `head` into `base` would change (the merge tree
/// against base), or with a conflict, what head changes since the merge base (since nothing,
/// when the two have no history in common: every file of head is then the change).
pub fn change_files(
    repo: &Repository,
    base: Oid,
    head: Oid,
    merge_tree: Option<Oid>,
) -> Result<Vec<FileChange>, GitError> {
    let base_tree = repo.find_commit(base)?.tree()?;
    match merge_tree {
        Some(t) => changed_files(repo, &base_tree, &repo.find_tree(t)?),
        None => changed_files(
            repo,
            &git::since_tree(repo, base, head)?,
            &repo.find_commit(head)?.tree()?,
        ),
    }
}

/// Facts about a proposal the built-in reviewers weigh, from the ledger.
#[derive(Debug, Clone, Default)]
pub struct Provenance {
    /// Who wrote it, when an agent did.
    pub origin: Option<String>,
    /// The files it declared it would change (a swarm run's claims).
    pub declared: Option<Vec<String>>,
}

/// The id of the `reviewers` tree in `tree` (`None` without one): two bases with the same id
/// have the same panel.
pub fn key(tree: &Tree<'_>) -> Option<Oid> {
    tree.get_name("reviewers").map(|e| e.id())
}

/// The largest file [`surface`] reads to follow a script into what it runs.
const MAX_SCRIPT_BYTES: usize = 256 * 1024;

/// The judge surface `tree` (a proposal's base) names: what its atelier.toml's `[gauntlet]`
/// steps and `[validators.user_testing]` build and scenario name or run, and what the contract
/// checks of its plans under `plans/` run, with the scripts among them followed
/// ([`surface::derive`]). Read from the base like the panel, so a proposal cannot unname what
/// judges it; a new gauntlet step's script is a judge the day the step is added. A file
/// `files` adds that a module resolver would load in place of one at base judges too
/// ([`surface::shadow`]).
pub fn surface(
    repo: &Repository,
    tree: &Tree<'_>,
    files: &[FileChange],
) -> Result<Vec<surface::Judged>, GitError> {
    let text = |path: &str| -> Result<Option<String>, GitError> {
        Ok(git::read_file(repo, tree, path)?
            .filter(|b| b.len() <= MAX_SCRIPT_BYTES)
            .map(|b| String::from_utf8_lossy(&b).into_owned()))
    };
    let config = text(crate::config::FILE)?;
    let mut plans = Vec::new();
    if let Some(entry) = tree.get_name("plans") {
        if let Ok(dir) = entry.to_object(repo).and_then(|o| o.peel_to_tree()) {
            let mut walk: Vec<(String, git2::Tree<'_>, usize)> = vec![("plans".into(), dir, 0)];
            while let Some((prefix, dir, depth)) = walk.pop() {
                for e in dir.iter() {
                    let Some(name) = e.name() else { continue };
                    let path = format!("{prefix}/{name}");
                    match e.kind() {
                        Some(git2::ObjectType::Tree) if depth < 2 => {
                            if let Ok(t) = e.to_object(repo).and_then(|o| o.peel_to_tree()) {
                                walk.push((path, t, depth + 1));
                            }
                        }
                        Some(git2::ObjectType::Blob) if name.ends_with(".toml") => {
                            if let Some(t) = text(&path)? {
                                plans.push((path, t));
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
    }
    plans.sort();
    let commands = surface::commands(config.as_deref(), &plans);
    // A file that cannot be read is not followed (the path itself still judges).
    let lookup = |path: &str| text(path).ok().flatten();
    let mut judged = if commands.is_empty() {
        Vec::new()
    } else {
        surface::derive(&commands, &lookup)
    };
    let exists = |path: &str| tree.get_path(std::path::Path::new(path)).is_ok();
    for f in files.iter().filter(|f| f.added()) {
        if let Some(why) = surface::shadow::shadowing(&f.path, &exists) {
            if !judged.iter().any(|j| j.path == f.path) {
                judged.push(surface::Judged {
                    path: f.path.clone(),
                    why,
                });
            }
        }
    }
    Ok(judged)
}

/// What the gate weighs of `panel` for a change of `files` (pure: the built-ins run here), with
/// the judge surface the base names ([`surface`]).
pub fn weigh(
    panel: &Panel,
    judged: &[surface::Judged],
    files: &[FileChange],
    provenance: &Provenance,
    recorded: Option<RecordedReview>,
) -> PanelInput {
    let builtin = match &panel.defs {
        Ok(defs) => review::run_builtins(
            defs,
            &ChangeView {
                files,
                agent_origin: provenance.origin.is_some(),
                declared: provenance.declared.as_deref(),
                judged,
            },
        ),
        Err(_) => Vec::new(),
    };
    PanelInput {
        panel: panel
            .defs
            .as_ref()
            .map_err(Clone::clone)
            .map(|_| PanelAtBase {
                digest: panel.digest(),
                agents: panel.agents().iter().map(|d| d.name.clone()).collect(),
            }),
        builtin,
        recorded,
    }
}

/// Everything the gate needs about the panel for one change, and the panel itself.
pub fn input(
    repo: &Repository,
    base: Oid,
    head: Oid,
    merge_tree: Option<Oid>,
    provenance: &Provenance,
    recorded: Option<RecordedReview>,
) -> Result<(PanelInput, Panel, Vec<FileChange>), GitError> {
    let base_tree = repo.find_commit(base)?.tree()?;
    let panel = at(repo, &base_tree)?;
    let files = change_files(repo, base, head, merge_tree)?;
    let judged = surface(repo, &base_tree, &files)?;
    let input = weigh(&panel, &judged, &files, provenance, recorded);
    Ok((input, panel, files))
}
