//! The governed loop on GitHub, against the REST emulator (a real HTTP server over a real bare
//! repository): submit, approvals as signed comments, the gate as a status, webhooks, merges
//! through the API, and every refusal the trust model promises.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::github::{Emulator, Fault};
use crate::support::webhooks::{self, Readdress};
use crate::support::{Env, Run};

const REPO: &str = "acme/widgets";
const BOT: &str = "bot-token";
const SECRET: &str = "webhook-test-secret";

/// An adopted repository whose forge is the emulator, with `main` pushed to its bare remote.
pub struct Hub {
    pub env: Env,
    pub remote: PathBuf,
    pub emu: Emulator,
    _remote_dir: tempfile::TempDir,
}

impl Hub {
    pub fn new() -> Hub {
        Hub::with_merge("manual")
    }

    pub fn with_merge(merge: &str) -> Hub {
        Hub::build(crate::support::Setup::default(), merge)
    }

    pub fn build(mut setup: crate::support::Setup, merge: &str) -> Hub {
        let dir = tempfile::tempdir().expect("temp dir");
        let remote = dir.path().join("remote.git");
        let out = std::process::Command::new("git")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", dir.path())
            .args(["init", "-q", "--bare", "-b", "main"])
            .arg(&remote)
            .output()
            .expect("git init");
        assert!(out.status.success());
        let emu = Emulator::start(
            REPO,
            &remote,
            &[
                (BOT, "atelier-bot"),
                ("alice-token", "alice"),
                ("bob-token", "bob"),
                ("mallory-token", "mallory"),
            ],
        );
        // The GitHub configuration is part of the adoption commit, as it would be for real.
        setup.config_replace = vec![
            ("kind = \"local\"".into(), "kind = \"github\"".into()),
            (
                "repository = \"local/repo\"".into(),
                format!(
                    "repository = \"{REPO}\"\napi_url = \"{}\"\nremote = \"origin\"\nmerge = \"{merge}\"",
                    emu.url
                ),
            ),
        ];
        let env = Env::with(setup);
        env.git(&["remote", "add", "origin", remote.to_str().expect("utf8")]);
        env.git(&["push", "-q", "origin", "main"]);
        Hub {
            env,
            remote,
            emu,
            _remote_dir: dir,
        }
    }

    /// Runs atelier in `dir` with a GitHub token.
    pub fn run_in(&self, dir: &Path, token: &str, args: &[&str]) -> Run {
        let mut c = self.env.command(crate::support::bin());
        c.arg("-C")
            .arg(dir)
            .args(args)
            .env("GITHUB_TOKEN", token)
            .env("ATELIER_GITHUB_BACKOFF_MS", "20");
        let o = c.output().expect("run atelier");
        Run {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }

    pub fn run(&self, token: &str, args: &[&str]) -> Run {
        self.run_in(&self.env.repo, token, args)
    }

    /// Proposes a code change and submits it; returns the pull request number.
    pub fn submitted(&self) -> u64 {
        let id = self.env.propose_code();
        let out = self.run(BOT, &["submit", &id, "--json"]).ok();
        out.json()["pull"].as_u64().expect("pull number")
    }

    /// `who` signs and posts a token on pull request `n`.
    pub fn approve(&self, n: u64, who: &str, extra: &[&str]) -> Run {
        let key = self.env.key(who);
        let mut args = vec![
            "approve",
            "--pr",
            &*Box::leak(n.to_string().into_boxed_str()),
            "--key",
            key.to_str().expect("utf8"),
            "--post",
        ];
        args.extend_from_slice(extra);
        self.run(&format!("{who}-token"), &args)
    }

    pub fn gate(&self, n: u64) -> (i32, Value) {
        let run = self.run(BOT, &["gate", "--pr", &n.to_string(), "--json"]);
        assert!(run.code == 0 || run.code == 1, "gate: {run:?}");
        (run.code, run.json())
    }

    pub fn head(&self, n: u64) -> String {
        self.emu.pull(n)["head"]["sha"]
            .as_str()
            .expect("head sha")
            .to_string()
    }

    /// The newest `atelier/governance` status on `sha`.
    pub fn status(&self, sha: &str) -> Option<(String, String)> {
        self.emu
            .statuses(sha)
            .into_iter()
            .find(|s| s["context"] == "atelier/governance")
            .map(|s| {
                (
                    s["state"].as_str().unwrap_or("").to_string(),
                    s["description"].as_str().unwrap_or("").to_string(),
                )
            })
    }

    /// A clone of the remote, as another person's machine would have.
    pub fn clone_remote(&self, name: &str) -> PathBuf {
        let dir = self.env.tmp.path().join(name);
        self.env.git(&[
            "clone",
            "-q",
            self.remote.to_str().expect("utf8"),
            dir.to_str().expect("utf8"),
        ]);
        dir
    }

    /// An auditor's fresh clone of the remote, with `refs/atelier/ledger` fetched.
    pub fn auditor_clone(&self) -> PathBuf {
        let dir = self.clone_remote(&format!("auditor-{}", rand_suffix()));
        self.git_in(
            &dir,
            &[
                "fetch",
                "-q",
                "origin",
                "refs/atelier/ledger:refs/atelier/ledger",
            ],
        );
        dir
    }

    /// Runs git in `dir` (another clone), asserting success.
    #[track_caller]
    pub fn git_in(&self, dir: &Path, args: &[&str]) {
        let out = self
            .env
            .command("git")
            .current_dir(dir)
            .args(args)
            .output()
            .expect("git");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Pushes one more commit onto a proposal branch, as someone with push access would.
    pub fn push_onto(&self, branch: &str) {
        let dir = self.clone_remote(&format!("pusher-{}", rand_suffix()));
        let git = |args: &[&str]| self.git_in(&dir, args);
        git(&["checkout", "-q", branch]);
        std::fs::write(dir.join("src/extra.rs"), "// after approval\n").expect("write");
        git(&["add", "-A"]);
        git(&[
            "-c",
            "user.email=m@example.org",
            "-c",
            "user.name=M",
            "commit",
            "-q",
            "-m",
            "more",
        ]);
        git(&["push", "-q", "origin", branch]);
    }

    /// Starts `atelier serve` on a free port; returns the child and its base URL.
    pub fn serve(&self) -> (Served, String) {
        self.serve_with(&[])
    }

    /// `serve` with more arguments.
    pub fn serve_with(&self, extra: &[&str]) -> (Served, String) {
        let mut c = self.env.command(crate::support::bin());
        c.arg("-C")
            .arg(&self.env.repo)
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(extra)
            .env("GITHUB_TOKEN", BOT)
            .env("ATELIER_WEBHOOK_SECRET", SECRET)
            .env("ATELIER_GITHUB_BACKOFF_MS", "20");
        let log = self
            .env
            .tmp
            .path()
            .join(format!("serve-{}.log", rand_suffix()));
        c.stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).expect("log file"));
        let mut child = c.spawn().expect("start serve");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("read");
        let url = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("serve said {line:?}"))
            .to_string();
        (Served(child, log), url)
    }
}

