//! The swarm: `atelier run` overhead against `make -jN` on trivial tasks, git2 worktrees against
//! the git CLI, and how plan check + schedule simulation scale. Method and figures:
//! docs/performance.md, "The swarm".
//!
//! `CARGO_TARGET_DIR=/tmp/swarm-bench-target cargo bench --bench swarm`
//! Env: ATELIER_BENCH_ONLY (overhead|worktrees|scaling), ATELIER_BENCH_TASKS (500),
//! ATELIER_BENCH_JOBS (available parallelism), ATELIER_BENCH_WORKTREES (100),
//! ATELIER_BENCH_WT_FILES (extra files in the worktree repository, 0),
//! ATELIER_BENCH_PLAN_SIZES (1000,10000), ATELIER_BENCH_SHAPE (window|wide; both),
//! ATELIER_BENCH_SIM_PARALLEL (8),
//! ATELIER_BENCH_REPEAT (3; every figure is the best of the repetitions),
//! ATELIER_BENCH_CONTAINMENT (landlock, the default; `none` runs the workers uncontained).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use atelier::git;
use atelier::swarm::events::{RunEvent, Sink};
use atelier::swarm::{self, plan, schedule};

fn env_usize(name: &str, default: usize) -> usize {
    let value = std::env::var(name).ok().and_then(|v| v.parse().ok());
    value.unwrap_or(default)
}

fn s(d: Duration) -> f64 {
    d.as_secs_f64()
}

fn best<T>(repeat: usize, mut f: impl FnMut() -> Result<T>) -> Result<(Duration, T)> {
    let mut out: Option<(Duration, T)> = None;
    for _ in 0..repeat.max(1) {
        let t = Instant::now();
        let v = f()?;
        let d = t.elapsed();
        if out.as_ref().is_none_or(|(b, _)| d < *b) {
            out = Some((d, v));
        }
    }
    Ok(out.expect("at least one repetition"))
}

/// A git repository adopted by atelier whose `implementer` role runs `true`.
struct Repo {
    tmp: tempfile::TempDir,
    root: PathBuf,
}

impl Repo {
    fn new(extra_files: usize) -> Result<Repo> {
        let tmp = tempfile::tempdir()?;
        let root = tmp.path().join("repo");
        for d in [&root, &tmp.path().join("home")] {
            std::fs::create_dir_all(d)?;
        }
        let r = Repo { tmp, root };
        r.git(&["init", "-q", "-b", "main", "."])?;
        r.git(&["config", "user.email", "bench@example.org"])?;
        r.git(&["config", "user.name", "Bench"])?;
        std::fs::write(r.root.join("README.md"), "# bench\n")?;
        for k in 0..extra_files {
            let dir = r.root.join(format!("src/d{}", k % 50));
            std::fs::create_dir_all(&dir)?;
            std::fs::write(
                dir.join(format!("f{k}.txt")),
                format!("file {k}\n").repeat(20),
            )?;
        }
        r.git(&["add", "-A"])?;
        r.git(&["commit", "-q", "-m", "initial"])?;
        run(r
            .cmd(env!("CARGO_BIN_EXE_atelier"))
            .args(["-C", ".", "init"]))?;
        let config = std::fs::read_to_string(r.root.join("atelier.toml"))?;
        let role = "[roles.implementer]\nbackend = \"command\"\ncommand = [\"true\"]\n";
        // ATELIER_BENCH_CONTAINMENT=none measures the run uncontained (merged, as it must be).
        let swarm = match std::env::var("ATELIER_BENCH_CONTAINMENT").as_deref() {
            Ok("none") => "\n[swarm]\ncontainment = \"none\"\n",
            _ => "",
        };
        std::fs::write(
            r.root.join("atelier.toml"),
            format!("{config}\n{role}{swarm}"),
        )?;
        r.git(&["add", "-A"])?;
        r.git(&["commit", "-q", "-m", "Adopt atelier"])?;
        Ok(r)
    }

    fn cmd(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.tmp.path().join("home"))
            .env("LANG", "C")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .current_dir(&self.root);
        c
    }

    fn git(&self, args: &[&str]) -> Result<String> {
        run(self.cmd("git").args(args))
    }
}

