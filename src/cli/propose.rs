//! `atelier propose` and `atelier proposals`. The proposers' work is `improve::propose`; here
//! are their reports.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;

use super::{json, now, out};
use crate::improve::propose::{self, Outcome};
use crate::improve::{lessons, tune};
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
    /// `run --propose` would have made it (`atelier stats` lists the runs).
    #[arg(long, value_name = "RUN", conflicts_with_all = ["from", "agent", "rationale"])]
    pub(super) run: Option<String>,
    /// Let one of atelier's proposers write the change: `tune` (atelier.toml's [conductor]
    /// settings from what the runs measured), `memory` (recurring errors become lessons in
    /// prompts/lessons.md), `lint` (the `[proposers.lint]` fix command for --family, run
    /// contained, then the gauntlet) or `agent` (the `proposer` role plans toward --goal and the
    /// swarm runs the plan).
    /// Exit 1, proposing nothing, when the data do not support a change.
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
    for how in &p.applied {
        super::note!("note: {}", crate::text::printable(how));
    }
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

/// Runs the proposer `from` (`tune`, `memory`, `lint`, `agent`).
pub(super) fn run_proposer(
    ws: &Workspace,
    from: &str,
    args: &ProposeArgs,
) -> anyhow::Result<Proposer> {
    let clock = || Ok(super::now_announced()?);
    let outcome = match from {
        "tune" => tune(args, propose::tune(ws, args.dry_run, &clock)?)?,
        "memory" => memory(args, propose::memory(ws, args.dry_run, &clock)?)?,
        "lint" => lint(
            ws,
            args,
            propose::lint(ws, args.family.as_deref(), args.dry_run, &clock)?,
        )?,
        "agent" => agent(
            args,
            propose::agent(ws, args.goal.as_deref(), args.dry_run, &clock)?,
        )?,
        other => {
            return Err(workflow::Error::Input(format!(
            "--from {other}: no such proposer; atelier has `tune`, `memory`, `lint` and `agent`"
        ))
            .into())
        }
    };
    Ok(match outcome {
        Outcome::Opened(p) => Proposer {
            code: ExitCode::SUCCESS,
            proposed: Some(p),
        },
        Outcome::Nothing(why) => {
            super::note!("nothing proposed: {why}");
            Proposer {
                code: ExitCode::from(1),
                proposed: None,
            }
        }
        Outcome::DryRun(what) => {
            super::note!("dry run: {what}");
            Proposer {
                code: ExitCode::SUCCESS,
                proposed: None,
            }
        }
    })
}

/// Says that proposal `p` was opened, as every way of proposing does.
fn opened(p: &workflow::Proposed) {
    super::note!(
        "proposal {} opened on branch {} (head {}, base {})",
        p.id,
        p.branch,
        p.head,
        p.base
    );
}

/// A proposer's human report: stdout, or stderr within `atelier cycle`; with `--json` (not
/// within the cycle) the proposer's `json` instead. A proposal opened is announced first.
fn report(
    args: &ProposeArgs,
    outcome: &Outcome,
    json_of: impl FnOnce() -> anyhow::Result<()>,
    text: impl FnOnce() -> String,
) -> anyhow::Result<()> {
    if let Some(p) = outcome.proposal() {
        opened(p);
    }
    if args.json && !args.for_cycle {
        return json_of();
    }
    let mut t = text();
    if let Some(p) = outcome.proposal() {
        t.push_str(&format!("{}\n", p.id));
    }
    if args.for_cycle {
        super::err_text(&t);
        Ok(())
    } else {
        out(&t)
    }
}

/// What `propose --from tune` prints with `--json`: the decision, and the proposal if one was
/// opened.
#[derive(serde::Serialize)]
struct TuneOutput<'a> {
    tuning: &'a tune::Tuning,
    proposal: Option<&'a workflow::Proposed>,
}

/// `propose --from tune`'s report.
fn tune(args: &ProposeArgs, t: propose::Tuned) -> anyhow::Result<Outcome> {
    let tuning = &t.tuning;
    let json_of = || {
        json(&TuneOutput {
            tuning,
            proposal: t.outcome.proposal(),
        })
    };
    report(args, &t.outcome, json_of, || {
        let mut s = format!(
            "tune read {} run(s) recorded with the settings in force{}\n",
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
            s.push_str(&format!(
                "change {} {} -> {}: {}\n",
                c.key, c.from, c.to, c.why
            ));
        }
        for u in &tuning.unchanged {
            s.push_str(&format!("keep {u}\n"));
        }
        s
    })?;
    Ok(t.outcome)
}

/// What `propose --from memory --json` prints.
#[derive(serde::Serialize)]
struct MemoryOutput<'a> {
    lessons: &'a [lessons::Recurring],
    min_tasks: usize,
    min_runs: usize,
    proposal: Option<&'a workflow::Proposed>,
}

