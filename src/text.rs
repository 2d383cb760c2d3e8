//! Text as a terminal shows it: which characters change what a line looks like without being
//! seen. `cli` shows them as visible marks (`cli::printable`) and escapes them in JSON; `workflow`
//! refuses them in a title. No IO.
//!
//! Control characters (C0, DEL, C1: `char::is_control`) are the terminal's commands. The
//! characters [`hides`] names are not, but a terminal draws them as nothing or reorders the text
//! around them: a right-to-left override makes a line of a diff show in another order than a
//! compiler reads it ("Trojan Source", CVE-2021-42574), and a zero-width space or a tag character
//! holds text nobody sees.

/// One line of at most `max` characters (line breaks become spaces; a cut ends in `…`).
pub fn clip(s: &str, max: usize) -> String {
    let s = s.replace(['\n', '\r'], " ");
    if s.chars().count() <= max {
        return s;
    }
    let mut out: String = s.chars().take(max - 1).collect();
    out.push('…');
    out
}

/// Whether `c` reorders the text around it or is drawn as nothing: the bidirectional controls
/// (embeddings, overrides, isolates, marks), zero-width and other invisible format characters,
/// the line and paragraph separators, invisible fillers and the tag characters. Variation
/// selectors are not among them (emoji need them; they change a glyph, never the order).
pub fn hides(c: char) -> bool {
    matches!(
        c as u32,
        0x00AD // soft hyphen
            | 0x034F // combining grapheme joiner
            | 0x061C // Arabic letter mark
            | 0x115F | 0x1160 | 0x3164 | 0xFFA0 // Hangul fillers
            | 0x180E // Mongolian vowel separator
            | 0x200B..=0x200F // zero-width space, non-joiner, joiner; LRM, RLM
            | 0x2028..=0x202E // line and paragraph separators; LRE, RLE, PDF, LRO, RLO
            | 0x2060..=0x206F // word joiner, invisible operators; isolates LRI, RLI, FSI, PDI
            | 0xFEFF // zero-width no-break space (byte order mark)
            | 0xFFF9..=0xFFFB // interlinear annotation
            | 0x1D173..=0x1D17A // musical formatting
            | 0xE0000..=0xE007F // tags
    )
}

/// `text` as people may be shown it, on a terminal, a page or in a kept log: every control
/// character but a newline, a tab and a carriage return before a newline as U+FFFD, and every
/// character [`hides`] names as a mark (`<U+202E>`), so that no escape sequence a proposer or a
/// worker wrote reaches a terminal, and nothing hides or reorders the text around it.
pub fn printable(text: &str) -> String {
    let mut chars = text.chars().peekable();
    let mut shown = String::with_capacity(text.len());
    while let Some(c) = chars.next() {
        let harmless = c == '\n' || c == '\t' || (c == '\r' && chars.peek() == Some(&'\n'));
        if c.is_control() && !harmless {
            shown.push('\u{FFFD}');
        } else if hides(c) {
            shown.push_str(&format!("<U+{:04X}>", c as u32));
        } else {
            shown.push(c);
        }
    }
    shown
}

/// A path as a line of text may show it: as it is when every character is visible, else quoted
/// the way git quotes one (`"a\nb"`: C escapes for control characters, `\"` and `\\`, and
/// `\u{…}` for a character [`hides`] names), so that a file name holding a newline cannot add
/// lines of its own to a listing or a diff's header.
pub fn quoted_path(path: &str) -> String {
    if !path.chars().any(|c| c.is_control() || hides(c) || c == '"') {
        return path.to_string();
    }
    let mut out = String::from("\"");
    for c in path.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() || hides(c) => out.push_str(&format!("\\u{{{:04x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::hides;

    #[test]
    fn a_path_with_a_newline_or_a_hidden_character_is_quoted() {
        use super::quoted_path;
        assert_eq!(quoted_path("src/a.rs"), "src/a.rs");
        assert_eq!(
            quoted_path("a\n+++ b/src/gate.rs"),
            "\"a\\n+++ b/src/gate.rs\""
        );
        assert_eq!(quoted_path("x\u{202e}y"), "\"x\\u{202e}y\"");
        assert_eq!(quoted_path("say \"hi\""), "\"say \\\"hi\\\"\"");
    }

    #[test]
    fn bidi_controls_and_invisible_characters_hide_letters_and_emoji_do_not() {
        for c in [
            '\u{202e}',
            '\u{202a}',
            '\u{2066}',
            '\u{2069}',
            '\u{200f}',
            '\u{061c}',
            '\u{200b}',
            '\u{feff}',
            '\u{2028}',
            '\u{e0041}',
        ] {
            assert!(hides(c), "U+{:04X}", c as u32);
        }
        for c in "é ü ß 名前 عربى 🙂 ❤\u{fe0f} → — \u{fffd}".chars() {
            assert!(!hides(c), "U+{:04X}", c as u32);
        }
    }

    #[test]
    fn printable_marks_escape_sequences_and_hidden_characters_and_keeps_lines() {
        assert_eq!(
            super::printable("a\u{1b}[2Jb\r\n\tc\u{202e}d\re"),
            "a\u{FFFD}[2Jb\r\n\tc<U+202E>d\u{FFFD}e"
        );
    }
}
