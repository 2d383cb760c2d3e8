//! An agent reviewer's answer (its whole output, chatter included): reading it never panics, and
//! an answer that reads is bounded and attributed: every finding names the given reviewer, at
//! most `MAX_FINDINGS` plus the truncation and verdict notes, texts capped, and the verdict is
//! never milder than the findings imply.
#![no_main]

use atelier::governance::review::answer::{parse_answer, MAX_FINDINGS, MAX_NAME, MAX_TEXT};
use atelier::governance::review::critic;
use libfuzzer_sys::fuzz_target;

const NAME: &str = "adversary";

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(answer) = parse_answer(NAME, text) else {
        return;
    };
    assert!(answer.findings.len() <= MAX_FINDINGS + 2);
    for f in &answer.findings {
        assert_eq!(f.reviewer, NAME);
        // Capped texts may carry one `…` past the cap.
        assert!(f.message.chars().count() <= MAX_TEXT + 1);
        assert!(f.hint.chars().count() <= MAX_TEXT + 1);
        assert!(f.category.chars().count() <= MAX_NAME + 1);
        if let Some(file) = &f.file {
            assert!(file.chars().count() <= MAX_NAME + 1);
        }
        assert!(!f
            .message
            .chars()
            .any(|c| c.is_control() && c != '\n' && c != '\t'));
    }
    assert!(critic(&answer.findings) >= answer.verdict);
});
