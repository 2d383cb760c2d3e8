//! Atelier's own proposers, as domain work: `tune` (atelier.toml's `[conductor]` from what the
//! runs measured), `memory` (recurring errors become lessons in prompts/lessons.md), `lint`
//! (the protected branch's fix command for one family, kept when the gauntlet passes) and
//! `agent` (the `proposer` role plans toward a goal, the swarm runs the plan); and a finished
//! run proposed as it is. Each returns what it found and its [`Outcome`]; the cli reports it.
//!
//! It talks to the swarm's tune, lessons, stats, lint, planner and runtime, and opens
//! proposals through `workflow::propose`. It never prints.

use std::path::PathBuf;

use crate::governance::time::Timestamp;
use crate::improve::{lessons, tune};
use crate::swarm::stats;
use crate::workflow::{self, Error, ProposeOptions, Proposed, Result, Workspace};

/// The clock a proposer reads when it opens its proposal (the cli's announces an override).
pub type Clock<'a> = &'a dyn Fn() -> Result<Timestamp>;

/// How a proposer ended.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// It opened this proposal.
    Opened(Proposed),
    /// The data do not support a change: why (exit 1).
    Nothing(String),
    /// `--dry-run`: what it stopped short of (exit 0).
    DryRun(String),
}

impl Outcome {
    /// The proposal it opened, if it did.
    pub fn proposal(&self) -> Option<&Proposed> {
        match self {
            Outcome::Opened(p) => Some(p),
            _ => None,
        }
    }
}

/// What `tune` found and did.
#[derive(Debug)]
pub struct Tuned {
    pub tuning: tune::Tuning,
    pub outcome: Outcome,
}

/// `propose --from tune`: `[conductor]` changes the runs' measurements justify, from the
/// protected branch's atelier.toml and every run under `.atelier/runs/`.
pub fn tune(ws: &Workspace, dry_run: bool, clock: Clock<'_>) -> Result<Tuned> {
    let (repo, branch) = (&ws.repo, ws.branch().to_string());
    let (base, base_tree) = tip_of(ws)?;
    let where_ = format!("atelier.toml on {branch}");
    let text = crate::git::read_file(repo, &base_tree, "atelier.toml")?.ok_or_else(|| {
        Error::Input(format!(
            "{where_}: not found; tune changes the committed atelier.toml (commit one first)"
        ))
    })?;
    let text = String::from_utf8(text).map_err(|_| Error::Input(format!("{where_}: not UTF-8")))?;
    let config = crate::config::Config::parse(&where_, &text)?;
    let current = current_settings(&config.conductor);
    let logs = runs(ws)?;
    let tuning = tune::tune(&logs, current);
    let done = |outcome| {
        Ok(Tuned {
            tuning: tuning.clone(),
            outcome,
        })
    };
    if tuning.changes.is_empty() {
        return done(Outcome::Nothing(
            "the measurements do not support a change (above)".into(),
        ));
    }
    let edited = tune::edit_conductor(&text, &tuning.changes);
    check_edit(&where_, &edited, &tuning.changes)?;
    if dry_run {
        return done(Outcome::DryRun("nothing proposed".into()));
    }
    let title = format!(
        "tune: {}",
        tuning
            .changes
            .iter()
            .map(|c| format!("{} {} -> {}", c.key, c.from, c.to))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mut rationale = format!(
        "Proposed by atelier's `tune` proposer from {} run(s) recorded with the settings in force ({}).\n",
        tuning.runs.len(),
        tuning.runs.join(", ")
    );
    for c in &tuning.changes {
        rationale.push_str(&format!("\n- {} {} -> {}: {}.", c.key, c.from, c.to, c.why));
    }
    for u in &tuning.unchanged {
        rationale.push_str(&format!("\n- kept {u}."));
    }
    let edit = Edit {
        proposer: "tune",
        path: "atelier.toml",
        text: &edited,
        title,
        rationale,
    };
    let p = open_from(ws, base.id(), &base_tree, edit, clock)?;
    done(Outcome::Opened(p))
}

/// Every run under `.atelier/runs/`, as the proposers read them.
fn runs(ws: &Workspace) -> Result<Vec<stats::RunLog>> {
    stats::load(&ws.atelier_dir().join("runs"), None).map_err(|e| match e {
        stats::LoadError::Events(e) => Error::Events(e),
        other => Error::Input(other.to_string()),
    })
}

/// One file of the protected branch's tree, replaced by a proposer.
struct Edit<'a> {
    proposer: &'a str,
    path: &'a str,
    text: &'a str,
    title: String,
    rationale: String,
}

