//! The `tune` proposer: changes to `[conductor]` in atelier.toml that the runs' own
//! measurements justify (`stats`), or none, with the numbers either way. Pure: run logs and the
//! settings in force in, a decision out; `cli/propose.rs` turns a decision into a proposal.
//!
//! Only runs recorded with the settings in force count (a silence measured under another
//! `restart_after` says little about this one), and nothing is proposed from fewer than
//! [`MIN_RUNS`] of them. The rules, each with its own minimum of evidence:
//! - `restart_after` up: workers came back from silences close to the threshold (the longest
//!   silence that output ended, in an attempt that then passed, reached 80 % of it, at least
//!   [`MIN_COMEBACKS`] such silences) and restarts happened: the threshold may be killing
//!   attempts that would have succeeded. New value: 1.5 × that longest silence.
//! - `restart_after` down: at least [`MIN_SILENCES`] silences recorded and [`MIN_RESTARTS`]
//!   restarts, and no worker ever came back after more than 40 % of the threshold: each restart
//!   waited longer than any comeback needed. New value: 2 × the longest comeback (never below
//!   `nudge_after`).
//! - `failure_budget` down: the last attempts allowed passed nothing over at least
//!   [`MIN_TASKS`] finished attempts: they only cost time.
//! - `failure_budget` up: tasks still pass at the last attempt allowed (P(pass) ≥ 30 % over at
//!   least [`MIN_TASKS`] tasks) and some tasks failed: one more attempt would have saved some.
//! - `attempt_timeout` down: at least [`MIN_PASSED`] passed attempts, the longest under a sixth
//!   of the timeout. New value: 3 × the longest, rounded up to whole minutes, never below
//!   `restart_after` or one minute (the rationale says which bound decided it).
//!
//! `max_parallel` and `nudge_after` are not tuned from telemetry: whether more attempts at once
//! help is a question for the replay benchmark, and a nudge changes nothing a worker sees.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::governance::time::format_duration;
use crate::swarm::events::RunEvent;
use crate::swarm::stats::{self, RunLog};

/// Runs with the settings in force needed before anything is proposed.
pub const MIN_RUNS: usize = 5;
/// Silences recorded before `restart_after` may be lowered.
pub const MIN_SILENCES: usize = 10;
/// Restarts before `restart_after` may be lowered.
pub const MIN_RESTARTS: usize = 3;
/// Silences a worker came back from (in attempts that passed) before `restart_after` may be raised.
pub const MIN_COMEBACKS: usize = 3;
/// Tasks (finished attempts) behind a `failure_budget` change.
pub const MIN_TASKS: usize = 5;
/// Passed attempts before `attempt_timeout` may be lowered.
pub const MIN_PASSED: usize = 10;

/// The `[conductor]` settings in force (from the protected branch's atelier.toml), in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Current {
    pub nudge_after: u64,
    pub restart_after: u64,
    pub attempt_timeout: u64,
    pub failure_budget: u32,
}

/// One proposed change to `[conductor]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Change {
    pub key: String,
    pub from: String,
    pub to: String,
    /// The value as TOML (a quoted duration, or a number).
    pub toml: String,
    /// The statistics behind it, in a sentence.
    pub why: String,
}

/// What `tune` concluded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Tuning {
    pub current: Current,
    pub min_runs: usize,
    /// The runs recorded with the settings in force (those the rules read).
    pub runs: Vec<String>,
    /// Runs left out, with why.
    pub excluded: Vec<(String, String)>,
    pub changes: Vec<Change>,
    /// Why each setting not changed is left as it is, with the numbers.
    pub unchanged: Vec<String>,
}

/// Whole seconds, rounded up, of `ms`.
fn ceil_secs(ms: u64) -> u64 {
    ms.div_ceil(1000)
}

fn dur(secs: u64) -> String {
    format_duration(secs as i64)
}

fn secs_text(ms: u64) -> String {
    format!("{:.1}s", ms as f64 / 1000.0)
}

