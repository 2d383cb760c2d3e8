//! Fake model servers of our own on loopback, one per protocol the agent CLIs speak: Anthropic
//! Messages (Claude Code), OpenAI Responses (Codex) and OpenAI chat completions (Aider). Each
//! plays a scripted model that writes one file through the CLI's own tools, then answers;
//! it can take its time over the answer (streamed in pieces, as a real model does), reports
//! usage, and records every request it received.
//!
//! This module is the HTTP/1.1 part they share: a listener on 127.0.0.1, one thread per
//! connection, request bodies read whole (by length or chunked), and replies written either as
//! one JSON body or as a server-sent event stream in chunked encoding, flushed event by event.
//! Nothing here depends on the test binary but std and serde_json, so a protocol module can be
//! tried against a CLI from a scratch program (`#[path]` to this folder).

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[allow(unused_imports)]
pub mod anthropic;
#[allow(unused_imports)]
pub mod chat;
#[allow(unused_imports)]
pub mod responses;

/// What the scripted model does: write `content` to `file` (relative to the worktree the CLI
/// runs in) with the CLI's file-writing or shell tool, then, once the tool's result comes back,
/// answer `answer`, streaming it over `think` in pieces about a second apart.
#[derive(Debug, Clone)]
pub struct Script {
    pub file: String,
    pub content: String,
    pub answer: String,
    pub think: Duration,
}

impl Script {
    pub fn writes(file: &str, content: &str) -> Script {
        Script {
            file: file.into(),
            content: content.into(),
            answer: format!("I wrote {file}."),
            think: Duration::ZERO,
        }
    }

    pub fn thinking(mut self, think: Duration) -> Script {
        self.think = think;
        self
    }

    /// The answer cut into pieces, with the pause before each, so that the whole takes
    /// `think` (one piece when `think` is zero): about one piece a second, each holding some
    /// of the text, so that a CLI that prints only text has something to print each time.
    pub fn pieces(&self) -> Vec<(Duration, String)> {
        let n = self.think.as_secs().max(1) as usize;
        let chars: Vec<char> = self.answer.chars().collect();
        let per = chars.len().div_ceil(n).max(1);
        let mut out: Vec<(Duration, String)> = chars
            .chunks(per)
            .map(|c| (Duration::from_secs(1), c.iter().collect()))
            .collect();
        while out.len() < n {
            out.push((Duration::from_secs(1), String::new()));
        }
        if self.think.is_zero() {
            for p in &mut out {
                p.0 = Duration::ZERO;
            }
        }
        out
    }
}

/// The tokens every fake reports for each request it answers: input, output, cached input.
pub const USAGE: Usage = Usage {
    input: 1234,
    output: 56,
    cached: 200,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    pub input: u64,
    pub output: u64,
    pub cached: u64,
}

/// One request a fake received.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    pub path: String,
    /// Header names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or(serde_json::Value::Null)
    }
}

/// How a fake answers one request.
pub enum Reply {
    Json(u16, serde_json::Value),
    /// The same, sent after a pause (a model taking its time over a whole answer).
    JsonAfter(Duration, u16, serde_json::Value),
    /// Server-sent events: each with its `event:` name (if any), its data, and the pause
    /// before it is sent.
    Events(Vec<Event>),
}

pub struct Event {
    pub pause: Duration,
    pub name: Option<String>,
    pub data: String,
}

impl Event {
    pub fn named(name: &str, data: serde_json::Value) -> Event {
        Event {
            pause: Duration::ZERO,
            name: Some(name.into()),
            data: data.to_string(),
        }
    }
    pub fn data(data: serde_json::Value) -> Event {
        Event {
            pause: Duration::ZERO,
            name: None,
            data: data.to_string(),
        }
    }
    pub fn raw(data: &str) -> Event {
        Event {
            pause: Duration::ZERO,
            name: None,
            data: data.into(),
        }
    }
    pub fn after(mut self, pause: Duration) -> Event {
        self.pause = pause;
        self
    }
}

