//! GitHub's REST API through octocrab: the calls the GitHub forge makes, each with what it is for
//! and the permission it needs, so a refusal names both. Retries (5xx, secondary rate limits)
//! are bounded and decided here, once; every answer is read into octocrab's models.
//!
//! The token comes from `ATELIER_GITHUB_TOKEN` or `GITHUB_TOKEN`, lives only inside octocrab
//! (a `SecretString`), and is never printed. Nothing here decides whether a change may merge.

use std::time::Duration;

use crate::forge::{ForgeError as Error, Result};
use http::{HeaderMap, Method, StatusCode};
use http_body_util::BodyExt;
use octocrab::models::issues::Comment as GhComment;
use octocrab::models::pulls::{PullRequest as GhPull, Review};
use octocrab::models::Status;
use octocrab::Octocrab;
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use crate::config::ForgeConfig;
use crate::forge::Comment;

/// Where the token is read from, in order.
pub const TOKEN_VARS: [&str; 2] = ["ATELIER_GITHUB_TOKEN", "GITHUB_TOKEN"];
/// Tests shorten the backoff with this (milliseconds of the first wait).
pub const BACKOFF_VAR: &str = "ATELIER_GITHUB_BACKOFF_MS";
/// The longest wait a rate limit may ask for before we give up instead.
const MAX_WAIT: Duration = Duration::from_secs(60);
const ATTEMPTS: u32 = 5;
const MAX_PAGES: usize = 200;

/// A GitHub repository through the REST API. Blocking: each call runs on a private
/// current-thread runtime, so the sync workflow and `serve`'s worker threads can share it.
pub struct GitHub {
    rt: tokio::runtime::Runtime,
    octo: Octocrab,
    pub owner: String,
    pub name: String,
    api_url: String,
    has_token: bool,
    backoff: Duration,
}

/// One request, with the words an error needs.
struct Call<'a> {
    method: Method,
    path: String,
    body: Option<Value>,
    /// What the call does, for messages: "read pull request #3".
    what: &'a str,
    /// The fine-grained permission it needs: "Pull requests: read".
    permission: &'static str,
}

/// An answer: status, headers, body text.
struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    body: String,
}

impl Reply {
    /// GitHub's `message` field, if the body has one.
    fn message(&self) -> String {
        let v: Value = serde_json::from_str(&self.body).unwrap_or(Value::Null);
        let mut msg = v["message"].as_str().unwrap_or("").to_string();
        if let Some(errors) = v["errors"].as_array() {
            for e in errors {
                let detail = e["message"]
                    .as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| e.to_string());
                msg.push_str(&format!("; {detail}"));
            }
        }
        if msg.is_empty() {
            msg = self.body.chars().take(200).collect();
        }
        msg
    }

    /// Whether a 422 answer's errors say that a pull request exists already (GitHub's
    /// `errors[].message`: "A pull request already exists for owner:branch.").
    fn says_pull_exists(&self) -> bool {
        let v: Value = serde_json::from_str(&self.body).unwrap_or(Value::Null);
        v["errors"].as_array().is_some_and(|errors| {
            errors.iter().any(|e| {
                e["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("A pull request already exists"))
            })
        })
    }
}

impl std::fmt::Debug for GitHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitHub")
            .field("repository", &format!("{}/{}", self.owner, self.name))
            .field("api_url", &self.api_url)
            .field("token", &if self.has_token { "[set]" } else { "[none]" })
            .finish()
    }
}

/// The token from the environment, if one is set (empty values do not count).
pub fn token_from_env() -> Option<String> {
    TOKEN_VARS
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|t| !t.trim().is_empty()))
}

