//! The gate's decision table: each case a policy, a set of tokens and the requirements unmet.

use std::collections::BTreeMap;

use atelier::governance::decision::{decide, Change, GateInput};
use atelier::governance::policy::{Policy, PolicyError, PolicyFiles, DEFAULT_GOVERNANCE_TOML};
use atelier::governance::token::{self, Payload, RawToken, Verdict};
use ed25519_dalek::SigningKey;

const NOW: i64 = 1_795_946_400; // 2026-11-29T10:00:00Z

fn key(seed: u8) -> SigningKey {
    SigningKey::from_bytes(&[seed; 32])
}

fn openssh(k: &SigningKey) -> String {
    let pk = ssh_key::PublicKey::new(
        ssh_key::public::KeyData::Ed25519(ssh_key::public::Ed25519PublicKey(
            k.verifying_key().to_bytes(),
        )),
        "",
    );
    pk.to_openssh().expect("encodes")
}

fn fingerprint(k: &SigningKey) -> String {
    token::fingerprint(&ssh_key::public::KeyData::Ed25519(
        ssh_key::public::Ed25519PublicKey(k.verifying_key().to_bytes()),
    ))
}

const ALICE: u8 = 1;

const BOB: u8 = 2;

const CAROL: u8 = 3;

const GATE: u8 = 9;

struct Scenario {
    governance: String,
    signers: String,
    /// The allowed_signers the change would install, when it differs from the base's.
    new_signers: Option<String>,
    change: Change,
    tokens: Vec<RawToken>,
    now: i64,
}

fn payload(change: &Change) -> Payload {
    Payload {
        repository: change.repository.clone(),
        proposal: change.proposal.clone(),
        pull: change.pull,
        base: change.base.clone(),
        head: change.head.clone(),
        merge_tree: change.merge_tree.clone().expect("a tree"),
        policy: change.policy_digest.clone(),
        decision: Verdict::Approve,
        issued: NOW - 60,
        expires: NOW + 86_400,
        nonce: String::new(),
        checkpoint: None,
    }
}

impl Scenario {
    fn new() -> Scenario {
        Scenario {
            governance: DEFAULT_GOVERNANCE_TOML.to_string(),
            signers: format!(
                "alice@x {}\nbob@x {}\n",
                openssh(&key(ALICE)),
                openssh(&key(BOB))
            ),
            new_signers: None,
            change: Change {
                repository: "local/r".into(),
                proposal: "4".into(),
                pull: 4,
                open: true,
                base: "b".repeat(40),
                head: "c".repeat(40),
                merge_tree: Ok("d".repeat(40)),
                changed_paths: vec!["src/lib.rs".into()],
                policy_digest: "e".repeat(64),
                proposer: Some("pat@x".into()),
            },
            tokens: Vec::new(),
            now: NOW,
        }
    }

    /// Adds a token by `seed`, its payload edited by `edit`.
    fn sign(&mut self, seed: u8, edit: impl Fn(&mut Payload)) {
        let mut p = payload(&self.change);
        p.nonce = format!("{:032x}", self.tokens.len() + 1);
        edit(&mut p);
        self.tokens.push(token::sign(&p, &key(seed)));
    }

    fn run(&self) -> (bool, Vec<&'static str>, Vec<&'static str>) {
        let files = PolicyFiles {
            governance: Some(self.governance.clone().into_bytes()),
            allowed_signers: Some(self.signers.clone().into_bytes()),
            gate_key: Some(openssh(&key(GATE)).into_bytes()),
        };
        let base: Result<Policy, PolicyError> = Policy::load(&files);
        let new = match &self.new_signers {
            None => base.clone(),
            Some(signers) => Policy::load(&PolicyFiles {
                allowed_signers: Some(signers.clone().into_bytes()),
                ..files.clone()
            }),
        };
        let roots = BTreeMap::new();
        let d = decide(&GateInput {
            change: &self.change,
            base_policy: &base,
            new_policy: &new,
            tokens: &self.tokens,
            ledger_roots: &roots,
            panel: &atelier::governance::review::PanelInput::quiet(),
            evidence: &atelier::governance::decision::Evidence::NotACycle,
            now: self.now,
        });
        (
            d.allowed,
            d.unmet().map(|r| r.code.as_str()).collect(),
            d.tokens.iter().map(|t| t.code_text()).collect(),
        )
    }
}

type Case = (
    &'static str,
    fn(&mut Scenario),
    &'static [&'static str],
    &'static [&'static str],
);

