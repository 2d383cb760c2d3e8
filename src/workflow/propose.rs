//! `atelier propose`: a patch becomes a proposal branch with its record, and a pull request.

use std::path::PathBuf;

use crate::workflow::error::{Context, Result};

use super::Workspace;
use crate::audit::ledger::Event;
use crate::forge::{PullRequest, PullState};
use crate::git;
use crate::governance::time::{format_rfc3339, Timestamp};
use crate::governance::Code;

pub struct ProposeOptions {
    pub patch: PathBuf,
    pub title: String,
    pub rationale: Option<String>,
    /// The principal proposing; `None` means the repository's `user.email`. The CLI never
    /// lets a user name someone else: the proposer's approval must not count.
    pub proposer: Option<String>,
    /// The agent that wrote the patch (`--agent NAME`, a swarm run): it only adds scrutiny.
    pub origin: Option<String>,
    /// The files (globs) it declared it would change, for the `scope` reviewer (a swarm run's
    /// claims); `None` when it declared none.
    pub declared: Option<Vec<String>>,
    /// The commit the patch was made against (one of atelier's proposers): refused, under the
    /// lock, when the protected branch is no longer there.
    pub expect_base: Option<git2::Oid>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Proposed {
    pub id: String,
    pub branch: String,
    pub head: String,
    pub base: String,
    pub record: String,
    /// What `git apply` said about how the patch applied (offsets, a three-way merge).
    pub applied: Vec<String>,
}

/// `fix the retry loop!` → `fix-the-retry-loop`.
pub fn slug(title: &str) -> String {
    let mut out = String::new();
    for c in title.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
        if out.len() >= 40 {
            break;
        }
    }
    let trimmed = out.trim_end_matches('-');
    if trimmed.is_empty() {
        "proposal".into()
    } else {
        trimmed.to_string()
    }
}

fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// A title is one line of plain text (it is shown on reviewers' terminals).
fn check_title(title: &str) -> Result<()> {
    if title.is_empty() || title.contains('\n') {
        return Err(crate::workflow::Error::Input(
            "--title: expected one non-empty line".to_string(),
        ));
    }
    if let Some((at, c)) = title
        .char_indices()
        .find(|&(_, c)| c.is_control() || crate::text::hides(c))
    {
        let what = if c.is_control() {
            "a control character"
        } else {
            "a character that reorders or hides text"
        };
        return Err(crate::workflow::Error::Input(format!(
            "--title: {what} (U+{:04X}) at byte {at}: a title is one line of plain text, shown on reviewers' terminals; remove it",
            c as u32
        )));
    }
    Ok(())
}

/// Nothing under `.atelier/` may be proposed: it holds each clone's gate key, forge and locks.
fn refuse_reserved(
    repo: &git2::Repository,
    base_commit: &git2::Commit,
    patched: git2::Oid,
    patch: &std::path::Path,
) -> Result<()> {
    let reserved: Vec<String> =
        git::changed_paths(repo, &base_commit.tree()?, &repo.find_tree(patched)?)?
            .into_iter()
            .filter(|p| crate::governance::policy::is_reserved(p))
            .collect();
    if !reserved.is_empty() {
        return Err(super::refuse(
            Code::ReservedPath,
            format!(
                "{} changes {}: nothing under `{}/` may be proposed (it holds each clone's gate key, forge and locks); remove those files from the patch",
                patch.display(),
                reserved.join(", "),
                crate::governance::policy::RESERVED_DIR
            ),
        ));
    }
    Ok(())
}

/// The next proposal number: never one this clone's forge knows, not one the ledger (which
/// travels between clones) recorded, not one whose branch survived a crash.
fn next_number(ws: &Workspace) -> Result<u64> {
    let in_ledger = ws.view()?.next_opened_number();
    let mut number = ws.records.next_number()?.max(in_ledger);
    while ws
        .repo
        .find_reference(&format!("refs/heads/atelier/proposals/{number}"))
        .is_ok()
    {
        number += 1;
    }
    Ok(number)
}

/// The most a patch file may hold: far more than any reviewable change, and a bound on what a
/// stream such as `/dev/zero` given as the patch makes Atelier read.
const MAX_PATCH_BYTES: u64 = 64 << 20;

/// The patch file's bytes, refused past [`MAX_PATCH_BYTES`].
fn read_patch(path: &std::path::Path) -> Result<Vec<u8>> {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_PATCH_BYTES + 1).read_to_end(&mut bytes))
        .with_context(|| format!("reading patch {}", path.display()))?;
    if bytes.len() as u64 > MAX_PATCH_BYTES {
        return Err(crate::workflow::Error::Input(format!(
            "{}: the patch is larger than {} MiB; nothing proposed: split the change into proposals a person can read",
            path.display(),
            MAX_PATCH_BYTES >> 20
        )));
    }
    Ok(bytes)
}

