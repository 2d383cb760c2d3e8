//! The GitHub emulator behaves like GitHub (shapes, pagination, merges, faults, permissions),
//! checked against GitHub's OpenAPI description.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;

use octocrab::models::issues::Comment;
use octocrab::models::pulls::{Merge, MergeableState, PullRequest, Review, ReviewState};
use octocrab::models::{CombinedStatus, IssueState, Label, Repository, Status, StatusState};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use crate::support::github::{Emulator, Fault, Logged};

const REPO: &str = "acme/widgets";

const ALICE: &str = "tok-alice";

const BOB: &str = "tok-bob";

struct Forge {
    tmp: tempfile::TempDir,
    work: PathBuf,
    bare: PathBuf,
    emu: Emulator,
}

struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    text: String,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text))
    }

    #[track_caller]
    fn parse<T: DeserializeOwned>(&self) -> T {
        serde_json::from_str(&self.text).unwrap_or_else(|e| {
            panic!(
                "does not deserialize into {}: {e}\n{}",
                std::any::type_name::<T>(),
                self.text
            )
        })
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn message(&self) -> String {
        self.json()["message"].as_str().unwrap_or("").to_string()
    }
}

fn git_in(dir: &Path, home: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("LANG", "C")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .args([
            "-c",
            "user.name=Tester",
            "-c",
            "user.email=tester@example.org",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

impl Forge {
    /// `acme/widgets` with `main` holding one commit; alice and bob have tokens.
    fn new() -> Forge {
        let tmp = tempfile::tempdir().expect("temp dir");
        let bare = tmp.path().join("widgets.git");
        let work = tmp.path().join("work");
        let home = tmp.path().join("home");
        std::fs::create_dir_all(&work).expect("mkdir");
        std::fs::create_dir_all(&home).expect("mkdir");
        let bare_s = bare.to_str().expect("utf8");
        git_in(
            tmp.path(),
            &home,
            &["init", "-q", "--bare", "-b", "main", bare_s],
        );
        git_in(&work, &home, &["init", "-q", "-b", "main", "."]);
        std::fs::write(work.join("README.md"), "# widgets\n").expect("write");
        std::fs::write(work.join("lib.txt"), "one\ntwo\nthree\n").expect("write");
        git_in(&work, &home, &["add", "-A"]);
        git_in(&work, &home, &["commit", "-q", "-m", "initial"]);
        git_in(&work, &home, &["remote", "add", "origin", bare_s]);
        git_in(&work, &home, &["push", "-q", "origin", "main"]);
        let emu = Emulator::start(REPO, &bare, &[(ALICE, "alice"), (BOB, "bob")]);
        Forge {
            tmp,
            work,
            bare,
            emu,
        }
    }

    fn git(&self, args: &[&str]) -> String {
        git_in(&self.work, &self.tmp.path().join("home"), args)
    }

    /// Commits `text` to `file` on `branch` (made from main if new), pushes it, returns the sha.
    fn commit(&self, branch: &str, file: &str, text: &str) -> String {
        let exists = self
            .git(&["branch", "--list", branch])
            .trim()
            .trim_start_matches("* ")
            == branch;
        if exists {
            self.git(&["checkout", "-q", branch]);
        } else {
            self.git(&["checkout", "-q", "-b", branch, "main"]);
        }
        std::fs::write(self.work.join(file), text).expect("write");
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "-m", &format!("Change {file} on {branch}")]);
        self.git(&["push", "-q", "origin", branch]);
        let sha = self.git(&["rev-parse", "HEAD"]);
        self.git(&["checkout", "-q", "main"]);
        sha
    }

    fn tip(&self, branch: &str) -> String {
        let repo = git2::Repository::open_bare(&self.bare).expect("open bare");
        let sha = repo
            .find_reference(&format!("refs/heads/{branch}"))
            .expect("branch")
            .peel_to_commit()
            .expect("commit")
            .id()
            .to_string();
        sha
    }

    fn api(&self, rest: &str) -> String {
        format!("/repos/{REPO}{rest}")
    }

    fn call(&self, method: &str, path: &str, token: Option<&str>, body: Option<Value>) -> Reply {
        self.raw(method, path, token, body.map(|b| b.to_string()))
    }

    fn raw(&self, method: &str, path: &str, token: Option<&str>, body: Option<String>) -> Reply {
        let url = if path.starts_with("http") {
            path.to_string()
        } else {
            format!("{}{path}", self.emu.url)
        };
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        fn auth<B>(r: ureq::RequestBuilder<B>, token: Option<&str>) -> ureq::RequestBuilder<B> {
            let r = r
                .header("Accept", "application/vnd.github+json")
                .header("X-GitHub-Api-Version", "2022-11-28");
            match token {
                Some(t) => r.header("Authorization", format!("Bearer {t}")),
                None => r,
            }
        }
        let body = body.unwrap_or_default();
        let result = match method {
            "GET" => auth(agent.get(&url), token).call(),
            "DELETE" => auth(agent.delete(&url), token).call(),
            "POST" => auth(agent.post(&url), token)
                .content_type("application/json")
                .send(&body),
            "PATCH" => auth(agent.patch(&url), token)
                .content_type("application/json")
                .send(&body),
            "PUT" => auth(agent.put(&url), token)
                .content_type("application/json")
                .send(&body),
            other => panic!("method {other}"),
        };
        let mut resp = result.unwrap_or_else(|e| panic!("{method} {url}: {e}"));
        let status = resp.status().as_u16();
        let headers = resp
            .headers()
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_string(),
                    v.to_str().unwrap_or_default().to_string(),
                )
            })
            .collect();
        let text = resp.body_mut().read_to_string().expect("body");
        Reply {
            status,
            headers,
            text,
        }
    }

    /// Opens a pull request from `head` into main as alice; returns its number.
    fn open_pull(&self, head: &str, title: &str) -> u64 {
        let r = self.call(
            "POST",
            &self.api("/pulls"),
            Some(ALICE),
            Some(json!({ "title": title, "head": head, "base": "main", "body": "Please." })),
        );
        assert_eq!(r.status, 201, "{}", r.text);
        r.parse::<PullRequest>().number
    }
}

