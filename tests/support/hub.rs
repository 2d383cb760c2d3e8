//! A repository on the GitHub emulator: the hub, its served `atelier serve`, and helpers to drive
//! pull requests.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};

use serde_json::Value;

use crate::support::github::Emulator;
use crate::support::{Env, Run};

pub(crate) const REPO: &str = "acme/widgets";

pub(crate) const BOT: &str = "bot-token";

pub(crate) const SECRET: &str = "webhook-test-secret";

/// An adopted repository whose forge is the emulator, with `main` pushed to its bare remote.
pub struct Hub {
    pub env: Env,
    pub remote: PathBuf,
    pub emu: Emulator,
    _remote_dir: tempfile::TempDir,
}

impl Hub {
    pub fn new() -> Hub {
        Hub::with_merge("manual")
    }

    pub fn with_merge(merge: &str) -> Hub {
        Hub::build(crate::support::Setup::default(), merge)
    }

    pub fn build(mut setup: crate::support::Setup, merge: &str) -> Hub {
        let dir = tempfile::tempdir().expect("temp dir");
        let remote = dir.path().join("remote.git");
        let out = std::process::Command::new("git")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", dir.path())
            .args(["init", "-q", "--bare", "-b", "main"])
            .arg(&remote)
            .output()
            .expect("git init");
        assert!(out.status.success());
        let emu = Emulator::start(
            REPO,
            &remote,
            &[
                (BOT, "atelier-bot"),
                ("alice-token", "alice"),
                ("bob-token", "bob"),
                ("mallory-token", "mallory"),
            ],
        );
        // The GitHub configuration is part of the adoption commit, as it would be for real.
        setup.config_replace = vec![
            ("kind = \"local\"".into(), "kind = \"github\"".into()),
            (
                "repository = \"local/repo\"".into(),
                format!(
                    "repository = \"{REPO}\"\napi_url = \"{}\"\nremote = \"origin\"\nmerge = \"{merge}\"",
                    emu.url
                ),
            ),
        ];
        let env = Env::with(setup);
        env.git(&["remote", "add", "origin", remote.to_str().expect("utf8")]);
        env.git(&["push", "-q", "origin", "main"]);
        Hub {
            env,
            remote,
            emu,
            _remote_dir: dir,
        }
    }

    /// Runs atelier in `dir` with a GitHub token.
    pub fn run_in(&self, dir: &Path, token: &str, args: &[&str]) -> Run {
        let mut c = self.env.command(crate::support::bin());
        c.arg("-C")
            .arg(dir)
            .args(args)
            .env("GITHUB_TOKEN", token)
            .env("ATELIER_GITHUB_BACKOFF_MS", "20");
        let o = c.output().expect("run atelier");
        Run {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }

    pub fn run(&self, token: &str, args: &[&str]) -> Run {
        self.run_in(&self.env.repo, token, args)
    }

    /// Proposes a code change and submits it; returns the pull request number.
    pub fn submitted(&self) -> u64 {
        let id = self.env.propose_code();
        let out = self.run(BOT, &["submit", &id, "--json"]).ok();
        out.json()["pull"].as_u64().expect("pull number")
    }

    /// `who` signs and posts a token on pull request `n`.
    pub fn approve(&self, n: u64, who: &str, extra: &[&str]) -> Run {
        let key = self.env.key(who);
        let mut args = vec![
            "approve",
            "--pr",
            &*Box::leak(n.to_string().into_boxed_str()),
            "--key",
            key.to_str().expect("utf8"),
            "--post",
        ];
        args.extend_from_slice(extra);
        self.run(&format!("{who}-token"), &args)
    }

    pub fn gate(&self, n: u64) -> (i32, Value) {
        let run = self.run(BOT, &["gate", "--pr", &n.to_string(), "--json"]);
        assert!(run.code == 0 || run.code == 1, "gate: {run:?}");
        (run.code, run.json())
    }

    pub fn head(&self, n: u64) -> String {
        self.emu.pull(n)["head"]["sha"]
            .as_str()
            .expect("head sha")
            .to_string()
    }

    /// The newest `atelier/governance` status on `sha`.
    pub fn status(&self, sha: &str) -> Option<(String, String)> {
        self.emu
            .statuses(sha)
            .into_iter()
            .find(|s| s["context"] == "atelier/governance")
            .map(|s| {
                (
                    s["state"].as_str().unwrap_or("").to_string(),
                    s["description"].as_str().unwrap_or("").to_string(),
                )
            })
    }

    /// A clone of the remote, as another person's machine would have.
    pub fn clone_remote(&self, name: &str) -> PathBuf {
        let dir = self.env.tmp.path().join(name);
        self.env.git(&[
            "clone",
            "-q",
            self.remote.to_str().expect("utf8"),
            dir.to_str().expect("utf8"),
        ]);
        dir
    }

    /// An auditor's fresh clone of the remote, with `refs/atelier/ledger` fetched.
    pub fn auditor_clone(&self) -> PathBuf {
        let dir = self.clone_remote(&format!("auditor-{}", rand_suffix()));
        self.git_in(
            &dir,
            &[
                "fetch",
                "-q",
                "origin",
                "refs/atelier/ledger:refs/atelier/ledger",
            ],
        );
        dir
    }

    /// Runs git in `dir` (another clone), asserting success.
    #[track_caller]
    pub fn git_in(&self, dir: &Path, args: &[&str]) {
        let out = self
            .env
            .command("git")
            .current_dir(dir)
            .args(args)
            .output()
            .expect("git");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Pushes one more commit onto a proposal branch, as someone with push access would.
    pub fn push_onto(&self, branch: &str) {
        let dir = self.clone_remote(&format!("pusher-{}", rand_suffix()));
        let git = |args: &[&str]| self.git_in(&dir, args);
        git(&["checkout", "-q", branch]);
        std::fs::write(dir.join("src/extra.rs"), "// after approval\n").expect("write");
        git(&["add", "-A"]);
        git(&[
            "-c",
            "user.email=m@example.org",
            "-c",
            "user.name=M",
            "commit",
            "-q",
            "-m",
            "more",
        ]);
        git(&["push", "-q", "origin", branch]);
    }

    /// Starts `atelier serve` on a free port; returns the child and its base URL.
    pub fn serve(&self) -> (Served, String) {
        self.serve_with(&[])
    }

    /// `serve` with more arguments.
    pub fn serve_with(&self, extra: &[&str]) -> (Served, String) {
        let mut c = self.env.command(crate::support::bin());
        c.arg("-C")
            .arg(&self.env.repo)
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(extra)
            .env("GITHUB_TOKEN", BOT)
            .env("ATELIER_WEBHOOK_SECRET", SECRET)
            .env("ATELIER_GITHUB_BACKOFF_MS", "20");
        let log = self
            .env
            .tmp
            .path()
            .join(format!("serve-{}.log", rand_suffix()));
        c.stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).expect("log file"));
        let mut child = c.spawn().expect("start serve");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("read");
        let url = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("serve said {line:?}"))
            .to_string();
        (Served(child, log), url)
    }
}

/// Stops the server when dropped; `log()` reads what it wrote to stderr.
pub struct Served(Child, PathBuf);

impl Served {
    /// What the server wrote to stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.1).unwrap_or_default()
    }

    /// Stops the server (SIGTERM) and returns its log.
    pub fn stop(mut self) -> String {
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let _ = self.0.wait();
        self.log()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub(crate) fn rand_suffix() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    N.fetch_add(1, Ordering::Relaxed).to_string()
}
