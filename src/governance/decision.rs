//! The gate: one pure function from plain data to a [`Decision`]. It decides whether a change
//! may merge now and explains every requirement, met or not, with a stable code and the
//! expected and found values. No IO, no clock: the caller passes `now` and everything it read.
//!
//! Requirements are small rules evaluated independently ([`requirements`]); the decision allows
//! the merge only when all of them are met.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::allowed_signers::SignerEntry;
use super::code::Code;
use super::policy::{Policy, PolicyError, Rule};
use super::review::{self, Finding, PanelInput, Severity};
use super::time::{format_rfc3339, Timestamp};
use super::token::{self, RawToken, Verdict};

/// The change as the gate sees it, gathered by the caller from git and the forge.
#[derive(Debug, Clone)]
pub struct Change {
    pub repository: String,
    pub proposal: String,
    pub pull: u64,
    pub open: bool,
    /// The protected branch's tip the change would merge onto.
    pub base: String,
    /// The proposal branch's tip.
    pub head: String,
    /// The tree of merging head into base, or why it could not be computed (a conflict).
    pub merge_tree: Result<String, String>,
    /// Paths that differ between base and the merge tree.
    pub changed_paths: Vec<String>,
    /// [`super::policy::policy_digest`] of the base commit.
    pub policy_digest: String,
    /// The principal who proposed the change, whose approval never counts.
    pub proposer: Option<String>,
}

/// All inputs of one gate evaluation.
#[derive(Debug, Clone)]
pub struct GateInput<'a> {
    pub change: &'a Change,
    /// The policy read from the base commit.
    pub base_policy: &'a Result<Policy, PolicyError>,
    /// The policy the merge tree would install (read from the merge tree).
    pub new_policy: &'a Result<Policy, PolicyError>,
    /// Every token recorded on the pull request, in order, as received.
    pub tokens: &'a [RawToken],
    /// Merkle roots of the ledger at the sizes tokens name (`size -> hex root`).
    pub ledger_roots: &'a BTreeMap<u64, String>,
    /// The review panel: its definitions at base, the built-in findings, the recorded verdict.
    pub panel: &'a PanelInput,
    /// What the ledger holds of the proposal's `atelier cycle` evidence.
    pub evidence: &'a Evidence,
    pub now: Timestamp,
}

/// What the ledger holds of a proposal's `atelier cycle` evidence, as of the evaluation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Evidence {
    /// No metric was registered for it: not a cycle proposal; nothing required.
    #[default]
    NotACycle,
    /// A metric was registered (`metric-registered`): the change may merge only as the commit
    /// its evidence was recorded for, onto the base it was measured against
    /// (`evidence-recorded`'s head and base), if any was.
    Registered {
        /// The evidence's (head, base).
        recorded: Option<(String, String)>,
    },
}

/// One requirement of the gate, met or not.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Requirement {
    pub code: Code,
    pub met: bool,
    /// For quorum requirements: how many distinct approvals the rule needs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub required: Option<u32>,
    pub summary: String,
    pub expected: String,
    pub found: String,
}

/// What the gate made of one token.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct TokenReport {
    pub index: usize,
    pub principal: Option<String>,
    pub fingerprint: Option<String>,
    pub decision: Option<Verdict>,
    /// Why the token does not count; `None` (shown as `OK`) when it counts (an approval or a
    /// veto).
    #[serde(serialize_with = "ok_or_code")]
    pub code: Option<Code>,
    pub counted: bool,
    pub detail: String,
}

impl TokenReport {
    /// `OK` when the token counts, otherwise its code.
    pub fn code_text(&self) -> &'static str {
        self.code.map_or("OK", Code::as_str)
    }
}

fn ok_or_code<S: serde::Serializer>(code: &Option<Code>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(code.map_or("OK", Code::as_str))
}

/// The gate's answer: an outcome value, never an error.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    pub requirements: Vec<Requirement>,
    pub tokens: Vec<TokenReport>,
    /// Distinct principals whose approvals count, sorted.
    pub approvers: Vec<String>,
    /// Distinct eligible principals who rejected, sorted.
    pub vetoes: Vec<String>,
    /// What the review panel said of the change.
    pub review: ReviewReport,
}

/// The review panel's verdict on the change as the gate weighed it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ReviewReport {
    /// The verdict (`None`: the panel's definitions at base cannot be read).
    pub verdict: Option<review::Verdict>,
    /// The built-in reviewers' findings now, then the agent reviewers' from a current recorded
    /// verdict.
    pub findings: Vec<Finding>,
    /// The recorded verdict: `none`, `current`, or `stale`.
    pub recorded: &'static str,
    /// The constitution approvers who overruled a refusing verdict (empty unless they did).
    pub overruled_by: Vec<String>,
}

impl Decision {
    pub fn unmet(&self) -> impl Iterator<Item = &Requirement> {
        self.requirements.iter().filter(|r| !r.met)
    }

    /// The most approvals any quorum requirement asks for ("N of M": this is M).
    pub fn required_approvals(&self) -> Option<u32> {
        self.requirements.iter().filter_map(|r| r.required).max()
    }
}

fn req(code: Code, met: bool, summary: String, expected: String, found: String) -> Requirement {
    Requirement {
        code,
        met,
        required: None,
        summary,
        expected,
        found,
    }
}

struct Judged {
    reports: Vec<TokenReport>,
    approvers: BTreeSet<String>,
    vetoes: BTreeSet<String>,
}

/// A counted token: principal, key fingerprint, decision.
type Counted = (String, String, Verdict);
/// Why a token does not count: code, principal (if known), fingerprint (if it verified), detail.
type NotCounted = (Code, Option<String>, Option<String>, String);

