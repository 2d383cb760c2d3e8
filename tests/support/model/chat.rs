//! OpenAI chat completions as Aider calls them (`OPENAI_API_BASE` = the origin and `/v1`, the
//! model `openai/<name>`): `POST /v1/chat/completions`, streamed (`data:` chunks of
//! `chat.completion.chunk`, a last chunk with `usage`, then `data: [DONE]`) or as one
//! `chat.completion`.
//!
//! Aider has no tools: the model edits files by writing them in its reply, in the edit format
//! aider's system prompt asks for. This fake answers in the two formats aider picks for the
//! models it knows and those it does not: `diff` (a SEARCH/REPLACE block with an empty SEARCH
//! creates the file) when the system prompt asks for SEARCH/REPLACE blocks, and `whole` (the
//! file's path, then its whole content fenced) otherwise, followed by the script's answer. The
//! reply is streamed in pieces over the script's `think`. Every completion reports
//! `super::USAGE` (`prompt_tokens` 1434 with `prompt_tokens_details.cached_tokens` 200,
//! `completion_tokens` 56); aider reads it only when it does not stream, and otherwise prints a
//! count of its own.

use super::{Event, Reply, Request, Script, Server, USAGE};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};

pub fn start(script: Script) -> Server {
    Server::start(move |req, _seen| respond(&script, req))
}

fn respond(script: &Script, req: &Request) -> Reply {
    let path = req.path.split('?').next().unwrap_or("");
    match (req.method.as_str(), path) {
        ("POST", "/v1/chat/completions") => completion(script, &req.json()),
        ("GET", "/v1/models") => Reply::Json(200, json!({ "object": "list", "data": [] })),
        _ => super::openai_not_found(req),
    }
}

/// The edit format the request's system prompt asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Whole,
    Diff,
}

pub fn format_asked(body: &Value) -> Format {
    let asks_search_replace = body
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("system"))
        .filter_map(|m| m.get("content").and_then(Value::as_str))
        .any(|c| c.contains("SEARCH/REPLACE"));
    if asks_search_replace {
        Format::Diff
    } else {
        Format::Whole
    }
}

/// The reply that writes the script's file in `format`, then says the script's answer.
fn reply(script: &Script, format: Format) -> String {
    let content = script.content.trim_end_matches('\n');
    let block = match format {
        Format::Whole => format!("{}\n```\n{content}\n```\n", script.file),
        Format::Diff => format!(
            "{}\n```\n<<<<<<< SEARCH\n=======\n{content}\n>>>>>>> REPLACE\n```\n",
            script.file
        ),
    };
    format!("{block}\n{}\n", script.answer)
}

fn next_id() -> String {
    static N: AtomicU64 = AtomicU64::new(1);
    format!("chatcmpl-fake{:020}", N.fetch_add(1, Ordering::Relaxed))
}

fn usage() -> Value {
    json!({
        "prompt_tokens": USAGE.input + USAGE.cached,
        "prompt_tokens_details": { "cached_tokens": USAGE.cached },
        "completion_tokens": USAGE.output,
        "total_tokens": USAGE.input + USAGE.cached + USAGE.output,
    })
}

fn completion(script: &Script, body: &Value) -> Reply {
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("fake")
        .to_string();
    let text = reply(script, format_asked(body));
    let id = next_id();
    if !body.get("stream").and_then(Value::as_bool).unwrap_or(false) {
        return Reply::Json(
            200,
            json!({
                "id": id,
                "object": "chat.completion",
                "created": 1_764_000_000,
                "model": model,
                "choices": [{
                    "index": 0,
                    "message": { "role": "assistant", "content": text },
                    "finish_reason": "stop",
                }],
                "usage": usage(),
            }),
        );
    }
    let chunk = |delta: Value, finish: Value| {
        json!({
            "id": id,
            "object": "chat.completion.chunk",
            "created": 1_764_000_000,
            "model": model,
            "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }],
        })
    };
    let mut events = vec![Event::data(chunk(
        json!({ "role": "assistant", "content": "" }),
        Value::Null,
    ))];
    let pieces = Script {
        answer: text,
        ..script.clone()
    }
    .pieces();
    for (pause, piece) in pieces {
        events.push(Event::data(chunk(json!({ "content": piece }), Value::Null)).after(pause));
    }
    events.push(Event::data(chunk(json!({}), json!("stop"))));
    events.push(Event::data(json!({
        "id": id,
        "object": "chat.completion.chunk",
        "created": 1_764_000_000,
        "model": model,
        "choices": [],
        "usage": usage(),
    })));
    events.push(Event::raw("[DONE]"));
    Reply::Events(events)
}
