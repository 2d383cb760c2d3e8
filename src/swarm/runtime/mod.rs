//! Running plans. The `Conductor` starts attempts when the schedule allows (dependencies met,
//! claims free), gives each a fresh worktree on its own branch and a fresh worker, runs the
//! gauntlet and the contract checks, integrates passing work into the run's branch one task at a
//! time, and remembers failures for the next attempt. Its state is the fold of the run's events
//! (`events::RunState`): every state change is written (fsynced) and applied before it is relied
//! on, and a crashed run resumes from the fold of its log, through the same code.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::workflow::error::{Context, Result};
use git2::Oid;
use serde::Serialize;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::events::{self, RunEvent, RunState, Sink, TaskState};
use super::memory;
use super::plan::{compile_glob, Plan, Task};
use super::schedule;
use crate::agent::contain::{self, Sandbox};
use crate::agent::{self, process};
use crate::config::Config;
use crate::fsutil::Lock;
use crate::git;
use crate::governance::time::{parse_duration, Timestamp};
use crate::governance::Code;
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

/// A control request: a regular file of at most 64 KiB, opened without following a link or
/// waiting on a FIFO; `None` for anything else.
fn read_control(path: &Path) -> Option<ControlRequest> {
    let bytes = crate::fsutil::read_small_file(path, 64 * 1024)?;
    serde_json::from_slice(&bytes).ok()
}

/// Where operators' controls wait for the conductor, in the run's directory.
pub const CONTROL_DIR: &str = "control";

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

/// One operator's control, as `atelier control` writes it.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct ControlRequest {
    pub action: String,
    #[serde(default)]
    pub task: Option<String>,
    pub by: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    Go,
    Stop,
}

/// The run's directory under `.atelier/runs/` ([`super::paths::run_dir`] of the workspace).
pub fn run_dir(ws: &Workspace, run: &str) -> PathBuf {
    super::paths::run_dir(&ws.atelier_dir(), run)
}

fn slug(key: &str) -> String {
    key.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

struct Limits {
    nudge: Duration,
    restart: Duration,
    attempt: Duration,
    steps: Vec<(String, String, Duration)>,
    budget: u32,
    context: usize,
    max_output: usize,
    target_dir: Option<PathBuf>,
    /// What each role's workers may touch besides their worktree, and what steps and checks
    /// may; `None` when the run is uncontained (`[swarm] containment = "none"`, merged).
    sandboxes: Option<Sandboxes>,
}

pub(crate) struct Sandboxes {
    roles: BTreeMap<String, Sandbox>,
    pub(crate) gauntlet: Sandbox,
}

impl Sandboxes {
    /// The grants of `role`'s programs.
    pub(crate) fn role(&self, role: &str) -> Option<Sandbox> {
        self.roles.get(role).cloned()
    }
}

impl Limits {
    /// The sandbox of a program in `job`'s worktree: `base` (its role's or the gauntlet's
    /// grants), the worktree, the repository's git objects and refs (read), the shared cache.
    fn sandbox(&self, base: &Sandbox, job: &AttemptJob) -> Sandbox {
        let mut s = base.clone().write(&job.worktree).read(&job.common);
        if let Some(dir) = &self.target_dir {
            s = s.write(dir);
        }
        s
    }

    /// A contained run's worker of a role it has no sandbox for gets no grants (fails closed).
    fn worker_sandbox(&self, job: &AttemptJob) -> Option<Sandbox> {
        let s = self.sandboxes.as_ref()?;
        let none = Sandbox::new(crate::config::Network::None);
        Some(self.sandbox(s.roles.get(&job.task.role).unwrap_or(&none), job))
    }

    fn step_sandbox(&self, job: &AttemptJob) -> Option<Sandbox> {
        let s = self.sandboxes.as_ref()?;
        Some(self.sandbox(&s.gauntlet, job))
    }
}

/// The sandboxes of a run (`None`: uncontained), each prepared once so a kernel without
/// Landlock, a rule it cannot enforce or a listed path that does not exist refuses the run
/// before any worker starts.
pub(crate) fn sandboxes(ws: &Workspace, roles: &BTreeSet<String>) -> Result<Option<Sandboxes>> {
    if ws.containment()? == crate::config::Containment::None {
        return Ok(None);
    }
    let protected = contain::protected(&ws.root, &ws.gate_key_path()?);
    // Workers read the repository's git directory: nothing secret may be kept there.
    let config = ws.repo.commondir().join("config");
    if let Some(what) = std::fs::read_to_string(&config)
        .ok()
        .and_then(|t| contain::git_config_secret(&t))
    {
        return Err(crate::workflow::refuse(
            Code::ContainmentSecret,
            format!(
                "{} holds {what}, which contained workers could read (they read the git directory): remove it (with actions/checkout, `persist-credentials: false`) and keep credentials in a helper outside the repository",
                config.display()
            ),
        ));
    }
    // The shared build cache is written by every worker and step: never in the main working
    // tree, whose own builds would run what a worker put there.
    if let Some(dir) = shared_target(&ws.config, &ws.root) {
        let real_root = ws.root.canonicalize().unwrap_or_else(|_| ws.root.clone());
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("creating the shared build cache {}", dir.display()))?;
        let real = dir.canonicalize().unwrap_or_else(|_| dir.clone());
        let guarded = protected
            .iter()
            .map(|p| p.canonicalize().unwrap_or_else(|_| p.clone()))
            .find(|p| p.starts_with(&real) || real.starts_with(p));
        if let Some(p) = guarded {
            return Err(contain::ContainError::Path {
                field: "swarm.shared_target_dir".into(),
                path: dir.display().to_string(),
                reason: format!(
                    "would let every worker reach {} (the gate key, the clone's private state or SSH keys): use a folder of its own, such as `~/.cache/atelier-target`",
                    p.display()
                ),
            }
            .into());
        }
        if real.starts_with(&real_root) || real_root.starts_with(&real) {
            return Err(contain::ContainError::Path {
                field: "swarm.shared_target_dir".into(),
                path: dir.display().to_string(),
                reason: "is inside the repository's working tree, where your own builds would run what a worker put there: use a folder outside it, such as `~/.cache/atelier-target`".into(),
            }
            .into());
        }
    }
    let mut out = Sandboxes {
        roles: BTreeMap::new(),
        gauntlet: contain::gauntlet(&ws.config.gauntlet, &ws.root, &protected)?,
    };
    out.gauntlet.prepare()?;
    for r in roles {
        let s = contain::role(r, &ws.config.roles[r], &ws.root, &protected)?;
        s.prepare()?;
        out.roles.insert(r.clone(), s);
    }
    Ok(Some(out))
}

