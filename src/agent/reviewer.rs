//! Agent reviewers (IO): the structured handoff they are given, their prompt, and running them.
//! The panel's pure side (definitions, the answer's format, the critic) is
//! `governance::review`; this module runs a reviewer through its role's backend and turns
//! whatever happened into a `ReviewerOutcome`, never an error.
//!
//! Each command reviewer runs in its own throwaway copy of the head's tree (a plain export of
//! the files into a temporary directory: no `.git`, no index, no refs), with the prompt on stdin
//! and a scrubbed environment (`process::scrubbed_env`: forge tokens and keys never reach it),
//! and the copy is deleted afterwards: what a reviewer writes there is discarded, and the
//! repository is only read. The copy leaves out the files that configure the programs a
//! reviewer runs (`governance::handoff`: agent-CLI settings, MCP servers, `.env`…): a proposal
//! does not set up the CLI that reviews it. Where the caller gives a sandbox (the panel does,
//! where Landlock is available), the reviewer is contained like a worker, with its copy as the
//! one place it writes. An `http` reviewer gets the prompt only, with the key read by this
//! process from the variable its role names.
//!
//! A reviewer's output must be the JSON answer `governance::review::answer` reads. Malformed
//! output is asked for once more, with the reason; then, like a time-out, a failure to start or
//! a non-zero exit, it is a failure, which the panel counts as a major `reviewer-failed`
//! finding: never an approval.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use git2::{ObjectType, Oid, Repository, Tree};
use minijinja::{Environment, UndefinedBehavior};
use serde::Serialize;

use crate::agent::{self, process, Backend};
use crate::config::RoleConfig;
use crate::governance::review::answer::{self, Answer};
use crate::governance::review::{Finding, Kind, ReviewerDef, Severity};

/// The default reviewer prompt: Atelier's own `reviewers/templates/adversary.md.j2`, which
/// `init` installs. A template sees `reviewer.name`, `reviewer.flavour`, `handoff` (a
/// `Handoff`), `diff_truncated` and `answer_schema`.
pub const DEFAULT_TEMPLATE: &str = include_str!("../../reviewers/templates/adversary.md.j2");

/// The most bytes of the diff a prompt carries.
pub const MAX_DIFF: usize = 200 * 1024;
/// The most bytes of a reviewer's output kept.
pub const MAX_OUTPUT: usize = 1024 * 1024;
/// The most characters of a reviewer's output quoted in a failure.
const EXCERPT: usize = 500;

/// What an agent reviewer is told about a proposal, and nothing else. There is deliberately no
/// field for a worker's prompt, transcript or reasoning: a reviewer that reads the author's
/// reasoning tends to agree with it, so it judges the change and its contract only.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Handoff {
    pub title: String,
    pub rationale: String,
    /// Who wrote it, when an agent did (a swarm run, the cycle, `propose --agent NAME`).
    pub origin: Option<String>,
    pub contracts: Vec<TaskContract>,
    /// The unified diff from base to head.
    pub diff: String,
    /// The gauntlet's and the contract checks' results.
    pub checks: Vec<CheckResult>,
    pub builtin_findings: Vec<Finding>,
}

/// The contract of one task that produced the change.
#[derive(Debug, Clone, Serialize)]
pub struct TaskContract {
    pub task: String,
    pub criteria: Vec<String>,
    pub checks: Vec<String>,
}

/// One check's result.
#[derive(Debug, Clone, Serialize)]
pub struct CheckResult {
    pub name: String,
    pub passed: bool,
    pub detail: String,
}

#[derive(Serialize)]
struct Context<'a> {
    reviewer: Who<'a>,
    handoff: &'a Handoff,
    diff_truncated: bool,
    answer_schema: &'static str,
}

#[derive(Serialize)]
struct Who<'a> {
    name: &'a str,
    flavour: &'a str,
}

/// Renders a reviewer's prompt from its template (strict: an unknown variable is an error naming
/// it). The diff is cut to `MAX_DIFF` bytes, and a template that does not state the answer's
/// format gets it appended, so that every reviewer is told what to answer.
pub fn render_prompt(
    template: &str,
    reviewer: &str,
    flavour: &str,
    handoff: &Handoff,
) -> Result<String, String> {
    let mut cut = handoff.diff.len().min(MAX_DIFF);
    while !handoff.diff.is_char_boundary(cut) {
        cut -= 1;
    }
    let diff_truncated = cut < handoff.diff.len();
    let shown;
    let handoff = if diff_truncated {
        shown = Handoff {
            diff: handoff.diff[..cut].to_string(),
            ..handoff.clone()
        };
        &shown
    } else {
        handoff
    };
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.set_auto_escape_callback(|_| minijinja::AutoEscape::None);
    env.add_template("reviewer", template)
        .map_err(|e| format!("reviewer template: {e}"))?;
    let context = Context {
        reviewer: Who {
            name: reviewer,
            flavour,
        },
        handoff,
        diff_truncated,
        answer_schema: answer::SCHEMA,
    };
    let mut prompt = env
        .get_template("reviewer")
        .and_then(|t| t.render(minijinja::value::Serde(&context)))
        .map_err(|e| format!("reviewer template: {e}"))?;
    if !prompt.contains(answer::SCHEMA) {
        prompt.push_str("\n\n");
        prompt.push_str(answer::SCHEMA);
        prompt.push('\n');
    }
    Ok(prompt)
}

