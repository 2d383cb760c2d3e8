//! The agent CLIs the presets name (Claude Code, Codex, Aider), as Atelier runs them contained:
//! the command line that makes each non-interactive, streams its progress and leaves no files
//! outside the task's claims; the variable that moves its state into a private, per-attempt
//! directory; the sandbox of its own that Atelier's containment replaces; the variables naming
//! its model endpoint (for the port check before a run); and how to read what it spent from
//! what it printed.
//!
//! `install_roots` finds what a CLI needs to read from where it is installed: the package an
//! npm binary belongs to, a virtualenv and the interpreter it links to. Pure but for reading
//! the files a command's path leads to.

use std::path::{Path, PathBuf};

pub use super::report::{Report, Usage, UsageFormat};

/// One agent CLI a preset names.
#[derive(Debug, PartialEq, Eq)]
pub struct Client {
    /// The preset's name (`backend = "…"`).
    pub name: &'static str,
    /// The command line; the prompt arrives on stdin.
    pub argv: &'static [&'static str],
    /// The variable naming the directory the CLI keeps its state in, pointed at a private,
    /// per-attempt directory (the user's real one is never written).
    pub state_env: Option<&'static str>,
    /// Further variables set for the CLI: `{state}` is the private state directory.
    pub set_env: &'static [(&'static str, &'static str)],
    /// The variables naming its model endpoint, in the order the CLI reads them, and the
    /// endpoint it uses when none is set.
    pub endpoint_env: &'static [&'static str],
    pub default_endpoint: &'static str,
    /// How a role's `base_url` is handed to the CLI.
    pub via: Via,
    /// How its output reports what it spent.
    pub usage: UsageFormat,
}

/// How a CLI is pointed at the endpoint a role's `base_url` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// The variable it reads the endpoint from.
    Var(&'static str),
    /// Codex reads no variable (0.171 ignores `OPENAI_BASE_URL`): a model provider of its own,
    /// defined with `-c` overrides, with the key read from `env_key`.
    CodexProvider,
}

/// The variable an OpenAI-style CLI reads its key from unless the role's `api_key_env` names another.
pub const OPENAI_KEY: &str = "OPENAI_API_KEY";

/// The CLIs the presets name.
pub const CLIENTS: &[Client] = &[
    Client {
        name: "claude",
        // Print mode with the prompt on stdin; streamed JSON so progress reaches the conductor
        // while it works; permission prompts bypassed, because Atelier's containment is what
        // bounds it.
        argv: &[
            "claude",
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--include-partial-messages",
            "--permission-mode",
            "bypassPermissions",
            "--no-session-persistence",
        ],
        state_env: Some("CLAUDE_CONFIG_DIR"),
        // IS_SANDBOX=1 is what lets bypassPermissions run as root (it refuses otherwise); the
        // rest keeps it off the network except for the model endpoint.
        set_env: &[
            ("IS_SANDBOX", "1"),
            ("DISABLE_AUTOUPDATER", "1"),
            ("DISABLE_TELEMETRY", "1"),
            ("DISABLE_ERROR_REPORTING", "1"),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
        ],
        endpoint_env: &["ANTHROPIC_BASE_URL"],
        default_endpoint: "https://api.anthropic.com",
        via: Via::Var("ANTHROPIC_BASE_URL"),
        usage: UsageFormat::ClaudeStream,
    },
    Client {
        name: "codex",
        // Non-interactive, JSON events on stdout; its own bubblewrap sandbox is off because
        // it cannot nest inside Atelier's (which refuses user namespaces to workers) and
        // Atelier's replaces it: codex's help names this flag for externally sandboxed runs.
        argv: &[
            "codex",
            "exec",
            "--json",
            "--dangerously-bypass-approvals-and-sandbox",
            "--skip-git-repo-check",
            // No analytics, and no sync of its plugin list from GitHub at start: the model
            // endpoint is its only traffic.
            "-c",
            "analytics.enabled=false",
            "-c",
            "features.plugins=false",
            "-",
        ],
        state_env: Some("CODEX_HOME"),
        // `exec --json` prints nothing while the model streams its answer; its log of each
        // server-sent event, on stderr, is the progress that keeps a working codex alive.
        set_env: &[("RUST_LOG", "warn,codex_api::sse::responses=trace")],
        // Codex 0.171 reads no endpoint variable: a role's `base_url` becomes a provider.
        endpoint_env: &[],
        default_endpoint: "https://api.openai.com/v1",
        via: Via::CodexProvider,
        usage: UsageFormat::CodexJson,
    },
    Client {
        name: "aider",
        // One message from stdin, no prompts; no git of its own (Atelier commits, and the
        // worktree's index is read-only to workers); no history or cache files in the worktree.
        argv: &[
            "aider",
            "--yes-always",
            "--no-git",
            "--no-gitignore",
            "--no-show-model-warnings",
            "--no-auto-commits",
            "--no-check-update",
            "--no-analytics",
            // Each attempt's home is new, so every run is aider's first: no release-notes
            // offer (it opens a browser); and no URL in the prompt fetched (it installs a
            // headless browser for that).
            "--no-show-release-notes",
            "--no-detect-urls",
            "--no-pretty",
            "--stream",
            "--chat-history-file",
            "/dev/null",
            "--input-history-file",
            "/dev/null",
            "--message-file",
            "/dev/stdin",
        ],
        // Aider keeps its state in `~/.aider` (installs, analytics opt-out, the model price
        // cache): a private home for each attempt. Its streamed reply is its progress, and
        // Python buffers a pipe unless told not to.
        state_env: Some("HOME"),
        set_env: &[
            ("LITELLM_LOCAL_MODEL_COST_MAP", "True"),
            ("PYTHONUNBUFFERED", "1"),
        ],
        endpoint_env: &["OPENAI_API_BASE", "OPENAI_BASE_URL"],
        default_endpoint: "https://api.openai.com/v1",
        via: Via::Var("OPENAI_API_BASE"),
        usage: UsageFormat::AiderSummary,
    },
];

