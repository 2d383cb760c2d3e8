//! Plans: a TOML file of tasks with dependencies, exclusive file claims and a validation contract
//! each, and the contract validator behind `atelier plan check`.
//!
//! Pure: callers pass file names and text; the validator returns refusals as values, naming the
//! file, the task and the field. The dependency graph's cycles are found here; scheduling
//! questions (waves, claims) live in `schedule`, which reads plans and never the reverse.

use std::collections::{BTreeMap, BTreeSet};

use globset::{GlobBuilder, GlobMatcher};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::governance::Code;

/// A plan file as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPlanFile {
    plan: RawPlanHeader,
    #[serde(default, rename = "task")]
    tasks: Vec<RawTask>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPlanHeader {
    id: String,
    title: String,
    #[serde(default)]
    max_parallel: Option<usize>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTask {
    id: String,
    title: String,
    role: String,
    goal: String,
    #[serde(default)]
    files: Vec<String>,
    #[serde(default)]
    reads: Vec<String>,
    #[serde(default)]
    depends_on: Vec<String>,
    contract: Option<RawContract>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawContract {
    #[serde(default)]
    criteria: Vec<String>,
    #[serde(default)]
    checks: Vec<String>,
}

/// What "done" means for a task: prose for reviewers and commands that must exit 0.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Contract {
    pub criteria: Vec<String>,
    pub checks: Vec<String>,
}

/// One unit of work, with its plan-qualified id (`17:T1`).
#[derive(Debug, Clone, Serialize)]
pub struct Task {
    /// `plan:task`.
    pub key: String,
    pub plan: String,
    pub id: String,
    pub title: String,
    pub role: String,
    pub goal: String,
    /// Exclusive claims: paths or globs this task may write.
    pub files: Vec<String>,
    /// Context the worker may be shown; no claim.
    pub reads: Vec<String>,
    /// Plan-qualified dependencies.
    pub depends_on: Vec<String>,
    pub contract: Contract,
}

/// A parsed plan.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    pub file: String,
    pub id: String,
    pub title: String,
    pub max_parallel: Option<usize>,
    pub tasks: Vec<Task>,
}

/// A file that is not a plan at all (exit 2).
#[derive(Debug, Error)]
#[error("{file}: {reason}")]
pub struct PlanFileError {
    pub file: String,
    pub reason: String,
}

/// One reason the validator refuses a set of plans (exit 1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Refusal {
    pub code: Code,
    pub file: String,
    pub task: Option<String>,
    pub field: Option<String>,
    pub message: String,
}

/// Parses one plan file.
pub fn parse(file: &str, text: &str) -> Result<Plan, PlanFileError> {
    let raw: RawPlanFile = toml::from_str(text).map_err(|e| PlanFileError {
        file: file.to_string(),
        reason: e.to_string().trim_end().to_string(),
    })?;
    let plan_id = raw.plan.id.clone();
    let tasks = raw
        .tasks
        .into_iter()
        .map(|t| Task {
            key: format!("{plan_id}:{}", t.id),
            plan: plan_id.clone(),
            depends_on: t
                .depends_on
                .iter()
                .map(|d| {
                    if d.contains(':') {
                        d.clone()
                    } else {
                        format!("{plan_id}:{d}")
                    }
                })
                .collect(),
            id: t.id,
            title: t.title,
            role: t.role,
            goal: t.goal,
            files: t.files,
            reads: t.reads,
            contract: t.contract.map_or(
                Contract {
                    criteria: Vec::new(),
                    checks: Vec::new(),
                },
                |c| Contract {
                    criteria: c.criteria,
                    checks: c.checks,
                },
            ),
        })
        .collect();
    Ok(Plan {
        file: file.to_string(),
        id: raw.plan.id,
        title: raw.plan.title,
        max_parallel: raw.plan.max_parallel,
        tasks,
    })
}

/// Words that say nothing checkable on their own.
const VAGUE: &[&str] = &[
    "works",
    "working",
    "work",
    "is good",
    "good",
    "as expected",
    "properly",
    "correctly",
    "fine",
    "looks good",
    "ok",
    "okay",
    "done",
    "tbd",
    "todo",
    "etc",
    "somehow",
    "should work",
    "better",
    "nice",
    "clean",
    "improved",
    "appropriate",
    "appropriately",
    "reasonable",
];

fn words(text: &str) -> Vec<String> {
    text.to_lowercase()
        .split(|c: char| !c.is_alphanumeric() && c != '\'')
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

/// A criterion is vague when it is short and leans on a word that names no observable outcome.
pub fn vague_criterion(text: &str) -> Option<&'static str> {
    let w = words(text);
    if w.is_empty() {
        return Some("it is empty");
    }
    let joined = format!(" {} ", w.join(" "));
    let hit = VAGUE.iter().find(|v| joined.contains(&format!(" {v} ")));
    match hit {
        Some(_) if w.len() < 6 => {
            Some("it names no observable outcome (say what can be seen or measured when it holds)")
        }
        _ => None,
    }
}

