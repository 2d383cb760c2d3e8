//! The git edge: everything Atelier reads from or writes to a repository goes through git2 here
//! (policy files at a commit, merge trees, changed paths, commits and the compare-and-swap that
//! moves a branch). Two exceptions run the user's own `git`: `git_cli` talks to remotes (their
//! credentials and configuration: fetch, push, ls-remote), and `apply_patch` is `git apply`, so
//! a proposed patch applies exactly as the tool that made it would apply it.

use std::path::{Path, PathBuf};

use git2::{Commit, ObjectType, Oid, Repository, Tree};
use thiserror::Error;

use crate::errors::{Classify, Kind};
use crate::governance::policy::{
    PolicyFiles, ALLOWED_SIGNERS_PATH, GATE_KEY_PATH, GOVERNANCE_PATH,
};

#[derive(Debug, Error)]
pub enum GitError {
    #[error("{dir} is not inside a git repository: run `git init` there first, or pass -C <repo>")]
    NotARepo { dir: String },
    #[error("branch `{branch}` does not exist: commit something to it first (atelier protects an existing branch)")]
    NoBranch { branch: String },
    #[error("git: {0}")]
    Git(#[from] git2::Error),
    #[error("running git (is it installed and on PATH?): {0}")]
    NoGit(std::io::Error),
    #[error("`git {args}` failed: {stderr}")]
    Cli { args: String, stderr: String },
    /// A file the branch holds is not text Atelier reads: a link, a submodule, a folder, or not
    /// UTF-8; the message names it and what to do.
    #[error("{0}")]
    NotText(String),
}

impl Classify for GitError {
    fn kind(&self) -> Kind {
        match self {
            GitError::NotARepo { .. } | GitError::NoBranch { .. } | GitError::NotText(_) => {
                Kind::Input
            }
            GitError::Git(_) | GitError::NoGit(_) | GitError::Cli { .. } => Kind::Environment,
        }
    }
}

pub fn open(dir: &Path) -> Result<Repository, GitError> {
    Repository::discover(dir).map_err(|_| GitError::NotARepo {
        dir: dir.display().to_string(),
    })
}

/// The commit a local branch points at.
pub fn branch_tip(repo: &Repository, branch: &str) -> Result<Oid, GitError> {
    match repo.find_reference(&format!("refs/heads/{branch}")) {
        Ok(r) => Ok(r.peel_to_commit()?.id()),
        Err(e) if e.code() == git2::ErrorCode::NotFound => Err(GitError::NoBranch {
            branch: branch.into(),
        }),
        Err(e) => Err(e.into()),
    }
}

/// The bytes of the blob at `path` in `tree`, if it is a file there.
pub fn read_file(
    repo: &Repository,
    tree: &Tree<'_>,
    path: &str,
) -> Result<Option<Vec<u8>>, GitError> {
    match tree.get_path(Path::new(path)) {
        Ok(entry) if entry.kind() == Some(ObjectType::Blob) => {
            Ok(Some(repo.find_blob(entry.id())?.content().to_vec()))
        }
        Ok(_) => Ok(None),
        Err(e) if e.code() == git2::ErrorCode::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// What stands on a path in a tree where [`read_file`] cannot follow it as a checkout would.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotAFile {
    /// A symbolic link, with the target git keeps as its text: [`read_file`] reads that target
    /// as the file's bytes, and finds nothing under a linked folder.
    Link { target: String },
    /// A submodule (a gitlink: the tree holds a commit id, a checkout another repository's
    /// files): [`read_file`] finds nothing there or under it.
    Submodule,
}

/// The first link or submodule on `path` in `tree` (the path up to it, and which), if any.
pub fn not_a_file_on_path(
    repo: &Repository,
    tree: &Tree<'_>,
    path: &str,
) -> Result<Option<(String, NotAFile)>, GitError> {
    let mut at = String::new();
    for part in path.split('/') {
        if !at.is_empty() {
            at.push('/');
        }
        at.push_str(part);
        match tree.get_path(Path::new(&at)) {
            Ok(entry) if entry.filemode() == 0o120000 => {
                let target = repo.find_blob(entry.id())?;
                let target = String::from_utf8_lossy(target.content()).into_owned();
                return Ok(Some((at, NotAFile::Link { target })));
            }
            Ok(entry) if entry.filemode() == 0o160000 => {
                return Ok(Some((at, NotAFile::Submodule)))
            }
            Ok(entry) if entry.kind() == Some(ObjectType::Tree) => {}
            Ok(_) => return Ok(None),
            Err(e) if e.code() == git2::ErrorCode::NotFound => return Ok(None),
            Err(e) => return Err(e.into()),
        }
    }
    Ok(None)
}

/// A text file (a prompt template, the lessons) as the protected branch's `tree` holds it at
/// `path` (`None`: absent). Text only, and never through a symbolic link: git keeps a link's
/// target path as its text, and what a checkout would find behind it is the working tree's (or
/// anyone's), so a link on the way is refused, naming it, rather than read or skipped; so are a
/// submodule, a folder and bytes that are not UTF-8 ([`GitError::NotText`]).
pub fn text_on_branch(
    repo: &Repository,
    tree: &Tree<'_>,
    path: &str,
    branch: &str,
) -> Result<Option<String>, GitError> {
    match not_a_file_on_path(repo, tree, path)? {
        Some((link, NotAFile::Link { target })) => {
            return Err(GitError::NotText(format!(
                "{link} on {branch} is a symbolic link (to `{target}`): {path} is read as the branch holds it, never through a link; commit the file itself in its place with a proposal"
            )))
        }
        Some((at, NotAFile::Submodule)) => {
            return Err(GitError::NotText(format!(
                "{at} on {branch} is a submodule: {path} is read as the branch holds it, never from another repository; commit the file itself in its place with a proposal"
            )))
        }
        None => {}
    }
    if tree
        .get_path(Path::new(path))
        .is_ok_and(|e| e.kind() == Some(ObjectType::Tree))
    {
        return Err(GitError::NotText(format!(
            "{path} on {branch} is a folder, not a file; commit the file itself in its place with a proposal"
        )));
    }
    match read_file(repo, tree, path)? {
        Some(b) => String::from_utf8(b).map(Some).map_err(|_| {
            GitError::NotText(format!(
                "{path} on {branch}: not UTF-8 text; fix it with a proposal"
            ))
        }),
        None => Ok(None),
    }
}

/// The three policy files in `tree`.
pub fn policy_files(repo: &Repository, tree: &Tree<'_>) -> Result<PolicyFiles, GitError> {
    Ok(PolicyFiles {
        governance: read_file(repo, tree, GOVERNANCE_PATH)?,
        allowed_signers: read_file(repo, tree, ALLOWED_SIGNERS_PATH)?,
        gate_key: read_file(repo, tree, GATE_KEY_PATH)?,
    })
}

/// Every file the policy digest covers (policies/, reviewers/, GOVERNANCE.md) in `tree`.
pub fn digest_files(
    repo: &Repository,
    tree: &Tree<'_>,
) -> Result<Vec<(String, Vec<u8>)>, GitError> {
    let mut out = Vec::new();
    for dir in ["policies", "reviewers"] {
        let Ok(entry) = tree.get_path(Path::new(dir)) else {
            continue;
        };
        if entry.kind() != Some(ObjectType::Tree) {
            continue;
        }
        let sub = repo.find_tree(entry.id())?;
        let mut err = None;
        sub.walk(git2::TreeWalkMode::PreOrder, |prefix, e| {
            if e.kind() == Some(ObjectType::Blob) {
                let path = format!("{dir}/{prefix}{}", e.name().unwrap_or(""));
                match repo.find_blob(e.id()) {
                    Ok(b) => out.push((path, b.content().to_vec())),
                    Err(x) => {
                        err = Some(x);
                        return git2::TreeWalkResult::Abort;
                    }
                }
            }
            git2::TreeWalkResult::Ok
        })?;
        if let Some(e) = err {
            return Err(e.into());
        }
    }
    if let Some(bytes) = read_file(repo, tree, "GOVERNANCE.md")? {
        out.push(("GOVERNANCE.md".into(), bytes));
    }
    Ok(out)
}

/// The tree of merging `head` into `base`, or a description of the conflicts. The merge is
/// made on the repository's objects alone: a `merge=union` (or `binary`) attribute kept in the
/// clone (`.git/info/attributes`, an uncommitted `.gitattributes` in the checkout, the clone's
/// `core.attributesFile`) would otherwise change what lands for everyone, unseen by the
/// approvers, GitHub and audit, which merge the same commits without it.
pub fn merge_tree(
    repo: &Repository,
    base: Oid,
    head: Oid,
) -> Result<Result<Oid, String>, GitError> {
    let objects = Repository::from_odb(repo.odb()?)?;
    let repo = &objects;
    let base_c = repo.find_commit(base)?;
    let head_c = repo.find_commit(head)?;
    let mut index = repo.merge_commits(&base_c, &head_c, None)?;
    if index.has_conflicts() {
        let mut paths = Vec::new();
        for c in index.conflicts()? {
            let c = c?;
            let entry = c.our.or(c.their).or(c.ancestor);
            if let Some(e) = entry {
                paths.push(String::from_utf8_lossy(&e.path).into_owned());
            }
        }
        return Ok(Err(format!("conflicts in {}", paths.join(", "))));
    }
    Ok(Ok(index.write_tree_to(repo)?))
}

/// The newest commit on `from`'s first-parent history (`from` included) that `ledgered` names,
/// if one is within the last 10 000: the last commit the gate vouches for.
pub fn last_ledgered(
    repo: &Repository,
    from: Oid,
    ledgered: &dyn Fn(&str) -> bool,
) -> Result<Option<Oid>, GitError> {
    let mut at = repo.find_commit(from)?;
    for _ in 0..10_000 {
        if ledgered(&at.id().to_string()) {
            return Ok(Some(at.id()));
        }
        match at.parent(0) {
            Ok(p) => at = p,
            Err(_) => return Ok(None),
        }
    }
    Ok(None)
}

/// The policy a change on `base` is judged by, and the policy files commits outside the gate
/// changed: when commits the gate did not merge (pushed straight to the branch) changed the
/// policy since the last commit it vouches for (`ledgered`), that commit's policy files, and the
/// paths that differ, which the change then counts as its own (a constitutional change, judged
/// by the policy before them). Otherwise `base`'s own, and none.
pub fn judging_policy(
    repo: &Repository,
    base: Oid,
    ledgered: &dyn Fn(&str) -> bool,
) -> Result<(PolicyFiles, Vec<String>), GitError> {
    let base_files = policy_files(repo, &repo.find_commit(base)?.tree()?)?;
    let Some(trusted) = last_ledgered(repo, base, ledgered)?.filter(|t| *t != base) else {
        return Ok((base_files, Vec::new()));
    };
    let trusted_files = policy_files(repo, &repo.find_commit(trusted)?.tree()?)?;
    let mut bypassed = Vec::new();
    if trusted_files.governance != base_files.governance {
        bypassed.push(GOVERNANCE_PATH.to_string());
    }
    if trusted_files.allowed_signers != base_files.allowed_signers {
        bypassed.push(ALLOWED_SIGNERS_PATH.to_string());
    }
    if trusted_files.gate_key != base_files.gate_key {
        bypassed.push(GATE_KEY_PATH.to_string());
    }
    if bypassed.is_empty() {
        return Ok((base_files, bypassed));
    }
    Ok((trusted_files, bypassed))
}

/// How many merge bases `a` and `b` have (0 when they share no history). More than one is a
/// criss-cross: merging uses a virtual base made of all of them, while a diff from any one of
/// them (GitHub's, `git diff a...b`) can show a different change from the one that lands.
pub fn merge_bases(repo: &Repository, a: Oid, b: Oid) -> Result<usize, GitError> {
    match repo.merge_bases(a, b) {
        Ok(bases) => Ok(bases.len()),
        Err(e) if e.code() == git2::ErrorCode::NotFound => Ok(0),
        Err(e) => Err(e.into()),
    }
}

/// What `head` changed is judged against, when it does not merge into `base` cleanly: the tree
/// of their merge base, or the empty tree when they have no history in common.
pub fn since_tree(repo: &Repository, base: Oid, head: Oid) -> Result<Tree<'_>, GitError> {
    match repo.merge_base(base, head) {
        Ok(mb) => Ok(repo.find_commit(mb)?.tree()?),
        Err(e) if e.code() == git2::ErrorCode::NotFound => {
            Ok(repo.find_tree(repo.treebuilder(None)?.write()?)?)
        }
        Err(e) => Err(e.into()),
    }
}

/// Makes `repo` keep every object it writes from now on in memory, never in `.git`: for what
/// only shows (the dashboard), which computes merge trees but must write nothing.
pub fn writes_in_memory(repo: &Repository) -> Result<(), GitError> {
    repo.odb()?.add_new_mempack_backend(1000)?;
    Ok(())
}

/// Paths that differ between two trees (both sides of renames, mode changes included), found by
/// descending only into subtrees whose ids differ.
pub fn changed_paths(
    repo: &Repository,
    old: &Tree<'_>,
    new: &Tree<'_>,
) -> Result<Vec<String>, GitError> {
    Ok(changed_entries(repo, old, new)?
        .into_iter()
        .map(|c| c.path)
        .collect())
}

/// A path that differs between two trees, with the blob it holds on each side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangedEntry {
    /// The path (a name that is not UTF-8 is shown with U+FFFD; read the blobs by id).
    pub path: String,
    /// The blob at the path in the old tree (`None`: absent, or a submodule there).
    pub old: Option<Oid>,
    /// The blob at the path in the new tree (`None`: absent, or a submodule there).
    pub new: Option<Oid>,
    /// The commit a submodule (gitlink) at the path names in the old tree.
    pub old_gitlink: Option<Oid>,
    /// The commit a submodule (gitlink) at the path names in the new tree.
    pub new_gitlink: Option<Oid>,
}

