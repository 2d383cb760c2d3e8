//! Credentials no prefix announces, told by their shape: a credential's name given an unquoted
//! value (`.env`, YAML, ini: `STRIPE_SECRET=…`, `api_key: …`) or a value with separators
//! (`SG.….…`), a URL that carries a password (`postgres://app:…@db`), a JSON Web Token, and
//! HTTP Basic credentials. Each is blocking: none is how code reads a credential at run time.

use super::{camel_to_snake, credential_name, random_looking};

/// What a line holds that is a credential by its shape, and the credential itself (for the
/// preview of its first characters).
pub(super) fn find(line: &str) -> Option<(&'static str, &str)> {
    url_password(line)
        .map(|p| ("a URL that carries a password", p))
        .or_else(|| jwt(line).map(|t| ("a JSON Web Token", t)))
        .or_else(|| basic(line).map(|b| ("HTTP Basic credentials", b)))
        .or_else(|| webhook(line).map(|w| ("a webhook URL, whose path is its secret", w)))
        .or_else(|| putty(line).map(|k| ("a PuTTY private key", k)))
        .or_else(|| user_flag(line).map(|p| ("a password given to `-u`/`--user`", p)))
        .or_else(|| {
            // `Name=value;Name=value` (connection strings) is read a pair at a time.
            line.split(';')
                .find_map(named_value)
                .map(|v| ("a credential's name given a random-looking value", v))
        })
}

/// A chat service's incoming-webhook URL with its secret path (Slack, Discord, Teams).
fn webhook(line: &str) -> Option<&str> {
    for host in [
        "hooks.slack.com/services/",
        "discord.com/api/webhooks/",
        "discordapp.com/api/webhooks/",
        ".webhook.office.com/webhookb2/",
    ] {
        if let Some(at) = line.find(host) {
            let rest = &line[at + host.len()..];
            let len = rest
                .find(|c: char| c.is_whitespace() || "\"'`)".contains(c))
                .unwrap_or(rest.len());
            if len >= 20 && !placeholder(&rest[..len]) {
                return Some(&rest[..len]);
            }
        }
    }
    None
}

/// A PuTTY key file's private part.
fn putty(line: &str) -> Option<&str> {
    let header = concat!("PuTTY-User-", "Key-File-");
    let private = concat!("Private-", "Lines:");
    [header, private]
        .iter()
        .find_map(|h| line.trim_start().starts_with(h).then_some(line.trim()))
        .filter(|_| !line.contains(concat!("Public-", "Lines")))
}

/// `curl -u user:password`, `--user user:password` with a password written out.
fn user_flag(line: &str) -> Option<&str> {
    for flag in [" -u ", " --user ", " --user="] {
        if let Some(at) = line.find(flag) {
            let rest = line[at + flag.len()..]
                .trim_start()
                .trim_start_matches(['"', '\'']);
            let word = rest
                .split(|c: char| c.is_whitespace() || c == '"' || c == '\'')
                .next()
                .unwrap_or("");
            if let Some((_, pw)) = word.split_once(':') {
                if pw.len() >= 6 && !placeholder(pw) {
                    return Some(pw);
                }
            }
        }
    }
    None
}

/// Values that stand for a credential rather than being one: a whole reference (`${DB_PASS}`,
/// `$DB_PASS`, `<password>`, `{{ pass }}`, `%(pass)s`, `%PASS%`), a mask (`****`, `xxxx`), or a
/// word that says so. A value that merely starts with `$` or `%` may be a password.
fn placeholder(v: &str) -> bool {
    let l = v.to_ascii_lowercase();
    let words = [
        "password", "passwd", "pass", "secret", "changeme", "example", "user", "token",
    ];
    let ident = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    let wrapped = |open: &str, close: &str| {
        v.starts_with(open) && v.ends_with(close) && v.len() > open.len() + close.len()
    };
    v.is_empty()
        || v.strip_prefix('$').is_some_and(ident)
        || wrapped("${", "}")
        || (v.starts_with('{') && v.ends_with('}'))
        || wrapped("<", ">")
        || wrapped("{{", "}}")
        || wrapped("%(", ")s")
        || (wrapped("%", "%") && ident(&v[1..v.len() - 1]))
        || v.chars().all(|c| matches!(c, '*' | 'x' | 'X' | '.'))
        || words.contains(&l.as_str())
        || l.starts_with("xxx")
        || l.starts_with("your")
}