/// Why a check failed: the code and the detail (the caller adds the principal and fingerprint).
type Failed = (Code, String);

/// Checks one token against the change and the base policy; returns the counting principal or
/// the code and detail of the first failed check. The checks, in order: the signature; the key
/// (listed, under one principal, [`admitting_line`]); the change it binds ([`binds_the_change`]);
/// its lifetime ([`within_lifetime`]); the ledger it saw ([`saw_this_ledger`]); who signed
/// ([`may_count`]); and a nonce not presented twice.
fn judge_one(
    raw: &RawToken,
    input: &GateInput<'_>,
    policy: &Policy,
    seen: &mut BTreeSet<(String, String)>,
) -> Result<Counted, NotCounted> {
    let verified = token::verify(raw).map_err(|e| (e.code(), None, None, e.to_string()))?;
    let fp = verified.fingerprint.clone();
    let at = |principal: Option<&str>, (code, detail): Failed| -> NotCounted {
        (
            code,
            principal.map(str::to_string),
            Some(fp.clone()),
            detail,
        )
    };
    let p = &verified.payload;
    let (entries, listed) = listed_key(policy, &verified).map_err(|e| at(None, e))?;
    let entry = admitting_line(policy, &entries, &fp, input.now)
        .map_err(|e| at(Some(listed.as_str()), e))?;
    // The principal comes from the line that admitted the key.
    let principal_lc = entry.principal.to_ascii_lowercase();
    let principal = principal_lc.as_str();
    let pr = Some(principal);
    binds_the_change(input.change, p).map_err(|e| at(pr, e))?;
    within_lifetime(p, policy, input.now).map_err(|e| at(pr, e))?;
    saw_this_ledger(p, input.ledger_roots).map_err(|e| at(pr, e))?;
    may_count(input.change, policy, principal).map_err(|e| at(pr, e))?;
    // The same signer presenting the same nonce twice is one token; another signer's token
    // with a copied nonce is a different token and is judged on its own.
    if !seen.insert((fp.clone(), p.nonce.clone())) {
        return Err(at(
            pr,
            (
                Code::DuplicateToken,
                format!("this key already presented a token with nonce {}", p.nonce),
            ),
        ));
    }
    Ok((principal.to_string(), fp, p.decision))
}

/// The key's lines in allowed_signers and the one principal they name (lowercased): not the
/// gate's own key, listed, and under one principal only.
fn listed_key<'p>(
    policy: &'p Policy,
    verified: &token::VerifiedToken,
) -> Result<(Vec<&'p SignerEntry>, String), Failed> {
    let fp = &verified.fingerprint;
    if policy.gate_key.as_ref() == Some(&verified.key) {
        return Err((
            Code::GateKeySigner,
            "signed with the gate's own key, which never counts".into(),
        ));
    }
    let entries = policy.signers.find(&verified.key);
    let Some(first) = entries.first() else {
        return Err((
            Code::UnknownSigner,
            format!("key {fp} is not in policies/allowed_signers at the base commit"),
        ));
    };
    // A key listed under two principals is refused whichever of its lines would apply, so every
    // line for the key names the same principal (up to ASCII case).
    if entries
        .iter()
        .any(|e| !e.principal.eq_ignore_ascii_case(&first.principal))
    {
        let all: Vec<&str> = entries.iter().map(|e| e.principal.as_str()).collect();
        return Err((
            Code::AmbiguousSigner,
            format!("key {fp} is listed for several principals ({}); list a key under one principal only", all.join(", ")),
        ));
    }
    // Principals compare case-insensitively (they are e-mail addresses in practice).
    let listed = first.principal.to_ascii_lowercase();
    Ok((entries, listed))
}

/// The allowed_signers line that admits the key now: one that allows the namespace, for a key
/// not revoked, valid at `now`.
fn admitting_line<'e>(
    policy: &Policy,
    entries: &[&'e SignerEntry],
    fp: &str,
    now: Timestamp,
) -> Result<&'e SignerEntry, Failed> {
    // Each line is judged whole, as ssh-keygen does: one line must both allow the namespace and
    // be valid now. Namespace and validity satisfied by two different lines do not count.
    let in_namespace: Vec<&SignerEntry> = entries
        .iter()
        .copied()
        .filter(|e| e.allows_namespace(token::NAMESPACE))
        .collect();
    if in_namespace.is_empty() {
        return Err((
            Code::SignerNamespace,
            format!(
                "allowed_signers {} restrict{} this key to other namespaces than `{}`; add \
                 `{}` to the namespaces=\"...\" of the key's line",
                line_list(entries),
                if entries.len() == 1 { "s" } else { "" },
                token::NAMESPACE,
                token::NAMESPACE
            ),
        ));
    }
    if let Some(rev) = policy.is_revoked(fp) {
        return Err((
            Code::KeyRevoked,
            format!(
                "key {fp} is revoked in policies/governance.toml ({})",
                rev.reason.as_deref().unwrap_or("no reason given")
            ),
        ));
    }
    if let Some(entry) = in_namespace.iter().find(|e| e.validity_at(now).is_none()) {
        return Ok(entry);
    }
    let why: Vec<String> = in_namespace
        .iter()
        .map(|e| {
            format!(
                "line {}: {}",
                e.line,
                e.validity_at(now).unwrap_or_default()
            )
        })
        .collect();
    let others = entries.len() - in_namespace.len();
    let others = if others == 0 {
        String::new()
    } else {
        format!(
            "; the key's other line(s) ({}) allow only other namespaces, and a line counts \
             only as a whole, as in ssh-keygen",
            line_numbers(
                entries
                    .iter()
                    .copied()
                    .filter(|e| !e.allows_namespace(token::NAMESPACE))
            )
        )
    };
    Err((
        Code::KeyOutsideValidity,
        format!(
            "no allowed_signers line for this key allows `{}` at the gate's clock {}: {}{others}",
            token::NAMESPACE,
            format_rfc3339(now),
            why.join("; ")
        ),
    ))
}

