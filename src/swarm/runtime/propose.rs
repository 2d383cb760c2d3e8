//! A finished run becomes a proposal (`run --propose`, and the `agent` proposer): only a run
//! every task of which succeeded, only after the scrutiny validator (`improve::scrutiny`) passed
//! its evidence, only while the run branch is where the conductor left it. The proposal carries
//! the run's combined change (base to tip), its plans' contracts in the rationale and the
//! tasks' claims as the declared scope.
//!
//! Talks to `improve::scrutiny`, `events` (the run's base), `git` and `workflow::propose`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use git2::Oid;

use super::{run_dir, RunSummary};
use crate::git;
use crate::governance::review::Severity;
use crate::governance::time::Timestamp;
use crate::governance::Code;
use crate::improve::scrutiny::{self, Scrutiny};
use crate::swarm::events::{self, RunEvent};
use crate::swarm::plan::{self, Plan};
use crate::workflow::error::{Context, Result};
use crate::workflow::Workspace;

/// Opens a proposal with a finished run's combined change, its contracts and its evidence.
pub fn propose_run(
    ws: &Workspace,
    summary: &RunSummary,
    now: Timestamp,
) -> Result<crate::workflow::Proposed> {
    propose_run_as(ws, summary, now, None)
}

/// Who asked for a run's proposal when it was not a person's `run --propose`: the origin the
/// ledger records, and the text that opens the rationale.
pub struct Authored {
    pub origin: String,
    pub preface: String,
}

/// [`propose_run`], recording `by` (one of atelier's proposers) as the proposal's origin.
pub fn propose_run_as(
    ws: &Workspace,
    summary: &RunSummary,
    now: Timestamp,
    by: Option<Authored>,
) -> Result<crate::workflow::Proposed> {
    if !summary.ok() {
        return Err(crate::workflow::Error::Input(format!(
            "run {} did not succeed entirely; only a fully successful run becomes a proposal",
            summary.run
        )));
    }
    let dir = run_dir(ws, &summary.run);
    let scrutiny = scrutinized(ws, summary, &dir)?;
    let records = events::read(&dir.join("events.jsonl"))?;
    let (base, plans) = records
        .iter()
        .find_map(|r| match &r.event {
            RunEvent::RunStarted { base, plans, .. } => Some((base.clone(), plans.clone())),
            _ => None,
        })
        .context("the run has no run-started event")?;
    let patch = combined_patch(ws, summary, &base, &dir)?;
    let plan_files = kept_plans(&dir)?;
    let rationale = rationale(
        by.as_ref(),
        summary,
        &ws.root,
        &plans,
        &scrutiny,
        &plan_files,
    );
    let title = plan_files
        .iter()
        .map(|p| p.title.clone())
        .collect::<Vec<_>>()
        .join(" + ");
    crate::workflow::propose(
        ws,
        crate::workflow::ProposeOptions {
            patch,
            title,
            rationale: Some(rationale),
            proposer: None,
            origin: Some(match &by {
                Some(b) => format!("{}, swarm run {}", b.origin, summary.run),
                None => format!("swarm run {}", summary.run),
            }),
            // The tasks' claims: the `scope` reviewer flags any change outside them.
            declared: Some(claims(&plan_files)),
            expect_base: None,
        },
        now,
    )
    .map_err(|e| match e {
        // A run's change has no patch of the user's to rebase: the run is what to do again.
        crate::workflow::Error::Patch(crate::git::PatchError::DoesNotApply {
            branch, tip, reason, ..
        }) => crate::workflow::Error::Input(format!(
            "run {}'s change does not apply to {branch} at {tip}, as `git apply` judges it: {reason}; {branch} moved since the run started: run its plans again from the new tip (`atelier run PLAN.toml --propose`)",
            summary.run
        )),
        e => e,
    })
}

