//! The `tests` reviewer: the suites run at base and at the merged head, contained, and every
//! test that passed at base and does not pass at head blocks an agent's change, whatever made it
//! stop (a cfg, a runner, a skip, a loader, an early exit). Renames, moves and new tests pass.
//! Each case is a tiny repository (a Rust crate, a Python package, a node:test suite), reviewed
//! through the real binary.

use std::time::Instant;

use serde_json::Value;

use crate::support::{unmet, Env, Run, Setup};

const REVIEWER: &str = "name = \"inventory\"\nflavour = \"What ran at base must still run at head.\"\nkind = \"tests\"\ntimeout = 120\n";

const CARGO_TOML: &str =
    "[package]\nname = \"fx\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n";

const LIB_RS: &str = "pub fn add(a: u32, b: u32) -> u32 {
    a + b
}

pub fn sub(a: u32, b: u32) -> u32 {
    a - b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds() {
        assert_eq!(add(2, 2), 4);
    }

    #[test]
    fn subtracts() {
        assert_eq!(sub(3, 1), 2);
    }
}
";

const CALC_PY: &str = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n";

const TEST_CALC_PY: &str = "import unittest

from calc import add, sub


class TestCalc(unittest.TestCase):
    def test_adds(self):
        self.assertEqual(add(2, 2), 4)

    def test_subtracts(self):
        self.assertEqual(sub(3, 1), 2)
";

const CALC_TEST_JS: &str = "const test = require('node:test');
const assert = require('node:assert');

function add(a, b) { return a + b; }

test('adds', () => {
  assert.strictEqual(add(2, 2), 4);
});

test('subtracts', () => {
  assert.strictEqual(5 - 3, 2);
});
";

#[derive(Clone, Copy, PartialEq)]
enum Suite {
    Rust,
    Python,
    JavaScript,
}

/// An adopted repository holding `suite`'s fixture and the `tests` reviewer `reviewer`.
fn repo_with(suite: Suite, reviewer: &str) -> Env {
    let mut files: Vec<(String, String)> =
        vec![("reviewers/inventory.toml".into(), reviewer.into())];
    let add =
        |files: &mut Vec<(String, String)>, p: &str, t: &str| files.push((p.into(), t.into()));
    match suite {
        Suite::Rust => {
            add(&mut files, "Cargo.toml", CARGO_TOML);
            add(&mut files, "src/lib.rs", LIB_RS);
        }
        Suite::Python => {
            add(&mut files, "calc.py", CALC_PY);
            add(&mut files, "tests/__init__.py", "");
            add(&mut files, "tests/test_calc.py", TEST_CALC_PY);
        }
        Suite::JavaScript => {
            add(
                &mut files,
                "package.json",
                "{\"name\": \"fx\", \"private\": true}\n",
            );
            add(&mut files, "test/calc.test.js", CALC_TEST_JS);
        }
    }
    Env::with(Setup {
        files,
        ..Setup::default()
    })
}

fn repo(suite: Suite) -> Env {
    repo_with(suite, REVIEWER)
}

/// Proposes `edits` as an agent's patch; its id.
fn by_agent(env: &Env, edits: &[(&str, &str)]) -> String {
    let patch = env.patch(edits);
    env.atelier(&[
        "propose",
        "--patch",
        patch.to_str().expect("utf8"),
        "--title",
        "An agent's change",
        "--agent",
        "claude-code",
    ])
    .ok()
    .stdout
    .trim()
    .to_string()
}

