//! The replay benchmark: `atelier bench replay`. A frozen set of missions (`missions/*.toml`,
//! built into the binary) — tasks run by a scripted agent with seeded misbehaviour (silence,
//! flakiness, crashes, wrong answers) — is run under a baseline and a candidate conductor
//! configuration, interleaved seed by seed, each run in a fresh temporary repository with the
//! real conductor; the metrics come from each run's events. Every delta (candidate − baseline)
//! gets a 95 % confidence interval across seeds: Student's t on the per-seed differences
//! (paired; the same seed runs the same misbehaviour under both). What is measured and how it
//! is compared is `metrics`; this module runs the missions.
//!
//! The missions and their agents are judge paths (Atelier's `reviewers/judge-tamper.toml`): a
//! proposal from the cycle cannot change what measures it.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use super::metrics::{compare, measure, ConductorSettings, Delta, Sample, METRICS};
use crate::agent::process::Stopwatch;
use crate::swarm::events::{self, RunEvent};
use crate::workflow::error::{Context, Result};

/// The built-in missions, as `(file, text)`.
pub const MISSIONS: &[(&str, &str)] = &[
    (
        "missions/silent.toml",
        include_str!("../../missions/silent.toml"),
    ),
    (
        "missions/flaky.toml",
        include_str!("../../missions/flaky.toml"),
    ),
];

/// A mission: tasks with the behaviour of their scripted agent.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mission {
    pub mission: MissionHead,
    #[serde(rename = "task")]
    pub tasks: Vec<MissionTask>,
    /// The file's text (what another build is given to run it).
    #[serde(skip)]
    pub text: String,
}

#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MissionHead {
    pub id: String,
    pub title: String,
    /// Seconds of the recorded run per second of replay (a mission recorded from a run whose
    /// silences lasted minutes replays in seconds): the behaviours' durations and both sides'
    /// `[conductor]` durations are divided by it. 1 for the built-in missions.
    #[serde(default = "one")]
    pub scale: u64,
}

fn one() -> u64 {
    1
}

#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MissionTask {
    pub id: String,
    pub behaviour: String,
    /// For `behaviour = "recorded"`: what each attempt did, in order (the last one repeats).
    #[serde(default)]
    pub attempts: Vec<RecordedAttempt>,
}

/// One attempt of a recorded task: how long it was silent before it ended, and how it ended.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordedAttempt {
    #[serde(default)]
    pub quiet_ms: u64,
    /// `pass`, `fail` (exit 1), `crash` (killed by a signal), `wrong` (exits 0, the check
    /// fails) or `hang` (never ends by itself: it was restarted or timed out).
    pub then: String,
}

const ENDINGS: &[&str] = &["pass", "fail", "crash", "wrong", "hang"];

