//! `atelier propose` and `atelier proposals`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;

use super::{json, now, out};
use crate::improve::{lessons, tune};
use crate::swarm::stats;
use crate::workflow::{self, ProposeOptions, Workspace};

#[derive(Args, Debug)]
pub struct ProposeArgs {
    /// Set by `atelier cycle`: the proposer's report goes to stderr, no JSON.
    #[arg(skip)]
    pub(super) for_cycle: bool,
    /// A patch in `git diff` format (or a plain unified diff), against the protected branch's
    /// tip.
    #[arg(long, required_unless_present_any = ["from", "run"], conflicts_with_all = ["from", "run"])]
    pub(super) patch: Option<PathBuf>,
    /// A one-line title.
    #[arg(long, required_unless_present_any = ["from", "run"], conflicts_with = "run")]
    pub(super) title: Option<String>,
    /// A finished run whose every task succeeded: its combined change becomes the proposal, as
    /// `run --propose` would have made it (`atelier status` lists the runs).
    #[arg(long, value_name = "RUN", conflicts_with_all = ["from", "agent", "rationale"])]
    pub(super) run: Option<String>,
    /// Let one of atelier's proposers write the change: `tune` (atelier.toml's [conductor]
    /// settings from what the runs measured) or `memory` (recurring errors become lessons in
    /// prompts/lessons.md). Exit 1, proposing nothing, when the data do not support a change.
    #[arg(long, value_name = "PROPOSER", conflicts_with = "agent")]
    pub(super) from: Option<String>,
    /// With --from agent: what the change should achieve (the `proposer` role plans toward it).
    #[arg(long, value_name = "TEXT")]
    pub(super) goal: Option<String>,
    /// With --from lint: the lint family to fix (one family per proposal).
    #[arg(long, value_name = "FAMILY")]
    pub(super) family: Option<String>,
    /// With --from: print what would be proposed, and why, without proposing it.
    #[arg(long, requires = "from")]
    pub(super) dry_run: bool,
    /// With --from: print the proposer's decision as JSON.
    #[arg(long, requires = "from")]
    pub(super) json: bool,
    /// Why this change.
    #[arg(long)]
    pub(super) rationale: Option<String>,
    /// The agent that wrote the patch (e.g. `claude-code`): recorded in the ledger, it only adds
    /// scrutiny (the review panel's judge-tamper reviewer blocks an agent's change to what
    /// judges it).
    #[arg(long, value_name = "NAME")]
    pub(super) agent: Option<String>,
}

pub fn propose(dir: &Path, args: ProposeArgs) -> anyhow::Result<ExitCode> {
    let ws = Workspace::open(dir)?;
    if let Some(run) = &args.run {
        return propose_finished_run(&ws, run);
    }
    if let Some(from) = &args.from {
        if args.title.is_some() {
            return Err(workflow::Error::Input(
                "--title: a proposer writes its own title; leave --title out with --from".into(),
            )
            .into());
        }
        return Ok(run_proposer(&ws, from, &args)?.code);
    }
    let now = now()?;
    let p = workflow::propose(
        &ws,
        ProposeOptions {
            patch: args.patch.expect("clap requires --patch without --from"),
            title: args.title.expect("clap requires --title without --from"),
            rationale: args.rationale,
            proposer: None,
            origin: args.agent.map(|a| format!("agent {a}")),
            declared: None,
            expect_base: None,
        },
        now,
    )?;
    super::note!(
        "proposal {} opened on branch {} (head {}, base {})",
        p.id,
        p.branch,
        p.head,
        p.base
    );
    out(&format!("{}\n", p.id))?;
    Ok(ExitCode::SUCCESS)
}

/// What one of atelier's proposers did: its exit code, and the proposal if it opened one.
pub(super) struct Proposer {
    pub code: ExitCode,
    pub proposed: Option<workflow::Proposed>,
}

