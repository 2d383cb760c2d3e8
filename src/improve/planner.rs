//! The `agent` proposer's first half: the `proposer` role (a model) reads a goal, the list of
//! the repository's files and what the runs measured, and writes a plan. The plan then goes
//! through the contract validator (`plan check`'s refusals) before any worker runs; the CLI
//! runs it with the swarm and proposes the result.
//!
//! The proposer runs like a worker of its role: a command in a fresh worktree of the protected
//! branch's tip (contained by the role's grants; the prompt on stdin, the plan on stdout), or an
//! OpenAI-compatible endpoint (the prompt sent, the reply read). Its prompt is
//! `prompts/proposer.j2` as the protected branch holds it, else [`DEFAULT_TEMPLATE`].

use std::collections::BTreeSet;
use std::time::Duration;

use minijinja::{Environment, UndefinedBehavior};
use serde::Serialize;

use crate::agent::{self, process};
use crate::git;
use crate::swarm::runtime::sandbox;
use crate::swarm::stats;
use crate::workflow::error::{Context, Result};
use crate::workflow::Workspace;

/// The role that writes plans.
pub const ROLE: &str = "proposer";
/// The most file paths the prompt lists.
pub const MAX_FILES: usize = 400;

/// The default proposer prompt: Atelier's own `prompts/proposer.j2`.
pub const DEFAULT_TEMPLATE: &str = include_str!("../../prompts/proposer.j2");

/// What the proposer's template sees.
#[derive(Debug, Serialize)]
struct Input<'a> {
    goal: &'a str,
    files: Vec<String>,
    files_cut: bool,
    telemetry: Vec<String>,
    roles: Vec<String>,
}

/// What the proposer wrote, and what the contract validator said about it.
#[derive(Debug, Clone, Serialize)]
pub struct Planned {
    /// The plan's text as extracted from the reply.
    pub plan: String,
    pub refusals: Vec<crate::swarm::plan::Refusal>,
    /// A reply that is not a plan at all (not TOML, no [plan]): why.
    pub unreadable: Option<String>,
}

fn bad(what: String) -> crate::workflow::Error {
    crate::workflow::Error::Input(what)
}

/// The plan in a reply: its first fenced ```toml block if it has one, else the whole reply.
pub fn extract_plan(reply: &str) -> String {
    let mut inside = false;
    let mut out = Vec::new();
    for line in reply.lines() {
        let t = line.trim();
        if !inside && (t == "```toml" || t == "```TOML") {
            inside = true;
            continue;
        }
        if inside && t == "```" {
            return out.join("\n") + "\n";
        }
        if inside {
            out.push(line);
        }
    }
    reply.to_string()
}

/// A few lines of what the runs measured, per role, for the proposer's prompt.
pub fn telemetry_lines(s: &stats::Stats) -> Vec<String> {
    let mut out = Vec::new();
    if !s.runs.is_empty() {
        out.push(format!("{} run(s)", s.runs.len()));
    }
    for (role, r) in &s.roles {
        let curve: Vec<String> = r
            .curve
            .iter()
            .map(|p| format!("attempt {}: {}/{} passed", p.attempt, p.passed, p.started))
            .collect();
        out.push(format!(
            "role {role}: {} task(s), {} succeeded, {} failed; {}; {} restart(s)",
            r.tasks,
            r.succeeded,
            r.failed,
            curve.join(", "),
            r.restarts
        ));
    }
    for (step, st) in &s.steps {
        out.push(format!(
            "step {step}: {} passed, {} failed, median {} ms",
            st.passed, st.failed, st.ms.p50
        ));
    }
    out
}

/// Renders the proposer's prompt.
pub fn prompt(
    template: &str,
    goal: &str,
    files: Vec<String>,
    telemetry: Vec<String>,
    roles: Vec<String>,
) -> Result<String> {
    let files_cut = files.len() > MAX_FILES;
    let input = Input {
        goal,
        files: files.into_iter().take(MAX_FILES).collect(),
        files_cut,
        telemetry,
        roles,
    };
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.set_auto_escape_callback(|_| minijinja::AutoEscape::None);
    env.add_template("proposer", template).map_err(|e| {
        bad(format!(
            "prompts/proposer.j2 (as the protected branch holds it): {e}; fix it with a proposal"
        ))
    })?;
    env.get_template("proposer")
        .and_then(|t| t.render(minijinja::value::Serde(&input)))
        .map_err(|e| bad(format!("prompts/proposer.j2 (as the protected branch holds it): {e}; fix it with a proposal")))
}

