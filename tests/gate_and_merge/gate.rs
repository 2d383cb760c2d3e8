//! The gate explains itself: without tokens it refuses naming what is missing; a malformed policy
//! at base fails closed.

use crate::support::{unmet, Env};

#[test]
fn the_gate_refuses_without_tokens_and_names_what_is_missing() {
    let env = Env::new();
    let id = env.propose_code();
    let (code, v) = env.gate(&id);
    assert_eq!(code, 1);
    assert_eq!(unmet(&v), ["E_QUORUM_NOT_MET"]);
    let human = env.atelier(&["gate", &id]).code(1);
    assert!(
        human.stdout.contains("expected: 1 distinct approval(s)"),
        "{}",
        human.stdout
    );
    assert!(human.stdout.contains("gate: REFUSED"), "{}", human.stdout);
}

#[test]
fn a_malformed_policy_at_base_fails_closed() {
    let env = Env::with(crate::support::Setup {
        governance: "version = 1\n[constitution]\npaths = [\"policies/**\"]\nquorum = \"two\"\n"
            .into(),
        ..Default::default()
    });
    let id = env.propose_code();
    env.approve(&id, "alice").ok();
    env.approve(&id, "bob").ok();
    let (code, v) = env.gate(&id);
    assert_eq!(code, 1);
    assert_eq!(unmet(&v), ["E_POLICY_INVALID"]);
    let merge = env.atelier(&["merge", &id]).code(1);
    assert!(
        merge.stdout.contains("policies/governance.toml"),
        "{}",
        merge.stdout
    );
}
