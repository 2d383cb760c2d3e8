//! The vendored GitHub fixtures: the OpenAPI subset, its examples and the validator, and the
//! webhook examples readdressed to the test repository.

use serde_json::{json, Value};

use crate::support::openapi::{Documented, Spec};
use crate::support::webhooks::{example, readdress, sign, Readdress};

/// (event, action) of every vendored webhook example.
const WEBHOOKS: &[(&str, Option<&str>)] = &[
    ("ping", None),
    ("pull_request", Some("opened")),
    ("pull_request", Some("synchronize")),
    ("pull_request", Some("reopened")),
    ("pull_request", Some("closed")),
    ("issue_comment", Some("created")),
    ("issue_comment", Some("edited")),
    ("issue_comment", Some("deleted")),
    ("pull_request_review", Some("submitted")),
    ("push", None),
];

const SCHEMAS: &[&str] = &[
    "pull-request",
    "pull-request-simple",
    "issue-comment",
    "status",
    "combined-commit-status",
    "pull-request-review",
    "label",
    "pull-request-merge-result",
    "basic-error",
    "validation-error",
    "full-repository",
];

/// The errors the validator finds in GitHub's own examples: the examples lag their schemas (these
/// are mismatches in the description itself, asserted exactly so that a fix or a new one shows).
fn known_mismatches(example: &str) -> Vec<&'static str> {
    match example {
        // `team-simple` requires `type` (enterprise or organization teams); the examples' teams
        // predate it.
        "pull-request" | "pull-request-simple" | "pull-request-review-request" => {
            vec!["/requested_teams/0/type: required property is missing"]
        }
        "pull-request-simple-items" => {
            vec!["/0/requested_teams/0/type: required property is missing"]
        }
        // `full-repository` requires `has_discussions` and `language`.
        "full-repository" => vec!["/has_discussions: required property is missing"],
        "full-repository-default-response" => vec![
            "/language: required property is missing",
            "/source/language: required property is missing",
        ],
        _ => Vec::new(),
    }
}

fn errors_of(result: Result<(), Vec<String>>) -> Vec<String> {
    result.err().unwrap_or_default()
}

fn spec_example(spec: &Spec, name: &str) -> Value {
    spec.examples()
        .into_iter()
        .find(|(n, _, _)| *n == name)
        .unwrap_or_else(|| panic!("no example {name}"))
        .2
        .clone()
}

/// GitHub's pull-request example, with the one field it lacks (see [`known_mismatches`]) added.
fn valid_pull(spec: &Spec) -> Value {
    let mut pull = spec_example(spec, "pull-request");
    for team in pull["requested_teams"].as_array_mut().expect("teams") {
        team["type"] = json!("organization");
    }
    spec.check("pull-request", &pull)
        .expect("the completed example");
    pull
}

#[track_caller]
fn rejected(spec: &Spec, schema: &str, value: &Value) -> Vec<String> {
    match spec.check(schema, value) {
        Ok(()) => panic!("{schema}: the mutated value was accepted"),
        Err(errors) => errors,
    }
}

#[track_caller]
fn has_error(errors: &[String], prefix: &str) {
    assert!(
        errors.iter().any(|e| e.starts_with(prefix)),
        "no error starting {prefix:?} in {errors:#?}"
    );
}

#[test]
fn the_subset_has_the_schemas_atelier_uses_and_what_they_reference() {
    let spec = Spec::load();
    let names: Vec<&str> = spec.schema_names().collect();
    for name in SCHEMAS {
        assert!(names.contains(name), "{name} missing from the subset");
    }
    // Every $ref resolves inside the subset.
    fn refs<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
        match v {
            Value::Object(map) => {
                for (k, item) in map {
                    match (k.as_str(), item) {
                        ("$ref", Value::String(r)) => out.push(r),
                        _ => refs(item, out),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|i| refs(i, out)),
            _ => {}
        }
    }
    for name in &names {
        let mut found = Vec::new();
        refs(spec.schema(name).expect("schema"), &mut found);
        for r in found {
            let target = r
                .strip_prefix("#/components/schemas/")
                .unwrap_or_else(|| panic!("{name}: $ref {r} outside components/schemas"));
            assert!(
                names.contains(&target),
                "{name}: $ref {r} not in the subset"
            );
        }
    }
    let size = std::fs::metadata(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/github/openapi-subset.json"
    ))
    .expect("subset")
    .len();
    assert!(size < 1024 * 1024, "the subset is {size} bytes");
}