fn run(c: &mut Command) -> Result<String> {
    let o = c.output().with_context(|| format!("running {c:?}"))?;
    let err = String::from_utf8_lossy(&o.stderr);
    ensure!(o.status.success(), "{c:?} failed: {err}");
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

/// `n` independent tasks: no claims, a worker that does nothing, a check that can fail.
fn trivial_plan(n: usize) -> String {
    let mut t = String::from("[plan]\nid = \"b\"\ntitle = \"Trivial tasks\"\n\n");
    for i in 0..n {
        t.push_str(&format!(
            "[[task]]\nid = \"T{i}\"\ntitle = \"Task {i}\"\nrole = \"implementer\"\n\
             goal = \"Nothing\"\n[task.contract]\n\
             criteria = [\"the worktree root is a directory when the check runs\"]\n\
             checks = [\"test -d .\"]\n\n"
        ));
    }
    t
}

fn makefile(n: usize) -> String {
    let names: Vec<String> = (0..n).map(|i| format!("t{i}")).collect();
    let mut m = format!(".PHONY: all {0}\nall: {0}\n", names.join(" "));
    for t in &names {
        m.push_str(&format!("{t}:\n\t@true\n\t@test -d .\n"));
    }
    m
}

/// Per-attempt git work of the conductor done in-process, serially: add, snapshot, re-snapshot, remove.
fn attempt_git_costs(repo: &Path, n: usize, tag: &str) -> Result<[Duration; 4]> {
    let r = git::open(repo)?;
    let head = git::branch_tip(&r, "main")?;
    let mut t = [Duration::ZERO; 4];
    for i in 0..n {
        let name = format!("{tag}-{i}");
        let path = repo.join(".atelier/wt-bench").join(&name);
        let c = Instant::now();
        git::add_worktree(&r, &name, &path, &format!("bench/{tag}/{i}"), head)?;
        t[0] += c.elapsed();
        let c = Instant::now();
        let (tree, changed) = git::snapshot(r.commondir(), &path, head)?;
        ensure!(changed.is_empty());
        t[1] += c.elapsed();
        // The conductor snapshots again after the gauntlet to prove nothing changed.
        let c = Instant::now();
        ensure!(git::snapshot(r.commondir(), &path, head)?.0 == tree);
        t[2] += c.elapsed();
        let c = Instant::now();
        git::remove_worktree(&r, &name, &path)?;
        t[3] += c.elapsed();
    }
    Ok(t)
}

fn row(name: &str, d: Duration, of: f64) {
    let pct = 100.0 * s(d) / of;
    println!("  {name:16} {:8.3} s  {pct:5.1}% of the run", s(d));
}

fn overhead(repeat: usize) -> Result<()> {
    let n = env_usize("ATELIER_BENCH_TASKS", 500);
    let nproc = std::thread::available_parallelism().map_or(2, |p| p.get());
    let jobs = env_usize("ATELIER_BENCH_JOBS", nproc);
    let dir = tempfile::tempdir()?;
    let (mk, pl) = (dir.path().join("Makefile"), dir.path().join("plan.toml"));
    std::fs::write(&mk, makefile(n))?;
    std::fs::write(&pl, trivial_plan(n))?;
    let repo = Repo::new(0)?;
    let (mut make_t, mut run_t) = (Vec::new(), Vec::new());
    for _ in 0..repeat.max(1) {
        let c = Instant::now();
        let mut m = repo.cmd("make");
        run(m.args(["-s", "-j", &jobs.to_string(), "-f"]).arg(&mk))?;
        make_t.push(c.elapsed());
        let c = Instant::now();
        let mut a = repo.cmd(env!("CARGO_BIN_EXE_atelier"));
        a.args(["-C", ".", "run"]).arg(&pl);
        let out = run(a.args(["--max-parallel", &jobs.to_string(), "--json"]))?;
        run_t.push(c.elapsed());
        let v: serde_json::Value = serde_json::from_str(&out)?;
        let ok = v["succeeded"].as_array().map_or(0, Vec::len);
        ensure!(ok == n, "only {ok} of {n} tasks succeeded");
    }
    let (mk_best, run_best) = (make_t.iter().min(), run_t.iter().min());
    let (mk_best, run_best) = (s(*mk_best.expect("ran")), s(*run_best.expect("ran")));
    println!("## overhead: {n} trivial tasks, -j{jobs}, best of {repeat}");
    println!("make -j{jobs}           {mk_best:8.3} s  (runs: {make_t:?})");
    println!("atelier run            {run_best:8.3} s  (runs: {run_t:?})");
    println!("ratio atelier / make   {:8.2}", run_best / mk_best);
    let per = |t: f64| t * 1e3 / n as f64;
    println!(
        "per task: make {:.2} ms, atelier {:.2} ms",
        per(mk_best),
        per(run_best)
    );
    // Where atelier's time goes: the conductor's serial per-attempt work, measured alone.
    let (_, g) = best(repeat, || attempt_git_costs(&repo.root, n, "share"))?;
    let names = ["worktree add", "snapshot", "re-snapshot", "worktree remove"];
    names
        .iter()
        .zip(g)
        .for_each(|(name, d)| row(name, d, run_best));
    // Six fsynced events per task: started, worker exited, step, passed, released, integrated.
    let sink_path = repo.root.join(".atelier/bench-events.jsonl");
    let (sink_t, _) = best(repeat, || {
        let _ = std::fs::remove_file(&sink_path);
        let mut sink = Sink::open(&sink_path)?;
        let ev = |i: usize| RunEvent::ClaimsReleased {
            task: format!("b:T{i}"),
            attempt: 1,
        };
        (0..n * 6).try_for_each(|i| sink.emit(ev(i), 1_800_000_000).map(drop))?;
        Ok(())
    })?;
    row("event fsyncs", sink_t, run_best);
    let wt = s(g[0] + g[3]);
    println!(
        "without worktree add/remove (estimate): {:.3} s, ratio {:.2}",
        run_best - wt,
        (run_best - wt) / mk_best
    );
    Ok(())
}

/// Runs `f` for `0..n` and keeps the shortest total in `best`.
fn each(n: usize, best: &mut Duration, f: impl FnMut(usize) -> Result<()>) -> Result<()> {
    let c = Instant::now();
    (0..n).try_for_each(f)?;
    *best = (*best).min(c.elapsed());
    Ok(())
}

fn worktrees(repeat: usize) -> Result<()> {
    let n = env_usize("ATELIER_BENCH_WORKTREES", 100);
    let files = env_usize("ATELIER_BENCH_WT_FILES", 0);
    let repo = Repo::new(files)?;
    let r = git::open(&repo.root)?;
    let head = git::branch_tip(&r, "main")?;
    let wt = repo.tmp.path().join("wt");
    let (mut g2, mut cli) = ([Duration::MAX; 2], [Duration::MAX; 2]);
    let p = |t: &str, k: usize, i: usize| wt.join(format!("{t}{k}-{i}"));
    let u = |p: PathBuf| p.to_str().expect("a UTF-8 path").to_string();
    for k in 0..repeat.max(1) {
        let name = |i: usize| format!("g{k}-{i}");
        each(n, &mut g2[0], |i| {
            let (b, w) = (format!("g/{k}/{i}"), p("g", k, i));
            Ok(git::add_worktree(&r, &name(i), &w, &b, head)?)
        })?;
        each(n, &mut g2[1], |i| {
            Ok(git::remove_worktree(&r, &name(i), &p("g", k, i))?)
        })?;
        each(n, &mut cli[0], |i| {
            let (b, w) = (format!("c/{k}/{i}"), u(p("c", k, i)));
            repo.git(&["worktree", "add", "-q", "-b", &b, &w, "main"])
                .map(drop)
        })?;
        each(n, &mut cli[1], |i| {
            repo.git(&["worktree", "remove", &u(p("c", k, i))])
                .map(drop)
        })?;
    }
    println!(
        "## worktrees: {n} each, {} tracked files, best of {repeat}",
        files + 8
    );
    for (i, what) in ["add", "remove"].iter().enumerate() {
        let (a, b) = (s(g2[i]), s(cli[i]));
        println!(
            "{what:7} git2 {a:7.3} s ({:6.2} ms each)  cli {b:7.3} s ({:6.2} ms each)  git2/cli {:.2}",
            a * 1e3 / n as f64,
            b * 1e3 / n as f64,
            a / b
        );
    }
    let (a, b) = (s(g2[0] + g2[1]), s(cli[0] + cli[1]));
    println!("add+remove git2/cli {:.2}", a / b);
    Ok(())
}

/// `n` tasks whose claims are files in 50 directories, every tenth task claiming its whole
/// directory with a glob (so some claims overlap). `wide`: independent blocks of 100 tasks, each
/// task depending on up to two earlier tasks of its block, so waves widen as `n` grows. Else each
/// task depends on up to two of the 30 tasks before it, so waves stay as wide at any size.
fn generated_plan(n: usize, wide: bool) -> String {
    let mut t = String::from("[plan]\nid = \"g\"\ntitle = \"Generated\"\n\n");
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = |m: usize| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % m as u64) as usize
    };
    for i in 0..n {
        let dir = i % 50;
        let claim = if i % 10 == 0 {
            format!("src/m{dir}/*.rs")
        } else {
            format!("src/m{dir}/f{i}.rs")
        };
        let mut deps = BTreeSet::new();
        let lo = if wide {
            (i / 100) * 100
        } else {
            i.saturating_sub(30)
        };
        if i > lo {
            for _ in 0..2 {
                deps.insert(i - 1 - next((i - lo).min(30)));
            }
        }
        let deps: Vec<String> = deps.iter().map(|d| format!("\"T{d}\"")).collect();
        t.push_str(&format!(
            "[[task]]\nid = \"T{i}\"\ntitle = \"Task {i}\"\nrole = \"implementer\"\n\
             goal = \"Write {claim}\"\nfiles = [\"{claim}\"]\nreads = [\"src/m{dir}/mod.rs\"]\n\
             depends_on = [{}]\n[task.contract]\n\
             criteria = [\"cargo test for module {dir} passes with the new file\"]\n\
             checks = [\"cargo test m{dir}\"]\n\n",
            deps.join(", ")
        ));
    }
    t
}

