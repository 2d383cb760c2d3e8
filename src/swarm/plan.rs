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

impl Task {
    /// Whether `path` is among the task's claims: a claimed path, a file under a claimed
    /// directory, or a match of a claimed glob.
    pub fn claims(&self, path: &str) -> bool {
        self.files.iter().any(|f| {
            let dir = f.trim_end_matches('/');
            path == dir
                || path.strip_prefix(dir).is_some_and(|r| r.starts_with('/'))
                || compile_glob(f).map(|m| m.is_match(path)).unwrap_or(false)
        })
    }
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

/// Refusals as the validator gathers them, in the order it finds them.
struct Refusals(Vec<Refusal>);

impl Refusals {
    fn refuse(
        &mut self,
        code: Code,
        file: &str,
        task: Option<&str>,
        field: Option<&str>,
        message: String,
    ) {
        self.0.push(Refusal {
            code,
            file: file.to_string(),
            task: task.map(str::to_string),
            field: field.map(str::to_string),
            message,
        })
    }
}

/// Validates plans together (cross-plan dependencies resolve among them). `roles` are the
/// role names configured in atelier.toml.
pub fn validate(plans: &[Plan], roles: &BTreeSet<String>) -> Vec<Refusal> {
    let mut out = Refusals(Vec::new());
    check_headers(plans, &mut out);
    let keys = check_task_ids(plans, &mut out);
    for p in plans {
        for t in &p.tasks {
            let task = Some(t.id.as_str());
            if t.goal.trim().is_empty() {
                out.refuse(
                    Code::TaskNoGoal,
                    &p.file,
                    task,
                    Some("goal"),
                    "the goal is empty: say what the worker must do".into(),
                );
            }
            check_role(p, t, roles, &mut out);
            check_dependencies(p, t, plans, &keys, &mut out);
            check_contract(p, t, &mut out);
            check_globs(p, t, &mut out);
        }
    }
    check_cycle(plans, &keys, &mut out);
    out.0
}

/// Each plan's id (unique, non-empty, no `:`) and `max_parallel` (at least 1).
fn check_headers(plans: &[Plan], out: &mut Refusals) {
    let mut plan_files: BTreeMap<&str, &str> = BTreeMap::new();
    for p in plans {
        if let Some(other) = plan_files.insert(&p.id, &p.file) {
            out.refuse(
                Code::PlanDuplicateId,
                &p.file,
                None,
                Some("plan.id"),
                format!("plan id `{}` is also used by {other}", p.id),
            );
        }
        if p.id.trim().is_empty() || p.id.contains(':') {
            out.refuse(
                Code::PlanBadId,
                &p.file,
                None,
                Some("plan.id"),
                format!("plan id `{}` must be non-empty and contain no `:`", p.id),
            );
        }
        if p.max_parallel == Some(0) {
            out.refuse(
                Code::PlanBadField,
                &p.file,
                None,
                Some("plan.max_parallel"),
                "must be at least 1".into(),
            );
        }
    }
}

/// Each task's id (non-empty, no `:`, once per plan); the tasks by key.
fn check_task_ids<'p>(plans: &'p [Plan], out: &mut Refusals) -> BTreeMap<&'p str, &'p Task> {
    let mut keys: BTreeMap<&str, &Task> = BTreeMap::new();
    for p in plans {
        for t in &p.tasks {
            if t.id.trim().is_empty() || t.id.contains(':') {
                out.refuse(
                    Code::TaskBadId,
                    &p.file,
                    Some(&t.id),
                    Some("id"),
                    "task ids must be non-empty and contain no `:`".into(),
                );
            }
            if keys.insert(&t.key, t).is_some() {
                out.refuse(
                    Code::TaskDuplicateId,
                    &p.file,
                    Some(&t.id),
                    Some("id"),
                    format!("task id `{}` appears twice in plan {}", t.id, p.id),
                );
            }
        }
    }
    keys
}