#[test]
fn the_description_s_own_examples_match_their_schemas() {
    let spec = Spec::load();
    let examples = spec.examples();
    for wanted in [
        "pull-request",
        "pull-request-simple-items",
        "issue-comment",
        "issue-comment-items",
        "status",
        "combined-commit-status",
        "pull-request-review-items",
        "label-items",
        "pull-request-merge-result-response-if-merge-was-successful",
        "full-repository-default-response",
    ] {
        assert!(
            examples.iter().any(|(n, _, _)| *n == wanted),
            "example {wanted} missing"
        );
    }
    let mut unexpected = Vec::new();
    for (name, documented, value) in &examples {
        let errors = errors_of(spec.check_documented(documented, value));
        if errors != known_mismatches(name) {
            unexpected.push(format!("{name} ({documented:?}): {errors:#?}"));
        }
    }
    assert!(unexpected.is_empty(), "{}", unexpected.join("\n"));
    let clean = examples
        .iter()
        .filter(|(name, ..)| known_mismatches(name).is_empty())
        .count();
    assert!(clean >= 15, "only {clean} of the examples match outright");
}

/// A concrete path for a template: `/repos/o/r/pulls/3`.
fn concrete(template: &str) -> String {
    template
        .replace("{owner}", "octo")
        .replace("{repo}", "demo")
        .replace("{ref}", "feature/x")
        .replace("{sha}", "6dcb09b5b57875f334f61aebed695e2e4193db5e")
        .replace("{pull_number}", "3")
        .replace("{issue_number}", "3")
        .replace("{comment_id}", "42")
}

#[test]
fn check_response_on_every_documented_example() {
    let spec = Spec::load();
    let responses = spec.responses();
    let operations: std::collections::BTreeSet<&str> =
        responses.iter().map(|r| r.operation).collect();
    assert_eq!(operations.len(), 13, "{operations:#?}");
    let mut checked = 0;
    for r in &responses {
        let (method, template) = r.operation.split_once(' ').expect("METHOD /template");
        for (name, value) in &r.examples {
            let errors =
                errors_of(spec.check_response(method, &concrete(template), r.status, value));
            assert_eq!(
                errors,
                known_mismatches(name),
                "{} {} {name}",
                r.operation,
                r.status
            );
            checked += 1;
        }
    }
    // One example for each operation's success, and the merge's 405 and 409.
    assert_eq!(checked, 15, "examples checked");
}

