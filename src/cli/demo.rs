//! `atelier demo`: the whole governed loop in a temporary repository, offline, narrated. Every
//! step is the real operation (the same domain calls the commands make); nothing is simulated.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;

use super::{gate::render, out};
use crate::forge::Addr;
use crate::governance::token::{RawToken, Verdict};
use crate::governance::Code;
use crate::workflow::{
    self, ApproveOptions, MergeOutcome, ProposeOptions, Publish, Sign, Workspace,
};

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Where to build the demo repository (must not exist yet; default: a new temporary directory that is kept).
    #[arg(long)]
    dir: Option<PathBuf>,
}

struct Narrator {
    step: usize,
}

impl Narrator {
    fn step(&mut self, title: &str) -> Result<()> {
        self.step += 1;
        out(&format!("\n== {}. {title}\n", self.step))
    }

    fn say(&self, text: &str) -> Result<()> {
        let mut t = String::new();
        for line in text.lines() {
            t.push_str(&format!("   {line}\n"));
        }
        out(&t)
    }
}

fn commit_all(repo: &git2::Repository, message: &str) -> Result<git2::Oid> {
    let mut index = repo.index()?;
    index.add_all(["*"].iter(), git2::IndexAddOption::DEFAULT, None)?;
    index.write()?;
    let tree = repo.find_tree(index.write_tree()?)?;
    let sig = repo.signature()?;
    let parents: Vec<git2::Commit<'_>> = match repo.head() {
        Ok(h) => vec![h.peel_to_commit()?],
        Err(_) => Vec::new(),
    };
    let refs: Vec<&git2::Commit<'_>> = parents.iter().collect();
    Ok(repo.commit(Some("HEAD"), &sig, &sig, message, &tree, &refs)?)
}

fn write(root: &Path, rel: &str, text: &str) -> Result<()> {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().expect("a repository path has a parent"))?;
    std::fs::write(&p, text).with_context(|| format!("writing {}", p.display()))
}

fn propose(
    ws: &Workspace,
    root: &Path,
    edits: &[(&str, &str)],
    title: &str,
    rationale: &str,
    now: i64,
) -> Result<String> {
    propose_by(ws, root, edits, title, rationale, None, now)
}

/// [`propose`], saying which agent wrote the patch (`propose --agent NAME`).
fn propose_by(
    ws: &Workspace,
    root: &Path,
    edits: &[(&str, &str)],
    title: &str,
    rationale: &str,
    agent: Option<&str>,
    now: i64,
) -> Result<String> {
    let base = ws
        .repo
        .find_commit(crate::git::branch_tip(&ws.repo, ws.branch())?)?
        .tree()?;
    let patch = crate::git::patch_for(&ws.repo, &base, edits)?;
    let n = std::fs::read_dir(root.join("patches"))
        .map(|d| d.count())
        .unwrap_or(0)
        + 1;
    let path = root.join("patches").join(format!("{n}.patch"));
    std::fs::create_dir_all(root.join("patches"))?;
    std::fs::write(&path, &patch)?;
    let p = workflow::propose(
        ws,
        ProposeOptions {
            origin: agent.map(|a| format!("agent {a}")),
            declared: None,
            patch: path,
            title: title.into(),
            rationale: Some(rationale.into()),
            proposer: None,
            expect_base: None,
        },
        now,
    )?;
    Ok(p.id)
}

