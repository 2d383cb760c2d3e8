//! A run's `[budget]`: hard ceilings on the tokens its workers report (`spent` events), their
//! cost at `[prices]`, and wall time, for the whole run, each task and each role. The conductor
//! asks before every attempt whether one is reached (no attempt starts past a ceiling), and
//! after every event whether the run's own is (then the attempts running are ended).
//!
//! Reads the run's state (`RunState`: each task's tokens and the time its attempts took) and
//! the configuration; writes nothing.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::agent::clients::Usage;
use crate::config::{Caps, Config, Price};
use crate::swarm::events::RunState;
use crate::swarm::plan::Task;

/// The ceilings of a run, with the price of each role's tokens.
pub(super) struct Budgets {
    run: Caps,
    task: Caps,
    roles: BTreeMap<String, Caps>,
    prices: BTreeMap<String, Price>,
}

/// A ceiling reached: where, what, the ceiling and what was used, as `budget-reached` records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Reached {
    pub(super) scope: String,
    pub(super) measure: &'static str,
    pub(super) limit: String,
    pub(super) used: String,
}

impl Reached {
    /// The `budget-reached` event that records it.
    pub(super) fn event(&self) -> crate::swarm::events::RunEvent {
        crate::swarm::events::RunEvent::BudgetReached {
            scope: self.scope.clone(),
            measure: self.measure.into(),
            limit: self.limit.clone(),
            used: self.used.clone(),
        }
    }
}

impl std::fmt::Display for Reached {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let whose = match self.scope.as_str() {
            "run" => "the run's".to_string(),
            other => format!("{other}'s"),
        };
        write!(
            f,
            "{whose} {} budget ({}) is spent: {} used; raise [budget] in atelier.toml to go on",
            self.measure, self.limit, self.used
        )
    }
}

impl Budgets {
    /// The budgets of a run whose tasks use `roles`; a `cost` ceiling needs a price for every
    /// such role's model (`model` on the role, `[prices."MODEL"]`).
    pub(super) fn from<'r>(
        config: &Config,
        roles: impl Iterator<Item = &'r String>,
    ) -> Result<Budgets, String> {
        let b = &config.budget;
        let mut prices = BTreeMap::new();
        let wants_cost = b.run.cost.is_some()
            || b.task.cost.is_some()
            || b.roles.values().any(|c| c.cost.is_some());
        for r in roles {
            let model = config.roles.get(r).and_then(|c| c.model.clone());
            match model.as_ref().and_then(|m| config.prices.get(m)) {
                Some(p) => {
                    prices.insert(r.clone(), *p);
                }
                None if wants_cost => {
                    return Err(match model {
                        None => format!("[budget] sets a cost, but [roles.{r}] names no `model` to price: set `model = \"…\"` on the role and its price in [prices.\"…\"]"),
                        Some(m) => format!("[budget] sets a cost, but [prices.\"{m}\"] (the model of [roles.{r}]) is missing: add `input` and `output`, per million tokens"),
                    });
                }
                None => {}
            }
        }
        Ok(Budgets {
            run: b.run.clone(),
            task: b.task.clone(),
            roles: b.roles.clone(),
            prices,
        })
    }

    /// What `usage` of `role`'s costs.
    fn cost(&self, role: &str, usage: &Usage) -> f64 {
        let Some(p) = self.prices.get(role) else {
            return 0.0;
        };
        let m = 1_000_000.0;
        usage.input_tokens as f64 * p.input.0 / m
            + usage.output_tokens as f64 * p.output.0 / m
            + usage.cached_tokens as f64 * p.cached.unwrap_or(p.input).0 / m
    }

    /// The first ceiling the run itself has reached, `wall` being how long its conductor has run.
    pub(super) fn run_reached(
        &self,
        state: &RunState,
        tasks: &BTreeMap<String, Task>,
        wall: Duration,
    ) -> Option<Reached> {
        let all: Vec<&Task> = tasks.values().collect();
        self.check("run", &self.run, &all, state, Some(wall))
    }

    /// The first ceiling that forbids another attempt of `task`: the run's, its role's, its own.
    pub(super) fn reached(
        &self,
        state: &RunState,
        tasks: &BTreeMap<String, Task>,
        task: &Task,
        wall: Duration,
    ) -> Option<Reached> {
        self.run_reached(state, tasks, wall)
            .or_else(|| self.scoped_reached(state, tasks, task))
    }

    /// The first of `task`'s role's and its own ceilings that is reached.
    pub(super) fn scoped_reached(
        &self,
        state: &RunState,
        tasks: &BTreeMap<String, Task>,
        task: &Task,
    ) -> Option<Reached> {
        if let Some(caps) = self.roles.get(&task.role) {
            let of_role: Vec<&Task> = tasks.values().filter(|t| t.role == task.role).collect();
            let scope = format!("role {}", task.role);
            if let Some(r) = self.check(&scope, caps, &of_role, state, None) {
                return Some(r);
            }
        }
        self.check(
            &format!("task {}", task.key),
            &self.task,
            &[task],
            state,
            None,
        )
    }

    /// `caps` against what `tasks` used; `wall` is the scope's own clock (the run's), else the
    /// time its tasks' attempts took.
    fn check(
        &self,
        scope: &str,
        caps: &Caps,
        tasks: &[&Task],
        state: &RunState,
        wall: Option<Duration>,
    ) -> Option<Reached> {
        let views = || {
            tasks
                .iter()
                .filter_map(|t| Some((*t, state.tasks.get(&t.key)?)))
        };
        let reached = |measure, limit: String, used: String| Reached {
            scope: scope.to_string(),
            measure,
            limit,
            used,
        };
        if let Some(limit) = caps.tokens {
            let used: u64 = views().map(|(_, v)| v.spent.total()).sum();
            if used >= limit {
                return Some(reached("tokens", limit.to_string(), used.to_string()));
            }
        }
        if let Some(limit) = caps.cost {
            let used: f64 = views().map(|(t, v)| self.cost(&t.role, &v.spent)).sum();
            if used >= limit.0 {
                return Some(reached(
                    "cost",
                    format!("{:.2}", limit.0),
                    format!("{used:.4}"),
                ));
            }
        }
        if let Some(limit) = &caps.wall {
            let used = wall
                .unwrap_or_else(|| Duration::from_millis(views().map(|(_, v)| v.worked_ms).sum()));
            if used >= limit.duration() {
                return Some(reached(
                    "wall",
                    limit.to_string(),
                    format!("{}s", used.as_secs()),
                ));
            }
        }
        None
    }
}

