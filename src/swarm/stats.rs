//! What the runs measured, across runs: `atelier stats`. A pure fold over run logs (the
//! records and, for logs older than the `role` field, each task's role from the run's saved
//! plans); `load` reads them from `.atelier/runs/`.
//!
//! Definitions, per role:
//! - an attempt *finished* when `attempt-passed` or `attempt-failed` names it (attempts a crash
//!   abandoned have neither and are not counted);
//! - the attempt-success curve: at attempt k, `started` counts the tasks whose attempt k
//!   finished, `passed` those it passed, `p_pass = passed / started` (P(pass at attempt k));
//!   `passed_by` is the share of the role's tasks (those with a finished attempt) that passed
//!   at attempt k or earlier;
//! - a *wasted* attempt is a failed one, whatever became of its task;
//! - silences are the `quiet` events, grouped by what ended them (`output`, `restart`, `exit`,
//!   `timeout`); `output_then_passed` are those output ended in attempts that then passed:
//!   silences a worker came back from to succeed, what a restart threshold must not cut short.
//!
//! Percentiles are nearest-rank over the recorded values; durations are milliseconds (older
//! logs recorded steps in whole seconds, counted here as that many thousand milliseconds).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::Serialize;

use super::events::{self, QuietEnd, Record, RunEvent};
use crate::agent::clients::Usage;

/// A run's log as `stats` reads it.
#[derive(Debug, Clone)]
pub struct RunLog {
    pub id: String,
    pub records: Vec<Record>,
    /// Each task's role from the run's saved plans: the fallback for logs whose
    /// `attempt-started` events carry no role.
    pub plan_roles: BTreeMap<String, String>,
}

/// Count, nearest-rank median and 90th percentile, and maximum of some values.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Dist {
    pub count: usize,
    pub p50: u64,
    pub p90: u64,
    pub max: u64,
    pub total: u64,
}

impl Dist {
    pub fn of(values: &[u64]) -> Dist {
        if values.is_empty() {
            return Dist::default();
        }
        let mut v = values.to_vec();
        v.sort_unstable();
        Dist {
            count: v.len(),
            p50: percentile(&v, 50),
            p90: percentile(&v, 90),
            max: *v.last().expect("not empty"),
            total: v.iter().fold(0u64, |a, b| a.saturating_add(*b)),
        }
    }
}

/// The nearest-rank `p`th percentile of sorted, non-empty `v`.
pub fn percentile(v: &[u64], p: usize) -> u64 {
    let rank = (p * v.len()).div_ceil(100).max(1);
    v[rank - 1]
}

/// One point of the attempt-success curve.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CurvePoint {
    pub attempt: u32,
    pub started: usize,
    pub passed: usize,
    pub p_pass: f64,
    pub passed_by: f64,
}

/// Silences that one cause ended.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Silences {
    pub output: Dist,
    pub output_then_passed: Dist,
    pub restart: Dist,
    /// Silences the worker's exit ended, in attempts that then passed: it needed that long.
    pub exit_then_passed: Dist,
    pub exit: Dist,
    pub timeout: Dist,
    /// How many reached the nudge threshold.
    pub nudged: usize,
    /// Every silence measured (ms, ascending), by what ended it (the keys above): the
    /// dashboard plots their distributions.
    pub samples: BTreeMap<String, Vec<u64>>,
}

/// What one role's attempts measured.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RoleStats {
    /// The backends the role ran with (more than one when it changed between runs).
    pub backends: BTreeSet<String>,
    /// Tasks with at least one finished attempt, and how they ended.
    pub tasks: usize,
    pub succeeded: usize,
    pub failed: usize,
    pub attempts: usize,
    pub wasted_attempts: usize,
    /// Time spent in wasted attempts (ms; those that recorded it).
    pub wasted_ms: u64,
    pub curve: Vec<CurvePoint>,
    pub attempt_ms: Dist,
    pub passed_attempt_ms: Dist,
    pub worker_ms: Dist,
    pub silences: Silences,
    pub nudges: usize,
    pub restarts: usize,
    pub prompt_bytes: Dist,
    /// The tokens its workers reported (`spent`), over all its attempts.
    pub spent: Usage,
}

