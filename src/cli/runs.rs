//! What `atelier run`, `status` and the cockpit share about a run: one line for each event
//! worth showing an operator, and the control requests left for a run's conductor. Both
//! `cli/run.rs` and `cli/cockpit.rs` call here; this module calls neither, and talks only to
//! `swarm::events` and the run's `control/` directory (`swarm::runtime`).

use crate::swarm::events::RunEvent;
use crate::swarm::runtime;
use crate::workflow::Workspace;

/// One line for an event worth showing an operator (`run`'s progress, the cockpit's tail).
pub(super) fn describe(event: &RunEvent, run: &str) -> Option<String> {
    describe_raw(event, run).map(|l| super::printable(&l).replace('\n', " "))
}

/// [`describe`] before it is made printable: the run's own events, then an attempt's, then a
/// task's and the operators' controls.
fn describe_raw(event: &RunEvent, run: &str) -> Option<String> {
    run_line(event, run)
        .or_else(|| attempt_line(event))
        .or_else(|| task_line(event))
}

/// A line for the run starting, resuming or finishing.
fn run_line(event: &RunEvent, run: &str) -> Option<String> {
    use RunEvent as E;
    match event {
        E::RunStarted { branch, .. } => Some(format!("run {run}: started on {branch}")),
        E::RunResumed { .. } => Some(format!("run {}: resumed", run)),
        E::RunFinished {
            succeeded,
            failed,
            blocked,
            skipped,
        } => Some(format!(
            "run {run}: finished: {succeeded} succeeded, {failed} failed, {blocked} blocked{}",
            if *skipped > 0 {
                format!(", {skipped} skipped")
            } else {
                String::new()
            }
        )),
        _ => None,
    }
}

/// A line for what happened within one attempt: started, silent, a step, how it ended.
fn attempt_line(event: &RunEvent) -> Option<String> {
    use RunEvent as E;
    match event {
        E::AttemptStarted {
            task,
            attempt,
            role,
            ..
        } => Some(format!(
            "{task}: attempt {attempt} started{}",
            role.as_deref()
                .map(|r| format!(" ({r})"))
                .unwrap_or_default()
        )),
        E::Nudged {
            task,
            attempt,
            silent_secs,
            ..
        } => Some(format!(
            "{task}: attempt {attempt} silent for {silent_secs}s (nudged)"
        )),
        E::Restarted {
            task,
            attempt,
            silent_secs,
            ..
        } => Some(format!(
            "{task}: attempt {attempt} silent for {silent_secs}s: restarted"
        )),
        E::StepFinished {
            task,
            attempt,
            step,
            passed,
            ms,
            secs,
        } => Some(format!(
            "{task}: attempt {attempt} step {step} {} ({:.1}s)",
            if *passed { "passed" } else { "FAILED" },
            ms.map_or(*secs as f64, |m| m as f64 / 1000.0)
        )),
        E::AttemptFailed {
            task,
            attempt,
            reason,
            ..
        } => Some(format!("{task}: attempt {attempt} failed: {reason}")),
        E::AttemptPassed { task, attempt, .. } => Some(format!("{task}: attempt {attempt} passed")),
        _ => None,
    }
}

/// A line for a task integrated, failed or blocked, and for an operator's control.
fn task_line(event: &RunEvent) -> Option<String> {
    use RunEvent as E;
    match event {
        E::Integrated { task, .. } => Some(format!("{task}: integrated")),
        E::TaskFailed { task, reason } => Some(format!("{task}: FAILED: {reason}")),
        E::TaskBlocked { task, by } => Some(format!("{task}: blocked by {by}")),
        E::BudgetReached {
            scope,
            measure,
            limit,
            used,
        } => Some(format!(
            "budget: {scope} reached its {measure} ceiling ({limit}; {used} used)"
        )),
        E::Control {
            action,
            task,
            by,
            applied,
            detail,
        } => Some(format!(
            "control: {by} asked to {action}{}: {}",
            task.as_deref().map(|t| format!(" {t}")).unwrap_or_default(),
            if *applied {
                "applied".to_string()
            } else {
                format!("not applied ({detail})")
            }
        )),
        _ => None,
    }
}

/// Leaves a control for run `run`'s conductor in its `control/` directory, as who is asking
/// (the repository's `user.email`, else `$USER`).
pub(super) fn send_control(
    ws: &Workspace,
    run: &str,
    action: &str,
    task: Option<&str>,
) -> anyhow::Result<()> {
    let by = ws
        .repo
        .config()
        .ok()
        .and_then(|c| c.get_string("user.email").ok())
        .or_else(|| std::env::var("USER").ok())
        .unwrap_or_else(|| "unknown".into());
    let request = runtime::ControlRequest {
        action: action.to_string(),
        task: task.map(str::to_string),
        by,
    };
    let ctl = runtime::run_dir(ws, run).join(runtime::CONTROL_DIR);
    // Named to sort by when it was asked, and never to collide (the clock read quietly: the
    // cockpit calls this with its screen up).
    let stamp = crate::clock::now().map(|(t, _)| t).unwrap_or(0);
    let mut nonce = [0u8; 6];
    rand_core::RngCore::fill_bytes(&mut rand_core::OsRng, &mut nonce);
    let file = ctl.join(format!("{stamp:012}-{}.json", hex::encode(nonce)));
    crate::fsutil::atomic_write(&file, &serde_json::to_vec(&request)?)?;
    Ok(())
}
