//! One governed loop on every forge: the same scenario table (propose, approve, reject, gate,
//! merge, close, and their refusals) on the local forge and on GitHub, each step addressed by the
//! proposal id and by `--pr N`, with the same exit codes and unmet requirements.

use serde_json::Value;

use crate::support::github::Fault;
use crate::support::hub::Hub;
use crate::support::{unmet, Env, Run};

enum Forge {
    Local(Env),
    GitHub(Box<Hub>),
}

impl Forge {
    fn env(&self) -> &Env {
        match self {
            Forge::Local(env) => env,
            Forge::GitHub(hub) => &hub.env,
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Forge::Local(_) => "local",
            Forge::GitHub(_) => "github",
        }
    }

    /// Runs atelier as `who` (on GitHub with their token; the gate's is the bot's).
    fn run(&self, who: Option<&str>, args: &[&str]) -> Run {
        match self {
            Forge::Local(env) => env.atelier(args),
            Forge::GitHub(hub) => {
                let token = who.map_or("bot-token".to_string(), |w| format!("{w}-token"));
                hub.run(&token, args)
            }
        }
    }

    /// Proposes a change (and on GitHub submits it): the proposal id and pull request.
    fn propose(&self, change: Change) -> (String, u64) {
        let env = self.env();
        let id = match change {
            Change::Code => env.propose_code(),
            // A token-shaped literal (assembled here so this file carries none): the `secrets`
            // reviewer blocks it, whoever wrote it.
            Change::Secret => env.propose(
                &[(
                    "src/lib.rs",
                    &format!(
                        "pub const TOKEN: &str = \"gh{}_{}\";\n",
                        "p", "Zq8xR2mK7vT4nB9wL3pY6cJ1hF5dS0aGe2Qw"
                    ),
                )],
                "Add the deploy token",
            ),
        };
        match self {
            Forge::Local(_) => {
                let n = id.parse().expect("a number");
                (id, n)
            }
            Forge::GitHub(hub) => {
                let out = hub.run("bot-token", &["submit", &id, "--json"]).ok();
                (id, out.json()["pull"].as_u64().expect("pull number"))
            }
        }
    }
}

/// What a scenario proposes.
#[derive(Clone, Copy, Debug)]
enum Change {
    /// A plain code change.
    Code,
    /// A change the review panel blocks.
    Secret,
}

