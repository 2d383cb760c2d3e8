//! The ledger's own integrity: its entries read once in order (sequence, time), and every
//! checkpoint in the ledger ref's history verified under the gate key in force for it, with the
//! rotations and recoveries the ledger records.

use std::collections::BTreeMap;

use ed25519_dalek::VerifyingKey;
use git2::{ObjectType, Oid, Repository};

use super::index::{index_entry, LedgerIndex};
use super::{finding, Result, VerifyReport};
use crate::audit::checkpoint::Checkpoint;
use crate::audit::ledger::{self, Entry};
use crate::audit::merkle::{self, RootBuilder};
use crate::governance::policy::GATE_KEY_PATH;
use crate::governance::time::parse_rfc3339;
use crate::governance::Code;

/// Every distinct gate public key committed on the branch from the adoption point on.
pub(super) fn gate_keys(repo: &Repository, commits: &[Oid]) -> Result<Vec<VerifyingKey>> {
    let mut seen = Vec::new();
    let mut keys = Vec::new();
    for c in commits {
        let tree = repo.find_commit(*c)?.tree()?;
        let Ok(entry) = tree.get_path(std::path::Path::new(GATE_KEY_PATH)) else {
            continue;
        };
        if seen.contains(&entry.id()) {
            continue;
        }
        seen.push(entry.id());
        let text = String::from_utf8_lossy(repo.find_blob(entry.id())?.content()).into_owned();
        if let Ok(k) = ssh_key::PublicKey::from_openssh(text.trim()) {
            if let Some(ed) = k.key_data().ed25519() {
                if let Ok(vk) = VerifyingKey::from_bytes(&ed.0) {
                    keys.push(vk);
                }
            }
        }
    }
    Ok(keys)
}

/// Streams the ledger's entries once: checks sequence and checkpoints, builds the index. The
/// steps: the entries ([`read_entries`]), the checkpoints in the ledger ref's history
/// ([`checkpoint_notes`]), each verified under the key in force ([`check_checkpoints`]), and
/// the gate key's history for the report ([`gate_key_history`]).
pub(super) fn check_ledger(
    repo: &Repository,
    repository: &str,
    keys: &[VerifyingKey],
    report: &mut VerifyReport,
) -> Result<Option<LedgerIndex>> {
    let Some(tip) = ledger::tip(repo)? else {
        return Ok(None);
    };
    let mut index = LedgerIndex::default();
    let count = read_entries(repo, tip, &mut index, report)?;
    report.ledger_entries = count;
    let notes = checkpoint_notes(repo, tip, report)?;
    let origin = ledger::origin(repository);
    let recovered_from = check_checkpoints(&notes, &index, keys, &origin, count, report);
    gate_key_history(&index, &recovered_from, report);
    Ok(Some(index))
}

/// Reads the entries at the ledger's tip, chunk by chunk, in order: each hashed into the Merkle
/// roots, checked ([`check_entry`]) and indexed. Returns how many there are.
fn read_entries(
    repo: &Repository,
    tip: Oid,
    index: &mut LedgerIndex,
    report: &mut VerifyReport,
) -> Result<u64> {
    let tree = repo.find_commit(tip)?.tree()?;
    let mut builder = RootBuilder::new();
    let mut count: u64 = 0;
    let Some(e) = tree
        .get_name("entries")
        .filter(|e| e.kind() == Some(ObjectType::Tree))
    else {
        return Ok(count);
    };
    let dir = repo.find_tree(e.id())?;
    let mut chunks: Vec<(String, Oid)> = dir
        .iter()
        .map(|e| (e.name().unwrap_or("").to_string(), e.id()))
        .collect();
    chunks.sort();
    for (name, id) in chunks {
        let Ok(blob) = repo.find_blob(id) else {
            report.findings.push(finding(
                Code::LedgerMalformed,
                None,
                format!("ledger entries/{name} is not a file"),
            ));
            continue;
        };
        let text = String::from_utf8_lossy(blob.content());
        for line in text.lines() {
            builder.push(merkle::leaf_hash(line.as_bytes()));
            index.roots.push(builder.root());
            let position = count;
            count += 1;
            match Entry::parse(line) {
                Err(e) => report.findings.push(finding(
                    Code::LedgerMalformed,
                    None,
                    format!("ledger entries/{name}, entry {position}: not a ledger entry ({e})"),
                )),
                Ok(entry) => {
                    check_entry(index, &entry, position, report);
                    index_entry(index, entry);
                }
            }
        }
    }
    Ok(count)
}

