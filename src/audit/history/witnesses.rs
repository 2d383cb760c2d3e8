//! The ledger's witnesses other than itself: this machine's memory of the largest ledger it
//! verified, and the checkpoints listed signers' recorded tokens saw.

use git2::Repository;

use super::index::LedgerIndex;
use super::{finding, Result, VerifyReport};
use crate::audit::ledger::{self};
use crate::audit::merkle::{self, Hash};
use crate::audit::witness;
use crate::git;
use crate::governance::policy::Policy;
use crate::governance::Code;

/// The witnesses other than the ledger: this clone's memory of the largest ledger it verified,
/// and the checkpoints that listed signers' recorded tokens saw. A ledger that does not extend
/// one of them was rewound (`E_LEDGER_ROLLBACK`).
pub(super) fn witnesses(
    repo: &Repository,
    repository: &str,
    branch: &str,
    index: &mut LedgerIndex,
    report: &mut VerifyReport,
) -> Result<()> {
    let adoption = index
        .adopted
        .clone()
        .or_else(|| report.adoption.clone())
        .unwrap_or_default();
    let root = repo.workdir().unwrap_or(repo.path()).to_path_buf();
    if let Err(e) = witness::check_identity(&root, &ledger::origin(repository), &adoption) {
        report
            .findings
            .push(finding(Code::AdoptionMismatch, None, e.to_string()));
    }
    match witness::load(&adoption, &ledger::origin(repository)) {
        // Without any ledger, `E_LEDGER_MISSING` already says to fetch it.
        Ok(Some(_)) if index.roots.is_empty() => {}
        Ok(Some(memory)) => {
            let floor = memory.floor;
            if let Some(why) = not_a_prefix(&index.roots, floor.size, &floor.root) {
                report.findings.push(finding(
                    Code::LedgerRollback,
                    None,
                    format!(
                        "{} names a ledger of {} entries with root {} that this machine verified, but {why}: the ledger was rewound or replaced since (or this clone has not fetched the newest ledger: `git fetch origin {r}:{r}`)",
                        floor.source,
                        floor.size,
                        hex::encode(floor.root),
                        r = ledger::REF
                    ),
                ));
            }
        }
        Ok(None) => {}
        Err(e) => report
            .findings
            .push(finding(Code::LedgerRollback, None, e.to_string())),
    }
    let claims = std::mem::take(&mut index.claims);
    if claims.is_empty() {
        return Ok(());
    }
    let tree = repo.find_commit(git::branch_tip(repo, branch)?)?.tree()?;
    let Ok(policy) = Policy::load(&git::policy_files(repo, &tree)?) else {
        return Ok(());
    };
    for (seq, at, proposal, raw) in claims {
        let Ok(v) = crate::governance::token::verify(&raw) else {
            continue;
        };
        // Only a token bound to this repository and the proposal it was recorded for is a
        // witness of this ledger (a listed signer's tokens from other repositories are public).
        if v.payload.repository != repository || v.payload.proposal != proposal {
            continue;
        }
        // Only someone who could approve when the token was recorded is a witness.
        let Some(principal) = policy
            .signers
            .find(&v.key)
            .into_iter()
            .find(|e| {
                e.allows_namespace(crate::governance::token::NAMESPACE)
                    && e.validity_at(at).is_none()
                    && policy.is_revoked(&v.fingerprint).is_none()
                    && !policy
                        .bots
                        .iter()
                        .any(|b| b.eq_ignore_ascii_case(&e.principal))
            })
            .map(|e| e.principal.clone())
        else {
            continue;
        };
        let Some(cp) = v.payload.checkpoint.as_ref() else {
            continue;
        };
        let Some(root) = hex::decode(&cp.root)
            .ok()
            .and_then(|b| <Hash>::try_from(b.as_slice()).ok())
        else {
            continue;
        };
        // The token was recorded at `seq`, after its signer saw `cp.size` entries.
        let why = if cp.size > seq {
            Some(format!(
                "it was recorded at position {seq}, before that many entries existed"
            ))
        } else {
            not_a_prefix(&index.roots, cp.size, &root)
        };
        if let Some(why) = why {
            report.findings.push(finding(
                Code::LedgerRollback,
                None,
                format!(
                    "the token {principal} signed for proposal {} saw a ledger of {} entries with root {}, but {why}: the ledger was rewound or replaced",
                    v.payload.proposal, cp.size, cp.root
                ),
            ));
        }
    }
    Ok(())
}

/// Why the ledger (its roots by size) is not an extension of a checkpoint of `size` with `root`.
pub(super) fn not_a_prefix(roots: &[Hash], size: u64, root: &Hash) -> Option<String> {
    let ours = if size == 0 {
        merkle::empty_root()
    } else {
        match roots.get(size as usize - 1) {
            Some(r) => *r,
            None => return Some(format!("the ledger holds only {} entries", roots.len())),
        }
    };
    (ours != *root).then(|| {
        format!(
            "the ledger's first {size} entries hash to {}",
            hex::encode(ours)
        )
    })
}