/// `atelier review ID --json`, with the toolchains of the machine that runs the tests (the
/// environment's HOME is a temporary one); its JSON and how long it took.
fn review(env: &Env, id: &str) -> (Value, f64) {
    let real_home = std::env::var("HOME").unwrap_or_default();
    let var = |k: &str, default: String| std::env::var(k).unwrap_or(default);
    let mut c = env.command(crate::support::bin());
    c.env(
        "RUSTUP_HOME",
        var("RUSTUP_HOME", format!("{real_home}/.rustup")),
    )
    .env(
        "CARGO_HOME",
        var("CARGO_HOME", format!("{real_home}/.cargo")),
    )
    .arg("-C")
    .arg(&env.repo)
    .args(["review", id, "--json"]);
    let started = Instant::now();
    let run = Run::from(c.output().expect("run atelier"));
    let secs = started.elapsed().as_secs_f64();
    assert!(
        run.code == 0 || run.code == 1,
        "review failed\nstdout:\n{}\nstderr:\n{}",
        run.stdout,
        run.stderr
    );
    eprintln!("review of {id}: {secs:.1}s");
    (run.json(), secs)
}

/// The `inventory` reviewer's findings of `severity`.
fn ours<'a>(v: &'a Value, severity: &str) -> Vec<&'a Value> {
    v["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["reviewer"] == "inventory" && f["severity"] == severity)
        .collect()
}

/// The review blocks, with a blocking finding of the `tests` reviewer that names `test`.
#[track_caller]
fn blocks_naming(v: &Value, test: &str) {
    assert_eq!(v["verdict"], "block", "{v:#}");
    let blocking = ours(v, "blocking");
    assert!(
        blocking
            .iter()
            .any(|f| f["message"].as_str().unwrap_or("").contains(test)),
        "no blocking finding of the tests reviewer names `{test}`: {v:#}"
    );
}

/// The `tests` reviewer found nothing that blocks or revises (and it ran).
#[track_caller]
fn passes(v: &Value) {
    assert!(ours(v, "blocking").is_empty(), "{v:#}");
    assert!(ours(v, "major").is_empty(), "{v:#}");
    assert!(
        !ours(v, "minor").is_empty(),
        "the reviewer ran nothing: {v:#}"
    );
}

#[test]
fn a_test_module_compiled_out_by_a_cfg_never_true_blocks() {
    let env = repo(Suite::Rust);
    let head = LIB_RS.replace("#[cfg(test)]", "#[cfg(all(test, target_os = \"haiku\"))]");
    let id = by_agent(&env, &[("src/lib.rs", &head)]);
    // The gate needs the tests reviewer's recorded verdict, like an agent reviewer's.
    env.approve(&id, "alice").ok();
    let (_, g) = env.gate(&id);
    assert!(unmet(&g).contains(&"E_REVIEW_MISSING".to_string()), "{g:#}");
    let (v, _) = review(&env, &id);
    blocks_naming(&v, "tests::adds");
    blocks_naming(&v, "tests::subtracts");
    let (code, g) = env.gate(&id);
    assert_eq!(code, 1);
    assert!(unmet(&g).contains(&"E_REVIEW_BLOCKED".to_string()), "{g:#}");
}

#[test]
fn a_cargo_runner_that_exits_zero_blocks() {
    let env = repo(Suite::Rust);
    let triple = format!("{}-unknown-linux-gnu", std::env::consts::ARCH);
    let config = format!("[target.{triple}]\nrunner = \"true\"\n");
    let id = by_agent(&env, &[(".cargo/config.toml", &config)]);
    let (v, _) = review(&env, &id);
    blocks_naming(&v, "tests::adds");
    let f = &ours(&v, "blocking")[0];
    assert_eq!(f["category"], "tests-not-run", "{f:#}");
}

#[test]
fn a_head_that_no_longer_builds_blocks() {
    let env = repo(Suite::Rust);
    let head = LIB_RS.replace("    a + b\n", "    a + b +\n");
    let id = by_agent(&env, &[("src/lib.rs", &head)]);
    let (v, _) = review(&env, &id);
    blocks_naming(&v, "tests::adds");
    let f = &ours(&v, "blocking")[0];
    assert!(
        f["message"]
            .as_str()
            .unwrap_or("")
            .contains("did not build"),
        "{f:#}"
    );
}

