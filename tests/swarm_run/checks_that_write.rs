//! A new operator's first plan in a Python project: the checks run Python, which would leave
//! `__pycache__/` in the worktree; a check that writes a file fails the attempt naming the file
//! and the checks, never the worker; files the repository ignores are no change.

use crate::support::swarm::{plan, task, Swarm};

/// The Swarm's repository with a small Python module and a test script that imports it the way
/// a first plan's check does (`python3 tests/test_calc.py`).
fn python_project(conductor: &str) -> Swarm {
    let s = Swarm::new(conductor);
    s.env
        .write("src/calc.py", "def add(a, b):\n    return a + b\n");
    s.env.write(
        "tests/test_calc.py",
        "import sys, os\nsys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'src'))\nimport calc\nassert calc.add(2, 3) == 5\nif hasattr(calc, 'sub'):\n    assert calc.sub(5, 3) == 2\nprint('ok')\n",
    );
    s.env.git(&["add", "-A"]);
    s.env.git(&["commit", "-q", "-m", "A Python project"]);
    s
}

/// The plan of one task, `p:Sub`, that writes `src/calc.py` and is checked by `check`.
fn sub_plan(s: &Swarm, check: &str) -> String {
    s.plan(
        "p.toml",
        &plan("p", &[task("Sub", &["src/calc.py"], &[], check)]),
    )
}

const SUB: &str = "printf 'def add(a, b):\\n    return a + b\\n\\ndef sub(a, b):\\n    return a - b\\n' > src/calc.py";

#[test]
fn a_python_check_leaves_no_bytecode_and_the_first_attempt_passes() {
    let s = python_project("failure_budget = 2");
    s.scenario("p:Sub", &format!("{SUB}; python3 tests/test_calc.py"));
    let p = sub_plan(&s, "python3 tests/test_calc.py");
    let v = s.run(&["run", &p, "--json"]).ok().json();
    assert_eq!(v["succeeded"], serde_json::json!(["p:Sub"]), "{v:#}");
    let status = s.run(&["status", "--json"]).ok().json();
    assert_eq!(status["tasks"]["p:Sub"]["attempt"], 1, "{status:#}");
    // The worker was told too: its own run of the tests wrote no bytecode outside its claims.
    let env = std::fs::read_to_string(s.fake.join("env-p-Sub-1.txt")).expect("worker env");
    assert!(
        env.lines().any(|l| l == "PYTHONDONTWRITEBYTECODE=1"),
        "{env}"
    );
}

#[test]
fn a_check_that_writes_a_file_is_named_and_the_worker_is_not_blamed() {
    let s = python_project("failure_budget = 2");
    s.env.write(".gitignore", ".atelier/\n*.log\n");
    s.env.git(&["commit", "-q", "-am", "Ignore logs"]);
    s.scenario("p:Writes", SUB);
    let p = s.plan(
        "p.toml",
        &plan(
            "p",
            &[task(
                "Writes",
                &["src/calc.py"],
                &[],
                "python3 tests/test_calc.py > results.txt",
            )],
        ),
    );
    let v = s.run(&["run", &p, "--json"]).code(1).json();
    let reason = v["failed"]["p:Writes"].as_str().expect("reason");
    assert!(
        reason.contains("the task's 1 contract check(s) wrote results.txt in the checkout of the worker's tree they ran in")
            && reason.contains(".gitignore"),
        "{reason}"
    );
    // The next attempt is told the checks did it, not to stop leaving processes running.
    let second = s.prompt("p:Writes", 2);
    assert!(
        second.contains("the task's 1 contract check(s) wrote results.txt")
            && second.contains("not for your change")
            && !second.contains("do not leave processes running"),
        "{second}"
    );
    // A file the repository ignores is no change: the same check writing `results.log` passes.
    let q = s.plan(
        "q.toml",
        &plan(
            "q",
            &[task(
                "Ignored",
                &["src/calc.py"],
                &[],
                "python3 tests/test_calc.py > results.log",
            )],
        ),
    );
    s.scenario("q:Ignored", SUB);
    let v = s.run(&["run", &q, "--json"]).ok().json();
    assert_eq!(v["succeeded"], serde_json::json!(["q:Ignored"]), "{v:#}");
}

