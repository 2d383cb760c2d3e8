//! Regression tests from the second adversarial review (the fixes to the one-loop
//! unification). Each test states the property it checks; the report lists which fail on the
//! reviewed commit (fcb4c2d).

use std::path::PathBuf;

use serde_json::Value;

use crate::github::Hub;
use crate::support::Env;

const BOT: &str = "bot-token";

fn pull_file(env: &Env, n: u64) -> PathBuf {
    env.repo.join(format!(".atelier/forge/pulls/{n}.json"))
}

fn edit_record(env: &Env, n: u64, f: impl FnOnce(&mut Value)) {
    let path = pull_file(env, n);
    let mut v: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("record")).expect("json");
    f(&mut v);
    std::fs::write(&path, serde_json::to_string_pretty(&v).expect("json")).expect("write");
}

/// Proposals the ledger records as closed (from `audit log --json`, whatever its shape: any
/// entry whose event is `closed`).
fn closed_in_ledger(env: &Env) -> Vec<String> {
    let log = env.atelier(&["audit", "log"]);
    log.stdout
        .lines()
        .filter(|l| l.contains("closed"))
        .map(str::to_string)
        .collect()
}

/// Local forge: `close 2` must close proposal 2 and nothing else. `close` reads this clone's
/// record `2.json` without checking it against the ledger (no `checked_record`, no check that
/// the record names proposal 2), so a record whose `proposal` field was edited to "1" makes
/// `atelier close 2` append `closed` for proposal 1: a permanent close (no forge record can
/// reopen it) of someone else's proposal, by whoever can write `.atelier/forge/`, through the
/// operator's own command. `gate`, `merge`, `approve` and `submit` refuse such a record.
#[test]
fn close_by_id_never_closes_the_proposal_an_edited_record_names() {
    let env = Env::new();
    env.propose_code();
    env.propose(&[("README.md", "# demo, more\n")], "Docs");
    edit_record(&env, 2, |v| v["proposal"] = Value::String("1".into()));
    let close = env.atelier(&["close", "2"]);
    let approve = env.approve("1", "alice");
    assert!(
        close.code == 1 && close.stderr.contains("E_FORGE_STATE"),
        "close 2 with a record naming proposal 1: {close:?}\nledger closed entries: {:?}\napprove 1 afterwards: {approve:?}",
        closed_in_ledger(&env)
    );
    assert_eq!(
        approve.code, 0,
        "proposal 1 was closed by `close 2`: {approve:?}"
    );
}

/// GitHub: the same through `close` on the gate machine also closes proposal 1's pull request
/// on GitHub (`withdraw` follows the ledger's `submitted` entries of the proposal the edited
/// record names) and comments on it.
#[test]
fn on_github_close_by_id_never_closes_another_proposals_pull_request() {
    let hub = Hub::new();
    let n1 = hub.submitted();
    let two = hub
        .env
        .propose(&[("README.md", "# demo, more\n")], "Docs only");
    assert_eq!(two, "2");
    edit_record(&hub.env, 2, |v| v["proposal"] = Value::String("1".into()));
    let close = hub.run(BOT, &["close", "2"]);
    let state = hub.emu.pull(n1)["state"].clone();
    assert!(
        close.code == 1 && close.stderr.contains("E_FORGE_STATE"),
        "close 2 with a record naming proposal 1: {close:?}\n#{n1} (proposal 1) is now {state}"
    );
    assert_eq!(state, Value::String("open".into()), "#{n1} was closed");
}

