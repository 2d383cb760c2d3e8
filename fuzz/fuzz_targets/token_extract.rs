//! Approval tokens found in arbitrary text (a pull-request comment, a commit message): extraction,
//! payload parsing and signature verification must never panic, and extraction is faithful.
#![no_main]

use atelier::governance::token::{self, Payload, RawToken};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let tokens = RawToken::extract_all(text);
    let mut from = 0;
    for tok in &tokens {
        // A token is a verbatim slice of the text, later than the one before it.
        let whole = tok.to_text();
        let at = text[from..]
            .find(&whole)
            .expect("an extracted token is a slice of the text");
        from += at + whole.len();
        assert!(tok.payload.starts_with("atelier-approval "));
        // Re-serialised and re-extracted, it is the same token.
        assert_eq!(RawToken::extract_all(&whole), vec![tok.clone()]);
        // A payload that parses is canonical: it re-serialises to the same bytes.
        let parsed = Payload::parse(&tok.payload);
        if let Ok(p) = &parsed {
            assert_eq!(p.to_canonical(), tok.payload);
        }
        if let Ok(v) = token::verify(tok) {
            assert_eq!(Some(&v.payload), parsed.as_ref().ok());
        }
    }
});