/// One entry in its place: it carries its position as its seq, and a time no earlier than the
/// entry before it.
fn check_entry(index: &mut LedgerIndex, entry: &Entry, position: u64, report: &mut VerifyReport) {
    if entry.seq != position {
        report.findings.push(finding(
            Code::LedgerSequence,
            None,
            format!(
                "entry at position {position} carries seq {}: entries were removed, reordered or inserted",
                entry.seq
            ),
        ));
    }
    let at = parse_rfc3339(&entry.at).ok();
    match (index.last_at, at) {
        (_, None) => report.findings.push(finding(
            Code::LedgerMalformed,
            None,
            format!("entry {position}: `at` is not a time: {}", entry.at),
        )),
        (Some(last), Some(t)) if t < last => report.findings.push(finding(
            Code::LedgerTimeReversed,
            None,
            format!(
                "entry {position} is dated {}, before the entry preceding it: ledger time never goes backwards (was the clock turned back to revive expired approvals?)",
                entry.at
            ),
        )),
        (_, Some(t)) => index.last_at = Some(t),
    }
}

/// The current checkpoint and every earlier one in the ledger ref's history, newest first, with
/// the ledger commit that holds each.
fn checkpoint_notes(
    repo: &Repository,
    tip: Oid,
    report: &mut VerifyReport,
) -> Result<Vec<(Oid, String)>> {
    let mut walk = repo.revwalk()?;
    walk.push(tip)?;
    walk.simplify_first_parent()?;
    let mut notes = Vec::new();
    for oid in walk {
        let oid = oid?;
        let tree = repo.find_commit(oid)?.tree()?;
        let Some(entry) = tree.get_name("checkpoint") else {
            report.findings.push(finding(
                Code::LedgerMalformed,
                None,
                format!("ledger commit {oid} has no checkpoint"),
            ));
            continue;
        };
        let note = String::from_utf8_lossy(repo.find_blob(entry.id())?.content()).into_owned();
        notes.push((oid, note));
    }
    Ok(notes)
}

/// Verifies each checkpoint (newest first) under the key that signs it, then what it covers
/// ([`check_coverage`]). Returns, per recovery (by its seq), the first entry the new key signed.
///
/// Which key signs each checkpoint: appends that begin before the first recorded rotation may
/// be signed by any gate key the branch published (older versions rotated without recording
/// it); from then on the chain decides, append by append: the key of the last rotation recorded
/// before the append's first new entry (the append that records a rotation is signed by the old
/// key). A recovery (the old key lost) is the exception the constitution quorum approved: the
/// appends from the new key's first signature up to the recovery's entry are signed by the new
/// key.
fn check_checkpoints(
    notes: &[(Oid, String)],
    index: &LedgerIndex,
    keys: &[VerifyingKey],
    origin: &str,
    count: u64,
    report: &mut VerifyReport,
) -> BTreeMap<u64, u64> {
    let first_rotation = index.rotations.first().map(|r| r.0);
    let in_force = |first_new: u64| -> Option<VerifyingKey> {
        let mut key = None;
        for (seq, _, line, _) in &index.rotations {
            if *seq < first_new {
                key = crate::keys::parse_public_key(line);
            }
        }
        key
    };
    let recovery_for = |first_new: u64| -> Option<(u64, VerifyingKey)> {
        index
            .rotations
            .iter()
            .find(|(seq, _, _, recovered)| *recovered && *seq >= first_new)
            .and_then(|(seq, _, line, _)| Some((*seq, crate::keys::parse_public_key(line)?)))
    };
    let mut recovered_from: BTreeMap<u64, u64> = Default::default();
    let mut latest = true;
    for (i, (oid, note)) in notes.iter().enumerate() {
        let oid = *oid;
        let first_new = notes
            .get(i + 1)
            .and_then(|(_, older)| Checkpoint::parse_unverified(older).ok())
            .map_or(0, |c| c.size);
        let chained = first_rotation.is_some_and(|r| first_new > r);
        let key = in_force(first_new);
        let chain_keys: Vec<VerifyingKey> = key.into_iter().collect();
        let trusted = if chained { &chain_keys[..] } else { keys };
        let mut verified = Checkpoint::verify(note, ledger::KEY_NAME, trusted);
        if verified.is_err() {
            if let Some((seq, new)) = recovery_for(first_new) {
                if let Ok(cp) = Checkpoint::verify(note, ledger::KEY_NAME, &[new]) {
                    let start = recovered_from.entry(seq).or_insert(first_new);
                    *start = (*start).min(first_new);
                    verified = Ok(cp);
                }
            }
        }
        match verified {
            Err(e) => report.findings.push(finding(
                Code::LedgerSignature,
                None,
                if chained {
                    format!(
                        "checkpoint in ledger commit {oid} (appending from entry {first_new}) is not signed by the gate key in force there ({}), following the rotations the ledger records: {e}",
                        key.map_or("none".into(), |k| crate::keys::fingerprint(&k))
                    )
                } else {
                    format!("checkpoint in ledger commit {oid} does not verify under the gate key in {GATE_KEY_PATH}: {e}")
                },
            )),
            Ok(cp) => {
                report.checkpoints_verified += 1;
                report.signatures_verified += 1;
                check_coverage(&cp, oid, latest, index, origin, count, report);
            }
        }
        latest = false;
    }
    recovered_from
}

