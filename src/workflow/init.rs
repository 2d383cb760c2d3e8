//! `atelier init` (adopt Atelier in a repository) and `atelier keygen` (an approver's key).

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::workflow::error::{Context, Result};
use ed25519_dalek::SigningKey;
use ssh_key::private::{Ed25519Keypair, KeypairData};
use ssh_key::{LineEnding, PrivateKey};

use crate::config::{Config, ForgeConfig, GateConfig};
use crate::fsutil::atomic_write;
use crate::git;
use crate::governance::policy::{
    Policy, PolicyFiles, DEFAULT_GOVERNANCE_TOML, GATE_KEY_PATH, GOVERNANCE_PATH,
};

/// What `init` did.
#[derive(Debug, serde::Serialize)]
pub struct InitReport {
    pub root: PathBuf,
    pub created: Vec<String>,
    pub kept: Vec<String>,
    pub gate_key_fingerprint: String,
    /// Where the gate's private key is kept (outside the repository).
    pub gate_key_path: PathBuf,
    pub to_commit: Vec<String>,
}

/// The default `policies/allowed_signers`: comments only. Atelier's own adds how its
/// maintainers list their keys (`tests/own_repository.rs` holds it to that).
const ALLOWED_SIGNERS_TEMPLATE: &str = include_str!("../defaults/policies/allowed_signers");

const GOVERNANCE_MD: &str = include_str!("../../GOVERNANCE.md");

/// The agent reviewer `init` installs switched off: this repository's own.
const ADVERSARY: &str = include_str!("../../reviewers/adversary.toml");

/// This repository's own reviewers/README.md: what the panel is and how to add a reviewer.
const REVIEWERS_README: &str = include_str!("../../reviewers/README.md");

/// This repository's own proposals/README.md: what a proposal's record holds.
const PROPOSALS_README: &str = include_str!("../../proposals/README.md");

fn write_if_missing(root: &Path, rel: &str, bytes: &[u8], report: &mut InitReport) -> Result<()> {
    let path = root.join(rel);
    if path.exists() {
        report.kept.push(rel.to_string());
    } else {
        atomic_write(&path, bytes)?;
        report.created.push(rel.to_string());
    }
    Ok(())
}

/// The default policy with `extra` globs added to the constitution's paths, checked as the
/// gate will read it.
fn governance_toml(extra: &[String]) -> Result<String> {
    let mut text = DEFAULT_GOVERNANCE_TOML.to_string();
    if !extra.is_empty() {
        let open = "[constitution]\npaths = [\n";
        let at = text
            .find(open)
            .and_then(|start| text[start..].find("\n]\n").map(|end| start + end + 1))
            .context("the default policy has no [constitution] paths")?;
        let mut lines = String::from("    # Added by `atelier init --constitution`.\n");
        for glob in extra {
            lines.push_str(&format!("    {},\n", toml::Value::String(glob.clone())));
        }
        text.insert_str(at, &lines);
    }
    let files = PolicyFiles {
        governance: Some(text.clone().into_bytes()),
        allowed_signers: Some(ALLOWED_SIGNERS_TEMPLATE.as_bytes().to_vec()),
        gate_key: None,
    };
    if let Err(e) = Policy::load(&files) {
        return Err(crate::workflow::Error::Input(format!(
            "--constitution: {e}; give each glob as the policy's rules take it (`src/rules/**`, `Makefile`)"
        )));
    }
    Ok(text)
}

/// The default constitution, panel and docs, each only where it is missing.
fn write_defaults(root: &Path, governance: &str, report: &mut InitReport) -> Result<()> {
    write_if_missing(root, GOVERNANCE_PATH, governance.as_bytes(), report)?;
    write_if_missing(
        root,
        "policies/allowed_signers",
        ALLOWED_SIGNERS_TEMPLATE.as_bytes(),
        report,
    )?;
    write_if_missing(
        root,
        "reviewers/README.md",
        REVIEWERS_README.as_bytes(),
        report,
    )?;
    // The default panel: the built-in reviewers, so it runs offline from the start, and an
    // agent reviewer switched off (comments only) with its prompt template.
    for (path, text) in crate::panel::DEFAULT_PANEL {
        write_if_missing(root, path, text.as_bytes(), report)?;
    }
    write_if_missing(
        root,
        "reviewers/adversary.toml",
        ADVERSARY.as_bytes(),
        report,
    )?;
    write_if_missing(
        root,
        "reviewers/templates/adversary.md.j2",
        crate::agent::reviewer::DEFAULT_TEMPLATE.as_bytes(),
        report,
    )?;
    write_if_missing(
        root,
        "proposals/README.md",
        PROPOSALS_README.as_bytes(),
        report,
    )?;
    write_if_missing(root, "GOVERNANCE.md", GOVERNANCE_MD.as_bytes(), report)?;
    Ok(())
}

