//! The `tests` reviewer (IO): runs each test suite the base holds at base and at the merged
//! head, contained and time-bounded, and compares what ran (`governance::review::inventory`).
//!
//! Both sides are plain exports of their trees (no `.git`) into one temporary directory, with
//! one build cache beside them (`CARGO_TARGET_DIR`), so that the head's run reuses the
//! dependencies the base's run built. The base runs first: nothing the head's code writes into
//! the cache can change the base's results, and the whole directory is discarded afterwards
//! (a later review starts from an empty cache, which the head of an earlier one never touched).
//!
//! Contained (`contain::Sandbox`, when the repository's containment is on): no network, writes
//! only to the side's export and the cache, reads the system, the programs it starts and the
//! toolchains (`RUSTUP_HOME`, `CARGO_HOME`'s `bin`, `registry` and `git`; never its credentials),
//! never the gate key, `~/.ssh` or `.atelier/`. Offline: `CARGO_NET_OFFLINE`, and nothing is
//! fetched from npm or PyPI.
//!
//! A reviewer that cannot judge (an export that fails, a suite that does not run at base, a
//! program missing) says so with a blocking finding for an agent's change
//! (`inventory::could_not_run`): never an approval, never only `revise` by the change's doing.

use std::path::{Path, PathBuf};
use std::time::Duration;

use git2::{Oid, Repository, Tree};

use super::contain::Sandbox;
use super::process;
use super::reviewer::{discard, export_tree_id, ReviewerOutcome};
use crate::governance::review::answer::Answer;
use crate::governance::review::inventory::Mutant;
use crate::governance::review::inventory::{self, Ecosystem, Ran, SuiteRun};
use crate::governance::review::{
    critic, FileChange, Finding, ReviewerDef, Severity, SuiteSettings,
};

/// The most bytes of one suite run's output read.
pub const MAX_OUTPUT: usize = 16 * 1024 * 1024;

/// One `tests` reviewer to run.
#[derive(Debug, Clone)]
pub struct SuitesJob {
    pub name: String,
    pub blocking: bool,
    pub agent_origin: bool,
    pub settings: SuiteSettings,
    /// The base's tree and the tree that would land (the merge tree, or the head's).
    pub base_tree: Oid,
    pub head_tree: Oid,
    /// The ecosystems the base holds (`inventory::ecosystems`).
    pub ecosystems: Vec<Ecosystem>,
    /// The Rust files to mutate (`mutants = true`): those the change touches outside `tests/`,
    /// present at base and at head.
    pub mutate: Vec<String>,
    /// What the suites may touch besides their export and the cache; `None` runs uncontained.
    pub sandbox: Option<Sandbox>,
}

/// The job for `def` on a change from `base` to the tree `head_tree`: the ecosystems come from
/// the base's files. `sandbox` is the containment to start from (`None`: uncontained).
pub fn job(
    repo: &Repository,
    def: &ReviewerDef,
    (base, head_tree): (Oid, Oid),
    changed: &[FileChange],
    agent_origin: bool,
    sandbox: Option<Sandbox>,
) -> Result<SuitesJob, git2::Error> {
    let base_tree = repo.find_commit(base)?.tree()?;
    let mut paths = Vec::new();
    walk(repo, &base_tree, "", 0, &mut paths)?;
    Ok(SuitesJob {
        name: def.name.clone(),
        blocking: def.blocking,
        agent_origin,
        settings: def.suites.clone(),
        base_tree: base_tree.id(),
        head_tree,
        ecosystems: inventory::ecosystems(paths.iter().map(String::as_str)),
        mutate: changed
            .iter()
            .filter(|f| f.base.is_some() && f.head.is_some() && f.path.ends_with(".rs"))
            .filter(|f| !f.path.starts_with("tests/") && !f.path.contains("/tests/"))
            .map(|f| f.path.clone())
            .collect(),
        sandbox: sandbox.map(toolchains),
    })
}

