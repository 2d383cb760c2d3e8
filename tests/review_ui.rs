//! A security review of `atelier ui` and plain-diff proposals: each test is
//! an attack that worked when it was written (failing first).

use crate::support::Env;
use crate::ui::{raw, serve_with as serve};

fn get(base: &str, path: &str, host: &str) -> (String, String) {
    raw(
        base,
        &format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"),
    )
}

/// DNS rebinding: `--allow-remote` turns the Host check off altogether, even on a loopback
/// address, where the flag widens nothing. A web page at evil.example:PORT rebound to
/// 127.0.0.1 (or to the LAN address the dashboard serves) then reads every page through the
/// reviewer's browser. The Host check should stay for the addresses the dashboard is bound to.
#[test]
fn allow_remote_does_not_switch_off_the_rebinding_check_on_loopback() {
    let env = Env::new();
    env.propose(&[("README.md", "# demo\n\nsecret plans\n")], "Internal");
    let ui = serve(&env, &["--listen", "127.0.0.1:0", "--allow-remote"]);
    let port = ui.base.rsplit(':').next().expect("port").to_string();
    let (ok, _) = get(&ui.base, "/api/proposals", &format!("127.0.0.1:{port}"));
    assert!(ok.contains("200"), "{ok}");
    let (rebound, body) = get(&ui.base, "/api/proposals", &format!("evil.example:{port}"));
    assert!(
        rebound.contains("421"),
        "a rebound page read the dashboard: {rebound}\n{body}"
    );
}

/// What reviewers see: a proposal that makes a file executable and turns another into a
/// symlink shows, on the dashboard (and `show`, the same view), an empty "modified" diff and a
/// one-line text change. Nothing says "mode 100644 → 100755" or "symlink".
#[test]
fn the_dashboard_shows_a_mode_change_and_a_symlink() {
    let env = Env::new();
    use std::os::unix::fs::PermissionsExt;
    let lib = env.repo.join("src/lib.rs");
    std::fs::set_permissions(&lib, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::remove_file(env.repo.join("README.md")).expect("rm");
    std::os::unix::fs::symlink("/etc/passwd", env.repo.join("README.md")).expect("symlink");
    env.git(&["add", "-A"]);
    let diff = env.git(&["diff", "--cached", "--binary"]);
    env.git(&["reset", "-q", "--hard", "HEAD"]);
    assert!(
        diff.contains("new mode 100755") && diff.contains("new file mode 120000"),
        "{diff}"
    );
    let file = env.file("modes.patch", &diff);
    let id = env
        .atelier(&[
            "propose",
            "--patch",
            file.to_str().expect("utf8"),
            "--title",
            "Tidy",
        ])
        .ok()
        .stdout
        .trim()
        .to_string();
    let tree = env.git(&["ls-tree", "-r", &format!("atelier/proposals/{id}")]);
    assert!(
        tree.contains("100755 blob") && tree.contains("120000 blob"),
        "{tree}"
    );
    let ui = serve(&env, &["--listen", "127.0.0.1:0"]);
    let host = ui.base.trim_start_matches("http://").to_string();
    let (status, page) = get(&ui.base, &format!("/proposals/{id}"), &host);
    assert!(status.contains("200"), "{status}\n{page}");
    assert!(
        page.contains("100755") || page.contains("executable"),
        "the mode change is invisible on the dashboard:\n{page}"
    );
    assert!(
        page.contains("120000") || page.contains("symlink") || page.contains("symbolic link"),
        "README.md became a symlink to /etc/passwd; the dashboard shows a text edit:\n{page}"
    );
}

/// `propose --patch` with a plain diff is applied "as git apply applies it". Git header lines
/// after the `+++` line (here a rename; an `index … 120000` line with a binary literal makes
/// a symlink the same way) are refused by git apply, but atelier inserts `diff --git` before
/// the pair and libgit2 then honours them: the diff a person reads as an edit of README.md
/// proposes something else.
#[test]
fn a_plain_diff_carries_no_git_headers_that_git_apply_refuses() {
    let env = Env::new();
    let plain = "--- a/README.md\n+++ b/README.md\nsimilarity index 90%\nrename from README.md\nrename to .ci/hook.sh\n@@ -1 +1 @@\n-# demo\n+# demo, tidied\n";
    let file = env.file("plain.diff", plain);
    let reference = env
        .command("git")
        .args(["apply", "--check", file.to_str().expect("utf8")])
        .output()
        .expect("git apply");
    assert!(
        !reference.status.success(),
        "git apply accepts it: {}",
        String::from_utf8_lossy(&reference.stderr)
    );
    let r = env.atelier(&[
        "propose",
        "--patch",
        file.to_str().expect("utf8"),
        "--title",
        "Tidy the readme",
    ]);
    if r.code == 0 {
        let id = r.stdout.trim();
        let changed = env.git(&[
            "diff",
            "--name-status",
            "main",
            &format!("atelier/proposals/{id}"),
        ]);
        panic!("git apply refuses this diff, atelier proposed it as:\n{changed}");
    }
}
