//! Terminal escapes, bidi overrides and invisible characters from a worker, a diff, a reviewer or
//! a patch never reach the terminal or JSON output as such.

use serde_json::Value;

use crate::output::{assert_none, HIDING};
use crate::support::reviewers::{script_role, with_agent_reviewer};
use crate::support::swarm::{plan, task, Swarm};
use crate::support::Env;

/// A contained worker names a file it writes outside its claims with a terminal escape (an
/// OSC title sequence here; OSC 52 writes the operator's clipboard, CSI erases and forges
/// lines). The attempt fails with that name in its reason, and `run`'s progress prints the
/// reason to the operator's terminal as it is.
#[test]
fn a_workers_file_name_writes_no_escape_sequence_to_run_progress() {
    let s = Swarm::new("failure_budget = 1");
    s.scenario(
        "p:A",
        "echo ok > src/a.rs; printf x > \"$(printf 'evil\\033]2;PWNED\\007')\"",
    );
    let p = s.plan(
        "p.toml",
        &plan("p", &[task("A", &["src/a.rs"], &[], "grep -q ok src/a.rs")]),
    );
    let r = s.run(&["run", &p]).code(1);
    assert!(
        r.stderr.contains("wrote outside its claims"),
        "the attempt did not fail on its claims:\n{}",
        r.stderr
    );
    assert!(
        !r.stderr.contains('\u{1b}') && !r.stdout.contains('\u{1b}'),
        "a worker's escape sequence reached the operator's terminal:\nstderr: {:?}\nstdout: {:?}",
        r.stderr,
        r.stdout
    );
}

/// A proposal's diff carries terminal escapes (a cursor-up and erase-line after the line that
/// matters): printed as is, `atelier show` would hide that line from the reviewer reading it on
/// a terminal. Titles with control characters are refused outright; what a diff holds is shown
/// with each control character replaced, in `show`, `proposals` and `audit show`.
#[test]
fn a_diff_cannot_hide_a_line_from_its_reviewer_with_terminal_escapes() {
    let env = crate::support::Env::new();
    let patch = env.patch(&[(
        "src/lib.rs",
        "pub fn answer() -> u32 {\n    std::process::abort() // \u{1b}[1A\u{1b}[2K\n    42\n}\n",
    )]);
    let refused = env
        .atelier(&[
            "propose",
            "--patch",
            patch.to_str().expect("utf8"),
            "--title",
            "Fix \u{1b}]0;owned\u{7}the answer",
        ])
        .code(2);
    assert!(
        refused
            .stderr
            .contains("a control character (U+001B) at byte 4"),
        "{}",
        refused.stderr
    );
    let id = env
        .atelier(&[
            "propose",
            "--patch",
            patch.to_str().expect("utf8"),
            "--title",
            "Fix the answer",
        ])
        .ok()
        .stdout
        .trim()
        .to_string();
    for args in [
        vec!["show", id.as_str()],
        vec!["proposals"],
        vec!["audit", "show", id.as_str()],
    ] {
        let shown = env.atelier(&args).ok().stdout;
        assert!(
            !shown.contains('\u{1b}'),
            "{args:?} prints an escape: {shown:?}"
        );
        if args[0] == "show" {
            assert!(
                shown.contains("+    std::process::abort() // \u{FFFD}[1A\u{FFFD}[2K"),
                "{shown}"
            );
        }
    }
    // Machine-readable output keeps the bytes, escaped as JSON escapes them.
    let json = env.atelier(&["audit", "show", &id, "--json"]);
    assert!(!json.stdout.contains('\u{1b}'), "{}", json.stdout);
}

/// What a terminal acts on or hides: ESC, BEL, CSI as one C1 character, DEL.
const ACTING: [char; 4] = ['\u{1b}', '\u{7}', '\u{9b}', '\u{7f}'];

/// The diff `show --json` gives of `path`.
fn diff_of<'a>(v: &'a Value, path: &str) -> &'a str {
    v["files"]
        .as_array()
        .expect("files")
        .iter()
        .find(|f| f["path"] == path)
        .and_then(|f| f["diff"].as_str())
        .unwrap_or_else(|| panic!("no diff of {path}: {v:#}"))
}

/// An agent reviewer reads the proposal (which may tell it what to answer) and answers with
/// escapes and a right-to-left override. `atelier review` quotes a failed reviewer's output in a
/// note on stderr, which the reviewer reads on the same terminal. The reviewer's output was
/// already stripped of control characters where it is quoted; the override went through.
#[test]
fn a_reviewer_agents_answer_reaches_stderr_without_escapes_or_bidi_overrides() {
    let (_dir, role) = script_role(
        "escapes.sh",
        "cat >/dev/null\nprintf 'Looks bad\\033[1A\\033[2K\\033]52;c;Y3VybCBldmlsfHNo\\007 \\342\\200\\256dab skooL\\n'\n",
    );
    let env = with_agent_reviewer(&role, "");
    let id = env.propose_code();
    let run = env.atelier(&["review", &id]).code(1);
    assert!(run.stderr.contains("adversary"), "{run:?}");
    assert_none(&run.stderr, &ACTING, "review's stderr");
    assert_none(&run.stderr, &HIDING, "review's stderr");
    assert!(run.stderr.contains("<U+202E>dab skooL"), "{}", run.stderr);
}

