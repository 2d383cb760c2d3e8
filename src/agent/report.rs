//! What an agent CLI reported on its standard output (and, for codex, its log on stderr), read
//! line by line as the lines arrive:
//! the tokens it spent and the failure it reported though it exited 0. It is fed every line
//! the program printed (`process::Lines`), not the part of the output that `max_output` keeps,
//! so a report line in the middle of a long run, or one longer than the kept output, still
//! counts; a line too long to read at all ([`process::LINE_MAX`]) is itself a failure, because
//! what it held (spend, an error) cannot be known.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::process;

/// How a CLI's output reports the tokens it spent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsageFormat {
    /// Claude Code's `stream-json`: a final `{"type":"result", "usage": {…}}` line.
    ClaudeStream,
    /// Codex's `exec --json`: `{"type":"turn.completed", "usage": {…}}` lines.
    CodexJson,
    /// Aider's summary line: `Tokens: 1.2k sent, 345 received. …`.
    AiderSummary,
}

/// The tokens one attempt's worker reported spending.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Input tokens read from the provider's prompt cache (counted apart from `input_tokens`).
    #[serde(default)]
    pub cached_tokens: u64,
}

impl std::ops::Add for Usage {
    type Output = Usage;
    fn add(self, other: Usage) -> Usage {
        // Saturating: figures a worker prints can be as large as it likes, and a sum that
        // wrapped would lower the spend recorded.
        Usage {
            input_tokens: self.input_tokens.saturating_add(other.input_tokens),
            output_tokens: self.output_tokens.saturating_add(other.output_tokens),
            cached_tokens: self.cached_tokens.saturating_add(other.cached_tokens),
        }
    }
}

impl Usage {
    pub fn total(&self) -> u64 {
        self.input_tokens
            .saturating_add(self.output_tokens)
            .saturating_add(self.cached_tokens)
    }
}

/// The longest failure text kept, in characters.
const FAILURE_CHARS: usize = 400;

#[derive(Debug, Clone)]
pub struct Report {
    format: UsageFormat,
    usage: Option<Usage>,
    /// Claude Code: the last `result` was marked `is_error`, with its text. Codex: the last of
    /// its `error`, `turn.failed` and `turn.completed` events was a failure, with its text.
    failed: Option<String>,
    /// Aider: a `Tokens:` line was seen (it prints one after each completed model reply).
    replied: bool,
    last_line: String,
    overlong: u64,
    /// Claude Code: the usage of each model message its stream showed, by message id, until
    /// its `result` (which carries the session's total) arrives; a CLI killed before printing
    /// its `result` has spent at least these.
    messages: std::collections::BTreeMap<String, Usage>,
    current: Option<String>,
    result: bool,
    /// Codex: the usage of every response its log showed.
    responses: Usage,
    /// Its final answer: Claude Code's last `result`, codex's last `agent_message`.
    answer: Option<String>,
}

/// What precedes the event's JSON in codex's log line of a server-sent event.
const SSE_EVENT: &str = "codex_api::sse::responses: SSE event: ";

impl Report {
    pub fn new(format: UsageFormat) -> Report {
        Report {
            format,
            usage: None,
            failed: None,
            replied: false,
            last_line: String::new(),
            overlong: 0,
            messages: Default::default(),
            current: None,
            result: false,
            responses: Usage::default(),
            answer: None,
        }
    }

    /// The report of a whole output at once.
    pub fn of(format: UsageFormat, stdout: &str) -> Report {
        let mut r = Report::new(format);
        for line in stdout.lines() {
            r.feed(line);
        }
        r
    }

    pub fn feed(&mut self, line: &str) {
        if !line.trim().is_empty() {
            self.last_line = line.trim().to_string();
        }
        match self.format {
            UsageFormat::ClaudeStream => {
                let Some(v) = json(line) else { return };
                match kind(&v) {
                    Some("result") => {
                        self.result = true;
                        if let Some(u) = v.get("usage") {
                            self.usage = Some(anthropic(u));
                        }
                        self.failed = (v.get("is_error").and_then(Value::as_bool) == Some(true))
                            .then(|| text(&v, &["result", "subtype"]));
                        if let Some(a) = v.get("result").and_then(Value::as_str) {
                            self.answer = Some(a.to_string());
                        }
                    }
                    Some("stream_event") if !self.result => self.message_event(&v["event"]),
                    Some("assistant") if !self.result => {
                        let m = &v["message"];
                        if let (Some(id), Some(u)) = (m["id"].as_str(), m.get("usage")) {
                            self.messages
                                .entry(id.to_string())
                                .or_insert_with(|| anthropic(u));
                            self.usage = self.messages.values().copied().reduce(|a, b| a + b);
                        }
                    }
                    _ => {}
                }
            }
            UsageFormat::CodexJson => {
                let Some(v) = json(line) else { return };
                match kind(&v) {
                    Some("turn.completed") => {
                        self.failed = None;
                        if let Some(u) = v.get("usage") {
                            let cached = count(u, "cached_input_tokens");
                            self.add(Usage {
                                input_tokens: count(u, "input_tokens").saturating_sub(cached),
                                output_tokens: count(u, "output_tokens"),
                                cached_tokens: cached,
                            });
                        }
                    }
                    Some("item.completed") if v["item"]["type"] == "agent_message" => {
                        if let Some(a) = v["item"]["text"].as_str() {
                            self.answer = Some(a.to_string());
                        }
                    }
                    Some("error" | "turn.failed") => {
                        self.failed = Some(text(&v, &["message", "error.message"]));
                    }
                    _ => {}
                }
            }
            UsageFormat::AiderSummary => {
                if let Some(rest) = line.trim().strip_prefix("Tokens:") {
                    self.replied = true;
                    self.add(aider_tokens(rest));
                }
            }
        }
    }