#[test]
fn the_operations_map_documents_what_atelier_relies_on() {
    let spec = Spec::load();
    let doc = |m: &str, p: &str, s: u16| spec.documented(m, p, s).expect("documented");
    use Documented::*;
    assert_eq!(
        doc("GET", "/repos/o/r", 200),
        Schema("full-repository".into())
    );
    assert_eq!(
        doc("get", "/repos/o/r/pulls?state=open&per_page=100", 200),
        ArrayOf("pull-request-simple".into())
    );
    assert_eq!(
        doc("POST", "/repos/o/r/pulls", 201),
        Schema("pull-request".into())
    );
    assert_eq!(
        doc("POST", "/repos/o/r/pulls", 422),
        Schema("validation-error".into())
    );
    assert_eq!(
        doc("GET", "/repos/o/r/pulls/3", 200),
        Schema("pull-request".into())
    );
    assert_eq!(
        doc("GET", "/repos/o/r/pulls/3", 404),
        Schema("basic-error".into())
    );
    assert_eq!(doc("GET", "/repos/o/r/pulls", 304), Empty);
    assert_eq!(
        doc("PATCH", "/repos/o/r/pulls/3", 200),
        Schema("pull-request".into())
    );
    assert_eq!(
        doc("PUT", "/repos/o/r/pulls/3/merge", 200),
        Schema("pull-request-merge-result".into())
    );
    assert!(matches!(
        doc("PUT", "/repos/o/r/pulls/3/merge", 405),
        Inline(_)
    ));
    assert!(matches!(
        doc("PUT", "/repos/o/r/pulls/3/merge", 409),
        Inline(_)
    ));
    assert_eq!(
        doc("GET", "/repos/o/r/pulls/3/reviews", 200),
        ArrayOf("pull-request-review".into())
    );
    assert_eq!(
        doc("GET", "/repos/o/r/issues/3/comments", 200),
        ArrayOf("issue-comment".into())
    );
    assert_eq!(
        doc("POST", "/repos/o/r/issues/3/comments", 201),
        Schema("issue-comment".into())
    );
    assert_eq!(
        doc("PATCH", "/repos/o/r/issues/comments/42", 200),
        Schema("issue-comment".into())
    );
    assert_eq!(
        doc("POST", "/repos/o/r/issues/3/labels", 200),
        ArrayOf("label".into())
    );
    assert_eq!(
        doc("POST", "/repos/o/r/statuses/abc123", 201),
        Schema("status".into())
    );
    assert_eq!(
        doc("GET", "/repos/o/r/commits/abc123/status", 200),
        Schema("combined-commit-status".into())
    );
    // A branch name with a slash as the ref.
    assert_eq!(
        doc("GET", "/repos/o/r/commits/feature/x/status", 200),
        Schema("combined-commit-status".into())
    );
}

#[test]
fn check_response_rejects_undocumented_requests_and_wrong_bodies() {
    let spec = Spec::load();
    let pull = valid_pull(&spec);

    let e = spec
        .check_response("GET", "/repos/o/r/pulls/3", 418, &pull)
        .expect_err("418 is undocumented");
    assert!(e[0].contains("status 418 is not documented"), "{e:?}");
    assert!(e[0].contains("200"), "lists the documented statuses: {e:?}");

    let e = spec
        .check_response("DELETE", "/repos/o/r/pulls/3", 200, &pull)
        .expect_err("DELETE is not an operation Atelier uses");
    assert!(e[0].contains("no documented operation"), "{e:?}");
    spec.check_response("GET", "/repos/o/r/pulls/3/files", 200, &json!([]))
        .expect_err("not in the subset");
    spec.check_response("GET", "/repos/o/r/pulls/", 200, &json!([]))
        .expect("a trailing slash is the list");

    // A 304 has no body.
    spec.check_response("GET", "/repos/o/r/pulls", 304, &Value::Null)
        .expect("no body");
    spec.check_response("GET", "/repos/o/r/pulls", 304, &json!([]))
        .expect_err("a body where none is documented");

    // The list wants an array of pull-request-simple, not one pull request.
    let e = spec
        .check_response("GET", "/repos/o/r/pulls", 200, &pull)
        .expect_err("an object for an array");
    assert_eq!(e, vec!["(root): expected array, got object".to_string()]);

    // The merge's 405 and 409 are inline schemas.
    spec.check_response(
        "PUT",
        "/repos/o/r/pulls/3/merge",
        405,
        &json!({"message": "Pull Request is not mergeable", "documentation_url": "https://docs.github.com/rest"}),
    )
    .expect("405 body");
    let e = spec
        .check_response(
            "PUT",
            "/repos/o/r/pulls/3/merge",
            409,
            &json!({"message": 409}),
        )
        .expect_err("a number for the message");
    assert_eq!(
        e,
        vec!["/message: expected string, got integer".to_string()]
    );

    let e = spec
        .check_response(
            "POST",
            "/repos/o/r/issues/3/comments",
            422,
            &json!({"message": "Validation Failed"}),
        )
        .expect_err("validation-error needs documentation_url");
    assert_eq!(
        e,
        vec!["/documentation_url: required property is missing".to_string()]
    );
}

