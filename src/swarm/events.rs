//! The run's event stream: every state change of a run is a typed event appended to
//! `.atelier/runs/<run-id>/events.jsonl` and fsynced before the action it records is relied on.
//! A run's state is a fold over its events (`RunState::fold`).

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::memory;
pub use crate::agent::process::QuietEnd;
use crate::governance::time::{format_rfc3339, Timestamp};

/// One state change of a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum RunEvent {
    RunStarted {
        run: String,
        plans: Vec<String>,
        branch: String,
        base: String,
        max_parallel: usize,
        tasks: Vec<String>,
        waves: Vec<Vec<String>>,
    },
    /// How the conductor confines the run's programs from here on (written when it starts and
    /// each time it resumes): `landlock` with the kernel's ABI, or `none` (the merged
    /// `[swarm] containment = "none"`).
    Containment {
        mode: String,
        abi: i32,
    },
    /// The settings the conductor runs with from here on (written when it starts and each time
    /// it resumes), so `atelier stats` and the `tune` proposer know what each run measured.
    /// Absent from logs written before it existed.
    Settings {
        nudge_after_ms: u64,
        restart_after_ms: u64,
        attempt_timeout_ms: u64,
        failure_budget: u32,
        max_parallel: usize,
        context_budget: usize,
        /// The gauntlet's steps with their timeouts, in order.
        steps: Vec<StepSetting>,
        /// Each role of the run's tasks, with its backend (`command`, `http`, a preset name).
        roles: BTreeMap<String, String>,
    },
    /// The `validator` role approved the run's contracts before it started (a run it does not
    /// approve never starts); its findings, if any, kept as evidence.
    ContractValidated {
        validator: String,
        verdict: String,
        findings: Vec<String>,
    },
    /// A resumed run: attempts that were in flight at the crash are abandoned and restarted.
    RunResumed {
        abandoned: Vec<String>,
    },
    /// Claims taken atomically with the decision to start the attempt.
    AttemptStarted {
        task: String,
        attempt: u32,
        claims: Vec<String>,
        worktree: String,
        prompt_bytes: usize,
        /// The task's role and that role's backend (absent from older logs).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        role: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        backend: Option<String>,
    },
    /// The worker had been silent (no output at all) for `silent_secs` at the nudge threshold.
    Nudged {
        task: String,
        attempt: u32,
        silent_secs: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        silent_ms: Option<u64>,
    },
    /// The worker was killed after `silent_secs` of silence (measured; older logs recorded the
    /// configured threshold and no `silent_ms`).
    Restarted {
        task: String,
        attempt: u32,
        silent_secs: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        silent_ms: Option<u64>,
    },
    /// A quiet period of the worker (no output at all) of at least half the nudge threshold
    /// (at least a second): how long it lasted, what ended it, and whether it reached the
    /// nudge threshold. Written when the worker ends, in order.
    Quiet {
        task: String,
        attempt: u32,
        ms: u64,
        ended: QuietEnd,
        nudged: bool,
    },
    /// The tokens a preset CLI's worker reported spending in one attempt (`agent::clients`),
    /// written when it exits.
    Spent {
        task: String,
        attempt: u32,
        /// The preset (`claude`, `codex`, `aider`).
        client: String,
        #[serde(flatten)]
        usage: crate::agent::clients::Usage,
    },
    /// A `[budget]` ceiling was reached: its scope (`run`, `role NAME`, `task KEY`), what it
    /// measures (`tokens`, `cost`, `wall`), the ceiling and what was used. No attempt in that
    /// scope starts after it; for the run's, the attempts running were ended.
    BudgetReached {
        scope: String,
        measure: String,
        limit: String,
        used: String,
    },
    WorkerExited {
        task: String,
        attempt: u32,
        code: Option<i32>,
        output_bytes: u64,
        truncated: bool,
        /// How long the worker ran (monotonic clock; absent from older logs).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ms: Option<u64>,
        /// Where its output is kept, relative to the run's directory (`attempts/T-1.log`),
        /// with the values of the variables its role passes redacted.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        log: Option<String>,
    },
    StepFinished {
        task: String,
        attempt: u32,
        step: String,
        passed: bool,
        secs: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ms: Option<u64>,
    },
    AttemptFailed {
        task: String,
        attempt: u32,
        reason: String,
        digest: Vec<String>,
        /// How long the attempt took, worker and steps (absent from older logs, and for an
        /// attempt refused on resume).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ms: Option<u64>,
    },
    /// The attempt passed; its commit is integrated next.
    AttemptPassed {
        task: String,
        attempt: u32,
        commit: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ms: Option<u64>,
    },
    Integrated {
        task: String,
        commit: String,
    },
    /// A first-attempt success, kept as a worked example for later tasks of the same role.
    GoldenPath {
        task: String,
        role: String,
        example: String,
    },
    /// Claims released (after success, failure or a blocked dependency).
    ClaimsReleased {
        task: String,
        attempt: u32,
    },
    TaskFailed {
        task: String,
        reason: String,
    },
    TaskBlocked {
        task: String,
        by: String,
    },
    /// An operator's control (`atelier control`, the `watch` cockpit), taken from the run's
    /// `control/` directory: who asked, and whether it applied (and why not).
    Control {
        action: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        task: Option<String>,
        by: String,
        applied: bool,
        detail: String,
    },
    RunFinished {
        succeeded: usize,
        failed: usize,
        blocked: usize,
        /// Tasks an operator forced past (absent from older logs).
        #[serde(default, skip_serializing_if = "is_zero")]
        skipped: usize,
    },
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// A gauntlet step as the conductor runs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepSetting {
    pub name: String,
    pub timeout_ms: u64,
}