    /// A line of what the CLI logged on stderr: for codex, its trace of each server-sent
    /// event (the preset's `RUST_LOG`), whose `response.completed` carries the endpoint's own
    /// usage for each response; the other CLIs report nothing there.
    pub fn feed_log(&mut self, line: &str) {
        if self.format != UsageFormat::CodexJson {
            return;
        }
        let Some(at) = line.find(SSE_EVENT) else {
            return;
        };
        let v = json(&line[at + SSE_EVENT.len()..]);
        if let Some(u) = v
            .as_ref()
            .filter(|v| kind(v) == Some("response.completed"))
            .and_then(|v| v["response"].get("usage"))
        {
            let cached = u["input_tokens_details"]["cached_tokens"]
                .as_u64()
                .unwrap_or(0);
            self.responses = self.responses
                + Usage {
                    input_tokens: count(u, "input_tokens").saturating_sub(cached),
                    output_tokens: count(u, "output_tokens"),
                    cached_tokens: cached,
                };
        }
    }

    /// An Anthropic streaming event Claude Code passed on: a message's start carries its
    /// input and cache figures, its delta the output tokens so far.
    fn message_event(&mut self, e: &Value) {
        match kind(e) {
            Some("message_start") => {
                let m = &e["message"];
                if let Some(id) = m["id"].as_str() {
                    let u = m.get("usage").map(anthropic).unwrap_or_default();
                    self.messages.insert(id.to_string(), u);
                    self.current = Some(id.to_string());
                }
            }
            Some("message_delta") => {
                let (Some(id), Some(u)) = (self.current.as_ref(), e.get("usage")) else {
                    return;
                };
                if let Some(m) = self.messages.get_mut(id) {
                    m.output_tokens = m.output_tokens.max(count(u, "output_tokens"));
                }
            }
            _ => return,
        }
        self.usage = self.messages.values().copied().reduce(|a, b| a + b);
    }

    fn add(&mut self, u: Usage) {
        self.usage = Some(self.usage.map_or(u, |s| s + u));
    }

    /// Its final answer (what agent reviewers and planners read), read whole however long
    /// its line: Claude Code's last `result`, codex's last `agent_message`; `None` for aider,
    /// whose answer is all it printed.
    pub fn answer(&self) -> Option<String> {
        self.answer.clone()
    }

    /// What it reported spending. For codex, each figure is the larger of its turns' totals
    /// and the sum of the responses its log showed: equal once every turn completed, the
    /// responses' when one was killed before its total, whatever order the two streams' lines
    /// were read in.
    pub fn usage(&self) -> Option<Usage> {
        if self.responses.total() == 0 {
            return self.usage;
        }
        let t = self.usage.unwrap_or_default();
        let r = self.responses;
        Some(Usage {
            input_tokens: t.input_tokens.max(r.input_tokens),
            output_tokens: t.output_tokens.max(r.output_tokens),
            cached_tokens: t.cached_tokens.max(r.cached_tokens),
        })
    }

    /// What it reported as a failure though it exited 0, as it wrote it (redact, then
    /// [`one_line`]): Claude Code's `result` marked `is_error`, codex's `error` or
    /// `turn.failed` not followed by a completed turn, an aider run in which no model reply
    /// completed; or a line too long to read.
    pub fn failure(&self) -> Option<String> {
        if self.overlong > 0 {
            return Some(format!(
                "{} line(s) of its output were longer than {} MiB, so what they reported (its spend, its errors) could not be read",
                self.overlong,
                process::LINE_MAX >> 20
            ));
        }
        match self.format {
            UsageFormat::ClaudeStream | UsageFormat::CodexJson => self.failed.clone(),
            UsageFormat::AiderSummary => (!self.replied).then(|| {
                let last = if self.last_line.is_empty() {
                    "nothing"
                } else {
                    &self.last_line
                };
                format!("no model reply completed (no `Tokens:` line); its last line: {last}")
            }),
        }
    }
}