/// One ceiling of `[budget]` beside what a run has used of it, for people (`status`, the
/// dashboard's run page).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Standing {
    /// `run`, `role NAME` or `task KEY`.
    pub scope: String,
    pub measure: &'static str,
    pub limit: String,
    pub used: String,
    pub reached: bool,
}

/// Each tokens and cost ceiling of `config`'s `[budget]` beside what the run recorded in
/// `state` has used of it: the run's, each role's, and the task ceiling for each task that
/// spent anything (a task's role is the one its latest attempt ran as). Wall ceilings are the
/// conductor's to measure and are left out.
pub fn standing(config: &Config, state: &RunState) -> Vec<Standing> {
    let b = &config.budget;
    let price = |role: Option<&String>| {
        role.and_then(|r| config.roles.get(r))
            .and_then(|c| c.model.as_ref())
            .and_then(|m| config.prices.get(m))
            .copied()
    };
    let cost = |v: &crate::swarm::events::TaskView| {
        price(v.role.as_ref()).map_or(0.0, |p| {
            let m = 1_000_000.0;
            let u = &v.spent;
            u.input_tokens as f64 * p.input.0 / m
                + u.output_tokens as f64 * p.output.0 / m
                + u.cached_tokens as f64 * p.cached.unwrap_or(p.input).0 / m
        })
    };
    let mut out = Vec::new();
    let mut add = |scope: String, caps: &Caps, views: &[&crate::swarm::events::TaskView]| {
        if let Some(limit) = caps.tokens {
            let used: u64 = views.iter().map(|v| v.spent.total()).sum();
            out.push(Standing {
                scope: scope.clone(),
                measure: "tokens",
                limit: limit.to_string(),
                used: used.to_string(),
                reached: used >= limit,
            });
        }
        if let Some(limit) = caps.cost {
            let used: f64 = views.iter().map(|v| cost(v)).sum();
            out.push(Standing {
                scope,
                measure: "cost",
                limit: format!("{:.2}", limit.0),
                used: format!("{used:.4}"),
                reached: used >= limit.0,
            });
        }
    };
    let all: Vec<_> = state.tasks.values().collect();
    add("run".into(), &b.run, &all);
    for (role, caps) in &b.roles {
        let of: Vec<_> = all
            .iter()
            .copied()
            .filter(|v| v.role.as_ref() == Some(role))
            .collect();
        add(format!("role {role}"), caps, &of);
    }
    for (key, v) in state.tasks.iter().filter(|(_, v)| v.spent.total() > 0) {
        add(format!("task {key}"), &b.task, &[v]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(extra: &str) -> Config {
        Config::parse(
            "atelier.toml",
            &format!("[forge]\nkind = \"local\"\nrepository = \"acme/widgets\"\n\n[roles.implementer]\nbackend = \"claude\"\nmodel = \"m1\"\n\n{extra}"),
        )
        .expect("the configuration parses")
    }

    fn plan() -> BTreeMap<String, Task> {
        let text = "[plan]\nid = \"p\"\ntitle = \"P\"\n\n[[task]]\nid = \"A\"\ntitle = \"A\"\nrole = \"implementer\"\ngoal = \"g\"\nfiles = [\"a\"]\n\n[[task]]\nid = \"B\"\ntitle = \"B\"\nrole = \"implementer\"\ngoal = \"g\"\nfiles = [\"b\"]\n";
        crate::swarm::plan::parse("p.toml", text)
            .expect("parses")
            .tasks
            .into_iter()
            .map(|t| (t.key.clone(), t))
            .collect()
    }

    fn spent(tasks: &BTreeMap<String, Task>, a: Usage, b: Usage) -> RunState {
        let keys: Vec<String> = tasks.keys().cloned().collect();
        let mut state = RunState::new(&keys);
        state.tasks.get_mut("p:A").expect("A").spent = a;
        state.tasks.get_mut("p:B").expect("B").spent = b;
        state
    }

    fn tokens(input: u64, output: u64) -> Usage {
        Usage {
            input_tokens: input,
            output_tokens: output,
            cached_tokens: 0,
        }
    }

    #[test]
    fn each_scope_stops_at_its_own_ceiling() {
        let tasks = plan();
        let state = spent(&tasks, tokens(600, 100), tokens(200, 0));
        let b = |extra| {
            Budgets::from(&config(extra), ["implementer".to_string()].iter()).expect("budgets")
        };
        let a = &tasks["p:A"];
        let bb = &tasks["p:B"];
        let zero = Duration::ZERO;
        // The run's: 900 used of 900.
        let run = b("[budget.run]\ntokens = 900\n");
        let r = run.reached(&state, &tasks, bb, zero).expect("reached");
        assert_eq!((r.scope.as_str(), r.measure), ("run", "tokens"));
        assert_eq!((r.limit.as_str(), r.used.as_str()), ("900", "900"));
        assert!(r
            .to_string()
            .contains("the run's tokens budget (900) is spent: 900 used"));
        assert_eq!(
            b("[budget.run]\ntokens = 901\n").reached(&state, &tasks, a, zero),
            None
        );
        // A task's: A has used 700, B 200.
        let per_task = b("[budget.task]\ntokens = 500\n");
        assert_eq!(
            per_task.reached(&state, &tasks, a, zero).map(|r| r.scope),
            Some("task p:A".into())
        );
        assert_eq!(per_task.reached(&state, &tasks, bb, zero), None);
        // A role's: all its tasks.
        let role = b("[budget.roles.implementer]\ntokens = 900\n");
        assert_eq!(
            role.reached(&state, &tasks, bb, zero).map(|r| r.scope),
            Some("role implementer".into())
        );
        // The run's wall time is the conductor's clock.
        let wall = b("[budget.run]\nwall = \"1m\"\n");
        assert_eq!(
            wall.run_reached(&state, &tasks, Duration::from_secs(59)),
            None
        );
        assert_eq!(
            wall.run_reached(&state, &tasks, Duration::from_secs(60))
                .map(|r| r.measure),
            Some("wall")
        );
    }

    #[test]
    fn cost_is_priced_per_model_and_needs_a_price() {
        let tasks = plan();
        // 1M input at 3, 0.1M output at 15: 4.5 for A.
        let state = spent(&tasks, tokens(1_000_000, 100_000), tokens(0, 0));
        let priced =
            config("[budget.task]\ncost = 4.5\n\n[prices.\"m1\"]\ninput = 3.0\noutput = 15.0\n");
        let b = Budgets::from(&priced, ["implementer".to_string()].iter()).expect("budgets");
        let r = b
            .reached(&state, &tasks, &tasks["p:A"], Duration::ZERO)
            .expect("reached");
        assert_eq!((r.measure, r.used.as_str()), ("cost", "4.5000"));
        assert_eq!(
            b.reached(&state, &tasks, &tasks["p:B"], Duration::ZERO),
            None
        );
        let unpriced = config("[budget.run]\ncost = 1.0\n");
        let why = Budgets::from(&unpriced, ["implementer".to_string()].iter())
            .err()
            .expect("refused");
        assert!(why.contains("[prices.\"m1\"]"), "{why}");
    }
}