/// An event with its place and time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub seq: u64,
    pub at: String,
    #[serde(flatten)]
    pub event: RunEvent,
}

/// Why the event stream cannot be read or written.
#[derive(Debug, Error)]
pub enum EventsError {
    /// `what` is the operation (opening, writing, ...) on `path`; the cause is the IO error.
    #[error("{what} {}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}:{line}: not a run event ({reason})", path.display())]
    NotAnEvent {
        path: PathBuf,
        line: usize,
        reason: String,
    },
}

type Result<T> = std::result::Result<T, EventsError>;

/// Attaches the operation and the path to an IO error.
fn io(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> EventsError {
    let path = path.to_path_buf();
    move |source| EventsError::Io { what, path, source }
}

/// Appends events durably.
pub struct Sink {
    file: File,
    next: u64,
    pub path: PathBuf,
}

impl Sink {
    pub fn open(path: &Path) -> Result<Sink> {
        // A crash mid-write can leave a torn last line: cut it off so appends start clean.
        if let Ok(bytes) = std::fs::read(path) {
            if !bytes.is_empty() && !bytes.ends_with(b"\n") {
                let keep = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
                let f = OpenOptions::new()
                    .write(true)
                    .open(path)
                    .map_err(io("opening", path))?;
                f.set_len(keep as u64).map_err(io("truncating", path))?;
                f.sync_all().map_err(io("syncing", path))?;
            }
        }
        let existing = read(path).unwrap_or_default();
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io("creating", dir))?;
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(io("opening", path))?;
        Ok(Sink {
            file,
            next: existing.len() as u64,
            path: path.to_path_buf(),
        })
    }

    /// Writes one event and fsyncs it: once this returns, the event survives a crash.
    pub fn emit(&mut self, event: RunEvent, now: Timestamp) -> Result<Record> {
        let record = Record {
            seq: self.next,
            at: format_rfc3339(now),
            event,
        };
        let mut line = serde_json::to_string(&record).expect("an event always serializes");
        line.push('\n');
        self.file
            .write_all(line.as_bytes())
            .map_err(io("writing", &self.path))?;
        self.file.sync_data().map_err(io("syncing", &self.path))?;
        self.next += 1;
        Ok(record)
    }
}

/// Reads a run's events; a torn last line (a crash mid-write) is ignored, anything else
/// malformed is an error naming the line.
pub fn read(path: &Path) -> Result<Vec<Record>> {
    let file = File::open(path).map_err(io("opening", path))?;
    let lines: Vec<String> = BufReader::new(file)
        .lines()
        .collect::<std::io::Result<_>>()
        .map_err(io("reading", path))?;
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        match serde_json::from_str::<Record>(line) {
            Ok(r) => out.push(r),
            Err(_) if i + 1 == lines.len() => break,
            Err(e) => {
                return Err(EventsError::NotAnEvent {
                    path: path.to_path_buf(),
                    line: i + 1,
                    reason: e.to_string(),
                })
            }
        }
    }
    Ok(out)
}

