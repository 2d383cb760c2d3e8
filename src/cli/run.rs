//! `atelier run`, `atelier status`, `atelier watch`, `atelier clean` and `atelier stats`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

use super::{json, out};
use crate::swarm::events::{self, RunState, TaskState};
use crate::swarm::runtime::{self, RunOptions};
use crate::swarm::stats;
use crate::workflow::Workspace;

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Plan files to run together.
    #[arg(required_unless_present = "resume")]
    plans: Vec<PathBuf>,
    /// Continue a run after a crash.
    #[arg(long, value_name = "run-id", conflicts_with = "plans")]
    resume: Option<String>,
    /// Tasks in flight at once (default: the plan's max_parallel, else atelier.toml's).
    #[arg(long)]
    max_parallel: Option<usize>,
    /// When every task succeeds, open a proposal with the run's combined change.
    #[arg(long)]
    propose: bool,
    /// No progress on stderr while the run works.
    #[arg(long, short)]
    quiet: bool,
    /// Print the result as JSON (one document on stdout) instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(dir: &Path, args: RunArgs) -> anyhow::Result<ExitCode> {
    let ws = Workspace::open(dir)?;
    // An edit to what workers may reach is refused, and the refusal is the only word on it: a
    // warning that the run uses the working tree's settings would contradict it.
    ws.containment()?;
    if let Some(w) = uncommitted_config(&ws)? {
        super::note!("warning: {w}");
    }
    // To a person at a terminal (CI containers run as root by design, and say so themselves).
    // SAFETY: geteuid(2) cannot fail.
    if std::io::IsTerminal::is_terminal(&std::io::stderr()) && unsafe { libc::geteuid() } == 0 {
        super::note!("warning: running the swarm as root: a contained worker keeps uid 0 (without capabilities) and reads what root owns outside the excluded secrets; run it as an ordinary user (docs/swarm.md, \"What a worker can and cannot do\")");
    }
    let mut plan_files = Vec::new();
    for p in &args.plans {
        plan_files.push((
            p.display().to_string(),
            std::fs::read_to_string(p).with_context(|| format!("reading plan {}", p.display()))?,
        ));
    }
    if args.resume.is_none() {
        let pruned = runtime::prune(&ws)?;
        if !pruned.branches.is_empty() && !args.quiet {
            super::note!(
                "removed {} attempt branch(es) of finished runs older than the latest {} (`atelier clean` removes the rest)",
                pruned.branches.len(),
                runtime::KEPT_RUNS
            );
        }
    }
    let clock = || crate::clock::now().map(|(t, _)| t).unwrap_or(0);
    let live = Live::new(!args.quiet);
    let show = |u: runtime::Update<'_>| live.update(u);
    let summary = runtime::run_with_progress(
        &ws,
        RunOptions {
            plan_files,
            max_parallel: args.max_parallel,
            resume: args.resume,
            goal: None,
        },
        &clock,
        (!args.quiet).then_some(&show as runtime::Progress<'_>),
    )?;
    let proposed = if args.propose && summary.ok() {
        Some(runtime::propose_run(&ws, &summary, clock())?)
    } else {
        None
    };
    if args.json {
        let mut v = serde_json::to_value(&summary)?;
        v["proposal"] = serde_json::to_value(&proposed)?;
        json(&v)?;
    } else {
        // Reasons and output lines carry what workers wrote: no escape reaches the terminal.
        out(&super::printable(&render_summary(
            &summary,
            proposed.as_ref(),
            args.propose,
        )))?;
    }
    Ok(if summary.ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// What `run` prints when it ends: the branch, containment, the proposal (when `--propose`
/// asked for one), and each task that did not succeed with why.
fn render_summary(
    summary: &runtime::RunSummary,
    proposed: Option<&crate::workflow::Proposed>,
    propose: bool,
) -> String {
    let mut t = format!("run {} on branch {}\n", summary.run, summary.branch);
    if summary.containment == "none" {
        t.push_str("  WARNING:   workers ran uncontained (`[swarm] containment = \"none\"` in atelier.toml): they could read the gate key and write the repository\n");
    } else {
        t.push_str(&format!(
            "  contained: {} (docs/swarm.md: what a worker can and cannot do)\n",
            summary.containment
        ));
    }
    if let Some(p) = proposed {
        t.push_str(&format!(
            "  proposed:  proposal {} on {} (`atelier gate {}` shows what it needs)\n",
            p.id, p.branch, p.id
        ));
    } else if propose {
        t.push_str("  proposed:  nothing (the run did not succeed entirely)\n");
    }
    t.push_str(&format!("  succeeded: {}\n", summary.succeeded.len()));
    let state = events::read(Path::new(&summary.events))
        .ok()
        .map(|r| RunState::of_log(&r));
    for (k, why) in &summary.failed {
        t.push_str(&format!("  failed:    {k}: {why}\n"));
        if let Some(v) = state.as_ref().and_then(|s| s.tasks.get(k)) {
            t.push_str(&output_lines(&v.last_output, "             "));
        }
    }
    for (k, why) in &summary.blocked {
        t.push_str(&format!("  blocked:   {k}: {why}\n"));
    }
    for k in &summary.skipped {
        t.push_str(&format!(
            "  skipped:   {k} (forced past by an operator: the run is not proposed)\n"
        ));
    }
    t.push_str(&format!("events: {}\n", summary.events));
    t
}

/// `run`'s progress on stderr: on a terminal a compact view redrawn at each event and each
/// second (tasks done, running, failed; each running task's attempt, last step, and how long
/// its worker has been silent); otherwise one line per change of state.
struct Live {
    on: bool,
    terminal: bool,
    /// Lines of the view drawn last (a terminal redraws over them).
    drawn: std::cell::Cell<usize>,
    /// The last event's line, and the running workers' silences last published.
    last: std::cell::RefCell<(String, crate::swarm::live::Status)>,
    started: crate::agent::process::Stopwatch,
}

impl Live {
    fn new(on: bool) -> Live {
        use std::io::IsTerminal;
        Live {
            on,
            terminal: std::io::stderr().is_terminal(),
            drawn: std::cell::Cell::new(0),
            last: Default::default(),
            started: crate::agent::process::Stopwatch::start(),
        }
    }

    fn update(&self, u: runtime::Update<'_>) {
        if !self.on {
            return;
        }
        match u {
            runtime::Update::Event(r, st) => {
                let Some(line) = super::runs::describe(&r.event, &st.run) else {
                    return;
                };
                if self.terminal {
                    self.last.borrow_mut().0 = line;
                    self.draw(st);
                } else {
                    super::note!("{line}");
                }
            }
            runtime::Update::Tick(st, status) => {
                if self.terminal {
                    self.last.borrow_mut().1 = status.clone();
                    self.draw(st);
                }
            }
        }
    }

    /// The compact view, drawn over the previous one.
    fn draw(&self, st: &RunState) {
        let (last, status) = &*self.last.borrow();
        let now = crate::swarm::live::now_ms();
        let count = |want: TaskState| st.tasks.values().filter(|v| v.state == want).count();
        let mut lines = vec![format!(
            "run {} ({:.0}s): {} done, {} running, {} failed, {} blocked, {} pending",
            st.run,
            self.started.elapsed().as_secs_f64(),
            count(TaskState::Succeeded),
            count(TaskState::Running),
            count(TaskState::Failed),
            count(TaskState::Blocked),
            count(TaskState::Pending)
        )];
        for (k, v) in st
            .tasks
            .iter()
            .filter(|(_, v)| v.state == TaskState::Running)
        {
            lines.push(format!(
                "  {k:<20} attempt {:<2} {}{}{}",
                v.attempt,
                v.last_step.as_deref().unwrap_or("working"),
                status
                    .silent_ms(k, v.attempt, now)
                    .map(|ms| format!(", silent for {}", crate::swarm::live::human(ms)))
                    .unwrap_or_default(),
                if v.restarts > 0 {
                    format!(", {} restart(s)", v.restarts)
                } else {
                    String::new()
                }
            ));
        }
        lines.push(format!("  last: {last}"));
        let lines: Vec<String> = lines
            .iter()
            .map(|l| super::printable(l).replace('\t', " "))
            .collect();
        let (cols, rows) = ratatui::crossterm::terminal::size().unwrap_or((u16::MAX, u16::MAX));
        let lines = fit(lines, cols.into(), rows.into());
        let up = self.drawn.get();
        let mut out = String::new();
        if up > 0 {
            out.push_str(&format!("\x1b[{up}A\x1b[J"));
        }
        for l in &lines {
            out.push_str(l);
            out.push('\n');
        }
        super::err_raw(&out);
        self.drawn.set(lines.len());
    }
}

/// The live view's `lines` cut to a terminal of `cols` × `rows`: the view is redrawn by moving
/// the cursor up over as many lines as it drew, so a line that wraps, or a view taller than the
/// screen, would leave a copy behind at every redraw. The running tasks that do not fit are
/// counted; the first line (the counts) and the last (the last event) stay.
fn fit(mut lines: Vec<String>, cols: usize, rows: usize) -> Vec<String> {
    let room = rows.saturating_sub(1).max(1);
    if lines.len() > room {
        if room >= 3 {
            let last = lines.pop().expect("the view ends with the last event");
            let more = lines.len() - (room - 2);
            lines.truncate(room - 2);
            lines.push(format!("  and {more} more running"));
            lines.push(last);
        } else {
            lines.truncate(room);
        }
    }
    lines
        .into_iter()
        .map(|mut l| {
            let width = |l: &str| ratatui::text::Span::raw(l).width();
            if width(&l) > cols {
                l = l.chars().take(cols).collect();
                while width(&l) > cols {
                    l.pop();
                }
            }
            l
        })
        .collect()
}

/// Whether the working tree's atelier.toml differs from the protected branch's: the run uses
/// the working tree's, which nothing approved (edits to what workers may reach are refused
/// outright, `E_CONTAINMENT_UNCOMMITTED`).
fn uncommitted_config(ws: &Workspace) -> anyhow::Result<Option<String>> {
    let file = crate::config::FILE;
    let working = std::fs::read(ws.root.join(file)).unwrap_or_default();
    let tip = crate::git::branch_tip(&ws.repo, ws.branch())?;
    let tree = ws.repo.find_commit(tip)?.tree()?;
    let committed = crate::git::read_file(&ws.repo, &tree, file)?.unwrap_or_default();
    Ok((working != committed).then(|| {
        format!(
            "the working tree's {file} differs from {branch}'s, and this run uses the working tree's (`git diff {branch} -- {file}` shows the edit). Settings take effect for everyone through a proposal: `git diff > edit.patch`, then `atelier propose --patch edit.patch --title …` (after adoption, a change to atelier.toml's roles is a constitution change). Until then a merge leaves your edit in place as an uncommitted change",
            branch = ws.branch()
        )
    }))
}

#[derive(Args, Debug)]
pub struct ControlArgs {
    /// `pause` (no new attempt starts), `resume`, `stop` (every worker stopped; `run --resume`
    /// continues), `retry TASK` (a failed task starts over with a fresh budget), `skip TASK`
    /// (force past a pending, failed or blocked task: its dependents run; the run is then never
    /// proposed).
    #[arg(value_parser = ["pause", "resume", "stop", "retry", "skip"])]
    action: String,
    /// The task (`plan:id`), for retry and skip.
    task: Option<String>,
    /// The run (default: the latest).
    #[arg(long)]
    run: Option<String>,
}

/// `atelier control`: leaves the request in the run's `control/` directory, where the
/// conductor (this one or a later `--resume`) takes it and records it with who asked.
pub fn control(dir: &Path, args: ControlArgs) -> anyhow::Result<ExitCode> {
    let ws = Workspace::open(dir)?;
    let run = match args.run {
        Some(r) => r,
        None => latest(&ws)?,
    };
    let s = load(&ws, &run)?;
    if s.finished {
        return Err(crate::workflow::Error::Input(format!(
            "run {run} has finished: there is nothing to control (`atelier status {run}`)"
        ))
        .into());
    }
    let needs_task = matches!(args.action.as_str(), "retry" | "skip");
    match (&args.task, needs_task) {
        (None, true) => {
            return Err(crate::workflow::Error::Input(format!(
                "{} needs the task (`atelier status {run}` lists them, as plan:id)",
                args.action
            ))
            .into())
        }
        (Some(t), false) => {
            return Err(crate::workflow::Error::Input(format!(
                "{} takes no task (got `{t}`)",
                args.action
            ))
            .into())
        }
        (Some(t), true) if !s.tasks.contains_key(t) => {
            return Err(crate::workflow::Error::Input(format!(
                "run {run} has no task `{t}` (tasks: {})",
                s.tasks.keys().cloned().collect::<Vec<_>>().join(", ")
            ))
            .into())
        }
        _ => {}
    }
    super::runs::send_control(&ws, &run, &args.action, args.task.as_deref())?;
    out(&format!(
        "asked run {run} to {}{}: its conductor takes it within a second and records it (`atelier status {run}`); a run whose conductor is not running takes it at `atelier run --resume {run}`\n",
        args.action,
        args.task.as_deref().map(|t| format!(" {t}")).unwrap_or_default()
    ))?;
    Ok(ExitCode::SUCCESS)
}

#[derive(Args, Debug)]
pub struct StatusArgs {
    /// The run (default: the latest).
    run: Option<String>,
    /// Print the result as JSON (one document on stdout) instead of text.
    #[arg(long)]
    json: bool,
}

fn latest(ws: &Workspace) -> anyhow::Result<String> {
    stats::run_ids(&ws.atelier_dir().join("runs"))
        .pop()
        .ok_or_else(|| anyhow::anyhow!("there are no runs yet: `atelier run PLAN.toml` starts one"))
}

pub(super) fn load(ws: &Workspace, run: &str) -> anyhow::Result<RunState> {
    let path = runtime::run_dir(ws, run).join("events.jsonl");
    if !path.exists() {
        let runs = stats::run_ids(&ws.atelier_dir().join("runs"));
        let known = match (runs.first(), runs.last()) {
            (Some(a), Some(b)) if a == b => format!("the only run is {a}"),
            (Some(a), Some(b)) => format!("the runs here are {a} to {b} ({} in all)", runs.len()),
            _ => "there are no runs yet: `atelier run PLAN.toml` starts one".to_string(),
        };
        return Err(crate::workflow::Error::Input(format!(
            "no run {run} in {}: {known}; `atelier stats` lists them",
            ws.atelier_dir().join("runs").display()
        ))
        .into());
    }
    let records = events::read(&path).with_context(|| format!("run {run}"))?;
    Ok(RunState::of_log(&records))
}

/// A failed attempt's digest (its error blocks, or its last lines), indented, at most 12 lines.
fn output_lines(digest: &[String], indent: &str) -> String {
    let lines: Vec<&str> = digest.iter().flat_map(|b| b.lines()).collect();
    let mut t = String::new();
    for l in lines.iter().take(12) {
        t.push_str(&format!("{indent}| {l}\n"));
    }
    if lines.len() > 12 {
        t.push_str(&format!(
            "{indent}| … ({} more lines in the run's events.jsonl)\n",
            lines.len() - 12
        ));
    }
    t
}

/// Where a run stands, for `status`'s first line: `reporting` when its conductor is.
fn run_state(s: &RunState, reporting: bool) -> String {
    if s.finished {
        "finished".to_string()
    } else if s.paused {
        "PAUSED by an operator (`atelier control resume`)".to_string()
    } else if reporting {
        "in progress: its conductor is reporting".to_string()
    } else {
        format!(
            "not finished, and no conductor is reporting: interrupted (`atelier run --resume {}` continues it), or just starting",
            s.run
        )
    }
}

/// The run's live status (`live.json`), when its conductor is reporting.
pub(super) fn live_status(ws: &Workspace, run: &str) -> Option<crate::swarm::live::Status> {
    crate::swarm::live::read(&runtime::run_dir(ws, run))
        .filter(|l| l.fresh(crate::swarm::live::now_ms()))
}

/// `status` and the plain `watch`: the tasks (with each running worker's silence while its
/// conductor reports it, `live`), what failed printed, the claims held and the waves.
fn render(
    s: &RunState,
    config: &crate::config::Config,
    now: i64,
    live: Option<&crate::swarm::live::Status>,
) -> String {
    let mut t = format!(
        "run {} ({}) on {}\n\n",
        s.run,
        run_state(s, live.is_some()),
        s.branch
    );
    t.push_str(&format!(
        "{:<16} {:<10} {:>7} {:>8} {:>8} {:>6} {:>8}  {}\n",
        "TASK", "STATE", "ATTEMPT", "ELAPSED", "SILENT", "NUDGES", "RESTARTS", "LAST"
    ));
    let now_ms = crate::swarm::live::now_ms();
    for (k, v) in &s.tasks {
        let state = match v.state {
            TaskState::Pending => "pending",
            TaskState::Running => "running",
            TaskState::Succeeded => "succeeded",
            TaskState::Failed => "failed",
            TaskState::Blocked => "blocked",
            TaskState::Skipped => "skipped",
        };
        let last = match v.state {
            TaskState::Succeeded | TaskState::Running => v.last_step.clone(),
            _ => v.last_failure.clone().or(v.last_step.clone()),
        }
        .unwrap_or_default();
        let time = |x: &Option<String>| {
            x.as_deref()
                .and_then(|t| crate::governance::time::parse_rfc3339(t).ok())
        };
        let elapsed = match (time(&v.started_at), time(&v.finished_at)) {
            (Some(a), Some(b)) => format!("{}s", b - a),
            (Some(a), None) if v.state == TaskState::Running => format!("{}s", (now - a).max(0)),
            _ => "-".into(),
        };
        let silent = live
            .filter(|_| v.state == TaskState::Running)
            .and_then(|l| l.silent_ms(k, v.attempt, now_ms))
            .map_or("-".to_string(), crate::swarm::live::human);
        t.push_str(&format!(
            "{:<16} {:<10} {:>7} {:>8} {:>8} {:>6} {:>8}  {}\n",
            k, state, v.attempt, elapsed, silent, v.nudges, v.restarts, last
        ));
    }
    t.push_str(&[spent_lines(s), budget_lines(config, s), kept_lines(s)].concat());
    let failed: Vec<_> = s
        .tasks
        .iter()
        .filter(|(_, v)| v.state == TaskState::Failed && !v.last_output.is_empty())
        .collect();
    if !failed.is_empty() {
        t.push_str("\nwhat the last failed attempt printed:\n");
        for (k, v) in failed {
            t.push_str(&format!("  {k} (attempt {}):\n", v.attempt));
            t.push_str(&output_lines(&v.last_output, "    "));
        }
    }
    if !s.held.is_empty() {
        t.push_str("\nclaims held:\n");
        for (k, c) in &s.held {
            t.push_str(&format!("  {k}: {}\n", c.join(", ")));
        }
    }
    t.push_str("\nwaves:\n");
    for (i, w) in s.waves.iter().enumerate() {
        t.push_str(&format!("  {:>3}: {}\n", i + 1, w.join(" ")));
    }
    t
}

pub fn status(dir: &Path, args: StatusArgs) -> anyhow::Result<ExitCode> {
    let ws = Workspace::open(dir)?;
    let run = match args.run {
        Some(r) => r,
        None => latest(&ws)?,
    };
    let s = load(&ws, &run)?;
    let live = live_status(&ws, &run).filter(|_| !s.finished);
    if args.json {
        // The state, and each running worker's silence (ms) while the conductor reports it.
        let mut v = serde_json::to_value(&s)?;
        let now = crate::swarm::live::now_ms();
        v["silent_ms"] = serde_json::to_value(
            s.tasks
                .iter()
                .filter(|(_, t)| t.state == TaskState::Running)
                .filter_map(|(k, t)| Some((k, live.as_ref()?.silent_ms(k, t.attempt, now)?)))
                .collect::<std::collections::BTreeMap<_, _>>(),
        )?;
        json(&v)?;
    } else {
        out(&super::printable(&render(
            &s,
            &ws.config,
            super::now()?,
            live.as_ref(),
        )))?;
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Args, Debug)]
#[command(
    after_help = "On a terminal, the cockpit. Keys: up/down select a task; p pause the \
run; r resume it; s stop it; t retry the selected task; k skip it; q or Esc quit.\n\
It closes when the run finishes and leaves the final status on the screen, unless --stay. \
Not on a terminal (piped, in CI), it prints the status each time a task changes state, and \
the final status, without escape sequences."
)]
pub struct WatchArgs {
    /// The run (default: the latest).
    run: Option<String>,
    /// Keep the cockpit open after the run finishes, until `q`.
    #[arg(long)]
    stay: bool,
}

