//! Parsing of OpenSSH's `allowed_signers` file (`man ssh-keygen`, section ALLOWED SIGNERS),
//! restricted to the subset Atelier supports: one literal principal per line, no certificate
//! authorities, and only the `namespaces`, `valid-after` and `valid-before` options. The
//! governance gate uses it to map the key that signed an approval to its principal, namespaces
//! and validity window. It is pure: no IO, no clock and no environment; the caller reads the
//! file and passes the current time in.
//!
//! The parser does not judge keys: any key type the `ssh-key` build can read is accepted (the
//! gate enforces ed25519), and the same key listed under several principals is accepted too
//! (the gate decides what that ambiguity means; [`AllowedSigners::find`] returns every entry).
//!
//! Times in `valid-after` and `valid-before` must end in `Z` and are read as UTC. A time without
//! it is refused: `ssh-keygen` reads it in the verifier's local time zone, so the two tools would
//! disagree by hours (looser than the gate east of UTC for `valid-before`, west for
//! `valid-after`).
//!
//! Everything this parser accepts, `ssh-keygen -Y verify` reads the same way; where the two
//! differ, Atelier refuses the whole file (GOVERNANCE.md, "Keys", lists those cases, and
//! `tests/signers_vs_sshkeygen.rs` compares the two tools). Each line is one rule: the gate
//! judges a key by the lines that list it, each as a whole.

use crate::governance::time::{format_rfc3339, unix_from_civil, Timestamp};
use ssh_key::public::KeyData;
use ssh_key::PublicKey;

/// A parsed `allowed_signers` file, in file order.
#[derive(Debug, Clone)]
pub struct AllowedSigners {
    pub entries: Vec<SignerEntry>,
}

/// One non-blank, non-comment line of the file.
#[derive(Debug, Clone)]
pub struct SignerEntry {
    /// The 1-based line number in the file.
    pub line: usize,
    pub principal: String,
    /// The names from `namespaces="a,b"`; `None` means any namespace.
    pub namespaces: Option<Vec<String>>,
    /// Unix seconds, UTC; the entry is valid from this instant on (inclusive).
    pub valid_after: Option<Timestamp>,
    /// Unix seconds, UTC; the entry is valid up to and including this instant (as OpenSSH).
    pub valid_before: Option<Timestamp>,
    /// The key, of any type; ed25519-only is enforced elsewhere. Its comment is empty.
    pub key: PublicKey,
}

/// Why a line of the file was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("line {line}: {reason}")]
pub struct AllowedSignersError {
    pub line: usize,
    pub reason: String,
}

/// The key types OpenSSH knows, spelled as in the key field of a line.
const KEY_TYPES: [&str; 8] = [
    "ssh-ed25519",
    "ssh-rsa",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
    "ssh-dss",
];

/// Whether `field` is the certificate spelling of a key type (`ssh-ed25519-cert-v01@openssh.com`).
fn is_cert_key_type(field: &str) -> bool {
    KEY_TYPES.iter().any(|t| {
        let base = t.strip_suffix("@openssh.com").unwrap_or(t);
        field.strip_prefix(base) == Some("-cert-v01@openssh.com")
    })
}

/// Parses the whole file. The first bad line stops parsing and is reported by number.
pub fn parse(text: &str) -> Result<AllowedSigners, AllowedSignersError> {
    let mut entries = Vec::new();
    for (index, raw) in text.split('\n').enumerate() {
        let line = index + 1;
        let fail = |reason: String| AllowedSignersError { line, reason };
        if raw.contains('\r') {
            let reason = "CR found: the file must use LF line endings; convert it (e.g. dos2unix)";
            return Err(fail(reason.to_string()));
        }
        let trimmed = raw.trim_start_matches([' ', '\t']);
        if !trimmed.is_empty() && !trimmed.starts_with('#') {
            entries.push(parse_line(line, trimmed).map_err(fail)?);
        }
    }
    Ok(AllowedSigners { entries })
}

impl AllowedSigners {
    /// Every entry whose key equals `key` (compare the key data, ignore comments).
    pub fn find(&self, key: &KeyData) -> Vec<&SignerEntry> {
        self.entries
            .iter()
            .filter(|e| e.key.key_data() == key)
            .collect()
    }