/// Where a task stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskState {
    Pending,
    Running,
    Succeeded,
    Failed,
    Blocked,
    /// Forced past by an operator (`control skip`): its dependents run as if it had passed,
    /// but a run with a skipped task is never proposed.
    Skipped,
}

/// A passed attempt as its `attempt-passed` event records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Passed {
    pub attempt: u32,
    /// The attempt's commit; `None` when the attempt changed nothing.
    pub commit: Option<String>,
}

/// One task as the events tell it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TaskView {
    pub state: TaskState,
    /// The last attempt started (0 before the first).
    pub attempt: u32,
    pub claims: Vec<String>,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    pub last_step: Option<String>,
    pub last_failure: Option<String>,
    /// What the last failed attempt printed that matters: its error blocks, or its last lines
    /// (the digest recorded with `attempt-failed`).
    pub last_output: Vec<String>,
    pub nudges: u32,
    pub restarts: u32,
    pub prompt_bytes: Vec<usize>,
    /// The "do not retry" list the next attempt's prompt carries: the failed attempts' error
    /// digests, unique and bounded (`memory::remember`).
    pub do_not_retry: Vec<String>,
    /// The last passed attempt; its commit is integrated next unless the task already ended.
    pub passed: Option<Passed>,
    /// Attempts made before an operator's last `retry`: the failure budget counts from here.
    pub budget_from: u32,
    /// The tokens its workers reported, over all its attempts (`spent`).
    pub spent: crate::agent::clients::Usage,
    /// How long its finished attempts took, worker and steps, in all (ms).
    pub worked_ms: u64,
    /// Where the output of its last attempt's worker is kept, relative to the run's directory.
    pub log: Option<String>,
    /// The role its latest attempt ran as (logs from before roles were recorded: none).
    pub role: Option<String>,
}

impl TaskView {
    fn new() -> TaskView {
        TaskView {
            state: TaskState::Pending,
            attempt: 0,
            claims: Vec::new(),
            started_at: None,
            finished_at: None,
            last_step: None,
            last_failure: None,
            last_output: Vec::new(),
            log: None,
            role: None,
            nudges: 0,
            restarts: 0,
            prompt_bytes: Vec::new(),
            do_not_retry: Vec::new(),
            passed: None,
            budget_from: 0,
            spent: Default::default(),
            worked_ms: 0,
        }
    }

    /// `attempt-started`: running, with the attempt's claims and prompt size.
    fn attempt_started(&mut self, attempt: u32, claims: &[String], prompt_bytes: usize, at: &str) {
        self.state = TaskState::Running;
        self.attempt = attempt;
        self.claims = claims.to_vec();
        self.started_at.get_or_insert_with(|| at.to_string());
        self.prompt_bytes.push(prompt_bytes);
        self.log = None;
    }

    /// `attempt-failed`: why, what it printed that matters, and its digest remembered for the
    /// next attempt's "do not retry" list.
    fn attempt_failed(&mut self, reason: &str, digest: &[String]) {
        self.last_failure = Some(reason.to_string());
        self.last_output = digest.to_vec();
        memory::remember(&mut self.do_not_retry, digest);
    }

    /// The task reached `state` (succeeded, failed or skipped) at `at`.
    fn end(&mut self, state: TaskState, at: &str) {
        self.state = state;
        self.finished_at = Some(at.to_string());
    }

    /// Whether the task ended: integrated, failed or blocked.
    pub fn ended(&self) -> bool {
        matches!(
            self.state,
            TaskState::Succeeded | TaskState::Failed | TaskState::Blocked | TaskState::Skipped
        )
    }
}

