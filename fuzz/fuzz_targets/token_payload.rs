//! The canonical approval payload: parsing never panics, and a payload that parses re-serialises
//! to exactly the bytes it came from (one decision, one byte sequence).
#![no_main]

use atelier::governance::token::Payload;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(p) = Payload::parse(text) {
        let canonical = p.to_canonical();
        assert_eq!(canonical, text);
        assert_eq!(Payload::parse(&canonical).as_ref(), Ok(&p));
    }
});