/// GitHub: a merge whose answer was lost (the merge landed, `merge-requested` is recorded but
/// not concluded) looks like a failed merge to the operator. `close` must not then record
/// `closed`: that ends the standing request (`unconcluded_request`), so the next `merge`
/// raises a false `E_MERGED_OUTSIDE_GATE` alarm, and `audit verify` reports the approved merge
/// as `E_UNLEDGERED_COMMIT`, for good. `close` already asks GitHub (`withdraw`) but only skips
/// the closing when the pull request is not open; it should refuse (E_NOT_OPEN, "merged on the
/// forge: run `atelier merge` to conclude it") before recording anything.
#[test]
fn on_github_close_after_a_lost_merge_answer_does_not_turn_the_merge_into_an_alarm() {
    use crate::support::github::Fault;
    let hub = Hub::new();
    let n = hub.submitted();
    hub.approve(n, "alice", &[]).ok();
    hub.approve(n, "bob", &[]).ok();
    hub.emu.inject(Fault::MergeThenFail { then: 4 });
    hub.run(BOT, &["merge", "--pr", &n.to_string()]).code(2);
    assert_eq!(hub.emu.pull(n)["merged"], true);
    let close = hub.run(BOT, &["close", "1", "--reason", "merge failed, giving up"]);
    let merge = hub.run(BOT, &["merge", "--pr", &n.to_string()]);
    let audit = hub.auditor_clone();
    let verify = hub.env.atelier_in(&audit, &["audit", "verify"]);
    assert!(
        close.code == 1 && merge.code == 0 && verify.code == 0,
        "close: {close:?}\nmerge: {merge:?}\naudit: {verify:?}"
    );
}

/// serve: anyone who can open `.atelier/lock` (flock needs only a readable descriptor: another
/// user of the machine, a worker, a stuck operator command) holds the one evaluation worker
/// forever: `Lock::acquire` blocks without a limit, deliveries pile up (their rejections are
/// not recorded), and `/healthz` keeps answering "ok", because it only reports a worker that
/// died. A stalled worker must be visible: `/healthz` answers 503 while queued work waits on
/// the lock, or at least the log says what it is waiting for.
#[test]
fn serve_says_when_its_worker_is_stalled_on_the_lock() {
    let hub = Hub::new();
    let n = hub.submitted();
    let lock = std::fs::File::open(hub.env.repo.join(".atelier/lock")).expect("lock file");
    lock.lock().expect("flock");
    let (server, url) = hub.serve();
    let body = serde_json::to_vec(&serde_json::json!({
        "action": "synchronize",
        "repository": {"full_name": "acme/widgets"},
        "pull_request": {"number": n, "head": {"sha": hub.head(n)}},
    }))
    .expect("json");
    let sig = crate::support::webhooks::sign("webhook-test-secret", &body);
    let (status, text) = crate::github::deliver(&url, "pull_request", "stall-1", &body, Some(sig));
    assert!(status == 200 || status == 202, "{status} {text}");
    std::thread::sleep(std::time::Duration::from_secs(4));
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let health = agent
        .get(&format!("{url}/healthz"))
        .call()
        .expect("healthz")
        .status()
        .as_u16();
    let log = server.log();
    drop(lock);
    assert!(
        health != 200 || log.to_lowercase().contains("lock"),
        "the worker has waited 4 s on .atelier/lock with work queued; /healthz says {health}; log:\n{log}"
    );
}

/// serve: a signed delivery removes its connection from `unproven`, which drops the oneshot
/// sender; the connection task's `select!` then takes `_ = closed` (a dropped sender resolves
/// the receiver too), drops the connection (possibly before the response is flushed: GitHub
/// would then record a failed delivery it never retries), and logs "closed to make room" for a
/// genuine delivery, although nothing needed room. Only an explicit close should do that.
#[test]
fn serve_never_closes_a_signed_delivery_to_make_room() {
    let hub = Hub::new();
    let n = hub.submitted();
    let (server, url) = hub.serve();
    let body = serde_json::to_vec(&serde_json::json!({
        "action": "synchronize",
        "repository": {"full_name": "acme/widgets"},
        "pull_request": {"number": n, "head": {"sha": hub.head(n)}},
    }))
    .expect("json");
    let sig = crate::support::webhooks::sign("webhook-test-secret", &body);
    let (status, text) = crate::github::deliver(&url, "pull_request", "room-1", &body, Some(sig));
    assert!(status == 200 || status == 202, "{status} {text}");
    std::thread::sleep(std::time::Duration::from_millis(500));
    let log = server.stop();
    assert!(
        !log.contains("closed to make room"),
        "one signed delivery, no other connection, and the log says:\n{log}"
    );
}
