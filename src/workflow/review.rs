//! `atelier review`: the whole review panel on a proposal as the forge carries it now, its
//! verdict recorded in the ledger. The panel is read from the proposal's base (`reviewers/*.toml`;
//! without that folder, the default panel of built-in reviewers), so a proposal can never change
//! what judges it. The gate re-runs the built-ins at every evaluation and weighs the agent
//! reviewers' verdict only from a recording bound to the change as it would merge.

use super::gate::check_addressed;
use super::{evaluate_at, Error, Publish, Result, Workspace};
use crate::agent::contain::Sandbox;
use crate::agent::reviewer::{
    self, CheckResult, Handoff, ReviewJob, ReviewerOutcome, TaskContract,
};
use crate::agent::suites::{self, SuitesJob};
use crate::audit::ledger::Event;
use crate::forge::PullRequest;
use crate::forge::{Addr, Carried};
use crate::git;
use crate::governance::policy::Policy;
use crate::governance::review::answer::Family;
use crate::governance::review::{
    self, Finding, Kind, RecordedReview, ReviewerDef, Severity, Verdict,
};
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
    review_as(ws, addr, false, now)
}

/// Runs the panel on proposal `id` as its branches are in this clone — before it is submitted
/// to a forge (`atelier cycle`: a proposal the panel blocks is not submitted) — and records the
/// verdict, bound to base, head and tree like any other: once submitted unchanged, it is the
/// verdict for the pull request too.
pub fn review_branch(ws: &Workspace, id: &str, now: Timestamp) -> Result<Review> {
    review_as(ws, &Addr::Proposal(id.to_string()), true, now)
}

fn review_as(ws: &Workspace, addr: &Addr, local: bool, now: Timestamp) -> Result<Review> {
    let mut notes = Vec::new();
    let Read {
        review: mut r,
        pull,
        open,
        prepared,
        suites,
    } = read_change(ws, addr, local, now, &mut notes)?;
    if let Some(prepared) = prepared {
        run_agents(ws, &mut r, prepared, &mut notes)?;
    }
    run_suites(ws, &mut r, &suites);
    r.summary = summary(&r);
    record(ws, &mut r, addr, local, (pull, open), now, &mut notes)?;
    r.notes = notes;
    Ok(r)
}

/// What `review` reads under the lock: the change, the built-in reviewers' findings and the
/// agent reviewers' jobs, prepared (they run without the lock).
struct Read {
    review: Review,
    pull: u64,
    open: bool,
    prepared: Option<(Vec<ReviewJob>, Vec<ReviewerOutcome>)>,
    /// The `tests` reviewers' jobs.
    suites: Vec<SuitesJob>,
}

