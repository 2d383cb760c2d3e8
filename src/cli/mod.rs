//! The command line: arguments → options → one domain call, then printing. This is the only
//! module that prints, and the one place errors become exit codes: 0 success, 1 refused or a
//! check failed, 2 bad input or usage. A closed stdout (broken pipe) counts as success, except
//! for a verdict command (gate, merge, audit verify), which keeps its verdict's exit code: piping
//! a refusal into `head` must not turn it into a pass.

mod approve;
mod audit;
mod bench;
mod cockpit;
mod cycle;
mod demo;
mod gate;
mod github;
mod init;
mod plan;
mod propose;
mod review;
mod run;
mod runs;
mod show;
mod ui;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::errors::{Classify, Kind};
use crate::governance::time::Timestamp;

#[derive(Parser, Debug)]
#[command(
    name = "atelier",
    version,
    about = "Governed self-improvement: nothing merges without enough signed human approvals."
)]
struct Cli {
    /// Run as if atelier was started in <dir> (like git -C).
    #[arg(short = 'C', global = true, value_name = "dir")]
    dir: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the whole governed loop in a temporary repository, offline, narrated.
    Demo(demo::DemoArgs),
    /// Adopt Atelier in this git repository (writes config, policy and the gate key; commits nothing).
    Init(init::InitArgs),
    /// Make an OpenSSH ed25519 key pair for an approver and print its allowed_signers line.
    Keygen(init::KeygenArgs),
    /// Propose a change: a patch becomes a proposal branch and a pull request.
    Propose(propose::ProposeArgs),
    /// Show what a proposal changes (its record and a unified diff).
    Show(show::ShowArgs),
    /// Run the review panel on a proposal and record its verdict (exit 0 approve, 1 revise or block).
    Review(review::ReviewArgs),
    /// Sign and record an approval (or rejection) token for a proposal.
    Approve(approve::ApproveArgs),
    /// Decide whether a proposal may merge now (exit 0) or not (exit 1), explaining every requirement.
    Gate(gate::GateArgs),
    /// Merge a proposal if, and only if, the gate passes at this instant.
    Merge(gate::MergeArgs),
    /// List proposals with their state and approvals (`--improvements`: merged cycle proposals with their measured deltas).
    Proposals(propose::ProposalsArgs),
    /// Close a proposal without merging.
    Close(gate::CloseArgs),
    /// Read and verify the proposal history.
    #[command(subcommand)]
    Audit(audit::AuditCommand),
    /// Plans of tasks for the swarm: `plan check` validates them and shows their schedule.
    #[command(subcommand)]
    Plan(plan::PlanCommand),
    /// Run plans with agents in worktrees, through the gauntlet (or --resume a crashed run).
    Run(run::RunArgs),
    /// Watch a run until it finishes: the cockpit on a terminal (its keys: `watch --help`).
    Watch(run::WatchArgs),
    /// Show a run's tasks: state, attempt, nudges, restarts, claims held, waves.
    Status(run::StatusArgs),
    /// Control a running swarm from another terminal: pause, resume, stop, retry TASK, skip TASK.
    Control(run::ControlArgs),
    /// What the runs measured, per role: the attempt-success curve, silences, step times, wasted
    /// attempts, prompt sizes.
    Stats(run::StatsArgs),
    /// The scrutiny validator on a finished run: every criterion's check on record, no check
    /// edited, the built-in reviewers (exit 0 pass, 1 blocked).
    Validate(run::ValidateArgs),
    /// Remove the worktrees and attempt branches that finished runs kept for inspection.
    Clean(run::CleanArgs),
    /// One self-improvement proposal end to end: propose, register its metric, benchmark, validate, record the evidence, review, submit; stops at "awaiting approval".
    Cycle(cycle::CycleArgs),
    /// Benchmarks: `bench replay` compares two conductor configurations on the built-in missions.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// GitHub: push a proposal's branch and open (or update) its pull request.
    Submit(github::SubmitArgs),
    /// GitHub: receive webhook deliveries and run the gate on the pull requests they name.
    Serve(github::ServeArgs),
    /// A local, read-only web dashboard: proposals, the ledger and its audit, runs, the
    /// improvement curve (each page also as JSON under /api/).
    Ui(ui::UiArgs),
    /// The gate's key: `recover` replaces a lost one (with a proposal the constitution quorum
    /// must approve).
    #[command(subcommand, name = "gate-key")]
    GateKey(init::GateKeyCommand),
    /// Print a shell completion script: `source <(atelier completions bash)`; zsh and fish too.
    Completions(CompletionsArgs),
}

