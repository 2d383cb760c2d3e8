//! Compare against the reference: the gate counts an allowed-signers line or a signature only
//! where `ssh-keygen -Y verify` would.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use atelier::governance::decision::{decide, Change, GateInput};
use atelier::governance::policy::{Policy, PolicyFiles, DEFAULT_GOVERNANCE_TOML};
use atelier::governance::token::{Payload, RawToken, Verdict};

use crate::support::{token_codes, unmet, Env, Setup};

/// The gate's clock and ssh-keygen's `verify-time`: 2026-11-29T10:00:00Z.
const NOW: i64 = 1_795_946_400;

const VERIFY_TIME: &str = "20261129100000Z";

/// The zones ssh-keygen runs in: UTC, east of it (Tokyo's UTC+9) and west of it (New York's
/// UTC-5 in November), spelled as POSIX TZ rules so that they need no tzdata.
const ZONES: [&str; 3] = ["UTC0", "JST-9", "EST5"];

const YES: [bool; 3] = [true; 3];

const NO: [bool; 3] = [false; 3];

/// What the gate makes of the token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gate {
    /// The approval counts.
    Counts,
    /// The token does not count, with this per-token code.
    Token(&'static str),
    /// The file does not parse (`E_POLICY_INVALID`); the message contains this phrase.
    Invalid(&'static str),
}

struct Row {
    name: &'static str,
    /// The file. `KEY` is alice's public key, `OTHER` another key, `CA` a certificate authority.
    signers: &'static str,
    /// The principal ssh-keygen is asked about (`-I`).
    principal: &'static str,
    /// Sign with alice's certificate (issued by `CA`) instead of her plain key.
    cert: bool,
    /// Whether `ssh-keygen -Y verify` accepts, in each of [`ZONES`].
    ssh: [bool; 3],
    gate: Gate,
    /// Where the gate is deliberately stricter than ssh-keygen: a phrase that GOVERNANCE.md's
    /// "Keys" section contains.
    stricter: Option<&'static str>,
}

const A: &str = "alice@example.org";

const fn row(name: &'static str, signers: &'static str, ssh: [bool; 3], gate: Gate) -> Row {
    Row {
        name,
        signers,
        principal: A,
        cert: false,
        ssh,
        gate,
        stricter: None,
    }
}

const fn stricter(name: &'static str, signers: &'static str, doc: &'static str) -> Row {
    Row {
        name,
        signers,
        principal: A,
        cert: false,
        ssh: YES,
        gate: Gate::Invalid(""),
        stricter: Some(doc),
    }
}

const ROWS: &[Row] = &[
    // Namespaces.
    row("a bare line", "alice@example.org KEY", YES, Gate::Counts),
    row(
        "namespaces names atelier-approval",
        "alice@example.org namespaces=\"atelier-approval\" KEY",
        YES,
        Gate::Counts,
    ),
    row(
        "a namespaces list",
        "alice@example.org namespaces=\"git,atelier-approval,file\" KEY",
        YES,
        Gate::Counts,
    ),
    row(
        "option names in any case",
        "alice@example.org NameSpaces=\"atelier-approval\" KEY",
        YES,
        Gate::Counts,
    ),
    row(
        "another namespace only",
        "alice@example.org namespaces=\"git\" KEY",
        NO,
        Gate::Token("E_SIGNER_NAMESPACE"),
    ),
    row(
        "an empty namespaces",
        "alice@example.org namespaces=\"\" KEY",
        NO,
        Gate::Invalid("found an empty name"),
    ),
    stricter(
        "a namespace pattern",
        "alice@example.org namespaces=\"atelier-*\" KEY",
        "namespace patterns",
    ),
    stricter(
        "a negated namespace before the one that matches",
        "alice@example.org namespaces=\"!git,atelier-approval\" KEY",
        "namespace patterns",
    ),
    row(
        "a negated atelier-approval",
        "alice@example.org namespaces=\"!atelier-approval,*\" KEY",
        NO,
        Gate::Invalid("no namespace patterns"),
    ),
    stricter(
        "an empty namespace element",
        "alice@example.org namespaces=\"atelier-approval,,git\" KEY",
        "an empty element",
    ),
    stricter(
        "a space after a comma, atelier-approval first",
        "alice@example.org namespaces=\"atelier-approval, git\" KEY",
        "a space after a comma",
    ),
    row(
        "a space after a comma, atelier-approval second (ssh-keygen reads ` atelier-approval`)",
        "alice@example.org namespaces=\"git, atelier-approval\" KEY",
        NO,
        Gate::Invalid("found an empty name or whitespace"),
    ),
    stricter(
        "a leading comma before the options",
        "alice@example.org ,namespaces=\"atelier-approval\" KEY",
        "a leading comma",
    ),
    row(
        "a backslash-escaped quote inside namespaces",
        "alice@example.org namespaces=\"atelier-approval\\\"x\" KEY",
        NO,
        Gate::Invalid("a backslash-escaped quote"),
    ),
    stricter(
        "a backslash-escaped quote in another namespace",
        "alice@example.org namespaces=\"git\\\"x,atelier-approval\" KEY",
        "backslash-escaped quote",
    ),
    row(
        "an unquoted option value",
        "alice@example.org namespaces=atelier-approval KEY",
        NO,
        Gate::Invalid("double-quoted value"),
    ),
    row(
        "namespaces given twice",
        "alice@example.org namespaces=\"atelier-approval\",namespaces=\"git\" KEY",
        NO,
        Gate::Invalid("given twice"),
    ),
    // Principals.
    row(
        "a quoted principal",
        "\"alice@example.org\" KEY",
        YES,
        Gate::Counts,
    ),
    Row {
        principal: "Alice Smith",
        ..row(
            "a quoted principal with a space",
            "\"Alice Smith\" namespaces=\"atelier-approval\" KEY",
            YES,
            Gate::Counts,
        )
    },
    Row {
        principal: "Alice@Example.org",
        ..row(
            "a principal in mixed case (the gate compares without case)",
            "Alice@Example.org KEY",
            YES,
            Gate::Counts,
        )
    },
    stricter(
        "a partly quoted principal",
        "alice@\"example.org\" KEY",
        "partly quoted principal",
    ),
    stricter(
        "a principal list",
        "alice@example.org,bob@example.org KEY",
        "principal lists",
    ),
    stricter(
        "a principal wildcard",
        "*@example.org KEY",
        "principal lists",
    ),
    stricter(
        "a negated principal before the one that matches",
        "!bob@example.org,alice@example.org KEY",
        "principal lists",
    ),
    Row {
        principal: "alice-approvals@example.org",
        gate: Gate::Token("E_AMBIGUOUS_SIGNER"),
        ..stricter(
            "one key under two principals, one per namespace",
            "alice@example.org namespaces=\"git\" KEY\n\
             alice-approvals@example.org namespaces=\"atelier-approval\" KEY",
            "E_AMBIGUOUS_SIGNER",
        )
    },
    row("a key not listed", "bob@example.org OTHER", NO, Gate::Token("E_UNKNOWN_SIGNER")),
    // Certificates.
    Row {
        cert: true,
        ..stricter(
            "a certificate under a cert-authority line",
            "alice@example.org cert-authority,namespaces=\"atelier-approval\" CA",
            "certificate authorities",
        )
    },
    Row {
        cert: true,
        ..row(
            "a certificate whose plain key is listed",
            "alice@example.org KEY",
            NO,
            Gate::Token("E_UNSUPPORTED_KEY"),
        )
    },
    row(
        "a plain key under cert-authority",
        "alice@example.org cert-authority KEY",
        NO,
        Gate::Invalid("certificate authorities are not supported"),
    ),
    // Validity, at 2026-11-29T10:00:00Z.
    row(
        "inside the window",
        "alice@example.org valid-after=\"20260101Z\",valid-before=\"20270101Z\" KEY",
        YES,
        Gate::Counts,
    ),
    row(
        "valid-before in the past",
        "alice@example.org valid-before=\"20261101Z\" KEY",
        NO,
        Gate::Token("E_KEY_OUTSIDE_VALIDITY"),
    ),
    row(
        "valid-after in the future",
        "alice@example.org valid-after=\"20261201Z\" KEY",
        NO,
        Gate::Token("E_KEY_OUTSIDE_VALIDITY"),
    ),
    row(
        "valid-before is inclusive",
        "alice@example.org valid-before=\"20261129100000Z\" KEY",
        YES,
        Gate::Counts,
    ),
    row(
        "valid-after is inclusive",
        "alice@example.org valid-after=\"20261129100000Z\" KEY",
        YES,
        Gate::Counts,
    ),
    row(
        "one second after valid-before",
        "alice@example.org valid-before=\"20261129095959Z\" KEY",
        NO,
        Gate::Token("E_KEY_OUTSIDE_VALIDITY"),
    ),
    row(
        "one second before valid-after",
        "alice@example.org valid-after=\"20261129100001Z\" KEY",
        NO,
        Gate::Token("E_KEY_OUTSIDE_VALIDITY"),
    ),
    row(
        "valid-before earlier than valid-after",
        "alice@example.org valid-after=\"20270101Z\",valid-before=\"20260101Z\" KEY",
        NO,
        Gate::Invalid("to be earlier than"),
    ),
    row(
        "valid-after at the epoch",
        "alice@example.org valid-after=\"19700101Z\" KEY",
        NO,
        Gate::Invalid("after 1970-01-01"),
    ),
    Row {
        ssh: [true, false, true],
        gate: Gate::Invalid("valid-before=\"202611291500Z\""),
        ..stricter(
            "valid-before without Z (15:00 local is 06:00Z in Tokyo)",
            "alice@example.org valid-before=\"202611291500\" KEY",
            "without `Z`",
        )
    },
    Row {
        ssh: [true, true, false],
        gate: Gate::Invalid("valid-after=\"202611290800Z\""),
        ..stricter(
            "valid-after without Z (08:00 local is 13:00Z in New York)",
            "alice@example.org valid-after=\"202611290800\" KEY",
            "without `Z`",
        )
    },
    stricter(
        "a lower-case z",
        "alice@example.org valid-before=\"20261130z\" KEY",
        "upper-case `Z`",
    ),
    stricter(
        "a UTC suffix",
        "alice@example.org valid-before=\"20261130UTC\" KEY",
        "upper-case `Z`",
    ),
    stricter(
        "a date that does not exist (ssh-keygen reads 1 December)",
        "alice@example.org valid-before=\"20261131Z\" KEY",
        "does not exist",
    ),
    // Several lines for one key: each line is judged as a whole (break 5).
    row(
        "an expired atelier-approval line and a git line without expiry",
        "alice@example.org namespaces=\"atelier-approval\",valid-before=\"20200101Z\" KEY\n\
         alice@example.org namespaces=\"git\" KEY",
        NO,
        Gate::Token("E_KEY_OUTSIDE_VALIDITY"),
    ),
    row(
        "an expired line for any namespace and a git line without expiry",
        "alice@example.org valid-before=\"20200101Z\" KEY\n\
         alice@example.org namespaces=\"git\" KEY",
        NO,
        Gate::Token("E_KEY_OUTSIDE_VALIDITY"),
    ),
    row(
        "a git line now and an atelier-approval line not yet valid",
        "alice@example.org namespaces=\"git\" KEY\n\
         alice@example.org namespaces=\"atelier-approval\",valid-after=\"20270101Z\" KEY",
        NO,
        Gate::Token("E_KEY_OUTSIDE_VALIDITY"),
    ),
    row(
        "a git line and an atelier-approval line",
        "alice@example.org namespaces=\"git\" KEY\n\
         alice@example.org namespaces=\"atelier-approval\" KEY",
        YES,
        Gate::Counts,
    ),
    row(
        "an expired line and a current one",
        "alice@example.org namespaces=\"atelier-approval\",valid-before=\"20200101Z\" KEY\n\
         alice@example.org namespaces=\"atelier-approval\",valid-after=\"20200101Z\" KEY",
        YES,
        Gate::Counts,
    ),
    // Layout.
    row(
        "comments, blank lines, tabs and a trailing comment",
        "# approvers\n\n   # indented comment\n\talice@example.org\tnamespaces=\"atelier-approval\"\tKEY \"a\" comment, here\n",
        YES,
        Gate::Counts,
    ),
    stricter(
        "a bad line for the same principal before a good one",
        "alice@example.org no-touch-required KEY\nalice@example.org KEY",
        "bad line",
    ),
    stricter(
        "a bad line for another principal",
        "bob@example.org namespaces=git OTHER\nalice@example.org KEY",
        "bad line",
    ),
    stricter("CRLF line endings", "alice@example.org KEY\r\n", "LF line endings"),
];

/// Keys, a certificate and one payload signed both ways, made by ssh-keygen in a temporary
/// directory.
struct Material {
    dir: tempfile::TempDir,
    alice: String,
    other: String,
    ca: String,
    change: Change,
    payload: PathBuf,
    plain: RawToken,
    cert: RawToken,
}

fn ssh_keygen(dir: &Path, zone: &str) -> Command {
    let mut c = Command::new("ssh-keygen");
    c.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", dir)
        .env("TZ", zone)
        .current_dir(dir);
    c
}

#[track_caller]
fn run(mut c: Command) -> String {
    let out = c.output().expect("ssh-keygen runs");
    assert!(
        out.status.success(),
        "{c:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `ssh-ed25519 AAAA...` without the comment.
fn bare(dir: &Path, name: &str) -> String {
    let text = std::fs::read_to_string(dir.join(format!("{name}.pub"))).expect("a .pub file");
    text.split(' ').take(2).collect::<Vec<_>>().join(" ")
}

impl Material {
    fn new() -> Material {
        let dir = tempfile::tempdir().expect("temp dir");
        let d = dir.path();
        for name in ["alice", "other", "ca"] {
            let mut c = ssh_keygen(d, "UTC0");
            c.args(["-q", "-t", "ed25519", "-N", "", "-C", name, "-f", name]);
            run(c);
        }
        // Certify alice's key for her principal; ssh-keygen signs with the certificate when
        // `-f` names the certificate and the private key lies beside it.
        let mut c = ssh_keygen(d, "UTC0");
        c.args(["-q", "-s", "ca", "-I", "alice-id", "-n", A, "alice.pub"]);
        run(c);
        let change = Change {
            repository: "local/r".into(),
            proposal: "4".into(),
            pull: 4,
            open: true,
            base: "b".repeat(40),
            head: "c".repeat(40),
            merge_tree: Ok("d".repeat(40)),
            changed_paths: vec!["src/lib.rs".into()],
            policy_digest: "e".repeat(64),
            proposer: Some("pat@example.org".into()),
        };
        let text = Payload {
            repository: change.repository.clone(),
            proposal: change.proposal.clone(),
            pull: change.pull,
            base: change.base.clone(),
            head: change.head.clone(),
            merge_tree: "d".repeat(40),
            policy: change.policy_digest.clone(),
            decision: Verdict::Approve,
            issued: NOW - 60,
            expires: NOW + 86_400,
            nonce: "a".repeat(32),
            checkpoint: None,
        }
        .to_canonical();
        let sign = |with: &str, name: &str| {
            let file = d.join(name);
            std::fs::write(&file, &text).expect("write payload");
            let mut c = ssh_keygen(d, "UTC0");
            c.args(["-Y", "sign", "-n", "atelier-approval", "-f", with, name]);
            run(c);
            let signature =
                std::fs::read_to_string(d.join(format!("{name}.sig"))).expect("the .sig file");
            RawToken {
                payload: text.clone(),
                signature,
            }
        };
        let plain = sign("alice", "payload");
        let cert = sign("alice-cert.pub", "payload-cert");
        Material {
            alice: bare(d, "alice"),
            other: bare(d, "other"),
            ca: bare(d, "ca"),
            payload: d.join("payload"),
            change,
            plain,
            cert,
            dir,
        }
    }

    /// The template with its placeholders filled in, in one pass: a key's base64 may itself
    /// contain `CA` or `KEY`, which must not be replaced again.
    fn file(&self, template: &str) -> String {
        let mut out = String::new();
        let mut rest = template;
        'scan: while !rest.is_empty() {
            for (name, value) in [
                ("KEY", &self.alice),
                ("OTHER", &self.other),
                ("CA", &self.ca),
            ] {
                if let Some(after) = rest.strip_prefix(name) {
                    out.push_str(value);
                    rest = after;
                    continue 'scan;
                }
            }
            let c = rest.chars().next().expect("not empty");
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
        out
    }

    /// Whether `ssh-keygen -Y verify` accepts the token, in each zone.
    fn ssh(&self, row: &Row, signers: &str) -> ([bool; 3], String) {
        let d = self.dir.path();
        std::fs::write(d.join("allowed_signers"), signers).expect("write signers");
        let token = if row.cert { &self.cert } else { &self.plain };
        std::fs::write(d.join("token.sig"), &token.signature).expect("write sig");
        let mut said = String::new();
        let verdicts = ZONES.map(|zone| {
            let mut c = ssh_keygen(d, zone);
            c.args(["-Y", "verify", "-f", "allowed_signers", "-I", row.principal])
                .args(["-n", "atelier-approval", "-s", "token.sig"])
                .arg(format!("-Overify-time={VERIFY_TIME}"))
                .stdin(std::fs::File::open(&self.payload).expect("payload"));
            let out = c.output().expect("ssh-keygen runs");
            said.push_str(&format!(
                "  TZ={zone}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
            out.status.success()
        });
        (verdicts, said)
    }

    /// What the gate makes of the token, and the principal it counts.
    fn gate(&self, row: &Row, signers: &str) -> (Gate, String, Option<String>) {
        let files = PolicyFiles {
            governance: Some(DEFAULT_GOVERNANCE_TOML.as_bytes().to_vec()),
            allowed_signers: Some(signers.as_bytes().to_vec()),
            gate_key: None,
        };
        let policy = Policy::load(&files);
        let token = if row.cert { &self.cert } else { &self.plain };
        let d = decide(&GateInput {
            change: &self.change,
            base_policy: &policy,
            new_policy: &policy,
            tokens: std::slice::from_ref(token),
            ledger_roots: &BTreeMap::new(),
            panel: &atelier::governance::review::PanelInput::quiet(),
            evidence: &atelier::governance::decision::Evidence::NotACycle,
            now: NOW,
        });
        if let Err(e) = &policy {
            let message = e.to_string();
            let found = d
                .unmet()
                .any(|r| r.code.as_str() == "E_POLICY_INVALID" && r.found == message);
            assert!(found, "{}: {d:#?}", row.name);
            return (Gate::Invalid(""), message, None);
        }
        let report = &d.tokens[0];
        let gate = if report.counted {
            assert_eq!(d.approvers.len(), 1, "{}", row.name);
            Gate::Counts
        } else {
            Gate::Token(report.code_text())
        };
        (gate, report.detail.clone(), report.principal.clone())
    }
}

/// The "Keys" section of GOVERNANCE.md.
fn keys_section() -> String {
    let text = include_str!("../../GOVERNANCE.md");
    let start = text
        .find("\n## Keys\n")
        .expect("GOVERNANCE.md has a Keys section");
    let rest = &text[start + 1..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |i| i + 3);
    rest[..end].to_string()
}

#[test]
fn the_gate_never_counts_what_ssh_keygen_refuses() {
    let m = Material::new();
    let keys = keys_section();
    let mut failures = Vec::new();
    for row in ROWS {
        let signers = m.file(row.signers);
        let (ssh, said) = m.ssh(row, &signers);
        let (gate, detail, principal) = m.gate(row, &signers);
        let mut fail = |what: String| {
            failures.push(format!(
                "{}: {what}\n  file: {signers:?}\n  gate: {gate:?}: {detail}\n{said}",
                row.name
            ))
        };
        if ssh != row.ssh {
            fail(format!(
                "ssh-keygen accepts in {ZONES:?}: {ssh:?}, the row says {:?}",
                row.ssh
            ));
        }
        let expected_gate = match row.gate {
            Gate::Invalid(phrase) => {
                if !detail.contains(phrase) {
                    fail(format!("the policy error does not say `{phrase}`"));
                }
                Gate::Invalid("")
            }
            other => other,
        };
        if gate != expected_gate {
            fail(format!(
                "the gate says {gate:?}, the row says {:?}",
                row.gate
            ));
        }
        // The promise: whatever the gate counts, ssh-keygen accepts, in every zone, for the
        // principal the gate counted.
        if gate == Gate::Counts {
            if ssh != YES {
                fail("the gate counts an approval ssh-keygen refuses".into());
            }
            if !principal
                .as_ref()
                .is_some_and(|p| p.eq_ignore_ascii_case(row.principal))
            {
                fail(format!(
                    "the gate counted {principal:?}, not {}",
                    row.principal
                ));
            }
        }
        // Stricter only where the row says so, and documented.
        let gate_stricter = gate != Gate::Counts && ssh.contains(&true);
        match row.stricter {
            Some(doc) if !gate_stricter => {
                fail(format!("marked stricter (`{doc}`), but the tools agree"))
            }
            Some(doc) if !keys.contains(doc) => {
                fail(format!("GOVERNANCE.md \"Keys\" does not mention `{doc}`"))
            }
            None if gate_stricter => fail(
                "the gate refuses what ssh-keygen accepts: mark the row and document it".into(),
            ),
            _ => {}
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn a_token_signed_with_a_certificate_is_an_unsupported_key() {
    let m = Material::new();
    let verified = atelier::governance::token::verify(&m.cert);
    let err = verified
        .map(|_| ())
        .expect_err("a certificate never verifies");
    assert_eq!(err.code().as_str(), "E_UNSUPPORTED_KEY", "{err}");
    let text = err.to_string();
    assert!(
        text.contains("ssh-ed25519-cert-v01@openssh.com") && text.contains("not `-f KEY-cert.pub`"),
        "{text}"
    );
    // The plain signature over the same payload is fine.
    atelier::governance::token::verify(&m.plain).expect("the plain key's signature verifies");
}

/// The line number of alice's line in the repository's allowed_signers.
fn alice_line(env: &Env) -> usize {
    let text = env.read("policies/allowed_signers");
    1 + text
        .lines()
        .position(|l| l.starts_with("alice@example.org "))
        .expect("alice has a line")
}

/// Verifies `token_text` (as `atelier approve` printed it) with ssh-keygen against the
/// repository's allowed_signers, at the test clock.
fn ssh_keygen_accepts(env: &Env, token_text: &str) -> bool {
    let raw = RawToken::extract_all(token_text).remove(0);
    let payload = env.file("cli-payload", &raw.payload);
    let sig = env.file("cli-payload.sig", &raw.signature);
    let out = env
        .command("ssh-keygen")
        .env("TZ", "UTC0")
        .args(["-Y", "verify", "-f", "policies/allowed_signers", "-I", A])
        .args(["-n", "atelier-approval", "-s"])
        .arg(&sig)
        .arg(format!("-Overify-time={VERIFY_TIME}"))
        .stdin(std::fs::File::open(payload).expect("payload"))
        .output()
        .expect("ssh-keygen runs");
    out.status.success()
}

/// Issue 8, break 5: one file serving git commit signing too gives alice's key an expired
/// `atelier-approval` line and a `git` line without expiry; the gate used to take the namespace
/// from one line and the validity from the other, and merged.
#[test]
fn an_expired_approval_line_and_a_git_line_do_not_combine() {
    let env = Env::with(Setup {
        alice_options: "namespaces=\"atelier-approval\",valid-before=\"20261101Z\"".into(),
        ..Default::default()
    });
    // The adoption commit gets alice's second line (nothing is recorded yet, so amend it).
    let signers = env.read("policies/allowed_signers");
    let line = signers.lines().nth(alice_line(&env) - 1).expect("alice");
    let key = line
        .split(' ')
        .skip(2)
        .take(2)
        .collect::<Vec<_>>()
        .join(" ");
    env.write(
        "policies/allowed_signers",
        &format!("{signers}{A} namespaces=\"git\" {key}\n"),
    );
    env.git(&["commit", "-q", "--amend", "-a", "--no-edit"]);
    let id = env.propose_code();
    let token = env.approve(&id, "alice").code(1).stdout;
    assert!(!ssh_keygen_accepts(&env, &token), "ssh-keygen refuses it");
    let run = env.atelier(&["merge", &id, "--json"]).code(1);
    let v = run.json();
    assert_eq!(token_codes(&v), ["E_KEY_OUTSIDE_VALIDITY"], "{v:#}");
    let detail = v["tokens"][0]["detail"].as_str().expect("detail");
    let n = alice_line(&env);
    assert!(
        detail.contains(&format!("line {n}: expired"))
            && detail.contains(&format!("other line(s) ({})", n + 2))
            && detail.contains("only as a whole"),
        "{detail}"
    );
    assert!(env.read("src/lib.rs").contains("41"), "nothing merged");
    // Fixed by a line that allows atelier-approval now: bob approves instead.
    env.approve(&id, "bob").ok();
    env.atelier(&["merge", &id]).ok();
    env.atelier(&["audit", "verify"]).ok();
}

/// Issue 8, break 9: `valid-before="20300101"` (no `Z`) was read as UTC, while ssh-keygen reads
/// it in the verifier's local time; such a file now halts every merge, naming the line.
#[test]
fn a_validity_time_without_z_halts_every_merge() {
    let env = Env::with(Setup {
        alice_options: "namespaces=\"atelier-approval\",valid-before=\"20300101\"".into(),
        ..Default::default()
    });
    let id = env.propose_code();
    env.approve(&id, "alice").ok();
    env.approve(&id, "bob").ok();
    let run = env.atelier(&["gate", &id, "--json"]).code(1);
    let v = run.json();
    assert_eq!(unmet(&v), ["E_POLICY_INVALID"], "{v:#}");
    let found = v["requirements"]
        .as_array()
        .expect("requirements")
        .iter()
        .find(|r| r["code"] == "E_POLICY_INVALID")
        .and_then(|r| r["found"].as_str())
        .expect("the policy error")
        .to_string();
    let expected = format!(
        "policies/allowed_signers: line {}: expected valid-before to end in `Z`",
        alice_line(&env)
    );
    assert!(found.starts_with(&expected), "{found}");
    assert!(found.contains("valid-before=\"20300101Z\""), "{found}");
    let text = env.atelier(&["gate", &id]).code(1);
    assert!(text.stdout.contains(&expected), "{}", text.stdout);
    env.atelier(&["merge", &id]).code(1);
    assert!(env.read("src/lib.rs").contains("41"), "nothing merged");
}
