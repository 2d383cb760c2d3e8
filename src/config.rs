//! `atelier.toml`: the operator's configuration of one repository (which forge, which protected
//! branch, the repository's name in approval tokens, where the gate's key lives).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;

pub const FILE: &str = "atelier.toml";

/// The dotted key (`conductor.nudge_after`) of the `key = value` line holding byte `at` of a
/// TOML text, under the nearest `[table]` header above it: what a value's error names.
fn key_at(text: &str, at: usize) -> Option<String> {
    let before = text.get(..at)?;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let line = text[line_start..].lines().next()?;
    let key = line.split_once('=')?.0.trim();
    if key.is_empty() || key.starts_with('[') {
        return None;
    }
    let table = before[..line_start].lines().rev().find_map(|l| {
        let l = l.trim();
        l.strip_prefix('[')
            .and_then(|h| h.trim_start_matches('[').split(']').next())
            .map(|h| h.trim().to_string())
    });
    Some(match table {
        Some(t) if !t.is_empty() => format!("{t}.{key}"),
        _ => key.to_string(),
    })
}

/// A duration as `atelier.toml` writes it (`90s`, `30m`, `12h`, `7d`), checked once when the
/// file is read: every reader gets seconds, never the text to parse again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    text: String,
    secs: u64,
}

impl Span {
    /// A duration from its text, or why it is not one.
    pub fn parse(text: &str) -> Result<Span, crate::governance::time::TimeError> {
        let secs = crate::governance::time::parse_duration(text)?;
        Ok(Span {
            text: text.to_string(),
            secs: secs.max(0) as u64,
        })
    }

    /// A whole number of seconds (`90s`).
    pub fn from_secs(secs: u64) -> Span {
        Span {
            text: format!("{secs}s"),
            secs,
        }
    }

    /// A built-in default (a literal known to parse).
    fn default_of(text: &str) -> Span {
        Span::parse(text).expect("a built-in default duration parses")
    }

    pub fn secs(&self) -> u64 {
        self.secs
    }

    pub fn duration(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.secs)
    }

    /// The text as written (`10m`).
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl std::fmt::Display for Span {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl Serialize for Span {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for Span {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Span, D::Error> {
        let text = String::deserialize(d)?;
        Span::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub forge: ForgeConfig,
    #[serde(default)]
    pub gate: GateConfig,
    /// Plan roles routed to agent backends (`[roles.implementer]`).
    #[serde(default)]
    pub roles: std::collections::BTreeMap<String, RoleConfig>,
    #[serde(default)]
    pub gauntlet: GauntletConfig,
    #[serde(default)]
    pub conductor: ConductorConfig,
    #[serde(default)]
    pub swarm: SwarmConfig,
    #[serde(default)]
    pub review: ReviewConfig,
    /// Atelier's own proposers (`atelier propose --from NAME`) that need settings.
    #[serde(default)]
    pub proposers: ProposersConfig,
    /// The validators `atelier cycle` runs that need settings.
    #[serde(default)]
    pub validators: ValidatorsConfig,
    /// What a run may spend (`[budget.run]`, `[budget.task]`, `[budget.roles.NAME]`).
    #[serde(default, skip_serializing_if = "BudgetConfig::is_unset")]
    pub budget: BudgetConfig,
    /// What each model's tokens cost, per million (`[prices."MODEL"]`), for `cost` budgets.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub prices: std::collections::BTreeMap<String, Price>,
}

/// `[budget]`: hard ceilings on what a run spends, for the whole run, each task (all its
/// attempts) and each role (all its tasks). No attempt starts past a ceiling; the run's own
/// ceiling also ends the attempts running when it is reached.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct BudgetConfig {
    #[serde(default)]
    pub run: Caps,
    #[serde(default)]
    pub task: Caps,
    #[serde(default)]
    pub roles: std::collections::BTreeMap<String, Caps>,
}

/// One scope's ceilings; an unset one is no ceiling.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Caps {
    /// Tokens the workers reported (input, output and cached).
    #[serde(default)]
    pub tokens: Option<u64>,
    /// Money, at `[prices]`, in the prices' currency.
    #[serde(default)]
    pub cost: Option<Money>,
    /// Wall time: the run's since its conductor started; a task's or role's, its attempts'.
    #[serde(default)]
    pub wall: Option<Span>,
}

impl BudgetConfig {
    /// No ceiling anywhere.
    pub fn is_unset(&self) -> bool {
        self.run.is_empty() && self.task.is_empty() && self.roles.values().all(Caps::is_empty)
    }
}

impl Caps {
    pub fn is_empty(&self) -> bool {
        self.tokens.is_none() && self.cost.is_none() && self.wall.is_none()
    }
}

/// An amount of money: finite and not negative.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, PartialOrd)]
pub struct Money(pub f64);

impl Eq for Money {}

impl<'de> Deserialize<'de> for Money {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Money, D::Error> {
        let v = f64::deserialize(d)?;
        if !v.is_finite() || v < 0.0 {
            return Err(serde::de::Error::custom(format!(
                "{v} is not an amount of money (a number, 0 or more)"
            )));
        }
        Ok(Money(v))
    }
}

/// What a model's tokens cost, per million of each kind.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub input: Money,
    pub output: Money,
    /// Cached input tokens; unset: the input price.
    #[serde(default)]
    pub cached: Option<Money>,
}

