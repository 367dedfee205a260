//! The field path of a parse error, recorded on the way back up from where the error happened.

use std::fmt::Write as _;

/// One step of a field path: an object key or an array index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Segment {
    /// A key of an object, e.g. `messages`.
    Key(&'static str),
    /// A key this parser does not know by name (kept only when it leads to an error).
    OwnedKey(String),
    /// An array index.
    Index(usize),
}

/// The path to the value that failed, innermost segment first while it is being recorded.
#[derive(Debug, Default)]
pub(super) struct Trail {
    segments: Vec<Segment>,
}

impl Trail {
    /// Records `segment` when `result` is an error (called by the parent of the failed value).
    pub(super) fn note<T, E>(&mut self, segment: Segment, result: Result<T, E>) -> Result<T, E> {
        if result.is_err() {
            self.segments.push(segment);
        }
        result
    }

    /// The path in the usual notation, e.g. `messages[2].content`; empty for the whole body.
    pub(super) fn render(&self) -> String {
        let mut path = String::new();
        for segment in self.segments.iter().rev() {
            match segment {
                Segment::Key(key) => push_key(&mut path, key),
                Segment::OwnedKey(key) => push_key(&mut path, key),
                Segment::Index(index) => {
                    let _ = write!(path, "[{index}]");
                }
            }
        }
        path
    }
}

fn push_key(path: &mut String, key: &str) {
    if !path.is_empty() {
        path.push('.');
    }
    path.push_str(key);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_outermost_first() {
        let mut trail = Trail::default();
        let _ = trail.note::<(), ()>(Segment::Key("content"), Err(()));
        let _ = trail.note::<(), ()>(Segment::Index(2), Err(()));
        let _ = trail.note::<(), ()>(Segment::Key("messages"), Err(()));
        let _ = trail.note::<(), ()>(Segment::Key("ignored"), Ok(()));
        assert_eq!(trail.render(), "messages[2].content");
    }

    #[test]
    fn empty_trail_is_the_body() {
        assert_eq!(Trail::default().render(), "");
    }
}