impl GitHub {
    /// Connects to the configured repository. `need_token`: refuse to start without one.
    pub fn connect(forge: &ForgeConfig, need_token: bool) -> Result<GitHub> {
        if !forge.is_github() {
            return Err(Error::Input(format!(
                "this command needs [forge] kind = \"github\" in atelier.toml (it is \"{}\"); see docs/github.md",
                forge.kind
            )));
        }
        let (owner, name) = forge
            .repository
            .split_once('/')
            .ok_or_else(|| Error::Input("[forge] repository must be `owner/name`".into()))?;
        let token = token_from_env();
        if need_token && token.is_none() {
            return Err(Error::Input(format!(
                "no GitHub token: set GITHUB_TOKEN (or ATELIER_GITHUB_TOKEN) to a token that may act on {} (docs/github.md lists the permissions)",
                forge.repository
            )));
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::Remote(format!("starting the HTTP runtime: {e}")))?;
        let has_token = token.is_some();
        let octo = {
            let _guard = rt.enter();
            let mut b = octocrab::OctocrabBuilder::new()
                .base_uri(forge.api_url.as_str())
                .map_err(|e| {
                    Error::Input(format!(
                        "[forge] api_url = \"{}\" is not a URL: {e}",
                        forge.api_url
                    ))
                })?
                .set_connect_timeout(Some(Duration::from_secs(15)))
                .set_read_timeout(Some(Duration::from_secs(60)));
            if let Some(t) = token {
                b = b.personal_token(t);
            }
            b.build()
                .map_err(|e| Error::Remote(format!("building the GitHub client: {e}")))?
        };
        let backoff = std::env::var(BACKOFF_VAR)
            .ok()
            .and_then(|v| v.parse().ok())
            .map(Duration::from_millis)
            .unwrap_or(Duration::from_millis(1000));
        Ok(GitHub {
            rt,
            octo,
            owner: owner.to_string(),
            name: name.to_string(),
            api_url: forge.api_url.trim_end_matches('/').to_string(),
            has_token,
            backoff,
        })
    }

    /// Whether a token was found (requests without one are anonymous).
    pub fn has_token(&self) -> bool {
        self.has_token
    }

    pub fn repository(&self) -> String {
        format!("{}/{}", self.owner, self.name)
    }

    fn repo_path(&self, rest: &str) -> String {
        format!("/repos/{}/{}{rest}", self.owner, self.name)
    }

    fn once(&self, call: &Call) -> Result<Reply, String> {
        self.rt.block_on(async {
            let path = call.path.as_str();
            let resp = match call.method {
                Method::GET => self.octo._get(path).await,
                Method::POST => self.octo._post(path, call.body.as_ref()).await,
                Method::PATCH => self.octo._patch(path, call.body.as_ref()).await,
                Method::PUT => self.octo._put(path, call.body.as_ref()).await,
                Method::DELETE => self.octo._delete(path, call.body.as_ref()).await,
                _ => unreachable!("only the methods above are used"),
            }
            .map_err(|e| format!("could not reach {}: {e}", self.api_url))?;
            let status = resp.status();
            let headers = resp.headers().clone();
            let bytes = resp
                .into_body()
                .collect()
                .await
                .map_err(|e| format!("reading GitHub's answer: {e}"))?
                .to_bytes();
            Ok(Reply {
                status,
                headers,
                body: String::from_utf8_lossy(&bytes).into_owned(),
            })
        })
    }

    /// Sends a call, retrying server errors, secondary rate limits and dropped connections with
    /// bounded exponential backoff. Answers 2xx, and 4xx other than 401/403/404, are returned for
    /// the caller to read; those three become errors that name the token, permission or object.
    fn send(&self, call: Call) -> Result<Reply> {
        let mut last = String::new();
        for attempt in 0..ATTEMPTS {
            let wait = match self.once(&call) {
                Err(e) => {
                    last = e;
                    self.backoff * 2u32.pow(attempt)
                }
                Ok(r) => match classify(&r) {
                    Verdict::Done => return Ok(r),
                    Verdict::Fail => return Err(self.failure(&call, &r)),
                    Verdict::Retry(asked) => {
                        last = format!("{} {}", r.status.as_u16(), r.message());
                        let wait = asked.unwrap_or(self.backoff * 2u32.pow(attempt));
                        if wait > MAX_WAIT {
                            return Err(Error::Remote(format!(
                                "GitHub's rate limit asks to wait {}s before trying to {} again ({last}); try again later",
                                wait.as_secs(),
                                call.what
                            )));
                        }
                        wait
                    }
                },
            };
            if attempt + 1 < ATTEMPTS {
                std::thread::sleep(wait);
            }
        }
        Err(Error::Remote(format!(
            "GitHub did not answer successfully after {ATTEMPTS} attempts to {} ({last}); nothing more was tried — run the command again later",
            call.what
        )))
    }