/// Keeps `.atelier/` out of git.
fn ignore_atelier_dir(root: &Path, report: &mut InitReport) -> Result<()> {
    let ignore = root.join(".gitignore");
    let current = std::fs::read_to_string(&ignore).unwrap_or_default();
    if !current
        .lines()
        .any(|l| l.trim() == ".atelier/" || l.trim() == ".atelier")
    {
        let mut text = current.clone();
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(".atelier/\n");
        atomic_write(&ignore, text.as_bytes())?;
        report.created.push(".gitignore (.atelier/ entry)".into());
    }
    Ok(())
}

/// Adopts Atelier in the repository containing `dir`. Idempotent: existing files are kept.
/// `constitution` globs are added to the default constitution's paths.
pub fn init(
    dir: &Path,
    repository: Option<String>,
    branch: Option<String>,
    constitution: &[String],
) -> Result<InitReport> {
    let repo = git::open(dir)?;
    let root = repo
        .workdir()
        .context("the repository is bare: atelier needs a working tree")?
        .to_path_buf();
    let governance = governance_toml(constitution)?;
    if !constitution.is_empty() && root.join(GOVERNANCE_PATH).exists() {
        return Err(crate::workflow::Error::Input(format!(
            "--constitution: {} is already there, so init writes no policy; add the globs to its [constitution] paths yourself (once the repository is adopted, that is itself a constitution change)",
            root.join(GOVERNANCE_PATH).display()
        )));
    }
    let mut report = InitReport {
        root: root.clone(),
        created: Vec::new(),
        kept: Vec::new(),
        gate_key_fingerprint: String::new(),
        gate_key_path: PathBuf::new(),
        to_commit: Vec::new(),
    };
    let name = root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "repository".into());
    let config = Config {
        forge: ForgeConfig {
            kind: "local".into(),
            repository: repository.unwrap_or_else(|| format!("local/{name}")),
            branch: branch.unwrap_or_else(|| "main".into()),
            ..ForgeConfig::default_local()
        },
        gate: GateConfig::default(),
        roles: Default::default(),
        gauntlet: Default::default(),
        conductor: Default::default(),
        swarm: Default::default(),
        review: Default::default(),
        proposers: Default::default(),
        validators: Default::default(),
        budget: Default::default(),
        prices: Default::default(),
    };
    write_if_missing(
        &root,
        crate::config::FILE,
        config.render().as_bytes(),
        &mut report,
    )?;
    let config = Config::load(&root)?;
    write_defaults(&root, &governance, &mut report)?;

    // The gate's key: private outside the repository (moved there from .atelier/ if an older
    // version left it there), public in policies/.
    let repo = crate::git::open(&root)?;
    if let Some(m) = super::gatekey::migrate(&repo, &root, &config)? {
        report.created.push(format!(
            "{} (the gate key, moved out of the repository from {}; back it up)",
            m.to.display(),
            m.from.display()
        ));
    }
    let key_path = super::gatekey::location(&root, &config)?;
    report.gate_key_path = key_path.clone();
    // An adopted repository's gate key is its adopter's: a new one here would not be the key
    // in force, and every command that records would then refuse.
    let pub_path = root.join(GATE_KEY_PATH);
    if !key_path.exists()
        && pub_path.exists()
        && super::gatekey::legacy_key(&repo, &root, &config)?.is_none()
    {
        return Err(crate::workflow::Error::Input(format!(
            "this repository is adopted: {} names its gate key, which whoever adopted it keeps on their machine, so no new key was written; you need none to read it: `atelier show`, `review` and `gate` work here, and `approve` prints your signed token for the key's holder to record (`atelier approve ID --token FILE`)",
            pub_path.display()
        )));
    }
    let key = if key_path.exists() {
        report
            .kept
            .push(format!("{} (the gate key)", key_path.display()));
        crate::keys::read_signing_key(&key_path)?
    } else {
        let key = SigningKey::generate(&mut rand_core::OsRng);
        let pair = Ed25519Keypair::from_seed(&key.to_bytes());
        let text = PrivateKey::new(KeypairData::Ed25519(pair), "atelier-gate")?
            .to_openssh(LineEnding::LF)?;
        super::gatekey::write_key(&key_path, text.as_bytes(), &root)?;
        report.created.push(format!(
            "{} (the gate key, outside the repository: back it up)",
            key_path.display()
        ));
        key
    };
    let public = public_line(&key, "atelier-gate")?;
    match std::fs::read_to_string(&pub_path) {
        Ok(existing) if existing.trim() == public.trim() => report.kept.push(GATE_KEY_PATH.into()),
        Ok(_) => return Err(crate::workflow::Error::Input(format!(
            "{} holds a different key than {}: restore the matching private key, or delete both to make a new gate key",
            pub_path.display(),
            key_path.display()
        ))),
        Err(_) => {
            atomic_write(&pub_path, format!("{public}\n").as_bytes())?;
            report.created.push(GATE_KEY_PATH.into());
        }
    }
    report.gate_key_fingerprint =
        crate::governance::token::fingerprint(&ssh_key::public::KeyData::Ed25519(
            ssh_key::public::Ed25519PublicKey(key.verifying_key().to_bytes()),
        ));

    ignore_atelier_dir(&root, &mut report)?;
    report.to_commit = vec![
        ".gitignore".into(),
        crate::config::FILE.into(),
        "GOVERNANCE.md".into(),
        "policies".into(),
        "reviewers".into(),
        "proposals".into(),
    ];
    Ok(report)
}