/// Opens the proposal a proposer wrote: one file of the protected branch's tree replaced,
/// recorded as an agent's (`agent atelier-NAME`) that declared only that file.
fn open_from(
    ws: &Workspace,
    base: git2::Oid,
    base_tree: &git2::Tree<'_>,
    edit: Edit<'_>,
    clock: Clock<'_>,
) -> Result<Proposed> {
    let patch = crate::git::patch_for(&ws.repo, base_tree, &[(edit.path, edit.text)])?;
    let file = tempfile::NamedTempFile::new()?;
    std::fs::write(file.path(), &patch)?;
    workflow::propose(
        ws,
        ProposeOptions {
            patch: file.path().to_path_buf(),
            title: edit.title,
            rationale: Some(edit.rationale),
            proposer: None,
            origin: Some(format!("agent atelier-{}", edit.proposer)),
            declared: Some(vec![edit.path.to_string()]),
            expect_base: Some(base),
        },
        clock()?,
    )
}

/// What `memory` found and did.
#[derive(Debug)]
pub struct Remembered {
    /// How many runs it read.
    pub runs: usize,
    /// The errors that recurred enough and are not yet lessons.
    pub found: Vec<lessons::Recurring>,
    pub outcome: Outcome,
}

/// `propose --from memory`: errors that recurred across tasks and runs, added to the protected
/// branch's `prompts/lessons.md`.
pub fn memory(ws: &Workspace, dry_run: bool, clock: Clock<'_>) -> Result<Remembered> {
    let (repo, branch) = (&ws.repo, ws.branch().to_string());
    let (base, base_tree) = tip_of(ws)?;
    let existing = crate::agent::prompt::text_on_branch(repo, &base_tree, lessons::PATH, &branch)?
        .unwrap_or_default();
    let logs = runs(ws)?;
    let found = lessons::recurring(&logs, &existing);
    let runs = logs.len();
    if found.is_empty() {
        let why = "no error recurred enough to become a lesson".to_string();
        return Ok(Remembered {
            runs,
            found,
            outcome: Outcome::Nothing(why),
        });
    }
    if dry_run {
        let outcome = Outcome::DryRun("nothing proposed".into());
        return Ok(Remembered {
            runs,
            found,
            outcome,
        });
    }
    let text = lessons::append(&existing, &found);
    let title = format!(
        "memory: {} lesson(s) from errors that recurred",
        found.len()
    );
    let mut rationale = format!(
        "Proposed by atelier's `memory` proposer from {runs} run(s): each error below failed attempts of at least {} distinct tasks over at least {} runs. Every worker prompt will carry these lines; reword or drop any before approving.\n",
        lessons::MIN_TASKS,
        lessons::MIN_RUNS
    );
    for r in &found {
        rationale.push_str(&format!(
            "\n- `{}`: {} tasks, runs {}.",
            r.error,
            r.tasks,
            r.runs.join(", ")
        ));
    }
    let edit = Edit {
        proposer: "memory",
        path: lessons::PATH,
        text: &text,
        title,
        rationale,
    };
    let p = open_from(ws, base.id(), &base_tree, edit, clock)?;
    Ok(Remembered {
        runs,
        found,
        outcome: Outcome::Opened(p),
    })
}

