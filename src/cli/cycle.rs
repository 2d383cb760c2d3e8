//! `atelier cycle`: one self-improvement proposal end to end. A proposer writes the change, the
//! metric it is judged by is registered in the ledger, the replay benchmark measures it, the
//! validators check it, the evidence is committed into its record, the review panel judges it
//! as it now is, and it is submitted — then the cycle stops at "awaiting approval". A proposal
//! the panel blocks, or whose evidence shows a regression or a failed validator, is recorded but
//! not submitted (unless `--submit-anyway`). A step that fails closes the proposal, saying why.

use std::path::Path;
use std::process::ExitCode;

use clap::Args;
use serde::Serialize;

use super::propose::{run_proposer, ProposeArgs};
use super::{json, now};
use crate::governance::review::Verdict;
use crate::improve::bench;
use crate::improve::evidence::{self, Evidence, Validated};
use crate::improve::metrics::ConductorSettings;
use crate::workflow::{self, Workspace};

#[derive(Args, Debug)]
pub struct CycleArgs {
    /// The proposer: `tune`, `memory`, `lint` (with --family) or `agent` (with --goal).
    #[arg(long, value_name = "PROPOSER", default_value = "tune")]
    pub(super) from: String,
    /// With --from agent: what the change should achieve.
    #[arg(long, value_name = "TEXT")]
    pub(super) goal: Option<String>,
    /// With --from lint: the lint family.
    #[arg(long, value_name = "FAMILY")]
    pub(super) family: Option<String>,
    /// The replay metric the evidence is judged by (default: the one the change is meant to
    /// move, e.g. false_kills for a longer restart_after). Registered in the ledger before the
    /// benchmark runs.
    #[arg(long, value_name = "METRIC")]
    pub(super) metric: Option<String>,
    /// Seeds for the replay benchmark (at least 2: an interval needs two).
    #[arg(long, default_value_t = 5)]
    pub(super) seeds: u64,
    /// Only this built-in mission (default: all).
    #[arg(long, value_name = "ID")]
    pub(super) mission: Option<String>,
    /// Submit even when the panel blocks or the evidence shows a regression or a failed
    /// validator (the pull request body and `show` say so).
    #[arg(long)]
    pub(super) submit_anyway: bool,
    #[arg(long)]
    pub(super) json: bool,
}

/// What the cycle did, step by step (`--json`).
#[derive(Debug, Default, Serialize)]
pub(super) struct Cycle {
    /// The last step reached: propose, register, benchmark, validate, evidence, review,
    /// submit, awaiting-approval.
    pub(super) stage: &'static str,
    pub(super) proposal: Option<String>,
    pub(super) registered: Option<Registered>,
    pub(super) evidence: Option<Evidence>,
    pub(super) evidence_head: Option<String>,
    pub(super) review: Option<ReviewOut>,
    pub(super) objections: Vec<String>,
    pub(super) submitted: bool,
    pub(super) url: Option<String>,
    pub(super) approvals: Option<usize>,
    pub(super) required: Option<u32>,
    pub(super) approve_command: Option<String>,
    /// Why the cycle stopped short of awaiting approval.
    pub(super) stopped: Option<String>,
}

#[derive(Debug, Serialize)]
pub(super) struct Registered {
    metric: Option<String>,
    reason: String,
    entry: u64,
}

#[derive(Debug, Serialize)]
pub(super) struct ReviewOut {
    pub(super) verdict: Verdict,
    findings: usize,
    recorded: Option<u64>,
}

fn progress(c: &mut Cycle, stage: &'static str, text: &str) {
    c.stage = stage;
    super::note!("cycle [{stage}] {text}");
}

pub fn cycle(dir: &Path, args: CycleArgs) -> anyhow::Result<ExitCode> {
    let ws = Workspace::open(dir)?;
    let (code, c) = run(&ws, &args)?;
    if args.json {
        json(&c)?;
    } else if let Some(why) = &c.stopped {
        super::note!("cycle stopped at {}: {why}", c.stage);
    }
    Ok(code)
}