/// A fake listening on loopback.
pub struct Server {
    /// `http://127.0.0.1:PORT`, no trailing slash.
    pub origin: String,
    pub port: u16,
    pub seen: Arc<Mutex<Vec<Request>>>,
}

impl Server {
    /// Listens on a free loopback port and answers each request with `respond`, given the
    /// request and every request seen before it (this one included, last).
    pub fn start(
        respond: impl Fn(&Request, &[Request]) -> Reply + Send + Sync + 'static,
    ) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let port = listener.local_addr().expect("addr").port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let respond = Arc::new(respond);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let (log, respond) = (log.clone(), respond.clone());
                std::thread::spawn(move || serve(stream, &log, &*respond));
            }
        });
        Server {
            origin: format!("http://127.0.0.1:{port}"),
            port,
            seen,
        }
    }

    pub fn requests(&self) -> Vec<Request> {
        self.seen.lock().expect("log").clone()
    }
}

fn serve(
    stream: TcpStream,
    log: &Mutex<Vec<Request>>,
    respond: &(dyn Fn(&Request, &[Request]) -> Reply + Send + Sync),
) {
    let Ok(read) = stream.try_clone() else { return };
    let mut reader = BufReader::new(read);
    let mut out = stream;
    // Keep-alive: answer requests on this connection until the client closes it.
    while let Some(req) = read_request(&mut reader) {
        let (reply, keep) = {
            let mut all = log.lock().expect("log");
            all.push(req.clone());
            let reply = respond(&req, &all);
            (
                reply,
                !req.header("connection")
                    .is_some_and(|c| c.eq_ignore_ascii_case("close")),
            )
        };
        if write_reply(&mut out, reply).is_err() || !keep {
            return;
        }
    }
}

fn read_request(reader: &mut impl BufRead) -> Option<Request> {
    let mut line = String::new();
    if reader.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let path = parts.next()?.to_string();
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).ok()? == 0 {
            return None;
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    let get = |k: &str| headers.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let mut body = Vec::new();
    if get("transfer-encoding").is_some_and(|t| t.eq_ignore_ascii_case("chunked")) {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size).ok()?;
            let n = usize::from_str_radix(size.trim().split(';').next()?, 16).ok()?;
            let mut chunk = vec![0; n + 2];
            reader.read_exact(&mut chunk).ok()?;
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
    } else if let Some(n) = get("content-length").and_then(|n| n.parse::<usize>().ok()) {
        body = vec![0; n];
        reader.read_exact(&mut body).ok()?;
    }
    Some(Request {
        method,
        path,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

fn write_reply(out: &mut TcpStream, reply: Reply) -> std::io::Result<()> {
    match reply {
        Reply::JsonAfter(pause, status, value) => {
            std::thread::sleep(pause);
            write_reply(out, Reply::Json(status, value))
        }
        Reply::Json(status, value) => {
            let body = value.to_string();
            write!(
                out,
                "HTTP/1.1 {status} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                reason(status),
                body.len()
            )?;
            out.flush()
        }
        Reply::Events(events) => {
            write!(
                out,
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n"
            )?;
            out.flush()?;
            for e in events {
                std::thread::sleep(e.pause);
                let mut text = String::new();
                if let Some(name) = &e.name {
                    text.push_str(&format!("event: {name}\n"));
                }
                for l in e.data.lines() {
                    text.push_str(&format!("data: {l}\n"));
                }
                text.push('\n');
                write!(out, "{:x}\r\n{text}\r\n", text.len())?;
                out.flush()?;
            }
            write!(out, "0\r\n\r\n")?;
            out.flush()
        }
    }
}

/// The OpenAI APIs' answer to a request they have no route for.
pub fn openai_not_found(req: &Request) -> Reply {
    Reply::Json(
        404,
        serde_json::json!({
            "error": {
                "message": format!("no {} {}", req.method, req.path),
                "type": "invalid_request_error",
                "code": "not_found",
            },
        }),
    )
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        404 => "Not Found",
        400 => "Bad Request",
        _ => "Error",
    }
}
