//! `atelier demo`: the whole governed loop in a temporary repository, offline, narrated. Every
//! step is the real operation (the same domain calls the commands make); nothing is simulated.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;

use super::{gate::render, out};
use crate::audit::history::VerifyReport;
use crate::forge::Addr;
use crate::governance::token::{RawToken, Verdict};
use crate::governance::Code;
use crate::workflow::{
    self, ApproveOptions, MergeOutcome, Merged, ProposeOptions, Publish, Sign, Workspace,
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

/// [`propose_by`] with no agent.
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

/// A scene of the demo: its title, and what it does and says.
type Scene = (&'static str, fn(&mut Demo) -> Result<()>);

/// The demo's story, in order. Each scene builds on what the ones before it left in [`Demo`].
const SCENES: &[Scene] = &[
    ("A project under git", project),
    ("Adopt atelier: policy, gate key, two approvers", adopt),
    ("Propose a fix", propose_fix),
    ("The gate refuses: nobody has approved yet", gate_refuses),
    (
        "alice approves with her SSH key; the gate allows; merge",
        approve_fix,
    ),
    ("A constitution change needs two approvals", constitution),
    ("Tampered and replayed tokens are refused", tampered),
    (
        "The review panel blocks an agent's patch that weakens a test",
        panel_blocks,
    ),
    ("Audit: verify the history offline", audit),
    ("A commit that bypasses the gate is caught", bypass),
    ("A rewound ledger is caught", rewind),
    (
        "The swarm: a plan run by an agent becomes a proposal like any other",
        swarm,
    ),
    (
        "The self-improvement cycle: telemetry, a tuning proposal, its evidence, two approvers",
        cycle,
    ),
];

/// What the scenes share: where the demo lives, the workspace once adopted, and what a scene
/// leaves for a later one.
struct Demo {
    n: Narrator,
    now: i64,
    base_dir: PathBuf,
    root: PathBuf,
    keys: PathBuf,
    repo: Option<git2::Repository>,
    ws: Option<Workspace>,
    week: ApproveOptions,
    /// The first fix's proposal id, and alice's token for it.
    fix: String,
    token: String,
    /// Eve's clone, which bypasses the gate.
    clone_dir: PathBuf,
    clone: Option<git2::Repository>,
}

impl Demo {
    fn ws(&self) -> &Workspace {
        self.ws
            .as_ref()
            .expect("the adoption scene opens the workspace before any scene uses it")
    }

    fn clone(&self) -> &git2::Repository {
        self.clone
            .as_ref()
            .expect("the bypass scene makes the clone the rewind scene uses")
    }

    fn propose(&self, edits: &[(&str, &str)], title: &str, rationale: &str) -> Result<String> {
        propose(self.ws(), &self.base_dir, edits, title, rationale, self.now)
    }

    /// `who` (alice or bob) approves proposal `id` with their key, at `now`.
    fn approve(&self, who: &str, id: &str, now: i64) -> Result<()> {
        workflow::approve(
            self.ws(),
            &Addr::Proposal(id.to_string()),
            Sign::Key(workflow::read_signing_key(&self.keys.join(who))?),
            &self.week,
            true,
            now,
        )?;
        Ok(())
    }

    /// The gate's verdict on proposal `id`, as `atelier gate` prints it.
    fn gate(&self, id: &str) -> Result<workflow::Evaluation> {
        Ok(workflow::gate(
            self.ws(),
            &Addr::Proposal(id.to_string()),
            self.now,
            Publish::Verdict,
        )?
        .eval)
    }

    /// Merges proposal `id` at `now`; a refusal stops the demo, naming `what` was refused.
    fn merge(&self, id: &str, what: &str, now: i64) -> Result<Merged> {
        match workflow::merge(self.ws(), &Addr::Proposal(id.to_string()), now)? {
            MergeOutcome::Merged(m) => Ok(m),
            MergeOutcome::Refused(e) => {
                anyhow::bail!("demo: {what} was refused:\n{}", render(&e.eval))
            }
        }
    }

    /// `audit verify` of `repo`'s protected branch.
    fn verify(&self, repo: &git2::Repository) -> Result<VerifyReport> {
        let ws = self.ws();
        Ok(crate::audit::history::verify(
            repo,
            &ws.config.forge.repository,
            ws.branch(),
            2,
            crate::audit::history::Memory::Record,
        )?)
    }
}

/// A report's finding codes, or "none".
fn codes(report: &VerifyReport) -> String {
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
}

pub fn demo(args: DemoArgs) -> Result<ExitCode> {
    let now = super::now()?;
    let base_dir = demo_dir(args.dir)?;
    // The demo's gate keys and audit memory stay in its directory: deleting it leaves nothing
    // of the demo on this machine.
    crate::fsutil::keep_machine_state_in(base_dir.join("machine"));
    let root = base_dir.join("repo");
    let keys = base_dir.join("keys");
    std::fs::create_dir_all(&root)?;
    // A new repository here: whatever this machine remembers of one that was here before (a
    // demo run in the same directory, since deleted) is not this one's.
    crate::audit::witness::forget_identity(&root)?;
    let mut d = Demo {
        n: Narrator { step: 0 },
        now,
        clone_dir: base_dir.join("bypass-clone"),
        base_dir,
        root,
        keys,
        repo: None,
        ws: None,
        week: ApproveOptions {
            expires_in: 7 * 86_400,
            decision: Verdict::Approve,
        },
        fix: String::new(),
        token: String::new(),
        clone: None,
    };
    out("Atelier demo: the governed change loop, offline, on the local forge.\n")?;
    for (title, scene) in SCENES {
        d.n.step(title)?;
        scene(&mut d)?;
    }
    let exe = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "atelier".into());
    out(&format!(
        "\nDone. The demo repository is {root}\nLook around:\n  git -C {root} log --graph --oneline main\n  {exe} -C {root} proposals\n  {exe} -C {root} audit log\n  {exe} -C {root} audit show {fix}\n  {exe} -C {root} audit verify\n  {exe} -C {root} ui          # the dashboard, in a browser\n(keys are in {keys}; the bypassing clone is {clone}; the demo's gate keys and audit memory are in {machine}, not in your home directory)\n",
        root = d.root.display(),
        keys = d.keys.display(),
        machine = d.base_dir.join("machine").display(),
        fix = d.fix,
        clone = d.clone_dir.display()
    ))?;
    Ok(ExitCode::SUCCESS)
}

/// The directory the demo builds in: `--dir` if new or empty, else a new temporary one (kept).
fn demo_dir(dir: Option<PathBuf>) -> Result<PathBuf> {
    Ok(match dir {
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
    })
}

fn project(d: &mut Demo) -> Result<()> {
    let root = &d.root;
    let repo = git2::Repository::init_opts(
        root,
        git2::RepositoryInitOptions::new().initial_head("main"),
    )?;
    let mut cfg = repo.config()?;
    cfg.set_str("user.name", "Maintainer")?;
    cfg.set_str("user.email", "maintainer@demo.invalid")?;
    write(root, "README.md", "# calc\n\nA tiny library.\n")?;
    write(
        root,
        "src/lib.rs",
        "pub fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n",
    )?;
    write(
        root,
        "tests/add.rs",
        "#[test]\nfn adds() {\n    assert_eq!(calc::add(2, 3), 5);\n}\n",
    )?;
    commit_all(&repo, "calc: first version")?;
    d.n.say(&format!(
        "{} with one commit on main (src/lib.rs has a bug: add subtracts, and tests/add.rs says so)",
        root.display()
    ))?;
    d.repo = Some(repo);
    Ok(())
}

fn adopt(d: &mut Demo) -> Result<()> {
    let (root, keys) = (&d.root, &d.keys);
    let init = workflow::init(root, Some("demo/calc".into()), None, &[])?;
    d.n.say(&format!("atelier init wrote {}", init.created.join(", ")))?;
    let alice = workflow::keygen(&keys.join("alice"), Some("alice@demo.invalid".into()))?;
    let bob = workflow::keygen(&keys.join("bob"), Some("bob@demo.invalid".into()))?;
    let mut signers = std::fs::read_to_string(root.join("policies/allowed_signers"))?;
    signers.push_str(&format!(
        "{}\n{}\n",
        alice.allowed_signers_line, bob.allowed_signers_line
    ));
    std::fs::write(root.join("policies/allowed_signers"), signers)?;
    let repo = d
        .repo
        .as_ref()
        .expect("the first scene made the repository");
    let adoption = commit_all(repo, "Adopt atelier")?;
    // What init wrote, as the gate reads it.
    let read = |rel: &str| std::fs::read(root.join(rel)).map(Some);
    let policy =
        crate::governance::policy::Policy::load(&crate::governance::policy::PolicyFiles {
            governance: read(crate::governance::policy::GOVERNANCE_PATH)?,
            allowed_signers: read("policies/allowed_signers")?,
            gate_key: None,
        })?;
    let c = &policy.constitution;
    d.n.say(&format!(
        "approver keys: {} ({}), {} ({})\ncommitted the policy as {adoption}: from here on, every change to main goes through the gate\n(default policy: 1 approval for any change, {} for the constitution: {})",
        "alice@demo.invalid", alice.fingerprint, "bob@demo.invalid", bob.fingerprint, c.quorum, c.paths.join(", ")
    ))?;
    d.ws = Some(Workspace::open(root)?);
    Ok(())
}

fn propose_fix(d: &mut Demo) -> Result<()> {
    d.fix = d.propose(
        &[(
            "src/lib.rs",
            "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n",
        )],
        "Make add add",
        "add() subtracted its arguments.",
    )?;
    let fix = &d.fix;
    d.n.say(&format!(
        "atelier propose → proposal {fix} on branch atelier/proposals/{fix}"
    ))
}

fn gate_refuses(d: &mut Demo) -> Result<()> {
    d.n.say(&render(&d.gate(&d.fix)?))
}

fn approve_fix(d: &mut Demo) -> Result<()> {
    let token = workflow::approve(
        d.ws(),
        &Addr::Proposal(d.fix.clone()),
        Sign::Key(workflow::read_signing_key(&d.keys.join("alice"))?),
        &d.week,
        true,
        d.now,
    )?;
    d.token = token.tokens;
    d.n.say(&format!(
        "alice's token (verifiable with `ssh-keygen -Y verify`):\n{}",
        d.token
    ))?;
    d.n.say(&render(&d.gate(&d.fix)?))?;
    let m = d.merge(&d.fix, "the approved fix", d.now)?;
    d.n.say(&format!(
        "merged as {} (tree {} re-checked after landing)",
        m.commit, m.tree
    ))
}

fn constitution(d: &mut Demo) -> Result<()> {
    let gov = std::fs::read_to_string(d.root.join("policies/governance.toml"))?
        .replace("max_lifetime = \"30d\"", "max_lifetime = \"14d\"");
    let constitutional = d.propose(
        &[("policies/governance.toml", &gov)],
        "Shorter token lifetime",
        "Approvals should not linger.",
    )?;
    d.approve("alice", &constitutional, d.now)?;
    let eval = d.gate(&constitutional)?;
    d.n.say(&format!(
        "proposal {constitutional} changes policies/governance.toml; alice approved:\n\n{}",
        render(&eval)
    ))?;
    d.approve("bob", &constitutional, d.now)?;
    let m = d.merge(&constitutional, "the constitution change", d.now)?;
    d.n.say(&format!("bob approved too: merged as {}", m.commit))
}

fn tampered(d: &mut Demo) -> Result<()> {
    let (fix, now) = (&d.fix, d.now);
    let docs = d.propose(
        &[("README.md", "# calc\n\nA tiny library that adds.\n")],
        "Describe calc",
        "Say what it does.",
    )?;
    let replayed = d.token.clone();
    let mut tampered = RawToken::extract_all(&d.token).remove(0);
    tampered.payload = tampered.payload.replace(
        &format!("proposal {fix}\npull {fix}\n"),
        &format!("proposal {docs}\npull {docs}\n"),
    );
    for (name, text) in [("replayed", replayed), ("tampered", tampered.to_text())] {
        let path = d.base_dir.join(format!("{name}-token.txt"));
        std::fs::write(&path, text)?;
        workflow::approve(
            d.ws(),
            &Addr::Proposal(docs.clone()),
            Sign::Text(std::fs::read_to_string(&path)?),
            &d.week,
            true,
            now,
        )?;
    }
    let eval = d.gate(&docs)?;
    d.n.say(&format!(
        "alice's token for proposal {fix} was posted on proposal {docs} as is (replayed) and with its proposal number edited (tampered):\n\n{}",
        render(&eval)
    ))?;
    workflow::close(d.ws(), &docs, Some("demo: left unapproved".into()), now)?;
    Ok(())
}

fn panel_blocks(d: &mut Demo) -> Result<()> {
    let (ws, now) = (d.ws(), d.now);
    let gaming = propose_by(
        ws,
        &d.base_dir,
        &[(
            "tests/add.rs",
            "#[test]\nfn adds() {\n    // assert_eq!(calc::add(2, 3), 5);\n}\n",
        )],
        "Make the tests pass",
        "The add test was failing.",
        Some("demo-agent"),
        now,
    )?;
    let review = workflow::review::review(ws, &Addr::Proposal(gaming.clone()), now)?;
    d.n.say(&format!(
        "demo-agent proposed {gaming}; `atelier review {gaming}` ran the panel from reviewers/ at base and recorded its verdict: {}",
        review.verdict.as_str()
    ))?;
    for f in &review.findings {
        d.n.say(&format!("  {}", workflow::review::finding_line(f)))?;
    }
    d.approve("alice", &gaming, now)?;
    let eval = d.gate(&gaming)?;
    if eval.decision.allowed {
        anyhow::bail!(
            "demo: the panel did not block a weakened test:\n{}",
            render(&eval)
        );
    }
    d.n.say(&format!(
        "alice approved it, which meets the path's quorum, but the gate refuses what the panel blocks (only the constitution quorum could overrule it):\n\n{}",
        render(&eval)
    ))?;
    workflow::close(ws, &gaming, Some("demo: the panel blocked it".into()), now)?;
    Ok(())
}

fn audit(d: &mut Demo) -> Result<()> {
    let report = d.verify(&d.ws().repo)?;
    d.n.say(&format!(
        "{} commits since adoption, {} merges verified, {} signatures verified, {} ledger entries, {} checkpoints; findings: {}",
        report.commits_checked,
        report.merges_verified,
        report.signatures_verified,
        report.ledger_entries,
        report.checkpoints_verified,
        codes(&report)
    ))?;
    if !report.findings.is_empty() {
        anyhow::bail!("demo: audit verify found problems in a history it just made");
    }
    Ok(())
}

fn bypass(d: &mut Demo) -> Result<()> {
    let clone_dir = &d.clone_dir;
    let clone = git2::Repository::clone(
        d.root.to_str().context("the demo path is UTF-8")?,
        clone_dir,
    )?;
    clone
        .find_remote("origin")?
        .fetch(&["refs/atelier/ledger:refs/atelier/ledger"], None, None)?;
    let mut cfg = clone.config()?;
    cfg.set_str("user.name", "Eve")?;
    cfg.set_str("user.email", "eve@demo.invalid")?;
    write(
        clone_dir,
        "src/lib.rs",
        "pub fn add(a: i32, b: i32) -> i32 {\n    a * b\n}\n",
    )?;
    let bypass = commit_all(&clone, "quick fix")?;
    let report = d.verify(&clone)?;
    let shown: Vec<String> = report
        .findings
        .iter()
        .map(|f| format!("{}: {}", f.code, f.detail))
        .collect();
    d.n.say(&format!(
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
    d.clone = Some(clone);
    Ok(())
}

fn rewind(d: &mut Demo) -> Result<()> {
    // Eve resets her clone's ledger to its first signed commit, as if the rejections and merges
    // recorded since had never happened: every signature still verifies, but the merge commits
    // on main carry the gate-signed checkpoints of the longer ledger.
    let clone = d.clone();
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
    let report = d.verify(clone)?;
    let rollback: Vec<String> = report
        .findings
        .iter()
        .filter(|f| f.code == Code::LedgerRollback)
        .map(|f| format!("{}: {}", f.code, f.detail))
        .collect();
    if rollback.is_empty() {
        anyhow::bail!("demo: the rewound ledger was not flagged");
    }
    d.n.say(&format!(
        "Eve resets refs/atelier/ledger in her clone to its first commit ({}); audit verify there reports:\n{}",
        first.id(),
        rollback.join("\n")
    ))
}

/// The stand-in agent the swarm scenes run (a shell script, so the demo runs offline; it is a
/// real program run the way any agent is).
const AGENT: &str = "#!/bin/sh\n# A stand-in agent: reads its prompt, then does the task.\ncat > /dev/null\ncase \"$ATELIER_TASK_ID\" in\n  calc-1:*) printf 'pub fn add(a: i32, b: i32) -> i32 {\\n    a + b\\n}\\n\\npub fn sub(a: i32, b: i32) -> i32 {\\n    a - b\\n}\\n' > src/lib.rs ;;\n  # The routine work of step 13: B gets it wrong at its first attempt, right at its second.\n  routine:A) mkdir -p out; echo done > out/a.txt ;;\n  routine:B) mkdir -p out; if [ \"$ATELIER_ATTEMPT\" = 1 ]; then echo wrong > out/b.txt; else echo done > out/b.txt; fi ;;\nesac\n";

/// The plan the swarm scene runs.
const PLAN: &str = "[plan]\nid = \"calc-1\"\ntitle = \"Add sub\"\n\n[[task]]\nid = \"T1\"\ntitle = \"Add a sub function\"\nrole = \"implementer\"\ngoal = \"Add pub fn sub(a, b) returning a - b to src/lib.rs.\"\nfiles = [\"src/lib.rs\"]\n[task.contract]\ncriteria = [\"src/lib.rs defines pub fn sub returning a - b\"]\nchecks = [\"grep -q 'pub fn sub' src/lib.rs\"]\n";

/// The routine work the cycle scene's telemetry comes from: task B needs a second attempt the
/// configuration never gives it.
const ROUTINE: &str = "[plan]\nid = \"routine\"\ntitle = \"Routine work\"\n\n[[task]]\nid = \"A\"\ntitle = \"A\"\nrole = \"implementer\"\ngoal = \"Write done to out/a.txt\"\nfiles = [\"out/a.txt\"]\n[task.contract]\ncriteria = [\"out/a.txt holds the line done\"]\nchecks = [\"grep -qx done out/a.txt\"]\n\n[[task]]\nid = \"B\"\ntitle = \"B\"\nrole = \"implementer\"\ngoal = \"Write done to out/b.txt\"\nfiles = [\"out/b.txt\"]\n[task.contract]\ncriteria = [\"out/b.txt holds the line done\"]\nchecks = [\"grep -qx done out/b.txt\"]\n";

fn swarm(d: &mut Demo) -> Result<()> {
    configure_agent(d)?;
    let plan_path = d.base_dir.join("plan.toml");
    std::fs::write(&plan_path, PLAN)?;
    let now = d.now;
    let clock = || now;
    let ws = d.ws();
    let summary = crate::swarm::runtime::run(
        ws,
        crate::swarm::runtime::RunOptions {
            plan_files: vec![(plan_path.display().to_string(), PLAN.to_string())],
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
    let proposed = crate::swarm::runtime::propose_run(ws, &summary, now)?;
    d.n.say(&format!(
        "plan {} ran in a worktree, contained ({}: the agent could write its worktree, not the repository, the gate key or your home); events: {}; the task passed its check, was integrated into {} and became proposal {}",
        plan_path.display(),
        summary.containment,
        summary.events,
        summary.branch,
        proposed.id
    ))?;
    let eval = d.gate(&proposed.id)?;
    d.n.say(&format!(
        "the gate treats it like any other change:\n\n{}",
        render(&eval)
    ))?;
    d.approve("alice", &proposed.id, now)?;
    let m = d.merge(&proposed.id, "the swarm's proposal", now)?;
    d.n.say(&format!("alice approved; merged as {}", m.commit))?;
    let report = d.verify(&ws.repo)?;
    d.n.say(&format!(
        "audit verify: {} merges verified, findings: {}",
        report.merges_verified,
        codes(&report)
    ))?;
    if !report.findings.is_empty() {
        anyhow::bail!("demo: audit verify found problems after the swarm's merge");
    }
    Ok(())
}

/// Writes the stand-in agent and, through the gate, the role that runs it; then reopens the
/// workspace on the new configuration.
fn configure_agent(d: &mut Demo) -> Result<()> {
    let agent = d.base_dir.join("agent.sh");
    std::fs::write(&agent, AGENT)?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755))?;
    }
    let config = format!(
        "{}\n[roles.implementer]\nbackend = \"command\"\ncommand = [{}]\n\n[conductor]\n# One attempt per task (step 13 measures whether that is enough).\nfailure_budget = 1\n",
        std::fs::read_to_string(d.root.join("atelier.toml"))?,
        toml::Value::String(agent.display().to_string())
    );
    let role = d.propose(
        &[("atelier.toml", &config)],
        "Add an implementer role",
        "Let the swarm work on calc.",
    )?;
    for who in ["alice", "bob"] {
        d.approve(who, &role, d.now)?;
    }
    let m = d.merge(&role, "the role change", d.now)?;
    d.n.say(&format!(
        "atelier.toml is constitutional, so configuring the agent took alice and bob: proposal {role} merged as {}",
        m.commit
    ))?;
    d.ws = Some(Workspace::open(&d.root)?);
    Ok(())
}

fn cycle(d: &mut Demo) -> Result<()> {
    let routine_path = d.base_dir.join("routine.toml");
    std::fs::write(&routine_path, ROUTINE)?;
    let now = d.now;
    for _ in 0..crate::improve::tune::MIN_RUNS {
        crate::swarm::runtime::run(
            d.ws(),
            crate::swarm::runtime::RunOptions {
                plan_files: vec![(routine_path.display().to_string(), ROUTINE.to_string())],
                max_parallel: None,
                resume: None,
                goal: None,
            },
            &|| crate::clock::now().map(|(t, _)| t).unwrap_or(now),
        )?;
    }
    d.n.say(&format!(
        "the swarm ran {} five times with failure_budget = 1: task B failed every time at its only attempt (`atelier stats` shows the attempt-success curve)",
        routine_path.display()
    ))?;
    let id = improvement(d)?;
    let later = super::now()?;
    for who in ["alice", "bob"] {
        d.approve(who, &id, later)?;
    }
    let m = d.merge(&id, "the cycle's proposal", later)?;
    d.n.say(&format!(
        "awaiting approval: 0 of 2 — alice and bob signed (atelier.toml is constitutional); merged as {}",
        m.commit
    ))?;
    let ws = d.ws();
    let curve = workflow::cycle::improvements(ws)?;
    d.n.say(&format!(
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
    let report = d.verify(&ws.repo)?;
    if !report.findings.is_empty() {
        anyhow::bail!("demo: audit verify found problems after the cycle's merge");
    }
    d.n.say(&format!(
        "audit verify: {} merges verified, no findings",
        report.merges_verified
    ))
}

/// `atelier cycle --from tune` on the telemetry the routine runs left: the proposal it
/// submitted, with its evidence told.
fn improvement(d: &mut Demo) -> Result<String> {
    let ws = d.ws();
    let (_, c) = super::cycle::run(
        ws,
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
    d.n.say(&format!(
        "`atelier cycle`: the tune proposer read the telemetry and opened proposal {id} ({}); the metric {} was registered in the ledger before the replay benchmark ran; {}\nthe review panel: {}; validators: {}; evidence committed in the record ({}/evidence.md)",
        ws.pull(&id)?.title,
        e.metric.as_deref().unwrap_or("(none)"),
        e.headline(),
        c.review.as_ref().map_or("-".to_string(), |r| r.verdict.as_str().to_string()),
        e.validators.iter().map(|v| v.line()).collect::<Vec<_>>().join(", "),
        workflow::cycle::record_of(ws, &id)?,
    ))?;
    if !e.trade_offs().is_empty() {
        d.n.say(&format!(
            "trade-offs it shows: {} regressed",
            e.trade_offs().join(", ")
        ))?;
    }
    Ok(id)
}
