//! Taking in what others recorded, before anything is judged: the forge fetches its ledger
//! (`Forge::fetch_ledger`), and this module decides whether this clone may take it in — only a
//! ledger whose checkpoint the protected branch's gate key signed, that extends this clone's
//! and every witness, and never into the gate machine's own (it is the ledger's only writer).

use git2::Oid;

use super::{refuse, Result, Workspace};
use crate::audit::ledger;
use crate::forge::RemoteLedger;
use crate::git;
use crate::governance::Code;

/// Brings this clone's ledger up to the forge's when the forge's extends it; keeps this one
/// when it is ahead (not pushed yet); refuses when they diverged. Not `strict`: a forge ledger
/// that cannot be read is a note (returned), not an error; a refusal (a diverged or rewound
/// ledger) always is one.
pub fn sync(ws: &Workspace, strict: bool) -> Result<Vec<String>> {
    let unreadable = |e: super::Error| -> Result<Vec<String>> {
        if strict {
            Err(e)
        } else {
            Ok(vec![format!(
                "the remote ledger could not be read: {}",
                crate::errors::chain(&e)
            )])
        }
    };
    let theirs = match ws.forge.fetch_ledger(&ws.site()) {
        Ok(RemoteLedger::Local) => return Ok(Vec::new()),
        Ok(RemoteLedger::Absent) => {
            ws.check_floors()?;
            return Ok(Vec::new());
        }
        Ok(RemoteLedger::Fetched(tip)) => tip,
        Err(e) => return unreadable(e.into()),
    };
    match take_in(ws, theirs)? {
        Ok(()) => {}
        Err(e) => return unreadable(e),
    }
    // Whatever was (or was not) taken in, the ledger this clone now holds must extend what it
    // and the branch saw before.
    ws.check_floors()?;
    Ok(Vec::new())
}

/// Takes the forge's ledger at `theirs` in where it may be. `Ok(Err(e))`: this clone's own
/// ledger could not be read (nothing was taken in); `Err(e)`: a refusal.
fn take_in(ws: &Workspace, theirs: Oid) -> Result<Result<()>> {
    let ours = ws.repo.refname_to_id(ledger::REF).ok();
    let gate_machine = ws.gate_key().is_ok();
    let diverged = |o: Oid, why: &str| {
        refuse(
            Code::LedgerDiverged,
            format!(
                "the local ledger ({o}) and remote `{}`'s ({theirs}) disagree: {why}; nothing was recorded — compare them with `git log {o} {theirs}` and `atelier audit verify`",
                ws.config.forge.remote
            ),
        )
    };
    match ours {
        Some(o) if o == theirs || ws.repo.graph_descendant_of(o, theirs)? => {}
        // The gate machine is the ledger's only writer: entries it did not write are never
        // taken in, whatever they say (a fast-forward can still rewrite history: a new commit
        // may carry any tree).
        Some(o) if gate_machine => {
            return Err(diverged(
                o,
                "the remote has ledger commits this gate machine did not write",
            ))
        }
        Some(o) if ws.repo.graph_descendant_of(theirs, o)? => {
            let mine = match ledger::read_at(&ws.repo, o) {
                Ok(m) => m,
                Err(e) => return Ok(Err(e.into())),
            };
            let remote = checked_remote_ledger(ws, theirs)?;
            if remote.lines.get(..mine.lines.len()) != Some(&mine.lines[..]) {
                return Err(diverged(o, "the remote's entries do not extend this one's"));
            }
            git::compare_and_swap(
                &ws.repo,
                ledger::REF,
                o,
                theirs,
                "atelier: ledger from remote",
            )?;
        }
        Some(o) => return Err(diverged(o, "neither extends the other")),
        None => {
            checked_remote_ledger(ws, theirs)?;
            ws.repo
                .reference(ledger::REF, theirs, false, "atelier: ledger from remote")?;
        }
    }
    Ok(Ok(()))
}

/// The protected branch's tip as last fetched from the forge, or this clone's where the forge
/// keeps none apart.
pub(super) fn fetched_base(ws: &Workspace) -> Result<Oid> {
    match ws.forge.fetched_base(&ws.site()) {
        Some(b) => Ok(b),
        None => Ok(git::branch_tip(&ws.repo, ws.branch())?),
    }
}

/// The forge's ledger at `tip`, refused unless its checkpoint is signed by the gate key the
/// protected branch publishes (`policies/gate_key.pub`) and covers exactly its entries.
fn checked_remote_ledger(ws: &Workspace, tip: Oid) -> Result<ledger::Snapshot> {
    let snap = ledger::read_at(&ws.repo, tip)?;
    let bad = |why: String| {
        refuse(
            Code::LedgerUnverified,
            format!(
                "remote `{}`'s ledger ({tip}) was not taken in: {why}; run `atelier audit verify` on a clone to see what is wrong",
                ws.config.forge.remote
            ),
        )
    };
    let branch = fetched_base(ws)?;
    let key = crate::keys::published_gate_key(&ws.repo, &branch.to_string())?
        .ok_or_else(|| bad(format!("{} has no usable gate key", ws.branch())))?;
    let cp =
        crate::audit::checkpoint::Checkpoint::verify(&snap.checkpoint, ledger::KEY_NAME, &[key])
            .map_err(|e| {
                bad(format!(
                    "its checkpoint does not verify under the gate key: {e}"
                ))
            })?;
    if cp.size != snap.lines.len() as u64
        || cp.root != crate::audit::merkle::root(&snap.leaf_hashes())
    {
        return Err(bad(format!(
            "its {} entries do not match its checkpoint (size {})",
            snap.lines.len(),
            cp.size
        )));
    }
    // Each ledger commit extends its parent's entries: an older snapshot committed on top of a
    // newer one (a rewind dressed as a fast-forward) is refused.
    if let Ok(parent) = ws.repo.find_commit(tip).and_then(|c| c.parent_id(0)) {
        let before = ledger::read_at(&ws.repo, parent)?;
        if snap.lines.get(..before.lines.len()) != Some(&before.lines[..]) {
            return Err(bad(format!(
                "its last commit does not extend the previous one ({parent}): the ledger was rewound"
            )));
        }
    }
    // A ledger that does not extend what this clone (or the branch) already saw is a rollback,
    // whatever its signatures say.
    let leaves = snap.leaf_hashes();
    for floor in ws.floors()? {
        ledger::check_floor(&leaves, &floor)?;
    }
    Ok(snap)
}
