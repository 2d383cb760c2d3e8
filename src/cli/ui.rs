//! `atelier ui`: a local, read-only web dashboard for the people who review and audit —
//! proposals (state, approvals and who still has to sign, the panel, the evidence, the diff),
//! the ledger (a timeline and `audit verify`'s result), runs (a Gantt chart of attempts) and
//! the improvement curve. Server-side HTML from minijinja templates (HTML-escaped), plots as
//! inline SVG, no JavaScript; every page has a JSON twin under `/api/`. It binds to loopback
//! unless `--allow-remote`, answers only GET, and refuses requests whose Host is not the address
//! it serves (a web page elsewhere cannot read it through the browser by DNS rebinding).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;
use serde_json::{json, Value};

use crate::audit::history;
use crate::swarm::events::{self, RunEvent};
use crate::workflow::{self, Workspace};

#[derive(Args, Debug)]
pub struct UiArgs {
    /// Where to listen (port 0 picks a free one; the address is printed).
    #[arg(long, default_value = "127.0.0.1:8787")]
    listen: SocketAddr,
    /// Serve on an address other than loopback: anyone who can reach it reads the proposals,
    /// the ledger and the runs.
    #[arg(long)]
    allow_remote: bool,
}

const LAYOUT: &str = include_str!("ui/layout.html.j2");
const PAGES: &[(&str, &str)] = &[
    ("proposals", include_str!("ui/proposals.html.j2")),
    ("proposal", include_str!("ui/proposal.html.j2")),
    ("ledger", include_str!("ui/ledger.html.j2")),
    ("runs", include_str!("ui/runs.html.j2")),
    ("run", include_str!("ui/run.html.j2")),
    ("improvements", include_str!("ui/improvements.html.j2")),
];

pub fn ui(dir: &Path, args: UiArgs) -> anyhow::Result<ExitCode> {
    // Refuse early what would serve nothing: the directory must be an adopted repository.
    let ws = Workspace::open(dir)?;
    let root = ws.root.clone();
    drop(ws);
    if !args.listen.ip().is_loopback() && !args.allow_remote {
        return Err(workflow::Error::Input(format!(
            "--listen {}: not a loopback address; the dashboard shows this repository's proposals, ledger and runs to whoever connects. Pass --allow-remote to serve them there anyway",
            args.listen
        ))
        .into());
    }
    if args.allow_remote && !args.listen.ip().is_loopback() {
        super::note!(
            "WARNING: serving on {} (--allow-remote): anyone who can reach it reads this repository's proposals, ledger and runs, over plain HTTP",
            args.listen
        );
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .map_err(|e| {
                let hint = if e.kind() == std::io::ErrorKind::AddrInUse {
                    "; another program holds that port: `--listen 127.0.0.1:0` picks a free one (the address is printed)"
                } else {
                    ""
                };
                workflow::Error::Input(format!("listening on {}: {e}{hint}", args.listen))
            })?;
        let local = listener.local_addr()?;
        super::out(&format!("listening on http://{local}\n"))?;
        let allowed = Arc::new(Hosts {
            port: local.port(),
            any: args.allow_remote,
        });
        let root = Arc::new(root);
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        loop {
            tokio::select! {
                accepted = listener.accept() => {
                    let Ok((stream, _)) = accepted else {
                        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                        continue;
                    };
                    let (root, allowed) = (root.clone(), allowed.clone());
                    tokio::spawn(async move {
                        let io = hyper_util::rt::TokioIo::new(stream);
                        let svc = hyper::service::service_fn(move |req| {
                            handle(root.clone(), allowed.clone(), req)
                        });
                        let _ = hyper::server::conn::http1::Builder::new()
                            .timer(hyper_util::rt::TokioTimer::new())
                            .header_read_timeout(std::time::Duration::from_secs(10))
                            .serve_connection(io, svc)
                            .await;
                    });
                }
                _ = tokio::signal::ctrl_c() => break,
                _ = term.recv() => break,
            }
        }
        Ok::<_, anyhow::Error>(())
    })?;
    Ok(ExitCode::SUCCESS)
}

/// The Host headers a request may carry: this port, on `localhost` or an IP address (loopback
/// only, unless `--allow-remote`). Never another name, even with `--allow-remote`: DNS
/// rebinding needs a name, so an address literal cannot be a page elsewhere reading this one.
struct Hosts {
    port: u16,
    any: bool,
}