/// Stops the server when dropped; `log()` reads what it wrote to stderr.
pub struct Served(Child, PathBuf);

impl Served {
    /// What the server wrote to stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.1).unwrap_or_default()
    }

    /// Stops the server (SIGTERM) and returns its log.
    pub fn stop(mut self) -> String {
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let _ = self.0.wait();
        self.log()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn rand_suffix() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    N.fetch_add(1, Ordering::Relaxed).to_string()
}

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
fn payload(event: &str, action: Option<&str>, n: Option<u64>, head: Option<&str>) -> Vec<u8> {
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
fn wait_for(what: &str, server: &Served, mut f: impl FnMut() -> bool) {
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

fn codes(v: &Value) -> Vec<String> {
    crate::support::token_codes(v)
}

#[test]
fn the_whole_loop_on_github_ends_in_a_verified_history() {
    let hub = Hub::new();
    let n = hub.submitted();
    let pr = hub.emu.pull(n);
    assert_eq!(pr["head"]["ref"], "atelier/proposals/1");
    assert!(pr["body"]
        .as_str()
        .expect("body")
        .contains("Atelier proposal 1"));
    let labels: Vec<&str> = pr["labels"]
        .as_array()
        .expect("labels")
        .iter()
        .filter_map(|l| l["name"].as_str())
        .collect();
    assert_eq!(labels, ["atelier-proposal"]);
    // Submitting again updates the same pull request.
    let again = hub.run(BOT, &["submit", "1", "--json"]).ok().json();
    assert_eq!(again["pull"].as_u64(), Some(n));
    assert_eq!(again["created"], false);

    // Alice approves from this clone; bob from his own fresh clone.
    hub.approve(n, "alice", &[]).ok();
    let bob_clone = hub.clone_remote("bob");
    let bob = hub.run_in(
        &bob_clone,
        "bob-token",
        &[
            "approve",
            "--pr",
            &n.to_string(),
            "--key",
            hub.env.key("bob").to_str().expect("utf8"),
            "--post",
        ],
    );
    let bob = bob.ok();
    assert!(
        bob.stdout.starts_with("/atelier approve\n"),
        "{}",
        bob.stdout
    );
    assert_eq!(hub.emu.comments(n).len(), 2);

    // A webhook delivery (a real example, re-addressed and signed) makes the server run the gate.
    let (server, url) = hub.serve();
    let body = payload("issue_comment", Some("created"), Some(n), None);
    let (status, _) = deliver(
        &url,
        "issue_comment",
        "d-1",
        &body,
        Some(webhooks::sign(SECRET, &body)),
    );
    assert_eq!(status, 202);
    let head = hub.head(n);
    let summarised = || {
        hub.emu
            .comments(n)
            .iter()
            .any(|c| c["body"].as_str().unwrap_or("").contains("may merge"))
    };
    wait_for("a green status and its summary", &server, || {
        hub.status(&head).is_some_and(|(s, _)| s == "success") && summarised()
    });
    let (_, desc) = hub.status(&head).expect("status");
    assert!(
        desc.contains("alice@example.org") && desc.contains("bob@example.org"),
        "{desc}"
    );
    // One summary comment, kept up to date.
    let summaries: Vec<Value> = hub
        .emu
        .comments(n)
        .into_iter()
        .filter(|c| {
            c["body"]
                .as_str()
                .unwrap_or("")
                .starts_with("<!-- atelier:gate-summary -->")
        })
        .collect();
    assert_eq!(summaries.len(), 1);
    assert!(summaries[0]["body"]
        .as_str()
        .expect("body")
        .contains("may merge"));
    drop(server);

    let merged = hub
        .run(BOT, &["merge", "--pr", &n.to_string(), "--json"])
        .ok()
        .json();
    let commit = merged["commit"].as_str().expect("commit").to_string();
    let pr = hub.emu.pull(n);
    assert_eq!(pr["merged"], true);
    assert_eq!(pr["merge_commit_sha"].as_str(), Some(commit.as_str()));

    // An auditor's fresh clone, with the ledger fetched, verifies the whole history.
    let audit = hub.auditor_clone();
    let verify = hub.env.atelier_in(&audit, &["audit", "verify"]);
    assert_eq!(verify.code, 0, "{verify:?}");
    let log = hub.env.atelier_in(&audit, &["audit", "log"]).ok();
    assert!(
        log.stdout.contains("submitted as pull request #1"),
        "{}",
        log.stdout
    );
    assert!(
        log.stdout.contains(&format!("merged as {commit}")),
        "{}",
        log.stdout
    );
}

#[test]
fn the_bots_own_key_a_github_review_and_a_label_carry_no_authority() {
    let hub = Hub::new();
    let n = hub.submitted();
    // The bot account posts a token signed with the gate's own key.
    let gate_key = hub.env.gate_key();
    let posted = hub.run(
        BOT,
        &[
            "approve",
            "--pr",
            &n.to_string(),
            "--key",
            gate_key.to_str().expect("utf8"),
            "--post",
        ],
    );
    let posted = posted.code(1);
    assert!(
        posted.stderr.contains("will not count"),
        "{}",
        posted.stderr
    );
    // A GitHub "APPROVE" review without a token, and an `approved` label.
    hub.emu.add_review(n, "alice", "APPROVED", "LGTM, ship it");
    hub.emu.add_label(n, "approved");
    let (code, v) = hub.gate(n);
    assert_eq!(code, 1);
    assert_eq!(codes(&v), ["E_GATE_KEY_SIGNER"]);
    assert_eq!(v["approvers"].as_array().map(Vec::len), Some(0));
    assert!(crate::support::unmet(&v).contains(&"E_QUORUM_NOT_MET".to_string()));
    let (state, desc) = hub.status(&hub.head(n)).expect("status");
    assert_eq!(state, "pending");
    assert!(desc.starts_with("E_QUORUM_NOT_MET"), "{desc}");
    assert!(desc.chars().count() <= 140);
}

#[test]
fn the_bot_account_signing_with_a_key_listed_under_bots_never_counts() {
    let policy = atelier::governance::policy::DEFAULT_GOVERNANCE_TOML
        .replace("bots = []", "bots = [\"bot@example.org\"]");
    assert!(policy.contains("bot@example.org"));
    let hub = Hub::build(
        crate::support::Setup {
            governance: policy,
            principals: vec!["alice", "bob", "bot"],
            ..Default::default()
        },
        "manual",
    );
    let n = hub.submitted();
    let key = hub.env.key("bot");
    hub.run(
        BOT,
        &[
            "approve",
            "--pr",
            &n.to_string(),
            "--key",
            key.to_str().expect("utf8"),
            "--post",
        ],
    )
    .code(1);
    let (code, v) = hub.gate(n);
    assert_eq!(code, 1);
    assert_eq!(codes(&v), ["E_BOT_SIGNER"]);
    assert_eq!(v["approvers"], serde_json::json!([]));
    // A person's approval still counts next to it.
    hub.approve(n, "alice", &[]).ok();
    let (code, v) = hub.gate(n);
    assert_eq!(code, 0);
    assert_eq!(codes(&v), ["E_BOT_SIGNER", "OK"]);
    assert_eq!(v["approvers"], serde_json::json!(["alice@example.org"]));
}

#[test]
fn a_token_edited_inside_its_comment_stops_counting() {
    let hub = Hub::new();
    let n = hub.submitted();
    hub.approve(n, "bob", &[]).ok();
    // Before any evaluation, someone with edit rights extends the token's expiry by a day.
    let bob = hub
        .emu
        .comments(n)
        .into_iter()
        .find(|c| c["user"]["login"] == "bob")
        .expect("bob's comment");
    let body = bob["body"].as_str().expect("body");
    let expires = body
        .lines()
        .find(|l| l.starts_with("expires "))
        .expect("an expires line");
    let edited = body.replace(expires, &expires.replace("-12-06T", "-12-07T"));
    assert_ne!(edited, body, "{expires}");
    hub.emu
        .edit_comment(bob["id"].as_u64().expect("id"), &edited);
    let (code, v) = hub.gate(n);
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["approvers"], serde_json::json!([]));
    let token_codes = codes(&v);
    assert_eq!(token_codes.len(), 1);
    assert!(token_codes[0].contains("SIGNATURE"), "{token_codes:?}");
    // A token the gate already recorded stays what it was signed as: editing the comment
    // afterwards changes nothing (a withdrawal is a signed rejection).
    hub.approve(n, "alice", &[]).ok();
    assert_eq!(hub.gate(n).0, 0);
    let alice = hub
        .emu
        .comments(n)
        .into_iter()
        .find(|c| c["user"]["login"] == "alice")
        .expect("alice's comment");
    hub.emu
        .edit_comment(alice["id"].as_u64().expect("id"), "changed my mind");
    let (code, v) = hub.gate(n);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["approvers"], serde_json::json!(["alice@example.org"]));
}