#[test]
fn mutated_examples_are_rejected_with_their_path() {
    let spec = Spec::load();
    let pull = valid_pull(&spec);

    let mut v = pull.clone();
    v.as_object_mut().expect("object").remove("head");
    has_error(
        &rejected(&spec, "pull-request", &v),
        "/head: required property is missing",
    );

    let mut v = pull.clone();
    v["number"] = json!("three");
    has_error(
        &rejected(&spec, "pull-request", &v),
        "/number: expected integer, got string",
    );

    let mut v = pull.clone();
    v["state"] = json!("merged");
    has_error(
        &rejected(&spec, "pull-request", &v),
        "/state: \"merged\" is not one of the enum",
    );

    let mut v = pull.clone();
    v["head"]["sha"] = json!(7);
    has_error(
        &rejected(&spec, "pull-request", &v),
        "/head/sha: expected string, got integer",
    );

    let mut v = pull.clone();
    v["head"]["repo"]["owner"]
        .as_object_mut()
        .expect("owner")
        .remove("login");
    has_error(
        &rejected(&spec, "pull-request", &v),
        "/head/repo/owner/login: required property is missing",
    );

    let mut v = pull.clone();
    v["labels"][0]["default"] = json!("yes");
    has_error(
        &rejected(&spec, "pull-request", &v),
        "/labels/0/default: expected boolean, got string",
    );

    let mut v = pull.clone();
    v["created_at"] = json!("yesterday");
    has_error(
        &rejected(&spec, "pull-request", &v),
        "/created_at: \"yesterday\" is not a date-time",
    );

    let mut v = pull.clone();
    v["html_url"] = json!("not a url");
    has_error(
        &rejected(&spec, "pull-request", &v),
        "/html_url: \"not a url\" is not a uri",
    );

    // Nullable: merged_by may be null but not a broken user.
    let mut v = pull.clone();
    v["merged_by"] = Value::Null;
    spec.check("pull-request", &v).expect("merged_by null");
    v["merged_by"] = json!({"login": 5});
    let errors = rejected(&spec, "pull-request", &v);
    has_error(&errors, "/merged_by/login: expected string, got integer");
    has_error(&errors, "/merged_by/id: required property is missing");
    // ...but user may not be null.
    let mut v = pull.clone();
    v["user"] = Value::Null;
    has_error(
        &rejected(&spec, "pull-request", &v),
        "/user: expected object, got null",
    );

    let mut comments = spec_example(&spec, "issue-comment-items");
    comments[0]["author_association"] = json!("STRANGER");
    let errors = spec
        .check_documented(&Documented::ArrayOf("issue-comment".into()), &comments)
        .expect_err("an author_association out of the enum");
    has_error(
        &errors,
        "/0/author_association: \"STRANGER\" is not one of the enum",
    );

    let mut status = spec_example(&spec, "combined-commit-status");
    status["statuses"][0]
        .as_object_mut()
        .expect("a status")
        .remove("context");
    has_error(
        &rejected(&spec, "combined-commit-status", &status),
        "/statuses/0/context: required property is missing",
    );

    let mut merged = spec_example(
        &spec,
        "pull-request-merge-result-response-if-merge-was-successful",
    );
    merged["merged"] = json!("true");
    has_error(
        &rejected(&spec, "pull-request-merge-result", &merged),
        "/merged: expected boolean, got string",
    );

    assert_eq!(
        spec.check("no-such-schema", &json!({})),
        Err(vec![
            "(root): no component schema `no-such-schema` in the subset".to_string()
        ])
    );
}

