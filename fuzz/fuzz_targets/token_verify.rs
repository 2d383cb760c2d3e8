//! Signature verification of an approval token whose payload is canonical, so the fuzzer spends
//! its time in the SSHSIG: the first byte picks the form, the rest is either the armoured text
//! (`-----BEGIN SSH SIGNATURE-----` …) or the raw SSHSIG blob, which this target armours.
//! Verification never panics, and a token made up here never verifies (no key signed it).
#![no_main]

use atelier::governance::token::{self, RawToken};
use base64::Engine as _;
use libfuzzer_sys::fuzz_target;

const PAYLOAD: &str = "atelier-approval 1
repository fuzz/repo
proposal 1
pull 1
base 1111111111111111111111111111111111111111
head 2222222222222222222222222222222222222222
merge-tree 3333333333333333333333333333333333333333
policy 4444444444444444444444444444444444444444444444444444444444444444
decision approve
issued 2026-11-29T10:00:00Z
expires 2026-12-06T10:00:00Z
nonce 0123456789abcdef0123456789abcdef
";

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let signature = if mode & 1 == 0 {
        let Ok(text) = std::str::from_utf8(rest) else {
            return;
        };
        text.to_string()
    } else {
        let b64 = base64::engine::general_purpose::STANDARD.encode(rest);
        let mut armour = String::from("-----BEGIN SSH SIGNATURE-----\n");
        for chunk in b64.as_bytes().chunks(70) {
            armour.push_str(std::str::from_utf8(chunk).expect("base64 is ASCII"));
            armour.push('\n');
        }
        armour.push_str("-----END SSH SIGNATURE-----\n");
        armour
    };
    let raw = RawToken {
        payload: PAYLOAD.to_string(),
        signature,
    };
    match token::verify(&raw) {
        // Only a seed signed over exactly this payload can verify; then it must say so faithfully.
        Ok(v) => assert_eq!(v.payload.to_canonical(), PAYLOAD),
        Err(e) => {
            let _ = e.code();
            let _ = e.to_string();
        }
    }
});