/// A task's role: a worker role configured in atelier.toml, never atelier's own.
fn check_role(p: &Plan, t: &Task, roles: &BTreeSet<String>, out: &mut Refusals) {
    let task = Some(t.id.as_str());
    if matches!(t.role.as_str(), "proposer" | "validator") {
        out.refuse(
            Code::UnknownRole,
            &p.file,
            task,
            Some("role"),
            format!(
                "role `{}` is atelier's own (it {}), never a worker's: give the task a worker role",
                t.role,
                if t.role == "proposer" {
                    "writes plans"
                } else {
                    "judges contracts"
                }
            ),
        );
    } else if !roles.contains(&t.role) {
        let known: Vec<&str> = roles
            .iter()
            .map(String::as_str)
            .filter(|r| !matches!(*r, "proposer" | "validator"))
            .collect();
        out.refuse(
            Code::UnknownRole,
            &p.file,
            task,
            Some("role"),
            format!(
                "role `{}` is not configured; atelier.toml has {} (add a [roles.{}] section)",
                t.role,
                if known.is_empty() {
                    "no roles".to_string()
                } else {
                    known.join(", ")
                },
                t.role
            ),
        );
    }
}

/// A task's dependencies: not itself, and each a task of the plans given.
fn check_dependencies(
    p: &Plan,
    t: &Task,
    plans: &[Plan],
    keys: &BTreeMap<&str, &Task>,
    out: &mut Refusals,
) {
    let task = Some(t.id.as_str());
    for d in &t.depends_on {
        if d == &t.key {
            out.refuse(
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
            out.refuse(
                Code::UnknownDependency,
                &p.file,
                task,
                Some("depends_on"),
                format!("`{d}`: {why}"),
            );
        }
    }
}

/// A task's contract: at least one check, none that cannot fail; at least one criterion, none
/// vague.
fn check_contract(p: &Plan, t: &Task, out: &mut Refusals) {
    let task = Some(t.id.as_str());
    if t.contract.checks.is_empty() {
        out.refuse(
            Code::ContractNoCheck,
            &p.file,
            task,
            Some("contract.checks"),
            "the contract has no check: add a command that exits 0 only when the task is done"
                .into(),
        );
    }
    for (i, c) in t.contract.checks.iter().enumerate() {
        if let Some(why) = vague_check(c) {
            out.refuse(
                Code::ContractVague,
                &p.file,
                task,
                Some(&format!("contract.checks[{i}]")),
                format!("`{c}`: {why}"),
            );
        }
    }
    if t.contract.criteria.is_empty() {
        out.refuse(
            Code::ContractNoCriteria,
            &p.file,
            task,
            Some("contract.criteria"),
            "the contract has no criteria: say in prose what must hold, for reviewers".into(),
        );
    }
    for (i, c) in t.contract.criteria.iter().enumerate() {
        if let Some(why) = vague_criterion(c) {
            out.refuse(
                Code::ContractVague,
                &p.file,
                task,
                Some(&format!("contract.criteria[{i}]")),
                format!("\"{c}\": {why}"),
            );
        }
    }
}

/// A task's claims and reads: patterns that compile, relative, without `..`.
fn check_globs(p: &Plan, t: &Task, out: &mut Refusals) {
    for (field, list) in [("files", &t.files), ("reads", &t.reads)] {
        for (i, g) in list.iter().enumerate() {
            if let Err(e) = compile_glob(g) {
                out.refuse(
                    Code::BadGlob,
                    &p.file,
                    Some(t.id.as_str()),
                    Some(&format!("{field}[{i}]")),
                    format!("`{g}`: {e}"),
                );
            }
        }
    }
}

/// A dependency cycle among the plans' tasks, refused at its first task.
fn check_cycle(plans: &[Plan], keys: &BTreeMap<&str, &Task>, out: &mut Refusals) {
    let Some(cycle) = find_cycle(plans) else {
        return;
    };
    let first = keys
        .get(cycle[0].as_str())
        .map(|t| (t.plan.clone(), t.id.clone()));
    let file = first
        .as_ref()
        .and_then(|(p, _)| plans.iter().find(|x| &x.id == p))
        .map_or("", |p| p.file.as_str());
    out.refuse(
        Code::DependencyCycle,
        file,
        first.as_ref().map(|(_, t)| t.as_str()),
        Some("depends_on"),
        format!("dependency cycle: {}", cycle.join(" -> ")),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roles() -> BTreeSet<String> {
        ["implementer".to_string(), "validator".to_string()].into()
    }

    /// Every refusal as `code file task field`, in the order the validator gives them.
    fn refusals(files: &[(&str, &str)]) -> Vec<String> {
        let plans: Vec<Plan> = files
            .iter()
            .map(|(f, t)| parse(f, t).expect("the plan parses"))
            .collect();
        validate(&plans, &roles())
            .iter()
            .map(|r| {
                format!(
                    "{} {} {} {}",
                    r.code,
                    r.file,
                    r.task.as_deref().unwrap_or("-"),
                    r.field.as_deref().unwrap_or("-")
                )
            })
            .collect()
    }

    const GOOD: &str = "[plan]\nid = \"p\"\ntitle = \"P\"\n\n[[task]]\nid = \"A\"\ntitle = \"A\"\nrole = \"implementer\"\ngoal = \"Write a\"\nfiles = [\"src/a.rs\"]\n[task.contract]\ncriteria = [\"src/a.rs defines fn a returning 1\"]\nchecks = [\"grep -q 'fn a' src/a.rs\"]\n";

    #[test]
    fn a_good_plan_is_not_refused() {
        assert!(refusals(&[("p.toml", GOOD)]).is_empty());
    }

    #[test]
    fn every_problem_is_refused_once_with_its_place_in_the_order_found() {
        let bad = "[plan]\nid = \"q:x\"\ntitle = \"Q\"\nmax_parallel = 0\n\n\
            [[task]]\nid = \"A\"\ntitle = \"A\"\nrole = \"proposer\"\ngoal = \" \"\nfiles = [\"../up\"]\nreads = [\"/abs\"]\ndepends_on = [\"A\", \"Z\", \"r:B\"]\n\n\
            [[task]]\nid = \"A\"\ntitle = \"A again\"\nrole = \"reviewer\"\ngoal = \"g\"\n[task.contract]\ncriteria = [\"works\"]\nchecks = [\"true\"]\n";
        let dup = GOOD.replace("title = \"P\"", "title = \"P again\"");
        assert_eq!(
            refusals(&[("bad.toml", bad), ("p.toml", GOOD), ("dup.toml", &dup)]),
            [
                "E_PLAN_BAD_ID bad.toml - plan.id",
                "E_PLAN_BAD_FIELD bad.toml - plan.max_parallel",
                "E_PLAN_DUPLICATE_ID dup.toml - plan.id",
                "E_TASK_DUPLICATE_ID bad.toml A id",
                "E_TASK_DUPLICATE_ID dup.toml A id",
                "E_TASK_NO_GOAL bad.toml A goal",
                "E_UNKNOWN_ROLE bad.toml A role",
                "E_DEPENDENCY_CYCLE bad.toml A depends_on",
                "E_UNKNOWN_DEPENDENCY bad.toml A depends_on",
                "E_UNKNOWN_DEPENDENCY bad.toml A depends_on",
                "E_CONTRACT_NO_CHECK bad.toml A contract.checks",
                "E_CONTRACT_NO_CRITERIA bad.toml A contract.criteria",
                "E_BAD_GLOB bad.toml A files[0]",
                "E_BAD_GLOB bad.toml A reads[0]",
                "E_UNKNOWN_ROLE bad.toml A role",
                "E_CONTRACT_VAGUE bad.toml A contract.checks[0]",
                "E_CONTRACT_VAGUE bad.toml A contract.criteria[0]",
            ]
        );
    }

    #[test]
    fn a_dependency_cycle_is_refused_at_its_first_task() {
        let cyclic = GOOD.replace("goal = \"Write a\"", "goal = \"Write a\"\ndepends_on = [\"B\"]")
            + "\n[[task]]\nid = \"B\"\ntitle = \"B\"\nrole = \"implementer\"\ngoal = \"Write b\"\nfiles = [\"src/b.rs\"]\ndepends_on = [\"A\"]\n[task.contract]\ncriteria = [\"src/b.rs defines fn b returning 2\"]\nchecks = [\"grep -q 'fn b' src/b.rs\"]\n";
        let plans = [parse("p.toml", &cyclic).expect("parses")];
        let r = validate(&plans, &roles());
        assert_eq!(r.len(), 1, "{r:?}");
        assert_eq!(r[0].code, Code::DependencyCycle);
        assert_eq!(r[0].task.as_deref(), Some("A"));
        assert_eq!(r[0].message, "dependency cycle: p:A -> p:B -> p:A");
        assert_eq!(
            find_cycle(&plans),
            Some(vec!["p:A".into(), "p:B".into(), "p:A".into()])
        );
    }
}