impl process::Lines for Report {
    fn line(&mut self, from: process::Stream, line: &[u8]) {
        match from {
            process::Stream::Stdout => self.feed(&String::from_utf8_lossy(line)),
            process::Stream::Stderr => self.feed_log(&String::from_utf8_lossy(line)),
        }
    }
    /// Only stdout carries the report: a long stderr line (codex's log of a large tool call)
    /// hides nothing it could hold.
    fn overlong(&mut self, from: process::Stream) {
        if from == process::Stream::Stdout {
            self.overlong += 1;
        }
    }
}

fn json(line: &str) -> Option<Value> {
    let line = line.trim_start();
    if !line.starts_with('{') {
        return None;
    }
    serde_json::from_str(line).ok()
}

fn kind(v: &Value) -> Option<&str> {
    v.get("type").and_then(Value::as_str)
}

/// Anthropic's usage fields: input counts cache writes, cached is cache reads.
fn anthropic(u: &Value) -> Usage {
    Usage {
        input_tokens: count(u, "input_tokens") + count(u, "cache_creation_input_tokens"),
        output_tokens: count(u, "output_tokens"),
        cached_tokens: count(u, "cache_read_input_tokens"),
    }
}

fn count(v: &Value, key: &str) -> u64 {
    v.get(key).and_then(Value::as_u64).unwrap_or(0)
}

/// The first of `keys` (dotted paths) holding a string, else the whole value.
fn text(v: &Value, keys: &[&str]) -> String {
    let found = keys
        .iter()
        .find_map(|k| {
            let mut at = v;
            for part in k.split('.') {
                at = at.get(part)?;
            }
            at.as_str().map(String::from)
        })
        .unwrap_or_else(|| v.to_string());
    found
}