/// The file paths of `tree`, to a bounded depth (a deeper file is not a suite's marker).
fn walk(
    repo: &Repository,
    tree: &Tree<'_>,
    prefix: &str,
    depth: usize,
    out: &mut Vec<String>,
) -> Result<(), git2::Error> {
    for e in tree.iter() {
        let Some(name) = e.name() else { continue };
        let path = format!("{prefix}{name}");
        match e.kind() {
            Some(git2::ObjectType::Tree) if depth < 16 && name != "node_modules" => {
                let sub = repo.find_tree(e.id())?;
                walk(repo, &sub, &format!("{path}/"), depth + 1, out)?;
            }
            Some(git2::ObjectType::Blob) => out.push(path),
            _ => {}
        }
    }
    Ok(())
}

/// The toolchains' directories, readable: `RUSTUP_HOME` (or `~/.rustup`) and `CARGO_HOME`'s
/// (or `~/.cargo`'s) `bin`, `registry` and `git` — not its credentials or configuration. None
/// that holds or lies in a protected path.
fn toolchains(s: Sandbox) -> Sandbox {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let rustup = var("RUSTUP_HOME").or_else(|| home.as_ref().map(|h| h.join(".rustup")));
    let cargo = var("CARGO_HOME").or_else(|| home.as_ref().map(|h| h.join(".cargo")));
    let mut dirs: Vec<PathBuf> = rustup.into_iter().collect();
    if let Some(c) = cargo {
        dirs.extend(["bin", "registry", "git"].iter().map(|d| c.join(d)));
    }
    dirs.into_iter().fold(s, |s, d| readable(s, &d))
}

/// The command that runs an ecosystem's suite: the definition's, or the default (Python: pytest
/// when the base's environment imports it, else unittest; `python` is the interpreter found).
fn command(job: &SuitesJob, eco: Ecosystem, pytest: bool, python: Option<&str>) -> Vec<String> {
    if let Some((_, c)) = job.settings.commands.iter().find(|(e, _)| *e == eco) {
        return c.clone();
    }
    let mut argv = default_command(eco, pytest);
    if let (Ecosystem::Python, Some(py)) = (eco, python) {
        argv[0] = py.to_string();
    }
    argv
}

/// The interpreter `python3` stands for (through a shim such as pyenv's, which a contained run
/// could not follow), and its prefixes made readable in the job's containment. It is asked
/// isolated (`-I`), uncontained, in the empty cache directory: nothing of the change runs. `None`
/// when it does not answer (the suite's own run then says why).
fn python(rt: &tokio::runtime::Runtime, job: &mut SuitesJob, cwd: &Path) -> Option<String> {
    let spawn = process::Spawn {
        lines: None,
        program: "python3".into(),
        args: [
            "-I",
            "-c",
            "import sys; print(sys.executable); print(sys.prefix); print(sys.base_prefix)",
        ]
        .map(String::from)
        .to_vec(),
        cwd: cwd.to_path_buf(),
        env: process::scrubbed_env(&[], &[]),
        stdin: Vec::new(),
        timeout: Duration::from_secs(30),
        silence: None,
        max_output: 64 * 1024,
        sandbox: None,
    };
    let out = rt.block_on(process::run(&spawn, |_| {})).ok()?;
    if !out.success() {
        return None;
    }
    let lines: Vec<PathBuf> = out.stdout.lines().map(PathBuf::from).collect();
    let exe = lines.first().filter(|p| p.is_absolute())?.clone();
    if let Some(s) = job.sandbox.take() {
        job.sandbox = Some(lines.iter().skip(1).fold(s, |s, p| readable(s, p)));
    }
    Some(exe.display().to_string())
}

/// `s` with `dir` readable, unless it holds or lies in a protected path.
fn readable(s: Sandbox, dir: &Path) -> Sandbox {
    let Ok(real) = dir.canonicalize() else {
        return s;
    };
    let guarded = s.protected.iter().any(|g| {
        let g = g.canonicalize().unwrap_or_else(|_| g.clone());
        g.starts_with(&real) || real.starts_with(&g)
    });
    if guarded {
        s
    } else {
        s.read(real)
    }
}

