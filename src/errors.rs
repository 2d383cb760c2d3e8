//! Helpers shared by the error types of every layer.

/// An error and every cause under it, on one line (`what: why: deeper why`), for notes and logs
/// that carry a failure as text.
pub fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(cause) = next {
        let text = cause.to_string();
        // A wrapper that displays its source (transparent) would repeat it.
        if !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        next = cause.source();
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn joins_every_cause_once() {
        let io = std::io::Error::other("disk full");
        let fs = crate::fsutil::FsError::Io {
            what: "writing x".into(),
            source: io,
        };
        let w = crate::workflow::Error::from(fs).context("recording");
        assert_eq!(super::chain(&w), "recording: writing x: disk full");
    }
}
