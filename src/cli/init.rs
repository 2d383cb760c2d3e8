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
    /// Add a glob to the constitution's paths (repeatable): what else should need its double
    /// quorum, such as the code that enforces your project's own rules.
    #[arg(long, value_name = "GLOB")]
    constitution: Vec<String>,
}

pub fn init(dir: &Path, args: InitArgs) -> anyhow::Result<ExitCode> {
    let r = crate::workflow::init(dir, args.repository, args.branch, &args.constitution)?;
    let mut text = format!("Atelier initialised in {}\n", r.root.display());
    for c in &r.created {
        text.push_str(&format!("  created  {c}\n"));
    }
    for k in &r.kept {
        text.push_str(&format!("  kept     {k} (already there)\n"));
    }
    text.push_str(&format!(
        "\ngate key: {}\n  private key: {} (outside the repository, where contained workers cannot reach it;\n  back it up: without it this clone cannot sign the ledger; README, \"The gate key\")\n\nNext:\n  1. add each approver's key to policies/allowed_signers (`atelier keygen KEY --principal NAME` prints the line)\n  2. if you will run agents, add their roles to atelier.toml now ([roles.NAME], docs/swarm.md, \"Running plans\"):\n     after adoption a change to the roles is a constitution change, approved by its quorum\n  3. commit the policy; that commit is the adoption point:\n       git add {} && git commit -m \"Adopt atelier\"\n",
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

#[derive(clap::Subcommand, Debug)]
pub enum GateKeyCommand {
    /// The gate key is lost: make a new one where it was kept and propose publishing it in
    /// policies/gate_key.pub (a constitution change). Its merge records the recovery.
    Recover(RecoverArgs),
}

#[derive(Args, Debug)]
pub struct RecoverArgs {
    /// Print the result as JSON (one document on stdout) instead of text.
    #[arg(long)]
    json: bool,
}

pub fn gate_key(dir: &Path, cmd: GateKeyCommand) -> anyhow::Result<ExitCode> {
    let GateKeyCommand::Recover(a) = cmd;
    let ws = crate::workflow::Workspace::open(dir)?;
    let now = crate::clock::now()?.0;
    let r = crate::workflow::gatekey::recover_and_propose(&ws, now)?;
    if a.json {
        super::json(&r)?;
    } else {
        out(&format!(
            "new gate key: {}\n  private key: {} (back it up)\nproposal {} publishes it in policies/gate_key.pub (branch {}).\n\nNext: the constitution quorum approves it (`atelier approve {} --key KEY`), then `atelier merge {}`.\nUntil it merges, the ledger's new entries are signed by the new key; the merge records\nthe recovery, and `atelier audit verify` shows it as one.\n",
            r.fingerprint,
            r.key.display(),
            r.proposal,
            r.branch,
            r.proposal,
            r.proposal
        ))?;
    }
    Ok(ExitCode::SUCCESS)
}
