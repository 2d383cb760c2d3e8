//! Files other programs run: a path whose file configures a program that runs when someone
//! merely opens, checks out, diffs, enters or pushes a tree (git's drivers, direnv, hook
//! managers, agent CLIs, editors, CI). A swarm worker may not write one (what it wrote would run
//! outside containment with the operator's rights), and an agent reviewer's copy of a proposal
//! leaves them out (what the proposal wrote there would configure the reviewing CLI). Pure.

/// Why a worker may not write `path`, if it may not: the file configures a program that runs
/// outside containment when someone merely opens, checks out, diffs or pushes the tree (git,
/// git-lfs, direnv, mise, hook managers, agent CLIs, editors, CI), so what a worker wrote there
/// would run with the operator's rights. Every component is checked, the last one included, so
/// the name is refused whatever it is (a file, a directory, or a link to files that live
/// elsewhere). Names are compared as a case-insensitive file system or git's own NTFS and HFS
/// checks see them (`normalised`). Dot-names are refused unless they are known data files
/// (`DATA_DOT_NAMES`): they are the names tools read on their own, and no list of tools is
/// complete. Instructions (`AGENTS.md`, `CLAUDE.md`) are text the panel reviews like code, not
/// a program's configuration: allowed.
pub fn handed_off(path: &str) -> Option<&'static str> {
    let parts: Vec<String> = path.split('/').map(normalised).collect();
    let last = parts.len() - 1;
    parts.iter().enumerate().find_map(|(i, name)| {
        let rest: Vec<&str> = parts[i + 1..].iter().map(String::as_str).collect();
        handed_off_name(name, &rest, i == last)
    })
}

/// Whether a path under a forge's folder (`.github/`…, given as the components after it) is
/// text the forge shows rather than configuration it or its agents act on: the issue,
/// discussion and pull-request templates, and Markdown directly in the folder.
fn forge_text(rest: &[&str]) -> bool {
    match rest {
        [] => true,
        [one] => one.ends_with(".md") || *one == "funding.yml",
        [dir, ..] => matches!(
            *dir,
            "issue_template" | "discussion_template" | "pull_request_template"
        ),
    }
}