/// The scrutiny validator first: its result is kept in the run's `scrutiny.json`, and a run
/// whose evidence does not hold is not proposed.
fn scrutinized(ws: &Workspace, summary: &RunSummary, dir: &Path) -> Result<Scrutiny> {
    let scrutiny = scrutiny::scrutinize(ws, &summary.run)?;
    crate::fsutil::atomic_write(
        &dir.join("scrutiny.json"),
        serde_json::to_string_pretty(&scrutiny)
            .expect("a scrutiny always serializes")
            .as_bytes(),
    )?;
    if !scrutiny.passed() {
        return Err(crate::workflow::refuse(
            Code::ScrutinyFailed,
            format!(
                "the scrutiny validator's verdict on run {} is block (expected: approve or revise); nothing was proposed:\n  {}\n`atelier validate {}` shows the evidence",
                summary.run,
                scrutiny
                    .findings
                    .iter()
                    .filter(|f| f.severity == Severity::Blocking)
                    .map(|f| format!("{} {}: {}", f.reviewer, f.category, f.message))
                    .collect::<Vec<_>>()
                    .join("\n  "),
                summary.run
            ),
        ));
    }
    Ok(scrutiny)
}

/// The run's change from `base` to the tip the conductor recorded, written to the run's
/// `proposal.patch` (its path returned); only while the run branch is at that tip, and only
/// when the run changed something.
fn combined_patch(ws: &Workspace, summary: &RunSummary, base: &str, dir: &Path) -> Result<PathBuf> {
    let repo = &ws.repo;
    let base_tree = repo.find_commit(Oid::from_str(base)?)?.tree()?;
    // The proposal is built from the tip the conductor recorded, and only while the branch is there.
    let tip = Oid::from_str(&summary.tip)?;
    let actual = git::branch_tip(repo, &summary.branch)?;
    if actual != tip {
        return Err(crate::workflow::refuse(
            Code::RunBranchMoved,
            format!(
                "{} is at {actual}, but the run ended at {tip}; nothing was proposed",
                summary.branch
            ),
        ));
    }
    let tip_tree = repo.find_commit(tip)?.tree()?;
    let patch = git::diff_text(repo, &base_tree, &tip_tree)?;
    if patch.is_empty() {
        return Err(crate::workflow::Error::Input(format!(
            "run {} changed nothing; there is nothing to propose",
            summary.run
        )));
    }
    let patch_path = dir.join("proposal.patch");
    crate::fsutil::atomic_write(&patch_path, &patch)?;
    Ok(patch_path)
}

/// The plans the run kept in its directory, parsed, in their order.
fn kept_plans(dir: &Path) -> Result<Vec<Plan>> {
    let mut names: Vec<PathBuf> = std::fs::read_dir(dir.join("plans"))?
        .flatten()
        .map(|e| e.path())
        .collect();
    names.sort();
    let mut plan_files = Vec::new();
    for p in names {
        plan_files.push(plan::parse(
            &p.display().to_string(),
            &std::fs::read_to_string(&p)?,
        )?);
    }
    Ok(plan_files)
}

/// The proposal's rationale: who asked, the run and its evidence (a path relative to the
/// repository `root`), the scrutiny validator's verdict, and every task's contract.
fn rationale(
    by: Option<&Authored>,
    summary: &RunSummary,
    root: &Path,
    plans: &[String],
    scrutiny: &Scrutiny,
    plan_files: &[Plan],
) -> String {
    let mut rationale = format!(
        "{}Produced by swarm run {} (plans {}); every task passed the gauntlet and its contract checks. Evidence: {} in the proposer's clone.\n",
        by.map(|b| format!("{}\n\n", b.preface)).unwrap_or_default(),
        summary.run,
        plans.join(", "),
        // Relative to the repository: a local absolute path means nothing to reviewers and
        // tells them about the proposer's machine.
        Path::new(&summary.events)
            .strip_prefix(root)
            .map_or_else(|_| format!(".atelier/runs/{}/events.jsonl", summary.run), |p| p.display().to_string())
    );
    rationale.push_str(&format!(
        "Scrutiny validator: {} ({} of {} checks with a passing record at the attempt that passed; {} finding(s)).\n",
        scrutiny.verdict.as_str(),
        scrutiny
            .evidence
            .iter()
            .filter(|e| e.kind == "check" && e.passed_at.is_some())
            .count(),
        scrutiny.evidence.iter().filter(|e| e.kind == "check").count(),
        scrutiny.findings.len()
    ));
    for p in plan_files {
        for t in &p.tasks {
            rationale.push_str(&format!(
                "\n{} {}: criteria: {}; checks: {}",
                t.key,
                t.title,
                t.contract.criteria.join("; "),
                t.contract.checks.join("; ")
            ));
        }
    }
    rationale
}

