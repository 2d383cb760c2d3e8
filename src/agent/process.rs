//! Running untrusted programs (agent workers, gauntlet steps, contract checks): a scrubbed
//! environment, a working directory, stdin, a wall-clock limit, an output cap, and liveness
//! by silence — measured from the program's last output, re-checked before acting — with the
//! whole process group killed when a limit is hit, and every descendant that left the group
//! (`setsid`, a double fork, `nohup … &`) killed when the program ends (see `sweep`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

/// Process groups of the programs running now, so an interrupted conductor can end them all.
static LIVE: std::sync::Mutex<std::collections::BTreeSet<u32>> =
    std::sync::Mutex::new(std::collections::BTreeSet::new());

/// Descendants seen outside a running program's group, by pid and start time, with the pid of
/// the program they belong to (see `sweep` for the rule).
static SEEN: std::sync::Mutex<std::collections::BTreeMap<(i32, u64), u32>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

/// Kills every program this process started and that is still running (with its group),
/// every descendant of theirs seen so far, and every orphan re-parented to us outside our own
/// process group: one pass, for a conductor about to exit (`sweep` is the thorough one).
pub fn kill_all() {
    let live = LIVE.lock().map(|l| l.clone()).unwrap_or_default();
    for pid in live {
        kill_group(Some(pid));
    }
    let seen = SEEN.lock().map(|s| s.clone()).unwrap_or_default();
    let me = std::process::id() as i32;
    // SAFETY: getpgrp(2) cannot fail and touches no memory.
    let our_group = unsafe { libc::getpgrp() };
    for p in procs() {
        let orphan = p.ppid == me && p.pgid != our_group && SUBREAPER.is_completed();
        if orphan || seen.contains_key(&(p.pid, p.start)) {
            signal(p.pid, libc::SIGKILL);
        }
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

/// A monotonic stopwatch, for the durations telemetry records (monotonic time is read here
/// only: limits on running programs, and how long things took).
#[derive(Debug, Clone, Copy)]
pub struct Stopwatch(Instant);

impl Stopwatch {
    pub fn start() -> Stopwatch {
        Stopwatch(Instant::now())
    }

    pub fn elapsed(&self) -> Duration {
        self.0.elapsed()
    }
}

/// SIGINT and SIGTERM, caught, for a command that must clean up after the programs it runs
/// (a proposer's worktree): installed before it creates anything to clean.
pub struct Interrupts {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
}

impl Interrupts {
    /// Installs the handlers; must be called inside a tokio runtime.
    pub fn install() -> std::io::Result<Interrupts> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Interrupts {
            int: signal(SignalKind::interrupt())?,
            term: signal(SignalKind::terminate())?,
        })
    }
}

/// Runs `spawn` like [`run`] unless SIGINT or SIGTERM arrives first: then every program atelier
/// started is killed and `None` is returned, so the caller cleans up and stops.
pub async fn run_or_interrupted(
    spawn: &Spawn,
    stop: &mut Interrupts,
) -> std::io::Result<Option<Outcome>> {
    tokio::select! {
        o = run(spawn, |_| {}) => o.map(Some),
        _ = stop.int.recv() => { kill_all(); Ok(None) }
        _ = stop.term.recv() => { kill_all(); Ok(None) }
    }
}

/// The time of a watched program's last output (its start, before any), kept current while it
/// runs for whoever shows its silence live (`swarm::live`).
pub type LastOutput = Arc<Mutex<Instant>>;

/// A last-output clock for a program starting now.
pub fn last_output() -> LastOutput {
    Arc::new(Mutex::new(Instant::now()))
}

/// How long the program a clock watches has been silent.
pub fn silent_for(last: &LastOutput) -> Duration {
    Instant::now().saturating_duration_since(*last.lock().unwrap_or_else(|e| e.into_inner()))
}

/// Silence thresholds (the conductor's nudge and restart).
#[derive(Debug, Clone)]
pub struct Silence {
    pub nudge_after: Duration,
    pub restart_after: Duration,
    /// Updated about ten times a second with the program's last output, while it runs.
    pub live: Option<LastOutput>,
    /// Set by another thread to end the program now, its group killed (a budget reached).
    pub end: Option<EndFlag>,
}

/// A flag that ends a watched program when set (`Silence::end`).
pub type EndFlag = Arc<std::sync::atomic::AtomicBool>;

impl Silence {
    /// The shortest quiet period worth recording: half the nudge threshold, at least a
    /// second. Shorter pauses are a working program's rhythm, and recording each would flood
    /// the log of a chatty one.
    pub fn quiet_floor(&self) -> Duration {
        (self.nudge_after / 2).max(Duration::from_secs(1))
    }
}

/// What ended a quiet period.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum QuietEnd {
    /// The program wrote again.
    Output,
    /// The conductor killed it after `restart_after` of silence.
    Restart,
    /// It exited while silent.
    Exit,
    /// It was killed at the attempt timeout while silent.
    Timeout,
}

impl QuietEnd {
    pub fn as_str(self) -> &'static str {
        match self {
            QuietEnd::Output => "output",
            QuietEnd::Restart => "restart",
            QuietEnd::Exit => "exit",
            QuietEnd::Timeout => "timeout",
        }
    }
}

/// One quiet period of a watched program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quiet {
    pub lasted: Duration,
    pub ended: QuietEnd,
    /// It reached the nudge threshold.
    pub nudged: bool,
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
    /// What the program may touch (`contain`); `None` runs it uncontained. A contained program
    /// also gets a private temporary directory (TMPDIR, TMP, TEMP), removed when it ends.
    pub sandbox: Option<super::contain::Sandbox>,
    /// Fed every line of stdout and of stderr (each stream split apart) as it arrives, however
    /// much of them `max_output` keeps.
    pub lines: Option<LineTap>,
}

