//! The cycle's benchmark seeds: drawn from the ledger entry that registers its metric, so a
//! replay by hand before the cycle cannot run the cycle's exact benchmark; an auditor
//! recomputes them from the ledger.

use sha2::Digest;

use crate::cycle::{flaky_cycle, tuned, SCENARIO};

/// The ledger's lines, as stored (each line's bytes are its Merkle leaf).
fn ledger_lines(s: &crate::support::swarm::Swarm) -> Vec<String> {
    s.env
        .git(&["show", "refs/atelier/ledger:entries/00000000.jsonl"])
        .lines()
        .map(str::to_string)
        .collect()
}

/// What an auditor computes (docs/auditor.md): seed `i` is 6 × (h >> 8) + i mod 6, h the first
/// 8 bytes of SHA-256("atelier bench seed {i} {leaf}").
fn seeds_from(leaf: &str, n: u64) -> Vec<u64> {
    (0..n)
        .map(|i| {
            let d = sha2::Sha256::digest(format!("atelier bench seed {i} {leaf}").as_bytes());
            let h = u64::from_be_bytes(d[..8].try_into().expect("8 bytes"));
            6 * (h >> 8) + i % 6
        })
        .collect()
}

#[test]
fn the_cycles_seeds_are_drawn_from_its_registration_and_a_hand_replay_cannot_run_them() {
    let s = tuned(SCENARIO);
    // Before the cycle, the proposer previews the change (failure_budget 3 -> 1) by hand.
    s.env
        .write("base.toml", "[conductor]\nfailure_budget = 3\n");
    s.env
        .write("cand.toml", "[conductor]\nfailure_budget = 1\n");
    let base = s.env.repo.join("base.toml").display().to_string();
    let cand = s.env.repo.join("cand.toml").display().to_string();
    let preview = s.run(&[
        "bench",
        "replay",
        "--baseline-config",
        &base,
        "--candidate-config",
        &cand,
        "--seeds",
        "2",
        "--mission",
        "flaky",
        "--json",
    ]);
    assert_eq!(preview.code, 0, "{}", preview.stderr);
    assert!(
        preview.stderr.contains("these figures are not evidence"),
        "{}",
        preview.stderr
    );
    let preview = preview.json();
    let hand: Vec<u64> = preview["seed_values"]
        .as_array()
        .expect("seeds")
        .iter()
        .filter_map(serde_json::Value::as_u64)
        .collect();
    assert_eq!(hand, [0, 1]);
    std::fs::remove_file(s.env.repo.join("base.toml")).expect("rm");
    std::fs::remove_file(s.env.repo.join("cand.toml")).expect("rm");

    let r = flaky_cycle(&s, &["--json"]);
    let c = r.json();
    let b = &c["evidence"]["benchmark"];
    let drawn = &b["drawn_from"];
    let entry = c["registered"]["entry"]
        .as_u64()
        .expect("registration entry");
    assert_eq!(drawn["entry"].as_u64(), Some(entry), "{b}");
    // The auditor: the registration's line from the ledger, its leaf hash, the seeds.
    let line = ledger_lines(&s)
        .into_iter()
        .find(|l| {
            serde_json::from_str::<serde_json::Value>(l)
                .is_ok_and(|v| v["seq"].as_u64() == Some(entry))
        })
        .expect("the registration's line");
    let v: serde_json::Value = serde_json::from_str(&line).expect("json");
    assert_eq!(v["kind"], "metric-registered", "{line}");
    let draw = v["draw"].as_str().expect("random bits in the entry");
    assert_eq!(draw.len(), 32, "{draw}");
    let mut leaf = sha2::Sha256::new();
    leaf.update([0u8]);
    leaf.update(line.as_bytes());
    let leaf = hex::encode(leaf.finalize());
    assert_eq!(drawn["leaf"].as_str(), Some(leaf.as_str()), "{b}");
    let seeds: Vec<u64> = b["seed_values"]
        .as_array()
        .expect("seeds in the evidence")
        .iter()
        .filter_map(serde_json::Value::as_u64)
        .collect();
    assert_eq!(seeds, seeds_from(&leaf, 2));
    // None of them is a seed the hand replay ran.
    assert!(seeds.iter().all(|x| !hand.contains(x)), "{seeds:?}");
    // The evidence people read says where they came from.
    let id = c["proposal"].as_str().expect("proposal");
    let md = crate::cycle::on_branch(&s, id, "evidence.md");
    assert!(
        md.contains(&format!(
            "drawn from ledger entry {entry} (leaf hash {leaf})"
        )),
        "{md}"
    );
}
