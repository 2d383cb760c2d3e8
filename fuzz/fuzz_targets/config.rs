//! `atelier.toml`: parsing never panics, and a configuration that parses serialises to TOML that
//! parses back to the same configuration.
#![no_main]

use atelier::config::Config;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(config) = Config::parse("atelier.toml", text) else {
        return;
    };
    let again = toml::to_string(&config).expect("a configuration serialises");
    let reparsed = Config::parse("atelier.toml", &again)
        .unwrap_or_else(|e| panic!("{e}\n--- serialised:\n{again}"));
    assert_eq!(reparsed, config);
});