    fn failure(&self, call: &Call, r: &Reply) -> Error {
        let msg = r.message();
        match r.status.as_u16() {
            401 if !self.has_token => Error::Remote(format!(
                "GitHub needs a token to {} (401 {msg}): set GITHUB_TOKEN or ATELIER_GITHUB_TOKEN",
                call.what
            )),
            401 => Error::Remote(format!(
                "GitHub rejected the token (401 {msg}) while trying to {}: set GITHUB_TOKEN or ATELIER_GITHUB_TOKEN to a valid, unexpired token",
                call.what
            )),
            403 => {
                let accepted = r
                    .headers
                    .get("x-accepted-github-permissions")
                    .and_then(|v| v.to_str().ok())
                    .map(|v| format!(" (GitHub accepts: {v})"))
                    .unwrap_or_default();
                Error::Remote(format!(
                    "GitHub refused to {} (403 {msg}): the token needs the `{}` permission on {}{accepted}",
                    call.what,
                    call.permission,
                    self.repository()
                ))
            }
            _ => Error::Remote(format!(
                "GitHub could not find what is needed to {} (404 {msg}): check `repository = \"{}\"` in atelier.toml, the pull request number, and that the token can read the repository",
                call.what,
                self.repository()
            )),
        }
    }

    fn json<T: DeserializeOwned>(&self, call: Call) -> Result<T> {
        let what = call.what.to_string();
        let r = self.send(call)?;
        read(&r, &what)
    }

    /// Every page of a list, following `Link: <…>; rel="next"`.
    fn all_pages<T: DeserializeOwned>(
        &self,
        first: String,
        what: &str,
        permission: &'static str,
    ) -> Result<Vec<T>> {
        let mut out = Vec::new();
        let mut next = Some(first);
        let mut pages = 0;
        while let Some(path) = next.take() {
            pages += 1;
            if pages > MAX_PAGES {
                return Err(Error::Remote(format!(
                    "more than {MAX_PAGES} pages while trying to {what}; refusing to read further"
                )));
            }
            let r = self.send(Call {
                method: Method::GET,
                path,
                body: None,
                what,
                permission,
            })?;
            let mut items: Vec<T> = read(&r, what)?;
            out.append(&mut items);
            if let Some(url) = next_link(&r.headers) {
                next = Some(self.relative(&url).ok_or_else(|| {
                    Error::Remote(format!(
                        "GitHub's next page while trying to {what} points elsewhere: {url}"
                    ))
                })?);
            }
        }
        Ok(out)
    }

    /// A URL on this API as a path (octocrab sends the token only with relative requests).
    fn relative(&self, url: &str) -> Option<String> {
        let rest = url.strip_prefix(&self.api_url)?;
        rest.starts_with('/').then(|| rest.to_string())
    }

    fn raw_pull(&self, n: u64) -> Result<GhPull> {
        self.json(Call {
            method: Method::GET,
            path: self.repo_path(&format!("/pulls/{n}")),
            body: None,
            what: &format!("read pull request #{n}"),
            permission: "Pull requests: read",
        })
    }

    pub fn pull(&self, n: u64) -> Result<RemotePull> {
        Ok(RemotePull::from(self.raw_pull(n)?))
    }

