//! Proposals as people read them: the record and the change, with a unified diff rendered by
//! `similar` for display (patches that git applies are always produced and applied by git2).

use crate::workflow::error::Result;
use git2::{ObjectType, Oid, Repository};
use similar::TextDiff;

use crate::git;
use crate::workflow::Workspace;

/// One changed file.
#[derive(Debug, serde::Serialize)]
pub struct FileChange {
    pub path: String,
    pub status: &'static str,
    /// What the text diff cannot show: a mode change (`100644 -> 100755, executable`), or that
    /// the path is a symbolic link (and to what).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// The unified diff, or a note for binary files.
    pub diff: String,
}

/// A proposal with its change against the protected branch as it is now.
#[derive(Debug, serde::Serialize)]
pub struct View {
    pub id: String,
    pub title: String,
    pub state: &'static str,
    pub proposer: Option<String>,
    /// Who wrote the change when it was not the proposer (`agent NAME`), as the ledger records
    /// it: what the review panel judges by.
    pub origin: Option<String>,
    pub record: Option<String>,
    pub base: String,
    pub head: String,
    pub files: Vec<FileChange>,
    /// What its `atelier cycle` evidence is worth (the ledger's, with every warning), if any.
    pub evidence: Option<crate::workflow::cycle::Status>,
}

fn blob_text(
    repo: &Repository,
    tree: &git2::Tree<'_>,
    path: &str,
) -> Result<Option<Result<String, usize>>> {
    Ok(
        git::read_file(repo, tree, path)?.map(|bytes| match String::from_utf8(bytes) {
            Ok(s) if !s.contains('\0') => Ok(s),
            Ok(s) => Err(s.len()),
            Err(e) => Err(e.into_bytes().len()),
        }),
    )
}

/// A mode change or a symbolic link at `path` between two trees, said plainly: a text diff
/// shows neither (a link's diff is its target as if it were text).
fn mode_note(
    repo: &Repository,
    old: &git2::Tree<'_>,
    new: &git2::Tree<'_>,
    path: &str,
) -> Option<String> {
    let mode = |t: &git2::Tree<'_>| {
        t.get_path(std::path::Path::new(path))
            .ok()
            .map(|e| e.filemode())
    };
    let (before, after) = (mode(old), mode(new));
    const LINK: i32 = 0o120000;
    const EXEC: i32 = 0o100755;
    let target = || {
        new.get_path(std::path::Path::new(path))
            .ok()
            .and_then(|e| repo.find_blob(e.id()).ok())
            .map(|b| String::from_utf8_lossy(b.content()).into_owned())
            .unwrap_or_default()
    };
    match (before, after) {
        (_, Some(LINK)) if before != Some(LINK) => Some(format!(
            "now a SYMBOLIC LINK (mode 120000) to `{}`{}",
            target(),
            before.map_or(String::new(), |b| format!(", was mode {b:o}"))
        )),
        (Some(LINK), Some(LINK)) => Some(format!("a symbolic link, now to `{}`", target())),
        (Some(LINK), Some(a)) => Some(format!("was a symbolic link, now mode {a:o}")),
        (Some(b), Some(a)) if b != a => Some(format!(
            "mode {b:o} -> {a:o}{}",
            if a == EXEC { " (executable)" } else { "" }
        )),
        (None, Some(EXEC)) => Some("added executable (mode 100755)".into()),
        _ => None,
    }
}

/// The change a proposal makes, as it would land: the protected branch's tip against the tree of
/// merging the head into it (the tree the gate judges and a token binds), so a head with two
/// merge bases (a criss-cross) cannot show one change and land another. A merged proposal shows
/// what its merge commit changed; a head that does not merge cleanly (which the gate refuses),
/// what it changed since its merge base.
pub fn view(ws: &Workspace, id: &str) -> Result<View> {
    let pull = ws.pull(id)?;
    let repo = &ws.repo;
    let head = git::branch_tip(repo, &pull.head_branch)?;
    let tip = git::branch_tip(repo, &pull.base_branch)?;
    let (base, lands) = match pull.merge_commit.as_deref().map(Oid::from_str) {
        Some(Ok(m)) => {
            let merge = repo.find_commit(m)?;
            (merge.parent_id(0)?, merge.tree_id())
        }
        _ => match git::merge_tree(repo, tip, head)? {
            Ok(tree) => (tip, tree),
            Err(_) => (
                repo.merge_base(tip, head)?,
                repo.find_commit(head)?.tree_id(),
            ),
        },
    };
    let old = repo.find_commit(base)?.tree()?;
    let new = repo.find_tree(lands)?;
    let files = changes(repo, &old, &new)?;
    let record = new
        .get_path(std::path::Path::new(&format!(
            "{}/proposal.toml",
            pull.record
        )))
        .ok()
        .filter(|e| e.kind() == Some(ObjectType::Blob))
        .and_then(|e| repo.find_blob(e.id()).ok())
        .map(|b| String::from_utf8_lossy(b.content()).into_owned());
    let ledger = ws.view()?;
    let evidence = crate::workflow::cycle::status(ws, &ledger, &pull.proposal, &pull.record, head)?;
    let origin = ledger.provenance(&pull.proposal).origin;
    Ok(View {
        evidence,
        id: pull.proposal.clone(),
        title: pull.title.clone(),
        state: pull.state.as_str(),
        proposer: pull.proposer.clone(),
        origin,
        record,
        base: base.to_string(),
        head: head.to_string(),
        files,
    })
}

/// Each file that differs between two trees, with its unified diff (as `show` prints it).
fn changes(
    repo: &git2::Repository,
    old: &git2::Tree<'_>,
    new: &git2::Tree<'_>,
) -> Result<Vec<FileChange>> {
    let mut files = Vec::new();
    for path in git::changed_paths(repo, old, new)? {
        let before = blob_text(repo, old, &path)?;
        let after = blob_text(repo, new, &path)?;
        let status = match (&before, &after) {
            (None, Some(_)) => "added",
            (Some(_), None) => "deleted",
            _ => "modified",
        };
        let diff = match (before, after) {
            (Some(Err(n)), _) | (_, Some(Err(n))) => format!("binary file ({n} bytes)\n"),
            (b, a) => {
                let b = b.and_then(Result::ok).unwrap_or_default();
                let a = a.and_then(Result::ok).unwrap_or_default();
                TextDiff::from_lines(&b, &a)
                    .unified_diff()
                    .context_radius(3)
                    .header(
                        &crate::text::quoted_path(&format!("a/{path}")),
                        &crate::text::quoted_path(&format!("b/{path}")),
                    )
                    .to_string()
            }
        };
        let mode = mode_note(repo, old, new, &path);
        files.push(FileChange {
            path,
            status,
            mode,
            diff,
        });
    }
    Ok(files)
}

/// What the merge commit `commit` changed on its first parent: for a clone whose forge does not
/// hold the proposal but whose history holds its merge (an auditor's).
pub fn merged_changes(ws: &Workspace, commit: &str) -> Result<Vec<FileChange>> {
    let merge = ws.repo.find_commit(Oid::from_str(commit)?)?;
    let old = merge.parent(0)?.tree()?;
    changes(&ws.repo, &old, &merge.tree()?)
}
