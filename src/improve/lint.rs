//! The `lint` proposer's work: the fix command of `[proposers.lint]` (read from the protected
//! branch's atelier.toml, never the working tree's) runs for one lint family in a fresh
//! worktree of the protected branch's tip, contained like a gauntlet step; then the gauntlet
//! runs there on the fixed tree. What it produced becomes a patch only when something changed
//! and every step passed; the worktree and its branch are removed either way.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use serde::Serialize;

use crate::agent::process;
use crate::config::{Config, LintConfig};
use crate::git;
use crate::swarm::runtime::sandbox;
use crate::workflow::error::{Context, Result};
use crate::workflow::Workspace;

/// A gauntlet step as it ran on the fixed tree.
#[derive(Debug, Clone, Serialize)]
pub struct StepRun {
    pub name: String,
    pub passed: bool,
    pub ms: u64,
}

/// What the fix command and the gauntlet did.
#[derive(Debug, Clone, Serialize)]
pub struct Linted {
    pub family: String,
    /// The command as run (after `{family}` was replaced).
    pub command: Vec<String>,
    pub base: String,
    /// The files the fixes changed, and the patch (empty when nothing changed).
    pub changed: Vec<String>,
    #[serde(skip)]
    pub patch: Vec<u8>,
    pub steps: Vec<StepRun>,
    /// The first step that failed, with the last lines of its output.
    pub failed: Option<String>,
    pub contained: bool,
}

fn bad(what: String) -> crate::workflow::Error {
    crate::workflow::Error::Input(what)
}

/// The protected branch's atelier.toml, parsed.
pub fn branch_config(ws: &Workspace) -> Result<Config> {
    config_at(ws, git::branch_tip(&ws.repo, ws.branch())?)
}

/// The atelier.toml of commit `at` of the protected branch, parsed.
fn config_at(ws: &Workspace, at: git2::Oid) -> Result<Config> {
    let tree = ws.repo.find_commit(at)?.tree()?;
    let label = format!("{} at {}", crate::config::FILE, ws.branch());
    let bytes = git::read_file(&ws.repo, &tree, crate::config::FILE)?.ok_or_else(|| {
        bad(format!(
            "{label}: not found; `propose --from lint` runs the fix command the protected branch's atelier.toml names"
        ))
    })?;
    Ok(Config::parse(&label, &String::from_utf8_lossy(&bytes))?)
}

/// The command for `family`, checked against the configured families.
pub fn command_for(lint: &LintConfig, family: &str, branch: &str) -> Result<Vec<String>> {
    let ok_chars = !family.is_empty()
        && family
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | ':'));
    if !ok_chars {
        return Err(bad(format!(
            "--family {family:?}: a lint family is letters, digits, `_`, `-` and `:` (e.g. style)"
        )));
    }
    if !lint.families.is_empty() && !lint.families.iter().any(|f| f == family) {
        return Err(bad(format!(
            "--family {family}: not one of [proposers.lint] families on {branch} ({}); add it there through a proposal",
            lint.families.join(", ")
        )));
    }
    Ok(lint
        .command
        .iter()
        .map(|a| a.replace("{family}", family))
        .collect())
}

/// Runs the fix command for `family` and then the gauntlet, in a worktree of the protected
/// branch's tip that is removed afterwards.
pub fn run(ws: &Workspace, family: &str, clock_now: i64) -> Result<Linted> {
    // One commit for everything: the fix command, the gauntlet and the tree they run on.
    let base = git::branch_tip(&ws.repo, ws.branch())?;
    let config = config_at(ws, base)?;
    let lint = config.proposers.lint.as_ref().ok_or_else(|| {
        bad(format!(
            "{} at {} has no [proposers.lint]: add one through a proposal, e.g. command = [\"cargo\", \"clippy\", \"--fix\", \"--allow-dirty\", \"--allow-no-vcs\", \"--\", \"-W\", \"clippy::{{family}}\"] (docs/swarm.md, \"Machine-applicable fixes\")",
            crate::config::FILE,
            ws.branch()
        ))
    })?;
    let command = command_for(lint, family, ws.branch())?;
    in_worktree(ws, "lint", base, clock_now, |dir, rt, stop, sandboxes| {
        fix_and_check(
            ws, &config, lint, sandboxes, dir, base, family, command, rt, stop,
        )
    })
}

