//! Aider through the `aider` preset, contained, against our OpenAI chat completions fake, in
//! the two edit formats it picks: `whole` for a model it does not know, `diff` for one it does.

use std::time::Duration;

use atelier::agent::clients::Usage;

use super::{assert_not_restarted, assert_ran, run, swarm, Spend, CONTENT, FILE, SLOW};
use crate::support::clis::require_cli;
use crate::support::model::{chat, Script, Server};
use crate::support::skip::require_landlock;
use crate::support::swarm::Swarm;

const KEY_VAR: &str = "OPENAI_API_KEY";
const KEY: &str = "sk-proj-fake-0123456789abcdef";

/// The writer role on the aider preset with `model`.
fn aider_swarm(fake: &Server, model: &str, conductor: &str) -> Swarm {
    let base = format!("{}/v1", fake.origin);
    let s = swarm("aider", &base, fake, KEY_VAR, conductor);
    let config = s.env.read("atelier.toml").replace(
        "[roles.writer]\n",
        &format!("[roles.writer]\nmodel = \"{model}\"\n"),
    );
    s.env.write("atelier.toml", &config);
    s.env.git(&["commit", "-q", "-am", "The writer's model"]);
    s
}

/// Aider streams, and then counts tokens itself rather than reading the endpoint's usage;
/// what it prints is `Tokens: N sent[, N cache hit], N received.`, thousands as `1.2k`.
fn aider_tokens(u: &Usage) -> String {
    fn f(n: u64) -> String {
        if n < 1000 {
            n.to_string()
        } else if n < 10_000 {
            format!("{:.1}k", n as f64 / 1000.0)
        } else {
            format!("{}k", (n as f64 / 1000.0).round())
        }
    }
    let cached = if u.cached_tokens > 0 {
        format!(", {} cache hit", f(u.cached_tokens))
    } else {
        String::new()
    };
    format!(
        "Tokens: {} sent{cached}, {} received.",
        f(u.input_tokens),
        f(u.output_tokens)
    )
}

#[test]
fn aider_writes_the_task_file_whole_for_a_model_it_does_not_know() {
    require_landlock!();
    let bin = require_cli!("aider");
    let fake = chat::start(Script::writes(FILE, CONTENT));
    let s = aider_swarm(&fake, "openai/fake-model", "");
    let out = run(&s, &bin, KEY_VAR, KEY);
    assert_ran(
        &s,
        &out,
        "aider",
        &fake,
        "authorization",
        KEY,
        Spend::Printed(aider_tokens),
    );
    let asked: Vec<_> = fake
        .requests()
        .iter()
        .map(|r| chat::format_asked(&r.json()))
        .collect();
    assert_eq!(asked, [chat::Format::Whole]);
}

#[test]
fn aider_writes_the_task_file_as_a_search_replace_block_for_a_model_it_knows() {
    require_landlock!();
    let bin = require_cli!("aider");
    let fake = chat::start(Script::writes(FILE, CONTENT));
    let s = aider_swarm(&fake, "openai/gpt-4o", "");
    let out = run(&s, &bin, KEY_VAR, KEY);
    assert_ran(
        &s,
        &out,
        "aider",
        &fake,
        "authorization",
        KEY,
        Spend::Printed(aider_tokens),
    );
    let asked: Vec<_> = fake
        .requests()
        .iter()
        .map(|r| chat::format_asked(&r.json()))
        .collect();
    assert_eq!(asked, [chat::Format::Diff]);
}

/// Aider prints the reply as it streams: a 15-second answer outlives `restart_after`.
#[test]
fn aider_answering_slowly_is_not_restarted_for_silence() {
    require_landlock!();
    let bin = require_cli!("aider");
    let fake = chat::start(Script::writes(FILE, CONTENT).thinking(Duration::from_secs(15)));
    let s = aider_swarm(&fake, "openai/fake-model", SLOW);
    let out = run(&s, &bin, KEY_VAR, KEY);
    assert_ran(
        &s,
        &out,
        "aider",
        &fake,
        "authorization",
        KEY,
        Spend::Printed(aider_tokens),
    );
    assert_not_restarted(&s);
}