/// The token names this change: its repository, proposal and head; an approval also its pull
/// request, base, merge tree and policy.
fn binds_the_change(c: &Change, p: &token::Payload) -> Result<(), Failed> {
    let bind = |code: Code, field: &str, expected: &str, found: &str| {
        if expected == found {
            Ok(())
        } else {
            // The change, its base, the merge or the policy moved since it was signed: say
            // what to do, not only what differs.
            let again = match code {
                Code::StaleHead
                | Code::StaleBase
                | Code::MergeTreeMismatch
                | Code::PolicyDigestMismatch => format!(
                    "; it was signed for an earlier state: its signer signs again (`atelier approve {} --key <their key>`) and sends the new token",
                    c.proposal
                ),
                _ => String::new(),
            };
            Err((
                code,
                format!("{field}: expected {expected}, found {found}{again}"),
            ))
        }
    };
    bind(
        Code::WrongRepository,
        "repository",
        &c.repository,
        &p.repository,
    )?;
    bind(Code::WrongProposal, "proposal", &c.proposal, &p.proposal)?;
    // A rejection is about the proposed change (the proposal and its head), whichever pull
    // request carries it: retargeting the pull request away and opening another for the same
    // head must not escape it. An approval binds the pull request it was given on.
    if p.decision == Verdict::Approve {
        bind(
            Code::WrongPull,
            "pull",
            &c.pull.to_string(),
            &p.pull.to_string(),
        )?;
    }
    bind(Code::StaleHead, "head", &c.head, &p.head)?;
    // A rejection keeps vetoing when unrelated merges move the base. An approval binds the
    // exact merge: base, tree and policy too.
    if p.decision == Verdict::Approve {
        bind(Code::StaleBase, "base", &c.base, &p.base)?;
        if let Ok(tree) = &c.merge_tree {
            bind(Code::MergeTreeMismatch, "merge-tree", tree, &p.merge_tree)?;
        }
        bind(
            Code::PolicyDigestMismatch,
            "policy",
            &c.policy_digest,
            &p.policy,
        )?;
    }
    Ok(())
}

/// The token's lifetime is within the policy's bound, and `now` (give or take the clock skew)
/// falls inside it.
fn within_lifetime(p: &token::Payload, policy: &Policy, now: Timestamp) -> Result<(), Failed> {
    if p.expires <= p.issued || p.expires - p.issued > policy.max_lifetime {
        return Err((
            Code::TokenLifetime,
            format!(
                "lifetime: expected at most {}s, found {}s (issued {}, expires {})",
                policy.max_lifetime,
                p.expires - p.issued,
                format_rfc3339(p.issued),
                format_rfc3339(p.expires)
            ),
        ));
    }
    if p.issued > now.saturating_add(policy.clock_skew) {
        return Err((
            Code::TokenNotYetValid,
            format!(
                "issued: expected at or before {}, found {}",
                format_rfc3339(now.saturating_add(policy.clock_skew)),
                format_rfc3339(p.issued)
            ),
        ));
    }
    if now >= p.expires {
        return Err((
            Code::TokenExpired,
            format!(
                "expires: expected after {}, found {}",
                format_rfc3339(now),
                format_rfc3339(p.expires)
            ),
        ));
    }
    Ok(())
}

/// The ledger checkpoint the approver saw, if the token names one, is this ledger's at that size.
fn saw_this_ledger(p: &token::Payload, ledger_roots: &BTreeMap<u64, String>) -> Result<(), Failed> {
    let Some(cp) = &p.checkpoint else {
        return Ok(());
    };
    let ours = ledger_roots.get(&cp.size);
    if ours == Some(&cp.root) {
        return Ok(());
    }
    Err((
        Code::CheckpointMismatch,
        format!(
            "ledger root at size {}: expected {}, found {} (the approver saw a different ledger)",
            cp.size,
            ours.map_or("none (the ledger is shorter)", String::as_str),
            cp.root
        ),
    ))
}

/// The signer is neither the change's proposer nor a bot.
fn may_count(c: &Change, policy: &Policy, principal: &str) -> Result<(), Failed> {
    if c.proposer
        .as_deref()
        .is_some_and(|p| p.eq_ignore_ascii_case(principal))
    {
        return Err((
            Code::ProposerSigner,
            format!("{principal} proposed this change; the proposer's approval never counts"),
        ));
    }
    if policy
        .bots
        .iter()
        .any(|b| b.eq_ignore_ascii_case(principal))
    {
        return Err((
            Code::BotSigner,
            format!("{principal} is listed under `bots` and never counts"),
        ));
    }
    Ok(())
}

/// `line 3` or `lines 1, 3`, for messages about a key's allowed_signers lines.
fn line_list(entries: &[&SignerEntry]) -> String {
    let word = if entries.len() == 1 { "line" } else { "lines" };
    format!("{word} {}", line_numbers(entries.iter().copied()))
}

