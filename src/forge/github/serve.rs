//! `atelier serve`: GitHub's webhook deliveries trigger the same stateless gate as `gate --pr`.
//!
//! A delivery counts only with a valid `X-Hub-Signature-256` (HMAC-SHA256 of the body under
//! `ATELIER_WEBHOOK_SECRET`); anything else is answered 401 and nothing is done. A delivery id
//! seen before is ignored. One worker thread drains a queue of pull requests to evaluate, one
//! evaluation at a time (each takes the repository lock); a pull request named by a burst of
//! deliveries is queued once, so the burst becomes one evaluation.
//! Nothing a delivery says is trusted beyond "look at pull request n again" (and the comment
//! body it carries, whose tokens are recorded): the gate re-reads everything from GitHub and
//! git, so a repeated delivery is harmless, and a missed one is caught up by the next
//! evaluation of the pull request (which reads its comments).
//!
//! Anyone who can reach the URL can connect, so nothing unauthenticated may hold what a genuine
//! delivery needs: a signature header of the wrong shape is refused before the body is read;
//! a body must start within `first_byte`, end within `body` (tight: GitHub sends it at once)
//! and bring `min_rate` bytes a second in every `rate_window` meanwhile; memory for bodies is a
//! shared byte budget taken as bytes arrive, so a connection that declares a large body and
//! stalls holds none of what it has not sent, and a body that does not fit evicts the stalest
//! unfinished upload (`budget.rs`) rather than be refused; headers must be complete within
//! `headers`; and when every connection slot is taken, the connection not yet proven that has
//! shown least (nothing, then part of its headers, then headers without a body), the stalest
//! among equals, is closed to make room, and a newcomer is refused rather than close a body that
//! is arriving (`slots.rs`).

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use serde_json::Value;

use super::client::GitHub;
use super::slots::{Progress, Shown, Slots, Watched};
use crate::forge::{Comment, ForgeError as Error, Result};

/// A failure of the governed loop's work on a delivery, shown to the operator as a line.
pub type Failure = Box<dyn std::error::Error + Send + Sync>;

/// What the receiver asks of the governed loop (`atelier serve` gives it the gate: the
/// workflow's `serve::Gatekeeper`), and where it tells the operator what happened. The receiver
/// checks, deduplicates and queues deliveries; the handler does the work, one pull request at a
/// time, on the receiver's one worker thread.
pub trait Handler: Send + Sync {
    /// Records the tokens of comment bodies delivered for pull request `n`: how many were. An
    /// error means nothing was recorded (the receiver keeps the bodies for the next evaluation).
    fn record_delivered(
        &self,
        n: u64,
        delivered: &[Comment],
    ) -> std::result::Result<usize, Failure>;
    /// Evaluates pull request `n`, `pending` first when a new head arrived, reading `delivered`
    /// as carriers too (and merges it, where the configuration says so).
    fn evaluate(
        &self,
        n: u64,
        pending: bool,
        delivered: Vec<Comment>,
    ) -> std::result::Result<(), Failure>;
    /// A line for the operator (stderr).
    fn note(&self, line: &str);
    /// The address the receiver listens on, once it does (stdout).
    fn listening(&self, at: SocketAddr);
}

/// Where the webhook secret comes from.
pub const SECRET_VAR: &str = "ATELIER_WEBHOOK_SECRET";
/// The largest delivery read. GitHub caps payloads at 25 MB, but the events the gate uses are
/// small; a larger one is refused (413) and is harmless to miss (`gate --pr` catches up).
const MAX_BODY: usize = 5 * 1024 * 1024;
/// Bytes of bodies held at once, across all connections, taken as they arrive: bytes a sender
/// has not sent hold nothing, and beyond, the stalest unfinished upload is evicted
/// (`budget.rs`).
const BODY_BUDGET: usize = 32 * 1024 * 1024;
/// Of which one peer address may hold at most this much.
const PEER_SHARE: usize = 16 * 1024 * 1024;
/// Open connections at once; beyond, the one not yet authenticated that has shown least is
/// closed (`slots.rs`).
const CONNECTIONS_MAX: usize = 256;