/// libtest's names of `should_panic` and `compile_fail` tests carry their mode, `--list`'s do
/// not; ignored and doc tests are listed too: such a crate's report is believed, and a benign
/// change to it approved.
#[test]
fn a_crate_with_should_panic_ignored_and_doc_tests_passes() {
    let lib = format!(
        "/// ```\n/// assert_eq!(fx::add(1, 1), 2);\n/// ```\n///\n/// ```compile_fail\n/// let x: u32 = \"a\";\n/// ```\n{}",
        LIB_RS.replace(
            "    #[test]\n    fn subtracts",
            "    #[test]\n    #[should_panic]\n    fn underflows() {\n        sub(0, 1);\n    }\n\n    #[test]\n    #[ignore = \"slow\"]\n    fn slow() {}\n\n    #[test]\n    fn subtracts",
        )
    );
    let env = Env::with(Setup {
        files: vec![
            ("reviewers/inventory.toml".into(), REVIEWER.into()),
            ("Cargo.toml".into(), CARGO_TOML.into()),
            ("src/lib.rs".into(), lib.clone()),
        ],
        ..Setup::default()
    });
    let head = lib.replace("    a + b\n", "    b + a\n");
    let id = by_agent(&env, &[("src/lib.rs", &head)]);
    let (v, _) = review(&env, &id);
    passes(&v);
    assert_eq!(v["verdict"], "approve", "{v:#}");
}

/// The code under test (no test touched) breaks `adds` and prints libtest's line for it
/// passing: in the captured output libtest prints after the `FAILED` line, or straight into
/// the result section (past the capture). Neither improves the real outcome.
#[test]
fn a_forged_libtest_line_from_the_code_under_test_blocks() {
    let forgeries = [
        "println!(\"test tests::adds ... ok\");",
        "std::io::Write::write_all(&mut std::io::stdout(), b\"test tests::adds ... ok\\n\").unwrap();",
    ];
    for forged in forgeries {
        let env = repo(Suite::Rust);
        let head = LIB_RS.replace("    a + b\n", &format!("    {forged}\n    a * b + 1\n"));
        let id = by_agent(&env, &[("src/lib.rs", &head)]);
        let (v, _) = review(&env, &id);
        blocks_naming(&v, "tests::adds");
    }
}

/// The Python analogue: the code under test writes ` ... ok` to the stderr unittest's runner
/// writes to, so the verbose line reads `test_adds (…) ...  ... ok` and `FAIL` follows.
#[test]
fn a_forged_unittest_result_from_the_code_under_test_blocks() {
    let env = repo(Suite::Python);
    let head = CALC_PY.replace(
        "def add(a, b):\n    return a + b\n",
        "import sys\n\n\ndef add(a, b):\n    sys.stderr.write(\" ... ok\\n\")\n    sys.stderr.write(\"test_adds (tests.test_calc.TestCalc.test_adds) ... ok\\n\")\n    return a - b\n",
    );
    let id = by_agent(&env, &[("calc.py", &head)]);
    let (v, _) = review(&env, &id);
    blocks_naming(&v, "tests.test_calc.TestCalc.test_adds");
}

/// A warning the code under test raises is printed by unittest between a test's line and its
/// result word: the result still counts, and the benign change is approved.
#[test]
fn a_python_warning_between_a_test_and_its_result_passes() {
    let env = repo(Suite::Python);
    let head = CALC_PY.replace(
        "def add(a, b):\n    return a + b\n",
        "import warnings\n\n\ndef add(a, b):\n    warnings.warn(\"add is old\", DeprecationWarning)\n    return a + b\n",
    );
    let id = by_agent(&env, &[("calc.py", &head)]);
    let (v, _) = review(&env, &id);
    passes(&v);
    assert_eq!(v["verdict"], "approve", "{v:#}");
}

