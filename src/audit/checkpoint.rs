//! Signed checkpoints of the audit ledger in C2SP tlog-checkpoint form.
//!
//! This module owns the text format of a checkpoint (origin, tree size and
//! RFC 6962 root hash) and its Ed25519 signature lines as defined by C2SP
//! signed-note, which makes our checkpoints readable by existing transparency
//! log tooling. It does no IO: the ledger signs the roots it computes with
//! `merkle`, and verifiers parse a note and check it against trusted keys.
//! Parsing is deliberately strict so that every byte of a note is either
//! covered by the signature or checked for its one canonical form.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use sha2::{Digest, Sha256};

use crate::audit::merkle::Hash;

/// Every signature line starts with an em dash (U+2014) and a space.
const SIGNATURE_PREFIX: &str = "\u{2014} ";
/// The most signature lines a note may carry, as in golang.org/x/mod/sumdb/note.
const MAX_SIGNATURES: usize = 100;
/// The signed-note signature type byte for Ed25519.
const ED25519_TYPE: u8 = 0x01;

/// A tree head: the log's origin line, its size and its Merkle root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    pub origin: String,
    pub size: u64,
    pub root: Hash,
}

/// Why a note was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CheckpointError {
    /// The note does not have the exact shape of a signed checkpoint.
    #[error("malformed checkpoint at line {line}: {reason}")]
    Malformed { line: usize, reason: String },
    /// No signature line by the expected name carries a trusted key id.
    #[error(
        "no signature by a trusted key: expected a line by {name:?} with key id in \
         {trusted:?}, found key ids {found:?} for that name"
    )]
    UnknownKey {
        name: String,
        trusted: Vec<String>,
        found: Vec<String>,
    },
    /// A signature line by a trusted key failed to verify.
    #[error("bad signature by {name:?} with key id {key_id}: {reason}")]
    BadSignature {
        name: String,
        key_id: String,
        reason: String,
    },
    /// A trusted key is a small-order point, under which forgeries are easy.
    #[error("weak key for {name:?} with key id {key_id}: expected a full-order Ed25519 key")]
    WeakKey { name: String, key_id: String },
}

impl crate::errors::Classify for CheckpointError {
    fn kind(&self) -> crate::errors::Kind {
        crate::errors::Kind::Input
    }
}

/// One syntactically valid signature line.
#[derive(Debug)]
struct SignatureLine<'a> {
    name: &'a str,
    key_id: [u8; 4],
    signature: Vec<u8>,
}

/// Returns the signed-note key id of an Ed25519 key:
/// SHA-256(key name || 0x0A || 0x01 || public key)[..4].
pub fn key_id(key_name: &str, key: &VerifyingKey) -> [u8; 4] {
    let mut hasher = Sha256::new();
    hasher.update(key_name.as_bytes());
    hasher.update([b'\n', ED25519_TYPE]);
    hasher.update(key.as_bytes());
    let digest = hasher.finalize();
    [digest[0], digest[1], digest[2], digest[3]]
}

impl Checkpoint {
    /// Returns the note text: origin, size and base64 root, each ending in a
    /// newline. This is exactly the byte string that signatures cover.
    pub fn body(&self) -> String {
        format!(
            "{}\n{}\n{}\n",
            self.origin,
            self.size,
            STANDARD.encode(self.root)
        )
    }

    /// Returns the full signed note with one Ed25519 signature line.
    ///
    /// The origin and key name are not checked here; a note built from an
    /// origin with a newline or a key name with a space will not parse.
    pub fn sign(&self, key_name: &str, key: &SigningKey) -> String {
        let body = self.body();
        let line = signature_line(&body, key_name, key);
        format!("{body}\n{line}")
    }

    /// Parses a signed checkpoint without checking any signature.
    ///
    /// The signature lines must still be well formed. The result must not be
    /// trusted; use [`Checkpoint::verify`] for that.
    pub fn parse_unverified(note: &str) -> Result<Checkpoint, CheckpointError> {
        parse(note).map(|(checkpoint, _, _)| checkpoint)
    }

