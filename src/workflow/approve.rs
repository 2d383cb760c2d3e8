//! `atelier approve`: sign the proposal's current payload (or take a signature or token made
//! elsewhere) and record it on the pull request. Recording judges nothing; the gate does.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::{refuse, Workspace};
use crate::audit::ledger::Event;
use crate::forge::PullState;
use crate::governance::time::Timestamp;
use crate::governance::token::{self, Payload, RawToken, SeenCheckpoint, Verdict};
use crate::governance::Code;

/// How a payload gets signed.
pub enum SignWith {
    /// An unencrypted OpenSSH ed25519 private key file.
    Key(PathBuf),
}

pub struct ApproveOptions {
    pub expires_in: i64,
    pub decision: Verdict,
}

#[derive(Debug)]
pub struct Approved {
    pub token: String,
    /// Things the approver should know (e.g. the key is not in allowed_signers at base).
    pub warnings: Vec<String>,
}

/// The payload an approver would sign for proposal `id` right now.
pub fn payload_for(
    ws: &Workspace,
    id: &str,
    opts: &ApproveOptions,
    now: Timestamp,
) -> Result<Payload> {
    let pull = ws.pull(id)?;
    if pull.state != PullState::Open {
        return Err(refuse(
            Code::NotOpen,
            format!(
                "proposal {id} is {}; there is nothing to approve",
                pull.state.as_str()
            ),
        ));
    }
    let eval = super::evaluate(ws, pull, now)?;
    payload_from(ws, &eval, opts, now)
}

/// The payload for an evaluated change: what the gate would check a token against now.
pub fn payload_from(
    ws: &Workspace,
    eval: &super::Evaluation,
    opts: &ApproveOptions,
    now: Timestamp,
) -> Result<Payload> {
    let id = &eval.change.proposal;
    let merge_tree = eval.merge_tree.ok_or_else(|| {
        refuse(
            Code::MergeConflict,
            format!(
                "proposal {id} does not merge cleanly into {}: {}",
                ws.branch(),
                eval.change
                    .merge_tree
                    .as_ref()
                    .err()
                    .map(String::as_str)
                    .unwrap_or("conflict")
            ),
        )
    })?;
    // The token carries the ledger this clone verified (and remembers): its signer becomes a
    // witness against a later rollback.
    let checkpoint = match ws.verified_ledger()? {
        Some(snap) => Some(SeenCheckpoint {
            size: snap.lines.len() as u64,
            root: snap.root_hex(),
        }),
        None => None,
    };
    let mut nonce = [0u8; 16];
    rand_core::RngCore::fill_bytes(&mut rand_core::OsRng, &mut nonce);
    let change = eval.change.clone();
    Ok(Payload {
        repository: change.repository,
        proposal: change.proposal,
        pull: change.pull,
        base: change.base,
        head: change.head,
        merge_tree: merge_tree.to_string(),
        policy: change.policy_digest,
        decision: opts.decision,
        issued: now,
        expires: now + opts.expires_in,
        nonce: hex::encode(nonce),
        checkpoint,
    })
}

/// Signs the current payload with a key and records the token.
pub fn approve(
    ws: &Workspace,
    id: &str,
    with: SignWith,
    opts: &ApproveOptions,
    now: Timestamp,
) -> Result<Approved> {
    let SignWith::Key(path) = with;
    let key = super::read_signing_key(&path)?;
    let _lock = ws.lock()?;
    let payload = payload_for(ws, id, opts, now)?;
    let token = token::sign(&payload, &key);
    record(ws, id, &token.to_text(), now)
}

/// Records a signature made with `ssh-keygen -Y sign` over a payload file.
pub fn record_signature(
    ws: &Workspace,
    id: &str,
    sig_path: &Path,
    payload_path: Option<&Path>,
    now: Timestamp,
) -> Result<Approved> {
    let payload_path = match payload_path {
        Some(p) => p.to_path_buf(),
        None => {
            let s = sig_path.to_string_lossy();
            let Some(stripped) = s.strip_suffix(".sig") else {
                anyhow::bail!(
                    "--signature {s}: expected the `.sig` file ssh-keygen wrote next to the payload file (or pass --payload-file)"
                );
            };
            PathBuf::from(stripped)
        }
    };
    let payload = std::fs::read_to_string(&payload_path).with_context(|| {
        format!(
            "reading the signed payload {} (the file you gave ssh-keygen)",
            payload_path.display()
        )
    })?;
    let signature = std::fs::read_to_string(sig_path)
        .with_context(|| format!("reading signature {}", sig_path.display()))?;
    if !signature.starts_with("-----BEGIN SSH SIGNATURE-----") {
        anyhow::bail!(
            "{}: expected an armored SSH signature (-----BEGIN SSH SIGNATURE-----)",
            sig_path.display()
        );
    }
    let _lock = ws.lock()?;
    record(ws, id, &RawToken { payload, signature }.to_text(), now)
}

/// Records a complete token (or any comment text) exactly as received.
pub fn record_token_file(
    ws: &Workspace,
    id: &str,
    path: &Path,
    now: Timestamp,
) -> Result<Approved> {
    let body = std::fs::read_to_string(path)
        .with_context(|| format!("reading token file {}", path.display()))?;
    let _lock = ws.lock()?;
    record(ws, id, &body, now)
}

fn record(ws: &Workspace, id: &str, body: &str, now: Timestamp) -> Result<Approved> {
    let pull = ws.pull(id)?;
    let finished = super::ledger_view(&ws.repo, &pull)?.1;
    if pull.state != PullState::Open || finished {
        return Err(refuse(
            Code::NotOpen,
            format!("proposal {id} is merged or closed (by its record and the ledger); tokens can no longer be recorded"),
        ));
    }
    let mut warnings = Vec::new();
    let tokens = RawToken::extract_all(body);
    if tokens.is_empty() {
        warnings.push("no approval token found in the text: it was recorded as a plain comment, which the gate never counts".into());
    }
    let author = ws
        .repo
        .config()
        .ok()
        .and_then(|c| c.get_string("user.email").ok())
        .unwrap_or_else(|| "unknown".into());
    let comment = ws.forge.comment(pull.number, &author, body, now)?;
    let events: Vec<Event> = tokens
        .iter()
        .map(|t| Event::TokenRecorded {
            proposal: pull.proposal.clone(),
            pull: pull.number,
            comment: comment.id,
            token: t.to_text(),
        })
        .collect();
    // Tell the approver now what the gate will make of each new token.
    let eval = super::evaluate(ws, ws.pull(id)?, now)?;
    for t in &tokens {
        let judged = eval
            .tokens
            .iter()
            .position(|x| x == t)
            .and_then(|i| eval.decision.tokens.get(i));
        if let Some(r) = judged.filter(|r| !r.counted) {
            warnings.push(format!(
                "the gate will not count this token: {}: {}",
                r.code_text(),
                r.detail
            ));
        }
    }
    ws.record(events, now)?;
    Ok(Approved {
        token: tokens
            .iter()
            .map(RawToken::to_text)
            .collect::<Vec<_>>()
            .join("\n"),
        warnings,
    })
}
