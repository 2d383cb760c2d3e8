//! What people read, on a terminal and in the browser: whole-output snapshots of the commands,
//! refusals and their exit codes, the live view, the cockpit, the dashboard, and what a hostile
//! name or diff cannot hide or inject there.

mod cockpit;
pub(crate) mod dashboard;
mod dashboard_writes;
mod escapes;
mod help;
mod live;
mod refusals;
mod snapshots;
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
