//! Containment as configured: what the protected branch's configuration grants (paths, network,
//! roles) and what an uncommitted or wrong setting cannot undo.

use crate::containment::{attack, verdict_of};
use crate::support::skip::{require_landlock, skip};
use crate::support::swarm::{one, repo, Swarm};
use crate::support::Env;

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
    // The refusal is the only word on it: no warning that the run uses the working tree's.
    assert!(!run.stderr.contains("warning:"), "{}", run.stderr);
    // The same for an uncommitted edit to what a role may write.
    s.env.write(
        "atelier.toml",
        &config.replace("writable = [", "writable = [\"/tmp\", "),
    );
    let run = s.run(&["run", &p]).code(1);
    assert!(
        run.stderr.contains("E_CONTAINMENT_UNCOMMITTED") && !run.stderr.contains("warning:"),
        "{}",
        run.stderr
    );
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

/// Only `[swarm] containment` is read from the protected branch; every grant is read from
/// the working tree. An uncommitted `writable = ["/"]` (or `network = "any"`, or
/// `shared_target_dir = "."`) undoes containment as surely as the refused `containment = "none"`,
/// and the run still says `contained: landlock`.
#[test]
fn an_uncommitted_grant_cannot_undo_containment() {
    require_landlock!();
    let s = Swarm::new("");
    let config = s
        .env
        .read("atelier.toml")
        .replace("writable = [", "writable = [\"/\", ");
    s.env.write("atelier.toml", &config);
    let (run, v) = verdict_of(&s, &format!("echo evil > {}/README.md", repo(&s).display()));
    assert!(
        run.stderr.contains("E_CONTAINMENT_UNCOMMITTED") || v == "denied\n",
        "{}\n{}\nverdict: {v}",
        run.stdout,
        run.stderr
    );
    assert_ne!(
        std::fs::read_to_string(repo(&s).join("README.md")).unwrap(),
        "evil\n"
    );
}

/// Which branch is "protected" is itself read from the working tree's `[forge] branch`:
/// point it at any local branch that says `containment = "none"` and the refusal is gone.
#[test]
fn another_branch_cannot_stand_in_for_the_protected_one() {
    let s = Swarm::new("");
    let base = s.env.read("atelier.toml");
    s.env.git(&["checkout", "-q", "-b", "lax"]);
    s.env.write(
        "atelier.toml",
        &format!("{base}\n[swarm]\ncontainment = \"none\"\n"),
    );
    s.env.git(&["commit", "-q", "-am", "lax"]);
    s.env.git(&["checkout", "-q", "main"]);
    let uncommitted = base.replace("branch = \"main\"", "branch = \"lax\"");
    assert_ne!(uncommitted, base);
    s.env.write(
        "atelier.toml",
        &format!("{uncommitted}\n[swarm]\ncontainment = \"none\"\n"),
    );
    let (run, v) = verdict_of(&s, &format!("cat {}", s.env.gate_key().display()));
    assert!(
        run.stderr.contains("E_CONTAINMENT_UNCOMMITTED"),
        "ran: {}\n{}\nverdict: {v}",
        run.stdout,
        run.stderr
    );
}

/// `~` is refused as "the whole home directory, which holds ~/.ssh", but `~/` is the same
/// directory and is accepted.
#[test]
fn a_listed_home_with_a_trailing_slash_is_refused_too() {
    require_landlock!();
    let s = Swarm::new("");
    let ssh = s.env.home.join(".ssh");
    std::fs::create_dir_all(&ssh).expect("mkdir");
    std::fs::write(ssh.join("id_ed25519"), "PRIVATE\n").expect("write");
    let config = s
        .env
        .read("atelier.toml")
        .replace("writable = [", "readable = [\"~/\"]\nwritable = [");
    s.env.write("atelier.toml", &config);
    s.env
        .git(&["commit", "-q", "-am", "The agent reads its configuration"]);
    let (run, v) = verdict_of(&s, "grep -q PRIVATE \"$HOME/.ssh/id_ed25519\"");
    assert!(
        run.stderr.contains("E_CONTAINMENT_PATH") || v == "denied\n",
        "{}\n{}\nverdict: {v}",
        run.stdout,
        run.stderr
    );
}

