//! What the replay benchmark measures and how two configurations are compared: the metrics (all
//! "lower is better") and how a run's events give them, the `[conductor]` settings a side of the
//! comparison runs with, and the paired comparison across seeds with its 95 % interval.
//!
//! Pure: `bench` runs the missions and `evidence` judges and renders the outcome; both read
//! their definitions here. Talks to `swarm::events` (the records it counts) and `config` (the
//! settings as configured).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::swarm::events::{self, RunEvent};

/// The metrics, all "lower is better".
pub const METRICS: &[&str] = &[
    "wall_ms",
    "attempts",
    "wasted_attempts",
    "nudges",
    "restarts",
    "false_kills",
    "failed_tasks",
];

use crate::config::Span;

/// The `[conductor]` settings a side of the comparison runs with (the replay benchmark varies
/// these; the conductor itself is `swarm::runtime`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct ConductorSettings {
    pub nudge_after: Span,
    pub restart_after: Span,
    pub attempt_timeout: Span,
    pub failure_budget: u32,
}

impl ConductorSettings {
    pub fn of(c: &crate::config::ConductorConfig) -> ConductorSettings {
        ConductorSettings {
            nudge_after: c.nudge_after.clone(),
            restart_after: c.restart_after.clone(),
            attempt_timeout: c.attempt_timeout.clone(),
            failure_budget: c.failure_budget,
        }
    }

    /// Every duration divided by `scale` (rounded, at least a second): the configuration a
    /// time-compressed mission runs under.
    pub fn scaled(&self, scale: u64) -> ConductorSettings {
        if scale <= 1 {
            return self.clone();
        }
        let div = |d: &Span| Span::from_secs(((d.secs() + scale / 2) / scale).max(1));
        ConductorSettings {
            nudge_after: div(&self.nudge_after),
            restart_after: div(&self.restart_after),
            attempt_timeout: div(&self.attempt_timeout),
            failure_budget: self.failure_budget,
        }
    }

    pub fn toml(&self) -> String {
        format!(
            "[conductor]\nnudge_after = \"{}\"\nrestart_after = \"{}\"\nattempt_timeout = \"{}\"\nfailure_budget = {}\n",
            self.nudge_after, self.restart_after, self.attempt_timeout, self.failure_budget
        )
    }
}

/// One run's metrics.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Sample {
    pub mission: String,
    pub seed: u64,
    pub side: String,
    pub metrics: BTreeMap<String, u64>,
}

/// The metrics of a run's events (`wall_ms` is measured by the caller).
pub fn measure(
    records: &[events::Record],
    would_pass: &dyn Fn(&str, u32) -> bool,
) -> BTreeMap<String, u64> {
    let mut m: BTreeMap<String, u64> = METRICS.iter().map(|k| (k.to_string(), 0)).collect();
    let mut bump = |k: &str| *m.get_mut(k).expect("a metric") += 1;
    for r in records {
        match &r.event {
            RunEvent::AttemptStarted { .. } => bump("attempts"),
            RunEvent::AttemptFailed { .. } => bump("wasted_attempts"),
            RunEvent::Nudged { .. } => bump("nudges"),
            RunEvent::Restarted { task, attempt, .. } => {
                bump("restarts");
                if would_pass(task, *attempt) {
                    bump("false_kills");
                }
            }
            RunEvent::TaskFailed { .. } => bump("failed_tasks"),
            _ => {}
        }
    }
    m
}

/// Student's t critical value, two-sided 95 %, for `df` degrees of freedom.
pub fn t95(df: usize) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::INFINITY,
        1..=30 => T[df - 1],
        // The Cornish-Fisher expansion around the normal quantile: within 0.001 of the exact
        // value from 31 degrees of freedom on.
        _ => {
            let z: f64 = 1.959_964;
            let n = df as f64;
            z + (z.powi(3) + z) / (4.0 * n)
                + (5.0 * z.powi(5) + 16.0 * z.powi(3) + 3.0 * z) / (96.0 * n * n)
        }
    }
}

/// A metric's comparison across seeds.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct Delta {
    pub metric: String,
    pub baseline_mean: f64,
    pub candidate_mean: f64,
    /// Mean of the per-seed differences (candidate − baseline), and its 95 % interval.
    pub delta: f64,
    pub low: f64,
    pub high: f64,
    /// `improved` (the interval is below 0), `regressed` (above 0), or `no significant change`.
    pub verdict: String,
}

/// Paired comparison of per-seed values (`pairs`: (baseline, candidate) per seed).
pub fn compare(metric: &str, pairs: &[(f64, f64)]) -> Delta {
    let n = pairs.len();
    let mean = |v: &mut dyn Iterator<Item = f64>| {
        let (s, c) = v.fold((0.0, 0usize), |(s, c), x| (s + x, c + 1));
        if c == 0 {
            0.0
        } else {
            s / c as f64
        }
    };
    let d: Vec<f64> = pairs.iter().map(|(b, c)| c - b).collect();
    let dm = mean(&mut d.iter().copied());
    let half = if n < 2 {
        f64::INFINITY
    } else {
        let var = d.iter().map(|x| (x - dm).powi(2)).sum::<f64>() / (n - 1) as f64;
        t95(n - 1) * (var / n as f64).sqrt()
    };
    let (low, high) = (dm - half, dm + half);
    let verdict = if high < 0.0 {
        "improved"
    } else if low > 0.0 {
        "regressed"
    } else {
        "no significant change"
    };
    Delta {
        metric: metric.to_string(),
        baseline_mean: mean(&mut pairs.iter().map(|p| p.0)),
        candidate_mean: mean(&mut pairs.iter().map(|p| p.1)),
        delta: dm,
        low,
        high,
        verdict: verdict.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paired_intervals_use_t_and_say_which_way() {
        // Differences -2, -2.5, -1.5: mean -2, sd 0.5, n 3 → half = 4.303 × 0.5 / √3.
        let d = compare("x", &[(10.0, 8.0), (10.0, 7.5), (10.0, 8.5)]);
        assert!((d.delta + 2.0).abs() < 1e-9);
        let half = 4.303 * 0.5 / 3f64.sqrt();
        assert!((d.high - (-2.0 + half)).abs() < 1e-9);
        assert_eq!(d.verdict, "improved");
        let same = compare("x", &[(1.0, 2.0), (2.0, 1.0)]);
        assert_eq!(same.verdict, "no significant change");
        let one = compare("x", &[(1.0, 5.0)]);
        assert_eq!(
            one.verdict, "no significant change",
            "one seed has no interval"
        );
        assert_eq!(compare("x", &[(1.0, 3.0), (1.0, 3.0)]).verdict, "regressed");
        assert_eq!(t95(1), 12.706);
        assert!((t95(100) - 1.984).abs() < 0.001);
    }
}
