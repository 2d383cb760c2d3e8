//! A GitHub REST API emulator for the forge tests: a real HTTP/1.1 server on 127.0.0.1 (std only,
//! one thread per connection, `Connection: close`) answering the handful of `/repos/{owner}/{name}`
//! endpoints the GitHub forge uses, with GitHub's JSON shapes (the OpenAPI schemas
//! `full-repository`, `pull-request`, `pull-request-simple`, `pull-request-review`,
//! `issue-comment`, `label`, `status`, `combined-commit-status`, `pull-request-merge-result`,
//! `basic-error`, `validation-error`).
//!
//! The git side is a real bare repository on disk that tests `git push` to by path; every request
//! opens it with git2, so pushes are seen at once. Pull requests are synced the way GitHub does
//! before anything is said about them (a moved head branch moves `head.sha` and
//! `refs/pull/<n>/head`), and merges write a true merge commit and move the base branch with a
//! compare-and-swap.
//!
//! Tests act as people in GitHub's web UI through methods (`add_review`, `add_comment`, ...),
//! inject faults (`Fault`), deny permissions per user, and read back every request served
//! (`log`).
//!
//! Permissions (for `Emulator::permissions` and the `x-accepted-github-permissions` header):
//! `GET /repos/{o}/{r}` needs `metadata`, `/pulls...` `pull_requests`, `PUT /pulls/{n}/merge`
//! `contents`, `/issues/...` `issues`, `/statuses/...` and `/commits/{ref}/status(es)`
//! `statuses`; reads need `=read`, everything else `=write`. A denied entry `"statuses"` (or
//! `"statuses=read"`) denies both, `"statuses=write"` only the writes.

use std::collections::{BTreeMap, HashMap};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use base64::Engine as _;
use serde_json::{json, Map, Value};

const DOCS: &str = "https://docs.github.com/rest";
const RATE_LIMIT: u64 = 5000;
const SECONDARY_RATE_LIMIT_DOCS: &str = "https://docs.github.com/free-pro-team@latest/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits";

/// One request the emulator served.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Logged {
    pub method: String,
    /// The path with its query, as sent.
    pub path: String,
    pub status: u16,
    /// The login the bearer token belongs to, if it is a known one.
    pub login: Option<String>,
}

/// Something going wrong on purpose.
#[derive(Clone, Debug)]
pub enum Fault {
    /// The next `times` requests whose method equals `method` (any method if empty) and whose
    /// path (with query) contains `path` get `status` with `body` and `headers` (which replace the
    /// usual headers of the same name).
    Respond {
        method: String,
        path: String,
        times: u32,
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
    },
    /// Secondary rate limit: 403 with `Retry-After: <secs>` and GitHub's secondary-rate-limit
    /// message, `times` times, on any request matching method/path (as for `Respond`).
    SecondaryRateLimit {
        method: String,
        path: String,
        times: u32,
        retry_after: u64,
    },
    /// On the next merge request, before checking `sha`, push one new commit onto the PR's head
    /// branch (so the merge answers 409).
    MoveHeadBeforeMerge,
    /// The next merge lands a tree with one extra file (`UNAPPROVED`) instead of the true merge
    /// result.
    LandDifferentTree,
    /// The next merge lands as approved and is answered with that merge commit, but one more
    /// commit (adding `UNAPPROVED`) is put on top of it on the base branch at the same time: the
    /// answer's sha is no longer the branch's tip.
    LandExtraCommitAfterMerge,
    /// The next merge lands, but its answer is lost (502), and the `then` requests after it
    /// fail with 502 too: a caller that stops there never learns the merge landed.
    MergeThenFail { then: u32 },
}

impl Fault {
    /// The next `times` requests matching `method` and `path` get 500 `{"message":"Server Error"}`.
    pub fn server_error(method: &str, path: &str, times: u32) -> Fault {
        Fault::Respond {
            method: method.to_string(),
            path: path.to_string(),
            times,
            status: 500,
            headers: Vec::new(),
            body: json!({ "message": "Server Error" }).to_string(),
        }
    }
}

/// A running emulator; stops serving when dropped.
pub struct Emulator {
    /// `http://127.0.0.1:PORT`, no trailing slash.
    pub url: String,
    /// `owner/name`.
    pub repository: String,
    /// The bare repository behind it.
    pub git_dir: PathBuf,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
    addr: SocketAddr,
    accept: Option<JoinHandle<()>>,
}

