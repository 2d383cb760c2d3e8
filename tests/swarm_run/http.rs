//! HTTP roles: a model's reply written to the claimed file, failures explained, and no forge
//! token sent to a model endpoint.

use crate::support::swarm::{plan, task, Swarm};

/// A real HTTP server on loopback that answers chat-completions requests like an
/// OpenAI-compatible endpoint (or fails on purpose), recording what it received.
struct FakeLlm {
    url: String,
    seen: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl FakeLlm {
    fn start(status: u16, content: &'static str, requests: usize) -> FakeLlm {
        use std::io::{BufRead, BufReader, Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}/v1", listener.local_addr().expect("addr"));
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().take(requests) {
                let Ok(mut stream) = stream else { return };
                let mut reader = BufReader::new(stream.try_clone().expect("clone"));
                let mut head = String::new();
                let mut length = 0;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap_or(0);
                    }
                    head.push_str(&line);
                }
                let mut body = vec![0; length];
                reader.read_exact(&mut body).expect("body");
                log.lock()
                    .expect("log")
                    .push(format!("{head}\n{}", String::from_utf8_lossy(&body)));
                let reply = serde_json::json!({
                    "id": "chatcmpl-1", "object": "chat.completion", "model": "m",
                    "choices": [{ "index": 0, "finish_reason": "stop", "message": { "role": "assistant", "content": content } }],
                    "usage": { "prompt_tokens": 1234, "completion_tokens": 56, "total_tokens": 1290, "prompt_tokens_details": { "cached_tokens": 200 } }
                })
                .to_string();
                let reason = if status == 200 {
                    "OK"
                } else {
                    "Internal Server Error"
                };
                let _ = write!(stream, "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{reply}", reply.len());
            }
        });
        FakeLlm { url, seen }
    }
}

fn http_swarm(url: &str) -> Swarm {
    let s = Swarm::new("failure_budget = 1");
    let config = s.env.read("atelier.toml");
    s.env.write(
        "atelier.toml",
        &format!("{config}\n[roles.writer]\nbackend = \"http\"\nbase_url = \"{url}\"\nmodel = \"m\"\napi_key_env = \"FAKE_LLM_KEY\"\n"),
    );
    s.env.git(&["commit", "-q", "-am", "Add a writer role"]);
    s
}

fn writer_plan(s: &Swarm) -> String {
    let t = task(
        "W",
        &["docs/summary.md"],
        &[],
        "grep -q 'hello from the model' docs/summary.md",
    )
    .replace("implementer", "writer");
    s.plan("w.toml", &plan("w", &[t]))
}

#[test]
fn an_http_role_writes_the_models_reply_to_its_claimed_file() {
    let llm = FakeLlm::start(200, "hello from the model\n", 1);
    let s = http_swarm(&llm.url);
    let p = writer_plan(&s);
    let run = s
        .command(&["run", &p])
        .env("FAKE_LLM_KEY", "sk-sekrit")
        .output()
        .expect("run");
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(
        s.env.git(&["show", "atelier/runs/r1:docs/summary.md"]),
        "hello from the model\n"
    );
    let seen = llm.seen.lock().expect("log").clone();
    assert_eq!(seen.len(), 1);
    assert!(
        seen[0].starts_with("POST /v1/chat/completions"),
        "{}",
        seen[0]
    );
    assert!(
        seen[0]
            .to_ascii_lowercase()
            .contains("authorization: bearer sk-sekrit"),
        "{}",
        seen[0]
    );
    let body: serde_json::Value =
        serde_json::from_str(seen[0].split("\n\n").nth(1).expect("a body")).expect("json body");
    assert_eq!(body["model"], "m");
    // The model is told its reply is the file, then given the task.
    assert_eq!(body["messages"][0]["role"], "system", "{body:#}");
    let system = body["messages"][0]["content"].as_str().expect("system");
    assert!(
        system.contains("`docs/summary.md`") && system.contains("no code fences"),
        "{system}"
    );
    assert!(
        body["messages"][1]["content"]
            .as_str()
            .expect("prompt")
            .contains("Do W"),
        "{body:#}"
    );
    let events =
        std::fs::read_to_string(s.env.repo.join(".atelier/runs/r1/events.jsonl")).expect("events");
    assert!(!events.contains("sk-sekrit"), "the key is never recorded");
    // What the endpoint said it spent is recorded for the attempt.
    let spent: Vec<serde_json::Value> = events
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["kind"] == "spent")
        .collect();
    assert_eq!(spent.len(), 1, "{events}");
    assert_eq!(spent[0]["client"], "http");
    assert_eq!(spent[0]["input_tokens"], 1034);
    assert_eq!(spent[0]["cached_tokens"], 200);
    assert_eq!(spent[0]["output_tokens"], 56);
}

#[test]
fn a_fenced_reply_with_words_around_it_writes_only_the_fences_contents() {
    let llm = FakeLlm::start(
        200,
        "Sure! Here is the file:\n```markdown\nhello from the model\n```\nLet me know.",
        1,
    );
    let s = http_swarm(&llm.url);
    let p = writer_plan(&s);
    let run = s
        .command(&["run", &p])
        .env("FAKE_LLM_KEY", "sk-sekrit")
        .output()
        .expect("run");
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(
        s.env.git(&["show", "atelier/runs/r1:docs/summary.md"]),
        "hello from the model\n"
    );
}