impl Proposer {
    fn nothing(code: u8) -> anyhow::Result<Proposer> {
        Ok(Proposer {
            code: ExitCode::from(code),
            proposed: None,
        })
    }
    fn opened(p: workflow::Proposed) -> anyhow::Result<Proposer> {
        Ok(Proposer {
            code: ExitCode::SUCCESS,
            proposed: Some(p),
        })
    }
}

/// Runs the proposer `from` (`tune`, `memory`, `lint`, `agent`).
pub(super) fn run_proposer(
    ws: &Workspace,
    from: &str,
    args: &ProposeArgs,
) -> anyhow::Result<Proposer> {
    match from {
        "tune" => tune(ws, args),
        "memory" => memory(ws, args),
        "lint" => lint(ws, args),
        "agent" => agent(ws, args),
        other => Err(workflow::Error::Input(format!(
            "--from {other}: no such proposer; atelier has `tune`, `memory`, `lint` and `agent`"
        ))
        .into()),
    }
}

/// A proposer's human report: stdout, or stderr within `atelier cycle`.
fn say(args: &ProposeArgs, text: &str) -> anyhow::Result<()> {
    if args.for_cycle {
        super::err_text(text);
        Ok(())
    } else {
        out(text)
    }
}

/// What `propose --from tune` prints with `--json`: the decision, and the proposal if one was
/// opened.
#[derive(serde::Serialize)]
struct TuneOutput<'a> {
    tuning: &'a tune::Tuning,
    proposal: Option<workflow::Proposed>,
}

