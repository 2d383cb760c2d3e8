//! The cycle's metric: registered first, a regression recorded not submitted, `--submit-anyway`,
//! and the improvement curve.

use serde_json::Value;

use crate::cycle::{flaky_cycle, improvements, ledger, on_branch, tuned, SCENARIO};
use crate::support::swarm::Swarm;

fn kinds_of(s: &Swarm, id: &str) -> Vec<String> {
    ledger(s)
        .iter()
        .filter(|e| e["proposal"] == id)
        .map(|e| e["kind"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn a_tune_cycle_registers_its_metric_first_and_a_regression_is_recorded_not_submitted() {
    let s = tuned(SCENARIO);
    let r = flaky_cycle(&s, &["--json"]);
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    let c = r.json();
    let id = c["proposal"].as_str().expect("a proposal").to_string();
    // Budget 1 instead of 3: the flaky mission's late passers now fail, every seed.
    assert_eq!(c["registered"]["metric"], "wasted_attempts", "{c}");
    assert_eq!(c["submitted"], false);
    let stopped = c["stopped"].as_str().expect("why it stopped");
    assert!(
        stopped.contains("not submitted: failed_tasks regressed"),
        "{stopped}"
    );
    let e = &c["evidence"];
    assert_eq!(e["outcome"], "no significant change", "{e}");
    assert_eq!(e["regressions"][0], "failed_tasks");
    let user = e["validators"]
        .as_array()
        .and_then(|v| v.iter().find(|v| v["name"] == "user-testing"))
        .expect("the user-testing validator");
    assert_eq!(user["result"], "passed", "{user}");
    assert!(
        r.stderr.contains("cycle [register]") && r.stderr.contains("cycle [benchmark]"),
        "{}",
        r.stderr
    );

    // The ledger: registered before the evidence, for the head that was measured, then the
    // panel's verdict on the change as it now is, then closed.
    let kinds = kinds_of(&s, &id);
    assert_eq!(
        kinds,
        [
            "proposal-opened",
            "metric-registered",
            "evidence-recorded",
            "review-recorded",
            "closed"
        ],
        "{kinds:?}"
    );
    let entries = ledger(&s);
    let reg = entries
        .iter()
        .find(|x| x["kind"] == "metric-registered")
        .expect("registered");
    assert_eq!(reg["head"], e["measured_head"]);
    assert_eq!(reg["seq"], e["registered_entry"]);
    assert_eq!(reg["missions"][0], "flaky");
    let evidence_head = c["evidence_head"].as_str().expect("evidence head");
    assert_eq!(
        s.env
            .git(&["rev-parse", &format!("atelier/proposals/{id}")])
            .trim(),
        evidence_head
    );
    assert_eq!(
        s.env
            .git(&["rev-parse", &format!("{evidence_head}^")])
            .trim(),
        e["measured_head"].as_str().expect("measured")
    );

    // The record people read, committed on the branch.
    let md = on_branch(&s, &id, "evidence.md");
    for want in [
        "wasted_attempts did not change significantly",
        "- failed_tasks regressed",
        "| **wasted_attempts** (registered)",
        "**user-testing**: passed",
    ] {
        assert!(md.contains(want), "missing {want:?}:\n{md}");
    }
    let json: Value = serde_json::from_str(&on_branch(&s, &id, "evidence.json")).expect("json");
    assert_eq!(json["metric"], "wasted_attempts");
    let listed = s.run(&["proposals", "--json"]).ok().json();
    assert_eq!(listed[0]["state"], "closed", "{listed}");
}

#[test]
fn submit_anyway_submits_and_the_improvement_curve_shows_what_merged() {
    let s = tuned(SCENARIO);
    let r = flaky_cycle(&s, &["--submit-anyway"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let id = r
        .stdout
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("proposal "))
        .expect("id")
        .to_string();
    // atelier.toml is in the constitution: two approvals.
    assert!(
        r.stdout.contains("awaiting approval: 0 of 2")
            && r.stdout
                .contains(&format!("to approve: atelier approve {id} --key")),
        "{}",
        r.stdout
    );
    assert!(
        r.stderr
            .contains("submitted anyway (--submit-anyway) despite: failed_tasks regressed"),
        "{}",
        r.stderr
    );
    assert_eq!(
        s.run(&["proposals", "--improvements"])
            .ok()
            .stdout
            .lines()
            .nth(1),
        Some("(no merged proposals from `atelier cycle` yet)")
    );
    s.env.approve(&id, "alice").ok();
    s.env.approve(&id, "bob").ok();
    s.run(&["merge", &id]).ok();
    let curve = s
        .run(&["proposals", "--improvements", "--json"])
        .ok()
        .json();
    let row = &curve[0];
    assert_eq!(row["proposal"], id.as_str(), "{curve}");
    assert_eq!(row["metric"], "wasted_attempts");
    assert_eq!(row["outcome"], "no significant change");
    assert!(row["delta"]["low"].is_number(), "{row}");
    assert!(row["warning"].is_null(), "{row}");
    let text = s.run(&["proposals", "--improvements"]).ok().stdout;
    assert!(
        text.contains("wasted_attempts") && text.contains("no significant change"),
        "{text}"
    );
    // Merged onto the base it was measured on: nothing to warn about, though main moved (to
    // the merge itself).
    let shown = s.run(&["show", &id]).ok().stdout;
    assert!(
        shown.contains("evidence (atelier cycle") && !shown.contains("moved since"),
        "{shown}"
    );
}

/// A registration is once per proposal, not once per change: the same change can be
/// put through the cycle again under a new proposal with another `--metric`, and the one whose
/// metric came out best merged. The improvement curve shows it as a clean pre-registered
/// result, with nothing about the other registrations of the identical change.
#[test]
fn the_metric_can_be_shopped_by_running_the_same_change_through_the_cycle_again() {
    let s = tuned(SCENARIO);
    let first = flaky_cycle(
        &s,
        &["--metric", "failed_tasks", "--submit-anyway", "--json"],
    );
    assert_eq!(first.code, 0, "{}", first.stderr);
    let first = first.json();
    assert_eq!(first["evidence"]["outcome"], "regressed", "{first}");
    // Not the result wanted: again, same change, another metric.
    let second = flaky_cycle(
        &s,
        &["--metric", "wasted_attempts", "--submit-anyway", "--json"],
    );
    assert_eq!(second.code, 0, "{}", second.stderr);
    let second = second.json();
    let (a, b) = (
        first["proposal"].as_str().expect("id"),
        second["proposal"].as_str().expect("id"),
    );
    assert_ne!(a, b);
    // The same atelier.toml measured twice (the records differ only by their folder).
    let diff = s.env.git(&[
        "diff",
        "--stat",
        first["evidence"]["measured_head"].as_str().expect("head"),
        second["evidence"]["measured_head"].as_str().expect("head"),
        "--",
        ".",
        ":(exclude)proposals",
    ]);
    assert!(diff.trim().is_empty(), "setup: the same change: {diff}");
    s.env.approve(b, "alice").ok();
    s.env.approve(b, "bob").ok();
    s.run(&["merge", b]).ok();
    let curve = improvements(&s);
    let row = &curve[0];
    assert_eq!(row["proposal"], b, "{curve}");
    assert!(
        row["warning"].as_str().is_some_and(|w| w.contains(a)),
        "the curve shows {b}'s metric as pre-registered, though the same change was registered as proposal {a} with failed_tasks (which regressed): {row:#}"
    );
}