/// The settings a run recorded, in the units of [`Current`]: `Some(Err(()))` when they changed
/// during the run (a resume under other settings).
fn recorded(run: &RunLog) -> Option<Result<Current, ()>> {
    let all: Vec<Current> = run
        .records
        .iter()
        .filter_map(|r| match &r.event {
            RunEvent::Settings {
                nudge_after_ms,
                restart_after_ms,
                attempt_timeout_ms,
                failure_budget,
                ..
            } => Some(Current {
                nudge_after: nudge_after_ms / 1000,
                restart_after: restart_after_ms / 1000,
                attempt_timeout: attempt_timeout_ms / 1000,
                failure_budget: *failure_budget,
            }),
            _ => None,
        })
        .collect();
    let first = *all.first()?;
    Some(if all.iter().all(|c| *c == first) {
        Ok(first)
    } else {
        Err(())
    })
}

/// The logs with every attempt under one role, so `stats::compute` pools them (the
/// `[conductor]` settings are the same for every role).
fn pooled(runs: &[&RunLog]) -> stats::RoleStats {
    const ALL: &str = "*";
    let logs: Vec<RunLog> = runs
        .iter()
        .map(|r| {
            let mut r = (*r).clone();
            for rec in &mut r.records {
                if let RunEvent::AttemptStarted { role, .. } = &mut rec.event {
                    *role = Some(ALL.to_string());
                }
            }
            r
        })
        .collect();
    stats::compute(&logs).roles.remove(ALL).unwrap_or_default()
}

/// Decides what to propose from `runs` (oldest first) under the settings `current`.
pub fn tune(runs: &[RunLog], current: Current) -> Tuning {
    let mut t = Tuning {
        current,
        min_runs: MIN_RUNS,
        runs: Vec::new(),
        excluded: Vec::new(),
        changes: Vec::new(),
        unchanged: Vec::new(),
    };
    let mut used = Vec::new();
    for run in runs {
        match recorded(run) {
            Some(Ok(c)) if c == current => {
                t.runs.push(run.id.clone());
                used.push(run);
            }
            Some(Ok(_)) => t
                .excluded
                .push((run.id.clone(), "recorded with other settings".into())),
            Some(Err(())) => t.excluded.push((
                run.id.clone(),
                "its settings changed when it was resumed".into(),
            )),
            None => t
                .excluded
                .push((run.id.clone(), "an older log, without its settings".into())),
        }
    }
    if used.len() < MIN_RUNS {
        t.unchanged.push(format!(
            "every setting: only {} run(s) recorded with the settings in force, and tune proposes nothing from fewer than {MIN_RUNS}",
            used.len()
        ));
        return t;
    }
    let s = pooled(&used);
    let n = used.len();
    restart_after(&mut t, &s, n);
    failure_budget(&mut t, &s, n);
    attempt_timeout(&mut t, &s, n);
    t
}