/// A file path in a patch is the proposer's: git allows an escape in a name (and quotes it in a
/// diff). An error that names the path reaches the terminal of whoever runs the command.
#[test]
fn an_error_naming_a_path_from_a_patch_carries_no_escape() {
    let env = Env::new();
    let patch = env.file(
        "evil.patch",
        "diff --git \"a/src/\\033[2Kx.rs\" \"b/src/\\033[2Kx.rs\"\n--- \"a/src/\\033[2Kx.rs\"\n+++ \"b/src/\\033[2Kx.rs\"\n@@ -1 +1 @@\n-old\n+new\n",
    );
    let run = env
        .atelier(&[
            "propose",
            "--patch",
            patch.to_str().expect("utf8"),
            "--title",
            "Touch a file",
        ])
        .code(2);
    assert!(run.stderr.contains("x.rs"), "{run:?}");
    assert_none(&run.stderr, &ACTING, "propose's error");
}

/// Trojan Source: a right-to-left override and isolates make a line of the diff show on a
/// terminal in another order than the compiler reads it (here a comparison that looks
/// commented out, or a comment that looks like code). `show` marks each such character where it
/// stands, as `<U+202E>`; a title may not hold one.
#[test]
fn a_diff_cannot_reorder_or_hide_text_with_bidi_or_invisible_characters() {
    let env = Env::new();
    let line = "    if level != \"user\u{202e} \u{2066}// admin only\u{2069} \u{2066}\" { return 0; }\u{200b}\u{feff}";
    let patch = env.patch(&[(
        "src/lib.rs",
        &format!("pub fn answer(level: &str) -> u32 {{\n{line}\n    42\n}}\n"),
    )]);
    let refused = env
        .atelier(&[
            "propose",
            "--patch",
            patch.to_str().expect("utf8"),
            "--title",
            "Fix the answer \u{202e}txt.exe",
        ])
        .code(2);
    assert!(refused.stderr.contains("U+202E"), "{}", refused.stderr);
    let id = env
        .atelier(&[
            "propose",
            "--patch",
            patch.to_str().expect("utf8"),
            "--title",
            "Fix the answer",
        ])
        .ok()
        .stdout
        .trim()
        .to_string();
    let shown = env.atelier(&["show", &id]).ok().stdout;
    assert_none(&shown, &HIDING, "show");
    assert!(
        shown.contains(
            "+    if level != \"user<U+202E> <U+2066>// admin only<U+2069> <U+2066>\" { return 0; }<U+200B><U+FEFF>"
        ),
        "{shown}"
    );
    // Machine-readable output keeps the exact text.
    let v: Value = env.atelier(&["show", &id, "--json"]).ok().json();
    assert!(diff_of(&v, "src/lib.rs").contains(line), "{v:#}");
}

/// `--json` is for programs, but people pipe it to their terminal too: serde_json escapes only
/// C0 controls, so DEL, a C1 CSI (U+009B, a whole escape introducer on many terminals) and bidi
/// overrides went out raw. They are escaped as `\uXXXX` now: the same JSON value, nothing a
/// terminal acts on.
#[test]
fn json_output_escapes_what_a_terminal_would_act_on() {
    let env = Env::new();
    let text =
        "pub fn answer() -> u32 {\n    42 // \u{9b}1A\u{9b}2K \u{7f} \u{202e}x \u{e0041}\n}\n";
    let id = env.propose(&[("src/lib.rs", text)], "Fix the answer");
    let run = env.atelier(&["show", &id, "--json"]).ok();
    assert_none(&run.stdout, &ACTING, "show --json");
    assert_none(&run.stdout, &HIDING, "show --json");
    assert!(!run.stdout.contains('\u{e0041}'), "{}", run.stdout);
    assert!(
        run.stdout.contains("\\u009b1A") && run.stdout.contains("\\udb40\\udc41"),
        "{}",
        run.stdout
    );
    let v = run.json();
    assert!(
        diff_of(&v, "src/lib.rs")
            .contains("+    42 // \u{9b}1A\u{9b}2K \u{7f} \u{202e}x \u{e0041}\n"),
        "{v:#}"
    );
}

/// A file name holding a newline would add lines of its own to what `show` prints (a forged
/// `+++ b/src/lib.rs` header, a forged entry in the file list): it is shown quoted, as git
/// quotes it, on one line.
#[test]
fn a_file_name_with_a_newline_cannot_forge_lines_in_show() {
    let env = Env::new();
    let name = "notes\n  modified  README.md";
    let id = env.propose(&[(name, "harmless\n")], "Add notes");
    let shown = env.atelier(&["show", &id]).ok().stdout;
    assert!(
        !shown.lines().any(|l| l.trim() == "modified  README.md"),
        "a forged line: {shown}"
    );
    assert!(
        shown.contains("added     \"notes\\n  modified  README.md\"")
            && shown.contains("+++ \"b/notes\\n  modified  README.md\""),
        "{shown}"
    );
}
