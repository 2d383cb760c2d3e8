//! What a run commits is what the worker wrote inside its claims: no forge tokens, no redirected
//! git dir, no moved run branch, no leftover process or linked directory.

use crate::support::swarm::{one, plan, task, Swarm};

#[test]
fn workers_never_see_forge_tokens_or_keys() {
    let s = Swarm::new("");
    s.scenario("p:A", "echo ok > src/a.rs");
    let p = s.plan(
        "p.toml",
        &plan("p", &[task("A", &["src/a.rs"], &[], "grep -q ok src/a.rs")]),
    );
    s.run(&["run", &p]).ok();
    let env = std::fs::read_to_string(s.fake.join("env-p-A-1.txt")).expect("env dump");
    assert!(!env.contains("ghp_secret"), "{env}");
    assert!(
        env.contains("ATELIER_TASK_ID=p:A")
            && env.contains("ATELIER_ATTEMPT=1")
            && env.contains("ATELIER_RUN_ID=r1"),
        "{env}"
    );
    let names: Vec<&str> = env.lines().filter_map(|l| l.split('=').next()).collect();
    for n in &names {
        assert!(
            [
                "PATH",
                "HOME",
                "LANG",
                "PWD",
                "SHLVL",
                "_",
                "OLDPWD",
                "TMPDIR",
                "TMP",
                "TEMP",
                "GIT_CONFIG_GLOBAL",
                "FAKE_AGENT_DIR",
                "PYTHONDONTWRITEBYTECODE"
            ]
            .contains(n)
                || n.starts_with("ATELIER_"),
            "unexpected variable {n}"
        );
    }
}

#[test]
fn a_worker_redirecting_its_git_dir_cannot_commit_onto_main() {
    let s = Swarm::new("failure_budget = 1");
    let main_before = s.env.git(&["rev-parse", "main"]);
    let common = s.env.repo.join(".git");
    let p = one(
        &s,
        &format!(
            "echo ok > src/t.rs; echo 'gitdir: {}' > .git",
            common.display()
        ),
    );
    let v = s.run(&["run", &p, "--json"]).json();
    assert_eq!(
        s.env.git(&["rev-parse", "main"]),
        main_before,
        "main never moves in a run: {v:#}"
    );
    assert_eq!(
        s.env.git(&["status", "--porcelain"]),
        "",
        "the main checkout is untouched"
    );
    if v["succeeded"] == serde_json::json!(["p:T"]) {
        assert_eq!(s.env.git(&["show", "atelier/runs/r1:src/t.rs"]), "ok\n");
    }
}

#[test]
fn a_workers_own_commit_does_not_hide_writes_outside_its_claims() {
    let s = Swarm::new("failure_budget = 1");
    let p = one(&s, "echo sneaky > src/lib.rs; git -c user.name=w -c user.email=w@x commit -qam sneaky; echo ok > src/t.rs");
    let v = s.run(&["run", &p, "--json"]).code(1).json();
    assert!(
        v["failed"]["p:T"]
            .as_str()
            .expect("reason")
            .contains("outside its claims: src/lib.rs"),
        "{v:#}"
    );
}

#[test]
fn a_worker_moving_the_run_branch_stops_the_run() {
    let s = Swarm::uncontained("failure_budget = 1");
    let p = one(&s, "echo ok > src/t.rs; git update-ref refs/heads/atelier/runs/$ATELIER_RUN_ID $(git rev-parse HEAD~1)");
    let run = s.run(&["run", &p]);
    assert_ne!(run.code, 0);
    assert!(run.stderr.contains("E_RUN_BRANCH_MOVED"), "{}", run.stderr);
}

