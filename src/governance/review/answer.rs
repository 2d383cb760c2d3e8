//! What an agent reviewer says, read strictly, and who may review whom. Pure: the reviewer's
//! output arrives as text, and roles' families as plain data. `agent::reviewer` runs the
//! reviewers and calls `parse_answer` on what they print; the gate's caller applies
//! `distinct_family` when the policy asks for it.
//!
//! An answer is one JSON object:
//!
//! ```json
//! {"verdict": "approve|revise|block",
//!  "findings": [{"severity": "blocking|major|minor", "category": "…", "file": "…",
//!                "line": 12, "message": "…", "hint": "…"}]}
//! ```
//!
//! `file` and `line` are optional; every other field is required, and any other field is
//! refused. The object may be the whole output, the last ```` ```json ```` fenced block, or the
//! last top-level `{…}` in the output (agent programs print chatter around it).
//!
//! **Verdict and findings.** The panel's critic (`super::critic`) decides from findings only,
//! so a reviewer's verdict counts as the maximum of what it said and what its findings imply:
//! `approve` with a blocking finding is a `block`, and a `block` (or `revise`) stricter than the
//! findings adds one finding of category `verdict` at that severity, so that
//! `critic(&answer.findings)` is `max(verdict, critic(findings))`.

use serde::Serialize;
use serde_json::Value;

use super::{critic, Finding, Severity, Verdict};

/// The most findings one answer keeps (the most severe first); a note says how many were dropped.
pub const MAX_FINDINGS: usize = 50;
/// The most characters kept of a message or a hint.
pub const MAX_TEXT: usize = 2000;
/// The most characters kept of a category or a file path.
pub const MAX_NAME: usize = 200;

/// A reviewer's answer, checked. `findings` already carry the reviewer's name, capped texts, and
/// the `verdict` finding described in the module's header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Answer {
    pub verdict: Verdict,
    pub findings: Vec<Finding>,
}

/// The answer format, as the reviewer's prompt states it.
pub const SCHEMA: &str = r#"Answer with one JSON object and nothing after it:
{"verdict": "approve" | "revise" | "block",
 "findings": [{"severity": "blocking" | "major" | "minor",
               "category": "a short kebab-case word, e.g. weakened-test",
               "file": "path/in/the/change (optional)",
               "line": 12 (optional, 1-based),
               "message": "what is wrong, in one or two sentences",
               "hint": "what would resolve it"}]}
`block` means the change must not merge as it is; `revise` means it needs changes; `approve`
means you found nothing that should stop it. Use "findings": [] when there are none. No other
fields."#;

