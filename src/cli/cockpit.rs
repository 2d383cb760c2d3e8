//! `atelier watch` on a terminal: the cockpit (ratatui). Tasks with their state, role, attempt,
//! elapsed time, nudges, restarts, last step and claims; the waves; a tail of the run's events;
//! and controls — pause, resume, retry or skip the selected task, stop — sent through the
//! run's `control/` directory like `atelier control`, so the conductor records who asked. It
//! reads the run's events afresh twice a second; it never writes them.

use std::time::Duration;

use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Paragraph, Row, Table, TableState};
use ratatui::Frame;

use crate::swarm::events::{self, RunState, TaskState};
use crate::swarm::runtime;
use crate::workflow::Workspace;

/// What a key asks of the run, given the selected task.
pub(super) fn control_for(
    key: KeyCode,
    selected: Option<&str>,
) -> Option<(&'static str, Option<String>)> {
    match key {
        KeyCode::Char('p') => Some(("pause", None)),
        KeyCode::Char('r') => Some(("resume", None)),
        KeyCode::Char('s') => Some(("stop", None)),
        KeyCode::Char('t') => selected.map(|t| ("retry", Some(t.to_string()))),
        KeyCode::Char('k') => selected.map(|t| ("skip", Some(t.to_string()))),
        _ => None,
    }
}

fn colour(state: TaskState) -> Color {
    match state {
        TaskState::Pending => Color::Gray,
        TaskState::Running => Color::Cyan,
        TaskState::Succeeded => Color::Green,
        TaskState::Failed => Color::Red,
        TaskState::Blocked => Color::Yellow,
        TaskState::Skipped => Color::Magenta,
    }
}

fn state_name(state: TaskState) -> &'static str {
    match state {
        TaskState::Pending => "pending",
        TaskState::Running => "running",
        TaskState::Succeeded => "succeeded",
        TaskState::Failed => "failed",
        TaskState::Blocked => "blocked",
        TaskState::Skipped => "skipped",
    }
}

/// Draws one frame: the run `s`, the last lines of its events `tail`, the selected row, the
/// note of the last control sent, `now` (seconds) for elapsed times, and the conductor's live
/// status with the time it is read at (`live`, milliseconds) for the running workers' silences.
#[allow(clippy::too_many_arguments)]
pub(super) fn draw(
    f: &mut Frame<'_>,
    s: &RunState,
    critical: &[String],
    validated: Option<&str>,
    roles: &std::collections::BTreeMap<String, String>,
    tail: &[String],
    table: &mut TableState,
    note: &str,
    now: i64,
    live: (Option<&crate::swarm::live::Status>, u64),
) {
    let (live, now_ms) = live;
    let live = live.filter(|l| l.fresh(now_ms));
    let [head, body, events_area, help] = Layout::vertical([
        Constraint::Length(4),
        Constraint::Min(6),
        Constraint::Length(10),
        Constraint::Length(2),
    ])
    .areas(f.area());
    let (header, second) = header_lines(s, critical, validated, live.is_some());
    f.render_widget(
        Paragraph::new(vec![
            Line::from(super::printable(&header)),
            Line::from(super::printable(&second)),
        ])
        .block(
            Block::default()
                .borders(Borders::ALL)
                .title("atelier watch"),
        ),
        head,
    );
    let shown = columns(body.width);
    let rows = s
        .tasks
        .iter()
        .map(|(k, v)| task_row(s, k, v, roles, now, live.map(|l| (l, now_ms)), &shown))
        .collect();
    f.render_stateful_widget(task_table(rows, &shown), body, table);
    let lines: Vec<Line<'_>> = tail.iter().map(|l| Line::from(l.as_str())).collect();
    f.render_widget(
        Paragraph::new(lines).block(Block::default().borders(Borders::ALL).title("events")),
        events_area,
    );
    f.render_widget(
        Paragraph::new(format!(
            "p pause  r resume  t retry task  k skip task  s stop  ↑/↓ select  q quit   {note}"
        )),
        help,
    );
}