/// Asks the `proposer` role for a plan toward `goal` and checks it with the contract validator.
pub fn plan(ws: &Workspace, goal: &str, now: i64) -> Result<Planned> {
    let goal = goal.trim();
    if goal.is_empty() {
        return Err(bad("--goal: say what the change should achieve".into()));
    }
    let role = ws.config.roles.get(ROLE).ok_or_else(|| {
        bad(format!(
            "atelier.toml has no [roles.{ROLE}]: the agent proposer is a model that writes plans; add the role (a backend such as claude, or http) through a proposal (docs/swarm.md, \"A model's plan\")"
        ))
    })?;
    let backend = agent::backend(ROLE, role).map_err(|e| bad(e.to_string()))?;
    let repo = &ws.repo;
    let base = git::branch_tip(repo, ws.branch())?;
    let tree = repo.find_commit(base)?.tree()?;
    let template = agent::prompt::text_on_branch(repo, &tree, "prompts/proposer.j2", ws.branch())?
        .unwrap_or_else(|| DEFAULT_TEMPLATE.to_string());
    let mut files = Vec::new();
    tree.walk(git2::TreeWalkMode::PreOrder, |dir, entry| {
        if entry.kind() == Some(git2::ObjectType::Blob) {
            files.push(format!("{dir}{}", entry.name().unwrap_or("?")));
        }
        git2::TreeWalkResult::Ok
    })?;
    let logs = stats::load(&ws.atelier_dir().join("runs"), None)
        .map_err(|e| bad(format!("reading the runs for the proposer's prompt: {e}")))?;
    let telemetry = telemetry_lines(&stats::compute(&logs));
    let roles: Vec<String> = ws
        .config
        .roles
        .keys()
        .filter(|r| r.as_str() != ROLE)
        .cloned()
        .collect();
    if roles.is_empty() {
        return Err(bad(format!(
            "atelier.toml has no role besides [roles.{ROLE}] for the plan's tasks: add the roles workers run as"
        )));
    }
    let text = prompt(&template, goal, files, telemetry, roles)?;
    let timeout = ws.config.conductor.attempt_timeout.duration();
    let reply = ask(ws, ROLE, &backend, &text, timeout, now, Some(base))?;
    let plan = extract_plan(&reply);
    let roles: BTreeSet<String> = ws.config.roles.keys().cloned().collect();
    Ok(
        match crate::swarm::check(
            &[("proposer plan".to_string(), plan.clone())],
            &roles,
            &crate::swarm::reach(&ws.repo, &ws.config)?,
        ) {
            Ok(report) => Planned {
                plan,
                refusals: report.refusals,
                unreadable: None,
            },
            Err(e) => Planned {
                plan,
                refusals: Vec::new(),
                unreadable: Some(e.to_string()),
            },
        },
    )
}

