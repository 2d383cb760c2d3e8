//! `atelier propose` and `atelier proposals`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;

use super::{json, now, out};
use crate::workflow::{self, ProposeOptions, Workspace};

#[derive(Args, Debug)]
pub struct ProposeArgs {
    /// A patch in `git diff` format, against the protected branch's tip.
    #[arg(long)]
    patch: PathBuf,
    /// A one-line title.
    #[arg(long)]
    title: String,
    /// Why this change.
    #[arg(long)]
    rationale: Option<String>,
    /// The agent that wrote the patch (e.g. `claude-code`): recorded in the ledger, it only adds
    /// scrutiny (the review panel's judge-tamper reviewer blocks an agent's change to what
    /// judges it).
    #[arg(long, value_name = "NAME")]
    agent: Option<String>,
}

pub fn propose(dir: &Path, args: ProposeArgs) -> anyhow::Result<ExitCode> {
    let ws = Workspace::open(dir)?;
    let now = now()?;
    let p = workflow::propose(
        &ws,
        ProposeOptions {
            patch: args.patch,
            title: args.title,
            rationale: args.rationale,
            proposer: None,
            origin: args.agent.map(|a| format!("agent {a}")),
            declared: None,
        },
        now,
    )?;
    eprintln!(
        "proposal {} opened on branch {} (head {}, base {})",
        p.id, p.branch, p.head, p.base
    );
    out(&format!("{}\n", p.id))?;
    Ok(ExitCode::SUCCESS)
}

#[derive(Args, Debug)]
pub struct ProposalsArgs {
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub fn proposals(dir: &Path, args: ProposalsArgs) -> anyhow::Result<ExitCode> {
    let ws = Workspace::open(dir)?;
    let list = workflow::list(&ws, now()?)?;
    if args.json {
        json(&list)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut text = format!(
        "{:<4} {:<7} {:<12} {:<10} {}\n",
        "ID", "STATE", "HEAD", "APPROVALS", "TITLE"
    );
    for s in &list {
        let approvals = match s.required {
            Some(r) => format!(
                "{}/{}{}",
                s.approvals,
                r,
                if s.may_merge { " ok" } else { "" }
            ),
            None if s.state == "open" => format!("{}", s.approvals),
            None => "-".into(),
        };
        text.push_str(&format!(
            "{:<4} {:<7} {:<12} {:<10} {}\n",
            s.id,
            s.state,
            s.head
                .as_deref()
                .map(|h| &h[..12.min(h.len())])
                .unwrap_or("-"),
            approvals,
            s.title
        ));
    }
    if list.is_empty() {
        text.push_str(
            "(no proposals yet: `atelier propose --patch FILE --title TEXT` opens one)\n",
        );
    }
    out(&text)?;
    Ok(ExitCode::SUCCESS)
}