/// `[swarm] shared_target_dir`: `~/…` under the home directory, a relative path under `root`.
pub(crate) fn shared_target(config: &Config, root: &Path) -> Option<PathBuf> {
    let d = config.swarm.shared_target_dir.as_ref()?;
    let text = d.to_string_lossy();
    Some(match text.strip_prefix("~/") {
        Some(rest) => std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_default()
            .join(rest),
        None => root.join(d),
    })
}

/// `text` with the values (8 bytes or more) of the variables in `names`, as atelier's own
/// environment holds them, replaced by `[redacted]`.
fn redact_passed(text: &str, names: &[String]) -> String {
    let mut out = text.to_string();
    for name in names {
        if let Ok(value) = std::env::var(name) {
            if value.len() >= 8 {
                out = out.replace(&value, "[redacted]");
            }
        }
    }
    out
}

/// A duration in whole milliseconds, as events record it.
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn secs(text: &str) -> Duration {
    Duration::from_secs(parse_duration(text).unwrap_or(0).max(0) as u64)
}

impl Limits {
    fn from(config: &Config, root: &Path, sandboxes: Option<Sandboxes>) -> Limits {
        Limits {
            nudge: secs(&config.conductor.nudge_after),
            restart: secs(&config.conductor.restart_after),
            attempt: secs(&config.conductor.attempt_timeout),
            steps: config
                .gauntlet
                .steps
                .iter()
                .map(|s| (s.name.clone(), s.run.clone(), secs(&s.timeout)))
                .collect(),
            budget: config.conductor.failure_budget,
            context: config.swarm.context_budget,
            max_output: config.swarm.max_output,
            target_dir: shared_target(config, root),
            sandboxes,
        }
    }
}

/// What one attempt needs, prepared on the main loop (which owns git).
struct AttemptJob {
    task: Task,
    /// The repository's common directory, and the commit the attempt started from.
    common: PathBuf,
    at: Oid,
    attempt: u32,
    run: String,
    worktree: PathBuf,
    backend: agent::Backend,
    prompt: String,
    /// Where the worker's last-output clock is shown while it runs (`live.json`).
    board: super::live::Board,
}

enum AttemptResult {
    /// The tree the worker produced (checked against the claims, unchanged by the gauntlet).
    Passed {
        tree: Oid,
    },
    Failed {
        reason: String,
        digest: Vec<String>,
    },
}

fn claimed(task: &Task, path: &str) -> bool {
    task.files.iter().any(|f| {
        let dir = f.trim_end_matches('/');
        path == dir
            || path.strip_prefix(dir).is_some_and(|r| r.starts_with('/'))
            || compile_glob(f).map(|m| m.is_match(path)).unwrap_or(false)
    })
}

/// Asks an http backend and writes its reply to the task's one claimed file; `None` on success.
async fn http_worker(
    job: &AttemptJob,
    base_url: &str,
    model: &str,
    key_env: Option<&str>,
    limits: &Limits,
    tx: &mpsc::UnboundedSender<RunEvent>,
) -> Option<AttemptResult> {
    let fail = |reason: String| {
        Some(AttemptResult::Failed {
            digest: vec![format!("[http] {reason}")],
            reason,
        })
    };
    let target = match job.task.files.as_slice() {
        [one] if !one.contains(['*', '?', '[', '{']) => one.clone(),
        other => {
            return fail(format!(
                "an http role writes its reply to the task's one claimed file, but this task claims {} pattern(s): {}",
                other.len(),
                other.join(", ")
            ))
        }
    };
    let key = match key_env {
        None => None,
        // The forge's and the webhook's secrets never leave for a model endpoint either.
        Some(name) if process::never_passed(name) => {
            return fail(format!(
                "api_key_env = \"{name}\" names a secret atelier never gives to agents; use the endpoint's own key variable"
            ))
        }
        Some(name) => match std::env::var(name) {
            Ok(v) => Some(v),
            Err(_) => {
                return fail(format!(
                    "the API key variable {name} is not set in atelier's environment"
                ))
            }
        },
    };
    let (url, model, prompt, timeout) = (
        base_url.to_string(),
        model.to_string(),
        job.prompt.clone(),
        limits.attempt,
    );
    let started = process::Stopwatch::start();
    let reply = tokio::task::spawn_blocking(move || {
        agent::http::chat(&url, &model, key.as_deref(), &prompt, timeout)
    })
    .await;
    let text = match reply {
        Ok(Ok(t)) => t,
        Ok(Err(e)) => return fail(e),
        Err(e) => return fail(e.to_string()),
    };
    let _ = tx.send(RunEvent::WorkerExited {
        task: job.task.key.clone(),
        attempt: job.attempt,
        code: Some(0),
        output_bytes: text.len() as u64,
        truncated: false,
        ms: Some(millis(started.elapsed())),
    });
    let path = job.worktree.join(&target);
    if let Some(dir) = path.parent() {
        if let Err(e) = std::fs::create_dir_all(dir) {
            return fail(format!("creating {}: {e}", dir.display()));
        }
    }
    if let Err(e) = std::fs::write(&path, text) {
        return fail(format!("writing {target}: {e}"));
    }
    None
}

