//! Refusal codes: the one list of the stable `E_…` codes Atelier reports. Gate requirements,
//! token reports, audit findings, plan problems and refused commands all carry a [`Code`], never
//! a string; its `Display` and its JSON form are the `E_…` text. GOVERNANCE.md documents every
//! code with what to do about it (a test checks that it does).
//!
//! An error that carries a code implements [`Coded`]; the CLI turns any such error into exit
//! code 1 (`cli::exit_class`), whatever else is wrong.

use std::fmt;
use std::str::FromStr;

macro_rules! codes {
    ($($variant:ident = $text:literal,)*) => {
        /// A stable refusal code. `Display`, `as_str()` and the JSON form are the `E_…` text.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Code {
            $($variant,)*
        }

        impl Code {
            /// Every code, in the order they are declared.
            pub const ALL: &'static [Code] = &[$(Code::$variant,)*];

            /// The `E_…` text.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Code::$variant => $text,)*
                }
            }
        }
    };
}

codes! {
    // Requirements of the gate (`governance::decision`).
    NotOpen = "E_NOT_OPEN",
    PolicyInvalid = "E_POLICY_INVALID",
    MergeConflict = "E_MERGE_CONFLICT",
    Vetoed = "E_VETOED",
    EmptyChange = "E_EMPTY_CHANGE",
    NoRule = "E_NO_RULE",
    ReservedPath = "E_RESERVED_PATH",
    LedgerRollback = "E_LEDGER_ROLLBACK",
    QuorumNotMet = "E_QUORUM_NOT_MET",
    ConstitutionQuorum = "E_CONSTITUTION_QUORUM",
    NewPolicyInvalid = "E_NEW_POLICY_INVALID",
    NewPolicyQuorum = "E_NEW_POLICY_QUORUM",
    ReviewInvalid = "E_REVIEW_INVALID",
    ReviewBlocked = "E_REVIEW_BLOCKED",
    ReviewMissing = "E_REVIEW_MISSING",
    EvidenceMissing = "E_EVIDENCE_MISSING",
    ReviewStale = "E_REVIEW_STALE",

    // Why a token does not count (`governance::token`, `governance::decision`).
    TokenMalformed = "E_TOKEN_MALFORMED",
    WrongNamespace = "E_WRONG_NAMESPACE",
    UnsupportedKey = "E_UNSUPPORTED_KEY",
    WeakKey = "E_WEAK_KEY",
    BadSignature = "E_BAD_SIGNATURE",
    GateKeySigner = "E_GATE_KEY_SIGNER",
    UnknownSigner = "E_UNKNOWN_SIGNER",
    AmbiguousSigner = "E_AMBIGUOUS_SIGNER",
    SignerNamespace = "E_SIGNER_NAMESPACE",
    KeyRevoked = "E_KEY_REVOKED",
    KeyOutsideValidity = "E_KEY_OUTSIDE_VALIDITY",
    WrongRepository = "E_WRONG_REPOSITORY",
    WrongProposal = "E_WRONG_PROPOSAL",
    WrongPull = "E_WRONG_PULL",
    StaleHead = "E_STALE_HEAD",
    StaleBase = "E_STALE_BASE",
    MergeTreeMismatch = "E_MERGE_TREE_MISMATCH",
    PolicyDigestMismatch = "E_POLICY_DIGEST_MISMATCH",
    TokenLifetime = "E_TOKEN_LIFETIME",
    TokenNotYetValid = "E_TOKEN_NOT_YET_VALID",
    TokenExpired = "E_TOKEN_EXPIRED",
    CheckpointMismatch = "E_CHECKPOINT_MISMATCH",
    ProposerSigner = "E_PROPOSER_SIGNER",
    BotSigner = "E_BOT_SIGNER",
    DuplicateToken = "E_DUPLICATE_TOKEN",
    DuplicatePrincipal = "E_DUPLICATE_PRINCIPAL",

    // Commands that refuse (`workflow`, `audit::ledger`).
    ForgeState = "E_FORGE_STATE",
    ClockBehindLedger = "E_CLOCK_BEHIND_LEDGER",
    BaseMoved = "E_BASE_MOVED",
    WorktreeMoved = "E_WORKTREE_MOVED",
    AdoptionMismatch = "E_ADOPTION_MISMATCH",
    LandedTreeMismatch = "E_LANDED_TREE_MISMATCH",
    LedgerCorrupt = "E_LEDGER_CORRUPT",
    LedgerMoved = "E_LEDGER_MOVED",
    NotAProposal = "E_NOT_A_PROPOSAL",
    HeadMoved = "E_HEAD_MOVED",
    NotMergeable = "E_NOT_MERGEABLE",
    LandedParentsMismatch = "E_LANDED_PARENTS_MISMATCH",
    LandedNotTip = "E_LANDED_NOT_TIP",
    NotSubmitted = "E_NOT_SUBMITTED",
    NotPublished = "E_NOT_PUBLISHED",
    LedgerDiverged = "E_LEDGER_DIVERGED",
    MergedOutsideGate = "E_MERGED_OUTSIDE_GATE",
    LedgerUnverified = "E_LEDGER_UNVERIFIED",
    PullRetargeted = "E_PULL_RETARGETED",
    PullClosed = "E_PULL_CLOSED",
    GateKeyNotInForce = "E_GATE_KEY_NOT_IN_FORCE",

    // Findings of `audit verify` (`audit::history`).
    NotAdopted = "E_NOT_ADOPTED",
    UnledgeredCommit = "E_UNLEDGERED_COMMIT",
    MergeMismatch = "E_MERGE_MISMATCH",
    MergeNotApproved = "E_MERGE_NOT_APPROVED",
    MergeNotOnBranch = "E_MERGE_NOT_ON_BRANCH",
    LedgerMissing = "E_LEDGER_MISSING",
    AlarmRecorded = "E_ALARM_RECORDED",
    LedgerMalformed = "E_LEDGER_MALFORMED",
    LedgerTimeReversed = "E_LEDGER_TIME_REVERSED",
    LedgerSequence = "E_LEDGER_SEQUENCE",
    LedgerSignature = "E_LEDGER_SIGNATURE",
    LedgerOrigin = "E_LEDGER_ORIGIN",
    LedgerSizeMismatch = "E_LEDGER_SIZE_MISMATCH",
    LedgerTruncated = "E_LEDGER_TRUNCATED",
    LedgerRootMismatch = "E_LEDGER_ROOT_MISMATCH",
    LedgerInconsistent = "E_LEDGER_INCONSISTENT",
    AbortedMergeLanded = "E_ABORTED_MERGE_LANDED",
    LedgerContradiction = "E_LEDGER_CONTRADICTION",

    // Plans (`swarm::plan`) and runs (`swarm::runtime`).
    PlanDuplicateId = "E_PLAN_DUPLICATE_ID",
    PlanBadId = "E_PLAN_BAD_ID",
    PlanBadField = "E_PLAN_BAD_FIELD",
    TaskDuplicateId = "E_TASK_DUPLICATE_ID",
    TaskBadId = "E_TASK_BAD_ID",
    TaskNoGoal = "E_TASK_NO_GOAL",
    UnknownDependency = "E_UNKNOWN_DEPENDENCY",
    DependencyCycle = "E_DEPENDENCY_CYCLE",
    UnknownRole = "E_UNKNOWN_ROLE",
    ContractNoCheck = "E_CONTRACT_NO_CHECK",
    ContractNoCriteria = "E_CONTRACT_NO_CRITERIA",
    ContractVague = "E_CONTRACT_VAGUE",
    BadGlob = "E_BAD_GLOB",
    PlanRefused = "E_PLAN_REFUSED",
    ContractRejected = "E_CONTRACT_REJECTED",
    ScrutinyFailed = "E_SCRUTINY_FAILED",
    CheckInReach = "E_CHECK_IN_REACH",
    RunBranchMoved = "E_RUN_BRANCH_MOVED",

    // Containment of workers (`agent::contain`, `swarm::runtime`).
    ContainmentUnavailable = "E_CONTAINMENT_UNAVAILABLE",
    ContainmentPath = "E_CONTAINMENT_PATH",
    ContainmentUncommitted = "E_CONTAINMENT_UNCOMMITTED",
    ContainmentSecret = "E_CONTAINMENT_SECRET",
    EndpointBlocked = "E_ENDPOINT_BLOCKED",
}