/// `%XX` escapes decoded (a URL's userinfo is percent-encoded), as far as they are valid.
fn percent_decoded(v: &str) -> String {
    let b = v.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Hosts on the machine itself, where a test's database listens with a throwaway password.
fn local_host(host: &str) -> bool {
    let h = host.rsplit_once(':').map_or(host, |(h, _)| h);
    matches!(h, "localhost" | "127.0.0.1" | "[::1]" | "0.0.0.0" | "::1")
}

/// The password of a `scheme://user:password@host` URL on the line.
fn url_password(line: &str) -> Option<&str> {
    for (at, _) in line.match_indices("://") {
        let rest = &line[at + 3..];
        let end = rest
            .find(|c: char| {
                c == '/' || c == '?' || c == '#' || c.is_whitespace() || "\"'`".contains(c)
            })
            .unwrap_or(rest.len());
        let authority = &rest[..end];
        let query = rest[end..].split(['?', '&']).skip(1).find_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            let v = v
                .split(['&', '#', '"', '\'', ' ', '\\'])
                .next()
                .unwrap_or(v);
            matches!(
                k.to_ascii_lowercase().as_str(),
                "password"
                    | "pwd"
                    | "pass"
                    | "passwd"
                    | "token"
                    | "secret"
                    | "apikey"
                    | "api_key"
                    | "access_token"
            )
            .then_some(v)
        });
        let (host, userinfo) = match authority.rsplit_once('@') {
            Some((userinfo, host)) => (host, Some(userinfo)),
            None => (authority, None),
        };
        let password = userinfo
            .and_then(|u| u.split_once(':'))
            .map(|(_, p)| p)
            .or(query);
        if let Some(password) = password {
            let plain = percent_decoded(password);
            let weighty = !local_host(host) || random_looking(&plain, 12);
            if plain.len() >= 4 && !placeholder(&plain) && weighty {
                return Some(password);
            }
        }
    }
    None
}

fn b64url(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// A JSON Web Token: `eyJ` (a JSON object's start, in base64) and three base64url parts.
fn jwt(line: &str) -> Option<&str> {
    for (at, _) in line.match_indices("eyJ") {
        if line[..at].ends_with(b64url) {
            continue;
        }
        let len = line[at..]
            .find(|c: char| !(b64url(c) || c == '.'))
            .unwrap_or(line.len() - at);
        let token = &line[at..at + len];
        let parts: Vec<&str> = token.split('.').collect();
        if parts.len() == 3 && parts[0].len() >= 10 && parts[1].len() >= 10 && parts[2].len() >= 16
        {
            return Some(token);
        }
    }
    None
}

/// `Basic <base64 of user:password>`.
fn basic(line: &str) -> Option<&str> {
    use base64::Engine;
    let lower = line.to_ascii_lowercase();
    for (at, _) in lower.match_indices("basic ") {
        let rest = &line[at + 6..];
        let len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || "+/=".contains(c)))
            .unwrap_or(rest.len());
        let encoded = &rest[..len];
        let decoded = base64::engine::general_purpose::STANDARD.decode(encoded);
        let pair = decoded.ok().and_then(|d| String::from_utf8(d).ok());
        if encoded.len() >= 8
            && pair.is_some_and(|p| p.split_once(':').is_some_and(|(_, pw)| !pw.is_empty()))
        {
            return Some(encoded);
        }
    }
    None
}

/// A credential's name given a value, quoted or not, that is random-looking whole or in one of
/// its parts (`SG.<22>.<43>`, `id:secret`): `.env`'s `NAME=value`, YAML's `name: value`.
fn named_value(line: &str) -> Option<&str> {
    let t = line.trim_start();
    let t = t
        .strip_prefix("export ")
        .unwrap_or(t)
        .trim_start_matches("- ");
    let sep = t.find(['=', ':'])?;
    let name = t[..sep].trim().trim_matches(['"', '\'']);
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c))
    {
        return None;
    }
    let last = name.rsplit('.').next().unwrap_or(name).replace('-', "_");
    if !credential_name(&camel_to_snake(&last)) {
        return None;
    }
    let value = t[sep + 1..].trim_start_matches(['=', ' ', '\t']);
    let value = value.split(" #").next().unwrap_or(value).trim();
    // YAML's tags and anchors before a value (`!!str …`, `&key …`) are not part of it.
    let mut value = value;
    while let Some(rest) = value
        .strip_prefix('!')
        .or_else(|| value.strip_prefix('&'))
        .and_then(|r| r.split_once(' ').map(|(_, v)| v.trim_start()))
    {
        value = rest;
    }
    let value = value
        .trim_end_matches([',', ';'])
        .trim_matches(['"', '\'', '`']);
    if placeholder(value) || value.contains(char::is_whitespace) {
        return None;
    }
    let random = random_looking(value, 16)
        || value
            .split(['.', ':', '@', '/'])
            .any(|piece| random_looking(piece, 16));
    random.then_some(value)
}