/// One gauntlet step (or contract checks, together as `checks`) across attempts.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct StepStats {
    pub passed: usize,
    pub failed: usize,
    pub ms: Dist,
}

/// The settings a run recorded (its latest `settings` event).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunSettings {
    pub nudge_after_ms: u64,
    pub restart_after_ms: u64,
    pub attempt_timeout_ms: u64,
    pub failure_budget: u32,
    pub max_parallel: usize,
}

/// One run as `stats` saw it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunInfo {
    pub run: String,
    pub finished: bool,
    pub tasks: usize,
    pub attempts: usize,
    /// `None` for logs written before settings were recorded.
    pub settings: Option<RunSettings>,
    /// The most attempts in flight at once.
    pub peak_parallel: usize,
    /// The tokens its workers reported (`spent`).
    pub spent: Usage,
}

/// Everything `atelier stats` reports.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Stats {
    pub runs: Vec<RunInfo>,
    pub roles: BTreeMap<String, RoleStats>,
    pub steps: BTreeMap<String, StepStats>,
}

/// The role name of attempts whose role neither the log nor the saved plans tell.
pub const UNKNOWN_ROLE: &str = "(unknown)";

/// One finished attempt, gathered from its events.
#[derive(Default)]
struct Attempt {
    role: Option<String>,
    backend: Option<String>,
    prompt_bytes: Option<usize>,
    passed: Option<bool>,
    ms: Option<u64>,
    worker_ms: Option<u64>,
    quiet: Vec<(u64, QuietEnd, bool)>,
    nudges: usize,
    restarts: usize,
    spent: Usage,
}

/// The step name `stats` groups by: contract checks (`check 1`, `check 2`, ...) are one group.
fn step_group(step: &str) -> &str {
    if step.starts_with("check ") {
        "checks"
    } else {
        step
    }
}

/// What one role's finished attempts measured, gathered across runs before their
/// distributions are taken.
#[derive(Default)]
struct Acc {
    attempt_ms: Vec<u64>,
    passed_ms: Vec<u64>,
    worker_ms: Vec<u64>,
    prompt: Vec<u64>,
    quiet: BTreeMap<&'static str, Vec<u64>>,
    /// Per task instance (run, task): the attempts that finished, with whether they passed.
    tasks: BTreeMap<(String, String), BTreeMap<u32, bool>>,
}

/// One run's log, read once: its attempts, its latest settings and its peak parallelism.
#[derive(Default)]
struct RunScan {
    attempts: BTreeMap<(String, u32), Attempt>,
    settings: Option<RunSettings>,
    held: BTreeSet<String>,
    peak: usize,
}

impl RunScan {
    fn attempt(&mut self, task: &str, attempt: u32) -> &mut Attempt {
        self.attempts
            .entry((task.to_string(), attempt))
            .or_default()
    }
}

/// The gauntlet's steps across runs: passed and failed counts, and their durations (ms).
#[derive(Default)]
struct StepAcc {
    stats: BTreeMap<String, StepStats>,
    ms: BTreeMap<String, Vec<u64>>,
}

/// Folds run logs (oldest first) into the statistics.
pub fn compute(runs: &[RunLog]) -> Stats {
    let mut stats = Stats::default();
    let mut steps = StepAcc::default();
    let mut acc: BTreeMap<String, Acc> = BTreeMap::new();
    for run in runs {
        let scan = scan(run, &mut steps);
        let state = events::RunState::of_log(&run.records);
        let finished_attempts = scan
            .attempts
            .values()
            .filter(|a| a.passed.is_some())
            .count();
        stats.runs.push(RunInfo {
            run: run.id.clone(),
            finished: state.finished,
            tasks: state.tasks.len(),
            attempts: finished_attempts,
            settings: scan.settings,
            peak_parallel: scan.peak,
            spent: state
                .tasks
                .values()
                .map(|t| t.spent)
                .fold(Usage::default(), |a, b| a + b),
        });
        for ((task, number), a) in scan.attempts {
            add_attempt(&mut stats.roles, &mut acc, (&run.id, task, number), a);
        }
    }
    for (role, ac) in acc {
        let rs = stats
            .roles
            .get_mut(&role)
            .expect("every accumulator has its role");
        finish_role(rs, ac);
    }
    stats.steps = steps.stats;
    for (step, ms) in steps.ms {
        if let Some(s) = stats.steps.get_mut(&step) {
            s.ms = Dist::of(&ms);
        }
    }
    stats
}