const CASES: &[Case] = &[
    ("no token", |_| {}, &["E_QUORUM_NOT_MET"], &[]),
    ("one approval", |s| s.sign(ALICE, |_| {}), &[], &["OK"]),
    (
        "a veto",
        |s| {
            s.sign(ALICE, |_| {});
            s.sign(BOB, |p| p.decision = Verdict::Reject);
        },
        &["E_VETOED"],
        &["OK", "OK"],
    ),
    (
        "unknown signer",
        |s| s.sign(CAROL, |_| {}),
        &["E_QUORUM_NOT_MET"],
        &["E_UNKNOWN_SIGNER"],
    ),
    (
        "the gate key",
        |s| s.sign(GATE, |_| {}),
        &["E_QUORUM_NOT_MET"],
        &["E_GATE_KEY_SIGNER"],
    ),
    (
        "the proposer",
        |s| {
            s.change.proposer = Some("alice@x".into());
            s.sign(ALICE, |_| {});
        },
        &["E_QUORUM_NOT_MET"],
        &["E_PROPOSER_SIGNER"],
    ),
    (
        "a bot",
        |s| {
            s.governance = s.governance.replace("bots = []", "bots = [\"alice@x\"]");
            s.sign(ALICE, |_| {});
        },
        &["E_QUORUM_NOT_MET"],
        &["E_BOT_SIGNER"],
    ),
    (
        "a revoked key",
        |s| {
            s.governance.push_str(&format!(
                "\n[[revoked]]\nkey = \"{}\"\n",
                fingerprint(&key(ALICE))
            ));
            s.sign(ALICE, |_| {});
        },
        &["E_QUORUM_NOT_MET"],
        &["E_KEY_REVOKED"],
    ),
    (
        "a key restricted to another namespace",
        |s| {
            s.signers = s.signers.replace("alice@x ", "alice@x namespaces=\"git\" ");
            s.sign(ALICE, |_| {});
        },
        &["E_QUORUM_NOT_MET"],
        &["E_SIGNER_NAMESPACE"],
    ),
    (
        "one key under two principals",
        |s| {
            s.signers
                .push_str(&format!("mallory@x {}\n", openssh(&key(ALICE))));
            s.sign(ALICE, |_| {});
        },
        &["E_QUORUM_NOT_MET"],
        &["E_AMBIGUOUS_SIGNER"],
    ),
    (
        "valid-before is inclusive, like OpenSSH",
        |s| {
            s.signers = s
                .signers
                .replace("alice@x ", "alice@x valid-before=\"20261129100000Z\" ");
            s.sign(ALICE, |_| {});
        },
        &[],
        &["OK"],
    ),
    (
        "one second after valid-before",
        |s| {
            s.signers = s
                .signers
                .replace("alice@x ", "alice@x valid-before=\"20261129095959Z\" ");
            s.sign(ALICE, |_| {});
        },
        &["E_QUORUM_NOT_MET"],
        &["E_KEY_OUTSIDE_VALIDITY"],
    ),
    (
        "namespace from one line and validity from another do not combine",
        |s| {
            let key = openssh(&key(ALICE));
            s.signers = s.signers.replace(
                &format!("alice@x {key}"),
                &format!(
                    "alice@x namespaces=\"atelier-approval\",valid-before=\"20200101Z\" {key}\nalice@x namespaces=\"git\" {key}"
                ),
            );
            s.sign(ALICE, |_| {});
        },
        &["E_QUORUM_NOT_MET"],
        &["E_KEY_OUTSIDE_VALIDITY"],
    ),
    (
        "one line allows the namespace now, another is expired",
        |s| {
            let key = openssh(&key(ALICE));
            s.signers = s.signers.replace(
                &format!("alice@x {key}"),
                &format!("alice@x valid-before=\"20200101Z\" {key}\nalice@x namespaces=\"atelier-approval\" {key}"),
            );
            s.sign(ALICE, |_| {});
        },
        &[],
        &["OK"],
    ),
    (
        "expired at exactly now",
        |s| s.sign(ALICE, |p| p.expires = NOW),
        &["E_QUORUM_NOT_MET"],
        &["E_TOKEN_EXPIRED"],
    ),
    (
        "one second before expiry",
        |s| s.sign(ALICE, |p| p.expires = NOW + 1),
        &[],
        &["OK"],
    ),
    (
        "issued within the clock skew",
        |s| s.sign(ALICE, |p| p.issued = NOW + 300),
        &[],
        &["OK"],
    ),
    (
        "issued beyond the clock skew",
        |s| s.sign(ALICE, |p| p.issued = NOW + 301),
        &["E_QUORUM_NOT_MET"],
        &["E_TOKEN_NOT_YET_VALID"],
    ),
    (
        "a lifetime over the maximum",
        |s| s.sign(ALICE, |p| p.expires = p.issued + 30 * 86_400 + 1),
        &["E_QUORUM_NOT_MET"],
        &["E_TOKEN_LIFETIME"],
    ),
    (
        "expires before issued",
        |s| s.sign(ALICE, |p| p.expires = p.issued),
        &["E_QUORUM_NOT_MET"],
        &["E_TOKEN_LIFETIME"],
    ),
    (
        "another repository",
        |s| s.sign(ALICE, |p| p.repository = "local/other".into()),
        &["E_QUORUM_NOT_MET"],
        &["E_WRONG_REPOSITORY"],
    ),
    (
        "another proposal",
        |s| s.sign(ALICE, |p| p.proposal = "5".into()),
        &["E_QUORUM_NOT_MET"],
        &["E_WRONG_PROPOSAL"],
    ),
    (
        "another pull",
        |s| s.sign(ALICE, |p| p.pull = 5),
        &["E_QUORUM_NOT_MET"],
        &["E_WRONG_PULL"],
    ),
    (
        "a stale head",
        |s| s.sign(ALICE, |p| p.head = "f".repeat(40)),
        &["E_QUORUM_NOT_MET"],
        &["E_STALE_HEAD"],
    ),
    (
        "a stale base",
        |s| s.sign(ALICE, |p| p.base = "f".repeat(40)),
        &["E_QUORUM_NOT_MET"],
        &["E_STALE_BASE"],
    ),
    (
        "another merge tree",
        |s| s.sign(ALICE, |p| p.merge_tree = "f".repeat(40)),
        &["E_QUORUM_NOT_MET"],
        &["E_MERGE_TREE_MISMATCH"],
    ),
    (
        "another policy",
        |s| s.sign(ALICE, |p| p.policy = "f".repeat(64)),
        &["E_QUORUM_NOT_MET"],
        &["E_POLICY_DIGEST_MISMATCH"],
    ),
    (
        "a checkpoint the ledger never had",
        |s| {
            s.sign(ALICE, |p| {
                p.checkpoint = Some(token::SeenCheckpoint {
                    size: 3,
                    root: "a".repeat(64),
                })
            })
        },
        &["E_LEDGER_ROLLBACK", "E_QUORUM_NOT_MET"],
        &["E_CHECKPOINT_MISMATCH"],
    ),
    (
        "the same principal twice",
        |s| {
            s.change.changed_paths = vec!["GOVERNANCE.md".into()];
            s.sign(ALICE, |_| {});
            s.sign(ALICE, |_| {});
        },
        &["E_CONSTITUTION_QUORUM", "E_NEW_POLICY_QUORUM"],
        &["OK", "E_DUPLICATE_PRINCIPAL"],
    ),
    (
        "the same token twice",
        |s| {
            s.sign(ALICE, |_| {});
            let t = s.tokens[0].clone();
            s.tokens.push(t);
        },
        &[],
        &["OK", "E_DUPLICATE_TOKEN"],
    ),
    (
        "a constitution change with two",
        |s| {
            s.change.changed_paths = vec![
                "policies/allowed_signers".into(),
                "src/audit/ledger.rs".into(),
            ];
            s.sign(ALICE, |_| {});
            s.sign(BOB, |_| {});
        },
        &[],
        &["OK", "OK"],
    ),
    (
        "a rule restricted to approvers",
        |s| {
            s.governance.push_str("\n[[rule]]\nname = \"docs\"\npaths = [\"docs/**\"]\nquorum = 1\napprovers = [\"bob@x\"]\n");
            s.change.changed_paths = vec!["docs/guide.md".into()];
            s.sign(ALICE, |_| {});
        },
        &["E_QUORUM_NOT_MET"],
        &["OK"],
    ),
    (
        "a copied nonce does not hide a veto",
        |s| {
            s.sign(ALICE, |p| p.nonce = "a".repeat(32));
            s.sign(BOB, |p| {
                p.nonce = "a".repeat(32);
                p.decision = Verdict::Reject;
            });
        },
        &["E_VETOED"],
        &["OK", "OK"],
    ),
    (
        "a veto outlives a moved base",
        |s| {
            s.sign(ALICE, |_| {});
            s.sign(BOB, |p| {
                p.base = "f".repeat(40);
                p.merge_tree = "f".repeat(40);
                p.decision = Verdict::Reject;
            });
        },
        &["E_VETOED"],
        &["OK", "OK"],
    ),
    (
        "a veto given on another pull request of the same proposal still vetoes",
        |s| {
            s.sign(ALICE, |_| {});
            s.sign(BOB, |p| {
                p.pull = 5;
                p.decision = Verdict::Reject;
            });
        },
        &["E_VETOED"],
        &["OK", "OK"],
    ),
    (
        "a veto on an older head is stale",
        |s| {
            s.sign(ALICE, |_| {});
            s.sign(BOB, |p| {
                p.head = "f".repeat(40);
                p.decision = Verdict::Reject;
            });
        },
        &[],
        &["OK", "E_STALE_HEAD"],
    ),
    (
        "principals compare case-insensitively",
        |s| {
            s.change.proposer = Some("Alice@X".into());
            s.sign(ALICE, |_| {});
        },
        &["E_QUORUM_NOT_MET"],
        &["E_PROPOSER_SIGNER"],
    ),
    (
        "an empty change",
        |s| {
            s.change.changed_paths = Vec::new();
            s.sign(ALICE, |_| {});
        },
        &["E_EMPTY_CHANGE"],
        &["OK"],
    ),
    (
        "a path no rule covers fails closed",
        |s| {
            s.governance = s
                .governance
                .replace("paths = [\"**\"]", "paths = [\"src/**\"]");
            s.change.changed_paths = vec!["src/lib.rs".into(), "notes.txt".into()];
            s.sign(ALICE, |_| {});
        },
        &["E_NO_RULE"],
        &["OK"],
    ),
    (
        "a change that narrows an approver's line to another namespace loses that approver's \
         new-policy approval",
        |s| {
            s.change.changed_paths = vec!["policies/allowed_signers".into()];
            s.new_signers = Some(format!(
                "alice@x {}\nbob@x namespaces=\"git\" {}\n",
                openssh(&key(ALICE)),
                openssh(&key(BOB))
            ));
            s.sign(ALICE, |_| {});
            s.sign(BOB, |_| {});
        },
        &["E_NEW_POLICY_QUORUM"],
        &["OK", "OK"],
    ),
    (
        "a change that expires an approver's line loses that approver's new-policy approval",
        |s| {
            s.change.changed_paths = vec!["policies/allowed_signers".into()];
            s.new_signers = Some(format!(
                "alice@x {}\nbob@x valid-before=\"20200101Z\" {}\n",
                openssh(&key(ALICE)),
                openssh(&key(BOB))
            ));
            s.sign(ALICE, |_| {});
            s.sign(BOB, |_| {});
        },
        &["E_NEW_POLICY_QUORUM"],
        &["OK", "OK"],
    ),
    (
        "a change to the gate's private state is refused, in any letter case",
        |s| {
            s.change.changed_paths = vec![
                "src/lib.rs".into(),
                ".atelier/gate_key".into(),
                ".ATELIER/forge/pulls/1.json".into(),
            ];
            s.sign(ALICE, |_| {});
        },
        &["E_RESERVED_PATH"],
        &["OK"],
    ),
    (
        "a path that only looks like the private directory is not reserved",
        |s| {
            s.change.changed_paths = vec!["docs/.atelier/notes.md".into(), ".atelier-notes".into()];
            s.sign(ALICE, |_| {});
        },
        &[],
        &["OK"],
    ),
    (
        "a reject from someone whose approval would not count does not veto",
        |s| {
            s.governance = s
                .governance
                .replace("quorum = 1\n", "quorum = 1\napprovers = [\"alice@x\"]\n");
            s.sign(ALICE, |_| {});
            s.sign(BOB, |p| p.decision = Verdict::Reject);
        },
        &[],
        &["OK", "OK"],
    ),
    (
        "a closed proposal",
        |s| {
            s.change.open = false;
            s.sign(ALICE, |_| {});
        },
        &["E_NOT_OPEN"],
        &["OK"],
    ),
    (
        "a conflicting merge",
        |s| {
            s.sign(ALICE, |_| {});
            s.change.merge_tree = Err("conflicts in src/lib.rs".into());
        },
        &["E_MERGE_CONFLICT"],
        &["OK"],
    ),
    (
        "a malformed policy fails closed",
        |s| {
            s.governance = "version = 1\n".into();
            s.sign(ALICE, |_| {});
        },
        &["E_POLICY_INVALID"],
        &[],
    ),
    (
        "a malformed allowed_signers fails closed",
        |s| {
            s.signers.push_str("carol@x,dave@x ssh-ed25519 AAAA\n");
            s.sign(ALICE, |_| {});
        },
        &["E_POLICY_INVALID"],
        &[],
    ),
];

#[test]
fn gate_cases() {
    let mut failures = Vec::new();
    for (name, setup, unmet, tokens) in CASES {
        let mut s = Scenario::new();
        setup(&mut s);
        let (allowed, got_unmet, got_tokens) = s.run();
        if got_unmet != *unmet || got_tokens != *tokens || allowed != unmet.is_empty() {
            failures.push(format!("{name}: unmet {got_unmet:?} (expected {unmet:?}), tokens {got_tokens:?} (expected {tokens:?})"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