/// [`changed_paths`], with the blobs on each side, sorted by path.
pub fn changed_entries(
    repo: &Repository,
    old: &Tree<'_>,
    new: &Tree<'_>,
) -> Result<Vec<ChangedEntry>, GitError> {
    let mut out = Vec::new();
    diff_trees(repo, Some(old), Some(new), "", &mut out)?;
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

type Entries = std::collections::BTreeMap<Vec<u8>, (Oid, i32, bool)>;

fn entries(tree: Option<&Tree<'_>>) -> Entries {
    tree.map(|t| {
        t.iter()
            .map(|e| {
                (
                    e.name_bytes().to_vec(),
                    (e.id(), e.filemode(), e.kind() == Some(ObjectType::Tree)),
                )
            })
            .collect()
    })
    .unwrap_or_default()
}

/// The mode of a submodule (a commit, not a blob) in a tree.
const GITLINK: i32 = 0o160000;

fn diff_trees(
    repo: &Repository,
    a: Option<&Tree<'_>>,
    b: Option<&Tree<'_>>,
    prefix: &str,
    out: &mut Vec<ChangedEntry>,
) -> Result<(), GitError> {
    let (ea, eb) = (entries(a), entries(b));
    let names: std::collections::BTreeSet<&Vec<u8>> = ea.keys().chain(eb.keys()).collect();
    for name in names {
        let path = format!("{prefix}{}", String::from_utf8_lossy(name));
        let (x, y) = (ea.get(name), eb.get(name));
        if let (Some(x), Some(y)) = (x, y) {
            if x.0 == y.0 && x.1 == y.1 {
                continue;
            }
        }
        let sub = |e: Option<&(Oid, i32, bool)>| -> Result<Option<Tree<'_>>, GitError> {
            match e {
                Some((id, _, true)) => Ok(Some(repo.find_tree(*id)?)),
                _ => Ok(None),
            }
        };
        let (ta, tb) = (sub(x)?, sub(y)?);
        if ta.is_some() || tb.is_some() {
            diff_trees(repo, ta.as_ref(), tb.as_ref(), &format!("{path}/"), out)?;
        }
        let blob_a = x.is_some_and(|e| !e.2);
        let blob_b = y.is_some_and(|e| !e.2);
        if blob_a || blob_b {
            let blob =
                |e: Option<&(Oid, i32, bool)>| e.filter(|e| !e.2 && e.1 != GITLINK).map(|e| e.0);
            let link = |e: Option<&(Oid, i32, bool)>| e.filter(|e| e.1 == GITLINK).map(|e| e.0);
            out.push(ChangedEntry {
                path,
                old: blob(x),
                new: blob(y),
                old_gitlink: link(x),
                new_gitlink: link(y),
            });
        }
    }
    Ok(())
}

