//! Writes the signed seeds under `fuzz/seeds/` that cannot be written by hand: approval tokens,
//! their SSHSIG armour and blob, and signed checkpoints, all from fixed keys so the output is the
//! same every time. Run from `fuzz/`: `cargo run --example seeds`.

use std::fs;
use std::path::Path;

use atelier::audit::checkpoint::Checkpoint;
use atelier::governance::token::{self, Payload, SeenCheckpoint, Verdict};
use base64::Engine as _;
use ed25519_dalek::SigningKey;

fn write(target: &str, name: &str, bytes: &[u8]) {
    let dir = Path::new("seeds").join(target);
    fs::create_dir_all(&dir).expect("create the seed directory");
    fs::write(dir.join(name), bytes).expect("write a seed");
}

fn payload(checkpoint: bool, decision: Verdict) -> Payload {
    Payload {
        repository: "fuzz/repo".into(),
        proposal: "1".into(),
        pull: 1,
        base: "1".repeat(40),
        head: "2".repeat(40),
        merge_tree: "3".repeat(40),
        policy: "4".repeat(64),
        decision,
        issued: 1_795_946_400,  // 2026-11-29T10:00:00Z
        expires: 1_796_551_200, // 2026-12-06T10:00:00Z
        nonce: "0123456789abcdef0123456789abcdef".into(),
        checkpoint: checkpoint.then(|| SeenCheckpoint {
            size: 12,
            root: "ab".repeat(32),
        }),
    }
}

fn main() {
    let approver = SigningKey::from_bytes(&[1; 32]);
    let plain = token::sign(&payload(false, Verdict::Approve), &approver);
    let with_cp = token::sign(&payload(true, Verdict::Reject), &approver);

    // token_payload: the canonical payloads.
    write("token_payload", "approve", plain.payload.as_bytes());
    write(
        "token_payload",
        "reject-checkpoint",
        with_cp.payload.as_bytes(),
    );

    // token_extract: tokens inside comments, as a pull request or a merge commit carries them.
    write("token_extract", "one", plain.to_text().as_bytes());
    let comment = format!(
        "Looks good to me.\n\n```\n{}```\n\nAnd the reviewer's:\n{}\r\ntrailing words\n",
        plain.to_text(),
        with_cp.to_text()
    );
    write("token_extract", "comment", comment.as_bytes());

    // token_verify: mode byte 0 then the armour, mode byte 1 then the raw SSHSIG blob; both
    // over the payload the target fixes (`payload(false, Approve)`), so they verify.
    let mut armour = vec![0u8];
    armour.extend_from_slice(plain.signature.as_bytes());
    write("token_verify", "armour", &armour);
    let body: String = plain
        .signature
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .collect();
    let blob = base64::engine::general_purpose::STANDARD
        .decode(body)
        .expect("the armour is base64");
    let mut raw = vec![1u8];
    raw.extend_from_slice(&blob);
    write("token_verify", "blob", &raw);

    // checkpoint: signed by the key the target trusts, and with another signer's line too.
    let gate = SigningKey::from_bytes(&[7; 32]);
    let other = SigningKey::from_bytes(&[9; 32]);
    let cp = Checkpoint {
        origin: "atelier.example/fuzz/repo".into(),
        size: 3,
        root: [0x5a; 32],
    };
    let note = cp.sign("atelier-gate", &gate);
    write("checkpoint", "signed", note.as_bytes());
    let cosigned = other_line(&cp, &other, &note);
    write("checkpoint", "cosigned", cosigned.as_bytes());
    let empty = Checkpoint {
        origin: "o".into(),
        size: 0,
        root: [0; 32],
    };
    write(
        "checkpoint",
        "empty",
        empty.sign("atelier-gate", &gate).as_bytes(),
    );
}

/// `note` with a second signature line, by `key` as `witness`.
fn other_line(cp: &Checkpoint, key: &SigningKey, note: &str) -> String {
    let second = cp.sign("witness", key);
    let line = second
        .lines()
        .last()
        .expect("a signed note ends with its signature line");
    format!("{note}{line}\n")
}