impl Hosts {
    fn allows(&self, host: Option<&str>) -> bool {
        let Some((name, port)) = host.and_then(|h| h.rsplit_once(':')) else {
            return false;
        };
        if port.parse::<u16>().ok() != Some(self.port) {
            return false;
        }
        if name.eq_ignore_ascii_case("localhost") {
            return true;
        }
        let ip = name.trim_start_matches('[').trim_end_matches(']');
        match ip.parse::<std::net::IpAddr>() {
            Ok(ip) => self.any || ip.is_loopback(),
            Err(_) => false,
        }
    }
}

type Body = http_body_util::Full<hyper::body::Bytes>;

async fn handle(
    root: Arc<PathBuf>,
    hosts: Arc<Hosts>,
    req: hyper::Request<hyper::body::Incoming>,
) -> Result<hyper::Response<Body>, std::convert::Infallible> {
    let host = req
        .headers()
        .get(hyper::header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_string);
    let (status, kind, body) = if req.method() != hyper::Method::GET {
        (
            405,
            "text/plain; charset=utf-8",
            "read-only: GET only\n".into(),
        )
    } else if !hosts.allows(host.as_deref()) {
        (
            421,
            "text/plain; charset=utf-8",
            "this dashboard answers requests for its own loopback address only\n".into(),
        )
    } else {
        let path = req.uri().path().to_string();
        tokio::task::spawn_blocking(move || respond(&root, &path))
            .await
            .unwrap_or_else(|e| {
                (
                    500,
                    "text/plain; charset=utf-8",
                    format!("the page failed: {e}\n"),
                )
            })
    };
    let mut resp = hyper::Response::new(Body::new(body.into()));
    *resp.status_mut() = hyper::StatusCode::from_u16(status).unwrap_or_default();
    let h = resp.headers_mut();
    let set = |h: &mut hyper::HeaderMap, k: &'static str, v: &str| {
        if let Ok(v) = hyper::header::HeaderValue::from_str(v) {
            h.insert(k, v);
        }
    };
    set(h, "content-type", kind);
    // No script runs, nothing loads from elsewhere, no page frames this one.
    set(
        h,
        "content-security-policy",
        "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'",
    );
    set(h, "x-content-type-options", "nosniff");
    set(h, "cache-control", "no-store");
    Ok(resp)
}

/// One request: (status, content type, body). The repository is opened afresh each time, so
/// every page shows it as it is now.
fn respond(root: &Path, path: &str) -> (u16, &'static str, String) {
    let (api, rest) = match path.strip_prefix("/api") {
        Some(r) => (true, if r.is_empty() { "/" } else { r }),
        None => (false, path),
    };
    let result = (|| -> anyhow::Result<Option<(&'static str, Value)>> {
        // A GET any web page can make writes nothing: not even the merge trees it computes.
        let ws = Workspace::open_to_show(root)?;
        let parts: Vec<&str> = rest.trim_matches('/').split('/').collect();
        Ok(match parts.as_slice() {
            [""] | ["proposals"] => Some(("proposals", proposals(&ws)?)),
            ["proposals", id] => proposal(&ws, id)?.map(|v| ("proposal", v)),
            ["ledger"] => Some(("ledger", ledger(&ws)?)),
            ["runs"] => Some(("runs", runs(&ws)?)),
            ["runs", id] => run(&ws, id)?.map(|v| ("run", v)),
            ["improvements"] => Some(("improvements", improvements(&ws)?)),
            _ => None,
        })
    })();
    match result {
        Ok(Some((page, data))) => {
            if api {
                (
                    200,
                    "application/json",
                    serde_json::to_string_pretty(&data).unwrap_or_default(),
                )
            } else {
                match render(page, &data) {
                    Ok(html) => (200, "text/html; charset=utf-8", html),
                    Err(e) => (
                        500,
                        "text/plain; charset=utf-8",
                        format!("rendering {page}: {e}\n"),
                    ),
                }
            }
        }
        Ok(None) => (
            404,
            "text/plain; charset=utf-8",
            format!("no page at {path}: /, /proposals/ID, /ledger, /runs, /runs/ID, /improvements (and each under /api/)\n"),
        ),
        Err(e) => (
            500,
            "text/plain; charset=utf-8",
            format!("{}\n", crate::errors::chain(e.as_ref())),
        ),
    }
}

