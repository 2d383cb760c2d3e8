//! The user-testing validator of `atelier cycle`: the scenario of `[validators.user_testing]`
//! (read from the protected branch, never from the proposal) run as a user would, on the
//! patched tree — a fresh worktree of the proposal's head — after its build commands. Every
//! command is contained like a gauntlet step and runs in a scrubbed environment (PATH and LANG,
//! an empty HOME of its own, no forge token or key), and must exit 0. It sees only the change,
//! never a worker's prompt or transcript.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::evidence::Validated;
use super::lint::{branch_config, in_worktree, tail};
use crate::agent::contain::Sandbox;
use crate::agent::process;
use crate::config::UserTestingConfig;
use crate::swarm::runtime::sandbox::{shared_target, Sandboxes};
use crate::workflow::error::{Context, Result};
use crate::workflow::Workspace;

pub const NAME: &str = "user-testing";

/// Runs the scenario on commit `head` (the change made on `base`); `not run` (with why) when
/// none is configured, `failed` without running anything when the change modifies a file the
/// scenario or its build runs (the change would be tested by itself).
pub fn validate(
    ws: &Workspace,
    base: git2::Oid,
    head: git2::Oid,
    clock_now: i64,
) -> Result<Validated> {
    let config = branch_config(ws)?;
    let Some(u) = config.validators.user_testing.clone() else {
        return Ok(Validated {
            name: NAME.into(),
            result: "not run".into(),
            detail: format!(
                "{} on {} has no [validators.user_testing]: no scenario a user would run is configured (docs/swarm.md, \"The cycle\")",
                crate::config::FILE,
                ws.branch()
            ),
        });
    };
    let steered = steered(ws, &u, base, head)?;
    if !steered.is_empty() {
        return Ok(Validated {
            name: NAME.into(),
            result: "failed".into(),
            detail: format!(
                "not run: the change modifies {}: the scenario would test the change with the change's own script; propose that file on its own, as a person",
                steered.join(", ")
            ),
        });
    }
    in_worktree(
        ws,
        "usertest",
        head,
        clock_now,
        |dir, rt, stop, sandboxes| {
            let home = tempfile::Builder::new()
                .prefix("atelier-user-home-")
                .tempdir()
                .context("creating the scenario's HOME")?;
            let target = shared_target(&config, &ws.root);
            let sandbox = scenario_sandbox(ws, &u, dir, home.path(), target.as_deref(), sandboxes)?;
            let env = scenario_env(&u, home.path(), target.as_deref())?;
            let scenario = Scenario {
                commands: &u,
                dir,
                env,
                sandbox,
                max_output: config.swarm.max_output,
            };
            scenario.run(rt, stop)
        },
    )
}

/// The files the change modifies that the scenario or its build would run: each named with
/// what runs it, or as a script or build configuration a scenario may run or load.
fn steered(
    ws: &Workspace,
    u: &UserTestingConfig,
    base: git2::Oid,
    head: git2::Oid,
) -> Result<Vec<String>> {
    let repo = &ws.repo;
    let base_tree = repo.find_commit(base)?.tree()?;
    let changed = crate::git::changed_paths(repo, &base_tree, &repo.find_commit(head)?.tree()?)?;
    let at_base = |path: &str| {
        let bytes = crate::git::read_file(repo, &base_tree, path)
            .ok()
            .flatten()?;
        String::from_utf8(bytes).ok()
    };
    let mut steered: Vec<String> = u
        .build
        .iter()
        .chain(&u.scenario)
        .flat_map(|c| {
            crate::swarm::executes::executed(c, true, &at_base)
                .into_iter()
                .filter(|(f, _)| changed.contains(f))
                .map(move |(f, _)| format!("`{f}` (run by `{c}`)"))
        })
        .collect();
    let head_tree = repo.find_commit(head)?.tree()?;
    for f in &changed {
        if !steered.iter().any(|s| s.starts_with(&format!("`{f}`"))) && harness(repo, &head_tree, f)
        {
            steered.push(format!(
                "`{f}` (a script or build configuration a scenario may run or load)"
            ));
        }
    }
    Ok(steered)
}

