//! A swarm in a temporary repository driven by the scripted agent: plans, tasks, scenarios, and
//! running `atelier` with them.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use atelier::swarm::events::{self, RunEvent};

use crate::support::{bin, Env, Run};

pub(crate) const AGENT: &str = r#"#!/bin/sh
slug=$(echo "$ATELIER_TASK_ID" | tr ':' '-')
cat > "$FAKE_AGENT_DIR/prompt-$slug-$ATELIER_ATTEMPT.txt"
env > "$FAKE_AGENT_DIR/env-$slug-$ATELIER_ATTEMPT.txt"
if [ -f "$FAKE_AGENT_DIR/$slug.sh" ]; then . "$FAKE_AGENT_DIR/$slug.sh"; fi
"#;

pub(crate) struct Swarm {
    pub(crate) env: Env,
    pub(crate) fake: PathBuf,
}

impl Swarm {
    pub(crate) fn new(conductor: &str) -> Swarm {
        Swarm::configured(conductor, "")
    }

    /// A swarm whose protected branch accepts running uncontained: for the conductor's own
    /// defences against a worker that is not confined (containment is tested in
    /// tests/containment/).
    pub(crate) fn uncontained(conductor: &str) -> Swarm {
        Swarm::configured(conductor, "\n[swarm]\ncontainment = \"none\"\n")
    }

    pub(crate) fn configured(conductor: &str, extra: &str) -> Swarm {
        let env = Env::new();
        let fake = env.tmp.path().join("fake");
        std::fs::create_dir_all(&fake).expect("mkdir");
        let agent = fake.join("agent.sh");
        std::fs::write(&agent, AGENT).expect("write agent");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let config = env.read("atelier.toml");
        env.write(
            "atelier.toml",
            &format!(
                "{config}\n[roles.implementer]\nbackend = \"command\"\ncommand = [\"{}\"]\nenv = [\"FAKE_AGENT_DIR\", \"GITHUB_TOKEN\", \"ATELIER_GITHUB_TOKEN\"]\nwritable = [\"{}\"]\n\n[conductor]\n{conductor}\n{extra}",
                agent.display(),
                fake.display()
            ),
        );
        env.git(&["commit", "-q", "-am", "Configure the swarm"]);
        Swarm { env, fake }
    }

    /// What the fake agent does for `task` (`plan:id`): shell code, run in the worktree.
    pub(crate) fn scenario(&self, task: &str, script: &str) {
        std::fs::write(
            self.fake.join(format!("{}.sh", task.replace(':', "-"))),
            script,
        )
        .expect("write scenario");
    }

    pub(crate) fn command(&self, args: &[&str]) -> std::process::Command {
        let mut c = self.env.command(bin());
        c.arg("-C")
            .arg(&self.env.repo)
            .args(args)
            .env("FAKE_AGENT_DIR", &self.fake)
            .env("GITHUB_TOKEN", "ghp_secret")
            .env("ATELIER_GITHUB_TOKEN", "ghp_secret2");
        c
    }