#[test]
fn a_push_after_approval_makes_every_token_stale() {
    let hub = Hub::new();
    let n = hub.submitted();
    hub.approve(n, "alice", &[]).ok();
    hub.approve(n, "bob", &[]).ok();
    assert_eq!(hub.gate(n).0, 0);
    let approved_head = hub.head(n);
    // The proposal's owner adds a commit and submits again.
    hub.env.git(&["checkout", "-q", "atelier/proposals/1"]);
    hub.env.write("src/extra.rs", "// after approval\n");
    hub.env.git(&["add", "-A"]);
    hub.env.git(&["commit", "-q", "-m", "One more thing"]);
    hub.env.git(&["checkout", "-q", "main"]);
    let again = hub.run(BOT, &["submit", "1", "--json"]).ok().json();
    assert_eq!(again["pull"].as_u64(), Some(n));
    let (code, v) = hub.gate(n);
    assert_eq!(code, 1);
    assert_eq!(codes(&v), ["E_STALE_HEAD", "E_STALE_HEAD"]);
    assert_ne!(hub.head(n), approved_head);
    assert_eq!(hub.status(&hub.head(n)).expect("status").0, "pending");
    // And merge refuses too: it always re-runs the gate.
    let merge = hub.run(BOT, &["merge", "--pr", &n.to_string()]).code(1);
    assert!(merge.stderr.contains("not merged"), "{}", merge.stderr);
    assert_eq!(hub.emu.pull(n)["merged"], false);
}

#[test]
fn a_commit_pushed_onto_a_proposal_by_hand_cannot_pass_even_with_approvals() {
    let hub = Hub::new();
    let n = hub.submitted();
    // Bob can push to the repository: he adds his own commit to the proposal, then approves it
    // alone (the rule needs one approval, and the recorded proposer is someone else).
    hub.push_onto("atelier/proposals/1");
    let bob = hub.approve(n, "bob", &[]).code(1);
    assert!(bob.stderr.contains("E_NOT_SUBMITTED"), "{}", bob.stderr);
    let gate = hub.run(BOT, &["gate", "--pr", &n.to_string()]).code(1);
    assert!(gate.stderr.contains("E_NOT_SUBMITTED"), "{}", gate.stderr);
    assert_eq!(hub.status(&hub.head(n)).expect("status").0, "failure");
    let merge = hub.run(BOT, &["merge", "--pr", &n.to_string()]).code(1);
    assert!(merge.stderr.contains("E_NOT_SUBMITTED"), "{}", merge.stderr);
    assert_eq!(hub.emu.pull(n)["merged"], false);
}