/// Where the scenario's commands run when the run is contained: the gauntlet's grants plus
/// the scenario's own lists (checked like a role's: none may reach the gate key, `.atelier/`
/// or `~/.ssh`), the patched tree, the repository's objects, its HOME and the shared cache.
fn scenario_sandbox(
    ws: &Workspace,
    u: &UserTestingConfig,
    dir: &Path,
    home: &Path,
    target: Option<&Path>,
    sandboxes: Option<Sandboxes>,
) -> Result<Option<Sandbox>> {
    let strings = |paths: &[PathBuf]| -> Vec<String> {
        paths
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect()
    };
    let protected = crate::agent::contain::protected(&ws.root, &ws.gate_key_path()?);
    let common = ws.repo.commondir().to_path_buf();
    let Some(s) = sandboxes.as_ref() else {
        return Ok(None);
    };
    let mut b = crate::agent::contain::extra(
        s.gauntlet.clone(),
        "validators.user_testing",
        &strings(&u.readable),
        &strings(&u.writable),
        &ws.root,
        &protected,
    )
    .map_err(|e| crate::workflow::refuse(crate::governance::Code::ContainmentPath, e.to_string()))?
    .write(dir)
    .read(&common)
    .write(home);
    if let Some(t) = target {
        b = b.write(t);
    }
    Ok(Some(b))
}

/// The scenario's environment: scrubbed (PATH and LANG), what `env` passes (`NAME`) or sets
/// (`NAME=value`, `~/` being the real HOME's), its own empty HOME and the shared cache.
fn scenario_env(
    u: &UserTestingConfig,
    home: &Path,
    target: Option<&Path>,
) -> Result<Vec<(String, String)>> {
    let real_home = std::env::var_os("HOME").map(PathBuf::from);
    let (set, pass): (Vec<&String>, Vec<&String>) = u.env.iter().partition(|e| e.contains('='));
    let pass: Vec<String> = pass.into_iter().cloned().collect();
    let mut env: Vec<(String, String)> = process::scrubbed_env(&pass, &[])
        .into_iter()
        .filter(|(k, _)| k != "HOME")
        .collect();
    for e in set {
        let (k, v) = e.split_once('=').expect("partitioned on =");
        if process::never_passed(k) || k == "HOME" {
            return Err(crate::workflow::Error::Input(format!(
                "atelier.toml: validators.user_testing.env: {k} is never set for a validator"
            )));
        }
        let v = match (v.strip_prefix("~/"), &real_home) {
            (Some(rest), Some(h)) => h.join(rest).display().to_string(),
            _ => v.to_string(),
        };
        env.retain(|(x, _)| x != k);
        env.push((k.to_string(), v));
    }
    env.push(("HOME".into(), home.display().to_string()));
    if let Some(t) = target {
        env.push(("CARGO_TARGET_DIR".into(), t.display().to_string()));
    }
    Ok(env)
}

/// The build and scenario commands, ready to run in the patched tree.
struct Scenario<'a> {
    commands: &'a UserTestingConfig,
    dir: &'a Path,
    env: Vec<(String, String)>,
    sandbox: Option<Sandbox>,
    max_output: usize,
}

