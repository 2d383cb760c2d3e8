//! GitHub webhook deliveries as `atelier serve` reads them: the first line is the event name
//! (`X-GitHub-Event`) and the signature header, separated by a space; the rest is the body.
//! Checking the signature and routing never panic; a header of any other shape than GitHub's
//! never verifies; a delivery for another repository is never work; work on a pull request
//! names a number the payload carries; a re-evaluation of everything comes only from a push to
//! the protected branch; a delivered comment body carries no CRLF.
#![no_main]

use atelier::forge::github::serve::{route, signature_ok, signature_shape_ok, Work};
use libfuzzer_sys::fuzz_target;

const REPOSITORY: &str = "acme/widgets";
const BRANCH: &str = "main";

fuzz_target!(|data: &[u8]| {
    let (head, body) = match data.iter().position(|b| *b == b'\n') {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let head = String::from_utf8_lossy(head);
    let (event, header) = head.split_once(' ').unwrap_or((&head, ""));
    let verified = signature_ok(b"webhook secret", body, Some(header));
    if !signature_shape_ok(header) {
        assert!(!verified, "a header of another shape verified: {header:?}");
    }
    let Ok(payload) = serde_json::from_slice::<serde_json::Value>(body) else {
        return;
    };
    let work = route(event, &payload, REPOSITORY, BRANCH);
    let ours = payload["repository"]["full_name"]
        .as_str()
        .is_some_and(|n| n.eq_ignore_ascii_case(REPOSITORY));
    match work {
        Work::Gate {
            pull, delivered, ..
        } => {
            assert!(ours, "work for another repository");
            let carried = [
                &payload["pull_request"]["number"],
                &payload["issue"]["number"],
            ]
            .iter()
            .any(|n| n.as_u64() == Some(pull));
            assert!(carried, "pull request #{pull} is not in the payload");
            if let Some((_, _, body)) = delivered {
                assert!(!body.contains("\r\n"));
            }
        }
        Work::RegateAll => {
            assert!(ours && event == "push");
            assert_eq!(payload["ref"].as_str(), Some("refs/heads/main"));
        }
        Work::Nothing(_) => {}
    }
});