/// The JavaScript analogue: the code under test logs a TAP line for its test passing.
#[test]
fn a_forged_tap_line_from_the_code_under_test_blocks() {
    let env = repo(Suite::JavaScript);
    let head = CALC_TEST_JS.replace(
        "function add(a, b) { return a + b; }",
        "function add(a, b) { console.log('ok 1 - adds'); process.stdout.write('\\nok 1 - adds\\n# pass 2\\n'); return a - b; }",
    );
    let id = by_agent(&env, &[("test/calc.test.js", &head)]);
    let (v, _) = review(&env, &id);
    blocks_naming(&v, "adds");
}

/// What running cannot see: a shadowed `assert_eq!` that does nothing leaves every test
/// passing. The inventory does not block it (test strength, mutation, would); this test holds
/// the documented limit honestly in place.
#[test]
fn a_shadowed_assertion_macro_is_not_seen_by_the_inventory() {
    let env = repo(Suite::Rust);
    let head = LIB_RS
        .replace(
            "    use super::*;\n",
            "    use super::*;\n\n    macro_rules! assert_eq {\n        ($($t:tt)*) => {};\n    }\n",
        )
        .replace("add(2, 2), 4", "add(2, 2), 5");
    let id = by_agent(&env, &[("src/lib.rs", &head)]);
    let (v, _) = review(&env, &id);
    passes(&v);
}

#[test]
fn new_renamed_and_moved_rust_tests_pass() {
    let env = repo(Suite::Rust);
    // A new test and a rename in place, in one change.
    let head = LIB_RS
        .replace("fn adds()", "fn adds_two_numbers()")
        .replace(
            "    #[test]\n    fn subtracts",
            "    #[test]\n    fn adds_zero() {\n        assert_eq!(add(0, 7), 7);\n    }\n\n    #[test]\n    fn subtracts",
        );
    let id = by_agent(&env, &[("src/lib.rs", &head)]);
    let (v, _) = review(&env, &id);
    passes(&v);
    assert_eq!(v["verdict"], "approve", "{v:#}");
    // A test moved to an integration test file.
    let env = repo(Suite::Rust);
    let head = LIB_RS.replace(
        "    #[test]\n    fn adds() {\n        assert_eq!(add(2, 2), 4);\n    }\n\n",
        "",
    );
    let moved = "use fx::add;\n\n#[test]\nfn adds() {\n    assert_eq!(add(2, 2), 4);\n}\n";
    let id = by_agent(&env, &[("src/lib.rs", &head), ("tests/calc.rs", moved)]);
    let (v, _) = review(&env, &id);
    passes(&v);
    assert_eq!(v["verdict"], "approve", "{v:#}");
}

#[test]
fn a_python_test_skipped_at_its_top_blocks() {
    let env = repo(Suite::Python);
    let head = TEST_CALC_PY.replace(
        "    def test_adds(self):\n",
        "    def test_adds(self):\n        self.skipTest(\"flaky on CI\")\n",
    );
    let id = by_agent(&env, &[("tests/test_calc.py", &head)]);
    let (v, _) = review(&env, &id);
    blocks_naming(&v, "tests.test_calc.TestCalc.test_adds");
    assert!(
        ours(&v, "blocking")[0]["message"]
            .as_str()
            .unwrap_or("")
            .contains("skipped"),
        "{v:#}"
    );
}

#[test]
fn a_python_loader_that_drops_every_test_blocks() {
    let env = repo(Suite::Python);
    let loader = "import unittest\n\n\ndef load_tests(loader, tests, pattern):\n    return unittest.TestSuite()\n";
    let id = by_agent(&env, &[("tests/__init__.py", loader)]);
    let (v, _) = review(&env, &id);
    blocks_naming(&v, "tests.test_calc.TestCalc.test_adds");
}

