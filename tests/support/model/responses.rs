//! The OpenAI Responses API as Codex calls it (a model provider whose `base_url` ends in
//! `/v1`, `wire_api = "responses"`): `POST /v1/responses`, streamed (server-sent events
//! `response.created`, `response.output_item.added`, `response.output_text.delta`,
//! `response.output_item.done`, `response.completed`).
//!
//! Codex 0.171 offers its tools inside the first `input` item (`additional_tools`): a namespace
//! `functions` whose freeform `exec` tool runs JavaScript that calls nested tools such as
//! `tools.apply_patch(…)`. The first turn calls `exec` with a script that adds the script's file
//! by `apply_patch` (a path relative to the working directory); once a tool's output comes back
//! in `input`, it streams the answer. A request that offers no `exec` tool gets a plain answer
//! saying so (the test then fails on the missing file, with this in the kept output). Every
//! response reports `super::USAGE`: `input_tokens` 1434 of which `cached_tokens` 200 (the
//! Responses API counts cached input inside `input_tokens`), `output_tokens` 56.

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
        ("POST", "/v1/responses") => Reply::Events(events(turn(script, &req.json()))),
        ("GET", "/v1/models") => Reply::Json(200, json!({ "object": "list", "data": [] })),
        _ => super::openai_not_found(req),
    }
}

enum Turn {
    Text(Vec<(Duration, String)>),
    /// A call of the freeform `exec` tool with this JavaScript.
    Exec(String),
}

fn turn(script: &Script, body: &Value) -> Turn {
    let input = body
        .get("input")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let answered = input.iter().any(|i| {
        i.get("type")
            .and_then(Value::as_str)
            .is_some_and(|t| t.ends_with("_call_output"))
    });
    if answered {
        return Turn::Text(script.pieces());
    }
    if !offers_exec(&input) {
        return Turn::Text(vec![(
            Duration::ZERO,
            "The fake model found no `exec` tool in the request.".into(),
        )]);
    }
    let mut patch = format!("*** Begin Patch\n*** Add File: {}\n", script.file);
    for line in script.content.lines() {
        patch.push_str(&format!("+{line}\n"));
    }
    patch.push_str("*** End Patch\n");
    let literal = serde_json::Value::String(patch).to_string();
    Turn::Exec(format!(
        "const r = await tools.apply_patch({literal});\ntext(r);"
    ))
}

/// Whether `exec` is among the tools the request's `additional_tools` item offers.
fn offers_exec(input: &[Value]) -> bool {
    fn has(tools: &Value) -> bool {
        tools.as_array().is_some_and(|ts| {
            ts.iter().any(|t| {
                t.get("name").and_then(Value::as_str) == Some("exec")
                    || t.get("tools").is_some_and(has)
            })
        })
    }
    input
        .iter()
        .filter(|i| i.get("type").and_then(Value::as_str) == Some("additional_tools"))
        .any(|i| i.get("tools").is_some_and(has))
}

fn next_id(prefix: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(1);
    format!("{prefix}_fake{:020}", N.fetch_add(1, Ordering::Relaxed))
}

fn events(turn: Turn) -> Vec<Event> {
    let response = next_id("resp");
    let mut out = vec![Event::named(
        "response.created",
        json!({ "type": "response.created", "response": { "id": response } }),
    )];
    let item = match turn {
        Turn::Exec(js) => json!({
            "type": "custom_tool_call",
            "id": next_id("ctc"),
            "call_id": next_id("call"),
            "namespace": "functions",
            "name": "exec",
            "input": js,
        }),
        Turn::Text(pieces) => {
            let id = next_id("msg");
            out.push(Event::named(
                "response.output_item.added",
                json!({
                    "type": "response.output_item.added",
                    "output_index": 0,
                    "item": { "type": "message", "role": "assistant", "id": id, "content": [] },
                }),
            ));
            let mut text = String::new();
            for (pause, piece) in pieces {
                text.push_str(&piece);
                out.push(
                    Event::named(
                        "response.output_text.delta",
                        json!({
                            "type": "response.output_text.delta",
                            "output_index": 0,
                            "content_index": 0,
                            "item_id": id,
                            "delta": piece,
                        }),
                    )
                    .after(pause),
                );
            }
            json!({
                "type": "message",
                "role": "assistant",
                "id": id,
                "content": [{ "type": "output_text", "text": text, "annotations": [] }],
            })
        }
    };
    out.push(Event::named(
        "response.output_item.done",
        json!({ "type": "response.output_item.done", "output_index": 0, "item": item }),
    ));
    out.push(Event::named(
        "response.completed",
        json!({
            "type": "response.completed",
            "response": {
                "id": response,
                "usage": {
                    "input_tokens": USAGE.input + USAGE.cached,
                    "input_tokens_details": { "cached_tokens": USAGE.cached },
                    "output_tokens": USAGE.output,
                    "output_tokens_details": { "reasoning_tokens": 0 },
                    "total_tokens": USAGE.input + USAGE.cached + USAGE.output,
                },
            },
        }),
    ));
    out
}