/// What `agent` planned, ran and did.
#[derive(Debug)]
pub struct Agented {
    pub goal: String,
    /// Where the proposer's plan is kept, whatever becomes of it.
    pub plan_file: PathBuf,
    pub planned: crate::improve::planner::Planned,
    pub run: Option<crate::swarm::runtime::RunSummary>,
    pub outcome: Outcome,
}

/// `propose --from agent --goal TEXT`: the `proposer` role writes a plan, the contract
/// validator checks it, the swarm runs it, and a fully successful run becomes the proposal.
pub fn agent(
    ws: &Workspace,
    goal: Option<&str>,
    dry_run: bool,
    clock: Clock<'_>,
) -> Result<Agented> {
    let goal = goal.ok_or_else(|| {
        Error::Input("--from agent needs --goal TEXT: what the change should achieve".into())
    })?;
    let now = clock()?;
    let planned = crate::improve::planner::plan(ws, goal, now)?;
    // Kept whatever becomes of it, so a refused plan can be read.
    let dir = ws.atelier_dir().join("proposers");
    std::fs::create_dir_all(&dir)?;
    let plan_file = dir.join(format!("plan-{now}-{}.toml", std::process::id()));
    crate::fsutil::atomic_write(&plan_file, planned.plan.as_bytes())?;
    let mut a = Agented {
        goal: goal.to_string(),
        plan_file,
        planned,
        run: None,
        outcome: Outcome::Nothing(
            "the contract validator refused the proposer's plan; no worker ran".into(),
        ),
    };
    if a.planned.unreadable.is_some() || !a.planned.refusals.is_empty() {
        return Ok(a);
    }
    if dry_run {
        a.outcome = Outcome::DryRun(
            "the plan passed the contract validator; nothing ran, nothing proposed".into(),
        );
        return Ok(a);
    }
    let clock = || crate::clock::now().map(|(t, _)| t).unwrap_or(0);
    let summary = crate::swarm::runtime::run(
        ws,
        crate::swarm::runtime::RunOptions {
            plan_files: vec![(a.plan_file.display().to_string(), a.planned.plan.clone())],
            max_parallel: None,
            resume: None,
            goal: Some(goal.to_string()),
        },
        &clock,
    )?;
    if !summary.ok() {
        a.run = Some(summary);
        a.outcome = Outcome::Nothing("the run did not succeed entirely".into());
        return Ok(a);
    }
    let p = crate::swarm::runtime::propose_run_as(
        ws,
        &summary,
        clock(),
        Some(crate::swarm::runtime::Authored {
            origin: "agent atelier-agent".into(),
            preface: format!(
                "Proposed by atelier's `agent` proposer toward the goal: {goal}\nThe `{}` role wrote the plan; it passed the contract validator before any worker ran.",
                crate::improve::planner::ROLE
            ),
        }),
    )?;
    a.run = Some(summary);
    a.outcome = Outcome::Opened(p);
    Ok(a)
}

/// What `lint` ran and did.
#[derive(Debug)]
pub struct Fixed {
    pub lint: crate::improve::lint::Linted,
    pub outcome: Outcome,
}