    /// Parses a signed checkpoint and verifies it against trusted keys.
    ///
    /// At least one signature line by `key_name` must verify under one of
    /// `keys`. Lines by other names, and lines whose key id matches none of
    /// `keys`, are ignored as signed-note requires; a line whose key id does
    /// match must verify, or the whole note is refused.
    pub fn verify(
        note: &str,
        key_name: &str,
        keys: &[VerifyingKey],
    ) -> Result<Checkpoint, CheckpointError> {
        let (checkpoint, body, signatures) = parse(note)?;
        verify_signatures(body, &signatures, key_name, keys)?;
        Ok(checkpoint)
    }
}

/// Returns a signature line, newline included, over `text`.
fn signature_line(text: &str, key_name: &str, key: &SigningKey) -> String {
    let signature: Signature = key.sign(text.as_bytes());
    let mut blob = key_id(key_name, &key.verifying_key()).to_vec();
    blob.extend_from_slice(&signature.to_bytes());
    format!("{SIGNATURE_PREFIX}{key_name} {}\n", STANDARD.encode(blob))
}

/// Splits a note into its checkpoint, its signed body and its signatures.
fn parse(note: &str) -> Result<(Checkpoint, &str, Vec<SignatureLine<'_>>), CheckpointError> {
    let malformed = |line: usize, reason: String| CheckpointError::Malformed { line, reason };
    for (i, line) in note.split('\n').enumerate() {
        if let Some(c) = line.chars().find(|c| c.is_control()) {
            let reason = format!("expected no control character, found U+{:04X}", c as u32);
            return Err(malformed(i + 1, reason));
        }
    }
    let Some(text) = note.strip_suffix('\n') else {
        let reason = "expected a newline at the end, found end of input".to_owned();
        return Err(malformed(note.split('\n').count(), reason));
    };
    let lines: Vec<&str> = text.split('\n').collect();
    let found = lines.len();
    if found < 5 {
        let reason = format!("expected at least 5 lines, found {found}");
        return Err(malformed(found + 1, reason));
    }
    let count = found - 4;
    if count > MAX_SIGNATURES {
        let reason = format!("expected at most {MAX_SIGNATURES} signatures, found {count}");
        return Err(malformed(5 + MAX_SIGNATURES, reason));
    }
    let origin = lines[0];
    if origin.trim().is_empty() {
        let reason = format!("expected a non-blank origin, found {origin:?}");
        return Err(malformed(1, reason));
    }
    let size = parse_size(lines[1]).map_err(|reason| malformed(2, reason))?;
    let root = parse_root(lines[2]).map_err(|reason| malformed(3, reason))?;
    if !lines[3].is_empty() {
        let reason = format!("expected a blank line after the root, found {:?}", lines[3]);
        return Err(malformed(4, reason));
    }
    let mut signatures = Vec::with_capacity(count);
    for (i, text) in lines.iter().enumerate().skip(4) {
        let parsed = parse_signature_line(text).map_err(|reason| malformed(i + 1, reason))?;
        signatures.push(parsed);
    }
    // The body is the first three lines with their newlines.
    let body_len = lines[..3].iter().map(|line| line.len() + 1).sum();
    let (origin, body) = (origin.to_owned(), &note[..body_len]);
    Ok((Checkpoint { origin, size, root }, body, signatures))
}

/// Parses the tree size, which must be canonical ASCII decimal.
fn parse_size(text: &str) -> Result<u64, String> {
    let canonical = !text.is_empty()
        && text.bytes().all(|b| b.is_ascii_digit())
        && (text == "0" || !text.starts_with('0'));
    let size = if canonical { text.parse().ok() } else { None };
    size.ok_or_else(|| format!("expected a canonical decimal u64 size, found {text:?}"))
}