fn public_line(key: &SigningKey, comment: &str) -> Result<String> {
    let pair = Ed25519Keypair::from_seed(&key.to_bytes());
    let private = PrivateKey::new(KeypairData::Ed25519(pair), comment)?;
    Ok(private.public_key().to_openssh()?)
}

/// Writes a new OpenSSH ed25519 key pair (`path` mode 0600, `path.pub`); refuses to overwrite.
fn write_keypair(path: &Path, comment: &str) -> Result<(SigningKey, String)> {
    let key = SigningKey::generate(&mut rand_core::OsRng);
    let pair = Ed25519Keypair::from_seed(&key.to_bytes());
    let private = PrivateKey::new(KeypairData::Ed25519(pair), comment)?;
    let text = private.to_openssh(LineEnding::LF)?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            crate::workflow::Error::Input(format!(
                "{} already exists; atelier never overwrites a key — choose another path",
                path.display()
            ))
        } else {
            crate::workflow::Error::Input(format!("creating {}: {e}", path.display()))
        }
    })?;
    file.write_all(text.as_bytes())?;
    file.sync_all()?;
    let public = private.public_key().to_openssh()?;
    atomic_write(
        &path.with_extension(pub_extension(path)),
        format!("{public}\n").as_bytes(),
    )?;
    Ok((key, public))
}

fn pub_extension(path: &Path) -> String {
    match path.extension() {
        Some(e) => format!("{}.pub", e.to_string_lossy()),
        None => "pub".into(),
    }
}

/// What `keygen` made.
#[derive(Debug, serde::Serialize)]
pub struct KeygenReport {
    pub private: PathBuf,
    pub public: PathBuf,
    pub fingerprint: String,
    pub allowed_signers_line: String,
}

/// Makes an approver's key pair and the allowed_signers line for it.
pub fn keygen(path: &Path, principal: Option<String>) -> Result<KeygenReport> {
    let principal = principal.unwrap_or_else(|| {
        path.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "approver".into())
    });
    if principal.is_empty() || principal.contains([',', '*', '?', '!', ' ', '"']) {
        return Err(crate::workflow::Error::Input(format!("--principal `{principal}`: a principal is one name without spaces, commas, quotes or wildcards (e.g. alice@example.org)")));
    }
    let (key, public) = write_keypair(path, &principal)?;
    let fingerprint = crate::governance::token::fingerprint(&ssh_key::public::KeyData::Ed25519(
        ssh_key::public::Ed25519PublicKey(key.verifying_key().to_bytes()),
    ));
    let mut fields = public.split(' ');
    let (kind, b64) = (
        fields.next().unwrap_or("ssh-ed25519"),
        fields.next().unwrap_or(""),
    );
    Ok(KeygenReport {
        private: path.to_path_buf(),
        public: path.with_extension(pub_extension(path)),
        fingerprint,
        allowed_signers_line: format!("{principal} namespaces=\"atelier-approval\" {kind} {b64}"),
    })
}