/// `propose --from memory`'s report.
fn memory(args: &ProposeArgs, m: propose::Remembered) -> anyhow::Result<Outcome> {
    let json_of = || {
        json(&MemoryOutput {
            lessons: &m.found,
            min_tasks: lessons::MIN_TASKS,
            min_runs: lessons::MIN_RUNS,
            proposal: m.outcome.proposal(),
        })
    };
    report(args, &m.outcome, json_of, || {
        let mut t = format!(
            "memory read {} run(s): {} error(s) failed {}+ tasks over {}+ runs and are not yet lessons\n",
            m.runs,
            m.found.len(),
            lessons::MIN_TASKS,
            lessons::MIN_RUNS
        );
        for r in &m.found {
            t.push_str(&format!("lesson {}\n", r.line()));
        }
        t
    })?;
    Ok(m.outcome)
}

/// What `propose --from agent --json` prints.
#[derive(serde::Serialize)]
struct AgentOutput<'a> {
    goal: &'a str,
    plan_file: String,
    planned: &'a crate::improve::planner::Planned,
    run: Option<&'a crate::swarm::runtime::RunSummary>,
    proposal: Option<&'a workflow::Proposed>,
}

/// `propose --from agent`'s report (a dry run shows the plan first).
fn agent(args: &ProposeArgs, a: propose::Agented) -> anyhow::Result<Outcome> {
    if matches!(a.outcome, Outcome::DryRun(_)) && !args.json {
        say(args, &a.planned.plan)?;
    }
    let json_of = || {
        json(&AgentOutput {
            goal: &a.goal,
            plan_file: a.plan_file.display().to_string(),
            planned: &a.planned,
            run: a.run.as_ref(),
            proposal: a.outcome.proposal(),
        })
    };
    report(args, &a.outcome, json_of, || {
        let mut t = format!("the proposer's plan: {}\n", a.plan_file.display());
        if let Some(why) = &a.planned.unreadable {
            t.push_str(&format!("  not a plan: {why}\n"));
        }
        for r in &a.planned.refusals {
            t.push_str(&format!("  refused: {} {}\n", r.code, r.message));
        }
        if let Some(run) = &a.run {
            t.push_str(&format!(
                "run {}: {} succeeded, {} failed, {} blocked (events: {})\n",
                run.run,
                run.succeeded.len(),
                run.failed.len(),
                run.blocked.len(),
                run.events
            ));
        }
        t
    })?;
    Ok(a.outcome)
}

/// `text` where a proposer's report goes: stdout, or stderr within `atelier cycle`.
fn say(args: &ProposeArgs, text: &str) -> anyhow::Result<()> {
    if args.for_cycle {
        super::err_text(text);
        Ok(())
    } else {
        out(text)
    }
}

/// What `propose --from lint --json` prints.
#[derive(serde::Serialize)]
struct LintOutput<'a> {
    lint: &'a crate::improve::lint::Linted,
    proposal: Option<&'a workflow::Proposed>,
}

/// `propose --from lint`'s report.
fn lint(ws: &Workspace, args: &ProposeArgs, f: propose::Fixed) -> anyhow::Result<Outcome> {
    let linted = &f.lint;
    if !linted.contained {
        super::note!("WARNING: the fix command and the gauntlet ran uncontained ([swarm] containment = \"none\", merged)");
    }
    let json_of = || {
        json(&LintOutput {
            lint: linted,
            proposal: f.outcome.proposal(),
        })
    };
    report(args, &f.outcome, json_of, || {
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
        t
    })?;
    Ok(f.outcome)
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
        text.push_str(&proposal_row(s));
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

/// One line of `proposals`: its state, head, approvals against the quorum and who gave them.
fn proposal_row(s: &workflow::Summary) -> String {
    let approvals = match s.required {
        Some(_) if !s.vetoed_by.is_empty() => "vetoed".to_string(),
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
    format!(
        "{:<4} {:<7} {:<12} {:<10} {}{}\n",
        s.id,
        s.state,
        s.head
            .as_deref()
            .map(|h| &h[..12.min(h.len())])
            .unwrap_or("-"),
        approvals,
        s.title,
        if !s.vetoed_by.is_empty() {
            format!(" (vetoed by {})", s.vetoed_by.join(", "))
        } else if s.approved_by.is_empty() {
            String::new()
        } else {
            format!(" (approved by {})", s.approved_by.join(", "))
        }
    )
}

/// `propose --run RUN`: a finished, fully successful run, proposed without running anything.
fn propose_finished_run(ws: &Workspace, run: &str) -> anyhow::Result<ExitCode> {
    let p = propose::finished_run(ws, run, &|| Ok(super::now_announced()?))?;
    super::note!(
        "proposal {} opened on branch {} from run {run} (`atelier gate {}` shows what it needs)",
        p.id,
        p.branch,
        p.id
    );
    out(&format!("{}\n", p.id))?;
    Ok(ExitCode::SUCCESS)
}

/// The merge commit the ledger records for proposal `id`, if it merged.
fn view_merge_commit(ws: &Workspace, id: &str) -> Option<String> {
    use crate::audit::ledger::Event;
    let view = ws.view().ok()?;
    view.events.iter().rev().find_map(|e| match e {
        Event::Merged(m) if m.proposal == id => Some(m.commit.clone()),
        _ => None,
    })
}

/// Every proposal the ledger records, as (id, state, head, title): merged, closed or open as
/// the ledger last says.
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
