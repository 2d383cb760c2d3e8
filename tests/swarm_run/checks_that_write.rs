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

const SUB: &str = "printf 'def add(a, b):\\n    return a + b\\n\\ndef sub(a, b):\\n    return a - b\\n' > src/calc.py";

#[test]
fn a_python_check_leaves_no_bytecode_and_the_first_attempt_passes() {
    let s = python_project("failure_budget = 2");
    s.scenario("p:Sub", &format!("{SUB}; python3 tests/test_calc.py"));
    let p = s.plan(
        "p.toml",
        &plan(
            "p",
            &[task(
                "Sub",
                &["src/calc.py"],
                &[],
                "python3 tests/test_calc.py",
            )],
        ),
    );
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
        reason.contains("the task's 1 contract check(s) wrote results.txt in the worktree after the worker exited")
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
    let p = s.plan(
        "p.toml",
        &plan(
            "p",
            &[task(
                "Sub",
                &["src/calc.py"],
                &[],
                "python3 tests/test_calc.py",
            )],
        ),
    );
    let v = s.run(&["run", &p, "--json"]).code(1).json();
    let reason = v["failed"]["p:Sub"].as_str().expect("reason");
    assert!(reason.contains("check"), "{reason}");
}
