//! PLACEHOLDER: being written (issue 10); returns no findings yet.

use super::{ChangeView, Finding};

pub fn check(_reviewer: &str, _change: &ChangeView) -> Vec<Finding> {
    Vec::new()
}