/// `[validators]`: settings of the cycle's validators.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ValidatorsConfig {
    #[serde(default)]
    pub user_testing: Option<UserTestingConfig>,
}

/// `[validators.user_testing]`: the end-to-end scenario `atelier cycle` runs as a user would,
/// on the patched tree (a fresh worktree of the proposal's head), contained like a gauntlet
/// step, in a scrubbed environment with an empty HOME. Read from the protected branch.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct UserTestingConfig {
    /// Shell commands that build the patched program first (e.g. `cargo build --release`).
    #[serde(default)]
    pub build: Vec<String>,
    /// The scenario: shell commands run in order; each must exit 0.
    pub scenario: Vec<String>,
    /// The longest one command may run.
    #[serde(default = "default_user_testing_timeout")]
    pub timeout: Span,
    /// Variables besides PATH and LANG (HOME is a fresh empty directory): `NAME` passes one
    /// through, `NAME=value` sets it (`~/` in the value is the real HOME's), e.g.
    /// `["RUSTUP_HOME=~/.rustup", "CARGO_HOME=~/.cargo"]` for a rustup toolchain; forge tokens
    /// and the SSH agent never pass.
    #[serde(default)]
    pub env: Vec<String>,
    /// Paths the commands may read besides the system and the patched tree (e.g. the
    /// toolchain's directories when containment is on); `~/` is the real HOME's.
    #[serde(default)]
    pub readable: Vec<std::path::PathBuf>,
    /// Paths the commands may write besides the patched tree, their HOME and temporary
    /// directory (e.g. a toolchain's lock files); `~/` is the real HOME's.
    #[serde(default)]
    pub writable: Vec<std::path::PathBuf>,
}

fn default_user_testing_timeout() -> Span {
    Span::default_of("30m")
}

/// `[proposers]`: settings of the proposers that need them.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ProposersConfig {
    #[serde(default)]
    pub lint: Option<LintConfig>,
}

/// `[proposers.lint]`: the fix command `propose --from lint --family F` runs in a worktree of
/// the protected branch, contained like a gauntlet step (read from the branch's atelier.toml).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct LintConfig {
    /// The program and its arguments; `{family}` in an argument becomes the family asked for,
    /// e.g. `["cargo", "clippy", "--fix", "--allow-dirty", "--allow-no-vcs", "--", "-W", "clippy::{family}"]`.
    pub command: Vec<String>,
    /// The families `--family` may name; empty: any name of letters, digits, `_`, `-`, `:`.
    #[serde(default)]
    pub families: Vec<String>,
    /// The longest the fix command may run.
    #[serde(default = "default_lint_timeout")]
    pub timeout: Span,
}

fn default_lint_timeout() -> Span {
    Span::default_of("30m")
}

/// How agent reviewers run on this machine (what the panel holds a change to is the policy's
/// `[review]`, at base).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ReviewConfig {
    /// The longest one agent reviewer's attempt may take (a reviewer is asked at most twice).
    #[serde(default = "default_review_timeout")]
    pub timeout: Span,
}