/// A check is vague when it cannot fail or checks nothing.
pub fn vague_check(cmd: &str) -> Option<&'static str> {
    let t = cmd.trim();
    if t.is_empty() {
        return Some("it is empty");
    }
    // Comments dropped, whitespace collapsed: `exit  0` is `exit 0`, `true # x` is `true`.
    let uncommented = t.split(" #").next().unwrap_or(t);
    let norm = uncommented.split_whitespace().collect::<Vec<_>>().join(" ");
    let t = norm.as_str();
    let first = t.split_whitespace().next().unwrap_or("");
    let compound = ["&&", "||", ";", "|", "\n"].iter().any(|op| t.contains(op));
    let squeezed: String = t.chars().filter(|c| !c.is_whitespace()).collect();
    if matches!(
        t,
        "true"
            | ":"
            | "exit 0"
            | "/bin/true"
            | "/usr/bin/true"
            | "test 1"
            | "[ 1 ]"
            | "! false"
            | "sh -c true"
            | "bash -c true"
            | "sh -c :"
            | "exit"
    ) || (!compound && matches!(first, "echo" | "printf" | "true" | ":"))
        || squeezed.ends_with("||true")
        || squeezed.ends_with(";true")
        || squeezed.ends_with("||:")
        || squeezed.ends_with("||exit0")
        || squeezed.ends_with("||exit")
    {
        return Some("it cannot fail, so it proves nothing");
    }
    None
}

/// Compiles a claim or read glob the way scheduling matches it (`*` stops at `/`).
pub fn compile_glob(pattern: &str) -> Result<GlobMatcher, String> {
    if pattern.trim().is_empty() {
        return Err("the pattern is empty".into());
    }
    if pattern.starts_with('/') || pattern.split('/').any(|c| c == "..") {
        return Err("patterns are relative to the repository root and may not contain `..`".into());
    }
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| e.to_string())
}

/// Every task of `plans` by its plan-qualified key.
pub(super) fn by_key(plans: &[Plan]) -> BTreeMap<&str, &Task> {
    plans
        .iter()
        .flat_map(|p| p.tasks.iter())
        .map(|t| (t.key.as_str(), t))
        .collect()
}

/// A dependency cycle among known tasks, as the list of keys around it (first repeated last).
pub fn find_cycle(plans: &[Plan]) -> Option<Vec<String>> {
    let tasks = by_key(plans);
    // Iterative DFS with colours: 0 new, 1 on the stack, 2 done.
    let mut colour: BTreeMap<&str, u8> = BTreeMap::new();
    for start in tasks.keys() {
        if colour.get(start).copied().unwrap_or(0) != 0 {
            continue;
        }
        let mut stack: Vec<(&str, usize)> = vec![(start, 0)];
        colour.insert(start, 1);
        while let Some((node, next)) = stack.pop() {
            let deps: Vec<&str> = tasks
                .get(node)
                .map(|t| {
                    t.depends_on
                        .iter()
                        .map(String::as_str)
                        .filter(|d| tasks.contains_key(d))
                        .collect()
                })
                .unwrap_or_default();
            if let Some(dep) = deps.get(next).copied() {
                stack.push((node, next + 1));
                match colour.get(dep).copied().unwrap_or(0) {
                    0 => {
                        colour.insert(dep, 1);
                        stack.push((dep, 0));
                    }
                    1 => {
                        let mut cycle: Vec<String> =
                            stack.iter().map(|(n, _)| n.to_string()).collect();
                        let from = cycle.iter().position(|n| n == dep).unwrap_or(0);
                        cycle.drain(..from);
                        cycle.push(dep.to_string());
                        return Some(cycle);
                    }
                    _ => {}
                }
            } else {
                colour.insert(node, 2);
            }
        }
    }
    None
}

