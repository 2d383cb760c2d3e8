//! The real agent CLIs (Claude Code, Codex, Aider), installed as their registries ship them,
//! each run through its preset under default containment against a fake model server of ours
//! (support/model): the task's file written, the tokens each reported recorded, the key only
//! where the endpoint reads it, the output kept, a slow answer not killed.

mod aider;
mod claude;
mod codex;
mod endpoint;

use std::path::{Path, PathBuf};

use atelier::swarm::events::RunEvent;

use crate::support::model::{Server, USAGE};
use crate::support::swarm::{plan, task, Swarm};

/// What the scripted model writes, and the check that proves it landed.
pub(crate) const FILE: &str = "notes/hello.txt";
pub(crate) const CONTENT: &str = "hello from the fake\n";

/// A swarm with a `writer` role on the `backend` preset, pointed at `server` by `base_url`
/// (`base`, the URL as the CLI wants it), its port the only one open, `key_var` passed.
pub(crate) fn swarm(
    backend: &str,
    base: &str,
    server: &Server,
    key_var: &str,
    extra: &str,
) -> Swarm {
    let s = Swarm::new(extra);
    let config = s.env.read("atelier.toml");
    s.env.write(
        "atelier.toml",
        &format!(
            "{config}\n[roles.writer]\nbackend = \"{backend}\"\nbase_url = \"{base}\"\nenv = [\"{key_var}\"]\nnetwork = [{}]\n",
            server.port
        ),
    );
    s.env.git(&["commit", "-q", "-am", "Add a writer role"]);
    s
}

/// A one-task plan for the writer: write the file, checked by its content.
pub(crate) fn hello_plan(s: &Swarm) -> String {
    let t = task(
        "T",
        &[FILE],
        &[],
        &format!("grep -qx '{}' {FILE}", CONTENT.trim_end()),
    )
    .replace("implementer", "writer")
    .replace(
        "goal = \"Do T\"",
        &format!(
            "goal = \"Write the file {FILE} containing exactly the line: {}\"",
            CONTENT.trim_end()
        ),
    );
    s.plan("w.toml", &plan("w", &[t]))
}

/// `atelier run` of the plan, with the CLI's folder first on PATH and the key set.
pub(crate) fn run(s: &Swarm, bin: &Path, key_var: &str, key: &str) -> std::process::Output {
    let p = hello_plan(s);
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    s.command(&["run", &p])
        .env("PATH", path)
        .env(key_var, key)
        .output()
        .expect("run atelier")
}

/// What every CLI's run must show: it passed, the file is on the run's branch, the tokens the
/// fake reported were recorded as the CLI's spend, the key reached the endpoint only in the
/// header `key_header` and never the run's records, and the attempt's output was kept.
pub(crate) fn assert_ran(
    s: &Swarm,
    out: &std::process::Output,
    backend: &str,
    server: &Server,
    key_header: &str,
    key: &str,
    spend: Spend,
) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let log = attempt_log(s);
    assert!(
        out.status.success(),
        "stdout:\n{stdout}\nstderr:\n{stderr}\nattempt output:\n{log}"
    );
    assert_eq!(
        s.env.git(&["show", &format!("atelier/runs/r1:{FILE}")]),
        CONTENT
    );

    let spent: Vec<_> = s
        .events("r1")
        .into_iter()
        .filter_map(|e| match e {
            RunEvent::Spent { client, usage, .. } => Some((client, usage)),
            _ => None,
        })
        .collect();
    assert_eq!(spent.len(), 1, "one attempt, one spend: {spent:?}");
    let (client, usage) = &spent[0];
    assert_eq!(client, backend);
    let requests = server.requests();
    match spend {
        Spend::Reported => {
            // Each response reports USAGE; however many the CLI made, its report is a whole
            // multiple.
            let n = usage.output_tokens / USAGE.output;
            assert!(
                n >= 1 && n as usize <= requests.len(),
                "{usage:?} over {} requests",
                requests.len()
            );
            assert_eq!(
                (usage.input_tokens, usage.output_tokens, usage.cached_tokens),
                (n * USAGE.input, n * USAGE.output, n * USAGE.cached),
                "the tokens the fake reported"
            );
        }
        Spend::Printed(line) => {
            let printed = log
                .lines()
                .rfind(|l| l.trim_start().starts_with("Tokens:"))
                .unwrap_or_else(|| panic!("no Tokens: line in the output:\n{log}"));
            assert!(
                usage.input_tokens > 0 && usage.output_tokens > 0,
                "{usage:?}"
            );
            assert!(
                printed.trim().starts_with(&line(usage)),
                "the figures the CLI printed: {printed:?}, recorded {usage:?}"
            );
        }
    }

    let mut carried = 0;
    for r in &requests {
        for (name, value) in &r.headers {
            if value.contains(key) {
                assert_eq!(name, key_header, "the key went out in {name}");
                carried += 1;
            }
        }
        assert!(!r.body.contains(key), "the key went out in a body");
    }
    assert!(carried > 0, "the key reached the endpoint in {key_header}");
    let events = std::fs::read_to_string(run_dir(s).join("events.jsonl")).expect("events");
    assert!(!events.contains(key), "the key is in events.jsonl");
    assert!(!log.is_empty(), "the attempt's output was kept");
    assert!(!log.contains(key), "the key is in the kept output");
}

