//! One attempt of a task: the conductor prepares it on its loop (a fresh worktree at the run's
//! tip on the attempt's own branch, the worker's prompt, the claims taken by `attempt-started`);
//! the attempt then runs on its own: the worker (a command, contained by its role's grants and
//! watched for silence, or an http endpoint), the snapshot of what it left (nothing outside its
//! claims), the gauntlet's steps and the task's contract checks (contained by the gauntlet's
//! grants), and a second snapshot (nothing changed since). Its events go to the conductor over
//! a channel; its result (`AttemptResult`) is what `integrate` makes of it.
//!
//! Talks to `agent::process` (the only place that runs programs), `agent::http`, `git`
//! (snapshots, worktrees), `memory` (error digests) and the conductor.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use git2::Oid;
use tokio::sync::mpsc;

use super::checks;
use super::limits::{millis, Limits};
use super::{run_dir, Conductor, Flight, WORKER_TEMPLATE};
use crate::agent::{self, process};
use crate::git;
pub(super) use crate::governance::handoff::handed_off;
use crate::swarm::events::RunEvent;
use crate::swarm::live::Board;
use crate::swarm::memory;
use crate::swarm::plan::{compile_glob, Task};
use crate::workflow::error::Result;

/// A task key as it appears in worktree and branch names: ASCII letters and digits, `-` for
/// anything else.
fn slug(key: &str) -> String {
    key.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// `text` with each of `values` (8 bytes or more) replaced by `[redacted]`.
fn redact(text: &str, values: &[String]) -> String {
    let mut out = text.to_string();
    for value in values.iter().filter(|v| v.len() >= 8) {
        out = out.replace(value, "[redacted]");
    }
    out
}

/// `text` with the values of the variables in `names`, as atelier's own environment holds
/// them, redacted.
fn redact_passed(text: &str, names: &[String]) -> String {
    redact(text, &secret_values(names, |n| std::env::var(n).ok()))
}

/// The values of the variables in `names` that may be secrets: all but those naming a file or
/// folder that exists (`CODEX_HOME=/home/me/.codex`), which a person needs to read in a CLI's
/// error, and which grant nothing by being seen.
fn secret_values(names: &[String], var: impl Fn(&str) -> Option<String>) -> Vec<String> {
    names
        .iter()
        .filter_map(|n| var(n))
        .filter(|v| !(v.starts_with('/') && Path::new(v).exists()))
        .collect()
}

/// What one attempt needs, prepared on the main loop (which owns git).
pub(super) struct AttemptJob {
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
    board: Board,
    /// The run's directory, where each attempt's output is kept (`attempts/`).
    run_dir: PathBuf,
}

impl AttemptJob {
    /// What every program of the attempt is told: the task, the attempt and the run; and
    /// Python not to leave `__pycache__/` in the worktree, where it would be a change (a role's
    /// `set_env` may say otherwise).
    fn env(&self) -> Vec<(String, String)> {
        vec![
            ("ATELIER_TASK_ID".to_string(), self.task.key.clone()),
            ("ATELIER_ATTEMPT".to_string(), self.attempt.to_string()),
            ("ATELIER_RUN_ID".to_string(), self.run.clone()),
            ("PYTHONDONTWRITEBYTECODE".to_string(), "1".to_string()),
        ]
    }
}

/// How an attempt ended.
#[derive(Debug, PartialEq)]
pub(super) enum AttemptResult {
    /// The tree the worker produced (checked against the claims, unchanged by the gauntlet).
    Passed {
        tree: Oid,
    },
    Failed {
        reason: String,
        digest: Vec<String>,
    },
}

/// Whether `path` is among `task`'s claims ([`Task::claims`]).
pub(super) fn claimed(task: &Task, path: &str) -> bool {
    task.claims(path)
}

/// Why an attempt may not add or change a symbolic link, whatever it points at: a checkout
/// makes the target's files appear under the link's name (`.vscode` → `docs/editor`, `.github`
/// → `docs/ci`), or reach outside the tree. Ordinary work adds none; the operator adds links.
pub(super) const LINK: &str =
    "is a symbolic link: a checkout makes its target appear under its name, so workers may not add or change links";

/// The failure of an attempt that wrote a file another program would run outside containment
/// (`handed_off`), or added or changed a symbolic link (`LINK`), naming each.
fn handing_off(changed: &[String], links: &[String]) -> Option<AttemptResult> {
    let found: Vec<String> = changed
        .iter()
        .filter_map(|p| {
            handed_off(p)
                .or_else(|| links.contains(p).then_some(LINK))
                .map(|why| format!("{p} ({why})"))
        })
        .collect();
    (!found.is_empty()).then(|| AttemptResult::Failed {
        reason: format!(
            "wrote what would run outside containment: {}",
            found.join("; ")
        ),
        digest: vec![format!(
            "[trust] wrote {}: workers may not write files other programs run or obey outside the sandbox; the operator changes them, through the gate",
            found.join("; ")
        )],
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
    // The reply becomes the file: ask for its contents only, and take them out of a fence.
    let system = agent::http::file_instructions(&target);
    // On the board while the request is out, so that a budget can end it: the request is
    // abandoned then (its reply, if one comes, is dropped).
    let on_board = job.board.enter(&job.task.key, job.attempt);
    // A thread of its own, not the runtime's blocking pool: an abandoned request must not hold
    // up the conductor's exit (the runtime waits for its blocking tasks).
    let (send, mut request) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let _ = send.send(agent::http::ask(
            &url,
            &model,
            key.as_deref(),
            Some(&system),
            &prompt,
            timeout,
        ));
    });
    let reply = loop {
        tokio::select! {
            r = &mut request => break r,
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
        }
        if on_board.end.load(std::sync::atomic::Ordering::Relaxed) {
            return fail("the request was abandoned by the conductor: a budget was reached".into());
        }
    };
    // A reply that came as the budget was reached is not used either.
    if on_board.end.load(std::sync::atomic::Ordering::Relaxed) {
        return fail(
            "the reply came after the conductor ended the attempt: a budget was reached".into(),
        );
    }
    drop(on_board);
    let reply = match reply {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => return fail(e),
        Err(e) => return fail(e.to_string()),
    };
    if let Some(usage) = reply.usage {
        let _ = tx.send(RunEvent::Spent {
            task: job.task.key.clone(),
            attempt: job.attempt,
            client: "http".into(),
            usage,
        });
    }
    let text = agent::http::file_contents(&reply.text);
    let _ = tx.send(RunEvent::WorkerExited {
        task: job.task.key.clone(),
        attempt: job.attempt,
        code: Some(0),
        output_bytes: text.len() as u64,
        truncated: false,
        ms: Some(millis(started.elapsed())),
        log: None,
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
    (argv, pass_env, set_env): (&[String], &[String], &[(String, String)]),
    client: Option<&'static agent::clients::Client>,
    limits: &Limits,
    tx: &mpsc::UnboundedSender<RunEvent>,
) -> Option<AttemptResult> {
    let pass: Vec<String> = pass_env
        .iter()
        .filter(|v| !process::never_passed(v))
        .cloned()
        .collect();
    // On the board while the worker runs (not during the gauntlet, which is not watched for
    // silence).
    let on_board = job.board.enter(&job.task.key, job.attempt);
    // A preset's report (spend, a failure it exits 0 with) is read from every line it prints,
    // not from the part of its output that is kept.
    let report = client.map(|c| Arc::new(Mutex::new(c.report())));
    let mut worker = process::Spawn {
        lines: report
            .clone()
            .map(|r| process::LineTap(r as Arc<Mutex<dyn process::Lines>>)),
        program: argv[0].clone(),
        args: argv[1..].to_vec(),
        cwd: job.worktree.clone(),
        env: process::scrubbed_env(&pass, &[job.env(), set_env.to_vec()].concat()),
        stdin: job.prompt.clone().into_bytes(),
        timeout: limits.attempt,
        silence: Some(process::Silence {
            nudge_after: limits.nudge,
            restart_after: limits.restart,
            live: Some(on_board.last.clone()),
            end: Some(on_board.end.clone()),
        }),
        max_output: limits.max_output,
        sandbox: limits.worker_sandbox(&job.task.role, &job.worktree, &job.common),
    };
    // A preset's CLI keeps its state in a private directory of this attempt's.
    let _state = match client.map(|c| c.prepare(&mut worker)).transpose() {
        Ok(s) => s,
        Err(e) => {
            return Some(AttemptResult::Failed {
                reason: format!("creating the worker's state directory: {e}"),
                digest: Vec::new(),
            })
        }
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
            let why = could_not_start(&worker, &e);
            return Some(AttemptResult::Failed {
                reason: format!("the worker {why}"),
                digest: vec![format!("[worker] {why}")],
            });
        }
    };
    drop(on_board);
    let output = redact_passed(&outcome.output, &pass);
    let log = keep_output(job, &output);
    let report = report.map(|r| {
        r.lock()
            .expect("the report's lock is never poisoned")
            .clone()
    });
    let usage = report.as_ref().and_then(|r| r.usage());
    if let Some((c, usage)) = client.zip(usage) {
        let _ = tx.send(RunEvent::Spent {
            task: job.task.key.clone(),
            attempt: job.attempt,
            client: c.name.to_string(),
            usage,
        });
    }
    report_exit(job, &outcome, limits, log, tx);
    worker_failure(&outcome, limits, &output).or_else(|| {
        // Every agent CLI exits 0 when its model call failed: what it said is the reason.
        let c = client?;
        let said = report.as_ref()?.failure()?;
        // Redacted whole, then clipped: a key the clip cut would no longer match.
        let said = agent::report::one_line(&redact_passed(&said, &pass));
        Some(AttemptResult::Failed {
            reason: format!("the {} CLI exited 0 but reported a failure: {said}", c.name),
            digest: [format!("[worker] {} failed: {said}", c.name)]
                .into_iter()
                .chain(memory::digest("worker", &output))
                .collect(),
        })
    })
}

/// Why a worker's program could not start, naming the file it resolved to and, for a
/// permission refused under containment, the setting that grants it.
fn could_not_start(worker: &process::Spawn, e: &std::io::Error) -> String {
    let path = worker
        .env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.as_str());
    let at = match agent::clients::find_program(&worker.program, path) {
        Some(p) => {
            let real = p.canonicalize().unwrap_or_else(|_| p.clone());
            if real == p {
                format!(" ({})", p.display())
            } else {
                format!(" ({}, which is {})", p.display(), real.display())
            }
        }
        None => " (not found on the worker's PATH)".to_string(),
    };
    let next = match e.kind() {
        std::io::ErrorKind::PermissionDenied if worker.sandbox.is_some() => {
            ": contained, it may read only the system folders, its worktree and what its role's `readable` lists; add the folder its install lives in (and its interpreter's) to `readable`"
        }
        std::io::ErrorKind::NotFound => {
            ": install it so that it is on the PATH `atelier run` is started with (a preset's `command` only adds arguments), or, for a `command` role, name it by its full path"
        }
        _ => "",
    };
    format!("`{}`{at} could not start: {e}{next}", worker.program)
}

/// Keeps what the worker printed under the run's `attempts/` folder (written whole, or not at
/// all), its control characters marked rather than kept (`text::printable`); where, relative to
/// the run's directory.
fn keep_output(job: &AttemptJob, output: &str) -> Option<String> {
    let name = format!("attempts/{}-{}.log", slug(&job.task.key), job.attempt);
    let path = job.run_dir.join(&name);
    std::fs::create_dir_all(path.parent()?).ok()?;
    crate::fsutil::atomic_write(&path, crate::text::printable(output).as_bytes()).ok()?;
    Some(name)
}

/// The worker's exit, the silences it had, and its restart if it was silenced, as events.
fn report_exit(
    job: &AttemptJob,
    outcome: &process::Outcome,
    limits: &Limits,
    log: Option<String>,
    tx: &mpsc::UnboundedSender<RunEvent>,
) {
    let (task, attempt) = (job.task.key.clone(), job.attempt);
    let _ = tx.send(RunEvent::WorkerExited {
        task: task.clone(),
        attempt,
        code: outcome.code,
        output_bytes: outcome.output_bytes,
        truncated: outcome.truncated,
        ms: Some(millis(outcome.elapsed)),
        log,
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
        let measured = silence_measured(outcome, limits);
        let _ = tx.send(RunEvent::Restarted {
            task,
            attempt,
            silent_secs: measured.as_secs(),
            silent_ms: Some(millis(measured)),
        });
    }
}

/// The silence a restart ended, measured, not the threshold: the last quiet period.
fn silence_measured(outcome: &process::Outcome, limits: &Limits) -> Duration {
    outcome.quiet.last().map_or(limits.restart, |q| q.lasted)
}

/// How a worker's run failed the attempt, if it did: silenced and restarted, past the attempt
/// timeout, or a non-zero exit, each with its output's digest (`output` has the values of the
/// variables its role passes — API keys — redacted already, whatever the worker printed).
fn worker_failure(
    outcome: &process::Outcome,
    limits: &Limits,
    output: &str,
) -> Option<AttemptResult> {
    // What it printed last says what it was doing when it was killed.
    let with_output = |first: String| {
        [first]
            .into_iter()
            .chain(memory::digest("worker", output))
            .collect()
    };
    if outcome.ended {
        // The conductor ended it (a role's or a task's budget): it says which.
        return Some(AttemptResult::Failed {
            reason: "the worker was ended by the conductor".into(),
            digest: with_output("[worker] ended by the conductor: a budget was reached".into()),
        });
    }
    if outcome.silenced {
        let silent = silence_measured(outcome, limits).as_secs();
        return Some(AttemptResult::Failed {
            reason: format!("the worker was silent for {silent}s and was restarted"),
            digest: with_output(format!("[worker] silent for {silent}s: the attempt was killed; produce output while working")),
        });
    }
    if outcome.timed_out {
        return Some(AttemptResult::Failed {
            reason: format!(
                "the worker ran past the attempt timeout ({}s)",
                limits.attempt.as_secs()
            ),
            digest: with_output(format!(
                "[worker] ran past {}s and was killed",
                limits.attempt.as_secs()
            )),
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
            digest: memory::digest("worker", output),
        });
    }
    None
}

/// Runs the attempt's worker, then checks what it left: its claims, the gauntlet and the
/// contract checks, and that nothing changed meanwhile.
async fn run_attempt(
    job: AttemptJob,
    limits: &Limits,
    tx: mpsc::UnboundedSender<RunEvent>,
) -> AttemptResult {
    let done = match &job.backend {
        agent::Backend::Command {
            argv,
            pass_env,
            set_env,
            client,
        } => command_worker(&job, (argv, pass_env, set_env), *client, limits, &tx).await,
        agent::Backend::Http {
            base_url,
            model,
            api_key_env,
        } => http_worker(&job, base_url, model, api_key_env.as_deref(), limits, &tx).await,
    };
    if let Some(failed) = done {
        return failed;
    }
    // Writes outside the task's claims fail the attempt before anything is checked. The tree
    // is taken now, from the files, relative to the commit the attempt started from.
    let (tree, changed, links) = match snapshot(&job).await {
        Ok(s) => s,
        Err(e) => {
            return AttemptResult::Failed {
                reason: format!("reading what the worker left: {e}"),
                digest: vec![format!("[worktree] {e}")],
            }
        }
    };
    if let Some(failed) = handing_off(&changed, &links) {
        return failed;
    }
    if let Some(failed) = outside_claims(&job.task, &changed) {
        return failed;
    }
    // The steps and checks judge the tree the worker left, on a clean checkout of it: what the
    // worktree holds besides (ignored files, bytecode, a build of other code, back-dated
    // files a build tool takes for fresh) is not theirs to read.
    let checking = checks::Job {
        task: &job.task,
        attempt: job.attempt,
        common: &job.common,
        at: job.at,
        worktree: &job.worktree,
        env: job.env(),
    };
    let checkout = match checks::Checkout::new(&checking, tree) {
        Ok(c) => c,
        Err(e) => {
            return AttemptResult::Failed {
                reason: format!("checking out the worker's tree for the checks: {e}"),
                digest: vec![format!("[worktree] {e}")],
            }
        }
    };
    if let Some(checks::Failed { reason, digest }) =
        checks::gauntlet(&checking, &checkout, limits, &tx).await
    {
        return AttemptResult::Failed { reason, digest };
    }
    // What passed must be what is committed: a check that writes files, or a process the
    // worker left behind (only where it runs uncontained), would otherwise slip unchecked
    // content in. Files the repository ignores are no change.
    match snapshot_of(&job, checkout.path()).await {
        Ok((after, _, _)) if after == tree => AttemptResult::Passed { tree },
        Ok((after, _, _)) => written_by_checks(&job, tree, after, limits),
        Err(e) => AttemptResult::Failed {
            reason: format!("reading the checks' checkout: {e}"),
            digest: Vec::new(),
        },
    }
}

/// The failure of an attempt whose worktree changed while its gauntlet steps and contract
/// checks ran, naming what changed. The worker had exited, so it is not told it did this.
fn written_by_checks(job: &AttemptJob, tree: Oid, after: Oid, limits: &Limits) -> AttemptResult {
    let paths = git2::Repository::open(&job.common)
        .and_then(|repo| {
            let (old, new) = (repo.find_tree(tree)?, repo.find_tree(after)?);
            git::changed_paths(&repo, &old, &new).map_err(|e| git2::Error::from_str(&e.to_string()))
        })
        .map(|p| shown_paths(&p))
        .unwrap_or_else(|e| format!("(which ones could not be read: {e})"));
    let steps: Vec<&str> = limits.steps.iter().map(|(n, _, _)| n.as_str()).collect();
    let ran = match (steps.is_empty(), job.task.contract.checks.len()) {
        (true, n) => format!("the task's {n} contract check(s)"),
        (false, 0) => format!("the gauntlet ({})", steps.join(", ")),
        (false, n) => format!(
            "the gauntlet ({}) and the task's {n} contract check(s)",
            steps.join(", ")
        ),
    };
    // Uncontained, a process the worker left running outlives it and may be the writer.
    let or_left = if limits.sandboxes.is_none() {
        " (or a process the worker left running did)"
    } else {
        ""
    };
    AttemptResult::Failed {
        reason: format!(
            "{ran} wrote {paths} in the checkout of the worker's tree they ran in{or_left}; a check must leave the tree as it found it: have it write elsewhere ($TMPDIR), or have the repository ignore those files (.gitignore)"
        ),
        digest: vec![format!(
            "[checks] after your work, {ran} wrote {paths}; the attempt failed for that, not for your change, unless your code writes them when it runs"
        )],
    }
}

/// Up to eight paths, then how many more.
fn shown_paths(paths: &[String]) -> String {
    let mut shown = paths.iter().take(8).cloned().collect::<Vec<_>>().join(", ");
    if paths.len() > 8 {
        shown.push_str(&format!(" and {} more", paths.len() - 8));
    }
    shown
}

/// The tree of the attempt's worktree as its files are now, the paths changed since the
/// commit it started from, and which of those are symbolic links now.
async fn snapshot(
    job: &AttemptJob,
) -> std::result::Result<(Oid, Vec<String>, Vec<String>), String> {
    snapshot_of(job, &job.worktree).await
}

/// [`snapshot`] of the files under `root` (the worktree, or the checks' checkout).
async fn snapshot_of(
    job: &AttemptJob,
    root: &Path,
) -> std::result::Result<(Oid, Vec<String>, Vec<String>), String> {
    let (common, root, at) = (job.common.clone(), root.to_path_buf(), job.at);
    let taken = move || {
        let (tree, changed) = git::snapshot(&common, &root, at)?;
        let repo = git2::Repository::open(&common)?;
        let links = git::links_in(&repo, tree, &changed)?;
        Ok::<_, git::GitError>((tree, changed, links))
    };
    match tokio::task::spawn_blocking(taken).await {
        Ok(Ok(s)) => Ok(s),
        Ok(Err(e)) => Err(e.to_string()),
        Err(e) => Err(e.to_string()),
    }
}

/// The failure of an attempt that changed paths outside its task's claims, if it did.
fn outside_claims(task: &Task, changed: &[String]) -> Option<AttemptResult> {
    let outside: Vec<&str> = changed
        .iter()
        .filter(|p| !claimed(task, p))
        .map(String::as_str)
        .collect();
    (!outside.is_empty()).then(|| AttemptResult::Failed {
        reason: format!("wrote outside its claims: {}", outside.join(", ")),
        digest: vec![format!(
            "[claims] wrote {} outside the task's files; change only {}",
            outside.join(", "),
            task.files.join(", ")
        )],
    })
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

impl<'a> Conductor<'a> {
    /// The worktree of a task's attempt: its name and the path the conductor computes for it.
    pub(super) fn worktree(&self, task: &str, attempt: u32) -> (String, PathBuf) {
        let name = format!("{}-{}-{attempt}", self.run, slug(task));
        let path = run_dir(self.ws, &self.run).join("wt").join(&name);
        (name, path)
    }

    pub(super) fn attempt_branch(&self, task: &str, attempt: u32) -> String {
        format!("atelier/attempts/{}/{}/{attempt}", self.run, slug(task))
    }

    /// Starts a task's next attempt: a fresh worktree at the run's tip on the attempt's own
    /// branch, the prompt, the claims (taken by `attempt-started`), and the worker.
    pub(super) fn launch_attempt(&mut self, task: Task) -> Result<()> {
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
            run_dir: run_dir(self.ws, &self.run),
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(files: &[&str]) -> Task {
        let text = format!(
            "[plan]\nid = \"p\"\ntitle = \"P\"\n\n[[task]]\nid = \"A\"\ntitle = \"A\"\nrole = \"implementer\"\ngoal = \"g\"\nfiles = [{}]\n",
            files
                .iter()
                .map(|f| format!("\"{f}\""))
                .collect::<Vec<_>>()
                .join(", ")
        );
        crate::swarm::plan::parse("p.toml", &text)
            .expect("the plan parses")
            .tasks
            .remove(0)
    }

    fn limits() -> Limits {
        let config = crate::config::Config::parse(
            "atelier.toml",
            "[forge]\nkind = \"local\"\nrepository = \"acme/widgets\"\n\n[conductor]\nrestart_after = \"10m\"\nattempt_timeout = \"1h\"\n",
        )
        .expect("the configuration parses");
        Limits::from(&config, Path::new("/repo"), None)
    }

    fn failed(r: Option<AttemptResult>) -> (String, Vec<String>) {
        match r {
            Some(AttemptResult::Failed { reason, digest }) => (reason, digest),
            other => panic!("expected a failure, got {other:?}"),
        }
    }

    #[test]
    fn a_claim_covers_its_path_what_is_under_it_and_what_its_glob_matches() {
        let t = task(&["src/a.rs", "docs/", "tests/*.rs"]);
        for inside in [
            "src/a.rs",
            "docs/guide.md",
            "docs/deep/x.md",
            "tests/one.rs",
        ] {
            assert!(claimed(&t, inside), "{inside}");
        }
        for outside in [
            "src/a.rs.bak",
            "src/b.rs",
            "docsx/y.md",
            "tests/deep/two.rs",
        ] {
            assert!(!claimed(&t, outside), "{outside}");
        }
    }

    #[test]
    fn writing_outside_the_claims_fails_the_attempt_and_says_what_to_change() {
        let t = task(&["src/a.rs"]);
        assert_eq!(outside_claims(&t, &["src/a.rs".into()]), None);
        let (reason, digest) = failed(outside_claims(
            &t,
            &["src/a.rs".into(), "Cargo.toml".into(), "src/b.rs".into()],
        ));
        assert_eq!(reason, "wrote outside its claims: Cargo.toml, src/b.rs");
        assert_eq!(
            digest,
            ["[claims] wrote Cargo.toml, src/b.rs outside the task's files; change only src/a.rs"]
        );
    }

    #[test]
    fn an_added_link_is_refused_whatever_its_name() {
        let links = vec!["docs/ci".to_string()];
        let changed = vec!["docs/ci".to_string(), "src/a.rs".to_string()];
        let (reason, _) = failed(handing_off(&changed, &links));
        assert!(reason.contains("docs/ci (is a symbolic link"), "{reason}");
        assert!(!reason.contains("src/a.rs"), "{reason}");
        assert!(handing_off(&["src/a.rs".to_string()], &[]).is_none());
    }

    #[test]
    fn task_keys_become_safe_names() {
        assert_eq!(slug("plan-1:T 2/x"), "plan-1-T-2-x");
    }

    #[test]
    fn a_passed_path_that_exists_is_shown_and_a_key_is_not() {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = dir.path().display().to_string();
        let names = [
            "CODEX_HOME".to_string(),
            "OPENAI_API_KEY".to_string(),
            "GONE".to_string(),
        ];
        let var = |n: &str| match n {
            "CODEX_HOME" => Some(home.clone()),
            "OPENAI_API_KEY" => Some("sk-0123456789".to_string()),
            _ => Some("/no/such/place/at/all".to_string()),
        };
        assert_eq!(
            secret_values(&names, var),
            vec![
                "sk-0123456789".to_string(),
                "/no/such/place/at/all".to_string()
            ]
        );
    }

    #[test]
    fn passed_values_of_eight_bytes_or_more_are_redacted() {
        let values = ["sk-0123456789".to_string(), "short".to_string()];
        assert_eq!(
            redact("key sk-0123456789 and short", &values),
            "key [redacted] and short"
        );
    }

    #[test]
    fn a_worker_that_exits_zero_in_time_passes_its_part() {
        let ok = process::Outcome {
            code: Some(0),
            ..Default::default()
        };
        assert_eq!(worker_failure(&ok, &limits(), ""), None);
    }

    #[test]
    fn a_silenced_worker_fails_with_the_silence_measured_not_the_threshold() {
        let silenced = process::Outcome {
            code: None,
            silenced: true,
            quiet: vec![process::Quiet {
                lasted: Duration::from_secs(612),
                ended: crate::swarm::events::QuietEnd::Restart,
                nudged: true,
            }],
            ..Default::default()
        };
        let printed = "reading src/lib.rs\nasking the model\n";
        let (reason, digest) = failed(worker_failure(&silenced, &limits(), printed));
        assert_eq!(reason, "the worker was silent for 612s and was restarted");
        assert!(
            digest[0].starts_with("[worker] silent for 612s"),
            "{digest:?}"
        );
        // What it printed last comes with it.
        assert!(
            digest[1..].iter().any(|d| d.contains("asking the model")),
            "{digest:?}"
        );
        // Without a recorded quiet period, the threshold is what is known.
        let bare = process::Outcome {
            silenced: true,
            ..Default::default()
        };
        assert_eq!(silence_measured(&bare, &limits()), Duration::from_secs(600));
    }

    #[test]
    fn a_worker_past_its_timeout_or_exiting_non_zero_fails() {
        let late = process::Outcome {
            timed_out: true,
            ..Default::default()
        };
        let (reason, _) = failed(worker_failure(&late, &limits(), ""));
        assert_eq!(reason, "the worker ran past the attempt timeout (3600s)");
        let crashed = process::Outcome {
            code: None,
            output: "error: boom\n".into(),
            ..Default::default()
        };
        let (reason, digest) = failed(worker_failure(&crashed, &limits(), &crashed.output));
        assert_eq!(reason, "the worker exited with a signal");
        assert!(!digest.is_empty());
        let (reason, _) = failed(worker_failure(
            &process::Outcome {
                code: Some(3),
                ..Default::default()
            },
            &limits(),
            "",
        ));
        assert_eq!(reason, "the worker exited with 3");
    }
}