    /// The distinct principals, in the order they first appear in the file.
    pub fn principals(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for entry in &self.entries {
            if !out.contains(&entry.principal.as_str()) {
                out.push(&entry.principal);
            }
        }
        out
    }
}

impl SignerEntry {
    /// Whether this entry may sign in namespace `ns`: always when it has no `namespaces` option,
    /// otherwise only on an exact match (namespace patterns are refused when parsing).
    pub fn allows_namespace(&self, ns: &str) -> bool {
        self.namespaces
            .as_ref()
            .is_none_or(|list| list.iter().any(|n| n == ns))
    }

    /// `None` when `now` is inside `[valid_after, valid_before]`, both ends inclusive as in
    /// OpenSSH (sshsig.c); otherwise `Some(text)` naming the bound that failed and its value.
    pub fn validity_at(&self, now: Timestamp) -> Option<String> {
        let (now_text, fmt) = (format_rfc3339(now), format_rfc3339);
        match (self.valid_after, self.valid_before) {
            (Some(after), _) if now < after => Some(format!(
                "not yet valid: valid-after is {} but the time is {now_text}",
                fmt(after)
            )),
            (_, Some(before)) if now > before => Some(format!(
                "expired: valid-before is {} but the time is {now_text}",
                fmt(before)
            )),
            _ => None,
        }
    }
}

/// How a field treats double quotes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Quoting {
    /// Quotes are ordinary characters (key fields).
    None,
    /// Whitespace inside double quotes does not end the field (the principal).
    Quotes,
    /// As `Quotes`, and `\"` is an escaped quote that neither opens nor closes, as OpenSSH's
    /// `sshkey_advance_past_options` reads the options field. Atelier refuses such escapes when
    /// it reads the option values, with a message that says so.
    Options,
}

/// Takes the next field off `rest`.
fn next_field<'a>(rest: &mut &'a str, quoting: Quoting) -> Result<Option<&'a str>, String> {
    let text = rest.trim_start_matches([' ', '\t']);
    let mut in_quotes = false;
    let mut escaped = false;
    let mut end = text.len();
    for (i, c) in text.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoting == Quoting::Options && text[i + 1..].starts_with('"') => escaped = true,
            '"' if quoting != Quoting::None => in_quotes = !in_quotes,
            ' ' | '\t' if !in_quotes => {
                end = i;
                break;
            }
            _ => {}
        }
    }
    if in_quotes && quoting == Quoting::Options && text.contains("\\\"") {
        return Err(format!(
            "expected a closing `\"` in `{text}`, found only `\\\"`, a backslash-escaped quote, \
             which does not close the value; Atelier supports no escapes in option values: \
             remove the backslash and write plain names, e.g. namespaces=\"atelier-approval\""
        ));
    }
    if in_quotes {
        return Err(format!(
            "expected a closing `\"` in `{text}`, found the end of the line; close the quote"
        ));
    }
    let (field, after) = text.split_at(end);
    *rest = after;
    Ok(Some(field).filter(|f| !f.is_empty()))
}

/// The options of one line.
#[derive(Default)]
struct Options {
    namespaces: Option<Vec<String>>,
    valid_after: Option<Timestamp>,
    valid_before: Option<Timestamp>,
}

fn parse_line(line: usize, text: &str) -> Result<SignerEntry, String> {
    let mut rest = text;
    let principal = parse_principal(next_field(&mut rest, Quoting::Quotes)?.unwrap_or(""))?;
    let second = next_field(&mut rest, Quoting::Options)?.ok_or_else(|| {
        format!(
            "expected a key type and key after principal `{principal}`, found the end of the \
             line; write `{principal} ssh-ed25519 AAAA...`"
        )
    })?;
    let (options, key_type) = if KEY_TYPES.contains(&second) || is_cert_key_type(second) {
        (Options::default(), second)
    } else {
        let key_type = next_field(&mut rest, Quoting::None)?.ok_or_else(|| {
            format!(
                "expected a key type (e.g. ssh-ed25519) after `{second}`, found the end of the \
                 line; add the signer's public key"
            )
        })?;
        (parse_options(second)?, key_type)
    };
    let key = parse_key(key_type, next_field(&mut rest, Quoting::None)?)?;
    // Whatever remains is the comment, which OpenSSH ignores and so does Atelier.
    Ok(SignerEntry {
        line,
        principal,
        namespaces: options.namespaces,
        valid_after: options.valid_after,
        valid_before: options.valid_before,
        key,
    })
}