/// Parses the root hash, which must be 32 bytes in padded standard base64.
fn parse_root(text: &str) -> Result<Hash, String> {
    let decoded = STANDARD.decode(text);
    let bytes = decoded.map_err(|e| format!("expected base64, found {text:?}: {e}"))?;
    let found = bytes.len();
    bytes
        .try_into()
        .map_err(|_| format!("expected a 32-byte root hash, found {found} bytes"))
}

/// Parses one `— <name> <base64(key id || signature)>` line.
fn parse_signature_line(text: &str) -> Result<SignatureLine<'_>, String> {
    let expected = "expected an em dash, a space, a key name, a space and a signature";
    let Some((name, encoded)) = text
        .strip_prefix(SIGNATURE_PREFIX)
        .and_then(|rest| rest.split_once(' '))
    else {
        return Err(format!("{expected}, found {text:?}"));
    };
    if name.is_empty() || name.contains(|c: char| c.is_whitespace() || c == '+') {
        return Err(format!(
            "expected a key name without spaces or '+', found {name:?}"
        ));
    }
    let decoded = STANDARD.decode(encoded);
    let blob = decoded.map_err(|e| format!("expected base64, found {encoded:?}: {e}"))?;
    if blob.len() < 5 {
        let found = blob.len();
        return Err(format!("expected 5 or more signature bytes, found {found}"));
    }
    let key_id = [blob[0], blob[1], blob[2], blob[3]];
    let signature = blob[4..].to_vec();
    Ok(SignatureLine {
        name,
        key_id,
        signature,
    })
}

