//! The self-improvement cycle's sequencing, after a proposer has opened its proposal: the
//! metric it is judged by is registered in the ledger, the replay benchmark measures it (two
//! `[conductor]` settings, or two builds of a change to Atelier's own code), the validators
//! check it, the evidence is committed into its record, the review panel judges it as it now
//! is, and it is submitted — then the cycle stops at "awaiting approval". A proposal the panel
//! blocks, or whose evidence shows a regression or a failed validator, is recorded and closed,
//! not submitted (unless `submit_anyway`). A step that fails closes the proposal, saying why.
//!
//! It talks to `workflow` (register, attach, review, evaluate, submit, close) and to the swarm's
//! bench, builds, usertest and evidence; it reports progress through [`Host`], never printing.

use serde::Serialize;

use crate::governance::review::Verdict;
use crate::governance::time::Timestamp;
use crate::improve::bench;
use crate::improve::evidence::{self, Benchmark, Evidence, Validated};
use crate::improve::metrics::ConductorSettings;
use crate::workflow::{self, Error, Result, Workspace};

/// What the cycle needs from whoever runs it: somewhere to tell the operator how it goes, and
/// the time (the cli announces a clock set by `ATELIER_NOW`).
pub trait Host {
    /// One line of progress for the operator.
    fn note(&self, text: &str);
    /// The time now.
    fn now(&self) -> Result<Timestamp>;
}

/// How to run the cycle (`atelier cycle`'s options, less the proposer's own).
#[derive(Debug, Clone)]
pub struct Options {
    /// The proposer: `tune`, `memory`, `lint` or `agent`.
    pub from: String,
    /// The replay metric the evidence is judged by (default: the one the change is meant to
    /// move).
    pub metric: Option<String>,
    /// Seeds for the replay benchmark (at least 2).
    pub seeds: u64,
    /// Only this mission.
    pub mission: Option<String>,
    /// Submit even when the panel blocks or the evidence shows a regression or a failed
    /// validator.
    pub submit_anyway: bool,
}

