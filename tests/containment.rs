//! Containment, attacked: hostile scripted agents, each attempting one escape from a contained
//! worker, check or agent reviewer, each asserting the operation was denied and nothing outside
//! changed; and the configuration around it (the opt-out, bad paths) through the CLI.
//!
//! Every attack records what it saw in `$FAKE_AGENT_DIR/verdict` (the one place outside its
//! worktree the test role may write), then does its task, so a denied attack still ends in a
//! passing run: the attack failing is the point, not the run.

use std::path::Path;

use crate::support::Env;
use crate::swarm::{one, plan, task, Swarm};

/// Whether this kernel enforces what these tests attack (Landlock ABI 4: files and TCP).
pub(crate) fn landlock() -> bool {
    atelier::agent::contain::abi() >= atelier::agent::contain::NET_ABI
}

/// Ends a test early, saying so, on a kernel without Landlock ABI 4.
macro_rules! require_landlock {
    () => {
        if !crate::containment::landlock() {
            eprintln!("skipped: this kernel has no Landlock ABI 4");
            return;
        }
    };
}
pub(crate) use require_landlock;

/// The worker's script for an attack: `attempt` in a subshell, `ESCAPED` or `denied` written
/// to the verdict file, then the task's own file.
pub(crate) fn attack(attempt: &str) -> String {
    format!(
        "if ( {attempt} ) >/dev/null 2>&1; then echo ESCAPED; else echo denied; fi > \"$FAKE_AGENT_DIR/verdict\"; echo ok > src/t.rs"
    )
}

/// Runs one hostile worker; the run and the verdict it wrote (empty if it never ran).
pub(crate) fn verdict_of(s: &Swarm, attempt: &str) -> (crate::support::Run, String) {
    let p = one(s, &attack(attempt));
    let run = s.run(&["run", &p]);
    let v = std::fs::read_to_string(s.fake.join("verdict")).unwrap_or_default();
    (run, v)
}

/// Runs one hostile worker to the end and returns what it saw; the run itself succeeds.
fn run_attack(s: &Swarm, attempt: &str) -> String {
    let (run, v) = verdict_of(s, attempt);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("contained: landlock"), "{}", run.stdout);
    assert!(!v.is_empty(), "the worker ran");
    v
}

/// Asserts that `attempt` was denied, in a run that went on contained.
pub(crate) fn denied(s: &Swarm, attempt: &str) {
    assert_eq!(run_attack(s, attempt), "denied\n", "{attempt}");
}

/// A command a worker could plant for someone else to run (a git hook, an fsmonitor command):
/// it copies the gate key to the returned path. The path must stay absent.
pub(crate) fn stealing_hook(s: &Swarm) -> (std::path::PathBuf, String) {
    let stolen = s.env.tmp.path().join("stolen");
    let hook = format!(
        "cp {} {}; false",
        s.env.gate_key().display(),
        stolen.display()
    );
    (stolen, hook)
}

pub(crate) fn repo(s: &Swarm) -> &Path {
    &s.env.repo
}

#[test]
fn a_worker_cannot_read_the_gate_key() {
    require_landlock!();
    let s = Swarm::new("");
    let key = s.env.gate_key();
    assert!(key.exists());
    denied(&s, &format!("cat {}", key.display()));
    // Nor find it, nor reach it through the conductor's view of the filesystem.
    denied(&s, "ls \"$HOME/.local/share/atelier/gate\"");
    denied(&s, &format!("cat /proc/$PPID/root{}", key.display()));
    // Nor anything under the repository's .atelier/, by any path.
    denied(&s, "ls \"$(git rev-parse --git-common-dir)/../.atelier\"");
    denied(&s, "cat /proc/$PPID/cwd/atelier.toml");
}

#[test]
fn a_worker_cannot_read_the_conductors_environment_or_memory() {
    require_landlock!();
    // The conductor holds GITHUB_TOKEN (the test sets it); its worker must not reach it.
    let s = Swarm::new("");
    denied(&s, "grep -q ghp_secret /proc/$PPID/environ");
    denied(&s, "head -c 1 /proc/$PPID/mem");
}

#[test]
fn a_worker_cannot_move_a_branch_or_write_git() {
    require_landlock!();
    let s = Swarm::new("");
    let main = s.env.git(&["rev-parse", "main"]);
    denied(
        &s,
        &format!(
            "echo 0000000000000000000000000000000000000000 > {}/.git/refs/heads/main",
            repo(&s).display()
        ),
    );
    denied(&s, "git update-ref refs/heads/main HEAD~1");
    denied(
        &s,
        "git -c user.name=w -c user.email=w@x commit -qam evil --allow-empty",
    );
    denied(
        &s,
        "echo junk > \"$(git rev-parse --git-common-dir)/objects/evil\"",
    );
    assert_eq!(s.env.git(&["rev-parse", "main"]), main);
    assert!(!repo(&s).join(".git/objects/evil").exists());
}

