//! `serve`'s connection slots against connections that cost nothing: an attacker that only opens
//! TCP connections, as fast as it can, sending no bytes, once closed GitHub's deliveries whose
//! body arrived a moment after their headers (the oldest unproven connection was closed to make
//! room), so a rejection was lost. Whom to close is chosen by what each connection has shown.
//! Real sockets on loopback, where the attacker and GitHub share a peer address.

use std::collections::VecDeque;
use std::io::Write;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::github::vetoes::comment_delivery;
use crate::github::{answer, bobs_rejection, wait_for};
use crate::support::hub::{Hub, BOT, SECRET};
use crate::support::webhooks;

/// Opens connections that send nothing, as fast as it can, until stopped; keeps the newest
/// open. Counts them.
struct Flood {
    stop: Arc<AtomicBool>,
    opened: Arc<AtomicUsize>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Flood {
    fn start(addr: &str) -> Flood {
        let stop = Arc::new(AtomicBool::new(false));
        let opened = Arc::new(AtomicUsize::new(0));
        let threads = (0..3)
            .map(|_| {
                let (s, o, addr) = (stop.clone(), opened.clone(), addr.to_string());
                std::thread::spawn(move || {
                    let mut open = VecDeque::new();
                    while !s.load(Ordering::Relaxed) {
                        if let Ok(c) = TcpStream::connect(&addr) {
                            open.push_back(c);
                            o.fetch_add(1, Ordering::Relaxed);
                        }
                        if open.len() > 1_000 {
                            open.pop_front();
                        }
                    }
                })
            })
            .collect();
        Flood {
            stop,
            opened,
            threads,
        }
    }

    fn opened(&self) -> usize {
        self.opened.load(Ordering::Relaxed)
    }
}

impl Drop for Flood {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// A signed delivery whose body arrives `gap` after its headers; what it was answered.
fn delivered_after(addr: &str, id: &str, body: &[u8], gap: Duration) -> String {
    let mut s = TcpStream::connect(addr).expect("connect");
    let head = format!(
        "POST / HTTP/1.1\r\nHost: gate\r\nX-GitHub-Event: issue_comment\r\nX-GitHub-Delivery: {id}\r\nX-Hub-Signature-256: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        webhooks::sign(SECRET, body),
        body.len()
    );
    if s.write_all(head.as_bytes()).is_err() {
        return String::new();
    }
    std::thread::sleep(gap);
    if s.write_all(body).is_err() {
        return String::new();
    }
    answer(&mut s, Duration::from_secs(10))
}

#[test]
fn a_flood_of_silent_connections_cannot_close_a_signed_rejection_whose_body_is_arriving() {
    let hub = Hub::new();
    let n = hub.submitted();
    hub.approve(n, "alice", &[]).ok();
    hub.approve(n, "bob", &["--reject"]).ok();
    let reject = bobs_rejection(&hub, n);
    let head = hub.head(n);
    let (server, url) = hub.serve_with(&["--header-timeout-ms", "1000"]);
    let addr = url.strip_prefix("http://").expect("http url").to_string();
    // One connection sends part of its headers and stalls (slowloris).
    let mut partial = TcpStream::connect(&addr).expect("connect");
    partial
        .write_all(b"POST / HTTP/1.1\r\nHost: gate\r\nX-GitHub-Event: issue_comment\r\n")
        .expect("write");
    // When it was closed, and what it was answered, measured as it happens.
    let opened_at = Instant::now();
    let cut = std::thread::spawn(move || {
        let a = answer(&mut partial, Duration::from_secs(10));
        (a, opened_at.elapsed())
    });
    let flood = Flood::start(&addr);
    let start = Instant::now();
    while flood.opened() < 1_000 {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the flood opened {} connections",
            flood.opened()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // GitHub delivers bob's rejection, its body 0.3 s after its headers: taken in.
    let created = comment_delivery(n, &reject, "created");
    let a = delivered_after(
        &addr,
        "reject-created",
        &created,
        Duration::from_millis(300),
    );
    assert!(a.starts_with("HTTP/1.1 202"), "{a:?}\n{}", server.log());
    // Someone deletes bob's comment; GitHub delivers the deletion the same way: taken in.
    hub.emu.delete_comment(reject["id"].as_u64().expect("id"));
    let deleted = comment_delivery(n, &reject, "deleted");
    let a = delivered_after(
        &addr,
        "reject-deleted",
        &deleted,
        Duration::from_millis(300),
    );
    assert!(a.starts_with("HTTP/1.1 202"), "{a:?}\n{}", server.log());
    // The partial headers were cut off by the 1 s header deadline (or closed to make room).
    let (a, after) = cut.join().expect("the partial connection");
    assert!(
        a.is_empty() || a.starts_with("HTTP/1.1 408"),
        "{a:?}\n{}",
        server.log()
    );
    assert!(after < Duration::from_secs(4), "{after:?}");
    drop(flood);
    assert!(
        server.log().contains("closed to make room"),
        "the flood never filled the slots:\n{}",
        server.log()
    );
    wait_for("the veto's status", &server, || {
        hub.status(&head).is_some_and(|(s, _)| s == "failure")
    });
    drop(server);
    let merge = hub.run(BOT, &["merge", "--pr", &n.to_string()]).code(1);
    assert!(merge.stdout.contains("E_VETOED"), "{merge:?}");
    assert_eq!(hub.emu.pull(n)["merged"], false);
}
