//! Approval tokens: SSH signatures ssh-keygen makes and verifies, refused when tampered,
//! replayed, in another namespace, for another repository, pull request or policy.

use std::path::Path;

use atelier::governance::token::{self, Payload, RawToken};

use crate::support::{token_codes, Env};

fn record(env: &Env, id: &str, text: &str) {
    let f = env.file(&format!("token-{}.txt", text.len()), text);
    env.atelier(&["approve", id, "--token", f.to_str().expect("utf8")])
        .code(1);
}

fn ssh_keygen(env: &Env, args: &[&str], stdin: Option<&Path>) -> std::process::Output {
    let mut c = env.command("ssh-keygen");
    c.args(args);
    if let Some(p) = stdin {
        c.stdin(std::fs::File::open(p).expect("stdin file"));
    }
    c.output().expect("ssh-keygen runs")
}

#[test]
fn signatures_made_by_ssh_keygen_are_accepted() {
    let env = Env::new();
    let id = env.propose_code();
    let (_, sig) = env.ssh_sign(&id, &env.key("alice"), "atelier-approval");
    env.atelier(&["approve", &id, "--signature", sig.to_str().expect("utf8")])
        .ok();
    let (code, v) = env.gate(&id);
    assert_eq!(code, 0, "{v:#}");
}

