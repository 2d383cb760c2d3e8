//! Controlling a running swarm: pause, resume, retry, skip and stop, from another process.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::support::swarm::{plan, task, wait_for_event, waits_for, Background, Swarm};
use crate::support::Run;

/// Pause, resume, retry and skip, sent through the run's directory from another process while
/// the conductor works; each recorded with who asked; a control that cannot apply says why.
#[test]
fn an_operator_pauses_resumes_retries_and_skips_a_running_swarm() {
    let s = Swarm::new("failure_budget = 1");
    let go = s.fake.join("go");
    let fixed = s.fake.join("fixed");
    // A waits for the test's go-ahead; F fails until "fixed"; G always fails; H needs G.
    s.scenario("p:A", &waits_for(&go, "src/a.rs"));
    s.scenario(
        "p:F",
        &format!(
            "if [ -f '{}' ]; then echo ok > src/f.rs; else echo 'error: not yet'; exit 3; fi",
            fixed.display()
        ),
    );
    s.scenario("p:G", "exit 4");
    s.scenario("p:H", "echo ok > src/h.rs");
    // W keeps the run going while the operator acts on F and G.
    let end = s.fake.join("end");
    s.scenario("p:W", &waits_for(&end, "src/w.rs"));
    let p = s.plan(
        "p.toml",
        &plan(
            "p",
            &[
                task("A", &["src/a.rs"], &[], "grep -q ok src/a.rs"),
                task("F", &["src/f.rs"], &[], "grep -q ok src/f.rs"),
                task("G", &["src/g.rs"], &[], "test -f src/g.rs"),
                task("H", &["src/h.rs"], &["G"], "grep -q ok src/h.rs"),
                task("W", &["src/w.rs"], &[], "grep -q ok src/w.rs"),
            ],
        ),
    );
    let bg = Background::start(&s, &p);
    bg.wait_for("\"task\":\"p:A\"");
    s.run(&["control", "pause"]).ok();
    bg.wait_for("\"action\":\"pause\"");
    let paused = s.run(&["status"]).ok().stdout;
    assert!(paused.contains("PAUSED by an operator"), "{paused}");
    // A second pause says why it does not apply; an unknown task is refused at once.
    s.run(&["control", "pause"]).ok();
    bg.wait_for("already paused");
    let unknown = s.run(&["control", "retry", "p:Z"]).code(2);
    assert!(
        unknown.stderr.contains("has no task `p:Z`"),
        "{}",
        unknown.stderr
    );
    // A finishes while paused; nothing else starts.
    std::fs::write(&go, "").expect("go");
    bg.wait_for("\"kind\":\"integrated\"");
    std::thread::sleep(std::time::Duration::from_millis(600));
    let text = std::fs::read_to_string(&bg.events).expect("events");
    assert!(
        !text.contains("\"task\":\"p:F\""),
        "F started while paused:\n{text}"
    );
    s.run(&["control", "resume"]).ok();
    // F fails (budget 1), G fails and blocks H; the operator fixes F and retries it, and
    // forces past G so that H runs.
    bg.wait_for("\"task\":\"p:W\"");
    let text = std::fs::read_to_string(&bg.events).expect("events");
    assert!(
        text.contains("\"by\":\"p:G\""),
        "H is blocked by G:\n{text}"
    );
    std::fs::write(&fixed, "").expect("fixed");
    s.run(&["control", "retry", "p:F"]).ok();
    s.run(&["control", "skip", "p:G"]).ok();
    bg.wait_for("\"action\":\"skip\"");
    std::fs::write(&end, "").expect("end");
    let r = bg.finish();
    assert_eq!(
        r.code, 1,
        "a run with a skipped task is not a success: {}",
        r.stderr
    );
    let events =
        std::fs::read_to_string(s.env.repo.join(".atelier/runs/r1/events.jsonl")).expect("events");
    for want in [
        "\"action\":\"retry\",\"task\":\"p:F\",\"by\":\"proposer@example.org\",\"applied\":true",
        "\"action\":\"skip\",\"task\":\"p:G\",\"by\":\"proposer@example.org\",\"applied\":true",
        "\"action\":\"resume\"",
    ] {
        assert!(events.contains(want), "{want}:\n{events}");
    }
    assert!(s
        .env
        .git(&["show", "atelier/runs/r1:src/f.rs"])
        .contains("ok"));
    assert!(s
        .env
        .git(&["show", "atelier/runs/r1:src/h.rs"])
        .contains("ok"));
    let status = s.run(&["status"]).ok().stdout;
    assert!(status.contains("skipped"), "{status}");
    let refused = s.run(&["propose", "--run", "r1"]).code(2);
    assert!(refused.stderr.contains("succeed"), "{}", refused.stderr);
    let done = s.run(&["control", "pause"]).code(2);
    assert!(done.stderr.contains("has finished"), "{}", done.stderr);
}

/// `control stop` stops every worker cleanly; `run --resume` continues.
#[test]
fn an_operator_stops_a_run_and_it_resumes() {
    let s = Swarm::new("failure_budget = 1");
    let go = s.fake.join("go");
    s.scenario("p:A", &waits_for(&go, "src/a.rs"));
    let p = s.plan(
        "p.toml",
        &plan("p", &[task("A", &["src/a.rs"], &[], "grep -q ok src/a.rs")]),
    );
    let bg = Background::start(&s, &p);
    bg.wait_for("\"task\":\"p:A\"");
    s.run(&["control", "stop"]).ok();
    let r = bg.finish();
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("stopped by an operator") && r.stderr.contains("atelier run --resume r1"),
        "{}",
        r.stderr
    );
    std::fs::write(&go, "").expect("go");
    s.run(&["run", "--resume", "r1"]).ok();
}

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
    wait_for_event(&events, "\"task\":\"p:A\"");
    s.run(&["control", "pause"]).ok();
    wait_for_event(&events, "\"action\":\"pause\"");
    std::fs::write(&go, "").expect("go");
    wait_for_event(&events, "\"kind\":\"integrated\"");
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
    wait_for_event(&events, "\"task\":\"p:A\"");
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
    wait_for_event(&events, "\"task\":\"p:A\"");
    s.run(&["control", "skip", "p:B"]).ok();
    wait_for_event(&events, "\"action\":\"skip\"");
    std::fs::write(&go, "").expect("go");
    let r = finish_within(child, 60, "the run");
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stdout.contains("skipped") && r.stdout.contains("p:B"),
        "the report does not say p:B was skipped:\n{}",
        r.stdout
    );
}