/// What `Workspace::containment` compares with the protected branch is each role's
/// `network`, `readable` and `writable`; what the run uses of the working tree's role is all of
/// it. An uncommitted `command` that names a file by absolute path makes it readable
/// (`Sandbox::programs`); an uncommitted `env` hands the worker a secret of the conductor's
/// environment; an uncommitted `backend` preset turns an unset `network` from "none" into
/// `[443]`. Each is a widening the E_CONTAINMENT_UNCOMMITTED rule promises to refuse.
#[test]
fn an_uncommitted_role_command_cannot_make_a_file_readable() {
    require_landlock!();
    // A secret of the operator's, reachable by no grant.
    let s = Swarm::new("");
    let aws = s.env.home.join(".aws");
    std::fs::create_dir_all(&aws).expect("mkdir");
    let secret = aws.join("credentials");
    std::fs::write(&secret, "aws_secret_access_key = AKIAsecret\n").expect("write");
    let agent = s.fake.join("agent.sh");
    let config = s.env.read("atelier.toml").replace(
        &format!("command = [\"{}\"]", agent.display()),
        &format!(
            "command = [\"{}\", \"{}\"]",
            agent.display(),
            secret.display()
        ),
    );
    assert_ne!(config, s.env.read("atelier.toml"));
    s.env.write("atelier.toml", &config);
    // The scenario is sourced by the agent script: "$1" is the argument the edit added.
    let (run, v) = verdict_of(&s, "grep -q AKIAsecret \"$1\"");
    assert!(
        run.stderr.contains("E_CONTAINMENT_UNCOMMITTED") || v == "denied\n",
        "an uncommitted `command` made {} readable\n{}\n{}\nverdict: {v}",
        secret.display(),
        run.stdout,
        run.stderr
    );
}

/// An uncommitted `env` entry: the conductor's secret reaches the worker.
#[test]
fn an_uncommitted_role_env_cannot_pass_a_secret() {
    require_landlock!();
    let s = Swarm::new("");
    let config = s
        .env
        .read("atelier.toml")
        .replace("env = [", "env = [\"AWS_SECRET_ACCESS_KEY\", ");
    s.env.write("atelier.toml", &config);
    let p = one(&s, &attack("test \"$AWS_SECRET_ACCESS_KEY\" = AKIAsecret"));
    let o = s
        .command(&["run", &p])
        .env("AWS_SECRET_ACCESS_KEY", "AKIAsecret")
        .output()
        .expect("run");
    let v = std::fs::read_to_string(s.fake.join("verdict")).unwrap_or_default();
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("E_CONTAINMENT_UNCOMMITTED") || v == "denied\n",
        "an uncommitted `env` passed a secret\n{}\nverdict: {v}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// An uncommitted `backend`: the same role, no `network` field on either
/// side, but the preset's default port opens. (A `claude` stand-in runs the role's command.)
#[test]
fn an_uncommitted_role_backend_cannot_open_a_port() {
    require_landlock!();
    let s = Swarm::new("");
    let bin_dir = s.env.tmp.path().join("bin");
    std::fs::create_dir_all(&bin_dir).expect("mkdir");
    let claude = bin_dir.join("claude");
    std::fs::write(
        &claude,
        "#!/bin/sh\nwhile [ \"$1\" != bash ]; do shift; done\nexec \"$@\"\n",
    )
    .expect("write");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&claude, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let config = s
        .env
        .read("atelier.toml")
        .replace("backend = \"command\"", "backend = \"claude\"");
    s.env.write("atelier.toml", &config);
    let Ok(listener) = std::net::TcpListener::bind("127.0.0.1:443") else {
        skip!("the backend case: 127.0.0.1:443 is taken or not ours to bind");
    };
    listener.set_nonblocking(true).expect("nonblocking");
    let p = one(&s, &attack("bash -c 'exec 3<>/dev/tcp/127.0.0.1/443'"));
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let o = s
        .command(&["run", &p])
        .env("PATH", path)
        .output()
        .expect("run");
    let v = std::fs::read_to_string(s.fake.join("verdict")).unwrap_or_default();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("E_CONTAINMENT_UNCOMMITTED")
            || (v == "denied\n" && listener.accept().is_err()),
        "an uncommitted `backend` opened port 443\n{stderr}\nverdict: {v}"
    );
}

/// `writable` and `readable` are refused when they hold the gate key's directory
/// (`contain::grants`), but `[swarm] shared_target_dir`, which every worker and step may write,
/// is only checked against the repository: `"~/.local/share"` hands every worker the gate key
/// (to read, or to replace).
#[test]
fn the_shared_build_cache_cannot_hold_the_gate_key() {
    require_landlock!();
    let s = Swarm::configured("", "\n[swarm]\nshared_target_dir = \"~/.local/share\"\n");
    let (run, v) = verdict_of(&s, &format!("cat {}", s.env.gate_key().display()));
    assert!(
        (run.code == 1 && run.stderr.contains("E_CONTAINMENT_PATH")) || v == "denied\n",
        "{}\n{}\nverdict: {v}",
        run.stdout,
        run.stderr
    );
}