/// Bytecode a worker plants where the repository ignores it (`__pycache__/`), compiled from
/// code that passes and stamped with the broken source's size and time, would run in place of
/// the source under the checks: they read no bytecode, so the broken code fails them.
#[test]
fn bytecode_a_worker_plants_does_not_run_in_place_of_its_source() {
    let s = python_project("failure_budget = 1");
    s.env.write(".gitignore", ".atelier/\n__pycache__/\n");
    s.env.git(&["add", ".gitignore"]);
    s.env.git(&["commit", "-q", "-m", "Ignore bytecode"]);
    let broken = SUB.replace("a - b", "a + b");
    s.scenario(
        "p:Sub",
        &format!(
            "{SUB}; env -u PYTHONPYCACHEPREFIX python3 -c 'import py_compile, importlib.util as u; py_compile.compile(\"src/calc.py\", cfile=u.cache_from_source(\"src/calc.py\"))'; \
             m=$(stat -c %Y src/calc.py); {broken}; touch -d @$m src/calc.py; ls src/__pycache__"
        ),
    );
    let p = sub_plan(&s, "python3 tests/test_calc.py");
    let v = s.run(&["run", &p, "--json"]).code(1).json();
    let reason = v["failed"]["p:Sub"].as_str().expect("reason");
    assert!(reason.contains("check"), "{reason}");
}

/// The checks judge the tree the worker left, on a clean checkout of it: a file the repository
/// ignores is not there (a planted `node_modules/.bin` or `.pyc` of other code, say), and a
/// build tool finds no build of its own to reuse.
#[test]
fn the_checks_see_the_worker_s_tree_and_nothing_it_left_beside_it() {
    let s = python_project("failure_budget = 1");
    s.env.write(".gitignore", ".atelier/\nbuild/\n");
    s.env.git(&["add", ".gitignore"]);
    s.env.git(&["commit", "-q", "-m", "Ignore the build"]);
    s.scenario(
        "p:Sub",
        &format!("{SUB}; mkdir -p build/bin && echo planted > build/bin/runner"),
    );
    let p = sub_plan(&s, "test ! -e build/bin/runner && git ls-files --error-unmatch src/calc.py && git diff --exit-code && python3 tests/test_calc.py");
    let v = s.run(&["run", &p, "--json"]).ok().json();
    assert_eq!(v["succeeded"], serde_json::json!(["p:Sub"]), "{v:#}");
}

/// A worker that builds a hollow version of a test, then restores the test's text with an old
/// time, leaves cargo a build it takes for fresh: the checks build the tree themselves, so the
/// real test runs and fails on the worker's wrong answer.
#[test]
fn a_stale_build_the_worker_left_does_not_pass_the_checks() {
    // The toolchain, for the worker and the checks, as docs/swarm.md shows.
    let home = std::env::var("HOME").expect("HOME");
    let read = format!("readable = [\"{home}/.cargo\", \"{home}/.rustup\"]\n");
    let s = Swarm::configured(
        "failure_budget = 1",
        &format!("\n[gauntlet]\n{read}writable = [\"{home}/.cargo/registry\"]\n"),
    );
    let config = s.env.read("atelier.toml").replace(
        "\n[roles.implementer]\nbackend = \"command\"\n",
        &format!("\n[roles.implementer]\nbackend = \"command\"\n{read}"),
    );
    s.env.write("atelier.toml", &config);
    // The harness gives atelier a home of its own: the toolchain is linked into it.
    let test_home = s.env.tmp.path().join("home");
    std::fs::create_dir_all(&test_home).expect("home");
    for d in [".cargo", ".rustup"] {
        let _ = std::os::unix::fs::symlink(format!("{home}/{d}"), test_home.join(d));
    }
    s.env.write(
        "Cargo.toml",
        "[package]\nname = \"demo\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
    );
    s.env
        .write("src/lib.rs", "pub fn answer() -> u32 {\n    41\n}\n");
    s.env.write(
        "tests/it.rs",
        "#[test]\nfn holds() {\n    assert_eq!(demo::answer(), 41);\n}\n",
    );
    s.env.write(
        "Cargo.lock",
        "# This file is automatically @generated by Cargo.\n# It is not intended for manual editing.\nversion = 4\n\n[[package]]\nname = \"demo\"\nversion = \"0.1.0\"\n",
    );
    s.env.write(".gitignore", ".atelier/\n/target\n");
    s.env.git(&["add", "-A"]);
    s.env.git(&["commit", "-q", "-m", "A crate"]);
    s.scenario(
        "p:Answer",
        "cp tests/it.rs it.rs.orig; printf '#[test]\\nfn holds() {}\\n' > tests/it.rs; \
         printf 'pub fn answer() -> u32 {\\n    40\\n}\\n' > src/lib.rs; \
         cargo test -q --no-run > \"$FAKE_AGENT_DIR/worker.log\" 2>&1; mv it.rs.orig tests/it.rs; \
         touch -d 2001-01-01 tests/it.rs; cargo test -q >> \"$FAKE_AGENT_DIR/worker.log\" 2>&1",
    );
    let p = s.plan(
        "p.toml",
        &plan(
            "p",
            &[task(
                "Answer",
                &["src/lib.rs"],
                &[],
                "cargo test -q --offline",
            )],
        ),
    );
    let v = s.run(&["run", &p, "--json"]).code(1).json();
    let reason = v["failed"]["p:Answer"].as_str().expect("reason");
    // The worker's own `cargo test` passed on its stale build: the attack is real.
    let log = std::fs::read_to_string(s.fake.join("worker.log")).unwrap_or_default();
    assert!(log.contains("test result: ok. 1 passed"), "{log}");
    assert!(
        reason.contains("step check 1 (`cargo test -q --offline`) exited with 101"),
        "{reason}"
    );
}