fn restart_after(t: &mut Tuning, s: &stats::RoleStats, n: usize) {
    let r_ms = t.current.restart_after.saturating_mul(1000);
    let si = &s.silences;
    // A comeback: a silence an attempt that then passed needed, ended by its output or by its
    // successful exit.
    let comeback = stats::Dist {
        count: si.output_then_passed.count + si.exit_then_passed.count,
        max: si.output_then_passed.max.max(si.exit_then_passed.max),
        ..stats::Dist::default()
    };
    // The longest silence anything came back from, passed or not.
    let longest = si.output.max.max(si.exit.max);
    let recorded = si.output.count + si.restart.count + si.exit.count + si.timeout.count;
    if si.restart.count >= 1
        && comeback.count >= MIN_COMEBACKS
        && comeback.max.saturating_mul(10) >= r_ms.saturating_mul(8)
    {
        let to = ceil_secs(comeback.max.saturating_mul(3) / 2).max(t.current.restart_after + 1);
        t.changes.push(Change {
            key: "restart_after".into(),
            from: dur(t.current.restart_after),
            to: dur(to),
            toml: format!("\"{}\"", dur(to)),
            why: format!(
                "over {n} runs, workers came back (by output or by exiting) from {} silences in attempts that then passed, the longest {} ({}% of restart_after = {}), and {} attempt(s) were restarted: the threshold may be killing attempts that would have succeeded; {} is 1.5 × the longest comeback",
                comeback.count,
                secs_text(comeback.max),
                comeback.max.saturating_mul(100) / r_ms.max(1),
                dur(t.current.restart_after),
                si.restart.count,
                dur(to)
            ),
        });
        return;
    }
    if recorded >= MIN_SILENCES
        && si.restart.count >= MIN_RESTARTS
        && longest.saturating_mul(10) < r_ms.saturating_mul(4)
    {
        let to = ceil_secs(longest.saturating_mul(2))
            .max(t.current.nudge_after)
            .max(1);
        if to < t.current.restart_after {
            t.changes.push(Change {
                key: "restart_after".into(),
                from: dur(t.current.restart_after),
                to: dur(to),
                toml: format!("\"{}\"", dur(to)),
                why: format!(
                    "over {n} runs, {recorded} silences were recorded and no worker came back (by output or by exiting) after more than {} (under 40% of restart_after = {}), while {} restarts each waited the full {}: {} keeps twice the longest comeback (and is at least nudge_after)",
                    secs_text(longest),
                    dur(t.current.restart_after),
                    si.restart.count,
                    dur(t.current.restart_after),
                    dur(to)
                ),
            });
            return;
        }
    }
    t.unchanged.push(format!(
        "restart_after {}: {recorded} silence(s) recorded, {} ended by output (longest {}; comebacks in attempts that passed: {}, longest {}), {} by a restart; neither rule's evidence is there (raise: a comeback past 80% of the threshold, {MIN_COMEBACKS}+ comebacks and a restart; lower: {MIN_SILENCES}+ silences, {MIN_RESTARTS}+ restarts, no comeback past 40%)",
        dur(t.current.restart_after),
        si.output.count,
        secs_text(si.output.max),
        comeback.count,
        secs_text(comeback.max),
        si.restart.count
    ));
}

fn failure_budget(t: &mut Tuning, s: &stats::RoleStats, n: usize) {
    let b = t.current.failure_budget;
    let curve: BTreeMap<u32, &stats::CurvePoint> = s.curve.iter().map(|p| (p.attempt, p)).collect();
    // The smallest k from which every later allowed attempt passed nothing.
    let mut lower = None;
    for k in (1..b).rev() {
        let later: Vec<&&stats::CurvePoint> = (k + 1..=b).filter_map(|j| curve.get(&j)).collect();
        if later.iter().any(|p| p.passed > 0) {
            break;
        }
        let finished: usize = later.iter().map(|p| p.started).sum();
        if finished >= MIN_TASKS {
            lower = Some((k, finished));
        }
    }
    let any_passed = s.curve.iter().any(|p| p.passed > 0);
    if !any_passed && !s.curve.is_empty() {
        t.unchanged.push(format!(
            "failure_budget {b}: no attempt passed at all over {n} runs; fewer attempts would not help, and the curve says nothing about which attempt succeeds"
        ));
        return;
    }
    if let Some((k, finished)) = lower {
        t.changes.push(Change {
            key: "failure_budget".into(),
            from: b.to_string(),
            to: k.to_string(),
            toml: k.to_string(),
            why: format!(
                "over {n} runs, attempts {}..{b} finished {finished} time(s) and passed none (P(pass) 0%): only the first {k} attempt(s) ever succeeded (failed attempts took {} in all)",
                k + 1,
                secs_text(s.wasted_ms)
            ),
        });
        return;
    }
    if let Some(last) = curve.get(&b) {
        if last.started >= MIN_TASKS && last.p_pass >= 0.3 && s.failed > 0 {
            t.changes.push(Change {
                key: "failure_budget".into(),
                from: b.to_string(),
                to: (b + 1).to_string(),
                toml: (b + 1).to_string(),
                why: format!(
                    "over {n} runs, attempt {b} (the last allowed) passed {} of {} times (P(pass) {:.0}%) and {} task(s) still failed: one more attempt would likely have saved some",
                    last.passed,
                    last.started,
                    last.p_pass * 100.0,
                    s.failed
                ),
            });
            return;
        }
    }
    let shape: Vec<String> = s
        .curve
        .iter()
        .map(|p| format!("attempt {}: {}/{}", p.attempt, p.passed, p.started))
        .collect();
    t.unchanged.push(format!(
        "failure_budget {b}: the attempt-success curve ({}) neither shows attempts that never pass nor tasks still passing at the last allowed attempt, over at least {MIN_TASKS} tasks",
        if shape.is_empty() { "no finished attempts".to_string() } else { shape.join(", ") }
    ));
}

