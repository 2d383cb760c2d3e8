//! Operators' control requests: `atelier control pause|resume|stop|retry|skip` writes a request
//! into the run's `control/` directory; the conductor takes each one once, oldest first,
//! decides whether it applies now (`refusal`, pure, from the run's state) and records it as a
//! `control` event, applied or with why not. What an applied request changes is the fold's
//! (`events::RunState::apply`); a `stop` also ends the conductor's loop (`Flow::Stop`).
//!
//! Talks to the conductor (`emit`), the run's directory and `events`.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{run_dir, Conductor};
use crate::swarm::events::{RunEvent, RunState, TaskState};
use crate::workflow::error::Result;

/// Where operators' controls wait for the conductor, in the run's directory.
pub const CONTROL_DIR: &str = "control";

/// The most characters of `by` a control event keeps.
const MAX_BY: usize = 120;

/// One operator's control, as `atelier control` writes it.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct ControlRequest {
    pub action: String,
    #[serde(default)]
    pub task: Option<String>,
    pub by: String,
}

/// Whether the conductor goes on after the controls it took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Flow {
    Go,
    Stop,
}

/// A control request: a regular file of at most 64 KiB, opened without following a link or
/// waiting on a FIFO; `None` for anything else.
fn read_control(path: &Path) -> Option<ControlRequest> {
    let bytes = crate::fsutil::read_small_file(path, 64 * 1024)?;
    serde_json::from_slice(&bytes).ok()
}

/// The requests waiting in `dir`, oldest (by name) first.
fn waiting(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
}

/// Who asked, as operators' terminals show it: printable text only, and not much of it.
fn printable(by: &str) -> String {
    by.chars()
        .filter(|ch| !ch.is_control())
        .take(MAX_BY)
        .collect()
}

/// Why control `c` cannot apply to a run in `state` now, if it cannot.
pub(super) fn refusal(state: &RunState, c: &ControlRequest) -> Option<String> {
    if state.finished {
        return Some("the run had finished".into());
    }
    let task = || -> Result<(String, TaskState), String> {
        let t = c.task.clone().ok_or("it names no task")?;
        match state.tasks.get(&t) {
            Some(v) => Ok((t, v.state)),
            None => Err(format!("the run has no task `{t}`")),
        }
    };
    match c.action.as_str() {
        "pause" if state.paused => Some("already paused".into()),
        "resume" if !state.paused => Some("not paused".into()),
        "pause" | "resume" | "stop" => None,
        "retry" => match task() {
            Err(e) => Some(e),
            Ok((t, s)) if s != TaskState::Failed => {
                Some(format!("`{t}` has not failed (it is {s:?})"))
            }
            Ok(_) => None,
        },
        "skip" => match task() {
            Err(e) => Some(e),
            Ok((t, s))
                if matches!(
                    s,
                    TaskState::Running | TaskState::Succeeded | TaskState::Skipped
                ) =>
            {
                Some(format!(
                    "`{t}` is {s:?}: only a pending, failed or blocked task is skipped"
                ))
            }
            Ok(_) => None,
        },
        other => Some(format!("unknown control `{other}`")),
    }
}

