//! Quoting a client's own text back to it, or into a log line, without letting the client
//! choose how much: a model name of 15 MB must not make a 15 MB error answer.
//!
//! ```
//! use shepherd_scheduler_core::echo::{MAX_ECHO_BYTES, truncated};
//!
//! let model = "m".repeat(1 << 20);
//! let quoted = truncated(&model, MAX_ECHO_BYTES);
//! assert!(quoted.len() <= MAX_ECHO_BYTES && quoted.ends_with('…'));
//! assert_eq!(truncated("llama", MAX_ECHO_BYTES), "llama");
//! assert_eq!(truncated("ééééé", 6), "é…"); // cut on a character boundary
//! ```

use std::borrow::Cow;

/// Longest piece of a client's own text (a model name, a path) quoted in an answer, in bytes.
pub const MAX_ECHO_BYTES: usize = 256;

/// Longest error message an adapter answers with, in bytes.
pub const MAX_MESSAGE_BYTES: usize = 1024;

/// `text` cut to at most `max` bytes on a character boundary, ending in `…` when cut.
pub fn truncated(text: &str, max: usize) -> Cow<'_, str> {
    if text.len() <= max {
        return Cow::Borrowed(text);
    }
    let mut end = max.saturating_sub('…'.len_utf8());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!("{}…", &text[..end]))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn never_longer_than_asked_and_a_prefix_of_the_text(text in ".{0,300}", max in 3usize..300) {
            let cut = truncated(&text, max);
            prop_assert!(cut.len() <= max.max(text.len().min(max)));
            let kept = cut.strip_suffix('…').unwrap_or(&cut);
            prop_assert!(text.starts_with(kept));
        }
    }
}