/// Runs `work` in a fresh worktree of commit `at` under `.atelier/proposers/`, with a runtime,
/// the interrupt handlers (installed before the worktree exists, so it is always removed) and
/// the merged containment grants; the worktree and its branch are removed afterwards.
pub(super) fn in_worktree<T>(
    ws: &Workspace,
    kind: &str,
    at: git2::Oid,
    clock_now: i64,
    work: impl FnOnce(
        &Path,
        &tokio::runtime::Runtime,
        &mut process::Interrupts,
        Option<sandbox::Sandboxes>,
    ) -> Result<T>,
) -> Result<T> {
    // The containment decision and the gauntlet's grants are the merged ones (as for a run).
    let sandboxes = sandbox::sandboxes(ws, &BTreeSet::new())?;
    let repo = &ws.repo;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let mut stop = {
        let _in = rt.enter();
        process::Interrupts::install().context("installing the signal handlers")?
    };
    let name = format!("{kind}-{}-{clock_now}", std::process::id());
    let dir = ws.atelier_dir().join("proposers").join(&name);
    std::fs::create_dir_all(dir.parent().expect("a parent"))
        .with_context(|| format!("creating {}", dir.display()))?;
    let branch = format!("atelier/proposers/{name}");
    git::add_worktree(repo, &name, &dir, &branch, at)?;
    let result = work(&dir, &rt, &mut stop, sandboxes);
    let _ = git::remove_worktree(repo, &name, &dir);
    if let Ok(mut b) = repo.find_branch(&branch, git2::BranchType::Local) {
        let _ = b.delete();
    }
    result
}

#[allow(clippy::too_many_arguments)]
fn fix_and_check(
    ws: &Workspace,
    config: &Config,
    lint: &LintConfig,
    sandboxes: Option<sandbox::Sandboxes>,
    dir: &Path,
    base: git2::Oid,
    family: &str,
    command: Vec<String>,
    rt: &tokio::runtime::Runtime,
    stop: &mut process::Interrupts,
) -> Result<Linted> {
    let common = ws.repo.commondir().to_path_buf();
    let target = sandbox::shared_target(config, &ws.root);
    let sandbox = sandboxes.as_ref().map(|s| {
        let mut b = s.gauntlet.clone().write(dir).read(&common);
        if let Some(t) = &target {
            b = b.write(t);
        }
        b
    });
    let mut env_extra = vec![("ATELIER_LINT_FAMILY".to_string(), family.to_string())];
    if let Some(t) = &target {
        env_extra.push(("CARGO_TARGET_DIR".into(), t.display().to_string()));
    }
    let spawn = |program: String, args: Vec<String>, timeout: Duration| process::Spawn {
        lines: None,
        program,
        args,
        cwd: dir.to_path_buf(),
        env: process::scrubbed_env(&[], &env_extra),
        stdin: Vec::new(),
        timeout,
        silence: None,
        max_output: config.swarm.max_output,
        sandbox: sandbox.clone(),
    };
    let interrupted =
        || bad("interrupted: every program it started was stopped; nothing proposed".into());
    let fix = spawn(
        command[0].clone(),
        command[1..].to_vec(),
        lint.timeout.duration(),
    );
    let o = rt
        .block_on(process::run_or_interrupted(&fix, stop))
        .with_context(|| format!("starting the fix command `{}`", command[0]))?
        .ok_or_else(interrupted)?;
    if !o.success() {
        return Err(bad(format!(
            "the fix command `{}` {}; nothing proposed. Its last output:\n{}",
            command.join(" "),
            if o.timed_out {
                format!("ran past {}", lint.timeout)
            } else {
                format!(
                    "exited with {}",
                    o.code.map_or("a signal".into(), |c| c.to_string())
                )
            },
            tail(&o.output)
        )));
    }
    let (tree, changed) = git::snapshot(&common, dir, base)?;
    let mut out = Linted {
        family: family.to_string(),
        command,
        base: base.to_string(),
        changed,
        patch: Vec::new(),
        steps: Vec::new(),
        failed: None,
        contained: sandbox.is_some(),
    };
    if out.changed.is_empty() {
        return Ok(out);
    }
    for step in &config.gauntlet.steps {
        let s = spawn(
            "sh".into(),
            vec!["-c".into(), step.run.clone()],
            step.timeout.duration(),
        );
        let o = rt
            .block_on(process::run_or_interrupted(&s, stop))
            .with_context(|| format!("starting gauntlet step {}", step.name))?
            .ok_or_else(interrupted)?;
        let passed = o.success();
        out.steps.push(StepRun {
            name: step.name.clone(),
            passed,
            ms: u64::try_from(o.elapsed.as_millis()).unwrap_or(u64::MAX),
        });
        if !passed {
            out.failed = Some(format!("{}: {}", step.name, tail(&o.output)));
            return Ok(out);
        }
    }
    // The gauntlet judges the fixed tree; it must not have changed it.
    let (after, _) = git::snapshot(&common, dir, base)?;
    if after != tree {
        out.failed = Some("the gauntlet changed the fixed files while it ran".into());
        return Ok(out);
    }
    let base_tree = ws.repo.find_commit(base)?.tree()?;
    out.patch = git::diff_text(&ws.repo, &base_tree, &ws.repo.find_tree(tree)?)?;
    Ok(out)
}

/// The last lines of a program's output.
pub(super) fn tail(output: &str) -> String {
    let lines: Vec<&str> = output.lines().collect();
    lines[lines.len().saturating_sub(10)..].join("\n")
}
