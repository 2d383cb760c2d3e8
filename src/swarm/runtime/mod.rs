//! Running plans: the conductor. The `Conductor` starts attempts when the schedule allows
//! (dependencies met, claims free), gives each a fresh worktree on its own branch and a fresh
//! worker, runs the gauntlet and the contract checks, integrates passing work into the run's
//! branch one task at a time, and remembers failures for the next attempt. Its state is the fold
//! of the run's events (`events::RunState`): every state change is written (fsynced) and applied
//! before it is relied on, and a crashed run resumes from the fold of its log, through the same
//! code.
//!
//! This file opens (or resumes) a run and holds the scheduling loop; the rest, by concern:
//! - `sandbox`: the containment of the run's programs, set up before anything runs (also used
//!   by `improve`'s runners, so it talks to nothing else here);
//! - `limits`: the durations, budgets and sandboxes the run works under, from the config;
//! - `attempt`: one attempt — its worktree and prompt, the worker, the gauntlet, the snapshots;
//! - `integrate`: what becomes of an attempt's result, and the run branch's checks on resume;
//! - `control`: operators' control requests (pause, resume, stop, retry, skip);
//! - `cleanup`: `atelier clean`;
//! - `propose`: a finished run as a proposal.
//!
//! Talks to `swarm`'s data (plans, schedule, events, live, paths), `agent` (backends, prompts),
//! `git`, `improve` (the contract validator before a run, the scrutiny validator before its
//! proposal, the lessons every prompt carries) and the workflow's `Workspace`.

mod attempt;
pub mod budget;
mod checks;
mod cleanup;
mod control;
mod integrate;
mod limits;
mod propose;
pub(crate) mod sandbox;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use git2::Oid;
use serde::Serialize;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

pub use cleanup::{clean, prune, Cleaned, KEPT_RUNS};
pub use control::{ControlRequest, CONTROL_DIR};
pub use propose::{propose_run, propose_run_as, Authored};

use attempt::AttemptResult;
use control::Flow;
use limits::{millis, Limits};
use sandbox::{sandboxes, Sandboxes};

use crate::agent::{self, contain, process};
use crate::fsutil::Lock;
use crate::git;
use crate::governance::time::Timestamp;
use crate::governance::Code;
use crate::swarm::events::{self, RunEvent, RunState, Sink, TaskState};
use crate::swarm::live;
use crate::swarm::plan::{self, Plan, Task};
use crate::swarm::schedule;
use crate::workflow::error::{Context, Result};
use crate::workflow::Workspace;

/// How a run ended.
#[derive(Debug, Serialize)]
pub struct RunSummary {
    pub run: String,
    pub branch: String,
    /// The run branch's tip as the conductor left it.
    pub tip: String,
    pub events: String,
    pub succeeded: Vec<String>,
    pub failed: BTreeMap<String, String>,
    pub blocked: BTreeMap<String, String>,
    /// Tasks an operator forced past (`control skip`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<String>,
    /// How the run's programs were confined: `landlock` or `none`.
    pub containment: String,
}

impl RunSummary {
    pub fn ok(&self) -> bool {
        self.failed.is_empty() && self.blocked.is_empty() && self.skipped.is_empty()
    }
}

/// Where a repository keeps its own worker prompt (read from the protected branch).
pub const WORKER_TEMPLATE: &str = "prompts/worker.j2";

/// `prompts/worker.j2` as the protected branch holds it, else the built-in prompt.
fn worker_template(ws: &Workspace) -> Result<String> {
    let tip = ws
        .repo
        .find_commit(git::branch_tip(&ws.repo, ws.branch())?)?;
    Ok(
        agent::prompt::text_on_branch(&ws.repo, &tip.tree()?, WORKER_TEMPLATE, ws.branch())?
            .unwrap_or_else(|| agent::prompt::DEFAULT_TEMPLATE.to_string()),
    )
}

/// The bullet lines of `prompts/lessons.md` as the protected branch holds it, as prompts carry
/// them.
fn lessons_on_branch(ws: &Workspace) -> Result<Vec<String>> {
    let tip = ws
        .repo
        .find_commit(git::branch_tip(&ws.repo, ws.branch())?)?;
    Ok(agent::prompt::text_on_branch(
        &ws.repo,
        &tip.tree()?,
        crate::improve::lessons::PATH,
        ws.branch(),
    )?
    .map(|t| crate::improve::lessons::for_prompt(&t))
    .unwrap_or_default())
}