/// Every task's claims, once each, in order: the scope the proposal declares.
fn claims(plan_files: &[Plan]) -> Vec<String> {
    plan_files
        .iter()
        .flat_map(|p| p.tasks.iter().flat_map(|t| t.files.iter().cloned()))
        .collect::<BTreeSet<String>>()
        .into_iter()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::governance::review::Verdict;

    fn plan_file() -> Plan {
        plan::parse(
            "p.toml",
            "[plan]\nid = \"p\"\ntitle = \"P\"\n\n[[task]]\nid = \"A\"\ntitle = \"Write a\"\nrole = \"implementer\"\ngoal = \"g\"\nfiles = [\"src/b.rs\", \"src/a.rs\"]\n[task.contract]\ncriteria = [\"a holds\"]\nchecks = [\"grep -q a src/a.rs\"]\n\n[[task]]\nid = \"B\"\ntitle = \"Write b\"\nrole = \"implementer\"\ngoal = \"g\"\nfiles = [\"src/b.rs\"]\n[task.contract]\ncriteria = [\"b holds\", \"and more\"]\nchecks = [\"true\"]\n",
        )
        .expect("the plan parses")
    }

    fn summary(events: &str) -> RunSummary {
        RunSummary {
            run: "r7".into(),
            branch: "atelier/runs/r7".into(),
            tip: String::new(),
            events: events.into(),
            succeeded: vec!["p:A".into(), "p:B".into()],
            failed: Default::default(),
            blocked: Default::default(),
            skipped: vec![],
            containment: "landlock".into(),
        }
    }

    fn scrutiny() -> Scrutiny {
        Scrutiny {
            run: "r7".into(),
            verdict: Verdict::Approve,
            evidence: vec![
                scrutiny::Evidence {
                    task: "p:A".into(),
                    check: "grep -q a src/a.rs".into(),
                    passed_at: Some(1),
                    kind: "check",
                },
                scrutiny::Evidence {
                    task: "p:B".into(),
                    check: "true".into(),
                    passed_at: None,
                    kind: "check",
                },
            ],
            findings: vec![],
        }
    }

    #[test]
    fn the_rationale_names_the_run_its_evidence_and_every_contract() {
        let by = Authored {
            origin: "agent proposer".into(),
            preface: "Goal: tidy".into(),
        };
        let text = rationale(
            Some(&by),
            &summary("/home/me/repo/.atelier/runs/r7/events.jsonl"),
            Path::new("/home/me/repo"),
            &["p".to_string()],
            &scrutiny(),
            &[plan_file()],
        );
        assert_eq!(
            text,
            "Goal: tidy\n\nProduced by swarm run r7 (plans p); every task passed the gauntlet and its contract checks. Evidence: .atelier/runs/r7/events.jsonl in the proposer's clone.\n\
             Scrutiny validator: approve (1 of 2 checks with a passing record at the attempt that passed; 0 finding(s)).\n\
             \np:A Write a: criteria: a holds; checks: grep -q a src/a.rs\
             \np:B Write b: criteria: b holds; and more; checks: true"
        );
    }

    #[test]
    fn an_events_path_outside_the_repository_is_never_shown() {
        let text = rationale(
            None,
            &summary("/elsewhere/events.jsonl"),
            Path::new("/home/me/repo"),
            &[],
            &scrutiny(),
            &[],
        );
        assert!(text.starts_with("Produced by swarm run r7"), "{text}");
        assert!(
            text.contains("Evidence: .atelier/runs/r7/events.jsonl in"),
            "{text}"
        );
        assert!(!text.contains("/elsewhere"), "{text}");
    }

    #[test]
    fn the_declared_scope_is_every_claim_once() {
        assert_eq!(claims(&[plan_file()]), ["src/a.rs", "src/b.rs"]);
    }
}
