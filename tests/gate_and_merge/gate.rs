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

/// A reviewer at the gate clone with a home of their own has no gate key: `gate` still shows
/// what the change needs (and records nothing), and `init` writes no key of theirs, which would
/// not be the key in force and would make every later command refuse.
#[test]
fn a_second_person_at_the_clone_sees_what_the_gate_needs_and_init_writes_no_key() {
    let env = Env::new();
    let id = env.propose_code();
    let home = env.tmp.path().join("olga");
    std::fs::create_dir_all(&home).expect("home");
    let as_olga = |args: &[&str]| {
        let mut c = env.command(crate::support::bin());
        c.env("HOME", &home).arg("-C").arg(&env.repo).args(args);
        crate::support::Run::from(c.output().expect("run atelier"))
    };
    let gate = as_olga(&["gate", &id, "--json"]).code(1);
    assert!(
        gate.stderr.contains("no gate key here") && gate.stderr.contains("nothing was recorded"),
        "{}",
        gate.stderr
    );
    assert!(
        unmet(&gate.json()).contains(&"E_QUORUM_NOT_MET".to_string()),
        "{}",
        gate.stdout
    );
    let init = as_olga(&["init"]).code(2);
    assert!(
        init.stderr.contains("this repository is adopted")
            && !init.stderr.contains("run `atelier init`"),
        "{}",
        init.stderr
    );
    let written: Vec<_> = walk(&home);
    assert!(
        !written.iter().any(|p| p.ends_with("gate_key")),
        "a key was written: {written:?}"
    );
    // The adopter's clone goes on as before.
    env.approve(&id, "alice").ok();
    env.atelier(&["merge", &id]).ok();
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// Recording a token on the local forge appends it to the ledger, which only the gate key's
/// holder can do: from an account without the key, `approve` records nothing, says who records
/// it and how, and prints the token, which the holder then records as it is.
#[test]
fn a_token_signed_on_another_account_is_handed_to_the_gate_key_s_holder() {
    let env = Env::new();
    let id = env.propose_code();
    let home = env.tmp.path().join("olga");
    std::fs::create_dir_all(&home).expect("home");
    let mut c = env.command(crate::support::bin());
    c.env("HOME", &home).arg("-C").arg(&env.repo).args([
        "approve",
        &id,
        "--key",
        env.key("alice").to_str().expect("utf8"),
    ]);
    let handed = crate::support::Run::from(c.output().expect("run atelier")).code(1);
    assert!(
        handed.stderr.contains("the token was not recorded")
            && handed
                .stderr
                .contains(&format!("atelier approve {id} --token FILE")),
        "{}",
        handed.stderr
    );
    assert!(
        handed.stdout.contains("-----BEGIN SSH SIGNATURE-----"),
        "{}",
        handed.stdout
    );
    let (code, _) = env.gate(&id);
    assert_eq!(code, 1, "nothing was recorded");
    let token = env.tmp.path().join("token");
    std::fs::write(&token, &handed.stdout).expect("write");
    env.atelier(&["approve", &id, "--token", token.to_str().expect("utf8")])
        .ok();
    let (code, v) = env.gate(&id);
    assert_eq!(code, 0, "{v:#}");
}