#[test]
fn repository_and_pull_requests_have_githubs_shapes() {
    let f = Forge::new();
    let r = f.call("GET", &f.api(""), Some(ALICE), None);
    assert_eq!(r.status, 200, "{}", r.text);
    let repo: Repository = r.parse();
    assert_eq!(repo.default_branch.as_deref(), Some("main"));
    assert_eq!(repo.full_name.as_deref(), Some(REPO));
    assert_eq!(repo.owner.as_ref().map(|o| o.login.as_str()), Some("acme"));
    assert_eq!(r.json()["network_count"], 0);
    assert_eq!(
        r.header("content-type"),
        Some("application/json; charset=utf-8")
    );
    assert!(r.header("x-github-request-id").is_some());
    assert_eq!(r.header("x-ratelimit-limit"), Some("5000"));
    assert_eq!(r.header("x-ratelimit-resource"), Some("core"));

    let main = f.tip("main");
    let head = f.commit("feature", "lib.txt", "one\ntwo\nthree\nfour\n");
    let r = f.call(
        "POST",
        &f.api("/pulls"),
        Some(ALICE),
        Some(json!({ "title": "Add four", "head": "acme:feature", "base": "main", "body": "Counting." })),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    let pr: PullRequest = r.parse();
    assert_eq!(pr.number, 1);
    assert_eq!(pr.head.sha, head);
    assert_eq!(pr.head.ref_field, "feature");
    assert_eq!(pr.head.label.as_deref(), Some("acme:feature"));
    assert_eq!(pr.base.sha, main);
    assert_eq!(pr.base.ref_field, "main");
    assert_eq!(pr.state, Some(IssueState::Open));
    assert_eq!(pr.user.as_ref().map(|u| u.login.as_str()), Some("alice"));
    assert_eq!(pr.user.as_ref().map(|u| u.r#type.as_str()), Some("User"));
    assert_eq!(pr.mergeable, Some(true));
    assert_eq!(pr.mergeable_state, Some(MergeableState::Clean));
    assert_eq!(pr.merged, Some(false));
    assert_eq!(pr.commits, Some(1));
    assert_eq!(
        (pr.additions, pr.deletions, pr.changed_files),
        (Some(1), Some(0), Some(1))
    );
    assert_ne!(pr.id.0, pr.number, "ids are not numbers");
    let created = r.json()["created_at"]
        .as_str()
        .expect("created_at")
        .to_string();
    assert!(created.ends_with('Z') && created.len() == 20, "{created}");

    let bare = git2::Repository::open_bare(&f.bare).expect("open");
    let pull_ref = bare
        .find_reference("refs/pull/1/head")
        .expect("refs/pull/1/head");
    assert_eq!(pull_ref.target().map(|o| o.to_string()), Some(head.clone()));

    // The list holds pull-request-simple objects, newest first, filtered by head and state.
    f.commit("other", "README.md", "# widgets!\n");
    let second = f.open_pull("other", "Shout");
    assert_eq!(second, 2);
    let r = f.call("GET", &f.api("/pulls?state=open"), Some(BOB), None);
    let list: Vec<PullRequest> = r.parse();
    assert_eq!(list.iter().map(|p| p.number).collect::<Vec<_>>(), [2, 1]);
    assert!(r.json()[0].get("mergeable").is_none(), "simple shape");
    let r = f.call(
        "GET",
        &f.api("/pulls?head=acme:feature&state=all"),
        Some(BOB),
        None,
    );
    let list: Vec<PullRequest> = r.parse();
    assert_eq!(list.iter().map(|p| p.number).collect::<Vec<_>>(), [1]);
    let r = f.call("GET", &f.api("/pulls?state=closed"), Some(BOB), None);
    assert!(r.parse::<Vec<PullRequest>>().is_empty());

    // What GitHub refuses.
    let create = |head: &str, base: &str| {
        f.call(
            "POST",
            &f.api("/pulls"),
            Some(ALICE),
            Some(json!({ "title": "T", "head": head, "base": base })),
        )
    };
    let r = create("feature", "main");
    assert_eq!(r.status, 422);
    assert_eq!(r.message(), "Validation Failed");
    assert_eq!(
        r.json()["errors"][0]["message"],
        "A pull request already exists for acme:feature."
    );
    assert_eq!(create("nope", "main").status, 422);
    assert_eq!(create("feature", "nope").status, 422);
    f.git(&["branch", "same", "main"]);
    f.git(&["push", "-q", "origin", "same"]);
    let r = create("same", "main");
    assert_eq!(r.status, 422);
    assert_eq!(
        r.json()["errors"][0]["message"],
        "No commits between main and same"
    );
    let r = f.call(
        "POST",
        &f.api("/pulls"),
        Some(ALICE),
        Some(json!({ "head": "feature", "base": "main" })),
    );
    assert_eq!(r.status, 422);
    assert_eq!(r.json()["errors"][0]["field"], "title");

    // PATCH edits and closes.
    let r = f.call(
        "PATCH",
        &f.api("/pulls/2"),
        Some(ALICE),
        Some(json!({ "title": "Shout louder", "state": "closed" })),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let pr: PullRequest = r.parse();
    assert_eq!(pr.title.as_deref(), Some("Shout louder"));
    assert_eq!(pr.state, Some(IssueState::Closed));
    assert!(pr.closed_at.is_some() && pr.merged_at.is_none());
    assert_eq!(f.emu.pull(2)["state"], "closed");
}

#[test]
fn a_pull_request_follows_pushes_to_its_head() {
    let f = Forge::new();
    let first = f.commit("feature", "lib.txt", "one\n");
    f.open_pull("feature", "Trim");
    let second = f.commit("feature", "lib.txt", "one\nuno\n");
    assert_ne!(first, second);
    let r = f.call("GET", &f.api("/pulls/1"), Some(ALICE), None);
    let pr: PullRequest = r.parse();
    assert_eq!(pr.head.sha, second);
    assert_eq!(pr.commits, Some(2));
    let bare = git2::Repository::open_bare(&f.bare).expect("open");
    let pull_ref = bare.find_reference("refs/pull/1/head").expect("pull ref");
    assert_eq!(
        pull_ref.target().map(|o| o.to_string()),
        Some(second.clone())
    );
    // The base follows main too.
    let main = f.commit("main", "README.md", "# moved\n");
    assert_eq!(f.emu.pull(1)["base"]["sha"], main.as_str());
    assert_eq!(f.emu.pull(1)["head"]["sha"], second.as_str());
    assert_eq!(
        f.call("GET", &f.api("/pulls/9"), Some(ALICE), None).status,
        404
    );
}

#[test]
fn comments_paginate_like_github() {
    let f = Forge::new();
    f.commit("feature", "lib.txt", "x\n");
    f.open_pull("feature", "X");
    for i in 0..20 {
        f.emu.add_comment(1, "bob", &format!("web comment {i}"));
    }
    for i in 0..15 {
        let r = f.call(
            "POST",
            &f.api("/issues/1/comments"),
            Some(ALICE),
            Some(json!({ "body": format!("api comment {i}") })),
        );
        assert_eq!(r.status, 201, "{}", r.text);
        let c: Comment = r.parse();
        assert_eq!(c.user.login, "alice");
        assert_eq!(c.body.as_deref(), Some(format!("api comment {i}").as_str()));
    }
    let base = format!("{}/repos/{REPO}/issues/1/comments", f.emu.url);
    let r = f.call(
        "GET",
        &f.api("/issues/1/comments?per_page=10"),
        Some(ALICE),
        None,
    );
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("link"),
        Some(
            format!(
                "<{base}?per_page=10&page=2>; rel=\"next\", <{base}?per_page=10&page=4>; rel=\"last\""
            )
            .as_str()
        )
    );
    let r2 = f.call(
        "GET",
        &f.api("/issues/1/comments?per_page=10&page=2"),
        Some(ALICE),
        None,
    );
    assert_eq!(
        r2.header("link"),
        Some(
            format!(
                "<{base}?per_page=10&page=1>; rel=\"prev\", <{base}?per_page=10&page=3>; rel=\"next\", \
                 <{base}?per_page=10&page=4>; rel=\"last\", <{base}?per_page=10&page=1>; rel=\"first\""
            )
            .as_str()
        )
    );

    // Walk the next links to the end, every page deserializing.
    let mut all: Vec<Comment> = Vec::new();
    let mut next = Some(format!("{base}?per_page=10"));
    let mut pages = 0;
    while let Some(url) = next.take() {
        let r = f.call("GET", &url, Some(ALICE), None);
        let page: Vec<Comment> = r.parse();
        pages += 1;
        all.extend(page);
        next = r.header("link").and_then(|l| {
            l.split(", ")
                .find(|p| p.ends_with("rel=\"next\""))
                .map(|p| p[1..p.find('>').expect(">")].to_string())
        });
    }
    assert_eq!(pages, 4);
    assert_eq!(all.len(), 35);
    assert_eq!(all[0].body.as_deref(), Some("web comment 0"));
    assert_eq!(all[34].body.as_deref(), Some("api comment 14"));
    let ids: Vec<u64> = all.iter().map(|c| c.id.0).collect();
    let helper: Vec<u64> = f
        .emu
        .comments(1)
        .iter()
        .map(|c| c["id"].as_u64().expect("id"))
        .collect();
    assert_eq!(ids, helper);

    // Defaults: 30 a page; at most 100.
    let r = f.call("GET", &f.api("/issues/1/comments"), Some(ALICE), None);
    assert_eq!(r.parse::<Vec<Comment>>().len(), 30);
    assert!(r
        .header("link")
        .expect("link")
        .contains(&format!("<{base}?page=2>; rel=\"next\"")));
    let r = f.call(
        "GET",
        &f.api("/issues/1/comments?per_page=500"),
        Some(ALICE),
        None,
    );
    assert_eq!(r.parse::<Vec<Comment>>().len(), 35);
    assert_eq!(r.header("link"), None);
    assert_eq!(
        f.call("GET", &f.api("/issues/7/comments"), Some(ALICE), None)
            .status,
        404
    );
}

#[test]
fn comments_are_edited_by_their_author_and_deleted() {
    let f = Forge::new();
    f.commit("feature", "lib.txt", "x\n");
    f.open_pull("feature", "X");
    let r = f.call(
        "POST",
        &f.api("/issues/1/comments"),
        Some(ALICE),
        Some(json!({ "body": "first" })),
    );
    let id = r.parse::<Comment>().id.0;
    let path = f.api(&format!("/issues/comments/{id}"));
    let r = f.call(
        "PATCH",
        &path,
        Some(BOB),
        Some(json!({ "body": "bob was here" })),
    );
    assert_eq!(r.status, 403);
    let r = f.call(
        "PATCH",
        &path,
        Some(ALICE),
        Some(json!({ "body": "second" })),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let c: Comment = r.parse();
    assert_eq!(c.body.as_deref(), Some("second"));
    assert!(c.updated_at.expect("updated_at") >= c.created_at);

    // People edit and delete in the web UI.
    let web = f.emu.add_comment(1, "bob", "from the web");
    f.emu.edit_comment(web, "edited on the web");
    let r = f.call(
        "GET",
        &f.api(&format!("/issues/comments/{web}")),
        Some(ALICE),
        None,
    );
    assert_eq!(
        r.parse::<Comment>().body.as_deref(),
        Some("edited on the web")
    );
    f.emu.delete_comment(web);
    assert_eq!(
        f.call(
            "GET",
            &f.api(&format!("/issues/comments/{web}")),
            Some(ALICE),
            None
        )
        .status,
        404
    );

    let r = f.call("DELETE", &path, Some(ALICE), None);
    assert_eq!(r.status, 204);
    assert!(r.text.is_empty());
    assert!(f.emu.comments(1).is_empty());
    assert_eq!(f.call("DELETE", &path, Some(ALICE), None).status, 404);
}

#[test]
fn statuses_combine_by_context() {
    let f = Forge::new();
    let head = f.commit("feature", "lib.txt", "x\n");
    f.open_pull("feature", "X");
    let post = |state: &str, context: &str, description: &str| {
        f.call(
            "POST",
            &f.api(&format!("/statuses/{head}")),
            Some(ALICE),
            Some(json!({
                "state": state,
                "context": context,
                "description": description,
                "target_url": "https://ci.example.org/run/1",
            })),
        )
    };
    let r = post("success", "ci/a", "fine");
    assert_eq!(r.status, 201, "{}", r.text);
    let s: Status = r.parse();
    assert_eq!(s.state, StatusState::Success);
    assert_eq!(s.context.as_deref(), Some("ci/a"));
    assert_eq!(s.creator.as_ref().map(|c| c.login.as_str()), Some("alice"));
    assert_eq!(post("pending", "ci/b", "running").status, 201);

    let combined = |r: &str| -> CombinedStatus {
        let reply = f.call(
            "GET",
            &f.api(&format!("/commits/{r}/status")),
            Some(BOB),
            None,
        );
        assert_eq!(reply.status, 200, "{}", reply.text);
        reply.parse()
    };
    let c = combined(&head);
    assert_eq!(c.state, StatusState::Pending);
    assert_eq!(c.total_count, 2);
    assert_eq!(c.sha, head);
    assert_eq!(post("success", "ci/b", "done").status, 201);
    let c = combined("feature");
    assert_eq!(c.state, StatusState::Success);
    assert_eq!(c.total_count, 2);
    assert_eq!(post("error", "ci/c", "broke").status, 201);
    assert_eq!(combined(&head).state, StatusState::Failure);
    assert_eq!(post("success", "ci/c", "fixed").status, 201);
    assert_eq!(post("failure", "ci/a", "flaky").status, 201);
    assert_eq!(combined(&head[..12]).state, StatusState::Failure);
    // No statuses at all: pending.
    assert_eq!(combined("main").state, StatusState::Pending);
    assert_eq!(combined("main").total_count, 0);

    let newest_first = f.emu.statuses(&head);
    assert_eq!(newest_first.len(), 6);
    assert_eq!(newest_first[0]["context"], "ci/a");
    assert_eq!(newest_first[0]["state"], "failure");
    assert_eq!(newest_first[5]["state"], "success");
    let listed = f.call("GET", &f.api("/commits/feature/statuses"), Some(BOB), None);
    assert_eq!(listed.parse::<Vec<Status>>().len(), 6);

    // What GitHub refuses.
    let r = post("great", "ci/a", "");
    assert_eq!(r.status, 422);
    assert_eq!(r.message(), "Validation Failed");
    assert_eq!(post("success", "ci/a", &"x".repeat(141)).status, 422);
    assert_eq!(post("success", "ci/a", &"x".repeat(140)).status, 201);
    let r = f.call(
        "POST",
        &f.api(&format!("/statuses/{}", "0".repeat(40))),
        Some(ALICE),
        Some(json!({ "state": "success" })),
    );
    assert_eq!(r.status, 422);
    assert!(
        r.message().starts_with("No commit found for SHA"),
        "{}",
        r.text
    );
}

#[test]
fn labels_and_reviews() {
    let f = Forge::new();
    let head = f.commit("feature", "lib.txt", "x\n");
    f.open_pull("feature", "X");
    let r = f.call(
        "POST",
        &f.api("/issues/1/labels"),
        Some(ALICE),
        Some(json!({ "labels": ["atelier", "needs-review"] })),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let labels: Vec<Label> = r.parse();
    assert_eq!(
        labels.iter().map(|l| l.name.as_str()).collect::<Vec<_>>(),
        ["atelier", "needs-review"]
    );
    f.emu.add_label(1, "approved");
    f.emu.add_label(1, "atelier");
    let r = f.call("GET", &f.api("/issues/1/labels"), Some(BOB), None);
    let labels: Vec<Label> = r.parse();
    assert_eq!(labels.len(), 3);
    let pr: PullRequest = f.call("GET", &f.api("/pulls/1"), Some(BOB), None).parse();
    assert_eq!(pr.labels.map(|l| l.len()), Some(3));

    let first = f.emu.add_review(1, "bob", "APPROVED", "Looks right.");
    let second = f
        .emu
        .add_review(1, "carol", "CHANGES_REQUESTED", "Not yet.");
    let r = f.call("GET", &f.api("/pulls/1/reviews"), Some(ALICE), None);
    assert_eq!(r.status, 200, "{}", r.text);
    let reviews: Vec<Review> = r.parse();
    assert_eq!(reviews.len(), 2);
    assert_eq!(reviews[0].id.0, first);
    assert_eq!(reviews[0].state, Some(ReviewState::Approved));
    assert_eq!(reviews[0].commit_id.as_deref(), Some(head.as_str()));
    assert_eq!(
        reviews[0].user.as_ref().map(|u| u.login.as_str()),
        Some("bob")
    );
    assert_eq!(reviews[1].id.0, second);
    assert_eq!(reviews[1].state, Some(ReviewState::ChangesRequested));
    let r = f.call(
        "GET",
        &f.api("/pulls/1/reviews?per_page=1"),
        Some(ALICE),
        None,
    );
    assert_eq!(r.parse::<Vec<Review>>().len(), 1);
    let link = r.header("link").expect("link");
    assert!(link.contains("per_page=1&page=2>; rel=\"next\""), "{link}");
}

fn merge(f: &Forge, n: u64, body: Value) -> Reply {
    f.call(
        "PUT",
        &f.api(&format!("/pulls/{n}/merge")),
        Some(ALICE),
        Some(body),
    )
}

#[test]
fn a_merge_lands_a_true_merge_commit() {
    let f = Forge::new();
    let head = f.commit("feature", "lib.txt", "one\ntwo\nthree\nfour\n");
    f.open_pull("feature", "Add four");
    let main = f.commit("main", "README.md", "# widgets, moved on\n");

    let r = merge(&f, 1, json!({ "sha": head, "merge_method": "merge" }));
    assert_eq!(r.status, 200, "{}", r.text);
    let m: Merge = r.parse();
    assert!(m.merged);
    assert_eq!(
        m.message.as_deref(),
        Some("Pull Request successfully merged")
    );
    let sha = m.sha.expect("sha");
    assert_eq!(f.tip("main"), sha);

    let repo = git2::Repository::open_bare(&f.bare).expect("open");
    let commit = repo
        .find_commit(git2::Oid::from_str(&sha).expect("oid"))
        .expect("merge commit");
    let parents: Vec<String> = commit.parent_ids().map(|p| p.to_string()).collect();
    assert_eq!(parents, [main.clone(), head.clone()]);
    assert_eq!(
        commit.message(),
        Some("Merge pull request #1 from acme/feature\n\nAdd four")
    );
    assert_eq!(commit.author().name(), Some("GitHub"));
    assert_eq!(commit.committer().email(), Some("noreply@github.com"));
    let tree = commit.tree().expect("tree");
    let blob = |path: &str| {
        let entry = tree.get_path(Path::new(path)).expect("entry");
        let blob = repo.find_blob(entry.id()).expect("blob");
        String::from_utf8(blob.content().to_vec()).expect("utf8")
    };
    assert_eq!(blob("lib.txt"), "one\ntwo\nthree\nfour\n");
    assert_eq!(blob("README.md"), "# widgets, moved on\n");

    let pr: PullRequest = f.call("GET", &f.api("/pulls/1"), Some(BOB), None).parse();
    assert_eq!(pr.state, Some(IssueState::Closed));
    assert_eq!(pr.merged, Some(true));
    assert!(pr.merged_at.is_some());
    assert_eq!(pr.merge_commit_sha.as_deref(), Some(sha.as_str()));
    assert_eq!(pr.merged_by.map(|u| u.login), Some("alice".to_string()));
    assert_eq!(
        f.call("GET", &f.api("/pulls/1/merge"), Some(BOB), None)
            .status,
        204
    );

    // Merged once; never again.
    let r = merge(&f, 1, json!({ "sha": head }));
    assert_eq!(r.status, 405);
    assert_eq!(r.message(), "Pull Request is not mergeable");
    assert_eq!(f.tip("main"), sha);

    // A title and message of one's own, exactly.
    let head2 = f.commit("second", "README.md", "# second\n");
    f.open_pull("second", "Second");
    let r = merge(
        &f,
        2,
        json!({ "sha": head2, "commit_title": "Land #2", "commit_message": "Approved-by: bob" }),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let sha2 = r.parse::<Merge>().sha.expect("sha");
    let commit = repo
        .find_commit(git2::Oid::from_str(&sha2).expect("oid"))
        .expect("commit");
    assert_eq!(commit.message(), Some("Land #2\n\nApproved-by: bob"));
    let r = merge(&f, 2, json!({ "merge_method": "squash" }));
    assert_eq!(r.status, 405, "merged already");
}

#[test]
fn merges_refuse_moved_heads_other_methods_and_conflicts() {
    let f = Forge::new();
    let old = f.commit("feature", "lib.txt", "one\n");
    f.open_pull("feature", "Trim");
    let new = f.commit("feature", "lib.txt", "one\nuno\n");
    let main = f.tip("main");

    let r = merge(&f, 1, json!({ "sha": old }));
    assert_eq!(r.status, 409, "{}", r.text);
    assert_eq!(
        r.message(),
        "Head branch was modified. Review and try the merge again."
    );
    assert_eq!(f.tip("main"), main);
    let r = merge(&f, 1, json!({ "sha": new, "merge_method": "rebase" }));
    assert_eq!(r.status, 422);
    assert_eq!(f.tip("main"), main);

    // Someone pushes while the merge is on its way.
    f.emu.inject(Fault::MoveHeadBeforeMerge);
    let r = merge(&f, 1, json!({ "sha": new }));
    assert_eq!(r.status, 409, "{}", r.text);
    assert_eq!(f.tip("main"), main);
    let moved = f.tip("feature");
    assert_ne!(moved, new);
    assert_eq!(f.emu.pull(1)["head"]["sha"], moved.as_str());
    let repo = git2::Repository::open_bare(&f.bare).expect("open");
    let commit = repo
        .find_commit(git2::Oid::from_str(&moved).expect("oid"))
        .expect("commit");
    assert_eq!(commit.parent_id(0).expect("parent").to_string(), new);
    // Only once.
    let r = merge(&f, 1, json!({ "sha": moved }));
    assert_eq!(r.status, 200, "{}", r.text);

    // A conflict is not mergeable.
    f.commit("left", "README.md", "# left\n");
    f.commit("right", "README.md", "# right\n");
    let left = f.open_pull("left", "Left");
    let right = f.open_pull("right", "Right");
    assert_eq!(merge(&f, left, json!({})).status, 200);
    let pr: PullRequest = f
        .call("GET", &f.api(&format!("/pulls/{right}")), Some(BOB), None)
        .parse();
    assert_eq!(pr.mergeable, Some(false));
    assert_eq!(pr.mergeable_state, Some(MergeableState::Dirty));
    let before = f.tip("main");
    let r = merge(&f, right, json!({}));
    assert_eq!(r.status, 405);
    assert_eq!(r.message(), "Pull Request is not mergeable");
    assert_eq!(f.tip("main"), before);
}

#[test]
fn a_faulty_merge_can_land_a_different_tree() {
    let f = Forge::new();
    let head = f.commit("feature", "lib.txt", "one\ntwo\n");
    f.open_pull("feature", "Shorten");
    f.commit("main", "README.md", "# elsewhere\n");
    let repo = git2::Repository::open_bare(&f.bare).expect("open");
    let commit = |s: &str| {
        repo.find_commit(git2::Oid::from_str(s).expect("oid"))
            .expect("commit")
    };
    let true_tree = {
        let mut index = repo
            .merge_commits(&commit(&f.tip("main")), &commit(&head), None)
            .expect("merge");
        index.write_tree_to(&repo).expect("tree")
    };
    f.emu.inject(Fault::LandDifferentTree);
    let r = merge(&f, 1, json!({ "sha": head }));
    assert_eq!(r.status, 200, "{}", r.text);
    let landed = commit(&r.parse::<Merge>().sha.expect("sha"));
    assert_ne!(landed.tree_id(), true_tree);
    let tree = landed.tree().expect("tree");
    assert!(tree.get_name("UNAPPROVED").is_some());
    assert_eq!(
        tree.len(),
        repo.find_tree(true_tree).expect("tree").len() + 1
    );
}

#[test]
fn credentials_routes_and_bodies() {
    let f = Forge::new();
    f.commit("feature", "lib.txt", "x\n");
    f.open_pull("feature", "X");
    for token in [None, Some("tok-mallory")] {
        let r = f.call("GET", &f.api("/pulls/1"), token, None);
        assert_eq!(r.status, 401);
        assert_eq!(r.message(), "Bad credentials");
        assert!(r.json()["documentation_url"].is_string());
    }
    // The authenticated account.
    let me = f.call("GET", "/user", Some(ALICE), None);
    assert_eq!(me.status, 200);
    assert_eq!(me.json()["login"], "alice");
    for path in [
        "/repos/acme/gadgets".to_string(),
        "/repos/other/widgets/pulls/1".to_string(),
        f.api("/nothing"),
        f.api("/pulls/one"),
    ] {
        let r = f.call("GET", &path, Some(ALICE), None);
        assert_eq!(r.status, 404, "{path}");
        assert_eq!(r.message(), "Not Found");
        assert_eq!(
            r.json()["documentation_url"],
            "https://docs.github.com/rest"
        );
    }
    let r = f.raw(
        "POST",
        &f.api("/issues/1/comments"),
        Some(ALICE),
        Some("{not json".into()),
    );
    assert_eq!(r.status, 400);
    assert_eq!(r.message(), "Problems parsing JSON");
    let r = f.call(
        "POST",
        &f.api("/issues/1/comments"),
        Some(ALICE),
        Some(json!({})),
    );
    assert_eq!(r.status, 422);

    let log = f.emu.log();
    assert_eq!(
        log[log.len() - 1],
        Logged {
            method: "POST".into(),
            path: f.api("/issues/1/comments"),
            status: 422,
            login: Some("alice".into()),
        }
    );
    assert!(log
        .iter()
        .any(|l| l.status == 401 && l.login.is_none() && l.path == f.api("/pulls/1")));
    assert_eq!(log[0].method, "POST");
    assert_eq!(log[0].status, 201);
}

#[test]
fn injected_faults_and_rate_limit_headers() {
    let f = Forge::new();
    f.commit("feature", "lib.txt", "x\n");
    f.open_pull("feature", "X");

    let r1 = f.call("GET", &f.api("/pulls/1"), Some(ALICE), None);
    let r2 = f.call("GET", &f.api("/pulls/1"), Some(ALICE), None);
    let remaining = |r: &Reply| -> u64 {
        r.header("x-ratelimit-remaining")
            .expect("remaining")
            .parse()
            .expect("number")
    };
    assert_eq!(remaining(&r1), remaining(&r2) + 1);
    let used: u64 = r2
        .header("x-ratelimit-used")
        .expect("used")
        .parse()
        .expect("n");
    assert_eq!(used + remaining(&r2), 5000);
    assert!(r2
        .header("x-ratelimit-reset")
        .expect("reset")
        .parse::<u64>()
        .is_ok());

    f.emu.inject(Fault::server_error("GET", "/pulls/1", 2));
    let statuses: Vec<u16> = (0..3)
        .map(|_| f.call("GET", &f.api("/pulls/1"), Some(ALICE), None).status)
        .collect();
    assert_eq!(statuses, [500, 500, 200]);

    f.emu.inject(Fault::SecondaryRateLimit {
        method: "POST".into(),
        path: "/comments".into(),
        times: 1,
        retry_after: 60,
    });
    let r = f.call(
        "POST",
        &f.api("/issues/1/comments"),
        Some(ALICE),
        Some(json!({ "body": "hi" })),
    );
    assert_eq!(r.status, 403);
    assert_eq!(r.header("retry-after"), Some("60"));
    assert!(r.message().contains("secondary rate limit"), "{}", r.text);
    assert!(f.emu.comments(1).is_empty());
    let r = f.call(
        "POST",
        &f.api("/issues/1/comments"),
        Some(ALICE),
        Some(json!({ "body": "hi" })),
    );
    assert_eq!(r.status, 201);

    // A primary rate limit, spelled out by the test.
    f.emu.inject(Fault::Respond {
        method: "GET".into(),
        path: "/pulls".into(),
        times: 1,
        status: 403,
        headers: vec![("x-ratelimit-remaining".into(), "0".into())],
        body: json!({ "message": "API rate limit exceeded for user ID 1." }).to_string(),
    });
    let r = f.call("GET", &f.api("/pulls"), Some(ALICE), None);
    assert_eq!(r.status, 403);
    let values: Vec<&str> = r
        .headers
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case("x-ratelimit-remaining"))
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(values, ["0"]);
    assert_eq!(
        f.call("GET", &f.api("/pulls"), Some(ALICE), None).status,
        200
    );
}

#[test]
fn denied_permissions_answer_403() {
    let f = Forge::new();
    let head = f.commit("feature", "lib.txt", "x\n");
    f.open_pull("feature", "X");
    f.emu.permissions("alice", &["statuses"]);
    f.emu.permissions("bob", &["issues=write"]);
    let status = json!({ "state": "success", "context": "ci" });
    let r = f.call(
        "POST",
        &f.api(&format!("/statuses/{head}")),
        Some(ALICE),
        Some(status.clone()),
    );
    assert_eq!(r.status, 403);
    assert_eq!(
        r.message(),
        "Resource not accessible by personal access token"
    );
    assert_eq!(r.json()["status"], "403");
    assert_eq!(
        r.header("x-accepted-github-permissions"),
        Some("statuses=write")
    );
    let r = f.call(
        "GET",
        &f.api(&format!("/commits/{head}/status")),
        Some(ALICE),
        None,
    );
    assert_eq!(r.status, 403);
    assert_eq!(
        r.header("x-accepted-github-permissions"),
        Some("statuses=read")
    );
    let r = f.call(
        "POST",
        &f.api(&format!("/statuses/{head}")),
        Some(BOB),
        Some(status),
    );
    assert_eq!(r.status, 201);

    assert_eq!(
        f.call("GET", &f.api("/issues/1/comments"), Some(BOB), None)
            .status,
        200
    );
    let r = f.call(
        "POST",
        &f.api("/issues/1/comments"),
        Some(BOB),
        Some(json!({ "body": "hi" })),
    );
    assert_eq!(r.status, 403);
    assert_eq!(
        r.header("x-accepted-github-permissions"),
        Some("issues=write")
    );
    assert_eq!(
        f.call(
            "POST",
            &f.api("/issues/1/comments"),
            Some(ALICE),
            Some(json!({ "body": "hi" }))
        )
        .status,
        201
    );
}

#[test]
fn chunked_request_bodies_are_read() {
    let f = Forge::new();
    f.commit("feature", "lib.txt", "x\n");
    f.open_pull("feature", "X");
    let addr = f.emu.url.trim_start_matches("http://").to_string();
    let mut s = TcpStream::connect(&addr).expect("connect");
    let body = json!({ "body": "sent in chunks" }).to_string();
    let (a, b) = body.split_at(7);
    let request = format!(
        "POST /repos/{REPO}/issues/1/comments HTTP/1.1\r\nHost: {addr}\r\n\
         Authorization: token {ALICE}\r\nContent-Type: application/json\r\n\
         Transfer-Encoding: chunked\r\n\r\n{:x}\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\n\r\n",
        a.len(),
        b.len()
    );
    s.write_all(request.as_bytes()).expect("write");
    let mut reply = String::new();
    s.read_to_string(&mut reply).expect("read");
    assert!(reply.starts_with("HTTP/1.1 201 Created\r\n"), "{reply}");
    assert!(reply.contains("Connection: close\r\n"), "{reply}");
    let (_, json) = reply.split_once("\r\n\r\n").expect("head and body");
    let c: Comment = serde_json::from_str(json).expect("comment");
    assert_eq!(c.body.as_deref(), Some("sent in chunks"));
    assert_eq!(c.user.login, "alice");
}

#[test]
fn octocrab_talks_to_the_emulator() {
    let f = Forge::new();
    let head = f.commit("feature", "lib.txt", "one\ntwo\nthree\nfour\n");
    f.open_pull("feature", "Add four");
    for i in 0..5 {
        f.emu.add_comment(1, "bob", &format!("c{i}"));
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let octo = octocrab::OctocrabBuilder::new()
            .base_uri(f.emu.url.as_str())
            .expect("base uri")
            .personal_token(ALICE.to_string())
            .build()
            .expect("octocrab");
        let pr: PullRequest = octo
            .get(format!("/repos/{REPO}/pulls/1"), None::<&()>)
            .await
            .expect("get pull");
        assert_eq!(pr.head.sha, head);

        let c: Comment = octo
            .post(
                format!("/repos/{REPO}/issues/1/comments"),
                Some(&json!({ "body": "via octocrab" })),
            )
            .await
            .expect("post comment");
        assert_eq!(c.user.login, "alice");

        let page: octocrab::Page<Comment> = octo
            .get(
                format!("/repos/{REPO}/issues/1/comments"),
                Some(&[("per_page", "2")]),
            )
            .await
            .expect("first page");
        assert!(page.next.is_some());
        assert!(page.last.is_some());
        let all = octo.all_pages(page).await.expect("all pages");
        assert_eq!(all.len(), 6);
        assert_eq!(all[5].body.as_deref(), Some("via octocrab"));

        let _: Status = octo
            .post(
                format!("/repos/{REPO}/statuses/{head}"),
                Some(&json!({ "state": "success", "context": "atelier/gate" })),
            )
            .await
            .expect("post status");
        let combined: CombinedStatus = octo
            .get(format!("/repos/{REPO}/commits/{head}/status"), None::<&()>)
            .await
            .expect("combined");
        assert_eq!(combined.state, StatusState::Success);

        let merged: Merge = octo
            .put(
                format!("/repos/{REPO}/pulls/1/merge"),
                Some(&json!({ "sha": head, "merge_method": "merge" })),
            )
            .await
            .expect("merge");
        assert!(merged.merged);

        let err = octo
            .put::<Merge, _, _>(
                format!("/repos/{REPO}/pulls/1/merge"),
                Some(&json!({ "sha": head })),
            )
            .await
            .expect_err("merged already");
        match err {
            octocrab::Error::GitHub { source, .. } => {
                assert_eq!(source.status_code.as_u16(), 405);
                assert_eq!(source.message, "Pull Request is not mergeable");
            }
            other => panic!("unexpected error {other:?}"),
        }

        let stranger = octocrab::OctocrabBuilder::new()
            .base_uri(f.emu.url.as_str())
            .expect("base uri")
            .personal_token("tok-mallory".to_string())
            .build()
            .expect("octocrab");
        let err = stranger
            .get::<PullRequest, _, ()>(format!("/repos/{REPO}/pulls/1"), None)
            .await
            .expect_err("bad credentials");
        match err {
            octocrab::Error::GitHub { source, .. } => {
                assert_eq!(source.status_code.as_u16(), 401);
                assert_eq!(source.message, "Bad credentials");
            }
            other => panic!("unexpected error {other:?}"),
        }
    });
    let logins: Vec<Option<String>> = f.emu.log().into_iter().map(|l| l.login).collect();
    assert!(logins.contains(&Some("alice".to_string())));
    assert_eq!(logins.last(), Some(&None));
}

/// Every operation Atelier uses, answered by the emulator, checked against GitHub's published
/// OpenAPI description (the vendored subset in tests/fixtures/github), error answers included.
#[test]
fn every_answer_matches_githubs_openapi_description() {
    let spec = crate::support::openapi::Spec::load();
    let f = Forge::new();
    let mut checked = Vec::new();
    let mut check = |method: &str, path: &str, r: &Reply| {
        let value: Value = if r.text.is_empty() {
            Value::Null
        } else {
            r.json()
        };
        let route = path.split('?').next().unwrap_or(path);
        // Errors an operation does not list use GitHub's generic error shapes.
        let result = match spec.documented(method, route, r.status) {
            Err(_) if r.status == 422 => spec.check("validation-error", &value),
            Err(_) if r.status >= 400 => spec.check("basic-error", &value),
            _ => spec.check_response(method, route, r.status, &value),
        };
        if let Err(errors) = result {
            panic!(
                "{method} {path} → {} does not match GitHub's description:\n  {}\n{}",
                r.status,
                errors.join("\n  "),
                r.text
            );
        }
        checked.push(format!("{method} {route} {}", r.status));
    };
    let mut call = |method: &str, rest: &str, token: &str, body: Option<Value>| {
        let path = f.api(rest);
        let r = f.call(method, &path, Some(token), body);
        check(method, &path, &r);
        r
    };
    call("GET", "", ALICE, None);
    f.commit("feature", "lib.txt", "one\ntwo\nfour\n");
    let created = call(
        "POST",
        "/pulls",
        ALICE,
        Some(json!({"title": "Change", "head": "feature", "base": "main", "body": "b"})),
    );
    assert_eq!(created.status, 201);
    let n = created.json()["number"].as_u64().expect("number");
    let head = created.json()["head"]["sha"]
        .as_str()
        .expect("sha")
        .to_string();
    // A second pull request from the same head: 422 with GitHub's validation-error shape.
    let dup = call(
        "POST",
        "/pulls",
        ALICE,
        Some(json!({"title": "Again", "head": "feature", "base": "main"})),
    );
    assert_eq!(dup.status, 422);
    call(
        "GET",
        "/pulls?state=all&head=acme:feature&per_page=100",
        ALICE,
        None,
    );
    call("GET", &format!("/pulls/{n}"), ALICE, None);
    call(
        "PATCH",
        &format!("/pulls/{n}"),
        ALICE,
        Some(json!({"title": "Changed", "body": "c"})),
    );
    for i in 0..3 {
        call(
            "POST",
            &format!("/issues/{n}/comments"),
            BOB,
            Some(json!({ "body": format!("comment {i}") })),
        );
    }
    let page = call(
        "GET",
        &format!("/issues/{n}/comments?per_page=2"),
        ALICE,
        None,
    );
    let id = page.json()[0]["id"].as_u64().expect("id");
    call(
        "PATCH",
        &format!("/issues/comments/{id}"),
        BOB,
        Some(json!({"body": "edited"})),
    );
    call(
        "POST",
        &format!("/issues/{n}/labels"),
        ALICE,
        Some(json!({"labels": ["atelier-proposal"]})),
    );
    f.emu.add_review(n, "bob", "APPROVED", "LGTM");
    call(
        "GET",
        &format!("/pulls/{n}/reviews?per_page=100"),
        ALICE,
        None,
    );
    call(
        "POST",
        &format!("/statuses/{head}"),
        ALICE,
        Some(
            json!({"state": "pending", "description": "waiting", "context": "atelier/governance"}),
        ),
    );
    let long = call(
        "POST",
        &format!("/statuses/{head}"),
        ALICE,
        Some(json!({"state": "success", "description": "x".repeat(141), "context": "c"})),
    );
    assert_eq!(long.status, 422);
    call("GET", &format!("/commits/{head}/status"), ALICE, None);
    let stale = call(
        "PUT",
        &format!("/pulls/{n}/merge"),
        ALICE,
        Some(json!({"sha": "0".repeat(40), "merge_method": "merge"})),
    );
    assert_eq!(stale.status, 409);
    let merged = call(
        "PUT",
        &format!("/pulls/{n}/merge"),
        ALICE,
        Some(
            json!({"sha": head, "merge_method": "merge", "commit_title": "t", "commit_message": "m"}),
        ),
    );
    assert_eq!(merged.status, 200);
    let again = call(
        "PUT",
        &format!("/pulls/{n}/merge"),
        ALICE,
        Some(json!({"sha": head, "merge_method": "merge"})),
    );
    assert_eq!(again.status, 405);
    call("GET", &format!("/pulls/{n}"), ALICE, None);
    let missing = call("GET", "/pulls/999", ALICE, None);
    assert_eq!(missing.status, 404);
    assert!(checked.len() >= 20, "{checked:?}");
}
