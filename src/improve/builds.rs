//! Two builds of Atelier, side by side: what `bench replay --baseline REV` and the cycle measure
//! when a change is to Atelier's own code rather than to its configuration.
//!
//! Trust decides how each is built. A revision the operator names, or the protected branch's
//! base, is **trusted**: built uncontained (`cargo build --release --locked`) in a worktree, into a
//! target directory only trusted builds write, shared between them, and kept as
//! `trusted/<commit>/atelier` for reuse — all in the operator's cache directory, outside the
//! clone ([`trusted_home`]), since whoever writes the clone's files must not choose what runs
//! uncontained. A proposal's head is
//! **untrusted** (a proposer or an agent wrote it, and building runs its build scripts): it is
//! built like a gauntlet step — contained, with the gauntlet's grants, in a discarded worktree,
//! into `[swarm] shared_target_dir` (which contained workers write already) or else a fresh
//! directory — and the binary is then run contained as well ([`super::bench::Side::Binary`]).

use std::path::PathBuf;
use std::time::Duration;

use crate::agent::contain::Sandbox;
use crate::agent::process;
use crate::workflow::error::{Context, Result};
use crate::workflow::{Error, Workspace};

/// The paths of Atelier's repository a build of the `atelier` binary reads: its code and
/// manifests, and the files the code embeds (`include_str!`; a unit test holds this list to
/// the code). A change to anything else (atelier.toml, docs, tests, proposals) leaves the
/// binary as it was.
pub fn build_input(path: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "src/",
        "missions/",
        "reviewers/",
        ".cargo/",
        "prompts/",
        "rust-toolchain",
    ];
    // How git checks files out (line endings, `ident`) changes what the code embeds.
    if path == ".gitattributes" || path.ends_with("/.gitattributes") {
        return true;
    }
    const FILES: &[&str] = &[
        "Cargo.toml",
        "Cargo.lock",
        "build.rs",
        "GOVERNANCE.md",
        "proposals/README.md",
    ];
    (PREFIXES.iter().any(|p| path.starts_with(p)) && path != "prompts/lessons.md")
        || FILES.contains(&path)
}

/// Whether `tree`'s Cargo.toml is the `atelier` package.
pub fn is_atelier(repo: &git2::Repository, tree: &git2::Tree<'_>) -> Result<bool> {
    let manifest = crate::git::read_file(repo, tree, "Cargo.toml")?
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    Ok(manifest
        .parse::<toml::Table>()
        .ok()
        .and_then(|t| {
            t.get("package")?
                .get("name")?
                .as_str()
                .map(|n| n == "atelier")
        })
        .unwrap_or(false))
}

/// The build inputs the change `base..head` modifies, when this is Atelier's repository (the
/// base is the `atelier` package; a change that renames the package is still a code change,
/// and its build then fails with that reason); empty otherwise.
pub fn code_changed(ws: &Workspace, base: git2::Oid, head: git2::Oid) -> Result<Vec<String>> {
    let repo = &ws.repo;
    let (b, h) = (
        repo.find_commit(base)?.tree()?,
        repo.find_commit(head)?.tree()?,
    );
    if !is_atelier(repo, &b)? {
        return Ok(Vec::new());
    }
    Ok(crate::git::changed_paths(repo, &b, &h)?
        .into_iter()
        .filter(|p| build_input(p))
        .collect())
}

/// The cargo to build with: `$CARGO` (set when atelier itself runs under cargo), else `cargo`.
fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())
}

const BUILD: [&str; 6] = ["build", "--release", "--locked", "--bin", "atelier", "-q"];