/// A page from its template, HTML-escaped throughout.
pub(crate) fn render(page: &str, data: &Value) -> Result<String, minijinja::Error> {
    let mut env = minijinja::Environment::new();
    env.set_auto_escape_callback(|_| minijinja::AutoEscape::Html);
    env.add_template("layout", LAYOUT)?;
    for (name, text) in PAGES {
        env.add_template(name, text)?;
    }
    env.get_template(page)?.render(minijinja::value::Serde(
        json!({ "page": page, "d": visible(data.clone()) }),
    ))
}

/// Every text in `v` (keys too) as [`super::printable`] shows it: a browser reorders text
/// around a bidi override and draws invisible characters as nothing, as a terminal does, so a
/// diff line or a title on a page shows them as marks (`<U+202E>`), and control characters
/// as `\u{FFFD}`.
fn visible(v: Value) -> Value {
    match v {
        Value::String(s) => Value::String(super::printable(&s)),
        Value::Array(a) => Value::Array(a.into_iter().map(visible).collect()),
        Value::Object(o) => Value::Object(
            o.into_iter()
                .map(|(k, v)| (super::printable(&k), visible(v)))
                .collect(),
        ),
        other => other,
    }
}

fn now() -> anyhow::Result<i64> {
    Ok(crate::clock::now().map(|(t, _)| t)?)
}

fn proposals(ws: &Workspace) -> anyhow::Result<Value> {
    let list = workflow::list(ws, now()?)?;
    Ok(
        json!({ "repository": ws.config.forge.repository, "branch": ws.branch(), "proposals": list }),
    )
}

fn proposal(ws: &Workspace, id: &str) -> anyhow::Result<Option<Value>> {
    if workflow::parse_id(id).is_err() {
        return Ok(None);
    }
    let Ok(pull) = ws.pull(id) else {
        return Ok(None);
    };
    let v = crate::proposal::view(ws, id)?;
    let view = ws.view()?;
    // What the gate would decide now for an open proposal: who approved, what is still
    // missing (nothing is recorded). A merged or closed one has its history in the ledger.
    let state = pull.state.as_str().to_string();
    let gate = if state != "open" {
        json!({ "state": state })
    } else {
        match workflow::evaluate(ws, &view, pull, now()?) {
            Ok(e) => json!({ "decision": e.decision }),
            Err(err) => json!({ "error": crate::errors::chain(&err) }),
        }
    };
    let evidence = v.evidence.as_ref().map(|s| {
        json!({
            "headline": s.evidence.as_ref().map(|e| e.headline()),
            "evidence": s.evidence,
            "objections": s.objections,
            "warnings": s.warnings,
        })
    });
    Ok(Some(json!({
        "proposal": v,
        "gate": gate,
        "evidence": evidence,
        "origin": view.origin(id),
    })))
}

fn ledger(ws: &Workspace) -> anyhow::Result<Value> {
    let entries = history::entries(&ws.repo)?;
    let jobs = std::thread::available_parallelism().map_or(1, |n| n.get());
    let report = history::verify(
        &ws.repo,
        &ws.config.forge.repository,
        ws.branch(),
        jobs,
        history::Memory::ReadOnly,
    )?;
    let timeline: Vec<Value> = entries
        .iter()
        .rev()
        .map(|e| {
            let kind = super::audit::kind(&e.event);
            json!({
                "seq": e.seq,
                "at": e.at,
                "kind": kind,
                "proposal": e.event.proposal(),
                "summary": super::audit::summary(&e.event),
                "alarm": kind == "alarm",
            })
        })
        .collect();
    Ok(
        json!({ "branch": ws.branch(), "audit": report, "ok": report.findings.is_empty(), "entries": timeline }),
    )
}

fn runs(ws: &Workspace) -> anyhow::Result<Value> {
    let dir = ws.atelier_dir().join("runs");
    let mut out = Vec::new();
    for id in crate::swarm::stats::run_ids(&dir).into_iter().rev() {
        let Ok(records) = events::read(&dir.join(&id).join("events.jsonl")) else {
            continue;
        };
        let st = events::RunState::of_log(&records);
        let count = |s: events::TaskState| st.tasks.values().filter(|t| t.state == s).count();
        out.push(json!({
            "id": id,
            "finished": st.finished,
            "succeeded": count(events::TaskState::Succeeded),
            "failed": count(events::TaskState::Failed),
            "blocked": count(events::TaskState::Blocked),
            "skipped": count(events::TaskState::Skipped),
            "tasks": st.tasks.len(),
            "started": records.first().map(|r| r.at.clone()),
        }));
    }
    let logs = crate::swarm::stats::load(&dir, None).unwrap_or_default();
    let stats = crate::swarm::stats::compute(&logs);
    Ok(json!({
        "runs": out,
        "curve": curve_svg(&stats),
        "silences": silence_svg(&stats),
        "stats": stats,
    }))
}

