//! The Anthropic Messages API as Claude Code calls it (`ANTHROPIC_BASE_URL` = the origin, no
//! `/v1`): `POST /v1/messages[?beta=true]`, streamed (`stream: true`, server-sent events
//! `message_start`, `content_block_start`, `content_block_delta`, `content_block_stop`,
//! `message_delta`, `message_stop`) or as one JSON message.
//!
//! The main conversation is the request that offers the CLI's tools (`Write`, or `Bash`): its
//! first turn asks the `Write` tool to write the script's file, at the absolute path under the
//! working directory the system prompt names; once a `tool_result` comes back it streams the
//! answer. Any other message request (a title or topic, a quota check, a side call with another
//! model) gets a short plain text answer; `count_tokens` a count; `GET /v1/models` a list of
//! one; anything else a 404 in the API's error shape. Every message reports `super::USAGE`:
//! `input_tokens` 1234, `cache_read_input_tokens` 200 and `cache_creation_input_tokens` 0 in
//! `message_start`, `output_tokens` 56 in `message_delta`.

use super::{Event, Reply, Request, Script, Server, USAGE};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

pub fn start(script: Script) -> Server {
    Server::start(move |req, _seen| respond(&script, req))
}

fn respond(script: &Script, req: &Request) -> Reply {
    let path = req.path.split('?').next().unwrap_or("");
    match (req.method.as_str(), path) {
        ("POST", "/v1/messages") => messages(script, &req.json()),
        ("POST", "/v1/messages/count_tokens") => {
            Reply::Json(200, json!({ "input_tokens": USAGE.input }))
        }
        ("GET", "/v1/models") => Reply::Json(
            200,
            json!({
                "data": [model_info("claude-sonnet-4-5")],
                "has_more": false,
                "first_id": "claude-sonnet-4-5",
                "last_id": "claude-sonnet-4-5",
            }),
        ),
        ("GET", p) if p.starts_with("/v1/models/") => {
            Reply::Json(200, model_info(&p["/v1/models/".len()..]))
        }
        ("HEAD", _) | ("GET", "/") => Reply::Json(200, json!({})),
        _ => Reply::Json(
            404,
            json!({
                "type": "error",
                "error": { "type": "not_found_error", "message": format!("no {} {}", req.method, req.path) },
            }),
        ),
    }
}

fn model_info(id: &str) -> Value {
    json!({ "type": "model", "id": id, "display_name": id, "created_at": "2025-01-01T00:00:00Z" })
}

/// What one message request gets: the blocks of the assistant's message, its stop reason, and
/// whether the text is streamed slowly.
fn messages(script: &Script, body: &Value) -> Reply {
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("claude-sonnet-4-5")
        .to_string();
    let stream = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let tools: Vec<&str> = body
        .get("tools")
        .and_then(Value::as_array)
        .map(|t| t.iter().filter_map(|t| t.get("name")?.as_str()).collect())
        .unwrap_or_default();
    let main = tools.contains(&"Write") || tools.contains(&"Bash");
    let turn = if !main {
        Turn::Text(vec![(Duration::ZERO, side_answer(body))])
    } else if answered(body) {
        Turn::Text(script.pieces())
    } else {
        let dir = working_directory(body).unwrap_or_else(|| ".".into());
        let path = format!("{}/{}", dir.trim_end_matches('/'), script.file);
        if tools.contains(&"Write") {
            Turn::Tool(
                "Write",
                json!({ "file_path": path, "content": script.content }),
            )
        } else {
            let command = format!(
                "mkdir -p \"$(dirname '{path}')\" && printf '%s' '{}' > '{path}'",
                script.content.replace('\'', "'\\''")
            );
            Turn::Tool(
                "Bash",
                json!({ "command": command, "description": "Write the file" }),
            )
        }
    };
    if stream {
        Reply::Events(events(&model, turn))
    } else {
        Reply::Json(200, whole(&model, turn))
    }
}