/// A verified checkpoint names this ledger's origin; the latest covers every entry; and each
/// covers entries that still hash to its root.
fn check_coverage(
    cp: &Checkpoint,
    oid: Oid,
    latest: bool,
    index: &LedgerIndex,
    origin: &str,
    count: u64,
    report: &mut VerifyReport,
) {
    if cp.origin != origin {
        report.findings.push(finding(
            Code::LedgerOrigin,
            None,
            format!(
                "checkpoint in ledger commit {oid}: origin expected `{origin}`, found `{}`",
                cp.origin
            ),
        ));
    }
    if latest && cp.size != count {
        report.findings.push(finding(
            Code::LedgerSizeMismatch,
            None,
            format!(
                "the latest checkpoint covers {} entries but the ledger holds {count}: entries were {}",
                cp.size,
                if count < cp.size { "removed (truncation)" } else { "added without a checkpoint" }
            ),
        ));
    }
    let ours = if cp.size == 0 {
        Some(merkle::empty_root())
    } else {
        index.roots.get(cp.size as usize - 1).copied()
    };
    match ours {
        None => {
            if !latest {
                report.findings.push(finding(
                    Code::LedgerTruncated,
                    None,
                    format!(
                        "an earlier checkpoint (ledger commit {oid}) covers {} entries; only {count} remain",
                        cp.size
                    ),
                ));
            }
        }
        Some(root) if root != cp.root => report.findings.push(finding(
            if latest {
                Code::LedgerRootMismatch
            } else {
                Code::LedgerInconsistent
            },
            None,
            format!(
                "checkpoint of size {} (ledger commit {oid}) has root {}, but the entries hash to {}: an entry was edited, reordered or inserted",
                cp.size,
                hex::encode(cp.root),
                hex::encode(root)
            ),
        )),
        Some(_) => {}
    }
}

/// Each gate key rotation and recovery the ledger records, for the report.
fn gate_key_history(
    index: &LedgerIndex,
    recovered_from: &BTreeMap<u64, u64>,
    report: &mut VerifyReport,
) {
    for (seq, commit, line, recovered) in &index.rotations {
        let fp = crate::keys::key_fingerprint(line);
        let merge = commit.get(..12).unwrap_or(commit);
        report.gate_keys.push(if *recovered {
            match recovered_from.get(seq) {
                Some(from) if from < seq => format!(
                    "entry {seq}: gate key RECOVERED (the old key was lost) to {fp} by merge {merge}, approved by the constitution quorum; entries {from}..{seq} were signed by the new key before the recovery merged"
                ),
                _ => format!(
                    "entry {seq}: gate key RECOVERED (the old key was lost) to {fp} by merge {merge}, approved by the constitution quorum"
                ),
            }
        } else {
            format!("entry {seq}: gate key rotated to {fp} by merge {merge}")
        });
    }
}

/// Which of `keys` signed the ledger's current checkpoint.
pub(super) fn latest_signer(
    repo: &Repository,
    repository: &str,
    keys: &[VerifyingKey],
) -> Result<Option<[u8; 32]>> {
    let Some(tip) = ledger::tip(repo)? else {
        return Ok(None);
    };
    let tree = repo.find_commit(tip)?.tree()?;
    let Some(entry) = tree.get_name("checkpoint") else {
        return Ok(None);
    };
    let note = String::from_utf8_lossy(repo.find_blob(entry.id())?.content()).into_owned();
    Ok(keys
        .iter()
        .find(|k| {
            Checkpoint::verify(&note, ledger::KEY_NAME, std::slice::from_ref(*k))
                .is_ok_and(|cp| cp.origin == ledger::origin(repository))
        })
        .map(|k| k.to_bytes()))
}
