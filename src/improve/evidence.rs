//! The evidence `atelier cycle` writes into a proposal's record (`evidence.json`, and
//! `evidence.md` for people): the metric named before the replay benchmark ran, the benchmark's
//! deltas with their intervals, and each validator's result. Pure: the cycle (src/cli/cycle.rs)
//! gathers, this module decides and renders, with the metrics and settings of `metrics`.

use serde::{Deserialize, Serialize};

use super::metrics::{ConductorSettings, Delta, METRICS};

/// The files in the record folder.
pub const JSON: &str = "evidence.json";
pub const MARKDOWN: &str = "evidence.md";

/// The metric no change may make worse without stopping the cycle, whatever it registered: a
/// change that makes more tasks fail is never a mere trade-off.
pub const GUARDED: &str = "failed_tasks";

/// What the replay benchmark measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Benchmark {
    pub seeds: u64,
    pub missions: Vec<String>,
    pub interval: String,
    pub baseline: ConductorSettings,
    pub candidate: ConductorSettings,
    /// For a change to Atelier's own code: the two builds that ran the missions (the base's,
    /// trusted, and the change's, contained); absent when one atelier ran both configurations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_build: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate_build: Option<String>,
    pub deltas: Vec<Delta>,
    /// The seeds the missions ran with, in order ([`draw_seeds`] of `drawn_from`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub seed_values: Vec<u64>,
    /// Where the seeds were drawn from: the ledger entry that registered the metric.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drawn_from: Option<DrawnFrom>,
}

/// The ledger entry a cycle's seeds were drawn from: its sequence number and its RFC 6962
/// leaf hash (SHA-256 of a zero byte and the entry's line), hex.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrawnFrom {
    pub entry: u64,
    pub leaf: String,
}

/// The replay benchmark's `n` seeds for a cycle, drawn from the leaf hash (hex) of the ledger
/// entry that registered its metric, which holds random bits drawn when it was made: nobody can
/// run the cycle's exact benchmark before its metric is on record. Seed `i` is
/// `6 × (h >> 8) + i mod 6`, where `h` is the first 8 bytes (big-endian) of
/// SHA-256(`atelier bench seed {i} {leaf}`): the drawn part varies what a seed does (the silent
/// tasks' exact quiet time), while `i mod 6` keeps each position's behaviour class (how often
/// the flaky task fails, whether a task crashes, the silence's second), so the interval's
/// pairs stay comparable with those of a hand `bench replay`.
pub fn draw_seeds(leaf: &str, n: u64) -> Vec<u64> {
    use sha2::Digest;
    (0..n)
        .map(|i| {
            let d = sha2::Sha256::digest(format!("atelier bench seed {i} {leaf}").as_bytes());
            let mut h = [0u8; 8];
            h.copy_from_slice(&d[..8]);
            6 * (u64::from_be_bytes(h) >> 8) + i % 6
        })
        .collect()
}

/// One validator's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Validated {
    pub name: String,
    /// `passed`, `failed`, or `not run` (with why in `detail`).
    pub result: String,
    pub detail: String,
}

impl Validated {
    pub fn failed(&self) -> bool {
        self.result == "failed"
    }
    pub fn line(&self) -> String {
        format!("{}: {}", self.name, self.result)
    }
}

/// A proposal's evidence, as committed in its record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    pub proposal: String,
    /// The proposer that wrote the change (`tune`, `memory`, `lint`, `agent`).
    pub proposer: String,
    pub base: String,
    /// The proposer's change, as measured (the evidence commit is its child).
    pub measured_head: String,
    /// The metric named before the benchmark ran (the ledger's `metric-registered`), or none.
    pub metric: Option<String>,
    pub metric_reason: String,
    /// The ledger entry that registered it.
    pub registered_entry: Option<u64>,
    pub benchmark: Option<Benchmark>,
    /// For the registered metric: `improved`, `no significant change`, `regressed`,
    /// `not measured`, or `no metric named` (a code change benchmarked for regressions only).
    pub outcome: String,
    /// Metrics other than the registered one that regressed significantly.
    pub regressions: Vec<String>,
    pub validators: Vec<Validated>,
}