/// The longest stdout line handed to a [`Lines`] reader; a longer one goes by unread.
pub const LINE_MAX: usize = 8 << 20;

/// Which of a program's streams a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// Reads a program's stdout and stderr line by line as they arrive (`Spawn::lines`); the two
/// streams are read apart, so their lines are in order within each, not between them.
pub trait Lines: Send {
    /// One line without its newline (the last one also when it has none).
    fn line(&mut self, from: Stream, line: &[u8]);
    /// A line longer than [`LINE_MAX`] went by unread.
    fn overlong(&mut self, from: Stream);
}

/// A shared [`Lines`] reader: the caller keeps a clone and reads it once the program ended.
#[derive(Clone)]
pub struct LineTap(pub Arc<Mutex<dyn Lines>>);

impl std::fmt::Debug for LineTap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LineTap")
    }
}

/// Splits one stream into lines for a [`LineTap`].
struct Splitter {
    from: Stream,
    line: Vec<u8>,
    overlong: bool,
}

impl Splitter {
    fn push(&mut self, mut bytes: &[u8], tap: &LineTap) {
        while !bytes.is_empty() {
            let (part, rest, ends) = match bytes.iter().position(|b| *b == b'\n') {
                Some(i) => (&bytes[..i], &bytes[i + 1..], true),
                None => (bytes, &[][..], false),
            };
            if !self.overlong {
                if self.line.len() + part.len() > LINE_MAX {
                    self.overlong = true;
                    self.line = Vec::new();
                } else {
                    self.line.extend_from_slice(part);
                }
            }
            if ends {
                self.end(tap);
            }
            bytes = rest;
        }
    }

    fn end(&mut self, tap: &LineTap) {
        let mut reader = tap
            .0
            .lock()
            .expect("the line reader's lock is never poisoned");
        if self.overlong {
            reader.overlong(self.from);
        } else {
            reader.line(self.from, &self.line);
        }
        self.line.clear();
        self.overlong = false;
    }

    fn finish(&mut self, tap: &LineTap) {
        if self.overlong || !self.line.is_empty() {
            self.end(tap);
        }
    }
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
    /// Killed because its `Silence::end` flag was set.
    pub ended: bool,
    /// The silence measured at each nudge.
    pub nudges: Vec<Duration>,
    /// Every quiet period (no output on stdout or stderr) of at least [`quiet_floor`], in the
    /// order they ended: how long it lasted and what ended it. Only for programs watched for
    /// silence (workers); empty otherwise.
    pub quiet: Vec<Quiet>,
    pub elapsed: Duration,
    /// Descendants still running outside the program's process group when it ended, killed
    /// then (see `sweep`).
    pub killed_escapees: usize,
}

impl Outcome {
    pub fn success(&self) -> bool {
        self.code == Some(0) && !self.timed_out && !self.silenced
    }
}

struct Capture {
    kept: Kept,
    stdout: Kept,
    total: u64,
    last: Instant,
    /// Quiet periods at least this long that output ended are kept in `quiet`.
    quiet_floor: Option<Duration>,
    quiet: Vec<Duration>,
}

/// Up to `max` bytes of a stream: its first half and its last, so that what a program said
/// last (Claude Code's `result`, codex's `turn.completed`, the error it ended on) is kept
/// however much it printed before.
#[derive(Default)]
struct Kept {
    head: Vec<u8>,
    /// The latest bytes after the head; trimmed to half of `max` when it reaches `max`.
    tail: Vec<u8>,
    /// Bytes trimmed from the front of `tail` so far.
    trimmed: u64,
}

impl Kept {
    fn push(&mut self, mut bytes: &[u8], max: usize) {
        let half = max / 2;
        let room = half.saturating_sub(self.head.len());
        let take = room.min(bytes.len());
        self.head.extend_from_slice(&bytes[..take]);
        bytes = &bytes[take..];
        self.tail.extend_from_slice(bytes);
        let keep = max - half;
        if self.tail.len() >= max.max(1) {
            let cut = self.tail.len() - keep;
            self.tail.drain(..cut);
            self.trimmed += cut as u64;
        }
    }

    /// Bytes that [`Kept::text`] leaves out.
    fn dropped(&self, max: usize) -> u64 {
        let keep = max - max / 2;
        self.trimmed + self.tail.len().saturating_sub(keep) as u64
    }

    /// The head, then (when bytes were dropped) a line saying how many, then the tail: whole
    /// lines only on each side of the cut (a line cut in two is left out whole), so that no
    /// value the output held, a key to redact among them, is kept in part.
    fn text(&self, max: usize) -> String {
        let dropped = self.dropped(max);
        if dropped == 0 {
            let mut all = self.head.clone();
            all.extend_from_slice(&self.tail);
            return String::from_utf8_lossy(&all).into_owned();
        }
        let head_end = self
            .head
            .iter()
            .rposition(|b| *b == b'\n')
            .map_or(0, |i| i + 1);
        let head = &self.head[..head_end];
        let dropped = dropped + (self.head.len() - head_end) as u64;
        let tail = &self.tail[self.tail.len() - (max - max / 2)..];
        let (dropped, tail) = match tail.iter().position(|b| *b == b'\n') {
            Some(i) => (dropped + i as u64 + 1, &tail[i + 1..]),
            None => (dropped + tail.len() as u64, &tail[tail.len()..]),
        };
        format!(
            "{}[… {dropped} bytes of output left out …]\n{}",
            String::from_utf8_lossy(head),
            String::from_utf8_lossy(tail)
        )
    }
}

