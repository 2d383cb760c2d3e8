//! `atelier propose --from lint`: the protected branch's fix command, run contained in a fresh
//! worktree for one lint family, proposed only when it changed something and the gauntlet
//! still passes on the fixed tree. The fix command is a scripted program that fixes, breaks,
//! does nothing, or attacks, on purpose.

use crate::swarm::Swarm;

/// A swarm whose branch holds `src/messy.txt` (double spaces), a gauntlet step that refuses
/// double spaces, and `[proposers.lint]` naming the scripted fixer.
fn linted() -> Swarm {
    let s = Swarm::configured(
        "",
        "\n[[gauntlet.steps]]\nname = \"tidy\"\nrun = \"! grep -q '  ' src/messy.txt\"\ntimeout = \"30s\"\n\n[proposers.lint]\ncommand = [\"FIXER\", \"{family}\"]\nfamilies = [\"spaces\", \"breaks\", \"nothing\", \"hostile\"]\ntimeout = \"30s\"\n",
    );
    let fixer = s.fake.join("fix.sh");
    let repo = s.env.repo.display().to_string();
    std::fs::write(
        &fixer,
        format!(
            "#!/bin/sh\ncase \"$1\" in\n  spaces) sed -i 's/  */ /g' src/messy.txt ;;\n  breaks) echo extra > src/other.txt ;;\n  nothing) : ;;\n  hostile)\n    echo pwned > '{repo}/pwned.txt'\n    echo 0000000000000000000000000000000000000000 > '{repo}/.git/refs/heads/pwned'\n    sed -i 's/  */ /g' src/messy.txt ;;\nesac\n"
        ),
    )
    .expect("write fixer");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fixer, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let config = s
        .env
        .read("atelier.toml")
        .replace("FIXER", &fixer.display().to_string());
    s.env.write("atelier.toml", &config);
    s.env.write("src/messy.txt", "a  b   c\n");
    s.env.git(&["add", "atelier.toml", "src/messy.txt"]);
    s.env.git(&["commit", "-qm", "A messy file and a fixer"]);
    s
}

fn proposals(s: &Swarm) -> usize {
    s.run(&["proposals", "--json"])
        .ok()
        .json()
        .as_array()
        .map_or(0, Vec::len)
}

fn nothing_left_behind(s: &Swarm) {
    let dir = s.env.repo.join(".atelier/proposers");
    let left: Vec<_> = std::fs::read_dir(&dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "worktrees left: {left:?}");
    let branches = s.env.git(&["branch", "--list", "atelier/proposers/*"]);
    assert!(branches.trim().is_empty(), "{branches}");
}

#[test]
fn lint_proposes_one_familys_fixes_when_the_gauntlet_passes() {
    let s = linted();
    // An uncommitted edit of the working tree's fix command is not what runs: the branch's is.
    let fixer = s.fake.join("fix.sh").display().to_string();
    let config = s.env.read("atelier.toml");
    let edited = config.replace(
        &format!("command = [\"{fixer}\""),
        "command = [\"sh\", \"-c\", \"echo hacked > src/messy.txt\"",
    );
    assert_ne!(edited, config);
    s.env.write("atelier.toml", &edited);
    let done = s
        .run(&["propose", "--from", "lint", "--family", "spaces", "--json"])
        .ok()
        .json();
    let id = done["proposal"]["id"]
        .as_str()
        .expect("a proposal")
        .to_string();
    assert_eq!(
        done["lint"]["changed"],
        serde_json::json!(["src/messy.txt"])
    );
    assert_eq!(done["lint"]["steps"][0]["name"], "tidy");
    assert_eq!(done["lint"]["steps"][0]["passed"], true);
    assert_eq!(done["lint"]["contained"], true);
    let shown = s.run(&["show", &id]).ok().stdout;
    assert!(
        shown.contains("-a  b   c")
            && shown.contains("+a b c")
            && !shown.contains("hacked")
            && shown.contains("lint: spaces fixes in 1 file(s)"),
        "{shown}"
    );
    let record = s.run(&["audit", "show", &id, "--json"]).ok().stdout;
    assert!(record.contains("agent atelier-lint"), "{record}");
    // The main working tree is untouched: the fixes live on the proposal's branch.
    assert_eq!(s.env.read("src/messy.txt"), "a  b   c\n");
    nothing_left_behind(&s);
}

#[test]
fn fixes_that_break_the_gauntlet_or_change_nothing_are_not_proposed() {
    let s = linted();
    let broken = s
        .run(&["propose", "--from", "lint", "--family", "breaks"])
        .code(1);
    assert!(
        broken
            .stderr
            .contains("nothing proposed: with the fixes, the gauntlet fails (tidy"),
        "{}",
        broken.stderr
    );
    assert!(
        broken.stdout.contains("gauntlet tidy: FAILED"),
        "{}",
        broken.stdout
    );
    let nothing = s
        .run(&["propose", "--from", "lint", "--family", "nothing"])
        .code(1);
    assert!(
        nothing
            .stderr
            .contains("the fix command changed nothing for family nothing"),
        "{}",
        nothing.stderr
    );
    let unlisted = s
        .run(&["propose", "--from", "lint", "--family", "perf"])
        .code(2);
    assert!(
        unlisted.stderr.contains(
            "not one of [proposers.lint] families on main (spaces, breaks, nothing, hostile)"
        ),
        "{}",
        unlisted.stderr
    );
    let odd = s
        .run(&["propose", "--from", "lint", "--family", "a b"])
        .code(2);
    assert!(
        odd.stderr.contains("a lint family is letters"),
        "{}",
        odd.stderr
    );
    let missing = s.run(&["propose", "--from", "lint"]).code(2);
    assert!(
        missing.stderr.contains("needs --family"),
        "{}",
        missing.stderr
    );
    assert_eq!(proposals(&s), 0);
    nothing_left_behind(&s);
}

#[test]
fn a_hostile_fix_command_cannot_write_the_main_tree_or_refs() {
    let s = linted();
    let done = s
        .run(&["propose", "--from", "lint", "--family", "hostile", "--json"])
        .ok()
        .json();
    assert!(
        !s.env.repo.join("pwned.txt").exists(),
        "wrote the main tree"
    );
    assert!(
        !s.env.repo.join(".git/refs/heads/pwned").exists(),
        "wrote a ref"
    );
    assert_eq!(
        done["lint"]["changed"],
        serde_json::json!(["src/messy.txt"])
    );
    nothing_left_behind(&s);
}

#[test]
fn without_a_lint_section_on_the_branch_lint_says_what_to_add() {
    let s = Swarm::new("");
    let r = s
        .run(&["propose", "--from", "lint", "--family", "style"])
        .code(2);
    assert!(
        r.stderr
            .contains("atelier.toml at main has no [proposers.lint]")
            && r.stderr.contains("clippy::{family}"),
        "{}",
        r.stderr
    );
}
