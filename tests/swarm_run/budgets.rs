//! `[budget]`: a run that reaches a ceiling the operator chose stops there and says which one.
//! (Token budgets with a model endpoint's usage: swarm_run/http.rs; with the agent CLIs:
//! agent_clis/.)

use crate::support::swarm::{plan, task, Swarm};

/// `[budget.run] wall`: the run's own ceiling ends the attempt that is running (a worker that
/// would sleep for a minute), and the task after it never starts.
#[test]
fn the_runs_wall_time_budget_ends_the_running_attempt() {
    let s = Swarm::configured("failure_budget = 1", "\n[budget.run]\nwall = \"2s\"\n");
    s.scenario("p:A", "sleep 60; echo a > a.txt");
    let p = s.plan(
        "p.toml",
        &plan(
            "p",
            &[
                task("A", &["a.txt"], &[], "test -f a.txt"),
                task("B", &["b.txt"], &["A"], "test -f b.txt"),
            ],
        ),
    );
    let started = std::time::Instant::now();
    let v = s.run(&["run", &p, "--json"]).json();
    assert!(
        started.elapsed() < std::time::Duration::from_secs(50),
        "the sleeping worker was ended, not waited for"
    );
    let why = v["failed"]["p:A"].as_str().expect("A failed");
    assert!(
        why.starts_with("failed 1 attempt(s); last: ended: the run's wall budget (2s) is spent: ")
            && why.ends_with("s used; raise [budget] in atelier.toml to go on"),
        "{why}"
    );
    let events =
        std::fs::read_to_string(s.env.repo.join(".atelier/runs/r1/events.jsonl")).expect("events");
    assert!(
        events.contains(
            "\"kind\":\"budget-reached\",\"scope\":\"run\",\"measure\":\"wall\",\"limit\":\"2s\""
        ),
        "{events}"
    );
    // B depends on A, which failed: blocked, never started.
    assert!(
        !events.contains("\"task\":\"p:B\",\"attempt\":1"),
        "{events}"
    );
}

/// A `cost` ceiling needs a price for each role's model: without one the run is refused before
/// it starts, naming the table to add.
#[test]
fn a_cost_budget_without_prices_is_refused_naming_the_missing_price() {
    let s = Swarm::configured("", "\n[budget.run]\ncost = 5.0\n");
    let p = crate::support::swarm::one(&s, "echo ok > src/t.rs");
    let run = s.run(&["run", &p]).code(2);
    assert!(
        run.stderr
            .contains("[budget] sets a cost, but [roles.implementer] names no `model` to price"),
        "{}",
        run.stderr
    );
}

/// `[budget.roles.NAME]`: once the role's ceiling is reached (here its attempts' time, when the
/// first of them ends), its other attempt still running is ended, and fails naming the budget.
#[test]
fn a_roles_budget_ends_its_other_running_attempt() {
    let s = Swarm::configured(
        "failure_budget = 1",
        "\n[budget.roles.implementer]\nwall = \"2s\"\n",
    );
    s.scenario("p:A", "sleep 3; echo a > a.txt");
    s.scenario("p:B", "sleep 60; echo b > b.txt");
    let p = s.plan(
        "p.toml",
        &plan(
            "p",
            &[
                task("A", &["a.txt"], &[], "test -f a.txt"),
                task("B", &["b.txt"], &[], "test -f b.txt"),
            ],
        ),
    );
    let started = std::time::Instant::now();
    let v = s.run(&["run", &p, "--json"]).json();
    assert!(
        started.elapsed() < std::time::Duration::from_secs(50),
        "the sleeping worker was ended, not waited for"
    );
    assert_eq!(v["succeeded"], serde_json::json!(["p:A"]), "{v:#}");
    let why = v["failed"]["p:B"].as_str().expect("B failed");
    assert!(
        why.starts_with(
            "failed 1 attempt(s); last: ended: role implementer's wall budget (2s) is spent: "
        ),
        "{why}"
    );
    let events =
        std::fs::read_to_string(s.env.repo.join(".atelier/runs/r1/events.jsonl")).expect("events");
    assert!(
        events.contains(
            "\"kind\":\"budget-reached\",\"scope\":\"role implementer\",\"measure\":\"wall\""
        ),
        "{events}"
    );
}

/// An `http` worker's request is ended too: once its role's tokens are spent (the first task's
/// reply reports 1,490), the other task's request, which would take half a minute, is
/// abandoned and the task fails naming the budget.
#[test]
fn a_roles_budget_abandons_its_other_http_request() {
    use crate::support::model::{Reply, Server};
    let server = Server::start(|req, _| {
        let reply = serde_json::json!({
            "id": "chatcmpl-1", "object": "chat.completion", "model": "m",
            "choices": [{ "index": 0, "finish_reason": "stop", "message": { "role": "assistant", "content": "hello\n" } }],
            "usage": { "prompt_tokens": 1434, "completion_tokens": 56, "total_tokens": 1490, "prompt_tokens_details": { "cached_tokens": 200 } }
        });
        if req.body.contains("# Task p:B: Task B") {
            Reply::JsonAfter(std::time::Duration::from_secs(30), 200, reply)
        } else {
            Reply::Json(200, reply)
        }
    });
    let s = Swarm::configured(
        "failure_budget = 1",
        &format!(
            "\n[roles.writer]\nbackend = \"http\"\nbase_url = \"{}/v1\"\nmodel = \"m\"\n\n[budget.roles.writer]\ntokens = 1000\n",
            server.origin
        ),
    );
    let t = |id: &str| {
        task(
            id,
            &[&format!("docs/{id}.md")],
            &[],
            &format!("test -s docs/{id}.md"),
        )
        .replace("implementer", "writer")
    };
    let p = s.plan("p.toml", &plan("p", &[t("A"), t("B")]));
    let started = std::time::Instant::now();
    let v = s.run(&["run", &p, "--json"]).json();
    assert!(
        started.elapsed() < std::time::Duration::from_secs(25),
        "the slow request was abandoned, not waited for"
    );
    assert_eq!(v["succeeded"], serde_json::json!(["p:A"]), "{v:#}");
    let why = v["failed"]["p:B"].as_str().expect("B failed");
    assert!(
        why.starts_with(
            "failed 1 attempt(s); last: ended: role writer's tokens budget (1000) is spent: 1490 used"
        ),
        "{why}"
    );
}