impl Evidence {
    /// The registered metric's delta.
    pub fn delta(&self) -> Option<&Delta> {
        let m = self.metric.as_deref()?;
        self.benchmark
            .as_ref()?
            .deltas
            .iter()
            .find(|d| d.metric == m)
    }

    /// `-1.20 [-2.00, -0.40]`.
    pub fn delta_text(&self) -> Option<String> {
        self.delta().map(delta_text)
    }

    /// Why the cycle must not submit this proposal without `--submit-anyway`: the registered
    /// metric regressed, more tasks failed (never a mere trade-off), a validator failed. Other
    /// metrics that regressed are trade-offs the evidence shows ([`Evidence::trade_offs`]).
    pub fn objections(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.outcome == "regressed" {
            out.push(format!(
                "the registered metric {} regressed ({})",
                self.metric.as_deref().unwrap_or_default(),
                self.delta_text().unwrap_or_default()
            ));
        }
        for r in self.regressions.iter().filter(|r| *r == GUARDED) {
            out.push(format!("{r} regressed"));
        }
        for v in self.validators.iter().filter(|v| v.failed()) {
            out.push(format!("the {} validator failed: {}", v.name, v.detail));
        }
        out
    }

    /// Metrics other than the registered one that regressed significantly but do not stop the
    /// cycle (more attempts for a larger failure budget, say): shown, not hidden.
    pub fn trade_offs(&self) -> Vec<String> {
        self.regressions
            .iter()
            .filter(|r| *r != GUARDED)
            .cloned()
            .collect()
    }

    /// What a reviewer reads.
    pub fn markdown(&self) -> String {
        let mut env = minijinja::Environment::new();
        env.set_auto_escape_callback(|_| minijinja::AutoEscape::None);
        env.add_template("evidence", TEMPLATE)
            .expect("the evidence template parses");
        let deltas: Vec<serde_json::Value> = self
            .benchmark
            .iter()
            .flat_map(|b| &b.deltas)
            .map(|d| {
                serde_json::json!({
                    "metric": d.metric,
                    "registered": Some(d.metric.as_str()) == self.metric.as_deref(),
                    "baseline": format!("{:.1}", d.baseline_mean),
                    "candidate": format!("{:.1}", d.candidate_mean),
                    "delta": delta_text(d),
                    "verdict": d.verdict,
                })
            })
            .collect();
        env.get_template("evidence")
            .expect("added above")
            .render(minijinja::value::Serde(serde_json::json!({
                "e": self,
                "deltas": deltas,
                "headline": self.headline(),
                "objections": self.objections(),
                "trade_offs": self.trade_offs(),
            })))
            .expect("the evidence template renders")
    }

    /// One sentence: what the registered metric did.
    pub fn headline(&self) -> String {
        match (&self.metric, self.delta_text()) {
            (Some(m), Some(d)) => match self.outcome.as_str() {
                "improved" => format!("{m} improved significantly: {d}."),
                "regressed" => format!("{m} REGRESSED significantly: {d}."),
                _ => format!("{m} did not change significantly: {d} (the interval includes 0)."),
            },
            _ => match &self.benchmark {
                Some(_) if self.metric.is_none() => {
                    let mut r: Vec<&str> = self.regressions.iter().map(String::as_str).collect();
                    r.dedup();
                    if r.is_empty() {
                        "No metric was named; the replay benchmark found no significant regression."
                            .to_string()
                    } else {
                        format!(
                            "No metric was named; the replay benchmark found significant regressions in {}.",
                            r.join(", ")
                        )
                    }
                }
                _ => format!(
                    "Not measured by the replay benchmark: {}",
                    self.metric_reason
                ),
            },
        }
    }
}

fn delta_text(d: &Delta) -> String {
    if d.low.is_finite() {
        format!("{:+.2} [{:+.2}, {:+.2}]", d.delta, d.low, d.high)
    } else {
        format!("{:+.2} (one seed: no interval)", d.delta)
    }
}