/// A run's state: a fold over its events. The conductor holds one and applies every event it
/// writes (`apply`), from the fold of the log it starts with (empty for a new run), so a new
/// run and `run --resume` share one path; `status` folds the same log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct RunState {
    pub run: String,
    pub branch: String,
    /// The run branch's tip as the events record it: the last integration, else the base.
    pub tip: Option<String>,
    pub finished: bool,
    pub tasks: BTreeMap<String, TaskView>,
    /// Tasks holding claims right now, with the claims.
    pub held: BTreeMap<String, Vec<String>>,
    pub waves: Vec<Vec<String>>,
    /// Worked examples from first-attempt successes, by role, oldest first.
    pub golden: BTreeMap<String, Vec<String>>,
    /// How the latest conductor confined the run's programs (`landlock`, `none`); `None` in
    /// logs written before containment existed (their programs ran uncontained).
    pub containment: Option<String>,
    /// An operator paused scheduling (`control pause`): attempts in flight go on, no new one
    /// starts until `resume`.
    pub paused: bool,
}

/// Whether `text` names a commit (as `git2::Oid::from_str` reads one); anything else in a log
/// never becomes the run's tip.
fn commit_id(text: &str) -> bool {
    git2::Oid::from_str(text).is_ok()
}

impl RunState {
    /// The state before any event: every task pending.
    pub fn new(tasks: &[String]) -> RunState {
        RunState {
            tasks: tasks.iter().map(|t| (t.clone(), TaskView::new())).collect(),
            ..RunState::default()
        }
    }

    /// Folds `records` over the state of a run of `tasks`; events naming other tasks change
    /// only `held`.
    pub fn fold(records: &[Record], tasks: &[String]) -> RunState {
        let mut s = RunState::new(tasks);
        for r in records {
            s.apply(r);
        }
        s
    }

    /// Folds a whole log, whose `run-started` event names the tasks.
    pub fn of_log(records: &[Record]) -> RunState {
        let tasks = records
            .iter()
            .find_map(|r| match &r.event {
                RunEvent::RunStarted { tasks, .. } => Some(tasks.clone()),
                _ => None,
            })
            .unwrap_or_default();
        RunState::fold(records, &tasks)
    }

    /// One step of the fold.
    pub fn apply(&mut self, r: &Record) {
        let at = &r.at;
        match &r.event {
            RunEvent::RunStarted {
                run,
                branch,
                base,
                waves,
                ..
            } => self.started(run, branch, base, waves),
            RunEvent::Containment { mode, .. } => self.containment = Some(mode.clone()),
            RunEvent::RunResumed { abandoned } => self.resumed(abandoned),
            RunEvent::AttemptStarted {
                task,
                attempt,
                claims,
                prompt_bytes,
                role,
                ..
            } => {
                self.held.insert(task.clone(), claims.clone());
                self.task(task, |v| {
                    v.attempt_started(*attempt, claims, *prompt_bytes, at);
                    if role.is_some() {
                        v.role = role.clone();
                    }
                });
            }
            RunEvent::Nudged { task, .. } => self.task(task, |v| v.nudges += 1),
            RunEvent::Restarted { task, .. } => self.task(task, |v| v.restarts += 1),
            RunEvent::StepFinished {
                task, step, passed, ..
            } => self.task(task, |v| {
                let how = if *passed { "passed" } else { "failed" };
                v.last_step = Some(format!("{step}: {how}"));
            }),
            RunEvent::AttemptFailed {
                task,
                reason,
                digest,
                ms,
                ..
            } => self.task(task, |v| {
                v.attempt_failed(reason, digest);
                v.worked_ms += ms.unwrap_or(0);
            }),
            RunEvent::Spent { task, usage, .. } => self.task(task, |v| v.spent = v.spent + *usage),
            RunEvent::AttemptPassed {
                task,
                attempt,
                commit,
                ms,
            } => self.task(task, |v| {
                v.passed = Some(Passed {
                    attempt: *attempt,
                    commit: Some(commit.clone()).filter(|c| !c.is_empty()),
                });
                v.worked_ms += ms.unwrap_or(0);
            }),
            RunEvent::GoldenPath { role, example, .. } => self
                .golden
                .entry(role.clone())
                .or_default()
                .push(example.clone()),
            RunEvent::ClaimsReleased { task, .. } => {
                self.held.remove(task);
                self.task(task, |v| {
                    if v.state == TaskState::Running {
                        v.state = TaskState::Pending;
                    }
                });
            }
            RunEvent::Integrated { task, commit } => {
                if commit_id(commit) {
                    self.tip = Some(commit.clone());
                }
                self.task(task, |v| v.end(TaskState::Succeeded, at));
            }
            RunEvent::TaskFailed { task, reason } => self.task(task, |v| {
                v.end(TaskState::Failed, at);
                v.last_failure = Some(reason.clone());
            }),
            RunEvent::Control {
                action,
                task,
                applied: true,
                ..
            } => self.controlled(action, task.as_deref(), at),
            RunEvent::Control { .. } => {}
            RunEvent::TaskBlocked { task, by } => self.task(task, |v| {
                v.state = TaskState::Blocked;
                v.last_failure = Some(format!("blocked by {by}"));
            }),
            RunEvent::RunFinished { .. } => self.finished = true,
            RunEvent::WorkerExited { task, log, .. } => {
                let log = log.clone();
                self.task(task, |v| v.log = log);
            }
            RunEvent::Settings { .. }
            | RunEvent::Quiet { .. }
            | RunEvent::BudgetReached { .. }
            | RunEvent::ContractValidated { .. } => {}
        }
    }

