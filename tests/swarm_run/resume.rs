//! Resuming a run: after a kill, a torn log line or a crash mid-integration, to the same result;
//! forged events and branches are refused.

use std::process::Stdio;

use atelier::swarm::events::RunEvent;

use crate::support::swarm::{one, plan, task, Swarm};

#[test]
fn a_run_killed_mid_way_resumes_to_the_same_result() {
    let tasks: Vec<String> = (0..6)
        .map(|i| {
            let deps: Vec<String> = if i > 0 {
                vec![format!("T{}", i - 1)]
            } else {
                Vec::new()
            };
            let deps: Vec<&str> = deps.iter().map(String::as_str).collect();
            task(
                &format!("T{i}"),
                &[&format!("src/f{i}.rs")],
                &deps,
                &format!("test -f src/f{i}.rs"),
            )
        })
        .collect();
    let setup = |s: &Swarm| {
        for i in 0..6 {
            s.scenario(
                &format!("p:T{i}"),
                &format!("sleep 0.3; echo 'pub const N: u32 = {i};' > src/f{i}.rs"),
            );
        }
    };
    // Uninterrupted.
    let a = Swarm::new("");
    setup(&a);
    let pa = a.plan("p.toml", &plan("p", &tasks));
    a.run(&["run", &pa]).ok();
    let expected = a.env.git(&["rev-parse", "atelier/runs/r1:src"]);
    // Killed with SIGKILL at several points of the run, then resumed.
    for kill_after in [2, 6, 11] {
        let b = Swarm::new("");
        setup(&b);
        let pb = b.plan("p.toml", &plan("p", &tasks));
        let mut child = b
            .command(&["run", &pb])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        let events = b.env.repo.join(".atelier/runs/r1/events.jsonl");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let n = std::fs::read_to_string(&events)
                .map(|t| t.lines().count())
                .unwrap_or(0);
            if n >= kill_after || std::time::Instant::now() > deadline {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        child.kill().expect("SIGKILL");
        child.wait().expect("reaped");
        let status = b.run(&["status", "--json"]).ok().json();
        assert_eq!(
            status["finished"], false,
            "killed after {kill_after} events"
        );
        b.run(&["run", "--resume", "r1"]).ok();
        assert_eq!(
            b.env.git(&["rev-parse", "atelier/runs/r1:src"]),
            expected,
            "killed after {kill_after} events"
        );
        // No task integrated twice, and no worktree or claim leaked.
        let integrated: Vec<String> = b
            .events("r1")
            .into_iter()
            .filter_map(|e| match e {
                RunEvent::Integrated { task, .. } => Some(task),
                _ => None,
            })
            .collect();
        let unique: std::collections::BTreeSet<&String> = integrated.iter().collect();
        assert_eq!(unique.len(), integrated.len(), "{integrated:?}");
        assert_eq!(unique.len(), 6);
        let status = b.run(&["status", "--json"]).ok().json();
        assert_eq!(status["held"], serde_json::json!({}));
        assert_eq!(
            b.env.git(&["worktree", "list"]).lines().count(),
            1,
            "only the main checkout remains"
        );
    }
}

#[test]
fn sigterm_to_the_conductor_stops_its_workers() {
    let s = Swarm::new("");
    let p = one(&s, "sleep 31.4159; echo ok > src/t.rs");
    let child = s
        .command(&["run", &p])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let events = s.env.repo.join(".atelier/runs/r1/events.jsonl");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !std::fs::read_to_string(&events)
        .unwrap_or_default()
        .contains("attempt-started")
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    // SAFETY: sending a signal to a child we own.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let out = child.wait_with_output().expect("wait");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("interrupted"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::thread::sleep(std::time::Duration::from_millis(200));
    let ps = std::process::Command::new("ps")
        .args(["-eo", "args"])
        .output()
        .expect("ps");
    assert!(
        !String::from_utf8_lossy(&ps.stdout).contains("sleep 31.4159"),
        "the worker outlived the conductor"
    );
}

#[test]
fn a_torn_last_event_line_does_not_block_resume() {
    let s = Swarm::new("");
    let p = one(&s, "echo ok > src/t.rs");
    s.run(&["run", &p]).ok();
    let events = s.env.repo.join(".atelier/runs/r1/events.jsonl");
    let mut text = std::fs::read_to_string(&events).expect("events");
    text.push_str("{\"seq\":99,\"at\":\"2026-11-29T11:04:3");
    std::fs::write(&events, text).expect("write");
    s.run(&["run", "--resume", "r1"]).ok();
    s.run(&["status", "--json"]).ok();
}

#[test]
fn a_forged_passed_attempt_in_the_event_log_is_not_integrated_on_resume() {
    let s = Swarm::uncontained("failure_budget = 2");
    s.scenario(
        "p:T",
        "if [ \"$ATELIER_ATTEMPT\" = 1 ]; then echo EVIL > src/lib.rs; echo ok > src/t.rs; git -c user.name=w -c user.email=w@x commit -qam evil; \
         printf '{\"seq\":99,\"at\":\"2026-11-29T10:00:00Z\",\"kind\":\"attempt-passed\",\"task\":\"p:T\",\"attempt\":1,\"commit\":\"%s\"}\\n' $(git rev-parse HEAD) >> ../../events.jsonl; \
         kill -9 $PPID; sleep 5; else echo ok > src/t.rs; fi",
    );
    let p = s.plan(
        "p.toml",
        &plan("p", &[task("T", &["src/t.rs"], &[], "test -f src/t.rs")]),
    );
    let _ = s.run(&["run", &p]);
    s.run(&["run", "--resume", "r1"]).ok();
    assert!(
        !s.env
            .git(&["show", "atelier/runs/r1:src/lib.rs"])
            .contains("EVIL"),
        "the forged commit was integrated"
    );
    assert_eq!(s.env.git(&["show", "atelier/runs/r1:src/t.rs"]), "ok\n");
}

/// Two tasks, `p:A` then `p:B` (which depends on it), each writing its own file.
fn two_in_a_row(s: &Swarm) -> String {
    s.plan(
        "p.toml",
        &plan(
            "p",
            &[
                task("A", &["src/a.rs"], &[], "test -f src/a.rs"),
                task("B", &["src/b.rs"], &["A"], "test -f src/b.rs"),
            ],
        ),
    )
}

#[test]
fn a_run_branch_moved_to_a_forged_integration_is_refused_on_resume() {
    // B's worker moves the run branch to a merge of the run's tip and A's recorded passed commit
    // (what a crash between integrating and recording leaves) whose tree is its own.
    let s = Swarm::uncontained("failure_budget = 1");
    s.scenario("p:A", "echo a > src/a.rs");
    s.scenario(
        "p:B",
        "tip=$(git rev-parse refs/heads/atelier/runs/$ATELIER_RUN_ID); \
         export GIT_INDEX_FILE=\"$FAKE_AGENT_DIR/index\"; git read-tree $tip; \
         blob=$(echo EVIL | git hash-object -w --stdin); \
         git update-index --add --cacheinfo 100644,$blob,src/lib.rs; tree=$(git write-tree); \
         unset GIT_INDEX_FILE; \
         m=$(git -c user.name='atelier swarm' -c user.email=swarm@atelier.invalid commit-tree $tree -p $tip -p $tip^2 -m 'Integrate p:A'); \
         git update-ref refs/heads/atelier/runs/$ATELIER_RUN_ID $m; echo b > src/b.rs",
    );
    let p = two_in_a_row(&s);
    let run = s.run(&["run", &p]);
    assert!(run.stderr.contains("E_RUN_BRANCH_MOVED"), "{}", run.stderr);
    let resumed = s.run(&["run", "--resume", "r1"]);
    assert_ne!(resumed.code, 0, "{}", resumed.stdout);
    assert!(
        resumed.stderr.contains("E_RUN_BRANCH_MOVED"),
        "{}",
        resumed.stderr
    );
    assert!(
        !s.events("r1")
            .iter()
            .any(|e| matches!(e, RunEvent::Integrated { task, .. } if task == "p:B")),
        "work was integrated on top of the forged merge"
    );
}

#[test]
fn a_crash_between_integrating_and_recording_it_resumes_from_the_branch() {
    let s = Swarm::new("");
    s.scenario("p:A", "echo a > src/a.rs");
    s.scenario("p:B", "echo b > src/b.rs");
    let p = two_in_a_row(&s);
    let done = s.run(&["run", &p, "--json"]).ok().json();
    // Cut the log before B's `integrated`: the branch is one integration ahead of its events.
    let path = s.env.repo.join(".atelier/runs/r1/events.jsonl");
    let text = std::fs::read_to_string(&path).expect("events");
    let cut = text
        .find("\"kind\":\"integrated\",\"task\":\"p:B\"")
        .and_then(|i| text[..i].rfind('\n'))
        .expect("B was integrated");
    std::fs::write(&path, &text[..=cut]).expect("cut the log");
    let resumed = s.run(&["run", "--resume", "r1", "--json"]).ok().json();
    assert_eq!(resumed["tip"], done["tip"], "{resumed:#}");
    let integrated: Vec<String> = s
        .events("r1")
        .into_iter()
        .filter_map(|e| match e {
            RunEvent::Integrated { task, .. } => Some(task),
            _ => None,
        })
        .collect();
    assert_eq!(integrated, ["p:A", "p:B"]);
}

#[test]
fn the_fold_of_a_runs_log_is_the_state_its_conductor_ended_with() {
    let s = Swarm::uncontained("failure_budget = 2");
    s.scenario(
        "p:A",
        "if [ \"$ATELIER_ATTEMPT\" = 1 ]; then echo 'error: expected ok at src/a.rs:1'; exit 1; fi; echo ok > src/a.rs",
    );
    s.scenario("p:B", "echo 'error: no b at src/b.rs:2'; exit 1");
    s.scenario(
        "p:D",
        "if [ ! -f \"$FAKE_AGENT_DIR/killed\" ]; then touch \"$FAKE_AGENT_DIR/killed\"; kill -9 $PPID; sleep 5; fi; echo ok > src/d.rs",
    );
    let p = s.plan(
        "p.toml",
        &plan(
            "p",
            &[
                task("A", &["src/a.rs"], &[], "grep -q ok src/a.rs"),
                task("B", &["src/b.rs"], &[], "test -f src/b.rs"),
                task("C", &["src/c.rs"], &["B"], "test -f src/c.rs"),
                task("D", &["src/d.rs"], &["A"], "grep -q ok src/d.rs"),
            ],
        ),
    );
    let killed = s.run(&["run", &p, "--max-parallel", "1"]);
    assert_ne!(killed.code, 0, "D's worker kills the conductor");
    let end = s.run(&["run", "--resume", "r1", "--json"]).code(1).json();
    let fold = s.run(&["status", "--json"]).ok().json();
    assert_eq!(fold["tip"], end["tip"], "{fold:#}");
    assert_eq!(
        end["tip"].as_str().expect("tip"),
        s.env.git(&["rev-parse", "atelier/runs/r1"]).trim()
    );
    assert_eq!(fold["finished"], true);
    assert_eq!(fold["held"], serde_json::json!({}));
    for (k, v) in fold["tasks"].as_object().expect("tasks") {
        let why = v["last_failure"].clone();
        match v["state"].as_str().expect("state") {
            "succeeded" => assert!(
                end["succeeded"]
                    .as_array()
                    .expect("list")
                    .contains(&serde_json::json!(k)),
                "{k}: {end:#}"
            ),
            "failed" => assert_eq!(end["failed"][k], why, "{k}"),
            "blocked" => assert_eq!(end["blocked"][k], why, "{k}"),
            other => panic!("{k} ended {other}"),
        }
    }
    assert_eq!(end["succeeded"], serde_json::json!(["p:A", "p:D"]));
    // What the fold carries between attempts is what the next attempt was shown.
    let memory = fold["tasks"]["p:A"]["do_not_retry"][0]
        .as_str()
        .expect("a digest");
    assert!(memory.contains("src/a.rs:1"), "{memory}");
    assert!(
        s.prompt("p:A", 2).contains(memory),
        "{}",
        s.prompt("p:A", 2)
    );
    assert_eq!(
        fold["tasks"]["p:D"]["attempt"], 2,
        "the attempt in flight at the crash was abandoned and restarted"
    );
}
