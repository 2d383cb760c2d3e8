//! `atelier gate`, `atelier merge`, `atelier close`.

use std::path::Path;
use std::process::ExitCode;

use clap::Args;

use super::{json, now, out, verdict};
use crate::forge::Addr;
use crate::governance::decision::Decision;
use crate::workflow::{self, Evaluation, MergeOutcome, Publish, Workspace};

#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("which").required(true).args(["id", "pr"])))]
pub struct GateArgs {
    /// The proposal id.
    id: Option<String>,
    /// The pull request carrying the proposal, by number (on GitHub the status and the summary
    /// comment are updated too; on the local forge the number is the proposal id).
    #[arg(long, value_name = "n", conflicts_with = "id")]
    pr: Option<u64>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(serde::Serialize)]
struct GateJson<'a> {
    proposal: &'a str,
    base: &'a str,
    head: &'a str,
    merge_tree: Option<String>,
    #[serde(flatten)]
    decision: &'a Decision,
}

fn short(s: &str) -> &str {
    &s[..12.min(s.len())]
}

/// The human form of a gate decision.
pub(crate) fn render(eval: &Evaluation) -> String {
    let d = &eval.decision;
    let mut t = format!(
        "proposal {} \"{}\": head {} onto {} at {}\n\nrequirements:\n",
        eval.pull.proposal,
        eval.pull.title,
        short(&eval.change.head),
        eval.pull.base_branch,
        short(&eval.change.base)
    );
    for r in &d.requirements {
        t.push_str(&format!(
            "  [{}] {:<24} {}\n",
            if r.met { " ok " } else { "FAIL" },
            r.code,
            r.summary
        ));
        if !r.met {
            t.push_str(&format!(
                "         expected: {}\n         found:    {}\n",
                r.expected, r.found
            ));
            if let Some(next) = r.code.next_step() {
                t.push_str(&format!("         next:     {next}\n"));
            }
        }
    }
    if d.tokens.is_empty() {
        t.push_str(&format!(
            "\ntokens: none recorded (`atelier approve {} --key KEY` signs one)\n",
            eval.pull.proposal
        ));
    } else {
        t.push_str("\ntokens:\n");
        for tok in &d.tokens {
            t.push_str(&format!(
                "  #{} {:<22} {} {}\n",
                tok.index + 1,
                tok.code_text(),
                tok.principal.as_deref().unwrap_or("-"),
                tok.fingerprint.as_deref().unwrap_or("")
            ));
            t.push_str(&format!("       {}\n", tok.detail));
        }
    }
    let rv = &d.review;
    t.push_str(&format!(
        "\nreview panel: {} (recorded verdict: {}){}\n",
        rv.verdict.map_or("unreadable", |v| v.as_str()),
        rv.recorded,
        if rv.overruled_by.is_empty() {
            String::new()
        } else {
            format!("; overruled by {}", rv.overruled_by.join(", "))
        }
    ));
    for f in &rv.findings {
        t.push_str(&format!("  {}\n", crate::workflow::review::finding_line(f)));
    }
    let unmet = d.unmet().count();
    if d.allowed {
        t.push_str(&format!(
            "\ngate: ALLOWED (approved by {})\n",
            d.approvers.join(", ")
        ));
    } else {
        let codes: Vec<&str> = d.unmet().map(|r| r.code.as_str()).collect();
        t.push_str(&format!(
            "\ngate: REFUSED ({unmet} unmet: {})\n",
            codes.join(", ")
        ));
    }
    t
}

pub(crate) fn print(eval: &Evaluation, as_json: bool) -> anyhow::Result<()> {
    if as_json {
        json(&GateJson {
            proposal: &eval.pull.proposal,
            base: &eval.change.base,
            head: &eval.change.head,
            merge_tree: eval.merge_tree.map(|t| t.to_string()),
            decision: &eval.decision,
        })
    } else {
        out(&render(eval))
    }
}

