//! Containment setup for a run's programs: the sandboxes of each role's workers and of the
//! gauntlet's steps and checks, prepared once before anything runs (a kernel without Landlock,
//! a rule it cannot enforce or a listed path that does not exist refuses the run before any
//! worker starts), and the shared build cache they all write (`[swarm] shared_target_dir`).
//!
//! Talks to `agent::contain` (the grants), `config` and the workflow's `Workspace`; never to the
//! rest of the runtime. The conductor and `improve`'s runners (lint, planner, usertest, builds),
//! which contain their programs like gauntlet steps, set up their sandboxes here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::agent::contain::{self, Sandbox};
use crate::config::Config;
use crate::governance::Code;
use crate::workflow::error::{Context, Result};
use crate::workflow::Workspace;

/// What each role's programs may touch besides their worktree, and what the gauntlet's steps
/// and checks may.
pub(crate) struct Sandboxes {
    roles: BTreeMap<String, Sandbox>,
    pub(crate) gauntlet: Sandbox,
}

impl Sandboxes {
    /// The grants of `role`'s programs.
    pub(crate) fn role(&self, role: &str) -> Option<Sandbox> {
        self.roles.get(role).cloned()
    }
}

/// The sandboxes of a run (`None`: uncontained), each prepared once so a kernel without
/// Landlock, a rule it cannot enforce or a listed path that does not exist refuses the run
/// before any worker starts.
pub(crate) fn sandboxes(ws: &Workspace, roles: &BTreeSet<String>) -> Result<Option<Sandboxes>> {
    if ws.containment()? == crate::config::Containment::None {
        return Ok(None);
    }
    let protected = contain::protected(&ws.root, &ws.gate_key_path()?);
    // Workers read the repository's git directory: nothing secret may be kept there.
    let config = ws.repo.commondir().join("config");
    if let Some(what) = std::fs::read_to_string(&config)
        .ok()
        .and_then(|t| contain::git_config_secret(&t))
    {
        return Err(crate::workflow::refuse(
            Code::ContainmentSecret,
            format!(
                "{} holds {what}, which contained workers could read (they read the git directory): remove it (with actions/checkout, `persist-credentials: false`) and keep credentials in a helper outside the repository",
                config.display()
            ),
        ));
    }
    // The shared build cache is written by every worker and step: never in the main working
    // tree, whose own builds would run what a worker put there.
    if let Some(dir) = shared_target(&ws.config, &ws.root) {
        let real_root = ws.root.canonicalize().unwrap_or_else(|_| ws.root.clone());
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("creating the shared build cache {}", dir.display()))?;
        let real = dir.canonicalize().unwrap_or_else(|_| dir.clone());
        let guarded = protected
            .iter()
            .map(|p| p.canonicalize().unwrap_or_else(|_| p.clone()))
            .find(|p| p.starts_with(&real) || real.starts_with(p));
        if let Some(p) = guarded {
            return Err(contain::ContainError::Path {
                field: "swarm.shared_target_dir".into(),
                path: dir.display().to_string(),
                reason: format!(
                    "would let every worker reach {} (the gate key, the clone's private state or SSH keys): use a folder of its own, such as `~/.cache/atelier-target`",
                    p.display()
                ),
            }
            .into());
        }
        if real.starts_with(&real_root) || real_root.starts_with(&real) {
            return Err(contain::ContainError::Path {
                field: "swarm.shared_target_dir".into(),
                path: dir.display().to_string(),
                reason: "is inside the repository's working tree, where your own builds would run what a worker put there: use a folder outside it, such as `~/.cache/atelier-target`".into(),
            }
            .into());
        }
    }
    let mut out = Sandboxes {
        roles: BTreeMap::new(),
        gauntlet: contain::gauntlet(&ws.config.gauntlet, &ws.root, &protected)?,
    };
    out.gauntlet.prepare()?;
    for r in roles {
        let s = contain::role(r, &ws.config.roles[r], &ws.root, &protected)?;
        // A CLI whose endpoint's port is closed to it would retry until killed: say so now.
        if let Some(why) =
            crate::agent::clients::blocked_endpoint(r, &ws.config.roles[r], &s.network, |k| {
                std::env::var(k).ok()
            })
        {
            return Err(crate::workflow::refuse(Code::EndpointBlocked, why));
        }
        s.prepare()?;
        out.roles.insert(r.clone(), s);
    }
    Ok(Some(out))
}

/// `[swarm] shared_target_dir`: `~/…` under the home directory, a relative path under `root`.
pub(crate) fn shared_target(config: &Config, root: &Path) -> Option<PathBuf> {
    let d = config.swarm.shared_target_dir.as_ref()?;
    let text = d.to_string_lossy();
    Some(match text.strip_prefix("~/") {
        Some(rest) => std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_default()
            .join(rest),
        None => root.join(d),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(swarm: &str) -> Config {
        Config::parse(
            "atelier.toml",
            &format!(
                "[forge]\nkind = \"local\"\nrepository = \"acme/widgets\"\n\n[swarm]\n{swarm}"
            ),
        )
        .expect("the configuration parses")
    }

    #[test]
    fn without_a_shared_target_dir_each_worktree_builds_its_own() {
        assert_eq!(shared_target(&config(""), Path::new("/repo")), None);
    }

    #[test]
    fn a_relative_shared_target_dir_is_under_the_repository_and_an_absolute_one_is_itself() {
        let relative = config("shared_target_dir = \"target/shared\"");
        assert_eq!(
            shared_target(&relative, Path::new("/repo")),
            Some(PathBuf::from("/repo/target/shared"))
        );
        let absolute = config("shared_target_dir = \"/cache/atelier\"");
        assert_eq!(
            shared_target(&absolute, Path::new("/repo")),
            Some(PathBuf::from("/cache/atelier"))
        );
    }
}