fn attempt_timeout(t: &mut Tuning, s: &stats::RoleStats, n: usize) {
    let timeout_ms = t.current.attempt_timeout.saturating_mul(1000);
    let passed = &s.passed_attempt_ms;
    if passed.count >= MIN_PASSED && passed.max.saturating_mul(6) < timeout_ms {
        let three = ceil_secs(passed.max.saturating_mul(3)).div_ceil(60) * 60;
        let to = three.max(t.current.restart_after).max(60);
        // Exactly how the value was reached: approvers read this as evidence.
        let derived = if to == three {
            format!(
                "{} is 3 × the longest, rounded up to whole minutes",
                dur(to)
            )
        } else if to == t.current.restart_after {
            format!(
                "3 × the longest, rounded up to whole minutes, is {}, and the timeout never goes below restart_after = {}, so {}",
                dur(three),
                dur(t.current.restart_after),
                dur(to)
            )
        } else {
            format!(
                "3 × the longest, rounded up to whole minutes, is {}, and the timeout never goes below 1m, so {}",
                dur(three),
                dur(to)
            )
        };
        if to < t.current.attempt_timeout {
            t.changes.push(Change {
                key: "attempt_timeout".into(),
                from: dur(t.current.attempt_timeout),
                to: dur(to),
                toml: format!("\"{}\"", dur(to)),
                why: format!(
                    "over {n} runs, {} attempts passed, the longest in {} (median {}), under a sixth of attempt_timeout = {}: {derived}, which stops a stuck attempt sooner",
                    passed.count,
                    secs_text(passed.max),
                    secs_text(passed.p50),
                    dur(t.current.attempt_timeout),
                ),
            });
            return;
        }
    }
    t.unchanged.push(format!(
        "attempt_timeout {}: {} passed attempt(s), the longest {}; lowering needs {MIN_PASSED}+ of them all under a sixth of it (raising it is not decided from telemetry)",
        dur(t.current.attempt_timeout),
        passed.count,
        secs_text(passed.max)
    ));
}