/// Runs a command worker; `None` when it exited successfully.
async fn command_worker(
    job: &AttemptJob,
    argv: &[String],
    pass_env: &[String],
    limits: &Limits,
    tx: &mpsc::UnboundedSender<RunEvent>,
) -> Option<AttemptResult> {
    let extra = vec![
        ("ATELIER_TASK_ID".to_string(), job.task.key.clone()),
        ("ATELIER_ATTEMPT".to_string(), job.attempt.to_string()),
        ("ATELIER_RUN_ID".to_string(), job.run.clone()),
    ];
    let pass: Vec<String> = pass_env
        .iter()
        .filter(|v| !process::never_passed(v))
        .cloned()
        .collect();
    // On the board while the worker runs (not during the gauntlet, which is not watched for
    // silence).
    let on_board = job.board.enter(&job.task.key, job.attempt);
    let worker = process::Spawn {
        program: argv[0].clone(),
        args: argv[1..].to_vec(),
        cwd: job.worktree.clone(),
        env: process::scrubbed_env(&pass, &extra),
        stdin: job.prompt.clone().into_bytes(),
        timeout: limits.attempt,
        silence: Some(process::Silence {
            nudge_after: limits.nudge,
            restart_after: limits.restart,
            live: Some(on_board.last.clone()),
        }),
        max_output: limits.max_output,
        sandbox: limits.worker_sandbox(job),
    };
    let (task, attempt) = (job.task.key.clone(), job.attempt);
    let ntx = tx.clone();
    let outcome = match process::run(&worker, |silent| {
        let _ = ntx.send(RunEvent::Nudged {
            task: task.clone(),
            attempt,
            silent_secs: silent.as_secs(),
            silent_ms: Some(millis(silent)),
        });
    })
    .await
    {
        Ok(o) => o,
        Err(e) => {
            return Some(AttemptResult::Failed {
                reason: format!("the worker `{}` could not start: {e}", worker.program),
                digest: vec![format!(
                    "[worker] could not start `{}`: {e}",
                    worker.program
                )],
            })
        }
    };
    drop(on_board);
    let _ = tx.send(RunEvent::WorkerExited {
        task: task.clone(),
        attempt,
        code: outcome.code,
        output_bytes: outcome.output_bytes,
        truncated: outcome.truncated,
        ms: Some(millis(outcome.elapsed)),
    });
    for q in &outcome.quiet {
        let _ = tx.send(RunEvent::Quiet {
            task: task.clone(),
            attempt,
            ms: millis(q.lasted),
            ended: q.ended,
            nudged: q.nudged,
        });
    }
    if outcome.silenced {
        // The silence measured, not the threshold: the last quiet period, which the restart ended.
        let measured = outcome.quiet.last().map_or(limits.restart, |q| q.lasted);
        let silent = measured.as_secs();
        let _ = tx.send(RunEvent::Restarted {
            task: task.clone(),
            attempt,
            silent_secs: silent,
            silent_ms: Some(millis(measured)),
        });
        return Some(AttemptResult::Failed {
            reason: format!("the worker was silent for {silent}s and was restarted"),
            digest: vec![format!("[worker] silent for {silent}s: the attempt was killed; produce output while working")]
        });
    }
    if outcome.timed_out {
        return Some(AttemptResult::Failed {
            reason: format!(
                "the worker ran past the attempt timeout ({}s)",
                limits.attempt.as_secs()
            ),
            digest: vec![format!(
                "[worker] ran past {}s and was killed",
                limits.attempt.as_secs()
            )],
        });
    }
    if outcome.code != Some(0) {
        return Some(AttemptResult::Failed {
            reason: format!(
                "the worker exited with {}",
                outcome.code.map_or("a signal".into(), |c| c.to_string())
            ),
            // The values of the variables the role passes (API keys) never reach the log, the
            // next prompt or a lesson, whatever the worker printed.
            digest: memory::digest("worker", &redact_passed(&outcome.output, &pass)),
        });
    }
    None
}

async fn run_attempt(
    job: AttemptJob,
    limits: &Limits,
    tx: mpsc::UnboundedSender<RunEvent>,
) -> AttemptResult {
    let done = match &job.backend {
        agent::Backend::Command { argv, pass_env } => {
            command_worker(&job, argv, pass_env, limits, &tx).await
        }
        agent::Backend::Http {
            base_url,
            model,
            api_key_env,
        } => http_worker(&job, base_url, model, api_key_env.as_deref(), limits, &tx).await,
    };
    if let Some(failed) = done {
        return failed;
    }
    let extra = vec![
        ("ATELIER_TASK_ID".to_string(), job.task.key.clone()),
        ("ATELIER_ATTEMPT".to_string(), job.attempt.to_string()),
        ("ATELIER_RUN_ID".to_string(), job.run.clone()),
    ];
    let (task, attempt) = (job.task.key.clone(), job.attempt);
    // Writes outside the task's claims fail the attempt before anything is checked. The tree
    // is taken now, from the files, relative to the commit the attempt started from.
    let snap = |job: &AttemptJob| {
        let (common, root, at) = (job.common.clone(), job.worktree.clone(), job.at);
        async move {
            match tokio::task::spawn_blocking(move || git::snapshot(&common, &root, at)).await {
                Ok(Ok(s)) => Ok(s),
                Ok(Err(e)) => Err(e.to_string()),
                Err(e) => Err(e.to_string()),
            }
        }
    };
    let (tree, changed) = match snap(&job).await {
        Ok(s) => s,
        Err(e) => {
            return AttemptResult::Failed {
                reason: format!("reading what the worker left: {e}"),
                digest: vec![format!("[worktree] {e}")],
            }
        }
    };
    let outside: Vec<&String> = changed.iter().filter(|p| !claimed(&job.task, p)).collect();
    if !outside.is_empty() {
        let list: Vec<&str> = outside.iter().map(|s| s.as_str()).collect();
        return AttemptResult::Failed {
            reason: format!("wrote outside its claims: {}", list.join(", ")),
            digest: vec![format!(
                "[claims] wrote {} outside the task's files; change only {}",
                list.join(", "),
                job.task.files.join(", ")
            )],
        };
    }
    let mut env_extra = extra.clone();
    if let Some(dir) = &limits.target_dir {
        env_extra.push(("CARGO_TARGET_DIR".into(), dir.display().to_string()));
    }
    let checks = job.task.contract.checks.iter().enumerate().map(|(i, c)| {
        (
            format!("check {}", i + 1),
            c.clone(),
            Duration::from_secs(600),
        )
    });
    for (name, run, timeout) in limits.steps.iter().cloned().chain(checks) {
        let step = process::Spawn {
            program: "sh".into(),
            args: vec!["-c".into(), run.clone()],
            cwd: job.worktree.clone(),
            env: process::scrubbed_env(&[], &env_extra),
            stdin: Vec::new(),
            timeout,
            silence: None,
            max_output: limits.max_output,
            sandbox: limits.step_sandbox(&job),
        };
        let o = match process::run(&step, |_| {}).await {
            Ok(o) => o,
            Err(e) => {
                return AttemptResult::Failed {
                    reason: format!("step {name} could not start: {e}"),
                    digest: Vec::new(),
                }
            }
        };
        let passed = o.success();
        let _ = tx.send(RunEvent::StepFinished {
            task: task.clone(),
            attempt,
            step: name.clone(),
            passed,
            secs: o.elapsed.as_secs(),
            ms: Some(millis(o.elapsed)),
        });
        if !passed {
            let why = if o.timed_out {
                format!("timed out after {}s", timeout.as_secs())
            } else {
                format!(
                    "exited with {}",
                    o.code.map_or("a signal".into(), |c| c.to_string())
                )
            };
            let mut digest = memory::digest(&name, &o.output);
            digest.insert(0, format!("[{name}] `{run}` {why}"));
            digest.truncate(memory::MAX_BLOCKS);
            return AttemptResult::Failed {
                reason: format!("step {name} (`{run}`) {why}"),
                digest,
            };
        }
    }
    // What passed must be what is committed: a process the worker left behind, or a check that
    // writes tracked files, would otherwise slip unchecked content in.
    match snap(&job).await {
        Ok((after, _)) if after == tree => AttemptResult::Passed { tree },
        Ok(_) => AttemptResult::Failed {
            reason: "the worktree changed after the worker exited (a process it left running, or a check that writes files)".into(),
            digest: vec!["[worktree] files changed after the worker exited; do not leave processes running".into()],
        },
        Err(e) => AttemptResult::Failed { reason: format!("reading the worktree: {e}"), digest: Vec::new() },
    }
}