/// One run: a Gantt chart of its attempts (a bar per attempt, coloured by how it ended, with
/// nudges and restarts marked), from its events.
fn run(ws: &Workspace, id: &str) -> anyhow::Result<Option<Value>> {
    if !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
        return Ok(None);
    }
    let path = crate::swarm::runtime::run_dir(ws, id).join("events.jsonl");
    let Ok(records) = events::read(&path) else {
        return Ok(None);
    };
    let st = events::RunState::of_log(&records);
    let bars = attempts(&records);
    let contract = records.iter().rev().find_map(|r| match &r.event {
        RunEvent::ContractValidated {
            validator,
            verdict,
            findings,
        } => Some(ContractMark {
            validator: validator.clone(),
            verdict: verdict.clone(),
            findings: findings.len(),
        }),
        _ => None,
    });
    // Each running worker's silence while its conductor reports it (`live.json`).
    let now = crate::swarm::live::now_ms();
    let live = crate::swarm::live::read(&crate::swarm::runtime::run_dir(ws, id))
        .filter(|l| !st.finished && l.fresh(now));
    let silent: BTreeMap<&String, String> = st
        .tasks
        .iter()
        .filter(|(_, t)| t.state == events::TaskState::Running)
        .filter_map(|(k, t)| {
            let ms = live.as_ref()?.silent_ms(k, t.attempt, now)?;
            Some((k, crate::swarm::live::human(ms)))
        })
        .collect();
    Ok(Some(json!({
        "id": id,
        "state": st,
        "reporting": live.is_some(),
        "silent": silent,
        "attempts": bars,
        "contract_validator": contract,
        "gantt": gantt_svg(&bars, contract.as_ref()),
        "budget": crate::swarm::runtime::budget::standing(&ws.config, &st),
    })))
}

/// An attempt as the chart draws it: seconds from the run's start.
#[derive(serde::Serialize, Clone)]
struct Bar {
    task: String,
    attempt: u32,
    start: f64,
    end: Option<f64>,
    outcome: &'static str,
    nudges: Vec<f64>,
    restarted: bool,
    /// When its worker exited; the gauntlet's steps and the contract checks ran after.
    worker_end: Option<f64>,
    /// The attempt's validators: each gauntlet step and contract check, in the order they ran.
    steps: Vec<StepBar>,
}

/// One gauntlet step or contract check of an attempt (seconds from the run's start).
#[derive(serde::Serialize, Clone)]
struct StepBar {
    name: String,
    start: f64,
    end: f64,
    passed: bool,
}

/// The run's contract validator, as the chart marks it before the first attempt.
#[derive(serde::Serialize, Clone)]
struct ContractMark {
    validator: String,
    verdict: String,
    findings: usize,
}

/// The run's attempts as the chart draws them, from its events.
fn attempts(records: &[events::Record]) -> Vec<Bar> {
    let t0 = records
        .first()
        .and_then(|r| crate::governance::time::parse_rfc3339(&r.at).ok())
        .unwrap_or(0);
    let at = |r: &events::Record| {
        crate::governance::time::parse_rfc3339(&r.at)
            .map(|t| (t - t0) as f64)
            .unwrap_or(0.0)
    };
    let mut bars: Vec<Bar> = Vec::new();
    for r in records {
        if let RunEvent::AttemptStarted { task, attempt, .. } = &r.event {
            bars.push(Bar {
                task: task.clone(),
                attempt: *attempt,
                start: at(r),
                end: None,
                outcome: "running",
                nudges: Vec::new(),
                restarted: false,
                worker_end: None,
                steps: Vec::new(),
            });
        } else if let Some((task, attempt)) = attempt_of(&r.event) {
            if let Some(i) = bars
                .iter()
                .rposition(|b| b.task == task && b.attempt == attempt)
            {
                mark(&mut bars[i], &r.event, at(r));
            }
        }
    }
    bars
}

/// The attempt an event that [`mark`]s a bar is about.
fn attempt_of(event: &RunEvent) -> Option<(&str, u32)> {
    match event {
        RunEvent::WorkerExited { task, attempt, .. }
        | RunEvent::StepFinished { task, attempt, .. }
        | RunEvent::Nudged { task, attempt, .. }
        | RunEvent::Restarted { task, attempt, .. }
        | RunEvent::AttemptFailed { task, attempt, .. }
        | RunEvent::AttemptPassed { task, attempt, .. } => Some((task, *attempt)),
        _ => None,
    }
}

