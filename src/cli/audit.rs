//! `atelier audit log | show | verify`.

use std::path::Path;
use std::process::ExitCode;

use clap::{Args, Subcommand};

use super::{json, out};
use crate::audit::history;
use crate::audit::ledger::Event;
use crate::workflow::Workspace;

#[derive(Subcommand, Debug)]
pub enum AuditCommand {
    /// The ledger, one line per event.
    Log(LogArgs),
    /// One proposal's full story: record, tokens and signers, gate decisions, merge.
    Show(ShowArgs),
    /// Verify offline that every change since adoption went through the gate, and the ledger is intact.
    Verify(VerifyArgs),
}

#[derive(Args, Debug)]
pub struct LogArgs {
    /// Print the result as JSON (one document on stdout) instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
pub struct ShowArgs {
    /// The proposal id.
    pub(super) id: String,
    /// Print the result as JSON (one document on stdout) instead of text.
    #[arg(long)]
    pub(super) json: bool,
}

#[derive(Args, Debug)]
pub struct VerifyArgs {
    /// Print the result as JSON (one document on stdout) instead of text.
    #[arg(long)]
    json: bool,
    /// Threads for signature verification (default: all cores).
    #[arg(long)]
    jobs: Option<usize>,
    /// The protected branch to audit (default: the one in atelier.toml).
    #[arg(long)]
    branch: Option<String>,
    /// The adoption commit you recorded earlier; a different one is a finding.
    #[arg(long, value_name = "sha")]
    adoption: Option<String>,
}

pub fn audit(dir: &Path, cmd: AuditCommand) -> anyhow::Result<ExitCode> {
    let ws = Workspace::open(dir)?;
    match cmd {
        AuditCommand::Log(a) => log(&ws, a),
        AuditCommand::Show(a) => show(&ws, a),
        AuditCommand::Verify(a) => verify(&ws, a),
    }
}

pub(super) fn summary(e: &Event) -> String {
    match e {
        Event::Adopted { branch, commit } => format!("{branch} adopted at {commit}"),
        Event::ProposalOpened {
            title,
            head,
            proposer,
            ..
        } => {
            format!(
                "\"{title}\" head {} by {}",
                short(head),
                proposer.as_deref().unwrap_or("?")
            )
        }
        Event::TokenRecorded { comment, .. } => format!("token recorded (comment {comment})"),
        Event::GateDecision {
            allowed,
            unmet,
            approvers,
            ..
        } => {
            if *allowed {
                format!("gate allowed (approvers: {})", approvers.join(", "))
            } else {
                format!("gate refused ({})", unmet.join(", "))
            }
        }
        Event::MergeStarted(m) => format!("merge started: {}", m.commit),
        Event::MergeAborted { commit, reason, .. } => format!("merge {commit} aborted: {reason}"),
        Event::Merged(m) => format!("merged as {}", m.commit),
        Event::Closed { reason, .. } => format!(
            "closed ({})",
            reason.as_deref().unwrap_or("no reason given")
        ),
        Event::MergeRequested { pull, head, .. } => format!(
            "merge of pull request #{pull} requested (head {})",
            short(head)
        ),
        Event::Submitted { pull, url, .. } => format!("submitted as pull request #{pull} ({url})"),
        Event::ReviewRecorded { review, .. } => format!(
            "review panel: {} ({} finding(s)) for head {}",
            review.verdict.as_str(),
            review.findings.len(),
            short(&review.head)
        ),
        Event::Alarm { code, detail, .. } => format!("ALARM {code}: {detail}"),
        Event::MetricRegistered {
            metric,
            reason,
            head,
            seeds,
            ..
        } => metric_line(metric.as_deref(), reason, head, *seeds),
        Event::EvidenceRecorded {
            head,
            outcome,
            delta,
            ..
        } => format!(
            "evidence recorded at {}: {outcome}{}",
            short(head),
            delta
                .as_deref()
                .map(|d| format!(" ({d})"))
                .unwrap_or_default()
        ),
        Event::GateKeyRotated {
            proposal,
            commit,
            key,
            recovered,
        } => key_line(proposal, commit, key, *recovered),
    }
}

/// A commit id's first 12 characters, as the log shows them.
fn short(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}

/// A `gate-key-rotated` entry: which key signs the checkpoints from here on.
fn key_line(proposal: &str, commit: &str, key: &str, recovered: bool) -> String {
    format!(
        "gate key {} by proposal {proposal} (merge {}): later checkpoints are signed by {}",
        if recovered {
            "RECOVERED (the old key was lost)"
        } else {
            "rotated"
        },
        short(commit),
        crate::workflow::key_fingerprint(key)
    )
}

/// A `metric-registered` entry: the metric named before the benchmark ran, or why none was.
fn metric_line(metric: Option<&str>, reason: &str, head: &str, seeds: u64) -> String {
    match metric {
        Some(m) => format!(
            "metric pre-registered: {m} ({seeds} seed(s)) for head {}: {reason}",
            short(head)
        ),
        None => format!("no metric registered for head {}: {reason}", short(head)),
    }
}

pub(super) fn kind(e: &Event) -> &'static str {
    match e {
        Event::Adopted { .. } => "adopted",
        Event::ProposalOpened { .. } => "proposal-opened",
        Event::TokenRecorded { .. } => "token-recorded",
        Event::GateDecision { .. } => "gate-decision",
        Event::MergeStarted(_) => "merge-started",
        Event::MergeAborted { .. } => "merge-aborted",
        Event::Merged(_) => "merged",
        Event::Closed { .. } => "closed",
        Event::Submitted { .. } => "submitted",
        Event::MergeRequested { .. } => "merge-requested",
        Event::ReviewRecorded { .. } => "review-recorded",
        Event::Alarm { .. } => "alarm",
        Event::MetricRegistered { .. } => "metric-registered",
        Event::EvidenceRecorded { .. } => "evidence-recorded",
        Event::GateKeyRotated { .. } => "gate-key-rotated",
    }
}