/// A worker template (or lessons) a new run could not use refuses it before anything of the
/// run exists, and before the contract validator is asked.
fn prompts_usable(ws: &Workspace) -> Result<()> {
    lessons_on_branch(ws)?;
    agent::prompt::check(&worker_template(ws)?).map_err(|e| {
        crate::workflow::Error::Input(format!(
            "{WORKER_TEMPLATE} on {}: {e}; fix it with a proposal",
            ws.branch()
        ))
    })
}

/// The run's directory under `.atelier/runs/` ([`crate::swarm::paths::run_dir`] of the workspace).
pub fn run_dir(ws: &Workspace, run: &str) -> PathBuf {
    crate::swarm::paths::run_dir(&ws.atelier_dir(), run)
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM. The handlers are installed when this is called,
/// before any worker starts, so no signal in between takes the default action.
fn interrupted() -> Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    Ok(async move {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
    })
}

/// Refuses plans that `atelier plan check` would refuse.
fn refuse_unchecked(ws: &Workspace, plan_files: &[(String, String)]) -> Result<()> {
    let reach = crate::swarm::reach(&ws.repo, &ws.config)?;
    let report = crate::swarm::check(plan_files, &role_names(ws), &reach)?;
    if let Some(first) = report.refusals.first() {
        return Err(crate::workflow::refuse(
            Code::PlanRefused,
            format!(
                "the plans do not pass `atelier plan check` ({} problem(s); first: {} {}: {})",
                report.refusals.len(),
                first.code,
                first.file,
                first.message
            ),
        ));
    }
    Ok(())
}

/// Refuses a run whose tasks' roles name a program that is not there: every attempt would
/// fail to start and use up the failure budget saying so.
fn refuse_missing_programs(ws: &Workspace, plan_files: &[(String, String)]) -> Result<()> {
    let roles: BTreeSet<String> = plan_files
        .iter()
        .filter_map(|(f, t)| plan::parse(f, t).ok())
        .flat_map(|p| p.tasks.into_iter().map(|t| t.role))
        .collect();
    let path = std::env::var("PATH").ok();
    for r in &roles {
        let Some(role) = ws.config.roles.get(r) else {
            continue;
        };
        if let Some(why) = crate::agent::clients::missing_program(r, role, path.as_deref()) {
            return Err(crate::workflow::Error::Input(format!(
                "{why}; no run was started"
            )));
        }
    }
    Ok(())
}

/// What `run` is asked to do.
pub struct RunOptions {
    pub plan_files: Vec<(String, String)>,
    pub max_parallel: Option<usize>,
    /// Continue this run instead of starting a new one.
    pub resume: Option<String>,
    /// The goal a person gave for these plans (`propose --from agent`): shown to the validator.
    pub goal: Option<String>,
}

/// Runs (or resumes) plans to the end. `clock` gives the time for events.
pub fn run(ws: &Workspace, opts: RunOptions, clock: &dyn Fn() -> Timestamp) -> Result<RunSummary> {
    run_with_progress(ws, opts, clock, None)
}

/// [`run`], telling `progress` of every event as it is written.
pub fn run_with_progress(
    ws: &Workspace,
    opts: RunOptions,
    clock: &dyn Fn() -> Timestamp,
    progress: Option<Progress<'_>>,
) -> Result<RunSummary> {
    let tokio_rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    // Containment is settled before anything exists: a run that cannot be contained never
    // starts, and never leaves a run directory behind.
    let sandboxes = sandboxes(ws, &role_names(ws))?;
    refuse_missing_programs(ws, &opts.plan_files)?;
    // The contract validator's adversarial read, when a `validator` role is configured: a
    // new run whose contracts it does not approve never starts.
    let validated = match &opts.resume {
        Some(_) => None,
        None => {
            refuse_unchecked(ws, &opts.plan_files)?;
            prompts_usable(ws)?;
            let v = crate::improve::validator::validate(
                ws,
                &opts.plan_files,
                opts.goal.as_deref(),
                clock(),
            )?;
            if let Some(v) = v.as_ref().filter(|v| !v.accepted()) {
                return Err(crate::workflow::refuse(
                    Code::ContractRejected,
                    format!(
                        "the validator's verdict on the plans' contracts is {} (expected: approve); no run was started:\n  {}\nstrengthen the criteria and checks it names, then run again",
                        v.verdict.as_str(),
                        v.findings.join("\n  ")
                    ),
                ));
            }
            v
        }
    };
    tokio_rt.block_on(async {
        let stop = interrupted()?;
        let mut conductor = match &opts.resume {
            Some(id) => Conductor::resume(ws, id, opts.max_parallel, clock, sandboxes)?,
            None => Conductor::start(ws, &opts, clock, sandboxes, validated)?,
        };
        conductor.progress = progress;
        conductor.conduct(stop).await
    })
}