/// What `event`, recorded `at` seconds from the run's start, adds to its attempt's bar `b`.
fn mark(b: &mut Bar, event: &RunEvent, at: f64) {
    // The measured duration, where recorded: event times have whole seconds.
    let measured = |b: &Bar, ms: &Option<u64>| ms.map_or(at, |m| b.start + m as f64 / 1000.0);
    match event {
        RunEvent::WorkerExited { ms, .. } => b.worker_end = Some(measured(b, ms)),
        RunEvent::StepFinished {
            step,
            passed,
            secs,
            ms,
            ..
        } => {
            // Steps run one after another once the worker has exited.
            let start = b
                .steps
                .last()
                .map(|s| s.end)
                .or(b.worker_end)
                .unwrap_or(b.start);
            let took = ms.map_or(*secs as f64, |m| m as f64 / 1000.0);
            b.steps.push(StepBar {
                name: step.clone(),
                start,
                end: start + took,
                passed: *passed,
            });
        }
        RunEvent::Nudged { .. } => b.nudges.push(at),
        RunEvent::Restarted { .. } => b.restarted = true,
        RunEvent::AttemptFailed { ms, .. } => {
            b.end = Some(measured(b, ms));
            b.outcome = if b.restarted { "restarted" } else { "failed" };
        }
        RunEvent::AttemptPassed { ms, .. } => {
            b.end = Some(measured(b, ms));
            b.outcome = "passed";
        }
        _ => {}
    }
}

fn colour(outcome: &str) -> &'static str {
    match outcome {
        "passed" => "#2e7d32",
        "failed" => "#c62828",
        "restarted" => "#ef6c00",
        _ => "#1565c0",
    }
}

/// The Gantt chart as SVG (only numbers and escaped names go into it): a row per task, a bar
/// per attempt coloured by how it ended, nudges as yellow marks, and under each bar its
/// validators — the gauntlet's steps and the contract checks, green or red, from the worker's
/// exit; the run's contract validator is the first row, before any attempt.
fn gantt_svg(bars: &[Bar], contract: Option<&ContractMark>) -> String {
    let mut tasks: Vec<&str> = Vec::new();
    for b in bars {
        if !tasks.contains(&b.task.as_str()) {
            tasks.push(&b.task);
        }
    }
    let span = bars
        .iter()
        .flat_map(|b| {
            [b.end.unwrap_or(b.start + 1.0)]
                .into_iter()
                .chain(b.steps.iter().map(|s| s.end))
        })
        .fold(1.0_f64, f64::max);
    let (left, width, row) = (160.0, 600.0, 30.0);
    let x = |t: f64| left + t / span * width;
    let top = if contract.is_some() { row } else { 0.0 };
    let height = top + row * tasks.len() as f64 + 30.0;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{height}\" role=\"img\" aria-label=\"attempts per task over time, with their validators\">",
        left + width + 20.0
    );
    if let Some(c) = contract {
        s.push_str(&contract_svg(c, left));
    }
    for (i, t) in tasks.iter().enumerate() {
        let y = top + 10.0 + row * i as f64;
        s.push_str(&format!(
            "<text x=\"4\" y=\"{}\" font-size=\"12\">{}</text>",
            y + 14.0,
            escape(t)
        ));
        for b in bars.iter().filter(|b| b.task == *t) {
            s.push_str(&bar_svg(b, y, span, &x));
        }
    }
    s.push_str(&format!(
        "<text x=\"{left}\" y=\"{}\" font-size=\"11\">0 s</text><text x=\"{}\" y=\"{}\" font-size=\"11\">{span:.1} s</text></svg>",
        height - 4.0,
        left + width - 30.0,
        height - 4.0
    ));
    s
}

/// The run's contract validator as the chart's first row: a diamond at the time axis's start
/// (`left`), green when it approved.
fn contract_svg(c: &ContractMark, left: f64) -> String {
    let fill = if c.verdict == "approve" {
        "#2e7d32"
    } else {
        "#c62828"
    };
    let y = 10.0;
    format!(
        "<text x=\"4\" y=\"{}\" font-size=\"12\">contract validator</text><polygon class=\"contract\" points=\"{l},{y} {r},{m} {l},{b} {ll},{m}\" fill=\"{fill}\"><title>{}: {} ({} finding(s)) before the first attempt</title></polygon><text x=\"{}\" y=\"{}\" font-size=\"11\">{}</text>",
        y + 14.0,
        escape(&c.validator),
        escape(&c.verdict),
        c.findings,
        left + 12.0,
        y + 13.0,
        escape(&c.verdict),
        l = left,
        r = left + 8.0,
        ll = left - 8.0,
        m = y + 9.0,
        b = y + 18.0,
    )
}

