//! A small validator for the part of JSON Schema (as OpenAPI 3.0 and 3.1 use it) that GitHub's
//! REST description needs, over the subset in `tests/fixtures/github/openapi-subset.json`.
//!
//! Supported: `type` (a name or an array of names, `"null"` included), `nullable`, `properties`,
//! `required`, `items`, `enum`, `allOf`, `anyOf`, `oneOf`, `$ref` into `#/components/schemas/`,
//! `additionalProperties` (a schema or a bool) and, loosely, `format` `date-time` and `uri`.
//!
//! Deliberate simplifications:
//! - `oneOf` is checked as `anyOf` (at least one alternative, not exactly one): GitHub's own
//!   description needs that, e.g. `validation-error`'s `value` is a `oneOf` of three nullable
//!   alternatives, so a `null` matches all three.
//! - Other formats (`int64`, ...) and keywords (`minimum`, `pattern`, `x-github-breaking-changes`,
//!   ...) are ignored.
//!
//! Errors are `"<JSON pointer>: <reason>"`, the pointer into the checked value (`(root)` for the
//! value itself); a missing required property is reported at the property's own pointer.

use serde_json::{Map, Value};

pub struct Spec {
    schemas: Map<String, Value>,
    examples: Map<String, Value>,
    example_schemas: Map<String, Value>,
    operations: Map<String, Value>,
}

/// What a documented response holds, as the subset's `operations` map says it.
#[derive(Debug, Clone, PartialEq)]
pub enum Documented {
    /// A component schema.
    Schema(String),
    /// An array of a component schema.
    ArrayOf(String),
    /// An inline schema.
    Inline(Value),
    /// No body.
    Empty,
}

/// One documented response of an operation.
#[derive(Debug)]
pub struct Response<'a> {
    /// `"METHOD /template"`.
    pub operation: &'a str,
    pub status: u16,
    pub documented: Documented,
    /// The description's examples as (name, value); `(inline)` names one given in the operation.
    pub examples: Vec<(&'a str, &'a Value)>,
}

const SCHEMA_PREFIX: &str = "#/components/schemas/";
const MAX_DEPTH: usize = 200;

