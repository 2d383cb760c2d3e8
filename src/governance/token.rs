//! Approval tokens: the canonical payload an approver signs, and the OpenSSH SSHSIG signature
//! over it (namespace `atelier-approval`, ed25519 only).
//!
//! A token travels as text — the payload lines followed by an armored `SSH SIGNATURE` block —
//! exactly as a pull-request comment would carry it. Parsing is strict so that one decision has
//! one byte sequence: LF only, fixed field order, full-length hex ids. Signatures are parsed with
//! `ssh-key` but verified with ed25519-dalek's `verify_strict`, and small-order ("weak") keys are
//! refused, because such a key verifies any message under plain verification. Pure: no IO, no clock.

use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use ssh_key::{public::KeyData, HashAlg, LineEnding, SshSig};
use thiserror::Error;

use super::code::{Code, Coded};

use super::time::{format_rfc3339, parse_rfc3339, Timestamp};

/// The SSHSIG namespace every approval is signed under.
pub const NAMESPACE: &str = "atelier-approval";
/// The first line of every payload: the format name and version.
pub const FORMAT_LINE: &str = "atelier-approval 1";
const SIG_BEGIN: &str = "-----BEGIN SSH SIGNATURE-----";
const SIG_END: &str = "-----END SSH SIGNATURE-----";

/// What an approver decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Approve,
    Reject,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Approve => "approve",
            Verdict::Reject => "reject",
        }
    }
}

/// The ledger view an approver saw when signing (optional in the payload).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SeenCheckpoint {
    pub size: u64,
    pub root: String,
}

/// The signed statement: which exact change, under which policy, decided how, valid when.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Payload {
    pub repository: String,
    pub proposal: String,
    pub pull: u64,
    pub base: String,
    pub head: String,
    pub merge_tree: String,
    pub policy: String,
    pub decision: Verdict,
    pub issued: Timestamp,
    pub expires: Timestamp,
    pub nonce: String,
    pub checkpoint: Option<SeenCheckpoint>,
}

/// Why a token could not even be read. Each maps to a stable code in the gate.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum TokenError {
    #[error("no approval token found: expected a line `{FORMAT_LINE}` followed by the payload and an armored SSH SIGNATURE block")]
    Missing,
    #[error("payload is not canonical: {0}")]
    NotCanonical(String),
    #[error("signature block is not a valid SSHSIG: {0}")]
    BadArmor(String),
}

impl Payload {
    /// The exact bytes that are signed: one `key value` a line, LF, fixed order.
    pub fn to_canonical(&self) -> String {
        let mut out = String::with_capacity(512);
        let mut line = |k: &str, v: &str| {
            out.push_str(k);
            out.push(' ');
            out.push_str(v);
            out.push('\n');
        };
        line("atelier-approval", "1");
        line("repository", &self.repository);
        line("proposal", &self.proposal);
        line("pull", &self.pull.to_string());
        line("base", &self.base);
        line("head", &self.head);
        line("merge-tree", &self.merge_tree);
        line("policy", &self.policy);
        line("decision", self.decision.as_str());
        line("issued", &format_rfc3339(self.issued));
        line("expires", &format_rfc3339(self.expires));
        line("nonce", &self.nonce);
        if let Some(cp) = &self.checkpoint {
            line("checkpoint", &format!("{} {}", cp.size, cp.root));
        }
        out
    }