    /// Changes `task`'s view, when the run has that task (events naming others change nothing
    /// but `held`).
    fn task(&mut self, task: &str, change: impl FnOnce(&mut TaskView)) {
        if let Some(v) = self.tasks.get_mut(task) {
            change(v);
        }
    }

    /// `run-started`: the run, its branch and waves, and its base as the tip until the first
    /// integration.
    fn started(&mut self, run: &str, branch: &str, base: &str, waves: &[Vec<String>]) {
        self.run = run.to_string();
        self.branch = branch.to_string();
        self.waves = waves.to_vec();
        if self.tip.is_none() && commit_id(base) {
            self.tip = Some(base.to_string());
        }
    }

    /// `run-resumed`: the attempts in flight at the crash are abandoned, their tasks pending.
    fn resumed(&mut self, abandoned: &[String]) {
        for t in abandoned {
            self.held.remove(t);
            self.task(t, |v| v.state = TaskState::Pending);
        }
        self.finished = false;
    }

    /// An operator's control that applied (`control` events record those that did not too).
    fn controlled(&mut self, action: &str, task: Option<&str>, at: &str) {
        match (action, task) {
            ("pause", _) => self.paused = true,
            ("resume", _) => self.paused = false,
            ("retry", Some(t)) => {
                // The task starts over with a fresh budget, and what it blocked is pending
                // again (blocked anew if something else still fails).
                self.task(t, |v| {
                    v.state = TaskState::Pending;
                    v.budget_from = v.attempt;
                    v.finished_at = None;
                });
                self.unblock_all();
            }
            ("skip", Some(t)) => {
                self.task(t, |v| {
                    v.end(TaskState::Skipped, at);
                    v.last_failure = Some("skipped by an operator".into());
                });
                self.unblock_all();
            }
            _ => {}
        }
    }

    /// Every blocked task pending again: the conductor blocks anew what still must be.
    fn unblock_all(&mut self) {
        for v in self.tasks.values_mut() {
            if v.state == TaskState::Blocked {
                v.state = TaskState::Pending;
                v.last_failure = None;
            }
        }
    }

    pub fn completed(&self) -> BTreeSet<String> {
        self.in_state(TaskState::Succeeded)
            .chain(self.in_state(TaskState::Skipped))
            .map(|(k, _)| k)
            .collect()
    }

    /// Tasks in `state`, with why they are there (their last failure).
    pub fn why(&self, state: TaskState) -> BTreeMap<String, String> {
        self.in_state(state)
            .map(|(k, v)| (k, v.last_failure.clone().unwrap_or_default()))
            .collect()
    }

    /// Tasks that failed or were blocked, with why: the tasks no attempt will start for.
    pub fn ended_badly(&self) -> BTreeMap<String, String> {
        let mut out = self.why(TaskState::Failed);
        out.extend(self.why(TaskState::Blocked));
        out
    }

    /// Passed attempts not yet integrated (a crash came between), in task order.
    pub fn awaiting_integration(&self) -> Vec<(String, Option<String>)> {
        self.tasks
            .iter()
            .filter(|(_, v)| !v.ended())
            .filter_map(|(k, v)| Some((k.clone(), v.passed.as_ref()?.commit.clone())))
            .collect()
    }

