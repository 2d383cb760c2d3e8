//! Where a run keeps its files: `.atelier/runs/<run>/` (its kept plans, `events.jsonl`, the
//! operators' `control/` requests, `live.json`, its attempts' worktrees under `wt/`).
//!
//! Pure: paths from paths. Lower layers that read a run's files (the review of a run's
//! proposal in `workflow`, the validators in `improve`) find them here, not in the runtime.

use std::path::{Path, PathBuf};

/// The directory of every run, under the clone's `.atelier/` directory.
pub fn runs_dir(atelier_dir: &Path) -> PathBuf {
    atelier_dir.join("runs")
}

/// The run's directory, under the clone's `.atelier/` directory.
pub fn run_dir(atelier_dir: &Path, run: &str) -> PathBuf {
    runs_dir(atelier_dir).join(run)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_lives_under_atelier_runs() {
        let dir = run_dir(Path::new("/repo/.atelier"), "r3");
        assert_eq!(dir, Path::new("/repo/.atelier/runs/r3"));
        assert_eq!(
            dir.parent(),
            Some(runs_dir(Path::new("/repo/.atelier")).as_path())
        );
    }
}
