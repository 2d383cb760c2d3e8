//! The test environment: a temporary git repository adopted by atelier, approvers' keys, and a
//! hermetic way to run the real `atelier` binary (cleared environment, temporary HOME, no system
//! git config, a fixed clock).

#![allow(dead_code)]

pub mod clis;
pub mod github;
pub mod hub;
pub mod ledger;
pub mod model;
pub mod openapi;
pub mod records;
pub mod reviewers;
pub mod skip;
pub mod snapshot;
pub mod swarm;
pub mod webhooks;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

pub const T0: &str = "2026-11-29T10:00:00Z";
pub const PROPOSER: &str = "proposer@example.org";

/// What a command did.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn from(o: Output) -> Run {
        Run {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }

    #[track_caller]
    pub fn ok(self) -> Run {
        assert_eq!(
            self.code, 0,
            "expected success\nstdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }

    #[track_caller]
    pub fn code(self, code: i32) -> Run {
        assert_eq!(
            self.code, code,
            "expected exit {code}\nstdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", self.stdout))
    }
}

/// How the repository is set up before the adoption commit.
pub struct Setup {
    pub governance: String,
    /// Extra text appended to allowed_signers after alice's and bob's lines.
    pub extra_signers: String,
    /// Options for alice's and bob's lines (e.g. `valid-before="20200101Z"`).
    pub alice_options: String,
    pub principals: Vec<&'static str>,
    /// Replacements made in the atelier.toml `init` wrote, before the adoption commit.
    pub config_replace: Vec<(String, String)>,
    /// More files (path, text) in the adoption commit.
    pub files: Vec<(String, String)>,
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            governance: atelier::governance::policy::DEFAULT_GOVERNANCE_TOML.to_string(),
            extra_signers: String::new(),
            alice_options: "namespaces=\"atelier-approval\"".into(),
            principals: vec!["alice", "bob"],
            config_replace: Vec::new(),
            files: Vec::new(),
        }
    }
}

pub struct Env {
    pub tmp: tempfile::TempDir,
    pub repo: PathBuf,
    pub home: PathBuf,
    pub keys: PathBuf,
    pub now: String,
}

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_atelier")
}

impl Env {
    /// An adopted repository with alice and bob as approvers.
    pub fn new() -> Env {
        Env::with(Setup::default())
    }

    /// A repository with `main` holding one commit, not yet adopted.
    pub fn bare_repo() -> Env {
        let tmp = tempfile::tempdir().expect("temp dir");
        let repo = tmp.path().join("repo");
        let home = tmp.path().join("home");
        let keys = tmp.path().join("keys");
        for d in [&repo, &home, &keys] {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        let env = Env {
            tmp,
            repo,
            home,
            keys,
            now: T0.into(),
        };
        env.git(&["init", "-q", "-b", "main", "."]);
        env.git(&["config", "user.email", PROPOSER]);
        env.git(&["config", "user.name", "Proposer"]);
        env.write("README.md", "# demo\n");
        env.write("src/lib.rs", "pub fn answer() -> u32 {\n    41\n}\n");
        env.git(&["add", "-A"]);
        env.git(&["commit", "-q", "-m", "initial"]);
        env
    }

    pub fn with(setup: Setup) -> Env {
        let env = Env::bare_repo();
        env.atelier(&["init"]).ok();
        let mut config = env.read("atelier.toml");
        for (from, to) in &setup.config_replace {
            assert!(
                config.contains(from.as_str()),
                "atelier.toml has no `{from}`"
            );
            config = config.replace(from.as_str(), to);
        }
        env.write("atelier.toml", &config);
        env.write("policies/governance.toml", &setup.governance);
        let mut signers =
            std::fs::read_to_string(env.repo.join("policies/allowed_signers")).expect("signers");
        for p in &setup.principals {
            let line = env.keygen(p);
            let line = if *p == "alice" {
                line.replace("namespaces=\"atelier-approval\"", &setup.alice_options)
            } else {
                line
            };
            signers.push_str(&line);
            signers.push('\n');
        }
        signers.push_str(&setup.extra_signers);
        env.write("policies/allowed_signers", &signers);
        for (path, text) in &setup.files {
            env.write(path, text);
        }
        env.git(&["add", "-A"]);
        env.git(&["commit", "-q", "-m", "Adopt atelier"]);
        env
    }

    /// Where `init` kept this clone's gate key: outside the repository, under the temporary HOME.
    pub fn gate_key(&self) -> PathBuf {
        atelier::workflow::gatekey::directory_in(&self.home.join(".local/share"), &self.repo)
            .join("gate_key")
    }

    /// Makes `<keys>/<name>` for `<name>@example.org` and returns its allowed_signers line.
    pub fn keygen(&self, name: &str) -> String {
        let path = self.key(name);
        let out = self
            .atelier(&[
                "keygen",
                path.to_str().expect("utf8"),
                "--principal",
                &format!("{name}@example.org"),
            ])
            .ok();
        out.stdout.lines().last().expect("a line").to_string()
    }

    pub fn key(&self, name: &str) -> PathBuf {
        self.keys.join(name)
    }

    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("LANG", "C")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("ATELIER_NOW", &self.now)
            .current_dir(&self.repo);
        c
    }