/// How long a client may take to send each part of a request.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// From accepting the connection (or the previous request) to the end of the headers.
    pub headers: std::time::Duration,
    /// From the end of the headers to the first byte of the body.
    pub first_byte: std::time::Duration,
    /// From the end of the headers to the end of the body.
    pub body: std::time::Duration,
    /// Once the body has started, every `rate_window` must bring at least `min_rate` bytes per
    /// second of it (or the rest of it), or the upload is dropped (408) and its share released.
    pub rate_window: std::time::Duration,
    /// Bytes per second.
    pub min_rate: u64,
}

/// After this long on one evaluation, `/healthz` answers 503.
const STALLED_SECS: u64 = 180;

/// Delivery ids remembered for de-duplication.
const REMEMBERED: usize = 10_000;

/// What a delivery asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Work {
    /// Evaluate pull request `n`; first mark `pending` on this head, if given; read the
    /// delivered comment (id, author, body) as a token carrier too.
    Gate {
        pull: u64,
        pending_on: Option<String>,
        delivered: Option<(u64, String, String)>,
    },
    /// The protected branch moved: evaluate every open proposal pull request.
    RegateAll,
    Nothing(&'static str),
}

impl Work {
    /// For the log: never the delivered body.
    fn describe(&self) -> String {
        match self {
            Work::Gate { pull, .. } => format!("evaluate pull request #{pull}"),
            Work::RegateAll => "evaluate every open proposal".into(),
            Work::Nothing(why) => format!("nothing ({why})"),
        }
    }
}

/// Reads a verified delivery: which event, for which pull request.
pub fn route(event: &str, payload: &Value, repository: &str, branch: &str) -> Work {
    let full_name = payload["repository"]["full_name"].as_str().unwrap_or("");
    if event == "ping" {
        return Work::Nothing("pong");
    }
    if !full_name.eq_ignore_ascii_case(repository) {
        return Work::Nothing("not this repository");
    }
    let action = payload["action"].as_str().unwrap_or("");
    match event {
        "pull_request" => match action {
            "opened" | "synchronize" | "reopened" => {
                match payload["pull_request"]["number"].as_u64() {
                    Some(n) => Work::Gate {
                        pull: n,
                        pending_on: payload["pull_request"]["head"]["sha"]
                            .as_str()
                            .map(str::to_string),
                        delivered: None,
                    },
                    None => Work::Nothing("no pull request number"),
                }
            }
            "edited" => match payload["pull_request"]["number"].as_u64() {
                // A retargeted base changes what merges.
                Some(n) => Work::Gate {
                    pull: n,
                    pending_on: None,
                    delivered: None,
                },
                None => Work::Nothing("no pull request number"),
            },
            _ => Work::Nothing("pull_request action not relevant"),
        },
        "issue_comment" => {
            if payload["issue"]["pull_request"].is_null() {
                return Work::Nothing("comment on an issue, not a pull request");
            }
            // The gate's own summary: evaluating again because of it would never end. (Anyone
            // can start a comment with the marker; it then merely triggers nothing, and it is
            // never authority either way.)
            if payload["comment"]["body"]
                .as_str()
                .is_some_and(|b| b.starts_with(super::SUMMARY_MARKER))
            {
                return Work::Nothing("the gate's own summary comment");
            }
            // The body as GitHub delivered it (signed): on `deleted` it is the only copy left.
            let comment = &payload["comment"];
            let delivered = match (comment["id"].as_u64(), comment["body"].as_str()) {
                (Some(id), Some(body)) => Some((
                    id,
                    format!(
                        "delivered: {}",
                        comment["user"]["login"].as_str().unwrap_or("")
                    ),
                    body.replace("\r\n", "\n"),
                )),
                _ => None,
            };
            match (action, payload["issue"]["number"].as_u64()) {
                ("created" | "edited" | "deleted", Some(n)) => Work::Gate {
                    pull: n,
                    pending_on: None,
                    delivered,
                },
                _ => Work::Nothing("issue_comment action not relevant"),
            }
        }
        "pull_request_review" => match payload["pull_request"]["number"].as_u64() {
            Some(n) => Work::Gate {
                pull: n,
                pending_on: None,
                delivered: None,
            },
            None => Work::Nothing("no pull request number"),
        },
        "push" => {
            if payload["ref"].as_str() == Some(&format!("refs/heads/{branch}")) {
                Work::RegateAll
            } else {
                Work::Nothing("push to another branch")
            }
        }
        _ => Work::Nothing("event not handled"),
    }
}

