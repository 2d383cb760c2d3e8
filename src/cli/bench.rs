//! `atelier bench replay`: the replay benchmark (`swarm::bench`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Subcommand};

use super::{json, out};
use crate::improve::bench;
use crate::improve::metrics::ConductorSettings;
use crate::workflow::{self, Workspace};

#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Run the built-in missions under a baseline and a candidate configuration, interleaved,
    /// and report each metric's delta with a 95 % interval across seeds.
    Replay(ReplayArgs),
    /// Record a finished run as a replay mission of this repository (`missions/<ID>.toml` in
    /// the working tree, to commit and propose): each task's attempts as they happened.
    Record(RecordArgs),
    /// One mission under one configuration, printed as its metrics in JSON: what another build
    /// of atelier is asked to run for `bench replay --baseline REV`.
    #[command(hide = true)]
    Sample(SampleArgs),
}

#[derive(Args, Debug)]
pub struct RecordArgs {
    /// The run (`atelier status` lists them).
    run: String,
    /// The mission's id (default: `run-<RUN>`).
    #[arg(long)]
    id: Option<String>,
    /// Seconds of the run per second of replay (default: the run's restart_after, or its
    /// longest silence, replays in about 5 s).
    #[arg(long)]
    scale: Option<u64>,
}

#[derive(Args, Debug)]
pub struct SampleArgs {
    /// A built-in mission.
    #[arg(
        long,
        required_unless_present = "mission_file",
        conflicts_with = "mission_file"
    )]
    mission: Option<String>,
    /// A mission file (a repository's own mission).
    #[arg(long)]
    mission_file: Option<PathBuf>,
    #[arg(long)]
    seed: u64,
    /// A TOML file with the [conductor] to run.
    #[arg(long)]
    config: PathBuf,
}

#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// The baseline: an atelier.toml (or any TOML file) whose [conductor] is compared against
    /// (default: the protected branch's atelier.toml).
    #[arg(long, value_name = "FILE", conflicts_with = "baseline")]
    baseline_config: Option<PathBuf>,
    /// Another revision of atelier as the baseline: built here (`cargo build --release
    /// --locked` in a worktree of REV, sharing one target directory, uncontained: name only a
    /// revision you trust) and asked to run each mission; the candidate is this atelier. The
    /// configuration on both sides is the baseline's (--baseline-config, else the protected
    /// branch's), unless --candidate-config is given.
    #[arg(long, value_name = "REV", conflicts_with = "baseline_bin")]
    baseline: Option<String>,
    /// An atelier binary already built as the baseline (what --baseline REV builds).
    #[arg(long, value_name = "PATH")]
    baseline_bin: Option<PathBuf>,
    /// The candidate's [conductor] (default: the working tree's atelier.toml).
    #[arg(long, value_name = "FILE")]
    candidate_config: Option<PathBuf>,
    /// Seeds: each runs every mission once per side (at least 2 for an interval).
    #[arg(long, default_value_t = 5)]
    seeds: u64,
    /// Only this mission.
    #[arg(long, value_name = "ID")]
    mission: Option<String>,
    /// Print the result as JSON (one document on stdout) instead of text.
    #[arg(long)]
    json: bool,
}

/// The [conductor] of a TOML file (an atelier.toml, or just a [conductor] table).
fn conductor_of(path: &Path) -> anyhow::Result<ConductorSettings> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| workflow::Error::Input(format!("reading {}: {e}", path.display())))?;
    #[derive(serde::Deserialize)]
    struct Only {
        #[serde(default)]
        conductor: crate::config::ConductorConfig,
    }
    let only: Only = toml::from_str(&text).map_err(|e| {
        workflow::Error::Input(format!("{}: {}", path.display(), e.to_string().trim_end()))
    })?;
    // Its durations were checked as they were read.
    Ok(ConductorSettings::of(&only.conductor))
}

pub fn bench(dir: &Path, cmd: BenchCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        BenchCommand::Replay(a) => replay(dir, a),
        BenchCommand::Record(a) => record(dir, a),
        BenchCommand::Sample(a) => sample(a),
    }
}

/// `bench sample`: one mission under one configuration, as JSON.
fn sample(a: SampleArgs) -> anyhow::Result<ExitCode> {
    let mission = match (&a.mission, &a.mission_file) {
        (Some(id), _) => bench::built_in(id)?,
        (None, Some(f)) => {
            let text = std::fs::read_to_string(f)
                .map_err(|e| workflow::Error::Input(format!("reading {}: {e}", f.display())))?;
            bench::parse_mission(&f.display().to_string(), &text)?
        }
        (None, None) => unreachable!("clap requires one"),
    };
    let metrics = bench::sample(&mission, &conductor_of(&a.config)?, a.seed)?;
    json(&metrics)?;
    Ok(ExitCode::SUCCESS)
}

/// What `bench replay` says first (stderr): its figures are a preview, never evidence.
const HAND_WARNING: &str = "bench replay: these figures are not evidence. They use seeds 0, 1, 2, …; `atelier cycle` draws its seeds from the ledger entry that registers the metric, so no replay run before it reproduces the cycle's benchmark, and only the cycle's evidence counts";