#[test]
fn a_renamed_python_test_and_a_new_one_pass() {
    let env = repo(Suite::Python);
    let head = TEST_CALC_PY.replace("def test_adds", "def test_adds_small_numbers")
        + "\n    def test_adds_zero(self):\n        self.assertEqual(add(0, 3), 3)\n";
    let id = by_agent(&env, &[("tests/test_calc.py", &head)]);
    let (v, _) = review(&env, &id);
    passes(&v);
    assert_eq!(v["verdict"], "approve", "{v:#}");
}

#[test]
fn a_python_collector_that_fails_at_head_blocks() {
    let env = repo(Suite::Python);
    let head = TEST_CALC_PY.replace(
        "from calc import add, sub",
        "from calc import add, sub, mul",
    );
    let id = by_agent(&env, &[("tests/test_calc.py", &head)]);
    let (v, _) = review(&env, &id);
    blocks_naming(&v, "tests.test_calc.TestCalc.test_adds");
}

#[test]
fn a_suite_that_hangs_at_head_times_out_and_blocks() {
    let env = repo_with(
        Suite::Python,
        &REVIEWER.replace("timeout = 120", "timeout = 5"),
    );
    let head = TEST_CALC_PY.replace(
        "import unittest\n",
        "import time\nimport unittest\n\ntime.sleep(60)\n",
    );
    let id = by_agent(&env, &[("tests/test_calc.py", &head)]);
    let (v, secs) = review(&env, &id);
    blocks_naming(&v, "tests.test_calc.TestCalc.test_adds");
    let f = &ours(&v, "blocking")[0];
    assert!(
        f["message"].as_str().unwrap_or("").contains("timed out"),
        "{f:#}"
    );
    assert!(secs < 40.0, "the time limit held: {secs}s");
}

#[test]
fn an_export_that_fails_at_head_blocks_an_agent_s_change() {
    let env = repo(Suite::Python);
    let deep = format!("{}x.txt", "d/".repeat(260));
    let id = by_agent(&env, &[(&deep, "deep\n")]);
    let (v, _) = review(&env, &id);
    assert_eq!(v["verdict"], "block", "{v:#}");
    let f = &ours(&v, "blocking")[0];
    assert_eq!(f["category"], "reviewer-failed", "{f:#}");
}

#[test]
fn a_skipped_or_returned_javascript_test_blocks() {
    let env = repo(Suite::JavaScript);
    let head = CALC_TEST_JS.replace("test('adds'", "test.skip('adds'");
    let id = by_agent(&env, &[("test/calc.test.js", &head)]);
    let (v, _) = review(&env, &id);
    blocks_naming(&v, "adds");
    // A `return` at the top of the file: no test is registered, node reports none and exits 0.
    let env = repo(Suite::JavaScript);
    let head = format!("return;\n{CALC_TEST_JS}");
    let id = by_agent(&env, &[("test/calc.test.js", &head)]);
    let (v, _) = review(&env, &id);
    blocks_naming(&v, "subtracts");
}

#[test]
fn a_javascript_test_moved_to_another_file_passes() {
    let env = repo(Suite::JavaScript);
    let head = CALC_TEST_JS.replace(
        "test('subtracts', () => {\n  assert.strictEqual(5 - 3, 2);\n});\n",
        "",
    );
    let moved = "const test = require('node:test');\nconst assert = require('node:assert');\n\ntest('subtracts', () => {\n  assert.strictEqual(5 - 3, 2);\n});\n";
    let id = by_agent(
        &env,
        &[("test/calc.test.js", &head), ("test/sub.test.js", moved)],
    );
    let (v, _) = review(&env, &id);
    passes(&v);
    assert_eq!(v["verdict"], "approve", "{v:#}");
}

