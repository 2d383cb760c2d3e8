//! Running untrusted programs (agent workers, gauntlet steps, contract checks): a scrubbed
//! environment, a working directory, stdin, a wall-clock limit, an output cap, and liveness
//! by silence — measured from the program's last output, re-checked before acting — with the
//! whole process group killed when a limit is hit.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

/// Process groups of the programs running now, so an interrupted conductor can end them all.
static LIVE: std::sync::Mutex<std::collections::BTreeSet<u32>> =
    std::sync::Mutex::new(std::collections::BTreeSet::new());

/// Kills every program this process started and that is still running (with its group).
pub fn kill_all() {
    let live = LIVE.lock().map(|l| l.clone()).unwrap_or_default();
    for pid in live {
        kill_group(Some(pid));
    }
}

/// The variables every child gets (when set in the parent), besides those asked for.
pub const BASE_ENV: &[&str] = &["PATH", "HOME", "LANG"];

/// Variables that never reach a child, whatever a role asks for: the forge's tokens, the
/// webhook's secret and the SSH agent (which holds signing keys).
pub const NEVER_PASSED: &[&str] = &[
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "ATELIER_GITHUB_TOKEN",
    "ATELIER_WEBHOOK_SECRET",
    "SSH_AUTH_SOCK",
];

/// Whether `name` is one of `NEVER_PASSED` (ASCII case-insensitive).
pub fn never_passed(name: &str) -> bool {
    NEVER_PASSED.iter().any(|v| v.eq_ignore_ascii_case(name))
}

/// Silence thresholds (the conductor's nudge and restart).
#[derive(Debug, Clone, Copy)]
pub struct Silence {
    pub nudge_after: Duration,
    pub restart_after: Duration,
}

/// What to run.
#[derive(Debug, Clone)]
pub struct Spawn {
    pub program: String,
    pub args: Vec<String>,
    pub cwd: PathBuf,
    /// The complete environment (nothing else is inherited).
    pub env: Vec<(String, String)>,
    pub stdin: Vec<u8>,
    pub timeout: Duration,
    pub silence: Option<Silence>,
    /// Bytes of output kept; the rest is counted and dropped.
    pub max_output: usize,
}

/// How it ended.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    pub code: Option<i32>,
    /// stdout and stderr interleaved as they arrived, up to `max_output` bytes.
    pub output: String,
    /// stdout alone, up to `max_output` bytes (an agent reviewer's answer).
    pub stdout: String,
    pub output_bytes: u64,
    pub truncated: bool,
    pub timed_out: bool,
    /// Killed after `restart_after` of silence.
    pub silenced: bool,
    /// Seconds of silence at each nudge.
    pub nudges: Vec<u64>,
    pub elapsed: Duration,
}

impl Outcome {
    pub fn success(&self) -> bool {
        self.code == Some(0) && !self.timed_out && !self.silenced
    }
}

struct Capture {
    kept: Vec<u8>,
    stdout: Vec<u8>,
    total: u64,
    last: Instant,
}

async fn pump(
    mut from: impl AsyncRead + Unpin,
    cap: Arc<Mutex<Capture>>,
    max: usize,
    is_stdout: bool,
) {
    let mut buf = [0u8; 8192];
    loop {
        match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                let mut c = cap.lock().expect("the capture lock is never poisoned");
                c.total += n as u64;
                c.last = Instant::now();
                let room = max.saturating_sub(c.kept.len());
                let take = room.min(n);
                c.kept.extend_from_slice(&buf[..take]);
                if is_stdout {
                    let room = max.saturating_sub(c.stdout.len());
                    let take = room.min(n);
                    c.stdout.extend_from_slice(&buf[..take]);
                }
            }
        }
    }
}

fn kill_group(pid: Option<u32>) {
    if let Some(pid) = pid {
        // The child leads its own process group, so this reaches everything it started.
        // SAFETY: kill(2) has no memory-safety preconditions.
        unsafe {
            libc::kill(-(pid as i32), libc::SIGKILL);
        }
    }
}