/// What the cycle did, step by step (`--json`).
#[derive(Debug, Default, Serialize)]
pub struct Cycle {
    /// The last step reached: propose, register, benchmark, validate, evidence, review,
    /// submit, awaiting-approval.
    pub stage: &'static str,
    pub proposal: Option<String>,
    pub registered: Option<Registered>,
    pub evidence: Option<Evidence>,
    pub evidence_head: Option<String>,
    pub review: Option<ReviewOut>,
    pub objections: Vec<String>,
    pub submitted: bool,
    pub url: Option<String>,
    pub approvals: Option<usize>,
    pub required: Option<u32>,
    pub approve_command: Option<String>,
    /// Why the cycle stopped short of awaiting approval.
    pub stopped: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct Registered {
    pub metric: Option<String>,
    pub reason: String,
    pub entry: u64,
    /// The registration entry's leaf hash (hex): the benchmark's seeds are drawn from it.
    pub leaf: String,
}

#[derive(Debug, Serialize)]
pub struct ReviewOut {
    pub verdict: Verdict,
    pub findings: usize,
    pub recorded: Option<u64>,
}

impl Cycle {
    /// Reaches `stage`, telling the operator `text`.
    fn reach(&mut self, host: &dyn Host, stage: &'static str, text: &str) {
        self.stage = stage;
        host.note(&format!("cycle [{stage}] {text}"));
    }
}

/// Checks `opts` and loads the missions the benchmark runs (built in and the protected
/// branch's), before any proposer runs; the cycle then stands at its first step, `propose`.
pub fn start(
    ws: &Workspace,
    opts: &Options,
    host: &dyn Host,
) -> Result<(Vec<bench::Mission>, Cycle)> {
    if let Some(m) = &opts.metric {
        evidence::check_metric(m).map_err(Error::Input)?;
    }
    check_seeds(opts)?;
    let missions = bench::of_workspace(ws, &|m| host.note(&format!("cycle: {m}")))?;
    check_mission(opts, &missions)?;
    let mut c = Cycle::default();
    c.reach(
        host,
        "propose",
        &format!("asking the `{}` proposer", opts.from),
    );
    Ok((missions, c))
}

/// `--seeds`: an interval needs two.
fn check_seeds(opts: &Options) -> Result<()> {
    if opts.seeds < 2 {
        return Err(Error::Input(format!(
            "--seeds {}: at least 2 (the evidence reports a 95 % interval across seeds)",
            opts.seeds
        )));
    }
    Ok(())
}

/// `--mission`: one of the benchmark's `missions`.
fn check_mission(opts: &Options, missions: &[bench::Mission]) -> Result<()> {
    if let Some(m) = &opts.mission {
        if !missions.iter().any(|x| &x.mission.id == m) {
            return Err(Error::Input(format!(
                "--mission {m}: no such mission (built in or on the protected branch: {})",
                missions
                    .iter()
                    .map(|x| x.mission.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
    }
    Ok(())
}

/// The cycle once the proposer has opened proposal `p`: every step after `propose`, recorded
/// in `c`. `Ok` with `c.submitted` false when it stopped short (`c.stopped` says why); a step
/// that fails closes the proposal with the reason, in the ledger, and returns its error.
pub fn complete(
    ws: &Workspace,
    opts: &Options,
    missions: &[bench::Mission],
    p: &workflow::Proposed,
    c: &mut Cycle,
    host: &dyn Host,
) -> Result<()> {
    c.proposal = Some(p.id.clone());
    let Err(e) = steps(ws, opts, missions, p, c, host) else {
        return Ok(());
    };
    // Nothing half-recorded: the proposal is closed with the reason, in the ledger.
    let reason = format!(
        "atelier cycle stopped at {}: {}",
        c.stage,
        crate::errors::chain(&e)
    );
    match host
        .now()
        .and_then(|now| workflow::close(ws, &p.id, Some(reason.clone()), now))
    {
        Ok(_) => host.note(&format!("cycle: proposal {} closed: {reason}", p.id)),
        Err(x) => host.note(&format!(
            "cycle: proposal {} could not be closed ({}); close it with `atelier close {}`",
            p.id,
            crate::errors::chain(&x),
            p.id
        )),
    }
    Err(e)
}

/// The [conductor] of atelier.toml in commit `at`.
fn conductor_at(ws: &Workspace, at: git2::Oid) -> Result<ConductorSettings> {
    let tree = ws.repo.find_commit(at)?.tree()?;
    let label = format!("{} at {at}", crate::config::FILE);
    let text = crate::git::read_file(&ws.repo, &tree, crate::config::FILE)?
        .ok_or_else(|| Error::Input(format!("{label}: not found")))?;
    let config = crate::config::Config::parse(&label, &String::from_utf8_lossy(&text))?;
    Ok(ConductorSettings::of(&config.conductor))
}

/// What the change is measured by: both sides' `[conductor]`, the build inputs it touches
/// (a change to Atelier's own code is measured by two builds), and the registered metric.
struct Measure {
    base: git2::Oid,
    head: git2::Oid,
    baseline: ConductorSettings,
    candidate: ConductorSettings,
    code: Vec<String>,
    metric: Option<String>,
    reason: String,
}

fn steps(
    ws: &Workspace,
    opts: &Options,
    missions: &[bench::Mission],
    p: &workflow::Proposed,
    c: &mut Cycle,
    host: &dyn Host,
) -> Result<()> {
    let m = register(ws, opts, missions, p, c, host)?;
    let benchmark = benchmark(ws, opts, missions, p, &m, c, host)?;
    attach_evidence(ws, opts, p, m, benchmark, c, host)?;
    review(ws, p, c, host)?;
    if !c.objections.is_empty() && !opts.submit_anyway {
        // Recorded, with its evidence, and closed: on the local forge an open proposal is
        // already approvable, so "not submitted" means closed there and on GitHub alike.
        let why = c.objections.join("; ");
        workflow::close(
            ws,
            &p.id,
            Some(format!("not submitted by atelier cycle: {why}")),
            host.now()?,
        )?;
        c.stopped = Some(format!(
            "proposal {} is recorded with its evidence and closed, not submitted: {why}. `atelier show {}` and `atelier audit show {}` have the details; `atelier cycle --submit-anyway` submits such a proposal, saying so.",
            p.id, p.id, p.id
        ));
        return Ok(());
    }
    submit(ws, p, c, host)
}

/// The first few of the build inputs a change touches, for a sentence.
fn files_of(code: &[String]) -> String {
    let mut f: Vec<&str> = code.iter().take(4).map(String::as_str).collect();
    if code.len() > 4 {
        f.push("…");
    }
    f.join(", ")
}

/// The metric the evidence is judged by, and why: the one `metric_for` finds in the change to
/// `[conductor]`, or the one `asked` for; a change to Atelier's own code (`code`) needs none.
fn choose_metric(
    baseline: &ConductorSettings,
    candidate: &ConductorSettings,
    code: &[String],
    asked: Option<&str>,
) -> (Option<String>, String) {
    let files = files_of(code);
    match (evidence::metric_for(baseline, candidate), asked) {
        (Some((_, why)), Some(asked)) => {
            (Some(asked.to_string()), format!("named with --metric ({why})"))
        }
        (Some((m, why)), None) => (Some(m), why),
        (None, Some(asked)) if !code.is_empty() => (
            Some(asked.to_string()),
            format!("named with --metric for a change to atelier's own code ({files})"),
        ),
        (None, None) if !code.is_empty() => (
            None,
            format!("a change to atelier's own code ({files}) implies no metric, and none was named with --metric: the base's build and the change's both run the missions, so the evidence shows any regression"),
        ),
        (None, _) => (
            None,
            "the change leaves atelier.toml's [conductor] and atelier's own code as they are: the replay benchmark would compare atelier with itself".to_string(),
        ),
    }
}

/// Decides what the change is measured by and registers the metric in the ledger, before the
/// benchmark runs.
fn register(
    ws: &Workspace,
    opts: &Options,
    missions: &[bench::Mission],
    p: &workflow::Proposed,
    c: &mut Cycle,
    host: &dyn Host,
) -> Result<Measure> {
    let head = git2::Oid::from_str(&p.head)?;
    let base = git2::Oid::from_str(&p.base)?;
    let (baseline, candidate) = (conductor_at(ws, base)?, conductor_at(ws, head)?);
    let all: Vec<String> = missions
        .iter()
        .map(|m| m.mission.id.clone())
        .filter(|id| opts.mission.as_ref().is_none_or(|m| m == id))
        .collect();
    let code = crate::improve::builds::code_changed(ws, base, head)?;
    let (metric, reason) = choose_metric(&baseline, &candidate, &code, opts.metric.as_deref());
    let measured = metric.is_some() || !code.is_empty();
    if !measured && opts.metric.is_some() {
        host.note(&format!(
            "cycle: --metric is not used: {reason}; the evidence says it was not measured"
        ));
    }
    c.reach(
        host,
        "register",
        &match &metric {
            Some(m) => format!("metric {m} named in the ledger before the benchmark: {reason}"),
            None => format!("no metric: {reason}"),
        },
    );
    let registration = workflow::cycle::register(
        ws,
        &p.id,
        head,
        metric.clone(),
        reason.clone(),
        opts.seeds,
        if measured { all } else { Vec::new() },
        host.now()?,
    )?;
    c.registered = Some(Registered {
        metric: metric.clone(),
        reason: reason.clone(),
        entry: registration.entry,
        leaf: registration.leaf,
    });
    Ok(Measure {
        base,
        head,
        baseline,
        candidate,
        code,
        metric,
        reason,
    })
}

/// The replay benchmark: the two `[conductor]`s, or the base's build and the change's, or
/// nothing when neither differs.
fn benchmark(
    ws: &Workspace,
    opts: &Options,
    missions: &[bench::Mission],
    p: &workflow::Proposed,
    m: &Measure,
    c: &mut Cycle,
    host: &dyn Host,
) -> Result<Option<Benchmark>> {
    // Drawn from the entry that registered the metric: unknown until it was on record.
    let drawn_from = c.registered.as_ref().map(|r| evidence::DrawnFrom {
        entry: r.entry,
        leaf: r.leaf.clone(),
    });
    let seeds = match &drawn_from {
        Some(d) => evidence::draw_seeds(&d.leaf, opts.seeds),
        None => bench::hand_seeds(opts.seeds),
    };
    let report = if m.code.is_empty() && m.metric.is_some() {
        c.reach(
            host,
            "benchmark",
            &format!(
                "replaying the missions under the base's and the change's [conductor], {} seeds, interleaved",
                opts.seeds
            ),
        );
        bench::replay(
            &m.baseline,
            &m.candidate,
            missions,
            &seeds,
            opts.mission.as_deref(),
            &|t| host.note(&format!("cycle [benchmark] {t}")),
        )?
    } else if !m.code.is_empty() {
        c.reach(
            host,
            "build",
            &format!("the change edits atelier's own code ({}): building the base (trusted) and the change (contained)", files_of(&m.code)),
        );
        let say = |t: &str| host.note(t);
        let (base_bin, _) = crate::improve::builds::trusted(ws, "the base", &p.base, &say)?;
        let changed = crate::improve::builds::untrusted(ws, m.head, host.now()?, &say)?;
        c.reach(
            host,
            "benchmark",
            &format!(
                "replaying the missions with the base's build and the change's, {} seeds, interleaved",
                opts.seeds
            ),
        );
        bench::replay_sides(
            &bench::Side::Binary {
                path: base_bin,
                label: format!("the base ({} at {})", ws.branch(), &p.base[..12]),
                conductor: m.baseline.clone(),
                sandbox: None,
            },
            &bench::Side::Binary {
                path: changed.path.clone(),
                label: changed.label.clone(),
                conductor: m.candidate.clone(),
                sandbox: changed.sandbox.clone(),
            },
            missions,
            &seeds,
            opts.mission.as_deref(),
            &|t| host.note(&format!("cycle [benchmark] {t}")),
        )?
    } else {
        return Ok(None);
    };
    Ok(Some(Benchmark {
        seeds: report.seeds,
        missions: report.missions,
        interval: report.interval.to_string(),
        baseline: report.baseline,
        candidate: report.candidate,
        baseline_build: report.baseline_build,
        candidate_build: report.candidate_build,
        deltas: report.deltas,
        seed_values: report.seed_values,
        drawn_from,
    }))
}

/// Runs the validators, then commits the evidence into the proposal's record.
fn attach_evidence(
    ws: &Workspace,
    opts: &Options,
    p: &workflow::Proposed,
    m: Measure,
    benchmark: Option<Benchmark>,
    c: &mut Cycle,
    host: &dyn Host,
) -> Result<()> {
    c.reach(host, "validate", "running the validators");
    let mut validators = earlier_validators(ws, &opts.from, &p.id)?;
    let user = crate::improve::usertest::validate(ws, m.base, m.head, host.now()?)?;
    host.note(&format!("cycle [validate] {}: {}", user.name, user.result));
    validators.push(user);
    let (outcome, regressions) = evidence::outcome(m.metric.as_deref(), benchmark.as_ref());
    let e = Evidence {
        proposal: p.id.clone(),
        proposer: opts.from.clone(),
        base: p.base.clone(),
        measured_head: p.head.clone(),
        metric: m.metric,
        metric_reason: m.reason,
        registered_entry: c.registered.as_ref().map(|r| r.entry),
        benchmark,
        outcome,
        regressions,
        validators,
    };
    c.reach(host, "evidence", &e.headline());
    let evidence_head = workflow::cycle::attach(ws, &e, m.head, host.now()?)?;
    c.evidence_head = Some(evidence_head.to_string());
    c.objections = e.objections();
    c.evidence = Some(e);
    Ok(())
}

/// The review panel on the change as it now is; a verdict the gate would refuse on (the
/// policy's `block_on`) becomes the first objection.
fn review(ws: &Workspace, p: &workflow::Proposed, c: &mut Cycle, host: &dyn Host) -> Result<()> {
    c.reach(
        host,
        "review",
        "the review panel judges the change as it now is",
    );
    let review = workflow::review::review_branch(ws, &p.id, host.now()?)?;
    for n in &review.notes {
        host.note(&format!("cycle [review] note: {n}"));
    }
    host.note(&format!(
        "cycle [review] {} ({} finding(s))",
        review.verdict.as_str(),
        review.findings.len()
    ));
    // As the gate weighs the verdict (the policy's `block_on`), before any approval.
    let eval = workflow::evaluate(ws, &ws.view()?, ws.pull(&p.id)?, host.now()?)?;
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
    Ok(())
}

/// Submits the proposal (a pull request on GitHub; the local forge holds it already) and
/// records where its approval stands.
fn submit(ws: &Workspace, p: &workflow::Proposed, c: &mut Cycle, host: &dyn Host) -> Result<()> {
    c.reach(host, "submit", "submitting");
    let github = ws.config.forge.kind == "github";
    if github {
        let published = workflow::submit(ws, &p.id, host.now()?)?;
        c.url = Some(published.url.clone());
        host.note(&format!(
            "cycle [submit] pull request #{} ({})",
            published.pull, published.url
        ));
    } else {
        host.note(&format!(
            "cycle [submit] the local forge holds proposal {} already; nothing to push",
            p.id
        ));
    }
    c.submitted = true;
    if !c.objections.is_empty() {
        host.note(&format!(
            "cycle [submit] WARNING: submitted anyway (--submit-anyway) despite: {}",
            c.objections.join("; ")
        ));
    }
    let view = ws.view()?;
    let eval = workflow::evaluate(ws, &view, ws.pull(&p.id)?, host.now()?)?;
    let required = eval.decision.required_approvals();
    c.approvals = Some(eval.decision.approvers.len());
    c.required = required;
    let pull = github.then(|| view.submitted_pulls(&p.id).last().copied().unwrap_or(0));
    c.approve_command = Some(approve_command(&p.id, pull));
    c.reach(
        host,
        "awaiting-approval",
        &format!(
            "proposal {}: {}",
            p.id,
            c.awaiting().expect("the approvals were just counted")
        ),
    );
    Ok(())
}

impl Cycle {
    /// "awaiting approval: N of M", once the cycle has counted the approvals.
    pub fn awaiting(&self) -> Option<String> {
        let approvals = self.approvals?;
        Some(format!(
            "awaiting approval: {approvals} of {}",
            self.required.map_or("?".to_string(), |r| r.to_string())
        ))
    }
}

/// The command an approver runs: on GitHub for the pull request `pull`, else for proposal `id`.
fn approve_command(id: &str, pull: Option<u64>) -> String {
    match pull {
        Some(pr) => format!("atelier approve --pr {pr} --key <your ed25519 key> --post"),
        None => format!("atelier approve {id} --key <your ed25519 key>"),
    }
}

/// The contract and scrutiny validators as they stand for a proposer that writes its change
/// itself: not run, with no plan or swarm run to check.
fn not_run(from: &str) -> Vec<Validated> {
    ["contract", "scrutiny"]
        .into_iter()
        .map(|n| Validated {
            name: n.into(),
            result: "not run".into(),
            detail: format!(
                "the `{from}` proposer writes its change itself: there is no plan or swarm run to check"
            ),
        })
        .collect()
}

/// The contract and scrutiny validators' results, which ran (or could not) inside the
/// proposer: `agent` goes through both (it proposes nothing otherwise), and the scrutiny
/// validator's record (`scrutiny.json` in its run) says what it found; the others write one
/// change themselves, with no plan and no swarm run to check.
fn earlier_validators(ws: &Workspace, from: &str, id: &str) -> Result<Vec<Validated>> {
    if from != "agent" {
        return Ok(not_run(from));
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
    Ok(vec![
        Validated {
            name: "contract".into(),
            result: "passed".into(),
            detail: "the proposer's plan passed `plan check` and, where a validator role is configured, its adversarial read, before any worker ran".into(),
        },
        scrutiny_of(&run, &path, scrutiny),
    ])
}

/// The scrutiny validator's result from its record at `path` (if readable) for run `run`.
fn scrutiny_of(run: &str, path: &std::path::Path, record: Option<serde_json::Value>) -> Validated {
    match record {
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conductor(restart_after: &str, failure_budget: u32) -> ConductorSettings {
        ConductorSettings {
            nudge_after: crate::config::Span::parse("60s").expect("a duration"),
            restart_after: crate::config::Span::parse(restart_after).expect("a duration"),
            attempt_timeout: crate::config::Span::parse("10m").expect("a duration"),
            failure_budget,
        }
    }

    fn options(seeds: u64, mission: Option<&str>) -> Options {
        Options {
            from: "tune".into(),
            metric: None,
            seeds,
            mission: mission.map(str::to_string),
            submit_anyway: false,
        }
    }

    #[test]
    fn a_conductor_change_is_judged_by_the_metric_it_is_meant_to_move() {
        let (m, why) = choose_metric(&conductor("2m", 1), &conductor("5m", 1), &[], None);
        assert_eq!(m.as_deref(), Some("false_kills"));
        assert!(
            why.starts_with("restart_after raised from 2m to 5m"),
            "{why}"
        );
    }

    #[test]
    fn a_named_metric_wins_and_says_what_the_change_meant() {
        let (m, why) = choose_metric(
            &conductor("2m", 1),
            &conductor("2m", 3),
            &[],
            Some("wall_ms"),
        );
        assert_eq!(m.as_deref(), Some("wall_ms"));
        assert!(
            why.starts_with("named with --metric (failure_budget raised"),
            "{why}"
        );
    }

    #[test]
    fn a_code_change_names_a_metric_only_when_asked_and_lists_four_files() {
        let code: Vec<String> = (1..=5).map(|i| format!("src/f{i}.rs")).collect();
        let same = conductor("2m", 1);
        let (m, why) = choose_metric(&same, &same, &code, None);
        assert_eq!(m, None);
        assert!(
            why.starts_with("a change to atelier's own code (src/f1.rs, src/f2.rs, src/f3.rs, src/f4.rs, …) implies no metric"),
            "{why}"
        );
        let (m, why) = choose_metric(&same, &same, &code[..1], Some("wall_ms"));
        assert_eq!(m.as_deref(), Some("wall_ms"));
        assert_eq!(
            why,
            "named with --metric for a change to atelier's own code (src/f1.rs)"
        );
    }

    #[test]
    fn a_change_to_nothing_measured_has_no_metric_even_when_one_is_named() {
        let same = conductor("2m", 1);
        let (m, why) = choose_metric(&same, &same, &[], Some("wall_ms"));
        assert_eq!(m, None);
        assert!(why.contains("would compare atelier with itself"), "{why}");
    }

    #[test]
    fn one_seed_or_an_unknown_mission_is_refused_as_input() {
        let e = check_seeds(&options(1, None)).expect_err("one seed");
        assert!(
            matches!(&e, Error::Input(m) if m.starts_with("--seeds 1: at least 2")),
            "{e}"
        );
        let e = check_mission(&options(2, Some("nope")), &[]).expect_err("no such mission");
        assert!(
            matches!(&e, Error::Input(m) if m.starts_with("--mission nope: no such mission")),
            "{e}"
        );
        check_seeds(&options(2, None)).expect("two seeds");
        check_mission(&options(2, None), &[]).expect("all missions");
    }

    #[test]
    fn the_approve_command_names_the_pull_request_on_github_and_the_proposal_here() {
        assert_eq!(
            approve_command("7", Some(12)),
            "atelier approve --pr 12 --key <your ed25519 key> --post"
        );
        assert_eq!(
            approve_command("7", None),
            "atelier approve 7 --key <your ed25519 key>"
        );
    }

    #[test]
    fn awaiting_counts_approvals_once_counted_and_says_so_when_the_quorum_is_unknown() {
        let mut c = Cycle::default();
        assert_eq!(c.awaiting(), None);
        c.approvals = Some(0);
        assert_eq!(c.awaiting().as_deref(), Some("awaiting approval: 0 of ?"));
        c.required = Some(2);
        assert_eq!(c.awaiting().as_deref(), Some("awaiting approval: 0 of 2"));
    }

    #[test]
    fn proposers_that_write_their_own_change_ran_no_contract_or_scrutiny_validator() {
        let v = not_run("tune");
        assert_eq!(
            v.iter()
                .map(|v| (v.name.as_str(), v.result.as_str()))
                .collect::<Vec<_>>(),
            [("contract", "not run"), ("scrutiny", "not run")]
        );
    }

    #[test]
    fn scrutiny_passes_on_a_record_that_does_not_block_and_fails_without_one() {
        let path = std::path::Path::new("/runs/r1/scrutiny.json");
        let pass = scrutiny_of(
            "r1",
            path,
            Some(serde_json::json!({"verdict": "approve", "evidence": [1, 2], "findings": []})),
        );
        assert_eq!(pass.result, "passed");
        assert!(pass
            .detail
            .starts_with("run r1: 2 criterion check(s) passed on record, 0 finding(s)"));
        let block = scrutiny_of("r1", path, Some(serde_json::json!({"verdict": "block"})));
        assert_eq!(block.result, "failed");
        let none = scrutiny_of("r1", path, None);
        assert_eq!(
            none.detail,
            "run r1: no readable record at /runs/r1/scrutiny.json"
        );
    }
}
