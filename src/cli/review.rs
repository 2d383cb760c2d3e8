//! `atelier review`: the review panel on a proposal as it would merge now, its verdict recorded.

use std::path::Path;
use std::process::ExitCode;

use clap::Args;

use super::{json, now, out, verdict};
use crate::governance::review::Verdict;
use crate::workflow::{review, Workspace};

#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("which").required(true).args(["id", "pr"])))]
pub struct ReviewArgs {
    /// The proposal id.
    id: Option<String>,
    /// The pull request carrying the proposal, by number.
    #[arg(long, value_name = "n", conflicts_with = "id")]
    pr: Option<u64>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub fn review(dir: &Path, args: ReviewArgs) -> anyhow::Result<ExitCode> {
    let ws = Workspace::open(dir)?;
    let r = review::review(&ws, &super::gate::addr(args.id, args.pr), now()?)?;
    for n in &r.notes {
        super::note!("note: {n}");
    }
    if let Some(seq) = r.recorded {
        super::note!("note: the verdict is recorded in the ledger (entry {seq}); the gate weighs it while base, head and tree stay as reviewed");
    }
    let code = if r.verdict == Verdict::Approve {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    };
    verdict(code, || {
        if args.json {
            return json(&r);
        }
        let mut t = format!(
            "proposal {}: head {} onto {}{}\nreviewers: {}\n\n",
            r.proposal,
            &r.head[..12.min(r.head.len())],
            &r.base[..12.min(r.base.len())],
            r.origin
                .as_deref()
                .map(|o| format!(" (written by {o})"))
                .unwrap_or_default(),
            r.reviewers.join(", ")
        );
        if r.findings.is_empty() {
            t.push_str("findings: none\n");
        } else {
            t.push_str("findings:\n");
            for f in &r.findings {
                t.push_str(&format!("  {}\n", review::finding_line(f)));
            }
        }
        t.push_str(&format!("\npanel: {}\n", r.verdict.as_str().to_uppercase()));
        out(&t)
    })
}