#[test]
fn one_of_is_checked_as_any_of() {
    let spec = Spec::load();
    // validation-error's `value` is a oneOf of a nullable string, integer and string array: GitHub
    // means "any of these", and a null matches all three.
    for value in [json!(null), json!("x"), json!(3), json!(["a", "b"])] {
        let body = json!({
            "message": "Validation Failed",
            "documentation_url": "https://docs.github.com/rest",
            "errors": [{"resource": "PullRequest", "code": "custom", "value": value}]
        });
        spec.check("validation-error", &body)
            .unwrap_or_else(|e| panic!("value {value}: {e:?}"));
    }
    let body = json!({
        "message": "Validation Failed",
        "documentation_url": "https://docs.github.com/rest",
        "errors": [{"code": "custom", "value": {"an": "object"}}]
    });
    let errors = rejected(&spec, "validation-error", &body);
    has_error(
        &errors,
        "/errors/0/value: matches none of the 3 alternatives of oneOf (checked as anyOf)",
    );
}

#[test]
fn the_validator_handles_the_keywords_github_uses() {
    let spec = Spec::load();
    let check =
        |schema: Value, value: Value| spec.check_documented(&Documented::Inline(schema), &value);

    // type arrays (OpenAPI 3.1) with "null"
    let s = json!({"type": ["string", "null"]});
    check(s.clone(), json!("x")).expect("string");
    check(s.clone(), json!(null)).expect("null");
    assert_eq!(
        check(s, json!(1)),
        Err(vec![
            "(root): expected string or null, got integer".to_string()
        ])
    );

    // additionalProperties as a schema and as false
    let s = json!({"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "string"}});
    check(s.clone(), json!({"a": 1, "b": "x"})).expect("extra string");
    assert_eq!(
        check(s, json!({"a": 1, "b": 2})),
        Err(vec!["/b: expected string, got integer".to_string()])
    );
    let s = json!({"type": "object", "properties": {"a": {}}, "additionalProperties": false});
    assert_eq!(
        check(s, json!({"a": 1, "b~/": 2})),
        Err(vec!["/b~0~1: property is not allowed".to_string()])
    );

    // allOf, anyOf with $ref
    let s = json!({"allOf": [{"$ref": "#/components/schemas/label"}, {"required": ["extra"]}]});
    let label = json!({"id": 1, "node_id": "x", "url": "https://api.github.com/repos/o/r/labels/bug", "name": "bug", "description": null, "color": "d73a4a", "default": true});
    spec.check("label", &label).expect("a label");
    assert_eq!(
        check(s, label.clone()),
        Err(vec!["/extra: required property is missing".to_string()])
    );
    let s = json!({"anyOf": [{"type": "null"}, {"$ref": "#/components/schemas/label"}]});
    check(s.clone(), json!(null)).expect("null");
    check(s.clone(), label.clone()).expect("label");
    let mut broken = label;
    broken["color"] = json!(1);
    assert_eq!(
        check(s, broken),
        Err(vec![
            "(root): matches none of the 2 alternatives of anyOf".to_string(),
            "/color: expected string, got integer".to_string(),
        ])
    );

    // format: date-time with fractions and offsets
    let s = json!({"type": "string", "format": "date-time"});
    for ok in ["2011-01-26T19:01:12Z", "2011-01-26T19:01:12.123+02:00"] {
        check(s.clone(), json!(ok)).expect(ok);
    }
    for bad in ["2011-01-26", "2011-01-26T19:01:12", "26/01/2011 19:01"] {
        check(s.clone(), json!(bad)).expect_err(bad);
    }
    // format: uri, URI templates included
    let s = json!({"type": "string", "format": "uri"});
    check(
        s.clone(),
        json!("https://api.github.com/repos/o/r/keys{/key_id}"),
    )
    .expect("template");
    check(s, json!("/relative/path")).expect_err("no scheme");

    // An unresolved $ref is an error, not a pass.
    assert_eq!(
        check(json!({"$ref": "#/components/schemas/nope"}), json!({})),
        Err(vec![
            "(root): unresolved $ref \"#/components/schemas/nope\"".to_string()
        ])
    );
}

#[test]
fn every_vendored_webhook_example_parses_with_its_action() {
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/github/webhooks"
    );
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .expect("webhooks dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    let mut expected: Vec<String> = WEBHOOKS
        .iter()
        .map(|(event, action)| match action {
            Some(action) => format!("{event}.{action}.json"),
            None => format!("{event}.json"),
        })
        .collect();
    expected.sort();
    assert_eq!(files, expected);

    for (event, action) in WEBHOOKS {
        let v = example(event, *action);
        assert_eq!(
            v.get("action").and_then(Value::as_str),
            *action,
            "{event}: action"
        );
        assert!(
            v["repository"]["full_name"].is_string(),
            "{event}: repository"
        );
        assert!(v["sender"]["login"].is_string(), "{event}: sender");
    }
    assert!(example("ping", None)["zen"].is_string());
    assert!(example("push", None)["ref"]
        .as_str()
        .expect("ref")
        .starts_with("refs/heads/"));
    assert!(example("issue_comment", Some("edited"))["changes"]["body"]["from"].is_string());
}

#[test]
fn sign_matches_github_s_test_vector() {
    assert_eq!(
        sign("It's a Secret to Everybody", b"Hello, World!"),
        "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    );
}

#[test]
fn webhook_pull_requests_deserialize_into_octocrab() {
    for (event, action) in WEBHOOKS {
        let v = example(event, *action);
        let Some(pr) = v.get("pull_request") else {
            continue;
        };
        let parsed: octocrab::models::pulls::PullRequest = serde_json::from_value(pr.clone())
            .unwrap_or_else(|e| panic!("{event}.{action:?}: {e}"));
        assert_eq!(Some(parsed.number), pr["number"].as_u64());
        assert_eq!(parsed.head.sha, pr["head"]["sha"].as_str().expect("sha"));
        assert_eq!(
            parsed.head.ref_field,
            pr["head"]["ref"].as_str().expect("ref")
        );
        assert_eq!(
            parsed.base.ref_field,
            pr["base"]["ref"].as_str().expect("ref")
        );
    }
}

fn strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|i| strings(i, out)),
        Value::Object(map) => map.values().for_each(|i| strings(i, out)),
        _ => {}
    }
}