/// The whole cycle in `ws` (progress on stderr): its exit code and what it did.
pub(super) fn run(ws: &Workspace, args: &CycleArgs) -> anyhow::Result<(ExitCode, Cycle)> {
    if let Some(m) = &args.metric {
        evidence::check_metric(m).map_err(workflow::Error::Input)?;
    }
    if args.seeds < 2 {
        return Err(workflow::Error::Input(format!(
            "--seeds {}: at least 2 (the evidence reports a 95 % interval across seeds)",
            args.seeds
        ))
        .into());
    }
    let missions = bench::of_workspace(ws, &|m| super::note!("cycle: {m}"))?;
    if let Some(m) = &args.mission {
        if !missions.iter().any(|x| &x.mission.id == m) {
            return Err(workflow::Error::Input(format!(
                "--mission {m}: no such mission (built in or on the protected branch: {})",
                missions
                    .iter()
                    .map(|x| x.mission.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
            .into());
        }
    }
    let mut c = Cycle::default();
    progress(
        &mut c,
        "propose",
        &format!("asking the `{}` proposer", args.from),
    );
    let proposer = run_proposer(
        ws,
        &args.from,
        &ProposeArgs {
            for_cycle: true,
            patch: None,
            title: None,
            from: Some(args.from.clone()),
            goal: args.goal.clone(),
            family: args.family.clone(),
            dry_run: false,
            json: false,
            rationale: None,
            agent: None,
            run: None,
        },
    )?;
    let Some(p) = proposer.proposed else {
        c.stopped = Some(format!(
            "the `{}` proposer proposed nothing (its report is above)",
            args.from
        ));
        return Ok((ExitCode::from(1), c));
    };
    c.proposal = Some(p.id.clone());
    match steps(ws, args, &missions, &p, &mut c) {
        Ok(code) => Ok((code, c)),
        Err(e) => {
            // Nothing half-recorded: the proposal is closed with the reason, in the ledger.
            let reason = format!(
                "atelier cycle stopped at {}: {}",
                c.stage,
                e.chain()
                    .map(|x| x.to_string())
                    .collect::<Vec<_>>()
                    .join(": ")
            );
            match workflow::close(ws, &p.id, Some(reason.clone()), now()?) {
                Ok(_) => super::note!("cycle: proposal {} closed: {reason}", p.id),
                Err(x) => super::note!(
                    "cycle: proposal {} could not be closed ({}); close it with `atelier close {}`",
                    p.id,
                    crate::errors::chain(&x),
                    p.id
                ),
            }
            Err(e)
        }
    }
}

/// The [conductor] of atelier.toml in commit `at`.
fn conductor_at(ws: &Workspace, at: git2::Oid) -> anyhow::Result<ConductorSettings> {
    let tree = ws.repo.find_commit(at)?.tree()?;
    let label = format!("{} at {at}", crate::config::FILE);
    let text = crate::git::read_file(&ws.repo, &tree, crate::config::FILE)?
        .ok_or_else(|| workflow::Error::Input(format!("{label}: not found")))?;
    let config = crate::config::Config::parse(&label, &String::from_utf8_lossy(&text))?;
    Ok(ConductorSettings::of(&config.conductor))
}

fn steps(
    ws: &Workspace,
    args: &CycleArgs,
    missions: &[bench::Mission],
    p: &workflow::Proposed,
    c: &mut Cycle,
) -> anyhow::Result<ExitCode> {
    let head = git2::Oid::from_str(&p.head)?;
    let base = git2::Oid::from_str(&p.base)?;
    let (baseline, candidate) = (conductor_at(ws, base)?, conductor_at(ws, head)?);
    let all: Vec<String> = missions
        .iter()
        .map(|m| m.mission.id.clone())
        .filter(|id| args.mission.as_ref().is_none_or(|m| m == id))
        .collect();
    // A change to Atelier's own code is measured by two builds: the base's and the change's.
    let code = crate::improve::builds::code_changed(ws, base, head)?;
    let files = {
        let mut f: Vec<&str> = code.iter().take(4).map(String::as_str).collect();
        if code.len() > 4 {
            f.push("…");
        }
        f.join(", ")
    };
    let (metric, reason) = match evidence::metric_for(&baseline, &candidate) {
        Some((m, why)) => match &args.metric {
            Some(asked) => (Some(asked.clone()), format!("named with --metric ({why})")),
            None => (Some(m), why),
        },
        None if !code.is_empty() => match &args.metric {
            Some(asked) => (
                Some(asked.clone()),
                format!("named with --metric for a change to atelier's own code ({files})"),
            ),
            None => (
                None,
                format!("a change to atelier's own code ({files}) implies no metric, and none was named with --metric: the base's build and the change's both run the missions, so the evidence shows any regression"),
            ),
        },
        None => (
            None,
            "the change leaves atelier.toml's [conductor] and atelier's own code as they are: the replay benchmark would compare atelier with itself".to_string(),
        ),
    };
    let measured = metric.is_some() || !code.is_empty();
    if !measured && args.metric.is_some() {
        super::note!(
            "cycle: --metric is not used: {reason}; the evidence says it was not measured"
        );
    }
    progress(
        c,
        "register",
        &match &metric {
            Some(m) => format!("metric {m} named in the ledger before the benchmark: {reason}"),
            None => format!("no metric: {reason}"),
        },
    );
    let entry = workflow::cycle::register(
        ws,
        &p.id,
        head,
        metric.clone(),
        reason.clone(),
        args.seeds,
        if measured { all } else { Vec::new() },
        now()?,
    )?;
    c.registered = Some(Registered {
        metric: metric.clone(),
        reason: reason.clone(),
        entry,
    });
    let report = if code.is_empty() && metric.is_some() {
        progress(
            c,
            "benchmark",
            &format!(
                "replaying the missions under the base's and the change's [conductor], {} seeds, interleaved",
                args.seeds
            ),
        );
        Some(bench::replay(
            &baseline,
            &candidate,
            missions,
            args.seeds,
            args.mission.as_deref(),
        )?)
    } else if !code.is_empty() {
        progress(
            c,
            "build",
            &format!("the change edits atelier's own code ({files}): building the base (trusted) and the change (contained)"),
        );
        let (base_bin, _) =
            crate::improve::builds::trusted(ws, "the base", &p.base, &|m| super::note!("{m}"))?;
        let changed =
            crate::improve::builds::untrusted(ws, head, now()?, &|m| super::note!("{m}"))?;
        progress(
            c,
            "benchmark",
            &format!(
                "replaying the missions with the base's build and the change's, {} seeds, interleaved",
                args.seeds
            ),
        );
        Some(bench::replay_sides(
            &bench::Side::Binary {
                path: base_bin,
                label: format!("the base ({} at {})", ws.branch(), &p.base[..12]),
                conductor: baseline.clone(),
                sandbox: None,
            },
            &bench::Side::Binary {
                path: changed.path.clone(),
                label: changed.label.clone(),
                conductor: candidate.clone(),
                sandbox: changed.sandbox.clone(),
            },
            missions,
            args.seeds,
            args.mission.as_deref(),
        )?)
    } else {
        None
    };
    let benchmark = report.map(|r| evidence::Benchmark {
        seeds: r.seeds,
        missions: r.missions,
        interval: r.interval.to_string(),
        baseline: r.baseline,
        candidate: r.candidate,
        baseline_build: r.baseline_build,
        candidate_build: r.candidate_build,
        deltas: r.deltas,
    });
    progress(c, "validate", "running the validators");
    let mut validators = earlier_validators(ws, &args.from, &p.id)?;
    let user = crate::improve::usertest::validate(ws, base, head, now()?)?;
    super::note!("cycle [validate] {}: {}", user.name, user.result);
    validators.push(user);
    let (outcome, regressions) = evidence::outcome(metric.as_deref(), benchmark.as_ref());
    let e = Evidence {
        proposal: p.id.clone(),
        proposer: args.from.clone(),
        base: p.base.clone(),
        measured_head: p.head.clone(),
        metric,
        metric_reason: reason,
        registered_entry: Some(entry),
        benchmark,
        outcome,
        regressions,
        validators,
    };
    progress(c, "evidence", &e.headline());
    let evidence_head = workflow::cycle::attach(ws, &e, head, now()?)?;
    c.evidence_head = Some(evidence_head.to_string());
    c.objections = e.objections();
    c.evidence = Some(e);
    progress(
        c,
        "review",
        "the review panel judges the change as it now is",
    );
    let review = workflow::review::review_branch(ws, &p.id, now()?)?;
    for n in &review.notes {
        super::note!("cycle [review] note: {n}");
    }
    super::note!(
        "cycle [review] {} ({} finding(s))",
        review.verdict.as_str(),
        review.findings.len()
    );
    // As the gate weighs the verdict (the policy's `block_on`), before any approval.
    let eval = workflow::evaluate(ws, &ws.view()?, ws.pull(&p.id)?, now()?)?;
    if eval
        .decision
        .unmet()
        .any(|r| r.code == crate::governance::Code::ReviewBlocked)
    {
        c.objections.insert(
            0,
            format!("the review panel refuses it ({})", review.verdict.as_str()),
        );
    }
    c.review = Some(ReviewOut {
        verdict: review.verdict,
        findings: review.findings.len(),
        recorded: review.recorded,
    });
    if !c.objections.is_empty() && !args.submit_anyway {
        // Recorded, with its evidence, and closed: on the local forge an open proposal is
        // already approvable, so "not submitted" means closed there and on GitHub alike.
        let why = c.objections.join("; ");
        workflow::close(
            ws,
            &p.id,
            Some(format!("not submitted by atelier cycle: {why}")),
            now()?,
        )?;
        c.stopped = Some(format!(
            "proposal {} is recorded with its evidence and closed, not submitted: {why}. `atelier show {}` and `atelier audit show {}` have the details; `atelier cycle --submit-anyway` submits such a proposal, saying so.",
            p.id, p.id, p.id
        ));
        return Ok(ExitCode::from(1));
    }
    progress(c, "submit", "submitting");
    let github = ws.config.forge.kind == "github";
    if github {
        let published = workflow::submit(ws, &p.id, now()?)?;
        c.url = Some(published.url.clone());
        super::note!(
            "cycle [submit] pull request #{} ({})",
            published.pull,
            published.url
        );
    } else {
        super::note!(
            "cycle [submit] the local forge holds proposal {} already; nothing to push",
            p.id
        );
    }
    c.submitted = true;
    if !c.objections.is_empty() {
        super::note!(
            "cycle [submit] WARNING: submitted anyway (--submit-anyway) despite: {}",
            c.objections.join("; ")
        );
    }
    let view = ws.view()?;
    let eval = workflow::evaluate(ws, &view, ws.pull(&p.id)?, now()?)?;
    let required = eval.decision.required_approvals();
    c.approvals = Some(eval.decision.approvers.len());
    c.required = required;
    let command = if github {
        format!(
            "atelier approve --pr {} --key <your ed25519 key> --post",
            view.submitted_pulls(&p.id).last().copied().unwrap_or(0)
        )
    } else {
        format!("atelier approve {} --key <your ed25519 key>", p.id)
    };
    c.approve_command = Some(command.clone());
    progress(
        c,
        "awaiting-approval",
        &format!(
            "proposal {}: awaiting approval: {} of {}",
            p.id,
            eval.decision.approvers.len(),
            required.map_or("?".to_string(), |r| r.to_string())
        ),
    );
    if !args.json {
        super::out(&format!(
            "proposal {}\nawaiting approval: {} of {}\nto approve: {command}\n",
            p.id,
            eval.decision.approvers.len(),
            required.map_or("?".to_string(), |r| r.to_string())
        ))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The contract and scrutiny validators' results, which ran (or could not) inside the
/// proposer: `agent` goes through both (it proposes nothing otherwise), and the scrutiny
/// validator's record (`scrutiny.json` in its run) says what it found; the others write one
/// change themselves, with no plan and no swarm run to check.
fn earlier_validators(ws: &Workspace, from: &str, id: &str) -> anyhow::Result<Vec<Validated>> {
    if from != "agent" {
        return Ok(["contract", "scrutiny"]
            .into_iter()
            .map(|n| Validated {
                name: n.into(),
                result: "not run".into(),
                detail: format!(
                    "the `{from}` proposer writes its change itself: there is no plan or swarm run to check"
                ),
            })
            .collect());
    }
    let origin = ws.view()?.provenance(id).origin.unwrap_or_default();
    let run = origin
        .rsplit("swarm run ")
        .next()
        .unwrap_or_default()
        .to_string();
    let path = crate::swarm::runtime::run_dir(ws, &run).join("scrutiny.json");
    let scrutiny = std::fs::read(&path)
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok());
    let scrutiny = match scrutiny {
        Some(v) if v["verdict"] != "block" => Validated {
            name: "scrutiny".into(),
            result: "passed".into(),
            detail: format!(
                "run {run}: {} criterion check(s) passed on record, {} finding(s), none blocking; no check executes a file the run changed ({})",
                v["evidence"].as_array().map_or(0, Vec::len),
                v["findings"].as_array().map_or(0, Vec::len),
                path.display()
            ),
        },
        Some(_) => Validated {
            name: "scrutiny".into(),
            result: "failed".into(),
            detail: format!("run {run}: see {}", path.display()),
        },
        None => Validated {
            name: "scrutiny".into(),
            result: "failed".into(),
            detail: format!("run {run}: no readable record at {}", path.display()),
        },
    };
    Ok(vec![
        Validated {
            name: "contract".into(),
            result: "passed".into(),
            detail: "the proposer's plan passed `plan check` and, where a validator role is configured, its adversarial read, before any worker ran".into(),
        },
        scrutiny,
    ])
}