/// The header's two lines: the run's state with its counts and waves; then the critical path,
/// the contract validator's verdict and whether the conductor is `reporting` its status.
fn header_lines(
    s: &RunState,
    critical: &[String],
    validated: Option<&str>,
    reporting: bool,
) -> (String, String) {
    let count = |st: TaskState| s.tasks.values().filter(|t| t.state == st).count();
    let status = if s.finished {
        "finished"
    } else if s.paused {
        "PAUSED"
    } else {
        "running"
    };
    let spent: u64 = s.tasks.values().map(|t| t.spent.total()).sum();
    let spent = match spent {
        0 => String::new(),
        n => format!(" — spent {n} tokens"),
    };
    let header = format!(
        "run {} on {} — {status} — {} done, {} running, {} failed, {} blocked, {} skipped, {} pending{spent} — waves: {}",
        s.run,
        s.branch,
        count(TaskState::Succeeded),
        count(TaskState::Running),
        count(TaskState::Failed),
        count(TaskState::Blocked),
        count(TaskState::Skipped),
        count(TaskState::Pending),
        s.waves
            .iter()
            .map(|w| w.join(" "))
            .collect::<Vec<_>>()
            .join(" | ")
    );
    let reporting = if s.finished {
        ""
    } else if reporting {
        "   conductor: reporting"
    } else {
        "   conductor: NOT REPORTING (interrupted? `atelier run --resume` continues it)"
    };
    let second = format!(
        "critical path: {}{}{reporting}",
        if critical.is_empty() {
            "-".to_string()
        } else {
            critical.join(" → ")
        },
        validated
            .map(|v| format!("   contract validator: {v}"))
            .unwrap_or_default()
    );
    (header, second)
}

/// Task `k`'s row: its state, role, wave, attempt, elapsed time (to `now`, seconds), its
/// worker's silence while the conductor reports it (`live`, read at the milliseconds given),
/// nudges, restarts, the tokens its workers reported, claims and last step.
fn task_row<'a>(
    s: &RunState,
    k: &str,
    v: &crate::swarm::events::TaskView,
    roles: &std::collections::BTreeMap<String, String>,
    now: i64,
    live: Option<(&crate::swarm::live::Status, u64)>,
    shown: &[usize],
) -> Row<'a> {
    let time = |x: &Option<String>| {
        x.as_deref()
            .and_then(|t| crate::governance::time::parse_rfc3339(t).ok())
    };
    let elapsed = match (time(&v.started_at), time(&v.finished_at)) {
        (Some(a), Some(b)) => format!("{}s", b - a),
        (Some(a), None) if v.state == TaskState::Running => {
            format!("{}s", (now - a).max(0))
        }
        _ => "-".into(),
    };
    let last = match v.state {
        TaskState::Succeeded | TaskState::Running => v.last_step.clone(),
        _ => v.last_failure.clone().or(v.last_step.clone()),
    }
    .unwrap_or_default();
    let silent = live
        .filter(|_| v.state == TaskState::Running)
        .and_then(|(l, now_ms)| l.silent_ms(k, v.attempt, now_ms))
        .map_or("-".to_string(), crate::swarm::live::human);
    let wave = s
        .waves
        .iter()
        .position(|w| w.iter().any(|t| t == k))
        .map_or("-".to_string(), |i| (i + 1).to_string());
    let claims = s.held.get(k).map(|c| c.join(" ")).unwrap_or_default();
    // Task ids, claims and reasons carry what plans and workers wrote: printable only.
    let p = |t: &str| super::printable(t).replace('\n', " ");
    let cells = [
        p(k),
        state_name(v.state).to_string(),
        p(&roles.get(k).cloned().unwrap_or_default()),
        wave,
        v.attempt.to_string(),
        elapsed,
        silent,
        v.nudges.to_string(),
        v.restarts.to_string(),
        match v.spent.total() {
            0 => "-".to_string(),
            n => n.to_string(),
        },
        p(&claims),
        p(&last),
    ];
    Row::new(shown.iter().map(|&i| cells[i].clone()).collect::<Vec<_>>())
        .style(Style::default().fg(colour(v.state)))
}

