//! `atelier cycle`: one self-improvement proposal end to end. A proposer writes the change, the
//! metric it is judged by is registered in the ledger, the replay benchmark measures it, the
//! validators check it, the evidence is committed into its record, the review panel judges it
//! as it now is, and it is submitted — then the cycle stops at "awaiting approval". A proposal
//! the panel blocks, or whose evidence shows a regression or a failed validator, is recorded but
//! not submitted (unless `--submit-anyway`). A step that fails closes the proposal, saying why.
//! The proposer runs here; every step after it is `improve::cycle`.

use std::path::Path;
use std::process::ExitCode;

use clap::Args;

use super::json;
use super::propose::{run_proposer, ProposeArgs};
use crate::governance::time::Timestamp;
use crate::improve::cycle::{self, Cycle, Host, Options};
use crate::workflow::{self, Workspace};

#[derive(Args, Debug)]
pub struct CycleArgs {
    /// The proposer: `tune`, `memory`, `lint` (with --family) or `agent` (with --goal).
    #[arg(long, value_name = "PROPOSER", default_value = "tune")]
    pub(super) from: String,
    /// With --from agent: what the change should achieve.
    #[arg(long, value_name = "TEXT")]
    pub(super) goal: Option<String>,
    /// With --from lint: the lint family.
    #[arg(long, value_name = "FAMILY")]
    pub(super) family: Option<String>,
    /// The replay metric the evidence is judged by (default: the one the change is meant to
    /// move, e.g. false_kills for a longer restart_after). Registered in the ledger before the
    /// benchmark runs.
    #[arg(long, value_name = "METRIC")]
    pub(super) metric: Option<String>,
    /// Seeds for the replay benchmark (at least 2: an interval needs two).
    #[arg(long, default_value_t = 5)]
    pub(super) seeds: u64,
    /// Only this built-in mission (default: all).
    #[arg(long, value_name = "ID")]
    pub(super) mission: Option<String>,
    /// Submit even when the panel blocks or the evidence shows a regression or a failed
    /// validator (the pull request body and `show` say so).
    #[arg(long)]
    pub(super) submit_anyway: bool,
    /// Print the result as JSON (one document on stdout) instead of text.
    #[arg(long)]
    pub(super) json: bool,
}

/// The terminal the cycle reports to: its progress on stderr, and the clock as the commands
/// read it.
struct Terminal;

impl Host for Terminal {
    fn note(&self, text: &str) {
        super::note!("{text}");
    }

    fn now(&self) -> workflow::Result<Timestamp> {
        Ok(super::now_announced()?)
    }
}

pub fn cycle(dir: &Path, args: CycleArgs) -> anyhow::Result<ExitCode> {
    let ws = Workspace::open(dir)?;
    let (code, c) = run(&ws, &args)?;
    if args.json {
        json(&c)?;
    } else if let Some(why) = &c.stopped {
        super::note!("cycle stopped at {}: {why}", c.stage);
    } else if let (Some(id), Some(awaiting), Some(command)) =
        (&c.proposal, c.awaiting(), &c.approve_command)
    {
        super::out(&format!(
            "proposal {id}\n{awaiting}\nto approve: {command}\n"
        ))?;
    }
    Ok(code)
}

/// The whole cycle in `ws` (progress on stderr): its exit code and what it did.
pub(super) fn run(ws: &Workspace, args: &CycleArgs) -> anyhow::Result<(ExitCode, Cycle)> {
    let opts = Options {
        from: args.from.clone(),
        metric: args.metric.clone(),
        seeds: args.seeds,
        mission: args.mission.clone(),
        submit_anyway: args.submit_anyway,
    };
    let (missions, mut c) = cycle::start(ws, &opts, &Terminal)?;
    let proposer = run_proposer(
        ws,
        &args.from,
        &ProposeArgs {
            for_cycle: true,
            patch: None,
            title: None,
            from: Some(args.from.clone()),
            goal: args.goal.clone(),
            family: args.family.clone(),
            dry_run: false,
            json: false,
            rationale: None,
            agent: None,
            run: None,
        },
    )?;
    let Some(p) = proposer.proposed else {
        c.stopped = Some(format!(
            "the `{}` proposer proposed nothing (its report is above)",
            args.from
        ));
        return Ok((ExitCode::from(1), c));
    };
    cycle::complete(ws, &opts, &missions, &p, &mut c, &Terminal)?;
    let code = if c.submitted {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    };
    Ok((code, c))
}