/// The address `id` or `--pr` gives.
pub(crate) fn addr(id: Option<String>, pr: Option<u64>) -> Addr {
    match (id, pr) {
        (_, Some(n)) => Addr::Pull(n),
        (Some(id), None) => Addr::Proposal(id),
        (None, None) => unreachable!("clap requires an id or --pr"),
    }
}

pub fn gate(dir: &Path, args: GateArgs) -> anyhow::Result<ExitCode> {
    let ws = Workspace::open(dir)?;
    let run = workflow::gate(&ws, &addr(args.id, args.pr), now()?, Publish::Verdict)?;
    if let Some(shown) = &run.published {
        super::note!("{shown}");
    }
    for note in &run.notes {
        super::note!("note: {note}");
    }
    let code = if run.eval.decision.allowed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    };
    verdict(code, || print(&run.eval, args.json))
}

#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("which").required(true).args(["id", "pr"])))]
pub struct MergeArgs {
    /// The proposal id.
    id: Option<String>,
    /// The pull request carrying the proposal, by number: re-run the gate, land the merge
    /// guarded by the approved base or head, check what landed, record it (and on GitHub push
    /// the ledger).
    #[arg(long, value_name = "n", conflicts_with = "id")]
    pr: Option<u64>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub fn merge(dir: &Path, args: MergeArgs) -> anyhow::Result<ExitCode> {
    let ws = Workspace::open(dir)?;
    match workflow::merge(&ws, &addr(args.id, args.pr), now()?)? {
        MergeOutcome::Refused(run) => {
            for note in &run.notes {
                super::note!("note: {note}");
            }
            // Already merged: say so, with the commit, rather than the whole gate.
            let view = ws.view()?;
            if let Some(m) = view.merges().find(|m| m.proposal == run.eval.pull.proposal) {
                super::note!(
                    "refused: proposal {} is already merged, as {} (`atelier audit show {}` has its story)",
                    m.proposal, m.commit, m.proposal
                );
                return verdict(ExitCode::from(1), || {
                    if args.json {
                        print(&run.eval, true)
                    } else {
                        Ok(())
                    }
                });
            }
            let unmet: Vec<String> = run.eval.decision.unmet().map(|r| r.code.to_string()).fold(
                Vec::new(),
                |mut codes, c| {
                    if !codes.contains(&c) {
                        codes.push(c);
                    }
                    codes
                },
            );
            super::note!(
                "refused: {}: proposal {} (pull request #{}) was not merged: the gate is not satisfied (each requirement and its next step are above)",
                unmet.join(", "),
                run.eval.pull.proposal,
                run.eval.pull.number
            );
            verdict(ExitCode::from(1), || print(&run.eval, args.json))
        }
        MergeOutcome::Merged(m) => {
            if let Some(n) = &m.note {
                super::note!("note: {n}");
            }
            verdict(ExitCode::SUCCESS, || {
                if args.json {
                    json(&m)
                } else {
                    out(&format!(
                        "merged proposal {} (pull request #{}) as {}\n  base {}\n  head {}\n  tree {} (re-checked after landing)\n  approved by {}\n",
                        m.id,
                        m.pull,
                        m.commit,
                        m.base,
                        m.head,
                        m.tree,
                        m.approvers.join(", ")
                    ))
                }
            })
        }
    }
}

#[derive(Args, Debug)]
pub struct CloseArgs {
    /// The proposal id.
    id: String,
    /// Why it is closed (recorded in the ledger).
    #[arg(long)]
    reason: Option<String>,
}

pub fn close(dir: &Path, args: CloseArgs) -> anyhow::Result<ExitCode> {
    let ws = Workspace::open(dir)?;
    let closed = workflow::close(&ws, &args.id, args.reason, now()?)?;
    for note in &closed.notes {
        super::note!("note: {note}");
    }
    out(&format!("closed proposal {}\n", args.id))?;
    Ok(ExitCode::SUCCESS)
}