#[test]
fn the_gate_machine_never_takes_in_ledger_entries_it_did_not_write() {
    let hub = Hub::new();
    let n = hub.submitted();
    hub.approve(n, "alice", &[]).ok();
    hub.approve(n, "bob", &["--reject"]).ok();
    assert_eq!(hub.gate(n).0, 1);
    hub.run(BOT, &["merge", "--pr", &n.to_string()]).code(1); // pushes the ledger with the veto
                                                              // Someone with push access fast-forwards the remote ledger to a commit whose tree is an
                                                              // older ledger (from before the veto was recorded).
    let dir = hub.clone_remote("forger");
    hub.git_in(
        &dir,
        &[
            "fetch",
            "-q",
            "origin",
            "refs/atelier/ledger:refs/atelier/ledger",
        ],
    );
    let out = hub
        .env
        .command("git")
        .current_dir(&dir)
        .args([
            "-c",
            "user.email=f@example.org",
            "-c",
            "user.name=F",
            "commit-tree",
            "refs/atelier/ledger~2^{tree}",
            "-p",
            "refs/atelier/ledger",
            "-m",
            "x",
        ])
        .output()
        .expect("git");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let forged = String::from_utf8_lossy(&out.stdout).trim().to_string();
    hub.git_in(
        &dir,
        &[
            "push",
            "-q",
            "origin",
            &format!("{forged}:refs/atelier/ledger"),
        ],
    );
    let merge = hub.run(BOT, &["merge", "--pr", &n.to_string()]).code(1);
    assert!(
        merge.stderr.contains("E_LEDGER_DIVERGED"),
        "{}",
        merge.stderr
    );
    assert_eq!(hub.emu.pull(n)["merged"], false);
    // A fresh clone (an approver, an Actions runner) refuses the forged ledger too: its
    // checkpoint does not cover its entries.
    let runner = hub.clone_remote("runner");
    let gate = hub.run_in(&runner, BOT, &["gate", "--pr", &n.to_string()]);
    assert_eq!(gate.code, 1, "{gate:?}");
    assert!(
        gate.stderr.contains("E_LEDGER_UNVERIFIED") && gate.stderr.contains("rewound"),
        "{}",
        gate.stderr
    );
}

#[test]
fn junk_in_comments_neither_wedges_the_gate_nor_reaches_the_ledger() {
    let hub = Hub::new();
    let n = hub.submitted();
    let junk = "atelier-approval k\n-----BEGIN SSH SIGNATURE-----\n-----END SSH SIGNATURE-----\n"
        .repeat(700);
    for _ in 0..4 {
        hub.emu.add_comment(n, "mallory", &junk);
    }
    hub.approve(n, "alice", &[]).ok();
    let (code, v) = hub.gate(n);
    assert_eq!(code, 0, "junk must not stop a valid approval");
    assert_eq!(v["approvers"], serde_json::json!(["alice@example.org"]));
    let summary = hub
        .emu
        .comments(n)
        .into_iter()
        .find(|c| {
            c["body"]
                .as_str()
                .unwrap_or("")
                .starts_with("<!-- atelier:gate-summary -->")
        })
        .expect("summary");
    assert!(summary["body"]
        .as_str()
        .expect("body")
        .contains("2800 token(s) not from a key"));
    let log = hub.env.atelier(&["audit", "log", "--json"]).ok();
    assert_eq!(
        log.stdout.matches("token-recorded").count(),
        1,
        "only alice's token is recorded"
    );
    hub.run(BOT, &["merge", "--pr", &n.to_string()]).ok();
}

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
fn a_head_that_moves_at_merge_time_is_refused_not_retried() {
    let hub = Hub::new();
    let n = hub.submitted();
    hub.approve(n, "alice", &[]).ok();
    hub.approve(n, "bob", &[]).ok();
    hub.emu.inject(Fault::MoveHeadBeforeMerge);
    let run = hub.run(BOT, &["merge", "--pr", &n.to_string()]).code(1);
    assert!(run.stderr.contains("E_HEAD_MOVED"), "{}", run.stderr);
    assert_eq!(hub.emu.pull(n)["merged"], false);
    let merges = hub
        .emu
        .log()
        .iter()
        .filter(|l| l.method == "PUT" && l.path.contains("/merge"))
        .count();
    assert_eq!(merges, 1, "never retried with a new head");
}

#[test]
fn a_merge_that_lands_a_different_tree_raises_an_alarm() {
    let hub = Hub::new();
    let n = hub.submitted();
    hub.approve(n, "alice", &[]).ok();
    hub.approve(n, "bob", &[]).ok();
    hub.emu.inject(Fault::LandDifferentTree);
    let run = hub.run(BOT, &["merge", "--pr", &n.to_string()]).code(1);
    assert!(
        run.stderr.contains("E_LANDED_TREE_MISMATCH"),
        "{}",
        run.stderr
    );
    assert!(hub
        .emu
        .comments(n)
        .iter()
        .any(|c| c["body"].as_str().unwrap_or("").contains("Atelier alarm")));
    let log = hub.env.atelier(&["audit", "log"]).ok();
    assert!(
        log.stdout.contains("ALARM E_LANDED_TREE_MISMATCH"),
        "{}",
        log.stdout
    );
    // The unapproved merge on main is what audit verify exists to catch.
    let audit = hub.auditor_clone();
    let verify = hub.env.atelier_in(&audit, &["audit", "verify"]).code(1);
    assert!(
        verify.stdout.contains("E_ALARM_RECORDED"),
        "{}",
        verify.stdout
    );
    assert!(
        verify.stdout.contains("E_UNLEDGERED_COMMIT"),
        "{}",
        verify.stdout
    );
}

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