#[derive(Clone, Copy, Debug)]
enum Step {
    /// `review`: exit code (0 approve, 1 revise or block); the verdict is recorded.
    Review(i32),
    Approve(&'static str),
    /// `approve` by a signer the gate will not count: recorded, exit 1 with why.
    ApproveUncounted(&'static str),
    Reject(&'static str),
    /// `gate`: exit code and unmet requirement codes.
    Gate(i32, &'static [&'static str]),
    /// `merge`: exit code.
    Merge(i32),
    Close,
    /// `approve` by alice after the proposal is finished: refused.
    ApproveRefused(&'static str),
}

const SCENARIOS: &[(&str, Change, &[Step])] = &[
    (
        "an approved change merges, and nothing more happens to it",
        Change::Code,
        &[
            Step::Review(0),
            Step::Gate(1, &["E_QUORUM_NOT_MET"]),
            Step::Merge(1),
            Step::Approve("alice"),
            Step::Gate(0, &[]),
            Step::Merge(0),
            Step::Gate(1, &["E_NOT_OPEN"]),
            Step::ApproveRefused("E_NOT_OPEN"),
        ],
    ),
    (
        "a rejection vetoes an approved change",
        Change::Code,
        &[
            Step::Approve("alice"),
            Step::Reject("bob"),
            Step::Gate(1, &["E_VETOED"]),
            Step::Merge(1),
        ],
    ),
    (
        "a key allowed_signers does not list does not count",
        Change::Code,
        &[
            Step::ApproveUncounted("mallory"),
            Step::Gate(1, &["E_QUORUM_NOT_MET"]),
        ],
    ),
    (
        "a change the review panel blocks merges only once the constitution quorum overrules it",
        Change::Secret,
        &[
            Step::Gate(1, &["E_REVIEW_BLOCKED", "E_QUORUM_NOT_MET"]),
            Step::Review(1),
            Step::Approve("alice"),
            Step::Gate(1, &["E_REVIEW_BLOCKED"]),
            Step::Merge(1),
            Step::Approve("bob"),
            Step::Gate(0, &[]),
            Step::Merge(0),
        ],
    ),
    (
        "a closed proposal takes no approvals and never merges",
        Change::Code,
        &[
            Step::Approve("alice"),
            Step::Close,
            Step::Gate(1, &["E_NOT_OPEN"]),
            Step::Merge(1),
            Step::ApproveRefused("E_NOT_OPEN"),
        ],
    ),
];

fn forges() -> Vec<Forge> {
    vec![
        Forge::Local(Env::new()),
        Forge::GitHub(Box::new(Hub::new())),
    ]
}

/// The outcome of one step, for comparing forges.
fn play(forge: &Forge, id: &str, n: u64, i: usize, step: Step) -> (i32, Vec<String>) {
    // Alternate the addressings: even steps by proposal id, odd ones by pull request number.
    let pr = n.to_string();
    let addr: Vec<&str> = if i.is_multiple_of(2) {
        vec![id]
    } else {
        vec!["--pr", &pr]
    };
    let env = forge.env();
    let with = |verb: &str, extra: &[&str]| {
        let mut args = vec![verb];
        args.extend(addr.iter().copied());
        args.extend_from_slice(extra);
        args.into_iter().map(str::to_string).collect::<Vec<_>>()
    };
    let key = |who: &str| env.key(who).to_str().expect("utf8").to_string();
    let run = |who: Option<&str>, args: Vec<String>| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        forge.run(who, &args)
    };
    match step {
        Step::Approve(who) | Step::ApproveUncounted(who) | Step::Reject(who) => {
            let k = key(who);
            let mut extra = vec!["--key", k.as_str(), "--post"];
            if matches!(step, Step::Reject(_)) {
                extra.push("--reject");
            }
            let r = run(Some(who), with("approve", &extra));
            // 1: recorded, but the gate will not count it (the same on both forges).
            assert!(
                r.code == 0 || r.code == 1,
                "{}: {step:?}: {r:?}",
                forge.name()
            );
            (r.code, Vec::new())
        }
        Step::ApproveRefused(code) => {
            let k = key("alice");
            let r = run(
                Some("alice"),
                with("approve", &["--key", k.as_str(), "--post"]),
            );
            assert!(r.stderr.contains(code), "{}: {r:?}", forge.name());
            (r.code, vec![code.to_string()])
        }
        Step::Gate(..) => {
            let r = run(None, with("gate", &["--json"]));
            let v: Value = r.json();
            (r.code, unmet(&v))
        }
        Step::Merge(_) => {
            let r = run(None, with("merge", &["--json"]));
            (r.code, Vec::new())
        }
        Step::Review(_) => {
            let r = run(None, with("review", &["--json"]));
            assert!(r.code == 0 || r.code == 1, "{}: {r:?}", forge.name());
            (
                r.code,
                vec![r.json()["verdict"].as_str().unwrap_or("?").to_string()],
            )
        }
        Step::Close => {
            let r = forge.run(None, &["close", id, "--reason", "superseded"]);
            (r.code, Vec::new())
        }
    }
}

/// Whether an outcome is what the step expects: the exit code, and at least the listed codes.
fn meets(step: Step, (code, codes): &(i32, Vec<String>)) -> bool {
    let (want, listed): (i32, &[&str]) = match step {
        Step::Gate(code, codes) => (code, codes),
        Step::Merge(code) | Step::Review(code) => (code, &[]),
        Step::ApproveRefused(_) => (1, &[]),
        Step::Approve(_) | Step::Reject(_) | Step::Close => (0, &[]),
        Step::ApproveUncounted(_) => (1, &[]),
    };
    *code == want && listed.iter().all(|l| codes.iter().any(|c| c == l))
}

#[test]
fn the_same_scenarios_give_the_same_outcomes_on_both_forges() {
    for (name, change, steps) in SCENARIOS {
        let mut outcomes = Vec::new();
        for forge in forges() {
            let env = forge.env();
            // A key no allowed_signers line lists.
            env.keygen("mallory");
            let (id, n) = forge.propose(*change);
            let mut got = Vec::new();
            for (i, step) in steps.iter().enumerate() {
                let outcome = play(&forge, &id, n, i, *step);
                assert!(
                    meets(*step, &outcome),
                    "{name}: step {i} {step:?} on the {} forge: {outcome:?}",
                    forge.name()
                );
                got.push(outcome);
            }
            // Whatever happened, the history verifies.
            let verify = env.atelier(&["audit", "verify"]);
            assert_eq!(verify.code, 0, "{name} on {}: {verify:?}", forge.name());
            outcomes.push(got);
        }
        assert_eq!(outcomes[0], outcomes[1], "{name}: local, then GitHub");
    }
}

#[test]
fn a_proposal_id_names_its_submitted_pull_request_on_github() {
    let hub = Hub::new();
    let id = hub.env.propose_code();
    // Not submitted yet: there is no pull request to judge.
    let run = hub.run("bot-token", &["gate", &id]).code(1);
    assert!(run.stderr.contains("E_NOT_PUBLISHED"), "{run:?}");
    assert!(run.stderr.contains("atelier submit"), "{run:?}");
    let n = hub.run("bot-token", &["submit", &id, "--json"]).ok().json()["pull"]
        .as_u64()
        .expect("pull");
    let by_id = hub.run("bot-token", &["gate", &id, "--json"]).json();
    let by_pr = hub
        .run("bot-token", &["gate", "--pr", &n.to_string(), "--json"])
        .json();
    assert_eq!(by_id["proposal"], by_pr["proposal"]);
    assert_eq!(by_id["head"], by_pr["head"]);
    assert_eq!(unmet(&by_id), unmet(&by_pr));
}

#[test]
fn closing_a_proposal_on_github_closes_its_pull_request_and_publishes_the_ledger() {
    let hub = Hub::new();
    let n = hub.submitted();
    hub.run("bot-token", &["close", "1", "--reason", "superseded by 2"])
        .ok();
    let pr = hub.emu.pull(n);
    assert_eq!(pr["state"], "closed", "{pr:#}");
    assert!(
        hub.emu
            .comments(n)
            .iter()
            .any(|c| c["body"].as_str().unwrap_or("").contains("superseded by 2")),
        "the pull request says why"
    );
    // The remote's ledger records the close: a fresh clone's audit log shows it.
    let audit = hub.auditor_clone();
    let log = hub.env.atelier_in(&audit, &["audit", "log"]).ok();
    assert!(log.stdout.contains("closed"), "{}", log.stdout);
    // Closing again, or reopening the pull request on GitHub, changes nothing.
    hub.run("bot-token", &["close", "1"]).code(1);
    let (code, v) = hub.gate(n);
    assert_eq!(code, 1);
    assert!(unmet(&v).contains(&"E_NOT_OPEN".to_string()), "{v:#}");
}

#[test]
fn a_proposal_the_ledger_finished_cannot_be_closed_from_an_edited_record() {
    let env = Env::new();
    let id = env.propose_code();
    env.approve(&id, "alice").ok();
    env.atelier(&["merge", &id]).ok();
    // Someone edits the forge record back to open.
    let path = env.repo.join(".atelier/forge/pulls/1.json");
    let record = std::fs::read_to_string(&path).expect("record");
    std::fs::write(&path, record.replace("\"merged\"", "\"open\"")).expect("write");
    let run = env.atelier(&["close", &id]).code(1);
    assert!(run.stderr.contains("E_NOT_OPEN"), "{run:?}");
    env.atelier(&["audit", "verify"]).ok();
}

#[test]
fn a_close_the_forge_refused_to_finish_is_finished_by_running_it_again() {
    let hub = Hub::new();
    let n = hub.submitted();
    hub.emu.inject(Fault::Respond {
        method: "PATCH".into(),
        path: format!("/repos/acme/widgets/pulls/{n}"),
        times: 1,
        status: 422,
        headers: Vec::new(),
        body: r#"{"message":"Validation Failed"}"#.into(),
    });
    let first = hub.run("bot-token", &["close", "1"]).ok();
    assert!(
        first.stderr.contains("run `atelier close 1` again"),
        "{first:?}"
    );
    assert_eq!(hub.emu.pull(n)["state"], "open");
    // The ledger already says closed: nothing merges meanwhile.
    let (code, v) = hub.gate(n);
    assert_eq!(code, 1);
    assert!(unmet(&v).contains(&"E_NOT_OPEN".to_string()), "{v:#}");
    hub.run("bot-token", &["close", "1"]).ok();
    assert_eq!(hub.emu.pull(n)["state"], "closed");
    let again = hub.run("bot-token", &["close", "1"]).code(1);
    assert!(again.stderr.contains("E_NOT_OPEN"), "{again:?}");
}
