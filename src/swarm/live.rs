//! What a running conductor publishes for the people watching it: each running worker's
//! silence (the time since its last output), rewritten about once a second to
//! `.atelier/runs/<run>/live.json`. Display only: the conductor never reads it back, nothing is
//! decided from it (the nudge and the restart are measured inside the conductor), and it is
//! removed when the conductor stops. `run`'s live view, `atelier watch` (plain and the cockpit)
//! and the dashboard show "silent for" from it while it is fresh; a stale or missing one means
//! no conductor is reporting (the run ended, was interrupted, or its conductor is stuck).
//!
//! The events record a silence when it ends (`quiet`, `nudged`, `restarted`); this file is the
//! only place a silence shows while it lasts.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::agent::process::{EndFlag, LastOutput};

/// The file in the run's directory.
pub const FILE: &str = "live.json";

/// How often the conductor rewrites it.
pub const EVERY_MS: u64 = 1_000;

/// A status older than this is not shown: no conductor is reporting.
pub const STALE_MS: u64 = 5_000;

/// The most bytes read back (a run of thousands of parallel tasks stays far below).
const MAX_BYTES: u64 = 1024 * 1024;

/// One running worker, as the conductor saw it when it wrote the file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attempt {
    pub task: String,
    pub attempt: u32,
    /// Milliseconds since its last output (or its start), when the file was written.
    pub silent_ms: u64,
}

/// The whole file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    /// The conductor's process.
    pub pid: u32,
    /// When it was written (milliseconds since the Unix epoch).
    pub written_ms: u64,
    pub attempts: Vec<Attempt>,
}

impl Status {
    /// Whether it was written within [`STALE_MS`] of `now_ms`, either way: a clock a little
    /// behind the writer's counts as fresh, a status from far in the future (a clock set back
    /// after its conductor died, or a file someone else wrote) does not.
    pub fn fresh(&self, now_ms: u64) -> bool {
        now_ms.abs_diff(self.written_ms) <= STALE_MS
    }

    /// How long the worker of `task`'s `attempt` has been silent at `now_ms`: what the
    /// conductor saw, plus the time since; `None` when the status is stale or that attempt has
    /// no running worker watched for silence (an HTTP worker, a task between its worker and its
    /// gauntlet, or another attempt: the one a restart just ended).
    pub fn silent_ms(&self, task: &str, attempt: u32, now_ms: u64) -> Option<u64> {
        if !self.fresh(now_ms) {
            return None;
        }
        let since = now_ms.saturating_sub(self.written_ms);
        self.attempts
            .iter()
            .find(|a| a.task == task && a.attempt == attempt)
            .map(|a| a.silent_ms.saturating_add(since))
    }
}

/// Milliseconds since the Unix epoch, now (the live status is about this machine's present,
/// not the run's recorded clock).
pub fn now_ms() -> u64 {
    crate::clock::wall_millis()
}

/// `12s`, `3m05s`, `1h02m`: a silence as a person reads it.
pub fn human(ms: u64) -> String {
    let s = ms / 1000;
    if s < 60 {
        format!("{s}s")
    } else if s < 3600 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    }
}

/// The running workers' last-output clocks, and the flags that end them, shared by the
/// conductor and its attempts.
#[derive(Clone, Default)]
pub struct Board(Arc<Mutex<Seats>>);

/// Each worker on the board, by task and attempt: its last-output clock and its end flag.
type Seats = BTreeMap<(String, u32), (LastOutput, EndFlag)>;

/// A worker on the board; it leaves the board when dropped (its attempt is over).
pub struct OnBoard {
    board: Board,
    key: (String, u32),
    pub last: LastOutput,
    /// Set by [`Board::end`]: the worker is to be ended now.
    pub end: EndFlag,
}

impl Drop for OnBoard {
    fn drop(&mut self) {
        self.board
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.key);
    }
}

impl Board {
    /// Puts a worker starting now on the board.
    pub fn enter(&self, task: &str, attempt: u32) -> OnBoard {
        let last: LastOutput = crate::agent::process::last_output();
        let end = EndFlag::default();
        let key = (task.to_string(), attempt);
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key.clone(), (last.clone(), end.clone()));
        OnBoard {
            board: self.clone(),
            key,
            last,
            end,
        }
    }

    /// Ends every worker on the board.
    pub fn end_all(&self) {
        let board = self.0.lock().unwrap_or_else(|e| e.into_inner());
        for (_, end) in board.values() {
            end.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Ends `task`'s worker if one is on the board; whether one was.
    pub fn end(&self, task: &str) -> bool {
        let board = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let mut any = false;
        for ((t, _), (_, end)) in board.iter() {
            if t == task {
                end.store(true, std::sync::atomic::Ordering::Relaxed);
                any = true;
            }
        }
        any
    }

    /// The status now, as `pid` writes it.
    pub fn status(&self, pid: u32) -> Status {
        let attempts = self
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|((task, attempt), (last, _))| Attempt {
                task: task.clone(),
                attempt: *attempt,
                silent_ms: crate::agent::process::silent_for(last).as_millis() as u64,
            })
            .collect();
        Status {
            pid,
            written_ms: now_ms(),
            attempts,
        }
    }
}

/// The temporary file it is written to before the rename.
const TMP: &str = "live.json.tmp";