/// Where the spend a CLI's run records comes from.
pub(crate) enum Spend {
    /// The usage the fake reported with each response.
    Reported,
    /// A count of the CLI's own, printed: how its line begins for the recorded usage.
    Printed(fn(&atelier::agent::clients::Usage) -> String),
}

/// `[conductor]` settings under which a 15-second answer would be killed as silent.
pub(crate) const SLOW: &str = "nudge_after = \"4s\"\nrestart_after = \"8s\"";

/// Settings under which an attempt is killed at 8 s and the run's token ceiling (100) is
/// reached by anything it spent.
pub(crate) const KILLED: &str =
    "attempt_timeout = \"8s\"\nfailure_budget = 2\n\n[budget.run]\ntokens = 100";

/// No attempt of the run was restarted for silence.
pub(crate) fn assert_not_restarted(s: &Swarm) {
    let restarts: Vec<_> = s
        .events("r1")
        .into_iter()
        .filter(|e| matches!(e, RunEvent::Restarted { .. }))
        .collect();
    assert!(restarts.is_empty(), "{restarts:?}");
}

/// Under [`KILLED`]: the run failed, its first attempt (killed) recorded the only spend, and
/// the run's ceiling kept the second from starting. That spend.
pub(crate) fn killed_attempt_s_spend(
    s: &Swarm,
    out: &std::process::Output,
) -> atelier::agent::clients::Usage {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{stdout}");
    let spent: Vec<_> = s
        .events("r1")
        .into_iter()
        .filter_map(|e| match e {
            RunEvent::Spent { attempt, usage, .. } => Some((attempt, usage)),
            _ => None,
        })
        .collect();
    assert_eq!(spent.len(), 1, "{spent:?}\n{stdout}");
    assert_eq!(spent[0].0, 1, "the killed attempt's");
    assert!(
        stdout.contains("not started: the run's tokens budget (100) is spent"),
        "{stdout}"
    );
    spent[0].1
}

pub(crate) fn run_dir(s: &Swarm) -> PathBuf {
    s.env.repo.join(".atelier/runs/r1")
}

/// The first attempt's kept output (empty when none was kept).
pub(crate) fn attempt_log(s: &Swarm) -> String {
    std::fs::read_to_string(run_dir(s).join("attempts/w-T-1.log")).unwrap_or_default()
}

/// The roles a new user copies from README's quick start load as written: each preset with
/// only the variables its CLI reads, and a plan may name every one of them.
#[test]
fn the_roles_the_readme_shows_load_as_written() {
    let readme = include_str!("../../README.md");
    let from = readme
        .find("**Which agents run.**")
        .expect("README's roles section");
    let start = readme[from..]
        .find("cat >> atelier.toml <<'EOF'\n")
        .map(|i| from + i + "cat >> atelier.toml <<'EOF'\n".len())
        .expect("the block appended to atelier.toml");
    let end = start + readme[start..].find("\nEOF\n").expect("its end");
    let block = &readme[start..=end];
    let env = crate::support::Env::bare_repo();
    env.atelier(&["init"]).ok();
    let config = env.read("atelier.toml");
    env.write("atelier.toml", &format!("{config}{block}"));
    let mut tasks = String::new();
    for role in ["implementer", "tester", "fixer"] {
        tasks.push_str(
            &task(role, &[&format!("src/{role}.rs")], &[], "test -f src/x.rs")
                .replace("role = \"implementer\"", &format!("role = \"{role}\"")),
        );
    }
    let p = env.file(
        "p.toml",
        &format!("[plan]\nid = \"p\"\ntitle = \"Plan p\"\n\n{tasks}"),
    );
    let out = env.atelier(&["plan", "check", &p.display().to_string()]);
    assert_eq!(out.code, 0, "{}\n{}\n{block}", out.stdout, out.stderr);
}

