//! The contract validator's adversarial read: when `[roles.validator]` is configured, before a
//! new run starts, the validator (a model) reads the plans — the contracts only, never a
//! worker's prompt or transcript — and is asked which criterion could pass without the goal
//! being met, and which check could exit 0 without its criterion holding. It answers like an
//! agent reviewer (`governance::review::answer`); `approve` lets the run start, anything else
//! refuses it (`E_CONTRACT_REJECTED`), and so does an answer that cannot be read (fail closed).
//! The prompt is `prompts/validator.j2` as the protected branch holds it, else
//! [`DEFAULT_TEMPLATE`].

use minijinja::{Environment, UndefinedBehavior};
use serde::Serialize;

use crate::agent;
use crate::git;
use crate::governance::review::answer::{self, Answer};
use crate::governance::review::{Severity, Verdict};
use crate::workflow::error::Result;
use crate::workflow::Workspace;

/// The role that validates contracts.
pub const ROLE: &str = "validator";

/// The default validator prompt: Atelier's own `prompts/validator.j2`.
pub const DEFAULT_TEMPLATE: &str = include_str!("../../prompts/validator.j2");

#[derive(Serialize)]
struct PlanText<'a> {
    name: &'a str,
    text: &'a str,
}

#[derive(Serialize)]
struct Input<'a> {
    goal: &'a str,
    plans: Vec<PlanText<'a>>,
    schema: &'a str,
}

/// What the validator said about the contracts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Validated {
    pub verdict: Verdict,
    /// One line per finding: `severity category: message (hint)`.
    pub findings: Vec<String>,
}

impl Validated {
    pub fn accepted(&self) -> bool {
        self.verdict == Verdict::Approve
    }
}

fn bad(what: String) -> crate::workflow::Error {
    crate::workflow::Error::Input(what)
}

/// Renders the validator's prompt for `plan_files` (`(name, text)` pairs; each shown by its
/// file name) and the goal they serve, when a person gave one (`""` otherwise).
pub fn prompt(template: &str, plan_files: &[(String, String)], goal: &str) -> Result<String> {
    let input = Input {
        goal,
        plans: plan_files
            .iter()
            .map(|(n, t)| PlanText {
                name: n.rsplit('/').next().unwrap_or(n),
                text: t,
            })
            .collect(),
        schema: answer::SCHEMA,
    };
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.set_auto_escape_callback(|_| minijinja::AutoEscape::None);
    env.add_template("validator", template).map_err(|e| {
        bad(format!(
            "prompts/validator.j2 (as the protected branch holds it): {e}; fix it with a proposal"
        ))
    })?;
    env.get_template("validator")
        .and_then(|t| t.render(minijinja::value::Serde(&input)))
        .map_err(|e| bad(format!("prompts/validator.j2 (as the protected branch holds it): {e}; fix it with a proposal")))
}

/// Reads the validator's answer; one that cannot be read rejects the contracts.
pub fn judge(text: &str) -> Validated {
    // An answer that states a verdict twice (quoting the plan it judges, say) is ambiguous:
    // the reader would take the last one, which the plan's author may have written.
    if text.matches("\"verdict\"").count() > 1 {
        return Validated {
            verdict: Verdict::Block,
            findings: vec![
                "blocking ambiguous-answer: the validator's answer holds more than one verdict"
                    .into(),
            ],
        };
    }
    match answer::parse_answer(ROLE, text) {
        Ok(Answer { verdict, findings }) => Validated {
            verdict,
            findings: findings
                .iter()
                .map(|f| {
                    let severity = match f.severity {
                        Severity::Blocking => "blocking",
                        Severity::Major => "major",
                        Severity::Minor => "minor",
                    };
                    format!("{severity} {}: {} ({})", f.category, f.message, f.hint)
                })
                .collect(),
        },
        Err(why) => Validated {
            verdict: Verdict::Block,
            findings: vec![format!(
                "blocking unreadable-answer: the validator's answer could not be read ({why})"
            )],
        },
    }
}

/// Asks the validator about `plan_files`; `None` when no `[roles.validator]` is configured.
pub fn validate(
    ws: &Workspace,
    plan_files: &[(String, String)],
    goal: Option<&str>,
    now: i64,
) -> Result<Option<Validated>> {
    let Some(role) = ws.config.roles.get(ROLE) else {
        return Ok(None);
    };
    let backend = agent::backend(ROLE, role).map_err(|e| bad(e.to_string()))?;
    let repo = &ws.repo;
    let tip = git::branch_tip(repo, ws.branch())?;
    let tree = repo.find_commit(tip)?.tree()?;
    let template = agent::prompt::text_on_branch(repo, &tree, "prompts/validator.j2", ws.branch())?
        .unwrap_or_else(|| DEFAULT_TEMPLATE.to_string());
    let text = prompt(&template, plan_files, goal.unwrap_or(""))?;
    let timeout = ws.config.review.timeout.duration();
    // The validator sees the contracts only: no worktree, an empty directory.
    Ok(Some(
        match super::planner::ask(ws, ROLE, &backend, &text, timeout, now, None) {
            Ok(reply) => judge(&reply),
            Err(e) => Validated {
                verdict: Verdict::Block,
                findings: vec![format!(
                    "blocking validator-failed: the validator did not answer ({e})"
                )],
            },
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approve_accepts_anything_else_or_an_unreadable_answer_rejects() {
        assert!(judge(r#"{"verdict": "approve", "findings": []}"#).accepted());
        let r = judge(
            r#"{"verdict": "revise", "findings": [{"severity": "major", "category": "weak-check", "message": "grep passes on a comment", "hint": "run the function"}]}"#,
        );
        assert!(!r.accepted());
        assert_eq!(
            r.findings,
            ["major weak-check: grep passes on a comment (run the function)"]
        );
        let u = judge("looks fine to me");
        assert!(!u.accepted() && u.findings[0].contains("unreadable-answer"));
    }

    #[test]
    fn the_prompt_holds_the_contracts_and_the_answer_format() {
        let p = prompt(
            DEFAULT_TEMPLATE,
            &[("/x/p.toml".into(), "[plan]\nid = \"p\"\n".into())],
            "Make it fast",
        )
        .expect("renders");
        assert!(p.contains("--- p.toml\n[plan]") && p.contains("\"verdict\""));
        assert!(p.contains("Make it fast") && !p.contains("/x/"));
    }
}