    /// Parses canonical payload bytes; anything that would not re-serialize to the same bytes
    /// is refused with the line and field at fault.
    pub fn parse(text: &str) -> Result<Payload, TokenError> {
        let bad = |msg: String| TokenError::NotCanonical(msg);
        if text.contains('\r') {
            return Err(bad(
                "it contains a carriage return (CRLF line endings); tokens use LF only — re-save the file with LF endings and sign again".into(),
            ));
        }
        if !text.ends_with('\n') {
            return Err(bad("the last line does not end with a newline (LF)".into()));
        }
        let lines: Vec<&str> = text[..text.len() - 1].split('\n').collect();
        let expected = [
            "atelier-approval",
            "repository",
            "proposal",
            "pull",
            "base",
            "head",
            "merge-tree",
            "policy",
            "decision",
            "issued",
            "expires",
            "nonce",
        ];
        if lines.len() < expected.len() || lines.len() > expected.len() + 1 {
            return Err(bad(format!(
                "expected {} or {} lines, found {}",
                expected.len(),
                expected.len() + 1,
                lines.len()
            )));
        }
        let mut values = Vec::with_capacity(lines.len());
        for (i, line) in lines.iter().enumerate() {
            let want = expected.get(i).copied().unwrap_or("checkpoint");
            let Some((key, value)) = line.split_once(' ') else {
                return Err(bad(format!(
                    "line {}: expected `{want} <value>`, found `{line}`",
                    i + 1
                )));
            };
            if key != want {
                return Err(bad(format!(
                    "line {}: expected field `{want}`, found `{key}` (fields come in a fixed order)",
                    i + 1
                )));
            }
            if value.is_empty() || value.trim() != value || value.contains("  ") {
                return Err(bad(format!(
                    "line {} (`{key}`): the value is empty or has stray spaces",
                    i + 1
                )));
            }
            values.push(value);
        }
        if values[0] != "1" {
            return Err(bad(format!(
                "line 1: format version `{}` is not supported (expected 1)",
                values[0]
            )));
        }
        let hex_field = |idx: usize, len: usize| -> Result<String, TokenError> {
            let v = values[idx];
            if v.len() != len || !v.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')) {
                return Err(bad(format!(
                    "line {} (`{}`): expected {len} lowercase hex digits (a full-length id, never a prefix), found `{v}`",
                    idx + 1,
                    expected[idx]
                )));
            }
            Ok(v.to_string())
        };
        let pull = canonical_u64(values[3]).ok_or_else(|| {
            bad(format!(
                "line 4 (`pull`): expected a number, found `{}`",
                values[3]
            ))
        })?;
        let decision = match values[8] {
            "approve" => Verdict::Approve,
            "reject" => Verdict::Reject,
            other => {
                return Err(bad(format!(
                    "line 9 (`decision`): expected `approve` or `reject`, found `{other}`"
                )))
            }
        };
        let time = |idx: usize| {
            parse_rfc3339(values[idx])
                .map_err(|e| bad(format!("line {} (`{}`): {e}", idx + 1, expected[idx])))
        };
        let checkpoint = match values.get(12) {
            None => None,
            Some(v) => {
                let (size, root) = v.split_once(' ').ok_or_else(|| {
                    bad(format!(
                        "line 13 (`checkpoint`): expected `<size> <root hex>`, found `{v}`"
                    ))
                })?;
                let size = canonical_u64(size).ok_or_else(|| {
                    bad(format!("line 13 (`checkpoint`): `{size}` is not a size"))
                })?;
                if root.len() != 64 || !root.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
                {
                    return Err(bad(format!(
                        "line 13 (`checkpoint`): expected a 64-digit lowercase hex root, found `{root}`"
                    )));
                }
                Some(SeenCheckpoint {
                    size,
                    root: root.to_string(),
                })
            }
        };
        let payload = Payload {
            repository: values[1].to_string(),
            proposal: values[2].to_string(),
            pull,
            base: hex_field(4, 40)?,
            head: hex_field(5, 40)?,
            merge_tree: hex_field(6, 40)?,
            policy: hex_field(7, 64)?,
            decision,
            issued: time(9)?,
            expires: time(10)?,
            nonce: hex_field(11, 32)?,
            checkpoint,
        };
        debug_assert_eq!(payload.to_canonical(), text);
        Ok(payload)
    }
}

fn canonical_u64(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|c| c.is_ascii_digit()) || (s.len() > 1 && s.starts_with('0'))
    {
        return None;
    }
    s.parse().ok()
}

/// A token as received: the payload text and the armored signature, not yet judged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawToken {
    pub payload: String,
    pub signature: String,
}

impl RawToken {
    /// The text form carried in a pull-request comment or a commit message.
    pub fn to_text(&self) -> String {
        format!("{}{}", self.payload, self.signature)
    }