#[test]
fn a_worker_cannot_write_the_events_file_or_the_forge() {
    require_landlock!();
    let s = Swarm::new("");
    let events = repo(&s).join(".atelier/runs/r1/events.jsonl");
    denied(
        &s,
        &format!(
            "echo '{{\"kind\":\"task-failed\"}}' >> {}",
            events.display()
        ),
    );
    let text = std::fs::read_to_string(&events).expect("events");
    assert!(!text.contains("{\"kind\":\"task-failed\"}"), "{text}");
    assert!(atelier::swarm::events::read(&events).is_ok());
    let s = Swarm::new("");
    denied(
        &s,
        &format!("mkdir -p {}/.atelier/forge/evil", repo(&s).display()),
    );
    assert!(!repo(&s).join(".atelier/forge/evil").exists());
}

#[test]
fn a_worker_cannot_write_the_main_working_tree_or_home() {
    require_landlock!();
    let s = Swarm::new("");
    denied(&s, &format!("echo evil > {}/README.md", repo(&s).display()));
    assert_eq!(s.env.read("README.md"), "# demo\n");
    let s = Swarm::new("");
    denied(&s, &format!("touch {}/EVIL", repo(&s).display()));
    assert!(!repo(&s).join("EVIL").exists());
    let s = Swarm::new("");
    denied(&s, "echo evil > \"$HOME/.bashrc\"");
    assert!(!s.env.home.join(".bashrc").exists());
}

#[test]
fn a_worker_cannot_read_ssh_keys() {
    require_landlock!();
    let s = Swarm::new("");
    let ssh = s.env.home.join(".ssh");
    std::fs::create_dir_all(&ssh).expect("mkdir");
    std::fs::write(ssh.join("id_ed25519"), "PRIVATE\n").expect("write");
    denied(&s, "cat \"$HOME/.ssh/id_ed25519\"");
    denied(&s, "ls \"$HOME\"");
}

#[test]
fn a_worker_cannot_follow_a_symlink_out_of_its_worktree() {
    require_landlock!();
    let s = Swarm::new("");
    denied(
        &s,
        &format!(
            "ln -s {} k; cat k; r=$?; rm -f k; exit $r",
            s.env.gate_key().display()
        ),
    );
    let s = Swarm::new("");
    denied(
        &s,
        &format!(
            "ln -s {}/README.md r; echo evil > r; r=$?; rm -f r; exit $r",
            repo(&s).display()
        ),
    );
    assert_eq!(s.env.read("README.md"), "# demo\n");
}

#[test]
fn a_worker_with_network_none_cannot_connect_to_a_loopback_listener() {
    require_landlock!();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let s = Swarm::new("");
    denied(&s, &format!("bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port}'"));
    listener.set_nonblocking(true).expect("nonblocking");
    assert!(
        listener.accept().is_err(),
        "nothing connected to the listener"
    );
    // Nor listen itself (bind is denied too).
    let s = Swarm::new("");
    denied(
        &s,
        "python3 -c 'import socket; socket.socket().bind((\"127.0.0.1\", 0))'",
    );
}

#[test]
fn a_role_given_a_port_reaches_it_and_nothing_else() {
    require_landlock!();
    let open = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let (po, pc) = (
        open.local_addr().expect("addr").port(),
        closed.local_addr().expect("addr").port(),
    );
    let s = Swarm::configured("", "");
    let config = s
        .env
        .read("atelier.toml")
        .replace("writable = [", &format!("network = [{po}]\nwritable = ["));
    s.env.write("atelier.toml", &config);
    s.env
        .git(&["commit", "-q", "-am", "The implementer may reach one port"]);
    assert_eq!(
        run_attack(&s, &format!("bash -c 'exec 3<>/dev/tcp/127.0.0.1/{po}'")),
        "ESCAPED\n",
        "the allowed port is reachable"
    );
    denied(&s, &format!("bash -c 'exec 3<>/dev/tcp/127.0.0.1/{pc}'"));
}

#[test]
fn a_worker_cannot_kill_the_conductor() {
    require_landlock!();
    let s = Swarm::new("");
    denied(&s, "kill -9 $PPID");
}

#[test]
fn nothing_a_contained_worker_leaves_running_outlives_the_attempt() {
    require_landlock!();
    let s = Swarm::new("");
    let marker = format!("300.{}", std::process::id());
    let p = one(
        &s,
        &format!("setsid sleep {marker} & (nohup sleep {marker} &) ; echo ok > src/t.rs"),
    );
    s.run(&["run", &p]).ok();
    std::thread::sleep(std::time::Duration::from_millis(200));
    let left: Vec<String> = std::fs::read_dir("/proc")
        .expect("proc")
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(&marker))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_contract_check_is_contained_too() {
    require_landlock!();
    let s = Swarm::new("");
    s.scenario("p:T", "echo ok > src/t.rs");
    let check = format!(
        "cat {k} > {f}/stolen; echo evil > {r}/EVIL; test -f src/t.rs",
        k = s.env.gate_key().display(),
        r = repo(&s).display(),
        f = s.fake.display()
    );
    let p = s.plan(
        "p.toml",
        &plan("p", &[task("T", &["src/t.rs"], &[], &check)]),
    );
    s.run(&["run", &p]).ok();
    assert!(!repo(&s).join("EVIL").exists());
    // The gauntlet's grants are not the role's: the fake directory is not writable to checks.
    assert!(!s.fake.join("stolen").exists());
}

