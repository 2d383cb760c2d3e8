//! Regression tests from the third adversarial review (typed errors below the CLI, `close`
//! finishing a half-done close, serve's bounded lock wait). Each test states the property it
//! checks; the review report lists which of them fail on a26f276.

use atelier::governance::Code;
use atelier::workflow::{Error, Refusal};

use crate::github::Hub;
use crate::support::Env;

const BOT: &str = "bot-token";

/// The code the CLI would find for an error: the kind the outermost error of the chain whose
/// type knows its kind reports (the way `cli::kind_of` reads it).
fn code_in_chain(err: &(dyn std::error::Error + 'static)) -> Option<Code> {
    use atelier::errors::{Classify, Kind};
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = next {
        let kind = if let Some(r) = e.downcast_ref::<Refusal>() {
            Some(r.kind())
        } else {
            e.downcast_ref::<Error>().map(|w| w.kind())
        };
        if let Some(kind) = kind {
            return match kind {
                Kind::Refused(c) => Some(c),
                _ => None,
            };
        }
        next = e.source();
    }
    None
}

/// error.rs promises: "a refusal inside a `Context` is found as the next error of the chain, so
/// the CLI prints it first". thiserror makes the `#[source] source: Box<Error>` field's source
/// a `Box<Error>` (Box<T: Error> is itself an Error), which `downcast_ref::<Error>()` never
/// matches, and `Box`'s own `source()` skips to the inner error's source. So the refusal (or a
/// coded `LedgerError`) wrapped by `.context(...)` is invisible: the command exits 2 and prints
/// `error:` instead of `refused: E_...`. No call site wraps a refusal today, but the `Context`
/// trait invites it (anyhow's `.context` on a refusal kept exit 1).
#[test]
fn a_refusal_wrapped_in_context_keeps_its_code() {
    let refused: Error = Refusal::new(Code::BaseMoved, "the protected branch moved").into();
    assert_eq!(code_in_chain(&refused), Some(Code::BaseMoved));
    let wrapped = refused.context("merging proposal 1");
    assert_eq!(
        code_in_chain(&wrapped),
        Some(Code::BaseMoved),
        "the code of a refusal in Error::Context is lost: exit 2 instead of 1"
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

/// A key file that is not an OpenSSH key: the cause is printed once per error, not once per
/// variant that repeats its source's message (`Error::Key` displays "{0}" and has the same
/// error as its source, so the line appears one more time than with 127773b).
#[test]
fn a_bad_key_file_prints_each_cause_once() {
    let env = Env::new();
    let id = env.propose_code();
    let bad = env.file("not-a-key", "garbage\n");
    let run = env
        .atelier(&["approve", &id, "--key", bad.to_str().expect("utf8")])
        .code(2);
    let lines: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.contains("caused by"))
        .collect();
    let mut unique = lines.clone();
    unique.dedup();
    assert_eq!(lines, unique, "{run:?}");
}