/// The CLI a preset names.
pub fn client(name: &str) -> Option<&'static Client> {
    CLIENTS.iter().find(|c| c.name == name)
}

impl Client {
    /// The endpoint the CLI will call, given the value of each variable it reads.
    pub fn endpoint(&self, var: impl Fn(&str) -> Option<String>) -> String {
        self.endpoint_env
            .iter()
            .find_map(|k| var(k).filter(|v| !v.is_empty()))
            .unwrap_or_else(|| self.default_endpoint.to_string())
    }

    /// What points the CLI at `base_url`: arguments for its command line and variables for
    /// its environment. `key_env` names the variable holding the key (codex's provider reads
    /// it; the other CLIs read their own).
    pub fn point_at(&self, base_url: &str, key_env: &str) -> (Vec<String>, Vec<(String, String)>) {
        match self.via {
            Via::Var(k) => (Vec::new(), vec![(k.to_string(), base_url.to_string())]),
            Via::CodexProvider => {
                let set = |k: &str, v: &str| {
                    // TOML basic strings: the URL and the variable name, quoted.
                    let quoted = serde_json::Value::String(v.to_string()).to_string();
                    [
                        "-c".to_string(),
                        format!("model_providers.atelier.{k}={quoted}"),
                    ]
                };
                let mut args = vec!["-c".to_string(), "model_provider=\"atelier\"".to_string()];
                args.extend(set("name", "atelier"));
                args.extend(set("base_url", base_url));
                args.extend(set("env_key", key_env));
                args.extend(set("wire_api", "responses"));
                (args, Vec::new())
            }
        }
    }