/// GOVERNANCE.md, built in: its "Refusal codes" table is the one place each code's next step is
/// written, and what a command prints after a refusal.
const GOVERNANCE: &str = include_str!("../../GOVERNANCE.md");

impl Code {
    /// What to do about this code: the last column of its row in GOVERNANCE.md's "Refusal
    /// codes" table (every code has one; a test checks it).
    pub fn next_step(self) -> Option<&'static str> {
        let prefix = format!("| `{}` |", self.as_str());
        let row = GOVERNANCE.lines().find(|l| l.starts_with(&prefix))?;
        let step = row
            .trim_end()
            .strip_suffix('|')?
            .rsplit(" | ")
            .next()?
            .trim();
        (!step.is_empty()).then_some(step)
    }

    /// Where the code is explained, for a person reading a refusal.
    pub fn documented_at(self) -> String {
        format!("GOVERNANCE.md, \"Refusal codes\", {}", self.as_str())
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl serde::Serialize for Code {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// Text that is not one of the codes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not an Atelier refusal code")]
pub struct UnknownCode(pub String);

impl FromStr for Code {
    type Err = UnknownCode;

    /// Reads a code back from text, such as the codes the ledger records.
    fn from_str(text: &str) -> Result<Code, UnknownCode> {
        Code::ALL
            .iter()
            .copied()
            .find(|c| c.as_str() == text)
            .ok_or_else(|| UnknownCode(text.to_string()))
    }
}

/// An error that carries a refusal code. The CLI exits 1 for any error whose chain holds one
/// that returns `Some`; every implementor must be named in `cli::coded` (a tidy test checks).
pub trait Coded {
    fn code(&self) -> Option<Code>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn every_code_has_a_next_step() {
        let missing: Vec<&str> = Code::ALL
            .iter()
            .filter(|c| c.next_step().is_none())
            .map(|c| c.as_str())
            .collect();
        assert!(
            missing.is_empty(),
            "no next step in GOVERNANCE.md for {missing:?}"
        );
        assert!(Code::Vetoed
            .next_step()
            .is_some_and(|s| s.starts_with("talk to whoever rejected")));
    }

    #[test]
    fn every_code_is_unique_and_spelled_from_its_name() {
        let mut seen = BTreeSet::new();
        for code in Code::ALL {
            let text = code.as_str();
            assert!(text.starts_with("E_"), "{text}");
            assert!(seen.insert(text), "{text} appears twice");
            // `NotAProposal` is `E_NOT_A_PROPOSAL`: the text is the name in upper snake case.
            let mut snake = String::from("E");
            for ch in format!("{code:?}").chars() {
                if ch.is_ascii_uppercase() {
                    snake.push('_');
                }
                snake.push(ch.to_ascii_uppercase());
            }
            assert_eq!(snake, text, "{code:?}");
            assert_eq!(code.to_string(), text);
            assert_eq!(text.parse::<Code>(), Ok(*code));
            assert_eq!(
                serde_json::to_string(code).expect("serialises"),
                format!("\"{text}\"")
            );
        }
        assert_eq!(seen.len(), Code::ALL.len());
        assert!("E_NOPE".parse::<Code>().is_err());
    }
}