fn default_review_timeout() -> Span {
    Span::default_of("10m")
}

impl Default for ReviewConfig {
    fn default() -> Self {
        ReviewConfig {
            timeout: default_review_timeout(),
        }
    }
}

/// Checks every attempt must pass, in order, before the task's own contract checks.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct GauntletConfig {
    #[serde(default)]
    pub steps: Vec<StepConfig>,
    /// What gauntlet steps and contract checks may reach over TCP (default: nothing).
    #[serde(default)]
    pub network: Network,
    /// Paths steps and checks may read besides the system, the worktree and the git objects
    /// (`~/` is the home directory; a relative path is relative to the repository root).
    #[serde(default)]
    pub readable: Vec<String>,
    /// Paths steps and checks may write besides the worktree, a private temporary directory
    /// and `[swarm] shared_target_dir` (a tool's own cache, say).
    #[serde(default)]
    pub writable: Vec<String>,
}

/// What a contained program may reach over TCP (Landlock's network rules; UDP and Unix sockets
/// are not covered, see GOVERNANCE.md): `"none"`, `"any"`, or a list of ports it may connect to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Network {
    #[default]
    None,
    Any,
    Ports(Vec<u16>),
}

impl Serialize for Network {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Network::None => s.serialize_str("none"),
            Network::Any => s.serialize_str("any"),
            Network::Ports(p) => p.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Network {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Repr {
            Word(String),
            Ports(Vec<u16>),
        }
        let bad = || {
            serde::de::Error::custom(
                "expected \"none\", \"any\" or a list of TCP ports such as [443]",
            )
        };
        match Repr::deserialize(d).map_err(|_: D::Error| bad())? {
            Repr::Word(w) if w == "none" => Ok(Network::None),
            Repr::Word(w) if w == "any" => Ok(Network::Any),
            Repr::Word(_) => Err(bad()),
            Repr::Ports(p) if p.contains(&0) => Err(serde::de::Error::custom(
                "port 0 is not a port one connects to; list ports from 1 to 65535",
            )),
            Repr::Ports(p) => Ok(Network::Ports(p)),
        }
    }
}

/// Whether workers run contained (`[swarm] containment`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Containment {
    /// Landlock: every worker, step, check and agent reviewer is confined (the default).
    #[default]
    Landlock,
    /// Nothing is confined: the explicit, constitution-protected way to accept running
    /// uncontained where Landlock is missing. Every run then says so.
    None,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct StepConfig {
    pub name: String,
    /// A shell command, run with `sh -c` in the attempt's worktree.
    pub run: String,
    #[serde(default = "default_step_timeout")]
    pub timeout: Span,
}

fn default_step_timeout() -> Span {
    Span::default_of("10m")
}

/// Liveness and retries.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ConductorConfig {
    #[serde(default = "default_nudge")]
    pub nudge_after: Span,
    #[serde(default = "default_restart")]
    pub restart_after: Span,
    #[serde(default = "default_budget")]
    pub failure_budget: u32,
    /// The longest one worker may run, silent or not.
    #[serde(default = "default_attempt_timeout")]
    pub attempt_timeout: Span,
}

impl Default for ConductorConfig {
    fn default() -> Self {
        ConductorConfig {
            nudge_after: default_nudge(),
            restart_after: default_restart(),
            failure_budget: default_budget(),
            attempt_timeout: default_attempt_timeout(),
        }
    }
}

fn default_nudge() -> Span {
    Span::default_of("300s")
}
fn default_restart() -> Span {
    Span::default_of("600s")
}
fn default_budget() -> u32 {
    3
}
fn default_attempt_timeout() -> Span {
    Span::default_of("60m")
}

/// How runs use this machine.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SwarmConfig {
    #[serde(default = "default_parallel")]
    pub max_parallel: usize,
    /// Bytes of context (the task's files and reads) in a worker's prompt; at most 15360.
    #[serde(default = "default_context")]
    pub context_budget: usize,
    /// Bytes of a worker's output kept; the rest is counted and dropped.
    #[serde(default = "default_max_output")]
    pub max_output: usize,
    /// A build cache shared by all worktrees (exported as CARGO_TARGET_DIR), relative to the root.
    #[serde(default)]
    pub shared_target_dir: Option<PathBuf>,
    /// `landlock` (the default) or `none`; read from the protected branch's atelier.toml.
    #[serde(default)]
    pub containment: Containment,
}