impl Scenario<'_> {
    /// Runs the build commands, then the scenario's, in order; the first that fails ends it.
    fn run(
        &self,
        rt: &tokio::runtime::Runtime,
        stop: &mut process::Interrupts,
    ) -> Result<Validated> {
        let u = self.commands;
        let timeout = Duration::from_secs(u.timeout.secs().max(1));
        let mut done = Vec::new();
        for (what, command) in u
            .build
            .iter()
            .map(|c| ("build", c))
            .chain(u.scenario.iter().map(|c| ("scenario", c)))
        {
            let spawn = process::Spawn {
                lines: None,
                program: "sh".into(),
                args: vec!["-c".into(), command.clone()],
                cwd: self.dir.to_path_buf(),
                env: self.env.clone(),
                stdin: Vec::new(),
                timeout,
                silence: None,
                max_output: self.max_output,
                sandbox: self.sandbox.clone(),
            };
            let o = rt
                .block_on(process::run_or_interrupted(&spawn, stop))
                .with_context(|| format!("starting `{command}`"))?
                .ok_or_else(|| {
                    crate::workflow::Error::Input(
                        "interrupted during the user-testing validator: every program it started was stopped".into(),
                    )
                })?;
            let secs = o.elapsed.as_secs_f64();
            if !o.success() {
                let how = if o.timed_out {
                    format!("ran past {}", u.timeout)
                } else {
                    format!(
                        "exited with {}",
                        o.code.map_or("a signal".into(), |c| c.to_string())
                    )
                };
                done.push(format!("{what} `{command}` {how} after {secs:.1} s"));
                return Ok(self.failed(&done, &o.output));
            }
            done.push(format!("{what} `{command}` passed ({secs:.1} s)"));
        }
        Ok(self.passed(&done))
    }

    /// The result when a command failed: what ran, and the failed one's last output.
    fn failed(&self, done: &[String], output: &str) -> Validated {
        Validated {
            name: NAME.into(),
            result: "failed".into(),
            detail: format!(
                "{}{}. Its last output:\n\n{}",
                done.join("; "),
                if self.sandbox.is_some() {
                    ""
                } else {
                    " (uncontained)"
                },
                fenced(&redacted(&tail(output)))
            ),
        }
    }

    /// The result when every command passed.
    fn passed(&self, done: &[String]) -> Validated {
        Validated {
            name: NAME.into(),
            result: "passed".into(),
            detail: format!(
                "on the patched tree, {}, with an empty HOME: {}.",
                if self.sandbox.is_some() {
                    "contained"
                } else {
                    "UNCONTAINED ([swarm] containment = \"none\")"
                },
                done.join("; ")
            ),
        }
    }
}

/// Whether `path` (changed by the proposal) is part of what a scenario runs rather than what it
/// tests: a shell script (by extension, a `#!` line or the executable bit), a make or just file,
/// cargo's or a toolchain's configuration, an npm or direnv file. A module the scenario imports
/// in another language is not recognised (docs/swarm.md, "The cycle").
fn harness(repo: &git2::Repository, tree: &git2::Tree<'_>, path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    let by_name = [
        "Makefile",
        "GNUmakefile",
        "makefile",
        "justfile",
        "Justfile",
        "rust-toolchain",
        "rust-toolchain.toml",
        ".npmrc",
        ".envrc",
    ]
    .contains(&name)
        || [".sh", ".bash", ".zsh", ".mk", ".just"]
            .iter()
            .any(|e| name.ends_with(e))
        || path.starts_with(".cargo/")
        || path.contains("/.cargo/");
    if by_name {
        return true;
    }
    let Ok(entry) = tree.get_path(std::path::Path::new(path)) else {
        return false;
    };
    if entry.filemode() == 0o100755 {
        return true;
    }
    repo.find_blob(entry.id())
        .map(|b| b.content().starts_with(b"#!"))
        .unwrap_or(false)
}

/// Output with every line that looks like part of a private key, or holds a credential the
/// `secrets` reviewer recognises, withheld: it goes into the evidence, committed and published.
fn redacted(text: &str) -> String {
    text.lines()
        .map(|l| {
            let keyish = l.contains("PRIVATE KEY")
                || (l.len() >= 60
                    && !l.contains(' ')
                    && l.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"+/=".contains(&b)));
            if keyish || super::lessons::holds_a_credential(l) {
                "[a line withheld: it looks like a key or a credential]"
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `text` in a Markdown code fence longer than any run of backticks in it, so it can neither
/// close the fence nor write Markdown of its own into the evidence.
fn fenced(text: &str) -> String {
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    format!("{fence}\n{text}\n{fence}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_cannot_leak_a_key_or_break_out_of_its_fence() {
        let out = "ok\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n```\n<!-- hide";
        let r = fenced(&redacted(out));
        assert!(
            !r.contains("PRIVATE KEY") && !r.contains("b3BlbnNzaC1rZXkt"),
            "{r}"
        );
        assert!(r.starts_with("````\n") && r.ends_with("\n````"), "{r}");
        assert!(r.contains("ok\n") && r.contains("<!-- hide"), "{r}");
    }
}