/// One attempt's bar at height `y` (`x` maps seconds to the axis; a running attempt reaches
/// the chart's `span`), with its nudges and, under it, its validators.
fn bar_svg(b: &Bar, y: f64, span: f64, x: &dyn Fn(f64) -> f64) -> String {
    let end = b.end.unwrap_or(span);
    let mut s = format!(
        "<rect x=\"{:.1}\" y=\"{y}\" width=\"{:.1}\" height=\"16\" fill=\"{}\"><title>{} attempt {}: {}</title></rect>",
        x(b.start),
        (x(end) - x(b.start)).max(3.0),
        colour(b.outcome),
        escape(&b.task),
        b.attempt,
        b.outcome
    );
    for n in &b.nudges {
        s.push_str(&format!(
            "<line x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"{y}\" y2=\"{1}\" stroke=\"#fbc02d\" stroke-width=\"2\"/>",
            x(*n),
            y + 16.0
        ));
    }
    for st in &b.steps {
        s.push_str(&format!(
            "<rect class=\"step\" x=\"{:.1}\" y=\"{}\" width=\"{:.1}\" height=\"6\" fill=\"{}\" stroke=\"#fff\" stroke-width=\"0.5\"><title>{} attempt {}: {} {} in {:.1} s</title></rect>",
            x(st.start),
            y + 17.0,
            (x(st.end) - x(st.start)).max(2.0),
            if st.passed { "#66bb6a" } else { "#e53935" },
            escape(&b.task),
            b.attempt,
            escape(&st.name),
            if st.passed { "passed" } else { "failed" },
            st.end - st.start
        ));
    }
    s
}

/// What ended a silence, as the silence plot labels its rows (keys of `Silences::samples`).
const SILENCE_ROWS: [(&str, &str); 6] = [
    ("output_then_passed", "output, attempt passed"),
    ("output", "output"),
    ("exit_then_passed", "exit, attempt passed"),
    ("exit", "exit"),
    ("restart", "restart"),
    ("timeout", "timeout"),
];

/// The most points drawn in one row (evenly picked from the sorted silences beyond that).
const SILENCE_POINTS: usize = 1_000;

/// `850 ms`, `12.5 s`, `3m05s`.
fn short_ms(ms: u64) -> String {
    if ms < 1_000 {
        format!("{ms} ms")
    } else if ms < 60_000 {
        format!("{:.1} s", ms as f64 / 1000.0)
    } else {
        crate::swarm::live::human(ms)
    }
}

/// Per role, its non-empty rows of silences: (label, silences).
type SilenceRows<'a> = Vec<(&'a str, &'a Vec<u64>)>;

/// The silence plot's time axis: logarithmic, from `lo` to `hi` (log10 of milliseconds),
/// drawn `width` wide from `left`.
struct LogAxis {
    lo: f64,
    hi: f64,
    left: f64,
    width: f64,
}

impl LogAxis {
    fn x(&self, ms: u64) -> f64 {
        self.left + ((ms.max(100) as f64).log10() - self.lo) / (self.hi - self.lo) * self.width
    }
}

