//! Approval tokens judged by a second SSHSIG implementation Atelier did not write: the `sshsig`
//! package from PyPI (`.ci/run` installs it). For a genuine token and for each way of spoiling
//! one, it and Atelier agree on whether the signature is valid, by alice's key, over those
//! payload bytes, in the approvals namespace.

use std::path::Path;

use atelier::governance::token::{self, RawToken};

use crate::support::clis::require_cli;
use crate::support::Env;

/// `sshsig.verify` of the payload and armored signature against one allowed key, in the
/// approvals namespace: `valid` or `invalid: …`.
const VERIFY: &str = r#"
import sys, sshsig
payload = open(sys.argv[1], "rb").read()
signature = open(sys.argv[2]).read()
key = sshsig.PublicKey.from_openssh_str(sys.argv[3])
try:
    sshsig.verify(payload, signature, [key], namespace="atelier-approval")
    print("valid")
except (sshsig.InvalidSignature, ValueError, NotImplementedError) as e:
    print("invalid:", type(e).__name__)
"#;

fn sshsig_says(env: &Env, bin: &Path, raw: &RawToken, key: &str) -> bool {
    let n = std::fs::read_dir(env.tmp.path()).expect("ls").count();
    let payload = env.file(&format!("sshsig-payload-{n}"), &raw.payload);
    let sig = env.file(&format!("sshsig-sig-{n}"), &raw.signature);
    let out = std::process::Command::new(bin.join("python3"))
        .args(["-c", VERIFY])
        .arg(&payload)
        .arg(&sig)
        .arg(key)
        .output()
        .expect("python3 runs");
    let said = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(
        out.status.success() && (said == "valid" || said.starts_with("invalid")),
        "sshsig: {said}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    said == "valid"
}

/// Atelier's verdict on the same question: the signature verifies, and its key is `key`.
fn atelier_says(raw: &RawToken, key: &str) -> bool {
    token::verify(raw).is_ok_and(|v| {
        let ours = ssh_key::PublicKey::from(v.key)
            .to_openssh()
            .expect("encode");
        let ours: Vec<&str> = ours.split_whitespace().take(2).collect();
        ours.join(" ") == key
    })
}

/// The `ssh-ed25519 AAAA…` part of `principal`'s line in policies/allowed_signers.
fn allowed_key(env: &Env, principal: &str) -> String {
    let signers = env.read("policies/allowed_signers");
    let line = signers
        .lines()
        .find(|l| l.starts_with(principal))
        .unwrap_or_else(|| panic!("no {principal} in allowed_signers:\n{signers}"));
    let at = line.find("ssh-ed25519 ").expect("an ed25519 key");
    line[at..]
        .split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ")
}

fn flip_in_body(signature: &str) -> String {
    // A base64 character in the middle of the armored body, where the signature bytes are.
    let lines: Vec<&str> = signature.lines().collect();
    let mut out = Vec::new();
    let mid = lines.len() / 2;
    for (i, l) in lines.iter().enumerate() {
        if i == mid && !l.starts_with("-----") {
            let mut c: Vec<char> = l.chars().collect();
            let j = c.len() / 2;
            c[j] = if c[j] == 'A' { 'B' } else { 'A' };
            out.push(c.into_iter().collect::<String>());
        } else {
            out.push(l.to_string());
        }
    }
    out.join("\n") + "\n"
}

#[test]
fn tokens_and_their_forgeries_are_judged_alike_by_sshsig_from_pypi() {
    let bin = require_cli!("sshsig");
    let env = Env::new();
    let id = env.propose_code();
    let genuine = RawToken::extract_all(&env.approve(&id, "alice").ok().stdout).remove(0);
    let alice = allowed_key(&env, "alice@example.org");
    let bob_signed = RawToken::extract_all(&env.approve(&id, "bob").ok().stdout).remove(0);
    let (payload, sig) = env.ssh_sign(&id, &env.key("alice"), "git");
    let other_namespace = RawToken {
        payload: std::fs::read_to_string(payload).expect("payload"),
        signature: std::fs::read_to_string(sig).expect("signature"),
    };

    let cases: Vec<(&str, RawToken, bool)> = vec![
        ("genuine", genuine.clone(), true),
        (
            "a payload byte changed",
            RawToken {
                payload: genuine
                    .payload
                    .replace("decision approve", "decision reject"),
                ..genuine.clone()
            },
            false,
        ),
        (
            "the payload's last newline dropped",
            RawToken {
                payload: genuine.payload.trim_end_matches('\n').to_string(),
                ..genuine.clone()
            },
            false,
        ),
        (
            "a signature character changed",
            RawToken {
                signature: flip_in_body(&genuine.signature),
                ..genuine.clone()
            },
            false,
        ),
        ("signed by bob, not alice", bob_signed, false),
        (
            "signed by alice in the `git` namespace",
            other_namespace,
            false,
        ),
    ];
    for (what, raw, expected) in cases {
        let theirs = sshsig_says(&env, &bin, &raw, &alice);
        let ours = atelier_says(&raw, &alice);
        assert_eq!(
            (theirs, ours),
            (expected, expected),
            "{what}: sshsig says {theirs}, Atelier says {ours}"
        );
    }
}
