//! The governed change loop as domain operations: each CLI command builds options and calls one
//! function here. This layer gathers plain data from git, the forge and the ledger, hands it to
//! the pure gate in `governance`, and records every step in the ledger. It never prints.

mod approve;
pub mod body;
pub mod cycle;
pub mod error;
pub mod gate;
mod init;
pub(crate) mod merge;
mod propose;
pub mod review;
pub mod serve;
pub mod sync;

pub mod gatekey;
pub use approve::{approve, payload_from, Approval, ApproveOptions, Sign, Standing};
pub use error::{Error, Result};
pub use gate::{bound_pull, decision_event, gate, gate_locked, status_for, GateRun};
pub use init::{init, keygen, InitReport, KeygenReport};
pub use merge::{
    close, merge, merge_locked, merge_message, merge_message_at, Closed, MergeOutcome, Merged,
};
pub use propose::{propose, submit, ProposeOptions, Proposed};

use std::path::{Path, PathBuf};

use ed25519_dalek::SigningKey;
use git2::{Oid, Repository};

use crate::workflow::error::Context;

use crate::audit::ledger::{self, Event};
use crate::audit::view::LedgerView;
use crate::audit::witness;
use crate::config::Config;
use crate::forge::github::GitHubForge;
use crate::forge::local::{LocalForge, Records};
use crate::forge::{Addr, Forge, PullRequest, PullState, Site};
use crate::fsutil::Lock;
use crate::git;
use crate::governance::decision::{self, Change, Decision, GateInput};
use crate::governance::policy::{policy_digest, Policy, PolicyError};
use crate::governance::time::Timestamp;
use crate::governance::token::RawToken;
use crate::governance::Code;

pub use crate::errors::Refusal;
pub use crate::forge::{parse_id, GateStatus, Publish, DESCRIPTION_MAX};
use crate::keys::{branch_gate_keys, parse_public_key, read_signing_key_bytes};
pub use crate::keys::{key_fingerprint, published_gate_key, read_signing_key};

/// A refusal with `code`, as the governed loop's error.
pub fn refuse(code: Code, message: impl Into<String>) -> crate::workflow::Error {
    Refusal::new(code, message).into()
}

/// An opened repository with its configuration and forge.
pub struct Workspace {
    pub root: PathBuf,
    pub repo: Repository,
    pub config: Config,
    /// This clone's records of the proposals it opened (the same on every forge).
    pub records: Records,
    /// Where the forges differ: publishing, carrying tokens, showing verdicts, landing merges.
    pub forge: Box<dyn Forge>,
}

/// When HEAD names a branch that does not exist (a clone of a repository whose default branch
/// is missing, say): what to do instead of `atelier init`, which would be wrong advice here.
fn unborn_head(repo: &Repository) -> Option<String> {
    if !matches!(repo.head(), Err(e) if e.code() == git2::ErrorCode::UnbornBranch) {
        return None;
    }
    let head = repo
        .find_reference("HEAD")
        .ok()?
        .symbolic_target()
        .map(|t| t.trim_start_matches("refs/heads/").to_string())
        .unwrap_or_default();
    let mut branches: Vec<String> = repo
        .branches(None)
        .ok()?
        .flatten()
        .filter_map(|(b, _)| b.name().ok().flatten().map(str::to_string))
        .filter(|n| !n.contains("atelier/"))
        .collect();
    branches.sort();
    branches.dedup();
    let shown = if branches.is_empty() {
        "none".to_string()
    } else {
        branches.join(", ")
    };
    Some(format!(
        "this clone has nothing checked out: HEAD names the branch `{head}`, which does not exist (branches here: {shown}). Check out the protected branch — for example `git checkout main` (a remote one: `git checkout -b main origin/main`) — and run the command again; `atelier init` is only for adopting a repository"
    ))
}

impl Workspace {
    pub fn open(dir: &Path) -> Result<Workspace> {
        let repo = git::open(dir)?;
        let root = repo
            .workdir()
            .context("the repository is bare: atelier needs a working tree for atelier.toml and .atelier/")?
            .to_path_buf();
        check_working_tree(dir, &root)?;
        if !root.join(crate::config::FILE).exists() {
            if let Some(why) = unborn_head(&repo) {
                return Err(Error::Input(why));
            }
        }
        let config = Config::load(&root)?;
        let records = Records::new(root.join(".atelier"));
        let forge: Box<dyn Forge> = if config.forge.is_github() {
            Box::new(GitHubForge::new(config.forge.clone()))
        } else {
            Box::new(LocalForge::new(records.clone()))
        };
        Ok(Workspace {
            root,
            repo,
            config,
            records,
            forge,
        })
    }