    /// Finds every token inside a text (a comment, a commit message), byte for byte: the payload
    /// starts at a line `atelier-approval …` and ends before `-----BEGIN SSH SIGNATURE-----`.
    pub fn extract_all(text: &str) -> Vec<RawToken> {
        let mut found = Vec::new();
        let mut rest = text;
        while let Some(start) = find_line_start(rest, "atelier-approval ") {
            let candidate = &rest[start..];
            let Some(sig_at) = candidate.find(SIG_BEGIN) else {
                break;
            };
            let Some(end_rel) = candidate[sig_at..].find(SIG_END) else {
                break;
            };
            let mut end = sig_at + end_rel + SIG_END.len();
            if candidate[end..].starts_with("\r\n") {
                end += 2;
            } else if candidate[end..].starts_with('\n') {
                end += 1;
            }
            found.push(RawToken {
                payload: candidate[..sig_at].to_string(),
                signature: candidate[sig_at..end].to_string(),
            });
            rest = &candidate[end..];
        }
        found
    }
}

fn find_line_start(text: &str, prefix: &str) -> Option<usize> {
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        if line.starts_with(prefix) {
            return Some(offset);
        }
        offset += line.len();
    }
    None
}

/// A signature that verified: who (by key) signed which payload.
#[derive(Debug, Clone)]
pub struct VerifiedToken {
    pub payload: Payload,
    pub key: KeyData,
    pub fingerprint: String,
}

/// Why a signature was refused; each is a stable gate code.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SignatureError {
    #[error("{0}")]
    Malformed(TokenError),
    #[error("signed for namespace `{found}`, expected `{NAMESPACE}`")]
    WrongNamespace { found: String },
    #[error("signed with a {found} key; approvals must use ed25519")]
    UnsupportedKey { found: String },
    #[error("signed with an OpenSSH certificate ({found}); certificates are not supported: sign with the plain ed25519 key listed in policies/allowed_signers (`ssh-keygen -Y sign -f KEY`, not `-f KEY-cert.pub`)")]
    Certificate { found: String },
    #[error("the signing key {fingerprint} is a small-order ed25519 point, which verifies any message; it is refused")]
    WeakKey { fingerprint: String },
    #[error("the signature does not verify over the payload bytes ({reason})")]
    BadSignature { reason: String },
}

impl SignatureError {
    pub fn code(&self) -> Code {
        match self {
            SignatureError::Malformed(_) => Code::TokenMalformed,
            SignatureError::WrongNamespace { .. } => Code::WrongNamespace,
            SignatureError::UnsupportedKey { .. } | SignatureError::Certificate { .. } => {
                Code::UnsupportedKey
            }
            SignatureError::WeakKey { .. } => Code::WeakKey,
            SignatureError::BadSignature { .. } => Code::BadSignature,
        }
    }
}

impl Coded for SignatureError {
    fn code(&self) -> Option<Code> {
        Some(SignatureError::code(self))
    }
}

/// The `SHA256:…` fingerprint ssh-keygen prints for a key.
pub fn fingerprint(key: &KeyData) -> String {
    key.fingerprint(HashAlg::Sha256).to_string()
}

/// Verifies a received token's signature over its payload bytes. Says nothing about whether
/// the signer is allowed or the payload matches the change: that is the gate's job.
pub fn verify(token: &RawToken) -> Result<VerifiedToken, SignatureError> {
    let payload = Payload::parse(&token.payload).map_err(SignatureError::Malformed)?;
    let sig = SshSig::from_pem(token.signature.as_bytes()).map_err(|e| {
        // ssh-key cannot decode a certificate inside an SSHSIG, so look for one by hand: it is a
        // key Atelier does not support, not a damaged token.
        match certificate_type(&token.signature) {
            Some(found) => SignatureError::Certificate { found },
            None => SignatureError::Malformed(TokenError::BadArmor(e.to_string())),
        }
    })?;
    if sig.namespace() != NAMESPACE {
        return Err(SignatureError::WrongNamespace {
            found: sig.namespace().to_string(),
        });
    }
    let key = sig.public_key().clone();
    if key.algorithm().as_str().ends_with(CERT_SUFFIX) {
        return Err(SignatureError::Certificate {
            found: key.algorithm().to_string(),
        });
    }
    let fingerprint = fingerprint(&key);
    let Some(ed) = key.ed25519() else {
        return Err(SignatureError::UnsupportedKey {
            found: key.algorithm().to_string(),
        });
    };
    if sig.algorithm() != ssh_key::Algorithm::Ed25519 {
        return Err(SignatureError::UnsupportedKey {
            found: sig.algorithm().to_string(),
        });
    }
    let vk = VerifyingKey::from_bytes(&ed.0).map_err(|e| SignatureError::BadSignature {
        reason: format!("the public key is not a valid ed25519 point: {e}"),
    })?;
    if vk.is_weak() {
        return Err(SignatureError::WeakKey { fingerprint });
    }
    let signed =
        SshSig::signed_data(NAMESPACE, sig.hash_alg(), token.payload.as_bytes()).map_err(|e| {
            SignatureError::BadSignature {
                reason: e.to_string(),
            }
        })?;
    let signature =
        Signature::from_slice(sig.signature_bytes()).map_err(|e| SignatureError::BadSignature {
            reason: e.to_string(),
        })?;
    vk.verify_strict(&signed, &signature)
        .map_err(|_| SignatureError::BadSignature {
            reason: "verify_strict failed".into(),
        })?;
    Ok(VerifiedToken {
        payload,
        key,
        fingerprint,
    })
}

