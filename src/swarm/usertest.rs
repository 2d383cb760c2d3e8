//! The user-testing validator of `atelier cycle`: the scenario of `[validators.user_testing]`
//! (read from the protected branch, never from the proposal) run as a user would, on the
//! patched tree — a fresh worktree of the proposal's head — after its build commands. Every
//! command is contained like a gauntlet step and runs in a scrubbed environment (PATH and LANG,
//! an empty HOME of its own, no forge token or key), and must exit 0. It sees only the change,
//! never a worker's prompt or transcript.

use std::time::Duration;

use super::evidence::Validated;
use super::lint::{branch_config, in_worktree, tail};
use crate::agent::process;
use crate::governance::time::parse_duration;
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
                "{} on {} has no [validators.user_testing]: no scenario a user would run is configured (README, \"The cycle\")",
                crate::config::FILE,
                ws.branch()
            ),
        });
    };
    let repo = &ws.repo;
    let changed = crate::git::changed_paths(
        repo,
        &repo.find_commit(base)?.tree()?,
        &repo.find_commit(head)?.tree()?,
    )?;
    let steered: Vec<String> = u
        .build
        .iter()
        .chain(&u.scenario)
        .flat_map(|c| {
            changed
                .iter()
                .filter(|f| super::scrutiny::may_execute(c, f))
                .map(move |f| format!("`{f}` (run by `{c}`)"))
        })
        .collect();
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
    let timeout = Duration::from_secs(parse_duration(&u.timeout).unwrap_or(0).max(1) as u64);
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
            let real_home = std::env::var_os("HOME").map(std::path::PathBuf::from);
            let expand = |field: &str, paths: &[std::path::PathBuf]| {
                paths
                    .iter()
                    .map(|r| {
                        crate::agent::contain::listed(
                            field,
                            &r.to_string_lossy(),
                            &ws.root,
                            real_home.as_deref(),
                        )
                    })
                    .collect::<std::result::Result<Vec<_>, _>>()
                    .map_err(|e| crate::workflow::Error::Input(format!("atelier.toml: {e}")))
            };
            let readable = expand("validators.user_testing.readable", &u.readable)?;
            let writable = expand("validators.user_testing.writable", &u.writable)?;
            let common = ws.repo.commondir().to_path_buf();
            let target = super::runtime::shared_target(&config, &ws.root);
            let sandbox = sandboxes.as_ref().map(|s| {
                let mut b = s
                    .gauntlet
                    .clone()
                    .write(dir)
                    .read(&common)
                    .write(home.path());
                for r in &readable {
                    b = b.read(r);
                }
                for w in &writable {
                    b = b.write(w);
                }
                if let Some(t) = &target {
                    b = b.write(t);
                }
                b
            });
            // `NAME` passes the variable through; `NAME=value` sets it (`~/` is the real HOME's).
            let (set, pass): (Vec<&String>, Vec<&String>) =
                u.env.iter().partition(|e| e.contains('='));
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
            env.push(("HOME".into(), home.path().display().to_string()));
            if let Some(t) = &target {
                env.push(("CARGO_TARGET_DIR".into(), t.display().to_string()));
            }
            let mut done = Vec::new();
            for (what, command) in u
                .build
                .iter()
                .map(|c| ("build", c))
                .chain(u.scenario.iter().map(|c| ("scenario", c)))
            {
                let spawn = process::Spawn {
                    program: "sh".into(),
                    args: vec!["-c".into(), command.clone()],
                    cwd: dir.to_path_buf(),
                    env: env.clone(),
                    stdin: Vec::new(),
                    timeout,
                    silence: None,
                    max_output: config.swarm.max_output,
                    sandbox: sandbox.clone(),
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
                    return Ok(Validated {
                        name: NAME.into(),
                        result: "failed".into(),
                        detail: format!(
                            "{}{}. Its last output:\n\n```\n{}\n```",
                            done.join("; "),
                            if sandbox.is_some() {
                                ""
                            } else {
                                " (uncontained)"
                            },
                            tail(&o.output)
                        ),
                    });
                }
                done.push(format!("{what} `{command}` passed ({secs:.1} s)"));
            }
            Ok(Validated {
                name: NAME.into(),
                result: "passed".into(),
                detail: format!(
                    "on the patched tree, {}, with an empty HOME: {}.",
                    if sandbox.is_some() {
                        "contained"
                    } else {
                        "UNCONTAINED ([swarm] containment = \"none\")"
                    },
                    done.join("; ")
                ),
            })
        },
    )
}