/// Whether a signature header has the only shape GitHub sends: `sha256=` and 64 hex digits.
pub fn signature_shape_ok(header: &str) -> bool {
    header
        .strip_prefix("sha256=")
        .is_some_and(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Checks `X-Hub-Signature-256: sha256=<hex>` with octocrab's verifier (HMAC-SHA256, compared
/// in constant time), on a header of the only shape GitHub sends.
pub fn signature_ok(secret: &[u8], body: &[u8], header: Option<&str>) -> bool {
    header.is_some_and(|h| {
        signature_shape_ok(h)
            && octocrab::models::webhook_events::verify_signature(h, secret, body).is_ok()
    })
}

/// The most delivered comment bodies kept per pull request until an evaluation reads them.
const DELIVERED_MAX: usize = 100;
/// And across all pull requests.
const DELIVERED_TOTAL: usize = 2000;

/// Keeps a delivered comment body that carries a token, once; when full, new ones are dropped
/// (never the older ones, which a flood could otherwise push out).
fn keep_delivered(kept: &mut Vec<Comment>, c: Comment) {
    let carries = !crate::governance::token::RawToken::extract_all(&c.body).is_empty();
    if carries && kept.len() < DELIVERED_MAX && !kept.iter().any(|k| k.body == c.body) {
        kept.push(c);
    }
}

/// What a delivery left for the worker about one pull request.
#[derive(Default)]
struct PullQueue {
    pending_on: Option<String>,
    delivered: Vec<Comment>,
}

/// The worker's work: pull requests to evaluate, each once however many deliveries named it
/// (a burst becomes one evaluation), in the order first named; and whether every open proposal
/// is to be evaluated (after a push to the protected branch).
#[derive(Default)]
struct Queue {
    pulls: HashMap<u64, PullQueue>,
    ready: VecDeque<u64>,
    all: bool,
}

impl Queue {
    fn delivered_total(&self) -> usize {
        self.pulls.values().map(|e| e.delivered.len()).sum()
    }

    fn mark_ready(&mut self, n: u64) {
        if !self.ready.contains(&n) {
            self.ready.push_back(n);
        }
    }
}

struct Shared {
    root: PathBuf,
    secret: Vec<u8>,
    repository: String,
    branch: String,
    handler: Arc<dyn Handler>,
    seen: Mutex<(HashSet<String>, VecDeque<String>)>,
    queue: Mutex<Queue>,
    /// Wakes the worker when there is work.
    wake: std::sync::Condvar,
    /// Whether the worker is running (`/healthz` says so).
    worker_alive: std::sync::atomic::AtomicBool,
    /// What the worker is doing, and since when (wall-clock seconds): `/healthz` reports a
    /// worker stuck on one evaluation.
    busy: Mutex<Option<(u64, u64)>>,
    budget: super::budget::Budget,
    timeouts: Timeouts,
    /// Connections that have not delivered a signed request yet: what each has shown, and the
    /// means to close it.
    slots: Slots,
}

impl Shared {
    /// True the first time a delivery id is seen.
    fn first_time(&self, id: &str) -> bool {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        if seen.0.contains(id) {
            return false;
        }
        seen.0.insert(id.to_string());
        seen.1.push_back(id.to_string());
        if seen.1.len() > REMEMBERED {
            if let Some(old) = seen.1.pop_front() {
                seen.0.remove(&old);
            }
        }
        true
    }

    /// Queues an evaluation of pull request `n` for the worker; one already queued takes this
    /// delivery's pending head and body along (so a burst becomes one evaluation).
    fn schedule(
        &self,
        n: u64,
        pending_on: Option<String>,
        delivered: Option<(u64, String, String)>,
    ) {
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        let total = q.delivered_total();
        let entry = q.pulls.entry(n).or_default();
        if pending_on.is_some() {
            entry.pending_on = pending_on;
        }
        if let Some((id, author, body)) = delivered.filter(|_| total < DELIVERED_TOTAL) {
            keep_delivered(
                &mut entry.delivered,
                Comment {
                    id,
                    author,
                    body,
                    at: 0,
                },
            );
        }
        q.mark_ready(n);
        self.wake.notify_one();
    }

    /// Queues an evaluation of every open proposal.
    fn schedule_all(&self) {
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        q.all = true;
        self.wake.notify_one();
    }

    /// The one worker: evaluations run one at a time (they take the repository lock anyway),
    /// draining the queue until the server stops.
    fn work(self: Arc<Self>) {
        /// Marks the worker gone however it ends.
        struct Alive<'a>(&'a std::sync::atomic::AtomicBool);
        impl Drop for Alive<'_> {
            fn drop(&mut self) {
                self.0.store(false, std::sync::atomic::Ordering::SeqCst);
            }
        }
        self.worker_alive
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let _alive = Alive(&self.worker_alive);
        loop {
            let next = {
                let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
                loop {
                    if std::mem::take(&mut q.all) {
                        break None;
                    }
                    if let Some(n) = q.ready.pop_front() {
                        let e = q.pulls.remove(&n).unwrap_or_default();
                        break Some((n, e));
                    }
                    q = self.wake.wait(q).unwrap_or_else(|e| e.into_inner());
                }
            };
            // One evaluation that panics must not stop the others.
            let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match next {
                None => {
                    if let Err(e) = self.regate_all() {
                        self.handler.note(&format!(
                            "re-evaluating open proposals after a push: {}",
                            crate::errors::chain(&e)
                        ));
                    }
                }
                Some((n, e)) => self.evaluate_pull(n, e),
            }));
            if done.is_err() {
                self.handler
                    .note("an evaluation panicked; the worker goes on with the next");
            }
        }
    }

    fn evaluate_pull(&self, n: u64, queued: PullQueue) {
        *self.busy.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((n, crate::clock::wall_seconds()));
        self.evaluate_pull_now(n, queued);
        *self.busy.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    fn evaluate_pull_now(
        &self,
        n: u64,
        PullQueue {
            pending_on,
            delivered,
        }: PullQueue,
    ) {
        // Delivered tokens are recorded first, whatever the evaluation will say (a pull request
        // retargeted for a moment must not make the gate drop a rejection whose comment may be
        // gone by the next evaluation). What could not be recorded stays queued for the next
        // evaluation, which reads it as a carrier too.
        let keep = if delivered.is_empty() {
            Vec::new()
        } else {
            match self.handler.record_delivered(n, &delivered) {
                Ok(0) => Vec::new(),
                Ok(k) => {
                    self.handler.note(&format!(
                        "pull request #{n}: {k} delivered token(s) recorded"
                    ));
                    Vec::new()
                }
                Err(e) => {
                    self.handler.note(&format!(
                        "pull request #{n}: delivered tokens kept, not recorded: {}",
                        crate::errors::chain(e.as_ref())
                    ));
                    delivered.clone()
                }
            }
        };
        if let Err(e) = self.handler.evaluate(n, pending_on.is_some(), delivered) {
            self.handler.note(&format!(
                "pull request #{n}: {}",
                crate::errors::chain(e.as_ref())
            ));
        }
        if !keep.is_empty() {
            // Kept (not ready) for the next delivery's evaluation.
            let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
            let room = DELIVERED_TOTAL.saturating_sub(q.delivered_total());
            let e = q.pulls.entry(n).or_default();
            for d in keep.into_iter().take(room) {
                keep_delivered(&mut e.delivered, d);
            }
        }
    }

    /// Queues every open proposal's pull request (after a push to the protected branch), with
    /// the configuration as it is now.
    fn regate_all(&self) -> Result<()> {
        let config =
            crate::config::Config::load(&self.root).map_err(|e| Error::Input(e.to_string()))?;
        let gh = GitHub::connect(&config.forge, true)?;
        for n in super::open_proposal_pulls(&gh)? {
            self.schedule(n, None, None);
        }
        Ok(())
    }
}

