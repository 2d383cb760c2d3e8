//! `bench replay`: missions replayed from the protected branch, against another build, with
//! paired intervals.

use atelier::improve::metrics;

use crate::support::swarm::Swarm;

#[test]
fn bench_replay_against_another_build_of_atelier() {
    let s = Swarm::configured("failure_budget = 3", "");
    let bin = crate::support::bin();
    // Another build given as a binary: the same code on both sides, so every count is equal.
    let r = s
        .run(&[
            "bench",
            "replay",
            "--baseline-bin",
            bin,
            "--seeds",
            "2",
            "--mission",
            "flaky",
            "--json",
        ])
        .ok()
        .json();
    assert_eq!(r["baseline_build"], bin, "{r}");
    for d in r["deltas"].as_array().expect("deltas") {
        if d["metric"] != "wall_ms" {
            assert_eq!(d["delta"], 0.0, "{d}");
            assert_eq!(d["verdict"], "no significant change", "{d}");
        }
    }
    // A build that predates `bench sample` says so.
    let old = s.run(&[
        "bench",
        "replay",
        "--baseline-bin",
        "/bin/true",
        "--seeds",
        "2",
        "--mission",
        "flaky",
    ]);
    assert_eq!(old.code, 2, "{}", old.stderr);
    assert!(
        old.stderr.contains("predates `bench sample`"),
        "{}",
        old.stderr
    );

    // A build that leaves a metric out (it would count as 0) is refused, naming what it gave.
    let partial = s
        .env
        .file("partial.sh", "#!/bin/sh\necho '{\"failed_tasks\": 0}'\n");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&partial, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let r = s.run(&[
        "bench",
        "replay",
        "--baseline-bin",
        &partial.display().to_string(),
        "--seeds",
        "2",
        "--mission",
        "flaky",
    ]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("with the metrics failed_tasks instead of attempts, failed_tasks"),
        "{}",
        r.stderr
    );

    // --baseline REV builds the revision (here a stand-in cargo that "builds" by copying this
    // atelier), once, in a worktree it removes afterwards.
    let not_atelier = s.run(&["bench", "replay", "--baseline", "HEAD", "--seeds", "2"]);
    assert_eq!(not_atelier.code, 2);
    assert!(
        not_atelier.stderr.contains("not atelier's package"),
        "{}",
        not_atelier.stderr
    );
    s.env.write(
        "Cargo.toml",
        "[package]\nname = \"atelier\"\nversion = \"0.1.0\"\n",
    );
    s.env.git(&["add", "Cargo.toml"]);
    s.env.git(&["commit", "-qm", "Atelier's manifest"]);
    let cargo = s.env.file(
        "fake-cargo.sh",
        &format!(
            "#!/bin/sh\necho \"built in $(pwd)\" >> \"{}/cargo.log\"\nmkdir -p \"$CARGO_TARGET_DIR/release\"\ncp '{bin}' \"$CARGO_TARGET_DIR/release/atelier\"\n",
            s.env.tmp.path().display()
        ),
    );
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&cargo, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    // Whoever can write the clone's files plants the binary an older version reused from
    // `.atelier/bench/trusted/<commit>/`, to be run uncontained as the operator: it never runs.
    let head = s.env.git(&["rev-parse", "HEAD"]).trim().to_string();
    let planted = s.env.tmp.path().join("planted-ran");
    let trap = format!(
        "#!/bin/sh
touch '{}'
exit 1
",
        planted.display()
    );
    for dir in [
        format!(".atelier/bench/trusted/{head}"),
        ".atelier/bench/target/release".to_string(),
    ] {
        s.env.write(&format!("{dir}/atelier"), &trap);
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            s.env.repo.join(&dir).join("atelier"),
            std::fs::Permissions::from_mode(0o755),
        )
        .expect("chmod");
    }
    for _ in 0..2 {
        let out = s
            .command(&[
                "bench",
                "replay",
                "--baseline",
                "HEAD",
                "--seeds",
                "2",
                "--mission",
                "flaky",
                "--json",
            ])
            .env("CARGO", &cargo)
            .output()
            .expect("run");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        assert!(
            v["baseline_build"]
                .as_str()
                .is_some_and(|b| b.starts_with("HEAD (")),
            "{v}"
        );
    }
    let log = std::fs::read_to_string(s.env.tmp.path().join("cargo.log")).expect("built");
    assert_eq!(log.lines().count(), 1, "built once, then reused: {log}");
    assert!(
        !planted.exists(),
        "a binary planted under .atelier/bench ran"
    );
    // Built and kept in the operator's cache directory, outside the clone, 0700.
    let cache = s.env.home.join(".cache/atelier/bench");
    assert!(
        log.contains(&format!("built in {}/", cache.display())) && log.contains("/bench-"),
        "{log}"
    );
    let kept: Vec<_> = std::fs::read_dir(&cache).expect("the cache").collect();
    assert_eq!(kept.len(), 1, "one clone's directory");
    {
        use std::os::unix::fs::PermissionsExt;
        let dir = kept[0].as_ref().expect("entry").path();
        let mode = std::fs::metadata(&dir).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "{}", dir.display());
        assert!(dir.join(format!("trusted/{head}/atelier")).is_file());
    }
    let worktrees = s.env.git(&["worktree", "list"]);
    assert_eq!(worktrees.lines().count(), 1, "{worktrees}");
    assert!(!s
        .env
        .git(&["branch", "--list", "atelier/bench/*"])
        .contains("bench"));
}