    /// The variables set for one attempt, with `state` its private state directory.
    pub fn env(&self, state: &Path) -> Vec<(String, String)> {
        let state = state.display().to_string();
        self.state_env
            .iter()
            .map(|k| (k.to_string(), state.clone()))
            .chain(
                self.set_env
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.replace("{state}", &state))),
            )
            .collect()
    }

    /// Readies `spawn` (this CLI's command) for one run: a private state directory, removed
    /// when the returned guard drops, named by the CLI's variable and writable to it; and,
    /// when contained, what its install needs to read.
    pub fn prepare(&self, spawn: &mut super::process::Spawn) -> std::io::Result<tempfile::TempDir> {
        let state = tempfile::Builder::new()
            .prefix(&format!("atelier-{}-state-", self.name))
            .tempdir()?;
        let set = self.env(state.path());
        spawn.env.retain(|(k, _)| !set.iter().any(|(s, _)| s == k));
        spawn.env.extend(set);
        if let Some(sandbox) = spawn.sandbox.take() {
            let path = spawn
                .env
                .iter()
                .find(|(k, _)| k == "PATH")
                .map(|(_, v)| v.clone());
            let mut s = sandbox.write(state.path());
            if let Some(program) = find_program(&spawn.program, path.as_deref()) {
                for r in install_roots(&program) {
                    let guarded = s
                        .protected
                        .iter()
                        .any(|g| r.starts_with(g) || g.starts_with(&r));
                    if !guarded {
                        s = s.read(r);
                    }
                }
            }
            spawn.sandbox = Some(s);
        }
        Ok(state)
    }

    /// The CLI's final answer in what it printed (what agent reviewers and planners read):
    /// [`Report::answer`], or all of its output when it has none (aider).
    pub fn answer(&self, stdout: &str) -> String {
        Report::of(self.usage, stdout)
            .answer()
            .unwrap_or_else(|| stdout.to_string())
    }

    /// What the CLI reported as a failure though it exited 0, as each of them does when its
    /// model call fails (see [`Report::failure`]).
    pub fn failure(&self, stdout: &str) -> Option<String> {
        Report::of(self.usage, stdout).failure()
    }

    /// What it reported spending, read from its standard output.
    pub fn usage(&self, stdout: &str) -> Option<Usage> {
        Report::of(self.usage, stdout).usage()
    }

    /// A reader of its report, to be fed its output line by line as it runs.
    pub fn report(&self) -> Report {
        Report::new(self.usage)
    }
}

/// Why a preset role's CLI could not reach its model endpoint: the port its endpoint URL names
/// is not one `network` lets it open. `var` reads atelier's environment; only the variables the
/// role passes (`env`) reach the CLI, so the others do not count.
/// Why role `role_name`'s program cannot start, if it cannot: a preset's CLI not on `path`
/// (the PATH its workers get), a `command` whose program is neither there nor a file. Every
/// attempt would fail to start; `run` says so before the first.
pub fn missing_program(
    role_name: &str,
    role: &crate::config::RoleConfig,
    path: Option<&str>,
) -> Option<String> {
    let (program, fix) = match client(&role.backend) {
        Some(c) => (
            c.argv[0].to_string(),
            "install it (docs/agents.md names each CLI's package) so that it is on the PATH you run `atelier run` with; arguments in the role's `command` are added to the CLI's command line, they do not name the program",
        ),
        None => match role.command.as_ref().and_then(|c| c.first()) {
            Some(p) if role.backend == "command" => (
                p.clone(),
                "install it, or name it by its full path as the first word of the role's `command`",
            ),
            _ => return None,
        },
    };
    let found = find_program(&program, path).filter(|p| p.is_file());
    found.is_none().then(|| {
        format!(
            "role {role_name}: its program `{program}` is {}, so every attempt would fail to start: {fix}",
            if program.contains('/') { "not a file" } else { "not on the workers' PATH" }
        )
    })
}

