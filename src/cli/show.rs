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
    let v = crate::proposal::view(&ws, &args.id)?;
    if args.json {
        json(&v)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut t = format!(
        "proposal {} \"{}\" ({})\nproposed by {}\nhead {}\nagainst {}\n\n",
        v.id,
        v.title,
        v.state,
        v.proposer.as_deref().unwrap_or("unknown"),
        v.head,
        v.base
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
    for f in &v.files {
        t.push_str(&format!("  {:<9} {}\n", f.status, f.path));
    }
    for f in &v.files {
        t.push('\n');
        t.push_str(&f.diff);
    }
    out(&t)?;
    Ok(ExitCode::SUCCESS)
}