/// `bench replay`: the baseline's side (a configuration, or another build) against the
/// candidate configuration here.
fn replay(dir: &Path, args: ReplayArgs) -> anyhow::Result<ExitCode> {
    let baseline = match &args.baseline_config {
        Some(p) => conductor_of(p)?,
        None => {
            let ws = Workspace::open(dir)?;
            ConductorSettings::of(&crate::improve::lint::branch_config(&ws)?.conductor)
        }
    };
    let other_build = match (&args.baseline, &args.baseline_bin) {
        (Some(rev), _) => Some(crate::improve::builds::trusted(
            &Workspace::open(dir)?,
            "--baseline",
            rev,
            &|m| super::note!("{m}"),
        )?),
        (None, Some(p)) => Some((p.clone(), p.display().to_string())),
        (None, None) => None,
    };
    let candidate = match (&args.candidate_config, &other_build) {
        (Some(p), _) => conductor_of(p)?,
        // Another build: the same configuration on both sides, unless one is named.
        (None, Some(_)) => baseline.clone(),
        (None, None) => ConductorSettings::of(&Workspace::open(dir)?.config.conductor),
    };
    let base_side = match other_build {
        Some((path, label)) => bench::Side::Binary {
            path,
            label,
            conductor: baseline.clone(),
            sandbox: None,
        },
        None => bench::Side::Here(baseline.clone()),
    };
    // The built-in missions and, in a repository, its protected branch's own.
    let all = match Workspace::open(dir) {
        Ok(ws) => bench::of_workspace(&ws, &|m| super::note!("bench: {m}"))?,
        Err(_) => bench::missions()?,
    };
    super::note!("{HAND_WARNING}");
    let report = bench::replay_sides(
        &base_side,
        &bench::Side::Here(candidate),
        &all,
        &bench::hand_seeds(args.seeds),
        args.mission.as_deref(),
        &|t| super::note!("{t}"),
    )?;
    if args.json {
        json(&report)?;
    } else {
        out(&replay_text(&report))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// A replay's report as `bench replay` prints it: the two sides, then a metric a line.
fn replay_text(report: &bench::Report) -> String {
    let side = |c: &ConductorSettings| {
        format!(
            "nudge_after {}, restart_after {}, attempt_timeout {}, failure_budget {}",
            c.nudge_after, c.restart_after, c.attempt_timeout, c.failure_budget
        )
    };
    let build = |b: &Option<String>| {
        b.as_ref()
            .map(|b| format!(" (run by the {b} build)"))
            .unwrap_or_default()
    };
    let mut t = format!(
        "replay: missions {}, {} seed(s), interleaved\n  baseline:  {}{}\n  candidate: {}{}\n  interval:  {}\n\n",
        report.missions.join(", "),
        report.seeds,
        side(&report.baseline),
        build(&report.baseline_build),
        side(&report.candidate),
        build(&report.candidate_build),
        report.interval
    );
    t.push_str(&format!(
        "{:<16} {:>10} {:>10} {:>10} {:>22}  {}\n",
        "METRIC", "BASELINE", "CANDIDATE", "DELTA", "95% INTERVAL", "VERDICT"
    ));
    for d in &report.deltas {
        t.push_str(&format!(
            "{:<16} {:>10.1} {:>10.1} {:>10.1} {:>22}  {}\n",
            d.metric,
            d.baseline_mean,
            d.candidate_mean,
            d.delta,
            if d.low.is_finite() {
                format!("[{:.1}, {:.1}]", d.low, d.high)
            } else {
                "(one seed: none)".into()
            },
            d.verdict
        ));
    }
    t
}

fn record(dir: &Path, a: RecordArgs) -> anyhow::Result<ExitCode> {
    let ws = Workspace::open(dir)?;
    let run_dir = crate::swarm::runtime::run_dir(&ws, &a.run);
    let events = run_dir.join("events.jsonl");
    if !events.is_file() {
        return Err(workflow::Error::Input(format!(
            "run {}: no events at {} (`atelier stats` lists the runs)",
            a.run,
            events.display()
        ))
        .into());
    }
    let records = crate::swarm::events::read(&events)?;
    let id = a.id.clone().unwrap_or_else(|| {
        format!(
            "run-{}",
            a.run
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
                .collect::<String>()
        )
    });
    let text = bench::record(&a.run, &records, &id, a.scale)?;
    let known = bench::of_workspace(&ws, &|m| super::note!("bench: {m}"))?;
    if known.iter().any(|m| m.mission.id == id) {
        return Err(workflow::Error::Input(format!(
            "--id {id}: a mission with that id exists already (built in or on {}); choose another with --id",
            ws.branch()
        ))
        .into());
    }
    let rel = format!("missions/{id}.toml");
    let path = ws.root.join(&rel);
    if path.exists() {
        return Err(workflow::Error::Input(format!(
            "{rel} exists in the working tree: move it away or choose another --id"
        ))
        .into());
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    crate::fsutil::atomic_write(&path, text.as_bytes())?;
    out(&format!(
        "recorded run {} as mission `{id}` in {rel}\nMissions are judge paths: commit it and propose it as a person (`atelier propose`); once merged, `atelier bench replay --mission {id}` and every cycle run it.\n",
        a.run
    ))?;
    Ok(ExitCode::SUCCESS)
}