/// An attempt in flight: its worktree, and the commit it started from.
struct Flight {
    name: String,
    path: PathBuf,
    at: Oid,
}

/// One run, conducted. What the run is (its plans, the roles' backends, the limits) is fixed;
/// its state is the fold of its events (`RunState`), kept current by applying each event as it
/// is written (`emit`), from the fold of the log so far: empty for a new run, the crashed run's
/// for `--resume`. Only the attempts in flight (their worktrees and tasks) live outside it.
struct Conductor<'a> {
    ws: &'a Workspace,
    clock: &'a dyn Fn() -> Timestamp,
    run: String,
    branch: String,
    plans: Vec<Plan>,
    tasks: BTreeMap<String, Task>,
    backends: BTreeMap<String, agent::Backend>,
    max_parallel: usize,
    limits: Arc<Limits>,
    /// `prompts/lessons.md` on the protected branch, as prompts carry it (read when the
    /// conductor opens the run: reviewed text only, never the working tree's).
    lessons: Vec<String>,
    /// `prompts/worker.j2` on the protected branch, else the built-in prompt (read when the
    /// conductor opens the run, like the lessons: never the working tree's).
    worker_template: String,
    events: PathBuf,
    sink: Sink,
    state: RunState,
    flights: BTreeMap<String, Flight>,
    /// Each attempt's task, number, result and how long it took (ms).
    attempts: JoinSet<(String, u32, AttemptResult, u64)>,
    /// Workers' events (nudges, exits, steps), written by the conductor as they arrive.
    tx: mpsc::UnboundedSender<RunEvent>,
    rx: mpsc::UnboundedReceiver<RunEvent>,
    /// Told of every event as it is written, with the state after it, and of the workers'
    /// silences about once a second (`run`'s live progress).
    progress: Option<Progress<'a>>,
    /// The running workers' last-output clocks, published to `live.json` about once a second.
    board: live::Board,
    /// `[budget]`, the conductor's own clock (the run's wall time), and the run's ceiling once
    /// reached (the attempts then running were ended).
    budgets: budget::Budgets,
    opened: process::Stopwatch,
    run_spent: Option<budget::Reached>,
    /// The attempts in flight a role's or a task's ceiling ended, by task.
    ended: BTreeMap<String, budget::Reached>,
    /// The role and task ceilings (scope and measure) reached while attempts ran.
    scopes_reached: BTreeSet<String>,
    /// One conductor per run: a second `run --resume` of the same run waits for the first.
    /// Declared last, so it is released after the attempts are dropped.
    _lock: Lock,
}

/// What `run` shows while the swarm works.
pub type Progress<'a> = &'a dyn Fn(Update<'_>);

/// What [`Progress`] is told.
pub enum Update<'r> {
    /// An event as written, with the state after it.
    Event(&'r events::Record, &'r RunState),
    /// About once a second: the state, and the running workers' silences.
    Tick(&'r RunState, &'r live::Status),
}

/// The run's `live.json` while its conductor runs: removed when the conductor stops, however
/// it stops.
struct LiveFile(PathBuf);

impl Drop for LiveFile {
    fn drop(&mut self) {
        live::remove(&self.0);
    }
}

fn role_names(ws: &Workspace) -> BTreeSet<String> {
    ws.config.roles.keys().cloned().collect()
}

/// Claims the next run id atomically (creating its directory either succeeds or not) and keeps
/// the plans there, for `--resume`.
fn new_run(ws: &Workspace, plan_files: &[(String, String)]) -> Result<String> {
    let runs = crate::swarm::paths::runs_dir(&ws.atelier_dir());
    std::fs::create_dir_all(&runs).with_context(|| format!("creating {}", runs.display()))?;
    let mut n = std::fs::read_dir(&runs).map(|d| d.count()).unwrap_or(0) + 1;
    let id = loop {
        match std::fs::create_dir(runs.join(format!("r{n}"))) {
            Ok(()) => break format!("r{n}"),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => n += 1,
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("creating a run directory in {}", runs.display()))
            }
        }
    };
    let dir = runs.join(&id).join("plans");
    std::fs::create_dir_all(&dir)?;
    for (i, (_, text)) in plan_files.iter().enumerate() {
        crate::fsutil::atomic_write(&dir.join(format!("{i:03}.toml")), text.as_bytes())?;
    }
    Ok(id)
}