/// A mission file's text, parsed and checked; `file` names it in errors.
pub fn parse_mission(file: &str, text: &str) -> Result<Mission> {
    let bad = |what: String| crate::workflow::Error::Input(format!("{file}: {what}"));
    let mut m: Mission = toml::from_str(text).map_err(|e| bad(e.to_string().trim_end().into()))?;
    m.text = text.to_string();
    let word = |s: &str| {
        !s.is_empty()
            && s.len() <= 64
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    if !word(&m.mission.id) {
        return Err(bad(format!(
            "mission.id `{}`: letters, digits, `-` and `_` only (it names files and the plan)",
            m.mission.id
        )));
    }
    if m.mission.scale == 0 {
        return Err(bad("mission.scale: at least 1".into()));
    }
    if m.tasks.is_empty() {
        return Err(bad("no [[task]]: a mission has at least one".into()));
    }
    let mut seen = std::collections::BTreeSet::new();
    for t in &m.tasks {
        if !word(&t.id) || !seen.insert(t.id.clone()) {
            return Err(bad(format!(
                "task.id `{}`: letters, digits, `-` and `_`, once per mission",
                t.id
            )));
        }
        if t.behaviour == "recorded" {
            if t.attempts.is_empty() {
                return Err(bad(format!(
                    "task {}: behaviour \"recorded\" needs attempts = [{{ quiet_ms = N, then = \"pass\" }}, …]",
                    t.id
                )));
            }
            if let Some(a) = t
                .attempts
                .iter()
                .find(|a| !ENDINGS.contains(&a.then.as_str()))
            {
                return Err(bad(format!(
                    "task {}: attempts: then = \"{}\" is not one of {}",
                    t.id,
                    a.then,
                    ENDINGS.join(", ")
                )));
            }
        } else if !t.attempts.is_empty() {
            return Err(bad(format!(
                "task {}: attempts belong to behaviour = \"recorded\" only",
                t.id
            )));
        }
        behaviour(t, 1, 0).map_err(|e| bad(e.to_string()))?;
    }
    Ok(m)
}

/// The built-in missions, parsed (a mission that does not parse is a bug: tests parse them all).
pub fn missions() -> Result<Vec<Mission>> {
    MISSIONS.iter().map(|(f, t)| parse_mission(f, t)).collect()
}

/// The missions a repository runs: the built-in ones, then the protected branch's own
/// `missions/*.toml` (never the working tree's or a proposal's: missions are judge paths). A
/// file whose id is built in is the built-in mission's source (as in Atelier's own
/// repository) and is skipped; `notes` says so when its text differs from this build's.
pub fn repository_missions(
    repo: &git2::Repository,
    tree: &git2::Tree<'_>,
    branch: &str,
    notes: &mut Vec<String>,
) -> Result<Vec<Mission>> {
    let mut all = missions()?;
    let Ok(entry) = tree.get_path(Path::new("missions")) else {
        return Ok(all);
    };
    let Ok(dir) = repo.find_tree(entry.id()) else {
        return Ok(all);
    };
    for e in dir.iter() {
        let Some(name) = e.name().filter(|n| n.ends_with(".toml")) else {
            continue;
        };
        let Ok(blob) = repo.find_blob(e.id()) else {
            continue;
        };
        let file = format!("missions/{name} on {branch}");
        let text = std::str::from_utf8(blob.content())
            .map_err(|_| crate::workflow::Error::Input(format!("{file}: not UTF-8")))?;
        let m = parse_mission(&file, text)?;
        if MISSIONS
            .iter()
            .any(|(_, t)| parse_mission("", t).is_ok_and(|b| b.mission.id == m.mission.id))
        {
            if !MISSIONS.iter().any(|(_, t)| *t == text) {
                notes.push(format!(
                    "{file}: mission `{}` is built in; this build's own version runs",
                    m.mission.id
                ));
            }
            continue;
        }
        if all.iter().any(|x| x.mission.id == m.mission.id) {
            return Err(crate::workflow::Error::Input(format!(
                "{file}: mission.id `{}` is another file's already: give each mission its own id",
                m.mission.id
            )));
        }
        all.push(m);
    }
    Ok(all)
}

/// The missions `ws` runs: the built-in ones and its protected branch's `missions/*.toml`;
/// notes about skipped files go to `say`.
pub fn of_workspace(ws: &crate::workflow::Workspace, say: &dyn Fn(&str)) -> Result<Vec<Mission>> {
    let tip = crate::git::branch_tip(&ws.repo, ws.branch())?;
    let tree = ws.repo.find_commit(tip)?.tree()?;
    let mut notes = Vec::new();
    let all = repository_missions(&ws.repo, &tree, ws.branch(), &mut notes)?;
    for n in notes {
        say(&n);
    }
    Ok(all)
}

/// The scripted agent's shell code for one task under `seed`: what it does at each attempt.
/// `$D` is the bench's directory; a `would-pass` marker says the attempt would have passed had
/// it not been stopped (so a restart of it is a false kill). `scale` divides a recorded task's
/// durations.
pub fn behaviour(t: &MissionTask, scale: u64, seed: u64) -> Result<String> {
    let task = t.id.as_str();
    let out = format!("out/{task}.txt");
    let done = format!("mkdir -p out; echo done > {out}");
    let marker = format!("touch \"$D/would-pass-{task}-$ATELIER_ATTEMPT\"");
    Ok(match t.behaviour.as_str() {
        // Quiet for 1.5, 2.5 or 3.5 s on its first attempt (and 0 to 0.3 s more, by the
        // seed's drawn part: `evidence::draw_seeds`), then delivers.
        "silent" => {
            let tenths = 15 + 10 * (seed % 3) + (seed / 6) % 4;
            format!(
                "if [ \"$ATELIER_ATTEMPT\" = 1 ]; then echo thinking; {marker}; sleep {}.{}; fi; {done}",
                tenths / 10,
                tenths % 10
            )
        }
        "steady" => format!("echo working; {done}"),
        // Fails its first 0, 1 or 2 attempts with the same error, then passes.
        "flaky" => format!(
            "if [ \"$ATELIER_ATTEMPT\" -le {} ]; then echo 'error: flaky failure at {out}:1'; exit 1; fi; {done}",
            seed % 3
        ),
        // Killed by a signal on its first attempt for even seeds.
        "crash" => {
            if seed.is_multiple_of(2) {
                format!("if [ \"$ATELIER_ATTEMPT\" = 1 ]; then kill -9 $$; fi; {done}")
            } else {
                done
            }
        }
        // A wrong answer on the first attempt (the check fails), right afterwards.
        "wrong" => format!(
            "mkdir -p out; if [ \"$ATELIER_ATTEMPT\" = 1 ]; then echo wrong > {out}; else echo done > {out}; fi"
        ),
        // What the recorded run's attempts did, attempt by attempt, time compressed by `scale`.
        "recorded" => {
            let mut arms = String::new();
            let n = t.attempts.len();
            for (i, a) in t.attempts.iter().enumerate() {
                let ms = a.quiet_ms / scale.max(1);
                let quiet = format!("sleep {}.{:03}", ms / 1000, ms % 1000);
                let end = match a.then.as_str() {
                    "pass" => format!("{marker}; {quiet}; {done}"),
                    "fail" => format!("{quiet}; echo 'error: recorded failure at {out}:1'; exit 1"),
                    "crash" => format!("{quiet}; kill -9 $$"),
                    "wrong" => format!("{quiet}; mkdir -p out; echo wrong > {out}"),
                    "hang" => "sleep 100000; exit 1".to_string(),
                    other => {
                        return Err(crate::workflow::Error::Input(format!(
                            "mission task {task}: then = \"{other}\" is not one of {}",
                            ENDINGS.join(", ")
                        )))
                    }
                };
                let label = if i + 1 == n {
                    "*".to_string()
                } else {
                    (i + 1).to_string()
                };
                arms.push_str(&format!("    {label}) echo working; {end} ;;\n"));
            }
            format!("case \"$ATELIER_ATTEMPT\" in\n{arms}  esac")
        }
        other => {
            return Err(crate::workflow::Error::Input(format!(
                "mission task {task}: unknown behaviour `{other}` (silent, steady, flaky, crash, wrong, recorded)"
            )))
        }
    })
}

/// What a run's attempts did, from its events: the tasks in the order their first attempt
/// started, per (task, attempt) the longest silence and how it ended, and the run's
/// `restart_after` (ms; 0 when no `settings` event says).
struct Recorded {
    order: Vec<String>,
    attempts: BTreeMap<(String, u32), (u64, Option<&'static str>)>,
    restart_ms: u64,
}

fn recorded(records: &[events::Record]) -> Recorded {
    let mut order: Vec<String> = Vec::new();
    // Per (task, attempt): the silence before it ended and how it ended.
    let mut attempts: BTreeMap<(String, u32), (u64, Option<&'static str>)> = BTreeMap::new();
    let mut exited: BTreeMap<(String, u32), Option<i32>> = BTreeMap::new();
    let mut restart_ms = 0;
    for r in records {
        match &r.event {
            RunEvent::Settings {
                restart_after_ms, ..
            } => restart_ms = *restart_after_ms,
            RunEvent::AttemptStarted { task, attempt, .. } => {
                if !order.contains(task) {
                    order.push(task.clone());
                }
                attempts.insert((task.clone(), *attempt), (0, None));
            }
            RunEvent::Quiet {
                task, attempt, ms, ..
            } => {
                if let Some(a) = attempts.get_mut(&(task.clone(), *attempt)) {
                    a.0 = a.0.max(*ms);
                }
            }
            RunEvent::Restarted {
                task,
                attempt,
                silent_secs,
                silent_ms,
            } => {
                if let Some(a) = attempts.get_mut(&(task.clone(), *attempt)) {
                    a.0 = a.0.max(silent_ms.unwrap_or(silent_secs * 1000));
                    a.1 = Some("hang");
                }
            }
            RunEvent::WorkerExited {
                task,
                attempt,
                code,
                ..
            } => {
                exited.insert((task.clone(), *attempt), *code);
            }
            RunEvent::AttemptPassed { task, attempt, .. } => {
                if let Some(a) = attempts.get_mut(&(task.clone(), *attempt)) {
                    a.1 = Some("pass");
                }
            }
            RunEvent::AttemptFailed { task, attempt, .. } => {
                let code = exited.get(&(task.clone(), *attempt)).copied();
                if let Some(a) = attempts.get_mut(&(task.clone(), *attempt)) {
                    if a.1.is_none() {
                        a.1 = Some(match code {
                            Some(None) => "crash",
                            Some(Some(0)) => "wrong",
                            _ => "fail",
                        });
                    }
                }
            }
            _ => {}
        }
    }
    Recorded {
        order,
        attempts,
        restart_ms,
    }
}

/// A mission recorded from a run's events (`atelier bench record`): each task's attempts, in
/// order, with how long each was silent before it ended and how it ended, so the replay
/// benchmark can run what really happened under other settings. `scale` compresses time
/// (default: the run's `restart_after`, or its longest silence, replays in about 5 s).
pub fn record(
    run: &str,
    records: &[events::Record],
    id: &str,
    scale: Option<u64>,
) -> Result<String> {
    let bad = |w: String| crate::workflow::Error::Input(w);
    let Recorded {
        order,
        attempts,
        restart_ms,
    } = recorded(records);
    if order.is_empty() {
        return Err(bad(format!(
            "run {run}: no attempt was recorded; there is nothing to replay"
        )));
    }
    let longest = attempts.values().map(|a| a.0).max().unwrap_or(0);
    let scale = scale
        .unwrap_or_else(|| restart_ms.max(longest).div_ceil(5000))
        .max(1);
    let quote = |t: &str| toml::Value::String(t.to_string()).to_string();
    let mut out = format!(
        "# A replay mission recorded from run {run} by `atelier bench record`: each task's attempts as\n# they happened (how long each was silent before it ended, and how it ended), time compressed by\n# `scale`. Missions are judge paths: a person adds one through a proposal, never the cycle.\n[mission]\nid = {}\ntitle = {}\nscale = {scale}   # seconds of the recorded run per second of replay\n",
        quote(id),
        quote(&format!("Recorded from run {run}"))
    );
    let word = |t: &str| -> String {
        t.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '-'
                }
            })
            .collect()
    };
    for task in &order {
        let lines: Vec<String> = attempts
            .range((task.clone(), 0)..=(task.clone(), u32::MAX))
            .filter_map(|(_, (quiet, then))| {
                then.map(|t| format!("    {{ quiet_ms = {quiet}, then = \"{t}\" }},\n"))
            })
            .collect();
        if lines.is_empty() {
            continue;
        }
        out.push_str(&format!(
            "\n[[task]]\nid = {}\nbehaviour = \"recorded\"\nattempts = [\n{}]\n",
            quote(&word(task)),
            lines.concat()
        ));
    }
    parse_mission("the recorded mission", &out)?;
    Ok(out)
}