/// A check with an assertion of its own judges by its own text: the module it imports is the
/// code under test, as a test file's imports are, so `plan check` passes it and so does the
/// scrutiny validator after the run.
#[test]
fn an_inline_check_that_asserts_on_the_module_the_task_changes_is_proposed() {
    let s = python_project("failure_budget = 1");
    s.scenario("p:Sub", SUB);
    let p = sub_plan(
        &s,
        "PYTHONPATH=src python3 -c 'import calc; assert calc.sub(5, 3) == 2'",
    );
    let check = s.run(&["plan", "check", &p]).ok();
    assert!(check.stdout.contains("1 task(s): OK"), "{}", check.stdout);
    let r = s.run(&["run", &p, "--propose"]).ok();
    assert!(
        r.stdout.contains("proposal 1") && !r.stderr.contains("E_SCRUTINY_FAILED"),
        "{}\n{}",
        r.stdout,
        r.stderr
    );
}

/// A check that runs a file its task may change (the test script itself, here) is refused by
/// `plan check` before any worker runs, saying how to write it instead; `run` refuses it the
/// same way, and no worker is started.
#[test]
fn a_check_that_runs_a_file_its_task_may_change_is_refused_before_any_worker() {
    let s = python_project("failure_budget = 1");
    s.scenario("p:Sub", SUB);
    let p = s.plan(
        "p.toml",
        &plan(
            "p",
            &[task(
                "Sub",
                &["src/calc.py", "tests/**"],
                &[],
                "python3 tests/test_calc.py",
            )],
        ),
    );
    let r = s.run(&["plan", "check", &p]).code(1);
    assert!(
        r.stdout.contains("E_CHECK_IN_REACH: ")
            && r.stdout.contains("task Sub, field contract.checks: the check `python3 tests/test_calc.py` runs tests/test_calc.py, which task p:Sub may change")
            && r.stdout.contains("Assert in the check itself")
            && r.stdout.contains("\n  next: assert in the check itself"),
        "{}",
        r.stdout
    );
    let run = s.run(&["run", &p]).code(1);
    assert!(
        run.stderr.contains("E_PLAN_REFUSED") && run.stderr.contains("E_CHECK_IN_REACH"),
        "{}",
        run.stderr
    );
    // A refusal ends with its next step and where its code is explained.
    assert!(
        run.stderr.lines().last()
            == Some("next: run `atelier plan check` on them and fix what it lists (GOVERNANCE.md, \"Refusal codes\", E_PLAN_REFUSED)"),
        "{}",
        run.stderr
    );
    assert!(
        !s.fake.join("prompt-p-Sub-1.txt").exists(),
        "a worker ran for a refused plan"
    );
}

/// A gauntlet step that runs a script a task claims is refused the same way, naming the step.
#[test]
fn a_gauntlet_step_that_runs_a_claimed_script_is_refused_before_any_worker() {
    let s = Swarm::configured(
        "failure_budget = 1",
        "\n[[gauntlet.steps]]\nname = \"lint\"\nrun = \"sh scripts/lint.sh\"\n",
    );
    s.env.write("scripts/lint.sh", "exit 0\n");
    s.env.write("src/a.txt", "a\n");
    s.env.git(&["add", "-A"]);
    s.env.git(&["commit", "-q", "-m", "A lint script"]);
    let p = s.plan(
        "p.toml",
        &plan(
            "p",
            &[task(
                "Tidy",
                &["scripts/**", "src/a.txt"],
                &[],
                "grep -q a src/a.txt",
            )],
        ),
    );
    let r = s.run(&["plan", "check", &p]).code(1);
    assert!(
        r.stdout.contains("task Tidy, field files: gauntlet step lint (`sh scripts/lint.sh`, atelier.toml) runs or reads scripts/lint.sh, which this task claims"),
        "{}",
        r.stdout
    );
}