impl Emulator {
    /// Starts serving `owner/name` backed by the bare repository at `git_dir`. `users` maps bearer
    /// tokens to logins; any other token (or none) gets 401 `{"message":"Bad credentials",...}`.
    pub fn start(repository: &str, git_dir: &Path, users: &[(&str, &str)]) -> Emulator {
        let (owner, name) = repository
            .split_once('/')
            .filter(|(o, n)| !o.is_empty() && !n.is_empty() && !n.contains('/'))
            .unwrap_or_else(|| panic!("repository {repository:?} is not owner/name"));
        if let Err(e) = git2::Repository::open_bare(git_dir) {
            panic!("{} is not a bare repository: {e}", git_dir.display());
        }
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local address");
        let url = format!("http://{addr}");
        let state = Arc::new(Mutex::new(State {
            url: url.clone(),
            owner: owner.to_string(),
            name: name.to_string(),
            git_dir: git_dir.to_path_buf(),
            tokens: users
                .iter()
                .map(|(t, l)| (t.to_string(), l.to_string()))
                .collect(),
            started: now(),
            next_id: 1_000_001,
            next_number: 1,
            pulls: BTreeMap::new(),
            comments: BTreeMap::new(),
            reviews: Vec::new(),
            labels: Vec::new(),
            statuses: Vec::new(),
            faults: Vec::new(),
            move_head: 0,
            land_different_tree: 0,
            land_extra_commit: 0,
            merge_then_fail: Vec::new(),
            denied: HashMap::new(),
            log: Vec::new(),
            rate_used: 0,
            requests: 0,
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let accept = {
            let state = Arc::clone(&state);
            let stop = Arc::clone(&stop);
            std::thread::Builder::new()
                .name("github-emulator".into())
                .spawn(move || serve(listener, state, stop))
                .expect("spawn the emulator")
        };
        Emulator {
            url,
            repository: repository.to_string(),
            git_dir: git_dir.to_path_buf(),
            state,
            stop,
            addr,
            accept: Some(accept),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    pub fn inject(&self, fault: Fault) {
        let mut st = self.lock();
        match fault {
            Fault::MoveHeadBeforeMerge => st.move_head += 1,
            Fault::LandDifferentTree => st.land_different_tree += 1,
            Fault::LandExtraCommitAfterMerge => st.land_extra_commit += 1,
            Fault::MergeThenFail { then } => st.merge_then_fail.push(then),
            other => st.faults.push(other),
        }
    }

    /// Every request served: method, path with query, status, the login (if authenticated).
    pub fn log(&self) -> Vec<Logged> {
        self.lock().log.clone()
    }

    /// `login` submits a review (`"APPROVED"`, `"CHANGES_REQUESTED"`, `"COMMENTED"`, ...) on the
    /// pull request's current head; returns the review id.
    pub fn add_review(&self, pull: u64, login: &str, state: &str, body: &str) -> u64 {
        let state = state.to_ascii_uppercase();
        assert!(
            [
                "APPROVED",
                "CHANGES_REQUESTED",
                "COMMENTED",
                "DISMISSED",
                "PENDING"
            ]
            .contains(&state.as_str()),
            "unknown review state {state}"
        );
        let mut st = self.lock();
        let repo = st.open().expect("open the bare repository");
        st.sync(&repo, pull);
        let t = now();
        let id = st.id();
        let p = st
            .pulls
            .get_mut(&pull)
            .unwrap_or_else(|| panic!("no pull request #{pull}"));
        p.updated = t;
        let commit = p.head_sha.clone();
        st.reviews.push(Review {
            id,
            pull,
            author: login.to_string(),
            state,
            body: body.to_string(),
            commit,
            submitted: t,
        });
        id
    }

    /// Someone puts label `name` on the pull request (creating the label if needed).
    pub fn add_label(&self, pull: u64, name: &str) {
        let mut st = self.lock();
        assert!(st.pulls.contains_key(&pull), "no pull request #{pull}");
        st.attach_label(pull, name);
    }

    /// `login` comments on the pull request; returns the comment id.
    pub fn add_comment(&self, pull: u64, login: &str, body: &str) -> u64 {
        let mut st = self.lock();
        assert!(st.pulls.contains_key(&pull), "no pull request #{pull}");
        st.new_comment(pull, login, body)
    }

    pub fn edit_comment(&self, id: u64, body: &str) {
        let mut st = self.lock();
        let c = st
            .comments
            .get_mut(&id)
            .unwrap_or_else(|| panic!("no comment {id}"));
        c.body = body.to_string();
        c.updated = now();
    }

    pub fn delete_comment(&self, id: u64) {
        let removed = self.lock().comments.remove(&id);
        assert!(removed.is_some(), "no comment {id}");
    }

    /// The pull request's comments, oldest first, as the API would return them.
    pub fn comments(&self, pull: u64) -> Vec<Value> {
        let st = self.lock();
        st.comments
            .values()
            .filter(|c| c.issue == pull)
            .map(|c| st.comment_json(c))
            .collect()
    }

    /// The statuses of commit `sha` (a sha or a branch name), newest first, as the API would
    /// return them.
    pub fn statuses(&self, sha: &str) -> Vec<Value> {
        let st = self.lock();
        let sha = st
            .open()
            .ok()
            .and_then(|repo| resolve_commit(&repo, sha))
            .unwrap_or_else(|| sha.to_string());
        st.statuses
            .iter()
            .rev()
            .filter(|s| s.sha == sha)
            .map(|s| st.status_json(s))
            .collect()
    }

    /// The pull request as `GET /pulls/{n}` would return it (after syncing its head).
    pub fn pull(&self, n: u64) -> Value {
        let mut st = self.lock();
        let repo = st.open().expect("open the bare repository");
        st.sync(&repo, n);
        let p = st
            .pulls
            .get(&n)
            .unwrap_or_else(|| panic!("no pull request #{n}"));
        st.pull_json(&repo, p, true)
    }

    /// Denies `login` the named permissions (replacing earlier denials): e.g. `["statuses"]`
    /// makes the status endpoints answer 403 for that user. See the module docs for the names.
    pub fn permissions(&self, login: &str, denied: &[&str]) {
        self.lock().denied.insert(
            login.to_string(),
            denied.iter().map(|d| d.to_string()).collect(),
        );
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

/// GitHub's clock is the wall clock, whatever the product's clock says.
fn now() -> u64 {
    #[allow(clippy::disallowed_methods)]
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970");
    since.as_secs()
}

// ---------------------------------------------------------------------------------------------
// State

struct Pull {
    number: u64,
    id: u64,
    title: String,
    body: Option<String>,
    open: bool,
    draft: bool,
    head_ref: String,
    base_ref: String,
    head_sha: String,
    base_sha: String,
    author: String,
    created: u64,
    updated: u64,
    closed: Option<u64>,
    merged: Option<u64>,
    merge_sha: Option<String>,
    merged_by: Option<String>,
    labels: Vec<String>,
}

struct IssueComment {
    id: u64,
    issue: u64,
    author: String,
    body: String,
    created: u64,
    updated: u64,
}

struct Review {
    id: u64,
    pull: u64,
    author: String,
    state: String,
    body: String,
    commit: String,
    submitted: u64,
}

struct Label {
    id: u64,
    name: String,
    color: String,
    description: String,
}

struct CommitStatus {
    id: u64,
    sha: String,
    state: String,
    target_url: Option<String>,
    description: Option<String>,
    context: String,
    creator: String,
    created: u64,
}

struct State {
    url: String,
    owner: String,
    name: String,
    git_dir: PathBuf,
    tokens: HashMap<String, String>,
    started: u64,
    next_id: u64,
    next_number: u64,
    pulls: BTreeMap<u64, Pull>,
    comments: BTreeMap<u64, IssueComment>,
    reviews: Vec<Review>,
    labels: Vec<Label>,
    /// Oldest first.
    statuses: Vec<CommitStatus>,
    faults: Vec<Fault>,
    move_head: u32,
    land_different_tree: u32,
    land_extra_commit: u32,
    merge_then_fail: Vec<u32>,
    denied: HashMap<String, Vec<String>>,
    log: Vec<Logged>,
    rate_used: u64,
    requests: u64,
}

// ---------------------------------------------------------------------------------------------
// HTTP

struct Request {
    method: String,
    /// Path and query, as sent.
    target: String,
    path: String,
    raw_query: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Request {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn param(&self, name: &str) -> Option<String> {
        self.raw_query
            .split('&')
            .filter_map(|kv| {
                let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                (decode(k) == name).then(|| decode(v))
            })
            .next_back()
    }
}

struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: Option<String>,
}

impl Response {
    fn json(status: u16, v: &Value) -> Response {
        Response {
            status,
            headers: Vec::new(),
            body: Some(v.to_string()),
        }
    }

    fn empty(status: u16) -> Response {
        Response {
            status,
            headers: Vec::new(),
            body: None,
        }
    }

    fn header(mut self, name: &str, value: &str) -> Response {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    fn has_header(&self, name: &str) -> bool {
        self.headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case(name))
    }
}

fn error(status: u16, message: &str) -> Response {
    Response::json(
        status,
        &json!({
            "message": message,
            "documentation_url": DOCS,
            "status": status.to_string(),
        }),
    )
}

fn not_found() -> Response {
    error(404, "Not Found")
}

/// 422 `validation-error`.
fn validation(errors: Value) -> Response {
    Response::json(
        422,
        &json!({
            "message": "Validation Failed",
            "errors": errors,
            "documentation_url": DOCS,
            "status": "422",
        }),
    )
}

/// GitHub refuses comment bodies longer than this (characters).
const COMMENT_MAX: usize = 65536;
const BODY_TOO_LONG: &str = "body is too long (maximum is 65536 characters)";

fn custom(resource: &str, message: &str) -> Response {
    validation(json!([{ "resource": resource, "code": "custom", "message": message }]))
}

fn invalid(resource: &str, field: &str) -> Response {
    validation(json!([{ "resource": resource, "field": field, "code": "invalid" }]))
}

fn missing(resource: &str, field: &str) -> Response {
    validation(json!([{ "resource": resource, "field": field, "code": "missing_field" }]))
}

fn serve(listener: TcpListener, state: Arc<Mutex<State>>, stop: Arc<AtomicBool>) {
    for stream in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let Ok(stream) = stream else { continue };
        let state = Arc::clone(&state);
        let _ = std::thread::Builder::new()
            .name("github-emulator-conn".into())
            .spawn(move || {
                let _ = connection(stream, &state);
            });
    }
}

fn connection(mut stream: TcpStream, state: &Mutex<State>) -> io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let Some(req) = read_request(&mut reader, &mut stream)? else {
        return Ok(());
    };
    let resp = handle(state, &req);
    write_response(&mut stream, &resp)?;
    stream.flush()?;
    let _ = stream.shutdown(std::net::Shutdown::Write);
    Ok(())
}

fn read_request(
    reader: &mut BufReader<TcpStream>,
    writer: &mut TcpStream,
) -> io::Result<Option<Request>> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    let mut parts = line.split_whitespace();
    let (Some(method), Some(target)) = (parts.next(), parts.next()) else {
        return Ok(None);
    };
    let method = method.to_string();
    let mut target = target.to_string();
    for scheme in ["http://", "https://"] {
        if let Some(rest) = target.strip_prefix(scheme) {
            target = rest.find('/').map_or("/".into(), |i| rest[i..].to_string());
        }
    }
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 {
            return Ok(None);
        }
        let h = h.trim_end_matches(['\r', '\n']);
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    let get = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    if get("expect").is_some_and(|v| v.eq_ignore_ascii_case("100-continue")) {
        writer.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
        writer.flush()?;
    }
    let chunked =
        get("transfer-encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    let body = if chunked {
        read_chunked(reader)?
    } else {
        let len: usize = get("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0; len];
        reader.read_exact(&mut body)?;
        body
    };
    let (path, raw_query) = match target.split_once('?') {
        Some((p, q)) => (p.to_string(), q.to_string()),
        None => (target.clone(), String::new()),
    };
    Ok(Some(Request {
        method,
        target,
        path,
        raw_query,
        headers,
        body,
    }))
}

fn read_chunked(reader: &mut impl BufRead) -> io::Result<Vec<u8>> {
    let bad = || io::Error::new(io::ErrorKind::InvalidData, "bad chunk");
    let mut body = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Err(bad());
        }
        let size = line.trim().split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size, 16).map_err(|_| bad())?;
        if size == 0 {
            loop {
                let mut trailer = String::new();
                if reader.read_line(&mut trailer)? == 0 || trailer.trim().is_empty() {
                    return Ok(body);
                }
            }
        }
        let start = body.len();
        body.resize(start + size, 0);
        reader.read_exact(&mut body[start..])?;
        let mut crlf = [0u8; 2];
        reader.read_exact(&mut crlf)?;
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        301 => "Moved Permanently",
        304 => "Not Modified",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        409 => "Conflict",
        410 => "Gone",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Unknown",
    }
}

fn write_response(stream: &mut TcpStream, resp: &Response) -> io::Result<()> {
    let body = resp.body.as_deref().unwrap_or("");
    let mut head = format!("HTTP/1.1 {} {}\r\n", resp.status, reason(resp.status));
    for (k, v) in &resp.headers {
        if k.eq_ignore_ascii_case("content-length") || k.eq_ignore_ascii_case("connection") {
            continue;
        }
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    ));
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())
}

