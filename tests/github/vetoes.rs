//! Vetoes on GitHub: a rejection, deleted or delivered before any evaluation or while retargeted,
//! still vetoes.

use serde_json::Value;

use crate::github::{bobs_rejection, deliver, open_pull, payload, wait_for};
use crate::support::github::Fault;
use crate::support::hub::{Hub, BOT, REPO, SECRET};
use crate::support::webhooks::{self, Readdress};

#[test]
fn a_rejection_vetoes_and_a_deleted_rejection_still_does() {
    let hub = Hub::new();
    let n = hub.submitted();
    hub.approve(n, "alice", &[]).ok();
    hub.approve(n, "bob", &["--reject"]).ok();
    let (code, v) = hub.gate(n);
    assert_eq!(code, 1);
    assert!(crate::support::unmet(&v).contains(&"E_VETOED".to_string()));
    assert_eq!(hub.status(&hub.head(n)).expect("status").0, "failure");
    // The gate recorded bob's rejection in the ledger: deleting the comment changes nothing.
    let reject = hub
        .emu
        .comments(n)
        .into_iter()
        .find(|c| {
            c["body"]
                .as_str()
                .unwrap_or("")
                .starts_with("/atelier reject")
        })
        .expect("rejection comment");
    hub.emu.delete_comment(reject["id"].as_u64().expect("id"));
    let (code, v) = hub.gate(n);
    assert_eq!(code, 1);
    assert!(
        crate::support::unmet(&v).contains(&"E_VETOED".to_string()),
        "{v}"
    );
}

#[test]
fn a_rejection_deleted_before_any_evaluation_still_vetoes_through_its_delivery() {
    let hub = Hub::new();
    let n = hub.submitted();
    hub.approve(n, "alice", &[]).ok();
    hub.approve(n, "bob", &["--reject"]).ok();
    // Someone with write access deletes bob's rejection before the gate has read it; GitHub's
    // `deleted` delivery still carries the body.
    let reject = hub
        .emu
        .comments(n)
        .into_iter()
        .find(|c| c["user"]["login"] == "bob")
        .expect("bob's comment");
    hub.emu.delete_comment(reject["id"].as_u64().expect("id"));
    let mut v = webhooks::example("issue_comment", Some("deleted"));
    let mut to = Readdress::to(REPO);
    to.pull = Some(n);
    let body = reject["body"].as_str().expect("body");
    to.comment_body = Some(body);
    webhooks::readdress(&mut v, &to);
    v["issue"]["pull_request"] = serde_json::json!({"url": "x"});
    v["comment"]["id"] = reject["id"].clone();
    let bytes = serde_json::to_vec(&v).expect("json");
    let (server, url) = hub.serve();
    let sig = webhooks::sign(SECRET, &bytes);
    assert_eq!(
        deliver(&url, "issue_comment", "del-1", &bytes, Some(sig)).0,
        202
    );
    let head = hub.head(n);
    wait_for("a status", &server, || hub.status(&head).is_some());
    drop(server);
    assert_eq!(hub.status(&head).expect("status").0, "failure");
    let (code, v) = hub.gate(n);
    assert_eq!(code, 1);
    assert!(
        crate::support::unmet(&v).contains(&"E_VETOED".to_string()),
        "{v}"
    );
}

/// A signed `issue_comment.deleted` delivery for a comment, re-addressed from the example.
fn deleted_delivery(n: u64, comment: &Value) -> Vec<u8> {
    let mut v = webhooks::example("issue_comment", Some("deleted"));
    let mut to = Readdress::to(REPO);
    to.pull = Some(n);
    to.comment_body = comment["body"].as_str();
    webhooks::readdress(&mut v, &to);
    v["issue"]["pull_request"] = serde_json::json!({"url": "x"});
    v["comment"]["id"] = comment["id"].clone();
    serde_json::to_vec(&v).expect("json")
}

