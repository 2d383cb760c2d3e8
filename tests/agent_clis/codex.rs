//! Codex through the `codex` preset, contained, against our OpenAI Responses fake: the role's
//! `base_url` becomes a model provider of its own, its key read from the role's variable.

use std::time::Duration;

use super::{
    assert_not_restarted, assert_ran, killed_attempt_s_spend, run, swarm, Spend, CONTENT, FILE,
    KILLED, SLOW,
};
use crate::support::clis::require_cli;
use crate::support::model::{responses, Script};
use crate::support::skip::require_landlock;

const KEY_VAR: &str = "OPENAI_API_KEY";
const KEY: &str = "sk-proj-fake-0123456789abcdef";

#[test]
fn codex_writes_the_task_file_and_its_spend_is_recorded() {
    require_landlock!();
    let bin = require_cli!("codex");
    let fake = responses::start(Script::writes(FILE, CONTENT));
    let base = format!("{}/v1", fake.origin);
    let s = swarm("codex", &base, &fake, KEY_VAR, "");
    let out = run(&s, &bin, KEY_VAR, KEY);
    assert_ran(
        &s,
        &out,
        "codex",
        &fake,
        "authorization",
        KEY,
        Spend::Reported,
    );
}

/// `codex exec --json` prints nothing while the model streams; the preset's log of each
/// server-sent event reaches the conductor, so a 15-second answer outlives `restart_after`.
#[test]
fn codex_answering_slowly_is_not_restarted_for_silence() {
    require_landlock!();
    let bin = require_cli!("codex");
    let fake = responses::start(Script::writes(FILE, CONTENT).thinking(Duration::from_secs(15)));
    let base = format!("{}/v1", fake.origin);
    let s = swarm("codex", &base, &fake, KEY_VAR, SLOW);
    let out = run(&s, &bin, KEY_VAR, KEY);
    assert_ran(
        &s,
        &out,
        "codex",
        &fake,
        "authorization",
        KEY,
        Spend::Reported,
    );
    assert_not_restarted(&s);
}

/// Killed at the attempt timeout in the middle of a turn, codex never prints `turn.completed`;
/// its log of each response the endpoint completed is its spend, so the run's token ceiling
/// stops the next attempt.
#[test]
fn codex_killed_mid_turn_has_its_spend_counted_against_the_budget() {
    require_landlock!();
    let bin = require_cli!("codex");
    let fake = responses::start(Script::writes(FILE, CONTENT).thinking(Duration::from_secs(30)));
    let base = format!("{}/v1", fake.origin);
    let s = swarm("codex", &base, &fake, KEY_VAR, KILLED);
    let out = run(&s, &bin, KEY_VAR, KEY);
    let usage = killed_attempt_s_spend(&s, &out);
    let u = crate::support::model::USAGE;
    assert_eq!(
        (usage.input_tokens, usage.output_tokens, usage.cached_tokens),
        (u.input, u.output, u.cached),
        "the one response that completed"
    );
}
