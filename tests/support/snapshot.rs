//! Whole-output snapshots (insta): a command's transcript — what was run, its exit code, stdout
//! and stderr — with what differs from one run to the next (the temporary directory, keys,
//! signatures, commit ids, hashes) redacted, so that a snapshot changes only when behaviour does.
//! The clock is already fixed by [`Env`](super::Env) (`ATELIER_NOW`).

use std::path::Path;

use super::Run;

/// Insta's settings for a snapshot of commands run under `root` (the test's temporary
/// directory): snapshots in `snapshots/` beside the test file, named after the test's own name,
/// and the redactions.
pub fn settings(root: &Path) -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.set_prepend_module_to_snapshot(false);
    s.set_omit_expression(true);
    let mut roots = vec![root.to_path_buf()];
    if let Ok(real) = root.canonicalize() {
        roots.push(real);
    }
    for r in roots {
        s.add_filter(&regex_quote(&r.display().to_string()), "[TMP]");
    }
    for (pattern, replacement) in [
        (
            r"-----BEGIN SSH SIGNATURE-----[\s\S]*?-----END SSH SIGNATURE-----",
            "[SSH SIGNATURE]",
        ),
        (
            r"ssh-ed25519 AAAA[A-Za-z0-9+/=]+",
            "ssh-ed25519 [PUBLIC KEY]",
        ),
        (r"SHA256:[A-Za-z0-9+/]{43}", "SHA256:[FINGERPRINT]"),
        (r"\b[0-9a-f]{64}\b", "[HASH]"),
        (r"\b[0-9a-f]{40}\b", "[COMMIT]"),
        (r"\b[0-9a-f]{12}\b", "[SHORT]"),
    ] {
        s.add_filter(pattern, replacement);
    }
    s
}

/// Escapes what a regular expression would read as syntax in a literal path.
fn regex_quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\.+*?()|[]{}^$#&-~".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The transcript of one command: `$ atelier ARGS`, its exit code, stdout and stderr.
pub fn transcript(args: &[&str], run: &Run) -> String {
    format!(
        "$ atelier {}\nexit: {}\n--- stdout\n{}--- stderr\n{}",
        args.join(" "),
        run.code,
        run.stdout,
        run.stderr
    )
}

/// Snapshots the transcript of `atelier ARGS` (run under the temporary directory `root`)
/// under the test's own name: `snapshot!(env.tmp.path(), &args, run)`, optionally with more
/// redactions for this output: `[(pattern, replacement), ...]`.
macro_rules! snapshot {
    ($root:expr, $args:expr, $run:expr) => {
        $crate::support::snapshot::snapshot!($root, $args, $run, [])
    };
    ($root:expr, $args:expr, $run:expr, [$(($pattern:expr, $replacement:expr)),* $(,)?]) => {{
        #[allow(unused_mut)]
        let mut settings = $crate::support::snapshot::settings($root);
        $(settings.add_filter($pattern, $replacement);)*
        let _scope = settings.bind_to_scope();
        insta::assert_snapshot!($crate::support::snapshot::transcript($args, &$run));
    }};
}
pub(crate) use snapshot;