    pub fn atelier(&self, args: &[&str]) -> Run {
        let mut c = self.command(bin());
        c.arg("-C").arg(&self.repo).args(args);
        Run::from(c.output().expect("run atelier"))
    }

    pub fn atelier_in(&self, dir: &Path, args: &[&str]) -> Run {
        let mut c = self.command(bin());
        c.arg("-C").arg(dir).args(args);
        Run::from(c.output().expect("run atelier"))
    }

    #[track_caller]
    pub fn git(&self, args: &[&str]) -> String {
        let out = self.command("git").args(args).output().expect("run git");
        assert!(
            out.status.success(),
            "git {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn write(&self, rel: &str, text: &str) {
        let p = self.repo.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.repo.join(rel)).expect("read")
    }

    /// A patch (against main's tip) that writes `text` to `rel`, made with git and undone.
    pub fn patch(&self, edits: &[(&str, &str)]) -> PathBuf {
        for (rel, text) in edits {
            self.write(rel, text);
        }
        self.git(&["add", "-A"]);
        let diff = self.git(&["diff", "--cached", "--binary"]);
        self.git(&["reset", "-q", "--hard", "HEAD"]);
        let n = std::fs::read_dir(self.tmp.path()).expect("ls").count();
        let path = self.tmp.path().join(format!("change-{n}.patch"));
        std::fs::write(&path, diff).expect("write patch");
        path
    }

    /// Proposes a change and returns its id.
    pub fn propose(&self, edits: &[(&str, &str)], title: &str) -> String {
        let patch = self.patch(edits);
        let out = self
            .atelier(&[
                "propose",
                "--patch",
                patch.to_str().expect("utf8"),
                "--title",
                title,
            ])
            .ok();
        out.stdout.trim().to_string()
    }

    /// A plain change to src/lib.rs.
    pub fn propose_code(&self) -> String {
        self.propose(
            &[("src/lib.rs", "pub fn answer() -> u32 {\n    42\n}\n")],
            "Fix the answer",
        )
    }

    pub fn approve(&self, id: &str, who: &str) -> Run {
        self.atelier(&[
            "approve",
            id,
            "--key",
            self.key(who).to_str().expect("utf8"),
        ])
    }

    pub fn reject(&self, id: &str, who: &str) -> Run {
        self.atelier(&[
            "approve",
            id,
            "--key",
            self.key(who).to_str().expect("utf8"),
            "--reject",
        ])
    }

    /// Signs proposal `id`'s current payload with `ssh-keygen -Y sign` and returns the paths of
    /// the payload and the `.sig` it wrote.
    pub fn ssh_sign(&self, id: &str, key: &Path, namespace: &str) -> (PathBuf, PathBuf) {
        let payload = self.atelier(&["approve", id, "--payload"]).ok().stdout;
        let n = std::fs::read_dir(self.tmp.path()).expect("ls").count();
        let file = self.file(&format!("payload-{n}"), &payload);
        let out = self
            .command("ssh-keygen")
            .args(["-Y", "sign", "-f"])
            .arg(key)
            .args(["-n", namespace])
            .arg(&file)
            .output()
            .expect("ssh-keygen runs");
        assert!(
            out.status.success(),
            "ssh-keygen -Y sign: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let sig = PathBuf::from(format!("{}.sig", file.display()));
        (file, sig)
    }

    pub fn gate(&self, id: &str) -> (i32, Value) {
        let run = self.atelier(&["gate", id, "--json"]);
        let v = run.json();
        (run.code, v)
    }

    pub fn file(&self, name: &str, text: &str) -> PathBuf {
        let p = self.tmp.path().join(name);
        std::fs::write(&p, text).expect("write");
        p
    }
}

/// The codes of unmet requirements in a gate JSON.
pub fn unmet(v: &Value) -> Vec<String> {
    v["requirements"]
        .as_array()
        .expect("requirements")
        .iter()
        .filter(|r| r["met"] == Value::Bool(false))
        .map(|r| r["code"].as_str().expect("code").to_string())
        .collect()
}

/// The codes of every token in a gate JSON.
pub fn token_codes(v: &Value) -> Vec<String> {
    v["tokens"]
        .as_array()
        .expect("tokens")
        .iter()
        .map(|t| t["code"].as_str().expect("code").to_string())
        .collect()
}
