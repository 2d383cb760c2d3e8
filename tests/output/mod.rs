//! TODO story doc
//! (from review_escapes)

mod cockpit;
mod dashboard;
mod escapes;
mod live;
mod refusals;
mod terminal;

/// Characters that reorder or hide text on screen without being control characters
/// ("Trojan Source", CVE-2021-42574): right-to-left override, isolates, zero-width space.
pub(crate) const HIDING: [char; 5] = ['\u{202e}', '\u{2066}', '\u{2069}', '\u{200b}', '\u{feff}'];

pub(crate) fn assert_none(text: &str, chars: &[char], what: &str) {
    for c in chars {
        assert!(
            !text.contains(*c),
            "{what} holds U+{:04X}: {text:?}",
            *c as u32
        );
    }
}