    /// Open pull requests (all pages).
    pub fn open_pulls(&self) -> Result<Vec<RemotePull>> {
        let all: Vec<GhPull> = self.all_pages(
            self.repo_path("/pulls?state=open&per_page=100"),
            "list open pull requests",
            "Pull requests: read",
        )?;
        Ok(all.into_iter().map(RemotePull::from).collect())
    }

    /// Pull requests from `branch` of this repository, in any state, newest first.
    pub fn pulls_from(&self, branch: &str) -> Result<Vec<RemotePull>> {
        let head = format!("{}:{branch}", self.owner);
        let all: Vec<GhPull> = self.all_pages(
            self.repo_path(&format!(
                "/pulls?state=all&per_page=100&head={}",
                percent(&head)
            )),
            &format!("find pull requests from {branch}"),
            "Pull requests: read",
        )?;
        Ok(all.into_iter().map(RemotePull::from).collect())
    }

    /// Opens a pull request; [`Created::Exists`] when GitHub answers that one from `head` into
    /// `base` already exists (a retried create whose first attempt succeeded, say).
    pub fn create_pull(&self, title: &str, head: &str, base: &str, body: &str) -> Result<Created> {
        let what = format!("open a pull request from {head} into {base}");
        let r = self.send(Call {
            method: Method::POST,
            path: self.repo_path("/pulls"),
            body: Some(json!({"title": title, "head": head, "base": base, "body": body})),
            what: &what,
            permission: "Pull requests: write",
        })?;
        if r.status == StatusCode::UNPROCESSABLE_ENTITY && r.says_pull_exists() {
            return Ok(Created::Exists(format!(
                "GitHub refused to {what}: {} {}",
                r.status.as_u16(),
                r.message()
            )));
        }
        Ok(Created::Opened(RemotePull::from(read::<GhPull>(
            &r, &what,
        )?)))
    }

    pub fn update_pull(&self, n: u64, title: &str, body: &str) -> Result<RemotePull> {
        let p: GhPull = self.json(Call {
            method: Method::PATCH,
            path: self.repo_path(&format!("/pulls/{n}")),
            body: Some(json!({"title": title, "body": body})),
            what: &format!("update pull request #{n}"),
            permission: "Pull requests: write",
        })?;
        Ok(RemotePull::from(p))
    }

    pub fn close_pull(&self, n: u64) -> Result<()> {
        let _: GhPull = self.json(Call {
            method: Method::PATCH,
            path: self.repo_path(&format!("/pulls/{n}")),
            body: Some(json!({"state": "closed"})),
            what: &format!("close pull request #{n}"),
            permission: "Pull requests: write",
        })?;
        Ok(())
    }

    pub fn add_label(&self, n: u64, label: &str) -> Result<()> {
        let _: Vec<Value> = self.json(Call {
            method: Method::POST,
            path: self.repo_path(&format!("/issues/{n}/labels")),
            body: Some(json!({ "labels": [label] })),
            what: &format!("label pull request #{n} `{label}`"),
            permission: "Pull requests: write",
        })?;
        Ok(())
    }

    /// Every comment on a pull request (all pages), oldest first. Line endings are normalised
    /// (GitHub's web editor stores CRLF); nothing else is trusted.
    pub fn comments(&self, n: u64) -> Result<Vec<Comment>> {
        let all: Vec<GhComment> = self.all_pages(
            self.repo_path(&format!("/issues/{n}/comments?per_page=100")),
            &format!("read the comments of pull request #{n}"),
            "Pull requests: read",
        )?;
        Ok(all
            .into_iter()
            .map(|c| Comment {
                id: c.id.into_inner(),
                author: c.user.login.clone(),
                body: c.body.unwrap_or_default().replace("\r\n", "\n"),
                at: c.created_at.timestamp(),
            })
            .collect())
    }