/// The tasks table's columns: heading, width, and the narrowest table that shows it. The task,
/// its state, attempt, elapsed time and last step fit 80 columns whole; the rest join as the
/// terminal widens.
const COLUMNS: [(&str, Constraint, u16); 12] = [
    ("TASK", Constraint::Min(12), 0),
    ("STATE", Constraint::Length(9), 0),
    ("ROLE", Constraint::Length(12), 100),
    ("WAVE", Constraint::Length(4), 120),
    ("ATTEMPT", Constraint::Length(7), 0),
    ("ELAPSED", Constraint::Length(7), 0),
    ("SILENT", Constraint::Length(7), 90),
    ("NUDGES", Constraint::Length(6), 140),
    ("RESTARTS", Constraint::Length(8), 140),
    ("TOKENS", Constraint::Length(8), 110),
    ("CLAIMS", Constraint::Length(18), 130),
    ("LAST", Constraint::Min(20), 0),
];

/// The columns a table `width` cells wide shows, by their index in `COLUMNS`.
fn columns(width: u16) -> Vec<usize> {
    (0..COLUMNS.len())
        .filter(|&i| COLUMNS[i].2 <= width)
        .collect()
}

/// The tasks table around its `rows`: the `shown` columns' widths and headings.
fn task_table<'a>(rows: Vec<Row<'a>>, shown: &[usize]) -> Table<'a> {
    Table::new(rows, shown.iter().map(|&i| COLUMNS[i].1))
        .header(
            Row::new(shown.iter().map(|&i| COLUMNS[i].0).collect::<Vec<_>>())
                .style(Style::default().add_modifier(Modifier::BOLD)),
        )
        .row_highlight_style(Style::default().add_modifier(Modifier::REVERSED))
        .block(Block::default().borders(Borders::ALL).title("tasks"))
}

/// What one frame shows of the run, read afresh from its events.
struct Seen {
    state: RunState,
    validated: Option<String>,
    roles: std::collections::BTreeMap<String, String>,
    tail: Vec<String>,
}

/// Reads the run's events at `path`: its state, the contract validator's verdict, each task's
/// role and the last eight lines worth showing.
fn seen(path: &std::path::Path) -> anyhow::Result<Seen> {
    let records = events::read(path)?;
    let s = RunState::of_log(&records);
    let validated = records.iter().rev().find_map(|r| match &r.event {
        events::RunEvent::ContractValidated {
            validator, verdict, ..
        } => Some(format!("{verdict} ({validator})")),
        _ => None,
    });
    let roles: std::collections::BTreeMap<String, String> = records
        .iter()
        .filter_map(|r| match &r.event {
            events::RunEvent::AttemptStarted {
                task,
                role: Some(role),
                ..
            } => Some((task.clone(), role.clone())),
            _ => None,
        })
        .collect();
    let tail: Vec<String> = records
        .iter()
        .filter_map(|r| super::runs::describe(&r.event, &s.run).map(|l| format!("{} {l}", r.at)))
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .take(8)
        .rev()
        .collect();
    Ok(Seen {
        state: s,
        validated,
        roles,
        tail,
    })
}

