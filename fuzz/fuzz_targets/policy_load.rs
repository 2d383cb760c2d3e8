//! A commit's policy files: `governance.toml`, `allowed_signers` and `gate_key.pub`, split from
//! the input at NUL bytes (a missing part is an absent file). Loading never panics, and a
//! loaded policy never lists the gate's key and answers its questions without panicking.
#![no_main]

use atelier::governance::policy::{Policy, PolicyFiles};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut parts = data.splitn(3, |b| *b == 0).map(<[u8]>::to_vec);
    let files = PolicyFiles {
        governance: parts.next(),
        allowed_signers: parts.next(),
        gate_key: parts.next(),
    };
    let Ok(policy) = Policy::load(&files) else {
        return;
    };
    let changed = vec![
        "src/lib.rs".to_string(),
        "policies/governance.toml".to_string(),
        "README.md".to_string(),
    ];
    for rule in policy.touched(&changed) {
        assert!(rule.quorum >= 1);
        assert!(!rule.matched(&changed).is_empty());
    }
    // The gate's key never approves: a loaded policy never lists it.
    if let Some(gate) = &policy.gate_key {
        assert!(policy.signers.find(gate).is_empty());
    }
    assert!(policy.constitution.quorum >= 1);
    let _ = policy.lists("SHA256:x", "someone@example.org", 0);
    let _ = policy.is_revoked("SHA256:x");
});