/// The silence distributions from `stats` as SVG: per role, a row per cause with a dot per
/// silence on a logarithmic time axis and the median marked, and the latest run's nudge and
/// restart thresholds as dashed lines. Empty when no silence was recorded.
fn silence_svg(stats: &crate::swarm::stats::Stats) -> String {
    let roles = silence_rows(stats);
    if roles.is_empty() {
        return String::new();
    }
    let settings = stats.runs.iter().rev().find_map(|r| r.settings.as_ref());
    let longest = roles
        .iter()
        .flat_map(|(_, rows)| rows.iter().filter_map(|(_, v)| v.last().copied()))
        .chain(settings.map(|s| s.restart_after_ms))
        .max()
        .unwrap_or(1_000);
    // From 100 ms to a little past the longest silence (or the restart threshold).
    let (lo, hi) = (100f64.log10(), ((longest.max(1_000) as f64) * 1.5).log10());
    let (left, width, row, gap) = (300.0, 560.0, 20.0, 18.0);
    let axis = LogAxis {
        lo,
        hi,
        left,
        width,
    };
    let rows: usize = roles.iter().map(|(_, r)| r.len()).sum();
    let height = 24.0 + row * rows as f64 + gap * roles.len() as f64 + 24.0;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{height}\" role=\"img\" aria-label=\"silences by what ended them, per role\">",
        left + width + 20.0
    );
    let bottom = height - 24.0;
    s.push_str(&silence_ticks(&axis, bottom));
    if let Some(st) = settings {
        s.push_str(&silence_thresholds(&axis, bottom, st));
    }
    let mut y = 24.0;
    for (role, rows) in &roles {
        s.push_str(&format!(
            "<text x=\"4\" y=\"{}\" font-size=\"12\" font-weight=\"bold\">{}</text>",
            y + 12.0,
            escape(role)
        ));
        y += gap;
        for (label, v) in rows {
            s.push_str(&silence_row(&axis, y, label, v));
            y += row;
        }
    }
    s.push_str("</svg>");
    s
}

/// Each role with the rows of [`SILENCE_ROWS`] it has silences for; roles without any are left
/// out.
fn silence_rows(stats: &crate::swarm::stats::Stats) -> Vec<(&String, SilenceRows<'_>)> {
    stats
        .roles
        .iter()
        .map(|(role, r)| {
            let rows = SILENCE_ROWS
                .iter()
                .filter_map(|(key, label)| {
                    r.silences
                        .samples
                        .get(*key)
                        .filter(|v| !v.is_empty())
                        .map(|v| (*label, v))
                })
                .collect::<Vec<_>>();
            (role, rows)
        })
        .filter(|(_, rows)| !rows.is_empty())
        .collect()
}

/// Time ticks down to `bottom`: 0.1 s, 1 s, 10 s, 1 min, 10 min, 1 h where they fall on the
/// axis.
fn silence_ticks(axis: &LogAxis, bottom: f64) -> String {
    let mut s = String::new();
    for (ms, label) in [
        (100u64, "0.1 s"),
        (1_000, "1 s"),
        (10_000, "10 s"),
        (60_000, "1 min"),
        (600_000, "10 min"),
        (3_600_000, "1 h"),
    ] {
        if (ms as f64).log10() > axis.hi {
            break;
        }
        s.push_str(&format!(
            "<line x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"16\" y2=\"{bottom}\" stroke=\"#e0e0e0\"/><text x=\"{0:.1}\" y=\"{1}\" font-size=\"10\" text-anchor=\"middle\">{label}</text>",
            axis.x(ms),
            bottom + 14.0
        ));
    }
    s
}

/// The latest run's nudge and restart thresholds (`st`) as dashed lines down to `bottom`.
fn silence_thresholds(
    axis: &LogAxis,
    bottom: f64,
    st: &crate::swarm::stats::RunSettings,
) -> String {
    let mut s = String::new();
    for (ms, colour, name) in [
        (st.nudge_after_ms, "#fbc02d", "nudge_after"),
        (st.restart_after_ms, "#ef6c00", "restart_after"),
    ] {
        s.push_str(&format!(
            "<line class=\"threshold\" x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"12\" y2=\"{bottom}\" stroke=\"{colour}\" stroke-width=\"2\" stroke-dasharray=\"4 3\"><title>{name} = {ms} ms (the latest run's)</title></line><text x=\"{0:.1}\" y=\"10\" font-size=\"10\" text-anchor=\"middle\">{name}</text>",
            axis.x(ms)
        ));
    }
    s
}

/// One row at height `y`: its `label` with the count and median, a dot per silence in `v`
/// (sorted; at most [`SILENCE_POINTS`] drawn), and the median marked.
fn silence_row(axis: &LogAxis, y: f64, label: &str, v: &[u64]) -> String {
    let median = crate::swarm::stats::percentile(v, 50);
    let mut s = format!(
        "<text x=\"16\" y=\"{}\" font-size=\"11\">{} ({}; median {})</text>",
        y + 9.0,
        escape(label),
        v.len(),
        short_ms(median)
    );
    let step = v.len().div_ceil(SILENCE_POINTS).max(1);
    for (i, ms) in v.iter().step_by(step).enumerate() {
        // A small deterministic spread, so equal silences stay visible as many.
        let dy = (i % 5) as f64 * 2.0 - 4.0;
        s.push_str(&format!(
            "<circle class=\"silence\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"#1565c0\" fill-opacity=\"0.45\"><title>{} ms</title></circle>",
            axis.x(*ms),
            y + 5.0 + dy,
            ms
        ));
    }
    s.push_str(&format!(
        "<line class=\"median\" x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#000\" stroke-width=\"2\"><title>median {3} ms</title></line>",
        axis.x(median),
        y - 3.0,
        y + 13.0,
        median
    ));
    s
}