    fn in_state(&self, state: TaskState) -> impl Iterator<Item = (String, &TaskView)> {
        self.tasks
            .iter()
            .filter(move |(_, v)| v.state == state)
            .map(|(k, v)| (k.clone(), v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "p:A";
    const B: &str = "p:B";
    const BASE: &str = "1111111111111111111111111111111111111111";
    const C1: &str = "2222222222222222222222222222222222222222";
    const M1: &str = "3333333333333333333333333333333333333333";

    fn tasks() -> Vec<String> {
        vec![A.to_string(), B.to_string()]
    }

    fn log(events: Vec<RunEvent>) -> Vec<Record> {
        events
            .into_iter()
            .enumerate()
            .map(|(i, event)| Record {
                seq: i as u64,
                at: format!("2026-01-01T00:00:{i:02}Z"),
                event,
            })
            .collect()
    }

    fn started() -> RunEvent {
        RunEvent::RunStarted {
            run: "r1".into(),
            plans: vec!["p".into()],
            branch: "atelier/runs/r1".into(),
            base: BASE.into(),
            max_parallel: 2,
            tasks: tasks(),
            waves: vec![vec![A.into()], vec![B.into()]],
        }
    }

    fn attempt(task: &str, attempt: u32) -> RunEvent {
        RunEvent::AttemptStarted {
            task: task.into(),
            attempt,
            claims: vec![format!("src/{task}.rs")],
            worktree: format!("wt/{task}-{attempt}"),
            prompt_bytes: 100,
            role: None,
            backend: None,
        }
    }

    fn failed(task: &str, attempt: u32, digest: &[&str]) -> RunEvent {
        RunEvent::AttemptFailed {
            task: task.into(),
            attempt,
            reason: format!("attempt {attempt} failed"),
            digest: digest.iter().map(|d| d.to_string()).collect(),
            ms: None,
        }
    }

    fn passed(task: &str, attempt: u32, commit: &str) -> RunEvent {
        RunEvent::AttemptPassed {
            task: task.into(),
            attempt,
            commit: commit.into(),
            ms: None,
        }
    }

    fn released(task: &str, attempt: u32) -> RunEvent {
        RunEvent::ClaimsReleased {
            task: task.into(),
            attempt,
        }
    }

    fn integrated(task: &str, commit: &str) -> RunEvent {
        RunEvent::Integrated {
            task: task.into(),
            commit: commit.into(),
        }
    }

    /// What a log folds to, in the parts the conductor decides by.
    struct Expect {
        tip: Option<&'static str>,
        finished: bool,
        held: &'static [&'static str],
        golden: &'static [(&'static str, &'static str)],
        ended_badly: &'static [(&'static str, &'static str)],
        awaiting: &'static [(&'static str, Option<&'static str>)],
        /// (task, state, last attempt, do-not-retry list)
        tasks: &'static [(&'static str, TaskState, u32, &'static [&'static str])],
    }

    const NOTHING: Expect = Expect {
        tip: None,
        finished: false,
        held: &[],
        golden: &[],
        ended_badly: &[],
        awaiting: &[],
        tasks: &[
            (A, TaskState::Pending, 0, &[]),
            (B, TaskState::Pending, 0, &[]),
        ],
    };

    /// Every case: a log and the state it folds to.
    fn cases() -> Vec<(&'static str, Vec<RunEvent>, Expect)> {
        let mut all = early_cases();
        all.extend(later_cases());
        all
    }

    /// Cases of attempts, failures, budgets and resumes in flight.
    fn early_cases() -> Vec<(&'static str, Vec<RunEvent>, Expect)> {
        use TaskState::*;
        vec![
            ("an empty log: every task pending", vec![], NOTHING),
            (
                "a started run is at its base",
                vec![started()],
                Expect {
                    tip: Some(BASE),
                    ..NOTHING
                },
            ),
            (
                "an attempt in flight holds its claims",
                vec![started(), attempt(A, 1)],
                Expect {
                    tip: Some(BASE),
                    held: &[A],
                    tasks: &[(A, Running, 1, &[]), (B, Pending, 0, &[])],
                    ..NOTHING
                },
            ),
            (
                "failures accumulate the do-not-retry list; an integration moves the tip",
                vec![
                    started(),
                    attempt(A, 1),
                    failed(A, 1, &["[check] e1"]),
                    released(A, 1),
                    attempt(A, 2),
                    failed(A, 2, &["[check] e1", "[check] e2"]),
                    released(A, 2),
                    attempt(A, 3),
                    passed(A, 3, C1),
                    released(A, 3),
                    integrated(A, M1),
                ],
                Expect {
                    tip: Some(M1),
                    tasks: &[
                        (A, Succeeded, 3, &["[check] e1", "[check] e2"]),
                        (B, Pending, 0, &[]),
                    ],
                    ..NOTHING
                },
            ),
            (
                "a spent budget fails the task and blocks its dependents",
                vec![
                    started(),
                    attempt(A, 1),
                    failed(A, 1, &["[check] e1"]),
                    released(A, 1),
                    RunEvent::TaskFailed {
                        task: A.into(),
                        reason: "failed 1 attempt(s); last: attempt 1 failed".into(),
                    },
                    RunEvent::TaskBlocked {
                        task: B.into(),
                        by: A.into(),
                    },
                ],
                Expect {
                    tip: Some(BASE),
                    ended_badly: &[
                        (A, "failed 1 attempt(s); last: attempt 1 failed"),
                        (B, "blocked by p:A"),
                    ],
                    tasks: &[(A, Failed, 1, &["[check] e1"]), (B, Blocked, 0, &[])],
                    ..NOTHING
                },
            ),
            (
                "a resume abandons attempts in flight and releases their claims",
                vec![
                    started(),
                    attempt(A, 1),
                    RunEvent::RunResumed {
                        abandoned: vec![A.into()],
                    },
                    released(A, 1),
                ],
                Expect {
                    tip: Some(BASE),
                    tasks: &[(A, Pending, 1, &[]), (B, Pending, 0, &[])],
                    ..NOTHING
                },
            ),
        ]
    }

    /// Cases of integration, golden paths, finishing and resuming.
    fn later_cases() -> Vec<(&'static str, Vec<RunEvent>, Expect)> {
        use TaskState::*;
        vec![
            (
                "a passed attempt a crash kept from integration awaits it",
                vec![started(), attempt(A, 1), passed(A, 1, C1), released(A, 1)],
                Expect {
                    tip: Some(BASE),
                    awaiting: &[(A, Some(C1))],
                    tasks: &[(A, Pending, 1, &[]), (B, Pending, 0, &[])],
                    ..NOTHING
                },
            ),
            (
                "an attempt that changed nothing passes without a commit",
                vec![started(), attempt(A, 1), passed(A, 1, ""), released(A, 1)],
                Expect {
                    tip: Some(BASE),
                    awaiting: &[(A, None)],
                    tasks: &[(A, Pending, 1, &[]), (B, Pending, 0, &[])],
                    ..NOTHING
                },
            ),
            (
                "first-attempt successes become golden paths by role",
                vec![
                    started(),
                    RunEvent::GoldenPath {
                        task: A.into(),
                        role: "implementer".into(),
                        example: "Task p:A".into(),
                    },
                    RunEvent::GoldenPath {
                        task: B.into(),
                        role: "implementer".into(),
                        example: "Task p:B".into(),
                    },
                ],
                Expect {
                    tip: Some(BASE),
                    golden: &[("implementer", "Task p:A"), ("implementer", "Task p:B")],
                    ..NOTHING
                },
            ),
            (
                "an integration naming no commit leaves the tip",
                vec![started(), integrated(A, "not a commit")],
                Expect {
                    tip: Some(BASE),
                    tasks: &[(A, Succeeded, 0, &[]), (B, Pending, 0, &[])],
                    ..NOTHING
                },
            ),
            (
                "a finished run that is resumed is unfinished again",
                vec![
                    started(),
                    RunEvent::RunFinished {
                        succeeded: 0,
                        failed: 0,
                        blocked: 0,
                        skipped: 0,
                    },
                    RunEvent::RunResumed { abandoned: vec![] },
                ],
                Expect {
                    tip: Some(BASE),
                    ..NOTHING
                },
            ),
            (
                "a finished run",
                vec![
                    started(),
                    RunEvent::RunFinished {
                        succeeded: 0,
                        failed: 0,
                        blocked: 0,
                        skipped: 0,
                    },
                ],
                Expect {
                    tip: Some(BASE),
                    finished: true,
                    ..NOTHING
                },
            ),
            (
                "events about tasks outside the plans change only the claims held",
                vec![
                    started(),
                    attempt("q:X", 4),
                    passed("q:X", 4, C1),
                    integrated("q:X", M1),
                ],
                Expect {
                    tip: Some(M1),
                    held: &["q:X"],
                    ..NOTHING
                },
            ),
        ]
    }

    #[test]
    fn logs_fold_to_the_state_the_conductor_decides_by() {
        for (name, events, want) in cases() {
            let s = RunState::fold(&log(events), &tasks());
            assert_eq!(s.tip.as_deref(), want.tip, "{name}: tip");
            assert_eq!(s.finished, want.finished, "{name}: finished");
            assert_eq!(
                s.held.keys().map(String::as_str).collect::<Vec<_>>(),
                want.held,
                "{name}: held"
            );
            let golden: Vec<(&str, &str)> = s
                .golden
                .iter()
                .flat_map(|(role, g)| g.iter().map(move |e| (role.as_str(), e.as_str())))
                .collect();
            assert_eq!(golden, want.golden, "{name}: golden");
            let badly = s.ended_badly();
            let badly: Vec<(&str, &str)> = badly
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            assert_eq!(badly, want.ended_badly, "{name}: ended badly");
            let awaiting = s.awaiting_integration();
            let awaiting: Vec<(&str, Option<&str>)> = awaiting
                .iter()
                .map(|(k, c)| (k.as_str(), c.as_deref()))
                .collect();
            assert_eq!(awaiting, want.awaiting, "{name}: awaiting integration");
            let got: Vec<(&str, TaskState, u32, Vec<&str>)> = s
                .tasks
                .iter()
                .map(|(k, v)| {
                    let memory = v.do_not_retry.iter().map(String::as_str).collect();
                    (k.as_str(), v.state, v.attempt, memory)
                })
                .collect();
            let want: Vec<(&str, TaskState, u32, Vec<&str>)> = want
                .tasks
                .iter()
                .map(|(k, st, a, m)| (*k, *st, *a, m.to_vec()))
                .collect();
            assert_eq!(got, want, "{name}: tasks");
        }
    }

    /// A log with a crash in it, as a fresh run and its resume write it.
    fn a_run() -> Vec<Record> {
        log(vec![
            started(),
            attempt(A, 1),
            failed(A, 1, &["[check] e1"]),
            released(A, 1),
            attempt(A, 2),
            RunEvent::RunResumed {
                abandoned: vec![A.into()],
            },
            released(A, 2),
            attempt(A, 3),
            passed(A, 3, C1),
            RunEvent::GoldenPath {
                task: A.into(),
                role: "implementer".into(),
                example: "Task p:A".into(),
            },
            released(A, 3),
            integrated(A, M1),
            attempt(B, 1),
            failed(B, 1, &["[check] e2"]),
            released(B, 1),
            RunEvent::TaskFailed {
                task: B.into(),
                reason: "failed 1 attempt(s)".into(),
            },
            RunEvent::RunFinished {
                succeeded: 1,
                failed: 1,
                blocked: 0,
                skipped: 0,
            },
        ])
    }

    #[test]
    fn a_prefix_folded_then_the_rest_applied_equals_the_whole_fold() {
        // `run --resume` folds the log so far and applies what it writes next.
        let records = a_run();
        let whole = RunState::fold(&records, &tasks());
        for cut in 0..=records.len() {
            let mut s = RunState::fold(&records[..cut], &tasks());
            for r in &records[cut..] {
                s.apply(r);
            }
            assert_eq!(s, whole, "cut after {cut} records");
        }
    }

    #[test]
    fn what_a_sink_writes_folds_back_to_the_state_it_was_applied_to() {
        // The conductor applies each record `emit` returns; `status` and `--resume` fold the file.
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("events.jsonl");
        let mut sink = Sink::open(&path).expect("sink");
        let mut live = RunState::fold(&read(&path).expect("empty log"), &tasks());
        for r in a_run() {
            let written = sink.emit(r.event, 1_700_000_000).expect("emit");
            live.apply(&written);
        }
        assert_eq!(RunState::fold(&read(&path).expect("log"), &tasks()), live);
        assert_eq!(RunState::of_log(&read(&path).expect("log")), live);
    }
}