/// Checks that some line by `key_name` verifies under one of `keys`, and that
/// no line matching a trusted key fails to verify.
fn verify_signatures(
    body: &str,
    signatures: &[SignatureLine<'_>],
    key_name: &str,
    keys: &[VerifyingKey],
) -> Result<(), CheckpointError> {
    let trusted: Vec<([u8; 4], &VerifyingKey)> = keys
        .iter()
        .map(|key| (key_id(key_name, key), key))
        .collect();
    if let Some((id, _)) = trusted.iter().find(|(_, key)| key.is_weak()) {
        return Err(CheckpointError::WeakKey {
            name: key_name.to_owned(),
            key_id: hex::encode(id),
        });
    }
    let mut verified = false;
    for signature in signatures.iter().filter(|s| s.name == key_name) {
        let candidates: Vec<&VerifyingKey> = trusted
            .iter()
            .filter(|(id, _)| *id == signature.key_id)
            .map(|(_, key)| *key)
            .collect();
        if candidates.is_empty() {
            continue;
        }
        let bad = |reason: String| CheckpointError::BadSignature {
            name: key_name.to_owned(),
            key_id: hex::encode(signature.key_id),
            reason,
        };
        let found = signature.signature.len();
        let bytes: [u8; 64] = signature.signature.as_slice().try_into().map_err(|_| {
            bad(format!(
                "expected a 64-byte Ed25519 signature, found {found} bytes"
            ))
        })?;
        let parsed = Signature::from_bytes(&bytes);
        let ok = candidates
            .iter()
            .any(|key| key.verify_strict(body.as_bytes(), &parsed).is_ok());
        if !ok {
            let reason = "expected a valid Ed25519 signature over the body";
            return Err(bad(reason.to_owned()));
        }
        verified = true;
    }
    if verified {
        return Ok(());
    }
    Err(CheckpointError::UnknownKey {
        name: key_name.to_owned(),
        trusted: trusted.iter().map(|(id, _)| hex::encode(id)).collect(),
        found: signatures
            .iter()
            .filter(|s| s.name == key_name)
            .map(|s| hex::encode(s.key_id))
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_core::OsRng;

    fn sample() -> Checkpoint {
        Checkpoint {
            origin: "atelier.example/audit".to_owned(),
            size: 42,
            root: crate::audit::merkle::leaf_hash(b"sample"),
        }
    }

    fn b64(text: &str) -> Vec<u8> {
        STANDARD.decode(text).expect("test vector is base64")
    }

    #[test]
    fn sign_then_verify_round_trips() {
        let key = SigningKey::generate(&mut OsRng);
        let checkpoint = sample();
        let note = checkpoint.sign("atelier.example/audit", &key);
        assert!(note.starts_with(&checkpoint.body()));
        assert_eq!(Checkpoint::parse_unverified(&note), Ok(checkpoint.clone()));
        let keys = [key.verifying_key()];
        assert_eq!(
            Checkpoint::verify(&note, "atelier.example/audit", &keys),
            Ok(checkpoint)
        );
    }

    #[test]
    fn every_single_byte_change_is_refused() {
        let key = SigningKey::generate(&mut OsRng);
        let note = sample().sign("audit", &key);
        let keys = [key.verifying_key()];
        for pos in 0..note.len() {
            for replacement in [note.as_bytes()[pos] ^ 0x01, b'\n', b' ', b'+'] {
                let mut bytes = note.clone().into_bytes();
                bytes[pos] = replacement;
                let Ok(changed) = String::from_utf8(bytes) else {
                    continue; // Not UTF-8, so it can never reach the parser.
                };
                if changed != note {
                    let result = Checkpoint::verify(&changed, "audit", &keys);
                    assert!(
                        result.is_err(),
                        "byte {pos} set to {replacement:#04x} accepted"
                    );
                }
            }
        }
    }

    #[test]
    fn wrong_key_and_wrong_name_are_unknown() {
        let key = SigningKey::generate(&mut OsRng);
        let other = SigningKey::generate(&mut OsRng);
        let note = sample().sign("audit", &key);
        let refused = Checkpoint::verify(&note, "audit", &[other.verifying_key()]);
        assert!(matches!(refused, Err(CheckpointError::UnknownKey { .. })));
        let refused = Checkpoint::verify(&note, "other", &[key.verifying_key()]);
        assert!(matches!(refused, Err(CheckpointError::UnknownKey { .. })));
        let refused = Checkpoint::verify(&note, "audit", &[]);
        assert!(matches!(refused, Err(CheckpointError::UnknownKey { .. })));
    }

    #[test]
    fn known_key_with_bad_signature_is_refused() {
        let key = SigningKey::generate(&mut OsRng);
        let signed = sample().sign("audit", &key);
        let forged = Checkpoint {
            size: 43,
            ..sample()
        };
        let line = signed.rsplit_once("\n\n").expect("note has a blank line").1;
        let note = format!("{}\n{line}", forged.body());
        let refused = Checkpoint::verify(&note, "audit", &[key.verifying_key()]);
        assert!(matches!(refused, Err(CheckpointError::BadSignature { .. })));
    }

    #[test]
    fn weak_key_is_refused() {
        let mut identity = [0u8; 32];
        identity[0] = 1;
        let weak = VerifyingKey::from_bytes(&identity).expect("identity point decodes");
        assert!(weak.is_weak());
        let key = SigningKey::generate(&mut OsRng);
        let note = sample().sign("audit", &key);
        let refused = Checkpoint::verify(&note, "audit", &[key.verifying_key(), weak]);
        assert!(matches!(refused, Err(CheckpointError::WeakKey { .. })));
    }

    #[test]
    fn other_names_and_unknown_ids_are_ignored() {
        let key = SigningKey::generate(&mut OsRng);
        let witness = SigningKey::generate(&mut OsRng);
        let rotated = SigningKey::generate(&mut OsRng);
        let checkpoint = sample();
        let body = checkpoint.body();
        let note = format!(
            "{body}\n{}{}{}",
            signature_line(&body, "witness.example", &witness),
            signature_line(&body, "audit", &rotated),
            signature_line(&body, "audit", &key),
        );
        let keys = [key.verifying_key()];
        assert_eq!(Checkpoint::verify(&note, "audit", &keys), Ok(checkpoint));
    }

    #[test]
    fn strict_parsing() {
        let key = SigningKey::generate(&mut OsRng);
        let note = sample().sign("audit", &key);
        let (body, sig) = note.split_once("\n\n").expect("note has a blank line");
        let lines: Vec<&str> = body.split('\n').collect();
        let with = |i: usize, text: &str| {
            let mut changed = lines.clone();
            changed[i] = text;
            format!("{}\n\n{sig}", changed.join("\n"))
        };
        let root = lines[2];
        let bad = [
            (with(0, ""), 1),
            (with(0, "   "), 1),
            (with(1, "042"), 2),
            (with(1, "+42"), 2),
            (with(1, ""), 2),
            (with(1, "18446744073709551616"), 2),
            (with(2, &root[..43]), 3),
            (with(2, "AAAA"), 3),
            (with(2, &format!("{root}=")), 3),
            (format!("{body}\nextension\n\n{sig}"), 4),
            (format!("{body}\n\n\n{sig}"), 5),
            (format!("{body}\n\n"), 5),
            (note.replace('\n', "\r\n"), 1),
            (note.trim_end().to_owned(), 5),
            (format!("{body}\n\n{}", sig.replacen("audit", "a+b", 1)), 5),
            (format!("{body}\n\n{}", sig.replacen("\u{2014}", "-", 1)), 5),
            (format!("{body}\n\n{}", sig.repeat(MAX_SIGNATURES + 1)), 105),
        ];
        for (text, line) in bad {
            match Checkpoint::parse_unverified(&text) {
                Err(CheckpointError::Malformed { line: found, .. }) => {
                    assert_eq!(found, line, "{text:?}");
                }
                other => panic!("{text:?} gave {other:?}"),
            }
        }
        let many = format!("{body}\n\n{}", sig.repeat(MAX_SIGNATURES));
        assert!(Checkpoint::verify(&many, "audit", &[key.verifying_key()]).is_ok());
        let zero = Checkpoint {
            size: 0,
            ..sample()
        };
        assert_eq!(
            Checkpoint::parse_unverified(&zero.sign("audit", &key)),
            Ok(zero)
        );
    }

    #[test]
    fn c2sp_example_parses() {
        // The example from the C2SP tlog-checkpoint specification; its key is
        // not published, so only the structure can be checked.
        let note = "example.com/behind-the-sofa\n20852163\n\
                    CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n\n\
                    \u{2014} example.com/behind-the-sofa Az3grlgtzPICa5OS8npVmf1Myq/5IZniMp+ZJurmRDeOoRDe4URYN7u5/Zhcyv2q1gGzGku9nTo+zyWE+xeMcTOAYQ8=\n";
        let checkpoint = Checkpoint::parse_unverified(note).expect("the example parses");
        assert_eq!(checkpoint.origin, "example.com/behind-the-sofa");
        assert_eq!(checkpoint.size, 20852163);
        assert_eq!(
            checkpoint.body(),
            note.split_once("\n\n").expect("blank line").0.to_owned() + "\n"
        );
    }

    #[test]
    fn matches_go_sumdb_note_vector() {
        // From golang.org/x/mod/sumdb/note `note_test.go`: the PeterNeumann
        // key, whose encoded forms are the type byte 0x01 then the key bytes.
        let seed = b64("AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz");
        let public = b64("ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW");
        let seed: [u8; 32] = seed[1..].try_into().expect("seed is 32 bytes");
        let key = SigningKey::from_bytes(&seed);
        assert_eq!(key.verifying_key().as_bytes()[..], public[1..]);
        assert_eq!(
            hex::encode(key_id("PeterNeumann", &key.verifying_key())),
            "c74f20a3"
        );

        let text = "If you think cryptography is the answer to your problem,\n\
                    then you don't know what your problem is.\n";
        let want = "\u{2014} PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n";
        assert_eq!(signature_line(text, "PeterNeumann", &key), want);
        let parsed = parse_signature_line(want.trim_end()).expect("the line parses");
        let keys = [key.verifying_key()];
        assert_eq!(
            verify_signatures(text, &[parsed], "PeterNeumann", &keys),
            Ok(())
        );
    }
}
