//! `atelier review`: the whole review panel on a proposal as the forge carries it now, its
//! verdict recorded in the ledger. The panel is read from the proposal's base (`reviewers/*.toml`;
//! without that folder, the default panel of built-in reviewers), so a proposal can never change
//! what judges it. The gate re-runs the built-ins at every evaluation and weighs the agent
//! reviewers' verdict only from a recording bound to the change as it would merge.

use super::gate::check_addressed;
use super::{evaluate_at, Error, Publish, Result, Workspace};
use crate::audit::ledger::Event;
use crate::forge::Addr;
use crate::governance::review::{self, Finding, Kind, RecordedReview, Severity, Verdict};
use crate::governance::time::Timestamp;
use crate::panel;

/// The most findings a recorded verdict keeps (the rest are counted in the summary).
pub const RECORDED_FINDINGS_MAX: usize = 100;
/// The longest summary recorded, in characters.
pub const SUMMARY_MAX: usize = 4000;

/// What the panel said.
#[derive(Debug, serde::Serialize)]
pub struct Review {
    pub proposal: String,
    pub base: String,
    pub head: String,
    pub tree: Option<String>,
    /// The digest of the panel's definitions at base.
    pub panel: String,
    pub verdict: Verdict,
    pub findings: Vec<Finding>,
    /// The reviewers that ran, from the base (or the default panel).
    pub reviewers: Vec<String>,
    pub origin: Option<String>,
    pub summary: String,
    /// The ledger entry that records the verdict, if it was recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recorded: Option<u64>,
    #[serde(skip)]
    pub notes: Vec<String>,
}

/// Runs the panel on the proposal `addr` names, as it would merge now, and records its verdict
/// (when this clone holds the gate key and the proposal is still open).
pub fn review(ws: &Workspace, addr: &Addr, now: Timestamp) -> Result<Review> {
    let mut notes = Vec::new();
    // Read the change under the lock; the agent reviewers (minutes, perhaps) run without it.
    let (mut r, pull, open) = {
        let _lock = ws.lock()?;
        notes.extend(ws.forge.sync(ws, false)?);
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
        let provenance = view.provenance(&carried.pull.proposal);
        let (input, panel, _files) = panel::input(
            &ws.repo,
            carried.base,
            carried.head,
            eval.merge_tree,
            &provenance,
            None,
        )?;
        let defs = panel.defs.as_ref().map_err(|e| {
            Error::input(format!(
                "{e} (the panel is read from the proposal's base {}: fix the file there through a proposal)",
                carried.base
            ))
        })?;
        let agents: Vec<String> = defs
            .iter()
            .filter(|d| d.kind == Kind::Agent)
            .map(|d| d.name.clone())
            .collect();
        let mut findings = input.builtin;
        // Agent reviewers are not run by this build: each is a failed reviewer (never an
        // approval), so the verdict cannot pass for one they did not give.
        for name in &agents {
            findings.push(Finding {
                reviewer: name.clone(),
                severity: Severity::Major,
                category: "reviewer-failed".into(),
                file: None,
                line: None,
                message: format!("agent reviewer `{name}` was not run: this build cannot run agent reviewers yet"),
                hint: "remove the agent reviewer from reviewers/ through a proposal, or use a build that runs them".into(),
            });
        }
        let verdict = review::critic(&findings);
        let reviewers = defs.iter().map(|d| d.name.clone()).collect();
        let r = Review {
            proposal: carried.pull.proposal.clone(),
            base: carried.base.to_string(),
            head: carried.head.to_string(),
            tree: eval.merge_tree.map(|t| t.to_string()),
            panel: panel.digest(),
            verdict,
            summary: String::new(),
            findings,
            reviewers,
            origin: provenance.origin,
            recorded: None,
            notes: Vec::new(),
        };
        (r, carried.pull.number, eval.change.open)
    };
    r.summary = summary(&r);
    if !open {
        notes.push(format!(
            "proposal {} is closed or merged: the verdict was not recorded",
            r.proposal
        ));
    } else if ws.gate_key().is_err() {
        notes.push(
            "no gate key here: the verdict was not recorded (run `atelier review` on the gate's machine)"
                .into(),
        );
    } else {
        let _lock = ws.lock()?;
        let mut findings = r.findings.clone();
        findings.truncate(RECORDED_FINDINGS_MAX);
        let event = Event::ReviewRecorded {
            proposal: r.proposal.clone(),
            pull,
            review: RecordedReview {
                base: r.base.clone(),
                head: r.head.clone(),
                tree: r.tree.clone(),
                panel: r.panel.clone(),
                verdict: r.verdict,
                findings,
            },
            reviewers: r.reviewers.clone(),
            summary: r.summary.clone(),
        };
        let snapshot = ws.record(vec![event], now)?;
        r.recorded = snapshot
            .lines
            .last()
            .and_then(|l| crate::audit::ledger::Entry::parse(l).ok())
            .map(|e| e.seq);
        if let Err(e) = ws.forge.publish_ledger(ws) {
            notes.push(format!(
                "the verdict was recorded but the ledger was not pushed ({}); the next command that pushes it catches up",
                crate::errors::chain(&e)
            ));
        }
        // Show it where the forge shows the proposal, and the gate's verdict that weighs it.
        let view = ws.view()?;
        if let Ok(record) = ws.pull(&r.proposal) {
            if let Err(e) = ws.forge.publish_review(ws, &view, &record) {
                notes.push(format!(
                    "the pull request body was not updated: {}",
                    crate::errors::chain(&e)
                ));
            }
        }
        match super::gate::judge(
            ws,
            &view,
            addr,
            now,
            Publish::Verdict,
            Vec::new(),
            Vec::new(),
        ) {
            Ok(run) => {
                notes.extend(run.notes);
                if let Some(shown) = run.published {
                    notes.push(format!("the gate's verdict is shown: {shown}"));
                }
            }
            Err(e) => notes.push(format!(
                "the gate's verdict was not refreshed ({}); `atelier gate` does it",
                crate::errors::chain(&e)
            )),
        }
    }
    r.notes = notes;
    Ok(r)
}

/// The markdown people read: the verdict and the findings, at most [`SUMMARY_MAX`] characters.
pub fn summary(r: &Review) -> String {
    let mut t = format!(
        "**Review panel: {}** ({} finding(s); reviewers: {})\n",
        r.verdict.as_str(),
        r.findings.len(),
        r.reviewers.join(", ")
    );
    for f in &r.findings {
        t.push_str(&format!("\n- {}\n", finding_line(f)));
    }
    if t.chars().count() > SUMMARY_MAX {
        t = t.chars().take(SUMMARY_MAX - 1).collect::<String>() + "…";
    }
    t
}

/// One finding on one line: `[severity] reviewer file:line: message (hint: …)`.
pub fn finding_line(f: &Finding) -> String {
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
    format!(
        "[{sev}] {}{at}: {} (hint: {})",
        f.reviewer,
        f.message.replace('\n', " "),
        f.hint.replace('\n', " ")
    )
}
