//! The dashboard is for looking: any web page can make its browser GET a route of it, so
//! serving a page must write nothing, above all not the auditor's witness memory under
//! `$XDG_STATE_HOME/atelier/` (only `audit verify`, run by a person, records that).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;

use crate::support::Env;

/// Every file, directory and link under `root`: its contents (a link's target).
fn snapshot(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(read) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in read.flatten() {
            let p = e.path();
            let rel = p
                .strip_prefix(root)
                .expect("under root")
                .display()
                .to_string();
            let kind = e.file_type().expect("file type");
            if kind.is_symlink() {
                let to = std::fs::read_link(&p).expect("link");
                out.insert(rel, to.display().to_string().into_bytes());
            } else if kind.is_dir() {
                out.insert(format!("{rel}/"), Vec::new());
                stack.push(p);
            } else if kind.is_file() {
                out.insert(rel, std::fs::read(&p).unwrap_or_default());
            }
        }
    }
    out
}

fn changes(before: &BTreeMap<String, Vec<u8>>, after: &BTreeMap<String, Vec<u8>>) -> Vec<String> {
    let mut c: Vec<String> = after
        .iter()
        .filter(|(k, v)| before.get(*k) != Some(*v))
        .map(|(k, _)| format!("written: {k}"))
        .collect();
    c.extend(
        before
            .keys()
            .filter(|k| !after.contains_key(*k))
            .map(|k| format!("removed: {k}")),
    );
    c
}

/// GETs every route (pages and their JSON) from a dashboard started with `state` as
/// `XDG_STATE_HOME` (None: the default under `$HOME`).
fn browse_every_route(env: &Env, state: Option<&Path>, id: &str) {
    let mut c = env.command(crate::support::bin());
    c.arg("-C")
        .arg(&env.repo)
        .args(["ui", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if let Some(s) = state {
        c.env("XDG_STATE_HOME", s);
    }
    let mut child = c.spawn().expect("start atelier ui");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("the address");
    let base = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("no address: {line}"))
        .to_string();
    let host = base.trim_start_matches("http://").to_string();
    for page in [
        "/".to_string(),
        "/proposals".into(),
        format!("/proposals/{id}"),
        "/ledger".into(),
        "/runs".into(),
        "/runs/no-such-run".into(),
        "/improvements".into(),
    ] {
        for path in [page.clone(), format!("/api{page}")] {
            let (status, body) = crate::output::dashboard::raw(
                &base,
                &format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"),
            );
            assert!(
                status.contains("200") || status.contains("404"),
                "{path}: {status}\n{body}"
            );
            if path.ends_with("ledger") {
                assert!(
                    body.contains("Ledger") || body.contains("entries"),
                    "{body}"
                );
            }
        }
    }
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn browsing_every_dashboard_route_writes_no_file_and_no_witness_memory() {
    let env = Env::new();
    let id = env.propose(
        &[("src/lib.rs", "pub fn answer() -> u32 {\n    42\n}\n")],
        "Fix the answer",
    );
    env.approve(&id, "alice").ok();
    // Another change merged since moves the base, so the open proposal's merge with it is a
    // tree no command has written yet: the page that shows it computes it in memory.
    let other = env.propose(&[("README.md", "# demo, documented\n")], "Document");
    env.approve(&other, "alice").ok();
    env.atelier(&["merge", &other]).ok();
    // The state the gate's own appends left (the default state directory, under HOME), and
    // everything else in the repository and HOME: unchanged by browsing.
    let before = snapshot(env.tmp.path());
    assert!(
        before
            .keys()
            .any(|k| k.starts_with("home/.local/state/atelier/")),
        "the gate's appends leave a witness memory: {:?}",
        before.keys().collect::<Vec<_>>()
    );
    browse_every_route(&env, None, &id);
    let after = snapshot(env.tmp.path());
    assert_eq!(changes(&before, &after), Vec::<String>::new());
    // A state directory the dashboard finds empty stays empty: a clean verification for the
    // ledger page records no memory there.
    let fresh = tempfile::tempdir().expect("state dir");
    browse_every_route(&env, Some(fresh.path()), &id);
    assert_eq!(
        snapshot(fresh.path()).keys().collect::<Vec<_>>(),
        Vec::<&String>::new()
    );
    assert_eq!(
        changes(&before, &snapshot(env.tmp.path())),
        Vec::<String>::new()
    );
}
