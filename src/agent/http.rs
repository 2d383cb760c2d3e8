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
    let body = json!({ "model": model, "messages": [{ "role": "user", "content": prompt }] });
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
    value["choices"][0]["message"]["content"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("POST {url}: the reply has no choices[0].message.content"))
}