#[test]
fn a_run_recorded_as_a_mission_replays_from_the_protected_branch_only() {
    let s = Swarm::new("failure_budget = 3");
    s.scenario("p:A", "echo ok > src/a.rs");
    s.scenario(
        "p:B",
        "if [ \"$ATELIER_ATTEMPT\" = 1 ]; then echo 'error: first try'; exit 3; fi; echo ok > src/b.rs",
    );
    let p = s.plan(
        "p.toml",
        &crate::support::swarm::plan(
            "p",
            &[
                crate::support::swarm::task("A", &["src/a.rs"], &[], "grep -q ok src/a.rs"),
                crate::support::swarm::task("B", &["src/b.rs"], &[], "grep -q ok src/b.rs"),
            ],
        ),
    );
    let run = s.run(&["run", &p, "--json"]).ok().json();
    let id = run["run"].as_str().expect("a run id").to_string();
    let rec = s.run(&["bench", "record", &id, "--id", "late-b"]).ok();
    assert!(
        rec.stdout.contains("missions/late-b.toml"),
        "{}",
        rec.stdout
    );
    let text = s.env.read("missions/late-b.toml");
    assert!(
        text.contains("id = \"p-B\"")
            && text.contains("then = \"fail\"")
            && text.contains("then = \"pass\""),
        "{text}"
    );
    // Recording again under the same id overwrites nothing.
    let again = s.run(&["bench", "record", &id, "--id", "late-b"]).code(2);
    assert!(
        again.stderr.contains("exists in the working tree"),
        "{}",
        again.stderr
    );

    let configs = |budget_a: u32, budget_b: u32| {
        for (f, b) in [("base.toml", budget_a), ("cand.toml", budget_b)] {
            s.env.file(
                f,
                &format!("[conductor]\nnudge_after = \"5s\"\nrestart_after = \"10s\"\nattempt_timeout = \"60s\"\nfailure_budget = {b}\n"),
            );
        }
    };
    configs(3, 1);
    let base = s.env.tmp.path().join("base.toml").display().to_string();
    let cand = s.env.tmp.path().join("cand.toml").display().to_string();
    let replay = |extra: &[&str]| {
        let mut a = vec![
            "bench",
            "replay",
            "--baseline-config",
            &base,
            "--candidate-config",
            &cand,
            "--seeds",
            "2",
            "--json",
        ];
        a.extend_from_slice(extra);
        s.run(&a)
    };
    // Only the protected branch's missions run: the working tree's file is not one yet.
    let unmerged = replay(&["--mission", "late-b"]).code(2);
    assert!(
        unmerged
            .stderr
            .contains("--mission late-b: no such mission (built in or on the protected branch: silent, flaky)"),
        "{}",
        unmerged.stderr
    );
    // A title is text, never plan syntax, whatever it holds.
    let titled: String = text
        .lines()
        .map(|l| {
            if l.starts_with("title = ") {
                r#"title = "Late \"B\"\n[[task]]\nid = \"Z\"""#.to_string() + "\n"
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    s.env.write("missions/late-b.toml", &titled);
    s.env.git(&["add", "missions/late-b.toml"]);
    s.env
        .git(&["commit", "-qm", "A mission recorded from our own run"]);
    let v = replay(&["--mission", "late-b"]).ok().json();
    assert_eq!(v["missions"], serde_json::json!(["late-b"]), "{v}");
    let failed = v["deltas"]
        .as_array()
        .expect("deltas")
        .iter()
        .find(|d| d["metric"] == "failed_tasks")
        .expect("failed_tasks")
        .clone();
    // B failed its first attempt in the run: with one attempt allowed it fails every time.
    assert_eq!(failed["baseline_mean"], 0.0, "{failed}");
    assert_eq!(failed["candidate_mean"], 1.0, "{failed}");
    assert_eq!(failed["verdict"], "regressed", "{failed}");

    // A broken mission on the branch is refused with its file and field.
    s.env.write(
        "missions/broken.toml",
        "[mission]\nid = \"broken\"\ntitle = \"t\"\n[[task]]\nid = \"A\"\nbehaviour = \"recorded\"\n",
    );
    s.env.git(&["add", "missions/broken.toml"]);
    s.env.git(&["commit", "-qm", "A broken mission"]);
    let broken = replay(&["--mission", "late-b"]).code(2);
    assert!(
        broken.stderr.contains(
            "missions/broken.toml on main: task A: behaviour \"recorded\" needs attempts"
        ),
        "{}",
        broken.stderr
    );
}

/// For 31..120 degrees of freedom the two-sided 95 % t value is 2.04..1.98, not 1.96: the
/// bench's intervals are too narrow (and verdicts too eager) for 32..121 seeds.
#[test]
fn bench_t_values_above_30_degrees_of_freedom_are_the_normal_approximation() {
    for (df, t) in [(31usize, 2.0395), (40, 2.0211), (60, 2.0003), (100, 1.9840)] {
        assert!(
            (metrics::t95(df) - t).abs() < 0.005,
            "t95({df}) = {}, expected about {t}",
            metrics::t95(df)
        );
    }
}

#[test]
fn bench_replay_measures_false_kills_with_a_paired_interval() {
    let s = Swarm::new("");
    s.env.write(
        "base.toml",
        "[conductor]\nnudge_after = \"1s\"\nrestart_after = \"1s\"\nfailure_budget = 2\n",
    );
    s.env.write(
        "cand.toml",
        "[conductor]\nnudge_after = \"1s\"\nrestart_after = \"4s\"\nfailure_budget = 2\n",
    );
    let base = s.env.repo.join("base.toml").display().to_string();
    let cand = s.env.repo.join("cand.toml").display().to_string();
    let v = s
        .run(&[
            "bench",
            "replay",
            "--baseline-config",
            &base,
            "--candidate-config",
            &cand,
            "--seeds",
            "2",
            "--mission",
            "silent",
            "--json",
        ])
        .ok()
        .json();
    assert_eq!(v["samples"].as_array().map(Vec::len), Some(4));
    // Interleaved: seed 0 runs the baseline first, seed 1 the candidate.
    assert_eq!(v["samples"][0]["side"], "baseline");
    assert_eq!(v["samples"][2]["side"], "candidate");
    let kills = v["deltas"]
        .as_array()
        .expect("deltas")
        .iter()
        .find(|d| d["metric"] == "false_kills")
        .expect("false_kills")
        .clone();
    // Both silent tasks are quiet for 1.5 s (seed 0) or 2.5 s (seed 1) before they deliver:
    // a 1 s restart kills both, every seed; a 4 s one never does.
    assert_eq!(kills["baseline_mean"], 2.0, "{kills:#}");
    assert_eq!(kills["candidate_mean"], 0.0, "{kills:#}");
    assert_eq!(kills["verdict"], "improved", "{kills:#}");
    let bad = s.run(&["bench", "replay", "--baseline", "HEAD~1"]).code(2);
    assert!(
        bad.stderr.contains("not atelier's package"),
        "{}",
        bad.stderr
    );
    let unknown = s
        .run(&[
            "bench",
            "replay",
            "--baseline-config",
            &base,
            "--mission",
            "nope",
        ])
        .code(2);
    assert!(
        unknown
            .stderr
            .contains("no such mission (built in or on the protected branch: silent, flaky)"),
        "{}",
        unknown.stderr
    );
}