/// Asks `role` (one of atelier's own roles: the proposer, the validator) with `prompt` and
/// returns its answer: an endpoint's reply, or a command's standard output. A command runs
/// contained by its role's grants, in a fresh worktree of `worktree` when given (removed
/// afterwards; what it writes there is discarded), else in an empty temporary directory.
pub fn ask(
    ws: &Workspace,
    role: &str,
    backend: &agent::Backend,
    prompt: &str,
    timeout: Duration,
    now: i64,
    worktree: Option<git2::Oid>,
) -> Result<String> {
    match backend {
        agent::Backend::Command {
            argv,
            pass_env,
            set_env,
            client: _,
        } => {
            let command = (argv.as_slice(), pass_env.as_slice(), set_env.as_slice());
            // A preset's final answer, or all a program printed.
            run_command(ws, role, worktree, command, prompt, timeout, now)
        }
        agent::Backend::Http {
            base_url,
            model,
            api_key_env,
        } => {
            let key = match api_key_env {
                None => None,
                Some(name) if process::never_passed(name) => {
                    return Err(bad(format!(
                        "[roles.{role}] api_key_env = \"{name}\" names a secret atelier never gives to agents"
                    )))
                }
                Some(name) => Some(std::env::var(name).map_err(|_| {
                    bad(format!(
                        "the API key variable {name} is not set in atelier's environment"
                    ))
                })?),
            };
            agent::http::chat(base_url, model, key.as_deref(), prompt, timeout)
                .map_err(|e| bad(format!("the {role} endpoint: {e}")))
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn run_command(
    ws: &Workspace,
    role: &str,
    base: Option<git2::Oid>,
    (argv, pass_env, set_env): (&[String], &[String], &[(String, String)]),
    prompt: &str,
    timeout: Duration,
    now: i64,
) -> Result<String> {
    let roles: BTreeSet<String> = [role.to_string()].into();
    let sandboxes = sandbox::sandboxes(ws, &roles)?;
    let repo = &ws.repo;
    // Interrupts are caught before the worktree exists, so it is always removed.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let mut stop = {
        let _in = rt.enter();
        process::Interrupts::install().context("installing the signal handlers")?
    };
    let name = format!("{role}-{}-{now}", std::process::id());
    let branch = format!("atelier/proposers/{name}");
    let scratch;
    let dir = match base {
        Some(base) => {
            let dir = ws.atelier_dir().join("proposers").join(&name);
            std::fs::create_dir_all(dir.parent().expect("a parent"))
                .with_context(|| format!("creating {}", dir.display()))?;
            git::add_worktree(repo, &name, &dir, &branch, base)?;
            dir
        }
        None => {
            scratch = tempfile::tempdir().context("creating a temporary directory")?;
            scratch.path().to_path_buf()
        }
    };
    let common = repo.commondir().to_path_buf();
    let pass: Vec<String> = pass_env
        .iter()
        .filter(|v| !process::never_passed(v))
        .cloned()
        .collect();
    let mut spawn = process::Spawn {
        lines: None,
        program: argv[0].clone(),
        args: argv[1..].to_vec(),
        cwd: dir.clone(),
        env: process::scrubbed_env(&pass, set_env),
        stdin: prompt.as_bytes().to_vec(),
        timeout,
        silence: None,
        max_output: ws.config.swarm.max_output,
        sandbox: sandboxes.as_ref().map(|s| {
            let grants = s
                .role(role)
                .unwrap_or_else(|| {
                    crate::agent::contain::Sandbox::new(crate::config::Network::None)
                })
                .write(&dir);
            // Only a worktree needs the repository's objects.
            if base.is_some() {
                grants.read(&common)
            } else {
                grants
            }
        }),
    };
    let client = ws
        .config
        .roles
        .get(role)
        .and_then(|r| crate::agent::clients::client(&r.backend));
    let state = client
        .map(|c| c.prepare(&mut spawn))
        .transpose()
        .context("creating the CLI's state directory")?;
    // A preset's final answer is read from every line it prints, however long.
    let report = client.map(|c| std::sync::Arc::new(std::sync::Mutex::new(c.report())));
    spawn.lines = report
        .clone()
        .map(|r| process::LineTap(r as std::sync::Arc<std::sync::Mutex<dyn process::Lines>>));
    let ran = rt
        .block_on(process::run_or_interrupted(&spawn, &mut stop))
        .with_context(|| format!("starting the {role} `{}`", argv[0]));
    if base.is_some() {
        let _ = git::remove_worktree(repo, &name, &dir);
        if let Ok(mut b) = repo.find_branch(&branch, git2::BranchType::Local) {
            let _ = b.delete();
        }
    }
    drop(state);
    let o = ran?.ok_or_else(|| {
        bad(format!(
            "interrupted: the {role} was stopped; nothing proposed"
        ))
    })?;
    if !o.success() {
        let lines: Vec<&str> = o.output.lines().collect();
        return Err(bad(format!(
            "the {role} `{}` {}; no answer. Its last output:\n{}",
            argv[0],
            if o.timed_out {
                "ran past the attempt timeout".to_string()
            } else {
                format!(
                    "exited with {}",
                    o.code.map_or("a signal".into(), |c| c.to_string())
                )
            },
            lines[lines.len().saturating_sub(10)..].join("\n")
        )));
    }
    Ok(report
        .and_then(|r| r.lock().ok()?.answer())
        .unwrap_or(o.stdout))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fenced_plan_is_taken_from_the_reply_else_the_whole_reply() {
        let reply = "Here is the plan:\n```toml\n[plan]\nid = \"p\"\n```\nthanks";
        assert_eq!(extract_plan(reply), "[plan]\nid = \"p\"\n");
        assert_eq!(extract_plan("[plan]\nid = \"q\"\n"), "[plan]\nid = \"q\"\n");
    }

    #[test]
    fn the_default_prompt_names_the_goal_roles_and_files() {
        let p = prompt(
            DEFAULT_TEMPLATE,
            "Make it faster",
            vec!["src/a.rs".into(), "README.md".into()],
            vec![],
            vec!["implementer".into()],
        )
        .expect("renders");
        assert!(
            p.contains("Make it faster") && p.contains("src/a.rs") && p.contains("(no runs yet)")
        );
        assert!(p.contains("role (one of: implementer)") && p.contains("role = \"implementer\""));
    }
}
