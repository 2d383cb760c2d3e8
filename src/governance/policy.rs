//! The policy in force for a change, as read from the change's *base* commit: quorum rules by
//! path glob (`policies/governance.toml`), the approvers' keys (`policies/allowed_signers`) and
//! the gate's own public key (`policies/gate_key.pub`). Also the policy digest a token binds.
//!
//! Pure: callers hand in file bytes (`git::policy_files` reads them at a commit). A policy that
//! does not parse is an error value the gate turns into a refusal — it fails closed.

use globset::{GlobSet, GlobSetBuilder};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use ssh_key::public::KeyData;
use thiserror::Error;

use super::allowed_signers::{self, AllowedSigners};
pub use super::paths::stands_for;
use super::time::parse_duration;

pub const GOVERNANCE_PATH: &str = "policies/governance.toml";
pub const ALLOWED_SIGNERS_PATH: &str = "policies/allowed_signers";
pub const GATE_KEY_PATH: &str = "policies/gate_key.pub";
/// The directory where each clone keeps the gate's private state (the gate key, the local
/// forge, locks, runs). No change may add or edit anything under it, in any letter case: a merge
/// checkout would otherwise overwrite the gate's own files.
pub const RESERVED_DIR: &str = ".atelier";

/// Whether `path` (as a change names it, `/`-separated) lies under [`RESERVED_DIR`].
pub fn is_reserved(path: &str) -> bool {
    path.split('/')
        .next()
        .is_some_and(|first| first.eq_ignore_ascii_case(RESERVED_DIR))
}

/// The paths whose content the policy digest covers: a token is bound to all of them.
pub fn is_digest_path(path: &str) -> bool {
    path.starts_with("policies/") || path.starts_with("reviewers/") || path == "GOVERNANCE.md"
}

/// SHA-256 over every digest path and its bytes, sorted by path, each as
/// `path NUL length NUL bytes`, hex-encoded.
pub fn policy_digest(files: &[(String, Vec<u8>)]) -> String {
    let mut sorted: Vec<&(String, Vec<u8>)> =
        files.iter().filter(|(p, _)| is_digest_path(p)).collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let mut h = Sha256::new();
    for (path, bytes) in sorted {
        h.update(path.as_bytes());
        h.update([0]);
        h.update(bytes.len().to_string().as_bytes());
        h.update([0]);
        h.update(bytes);
    }
    hex::encode(h.finalize())
}

