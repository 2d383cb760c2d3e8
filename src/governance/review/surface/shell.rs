//! Reading a shell command line as the judge surface needs it: its words (quotes removed), its
//! simple commands (split at `&&`, `||`, `;`, `|`, `&`, parentheses, each with the file its
//! standard input comes from), and the program each runs past assignments, compound-command
//! words (`if`, `{`) and wrappers (`env -u X`, `timeout -s KILL 60`, `poetry run`).

/// What a command's words are: a shell line split into words (quotes removed) and the
/// operators between them (`&&`, `||`, `;`, `|`, `&`, redirections, parentheses, backticks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Tok {
    Word(String),
    Op(String),
    /// A here-document's body (`<<EOF` … `EOF`): what the command reads on standard input.
    Here(String),
}

pub(super) fn lex(line: &str) -> Vec<Tok> {
    let mut chars: Vec<char> = line.chars().collect();
    let mut out = Vec::new();
    let mut word = String::new();
    let mut has_word = false;
    let mut i = 0;
    let flush = |word: &mut String, has: &mut bool, out: &mut Vec<Tok>| {
        if *has {
            out.push(Tok::Word(std::mem::take(word)));
            *has = false;
        }
    };
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\'' => {
                has_word = true;
                i += 1;
                while i < chars.len() && chars[i] != '\'' {
                    word.push(chars[i]);
                    i += 1;
                }
            }
            '"' => {
                has_word = true;
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    if chars[i] == '\\' && i + 1 < chars.len() {
                        i += 1;
                    }
                    word.push(chars[i]);
                    i += 1;
                }
            }
            // `$'…'`: quoted as `'…'` is.
            '$' if chars.get(i + 1) == Some(&'\'') => has_word = true,
            // `<(cmd)`, `>(cmd)`: a command whose output is a file; read as `$(cmd)`.
            '<' | '>' if chars.get(i + 1) == Some(&'(') => {
                flush(&mut word, &mut has_word, &mut out);
                let mut depth = 0;
                let mut inner = String::new();
                i += 1;
                while i < chars.len() {
                    match chars[i] {
                        '(' => depth += 1,
                        ')' => depth -= 1,
                        _ => {}
                    }
                    if depth == 0 {
                        break;
                    }
                    if !(depth == 1 && chars[i] == '(') {
                        inner.push(chars[i]);
                    }
                    i += 1;
                }
                out.push(Tok::Word(format!("$({inner})")));
            }
            // A line continued.
            '\\' if chars.get(i + 1) == Some(&'\n') => {
                i += 1;
            }
            '\\' if i + 1 < chars.len() => {
                has_word = true;
                word.push(chars[i + 1]);
                i += 1;
            }
            // A comment runs to the end of its line; a line ends a command as `;` does.
            '#' if !has_word => {
                while i + 1 < chars.len() && chars[i + 1] != '\n' {
                    i += 1;
                }
            }
            '\n' => {
                flush(&mut word, &mut has_word, &mut out);
                out.push(Tok::Op(";".into()));
            }
            c if c.is_whitespace() => flush(&mut word, &mut has_word, &mut out),
            '&' | '|' | ';' | '(' | ')' | '`' | '<' | '>' => {
                flush(&mut word, &mut has_word, &mut out);
                let mut op = c.to_string();
                if matches!(c, '&' | '|' | '>' | '<') && chars.get(i + 1) == Some(&c) {
                    op.push(c);
                    i += 1;
                }
                if op == "<<" && chars.get(i + 1) == Some(&'<') {
                    // `<<< word`: a here-string, read as standard input.
                    op.push('<');
                    i += 1;
                } else if op == "<<" {
                    if let Some(body) = here_document(&mut chars, i + 1) {
                        out.push(Tok::Op(op));
                        out.push(Tok::Here(body));
                        i += 1;
                        continue;
                    }
                }
                out.push(Tok::Op(op));
            }
            _ => {
                has_word = true;
                word.push(c);
            }
        }
        i += 1;
    }
    flush(&mut word, &mut has_word, &mut out);
    out
}

/// The here-document whose operator ends before `from` in `chars`: its delimiter word is read
/// and dropped, and its body (the lines after the operator's line, up to the delimiter's) is
/// taken out of `chars` and returned.
fn here_document(chars: &mut Vec<char>, from: usize) -> Option<String> {
    let mut i = from;
    if chars.get(i) == Some(&'-') {
        i += 1;
    }
    while chars.get(i).is_some_and(|c| *c == ' ' || *c == '\t') {
        i += 1;
    }
    let start = i;
    while chars
        .get(i)
        .is_some_and(|c| !c.is_whitespace() && !matches!(c, ';' | '|' | '&'))
    {
        i += 1;
    }
    let delim: String = chars[start..i]
        .iter()
        .filter(|c| !matches!(c, '\'' | '"' | '\\'))
        .collect();
    if delim.is_empty() {
        return None;
    }
    let line_end = (i..chars.len()).find(|&k| chars[k] == '\n')?;
    let rest: String = chars[line_end + 1..].iter().collect();
    let mut body = String::new();
    let mut consumed = 0;
    let mut closed = false;
    for l in rest.split_inclusive('\n') {
        consumed += l.chars().count();
        if l.trim() == delim {
            closed = true;
            break;
        }
        body.push_str(l);
    }
    if !closed {
        consumed = rest.chars().count();
    }
    chars.drain(start..i);
    let line_end = line_end - (i - start);
    chars.drain(line_end + 1..(line_end + 1 + consumed).min(chars.len()));
    Some(body)
}