/// The head's tests run contained: they cannot read the gate key, write outside their export,
/// or connect to a port that listens. The head's test passes only if every attempt is refused,
/// so the reviewer passing it is the proof (and nothing arrives at the listener).
#[test]
fn the_head_s_tests_reach_neither_the_gate_key_nor_the_network() {
    crate::support::skip::require_landlock!();
    let env = repo(Suite::Python);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let port = listener.local_addr().expect("addr").port();
    let outside = env.tmp.path().join("exfiltrated");
    let head = TEST_CALC_PY.replace(
        "    def test_adds(self):\n",
        &format!(
            "    def test_adds(self):\n        import socket\n        with self.assertRaises(OSError):\n            open({key:?}).read()\n        with self.assertRaises(OSError):\n            open({out:?}, 'w').write('x')\n        with self.assertRaises(OSError):\n            socket.create_connection(('127.0.0.1', {port}), timeout=2)\n",
            key = env.gate_key().display().to_string(),
            out = outside.display().to_string(),
        ),
    );
    let id = by_agent(&env, &[("tests/test_calc.py", &head)]);
    let (v, _) = review(&env, &id);
    passes(&v);
    assert!(
        !outside.exists(),
        "a contained test wrote outside its export"
    );
    assert!(listener.accept().is_err(), "a contained test connected");
}

/// Whether cargo-mutants is on this machine's PATH.
fn cargo_mutants() -> bool {
    std::env::var("PATH")
        .unwrap_or_default()
        .split(':')
        .any(|d| std::path::Path::new(d).join("cargo-mutants").is_file())
}

/// Test strength, with `mutants = true`: the shadowed `assert_eq!` leaves every test passing,
/// but the mutants of `add` and `sub` the base's tests caught now survive, and that blocks. A
/// new test leaves them caught.
#[test]
fn a_shadowed_assertion_macro_is_caught_by_mutation_testing() {
    if !cargo_mutants() {
        crate::support::skip::skip!(
            "cargo-mutants is not installed (cargo install --locked cargo-mutants)"
        );
    }
    let reviewer = format!("{REVIEWER}mutants = true\n");
    let env = repo_with(Suite::Rust, &reviewer);
    let head = LIB_RS.replace(
        "    use super::*;\n",
        "    use super::*;\n\n    macro_rules! assert_eq {\n        ($($t:tt)*) => {};\n    }\n",
    );
    let id = by_agent(&env, &[("src/lib.rs", &head)]);
    let (v, _) = review(&env, &id);
    assert_eq!(v["verdict"], "block", "{v:#}");
    let weakened: Vec<_> = ours(&v, "blocking")
        .into_iter()
        .filter(|f| f["category"] == "tests-weakened")
        .collect();
    assert!(
        weakened
            .iter()
            .any(|f| f["message"].as_str().unwrap_or("").contains("in add")),
        "{v:#}"
    );
    let env = repo_with(Suite::Rust, &reviewer);
    let head = LIB_RS.replace(
        "    #[test]\n    fn subtracts",
        "    #[test]\n    fn adds_zero() {\n        assert_eq!(add(0, 7), 7);\n    }\n\n    #[test]\n    fn subtracts",
    );
    let id = by_agent(&env, &[("src/lib.rs", &head)]);
    let (v, _) = review(&env, &id);
    passes(&v);
    assert_eq!(v["verdict"], "approve", "{v:#}");
}

/// The gate holder lands an agent's change by hand, without the tests reviewer's verdict:
/// `audit verify` re-judges the merge with the recorded verdicts only, and finds it missing.
#[test]
fn a_merge_without_the_tests_reviewer_s_verdict_is_caught_by_audit() {
    let env = repo(Suite::Python);
    let id = by_agent(&env, &[("calc.py", &format!("{CALC_PY}\n# tidied\n"))]);
    let v = crate::panel::landed_by_the_gate_holder(&env, &id);
    let findings = v["findings"].as_array().expect("findings");
    assert!(
        findings.iter().any(|f| f["detail"]
            .as_str()
            .unwrap_or("")
            .contains("E_REVIEW_MISSING")),
        "{v:#}"
    );
}
