//! `policies/allowed_signers` in OpenSSH's format: parsing never panics, every entry has a
//! principal and a line number inside the file, and lookups by an entry's own key find it.
#![no_main]

use atelier::governance::allowed_signers;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(signers) = allowed_signers::parse(text) else {
        return;
    };
    let lines = text.split('\n').count();
    for entry in &signers.entries {
        assert!(!entry.principal.is_empty());
        assert!(entry.line >= 1 && entry.line <= lines);
        let found = signers.find(entry.key.key_data());
        assert!(found.iter().any(|e| e.line == entry.line));
        if let Some(ns) = &entry.namespaces {
            for n in ns {
                assert!(entry.allows_namespace(n));
            }
        }
        let _ = entry.validity_at(0);
    }
    let _ = signers.principals();
});