/// The cockpit until `q`, or until the run finishes unless `stay`. True when it closed because
/// the run finished (the caller then prints the final status, which the closed screen took).
pub(super) fn run(ws: &Workspace, run: &str, stay: bool) -> anyhow::Result<bool> {
    let path = runtime::run_dir(ws, run).join("events.jsonl");
    let mut terminal = ratatui::init();
    let mut table = TableState::default();
    table.select(Some(0));
    let mut note = String::new();
    let result = (|| -> anyhow::Result<bool> {
        let mut critical: Option<Vec<String>> = None;
        loop {
            let seen = seen(&path)?;
            // The plans do not change during a run: the critical path is worked out once.
            let critical = critical.get_or_insert_with(|| {
                runtime::run_plans(ws, run)
                    .map(|p| crate::swarm::schedule::critical_path(&p, &seen.state.waves))
                    .unwrap_or_default()
            });
            // Not `cli::now()`: its note about ATELIER_NOW would print over the screen.
            let now = crate::clock::now().map(|(t, _)| t).unwrap_or(0);
            let live = crate::swarm::live::read(&runtime::run_dir(ws, run));
            terminal.draw(|f| {
                draw(
                    f,
                    &seen.state,
                    critical,
                    seen.validated.as_deref(),
                    &seen.roles,
                    &seen.tail,
                    &mut table,
                    &note,
                    now,
                    (live.as_ref(), crate::swarm::live::now_ms()),
                )
            })?;
            if seen.state.finished && !stay {
                return Ok(true);
            }
            if !event::poll(Duration::from_millis(500))? {
                continue;
            }
            let Event::Key(key) = event::read()? else {
                continue;
            };
            if key.kind == KeyEventKind::Press
                && on_key(ws, run, key.code, &seen.state, &mut table, &mut note)?
            {
                return Ok(false);
            }
        }
    })();
    ratatui::restore();
    result
}

