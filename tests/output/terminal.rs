//! `show` renders the change for approvers.

use crate::support::Env;

#[test]
fn show_renders_the_change_for_approvers() {
    let env = Env::new();
    let id = env.propose_code();
    let run = env.atelier(&["show", &id]).ok();
    assert!(run.stdout.contains("-    41\n+    42\n"), "{}", run.stdout);
    assert!(
        run.stdout.contains("modified  src/lib.rs"),
        "{}",
        run.stdout
    );
    let v = env.atelier(&["show", &id, "--json"]).ok().json();
    assert_eq!(v["files"].as_array().expect("files").len(), 2);
}