/// What `bench replay` reports.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub baseline: ConductorSettings,
    pub candidate: ConductorSettings,
    /// The build that ran the baseline, when not this one (`--baseline REV`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline_build: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub candidate_build: Option<String>,
    pub seeds: u64,
    /// The seeds, in the order they ran.
    pub seed_values: Vec<u64>,
    pub missions: Vec<String>,
    pub interval: &'static str,
    pub samples: Vec<Sample>,
    pub deltas: Vec<Delta>,
}

fn commit_all(repo: &git2::Repository, message: &str) -> Result<()> {
    let mut index = repo.index()?;
    index.add_all(["*"].iter(), git2::IndexAddOption::DEFAULT, None)?;
    index.write()?;
    let tree = repo.find_tree(index.write_tree()?)?;
    let sig = repo.signature()?;
    let parent = repo.head().ok().and_then(|h| h.peel_to_commit().ok());
    let parents: Vec<&git2::Commit<'_>> = parent.iter().collect();
    repo.commit(Some("HEAD"), &sig, &sig, message, &tree, &parents)?;
    Ok(())
}

/// Runs one mission under `conductor` with `seed` in a fresh repository under `dir`.
fn run_one(
    dir: &Path,
    mission: &Mission,
    conductor: &ConductorSettings,
    seed: u64,
) -> Result<BTreeMap<String, u64>> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let root = dir.join("repo");
    let work = dir.join("agent");
    std::fs::create_dir_all(&root)?;
    std::fs::create_dir_all(&work)?;
    let repo = git2::Repository::init_opts(
        &root,
        git2::RepositoryInitOptions::new().initial_head("main"),
    )?;
    let mut cfg = repo.config()?;
    cfg.set_str("user.name", "bench")?;
    cfg.set_str("user.email", "bench@atelier.invalid")?;
    // The agent: one script, a case per task, the seed baked in.
    let mut cases = String::new();
    for t in &mission.tasks {
        cases.push_str(&format!(
            "  *:{}) {} ;;\n",
            t.id,
            behaviour(t, mission.mission.scale, seed)?
        ));
    }
    let agent = work.join("agent.sh");
    std::fs::write(
        &agent,
        format!(
            "#!/bin/sh\nD='{}'\ncat > /dev/null\ncase \"$ATELIER_TASK_ID\" in\n{cases}esac\n",
            work.display()
        ),
    )?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755))?;
    }
    let config = format!(
        "[forge]\nkind = \"local\"\nrepository = \"bench/{}\"\nbranch = \"main\"\n\n[gate]\nkey = {}\n\n[roles.implementer]\nbackend = \"command\"\ncommand = [{}]\nwritable = [{}]\n\n{}",
        mission.mission.id,
        toml::Value::String(dir.join("gate").join("gate_key").display().to_string()),
        toml::Value::String(agent.display().to_string()),
        toml::Value::String(work.display().to_string()),
        conductor.scaled(mission.mission.scale).toml()
    );
    std::fs::write(root.join("atelier.toml"), config)?;
    std::fs::write(
        root.join("README.md"),
        format!("# {}\n", mission.mission.title),
    )?;
    commit_all(&repo, "The mission's repository")?;
    crate::workflow::init(
        &root,
        Some(format!("bench/{}", mission.mission.id)),
        None,
        &[],
    )?;
    commit_all(&repo, "Adopt atelier")?;
    // The title is a repository's text: quoted as TOML, never spliced.
    let mut plan = format!(
        "[plan]\nid = \"{}\"\ntitle = {}\n\n",
        mission.mission.id,
        toml::Value::String(mission.mission.title.clone())
    );
    for t in &mission.tasks {
        plan.push_str(&format!(
            "[[task]]\nid = \"{0}\"\ntitle = \"Task {0}\"\nrole = \"implementer\"\ngoal = \"Write done to out/{0}.txt\"\nfiles = [\"out/{0}.txt\"]\n[task.contract]\ncriteria = [\"out/{0}.txt contains exactly the line done\"]\nchecks = [\"grep -qx done out/{0}.txt\"]\n\n",
            t.id
        ));
    }
    let ws = crate::workflow::Workspace::open(&root)?;
    let clock = || crate::clock::now().map(|(t, _)| t).unwrap_or(0);
    let watch = Stopwatch::start();
    let summary = crate::swarm::runtime::run(
        &ws,
        crate::swarm::runtime::RunOptions {
            plan_files: vec![("mission.toml".into(), plan)],
            max_parallel: None,
            resume: None,
            goal: None,
        },
        &clock,
    )?;
    let wall = u64::try_from(watch.elapsed().as_millis()).unwrap_or(u64::MAX);
    let records = events::read(Path::new(&summary.events))?;
    let marks = work.clone();
    let would = move |task: &str, attempt: u32| {
        let id = task.rsplit(':').next().unwrap_or(task);
        marks.join(format!("would-pass-{id}-{attempt}")).exists()
    };
    let mut m = measure(&records, &would);
    m.insert("wall_ms".into(), wall);
    Ok(m)
}

