//! A preset whose `base_url` names a port the role's `network` does not list would only retry
//! until killed (Claude Code silent, codex "Reconnecting…", aider for 85 s): the run refuses
//! before any worker starts, for each preset, however the endpoint is handed to its CLI.

use super::{hello_plan, swarm};
use crate::support::model::{Reply, Server};

#[test]
fn each_preset_pointed_at_a_port_its_role_does_not_list_is_refused_before_it_starts() {
    // Listening, so that its port is the one `network` lists; the endpoint is elsewhere.
    let listed = Server::start(|_, _| Reply::Json(200, serde_json::json!({})));
    for (backend, key_var, base) in [
        ("claude", "ANTHROPIC_API_KEY", "http://127.0.0.1:9"),
        ("codex", "OPENAI_API_KEY", "http://127.0.0.1:9/v1"),
        ("aider", "OPENAI_API_KEY", "http://127.0.0.1:9/v1"),
    ] {
        let s = swarm(backend, base, &listed, key_var, "");
        let p = hello_plan(&s);
        let o = s.command(&["run", &p]).output().expect("run");
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{backend}: {stderr}");
        for want in [
            "E_ENDPOINT_BLOCKED".to_string(),
            "[roles.writer]".to_string(),
            format!("the {backend} CLI"),
            "from `base_url`".to_string(),
            "port 9,".to_string(),
            format!("`network = [{}]`", listed.port),
            "add 9 to `network`".to_string(),
        ] {
            assert!(
                stderr.contains(&want),
                "{backend}: missing {want:?}:\n{stderr}"
            );
        }
        let worktrees = s.env.git(&["worktree", "list"]);
        assert_eq!(
            worktrees.lines().count(),
            1,
            "{backend}: an attempt began:\n{worktrees}"
        );
    }
}