#[test]
fn pull_requests_that_are_not_proposals_get_a_failing_status() {
    let hub = Hub::new();
    // A branch pushed by hand, opened as a pull request through the API.
    let dir = hub.clone_remote("human");
    let git = |args: &[&str]| hub.git_in(&dir, args);
    git(&["checkout", "-q", "-b", "feature"]);
    std::fs::write(dir.join("src/lib.rs"), "pub fn answer() -> u32 { 7 }\n").expect("write");
    git(&[
        "-c",
        "user.email=h@example.org",
        "-c",
        "user.name=H",
        "commit",
        "-qam",
        "by hand",
    ]);
    git(&["push", "-q", "origin", "feature"]);
    let n = open_pull(&hub.emu.url, "mallory-token", "By hand", "feature", "main");
    let run = hub.run(BOT, &["gate", "--pr", &n.to_string()]).code(1);
    assert!(run.stderr.contains("E_NOT_A_PROPOSAL"), "{}", run.stderr);
    assert_eq!(hub.status(&hub.head(n)).expect("status").0, "failure");
}

#[test]
fn the_gate_runs_read_only_where_there_is_no_gate_key() {
    let hub = Hub::new();
    let n = hub.submitted();
    hub.approve(n, "alice", &[]).ok();
    hub.approve(n, "bob", &[]).ok();
    // An Actions runner: a fresh clone, no .atelier/gate_key.
    let runner = hub.clone_remote("runner");
    let run = hub.run_in(&runner, BOT, &["gate", "--pr", &n.to_string()]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stderr.contains("no gate key here"), "{}", run.stderr);
    assert_eq!(hub.status(&hub.head(n)).expect("status").0, "success");
}

#[test]
fn approvals_can_be_signed_with_ssh_keygen_and_pasted() {
    let hub = Hub::new();
    let n = hub.submitted();
    let payload = hub
        .run(
            "alice-token",
            &["approve", "--pr", &n.to_string(), "--payload"],
        )
        .ok()
        .stdout;
    let file = hub.env.file("pr-payload", &payload);
    let out = hub
        .env
        .command("ssh-keygen")
        .args(["-Y", "sign", "-f"])
        .arg(hub.env.key("alice"))
        .args(["-n", "atelier-approval"])
        .arg(&file)
        .output()
        .expect("ssh-keygen");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sig = format!("{}.sig", file.display());
    // Without --post the comment is printed for pasting; paste it as alice would.
    let comment = hub
        .run(
            "alice-token",
            &["approve", "--pr", &n.to_string(), "--signature", &sig],
        )
        .ok()
        .stdout;
    assert!(comment.starts_with("/atelier approve"), "{comment}");
    hub.emu
        .add_comment(n, "alice", &comment.replace('\n', "\r\n"));
    let (_, v) = hub.gate(n);
    assert_eq!(
        v["approvers"],
        serde_json::json!(["alice@example.org"]),
        "{v}"
    );
}

/// Opens a pull request through the API, as a person would in GitHub's web UI.
fn open_pull(url: &str, token: &str, title: &str, head: &str, base: &str) -> u64 {
    let mut resp = ureq::post(&format!("{url}/repos/{REPO}/pulls"))
        .header("Authorization", &format!("Bearer {token}"))
        .send_json(serde_json::json!({"title": title, "head": head, "base": base}))
        .expect("create pull request");
    let v: Value = resp.body_mut().read_json().expect("json");
    v["number"].as_u64().expect("number")
}

