//! Iteration memory: a failed step's output reduced to an error digest (at most 10 unique
//! error blocks, each with its file:line when one is named), accumulated into the "do not
//! retry" list the next attempt's prompt carries.

/// The most blocks a digest keeps.
pub const MAX_BLOCKS: usize = 10;
const MAX_BLOCK_LINES: usize = 6;
const MAX_BLOCK_BYTES: usize = 600;

fn is_error_start(line: &str) -> bool {
    let l = line.trim_start().to_ascii_lowercase();
    l.starts_with("error")
        || l.starts_with("fatal")
        || l.starts_with("panicked")
        || l.contains("panicked at")
        || l.starts_with("failed")
        || l.starts_with("failure")
        || l.starts_with("assertion")
        || l.contains(": error:")
        || l.contains("error[")
}

/// The first `path:line` (optionally `:col`) named in a block, like `src/lib.rs:12`.
pub fn location(block: &str) -> Option<String> {
    for word in
        block.split(|c: char| c.is_whitespace() || matches!(c, '(' | ')' | '\'' | '"' | ','))
    {
        let w = word.trim_start_matches("-->").trim_end_matches([':', '.']);
        let mut parts = w.split(':');
        let (Some(path), Some(line)) = (parts.next(), parts.next()) else {
            continue;
        };
        let path_like = path.contains('.') && !path.contains("//") && path.len() > 2;
        if path_like && !line.is_empty() && line.bytes().all(|b| b.is_ascii_digit()) {
            return Some(format!("{path}:{line}"));
        }
    }
    None
}

/// Reduces step output to at most [`MAX_BLOCKS`] unique error blocks. When nothing looks like
/// an error, the last lines of the output stand in as one block.
pub fn digest(step: &str, output: &str) -> Vec<String> {
    let lines: Vec<&str> = output.lines().collect();
    let mut blocks: Vec<String> = Vec::new();
    let mut i = 0;
    while i < lines.len() && blocks.len() < MAX_BLOCKS {
        if is_error_start(lines[i]) {
            let mut block = vec![lines[i].trim_end()];
            let mut j = i + 1;
            while j < lines.len()
                && block.len() < MAX_BLOCK_LINES
                && !lines[j].trim().is_empty()
                && !is_error_start(lines[j])
            {
                block.push(lines[j].trim_end());
                j += 1;
            }
            let text = capped(block.join("\n"));
            let entry = match location(&text) {
                Some(loc) => format!("[{step}] {loc}: {text}"),
                None => format!("[{step}] {text}"),
            };
            if !blocks.contains(&entry) {
                blocks.push(entry);
            }
            i = j;
        } else {
            i += 1;
        }
    }
    if blocks.is_empty() {
        let tail: Vec<&str> = lines
            .iter()
            .rev()
            .filter(|l| !l.trim().is_empty())
            .take(MAX_BLOCK_LINES)
            .copied()
            .collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        let text = capped(if tail.is_empty() {
            "failed with no output".to_string()
        } else {
            tail.join("\n")
        });
        blocks.push(format!("[{step}] {text}"));
    }
    blocks
}

/// Cuts a block to [`MAX_BLOCK_BYTES`] on a character boundary, marking the cut.
fn capped(mut text: String) -> String {
    if text.len() > MAX_BLOCK_BYTES {
        let mut cut = MAX_BLOCK_BYTES;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push('…');
    }
    text
}

/// Adds a new digest to the accumulated do-not-retry list, keeping it unique and bounded.
pub fn remember(memory: &mut Vec<String>, digest: &[String]) {
    for d in digest {
        if !memory.contains(d) {
            memory.push(d.clone());
        }
    }
    let excess = memory.len().saturating_sub(MAX_BLOCKS);
    memory.drain(..excess);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compiler_errors_become_located_unique_blocks() {
        let out = "   Compiling x v0.1.0\nerror[E0308]: mismatched types\n --> src/lib.rs:3:5\n  |\n\nerror[E0308]: mismatched types\n --> src/lib.rs:3:5\n  |\n\nerror: aborting due to 2 previous errors\n";
        let d = digest("build", out);
        assert_eq!(d.len(), 2, "{d:?}");
        assert!(
            d[0].starts_with("[build] src/lib.rs:3: error[E0308]"),
            "{d:?}"
        );
    }

    #[test]
    fn digests_are_capped_at_ten_blocks() {
        let out: String = (0..50)
            .map(|i| format!("error: problem {i} at src/m{i}.rs:{i}\n\n"))
            .collect();
        assert_eq!(digest("test", &out).len(), MAX_BLOCKS);
        let mut memory = Vec::new();
        remember(&mut memory, &digest("test", &out));
        remember(&mut memory, &digest("test", "error: another\n"));
        assert_eq!(memory.len(), MAX_BLOCKS);
        assert!(memory.last().expect("kept").contains("another"));
    }

    #[test]
    fn output_without_errors_keeps_its_tail() {
        let d = digest("check", "ran 3 tests\n1 mismatch\n");
        assert_eq!(d, ["[check] ran 3 tests\n1 mismatch"]);
    }
}