/// `text` (an atelier.toml) with `[conductor]`'s `changes` applied: an existing `key = ...`
/// line is replaced (its comment kept), a missing key is added at the end of the table, a
/// missing table is appended. The caller checks the result parses to the intended values.
pub fn edit_conductor(text: &str, changes: &[Change]) -> String {
    let eol = if text.contains("\r\n") { "\r\n" } else { "\n" };
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    let header = lines.iter().position(|l| l.trim() == "[conductor]");
    let Some(h) = header else {
        let mut out = text.to_string();
        if !out.is_empty() && !out.ends_with('\n') {
            out.push_str(eol);
        }
        out.push_str(&format!("{eol}[conductor]{eol}"));
        for c in changes {
            out.push_str(&format!("{} = {}{eol}", c.key, c.toml));
        }
        return out;
    };
    // The table runs to the next header.
    let end = lines[h + 1..]
        .iter()
        .position(|l| l.trim_start().starts_with('['))
        .map_or(lines.len(), |i| h + 1 + i);
    let mut insert_at = end;
    while insert_at > h + 1 && lines[insert_at - 1].trim().is_empty() {
        insert_at -= 1;
    }
    for c in changes {
        let found = (h + 1..end).find(|&i| {
            let l = lines[i].trim_start();
            l.strip_prefix(c.key.as_str())
                .is_some_and(|rest| rest.trim_start().starts_with('='))
        });
        match found {
            Some(i) => {
                // The comment with the spacing before it (values here never hold a `#`; the
                // caller checks the result parses to the intended values anyway).
                let comment = lines[i]
                    .find('#')
                    .map(|at| lines[i][lines[i][..at].trim_end().len()..].to_string())
                    .unwrap_or_default();
                lines[i] = format!("{} = {}{comment}", c.key, c.toml);
            }
            None => {
                lines.insert(insert_at, format!("{} = {}", c.key, c.toml));
                insert_at += 1;
            }
        }
    }
    let mut out = lines.join(eol);
    if text.ends_with('\n') {
        out.push_str(eol);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::process::QuietEnd;
    use crate::swarm::events::Record;

    const CURRENT: Current = Current {
        nudge_after: 2,
        restart_after: 10,
        attempt_timeout: 1800,
        failure_budget: 3,
    };

    fn settings(c: Current) -> RunEvent {
        RunEvent::Settings {
            nudge_after_ms: c.nudge_after * 1000,
            restart_after_ms: c.restart_after * 1000,
            attempt_timeout_ms: c.attempt_timeout * 1000,
            failure_budget: c.failure_budget,
            max_parallel: 2,
            context_budget: 1000,
            steps: vec![],
            roles: BTreeMap::new(),
        }
    }

    /// One attempt of `task`: its silences, whether it passed, how long it took.
    struct A<'a> {
        task: &'a str,
        attempt: u32,
        quiet: Vec<(u64, QuietEnd)>,
        passed: bool,
        ms: u64,
    }

    fn run(id: &str, c: Option<Current>, attempts: &[A]) -> RunLog {
        let mut ev = Vec::new();
        ev.extend(c.map(settings));
        for a in attempts {
            ev.push(RunEvent::AttemptStarted {
                task: a.task.into(),
                attempt: a.attempt,
                claims: vec![],
                worktree: String::new(),
                prompt_bytes: 10,
                role: Some("w".into()),
                backend: None,
            });
            for (ms, ended) in &a.quiet {
                ev.push(RunEvent::Quiet {
                    task: a.task.into(),
                    attempt: a.attempt,
                    ms: *ms,
                    ended: *ended,
                    nudged: *ms >= 2000,
                });
                if *ended == QuietEnd::Restart {
                    ev.push(RunEvent::Restarted {
                        task: a.task.into(),
                        attempt: a.attempt,
                        silent_secs: ms / 1000,
                        silent_ms: Some(*ms),
                    });
                }
            }
            ev.push(if a.passed {
                RunEvent::AttemptPassed {
                    task: a.task.into(),
                    attempt: a.attempt,
                    commit: String::new(),
                    ms: Some(a.ms),
                }
            } else {
                RunEvent::AttemptFailed {
                    task: a.task.into(),
                    attempt: a.attempt,
                    reason: "failed".into(),
                    digest: vec![],
                    ms: Some(a.ms),
                }
            });
        }
        RunLog {
            id: id.into(),
            records: ev
                .into_iter()
                .enumerate()
                .map(|(i, event)| Record {
                    seq: i as u64,
                    at: "2026-12-01T10:00:00Z".into(),
                    event,
                })
                .collect(),
            plan_roles: BTreeMap::new(),
        }
    }

    /// The change `t` proposes to `key`, which the test expects.
    fn change_of<'t>(t: &'t Tuning, key: &str) -> &'t Change {
        t.changes
            .iter()
            .find(|c| c.key == key)
            .unwrap_or_else(|| panic!("no change to {key}: {:?}", t.unchanged))
    }

    fn ok(task: &str, ms: u64) -> A<'_> {
        A {
            task,
            attempt: 1,
            quiet: vec![],
            passed: true,
            ms,
        }
    }

    #[test]
    fn too_few_runs_propose_nothing_and_say_how_many() {
        let runs: Vec<RunLog> = (1..=4)
            .map(|i| run(&format!("r{i}"), Some(CURRENT), &[ok("a", 1000)]))
            .chain([run("r0", None, &[ok("a", 1)])])
            .chain([run(
                "r9",
                Some(Current {
                    restart_after: 99,
                    ..CURRENT
                }),
                &[ok("a", 1)],
            )])
            .collect();
        let t = tune(&runs, CURRENT);
        assert!(t.changes.is_empty());
        assert_eq!(t.runs.len(), 4);
        assert_eq!(t.excluded.len(), 2);
        assert!(
            t.unchanged[0].contains("only 4 run(s)"),
            "{:?}",
            t.unchanged
        );
    }

    #[test]
    fn comebacks_near_the_threshold_raise_restart_after() {
        // Each run: a worker comes back after 9 s (90% of 10 s) and passes; another is restarted.
        let runs: Vec<RunLog> = (1..=5)
            .map(|i| {
                run(
                    &format!("r{i}"),
                    Some(CURRENT),
                    &[
                        A {
                            task: "a",
                            attempt: 1,
                            quiet: vec![(9000, QuietEnd::Output)],
                            passed: true,
                            ms: 20_000,
                        },
                        A {
                            task: "b",
                            attempt: 1,
                            quiet: vec![(10_050, QuietEnd::Restart)],
                            passed: false,
                            ms: 12_000,
                        },
                    ],
                )
            })
            .collect();
        let t = tune(&runs, CURRENT);
        let c = change_of(&t, "restart_after");
        assert_eq!((c.from.as_str(), c.to.as_str()), ("10s", "14s"));
        assert!(
            c.why.contains("5 silences") && c.why.contains("9.0s"),
            "{}",
            c.why
        );
    }

    #[test]
    fn restarts_with_no_comeback_lower_restart_after_but_never_below_nudge() {
        let runs: Vec<RunLog> = (1..=5)
            .map(|i| {
                run(
                    &format!("r{i}"),
                    Some(CURRENT),
                    &[
                        A {
                            task: "a",
                            attempt: 1,
                            quiet: vec![(1200, QuietEnd::Output), (1500, QuietEnd::Exit)],
                            passed: true,
                            ms: 5_000,
                        },
                        A {
                            task: "b",
                            attempt: 1,
                            quiet: vec![(10_000, QuietEnd::Restart)],
                            passed: false,
                            ms: 11_000,
                        },
                    ],
                )
            })
            .collect();
        let t = tune(&runs, CURRENT);
        let c = change_of(&t, "restart_after");
        // twice the longest comeback (1.5 s, ended by the worker's exit) is 3 s; nudge_after is 2 s.
        assert_eq!(c.to, "3s");
        assert!(c.why.contains("15 silences"), "{}", c.why);
    }

    #[test]
    fn attempts_that_never_pass_lower_the_budget_and_late_passes_raise_it() {
        // Tasks pass at 1 or fail three times: attempts 2 and 3 never pass.
        let never: Vec<RunLog> = (1..=5)
            .map(|i| {
                let mut a = vec![ok("a", 100)];
                for k in 1..=3 {
                    a.push(A {
                        task: "b",
                        attempt: k,
                        quiet: vec![],
                        passed: false,
                        ms: 100,
                    });
                }
                run(&format!("r{i}"), Some(CURRENT), &a)
            })
            .collect();
        let t = tune(&never, CURRENT);
        let c = change_of(&t, "failure_budget");
        assert_eq!((c.from.as_str(), c.to.as_str()), ("3", "1"));

        // Every task passes only at attempt 3, and one more fails: raise.
        let late: Vec<RunLog> = (1..=5)
            .map(|i| {
                let mut a = Vec::new();
                for (t, pass_at) in [("a", Some(3)), ("b", None)] {
                    for k in 1..=3 {
                        a.push(A {
                            task: t,
                            attempt: k,
                            quiet: vec![],
                            passed: pass_at == Some(k),
                            ms: 100,
                        });
                    }
                }
                run(&format!("r{i}"), Some(CURRENT), &a)
            })
            .collect();
        let t = tune(&late, CURRENT);
        let c = change_of(&t, "failure_budget");
        assert_eq!(c.to, "4");
        assert!(c.why.contains("passed 5 of 10"), "{}", c.why);
    }

    #[test]
    fn short_attempts_lower_the_timeout_and_no_evidence_changes_nothing() {
        let runs: Vec<RunLog> = (1..=5)
            .map(|i| {
                run(
                    &format!("r{i}"),
                    Some(CURRENT),
                    &[ok("a", 40_000), ok("b", 61_000)],
                )
            })
            .collect();
        let t = tune(&runs, CURRENT);
        let c = change_of(&t, "attempt_timeout");
        assert_eq!(c.to, "4m");
        assert!(t.changes.iter().all(|c| c.key != "restart_after"));
        assert!(t
            .unchanged
            .iter()
            .any(|u| u.starts_with("restart_after 10s: 0 silence(s)")));
        assert!(t
            .unchanged
            .iter()
            .any(|u| u.starts_with("failure_budget 3:")));
    }

    /// The rationale says exactly how the new timeout was reached: 3 × 6.1 s rounds up to 1m,
    /// and restart_after = 10m is the floor that decided it.
    #[test]
    fn a_timeout_held_up_by_restart_after_says_so() {
        let current = Current {
            restart_after: 600,
            attempt_timeout: 7200,
            ..CURRENT
        };
        let runs: Vec<RunLog> = (1..=5)
            .map(|i| {
                run(
                    &format!("r{i}"),
                    Some(current),
                    &[ok("a", 6_100), ok("b", 4_000)],
                )
            })
            .collect();
        let t = tune(&runs, current);
        let c = change_of(&t, "attempt_timeout");
        assert_eq!(c.to, "10m");
        assert!(
            c.why.contains("3 × the longest, rounded up to whole minutes, is 1m, and the timeout never goes below restart_after = 10m, so 10m")
                && c.why.contains("the longest in 6.1s"),
            "{}",
            c.why
        );
        assert!(!c.why.contains("10m is 3 ×"), "{}", c.why);
    }

    fn change(key: &str, toml: &str) -> Change {
        Change {
            key: key.into(),
            from: String::new(),
            to: String::new(),
            toml: toml.into(),
            why: String::new(),
        }
    }

    #[test]
    fn editing_conductor_keeps_everything_else() {
        let text = "[forge]\nkind = \"local\"\n\n[conductor]\nnudge_after = \"5s\"\nrestart_after = \"10s\"   # silence before a restart\n\n[swarm]\nmax_parallel = 2\n";
        let out = edit_conductor(
            text,
            &[
                change("restart_after", "\"14s\""),
                change("failure_budget", "2"),
            ],
        );
        assert_eq!(out, "[forge]\nkind = \"local\"\n\n[conductor]\nnudge_after = \"5s\"\nrestart_after = \"14s\"   # silence before a restart\nfailure_budget = 2\n\n[swarm]\nmax_parallel = 2\n");
        let none = edit_conductor(
            "[forge]\nkind = \"local\"",
            &[change("failure_budget", "2")],
        );
        assert_eq!(
            none,
            "[forge]\nkind = \"local\"\n\n[conductor]\nfailure_budget = 2\n"
        );
        // A key that only starts like another is not it.
        let near = edit_conductor(
            "[conductor]\nrestart_after_x = 1\n",
            &[change("restart_after", "\"3s\"")],
        );
        assert_eq!(
            near,
            "[conductor]\nrestart_after_x = 1\nrestart_after = \"3s\"\n"
        );
    }
}
