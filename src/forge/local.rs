//! The local forge: pull requests as JSON files under `.atelier/forge/pulls/`, one per pull,
//! written atomically. It needs no network; it is per clone, like a server's database, while the
//! ledger (refs/atelier/ledger) and the merge commits carry the record that travels.

use std::path::PathBuf;

use super::{Comment, Forge, ForgeError, PullRequest, PullState};
use crate::fsutil::atomic_write;
use crate::governance::time::Timestamp;

pub struct LocalForge {
    dir: PathBuf,
}

impl LocalForge {
    pub fn new(atelier_dir: PathBuf) -> LocalForge {
        LocalForge {
            dir: atelier_dir.join("forge").join("pulls"),
        }
    }

    fn path(&self, number: u64) -> PathBuf {
        self.dir.join(format!("{number}.json"))
    }

    fn save(&self, pull: &PullRequest) -> Result<(), ForgeError> {
        let json = serde_json::to_vec_pretty(pull).expect("a pull request always serializes");
        atomic_write(&self.path(pull.number), &json)?;
        Ok(())
    }
}

impl Forge for LocalForge {
    fn next_number(&self) -> Result<u64, ForgeError> {
        Ok(self.list()?.iter().map(|p| p.number).max().unwrap_or(0) + 1)
    }

    fn create(&self, pull: &PullRequest) -> Result<(), ForgeError> {
        if self.path(pull.number).exists() {
            return Err(ForgeError::Corrupt {
                path: self.path(pull.number).display().to_string(),
                reason: "already exists; pull request numbers are never reused".into(),
            });
        }
        self.save(pull)
    }

    fn get(&self, number: u64) -> Result<PullRequest, ForgeError> {
        let path = self.path(number);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(ForgeError::NoSuchPull(number.to_string()))
            }
            Err(e) => {
                return Err(ForgeError::Corrupt {
                    path: path.display().to_string(),
                    reason: e.to_string(),
                })
            }
        };
        serde_json::from_slice(&bytes).map_err(|e| ForgeError::Corrupt {
            path: path.display().to_string(),
            reason: e.to_string(),
        })
    }

    fn list(&self) -> Result<Vec<PullRequest>, ForgeError> {
        let mut out = Vec::new();
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
            Err(e) => {
                return Err(ForgeError::Corrupt {
                    path: self.dir.display().to_string(),
                    reason: e.to_string(),
                })
            }
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(n) = name
                .strip_suffix(".json")
                .and_then(|n| n.parse::<u64>().ok())
            {
                out.push(self.get(n)?);
            }
        }
        out.sort_by_key(|p| p.number);
        Ok(out)
    }

    fn comment(
        &self,
        number: u64,
        author: &str,
        body: &str,
        at: Timestamp,
    ) -> Result<Comment, ForgeError> {
        let mut pull = self.get(number)?;
        let comment = Comment {
            id: pull.comments.iter().map(|c| c.id).max().unwrap_or(0) + 1,
            author: author.to_string(),
            body: body.to_string(),
            at,
        };
        pull.comments.push(comment.clone());
        self.save(&pull)?;
        Ok(comment)
    }

    fn set_state(
        &self,
        number: u64,
        state: PullState,
        merge_commit: Option<String>,
        reason: Option<String>,
    ) -> Result<(), ForgeError> {
        let mut pull = self.get(number)?;
        pull.state = state;
        pull.merge_commit = merge_commit;
        pull.closed_reason = reason;
        self.save(&pull)
    }
}