#[test]
fn an_agent_reviewer_is_contained() {
    require_landlock!();
    let env_dir = tempfile::tempdir().expect("temp");
    let out = env_dir.path().join("out");
    std::fs::create_dir(&out).expect("mkdir");
    let (_dir, role) = crate::review_gate::script_role(
        "hostile.sh",
        &format!(
            "cat >/dev/null\nREPO=$(cat {o}/repo)\nif cat \"$(cat {o}/key)\" >/dev/null 2>&1; then echo ESCAPED; else echo denied; fi > {o}/read\nif echo evil > \"$REPO/README.md\" 2>/dev/null; then echo ESCAPED; else echo denied; fi > {o}/write\necho '{{\"verdict\": \"approve\", \"findings\": []}}'\n",
            o = out.display()
        ),
    );
    let role = format!("{role}\nwritable = [\"{}\"]", out.display());
    let env = crate::review_gate::with_agent_reviewer(&role, "");
    std::fs::write(out.join("repo"), env.repo.display().to_string()).expect("write");
    std::fs::write(out.join("key"), env.gate_key().display().to_string()).expect("write");
    let id = env.propose_code();
    let review = env.atelier(&["review", &id, "--json"]).ok().json();
    assert_eq!(review["verdict"], "approve", "{review:#}");
    assert_eq!(
        std::fs::read_to_string(out.join("read")).expect("ran"),
        "denied\n"
    );
    assert_eq!(
        std::fs::read_to_string(out.join("write")).expect("ran"),
        "denied\n"
    );
    assert_eq!(env.read("README.md"), "# demo\n");
}

#[test]
fn an_uncommitted_containment_none_is_refused_before_a_run_exists() {
    let s = Swarm::new("");
    let config = s.env.read("atelier.toml");
    s.env.write(
        "atelier.toml",
        &format!("{config}\n[swarm]\ncontainment = \"none\"\n"),
    );
    let p = one(&s, "echo ok > src/t.rs");
    let run = s.run(&["run", &p]).code(1);
    assert!(
        run.stderr.contains("E_CONTAINMENT_UNCOMMITTED"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("constitution change"), "{}", run.stderr);
    assert!(!repo(&s).join(".atelier/runs/r1").exists());
}

#[test]
fn a_merged_containment_none_runs_uncontained_and_says_so() {
    let s = Swarm::uncontained("");
    let p = one(&s, &attack(&format!("cat {}", s.env.gate_key().display())));
    let run = s.run(&["run", &p]).ok();
    assert!(
        run.stdout.contains("WARNING:   workers ran uncontained"),
        "{}",
        run.stdout
    );
    let json = s
        .run(&["run", &one(&s, "echo ok > src/t.rs"), "--json"])
        .ok()
        .json();
    assert_eq!(json["containment"], "none");
    assert_eq!(
        std::fs::read_to_string(s.fake.join("verdict")).expect("ran"),
        "ESCAPED\n",
        "uncontained means uncontained: the opt-out is what it says"
    );
    assert!(s.events("r1").iter().any(|e| matches!(
        e,
        atelier::swarm::events::RunEvent::Containment { mode, .. } if mode == "none"
    )));
}

#[test]
fn a_listed_path_that_does_not_exist_is_refused_naming_the_field() {
    let s = Swarm::new("");
    let config = s.env.read("atelier.toml").replace(
        "writable = [",
        "readable = [\"~/.agent-config\"]\nwritable = [",
    );
    s.env.write("atelier.toml", &config);
    s.env.git(&["commit", "-q", "-am", "A readable path"]);
    let p = one(&s, "echo ok > src/t.rs");
    let run = s.run(&["run", &p]).code(1);
    assert!(run.stderr.contains("E_CONTAINMENT_PATH"), "{}", run.stderr);
    assert!(
        run.stderr.contains("roles.implementer.readable"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains(".agent-config"), "{}", run.stderr);
}

#[test]
fn a_bad_network_setting_names_the_field() {
    let env = Env::new();
    let config = env.read("atelier.toml");
    env.write(
        "atelier.toml",
        &format!("{config}\n[gauntlet]\nnetwork = \"some\"\n"),
    );
    let run = env.atelier(&["run", "nothing.toml"]).code(2);
    assert!(run.stderr.contains("network"), "{}", run.stderr);
    assert!(run.stderr.contains("\"none\", \"any\""), "{}", run.stderr);
}