pub fn blocked_endpoint(
    role_name: &str,
    role: &crate::config::RoleConfig,
    network: &crate::config::Network,
    var: impl Fn(&str) -> Option<String>,
) -> Option<String> {
    use crate::config::Network;
    let c = client(&role.backend)?;
    let passed = |k: &str| role.env.iter().any(|e| e == k).then(|| var(k)).flatten();
    let (url, from) = match role.base_url.as_deref().filter(|u| !u.trim().is_empty()) {
        Some(u) => (u.to_string(), "`base_url`".to_string()),
        None => (
            c.endpoint(passed),
            c.endpoint_env
                .iter()
                .find(|k| passed(k).is_some_and(|v| !v.is_empty()))
                .map_or("the CLI's default".to_string(), |k| format!("`{k}`")),
        ),
    };
    let port = port(&url)?;
    let allowed = match network {
        Network::Any => return None,
        Network::None => "`network = \"none\"`".to_string(),
        Network::Ports(ports) if ports.contains(&port) => return None,
        Network::Ports(ports) => format!(
            "`network = [{}]`",
            ports
                .iter()
                .map(u16::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    Some(format!(
        "[roles.{role_name}]: the {} CLI would call its model at {} (from {from}), port {port}, which {allowed} does not let it open, so every request would be refused: add {port} to `network`, or set the role's `base_url` to an endpoint on a listed port",
        c.name,
        redact_userinfo(&url),
    ))
}

/// `url` without a `user:password@` part.
fn redact_userinfo(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
            match rest[..end].rfind('@') {
                Some(at) => format!("{scheme}://[redacted]@{}", &rest[at + 1..]),
                None => url.to_string(),
            }
        }
        None => url.to_string(),
    }
}

/// The TCP port of an endpoint URL (`https` 443 and `http` 80 when none is written).
pub fn port(url: &str) -> Option<u16> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let host_port = authority.rsplit('@').next()?;
    // An IPv6 literal keeps its colons inside brackets.
    let after_host = match host_port.strip_prefix('[') {
        Some(v6) => v6.split_once(']')?.1,
        None => host_port.split_once(':').map_or("", |(_, p)| p).trim(),
    };
    let explicit = after_host.strip_prefix(':').unwrap_or(after_host);
    if !explicit.is_empty() {
        return explicit.parse().ok();
    }
    match scheme.to_ascii_lowercase().as_str() {
        "https" => Some(443),
        "http" => Some(80),
        _ => None,
    }
}

/// What a CLI installed at `program` needs to read besides the program file: the npm package
/// it belongs to (with the native binaries it vendors), a virtualenv, and the interpreter a
/// script's `#!` line or a virtualenv's `pyvenv.cfg` names, followed through symbolic links.
/// System directories are readable to every worker already and are not listed.
pub fn install_roots(program: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut seen = Vec::new();
    let mut queue = vec![program.to_path_buf()];
    while let Some(p) = queue.pop() {
        if seen.contains(&p) || seen.len() > 8 {
            continue;
        }
        seen.push(p.clone());
        let Ok(real) = p.canonicalize() else { continue };
        let mut roots = Vec::new();
        // The npm package it belongs to: the nearest folder with a package.json under a
        // node_modules folder.
        if let Some(pkg) = real.ancestors().skip(1).find(|a| {
            a.join("package.json").is_file()
                && a.ancestors()
                    .skip(1)
                    .take(2)
                    .any(|n| n.file_name().is_some_and(|f| f == "node_modules"))
        }) {
            roots.push(pkg.to_path_buf());
        }
        // A virtualenv: `<venv>/bin/<program>` beside `<venv>/pyvenv.cfg`; its interpreter
        // lives where `home` says.
        for file in [&p, &real] {
            if let Some(venv) = file.parent().and_then(Path::parent) {
                if let Ok(cfg) = std::fs::read_to_string(venv.join("pyvenv.cfg")) {
                    roots.push(venv.to_path_buf());
                    if let Some(home) = cfg.lines().find_map(|l| {
                        let (k, v) = l.split_once('=')?;
                        (k.trim() == "home").then(|| PathBuf::from(v.trim()))
                    }) {
                        if let Some(prefix) = home
                            .canonicalize()
                            .ok()
                            .and_then(|h| h.parent().map(Path::to_path_buf))
                        {
                            roots.push(prefix);
                        }
                    }
                }
            }
        }
        // The interpreter a script names.
        if let Some(interp) = shebang(&real) {
            queue.push(interp);
        }
        for r in roots {
            if !system(&r) && !out.contains(&r) {
                out.push(r);
            }
        }
        if !system(&real) && !out.iter().any(|r: &PathBuf| real.starts_with(r)) {
            out.push(real);
        }
    }
    out
}

/// Where `program` is: itself when it names a path, else the first match on `path`.
pub fn find_program(program: &str, path: Option<&str>) -> Option<PathBuf> {
    if program.contains('/') {
        return Some(PathBuf::from(program));
    }
    path.unwrap_or_default()
        .split(':')
        .filter(|d| !d.is_empty())
        .map(|d| Path::new(d).join(program))
        .find(|p| p.is_file())
}

/// The interpreter a `#!` line names (not `env`, whose program the PATH finds).
fn shebang(file: &Path) -> Option<PathBuf> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(file).ok()?.read(&mut head).ok()?;
    let text = std::str::from_utf8(&head[..n]).ok()?;
    let line = text.strip_prefix("#!")?.lines().next()?;
    let interp = PathBuf::from(line.split_whitespace().next()?);
    (interp.file_name()? != "env").then_some(interp)
}