impl Capture {
    fn of(spawn: &Spawn) -> Capture {
        Capture {
            kept: Kept::default(),
            stdout: Kept::default(),
            total: 0,
            last: Instant::now(),
            quiet_floor: spawn.silence.as_ref().map(|s| s.quiet_floor()),
            quiet: Vec::new(),
        }
    }
}

async fn pump(
    mut from: impl AsyncRead + Unpin,
    cap: Arc<Mutex<Capture>>,
    max: usize,
    is_stdout: bool,
    lines: Option<LineTap>,
) {
    let mut split = Splitter {
        from: if is_stdout {
            Stream::Stdout
        } else {
            Stream::Stderr
        },
        line: Vec::new(),
        overlong: false,
    };
    let mut buf = [0u8; 8192];
    loop {
        match from.read(&mut buf).await {
            Ok(0) | Err(_) => {
                if let Some(tap) = &lines {
                    split.finish(tap);
                }
                return;
            }
            Ok(n) => {
                if let Some(tap) = &lines {
                    split.push(&buf[..n], tap);
                }
                let mut c = cap.lock().expect("the capture lock is never poisoned");
                c.total += n as u64;
                let now = Instant::now();
                let gap = now.duration_since(c.last);
                if c.quiet_floor.is_some_and(|floor| gap >= floor) {
                    c.quiet.push(gap);
                }
                c.last = now;
                c.kept.push(&buf[..n], max);
                if is_stdout {
                    c.stdout.push(&buf[..n], max);
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

static SUBREAPER: std::sync::Once = std::sync::Once::new();

/// Makes this process a child subreaper, once: a descendant orphaned by the death of its parent
/// (a double fork, `setsid … &`, `nohup … &`) is re-parented to us rather than to init, so
/// `sweep` can still find, kill and reap it. Every command that runs programs (the conductor,
/// `review`) comes through `run`, so this is done lazily, on the first program.
fn become_subreaper() {
    SUBREAPER.call_once(|| {
        // SAFETY: prctl(2) with PR_SET_CHILD_SUBREAPER only sets a flag on this process. It
        // cannot fail on Linux 3.4 and later; if it did, `sweep` would still kill what it saw.
        unsafe {
            libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1);
        }
    });
}

/// One process as `/proc/<pid>/stat` shows it.
#[derive(Debug, Clone, Copy)]
struct Proc {
    pid: i32,
    ppid: i32,
    pgid: i32,
    /// Start time in clock ticks since boot: with `pid`, names a process across pid reuse.
    start: u64,
    zombie: bool,
}

/// Every process visible in `/proc` now (those that vanish while being read are skipped).
fn procs() -> Vec<Proc> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let name = e.ok()?.file_name();
        let pid: i32 = name.to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        parse_stat(pid, &stat)
    })
    .collect()
}

/// Parses `/proc/<pid>/stat`: the command name is in parentheses and may hold anything, so the
/// fields are counted from the last `)`.
fn parse_stat(pid: i32, stat: &str) -> Option<Proc> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(Proc {
        pid,
        zombie: matches!(*f.first()?, "Z" | "X"),
        ppid: f.get(1)?.parse().ok()?,
        pgid: f.get(2)?.parse().ok()?,
        start: f.get(19)?.parse().ok()?,
    })
}

/// The running program (by leader pid) a process belongs to, if any: itself or its nearest
/// ancestor is a program's leader, a member of its group, or a descendant seen before.
fn owner(
    p: &Proc,
    by_pid: &BTreeMap<i32, Proc>,
    seen: &BTreeMap<(i32, u64), u32>,
    live: &BTreeSet<u32>,
) -> Option<u32> {
    let me = std::process::id() as i32;
    let mut cur = *p;
    // No chain is longer than the processes there are; the bound guards against a torn read.
    for _ in 0..=by_pid.len() {
        if live.contains(&(cur.pid as u32)) {
            return Some(cur.pid as u32);
        }
        if cur.pgid > 0 && live.contains(&(cur.pgid as u32)) {
            return Some(cur.pgid as u32);
        }
        if let Some(o) = seen.get(&(cur.pid, cur.start)) {
            return Some(*o);
        }
        if cur.ppid <= 1 || cur.ppid == me {
            return None;
        }
        cur = *by_pid.get(&cur.ppid)?;
    }
    None
}

/// Records every process that now descends from the program led by `leader` (called every
/// 100 ms while it runs), so that it stays attributed after its parents die.
fn observe(leader: u32, now: &[Proc]) {
    let by_pid: BTreeMap<i32, Proc> = now.iter().map(|p| (p.pid, *p)).collect();
    let live = LIVE.lock().map(|l| l.clone()).unwrap_or_default();
    let Ok(mut seen) = SEEN.lock() else { return };
    for p in now {
        if p.pid as u32 != leader && owner(p, &by_pid, &seen, &live) == Some(leader) {
            seen.insert((p.pid, p.start), leader);
        }
    }
}

fn signal(pid: i32, sig: i32) {
    // SAFETY: kill(2) has no memory-safety preconditions.
    unsafe {
        libc::kill(pid, sig);
    }
}

