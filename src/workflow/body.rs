//! What forges show of a proposal, written once for every forge: the pull request's body (the
//! proposal record, its contract and evidence, the files it changes and the panel's verdict,
//! from a minijinja template the protected branch holds) and the gate's summary of an
//! evaluation. A forge that shows them (`Forge::shows_body`) is handed the text and applies its
//! own size limits.

use git2::Oid;

use super::{Error, Evaluation, Result, Workspace};
use crate::audit::view::LedgerView;
use crate::forge::{GateStatus, PullRequest};
use crate::git;
use crate::text::clip;

/// The pull-request body template, Atelier's own `prompts/pull_request.j2`; a repository may
/// replace it with its own.
pub const DEFAULT_TEMPLATE: &str = include_str!("../../prompts/pull_request.j2");

/// Where a repository keeps its own pull-request body template (read from the protected branch).
pub const TEMPLATE: &str = "prompts/pull_request.j2";

/// The gate's summary of an evaluation, where a forge shows one (GitHub: one comment it keeps up
/// to date): every requirement met or unmet, the panel's verdict and what the gate made of each
/// token. Bounded: at most 30 findings and 50 tokens from listed keys are listed.
pub fn summary(eval: &Evaluation) -> String {
    let d = &eval.decision;
    let (state, _) = super::status_for(eval);
    let verdict = match state {
        GateStatus::Success => "✅ may merge",
        GateStatus::Pending => "⏳ waiting for approvals",
        _ => "❌ refused",
    };
    let mut t = format!(
        "### Atelier gate: {verdict}\n\nProposal `{}` · head `{}` onto `{}` at `{}` · merge tree `{}`\n\n**Requirements**\n\n",
        eval.pull.proposal,
        eval.change.head,
        eval.pull.base_branch,
        eval.change.base,
        eval.merge_tree.map(|t| t.to_string()).unwrap_or_else(|| "none (conflict)".into()),
    );
    for r in &d.requirements {
        t.push_str(&format!(
            "- {} `{}` {}",
            if r.met { "✅" } else { "❌" },
            r.code,
            r.summary.replace('\n', " ")
        ));
        if !r.met {
            t.push_str(&format!(
                " — expected: {}; found: {}",
                clip(&r.expected, 300),
                clip(&r.found, 300)
            ));
        }
        t.push('\n');
    }
    let rv = &d.review;
    t.push_str(&format!(
        "\n**Review panel: {}** (recorded verdict: {}){}\n\n",
        rv.verdict.map_or("unreadable", |v| v.as_str()),
        rv.recorded,
        if rv.overruled_by.is_empty() {
            String::new()
        } else {
            format!(
                "; overruled by the constitution quorum ({})",
                rv.overruled_by.join(", ")
            )
        }
    ));
    if rv.findings.is_empty() {
        t.push_str("- no findings\n");
    }
    const FINDINGS_MAX: usize = 30;
    for f in rv.findings.iter().take(FINDINGS_MAX) {
        t.push_str(&format!("- {}\n", clip(&finding_line(f), 500)));
    }
    if rv.findings.len() > FINDINGS_MAX {
        t.push_str(&format!(
            "- … and {} more (`atelier gate --pr N` lists them all)\n",
            rv.findings.len() - FINDINGS_MAX
        ));
    }
    t.push_str("\n**Tokens**\n\n");
    if d.tokens.is_empty() {
        t.push_str("- none yet\n");
    }
    // Tokens from listed keys one by one (a bounded number); the rest only counted, so no
    // amount of junk in comments can push the summary past GitHub's size limit.
    const LISTED_MAX: usize = 50;
    let (known, unknown): (Vec<_>, Vec<_>) = d.tokens.iter().partition(|r| r.principal.is_some());
    if known.len() > LISTED_MAX {
        t.push_str(&format!(
            "- ({} tokens from listed keys; the first {LISTED_MAX} follow)\n",
            known.len()
        ));
    }
    if !unknown.is_empty() {
        let mut codes: Vec<&str> = unknown.iter().map(|r| r.code_text()).collect();
        codes.sort();
        codes.dedup();
        t.push_str(&format!(
            "- {} token(s) not from a key allowed_signers lists: {}\n",
            unknown.len(),
            codes.join(", ")
        ));
    }
    for r in known.into_iter().take(LISTED_MAX) {
        t.push_str(&format!(
            "- {} {}: {}{}\n",
            r.principal.as_deref().unwrap_or("unknown signer"),
            r.decision.map(|v| v.as_str()).unwrap_or("?"),
            if r.counted { "counted" } else { r.code_text() },
            if r.counted || r.detail.is_empty() {
                String::new()
            } else {
                format!(" ({})", r.detail.replace('\n', " "))
            }
        ));
    }
    // No timestamp: an unchanged evaluation leaves the comment as it is (an edit would be
    // delivered as another `issue_comment` event).
    t.push_str(
        "\nOnly signed tokens count: GitHub reviews, labels, comment authors and other statuses carry no authority. This comment is rewritten when the evaluation changes.\n",
    );
    t
}