/// The attempt-success curve from `stats`: P(pass at attempt k) per role, as bars.
fn curve_svg(stats: &crate::swarm::stats::Stats) -> String {
    let bars: Vec<(String, f64)> = stats
        .roles
        .iter()
        .flat_map(|(role, r)| {
            r.curve
                .iter()
                .map(move |c| (format!("{role} #{}", c.attempt), c.p_pass))
        })
        .collect();
    if bars.is_empty() {
        return String::new();
    }
    let (w, h) = (160.0, 120.0);
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" role=\"img\" aria-label=\"probability of passing at each attempt\">",
        w * bars.len() as f64 + 10.0,
        h + 30.0
    );
    for (i, (label, p)) in bars.iter().enumerate() {
        let bh = (p.clamp(0.0, 1.0)) * h;
        s.push_str(&format!(
            "<rect x=\"{}\" y=\"{}\" width=\"40\" height=\"{bh:.1}\" fill=\"#1565c0\"><title>{}: {:.0} %</title></rect><text x=\"{}\" y=\"{}\" font-size=\"10\">{} ({:.0} %)</text>",
            10.0 + w * i as f64,
            h - bh + 5.0,
            escape(label),
            p * 100.0,
            10.0 + w * i as f64,
            h + 20.0,
            escape(label),
            p * 100.0
        ));
    }
    s.push_str("</svg>");
    s
}

fn improvements(ws: &Workspace) -> anyhow::Result<Value> {
    let list = workflow::cycle::improvements(ws)?;
    let svg = improvement_svg(&list);
    Ok(json!({ "improvements": list, "curve": svg }))
}

/// Each merged cycle proposal's delta with its interval, oldest first (lower is better).
fn improvement_svg(list: &[workflow::cycle::Improvement]) -> String {
    let points: Vec<(String, f64, f64, f64)> = list
        .iter()
        .filter_map(|i| {
            let d = i.delta.as_ref()?;
            let (lo, hi) = if d.low.is_finite() {
                (d.low, d.high)
            } else {
                (d.delta, d.delta)
            };
            Some((
                format!("{} {}", i.proposal, i.metric.clone().unwrap_or_default()),
                d.delta,
                lo,
                hi,
            ))
        })
        .collect();
    if points.is_empty() {
        return String::new();
    }
    let extent = points
        .iter()
        .flat_map(|p| [p.1.abs(), p.2.abs(), p.3.abs()])
        .fold(1.0_f64, f64::max);
    let (w, h) = (90.0, 200.0);
    let y = |v: f64| h / 2.0 - v / extent * (h / 2.0 - 10.0) + 10.0;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" role=\"img\" aria-label=\"measured delta of each merged improvement, with its 95 % interval\"><line x1=\"0\" x2=\"{}\" y1=\"{}\" y2=\"{}\" stroke=\"#999\"/>",
        w * points.len() as f64 + 20.0,
        h + 40.0,
        w * points.len() as f64 + 20.0,
        y(0.0),
        y(0.0)
    );
    for (i, (label, d, lo, hi)) in points.iter().enumerate() {
        let cx = 30.0 + w * i as f64;
        s.push_str(&format!(
            "<line x1=\"{cx}\" x2=\"{cx}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#555\" stroke-width=\"2\"/><circle cx=\"{cx}\" cy=\"{:.1}\" r=\"5\" fill=\"{}\"><title>{}: {d:+.2} [{lo:+.2}, {hi:+.2}]</title></circle><text x=\"{}\" y=\"{}\" font-size=\"10\">{}</text>",
            y(*lo),
            y(*hi),
            y(*d),
            if *hi < 0.0 { "#2e7d32" } else if *lo > 0.0 { "#c62828" } else { "#757575" },
            escape(label),
            cx - 25.0,
            h + 30.0,
            escape(label)
        ));
    }
    s.push_str("</svg>");
    s
}

/// Text for SVG built here (the templates escape everything else).
fn escape(t: &str) -> String {
    t.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}