/// One reviewer to run.
#[derive(Debug, Clone)]
pub struct ReviewJob {
    pub name: String,
    /// The role's backend (`agent::backend`); a command's `pass_env` is what it may see besides
    /// PATH, HOME and LANG.
    pub backend: Backend,
    pub prompt: String,
    /// Whether its blocking findings can block (`ReviewerDef::blocking`).
    pub blocking: bool,
    /// What a command reviewer may touch besides its export of the head (`contain::role`);
    /// `None` runs it uncontained.
    pub sandbox: Option<super::contain::Sandbox>,
}

/// The job for an agent reviewer: its role's backend from `roles` (atelier.toml) and its prompt
/// from `template`, the text of its template as the proposal's base has it. An `Err` says why
/// it cannot run; the caller records it as `ReviewerOutcome::failed`.
pub fn job(
    def: &ReviewerDef,
    roles: &BTreeMap<String, RoleConfig>,
    template: &str,
    handoff: &Handoff,
) -> Result<ReviewJob, String> {
    if def.kind != Kind::Agent {
        return Err(format!("`{}` is not an agent reviewer", def.name));
    }
    let role_name = def
        .role
        .as_deref()
        .ok_or_else(|| format!("`{}` names no role", def.name))?;
    let role = roles.get(role_name).ok_or_else(|| {
        format!("the role `{role_name}` is not defined: add [roles.{role_name}] to atelier.toml")
    })?;
    let backend = agent::backend(role_name, role).map_err(|e| e.to_string())?;
    let prompt = render_prompt(template, &def.name, &def.flavour, handoff)?;
    Ok(ReviewJob {
        name: def.name.clone(),
        backend,
        prompt,
        blocking: def.blocking,
        sandbox: None,
    })
}

/// How one reviewer ended: exactly one of `answer` and `failure` is set.
#[derive(Debug, Clone, Serialize)]
pub struct ReviewerOutcome {
    pub name: String,
    pub answer: Option<Answer>,
    /// Why there is no answer (no secret, output quoted to at most 500 characters).
    pub failure: Option<String>,
    /// How many times it was asked (2 after a malformed answer).
    pub attempts: u32,
    pub blocking: bool,
}

impl ReviewerOutcome {
    /// A reviewer that could not run (no role, a bad template).
    pub fn failed(name: &str, blocking: bool, why: String) -> ReviewerOutcome {
        ReviewerOutcome {
            name: name.to_string(),
            answer: None,
            failure: Some(why),
            attempts: 0,
            blocking,
        }
    }

    /// What the panel counts: the answer's findings (blocking ones capped at major for a
    /// non-blocking reviewer), or the `reviewer-failed` finding: major on a person's change,
    /// blocking on an agent's (`agent_origin`) when the reviewer is a blocking one, because an
    /// agent's change can make a reviewer fail (a path too deep to export, output that floods
    /// it, work that outlasts the time-out) and must not get a milder verdict by doing so.
    pub fn findings(&self, agent_origin: bool) -> Vec<Finding> {
        match &self.answer {
            Some(a) => a
                .findings
                .iter()
                .cloned()
                .map(|mut f| {
                    if !self.blocking && f.severity == Severity::Blocking {
                        f.severity = Severity::Major;
                    }
                    f
                })
                .collect(),
            None => {
                let why = self.failure.as_deref().unwrap_or("no answer");
                vec![if agent_origin && self.blocking {
                    answer::failed_on_agent_change(&self.name, why)
                } else {
                    answer::failed(&self.name, why)
                }]
            }
        }
    }
}

/// Runs the reviewers in parallel, each command reviewer in its own throwaway export of `head`
/// from the repository at `repo_root`, each attempt limited to `timeout`. One outcome per job,
/// in the jobs' order.
pub fn run_reviewers(
    repo_root: &Path,
    head: Oid,
    jobs: Vec<ReviewJob>,
    timeout: Duration,
) -> Vec<ReviewerOutcome> {
    std::thread::scope(|s| {
        let running: Vec<_> = jobs
            .into_iter()
            .map(|job| {
                let (name, blocking) = (job.name.clone(), job.blocking);
                let handle = s.spawn(move || run_one(repo_root, head, &job, timeout));
                (name, blocking, handle)
            })
            .collect();
        running
            .into_iter()
            .map(|(name, blocking, handle)| {
                handle.join().unwrap_or_else(|_| {
                    ReviewerOutcome::failed(
                        &name,
                        blocking,
                        "the reviewer's runner panicked".into(),
                    )
                })
            })
            .collect()
    })
}

