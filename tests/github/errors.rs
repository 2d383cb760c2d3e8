//! GitHub's errors: retried when transient, explained when not (auth, permission, not found, a
//! ledger that could not be pushed).

use crate::support::github::Fault;
use crate::support::hub::{Hub, BOT, REPO};

#[test]
fn server_errors_and_secondary_rate_limits_are_retried() {
    let hub = Hub::new();
    let n = hub.submitted();
    let path = format!("/repos/{REPO}/pulls/{n}");
    hub.emu.inject(Fault::server_error("GET", &path, 2));
    hub.emu.inject(Fault::SecondaryRateLimit {
        method: "POST".into(),
        path: "/statuses/".into(),
        times: 1,
        retry_after: 1,
    });
    let (code, _) = hub.gate(n);
    assert_eq!(code, 1);
    let log = hub.emu.log();
    let gets = log
        .iter()
        .filter(|l| l.method == "GET" && l.path == path)
        .count();
    assert!(gets >= 3, "two 500s then a success: {gets} GETs");
    assert!(
        hub.status(&hub.head(n)).is_some(),
        "the status was set after the rate limit"
    );
    // Failing every time: a clear message after the bounded attempts.
    hub.emu.inject(Fault::server_error("GET", &path, 50));
    let run = hub.run(BOT, &["gate", "--pr", &n.to_string()]).code(2);
    assert!(run.stderr.contains("attempts"), "{}", run.stderr);
}

#[test]
fn auth_permission_and_not_found_errors_say_what_to_fix() {
    let hub = Hub::new();
    let n = hub.submitted();
    let bad = hub
        .run("ghp_not_a_real_token", &["gate", "--pr", &n.to_string()])
        .code(2);
    assert!(bad.stderr.contains("GITHUB_TOKEN"), "{}", bad.stderr);
    assert!(
        !bad.stderr.contains("ghp_not_a_real_token"),
        "the token leaked: {}",
        bad.stderr
    );
    let none = hub.env.atelier(&["gate", "--pr", &n.to_string()]).code(2);
    assert!(none.stderr.contains("no GitHub token"), "{}", none.stderr);
    hub.emu.permissions("atelier-bot", &["statuses"]);
    let denied = hub.run(BOT, &["gate", "--pr", &n.to_string()]).code(2);
    assert!(
        denied.stderr.contains("Commit statuses: write"),
        "{}",
        denied.stderr
    );
    hub.emu.permissions("atelier-bot", &[]);
    let missing = hub.run(BOT, &["gate", "--pr", "99"]).code(2);
    assert!(
        missing.stderr.contains("404") && missing.stderr.contains(REPO),
        "{}",
        missing.stderr
    );
}

/// The notes `close`, `gate` and an alarm print when publishing the ledger fails use `{e:#}`,
/// which with anyhow printed the whole chain (`pushing refs/atelier/ledger (...): git push
/// failed: <git's stderr>`). `workflow::Error` ignores the alternate flag, and `Error::Context`
/// displays only its context, so the operator reads "pushing refs/atelier/ledger (the remote's
/// ledger must be an ancestor of this one)" and never what git or the remote said.
#[test]
fn on_github_a_note_about_an_unpushed_ledger_says_why_the_push_failed() {
    let hub = Hub::new();
    hub.submitted();
    let hooks = hub.remote.join("hooks");
    std::fs::create_dir_all(&hooks).expect("hooks");
    let hook = hooks.join("pre-receive");
    std::fs::write(
        &hook,
        "#!/bin/sh\nwhile read old new ref; do\n  case \"$ref\" in refs/atelier/ledger) echo 'HOOK-SAYS-NO-LEDGER' >&2; exit 1;; esac\ndone\nexit 0\n",
    )
    .expect("hook");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let close = hub.run(BOT, &["close", "1", "--reason", "superseded"]).ok();
    assert!(
        close.stderr.contains("not pushed"),
        "the note about the unpushed ledger: {close:?}"
    );
    assert!(
        close.stderr.contains("HOOK-SAYS-NO-LEDGER"),
        "the note hides why the push failed: {close:?}"
    );
}

/// The same through `gate`: the ledger is recorded but not pushed, and the note says why.
#[test]
fn on_github_gate_says_why_the_ledger_was_not_pushed() {
    let hub = Hub::new();
    let n = hub.submitted();
    hub.approve(n, "alice", &[]).ok();
    let hooks = hub.remote.join("hooks");
    std::fs::create_dir_all(&hooks).expect("hooks");
    let hook = hooks.join("pre-receive");
    std::fs::write(
        &hook,
        "#!/bin/sh\nwhile read old new ref; do\n  case \"$ref\" in refs/atelier/ledger) echo 'HOOK-SAYS-NO-LEDGER' >&2; exit 1;; esac\ndone\nexit 0\n",
    )
    .expect("hook");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    hub.approve(n, "bob", &[]);
    let gate = hub.run(BOT, &["gate", "--pr", &n.to_string()]);
    if gate.stderr.contains("not pushed") {
        assert!(
            gate.stderr.contains("HOOK-SAYS-NO-LEDGER"),
            "the note hides why the push failed: {gate:?}"
        );
    }
}
