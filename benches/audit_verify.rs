//! `audit verify` over a generated history of merged proposals: signatures verified per second
//! against a raw `verify_strict` loop in the same run, and peak memory as the history grows.
//! Method and figures: docs/performance.md.
//!
//! `CARGO_TARGET_DIR=/tmp/bench-target cargo bench --bench audit_verify`
//! Env: ATELIER_BENCH_PROPOSALS (default 10000), ATELIER_BENCH_REPEAT (default 3),
//! ATELIER_BENCH_APPEND_EVERY (proposals per ledger append, default 500),
//! ATELIER_BENCH_NO_GIT_CACHE=1 (turn libgit2's object cache off, to compare).
//! Generated repositories are cached under `<target>/release/atelier-bench/`.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use atelier::audit::history;
use atelier::audit::ledger::{self, Entry, Event, MergeRecord};
use atelier::audit::merkle::{self, RootBuilder};
use atelier::git;
use atelier::governance::policy::{self, DEFAULT_GOVERNANCE_TOML};
use atelier::governance::time::format_rfc3339;
use atelier::governance::token::{self, Payload, RawToken, SeenCheckpoint, Verdict};
use ed25519_dalek::{Signature, SigningKey, VerifyingKey};
use git2::Repository;
use ssh_key::public::{Ed25519PublicKey, KeyData};
use ssh_key::SshSig;

const REPOSITORY: &str = "local/bench";
const BRANCH: &str = "main";
/// The fixed clock: every ledger entry is recorded at this instant.
const NOW: i64 = 1_800_000_000;
const APPROVERS: [&str; 2] = ["alice@example.org", "bob@example.org"];
/// Bump when the generator changes, so cached repositories are not reused.
const GENERATOR: u32 = 3;

fn env_usize(name: &str, default: usize) -> usize {
    let value = std::env::var(name).ok().and_then(|v| v.parse().ok());
    value.unwrap_or(default)
}

/// Proposals per `ledger::append`, so per signed checkpoint. Each append re-reads the whole
/// ledger, so appending every event on its own (as `atelier` does) is quadratic here.
fn append_every() -> usize {
    env_usize("ATELIER_BENCH_APPEND_EVERY", 500).max(1)
}

fn openssh(key: &SigningKey) -> String {
    let data = KeyData::Ed25519(Ed25519PublicKey(key.verifying_key().to_bytes()));
    let public = ssh_key::PublicKey::new(data, "").to_openssh();
    public.expect("an ed25519 key encodes")
}

/// Events queued for the next append, and a mirror of the Merkle tree `append` will build so
/// tokens can name the checkpoint their approver saw (as `atelier approve` does).
#[derive(Default)]
struct Pending(Vec<Event>, RootBuilder);

impl Pending {
    fn push(&mut self, event: Event) {
        let (seq, at) = (self.1.size(), format_rfc3339(NOW));
        let entry = Entry { seq, at, event };
        let line = serde_json::to_string(&entry).expect("an entry serializes");
        self.1.push(merkle::leaf_hash(line.as_bytes()));
        self.0.push(entry.event);
    }
}