/// Reads a body of `declared` bytes: the first byte within `first_byte`, all of it within
/// `body`, at least `min_rate` bytes a second in every `rate_window` once started, each chunk
/// paid for from the shared budget as it arrives (which may evict a stalled upload, or this
/// one).
async fn read_body<'a>(
    shared: &'a Shared,
    peer: std::net::IpAddr,
    (body, progress): (Incoming, &Progress),
    declared: usize,
) -> Result<(Vec<u8>, super::budget::Lease<'a>), (StatusCode, &'static str)> {
    let t = shared.timeouts;
    let lease = shared.budget.open(peer);
    let mut body = Limited::new(body, MAX_BODY);
    let mut out = Vec::with_capacity(declared.min(64 * 1024));
    let window_bytes = |remaining: usize| {
        let per_window = u128::from(t.min_rate) * t.rate_window.as_millis() / 1000;
        usize::try_from(per_window)
            .unwrap_or(usize::MAX)
            .clamp(1, remaining.max(1))
    };
    let read_all = async {
        // The current window's end: first the first byte's deadline, then `rate_window`s.
        let window = tokio::time::sleep(t.first_byte);
        tokio::pin!(window);
        let mut this_window = 0usize;
        loop {
            let frame = tokio::select! {
                f = body.frame() => f,
                () = &mut window => {
                    if out.is_empty() {
                        return Err((StatusCode::REQUEST_TIMEOUT, "body not started in time"));
                    }
                    if this_window < window_bytes(declared - out.len()) {
                        return Err((
                            StatusCode::REQUEST_TIMEOUT,
                            "body slower than the minimum rate",
                        ));
                    }
                    let next = window.deadline() + t.rate_window;
                    window.as_mut().reset(next);
                    this_window = 0;
                    continue;
                }
                () = lease.evicted() => {
                    return Err((StatusCode::SERVICE_UNAVAILABLE, "dropped to make room for uploads that are arriving"));
                }
            };
            let Some(frame) = frame else { break };
            let Ok(frame) = frame else {
                return Err((
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "body too large or unreadable",
                ));
            };
            let Ok(data) = frame.into_data() else {
                continue;
            };
            if data.is_empty() {
                continue;
            }
            if out.len() + data.len() > declared {
                return Err((
                    StatusCode::BAD_REQUEST,
                    "body longer than its Content-Length",
                ));
            }
            if lease.take(data.len()).is_err() {
                return Err((
                    StatusCode::SERVICE_UNAVAILABLE,
                    "busy; GitHub may redeliver",
                ));
            }
            progress.show(Shown::Body);
            if out.is_empty() {
                // The body started: from now on, windows of `rate_window`.
                window.set(tokio::time::sleep(t.rate_window));
            }
            this_window += data.len();
            out.extend_from_slice(&data);
        }
        lease.finish();
        Ok(())
    };
    match tokio::time::timeout(t.body, read_all).await {
        Ok(Ok(())) => Ok((out, lease)),
        Ok(Err(e)) => Err(e),
        Err(_) => Err((StatusCode::REQUEST_TIMEOUT, "body not sent in time")),
    }
}

