//! The agent CLIs the presets name, as their registries ship them: `.ci/run` installs pinned
//! versions into `ATELIER_CLI_DIR` (default `~/.cache/atelier-clis`): Claude Code and Codex
//! with npm under `npm/`, Aider in a virtualenv under `aider-venv/`; and beside them the
//! independent verifiers of our formats, `sshsig` (PyPI) in `verifiers-venv/`. A test that
//! needs one and does not find it skips, saying why (a failure under `ATELIER_TEST_STRICT=1`).

use std::path::PathBuf;

/// Where `.ci/run` installs the CLIs.
pub fn dir() -> PathBuf {
    match std::env::var_os("ATELIER_CLI_DIR") {
        Some(d) => PathBuf::from(d),
        None => {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/atelier-clis")
        }
    }
}

/// The folder holding the `name` CLI's program (to put first on a test's PATH), if installed.
pub fn bin_dir(name: &str) -> Option<PathBuf> {
    let d = dir();
    let bin = match name {
        "claude" | "codex" => d.join("npm/bin"),
        "aider" => d.join("aider-venv/bin"),
        // A package, not a program: the folder of the interpreter that imports it.
        "sshsig" => {
            let bin = d.join("verifiers-venv/bin");
            let imports = std::process::Command::new(bin.join("python3"))
                .args(["-c", "import sshsig"])
                .output()
                .is_ok_and(|o| o.status.success());
            return imports.then_some(bin);
        }
        _ => return None,
    };
    bin.join(name).is_file().then_some(bin)
}

/// Skips the test (see `skip!`) unless the `name` CLI is installed; else its bin folder.
#[allow(unused_macros)]
macro_rules! require_cli {
    ($name:expr) => {
        match $crate::support::clis::bin_dir($name) {
            Some(d) => d,
            None => $crate::support::skip::skip!(
                "the {} CLI is not installed under {} (.ci/run installs it)",
                $name,
                $crate::support::clis::dir().display()
            ),
        }
    };
}
#[allow(unused_imports)]
pub(crate) use require_cli;
