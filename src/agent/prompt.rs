//! Worker prompts: a minijinja template (strict undefined, no auto-escaping) that users may
//! replace with `prompts/worker.j2` in the repository; the built-in default is Atelier's own.

use minijinja::{Environment, UndefinedBehavior};
use serde::Serialize;

/// The default worker prompt: Atelier's own `prompts/worker.j2`.
pub const DEFAULT_TEMPLATE: &str = include_str!("../../prompts/worker.j2");

/// A prompt's text (a template, the lessons) as the protected branch's `tree` holds it at
/// `path` (`None`: absent). Text only, and never through a symbolic link: git keeps a link's
/// target path as its text, and what a checkout would find behind it is the working tree's (or
/// anyone's), so a link on the way is refused, naming it, rather than read or skipped.
pub fn text_on_branch(
    repo: &git2::Repository,
    tree: &git2::Tree<'_>,
    path: &str,
    branch: &str,
) -> crate::workflow::Result<Option<String>> {
    use crate::workflow::Error;
    match crate::git::not_a_file_on_path(repo, tree, path)? {
        Some((link, crate::git::NotAFile::Link { target })) => {
            return Err(Error::input(format!(
                "{link} on {branch} is a symbolic link (to `{target}`): {path} is read as the branch holds it, never through a link; commit the file itself in its place with a proposal"
            )))
        }
        Some((at, crate::git::NotAFile::Submodule)) => {
            return Err(Error::input(format!(
                "{at} on {branch} is a submodule: {path} is read as the branch holds it, never from another repository; commit the file itself in its place with a proposal"
            )))
        }
        None => {}
    }
    if tree
        .get_path(std::path::Path::new(path))
        .is_ok_and(|e| e.kind() == Some(git2::ObjectType::Tree))
    {
        return Err(Error::input(format!(
            "{path} on {branch} is a folder, not a file; commit the file itself in its place with a proposal"
        )));
    }
    match crate::git::read_file(repo, tree, path)? {
        Some(b) => String::from_utf8(b).map(Some).map_err(|_| {
            Error::input(format!(
                "{path} on {branch}: not UTF-8 text; fix it with a proposal"
            ))
        }),
        None => Ok(None),
    }
}

/// A file (or its head) shown to the worker.
#[derive(Debug, Clone, Serialize)]
pub struct ContextFile {
    pub path: String,
    pub text: String,
    pub truncated: bool,
}

/// What the template sees.
#[derive(Debug, Clone, Serialize)]
pub struct PromptTask {
    pub id: String,
    pub title: String,
    pub goal: String,
    pub files: Vec<String>,
    pub criteria: Vec<String>,
    pub checks: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PromptInput {
    pub task: PromptTask,
    pub completed: Vec<String>,
    pub do_not_retry: Vec<String>,
    /// Golden paths of the same role, trimmed.
    pub examples: Vec<String>,
    /// The bullet lines of `prompts/lessons.md` on the protected branch (`swarm::lessons`).
    pub lessons: Vec<String>,
    pub context: Vec<ContextFile>,
}

/// Renders a template; an unknown variable is an error naming it.
pub fn render(template: &str, input: &PromptInput) -> Result<String, String> {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.set_auto_escape_callback(|_| minijinja::AutoEscape::None);
    env.add_template("worker", template)
        .map_err(|e| format!("prompt template: {e}"))?;
    let t = env
        .get_template("worker")
        .map_err(|e| format!("prompt template: {e}"))?;
    t.render(minijinja::value::Serde(input))
        .map_err(|e| format!("prompt template: {e}"))
}

/// Whether `template` renders at all: a sample input with one of everything, so a syntax error
/// or an unknown variable is found before a run starts rather than at its first attempt.
pub fn check(template: &str) -> Result<(), String> {
    let one = |s: &str| vec![s.to_string()];
    let input = PromptInput {
        task: PromptTask {
            id: "plan:T1".into(),
            title: "Task".into(),
            goal: "Goal".into(),
            files: one("src/lib.rs"),
            criteria: one("criterion"),
            checks: one("true"),
        },
        completed: one("plan:T0: Done"),
        do_not_retry: one("error"),
        examples: one("example"),
        lessons: one("lesson"),
        context: vec![ContextFile {
            path: "src/lib.rs".into(),
            text: "text".into(),
            truncated: false,
        }],
    };
    render(template, &input).map(|_| ())
}

/// Cuts files to a byte budget, in order, marking what was cut.
pub fn slice(files: Vec<(String, String)>, budget: usize) -> Vec<ContextFile> {
    let mut left = budget;
    let mut out = Vec::new();
    for (path, text) in files {
        if left == 0 {
            break;
        }
        let overhead = path.len() + 8;
        if overhead >= left {
            break;
        }
        let room = left - overhead;
        let (text, truncated) = if text.len() > room {
            let mut cut = room;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            (text[..cut].to_string(), true)
        } else {
            (text, false)
        };
        left -= overhead + text.len();
        out.push(ContextFile {
            path,
            text,
            truncated,
        });
    }
    out
}
