//! The built-in reviewers (the default panel) on arbitrary file text. The first byte picks the
//! file's path and whether an agent wrote the change; the rest is split in two halves, the file
//! at base and at head (an empty half is an absent file). They never panic, every finding names
//! the reviewer that made it, and line numbers point into the file they name.
#![no_main]

use std::sync::OnceLock;

use atelier::governance::review::{self, ChangeView, FileChange, ReviewerDef};
use atelier::panel::DEFAULT_PANEL;
use libfuzzer_sys::fuzz_target;

const PATHS: [&str; 8] = [
    "src/lib.rs",
    "tests/tests.rs",
    "Cargo.toml",
    "package.json",
    "policies/governance.toml",
    ".github/workflows/ci.yml",
    "tests/test_app.py",
    "config/.env",
];

fn panel() -> &'static [ReviewerDef] {
    static DEFS: OnceLock<Vec<ReviewerDef>> = OnceLock::new();
    DEFS.get_or_init(|| {
        DEFAULT_PANEL
            .iter()
            .map(|(file, text)| ReviewerDef::parse(file, text).expect("the default panel parses"))
            .collect()
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let (base, head) = rest.split_at(rest.len() / 2);
    let text = |b: &[u8]| -> Option<String> {
        if b.is_empty() {
            None
        } else {
            std::str::from_utf8(b).ok().map(str::to_string)
        }
    };
    let file = FileChange {
        path: PATHS[usize::from(pick) % PATHS.len()].to_string(),
        base: text(base),
        head: text(head),
    };
    let declared = ["src/**".to_string()];
    let files = [file];
    let view = ChangeView {
        files: &files,
        agent_origin: pick & 0x80 != 0,
        declared: (pick & 0x40 != 0).then_some(&declared[..]),
        judged: &[],
    };
    let defs = panel();
    for f in review::run_builtins(defs, &view) {
        assert!(defs.iter().any(|d| d.name == f.reviewer), "{f:?}");
        if let (Some(path), Some(line)) = (&f.file, f.line) {
            assert_eq!(path, &files[0].path, "{f:?}");
            let most = [&files[0].base, &files[0].head]
                .iter()
                .filter_map(|t| t.as_ref().map(|t| t.lines().count()))
                .max()
                .unwrap_or(0);
            assert!(line >= 1 && line as usize <= most.max(1), "{f:?}");
        }
    }
    let _ = review::critic(&[]);
});