/// Writes a bare repository with an adoption commit and `n` gate merges, ledger included.
fn generate(dir: &Path, n: usize) -> Result<()> {
    let repo = Repository::init_bare(dir)?;
    let gate = SigningKey::from_bytes(&[1; 32]);
    let keys = [2, 3].map(|seed| SigningKey::from_bytes(&[seed; 32]));
    let signers = APPROVERS.iter().zip(&keys);
    let line = |(p, k): (&&str, _)| format!("{p} namespaces=\"atelier-approval\" {}\n", openssh(k));
    let (signers, gate_line) = (signers.map(line).collect(), format!("{}\n", openssh(&gate)));
    let governance = DEFAULT_GOVERNANCE_TOML.to_string();
    let mut files: Vec<(String, String)> = vec![
        (policy::GOVERNANCE_PATH.into(), governance),
        (policy::ALLOWED_SIGNERS_PATH.into(), signers),
        (policy::GATE_KEY_PATH.into(), gate_line),
        ("README.md".into(), "bench\n".into()),
    ];
    files.extend((0..100).map(|k| (format!("src/file_{k}.txt"), String::new())));
    let mut tree = repo.treebuilder(None)?.write()?;
    for (path, text) in &files {
        tree = git::tree_with_file(&repo, &repo.find_tree(tree)?, path, text.as_bytes())?;
    }
    let sig = git2::Signature::new("bench", "b@example.org", &git2::Time::new(NOW - 86_400, 0))?;
    let adoption = repo.commit(None, &sig, &sig, "Adopt\n", &repo.find_tree(tree)?, &[])?;
    let digest = policy::policy_digest(&git::digest_files(&repo, &repo.find_tree(tree)?)?);
    let mut pending = Pending::default();
    let (branch, commit) = (BRANCH.to_string(), adoption.to_string());
    pending.push(Event::Adopted { branch, commit });
    let mut base = adoption;
    for i in 1..=n {
        let (proposal, pull, title) = (i.to_string(), i as u64, format!("bench change {i}"));
        let base_commit = repo.find_commit(base)?;
        let path = format!("src/file_{}.txt", i % 100);
        let text = format!("proposal {i}\n");
        let head_tree = git::tree_with_file(&repo, &base_commit.tree()?, &path, text.as_bytes())?;
        let head_tree = repo.find_tree(head_tree)?;
        let head = repo.commit(None, &sig, &sig, &title, &head_tree, &[&base_commit])?;
        let tree = match git::merge_tree(&repo, base, head)? {
            Ok(t) => t,
            Err(conflict) => bail!("proposal {i}: {conflict}"),
        };
        let (b, h, t) = (base.to_string(), head.to_string(), tree.to_string());
        pending.push(Event::ProposalOpened {
            proposal: proposal.clone(),
            pull,
            title: title.clone(),
            branch: format!("atelier/proposals/{i}"),
            base: b.clone(),
            head: h.clone(),
            proposer: Some("carol@example.org".into()),
            origin: None,
            declared: None,
        });
        let (size, root) = (pending.1.size(), hex::encode(pending.1.root()));
        let seen = SeenCheckpoint { size, root };
        let mut message = format!(
            "Merge proposal {i}: {title}\n\nAtelier-Proposal: {i}\nAtelier-Pull: {i}\nAtelier-Base: {b}\nAtelier-Head: {h}\nAtelier-Approvers: {}\n",
            APPROVERS.join(", ")
        );
        for (k, key) in keys.iter().enumerate() {
            let payload = Payload {
                repository: REPOSITORY.into(),
                proposal: proposal.clone(),
                pull,
                base: b.clone(),
                head: h.clone(),
                merge_tree: t.clone(),
                policy: digest.clone(),
                decision: Verdict::Approve,
                issued: NOW - 3_600,
                expires: NOW + 7 * 86_400,
                nonce: format!("{:032x}", 2 * i + k),
                checkpoint: Some(seen.clone()),
            };
            let token = token::sign(&payload, key).to_text();
            message = format!("{message}\n{token}");
            let (proposal, comment) = (proposal.clone(), k as u64 + 1);
            pending.push(Event::TokenRecorded {
                proposal,
                pull,
                comment,
                token,
            });
        }
        let parents = [&base_commit, &repo.find_commit(head)?];
        let merge = repo.commit(None, &sig, &sig, &message, &repo.find_tree(tree)?, &parents)?;
        pending.push(Event::GateDecision {
            proposal: proposal.clone(),
            base: b.clone(),
            head: h.clone(),
            merge_tree: Some(t.clone()),
            allowed: true,
            unmet: Vec::new(),
            approvers: APPROVERS.map(String::from).to_vec(),
        });
        let commit = merge.to_string();
        let record = MergeRecord {
            proposal,
            pull,
            commit,
            base: b,
            head: h,
            tree: t,
        };
        pending.push(Event::MergeStarted(record.clone()));
        pending.push(Event::Merged(record));
        base = merge;
        if i % append_every() == 0 || i == n {
            let batch = std::mem::take(&mut pending.0);
            ledger::append(&repo, REPOSITORY, batch, NOW, &gate)?;
        }
    }
    repo.reference(&format!("refs/heads/{BRANCH}"), base, true, "bench")?;
    // A clone holds a pack, not loose objects: pack everything and drop the loose copies.
    let mut walk = repo.revwalk()?;
    walk.push_ref(&format!("refs/heads/{BRANCH}"))?;
    walk.push_ref(ledger::REF)?;
    let mut packer = repo.packbuilder()?;
    packer.insert_walk(&mut walk)?;
    packer.write(&repo.path().join("objects/pack"), 0)?;
    for entry in std::fs::read_dir(repo.path().join("objects"))? {
        let entry = entry?;
        if entry.file_name().len() == 2 {
            std::fs::remove_dir_all(entry.path())?;
        }
    }
    Ok(())
}