/// Reads one run's events: its attempts (each gathered from its events), settings and peak
/// parallelism; the steps' results go to `steps`.
fn scan(run: &RunLog, steps: &mut StepAcc) -> RunScan {
    let mut s = RunScan::default();
    for r in &run.records {
        match &r.event {
            RunEvent::Settings {
                nudge_after_ms,
                restart_after_ms,
                attempt_timeout_ms,
                failure_budget,
                max_parallel,
                ..
            } => {
                s.settings = Some(RunSettings {
                    nudge_after_ms: *nudge_after_ms,
                    restart_after_ms: *restart_after_ms,
                    attempt_timeout_ms: *attempt_timeout_ms,
                    failure_budget: *failure_budget,
                    max_parallel: *max_parallel,
                })
            }
            RunEvent::AttemptStarted {
                task,
                attempt,
                prompt_bytes,
                role,
                backend,
                ..
            } => {
                s.held.insert(task.clone());
                s.peak = s.peak.max(s.held.len());
                let a = s.attempt(task, *attempt);
                a.role = role.clone().or_else(|| run.plan_roles.get(task).cloned());
                a.backend = backend.clone();
                a.prompt_bytes = Some(*prompt_bytes);
            }
            RunEvent::ClaimsReleased { task, .. } => {
                s.held.remove(task);
            }
            RunEvent::Spent {
                task,
                attempt,
                usage,
                ..
            } => {
                let a = s.attempt(task, *attempt);
                a.spent = a.spent + *usage;
            }
            RunEvent::Nudged { task, attempt, .. } => s.attempt(task, *attempt).nudges += 1,
            RunEvent::Restarted { task, attempt, .. } => s.attempt(task, *attempt).restarts += 1,
            RunEvent::Quiet {
                task,
                attempt,
                ms,
                ended,
                nudged,
            } => s.attempt(task, *attempt).quiet.push((*ms, *ended, *nudged)),
            RunEvent::WorkerExited {
                task, attempt, ms, ..
            } => s.attempt(task, *attempt).worker_ms = *ms,
            RunEvent::StepFinished {
                step,
                passed,
                secs,
                ms,
                ..
            } => {
                let group = step_group(step).to_string();
                let st = steps.stats.entry(group.clone()).or_default();
                if *passed {
                    st.passed += 1;
                } else {
                    st.failed += 1;
                }
                steps
                    .ms
                    .entry(group)
                    .or_default()
                    .push(ms.unwrap_or(secs.saturating_mul(1000)));
            }
            RunEvent::AttemptPassed {
                task, attempt, ms, ..
            } => {
                let a = s.attempt(task, *attempt);
                a.passed = Some(true);
                a.ms = *ms;
            }
            RunEvent::AttemptFailed {
                task, attempt, ms, ..
            } => {
                let a = s.attempt(task, *attempt);
                a.passed = Some(false);
                a.ms = *ms;
            }
            _ => {}
        }
    }
    s
}

