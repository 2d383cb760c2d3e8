//! `atelier serve`: signed webhooks, coalesced bursts, regating on a push, statuses written once,
//! and a worker that neither stalls nor drops a veto.

use std::time::{Duration, Instant};

use crate::github::{answer, bobs_rejection, deliver, payload, wait_for};
use crate::support::hub::{Hub, BOT, REPO, SECRET};
use crate::support::webhooks;

#[test]
fn webhook_signatures_are_required_and_replays_are_ignored() {
    let hub = Hub::new();
    let n = hub.submitted();
    let (server, url) = hub.serve();
    let head = hub.head(n);
    let body = payload("pull_request", Some("synchronize"), Some(n), Some(&head));
    // Missing and wrong signatures: 401, and nothing happens.
    assert_eq!(deliver(&url, "pull_request", "d-1", &body, None).0, 401);
    let wrong = webhooks::sign("not-the-secret", &body);
    assert_eq!(
        deliver(&url, "pull_request", "d-2", &body, Some(wrong)).0,
        401
    );
    let mut tampered = body.clone();
    tampered.push(b' ');
    let sig = webhooks::sign(SECRET, &body);
    assert_eq!(
        deliver(&url, "pull_request", "d-3", &tampered, Some(sig.clone())).0,
        401
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        hub.status(&head).is_none(),
        "a refused delivery must do nothing"
    );
    // A good delivery runs the gate; replaying its id is ignored.
    assert_eq!(
        deliver(&url, "pull_request", "d-4", &body, Some(sig.clone())).0,
        202
    );
    wait_for("a status", &server, || {
        hub.status(&head)
            .is_some_and(|(s, _)| s != "pending" || !hub.emu.comments(n).is_empty())
    });
    let (status, text) = deliver(&url, "pull_request", "d-4", &body, Some(sig));
    assert_eq!(status, 200);
    assert!(text.contains("duplicate"), "{text}");
    // A body larger than any event the gate needs is refused before it is read.
    let big = vec![b' '; 6 * 1024 * 1024];
    let big_sig = webhooks::sign(SECRET, &big);
    let (status, text) = deliver(&url, "push", "d-big", &big, Some(big_sig));
    assert!(status == 413 || status == 0, "{status} {text}");
    assert!(
        server.log().lines().all(|l| !l.contains("d-big")),
        "it was not processed"
    );
    // ping answers; healthz answers.
    let ping = payload("ping", None, None, None);
    assert_eq!(
        deliver(
            &url,
            "ping",
            "d-5",
            &ping,
            Some(webhooks::sign(SECRET, &ping))
        )
        .0,
        200
    );
    let health = ureq::get(&format!("{url}/healthz"))
        .call()
        .expect("healthz");
    assert_eq!(health.status().as_u16(), 200);
    let log = server.stop();
    assert!(log.contains("a replay, ignored"), "{log}");
    assert!(
        !log.contains(BOT) && !log.contains(SECRET),
        "secrets in the log: {log}"
    );
}

#[test]
fn a_burst_of_deliveries_for_one_pull_request_coalesces() {
    let hub = Hub::new();
    let n = hub.submitted();
    hub.approve(n, "alice", &[]).ok();
    let (server, url) = hub.serve();
    for i in 0..8 {
        let body = payload("issue_comment", Some("edited"), Some(n), None);
        let sig = webhooks::sign(SECRET, &body);
        assert_eq!(
            deliver(
                &url,
                "issue_comment",
                &format!("burst-{i}"),
                &body,
                Some(sig)
            )
            .0,
            202
        );
    }
    let head = hub.head(n);
    wait_for("a status", &server, || hub.status(&head).is_some());
    std::thread::sleep(Duration::from_millis(1500));
    let log = server.stop();
    let evaluations = log.matches(&format!("pull request #{n}: ")).count();
    assert!(
        (1..=3).contains(&evaluations),
        "8 deliveries should coalesce into at most 3 evaluations, saw {evaluations}:\n{log}"
    );
}

#[test]
fn a_push_to_the_protected_branch_regates_open_proposals_and_auto_merge_merges() {
    let hub = Hub::with_merge("auto");
    let n = hub.submitted();
    hub.approve(n, "alice", &[]).ok();
    hub.approve(n, "bob", &[]).ok();
    let (server, url) = hub.serve();
    let body = payload("push", None, None, None);
    assert_eq!(
        deliver(
            &url,
            "push",
            "p-1",
            &body,
            Some(webhooks::sign(SECRET, &body))
        )
        .0,
        202
    );
    wait_for("the automatic merge", &server, || {
        hub.emu.pull(n)["merged"] == true
    });
    // The server says so once it has also checked what landed and recorded it.
    wait_for("the server's report", &server, || {
        server.log().contains("merged as")
    });
    let audit = hub.env.atelier(&["audit", "verify"]);
    assert_eq!(audit.code, 0, "{audit:?}");
}

#[test]
fn an_evaluation_that_changes_nothing_writes_only_the_status() {
    let hub = Hub::new();
    let n = hub.submitted();
    hub.approve(n, "alice", &[]).ok();
    assert_eq!(hub.gate(n).0, 0);
    let before = hub.emu.log().len();
    assert_eq!(hub.gate(n).0, 0);
    let calls: Vec<String> = hub.emu.log()[before..]
        .iter()
        .map(|l| format!("{} {}", l.method, l.path.split('?').next().unwrap_or("")))
        .collect();
    let p = format!("/repos/{REPO}");
    let head = hub.head(n);
    assert_eq!(
        calls,
        [
            format!("GET {p}/pulls/{n}"),
            format!("GET {p}/pulls/{n}"),
            format!("GET {p}/issues/{n}/comments"),
            format!("GET {p}/pulls/{n}/reviews"),
            format!("POST {p}/statuses/{head}"),
            "GET /user".to_string(),
        ],
        "the summary comment is not rewritten when the evaluation did not change"
    );
}