pub fn propose(ws: &Workspace, opts: ProposeOptions, now: Timestamp) -> Result<Proposed> {
    let title = opts.title.trim();
    check_title(title)?;
    let patch = read_patch(&opts.patch)?;
    let _lock = ws.lock()?;
    ws.check_floors()?;
    let repo = &ws.repo;
    let branch = ws.branch().to_string();
    let base = git::branch_tip(repo, &branch)?;
    if let Some(expected) = opts.expect_base.filter(|e| *e != base) {
        return Err(crate::workflow::Error::Input(format!(
            "{branch} moved while the proposal was being prepared (expected: {expected}; found: {base}); nothing proposed: run it again"
        )));
    }
    let base_commit = repo.find_commit(base)?;
    let applied = git::apply_patch(
        repo,
        &base_commit,
        &patch,
        &opts.patch.display().to_string(),
        &branch,
    )?;
    let patched = applied.tree;
    refuse_reserved(repo, &base_commit, patched, &opts.patch)?;
    let number = next_number(ws)?;
    let id = number.to_string();
    let record = format!("proposals/{id}-{}", slug(title));
    let proposer = opts.proposer.or_else(|| {
        repo.config()
            .ok()
            .and_then(|c| c.get_string("user.email").ok())
    });
    let mut text = format!(
        "# The record of proposal {id}. Written by `atelier propose`; merged with the change.\nid = {}\ntitle = {}\n",
        toml_string(&id),
        toml_string(title)
    );
    if let Some(r) = &opts.rationale {
        text.push_str(&format!("rationale = {}\n", toml_string(r)));
    }
    if let Some(p) = &proposer {
        text.push_str(&format!("proposer = {}\n", toml_string(p)));
    }
    text.push_str(&format!(
        "created = {}\nbase = {}\n",
        toml_string(&format_rfc3339(now)),
        toml_string(&base.to_string())
    ));
    let tree_id = git::tree_with_file(
        repo,
        &repo.find_tree(patched)?,
        &format!("{record}/proposal.toml"),
        text.as_bytes(),
    )?;
    let tree = repo.find_tree(tree_id)?;
    let sig = git::signature(repo, now)?;
    let message = format!(
        "{title}\n\n{}Atelier-Proposal: {id}\n",
        opts.rationale
            .as_ref()
            .map(|r| format!("{r}\n\n"))
            .unwrap_or_default()
    );
    let head = repo.commit(None, &sig, &sig, &message, &tree, &[&base_commit])?;
    let head_branch = format!("atelier/proposals/{id}");
    // The ledger first: if the append is refused (a rewound ledger, a clock behind it), nothing
    // else exists yet, and a crash after it leaves an id the ledger holds and no one reuses.
    ws.record(
        vec![Event::ProposalOpened {
            proposal: id.clone(),
            pull: number,
            title: title.to_string(),
            branch: head_branch.clone(),
            base: base.to_string(),
            head: head.to_string(),
            proposer: proposer.clone(),
            origin: opts.origin.clone(),
            declared: opts.declared.clone(),
        }],
        now,
    )?;
    repo.reference(
        &format!("refs/heads/{head_branch}"),
        head,
        false,
        &format!("atelier: proposal {id}"),
    )?;
    let pull = PullRequest {
        number,
        proposal: id.clone(),
        title: title.to_string(),
        head_branch: head_branch.clone(),
        base_branch: branch,
        state: PullState::Open,
        proposer,
        created: now,
        record: record.clone(),
        comments: Vec::new(),
        merge_commit: None,
        closed_reason: None,
    };
    ws.records.create(&pull)?;
    Ok(Proposed {
        id,
        branch: head_branch,
        head: head.to_string(),
        base: base.to_string(),
        record,
        applied: applied.notes,
    })
}

/// Publishes proposal `id` on the forge (`submit`: on GitHub, pushes its branch and opens or
/// updates its pull request) and records the pull request and head in the ledger.
pub fn submit(ws: &Workspace, id: &str, now: Timestamp) -> Result<crate::forge::Published> {
    let _lock = ws.lock()?;
    super::sync::sync(ws, true)?;
    let view = ws.view()?;
    // The record must be the one the ledger opened: its number, branch and (from the ledger)
    // proposer; an edited record can neither publish another proposal's branch under this id
    // nor clear who proposed it.
    let (pull, _, _) = ws.checked_record(&view, ws.pull(id)?)?;
    if pull.proposal != id {
        return Err(super::refuse(
            Code::ForgeState,
            format!(
                "the forge record of proposal {id} names proposal {}; the forge record was edited",
                pull.proposal
            ),
        ));
    }
    if pull.state != PullState::Open || view.finished(&pull.proposal) {
        return Err(super::refuse(
            Code::NotOpen,
            format!("proposal {id} is merged or closed; there is nothing to submit"),
        ));
    }
    let body = if ws.forge.shows_body() {
        let base = crate::git::branch_tip(&ws.repo, ws.branch())?;
        let head = crate::git::branch_tip(&ws.repo, &pull.head_branch)?;
        super::body::render(ws, &view, &pull, base, head)?
    } else {
        String::new()
    };
    let published = ws.forge.publish_proposal(&ws.site(), &view, &pull, &body)?;
    let already = view
        .submitted_heads()
        .any(|(p, n, h)| p == pull.proposal && n == published.pull && h == published.head);
    if !already {
        ws.record(
            vec![Event::Submitted {
                proposal: pull.proposal.clone(),
                pull: published.pull,
                url: published.url.clone(),
                head: published.head.clone(),
                proposer: pull.proposer.clone(),
            }],
            now,
        )?;
        ws.forge.publish_ledger(&ws.site())?;
    }
    Ok(published)
}