impl Default for SwarmConfig {
    fn default() -> Self {
        SwarmConfig {
            max_parallel: default_parallel(),
            context_budget: default_context(),
            max_output: default_max_output(),
            shared_target_dir: None,
            containment: Containment::default(),
        }
    }
}

fn default_parallel() -> usize {
    2
}
fn default_context() -> usize {
    12 * 1024
}
fn default_max_output() -> usize {
    1024 * 1024
}

/// How one role's workers run: the backend (an agent CLI, a command, or an OpenAI-compatible
/// endpoint), its arguments and the environment it may see.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RoleConfig {
    /// `command`, `http`, or a preset: `claude`, `codex`, `aider`.
    pub backend: String,
    /// For `command`: the program and its arguments (the prompt arrives on stdin).
    #[serde(default)]
    pub command: Option<Vec<String>>,
    /// Environment variables passed through besides PATH, HOME and LANG.
    #[serde(default)]
    pub env: Vec<String>,
    /// For `http`: the OpenAI-compatible base URL, the model, and the *name* of the key variable.
    /// For a preset: the endpoint its CLI calls (set as `ANTHROPIC_BASE_URL` for claude,
    /// `OPENAI_API_BASE` for aider, a `-c` model provider for codex, whose key variable is
    /// `api_key_env`, default `OPENAI_API_KEY`), and the model passed as `--model`.
    #[serde(default)]
    pub base_url: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Who makes the role's model and which family it belongs to (`provider = "anthropic"`,
    /// `family = "claude"`): declared together, for `[review] distinct_family`.
    #[serde(default)]
    pub provider: Option<String>,
    #[serde(default)]
    pub family: Option<String>,
    /// What the role's programs may reach over TCP: `"none"`, `"any"` or a list of ports.
    /// Unset: nothing for `command`, port 443 for the presets (their model's API).
    #[serde(default)]
    pub network: Option<Network>,
    /// Paths the role's programs may read besides the system and their worktree (an agent
    /// CLI's configuration, say); `~/` is the home directory.
    #[serde(default)]
    pub readable: Vec<String>,
    /// Paths the role's programs may write besides their worktree and a private temporary
    /// directory (an agent CLI's session files, a tool's cache).
    #[serde(default)]
    pub writable: Vec<String>,
}

