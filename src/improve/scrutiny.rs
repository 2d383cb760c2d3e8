//! The scrutiny validator: after a run, before its change becomes a proposal, checks what the
//! run's own records and the repository say, independently of the conductor that ran it:
//! - every task succeeded, and at the attempt that passed, each of its contract checks (one per
//!   criterion group) and every gauntlet step the run recorded ran and passed;
//! - no check or gauntlet step *executes* a file the run changed (a script that a worker
//!   edits can be made to pass);
//! - the built-in reviewers of the panel at the run's base (reused, not duplicated: scope
//!   against the tasks' claims, tests-tamper, judge-tamper, secrets, deps, size) find nothing
//!   blocking in the run's change, judged as an agent's.
//!
//! It sees the plans, the events and the change: never a worker's prompt or transcript.
//! `judge` is the pure part; `scrutinize` reads a run.

use std::collections::{BTreeMap, BTreeSet};

use git2::Oid;
use serde::Serialize;

use crate::governance::review::surface::Lookup;
use crate::governance::review::{critic, Finding, Severity, Verdict};
use crate::swarm::events::{self, Record, RunEvent};
use crate::swarm::executes::executed;
use crate::swarm::plan::Task;
use crate::workflow::error::{Context, Result};
use crate::workflow::Workspace;

/// The scrutiny validator's name on its findings.
pub const NAME: &str = "scrutiny";

/// A criterion's evidence: the check that stands for it and the attempt it passed at; or a
/// gauntlet step's record at that attempt (`kind`: `check` or `gauntlet step`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Evidence {
    pub task: String,
    pub check: String,
    pub passed_at: Option<u32>,
    pub kind: &'static str,
}

/// What the scrutiny validator found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Scrutiny {
    pub run: String,
    pub verdict: Verdict,
    pub evidence: Vec<Evidence>,
    pub findings: Vec<Finding>,
}

impl Scrutiny {
    pub fn passed(&self) -> bool {
        self.verdict != Verdict::Block
    }
}

fn blocking(category: &str, file: Option<&str>, message: String, hint: &str) -> Finding {
    Finding {
        reviewer: NAME.into(),
        severity: Severity::Blocking,
        category: category.into(),
        file: file.map(String::from),
        line: None,
        message,
        hint: hint.into(),
    }
}

/// Judges a run from its records, its tasks and the files it changed that existed at its
/// base (a file a task adds is its deliverable, and a check running it runs the work; a file
/// it modifies may be what judges it). The built-in reviewers' findings are added by the caller.
pub fn judge(
    records: &[Record],
    tasks: &BTreeMap<String, Task>,
    gauntlet: &[(String, String)],
    changed: &BTreeSet<String>,
    lookup: Lookup,
) -> (Vec<Evidence>, Vec<Finding>) {
    let state = events::RunState::of_log(records);
    let mut evidence = Vec::new();
    let mut findings = Vec::new();
    let passed_steps = |task: &str, attempt: u32| -> BTreeSet<String> {
        records
            .iter()
            .filter_map(|r| match &r.event {
                RunEvent::StepFinished {
                    task: t,
                    attempt: a,
                    step,
                    passed: true,
                    ..
                } if t == task && *a == attempt => Some(step.clone()),
                _ => None,
            })
            .collect()
    };
    for (key, task) in tasks {
        let view = state.tasks.get(key);
        let passed_at = view.and_then(|v| v.passed.as_ref()).map(|p| p.attempt);
        let succeeded = view.is_some_and(|v| v.state == events::TaskState::Succeeded);
        if !succeeded {
            findings.push(blocking(
                "task-not-done",
                None,
                format!("task {key} did not succeed in this run"),
                "only a run whose every task succeeded becomes a proposal",
            ));
        }
        let ran = passed_at.map(|a| passed_steps(key, a)).unwrap_or_default();
        for (i, check) in task.contract.checks.iter().enumerate() {
            let ok = ran.contains(&format!("check {}", i + 1));
            evidence.push(Evidence {
                task: key.clone(),
                check: check.clone(),
                passed_at: passed_at.filter(|_| ok),
                kind: "check",
            });
            if succeeded && !ok {
                findings.push(blocking(
                    "criterion-unchecked",
                    None,
                    format!(
                        "task {key}: its check `{check}` has no record of running and passing at the attempt that passed ({})",
                        passed_at.map_or("none".into(), |a| format!("attempt {a}"))
                    ),
                    "a criterion counts only with a check that ran and passed in the recorded events; run it again",
                ));
            }
        }
        for (step, _) in gauntlet {
            evidence.push(Evidence {
                task: key.clone(),
                check: step.clone(),
                passed_at: passed_at.filter(|_| ran.contains(step)),
                kind: "gauntlet step",
            });
            if succeeded && !ran.contains(step) {
                findings.push(blocking(
                    "gauntlet-unchecked",
                    None,
                    format!("task {key}: gauntlet step {step} has no record of passing at the attempt that passed"),
                    "every gauntlet step must run and pass for every task; run it again",
                ));
            }
        }
    }
    let commands = tasks
        .iter()
        .flat_map(|(k, t)| {
            t.contract
                .checks
                .iter()
                .map(move |c| (format!("task {k}'s check"), c.clone(), false))
        })
        .chain(
            gauntlet
                .iter()
                .map(|(n, r)| (format!("gauntlet step {n}"), r.clone(), true)),
        );
    for (what, command, step) in commands {
        let reach = crate::swarm::executes::Reach {
            files: changed.iter().cloned().collect(),
            ..crate::swarm::executes::Reach::none()
        };
        let runs: BTreeSet<String> = executed(&command, step, lookup)
            .into_iter()
            .flat_map(|(f, _)| reach.files_for(&f))
            .collect();
        for file in &runs {
            findings.push(blocking(
                "check-edited",
                Some(file),
                format!("{what} `{command}` runs {file}, which the run changed: a check a worker can edit can be made to pass"),
                "keep what checks run out of the tasks' claims (or change it in a proposal of its own)",
            ));
        }
    }
    (evidence, findings)
}

