//! Processes: a contained worker cannot read or signal the conductor, outlive its attempt or use a
//! descriptor the conductor inherited; checks and agent reviewers are contained too.

use crate::containment::{attack, denied};
use crate::support::skip::require_landlock;
use crate::support::swarm::{one, plan, repo, task, Swarm};

#[test]
fn a_worker_cannot_read_the_conductors_environment_or_memory() {
    require_landlock!();
    // The conductor holds GITHUB_TOKEN (the test sets it); its worker must not reach it.
    let s = Swarm::new("");
    denied(&s, "grep -q ghp_secret /proc/$PPID/environ");
    denied(&s, "head -c 1 /proc/$PPID/mem");
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
    let (_dir, role) = crate::support::reviewers::script_role(
        "hostile.sh",
        &format!(
            "cat >/dev/null\nREPO=$(cat {o}/repo)\nif cat \"$(cat {o}/key)\" >/dev/null 2>&1; then echo ESCAPED; else echo denied; fi > {o}/read\nif echo evil > \"$REPO/README.md\" 2>/dev/null; then echo ESCAPED; else echo denied; fi > {o}/write\necho '{{\"verdict\": \"approve\", \"findings\": []}}'\n",
            o = out.display()
        ),
    );
    let role = format!("{role}\nwritable = [\"{}\"]", out.display());
    let env = crate::support::reviewers::with_agent_reviewer(&role, "");
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

/// Landlock checks opens, not descriptors: whatever the conductor inherited without
/// close-on-exec (from a CI runner, an IDE, `make -j`'s jobserver; here a pipe on fd 251 from
/// the harness already reaches every worker) passes into the contained worker.
#[test]
fn a_descriptor_the_conductor_inherited_does_not_reach_the_worker() {
    require_landlock!();
    use std::os::unix::process::CommandExt;
    let s = Swarm::new("");
    let p = one(&s, &attack("head -c 1 <&7"));
    let key = std::ffi::CString::new(s.env.gate_key().to_str().expect("utf8")).expect("path");
    let mut c = s.command(&["run", &p]);
    // SAFETY: open(2) and dup2(2) are async-signal-safe; `key` outlives the spawn.
    unsafe {
        c.pre_exec(move || {
            let fd = libc::open(key.as_ptr(), libc::O_RDONLY);
            if fd >= 0 && fd != 7 {
                libc::dup2(fd, 7);
            }
            Ok(())
        });
    }
    let o = c.output().expect("run");
    assert!(o.status.success(), "{o:?}");
    assert_eq!(
        std::fs::read_to_string(s.fake.join("verdict")).expect("ran"),
        "denied\n"
    );
}

/// Landlock's scopes cover signals, not the other calls that act on a process of the same user:
/// a worker that sets the conductor's file-size limit to 0 has the kernel kill it (SIGXFSZ) at
/// its next write, and then nothing cleans up after the worker. Only the worker's own limits,
/// priority and CPUs may be set; a build's `ulimit` still works.
#[test]
fn a_worker_cannot_set_the_conductor_s_limits_priority_or_cpus() {
    require_landlock!();
    let s = Swarm::new("");
    for attempt in [
        "prlimit --pid $PPID --fsize=0:0",
        "prlimit --pid $PPID --nofile=1:1",
        "renice -n 19 -p $PPID",
        "ionice -c 3 -p $PPID",
        "taskset -p 1 $PPID",
    ] {
        denied(&s, attempt);
    }
    assert_eq!(
        crate::containment::run_attack(&s, "ulimit -n 256 && ulimit -f 100000 && nice -n 5 true"),
        "ESCAPED\n",
        "the worker's own limits"
    );
}
