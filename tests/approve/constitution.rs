//! A change to the constitution (the policy itself, code the policy names) needs the constitution
//! quorum, and cannot lower or meet the quorum it installs by its own changes.

use crate::support::{token_codes, unmet, Env, Setup};

fn governance(env: &Env) -> String {
    env.read("policies/governance.toml")
}

#[test]
fn a_constitution_change_needs_two_approvals() {
    let env = Env::new();
    let id = env.propose(
        &[("GOVERNANCE.md", "# Governance\n\nStricter.\n")],
        "Tighten the rules",
    );
    env.approve(&id, "alice").ok();
    let (code, v) = env.gate(&id);
    assert_eq!(code, 1);
    assert_eq!(unmet(&v), ["E_CONSTITUTION_QUORUM", "E_NEW_POLICY_QUORUM"]);
    env.approve(&id, "bob").ok();
    assert_eq!(env.gate(&id).0, 0);
    env.atelier(&["merge", &id]).ok();
    env.atelier(&["audit", "verify"]).ok();
}

/// Code a project put in its constitution (`init --constitution 'src/governance/**'`) needs its
/// quorum like the policy does.
#[test]
fn code_the_constitution_names_needs_its_quorum() {
    let governance = atelier::governance::policy::DEFAULT_GOVERNANCE_TOML.replace(
        "    \"prompts/**\",\n]",
        "    \"prompts/**\",\n    \"src/governance/**\",\n]",
    );
    assert!(governance.contains("src/governance/**"));
    let env = Env::with(Setup {
        governance,
        ..Setup::default()
    });
    let id = env.propose(
        &[("src/governance/decision.rs", "// always allow\n")],
        "Simplify the gate",
    );
    env.approve(&id, "alice").ok();
    assert!(unmet(&env.gate(&id).1).contains(&"E_CONSTITUTION_QUORUM".to_string()));
}

#[test]
fn a_policy_change_cannot_lower_its_own_quorum() {
    let env = Env::new();
    let lowered = governance(&env).replace("quorum = 2", "quorum = 1");
    let id = env.propose(
        &[("policies/governance.toml", &lowered)],
        "One approval is enough",
    );
    env.approve(&id, "alice").ok();
    let (code, v) = env.gate(&id);
    assert_eq!(code, 1);
    // Met under the new policy, not under the base policy.
    assert_eq!(unmet(&v), ["E_CONSTITUTION_QUORUM"]);
}

#[test]
fn a_policy_change_must_meet_the_quorum_it_installs() {
    let env = Env::new();
    let raised = governance(&env).replace("quorum = 2", "quorum = 3");
    let id = env.propose(&[("policies/governance.toml", &raised)], "Three approvals");
    env.approve(&id, "alice").ok();
    env.approve(&id, "bob").ok();
    let (code, v) = env.gate(&id);
    assert_eq!(code, 1);
    assert_eq!(unmet(&v), ["E_NEW_POLICY_QUORUM"]);
}

#[test]
fn a_principal_added_by_the_proposal_itself_does_not_count() {
    let env = Env::new();
    let carol = env.keygen("carol");
    let signers = format!("{}{carol}\n", env.read("policies/allowed_signers"));
    let id = env.propose(&[("policies/allowed_signers", &signers)], "Add carol");
    env.approve(&id, "alice").ok();
    env.approve(&id, "carol").code(1);
    let (code, v) = env.gate(&id);
    assert_eq!(code, 1);
    assert_eq!(token_codes(&v), ["OK", "E_UNKNOWN_SIGNER"]);
    assert!(unmet(&v).contains(&"E_CONSTITUTION_QUORUM".to_string()));
    env.approve(&id, "bob").ok();
    assert_eq!(env.gate(&id).0, 0);
}

#[test]
fn a_change_that_breaks_the_policy_is_refused() {
    let env = Env::new();
    let id = env.propose(
        &[(
            "policies/governance.toml",
            "version = 1\nthis is not toml\n",
        )],
        "Break it",
    );
    env.approve(&id, "alice").ok();
    env.approve(&id, "bob").ok();
    let (code, v) = env.gate(&id);
    assert_eq!(code, 1);
    assert_eq!(unmet(&v), ["E_NEW_POLICY_INVALID"]);
}

#[test]
fn an_approver_the_change_removes_does_not_count_under_the_new_policy() {
    let env = Env::new();
    let without_bob: String = env
        .read("policies/allowed_signers")
        .lines()
        .filter(|l| !l.starts_with("bob@"))
        .map(|l| format!("{l}\n"))
        .collect();
    let id = env.propose(&[("policies/allowed_signers", &without_bob)], "Remove bob");
    env.approve(&id, "alice").ok();
    env.approve(&id, "bob").ok();
    let (code, v) = env.gate(&id);
    assert_eq!(code, 1);
    assert_eq!(unmet(&v), ["E_NEW_POLICY_QUORUM"]);
}

/// A change that touches two rules of the policy it would install is refused for its quorum
/// once: the ledger's gate decision lists each unmet code once.
#[test]
fn a_gate_decision_lists_each_unmet_code_once() {
    let env = Env::new();
    let id = env.propose(
        &[
            ("GOVERNANCE.md", "# Governance\n\nStricter.\n"),
            ("src/lib.rs", "pub fn answer() -> u32 {\n    42\n}\n"),
        ],
        "Rules and code",
    );
    env.approve(&id, "alice").ok();
    let (code, _) = env.gate(&id);
    assert_eq!(code, 1);
    let log = env.atelier(&["audit", "log", "--json"]).ok().json();
    let decision = log
        .as_array()
        .expect("entries")
        .iter()
        .rev()
        .find(|e| e["event"]["kind"] == "gate-decision" || e["kind"] == "gate-decision")
        .cloned()
        .unwrap_or_else(|| panic!("no gate decision in {log:#}"));
    let text = decision.to_string();
    assert!(text.contains("E_CONSTITUTION_QUORUM"), "{decision:#}");
    assert_eq!(
        text.matches("E_NEW_POLICY_QUORUM").count(),
        1,
        "{decision:#}"
    );
}
