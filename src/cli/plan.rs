//! `atelier plan check`: the contract validator for plan files.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};

use super::{json, out};

#[derive(Subcommand, Debug)]
pub enum PlanCommand {
    /// Validate plans (ids, dependencies, cycles, roles, contracts, globs) and show their schedule.
    Check(CheckArgs),
}

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// Plan files, validated together (cross-plan dependencies resolve among them).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Print the result as JSON (one document on stdout) instead of text.
    #[arg(long)]
    json: bool,
}

pub fn plan(dir: &Path, cmd: PlanCommand) -> anyhow::Result<ExitCode> {
    let PlanCommand::Check(a) = cmd;
    let repo = crate::git::open(dir)?;
    let root = repo
        .workdir()
        .context("the repository is bare: atelier needs a working tree")?;
    let config = crate::config::Config::load(root)?;
    let roles = config.roles.keys().cloned().collect();
    let mut files = Vec::new();
    for f in &a.files {
        let text =
            std::fs::read_to_string(f).with_context(|| format!("reading plan {}", f.display()))?;
        files.push((f.display().to_string(), text));
    }
    let reach = crate::swarm::reach(&repo, &config)?;
    let r = crate::swarm::check(&files, &roles, &reach)?;
    if a.json {
        json(&r)?;
    } else if !r.refusals.is_empty() {
        let mut t = String::new();
        for x in &r.refusals {
            t.push_str(&format!(
                "{}: {}{}{}: {}\n",
                x.code,
                x.file,
                x.task
                    .as_deref()
                    .map(|t| format!(", task {t}"))
                    .unwrap_or_default(),
                x.field
                    .as_deref()
                    .map(|f| format!(", field {f}"))
                    .unwrap_or_default(),
                x.message
            ));
            if let Some(next) = x.code.next_step() {
                t.push_str(&format!("  next: {next}\n"));
            }
        }
        t.push_str(&format!(
            "\nrefused: {} problem(s) in {} plan(s)\n",
            r.refusals.len(),
            r.plans.len()
        ));
        out(&t)?;
    } else {
        let mut t = format!(
            "{} plan(s), {} task(s): OK\n\nwaves:\n",
            r.plans.len(),
            r.tasks
        );
        for (i, w) in r.waves.iter().enumerate() {
            t.push_str(&format!("  {:>3}: {}\n", i + 1, w.join(" ")));
        }
        t.push_str(&format!(
            "\nmax width: {}\ncritical path ({}): {}\n",
            r.max_width,
            r.critical_path.len(),
            r.critical_path.join(" -> ")
        ));
        if r.serialised.is_empty() {
            t.push_str("serialised by overlapping claims: none\n");
        } else {
            t.push_str("serialised by overlapping claims:\n");
            for g in &r.serialised {
                t.push_str(&format!("  {}\n", g.join(", ")));
            }
        }
        out(&t)?;
    }
    Ok(if r.refusals.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