/// One side of a comparison: a configuration run by this atelier, or by another build of it
/// (`bench replay --baseline REV`), which runs each mission with `bench sample`.
#[derive(Debug, Clone)]
pub enum Side {
    Here(ConductorSettings),
    Binary {
        path: std::path::PathBuf,
        /// What the report calls it (the revision it was built from).
        label: String,
        conductor: ConductorSettings,
        /// Where an untrusted build (a proposal's change) runs; `None` runs it uncontained
        /// (a revision the operator trusts, or `[swarm] containment = "none"`).
        sandbox: Option<crate::agent::contain::Sandbox>,
    },
}

impl Side {
    pub fn conductor(&self) -> &ConductorSettings {
        match self {
            Side::Here(c) | Side::Binary { conductor: c, .. } => c,
        }
    }
}

/// One mission under `conductor` with `seed`, run by this atelier in a fresh temporary
/// directory: its metrics (`bench sample`, what another build runs for `--baseline REV`).
pub fn sample(
    mission: &Mission,
    conductor: &ConductorSettings,
    seed: u64,
) -> Result<BTreeMap<String, u64>> {
    let tmp = tempfile::Builder::new()
        .prefix("atelier-bench-")
        .tempdir()
        .context("creating a temporary directory")?;
    run_one(&tmp.path().join("run"), mission, conductor, seed)
}

