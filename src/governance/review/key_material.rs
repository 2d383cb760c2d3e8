//! Key material by its encoding, not by its armour: the `secrets` reviewer's reading of base64.
//!
//! A private key committed without its `-----BEGIN …-----` lines is still recognisable by what
//! its bytes are: an OpenSSH key body opens with the base64 of `openssh-key-v1`, a PEM body
//! (PKCS#1, PKCS#8, SEC1, DSA) decodes to a DER SEQUENCE whose first element is a version
//! INTEGER, and an encrypted PKCS#8 key names PBES2. A public key or certificate (a SEQUENCE
//! opening with another SEQUENCE) is left alone, unless more base64 follows it than its DER
//! length declares. A block of random-looking base64 lines that decodes to none of these is
//! reported as possible key material.

use base64::Engine as _;

/// What `b3BlbnNzaC1rZXktdjE` (the base64 of `openssh-key-v1`) opens; spelled in two pieces so
/// that this file holds no key-shaped run of its own.
const OPENSSH_BODY: &str = concat!("b3BlbnNzaC1r", "ZXktdjE");

/// The DER OID prefix of PKCS#5 (PBES2 and friends): an encrypted private key.
const PKCS5_OID: &[u8] = &[0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x05];

/// Key material found on added lines: (the line, what it is).
pub fn find(added: &[(u32, &str)]) -> Vec<(u32, String)> {
    let mut out = Vec::new();
    let mut block: Vec<(u32, String)> = Vec::new();
    let flush = |block: &mut Vec<(u32, String)>, out: &mut Vec<(u32, String)>| {
        if block.len() >= 2 {
            if let Some(what) = judge_block(block) {
                out.push((block[0].0, what));
            }
        }
        block.clear();
    };
    for (n, line) in added {
        // Runs on the line that are themselves a key's opening.
        for run in runs(line) {
            if let Some(what) = opening(run) {
                out.push((*n, what.to_string()));
                break;
            }
        }
        let body = line
            .trim()
            .trim_matches(['"', '\'', ',', ';', '`'])
            .trim_end_matches("\\n");
        let consecutive = block.last().is_none_or(|(m, _)| *m + 1 == *n);
        if body.len() >= 40 && body.chars().all(b64) && consecutive {
            block.push((*n, body.to_string()));
        } else {
            flush(&mut block, &mut out);
            if body.len() >= 40 && body.chars().all(b64) {
                block.push((*n, body.to_string()));
            }
        }
    }
    flush(&mut block, &mut out);
    out.dedup_by(|a, b| a.0 == b.0);
    out
}

fn b64(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '+' || c == '/' || c == '='
}

/// Maximal base64 runs of 20 characters or more on a line.
fn runs(line: &str) -> Vec<&str> {
    line.split(|c: char| !b64(c))
        .filter(|r| r.len() >= 20)
        .collect()
}

/// The first bytes a base64 run decodes to (whole groups of four characters only).
fn prefix_bytes(run: &str, chars: usize) -> Option<Vec<u8>> {
    let n = run.len().min(chars) / 4 * 4;
    base64::engine::general_purpose::STANDARD_NO_PAD
        .decode(run[..n].trim_end_matches('='))
        .ok()
}

/// A DER header: the SEQUENCE's declared total length and where its content starts.
fn der_sequence(bytes: &[u8]) -> Option<(usize, usize)> {
    if bytes.first() != Some(&0x30) {
        return None;
    }
    let first = *bytes.get(1)? as usize;
    if first < 0x80 {
        return Some((first + 2, 2));
    }
    let n = first & 0x7f;
    if !(1..=2).contains(&n) {
        return None;
    }
    let len = bytes
        .get(2..2 + n)?
        .iter()
        .fold(0usize, |a, b| a << 8 | *b as usize);
    Some((len + 2 + n, 2 + n))
}

/// What a run is, when it opens a private key.
fn opening(run: &str) -> Option<&'static str> {
    if run.starts_with(OPENSSH_BODY) {
        return Some("an OpenSSH private key body (base64 of openssh-key-v1)");
    }
    let bytes = prefix_bytes(run, 32)?;
    let (_, at) = der_sequence(&bytes)?;
    let rest = bytes.get(at..)?;
    // A version INTEGER 0 or 1 first: PKCS#1, PKCS#8, SEC1 and DSA private keys.
    if rest.len() >= 3 && rest[0] == 0x02 && rest[1] == 0x01 && rest[2] <= 1 {
        return Some("a private key's DER body (PEM without its armour)");
    }
    // An encrypted PKCS#8 key: a SEQUENCE, then a SEQUENCE naming PKCS#5.
    let (_, inner) = der_sequence(rest)?;
    rest.get(inner..)
        .filter(|r| r.starts_with(PKCS5_OID))
        .map(|_| "an encrypted private key's DER body (PEM without its armour)")
}