/// Asks one reviewer, once more after a malformed answer.
fn run_one(repo_root: &Path, head: Oid, job: &ReviewJob, timeout: Duration) -> ReviewerOutcome {
    let mut secrets: Vec<String> = process::NEVER_PASSED
        .iter()
        .filter_map(|v| std::env::var(v).ok())
        .collect();
    let outcome =
        |answer: Option<Answer>, failure: Option<String>, attempts: u32| ReviewerOutcome {
            name: job.name.clone(),
            answer,
            failure,
            attempts,
            blocking: job.blocking,
        };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return outcome(None, Some(format!("starting the runtime: {e}")), 0),
    };
    let mut prompt = job.prompt.clone();
    for attempt in 1..=2 {
        let asked = match &job.backend {
            Backend::Command {
                argv,
                pass_env,
                set_env,
                client,
            } => {
                let command = Command {
                    argv,
                    pass_env,
                    set_env,
                    client: *client,
                };
                ask_command(&rt, repo_root, head, job, &command, &prompt, timeout)
            }
            Backend::Http {
                base_url,
                model,
                api_key_env,
            } => ask_http(base_url, model, api_key_env.as_deref(), &prompt, timeout)
                .map(|(text, key)| {
                    secrets.extend(key);
                    text
                })
                .map_err(|(e, key)| {
                    secrets.extend(key);
                    e
                }),
        };
        let text = match asked {
            Ok(text) => text,
            Err(why) => return outcome(None, Some(redact(&why, &secrets)), attempt),
        };
        match answer::parse_answer(&job.name, &text) {
            Ok(a) => return outcome(Some(a), None, attempt),
            Err(why) if attempt == 1 => {
                prompt = format!(
                    "{}\n\nYour previous answer could not be used: {why}\nAnswer again, with only the JSON object described above.\n",
                    job.prompt
                );
            }
            Err(why) => {
                let why = format!("its answer was malformed twice; the second time: {why}");
                return outcome(None, Some(redact(&why, &secrets)), attempt);
            }
        }
    }
    unreachable!("the loop returns on its second attempt")
}

/// A command reviewer's program, what it is passed, and the agent CLI a preset names.
struct Command<'a> {
    argv: &'a [String],
    pass_env: &'a [String],
    set_env: &'a [(String, String)],
    client: Option<&'static super::clients::Client>,
}

/// Runs a command reviewer once in a fresh export of `head`; its answer (a preset CLI's final
/// message, else its stdout), or why not.
fn ask_command(
    rt: &tokio::runtime::Runtime,
    repo_root: &Path,
    head: Oid,
    job: &ReviewJob,
    command: &Command,
    prompt: &str,
    timeout: Duration,
) -> Result<String, String> {
    let pass_env = command.pass_env;
    let Some((program, args)) = command.argv.split_first() else {
        return Err("the reviewer's command is empty".into());
    };
    let dir = tempfile::Builder::new()
        .prefix("atelier-review-")
        .tempdir()
        .map_err(|e| format!("creating a temporary directory: {e}"))?;
    let root = dir.path().join("checkout");
    export_tree(repo_root, head, &root)?;
    // A preset's answer is read from every line it prints, not from the kept output: a final
    // answer longer than the output kept still reaches the reviewer's verdict.
    let report = command
        .client
        .map(|c| std::sync::Arc::new(std::sync::Mutex::new(c.report())));
    let mut spawn = process::Spawn {
        lines: report
            .clone()
            .map(|r| process::LineTap(r as std::sync::Arc<std::sync::Mutex<dyn process::Lines>>)),
        program: program.clone(),
        args: args.to_vec(),
        cwd: root,
        env: process::scrubbed_env(
            pass_env,
            &[("ATELIER_REVIEWER".to_string(), job.name.clone())]
                .into_iter()
                .chain(command.set_env.iter().cloned())
                .collect::<Vec<_>>(),
        ),
        stdin: prompt.as_bytes().to_vec(),
        timeout,
        silence: None,
        max_output: MAX_OUTPUT,
        sandbox: job.sandbox.clone().map(|s| s.write(dir.path())),
    };
    let state = match command.client {
        Some(c) => Some(
            c.prepare(&mut spawn)
                .map_err(|e| format!("creating {}'s state directory: {e}", c.name))?,
        ),
        None => None,
    };
    let ran = rt.block_on(process::run(&spawn, |_| {}));
    discard(dir);
    drop(state);
    let out = ran.map_err(|e| format!("`{program}` could not start: {e}"))?;
    if out.timed_out {
        return Err(format!(
            "timed out after {}s{}",
            timeout.as_secs_f32(),
            excerpt(&out.output)
        ));
    }
    match out.code {
        Some(0) => Ok(report
            .and_then(|r| r.lock().ok()?.answer())
            .unwrap_or_else(|| out.stdout.clone())),
        Some(code) => Err(format!("exited with code {code}{}", excerpt(&out.output))),
        None => Err(format!("was killed by a signal{}", excerpt(&out.output))),
    }
}