/// `propose --from tune`: `[conductor]` changes the runs' measurements justify, from the
/// protected branch's atelier.toml and every run under `.atelier/runs/`.
fn tune(ws: &Workspace, args: &ProposeArgs) -> anyhow::Result<Proposer> {
    let (repo, branch) = (&ws.repo, ws.branch().to_string());
    let (base, base_tree) = tip_of(ws)?;
    let where_ = format!("atelier.toml on {branch}");
    let text = crate::git::read_file(repo, &base_tree, "atelier.toml")?.ok_or_else(|| {
        workflow::Error::Input(format!(
            "{where_}: not found; tune changes the committed atelier.toml (commit one first)"
        ))
    })?;
    let text = String::from_utf8(text)
        .map_err(|_| workflow::Error::Input(format!("{where_}: not UTF-8")))?;
    let config = crate::config::Config::parse(&where_, &text)?;
    let current = current_settings(&config.conductor);
    let logs = stats::load(&ws.atelier_dir().join("runs"), None)?;
    let tuning = tune::tune(&logs, current);
    let report = |proposal: Option<workflow::Proposed>| -> anyhow::Result<()> {
        if args.json && !args.for_cycle {
            return json(&TuneOutput {
                tuning: &tuning,
                proposal,
            });
        }
        let mut t = format!(
            "tune read {} run(s) recorded with the settings in force{}
",
            tuning.runs.len(),
            if tuning.excluded.is_empty() {
                String::new()
            } else {
                format!(
                    " ({} left out: {})",
                    tuning.excluded.len(),
                    tuning
                        .excluded
                        .iter()
                        .map(|(r, why)| format!("{r} {why}"))
                        .collect::<Vec<_>>()
                        .join("; ")
                )
            }
        );
        for c in &tuning.changes {
            t.push_str(&format!(
                "change {} {} -> {}: {}
",
                c.key, c.from, c.to, c.why
            ));
        }
        for u in &tuning.unchanged {
            t.push_str(&format!(
                "keep {u}
"
            ));
        }
        if let Some(p) = &proposal {
            t.push_str(&format!(
                "{}
",
                p.id
            ));
        }
        say(args, &t)
    };
    if tuning.changes.is_empty() {
        report(None)?;
        super::note!("nothing proposed: the measurements do not support a change (above)");
        return Proposer::nothing(1);
    }
    let edited = tune::edit_conductor(&text, &tuning.changes);
    check_edit(&where_, &edited, &tuning.changes)?;
    if args.dry_run {
        report(None)?;
        super::note!("dry run: nothing proposed");
        return Proposer::nothing(0);
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
    let p = open_from(
        ws,
        "tune",
        base.id(),
        &base_tree,
        "atelier.toml",
        &edited,
        title,
        rationale,
    )?;
    report(Some(p.clone()))?;
    Proposer::opened(p)
}

/// Opens the proposal a proposer wrote: one file of the protected branch's tree replaced,
/// recorded as an agent's (`agent atelier-NAME`) that declared only that file.
#[allow(clippy::too_many_arguments)]
fn open_from(
    ws: &Workspace,
    proposer: &str,
    base: git2::Oid,
    base_tree: &git2::Tree<'_>,
    path: &str,
    text: &str,
    title: String,
    rationale: String,
) -> anyhow::Result<workflow::Proposed> {
    let patch = crate::git::patch_for(&ws.repo, base_tree, &[(path, text)])?;
    let file = tempfile::NamedTempFile::new()?;
    std::fs::write(file.path(), &patch)?;
    let p = workflow::propose(
        ws,
        ProposeOptions {
            patch: file.path().to_path_buf(),
            title,
            rationale: Some(rationale),
            proposer: None,
            origin: Some(format!("agent atelier-{proposer}")),
            declared: Some(vec![path.to_string()]),
            expect_base: Some(base),
        },
        now()?,
    )?;
    super::note!(
        "proposal {} opened on branch {} (head {}, base {})",
        p.id,
        p.branch,
        p.head,
        p.base
    );
    Ok(p)
}

/// What `propose --from memory --json` prints.
#[derive(serde::Serialize)]
struct MemoryOutput {
    lessons: Vec<lessons::Recurring>,
    min_tasks: usize,
    min_runs: usize,
    proposal: Option<workflow::Proposed>,
}

/// `propose --from memory`: errors that recurred across tasks and runs, added to the protected
/// branch's `prompts/lessons.md`.
fn memory(ws: &Workspace, args: &ProposeArgs) -> anyhow::Result<Proposer> {
    let (repo, branch) = (&ws.repo, ws.branch().to_string());
    let (base, base_tree) = tip_of(ws)?;
    let existing = crate::agent::prompt::text_on_branch(repo, &base_tree, lessons::PATH, &branch)?
        .unwrap_or_default();
    let logs = stats::load(&ws.atelier_dir().join("runs"), None)?;
    let found = lessons::recurring(&logs, &existing);
    let report = |proposal: Option<workflow::Proposed>, found: Vec<lessons::Recurring>| {
        if args.json && !args.for_cycle {
            return json(&MemoryOutput {
                lessons: found,
                min_tasks: lessons::MIN_TASKS,
                min_runs: lessons::MIN_RUNS,
                proposal,
            });
        }
        let mut t = format!(
            "memory read {} run(s): {} error(s) failed {}+ tasks over {}+ runs and are not yet lessons\n",
            logs.len(),
            found.len(),
            lessons::MIN_TASKS,
            lessons::MIN_RUNS
        );
        for r in &found {
            t.push_str(&format!("lesson {}\n", r.line()));
        }
        if let Some(p) = &proposal {
            t.push_str(&format!("{}\n", p.id));
        }
        say(args, &t)
    };
    if found.is_empty() {
        report(None, found)?;
        super::note!("nothing proposed: no error recurred enough to become a lesson");
        return Proposer::nothing(1);
    }
    if args.dry_run {
        report(None, found)?;
        super::note!("dry run: nothing proposed");
        return Proposer::nothing(0);
    }
    let text = lessons::append(&existing, &found);
    let title = format!(
        "memory: {} lesson(s) from errors that recurred",
        found.len()
    );
    let mut rationale = format!(
        "Proposed by atelier's `memory` proposer from {} run(s): each error below failed attempts of at least {} distinct tasks over at least {} runs. Every worker prompt will carry these lines; reword or drop any before approving.\n",
        logs.len(),
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
    let p = open_from(
        ws,
        "memory",
        base.id(),
        &base_tree,
        lessons::PATH,
        &text,
        title,
        rationale,
    )?;
    report(Some(p.clone()), found)?;
    Proposer::opened(p)
}

/// What `propose --from agent --json` prints.
#[derive(serde::Serialize)]
struct AgentOutput {
    goal: String,
    plan_file: String,
    planned: crate::improve::planner::Planned,
    run: Option<crate::swarm::runtime::RunSummary>,
    proposal: Option<workflow::Proposed>,
}

/// `propose --from agent --goal TEXT`: the `proposer` role writes a plan, the contract
/// validator checks it, the swarm runs it, and a fully successful run becomes the proposal.
fn agent(ws: &Workspace, args: &ProposeArgs) -> anyhow::Result<Proposer> {
    let goal = args.goal.as_deref().ok_or_else(|| {
        workflow::Error::Input(
            "--from agent needs --goal TEXT: what the change should achieve".into(),
        )
    })?;
    let now = now()?;
    let planned = crate::improve::planner::plan(ws, goal, now)?;
    // Kept whatever becomes of it, so a refused plan can be read.
    let dir = ws.atelier_dir().join("proposers");
    std::fs::create_dir_all(&dir)?;
    let plan_file = dir.join(format!("plan-{now}-{}.toml", std::process::id()));
    crate::fsutil::atomic_write(&plan_file, planned.plan.as_bytes())?;
    let mut output = AgentOutput {
        goal: goal.to_string(),
        plan_file: plan_file.display().to_string(),
        planned,
        run: None,
        proposal: None,
    };
    let report = |o: &AgentOutput| -> anyhow::Result<()> {
        if args.json && !args.for_cycle {
            return json(o);
        }
        let mut t = format!("the proposer's plan: {}\n", o.plan_file);
        if let Some(why) = &o.planned.unreadable {
            t.push_str(&format!("  not a plan: {why}\n"));
        }
        for r in &o.planned.refusals {
            t.push_str(&format!("  refused: {} {}\n", r.code, r.message));
        }
        if let Some(run) = &o.run {
            t.push_str(&format!(
                "run {}: {} succeeded, {} failed, {} blocked (events: {})\n",
                run.run,
                run.succeeded.len(),
                run.failed.len(),
                run.blocked.len(),
                run.events
            ));
        }
        if let Some(p) = &o.proposal {
            t.push_str(&format!("{}\n", p.id));
        }
        say(args, &t)
    };
    if output.planned.unreadable.is_some() || !output.planned.refusals.is_empty() {
        report(&output)?;
        super::note!(
            "nothing proposed: the contract validator refused the proposer's plan; no worker ran"
        );
        return Proposer::nothing(1);
    }
    if args.dry_run {
        if !args.json {
            say(args, &output.planned.plan)?;
        }
        report(&output)?;
        super::note!(
            "dry run: the plan passed the contract validator; nothing ran, nothing proposed"
        );
        return Proposer::nothing(0);
    }
    let clock = || crate::clock::now().map(|(t, _)| t).unwrap_or(0);
    let summary = crate::swarm::runtime::run(
        ws,
        crate::swarm::runtime::RunOptions {
            plan_files: vec![(plan_file.display().to_string(), output.planned.plan.clone())],
            max_parallel: None,
            resume: None,
            goal: Some(goal.to_string()),
        },
        &clock,
    )?;
    if !summary.ok() {
        output.run = Some(summary);
        report(&output)?;
        super::note!("nothing proposed: the run did not succeed entirely");
        return Proposer::nothing(1);
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
    super::note!(
        "proposal {} opened on branch {} (head {}, base {})",
        p.id,
        p.branch,
        p.head,
        p.base
    );
    output.run = Some(summary);
    output.proposal = Some(p.clone());
    report(&output)?;
    Proposer::opened(p)
}

/// What `propose --from lint --json` prints.
#[derive(serde::Serialize)]
struct LintOutput {
    lint: crate::improve::lint::Linted,
    proposal: Option<workflow::Proposed>,
}

/// `propose --from lint --family F`: the protected branch's fix command for one family, kept
/// only when it changed something and the gauntlet still passes.
fn lint(ws: &Workspace, args: &ProposeArgs) -> anyhow::Result<Proposer> {
    let family = args.family.as_deref().ok_or_else(|| {
        workflow::Error::Input(
            "--from lint needs --family NAME: one lint family per proposal (e.g. --family style)"
                .into(),
        )
    })?;
    let linted = crate::improve::lint::run(ws, family, now()?)?;
    if !linted.contained {
        super::note!("WARNING: the fix command and the gauntlet ran uncontained ([swarm] containment = \"none\", merged)");
    }
    let report = |linted: crate::improve::lint::Linted, proposal: Option<workflow::Proposed>| {
        if args.json && !args.for_cycle {
            return json(&LintOutput {
                lint: linted,
                proposal,
            });
        }
        let mut t = format!(
            "lint ran `{}` on {} ({}): {} file(s) changed\n",
            linted.command.join(" "),
            ws.branch(),
            &linted.base[..12.min(linted.base.len())],
            linted.changed.len()
        );
        for f in &linted.changed {
            t.push_str(&format!("  {f}\n"));
        }
        for s in &linted.steps {
            t.push_str(&format!(
                "gauntlet {}: {} ({} ms)\n",
                s.name,
                if s.passed { "passed" } else { "FAILED" },
                s.ms
            ));
        }
        if let Some(p) = &proposal {
            t.push_str(&format!("{}\n", p.id));
        }
        say(args, &t)
    };
    if linted.changed.is_empty() {
        report(linted, None)?;
        super::note!("nothing proposed: the fix command changed nothing for family {family}");
        return Proposer::nothing(1);
    }
    if let Some(why) = linted.failed.clone() {
        report(linted, None)?;
        super::note!("nothing proposed: with the fixes, the gauntlet fails ({why})");
        return Proposer::nothing(1);
    }
    if args.dry_run {
        report(linted, None)?;
        super::note!("dry run: nothing proposed");
        return Proposer::nothing(0);
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
        now()?,
    )?;
    super::note!(
        "proposal {} opened on branch {} (head {}, base {})",
        p.id,
        p.branch,
        p.head,
        p.base
    );
    report(linted, Some(p.clone()))?;
    Proposer::opened(p)
}

/// The protected branch's tip and its tree: what a proposer reads and patches.
fn tip_of(ws: &Workspace) -> anyhow::Result<(git2::Commit<'_>, git2::Tree<'_>)> {
    let base = ws
        .repo
        .find_commit(crate::git::branch_tip(&ws.repo, ws.branch())?)?;
    let tree = base.tree()?;
    Ok((base, tree))
}

/// The settings `tune` compares runs by, in seconds.
fn current_settings(c: &crate::config::ConductorConfig) -> tune::Current {
    let secs = |t: &str| {
        crate::governance::time::parse_duration(t)
            .unwrap_or(0)
            .max(0) as u64
    };
    tune::Current {
        nudge_after: secs(&c.nudge_after),
        restart_after: secs(&c.restart_after),
        attempt_timeout: secs(&c.attempt_timeout),
        failure_budget: c.failure_budget,
    }
}

/// The edited atelier.toml must load and hold exactly the intended values, else nothing is
/// proposed (a layout the line editor misread, such as dotted keys).
fn check_edit(where_: &str, edited: &str, changes: &[tune::Change]) -> anyhow::Result<()> {
    let fail = |why: String| {
        workflow::Error::Input(format!(
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
            other => return Err(fail(format!("unknown key {other}")).into()),
        };
        if value != c.to {
            return Err(fail(format!(
                "{} reads {value} after the edit, not {}",
                c.key, c.to
            ))
            .into());
        }
    }
    Ok(())
}

#[derive(Args, Debug)]
pub struct ProposalsArgs {
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// The improvement curve: merged proposals of `atelier cycle`, oldest first, each with the
    /// metric registered before its benchmark and the delta its merged evidence measured.
    #[arg(long)]
    improvements: bool,
}

pub fn proposals(dir: &Path, args: ProposalsArgs) -> anyhow::Result<ExitCode> {
    let ws = Workspace::open(dir)?;
    if args.improvements {
        return improvements(&ws, args.json);
    }
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
            None if !s.approved_by.is_empty() => format!("{}", s.approved_by.len()),
            None => "-".into(),
        };
        text.push_str(&format!(
            "{:<4} {:<7} {:<12} {:<10} {}{}\n",
            s.id,
            s.state,
            s.head
                .as_deref()
                .map(|h| &h[..12.min(h.len())])
                .unwrap_or("-"),
            approvals,
            s.title,
            if s.approved_by.is_empty() {
                String::new()
            } else {
                format!(" (approved by {})", s.approved_by.join(", "))
            }
        ));
    }
    if list.is_empty() {
        let from_ledger = ledger_proposals(&ws)?;
        if from_ledger.is_empty() {
            text.push_str(
                "(no proposals yet: `atelier propose --patch FILE --title TEXT` opens one)\n",
            );
        } else {
            // A clone: the local forge is the opening clone's, but the ledger travels.
            text = format!(
                "This clone's local forge holds no proposals; the ledger records these (`atelier audit show ID` has each one's record):\n{:<4} {:<7} {:<12} {}\n",
                "ID", "STATE", "HEAD", "TITLE"
            );
            for (id, state, head, title) in from_ledger {
                // A merged proposal's approvers, from its merge commit (which the clone has).
                let approved_by = view_merge_commit(&ws, &id)
                    .map(|c| workflow::merge_approvers(&ws.repo, &c))
                    .unwrap_or_default();
                text.push_str(&format!(
                    "{:<4} {:<7} {:<12} {}{}\n",
                    id,
                    state,
                    &head[..12.min(head.len())],
                    title,
                    if approved_by.is_empty() {
                        String::new()
                    } else {
                        format!(" (approved by {})", approved_by.join(", "))
                    }
                ));
            }
        }
    }
    out(&text)?;
    Ok(ExitCode::SUCCESS)
}

/// `propose --run RUN`: a finished, fully successful run, proposed without running anything.
fn propose_finished_run(ws: &Workspace, run: &str) -> anyhow::Result<ExitCode> {
    use crate::swarm::events::{self, RunEvent};
    let dir = crate::swarm::runtime::run_dir(ws, run);
    let path = dir.join("events.jsonl");
    if !path.is_file() {
        return Err(workflow::Error::Input(format!(
            "--run {run}: no such run (no {}); `atelier status` lists the runs",
            path.display()
        ))
        .into());
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
            return Err(workflow::Error::Input(format!(
                "--run {run}: the run has not finished; `atelier run --resume {run}` continues it (add --propose to propose it when it succeeds)"
            ))
            .into())
        }
        Some((failed, blocked, skipped)) if failed + blocked + skipped > 0 => {
            return Err(workflow::Error::Input(format!(
                "--run {run}: {failed} task(s) failed, {blocked} were blocked and {skipped} skipped; only a run whose every task succeeded becomes a proposal (`atelier status {run}` shows why; `atelier run --resume {run}` retries)"
            ))
            .into())
        }
        Some(_) => {}
    }
    // A run becomes one proposal: the ledger says whether it already did.
    let view = ws.view()?;
    let suffix = format!("swarm run {run}");
    if let Some(id) = view.events.iter().find_map(|e| match e {
        crate::audit::ledger::Event::ProposalOpened {
            proposal,
            origin: Some(o),
            ..
        } if o == &suffix || o.ends_with(&format!(", {suffix}")) => Some(proposal.clone()),
        _ => None,
    }) {
        return Err(workflow::Error::Input(format!(
            "--run {run}: the run was proposed already, as proposal {id} (`atelier show {id}`)"
        ))
        .into());
    }
    // The run is finished: resuming it starts nothing and gives back its summary.
    let clock = || crate::clock::now().map(|(t, _)| t).unwrap_or(0);
    let summary = crate::swarm::runtime::run(
        ws,
        crate::swarm::runtime::RunOptions {
            plan_files: Vec::new(),
            max_parallel: None,
            resume: Some(run.to_string()),
            goal: None,
        },
        &clock,
    )?;
    let p = crate::swarm::runtime::propose_run(ws, &summary, now()?)?;
    super::note!(
        "proposal {} opened on branch {} from run {run} (`atelier gate {}` shows what it needs)",
        p.id,
        p.branch,
        p.id
    );
    out(&format!("{}\n", p.id))?;
    Ok(ExitCode::SUCCESS)
}

/// Every proposal the ledger records, as (id, state, head, title): merged, closed or open as
/// the ledger last says.
/// The merge commit the ledger records for proposal `id`, if it merged.
fn view_merge_commit(ws: &Workspace, id: &str) -> Option<String> {
    use crate::audit::ledger::Event;
    let view = ws.view().ok()?;
    view.events.iter().rev().find_map(|e| match e {
        Event::Merged(m) if m.proposal == id => Some(m.commit.clone()),
        _ => None,
    })
}

fn ledger_proposals(ws: &Workspace) -> anyhow::Result<Vec<(String, String, String, String)>> {
    use crate::audit::ledger::Event;
    let view = ws.view()?;
    let mut out: Vec<(String, String, String, String)> = Vec::new();
    for e in &view.events {
        if let Event::ProposalOpened {
            proposal,
            pull,
            title,
            head,
            ..
        } = e
        {
            if out.iter().any(|(id, ..)| id == proposal) {
                continue;
            }
            let state = if view.merged(proposal, *pull) {
                "merged"
            } else if view.closed(proposal) {
                "closed"
            } else {
                "open"
            };
            out.push((proposal.clone(), state.into(), head.clone(), title.clone()));
        }
    }
    Ok(out)
}

fn improvements(ws: &Workspace, as_json: bool) -> anyhow::Result<ExitCode> {
    let list = workflow::cycle::improvements(ws)?;
    if as_json {
        json(&list)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut t = format!(
        "{:<4} {:<20} {:<16} {:<24} {:<22} {}\n",
        "ID", "MERGED", "METRIC", "DELTA [95% INTERVAL]", "OUTCOME", "TITLE"
    );
    for i in &list {
        let delta = i.delta.as_ref().map_or("-".to_string(), |d| {
            if d.low.is_finite() {
                format!("{:+.2} [{:+.2}, {:+.2}]", d.delta, d.low, d.high)
            } else {
                format!("{:+.2}", d.delta)
            }
        });
        t.push_str(&format!(
            "{:<4} {:<20} {:<16} {:<24} {:<22} {}\n",
            i.proposal,
            i.merged_at.as_deref().unwrap_or("-"),
            i.metric.as_deref().unwrap_or("(none)"),
            delta,
            i.outcome,
            i.title
        ));
        if let Some(w) = &i.warning {
            t.push_str(&format!("     WARNING: {w}\n"));
        }
    }
    if list.is_empty() {
        t.push_str("(no merged proposals from `atelier cycle` yet)\n");
    }
    out(&t)?;
    Ok(ExitCode::SUCCESS)
}
