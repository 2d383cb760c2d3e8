//! `atelier approve`, on every forge: sign the payload for the change as the forge carries it
//! now (or take a signature or token made elsewhere), tell the approver what the gate will make
//! of it, and post it on the pull request. Posting judges nothing; the gate does.

use crate::workflow::error::Result;

use super::{evaluate_at, refuse, Evaluation, Workspace};
use crate::audit::ledger::Event;
use crate::forge::{Addr, Comment, PullState};
use crate::governance::time::Timestamp;
use crate::governance::token::{self, Payload, RawToken, SeenCheckpoint};
use crate::governance::Code;

pub use crate::governance::token::Verdict;

pub struct ApproveOptions {
    pub expires_in: i64,
    pub decision: Verdict,
}

/// How the token is made.
pub enum Sign {
    /// With this key, here.
    Key(ed25519_dalek::SigningKey),
    /// Not at all: return the payload's canonical bytes, for `ssh-keygen -Y sign`.
    Payload,
    /// A payload signed elsewhere (`ssh-keygen -Y sign`), as text.
    Signed { payload: String, signature: String },
    /// Text carrying complete tokens, posted exactly as received.
    Text(String),
}

/// What `approve` produced.
#[derive(Debug)]
pub struct Approval {
    pub proposal: String,
    /// The pull request the token is for.
    pub pull: u64,
    /// The comment carrying the token (or, for `Sign::Payload`, the bytes to sign).
    pub comment: String,
    /// The tokens the comment carries, as text.
    pub tokens: String,
    /// Whether `comment` is the payload to sign (nothing was posted).
    pub payload_only: bool,
    /// Where the comment was posted, if it was (`Some("")` when the forge has no address).
    pub posted: Option<String>,
    /// Whether the forge recorded the tokens in the ledger as they were posted.
    pub recorded: bool,
    /// Why the gate will not count a token (its code and detail): the command says so first
    /// and exits 1. The token is still posted or recorded as asked (the record keeps what was
    /// signed; the gate judges it).
    pub never: Vec<String>,
    /// Things the approver should know (e.g. the gate will not count the token).
    pub warnings: Vec<String>,
    /// Why the token was neither recorded nor posted, when only another machine can record it
    /// (the local forge, on an account without the gate key): the command prints the token to
    /// hand over and exits 1.
    pub unrecorded: Option<String>,
    /// Where the proposal stands with this comment counted as the gate counts it.
    pub standing: Option<Standing>,
}

/// Where a proposal stands at the gate: who counts, how many it needs, who vetoes.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Standing {
    pub approvers: Vec<String>,
    /// The approvals the rules it touches need (`None` when that cannot be said: the policy at
    /// base does not parse).
    pub required: Option<u32>,
    pub vetoes: Vec<String>,
    /// Whether the gate would merge it now.
    pub may_merge: bool,
}