impl Spec {
    /// Reads `tests/fixtures/github/openapi-subset.json`.
    pub fn load() -> Spec {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/github/openapi-subset.json"
        );
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {path}: {e}"));
        let v: Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("parsing {path}: {e}"));
        let section = |v: &Value, name: &str| -> Map<String, Value> {
            v.get(name)
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_else(|| panic!("{path}: no `{name}` object"))
        };
        let components = &v["components"];
        Spec {
            schemas: section(components, "schemas"),
            examples: section(components, "examples"),
            example_schemas: section(&v, "example_schemas"),
            operations: section(&v, "operations"),
        }
    }

    /// The names of the component schemas in the subset.
    pub fn schema_names(&self) -> impl Iterator<Item = &str> {
        self.schemas.keys().map(String::as_str)
    }

    /// The component schema `name`, if the subset has it.
    pub fn schema(&self, name: &str) -> Option<&Value> {
        self.schemas.get(name)
    }

    /// The description's own examples: (example name, what it documents, its value).
    pub fn examples(&self) -> Vec<(&str, Documented, &Value)> {
        self.example_schemas
            .iter()
            .map(|(name, shape)| {
                let value = self.examples[name]
                    .get("value")
                    .unwrap_or_else(|| panic!("example {name} has no value"));
                (name.as_str(), documented(shape), value)
            })
            .collect()
    }

    /// Every documented response of the subset's operations.
    pub fn responses(&self) -> Vec<Response<'_>> {
        let mut out = Vec::new();
        for (key, op) in &self.operations {
            let responses = op["responses"].as_object().expect("responses");
            for (status, shape) in responses {
                let examples = op["examples"][status]
                    .as_array()
                    .map(|list| {
                        list.iter()
                            .map(|e| match e {
                                Value::String(name) => {
                                    (name.as_str(), &self.examples[name]["value"])
                                }
                                inline => ("(inline)", &inline["value"]),
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                out.push(Response {
                    operation: key,
                    status: status.parse().expect("a numeric status"),
                    documented: documented(shape),
                    examples,
                });
            }
        }
        out
    }

    /// Errors (`JSON-pointer path: reason`) when `value` does not match the component schema `name`.
    pub fn check(&self, name: &str, value: &Value) -> Result<(), Vec<String>> {
        let mut errors = Vec::new();
        match self.schemas.get(name) {
            Some(schema) => self.validate(schema, value, &mut Vec::new(), 0, &mut errors),
            None => errors.push(format!(
                "(root): no component schema `{name}` in the subset"
            )),
        }
        result(errors)
    }

    /// Checks `value` against what the description documents.
    pub fn check_documented(
        &self,
        documented: &Documented,
        value: &Value,
    ) -> Result<(), Vec<String>> {
        let mut errors = Vec::new();
        let mut path = Vec::new();
        match documented {
            Documented::Schema(name) => return self.check(name, value),
            Documented::ArrayOf(name) => {
                let items = serde_json::json!({
                    "type": "array",
                    "items": { "$ref": format!("{SCHEMA_PREFIX}{name}") }
                });
                self.validate(&items, value, &mut path, 0, &mut errors);
            }
            Documented::Inline(schema) => self.validate(schema, value, &mut path, 0, &mut errors),
            Documented::Empty => {
                if !value.is_null() {
                    errors.push(format!(
                        "(root): the response is documented without a body, got {}",
                        kind(value)
                    ));
                }
            }
        }
        result(errors)
    }

    /// What the description documents for `method` on the concrete `path` (like
    /// `/repos/o/r/pulls/3`, a query string ignored) answering `status`.
    pub fn documented(&self, method: &str, path: &str, status: u16) -> Result<Documented, String> {
        let method = method.to_ascii_uppercase();
        let path = path.split(['?', '#']).next().unwrap_or_default();
        let concrete: Vec<&str> = path.trim_end_matches('/').split('/').collect();
        let mut best: Option<(usize, &str, &Value)> = None;
        for (key, op) in &self.operations {
            let Some((m, template)) = key.split_once(' ') else {
                continue;
            };
            if m != method {
                continue;
            }
            let template: Vec<&str> = template.split('/').collect();
            if matches(&template, &concrete) {
                let literals = template.iter().filter(|s| !s.starts_with('{')).count();
                if best.is_none_or(|(l, _, _)| literals > l) {
                    best = Some((literals, key, op));
                }
            }
        }
        let Some((_, key, op)) = best else {
            return Err(format!("{method} {path}: no documented operation matches"));
        };
        let responses = op["responses"].as_object().expect("responses");
        match responses.get(&status.to_string()) {
            Some(shape) => Ok(documented(shape)),
            None => Err(format!(
                "{key}: status {status} is not documented (documented: {})",
                responses.keys().cloned().collect::<Vec<_>>().join(", ")
            )),
        }
    }

    /// Looks up the documented response for a request (`path` is the concrete path like
    /// `/repos/o/r/pulls/3`, matched against the templates) and checks `value` against it; Err if
    /// the operation/status is undocumented. A response documented without a body accepts only
    /// `null`.
    pub fn check_response(
        &self,
        method: &str,
        path: &str,
        status: u16,
        value: &Value,
    ) -> Result<(), Vec<String>> {
        let documented = self.documented(method, path, status).map_err(|e| vec![e])?;
        self.check_documented(&documented, value)
    }

    fn validate(
        &self,
        schema: &Value,
        value: &Value,
        path: &mut Vec<String>,
        depth: usize,
        errors: &mut Vec<String>,
    ) {
        let at = |path: &[String], reason: String| format!("{}: {reason}", pointer(path));
        if depth > MAX_DEPTH {
            errors.push(at(path, "schema nesting too deep (a $ref cycle?)".into()));
            return;
        }
        let schema = match schema {
            Value::Bool(true) => return,
            Value::Bool(false) => {
                errors.push(at(path, "no value is allowed here".into()));
                return;
            }
            Value::Object(o) => o,
            other => {
                errors.push(at(path, format!("invalid schema {other}")));
                return;
            }
        };

        let nullable = schema.get("nullable") == Some(&Value::Bool(true));
        if value.is_null() && nullable {
            return;
        }

        if let Some(r) = schema.get("$ref") {
            let target = r
                .as_str()
                .and_then(|r| r.strip_prefix(SCHEMA_PREFIX))
                .and_then(|name| self.schemas.get(name));
            match target {
                Some(target) => self.validate(target, value, path, depth + 1, errors),
                None => errors.push(at(path, format!("unresolved $ref {r}"))),
            }
            // OpenAPI 3.0 ignores a $ref's siblings (but `nullable`, taken above); 3.1 applies
            // them, and so does this (GitHub's description gives none).
            if schema.len() == 1 {
                return;
            }
        }

        if let Some(t) = schema.get("type") {
            let types: Vec<&str> = match t {
                Value::String(s) => vec![s.as_str()],
                Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
                _ => Vec::new(),
            };
            if !types.iter().any(|t| has_type(value, t)) {
                errors.push(at(
                    path,
                    format!("expected {}, got {}", types.join(" or "), kind(value)),
                ));
                return;
            }
        }

        if let Some(Value::Array(allowed)) = schema.get("enum") {
            if !allowed.contains(value) {
                errors.push(at(
                    path,
                    format!(
                        "{value} is not one of the enum {}",
                        Value::Array(allowed.clone())
                    ),
                ));
            }
        }

        if let Some(Value::String(format)) = schema.get("format") {
            if let Value::String(s) = value {
                let ok = match format.as_str() {
                    "date-time" => is_date_time(s),
                    "uri" => is_uri(s),
                    _ => true,
                };
                if !ok {
                    errors.push(at(path, format!("{value} is not a {format}")));
                }
            }
        }

        if let Some(Value::Array(all)) = schema.get("allOf") {
            for sub in all {
                self.validate(sub, value, path, depth + 1, errors);
            }
        }
        for keyword in ["anyOf", "oneOf"] {
            if let Some(Value::Array(alternatives)) = schema.get(keyword) {
                self.any_of(keyword, alternatives, value, path, depth, errors);
            }
        }

        if let Value::Object(object) = value {
            let properties = schema.get("properties").and_then(Value::as_object);
            if let Some(Value::Array(required)) = schema.get("required") {
                for name in required.iter().filter_map(Value::as_str) {
                    if !object.contains_key(name) {
                        path.push(name.to_string());
                        errors.push(at(path, "required property is missing".into()));
                        path.pop();
                    }
                }
            }
            let additional = schema.get("additionalProperties");
            for (name, item) in object {
                let sub = properties.and_then(|p| p.get(name)).or(match additional {
                    Some(Value::Bool(true)) | None => None,
                    Some(other) => Some(other),
                });
                if let Some(sub) = sub {
                    path.push(name.clone());
                    if sub == &Value::Bool(false) {
                        errors.push(at(path, "property is not allowed".into()));
                    } else {
                        self.validate(sub, item, path, depth + 1, errors);
                    }
                    path.pop();
                }
            }
        }

        if let (Value::Array(items), Some(item_schema)) = (value, schema.get("items")) {
            for (i, item) in items.iter().enumerate() {
                path.push(i.to_string());
                self.validate(item_schema, item, path, depth + 1, errors);
                path.pop();
            }
        }
    }

    /// At least one alternative must match; otherwise the errors of the closest alternative (the
    /// one with the fewest errors at this very path, then the fewest errors) follow a summary.
    fn any_of(
        &self,
        keyword: &str,
        alternatives: &[Value],
        value: &Value,
        path: &mut Vec<String>,
        depth: usize,
        errors: &mut Vec<String>,
    ) {
        let here = pointer(path);
        let mut closest: Option<((usize, usize), Vec<String>)> = None;
        for alternative in alternatives {
            let mut errs = Vec::new();
            self.validate(alternative, value, path, depth + 1, &mut errs);
            if errs.is_empty() {
                return;
            }
            let shallow = errs
                .iter()
                .filter(|e| e.starts_with(&format!("{here}: ")))
                .count();
            let score = (shallow, errs.len());
            if closest.as_ref().is_none_or(|(s, _)| score < *s) {
                closest = Some((score, errs));
            }
        }
        errors.push(format!(
            "{here}: matches none of the {} alternatives of {keyword}{}",
            alternatives.len(),
            if keyword == "oneOf" {
                " (checked as anyOf)"
            } else {
                ""
            }
        ));
        if let Some((_, errs)) = closest {
            errors.extend(errs);
        }
    }
}

fn documented(shape: &Value) -> Documented {
    match shape {
        Value::Null => Documented::Empty,
        Value::String(name) => Documented::Schema(name.clone()),
        Value::Array(a) if a.len() == 1 && a[0].is_string() => {
            Documented::ArrayOf(a[0].as_str().unwrap_or_default().to_string())
        }
        other => Documented::Inline(other.clone()),
    }
}

fn result(errors: Vec<String>) -> Result<(), Vec<String>> {
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// Whether a template's segments match a concrete path's. A `{param}` matches one non-empty
/// segment, except `{ref}`, which may span several (a branch name like `feature/x`).
fn matches(template: &[&str], concrete: &[&str]) -> bool {
    match (template.split_first(), concrete.split_first()) {
        (None, None) => true,
        (Some((t, trest)), Some((c, crest))) => {
            if *t == "{ref}" {
                (1..=concrete.len()).any(|n| {
                    concrete[..n].iter().all(|s| !s.is_empty()) && matches(trest, &concrete[n..])
                })
            } else if t.starts_with('{') && t.ends_with('}') {
                !c.is_empty() && matches(trest, crest)
            } else {
                t == c && matches(trest, crest)
            }
        }
        _ => false,
    }
}

fn pointer(path: &[String]) -> String {
    if path.is_empty() {
        return "(root)".into();
    }
    path.iter()
        .map(|s| format!("/{}", s.replace('~', "~0").replace('/', "~1")))
        .collect()
}

fn has_type(value: &Value, t: &str) -> bool {
    match t {
        "null" => value.is_null(),
        "boolean" => value.is_boolean(),
        "string" => value.is_string(),
        "object" => value.is_object(),
        "array" => value.is_array(),
        "number" => value.is_number(),
        "integer" => {
            value.is_i64() || value.is_u64() || value.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        _ => false,
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Loosely RFC 3339: `YYYY-MM-DDTHH:MM:SS`, optional fraction, then `Z` or `±HH:MM`.
fn is_date_time(s: &str) -> bool {
    let b = s.as_bytes();
    let digits =
        |r: std::ops::Range<usize>| b.get(r).is_some_and(|d| d.iter().all(u8::is_ascii_digit));
    if !(digits(0..4)
        && b.get(4) == Some(&b'-')
        && digits(5..7)
        && b.get(7) == Some(&b'-')
        && digits(8..10)
        && matches!(b.get(10), Some(b'T' | b't' | b' '))
        && digits(11..13)
        && b.get(13) == Some(&b':')
        && digits(14..16)
        && b.get(16) == Some(&b':')
        && digits(17..19))
    {
        return false;
    }
    let mut i = 19;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return false;
        }
    }
    match b.get(i) {
        Some(b'Z' | b'z') => i + 1 == b.len(),
        Some(b'+' | b'-') => {
            i + 6 == b.len() && digits(i + 1..i + 3) && b[i + 3] == b':' && digits(i + 4..i + 6)
        }
        _ => false,
    }
}

/// Loosely a URI: a scheme (a letter, then letters, digits, `+`, `-`, `.`), a colon, no spaces.
/// GitHub's "uri" values include URI templates (`.../keys{/key_id}`), which this accepts.
fn is_uri(s: &str) -> bool {
    let Some((scheme, rest)) = s.split_once(':') else {
        return false;
    };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        && !rest.is_empty()
        && !s.chars().any(char::is_whitespace)
}