/// The plans a run kept, parsed (for the cockpit's critical path).
pub fn run_plans(ws: &Workspace, id: &str) -> Result<Vec<Plan>> {
    saved_plans(ws, id)?
        .iter()
        .map(|(f, t)| plan::parse(f, t).map_err(|e| crate::workflow::Error::Input(e.to_string())))
        .collect()
}

/// The plans a run kept, as `(file name, text)` pairs in their order.
fn saved_plans(ws: &Workspace, id: &str) -> Result<Vec<(String, String)>> {
    let dir = run_dir(ws, id);
    let mut names: Vec<PathBuf> = std::fs::read_dir(dir.join("plans"))
        .with_context(|| {
            format!(
                "run {id} does not exist (no {})",
                dir.join("plans").display()
            )
        })?
        .flatten()
        .map(|e| e.path())
        .collect();
    names.sort();
    let mut files = Vec::new();
    for p in names {
        files.push((p.display().to_string(), std::fs::read_to_string(&p)?));
    }
    Ok(files)
}

/// Ref lock files a killed conductor left behind for this run's branches. Only called while the
/// run's own lock is held, so no live writer can own them.
fn clear_stale_ref_locks(ws: &Workspace, run: &str) -> Result<()> {
    let heads = ws.repo.commondir().join("refs/heads/atelier");
    let run_lock = heads.join("runs").join(format!("{run}.lock"));
    if run_lock.exists() {
        std::fs::remove_file(&run_lock)
            .with_context(|| format!("removing {}", run_lock.display()))?;
    }
    let mut stack = vec![heads.join("attempts").join(run)];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "lock") {
                std::fs::remove_file(&p).with_context(|| format!("removing {}", p.display()))?;
            }
        }
    }
    Ok(())
}

/// How many attempts a run keeps in flight: what was asked (`run --max-parallel`), else the
/// smallest of the plans' own limits, else `[swarm] max_parallel`; at least one.
fn parallelism(asked: Option<usize>, plans: &[Plan], configured: usize) -> usize {
    asked
        .or(plans.iter().filter_map(|p| p.max_parallel).min())
        .unwrap_or(configured)
        .max(1)
}

/// The first task from position `from` on (in `tasks`' order) that has not ended, is not in
/// flight, and depends on a task that failed or was blocked: its position, key and that
/// dependency.
fn next_to_block(
    tasks: &BTreeMap<String, Task>,
    state: &RunState,
    from: usize,
) -> Option<(usize, String, String)> {
    let ended_badly = |task: &str| {
        state
            .tasks
            .get(task)
            .is_some_and(|v| matches!(v.state, TaskState::Failed | TaskState::Blocked))
    };
    tasks.iter().enumerate().skip(from).find_map(|(i, (k, t))| {
        if state.tasks[k].ended() || state.held.contains_key(k) {
            return None;
        }
        let by = t.depends_on.iter().find(|d| ended_badly(d))?;
        Some((i, k.clone(), by.clone()))
    })
}

