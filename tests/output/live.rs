//! The live view of a run: progress unless `--quiet`, silences while they last and only for their
//! attempt, never wider than the terminal.

use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::support::swarm::{in_terminal, plan, task, wait_for_event, waits_for, Swarm};

/// `run` shows progress on stderr while it works (one line per change of state when stderr is
/// not a terminal); `--quiet` turns it off; `--json` keeps stdout machine-readable.
#[test]
fn a_run_shows_its_progress_unless_quiet() {
    let s = Swarm::new("failure_budget = 2");
    s.scenario("p:A", "echo ok > src/a.rs");
    s.scenario(
        "p:B",
        "if [ \"$ATELIER_ATTEMPT\" = 1 ]; then exit 3; fi; echo ok > src/b.rs",
    );
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
    let r = s.run(&["run", &p, "--json"]).ok();
    for want in [
        "p:A: attempt 1 started (implementer)",
        "p:B: attempt 1 failed: the worker exited with 3",
        "p:B: attempt 2 started",
        "p:B: attempt 2 passed",
        "p:A: integrated",
        "finished: 2 succeeded, 0 failed, 0 blocked",
    ] {
        assert!(r.stderr.contains(want), "{want}: {}", r.stderr);
    }
    assert_eq!(r.json()["succeeded"].as_array().map(Vec::len), Some(2));
    let quiet = s.run(&["run", &p, "--quiet"]).ok();
    assert!(
        !quiet.stderr.contains("attempt 1 started"),
        "{}",
        quiet.stderr
    );
}

