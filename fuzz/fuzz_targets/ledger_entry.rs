//! The ledger as another clone or a merge commit carries it: each line of an
//! `entries/NNNNNNNN.jsonl` file is an `Entry`, and a merge commit's message may carry an
//! `Atelier-Ledger:` anchor trailer. Parsing never panics; an entry that parses serialises and
//! parses back to the same entry; an anchor's trailer reads back as the same anchor.
#![no_main]

use atelier::audit::ledger::{Anchor, Entry};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for line in text.lines() {
        if let Ok(entry) = Entry::parse(line) {
            let again = serde_json::to_string(&entry).expect("an entry serialises");
            assert_eq!(Entry::parse(&again).as_ref(), Ok(&entry));
            let _ = entry.event.proposal();
            let _ = entry.event.is_approvals_only();
        }
    }
    if let Some(anchor) = Anchor::parse(text) {
        assert_eq!(Anchor::parse(&anchor.trailer()), Some(anchor));
    }
});