/// Scrutinises a finished run: its saved plans, its events, and its change from the base it
/// started at to the run branch's recorded tip, with the built-in reviewers at that base.
pub fn scrutinize(ws: &Workspace, run: &str) -> Result<Scrutiny> {
    let dir = crate::swarm::paths::run_dir(&ws.atelier_dir(), run);
    let records = events::read(&dir.join("events.jsonl"))?;
    let state = events::RunState::of_log(&records);
    let (base, gauntlet) = {
        let base = records
            .iter()
            .find_map(|r| match &r.event {
                RunEvent::RunStarted { base, .. } => Some(base.clone()),
                _ => None,
            })
            .context("the run has no run-started event")?;
        let steps: Vec<(String, String)> = ws
            .config
            .gauntlet
            .steps
            .iter()
            .map(|s| (s.name.clone(), s.run.clone()))
            .collect();
        // The steps the run recorded in force, when it recorded them.
        let recorded: Option<Vec<String>> = records.iter().rev().find_map(|r| match &r.event {
            RunEvent::Settings { steps, .. } => {
                Some(steps.iter().map(|s| s.name.clone()).collect())
            }
            _ => None,
        });
        let steps = match recorded {
            Some(names) => names
                .into_iter()
                .map(|n| {
                    let run = steps
                        .iter()
                        .find(|(s, _)| *s == n)
                        .map(|(_, r)| r.clone())
                        .unwrap_or_default();
                    (n, run)
                })
                .collect(),
            None => steps,
        };
        (base, steps)
    };
    let mut tasks = BTreeMap::new();
    let mut names: Vec<_> = std::fs::read_dir(dir.join("plans"))
        .with_context(|| format!("reading run {run}'s plans"))?
        .flatten()
        .map(|e| e.path())
        .collect();
    names.sort();
    for p in names {
        let text = std::fs::read_to_string(&p)?;
        for t in crate::swarm::plan::parse(&p.display().to_string(), &text)?.tasks {
            tasks.insert(t.key.clone(), t);
        }
    }
    let repo = &ws.repo;
    let base = Oid::from_str(&base)?;
    let tip = state
        .tip
        .as_deref()
        .and_then(|t| Oid::from_str(t).ok())
        .unwrap_or(base);
    let base_tree = repo.find_commit(base)?.tree()?;
    let files = crate::panel::changed_files(repo, &base_tree, &repo.find_commit(tip)?.tree()?)?;
    let modified: BTreeSet<String> = files
        .iter()
        .filter(|f| f.base.is_some())
        .map(|f| f.path.clone())
        .collect();
    let at_base = |path: &str| {
        let bytes = crate::git::read_file(repo, &base_tree, path)
            .ok()
            .flatten()?;
        String::from_utf8(bytes).ok()
    };
    let (evidence, mut findings) = judge(&records, &tasks, &gauntlet, &modified, &at_base);
    let claims: Vec<String> = tasks
        .values()
        .flat_map(|t| t.files.iter().cloned())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let panel = crate::panel::at(repo, &base_tree)?;
    let input = crate::panel::weigh(
        &panel,
        &crate::panel::surface(repo, &base_tree, &files)?,
        &files,
        &crate::panel::Provenance {
            origin: Some(format!("swarm run {run}")),
            declared: Some(claims),
        },
        None,
    );
    findings.extend(input.builtin);
    Ok(Scrutiny {
        run: run.to_string(),
        verdict: critic(&findings),
        evidence,
        findings,
    })
}