    /// The non-empty bodies of a pull request's reviews (all pages), as comments whose author
    /// is marked [`REVIEW_TAG`] (their ids are review ids, not comment ids).
    pub fn review_bodies(&self, n: u64) -> Result<Vec<Comment>> {
        let all: Vec<Review> = self.all_pages(
            self.repo_path(&format!("/pulls/{n}/reviews?per_page=100")),
            &format!("read the reviews of pull request #{n}"),
            "Pull requests: read",
        )?;
        Ok(all
            .into_iter()
            .filter_map(|r| {
                let body = r.body.filter(|b| !b.is_empty())?;
                Some(Comment {
                    id: r.id.into_inner(),
                    author: format!(
                        "{REVIEW_TAG}{}",
                        r.user.map(|u| u.login).unwrap_or_default()
                    ),
                    body: body.replace("\r\n", "\n"),
                    at: r.submitted_at.map(|t| t.timestamp()).unwrap_or(0),
                })
            })
            .collect())
    }

    /// Posts a comment; returns its id and web address.
    pub fn post_comment(&self, n: u64, body: &str) -> Result<(u64, String)> {
        let c: GhComment = self.json(Call {
            method: Method::POST,
            path: self.repo_path(&format!("/issues/{n}/comments")),
            body: Some(json!({ "body": body })),
            what: &format!("comment on pull request #{n}"),
            permission: "Pull requests: write",
        })?;
        Ok((c.id.into_inner(), c.html_url.to_string()))
    }

    /// Edits a comment; `Ok(false)` when GitHub will not let this token edit it (not ours).
    pub fn edit_comment(&self, id: u64, body: &str) -> Result<bool> {
        let what = format!("edit comment {id}");
        let call = Call {
            method: Method::PATCH,
            path: self.repo_path(&format!("/issues/comments/{id}")),
            body: Some(json!({ "body": body })),
            what: &what,
            permission: "Pull requests: write",
        };
        // Not ours (403) or gone (404): the caller posts a new comment instead. Anything but
        // success or those goes through the retrying path.
        match self.once(&call) {
            Ok(r) if r.status == StatusCode::FORBIDDEN || r.status == StatusCode::NOT_FOUND => {
                Ok(false)
            }
            Ok(r) if r.status.is_success() => {
                let _: GhComment = read(&r, &what)?;
                Ok(true)
            }
            _ => {
                let _: GhComment = self.json(call)?;
                Ok(true)
            }
        }
    }

    /// The token's own account, or `None` where GitHub does not say (an Actions or app
    /// installation token answers `GET /user` with 403).
    pub fn login(&self) -> Result<Option<String>> {
        let call = Call {
            method: Method::GET,
            path: "/user".into(),
            body: None,
            what: "read the token's own account",
            permission: "none (any token)",
        };
        match self.once(&call) {
            Ok(r) if r.status == StatusCode::FORBIDDEN || r.status == StatusCode::NOT_FOUND => {
                Ok(None)
            }
            Ok(r) if r.status.is_success() => {
                let v: Value = read(&r, call.what)?;
                Ok(v["login"].as_str().map(str::to_string))
            }
            _ => {
                let v: Value = self.json(call)?;
                Ok(v["login"].as_str().map(str::to_string))
            }
        }
    }

    pub fn set_status(
        &self,
        sha: &str,
        state: CommitStatus,
        description: &str,
        context: &str,
    ) -> Result<()> {
        let _: Status = self.json(Call {
            method: Method::POST,
            path: self.repo_path(&format!("/statuses/{sha}")),
            body: Some(
                json!({"state": state.as_str(), "description": description, "context": context}),
            ),
            what: &format!("set the `{context}` status on {sha}"),
            permission: "Commit statuses: write",
        })?;
        Ok(())
    }