/// Reads a reviewer's output. `reviewer` names every finding, whatever the answer says.
pub fn parse_answer(reviewer: &str, text: &str) -> Result<Answer, String> {
    let value = extract(text)?;
    let Value::Object(map) = value else {
        return Err(format!(
            "the answer is JSON but not an object (found {}): expected {{\"verdict\": …, \"findings\": […]}}",
            kind_of(&value)
        ));
    };
    if let Some(k) = map.keys().find(|k| *k != "verdict" && *k != "findings") {
        return Err(format!(
            "unknown field `{}`: the answer has only `verdict` and `findings`",
            clip(k, 40)
        ));
    }
    let verdict = match map.get("verdict") {
        Some(Value::String(s)) => match s.as_str() {
            "approve" => Verdict::Approve,
            "revise" => Verdict::Revise,
            "block" => Verdict::Block,
            other => {
                return Err(format!(
                    "verdict `{}` is not one of approve, revise, block",
                    clip(other, 40)
                ))
            }
        },
        Some(v) => return Err(format!("verdict: expected a string, found {}", kind_of(v))),
        None => return Err("`verdict` is missing: expected approve, revise or block".into()),
    };
    let list = match map.get("findings") {
        Some(Value::Array(list)) => list,
        Some(v) => return Err(format!("findings: expected a list, found {}", kind_of(v))),
        None => return Err("`findings` is missing: use [] when there are none".into()),
    };
    let mut findings = list
        .iter()
        .enumerate()
        .map(|(i, v)| finding(reviewer, v).map_err(|e| format!("findings[{i}]: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    if findings.len() > MAX_FINDINGS {
        let total = findings.len();
        // Stable: among equals, the reviewer's order is kept.
        findings.sort_by_key(|f| std::cmp::Reverse(f.severity));
        findings.truncate(MAX_FINDINGS);
        findings.push(note(
            reviewer,
            Severity::Minor,
            "truncated",
            format!("the reviewer gave {total} findings; the {MAX_FINDINGS} most severe are kept"),
            "ask the reviewer for fewer, more specific findings",
        ));
    }
    let implied = critic(&findings);
    let stricter = match (verdict, implied) {
        (Verdict::Block, Verdict::Revise | Verdict::Approve) => Some(Severity::Blocking),
        (Verdict::Revise, Verdict::Approve) => Some(Severity::Major),
        _ => None,
    };
    if let Some(severity) = stricter {
        findings.push(note(
            reviewer,
            severity,
            "verdict",
            format!(
                "the reviewer answered `{}` without a finding that severe",
                verdict_name(verdict)
            ),
            "read the reviewer's findings; run the review again if the verdict is unexplained",
        ));
    }
    Ok(Answer { verdict, findings })
}

/// The finding that stands for a reviewer that gave no usable answer: never an approval.
pub fn failed(reviewer: &str, why: &str) -> Finding {
    note(
        reviewer,
        Severity::Major,
        "reviewer-failed",
        format!("the reviewer gave no usable answer: {why}"),
        "run the review again; if it keeps failing, check the reviewer's role in atelier.toml (backend, command, key variable) and its template",
    )
}

/// [`failed`] on an agent's change: blocking, since the change may be what made the reviewer
/// fail, and an unjudged agent change is not merged.
pub fn failed_on_agent_change(reviewer: &str, why: &str) -> Finding {
    note(
        reviewer,
        Severity::Blocking,
        "reviewer-failed",
        format!("the reviewer gave no usable answer on an agent's change, which was therefore not judged: {why}"),
        "run the review again; if it keeps failing, find what in the change stops the reviewer (a path too deep to copy, a file too large) or check the reviewer's role in atelier.toml; the constitution quorum can overrule",
    )
}

fn note(
    reviewer: &str,
    severity: Severity,
    category: &str,
    message: String,
    hint: &str,
) -> Finding {
    Finding {
        reviewer: reviewer.to_string(),
        severity,
        category: category.to_string(),
        file: None,
        line: None,
        message: clean(&message, MAX_TEXT),
        hint: hint.to_string(),
    }
}

fn verdict_name(v: Verdict) -> &'static str {
    match v {
        Verdict::Approve => "approve",
        Verdict::Revise => "revise",
        Verdict::Block => "block",
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

fn finding(reviewer: &str, v: &Value) -> Result<Finding, String> {
    const FIELDS: &[&str] = &["severity", "category", "file", "line", "message", "hint"];
    let Value::Object(map) = v else {
        return Err(format!("expected an object, found {}", kind_of(v)));
    };
    if let Some(k) = map.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(format!(
            "unknown field `{}`: a finding has {}",
            clip(k, 40),
            FIELDS.join(", ")
        ));
    }
    let text = |field: &str| -> Result<Option<&str>, String> {
        match map.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.as_str())),
            Some(v) => Err(format!("{field}: expected a string, found {}", kind_of(v))),
        }
    };
    let required = |field: &str| -> Result<&str, String> {
        text(field)?.ok_or_else(|| format!("`{field}` is missing"))
    };
    let severity = match required("severity")? {
        "blocking" => Severity::Blocking,
        "major" => Severity::Major,
        "minor" => Severity::Minor,
        other => {
            return Err(format!(
                "severity `{}` is not one of blocking, major, minor",
                clip(other, 40)
            ))
        }
    };
    let category = clean(required("category")?, MAX_NAME);
    if category.trim().is_empty() {
        return Err("`category` is empty".into());
    }
    let message = clean(required("message")?, MAX_TEXT);
    if message.trim().is_empty() {
        return Err("`message` is empty".into());
    }
    let hint = clean(required("hint")?, MAX_TEXT);
    let file = text("file")?.map(|f| clean(f, MAX_NAME));
    let line = match map.get("line") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => match n.as_u64() {
            Some(l) if l >= 1 && l <= u64::from(u32::MAX) => Some(l as u32),
            _ => return Err(format!("line: expected a line number from 1, found {n}")),
        },
        Some(v) => return Err(format!("line: expected a number, found {}", kind_of(v))),
    };
    Ok(Finding {
        reviewer: reviewer.to_string(),
        severity,
        category,
        file,
        line,
        message,
        hint,
    })
}

