//! `atelier approve`: sign with a key, print the payload for ssh-keygen, record an ssh-keygen
//! signature, or record a token as received.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{ArgGroup, Args};

use super::{now, out};
use crate::governance::time::parse_duration;
use crate::governance::token::Verdict;
use crate::workflow::{self, ApproveOptions, Sign, Workspace};

#[derive(Args, Debug)]
#[command(group(ArgGroup::new("how").required(true).args(["key", "payload", "signature", "token"])))]
#[command(group(ArgGroup::new("which").required(true).args(["id", "pr"])))]
pub struct ApproveArgs {
    /// The proposal id.
    id: Option<String>,
    /// The pull request carrying the proposal, by number (on GitHub: its base and head are
    /// fetched and the merge tree computed here).
    #[arg(long, value_name = "n", conflicts_with = "id")]
    pr: Option<u64>,
    /// On GitHub: post the token as a pull-request comment (otherwise it is printed to paste).
    /// The local forge always records it.
    #[arg(long)]
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
    let how = sign_by(&args)?;
    let post = args.post || ws.forge.records_on_post();
    let addr = super::gate::addr(args.id, args.pr);
    let done = workflow::approve(&ws, &addr, how, &opts, post, now)?;
    told(&done, &opts)
}

/// How the approver signs: with a key, by printing the payload, with ssh-keygen's signature,
/// or with a whole token as received.
fn sign_by(args: &ApproveArgs) -> anyhow::Result<Sign> {
    Ok(if let Some(k) = &args.key {
        Sign::Key(workflow::read_signing_key(k)?)
    } else if args.payload {
        if args.post {
            anyhow::bail!("--payload prints the bytes to sign; there is nothing to --post yet");
        }
        Sign::Payload
    } else if let Some(sig) = &args.signature {
        let payload_path = match &args.payload_file {
            Some(p) => p.clone(),
            None => PathBuf::from(sig.to_string_lossy().strip_suffix(".sig").ok_or_else(|| {
                anyhow::anyhow!(
                    "--signature {}: expected the `.sig` file ssh-keygen wrote next to the payload file (or pass --payload-file)",
                    sig.display()
                )
            })?),
        };
        let payload = std::fs::read_to_string(&payload_path).map_err(|e| {
            anyhow::anyhow!(
                "reading the signed payload {} (the file you gave ssh-keygen): {e}",
                payload_path.display()
            )
        })?;
        let signature = std::fs::read_to_string(sig)
            .map_err(|e| anyhow::anyhow!("reading signature {}: {e}", sig.display()))?;
        if !signature.starts_with("-----BEGIN SSH SIGNATURE-----") {
            anyhow::bail!(
                "{}: expected an armored SSH signature (-----BEGIN SSH SIGNATURE-----)",
                sig.display()
            );
        }
        Sign::Signed { payload, signature }
    } else if let Some(token) = &args.token {
        Sign::Text(
            std::fs::read_to_string(token)
                .map_err(|e| anyhow::anyhow!("reading token file {}: {e}", token.display()))?,
        )
    } else {
        unreachable!("clap requires one of --key, --payload, --signature, --token")
    })
}

/// What `approve` says of what it did: the payload to sign, why a token will never count, and
/// where it was recorded or posted (or the comment to paste). Exit 1 when it will never count.
fn told(done: &workflow::Approval, opts: &ApproveOptions) -> anyhow::Result<ExitCode> {
    if done.payload_only {
        out(&done.comment)?;
        return Ok(ExitCode::SUCCESS);
    }
    // Why it will never count comes first, before anything else is printed.
    for why in &done.never {
        super::note!("error: the gate will not count this token: {why}");
    }
    let code = if done.never.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    };
    for w in &done.warnings {
        super::note!("warning: {w}");
    }
    if let Some(why) = &done.unrecorded {
        super::note!("error: {why}");
        out(&done.tokens)?;
        return Ok(ExitCode::from(1));
    }
    if done.recorded {
        super::note!("recorded on proposal {}", done.proposal);
        if let Some(s) = &done.standing {
            super::note!("{}", standing(&done.proposal, s));
        }
        if !done.tokens.is_empty() {
            out(&done.tokens)?;
        }
        return Ok(code);
    }
    let n = done.pull;
    match &done.posted {
        Some(url) => {
            let verb = if opts.decision == Verdict::Reject {
                "rejection"
            } else {
                "approval"
            };
            super::note!("posted the {verb} on pull request #{n}: {url}");
            if opts.decision == Verdict::Reject {
                // A rejection binds from when the gate records it (docs/github.md, section 5).
                super::note!(
                    "note: the rejection vetoes while its comment exists, and for good once the gate has read it (its delivery to `serve`, or any later evaluation records it in the ledger); a comment deleted before that is lost. Check that the gate's summary comment on #{n} lists it as `reject: counted`; if it does not within a minute, ask the gate's operator to run `atelier gate --pr {n}`, and post it again if the comment is gone"
                );
            }
        }
        None => super::note!("paste this comment on pull request #{n} (or run again with --post):"),
    }
    out(&done.comment)?;
    Ok(code)
}

/// Where the proposal now stands, counting the token just recorded as the gate counts it.
fn standing(id: &str, s: &workflow::Standing) -> String {
    let who = |names: &[String]| crate::text::printable(&names.join(", "));
    let count = match s.required {
        Some(r) => format!("{}/{r} approvals", s.approvers.len()),
        None => format!("{} approval(s)", s.approvers.len()),
    };
    let by = if s.approvers.is_empty() {
        String::new()
    } else {
        format!(" ({})", who(&s.approvers))
    };
    if !s.vetoes.is_empty() {
        format!(
            "proposal {id} now: {count}{by}, vetoed by {}: the gate refuses it while a veto stands",
            who(&s.vetoes)
        )
    } else if s.may_merge {
        format!("proposal {id} now: {count}{by}; the gate passes: `atelier merge {id}` merges it")
    } else {
        format!("proposal {id} now: {count}{by}; `atelier gate {id}` shows what it still needs")
    }
}