/// Why a patch was refused.
#[derive(Debug, Error)]
pub enum PatchError {
    #[error("{file}: not a patch git can read ({reason}); produce it with `git diff` or `git format-patch`")]
    Unreadable { file: String, reason: String },
    #[error("{file} does not apply to {branch} at {tip}, as `git apply` judges it: {reason}; rebase the change onto {branch} and make the patch again")]
    DoesNotApply {
        file: String,
        branch: String,
        tip: String,
        reason: String,
    },
    #[error("{file} is already applied on {branch} at {tip} (its changes are there: `git apply --reverse --check` takes them back); nothing proposed: there is nothing left to change")]
    AlreadyApplied {
        file: String,
        branch: String,
        tip: String,
    },
    #[error("{file} asks git to write where it will not ({reason}): a path inside `.git`, outside the repository or through a symbolic link; nothing proposed: leave that path out of the patch")]
    Forbidden { file: String, reason: String },
    #[error("{file}: holds no change git can read (it is empty, or has no `diff --git` or `---`/`+++` headers); nothing proposed: make the patch with `git diff` or `git format-patch`")]
    Empty { file: String },
    #[error("git: {0}")]
    Git(#[from] git2::Error),
    #[error("{0}")]
    Cli(#[from] GitError),
}

impl Classify for PatchError {
    fn kind(&self) -> Kind {
        match self {
            PatchError::Git(_) | PatchError::Cli(_) => Kind::Environment,
            _ => Kind::Input,
        }
    }
}

/// How a patch was applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// The new tree.
    pub tree: Oid,
    /// What `git apply` said about how (a hunk found at an offset, a three-way merge), one
    /// line each; empty when every hunk applied where the patch put it.
    pub notes: Vec<String>,
}

/// Applies a patch to `base`'s tree exactly as `git apply` does, because it is `git apply`, run on
/// an index of its own (the working tree and the clone's index are not touched): a hunk found a
/// few lines away applies there, and none applies with less context than it has (no fuzz). When
/// it does not apply and its `index` lines name blobs the repository holds, a three-way merge
/// from them (`git apply --3way`); a conflict refuses it. A patch whose changes are already on
/// the branch is refused as such.
pub fn apply_patch(
    repo: &Repository,
    base: &Commit<'_>,
    patch: &[u8],
    file: &str,
    branch: &str,
) -> Result<Applied, PatchError> {
    let scratch = tempfile::tempdir().map_err(|e| GitError::Cli {
        args: "apply".into(),
        stderr: format!("a temporary index: {e}"),
    })?;
    // git's work tree is an empty folder of its own: `--3way` looks at (and may write) the work
    // tree's copy of a file the patch creates, and the clone's checkout is the user's.
    let root = scratch.path().join("worktree");
    std::fs::create_dir(&root).map_err(|e| GitError::Cli {
        args: "apply".into(),
        stderr: format!("an empty work tree: {e}"),
    })?;
    let root = (repo.path(), root.as_path());
    let base_tree = base.tree()?.id().to_string();
    let mut n = 0;
    // `git apply` on a fresh index holding the base tree: whether it applied, its stdout and
    // stderr, and the index.
    let mut apply = |args: &[&str]| -> Result<(bool, Vec<u8>, String, PathBuf), PatchError> {
        n += 1;
        let index = scratch.path().join(format!("index{n}"));
        let read_tree = git_apply_cli(root, &index, &base_tree, &["read-tree", &base_tree], b"")?;
        if !read_tree.0 {
            return Err(GitError::Cli {
                args: format!("read-tree {base_tree}"),
                stderr: read_tree.2,
            }
            .into());
        }
        let mut full = vec!["apply", "--cached"];
        full.extend_from_slice(args);
        full.push("-");
        let (ok, out, err) = git_apply_cli(root, &index, &base_tree, &full, patch)?;
        Ok((ok, out, err, index))
    };
    // What the patch touches: git's own reading of it.
    let (read, numstat, why, _) = apply(&["--numstat"])?;
    if !read {
        let reason = first_error(&why, patch);
        // Only when git's one complaint is that it found no patch: a corrupt binary hunk
        // alongside it is the reason worth telling.
        if reason.starts_with("No valid patches") && !reason.contains("; ") {
            return Err(PatchError::Empty { file: file.into() });
        }
        return Err(PatchError::Unreadable {
            file: file.into(),
            reason,
        });
    }
    if numstat.is_empty() {
        return Err(PatchError::Empty { file: file.into() });
    }
    let tip = base.id().to_string();
    let written = |index: &Path| -> Result<Oid, PatchError> {
        let (ok, out, why) = git_apply_cli(root, index, &base_tree, &["write-tree"], b"")?;
        let text = String::from_utf8_lossy(&out);
        match (ok, Oid::from_str(text.trim())) {
            (true, Ok(id)) => Ok(id),
            _ => Err(GitError::Cli {
                args: "write-tree".into(),
                stderr: why,
            }
            .into()),
        }
    };
    // Applied where the patch puts its hunks (or a few lines away), without a merge.
    let (ok, _, said, index) = apply(&["--verbose"])?;
    let plain = if ok {
        let notes = said
            .lines()
            .filter(|l| l.contains(" succeeded at "))
            .map(|l| l.trim().to_string())
            .collect::<Vec<_>>();
        Some((written(&index)?, notes))
    } else {
        None
    };
    let refused = first_error(&said, patch);
    if let Some(e) = plain
        .is_none()
        .then(|| beyond_rebase(file, &refused))
        .flatten()
    {
        return Err(e);
    }
    if plain.is_none() && apply(&["--reverse", "--check"])?.0 {
        return Err(PatchError::AlreadyApplied {
            file: file.into(),
            branch: branch.into(),
            tip,
        });
    }
    let names_blobs = String::from_utf8_lossy(patch)
        .lines()
        .any(|l| l.starts_with("index ") && l.contains(".."));
    // `git apply --3way` merges first when the blobs the patch names are here, and applies
    // directly only when they are not: a hunk whose context also appears elsewhere lands where
    // the merge puts it, not at the first place that matches.
    if names_blobs {
        let (ok, _, said, index) = apply(&["--3way"])?;
        if ok {
            let tree = written(&index)?;
            if tree == base.tree()?.id() {
                return Err(PatchError::AlreadyApplied {
                    file: file.into(),
                    branch: branch.into(),
                    tip,
                });
            }
            let notes = match plain {
                Some((t, notes)) if t == tree => notes,
                _ => vec![format!(
                    "{branch} moved since the patch was made: applied by a three-way merge from the blobs its `index` lines name (`git apply --3way`)"
                )],
            };
            return Ok(Applied { tree, notes });
        }
        let conflicts: Vec<&str> = said.lines().filter_map(|l| l.strip_prefix("U ")).collect();
        if !conflicts.is_empty() {
            let merge = format!(
                "a three-way merge from the blobs its `index` lines name conflicts in {}",
                conflicts.join(", ")
            );
            return Err(PatchError::DoesNotApply {
                file: file.into(),
                branch: branch.into(),
                tip,
                reason: if plain.is_some() {
                    merge
                } else {
                    format!("{refused}, and {merge}")
                },
            });
        }
    }
    if let Some((tree, notes)) = plain {
        return Ok(Applied { tree, notes });
    }
    Err(PatchError::DoesNotApply {
        file: file.into(),
        branch: branch.into(),
        tip,
        reason: refused,
    })
}

/// A refusal of git's that no rebase cures: it will not write the path, or cannot read a hunk.
fn beyond_rebase(file: &str, refused: &str) -> Option<PatchError> {
    let (file, reason) = (file.to_string(), refused.to_string());
    if refused.contains("invalid path") || refused.contains("beyond a symbolic link") {
        Some(PatchError::Forbidden { file, reason })
    } else if refused.contains("patch with only garbage") || refused.contains("corrupt patch") {
        Some(PatchError::Unreadable { file, reason })
    } else {
        None
    }
}

/// The `error:` lines git printed, joined; its whole stderr when it printed none.
fn first_error(stderr: &str, patch: &[u8]) -> String {
    // After "while searching for:" git echoes each failed hunk's context: the patch's own text,
    // which may itself read `error: …`. A line that is a context or removed line of the patch is
    // never taken for git's reason (at worst a patch hides a line of git's, never adds one).
    let text = String::from_utf8_lossy(patch);
    let echoes: std::collections::HashSet<&str> = text
        .lines()
        .filter(|l| l.starts_with(' ') || (l.starts_with('-') && !l.starts_with("---")))
        .map(|l| &l[1..])
        .collect();
    let errors: Vec<&str> = stderr
        .lines()
        .filter(|l| !echoes.contains(l))
        .filter_map(|l| l.strip_prefix("error: "))
        .map(str::trim)
        .filter(|l| *l != "while searching for:")
        .collect();
    if errors.is_empty() {
        stderr.trim().to_string()
    } else {
        errors.join("; ")
    }
}

/// `git` with `index` as its index and `input` on stdin, configured as the gate runs it (no
/// hook, no file monitor), with whitespace taken as the patch has it whatever the clone's
/// configuration says, and `.gitattributes` read from the tree `attr_source` (the base), never
/// from the working tree, so uncommitted files cannot pick a merge driver or change the result:
/// whether it succeeded, its stdout and its stderr.
fn git_apply_cli(
    (git_dir, work_tree): (&Path, &Path),
    index: &Path,
    attr_source: &str,
    args: &[&str],
    input: &[u8],
) -> Result<(bool, Vec<u8>, String), GitError> {
    use std::io::Write as _;
    let mut child = std::process::Command::new("git")
        .current_dir(work_tree)
        .env("GIT_DIR", git_dir)
        .env("GIT_WORK_TREE", work_tree)
        .env("GIT_INDEX_FILE", index)
        .env("GIT_ATTR_SOURCE", attr_source)
        .args([
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "core.fsmonitor=false",
            "-c",
            "apply.whitespace=nowarn",
        ])
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(GitError::NoGit)?;
    let mut stdin = child.stdin.take().expect("piped");
    let input = input.to_vec();
    // Written on a thread of its own, so a patch larger than a pipe cannot block on git's output.
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().map_err(GitError::NoGit)?;
    let _ = writer.join();
    Ok((
        out.status.success(),
        out.stdout,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

/// A signature for commits Atelier makes: the repository's configured identity, or Atelier's.
pub fn signature(repo: &Repository, when: i64) -> Result<git2::Signature<'static>, GitError> {
    let time = git2::Time::new(when, 0);
    let (name, email) = match repo.signature() {
        Ok(s) => (
            s.name().unwrap_or("atelier").to_string(),
            s.email().unwrap_or("atelier@localhost").to_string(),
        ),
        Err(_) => ("atelier".to_string(), "atelier@localhost".to_string()),
    };
    Ok(git2::Signature::new(&name, &email, &time)?)
}

/// Adds or replaces one file in a tree, creating intermediate directories.
pub fn tree_with_file(
    repo: &Repository,
    tree: &Tree<'_>,
    path: &str,
    bytes: &[u8],
) -> Result<Oid, GitError> {
    let blob = repo.blob(bytes)?;
    let mut parts: Vec<&str> = path.split('/').collect();
    let name = parts.pop().expect("split always yields one part");
    insert(repo, Some(tree), &parts, name, blob)
}

fn insert(
    repo: &Repository,
    tree: Option<&Tree<'_>>,
    dirs: &[&str],
    name: &str,
    blob: Oid,
) -> Result<Oid, GitError> {
    let mut builder = repo.treebuilder(tree)?;
    match dirs.split_first() {
        None => {
            builder.insert(name, blob, 0o100644)?;
        }
        Some((first, rest)) => {
            let sub = match tree.and_then(|t| t.get_name(first)) {
                Some(e) if e.kind() == Some(ObjectType::Tree) => Some(repo.find_tree(e.id())?),
                _ => None,
            };
            let id = insert(repo, sub.as_ref(), rest, name, blob)?;
            builder.insert(first, id, 0o040000)?;
        }
    }
    Ok(builder.write()?)
}

/// Moves `refs/heads/<branch>` from `expected` to `new` atomically, failing if it moved.
pub fn compare_and_swap(
    repo: &Repository,
    refname: &str,
    expected: Oid,
    new: Oid,
    message: &str,
) -> Result<bool, GitError> {
    match repo.reference_matching(refname, new, true, expected, message) {
        Ok(_) => Ok(true),
        Err(e)
            if matches!(
                e.code(),
                git2::ErrorCode::Modified | git2::ErrorCode::Locked | git2::ErrorCode::NotFound
            ) =>
        {
            Ok(false)
        }
        Err(e) => Err(e.into()),
    }
}

/// A unified diff (as `git diff` prints it) that turns `base`'s tree into one with `edits`
/// applied (path, new content).
pub fn patch_for(
    repo: &Repository,
    base: &Tree<'_>,
    edits: &[(&str, &str)],
) -> Result<Vec<u8>, GitError> {
    let mut tree_id = base.id();
    for (path, text) in edits {
        let tree = repo.find_tree(tree_id)?;
        tree_id = tree_with_file(repo, &tree, path, text.as_bytes())?;
    }
    let new = repo.find_tree(tree_id)?;
    diff_text(repo, base, &new)
}

/// The unified diff between two trees, as `git diff` prints it (a patch git2 can apply).
pub fn diff_text(repo: &Repository, old: &Tree<'_>, new: &Tree<'_>) -> Result<Vec<u8>, GitError> {
    let diff = repo.diff_tree_to_tree(Some(old), Some(new), None)?;
    let mut out = Vec::new();
    diff.print(git2::DiffFormat::Patch, |_, _, line| {
        if matches!(line.origin(), '+' | '-' | ' ') {
            out.push(line.origin() as u8);
        }
        out.extend_from_slice(line.content());
        true
    })?;
    Ok(out)
}

/// Adds a worktree at `path` on a new branch `branch` starting at `at`.
pub fn add_worktree(
    repo: &Repository,
    name: &str,
    path: &Path,
    branch: &str,
    at: Oid,
) -> Result<(), GitError> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| git2::Error::from_str(&format!("creating {}: {e}", parent.display())))?;
    }
    let commit = repo.find_commit(at)?;
    let reference = repo.branch(branch, &commit, true)?.into_reference();
    let mut opts = git2::WorktreeAddOptions::new();
    opts.reference(Some(&reference));
    repo.worktree(name, path, Some(&opts))?;
    Ok(())
}