/// The cached repository of `n` proposals, generated (untimed) when missing.
fn repo_of(n: usize) -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let target = exe.parent().and_then(Path::parent);
    let cache = target.unwrap_or(Path::new("/tmp")).join("atelier-bench");
    let dir = cache.join(format!("g{GENERATOR}-{n}-{}", append_every()));
    if dir.join("HEAD").exists() {
        return Ok(dir);
    }
    std::fs::create_dir_all(&cache)?;
    let tmp = cache.join(format!("tmp-{n}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let start = Instant::now();
    generate(&tmp, n).with_context(|| format!("generating {n} proposals"))?;
    std::fs::rename(&tmp, &dir)?;
    let secs = start.elapsed().as_secs_f64();
    eprintln!("generated {n} proposals in {secs:.1}s (not measured)");
    Ok(dir)
}

/// One `audit verify` of a fresh repository handle: signatures verified and seconds. Fails
/// loudly unless the audit is clean and counted every merge, token and checkpoint.
fn verify_once(dir: &Path, n: usize, jobs: usize) -> Result<(usize, f64)> {
    let repo = Repository::open_bare(dir)?;
    let start = Instant::now();
    let r = history::verify(&repo, REPOSITORY, BRANCH, jobs, history::Memory::Record)?;
    let secs = start.elapsed().as_secs_f64();
    let (count, first) = (r.findings.len(), r.findings.first());
    ensure!(count == 0, "{count} finding(s), first: {first:#?}");
    let cps = n.div_ceil(append_every());
    let got = (r.commits_checked, r.merges_verified, r.signatures_verified);
    ensure!(got == (n, n, 2 * n + cps), "unexpected counts: {r:?}");
    let ledger = (r.ledger_entries, r.checkpoints_verified);
    let entries = 1 + 6 * n as u64;
    ensure!(ledger == (entries, cps), "unexpected counts: {r:?}");
    Ok((r.signatures_verified, secs))
}

/// One approval signature as `verify_strict` sees it: key, signature, SSHSIG signed-data blob.
type Sample = (VerifyingKey, Signature, Vec<u8>);

/// Every token on the branch, raw and as pre-decoded `verify_strict` inputs.
fn samples(dir: &Path) -> Result<(Vec<RawToken>, Vec<Sample>)> {
    let repo = Repository::open_bare(dir)?;
    let mut walk = repo.revwalk()?;
    walk.push_ref(&format!("refs/heads/{BRANCH}"))?;
    walk.simplify_first_parent()?;
    let (mut raws, mut out) = (Vec::new(), Vec::new());
    for oid in walk {
        for raw in RawToken::extract_all(repo.find_commit(oid?)?.message().unwrap_or("")) {
            let sshsig = SshSig::from_pem(raw.signature.as_bytes())?;
            let payload = raw.payload.as_bytes();
            let msg = SshSig::signed_data(token::NAMESPACE, sshsig.hash_alg(), payload)?;
            let ed = sshsig.public_key().ed25519().context("an ed25519 token")?;
            let key = VerifyingKey::from_bytes(&ed.0)?;
            let sig = Signature::from_slice(sshsig.signature_bytes())?;
            out.push((key, sig, msg));
            raws.push(raw);
        }
    }
    Ok((raws, out))
}

fn seconds(f: impl FnOnce()) -> f64 {
    let start = Instant::now();
    f();
    start.elapsed().as_secs_f64()
}

fn status_kb(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let line = status.lines().find(|l| l.starts_with(field)).unwrap_or("");
    let value = line.split_whitespace().nth(1).and_then(|v| v.parse().ok());
    value.unwrap_or(0)
}

/// Child mode: one verify; prints VmHWM before and after, the peak RssAnon sampled every 2 ms
/// during the verify (KiB), and the seconds it took.
fn child(dir: &str) -> Result<()> {
    // Each generated history is its own repository to the machine's ledger memory (they share
    // an adoption commit, so one memory would take the smaller ones for rewinds of the larger).
    std::env::set_var("XDG_STATE_HOME", format!("{dir}.state"));
    let n = env_usize("ATELIER_BENCH_N", 0);
    let jobs = env_usize("ATELIER_BENCH_JOBS", 1);
    let before = status_kb("VmHWM:");
    let done = AtomicBool::new(false);
    let (result, anon) = std::thread::scope(|s| {
        let sampler = s.spawn(|| {
            let mut peak = 0;
            while !done.load(Ordering::Relaxed) {
                peak = peak.max(status_kb("RssAnon:"));
                std::thread::sleep(Duration::from_millis(2));
            }
            peak.max(status_kb("RssAnon:"))
        });
        let result = verify_once(Path::new(dir), n, jobs);
        done.store(true, Ordering::Relaxed);
        (result, sampler.join().expect("the sampler does not panic"))
    });
    let secs = result?.1;
    println!("{before} {} {anon} {secs}", status_kb("VmHWM:"));
    Ok(())
}

/// Runs this bench again as a child process on `dir`; returns the child's four figures.
fn peak_memory(dir: &Path, n: usize, jobs: usize) -> Result<Vec<f64>> {
    let out = std::process::Command::new(std::env::current_exe()?)
        .env("ATELIER_BENCH_CHILD", dir)
        .env("ATELIER_BENCH_N", n.to_string())
        .env("ATELIER_BENCH_JOBS", jobs.to_string())
        .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure!(out.status.success(), "the child failed: {stderr}");
    let text = String::from_utf8_lossy(&out.stdout);
    let fields: Vec<f64> = text.split_whitespace().flat_map(str::parse).collect();
    ensure!(fields.len() == 4, "unexpected child output `{text}`");
    Ok(fields)
}

fn main() -> Result<()> {
    // As in the binary: libgit2's object cache limited for the walk, before any thread exists.
    // SAFETY: the first thing the bench does, on its only thread.
    unsafe { history::limit_object_cache() };
    // `audit verify` remembers the ledger it verified (the clone as a witness): keep that memory
    // beside the generated repositories, not in the user's state directory.
    if std::env::var_os("XDG_STATE_HOME").is_none() {
        let exe = std::env::current_exe()?;
        let target = exe
            .parent()
            .and_then(Path::parent)
            .unwrap_or(Path::new("/tmp"));
        std::env::set_var("XDG_STATE_HOME", target.join("atelier-bench").join("state"));
    }
    if std::env::var("ATELIER_BENCH_NO_GIT_CACHE").is_ok_and(|v| v == "1") {
        git2::opts::enable_caching(false);
    }
    if let Ok(dir) = std::env::var("ATELIER_BENCH_CHILD") {
        return child(&dir);
    }
    // `cargo bench` passes `--bench`; `cargo test --all-targets` does not: a smoke run then.
    let default = if std::env::args().any(|a| a == "--bench") {
        10_000
    } else {
        20
    };
    let n = env_usize("ATELIER_BENCH_PROPOSALS", default).max(10);
    let repeat = env_usize("ATELIER_BENCH_REPEAT", 3).max(1);
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    let dir = repo_of(n)?;
    let (raws, samples) = samples(&dir)?;
    let found = samples.len();
    ensure!(found == 2 * n, "{found} tokens on the branch");
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    // Interleaved repetitions; the best time of each measurement is kept.
    let (mut best, mut sigs) = ([f64::INFINITY; 4], 0);
    for _ in 0..repeat {
        best[0] = best[0].min(seconds(|| {
            for (key, sig, msg) in &samples {
                let ok = black_box(key).verify_strict(black_box(msg), black_box(sig));
                ok.expect("a generated signature verifies");
            }
        }));
        best[1] = best[1].min(seconds(|| {
            for r in &raws {
                token::verify(black_box(r)).expect("a generated token verifies");
            }
        }));
        for (slot, jobs) in [(2, 1), (3, cores)] {
            let (s, secs) = verify_once(&dir, n, jobs)?;
            (sigs, best[slot]) = (s, best[slot].min(secs));
        }
    }
    let every = append_every();
    println!("\n`audit verify` of {n} merged proposals: {sigs} signatures (2 per merge + 1 per ledger checkpoint, one every {every} proposals), best of {repeat}, {cores} core(s), loadavg before: {}", load.trim());
    println!("\n| measurement | seconds | signatures/s | × raw verify_strict |");
    println!("|---|---:|---:|---:|");
    let raw_rate = samples.len() as f64 / best[0];
    let row = |name: &str, count: usize, secs: f64| {
        let (rate, raw) = (count as f64 / secs, raw_rate);
        println!("| {name} | {secs:.3} | {rate:.0} | {:.2} |", rate / raw);
    };
    row("raw `verify_strict` loop, 1 thread", samples.len(), best[0]);
    row("`token::verify` loop, 1 thread", raws.len(), best[1]);
    row("`audit verify`, jobs=1", sigs, best[2]);
    row(&format!("`audit verify`, jobs={cores}"), sigs, best[3]);
    let sizes = [n / 10, n / 4, n / 2, n];
    let dirs = sizes.map(repo_of);
    println!("\nPeak memory of one `audit verify` in a fresh process (KiB)");
    println!("\n| proposals | jobs | VmHWM before | VmHWM peak | VmHWM growth | RssAnon peak | seconds |");
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    for (size, dir) in sizes.into_iter().zip(dirs) {
        let dir = dir?;
        for jobs in if cores > 1 { vec![1, cores] } else { vec![1] } {
            let m = peak_memory(&dir, size, jobs)?;
            let (before, peak, anon, secs) = (m[0], m[1], m[2], m[3]);
            let growth = peak - before;
            println!("| {size} | {jobs} | {before} | {peak} | {growth} | {anon} | {secs:.3} |");
        }
    }
    Ok(())
}