const SHA: &str = "0123456789abcdef0123456789abcdef01234567";

#[test]
fn readdress_moves_a_pull_request_event_to_the_test_repository() {
    let mut v = example("pull_request", Some("synchronize"));
    let old_sha = v["pull_request"]["head"]["sha"]
        .as_str()
        .expect("sha")
        .to_string();
    readdress(
        &mut v,
        &Readdress {
            pull: Some(17),
            head_sha: Some(SHA),
            head_ref: Some("atelier/p-1"),
            base_ref: Some("main"),
            ..Readdress::to("alice/demo")
        },
    );
    assert_eq!(v["repository"]["full_name"], "alice/demo");
    assert_eq!(v["repository"]["name"], "demo");
    assert_eq!(v["repository"]["owner"]["login"], "alice");
    assert_eq!(v["repository"]["html_url"], "https://github.com/alice/demo");
    assert_eq!(
        v["repository"]["url"],
        "https://api.github.com/repos/alice/demo"
    );
    assert_eq!(
        v["repository"]["owner"]["html_url"],
        "https://github.com/alice"
    );
    assert_eq!(v["number"], 17);
    let pr = &v["pull_request"];
    assert_eq!(pr["number"], 17);
    assert_eq!(
        pr["url"],
        "https://api.github.com/repos/alice/demo/pulls/17"
    );
    assert_eq!(pr["html_url"], "https://github.com/alice/demo/pull/17");
    assert_eq!(pr["diff_url"], "https://github.com/alice/demo/pull/17.diff");
    assert_eq!(
        pr["issue_url"],
        "https://api.github.com/repos/alice/demo/issues/17"
    );
    assert_eq!(
        pr["review_comment_url"],
        "https://api.github.com/repos/alice/demo/pulls/comments{/number}"
    );
    assert_eq!(pr["head"]["sha"], SHA);
    assert_eq!(pr["head"]["ref"], "atelier/p-1");
    assert_eq!(pr["head"]["label"], "alice:atelier/p-1");
    assert_eq!(pr["head"]["repo"]["full_name"], "alice/demo");
    assert_eq!(pr["base"]["ref"], "main");
    assert_eq!(pr["base"]["label"], "alice:main");
    assert_eq!(
        pr["statuses_url"],
        format!("https://api.github.com/repos/alice/demo/statuses/{SHA}")
    );
    // A synchronize's `after` is the new head.
    assert_eq!(v["after"], SHA);

    let mut all = Vec::new();
    strings(&v, &mut all);
    for s in &all {
        assert!(!s.contains("Codertocat/Hello-World"), "left behind: {s}");
        assert!(!s.contains(&old_sha), "old sha left behind: {s}");
        assert!(
            !s.contains("/pulls/2") && !s.contains("/pull/2") && !s.contains("/issues/2"),
            "old number: {s}"
        );
    }
    // The sender is still who it was.
    assert_eq!(v["sender"]["login"], "Codertocat");

    let parsed: octocrab::models::pulls::PullRequest =
        serde_json::from_value(v["pull_request"].clone()).expect("still a pull request");
    assert_eq!(parsed.number, 17);
    assert_eq!(parsed.head.sha, SHA);
}

