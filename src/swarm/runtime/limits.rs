//! The limits a run's conductor and attempts work under, fixed when the conductor opens the
//! run: `[conductor]` (the silence thresholds, the attempt timeout, the failure budget), the
//! gauntlet's steps, `[swarm]`'s context budget, output cap and shared build cache, and the
//! run's sandboxes. `attempt` reads them to run a worker and the gauntlet; the conductor to
//! record its `settings` and to spend the failure budget.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::sandbox::{shared_target, Sandboxes};
use crate::agent::contain::Sandbox;
use crate::config::Config;

pub(super) struct Limits {
    pub(super) nudge: Duration,
    pub(super) restart: Duration,
    pub(super) attempt: Duration,
    /// The gauntlet's steps: name, command, timeout.
    pub(super) steps: Vec<(String, String, Duration)>,
    pub(super) budget: u32,
    pub(super) context: usize,
    pub(super) max_output: usize,
    pub(super) target_dir: Option<PathBuf>,
    /// What each role's workers may touch besides their worktree, and what steps and checks
    /// may; `None` when the run is uncontained (`[swarm] containment = "none"`, merged).
    pub(super) sandboxes: Option<Sandboxes>,
}

/// A duration in whole milliseconds, as events record it.
pub(super) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Limits {
    pub(super) fn from(config: &Config, root: &Path, sandboxes: Option<Sandboxes>) -> Limits {
        Limits {
            nudge: config.conductor.nudge_after.duration(),
            restart: config.conductor.restart_after.duration(),
            attempt: config.conductor.attempt_timeout.duration(),
            steps: config
                .gauntlet
                .steps
                .iter()
                .map(|s| (s.name.clone(), s.run.clone(), s.timeout.duration()))
                .collect(),
            budget: config.conductor.failure_budget,
            context: config.swarm.context_budget,
            max_output: config.swarm.max_output,
            target_dir: shared_target(config, root),
            sandboxes,
        }
    }

    /// Whether a task whose `attempt`th attempt just failed has spent its failure budget,
    /// counted from `budget_from` (the attempts made before an operator's last `retry`).
    pub(super) fn budget_spent(&self, attempt: u32, budget_from: u32) -> bool {
        attempt.saturating_sub(budget_from) >= self.budget
    }

    /// The sandbox of a program in an attempt's `worktree`: `base` (its role's or the
    /// gauntlet's grants), the worktree, the repository's git objects and refs (`common`,
    /// read), the shared cache.
    fn sandbox(&self, base: &Sandbox, worktree: &Path, common: &Path) -> Sandbox {
        let mut s = base.clone().write(worktree).read(common);
        if let Some(dir) = &self.target_dir {
            s = s.write(dir);
        }
        s
    }

    /// A contained run's worker of a role it has no sandbox for gets no grants (fails closed).
    pub(super) fn worker_sandbox(
        &self,
        role: &str,
        worktree: &Path,
        common: &Path,
    ) -> Option<Sandbox> {
        let s = self.sandboxes.as_ref()?;
        let base = s
            .role(role)
            .unwrap_or_else(|| Sandbox::new(crate::config::Network::None));
        Some(self.sandbox(&base, worktree, common))
    }

    /// A contained run's gauntlet step or contract check: the gauntlet's grants.
    pub(super) fn step_sandbox(&self, worktree: &Path, common: &Path) -> Option<Sandbox> {
        let s = self.sandboxes.as_ref()?;
        Some(self.sandbox(&s.gauntlet, worktree, common))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(extra: &str) -> Config {
        Config::parse(
            "atelier.toml",
            &format!("[forge]\nkind = \"local\"\nrepository = \"acme/widgets\"\n\n{extra}"),
        )
        .expect("the configuration parses")
    }

    fn limits(extra: &str) -> Limits {
        Limits::from(&config(extra), Path::new("/repo"), None)
    }

    #[test]
    fn the_limits_are_the_configured_durations_and_budgets() {
        let l = limits(
            "[conductor]\nnudge_after = \"90s\"\nrestart_after = \"10m\"\nattempt_timeout = \"1h\"\nfailure_budget = 2\n\n[swarm]\ncontext_budget = 1234\nmax_output = 4096\nshared_target_dir = \"cache\"\n\n[gauntlet]\nsteps = [{ name = \"build\", run = \"cargo build\", timeout = \"5m\" }]\n",
        );
        assert_eq!(l.nudge, Duration::from_secs(90));
        assert_eq!(l.restart, Duration::from_secs(600));
        assert_eq!(l.attempt, Duration::from_secs(3600));
        assert_eq!(l.budget, 2);
        assert_eq!((l.context, l.max_output), (1234, 4096));
        assert_eq!(
            l.steps,
            [(
                "build".to_string(),
                "cargo build".to_string(),
                Duration::from_secs(300)
            )]
        );
        assert_eq!(l.target_dir.as_deref(), Some(Path::new("/repo/cache")));
    }

    #[test]
    fn the_failure_budget_counts_from_the_last_retry() {
        let l = limits("[conductor]\nfailure_budget = 3\n");
        assert!(!l.budget_spent(2, 0));
        assert!(l.budget_spent(3, 0));
        // Retried after 3 attempts: 3 more before the task fails again.
        assert!(!l.budget_spent(5, 3));
        assert!(l.budget_spent(6, 3));
        assert!(!l.budget_spent(2, 5), "attempts before a retry never count");
    }

    #[test]
    fn an_uncontained_run_gives_its_programs_no_sandbox() {
        let l = limits("");
        let (wt, common) = (
            Path::new("/repo/.atelier/runs/r1/wt/x"),
            Path::new("/repo/.git"),
        );
        assert!(l.worker_sandbox("implementer", wt, common).is_none());
        assert!(l.step_sandbox(wt, common).is_none());
    }

    #[test]
    fn milliseconds_saturate_rather_than_wrap() {
        assert_eq!(millis(Duration::from_millis(1500)), 1500);
        assert_eq!(millis(Duration::MAX), u64::MAX);
    }
}
