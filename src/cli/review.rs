//! `atelier review`: the review panel's built-in reviewers on a proposal, now.

use std::path::Path;
use std::process::ExitCode;

use clap::Args;

use super::{json, now, out, verdict};
use crate::governance::review::{Severity, Verdict};
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
    eprintln!(
        "note: the panel is advisory for now: the gate does not enforce its verdict and nothing is recorded (agent reviewers, recorded verdicts and enforcement are not built yet)"
    );
    if !r.not_run.is_empty() {
        eprintln!(
            "note: agent reviewers defined at base were not run (not built yet): {}",
            r.not_run.join(", ")
        );
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
                let sev = match f.severity {
                    Severity::Blocking => "BLOCKING",
                    Severity::Major => "major",
                    Severity::Minor => "minor",
                };
                let at = match (&f.file, f.line) {
                    (Some(file), Some(line)) => format!(" {file}:{line}"),
                    (Some(file), None) => format!(" {file}"),
                    _ => String::new(),
                };
                t.push_str(&format!(
                    "  [{sev}] {}{at}: {}\n         hint: {}\n",
                    f.reviewer, f.message, f.hint
                ));
            }
        }
        t.push_str(&format!(
            "\npanel: {}\n",
            match r.verdict {
                Verdict::Approve => "APPROVE",
                Verdict::Revise => "REVISE",
                Verdict::Block => "BLOCK",
            }
        ));
        out(&t)
    })
}