pub fn demo(args: DemoArgs) -> Result<ExitCode> {
    let now = super::now()?;
    let base_dir = match args.dir {
        Some(d) => {
            if d.exists()
                && std::fs::read_dir(&d)
                    .map(|mut e| e.next().is_some())
                    .unwrap_or(true)
            {
                anyhow::bail!(
                    "--dir {}: already exists and is not empty; give a new path",
                    d.display()
                );
            }
            std::fs::create_dir_all(&d)?;
            d
        }
        None => tempfile::Builder::new()
            .prefix("atelier-demo-")
            .tempdir()?
            .keep(),
    };
    let root = base_dir.join("repo");
    let keys = base_dir.join("keys");
    std::fs::create_dir_all(&root)?;
    // A new repository here: whatever this machine remembers of one that was here before (a
    // demo run in the same directory, since deleted) is not this one's.
    crate::audit::witness::forget_identity(&root)?;
    let mut n = Narrator { step: 0 };
    out("Atelier demo: the governed change loop, offline, on the local forge.\n")?;

    n.step("A project under git")?;
    let repo = git2::Repository::init_opts(
        &root,
        git2::RepositoryInitOptions::new().initial_head("main"),
    )?;
    let mut cfg = repo.config()?;
    cfg.set_str("user.name", "Maintainer")?;
    cfg.set_str("user.email", "maintainer@demo.invalid")?;
    write(&root, "README.md", "# calc\n\nA tiny library.\n")?;
    write(
        &root,
        "src/lib.rs",
        "pub fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n",
    )?;
    write(
        &root,
        "tests/add.rs",
        "#[test]\nfn adds() {\n    assert_eq!(calc::add(2, 3), 5);\n}\n",
    )?;
    commit_all(&repo, "calc: first version")?;
    n.say(&format!(
        "{} with one commit on main (src/lib.rs has a bug: add subtracts, and tests/add.rs says so)",
        root.display()
    ))?;

    n.step("Adopt atelier: policy, gate key, two approvers")?;
    let init = workflow::init(&root, Some("demo/calc".into()), None)?;
    n.say(&format!("atelier init wrote {}", init.created.join(", ")))?;
    let alice = workflow::keygen(&keys.join("alice"), Some("alice@demo.invalid".into()))?;
    let bob = workflow::keygen(&keys.join("bob"), Some("bob@demo.invalid".into()))?;
    let mut signers = std::fs::read_to_string(root.join("policies/allowed_signers"))?;
    signers.push_str(&format!(
        "{}\n{}\n",
        alice.allowed_signers_line, bob.allowed_signers_line
    ));
    std::fs::write(root.join("policies/allowed_signers"), signers)?;
    let adoption = commit_all(&repo, "Adopt atelier")?;
    n.say(&format!(
        "approver keys: {} ({}), {} ({})\ncommitted the policy as {adoption}: from here on, every change to main goes through the gate\n(default policy: 1 approval for any change, 2 for the constitution: policies/, reviewers/, GOVERNANCE.md, .ci/, src/governance/, src/audit/)",
        "alice@demo.invalid", alice.fingerprint, "bob@demo.invalid", bob.fingerprint
    ))?;

    let ws = Workspace::open(&root)?;
    let week = ApproveOptions {
        expires_in: 7 * 86_400,
        decision: Verdict::Approve,
    };

    n.step("Propose a fix")?;
    let fix = propose(
        &ws,
        &base_dir,
        &[(
            "src/lib.rs",
            "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n",
        )],
        "Make add add",
        "add() subtracted its arguments.",
        now,
    )?;
    n.say(&format!(
        "atelier propose → proposal {fix} on branch atelier/proposals/{fix}"
    ))?;

    n.step("The gate refuses: nobody has approved yet")?;
    let eval = workflow::gate(&ws, &Addr::Proposal(fix.clone()), now, Publish::Verdict)?.eval;
    n.say(&render(&eval))?;

    n.step("alice approves with her SSH key; the gate allows; merge")?;
    let token = workflow::approve(
        &ws,
        &Addr::Proposal(fix.clone()),
        Sign::Key(workflow::read_signing_key(&keys.join("alice"))?),
        &week,
        true,
        now,
    )?;
    n.say(&format!(
        "alice's token (verifiable with `ssh-keygen -Y verify`):\n{}",
        token.tokens
    ))?;
    let eval = workflow::gate(&ws, &Addr::Proposal(fix.clone()), now, Publish::Verdict)?.eval;
    n.say(&render(&eval))?;
    match workflow::merge(&ws, &Addr::Proposal(fix.clone()), now)? {
        MergeOutcome::Merged(m) => n.say(&format!(
            "merged as {} (tree {} re-checked after landing)",
            m.commit, m.tree
        ))?,
        MergeOutcome::Refused(e) => {
            anyhow::bail!("demo: the approved fix was refused:\n{}", render(&e.eval))
        }
    }

    n.step("A constitution change needs two approvals")?;
    let gov = std::fs::read_to_string(root.join("policies/governance.toml"))?
        .replace("max_lifetime = \"30d\"", "max_lifetime = \"14d\"");
    let constitutional = propose(
        &ws,
        &base_dir,
        &[("policies/governance.toml", &gov)],
        "Shorter token lifetime",
        "Approvals should not linger.",
        now,
    )?;
    workflow::approve(
        &ws,
        &Addr::Proposal(constitutional.clone()),
        Sign::Key(workflow::read_signing_key(&keys.join("alice"))?),
        &week,
        true,
        now,
    )?;
    let eval = workflow::gate(
        &ws,
        &Addr::Proposal(constitutional.clone()),
        now,
        Publish::Verdict,
    )?
    .eval;
    n.say(&format!(
        "proposal {constitutional} changes policies/governance.toml; alice approved:\n\n{}",
        render(&eval)
    ))?;
    workflow::approve(
        &ws,
        &Addr::Proposal(constitutional.clone()),
        Sign::Key(workflow::read_signing_key(&keys.join("bob"))?),
        &week,
        true,
        now,
    )?;
    match workflow::merge(&ws, &Addr::Proposal(constitutional.clone()), now)? {
        MergeOutcome::Merged(m) => n.say(&format!("bob approved too: merged as {}", m.commit))?,
        MergeOutcome::Refused(e) => {
            anyhow::bail!(
                "demo: the constitution change was refused:\n{}",
                render(&e.eval)
            )
        }
    }

    n.step("Tampered and replayed tokens are refused")?;
    let docs = propose(
        &ws,
        &base_dir,
        &[("README.md", "# calc\n\nA tiny library that adds.\n")],
        "Describe calc",
        "Say what it does.",
        now,
    )?;
    let replayed = token.tokens.clone();
    let mut tampered = RawToken::extract_all(&token.tokens).remove(0);
    tampered.payload = tampered.payload.replace(
        &format!("proposal {fix}\npull {fix}\n"),
        &format!("proposal {docs}\npull {docs}\n"),
    );
    for (name, text) in [("replayed", replayed), ("tampered", tampered.to_text())] {
        let path = base_dir.join(format!("{name}-token.txt"));
        std::fs::write(&path, text)?;
        workflow::approve(
            &ws,
            &Addr::Proposal(docs.clone()),
            Sign::Text(std::fs::read_to_string(&path)?),
            &week,
            true,
            now,
        )?;
    }
    let eval = workflow::gate(&ws, &Addr::Proposal(docs.clone()), now, Publish::Verdict)?.eval;
    n.say(&format!(
        "alice's token for proposal {fix} was posted on proposal {docs} as is (replayed) and with its proposal number edited (tampered):\n\n{}",
        render(&eval)
    ))?;
    workflow::close(&ws, &docs, Some("demo: left unapproved".into()), now)?;

    n.step("The review panel blocks an agent's patch that weakens a test")?;
    let gaming = propose_by(
        &ws,
        &base_dir,
        &[(
            "tests/add.rs",
            "#[test]\nfn adds() {\n    // assert_eq!(calc::add(2, 3), 5);\n}\n",
        )],
        "Make the tests pass",
        "The add test was failing.",
        Some("demo-agent"),
        now,
    )?;
    let review = workflow::review::review(&ws, &Addr::Proposal(gaming.clone()), now)?;
    n.say(&format!(
        "demo-agent proposed {gaming}; `atelier review {gaming}` ran the panel from reviewers/ at base and recorded its verdict: {}",
        review.verdict.as_str()
    ))?;
    for f in &review.findings {
        n.say(&format!("  {}", workflow::review::finding_line(f)))?;
    }
    workflow::approve(
        &ws,
        &Addr::Proposal(gaming.clone()),
        Sign::Key(workflow::read_signing_key(&keys.join("alice"))?),
        &week,
        true,
        now,
    )?;
    let eval = workflow::gate(&ws, &Addr::Proposal(gaming.clone()), now, Publish::Verdict)?.eval;
    if eval.decision.allowed {
        anyhow::bail!(
            "demo: the panel did not block a weakened test:\n{}",
            render(&eval)
        );
    }
    n.say(&format!(
        "alice approved it, which meets the path's quorum, but the gate refuses what the panel blocks (only the constitution quorum could overrule it):\n\n{}",
        render(&eval)
    ))?;
    workflow::close(&ws, &gaming, Some("demo: the panel blocked it".into()), now)?;

    n.step("Audit: verify the history offline")?;
    let report =
        crate::audit::history::verify(&ws.repo, &ws.config.forge.repository, ws.branch(), 2)?;
    n.say(&format!(
        "{} commits since adoption, {} merges verified, {} signatures verified, {} ledger entries, {} checkpoints; findings: {}",
        report.commits_checked,
        report.merges_verified,
        report.signatures_verified,
        report.ledger_entries,
        report.checkpoints_verified,
        if report.findings.is_empty() { "none".to_string() } else { report.findings.iter().map(|f| f.code.as_str()).collect::<Vec<_>>().join(", ") }
    ))?;
    if !report.findings.is_empty() {
        anyhow::bail!("demo: audit verify found problems in a history it just made");
    }

    n.step("A commit that bypasses the gate is caught")?;
    let clone_dir = base_dir.join("bypass-clone");
    let clone =
        git2::Repository::clone(root.to_str().context("the demo path is UTF-8")?, &clone_dir)?;
    clone
        .find_remote("origin")?
        .fetch(&["refs/atelier/ledger:refs/atelier/ledger"], None, None)?;
    let mut cfg = clone.config()?;
    cfg.set_str("user.name", "Eve")?;
    cfg.set_str("user.email", "eve@demo.invalid")?;
    write(
        &clone_dir,
        "src/lib.rs",
        "pub fn add(a: i32, b: i32) -> i32 {\n    a * b\n}\n",
    )?;
    let bypass = commit_all(&clone, "quick fix")?;
    let report =
        crate::audit::history::verify(&clone, &ws.config.forge.repository, ws.branch(), 2)?;
    let shown: Vec<String> = report
        .findings
        .iter()
        .map(|f| format!("{}: {}", f.code, f.detail))
        .collect();
    n.say(&format!(
        "in a clone, Eve commits {bypass} straight to main; audit verify there reports:\n{}",
        shown.join("\n")
    ))?;
    if !report
        .findings
        .iter()
        .any(|f| f.code == Code::UnledgeredCommit)
    {
        anyhow::bail!("demo: the bypassing commit was not flagged");
    }

    n.step("A rewound ledger is caught")?;
    // Eve resets her clone's ledger to its first signed commit, as if the rejections and merges
    // recorded since had never happened: every signature still verifies, but the merge commits
    // on main carry the gate-signed checkpoints of the longer ledger.
    let mut first = clone
        .find_reference(crate::audit::ledger::REF)?
        .peel_to_commit()?;
    while let Ok(parent) = first.parent(0) {
        first = parent;
    }
    clone.reference(
        crate::audit::ledger::REF,
        first.id(),
        true,
        "demo: rewind the ledger",
    )?;
    let report =
        crate::audit::history::verify(&clone, &ws.config.forge.repository, ws.branch(), 2)?;
    let rollback: Vec<String> = report
        .findings
        .iter()
        .filter(|f| f.code == Code::LedgerRollback)
        .map(|f| format!("{}: {}", f.code, f.detail))
        .collect();
    if rollback.is_empty() {
        anyhow::bail!("demo: the rewound ledger was not flagged");
    }
    n.say(&format!(
        "Eve resets refs/atelier/ledger in her clone to its first commit ({}); audit verify there reports:\n{}",
        first.id(),
        rollback.join("\n")
    ))?;

    n.step("The swarm: a plan run by an agent becomes a proposal like any other")?;
    // The agent here is a shell script standing in for Claude Code, Codex or Aider, so the demo
    // runs offline; it is a real program run the way any agent is.
    let agent = base_dir.join("agent.sh");
    std::fs::write(
        &agent,
        "#!/bin/sh\n# A stand-in agent: reads its prompt, then does the task.\ncat > /dev/null\ncase \"$ATELIER_TASK_ID\" in\n  calc-1:*) printf 'pub fn add(a: i32, b: i32) -> i32 {\\n    a + b\\n}\\n\\npub fn sub(a: i32, b: i32) -> i32 {\\n    a - b\\n}\\n' > src/lib.rs ;;\n  # The routine work of step 13: B gets it wrong at its first attempt, right at its second.\n  routine:A) mkdir -p out; echo done > out/a.txt ;;\n  routine:B) mkdir -p out; if [ \"$ATELIER_ATTEMPT\" = 1 ]; then echo wrong > out/b.txt; else echo done > out/b.txt; fi ;;\nesac\n",
    )?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755))?;
    }
    let config = format!(
        "{}\n[roles.implementer]\nbackend = \"command\"\ncommand = [{}]\n\n[conductor]\n# One attempt per task (step 13 measures whether that is enough).\nfailure_budget = 1\n",
        std::fs::read_to_string(root.join("atelier.toml"))?,
        toml::Value::String(agent.display().to_string())
    );
    let role = propose(
        &ws,
        &base_dir,
        &[("atelier.toml", &config)],
        "Add an implementer role",
        "Let the swarm work on calc.",
        now,
    )?;
    for who in ["alice", "bob"] {
        workflow::approve(
            &ws,
            &Addr::Proposal(role.clone()),
            Sign::Key(workflow::read_signing_key(&keys.join(who))?),
            &week,
            true,
            now,
        )?;
    }
    match workflow::merge(&ws, &Addr::Proposal(role.clone()), now)? {
        MergeOutcome::Merged(m) => n.say(&format!(
            "atelier.toml is constitutional, so configuring the agent took alice and bob: proposal {role} merged as {}",
            m.commit
        ))?,
        MergeOutcome::Refused(e) => anyhow::bail!("demo: the role change was refused:\n{}", render(&e.eval)),
    }
    let ws = Workspace::open(&root)?;
    let plan_text = "[plan]\nid = \"calc-1\"\ntitle = \"Add sub\"\n\n[[task]]\nid = \"T1\"\ntitle = \"Add a sub function\"\nrole = \"implementer\"\ngoal = \"Add pub fn sub(a, b) returning a - b to src/lib.rs.\"\nfiles = [\"src/lib.rs\"]\n[task.contract]\ncriteria = [\"src/lib.rs defines pub fn sub returning a - b\"]\nchecks = [\"grep -q 'pub fn sub' src/lib.rs\"]\n";
    let plan_path = base_dir.join("plan.toml");
    std::fs::write(&plan_path, plan_text)?;
    let clock = || now;
    let summary = crate::swarm::runtime::run(
        &ws,
        crate::swarm::runtime::RunOptions {
            plan_files: vec![(plan_path.display().to_string(), plan_text.to_string())],
            max_parallel: None,
            resume: None,
            goal: None,
        },
        &clock,
    )?;
    if !summary.ok() {
        anyhow::bail!(
            "demo: the swarm run did not succeed: {:?} {:?}",
            summary.failed,
            summary.blocked
        );
    }
    let proposed = crate::swarm::runtime::propose_run(&ws, &summary, now)?;
    n.say(&format!(
        "plan {} ran in a worktree, contained ({}: the agent could write its worktree, not the repository, the gate key or your home); events: {}; the task passed its check, was integrated into {} and became proposal {}",
        plan_path.display(),
        summary.containment,
        summary.events,
        summary.branch,
        proposed.id
    ))?;
    let eval = workflow::gate(
        &ws,
        &Addr::Proposal(proposed.id.clone()),
        now,
        Publish::Verdict,
    )?
    .eval;
    n.say(&format!(
        "the gate treats it like any other change:\n\n{}",
        render(&eval)
    ))?;
    workflow::approve(
        &ws,
        &Addr::Proposal(proposed.id.clone()),
        Sign::Key(workflow::read_signing_key(&keys.join("alice"))?),
        &week,
        true,
        now,
    )?;
    match workflow::merge(&ws, &Addr::Proposal(proposed.id.clone()), now)? {
        MergeOutcome::Merged(m) => n.say(&format!("alice approved; merged as {}", m.commit))?,
        MergeOutcome::Refused(e) => {
            anyhow::bail!(
                "demo: the swarm's proposal was refused:\n{}",
                render(&e.eval)
            )
        }
    }
    let report =
        crate::audit::history::verify(&ws.repo, &ws.config.forge.repository, ws.branch(), 2)?;
    n.say(&format!(
        "audit verify: {} merges verified, findings: {}",
        report.merges_verified,
        if report.findings.is_empty() {
            "none".to_string()
        } else {
            report
                .findings
                .iter()
                .map(|f| f.code.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        }
    ))?;
    if !report.findings.is_empty() {
        anyhow::bail!("demo: audit verify found problems after the swarm's merge");
    }

    n.step(
        "The self-improvement cycle: telemetry, a tuning proposal, its evidence, two approvers",
    )?;
    // Routine work, five times: task B needs a second attempt the configuration never gives it.
    let routine = "[plan]\nid = \"routine\"\ntitle = \"Routine work\"\n\n[[task]]\nid = \"A\"\ntitle = \"A\"\nrole = \"implementer\"\ngoal = \"Write done to out/a.txt\"\nfiles = [\"out/a.txt\"]\n[task.contract]\ncriteria = [\"out/a.txt holds the line done\"]\nchecks = [\"grep -qx done out/a.txt\"]\n\n[[task]]\nid = \"B\"\ntitle = \"B\"\nrole = \"implementer\"\ngoal = \"Write done to out/b.txt\"\nfiles = [\"out/b.txt\"]\n[task.contract]\ncriteria = [\"out/b.txt holds the line done\"]\nchecks = [\"grep -qx done out/b.txt\"]\n";
    let routine_path = base_dir.join("routine.toml");
    std::fs::write(&routine_path, routine)?;
    for _ in 0..crate::improve::tune::MIN_RUNS {
        crate::swarm::runtime::run(
            &ws,
            crate::swarm::runtime::RunOptions {
                plan_files: vec![(routine_path.display().to_string(), routine.to_string())],
                max_parallel: None,
                resume: None,
                goal: None,
            },
            &|| crate::clock::now().map(|(t, _)| t).unwrap_or(now),
        )?;
    }
    n.say(&format!(
        "the swarm ran {} five times with failure_budget = 1: task B failed every time at its only attempt (`atelier stats` shows the attempt-success curve)",
        routine_path.display()
    ))?;
    let (_, c) = super::cycle::run(
        &ws,
        &super::cycle::CycleArgs {
            from: "tune".into(),
            goal: None,
            family: None,
            metric: None,
            seeds: 3,
            mission: Some("flaky".into()),
            submit_anyway: false,
            json: true,
        },
    )?;
    let (Some(id), Some(e)) = (c.proposal.clone(), c.evidence.as_ref()) else {
        anyhow::bail!(
            "demo: the cycle proposed nothing: {}",
            c.stopped.unwrap_or_default()
        );
    };
    if !c.submitted {
        anyhow::bail!(
            "demo: the cycle did not submit proposal {id}: {}",
            c.stopped.unwrap_or_default()
        );
    }
    n.say(&format!(
        "`atelier cycle`: the tune proposer read the telemetry and opened proposal {id} ({}); the metric {} was registered in the ledger before the replay benchmark ran; {}\nthe review panel: {}; validators: {}; evidence committed in the record ({}/evidence.md)",
        ws.pull(&id)?.title,
        e.metric.as_deref().unwrap_or("(none)"),
        e.headline(),
        c.review.as_ref().map_or("-".to_string(), |r| r.verdict.as_str().to_string()),
        e.validators.iter().map(|v| v.line()).collect::<Vec<_>>().join(", "),
        workflow::cycle::record_of(&ws, &id)?,
    ))?;
    if !e.trade_offs().is_empty() {
        n.say(&format!(
            "trade-offs it shows: {} regressed",
            e.trade_offs().join(", ")
        ))?;
    }
    let later = super::now()?;
    for who in ["alice", "bob"] {
        workflow::approve(
            &ws,
            &Addr::Proposal(id.clone()),
            Sign::Key(workflow::read_signing_key(&keys.join(who))?),
            &week,
            true,
            later,
        )?;
    }
    match workflow::merge(&ws, &Addr::Proposal(id.clone()), later)? {
        MergeOutcome::Merged(m) => n.say(&format!(
            "awaiting approval: 0 of 2 — alice and bob signed (atelier.toml is constitutional); merged as {}",
            m.commit
        ))?,
        MergeOutcome::Refused(e) => {
            anyhow::bail!("demo: the cycle's proposal was refused:\n{}", render(&e.eval))
        }
    }
    let curve = workflow::cycle::improvements(&ws)?;
    n.say(&format!(
        "`atelier proposals --improvements`: {}",
        curve
            .iter()
            .map(|i| format!(
                "proposal {} {}: {}",
                i.proposal,
                i.metric.as_deref().unwrap_or("(none)"),
                i.outcome
            ))
            .collect::<Vec<_>>()
            .join("; ")
    ))?;
    let report =
        crate::audit::history::verify(&ws.repo, &ws.config.forge.repository, ws.branch(), 2)?;
    if !report.findings.is_empty() {
        anyhow::bail!("demo: audit verify found problems after the cycle's merge");
    }
    n.say(&format!(
        "audit verify: {} merges verified, no findings",
        report.merges_verified
    ))?;

    let exe = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "atelier".into());
    out(&format!(
        "\nDone. The demo repository is {root}\nLook around:\n  git -C {root} log --graph --oneline main\n  {exe} -C {root} proposals\n  {exe} -C {root} audit log\n  {exe} -C {root} audit show {fix}\n  {exe} -C {root} audit verify\n  {exe} -C {root} ui          # the dashboard, in a browser\n(keys are in {keys}; the bypassing clone is {clone})\n",
        root = root.display(),
        keys = keys.display(),
        clone = clone_dir.display()
    ))?;
    Ok(ExitCode::SUCCESS)
}