/// How OpenSSH certificate key types end (`ssh-ed25519-cert-v01@openssh.com`).
const CERT_SUFFIX: &str = "-cert-v01@openssh.com";

/// The key type of the public key inside an armored SSHSIG when it is a certificate type, read
/// by hand (PROTOCOL.sshsig: "SSHSIG", uint32 version, string publickey, ...; the publickey
/// blob starts with its key type string). `None` for anything else, readable or not.
fn certificate_type(armored: &str) -> Option<String> {
    use base64::Engine;
    let body: String = armored
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .collect();
    let blob = base64::engine::general_purpose::STANDARD
        .decode(body.trim())
        .ok()?;
    let rest = blob.strip_prefix(b"SSHSIG")?.get(4..)?;
    // The first length-prefixed string of `bytes`.
    let string = |bytes: &[u8]| -> Option<Vec<u8>> {
        let len = u32::from_be_bytes(bytes.get(..4)?.try_into().ok()?) as usize;
        Some(bytes.get(4..4usize.checked_add(len)?)?.to_vec())
    };
    let key_type = String::from_utf8(string(&string(rest)?)?).ok()?;
    key_type.ends_with(CERT_SUFFIX).then_some(key_type)
}

/// Signs a payload with an ed25519 key, producing the token text ssh-keygen would produce with
/// `ssh-keygen -Y sign -n atelier-approval` (SHA-512 message hash).
pub fn sign(payload: &Payload, key: &SigningKey) -> RawToken {
    let text = payload.to_canonical();
    let signature = sign_bytes(text.as_bytes(), NAMESPACE, key);
    RawToken {
        payload: text,
        signature,
    }
}