    pub(crate) fn run(&self, args: &[&str]) -> Run {
        let o = self.command(args).output().expect("run atelier");
        Run {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }

    pub(crate) fn plan(&self, name: &str, text: &str) -> String {
        self.env.file(name, text).display().to_string()
    }

    pub(crate) fn events(&self, run: &str) -> Vec<RunEvent> {
        events::read(
            &self
                .env
                .repo
                .join(".atelier/runs")
                .join(run)
                .join("events.jsonl"),
        )
        .expect("events")
        .into_iter()
        .map(|r| r.event)
        .collect()
    }

    pub(crate) fn prompt(&self, task: &str, attempt: u32) -> String {
        std::fs::read_to_string(
            self.fake
                .join(format!("prompt-{}-{attempt}.txt", task.replace(':', "-"))),
        )
        .expect("prompt")
    }
}

pub(crate) fn task(id: &str, files: &[&str], deps: &[&str], check: &str) -> String {
    let q = |v: &[&str]| {
        v.iter()
            .map(|s| format!("\"{s}\""))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "[[task]]\nid = \"{id}\"\ntitle = \"Task {id}\"\nrole = \"implementer\"\ngoal = \"Do {id}\"\nfiles = [{}]\ndepends_on = [{}]\n[task.contract]\ncriteria = [\"the check for {id} exits 0 on the finished worktree\"]\nchecks = [{}]\n\n",
        q(files),
        q(deps),
        toml_str(check)
    )
}

pub(crate) fn toml_str(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

pub(crate) fn plan(id: &str, tasks: &[String]) -> String {
    format!(
        "[plan]\nid = \"{id}\"\ntitle = \"Plan {id}\"\n\n{}",
        tasks.concat()
    )
}

/// A one-task plan whose task claims `src/t.rs`, with a check that it exists.
pub(crate) fn one(s: &Swarm, script: &str) -> String {
    s.scenario("p:T", script);
    s.plan(
        "p.toml",
        &plan("p", &[task("T", &["src/t.rs"], &[], "test -f src/t.rs")]),
    )
}

/// A scenario that waits (at most 60 s) for `file`, then writes `ok` to `out`.
pub(crate) fn waits_for(file: &std::path::Path, out: &str) -> String {
    format!(
        "i=0; while [ ! -f '{}' ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; echo ok > {out}",
        file.display()
    )
}

/// Waits (at most 60 s) until the events file holds `needle`.
pub(crate) fn wait_for_event(events: &std::path::Path, needle: &str) {
    let start = std::time::Instant::now();
    loop {
        let text = std::fs::read_to_string(events).unwrap_or_default();
        if text.contains(needle) {
            return;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(60),
            "no `{needle}` in the events:\n{text}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Cursor moves stand between the words a terminal draws: the screen's text with each escape
/// sequence read as a space, and runs of spaces as one.
pub(crate) fn screen_words(screen: &[u8]) -> String {
    let mut words = String::new();
    let mut bytes = screen.iter().copied();
    while let Some(b) = bytes.next() {
        if b == 0x1b {
            for c in bytes.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
            words.push(' ');
        } else {
            words.push(b as char);
        }
    }
    words.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `atelier watch --stay` in a pseudo-terminal of `cols` columns (`script`, util-linux): the
/// process, whose stdin takes keys (it stays open after the run ends, until `q`).
pub(crate) fn cockpit(s: &Swarm, cols: u16) -> std::process::Child {
    in_terminal(s, cols, "watch --stay")
}

/// `atelier ARGS` (shell words) in a pseudo-terminal of `cols` columns (`script`, util-linux),
/// as a person at a terminal runs it: the process, whose stdin takes keys and whose stdout is
/// the screen.
pub(crate) fn in_terminal(s: &Swarm, cols: u16, args: &str) -> std::process::Child {
    s.env
        .command("script")
        .args([
            "-qc",
            &format!(
                "stty cols {cols} rows 40; '{}' -C '{}' {args}",
                crate::support::bin(),
                s.env.repo.display()
            ),
            "/dev/null",
        ])
        .env("FAKE_AGENT_DIR", &s.fake)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("script (util-linux)")
}

/// A swarm run in the background, controlled from "another terminal" (`atelier control`).
pub(crate) struct Background {
    pub(crate) child: std::process::Child,
    pub(crate) events: PathBuf,
}

impl Background {
    pub(crate) fn start(s: &Swarm, plan: &str) -> Background {
        let child = s
            .command(&["run", plan, "--max-parallel", "1"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the run");
        let events = s.env.repo.join(".atelier/runs/r1/events.jsonl");
        Background { child, events }
    }

    /// Waits (at most 60 s) until the run's events contain `needle`.
    pub(crate) fn wait_for(&self, needle: &str) {
        wait_for_event(&self.events, needle);
    }

    pub(crate) fn finish(mut self) -> Run {
        let o = std::mem::replace(
            &mut self.child,
            std::process::Command::new("true").spawn().expect("true"),
        )
        .wait_with_output()
        .expect("the run ends");
        Run {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn repo(s: &Swarm) -> &Path {
    &s.env.repo
}

/// Gives `s` a command role `role` run by the script `text` (in the fake agent's directory,
/// which the role may write), committed on the branch.
pub(crate) fn add_role(s: &Swarm, role: &str, text: &str) {
    let script = s.fake.join(format!("{role}.sh"));
    std::fs::write(&script, text).expect("write script");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let config = s.env.read("atelier.toml");
    s.env.write(
        "atelier.toml",
        &format!(
            "{config}\n[roles.{role}]\nbackend = \"command\"\ncommand = [\"{}\"]\nenv = [\"FAKE_AGENT_DIR\"]\nwritable = [\"{}\"]\n",
            script.display(),
            s.fake.display()
        ),
    );
    s.env.git(&["commit", "-qam", &format!("A {role} role")]);
}

/// The scripted validator: saves its prompt, prints `validator-answer.txt`.
pub(crate) const VALIDATOR: &str = "#!/bin/sh\ncat > \"$FAKE_AGENT_DIR/validator-prompt.txt\"\ncat \"$FAKE_AGENT_DIR/validator-answer.txt\"\n";

/// A swarm with a `proposer` role: a scripted model that saves its prompt and prints
/// `proposer-reply.txt`, after trying to write into the main working tree.
pub(crate) fn with_proposer() -> Swarm {
    let s = Swarm::configured("", "");
    let text = format!(
        "#!/bin/sh\ncat > \"$FAKE_AGENT_DIR/proposer-prompt.txt\"\necho pwned > '{}/pwned-by-proposer.txt' 2>/dev/null\ncat \"$FAKE_AGENT_DIR/proposer-reply.txt\"\n",
        s.env.repo.display()
    );
    add_role(&s, "proposer", &text);
    s
}

pub(crate) fn reply(s: &Swarm, text: &str) {
    std::fs::write(s.fake.join("proposer-reply.txt"), text).expect("write reply");
}

/// `runs` runs of a plan where `p:A` passes at once and `p:B` fails every attempt.
pub(crate) fn runs_with_a_hopeless_task(s: &Swarm, runs: usize) {
    s.scenario("p:A", "echo ok > src/a.rs");
    s.scenario("p:B", "echo nope > src/b.rs");
    let p = s.plan(
        "p.toml",
        &plan(
            "p",
            &[
                task("A", &["src/a.rs"], &[], "grep -q ok src/a.rs"),
                task("B", &["src/b.rs"], &[], "grep -q ok src/b.rs"),
            ],
        ),
    );
    for _ in 0..runs {
        s.run(&["run", &p]).code(1);
    }
}