fn default_command(eco: Ecosystem, pytest: bool) -> Vec<String> {
    let words: &[&str] = match eco {
        Ecosystem::Rust => &["cargo", "test", "--no-fail-fast", "--offline"],
        Ecosystem::Python if pytest => {
            &["python3", "-m", "pytest", "-rA", "-p", "no:cacheprovider"]
        }
        Ecosystem::Python => &["python3", "-m", "unittest", "discover", "-v"],
        Ecosystem::JavaScript => &["node", "--test", "--test-reporter=tap"],
    };
    words.iter().map(|w| w.to_string()).collect()
}

/// The command that lists a Rust suite's tests without running them (`cargo test … -- --list`),
/// for the default command only: a repository's own command is not known to take libtest's
/// arguments.
fn list_command(job: &SuitesJob, eco: Ecosystem, argv: &[String]) -> Option<Vec<String>> {
    let custom = job.settings.commands.iter().any(|(e, _)| *e == eco);
    (eco == Ecosystem::Rust && !custom).then(|| {
        let mut list = argv.to_vec();
        list.extend(["--".to_string(), "--list".to_string()]);
        list
    })
}

/// Runs `argv` in `dir`, contained as the job says, writing only `dir` and `cache`.
fn run_in(
    rt: &tokio::runtime::Runtime,
    job: &SuitesJob,
    argv: &[String],
    dir: &Path,
    cache: &Path,
    timeout: Duration,
) -> Ran {
    let Some((program, args)) = argv.split_first() else {
        return Ran {
            not_started: Some("its command is empty".into()),
            ..Ran::default()
        };
    };
    let env = process::scrubbed_env(
        &[
            "RUSTUP_HOME".to_string(),
            "CARGO_HOME".to_string(),
            "RUSTUP_TOOLCHAIN".to_string(),
        ],
        &[
            (
                "CARGO_TARGET_DIR".to_string(),
                cache.join("target").display().to_string(),
            ),
            ("CARGO_NET_OFFLINE".to_string(), "true".to_string()),
            ("CARGO_TERM_COLOR".to_string(), "never".to_string()),
            ("PYTHONDONTWRITEBYTECODE".to_string(), "1".to_string()),
            ("NO_COLOR".to_string(), "1".to_string()),
            ("ATELIER_REVIEWER".to_string(), job.name.clone()),
        ],
    );
    let path = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone());
    let sandbox = job.sandbox.clone().map(|s| {
        s.programs(argv, path.as_deref())
            .write(dir.to_path_buf())
            .write(cache.to_path_buf())
    });
    // stderr joins stdout in the program itself, so the two arrive in the order written
    // (cargo prints `Running <target>` on stderr before the tests' lines on stdout).
    let mut joined: Vec<String> = ["-c", "exec \"$@\" 2>&1", "sh", program.as_str()]
        .map(String::from)
        .to_vec();
    joined.extend(args.iter().cloned());
    let spawn = process::Spawn {
        lines: None,
        program: "sh".into(),
        args: joined,
        cwd: dir.to_path_buf(),
        env,
        stdin: Vec::new(),
        timeout,
        silence: None,
        max_output: MAX_OUTPUT,
        sandbox,
    };
    match rt.block_on(process::run(&spawn, |_| {})) {
        Ok(o) => Ran {
            code: o.code,
            output: o.output,
            timed_out: o.timed_out,
            truncated: o.truncated,
            not_started: None,
        },
        Err(e) => Ran {
            not_started: Some(format!("`{program}` could not start: {e}")),
            ..Ran::default()
        },
    }
}

/// Runs one `tests` reviewer: its outcome carries the comparison's findings (and one minor
/// finding per ecosystem saying what ran and how long it took), or the reason it could not judge
/// as a finding of its own (see the module's header). Never an error.
pub fn run(repo_root: &Path, job: &SuitesJob) -> ReviewerOutcome {
    let findings = match judge(repo_root, job) {
        Ok(f) => f,
        Err(why) => vec![inventory::could_not_run(&job.name, job.agent_origin, &why)],
    };
    ReviewerOutcome {
        name: job.name.clone(),
        answer: Some(Answer {
            verdict: critic(&findings),
            findings,
        }),
        failure: None,
        attempts: 1,
        blocking: job.blocking,
    }
}