    /// Merges with GitHub's `sha` precondition: 200 merged, 409 the head moved, anything else
    /// (405 not mergeable, 422 invalid) refused with GitHub's words.
    pub fn merge(&self, n: u64, sha: &str, title: &str, message: &str) -> Result<MergeAnswer> {
        let what = format!("merge pull request #{n}");
        let reply = self.send(Call {
            method: Method::PUT,
            path: self.repo_path(&format!("/pulls/{n}/merge")),
            body: Some(json!({
                "sha": sha,
                "merge_method": "merge",
                "commit_title": title,
                "commit_message": message,
            })),
            what: &what,
            permission: "Contents: write",
        })?;
        Ok(match reply.status.as_u16() {
            200 => {
                let v: Value = read(&reply, &what)?;
                MergeAnswer::Merged(v["sha"].as_str().unwrap_or_default().to_string())
            }
            409 => MergeAnswer::HeadMoved(format!("GitHub answered 409: {}", reply.message())),
            s => MergeAnswer::Refused(format!("GitHub answered {s}: {}", reply.message())),
        })
    }
}

/// What GitHub answered a guarded merge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MergeAnswer {
    Merged(String),
    HeadMoved(String),
    Refused(String),
}

/// Marks a carrier that is a review body (its id is a review id, not a comment id).
pub const REVIEW_TAG: &str = "review by ";

/// A pull request as GitHub reports it, in plain fields (octocrab's model stays in this file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemotePull {
    pub number: u64,
    pub title: String,
    pub open: bool,
    pub merged: bool,
    pub merge_commit: Option<String>,
    pub merged_by: Option<String>,
    pub base_ref: String,
    pub head_ref: String,
    /// `owner/name` of the repository the head branch lives in.
    pub head_repo: String,
    pub head_sha: String,
    pub created: i64,
    pub url: String,
}

impl From<GhPull> for RemotePull {
    fn from(p: GhPull) -> RemotePull {
        RemotePull {
            number: p.number,
            title: p.title.clone().unwrap_or_default(),
            open: matches!(p.state, Some(octocrab::models::IssueState::Open)),
            merged: p.merged_at.is_some(),
            merge_commit: p.merge_commit_sha.clone(),
            merged_by: p.merged_by.as_ref().map(|a| a.login.clone()),
            base_ref: p.base.ref_field.clone(),
            head_ref: p.head.ref_field.clone(),
            head_repo: p
                .head
                .repo
                .as_ref()
                .and_then(|r| r.full_name.clone())
                .unwrap_or_default(),
            head_sha: p.head.sha.clone(),
            created: p.created_at.map(|t| t.timestamp()).unwrap_or(0),
            url: p
                .html_url
                .as_ref()
                .map(|u| u.to_string())
                .unwrap_or_default(),
        }
    }
}

/// A commit status's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitStatus {
    Pending,
    Success,
    Failure,
}

impl CommitStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            CommitStatus::Pending => "pending",
            CommitStatus::Success => "success",
            CommitStatus::Failure => "failure",
        }
    }
}

enum Verdict {
    Done,
    Fail,
    /// Try again, after the wait GitHub asked for if it did.
    Retry(Option<Duration>),
}