fn handle(shared: &Mutex<State>, req: &Request) -> Response {
    let mut st = lock(shared);
    st.requests += 1;
    let request_id = format!(
        "{:04X}:{:06X}:{:07X}:{:07X}:{:08X}",
        std::process::id() & 0xFFFF,
        st.requests,
        st.started & 0xFFF_FFFF,
        st.requests * 7919,
        st.requests * 104_729
    );
    let login = req
        .header("authorization")
        .and_then(|h| {
            h.strip_prefix("Bearer ")
                .or_else(|| h.strip_prefix("bearer "))
                .or_else(|| h.strip_prefix("token "))
        })
        .and_then(|t| st.tokens.get(t.trim()).cloned());
    if login.is_some() {
        st.rate_used += 1;
    }
    let mut resp = match st.fault_for(req, &request_id) {
        Some(r) => r,
        None => match &login {
            None => error(401, "Bad credentials"),
            Some(l) => st.route(req, l),
        },
    };
    st.decorate(&mut resp, &request_id);
    st.log.push(Logged {
        method: req.method.clone(),
        path: req.target.clone(),
        status: resp.status,
        login,
    });
    resp
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .filter(|h| h.iter().all(u8::is_ascii_hexdigit));
        if let (b'%', Some(h)) = (bytes[i], hex) {
            let h = std::str::from_utf8(h).expect("ascii");
            out.push(u8::from_str_radix(h, 16).expect("hex"));
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A query-string component: `+` is a space.
fn decode(s: &str) -> String {
    percent_decode(&s.replace('+', " "))
}

fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Formats

fn rfc3339(secs: u64) -> String {
    let (y, m, d) = civil(secs / 86_400);
    let rem = secs % 86_400;
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

fn http_date(secs: u64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = secs / 86_400;
    let (y, m, d) = civil(days);
    let rem = secs % 86_400;
    format!(
        "{}, {d:02} {} {y:04} {:02}:{:02}:{:02} GMT",
        DAYS[(days % 7) as usize],
        MONTHS[(m - 1) as usize],
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// (year, month, day) of a count of days since 1970-01-01.
fn civil(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + u64::from(m <= 2);
    (y, m, d)
}

fn opt_time(t: Option<u64>) -> Value {
    t.map_or(Value::Null, |t| Value::String(rfc3339(t)))
}

/// GitHub's (legacy) global node id: base64 of `0<len>:<Type><id>`.
fn node_id(kind: &str, id: u64) -> String {
    base64::engine::general_purpose::STANDARD.encode(format!("0{}:{kind}{id}", kind.len()))
}

fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn user_id(login: &str) -> u64 {
    fnv(&login.to_ascii_lowercase()) % 90_000_000 + 10_000_000
}

fn branch_tip(repo: &git2::Repository, branch: &str) -> Option<git2::Oid> {
    let r = repo.find_reference(&format!("refs/heads/{branch}")).ok()?;
    r.peel_to_commit().ok().map(|c| c.id())
}

/// The commit a sha (full or abbreviated), branch or tag names.
fn resolve_commit(repo: &git2::Repository, r: &str) -> Option<String> {
    if r.is_empty() {
        return None;
    }
    for prefix in ["refs/heads/", "refs/tags/"] {
        if let Ok(reference) = repo.find_reference(&format!("{prefix}{r}")) {
            if let Ok(c) = reference.peel_to_commit() {
                return Some(c.id().to_string());
            }
        }
    }
    if r.len() >= 4 && r.len() <= 40 && r.bytes().all(|b| b.is_ascii_hexdigit()) {
        let obj = repo.revparse_single(r).ok()?;
        return obj.peel_to_commit().ok().map(|c| c.id().to_string());
    }
    None
}

fn count_commits(repo: &git2::Repository, base: git2::Oid, head: git2::Oid) -> u64 {
    let Ok(mut walk) = repo.revwalk() else {
        return 0;
    };
    if walk.push(head).is_err() || walk.hide(base).is_err() {
        return 0;
    }
    walk.count() as u64
}

fn oid(s: &str) -> Option<git2::Oid> {
    git2::Oid::from_str(s).ok()
}

/// A JSON request body that must be an object (empty means `{}`).
fn json_object(req: &Request) -> Result<Map<String, Value>, Response> {
    if req.body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match serde_json::from_slice::<Value>(&req.body) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(other) => Err(error(
            422,
            &format!("Invalid request.\n\n{other} is not an object."),
        )),
        Err(_) => Err(error(400, "Problems parsing JSON")),
    }
}

/// An optional string field; `null` counts as absent.
fn opt_str(body: &Map<String, Value>, field: &str) -> Result<Option<String>, Response> {
    match body.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(error(
            422,
            &format!("Invalid request.\n\nFor 'properties/{field}', {other} is not a string."),
        )),
    }
}

fn opt_bool(body: &Map<String, Value>, field: &str) -> Result<Option<bool>, Response> {
    match body.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(other) => Err(error(
            422,
            &format!("Invalid request.\n\nFor 'properties/{field}', {other} is not a boolean."),
        )),
    }
}

macro_rules! tri {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(resp) => return resp,
        }
    };
}

/// The permission an endpoint needs, and whether it writes.
fn permission(method: &str, rest: &[&str]) -> Option<(&'static str, bool)> {
    let write = method != "GET";
    let perm = match rest {
        [] => "metadata",
        ["pulls", _, "merge"] if method == "PUT" => "contents",
        ["pulls", ..] => "pull_requests",
        ["issues", ..] => "issues",
        ["statuses", ..] => "statuses",
        ["commits", .., "status" | "statuses"] => "statuses",
        _ => return None,
    };
    Some((perm, write))
}

impl State {
    fn open(&self) -> Result<git2::Repository, git2::Error> {
        git2::Repository::open_bare(&self.git_dir)
    }

    fn id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    fn api(&self) -> String {
        format!("{}/repos/{}/{}", self.url, self.owner, self.name)
    }

    fn html(&self) -> String {
        format!("{}/{}/{}", self.url, self.owner, self.name)
    }

    fn fault_for(&mut self, req: &Request, request_id: &str) -> Option<Response> {
        let i = self.faults.iter().position(|f| match f {
            Fault::Respond {
                method,
                path,
                times,
                ..
            }
            | Fault::SecondaryRateLimit {
                method,
                path,
                times,
                ..
            } => {
                *times > 0
                    && (method.is_empty() || method.eq_ignore_ascii_case(&req.method))
                    && req.target.contains(path.as_str())
            }
            _ => false,
        })?;
        let (resp, left) = match &mut self.faults[i] {
            Fault::Respond {
                times,
                status,
                headers,
                body,
                ..
            } => {
                *times -= 1;
                let mut r = Response {
                    status: *status,
                    headers: headers.clone(),
                    body: (!body.is_empty()).then(|| body.clone()),
                };
                if r.body.is_none() && *status != 204 && *status != 304 {
                    r.body = Some(String::new());
                }
                (r, *times)
            }
            Fault::SecondaryRateLimit {
                times, retry_after, ..
            } => {
                *times -= 1;
                let r = Response::json(
                    403,
                    &json!({
                        "message": format!(
                            "You have exceeded a secondary rate limit. Please wait a few minutes \
                             before you try again. If you reach out to GitHub Support for help, \
                             please include the request ID {request_id}."
                        ),
                        "documentation_url": SECONDARY_RATE_LIMIT_DOCS,
                        "status": "403",
                    }),
                )
                .header("retry-after", &retry_after.to_string());
                (r, *times)
            }
            _ => unreachable!("only request faults are queued"),
        };
        if left == 0 {
            self.faults.remove(i);
        }
        Some(resp)
    }

