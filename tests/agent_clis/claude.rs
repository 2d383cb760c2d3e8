//! Claude Code through the `claude` preset, contained, against our Anthropic Messages fake.

use std::time::Duration;

use atelier::swarm::events::RunEvent;

use super::{
    assert_not_restarted, assert_ran, killed_attempt_s_spend, run, swarm, Spend, CONTENT, FILE,
    KILLED, SLOW,
};
use crate::support::clis::require_cli;
use crate::support::model::{anthropic, Script};
use crate::support::skip::require_landlock;

const KEY_VAR: &str = "ANTHROPIC_API_KEY";
const KEY: &str = "sk-ant-fake-0123456789abcdef";

#[test]
fn claude_code_writes_the_task_file_and_its_spend_is_recorded() {
    require_landlock!();
    let bin = require_cli!("claude");
    let fake = anthropic::start(Script::writes(FILE, CONTENT));
    let s = swarm("claude", &fake.origin, &fake, KEY_VAR, "");
    let out = run(&s, &bin, KEY_VAR, KEY);
    assert_ran(&s, &out, "claude", &fake, "x-api-key", KEY, Spend::Reported);
}

/// Its streamed JSON reaches the conductor while the model is still answering: a 15-second
/// answer outlives `restart_after` and is not killed as silent.
#[test]
fn claude_code_answering_slowly_is_not_restarted_for_silence() {
    require_landlock!();
    let bin = require_cli!("claude");
    let fake = anthropic::start(Script::writes(FILE, CONTENT).thinking(Duration::from_secs(15)));
    let s = swarm("claude", &fake.origin, &fake, KEY_VAR, SLOW);
    let out = run(&s, &bin, KEY_VAR, KEY);
    assert_ran(&s, &out, "claude", &fake, "x-api-key", KEY, Spend::Reported);
    assert_not_restarted(&s);
}

/// Its stream outgrows a small `max_output`: the final `result` line, with the spend and the
/// answer, is in the part of the output that is kept.
#[test]
fn claude_code_s_spend_is_counted_when_its_output_outgrows_max_output() {
    require_landlock!();
    let bin = require_cli!("claude");
    let fake = anthropic::start(Script::writes(FILE, CONTENT));
    let s = swarm(
        "claude",
        &fake.origin,
        &fake,
        KEY_VAR,
        "\n[swarm]\nmax_output = 4096",
    );
    let out = run(&s, &bin, KEY_VAR, KEY);
    assert_ran(&s, &out, "claude", &fake, "x-api-key", KEY, Spend::Reported);
    let truncated = s.events("r1").into_iter().any(|e| {
        matches!(e, RunEvent::WorkerExited { truncated: true, output_bytes, .. } if output_bytes > 4096)
    });
    assert!(truncated, "the output outgrew max_output");
}

/// Killed at the attempt timeout while the model is still answering, Claude Code never prints
/// its `result`; what its stream showed of each model message is its spend, so the run's
/// token ceiling stops the next attempt.
#[test]
fn claude_code_killed_mid_answer_has_its_spend_counted_against_the_budget() {
    require_landlock!();
    let bin = require_cli!("claude");
    let fake = anthropic::start(Script::writes(FILE, CONTENT).thinking(Duration::from_secs(30)));
    let s = swarm("claude", &fake.origin, &fake, KEY_VAR, KILLED);
    let out = run(&s, &bin, KEY_VAR, KEY);
    let usage = killed_attempt_s_spend(&s, &out);
    assert!(
        usage.input_tokens >= crate::support::model::USAGE.input
            && usage.cached_tokens >= crate::support::model::USAGE.cached,
        "{usage:?}"
    );
}
