//! Agent reviewers for the tests: scripted reviewer definitions and their answers.

use crate::support::{Env, Setup};

/// An agent reviewer `adversary` defined at base (in the adoption commit), run by the role
/// `critic` that `role` defines (TOML lines after `[roles.critic]`), with `governance` lines
/// added to the policy's `[review]`.
pub(crate) fn with_agent_reviewer(role: &str, governance: &str) -> Env {
    with_agent_reviewer_and(role, governance, "")
}

/// [`with_agent_reviewer`], with `config` (more atelier.toml tables) in the adoption commit.
pub(crate) fn with_agent_reviewer_and(role: &str, governance: &str, config: &str) -> Env {
    let mut gov = atelier::governance::policy::DEFAULT_GOVERNANCE_TOML.to_string();
    for line in governance.lines() {
        // The setting replaces the default policy's line for the same key.
        let key = line.split('=').next().expect("key").trim();
        let default = gov
            .lines()
            .find(|l| l.starts_with(&format!("{key} = ")))
            .expect("a default line")
            .to_string();
        gov = gov.replace(&format!("{default}\n"), &format!("{line}\n"));
    }
    Env::with(Setup {
        governance: gov,
        config_replace: vec![(
            "# Swarm roles".into(),
            format!("[roles.critic]\n{role}\n\n{config}\n\n# Swarm roles"),
        )],
        files: vec![
            (
                "reviewers/adversary.toml".into(),
                "name = \"adversary\"\nflavour = \"Assume the author is gaming the gate.\"\nkind = \"agent\"\nrole = \"critic\"\ntemplate = \"adversary.md.j2\"\n".into(),
            ),
            (
                "reviewers/templates/adversary.md.j2".into(),
                "Review {{ handoff.title }} as {{ reviewer.name }}.\n{{ handoff.diff }}\n{{ answer_schema }}\n".into(),
            ),
        ],
        ..Setup::default()
    })
}

/// The role lines for a scripted reviewer, in an environment made only to know its path.
pub(crate) fn script_role(name: &str, body: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("temp");
    let prog = dir.path().join(name);
    std::fs::write(&prog, format!("#!/bin/sh\n{body}")).expect("write");
    std::fs::set_permissions(&prog, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let role = format!("backend = \"command\"\ncommand = [\"{}\"]", prog.display());
    (dir, role)
}