/// A stand-in `claude` on PATH that writes the task's file and prints one `result` line of
/// `pad` bytes, marked `is_error` or not, reporting USAGE.
fn fake_claude(s: &Swarm, pad: usize, is_error: bool) -> PathBuf {
    let bin = s
        .env
        .tmp
        .path()
        .join(format!("fake-claude-{pad}-{is_error}"));
    std::fs::create_dir_all(&bin).expect("mkdir");
    let script = format!(
        "#!/bin/sh\ncat >/dev/null\nmkdir -p notes && printf '{}\\n' > {FILE}\npad=$(head -c {pad} /dev/zero | tr '\\0' x)\nprintf '{{\"type\":\"result\",\"is_error\":{is_error},\"result\":\"API Error: 529 %s\",\"usage\":{{\"input_tokens\":{},\"output_tokens\":{},\"cache_read_input_tokens\":{}}}}}\\n' \"$pad\"\n",
        CONTENT.trim_end(),
        USAGE.input,
        USAGE.output,
        USAGE.cached
    );
    let path = bin.join("claude");
    std::fs::write(&path, script).expect("write");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    bin
}

/// The spend and the failure a CLI reports are read from every line it printed, not from the
/// part of its output that `max_output` keeps: a `result` line longer than all of it counts.
#[test]
fn a_report_line_longer_than_the_kept_output_still_counts() {
    crate::support::skip::require_landlock!();
    let server =
        Server::start(|_, _| crate::support::model::Reply::Json(200, serde_json::json!({})));
    for is_error in [false, true] {
        let s = swarm(
            "claude",
            &server.origin,
            &server,
            "ANTHROPIC_API_KEY",
            "\n[swarm]\nmax_output = 4096",
        );
        let bin = fake_claude(&s, 20_000, is_error);
        let out = run(&s, &bin, "ANTHROPIC_API_KEY", "sk-ant-fake-0123456789");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let events = s.events("r1");
        let spent: Vec<_> = events
            .iter()
            .filter_map(|e| match e {
                RunEvent::Spent { usage, .. } => Some(*usage),
                _ => None,
            })
            .collect();
        assert!(
            !spent.is_empty()
                && spent
                    .iter()
                    .all(|u| (u.input_tokens, u.output_tokens, u.cached_tokens)
                        == (USAGE.input, USAGE.output, USAGE.cached)),
            "is_error {is_error}: {spent:?}\n{stdout}"
        );
        assert!(
            events.iter().any(|e| matches!(
                e,
                RunEvent::WorkerExited {
                    truncated: true,
                    ..
                }
            )),
            "the output outgrew max_output"
        );
        if is_error {
            assert!(!out.status.success(), "{stdout}");
            assert!(
                stdout.contains("the claude CLI exited 0 but reported a failure: API Error: 529"),
                "{stdout}"
            );
        } else {
            assert!(out.status.success(), "{stdout}");
        }
    }
}

/// A failure a CLI reports is redacted whole before it is clipped to one line: a key the clip
/// would cut (here at character 400) leaves no part of itself in the records.
#[test]
fn a_key_in_a_reported_failure_is_redacted_before_the_failure_is_clipped() {
    crate::support::skip::require_landlock!();
    let server =
        Server::start(|_, _| crate::support::model::Reply::Json(200, serde_json::json!({})));
    let key = "sk-ant-fake-0123456789abcdefghijklmnopqrstuvwxyz";
    let s = swarm(
        "claude",
        &server.origin,
        &server,
        "ANTHROPIC_API_KEY",
        "failure_budget = 1",
    );
    let bin = s.env.tmp.path().join("fake-claude-key");
    std::fs::create_dir_all(&bin).expect("mkdir");
    let pad = "x".repeat(380);
    let script = format!(
        "#!/bin/sh\ncat >/dev/null\nprintf '{{\"type\":\"result\",\"is_error\":true,\"result\":\"{pad}%s tail\"}}\\n' \"$ANTHROPIC_API_KEY\"\n"
    );
    std::fs::write(bin.join("claude"), script).expect("write");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(bin.join("claude"), std::fs::Permissions::from_mode(0o755))
        .expect("chmod");
    let out = run(&s, &bin, "ANTHROPIC_API_KEY", key);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{stdout}");
    assert!(stdout.contains("reported a failure: xxx"), "{stdout}");
    let events = std::fs::read_to_string(run_dir(&s).join("events.jsonl")).expect("events");
    let status = s.run(&["status", "r1"]).stdout;
    for (what, text) in [
        ("stdout", stdout.to_string()),
        ("events.jsonl", events),
        ("status", status),
        ("the kept log", attempt_log(&s)),
    ] {
        assert!(
            !text.contains(&key[..12]),
            "{what} holds part of the key:\n{text}"
        );
    }
}