    fn decorate(&self, resp: &mut Response, request_id: &str) {
        let t = now();
        let used = self.rate_used;
        let defaults = [
            (
                "content-type",
                "application/json; charset=utf-8".to_string(),
            ),
            ("date", http_date(t)),
            ("server", "github-emulator".to_string()),
            ("x-github-media-type", "github.v3; format=json".to_string()),
            ("x-github-api-version-selected", "2022-11-28".to_string()),
            ("x-ratelimit-limit", RATE_LIMIT.to_string()),
            (
                "x-ratelimit-remaining",
                RATE_LIMIT.saturating_sub(used).to_string(),
            ),
            ("x-ratelimit-reset", (self.started + 3600).to_string()),
            ("x-ratelimit-used", used.to_string()),
            ("x-ratelimit-resource", "core".to_string()),
            ("x-github-request-id", request_id.to_string()),
        ];
        let mut headers: Vec<(String, String)> = defaults
            .into_iter()
            .filter(|(k, _)| !resp.has_header(k))
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        headers.append(&mut resp.headers);
        resp.headers = headers;
    }

    fn is_denied(&self, login: &str, perm: &str, write: bool) -> bool {
        self.denied.get(login).is_some_and(|list| {
            list.iter().any(|d| match d.split_once('=') {
                None => d == perm,
                Some((p, "write")) => p == perm && write,
                Some((p, _)) => p == perm,
            })
        })
    }

    fn route(&mut self, req: &Request, login: &str) -> Response {
        let mut segs: Vec<String> = req.path.split('/').skip(1).map(percent_decode).collect();
        while segs.len() > 3 && segs.last().is_some_and(String::is_empty) {
            segs.pop();
        }
        // The authenticated account (GitHub's "private user" shape carries these and more).
        if req.method == "GET" && segs == ["user"] {
            return Response::json(200, &self.user(login));
        }
        if segs.len() < 3 || segs[0] != "repos" {
            return not_found();
        }
        if !segs[1].eq_ignore_ascii_case(&self.owner) || !segs[2].eq_ignore_ascii_case(&self.name) {
            return not_found();
        }
        let rest: Vec<&str> = segs[3..].iter().map(String::as_str).collect();
        let m = req.method.as_str();
        let Some((perm, write)) = permission(m, &rest) else {
            return not_found();
        };
        if self.is_denied(login, perm, write) {
            let level = if write { "write" } else { "read" };
            return error(403, "Resource not accessible by personal access token")
                .header("x-accepted-github-permissions", &format!("{perm}={level}"));
        }
        let repo = match self.open() {
            Ok(r) => r,
            Err(e) => return error(500, &format!("git: {e}")),
        };
        let num = |s: &str| s.parse::<u64>().ok();
        match (m, rest.as_slice()) {
            ("GET", []) => self.get_repository(&repo, login),
            ("GET", ["pulls"]) => self.list_pulls(&repo, req),
            ("POST", ["pulls"]) => self.create_pull(&repo, req, login),
            ("GET", ["pulls", n]) => match num(n) {
                Some(n) => self.get_pull(&repo, n),
                None => not_found(),
            },
            ("PATCH", ["pulls", n]) => match num(n) {
                Some(n) => self.update_pull(&repo, req, n),
                None => not_found(),
            },
            ("GET", ["pulls", n, "merge"]) => match num(n).and_then(|n| self.pulls.get(&n)) {
                Some(p) if p.merged.is_some() => Response::empty(204),
                _ => not_found(),
            },
            ("PUT", ["pulls", n, "merge"]) => match num(n) {
                Some(n) => self.merge_pull(&repo, req, n, login),
                None => not_found(),
            },
            ("GET", ["pulls", n, "reviews"]) => match num(n) {
                Some(n) => self.list_reviews(&repo, req, n),
                None => not_found(),
            },
            ("GET", ["issues", "comments", id]) => {
                match num(id).and_then(|id| self.comments.get(&id)) {
                    Some(c) => Response::json(200, &self.comment_json(c)),
                    None => not_found(),
                }
            }
            ("PATCH", ["issues", "comments", id]) => match num(id) {
                Some(id) => self.update_comment(req, id, login),
                None => not_found(),
            },
            ("DELETE", ["issues", "comments", id]) => {
                match num(id).and_then(|id| self.comments.remove(&id)) {
                    Some(_) => Response::empty(204),
                    None => not_found(),
                }
            }
            ("GET", ["issues", n, "comments"]) => match num(n) {
                Some(n) => self.list_comments(req, n),
                None => not_found(),
            },
            ("POST", ["issues", n, "comments"]) => match num(n) {
                Some(n) => self.create_comment(req, n, login),
                None => not_found(),
            },
            ("GET", ["issues", n, "labels"]) => match num(n).filter(|n| self.pulls.contains_key(n))
            {
                Some(n) => self.page(req, self.issue_labels(n)),
                None => not_found(),
            },
            ("POST", ["issues", n, "labels"]) => match num(n) {
                Some(n) => self.add_labels(req, n),
                None => not_found(),
            },
            ("POST", ["statuses", sha]) => self.create_status(&repo, req, sha, login),
            ("GET", ["commits", r @ .., "status"]) if !r.is_empty() => {
                self.combined_status(&repo, &r.join("/"))
            }
            ("GET", ["commits", r @ .., "statuses"]) if !r.is_empty() => {
                match resolve_commit(&repo, &r.join("/")) {
                    Some(sha) => {
                        let items = self
                            .statuses
                            .iter()
                            .rev()
                            .filter(|s| s.sha == sha)
                            .map(|s| self.status_json(s))
                            .collect();
                        self.page(req, items)
                    }
                    None => not_found(),
                }
            }
            _ => not_found(),
        }
    }

    /// A page of `items` (`per_page` default 30, at most 100; `page` from 1) with GitHub's `Link`
    /// header.
    fn page(&self, req: &Request, items: Vec<Value>) -> Response {
        let per_page = req
            .param("per_page")
            .and_then(|s| s.parse::<usize>().ok())
            .filter(|&n| n > 0)
            .unwrap_or(30)
            .min(100);
        let page = req
            .param("page")
            .and_then(|s| s.parse::<usize>().ok())
            .filter(|&n| n > 0)
            .unwrap_or(1);
        let last = items.len().div_ceil(per_page).max(1);
        let slice: Vec<Value> = items
            .into_iter()
            .skip((page - 1).saturating_mul(per_page))
            .take(per_page)
            .collect();
        let mut resp = Response::json(200, &Value::Array(slice));
        if last > 1 {
            let kept: Vec<&str> = req
                .raw_query
                .split('&')
                .filter(|kv| !kv.is_empty() && kv.split('=').next() != Some("page"))
                .collect();
            let link = |n: usize, rel: &str| {
                let mut q = kept.clone();
                let p = format!("page={n}");
                q.push(&p);
                format!("<{}{}?{}>; rel=\"{rel}\"", self.url, req.path, q.join("&"))
            };
            let mut parts = Vec::new();
            if page > 1 {
                parts.push(link(page - 1, "prev"));
            }
            if page < last {
                parts.push(link(page + 1, "next"));
                parts.push(link(last, "last"));
            }
            if page > 1 {
                parts.push(link(1, "first"));
            }
            resp = resp.header("link", &parts.join(", "));
        }
        resp
    }

    // -- JSON shapes ---------------------------------------------------------------------------

    /// `simple-user`.
    fn user(&self, login: &str) -> Value {
        let id = user_id(login);
        let u = format!("{}/users/{login}", self.url);
        json!({
            "login": login,
            "id": id,
            "node_id": node_id("User", id),
            "avatar_url": format!("{}/avatars/u/{id}?v=4", self.url),
            "gravatar_id": "",
            "url": u,
            "html_url": format!("{}/{login}", self.url),
            "followers_url": format!("{u}/followers"),
            "following_url": format!("{u}/following{{/other_user}}"),
            "gists_url": format!("{u}/gists{{/gist_id}}"),
            "starred_url": format!("{u}/starred{{/owner}}{{/repo}}"),
            "subscriptions_url": format!("{u}/subscriptions"),
            "organizations_url": format!("{u}/orgs"),
            "repos_url": format!("{u}/repos"),
            "events_url": format!("{u}/events{{/privacy}}"),
            "received_events_url": format!("{u}/received_events"),
            "type": "User",
            "user_view_type": "public",
            "site_admin": false,
        })
    }