/// Asks an http reviewer once; the reply, or why not. The key read (if any) comes back too, so
/// that it can be kept out of every reason.
fn ask_http(
    base_url: &str,
    model: &str,
    key_env: Option<&str>,
    prompt: &str,
    timeout: Duration,
) -> Result<(String, Option<String>), (String, Option<String>)> {
    let key = match key_env {
        None => None,
        Some(name) if process::never_passed(name) => {
            return Err((
                format!("api_key_env = \"{name}\" names a secret atelier never gives to agents; use the endpoint's own key variable"),
                None,
            ))
        }
        Some(name) => match std::env::var(name) {
            Ok(v) => Some(v),
            Err(_) => {
                return Err((
                    format!("the API key variable {name} is not set in atelier's environment"),
                    None,
                ))
            }
        },
    };
    match agent::http::chat(base_url, model, key.as_deref(), prompt, timeout) {
        Ok(text) => Ok((text, key)),
        Err(e) => Err((e, key)),
    }
}

/// `: its output ended with: …`, the last `EXCERPT` characters on one line, or nothing.
fn excerpt(output: &str) -> String {
    let trimmed = output.trim();
    if trimmed.is_empty() {
        return String::new();
    }
    let chars: Vec<char> = trimmed.chars().collect();
    let tail: String = chars[chars.len().saturating_sub(EXCERPT)..]
        .iter()
        .map(|c| if c.is_control() { ' ' } else { *c })
        .collect();
    format!("; its output ended with: {tail}")
}

/// `text` with every secret value (of eight characters or more) replaced.
fn redact(text: &str, secrets: &[String]) -> String {
    let mut out = text.to_string();
    for s in secrets.iter().filter(|s| s.len() >= 8) {
        out = out.replace(s.as_str(), "[redacted]");
    }
    out
}

/// Writes the files of `head`'s tree into `into` (a new directory): blobs with their executable
/// bit, symbolic links as links; submodules are left out. An entry name that could escape the
/// directory or plant a `.git` is refused (git refuses them too).
fn export_tree(repo_root: &Path, head: Oid, into: &Path) -> Result<(), String> {
    let repo = Repository::open(repo_root)
        .map_err(|e| format!("opening the repository at {}: {e}", repo_root.display()))?;
    let tree = repo
        .find_commit(head)
        .and_then(|c| c.tree())
        .map_err(|e| format!("reading the head {head}: {e}"))?;
    std::fs::create_dir(into).map_err(|e| format!("creating {}: {e}", into.display()))?;
    // What would configure the reviewing CLI (`.claude/settings.json` hooks, `.mcp.json`
    // servers, aider's `.env` and `.aider.conf.yml`, an editor's tasks) is left out: a proposal
    // must not set up the program that reviews it. The diff it is given still shows them.
    let leave_out = |path: &str| crate::governance::handoff::handed_off(path).is_some();
    write_tree(&repo, &tree, into, 0, "", &leave_out)
}

/// Writes the files of the tree `tree` (a commit's, or a merge tree) into `into`, a new
/// directory, as [`export_tree`] does.
pub(crate) fn export_tree_id(repo_root: &Path, tree: Oid, into: &Path) -> Result<(), String> {
    let repo = Repository::open(repo_root)
        .map_err(|e| format!("opening the repository at {}: {e}", repo_root.display()))?;
    let tree = repo
        .find_tree(tree)
        .map_err(|e| format!("reading the tree {tree}: {e}"))?;
    std::fs::create_dir(into).map_err(|e| format!("creating {}: {e}", into.display()))?;
    write_tree(&repo, &tree, into, 0, "", &|_| false)
}