fn read_change(
    ws: &Workspace,
    addr: &Addr,
    local: bool,
    now: Timestamp,
    notes: &mut Vec<String>,
) -> Result<Read> {
    let _lock = ws.lock()?;
    notes.extend(super::sync::sync(ws, false)?);
    let view = ws.view()?;
    let carried = match addr {
        Addr::Proposal(id) if local => {
            let (pull, base, head) = ws.checked_record(&view, ws.pull(id)?)?;
            Carried {
                pull,
                base,
                head,
                editable: Vec::new(),
            }
        }
        _ => {
            let n = ws.pull_for(&view, addr)?;
            let carried = ws
                .forge
                .carried(&ws.site(), &view, n, Publish::Nothing, Vec::new())?;
            check_addressed(addr, &carried)?;
            carried
        }
    };
    let eval = evaluate_at(
        ws,
        &view,
        carried.pull.clone(),
        carried.base,
        carried.head,
        now,
    )?;
    let provenance = view.provenance(&carried.pull.proposal);
    let (input, panel, files) = panel::input(
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
    let findings = input.builtin;
    let agent_defs: Vec<&ReviewerDef> = defs.iter().filter(|d| d.kind == Kind::Agent).collect();
    let prepared = if agent_defs.is_empty() {
        None
    } else {
        let handoff = handoff(
            ws,
            &carried.pull,
            carried.base,
            carried.head,
            eval.merge_tree,
            &provenance,
            &findings,
        )?;
        Some(prepare(
            ws,
            carried.base,
            &agent_defs,
            &provenance,
            &handoff,
        )?)
    };
    let head_tree = match eval.merge_tree {
        Some(t) => t,
        None => ws.repo.find_commit(carried.head)?.tree_id(),
    };
    let suites = suites_jobs(ws, defs, (carried.base, head_tree), &files, &provenance)?;
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
    Ok(Read {
        review: r,
        pull: carried.pull.number,
        open: eval.change.open,
        prepared,
        suites,
    })
}

/// The jobs of the `tests` reviewers at base, contained like agent reviewers (no network; never
/// the gate key, `.atelier/` or `~/.ssh`) unless containment is off.
fn suites_jobs(
    ws: &Workspace,
    defs: &[ReviewerDef],
    trees: (git2::Oid, git2::Oid),
    files: &[review::FileChange],
    provenance: &panel::Provenance,
) -> Result<Vec<SuitesJob>> {
    let tests: Vec<&ReviewerDef> = defs.iter().filter(|d| d.kind == Kind::Tests).collect();
    if tests.is_empty() {
        return Ok(Vec::new());
    }
    let sandbox = if ws.containment()? == crate::config::Containment::Landlock {
        let s = Sandbox {
            protected: crate::agent::contain::protected(&ws.root, &ws.gate_key_path()?),
            ..Sandbox::new(crate::config::Network::None)
        };
        s.prepare()?;
        Some(s)
    } else {
        None
    };
    tests
        .into_iter()
        .map(|d| {
            suites::job(
                &ws.repo,
                d,
                trees,
                files,
                provenance.origin.is_some(),
                sandbox.clone(),
            )
            .map_err(Error::from)
        })
        .collect()
}

/// The `tests` reviewers, one after the other, without the lock: their findings join the rest.
fn run_suites(ws: &Workspace, r: &mut Review, jobs: &[SuitesJob]) {
    for job in jobs {
        r.findings
            .extend(suites::run(&ws.root, job).findings(job.agent_origin));
    }
    r.verdict = review::critic(&r.findings);
}

/// The agent reviewers, in parallel, without the lock: their findings join the built-ins'.
fn run_agents(
    ws: &Workspace,
    r: &mut Review,
    (jobs, mut outcomes): (Vec<ReviewJob>, Vec<ReviewerOutcome>),
    notes: &mut Vec<String>,
) -> Result<()> {
    let timeout = ws.config.review.timeout.secs();
    let head = git2::Oid::from_str(&r.head)?;
    outcomes.extend(reviewer::run_reviewers(
        &ws.root,
        head,
        jobs,
        std::time::Duration::from_secs(timeout.max(1)),
    ));
    for o in &outcomes {
        if let Some(why) = &o.failure {
            notes.push(format!("agent reviewer `{}` failed: {why}", o.name));
        }
        r.findings.extend(o.findings(r.origin.is_some()));
    }
    r.verdict = review::critic(&r.findings);
    Ok(())
}

/// Records the verdict in the ledger (where the gate key is, for an open proposal), publishes
/// the ledger and shows the review and the gate's verdict on the forge.
fn record(
    ws: &Workspace,
    r: &mut Review,
    addr: &Addr,
    local: bool,
    (pull, open): (u64, bool),
    now: Timestamp,
    notes: &mut Vec<String>,
) -> Result<()> {
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
        if let Err(e) = ws.forge.publish_ledger(&ws.site()) {
            notes.push(format!(
                "the verdict was recorded but the ledger was not pushed ({}); the next command that pushes it catches up",
                crate::errors::chain(&e)
            ));
        }
        // Show it where the forge shows the proposal, and the gate's verdict that weighs it
        // (not for a proposal reviewed before it is submitted: submitting shows it).
        let view = ws.view()?;
        if local {
            return Ok(());
        }
        if let Ok(record) = ws.pull(&r.proposal) {
            if let Err(e) = super::body::publish_review(ws, &view, record) {
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
    Ok(())
}

/// The structured handoff agent reviewers get: the proposal's title and rationale, the
/// contracts of the tasks that produced it and the results of their checks (for a swarm run
/// whose record this clone holds), the diff of what would land, and the built-in findings. Never
/// a worker's prompt, transcript or reasoning.
fn handoff(
    ws: &Workspace,
    pull: &PullRequest,
    base: git2::Oid,
    head: git2::Oid,
    merge_tree: Option<git2::Oid>,
    provenance: &panel::Provenance,
    builtin: &[Finding],
) -> Result<Handoff> {
    let repo = &ws.repo;
    let head_tree = repo.find_commit(head)?.tree()?;
    let rationale = git::read_file(repo, &head_tree, &format!("{}/proposal.toml", pull.record))?
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|t| t.parse::<toml::Table>().ok())
        .and_then(|t| {
            t.get("rationale")
                .and_then(|r| r.as_str())
                .map(str::to_string)
        })
        .unwrap_or_default();
    let (from, to) = match merge_tree {
        Some(t) => (repo.find_commit(base)?.tree()?, repo.find_tree(t)?),
        None => (git::since_tree(repo, base, head)?, head_tree),
    };
    let diff = String::from_utf8_lossy(&git::diff_text(repo, &from, &to)?).into_owned();
    let (contracts, mut checks) = match provenance
        .origin
        .as_deref()
        .and_then(|o| o.find("swarm run ").map(|i| &o[i + "swarm run ".len()..]))
    {
        Some(run) => run_evidence(ws, run),
        None => (Vec::new(), Vec::new()),
    };
    // The cycle's validators, as the ledger bound them (`atelier cycle`): part of the handoff.
    if let Some(st) = super::cycle::status(ws, &ws.view()?, &pull.proposal, &pull.record, head)? {
        if let Some(e) = &st.evidence {
            // A validator that did not run is not a check result (evidence.md says why).
            checks.extend(
                e.validators
                    .iter()
                    .filter(|v| v.result != "not run")
                    .map(|v| CheckResult {
                        name: format!("validator {}", v.name),
                        passed: v.result == "passed",
                        detail: format!("{}: {}", v.result, v.detail),
                    }),
            );
            checks.push(CheckResult {
                name: "replay benchmark".into(),
                passed: e.objections().is_empty(),
                detail: e.headline(),
            });
        }
        checks.extend(st.warnings.iter().map(|w| CheckResult {
            name: "evidence".into(),
            passed: false,
            detail: w.clone(),
        }));
    }
    Ok(Handoff {
        title: pull.title.clone(),
        rationale,
        origin: provenance.origin.clone(),
        contracts,
        diff,
        checks,
        builtin_findings: builtin.to_vec(),
    })
}

/// A swarm run's contracts and the checks its passing attempts ran (names and results only),
/// when this clone holds the run's record; nothing otherwise.
fn run_evidence(ws: &Workspace, run: &str) -> (Vec<TaskContract>, Vec<CheckResult>) {
    use crate::swarm::events::{self, RunEvent};
    let dir = crate::swarm::paths::run_dir(&ws.atelier_dir(), run);
    let mut contracts = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir.join("plans")) {
        let mut paths: Vec<_> = entries.flatten().map(|e| e.path()).collect();
        paths.sort();
        for p in paths {
            let Ok(text) = std::fs::read_to_string(&p) else {
                continue;
            };
            if let Ok(plan) = crate::swarm::plan::parse(&p.display().to_string(), &text) {
                contracts.extend(plan.tasks.into_iter().map(|t| TaskContract {
                    task: t.key,
                    criteria: t.contract.criteria,
                    checks: t.contract.checks,
                }));
            }
        }
    }
    let records = events::read(&dir.join("events.jsonl")).unwrap_or_default();
    let passed: Vec<(String, u32)> = records
        .iter()
        .filter_map(|r| match &r.event {
            RunEvent::AttemptPassed { task, attempt, .. } => Some((task.clone(), *attempt)),
            _ => None,
        })
        .collect();
    let checks = records
        .iter()
        .filter_map(|r| match &r.event {
            RunEvent::StepFinished {
                task,
                attempt,
                step,
                passed: ok,
                secs,
                ..
            } if passed.contains(&(task.clone(), *attempt)) => Some(CheckResult {
                name: format!("{task}: {step}"),
                passed: *ok,
                detail: format!("attempt {attempt}, {secs}s"),
            }),
            _ => None,
        })
        .collect();
    (contracts, checks)
}

/// The jobs for the agent reviewers at base, and the outcomes of those that cannot run (no
/// role, no template, a family not distinct from the proposer's where the policy requires it).
fn prepare(
    ws: &Workspace,
    base: git2::Oid,
    defs: &[&ReviewerDef],
    provenance: &panel::Provenance,
    handoff: &Handoff,
) -> Result<(Vec<ReviewJob>, Vec<ReviewerOutcome>)> {
    let repo = &ws.repo;
    let base_tree = repo.find_commit(base)?.tree()?;
    let settings = Policy::load(&git::policy_files(repo, &base_tree)?)
        .map(|p| p.review)
        .unwrap_or_default();
    let proposer = proposer_family(ws, provenance);
    // Agent reviewers run contained like workers: where that cannot be, the review is refused
    // rather than run uncontained (`[swarm] containment = "none"`, merged, is the way out).
    let contained = ws.containment()? == crate::config::Containment::Landlock;
    let protected = crate::agent::contain::protected(&ws.root, &ws.gate_key_path()?);
    if contained {
        crate::agent::contain::Sandbox::new(crate::config::Network::None).prepare()?;
    }
    let mut jobs = Vec::new();
    let mut failed = Vec::new();
    for def in defs {
        if settings.distinct_family && provenance.origin.is_some() {
            let role = def.role.as_deref().and_then(|r| ws.config.roles.get(r));
            let check = match role.and_then(|r| r.family()) {
                None => Err(format!(
                    "its role `{}` declares no provider and family in atelier.toml",
                    def.role.as_deref().unwrap_or("?")
                )),
                Some(mine) => proposer
                    .iter()
                    .map(|p| review::answer::distinct_family(p.as_ref(), &mine))
                    .collect::<std::result::Result<Vec<()>, String>>()
                    .map(|_| ()),
            };
            if let Err(why) = check {
                // Not run: a reviewer of the proposer's own family blocks the verdict.
                failed.push(ReviewerOutcome {
                    name: def.name.clone(),
                    answer: Some(review::answer::Answer {
                        verdict: Verdict::Block,
                        findings: vec![Finding {
                            reviewer: def.name.clone(),
                            severity: Severity::Blocking,
                            category: "distinct-family".into(),
                            file: None,
                            line: None,
                            message: format!("[review] distinct_family requires reviewer `{}` to differ from the proposer in provider and model family: {why}", def.name),
                            hint: "route the reviewer to a role of another provider and family (atelier.toml `provider` and `family`), or name the agent that wrote the change by a role that declares its family (`propose --agent ROLE`)".into(),
                        }],
                    }),
                    failure: None,
                    attempts: 0,
                    blocking: true,
                });
                continue;
            }
        }
        let Some(name) = def.template.as_deref() else {
            failed.push(ReviewerOutcome::failed(
                &def.name,
                def.blocking,
                "no template".into(),
            ));
            continue;
        };
        let path = format!("reviewers/templates/{name}");
        // Never through a link (its target path is not a template) nor from a submodule: a
        // reviewer whose template cannot be read so fails, blocking as it was declared.
        let template = match crate::agent::prompt::text_on_branch(
            repo,
            &base_tree,
            &path,
            &format!("the proposal's base {base}"),
        ) {
            Ok(Some(t)) => t,
            Err(crate::git::GitError::NotText(why)) => {
                failed.push(ReviewerOutcome::failed(&def.name, def.blocking, why));
                continue;
            }
            Err(e) => return Err(e.into()),
            Ok(None) => {
                failed.push(ReviewerOutcome::failed(&def.name, def.blocking, format!("{path} does not exist at the proposal's base {base}: add it through a proposal")));
                continue;
            }
        };
        match reviewer::job(def, &ws.config.roles, &template, handoff) {
            Ok(mut j) if contained => {
                let role = def.role.as_deref().unwrap_or_default();
                match crate::agent::contain::role(
                    role,
                    &ws.config.roles[role],
                    &ws.root,
                    &protected,
                ) {
                    Ok(s) => {
                        j.sandbox = Some(s);
                        jobs.push(j)
                    }
                    Err(e) => failed.push(ReviewerOutcome::failed(
                        &def.name,
                        def.blocking,
                        format!("{}: {e}", e.code()),
                    )),
                }
            }
            Ok(j) => jobs.push(j),
            Err(why) => failed.push(ReviewerOutcome::failed(&def.name, def.blocking, why)),
        }
    }
    Ok((jobs, failed))
}

/// The families of whatever wrote the change, each `None` where it is unknown (which fails the
/// distinct-family rule closed): `propose --agent ROLE`, or the roles of a swarm run's tasks.
fn proposer_family(ws: &Workspace, provenance: &panel::Provenance) -> Vec<Option<Family>> {
    let family = |role: &str| ws.config.roles.get(role).and_then(|r| r.family());
    match provenance.origin.as_deref() {
        Some(o) if o.starts_with("swarm run ") => {
            let run = &o["swarm run ".len()..];
            let dir = crate::swarm::paths::run_dir(&ws.atelier_dir(), run);
            let mut roles = std::collections::BTreeSet::new();
            if let Ok(entries) = std::fs::read_dir(dir.join("plans")) {
                for p in entries.flatten().map(|e| e.path()) {
                    if let Ok(plan) = std::fs::read_to_string(&p)
                        .map_err(|e| e.to_string())
                        .and_then(|t| {
                            crate::swarm::plan::parse(&p.display().to_string(), &t)
                                .map_err(|e| e.to_string())
                        })
                    {
                        roles.extend(plan.tasks.into_iter().map(|t| t.role));
                    }
                }
            }
            if roles.is_empty() {
                vec![None]
            } else {
                roles.iter().map(|r| family(r)).collect()
            }
        }
        Some(o) => vec![family(o.strip_prefix("agent ").unwrap_or(o))],
        None => Vec::new(),
    }
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

pub use super::body::finding_line;
