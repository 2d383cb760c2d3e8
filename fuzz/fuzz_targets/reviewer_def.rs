//! `reviewers/<name>.toml`: parsing never panics, and a definition that parses is checked (its
//! name is its file's, an agent names a role and a template, a template stays under
//! `reviewers/templates/`), and running it as a built-in never attributes findings to another.
#![no_main]

use atelier::governance::review::{self, ChangeView, FileChange, Kind, ReviewerDef};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // Once under a fixed name (mostly the error paths), once under the name the text declares,
    // so that the checks after the name's are reached.
    let _ = ReviewerDef::parse("reviewers/fuzz.toml", text);
    let declared = toml::from_str::<toml::Table>(text)
        .ok()
        .and_then(|t| t.get("name")?.as_str().map(str::to_string));
    let Some(name) = declared else {
        return;
    };
    let file = format!("reviewers/{name}.toml");
    let Ok(def) = ReviewerDef::parse(&file, text) else {
        return;
    };
    assert_eq!(def.name, name);
    assert!(def.max_lines >= 1);
    assert!(!def.flavour.trim().is_empty() && !def.flavour.contains('\n'));
    if def.kind == Kind::Agent {
        assert!(def.role.is_some() && def.template.is_some());
    }
    if let Some(t) = &def.template {
        assert!(!t.starts_with('/'));
        assert!(t.split('/').all(|c| !c.is_empty() && c != "." && c != ".."));
    }
    let files = [FileChange {
        path: "src/lib.rs".into(),
        base: Some("fn a() {}\n".into()),
        head: Some(
            "fn a() {}\nfn b() { let token = \"ghp_0123456789abcdef0123456789abcdef0123\"; }\n"
                .into(),
        ),
    }];
    let view = ChangeView {
        files: &files,
        agent_origin: true,
        declared: None,
        judged: &[],
    };
    for f in review::run_builtins(std::slice::from_ref(&def), &view) {
        assert_eq!(f.reviewer, def.name);
    }
});