/// Validates plans together (cross-plan dependencies resolve among them). `roles` are the
/// role names configured in atelier.toml.
pub fn validate(plans: &[Plan], roles: &BTreeSet<String>) -> Vec<Refusal> {
    let mut out = Vec::new();
    let mut refuse =
        |code: Code, file: &str, task: Option<&str>, field: Option<&str>, message: String| {
            out.push(Refusal {
                code,
                file: file.to_string(),
                task: task.map(str::to_string),
                field: field.map(str::to_string),
                message,
            })
        };
    let mut plan_files: BTreeMap<&str, &str> = BTreeMap::new();
    for p in plans {
        if let Some(other) = plan_files.insert(&p.id, &p.file) {
            refuse(
                Code::PlanDuplicateId,
                &p.file,
                None,
                Some("plan.id"),
                format!("plan id `{}` is also used by {other}", p.id),
            );
        }
        if p.id.trim().is_empty() || p.id.contains(':') {
            refuse(
                Code::PlanBadId,
                &p.file,
                None,
                Some("plan.id"),
                format!("plan id `{}` must be non-empty and contain no `:`", p.id),
            );
        }
        if p.max_parallel == Some(0) {
            refuse(
                Code::PlanBadField,
                &p.file,
                None,
                Some("plan.max_parallel"),
                "must be at least 1".into(),
            );
        }
    }
    let mut keys: BTreeMap<&str, &Task> = BTreeMap::new();
    for p in plans {
        for t in &p.tasks {
            if t.id.trim().is_empty() || t.id.contains(':') {
                refuse(
                    Code::TaskBadId,
                    &p.file,
                    Some(&t.id),
                    Some("id"),
                    "task ids must be non-empty and contain no `:`".into(),
                );
            }
            if keys.insert(&t.key, t).is_some() {
                refuse(
                    Code::TaskDuplicateId,
                    &p.file,
                    Some(&t.id),
                    Some("id"),
                    format!("task id `{}` appears twice in plan {}", t.id, p.id),
                );
            }
        }
    }
    for p in plans {
        for t in &p.tasks {
            let task = Some(t.id.as_str());
            if t.goal.trim().is_empty() {
                refuse(
                    Code::TaskNoGoal,
                    &p.file,
                    task,
                    Some("goal"),
                    "the goal is empty: say what the worker must do".into(),
                );
            }
            if matches!(t.role.as_str(), "proposer" | "validator") {
                refuse(
                    Code::UnknownRole,
                    &p.file,
                    task,
                    Some("role"),
                    format!(
                        "role `{}` is atelier's own (it {}), never a worker's: give the task a worker role",
                        t.role,
                        if t.role == "proposer" { "writes plans" } else { "judges contracts" }
                    ),
                );
            } else if !roles.contains(&t.role) {
                let known: Vec<&str> = roles
                    .iter()
                    .map(String::as_str)
                    .filter(|r| !matches!(*r, "proposer" | "validator"))
                    .collect();
                refuse(
                    Code::UnknownRole,
                    &p.file,
                    task,
                    Some("role"),
                    format!(
                        "role `{}` is not configured; atelier.toml has {} (add a [roles.{}] section)",
                        t.role,
                        if known.is_empty() { "no roles".to_string() } else { known.join(", ") },
                        t.role
                    ),
                );
            }
            for d in &t.depends_on {
                if d == &t.key {
                    refuse(
                        Code::DependencyCycle,
                        &p.file,
                        task,
                        Some("depends_on"),
                        format!("{} depends on itself", t.key),
                    );
                } else if !keys.contains_key(d.as_str()) {
                    let plan = d.split(':').next().unwrap_or("");
                    let why = if plans.iter().any(|x| x.id == plan) {
                        format!(
                            "plan {plan} has no task `{}`",
                            d.split(':').nth(1).unwrap_or("")
                        )
                    } else {
                        format!("plan {plan} is not among the plans given; pass its file too")
                    };
                    refuse(
                        Code::UnknownDependency,
                        &p.file,
                        task,
                        Some("depends_on"),
                        format!("`{d}`: {why}"),
                    );
                }
            }
            if t.contract.checks.is_empty() {
                refuse(Code::ContractNoCheck, &p.file, task, Some("contract.checks"), "the contract has no check: add a command that exits 0 only when the task is done".into());
            }
            for (i, c) in t.contract.checks.iter().enumerate() {
                if let Some(why) = vague_check(c) {
                    refuse(
                        Code::ContractVague,
                        &p.file,
                        task,
                        Some(&format!("contract.checks[{i}]")),
                        format!("`{c}`: {why}"),
                    );
                }
            }
            if t.contract.criteria.is_empty() {
                refuse(
                    Code::ContractNoCriteria,
                    &p.file,
                    task,
                    Some("contract.criteria"),
                    "the contract has no criteria: say in prose what must hold, for reviewers"
                        .into(),
                );
            }
            for (i, c) in t.contract.criteria.iter().enumerate() {
                if let Some(why) = vague_criterion(c) {
                    refuse(
                        Code::ContractVague,
                        &p.file,
                        task,
                        Some(&format!("contract.criteria[{i}]")),
                        format!("\"{c}\": {why}"),
                    );
                }
            }
            for (field, list) in [("files", &t.files), ("reads", &t.reads)] {
                for (i, g) in list.iter().enumerate() {
                    if let Err(e) = compile_glob(g) {
                        refuse(
                            Code::BadGlob,
                            &p.file,
                            task,
                            Some(&format!("{field}[{i}]")),
                            format!("`{g}`: {e}"),
                        );
                    }
                }
            }
        }
    }
    if let Some(cycle) = find_cycle(plans) {
        let first = keys
            .get(cycle[0].as_str())
            .map(|t| (t.plan.clone(), t.id.clone()));
        let file = first
            .as_ref()
            .and_then(|(p, _)| plans.iter().find(|x| &x.id == p))
            .map_or("", |p| p.file.as_str());
        refuse(
            Code::DependencyCycle,
            file,
            first.as_ref().map(|(_, t)| t.as_str()),
            Some("depends_on"),
            format!("dependency cycle: {}", cycle.join(" -> ")),
        );
    }
    out
}