fn parse_principal(field: &str) -> Result<String, String> {
    let principal = match field.strip_prefix('"') {
        Some(inner) => inner.strip_suffix('"').unwrap_or(inner),
        None => field,
    };
    if principal.contains('"') {
        return Err(format!(
            "expected a principal, optionally in double quotes, found `{field}`; remove the \
             stray `\"` or put a space after the closing quote"
        ));
    }
    if principal.is_empty() {
        return Err(
            "expected a principal (e.g. alice@example.com), found an empty one; \
                    write the signer's identity first on the line"
                .to_string(),
        );
    }
    if let Some(c) = principal
        .chars()
        .find(|c| matches!(c, ',' | '*' | '?' | '!'))
    {
        return Err(format!(
            "expected exactly one literal principal, found `{c}` in `{principal}`; Atelier \
             supports no principal lists or patterns: write one line per principal"
        ));
    }
    Ok(principal.to_string())
}

/// Parses the options field, e.g. `namespaces="git,file",valid-after="20260101Z"`.
fn parse_options(field: &str) -> Result<Options, String> {
    let mut opts = Options::default();
    let mut rest = field;
    loop {
        let (name, after_name) = rest.split_at(rest.find(['=', ',']).unwrap_or(rest.len()));
        let lower = name.to_ascii_lowercase();
        if name.is_empty() {
            return Err(format!(
                "expected an option name, found an empty one in `{field}`; remove the stray \
                 `,` or `=`"
            ));
        }
        if lower == "cert-authority" {
            return Err(
                "certificate authorities are not supported: list each signer's own key \
                        instead of a cert-authority line"
                    .to_string(),
            );
        }
        if !matches!(
            lower.as_str(),
            "namespaces" | "valid-after" | "valid-before"
        ) {
            return Err(format!(
                "unknown option or key type `{name}`: expected namespaces=\"...\", \
                 valid-after=\"...\", valid-before=\"...\" or a key type such as ssh-ed25519; \
                 remove or fix it"
            ));
        }
        let Some(quoted) = after_name.strip_prefix("=\"") else {
            return Err(format!(
                "expected option `{name}` to have a double-quoted value like {lower}=\"...\", \
                 found `{}`; quote the value as ssh-keygen requires",
                rest.split(',').next().unwrap_or(name)
            ));
        };
        let close = quoted.find('"').ok_or_else(|| {
            format!("expected a closing `\"` for option `{name}`, found none; close the quote")
        })?;
        let value = &quoted[..close];
        if let Some(before) = value.strip_suffix('\\') {
            return Err(format!(
                "found `\\\"`, a backslash-escaped quote, in the value of `{name}` (`{field}`): \
                 ssh-keygen would read a quote inside the value, and Atelier supports no escapes \
                 in option values (no namespace or time contains a quote); write the value \
                 without quotes or backslashes inside, e.g. {lower}=\"{}\"",
                example_value(&lower, before)
            ));
        }
        if value.contains('\\') {
            return Err(format!(
                "found a backslash in the value of `{name}`; Atelier supports no escapes in \
                 option values: remove it"
            ));
        }
        let duplicate = match lower.as_str() {
            "namespaces" => opts.namespaces.replace(parse_namespaces(value)?).is_some(),
            "valid-after" => opts.valid_after.replace(parse_time(name, value)?).is_some(),
            _ => opts
                .valid_before
                .replace(parse_time(name, value)?)
                .is_some(),
        };
        if duplicate {
            return Err(format!(
                "option `{lower}` is given twice; keep exactly one `{lower}` on the line"
            ));
        }
        rest = match &quoted[close + 1..] {
            "" => break,
            "," => {
                return Err(format!(
                    "expected another option after the trailing `,` in `{field}`, found the \
                     end of the options; remove the trailing comma"
                ))
            }
            more => more.strip_prefix(',').ok_or_else(|| {
                format!(
                    "expected `,` or a space after the value of `{name}`, found `{more}`; \
                     separate options with commas"
                )
            })?,
        };
    }
    let window = opts.valid_after.zip(opts.valid_before);
    if let Some((after, before)) = window.filter(|(after, before)| after >= before) {
        return Err(format!(
            "expected valid-after ({}) to be earlier than valid-before ({}); fix the window",
            format_rfc3339(after),
            format_rfc3339(before)
        ));
    }
    Ok(opts)
}