impl<'a> Conductor<'a> {
    /// Applies the operators' controls waiting in the run's `control/` directory, oldest
    /// first, each recorded as a `control` event (applied, or why not) and then removed.
    pub(super) fn take_controls(&mut self) -> Result<Flow> {
        let mut flow = Flow::Go;
        for f in waiting(&run_dir(self.ws, &self.run).join(CONTROL_DIR)) {
            let request = read_control(&f);
            // Taken once: a request that cannot be removed is not applied (it would be again at
            // every look).
            if std::fs::remove_file(&f).is_err() {
                continue;
            }
            let Some(mut c) = request else {
                continue;
            };
            c.by = printable(&c.by);
            let refused = refusal(&self.state, &c);
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(action: &str, task: Option<&str>) -> ControlRequest {
        ControlRequest {
            action: action.into(),
            task: task.map(str::to_string),
            by: "alice".into(),
        }
    }

    /// A run of `p:A` (failed), `p:B` (running), `p:C` (pending) and `p:D` (succeeded).
    fn state() -> RunState {
        let keys: Vec<String> = ["p:A", "p:B", "p:C", "p:D"].map(String::from).to_vec();
        let mut s = RunState::new(&keys);
        for (k, st) in [
            ("p:A", TaskState::Failed),
            ("p:B", TaskState::Running),
            ("p:D", TaskState::Succeeded),
        ] {
            s.tasks.get_mut(k).expect("a task of the run").state = st;
        }
        s
    }

    #[test]
    fn pause_and_resume_apply_only_when_they_change_something() {
        let mut s = state();
        assert_eq!(refusal(&s, &request("pause", None)), None);
        assert_eq!(
            refusal(&s, &request("resume", None)).as_deref(),
            Some("not paused")
        );
        s.paused = true;
        assert_eq!(
            refusal(&s, &request("pause", None)).as_deref(),
            Some("already paused")
        );
        assert_eq!(refusal(&s, &request("resume", None)), None);
        assert_eq!(
            refusal(&s, &request("stop", None)),
            None,
            "stop applies paused or not"
        );
    }

    #[test]
    fn retry_applies_to_a_failed_task_only() {
        let s = state();
        assert_eq!(refusal(&s, &request("retry", Some("p:A"))), None);
        assert_eq!(
            refusal(&s, &request("retry", Some("p:C"))).as_deref(),
            Some("`p:C` has not failed (it is Pending)")
        );
        assert_eq!(
            refusal(&s, &request("retry", None)).as_deref(),
            Some("it names no task")
        );
        assert_eq!(
            refusal(&s, &request("retry", Some("p:Z"))).as_deref(),
            Some("the run has no task `p:Z`")
        );
    }

    #[test]
    fn skip_applies_to_a_pending_failed_or_blocked_task() {
        let mut s = state();
        s.tasks.get_mut("p:C").expect("p:C").state = TaskState::Blocked;
        for ok in ["p:A", "p:C"] {
            assert_eq!(refusal(&s, &request("skip", Some(ok))), None, "{ok}");
        }
        for (refused, is) in [("p:B", "Running"), ("p:D", "Succeeded")] {
            assert_eq!(
                refusal(&s, &request("skip", Some(refused))),
                Some(format!(
                    "`{refused}` is {is}: only a pending, failed or blocked task is skipped"
                ))
            );
        }
    }

    #[test]
    fn nothing_applies_to_a_finished_run_and_unknown_actions_never_do() {
        let mut s = state();
        assert_eq!(
            refusal(&s, &request("abort", None)).as_deref(),
            Some("unknown control `abort`")
        );
        s.finished = true;
        for action in ["pause", "stop", "retry", "abort"] {
            assert_eq!(
                refusal(&s, &request(action, Some("p:A"))).as_deref(),
                Some("the run had finished"),
                "{action}"
            );
        }
    }

    #[test]
    fn who_asked_is_kept_printable_and_short() {
        assert_eq!(printable("bob\u{1b}[31m\n"), "bob[31m");
        assert_eq!(printable(&"x".repeat(500)).len(), MAX_BY);
    }

    #[test]
    fn requests_are_taken_oldest_first_and_only_json_files_that_parse() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        for (name, text) in [
            ("002.json", r#"{"action":"resume","by":"b"}"#),
            ("001.json", r#"{"action":"pause","by":"a"}"#),
            ("003.txt", r#"{"action":"stop","by":"c"}"#),
            ("004.json", "not json"),
        ] {
            std::fs::write(dir.path().join(name), text).expect("write a request");
        }
        let files = waiting(dir.path());
        let names: Vec<String> = files
            .iter()
            .map(|f| {
                f.file_name()
                    .expect("a name")
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        assert_eq!(names, ["001.json", "002.json", "004.json"]);
        let actions: Vec<Option<String>> = files
            .iter()
            .map(|f| read_control(f).map(|c| c.action))
            .collect();
        assert_eq!(actions, [Some("pause".into()), Some("resume".into()), None]);
        assert!(waiting(&dir.path().join("missing")).is_empty());
    }
}