/// `prefix` is the tree's path in the head's tree (`""` at its root); an entry whose path
/// `leave_out` names is not written.
fn write_tree(
    repo: &Repository,
    tree: &Tree<'_>,
    dir: &Path,
    depth: usize,
    prefix: &str,
    leave_out: &dyn Fn(&str) -> bool,
) -> Result<(), String> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::PermissionsExt;
    if depth > 256 {
        return Err("the head's tree is nested more than 256 levels deep".into());
    }
    for entry in tree.iter() {
        let name = entry.name_bytes();
        let unsafe_name = name.is_empty()
            || name == b"."
            || name == b".."
            || name.contains(&b'/')
            || name.contains(&0)
            || name.eq_ignore_ascii_case(b".git");
        if unsafe_name {
            return Err(format!(
                "the head's tree has an entry named `{}`, which git refuses to check out",
                String::from_utf8_lossy(name)
            ));
        }
        let at = format!("{prefix}{}", String::from_utf8_lossy(name));
        if leave_out(&at) {
            continue;
        }
        let path = dir.join(std::ffi::OsStr::from_bytes(name));
        let fail = |e: &dyn std::fmt::Display| format!("writing {}: {e}", path.display());
        match entry.kind() {
            Some(ObjectType::Tree) => {
                std::fs::create_dir(&path).map_err(|e| fail(&e))?;
                let sub = repo.find_tree(entry.id()).map_err(|e| fail(&e))?;
                write_tree(repo, &sub, &path, depth + 1, &format!("{at}/"), leave_out)?;
            }
            Some(ObjectType::Blob) => {
                let blob = repo.find_blob(entry.id()).map_err(|e| fail(&e))?;
                if entry.filemode() == 0o120000 {
                    std::os::unix::fs::symlink(std::ffi::OsStr::from_bytes(blob.content()), &path)
                        .map_err(|e| fail(&e))?;
                } else {
                    std::fs::write(&path, blob.content()).map_err(|e| fail(&e))?;
                    if entry.filemode() == 0o100755 {
                        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
                            .map_err(|e| fail(&e))?;
                    }
                }
            }
            // A submodule's commit is not in this repository.
            _ => {}
        }
    }
    Ok(())
}

