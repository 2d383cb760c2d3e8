//! Worker prompts: a minijinja template (strict undefined, no auto-escaping) that users may
//! replace with `prompts/worker.j2` in the repository; the built-in default is Atelier's own.

use minijinja::{Environment, UndefinedBehavior};
use serde::Serialize;

/// The default worker prompt: Atelier's own `prompts/worker.j2`.
pub const DEFAULT_TEMPLATE: &str = include_str!("../../prompts/worker.j2");

/// A prompt's text as the protected branch holds it: [`crate::git::text_on_branch`] (never
/// through a link, a submodule or a folder; UTF-8 only).
pub use crate::git::text_on_branch;

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
    /// The bullet lines of `prompts/lessons.md` on the protected branch (`improve::lessons`).
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
