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
            return super::audit::show(
                &ws,
                super::audit::ShowArgs {
                    id: args.id.clone(),
                    json: false,
                },
            );
        }
        Err(e) => return Err(e.into()),
    };
    if args.json {
        json(&v)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut t = format!(
        "proposal {} \"{}\" ({})\nproposed by {}{}\nhead {}\nagainst {}\n\n",
        v.id,
        v.title,
        v.state,
        v.proposer.as_deref().unwrap_or("unknown"),
        v.origin
            .as_deref()
            .map(|o| format!(" (written by {o})"))
            .unwrap_or_default(),
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
        t.push_str(&format!(
            "  {:<9} {}\n",
            f.status,
            crate::text::quoted_path(&f.path)
        ));
        if let Some(m) = &f.mode {
            t.push_str(&format!("            {m}\n"));
        }
    }
    for f in &v.files {
        t.push('\n');
        t.push_str(&f.diff);
    }
    out(&t)?;
    Ok(ExitCode::SUCCESS)
}