/// Writes the status into the run's directory `dir`: a new temporary file renamed over the old
/// one, so a reader sees a whole file. The temporary file is made afresh (`O_EXCL`): whatever a
/// worker left at its name (a link to a file elsewhere) is removed, never written through.
/// Not fsynced: it is rewritten every second and recorded nowhere; after a crash it is stale,
/// which readers see.
pub fn write(dir: &Path, status: &Status) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = dir.join(TMP);
    let bytes = serde_json::to_vec(status).map_err(std::io::Error::other)?;
    let _ = std::fs::remove_file(&tmp);
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .and_then(|mut f| f.write_all(&bytes))
        .and_then(|()| std::fs::rename(&tmp, dir.join(FILE)));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Removes it, and its temporary file (the conductor stopped).
pub fn remove(dir: &Path) {
    let _ = std::fs::remove_file(dir.join(FILE));
    let _ = std::fs::remove_file(dir.join(TMP));
}

/// Reads the run directory's status: `None` when there is none, or it is not a small regular
/// file (a link, a FIFO) or not a status. Readers show nothing live then.
pub fn read(dir: &Path) -> Option<Status> {
    let bytes = crate::fsutil::read_small_file(&dir.join(FILE), MAX_BYTES)?;
    serde_json::from_slice(&bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(written_ms: u64) -> Status {
        Status {
            pid: 1,
            written_ms,
            attempts: vec![Attempt {
                task: "p:A".into(),
                attempt: 2,
                silent_ms: 4_000,
            }],
        }
    }

    #[test]
    fn a_silence_grows_from_what_the_conductor_saw_until_the_status_is_stale() {
        let s = status(100_000);
        assert_eq!(s.silent_ms("p:A", 2, 100_000), Some(4_000));
        assert_eq!(s.silent_ms("p:A", 2, 103_500), Some(7_500));
        assert_eq!(
            s.silent_ms("p:A", 2, 100_000 + STALE_MS),
            Some(4_000 + STALE_MS)
        );
        assert_eq!(s.silent_ms("p:A", 2, 100_001 + STALE_MS), None, "stale");
        assert_eq!(s.silent_ms("p:B", 2, 100_000), None, "not running");
        assert_eq!(s.silent_ms("p:A", 3, 100_000), None, "another attempt");
        // A reader whose clock is behind the writer's sees what the conductor saw.
        assert_eq!(s.silent_ms("p:A", 2, 99_000), Some(4_000));
        // Whatever the file says, reading it never overflows.
        let mut odd = status(u64::MAX);
        odd.attempts[0].silent_ms = u64::MAX;
        assert_eq!(odd.silent_ms("p:A", 2, u64::MAX), Some(u64::MAX));
        assert_eq!(human(u64::MAX), "5124095576030h25m");
    }

    #[test]
    fn silences_read_as_people_write_them() {
        for (ms, want) in [
            (0, "0s"),
            (59_999, "59s"),
            (60_000, "1m00s"),
            (185_000, "3m05s"),
            (3_720_000, "1h02m"),
        ] {
            assert_eq!(human(ms), want);
        }
    }

    #[test]
    fn the_board_reports_each_running_worker_until_its_attempt_ends() {
        let board = Board::default();
        let a = board.enter("p:A", 1);
        let started = *a.last.lock().unwrap();
        *a.last.lock().unwrap() = started - std::time::Duration::from_secs(3);
        let b = board.enter("p:B", 2);
        let s = board.status(7);
        assert_eq!(s.pid, 7);
        let found: Vec<(&str, u32, bool)> = s
            .attempts
            .iter()
            .map(|x| (x.task.as_str(), x.attempt, x.silent_ms >= 3_000))
            .collect();
        assert_eq!(found, [("p:A", 1, true), ("p:B", 2, false)]);
        drop(a);
        drop(b);
        assert!(board.status(7).attempts.is_empty());
    }

    #[test]
    fn a_link_left_at_the_temporary_file_is_not_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        std::os::unix::fs::symlink(&victim, dir.path().join("live.json.tmp")).unwrap();
        write(dir.path(), &status(5)).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert_eq!(
            read(dir.path()),
            Some(status(5)),
            "a regular file, not a link"
        );
    }

    #[test]
    fn a_failed_write_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        // Something that cannot be renamed over: a directory that is not empty.
        std::fs::create_dir_all(dir.path().join(FILE).join("x")).unwrap();
        assert!(write(dir.path(), &status(5)).is_err());
        assert!(!dir.path().join("live.json.tmp").exists());
        remove(dir.path());
        assert!(!dir.path().join("live.json.tmp").exists());
    }

    #[test]
    fn a_status_written_in_the_future_is_not_fresh() {
        // A clock set back after a conductor died (or a file a worker wrote) claims nothing.
        let s = status(100_000 + 3_600_000);
        assert!(!s.fresh(100_000));
        assert_eq!(s.silent_ms("p:A", 2, 100_000), None);
        // A little ahead is still fresh.
        assert!(status(101_000).fresh(100_000));
    }

    #[test]
    fn only_a_small_regular_file_is_read_back() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()), None);
        let s = status(5);
        write(dir.path(), &s).unwrap();
        assert_eq!(read(dir.path()), Some(s.clone()));
        remove(dir.path());
        // A link to a status elsewhere is not followed; a FIFO does not block the reader.
        let other = tempfile::tempdir().unwrap();
        write(other.path(), &s).unwrap();
        std::os::unix::fs::symlink(other.path().join(FILE), dir.path().join(FILE)).unwrap();
        assert_eq!(read(dir.path()), None);
        std::fs::remove_file(dir.path().join(FILE)).unwrap();
        let fifo = std::ffi::CString::new(dir.path().join(FILE).to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        assert_eq!(read(dir.path()), None);
        std::fs::remove_file(dir.path().join(FILE)).unwrap();
        std::fs::write(dir.path().join(FILE), "not json").unwrap();
        assert_eq!(read(dir.path()), None);
    }
}
