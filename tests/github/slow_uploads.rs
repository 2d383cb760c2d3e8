//! `serve`'s body budget against uploads that never finish: seven unsigned uploads that stop
//! one byte short of their declared length once held the whole 32 MB budget, so GitHub's
//! delivery of a rejection, and of its comment's deletion, were answered 503 and `merge --pr`
//! merged over the veto. Real sockets on loopback, where the attacker and GitHub share a peer
//! address.

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::github::vetoes::comment_delivery;
use crate::github::{answer, bobs_rejection, deliver, wait_for};
use crate::support::hub::{Hub, BOT, SECRET};
use crate::support::webhooks;

const MAX_BODY: usize = 5 * 1024 * 1024;
const BUDGET: usize = 32 * 1024 * 1024;
const PEER_SHARE: usize = 16 * 1024 * 1024;

/// Uploads declaring each of `sizes`, sent in parallel, each stalled one byte short.
fn stall_all(addr: &str, sizes: &[usize], first: usize) -> Vec<TcpStream> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = sizes
            .iter()
            .enumerate()
            .map(|(i, &declared)| {
                scope.spawn(move || stalled_upload(addr, declared, declared - 1, first + i))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("attacker"))
            .collect()
    })
}

/// Opens an unsigned (well-formed, wrong signature) upload declaring `declared` bytes and
/// sends `sent` of them; the connection stays open, stalled.
fn stalled_upload(addr: &str, declared: usize, sent: usize, i: usize) -> TcpStream {
    let mut s = TcpStream::connect(addr).expect("connect");
    let head = format!(
        "POST / HTTP/1.1\r\nHost: gate\r\nX-GitHub-Event: issue_comment\r\nX-GitHub-Delivery: slow-{i}\r\nX-Hub-Signature-256: sha256={}\r\nContent-Type: application/json\r\nContent-Length: {declared}\r\n\r\n",
        "0".repeat(64)
    );
    // The server may drop an upload (evicting it) before all of it is written.
    let _ = s.write_all(head.as_bytes());
    let _ = s.write_all(&vec![b' '; sent]);
    s
}

#[test]
fn uploads_that_stop_short_cannot_hold_the_body_budget_against_a_signed_rejection() {
    let hub = Hub::new();
    let n = hub.submitted();
    hub.approve(n, "alice", &[]).ok();
    hub.approve(n, "bob", &["--reject"]).ok();
    let reject = bobs_rejection(&hub, n);
    let head = hub.head(n);
    // Deadlines far away, so only the budget's own rules can make room in time.
    let (server, url) =
        hub.serve_with(&["--body-timeout-ms", "60000", "--rate-window-ms", "60000"]);
    let addr = url.strip_prefix("http://").expect("http url").to_string();
    let start = Instant::now();
    // First the attacker fills what one peer address may hold (16 MB, less 16 bytes): GitHub
    // shares that address here, so a per-peer share alone would refuse it.
    let mut share = vec![MAX_BODY; 3];
    share.push(PEER_SHARE - 16 - 3 * (MAX_BODY - 1) + 1);
    let attackers = stall_all(&addr, &share, 0);
    // GitHub delivers bob's rejection: taken in.
    let created = comment_delivery(n, &reject, "created");
    let (status, text) = deliver(
        &url,
        "issue_comment",
        "reject-created",
        &created,
        Some(webhooks::sign(SECRET, &created)),
    );
    assert_eq!(status, 202, "{text}\n{}", server.log());
    drop(attackers);
    // Then seven uploads that would fill the whole budget (32 MB, less 16 bytes).
    let mut sizes = vec![MAX_BODY; 6];
    sizes.push(BUDGET - 16 - 6 * (MAX_BODY - 1) + 1);
    let attackers = stall_all(&addr, &sizes, 10);
    // Someone deletes bob's comment; GitHub delivers the deletion: taken in.
    hub.emu.delete_comment(reject["id"].as_u64().expect("id"));
    let deleted = comment_delivery(n, &reject, "deleted");
    let (status, text) = deliver(
        &url,
        "issue_comment",
        "reject-deleted",
        &deleted,
        Some(webhooks::sign(SECRET, &deleted)),
    );
    assert_eq!(status, 202, "{text}\n{}", server.log());
    assert!(
        start.elapsed() < Duration::from_secs(20),
        "{:?}",
        start.elapsed()
    );
    assert!(
        server.log().contains("dropped to make room"),
        "{}",
        server.log()
    );
    wait_for("the veto's status", &server, || {
        hub.status(&head).is_some_and(|(s, _)| s == "failure")
    });
    drop(attackers);
    drop(server);
    let merge = hub.run(BOT, &["merge", "--pr", &n.to_string()]).code(1);
    assert!(merge.stdout.contains("E_VETOED"), "{merge:?}");
    assert_eq!(hub.emu.pull(n)["merged"], false);
}

#[test]
fn an_upload_slower_than_the_minimum_rate_is_dropped_before_its_deadline() {
    let hub = Hub::new();
    let (server, url) = hub.serve_with(&["--body-timeout-ms", "60000", "--rate-window-ms", "300"]);
    let addr = url.strip_prefix("http://").expect("http url").to_string();
    let start = Instant::now();
    // One stops one byte short; one trickles a byte at a time, slower than 16 KiB/s.
    let mut short = stalled_upload(&addr, 1_000_000, 999_999, 1);
    let mut trickle = stalled_upload(&addr, 1_000_000, 1, 2);
    for _ in 0..5 {
        std::thread::sleep(Duration::from_millis(100));
        let _ = trickle.write_all(b" ");
    }
    for s in [&mut short, &mut trickle] {
        let a = answer(s, Duration::from_secs(5));
        assert!(a.starts_with("HTTP/1.1 408"), "{a:?}\n{}", server.log());
    }
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    assert!(
        server.log().contains("slower than the minimum rate"),
        "{}",
        server.log()
    );
}
