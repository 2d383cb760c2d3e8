//! Skips: a test that cannot run on this machine (a kernel without Landlock, a port that is
//! taken) says so and passes — unless `ATELIER_TEST_STRICT=1` (which .ci/run sets), where a skip
//! is a failure, so that CI never passes by not running what it is meant to run.

/// The environment variable that turns a skip into a failure.
pub const STRICT_VAR: &str = "ATELIER_TEST_STRICT";

/// Whether skips fail: `ATELIER_TEST_STRICT=1`.
pub fn strict() -> bool {
    std::env::var(STRICT_VAR).is_ok_and(|v| v == "1")
}

/// Says why a test is skipped (on stderr, `skipped: <why>`), or, under `ATELIER_TEST_STRICT=1`,
/// fails it with that reason. The caller returns afterwards: use [`skip!`].
#[track_caller]
pub fn skipping(why: &str) {
    if strict() {
        panic!("skipped: {why}, and {STRICT_VAR}=1 (CI) turns a skip into a failure");
    }
    eprintln!("skipped: {why}");
}

/// Ends the test here because it cannot run on this machine: `skip!("no AF_VSOCK")`, with
/// `format!` arguments if needed. Under `ATELIER_TEST_STRICT=1` the test fails instead.
macro_rules! skip {
    ($($why:tt)+) => {{
        $crate::support::skip::skipping(&format!($($why)+));
        return;
    }};
}
pub(crate) use skip;

/// Whether this kernel enforces what the containment tests attack (Landlock ABI 4: files and
/// TCP).
pub fn landlock() -> bool {
    atelier::agent::contain::abi() >= atelier::agent::contain::NET_ABI
}

/// Skips the test (see [`skip!`]) on a kernel without Landlock ABI 4.
macro_rules! require_landlock {
    () => {
        if !$crate::support::skip::landlock() {
            $crate::support::skip::skip!("this kernel has no Landlock ABI 4");
        }
    };
}
pub(crate) use require_landlock;