const TEMPLATE: &str = r#"# Evidence for proposal {{ e.proposal }}

Written by `atelier cycle` (proposer `{{ e.proposer }}`) for the change at `{{ e.measured_head }}`
on base `{{ e.base }}`. The machine-readable twin is `evidence.json`; `atelier audit show {{ e.proposal }}`
shows the ledger's record of the metric registration and of this evidence.

## The registered metric

{% if e.metric %}`{{ e.metric }}` (lower is better), named in the ledger{% if e.registered_entry is not none %} (entry {{ e.registered_entry }}){% endif %} before the benchmark ran: {{ e.metric_reason }}{% else %}None: {{ e.metric_reason }}{% endif %}

**{{ headline }}**
{% if objections %}
## Why the cycle would not submit it

{% for o in objections %}- {{ o }}
{% endfor %}{% endif %}{% if trade_offs %}
## Trade-offs

Besides the registered metric, these regressed significantly (they do not stop the cycle; weigh them):
{% for t in trade_offs %}- {{ t }}
{% endfor %}{% endif %}
{% if e.benchmark %}## The replay benchmark

Missions {{ e.benchmark.missions | join(", ") }}, {{ e.benchmark.seeds }} seeds, baseline and candidate interleaved.
{% if e.benchmark.drawn_from %}Seeds {{ e.benchmark.seed_values | join(", ") }}, drawn from ledger entry {{ e.benchmark.drawn_from.entry }} (leaf hash {{ e.benchmark.drawn_from.leaf }}), which registered the metric: they could not be known before it.
{% endif %}Interval: {{ e.benchmark.interval }}.

{% if e.benchmark.baseline_build %}Run by two builds of Atelier: the baseline by {{ e.benchmark.baseline_build }}, the candidate by {{ e.benchmark.candidate_build }}. The candidate's numbers are what its own `bench sample` reported from its own events, so the judge paths — the missions and the benchmark's code — must be unchanged, which the panel checks.

