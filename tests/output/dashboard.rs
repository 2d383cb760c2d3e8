//! The dashboard (`atelier ui`) in a browser: proposals, the ledger and runs, escaped; loopback
//! only unless told, with the rebinding check.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Stdio};

use crate::output::{assert_none, HIDING};
use crate::support::swarm::{plan, task, Swarm};
use crate::support::Env;

/// The dashboard shows a proposal's diff and title to a browser, which reorders text around a
/// bidi override as a terminal does: a diff line there shows the marks too, never the
/// characters.
#[test]
fn the_dashboard_shows_bidi_and_invisible_characters_as_marks() {
    let env = Env::new();
    let id = env.propose(
        &[(
            "src/lib.rs",
            "pub fn answer() -> u32 {\n    // check \u{202e} } \u{2066}if admin {\u{2069}\u{200b}\n    42\n}\n",
        )],
        "Fix the answer",
    );
    let ui = crate::output::dashboard::serve_with(&env, &["--listen", "127.0.0.1:0"]);
    let host = ui.base.trim_start_matches("http://").to_string();
    let (status, page) = crate::output::dashboard::raw(
        &ui.base,
        &format!("GET /proposals/{id} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"),
    );
    assert!(status.contains("200"), "{status}");
    assert_none(&page, &HIDING, "the proposal page");
    assert!(
        page.contains(
            "check &lt;U+202E&gt; } &lt;U+2066&gt;if admin {&lt;U+2069&gt;&lt;U+200B&gt;"
        ),
        "{page}"
    );
}

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
    let ui = serve_with(&env, &["--listen", "127.0.0.1:0", "--allow-remote"]);
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
    let ui = serve_with(&env, &["--listen", "127.0.0.1:0"]);
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

/// `atelier ui` on a free loopback port: the process and its base URL.
pub(crate) struct Ui {
    child: Child,
    pub(crate) base: String,
}

impl Drop for Ui {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn serve(env: &Env) -> Ui {
    serve_with(env, &["--listen", "127.0.0.1:0"])
}

/// `atelier ui ARGS`, once it says where it listens.
pub(crate) fn serve_with(env: &Env, args: &[&str]) -> Ui {
    let mut child = env
        .command(crate::support::bin())
        .arg("-C")
        .arg(&env.repo)
        .arg("ui")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start atelier ui");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("the address");
    let base = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("no address: {line}"))
        .to_string();
    Ui { child, base }
}

