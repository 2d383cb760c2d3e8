//! `atelier show`: what a proposal changes, for the people asked to approve it.

use std::path::Path;
use std::process::ExitCode;

use clap::Args;

use super::{json, out};
use crate::workflow::Workspace;

#[derive(Args, Debug)]
pub struct ShowArgs {
    /// The proposal id.
    id: String,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub fn show(dir: &Path, args: ShowArgs) -> anyhow::Result<ExitCode> {
    let ws = Workspace::open(dir)?;
    let v = match crate::proposal::view(&ws, &args.id) {
        Ok(v) => v,
        // Not in this clone's local forge, but the ledger knows it (a clone of the repository
        // that opened it): show the ledger's record rather than "does not exist".
        Err(_)
            if !args.json
                && ws.config.forge.kind == "local"
                && ws.view()?.opened(&args.id).is_some() =>
        {
            super::note!(
                "proposal {} is not in this clone's local forge (it lives in the clone that opened it); the ledger's record of it follows (`atelier audit show {}`)",
                args.id, args.id
            );
            let code = super::audit::show(
                &ws,
                super::audit::ShowArgs {
                    id: args.id.clone(),
                    json: false,
                },
            )?;
            // Its merge commit is history this clone has: what it changed can be read there.
            let merged = ws.view()?.merge_commit(&args.id).map(String::from);
            if let Some(commit) = merged
                .filter(|c| git2::Oid::from_str(c).is_ok_and(|o| ws.repo.find_commit(o).is_ok()))
            {
                let files = crate::proposal::merged_changes(&ws, &commit)?;
                out(&format!(
                    "\nwhat merge commit {commit} changed on its first parent ({} file(s)):\n",
                    files.len()
                ))?;
                out(&changes_text(&files))?;
            }
            return Ok(code);
        }
        Err(e) => return Err(e.into()),
    };
    if args.json {
        json(&v)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut t = format!(
        "proposal {} \"{}\" ({})\nproposed by {}{}\nhead {}\nagainst {}{}\n\n",
        v.id,
        v.title,
        v.state,
        v.proposer.as_deref().unwrap_or("unknown"),
        v.origin
            .as_deref()
            .map(|o| format!(" (written by {o})"))
            .unwrap_or_default(),
        v.head,
        v.base,
        if v.state == "open" {
            " (the branch's tip now: what a token signed now binds)"
        } else {
            ""
        }
    );
    if let Some(st) = &v.evidence {
        t.push_str("evidence (atelier cycle, as the ledger recorded it):\n");
        match &st.evidence {
            Some(e) => t.push_str(&format!("  {}\n", e.headline())),
            None => t.push_str("  none the ledger recorded can be shown\n"),
        }
        for o in &st.objections {
            t.push_str(&format!("  would not have been submitted: {o}\n"));
        }
        for w in &st.warnings {
            t.push_str(&format!("  WARNING: {w}\n"));
        }
        t.push('\n');
    }
    t.push_str(&format!("{} file(s) changed:\n", v.files.len()));
    t.push_str(&changes_text(&v.files));
    out(&t)?;
    Ok(ExitCode::SUCCESS)
}

/// The list of changed files, then each one's diff.
fn changes_text(files: &[crate::proposal::FileChange]) -> String {
    let mut t = String::new();
    for f in files {
        t.push_str(&format!(
            "  {:<9} {}\n",
            f.status,
            crate::text::quoted_path(&f.path)
        ));
        if let Some(m) = &f.mode {
            t.push_str(&format!("            {m}\n"));
        }
    }
    for f in files {
        t.push('\n');
        t.push_str(&f.diff);
    }
    t
}