/// Why a policy could not be read. The gate refuses every merge while this holds.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum PolicyError {
    #[error("{path} is missing at this commit: run `atelier init` and commit the policy")]
    Missing { path: &'static str },
    #[error("{path}: {reason}")]
    Invalid { path: &'static str, reason: String },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGovernance {
    version: u32,
    #[serde(default)]
    tokens: RawTokens,
    constitution: RawRule,
    #[serde(default, rename = "rule")]
    rules: Vec<RawRule>,
    #[serde(default)]
    bots: Vec<String>,
    #[serde(default)]
    revoked: Vec<RawRevocation>,
    #[serde(default)]
    review: RawReview,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawReview {
    #[serde(default = "default_true")]
    required: bool,
    #[serde(default = "default_block_on")]
    block_on: String,
    #[serde(default)]
    distinct_family: bool,
}

impl Default for RawReview {
    fn default() -> Self {
        RawReview {
            required: true,
            block_on: default_block_on(),
            distinct_family: false,
        }
    }
}

fn default_true() -> bool {
    true
}
fn default_block_on() -> String {
    "block".into()
}

/// `[review]`: how the gate holds a change to the review panel's verdict. Every option can only
/// make the gate stricter than the built-in reviewers alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReviewSettings {
    /// A recorded verdict of the agent reviewers is required for the current base, head and
    /// tree when the panel has agent reviewers.
    pub required: bool,
    /// The verdict that refuses a merge: `block`, or the stricter `revise`.
    pub block_on: super::review::Verdict,
    /// Agent reviewers must differ from the proposer in provider and model family.
    pub distinct_family: bool,
}

impl Default for ReviewSettings {
    fn default() -> Self {
        ReviewSettings {
            required: true,
            block_on: super::review::Verdict::Block,
            distinct_family: false,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTokens {
    #[serde(default = "default_max_lifetime")]
    max_lifetime: String,
    #[serde(default = "default_clock_skew")]
    clock_skew: String,
}

impl Default for RawTokens {
    fn default() -> Self {
        RawTokens {
            max_lifetime: default_max_lifetime(),
            clock_skew: default_clock_skew(),
        }
    }
}

fn default_max_lifetime() -> String {
    "30d".into()
}
fn default_clock_skew() -> String {
    "5m".into()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    #[serde(default)]
    name: Option<String>,
    paths: Vec<String>,
    quorum: u32,
    #[serde(default)]
    approvers: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRevocation {
    key: String,
    #[serde(default)]
    reason: Option<String>,
}

/// One quorum rule: a change touching any of `paths` needs `quorum` distinct eligible
/// principals (restricted to `approvers` when given).
#[derive(Debug, Clone)]
pub struct Rule {
    pub name: String,
    pub paths: Vec<String>,
    pub quorum: u32,
    pub approvers: Option<Vec<String>>,
    matcher: GlobSet,
}

impl Rule {
    /// The changed paths this rule covers: those its globs match, and a file where its globs
    /// name a folder (`.ci` for `.ci/**`: a symlink or a submodule there stands for that
    /// folder on every checkout).
    pub fn matched<'p>(&self, changed: &'p [String]) -> Vec<&'p str> {
        changed
            .iter()
            .filter(|p| {
                self.matcher.is_match(p.as_str()) || stands_for(&self.matcher, &self.paths, p)
            })
            .map(String::as_str)
            .collect()
    }

    /// Whether the rule's globs match `path` itself.
    pub fn matches_exactly(&self, path: &str) -> bool {
        self.matcher.is_match(path)
    }

    pub fn counts(&self, principal: &str) -> bool {
        self.approvers
            .as_ref()
            .is_none_or(|a| a.iter().any(|x| x.eq_ignore_ascii_case(principal)))
    }
}

/// A revoked key, by its `SHA256:…` fingerprint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revocation {
    pub fingerprint: String,
    pub reason: Option<String>,
}

/// Everything the gate needs to know about the rules in force.
#[derive(Debug, Clone)]
pub struct Policy {
    pub max_lifetime: i64,
    pub clock_skew: i64,
    pub constitution: Rule,
    pub rules: Vec<Rule>,
    pub bots: Vec<String>,
    pub revoked: Vec<Revocation>,
    pub signers: AllowedSigners,
    pub gate_key: Option<KeyData>,
    pub review: ReviewSettings,
}

/// The raw bytes of the three policy files at one commit (`None` = absent).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PolicyFiles {
    pub governance: Option<Vec<u8>>,
    pub allowed_signers: Option<Vec<u8>>,
    pub gate_key: Option<Vec<u8>>,
}

fn compile(raw: RawRule, default_name: &str, path: &'static str) -> Result<Rule, PolicyError> {
    let name = raw.name.unwrap_or_else(|| default_name.to_string());
    if raw.paths.is_empty() {
        return Err(PolicyError::Invalid {
            path,
            reason: format!("rule `{name}`: `paths` is empty; list at least one glob"),
        });
    }
    if raw.quorum == 0 {
        return Err(PolicyError::Invalid {
            path,
            reason: format!("rule `{name}`: `quorum` is 0; a rule needs at least one approval (delete the rule instead)"),
        });
    }
    // Literal separators: `*` stops at `/`, `**` crosses directories, as in .gitignore.
    let mut builder = GlobSetBuilder::new();
    for glob in &raw.paths {
        // Case-insensitive: on macOS and Windows `Build.rs` is `build.rs`. Matching more paths
        // only ever adds requirements, so this errs on the safe side everywhere.
        let g = globset::GlobBuilder::new(glob)
            .literal_separator(true)
            .case_insensitive(true)
            .build()
            .map_err(|e| PolicyError::Invalid {
                path,
                reason: format!("rule `{name}`: glob `{glob}` does not parse: {e}"),
            })?;
        builder.add(g);
    }
    let matcher = builder.build().map_err(|e| PolicyError::Invalid {
        path,
        reason: format!("rule `{name}`: {e}"),
    })?;
    Ok(Rule {
        name,
        paths: raw.paths,
        quorum: raw.quorum,
        approvers: raw.approvers,
        matcher,
    })
}

impl Policy {
    /// Parses the policy files of one commit; any problem fails closed.
    pub fn load(files: &PolicyFiles) -> Result<Policy, PolicyError> {
        let gov_bytes = files.governance.as_ref().ok_or(PolicyError::Missing {
            path: GOVERNANCE_PATH,
        })?;
        let invalid = |path: &'static str, reason: String| PolicyError::Invalid { path, reason };
        let gov_text = std::str::from_utf8(gov_bytes)
            .map_err(|_| invalid(GOVERNANCE_PATH, "is not UTF-8".into()))?;
        let raw: RawGovernance = toml::from_str(gov_text)
            .map_err(|e| invalid(GOVERNANCE_PATH, e.to_string().trim_end().to_string()))?;
        if raw.version != 1 {
            return Err(invalid(
                GOVERNANCE_PATH,
                format!("`version = {}` is not supported; expected 1", raw.version),
            ));
        }
        let duration = |field: &str, v: &str| {
            parse_duration(v)
                .map_err(|e| invalid(GOVERNANCE_PATH, format!("[tokens] {field}: {e}")))
        };
        let max_lifetime = duration("max_lifetime", &raw.tokens.max_lifetime)?;
        let clock_skew = duration("clock_skew", &raw.tokens.clock_skew)?;
        if max_lifetime > 366 * 86_400 {
            return Err(invalid(
                GOVERNANCE_PATH,
                format!(
                    "[tokens] max_lifetime: at most 366d, found {}",
                    raw.tokens.max_lifetime
                ),
            ));
        }
        if clock_skew > 86_400 {
            return Err(invalid(
                GOVERNANCE_PATH,
                format!(
                    "[tokens] clock_skew: at most 1d, found {}",
                    raw.tokens.clock_skew
                ),
            ));
        }
        if max_lifetime == 0 {
            return Err(invalid(
                GOVERNANCE_PATH,
                "[tokens] max_lifetime must be longer than 0s".into(),
            ));
        }
        let constitution = compile(raw.constitution, "constitution", GOVERNANCE_PATH)?;
        let rules = raw
            .rules
            .into_iter()
            .enumerate()
            .map(|(i, r)| compile(r, &format!("rule #{}", i + 1), GOVERNANCE_PATH))
            .collect::<Result<Vec<_>, _>>()?;
        let block_on = match raw.review.block_on.as_str() {
            "block" => super::review::Verdict::Block,
            "revise" => super::review::Verdict::Revise,
            other => {
                return Err(invalid(
                    GOVERNANCE_PATH,
                    format!("[review] block_on: `{other}` is not a verdict that refuses; expected \"block\" or the stricter \"revise\""),
                ))
            }
        };
        let review = ReviewSettings {
            required: raw.review.required,
            block_on,
            distinct_family: raw.review.distinct_family,
        };
        let mut revoked = Vec::new();
        for r in raw.revoked {
            if !r.key.starts_with("SHA256:") {
                return Err(invalid(
                    GOVERNANCE_PATH,
                    format!("[[revoked]] key `{}`: expected a SHA256:… fingerprint as printed by `ssh-keygen -lf KEY.pub`", r.key),
                ));
            }
            revoked.push(Revocation {
                fingerprint: r.key,
                reason: r.reason,
            });
        }
        let signers_bytes = files.allowed_signers.as_ref().ok_or(PolicyError::Missing {
            path: ALLOWED_SIGNERS_PATH,
        })?;
        let signers_text = std::str::from_utf8(signers_bytes)
            .map_err(|_| invalid(ALLOWED_SIGNERS_PATH, "is not UTF-8".into()))?;
        let signers = allowed_signers::parse(signers_text)
            .map_err(|e| invalid(ALLOWED_SIGNERS_PATH, e.to_string()))?;
        let gate_key = match &files.gate_key {
            None => None,
            Some(bytes) => {
                let text = std::str::from_utf8(bytes)
                    .map_err(|_| invalid(GATE_KEY_PATH, "is not UTF-8".into()))?;
                let key = ssh_key::PublicKey::from_openssh(text.trim()).map_err(|e| {
                    invalid(GATE_KEY_PATH, format!("not an OpenSSH public key: {e}"))
                })?;
                Some(key.key_data().clone())
            }
        };
        if let Some(gk) = &gate_key {
            if let Some(entry) = signers.find(gk).first() {
                return Err(invalid(
                    ALLOWED_SIGNERS_PATH,
                    format!(
                        "line {}: the gate's own key ({GATE_KEY_PATH}) is listed for `{}`; the gate may never approve its own changes — remove that line",
                        entry.line, entry.principal
                    ),
                ));
            }
        }
        Ok(Policy {
            max_lifetime,
            clock_skew,
            constitution,
            rules,
            bots: raw.bots,
            revoked,
            signers,
            gate_key,
            review,
        })
    }

    /// The rules (constitution included) that a change touching `changed` must satisfy.
    pub fn touched<'a>(&'a self, changed: &[String]) -> Vec<&'a Rule> {
        std::iter::once(&self.constitution)
            .chain(self.rules.iter())
            .filter(|r| !r.matched(changed).is_empty())
            .collect()
    }

    /// Whether allowed_signers lists the key with this fingerprint under `principal`.
    /// Whether one line of `allowed_signers` lets this key approve as `principal` at `now`: the
    /// principal, the key, the namespace and the validity window are judged on the same line,
    /// as for the base policy.
    pub fn lists(&self, fingerprint: &str, principal: &str, now: super::time::Timestamp) -> bool {
        self.signers.entries.iter().any(|e| {
            e.principal.eq_ignore_ascii_case(principal)
                && super::token::fingerprint(e.key.key_data()) == fingerprint
                && e.allows_namespace(super::token::NAMESPACE)
                && e.validity_at(now).is_none()
        })
    }

    pub fn is_revoked(&self, fingerprint: &str) -> Option<&Revocation> {
        self.revoked.iter().find(|r| r.fingerprint == fingerprint)
    }
}