/// The page as Chromium renders it (its DOM after parsing), headless.
fn chromium(env: &Env, url: &str) -> String {
    let profile = tempfile::tempdir().expect("profile");
    let out = env
        .command("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(["--dump-dom", url])
        .output()
        .expect("chromium (Debian package `chromium`; .ci/run installs it)");
    assert!(
        out.status.success(),
        "chromium: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A raw HTTP/1.1 request: the status line and the body.
pub(crate) fn raw(base: &str, request: &str) -> (String, String) {
    let addr = base.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    s.write_all(request.as_bytes()).expect("send");
    let mut text = String::new();
    s.read_to_string(&mut text).expect("read");
    let status = text.lines().next().unwrap_or_default().to_string();
    let body = text
        .split("\r\n\r\n")
        .nth(1)
        .unwrap_or_default()
        .to_string();
    (status, body)
}

#[test]
fn the_dashboard_shows_proposals_the_ledger_and_runs_in_a_browser_and_escapes_what_it_shows() {
    let env = Env::new();
    let merged = env.propose(&[("README.md", "# demo\n\nmerged\n")], "Readme");
    env.approve(&merged, "alice").ok();
    env.atelier(&["merge", &merged]).ok();
    let id = env.propose(
        &[("src/lib.rs", "pub fn answer() -> u32 {\n    42\n}\n")],
        "Fix <script>document.title='owned'</script> the answer",
    );
    let waiting = env.propose(&[("README.md", "# demo\n\nwaiting\n")], "Waiting");
    env.approve(&id, "alice").ok();
    let ui = serve(&env);

    let home = chromium(&env, &format!("{}/", ui.base));
    assert!(home.contains("Proposals to"), "{home}");
    // The title is text on the page, never markup: no script element came from it.
    assert!(
        home.contains("Fix &lt;script&gt;document.title='owned'&lt;/script&gt; the answer"),
        "{home}"
    );
    assert!(!home.contains("<script>document.title"), "{home}");
    assert!(home.contains("<title>Proposals"), "{home}");
    // The merged proposal's row names who approved it.
    let row = home
        .split("<tr>")
        .find(|r| r.contains(">Readme<"))
        .unwrap_or_default();
    assert!(row.contains("(approved by alice@example.org)"), "{row}");

    let page = chromium(&env, &format!("{}/proposals/{id}", ui.base));
    assert!(
        page.contains("Approved by: alice@example.org")
            && page.contains(">may merge<")
            && page.contains("+    42"),
        "{page}"
    );
    let unsigned = chromium(&env, &format!("{}/proposals/{waiting}", ui.base));
    assert!(
        unsigned.contains("may not merge yet")
            && unsigned.contains("nobody yet")
            && unsigned.contains("E_QUORUM_NOT_MET"),
        "{unsigned}"
    );
    let done = chromium(&env, &format!("{}/proposals/{merged}", ui.base));
    assert!(done.contains("This proposal is merged"), "{done}");

    let ledger = chromium(&env, &format!("{}/ledger", ui.base));
    assert!(
        ledger.contains("audit verify: OK") && ledger.contains("proposal-opened"),
        "{ledger}"
    );

    let runs = chromium(&env, &format!("{}/runs", ui.base));
    assert!(runs.contains("No runs yet"), "{runs}");
    let curve = chromium(&env, &format!("{}/improvements", ui.base));
    assert!(curve.contains("No merged cycle proposals yet"), "{curve}");

    // Every page has a JSON twin.
    let (status, body) = raw(
        &ui.base,
        &format!(
            "GET /api/proposals HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            ui.base.trim_start_matches("http://")
        ),
    );
    assert!(status.contains("200"), "{status}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("json");
    assert_eq!(v["proposals"].as_array().map(Vec::len), Some(3), "{v}");

    // Read-only, and only for its own address (a page elsewhere, rebinding a name to
    // 127.0.0.1, sends its own Host).
    let (post, _) = raw(
        &ui.base,
        &format!(
            "POST / HTTP/1.1\r\nHost: {}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            ui.base.trim_start_matches("http://")
        ),
    );
    assert!(post.contains("405"), "{post}");
    let (rebound, _) = raw(
        &ui.base,
        "GET /api/ledger HTTP/1.1\r\nHost: evil.example:80\r\nConnection: close\r\n\r\n",
    );
    assert!(rebound.contains("421"), "{rebound}");
}

#[test]
fn the_dashboard_stays_on_loopback_unless_told() {
    let env = Env::new();
    let r = env.atelier(&["ui", "--listen", "0.0.0.0:0"]).code(2);
    assert!(
        r.stderr
            .contains("--listen 0.0.0.0:0: not a loopback address")
            && r.stderr.contains("--allow-remote"),
        "{}",
        r.stderr
    );
}

/// A port another program holds is named as such, with the way to get a free one.
#[test]
fn a_port_in_use_says_how_to_pick_a_free_one() {
    let env = Env::new();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("addr").to_string();
    let r = env.atelier(&["ui", "--listen", &addr]).code(2);
    assert!(
        r.stderr.contains(&format!("listening on {addr}"))
            && r.stderr.contains("`--listen 127.0.0.1:0` picks a free one"),
        "{}",
        r.stderr
    );
}

/// A run's page draws each attempt's validators (its contract checks, passed or failed) under
/// its bar and the contract validator's verdict before the first attempt; the runs page plots
/// the silences (a dot each) with the thresholds. In Chromium, from a real run.
#[test]
fn the_run_pages_show_validators_in_the_gantt_chart_and_plot_the_silences() {
    let s = Swarm::new("nudge_after = \"1s\"\nrestart_after = \"60s\"\nfailure_budget = 2");
    crate::support::swarm::add_role(&s, "validator", crate::support::swarm::VALIDATOR);
    std::fs::write(
        s.fake.join("validator-answer.txt"),
        r#"{"verdict": "approve", "findings": []}"#,
    )
    .expect("answer");
    // Attempt 1 is silent for a while, then writes what its check refuses; attempt 2 passes.
    s.scenario(
        "p:A",
        "if [ \"$ATELIER_ATTEMPT\" = 1 ]; then sleep 1.3; echo bad > src/a.rs; else echo ok > src/a.rs; fi",
    );
    let p = s.plan(
        "p.toml",
        &plan("p", &[task("A", &["src/a.rs"], &[], "grep -q ok src/a.rs")]),
    );
    s.run(&["run", &p]).ok();
    let ui = serve(&s.env);

    let run = chromium(&s.env, &format!("{}/runs/r1", ui.base));
    assert!(
        run.contains("p:A attempt 1: check 1 failed in")
            && run.contains("p:A attempt 2: check 1 passed in")
            && run.contains("validator: approve (0 finding(s)) before the first attempt")
            && run.contains("contract validator"),
        "{run}"
    );
    // A task that succeeded shows its last step, not the failure an earlier attempt had.
    assert!(
        run.contains("<td>0</td><td class=\"spent\"></td><td>check 1: passed</td></tr>"),
        "{run}"
    );
    let (_, body) = raw(
        &ui.base,
        &format!(
            "GET /api/runs/r1 HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            ui.base.trim_start_matches("http://")
        ),
    );
    let v: serde_json::Value = serde_json::from_str(&body).expect("json");
    assert_eq!(v["attempts"][0]["steps"][0]["passed"], false, "{v}");
    assert_eq!(v["attempts"][1]["steps"][0]["passed"], true, "{v}");
    assert_eq!(v["contract_validator"]["verdict"], "approve", "{v}");
    // A finished run has no conductor reporting, and the page does not refresh itself.
    assert_eq!(v["reporting"], false, "{v}");
    assert!(!run.contains("http-equiv=\"refresh\""), "{run}");

    let runs = chromium(&s.env, &format!("{}/runs", ui.base));
    let plot = runs
        .split("id=\"silence-plot\"")
        .nth(1)
        .unwrap_or_else(|| panic!("no silence plot: {runs}"));
    assert!(
        plot.contains("class=\"silence\"")
            && plot.contains("exit (1; median 1.")
            && plot.contains("nudge_after = 1000 ms")
            && plot.contains("restart_after = 60000 ms"),
        "{plot}"
    );
}