/// A built-in mission by id.
pub fn built_in(id: &str) -> Result<Mission> {
    missions()?
        .into_iter()
        .find(|m| m.mission.id == id)
        .ok_or_else(|| {
            crate::workflow::Error::Input(format!("--mission {id}: no such mission in this build"))
        })
}

/// Runs one mission on `side`.
fn run_side(dir: &Path, m: &Mission, side: &Side, seed: u64) -> Result<BTreeMap<String, u64>> {
    match side {
        Side::Here(c) => run_one(dir, m, c, seed),
        Side::Binary {
            path,
            label,
            conductor,
            sandbox,
        } => {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            let config = dir.join("conductor.toml");
            std::fs::write(&config, conductor.toml())?;
            // A built-in mission by id (every build knows it); another by its file.
            let which = if MISSIONS.iter().any(|(_, t)| *t == m.text) {
                vec!["--mission".to_string(), m.mission.id.clone()]
            } else {
                let file = dir.join("mission.toml");
                std::fs::write(&file, &m.text)?;
                vec!["--mission-file".to_string(), file.display().to_string()]
            };
            let args: Vec<String> = ["bench", "sample"]
                .iter()
                .map(|s| s.to_string())
                .chain(which)
                .chain([
                    "--seed".to_string(),
                    seed.to_string(),
                    "--config".to_string(),
                    config.display().to_string(),
                ])
                .collect();
            let out = match sandbox {
                None => {
                    let args: Vec<std::ffi::OsString> =
                        args.iter().map(std::ffi::OsString::from).collect();
                    let o = crate::agent::process::operator_command(
                        path.as_os_str(),
                        &args,
                        dir,
                        &[],
                        true,
                    )
                    .with_context(|| {
                        format!("running {} (the build of {label})", path.display())
                    })?;
                    (o.status.success(), o.stdout, o.stderr)
                }
                Some(sandbox) => contained_sample(path, args, dir, sandbox).with_context(|| {
                    format!("running {} (the build of {label})", path.display())
                })?,
            };
            let (ok, stdout, stderr) = out;
            if !ok {
                return Err(crate::workflow::Error::Input(format!(
                    "the build of {label} ({}) could not run mission {} seed {seed}: {}",
                    path.display(),
                    m.mission.id,
                    String::from_utf8_lossy(&stderr).trim()
                )));
            }
            let metrics: BTreeMap<String, u64> = serde_json::from_slice(&stdout).map_err(|e| {
                crate::workflow::Error::Input(format!(
                    "the build of {label} ({}) answered `bench sample` with something other than its metrics ({e}): it predates `bench sample`",
                    path.display()
                ))
            })?;
            // Every metric, and nothing else: a missing one would count as 0.
            let keys: Vec<&str> = metrics.keys().map(String::as_str).collect();
            let mut want: Vec<&str> = METRICS.to_vec();
            want.sort_unstable();
            if keys != want {
                return Err(crate::workflow::Error::Input(format!(
                    "the build of {label} ({}) answered `bench sample` for mission {} seed {seed} with the metrics {} instead of {}",
                    path.display(),
                    m.mission.id,
                    keys.join(", "),
                    want.join(", ")
                )));
            }
            Ok(metrics)
        }
    }
}