enum Turn {
    Text(Vec<(Duration, String)>),
    Tool(&'static str, Value),
}

fn next_id(prefix: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(1);
    format!("{prefix}_fake{:020}", N.fetch_add(1, Ordering::Relaxed))
}

fn start_usage() -> Value {
    json!({
        "input_tokens": USAGE.input,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": USAGE.cached,
        "output_tokens": 1,
    })
}

fn whole(model: &str, turn: Turn) -> Value {
    let (content, stop) = match turn {
        Turn::Text(pieces) => {
            let text: String = pieces.into_iter().map(|(_, t)| t).collect();
            (json!([{ "type": "text", "text": text }]), "end_turn")
        }
        Turn::Tool(name, input) => (
            json!([{ "type": "tool_use", "id": next_id("toolu"), "name": name, "input": input }]),
            "tool_use",
        ),
    };
    json!({
        "id": next_id("msg"),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": null,
        "usage": {
            "input_tokens": USAGE.input,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": USAGE.cached,
            "output_tokens": USAGE.output,
        },
    })
}

fn events(model: &str, turn: Turn) -> Vec<Event> {
    let mut out = vec![Event::named(
        "message_start",
        json!({
            "type": "message_start",
            "message": {
                "id": next_id("msg"),
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [],
                "stop_reason": null,
                "stop_sequence": null,
                "usage": start_usage(),
            },
        }),
    )];
    let stop = match turn {
        Turn::Text(pieces) => {
            out.push(Event::named(
                "content_block_start",
                json!({ "type": "content_block_start", "index": 0,
                        "content_block": { "type": "text", "text": "" } }),
            ));
            for (pause, text) in pieces {
                out.push(
                    Event::named(
                        "content_block_delta",
                        json!({ "type": "content_block_delta", "index": 0,
                                "delta": { "type": "text_delta", "text": text } }),
                    )
                    .after(pause),
                );
            }
            "end_turn"
        }
        Turn::Tool(name, input) => {
            out.push(Event::named(
                "content_block_start",
                json!({ "type": "content_block_start", "index": 0,
                        "content_block": { "type": "tool_use", "id": next_id("toolu"),
                                           "name": name, "input": {} } }),
            ));
            out.push(Event::named(
                "content_block_delta",
                json!({ "type": "content_block_delta", "index": 0,
                        "delta": { "type": "input_json_delta", "partial_json": input.to_string() } }),
            ));
            "tool_use"
        }
    };
    out.push(Event::named(
        "content_block_stop",
        json!({ "type": "content_block_stop", "index": 0 }),
    ));
    out.push(Event::named(
        "message_delta",
        json!({ "type": "message_delta",
                "delta": { "stop_reason": stop, "stop_sequence": null },
                "usage": { "output_tokens": USAGE.output } }),
    ));
    out.push(Event::named(
        "message_stop",
        json!({ "type": "message_stop" }),
    ));
    out
}

/// Whether the conversation's last user message carries a tool result (the tool ran).
fn answered(body: &Value) -> bool {
    body.get("messages")
        .and_then(Value::as_array)
        .and_then(|m| m.last())
        .and_then(|m| m.get("content"))
        .and_then(Value::as_array)
        .is_some_and(|c| {
            c.iter()
                .any(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
        })
}

/// All the text of the system prompt and messages, for looking things up in.
fn all_text(body: &Value) -> String {
    fn walk(v: &Value, out: &mut String) {
        match v {
            Value::String(s) => {
                out.push_str(s);
                out.push('\n');
            }
            Value::Array(a) => a.iter().for_each(|v| walk(v, out)),
            Value::Object(o) => o.values().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let mut out = String::new();
    if let Some(s) = body.get("system") {
        walk(s, &mut out);
    }
    if let Some(m) = body.get("messages") {
        walk(m, &mut out);
    }
    out
}

/// The working directory Claude Code names in its system prompt (`Working directory: /…`, or
/// `Primary working directory: /…`).
fn working_directory(body: &Value) -> Option<String> {
    let text = all_text(body);
    text.lines().find_map(|l| {
        let l = l.trim().trim_start_matches(['-', '*', ' ']);
        let (key, value) = l.split_once(':')?;
        let key = key.trim().to_ascii_lowercase();
        let value = value.trim();
        (key.ends_with("working directory") && value.starts_with('/')).then(|| value.to_string())
    })
}

/// A short answer for a request that is not the main conversation: JSON when it seems to want
/// JSON (topic and title generation), else plain words.
fn side_answer(body: &Value) -> String {
    let text = all_text(body).to_ascii_lowercase();
    if text.contains("json") {
        json!({ "isNewTopic": false, "title": "Fake task", "topic": "Fake task" }).to_string()
    } else {
        "Fake task".into()
    }
}