/// Deletes a reviewer's directory, first making writable any directory it made read-only
/// (links are never followed). Best effort: a leftover is in the system's temporary directory.
pub(crate) fn discard(dir: tempfile::TempDir) {
    use std::os::unix::fs::PermissionsExt;
    fn unlock(path: &Path) {
        let Ok(meta) = std::fs::symlink_metadata(path) else {
            return;
        };
        if meta.is_dir() {
            let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700));
            if let Ok(entries) = std::fs::read_dir(path) {
                for e in entries.flatten() {
                    unlock(&e.path());
                }
            }
        }
    }
    unlock(dir.path());
    let _ = dir.close();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::governance::review::{critic, Verdict};
    use std::io::{Read, Write};
    use std::path::PathBuf;
    use std::time::Instant;

    const APPROVE: &str = r#"{"verdict": "approve", "findings": []}"#;

    /// A repository with one commit; its root and the commit.
    fn repo() -> (tempfile::TempDir, Oid) {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = Repository::init(dir.path()).expect("init");
        std::fs::create_dir_all(dir.path().join("src")).expect("mkdir");
        std::fs::write(dir.path().join("README.md"), "hello\n").expect("write");
        std::fs::write(dir.path().join("src/a.rs"), "fn a() {}\n").expect("write");
        std::fs::write(dir.path().join("run.sh"), "#!/bin/sh\n").expect("write");
        std::fs::set_permissions(
            dir.path().join("run.sh"),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .expect("chmod");
        std::os::unix::fs::symlink("README.md", dir.path().join("link")).expect("link");
        let mut index = repo.index().expect("index");
        index
            .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
            .expect("add");
        index.write().expect("write index");
        let tree = repo
            .find_tree(index.write_tree().expect("tree"))
            .expect("tree");
        let sig = git2::Signature::new("t", "t@example.com", &git2::Time::new(1, 0)).expect("sig");
        let head = repo
            .commit(Some("HEAD"), &sig, &sig, "one", &tree, &[])
            .expect("commit");
        (dir, head)
    }

    /// Everything a reviewer must not change: refs, index and the working tree's files.
    fn state(root: &Path) -> Vec<String> {
        let repo = Repository::open(root).expect("open");
        let mut out: Vec<String> = repo
            .references()
            .expect("refs")
            .flatten()
            .map(|r| format!("{} {:?}", r.name().unwrap_or("?"), r.target()))
            .collect();
        out.push(format!("HEAD {:?}", repo.head().expect("head").target()));
        out.push(format!(
            "index {}",
            std::fs::read(root.join(".git/index")).expect("index").len()
        ));
        fn walk(dir: &Path, out: &mut Vec<String>) {
            let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
                .expect("read_dir")
                .flatten()
                .map(|e| e.path())
                .collect();
            entries.sort();
            for p in entries {
                if p.file_name().is_some_and(|n| n == ".git") {
                    continue;
                }
                let meta = std::fs::symlink_metadata(&p).expect("meta");
                if meta.is_dir() {
                    walk(&p, out);
                } else if meta.file_type().is_symlink() {
                    out.push(format!("{} -> {:?}", p.display(), std::fs::read_link(&p)));
                } else {
                    out.push(format!(
                        "{} {:?}",
                        p.display(),
                        std::fs::read(&p).expect("read")
                    ));
                }
            }
        }
        walk(root, &mut out);
        out
    }

    /// A scripted reviewer: `bash` running `script` (written into `dir`), never executed
    /// directly (writing and executing files from parallel tests can fail with ETXTBSY).
    fn scripted(dir: &Path, name: &str, script: &str, pass_env: &[&str]) -> ReviewJob {
        let path = dir.join(format!("{name}.sh"));
        std::fs::write(&path, script).expect("write script");
        ReviewJob {
            name: name.to_string(),
            backend: Backend::Command {
                argv: vec!["bash".into(), path.display().to_string()],
                pass_env: pass_env.iter().map(|s| s.to_string()).collect(),
                set_env: Vec::new(),
                client: None,
            },
            prompt: "Review this change.\n".into(),
            blocking: true,
            sandbox: None,
        }
    }

    #[test]
    fn scripted_reviewers_approve_block_fail_and_run_in_parallel() {
        let (repo_dir, head) = repo();
        let scripts = tempfile::tempdir().expect("tempdir");
        let d = scripts.path().display().to_string();
        let block = r#"cat >/dev/null
echo "I read the change. It removes an assertion."
echo '```json'
echo '{"verdict": "block", "findings": [{"severity": "blocking", "category": "weakened-test", "file": "src/a.rs", "line": 1, "message": "an assertion was removed", "hint": "restore it"}]}'
echo '```'"#;
        let jobs = vec![
            scripted(scripts.path(), "approves", &format!("cat >/dev/null\necho '{APPROVE}'"), &[]),
            scripted(scripts.path(), "blocks", block, &[]),
            scripted(scripts.path(), "hangs", "sleep 30\necho '{}'", &[]),
            scripted(
                scripts.path(),
                "babbles",
                &format!("cat >/dev/null\necho x >> {d}/babbles.count\necho 'Looks fine to me!'"),
                &[],
            ),
            scripted(
                scripts.path(),
                "learns",
                &format!(
                    "prompt=$(cat)\necho \"$prompt\" >> {d}/learns.prompts\nif [ -e {d}/learns.once ]; then\n  echo '{APPROVE}'\nelse\n  touch {d}/learns.once\n  echo 'verdict: fine'\nfi"
                ),
                &[],
            ),
            scripted(
                scripts.path(),
                "crashes",
                "cat >/dev/null\necho 'panicked at src/main.rs' >&2\nexit 3",
                &[],
            ),
            // Two slow reviewers: run one after the other, the panel would take over 4 s.
            scripted(scripts.path(), "slow1", &format!("sleep 1.5\necho '{APPROVE}'"), &[]),
            scripted(scripts.path(), "slow2", &format!("sleep 1.5\necho '{APPROVE}'"), &[]),
        ];
        let started = Instant::now();
        let out = run_reviewers(repo_dir.path(), head, jobs, Duration::from_secs(2));
        let elapsed = started.elapsed();
        assert!(elapsed < Duration::from_millis(3500), "took {elapsed:?}");
        let by: BTreeMap<&str, &ReviewerOutcome> =
            out.iter().map(|o| (o.name.as_str(), o)).collect();
        assert_eq!(out.len(), 8);
        assert_eq!(out[0].name, "approves", "outcomes keep the jobs' order");

        let verdict = |name: &str| critic(&by[name].findings(false));
        assert_eq!(verdict("approves"), Verdict::Approve);
        assert_eq!(by["approves"].attempts, 1);

        assert_eq!(verdict("blocks"), Verdict::Block);
        let f = &by["blocks"].findings(false)[0];
        assert_eq!(
            (f.reviewer.as_str(), f.category.as_str()),
            ("blocks", "weakened-test")
        );

        let failure = |name: &str| by[name].failure.clone().unwrap_or_default();
        for name in ["hangs", "babbles", "crashes"] {
            assert!(by[name].answer.is_none(), "{name}");
            let fs = by[name].findings(false);
            assert_eq!(fs.len(), 1, "{name}");
            assert_eq!(fs[0].category, "reviewer-failed", "{name}");
            assert_eq!(
                verdict(name),
                Verdict::Revise,
                "{name}: a failure never approves"
            );
            // On an agent's change, a reviewer that could not run blocks.
            assert_eq!(
                critic(&by[name].findings(true)),
                Verdict::Block,
                "{name}: an agent's change is not merged unjudged"
            );
        }
        assert!(
            failure("hangs").starts_with("timed out after 2s"),
            "{}",
            failure("hangs")
        );
        assert_eq!(by["hangs"].attempts, 1, "a time-out is not retried");
        assert!(
            failure("babbles").contains("malformed twice"),
            "{}",
            failure("babbles")
        );
        assert!(failure("babbles").contains("Looks fine to me!"));
        assert_eq!(by["babbles"].attempts, 2);
        let asked = std::fs::read_to_string(scripts.path().join("babbles.count")).expect("count");
        assert_eq!(asked.lines().count(), 2, "asked twice, not more");
        assert!(
            failure("crashes").starts_with("exited with code 3"),
            "{}",
            failure("crashes")
        );
        assert!(failure("crashes").contains("panicked at src/main.rs"));

        assert_eq!(verdict("learns"), Verdict::Approve);
        assert_eq!(by["learns"].attempts, 2);
        let prompts =
            std::fs::read_to_string(scripts.path().join("learns.prompts")).expect("prompts");
        assert!(
            prompts.contains("Your previous answer could not be used: no JSON object found"),
            "the retry says what was wrong:\n{prompts}"
        );
        assert_eq!(verdict("slow1"), Verdict::Approve);
        assert_eq!(verdict("slow2"), Verdict::Approve);
    }

    #[test]
    fn a_reviewer_writes_only_into_its_throwaway_checkout() {
        let (repo_dir, head) = repo();
        let before = state(repo_dir.path());
        let scripts = tempfile::tempdir().expect("tempdir");
        let d = scripts.path().display().to_string();
        // It sees the head's files (modes and links too) and no repository, and then tries to
        // change everything it can reach from where it is.
        let script = format!(
            r#"cat >/dev/null
pwd > {d}/where
seen="$(cat README.md) $(cat src/a.rs) $(test -x run.sh && echo exec) $(readlink link) $(test -e .git || echo no-git)"
echo "$seen" > {d}/seen
echo tampered > README.md
rm -f src/a.rs
echo escaped > ../escaped
git init -q . 2>/dev/null; git add -A 2>/dev/null; git -c user.name=x -c user.email=x@y commit -qm x 2>/dev/null
chmod -R a-w . 2>/dev/null
echo '{APPROVE}'"#
        );
        let job = scripted(scripts.path(), "writer", &script, &[]);
        let out = run_reviewers(repo_dir.path(), head, vec![job], Duration::from_secs(20));
        assert!(out[0].answer.is_some(), "{:?}", out[0].failure);
        let seen = std::fs::read_to_string(scripts.path().join("seen")).expect("seen");
        assert_eq!(seen.trim(), "hello fn a() {} exec README.md no-git");
        let checkout = std::fs::read_to_string(scripts.path().join("where")).expect("where");
        let checkout = PathBuf::from(checkout.trim());
        assert!(!checkout.starts_with(repo_dir.path()));
        assert!(!checkout.exists(), "the checkout is deleted");
        assert!(
            !checkout.parent().expect("parent").exists(),
            "and its directory"
        );
        assert_eq!(
            state(repo_dir.path()),
            before,
            "the repository is untouched"
        );
    }

    #[test]
    fn a_reviewer_sees_no_secret_from_the_environment() {
        let (repo_dir, head) = repo();
        // Only this test sets or reads these two names; the token is removed again below.
        std::env::set_var("GITHUB_TOKEN", "ghp_reviewer_must_not_see_this_0123456789");
        std::env::set_var("ATELIER_TEST_REVIEWER_OK", "visible");
        let scripts = tempfile::tempdir().expect("tempdir");
        let script = r#"cat >/dev/null
names=$(env | cut -d= -f1 | sort | tr '\n' ' ')
printf '{"verdict": "approve", "findings": [{"severity": "minor", "category": "env", "message": "%s", "hint": "%s"}]}' "$names" "$ATELIER_TEST_REVIEWER_OK $GITHUB_TOKEN""#;
        let job = scripted(
            scripts.path(),
            "envy",
            script,
            &["ATELIER_TEST_REVIEWER_OK", "GITHUB_TOKEN"],
        );
        let out = run_reviewers(repo_dir.path(), head, vec![job], Duration::from_secs(20));
        let answer = out[0].answer.as_ref().expect("answered");
        let f = &answer.findings[0];
        // bash itself sets PWD, SHLVL and `_`.
        let allowed = [
            "PATH",
            "HOME",
            "LANG",
            "ATELIER_REVIEWER",
            "ATELIER_TEST_REVIEWER_OK",
            "PWD",
            "SHLVL",
            "_",
        ];
        for name in f.message.split_whitespace() {
            assert!(
                allowed.contains(&name),
                "the reviewer saw {name}: {}",
                f.message
            );
        }
        assert!(f.message.contains("ATELIER_REVIEWER"));
        std::env::remove_var("GITHUB_TOKEN");
        assert_eq!(
            f.hint.trim(),
            "visible",
            "declared variables pass, GITHUB_TOKEN never"
        );
    }

    /// A one-request OpenAI-shaped endpoint: its base URL, and the request it got.
    fn endpoint(status: &'static str, body: String) -> (String, std::thread::JoinHandle<String>) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let handle = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().expect("accept");
            let mut req = Vec::new();
            let mut buf = [0u8; 8192];
            loop {
                let n = s.read(&mut buf).expect("read");
                req.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&req).to_string();
                if let Some(end) = text.find("\r\n\r\n") {
                    let len = text[..end]
                        .lines()
                        .find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.eq_ignore_ascii_case("content-length")
                                .then(|| v.trim().parse::<usize>().ok())?
                        })
                        .unwrap_or(0);
                    if req.len() >= end + 4 + len {
                        break;
                    }
                }
                if n == 0 {
                    break;
                }
            }
            let reply = format!(
                "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            s.write_all(reply.as_bytes()).expect("reply");
            String::from_utf8_lossy(&req).into_owned()
        });
        (format!("http://{addr}/v1"), handle)
    }

    fn http_job(base_url: String) -> ReviewJob {
        ReviewJob {
            name: "remote".into(),
            backend: Backend::Http {
                base_url,
                model: "judge-1".into(),
                api_key_env: Some("ATELIER_TEST_REVIEW_KEY".into()),
            },
            prompt: "Review the change to src/a.rs.".into(),
            blocking: true,
            sandbox: None,
        }
    }

    #[test]
    fn an_http_reviewer_blocks_and_an_http_error_is_a_failure() {
        let (repo_dir, head) = repo();
        std::env::set_var("ATELIER_TEST_REVIEW_KEY", "sk-test-key-0123456789");
        let content = r#"{"verdict": "block", "findings": [{"severity": "blocking", "category": "secret", "message": "a key is committed", "hint": "remove it"}]}"#;
        let body = serde_json::json!({"choices": [{"message": {"role": "assistant", "content": content}}]});
        let (url, server) = endpoint("200 OK", body.to_string());
        let out = run_reviewers(
            repo_dir.path(),
            head,
            vec![http_job(url)],
            Duration::from_secs(10),
        );
        let request = server.join().expect("server");
        assert!(
            request.contains("Bearer sk-test-key-0123456789"),
            "{request}"
        );
        assert!(request.contains("Review the change to src/a.rs."));
        assert!(request.contains("\"judge-1\""));
        assert_eq!(critic(&out[0].findings(false)), Verdict::Block);
        assert_eq!(out[0].findings(false)[0].reviewer, "remote");

        let (url, server) = endpoint(
            "500 Internal Server Error",
            "{\"error\": \"sk-test-key-0123456789 overloaded\"}".into(),
        );
        let out = run_reviewers(
            repo_dir.path(),
            head,
            vec![http_job(url)],
            Duration::from_secs(10),
        );
        server.join().expect("server");
        let why = out[0].failure.clone().expect("a failure");
        assert!(why.contains("HTTP 500"), "{why}");
        assert!(
            !why.contains("sk-test-key"),
            "the key is never quoted: {why}"
        );
        assert_eq!(out[0].findings(false)[0].category, "reviewer-failed");
        assert_eq!(critic(&out[0].findings(false)), Verdict::Revise);
    }

    #[test]
    fn the_prompt_carries_the_handoff_and_the_answer_format() {
        let handoff = Handoff {
            title: "Retry backoff".into(),
            rationale: "Retries hammer the server.".into(),
            origin: Some("run r1".into()),
            contracts: vec![TaskContract {
                task: "T1".into(),
                criteria: vec!["retries wait 10s * 2^(n-1)".into()],
                checks: vec!["cargo test -q retry_backoff".into()],
            }],
            diff: "--- a/src/a.rs\n+++ b/src/a.rs\n+{{ not a template }}\n".into(),
            checks: vec![CheckResult {
                name: "test".into(),
                passed: false,
                detail: "1 failed".into(),
            }],
            builtin_findings: vec![answer::failed("secrets", "x")],
        };
        let p = render_prompt(
            DEFAULT_TEMPLATE,
            "adversary",
            "Which criterion could pass?",
            &handoff,
        )
        .expect("renders");
        for want in [
            "You are `adversary`",
            "Which criterion could pass?",
            "# Retry backoff",
            "Written by an agent: run r1",
            "Retries hammer the server.",
            "### T1",
            "- retries wait 10s * 2^(n-1)",
            "- `cargo test -q retry_backoff`",
            "- test: FAILED (1 failed)",
            "- [major] secrets/reviewer-failed",
            "+{{ not a template }}",
            answer::SCHEMA,
        ] {
            assert!(p.contains(want), "`{want}` missing from:\n{p}");
        }
        // A template that forgets the format gets it; an unknown variable is an error.
        let p = render_prompt("Judge {{ handoff.title }}.", "r", "f", &handoff).expect("renders");
        assert!(p.starts_with("Judge Retry backoff.") && p.contains(answer::SCHEMA));
        let e = render_prompt("{{ handoff.transcript }}", "r", "f", &handoff).expect_err("strict");
        assert!(e.contains("reviewer template"), "{e}");
        // A huge diff is cut.
        let big = Handoff {
            diff: "é".repeat(MAX_DIFF),
            ..Handoff::default()
        };
        let p = render_prompt(DEFAULT_TEMPLATE, "r", "f", &big).expect("renders");
        assert!(p.contains("(cut short") && p.len() < MAX_DIFF + 10_000);
    }
}