/// Whether a name is an NTFS short name (`GITHUB~1`, `GITATT~1`): Windows resolves one to a
/// long name it does not spell, so it may stand for any of the names here.
fn short_name(name: &str) -> bool {
    let stem = name.split('.').next().unwrap_or(name);
    stem.rsplit_once('~')
        .is_some_and(|(_, n)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
}

/// A path component as a case-insensitive file system sees it, and without what NTFS and HFS+
/// drop from a name (trailing dots and spaces, Unicode's default-ignorable characters), which
/// git's own `core.protectNTFS` and `core.protectHFS` checks strip for `.git` alone:
/// `.GitAttributes`, `.envrc.` and `.git\u{200c}modules` are the files they spell there.
fn normalised(name: &str) -> String {
    let kept: String = name.chars().filter(|c| !ignorable(*c)).collect();
    // What case folding (APFS, ext4's casefold) and NTFS's upcasing make of letters outside
    // ASCII that `to_lowercase` leaves alone: `ruſt-toolchain.toml` is `rust-toolchain.toml`.
    let folded: String = kept
        .chars()
        .map(|c| match c {
            'ſ' => 's',
            'ı' => 'i',
            '\u{212A}' => 'k',
            '\u{212B}' => 'å',
            c => c,
        })
        .collect();
    folded.trim_end_matches(['.', ' ']).to_lowercase()
}

/// Unicode's default-ignorable code points: an HFS+ volume drops them from a file name.
fn ignorable(c: char) -> bool {
    matches!(c as u32,
        0xAD | 0x34F | 0x61C | 0x115F | 0x1160 | 0x17B4 | 0x17B5 | 0x180B..=0x180F
        | 0x200B..=0x200F | 0x202A..=0x202E | 0x2060..=0x206F | 0x3164 | 0xFE00..=0xFE0F
        | 0xFEFF | 0xFFA0 | 0x1BCA0..=0x1BCA3 | 0x1D173..=0x1D17A | 0xE0000..=0xE0FFF)
}

/// Dot-names whose readers run nothing the file names: ignore lists, editor formatting, tool
/// version pins. Every other dot-name is refused; the operator adds one through the gate.
const DATA_DOT_NAMES: &[&str] = &[
    ".gitignore",
    ".gitkeep",
    ".keep",
    ".editorconfig",
    ".dockerignore",
    ".npmignore",
    ".prettierignore",
    ".eslintignore",
    ".python-version",
    ".nvmrc",
    ".node-version",
    ".ruby-version",
    ".env.example",
    ".env.sample",
    ".mailmap",
    ".rustfmt.toml",
    ".clippy.toml",
    ".terraform.lock.hcl",
    ".nojekyll",
    ".htaccess",
    ".clang-format",
    ".clang-tidy",
    ".flake8",
    ".prettierrc.json",
    ".prettierrc.yaml",
    ".prettierrc.yml",
    ".markdownlint.json",
    ".yamllint",
    // Folders of data: changesets' notes, sqlx's recorded queries, a site's well-known files.
    ".changeset",
    ".sqlx",
    ".well-known",
];

/// Why a normalised path component `name` (followed by `next`, if any; `file` when it is the
/// last) is another program's configuration, if it is.
fn handed_off_name(name: &str, rest: &[&str], file: bool) -> Option<&'static str> {
    let bare = name.strip_prefix('.').unwrap_or(name);
    let next = rest.first().copied();
    let ci_dir = matches!(next, Some("workflows") | Some("actions"));
    if short_name(name) {
        return Some(
            "is an NTFS short name, which Windows resolves to a long name it does not spell",
        );
    }
    match name {
        ".gitattributes" => {
            Some("names the filter, diff and merge drivers git runs on checkout, diff and merge")
        }
        ".gitmodules" => Some("names submodule commands (`update = !…`) and the URLs git fetches"),
        ".lfsconfig" => Some("tells git-lfs where to send the operator's credentials"),
        ".envrc" => Some("is a shell script direnv runs on entering the directory"),
        ".env" => Some("is read into the environment of whatever starts in the directory"),
        ".mcp.json" => Some("names the MCP servers (commands) agent CLIs start"),
        ".pre-commit-config.yaml" => Some("names the hooks pre-commit runs on every commit"),
        ".gitlab-ci.yml" | ".travis.yml" | ".cirrus.yml" | ".drone.yml" | ".circleci"
        | ".buildkite" | ".semaphore" | ".woodpecker" | ".woodpecker.yml" | "jenkinsfile"
        | "azure-pipelines.yml" | "azure-pipelines.yaml" | "appveyor.yml" | "appveyor.yaml"
        | "bitbucket-pipelines.yml" | "cloudbuild.yaml" | "cloudbuild.yml" | "netlify.toml"
        | "vercel.json" | "codemagic.yaml" | "buildkite.yml" | "buildkite.yaml" | "buildspec.yml"
        | "buildspec.yaml" | "amplify.yml" | "appspec.yml" | "appspec.yaml" | "bitrise.yml"
        | "codeship-steps.yml" | "wercker.yml" | "now.json" | "render.yaml" | "railway.toml"
        | "railway.json" | "fly.toml" | "procfile" | "app.json" | "firebase.json" | "earthfile"
        | "skaffold.yaml" | "dagger.json" | "devfile.yaml" => {
            Some("is a CI or deploy pipeline, run with the forge's secrets")
        }
        "codeowners" => Some("names who must approve on the forge (read from the root, docs/ and .github/)"),
        "renovate.json" | "renovate.json5" | ".renovaterc" | ".renovaterc.json" => {
            Some("configures Renovate, whose registries and post-upgrade tasks run with the forge's secrets")
        }
        "rusty-hook.toml" | "simple-git-hooks.json" | "simple-git-hooks.js" | "captainhook.json"
        | ".simple-git-hooks.json" => Some("names the git hooks a hook manager installs"),
        "gradle-wrapper.properties" | "maven-wrapper.properties" => Some(
            "names the build tool distribution the wrapper downloads and runs, an IDE's on open included",
        ),
        _ if name.starts_with("jenkinsfile") => {
            Some("is a CI pipeline, run with the forge's secrets")
        }
        "rust-toolchain" | "rust-toolchain.toml" => Some(
            "picks the toolchain (a `path` names the programs) every cargo in the tree runs, an editor's on open included",
        ),
        "flake.nix" | "flake.lock" | "shell.nix" | "default.nix" | "devenv.nix" | "devenv.yaml"
        | "devenv.lock" | "devbox.json" | "pixi.toml" => Some(
            "defines the shell direnv and nix enter in the directory, whose hooks run commands",
        ),
        "crush.json" => Some("configures an agent CLI, whose settings name commands it runs"),
        ".git" => Some("is a `.git`, a repository git would use"),
        "head" if file => Some(
            "is a `HEAD`: beside `objects/` and `refs/` it makes its folder a repository git uses, config and all",
        ),
        ".claude" | ".codex" | ".cursor" | ".gemini" | "opencode.json" | "opencode.jsonc" => {
            Some("configures an agent CLI, whose settings name commands (hooks) it runs")
        }
        ".vscode" | ".idea" | ".devcontainer" | ".devcontainer.json" => {
            Some("configures an editor, whose tasks and containers run commands")
        }
        ".husky" | ".githooks" => Some("holds git hooks a hook manager installs"),
        ".github" | ".gitea" | ".forgejo" if ci_dir => {
            Some("is a CI workflow, run with the forge's secrets")
        }
        // Templates and Markdown: text the forge shows, reviewed like code. The rest (Copilot's
        // hooks, dependabot's registries, CODEOWNERS) the forge and its agents act on.
        ".github" | ".gitea" | ".forgejo" if forge_text(rest) => None,
        ".github" | ".gitea" | ".forgejo" => Some(
            "is forge configuration (agent hooks, dependabot registries, CODEOWNERS) the forge and its agents act on; workers may write only its templates and Markdown",
        ),
        ".mise" => Some("configures mise, whose hooks and tasks run commands"),
        "mise" if next.is_some_and(|n| n.ends_with(".toml") || n == "conf.d") => {
            Some("configures mise, whose hooks and tasks run commands")
        }
        _ if bare.starts_with("mise.") && bare.ends_with(".toml") => {
            Some("configures mise, whose `[hooks]` run commands on entering the directory")
        }
        _ if bare.starts_with("lefthook")
            && [".yml", ".yaml", ".toml", ".json", ".jsonc"]
                .iter()
                .any(|e| bare.ends_with(e)) =>
        {
            Some("names the git hooks lefthook installs and runs")
        }
        _ if name.ends_with(".code-workspace") => {
            Some("is an editor workspace, whose tasks and settings run commands")
        }
        _ if name.starts_with(".aider.conf") || name.starts_with(".aider.model") => {
            Some("configures aider, whose settings name commands it runs")
        }
        _ if name.starts_with('.') && !DATA_DOT_NAMES.contains(&name) => Some(
            "is a dot-name, the kind tools (agent CLIs, editors, CI, hook managers, direnv) read on their own; workers may write only the data ones (.gitignore, .editorconfig, version pins)",
        ),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_other_programs_run_are_handed_off_and_ordinary_work_is_not() {
        for p in [
            ".gitattributes",
            "src/.gitattributes",
            ".gitmodules",
            ".lfsconfig",
            ".envrc",
            "web/.envrc",
            ".mcp.json",
            ".claude/settings.json",
            ".codex/config.toml",
            ".aider.conf.yml",
            ".vscode/tasks.json",
            ".github/workflows/ci.yml",
            ".github/actions/x/action.yml",
            ".gitlab-ci.yml",
            "src/sub/.git/config",
            // The names themselves, whatever they are (a link to files elsewhere included).
            ".vscode",
            ".claude",
            "web/.devcontainer",
            ".github/workflows",
            "lefthook.yml",
            ".lefthook.yaml",
            ".devcontainer.json",
            ".gitea/workflows/ci.yml",
            ".forgejo/workflows/ci.yml",
            "mise.toml",
            ".mise.toml",
            "mise.local.toml",
            ".config/mise/config.toml",
            "atelier.code-workspace",
            // Spelled as a case-insensitive or NTFS/HFS+ file system reads them.
            ".GitAttributes",
            "src/.ENVRC",
            ".envrc.",
            ".gitmodules ",
            ".git\u{200c}attributes",
            ".Claude/settings.json",
            ".GitHub/Workflows/ci.yml",
            // Dot-names nobody listed: refused by default.
            ".env",
            ".travis.yml",
            ".cirrus.yml",
            ".buildkite/pipeline.yml",
            ".githooks/pre-commit",
            ".opencode/config.json",
            ".amazonq/rules.md",
            ".zed/tasks.json",
            ".cargo/config.toml",
            "src/.eslintrc.js",
            "Jenkinsfile",
            "azure-pipelines.yml",
            "opencode.json",
            // A HEAD makes its folder a repository git uses (with objects/ and refs/ beside it).
            "vendor/x/HEAD",
            ".github/hooks/session.json",
            ".github/dependabot.yml",
            ".github/CODEOWNERS",
            ".github/copilot-instructions/x.json",
            "rust-toolchain.toml",
            "flake.nix",
            "devbox.json",
            "Jenkinsfile.release",
            "netlify.toml",
            "GITHUB~1/workflows/ci.yml",
            "GITATT~1",
            "CODEOWNERS",
            "docs/CODEOWNERS",
            "renovate.json",
            "buildkite.yml",
            "fly.toml",
            "Procfile",
            "default.nix",
            "pixi.toml",
            "rusty-hook.toml",
            "gradle/wrapper/gradle-wrapper.properties",
            "ruſt-toolchain.toml",
            "flake.nıx",
        ] {
            assert!(handed_off(p).is_some(), "{p}");
        }
        for p in [
            "src/lib.rs",
            "tests/new_test.rs",
            "Cargo.toml",
            "Cargo.lock",
            "README.md",
            "AGENTS.md",
            "CLAUDE.md",
            "docs/github.md",
            ".github/ISSUE_TEMPLATE/bug.md",
            ".github/pull_request_template.md",
            ".github/FUNDING.yml",
            "site/.well-known/security.txt",
            ".clang-format",
            ".gitignore",
            "src/workflows/mod.rs",
            "src/claude.rs",
            ".github",
            ".gitea/ISSUE_TEMPLATE/bug.md",
            "src/mise.rs",
            "docs/lefthook.md",
            "docs/workspace.md",
            ".editorconfig",
            "web/.nvmrc",
            ".python-version",
            "src/.gitkeep",
            "src/head/mod.rs",
            "docs/env.md",
            ".env.example",
            ".changeset/brave-cats.md",
            ".sqlx/query-1a2b.json",
            ".mailmap",
            "docs/tilde~notes.md",
            "src/backup~.rs",
        ] {
            assert_eq!(handed_off(p), None, "{p}");
        }
    }
}