fn line_numbers<'a>(entries: impl Iterator<Item = &'a SignerEntry>) -> String {
    entries
        .map(|e| e.line.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn judge(input: &GateInput<'_>, policy: &Policy) -> Judged {
    let mut judged = Judged {
        reports: Vec::new(),
        approvers: BTreeSet::new(),
        vetoes: BTreeSet::new(),
    };
    let mut nonces = BTreeSet::new();
    for (index, raw) in input.tokens.iter().enumerate() {
        let report = match judge_one(raw, input, policy, &mut nonces) {
            Ok((principal, fp, verdict)) => {
                let set = match verdict {
                    Verdict::Approve => &mut judged.approvers,
                    Verdict::Reject => &mut judged.vetoes,
                };
                let fresh = set.insert(principal.clone());
                TokenReport {
                    index,
                    code: (!fresh).then_some(Code::DuplicatePrincipal),
                    counted: fresh,
                    detail: if fresh {
                        format!("{} by {principal}", verdict.as_str())
                    } else {
                        format!("{principal} already counted once; a principal counts once however many tokens or keys")
                    },
                    principal: Some(principal),
                    fingerprint: Some(fp),
                    decision: Some(verdict),
                }
            }
            Err((code, principal, fingerprint, detail)) => TokenReport {
                index,
                principal,
                fingerprint,
                decision: None,
                code: Some(code),
                counted: false,
                detail,
            },
        };
        judged.reports.push(report);
    }
    judged
}

fn rule_requirement(
    code: Code,
    which: &str,
    rule: &Rule,
    approvers: &BTreeSet<String>,
    changed: &[String],
) -> Requirement {
    let counting: Vec<&str> = approvers
        .iter()
        .map(String::as_str)
        .filter(|p| rule.counts(p))
        .collect();
    let met = counting.len() as u32 >= rule.quorum;
    let required = Some(rule.quorum);
    let paths = rule.matched(changed);
    let shown: Vec<&str> = paths.iter().take(3).copied().collect();
    let more = if paths.len() > 3 {
        format!(" and {} more", paths.len() - 3)
    } else {
        String::new()
    };
    let r = req(
        code,
        met,
        format!(
            "{which} rule `{}` (touches {}{more})",
            rule.name,
            shown.join(", ")
        ),
        format!(
            "{} distinct approval(s){}",
            rule.quorum,
            rule.approvers
                .as_ref()
                .map_or(String::new(), |a| format!(" from {}", a.join(", ")))
        ),
        if counting.is_empty() {
            "0".into()
        } else {
            format!("{} ({})", counting.len(), counting.join(", "))
        },
    );
    Requirement { required, ..r }
}

/// Approvers are witnesses of the ledger: a token from a key the policy lists that saw a ledger
/// this one does not extend (a longer one, or another root at that size) means the ledger was
/// rewound or replaced since, and nothing may merge on it.
fn witness_requirement(input: &GateInput<'_>, policy: &Policy) -> Requirement {
    let mut seen = Vec::new();
    for raw in input.tokens {
        let Ok(p) = token::Payload::parse(&raw.payload) else {
            continue;
        };
        let Some(cp) = &p.checkpoint else {
            continue;
        };
        // Only a token for this change witnesses this ledger: one copied from elsewhere (another
        // repository's history is public) saw another ledger.
        if p.repository != input.change.repository
            || p.proposal != input.change.proposal
            || p.head != input.change.head
        {
            continue;
        }
        if input.ledger_roots.get(&cp.size) == Some(&cp.root) {
            continue;
        }
        let Ok(v) = token::verify(raw) else {
            continue;
        };
        // Only someone who may approve now is a witness: one line for the key that allows the
        // namespace and is valid now, a key not revoked, a principal not a bot.
        let eligible = policy.signers.find(&v.key).into_iter().find(|e| {
            e.allows_namespace(token::NAMESPACE)
                && e.validity_at(input.now).is_none()
                && policy.is_revoked(&v.fingerprint).is_none()
                && !policy
                    .bots
                    .iter()
                    .any(|b| b.eq_ignore_ascii_case(&e.principal))
        });
        if let Some(e) = eligible {
            seen.push(format!(
                "{} saw {} entries with root {}",
                e.principal, cp.size, cp.root
            ));
        }
    }
    req(
        Code::LedgerRollback,
        seen.is_empty(),
        "the ledger extends every checkpoint a listed signer's token saw".into(),
        "each checkpoint a prefix of this ledger".into(),
        if seen.is_empty() {
            "all extended".into()
        } else {
            format!("not extended: {}", seen.join("; "))
        },
    )
}

/// Every requirement for the change, met or not, in the order they are shown: the proposal is
/// open, the policy at base parses, head merges, the ledger extends what approvers saw, no veto,
/// the changed paths ([`path_requirements`]), each touched rule's quorum, the policy a
/// constitutional change installs ([`new_policy_requirements`]), the review panel
/// ([`review_requirements`]) and a cycle proposal's evidence ([`evidence_requirement`]).
pub fn requirements(
    input: &GateInput<'_>,
) -> (
    Vec<Requirement>,
    Vec<TokenReport>,
    Vec<String>,
    Vec<String>,
    ReviewReport,
) {
    let c = input.change;
    let mut out = vec![open_requirement(c)];
    let policy = match input.base_policy {
        Ok(p) => {
            out.push(req(
                Code::PolicyInvalid,
                true,
                "the policy at base parses".into(),
                "valid".into(),
                "valid".into(),
            ));
            p
        }
        Err(e) => {
            out.push(req(
                Code::PolicyInvalid,
                false,
                "the policy at base parses (a malformed policy halts all merges until fixed)"
                    .into(),
                "valid".into(),
                e.to_string(),
            ));
            let report = ReviewReport {
                verdict: None,
                findings: input.panel.builtin.clone(),
                recorded: "none",
                overruled_by: Vec::new(),
            };
            return (out, Vec::new(), Vec::new(), Vec::new(), report);
        }
    };
    out.push(merge_requirement(c));
    let mut judged = judge(input, policy);
    out.push(witness_requirement(input, policy));
    out.push(veto_requirement(c, policy, &mut judged.vetoes));
    if c.merge_tree.is_ok() {
        out.extend(path_requirements(c, policy));
    }
    let constitutional = !policy.constitution.matched(&c.changed_paths).is_empty();
    for rule in policy.touched(&c.changed_paths) {
        let code = if std::ptr::eq(rule, &policy.constitution) {
            Code::ConstitutionQuorum
        } else {
            Code::QuorumNotMet
        };
        out.push(rule_requirement(
            code,
            "base policy",
            rule,
            &judged.approvers,
            &c.changed_paths,
        ));
    }
    if constitutional {
        out.extend(new_policy_requirements(input, &judged.reports));
    }
    let report = review_requirements(input, policy, &judged.approvers, &mut out);
    out.extend(evidence_requirement(input));
    (
        out,
        judged.reports,
        judged.approvers.into_iter().collect(),
        judged.vetoes.into_iter().collect(),
        report,
    )
}

fn open_requirement(c: &Change) -> Requirement {
    req(
        Code::NotOpen,
        c.open,
        "the proposal is open".into(),
        "open".into(),
        if c.open {
            "open".into()
        } else {
            "closed or merged".into()
        },
    )
}

fn merge_requirement(c: &Change) -> Requirement {
    match &c.merge_tree {
        Ok(t) => req(
            Code::MergeConflict,
            true,
            "head merges into base cleanly".into(),
            "a merge tree".into(),
            t.clone(),
        ),
        Err(why) => req(
            Code::MergeConflict,
            false,
            "head merges into base cleanly".into(),
            "a merge tree".into(),
            why.clone(),
        ),
    }
}

/// No eligible principal rejected the change. A rejection vetoes only from a principal whose
/// approval would count for a rule the change touches (someone listed for docs alone cannot
/// block a change to the code): `vetoes` keeps only those.
fn veto_requirement(c: &Change, policy: &Policy, vetoes: &mut BTreeSet<String>) -> Requirement {
    let touched = policy.touched(&c.changed_paths);
    vetoes.retain(|p| touched.iter().any(|r| r.counts(p)));
    req(
        Code::Vetoed,
        vetoes.is_empty(),
        "no eligible principal rejected the change".into(),
        "no reject tokens".into(),
        if vetoes.is_empty() {
            "none".into()
        } else {
            vetoes.iter().cloned().collect::<Vec<_>>().join(", ")
        },
    )
}

/// For a change that merges: it changes something, nothing under the reserved directory, and
/// every changed path is covered by a rule.
fn path_requirements(c: &Change, policy: &Policy) -> [Requirement; 3] {
    let uncovered: Vec<&str> = c
        .changed_paths
        .iter()
        // Covered by a glob that matches the path itself: a file standing for a folder a
        // rule names needs that rule (`touched`), and is uncovered unless a rule matches it.
        .filter(|p| {
            !std::iter::once(&policy.constitution)
                .chain(policy.rules.iter())
                .any(|r| r.matches_exactly(p))
        })
        .map(String::as_str)
        .collect();
    let reserved: Vec<&str> = c
        .changed_paths
        .iter()
        .map(String::as_str)
        .filter(|p| super::policy::is_reserved(p))
        .collect();
    [
        req(
            Code::EmptyChange,
            !c.changed_paths.is_empty(),
            "the change changes something".into(),
            "at least one changed path".into(),
            format!("{} changed path(s)", c.changed_paths.len()),
        ),
        req(
            Code::ReservedPath,
            reserved.is_empty(),
            format!(
                "nothing under `{}/` changes (each clone's private gate state)",
                super::policy::RESERVED_DIR
            ),
            format!("no path under `{}/`", super::policy::RESERVED_DIR),
            if reserved.is_empty() {
                "none".into()
            } else {
                reserved.join(", ")
            },
        ),
        req(
            Code::NoRule,
            uncovered.is_empty(),
            "every changed path is covered by a quorum rule (uncovered paths fail closed)".into(),
            "a rule for every path".into(),
            if uncovered.is_empty() {
                "all covered".into()
            } else {
                format!("no rule covers {}", uncovered.join(", "))
            },
        ),
    ]
}

/// For a constitutional change: the policy it installs parses, and each rule of it the change
/// touches has its quorum among the approvers that policy still counts.
fn new_policy_requirements(input: &GateInput<'_>, reports: &[TokenReport]) -> Vec<Requirement> {
    let c = input.change;
    let new = match input.new_policy {
        Err(e) => {
            return vec![req(
                Code::NewPolicyInvalid,
                false,
                "the policy this change installs parses (it would halt all later merges)".into(),
                "valid".into(),
                e.to_string(),
            )]
        }
        Ok(new) => new,
    };
    let mut out = vec![req(
        Code::NewPolicyInvalid,
        true,
        "the policy this change installs parses".into(),
        "valid".into(),
        "valid".into(),
    )];
    // Approvers counted under the base policy whose key the new policy still lists under the
    // same principal, unrevoked and not a bot: a change can only narrow who counts, never
    // widen it.
    let still: BTreeSet<String> = reports
        .iter()
        .filter(|r| r.counted && r.decision == Some(Verdict::Approve))
        .filter_map(|r| Some((r.principal.clone()?, r.fingerprint.clone()?)))
        .filter(|(p, f)| new.is_revoked(f).is_none() && new.lists(f, p, input.now))
        .map(|(p, _)| p)
        .filter(|p| !new.bots.iter().any(|b| b.eq_ignore_ascii_case(p)))
        .collect();
    for rule in new.touched(&c.changed_paths) {
        out.push(rule_requirement(
            Code::NewPolicyQuorum,
            "new policy",
            rule,
            &still,
            &c.changed_paths,
        ));
    }
    out
}

/// For a cycle proposal: it merges only as the change its evidence was recorded for.
fn evidence_requirement(input: &GateInput<'_>) -> Option<Requirement> {
    let c = input.change;
    let Evidence::Registered { recorded } = input.evidence else {
        return None;
    };
    Some(req(
        Code::EvidenceMissing,
        recorded.as_ref().is_some_and(|(h, b)| *h == c.head && *b == c.base),
        "a cycle proposal merges only as the change its evidence was recorded for".into(),
        "the head `atelier cycle` recorded evidence for".into(),
        match recorded {
            Some((h, _)) if *h != c.head => format!(
                "evidence recorded for head {h}, but the head is {} (changed after it was measured: run the cycle again)",
                c.head
            ),
            Some((_, b)) if *b != c.base => format!(
                "evidence measured against base {b}, but the base is now {} (the protected branch moved since: run the cycle again)",
                c.base
            ),
            Some((h, b)) => format!("head {h} on base {b}"),
            None => "a registered metric and no evidence (the cycle did not finish: run it again)".into(),
        },
    ))
}

/// The review panel's requirements: its definitions at base can be read, a current recorded
/// verdict where one is required, and a verdict that does not refuse — unless the constitution
/// quorum approved this exact change, which overrules the panel (and never changes what it said).
fn review_requirements(
    input: &GateInput<'_>,
    policy: &Policy,
    approvers: &BTreeSet<String>,
    out: &mut Vec<Requirement>,
) -> ReviewReport {
    let c = input.change;
    let p = input.panel;
    let panel = match &p.panel {
        Err(why) => {
            out.push(req(
                Code::ReviewInvalid,
                false,
                "the review panel at base can be read (a malformed reviewer definition halts all merges until fixed)".into(),
                "valid reviewers/*.toml".into(),
                why.clone(),
            ));
            return ReviewReport {
                verdict: None,
                findings: p.builtin.clone(),
                recorded: "none",
                overruled_by: Vec::new(),
            };
        }
        Ok(panel) => panel,
    };
    let tree = c.merge_tree.as_ref().ok();
    let current = p.recorded.as_ref().filter(|r| {
        r.base == c.base && r.head == c.head && r.tree.as_ref() == tree && r.panel == panel.digest
    });
    let recorded = match (&p.recorded, current) {
        (None, _) => "none",
        (Some(_), Some(_)) => "current",
        (Some(_), None) => "stale",
    };
    if !panel.agents.is_empty() && policy.review.required {
        let agents = panel.agents.join(", ");
        out.push(match (&p.recorded, current) {
            (None, _) => req(
                Code::ReviewMissing,
                false,
                format!("the agent reviewers ({agents}) gave a recorded verdict"),
                "a verdict recorded by `atelier review`".into(),
                "none recorded".into(),
            ),
            (Some(r), None) => req(
                Code::ReviewStale,
                false,
                format!("the agent reviewers' ({agents}) recorded verdict is for this change"),
                format!(
                    "base {}, head {}, tree {}, panel {}",
                    c.base,
                    c.head,
                    tree.map_or("none", String::as_str),
                    panel.digest
                ),
                format!(
                    "base {}, head {}, tree {}, panel {}",
                    r.base,
                    r.head,
                    r.tree.as_deref().unwrap_or("none"),
                    r.panel
                ),
            ),
            (Some(_), Some(_)) => req(
                Code::ReviewStale,
                true,
                format!("the agent reviewers' ({agents}) recorded verdict is for this change"),
                "current".into(),
                "current".into(),
            ),
        });
    }
    // The built-ins are re-run at every evaluation; the agents' findings come only from a
    // verdict recorded for exactly this change.
    let mut findings = p.builtin.clone();
    if let Some(r) = current {
        findings.extend(
            r.findings
                .iter()
                .filter(|f| panel.agents.contains(&f.reviewer))
                .cloned(),
        );
    }
    let verdict =
        review::critic(&findings).max(current.map_or(review::Verdict::Approve, |r| r.verdict));
    let refuses = verdict >= policy.review.block_on;
    let overrulers: Vec<String> = approvers
        .iter()
        .filter(|a| policy.constitution.counts(a))
        .cloned()
        .collect();
    let overruled = refuses && overrulers.len() as u32 >= policy.constitution.quorum;
    let worst: Vec<String> = findings
        .iter()
        .filter(|f| f.severity == Severity::Blocking || (refuses && f.severity == Severity::Major))
        .take(5)
        .map(|f| {
            let at = match (&f.file, f.line) {
                (Some(file), Some(line)) => format!(" {file}:{line}"),
                (Some(file), None) => format!(" {file}"),
                _ => String::new(),
            };
            format!("[{}]{at}: {}", f.reviewer, f.message)
        })
        .collect();
    let found = match (refuses, overruled) {
        (false, _) => format!("{} ({} finding(s))", verdict.as_str(), findings.len()),
        (true, false) => format!("{}: {}", verdict.as_str(), worst.join("; ")),
        (true, true) => format!(
            "{}, overruled by the constitution quorum ({}): {}",
            verdict.as_str(),
            overrulers.join(", "),
            worst.join("; ")
        ),
    };
    out.push(req(
        Code::ReviewBlocked,
        !refuses || overruled,
        "the review panel does not refuse the change (or the constitution quorum overruled it)"
            .into(),
        format!(
            "a verdict below `{}`, or {} constitution approval(s)",
            policy.review.block_on.as_str(),
            policy.constitution.quorum
        ),
        found,
    ));
    ReviewReport {
        verdict: Some(verdict),
        findings,
        recorded,
        overruled_by: if overruled { overrulers } else { Vec::new() },
    }
}

/// The gate.
pub fn decide(input: &GateInput<'_>) -> Decision {
    let (requirements, tokens, approvers, vetoes, review) = requirements(input);
    let allowed = requirements.iter().all(|r| r.met);
    Decision {
        allowed,
        requirements,
        tokens,
        approvers,
        vetoes,
        review,
    }
}

/// [`decide`], and, when commits outside the gate (pushed straight to the branch) changed the
/// policy files `bypassed` since the last commit the ledger vouches for, whose policy is
/// `vouched`: the change must also meet that policy, counting those files as changes of its
/// own (a constitutional change). A signer such a commit added counts for nothing there, and a
/// veto or a revocation it removed still holds; a revocation it added holds under the base
/// policy. A vouched policy that does not parse is passed over: a broken policy can only be
/// repaired outside the gate, which audit reports.
pub fn decide_vouched(
    input: &GateInput<'_>,
    vouched: &Result<Policy, PolicyError>,
    bypassed: &[String],
) -> Decision {
    let mut d = decide(input);
    // A base policy that does not parse halts every merge on its own.
    if bypassed.is_empty() || vouched.is_err() || input.base_policy.is_err() {
        return d;
    }
    let mut change = input.change.clone();
    for p in bypassed {
        if !change.changed_paths.contains(p) {
            change.changed_paths.push(p.clone());
        }
    }
    let before = GateInput {
        change: &change,
        base_policy: vouched,
        ..input.clone()
    };
    let b = decide(&before);
    // A token that counts only under the policy those commits wrote does not count.
    for (t, under) in d.tokens.iter_mut().zip(&b.tokens) {
        if t.counted && !under.counted {
            *t = TokenReport {
                detail: format!(
                    "{} (under the policy before the commits outside the gate)",
                    under.detail
                ),
                ..under.clone()
            };
        }
    }
    // Approvers count under both policies; a veto under either holds.
    d.approvers.retain(|a| b.approvers.contains(a));
    for v in &b.vetoes {
        if !d.vetoes.contains(v) {
            d.vetoes.push(v.clone());
        }
    }
    d.vetoes.sort();
    for r in b.requirements.into_iter().filter(|r| !r.met) {
        d.requirements.push(Requirement {
            summary: format!(
                "under the policy before the commits outside the gate that changed {}: {}",
                bypassed.join(", "),
                r.summary
            ),
            ..r
        });
    }
    d.allowed = d.allowed && b.allowed;
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::governance::policy::{PolicyFiles, DEFAULT_GOVERNANCE_TOML};
    use crate::governance::review::{PanelAtBase, RecordedReview, Verdict as Panel};

    fn change() -> Change {
        Change {
            repository: "r".into(),
            proposal: "1".into(),
            pull: 1,
            open: true,
            base: "b".into(),
            head: "h".into(),
            merge_tree: Ok("t".into()),
            changed_paths: vec!["src/lib.rs".into()],
            policy_digest: "d".into(),
            proposer: None,
        }
    }

    fn finding(reviewer: &str, severity: Severity) -> Finding {
        Finding {
            reviewer: reviewer.into(),
            severity,
            category: "c".into(),
            file: Some("src/lib.rs".into()),
            line: Some(1),
            message: "m".into(),
            hint: "h".into(),
        }
    }

    fn recorded(head: &str, verdict: Panel, findings: Vec<Finding>) -> RecordedReview {
        RecordedReview {
            base: "b".into(),
            head: head.into(),
            tree: Some("t".into()),
            panel: "p".into(),
            verdict,
            findings,
        }
    }

    /// (case, [review] lines, agents, built-in findings, recorded, approvers, unmet codes)
    type Case = (
        &'static str,
        &'static str,
        &'static [&'static str],
        Vec<Finding>,
        Option<RecordedReview>,
        &'static [&'static str],
        &'static [Code],
    );

    #[test]
    fn the_panel_requirements_on_plain_data() {
        let major = || vec![finding("size", Severity::Major)];
        let blocking = || vec![finding("secrets", Severity::Blocking)];
        let cases: Vec<Case> = vec![
            ("no findings", "", &[], vec![], None, &[], &[]),
            (
                "a major finding only revises",
                "",
                &[],
                major(),
                None,
                &[],
                &[],
            ),
            (
                "block_on = revise refuses it",
                "block_on = \"revise\"",
                &[],
                major(),
                None,
                &[],
                &[Code::ReviewBlocked],
            ),
            (
                "a blocking finding refuses",
                "",
                &[],
                blocking(),
                None,
                &["a"],
                &[Code::ReviewBlocked],
            ),
            (
                "the constitution quorum overrules",
                "",
                &[],
                blocking(),
                None,
                &["a", "b"],
                &[],
            ),
            (
                "agents without a verdict",
                "",
                &["critic"],
                vec![],
                None,
                &[],
                &[Code::ReviewMissing],
            ),
            (
                "agents, not required",
                "required = false",
                &["critic"],
                vec![],
                None,
                &[],
                &[],
            ),
            (
                "a current approving verdict",
                "",
                &["critic"],
                vec![],
                Some(recorded("h", Panel::Approve, vec![])),
                &[],
                &[],
            ),
            (
                "a verdict for another head is stale",
                "",
                &["critic"],
                vec![],
                Some(recorded("old", Panel::Approve, vec![])),
                &[],
                &[Code::ReviewStale],
            ),
            (
                "a stale block does not refuse",
                "",
                &["critic"],
                vec![],
                Some(recorded("old", Panel::Block, vec![])),
                &["a", "b"],
                &[Code::ReviewStale],
            ),
            (
                "a current agent block refuses",
                "",
                &["critic"],
                vec![],
                Some(recorded(
                    "h",
                    Panel::Block,
                    vec![finding("critic", Severity::Blocking)],
                )),
                &["a"],
                &[Code::ReviewBlocked],
            ),
            (
                "an agent's verdict alone blocks",
                "",
                &["critic"],
                vec![],
                Some(recorded("h", Panel::Block, vec![])),
                &[],
                &[Code::ReviewBlocked],
            ),
            // Findings a recording attributes to a built-in are not taken from it: the gate
            // re-runs the built-ins itself.
            (
                "recorded built-in findings are not trusted",
                "",
                &["critic"],
                vec![],
                Some(recorded(
                    "h",
                    Panel::Approve,
                    vec![finding("secrets", Severity::Blocking)],
                )),
                &[],
                &[],
            ),
        ];
        for (name, review, agents, builtin, rec, approvers, want) in cases {
            let gov =
                DEFAULT_GOVERNANCE_TOML.replace("[review]\n", &format!("[review]\n{review}\n"));
            let gov = if review.contains("block_on") {
                gov.replace("block_on = \"block\"\n", "")
            } else if review.contains("required") {
                gov.replace("required = true\n", "")
            } else {
                gov
            };
            let policy = Policy::load(&PolicyFiles {
                governance: Some(gov.into_bytes()),
                allowed_signers: Some(Vec::new()),
                gate_key: None,
            })
            .expect("policy");
            let c = change();
            let panel = PanelInput {
                panel: Ok(PanelAtBase {
                    digest: "p".into(),
                    agents: agents.iter().map(|s| s.to_string()).collect(),
                }),
                builtin,
                recorded: rec,
            };
            let base = Ok(policy.clone());
            let input = GateInput {
                change: &c,
                base_policy: &base,
                new_policy: &base,
                tokens: &[],
                ledger_roots: &BTreeMap::new(),
                panel: &panel,
                evidence: &Evidence::NotACycle,
                now: 0,
            };
            let approvers: BTreeSet<String> = approvers.iter().map(|s| s.to_string()).collect();
            let mut out = Vec::new();
            review_requirements(&input, &policy, &approvers, &mut out);
            let unmet: Vec<Code> = out.iter().filter(|r| !r.met).map(|r| r.code).collect();
            assert_eq!(unmet, want, "{name}: {out:#?}");
        }
    }

    #[test]
    fn an_unreadable_panel_fails_closed() {
        let policy = Policy::load(&PolicyFiles {
            governance: Some(DEFAULT_GOVERNANCE_TOML.as_bytes().to_vec()),
            allowed_signers: Some(Vec::new()),
            gate_key: None,
        })
        .expect("policy");
        let c = change();
        let panel = PanelInput {
            panel: Err("reviewers/x.toml: kind: nope".into()),
            builtin: vec![],
            recorded: None,
        };
        let base = Ok(policy.clone());
        let d = decide(&GateInput {
            change: &c,
            base_policy: &base,
            new_policy: &base,
            tokens: &[],
            ledger_roots: &BTreeMap::new(),
            panel: &panel,
            evidence: &Evidence::NotACycle,
            now: 0,
        });
        assert!(!d.allowed);
        assert!(d
            .unmet()
            .any(|r| r.code == Code::ReviewInvalid && r.found.contains("reviewers/x.toml")));
        assert_eq!(d.review.verdict, None);
    }

    #[test]
    fn a_cycle_proposal_merges_only_as_the_change_its_evidence_was_recorded_for() {
        let policy = Policy::load(&PolicyFiles {
            governance: Some(DEFAULT_GOVERNANCE_TOML.as_bytes().to_vec()),
            allowed_signers: Some(Vec::new()),
            gate_key: None,
        })
        .expect("policy");
        let c = change();
        let base = Ok(policy);
        let cases = [
            (Evidence::NotACycle, None),
            (Evidence::Registered { recorded: None }, Some("no evidence")),
            (
                Evidence::Registered {
                    recorded: Some(("other".into(), "b".into())),
                },
                Some("changed after it was measured"),
            ),
            (
                Evidence::Registered {
                    recorded: Some(("h".into(), "older".into())),
                },
                Some("the protected branch moved since"),
            ),
            (
                Evidence::Registered {
                    recorded: Some(("h".into(), "b".into())),
                },
                None,
            ),
        ];
        for (evidence, unmet) in cases {
            let d = decide(&GateInput {
                change: &c,
                base_policy: &base,
                new_policy: &base,
                tokens: &[],
                ledger_roots: &BTreeMap::new(),
                panel: &PanelInput::quiet(),
                evidence: &evidence,
                now: 0,
            });
            let found = d
                .unmet()
                .find(|r| r.code == Code::EvidenceMissing)
                .map(|r| r.found.clone());
            match unmet {
                None => assert_eq!(found, None, "{evidence:?}"),
                Some(why) => assert!(
                    found.as_deref().is_some_and(|f| f.contains(why)),
                    "{evidence:?}: {found:?}"
                ),
            }
        }
    }
}
