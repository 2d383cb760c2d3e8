//! Path questions shared by the policy's rules (`policy`) and the panel's built-in reviewers
//! (`review`): which changed paths a set of globs covers. Pure: strings in, booleans out. Both
//! import from here, so neither needs the other for it.

use globset::GlobSet;

/// Whether a file at `path` could stand for a folder the globs name (a symlink or a submodule
/// at `.ci` is the `.ci/` folder on a checkout): a glob matches a path beneath it, or spells
/// one out (compared without regard to ASCII case, erring on the side of matching).
pub fn stands_for(set: &GlobSet, globs: &[String], path: &str) -> bool {
    let dir = format!("{path}/");
    set.is_match(format!("{dir}x"))
        || globs.iter().any(|g| {
            g.len() > dir.len()
                && g.get(..dir.len())
                    .is_some_and(|p| p.eq_ignore_ascii_case(&dir))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use globset::{Glob, GlobSetBuilder};

    fn set(globs: &[&str]) -> (GlobSet, Vec<String>) {
        let mut b = GlobSetBuilder::new();
        for g in globs {
            b.add(Glob::new(g).expect("a valid glob"));
        }
        let set = b.build().expect("a glob set");
        (set, globs.iter().map(|g| g.to_string()).collect())
    }

    #[test]
    fn a_file_stands_for_the_folder_its_globs_name() {
        let (s, g) = set(&[".ci/**"]);
        assert!(stands_for(&s, &g, ".ci"));
        assert!(stands_for(&s, &g, ".CI"));
        assert!(!stands_for(&s, &g, ".cix"));
        assert!(!stands_for(&s, &g, "src"));
        let (s, g) = set(&["policies/governance.toml"]);
        assert!(stands_for(&s, &g, "policies"));
        assert!(!stands_for(&s, &g, "policies/governance.toml"));
    }
}