impl RoleConfig {
    /// The role's provider and model family, when it declares them.
    pub fn family(&self) -> Option<crate::governance::review::answer::Family> {
        Some(crate::governance::review::answer::Family {
            provider: self.provider.clone()?,
            family: self.family.clone()?,
        })
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ForgeConfig {
    /// `local` (the embedded default: pull requests kept under .atelier/forge) or `github`
    /// (docs/github.md); `Workspace::open` picks the forge from it.
    #[serde(default = "default_kind")]
    pub kind: String,
    /// The repository's name as approval tokens bind it.
    pub repository: String,
    /// The protected branch.
    #[serde(default = "default_branch")]
    pub branch: String,
    /// GitHub only: the REST API's base URL (GitHub Enterprise or a test server may replace it).
    #[serde(default = "default_api_url")]
    pub api_url: String,
    /// GitHub only: the git remote proposal branches are pushed to and fetched from.
    #[serde(default = "default_remote")]
    pub remote: String,
    /// GitHub only: `manual` (someone runs `atelier merge`) or `auto` (`atelier serve`
    /// merges as soon as the gate passes).
    #[serde(default = "default_merge")]
    pub merge: String,
}

impl ForgeConfig {
    /// The local forge's defaults (for `init`, which sets the repository and branch).
    pub fn default_local() -> ForgeConfig {
        ForgeConfig {
            kind: default_kind(),
            repository: String::new(),
            branch: default_branch(),
            api_url: default_api_url(),
            remote: default_remote(),
            merge: default_merge(),
        }
    }

    pub fn is_github(&self) -> bool {
        self.kind == "github"
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct GateConfig {
    /// Where the gate's private key (it signs ledger checkpoints) is kept, when not in this
    /// clone's gate key directory outside the repository (`workflow::gatekey`): an absolute
    /// path. A path under `.atelier/` is where older versions kept it; atelier moves it out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<PathBuf>,
}

fn default_kind() -> String {
    "local".into()
}
fn default_branch() -> String {
    "main".into()
}
/// GitHub's public REST API (GitHub Enterprise Server answers at `https://HOST/api/v3`):
/// `[forge] api_url` when atelier.toml does not say (part of the
/// file's schema; the GitHub forge reads the setting, never this constant).
pub const DEFAULT_API_URL: &str = "https://api.github.com";

/// Whether `url` can be `[forge] api_url`: an http(s) URL.
pub fn is_api_url(url: &str) -> bool {
    (url.starts_with("https://") || url.starts_with("http://")) && url.parse::<http::Uri>().is_ok()
}

fn default_api_url() -> String {
    DEFAULT_API_URL.into()
}
fn default_remote() -> String {
    "origin".into()
}
fn default_merge() -> String {
    "manual".into()
}

/// The gate key lives in the clone's private directory (which no change can touch) or outside
/// the repository: anywhere else a merged change could overwrite it.
fn check_gate_key(key: &Path) -> Result<(), String> {
    if key.is_absolute() {
        return Ok(());
    }
    let text = key.to_string_lossy().replace('\\', "/");
    let inside = crate::governance::policy::is_reserved(&text)
        && !key
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir));
    if inside {
        Ok(())
    } else {
        Err(format!(
            "gate.key: expected a path under `{}/` or an absolute path outside the repository, found `{}`: a merged change could overwrite a key kept anywhere else in the tree",
            crate::governance::policy::RESERVED_DIR,
            key.display()
        ))
    }
}

/// The `[forge]` table's values make sense together.
fn check_forge(f: &ForgeConfig) -> Result<(), String> {
    match f.kind.as_str() {
        "local" => Ok(()),
        "github" => {
            let mut parts = f.repository.split('/');
            let ok_part = |p: Option<&str>| {
                p.is_some_and(|p| {
                    !p.is_empty()
                        && p != "."
                        && p != ".."
                        && p.bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
                })
            };
            if !(ok_part(parts.next()) && ok_part(parts.next()) && parts.next().is_none()) {
                return Err(format!(
                    "[forge] repository = \"{}\": a GitHub repository is written `owner/name` (letters, digits, `-`, `_`, `.`)",
                    f.repository
                ));
            }
            if !is_api_url(&f.api_url) {
                return Err(format!(
                    "[forge] api_url = \"{}\": expected an http(s) URL such as {}",
                    f.api_url, DEFAULT_API_URL
                ));
            }
            if f.remote.is_empty() || f.remote.starts_with('-') {
                return Err(format!(
                    "[forge] remote = \"{}\": name the git remote proposal branches are pushed to (usually `origin`)",
                    f.remote
                ));
            }
            if f.merge != "manual" && f.merge != "auto" {
                return Err(format!(
                    "[forge] merge = \"{}\": expected \"manual\" or \"auto\"",
                    f.merge
                ));
            }
            Ok(())
        }
        other => Err(format!(
            "[forge] kind = \"{other}\" is unknown: use \"local\" (the default) or \"github\""
        )),
    }
}

/// A TOML string literal, escaped.
fn quote(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("{path} not found: run `atelier init` in this repository first")]
    Missing { path: String },
    #[error("{path}: {reason}")]
    Invalid { path: String, reason: String },
}

impl crate::errors::Classify for ConfigError {
    fn kind(&self) -> crate::errors::Kind {
        crate::errors::Kind::Input
    }
}

impl Config {
    pub fn load(root: &Path) -> Result<Config, ConfigError> {
        let path = root.join(FILE);
        let text = std::fs::read_to_string(&path).map_err(|_| ConfigError::Missing {
            path: path.display().to_string(),
        })?;
        Config::parse(&path.display().to_string(), &text)
    }

