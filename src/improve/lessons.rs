//! Learned lessons as reviewed text: `prompts/lessons.md` on the protected branch, whose
//! bullet lines every worker prompt includes, and the `memory` proposer that adds to it the
//! error digests that recur across tasks and runs. Pure: text and run logs in, text out.
//!
//! A digest entry recurs when its normalised first line (the `[step]` it came from and the
//! error, without the file:line that differs between tasks) failed attempts of at least
//! [`MIN_TASKS`] distinct tasks over at least [`MIN_RUNS`] runs. Entries the conductor writes
//! about the attempt itself (silence, timeout, writes outside the claims, an endpoint's
//! failure) are not lessons about the code and are skipped.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::swarm::events::RunEvent;
use crate::swarm::memory;
use crate::swarm::stats::RunLog;

/// Where the lessons live, in the repository.
pub const PATH: &str = "prompts/lessons.md";
/// Distinct tasks an error must have failed before it becomes a lesson.
pub const MIN_TASKS: usize = 3;
/// Distinct runs it must have appeared in.
pub const MIN_RUNS: usize = 2;
/// The most lessons a prompt carries (the first ones in the file), and their bytes.
pub const MAX_IN_PROMPT: usize = 20;
pub const MAX_PROMPT_BYTES: usize = 4 * 1024;

const MARK: &str = "<!-- atelier-lesson ";

/// The head of a new lessons file.
pub const HEADER: &str = "# Lessons for workers\n\nEvery bullet line below is included in every worker's prompt (\"Lessons from earlier\nruns\"), the first 20 of them, up to 4 KiB. `atelier propose --from memory` adds errors that\nrecurred across tasks and runs; people may edit, reword or remove any line. Like all of\n`prompts/`, this file changes only through a proposal.\n\n";

/// Digest entries the conductor writes about an attempt, not about the code.
const NOT_LESSONS: &[&str] = &[
    "[claims]",
    "[http]",
    "[worktree]",
    "[worker] silent for",
    "[worker] ran past",
    "[worker] could not start",
];

/// An error that recurred, as the `memory` proposer found it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Recurring {
    pub key: String,
    /// The normalised error: `[step] first line`.
    pub error: String,
    pub tasks: usize,
    pub runs: Vec<String>,
}

impl Recurring {
    /// Its line in `prompts/lessons.md`.
    pub fn line(&self) -> String {
        format!(
            "- `{}` failed {} tasks over {} runs ({}): check for it before you finish. {MARK}{} -->",
            self.error.replace('`', "'"),
            self.tasks,
            self.runs.len(),
            self.runs.join(", "),
            self.key
        )
    }
}

/// The normalised form of a digest entry, or `None` for entries that are not lessons.
pub fn normalise(entry: &str) -> Option<String> {
    if NOT_LESSONS.iter().any(|p| entry.starts_with(p)) {
        return None;
    }
    let first = entry.lines().next()?.trim();
    let (step, rest) = match first.strip_prefix('[').and_then(|r| r.split_once("] ")) {
        Some((step, rest)) => (step, rest),
        None => return None,
    };
    // The conductor's own line about a failed step (`[build] `cargo build` exited with 101`).
    if rest.starts_with('`')
        && (rest.contains("` exited with ") || rest.contains("` timed out after "))
    {
        return None;
    }
    // Without the location the digest put first, and any other file:line in the line.
    let rest = match memory::location(rest) {
        Some(loc) => rest.strip_prefix(&format!("{loc}: ")).unwrap_or(rest),
        None => rest,
    };
    let words: Vec<String> = rest
        .split_whitespace()
        .map(|w| {
            if memory::location(w).is_some() {
                "…".to_string()
            } else {
                w.to_string()
            }
        })
        .collect();
    // No comment markers: a lesson's line ends with the one atelier writes, and nothing in the
    // error may forge, hide or cut it.
    let text: String = words
        .join(" ")
        .replace("<!--", "< !--")
        .replace("-->", "-- >")
        .chars()
        .take(200)
        .collect();
    if text.is_empty() || text == "failed with no output" {
        return None;
    }
    Some(format!("[{step}] {text}"))
}

fn key(error: &str) -> String {
    hex::encode(&Sha256::digest(error.as_bytes())[..6])
}