/// `s` on one line (each run of whitespace, newlines included, one space; other control
/// characters shown as `\u{…}`), at most [`FAILURE_CHARS`] characters: how a reported failure
/// is shown, once the values to redact are out of it (a key cut by the clip would not match).
pub fn one_line(s: &str) -> String {
    let one: String = s
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .flat_map(|c| {
            if c.is_control() {
                format!("\\u{{{:x}}}", c as u32).chars().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect();
    if one.chars().count() <= FAILURE_CHARS {
        return one;
    }
    let mut cut: String = one.chars().take(FAILURE_CHARS).collect();
    cut.push('…');
    cut
}

/// Aider's `Tokens: 2.3k sent, 1.1k cache hit, 120 received.` after `Tokens:`.
fn aider_tokens(rest: &str) -> Usage {
    let mut u = Usage::default();
    // Sentences end in ". ", figures hold decimal points: split on commas and on a point
    // followed by a space.
    let sentence = rest.split(". ").next().unwrap_or(rest);
    for part in sentence.split(',').map(|p| p.trim().trim_end_matches('.')) {
        let mut words = part.split_whitespace();
        let (Some(n), Some(what)) = (words.next(), words.next()) else {
            continue;
        };
        let Some(n) = aider_number(n) else { continue };
        match what {
            "sent" => u.input_tokens += n,
            "received" => u.output_tokens += n,
            "cache" if part.ends_with("hit") => u.cached_tokens += n,
            _ => {}
        }
    }
    // Aider's `sent` includes the cache hits.
    u.input_tokens = u.input_tokens.saturating_sub(u.cached_tokens);
    u
}

/// `120`, `2.3k`, `1.1M` as aider abbreviates them.
fn aider_number(text: &str) -> Option<u64> {
    let (digits, scale) = match text.chars().last()? {
        'k' => (&text[..text.len() - 1], 1_000.0),
        'M' => (&text[..text.len() - 1], 1_000_000.0),
        _ => (text, 1.0),
    };
    let n: f64 = digits.parse().ok()?;
    Some((n * scale).round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codex_s_error_followed_by_a_completed_turn_is_no_failure() {
        let retried = "{\"type\":\"error\",\"message\":\"Reconnecting... 1/5\"}\n{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":10,\"output_tokens\":2}}\n";
        let r = Report::of(UsageFormat::CodexJson, retried);
        assert_eq!(r.failure(), None);
        assert_eq!(r.usage().map(|u| u.output_tokens), Some(2));
        let failed = "{\"type\":\"turn.completed\"}\n{\"type\":\"turn.failed\",\"error\":{\"message\":\"stream\\ndisconnected\"}}\n";
        assert_eq!(
            Report::of(UsageFormat::CodexJson, failed)
                .failure()
                .map(|f| one_line(&f)),
            Some("stream disconnected".into()),
            "on one line"
        );
    }

    #[test]
    fn claude_code_killed_before_its_result_has_spent_what_its_stream_showed() {
        let start = |id: &str| {
            format!("{{\"type\":\"stream_event\",\"event\":{{\"type\":\"message_start\",\"message\":{{\"id\":\"{id}\",\"usage\":{{\"input_tokens\":100,\"cache_read_input_tokens\":20,\"output_tokens\":1}}}}}}}}\n")
        };
        let delta = "{\"type\":\"stream_event\",\"event\":{\"type\":\"message_delta\",\"usage\":{\"output_tokens\":7}}}\n";
        let assistant = "{\"type\":\"assistant\",\"message\":{\"id\":\"m1\",\"usage\":{\"input_tokens\":999,\"output_tokens\":999}}}\n";
        let stream = format!("{}{delta}{assistant}{}", start("m1"), start("m2"));
        let u = Report::of(UsageFormat::ClaudeStream, &stream).usage();
        assert_eq!(
            u.map(|u| (u.input_tokens, u.output_tokens, u.cached_tokens)),
            Some((200, 8, 40)),
            "each message once, its output as far as it got"
        );
        let result = "{\"type\":\"result\",\"usage\":{\"input_tokens\":5,\"output_tokens\":6}}\n";
        let u = Report::of(
            UsageFormat::ClaudeStream,
            &format!("{stream}{result}{}", start("m3")),
        )
        .usage();
        assert_eq!(
            u.map(|u| (u.input_tokens, u.output_tokens)),
            Some((5, 6)),
            "the result's total"
        );
    }

    #[test]
    fn codex_s_logged_responses_count_until_their_turn_s_total_arrives() {
        let sse = "2026-12-03T09:37:39Z TRACE codex_api::sse::responses: SSE event: {\"type\": \"response.completed\", \"response\": {\"usage\": {\"input_tokens\": 30, \"input_tokens_details\": {\"cached_tokens\": 10}, \"output_tokens\": 5}}}\n";
        let turn = "{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":60,\"cached_input_tokens\":20,\"output_tokens\":10}}\n";
        // (stdout lines, stderr lines), each stream in its order, read in either order.
        let triple = |out: &str, log: &str, log_first: bool| {
            let mut r = Report::new(UsageFormat::CodexJson);
            let feed_out = |r: &mut Report| out.lines().for_each(|l| r.feed(l));
            let feed_log = |r: &mut Report| log.lines().for_each(|l| r.feed_log(l));
            if log_first {
                feed_log(&mut r);
                feed_out(&mut r);
            } else {
                feed_out(&mut r);
                feed_log(&mut r);
            }
            r.usage()
                .map(|u| (u.input_tokens, u.output_tokens, u.cached_tokens))
        };
        assert_eq!(
            triple("", sse, true),
            Some((20, 5, 10)),
            "a turn killed before its total"
        );
        for log_first in [true, false] {
            assert_eq!(
                triple(turn, &format!("{sse}{sse}"), log_first),
                Some((40, 10, 20)),
                "the total, not the total and its responses"
            );
        }
        assert_eq!(
            triple(turn, &format!("{sse}{sse}{sse}"), false),
            Some((60, 15, 30)),
            "a response of a later turn killed before its total"
        );
        // The marker on stdout is no log line: it is not counted.
        assert_eq!(triple(sse, "", true), None);
        let huge = "Tokens: 18446744073709551615 sent, 18446744073709551615 received.\nTokens: 5 sent, 5 received.\n";
        let u = Report::of(UsageFormat::AiderSummary, huge)
            .usage()
            .expect("usage");
        assert_eq!(
            u.total(),
            u64::MAX,
            "a sum that would wrap stays at its ceiling"
        );
    }

    #[test]
    fn a_line_too_long_to_read_is_a_failure_and_a_failure_text_is_one_clipped_line() {
        let mut r = Report::new(UsageFormat::ClaudeStream);
        process::Lines::overlong(&mut r, process::Stream::Stderr);
        assert_eq!(r.failure(), None, "a long stderr line holds no report");
        process::Lines::overlong(&mut r, process::Stream::Stdout);
        assert!(r.failure().expect("failure").contains("could not be read"));
        let long = format!("a\nb\u{1b}[2J{}", "x".repeat(1000));
        let c = one_line(&long);
        assert!(c.starts_with("a b\\u{1b}[2Jx"), "{c}");
        assert_eq!(c.chars().count(), FAILURE_CHARS + 1);
    }
}
