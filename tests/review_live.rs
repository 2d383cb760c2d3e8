//! Review of the live silence (`live.json`, `run`'s live view, `status`): what a worker that is
//! not contained, a stale file or a long line can do to it.

use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::swarm::{plan, task, waits_for, Swarm};

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