/// Asks the client to close the connection after a refusal (its body may be unread).
fn closing(mut r: Response<Full<Bytes>>) -> Response<Full<Bytes>> {
    r.headers_mut().insert(
        http::header::CONNECTION,
        http::HeaderValue::from_static("close"),
    );
    r
}

fn reply(status: StatusCode, text: &str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(format!("{text}\n"))));
    *r.status_mut() = status;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

async fn handle(
    shared: Arc<Shared>,
    (connection, progress): (u64, Arc<Progress>),
    peer: std::net::IpAddr,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, std::convert::Infallible> {
    if req.method() == Method::GET && req.uri().path() == "/healthz" {
        if !shared
            .worker_alive
            .load(std::sync::atomic::Ordering::SeqCst)
        {
            return Ok(reply(
                StatusCode::SERVICE_UNAVAILABLE,
                "the evaluation worker is not running",
            ));
        }
        let busy = *shared.busy.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((n, since)) = busy {
            let secs = crate::clock::wall_seconds().saturating_sub(since);
            if secs >= STALLED_SECS {
                return Ok(reply(
                    StatusCode::SERVICE_UNAVAILABLE,
                    &format!("the evaluation worker has been on pull request #{n} for {secs}s (waiting on the repository lock, git or GitHub)"),
                ));
            }
        }
        return Ok(reply(StatusCode::OK, "ok"));
    }
    if req.method() != Method::POST {
        return Ok(reply(
            StatusCode::METHOD_NOT_ALLOWED,
            "POST webhook deliveries here",
        ));
    }
    let header = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let signature = header("x-hub-signature-256");
    let event = header("x-github-event").unwrap_or_default();
    let delivery = header("x-github-delivery").unwrap_or_default();
    // Refuse what cannot be a delivery before reading a byte of the body.
    if !signature.as_deref().is_some_and(signature_shape_ok) {
        shared.handler.note(&format!(
            "delivery {delivery:?} refused: no X-Hub-Signature-256 of the form sha256=<64 hex>"
        ));
        return Ok(closing(reply(
            StatusCode::UNAUTHORIZED,
            "missing or wrong X-Hub-Signature-256 (expected sha256= and 64 hex digits)",
        )));
    }
    let Some(declared) = header("content-length").and_then(|v| v.parse::<usize>().ok()) else {
        return Ok(closing(reply(
            StatusCode::LENGTH_REQUIRED,
            "a delivery needs a Content-Length",
        )));
    };
    if declared > MAX_BODY {
        return Ok(closing(reply(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body too large",
        )));
    }
    progress.show(Shown::Headers);
    let (body, _paid) = match read_body(&shared, peer, (req.into_body(), &progress), declared).await
    {
        Ok(b) => b,
        Err((status, why)) => {
            shared
                .handler
                .note(&format!("delivery {delivery:?} refused: {why}"));
            return Ok(closing(reply(status, why)));
        }
    };
    if !signature_ok(&shared.secret, &body, signature.as_deref()) {
        shared.handler.note(&format!(
            "delivery {delivery:?} refused: missing or wrong X-Hub-Signature-256"
        ));
        return Ok(closing(reply(
            StatusCode::UNAUTHORIZED,
            "missing or wrong X-Hub-Signature-256",
        )));
    }
    // A signed request: this connection is GitHub's, never closed to make room.
    shared.slots.leave(connection);
    if delivery.is_empty() {
        return Ok(reply(StatusCode::BAD_REQUEST, "missing X-GitHub-Delivery"));
    }
    let payload: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return Ok(reply(
                StatusCode::BAD_REQUEST,
                &format!("body is not JSON: {e}"),
            ))
        }
    };
    if !shared.first_time(&delivery) {
        shared
            .handler
            .note(&format!("delivery {delivery}: a replay, ignored"));
        return Ok(reply(StatusCode::OK, "duplicate delivery ignored"));
    }
    let work = route(&event, &payload, &shared.repository, &shared.branch);
    shared.handler.note(&format!(
        "delivery {delivery}: {event} → {}",
        work.describe()
    ));
    Ok(match work {
        Work::Gate {
            pull,
            pending_on,
            delivered,
        } => {
            shared.schedule(pull, pending_on, delivered);
            reply(
                StatusCode::ACCEPTED,
                &format!("evaluating pull request #{pull}"),
            )
        }
        Work::RegateAll => {
            shared.schedule_all();
            reply(StatusCode::ACCEPTED, "re-evaluating every open proposal")
        }
        Work::Nothing("pong") => reply(StatusCode::OK, "pong"),
        Work::Nothing(why) => reply(StatusCode::ACCEPTED, &format!("ignored: {why}")),
    })
}

