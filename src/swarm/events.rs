//! The run's event stream: every state change of a run is a typed event appended to
//! `.atelier/runs/<run-id>/events.jsonl` and fsynced before the action it records is relied on.
//! A run's state is a fold over its events (`RunState::fold`).

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;

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
    },
    Nudged {
        task: String,
        attempt: u32,
        silent_secs: u64,
    },
    Restarted {
        task: String,
        attempt: u32,
        silent_secs: u64,
    },
    WorkerExited {
        task: String,
        attempt: u32,
        code: Option<i32>,
        output_bytes: u64,
        truncated: bool,
    },
    StepFinished {
        task: String,
        attempt: u32,
        step: String,
        passed: bool,
        secs: u64,
    },
    AttemptFailed {
        task: String,
        attempt: u32,
        reason: String,
        digest: Vec<String>,
    },
    /// The attempt passed; its commit is integrated next.
    AttemptPassed {
        task: String,
        attempt: u32,
        commit: String,
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
    RunFinished {
        succeeded: usize,
        failed: usize,
        blocked: usize,
    },
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
}

/// One task as the events tell it.
#[derive(Debug, Clone, Serialize)]
pub struct TaskView {
    pub state: TaskState,
    pub attempt: u32,
    pub claims: Vec<String>,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    pub last_step: Option<String>,
    pub last_failure: Option<String>,
    pub nudges: u32,
    pub restarts: u32,
    pub prompt_bytes: Vec<usize>,
}

/// A run's state: a fold over its events.
#[derive(Debug, Clone, Serialize, Default)]
pub struct RunState {
    pub run: String,
    pub branch: String,
    pub finished: bool,
    pub tasks: BTreeMap<String, TaskView>,
    /// Tasks holding claims right now, with the claims.
    pub held: BTreeMap<String, Vec<String>>,
    pub waves: Vec<Vec<String>>,
}

impl RunState {
    pub fn fold(records: &[Record], tasks: &[String]) -> RunState {
        let mut s = RunState::default();
        for t in tasks {
            s.tasks.insert(
                t.clone(),
                TaskView {
                    state: TaskState::Pending,
                    attempt: 0,
                    claims: Vec::new(),
                    started_at: None,
                    finished_at: None,
                    last_step: None,
                    last_failure: None,
                    nudges: 0,
                    restarts: 0,
                    prompt_bytes: Vec::new(),
                },
            );
        }
        for r in records {
            match &r.event {
                RunEvent::RunStarted {
                    run, branch, waves, ..
                } => {
                    s.run = run.clone();
                    s.branch = branch.clone();
                    s.waves = waves.clone();
                }
                RunEvent::AttemptStarted {
                    task,
                    attempt,
                    claims,
                    prompt_bytes,
                    ..
                } => {
                    s.held.insert(task.clone(), claims.clone());
                    if let Some(v) = s.tasks.get_mut(task) {
                        v.state = TaskState::Running;
                        v.attempt = *attempt;
                        v.claims = claims.clone();
                        v.started_at.get_or_insert_with(|| r.at.clone());
                        v.prompt_bytes.push(*prompt_bytes);
                    }
                }
                RunEvent::Nudged { task, .. } => {
                    if let Some(v) = s.tasks.get_mut(task) {
                        v.nudges += 1;
                    }
                }
                RunEvent::Restarted { task, .. } => {
                    if let Some(v) = s.tasks.get_mut(task) {
                        v.restarts += 1;
                    }
                }
                RunEvent::StepFinished {
                    task, step, passed, ..
                } => {
                    if let Some(v) = s.tasks.get_mut(task) {
                        v.last_step = Some(format!(
                            "{step}: {}",
                            if *passed { "passed" } else { "failed" }
                        ));
                    }
                }
                RunEvent::AttemptFailed { task, reason, .. } => {
                    if let Some(v) = s.tasks.get_mut(task) {
                        v.last_failure = Some(reason.clone());
                    }
                }
                RunEvent::ClaimsReleased { task, .. } => {
                    s.held.remove(task);
                    if let Some(v) = s.tasks.get_mut(task) {
                        if v.state == TaskState::Running {
                            v.state = TaskState::Pending;
                        }
                    }
                }
                RunEvent::Integrated { task, .. } => {
                    if let Some(v) = s.tasks.get_mut(task) {
                        v.state = TaskState::Succeeded;
                        v.finished_at = Some(r.at.clone());
                    }
                }
                RunEvent::TaskFailed { task, reason } => {
                    if let Some(v) = s.tasks.get_mut(task) {
                        v.state = TaskState::Failed;
                        v.last_failure = Some(reason.clone());
                        v.finished_at = Some(r.at.clone());
                    }
                }
                RunEvent::TaskBlocked { task, by } => {
                    if let Some(v) = s.tasks.get_mut(task) {
                        v.state = TaskState::Blocked;
                        v.last_failure = Some(format!("blocked by {by}"));
                    }
                }
                RunEvent::RunFinished { .. } => s.finished = true,
                RunEvent::RunResumed { abandoned } => {
                    for t in abandoned {
                        s.held.remove(t);
                        if let Some(v) = s.tasks.get_mut(t) {
                            v.state = TaskState::Pending;
                        }
                    }
                    s.finished = false;
                }
                RunEvent::WorkerExited { .. }
                | RunEvent::AttemptPassed { .. }
                | RunEvent::GoldenPath { .. } => {}
            }
        }
        s
    }

    pub fn completed(&self) -> BTreeSet<String> {
        self.tasks
            .iter()
            .filter(|(_, v)| v.state == TaskState::Succeeded)
            .map(|(k, _)| k.clone())
            .collect()
    }
}