/// The environment for a child: the base variables and `pass` from the parent (never one of
/// `NEVER_PASSED`), then `extra`.
pub fn scrubbed_env(pass: &[String], extra: &[(String, String)]) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = BASE_ENV
        .iter()
        .map(|s| s.to_string())
        .chain(pass.iter().filter(|k| !never_passed(k)).cloned())
        .filter_map(|k| std::env::var(&k).ok().map(|v| (k, v)))
        .collect();
    env.extend(extra.iter().cloned());
    env
}

/// Runs a program to completion or to a limit. `on_nudge` is called with the seconds of
/// silence each time the nudge threshold passes.
pub async fn run(spawn: &Spawn, mut on_nudge: impl FnMut(u64)) -> std::io::Result<Outcome> {
    let started = Instant::now();
    let mut cmd = tokio::process::Command::new(&spawn.program);
    cmd.args(&spawn.args)
        .current_dir(&spawn.cwd)
        .env_clear()
        .envs(spawn.env.iter().map(|(k, v)| (k, v)))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    // SAFETY: prctl(2) is async-signal-safe and touches no memory of the parent. The child's
    // leader dies with the conductor, even when the conductor is killed with SIGKILL.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let mut child = cmd.spawn()?;
    let pid = child.id();
    if let (Some(p), Ok(mut live)) = (pid, LIVE.lock()) {
        live.insert(p);
    }
    let cap = Arc::new(Mutex::new(Capture {
        kept: Vec::new(),
        stdout: Vec::new(),
        total: 0,
        last: Instant::now(),
    }));
    let out = tokio::spawn(pump(
        child.stdout.take().expect("stdout is piped"),
        cap.clone(),
        spawn.max_output,
        true,
    ));
    let err = tokio::spawn(pump(
        child.stderr.take().expect("stderr is piped"),
        cap.clone(),
        spawn.max_output,
        false,
    ));
    if let Some(mut stdin) = child.stdin.take() {
        let input = spawn.stdin.clone();
        tokio::spawn(async move {
            // A child that exits without reading its input is not an error here.
            let _ = stdin.write_all(&input).await;
        });
    }
    let mut outcome = Outcome::default();
    let deadline = started + spawn.timeout;
    let mut nudged_at: Option<Instant> = None;
    let status = loop {
        tokio::select! {
            status = child.wait() => break Some(status?),
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
        }
        let now = Instant::now();
        if now >= deadline {
            outcome.timed_out = true;
            break None;
        }
        if let Some(s) = spawn.silence {
            let last = cap.lock().expect("the capture lock is never poisoned").last;
            let silent = now.duration_since(last);
            if silent >= s.nudge_after && nudged_at.is_none_or(|t| t < last) {
                nudged_at = Some(now);
                outcome.nudges.push(silent.as_secs());
                on_nudge(silent.as_secs());
            }
            if silent >= s.restart_after {
                // Re-check just before acting: output may have arrived meanwhile.
                let last = cap.lock().expect("the capture lock is never poisoned").last;
                if Instant::now().duration_since(last) >= s.restart_after {
                    outcome.silenced = true;
                    break None;
                }
            }
        }
    };
    if status.is_none() {
        kill_group(pid);
        let _ = child.wait().await;
    } else {
        // The worker is done; anything it left running in its group goes too.
        kill_group(pid);
    }
    let _ = tokio::time::timeout(Duration::from_secs(2), out).await;
    let _ = tokio::time::timeout(Duration::from_secs(2), err).await;
    if let (Some(p), Ok(mut live)) = (pid, LIVE.lock()) {
        live.remove(&p);
    }
    let c = cap.lock().expect("the capture lock is never poisoned");
    outcome.code = status.and_then(|s| s.code());
    outcome.output = String::from_utf8_lossy(&c.kept).into_owned();
    outcome.stdout = String::from_utf8_lossy(&c.stdout).into_owned();
    outcome.output_bytes = c.total;
    outcome.truncated = c.total > c.kept.len() as u64;
    outcome.elapsed = started.elapsed();
    Ok(outcome)
}