fn classify(r: &Reply) -> Verdict {
    let s = r.status.as_u16();
    let header = |name: &str| {
        r.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    let retry_after = header("retry-after")
        .and_then(|v| v.parse::<u64>().ok())
        .map(Duration::from_secs);
    let exhausted = header("x-ratelimit-remaining") == Some("0");
    let reset_wait = header("x-ratelimit-reset")
        .and_then(|v| v.parse::<u64>().ok())
        .map(|reset| {
            let now = crate::clock::wall_seconds();
            Duration::from_secs(reset.saturating_sub(now) + 1)
        });
    let rate_limited = (s == 403 || s == 429)
        && (retry_after.is_some()
            || exhausted
            || r.message().to_ascii_lowercase().contains("rate limit"));
    match s {
        200..=299 => Verdict::Done,
        _ if rate_limited => {
            Verdict::Retry(retry_after.or(if exhausted { reset_wait } else { None }))
        }
        500..=599 => Verdict::Retry(retry_after),
        401 | 403 | 404 => Verdict::Fail,
        _ => Verdict::Done,
    }
}

/// What opening a pull request did.
pub enum Created {
    Opened(RemotePull),
    /// GitHub has one from that branch into that base already: its words.
    Exists(String),
}

/// Reads a successful answer into a model; any other status is an error naming GitHub's message.
fn read<T: DeserializeOwned>(r: &Reply, what: &str) -> Result<T> {
    if !r.status.is_success() {
        return Err(Error::Remote(format!(
            "GitHub refused to {what}: {} {}",
            r.status.as_u16(),
            r.message()
        )));
    }
    serde_json::from_str(&r.body).map_err(|e| {
        Error::Remote(format!(
            "GitHub's answer while trying to {what} is not the documented shape: {e}"
        ))
    })
}

/// The `rel="next"` URL of a `Link` header.
fn next_link(headers: &HeaderMap) -> Option<String> {
    let link = headers.get("link")?.to_str().ok()?;
    link.split(',').find_map(|part| {
        let (url, params) = part.split_once(';')?;
        params
            .split(';')
            .any(|p| p.trim() == "rel=\"next\"")
            .then(|| {
                url.trim()
                    .trim_start_matches('<')
                    .trim_end_matches('>')
                    .to_string()
            })
    })
}

/// Percent-encodes a query value.
fn percent(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(status: u16, headers: &[(&str, &str)], body: &str) -> Reply {
        let mut h = HeaderMap::new();
        for (k, v) in headers {
            h.insert(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        Reply {
            status: StatusCode::from_u16(status).unwrap(),
            headers: h,
            body: body.into(),
        }
    }

    #[test]
    fn classifies_answers() {
        type Case<'a> = (u16, &'a [(&'a str, &'a str)], &'a str, &'a str);
        let cases: &[Case] = &[
            (200, &[], "{}", "done"),
            (500, &[], "{}", "retry"),
            (502, &[], "", "retry"),
            (403, &[("retry-after", "2")], "{}", "retry 2"),
            (
                429,
                &[],
                r#"{"message":"You have exceeded a secondary rate limit"}"#,
                "retry",
            ),
            (403, &[("x-ratelimit-remaining", "0")], "{}", "retry"),
            (
                403,
                &[],
                r#"{"message":"Resource not accessible by integration"}"#,
                "fail",
            ),
            (401, &[], "{}", "fail"),
            (404, &[], "{}", "fail"),
            (409, &[], "{}", "done"),
            (422, &[], "{}", "done"),
        ];
        for (status, headers, body, want) in cases {
            let got = match classify(&reply(*status, headers, body)) {
                Verdict::Done => "done".to_string(),
                Verdict::Fail => "fail".to_string(),
                Verdict::Retry(None) => "retry".to_string(),
                Verdict::Retry(Some(d))
                    if d.as_secs() < 60
                        && *status == 403
                        && headers.iter().any(|h| h.0 == "retry-after") =>
                {
                    format!("retry {}", d.as_secs())
                }
                Verdict::Retry(Some(_)) => "retry".to_string(),
            };
            assert_eq!(&got, want, "status {status} headers {headers:?}");
        }
    }

    #[test]
    fn follows_next_links() {
        let r = reply(
            200,
            &[(
                "link",
                r#"<https://api.github.com/repos/o/r/issues/1/comments?page=2>; rel="next", <https://api.github.com/repos/o/r/issues/1/comments?page=5>; rel="last""#,
            )],
            "[]",
        );
        assert_eq!(
            next_link(&r.headers).as_deref(),
            Some("https://api.github.com/repos/o/r/issues/1/comments?page=2")
        );
        let last = reply(200, &[("link", r#"<https://x/?page=1>; rel="prev""#)], "[]");
        assert_eq!(next_link(&last.headers), None);
        assert_eq!(
            percent("o:atelier/proposals/1"),
            "o%3Aatelier%2Fproposals%2F1"
        );
    }
}