/// The keys of the lessons already in `text`.
pub fn known(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| {
            let at = l.rfind(MARK)?;
            let rest = &l[at + MARK.len()..];
            Some(rest.split_whitespace().next()?.to_string())
        })
        .collect()
}

/// Errors that failed attempts of at least [`MIN_TASKS`] tasks over [`MIN_RUNS`] runs, most
/// widespread first, without those `existing` (the lessons file's text) already holds.
pub fn recurring(runs: &[RunLog], existing: &str) -> Vec<Recurring> {
    let known = known(existing);
    // error -> (the tasks it failed, by key: the same task failing again is one task; the runs)
    let mut seen: BTreeMap<String, (BTreeSet<String>, BTreeSet<String>)> = BTreeMap::new();
    for run in runs {
        for r in &run.records {
            if let RunEvent::AttemptFailed { task, digest, .. } = &r.event {
                for entry in digest {
                    if let Some(error) = normalise(entry) {
                        let s = seen.entry(error).or_default();
                        s.0.insert(task.clone());
                        s.1.insert(run.id.clone());
                    }
                }
            }
        }
    }
    let mut out: Vec<Recurring> = seen
        .into_iter()
        .filter(|(_, (tasks, runs))| tasks.len() >= MIN_TASKS && runs.len() >= MIN_RUNS)
        .map(|(error, (tasks, runs))| Recurring {
            key: key(&error),
            tasks: tasks.len(),
            runs: runs.into_iter().collect(),
            error,
        })
        .filter(|r| !known.contains(&r.key))
        .filter(|r| !holds_a_credential(&r.line()))
        .collect();
    out.sort_by(|a, b| b.tasks.cmp(&a.tasks).then(a.error.cmp(&b.error)));
    out
}

/// Whether the `secrets` built-in reviewer sees a credential in `line`: such an error never
/// becomes a lesson (it would be published in a proposal and reach every prompt).
pub(crate) fn holds_a_credential(line: &str) -> bool {
    use crate::governance::review::{secrets, ChangeView, FileChange};
    let files = [FileChange {
        path: PATH.to_string(),
        base: None,
        head: Some(format!("{line}\n")),
    }];
    !secrets::check(
        "secrets",
        &ChangeView {
            files: &files,
            agent_origin: true,
            declared: None,
            judged: &[],
        },
    )
    .is_empty()
}

/// The lessons file with `new` lessons added at its end (created with [`HEADER`] when empty).
pub fn append(existing: &str, new: &[Recurring]) -> String {
    let mut out = if existing.trim().is_empty() {
        HEADER.to_string()
    } else {
        existing.to_string()
    };
    if !out.ends_with('\n') {
        out.push('\n');
    }
    for r in new {
        out.push_str(&r.line());
        out.push('\n');
    }
    out
}