/// Counts one attempt (`(run, task, number)`) of a run into its role's statistics and
/// accumulator; an attempt that did not finish (a crash abandoned it) is not counted.
fn add_attempt(
    roles: &mut BTreeMap<String, RoleStats>,
    acc: &mut BTreeMap<String, Acc>,
    (run, task, number): (&str, String, u32),
    a: Attempt,
) {
    let Some(passed) = a.passed else { return };
    let role = a.role.clone().unwrap_or_else(|| UNKNOWN_ROLE.to_string());
    let rs = roles.entry(role.clone()).or_default();
    let ac = acc.entry(role).or_default();
    if let Some(b) = &a.backend {
        rs.backends.insert(b.clone());
    }
    rs.attempts += 1;
    rs.spent = rs.spent + a.spent;
    rs.nudges += a.nudges;
    rs.restarts += a.restarts;
    if !passed {
        rs.wasted_attempts += 1;
        rs.wasted_ms = rs.wasted_ms.saturating_add(a.ms.unwrap_or(0));
    }
    if let Some(ms) = a.ms {
        ac.attempt_ms.push(ms);
        if passed {
            ac.passed_ms.push(ms);
        }
    }
    ac.worker_ms.extend(a.worker_ms);
    ac.prompt.extend(a.prompt_bytes.map(|b| b as u64));
    for (ms, ended, nudged) in &a.quiet {
        ac.quiet.entry(ended.as_str()).or_default().push(*ms);
        if *ended == QuietEnd::Output && passed {
            ac.quiet.entry("output_then_passed").or_default().push(*ms);
        }
        if *ended == QuietEnd::Exit && passed {
            ac.quiet.entry("exit_then_passed").or_default().push(*ms);
        }
        if *nudged {
            rs.silences.nudged += 1;
        }
    }
    ac.tasks
        .entry((run.to_string(), task))
        .or_default()
        .insert(number, passed);
}

/// A role's distributions, tasks and curve, from what its attempts measured.
fn finish_role(rs: &mut RoleStats, ac: Acc) {
    rs.attempt_ms = Dist::of(&ac.attempt_ms);
    rs.passed_attempt_ms = Dist::of(&ac.passed_ms);
    rs.worker_ms = Dist::of(&ac.worker_ms);
    rs.prompt_bytes = Dist::of(&ac.prompt);
    let q = |k: &str| Dist::of(ac.quiet.get(k).map_or(&[][..], |v| v.as_slice()));
    rs.silences.output = q("output");
    rs.silences.output_then_passed = q("output_then_passed");
    rs.silences.restart = q("restart");
    rs.silences.exit_then_passed = q("exit_then_passed");
    rs.silences.exit = q("exit");
    rs.silences.timeout = q("timeout");
    rs.silences.samples = ac
        .quiet
        .iter()
        .map(|(k, v)| {
            let mut v = v.clone();
            v.sort_unstable();
            (k.to_string(), v)
        })
        .collect();
    rs.tasks = ac.tasks.len();
    rs.succeeded = ac.tasks.values().filter(|a| a.values().any(|p| *p)).count();
    rs.failed = rs.tasks - rs.succeeded;
    rs.curve = curve(&ac.tasks);
}

/// The attempt-success curve of tasks' finished attempts (attempt number → passed).
fn curve(tasks: &BTreeMap<(String, String), BTreeMap<u32, bool>>) -> Vec<CurvePoint> {
    let max = tasks
        .values()
        .filter_map(|a| a.keys().max())
        .max()
        .copied()
        .unwrap_or(0);
    let total = tasks.len();
    let mut out = Vec::new();
    let mut passed_so_far = 0;
    for k in 1..=max {
        let started = tasks.values().filter(|a| a.contains_key(&k)).count();
        let passed = tasks.values().filter(|a| a.get(&k) == Some(&true)).count();
        passed_so_far += passed;
        out.push(CurvePoint {
            attempt: k,
            started,
            passed,
            p_pass: ratio(passed, started),
            passed_by: ratio(passed_so_far, total),
        });
    }
    out
}

fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// The run ids under `runs_dir` (`r1`, `r2`, ...), oldest first.
pub fn run_ids(runs_dir: &Path) -> Vec<String> {
    let mut ids: Vec<u64> = std::fs::read_dir(runs_dir)
        .map(|d| {
            d.flatten()
                .filter_map(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .strip_prefix('r')
                        .and_then(|n| n.parse::<u64>().ok())
                        // Only the name atelier gives a run: `r01` or `r+1` is not run r1 again.
                        .filter(|n| e.file_name().to_str() == Some(&format!("r{n}")))
                })
                .collect()
        })
        .unwrap_or_default();
    ids.sort_unstable();
    ids.into_iter().map(|n| format!("r{n}")).collect()
}

/// Why the runs cannot be read for `stats`.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("run {since} does not exist (--since takes a run id; the runs here are {known})")]
    NoSuchRun { since: String, known: String },
    #[error(transparent)]
    Events(#[from] events::EventsError),
}

/// Reads the runs under `runs_dir` (from `since` on, by run number): each run's events and
/// its saved plans' roles. A run directory without events (a run refused before it began) is
/// skipped; a malformed log is an error naming the file and line.
pub fn load(runs_dir: &Path, since: Option<&str>) -> Result<Vec<RunLog>, LoadError> {
    let ids = run_ids(runs_dir);
    let from = match since {
        None => 0,
        Some(s) => ids
            .iter()
            .position(|i| i == s)
            .ok_or_else(|| LoadError::NoSuchRun {
                since: s.to_string(),
                known: if ids.is_empty() {
                    "none yet".to_string()
                } else {
                    ids.join(", ")
                },
            })?,
    };
    let mut out = Vec::new();
    for id in &ids[from..] {
        let dir = runs_dir.join(id);
        let path = dir.join("events.jsonl");
        if !path.exists() {
            continue;
        }
        let records = events::read(&path)?;
        out.push(RunLog {
            id: id.clone(),
            records,
            plan_roles: saved_roles(&dir.join("plans")),
        });
    }
    Ok(out)
}