#[derive(clap::Args, Debug)]
struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    shell: clap_complete::Shell,
}

/// `atelier completions SHELL`: the script clap_complete generates from the command line's own
/// definition, so it always matches this binary's subcommands and options.
fn completions(a: CompletionsArgs) -> anyhow::Result<ExitCode> {
    use clap::CommandFactory;
    let mut script = Vec::new();
    clap_complete::generate(a.shell, &mut Cli::command(), "atelier", &mut script);
    out_raw(&String::from_utf8(script)?)?;
    Ok(ExitCode::SUCCESS)
}

/// A line for people on stderr, [`printable`] like everything Atelier prints for them (an error
/// may quote a path from a patch, a note a reviewer's answer). The one way `cli/` and `serve`'s
/// loop (which lives outside `cli/`) write to stderr.
/// Never panics: a closed stderr (a restarted log collector) must not stop a server.
macro_rules! note {
    ($($arg:tt)*) => {
        $crate::cli::err_text(&format!("{}\n", format_args!($($arg)*)))
    };
}
pub(crate) use note;

/// `text` safe to show on a terminal: every control character but newline, tab and a carriage
/// return ending a line (an escape sequence a worker put in a file name, a task id or its
/// output; a proposal's title; a line of its diff) becomes `\u{FFFD}`, and every character that
/// reorders or hides text ([`crate::text::hides`]: a right-to-left override, a zero-width space)
/// is shown as its code point, `<U+202E>`, where it stands.
pub(crate) fn printable(text: &str) -> String {
    crate::text::printable(text)
}

/// Writes text for people to stdout, [`printable`]: what a proposer, a worker or a diff holds
/// never reaches the terminal as an escape sequence (which could hide a line of a diff from
/// its reviewer). A closed pipe ends the program successfully.
pub(crate) fn out(text: &str) -> anyhow::Result<()> {
    out_raw(&printable(text))
}

/// Writes to stdout as is: JSON ([`json`] escapes what a terminal acts on) and the escape
/// sequences Atelier itself sends. A closed pipe ends the program successfully.
pub(crate) fn out_raw(text: &str) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    stdout.flush()?;
    Ok(())
}

/// Writes text for people to stderr, [`printable`] (use [`note!`] for a line). Never fails.
pub(crate) fn err_text(text: &str) {
    err_raw(&printable(text))
}

/// Writes to stderr as is: the live view's own escape sequences around printable lines. Never
/// fails.
pub(crate) fn err_raw(text: &str) {
    let mut stderr = std::io::stderr().lock();
    let _ = stderr.write_all(text.as_bytes());
    let _ = stderr.flush();
}