/// Files of the task's claims and reads that exist in the worktree, for the prompt's context.
fn context_files(root: &Path, task: &Task) -> Vec<(String, String)> {
    let patterns: Vec<&String> = task.files.iter().chain(task.reads.iter()).collect();
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut entries: Vec<_> = entries.flatten().collect();
        entries.sort_by_key(|e| e.path());
        for e in entries {
            let p = e.path();
            let rel = p
                .strip_prefix(root)
                .map(|r| r.to_string_lossy().into_owned())
                .unwrap_or_default();
            if rel == ".git" || rel.starts_with(".atelier") {
                continue;
            }
            // Never follow links: a worker could point one at a key or at `..`.
            let Ok(meta) = std::fs::symlink_metadata(&p) else {
                continue;
            };
            if meta.file_type().is_symlink() || (meta.is_file() && meta.len() > 1024 * 1024) {
                continue;
            }
            if meta.is_dir() {
                stack.push(p);
            } else if patterns.iter().any(|g| {
                compile_glob(g).map(|m| m.is_match(&rel)).unwrap_or(false) || rel == g.as_str()
            }) {
                if let Ok(text) = std::fs::read_to_string(&p) {
                    out.push((rel, text));
                }
            }
        }
    }
    out.sort();
    out
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
fn refuse_unchecked(plan_files: &[(String, String)], roles: &BTreeSet<String>) -> Result<()> {
    let report = super::check(plan_files, roles)?;
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
    // The contract validator's adversarial read, when a `validator` role is configured: a
    // new run whose contracts it does not approve never starts.
    let validated = match &opts.resume {
        Some(_) => None,
        None => {
            refuse_unchecked(&opts.plan_files, &role_names(ws))?;
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
    board: super::live::Board,
    /// One conductor per run: a second `run --resume` of the same run waits for the first.
    /// Declared last, so it is released after the attempts are dropped.
    _lock: Lock,
}

/// What `run` shows while the swarm works.
pub type Progress<'a> = &'a dyn Fn(Update<'_>);

/// What [`Progress`] is told.
pub enum Update<'r> {
    /// An event as written, with the state after it.
    Event(&'r super::events::Record, &'r RunState),
    /// About once a second: the state, and the running workers' silences.
    Tick(&'r RunState, &'r super::live::Status),
}

/// The run's `live.json` while its conductor runs: removed when the conductor stops, however
/// it stops.
struct LiveFile(PathBuf);

impl Drop for LiveFile {
    fn drop(&mut self) {
        super::live::remove(&self.0);
    }
}

/// The message of the commit that integrates `task` into the run's branch.
fn integration_message(task: &str) -> String {
    format!("Integrate {task}\n\nAtelier-Task: {task}\n")
}

fn role_names(ws: &Workspace) -> BTreeSet<String> {
    ws.config.roles.keys().cloned().collect()
}

/// Claims the next run id atomically (creating its directory either succeeds or not) and keeps
/// the plans there, for `--resume`.
fn new_run(ws: &Workspace, plan_files: &[(String, String)]) -> Result<String> {
    let runs = super::paths::runs_dir(&ws.atelier_dir());
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
        .map(|(f, t)| {
            super::plan::parse(f, t).map_err(|e| crate::workflow::Error::Input(e.to_string()))
        })
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
        refuse_unchecked(&opts.plan_files, &role_names(ws))?;
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
        refuse_unchecked(plan_files, &roles)?;
        let plans: Vec<Plan> = plan_files
            .iter()
            .map(|(f, t)| super::plan::parse(f, t))
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
        let max_parallel = max_parallel
            .or(plans.iter().filter_map(|p| p.max_parallel).min())
            .unwrap_or(ws.config.swarm.max_parallel)
            .max(1);
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
            board: super::live::Board::default(),
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

    /// The worktree of a task's attempt: its name and the path the conductor computes for it.
    fn worktree(&self, task: &str, attempt: u32) -> (String, PathBuf) {
        let name = format!("{}-{}-{attempt}", self.run, slug(task));
        let path = run_dir(self.ws, &self.run).join("wt").join(&name);
        (name, path)
    }

    fn attempt_branch(&self, task: &str, attempt: u32) -> String {
        format!("atelier/attempts/{}/{}/{attempt}", self.run, slug(task))
    }

    fn ended_badly(&self, task: &str) -> bool {
        self.state
            .tasks
            .get(task)
            .is_some_and(|v| matches!(v.state, TaskState::Failed | TaskState::Blocked))
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
            Some(_) => ("landlock", contain::abi()),
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
            if published.as_ref().is_none_or(|t| {
                t.elapsed() >= std::time::Duration::from_millis(super::live::EVERY_MS)
            }) {
                published = Some(process::Stopwatch::start());
                self.publish(&live.0);
            }
            if self.take_controls()? == Flow::Stop {
                return Err(self.stop_all("stopped by an operator (`atelier control stop`)"));
            }
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
        let _ = super::live::write(dir, &status);
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

    /// Applies the operators' controls waiting in the run's `control/` directory, oldest
    /// first, each recorded as a `control` event (applied, or why not) and then removed.
    fn take_controls(&mut self) -> Result<Flow> {
        let dir = run_dir(self.ws, &self.run).join(CONTROL_DIR);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return Ok(Flow::Go);
        };
        let mut files: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        files.sort();
        let mut flow = Flow::Go;
        for f in files {
            let request = read_control(&f);
            // Taken once: a request that cannot be removed is not applied (it would be again at
            // every look).
            if std::fs::remove_file(&f).is_err() {
                continue;
            }
            let Some(mut c) = request else {
                continue;
            };
            // Shown on operators' terminals: printable text only, and not much of it.
            c.by =
                c.by.chars()
                    .filter(|ch| !ch.is_control())
                    .take(120)
                    .collect();
            let refused = self.refuse_control(&c);
            let applied = refused.is_none();
            if applied && c.action == "stop" {
                flow = Flow::Stop;
            }
            self.emit(RunEvent::Control {
                action: c.action.clone(),
                task: c.task.clone(),
                by: c.by.clone(),
                applied,
                detail: refused.unwrap_or_else(|| "applied".into()),
            })?;
        }
        Ok(flow)
    }

    /// Why a control cannot apply now, if it cannot.
    fn refuse_control(&self, c: &ControlRequest) -> Option<String> {
        let task = |t: &Option<String>| -> Result<String, String> {
            let t = t.clone().ok_or("it names no task")?;
            if self.state.tasks.contains_key(&t) {
                Ok(t)
            } else {
                Err(format!("the run has no task `{t}`"))
            }
        };
        if self.state.finished {
            return Some("the run had finished".into());
        }
        match c.action.as_str() {
            "pause" if self.state.paused => Some("already paused".into()),
            "resume" if !self.state.paused => Some("not paused".into()),
            "pause" | "resume" | "stop" => None,
            "retry" => match task(&c.task) {
                Err(e) => Some(e),
                Ok(t) if self.state.tasks[&t].state != TaskState::Failed => Some(format!(
                    "`{t}` has not failed (it is {:?})",
                    self.state.tasks[&t].state
                )),
                Ok(_) => None,
            },
            "skip" => match task(&c.task) {
                Err(e) => Some(e),
                Ok(t)
                    if matches!(
                        self.state.tasks[&t].state,
                        TaskState::Running | TaskState::Succeeded | TaskState::Skipped
                    ) =>
                {
                    Some(format!(
                        "`{t}` is {:?}: only a pending, failed or blocked task is skipped",
                        self.state.tasks[&t].state
                    ))
                }
                Ok(_) => None,
            },
            other => Some(format!("unknown control `{other}`")),
        }
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

    /// The run branch moves only through the conductor: it must be at the tip the events
    /// recorded (the last integration, or the base). A crash between moving the run branch and
    /// recording it leaves the branch one integration ahead: accept exactly that, nothing else.
    fn check_branch(&mut self) -> Result<()> {
        let (repo, branch, run_tip) = (&self.ws.repo, &self.branch, self.tip()?);
        let actual = git::branch_tip(repo, branch)?;
        if actual != run_tip {
            let recorded = self.unrecorded_integration(run_tip, actual);
            if !recorded {
                return Err(crate::workflow::refuse(Code::RunBranchMoved, format!("{branch} is at {actual}, but the run's events end at {run_tip}: something else moved it; inspect the branch"
                )));
            }
            // Taken without an event: the integration it belongs to is recorded next.
            self.state.tip = Some(actual.to_string());
        }
        Ok(())
    }

    /// Whether `actual` is the merge `integrate` would have made from `run_tip` of a passed
    /// attempt awaiting integration, whose commit the conductor could have made (`implausible`):
    /// the swarm's identity and message, parents `[run_tip, commit]`, and their merge tree.
    fn unrecorded_integration(&self, run_tip: Oid, actual: Oid) -> bool {
        let repo = &self.ws.repo;
        let Ok(c) = repo.find_commit(actual) else {
            return false;
        };
        if c.parent_count() != 2
            || c.parent_id(0).ok() != Some(run_tip)
            || c.committer().name() != Some("atelier swarm")
        {
            return false;
        }
        let Ok(merged) = c.parent_id(1) else {
            return false;
        };
        self.state
            .awaiting_integration()
            .into_iter()
            .any(|(task, commit)| {
                commit.as_deref().and_then(|p| Oid::from_str(p).ok()) == Some(merged)
                    && implausible(self.ws, &self.tasks[&task], &merged.to_string(), run_tip)
                        .is_none()
                    && c.message() == Some(integration_message(&task).as_str())
                    && matches!(git::merge_tree(repo, run_tip, merged), Ok(Ok(t)) if t == c.tree_id())
            })
    }

    /// A passed attempt whose integration a crash interrupted is integrated now (once).
    fn integrate_interrupted(&mut self) -> Result<()> {
        for (task, commit) in self.state.awaiting_integration() {
            // The event log is only as trustworthy as its directory: check that the recorded
            // commit is one the conductor could have made before integrating it.
            let run_tip = self.tip()?;
            if let Some(why) = commit
                .as_deref()
                .and_then(|c| implausible(self.ws, &self.tasks[&task], c, run_tip))
            {
                let attempt = self.state.tasks[&task].attempt;
                self.emit(RunEvent::AttemptFailed {
                    task,
                    attempt,
                    reason: format!("the recorded commit {why}"),
                    digest: Vec::new(),
                    ms: None,
                })?;
                continue;
            }
            self.integrate(&task, commit.as_deref())?;
        }
        Ok(())
    }

    /// Blocks the dependents of failed and blocked tasks, pass after pass in task order, until a
    /// pass blocks nothing.
    fn block_dependents(&mut self) -> Result<()> {
        let mut changed = true;
        while changed {
            changed = false;
            let mut from = 0;
            while let Some((i, task, by)) = self.next_to_block(from) {
                self.emit(RunEvent::TaskBlocked { task, by })?;
                (changed, from) = (true, i + 1);
            }
        }
        Ok(())
    }

    /// The first task from position `from` on that has not ended, is not in flight, and depends
    /// on a task that failed or was blocked: its position, key and that dependency.
    fn next_to_block(&self, from: usize) -> Option<(usize, String, String)> {
        self.tasks
            .iter()
            .enumerate()
            .skip(from)
            .find_map(|(i, (k, t))| {
                if self.state.tasks[k].ended() || self.state.held.contains_key(k) {
                    return None;
                }
                let by = t.depends_on.iter().find(|d| self.ended_badly(d))?;
                Some((i, k.clone(), by.clone()))
            })
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
            self.launch_attempt(task)?;
        }
        Ok(())
    }

    /// Starts a task's next attempt: a fresh worktree at the run's tip on the attempt's own
    /// branch, the prompt, the claims (taken by `attempt-started`), and the worker.
    fn launch_attempt(&mut self, task: Task) -> Result<()> {
        let attempt = self.state.tasks[&task.key].attempt + 1;
        let (name, path) = self.worktree(&task.key, attempt);
        let at = self.tip()?;
        let repo = &self.ws.repo;
        git::remove_worktree(repo, &name, &path)?;
        git::add_worktree(
            repo,
            &name,
            &path,
            &self.attempt_branch(&task.key, attempt),
            at,
        )?;
        let prompt = match self.prompt(&task, &path) {
            Ok(p) => p,
            // No worktree left behind, every worker stopped, and how to continue said.
            Err(e) => {
                let _ = git::remove_worktree(repo, &name, &path);
                return Err(self.stop_all(&e.to_string()));
            }
        };
        self.emit(RunEvent::AttemptStarted {
            task: task.key.clone(),
            attempt,
            claims: task.files.clone(),
            worktree: path.display().to_string(),
            prompt_bytes: prompt.len(),
            role: Some(task.role.clone()),
            backend: Some(self.ws.config.roles[&task.role].backend.clone()),
        })?;
        let job = AttemptJob {
            common: repo.commondir().to_path_buf(),
            at,
            backend: self.backends[&task.role].clone(),
            attempt,
            run: self.run.clone(),
            worktree: path.clone(),
            prompt,
            task,
            board: self.board.clone(),
        };
        self.flights
            .insert(job.task.key.clone(), Flight { name, path, at });
        let (tx, limits) = (self.tx.clone(), self.limits.clone());
        self.attempts.spawn(async move {
            let key = job.task.key.clone();
            let attempt = job.attempt;
            let started = process::Stopwatch::start();
            let result = run_attempt(job, &limits, tx).await;
            (key, attempt, result, millis(started.elapsed()))
        });
        Ok(())
    }

    /// The worker's prompt: the task, what is done, the task's do-not-retry list, the latest
    /// golden path of its role, and the files it claims and reads, cut to the context budget.
    fn prompt(&self, task: &Task, worktree: &Path) -> Result<String> {
        let done_lines: Vec<String> = self
            .state
            .completed()
            .iter()
            .filter_map(|k| self.tasks.get(k))
            .map(|t| format!("{}: {}", t.key, t.title))
            .collect();
        let input = agent::prompt::PromptInput {
            task: agent::prompt::PromptTask {
                id: task.key.clone(),
                title: task.title.clone(),
                goal: task.goal.clone(),
                files: task.files.clone(),
                criteria: task.contract.criteria.clone(),
                checks: task.contract.checks.clone(),
            },
            completed: done_lines,
            do_not_retry: self.state.tasks[&task.key].do_not_retry.clone(),
            examples: self
                .state
                .golden
                .get(&task.role)
                .and_then(|g| g.last())
                .cloned()
                .into_iter()
                .collect(),
            context: agent::prompt::slice(context_files(worktree, task), self.limits.context),
            lessons: self.lessons.clone(),
        };
        agent::prompt::render(&self.worker_template, &input).map_err(|e| {
            crate::workflow::Error::Input(format!(
                "{WORKER_TEMPLATE} on {}: {e}; fix it with a proposal",
                self.ws.branch()
            ))
        })
    }

    /// An attempt ended: the worker's last events are written first, then what it produced is
    /// kept and integrated, or its failure remembered.
    fn on_attempt_finished(
        &mut self,
        joined: std::result::Result<(String, u32, AttemptResult, u64), tokio::task::JoinError>,
    ) -> Result<()> {
        while let Ok(ev) = self.rx.try_recv() {
            self.emit(ev)?;
        }
        let (task, attempt, result, ms) = joined.context("an attempt task panicked")?;
        let flight = self
            .flights
            .remove(&task)
            .expect("every attempt in flight has a worktree");
        match result {
            AttemptResult::Passed { tree } => self.on_passed(&task, attempt, flight, tree, ms),
            AttemptResult::Failed { reason, digest } => {
                self.keep_failed(&task, attempt, &flight, &reason);
                self.on_failed(&task, attempt, reason, digest, ms)
            }
        }
    }

    /// A passed attempt: its commit, a golden path when it passed at the first attempt, its
    /// worktree removed, its claims released, then its integration.
    fn on_passed(
        &mut self,
        task: &str,
        attempt: u32,
        flight: Flight,
        tree: Oid,
        ms: u64,
    ) -> Result<()> {
        let commit = self.commit_attempt(task, attempt, flight.at, tree)?;
        self.emit(RunEvent::AttemptPassed {
            task: task.to_string(),
            attempt,
            commit: commit.map(|c| c.to_string()).unwrap_or_default(),
            ms: Some(ms),
        })?;
        if let (1, Some(c)) = (attempt, commit) {
            let t = &self.tasks[task];
            let (role, example) = (t.role.clone(), golden_example(self.ws, t, c)?);
            self.emit(RunEvent::GoldenPath {
                task: task.to_string(),
                role,
                example,
            })?;
        }
        git::remove_worktree(&self.ws.repo, &flight.name, &flight.path)?;
        self.emit(RunEvent::ClaimsReleased {
            task: task.to_string(),
            attempt,
        })?;
        self.integrate(task, commit.map(|c| c.to_string()).as_deref())
    }

    /// Commits the tree an attempt passed with, on the attempt's branch, with the commit it
    /// started from as parent; `None` when the attempt changed nothing.
    fn commit_attempt(&self, task: &str, attempt: u32, at: Oid, tree: Oid) -> Result<Option<Oid>> {
        let (repo, run_id, t) = (&self.ws.repo, &self.run, &self.tasks[task]);
        let message =
            format!(
            "{}: {}\n\nAtelier-Run: {run_id}\nAtelier-Task: {task}\nAtelier-Attempt: {attempt}\n{}",
            task,
            t.title,
            t.contract.checks.iter().map(|c| format!("Atelier-Check: {c}\n")).collect::<String>()
        );
        let base = repo.find_commit(at)?;
        if base.tree_id() == tree {
            return Ok(None);
        }
        let sig = git2::Signature::new(
            "atelier swarm",
            "swarm@atelier.invalid",
            &git2::Time::new((self.clock)(), 0),
        )?;
        let c = repo.commit(None, &sig, &sig, &message, &repo.find_tree(tree)?, &[&base])?;
        repo.reference(
            &format!("refs/heads/{}", self.attempt_branch(task, attempt)),
            c,
            true,
            "atelier: attempt passed",
        )?;
        Ok(Some(c))
    }

    /// A failed attempt: its digest joins the task's do-not-retry list (through the fold), its
    /// claims are released, and the task fails once the failure budget is spent. What the
    /// attempt left is a commit on its attempt branch (`keep_failed`) until `atelier clean`.
    fn on_failed(
        &mut self,
        task: &str,
        attempt: u32,
        reason: String,
        digest: Vec<String>,
        ms: u64,
    ) -> Result<()> {
        self.emit(RunEvent::AttemptFailed {
            task: task.to_string(),
            attempt,
            reason: reason.clone(),
            digest,
            ms: Some(ms),
        })?;
        self.emit(RunEvent::ClaimsReleased {
            task: task.to_string(),
            attempt,
        })?;
        let from = self.state.tasks.get(task).map_or(0, |v| v.budget_from);
        if attempt.saturating_sub(from) >= self.limits.budget {
            let why = format!("failed {attempt} attempt(s); last: {reason}");
            self.emit(RunEvent::TaskFailed {
                task: task.to_string(),
                reason: why,
            })?;
        }
        Ok(())
    }

    /// A failed attempt's files are kept as a commit on its attempt branch, never as a directory:
    /// a worker can make any directory of its worktree a git repository of its own (a `.git`,
    /// an implicit bare repository) whose configuration runs a command, and a person looking
    /// with `git status` there would run it, uncontained. `git show <attempt branch>` is safe.
    /// Best effort: files git cannot take (a nested repository) are not kept.
    fn keep_failed(&self, task: &str, attempt: u32, flight: &Flight, reason: &str) {
        let repo = &self.ws.repo;
        if let Ok((tree, _)) = git::snapshot(repo.commondir(), &flight.path, flight.at) {
            let message = format!(
                "Failed attempt {attempt} of {task}: {}\n\nAtelier-Run: {}\nAtelier-Task: {task}\nAtelier-Attempt: {attempt}\n",
                reason.lines().next().unwrap_or_default(),
                self.run
            );
            let kept = (|| -> std::result::Result<(), git2::Error> {
                let base = repo.find_commit(flight.at)?;
                let sig = git2::Signature::new(
                    "atelier swarm",
                    "swarm@atelier.invalid",
                    &git2::Time::new((self.clock)(), 0),
                )?;
                let c =
                    repo.commit(None, &sig, &sig, &message, &repo.find_tree(tree)?, &[&base])?;
                repo.reference(
                    &format!("refs/heads/{}", self.attempt_branch(task, attempt)),
                    c,
                    true,
                    "atelier: attempt failed",
                )?;
                Ok(())
            })();
            let _ = kept;
        }
        let _ = git::remove_worktree(repo, &flight.name, &flight.path);
    }

    /// Merges a passed attempt into the run's branch (once), or fails the task on a conflict.
    fn integrate(&mut self, task: &str, commit: Option<&str>) -> Result<()> {
        let (ws, branch, expected) = (self.ws, self.branch.clone(), self.tip()?);
        let repo = &ws.repo;
        let tip = git::branch_tip(repo, &branch)?;
        if tip != expected {
            return Err(crate::workflow::refuse(Code::RunBranchMoved, format!("{branch} is at {tip}, but the conductor last moved it to {expected}: something else (a worker?) moved it; the run stops here — inspect the branch before resuming"
            )));
        }
        let commit = commit.map(Oid::from_str).transpose()?;
        // Nothing to merge (the task changed nothing), or already integrated before a crash:
        // record it, never merge twice.
        let already = match commit {
            None => true,
            Some(c) => tip == c || repo.graph_descendant_of(tip, c)?,
        };
        let Some(commit) = commit.filter(|_| !already) else {
            return self.emit(RunEvent::Integrated {
                task: task.to_string(),
                commit: tip.to_string(),
            });
        };
        match git::merge_tree(repo, tip, commit)? {
            Err(conflict) => {
                let why = format!("integration into {branch} conflicts: {conflict}");
                self.emit(RunEvent::TaskFailed {
                    task: task.to_string(),
                    reason: why,
                })
            }
            Ok(tree) => {
                let sig = git2::Signature::new(
                    "atelier swarm",
                    "swarm@atelier.invalid",
                    &git2::Time::new((self.clock)(), 0),
                )?;
                let merged = repo.commit(
                    None,
                    &sig,
                    &sig,
                    &integration_message(task),
                    &repo.find_tree(tree)?,
                    &[&repo.find_commit(tip)?, &repo.find_commit(commit)?],
                )?;
                if !git::compare_and_swap(
                    repo,
                    &format!("refs/heads/{branch}"),
                    tip,
                    merged,
                    "atelier: integrate",
                )? {
                    return Err(crate::workflow::refuse(
                        Code::RunBranchMoved,
                        format!("{branch} moved during integration; inspect it before resuming"),
                    ));
                }
                self.emit(RunEvent::Integrated {
                    task: task.to_string(),
                    commit: merged.to_string(),
                })
            }
        }
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

/// Why a recorded passed commit is not one the conductor made for `task` on top of the run, if
/// it is not: made by the swarm's identity, on a commit of the run, changing only claimed paths.
fn implausible(ws: &Workspace, task: &Task, commit: &str, run_tip: Oid) -> Option<String> {
    let repo = &ws.repo;
    let Some(c) = Oid::from_str(commit)
        .ok()
        .and_then(|o| repo.find_commit(o).ok())
    else {
        return Some(format!("{commit} does not exist"));
    };
    if c.committer().name() != Some("atelier swarm") || c.parent_count() != 1 {
        return Some(format!("{commit} was not made by the conductor"));
    }
    let Ok(parent) = c.parent(0) else {
        return Some(format!("{commit} has no parent"));
    };
    if parent.id() != run_tip
        && !repo
            .graph_descendant_of(run_tip, parent.id())
            .unwrap_or(false)
    {
        return Some(format!("{commit} does not start from the run's branch"));
    }
    let changed = match (parent.tree(), c.tree()) {
        (Ok(a), Ok(b)) => git::changed_paths(repo, &a, &b).unwrap_or_default(),
        _ => return Some(format!("{commit} cannot be read")),
    };
    let outside: Vec<String> = changed.into_iter().filter(|p| !claimed(task, p)).collect();
    (!outside.is_empty()).then(|| {
        format!(
            "{commit} changes paths outside the task's claims: {}",
            outside.join(", ")
        )
    })
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

/// The most bytes a worked example adds to a prompt.
const EXAMPLE_BUDGET: usize = 2048;

/// A golden path as a prompt shows it: the task, its checks and its diff, trimmed.
fn golden_example(ws: &Workspace, task: &Task, commit: Oid) -> Result<String> {
    let repo = &ws.repo;
    let c = repo.find_commit(commit)?;
    let patch = String::from_utf8_lossy(&git::diff_text(repo, &c.parent(0)?.tree()?, &c.tree()?)?)
        .into_owned();
    let mut text = format!(
        "Task {}: {}\nGoal: {}\nChecks that passed: {}\nDiff:\n{patch}",
        task.key,
        task.title,
        task.goal,
        task.contract.checks.join("; ")
    );
    if text.len() > EXAMPLE_BUDGET {
        let mut cut = EXAMPLE_BUDGET;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str("\n… (trimmed)");
    }
    Ok(text)
}

/// What `clean` removed.
#[derive(Debug, Serialize)]
pub struct Cleaned {
    pub worktrees: Vec<String>,
    pub branches: Vec<String>,
    pub skipped_runs: Vec<String>,
}

/// Removes the worktrees (and their branches) a proposer left when it was killed outright:
/// `.atelier/proposers/<kind>-<pid>-<time>` whose process is gone. The kept plans stay.
fn clean_proposers(ws: &Workspace, out: &mut Cleaned) -> Result<()> {
    let dir = ws.atelier_dir().join("proposers");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(());
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !e.path().is_dir() {
            continue;
        }
        let mut parts = name.rsplit('-');
        let (Some(_time), Some(pid)) = (parts.next(), parts.next()) else {
            continue;
        };
        let Ok(pid) = pid.parse::<u32>() else {
            continue;
        };
        if Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        git::remove_worktree(&ws.repo, &name, &e.path())?;
        out.worktrees.push(name.clone());
        let branch = format!("atelier/proposers/{name}");
        if let Ok(mut b) = ws.repo.find_branch(&branch, git2::BranchType::Local) {
            b.delete()?;
            out.branches.push(branch);
        }
    }
    Ok(())
}

/// Removes the worktrees and attempt branches that finished runs kept for inspection. Runs that
/// have not finished (in progress, or interrupted and waiting for `--resume`) are left alone.
pub fn clean(ws: &Workspace) -> Result<Cleaned> {
    let mut out = Cleaned {
        worktrees: Vec::new(),
        branches: Vec::new(),
        skipped_runs: Vec::new(),
    };
    clean_proposers(ws, &mut out)?;
    let runs = super::paths::runs_dir(&ws.atelier_dir());
    let Ok(entries) = std::fs::read_dir(&runs) else {
        return Ok(out);
    };
    let mut ids: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    ids.sort();
    for id in ids {
        let dir = runs.join(&id);
        let finished = events::read(&dir.join("events.jsonl"))
            .map(|r| {
                r.last()
                    .is_some_and(|r| matches!(r.event, RunEvent::RunFinished { .. }))
            })
            .unwrap_or(false);
        if !finished {
            out.skipped_runs.push(id);
            continue;
        }
        let _lock = crate::fsutil::Lock::acquire(&dir.join("lock"))?;
        if let Ok(wts) = std::fs::read_dir(dir.join("wt")) {
            for wt in wts.flatten() {
                let name = wt.file_name().to_string_lossy().into_owned();
                git::remove_worktree(&ws.repo, &name, &wt.path())?;
                out.worktrees.push(name);
            }
        }
        let prefix = format!("atelier/attempts/{id}/");
        for b in ws.repo.branches(Some(git2::BranchType::Local))? {
            let (mut b, _) = b?;
            let name = b.name()?.unwrap_or("").to_string();
            if name.starts_with(&prefix) {
                b.delete()?;
                out.branches.push(name);
            }
        }
    }
    Ok(out)
}

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
    // The scrutiny validator first: a run whose evidence does not hold is not proposed.
    let scrutiny = crate::improve::scrutiny::scrutinize(ws, &summary.run)?;
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
                    .filter(|f| f.severity == crate::governance::review::Severity::Blocking)
                    .map(|f| format!("{} {}: {}", f.reviewer, f.category, f.message))
                    .collect::<Vec<_>>()
                    .join("\n  "),
                summary.run
            ),
        ));
    }
    let records = events::read(&dir.join("events.jsonl"))?;
    let (base, plans) = records
        .iter()
        .find_map(|r| match &r.event {
            RunEvent::RunStarted { base, plans, .. } => Some((base.clone(), plans.clone())),
            _ => None,
        })
        .context("the run has no run-started event")?;
    let repo = &ws.repo;
    let base_tree = repo.find_commit(Oid::from_str(&base)?)?.tree()?;
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
    let mut plan_files = Vec::new();
    let mut names: Vec<PathBuf> = std::fs::read_dir(dir.join("plans"))?
        .flatten()
        .map(|e| e.path())
        .collect();
    names.sort();
    for p in names {
        plan_files.push(super::plan::parse(
            &p.display().to_string(),
            &std::fs::read_to_string(&p)?,
        )?);
    }
    let mut rationale = format!(
        "{}Produced by swarm run {} (plans {}); every task passed the gauntlet and its contract checks. Evidence: {} in the proposer's clone.\n",
        by.as_ref().map(|b| format!("{}\n\n", b.preface)).unwrap_or_default(),
        summary.run,
        plans.join(", "),
        // Relative to the repository: a local absolute path means nothing to reviewers and
        // tells them about the proposer's machine.
        std::path::Path::new(&summary.events)
            .strip_prefix(&ws.root)
            .map_or_else(|_| format!(".atelier/runs/{}/events.jsonl", summary.run), |p| p.display().to_string())
    );
    rationale.push_str(&format!(
        "Scrutiny validator: {} ({} of {} checks with a passing record at the attempt that passed; {} finding(s)).\n",
        scrutiny.verdict.as_str(),
        scrutiny.evidence.iter().filter(|e| e.passed_at.is_some()).count(),
        scrutiny.evidence.len(),
        scrutiny.findings.len()
    ));
    for p in &plan_files {
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
    let title = plan_files
        .iter()
        .map(|p| p.title.clone())
        .collect::<Vec<_>>()
        .join(" + ");
    crate::workflow::propose(
        ws,
        crate::workflow::ProposeOptions {
            patch: patch_path,
            title,
            rationale: Some(rationale),
            proposer: None,
            origin: Some(match &by {
                Some(b) => format!("{}, swarm run {}", b.origin, summary.run),
                None => format!("swarm run {}", summary.run),
            }),
            // The tasks' claims: the `scope` reviewer flags any change outside them.
            declared: Some(
                plan_files
                    .iter()
                    .flat_map(|p| p.tasks.iter().flat_map(|t| t.files.iter().cloned()))
                    .collect::<std::collections::BTreeSet<String>>()
                    .into_iter()
                    .collect(),
            ),
            expect_base: None,
        },
        now,
    )
}