/// A trusted revision `rev` (named by the operator, or the protected branch's base), built once,
/// uncontained, and kept: the binary and its label (`REV (sha)`).
/// `what` names it in errors (`--baseline`, `the base`).
/// `say` reports progress (the command prints it on stderr).
pub fn trusted(
    ws: &Workspace,
    what: &str,
    rev: &str,
    say: &dyn Fn(&str),
) -> Result<(PathBuf, String)> {
    let repo = &ws.repo;
    let commit = repo
        .revparse_single(rev)
        .and_then(|o| o.peel_to_commit())
        .map_err(|e| Error::Input(format!("{what} {rev}: not a commit here ({})", e.message())))?;
    let sha = commit.id().to_string();
    let label = format!("{rev} ({})", &sha[..12]);
    if !is_atelier(repo, &commit.tree()?)? {
        return Err(Error::Input(format!(
            "{what} {rev}: its Cargo.toml is not atelier's package; another build of atelier is built from atelier's own repository (compare configurations with --baseline-config)"
        )));
    }
    let bench_dir = trusted_home(&ws.root)?;
    let binary = bench_dir.join("trusted").join(&sha).join("atelier");
    if binary.is_file() {
        say(&format!(
            "bench: reusing the build of {label} at {}",
            binary.display()
        ));
        return Ok((binary, label));
    }
    // Only trusted builds write here: never `[swarm] shared_target_dir`, which workers write.
    let target = bench_dir.join("target");
    // One worktree per build, named by the process: one a killed build left behind never
    // blocks the next.
    let name = format!("bench-{}-{}", &sha[..12], std::process::id());
    let tree = bench_dir.join(&name);
    let branch = format!("atelier/bench/{name}");
    crate::git::add_worktree(repo, &name, &tree, &branch, commit.id())?;
    let cargo = cargo();
    say(&format!(
        "bench: building {label} with `{cargo} build --release --locked` (target {})",
        target.display()
    ));
    // Its output is progress, never this command's: stdout may be --json.
    let built = process::operator_command(
        std::ffi::OsStr::new(&cargo),
        &BUILD.map(std::ffi::OsString::from),
        &tree,
        &[(
            "CARGO_TARGET_DIR".to_string(),
            target.clone().into_os_string(),
        )],
        false,
    )
    .map(|o| o.status);
    let result = (|| -> Result<()> {
        let status =
            built.map_err(|e| Error::Input(format!("{what} {rev}: running `{cargo}`: {e}")))?;
        if !status.success() {
            return Err(Error::Input(format!(
                "{what} {rev}: `{cargo} build --release --locked` failed ({status}); its output is above"
            )));
        }
        let out = target.join("release").join("atelier");
        std::fs::create_dir_all(binary.parent().expect("a parent"))?;
        let tmp = binary.with_extension("tmp");
        std::fs::copy(&out, &tmp)
            .map_err(|e| Error::Input(format!("{what} {rev}: {}: {e}", out.display())))?;
        std::fs::rename(&tmp, &binary)?;
        Ok(())
    })();
    let _ = crate::git::remove_worktree(repo, &name, &tree);
    if let Ok(mut b) = repo.find_branch(&branch, git2::BranchType::Local) {
        let _ = b.delete();
    }
    result?;
    Ok((binary, label))
}

/// Where the trusted builds of the clone at `root` are made and kept:
/// `$XDG_CACHE_HOME/atelier/bench/<clone>/` (default `~/.cache/atelier/bench/<clone>/`, `<clone>`
/// named as the gate key's directory is), created 0700. Never under the clone: whoever can
/// write its files (`.atelier/` included) could otherwise plant the binary atelier runs
/// uncontained, or edit the worktree or the target directory a trusted build reads.
fn trusted_home(root: &std::path::Path) -> Result<PathBuf> {
    let cache = crate::fsutil::machine_dir("XDG_CACHE_HOME", ".cache")
        .ok_or_else(|| {
            Error::input(
                "neither XDG_CACHE_HOME nor HOME is set, so trusted builds have nowhere outside the repository to go: set HOME",
            )
        })?;
    let gate = crate::workflow::gatekey::directory_in(&cache, root);
    let dir = cache
        .join("atelier")
        .join("bench")
        .join(gate.file_name().expect("a clone's directory has a name"));
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)?;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
    Ok(dir)
}

/// Copies `from`, which an untrusted build wrote, to a new executable file `to`: only a
/// regular file, opened without following a link and without blocking on a FIFO.
fn copy_regular(from: &std::path::Path, to: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let mut src = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(from)?;
    if !src.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let mut dst = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o755)
        .open(to)?;
    std::io::copy(&mut src, &mut dst)?;
    dst.sync_all()?;
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o755))
}

/// An untrusted build: the binary (in a temporary directory outside the repository, removed
/// with this value) and the sandbox it must run in (`None`: the repository runs uncontained).
pub struct Untrusted {
    pub path: PathBuf,
    pub label: String,
    pub sandbox: Option<Sandbox>,
    _dir: tempfile::TempDir,
}

