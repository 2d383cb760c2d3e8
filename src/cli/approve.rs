//! `atelier approve`: sign with a key, print the payload for ssh-keygen, record an ssh-keygen
//! signature, or record a token as received.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{ArgGroup, Args};

use super::{now, out};
use crate::governance::time::parse_duration;
use crate::governance::token::Verdict;
use crate::workflow::{self, ApproveOptions, SignWith, Workspace};

#[derive(Args, Debug)]
#[command(group(ArgGroup::new("how").required(true).args(["key", "payload", "signature", "token"])))]
#[command(group(ArgGroup::new("which").required(true).args(["id", "pr"])))]
pub struct ApproveArgs {
    /// The proposal id (local forge).
    id: Option<String>,
    /// A GitHub pull request number: fetch its base and head, compute the merge tree here, and
    /// sign (--key) or print the payload (--payload) or wrap an ssh-keygen signature (--signature).
    #[arg(long, value_name = "n", conflicts_with = "id")]
    pr: Option<u64>,
    /// With --pr: post the token as a pull-request comment (otherwise it is printed to paste).
    #[arg(long, requires = "pr")]
    post: bool,
    /// Sign with this OpenSSH ed25519 private key (unencrypted).
    #[arg(long, value_name = "path")]
    key: Option<PathBuf>,
    /// Print the exact bytes to sign, for `ssh-keygen -Y sign -f KEY -n atelier-approval FILE`.
    #[arg(long)]
    payload: bool,
    /// Record a signature made by ssh-keygen (FILE.sig, next to the payload FILE).
    #[arg(long, value_name = "file.sig")]
    signature: Option<PathBuf>,
    /// With --signature: the payload file that was signed (default: the .sig path without .sig).
    #[arg(long, value_name = "file", requires = "signature")]
    payload_file: Option<PathBuf>,
    /// Record a complete token (payload + armored signature) exactly as received.
    #[arg(long, value_name = "file")]
    token: Option<PathBuf>,
    /// How long the token stays valid: 90s, 30m, 12h, 7d.
    #[arg(long, default_value = "7d")]
    expires: String,
    /// Sign a rejection (a veto) instead of an approval.
    #[arg(long)]
    reject: bool,
}

pub fn approve(dir: &Path, args: ApproveArgs) -> anyhow::Result<ExitCode> {
    let ws = Workspace::open(dir)?;
    let expires_in =
        parse_duration(&args.expires).map_err(|e| anyhow::anyhow!("--expires: {e}"))?;
    let opts = ApproveOptions {
        expires_in,
        decision: if args.reject {
            Verdict::Reject
        } else {
            Verdict::Approve
        },
    };
    let now = now()?;
    if let Some(n) = args.pr {
        let how = if let Some(k) = args.key {
            super::github::Sign::Key(k)
        } else if args.payload {
            super::github::Sign::Payload
        } else if let Some(sig) = args.signature {
            super::github::Sign::Signature(sig, args.payload_file)
        } else {
            anyhow::bail!("with --pr, sign with --key, or use --payload then --signature for ssh-keygen (--token is for the local forge)");
        };
        return super::github::approve(&ws, n, how, &opts, args.post, now);
    }
    let id = args.id.expect("clap requires an id or --pr");
    let done = if let Some(key) = args.key {
        workflow::approve(&ws, &id, SignWith::Key(key), &opts, now)?
    } else if args.payload {
        let p = workflow::payload_for(&ws, &id, &opts, now)?;
        out(&p.to_canonical())?;
        return Ok(ExitCode::SUCCESS);
    } else if let Some(sig) = args.signature {
        workflow::record_signature(&ws, &id, &sig, args.payload_file.as_deref(), now)?
    } else if let Some(token) = args.token {
        workflow::record_token_file(&ws, &id, &token, now)?
    } else {
        unreachable!("clap requires one of --key, --payload, --signature, --token")
    };
    for w in &done.warnings {
        eprintln!("warning: {w}");
    }
    eprintln!("recorded on proposal {id}");
    if !done.token.is_empty() {
        out(&done.token)?;
    }
    Ok(ExitCode::SUCCESS)
}
