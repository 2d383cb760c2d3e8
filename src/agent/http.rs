//! The `http` backend: one request to an OpenAI-compatible chat-completions endpoint
//! (`POST {base_url}/chat/completions`) with the worker's prompt as the user message. The API
//! key is read by the conductor from the variable the role names and is never written anywhere:
//! not to events, prompts, errors or any child process.

use std::time::Duration;

use serde_json::{json, Value};

/// Asks the endpoint and returns the reply's text, or why not (never containing the key).
pub fn chat(
    base_url: &str,
    model: &str,
    key: Option<&str>,
    prompt: &str,
    timeout: Duration,
) -> Result<String, String> {
    ask(base_url, model, key, None, prompt, timeout).map(|r| r.text)
}

/// A reply: its text and the tokens the endpoint says it spent (`usage`), when it says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub text: String,
    pub usage: Option<super::clients::Usage>,
}

/// Asks the endpoint with an optional system message before the prompt.
pub fn ask(
    base_url: &str,
    model: &str,
    key: Option<&str>,
    system: Option<&str>,
    prompt: &str,
    timeout: Duration,
) -> Result<Reply, String> {
    let url = format!("{}/chat/completions", base_url.trim_end_matches('/'));
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .http_status_as_error(false)
        .build()
        .into();
    let mut request = agent.post(&url).header("Content-Type", "application/json");
    if let Some(k) = key {
        request = request.header("Authorization", &format!("Bearer {k}"));
    }
    let mut messages = Vec::new();
    if let Some(system) = system {
        messages.push(json!({ "role": "system", "content": system }));
    }
    messages.push(json!({ "role": "user", "content": prompt }));
    let body = json!({ "model": model, "messages": messages });
    let mut response = request
        .send_json(&body)
        .map_err(|e| format!("POST {url}: {e}"))?;
    let status = response.status().as_u16();
    let text = response
        .body_mut()
        .read_to_string()
        .map_err(|e| format!("POST {url}: reading the reply: {e}"))?;
    if status != 200 {
        let excerpt: String = text.chars().take(300).collect();
        return Err(format!("POST {url}: HTTP {status}: {excerpt}"));
    }
    let value: Value = serde_json::from_str(&text)
        .map_err(|e| format!("POST {url}: the reply is not JSON ({e})"))?;
    let text = value["choices"][0]["message"]["content"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("POST {url}: the reply has no choices[0].message.content"))?;
    let usage = value.get("usage").filter(|u| u.is_object()).map(|u| {
        let n = |v: &Value| v.as_u64().unwrap_or(0);
        let cached = n(&u["prompt_tokens_details"]["cached_tokens"]);
        super::clients::Usage {
            input_tokens: n(&u["prompt_tokens"]).saturating_sub(cached),
            output_tokens: n(&u["completion_tokens"]),
            cached_tokens: cached,
        }
    });
    Ok(Reply { text, usage })
}

/// What an http worker asks for besides its task: the file's contents, nothing else.
pub fn file_instructions(path: &str) -> String {
    format!(
        "You are writing one file, `{path}`. Your reply is written to it verbatim: reply with the file's complete new contents and nothing else, with no explanation before or after and no code fences. You cannot run commands or edit other files; the task below says what the file must hold."
    )
}

/// A reply as a file's contents: the inside of its one fenced block when it holds exactly one
/// (a model that wraps the file in a fence, with or without words around it), else the reply.
pub fn file_contents(reply: &str) -> String {
    let fences: Vec<usize> = reply
        .lines()
        .enumerate()
        .filter(|(_, l)| l.trim_start().starts_with("```"))
        .map(|(i, _)| i)
        .collect();
    match fences.as_slice() {
        [open, close] => {
            let lines: Vec<&str> = reply.lines().collect();
            let mut inner = lines[open + 1..*close].join("\n");
            inner.push('\n');
            inner
        }
        _ => reply.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_fenced_block_is_the_file_and_anything_else_is_kept_whole() {
        for (reply, want) in [
            ("```md\n# Title\nbody\n```\n", "# Title\nbody\n"),
            ("Here it is:\n```\nx = 1\n```\nDone.", "x = 1\n"),
            ("plain text\n", "plain text\n"),
            (
                "```a\n1\n```\n```b\n2\n```\n",
                "```a\n1\n```\n```b\n2\n```\n",
            ),
            ("```\nunclosed\n", "```\nunclosed\n"),
        ] {
            assert_eq!(file_contents(reply), want, "{reply:?}");
        }
    }
}
