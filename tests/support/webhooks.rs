//! GitHub webhook payloads for tests: the examples vendored in `tests/fixtures/github/webhooks/`
//! (see its README), re-addressed to a test repository, and signed as GitHub signs them.

use hmac::{Hmac, Mac};
use serde_json::Value;

/// The vendored example for `event` (`"pull_request"`) and `action` (`Some("opened")`), parsed.
pub fn example(event: &str, action: Option<&str>) -> Value {
    let file = match action {
        Some(action) => format!("{event}.{action}.json"),
        None => format!("{event}.json"),
    };
    let path = format!(
        "{}/tests/fixtures/github/webhooks/{file}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("no vendored webhook example {path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parsing {path}: {e}"))
}

/// Where [`readdress`] moves an example to. Build it with [`Readdress::to`] and struct update
/// syntax: `Readdress { pull: Some(3), ..Readdress::to("alice/demo") }`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Readdress<'a> {
    /// `owner/name`.
    pub repository: &'a str,
    /// The pull request's (or issue's) number.
    pub pull: Option<u64>,
    pub head_sha: Option<&'a str>,
    pub head_ref: Option<&'a str>,
    pub base_ref: Option<&'a str>,
    /// A push's `ref` (`refs/heads/main`).
    pub push_ref: Option<&'a str>,
    /// A push's `after`.
    pub after: Option<&'a str>,
    pub comment_body: Option<&'a str>,
}

impl<'a> Readdress<'a> {
    /// To `repository` (`owner/name`), changing nothing else.
    pub fn to(repository: &'a str) -> Readdress<'a> {
        Readdress {
            repository,
            ..Readdress::default()
        }
    }
}

/// Re-addresses an example to the test repository:
/// - the repository: every repository object whose `full_name` is the example's
///   `repository.full_name` gets the new `full_name`, `name` and `owner.login` (and the owner's
///   URLs), and every string that embeds the old `owner/name` (`html_url`, `url`, `*_url`, `href`,
///   `compare`, ...) embeds the new one;
/// - `pull`: `number`, `pull_request.number` and `issue.number`, and the `/pulls/N`, `/pull/N`
///   and `/issues/N` in strings;
/// - `head_sha`: `pull_request.head.sha` and every string holding the old head sha (so also
///   `statuses_url`, a review's `commit_id` and a synchronize's `after`);
/// - `head_ref`/`base_ref`: `pull_request.head.ref`/`base.ref`, and their `label`s (`owner:ref`);
/// - `push_ref`: `ref`; `after`: `after` and every string holding the old `after` (the head
///   commit's and commits' `id` and `url`, `compare`);
/// - `comment_body`: `comment.body`, or a review event's `review.body`.
///
/// Fields the example lacks are left absent, not added.
pub fn readdress(value: &mut Value, to: &Readdress) {
    let (new_owner, new_name) = to
        .repository
        .split_once('/')
        .unwrap_or_else(|| panic!("repository {:?} is not owner/name", to.repository));

    if let Some(old_full) = value["repository"]["full_name"]
        .as_str()
        .map(str::to_string)
    {
        if old_full != to.repository {
            let old_owner = old_full.split('/').next().unwrap_or_default().to_string();
            rename_repository_objects(value, &old_full, &old_owner, new_owner, new_name);
            map_strings(value, &mut |s| {
                replace_bounded(s, &old_full, to.repository, |c| c == '/' || c == ':')
            });
        }
    }

    if let Some(pull) = to.pull {
        let old = [
            &value["pull_request"]["number"],
            &value["issue"]["number"],
            &value["number"],
        ]
        .into_iter()
        .find_map(Value::as_u64);
        if let Some(old) = old {
            let (old, new) = (old.to_string(), pull.to_string());
            map_strings(value, &mut |s| {
                let mut s = s.to_string();
                for segment in ["/pulls/", "/pull/", "/issues/"] {
                    s = replace_bounded(
                        &s,
                        &format!("{segment}{old}"),
                        &format!("{segment}{new}"),
                        |_| true,
                    );
                }
                s
            });
        }
        for pointer in ["/number", "/pull_request/number", "/issue/number"] {
            if let Some(number) = value.pointer_mut(pointer) {
                *number = Value::from(pull);
            }
        }
    }

    if let Some(sha) = to.head_sha {
        if let Some(old) = value
            .pointer("/pull_request/head/sha")
            .and_then(Value::as_str)
        {
            let old = old.to_string();
            map_strings(value, &mut |s| s.replace(&old, sha));
        }
        set(value, "/pull_request/head/sha", sha);
    }
    for (side, new_ref) in [("head", to.head_ref), ("base", to.base_ref)] {
        if let Some(new_ref) = new_ref {
            set(value, &format!("/pull_request/{side}/ref"), new_ref);
        }
    }
    // The labels are `owner:ref` of the (possibly renamed) repository and (possibly new) ref.
    for side in ["head", "base"] {
        let Some(part) = value.pointer(&format!("/pull_request/{side}")) else {
            continue;
        };
        if let (Some(owner), Some(r), Some(_)) = (
            part.pointer("/repo/owner/login").and_then(Value::as_str),
            part["ref"].as_str(),
            part.get("label"),
        ) {
            let label = format!("{owner}:{r}");
            set(value, &format!("/pull_request/{side}/label"), &label);
        }
    }

    if let Some(push_ref) = to.push_ref {
        set(value, "/ref", push_ref);
    }
    if let Some(after) = to.after {
        if let Some(old) = value["after"].as_str().map(str::to_string) {
            let (old_short, new_short) = (&old[..old.len().min(12)], &after[..after.len().min(12)]);
            map_strings(value, &mut |s| {
                let s = s.replace(&old, after);
                // `compare` may name the commits abbreviated (`.../compare/1a2b3c4d5e6f...`).
                replace_bounded(&s, old_short, new_short, |c| c == '/' || c == '.')
            });
        }
        set(value, "/after", after);
    }

    if let Some(body) = to.comment_body {
        if value.get("comment").is_some_and(Value::is_object) {
            set(value, "/comment/body", body);
        } else if value.get("review").is_some_and(Value::is_object) {
            set(value, "/review/body", body);
        }
    }
}

/// `sha256=<hex of HMAC-SHA256(secret, body)>`, as GitHub sends in X-Hub-Signature-256.
pub fn sign(secret: &str, body: &[u8]) -> String {
    let mut mac =
        Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key length");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// Sets the field at `pointer` if the example has it.
fn set(value: &mut Value, pointer: &str, new: &str) {
    if let Some(field) = value.pointer_mut(pointer) {
        *field = Value::from(new);
    }
}

fn map_strings(value: &mut Value, f: &mut dyn FnMut(&str) -> String) {
    match value {
        Value::String(s) => *s = f(s),
        Value::Array(items) => items.iter_mut().for_each(|v| map_strings(v, f)),
        Value::Object(map) => map.values_mut().for_each(|v| map_strings(v, f)),
        _ => {}
    }
}

/// Replaces the occurrences of `old` in `s` that start the string or follow a character for
/// which `before` holds, and that end the string or precede a character that could not continue
/// a name or number (not alphanumeric, `-` or `_`).
fn replace_bounded(s: &str, old: &str, new: &str, before: impl Fn(char) -> bool) -> String {
    if old.is_empty() {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    let mut prev: Option<char> = None;
    while let Some(at) = rest.find(old) {
        let ahead = rest[..at].chars().next_back().or(prev);
        let after = rest[at + old.len()..].chars().next();
        let starts = ahead.is_none_or(&before);
        let ends = after.is_none_or(|c| !(c.is_alphanumeric() || c == '-' || c == '_'));
        out.push_str(&rest[..at]);
        if starts && ends {
            out.push_str(new);
        } else {
            out.push_str(old);
        }
        prev = old.chars().next_back();
        rest = &rest[at + old.len()..];
    }
    out.push_str(rest);
    out
}

/// Renames every repository object (one with `full_name` == `old_full`) and its owner.
fn rename_repository_objects(
    value: &mut Value,
    old_full: &str,
    old_owner: &str,
    new_owner: &str,
    new_name: &str,
) {
    match value {
        Value::Object(map) => {
            if map.get("full_name").and_then(Value::as_str) == Some(old_full) {
                map.insert("name".into(), Value::from(new_name));
                if let Some(owner) = map.get_mut("owner").filter(|o| o.is_object()) {
                    if owner.get("login").is_some() {
                        owner["login"] = Value::from(new_owner);
                    }
                    if owner.get("name").and_then(Value::as_str) == Some(old_owner) {
                        owner["name"] = Value::from(new_owner);
                    }
                    map_strings(owner, &mut |s| {
                        replace_bounded(
                            s,
                            &format!("/{old_owner}"),
                            &format!("/{new_owner}"),
                            |_| true,
                        )
                    });
                }
            }
            for v in map.values_mut() {
                rename_repository_objects(v, old_full, old_owner, new_owner, new_name);
            }
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|v| rename_repository_objects(v, old_full, old_owner, new_owner, new_name)),
        _ => {}
    }
}