{% endif %}- baseline (the base's `[conductor]`): nudge_after {{ e.benchmark.baseline.nudge_after }}, restart_after {{ e.benchmark.baseline.restart_after }}, attempt_timeout {{ e.benchmark.baseline.attempt_timeout }}, failure_budget {{ e.benchmark.baseline.failure_budget }}
- candidate (this change): nudge_after {{ e.benchmark.candidate.nudge_after }}, restart_after {{ e.benchmark.candidate.restart_after }}, attempt_timeout {{ e.benchmark.candidate.attempt_timeout }}, failure_budget {{ e.benchmark.candidate.failure_budget }}

| metric | baseline | candidate | delta [95 % interval] | verdict |
|---|---|---|---|---|
{% for d in deltas %}| {% if d.registered %}**{{ d.metric }}** (registered){% else %}{{ d.metric }}{% endif %} | {{ d.baseline }} | {{ d.candidate }} | {{ d.delta }} | {{ d.verdict }} |
{% endfor %}
Means per seed, summed over the missions; every metric counts something where lower is better.
{% endif %}
## Validators

{% for v in e.validators %}- **{{ v.name }}**: {{ v.result }}. {{ v.detail }}
{% endfor %}
The review panel's verdict is recorded in the ledger for the change as it is (`atelier show {{ e.proposal }}`), not here: it judges this file too.
"#;

/// The metric a change to `[conductor]` is judged by, and why: the effect the change is meant
/// to have. `None` when `[conductor]` is unchanged (the benchmark would compare a configuration
/// with itself).
pub fn metric_for(
    base: &ConductorSettings,
    candidate: &ConductorSettings,
) -> Option<(String, String)> {
    let (b, c) = (base.restart_after.secs(), candidate.restart_after.secs());
    if c > b {
        return Some(("false_kills".into(), format!("restart_after raised from {} to {}: meant to stop killing workers that were about to deliver", base.restart_after, candidate.restart_after)));
    }
    if c < b {
        return Some((
            "wall_ms".into(),
            format!(
                "restart_after lowered from {} to {}: meant to restart stuck workers sooner",
                base.restart_after, candidate.restart_after
            ),
        ));
    }
    if candidate.failure_budget > base.failure_budget {
        return Some((
            "failed_tasks".into(),
            format!(
                "failure_budget raised from {} to {}: meant to let tasks that pass late pass",
                base.failure_budget, candidate.failure_budget
            ),
        ));
    }
    if candidate.failure_budget < base.failure_budget {
        return Some(("wasted_attempts".into(), format!("failure_budget lowered from {} to {}: meant to stop retrying tasks that do not pass", base.failure_budget, candidate.failure_budget)));
    }
    let (b, c) = (
        base.attempt_timeout.secs(),
        candidate.attempt_timeout.secs(),
    );
    if c != b {
        return Some(if c < b {
            (
                "wall_ms".into(),
                format!(
                    "attempt_timeout lowered from {} to {}: meant to end hopeless attempts sooner",
                    base.attempt_timeout, candidate.attempt_timeout
                ),
            )
        } else {
            (
                "failed_tasks".into(),
                format!(
                    "attempt_timeout raised from {} to {}: meant to let slow attempts finish",
                    base.attempt_timeout, candidate.attempt_timeout
                ),
            )
        });
    }
    let (b, c) = (base.nudge_after.secs(), candidate.nudge_after.secs());
    if c != b {
        return Some(if c < b {
            (
                "wall_ms".into(),
                format!(
                    "nudge_after lowered from {} to {}: meant to wake quiet workers sooner",
                    base.nudge_after, candidate.nudge_after
                ),
            )
        } else {
            (
                "nudges".into(),
                format!(
                    "nudge_after raised from {} to {}: meant to nudge less",
                    base.nudge_after, candidate.nudge_after
                ),
            )
        });
    }
    None
}

/// `--metric NAME` checked against the benchmark's metrics.
pub fn check_metric(name: &str) -> Result<(), String> {
    if METRICS.contains(&name) {
        Ok(())
    } else {
        Err(format!(
            "--metric {name}: not a replay metric (one of {})",
            METRICS.join(", ")
        ))
    }
}

/// The registered metric's outcome and the other metrics that regressed.
pub fn outcome(metric: Option<&str>, benchmark: Option<&Benchmark>) -> (String, Vec<String>) {
    let Some(b) = benchmark else {
        return ("not measured".into(), Vec::new());
    };
    let outcome = match metric {
        None => "no metric named".to_string(),
        Some(m) => b
            .deltas
            .iter()
            .find(|d| d.metric == m)
            .map_or("not measured".to_string(), |d| d.verdict.clone()),
    };
    let regressions = b
        .deltas
        .iter()
        .filter(|d| Some(d.metric.as_str()) != metric && d.verdict == "regressed")
        .map(|d| d.metric.clone())
        .collect();
    (outcome, regressions)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drawn_seeds_keep_their_positions_class_and_change_with_the_entry() {
        let a = draw_seeds(&"ab".repeat(32), 8);
        let b = draw_seeds(&"cd".repeat(32), 8);
        assert_eq!(a.len(), 8);
        assert_ne!(a, b);
        for (i, s) in a.iter().enumerate() {
            assert_eq!(s % 6, i as u64 % 6, "{a:?}");
            // Never a hand replay's 0..n.
            assert!(*s >= 6, "{a:?}");
        }
        assert_eq!(a, draw_seeds(&"ab".repeat(32), 8));
    }

    fn conductor(restart: &str, budget: u32) -> ConductorSettings {
        ConductorSettings {
            nudge_after: crate::config::Span::parse("300s").expect("a duration"),
            restart_after: crate::config::Span::parse(restart).expect("a duration"),
            attempt_timeout: crate::config::Span::parse("60m").expect("a duration"),
            failure_budget: budget,
        }
    }

    #[test]
    fn the_metric_follows_what_the_change_is_meant_to_do() {
        let cases = [
            (conductor("600s", 3), conductor("600s", 3), None),
            (conductor("60s", 3), conductor("2m", 3), Some("false_kills")),
            (conductor("600s", 3), conductor("5m", 3), Some("wall_ms")),
            (
                conductor("600s", 3),
                conductor("600s", 1),
                Some("wasted_attempts"),
            ),
            (
                conductor("600s", 1),
                conductor("600s", 3),
                Some("failed_tasks"),
            ),
            // restart_after comes first when both change.
            (
                conductor("60s", 3),
                conductor("120s", 1),
                Some("false_kills"),
            ),
            // The same duration written differently is no change.
            (conductor("600s", 3), conductor("10m", 3), None),
        ];
        for (b, c, want) in cases {
            assert_eq!(
                metric_for(&b, &c).map(|(m, _)| m).as_deref(),
                want,
                "{b:?} -> {c:?}"
            );
        }
    }

    fn delta(metric: &str, delta: f64, verdict: &str) -> Delta {
        Delta {
            metric: metric.into(),
            baseline_mean: 5.0,
            candidate_mean: 5.0 + delta,
            delta,
            low: delta - 0.5,
            high: delta + 0.5,
            verdict: verdict.into(),
        }
    }

    #[test]
    fn outcomes_objections_and_the_page_say_plainly_what_happened() {
        let b = Benchmark {
            seeds: 5,
            missions: vec!["flaky".into()],
            interval: "t".into(),
            baseline: conductor("600s", 3),
            candidate: conductor("600s", 1),
            baseline_build: None,
            candidate_build: None,
            seed_values: Vec::new(),
            drawn_from: None,
            deltas: vec![
                delta("wasted_attempts", -1.4, "improved"),
                delta("failed_tasks", 1.0, "regressed"),
                delta("attempts", 2.0, "regressed"),
                delta("nudges", 0.0, "no significant change"),
            ],
        };
        let (o, r) = outcome(Some("wasted_attempts"), Some(&b));
        assert_eq!(
            (o.as_str(), r.clone()),
            ("improved", vec!["failed_tasks".into(), "attempts".into()])
        );
        let e = Evidence {
            proposal: "3".into(),
            proposer: "tune".into(),
            base: "b".into(),
            measured_head: "h".into(),
            metric: Some("wasted_attempts".into()),
            metric_reason: "because".into(),
            registered_entry: Some(7),
            benchmark: Some(b),
            outcome: o,
            regressions: r,
            validators: vec![Validated {
                name: "user-testing".into(),
                result: "failed".into(),
                detail: "`./demo` exited with 3".into(),
            }],
        };
        assert_eq!(e.delta_text().as_deref(), Some("-1.40 [-1.90, -0.90]"));
        assert_eq!(
            e.objections(),
            [
                "failed_tasks regressed",
                "the user-testing validator failed: `./demo` exited with 3"
            ]
        );
        let md = e.markdown();
        for want in [
            "**wasted_attempts improved significantly: -1.40 [-1.90, -0.90].**",
            "| **wasted_attempts** (registered) | 5.0 | 3.6 | -1.40 [-1.90, -0.90] | improved |",
            "- failed_tasks regressed",
            "(entry 7)",
            "- **user-testing**: failed.",
            "## Trade-offs",
            "- attempts\n",
        ] {
            assert!(md.contains(want), "missing {want:?} in\n{md}");
        }
        assert_eq!(outcome(None, None).0, "not measured");
        let none = Evidence {
            metric: None,
            benchmark: None,
            outcome: "not measured".into(),
            regressions: vec![],
            validators: vec![],
            ..e
        };
        assert!(none.objections().is_empty());
        let traded = Evidence {
            regressions: vec!["attempts".into()],
            ..none.clone()
        };
        assert!(
            traded.objections().is_empty(),
            "a trade-off does not stop the cycle"
        );
        assert!(none
            .markdown()
            .contains("Not measured by the replay benchmark: because"));
    }
}