/// The cockpit on a terminal; elsewhere, the status each time a task changes state. Both end
/// when the run finishes (the cockpit only then if not `--stay`).
pub fn watch(dir: &Path, args: WatchArgs) -> anyhow::Result<ExitCode> {
    let ws = Workspace::open(dir)?;
    let run = match args.run {
        Some(r) => r,
        None => latest(&ws)?,
    };
    use std::io::IsTerminal;
    let terminal = std::io::stdout().is_terminal();
    if terminal && std::io::stdin().is_terminal() {
        if super::cockpit::run(&ws, &run, args.stay)? {
            let s = load(&ws, &run)?;
            let live = live_status(&ws, &run);
            out(&render(&s, &ws.config, super::now()?, live.as_ref()))?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    let mut shown = None;
    loop {
        let s = load(&ws, &run)?;
        let live = live_status(&ws, &run);
        let states: Vec<_> = s
            .tasks
            .iter()
            .map(|(k, t)| (k.clone(), t.state, t.attempt))
            .collect();
        if terminal {
            // The one escape sequence here is ours: clear the screen, then the status.
            super::out_raw("\x1b[2J\x1b[H")?;
            out(&render(&s, &ws.config, super::now()?, live.as_ref()))?;
        } else if shown.as_ref() != Some(&states) {
            if shown.is_some() {
                out("\n")?;
            }
            out(&render(&s, &ws.config, super::now()?, live.as_ref()))?;
            shown = Some(states);
        }
        if s.finished {
            return Ok(ExitCode::SUCCESS);
        }
        // No conductor holds the run's lock: the run was interrupted, nothing will change.
        let lock = runtime::run_dir(&ws, &run).join("lock");
        let idle = std::fs::OpenOptions::new()
            .write(true)
            .open(&lock)
            .is_ok_and(|f| f.try_lock().is_ok());
        if idle {
            super::note!("run {run} is not running (interrupted?): `atelier run --resume {run}` continues it");
            return Ok(ExitCode::from(1));
        }
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
}

#[derive(Args, Debug)]
pub struct CleanArgs {
    /// Print the result as JSON (one document on stdout) instead of text.
    #[arg(long)]
    json: bool,
}

/// Removes worktrees and attempt branches kept by finished runs.
pub fn clean(dir: &Path, args: CleanArgs) -> anyhow::Result<ExitCode> {
    let ws = Workspace::open(dir)?;
    let c = runtime::clean(&ws)?;
    if args.json {
        json(&c)?;
    } else {
        let mut t = format!(
            "removed {} worktree(s) and {} attempt branch(es)\n",
            c.worktrees.len(),
            c.branches.len()
        );
        if !c.skipped_runs.is_empty() {
            t.push_str(&format!(
                "left unfinished run(s) alone: {} (`atelier run --resume ID` finishes one)\n",
                c.skipped_runs.join(", ")
            ));
        }
        out(&t)?;
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Args, Debug)]
pub struct StatsArgs {
    /// Only this run and the later ones (a run id, e.g. r4).
    #[arg(long, value_name = "run-id")]
    since: Option<String>,
    /// Print the result as JSON (one document on stdout) instead of text.
    #[arg(long)]
    json: bool,
}

/// What the runs measured (`swarm::stats`), for an operator tuning the conductor.
pub fn stats(dir: &Path, args: StatsArgs) -> anyhow::Result<ExitCode> {
    let ws = Workspace::open(dir)?;
    let runs_dir = ws.atelier_dir().join("runs");
    let logs = stats::load(&runs_dir, args.since.as_deref())?;
    let s = stats::compute(&logs);
    if args.json {
        json(&s)?;
    } else {
        out(&render_stats(&s))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// A duration for people: `850 ms`, `1.2 s`, `4 min 05 s`.
fn human_ms(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else if ms < 60_000 {
        format!("{:.1} s", ms as f64 / 1000.0)
    } else {
        format!("{} min {:02} s", ms / 60_000, (ms % 60_000) / 1000)
    }
}

fn dist_ms(d: &stats::Dist) -> String {
    if d.count == 0 {
        return "none".into();
    }
    format!(
        "{} measured: median {}, p90 {}, max {}",
        d.count,
        human_ms(d.p50),
        human_ms(d.p90),
        human_ms(d.max)
    )
}

fn render_stats(s: &stats::Stats) -> String {
    if s.runs.is_empty() {
        return "no runs yet: `atelier run PLAN.toml` starts one; `atelier stats` then reports what it measured\n".into();
    }
    let attempts: usize = s.runs.iter().map(|r| r.attempts).sum();
    let first = &s.runs[0].run;
    let last = &s.runs[s.runs.len() - 1].run;
    let mut t = format!(
        "{} run(s) ({first}..{last}), {attempts} finished attempt(s)\n",
        s.runs.len()
    );
    t.push_str(&render_runs(&s.runs));
    for (role, r) in &s.roles {
        t.push_str(&render_role(role, r));
    }
    if !s.steps.is_empty() {
        t.push_str("\nsteps (gauntlet steps; contract checks together as `checks`):\n");
        for (name, st) in &s.steps {
            t.push_str(&format!(
                "  {name}: {} passed, {} failed; time {}\n",
                st.passed,
                st.failed,
                dist_ms(&st.ms)
            ));
        }
    }
    t
}

/// `stats`' list of runs, each with the settings it ran with.
fn render_runs(runs: &[stats::RunInfo]) -> String {
    let mut t = String::from("\nruns:\n");
    for r in runs {
        let settings = match &r.settings {
            Some(c) => format!(
                "nudge_after {}, restart_after {}, attempt_timeout {}, failure_budget {}, max_parallel {}",
                human_ms(c.nudge_after_ms),
                human_ms(c.restart_after_ms),
                human_ms(c.attempt_timeout_ms),
                c.failure_budget,
                c.max_parallel
            ),
            None => "settings not recorded (an older log)".into(),
        };
        t.push_str(&format!(
            "  {:<5} {:<11} {} task(s), {} attempt(s), at most {} at once{}; {settings}\n",
            r.run,
            if r.finished { "finished" } else { "unfinished" },
            r.tasks,
            r.attempts,
            r.peak_parallel,
            tokens(&r.spent)
        ));
    }
    t
}

/// `stats` for one role: its tasks and attempts, the attempt-success curve, times, silences,
/// nudges, restarts and prompt sizes.
fn render_role(role: &str, r: &stats::RoleStats) -> String {
    let backends: Vec<&str> = r.backends.iter().map(String::as_str).collect();
    let mut t = format!(
        "\nrole {role}{}: {} task(s), {} succeeded, {} failed; {} attempt(s), {} wasted ({})\n",
        if backends.is_empty() {
            String::new()
        } else {
            format!(" ({})", backends.join(", "))
        },
        r.tasks,
        r.succeeded,
        r.failed,
        r.attempts,
        r.wasted_attempts,
        human_ms(r.wasted_ms)
    );
    t.push_str("  attempt  finished  passed  P(pass)  tasks passed by then\n");
    for p in &r.curve {
        t.push_str(&format!(
            "  {:>7}  {:>8}  {:>6}  {:>6.0}%  {:>5.0}%\n",
            p.attempt,
            p.started,
            p.passed,
            p.p_pass * 100.0,
            p.passed_by * 100.0
        ));
    }
    t.push_str(&format!("  attempt time: {}\n", dist_ms(&r.attempt_ms)));
    t.push_str(&format!("  worker time: {}\n", dist_ms(&r.worker_ms)));
    if r.spent.total() > 0 {
        t.push_str(&format!(
            "  {}\n",
            tokens(&r.spent).trim_start_matches(", ")
        ));
    }
    let si = &r.silences;
    t.push_str(&format!(
        "  silences ended by output: {}\n    of which in attempts that passed: {}\n  ended by a restart: {}\n  ended by the worker's exit: {}\n  ended by the attempt timeout: {}\n",
        dist_ms(&si.output),
        dist_ms(&si.output_then_passed),
        dist_ms(&si.restart),
        dist_ms(&si.exit),
        dist_ms(&si.timeout)
    ));
    t.push_str(&format!(
        "  nudges: {}, restarts: {}, silences that reached the nudge threshold: {}\n",
        r.nudges, r.restarts, si.nudged
    ));
    let p = &r.prompt_bytes;
    if p.count > 0 {
        t.push_str(&format!(
            "  prompt size: median {} B, p90 {} B, max {} B\n",
            p.p50, p.p90, p.max
        ));
    }
    t
}

#[derive(Args, Debug)]
pub struct ValidateArgs {
    /// The run (default: the latest).
    run: Option<String>,
    /// Print the result as JSON (one document on stdout) instead of text.
    #[arg(long)]
    json: bool,
}

/// The scrutiny validator on a finished run: exit 0 when nothing blocks it, 1 otherwise.
pub fn validate(dir: &Path, args: ValidateArgs) -> anyhow::Result<ExitCode> {
    let ws = Workspace::open(dir)?;
    let run = match args.run {
        Some(r) => r,
        None => latest(&ws)?,
    };
    let s = crate::improve::scrutiny::scrutinize(&ws, &run)?;
    let code = if s.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    };
    super::verdict(code, || {
        if args.json {
            return json(&s);
        }
        let mut t = format!("run {}: scrutiny {}\n", s.run, s.verdict.as_str());
        for e in &s.evidence {
            let what = if e.kind == "check" {
                format!("`{}`", e.check)
            } else {
                format!("gauntlet step {}", e.check)
            };
            t.push_str(&format!(
                "  {} {what}: {}\n",
                e.task,
                e.passed_at
                    .map_or("NO passing record".to_string(), |a| format!(
                        "passed at attempt {a}"
                    ))
            ));
        }
        for f in &s.findings {
            t.push_str(&format!(
                "  {:?} {} {}{}: {}\n",
                f.severity,
                f.reviewer,
                f.category,
                f.file
                    .as_deref()
                    .map(|p| format!(" ({p})"))
                    .unwrap_or_default(),
                f.message
            ));
        }
        out(&t)
    })
}

/// Where each task's last worker output is kept.
fn kept_lines(s: &crate::swarm::events::RunState) -> String {
    s.tasks
        .iter()
        .filter_map(|(k, v)| {
            let log = v.log.as_ref()?;
            Some(format!(
                "output: {k} (attempt {}): .atelier/runs/{}/{log}\n",
                v.attempt, s.run
            ))
        })
        .collect()
}

/// `, spent N tokens (input …, output …, cached …)`, or nothing when none were reported.
fn tokens(u: &crate::agent::clients::Usage) -> String {
    if u.total() == 0 {
        return String::new();
    }
    format!(
        ", spent {} tokens (input {}, output {}, cached {})",
        u.total(),
        u.input_tokens,
        u.output_tokens,
        u.cached_tokens
    )
}

/// What the workers reported spending, a line per task that reported any.
fn spent_lines(s: &crate::swarm::events::RunState) -> String {
    s.tasks
        .iter()
        .filter(|(_, v)| v.spent.total() > 0)
        .map(|(k, v)| {
            format!(
                "spent: {k}: {} tokens (input {}, output {}, cached {})\n",
                v.spent.total(),
                v.spent.input_tokens,
                v.spent.output_tokens,
                v.spent.cached_tokens
            )
        })
        .collect()
}

/// Each tokens and cost ceiling of `[budget]` beside what the run has used of it.
fn budget_lines(config: &crate::config::Config, s: &RunState) -> String {
    crate::swarm::runtime::budget::standing(config, s)
        .into_iter()
        .map(|b| {
            format!(
                "budget: {} {}: {} of {}{}\n",
                b.scope,
                b.measure,
                b.used,
                b.limit,
                if b.reached { " (reached)" } else { "" }
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::fit;

    #[test]
    fn the_live_view_fits_the_terminal() {
        let view = |n: usize| {
            let mut v = vec!["run r1 (3s): 0 done".to_string()];
            v.extend((0..n).map(|i| format!("  p:T{i} attempt 1 working")));
            v.push(format!("  last: {}", "x".repeat(200)));
            v
        };
        // Each line cut to the width, wide characters counted twice.
        let lines = fit(view(1), 20, 40);
        assert_eq!(lines.len(), 3);
        assert!(lines.iter().all(|l| l.chars().count() <= 20), "{lines:?}");
        assert_eq!(fit(vec!["日本語の".into()], 5, 40), ["日本"]);
        // Taller than the screen: the running tasks beyond it are counted, the last event stays.
        let lines = fit(view(50), 80, 10);
        assert_eq!(lines.len(), 9, "{lines:?}");
        assert_eq!(lines[7], "  and 44 more running");
        assert!(lines[8].starts_with("  last: "));
        assert_eq!(fit(view(50), 80, 2).len(), 1);
    }
}