/// At most `max` characters, without control characters other than newlines and tabs (so an
/// answer cannot rewrite the terminal of whoever reads the findings).
fn clean(s: &str, max: usize) -> String {
    let mut out: String = s
        .chars()
        .filter(|c| !c.is_control() || *c == '\n' || *c == '\t')
        .take(max)
        .collect();
    if s.chars().count() > max {
        out.push('…');
    }
    out
}

fn clip(s: &str, max: usize) -> String {
    clean(s, max).replace('\n', " ")
}

/// The JSON value the output holds: the whole output, else the last fenced `json` block that
/// parses, else the last top-level object that parses.
fn extract(text: &str) -> Result<Value, String> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err("the output is empty: expected a JSON object".into());
    }
    if let Ok(v) = serde_json::from_str::<Value>(trimmed) {
        return Ok(v);
    }
    for block in fenced(text).into_iter().rev() {
        if let Ok(v) = serde_json::from_str::<Value>(block.trim()) {
            return Ok(v);
        }
    }
    for span in objects(text).into_iter().rev() {
        if let Ok(v) = serde_json::from_str::<Value>(span) {
            return Ok(v);
        }
    }
    let tail: String = {
        let chars: Vec<char> = trimmed.chars().collect();
        chars[chars.len().saturating_sub(200)..].iter().collect()
    };
    Err(format!(
        "no JSON object found in the output (as a whole, in a ```json block, or as the last {{…}}); it ends with: {}",
        clip(&tail, 200)
    ))
}

/// The bodies of fenced blocks whose info string is `json` or empty.
fn fenced(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find("```") {
        let after = &rest[open + 3..];
        let Some(eol) = after.find('\n') else { break };
        let info = after[..eol].trim();
        let body = &after[eol + 1..];
        let Some(close) = body.find("```") else { break };
        if info.is_empty() || info.eq_ignore_ascii_case("json") {
            out.push(&body[..close]);
        }
        rest = &body[close + 3..];
    }
    out
}

/// Balanced top-level `{…}` spans, with JSON strings inside them skipped. An opening brace in
/// chatter that never closes would swallow the rest, so the scan restarts after it (a few times
/// at most: the scan stays linear in the output's length).
fn objects(text: &str) -> Vec<&str> {
    const RESTARTS: usize = 8;
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut from = 0;
    for _ in 0..=RESTARTS {
        let mut depth = 0usize;
        let mut start = 0;
        let mut in_string = false;
        let mut escaped = false;
        for (i, &b) in bytes.iter().enumerate().skip(from) {
            if in_string {
                match (escaped, b) {
                    (true, _) => escaped = false,
                    (false, b'\\') => escaped = true,
                    (false, b'"') => in_string = false,
                    _ => {}
                }
                continue;
            }
            match b {
                b'"' if depth > 0 => in_string = true,
                b'{' => {
                    if depth == 0 {
                        start = i;
                    }
                    depth += 1;
                }
                b'}' if depth > 0 => {
                    depth -= 1;
                    if depth == 0 {
                        out.push(&text[start..=i]);
                    }
                }
                _ => {}
            }
        }
        if depth == 0 {
            break;
        }
        from = start + 1;
    }
    out
}