#[test]
fn readdress_changes_nothing_it_is_not_told_to() {
    let original = example("pull_request", Some("opened"));
    let mut v = original.clone();
    let same = original["repository"]["full_name"]
        .as_str()
        .expect("name")
        .to_string();
    readdress(&mut v, &Readdress::to(&same));
    assert_eq!(v, original);

    let mut v = original.clone();
    readdress(&mut v, &Readdress::to("alice/demo"));
    let (pr, was) = (&v["pull_request"], &original["pull_request"]);
    assert_eq!(v["number"], original["number"]);
    assert_eq!(pr["number"], was["number"]);
    assert_eq!(pr["head"]["sha"], was["head"]["sha"]);
    assert_eq!(pr["head"]["ref"], was["head"]["ref"]);
    assert_eq!(pr["base"]["ref"], was["base"]["ref"]);
    assert_eq!(pr["title"], was["title"]);
    assert_eq!(pr["user"], was["user"]);
    assert_eq!(pr["head"]["label"], "alice:changes");
    assert_eq!(pr["base"]["label"], "alice:master");
}

#[test]
fn readdress_moves_comments_reviews_and_pushes() {
    let mut v = example("issue_comment", Some("created"));
    readdress(
        &mut v,
        &Readdress {
            pull: Some(5),
            comment_body: Some("/atelier approve"),
            ..Readdress::to("alice/demo")
        },
    );
    assert_eq!(v["issue"]["number"], 5);
    assert_eq!(
        v["issue"]["url"],
        "https://api.github.com/repos/alice/demo/issues/5"
    );
    assert_eq!(v["comment"]["body"], "/atelier approve");
    let comment_url = v["comment"]["html_url"].as_str().expect("html_url");
    assert!(
        comment_url.starts_with("https://github.com/alice/demo/issues/5#issuecomment-"),
        "{comment_url}"
    );
    assert_eq!(
        v["comment"]["url"]
            .as_str()
            .expect("url")
            .rsplit_once('/')
            .expect("id")
            .0,
        "https://api.github.com/repos/alice/demo/issues/comments"
    );
    // The milestone's own number is not the issue's.
    assert_eq!(v["issue"]["milestone"]["number"], 1);

    let mut v = example("pull_request_review", Some("submitted"));
    readdress(
        &mut v,
        &Readdress {
            pull: Some(9),
            head_sha: Some(SHA),
            comment_body: Some("Looks right."),
            ..Readdress::to("alice/demo")
        },
    );
    assert_eq!(v["pull_request"]["number"], 9);
    assert_eq!(v["review"]["commit_id"], SHA);
    assert_eq!(v["review"]["body"], "Looks right.");
    assert_eq!(
        v["review"]["pull_request_url"],
        "https://api.github.com/repos/alice/demo/pulls/9"
    );

    let mut v = example("push", None);
    readdress(
        &mut v,
        &Readdress {
            push_ref: Some("refs/heads/main"),
            after: Some(SHA),
            ..Readdress::to("alice/demo")
        },
    );
    assert_eq!(v["ref"], "refs/heads/main");
    assert_eq!(v["after"], SHA);
    assert_eq!(v["head_commit"]["id"], SHA);
    assert_eq!(
        v["head_commit"]["url"],
        format!("https://github.com/alice/demo/commit/{SHA}")
    );
    assert_eq!(v["repository"]["full_name"], "alice/demo");
    assert_eq!(v["repository"]["owner"]["name"], "alice");

    let mut v = example("ping", None);
    readdress(&mut v, &Readdress::to("alice/demo"));
    assert_eq!(v["repository"]["full_name"], "alice/demo");
    assert_eq!(
        v["hook"]["url"]
            .as_str()
            .expect("url")
            .rsplit_once('/')
            .expect("id")
            .0,
        "https://api.github.com/repos/alice/demo/hooks"
    );
}

