//! A cycle on Atelier's own code: two builds measured, a hostile change contained while built and
//! run, and what a build can do to hide from or hang the cycle.

use std::time::{Duration, Instant};

use crate::cycle::on_branch;
use crate::support::swarm::Swarm;

/// A stand-in for Atelier's own repository: `Cargo.toml` names the `atelier` package, its
/// "code" is `src/atelier.sh` (which answers `bench sample` with metrics in which
/// `FAILED` tasks fail), and a stand-in cargo "builds" it by copying it into the target
/// directory, first running `build.sh` when there is one (as cargo runs a build script).
/// `[proposers.lint]`'s fixer edits the code: `fewer` makes fewer tasks fail, `worse` more,
/// `hostile` adds a build script and code that try to reach the repository and the gate key.
pub(crate) fn atelier_stand_in() -> (Swarm, std::path::PathBuf) {
    let s = Swarm::configured(
        "failure_budget = 3",
        "\n[gauntlet]\nwritable = [\"FAKEDIR\"]\n\n[[gauntlet.steps]]\nname = \"syntax\"\nrun = \"sh -n src/atelier.sh\"\ntimeout = \"30s\"\n\n[proposers.lint]\ncommand = [\"FIXER\", \"{family}\"]\nfamilies = [\"fewer\", \"worse\", \"hostile\"]\ntimeout = \"30s\"\n",
    );
    let repo = s.env.repo.display().to_string();
    let key = s.env.gate_key().display().to_string();
    let fixer = s.fake.join("fix.sh");
    let hostile_build = format!(
        "if cat '{key}' >/dev/null 2>&1; then echo 'LEAK: read the gate key'; exit 1; fi\nif echo x > '{repo}/pwned-build.txt' 2>/dev/null; then echo 'LEAK: wrote the main tree'; exit 1; fi\nif echo 0000000000000000000000000000000000000000 > '{repo}/.git/refs/heads/pwned' 2>/dev/null; then echo 'LEAK: wrote a ref'; exit 1; fi\n"
    );
    std::fs::write(
        &fixer,
        format!(
            "#!/bin/sh\ncase \"$1\" in\n  fewer) sed -i 's/^FAILED=1$/FAILED=0/' src/atelier.sh ;;\n  worse) sed -i 's/^FAILED=1$/FAILED=2/' src/atelier.sh ;;\n  hostile)\n    cat > build.sh <<'B'\n{hostile_build}B\n    sed -i 's/^FAILED=1$/FAILED=0/' src/atelier.sh\n    sed -i \"/^FAILED=0$/a echo x > '{repo}/pwned-run.txt' 2>/dev/null; cat '{key}' > /dev/null 2>\\&1 \\&\\& FAILED=9\" src/atelier.sh ;;\nesac\n"
        ),
    )
    .expect("write fixer");
    let cargo = s.fake.join("cargo.sh");
    std::fs::write(
        &cargo,
        format!(
            "#!/bin/sh\necho \"built in $(pwd)\" >> '{}/cargo.log'\nif [ -f build.sh ]; then sh build.sh || exit 101; fi\nmkdir -p \"$CARGO_TARGET_DIR/release\"\ncp src/atelier.sh \"$CARGO_TARGET_DIR/release/atelier\"\nchmod +x \"$CARGO_TARGET_DIR/release/atelier\"\n",
            s.fake.display()
        ),
    )
    .expect("write cargo");
    use std::os::unix::fs::PermissionsExt;
    for f in [&fixer, &cargo] {
        std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let config = s
        .env
        .read("atelier.toml")
        .replace("FIXER", &fixer.display().to_string())
        .replace("FAKEDIR", &s.fake.display().to_string());
    s.env.write("atelier.toml", &config);
    s.env.write(
        "Cargo.toml",
        "[package]\nname = \"atelier\"\nversion = \"0.1.0\"\n",
    );
    s.env.write(
        "src/atelier.sh",
        "#!/bin/sh\nFAILED=1\n[ \"$1 $2\" = 'bench sample' ] || exit 2\nprintf '{\"wall_ms\":100,\"attempts\":3,\"wasted_attempts\":1,\"nudges\":0,\"restarts\":0,\"false_kills\":0,\"failed_tasks\":%s}\\n' \"$FAILED\"\n",
    );
    s.env.git(&["add", "-A"]);
    s.env.git(&["commit", "-qm", "Atelier's stand-in code"]);
    (s, cargo)
}

pub(crate) fn cycle_with(s: &Swarm, cargo: &std::path::Path, args: &[&str]) -> crate::support::Run {
    let mut all = vec!["cycle", "--seeds", "2", "--mission", "flaky", "--json"];
    all.extend_from_slice(args);
    let out = s
        .command(&all)
        .env("CARGO", cargo)
        .output()
        .expect("run atelier");
    crate::support::Run::from(out)
}

#[test]
fn a_change_to_atelier_s_own_code_is_measured_by_two_builds() {
    let (s, cargo) = atelier_stand_in();
    let r = cycle_with(
        &s,
        &cargo,
        &[
            "--from",
            "lint",
            "--family",
            "fewer",
            "--metric",
            "failed_tasks",
        ],
    );
    let v = r.json();
    assert_eq!(
        v["stage"], "awaiting-approval",
        "{}\n{}",
        r.stdout, r.stderr
    );
    let e = &v["evidence"];
    assert_eq!(e["metric"], "failed_tasks", "{e}");
    assert_eq!(e["outcome"], "improved", "{e}");
    let b = &e["benchmark"];
    assert!(
        b["baseline_build"]
            .as_str()
            .is_some_and(|l| l.starts_with("the base (main at ")),
        "{b}"
    );
    assert!(
        b["candidate_build"]
            .as_str()
            .is_some_and(|l| l.starts_with("the change (")),
        "{b}"
    );
    let failed = b["deltas"]
        .as_array()
        .expect("deltas")
        .iter()
        .find(|d| d["metric"] == "failed_tasks")
        .expect("failed_tasks")
        .clone();
    assert_eq!(failed["baseline_mean"], 1.0, "{failed}");
    assert_eq!(failed["candidate_mean"], 0.0, "{failed}");
    assert!(
        r.stderr.contains("cycle [build]") && r.stderr.contains("contained like a gauntlet step"),
        "{}",
        r.stderr
    );
    // Two builds: the base (trusted, in a worktree in the operator's cache) and the change
    // (contained, in a discarded worktree); nothing left behind.
    let log = std::fs::read_to_string(s.fake.join("cargo.log")).expect("built");
    assert_eq!(log.lines().count(), 2, "{log}");
    assert!(log.contains("/.cache/atelier/bench/"), "{log}");
    assert!(log.contains(".atelier/proposers/build-"), "{log}");
    assert_eq!(s.env.git(&["worktree", "list"]).lines().count(), 1);
    // The record people read says which builds ran it.
    let id = v["proposal"].as_str().expect("an id");
    let md = on_branch(&s, id, "evidence.md");
    assert!(md.contains("Run by two builds of Atelier"), "{md}");

    // With no metric named, the two builds still run: a code change that makes more tasks fail
    // is recorded and not submitted.
    let worse = cycle_with(&s, &cargo, &["--from", "lint", "--family", "worse"]);
    assert_eq!(worse.code, 1, "{}", worse.stderr);
    let w = worse.json();
    assert_eq!(w["evidence"]["outcome"], "no metric named", "{w}");
    assert!(
        w["evidence"]["regressions"]
            .as_array()
            .is_some_and(|r| r.iter().any(|x| x == "failed_tasks")),
        "{w}"
    );
    assert!(
        w["stopped"]
            .as_str()
            .is_some_and(|x| x.contains("failed_tasks regressed")),
        "{w}"
    );
    assert!(
        log.lines().count() == 2
            && std::fs::read_to_string(s.fake.join("cargo.log"))
                .expect("log")
                .lines()
                .count()
                == 3,
        "the base's build is reused; the change is built again"
    );
}

#[test]
fn a_hostile_change_cannot_reach_the_repository_or_the_gate_key_when_it_is_built_and_run() {
    let (s, cargo) = atelier_stand_in();
    let main_before = s.env.git(&["rev-parse", "main"]);
    let r = cycle_with(
        &s,
        &cargo,
        &[
            "--from",
            "lint",
            "--family",
            "hostile",
            "--metric",
            "failed_tasks",
        ],
    );
    // Its build script found every door shut (it fails the build on any that opens), and its
    // code, run for the benchmark, could neither write the main tree nor read the key.
    assert!(!r.stderr.contains("LEAK"), "{}", r.stderr);
    let v = r.json();
    assert!(
        v["evidence"]["benchmark"]["candidate_build"]
            .as_str()
            .is_some(),
        "the change was built and measured: {}\n{}",
        r.stdout,
        r.stderr
    );
    let failed = v["evidence"]["benchmark"]["deltas"]
        .as_array()
        .expect("deltas")
        .iter()
        .find(|d| d["metric"] == "failed_tasks")
        .expect("failed_tasks")
        .clone();
    assert_eq!(
        failed["candidate_mean"], 0.0,
        "the gate key was not readable: {failed}"
    );
    for f in ["pwned-build.txt", "pwned-run.txt"] {
        assert!(!s.env.repo.join(f).exists(), "{f} written");
    }
    assert!(!s.env.repo.join(".git/refs/heads/pwned").exists());
    assert_eq!(s.env.git(&["rev-parse", "main"]), main_before);
}

/// The stand-in, with the `fewer` family's fixer replaced by `script` (run in the proposer's
/// worktree).
/// `atelier cycle --from lint --family fewer --metric failed_tasks` (2 seeds, flaky) with the
/// stand-in cargo, as a command to start in the background.
fn fewer_cycle(s: &Swarm, cargo: &std::path::Path) -> std::process::Command {
    let mut c = s.command(&[
        "cycle",
        "--seeds",
        "2",
        "--mission",
        "flaky",
        "--json",
        "--from",
        "lint",
        "--family",
        "fewer",
        "--metric",
        "failed_tasks",
    ]);
    c.env("CARGO", cargo);
    c
}

fn stand_in_with_fixer(script: &str) -> (Swarm, std::path::PathBuf) {
    let (s, cargo) = atelier_stand_in();
    let fixer = s.fake.join("fix.sh");
    std::fs::write(
        &fixer,
        format!("#!/bin/sh\ncase \"$1\" in\n  fewer)\n{script}\n;;\nesac\n"),
    )
    .expect("write fixer");
    (s, cargo)
}

/// `code_changed` counts a change as code only when *both* sides' Cargo.toml name
/// the `atelier` package. A change that renames the package (keeping `[lib] name = "atelier"`
/// and `[[bin]] name = "atelier"`, so the real crate still builds the same binary) and edits
/// the code is reported as leaving "atelier's own code as it is": no build, no benchmark, and
/// a `--metric` the operator named is dropped as unused.
#[test]
fn renaming_the_package_hides_a_code_change_from_the_two_builds() {
    let (s, cargo) = stand_in_with_fixer(
        "sed -i 's/^FAILED=1$/FAILED=7/' src/atelier.sh\nprintf '[package]\\nname = \"atelier-core\"\\nversion = \"0.1.0\"\\n\\n[lib]\\nname = \"atelier\"\\n\\n[[bin]]\\nname = \"atelier\"\\npath = \"src/main.rs\"\\n' > Cargo.toml",
    );
    let r = cycle_with(
        &s,
        &cargo,
        &[
            "--from",
            "lint",
            "--family",
            "fewer",
            "--metric",
            "failed_tasks",
        ],
    );
    let v = r.json();
    let reason = v["evidence"]["metric_reason"].as_str().unwrap_or_default();
    assert!(
        !reason.contains("atelier's own code as they are"),
        "a change to src/ (and Cargo.toml) is recorded as leaving atelier's code as it is: {reason}\n{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("cycle [build]"),
        "the change to atelier's code was never built and measured (it makes 7x the tasks fail):\n{}",
        r.stderr
    );
}

/// The candidate's numbers are whatever its `bench sample` prints, and a metric
/// it leaves out counts as 0 (`unwrap_or(0)` in `replay_sides`). A change whose binary
/// answers with `{}` — on purpose, or because it renamed an event — gets every
/// lower-is-better metric recorded as "improved", and the evidence calls the registered
/// metric improved. A sample missing a metric should be refused (or the metric reported as
/// not measured), never read as zero.
#[test]
fn a_candidate_that_omits_its_metrics_is_refused_not_credited() {
    let (s, cargo) = stand_in_with_fixer(
        "cat > src/atelier.sh <<'S'\n#!/bin/sh\n[ \"$1 $2\" = 'bench sample' ] || exit 2\necho '{}'\nS",
    );
    let r = cycle_with(
        &s,
        &cargo,
        &[
            "--from",
            "lint",
            "--family",
            "fewer",
            "--metric",
            "failed_tasks",
        ],
    );
    assert!(
        r.stderr.contains("cycle [build]"),
        "the change was built: {}",
        r.stderr
    );
    // Refused, naming what it gave (nothing) and what a sample must carry; nothing credited.
    assert_eq!(r.code, 2, "{}", r.stderr);
    // (The seed is the cycle's first, drawn from its registration.)
    assert!(
        r.stderr.contains("`bench sample` for mission flaky seed ")
            && r.stderr.contains(" with the metrics  instead of attempts"),
        "{}",
        r.stderr
    );
    assert!(r.stdout.trim().is_empty(), "no evidence: {}", r.stdout);
}

/// While the change's binary runs `bench sample` (contained, in a session of its
/// own), Ctrl-C does nothing: the terminal's SIGINT reaches only atelier's process group, and
/// atelier no longer dies of it — the proposer's and the build's `Interrupts` registered tokio
/// handlers, which stay installed for the life of the process — while `contained_sample` runs
/// the program with `process::run`, not `run_or_interrupted`. A change whose sample stalls
/// holds the cycle for 10 minutes per sample (seeds × missions), and the operator's only
/// way out is SIGKILL, which leaves the proposal open, its temporary directories behind and
/// the sweep of escaped descendants undone.
#[test]
fn ctrl_c_stops_the_cycle_while_the_change_s_binary_is_measured() {
    use std::os::unix::process::CommandExt;
    let (s, cargo) = stand_in_with_fixer(
        "cat > src/atelier.sh <<'S'\n#!/bin/sh\n[ \"$1 $2\" = 'bench sample' ] || exit 2\nsleep 97.31\necho '{}'\nS",
    );
    let err = s.fake.join("ctrl-c.stderr");
    let mut child = fewer_cycle(&s, &cargo)
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&err).expect("stderr file"))
        .process_group(0)
        .spawn()
        .expect("start atelier");
    let pgid = child.id() as i32;
    // Wait for the change's sample to be running.
    let start = Instant::now();
    let sleeping = || {
        std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| {
                std::fs::read(e.path().join("cmdline"))
                    .map(|c| String::from_utf8_lossy(&c).contains("97.31"))
                    .unwrap_or(false)
            })
    };
    while !sleeping() {
        if start.elapsed() > Duration::from_secs(120) || child.try_wait().ok().flatten().is_some() {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "the change's sample never started:\n{}",
                std::fs::read_to_string(&err).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_millis(500));
    // Ctrl-C at a terminal: SIGINT to the foreground process group (atelier's).
    // SAFETY: kill(2) on the group of the process this test started.
    unsafe {
        libc::kill(-pgid, libc::SIGINT);
    }
    let asked = Instant::now();
    let mut exited = None;
    while asked.elapsed() < Duration::from_secs(20) {
        if let Some(st) = child.try_wait().ok().flatten() {
            exited = Some(st);
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    // Only the process this test started (its sample dies with it: PR_SET_PDEATHSIG); a
    // no-op when it has exited.
    let _ = child.kill();
    let _ = child.wait();
    std::thread::sleep(Duration::from_millis(500));
    let left = sleeping();
    assert!(
        exited.is_some(),
        "atelier ignored Ctrl-C for 20 s while the change's binary ran `bench sample`:\n{}",
        std::fs::read_to_string(&err).unwrap_or_default()
    );
    assert!(!left, "the change's sample outlived the interrupted cycle");
}

/// `build_input` misses `.gitattributes`, which decides what the build's worktree
/// holds: `text eol=crlf` (or `ident`) rewrites the checked-out files that `include_str!`
/// embeds (src/defaults/, missions/, reviewers/ templates, prompts/), so the binary changes
/// while the cycle records that the change "leaves atelier's own code as it is".
#[test]
fn a_gitattributes_change_alters_the_build_and_is_measured_as_code() {
    let (s, cargo) =
        stand_in_with_fixer("printf 'src/** text eol=crlf\\n*.md ident\\n' > .gitattributes");
    let r = cycle_with(
        &s,
        &cargo,
        &[
            "--from",
            "lint",
            "--family",
            "fewer",
            "--metric",
            "failed_tasks",
        ],
    );
    assert!(
        r.stderr.contains("cycle [build]"),
        "a change to .gitattributes (what every file of the build is checked out as) is not a build input:\n{}",
        r.stderr
    );
    // And it does change the build: the stand-in's code, checked out with CRLF, no longer
    // runs (`#!/bin/sh\r`), so the cycle stops at the benchmark, closing the proposal.
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("stopped at benchmark") && r.stderr.contains("the build of the change ("),
        "{}",
        r.stderr
    );
}

/// The trusted build of the base runs in `~/.cache/atelier/bench/<clone>/bench-<sha12>` on branch
/// `atelier/bench/bench-<sha12>` and removes both only when `trusted` returns. A cycle killed
/// during that build (SIGKILL, OOM, a closed terminal: a real release build takes minutes)
/// leaves both behind, nothing prunes them, and every later cycle against that base fails at
/// `build` (`add_worktree`: the worktree exists) — closing each new proposal — until someone
/// removes them by hand. The killed cycle's proposal also stays open.
#[test]
fn a_cycle_killed_during_the_base_s_build_does_not_block_the_next_one() {
    let (s, cargo) = atelier_stand_in();
    let mark = s.fake.join("slow-base-build");
    let started = s.fake.join("base-build-started");
    let script = std::fs::read_to_string(&cargo).expect("cargo stand-in");
    std::fs::write(
        &cargo,
        script.replacen(
            "#!/bin/sh\n",
            &format!(
                "#!/bin/sh\ncase \"$(pwd)\" in */.cache/atelier/bench/*) if [ -f '{m}' ]; then echo $$ > '{st}'; sleep 60; fi ;; esac\n",
                m = mark.display(),
                st = started.display()
            ),
            1,
        ),
    )
    .expect("slow cargo");
    std::fs::write(&mark, "").expect("mark");
    let mut child = fewer_cycle(&s, &cargo)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start atelier");
    let start = Instant::now();
    while !started.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(120) && child.try_wait().expect("wait").is_none(),
            "the base's build never started"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(200));
    // The cycle dies mid-build; so does the build it started (by the pid it wrote).
    child.kill().expect("kill atelier");
    let _ = child.wait();
    if let Ok(pid) = std::fs::read_to_string(&started)
        .unwrap_or_default()
        .trim()
        .parse::<i32>()
    {
        // SAFETY: kill(2) on the stand-in cargo this test's atelier started.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
    std::fs::remove_file(&mark).expect("unmark");
    let r = cycle_with(&s, &cargo, &["--from", "lint", "--family", "worse"]);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap_or_default();
    assert!(
        v["evidence"]["benchmark"]["baseline_build"].as_str().is_some(),
        "after one cycle was killed during the base's build, the next one cannot build the base: {}\n{}",
        r.stdout,
        r.stderr
    );
}

/// After the contained build, atelier itself (uncontained) copies
/// `<target>/release/atelier` with `std::fs::copy`, which follows a link and opens whatever is
/// there. The build writes that directory: a build script's background child (alive until
/// cargo exits) can swap the output for a FIFO — emulated here by the stand-in cargo running
/// the change's `post.sh` after it "links" — and the copy blocks opening it, forever: inside
/// `in_worktree`, where the tokio handlers swallow Ctrl-C, so the cycle hangs until SIGKILL,
/// leaving the build's worktree under .atelier/proposers/, its branch, and the proposal open.
/// (Swapped for a symlink, the copy reads any file the operator can read — the build could not —
/// into the binary's place.) The output should be checked with `symlink_metadata` to be a
/// regular file and opened with O_NOFOLLOW | O_NONBLOCK.
#[test]
fn a_build_that_leaves_a_fifo_for_its_binary_does_not_hang_the_cycle() {
    let (s, cargo) = stand_in_with_fixer(
        "sed -i 's/^FAILED=1$/FAILED=0/' src/atelier.sh\nprintf 'rm -f \"$CARGO_TARGET_DIR/release/atelier\"\\nmkfifo \"$CARGO_TARGET_DIR/release/atelier\"\\n' > post.sh",
    );
    let script = std::fs::read_to_string(&cargo).expect("cargo stand-in");
    std::fs::write(
        &cargo,
        format!("{script}if [ -f post.sh ]; then sh post.sh; fi\n"),
    )
    .expect("cargo with post.sh");
    let mut child = fewer_cycle(&s, &cargo)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start atelier");
    let start = Instant::now();
    let mut done = false;
    while start.elapsed() < Duration::from_secs(90) {
        if child.try_wait().ok().flatten().is_some() {
            done = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    // Only the process this test started; a no-op when it has exited.
    let _ = child.kill();
    let _ = child.wait();
    let left: Vec<String> = std::fs::read_dir(s.env.repo.join(".atelier/proposers"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        done,
        "the cycle hung for 90 s copying a FIFO the change's build left as its binary (left behind: {left:?})"
    );
}

/// Under `[swarm] containment = "none"` the change is built and run uncontained
/// (its label says UNCONTAINED), but evidence.md — what approvers read — says, for every
/// two-build benchmark, that the candidate was "built and run contained".
#[test]
fn evidence_md_does_not_call_an_uncontained_build_contained() {
    let (s, cargo) = atelier_stand_in();
    let config = s.env.read("atelier.toml");
    let config = if config.contains("\n[swarm]\n") {
        config.replacen("\n[swarm]\n", "\n[swarm]\ncontainment = \"none\"\n", 1)
    } else {
        format!("{config}\n[swarm]\ncontainment = \"none\"\n")
    };
    s.env.write("atelier.toml", &config);
    s.env.git(&["commit", "-qam", "Run uncontained"]);
    let r = cycle_with(
        &s,
        &cargo,
        &[
            "--from",
            "lint",
            "--family",
            "fewer",
            "--metric",
            "failed_tasks",
        ],
    );
    let v = r.json();
    let label = v["evidence"]["benchmark"]["candidate_build"]
        .as_str()
        .unwrap_or_else(|| panic!("measured: {}\n{}", r.stdout, r.stderr))
        .to_string();
    assert!(label.contains("UNCONTAINED"), "{label}");
    let id = v["proposal"].as_str().expect("an id");
    let md = crate::cycle::on_branch(&s, id, "evidence.md");
    assert!(
        !md.contains("built and run contained:"),
        "evidence.md tells approvers an uncontained build was contained:\n{md}"
    );
}