/// `E_RUN_BRANCH_MOVED` used to be a plain error, exit 2, though every `E_` code is a refusal.
#[test]
fn a_moved_run_branch_is_a_refusal_exit_1() {
    // Moved by a worker while the run goes on.
    let s = Swarm::uncontained("failure_budget = 1");
    let p = one(&s, "echo ok > src/t.rs; git update-ref refs/heads/atelier/runs/$ATELIER_RUN_ID $(git rev-parse HEAD~1)");
    let run = s.run(&["run", &p]).code(1);
    assert!(
        run.stderr
            .contains("refused: E_RUN_BRANCH_MOVED: atelier/runs/r1 is at "),
        "{}",
        run.stderr
    );
    // Moved by someone else after the run finished: resuming it refuses, and so does proposing.
    let s = Swarm::new("");
    let p = one(&s, "echo ok > src/t.rs");
    s.run(&["run", &p]).ok();
    let main = s.env.git(&["rev-parse", "HEAD"]);
    s.env
        .git(&["update-ref", "refs/heads/atelier/runs/r1", main.trim()]);
    for args in [
        &["run", "--resume", "r1"][..],
        &["run", "--resume", "r1", "--propose"],
    ] {
        let run = s.run(args).code(1);
        assert!(
            run.stderr
                .contains("refused: E_RUN_BRANCH_MOVED: atelier/runs/r1 is at "),
            "{args:?}: {}",
            run.stderr
        );
        assert!(!run.stderr.contains("error:"), "{}", run.stderr);
    }
    assert_eq!(
        s.env.atelier(&["proposals", "--json"]).ok().json(),
        serde_json::json!([]),
        "nothing was proposed"
    );
}

#[test]
fn a_process_left_behind_that_writes_later_fails_the_attempt() {
    let s = Swarm::new("failure_budget = 1");
    s.scenario(
        "p:T",
        "echo ok > src/t.rs; (sleep 0.3; echo late > src/t.rs) > /dev/null 2>&1 &",
    );
    let p = s.plan(
        "p.toml",
        &plan(
            "p",
            &[task(
                "T",
                &["src/t.rs"],
                &[],
                "sleep 0.6 && test -f src/t.rs",
            )],
        ),
    );
    let v = s.run(&["run", &p, "--json"]).json();
    // Either the group kill stopped the writer (the commit is "ok"), or the change was caught.
    if v["succeeded"] == serde_json::json!(["p:T"]) {
        assert_eq!(s.env.git(&["show", "atelier/runs/r1:src/t.rs"]), "ok\n");
    } else {
        assert!(
            v["failed"]["p:T"]
                .as_str()
                .expect("reason")
                .contains("wrote src/t.rs in the checkout of the worker's tree they ran in"),
            "{v:#}"
        );
    }
}

/// The pids and command lines of processes whose command line contains `marker`.
fn carrying(marker: &str) -> Vec<(i32, String)> {
    let me = std::process::id().to_string();
    std::fs::read_dir("/proc")
        .expect("read /proc")
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            let pid: i32 = name.parse().ok()?;
            let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let line = String::from_utf8_lossy(&raw).replace('\0', " ");
            (name != me && line.contains(marker)).then_some((pid, line))
        })
        .collect()
}