/// Removes a worktree's files and its administrative entry.
pub fn remove_worktree(repo: &Repository, name: &str, path: &Path) -> Result<(), GitError> {
    // Only the paths the caller computed are removed, never one read from the administrative
    // entry (a worker can rewrite it, or lock it), and links are removed, never followed.
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() || m.is_file() => {
            let _ = std::fs::remove_file(path);
        }
        Ok(_) => {
            let _ = std::fs::remove_dir_all(path);
        }
        Err(_) => {}
    }
    let admin = repo.commondir().join("worktrees").join(name);
    if admin.exists() {
        std::fs::remove_dir_all(&admin)
            .map_err(|e| git2::Error::from_str(&format!("removing {}: {e}", admin.display())))?;
    }
    Ok(())
}

/// The tree a worker left in an attempt's worktree, relative to the commit the attempt started
/// from, and the paths that differ. The worktree is opened through the repository's own
/// administrative entry (never through the `.git` file inside it, which the worker controls),
/// compared with `at` directly (never with the worktree's HEAD or index, which the worker can
/// move), and the tree is built from the files as they are now, in a conductor-owned object.
pub fn snapshot(common: &Path, root: &Path, at: Oid) -> Result<(Oid, Vec<String>), GitError> {
    let repo = Repository::open(common)?;
    // The files are read from the directory the conductor created, never from a path recorded in
    // the worktree's administrative entry (which a worker can rewrite).
    let wt_repo = Repository::open(common)?;
    wt_repo.set_workdir(root, false)?;
    let root = root.to_path_buf();
    let base = repo.find_commit(at)?.tree()?;
    let mut opts = git2::DiffOptions::new();
    opts.include_untracked(true)
        .recurse_untracked_dirs(true)
        .include_typechange(true);
    let diff = wt_repo.diff_tree_to_workdir(Some(&base), Some(&mut opts))?;
    let mut paths = std::collections::BTreeSet::new();
    for d in diff.deltas() {
        for f in [d.old_file(), d.new_file()] {
            if let Some(p) = f.path() {
                paths.insert(p.to_string_lossy().into_owned());
            }
        }
    }
    let mut tree = base.id();
    for p in &paths {
        if p.ends_with('/') {
            return Err(git2::Error::from_str(&format!(
                "{p} is a nested git repository; workers may not create repositories or submodules"
            ))
            .into());
        }
        let full = root.join(p);
        // A path reached through a link in one of its directories is not in the worktree.
        let mut through_link = false;
        let mut dir = root.clone();
        for part in p.split('/').take(p.split('/').count() - 1) {
            dir.push(part);
            if std::fs::symlink_metadata(&dir)
                .map(|m| m.file_type().is_symlink())
                .unwrap_or(false)
            {
                through_link = true;
                break;
            }
        }
        let meta = if through_link {
            Err(std::io::Error::other("behind a link"))
        } else {
            std::fs::symlink_metadata(&full)
        };
        if let Ok(m) = &meta {
            if m.is_file() && m.len() > MAX_FILE {
                return Err(git2::Error::from_str(&format!(
                    "{p} is {} bytes; files over {MAX_FILE} bytes are refused",
                    m.len()
                ))
                .into());
            }
        }
        let entry = match meta {
            Err(_) => None,
            Ok(m) if m.file_type().is_symlink() => {
                let target = std::fs::read_link(&full)
                    .map_err(|e| git2::Error::from_str(&format!("reading link {p}: {e}")))?;
                Some((repo.blob(target.to_string_lossy().as_bytes())?, 0o120000))
            }
            Ok(m) if m.is_file() => {
                use std::os::unix::fs::PermissionsExt;
                let bytes = std::fs::read(&full)
                    .map_err(|e| git2::Error::from_str(&format!("reading {p}: {e}")))?;
                let mode = if m.permissions().mode() & 0o111 != 0 {
                    0o100755
                } else {
                    0o100644
                };
                Some((repo.blob(&bytes)?, mode))
            }
            Ok(_) => {
                return Err(git2::Error::from_str(&format!(
                    "{p} is neither a file nor a symbolic link"
                ))
                .into())
            }
        };
        let current = repo.find_tree(tree)?;
        let mut parts: Vec<&str> = p.split('/').collect();
        let file = parts.pop().expect("split always yields one part");
        tree = put(&repo, Some(&current), &parts, file, entry)?;
    }
    let changed = changed_paths(&repo, &base, &repo.find_tree(tree)?)?;
    Ok((tree, changed))
}