/// `bench sample` run by an untrusted build, contained, with an empty HOME of its own in
/// `dir`: whether it succeeded, its stdout and its other output.
fn contained_sample(
    path: &Path,
    args: Vec<String>,
    dir: &Path,
    sandbox: &crate::agent::contain::Sandbox,
) -> Result<(bool, Vec<u8>, Vec<u8>)> {
    use crate::agent::process;
    let home = dir.join("home");
    std::fs::create_dir_all(&home).with_context(|| format!("creating {}", home.display()))?;
    let mut env: Vec<(String, String)> = process::scrubbed_env(&[], &[])
        .into_iter()
        .filter(|(k, _)| k != "HOME")
        .collect();
    env.push(("HOME".into(), home.display().to_string()));
    let spawn = process::Spawn {
        lines: None,
        program: path.display().to_string(),
        args,
        cwd: dir.to_path_buf(),
        env,
        stdin: Vec::new(),
        timeout: std::time::Duration::from_secs(10 * 60),
        silence: None,
        max_output: 1 << 20,
        sandbox: Some(sandbox.clone().write(dir)),
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    // Ctrl-C stops the measurement (and every program it started) rather than waiting it out.
    let mut stop = {
        let _in = rt.enter();
        process::Interrupts::install().context("installing the signal handlers")?
    };
    let o = rt
        .block_on(process::run_or_interrupted(&spawn, &mut stop))
        .context("starting it, contained")?
        .ok_or_else(|| {
            crate::workflow::Error::Input(
                "interrupted while the change's build ran a mission: every program it started was stopped".into(),
            )
        })?;
    Ok((o.success(), o.stdout.into_bytes(), o.output.into_bytes()))
}

/// The seeds of a replay by hand: 0, 1, 2, … (a cycle's are drawn from its registration,
/// `evidence::draw_seeds`, and are never these).
pub fn hand_seeds(n: u64) -> Vec<u64> {
    (0..n).collect()
}

/// Runs every mission (or `only`) under both sides for each of `seeds`, interleaved (the
/// even-numbered ones run the baseline first, the others the candidate), in temporary
/// directories removed after.
pub fn replay(
    baseline: &ConductorSettings,
    candidate: &ConductorSettings,
    all: &[Mission],
    seeds: &[u64],
    only: Option<&str>,
    say: &dyn Fn(&str),
) -> Result<Report> {
    replay_sides(
        &Side::Here(baseline.clone()),
        &Side::Here(candidate.clone()),
        all,
        seeds,
        only,
        say,
    )
}

/// [`replay`] between any two sides (another build of atelier on either); `say` hears of each
/// mission replayed (one line per seed, mission and side, with the time it took).
pub fn replay_sides(
    baseline: &Side,
    candidate: &Side,
    all: &[Mission],
    seeds: &[u64],
    only: Option<&str>,
    say: &dyn Fn(&str),
) -> Result<Report> {
    if seeds.is_empty() {
        return Err(crate::workflow::Error::Input(
            "--seeds: at least 1 (at least 2 for an interval)".into(),
        ));
    }
    let chosen: Vec<&Mission> = all
        .iter()
        .filter(|m| only.is_none_or(|o| o == m.mission.id))
        .collect();
    if chosen.is_empty() {
        return Err(crate::workflow::Error::Input(format!(
            "--mission {}: no such mission (built in or on the protected branch: {})",
            only.unwrap_or_default(),
            all.iter()
                .map(|m| m.mission.id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let tmp = tempfile::Builder::new()
        .prefix("atelier-bench-")
        .tempdir()
        .context("creating a temporary directory")?;
    let mut samples = Vec::new();
    for (i, &seed) in seeds.iter().enumerate() {
        for m in &chosen {
            let order: [(&str, &Side); 2] = if i % 2 == 0 {
                [("baseline", baseline), ("candidate", candidate)]
            } else {
                [("candidate", candidate), ("baseline", baseline)]
            };
            for (side, c) in order {
                let dir = tmp.path().join(format!("{}-{seed}-{side}", m.mission.id));
                let started = crate::agent::process::Stopwatch::start();
                let metrics = run_side(&dir, m, c, seed)?;
                say(&format!(
                    "replay: seed {}/{}, mission {}, {side}: {:.1} s",
                    i + 1,
                    seeds.len(),
                    m.mission.id,
                    started.elapsed().as_secs_f64()
                ));
                samples.push(Sample {
                    mission: m.mission.id.clone(),
                    seed,
                    side: side.into(),
                    metrics,
                });
            }
        }
    }
    // Per seed, the sum over missions of each metric, baseline vs candidate.
    let per_seed = |side: &str, seed: u64, k: &str| -> f64 {
        samples
            .iter()
            .filter(|s| s.side == side && s.seed == seed)
            .map(|s| s.metrics.get(k).copied().unwrap_or(0) as f64)
            .sum()
    };
    let deltas = METRICS
        .iter()
        .map(|k| {
            let pairs: Vec<(f64, f64)> = seeds
                .iter()
                .map(|&s| (per_seed("baseline", s, k), per_seed("candidate", s, k)))
                .collect();
            compare(k, &pairs)
        })
        .collect();
    let build = |s: &Side| match s {
        Side::Here(_) => None,
        Side::Binary { label, .. } => Some(label.clone()),
    };
    Ok(Report {
        baseline: baseline.conductor().clone(),
        candidate: candidate.conductor().clone(),
        baseline_build: build(baseline),
        candidate_build: build(candidate),
        seeds: seeds.len() as u64,
        seed_values: seeds.to_vec(),
        missions: chosen.iter().map(|m| m.mission.id.clone()).collect(),
        interval: "95% Student's t interval of the paired per-seed differences (candidate - baseline), summed over missions",
        samples,
        deltas,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_missions_parse_and_every_behaviour_is_known() {
        for m in missions().expect("missions parse") {
            for t in &m.tasks {
                for seed in 0..3 {
                    behaviour(t, 1, seed).expect("known behaviour");
                }
            }
        }
    }

    #[test]
    fn mission_files_are_checked_with_the_field_and_what_to_do() {
        let cases = [
            ("[mission]\nid = \"a b\"\ntitle = \"t\"\n[[task]]\nid = \"A\"\nbehaviour = \"steady\"\n", "mission.id `a b`"),
            ("[mission]\nid = \"a\"\ntitle = \"t\"\nscale = 0\n[[task]]\nid = \"A\"\nbehaviour = \"steady\"\n", "mission.scale: at least 1"),
            ("[mission]\nid = \"a\"\ntitle = \"t\"\n", "missing field `task`"),
            ("[mission]\nid = \"a\"\ntitle = \"t\"\n[[task]]\nid = \"A\"\nbehaviour = \"recorded\"\n", "needs attempts"),
            ("[mission]\nid = \"a\"\ntitle = \"t\"\n[[task]]\nid = \"A\"\nbehaviour = \"recorded\"\nattempts = [{ then = \"explode\" }]\n", "then = \"explode\" is not one of pass, fail"),
            ("[mission]\nid = \"a\"\ntitle = \"t\"\n[[task]]\nid = \"A\"\nbehaviour = \"steady\"\nattempts = [{ then = \"pass\" }]\n", "attempts belong to behaviour = \"recorded\""),
            ("[mission]\nid = \"a\"\ntitle = \"t\"\n[[task]]\nid = \"A\"\nbehaviour = \"steady\"\n[[task]]\nid = \"A\"\nbehaviour = \"steady\"\n", "once per mission"),
            ("[mission]\nid = \"a\"\ntitle = \"t\"\n[[task]]\nid = \"A\"\nbehaviour = \"lazy\"\n", "unknown behaviour `lazy`"),
        ];
        for (text, want) in cases {
            let e = parse_mission("missions/a.toml", text)
                .expect_err(want)
                .to_string();
            assert!(
                e.starts_with("missions/a.toml: ") && e.contains(want),
                "{e}"
            );
        }
    }

    #[test]
    fn a_recorded_run_becomes_a_mission_that_replays_its_attempts() {
        use crate::swarm::events::QuietEnd;
        let ev = |event: RunEvent| events::Record {
            seq: 0,
            at: String::new(),
            event,
        };
        let started = |task: &str, attempt| {
            ev(RunEvent::AttemptStarted {
                task: task.into(),
                attempt,
                claims: vec![],
                worktree: String::new(),
                prompt_bytes: 0,
                role: None,
                backend: None,
            })
        };
        let exited = |task: &str, attempt, code| {
            ev(RunEvent::WorkerExited {
                task: task.into(),
                attempt,
                code,
                output_bytes: 0,
                truncated: false,
                ms: None,
                log: None,
            })
        };
        let failed = |task: &str, attempt| {
            ev(RunEvent::AttemptFailed {
                task: task.into(),
                attempt,
                reason: String::new(),
                digest: vec![],
                ms: None,
            })
        };
        let passed = |task: &str, attempt| {
            ev(RunEvent::AttemptPassed {
                task: task.into(),
                attempt,
                commit: String::new(),
                ms: None,
            })
        };
        let records = vec![
            ev(RunEvent::Settings {
                nudge_after_ms: 600_000,
                restart_after_ms: 1_200_000,
                attempt_timeout_ms: 5_400_000,
                failure_budget: 3,
                max_parallel: 2,
                context_budget: 0,
                steps: vec![],
                roles: Default::default(),
            }),
            started("p:A", 1),
            exited("p:A", 1, Some(3)),
            failed("p:A", 1),
            started("p:B", 1),
            ev(RunEvent::Restarted {
                task: "p:B".into(),
                attempt: 1,
                silent_secs: 1200,
                silent_ms: Some(1_200_400),
            }),
            started("p:A", 2),
            ev(RunEvent::Quiet {
                task: "p:A".into(),
                attempt: 2,
                ms: 900_000,
                ended: QuietEnd::Output,
                nudged: true,
            }),
            exited("p:A", 2, Some(0)),
            passed("p:A", 2),
            started("p:B", 2),
            exited("p:B", 2, None),
            failed("p:B", 2),
            started("p:B", 3),
            exited("p:B", 3, Some(0)),
            failed("p:B", 3),
        ];
        let text = record("r1", &records, "from-r1", None).expect("recorded");
        let m = parse_mission("recorded", &text).expect("parses");
        assert_eq!(m.mission.id, "from-r1");
        assert_eq!(
            m.mission.scale, 241,
            "restart_after 20m replays in about 5 s"
        );
        let ends = |t: &MissionTask| -> Vec<(u64, String)> {
            t.attempts
                .iter()
                .map(|a| (a.quiet_ms, a.then.clone()))
                .collect()
        };
        assert_eq!(m.tasks[0].id, "p-A");
        assert_eq!(
            ends(&m.tasks[0]),
            vec![(0, "fail".into()), (900_000, "pass".into())]
        );
        assert_eq!(
            ends(&m.tasks[1]),
            vec![
                (1_200_400, "hang".into()),
                (0, "crash".into()),
                (0, "wrong".into())
            ]
        );
        // Attempt 2 of A: quiet 900 s / 241 = 3.734 s, then delivers (a restart would be a
        // false kill); later attempts of B repeat its last ending.
        let script = behaviour(&m.tasks[0], m.mission.scale, 0).expect("script");
        assert!(script.contains("*) echo working; touch"), "{script}");
        assert!(script.contains("sleep 3.734"), "{script}");
        let b = behaviour(&m.tasks[1], m.mission.scale, 0).expect("script");
        assert!(b.contains("1) echo working; sleep 100000"), "{b}");
        assert!(
            b.contains("*) echo working; sleep 0.000; mkdir -p out; echo wrong"),
            "{b}"
        );
        assert!(record("r2", &[], "x", None)
            .expect_err("empty")
            .to_string()
            .contains("nothing to replay"));
        // Both sides' settings are compressed alike.
        let c = ConductorSettings {
            nudge_after: crate::config::Span::parse("10m").expect("a duration"),
            restart_after: crate::config::Span::parse("20m").expect("a duration"),
            attempt_timeout: crate::config::Span::parse("90m").expect("a duration"),
            failure_budget: 3,
        };
        let k = c.scaled(241);
        assert_eq!(
            (
                k.nudge_after.as_str(),
                k.restart_after.as_str(),
                k.attempt_timeout.as_str()
            ),
            ("2s", "5s", "22s")
        );
        assert_eq!(c.scaled(1), c);
    }
}