#[test]
fn a_delivered_rejection_survives_an_evaluation_that_failed() {
    let hub = Hub::new();
    let n = hub.submitted();
    hub.approve(n, "alice", &[]).ok();
    hub.approve(n, "bob", &["--reject"]).ok();
    let reject = hub
        .emu
        .comments(n)
        .into_iter()
        .find(|c| c["user"]["login"] == "bob")
        .expect("bob's comment");
    hub.emu.delete_comment(reject["id"].as_u64().expect("id"));
    let bytes = deleted_delivery(n, &reject);
    // The first evaluation fails: GitHub answers 500 to the pull request, every retry.
    hub.emu
        .inject(Fault::server_error("GET", &format!("/pulls/{n}"), 5));
    let (server, url) = hub.serve();
    let sig = webhooks::sign(SECRET, &bytes);
    assert_eq!(
        deliver(&url, "issue_comment", "del-1", &bytes, Some(sig)).0,
        202
    );
    wait_for("the failed evaluation", &server, || {
        server.log().contains("attempts")
    });
    // The next delivery's evaluation still has the deleted rejection.
    let head = hub.head(n);
    let again = payload(
        "pull_request_review",
        Some("submitted"),
        Some(n),
        Some(&head),
    );
    let sig = webhooks::sign(SECRET, &again);
    assert_eq!(
        deliver(&url, "pull_request_review", "rev-1", &again, Some(sig)).0,
        202
    );
    wait_for("a status", &server, || hub.status(&head).is_some());
    drop(server);
    assert_eq!(hub.status(&head).expect("status").0, "failure");
    let (_, v) = hub.gate(n);
    assert!(
        crate::support::unmet(&v).contains(&"E_VETOED".to_string()),
        "{v}"
    );
}

#[test]
fn a_rejection_recorded_after_an_unanswered_request_closes_it() {
    let hub = Hub::new();
    let n = hub.submitted();
    hub.approve(n, "alice", &[]).ok();
    hub.approve(n, "bob", &[]).ok();
    hub.emu
        .inject(Fault::server_error("PUT", &format!("/pulls/{n}/merge"), 5));
    hub.run(BOT, &["merge", "--pr", &n.to_string()]).code(2);
    // bob rejects and the gate records it; then the gate's own account merges by hand.
    hub.approve(n, "bob", &["--reject"]).ok();
    assert_eq!(hub.gate(n).0, 1);
    ureq::put(&format!("{}/repos/{REPO}/pulls/{n}/merge", hub.emu.url))
        .header("Authorization", &format!("Bearer {BOT}"))
        .send_json(serde_json::json!({"merge_method": "merge"}))
        .expect("hand merge");
    let run = hub.run(BOT, &["merge", "--pr", &n.to_string()]).code(1);
    assert!(
        run.stderr.contains("E_MERGED_OUTSIDE_GATE"),
        "{}",
        run.stderr
    );
}

/// A signed `issue_comment` delivery (`action`) for a comment, re-addressed from the example.
pub(crate) fn comment_delivery(n: u64, comment: &Value, action: &str) -> Vec<u8> {
    let mut v = webhooks::example("issue_comment", Some(action));
    let mut to = Readdress::to(REPO);
    to.pull = Some(n);
    to.comment_body = comment["body"].as_str();
    webhooks::readdress(&mut v, &to);
    v["issue"]["pull_request"] = serde_json::json!({"url": "x"});
    v["comment"]["id"] = comment["id"].clone();
    serde_json::to_vec(&v).expect("json")
}

/// Someone with write access retargets pull request `n` onto `base` (creating that branch from
/// `main` on the remote first if needed), as GitHub's Edit button does.
fn retarget(hub: &Hub, n: u64, base: &str) {
    if base != "main" {
        hub.env.git(&[
            "push",
            "-q",
            "-f",
            "origin",
            &format!("main:refs/heads/{base}"),
        ]);
    }
    ureq::patch(&format!("{}/repos/{REPO}/pulls/{n}", hub.emu.url))
        .header("Authorization", "Bearer mallory-token")
        .send_json(serde_json::json!({ "base": base }))
        .expect("retarget");
    assert_eq!(hub.emu.pull(n)["base"]["ref"], base);
}