/// The lessons a worker's prompt carries: the file's bullet lines (`- ...`), without their
/// marks, the first [`MAX_IN_PROMPT`] of them and at most [`MAX_PROMPT_BYTES`].
pub fn for_prompt(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut bytes = 0;
    let (mut fenced, mut commented) = (false, false);
    for line in text.lines() {
        let t = line.trim_start();
        // What Markdown does not show is not a lesson: fenced code, HTML comments.
        if t.starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if commented {
            commented = !line.contains("-->");
            continue;
        }
        if t.starts_with("<!--") {
            commented = !line.contains("-->");
            continue;
        }
        if fenced {
            continue;
        }
        let Some(item) = line.strip_prefix("- ") else {
            continue;
        };
        let item = match item.rfind(MARK) {
            Some(at) => item[..at].trim_end(),
            None => item.trim_end(),
        };
        if item.is_empty() {
            continue;
        }
        if out.len() == MAX_IN_PROMPT || bytes + item.len() > MAX_PROMPT_BYTES {
            break;
        }
        bytes += item.len();
        out.push(item.to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::swarm::events::Record;

    fn failed(run: &str, pairs: &[(&str, &[&str])]) -> RunLog {
        RunLog {
            id: run.into(),
            records: pairs
                .iter()
                .enumerate()
                .map(|(i, (task, digest))| Record {
                    seq: i as u64,
                    at: "2026-12-01T10:00:00Z".into(),
                    event: RunEvent::AttemptFailed {
                        task: task.to_string(),
                        attempt: 1,
                        reason: "x".into(),
                        digest: digest.iter().map(|d| d.to_string()).collect(),
                        ms: None,
                    },
                })
                .collect(),
            plan_roles: BTreeMap::new(),
        }
    }

    #[test]
    fn normalising_drops_locations_and_conductor_entries() {
        assert_eq!(
            normalise("[build] src/a.rs:3: error[E0308]: mismatched types\n --> src/a.rs:3:5")
                .as_deref(),
            Some("[build] error[E0308]: mismatched types")
        );
        assert_eq!(
            normalise("[check 1] thread 'main' panicked at src/b.rs:9:1:").as_deref(),
            Some("[check 1] thread 'main' panicked at …")
        );
        assert_eq!(
            normalise("[worker] silent for 3s: the attempt was killed"),
            None
        );
        assert_eq!(normalise("[claims] wrote x outside the task's files"), None);
        assert_eq!(normalise("[check 2] failed with no output"), None);
        assert_eq!(normalise("no step"), None);
    }

    #[test]
    fn an_error_becomes_a_lesson_only_across_enough_tasks_and_runs() {
        let e = "[build] src/x.rs:1: error[E0432]: unresolved import `crate::y`";
        let other = "[build] src/x.rs:1: error: only here";
        // Three tasks in one run: not enough runs.
        let one_run = [failed(
            "r1",
            &[("a", &[e]), ("b", &[e]), ("c", &[e, other])],
        )];
        assert!(recurring(&one_run, "").is_empty());
        // One task failing the same way run after run is one task.
        let same = [
            failed("r1", &[("a", &[e])]),
            failed("r2", &[("a", &[e])]),
            failed("r3", &[("a", &[e])]),
        ];
        assert!(recurring(&same, "").is_empty());
        // Over two runs, three distinct tasks.
        let two = [
            failed("r1", &[("a", &[e]), ("a", &[e])]),
            failed("r2", &[("b", &[e]), ("c", &[e])]),
        ];
        let r = recurring(&two, "");
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].tasks, 3);
        assert_eq!(r[0].runs, ["r1", "r2"]);
        assert_eq!(
            r[0].error,
            "[build] error[E0432]: unresolved import `crate::y`"
        );
        let file = append("", &r);
        assert!(file.starts_with(HEADER));
        assert!(file.contains("- `[build] error[E0432]: unresolved import 'crate::y'` failed 3 tasks over 2 runs (r1, r2)"), "{file}");
        // Proposed once: the mark keeps it from being proposed again.
        assert!(recurring(&two, &file).is_empty());
        assert_eq!(
            for_prompt(&file),
            ["`[build] error[E0432]: unresolved import 'crate::y'` failed 3 tasks over 2 runs (r1, r2): check for it before you finish."]
        );
    }

    #[test]
    fn an_error_holding_a_credential_never_becomes_a_lesson() {
        let e = "[worker] error: token ghp_abcdefghijklmnopqrstuvwxyz0123456789 was rejected";
        let runs = [
            failed("r1", &[("a", &[e]), ("b", &[e])]),
            failed("r2", &[("c", &[e])]),
        ];
        assert!(recurring(&runs, "").is_empty());
    }

    #[test]
    fn markdown_that_is_not_shown_is_not_a_lesson() {
        let text = "- shown\n```\n- in a fence\n```\n<!--\n- in a comment\n-->\n<!-- - inline -->\n- also shown\n";
        assert_eq!(for_prompt(text), ["shown", "also shown"]);
    }

    #[test]
    fn the_prompt_takes_bullets_only_and_at_most_twenty() {
        let text: String = std::iter::once("# Title\n\nprose\n".to_string())
            .chain((0..30).map(|i| format!("- lesson {i}\n")))
            .collect();
        let l = for_prompt(&text);
        assert_eq!(l.len(), MAX_IN_PROMPT);
        assert_eq!(l[0], "lesson 0");
        let long = format!("- {}\n- b\n", "x".repeat(5000));
        assert!(for_prompt(&long).is_empty());
    }
}