/// Each task's role from a run's saved plans (best effort: a plan that no longer parses
/// gives nothing, and its attempts count under `(unknown)`).
fn saved_roles(dir: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        let Ok(text) = std::fs::read_to_string(&p) else {
            continue;
        };
        if let Ok(plan) = super::plan::parse(&p.display().to_string(), &text) {
            for t in plan.tasks {
                out.insert(t.key, t.role);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(seq: u64, event: RunEvent) -> Record {
        Record {
            seq,
            at: "2026-12-01T10:00:00Z".into(),
            event,
        }
    }

    fn started(task: &str, attempt: u32, role: Option<&str>) -> RunEvent {
        RunEvent::AttemptStarted {
            task: task.into(),
            attempt,
            claims: vec![],
            worktree: String::new(),
            prompt_bytes: 100 * attempt as usize,
            role: role.map(String::from),
            backend: role.map(|_| "command".to_string()),
        }
    }

    fn ended(task: &str, attempt: u32, passed: bool, ms: u64) -> Vec<RunEvent> {
        let outcome = if passed {
            RunEvent::AttemptPassed {
                task: task.into(),
                attempt,
                commit: String::new(),
                ms: Some(ms),
            }
        } else {
            RunEvent::AttemptFailed {
                task: task.into(),
                attempt,
                reason: "no".into(),
                digest: vec![],
                ms: Some(ms),
            }
        };
        vec![
            outcome,
            RunEvent::ClaimsReleased {
                task: task.into(),
                attempt,
            },
        ]
    }

    fn log(id: &str, events: Vec<RunEvent>) -> RunLog {
        RunLog {
            id: id.into(),
            records: events
                .into_iter()
                .enumerate()
                .map(|(i, e)| rec(i as u64, e))
                .collect(),
            plan_roles: BTreeMap::new(),
        }
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let d = Dist::of(&[5, 1, 4, 2, 3, 10, 9, 8, 7, 6]);
        assert_eq!((d.count, d.p50, d.p90, d.max, d.total), (10, 5, 9, 10, 55));
        assert_eq!(Dist::of(&[7]).p90, 7);
        assert_eq!(Dist::of(&[]), Dist::default());
        assert_eq!(percentile(&[1, 2, 3], 50), 2);
    }

    #[test]
    fn the_curve_counts_tasks_at_each_attempt() {
        // a passes at 1; b fails then passes at 2; c fails twice (budget 2).
        let mut ev = vec![started("a", 1, Some("w"))];
        ev.extend(ended("a", 1, true, 100));
        for (t, outcomes) in [("b", vec![false, true]), ("c", vec![false, false])] {
            for (i, p) in outcomes.into_iter().enumerate() {
                let k = i as u32 + 1;
                ev.push(started(t, k, Some("w")));
                ev.extend(ended(t, k, p, 1000 * k as u64));
            }
        }
        let s = compute(&[log("r1", ev)]);
        let w = &s.roles["w"];
        assert_eq!((w.tasks, w.succeeded, w.failed), (3, 2, 1));
        assert_eq!((w.attempts, w.wasted_attempts, w.wasted_ms), (5, 3, 4000));
        assert_eq!(w.curve.len(), 2);
        assert_eq!((w.curve[0].started, w.curve[0].passed), (3, 1));
        assert!((w.curve[0].p_pass - 1.0 / 3.0).abs() < 1e-9);
        assert_eq!((w.curve[1].started, w.curve[1].passed), (2, 1));
        assert!((w.curve[1].passed_by - 2.0 / 3.0).abs() < 1e-9);
        assert_eq!(w.passed_attempt_ms.max, 2000);
        assert_eq!(s.runs[0].peak_parallel, 1);
        assert_eq!(w.prompt_bytes.max, 200);
    }

    #[test]
    fn silences_are_grouped_by_what_ended_them() {
        let q = |task: &str, ms, ended, nudged| RunEvent::Quiet {
            task: task.into(),
            attempt: 1,
            ms,
            ended,
            nudged,
        };
        let mut ev = vec![
            started("a", 1, Some("w")),
            q("a", 1500, QuietEnd::Output, false),
            q("a", 4000, QuietEnd::Output, true),
            q("a", 3000, QuietEnd::Exit, true),
        ];
        ev.extend(ended("a", 1, true, 9000));
        ev.push(started("b", 1, Some("w")));
        ev.push(q("b", 6000, QuietEnd::Output, true));
        ev.push(q("b", 8000, QuietEnd::Restart, true));
        ev.extend(ended("b", 1, false, 14000));
        let s = compute(&[log("r1", ev)]);
        let si = &s.roles["w"].silences;
        assert_eq!(si.output.count, 3);
        assert_eq!(si.output_then_passed.count, 2);
        assert_eq!(si.output_then_passed.max, 4000);
        assert_eq!((si.restart.count, si.restart.max), (1, 8000));
        assert_eq!(si.exit.count, 1);
        assert_eq!(si.nudged, 4);
    }

    #[test]
    fn old_logs_take_roles_from_the_saved_plans_and_steps_in_seconds() {
        let mut ev = vec![
            started("p:a", 1, None),
            RunEvent::StepFinished {
                task: "p:a".into(),
                attempt: 1,
                step: "check 2".into(),
                passed: true,
                secs: 3,
                ms: None,
            },
        ];
        ev.extend(ended("p:a", 1, true, 5));
        ev.push(started("p:b", 1, None));
        ev.extend(ended("p:b", 1, true, 5));
        let mut run = log("r1", ev);
        run.plan_roles.insert("p:a".into(), "writer".into());
        let s = compute(&[run]);
        assert_eq!(s.roles["writer"].attempts, 1);
        assert_eq!(s.roles[UNKNOWN_ROLE].attempts, 1);
        assert_eq!(s.steps["checks"].ms.max, 3000);
        assert!(s.runs[0].settings.is_none());
    }

    #[test]
    fn abandoned_attempts_are_not_counted() {
        let ev = vec![
            started("a", 1, Some("w")),
            RunEvent::RunResumed {
                abandoned: vec!["a".into()],
            },
        ];
        let s = compute(&[log("r1", ev)]);
        assert!(s.roles.is_empty());
        assert_eq!(s.runs[0].attempts, 0);
    }
}