#[test]
fn a_merge_whose_answer_was_lost_is_concluded_from_the_recorded_request() {
    let hub = Hub::new();
    let n = hub.submitted();
    hub.approve(n, "alice", &[]).ok();
    hub.approve(n, "bob", &[]).ok();
    // GitHub merges but the answer is lost, and then GitHub stops answering: atelier stops
    // with the merge requested in the ledger but not concluded.
    hub.emu.inject(Fault::MergeThenFail { then: 4 });
    let first = hub.run(BOT, &["merge", "--pr", &n.to_string()]).code(2);
    assert!(first.stderr.contains("attempts"), "{}", first.stderr);
    assert_eq!(hub.emu.pull(n)["merged"], true);
    let log = hub.env.atelier(&["audit", "log"]).ok().stdout;
    assert!(log.contains("merge of pull request #1 requested"), "{log}");
    assert!(!log.contains("merged as"), "{log}");
    // Later, the same command concludes it: it checks what landed against the request.
    let merged = hub
        .run(BOT, &["merge", "--pr", &n.to_string(), "--json"])
        .ok()
        .json();
    assert_eq!(
        merged["commit"].as_str(),
        hub.emu.pull(n)["merge_commit_sha"].as_str()
    );
    assert_eq!(
        merged["approvers"],
        serde_json::json!(["alice@example.org", "bob@example.org"])
    );
    let audit = hub.auditor_clone();
    let verify = hub.env.atelier_in(&audit, &["audit", "verify"]);
    assert_eq!(verify.code, 0, "{verify:?}");
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
fn a_branch_forced_back_to_an_earlier_submitted_head_cannot_pass() {
    let hub = Hub::new();
    let n = hub.submitted();
    hub.approve(n, "alice", &[]).ok();
    hub.approve(n, "bob", &[]).ok();
    let first = hub.head(n);
    // The owner submits a new head; someone with push access forces the branch back.
    hub.env.git(&["checkout", "-q", "atelier/proposals/1"]);
    hub.env.write("src/extra.rs", "// second head\n");
    hub.env.git(&["add", "-A"]);
    hub.env.git(&["commit", "-q", "-m", "Second head"]);
    hub.env.git(&["checkout", "-q", "main"]);
    hub.run(BOT, &["submit", "1"]).ok();
    let dir = hub.clone_remote("forcer");
    hub.git_in(
        &dir,
        &[
            "push",
            "-q",
            "-f",
            "origin",
            &format!("{first}:refs/heads/atelier/proposals/1"),
        ],
    );
    assert_eq!(hub.head(n), first);
    let merge = hub.run(BOT, &["merge", "--pr", &n.to_string()]).code(1);
    assert!(merge.stderr.contains("E_NOT_SUBMITTED"), "{}", merge.stderr);
    assert_eq!(hub.emu.pull(n)["merged"], false);
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

#[test]
fn a_stray_pull_request_at_a_proposals_head_does_not_turn_it_red() {
    let hub = Hub::new();
    let n = hub.submitted();
    hub.approve(n, "alice", &[]).ok();
    assert_eq!(hub.gate(n).0, 0);
    let head = hub.head(n);
    let dir = hub.clone_remote("stray");
    hub.git_in(
        &dir,
        &["push", "-q", "origin", &format!("{head}:refs/heads/x")],
    );
    let stray = open_pull(&hub.emu.url, "mallory-token", "Same commit", "x", "main");
    let run = hub.run(BOT, &["gate", "--pr", &stray.to_string()]).code(1);
    assert!(run.stderr.contains("E_NOT_A_PROPOSAL"), "{}", run.stderr);
    assert_eq!(hub.status(&head).expect("status").0, "success");
}

/// `merge --pr` refuses with an alarm naming who merged, and audit reports the alarm.
#[track_caller]
fn assert_merged_outside_gate(hub: &Hub, n: u64, by: Option<&str>) {
    let run = hub.run(BOT, &["merge", "--pr", &n.to_string()]).code(1);
    assert!(
        run.stderr.contains("E_MERGED_OUTSIDE_GATE"),
        "{}",
        run.stderr
    );
    if let Some(by) = by {
        assert!(run.stderr.contains(by), "{}", run.stderr);
    }
    let verify = hub
        .env
        .atelier_in(&hub.auditor_clone(), &["audit", "verify"])
        .code(1);
    assert!(
        verify.stdout.contains("E_ALARM_RECORDED"),
        "{}",
        verify.stdout
    );
}

/// Merges pull request `n` through the API as mallory would by hand (bypassing the gate),
/// pasting the approval comments into the message.
fn merge_by_hand(hub: &Hub, n: u64) {
    let tokens: Vec<String> = hub
        .emu
        .comments(n)
        .iter()
        .filter_map(|c| c["body"].as_str().map(str::to_string))
        .filter(|b| b.starts_with("/atelier approve"))
        .collect();
    ureq::put(&format!("{}/repos/{REPO}/pulls/{n}/merge", hub.emu.url))
        .header("Authorization", "Bearer mallory-token")
        .send_json(serde_json::json!({
            "commit_title": "Merge", "commit_message": tokens.join("\n"), "merge_method": "merge"
        }))
        .expect("hand merge");
    assert_eq!(hub.emu.pull(n)["merged"], true);
}

#[test]
fn a_merge_github_refused_is_never_concluded_later_from_its_request() {
    let hub = Hub::new();
    let n = hub.submitted();
    hub.approve(n, "alice", &[]).ok();
    hub.approve(n, "bob", &[]).ok();
    let first = hub.head(n);
    // The gate's merge is refused (the head moved), then the branch is forced back and bob
    // vetoes; the gate records the veto.
    hub.emu.inject(Fault::MoveHeadBeforeMerge);
    let run = hub.run(BOT, &["merge", "--pr", &n.to_string()]).code(1);
    assert!(run.stderr.contains("E_HEAD_MOVED"), "{}", run.stderr);
    let dir = hub.clone_remote("forcer");
    hub.git_in(
        &dir,
        &[
            "push",
            "-q",
            "-f",
            "origin",
            &format!("{first}:refs/heads/atelier/proposals/1"),
        ],
    );
    hub.approve(n, "bob", &["--reject"]).ok();
    assert_eq!(hub.gate(n).0, 1);
    // Someone merges by hand: the gate raises an alarm instead of recording a merge.
    merge_by_hand(&hub, n);
    assert_merged_outside_gate(&hub, n, None);
}

#[test]
fn a_superseded_head_turns_red_and_a_hand_merge_of_it_raises_an_alarm() {
    let hub = Hub::new();
    let n = hub.submitted();
    hub.approve(n, "alice", &[]).ok();
    hub.approve(n, "bob", &[]).ok();
    let first = hub.head(n);
    hub.emu.inject(Fault::Respond {
        method: "PUT".into(),
        path: format!("/repos/{REPO}/pulls/{n}/merge"),
        times: 1,
        status: 405,
        headers: Vec::new(),
        body: r#"{"message":"Required status check \"ci\" is failing."}"#.into(),
    });
    let run = hub.run(BOT, &["merge", "--pr", &n.to_string()]).code(1);
    assert!(run.stderr.contains("E_NOT_MERGEABLE"), "{}", run.stderr);
    assert_eq!(hub.status(&first).expect("status").0, "success");
    // A second head is submitted, then the branch is forced back to the first.
    hub.env.git(&["checkout", "-q", "atelier/proposals/1"]);
    hub.env.write("src/extra.rs", "// second head\n");
    hub.env.git(&["add", "-A"]);
    hub.env.git(&["commit", "-q", "-m", "Second head"]);
    hub.env.git(&["checkout", "-q", "main"]);
    hub.run(BOT, &["submit", "1"]).ok();
    hub.git_in(
        &hub.clone_remote("forcer"),
        &[
            "push",
            "-q",
            "-f",
            "origin",
            &format!("{first}:refs/heads/atelier/proposals/1"),
        ],
    );
    let run = hub.run(BOT, &["gate", "--pr", &n.to_string()]).code(1);
    assert!(run.stderr.contains("E_NOT_SUBMITTED"), "{}", run.stderr);
    assert_eq!(hub.status(&first).expect("status").0, "failure");
    merge_by_hand(&hub, n);
    let run = hub.run(BOT, &["merge", "--pr", &n.to_string()]).code(1);
    assert!(
        run.stderr.contains("E_MERGED_OUTSIDE_GATE"),
        "{}",
        run.stderr
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
fn a_token_pasted_after_a_lost_answer_does_not_stop_the_merge_being_concluded() {
    let hub = Hub::new();
    let n = hub.submitted();
    hub.approve(n, "alice", &[]).ok();
    hub.approve(n, "bob", &[]).ok();
    // A further token by a listed key, not posted at first.
    let key = hub.env.key("bob");
    let extra = hub
        .run(
            "bob-token",
            &[
                "approve",
                "--pr",
                &n.to_string(),
                "--key",
                key.to_str().expect("utf8"),
            ],
        )
        .code(1)
        .stdout;
    hub.emu.inject(Fault::MergeThenFail { then: 4 });
    hub.run(BOT, &["merge", "--pr", &n.to_string()]).code(2);
    assert_eq!(hub.emu.pull(n)["merged"], true);
    // mallory pastes it on the merged pull request, and an evaluation reads it.
    hub.emu.add_comment(n, "mallory", &extra);
    hub.run(BOT, &["gate", "--pr", &n.to_string()]).code(1);
    let merged = hub
        .run(BOT, &["merge", "--pr", &n.to_string(), "--json"])
        .ok()
        .json();
    assert_eq!(
        merged["commit"].as_str(),
        hub.emu.pull(n)["merge_commit_sha"].as_str()
    );
    let verify = hub
        .env
        .atelier_in(&hub.auditor_clone(), &["audit", "verify"]);
    assert_eq!(verify.code, 0, "{verify:?}");
}

#[test]
fn a_hand_merge_while_the_gates_request_was_unanswered_raises_an_alarm() {
    let hub = Hub::new();
    let n = hub.submitted();
    hub.approve(n, "alice", &[]).ok();
    hub.approve(n, "bob", &[]).ok();
    // The gate's merge never gets through; nothing merged.
    hub.emu
        .inject(Fault::server_error("PUT", &format!("/pulls/{n}/merge"), 5));
    hub.run(BOT, &["merge", "--pr", &n.to_string()]).code(2);
    assert_eq!(hub.emu.pull(n)["merged"], false);
    // bob rejects (nothing records it), and someone merges by hand.
    hub.approve(n, "bob", &["--reject"]).ok();
    merge_by_hand(&hub, n);
    assert_merged_outside_gate(&hub, n, Some("mallory"));
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
fn comment_delivery(n: u64, comment: &Value, action: &str) -> Vec<u8> {
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

/// Bob's rejection comment on pull request `n`.
fn bobs_rejection(hub: &Hub, n: u64) -> Value {
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

#[test]
fn a_merge_answer_that_is_not_the_branchs_new_tip_raises_an_alarm() {
    // Issue 8: merge --pr trusted the sha GitHub reported. Here the reported merge commit has
    // the approved parents and tree, but the branch holds one more commit on top of it.
    let hub = Hub::new();
    let n = hub.submitted();
    hub.approve(n, "alice", &[]).ok();
    hub.emu.inject(Fault::LandExtraCommitAfterMerge);
    let run = hub.run(BOT, &["merge", "--pr", &n.to_string()]).code(1);
    assert!(run.stderr.contains("E_LANDED_NOT_TIP"), "{}", run.stderr);
    assert!(run.stderr.contains("tip is"), "{}", run.stderr);
    let log = hub.env.atelier(&["audit", "log"]).ok();
    assert!(
        log.stdout.contains("ALARM E_LANDED_NOT_TIP"),
        "{}",
        log.stdout
    );
    assert!(!log.stdout.contains("merged as"), "{}", log.stdout);
    let verify = hub
        .env
        .atelier_in(&hub.auditor_clone(), &["audit", "verify"])
        .code(1);
    assert!(
        verify.stdout.contains("E_ALARM_RECORDED"),
        "{}",
        verify.stdout
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

/// What a raw connection was answered (the status line on), or "" if it was closed unanswered;
/// waits at most `within`.
fn answer(s: &mut std::net::TcpStream, within: Duration) -> String {
    use std::io::Read;
    s.set_read_timeout(Some(within)).expect("timeout");
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    String::from_utf8_lossy(&buf).into_owned()
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

// Issue 8, break 13: the GitHub twin of break 6. A proposal whose branch was given a file under
// `.atelier/` before `submit` is refused by the gate, and the gate key on the gate machine stays.
#[test]
fn a_change_under_dot_atelier_never_merges_on_github() {
    let hub = Hub::new();
    let id = hub.env.propose_code();
    let key_before = std::fs::read_to_string(hub.env.gate_key()).expect("the gate key");
    hub.env
        .git(&["checkout", "-q", &format!("atelier/proposals/{id}")]);
    hub.env.write(".atelier/gate_key", "attacker's key\n");
    hub.env.git(&["add", "-f", ".atelier/gate_key"]);
    hub.env.git(&["commit", "-q", "-m", "tweak"]);
    hub.env.git(&["rm", "-q", "--cached", ".atelier/gate_key"]);
    hub.env.git(&["checkout", "-q", "-f", "main"]);
    std::fs::remove_file(hub.env.repo.join(".atelier/gate_key")).expect("remove");
    let n = hub.run(BOT, &["submit", &id, "--json"]).ok().json()["pull"]
        .as_u64()
        .expect("pull");
    hub.approve(n, "alice", &[]).ok();
    let (code, v) = hub.gate(n);
    assert_eq!(code, 1);
    assert_eq!(crate::support::unmet(&v), ["E_RESERVED_PATH"], "{v:#}");
    let merge = hub.run(BOT, &["merge", "--pr", &n.to_string()]).code(1);
    assert!(merge.stdout.contains("E_RESERVED_PATH"), "{merge:?}");
    assert_eq!(hub.emu.pull(n)["merged"], false);
    assert_eq!(
        std::fs::read_to_string(hub.env.gate_key()).expect("the gate key"),
        key_before
    );
    assert!(!hub.env.repo.join(".atelier/gate_key").exists());
}

// Issue 8, the anchors on GitHub: the merge commit GitHub lands carries the ledger checkpoint,
// so a remote ledger rewound behind it is reported by any auditor, even from a fresh clone, and
// a clone that verified the longer ledger refuses to take in the shorter one.
#[test]
fn a_remote_ledger_rewound_behind_a_merge_is_a_rollback() {
    let hub = Hub::new();
    let n = hub.submitted();
    hub.approve(n, "alice", &[]).ok();
    let merged = hub
        .run(BOT, &["merge", "--pr", &n.to_string(), "--json"])
        .ok()
        .json();
    let commit = merged["commit"].as_str().expect("commit").to_string();
    let message = hub.env.git(&["log", "-1", "--format=%B", &commit]);
    assert!(message.contains("Atelier-Ledger: "), "{message}");
    // An approver's clone takes in (and remembers) the ledger as it is after the merge.
    let approver = hub.clone_remote("approver");
    hub.run_in(&approver, "bob-token", &["gate", "--pr", &n.to_string()]);
    assert!(hub
        .env
        .atelier_in(&approver, &["audit", "log"])
        .ok()
        .stdout
        .contains("merged as"));
    // Someone with push access rewinds the remote ledger to before the merge.
    let dir = hub.auditor_clone();
    hub.git_in(
        &dir,
        &[
            "push",
            "-q",
            "-f",
            "origin",
            "refs/atelier/ledger~3:refs/atelier/ledger",
        ],
    );
    let fresh = hub.auditor_clone();
    let run = hub.env.atelier_in(&fresh, &["audit", "verify"]).code(1);
    assert!(run.stdout.contains("E_LEDGER_ROLLBACK"), "{}", run.stdout);
    // The approver's clone, handed the rewound ledger, refuses it.
    hub.git_in(&approver, &["update-ref", "-d", "refs/atelier/ledger"]);
    let again = hub.run_in(
        &approver,
        "bob-token",
        &["approve", "--pr", &n.to_string(), "--payload"],
    );
    assert_eq!(again.code, 1, "{again:?}");
    assert!(
        again.stderr.contains("E_LEDGER_ROLLBACK"),
        "{}",
        again.stderr
    );
}

/// The pull request's body — what reviewers on GitHub read — comes from the template the
/// protected branch holds: not the operator's uncommitted edit, and not the version the
/// proposal itself carries (a change to the template shapes only later pull requests). Its
/// three files: the template, src/lib.rs and the proposal's record.
#[test]
fn the_pull_request_body_is_rendered_from_the_protected_branchs_template() {
    let hub = with_body_template(
        "REVIEWED body for proposal {{ proposal.id }} ({{ files | length }} file(s)).\n",
    );
    let id = hub.env.propose(
        &[
            (
                "prompts/pull_request.j2",
                "SELF-SERVING: already approved, just merge.\n",
            ),
            ("src/lib.rs", "pub fn answer() -> u32 {\n    42\n}\n"),
        ],
        "A new body template",
    );
    hub.env.write(
        "prompts/pull_request.j2",
        "UNREVIEWED words from the working tree.\n",
    );
    let out = hub.run(BOT, &["submit", &id, "--json"]).ok();
    let n = out.json()["pull"].as_u64().expect("pull number");
    let body = hub.emu.pull(n)["body"].as_str().expect("body").to_string();
    assert!(
        body.starts_with(&format!("REVIEWED body for proposal {id} (3 file(s))."))
            && !body.contains("SELF-SERVING")
            && !body.contains("UNREVIEWED"),
        "{body}"
    );
}

/// `review` rewrites the pull request's body too (publish_review), and there the base is the
/// clone's forge record's `base_branch`, which anyone with the clone can edit: pointed at the
/// proposal's own branch, the body would be rendered from the proposal's own template. The
/// template is the protected branch's whatever the record says.
#[test]
fn a_forge_record_pointed_at_the_proposal_does_not_let_it_write_its_own_body() {
    let hub = with_body_template("REVIEWED body for proposal {{ proposal.id }}.\n");
    let id = hub.env.propose(
        &[(
            "prompts/pull_request.j2",
            "SELF-SERVING: already approved, just merge.\n",
        )],
        "A new body template",
    );
    let n = hub.run(BOT, &["submit", &id, "--json"]).ok().json()["pull"]
        .as_u64()
        .expect("pull number");
    let record = format!(".atelier/forge/pulls/{id}.json");
    let edited = hub.env.read(&record).replace(
        "\"base_branch\": \"main\"",
        &format!("\"base_branch\": \"atelier/proposals/{id}\""),
    );
    assert!(
        edited.contains("\"base_branch\": \"atelier/proposals/"),
        "{edited}"
    );
    hub.env.write(&record, &edited);
    let out = hub.run(BOT, &["review", &id]);
    let body = hub.emu.pull(n)["body"].as_str().expect("body").to_string();
    assert!(
        !body.contains("SELF-SERVING"),
        "{body}\n{}\n{}",
        out.stdout,
        out.stderr
    );
}

/// A template that breaks only shows once it is merged (its own pull request was rendered from
/// the one before). It must not stop every later `submit`, the proposal that fixes it included:
/// the body falls back to the built-in template and says why.
#[test]
fn a_broken_body_template_on_the_branch_does_not_stop_the_proposal_that_fixes_it() {
    let hub = with_body_template("Broken {% if proposal.id %}\n");
    let id = hub.env.propose(
        &[(
            "prompts/pull_request.j2",
            "Fixed body for proposal {{ proposal.id }}.\n",
        )],
        "Fix the body template",
    );
    let out = hub.run(BOT, &["submit", &id, "--json"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let n = out.json()["pull"].as_u64().expect("pull number");
    let body = hub.emu.pull(n)["body"].as_str().expect("body").to_string();
    assert!(
        body.contains("prompts/pull_request.j2 on main")
            && body.contains("built-in template is shown")
            && !body.contains("Fixed body"),
        "{body}"
    );
}

/// A hub whose protected branch holds `template` as its pull request body template.
fn with_body_template(template: &str) -> Hub {
    Hub::build(
        crate::support::Setup {
            files: vec![("prompts/pull_request.j2".into(), template.into())],
            ..Default::default()
        },
        "manual",
    )
}