/// A model's maker and its family, as a role declares them (`provider = "anthropic"`,
/// `family = "claude"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Family {
    pub provider: String,
    pub family: String,
}

/// `[review] distinct_family`: a reviewer must differ from the proposer in both provider and
/// model family (ASCII case-insensitive). Same provider with another family fails, another
/// provider with the same family fails, and an unknown proposer fails closed.
pub fn distinct_family(proposer: Option<&Family>, reviewer: &Family) -> Result<(), String> {
    let norm = |s: &str| s.trim().to_ascii_lowercase();
    let (rp, rf) = (norm(&reviewer.provider), norm(&reviewer.family));
    if rp.is_empty() || rf.is_empty() {
        return Err(
            "the reviewer's role does not declare its provider and family: set both on its role in atelier.toml"
                .into(),
        );
    }
    let Some(p) = proposer else {
        return Err(
            "the proposer's provider and model family are unknown, so the reviewer cannot be shown to differ: declare `provider` and `family` on the role that wrote the change"
                .into(),
        );
    };
    let (pp, pf) = (norm(&p.provider), norm(&p.family));
    if pp.is_empty() || pf.is_empty() {
        return Err(
            "the proposer's role does not declare both its provider and family, so the reviewer cannot be shown to differ"
                .into(),
        );
    }
    match (pp == rp, pf == rf) {
        (false, false) => Ok(()),
        (true, true) => Err(format!(
            "the reviewer is the proposer's own model ({rp}/{rf}): use a reviewer from another provider and family"
        )),
        (true, false) => Err(format!(
            "the reviewer's provider `{rp}` is the proposer's (families {rf} and {pf}): use another provider"
        )),
        (false, true) => Err(format!(
            "the reviewer's family `{rf}` is the proposer's (providers {rp} and {pp}): use another model family"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OK: &str = r#"{"verdict": "block", "findings": [{"severity": "blocking", "category": "weakened-test", "file": "src/a.rs", "line": 3, "message": "an assertion was removed", "hint": "restore it"}]}"#;

    #[test]
    fn the_answer_is_found_in_chatter_and_fences() {
        let cases: &[(&str, String)] = &[
            ("whole", OK.to_string()),
            ("whole, padded", format!("\n\n  {OK}\n")),
            (
                "fenced",
                format!("I looked at it.\n```json\n{OK}\n```\nDone {{ really }}.\n"),
            ),
            (
                "last fenced wins",
                format!("```json\n{{\"verdict\": \"approve\"}}\n```\nthen\n```json\n{OK}\n```\n"),
            ),
            (
                "bare fence",
                format!("```\n{OK}\n```"),
            ),
            (
                "last object in chatter",
                format!("Reading {{the schema}}: {{\"verdict\": \"approve\", \"findings\": []}} and finally\n{OK}\nbye"),
            ),
            (
                "an unclosed brace in chatter before",
                format!("a stray {{ here, then\n{OK}"),
            ),
            (
                "braces and quotes inside strings",
                OK.replace("an assertion was removed", "removed `assert!(x == \\\"}\\\")` {"),
            ),
        ];
        for (name, text) in cases {
            let a = parse_answer("adversary", text).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(a.verdict, Verdict::Block, "{name}");
            assert_eq!(a.findings.len(), 1, "{name}");
            assert_eq!(a.findings[0].severity, Severity::Blocking, "{name}");
            assert_eq!(a.findings[0].file.as_deref(), Some("src/a.rs"), "{name}");
            assert_eq!(a.findings[0].line, Some(3), "{name}");
        }
    }

    #[test]
    fn malformed_answers_are_refused_with_a_reason() {
        let f = |extra: &str| {
            format!(
                r#"{{"verdict": "revise", "findings": [{{"severity": "major", "category": "c", "message": "m", "hint": "h"{extra}}}]}}"#
            )
        };
        let cases: Vec<(&str, String, &str)> = vec![
            ("empty", "  \n".into(), "empty"),
            ("prose", "Looks good to me!".into(), "no JSON object"),
            ("array", "[1, 2]".into(), "not an object"),
            ("string", "\"approve\"".into(), "not an object"),
            (
                "no verdict",
                r#"{"findings": []}"#.into(),
                "`verdict` is missing",
            ),
            (
                "bad verdict",
                r#"{"verdict": "lgtm", "findings": []}"#.into(),
                "verdict `lgtm`",
            ),
            (
                "verdict type",
                r#"{"verdict": 1, "findings": []}"#.into(),
                "expected a string",
            ),
            (
                "no findings",
                r#"{"verdict": "approve"}"#.into(),
                "`findings` is missing",
            ),
            (
                "findings type",
                r#"{"verdict": "approve", "findings": {}}"#.into(),
                "expected a list",
            ),
            (
                "extra field",
                r#"{"verdict": "approve", "findings": [], "summary": "x"}"#.into(),
                "unknown field `summary`",
            ),
            (
                "finding not object",
                r#"{"verdict": "approve", "findings": ["x"]}"#.into(),
                "findings[0]: expected an object",
            ),
            (
                "bad severity",
                f("").replace("\"major\"", "\"critical\""),
                "severity `critical`",
            ),
            (
                "no message",
                f("").replace(", \"message\": \"m\"", ""),
                "`message` is missing",
            ),
            (
                "empty message",
                f("").replace("\"m\"", "\" \""),
                "`message` is empty",
            ),
            (
                "no hint",
                f("").replace(", \"hint\": \"h\"", ""),
                "`hint` is missing",
            ),
            (
                "no category",
                f("").replace("\"category\": \"c\", ", ""),
                "`category` is missing",
            ),
            ("line zero", f(", \"line\": 0"), "line"),
            (
                "line text",
                f(", \"line\": \"3\""),
                "line: expected a number",
            ),
            (
                "finding extra",
                f(", \"confidence\": 0.9"),
                "unknown field `confidence`",
            ),
            ("file type", f(", \"file\": 3"), "file: expected a string"),
        ];
        for (name, text, want) in cases {
            match parse_answer("r", &text) {
                Ok(a) => panic!("{name}: accepted {a:?}"),
                Err(e) => assert!(e.contains(want), "{name}: `{e}` lacks `{want}`"),
            }
        }
        // Optional fields may be null or absent.
        assert!(parse_answer("r", &f(", \"file\": null, \"line\": null")).is_ok());
    }

    #[test]
    fn findings_are_the_reviewers_own_and_capped() {
        let big = "x".repeat(MAX_TEXT + 10);
        let text = r#"{"verdict": "revise", "findings": [{"reviewer": "secrets", "severity": "major", "category": "c", "message": "m", "hint": "h"}]}"#;
        // An answer cannot name another reviewer: the field is refused.
        assert!(parse_answer("adversary", text).is_err());
        let one = format!(
            r#"{{"severity": "minor", "category": "c\u001b[2J", "message": "{big}", "hint": "{big}"}}"#
        );
        let blocking =
            r#"{"severity": "blocking", "category": "b", "message": "late", "hint": ""}"#;
        let mut list = vec![one.as_str(); MAX_FINDINGS + 5];
        list.push(blocking);
        let text = format!(
            r#"{{"verdict": "approve", "findings": [{}]}}"#,
            list.join(",")
        );
        let a = parse_answer("adversary", &text).expect("valid");
        assert_eq!(a.findings.len(), MAX_FINDINGS + 1);
        assert!(a.findings.iter().all(|f| f.reviewer == "adversary"));
        // The most severe are kept, then the note.
        assert_eq!(a.findings[0].message, "late");
        assert_eq!(a.findings[MAX_FINDINGS].category, "truncated");
        assert!(a.findings[MAX_FINDINGS].message.contains("56 findings"));
        let f = &a.findings[1];
        assert_eq!(f.message.chars().count(), MAX_TEXT + 1);
        assert_eq!(f.hint.chars().count(), MAX_TEXT + 1);
        assert_eq!(f.category, "c[2J", "control characters are dropped");
        // `approve` with a blocking finding: the critic blocks.
        assert_eq!(critic(&a.findings), Verdict::Block);
    }

    #[test]
    fn the_critic_sees_the_stricter_of_verdict_and_findings() {
        let minor = r#"{"severity": "minor", "category": "c", "message": "m", "hint": "h"}"#;
        let major = r#"{"severity": "major", "category": "c", "message": "m", "hint": "h"}"#;
        let blocking = r#"{"severity": "blocking", "category": "c", "message": "m", "hint": "h"}"#;
        let cases: &[(&str, &[&str], Verdict, usize)] = &[
            ("approve", &[], Verdict::Approve, 0),
            ("approve", &[minor], Verdict::Approve, 1),
            ("approve", &[major], Verdict::Revise, 1),
            ("approve", &[blocking], Verdict::Block, 1),
            ("revise", &[], Verdict::Revise, 1),
            ("revise", &[minor], Verdict::Revise, 2),
            ("revise", &[major], Verdict::Revise, 1),
            ("revise", &[blocking], Verdict::Block, 1),
            ("block", &[], Verdict::Block, 1),
            ("block", &[major], Verdict::Block, 2),
            ("block", &[blocking], Verdict::Block, 1),
        ];
        for (verdict, findings, want, count) in cases {
            let text = format!(
                r#"{{"verdict": "{verdict}", "findings": [{}]}}"#,
                findings.join(",")
            );
            let a = parse_answer("r", &text).expect("valid");
            assert_eq!(critic(&a.findings), *want, "{verdict} {findings:?}");
            assert_eq!(a.findings.len(), *count, "{verdict} {findings:?}");
        }
    }

    #[test]
    fn a_failed_reviewer_is_a_major_finding() {
        let f = failed("adversary", "timed out after 2s");
        assert_eq!(f.severity, Severity::Major);
        assert_eq!(f.category, "reviewer-failed");
        assert_eq!(f.reviewer, "adversary");
        assert!(f.message.contains("timed out after 2s"));
        assert!(!f.hint.is_empty());
        assert_eq!(critic(&[f]), Verdict::Revise);
    }

    #[test]
    fn distinct_family_needs_both_to_differ() {
        let fam = |p: &str, f: &str| Family {
            provider: p.into(),
            family: f.into(),
        };
        let claude = fam("anthropic", "claude");
        let cases: &[(Option<Family>, Family, Option<&str>)] = &[
            (Some(claude.clone()), fam("openai", "gpt"), None),
            (Some(claude.clone()), fam("Google", " Gemini "), None),
            (
                Some(claude.clone()),
                fam("anthropic", "claude"),
                Some("own model"),
            ),
            (
                Some(claude.clone()),
                fam("ANTHROPIC", "Claude"),
                Some("own model"),
            ),
            (
                Some(claude.clone()),
                fam("anthropic", "other"),
                Some("provider `anthropic`"),
            ),
            (
                Some(claude.clone()),
                fam("aws-bedrock", "claude"),
                Some("family `claude`"),
            ),
            (None, fam("openai", "gpt"), Some("unknown")),
            (
                Some(fam("", "claude")),
                fam("openai", "gpt"),
                Some("proposer's role"),
            ),
            (
                Some(claude.clone()),
                fam("openai", ""),
                Some("reviewer's role"),
            ),
        ];
        for (proposer, reviewer, want) in cases {
            let got = distinct_family(proposer.as_ref(), reviewer);
            match (want, got) {
                (None, Ok(())) => {}
                (Some(w), Err(e)) => assert!(e.contains(w), "{proposer:?} {reviewer:?}: {e}"),
                (w, g) => panic!("{proposer:?} {reviewer:?}: want {w:?}, got {g:?}"),
            }
        }
    }
}