/// An armored SSHSIG over arbitrary bytes (any namespace; tests use this to make wrong-namespace
/// tokens).
pub fn sign_bytes(message: &[u8], namespace: &str, key: &SigningKey) -> String {
    let signed = SshSig::signed_data(namespace, HashAlg::Sha512, message)
        .expect("namespace is non-empty, so the signed-data blob always encodes");
    let raw: Signature = key.sign(&signed);
    let public = KeyData::Ed25519(ssh_key::public::Ed25519PublicKey(
        key.verifying_key().to_bytes(),
    ));
    let ssh_sig = ssh_key::Signature::new(ssh_key::Algorithm::Ed25519, raw.to_bytes().to_vec())
        .expect("a 64-byte ed25519 signature is always valid here");
    SshSig::new(public, namespace, HashAlg::Sha512, ssh_sig)
        .expect("namespace is non-empty")
        .to_pem(LineEnding::LF)
        .expect("encoding an in-memory signature cannot fail")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload() -> Payload {
        Payload {
            repository: "local/demo".into(),
            proposal: "1".into(),
            pull: 1,
            base: "a".repeat(40),
            head: "b".repeat(40),
            merge_tree: "c".repeat(40),
            policy: "d".repeat(64),
            decision: Verdict::Approve,
            issued: 1_795_945_873,
            expires: 1_795_945_873 + 7 * 86_400,
            nonce: "e".repeat(32),
            checkpoint: None,
        }
    }

    #[test]
    fn canonical_round_trip() {
        let mut p = payload();
        assert_eq!(Payload::parse(&p.to_canonical()), Ok(p.clone()));
        p.checkpoint = Some(SeenCheckpoint {
            size: 12,
            root: "f".repeat(64),
        });
        assert_eq!(Payload::parse(&p.to_canonical()), Ok(p));
    }

    #[test]
    fn non_canonical_variants_are_refused() {
        let good = payload().to_canonical();
        let variants = [
            good.replace('\n', "\r\n"),
            good.trim_end().to_string(),
            format!("{good}\n"),
            good.replace(&"a".repeat(40), &"a".repeat(12)),
            good.replace(&"a".repeat(40), &"A".repeat(40)),
            good.replace("pull 1", "pull 01"),
            good.replace("decision approve", "decision yes"),
            good.replace("repository local/demo", "repository  local/demo"),
            good.replacen("proposal 1\npull 1\n", "pull 1\nproposal 1\n", 1),
            good.replace("atelier-approval 1", "atelier-approval 2"),
        ];
        for v in variants {
            assert!(Payload::parse(&v).is_err(), "accepted: {v:?}");
        }
    }

    #[test]
    fn sign_then_verify_and_extract_from_a_comment() {
        let key = SigningKey::from_bytes(&[7; 32]);
        let token = sign(&payload(), &key);
        let comment = format!("LGTM, signed below.\n\n{}\nthanks\n", token.to_text());
        let found = RawToken::extract_all(&comment);
        assert_eq!(found, vec![token.clone()]);
        let verified = verify(&found[0]).expect("verifies");
        assert_eq!(verified.payload, payload());
        let mut tampered = token.clone();
        tampered.payload = tampered
            .payload
            .replace("decision approve", "decision reject");
        assert_eq!(
            verify(&tampered).map(|_| ()).unwrap_err().code(),
            Code::BadSignature
        );
    }

    #[test]
    fn a_certificate_signature_is_an_unsupported_key() {
        use base64::Engine;
        // An SSHSIG whose public key is a certificate; ssh-key cannot decode one, and only the
        // key type matters here (tests/signers_vs_sshkeygen.rs signs with a real certificate).
        let string = |bytes: &[u8]| [&(bytes.len() as u32).to_be_bytes()[..], bytes].concat();
        let cert = [
            string(b"ssh-ed25519-cert-v01@openssh.com"),
            string(&[0; 32]),
            string(&[1; 32]),
        ]
        .concat();
        let blob = [
            &b"SSHSIG"[..],
            &1u32.to_be_bytes(),
            &string(&cert),
            &string(NAMESPACE.as_bytes()),
            &string(b""),
            &string(b"sha512"),
            &string(&string(b"ssh-ed25519")),
        ]
        .concat();
        let body = base64::engine::general_purpose::STANDARD.encode(blob);
        let token = RawToken {
            payload: payload().to_canonical(),
            signature: format!("{SIG_BEGIN}\n{body}\n{SIG_END}\n"),
        };
        let err = verify(&token).map(|_| ()).unwrap_err();
        assert_eq!(err.code(), Code::UnsupportedKey, "{err}");
        assert!(
            err.to_string().contains("ssh-ed25519-cert-v01@openssh.com"),
            "{err}"
        );
        // Damaged armor stays malformed.
        let token = RawToken {
            signature: format!("{SIG_BEGIN}\nAAAA\n{SIG_END}\n"),
            ..token
        };
        assert_eq!(
            verify(&token).map(|_| ()).unwrap_err().code(),
            Code::TokenMalformed
        );
    }

    #[test]
    fn wrong_namespace_is_refused() {
        let key = SigningKey::from_bytes(&[7; 32]);
        let text = payload().to_canonical();
        for ns in ["git", "file"] {
            let token = RawToken {
                payload: text.clone(),
                signature: sign_bytes(text.as_bytes(), ns, &key),
            };
            assert_eq!(
                verify(&token).map(|_| ()).unwrap_err().code(),
                Code::WrongNamespace
            );
        }
    }
}