#[test]
fn atelier_tokens_verify_with_ssh_keygen() {
    let env = Env::new();
    let id = env.propose_code();
    let text = env.approve(&id, "alice").ok().stdout;
    let raw = RawToken::extract_all(&text).remove(0);
    let payload = env.file("p", &raw.payload);
    let sig = env.file("p.sig", &raw.signature);
    let signers = env.repo.join("policies/allowed_signers");
    let args = [
        "-Y",
        "verify",
        "-f",
        signers.to_str().expect("utf8"),
        "-I",
        "alice@example.org",
        "-n",
        "atelier-approval",
        "-s",
        sig.to_str().expect("utf8"),
    ];
    let out = ssh_keygen(&env, &args, Some(&payload));
    assert!(
        out.status.success(),
        "ssh-keygen refused: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // And the reference tool refuses the tampered payload too.
    let tampered = env.file(
        "p2",
        &raw.payload.replace("decision approve", "decision reject"),
    );
    let out = ssh_keygen(&env, &args, Some(&tampered));
    assert!(!out.status.success());
}

#[test]
fn a_tampered_payload_byte_is_refused() {
    let env = Env::new();
    let id = env.propose_code();
    let text = env.approve(&id, "alice").ok().stdout;
    env.atelier(&["close", &id]).ok();
    let id = env.propose(&[("README.md", "# x\n")], "Another");
    let (_, v) = env.gate(&id);
    let head = v["head"].as_str().expect("head");
    // Re-point a valid token at proposal 2 by editing its bytes: the signature breaks.
    let mut raw = RawToken::extract_all(&text).remove(0);
    let p = Payload::parse(&raw.payload).expect("payload");
    raw.payload = raw
        .payload
        .replace(
            "proposal 1\npull 1\n",
            &format!("proposal {id}\npull {id}\n"),
        )
        .replace(&p.head, head);
    record(&env, &id, &raw.to_text());
    let (code, v) = env.gate(&id);
    assert_eq!(code, 1);
    assert_eq!(token_codes(&v), ["E_BAD_SIGNATURE"]);
}

#[test]
fn line_ending_variants_are_refused() {
    let env = Env::new();
    let id = env.propose_code();
    let key = atelier::workflow::read_signing_key(&env.key("alice")).expect("key");
    let payload = env.atelier(&["approve", &id, "--payload"]).ok().stdout;
    for variant in [
        payload.replace('\n', "\r\n"),
        payload.trim_end().to_string(),
        format!("{payload}\n"),
    ] {
        let sig = token::sign_bytes(variant.as_bytes(), token::NAMESPACE, &key);
        record(
            &env,
            &id,
            &format!(
                "{variant}{}{sig}",
                if variant.ends_with('\n') { "" } else { "\n" }
            ),
        );
    }
    // A valid token whose transport turned LF into CRLF.
    let good = env.approve(&id, "bob").ok().stdout;
    let idx = token_codes(&env.gate(&id).1).len();
    record(&env, &id, &good.replace('\n', "\r\n"));
    let (code, v) = env.gate(&id);
    assert_eq!(code, 0, "bob's good token still counts");
    let codes = token_codes(&v);
    // CRLF: not canonical. Signed without the final LF: the token form always carries it, so the
    // signature no longer matches. An extra blank line: not canonical.
    assert_eq!(
        codes[..3],
        ["E_TOKEN_MALFORMED", "E_BAD_SIGNATURE", "E_TOKEN_MALFORMED"],
        "{v:#}"
    );
    assert_eq!(codes[idx], "E_TOKEN_MALFORMED");
}

#[test]
fn wrong_namespaces_are_refused() {
    let env = Env::new();
    let id = env.propose_code();
    for ns in ["git", "file"] {
        let (payload, sig) = env.ssh_sign(&id, &env.key("alice"), ns);
        let (payload, sig) = (
            std::fs::read_to_string(payload).expect("payload"),
            std::fs::read_to_string(sig).expect("sig"),
        );
        record(&env, &id, &format!("{payload}{sig}"));
    }
    let (code, v) = env.gate(&id);
    assert_eq!(code, 1);
    assert_eq!(token_codes(&v), ["E_WRONG_NAMESPACE", "E_WRONG_NAMESPACE"]);
}

#[test]
fn a_non_ed25519_key_is_refused_even_when_listed() {
    let env = Env::new();
    let ecdsa = env.keys.join("erin");
    let out = ssh_keygen(
        &env,
        &[
            "-q",
            "-t",
            "ecdsa",
            "-N",
            "",
            "-C",
            "erin",
            "-f",
            ecdsa.to_str().expect("utf8"),
        ],
        None,
    );
    assert!(out.status.success());
    let public = std::fs::read_to_string(env.keys.join("erin.pub")).expect("pub");
    let mut signers = env.read("policies/allowed_signers");
    signers.push_str(&format!("erin@example.org {public}"));
    env.write("policies/allowed_signers", &signers);
    env.git(&["commit", "-q", "-am", "Add erin (ecdsa)"]);
    let id = env.propose_code();
    let (_, sig) = env.ssh_sign(&id, &ecdsa, "atelier-approval");
    env.atelier(&["approve", &id, "--signature", sig.to_str().expect("utf8")])
        .code(1);
    let (code, v) = env.gate(&id);
    assert_eq!(code, 1);
    assert_eq!(token_codes(&v), ["E_UNSUPPORTED_KEY"]);
    // And atelier itself refuses to sign with it.
    let run = env
        .atelier(&["approve", &id, "--key", ecdsa.to_str().expect("utf8")])
        .code(2);
    assert!(run.stderr.contains("ed25519"), "{}", run.stderr);
}

#[test]
fn a_weak_key_with_a_message_independent_signature_is_refused() {
    use ssh_key::public::{Ed25519PublicKey, KeyData};
    // The identity point: small order, so (R = identity, s = 0) satisfies the plain
    // verification equation for every message.
    let mut point = [0u8; 32];
    point[0] = 1;
    let mut sig = [0u8; 64];
    sig[0] = 1;
    let vk = ed25519_dalek::VerifyingKey::from_bytes(&point).expect("decodes");
    let forged = ed25519_dalek::Signature::from_bytes(&sig);
    assert!(vk.verify_strict(b"anything", &forged).is_err());
    assert!(
        ed25519_dalek::Verifier::verify(&vk, b"anything", &forged).is_ok(),
        "plain verify accepts it"
    );

    let env = Env::new();
    let weak = ssh_key::PublicKey::new(KeyData::Ed25519(Ed25519PublicKey(point)), "weak");
    let mut signers = env.read("policies/allowed_signers");
    signers.push_str(&format!(
        "weak@example.org {}\n",
        weak.to_openssh().expect("encode")
    ));
    env.write("policies/allowed_signers", &signers);
    env.git(&["commit", "-q", "-am", "List a weak key"]);
    let id = env.propose_code();
    let payload = env.atelier(&["approve", &id, "--payload"]).ok().stdout;
    let armored = ssh_key::SshSig::new(
        weak.key_data().clone(),
        token::NAMESPACE,
        ssh_key::HashAlg::Sha512,
        ssh_key::Signature::new(ssh_key::Algorithm::Ed25519, sig.to_vec()).expect("signature"),
    )
    .expect("sshsig")
    .to_pem(ssh_key::LineEnding::LF)
    .expect("pem");
    record(&env, &id, &format!("{payload}{armored}"));
    let (code, v) = env.gate(&id);
    assert_eq!(code, 1);
    assert_eq!(token_codes(&v), ["E_WEAK_KEY"]);
}

/// Signs a payload edited by `edit` (fields of the current change otherwise) with alice's key.
fn crafted(env: &Env, id: &str, edit: impl Fn(&mut Payload)) -> String {
    let key = atelier::workflow::read_signing_key(&env.key("alice")).expect("key");
    let text = env.atelier(&["approve", id, "--payload"]).ok().stdout;
    let mut p = Payload::parse(&text).expect("payload");
    edit(&mut p);
    token::sign(&p, &key).to_text()
}

#[test]
fn tokens_for_another_repository_pull_or_policy_are_refused() {
    let env = Env::new();
    let id = env.propose_code();
    record(
        &env,
        &id,
        &crafted(&env, &id, |p| p.repository = "local/elsewhere".into()),
    );
    record(&env, &id, &crafted(&env, &id, |p| p.pull = 7));
    record(
        &env,
        &id,
        &crafted(&env, &id, |p| p.policy = "0".repeat(64)),
    );
    record(
        &env,
        &id,
        &crafted(&env, &id, |p| p.merge_tree = "0".repeat(40)),
    );
    record(
        &env,
        &id,
        &crafted(&env, &id, |p| {
            p.checkpoint = Some(token::SeenCheckpoint {
                size: 1,
                root: "0".repeat(64),
            })
        }),
    );
    record(&env, &id, &crafted(&env, &id, |p| p.issued += 3600));
    let (code, v) = env.gate(&id);
    assert_eq!(code, 1);
    assert_eq!(
        token_codes(&v),
        [
            "E_WRONG_REPOSITORY",
            "E_WRONG_PULL",
            "E_POLICY_DIGEST_MISMATCH",
            "E_MERGE_TREE_MISMATCH",
            "E_CHECKPOINT_MISMATCH",
            "E_TOKEN_NOT_YET_VALID"
        ]
    );
}

#[test]
fn short_sha_prefixes_are_refused() {
    let env = Env::new();
    let id = env.propose_code();
    let key = atelier::workflow::read_signing_key(&env.key("alice")).expect("key");
    let text = env.atelier(&["approve", &id, "--payload"]).ok().stdout;
    let p = Payload::parse(&text).expect("payload");
    let short = text.replace(&p.head, &p.head[..12]);
    let sig = token::sign_bytes(short.as_bytes(), token::NAMESPACE, &key);
    record(&env, &id, &format!("{short}{sig}"));
    let (code, v) = env.gate(&id);
    assert_eq!(code, 1);
    assert_eq!(token_codes(&v), ["E_TOKEN_MALFORMED"]);
    assert!(v.to_string().contains("never a prefix"), "{v:#}");
}

#[test]
fn a_replayed_token_counts_once() {
    let env = Env::new();
    let id = env.propose(&[("GOVERNANCE.md", "# changed\n")], "Constitution edit");
    let token = env.approve(&id, "alice").ok().stdout;
    record(&env, &id, &token);
    let (code, v) = env.gate(&id);
    assert_eq!(code, 1);
    assert_eq!(token_codes(&v), ["OK", "E_DUPLICATE_TOKEN"]);
}