#[test]
fn http_failures_and_a_missing_key_fail_the_attempt_clearly() {
    let llm = FakeLlm::start(500, "unused", 1);
    let s = http_swarm(&llm.url);
    let p = writer_plan(&s);
    let out = s
        .command(&["run", &p, "--json"])
        .env("FAKE_LLM_KEY", "sk-sekrit")
        .output()
        .expect("run");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let why = v["failed"]["w:W"].as_str().expect("reason");
    assert!(
        why.contains("HTTP 500") && !why.contains("sk-sekrit"),
        "{why}"
    );
    let v = s.run(&["run", &p, "--json"]).code(1).json();
    assert!(
        v["failed"]["w:W"]
            .as_str()
            .expect("reason")
            .contains("FAKE_LLM_KEY is not set"),
        "{v:#}"
    );
}

#[test]
fn an_http_role_cannot_send_the_forge_token_to_a_model_endpoint() {
    let llm = FakeLlm::start(200, "unused\n", 1);
    let s = Swarm::new("failure_budget = 1");
    let config = s.env.read("atelier.toml");
    s.env.write(
        "atelier.toml",
        &format!("{config}\n[roles.writer]\nbackend = \"http\"\nbase_url = \"{}\"\nmodel = \"m\"\napi_key_env = \"GITHUB_TOKEN\"\n", llm.url),
    );
    s.env.git(&["commit", "-q", "-am", "Add a writer role"]);
    let p = writer_plan(&s);
    let out = s
        .command(&["run", &p, "--json"])
        .env("GITHUB_TOKEN", "ghp_secret_forge_token")
        .output()
        .expect("run");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let why = v["failed"]["w:W"].as_str().expect("reason");
    assert!(why.contains("never gives to agents"), "{why}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("ghp_secret_forge_token"));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("ghp_secret_forge_token"));
}

/// `[budget.run] tokens`: the endpoint reports 1,290 tokens for the first task, over the
/// run's 1,000: the second task never starts, and the run says which budget ended it. What was
/// spent is shown against each ceiling in `status` and the dashboard, and in `stats` and the
/// cockpit.
#[test]
fn no_attempt_starts_once_the_runs_token_budget_is_spent() {
    let llm = FakeLlm::start(200, "hello from the model\n", 2);
    let s = http_swarm(&llm.url);
    let config = s.env.read("atelier.toml");
    s.env.write(
        "atelier.toml",
        &format!("{config}\n[budget.run]\ntokens = 1000\n\n[budget.roles.writer]\ntokens = 5000\n"),
    );
    s.env.git(&["commit", "-q", "-am", "A token budget"]);
    let t = |id: &str, deps: &[&str]| {
        task(
            id,
            &[&format!("docs/{id}.md")],
            deps,
            &format!("test -s docs/{id}.md"),
        )
        .replace("implementer", "writer")
    };
    let p = s.plan("w.toml", &plan("w", &[t("A", &[]), t("B", &["A"])]));
    let out = s
        .command(&["run", &p, "--json"])
        .env("FAKE_LLM_KEY", "sk-sekrit")
        .output()
        .expect("run");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["succeeded"], serde_json::json!(["w:A"]), "{v:#}");
    let why = v["failed"]["w:B"].as_str().expect("B failed");
    assert_eq!(
        why,
        "not started: the run's tokens budget (1000) is spent: 1290 used; raise [budget] in atelier.toml to go on"
    );
    assert_eq!(llm.seen.lock().expect("log").len(), 1, "one request only");
    let status = s.run(&["status", "r1"]);
    assert!(
        status
            .stdout
            .contains("spent: w:A: 1290 tokens (input 1034, output 56, cached 200)\nbudget: run tokens: 1290 of 1000 (reached)\nbudget: role writer tokens: 1290 of 5000\n"),
        "{}",
        status.stdout
    );
    // The dashboard's run page: the task's tokens, and each ceiling beside what was used.
    let ui = crate::output::dashboard::serve(&s.env);
    let (_, page) = crate::output::dashboard::raw(
        &ui.base,
        &format!(
            "GET /runs/r1 HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            ui.base.trim_start_matches("http://")
        ),
    );
    assert!(
        page.contains("<td class=\"spent\">1290</td>")
            && page.contains(
                "<tr><td>run</td><td>tokens</td><td>1290</td><td>1000 (reached)</td></tr>"
            )
            && page
                .contains("<tr><td>role writer</td><td>tokens</td><td>1290</td><td>5000</td></tr>"),
        "{page}"
    );
    drop(ui);
    // The cockpit: the task's tokens and the run's.
    let mut cockpit = crate::support::swarm::cockpit(&s, 200);
    let mut keys = cockpit.stdin.take().expect("stdin");
    std::thread::sleep(std::time::Duration::from_millis(1500));
    std::io::Write::write_all(&mut keys, b"q").expect("q");
    drop(keys);
    let screen = cockpit
        .wait_with_output()
        .expect("the cockpit quits")
        .stdout;
    let words = crate::support::swarm::screen_words(&screen);
    assert!(
        words.contains("RESTARTS TOKENS CLAIMS")
            && words.contains("w:A succeeded writer 1 1 0s - 0 0 1290")
            && words.contains("spent 1290 tokens"),
        "{words}"
    );
    // `stats` too: the run's spend and its role's.
    let stats = s.run(&["stats"]).stdout;
    let spent = "spent 1290 tokens (input 1034, output 56, cached 200)";
    assert!(
        stats.contains(&format!("at most 1 at once, {spent};"))
            && stats.contains(&format!("\n  {spent}\n")),
        "{stats}"
    );
    let events =
        std::fs::read_to_string(s.env.repo.join(".atelier/runs/r1/events.jsonl")).expect("events");
    assert!(
        events.contains("\"kind\":\"budget-reached\",\"scope\":\"run\",\"measure\":\"tokens\",\"limit\":\"1000\",\"used\":\"1290\""),
        "{events}"
    );
}