fn scaling(repeat: usize) -> Result<()> {
    let sizes = std::env::var("ATELIER_BENCH_PLAN_SIZES").unwrap_or("1000,10000".into());
    let sizes: Vec<usize> = sizes
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let p = env_usize("ATELIER_BENCH_SIM_PARALLEL", 8);
    let roles: BTreeSet<String> = ["implementer".to_string()].into();
    println!("## scaling: plan check + simulate(parallelism {p}), best of {repeat}");
    let shape = std::env::var("ATELIER_BENCH_SHAPE").unwrap_or_default();
    let shapes = [("window", false), ("wide", true)].into_iter();
    for (name, wide) in shapes.filter(|(name, _)| shape.is_empty() || shape == *name) {
        println!("shape {name}");
        let mut first: Option<(usize, f64)> = None;
        for &n in &sizes {
            scale_one(n, wide, p, repeat, &roles, &mut first)?;
        }
    }
    Ok(())
}

fn scale_one(
    n: usize,
    wide: bool,
    p: usize,
    repeat: usize,
    roles: &BTreeSet<String>,
    first: &mut Option<(usize, f64)>,
) -> Result<()> {
    let files = vec![("g.toml".to_string(), generated_plan(n, wide))];
    let (parse_t, _) = best(repeat, || Ok(plan::parse("g.toml", &files[0].1)?))?;
    let (check_t, report) = best(repeat, || {
        Ok(swarm::check(
            &files,
            roles,
            &swarm::executes::Reach::none(),
        )?)
    })?;
    ensure!(report.refusals.is_empty(), "{:?}", report.refusals);
    let plans = [plan::parse("g.toml", &files[0].1)?];
    let (sim_t, steps) = best(repeat, || Ok(schedule::simulate(&plans, p)))?;
    let total = s(check_t) + s(sim_t);
    println!(
        "{n:6} tasks: parse {:.4} s, check {:.4} s, simulate {:.4} s, total {total:.4} s \
         ({} waves, max width {}, {} serialised groups, makespan {steps})",
        s(parse_t),
        s(check_t),
        s(sim_t),
        report.waves.len(),
        report.max_width,
        report.serialised.len()
    );
    match *first {
        None => *first = Some((n, total)),
        Some((m, t)) => println!("  {n} / {m} tasks: time ratio {:.2}", total / t),
    }
    Ok(())
}

fn main() -> Result<()> {
    let repeat = env_usize("ATELIER_BENCH_REPEAT", 3);
    let only = std::env::var("ATELIER_BENCH_ONLY").unwrap_or_default();
    let cpu = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpu.lines().find(|l| l.starts_with("model name"));
    let nproc = std::thread::available_parallelism().map_or(0, |p| p.get());
    println!("machine: {nproc} CPUs, {}", model.unwrap_or("unknown CPU"));
    if only.is_empty() || only == "overhead" {
        overhead(repeat)?;
    }
    if only.is_empty() || only == "worktrees" {
        worktrees(repeat)?;
    }
    if only.is_empty() || only == "scaling" {
        scaling(repeat)?;
    }
    Ok(())
}