/// Words a command starts with that only run the next word (`env`, `sudo`, `timeout 60`…).
const WRAPPERS: &[&str] = &[
    "env", "sudo", "time", "nice", "exec", "command", "builtin", "nohup", "xvfb-run", "stdbuf",
    "timeout", "uv", "poetry", "pipenv", "hatch", "pdm", "xargs", "busybox", "setsid", "ionice",
    "doas", "npx", "exec", "--",
];

/// A command line's simple commands (split at `&&`, `||`, `;`, `|`, `&`, parentheses), each
/// without its redirections (a redirection's target is written or read as data, not run).
pub(super) fn simple_commands(command: &str) -> Vec<Segment> {
    let mut cmd: Vec<String> = Vec::new();
    let mut skip_next = false;
    let mut stdin_next = false;
    let mut text_next = false;
    let mut stdin = None;
    let mut stdin_text = None;
    let mut piped = false;
    let mut segments: Vec<Segment> = Vec::new();
    for t in lex(command) {
        match t {
            Tok::Here(body) => stdin_text = Some(body),
            Tok::Word(w) => {
                if skip_next {
                    skip_next = false;
                    if std::mem::take(&mut stdin_next) {
                        stdin = Some(w);
                    } else if std::mem::take(&mut text_next) {
                        stdin_text = Some(w);
                    }
                    continue;
                }
                cmd.push(w);
            }
            Tok::Op(op) => {
                if op == "<<" {
                    continue;
                }
                if op.starts_with('<') || op.starts_with('>') {
                    // `sh < check.sh` runs what it reads, `sh <<< "…"` the text it is given.
                    stdin_next = op == "<";
                    text_next = op == "<<<";
                    // `2>&1`'s digits are not paths either.
                    if cmd
                        .last()
                        .is_some_and(|w| w.chars().all(|c| c.is_ascii_digit()))
                    {
                        cmd.pop();
                    }
                    skip_next = true;
                    continue;
                }
                if op == "&" && skip_next {
                    continue;
                }
                segments.push(Segment {
                    words: std::mem::take(&mut cmd),
                    stdin: stdin.take(),
                    stdin_text: stdin_text.take(),
                    piped,
                });
                piped = op == "|";
            }
        }
    }
    segments.push(Segment {
        words: cmd,
        stdin,
        stdin_text,
        piped,
    });
    segments
}

/// One simple command: its words, the file its standard input is redirected from, the text
/// it is given there (a here-document or here-string), and whether a pipe feeds it.
pub(super) struct Segment {
    pub(super) words: Vec<String>,
    pub(super) stdin: Option<String>,
    pub(super) stdin_text: Option<String>,
    pub(super) piped: bool,
}

/// A program's name as the reader knows it: `python3.12` and `pypy3` are `python3`, `nodejs`
/// is `node`.
pub(super) fn canonical(prog: &str) -> &str {
    let base = prog.rsplit('/').next().unwrap_or(prog);
    let versioned = |stem: &str| {
        base.strip_prefix(stem)
            .is_some_and(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_digit() || c == '.'))
    };
    if versioned("python") || versioned("pypy") || base == "pypy" {
        "python3"
    } else if base == "nodejs" {
        "node"
    } else {
        base
    }
}

/// Shell words that open or close a compound command; the command after them is what runs.
const RESERVED: &[&str] = &[
    "if", "then", "else", "elif", "while", "until", "do", "!", "{", "}", "fi", "done",
];

/// Options of wrappers (and of shells and interpreters) whose value is the next word
/// (`env -u HOME`, `timeout -s KILL`, `sh -o errexit`, `python3 -W error`).
const VALUE_OPTIONS: &[&str] = &[
    "-u",
    "-C",
    "-s",
    "-k",
    "-n",
    "-g",
    "-o",
    "+o",
    "-O",
    "+O",
    "-W",
    "-X",
    "--unset",
    "--chdir",
    "--signal",
    "--kill-after",
    "--adjustment",
    "--user",
    "--group",
];

/// A simple command from its program on: assignments (`CI=1`) and wrappers (`env`,
/// `timeout 60`, `poetry run`) skipped.
pub(super) fn program_and_arguments(seg: &[String]) -> &[String] {
    let mut words = seg;
    while let Some(w) = words.first() {
        let assignment = w.split_once('=').is_some_and(|(k, _)| {
            !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        });
        let base = w.rsplit('/').next().unwrap_or(w);
        if assignment || RESERVED.contains(&w.as_str()) {
            words = &words[1..];
        } else if WRAPPERS.contains(&base) {
            words = &words[1..];
            while let Some(w) = words.first().filter(|w| {
                w.starts_with('-')
                    || w.chars()
                        .all(|c| c.is_ascii_digit() || c == 's' || c == 'm')
                    || *w == "run"
            }) {
                words = &words[1..];
                if VALUE_OPTIONS.contains(&w.as_str()) && !words.is_empty() {
                    words = &words[1..];
                }
            }
        } else {
            break;
        }
    }
    words
}

/// Whether `prog` is a POSIX-like shell.
pub(super) fn is_shell(prog: &str) -> bool {
    matches!(prog, "sh" | "bash" | "dash" | "zsh" | "ksh")
}

/// Whether `prog` runs JavaScript the way node does (`-e`, `-r`).
pub(super) fn is_node(prog: &str) -> bool {
    matches!(prog, "node" | "nodejs" | "bun")
}