impl<'a> Conductor<'a> {
    /// A new run: plans `plan check` refuses are refused before a run exists; then the run id,
    /// the run branch at the protected branch's tip, and `run-started`.
    fn start(
        ws: &'a Workspace,
        opts: &RunOptions,
        clock: &'a dyn Fn() -> Timestamp,
        sandboxes: Option<Sandboxes>,
        validated: Option<crate::improve::validator::Validated>,
    ) -> Result<Conductor<'a>> {
        refuse_unchecked(ws, &opts.plan_files)?;
        prompts_usable(ws)?;
        let run = new_run(ws, &opts.plan_files)?;
        let lock = Lock::acquire(&run_dir(ws, &run).join("lock"))?;
        let mut c = Conductor::open(
            ws,
            run,
            &opts.plan_files,
            opts.max_parallel,
            clock,
            lock,
            sandboxes,
        )?;
        let repo = &ws.repo;
        let base = git::branch_tip(repo, ws.branch())?;
        repo.branch(&c.branch, &repo.find_commit(base)?, false)
            .with_context(|| format!("creating branch {}", c.branch))?;
        c.emit(RunEvent::RunStarted {
            run: c.run.clone(),
            plans: c.plans.iter().map(|p| p.id.clone()).collect(),
            branch: c.branch.clone(),
            base: base.to_string(),
            max_parallel: c.max_parallel,
            tasks: c.tasks.keys().cloned().collect(),
            waves: schedule::waves(&c.plans),
        })?;
        if let Some(v) = validated {
            c.emit(RunEvent::ContractValidated {
                validator: crate::improve::validator::ROLE.into(),
                verdict: v.verdict.as_str().into(),
                findings: v.findings,
            })?;
        }
        Ok(c)
    }

    /// A run continued after a crash, from the plans it kept and the fold of its events; the
    /// attempts that were in flight are abandoned.
    fn resume(
        ws: &'a Workspace,
        id: &str,
        max_parallel: Option<usize>,
        clock: &'a dyn Fn() -> Timestamp,
        sandboxes: Option<Sandboxes>,
    ) -> Result<Conductor<'a>> {
        let plan_files = saved_plans(ws, id)?;
        let lock = Lock::acquire(&run_dir(ws, id).join("lock"))?;
        clear_stale_ref_locks(ws, id)?;
        let mut c = Conductor::open(
            ws,
            id.to_string(),
            &plan_files,
            max_parallel,
            clock,
            lock,
            sandboxes,
        )?;
        c.abandon_in_flight()?;
        Ok(c)
    }

    /// What a new run and a resumed one share: the plans (checked again, as run), the roles'
    /// backends, the limits, the event sink and the state folded from the log so far.
    fn open(
        ws: &'a Workspace,
        run: String,
        plan_files: &[(String, String)],
        max_parallel: Option<usize>,
        clock: &'a dyn Fn() -> Timestamp,
        lock: Lock,
        sandboxes: Option<Sandboxes>,
    ) -> Result<Conductor<'a>> {
        let roles = role_names(ws);
        refuse_unchecked(ws, plan_files)?;
        let plans: Vec<Plan> = plan_files
            .iter()
            .map(|(f, t)| plan::parse(f, t))
            .collect::<Result<_, _>>()?;
        let tasks: BTreeMap<String, Task> = plans
            .iter()
            .flat_map(|p| p.tasks.iter())
            .map(|t| (t.key.clone(), t.clone()))
            .collect();
        let backends: BTreeMap<String, agent::Backend> = roles
            .iter()
            .filter(|r| tasks.values().any(|t| &t.role == *r))
            .map(|r| Ok((r.clone(), agent::backend(r, &ws.config.roles[r])?)))
            .collect::<Result<_>>()?;
        let max_parallel = parallelism(max_parallel, &plans, ws.config.swarm.max_parallel);
        let budgets = budget::Budgets::from(&ws.config, backends.keys())
            .map_err(|e| crate::workflow::Error::Input(format!("atelier.toml: {e}")))?;
        let events = run_dir(ws, &run).join("events.jsonl");
        let sink = Sink::open(&events)?;
        let keys: Vec<String> = tasks.keys().cloned().collect();
        let state = RunState::fold(&events::read(&events)?, &keys);
        let (tx, rx) = mpsc::unbounded_channel();
        let lessons = lessons_on_branch(ws)?;
        let worker_template = worker_template(ws)?;
        Ok(Conductor {
            ws,
            clock,
            branch: format!("atelier/runs/{run}"),
            run,
            plans,
            tasks,
            backends,
            max_parallel,
            limits: Arc::new(Limits::from(&ws.config, &ws.root, sandboxes)),
            lessons,
            worker_template,
            events,
            sink,
            state,
            flights: BTreeMap::new(),
            attempts: JoinSet::new(),
            tx,
            rx,
            progress: None,
            board: live::Board::default(),
            budgets,
            opened: process::Stopwatch::start(),
            run_spent: None,
            ended: BTreeMap::new(),
            scopes_reached: BTreeSet::new(),
            _lock: lock,
        })
    }

    /// Writes an event (fsynced) and applies it to the state, which so stays the fold of the
    /// log.
    fn emit(&mut self, event: RunEvent) -> Result<()> {
        let record = self.sink.emit(event, (self.clock)())?;
        self.state.apply(&record);
        if let Some(p) = self.progress {
            p(Update::Event(&record, &self.state));
        }
        Ok(())
    }

    /// The run branch's tip as the conductor left it.
    fn tip(&self) -> Result<Oid> {
        self.state
            .tip
            .as_deref()
            .and_then(|t| Oid::from_str(t).ok())
            .context("the run has no run-started event")
    }

    /// Attempts in flight at the crash: remove their worktrees and release their claims.
    fn abandon_in_flight(&mut self) -> Result<()> {
        let abandoned: Vec<String> = self.state.held.keys().cloned().collect();
        let attempt = |s: &Self, t: &str| s.state.tasks.get(t).map_or(0, |v| v.attempt);
        for t in &abandoned {
            let (name, path) = self.worktree(t, attempt(self, t));
            git::remove_worktree(&self.ws.repo, &name, &path)?;
        }
        self.emit(RunEvent::RunResumed {
            abandoned: abandoned.clone(),
        })?;
        for t in abandoned {
            let attempt = attempt(self, &t);
            self.emit(RunEvent::ClaimsReleased { task: t, attempt })?;
        }
        Ok(())
    }

    /// Runs to the end: the branch checked, interrupted integrations finished, then attempts
    /// as the schedule allows until none is in flight.
    async fn conduct(mut self, stop: impl std::future::Future<Output = ()>) -> Result<RunSummary> {
        self.check_branch()?;
        let (mode, abi) = match self.limits.sandboxes {
            // Where no user namespace can be made, metadata changes are refused outright
            // (`contain::Metadata`), and the run says so.
            Some(_) => match contain::metadata() {
                contain::Metadata::ReadOnlyMounts => ("landlock", contain::abi()),
                contain::Metadata::Refused => (
                    "landlock (file metadata changes refused: no user namespaces here)",
                    contain::abi(),
                ),
            },
            None => ("none", 0),
        };
        self.emit(RunEvent::Containment {
            mode: mode.into(),
            abi,
        })?;
        let settings = self.settings();
        self.emit(settings)?;
        self.integrate_interrupted()?;
        // Ctrl-C or SIGTERM ends every worker's process group, not just the conductor.
        let mut stop = Box::pin(stop);
        // Operators' controls are looked for a few times a second (`atelier control`).
        let mut tick = tokio::time::interval(std::time::Duration::from_millis(250));
        let live = LiveFile(run_dir(self.ws, &self.run));
        let mut published: Option<process::Stopwatch> = None;
        loop {
            if published
                .as_ref()
                .is_none_or(|t| t.elapsed() >= std::time::Duration::from_millis(live::EVERY_MS))
            {
                published = Some(process::Stopwatch::start());
                self.publish(&live.0);
            }
            if self.take_controls()? == Flow::Stop {
                return Err(self.stop_all("stopped by an operator (`atelier control stop`)"));
            }
            self.end_at_run_budget()?;
            self.end_at_scoped_budgets()?;
            self.block_dependents()?;
            if !self.state.paused {
                self.launch_ready()?;
            }
            // Paused, a run waits for `resume` only while something is left to start.
            let all_ended = self.state.tasks.values().all(|t| t.ended());
            if self.flights.is_empty() && (!self.state.paused || all_ended) {
                break;
            }
            tokio::select! {
                _ = tick.tick() => {}
                _ = &mut stop => return Err(self.stop_all("interrupted")),
                Some(ev) = self.rx.recv() => self.emit(ev)?,
                Some(joined) = self.attempts.join_next() => self.on_attempt_finished(joined)?,
            }
        }
        self.finish()
    }

    /// Writes `live.json` and tells `progress` (display only: a failure to write is not the
    /// run's failure, and readers treat a missing or stale file as "not reporting").
    fn publish(&self, dir: &Path) {
        let status = self.board.status(std::process::id());
        let _ = live::write(dir, &status);
        if let Some(p) = self.progress {
            p(Update::Tick(&self.state, &status));
        }
    }

    /// Stops every worker and removes what they left (`--resume` starts those attempts again
    /// from scratch): the error that ends the run, saying how to continue it.
    fn stop_all(&self, why: &str) -> crate::workflow::Error {
        process::kill_all();
        // Not kept where a person might run git in it.
        for flight in self.flights.values() {
            let _ = git::remove_worktree(&self.ws.repo, &flight.name, &flight.path);
        }
        let run_id = &self.run;
        crate::workflow::Error::Input(format!(
            "{why}: every worker was stopped; `atelier run --resume {run_id}` continues the run"
        ))
    }

    /// The settings this conductor runs with, as the `settings` event records them.
    fn settings(&self) -> RunEvent {
        let l = &self.limits;
        RunEvent::Settings {
            nudge_after_ms: millis(l.nudge),
            restart_after_ms: millis(l.restart),
            attempt_timeout_ms: millis(l.attempt),
            failure_budget: l.budget,
            max_parallel: self.max_parallel,
            context_budget: l.context,
            steps: l
                .steps
                .iter()
                .map(|(name, _, timeout)| events::StepSetting {
                    name: name.clone(),
                    timeout_ms: millis(*timeout),
                })
                .collect(),
            roles: self
                .backends
                .keys()
                .map(|r| (r.clone(), self.ws.config.roles[r].backend.clone()))
                .collect(),
        }
    }

    /// Blocks the dependents of failed and blocked tasks, pass after pass in task order, until a
    /// pass blocks nothing.
    fn block_dependents(&mut self) -> Result<()> {
        let mut changed = true;
        while changed {
            changed = false;
            let mut from = 0;
            while let Some((i, task, by)) = next_to_block(&self.tasks, &self.state, from) {
                self.emit(RunEvent::TaskBlocked { task, by })?;
                (changed, from) = (true, i + 1);
            }
        }
        Ok(())
    }

    /// Starts every attempt the schedule allows now: dependencies integrated, claims free, at
    /// most `max_parallel` in flight.
    fn launch_ready(&mut self) -> Result<()> {
        if self.state.held.len() >= self.max_parallel {
            return Ok(());
        }
        let completed = self.state.completed();
        let in_flight: BTreeSet<String> = self.state.held.keys().cloned().collect();
        let skip: BTreeSet<String> = self.state.ended_badly().into_keys().collect();
        let ready: Vec<Task> = schedule::next_runnable_except(
            &self.plans,
            &completed,
            &in_flight,
            &skip,
            self.max_parallel,
        )
        .into_iter()
        .cloned()
        .collect();
        for task in ready {
            let wall = self.opened.elapsed();
            if let Some(r) = self.budgets.reached(&self.state, &self.tasks, &task, wall) {
                self.emit(r.event())?;
                self.emit(RunEvent::TaskFailed {
                    task: task.key.clone(),
                    reason: format!("not started: {r}"),
                })?;
                continue;
            }
            self.launch_attempt(task)?;
        }
        Ok(())
    }

    /// Once the run's own ceiling is reached, the attempts running are ended (their workers
    /// and steps stopped; they fail, and no attempt starts after them).
    fn end_at_run_budget(&mut self) -> Result<()> {
        if self.run_spent.is_some() || self.flights.is_empty() {
            return Ok(());
        }
        let wall = self.opened.elapsed();
        let Some(r) = self.budgets.run_reached(&self.state, &self.tasks, wall) else {
            return Ok(());
        };
        self.emit(r.event())?;
        self.run_spent = Some(r);
        // Programs are killed; an `http` worker's request is abandoned.
        self.board.end_all();
        process::kill_all();
        Ok(())
    }

    /// An attempt in flight whose role's or task's ceiling is reached is ended: its worker is
    /// stopped, and it fails naming the budget.
    fn end_at_scoped_budgets(&mut self) -> Result<()> {
        let running: Vec<String> = self.flights.keys().cloned().collect();
        for key in running {
            if self.ended.contains_key(&key) {
                continue;
            }
            let Some(task) = self.tasks.get(&key) else {
                continue;
            };
            let Some(r) = self.budgets.scoped_reached(&self.state, &self.tasks, task) else {
                continue;
            };
            // Recorded once per scope and measure, whether or not a worker was left to end (an
            // attempt past its worker, running its checks, finishes).
            let first = self
                .scopes_reached
                .insert(format!("{} {}", r.scope, r.measure));
            if first {
                self.emit(r.event())?;
            }
            if self.board.end(&key) {
                self.ended.insert(key, r);
            }
        }
        Ok(())
    }

    /// Records `run-finished` and checks the run branch is where the conductor left it.
    fn finish(mut self) -> Result<RunSummary> {
        let failed = self.state.why(TaskState::Failed);
        let blocked = self.state.why(TaskState::Blocked);
        let skipped: Vec<String> = self.state.why(TaskState::Skipped).into_keys().collect();
        let succeeded: Vec<String> = self
            .state
            .completed()
            .into_iter()
            .filter(|k| !skipped.contains(k))
            .collect();
        self.emit(RunEvent::RunFinished {
            succeeded: succeeded.len(),
            failed: failed.len(),
            blocked: blocked.len(),
            skipped: skipped.len(),
        })?;
        // The run ends where the conductor put it; anything else moved the branch.
        let (branch, run_tip) = (self.branch.clone(), self.tip()?);
        let actual = git::branch_tip(&self.ws.repo, &branch)?;
        if actual != run_tip {
            return Err(crate::workflow::refuse(Code::RunBranchMoved, format!("{branch} is at {actual}, but the conductor left it at {run_tip}: something else moved it")));
        }
        Ok(RunSummary {
            run: self.run.clone(),
            branch,
            tip: run_tip.to_string(),
            events: self.events.display().to_string(),
            succeeded,
            failed,
            blocked,
            skipped,
            containment: self
                .state
                .containment
                .clone()
                .unwrap_or_else(|| "none".into()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Plans `p` (A, B after A, C after B, D) and `q` (E after p:A), parsed.
    fn plans(max_parallel: Option<usize>) -> Vec<Plan> {
        let task = |id: &str, deps: &str| {
            format!("[[task]]\nid = \"{id}\"\ntitle = \"{id}\"\nrole = \"implementer\"\ngoal = \"g\"\nfiles = [\"{id}.txt\"]\ndepends_on = [{deps}]\n\n")
        };
        let limit = max_parallel.map_or(String::new(), |n| format!("max_parallel = {n}\n"));
        let p = format!(
            "[plan]\nid = \"p\"\ntitle = \"P\"\n{limit}\n{}{}{}{}",
            task("A", ""),
            task("B", "\"A\""),
            task("C", "\"B\""),
            task("D", "")
        );
        let q = format!(
            "[plan]\nid = \"q\"\ntitle = \"Q\"\n\n{}",
            task("E", "\"p:A\"")
        );
        [("p.toml", p), ("q.toml", q)]
            .iter()
            .map(|(f, t)| plan::parse(f, t).expect("the plan parses"))
            .collect()
    }

    fn tasks(plans: &[Plan]) -> BTreeMap<String, Task> {
        plans
            .iter()
            .flat_map(|p| p.tasks.iter())
            .map(|t| (t.key.clone(), t.clone()))
            .collect()
    }

    #[test]
    fn parallelism_is_asked_else_the_plans_least_else_configured_and_never_zero() {
        assert_eq!(parallelism(Some(5), &plans(Some(2)), 4), 5);
        assert_eq!(parallelism(None, &plans(Some(2)), 4), 2);
        assert_eq!(parallelism(None, &plans(None), 4), 4);
        assert_eq!(parallelism(Some(0), &plans(None), 4), 1);
        assert_eq!(parallelism(None, &plans(None), 0), 1);
    }

    #[test]
    fn the_dependents_of_a_failed_task_are_blocked_in_task_order_then_theirs() {
        let plans = plans(None);
        let tasks = tasks(&plans);
        let keys: Vec<String> = tasks.keys().cloned().collect();
        let mut state = RunState::new(&keys);
        assert_eq!(next_to_block(&tasks, &state, 0), None, "nothing failed");
        state.tasks.get_mut("p:A").expect("p:A").state = TaskState::Failed;
        // p:B (position 1) and q:E (position 4) depend on p:A; p:C only on p:B.
        assert_eq!(
            next_to_block(&tasks, &state, 0),
            Some((1, "p:B".into(), "p:A".into()))
        );
        assert_eq!(
            next_to_block(&tasks, &state, 2),
            Some((4, "q:E".into(), "p:A".into()))
        );
        state.tasks.get_mut("p:B").expect("p:B").state = TaskState::Blocked;
        assert_eq!(
            next_to_block(&tasks, &state, 0),
            Some((2, "p:C".into(), "p:B".into())),
            "a blocked task blocks its own dependents on the next pass"
        );
    }

    #[test]
    fn a_task_in_flight_or_ended_is_never_blocked() {
        let plans = plans(None);
        let tasks = tasks(&plans);
        let keys: Vec<String> = tasks.keys().cloned().collect();
        let mut state = RunState::new(&keys);
        state.tasks.get_mut("p:A").expect("p:A").state = TaskState::Failed;
        state.held.insert("p:B".into(), vec!["B.txt".into()]);
        state.tasks.get_mut("q:E").expect("q:E").state = TaskState::Skipped;
        assert_eq!(next_to_block(&tasks, &state, 0), None);
    }
}
