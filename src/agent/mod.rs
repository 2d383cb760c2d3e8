//! Agents: the programs that do a task's work. A role in atelier.toml names a backend; this
//! module turns it into a command line (any executable, or a preset for Claude Code, Codex or
//! Aider in non-interactive mode), renders the worker's prompt, and runs untrusted programs
//! (`process`) with a scrubbed environment and limits. `reviewer` runs agent reviewers on a
//! structured handoff, each in a throwaway export of the head.

pub mod clients;
pub mod contain;
pub mod http;
pub mod mounts;
pub mod process;
pub mod prompt;
pub mod reviewer;
pub mod suites;

use thiserror::Error;

use crate::config::RoleConfig;

/// How one worker runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend {
    /// A program in the task's worktree; the prompt arrives on stdin.
    Command {
        argv: Vec<String>,
        /// Variables passed through besides PATH, HOME and LANG.
        pass_env: Vec<String>,
        /// The agent CLI a preset names: its private state, install and usage (`clients`).
        client: Option<&'static clients::Client>,
    },
    /// An OpenAI-compatible chat-completions endpoint, for text roles: the reply is written to
    /// the task's one claimed file.
    Http {
        base_url: String,
        model: String,
        /// The *name* of the variable holding the API key (read by the conductor only).
        api_key_env: Option<String>,
    },
}

/// The command line of each preset (documented in docs/agents.md).
pub fn preset(name: &str) -> Option<Vec<String>> {
    clients::client(name).map(|c| c.argv.iter().map(|s| s.to_string()).collect())
}

/// Why a role has no backend.
#[derive(Debug, Error)]
pub enum BackendError {
    #[error("role `{role}`: unknown backend `{backend}`")]
    Unknown { role: String, backend: String },
    #[error("role `{role}`: the command is empty")]
    EmptyCommand { role: String },
}

impl crate::errors::Classify for BackendError {
    fn kind(&self) -> crate::errors::Kind {
        crate::errors::Kind::Input
    }
}

/// The backend for a role.
pub fn backend(role_name: &str, role: &RoleConfig) -> Result<Backend, BackendError> {
    let argv = match role.backend.as_str() {
        "command" => role.command.clone().unwrap_or_default(),
        "http" => {
            return Ok(Backend::Http {
                base_url: role.base_url.clone().unwrap_or_default(),
                model: role.model.clone().unwrap_or_default(),
                api_key_env: role.api_key_env.clone(),
            })
        }
        other => match preset(other) {
            Some(mut argv) => {
                // The role's `model` (also what `[prices]` prices) is the CLI's model.
                if let Some(model) = &role.model {
                    argv.extend(["--model".to_string(), model.clone()]);
                }
                argv.extend(role.command.clone().unwrap_or_default());
                argv
            }
            None => {
                return Err(BackendError::Unknown {
                    role: role_name.to_string(),
                    backend: other.to_string(),
                })
            }
        },
    };
    if argv.is_empty() {
        return Err(BackendError::EmptyCommand {
            role: role_name.to_string(),
        });
    }
    Ok(Backend::Command {
        argv,
        pass_env: role.env.clone(),
        client: clients::client(&role.backend),
    })
}