    fn association(&self, login: &str) -> &'static str {
        if login.eq_ignore_ascii_case(&self.owner) {
            "OWNER"
        } else {
            "COLLABORATOR"
        }
    }

    fn default_branch(repo: &git2::Repository) -> String {
        repo.find_reference("HEAD")
            .ok()
            .and_then(|r| r.symbolic_target().map(str::to_string))
            .map(|t| t.trim_start_matches("refs/heads/").to_string())
            .unwrap_or_else(|| "main".to_string())
    }

    /// `repository` (what pull requests' `head.repo` and `base.repo` hold); with `login`, the
    /// `full-repository` fields too.
    fn repo_json(&self, repo: &git2::Repository, login: Option<&str>) -> Value {
        let api = self.api();
        let html = self.html();
        let id = fnv(&format!("{}/{}", self.owner, self.name)) % 900_000_000 + 100_000_000;
        let host = self.url.trim_start_matches("http://");
        let open = self.pulls.values().filter(|p| p.open).count();
        let created = rfc3339(self.started);
        let mut v = json!({
            "id": id,
            "node_id": node_id("Repository", id),
            "name": self.name,
            "full_name": format!("{}/{}", self.owner, self.name),
            "private": false,
            "owner": self.user(&self.owner),
            "html_url": html,
            "description": null,
            "fork": false,
            "url": api,
        });
        let m = v.as_object_mut().expect("object");
        for (k, path) in [
            ("forks_url", "/forks"),
            ("keys_url", "/keys{/key_id}"),
            ("collaborators_url", "/collaborators{/collaborator}"),
            ("teams_url", "/teams"),
            ("hooks_url", "/hooks"),
            ("issue_events_url", "/issues/events{/number}"),
            ("events_url", "/events"),
            ("assignees_url", "/assignees{/user}"),
            ("branches_url", "/branches{/branch}"),
            ("tags_url", "/tags"),
            ("blobs_url", "/git/blobs{/sha}"),
            ("git_tags_url", "/git/tags{/sha}"),
            ("git_refs_url", "/git/refs{/sha}"),
            ("trees_url", "/git/trees{/sha}"),
            ("statuses_url", "/statuses/{sha}"),
            ("languages_url", "/languages"),
            ("stargazers_url", "/stargazers"),
            ("contributors_url", "/contributors"),
            ("subscribers_url", "/subscribers"),
            ("subscription_url", "/subscription"),
            ("commits_url", "/commits{/sha}"),
            ("git_commits_url", "/git/commits{/sha}"),
            ("comments_url", "/comments{/number}"),
            ("issue_comment_url", "/issues/comments{/number}"),
            ("contents_url", "/contents/{+path}"),
            ("compare_url", "/compare/{base}...{head}"),
            ("merges_url", "/merges"),
            ("archive_url", "/{archive_format}{/ref}"),
            ("downloads_url", "/downloads"),
            ("issues_url", "/issues{/number}"),
            ("pulls_url", "/pulls{/number}"),
            ("milestones_url", "/milestones{/number}"),
            (
                "notifications_url",
                "/notifications{?since,all,participating}",
            ),
            ("labels_url", "/labels{/name}"),
            ("releases_url", "/releases{/id}"),
            ("deployments_url", "/deployments"),
        ] {
            m.insert(k.into(), Value::String(format!("{api}{path}")));
        }
        for (k, val) in [
            ("created_at", json!(created)),
            ("updated_at", json!(created)),
            ("pushed_at", json!(created)),
            (
                "git_url",
                json!(format!("git://{host}/{}/{}.git", self.owner, self.name)),
            ),
            (
                "ssh_url",
                json!(format!("git@{host}:{}/{}.git", self.owner, self.name)),
            ),
            (
                "clone_url",
                json!(format!("file://{}", self.git_dir.display())),
            ),
            ("svn_url", json!(html)),
            ("homepage", Value::Null),
            ("size", json!(0)),
            ("stargazers_count", json!(0)),
            ("watchers_count", json!(0)),
            ("language", Value::Null),
            ("has_issues", json!(true)),
            ("has_projects", json!(true)),
            ("has_downloads", json!(true)),
            ("has_wiki", json!(true)),
            ("has_pages", json!(false)),
            ("has_discussions", json!(false)),
            ("forks_count", json!(0)),
            ("mirror_url", Value::Null),
            ("archived", json!(false)),
            ("disabled", json!(false)),
            ("open_issues_count", json!(open)),
            ("license", Value::Null),
            ("allow_forking", json!(true)),
            ("is_template", json!(false)),
            ("web_commit_signoff_required", json!(false)),
            ("topics", json!([])),
            ("visibility", json!("public")),
            ("forks", json!(0)),
            ("open_issues", json!(open)),
            ("watchers", json!(0)),
            ("default_branch", json!(State::default_branch(repo))),
        ] {
            m.insert(k.into(), val);
        }
        if let Some(login) = login {
            let m = v.as_object_mut().expect("object");
            let owner = login.eq_ignore_ascii_case(&self.owner);
            m.insert(
                "permissions".into(),
                json!({ "admin": owner, "maintain": owner, "push": true, "triage": true, "pull": true }),
            );
            for (k, val) in [
                ("allow_squash_merge", json!(true)),
                ("allow_merge_commit", json!(true)),
                ("allow_rebase_merge", json!(true)),
                ("allow_auto_merge", json!(false)),
                ("delete_branch_on_merge", json!(false)),
                ("allow_update_branch", json!(false)),
                ("use_squash_pr_title_as_default", json!(false)),
                ("squash_merge_commit_title", json!("COMMIT_OR_PR_TITLE")),
                ("squash_merge_commit_message", json!("COMMIT_MESSAGES")),
                ("merge_commit_title", json!("MERGE_MESSAGE")),
                ("merge_commit_message", json!("PR_TITLE")),
                ("network_count", json!(0)),
                ("subscribers_count", json!(0)),
            ] {
                m.insert(k.into(), val);
            }
        }
        v
    }

    fn label_json(&self, l: &Label) -> Value {
        json!({
            "id": l.id,
            "node_id": node_id("Label", l.id),
            "url": format!("{}/labels/{}", self.api(), percent_encode(&l.name)),
            "name": l.name,
            "color": l.color,
            "default": false,
            "description": l.description,
        })
    }

    fn issue_labels(&self, n: u64) -> Vec<Value> {
        let Some(p) = self.pulls.get(&n) else {
            return Vec::new();
        };
        p.labels
            .iter()
            .filter_map(|name| self.labels.iter().find(|l| &l.name == name))
            .map(|l| self.label_json(l))
            .collect()
    }

    fn branch_json(&self, repo: &git2::Repository, branch: &str, sha: &str) -> Value {
        json!({
            "label": format!("{}:{branch}", self.owner),
            "ref": branch,
            "sha": sha,
            "user": self.user(&self.owner),
            "repo": self.repo_json(repo, None),
        })
    }

    /// `pull-request` when `full`, else `pull-request-simple`.
    fn pull_json(&self, repo: &git2::Repository, p: &Pull, full: bool) -> Value {
        let api = self.api();
        let html = self.html();
        let n = p.number;
        let state = if p.open { "open" } else { "closed" };
        let mut v = json!({
            "url": format!("{api}/pulls/{n}"),
            "id": p.id,
            "node_id": node_id("PullRequest", p.id),
            "html_url": format!("{html}/pull/{n}"),
            "diff_url": format!("{html}/pull/{n}.diff"),
            "patch_url": format!("{html}/pull/{n}.patch"),
            "issue_url": format!("{api}/issues/{n}"),
            "commits_url": format!("{api}/pulls/{n}/commits"),
            "review_comments_url": format!("{api}/pulls/{n}/comments"),
            "review_comment_url": format!("{api}/pulls/comments{{/number}}"),
            "comments_url": format!("{api}/issues/{n}/comments"),
            "statuses_url": format!("{api}/statuses/{}", p.head_sha),
            "number": n,
            "state": state,
            "locked": false,
            "title": p.title,
            "user": self.user(&p.author),
            "body": p.body,
            "labels": self.issue_labels(n),
            "milestone": null,
            "active_lock_reason": null,
            "created_at": rfc3339(p.created),
            "updated_at": rfc3339(p.updated),
            "closed_at": opt_time(p.closed),
            "merged_at": opt_time(p.merged),
            "merge_commit_sha": p.merge_sha,
            "assignee": null,
            "assignees": [],
            "requested_reviewers": [],
            "requested_teams": [],
            "author_association": self.association(&p.author),
            "auto_merge": null,
            "draft": p.draft,
        });
        let links = json!({
            "self": { "href": format!("{api}/pulls/{n}") },
            "html": { "href": format!("{html}/pull/{n}") },
            "issue": { "href": format!("{api}/issues/{n}") },
            "comments": { "href": format!("{api}/issues/{n}/comments") },
            "review_comments": { "href": format!("{api}/pulls/{n}/comments") },
            "review_comment": { "href": format!("{api}/pulls/comments{{/number}}") },
            "commits": { "href": format!("{api}/pulls/{n}/commits") },
            "statuses": { "href": format!("{api}/statuses/{}", p.head_sha) },
        });
        {
            let m = v.as_object_mut().expect("object");
            m.insert(
                "head".into(),
                self.branch_json(repo, &p.head_ref, &p.head_sha),
            );
            m.insert(
                "base".into(),
                self.branch_json(repo, &p.base_ref, &p.base_sha),
            );
            m.insert("_links".into(), links);
        }
        if full {
            let (commits, additions, deletions, changed) = stats(repo, p);
            let mergeable = if p.open { mergeable(repo, p) } else { None };
            let mergeable_state = match mergeable {
                None => "unknown",
                Some(false) => "dirty",
                Some(true) if p.draft => "draft",
                Some(true) => "clean",
            };
            let comments = self.comments.values().filter(|c| c.issue == n).count();
            let m = v.as_object_mut().expect("object");
            for (k, val) in [
                ("merged", json!(p.merged.is_some())),
                ("mergeable", json!(mergeable)),
                ("rebaseable", json!(mergeable)),
                ("mergeable_state", json!(mergeable_state)),
                (
                    "merged_by",
                    p.merged_by.as_deref().map_or(Value::Null, |l| self.user(l)),
                ),
                ("comments", json!(comments)),
                ("review_comments", json!(0)),
                ("maintainer_can_modify", json!(false)),
                ("commits", json!(commits)),
                ("additions", json!(additions)),
                ("deletions", json!(deletions)),
                ("changed_files", json!(changed)),
            ] {
                m.insert(k.into(), val);
            }
        }
        v
    }

    fn comment_json(&self, c: &IssueComment) -> Value {
        let api = self.api();
        json!({
            "id": c.id,
            "node_id": node_id("IssueComment", c.id),
            "url": format!("{api}/issues/comments/{}", c.id),
            "html_url": format!("{}/pull/{}#issuecomment-{}", self.html(), c.issue, c.id),
            "body": c.body,
            "user": self.user(&c.author),
            "created_at": rfc3339(c.created),
            "updated_at": rfc3339(c.updated),
            "issue_url": format!("{api}/issues/{}", c.issue),
            "author_association": self.association(&c.author),
            "performed_via_github_app": null,
            "reactions": {
                "url": format!("{api}/issues/comments/{}/reactions", c.id),
                "total_count": 0,
                "+1": 0,
                "-1": 0,
                "laugh": 0,
                "hooray": 0,
                "confused": 0,
                "heart": 0,
                "rocket": 0,
                "eyes": 0,
            },
        })
    }

    fn review_json(&self, r: &Review) -> Value {
        let html = format!("{}/pull/{}#pullrequestreview-{}", self.html(), r.pull, r.id);
        let pull = format!("{}/pulls/{}", self.api(), r.pull);
        json!({
            "id": r.id,
            "node_id": node_id("PullRequestReview", r.id),
            "user": self.user(&r.author),
            "body": r.body,
            "state": r.state,
            "html_url": html,
            "pull_request_url": pull,
            "author_association": self.association(&r.author),
            "_links": {
                "html": { "href": html },
                "pull_request": { "href": pull },
            },
            "submitted_at": rfc3339(r.submitted),
            "commit_id": r.commit,
        })
    }

    /// `status`.
    fn status_json(&self, s: &CommitStatus) -> Value {
        json!({
            "url": format!("{}/statuses/{}", self.api(), s.sha),
            "avatar_url": format!("{}/avatars/u/{}?v=4", self.url, user_id(&s.creator)),
            "id": s.id,
            "node_id": node_id("StatusContext", s.id),
            "state": s.state,
            "description": s.description,
            "target_url": s.target_url,
            "context": s.context,
            "created_at": rfc3339(s.created),
            "updated_at": rfc3339(s.created),
            "creator": self.user(&s.creator),
        })
    }

    // -- behaviour -----------------------------------------------------------------------------

    /// What GitHub does before answering about a pull request: an open one follows its head
    /// branch (and `refs/pull/<n>/head`) and its base branch.
    fn sync(&mut self, repo: &git2::Repository, n: u64) {
        let Some(p) = self.pulls.get_mut(&n) else {
            return;
        };
        if !p.open {
            return;
        }
        if let Some(tip) = branch_tip(repo, &p.head_ref) {
            if tip.to_string() != p.head_sha {
                p.head_sha = tip.to_string();
                p.updated = now();
                let _ = repo.reference(&format!("refs/pull/{n}/head"), tip, true, "synchronize");
            }
        }
        if let Some(tip) = branch_tip(repo, &p.base_ref) {
            p.base_sha = tip.to_string();
        }
    }

    fn sync_all(&mut self, repo: &git2::Repository) {
        let numbers: Vec<u64> = self.pulls.keys().copied().collect();
        for n in numbers {
            self.sync(repo, n);
        }
    }

    fn attach_label(&mut self, pull: u64, name: &str) {
        if !self
            .labels
            .iter()
            .any(|l| l.name.eq_ignore_ascii_case(name))
        {
            let id = self.id();
            self.labels.push(Label {
                id,
                name: name.to_string(),
                color: "ededed".to_string(),
                description: String::new(),
            });
        }
        let canonical = self
            .labels
            .iter()
            .find(|l| l.name.eq_ignore_ascii_case(name))
            .map(|l| l.name.clone())
            .expect("label exists");
        let p = self.pulls.get_mut(&pull).expect("pull exists");
        if !p.labels.contains(&canonical) {
            p.labels.push(canonical);
            p.updated = now();
        }
    }

    fn new_comment(&mut self, issue: u64, login: &str, body: &str) -> u64 {
        let id = self.id();
        let t = now();
        self.comments.insert(
            id,
            IssueComment {
                id,
                issue,
                author: login.to_string(),
                body: body.to_string(),
                created: t,
                updated: t,
            },
        );
        if let Some(p) = self.pulls.get_mut(&issue) {
            p.updated = t;
        }
        id
    }

    fn get_repository(&self, repo: &git2::Repository, login: &str) -> Response {
        Response::json(200, &self.repo_json(repo, Some(login)))
    }

    fn list_pulls(&mut self, repo: &git2::Repository, req: &Request) -> Response {
        self.sync_all(repo);
        let state = req.param("state").unwrap_or_else(|| "open".into());
        if !["open", "closed", "all"].contains(&state.as_str()) {
            return invalid("PullRequest", "state");
        }
        let head = req.param("head").map(|h| match h.split_once(':') {
            Some((o, b)) => (o.to_string(), b.to_string()),
            None => (self.owner.clone(), h),
        });
        let base = req.param("base");
        let ascending = req.param("direction").as_deref() == Some("asc");
        let mut pulls: Vec<&Pull> = self
            .pulls
            .values()
            .filter(|p| match state.as_str() {
                "open" => p.open,
                "closed" => !p.open,
                _ => true,
            })
            .filter(|p| {
                head.as_ref()
                    .is_none_or(|(o, b)| o.eq_ignore_ascii_case(&self.owner) && &p.head_ref == b)
            })
            .filter(|p| base.as_ref().is_none_or(|b| &p.base_ref == b))
            .collect();
        if !ascending {
            pulls.reverse();
        }
        let items = pulls
            .into_iter()
            .map(|p| self.pull_json(repo, p, false))
            .collect();
        self.page(req, items)
    }

    fn get_pull(&mut self, repo: &git2::Repository, n: u64) -> Response {
        self.sync(repo, n);
        match self.pulls.get(&n) {
            Some(p) => Response::json(200, &self.pull_json(repo, p, true)),
            None => not_found(),
        }
    }

    fn create_pull(&mut self, repo: &git2::Repository, req: &Request, login: &str) -> Response {
        let body = tri!(json_object(req));
        let title = tri!(opt_str(&body, "title"));
        let head = tri!(opt_str(&body, "head"));
        let base = tri!(opt_str(&body, "base"));
        let text = tri!(opt_str(&body, "body"));
        let draft = tri!(opt_bool(&body, "draft")).unwrap_or(false);
        let (Some(title), Some(head), Some(base)) = (title, head, base) else {
            let field = ["title", "head", "base"]
                .into_iter()
                .find(|f| !matches!(body.get(*f), Some(Value::String(_))))
                .unwrap_or("title");
            return missing("PullRequest", field);
        };
        let head_branch = match head.split_once(':') {
            Some((o, b)) if o.eq_ignore_ascii_case(&self.owner) => b.to_string(),
            Some(_) => return invalid("PullRequest", "head"),
            None => head.clone(),
        };
        let Some(head_tip) = branch_tip(repo, &head_branch) else {
            return invalid("PullRequest", "head");
        };
        let Some(base_tip) = branch_tip(repo, &base) else {
            return invalid("PullRequest", "base");
        };
        self.sync_all(repo);
        if self
            .pulls
            .values()
            .any(|p| p.open && p.head_ref == head_branch)
        {
            return custom(
                "PullRequest",
                &format!(
                    "A pull request already exists for {}:{head_branch}.",
                    self.owner
                ),
            );
        }
        if count_commits(repo, base_tip, head_tip) == 0 {
            return custom(
                "PullRequest",
                &format!("No commits between {base} and {head_branch}"),
            );
        }
        let n = self.next_number;
        self.next_number += 1;
        if let Err(e) = repo.reference(&format!("refs/pull/{n}/head"), head_tip, true, "opened") {
            return error(500, &format!("git: {e}"));
        }
        let id = self.id();
        let t = now();
        let p = Pull {
            number: n,
            id,
            title,
            body: text,
            open: true,
            draft,
            head_ref: head_branch,
            base_ref: base,
            head_sha: head_tip.to_string(),
            base_sha: base_tip.to_string(),
            author: login.to_string(),
            created: t,
            updated: t,
            closed: None,
            merged: None,
            merge_sha: None,
            merged_by: None,
            labels: Vec::new(),
        };
        let v = self.pull_json(repo, &p, true);
        self.pulls.insert(n, p);
        Response::json(201, &v).header("location", &format!("{}/pulls/{n}", self.api()))
    }

    fn update_pull(&mut self, repo: &git2::Repository, req: &Request, n: u64) -> Response {
        self.sync(repo, n);
        if !self.pulls.contains_key(&n) {
            return not_found();
        }
        let body = tri!(json_object(req));
        let title = tri!(opt_str(&body, "title"));
        let state = tri!(opt_str(&body, "state"));
        let base = tri!(opt_str(&body, "base"));
        let text = match body.get("body") {
            None => None,
            Some(Value::Null) => Some(None),
            Some(Value::String(s)) => Some(Some(s.clone())),
            Some(other) => {
                return error(
                    422,
                    &format!("Invalid request.\n\nFor 'properties/body', {other} is not a string."),
                )
            }
        };
        if let Some(s) = &state {
            if s != "open" && s != "closed" {
                return invalid("PullRequest", "state");
            }
        }
        if let Some(b) = &base {
            if branch_tip(repo, b).is_none() {
                return invalid("PullRequest", "base");
            }
        }
        let p = &self.pulls[&n];
        if state.as_deref() == Some("open") && !p.open {
            if p.merged.is_some() {
                return custom(
                    "PullRequest",
                    "state cannot be changed. The pull request has been merged.",
                );
            }
            if branch_tip(repo, &p.head_ref).is_none() {
                return custom(
                    "PullRequest",
                    &format!(
                        "state cannot be changed. The {} branch has been deleted.",
                        p.head_ref
                    ),
                );
            }
            let head = p.head_ref.clone();
            if self.pulls.values().any(|q| q.open && q.head_ref == head) {
                return custom(
                    "PullRequest",
                    &format!("A pull request already exists for {}:{head}.", self.owner),
                );
            }
        }
        let t = now();
        let p = self.pulls.get_mut(&n).expect("pull exists");
        if let Some(title) = title {
            p.title = title;
        }
        if let Some(text) = text {
            p.body = text;
        }
        if let Some(base) = base {
            p.base_ref = base;
        }
        match state.as_deref() {
            Some("closed") if p.open => {
                p.open = false;
                p.closed = Some(t);
            }
            Some("open") if !p.open => {
                p.open = true;
                p.closed = None;
            }
            _ => {}
        }
        p.updated = t;
        self.sync(repo, n);
        Response::json(200, &self.pull_json(repo, &self.pulls[&n], true))
    }

    fn merge_pull(
        &mut self,
        repo: &git2::Repository,
        req: &Request,
        n: u64,
        login: &str,
    ) -> Response {
        if !self.pulls.contains_key(&n) {
            return not_found();
        }
        let body = tri!(json_object(req));
        let commit_title = tri!(opt_str(&body, "commit_title"));
        let commit_message = tri!(opt_str(&body, "commit_message"));
        let sha = tri!(opt_str(&body, "sha"));
        let method = tri!(opt_str(&body, "merge_method")).unwrap_or_else(|| "merge".into());
        self.sync(repo, n);
        if self.move_head > 0 && self.pulls[&n].open {
            self.move_head -= 1;
            if let Err(e) = push_one_commit(repo, &self.pulls[&n].head_ref) {
                return error(500, &format!("git: {e}"));
            }
            self.sync(repo, n);
        }
        let p = &self.pulls[&n];
        if !p.open {
            return error(405, "Pull Request is not mergeable");
        }
        if method != "merge" {
            return invalid("PullRequest", "merge_method");
        }
        if sha.as_ref().is_some_and(|s| s != &p.head_sha) {
            return error(
                409,
                "Head branch was modified. Review and try the merge again.",
            );
        }
        if p.draft {
            return error(405, "Pull Request is still a draft");
        }
        let (Some(base_oid), Some(head_oid)) = (oid(&p.base_sha), oid(&p.head_sha)) else {
            return error(405, "Pull Request is not mergeable");
        };
        let (Ok(base_c), Ok(head_c)) = (repo.find_commit(base_oid), repo.find_commit(head_oid))
        else {
            return error(405, "Pull Request is not mergeable");
        };
        let mut index = match repo.merge_commits(&base_c, &head_c, None) {
            Ok(i) => i,
            Err(_) => return error(405, "Pull Request is not mergeable"),
        };
        if index.has_conflicts() {
            return error(405, "Pull Request is not mergeable");
        }
        let title = commit_title.unwrap_or_else(|| {
            format!("Merge pull request #{n} from {}/{}", self.owner, p.head_ref)
        });
        let message = commit_message.unwrap_or_else(|| p.title.clone());
        let base_ref = p.base_ref.clone();
        let landed = (|| -> Result<git2::Oid, git2::Error> {
            let mut tree_oid = index.write_tree_to(repo)?;
            if self.land_different_tree > 0 {
                self.land_different_tree -= 1;
                let tree = repo.find_tree(tree_oid)?;
                let mut builder = repo.treebuilder(Some(&tree))?;
                let blob = repo.blob(b"not what was approved\n")?;
                builder.insert("UNAPPROVED", blob, 0o100_644)?;
                tree_oid = builder.write()?;
            }
            let tree = repo.find_tree(tree_oid)?;
            let sig = git2::Signature::now("GitHub", "noreply@github.com")?;
            let merge = repo.commit(
                None,
                &sig,
                &sig,
                &format!("{title}\n\n{message}"),
                &tree,
                &[&base_c, &head_c],
            )?;
            repo.reference_matching(
                &format!("refs/heads/{base_ref}"),
                merge,
                true,
                base_oid,
                &format!("merge pull request #{n}"),
            )?;
            if self.land_extra_commit > 0 {
                self.land_extra_commit -= 1;
                let mut builder = repo.treebuilder(Some(&tree))?;
                let blob = repo.blob(b"not what was approved\n")?;
                builder.insert("UNAPPROVED", blob, 0o100_644)?;
                let extra_tree = repo.find_tree(builder.write()?)?;
                let merged = repo.find_commit(merge)?;
                let extra = repo.commit(None, &sig, &sig, "Extra", &extra_tree, &[&merged])?;
                repo.reference_matching(
                    &format!("refs/heads/{base_ref}"),
                    extra,
                    true,
                    merge,
                    "an extra commit",
                )?;
            }
            Ok(merge)
        })();
        let merge = match landed {
            Ok(m) => m,
            Err(e) if e.code() == git2::ErrorCode::Modified => {
                return error(
                    409,
                    "Base branch was modified. Review and try the merge again.",
                )
            }
            Err(e) => return error(500, &format!("git: {e}")),
        };
        let t = now();
        let p = self.pulls.get_mut(&n).expect("pull exists");
        p.open = false;
        p.closed = Some(t);
        p.merged = Some(t);
        p.updated = t;
        p.merge_sha = Some(merge.to_string());
        p.merged_by = Some(login.to_string());
        if !self.merge_then_fail.is_empty() {
            let then = self.merge_then_fail.remove(0);
            self.faults.push(Fault::Respond {
                method: String::new(),
                path: String::new(),
                times: then,
                status: 502,
                headers: Vec::new(),
                body: r#"{"message":"Server Error"}"#.into(),
            });
            return error(502, "Server Error");
        }
        Response::json(
            200,
            &json!({
                "sha": merge.to_string(),
                "merged": true,
                "message": "Pull Request successfully merged",
            }),
        )
    }

    fn list_reviews(&mut self, repo: &git2::Repository, req: &Request, n: u64) -> Response {
        self.sync(repo, n);
        if !self.pulls.contains_key(&n) {
            return not_found();
        }
        let items = self
            .reviews
            .iter()
            .filter(|r| r.pull == n)
            .map(|r| self.review_json(r))
            .collect();
        self.page(req, items)
    }

    fn list_comments(&self, req: &Request, n: u64) -> Response {
        if !self.pulls.contains_key(&n) {
            return not_found();
        }
        let items = self
            .comments
            .values()
            .filter(|c| c.issue == n)
            .map(|c| self.comment_json(c))
            .collect();
        self.page(req, items)
    }

    fn create_comment(&mut self, req: &Request, n: u64, login: &str) -> Response {
        if !self.pulls.contains_key(&n) {
            return not_found();
        }
        let body = tri!(json_object(req));
        let Some(text) = tri!(opt_str(&body, "body")) else {
            return missing("IssueComment", "body");
        };
        if text.chars().count() > COMMENT_MAX {
            return custom("IssueComment", BODY_TOO_LONG);
        }
        let id = self.new_comment(n, login, &text);
        let c = &self.comments[&id];
        Response::json(201, &self.comment_json(c))
            .header("location", &format!("{}/issues/comments/{id}", self.api()))
    }

    fn update_comment(&mut self, req: &Request, id: u64, login: &str) -> Response {
        let Some(c) = self.comments.get(&id) else {
            return not_found();
        };
        if !c.author.eq_ignore_ascii_case(login) {
            return error(403, "Must have admin rights to Repository.");
        }
        let body = tri!(json_object(req));
        let Some(text) = tri!(opt_str(&body, "body")) else {
            return missing("IssueComment", "body");
        };
        if text.chars().count() > COMMENT_MAX {
            return custom("IssueComment", BODY_TOO_LONG);
        }
        let c = self.comments.get_mut(&id).expect("comment exists");
        c.body = text;
        c.updated = now();
        Response::json(200, &self.comment_json(&self.comments[&id]))
    }

    fn add_labels(&mut self, req: &Request, n: u64) -> Response {
        if !self.pulls.contains_key(&n) {
            return not_found();
        }
        let value = if req.body.iter().all(u8::is_ascii_whitespace) {
            json!({})
        } else {
            match serde_json::from_slice::<Value>(&req.body) {
                Ok(v) => v,
                Err(_) => return error(400, "Problems parsing JSON"),
            }
        };
        let list = match &value {
            Value::Array(a) => a.clone(),
            Value::Object(m) => match m.get("labels") {
                Some(Value::Array(a)) => a.clone(),
                _ => return missing("Label", "labels"),
            },
            _ => return error(422, "Invalid request.\n\nNo subschema matched."),
        };
        let mut names = Vec::new();
        for item in &list {
            match item {
                Value::String(s) if !s.is_empty() => names.push(s.clone()),
                Value::Object(o) => match o.get("name") {
                    Some(Value::String(s)) if !s.is_empty() => names.push(s.clone()),
                    _ => return invalid("Label", "name"),
                },
                _ => return invalid("Label", "name"),
            }
        }
        for name in names {
            self.attach_label(n, &name);
        }
        Response::json(200, &Value::Array(self.issue_labels(n)))
    }

    fn create_status(
        &mut self,
        repo: &git2::Repository,
        req: &Request,
        sha: &str,
        login: &str,
    ) -> Response {
        let body = tri!(json_object(req));
        let state = tri!(opt_str(&body, "state"));
        let target_url = tri!(opt_str(&body, "target_url"));
        let description = tri!(opt_str(&body, "description"));
        let context = tri!(opt_str(&body, "context")).unwrap_or_else(|| "default".into());
        let Some(state) = state else {
            return missing("Status", "state");
        };
        if !["error", "failure", "pending", "success"].contains(&state.as_str()) {
            return validation(json!([{
                "resource": "Status",
                "field": "state",
                "code": "custom",
                "message": "state is not included in the list",
            }]));
        }
        let is_hex =
            sha.len() >= 4 && sha.len() <= 40 && sha.bytes().all(|b| b.is_ascii_hexdigit());
        let full = is_hex
            .then(|| repo.revparse_single(sha).ok())
            .flatten()
            .and_then(|o| o.peel_to_commit().ok())
            .map(|c| c.id().to_string());
        let Some(full) = full else {
            return error(422, &format!("No commit found for SHA: {sha}"));
        };
        if description
            .as_ref()
            .is_some_and(|d| d.chars().count() > 140)
        {
            return validation(json!([{
                "resource": "Status",
                "field": "description",
                "code": "custom",
                "message": "description is too long (maximum is 140 characters)",
            }]));
        }
        let id = self.id();
        let s = CommitStatus {
            id,
            sha: full.clone(),
            state,
            target_url,
            description,
            context,
            creator: login.to_string(),
            created: now(),
        };
        let v = self.status_json(&s);
        self.statuses.push(s);
        Response::json(201, &v).header("location", &format!("{}/statuses/{full}", self.api()))
    }

    fn combined_status(&self, repo: &git2::Repository, r: &str) -> Response {
        let Some(sha) = resolve_commit(repo, r) else {
            return error(422, &format!("No commit found for SHA: {r}"));
        };
        let mut seen: Vec<&str> = Vec::new();
        let mut latest: Vec<&CommitStatus> = Vec::new();
        for s in self.statuses.iter().rev().filter(|s| s.sha == sha) {
            if !seen.contains(&s.context.as_str()) {
                seen.push(&s.context);
                latest.push(s);
            }
        }
        let state = if latest
            .iter()
            .any(|s| s.state == "failure" || s.state == "error")
        {
            "failure"
        } else if latest.is_empty() || latest.iter().any(|s| s.state == "pending") {
            "pending"
        } else {
            "success"
        };
        let statuses: Vec<Value> = latest
            .iter()
            .map(|s| {
                let mut v = self.status_json(s);
                v.as_object_mut().expect("object").remove("creator");
                v
            })
            .collect();
        let api = self.api();
        Response::json(
            200,
            &json!({
                "state": state,
                "statuses": statuses,
                "sha": sha,
                "total_count": latest.len(),
                "repository": self.repo_json(repo, None),
                "commit_url": format!("{api}/commits/{sha}"),
                "url": format!("{api}/commits/{sha}/status"),
            }),
        )
    }
}