    /// [`Workspace::open`] for showing only: the objects its evaluations compute (a merge's
    /// tree) stay in memory, so showing a proposal writes nothing to the repository.
    pub fn open_to_show(dir: &Path) -> Result<Workspace> {
        let ws = Workspace::open(dir)?;
        git::writes_in_memory(&ws.repo)?;
        Ok(ws)
    }

    /// What the forge works on: this clone and its records.
    pub fn site(&self) -> Site<'_> {
        Site {
            root: &self.root,
            repo: &self.repo,
            config: &self.config,
            records: &self.records,
        }
    }

    /// This clone's record of pull request `pull`, checked against the configuration and the
    /// ledger, with its branches' tips (`forge::local::checked_record`).
    pub fn checked_record(
        &self,
        view: &LedgerView,
        pull: PullRequest,
    ) -> Result<(PullRequest, Oid, Oid)> {
        Ok(crate::forge::local::checked_record(
            &self.site(),
            view,
            pull,
        )?)
    }

    pub fn atelier_dir(&self) -> PathBuf {
        self.root.join(".atelier")
    }

    /// The repository-wide lock every mutation holds (forge state and ledger appends).
    pub fn lock(&self) -> Result<Lock> {
        Ok(Lock::acquire(&self.atelier_dir().join("lock"))?)
    }

    /// [`Workspace::lock`], waiting at most `limit` (for `serve`); `waiting` is called once if
    /// the lock is held by another command.
    pub fn lock_within(&self, limit: std::time::Duration, waiting: impl FnOnce()) -> Result<Lock> {
        Ok(Lock::acquire_within(
            &self.atelier_dir().join("lock"),
            limit,
            waiting,
        )?)
    }

    pub fn branch(&self) -> &str {
        &self.config.forge.branch
    }

    /// Whether workers are contained: `[swarm] containment` as the protected branch's
    /// atelier.toml has it (a constitution file), so neither an uncommitted edit nor an agent's
    /// change can switch containment off. What contained programs are granted (each role's and
    /// the gauntlet's `network`, `readable` and `writable`, `[swarm] shared_target_dir`) must
    /// also be as merged, and the protected branch must be the one the ledger was adopted on:
    /// anything else is refused (`E_CONTAINMENT_UNCOMMITTED`).
    pub fn containment(&self) -> Result<crate::config::Containment> {
        use crate::config::Containment;
        let uncommitted = |what: String| {
            Err(refuse(
                Code::ContainmentUncommitted,
                format!("{what}: what workers may reach is a constitution change; propose it and have it approved and merged, or undo the edit"),
            ))
        };
        if let Some((adopted, _)) = ledger::adoption(&self.repo)? {
            if adopted != self.branch() {
                return uncommitted(format!(
                    "atelier.toml names `{}` as the protected branch, but the ledger was adopted on `{adopted}` (expected: {adopted}; found: {})",
                    self.branch(),
                    self.branch()
                ));
            }
        }
        let tip = git::branch_tip(&self.repo, self.branch())?;
        let tree = self.repo.find_commit(tip)?.tree()?;
        let committed = match git::read_file(&self.repo, &tree, crate::config::FILE)? {
            None => None,
            Some(bytes) => {
                let label = format!("{} at {}", crate::config::FILE, self.branch());
                Some(Config::parse(&label, &String::from_utf8_lossy(&bytes))?)
            }
        };
        let working = &self.config;
        let Some(committed) = committed else {
            if working.swarm.containment == Containment::None {
                return uncommitted(format!(
                    "the working tree's atelier.toml says `[swarm] containment = \"none\"`, branch `{}` has no atelier.toml (expected: landlock; found: none)",
                    self.branch()
                ));
            }
            return Ok(Containment::Landlock);
        };
        if committed.forge.branch != self.branch() {
            return uncommitted(format!(
                "the working tree's atelier.toml names `{}` as the protected branch, but that branch's own atelier.toml names `{}`",
                self.branch(),
                committed.forge.branch
            ));
        }
        if working.swarm.containment == Containment::None
            && committed.swarm.containment != Containment::None
        {
            return uncommitted(format!(
                "the working tree's atelier.toml says `[swarm] containment = \"none\"`, branch `{}` does not (expected: landlock, as merged; found: none)",
                self.branch()
            ));
        }
        if let Some(field) = changed_grant(&committed, working) {
            return uncommitted(format!(
                "the working tree's atelier.toml changes `{field}` from what branch `{}` has (expected: `{field}` as merged there; found: an uncommitted edit; `git diff {} -- atelier.toml` shows it)",
                self.branch(),
                self.branch()
            ));
        }
        Ok(if working.swarm.containment == Containment::Landlock {
            Containment::Landlock
        } else {
            committed.swarm.containment
        })
    }

    /// Where the gate key is kept (`gatekey::location`), outside the repository.
    pub fn gate_key_path(&self) -> Result<PathBuf> {
        gatekey::location(&self.root, &self.config)
    }

    /// The gate's signing key: from its place outside the repository, or, until `gatekey::migrate`
    /// has moved it (every command does, first), from where older versions kept it.
    pub fn gate_key(&self) -> Result<SigningKey> {
        let path = self.gate_key_path();
        // Not moved yet (the key's new home unknown, or not written): the old place, only if
        // what is there is this repository's key.
        if path.as_ref().map_or(true, |p| !p.exists()) {
            if let Ok(Some(bytes)) = gatekey::legacy_key(&self.repo, &self.root, &self.config) {
                return Ok(read_signing_key_bytes(&bytes)?);
            }
        }
        let path = path?;
        read_signing_key(&path).with_context(|| {
            format!(
                "the gate key {} is needed to sign ledger checkpoints, and this account has none: whoever adopted the repository keeps it, and this command (merging, recording) must run as them, in their clone. If that is you: `atelier init` kept the key outside the repository, in a directory named after the clone's path; if you moved the clone, move the directory whose `repository` file names the old path; only if the key is lost for good, `atelier gate-key recover`",
                path.display()
            )
        })
    }

    /// Resolves a proposal id (`1`) to this clone's record of it.
    pub fn pull(&self, id: &str) -> Result<PullRequest> {
        Ok(self.records.get(parse_id(id)?)?)
    }

    /// The pull request an address names, on this workspace's forge.
    pub fn pull_for(&self, view: &LedgerView, addr: &Addr) -> Result<u64> {
        Ok(self.forge.pull_for(view, addr)?)
    }

    /// The ledger, read once for a command.
    pub fn view(&self) -> Result<LedgerView> {
        Ok(LedgerView::read(&self.repo)?)
    }

    /// Refuses (`E_GATE_KEY_NOT_IN_FORCE`) when this machine's gate key may not sign the
    /// ledger now: checked by [`Workspace::record`], and before anything is posted that only a
    /// ledger append completes (an approval on the local forge).
    pub fn key_in_force(&self, key: &ed25519_dalek::SigningKey) -> Result<()> {
        // Only the key in force signs: after a recorded rotation, the new key (the old one
        // signed the rotation itself, in the append that merged it); before any, a key the
        // branch published (as older versions rotated). A recovery in progress (`atelier
        // gate-key recover`) signs with the key it made until its merge records it.
        let own = key.verifying_key();
        let recovering = gatekey::recovering(&self.gate_key_path()?) == Some(own);
        if !recovering {
            match ledger::latest_rotation(&self.repo)? {
                Some(rotated) if parse_public_key(&rotated.key) != Some(own) => {
                    return Err(refuse(
                        Code::GateKeyNotInForce,
                        format!(
                            "the ledger rotated the gate key at entry {} (proposal {}, merge {}): expected checkpoints signed by {}, but this machine's gate key is {}: install the new private key at {} (GOVERNANCE.md, \"Rotate the gate key\")",
                            rotated.seq,
                            rotated.proposal,
                            rotated.commit,
                            key_fingerprint(&rotated.key),
                            crate::keys::fingerprint(&own),
                            self.gate_key_path()?.display()
                        ),
                    ));
                }
                Some(_) => {}
                None => {
                    let published = branch_gate_keys(&self.repo, self.branch(), None)?;
                    if !published.is_empty() && !published.contains(&own) {
                        return Err(refuse(
                            Code::GateKeyNotInForce,
                            format!(
                                "this machine's gate key {} at {} is not one branch `{}` has published in {} (expected: {}): restore the gate key; if it is lost, `atelier gate-key recover` (GOVERNANCE.md, \"A lost gate key\")",
                                crate::keys::fingerprint(&own),
                                self.gate_key_path()?.display(),
                                self.branch(),
                                crate::governance::policy::GATE_KEY_PATH,
                                crate::keys::fingerprint(&published[0])
                            ),
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// [`Workspace::key_in_force`] for this machine's gate key.
    pub fn check_gate_key(&self) -> Result<()> {
        self.key_in_force(&self.gate_key()?)
    }

    /// Appends events to the ledger, starting it with the adoption point if it is new.
    pub fn record(&self, events: Vec<Event>, now: Timestamp) -> Result<ledger::Snapshot> {
        let key = self.gate_key()?;
        let mut all = Vec::new();
        if ledger::tip(&self.repo)?.is_none() {
            let adoption = adoption_commit(&self.repo, self.branch())?.ok_or_else(|| {
                crate::workflow::Error::Input(format!(
                    "branch `{}` has no commit carrying both {} and {} (the gate's public key): commit the files `atelier init` wrote, then retry",
                    self.branch(),
                    crate::governance::policy::GOVERNANCE_PATH,
                    crate::governance::policy::GATE_KEY_PATH
                ))
            })?;
            all.push(Event::Adopted {
                branch: self.branch().to_string(),
                commit: adoption.to_string(),
            });
        }
        all.extend(events);
        self.key_in_force(&key)?;
        let floors = self.floors()?;
        let adoption = self.witness_adoption()?;
        let memory = match &adoption {
            Some(a) => witness::load(a, &self.origin())?,
            None => None,
        };
        // The keys the last checkpoint may be signed with: this gate's own, and the one this
        // machine's memory pins (the previous gate key, just after a rotation). Never a key the
        // repository names: a branch or ledger swapped in for a moment could name any.
        let mut trusted = vec![key.verifying_key()];
        if let Some(pinned) = memory
            .as_ref()
            .and_then(|m| ed25519_dalek::VerifyingKey::from_bytes(&m.key).ok())
        {
            if !trusted.contains(&pinned) {
                trusted.push(pinned);
            }
        }
        let note = ledger::checkpoint_note(&self.repo)?;
        // This machine's memory may be raised by this append only if what it extends was signed
        // by the key the memory pins (or, before there is a memory, the key the adoption commit
        // published), and this append is too: a gate key or ledger swapped in for a moment must
        // not plant a false memory.
        let adoption_key = adoption
            .as_deref()
            .and_then(|a| published_gate_key(&self.repo, a).ok().flatten())
            .map(|k| k.to_bytes());
        let own = key.verifying_key().to_bytes();
        let pin = memory.as_ref().map(|m| m.key).or(adoption_key);
        let extends_pinned = match (note, pin) {
            (None, _) => true,
            (Some(note), Some(pin)) => ed25519_dalek::VerifyingKey::from_bytes(&pin)
                .ok()
                .is_some_and(|k| {
                    crate::audit::checkpoint::Checkpoint::verify(&note, ledger::KEY_NAME, &[k])
                        .is_ok()
                }),
            (Some(_), None) => false,
        };
        let snap = ledger::append_above(
            &self.repo,
            &self.config.forge.repository,
            all,
            now,
            &key,
            &trusted,
            &floors,
        )?;
        if let Some(adoption) = &adoption {
            witness::remember_identity(&self.root, &self.origin(), adoption)?;
            if extends_pinned && witness::may_raise(memory.as_ref(), &own, adoption_key.as_ref()) {
                let root = crate::audit::merkle::root(&snap.leaf_hashes());
                witness::remember(
                    adoption,
                    &self.origin(),
                    snap.lines.len() as u64,
                    &root,
                    &own,
                    &format!("appended by the gate in {}", self.root.display()),
                )?;
            }
        }
        Ok(snap)
    }

    /// The adoption commit that keys this machine's memory of the ledger: the one the ledger's
    /// first entry names, or (without a ledger) the protected branch's.
    pub fn witness_adoption(&self) -> Result<Option<String>> {
        if let Some(a) = ledger::adopted_commit(&self.repo)? {
            return Ok(Some(a));
        }
        Ok(adoption_commit(&self.repo, self.branch())
            .ok()
            .flatten()
            .map(|o| o.to_string()))
    }

    /// The ledger's origin line (`atelier/<repository>/ledger`).
    pub fn origin(&self) -> String {
        ledger::origin(&self.config.forge.repository)
    }

    /// The checkpoints this repository's ledger must extend: the largest this clone verified,
    /// and the one the protected branch's latest gate merge carries.
    pub fn floors(&self) -> Result<Vec<ledger::Floor>> {
        let adoption = self.witness_adoption()?;
        if let Some(a) = &adoption {
            witness::check_identity(&self.root, &self.origin(), a)?;
        }
        let mut floors: Vec<ledger::Floor> = match &adoption {
            Some(a) => witness::load(a, &self.origin())?
                .map(|m| m.floor)
                .into_iter()
                .collect(),
            None => Vec::new(),
        };
        let keys: Vec<_> = gate_public_key(self)?.into_iter().collect();
        floors.extend(branch_floor(
            &self.repo,
            self.branch(),
            &self.origin(),
            &keys,
            adoption.as_deref(),
        )?);
        Ok(floors)
    }

    /// Refuses (`E_LEDGER_ROLLBACK`) a ledger that does not extend every floor, before a
    /// command changes anything.
    pub fn check_floors(&self) -> Result<()> {
        let Some(snap) = ledger::read(&self.repo)? else {
            return Ok(());
        };
        let leaves = snap.leaf_hashes();
        for floor in self.floors()? {
            ledger::check_floor(&leaves, &floor)?;
        }
        Ok(())
    }

    /// The current ledger, after checking it extends every floor (`E_LEDGER_ROLLBACK`) and that
    /// its checkpoint is signed by the gate key (this machine's own, where it holds it; else the
    /// one the protected branch publishes) and covers its entries. `None` when there is no
    /// ledger yet, or when its checkpoint is signed by an older gate key than this machine's
    /// (just after a rotation). Writes nothing.
    pub fn verified_ledger(&self) -> Result<Option<ledger::Snapshot>> {
        let Some(snap) = ledger::read(&self.repo)? else {
            return Ok(None);
        };
        let leaves = snap.leaf_hashes();
        for floor in self.floors()? {
            ledger::check_floor(&leaves, &floor)?;
        }
        let key = gate_public_key(self)?;
        let cp = key.and_then(|k| {
            crate::audit::checkpoint::Checkpoint::verify(&snap.checkpoint, ledger::KEY_NAME, &[k])
                .ok()
        });
        let root = crate::audit::merkle::root(&leaves);
        if cp.is_none() && self.gate_key().is_ok() {
            // Just after a rotation the last checkpoint is still signed by an older gate key
            // the branch published: valid, but not this machine's own to vouch for, so the
            // token carries no checkpoint rather than one this machine cannot check.
            let adoption = self.witness_adoption()?;
            let older = branch_gate_keys(&self.repo, self.branch(), adoption.as_deref())?;
            if crate::audit::checkpoint::Checkpoint::verify(
                &snap.checkpoint,
                ledger::KEY_NAME,
                &older,
            )
            .is_ok_and(|cp| cp.size == leaves.len() as u64 && cp.root == root)
            {
                return Ok(None);
            }
        }
        if cp.is_none_or(|cp| cp.size != leaves.len() as u64 || cp.root != root) {
            return Err(ledger::LedgerError::Corrupt(format!(
                "the ledger's checkpoint does not verify under {} on {} or does not cover its {} entries",
                crate::governance::policy::GATE_KEY_PATH,
                self.branch(),
                leaves.len()
            ))
            .into());
        }
        Ok(Some(snap))
    }
}

pub use crate::audit::ledger::{Anchor, LEDGER_TRAILER};

/// How far back the live gate looks for the latest merge commit carrying a ledger checkpoint
/// (audit checks every one).
const ANCHOR_WALK: usize = 64;

/// The checkpoint carried by the latest gate merge on `branch` (its first-parent line, after
/// `adoption`) whose signature verifies under `keys`; unsigned lines vouch for nothing.
pub fn branch_floor(
    repo: &Repository,
    branch: &str,
    origin: &str,
    keys: &[ed25519_dalek::VerifyingKey],
    adoption: Option<&str>,
) -> Result<Option<ledger::Floor>> {
    let Ok(tip) = git::branch_tip(repo, branch) else {
        return Ok(None);
    };
    let mut walk = repo.revwalk()?;
    walk.push(tip)?;
    walk.simplify_first_parent()?;
    for oid in walk.take(ANCHOR_WALK) {
        let oid = oid?;
        if adoption == Some(oid.to_string().as_str()) {
            break;
        }
        let commit = repo.find_commit(oid)?;
        if let Some(anchor) = Anchor::of_commit(&commit, origin, keys) {
            return Ok(Some(ledger::Floor {
                size: anchor.size,
                root: anchor.root,
                source: format!("merge commit {oid} on {branch}"),
            }));
        }
    }
    Ok(None)
}

/// The `gate-key-rotated` event a merge of `base` into `landed` calls for: when the merged tree
/// publishes another gate key than the base did.
pub fn rotation(
    repo: &Repository,
    proposal: &str,
    base: &str,
    landed: &str,
    recovering: Option<ed25519_dalek::VerifyingKey>,
) -> Result<Option<Event>> {
    let (old, new) = (
        published_gate_key(repo, base)?,
        published_gate_key(repo, landed)?,
    );
    if old == new || new.is_none() {
        return Ok(None);
    }
    let tree = repo.find_commit(Oid::from_str(landed)?)?.tree()?;
    let text = git::read_file(repo, &tree, crate::governance::policy::GATE_KEY_PATH)?
        .map(|b| String::from_utf8_lossy(&b).trim().to_string())
        .unwrap_or_default();
    Ok(Some(Event::GateKeyRotated {
        proposal: proposal.to_string(),
        commit: landed.to_string(),
        key: text,
        recovered: recovering.is_some() && recovering == new,
    }))
}

/// The gate's public key: this machine's own, where it holds the private key; else the one the
/// protected branch publishes.
pub fn gate_public_key(ws: &Workspace) -> Result<Option<ed25519_dalek::VerifyingKey>> {
    if let Ok(k) = ws.gate_key() {
        return Ok(Some(k.verifying_key()));
    }
    let Ok(tip) = git::branch_tip(&ws.repo, ws.branch()) else {
        return Ok(None);
    };
    Ok(published_gate_key(&ws.repo, &tip.to_string())?)
}

/// The working tree must be the directory that holds `.git` (found walking up from `dir`): a
/// `core.worktree` in `.git/config`, which anyone who can write the clone can set, would
/// otherwise move atelier's view of the clone (its `atelier.toml`, `.atelier/`, and the path
/// this machine remembers the clone by) somewhere else.
fn check_working_tree(dir: &Path, root: &Path) -> Result<()> {
    let canonical = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let mut at = canonical(dir);
    let top = loop {
        if at.join(".git").symlink_metadata().is_ok() {
            break Some(at);
        }
        if !at.pop() {
            break None;
        }
    };
    match top {
        Some(top) if top == canonical(root) => Ok(()),
        Some(top) => Err(refuse(
            Code::WorktreeMoved,
            format!(
                "git's working tree for {} is {}, not {}, the directory that holds .git (moved by core.worktree in the repository's config, or by where a .git file points): atelier works only in the clone's own directory — restore .git and remove core.worktree",
                dir.display(),
                root.display(),
                top.display()
            ),
        )),
        // No `.git` on the way up (GIT_DIR set by the caller): git found it, trust that.
        None => Ok(()),
    }
}

/// The first setting that decides what contained programs run or reach (by its atelier.toml
/// field) that `working` changes from `committed`, if any: any field of a role (its command,
/// environment, backend and preset defaults, endpoint, grants), the gauntlet (steps and
/// grants), `[swarm] containment` and `shared_target_dir`, and `[gate] key` (which decides what
/// no grant may reach).
fn changed_grant(committed: &Config, working: &Config) -> Option<String> {
    if committed.swarm.shared_target_dir != working.swarm.shared_target_dir {
        return Some("swarm.shared_target_dir".into());
    }
    if committed.gate.key != working.gate.key {
        return Some("gate.key".into());
    }
    if committed.gauntlet != working.gauntlet {
        return Some("gauntlet".into());
    }
    let names: std::collections::BTreeSet<&String> =
        committed.roles.keys().chain(working.roles.keys()).collect();
    names
        .into_iter()
        .find(|name| committed.roles.get(*name) != working.roles.get(*name))
        .map(|name| format!("roles.{name}"))
}

/// The first commit on `branch`'s first-parent line that carries the governance policy and the
/// gate's public key (`init` writes them together; a repository that keeps its policy before
/// anyone can run its gate, as Atelier's own does, is adopted when the key is committed).
pub fn adoption_commit(repo: &Repository, branch: &str) -> Result<Option<Oid>> {
    let tip = git::branch_tip(repo, branch)?;
    let mut walk = repo.revwalk()?;
    walk.push(tip)?;
    walk.simplify_first_parent()?;
    walk.set_sorting(git2::Sort::TOPOLOGICAL | git2::Sort::REVERSE)?;
    for oid in walk {
        let oid = oid?;
        let tree = repo.find_commit(oid)?.tree()?;
        if crate::governance::policy::adopts::<crate::git::GitError>(&|p| {
            Ok(git::read_file(repo, &tree, p)?.is_some())
        })? {
            return Ok(Some(oid));
        }
    }
    Ok(None)
}

/// Everything the gate was given and what it decided.
pub struct Evaluation {
    pub pull: PullRequest,
    pub change: Change,
    pub decision: Decision,
    pub tokens: Vec<RawToken>,
    pub merge_tree: Option<Oid>,
}

/// Runs the gate on this clone's record of a proposal, as its branches are here. Records
/// nothing.
pub fn evaluate(
    ws: &Workspace,
    view: &LedgerView,
    pull: PullRequest,
    now: Timestamp,
) -> Result<Evaluation> {
    let (pull, base, head) = ws.checked_record(view, pull)?;
    evaluate_at(ws, view, pull, base, head, now)
}

/// Runs the gate on `pull` as the merge of `head` into `base`, whichever forge they came from.
/// Records nothing.
pub fn evaluate_at(
    ws: &Workspace,
    view: &LedgerView,
    pull: PullRequest,
    base: Oid,
    head: Oid,
    now: Timestamp,
) -> Result<Evaluation> {
    let repo = &ws.repo;
    let base_tree = repo.find_commit(base)?.tree()?;
    let mut merge = git::merge_tree(repo, base, head)?;
    // A head with several merge bases lands a change no diff from one of them shows (what
    // GitHub's pull request shows people): it does not merge unambiguously.
    let bases = git::merge_bases(repo, base, head)?;
    if merge.is_ok() && bases > 1 {
        merge = Err(format!(
            "the head has {bases} merge bases with the base (a criss-cross): the change a diff from one of them shows is not the one merging lands; merge the base into the head (or rebase it) so that they have one"
        ));
    }
    let (entries, new_policy) = match &merge {
        Ok(t) => {
            let tree = repo.find_tree(*t)?;
            (
                git::changed_entries(repo, &base_tree, &tree)?,
                Policy::load(&git::policy_files(repo, &tree)?),
            )
        }
        Err(_) => (
            Vec::new(),
            Err(PolicyError::Missing {
                path: crate::governance::policy::GOVERNANCE_PATH,
            }),
        ),
    };
    // Commits pushed straight to the branch that changed the policy do not change who judges:
    // the change is judged by the policy of the last commit the gate vouches for, and counts
    // the policy files they changed as its own (a constitutional change).
    let (vouched_files, bypassed) = git::judging_policy(repo, base, &|sha| view.ledgered(sha))?;
    let vouched = Policy::load(&vouched_files);
    let base_policy = Policy::load(&git::policy_files(repo, &base_tree)?);
    let digest = policy_digest(&git::digest_files(repo, &base_tree)?);
    let tokens = tokens_for(view, &pull);
    let finished = view.finished(&pull.proposal);
    let ledger_roots = view.roots_for(&tokens);
    // The panel at base, on what would merge (with a conflict, on what head changes since the
    // merge base).
    let files = match &merge {
        Ok(_) => crate::panel::files_of(repo, &entries)?,
        Err(_) => crate::panel::change_files(repo, base, head, None)?,
    };
    let changed: Vec<String> = entries.into_iter().map(|e| e.path).collect();
    let panel = crate::panel::weigh(
        &crate::panel::at(repo, &base_tree)?,
        &crate::panel::surface(repo, &base_tree, &files)?,
        &files,
        &view.provenance(&pull.proposal),
        view.recorded_review(&pull.proposal),
    );
    let change = Change {
        repository: ws.config.forge.repository.clone(),
        proposal: pull.proposal.clone(),
        pull: pull.number,
        open: pull.state == PullState::Open && !finished,
        base: base.to_string(),
        head: head.to_string(),
        merge_tree: merge.as_ref().map(|t| t.to_string()).map_err(|e| e.clone()),
        changed_paths: changed,
        policy_digest: digest,
        proposer: pull.proposer.clone(),
    };
    let evidence = match view.registered(&pull.proposal) {
        None => decision::Evidence::NotACycle,
        Some(_) => decision::Evidence::Registered {
            recorded: match view.evidence(&pull.proposal) {
                Some(Event::EvidenceRecorded { head, base, .. }) => {
                    Some((head.clone(), base.clone()))
                }
                _ => None,
            },
        },
    };
    let decision = decision::decide_vouched(
        &GateInput {
            change: &change,
            base_policy: &base_policy,
            new_policy: &new_policy,
            tokens: &tokens,
            ledger_roots: &ledger_roots,
            panel: &panel,
            evidence: &evidence,
            now,
        },
        &vouched,
        &bypassed,
    );
    Ok(Evaluation {
        pull,
        change,
        decision,
        tokens,
        merge_tree: merge.ok(),
    })
}

/// Every token for a pull request: its comments', then every one the ledger recorded for its
/// proposal (on this or any other pull request that carried it) that the comments no longer
/// carry: an edited or deleted comment cannot withdraw a recorded veto.
pub fn tokens_for(view: &LedgerView, pull: &PullRequest) -> Vec<RawToken> {
    let mut tokens: Vec<RawToken> = pull
        .comments
        .iter()
        .flat_map(|c| RawToken::extract_all(&c.body))
        .collect();
    for t in view.recorded_tokens(&pull.proposal) {
        if !tokens.contains(&t) {
            tokens.push(t);
        }
    }
    tokens
}

/// One line of `atelier proposals`.
#[derive(Debug, serde::Serialize)]
pub struct Summary {
    pub id: String,
    pub title: String,
    pub state: &'static str,
    pub head: Option<String>,
    pub approvals: usize,
    pub required: Option<u32>,
    pub may_merge: bool,
    /// Who approved a merged proposal: the approvers its merge commit names.
    pub approved_by: Vec<String>,
    /// Who vetoes an open proposal: eligible principals whose rejection the gate counts.
    pub vetoed_by: Vec<String>,
}

/// The approvers a merge commit names (its `Atelier-Approvers` trailer); none when the commit
/// is not in this clone or names none.
pub fn merge_approvers(repo: &git2::Repository, commit: &str) -> Vec<String> {
    let Some(c) = git2::Oid::from_str(commit)
        .ok()
        .and_then(|o| repo.find_commit(o).ok())
    else {
        return Vec::new();
    };
    c.message()
        .unwrap_or("")
        .lines()
        .find_map(|l| l.strip_prefix("Atelier-Approvers: "))
        .map(|a| {
            a.split(", ")
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// Lists proposals with their approvals against what the gate requires now.
pub fn list(ws: &Workspace, now: Timestamp) -> Result<Vec<Summary>> {
    let view = ws.view()?;
    let mut out = Vec::new();
    for pull in ws.records.list()? {
        let state = pull.state.as_str();
        let id = pull.proposal.clone();
        let title = pull.title.clone();
        let head = git::branch_tip(&ws.repo, &pull.head_branch)
            .ok()
            .map(|h| h.to_string());
        let merged = pull.state == PullState::Merged;
        let approved_by = match (&pull.state, &pull.merge_commit) {
            (PullState::Merged, Some(c)) => merge_approvers(&ws.repo, c),
            _ => Vec::new(),
        };
        let (approvals, required, may_merge, vetoed_by) =
            if pull.state == PullState::Open && head.is_some() {
                let eval = evaluate(ws, &view, pull, now)?;
                let required = eval.decision.required_approvals();
                (
                    eval.decision.approvers.len(),
                    required,
                    eval.decision.allowed,
                    eval.decision.vetoes.clone(),
                )
            } else {
                (0, None, false, Vec::new())
            };
        let approvals = if merged { approved_by.len() } else { approvals };
        out.push(Summary {
            id,
            title,
            state,
            head,
            approvals,
            required,
            may_merge,
            approved_by,
            vetoed_by,
        });
    }
    Ok(out)
}
