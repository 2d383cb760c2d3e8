//! `atelier review`: the review panel on a proposal as the forge carries it now. The panel is
//! read from the proposal's base (`reviewers/*.toml`; without that folder, the default panel of
//! built-in reviewers), so a proposal can never change what judges it. Today it is advisory:
//! the gate does not enforce it, and nothing is recorded (issue 10).

use git2::Oid;

use super::gate::check_addressed;
use super::{evaluate_at, Error, Publish, Result, Workspace};
use crate::forge::Addr;
use crate::git;
use crate::governance::review::{self, ChangeView, FileChange, Finding, ReviewerDef, Verdict};
use crate::governance::time::Timestamp;

/// The panel every repository has when its base carries no `reviewers/` folder.
pub const DEFAULT_PANEL: &[(&str, &str)] = &[
    (
        "reviewers/judge-tamper.toml",
        "name = \"judge-tamper\"\nflavour = \"An agent must never change what judges it.\"\nkind = \"builtin:judge-tamper\"\n",
    ),
    (
        "reviewers/tests-tamper.toml",
        "name = \"tests-tamper\"\nflavour = \"Tests are only ever strengthened.\"\nkind = \"builtin:tests-tamper\"\n",
    ),
    (
        "reviewers/secrets.toml",
        "name = \"secrets\"\nflavour = \"No key, token or credential enters the repository or leaves the machine.\"\nkind = \"builtin:secrets\"\n",
    ),
    (
        "reviewers/deps.toml",
        "name = \"deps\"\nflavour = \"Every new dependency is named and justified.\"\nkind = \"builtin:deps\"\n",
    ),
    (
        "reviewers/size.toml",
        "name = \"size\"\nflavour = \"A change a person can review in one sitting.\"\nkind = \"builtin:size\"\n",
    ),
];

/// What the panel said.
#[derive(Debug, serde::Serialize)]
pub struct Review {
    pub proposal: String,
    pub base: String,
    pub head: String,
    pub tree: Option<String>,
    pub verdict: Verdict,
    pub findings: Vec<Finding>,
    /// The reviewers that ran, from the base (or the default panel).
    pub reviewers: Vec<String>,
    /// Agent reviewers defined at base that were not run (not built yet).
    pub not_run: Vec<String>,
    pub origin: Option<String>,
    pub summary: String,
}

/// The panel definitions at `base`: `reviewers/*.toml`, or the default panel.
pub fn panel_at(ws: &Workspace, base: Oid) -> Result<Vec<ReviewerDef>> {
    let repo = &ws.repo;
    let tree = repo.find_commit(base)?.tree()?;
    let mut files: Vec<(String, String)> = Vec::new();
    if let Some(entry) = tree.get_name("reviewers") {
        if let Ok(dir) = entry.to_object(repo).and_then(|o| o.peel_to_tree()) {
            for e in dir.iter() {
                let Some(name) = e.name().filter(|n| n.ends_with(".toml")) else {
                    continue;
                };
                let path = format!("reviewers/{name}");
                let bytes = git::read_file(repo, &tree, &path)?.unwrap_or_default();
                let text = String::from_utf8(bytes)
                    .map_err(|_| Error::input(format!("{path}: not UTF-8 text")))?;
                files.push((path, text));
            }
        }
    }
    if files.is_empty() {
        files = DEFAULT_PANEL
            .iter()
            .map(|(p, t)| (p.to_string(), t.to_string()))
            .collect();
    }
    files
        .iter()
        .map(|(p, t)| {
            ReviewerDef::parse(p, t).map_err(|e| {
                Error::input(format!(
                    "{e} (the panel is read from the proposal's base {base}: fix the file there through a proposal)"
                ))
            })
        })
        .collect()
}

/// Runs the panel's built-in reviewers on the proposal `addr` names, as it would merge now.
pub fn review(ws: &Workspace, addr: &Addr, now: Timestamp) -> Result<Review> {
    let _lock = ws.lock()?;
    ws.forge.sync(ws, false)?;
    let view = ws.view()?;
    let n = ws.pull_for(&view, addr)?;
    let carried = ws
        .forge
        .carried(ws, &view, n, Publish::Nothing, Vec::new())?;
    check_addressed(addr, &carried)?;
    let eval = evaluate_at(
        ws,
        &view,
        carried.pull.clone(),
        carried.base,
        carried.head,
        now,
    )?;
    let repo = &ws.repo;
    let base_tree = repo.find_commit(carried.base)?.tree()?;
    // What would land; with a conflict, what the head changes since the merge base.
    let (from, to) = match eval.merge_tree {
        Some(t) => (base_tree, repo.find_tree(t)?),
        None => {
            let mb = repo.merge_base(carried.base, carried.head)?;
            (
                repo.find_commit(mb)?.tree()?,
                repo.find_commit(carried.head)?.tree()?,
            )
        }
    };
    let text = |tree: &git2::Tree, path: &str| -> Result<Option<String>> {
        Ok(git::read_file(repo, tree, path)?.and_then(|b| String::from_utf8(b).ok()))
    };
    let mut files = Vec::new();
    for path in git::changed_paths(repo, &from, &to)? {
        files.push(FileChange {
            base: text(&from, &path)?,
            head: text(&to, &path)?,
            path,
        });
    }
    let defs = panel_at(ws, carried.base)?;
    let origin = view.origin(&carried.pull.proposal);
    let change = ChangeView {
        files: &files,
        agent_origin: origin.is_some(),
        declared: None,
    };
    let findings = review::run_builtins(&defs, &change);
    let verdict = review::critic(&findings);
    let not_run: Vec<String> = defs
        .iter()
        .filter(|d| d.kind == review::Kind::Agent)
        .map(|d| d.name.clone())
        .collect();
    let reviewers = defs
        .iter()
        .filter(|d| d.kind != review::Kind::Agent)
        .map(|d| d.name.clone())
        .collect();
    let summary = format!(
        "{} finding(s) from the built-in reviewers: {}",
        findings.len(),
        match verdict {
            Verdict::Approve => "approve",
            Verdict::Revise => "revise",
            Verdict::Block => "block",
        }
    );
    Ok(Review {
        proposal: carried.pull.proposal,
        base: carried.base.to_string(),
        head: carried.head.to_string(),
        tree: eval.merge_tree.map(|t| t.to_string()),
        verdict,
        findings,
        reviewers,
        not_run,
        origin,
        summary,
    })
}
