//! A review of the operator controls (`atelier control`, the `watch` cockpit): failing-first
//! tests for what a contained worker, a race with the run's end, or the control directory can
//! do to the conductor and to operators' terminals.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::support::Run;
use crate::swarm::{cockpit, plan, task, wait_for_event as wait_for, waits_for, Swarm};

/// Waits for `child` at most `secs`; a child still running then is killed and reported.
fn finish_within(mut child: std::process::Child, secs: u64, what: &str) -> Run {
    let start = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            let o = child.wait_with_output().expect("output");
            return Run {
                code: o.status.code().unwrap_or(-1),
                stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
            };
        }
        if start.elapsed() > Duration::from_secs(secs) {
            let _ = child.kill();
            let o = child.wait_with_output().expect("output");
            panic!(
                "{what} still running after {secs}s (killed)\nstdout:\n{}\nstderr:\n{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn control_dir(s: &Swarm, run: &str) -> PathBuf {
    s.env.repo.join(".atelier/runs").join(run).join("control")
}

/// A contained worker names a file it writes outside its claims with a terminal escape (an
/// OSC title sequence here; OSC 52 writes the operator's clipboard, CSI erases and forges
/// lines). The attempt fails with that name in its reason, and `run`'s progress prints the
/// reason to the operator's terminal as it is.
#[test]
fn a_workers_file_name_writes_no_escape_sequence_to_run_progress() {
    let s = Swarm::new("failure_budget = 1");
    s.scenario(
        "p:A",
        "echo ok > src/a.rs; printf x > \"$(printf 'evil\\033]2;PWNED\\007')\"",
    );
    let p = s.plan(
        "p.toml",
        &plan("p", &[task("A", &["src/a.rs"], &[], "grep -q ok src/a.rs")]),
    );
    let r = s.run(&["run", &p]).code(1);
    assert!(
        r.stderr.contains("wrote outside its claims"),
        "the attempt did not fail on its claims:\n{}",
        r.stderr
    );
    assert!(
        !r.stderr.contains('\u{1b}') && !r.stdout.contains('\u{1b}'),
        "a worker's escape sequence reached the operator's terminal:\nstderr: {:?}\nstdout: {:?}",
        r.stderr,
        r.stdout
    );
}

/// The same worker-named file, shown by the cockpit: the task's LAST column holds the failure
/// reason, and the cockpit writes its escape sequence to the terminal.
#[test]
fn a_workers_file_name_writes_no_escape_sequence_to_the_cockpit() {
    use std::io::Write;
    let s = Swarm::new("failure_budget = 1");
    s.scenario(
        "p:A",
        "echo ok > src/a.rs; printf x > \"$(printf '\\033]2;PWNED\\007')\"",
    );
    let p = s.plan(
        "p.toml",
        &plan("p", &[task("A", &["src/a.rs"], &[], "grep -q ok src/a.rs")]),
    );
    s.run(&["run", &p, "--quiet"]).code(1);
    let mut cockpit = cockpit(&s, 200);
    let mut keys = cockpit.stdin.take().expect("stdin");
    std::thread::sleep(Duration::from_millis(1500));
    keys.write_all(b"q").expect("q");
    drop(keys);
    let out = cockpit.wait_with_output().expect("the cockpit quits");
    let screen = String::from_utf8_lossy(&out.stdout);
    assert!(screen.contains("p:A"), "{screen}");
    assert!(
        !screen.contains("\u{1b}]2;PWNED"),
        "the cockpit wrote a worker's OSC sequence to the terminal:\n{screen:?}"
    );
}

/// `atelier control pause` checks the run has not finished, then leaves its request; the run
/// can finish in between (or the cockpit's view, redrawn twice a second, is older than the
/// end). The request simulated here is exactly what `control pause` writes. `propose --run`
/// (and `run --resume`) of the finished run then takes the pause, and waits for a `resume`
/// that nothing tells the operator to send: it never returns.
#[test]
fn a_pause_left_behind_by_a_finished_run_does_not_hang_propose_run() {
    let s = Swarm::new("failure_budget = 1");
    s.scenario("p:A", "echo ok > src/a.rs");
    let p = s.plan(
        "p.toml",
        &plan("p", &[task("A", &["src/a.rs"], &[], "grep -q ok src/a.rs")]),
    );
    s.run(&["run", &p, "--quiet"]).ok();
    let ctl = control_dir(&s, "r1");
    std::fs::create_dir_all(&ctl).expect("mkdir");
    std::fs::write(
        ctl.join("000000000001-0123456789ab.json"),
        r#"{"action":"pause","task":null,"by":"proposer@example.org"}"#,
    )
    .expect("the late request");
    let child = s
        .command(&["propose", "--run", "r1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("propose");
    let r = finish_within(child, 60, "propose --run r1 of a finished run");
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
}

/// A run paused while its last attempt works: the attempt ends, nothing is left to start or
/// wait for, and the run never finishes (the operator's `run` does not return until someone
/// sends `resume` from another terminal).
#[test]
fn a_paused_run_with_nothing_left_to_do_finishes() {
    let s = Swarm::new("failure_budget = 1");
    let go = s.fake.join("go");
    s.scenario("p:A", &waits_for(&go, "src/a.rs"));
    let p = s.plan(
        "p.toml",
        &plan("p", &[task("A", &["src/a.rs"], &[], "grep -q ok src/a.rs")]),
    );
    let child = s
        .command(&["run", &p, "--quiet"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run");
    let events = s.env.repo.join(".atelier/runs/r1/events.jsonl");
    wait_for(&events, "\"task\":\"p:A\"");
    s.run(&["control", "pause"]).ok();
    wait_for(&events, "\"action\":\"pause\"");
    std::fs::write(&go, "").expect("go");
    wait_for(&events, "\"kind\":\"integrated\"");
    let r = finish_within(child, 20, "a paused run whose every task has ended");
    assert_eq!(r.code, 0, "{}", r.stderr);
}

/// A FIFO named like a request in the run's `control/` directory: the conductor reads it
/// with a blocking read on its only thread, so it stops conducting (its workers' time limits,
/// its Ctrl-C handling and every later event wait on a writer that never comes).
#[test]
fn a_fifo_in_the_control_directory_does_not_hang_the_conductor() {
    let s = Swarm::new("failure_budget = 1");
    let go = s.fake.join("go");
    s.scenario("p:A", &waits_for(&go, "src/a.rs"));
    let p = s.plan(
        "p.toml",
        &plan("p", &[task("A", &["src/a.rs"], &[], "grep -q ok src/a.rs")]),
    );
    let child = s
        .command(&["run", &p, "--quiet"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run");
    let events = s.env.repo.join(".atelier/runs/r1/events.jsonl");
    wait_for(&events, "\"task\":\"p:A\"");
    let ctl = control_dir(&s, "r1");
    std::fs::create_dir_all(&ctl).expect("mkdir");
    let fifo = ctl.join("000000000001-fifo.json");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    std::fs::write(&go, "").expect("go");
    let r = finish_within(child, 30, "a run with a FIFO in its control directory");
    assert_eq!(r.code, 0, "{}", r.stderr);
}

/// A run with a skipped task exits 1, but its report lists only what succeeded, failed and
/// was blocked: the operator is not told which task was forced past, nor why nothing was
/// proposed; the progress's last line says `0 failed, 0 blocked`.
#[test]
fn a_run_with_a_skipped_task_says_which_task_was_skipped() {
    let s = Swarm::new("failure_budget = 1");
    let go = s.fake.join("go");
    s.scenario("p:A", &waits_for(&go, "src/a.rs"));
    s.scenario("p:B", "echo ok > src/b.rs");
    let p = s.plan(
        "p.toml",
        &plan(
            "p",
            &[
                task("A", &["src/a.rs"], &[], "grep -q ok src/a.rs"),
                task("B", &["src/b.rs"], &["A"], "grep -q ok src/b.rs"),
            ],
        ),
    );
    let child = s
        .command(&["run", &p, "--propose"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run");
    let events = s.env.repo.join(".atelier/runs/r1/events.jsonl");
    wait_for(&events, "\"task\":\"p:A\"");
    s.run(&["control", "skip", "p:B"]).ok();
    wait_for(&events, "\"action\":\"skip\"");
    std::fs::write(&go, "").expect("go");
    let r = finish_within(child, 60, "the run");
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stdout.contains("skipped") && r.stdout.contains("p:B"),
        "the report does not say p:B was skipped:\n{}",
        r.stdout
    );
}

/// A proposal's diff carries terminal escapes (a cursor-up and erase-line after the line that
/// matters): printed as is, `atelier show` would hide that line from the reviewer reading it on
/// a terminal. Titles with control characters are refused outright; what a diff holds is shown
/// with each control character replaced, in `show`, `proposals` and `audit show`.
#[test]
fn a_diff_cannot_hide_a_line_from_its_reviewer_with_terminal_escapes() {
    let env = crate::support::Env::new();
    let patch = env.patch(&[(
        "src/lib.rs",
        "pub fn answer() -> u32 {\n    std::process::abort() // \u{1b}[1A\u{1b}[2K\n    42\n}\n",
    )]);
    let refused = env
        .atelier(&[
            "propose",
            "--patch",
            patch.to_str().expect("utf8"),
            "--title",
            "Fix \u{1b}]0;owned\u{7}the answer",
        ])
        .code(2);
    assert!(
        refused
            .stderr
            .contains("a control character (U+001B) at byte 4"),
        "{}",
        refused.stderr
    );
    let id = env
        .atelier(&[
            "propose",
            "--patch",
            patch.to_str().expect("utf8"),
            "--title",
            "Fix the answer",
        ])
        .ok()
        .stdout
        .trim()
        .to_string();
    for args in [
        vec!["show", id.as_str()],
        vec!["proposals"],
        vec!["audit", "show", id.as_str()],
    ] {
        let shown = env.atelier(&args).ok().stdout;
        assert!(
            !shown.contains('\u{1b}'),
            "{args:?} prints an escape: {shown:?}"
        );
        if args[0] == "show" {
            assert!(
                shown.contains("+    std::process::abort() // \u{FFFD}[1A\u{FFFD}[2K"),
                "{shown}"
            );
        }
    }
    // Machine-readable output keeps the bytes, escaped as JSON escapes them.
    let json = env.atelier(&["audit", "show", &id, "--json"]);
    assert!(!json.stdout.contains('\u{1b}'), "{}", json.stdout);
}