#[test]
fn a_published_verdict_is_recorded_once_until_it_changes() {
    // Issue 8: gate --pr and serve published verdicts without recording them, so the ledger's
    // clock floor lagged behind what was published.
    let hub = Hub::new();
    let n = hub.submitted();
    let decisions = || {
        hub.env
            .atelier(&["audit", "log"])
            .ok()
            .stdout
            .lines()
            .filter(|l| l.contains("gate allowed") || l.contains("gate refused"))
            .count()
    };
    assert_eq!(hub.gate(n).0, 1);
    assert_eq!(decisions(), 1, "the published verdict is recorded");
    assert_eq!(hub.gate(n).0, 1);
    assert_eq!(decisions(), 1, "an unchanged verdict appends nothing");
    hub.approve(n, "alice", &[]).ok();
    assert_eq!(hub.gate(n).0, 0);
    assert_eq!(decisions(), 2, "a changed verdict is recorded");
    hub.run(BOT, &["merge", "--pr", &n.to_string()]).ok();
    // merge --pr records the decision it merges on (once: the evaluation's verdict was
    // unchanged, so only merge --pr recorded it).
    assert_eq!(decisions(), 3);
    let verify = hub
        .env
        .atelier_in(&hub.auditor_clone(), &["audit", "verify"]);
    assert_eq!(verify.code, 0, "{verify:?}");
}

#[test]
fn stalled_unsigned_connections_cannot_blind_serve_and_a_missed_delivery_loses_no_veto() {
    // Issue 8, break 12: connections with a well-formed but bogus signature and a large
    // Content-Length that then stall held every body-reading slot, so genuine deliveries got
    // 503. Real TCP connections, loopback only, short timeouts.
    use std::io::Write;
    let hub = Hub::new();
    let n = hub.submitted();
    hub.approve(n, "alice", &[]).ok();
    // Bob rejects; the delivery of his comment never reaches serve (it is missed).
    hub.approve(n, "bob", &["--reject"]).ok();
    let reject = bobs_rejection(&hub, n);
    let head = hub.head(n);
    let (server, url) = hub.serve_with(&[
        "--header-timeout-ms",
        "5000",
        "--first-byte-timeout-ms",
        "300",
        "--body-timeout-ms",
        "800",
    ]);
    let addr = url.strip_prefix("http://").expect("http url").to_string();
    let request = |sig: &str, delivery: &str| {
        format!(
            "POST / HTTP/1.1\r\nHost: gate\r\nX-GitHub-Event: issue_comment\r\nX-GitHub-Delivery: {delivery}\r\nX-Hub-Signature-256: {sig}\r\nContent-Type: application/json\r\nContent-Length: 5000000\r\n\r\n"
        )
    };
    let bogus = format!("sha256={}", "0".repeat(64));
    let start = Instant::now();
    let mut stalled: Vec<std::net::TcpStream> = (0..40)
        .map(|i| {
            let mut s = std::net::TcpStream::connect(&addr).expect("connect");
            s.write_all(request(&bogus, &format!("stall-{i}")).as_bytes())
                .expect("write");
            if i % 2 == 1 {
                // Half send the start of a body, then stall.
                s.write_all(b"{\"action\":").expect("write");
            }
            s
        })
        .collect();
    std::thread::sleep(Duration::from_millis(100));
    // A genuine delivery is taken at once.
    let review = payload(
        "pull_request_review",
        Some("submitted"),
        Some(n),
        Some(&head),
    );
    let (status, text) = deliver(
        &url,
        "pull_request_review",
        "genuine-1",
        &review,
        Some(webhooks::sign(SECRET, &review)),
    );
    assert_eq!(status, 202, "{text}\n{}", server.log());
    // The stalled connections are answered 408 and closed within the body deadline.
    for s in &mut stalled {
        let a = answer(s, Duration::from_secs(3));
        assert!(a.starts_with("HTTP/1.1 408"), "{a:?}");
    }
    // A signature header of the wrong shape is refused before any body byte is awaited.
    let mut bad = std::net::TcpStream::connect(&addr).expect("connect");
    bad.write_all(request("sha256=zz", "bad-shape").as_bytes())
        .expect("write");
    let a = answer(&mut bad, Duration::from_secs(2));
    assert!(a.starts_with("HTTP/1.1 401"), "{a:?}");
    // More idle connections than serve keeps open: the oldest unauthenticated make room.
    let idle: Vec<std::net::TcpStream> = (0..300)
        .map(|_| std::net::TcpStream::connect(&addr).expect("connect"))
        .collect();
    let (status, text) = deliver(
        &url,
        "pull_request_review",
        "genuine-2",
        &review,
        Some(webhooks::sign(SECRET, &review)),
    );
    assert_eq!(status, 202, "{text}\n{}", server.log());
    assert!(
        server.log().contains("closed to make room"),
        "{}",
        server.log()
    );
    drop(idle);
    // The evaluations those deliveries started read bob's comment and recorded his rejection,
    // so deleting it now withdraws nothing, though serve never saw its own delivery.
    wait_for("the veto's status", &server, || {
        hub.status(&head).is_some_and(|(s, _)| s == "failure")
    });
    assert!(
        start.elapsed() < Duration::from_secs(15),
        "{:?}",
        start.elapsed()
    );
    drop(server);
    hub.emu.delete_comment(reject["id"].as_u64().expect("id"));
    let merge = hub.run(BOT, &["merge", "--pr", &n.to_string()]).code(1);
    assert!(merge.stdout.contains("E_VETOED"), "{merge:?}");
    assert_eq!(hub.emu.pull(n)["merged"], false);
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