/// `propose --from lint --family F`: the protected branch's fix command for one family, kept
/// only when it changed something and the gauntlet still passes.
pub fn lint(
    ws: &Workspace,
    family: Option<&str>,
    dry_run: bool,
    clock: Clock<'_>,
) -> Result<Fixed> {
    let family = family.ok_or_else(|| {
        Error::Input(
            "--from lint needs --family NAME: one lint family per proposal (e.g. --family style)"
                .into(),
        )
    })?;
    let linted = crate::improve::lint::run(ws, family, clock()?)?;
    let stop = |lint, outcome| Ok(Fixed { lint, outcome });
    if linted.changed.is_empty() {
        let why = format!("the fix command changed nothing for family {family}");
        return stop(linted, Outcome::Nothing(why));
    }
    if let Some(why) = linted.failed.clone() {
        let why = format!("with the fixes, the gauntlet fails ({why})");
        return stop(linted, Outcome::Nothing(why));
    }
    if dry_run {
        return stop(linted, Outcome::DryRun("nothing proposed".into()));
    }
    let file = tempfile::NamedTempFile::new()?;
    std::fs::write(file.path(), &linted.patch)?;
    let title = format!("lint: {family} fixes in {} file(s)", linted.changed.len());
    let rationale = format!(
        "Proposed by atelier's `lint` proposer: `{}` (from [proposers.lint] on {}) run on {} in a fresh worktree, one family ({family}); the gauntlet passed on the fixed tree: {}.",
        linted.command.join(" "),
        ws.branch(),
        linted.base,
        if linted.steps.is_empty() {
            "(no gauntlet steps are configured)".to_string()
        } else {
            linted
                .steps
                .iter()
                .map(|s| format!("{} ({} ms)", s.name, s.ms))
                .collect::<Vec<_>>()
                .join(", ")
        }
    );
    let p = workflow::propose(
        ws,
        ProposeOptions {
            patch: file.path().to_path_buf(),
            title,
            rationale: Some(rationale),
            proposer: None,
            origin: Some("agent atelier-lint".into()),
            declared: Some(linted.changed.clone()),
            expect_base: git2::Oid::from_str(&linted.base).ok(),
        },
        clock()?,
    )?;
    stop(linted, Outcome::Opened(p))
}

/// The protected branch's tip and its tree: what a proposer reads and patches.
fn tip_of(ws: &Workspace) -> Result<(git2::Commit<'_>, git2::Tree<'_>)> {
    let base = ws
        .repo
        .find_commit(crate::git::branch_tip(&ws.repo, ws.branch())?)?;
    let tree = base.tree()?;
    Ok((base, tree))
}

/// The settings `tune` compares runs by, in seconds.
fn current_settings(c: &crate::config::ConductorConfig) -> tune::Current {
    tune::Current {
        nudge_after: c.nudge_after.secs(),
        restart_after: c.restart_after.secs(),
        attempt_timeout: c.attempt_timeout.secs(),
        failure_budget: c.failure_budget,
    }
}

/// The edited atelier.toml must load and hold exactly the intended values, else nothing is
/// proposed (a layout the line editor misread, such as dotted keys).
fn check_edit(where_: &str, edited: &str, changes: &[tune::Change]) -> Result<()> {
    let fail = |why: String| {
        Error::Input(format!(
            "{where_}: tune could not edit [conductor] safely ({why}); make the change by hand: {}",
            changes
                .iter()
                .map(|c| format!("{} = {}", c.key, c.toml))
                .collect::<Vec<_>>()
                .join(", ")
        ))
    };
    let config = crate::config::Config::parse(where_, edited).map_err(|e| fail(e.to_string()))?;
    let got = current_settings(&config.conductor);
    for c in changes {
        let value = match c.key.as_str() {
            "restart_after" => crate::governance::time::format_duration(got.restart_after as i64),
            "attempt_timeout" => {
                crate::governance::time::format_duration(got.attempt_timeout as i64)
            }
            "failure_budget" => got.failure_budget.to_string(),
            other => return Err(fail(format!("unknown key {other}"))),
        };
        if value != c.to {
            return Err(fail(format!(
                "{} reads {value} after the edit, not {}",
                c.key, c.to
            )));
        }
    }
    Ok(())
}

