//! `atelier init` and `atelier keygen`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;

use super::out;

#[derive(Args, Debug)]
pub struct InitArgs {
    /// The repository's name as approval tokens bind it (default: local/<directory name>).
    #[arg(long)]
    repository: Option<String>,
    /// The protected branch (default: main).
    #[arg(long)]
    branch: Option<String>,
}

pub fn init(dir: &Path, args: InitArgs) -> anyhow::Result<ExitCode> {
    let r = crate::workflow::init(dir, args.repository, args.branch)?;
    let mut text = format!("Atelier initialised in {}\n", r.root.display());
    for c in &r.created {
        text.push_str(&format!("  created  {c}\n"));
    }
    for k in &r.kept {
        text.push_str(&format!("  kept     {k} (already there)\n"));
    }
    text.push_str(&format!(
        "\ngate key: {}\n  private key: {} (outside the repository, where contained workers cannot reach it;\n  back it up: without it this clone cannot sign the ledger; README, \"The gate key\")\n\nNext:\n  1. add each approver's key to policies/allowed_signers (`atelier keygen KEY --principal NAME` prints the line)\n  2. commit the policy; that commit is the adoption point:\n       git add {} && git commit -m \"Adopt atelier\"\n",
        r.gate_key_fingerprint,
        r.gate_key_path.display(),
        r.to_commit.join(" ")
    ));
    out(&text)?;
    Ok(ExitCode::SUCCESS)
}

#[derive(Args, Debug)]
pub struct KeygenArgs {
    /// Where to write the private key (the public key goes to <path>.pub).
    path: PathBuf,
    /// The principal (e.g. alice@example.org) for the allowed_signers line (default: the file name).
    #[arg(long)]
    principal: Option<String>,
}

pub fn keygen(args: KeygenArgs) -> anyhow::Result<ExitCode> {
    let r = crate::workflow::keygen(&args.path, args.principal)?;
    out(&format!(
        "wrote {} (private, mode 0600) and {}\nfingerprint: {}\n\nAdd this line to policies/allowed_signers:\n{}\n",
        r.private.display(),
        r.public.display(),
        r.fingerprint,
        r.allowed_signers_line
    ))?;
    Ok(ExitCode::SUCCESS)
}