/// Webhook payloads carry the REST objects, with known differences that the validator finds (so a
/// receiver must not assume the REST schema for them).
#[test]
fn webhook_objects_against_the_rest_schemas() {
    let spec = Spec::load();
    let missing = |fields: &[&str]| -> Vec<String> {
        fields
            .iter()
            .map(|f| format!("/{f}: required property is missing"))
            .collect()
    };
    let mut seen = 0;
    for (event, action) in WEBHOOKS {
        let v = example(event, *action);
        let name = format!("{event}.{}", action.unwrap_or("-"));
        for (field, schema) in [
            ("pull_request", "pull-request"),
            ("comment", "issue-comment"),
            ("review", "pull-request-review"),
            ("repository", "repository"),
        ] {
            let Some(object) = v.get(field) else {
                continue;
            };
            seen += 1;
            let expected: Vec<String> = match (name.as_str(), field) {
                // This example predates `auto_merge`.
                ("pull_request.opened", "pull_request") => missing(&["auto_merge"]),
                // A review event's pull request is the short form, without the merge fields.
                ("pull_request_review.submitted", "pull_request") => missing(&[
                    "auto_merge",
                    "additions",
                    "changed_files",
                    "comments",
                    "commits",
                    "deletions",
                    "mergeable",
                    "mergeable_state",
                    "merged",
                    "maintainer_can_modify",
                    "merged_by",
                    "review_comments",
                ]),
                // A review without a body has `"body": null`, which the REST schema does not allow.
                ("pull_request_review.submitted", "review") => {
                    vec!["/body: expected string, got null".into()]
                }
                // A push's repository has its timestamps as Unix seconds.
                ("push.-", "repository") => vec![
                    "/created_at: expected string, got integer".into(),
                    "/pushed_at: expected string, got integer".into(),
                ],
                _ => Vec::new(),
            };
            assert_eq!(
                errors_of(spec.check(schema, object)),
                expected,
                "{name}: {field} against {schema}"
            );
        }
    }
    assert_eq!(seen, 19, "objects checked");
}