/// Where the receiver serves: the clone it evaluates in, and the repository and protected
/// branch it accepts deliveries for.
pub struct Served {
    pub root: PathBuf,
    pub repository: String,
    pub branch: String,
}

/// Serves until interrupted (Ctrl-C or SIGTERM), handing verified deliveries to `handler`.
pub fn run(
    served: Served,
    addr: SocketAddr,
    secret: Vec<u8>,
    timeouts: Timeouts,
    handler: Arc<dyn Handler>,
) -> Result<()> {
    let shared = Arc::new(Shared {
        repository: served.repository,
        branch: served.branch,
        handler,
        root: served.root,
        secret,
        seen: Mutex::new((HashSet::new(), VecDeque::new())),
        queue: Mutex::new(Queue::default()),
        wake: std::sync::Condvar::new(),
        worker_alive: std::sync::atomic::AtomicBool::new(true),
        busy: Mutex::new(None),
        budget: super::budget::Budget::new(super::budget::Limits {
            total: BODY_BUDGET,
            per_peer: PEER_SHARE,
        }),
        timeouts,
        slots: Slots::default(),
    });
    {
        let worker = shared.clone();
        std::thread::spawn(move || worker.work());
    }
    let mut next_connection: u64 = 0;
    let connections = Arc::new(tokio::sync::Semaphore::new(CONNECTIONS_MAX));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Error::Remote(format!("starting the server runtime: {e}")))?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| Error::Input(format!("listening on {addr}: {e}")))?;
        let local = listener
            .local_addr()
            .map_err(|e| Error::Remote(format!("the listening address: {e}")))?;
        shared.handler.listening(local);
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .map_err(|e| Error::Remote(format!("waiting for SIGTERM: {e}")))?;
        loop {
            tokio::select! {
                accepted = listener.accept() => {
                    let (stream, peer) = match accepted {
                        Ok(a) => a,
                        Err(e) => {
                            // Out of file descriptors, say: back off instead of spinning.
                            shared.handler.note(&format!("accept: {e}"));
                            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                            continue;
                        }
                    };
                    let permit = match connections.clone().try_acquire_owned() {
                        Ok(p) => p,
                        Err(_) => {
                            // Full: close the connection not yet proven that has shown least,
                            // the stalest among equals, rather than turn this one away; unless
                            // even that one is a body arriving (the rate rule drops it if slow).
                            if !shared.slots.make_room() {
                                drop(stream);
                                continue;
                            }
                            let wait = std::time::Duration::from_millis(250);
                            match tokio::time::timeout(wait, connections.clone().acquire_owned()).await {
                                Ok(Ok(p)) => p,
                                _ => {
                                    drop(stream);
                                    continue;
                                }
                            }
                        }
                    };
                    next_connection += 1;
                    let id = next_connection;
                    let (progress, closed) = shared.slots.open(id);
                    let shared = shared.clone();
                    tokio::spawn(async move {
                        let _permit = permit;
                        let io = hyper_util::rt::TokioIo::new(Watched::new(stream, progress.clone()));
                        let s = shared.clone();
                        let svc = hyper::service::service_fn(move |req| handle(s.clone(), (id, progress.clone()), peer.ip(), req));
                        let conn = hyper::server::conn::http1::Builder::new()
                            .timer(hyper_util::rt::TokioTimer::new())
                            .header_read_timeout(shared.timeouts.headers)
                            .serve_connection(io, svc);
                        // Only an explicit close ends the connection: a signed delivery drops the
                        // sender (it is no longer unproven), which must not end it.
                        let closed = async move {
                            if closed.await.is_err() {
                                std::future::pending::<()>().await;
                            }
                        };
                        tokio::select! {
                            r = conn => {
                                if let Err(e) = r {
                                    shared.handler.note(&format!("connection: {e}"));
                                }
                            }
                            _ = closed => shared.handler.note("connection: closed to make room (no signed request yet)"),
                        }
                        shared.slots.leave(id);
                    });
                }
                _ = tokio::signal::ctrl_c() => break,
                _ = term.recv() => break,
            }
        }
        shared.handler.note("stopped");
        Ok::<_, Error>(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn github_test_vector() {
        // From GitHub's "Validating webhook deliveries".
        let secret = b"It's a Secret to Everybody";
        let body = b"Hello, World!";
        let good = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
        assert!(signature_ok(secret, body, Some(good)));
        assert!(!signature_ok(secret, b"Hello, World?", Some(good)));
        assert!(!signature_ok(b"other", body, Some(good)));
        assert!(!signature_ok(secret, body, None));
        assert!(!signature_ok(
            secret,
            body,
            Some(&good.replace("sha256=", "sha1="))
        ));
        assert!(!signature_ok(secret, body, Some("sha256=zz")));
    }

    #[test]
    fn signature_shape_is_checked_before_the_body() {
        let hex = "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
        assert!(signature_shape_ok(&format!("sha256={hex}")));
        assert!(signature_shape_ok(&format!(
            "sha256={}",
            hex.to_uppercase()
        )));
        for bad in [
            String::new(),
            "sha256=".into(),
            "sha256=zz".into(),
            format!("sha1={hex}"),
            format!("sha256={hex}0"),
            format!("sha256={}", &hex[1..]),
            format!("sha256= {}", &hex[1..]),
        ] {
            assert!(!signature_shape_ok(&bad), "{bad:?}");
        }
    }

    #[test]
    fn routes_events() {
        let repo = serde_json::json!({"full_name": "o/r"});
        let cases = [
            ("ping", serde_json::json!({}), Work::Nothing("pong")),
            (
                "pull_request",
                serde_json::json!({"action": "synchronize", "repository": repo, "pull_request": {"number": 4, "head": {"sha": "abc"}}}),
                Work::Gate {
                    pull: 4,
                    pending_on: Some("abc".into()),
                    delivered: None,
                },
            ),
            (
                "pull_request",
                serde_json::json!({"action": "closed", "repository": repo, "pull_request": {"number": 4}}),
                Work::Nothing("pull_request action not relevant"),
            ),
            (
                "issue_comment",
                serde_json::json!({"action": "deleted", "repository": repo, "issue": {"number": 5, "pull_request": {}}, "comment": {"id": 9, "user": {"login": "bob"}, "body": "/atelier reject\r\n..."}}),
                Work::Gate {
                    pull: 5,
                    pending_on: None,
                    delivered: Some((9, "delivered: bob".into(), "/atelier reject\n...".into())),
                },
            ),
            (
                "issue_comment",
                serde_json::json!({"action": "created", "repository": repo, "issue": {"number": 5}}),
                Work::Nothing("comment on an issue, not a pull request"),
            ),
            (
                "issue_comment",
                serde_json::json!({"action": "edited", "repository": repo, "issue": {"number": 5, "pull_request": {}}, "comment": {"body": "<!-- atelier:gate-summary -->\n..."}}),
                Work::Nothing("the gate's own summary comment"),
            ),
            (
                "pull_request_review",
                serde_json::json!({"action": "submitted", "repository": repo, "pull_request": {"number": 6}}),
                Work::Gate {
                    pull: 6,
                    pending_on: None,
                    delivered: None,
                },
            ),
            (
                "push",
                serde_json::json!({"ref": "refs/heads/main", "repository": repo}),
                Work::RegateAll,
            ),
            (
                "push",
                serde_json::json!({"ref": "refs/heads/x", "repository": repo}),
                Work::Nothing("push to another branch"),
            ),
            (
                "push",
                serde_json::json!({"ref": "refs/heads/main", "repository": {"full_name": "evil/r"}}),
                Work::Nothing("not this repository"),
            ),
        ];
        for (event, payload, want) in cases {
            assert_eq!(
                route(event, &payload, "o/r", "main"),
                want,
                "{event} {payload}"
            );
        }
    }
}