/// Which of `paths` are symbolic links (mode 120000) in `tree`.
pub fn links_in(repo: &Repository, tree: Oid, paths: &[String]) -> Result<Vec<String>, GitError> {
    let tree = repo.find_tree(tree)?;
    Ok(paths
        .iter()
        .filter(|p| {
            tree.get_path(Path::new(p.as_str()))
                .is_ok_and(|e| e.filemode() == 0o120000)
        })
        .cloned()
        .collect())
}

/// `tree` with each of `paths` (files) as it is in `base`: removed where `base` has none.
pub fn with_paths_of(
    repo: &Repository,
    tree: Oid,
    base: &Tree<'_>,
    paths: &[&str],
) -> Result<Oid, GitError> {
    let mut tree = tree;
    for p in paths {
        let entry = base
            .get_path(Path::new(p))
            .ok()
            .map(|e| (e.id(), e.filemode()));
        let current = repo.find_tree(tree)?;
        let mut parts: Vec<&str> = p.split('/').collect();
        let file = parts.pop().expect("split always yields one part");
        tree = put(repo, Some(&current), &parts, file, entry)?;
    }
    Ok(tree)
}

/// The largest file an attempt may leave.
const MAX_FILE: u64 = 64 * 1024 * 1024;

/// Sets (or with `None`, removes) one entry in a tree, creating or pruning directories.
fn put(
    repo: &Repository,
    tree: Option<&Tree<'_>>,
    dirs: &[&str],
    name: &str,
    entry: Option<(Oid, i32)>,
) -> Result<Oid, GitError> {
    let mut builder = repo.treebuilder(tree)?;
    match dirs.split_first() {
        None => match entry {
            Some((id, mode)) => {
                builder.insert(name, id, mode)?;
            }
            None => {
                if builder.get(name)?.is_some() {
                    builder.remove(name)?;
                }
            }
        },
        Some((first, rest)) => {
            let sub = match tree.and_then(|t| t.get_name(first)) {
                Some(e) if e.kind() == Some(ObjectType::Tree) => Some(repo.find_tree(e.id())?),
                _ => None,
            };
            let id = put(repo, sub.as_ref(), rest, name, entry)?;
            if repo.find_tree(id)?.is_empty() {
                if builder.get(first)?.is_some() {
                    builder.remove(first)?;
                }
            } else {
                builder.insert(first, id, 0o040000)?;
            }
        }
    }
    Ok(builder.write()?)
}

/// Runs the user's own `git` in `root` (their credentials, their configuration) and returns its
/// stdout; a failure carries git's stderr. Used only to fetch from and push to the forge's remote.
pub fn git_cli(root: &Path, args: &[&str]) -> Result<Vec<u8>, GitError> {
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    // One at a time in this process: concurrent fetches into the same ref fail on git's locks.
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    // The clone's hooks and file monitor are programs whoever can write `.git/` chose: the
    // gate's fetches and pushes run neither, nor a transport that runs a command by its URL.
    let out = std::process::Command::new("git")
        .current_dir(root)
        .args([
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "core.fsmonitor=false",
            "-c",
            "protocol.ext.allow=never",
        ])
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(GitError::NoGit)?;
    if !out.status.success() {
        return Err(GitError::Cli {
            args: args.join(" "),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(out.stdout)
}