    /// Parses and checks the text of `atelier.toml` (`path` names it in messages).
    pub fn parse(path: &str, text: &str) -> Result<Config, ConfigError> {
        let config: Config = toml::from_str(text).map_err(|e| ConfigError::Invalid {
            path: path.to_string(),
            reason: match e.span().and_then(|at| key_at(text, at.start)) {
                Some(key) => format!("{key}: {}", e.to_string().trim_end()),
                None => e.to_string().trim_end().to_string(),
            },
        })?;
        let invalid = |reason: String| ConfigError::Invalid {
            path: path.to_string(),
            reason,
        };
        check_forge(&config.forge).map_err(&invalid)?;
        if let Some(key) = &config.gate.key {
            check_gate_key(key).map_err(&invalid)?;
        }
        // Every duration was checked as it was read (`Span`): a bad one names its line.
        let nudge = config.conductor.nudge_after.secs();
        let restart = config.conductor.restart_after.secs();
        if nudge < 1 || restart < nudge {
            return Err(invalid(format!(
                "conductor: nudge_after must be at least 1s and restart_after at least nudge_after (found {} and {})",
                config.conductor.nudge_after, config.conductor.restart_after
            )));
        }
        if config.swarm.context_budget > 15 * 1024 {
            return Err(invalid(format!(
                "swarm.context_budget: at most 15360 bytes, found {}",
                config.swarm.context_budget
            )));
        }
        if config.swarm.max_parallel == 0 || config.conductor.failure_budget == 0 {
            return Err(invalid(
                "swarm.max_parallel and conductor.failure_budget must be at least 1".into(),
            ));
        }
        if let Some(lint) = &config.proposers.lint {
            if lint.command.first().is_none_or(|p| p.trim().is_empty()) {
                return Err(invalid(
                    "proposers.lint.command: name the fix command, e.g. [\"cargo\", \"clippy\", \"--fix\", \"--allow-dirty\", \"--allow-no-vcs\", \"--\", \"-W\", \"clippy::{family}\"]".into(),
                ));
            }
        }
        if let Some(u) = &config.validators.user_testing {
            if u.scenario.is_empty()
                || u.scenario
                    .iter()
                    .chain(&u.build)
                    .any(|c| c.trim().is_empty())
            {
                return Err(invalid(
                    "validators.user_testing.scenario: at least one command, none empty, e.g. [\"target/release/atelier demo\"]".into(),
                ));
            }
        }
        for (name, role) in &config.roles {
            let bad = |reason: String| ConfigError::Invalid {
                path: path.to_string(),
                reason: format!("[roles.{name}] {reason}"),
            };
            match role.backend.as_str() {
                "command" if role.command.as_ref().is_none_or(|c| c.is_empty()) => {
                    return Err(bad(
                        "backend = \"command\" needs `command = [\"program\", \"arg\"]`".into(),
                    ))
                }
                "http" if role.base_url.is_none() || role.model.is_none() => {
                    return Err(bad("backend = \"http\" needs `base_url` and `model`".into()))
                }
                "codex"
                    if role.base_url.is_none() && role.env.iter().any(|e| e == "OPENAI_BASE_URL") =>
                {
                    return Err(bad(
                        "passes `OPENAI_BASE_URL`, which codex 0.171 ignores (it would call api.openai.com): set `base_url = \"http://HOST:PORT/v1\"` on the role instead, and Atelier points codex at it".into(),
                    ))
                }
                "command" | "http" | "claude" | "codex" | "aider" => {}
                other => {
                    return Err(bad(format!(
                        "backend `{other}` is unknown: use command, http, claude, codex or aider"
                    )))
                }
            }
            let blank = |v: &Option<String>| v.as_ref().is_none_or(|s| s.trim().is_empty());
            if blank(&role.provider) != blank(&role.family) {
                return Err(bad(
                    "declare `provider` and `family` together and non-empty (e.g. provider = \"anthropic\", family = \"claude\"), or neither".into(),
                ));
            }
        }
        Ok(config)
    }