/// A value to suggest for option `lower` in a message, from what the line had before a mistake.
fn example_value<'a>(lower: &str, before: &'a str) -> &'a str {
    match lower {
        "namespaces" if !before.is_empty() && !before.contains(['"', '\\']) => before,
        "namespaces" => "atelier-approval",
        _ => "20300101Z",
    }
}

fn parse_namespaces(value: &str) -> Result<Vec<String>, String> {
    value
        .split(',')
        .map(|ns| {
            if ns.is_empty() || ns.contains(char::is_whitespace) {
                Err(format!(
                    "expected comma-separated namespace names in namespaces=\"{value}\", found \
                     an empty name or whitespace; write e.g. namespaces=\"git,file\""
                ))
            } else if let Some(c) = ns.chars().find(|c| matches!(c, '*' | '?' | '!')) {
                Err(format!(
                    "expected literal namespace names, found `{c}` in `{ns}`; Atelier supports \
                     no namespace patterns: list each namespace"
                ))
            } else {
                Ok(ns.to_string())
            }
        })
        .collect()
}

/// Parses `YYYYMMDD[HHMM[SS]]Z` as UTC. A time without the `Z` is refused: ssh-keygen reads it
/// in the verifier's local time zone, so the gate and ssh-keygen would disagree by hours.
fn parse_time(name: &str, value: &str) -> Result<Timestamp, String> {
    let lower = name.to_ascii_lowercase();
    let err = || {
        format!(
            "expected {name} to be a UTC time YYYYMMDD[HHMM[SS]]Z (e.g. 20260131Z or \
             20260131235959Z), found `{value}`; fix the date"
        )
    };
    let well_formed = |digits: &str| {
        matches!(digits.len(), 8 | 12 | 14) && digits.bytes().all(|b| b.is_ascii_digit())
    };
    let digits = match value.strip_suffix('Z') {
        Some(digits) => digits,
        None if well_formed(value) => {
            return Err(format!(
                "expected {name} to end in `Z` (UTC), found `{value}` without it: ssh-keygen \
                 reads a time without `Z` in the local time zone of whoever verifies, so it \
                 would disagree with the gate by hours; add the `Z`: {lower}=\"{value}Z\""
            ))
        }
        None => match ["z", "UTC", "utc"]
            .iter()
            .find_map(|s| value.strip_suffix(s))
        {
            Some(digits) if well_formed(digits) => {
                return Err(format!(
                    "expected {name} to end in an upper-case `Z`, found `{value}`; Atelier \
                     accepts only the `Z` spelling of UTC: write {lower}=\"{digits}Z\""
                ))
            }
            _ => return Err(err()),
        },
    };
    if !well_formed(digits) {
        return Err(err());
    }
    // All fields are ASCII digits, so slicing and parsing cannot fail; absent fields are 0.
    let num = |at: usize| -> u32 {
        digits
            .get(at..at + 2)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0)
    };
    let year = i64::from(num(0) * 100 + num(2));
    let t = unix_from_civil(year, num(4), num(6), num(8), num(10), num(12)).ok_or_else(err)?;
    if t <= 0 {
        return Err(format!(
            "expected {name} after 1970-01-01T00:00:00Z, found `{value}`; ssh-keygen refuses \
             earlier times: use a later date"
        ));
    }
    Ok(t)
}