/// A worker's silence shows while it lasts: the conductor publishes it (`live.json`, about once
/// a second), `status` (plain and `--json`) and `run`'s live view on a terminal show "silent
/// for"; the file goes when the conductor stops, and then nothing claims a silence.
#[test]
fn a_silent_worker_shows_its_silence_while_it_lasts() {
    let s = Swarm::new("nudge_after = \"30s\"\nrestart_after = \"60s\"\nfailure_budget = 1");
    let go = s.fake.join("go");
    s.scenario("p:A", &waits_for(&go, "src/a.rs"));
    let p = s.plan(
        "p.toml",
        &plan("p", &[task("A", &["src/a.rs"], &[], "grep -q ok src/a.rs")]),
    );
    // `run` in a pseudo-terminal, so its live view is the one a person sees.
    let view = in_terminal(&s, 120, &format!("run '{p}'"));
    let dir = s.env.repo.join(".atelier/runs/r1");
    let live = dir.join("live.json");
    let start = std::time::Instant::now();
    let silent_ms = loop {
        let v: Option<serde_json::Value> = std::fs::read(&live)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        let ms = v.as_ref().and_then(|v| {
            v["attempts"]
                .as_array()?
                .iter()
                .find(|a| a["task"] == "p:A" && a["attempt"] == 1)?["silent_ms"]
                .as_u64()
        });
        if let Some(ms) = ms.filter(|ms| *ms >= 2_000) {
            break ms;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(60),
            "no silence of 2 s published: {v:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert!(silent_ms < 60_000, "{silent_ms}");
    let status = s.run(&["status"]).ok().stdout;
    let row = status
        .lines()
        .find(|l| l.starts_with("p:A "))
        .expect("p:A's row");
    assert!(
        status.contains("SILENT")
            && row
                .split_whitespace()
                .nth(4)
                .is_some_and(|c| c.ends_with('s') && c != "-"),
        "{status}"
    );
    let json = s.run(&["status", "--json"]).ok().json();
    assert!(
        json["silent_ms"]["p:A"]
            .as_u64()
            .is_some_and(|ms| ms >= 2_000),
        "{json}"
    );
    std::fs::write(&go, "").expect("go");
    let out = view.wait_with_output().expect("the run ends");
    let screen = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{screen}");
    assert!(
        ["2s", "3s", "4s", "5s"]
            .iter()
            .any(|t| screen.contains(&format!("attempt 1  working, silent for {t}"))),
        "{screen}"
    );
    assert!(!live.exists(), "the conductor stopped: no live status left");
    let after = s.run(&["status"]).ok().stdout;
    let row = after.lines().find(|l| l.starts_with("p:A ")).expect("p:A");
    assert_eq!(row.split_whitespace().nth(4), Some("-"), "{after}");
    assert_eq!(
        s.run(&["status", "--json"]).ok().json()["silent_ms"],
        serde_json::json!({})
    );
}

/// Waits (at most 60 s) until `path` exists.
fn wait_for_file(path: &std::path::Path) {
    let start = Instant::now();
    while !path.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// An uncontained worker links `live.json.tmp` in the run's directory to a file of its choosing:
/// the conductor's next publication must not write through the link.
#[test]
fn a_link_a_worker_leaves_at_live_json_tmp_is_not_written_through() {
    let s = Swarm::uncontained("nudge_after = \"30s\"\nrestart_after = \"60s\"");
    let victim = s.fake.join("victim");
    std::fs::write(&victim, "precious").expect("victim");
    let planted = s.fake.join("planted");
    let go = s.fake.join("go");
    let tmp = s.env.repo.join(".atelier/runs/r1/live.json.tmp");
    s.scenario(
        "p:A",
        &format!(
            "ln -sf '{}' '{}'; touch '{}'; {}",
            victim.display(),
            tmp.display(),
            planted.display(),
            waits_for(&go, "src/a.rs")
        ),
    );
    let p = s.plan(
        "p.toml",
        &plan("p", &[task("A", &["src/a.rs"], &[], "grep -q ok src/a.rs")]),
    );
    let child = s
        .command(&["run", &p, "--quiet"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("run");
    wait_for_file(&planted);
    // At least two publications (about once a second) after the link was left.
    std::thread::sleep(Duration::from_millis(2_500));
    std::fs::write(&go, "").expect("go");
    let out = child.wait_with_output().expect("the run ends");
    assert!(out.status.success());
    assert_eq!(
        std::fs::read_to_string(&victim).expect("victim"),
        "precious",
        "the conductor wrote through the worker's link"
    );
    assert!(!tmp.exists() && !tmp.is_symlink());
}

/// `run`'s live view redraws itself every second by moving the cursor up over the lines it
/// drew: a line wider than the terminal wraps and the view then creeps down the screen, a copy
/// a second. Every line it draws fits the terminal.
#[test]
fn the_live_view_never_draws_a_line_wider_than_the_terminal() {
    let s = Swarm::new("nudge_after = \"30s\"\nrestart_after = \"60s\"\nfailure_budget = 2");
    let go = s.fake.join("go");
    // Attempt 1 fails its (long) check; attempt 2 waits, while the view redraws.
    s.scenario(
        "p:A",
        &format!(
            "if [ \"$ATELIER_ATTEMPT\" = 1 ]; then echo bad > src/a.rs; else {}; fi",
            waits_for(&go, "src/a.rs")
        ),
    );
    let check = format!("grep -q ok src/a.rs && test -n '{}'", "x".repeat(120));
    let p = s.plan(
        "p.toml",
        &plan("p", &[task("A", &["src/a.rs"], &[], &check)]),
    );
    let view = in_terminal(&s, 80, &format!("run '{p}'"));
    let events = s.env.repo.join(".atelier/runs/r1/events.jsonl");
    wait_for_event(&events, "\"attempt\":2");
    // A few redraws with attempt 1's failure as the last event.
    std::thread::sleep(Duration::from_millis(3_000));
    std::fs::write(&go, "").expect("go");
    let out = view.wait_with_output().expect("the run ends");
    let screen = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{screen}");
    assert!(screen.contains("attempt 1 failed"), "{screen}");
    // The view's lines, without the cursor movements that start each redraw.
    let wide: Vec<&str> = screen
        .split(['\n', '\r'])
        .map(|l| l.rsplit("\x1b[J").next().unwrap_or(l))
        .filter(|l| l.starts_with("  ") || l.starts_with("run r1 ("))
        .filter(|l| l.chars().count() > 80)
        .collect();
    assert!(wide.is_empty(), "lines wider than 80 columns: {wide:#?}");
}

/// A live status about another attempt of the task (one the conductor wrote just before a
/// restart, or a leftover) says nothing about the attempt running now.
#[test]
fn a_silence_is_shown_only_for_the_attempt_it_was_measured_on() {
    let s = Swarm::new("nudge_after = \"30s\"\nrestart_after = \"60s\"");
    let go = s.fake.join("go");
    s.scenario("p:A", &waits_for(&go, "src/a.rs"));
    let p = s.plan(
        "p.toml",
        &plan("p", &[task("A", &["src/a.rs"], &[], "grep -q ok src/a.rs")]),
    );
    let mut child = s
        .command(&["run", &p, "--quiet"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("run");
    let dir = s.env.repo.join(".atelier/runs/r1");
    // Until the conductor has published A's worker.
    let start = Instant::now();
    while !std::fs::read_to_string(dir.join("live.json")).is_ok_and(|t| t.contains("p:A")) {
        assert!(start.elapsed() < Duration::from_secs(60), "A never ran");
        std::thread::sleep(Duration::from_millis(50));
    }
    // The conductor dies (SIGKILL: no guard runs); its worker goes on.
    child.kill().expect("kill");
    child.wait().expect("wait");
    let now = atelier::swarm::live::now_ms();
    std::fs::write(
        dir.join("live.json"),
        format!(
            r#"{{"pid":1,"written_ms":{now},"attempts":[{{"task":"p:A","attempt":7,"silent_ms":42000}}]}}"#
        ),
    )
    .expect("live.json");
    let status = s.run(&["status", "--json"]).ok().json();
    std::fs::write(&go, "").expect("go");
    assert_eq!(status["tasks"]["p:A"]["attempt"], 1, "{status}");
    assert_eq!(status["silent_ms"], serde_json::json!({}), "{status}");
    let plain = s.run(&["status"]).ok().stdout;
    assert!(!plain.contains("42s"), "{plain}");
}