    pub fn render(&self) -> String {
        format!(
            "# Atelier configuration for this repository. See README.md.\n\n[forge]\n# \"local\": pull requests live in .atelier/forge (this clone only); the ledger travels in refs/atelier/ledger.\nkind = {}\n# The repository's name as approval tokens bind it.\nrepository = {}\n# The protected branch: every change to it goes through the gate.\nbranch = {}\n# For GitHub (see docs/github.md): kind = \"github\", repository = \"owner/name\", and\n# api_url = \"{}\", remote = \"origin\", merge = \"manual\" (or \"auto\").\n\n[gate]\n# The gate's private key (it signs ledger checkpoints) is kept outside the repository, in\n# $XDG_DATA_HOME/atelier/gate/<clone>/gate_key (default ~/.local/share/atelier/...): `atelier init`\n# prints where. To keep it elsewhere: key = \"/an/absolute/path\". Back it up; never commit it.\n{}\n# Swarm roles route plan tasks to agents (see docs/swarm.md, \"Running plans\"), for example:\n# [roles.implementer]\n# backend = \"claude\"            # or \"codex\", \"aider\", or \"command\" with command = [\"prog\"]\n# env = [\"ANTHROPIC_API_KEY\"]   # passed through besides PATH, HOME, LANG\n# provider = \"anthropic\"       # optional, together: who makes the model and its family,\n# family = \"claude\"            # for [review] distinct_family (reviewers unlike the proposer)\n",
            quote(&self.forge.kind),
            quote(&self.forge.repository),
            quote(&self.forge.branch),
            DEFAULT_API_URL,
            match &self.gate.key {
                Some(k) => format!("key = {}\n", quote(&k.display().to_string())),
                None => String::new(),
            }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(roles: &str) -> Result<Config, ConfigError> {
        let dir = tempfile::tempdir().expect("tempdir");
        let text = format!("[forge]\nrepository = \"local/x\"\n\n{roles}");
        std::fs::write(dir.path().join(FILE), text).expect("write");
        Config::load(dir.path())
    }

    #[test]
    fn durations_are_read_once_and_a_bad_one_names_its_line() {
        let c =
            load("[conductor]\nnudge_after = \"90s\"\nrestart_after = \"10m\"\n").expect("valid");
        assert_eq!(c.conductor.nudge_after.secs(), 90);
        assert_eq!(
            c.conductor.restart_after.duration(),
            std::time::Duration::from_secs(600)
        );
        assert_eq!(c.conductor.restart_after.to_string(), "10m");
        assert_eq!(c.review.timeout.secs(), 600, "the default");
        for bad in ["soon", "-5s", "10"] {
            let e = load(&format!("[conductor]\nattempt_timeout = \"{bad}\"\n"))
                .expect_err(bad)
                .to_string();
            assert!(
                e.contains(FILE)
                    && e.contains("attempt_timeout")
                    && e.contains("is not a duration"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn a_role_declares_provider_and_family_together() {
        let role = |extra: &str| format!("[roles.reviewer]\nbackend = \"claude\"\n{extra}");
        let c = load(&role("provider = \"anthropic\"\nfamily = \"claude\"\n")).expect("valid");
        let fam = c.roles["reviewer"].family().expect("declared");
        assert_eq!(
            (fam.provider.as_str(), fam.family.as_str()),
            ("anthropic", "claude")
        );
        assert!(load(&role("")).expect("valid").roles["reviewer"]
            .family()
            .is_none());
        for (extra, want) in [
            ("provider = \"anthropic\"\n", "together"),
            ("family = \"claude\"\n", "together"),
            ("provider = \" \"\nfamily = \"claude\"\n", "together"),
            ("vendor = \"anthropic\"\n", "unknown field `vendor`"),
        ] {
            let e = load(&role(extra)).expect_err(extra).to_string();
            assert!(e.contains(want), "{extra}: {e}");
        }
    }

    #[test]
    fn a_codex_role_names_its_endpoint_with_base_url_not_the_variable_codex_ignores() {
        let e = load(
            "[roles.w]\nbackend = \"codex\"\nenv = [\"OPENAI_API_KEY\", \"OPENAI_BASE_URL\"]\n",
        )
        .expect_err("refused")
        .to_string();
        assert!(
            e.contains("[roles.w]") && e.contains("OPENAI_BASE_URL") && e.contains("base_url ="),
            "{e}"
        );
        load("[roles.w]\nbackend = \"codex\"\nenv = [\"OPENAI_API_KEY\"]\nbase_url = \"http://127.0.0.1:9/v1\"\n")
            .expect("valid");
    }
}