fn judge(repo_root: &Path, job: &SuitesJob) -> Result<Vec<Finding>, String> {
    if job.ecosystems.is_empty() {
        return Ok(Vec::new());
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("starting the runtime: {e}"))?;
    let tmp = tempfile::Builder::new()
        .prefix("atelier-suites-")
        .tempdir()
        .map_err(|e| format!("creating a temporary directory: {e}"))?;
    let result = (|| {
        // Both sides run in the same directory, the head exported after the base has run:
        // every file of the head is newer than what the base's run built, so a build tool that
        // judges freshness by time (cargo) rebuilds the change's code and reuses only what did
        // not change (the dependencies), and nothing the base left behind is mistaken for the
        // head's.
        let (work, cache) = (tmp.path().join("work"), tmp.path().join("cache"));
        std::fs::create_dir(&cache).map_err(|e| format!("creating the build cache: {e}"))?;
        export_tree_id(repo_root, job.base_tree, &work)
            .map_err(|e| format!("the base could not be exported: {e}"))?;
        let timeout = Duration::from_secs(job.settings.timeout_secs);
        let mut job = job.clone();
        let python = if job.ecosystems.contains(&Ecosystem::Python) {
            python(&rt, &mut job, &cache)
        } else {
            None
        };
        let job = &job;
        let pytest = python.as_ref().is_some_and(|py| {
            let probe = [py.as_str(), "-c", "import pytest"].map(String::from);
            run_in(&rt, job, &probe, &work, &cache, Duration::from_secs(30)).code == Some(0)
        });
        let runs: Vec<(Ecosystem, Vec<String>)> = job
            .ecosystems
            .iter()
            .map(|e| (*e, command(job, *e, pytest, python.as_deref())))
            .filter(|(_, argv)| !argv.is_empty())
            .collect();
        let side = |dir: &Path| -> Vec<(SuiteRun, f64)> {
            runs.iter()
                .map(|(eco, argv)| {
                    let started = process::Stopwatch::start();
                    let ran = run_in(&rt, job, argv, dir, &cache, timeout);
                    let mut read = inventory::read_run(*eco, &ran);
                    if let Some(list) = list_command(job, *eco, argv) {
                        let listed = run_in(&rt, job, &list, dir, &cache, timeout);
                        read = inventory::check_listed(read, &listed);
                    }
                    (read, started.elapsed().as_secs_f64())
                })
                .collect()
        };
        let strength = job.settings.mutants
            && job.ecosystems.contains(&Ecosystem::Rust)
            && !job.mutate.is_empty();
        let at_base = side(&work);
        let mutants_base = strength.then(|| mutate(&rt, job, &work, &cache, "base", timeout));
        remove_all(&work)?;
        export_tree_id(repo_root, job.head_tree, &work)
            .map_err(|e| format!("the change could not be exported: {e}"))?;
        let at_head = side(&work);
        let mutants_head = strength.then(|| mutate(&rt, job, &work, &cache, "head", timeout));
        let notes: Vec<Finding> = at_base
            .iter()
            .zip(&at_head)
            .map(|((b, bs), (h, hs))| ran_note(job, b, h, *bs, *hs))
            .collect();
        let base: Vec<SuiteRun> = at_base.into_iter().map(|(s, _)| s).collect();
        let head: Vec<SuiteRun> = at_head.into_iter().map(|(s, _)| s).collect();
        let mut out = inventory::compare(&job.name, job.agent_origin, &base, &head);
        if let (Some(b), Some(h)) = (&mutants_base, &mutants_head) {
            out.extend(inventory::compare_mutants(
                &job.name,
                job.agent_origin,
                b,
                h,
            ));
            out.push(mutants_note(job, b, h));
        }
        out.extend(notes);
        Ok(out)
    })();
    discard(tmp);
    result
}