#[test]
fn a_rejection_delivered_while_the_pull_request_was_retargeted_still_vetoes() {
    // Issue 8, break 10: retarget the pull request away, let the rejection's delivery arrive
    // (the evaluation refuses E_FORGE_STATE), delete the comment, retarget back, merge.
    let hub = Hub::new();
    let n = hub.submitted();
    hub.approve(n, "alice", &[]).ok();
    hub.approve(n, "bob", &["--reject"]).ok();
    let reject = bobs_rejection(&hub, n);
    retarget(&hub, n, "elsewhere");
    let (server, url) = hub.serve();
    let bytes = comment_delivery(n, &reject, "created");
    let sig = webhooks::sign(SECRET, &bytes);
    assert_eq!(
        deliver(&url, "issue_comment", "rej-1", &bytes, Some(sig)).0,
        202
    );
    wait_for("the refused evaluation", &server, || {
        server.log().contains("E_FORGE_STATE")
    });
    let log = server.stop();
    assert!(log.contains("1 delivered token(s) recorded"), "{log}");
    hub.emu.delete_comment(reject["id"].as_u64().expect("id"));
    retarget(&hub, n, "main");
    let merge = hub.run(BOT, &["merge", "--pr", &n.to_string()]).code(1);
    assert!(merge.stdout.contains("E_VETOED"), "{merge:?}");
    assert_eq!(hub.emu.pull(n)["merged"], false);
}

#[test]
fn a_retargeted_pull_request_is_not_replaced_by_the_next_submit() {
    // Issue 8, break 11: with the vetoed proposal's pull request retargeted away, a routine
    // `submit` must not open a new pull request that one approval would merge.
    let hub = Hub::new();
    let n = hub.submitted();
    hub.approve(n, "alice", &[]).ok();
    hub.approve(n, "bob", &["--reject"]).ok();
    assert_eq!(hub.gate(n).0, 1, "the gate records bob's veto");
    retarget(&hub, n, "elsewhere");
    let before = hub.emu.log().len();
    let run = hub.run(BOT, &["submit", "1"]).code(1);
    assert!(run.stderr.contains("E_PULL_RETARGETED"), "{}", run.stderr);
    assert!(
        run.stderr.contains("retarget #1 back to `main`"),
        "{}",
        run.stderr
    );
    assert!(
        hub.emu.log()[before..]
            .iter()
            .all(|l| !(l.method == "POST" && l.path.ends_with("/pulls"))),
        "no new pull request was opened"
    );
    // Closed instead: refused too, and a pull request opened by hand from the branch cannot
    // pass (it is not the one `submit` recorded).
    ureq::patch(&format!("{}/repos/{REPO}/pulls/{n}", hub.emu.url))
        .header("Authorization", "Bearer mallory-token")
        .send_json(serde_json::json!({ "state": "closed", "base": "main" }))
        .expect("close");
    let run = hub.run(BOT, &["submit", "1"]).code(1);
    assert!(run.stderr.contains("E_PULL_CLOSED"), "{}", run.stderr);
    let by_hand = open_pull(
        &hub.emu.url,
        "mallory-token",
        "Again",
        "atelier/proposals/1",
        "main",
    );
    let merge = hub
        .run(BOT, &["merge", "--pr", &by_hand.to_string()])
        .code(1);
    assert!(merge.stderr.contains("E_NOT_SUBMITTED"), "{merge:?}");
    // Reopened where it belongs, the proposal is submitted again and the veto still holds.
    ureq::patch(&format!("{}/repos/{REPO}/pulls/{by_hand}", hub.emu.url))
        .header("Authorization", "Bearer mallory-token")
        .send_json(serde_json::json!({ "state": "closed" }))
        .expect("close the hand-made one");
    ureq::patch(&format!("{}/repos/{REPO}/pulls/{n}", hub.emu.url))
        .header("Authorization", "Bearer mallory-token")
        .send_json(serde_json::json!({ "state": "open" }))
        .expect("reopen");
    let again = hub.run(BOT, &["submit", "1", "--json"]).ok().json();
    assert_eq!(again["pull"], n);
    let merge = hub.run(BOT, &["merge", "--pr", &n.to_string()]).code(1);
    assert!(merge.stdout.contains("E_VETOED"), "{merge:?}");
}