/// Prints a verdict and returns its exit code, whether or not anyone is still reading: a closed
/// stdout never changes what a gate, merge or audit decided.
pub(crate) fn verdict(
    code: ExitCode,
    print: impl FnOnce() -> anyhow::Result<()>,
) -> anyhow::Result<ExitCode> {
    match print() {
        Err(e) if is_broken_pipe(&e) => Ok(code),
        Err(e) => Err(e),
        Ok(()) => Ok(code),
    }
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Writes `value` as JSON: the exact text, with every character a terminal would act on or that
/// hides text escaped as `\uXXXX` (serde_json escapes only C0 controls; DEL, a C1 CSI or a
/// right-to-left override would go out raw to whoever reads `--json` on a terminal).
pub(crate) fn json<T: serde::Serialize>(value: &T) -> anyhow::Result<()> {
    out_raw(&format!(
        "{}\n",
        json_escaped(&serde_json::to_string_pretty(value)?)
    ))
}

/// `json` with each control character and each character that hides text escaped as `\uXXXX`
/// (UTF-16, a surrogate pair beyond the BMP): the same JSON value, since outside strings JSON
/// holds only ASCII punctuation and whitespace, which are left alone.
fn json_escaped(json: &str) -> String {
    let mut escaped = String::with_capacity(json.len());
    for c in json.chars() {
        if (c.is_control() && c != '\n') || crate::text::hides(c) {
            for unit in c.encode_utf16(&mut [0; 2]) {
                escaped.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            escaped.push(c);
        }
    }
    escaped
}

/// The gate's clock, announcing an override.
pub(crate) fn now() -> anyhow::Result<Timestamp> {
    Ok(now_announced()?)
}

/// [`now`], with the clock's own error.
pub(crate) fn now_announced() -> Result<Timestamp, crate::clock::ClockError> {
    let (t, source) = crate::clock::now()?;
    if source == crate::clock::Source::Override {
        note!(
            "note: the clock is set by {}={}",
            crate::clock::OVERRIDE_VAR,
            crate::governance::time::format_rfc3339(t)
        );
    }
    Ok(t)
}

pub(crate) fn dir(d: &Option<PathBuf>) -> PathBuf {
    d.clone().unwrap_or_else(|| PathBuf::from("."))
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let dir = dir(&cli.dir);
    if !matches!(
        cli.command,
        Command::Init(_) | Command::Keygen(_) | Command::Demo(_) | Command::Completions(_)
    ) {
        migrate_gate_key(&dir);
    }
    match cli.command {
        Command::Init(a) => init::init(&dir, a),
        Command::Keygen(a) => init::keygen(a),
        Command::Propose(a) => propose::propose(&dir, a),
        Command::Proposals(a) => propose::proposals(&dir, a),
        Command::Show(a) => show::show(&dir, a),
        Command::Approve(a) => approve::approve(&dir, a),
        Command::Review(a) => review::review(&dir, a),
        Command::Gate(a) => gate::gate(&dir, a),
        Command::Merge(a) => gate::merge(&dir, a),
        Command::Close(a) => gate::close(&dir, a),
        Command::Submit(a) => github::submit(&dir, a),
        Command::Serve(a) => github::serve(&dir, a),
        Command::Audit(a) => audit::audit(&dir, a),
        Command::GateKey(a) => init::gate_key(&dir, a),
        Command::Plan(a) => plan::plan(&dir, a),
        Command::Run(a) => run::run(&dir, a),
        Command::Status(a) => run::status(&dir, a),
        Command::Watch(a) => run::watch(&dir, a),
        Command::Clean(a) => run::clean(&dir, a),
        Command::Stats(a) => run::stats(&dir, a),
        Command::Bench(a) => bench::bench(&dir, a),
        Command::Ui(a) => ui::ui(&dir, a),
        Command::Control(a) => run::control(&dir, a),
        Command::Cycle(a) => cycle::cycle(&dir, a),
        Command::Validate(a) => run::validate(&dir, a),
        Command::Demo(a) => demo::demo(a),
        Command::Completions(a) => completions(a),
    }
}

/// The [`Classify`] view of one error of a chain, if its type is one of the crate's error
/// types. Every type that implements [`Classify`] is named here (a tidy test checks), so that an
/// error's kind, decided where it was made, reaches the edge whatever wrapped it.
fn classified<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a dyn Classify> {
    macro_rules! try_types {
        ($($t:ty),* $(,)?) => {
            $(if let Some(x) = e.downcast_ref::<$t>() { return Some(x); })*
        };
    }
    try_types!(
        crate::workflow::Error,
        crate::forge::ForgeError,
        crate::errors::Refusal,
        crate::audit::ledger::LedgerError,
        crate::audit::history::AuditError,
        crate::audit::checkpoint::CheckpointError,
        crate::agent::BackendError,
        crate::agent::contain::ContainError,
        crate::config::ConfigError,
        crate::keys::KeyError,
        crate::clock::ClockError,
        crate::fsutil::FsError,
        crate::git::GitError,
        crate::git::PatchError,
        crate::governance::token::SignatureError,
        crate::governance::token::TokenError,
        crate::governance::time::TimeError,
        crate::governance::policy::PolicyError,
        crate::governance::allowed_signers::AllowedSignersError,
        std::io::Error,
        git2::Error,
    );
    None
}

/// What kind of failure an error is, and where in its chain the line people read first sits:
/// the outermost error whose type knows its kind decides (a wrapper keeps its source's kind);
/// an error made here in `cli` (a usage problem) is bad input.
fn kind_of(err: &anyhow::Error) -> (Kind, usize) {
    err.chain()
        .enumerate()
        .find_map(|(i, e)| classified(e).map(|c| (c.kind(), i + c.refusal_at())))
        .unwrap_or((Kind::Input, 0))
}

/// The one match from a kind to an exit code: 1 refused, 2 bad input or a failure of what
/// Atelier relies on, 101 a bug (as a panic exits).
fn exit_code(kind: Kind) -> u8 {
    match kind {
        Kind::Refused(_) => 1,
        Kind::Input | Kind::Environment => 2,
        Kind::Internal => INTERNAL_EXIT,
    }
}

/// The exit code of an internal error: a panic in any thread, or a broken invariant.
const INTERNAL_EXIT: u8 = 101;

/// Parses arguments, runs the command and classifies the outcome into an exit code.
/// Moves a gate key an older version left in `.atelier/` out of the repository, saying so; a
/// failure leaves it where it is (it is still used there) and says why.
fn migrate_gate_key(dir: &std::path::Path) {
    let Ok(ws) = crate::workflow::Workspace::open(dir) else {
        return;
    };
    match crate::workflow::gatekey::migrate(&ws.repo, &ws.root, &ws.config) {
        Ok(Some(m)) => {
            note!(
                "note: moved the gate key out of the repository, from {} to {}: contained workers cannot read it there. Back it up (README, \"The gate key\").",
                m.from.display(),
                m.to.display()
            );
            if ws.config.gate.key.is_some() {
                note!("note: `[gate] key` in atelier.toml is no longer needed; remove it in your next constitution proposal.");
            }
        }
        Ok(None) => {}
        Err(e) => note!(
            "warning: the gate key stays in {} for now: {}",
            crate::workflow::gatekey::legacy(&ws.root, &ws.config).display(),
            crate::errors::chain(&e)
        ),
    }
}

pub fn main() -> ExitCode {
    // SAFETY: the first thing the process does, on its only thread: no thread uses libgit2 yet.
    unsafe { crate::audit::history::limit_object_cache() };
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    // A panic is a bug: it says so (the default hook has printed where) and exits 101.
    let err = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(cli))) {
        Ok(Ok(code)) => return code,
        Ok(Err(err)) => err,
        Err(_) => {
            note!("internal error: Atelier panicked (above); this is a bug, please report it with that output");
            return ExitCode::from(INTERNAL_EXIT);
        }
    };
    if is_broken_pipe(&err) {
        // Nobody is reading stdout any more: success (verdict commands never get here).
        return ExitCode::SUCCESS;
    }
    let (kind, at) = kind_of(&err);
    match kind {
        Kind::Refused(_) => {
            // The refusal itself (its text starts with its code), then what caused it, if
            // anything did.
            let mut chain = err.chain().skip(at);
            let first = chain.next().map(|r| r.to_string()).unwrap_or_default();
            note!("refused: {first}");
            print_causes(&first, chain);
            if let Kind::Refused(code) = kind {
                if let Some(next) = code.next_step() {
                    note!("next: {next} ({})", code.documented_at());
                }
            }
        }
        Kind::Input | Kind::Environment => {
            note!("error: {err}");
            print_causes(&err.to_string(), err.chain().skip(1));
        }
        Kind::Internal => {
            note!("internal error: {err}");
            print_causes(&err.to_string(), err.chain().skip(1));
            note!("this is a bug in Atelier: please report it with the output above");
        }
    }
    ExitCode::from(exit_code(kind))
}

/// Each cause under an error once: a wrapper that shows its source's words (a library's error
/// around another library's) would otherwise repeat the same line.
fn print_causes<'a>(
    first: &str,
    causes: impl Iterator<Item = &'a (dyn std::error::Error + 'static)>,
) {
    let mut last = first.to_string();
    for cause in causes {
        let text = cause.to_string();
        if text != last {
            note!("  caused by: {text}");
        }
        last = text;
    }
}