/// Whether a commit whose files `has` answers for is adopted: it carries the governance policy
/// and the gate's public key. Pure: the caller reads the tree.
pub fn adopts<E>(has: &dyn Fn(&str) -> Result<bool, E>) -> Result<bool, E> {
    Ok(has(GOVERNANCE_PATH)? && has(GATE_KEY_PATH)?)
}

/// The commented default `policies/governance.toml` that `atelier init` writes. Atelier's own
/// `policies/governance.toml` is this file with a wider constitution (`tests/adopt/own_repository.rs`
/// holds the two to that one difference).
pub const DEFAULT_GOVERNANCE_TOML: &str = include_str!("../defaults/policies/governance.toml");

#[cfg(test)]
mod tests {
    use super::*;

    fn files(gov: &str) -> PolicyFiles {
        PolicyFiles {
            governance: Some(gov.as_bytes().to_vec()),
            allowed_signers: Some(Vec::new()),
            gate_key: None,
        }
    }

    #[test]
    fn default_policy_parses_and_routes_paths() {
        let p = Policy::load(&files(DEFAULT_GOVERNANCE_TOML)).expect("default parses");
        let names = |paths: &[&str]| {
            let changed: Vec<String> = paths.iter().map(|s| s.to_string()).collect();
            p.touched(&changed)
                .iter()
                .map(|r| r.name.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(names(&["src/lib.rs"]), ["any change"]);
        assert_eq!(
            names(&["policies/allowed_signers"]),
            ["constitution", "any change"]
        );
        // An adopter's code is theirs to name (`atelier init --constitution`).
        assert_eq!(names(&["src/governance/decision.rs"]), ["any change"]);
        assert_eq!(names(&["Cargo.toml"]), ["any change"]);
        assert_eq!(names(&["docs/policies/x.md"]), ["any change"]);
        // A file (a symlink, a submodule) where the constitution names a folder stands for it.
        for link in [".ci", "prompts", ".github", "reviewers", "Policies"] {
            assert_eq!(names(&[link]), ["constitution", "any change"], "{link}");
        }
        assert_eq!(names(&["src/gov"]), ["any change"]);
    }

    #[test]
    fn malformed_policies_fail_closed_with_the_field() {
        for (gov, phrase) in [
            ("version = 2\n[constitution]\npaths=[\"a\"]\nquorum=1\n", "version = 2"),
            ("version = 1\n", "constitution"),
            ("version = 1\n[constitution]\npaths=[\"a\"]\nquorum=0\n", "quorum` is 0"),
            ("version = 1\n[constitution]\npaths=[\"a[\"]\nquorum=1\n", "does not parse"),
            ("version = 1\nquorom = 3\n[constitution]\npaths=[\"a\"]\nquorum=1\n", "quorom"),
            ("version = 1\n[tokens]\nmax_lifetime=\"1w\"\n[constitution]\npaths=[\"a\"]\nquorum=1\n", "max_lifetime"),
            ("version = 1\n[constitution]\npaths=[\"a\"]\nquorum=1\n[review]\nblock_on=\"approve\"\n", "[review] block_on"),
            ("version = 1\n[constitution]\npaths=[\"a\"]\nquorum=1\n[review]\nskip=true\n", "unknown field `skip`"),
            ("version = 1\n[tokens]\nclock_skew=\"9223372036854775807s\"\n[constitution]\npaths=[\"a\"]\nquorum=1\n", "at most 1d"),
        ] {
            let err = Policy::load(&files(gov)).expect_err(gov).to_string();
            assert!(err.contains(phrase), "{err}");
        }
        let missing = PolicyFiles::default();
        assert!(matches!(
            Policy::load(&missing),
            Err(PolicyError::Missing { .. })
        ));
    }

    #[test]
    fn digest_covers_only_policy_paths_and_is_order_independent() {
        let a = vec![
            ("policies/x".to_string(), b"1".to_vec()),
            ("GOVERNANCE.md".to_string(), b"g".to_vec()),
        ];
        let b = vec![
            ("GOVERNANCE.md".to_string(), b"g".to_vec()),
            ("src/lib.rs".to_string(), b"ignored".to_vec()),
            ("policies/x".to_string(), b"1".to_vec()),
        ];
        assert_eq!(policy_digest(&a), policy_digest(&b));
        let c = vec![
            ("policies/x".to_string(), b"2".to_vec()),
            ("GOVERNANCE.md".to_string(), b"g".to_vec()),
        ];
        assert_ne!(policy_digest(&a), policy_digest(&c));
    }
}
