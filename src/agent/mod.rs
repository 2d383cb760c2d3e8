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
pub mod report;
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
        /// Variables set for it (a preset's endpoint, from the role's `base_url`).
        set_env: Vec<(String, String)>,
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
        other => match clients::client(other) {
            Some(c) => return Ok(preset_backend(c, role)),
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
        set_env: Vec::new(),
        client: None,
    })
}

/// A preset's command line for a role: the CLI's own arguments, then the role's `model`
/// (also what `[prices]` prices), its endpoint (`base_url`) and its `command`, all before a
/// trailing `-` (the prompt on stdin) where the CLI has one.
fn preset_backend(c: &'static clients::Client, role: &RoleConfig) -> Backend {
    let mut argv: Vec<String> = c.argv.iter().map(|s| s.to_string()).collect();
    let stdin = (argv.last().map(String::as_str) == Some("-")).then(|| argv.pop());
    if let Some(model) = &role.model {
        argv.extend(["--model".to_string(), model.clone()]);
    }
    let mut pass_env = role.env.clone();
    let mut set_env = Vec::new();
    if let Some(url) = role.base_url.as_deref().filter(|u| !u.trim().is_empty()) {
        let key = role.api_key_env.as_deref().unwrap_or(clients::OPENAI_KEY);
        let (args, vars) = c.point_at(url, key);
        argv.extend(args);
        set_env = vars;
        // The key's variable reaches the CLI: its provider reads it.
        if matches!(c.via, clients::Via::CodexProvider) && !pass_env.iter().any(|e| e == key) {
            pass_env.push(key.to_string());
        }
    }
    argv.extend(role.command.clone().unwrap_or_default());
    argv.extend(stdin.flatten());
    Backend::Command {
        argv,
        pass_env,
        set_env,
        client: Some(c),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn role(backend: &str) -> RoleConfig {
        RoleConfig {
            backend: backend.into(),
            command: None,
            env: vec!["ANTHROPIC_API_KEY".into()],
            base_url: None,
            model: None,
            api_key_env: None,
            provider: None,
            family: None,
            network: None,
            readable: Vec::new(),
            writable: Vec::new(),
        }
    }

    fn command(b: Backend) -> (Vec<String>, Vec<String>, Vec<(String, String)>) {
        match b {
            Backend::Command {
                argv,
                pass_env,
                set_env,
                ..
            } => (argv, pass_env, set_env),
            other => panic!("not a command: {other:?}"),
        }
    }

    #[test]
    fn a_presets_model_endpoint_and_arguments_come_before_the_stdin_dash() {
        let mut r = role("codex");
        r.model = Some("gpt-x".into());
        r.base_url = Some("http://127.0.0.1:9/v1".into());
        r.api_key_env = Some("MY_KEY".into());
        r.command = Some(vec!["--color".into(), "never".into()]);
        let (argv, pass, set) = command(backend("w", &r).expect("backend"));
        assert_eq!(argv.last().map(String::as_str), Some("-"), "{argv:?}");
        let joined = argv.join(" ");
        assert!(
            joined.contains("--model gpt-x -c model_provider=\"atelier\""),
            "{joined}"
        );
        assert!(joined.ends_with("--color never -"), "{joined}");
        assert_eq!(pass, vec!["ANTHROPIC_API_KEY", "MY_KEY"]);
        assert!(set.is_empty());

        let mut r = role("claude");
        r.base_url = Some("http://127.0.0.1:9".into());
        let (argv, pass, set) = command(backend("w", &r).expect("backend"));
        assert_eq!(
            argv.last().map(String::as_str),
            Some("--no-session-persistence")
        );
        assert_eq!(pass, vec!["ANTHROPIC_API_KEY"]);
        assert_eq!(
            set,
            vec![("ANTHROPIC_BASE_URL".into(), "http://127.0.0.1:9".into())]
        );
    }
}