fn parse_key(key_type: &str, b64: Option<&str>) -> Result<PublicKey, String> {
    if is_cert_key_type(key_type) {
        return Err(format!(
            "expected a plain public key, found the certificate type `{key_type}`; certificates \
             are not supported: list the signer's own key (e.g. ssh-ed25519)"
        ));
    }
    if !KEY_TYPES.contains(&key_type) {
        return Err(format!(
            "expected a key type such as ssh-ed25519, found `{key_type}`; copy the line of the \
             signer's .pub file as ssh-keygen wrote it"
        ));
    }
    let b64 = b64.ok_or_else(|| {
        format!(
            "expected the base64 key data after `{key_type}`, found the end of the line; paste \
             the whole public key"
        )
    })?;
    let mismatch = |actual: &str| {
        format!(
            "the line says `{key_type}` but the key data is a `{actual}` key; write the key \
             type that matches the key (copy the .pub file line unchanged)"
        )
    };
    match PublicKey::from_openssh(&format!("{key_type} {b64}")) {
        Ok(key) if key.algorithm().as_str() == key_type => Ok(key),
        Ok(key) => Err(mismatch(key.algorithm().as_str())),
        Err(_) => {
            // `ssh-key` reports a stated/encoded type mismatch like bad data, so try the other
            // types to tell the two apart.
            let readable = |t: &&str| PublicKey::from_openssh(&format!("{t} {b64}")).is_ok();
            match KEY_TYPES.into_iter().find(readable) {
                Some(actual) => Err(mismatch(actual)),
                None => Err(format!(
                    "expected a valid base64 {key_type} public key, found data that this build \
                     of Atelier cannot read (it may be damaged, or the key type unsupported, as \
                     ECDSA is unless ssh-key's `ecdsa` feature is on); paste the key exactly as \
                     in the .pub file, and prefer an ssh-ed25519 key"
                )),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Generated with `ssh-keygen -t ed25519 -N '' -C alice@example.com`.
    const ED_ALICE: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAICuKFQ+OA96/BKB3//5TBtg98WHNPqbB4deRkbWam+fT alice@example.com";
    /// Generated with `ssh-keygen -t ed25519 -N '' -C carol`.
    const ED_CAROL: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIP6EgRBsxeq9rUr2jhDmSttRR1KllHeeh73HAwon411K carol";
    /// Generated with `ssh-keygen -t ecdsa -b 256 -N '' -C bob@example.com`.
    const EC_BOB: &str = "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBIakGHsbBySvDEVrGjdnryONicf75WZAWxCghUHA4mgo4VrUTn5JbTcOs+oEYFIbztpUFiA9neS3iKMBiqAkqGg= bob@example.com";

    /// The `keytype base64` part of a `.pub` line, without its comment.
    fn bare(pub_line: &str) -> String {
        pub_line.split(' ').take(2).collect::<Vec<_>>().join(" ")
    }

    /// Replaces `KEY` in a test template with Alice's bare key and `B64` with its base64.
    fn fill(template: &str) -> String {
        let b64 = ED_ALICE
            .split(' ')
            .nth(1)
            .expect("a .pub line has a base64 field");
        template.replace("KEY", &bare(ED_ALICE)).replace("B64", b64)
    }

    fn key_data(pub_line: &str) -> KeyData {
        PublicKey::from_openssh(pub_line)
            .expect("test keys are valid")
            .key_data()
            .clone()
    }

    fn one(text: &str) -> SignerEntry {
        let parsed = parse(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        assert_eq!(parsed.entries.len(), 1, "{text:?}");
        parsed.entries[0].clone()
    }

    /// Each case is `line template => principal|namespaces|valid-after|valid-before`.
    const VALID: &[&str] = &[
        "alice@example.com KEY alice@example.com => alice@example.com|-|-|-",
        "  \talice\tKEY    => alice|-|-|-",
        "\"Alice Smith\" KEY a comment with \"quotes\", commas => Alice Smith|-|-|-",
        "\"alice\" KEY => alice|-|-|-",
        "alice namespaces=\"git,file\" KEY c => alice|git,file|-|-",
        "alice NameSpaces=\"atelier\",VALID-AFTER=\"20260101Z\" KEY => alice|atelier|2026-01-01T00:00:00Z|-",
        "alice valid-after=\"202601021230Z\",valid-before=\"20270304050607Z\" KEY => alice|-|2026-01-02T12:30:00Z|2027-03-04T05:06:07Z",
        "alice valid-before=\"20991231Z\" KEY #not a comment marker here => alice|-|-|2099-12-31T00:00:00Z",
    ];

    #[test]
    fn valid_lines() {
        let time = |t: Option<Timestamp>| t.map_or("-".to_string(), format_rfc3339);
        for case in VALID {
            let (template, expected) = case.split_once(" => ").expect("a case has two parts");
            let entry = one(&fill(template));
            let namespaces = entry.namespaces.as_ref().map(|v| v.join(","));
            let (after, before) = (time(entry.valid_after), time(entry.valid_before));
            let namespaces = namespaces.as_deref().unwrap_or("-");
            let got = format!("{}|{namespaces}|{after}|{before}", entry.principal);
            assert_eq!(got, expected, "{template}");
            assert_eq!(entry.line, 1, "{template}");
            assert_eq!(entry.key.key_data(), &key_data(ED_ALICE), "{template}");
        }
    }

    /// Each case is `file template => line the error names => phrase of its reason`.
    const INVALID: &[&str] = &[
        "a KEY\r\n => 1 => CR found",
        "# ok\n\na KEY\nb KEY\r => 4 => LF line endings",
        "\n\nalice,bob KEY => 3 => write one line per principal",
        "*@example.com KEY => 1 => write one line per principal",
        "al?ce KEY => 1 => found `?`",
        "!mallory KEY => 1 => no principal lists or patterns",
        "\"\" KEY => 1 => found an empty one",
        "\"alice KEY => 1 => expected a closing `\"`",
        "\"alice\"x KEY => 1 => remove the stray `\"`",
        "alice => 1 => expected a key type and key after principal `alice`",
        "alice namespaces=\"git\" => 1 => after `namespaces=\"git\"`",
        "alice cert-authority KEY => 1 => certificate authorities are not supported",
        "alice Cert-Authority,namespaces=\"x\" KEY => 1 => list each signer's own key",
        "alice no-touch-required KEY => 1 => unknown option or key type `no-touch-required`",
        "alice ssh-foo B64 => 1 => unknown option or key type `ssh-foo`",
        "alice namespaces=\"a\",namespaces=\"b\" KEY => 1 => `namespaces` is given twice",
        "alice valid-after=\"20260101Z\",VALID-AFTER=\"20260102Z\" KEY => 1 => given twice",
        "alice namespaces=git KEY => 1 => double-quoted value",
        "alice namespaces KEY => 1 => double-quoted value",
        "alice namespaces=\"git KEY => 1 => expected a closing `\"`",
        "alice namespaces=\"git\", KEY => 1 => remove the trailing comma",
        "alice namespaces=\"git\"x KEY => 1 => separate options with commas",
        "alice ,namespaces=\"git\" KEY => 1 => found an empty one",
        "alice namespaces=\"git,,file\" KEY => 1 => found an empty name",
        "alice namespaces=\"git*\" KEY => 1 => no namespace patterns",
        "alice namespaces=\"a\\b\" KEY => 1 => backslash",
        "alice valid-after=\"2026-01-01\" KEY => 1 => YYYYMMDD[HHMM[SS]]Z",
        "alice valid-before=\"20260230Z\" KEY => 1 => found `20260230Z`",
        "alice valid-before=\"2026013112\" KEY => 1 => found `2026013112`",
        "alice valid-after=\"19700101Z\" KEY => 1 => after 1970-01-01",
        "alice valid-after=\"20260101Z\",valid-before=\"20260101Z\" KEY => 1 => to be earlier than",
        "alice valid-before=\"20300101\" KEY => 1 => add the `Z`: valid-before=\"20300101Z\"",
        "# c\nalice valid-after=\"202601021230\" KEY => 2 => in the local time zone",
        "alice VALID-BEFORE=\"20300101235959\" KEY => 1 => valid-before=\"20300101235959Z\"",
        "alice valid-before=\"20300101z\" KEY => 1 => write valid-before=\"20300101Z\"",
        "alice valid-after=\"20300101UTC\" KEY => 1 => only the `Z` spelling",
        "alice namespaces=\"atelier-approval\\\"x\" KEY => 1 => a backslash-escaped quote, in the value of `namespaces`",
        "alice namespaces=\"atelier-approval\\\"x\" KEY => 1 => e.g. namespaces=\"atelier-approval\"",
        "alice namespaces=\"\\\"\" KEY => 1 => e.g. namespaces=\"atelier-approval\"",
        "alice namespaces=\"git\\\" KEY => 1 => found only `\\\"`, a backslash-escaped quote",
        "alice valid-before=\"20250101Z\",valid-after=\"20260101Z\" KEY => 1 => to be earlier than",
        "alice ssh-ed25519-cert-v01@openssh.com B64 => 1 => certificates are not supported",
        "alice namespaces=\"git\" ssh-bogus B64 => 1 => found `ssh-bogus`",
        "alice ssh-ed25519 => 1 => base64 key data after `ssh-ed25519`",
        "alice ssh-ed25519 AAAAnotakey => 1 => valid base64 ssh-ed25519",
        "alice ecdsa-sha2-nistp256 B64 => 1 => is a `ssh-ed25519` key",
        "alice ssh-rsa B64 comment => 1 => the line says `ssh-rsa`",
    ];

    #[test]
    fn errors_name_the_line_and_the_problem() {
        for case in INVALID {
            let parts: Vec<&str> = case.split(" => ").collect();
            let (text, phrase) = (fill(parts[0]), parts[2]);
            let line: usize = parts[1].parse().expect("a case names a line number");
            let err = parse(&text).expect_err(&text);
            assert_eq!(err.line, line, "{text:?}: {err}");
            assert!(err.reason.contains(phrase), "{text:?}: {err}");
            assert!(err.to_string().starts_with(&format!("line {line}: ")));
        }
    }

    #[test]
    fn ssh_keygen_keys_round_trip() {
        let text = format!("# team\nalice {ED_ALICE}\n\n   # indented comment\ncarol {ED_CAROL}\n");
        let parsed = parse(&text).expect("valid file");
        assert_eq!(
            parsed.entries.iter().map(|e| e.line).collect::<Vec<_>>(),
            [2, 5]
        );
        for (entry, pub_line) in parsed.entries.iter().zip([ED_ALICE, ED_CAROL]) {
            assert_eq!(entry.key.to_openssh().expect("encodable"), bare(pub_line));
        }
        // ECDSA keys parse only when ssh-key is built with its `ecdsa` feature; otherwise the
        // line is refused with a reason naming the key type.
        match PublicKey::from_openssh(EC_BOB) {
            Ok(expected) => {
                let entry = one(&format!("bob {EC_BOB}"));
                assert_eq!(entry.key.key_data(), expected.key_data());
                assert_eq!(entry.key.to_openssh().expect("encodable"), bare(EC_BOB));
            }
            Err(_) => {
                let err = parse(&format!("# x\nbob {EC_BOB}")).expect_err("no ECDSA support");
                assert_eq!(err.line, 2);
                assert!(
                    err.reason.contains("ecdsa-sha2-nistp256 public key"),
                    "{err}"
                );
            }
        }
    }

    #[test]
    fn find_by_key_data_and_principals() {
        let text = format!(
            "alice {ED_ALICE}\ncarol {ED_CAROL}\nalice-laptop namespaces=\"git\" {}\nalice {ED_CAROL}\n",
            bare(ED_ALICE)
        );
        let parsed = parse(&text).expect("valid file");
        let found = parsed.find(&key_data(ED_ALICE));
        let found: Vec<(usize, &str)> = found
            .iter()
            .map(|e| (e.line, e.principal.as_str()))
            .collect();
        assert_eq!(found, [(1, "alice"), (3, "alice-laptop")]);
        assert_eq!(parsed.find(&key_data(ED_CAROL)).len(), 2);
        let other = parse(&format!("x {ED_CAROL}")).expect("valid");
        assert!(other.find(&key_data(ED_ALICE)).is_empty());
        assert_eq!(parsed.principals(), ["alice", "carol", "alice-laptop"]);
        assert!(parse("").expect("empty file").entries.is_empty());
        assert!(parse("\n# only comments\n\t\n")
            .expect("comments")
            .entries
            .is_empty());
    }

    #[test]
    fn namespaces() {
        let any = one(&fill("carol KEY"));
        assert!(any.allows_namespace("atelier") && any.allows_namespace(""));
        let some = one(&fill("carol namespaces=\"atelier,git\" KEY"));
        assert!(some.allows_namespace("atelier") && some.allows_namespace("git"));
        assert!(!some.allows_namespace("file") && !some.allows_namespace("atelier,git"));
        assert!(!some.allows_namespace("") && !some.allows_namespace("Atelier"));
    }

    /// Each case is a time relative to the window and the phrase of the verdict (`-` for valid).
    const VALIDITY: &[(i64, &str)] = &[
        (-1, "not yet valid: valid-after is 2026-01-01T00:00:00Z"),
        (0, "-"),
        (WINDOW - 1, "-"),
        (WINDOW, "-"),
        (WINDOW + 1, "expired: valid-before is 2026-02-01T00:00:00Z"),
        (WINDOW + 86_400, "but the time is 2026-02-02T00:00:00Z"),
    ];
    /// The length of the test window, January 2026, in seconds.
    const WINDOW: i64 = 31 * 86_400;

    #[test]
    fn validity_boundaries() {
        let text = "carol valid-after=\"20260101Z\",valid-before=\"20260201Z\" KEY";
        let entry = one(&fill(text));
        let start = unix_from_civil(2026, 1, 1, 0, 0, 0).expect("valid date");
        assert_eq!(entry.valid_before, Some(start + WINDOW));
        for (offset, phrase) in VALIDITY {
            let got = entry.validity_at(start + offset);
            let got = got.as_deref().unwrap_or("-");
            assert!(got.contains(phrase), "{offset}: {got}");
        }
        let open = one(&fill("carol KEY"));
        assert_eq!(open.validity_at(-1), None);
        assert_eq!(open.validity_at(4_102_444_800), None);
    }

    /// Fragments of valid and invalid syntax, separated by `¦`.
    const FRAGMENTS: &str = concat!(
        "alice¦\"¦\"bob smith\"¦,¦=¦ ¦\t¦#¦*¦!¦?¦\\¦é¦😀¦\u{0}¦\n¦\r¦====¦+/¦",
        "namespaces¦valid-after¦valid-before¦cert-authority¦NAMESPACES¦no-pty¦",
        "=\"git,file\"¦=\"20260101Z\"¦=\"20261231235959\"¦=\"0\"¦=\"99999999\"¦=\"",
        "ssh-ed25519¦ssh-rsa¦ecdsa-sha2-nistp256¦sk-ssh-ed25519@openssh.com¦ssh-dss¦",
        "ssh-ed25519-cert-v01@openssh.com¦AAAA¦AAAAC3NzaC1lZDI1NTE5¦KEY¦B64",
    );

    #[test]
    fn fuzz_never_panics() {
        let fragments: Vec<String> = FRAGMENTS.split('¦').map(fill).collect();
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut accepted = 0;
        for _ in 0..20_000 {
            let mut line = String::new();
            for _ in 0..(next() % 12) {
                match next() % 8 {
                    0 => line.push(char::from((next() % 128) as u8)),
                    _ => line.push_str(&fragments[(next() % fragments.len() as u64) as usize]),
                }
            }
            if let Ok(parsed) = parse(&line) {
                accepted += parsed.entries.len();
                for entry in &parsed.entries {
                    assert!(!entry.principal.is_empty(), "{line:?}");
                    assert_eq!(entry.validity_at(0).is_some(), entry.valid_after.is_some());
                }
            }
        }
        assert!(
            accepted > 0,
            "the generator should produce some valid lines"
        );
    }
}