/// Runs cargo-mutants on the job's files in `dir` (in place: the export is a throwaway copy),
/// ignoring any `.cargo/mutants.toml` (the change's own say on what is mutated), and reads what
/// it found; `Err` says why nothing was measured.
fn mutate(
    rt: &tokio::runtime::Runtime,
    job: &SuitesJob,
    dir: &Path,
    cache: &Path,
    side: &str,
    timeout: Duration,
) -> Result<Vec<Mutant>, String> {
    let out = cache.join(format!("mutants-{side}"));
    let mut argv: Vec<String> = [
        "cargo-mutants",
        "mutants",
        "--in-place",
        "--no-shuffle",
        "--no-config",
        "--output",
    ]
    .map(String::from)
    .to_vec();
    argv.push(out.display().to_string());
    for f in &job.mutate {
        argv.extend(["--file".to_string(), f.clone()]);
    }
    let ran = run_in(rt, job, &argv, dir, cache, timeout);
    let missing = (ran.code == Some(127)).then(|| "cargo-mutants was not found".to_string());
    if let Some(why) = ran.not_started.clone().or(missing) {
        return Err(format!(
            "{why} (install it: cargo install --locked cargo-mutants)"
        ));
    }
    if ran.timed_out {
        return Err("it timed out".into());
    }
    let json = std::fs::read_to_string(out.join("mutants.out/outcomes.json")).map_err(|e| {
        let code = ran
            .code
            .map_or("a signal".to_string(), |c| format!("code {c}"));
        format!("cargo-mutants ended with {code} and left no outcomes ({e})")
    })?;
    inventory::mutants(&json)
}

/// How many mutants each side's tests caught (a minor finding).
fn mutants_note(
    job: &SuitesJob,
    b: &Result<Vec<Mutant>, String>,
    h: &Result<Vec<Mutant>, String>,
) -> Finding {
    let count = |r: &Result<Vec<Mutant>, String>| match r {
        Ok(m) => format!("{} of {}", m.iter().filter(|m| m.caught).count(), m.len()),
        Err(_) => "none measured".to_string(),
    };
    Finding {
        reviewer: job.name.clone(),
        severity: Severity::Minor,
        category: "mutants-ran".into(),
        file: None,
        line: None,
        message: format!(
            "mutants of {}: {} caught at base, {} at head",
            job.mutate.join(", "),
            count(b),
            count(h)
        ),
        hint: "nothing to do: what the reviewer measured".into(),
    }
}

/// Removes a side's export, first making writable what its run made read-only.
fn remove_all(dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    fn unlock(path: &Path) {
        let Ok(meta) = std::fs::symlink_metadata(path) else {
            return;
        };
        if meta.is_dir() {
            let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700));
            if let Ok(entries) = std::fs::read_dir(path) {
                for e in entries.flatten() {
                    unlock(&e.path());
                }
            }
        }
    }
    unlock(dir);
    std::fs::remove_dir_all(dir).map_err(|e| format!("removing the base's export: {e}"))
}

/// What ran on each side, and how long it took (a minor finding: it never changes the verdict).
fn ran_note(
    job: &SuitesJob,
    b: &SuiteRun,
    h: &SuiteRun,
    base_secs: f64,
    head_secs: f64,
) -> Finding {
    let passed = |s: &SuiteRun| {
        s.tests
            .iter()
            .filter(|t| t.outcome == inventory::Outcome::Passed)
            .count()
    };
    Finding {
        reviewer: job.name.clone(),
        severity: Severity::Minor,
        category: "tests-ran".into(),
        file: None,
        line: None,
        message: format!(
            "{}: {} of {} test(s) passed at base in {base_secs:.1}s, {} of {} at head in {head_secs:.1}s",
            b.ecosystem.as_str(),
            passed(b),
            b.tests.len(),
            passed(h),
            h.tests.len()
        ),
        hint: "nothing to do: what the reviewer ran".into(),
    }
}
