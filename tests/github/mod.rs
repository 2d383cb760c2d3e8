//! Atelier on GitHub (the REST emulator and vendored webhooks): submit, authority, vetoes,
//! merges, `serve`, errors, and the same loop on both forges.

mod authority;
mod connection_slots;
mod emulator;
mod errors;
mod fixtures;
mod merges;
mod one_loop;
mod records;
mod serve;
mod slow_uploads;
mod submit;
mod vetoes;

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::hub::{Hub, Served, REPO};
use crate::support::webhooks::{self, Readdress};

/// POSTs a delivery; returns the HTTP status and body.
pub fn deliver(
    url: &str,
    event: &str,
    delivery: &str,
    body: &[u8],
    signature: Option<String>,
) -> (u16, String) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut req = agent
        .post(&format!("{url}/"))
        .header("X-GitHub-Event", event)
        .header("X-GitHub-Delivery", delivery)
        .header("Content-Type", "application/json");
    if let Some(s) = signature {
        req = req.header("X-Hub-Signature-256", &s);
    }
    // A server that refuses early may close the connection while the body is still being sent.
    let mut resp = match req.send(body) {
        Ok(r) => r,
        Err(e) => return (0, e.to_string()),
    };
    let status = resp.status().as_u16();
    (status, resp.body_mut().read_to_string().unwrap_or_default())
}

/// A real example payload for `event`/`action`, re-addressed to pull request `n`, as bytes.
pub(crate) fn payload(
    event: &str,
    action: Option<&str>,
    n: Option<u64>,
    head: Option<&str>,
) -> Vec<u8> {
    let mut v = webhooks::example(event, action);
    let mut to = Readdress::to(REPO);
    to.pull = n;
    to.head_sha = head;
    to.push_ref = (event == "push").then_some("refs/heads/main");
    webhooks::readdress(&mut v, &to);
    if event == "issue_comment" {
        // The package's issue_comment examples are on plain issues; on a pull request GitHub
        // adds this link (GitHub's webhook docs), which is how a receiver tells them apart.
        let n = n.expect("a pull request number");
        v["issue"]["pull_request"] = serde_json::json!({
            "url": format!("https://api.github.com/repos/{REPO}/pulls/{n}"),
            "html_url": format!("https://github.com/{REPO}/pull/{n}"),
            "diff_url": format!("https://github.com/{REPO}/pull/{n}.diff"),
            "patch_url": format!("https://github.com/{REPO}/pull/{n}.patch"),
            "merged_at": null
        });
    }
    serde_json::to_vec(&v).expect("json")
}

#[track_caller]
pub(crate) fn wait_for(what: &str, server: &Served, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "timed out waiting for {what}; the server's log:\n{}",
            server.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Opens a pull request through the API, as a person would in GitHub's web UI.
pub(crate) fn open_pull(url: &str, token: &str, title: &str, head: &str, base: &str) -> u64 {
    let mut resp = ureq::post(&format!("{url}/repos/{REPO}/pulls"))
        .header("Authorization", &format!("Bearer {token}"))
        .send_json(serde_json::json!({"title": title, "head": head, "base": base}))
        .expect("create pull request");
    let v: Value = resp.body_mut().read_json().expect("json");
    v["number"].as_u64().expect("number")
}

/// Bob's rejection comment on pull request `n`.
pub(crate) fn bobs_rejection(hub: &Hub, n: u64) -> Value {
    hub.emu
        .comments(n)
        .into_iter()
        .find(|c| {
            c["user"]["login"] == "bob"
                && c["body"]
                    .as_str()
                    .unwrap_or("")
                    .starts_with("/atelier reject")
        })
        .expect("bob's rejection comment")
}

/// What a raw connection was answered (the status line on), or "" if it was closed unanswered;
/// waits at most `within`.
pub(crate) fn answer(s: &mut std::net::TcpStream, within: Duration) -> String {
    use std::io::Read;
    s.set_read_timeout(Some(within)).expect("timeout");
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}