/// The pull request's body: the proposal record, its contract and evidence (carried in the
/// record's rationale), the files it changes and the panel's verdict when there is one.
pub fn render(
    ws: &Workspace,
    view: &LedgerView,
    pull: &PullRequest,
    base: Oid,
    head: Oid,
) -> Result<String> {
    let repo = &ws.repo;
    let head_tree = repo.find_commit(head)?.tree()?;
    let base_tree = repo.find_commit(repo.merge_base(base, head)?)?.tree()?;
    let files = git::changed_paths(repo, &base_tree, &head_tree)?;
    let record_path = format!("{}/proposal.toml", pull.record);
    let record: toml::Table = git::read_file(repo, &head_tree, &record_path)?
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|t| t.parse().ok())
        .unwrap_or_default();
    let status = super::cycle::status(ws, view, &pull.proposal, &pull.record, head)?;
    // The template as the protected branch holds it, like every prompt: reviewed text, never
    // the operator's uncommitted edit nor the proposal's own version of it (whatever `base`
    // a caller passes).
    let base_tip = repo
        .find_commit(git::branch_tip(repo, ws.branch())?)?
        .tree()?;
    let context = serde_json::json!({
        "proposal": record,
        "record_path": record_path,
        "base": base.to_string(),
        "head": head.to_string(),
        "files": files,
        "verdict": review_section(view, &pull.proposal, head),
        "evidence": evidence_section(status.as_ref()),
        "caveat": caveat(view, &pull.proposal, head, status.as_ref()),
    });
    let render = |template: &str| -> std::result::Result<String, String> {
        let mut env = minijinja::Environment::new();
        env.set_auto_escape_callback(|_| minijinja::AutoEscape::None);
        env.add_template("body", template)
            .and_then(|_| {
                env.get_template("body")?
                    .render(minijinja::value::Serde(&context))
            })
            .map_err(|e| format!("{TEMPLATE} on {}: not a valid template: {e}", ws.branch()))
    };
    let ours = match git::text_on_branch(repo, &base_tip, TEMPLATE, ws.branch()) {
        Ok(t) => Ok(t),
        Err(git::GitError::NotText(why)) => Err(why),
        Err(e) => return Err(e.into()),
    };
    let body = match ours.and_then(|t| t.map(|t| render(&t)).transpose()) {
        Ok(Some(body)) => body,
        Ok(None) => render(DEFAULT_TEMPLATE).map_err(Error::Input)?,
        // A broken template shows only once merged: it must not stop every later pull request,
        // the one that fixes it included. Atelier's own template stands in, saying why.
        Err(why) => format!(
            "> **Warning:** {why}. Atelier's built-in template is shown instead until a proposal fixes it.\n\n{}",
            render(DEFAULT_TEMPLATE).map_err(Error::Input)?,
            why = why.replace('\n', " ")
        ),
    };
    Ok(body)
}

/// Shows a newly recorded review verdict where the forge shows the proposal: the body of its
/// submitted pull request, re-rendered. The clone's record is anyone's to edit: its branches
/// are checked against the configuration and the ledger, as every other reader of it does.
pub(super) fn publish_review(ws: &Workspace, view: &LedgerView, record: PullRequest) -> Result<()> {
    if !ws.forge.shows_body() || view.submitted_pulls(&record.proposal).is_empty() {
        return Ok(());
    }
    let (pull, base, head) = ws.checked_record(view, record)?;
    let body = render(ws, view, &pull, base, head)?;
    Ok(ws.forge.publish_review(view, &pull, &body)?)
}

/// The evidence section: the evidence the ledger bound, rendered from its evidence.json (never
/// the record's evidence.md as the branch has it now), with every reason to distrust it.
fn evidence_section(status: Option<&super::cycle::Status>) -> Option<String> {
    let s = status?;
    let mut t = String::new();
    for w in &s.warnings {
        t.push_str(&format!("> **Warning:** {w}\n\n"));
    }
    match &s.evidence {
        Some(e) => t.push_str(&e.markdown()),
        None => t.push_str("No evidence the ledger recorded can be shown.\n"),
    }
    Some(t)
}

/// What the body must say first about a proposal submitted although the panel blocks it (its
/// verdict recorded for this head), or although its evidence, as the ledger recorded it, shows
/// a regression or a failed validator (`atelier cycle --submit-anyway`) — whatever was pushed
/// since.
fn caveat(
    view: &LedgerView,
    proposal: &str,
    head: Oid,
    status: Option<&super::cycle::Status>,
) -> Option<String> {
    let head = head.to_string();
    let mut why = Vec::new();
    if let Some((r, _)) = view.recorded_summary(proposal) {
        if r.head == head && r.verdict == crate::governance::review::Verdict::Block {
            why.push("the review panel BLOCKS it".to_string());
        }
    }
    if let Some(s) = status {
        why.extend(s.objections.iter().cloned());
    }
    (!why.is_empty()).then(|| {
        format!(
            "submitted although {} (see below). The gate still needs every approval it needs; a blocking panel verdict needs the constitution quorum.",
            why.join(", ")
        )
    })
}

/// The body's "Review panel" text: the verdict the ledger recorded for this head, or what to do.
fn review_section(view: &LedgerView, proposal: &str, head: Oid) -> String {
    match view.recorded_summary(proposal) {
        Some((r, summary)) if r.head == head.to_string() => format!(
            "{summary}\n\nRecorded for base `{}` and this head. The gate re-runs the built-in reviewers at every evaluation; its summary comment has the verdict in force.",
            r.base
        ),
        _ => "No panel verdict recorded for this head yet (`atelier review --pr N` records one). The gate re-runs the built-in reviewers at every evaluation; its summary comment shows their findings.".to_string(),
    }
}

/// One finding on one line: `[severity] reviewer file:line: message (hint: …)`.
pub fn finding_line(f: &crate::governance::review::Finding) -> String {
    use crate::governance::review::Severity;
    let sev = match f.severity {
        Severity::Blocking => "BLOCKING",
        Severity::Major => "major",
        Severity::Minor => "minor",
    };
    let at = match (&f.file, f.line) {
        (Some(file), Some(line)) => format!(" {file}:{line}"),
        (Some(file), None) => format!(" {file}"),
        _ => String::new(),
    };
    format!(
        "[{sev}] {}{at}: {} (hint: {})",
        f.reviewer,
        f.message.replace('\n', " "),
        f.hint.replace('\n', " ")
    )
}