/// (commits, additions, deletions, changed files) of a pull request.
fn stats(repo: &git2::Repository, p: &Pull) -> (u64, usize, usize, usize) {
    let (Some(base), Some(head)) = (oid(&p.base_sha), oid(&p.head_sha)) else {
        return (0, 0, 0, 0);
    };
    let commits = count_commits(repo, base, head);
    let from = repo.merge_base(base, head).unwrap_or(base);
    let diff = (|| -> Result<git2::DiffStats, git2::Error> {
        let a = repo.find_commit(from)?.tree()?;
        let b = repo.find_commit(head)?.tree()?;
        repo.diff_tree_to_tree(Some(&a), Some(&b), None)?.stats()
    })();
    match diff {
        Ok(s) => (commits, s.insertions(), s.deletions(), s.files_changed()),
        Err(_) => (commits, 0, 0, 0),
    }
}

fn mergeable(repo: &git2::Repository, p: &Pull) -> Option<bool> {
    let base = repo.find_commit(oid(&p.base_sha)?).ok()?;
    let head = repo.find_commit(oid(&p.head_sha)?).ok()?;
    let index = repo.merge_commits(&base, &head, None).ok()?;
    Some(!index.has_conflicts())
}

/// Someone pushes one more (empty) commit onto `branch`.
fn push_one_commit(repo: &git2::Repository, branch: &str) -> Result<(), git2::Error> {
    let name = format!("refs/heads/{branch}");
    let tip = repo.find_reference(&name)?.peel_to_commit()?;
    let sig = git2::Signature::now("Someone Else", "someone.else@example.org")?;
    let tree = tip.tree()?;
    repo.commit(
        Some(&name),
        &sig,
        &sig,
        "Push while the merge was on its way\n",
        &tree,
        &[&tip],
    )?;
    Ok(())
}
