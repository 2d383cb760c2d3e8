//! The GitHub forms of the commands: `submit`, `approve --pr`, `gate --pr`, `merge --pr`, and
//! `serve` (the webhook receiver).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;

use super::{json, now, out};
use crate::forge::github::GitHub;
use crate::governance::token::Verdict;
use crate::workflow::github::{self as gh_flow, PrMerge, PrSign};
use crate::workflow::{ApproveOptions, Workspace};

#[derive(Args, Debug)]
pub struct SubmitArgs {
    /// The proposal id.
    id: String,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub fn submit(dir: &Path, args: SubmitArgs) -> anyhow::Result<ExitCode> {
    let ws = Workspace::open(dir)?;
    let gh = GitHub::connect(&ws.config.forge, true)?;
    let s = gh_flow::submit(&ws, &gh, &args.id, now()?)?;
    if args.json {
        json(&s)?;
    } else {
        out(&format!(
            "{} pull request #{} for proposal {} (head {})\n  {}\n",
            if s.created { "opened" } else { "updated" },
            s.pull,
            s.id,
            s.head,
            s.url
        ))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// How `approve --pr` was asked to sign.
pub enum Sign {
    Key(PathBuf),
    Payload,
    Signature(PathBuf, Option<PathBuf>),
}

pub fn approve(
    ws: &Workspace,
    n: u64,
    how: Sign,
    opts: &ApproveOptions,
    post: bool,
    now: crate::governance::time::Timestamp,
) -> anyhow::Result<ExitCode> {
    let gh = GitHub::connect(&ws.config.forge, post)?;
    let how = match how {
        Sign::Key(path) => PrSign::Key(crate::workflow::read_signing_key(&path)?),
        Sign::Payload => {
            if post {
                anyhow::bail!("--payload prints the bytes to sign; there is nothing to --post yet");
            }
            PrSign::Payload
        }
        Sign::Signature(sig, payload) => {
            let payload_path = match payload {
                Some(p) => p,
                None => PathBuf::from(
                    sig.to_string_lossy()
                        .strip_suffix(".sig")
                        .ok_or_else(|| anyhow::anyhow!("--signature {}: expected the `.sig` file ssh-keygen wrote next to the payload file (or pass --payload-file)", sig.display()))?,
                ),
            };
            let read = |p: &Path| {
                std::fs::read_to_string(p)
                    .map_err(|e| anyhow::anyhow!("reading {}: {e}", p.display()))
            };
            PrSign::Signed {
                payload: read(&payload_path)?,
                signature: read(&sig)?,
            }
        }
    };
    let done = gh_flow::approve_pr(ws, &gh, n, how, opts, post, now)?;
    for w in &done.warnings {
        eprintln!("warning: {w}");
    }
    match &done.posted {
        Some(url) => {
            let verb = if opts.decision == Verdict::Reject {
                "rejection"
            } else {
                "approval"
            };
            eprintln!("posted the {verb} on pull request #{n}: {url}");
            if opts.decision == Verdict::Reject {
                // A rejection binds from when the gate records it (docs/github.md, section 5).
                eprintln!(
                    "note: the rejection vetoes while its comment exists, and for good once the gate has read it (its delivery to `serve`, or any later evaluation records it in the ledger); a comment deleted before that is lost. Check that the gate's summary comment on #{n} lists it as `reject: counted`; if it does not within a minute, ask the gate's operator to run `atelier gate --pr {n}`, and post it again if the comment is gone"
                );
            }
            out(&done.comment)?;
        }
        None => {
            if done.comment.starts_with("/atelier") {
                eprintln!("paste this comment on pull request #{n} (or run again with --post):");
            }
            out(&done.comment)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn gate(ws: &Workspace, n: u64, as_json: bool) -> anyhow::Result<ExitCode> {
    let gh = GitHub::connect(&ws.config.forge, true)?;
    let run = gh_flow::gate_pr(ws, &gh, n, now()?, gh_flow::Publish::Verdict)?;
    eprintln!(
        "status {} on {}: {:?} — {}",
        gh_flow::STATUS_CONTEXT,
        run.eval.change.head,
        run.state,
        run.description
    );
    for note in &run.notes {
        eprintln!("note: {note}");
    }
    let code = if run.eval.decision.allowed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    };
    super::verdict(code, || super::gate::print(&run.eval, as_json))
}

pub fn merge(ws: &Workspace, n: u64, as_json: bool) -> anyhow::Result<ExitCode> {
    let gh = GitHub::connect(&ws.config.forge, true)?;
    match gh_flow::merge_pr(ws, &gh, n, now()?)? {
        PrMerge::Refused(run) => {
            eprintln!("refused: pull request #{n} was not merged (the gate is not satisfied)");
            super::verdict(ExitCode::from(1), || super::gate::print(&run.eval, as_json))
        }
        PrMerge::Merged {
            commit,
            tree,
            approvers,
            note,
        } => {
            if let Some(n) = &note {
                eprintln!("note: {n}");
            }
            super::verdict(ExitCode::SUCCESS, || {
                if as_json {
                    json(&serde_json::json!({
                        "pull": n, "commit": commit, "tree": tree, "approvers": approvers,
                    }))
                } else {
                    out(&format!(
                        "merged pull request #{n} as {commit}\n  tree {tree} (checked after landing)\n  approved by {}\n  ledger recorded and pushed\n",
                        approvers.join(", ")
                    ))
                }
            })
        }
    }
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// The address to listen on.
    #[arg(long, default_value = "127.0.0.1:8787")]
    listen: String,
    /// Milliseconds a client has to send a request's headers.
    #[arg(long, default_value_t = 5_000, value_name = "MS")]
    header_timeout_ms: u64,
    /// Milliseconds from the end of the headers to the body's first byte.
    #[arg(long, default_value_t = 2_000, value_name = "MS")]
    first_byte_timeout_ms: u64,
    /// Milliseconds from the end of the headers to the end of the body.
    #[arg(long, default_value_t = 5_000, value_name = "MS")]
    body_timeout_ms: u64,
}

pub fn serve(dir: &Path, args: ServeArgs) -> anyhow::Result<ExitCode> {
    let ws = Workspace::open(dir)?;
    // Fail now, not at the first delivery, if the configuration cannot work.
    GitHub::connect(&ws.config.forge, true)?;
    let secret = std::env::var(super::serve::SECRET_VAR)
        .ok()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| {
            anyhow::anyhow!(
                "{} is not set: the webhook secret verifies every delivery (the same value as the webhook's secret on GitHub)",
                super::serve::SECRET_VAR
            )
        })?;
    let addr: std::net::SocketAddr = args.listen.parse().map_err(|e| {
        anyhow::anyhow!(
            "--listen {}: {e} (expected host:port, e.g. 127.0.0.1:8787)",
            args.listen
        )
    })?;
    let ms = std::time::Duration::from_millis;
    let timeouts = super::serve::Timeouts {
        headers: ms(args.header_timeout_ms.max(1)),
        first_byte: ms(args.first_byte_timeout_ms.max(1)),
        body: ms(args.body_timeout_ms.max(1)),
    };
    super::serve::run(ws.root.clone(), addr, secret.into_bytes(), timeouts)?;
    Ok(ExitCode::SUCCESS)
}