/// Kills whatever still carries its marker when the test ends, whether it passed or not.
struct KillCarrying(&'static str);

impl Drop for KillCarrying {
    fn drop(&mut self) {
        for (pid, _) in carrying(self.0) {
            // SAFETY: kill(2) has no memory-safety preconditions.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
    }
}

#[test]
fn nothing_a_worker_or_a_check_leaves_running_outlives_the_attempt() {
    let _k = KillCarrying("sleep 314.");
    let s = Swarm::new("failure_budget = 1");
    s.scenario(
        "p:T",
        "echo ok > src/t.rs\n\
         setsid sleep 314.1 &\n\
         (setsid sh -c 'sleep 314.2 &' &)\n\
         (sh -c 'sleep 314.3 &' &)\n\
         nohup sleep 314.4 > /dev/null 2>&1 &\n\
         sleep 0.3\n",
    );
    let p = s.plan(
        "p.toml",
        &plan(
            "p",
            &[task(
                "T",
                &["src/t.rs"],
                &[],
                "setsid sleep 314.5 > /dev/null 2>&1 & sleep 0.2; test -f src/t.rs",
            )],
        ),
    );
    let v = s.run(&["run", &p, "--json"]).ok().json();
    assert_eq!(v["succeeded"], serde_json::json!(["p:T"]), "{v:#}");
    // The kill is immediate, but give the kernel a moment before looking.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    let mut left = carrying("sleep 314.");
    while !left.is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
        left = carrying("sleep 314.");
    }
    assert_eq!(left, Vec::new(), "escaped the attempt");
}

#[test]
fn symlinks_and_nested_repositories_are_contained() {
    let s = Swarm::new("failure_budget = 1");
    let key = s.env.repo.join(".atelier/gate_key");
    s.scenario(
        "p:A",
        &format!(
            "mkdir -p src/d && ln -s {} src/d/key && echo ok > src/d/a.rs",
            key.display()
        ),
    );
    s.scenario("p:C", "mkdir -p src/n/sub && cd src/n/sub && git init -q && echo x > f && git add f && git -c user.name=w -c user.email=w@x commit -qm x");
    let a = task("A", &["src/d/**"], &[], "test -f src/d/a.rs");
    let c = task("C", &["src/n/**"], &[], "test -d src/n");
    let p = s.plan("p.toml", &plan("p", &[a, c]));
    let v = s.run(&["run", &p, "--json"]).code(1).json();
    // A link to the gate key is refused with the attempt (no link ever reaches the run's branch,
    // so none can bring a file into a later prompt), and a nested repository too.
    assert!(
        v["failed"]["p:A"]
            .as_str()
            .expect("reason")
            .contains("src/d/key (is a symbolic link"),
        "{v:#}"
    );
    assert!(
        v["failed"]["p:C"]
            .as_str()
            .expect("reason")
            .contains("nested git repository"),
        "{v:#}"
    );
    assert_eq!(v["succeeded"], serde_json::json!([]));
}

#[test]
fn a_rewritten_worktree_entry_cannot_redirect_what_is_committed_or_removed() {
    let s = Swarm::uncontained("failure_budget = 1");
    let decoy = s.env.tmp.path().join("decoy");
    let victim = s.env.tmp.path().join("victim");
    std::fs::create_dir_all(victim.join("x")).expect("mkdir");
    std::fs::write(victim.join("keep.txt"), "precious\n").expect("write");
    let p = one(
        &s,
        &format!(
            "echo ok > src/t.rs; mkdir -p {d}/src && echo 'UNTESTED' > {d}/src/t.rs && cp .git {d}/.git; echo {d}/.git > \"$(git rev-parse --git-dir)/gitdir\"",
            d = decoy.display()
        ),
    );
    s.run(&["run", &p]).ok();
    assert_eq!(
        s.env.git(&["show", "atelier/runs/r1:src/t.rs"]),
        "ok\n",
        "what the gauntlet checked is what is committed"
    );
    // A failed attempt whose entry points at someone else's directory: clean removes only ours.
    s.scenario(
        "q:T",
        &format!(
            "echo {}/x/.git > \"$(git rev-parse --git-dir)/gitdir\"; exit 1",
            victim.display()
        ),
    );
    let q = s.plan(
        "q.toml",
        &plan("q", &[task("T", &["src/t.rs"], &[], "test -f src/t.rs")]),
    );
    s.run(&["run", &q]).code(1);
    s.run(&["clean"]).ok();
    assert_eq!(
        std::fs::read_to_string(victim.join("keep.txt")).expect("still there"),
        "precious\n"
    );
}

#[test]
fn files_behind_a_linked_directory_are_not_committed() {
    let s = Swarm::new("failure_budget = 1");
    let outside = s.env.tmp.path().join("outside");
    std::fs::create_dir_all(&outside).expect("mkdir");
    std::fs::write(outside.join("lib.rs"), "OUTSIDE CONTENT\n").expect("write");
    s.scenario(
        "p:T",
        &format!("rm -rf src && ln -s {} src", outside.display()),
    );
    let p = s.plan(
        "p.toml",
        // The checks judge the tree that is committed: the content behind the link is in
        // neither.
        &plan(
            "p",
            &[task(
                "T",
                &["src/**", "src"],
                &[],
                "! grep -rq 'OUTSIDE CONTENT' .",
            )],
        ),
    );
    s.run(&["run", &p]).ok();
    let files = s.env.git(&["ls-tree", "-r", "atelier/runs/r1"]);
    assert!(!files.contains("src/lib.rs"), "{files}");
    let grep = s
        .env
        .command("git")
        .args(["grep", "-q", "OUTSIDE CONTENT", "atelier/runs/r1"])
        .status()
        .expect("git grep");
    assert!(
        !grep.success(),
        "content from outside the worktree was committed"
    );
}