fn log(ws: &Workspace, a: LogArgs) -> anyhow::Result<ExitCode> {
    let entries = history::entries(&ws.repo)?;
    if !a.json {
        super::note!("(the ledger's entries as stored; `atelier audit verify` checks their signatures and history)");
    }
    if a.json {
        json(&entries)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut t = String::new();
    for e in &entries {
        t.push_str(&format!(
            "{:>5} {} {:<16} {:<4} {}\n",
            e.seq,
            e.at,
            kind(&e.event),
            e.event.proposal().unwrap_or("-"),
            summary(&e.event)
        ));
    }
    if entries.is_empty() {
        t.push_str("(the ledger is empty: nothing has been proposed yet)\n");
    }
    out(&t)?;
    Ok(ExitCode::SUCCESS)
}

#[derive(serde::Serialize)]
struct Story {
    proposal: String,
    events: Vec<crate::audit::ledger::Entry>,
    tokens: Vec<history::TokenStory>,
    merge_commit: Option<String>,
}

pub(super) fn show(ws: &Workspace, a: ShowArgs) -> anyhow::Result<ExitCode> {
    let entries: Vec<_> = history::entries(&ws.repo)?
        .into_iter()
        .filter(|e| e.event.proposal() == Some(a.id.as_str()))
        .collect();
    if entries.is_empty() {
        anyhow::bail!(
            "the ledger has no proposal `{}`: `atelier audit log` lists what it has",
            a.id
        );
    }
    let tokens: Vec<history::TokenStory> = entries
        .iter()
        .filter_map(|e| match &e.event {
            Event::TokenRecorded { token, .. } => {
                Some(history::explain_token(&ws.repo, e.seq, &e.at, token))
            }
            _ => None,
        })
        .collect();
    let merge_commit = entries.iter().find_map(|e| match &e.event {
        Event::Merged(m) => Some(m.commit.clone()),
        _ => None,
    });
    let story = Story {
        proposal: a.id.clone(),
        events: entries,
        tokens,
        merge_commit,
    };
    if a.json {
        json(&story)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut t = format!("proposal {}\n\nhistory:\n", story.proposal);
    for e in &story.events {
        t.push_str(&format!(
            "  {:>5} {} {:<16} {}\n",
            e.seq,
            e.at,
            kind(&e.event),
            summary(&e.event)
        ));
    }
    t.push_str("\ntokens:\n");
    if story.tokens.is_empty() {
        t.push_str("  none\n");
    }
    for tok in &story.tokens {
        t.push_str(&format!(
            "  entry {}: {} by {} ({}), signature {}\n",
            tok.seq,
            tok.decision.as_deref().unwrap_or("?"),
            tok.principal.as_deref().unwrap_or("an unknown key"),
            tok.fingerprint.as_deref().unwrap_or("-"),
            tok.signature
        ));
    }
    t.push_str(&format!(
        "\nmerge commit: {}\n",
        story.merge_commit.as_deref().unwrap_or("not merged")
    ));
    out(&t)?;
    Ok(ExitCode::SUCCESS)
}

fn verify(ws: &Workspace, a: VerifyArgs) -> anyhow::Result<ExitCode> {
    let jobs = a.jobs.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    let branch = a.branch.clone().unwrap_or_else(|| ws.branch().to_string());
    let mut r = history::verify(
        &ws.repo,
        &ws.config.forge.repository,
        &branch,
        jobs,
        history::Memory::Record,
    )?;
    if let Some(pin) = &a.adoption {
        history::check_adoption_pin(&mut r, pin);
    }
    let code = if r.findings.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    };
    super::verdict(code, || {
        if a.json {
            return json(&r);
        }
        let mut t = format!(
                "audit of {} since adoption at {}\n  commits checked:      {}\n  merges verified:      {}\n  signatures verified:  {}\n  ledger entries:       {}{}\n  checkpoints verified: {}\n",
                r.branch,
                r.adoption.as_deref().unwrap_or("(never adopted)"),
                r.commits_checked,
                r.merges_verified,
                r.signatures_verified,
                r.ledger_entries,
                r.ledger_root
                    .as_deref()
                    .map(|root| format!(" (root {root})"))
                    .unwrap_or_default(),
                r.checkpoints_verified
            );
        if !r.gate_keys.is_empty() {
            t.push_str("\ngate key history:\n");
            for line in &r.gate_keys {
                t.push_str(&format!("  {line}\n"));
            }
        }
        if r.findings.is_empty() {
            t.push_str(
                "\nresult: OK — every change went through the gate and the ledger is intact\n",
            );
        } else {
            t.push_str(&format!("\nfindings ({}):\n", r.findings.len()));
            for f in &r.findings {
                t.push_str(&format!("  {}: {}\n", f.code, f.detail));
            }
            t.push_str("\nresult: FAILED\n");
        }
        out(&t)
    })
}