/// Directories every contained program may read already.
fn system(p: &Path) -> bool {
    super::contain::SYSTEM_READ.iter().any(|s| p.starts_with(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_read_from_endpoint_urls() {
        for (url, want) in [
            ("https://api.anthropic.com", Some(443)),
            ("http://127.0.0.1:8080/v1", Some(8080)),
            ("http://localhost/v1", Some(80)),
            ("https://user:pw@proxy.example:8443/x", Some(8443)),
            ("http://[::1]:9000/v1", Some(9000)),
            ("http://[::1]/v1", Some(80)),
            ("ftp://host/x", None),
            ("not a url", None),
        ] {
            assert_eq!(port(url), want, "{url}");
        }
    }

    #[test]
    fn usage_is_read_from_each_clients_output() {
        let claude = client("claude").expect("claude");
        let out = "{\"type\":\"system\"}\nprogress\n{\"type\":\"result\",\"usage\":{\"input_tokens\":10,\"cache_creation_input_tokens\":5,\"cache_read_input_tokens\":100,\"output_tokens\":7}}\n";
        assert_eq!(
            claude.usage(out),
            Some(Usage {
                input_tokens: 15,
                output_tokens: 7,
                cached_tokens: 100
            })
        );
        let codex = client("codex").expect("codex");
        let out = "{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":50,\"cached_input_tokens\":20,\"output_tokens\":9}}\n{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}\n";
        assert_eq!(
            codex.usage(out),
            Some(Usage {
                input_tokens: 40,
                output_tokens: 10,
                cached_tokens: 20
            })
        );
        let aider = client("aider").expect("aider");
        let out = "Applied edit to a.txt\nTokens: 2.3k sent, 1.1k cache hit, 120 received. Cost: $0.01 message, $0.01 session.\n";
        assert_eq!(
            aider.usage(out),
            Some(Usage {
                input_tokens: 1200,
                output_tokens: 120,
                cached_tokens: 1100
            })
        );
        assert_eq!(claude.usage("no json here"), None);
    }

    #[test]
    fn a_failure_reported_with_exit_code_zero_is_read_from_each_clients_output() {
        let claude = client("claude").expect("claude");
        assert_eq!(
            claude.failure("{\"type\":\"result\",\"is_error\":true,\"result\":\"API Error: Connection refused\"}\n"),
            Some("API Error: Connection refused".into())
        );
        assert_eq!(
            claude.failure("{\"type\":\"result\",\"is_error\":false,\"result\":\"done\"}\n"),
            None
        );
        let codex = client("codex").expect("codex");
        assert_eq!(
            codex.failure("{\"type\":\"turn.started\"}\n{\"type\":\"turn.failed\",\"error\":{\"message\":\"stream disconnected\"}}\n"),
            Some("stream disconnected".into())
        );
        assert_eq!(codex.failure("{\"type\":\"turn.completed\"}\n"), None);
        let aider = client("aider").expect("aider");
        let why = aider
            .failure("litellm.APIConnectionError: refused\nRetrying in 0.2 seconds...\n")
            .expect("no reply");
        assert!(why.contains("Retrying in 0.2 seconds"), "{why}");
        assert_eq!(aider.failure("Tokens: 10 sent, 2 received.\n"), None);
    }

    #[test]
    fn an_endpoint_on_a_port_the_role_does_not_list_is_named() {
        use crate::config::{Network, RoleConfig};
        let role = |backend: &str, env: &[&str]| RoleConfig {
            backend: backend.into(),
            command: None,
            env: env.iter().map(|s| s.to_string()).collect(),
            base_url: None,
            model: None,
            api_key_env: None,
            provider: None,
            family: None,
            network: None,
            readable: Vec::new(),
            writable: Vec::new(),
        };
        let var = |k: &str| {
            (k == "ANTHROPIC_BASE_URL").then(|| "http://u:secret@127.0.0.1:8080".to_string())
        };
        let passed = role("claude", &["ANTHROPIC_BASE_URL"]);
        let why = blocked_endpoint("w", &passed, &Network::Ports(vec![443]), var).expect("blocked");
        assert!(why.contains("port 8080"), "{why}");
        assert!(why.contains("`network = [443]`"), "{why}");
        assert!(why.contains("from `ANTHROPIC_BASE_URL`"), "{why}");
        assert!(!why.contains("secret"), "{why}");
        assert_eq!(
            blocked_endpoint("w", &passed, &Network::Ports(vec![8080]), var),
            None
        );
        assert_eq!(blocked_endpoint("w", &passed, &Network::Any, var), None);
        // Not passed: the CLI never sees the variable and calls its default, on 443.
        let unpassed = role("claude", &[]);
        assert_eq!(
            blocked_endpoint("w", &unpassed, &Network::Ports(vec![443]), var),
            None
        );
        let why = blocked_endpoint("w", &unpassed, &Network::None, var).expect("blocked");
        assert!(why.contains("the CLI's default"), "{why}");
        assert_eq!(
            blocked_endpoint("w", &role("command", &[]), &Network::None, var),
            None
        );
    }

    #[test]
    fn a_base_url_becomes_a_variable_or_a_codex_model_provider() {
        let claude = client("claude").expect("claude");
        assert_eq!(
            claude.point_at("http://127.0.0.1:9/", "K"),
            (
                vec![],
                vec![("ANTHROPIC_BASE_URL".into(), "http://127.0.0.1:9/".into())]
            )
        );
        let (args, vars) = client("codex")
            .expect("codex")
            .point_at("http://127.0.0.1:9/v1", "MY_KEY");
        assert!(vars.is_empty());
        assert_eq!(
            args.join(" "),
            "-c model_provider=\"atelier\" -c model_providers.atelier.name=\"atelier\" -c model_providers.atelier.base_url=\"http://127.0.0.1:9/v1\" -c model_providers.atelier.env_key=\"MY_KEY\" -c model_providers.atelier.wire_api=\"responses\""
        );
    }

    #[test]
    fn the_endpoint_is_the_first_variable_set_or_the_default() {
        let aider = client("aider").expect("aider");
        assert_eq!(aider.endpoint(|_| None), "https://api.openai.com/v1");
        assert_eq!(
            aider.endpoint(|k| (k == "OPENAI_BASE_URL").then(|| "http://h:1".to_string())),
            "http://h:1"
        );
    }

    #[test]
    fn an_npm_package_and_a_virtualenvs_interpreter_are_install_roots() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pkg = dir.path().join("lib/node_modules/@acme/cli");
        std::fs::create_dir_all(pkg.join("bin")).expect("mkdir");
        std::fs::write(pkg.join("package.json"), "{}").expect("write");
        std::fs::write(pkg.join("bin/cli.js"), "#!/usr/bin/env node\n").expect("write");
        std::fs::create_dir_all(dir.path().join("bin")).expect("mkdir");
        std::os::unix::fs::symlink(
            "../lib/node_modules/@acme/cli/bin/cli.js",
            dir.path().join("bin/cli"),
        )
        .expect("link");
        let real_pkg = pkg.canonicalize().expect("real");
        assert_eq!(install_roots(&dir.path().join("bin/cli")), vec![real_pkg]);

        let base = dir.path().join("pythons/3.11");
        std::fs::create_dir_all(base.join("bin")).expect("mkdir");
        std::fs::write(base.join("bin/python3.11"), "").expect("write");
        let venv = dir.path().join("venv");
        std::fs::create_dir_all(venv.join("bin")).expect("mkdir");
        std::fs::write(
            venv.join("pyvenv.cfg"),
            format!("home = {}\n", base.join("bin").display()),
        )
        .expect("write");
        std::os::unix::fs::symlink(base.join("bin/python3.11"), venv.join("bin/python"))
            .expect("link");
        std::fs::write(
            venv.join("bin/tool"),
            format!("#!{}\n", venv.join("bin/python").display()),
        )
        .expect("write");
        let roots = install_roots(&venv.join("bin/tool"));
        let real_base = base.canonicalize().expect("real");
        let real_venv = venv.canonicalize().expect("real");
        assert!(roots.contains(&real_venv), "{roots:?}");
        assert!(roots.contains(&real_base), "{roots:?}");
    }
}
