//! `--help` as a new user reads it: the commands in the order they are used, every option
//! described, each proposer named.

use crate::support::Env;

#[test]
fn help_lists_commands_in_reading_order_and_describes_every_option() {
    let env = Env::new();
    let top = env.atelier(&["--help"]).ok().stdout;
    let commands: Vec<&str> = top
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(
        &commands[..5],
        ["demo", "init", "keygen", "propose", "show"],
        "{top}"
    );
    // Every option of every command says what it does (clap prints a bare name otherwise).
    let mut bare = Vec::new();
    for c in commands.iter().filter(|c| **c != "help") {
        let mut args: Vec<&str> = c.split(' ').collect();
        if matches!(*c, "audit" | "plan" | "bench" | "gate-key") {
            continue;
        }
        args.push("--help");
        let help = env.atelier(&args).ok().stdout;
        for l in help.lines().filter(|l| l.trim_start().starts_with("--")) {
            if l.split_whitespace().count() < 2 {
                bare.push(format!("{c}: {l}"));
            }
        }
    }
    for (c, sub) in [
        ("audit", "verify"),
        ("audit", "show"),
        ("plan", "check"),
        ("bench", "replay"),
    ] {
        let help = env.atelier(&[c, sub, "--help"]).ok().stdout;
        for l in help.lines().filter(|l| l.trim_start().starts_with("--")) {
            if l.split_whitespace().count() < 2 {
                bare.push(format!("{c} {sub}: {l}"));
            }
        }
    }
    assert!(bare.is_empty(), "options without a description: {bare:#?}");
    let propose = env.atelier(&["propose", "--help"]).ok().stdout;
    for proposer in ["`tune`", "`memory`", "`lint`", "`agent`"] {
        assert!(propose.contains(proposer), "{proposer}: {propose}");
    }
}