/// After the program led by `leader` has ended (and its group was killed), kills and reaps
/// what it left behind; returns how many processes it had to kill.
///
/// The attribution rule. A process is the program's when, at any 100 ms observation while the
/// program ran or now, its parent chain led to the program's leader, to a member of its
/// process group, or to a process already attributed to it. And because this process is a
/// child subreaper, an orphan is re-parented to it: a child of ours that no running program
/// owns and that is not in our own process group (where `git.rs`'s children run) is an escapee
/// too, whoever started it. All of these are killed (SIGKILL to the process, and to its group
/// when it leads one), again until none is left, and the zombies re-parented to us are reaped
/// by pid (never `waitpid(-1)`, which would steal tokio's and `std`'s children).
///
/// Limits: a descendant of another program still running (attributed to it, or in its group)
/// waits for that program's end. An orphan created and re-parented between two observations
/// is attributed to no one, so the first program to end after it appeared kills it. No
/// descendant can join our own process group (each program runs in its own session, and
/// setpgid(2) does not cross sessions). Left alone are processes that leave our tree by other
/// means (a service manager, `ssh localhost`, anything started by another user). If this process is killed with SIGKILL, escapees outlive
/// it (the programs' leaders do not: they have `PR_SET_PDEATHSIG`).
async fn sweep(leader: u32) -> usize {
    let me = std::process::id() as i32;
    // SAFETY: getpgrp(2) cannot fail and touches no memory.
    let our_group = unsafe { libc::getpgrp() };
    let mut killed: BTreeSet<(i32, u64)> = BTreeSet::new();
    let until = Instant::now() + Duration::from_secs(2);
    loop {
        // The processes and the running programs, read together under the lock `run` spawns
        // under: a program started in between is in both or in neither.
        let (now, mut live) = {
            let live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
            (procs(), live.clone())
        };
        let by_pid: BTreeMap<i32, Proc> = now.iter().map(|p| (p.pid, *p)).collect();
        // The leader was reaped: its pid means nothing now.
        live.remove(&leader);
        let seen = SEEN.lock().map(|s| s.clone()).unwrap_or_default();
        let mut left = 0;
        for p in &now {
            if p.pid == me || p.pid as u32 == leader {
                continue;
            }
            let ours = match owner(p, &by_pid, &seen, &live) {
                Some(o) => o == leader,
                None => p.pgid as u32 == leader || (p.ppid == me && p.pgid != our_group),
            };
            if !ours {
                continue;
            }
            left += 1;
            if p.zombie {
                if p.ppid == me {
                    // SAFETY: waitpid(2) on one pid with WNOHANG; that pid is our child and
                    // no `Child` owns it (it is in no running program's tree).
                    unsafe {
                        libc::waitpid(p.pid, std::ptr::null_mut(), libc::WNOHANG);
                    }
                }
                continue;
            }
            if p.pgid == p.pid && p.pgid != our_group {
                signal(-p.pgid, libc::SIGKILL);
            }
            signal(p.pid, libc::SIGKILL);
            killed.insert((p.pid, p.start));
        }
        if left == 0 || Instant::now() >= until {
            return killed.len();
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
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

/// For a contained program: its private temporary directory (named in its environment, with
/// the user's git configuration out of reach) and the Landlock ruleset `prepare` built.
/// With `Metadata::ReadOnlyMounts`, also the read-only view the child enters (`mounts`).
type Contained = (
    Option<tempfile::TempDir>,
    Option<std::os::fd::OwnedFd>,
    Option<super::mounts::Plan>,
);

fn contained(
    spawn: &Spawn,
    env: &mut Vec<(String, String)>,
    metadata: super::contain::Metadata,
) -> std::io::Result<Contained> {
    Ok(match &spawn.sandbox {
        None => (None, None, None),
        Some(sandbox) => {
            let tmp = tempfile::Builder::new()
                .prefix("atelier-contained-")
                .tempdir()?;
            env.retain(|(k, _)| {
                !matches!(k.as_str(), "TMPDIR" | "TMP" | "TEMP" | "GIT_CONFIG_GLOBAL")
            });
            for k in ["TMPDIR", "TMP", "TEMP"] {
                env.push((k.to_string(), tmp.path().display().to_string()));
            }
            // The user's own git configuration is out of reach, and git treats an unreadable
            // one as fatal: contained programs read none.
            env.push(("GIT_CONFIG_GLOBAL".into(), "/dev/null".into()));
            let path = env
                .iter()
                .find(|(k, _)| k == "PATH")
                .map(|(_, v)| v.as_str());
            let sandbox = sandbox.clone().write(tmp.path()).programs(
                &std::iter::once(spawn.program.clone())
                    .chain(spawn.args.iter().cloned())
                    .collect::<Vec<_>>(),
                path,
            );
            let fd = sandbox
                .prepare()
                .map_err(|e| std::io::Error::other(format!("{}: {e}", e.code())))?;
            let plan = match metadata {
                super::contain::Metadata::ReadOnlyMounts => Some(super::mounts::Plan::new(
                    sandbox.write.iter().map(|p| p.as_path()),
                    &spawn.cwd,
                )?),
                super::contain::Metadata::Refused => None,
            };
            (Some(tmp), Some(fd), plan)
        }
    })
}

/// Runs a program to completion or to a limit. `on_nudge` is called with the seconds of
/// silence each time the nudge threshold passes.
pub async fn run(spawn: &Spawn, mut on_nudge: impl FnMut(Duration)) -> std::io::Result<Outcome> {
    let started = Instant::now();
    let mut env = spawn.env.clone();
    // The private temporary directory and the ruleset live until the program has ended.
    let metadata = super::contain::metadata();
    let (_private_tmp, ruleset, view) = contained(spawn, &mut env, metadata)?;
    let ruleset_fd = ruleset.as_ref().map(super::contain::raw);
    let filter = (spawn.sandbox.as_ref())
        .map(|s| super::contain::seccomp(&s.network, metadata))
        .unwrap_or_default();
    let mut cmd = tokio::process::Command::new(&spawn.program);
    cmd.args(&spawn.args)
        .current_dir(&spawn.cwd)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    // SAFETY: setsid(2) and prctl(2) are async-signal-safe and touch no memory of the parent.
    // A new session (whose one group the child leads, as `process_group(0)` would make it):
    // setpgid(2) cannot cross sessions, so no descendant can join the conductor's own group,
    // which `sweep` leaves alone. The child's leader dies with the conductor, even when the
    // conductor is killed with SIGKILL.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            // SAFETY: between fork and exec, with what was made before (`mounts::enter`, `enforce`).
            if let Some(plan) = &view {
                super::mounts::enter(plan)?;
            }
            if let Some(fd) = ruleset_fd {
                super::contain::enforce(fd, &filter)?;
            }
            Ok(())
        });
    }
    become_subreaper();
    // Spawned and registered under the lock `sweep` reads under: another program's sweep must
    // never see this child (our direct child, in a group of its own) before it is known.
    let mut child = {
        let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
        let child = cmd.spawn()?;
        if let Some(p) = child.id() {
            live.insert(p);
        }
        child
    };
    let pid = child.id();
    let cap = Arc::new(Mutex::new(Capture::of(spawn)));
    let out = tokio::spawn(pump(
        child.stdout.take().expect("stdout is piped"),
        cap.clone(),
        spawn.max_output,
        true,
        spawn.lines.clone(),
    ));
    let err = tokio::spawn(pump(
        child.stderr.take().expect("stderr is piped"),
        cap.clone(),
        spawn.max_output,
        false,
        spawn.lines.clone(),
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
        if let Some(p) = pid {
            observe(p, &procs());
        }
        let now = Instant::now();
        if now >= deadline {
            outcome.timed_out = true;
            break None;
        }
        if let Some(s) = &spawn.silence {
            let last = cap.lock().expect("the capture lock is never poisoned").last;
            if let Some(live) = &s.live {
                *live.lock().unwrap_or_else(|e| e.into_inner()) = last;
            }
            if s.end.as_ref().is_some_and(|e| e.load(Ordering::Relaxed)) {
                outcome.ended = true;
                break None;
            }
            let silent = now.duration_since(last);
            if silent >= s.nudge_after && nudged_at.is_none_or(|t| t < last) {
                nudged_at = Some(now);
                outcome.nudges.push(silent);
                on_nudge(silent);
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
    let ended_at = Instant::now();
    if status.is_none() {
        kill_group(pid);
        let _ = child.wait().await;
    } else {
        // The worker is done; anything it left running in its group goes too.
        kill_group(pid);
    }
    if let Some(p) = pid {
        outcome.killed_escapees = sweep(p).await;
    }
    let _ = tokio::time::timeout(Duration::from_secs(2), out).await;
    let _ = tokio::time::timeout(Duration::from_secs(2), err).await;
    if let (Some(p), Ok(mut live)) = (pid, LIVE.lock()) {
        live.remove(&p);
    }
    if let (Some(p), Ok(mut seen)) = (pid, SEEN.lock()) {
        seen.retain(|_, owner| *owner != p);
    }
    let c = cap.lock().expect("the capture lock is never poisoned");
    if let Some(s) = &spawn.silence {
        outcome.quiet = quiet_periods(s, &c, ended_at, &outcome);
    }
    outcome.code = status.and_then(|s| s.code());
    outcome.output = c.kept.text(spawn.max_output);
    outcome.stdout = c.stdout.text(spawn.max_output);
    outcome.output_bytes = c.total;
    outcome.truncated = c.kept.dropped(spawn.max_output) > 0;
    outcome.elapsed = started.elapsed();
    if spawn.sandbox.is_some() && metadata == super::contain::Metadata::Refused {
        say_metadata_was_refused(&mut outcome);
    }
    Ok(outcome)
}

/// A failed program that ran with `Metadata::Refused` says why a chmod may have failed.
fn say_metadata_was_refused(outcome: &mut Outcome) {
    if !outcome.success() {
        outcome.output.push('\n');
        outcome.output.push_str(super::contain::REFUSED_NOTE);
        outcome.output.push('\n');
    }
}

/// The quiet periods of a program's run: each gap between outputs that reached the floor, and
/// the last one, which ran until the program ended (or was ended).
fn quiet_periods(s: &Silence, c: &Capture, ended_at: Instant, outcome: &Outcome) -> Vec<Quiet> {
    let quiet = |lasted: Duration, ended| Quiet {
        lasted,
        ended,
        nudged: lasted >= s.nudge_after,
    };
    let mut periods: Vec<Quiet> = c
        .quiet
        .iter()
        .map(|g| quiet(*g, QuietEnd::Output))
        .collect();
    // The last quiet period ran until the program ended (or was ended).
    let last = ended_at.saturating_duration_since(c.last);
    let ended = if outcome.silenced {
        QuietEnd::Restart
    } else if outcome.timed_out {
        QuietEnd::Timeout
    } else {
        QuietEnd::Exit
    };
    if last >= s.quiet_floor() || ended == QuietEnd::Restart {
        periods.push(quiet(last, ended));
    }
    periods
}

/// Runs a program the operator named, not an agent: uncontained, with this process's
/// environment plus `env`, in `cwd`, to its end. `atelier bench replay --baseline REV` builds
/// another revision of atelier with it and has that build run missions (its README says to
/// name only a revision you trust). With `capture`, stdout is returned; otherwise it goes to
/// this process's stderr (stdout may be `--json`). stderr is returned either way.
pub fn operator_command(
    program: &std::ffi::OsStr,
    args: &[std::ffi::OsString],
    cwd: &std::path::Path,
    env: &[(String, std::ffi::OsString)],
    capture: bool,
) -> std::io::Result<std::process::Output> {
    let mut c = std::process::Command::new(program);
    c.args(args).current_dir(cwd);
    for (k, v) in env {
        c.env(k, v);
    }
    if capture {
        c.output()
    } else {
        c.stdout(std::process::Stdio::from(std::io::stderr()));
        c.stderr(std::process::Stdio::inherit());
        let status = c.status()?;
        Ok(std::process::Output {
            status,
            stdout: Vec::new(),
            stderr: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pids whose command line contains `marker`, and those command lines.
    fn carrying(marker: &str) -> Vec<(i32, String)> {
        let me = std::process::id() as i32;
        procs()
            .into_iter()
            .filter(|p| p.pid != me)
            .filter_map(|p| {
                let raw = std::fs::read(format!("/proc/{}/cmdline", p.pid)).ok()?;
                let line = String::from_utf8_lossy(&raw).replace('\0', " ");
                line.contains(marker).then_some((p.pid, line))
            })
            .collect()
    }

    /// Kills whatever still carries its marker when the test ends, whether it passed or not;
    /// holds `SERIAL` meanwhile, since an orphan nobody owns is killed by whichever program
    /// ends first, and these tests count what each program's end killed.
    struct Cleanup(
        &'static str,
        #[allow(dead_code)] std::sync::MutexGuard<'static, ()>,
    );

    static SERIAL: Mutex<()> = Mutex::new(());

    fn cleanup(marker: &'static str) -> Cleanup {
        Cleanup(marker, SERIAL.lock().unwrap_or_else(|e| e.into_inner()))
    }

    impl Drop for Cleanup {
        fn drop(&mut self) {
            for (pid, _) in carrying(self.0) {
                signal(pid, libc::SIGKILL);
            }
        }
    }

    /// What still carries `marker` after a short grace (the kill is asynchronous).
    fn left_after_a_moment(marker: &str) -> Vec<String> {
        let until = Instant::now() + Duration::from_secs(2);
        loop {
            let left = carrying(marker);
            if left.is_empty() || Instant::now() >= until {
                return left.into_iter().map(|(_, l)| l).collect();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn sh(script: &str, timeout: Duration) -> Spawn {
        Spawn {
            lines: None,
            program: "/bin/sh".into(),
            args: vec!["-c".into(), script.into()],
            cwd: std::env::temp_dir(),
            env: scrubbed_env(&[], &[]),
            stdin: Vec::new(),
            timeout,
            silence: None,
            max_output: 4096,
            sandbox: None,
        }
    }

    fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime")
            .block_on(f)
    }

    /// A contained shell in `dir` (which it may write), with `network`.
    fn contained(dir: &std::path::Path, script: &str, network: crate::config::Network) -> Outcome {
        let mut spawn = sh(script, Duration::from_secs(10));
        spawn.cwd = dir.to_path_buf();
        spawn.sandbox = Some(super::super::contain::Sandbox::new(network).write(dir));
        block_on(run(&spawn, |_| {})).expect("ran")
    }

    /// Metadata: modes, owners and times change inside what the program may write (a linker
    /// chmods what it links) and nowhere else, by path, descriptor or `/proc/self/fd` link; it
    /// keeps no capability and cannot mount.
    #[test]
    fn a_contained_program_changes_metadata_only_where_it_may_write() {
        if super::super::contain::abi() < super::super::contain::NET_ABI {
            eprintln!("skipped: no Landlock ABI 4 on this kernel");
            return;
        }
        if super::super::contain::metadata() != super::super::contain::Metadata::ReadOnlyMounts {
            eprintln!("skipped: no user namespaces here (the fallback is tested below)");
            return;
        }
        use std::os::unix::fs::PermissionsExt;
        let outside = tempfile::tempdir().expect("tempdir");
        let secret = outside.path().join("secret");
        std::fs::write(&secret, "key").expect("write");
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        let work = tempfile::tempdir().expect("tempdir");
        let o = contained(
            work.path(),
            &format!(
                "echo x > f && chmod 755 f && touch -d 2001-01-01 f && cp f \"$TMPDIR/g\" && \
                 chmod 700 \"$TMPDIR/g\" && echo inside; \
                 chmod 644 {s} && echo CHMOD; touch -d 2001-01-01 {s} && echo TOUCHED; \
                 python3 -c 'import os; fd = os.open(\"{s}\", os.O_PATH); os.chmod(\"/proc/self/fd/%d\" % fd, 0o644)' && echo FDLINK; \
                 mkdir m && mount -t tmpfs x m && echo MOUNTED; unshare -Ur true && echo UNSHARED; \
                 grep -E '^Cap(Eff|Prm|Inh|Amb|Bnd):' /proc/self/status",
                s = secret.display(),
            ),
            crate::config::Network::None,
        );
        assert!(o.output.contains("inside"), "{}", o.output);
        for escaped in ["CHMOD", "TOUCHED", "FDLINK", "MOUNTED", "UNSHARED"] {
            assert!(!o.output.contains(escaped), "{escaped}: {}", o.output);
        }
        for line in o.output.lines().filter(|l| l.starts_with("Cap")) {
            assert!(line.ends_with("0000000000000000"), "{line}");
        }
        let m = std::fs::metadata(&secret).expect("stat");
        assert_eq!(m.permissions().mode() & 0o777, 0o600);
        let f = std::fs::metadata(work.path().join("f")).expect("stat");
        assert_eq!(f.permissions().mode() & 0o777, 0o755);
    }

    /// Where no user namespace can be made, the seccomp filter refuses every metadata call,
    /// inside the writable paths too; with read-only mounts it refuses none.
    #[test]
    fn without_user_namespaces_every_metadata_change_is_refused() {
        use std::os::unix::process::CommandExt;
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("f"), "x").expect("write");
        let changes = |metadata| {
            let filter = super::super::contain::seccomp(&crate::config::Network::None, metadata);
            let mut cmd = std::process::Command::new("/bin/sh");
            cmd.args([
                "-c",
                "chmod 700 f && echo chmod; touch -d 2001-01-01 f && echo touch; \
                 python3 -c 'import os; os.setxattr(\"f\", \"user.x\", b\"1\")' && echo xattr",
            ])
            .current_dir(dir.path());
            // SAFETY: prctl(2) only, between fork and exec, on a filter made before.
            unsafe {
                cmd.pre_exec(move || {
                    libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
                    let prog = libc::sock_fprog {
                        len: filter.len() as u16,
                        filter: filter.as_ptr() as *mut libc::sock_filter,
                    };
                    if libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER, &prog) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
            String::from_utf8_lossy(&cmd.output().expect("sh").stdout).into_owned()
        };
        let refused = changes(super::super::contain::Metadata::Refused);
        assert_eq!(refused, "", "{refused}");
        let mounts = changes(super::super::contain::Metadata::ReadOnlyMounts);
        assert!(mounts.contains("chmod\ntouch\n"), "{mounts}");
    }

    #[test]
    fn a_contained_program_writes_its_directory_and_temp_and_nothing_else() {
        if super::super::contain::abi() < super::super::contain::NET_ABI {
            eprintln!("skipped: no Landlock ABI 4 on this kernel");
            return;
        }
        let outside = tempfile::tempdir().expect("tempdir");
        let secret = outside.path().join("secret");
        std::fs::write(&secret, "key").expect("write");
        let work = tempfile::tempdir().expect("tempdir");
        let o = contained(
            work.path(),
            &format!(
                "echo ok > here && echo ok > \"$TMPDIR/t\" && echo written; \
                 cat {s} && echo READ; echo x > {o}/new && echo WROTE; \
                 echo x >> {s} && echo APPENDED; : > /dev/null && echo devnull",
                s = secret.display(),
                o = outside.path().display()
            ),
            crate::config::Network::None,
        );
        assert!(o.output.contains("written"), "{}", o.output);
        assert!(o.output.contains("devnull"), "{}", o.output);
        for escaped in ["READ", "WROTE", "APPENDED"] {
            assert!(!o.output.contains(escaped), "{escaped}: {}", o.output);
        }
        assert_eq!(std::fs::read_to_string(&secret).expect("read"), "key");
        assert!(!outside.path().join("new").exists());
        assert!(work.path().join("here").exists());
    }

    #[test]
    fn a_contained_program_reaches_only_the_ports_it_is_given() {
        if super::super::contain::abi() < super::super::contain::NET_ABI {
            eprintln!("skipped: no Landlock ABI 4 on this kernel");
            return;
        }
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let work = tempfile::tempdir().expect("tempdir");
        // bash's /dev/tcp connects without any other tool.
        let script = format!(
            "exec bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port} && echo CONNECTED || echo refused'"
        );
        let none = contained(work.path(), &script, crate::config::Network::None);
        assert!(!none.output.contains("CONNECTED"), "{}", none.output);
        assert!(none.output.contains("refused"), "{}", none.output);
        let other = contained(
            work.path(),
            &script,
            crate::config::Network::Ports(vec![port.wrapping_add(1).max(1)]),
        );
        assert!(!other.output.contains("CONNECTED"), "{}", other.output);
        let open = contained(
            work.path(),
            &script,
            crate::config::Network::Ports(vec![port]),
        );
        assert!(open.output.contains("CONNECTED"), "{}", open.output);
        let any = contained(work.path(), &script, crate::config::Network::Any);
        assert!(any.output.contains("CONNECTED"), "{}", any.output);
    }

    /// The three ways out of a process group: a new session, a double fork (here into a new
    /// session, so only the subreaper finds it), and `nohup … &`.
    const ESCAPES: &str = "setsid sleep 313.11 & (setsid sh -c 'sleep 313.12 &' &); \
        nohup sleep 313.13 >/dev/null 2>&1 &";

    #[test]
    fn what_a_program_leaves_running_dies_when_it_exits() {
        let _c = cleanup("sleep 313.1");
        // Exiting before the first observation (100 ms): the escapees are found as orphans
        // re-parented to us. (How many escaped before the group kill varies.)
        let script = format!("{ESCAPES}\nsleep 0.05");
        let o = block_on(run(&sh(&script, Duration::from_secs(10)), |_| {})).expect("run");
        assert!(o.success(), "{o:?}");
        assert_eq!(left_after_a_moment("sleep 313.1"), Vec::<String>::new());
    }

    #[test]
    fn what_a_program_leaves_running_dies_after_it_was_observed() {
        let _c = cleanup("sleep 313.2");
        // Lingering: the escapees are observed as descendants first.
        let script = format!("{}\nsleep 0.4", ESCAPES.replace("313.1", "313.2"));
        let o = block_on(run(&sh(&script, Duration::from_secs(10)), |_| {})).expect("run");
        assert!(o.success(), "{o:?}");
        assert!(o.killed_escapees >= 2, "{o:?}");
        assert_eq!(left_after_a_moment("sleep 313.2"), Vec::<String>::new());
    }

    #[test]
    fn what_a_timed_out_program_left_running_dies_with_it() {
        let _c = cleanup("sleep 313.3");
        let script = format!("{}\nsleep 30", ESCAPES.replace("313.1", "313.3"));
        let o = block_on(run(&sh(&script, Duration::from_millis(500)), |_| {})).expect("run");
        assert!(o.timed_out, "{o:?}");
        assert_eq!(left_after_a_moment("sleep 313.3"), Vec::<String>::new());
    }

    #[test]
    fn a_running_programs_escapee_outlives_another_programs_end_but_not_its_own() {
        let _c = cleanup("sleep 313.41");
        let long = sh("setsid sleep 313.41 & sleep 1", Duration::from_secs(10));
        let short = sh("sleep 0.3", Duration::from_secs(10));
        block_on(async {
            let long = tokio::spawn(async move { run(&long, |_| {}).await });
            let o = run(&short, |_| {}).await.expect("run");
            assert_eq!(o.killed_escapees, 0, "{o:?}");
            assert!(
                carrying("sleep 313.41")
                    .iter()
                    .any(|(_, l)| l.starts_with("sleep")),
                "the long program's escapee is its own until it ends"
            );
            let o = long.await.expect("join").expect("run");
            assert_eq!(o.killed_escapees, 1, "{o:?}");
        });
        assert_eq!(left_after_a_moment("sleep 313.41"), Vec::<String>::new());
    }

    /// A descendant's own process group, read from `/proc` (for `perl`, which has no `getpgid`).
    const CONDUCTOR_GROUP: &str = "open my $f, \"<\", \"/proc/\".getppid().\"/stat\"; \
        my @f = split / /, (split /\\) /, <$f>)[-1]; my $g = getpgrp($f[1]);";

    #[test]
    fn a_descendant_cannot_hide_in_the_conductors_process_group() {
        let _c = cleanup("sleep 313.51");
        // Before the first observation, a child of the program's leader joins the conductor's
        // own process group (where `git.rs`'s children run) and orphans itself.
        let script = format!(
            "perl -e '{CONDUCTOR_GROUP} setpgrp(0, $g) or exit 0; exit if fork; \
             exec \"sleep\", \"313.51\"'\nsleep 0.3"
        );
        let o = block_on(run(&sh(&script, Duration::from_secs(10)), |_| {})).expect("run");
        assert!(o.success(), "{o:?}");
        assert_eq!(left_after_a_moment("sleep 313.51"), Vec::<String>::new());
    }

    /// A process that forks and exits in a loop (bounded to 5 s, so a failing test cleans up
    /// after itself), a new pid every few microseconds; with `new_session`, each in a new
    /// session too.
    fn hopper(marker: &str, new_session: bool) -> String {
        let setsid = if new_session { "POSIX::setsid();" } else { "" };
        format!(
            "perl -MPOSIX -e '$0 = \"hopper {marker}\"; POSIX::setsid(); my $end = time + 5; \
             while (time < $end) {{ exit 0 if fork; {setsid} }}' &\nsleep 0.05"
        )
    }

    #[test]
    fn a_process_that_forks_and_exits_in_a_loop_does_not_outlive_its_program() {
        let _c = cleanup("hopper 313.61");
        let o = block_on(run(
            &sh(&hopper("313.61", false), Duration::from_secs(10)),
            |_| {},
        ))
        .expect("run");
        assert!(o.success(), "{o:?}");
        assert_eq!(left_after_a_moment("hopper 313.61"), Vec::<String>::new());
    }

    #[test]
    fn a_process_that_forks_into_new_sessions_in_a_loop_does_not_outlive_its_program() {
        let _c = cleanup("hopper 313.62");
        let o = block_on(run(
            &sh(&hopper("313.62", true), Duration::from_secs(10)),
            |_| {},
        ))
        .expect("run");
        assert!(o.success(), "{o:?}");
        assert_eq!(left_after_a_moment("hopper 313.62"), Vec::<String>::new());
    }

    #[test]
    fn a_program_starting_while_another_ends_is_not_taken_for_an_escapee() {
        let _c = cleanup("hopper 313.63");
        // A long sweep (the hopper keeps it busy) while other programs start: one that has been
        // forked but is not yet in `LIVE` looks like an orphan re-parented to us.
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime");
        rt.block_on(async {
            let long = sh(&hopper("313.63", true), Duration::from_secs(10));
            let sweeping = tokio::spawn(async move { run(&long, |_| {}).await });
            tokio::time::sleep(Duration::from_millis(60)).await;
            let mut short = Vec::new();
            for _ in 0..40 {
                let s = sh("exit 0", Duration::from_secs(10));
                short.push(tokio::spawn(async move { run(&s, |_| {}).await }));
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            for (i, s) in short.into_iter().enumerate() {
                let o = s.await.expect("join").expect("run");
                assert!(o.success(), "program {i} was killed: {o:?}");
            }
            let _ = sweeping.await;
        });
    }

    #[test]
    fn a_command_name_with_parentheses_and_spaces_parses() {
        let stat = "42 (a) b) (c) S 7 42 42 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 9876 0";
        let p = parse_stat(42, stat).expect("parses");
        assert_eq!((p.ppid, p.pgid, p.start, p.zombie), (7, 42, 9876, false));
    }

    #[test]
    fn a_long_output_keeps_its_first_and_last_bytes_and_says_how_many_it_left_out() {
        let mut k = Kept::default();
        k.push(b"short\n", 20);
        assert_eq!((k.text(20), k.dropped(20)), ("short\n".to_string(), 0));

        let mut k = Kept::default();
        for i in 0..100 {
            k.push(format!("line {i:03}\n").as_bytes(), 40);
        }
        let text = k.text(40);
        assert!(
            text.starts_with("line 000\nline 001\n[… 864 bytes"),
            "{text}"
        );
        assert!(text.ends_with("line 098\nline 099\n"), "{text}");
        assert!(text.contains("bytes of output left out"), "{text}");
        assert_eq!(
            k.dropped(40),
            900 - 40,
            "the bytes outside the head and the tail"
        );
        // Whole lines on each side of the cut: a value split by it is not kept in part.
        let mut k = Kept::default();
        k.push(b"ok\nsk-0123456789abcdef-secret\n", 16);
        for _ in 0..4 {
            k.push(b"padding padding\n", 16);
        }
        assert!(!k.text(16).contains("sk-0"), "{}", k.text(16));
        let tail = text.rsplit("left out …]\n").next().expect("tail");
        assert!(tail.starts_with("line "), "{tail}");
    }
}