/// The payload for an evaluated change: what the gate would check a token against now.
pub fn payload_from(
    ws: &Workspace,
    eval: &Evaluation,
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
    let checkpoint = ws.verified_ledger()?.map(|snap| SeenCheckpoint {
        size: snap.lines.len() as u64,
        root: snap.root_hex(),
    });
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

/// Makes a token for the proposal `addr` names, as the forge carries it now, and with `post`
/// posts it there (the local forge also records it in the ledger at once).
pub fn approve(
    ws: &Workspace,
    addr: &Addr,
    how: Sign,
    opts: &ApproveOptions,
    post: bool,
    now: Timestamp,
) -> Result<Approval> {
    // Taking in the remote ledger moves a ref: like every mutation, under the lock.
    let _lock = ws.lock()?;
    super::sync::sync(ws, true)?;
    let view = ws.view()?;
    let n = ws.pull_for(&view, addr)?;
    let carried = ws
        .forge
        .carried(&ws.site(), &view, n, super::Publish::Nothing, Vec::new())?;
    super::gate::check_addressed(addr, &carried)?;
    let n = carried.pull.number;
    let pull = carried.pull.clone();
    if pull.state != PullState::Open || view.finished(&pull.proposal) {
        return Err(refuse(
            Code::NotOpen,
            format!(
                "proposal {} is {} (by its record and the ledger); there is nothing to approve",
                pull.proposal,
                if pull.state == PullState::Open {
                    "finished"
                } else {
                    pull.state.as_str()
                }
            ),
        ));
    }
    let eval = evaluate_at(ws, &view, pull.clone(), carried.base, carried.head, now)?;
    let token_comment = |t: RawToken| ws.forge.token_comment(&t);
    let comment = match how {
        Sign::Key(key) => token_comment(token::sign(&payload_from(ws, &eval, opts, now)?, &key)),
        Sign::Payload => {
            return Ok(Approval {
                proposal: eval.pull.proposal.clone(),
                pull: n,
                comment: payload_from(ws, &eval, opts, now)?.to_canonical(),
                tokens: String::new(),
                payload_only: true,
                posted: None,
                recorded: false,
                warnings: Vec::new(),
                never: Vec::new(),
                unrecorded: None,
                standing: None,
            })
        }
        Sign::Signed { payload, signature } => token_comment(RawToken { payload, signature }),
        Sign::Text(body) => body,
    };
    let tokens = RawToken::extract_all(&comment);
    let mut warnings = Vec::new();
    let mut never = Vec::new();
    if tokens.is_empty() {
        warnings.push("no approval token found in the text: it was recorded as a plain comment, which the gate never counts".into());
    }
    // Tell the approver now what the gate will make of each token.
    let mut with = pull;
    with.comments.push(Comment {
        id: 0,
        author: String::new(),
        body: comment.clone(),
        at: now,
    });
    let after = evaluate_at(ws, &view, with, carried.base, carried.head, now)?;
    for t in &tokens {
        let judged = after
            .tokens
            .iter()
            .rposition(|x| x == t)
            .and_then(|i| after.decision.tokens.get(i));
        if let Some(r) = judged.filter(|r| !r.counted) {
            let why = format!("{}: {}", r.code_text(), r.detail);
            if r.code.is_some() {
                never.push(why);
            } else {
                warnings.push(format!("the gate will not count this token: {why}"));
            }
        }
    }
    let mut posted = None;
    let mut recorded = false;
    let mut unrecorded = None;
    // Where a post is completed by a ledger append, only the gate key's holder records it: on
    // an account without the key, the token is handed over instead.
    let keyless = ws.forge.records_on_post() && !ws.gate_key_path().is_ok_and(|p| p.exists());
    if post && keyless && ws.gate_key().is_err() {
        unrecorded = Some(format!(
            "this account holds no gate key (whoever adopted the repository keeps it), so the token was not recorded: save it (this command's output) to a file and give it to the key's holder, who records it with `atelier approve {} --token FILE`",
            eval.pull.proposal
        ));
    } else if post {
        // A gate key that may not sign would leave the comment without its record: refuse
        // before posting anything.
        if ws.forge.records_on_post() {
            ws.check_gate_key()?;
        }
        let p = ws.forge.post(&ws.site(), n, &comment, now)?;
        if ws.forge.records_on_post() {
            let events: Vec<Event> = tokens
                .iter()
                .map(|t| Event::TokenRecorded {
                    proposal: eval.pull.proposal.clone(),
                    pull: n,
                    comment: p.comment,
                    token: t.to_text(),
                })
                .collect();
            ws.record(events, now)?;
            recorded = true;
        }
        posted = Some(p.url.unwrap_or_default());
    }
    Ok(Approval {
        proposal: eval.pull.proposal.clone(),
        pull: n,
        comment,
        tokens: tokens
            .iter()
            .map(RawToken::to_text)
            .collect::<Vec<_>>()
            .join("\n"),
        payload_only: false,
        posted,
        recorded,
        warnings,
        never,
        unrecorded,
        standing: Some(Standing {
            approvers: after.decision.approvers.clone(),
            required: after.decision.required_approvals(),
            vetoes: after.decision.vetoes.clone(),
            may_merge: after.decision.allowed,
        }),
    })
}
