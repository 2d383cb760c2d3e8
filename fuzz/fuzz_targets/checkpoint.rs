//! The ledger's signed checkpoint (C2SP signed note). Parsing and verifying never panic; a note
//! that parses is canonical (it begins with exactly the body its checkpoint serialises to, so
//! every byte is signed or checked); a parsed checkpoint signed again verifies as itself; and a
//! note verifies under the fixed key only if it parses to the same checkpoint.
#![no_main]

use atelier::audit::checkpoint::Checkpoint;
use ed25519_dalek::SigningKey;
use libfuzzer_sys::fuzz_target;

const NAME: &str = "atelier-gate";

fuzz_target!(|data: &[u8]| {
    let Ok(note) = std::str::from_utf8(data) else {
        return;
    };
    // The seeds in fuzz/seeds/checkpoint are signed by this key.
    let key = SigningKey::from_bytes(&[7; 32]);
    let keys = [key.verifying_key()];
    let parsed = Checkpoint::parse_unverified(note);
    let verified = Checkpoint::verify(note, NAME, &keys);
    if let Ok(v) = &verified {
        assert_eq!(parsed.as_ref(), Ok(v));
    }
    let Ok(cp) = parsed else {
        return;
    };
    assert!(note.starts_with(&cp.body()));
    let signed = cp.sign(NAME, &key);
    assert_eq!(Checkpoint::verify(&signed, NAME, &keys), Ok(cp.clone()));
    // A different name or key does not verify the note signed here.
    assert!(Checkpoint::verify(&signed, "someone-else", &keys).is_err());
});