/// Whether a block of base64 lines is key material: not when it is exactly a public key or a
/// certificate (a SEQUENCE opening with a SEQUENCE, no longer than it declares), nor when it is
/// not random-looking.
fn judge_block(block: &[(u32, String)]) -> Option<String> {
    let joined: String = block.iter().map(|(_, l)| l.as_str()).collect();
    if opening(&joined).is_some() {
        // Reported on its line already.
        return None;
    }
    if let Some(bytes) = prefix_bytes(&joined, 16) {
        if let Some((total, at)) = der_sequence(&bytes) {
            let decoded = joined.trim_end_matches('=').len() * 3 / 4;
            if bytes.get(at) == Some(&0x30) && decoded <= total + 2 {
                return None;
            }
        }
    }
    let distinct = {
        let mut c: Vec<char> = joined.chars().collect();
        c.sort_unstable();
        c.dedup();
        c.len()
    };
    (distinct >= 40 && joined.chars().any(|c| c.is_ascii_digit())).then(|| {
        format!(
            "{} lines of random-looking base64 ({} characters): key material without its armour?",
            block.len(),
            joined.len()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(bytes: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    /// Pseudo-random bytes.
    fn bytes(n: usize, seed: u64) -> Vec<u8> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (x >> 33) as u8
            })
            .collect()
    }

    fn lines(s: &str) -> Vec<String> {
        s.as_bytes()
            .chunks(64)
            .map(|c| String::from_utf8_lossy(c).into_owned())
            .collect()
    }

    fn found(text: &[String]) -> Vec<(u32, String)> {
        let added: Vec<(u32, &str)> = text
            .iter()
            .enumerate()
            .map(|(i, l)| (i as u32 + 1, l.as_str()))
            .collect();
        find(&added)
    }

    fn der(header: &[u8], body_len: usize) -> Vec<u8> {
        let len = header.len() + body_len - 4;
        let mut v = vec![0x30, 0x82, (len >> 8) as u8, len as u8];
        v.extend_from_slice(&header[4..]);
        v.extend(bytes(body_len, 9));
        v
    }

    #[test]
    fn private_key_bodies_are_found_by_their_encoding() {
        // OpenSSH: the body opens with `openssh-key-v1\0`.
        let mut ssh = b"openssh-key-v1\0".to_vec();
        ssh.extend(bytes(300, 1));
        let f = found(&lines(&b64(&ssh)));
        assert!(f.len() == 1 && f[0].1.contains("OpenSSH"), "{f:?}");
        // PKCS#8 and PKCS#1: a version INTEGER first.
        for header in [
            &[0x30, 0x82, 0, 0, 0x02, 0x01, 0x00, 0x30, 0x0d][..],
            &[0x30, 0x82, 0, 0, 0x02, 0x01, 0x00, 0x02, 0x82][..],
        ] {
            let f = found(&lines(&b64(&der(header, 600))));
            assert!(f.len() == 1 && f[0].1.contains("DER"), "{f:?}");
        }
        // In one string literal, `\n`-joined.
        let one = format!(
            "let k = \"{}\";",
            b64(&der(&[0x30, 0x82, 0, 0, 2, 1, 0, 2], 100))
        );
        assert_eq!(found(&[one]).len(), 1);
        // Random base64 lines with no header at all (the first line dropped).
        let f = found(&lines(&b64(&bytes(300, 3))));
        assert!(f.len() == 1 && f[0].1.contains("random-looking"), "{f:?}");
    }

    #[test]
    fn public_keys_certificates_and_prose_are_not_key_material() {
        // A public key: SEQUENCE { SEQUENCE { OID rsaEncryption } BIT STRING }.
        let spki = der(&[0x30, 0x82, 0, 0, 0x30, 0x0d, 0x06, 0x09], 280);
        assert_eq!(found(&lines(&b64(&spki))), []);
        // …but not with a private key's body appended after it.
        let mut smuggled = b64(&spki);
        smuggled.push_str(&b64(&bytes(600, 4)));
        assert_eq!(found(&lines(&smuggled)).len(), 1);
        let ed25519 = format!(
            "ssh-ed25519 {} user@host",
            b64(&{
                let mut v = b"\0\0\0\x0bssh-ed25519\0\0\0\x20".to_vec();
                v.extend(bytes(32, 5));
                v
            })
        );
        assert_eq!(found(&[ed25519]), []);
        let prose = vec![
            "The reviewer reads the environment and the configuration files first.".to_string(),
            "Then it compares them with what the base held, line by line, carefully.".to_string(),
        ];
        assert_eq!(found(&prose), []);
        let hex = vec!["ab".repeat(32), "cd".repeat(32)];
        assert_eq!(found(&hex), []);
    }
}