/// Acts on a key pressed with the run in state `s`: moves the selection, or sends the control
/// the key asks for, saying so in `note`. True when the key quits the cockpit.
fn on_key(
    ws: &Workspace,
    run: &str,
    code: KeyCode,
    s: &RunState,
    table: &mut TableState,
    note: &mut String,
) -> anyhow::Result<bool> {
    let tasks: Vec<&String> = s.tasks.keys().collect();
    let selected = table
        .selected()
        .and_then(|i| tasks.get(i))
        .map(|t| t.as_str());
    match code {
        KeyCode::Char('q') | KeyCode::Esc => return Ok(true),
        KeyCode::Down => table.select(Some(
            (table.selected().unwrap_or(0) + 1).min(tasks.len().saturating_sub(1)),
        )),
        KeyCode::Up => table.select(Some(table.selected().unwrap_or(0).saturating_sub(1))),
        code => {
            if let Some((action, task)) = control_for(code, selected) {
                *note = if s.finished {
                    format!("run {run} has finished: nothing to control")
                } else {
                    super::runs::send_control(ws, run, action, task.as_deref())?;
                    format!(
                        "asked to {action}{} (the events show when it applies)",
                        task.map(|t| format!(" {t}")).unwrap_or_default()
                    )
                };
            }
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::backend::TestBackend;
    use ratatui::Terminal;

    fn record(event: events::RunEvent) -> events::Record {
        events::Record {
            seq: 0,
            at: "2026-12-01T10:00:00Z".into(),
            event,
        }
    }

    /// A run of two tasks in two waves: A's first attempt running, and the run paused.
    fn paused_log() -> Vec<events::Record> {
        use events::RunEvent as E;
        vec![
            record(E::RunStarted {
                run: "r1".into(),
                plans: vec!["p".into()],
                branch: "atelier/runs/r1".into(),
                base: String::new(),
                max_parallel: 2,
                tasks: vec!["p:A".into(), "p:B".into()],
                waves: vec![vec!["p:A".into()], vec!["p:B".into()]],
            }),
            record(E::AttemptStarted {
                task: "p:A".into(),
                attempt: 1,
                claims: vec!["src/a.rs".into()],
                worktree: String::new(),
                prompt_bytes: 10,
                role: Some("implementer".into()),
                backend: None,
            }),
            record(E::Control {
                action: "pause".into(),
                task: None,
                by: "ada@example.org".into(),
                applied: true,
                detail: "applied".into(),
            }),
        ]
    }

    /// The conductor's live status at 50 s: A's attempt silent for 10 s.
    fn live_status() -> crate::swarm::live::Status {
        crate::swarm::live::Status {
            pid: 1,
            written_ms: 50_000,
            attempts: vec![crate::swarm::live::Attempt {
                task: "p:A".into(),
                attempt: 1,
                silent_ms: 10_000,
            }],
        }
    }

    /// A terminal's text, a line per row.
    fn text_of(b: &ratatui::buffer::Buffer) -> String {
        (0..b.area.height)
            .map(|y| {
                (0..b.area.width)
                    .map(|x| b[(x, y)].symbol())
                    .collect::<String>()
                    + "\n"
            })
            .collect::<String>()
    }

    #[test]
    fn the_cockpit_shows_tasks_controls_and_a_paused_run() {
        let log = paused_log();
        let s = RunState::of_log(&log);
        let roles = [("p:A".to_string(), "implementer".to_string())].into();
        let tail: Vec<String> = log
            .iter()
            .filter_map(|r| crate::cli::runs::describe(&r.event, "r1"))
            .collect();
        let live = live_status();
        let screen_at = |width: u16, now_ms: u64| {
            let mut terminal = Terminal::new(TestBackend::new(width, 30)).expect("terminal");
            let mut table = TableState::default();
            table.select(Some(0));
            terminal
                .draw(|f| {
                    draw(
                        f,
                        &s,
                        &["p:A".to_string(), "p:B".to_string()],
                        Some("approve (validator)"),
                        &roles,
                        &tail,
                        &mut table,
                        "",
                        0,
                        (Some(&live), now_ms),
                    )
                })
                .expect("draw");
            text_of(terminal.backend().buffer())
        };
        let screen = |now_ms: u64| screen_at(180, now_ms);
        // Written 2 s ago with 10 s of silence: the worker has been silent for 12 s.
        let text = screen(52_000);
        for want in [
            "PAUSED",
            "p:A",
            "running",
            "implementer",
            "src/a.rs",
            "p:B",
            "pending",
            "control: ada@example.org asked to pause: applied",
            "p pause",
            "t retry task",
            "critical path: p:A → p:B",
            "contract validator: approve (validator)",
            "SILENT",
            "WAVE",
            "conductor: reporting",
        ] {
            assert!(text.contains(want), "{want} is not on screen:\n{text}");
        }
        let row = text
            .lines()
            .find(|l| l.contains("│p:A "))
            .expect("p:A's row");
        assert!(row.contains("12s"), "p:A's silence: {row}");
        let b = text
            .lines()
            .find(|l| l.contains("│p:B "))
            .expect("p:B's row");
        assert!(
            b.split_whitespace().any(|c| c == "2"),
            "p:B is in wave 2: {b}"
        );
        // A status no conductor has rewritten for a while shows no silence, and says so.
        let stale = screen(50_000 + crate::swarm::live::STALE_MS + 1);
        let row = stale
            .lines()
            .find(|l| l.contains("│p:A "))
            .expect("p:A's row");
        assert!(!row.contains("10s") && !row.contains(" 15s"), "{row}");
        assert!(stale.contains("conductor: NOT REPORTING"), "{stale}");
        // 80 columns show each task's name, state, attempt, time and last step whole; the
        // columns that do not fit wait for a wider terminal instead of cutting the others.
        let narrow = screen_at(80, 52_000);
        let row = narrow
            .lines()
            .find(|l| l.contains("│p:A "))
            .expect("p:A's row");
        assert!(row.contains(" running "), "{narrow}");
        for want in ["TASK", "STATE", "ATTEMPT", "ELAPSED", "LAST", "pending"] {
            assert!(narrow.contains(want), "{want} is not on screen:\n{narrow}");
        }
        assert!(!narrow.contains("CLAIMS"), "{narrow}");
    }

    #[test]
    fn keys_ask_for_controls_on_the_selected_task() {
        assert_eq!(control_for(KeyCode::Char('p'), None), Some(("pause", None)));
        assert_eq!(
            control_for(KeyCode::Char('t'), Some("p:A")),
            Some(("retry", Some("p:A".into())))
        );
        assert_eq!(
            control_for(KeyCode::Char('k'), Some("p:B")),
            Some(("skip", Some("p:B".into())))
        );
        assert_eq!(control_for(KeyCode::Char('t'), None), None);
        assert_eq!(control_for(KeyCode::Char('x'), Some("p:A")), None);
    }
}