/// Builds commit `head` (a proposal's change) contained, like a gauntlet step: the binary and
/// the sandbox to run it in.
pub fn untrusted(
    ws: &Workspace,
    head: git2::Oid,
    clock_now: i64,
    say: &dyn Fn(&str),
) -> Result<Untrusted> {
    let sha = head.to_string();
    let label = format!("the change ({})", &sha[..12]);
    let config = super::lint::branch_config(ws)?;
    let keep = tempfile::Builder::new()
        .prefix("atelier-candidate-")
        .tempdir()
        .context("creating a directory for the change's build")?;
    let fresh_target;
    let target = match crate::swarm::runtime::sandbox::shared_target(&config, &ws.root) {
        Some(t) => t,
        None => {
            fresh_target = keep.path().join("target");
            fresh_target.clone()
        }
    };
    std::fs::create_dir_all(&target).with_context(|| format!("creating {}", target.display()))?;
    let cargo = cargo();
    let binary = keep.path().join("atelier");
    let sandbox = super::lint::in_worktree(ws, "build", head, clock_now, |dir, rt, stop, sb| {
        let common = ws.repo.commondir().to_path_buf();
        let gauntlet = sb.map(|s| s.gauntlet);
        let sandbox = gauntlet
            .clone()
            .map(|g| g.write(dir).read(&common).write(&target));
        say(&format!(
            "bench: building {label} with `{cargo} build --release --locked`, {} (target {})",
            if sandbox.is_some() {
                "contained like a gauntlet step"
            } else {
                "UNCONTAINED ([swarm] containment = \"none\")"
            },
            target.display()
        ));
        let spawn = process::Spawn {
            lines: None,
            program: cargo.clone(),
            args: BUILD.iter().map(|s| s.to_string()).collect(),
            cwd: dir.to_path_buf(),
            env: process::scrubbed_env(
                &[],
                &[("CARGO_TARGET_DIR".into(), target.display().to_string())],
            ),
            stdin: Vec::new(),
            timeout: Duration::from_secs(60 * 60),
            silence: None,
            max_output: config.swarm.max_output,
            sandbox: sandbox.clone(),
        };
        let o = rt
            .block_on(process::run_or_interrupted(&spawn, stop))
            .with_context(|| format!("starting `{cargo}`"))?
            .ok_or_else(|| {
                Error::Input(
                    "interrupted while building the change: every program it started was stopped"
                        .into(),
                )
            })?;
        if !o.success() {
            return Err(Error::Input(format!(
                "building {label}: `{cargo} build --release --locked` {}. Its last output:\n{}",
                if o.timed_out {
                    "ran past an hour".to_string()
                } else {
                    format!(
                        "exited with {}",
                        o.code.map_or("a signal".into(), |c| c.to_string())
                    )
                },
                super::lint::tail(&o.output)
            )));
        }
        let out = target.join("release").join("atelier");
        // Copied, not linked: the build (or a later one) can rewrite the target directory.
        copy_regular(&out, &binary).map_err(|e| {
            Error::Input(format!(
                "building {label}: {} is not a binary the build produced: {e}",
                out.display()
            ))
        })?;
        // The binary runs with the gauntlet's grants too (no worktree: `bench sample` works
        // in its own temporary directory).
        Ok(gauntlet)
    })?;
    Ok(Untrusted {
        path: binary,
        label: format!(
            "the change ({}, {})",
            &sha[..12],
            if sandbox.is_some() {
                "built and run contained"
            } else {
                "UNCONTAINED"
            }
        ),
        sandbox,
        _dir: keep,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// Every file the code embeds is a build input (a change to it is measured with two
    /// builds), and nothing the binary does not read is.
    #[test]
    fn every_embedded_file_is_a_build_input() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut found = 0;
        let mut stack = vec![root.join("src")];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).expect("read src") {
                let p = e.expect("entry").path();
                if p.is_dir() {
                    stack.push(p);
                    continue;
                }
                let text = std::fs::read_to_string(&p).unwrap_or_default();
                for piece in text.split("include_str!(\"").skip(1) {
                    let rel = piece.split('"').next().expect("a path");
                    let file = p.parent().expect("a parent").join(rel);
                    let file = file.canonicalize().expect("the embedded file exists");
                    let inside = file
                        .strip_prefix(root.canonicalize().expect("root"))
                        .expect("inside the repository")
                        .to_string_lossy()
                        .into_owned();
                    assert!(
                        build_input(&inside),
                        "{} embeds {inside}, which build_input does not count",
                        p.display()
                    );
                    found += 1;
                }
            }
        }
        assert!(found > 10, "the scan found the embedded files ({found})");
        for other in [
            "atelier.toml",
            "README.md",
            "docs/performance.md",
            "tests/cycle.rs",
            "proposals/1-x/evidence.json",
            "prompts/lessons.md",
        ] {
            assert!(!build_input(other), "{other}");
        }
    }
}
