//! The cockpit (`atelier cockpit`) in a real terminal: it pauses a swarm, and a worker's file name
//! writes no escape sequence to it.

use std::time::Duration;

use crate::support::swarm::{cockpit, plan, screen_words, task, waits_for, Background, Swarm};

/// `atelier watch` on a terminal is the cockpit: driven through a pseudo-terminal (`script`),
/// its `p` key pauses the running swarm, recorded with who asked; `q` quits.
#[test]
fn the_cockpit_pauses_a_running_swarm_from_a_terminal() {
    use std::io::Write;
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
                task("B", &["src/b.rs"], &[], "grep -q ok src/b.rs"),
            ],
        ),
    );
    let bg = Background::start(&s, &p);
    bg.wait_for("\"task\":\"p:A\"");
    let mut cockpit = cockpit(&s, 160);
    let mut keys = cockpit.stdin.take().expect("stdin");
    std::thread::sleep(std::time::Duration::from_millis(1500));
    keys.write_all(b"p").expect("p");
    keys.flush().expect("flush");
    bg.wait_for("\"action\":\"pause\"");
    keys.write_all(b"q").expect("q");
    drop(keys);
    let out = cockpit.wait_with_output().expect("the cockpit quits");
    let screen = String::from_utf8_lossy(&out.stdout);
    assert!(
        screen.contains("waves:") && screen.contains("asked") && !screen.contains("note:"),
        "{screen}"
    );
    let events = std::fs::read_to_string(&bg.events).expect("events");
    assert!(
        events.contains("\"action\":\"pause\",\"by\":\"proposer@example.org\",\"applied\":true"),
        "{events}"
    );
    s.run(&["control", "resume"]).ok();
    std::fs::write(&go, "").expect("go");
    assert_eq!(bg.finish().code, 0);
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

/// At 80 columns the cockpit shows task ids and states whole; when the run finishes it closes
/// by itself, as `--help` says, and leaves the final status on the screen.
#[test]
fn at_80_columns_the_cockpit_shows_whole_states_and_closes_when_the_run_ends() {
    let s = Swarm::new("failure_budget = 1");
    let go = s.fake.join("go");
    s.scenario("p:Parse", &waits_for(&go, "src/a.rs"));
    let p = s.plan(
        "p.toml",
        &plan(
            "p",
            &[task("Parse", &["src/a.rs"], &[], "grep -q ok src/a.rs")],
        ),
    );
    let bg = Background::start(&s, &p);
    bg.wait_for("\"task\":\"p:Parse\"");
    let mut view = crate::support::swarm::in_terminal(&s, 80, "watch");
    let keys = view.stdin.take().expect("stdin");
    std::thread::sleep(Duration::from_millis(1500));
    std::fs::write(&go, "").expect("go");
    assert_eq!(bg.finish().code, 0);
    let start = std::time::Instant::now();
    while view.try_wait().expect("wait").is_none() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the cockpit stayed open after the run finished"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(keys);
    let out = view.wait_with_output().expect("the cockpit's screen");
    let words = screen_words(&out.stdout);
    assert!(words.contains("p:Parse running"), "{words}");
    assert!(
        !words.contains("runn ") && !words.contains("pend "),
        "{words}"
    );
    // The final status, printed after the cockpit's screen closed.
    let plain = String::from_utf8_lossy(&out.stdout);
    let last = plain.rsplit("\u{1b}[?1049l").next().unwrap_or_default();
    assert!(
        last.contains("p:Parse") && last.contains("succeeded"),
        "{last:?}"
    );
}

/// Piped (not a terminal), `watch` prints the status as plain text, without the screen
/// clearing escapes, and ends with the run.
#[test]
fn piped_watch_prints_plain_status_and_ends_with_the_run() {
    let s = Swarm::new("failure_budget = 1");
    s.scenario("p:A", "echo ok > src/a.rs");
    let p = s.plan(
        "p.toml",
        &plan("p", &[task("A", &["src/a.rs"], &[], "grep -q ok src/a.rs")]),
    );
    s.run(&["run", &p, "--quiet"]).ok();
    let r = s.run(&["watch"]).ok();
    assert!(!r.stdout.contains('\u{1b}'), "{:?}", r.stdout);
    assert!(
        r.stdout.contains("p:A") && r.stdout.contains("succeeded"),
        "{}",
        r.stdout
    );
    let help = s.run(&["watch", "--help"]).ok();
    assert!(
        help.stdout.contains("--stay") && help.stdout.contains("q or Esc quit"),
        "{}",
        help.stdout
    );
}