/// `propose --run RUN`: a finished, fully successful run, proposed without running anything.
pub fn finished_run(ws: &Workspace, run: &str, clock: Clock<'_>) -> Result<Proposed> {
    use crate::swarm::events::{self, RunEvent};
    let dir = crate::swarm::runtime::run_dir(ws, run);
    let path = dir.join("events.jsonl");
    if !path.is_file() {
        return Err(Error::Input(format!(
            "--run {run}: no such run (no {}); `atelier stats` lists the runs",
            path.display()
        )));
    }
    let records = events::read(&path)?;
    let finished = records.iter().rev().find_map(|r| match &r.event {
        RunEvent::RunFinished {
            failed,
            blocked,
            skipped,
            ..
        } => Some((*failed, *blocked, *skipped)),
        _ => None,
    });
    match finished {
        None => {
            return Err(Error::Input(format!(
                "--run {run}: the run has not finished; `atelier run --resume {run}` continues it (add --propose to propose it when it succeeds)"
            )))
        }
        Some((failed, blocked, skipped)) if failed + blocked + skipped > 0 => {
            return Err(Error::Input(format!(
                "--run {run}: {failed} task(s) failed, {blocked} were blocked and {skipped} skipped; only a run whose every task succeeded becomes a proposal (`atelier status {run}` shows why; fix what failed and run the plans again with `atelier run PLAN.toml --propose`)"
            )))
        }
        Some(_) => {}
    }
    if let Some(id) = proposed_already(ws, run)? {
        return Err(Error::Input(format!(
            "--run {run}: the run was proposed already, as proposal {id} (`atelier show {id}`)"
        )));
    }
    // The run is finished: resuming it starts nothing and gives back its summary.
    let run_clock = || crate::clock::now().map(|(t, _)| t).unwrap_or(0);
    let summary = crate::swarm::runtime::run(
        ws,
        crate::swarm::runtime::RunOptions {
            plan_files: Vec::new(),
            max_parallel: None,
            resume: Some(run.to_string()),
            goal: None,
        },
        &run_clock,
    )?;
    crate::swarm::runtime::propose_run(ws, &summary, clock()?)
}

/// The proposal run `run` became, if it became one: a run becomes one proposal, and the
/// ledger says whether it already did.
fn proposed_already(ws: &Workspace, run: &str) -> Result<Option<String>> {
    let view = ws.view()?;
    let suffix = format!("swarm run {run}");
    Ok(view.events.iter().find_map(|e| match e {
        crate::audit::ledger::Event::ProposalOpened {
            proposal,
            origin: Some(o),
            ..
        } if o == &suffix || o.ends_with(&format!(", {suffix}")) => Some(proposal.clone()),
        _ => None,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conductor(restart_after: &str, failure_budget: u32) -> crate::config::ConductorConfig {
        let text = format!(
            "[forge]\nrepository = \"local/x\"\n\n[conductor]\nrestart_after = \"{restart_after}\"\nfailure_budget = {failure_budget}\n"
        );
        crate::config::Config::parse("test", &text)
            .expect("a [conductor] section loads")
            .conductor
    }

    #[test]
    fn current_settings_are_in_seconds() {
        let got = current_settings(&conductor("10m", 3));
        assert_eq!(got.restart_after, 600);
        assert_eq!(got.nudge_after, 300, "the default nudge_after");
        assert_eq!(got.failure_budget, 3);
    }

    #[test]
    fn an_edit_that_holds_the_intended_values_passes_and_one_that_does_not_is_refused() {
        let change = |key: &str, to: &str| tune::Change {
            key: key.into(),
            from: String::new(),
            to: to.into(),
            toml: format!("\"{to}\""),
            why: String::new(),
        };
        let edited = "[forge]\nrepository = \"local/x\"\n\n[conductor]\nrestart_after = \"5m\"\n";
        check_edit("atelier.toml", edited, &[change("restart_after", "5m")])
            .expect("the edit holds 5m");
        let e = check_edit("atelier.toml", edited, &[change("restart_after", "10m")])
            .expect_err("the edit holds 5m, not 10m");
        assert!(
            e.to_string()
                .contains("restart_after reads 5m after the edit, not 10m"),
            "{e}"
        );
    }

    #[test]
    fn an_outcome_names_its_proposal_only_when_it_opened_one() {
        assert!(Outcome::Nothing("no".into()).proposal().is_none());
        assert!(Outcome::DryRun("no".into()).proposal().is_none());
    }
}
