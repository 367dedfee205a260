//! Keys given twice in one object: the last value wins, as in the model server.
//!
//! OpenAI-compatible servers read bodies with Python's `json` (or pydantic), where a key given
//! twice keeps its *last* value, at the position where the key *first* appeared. A request's
//! prefix hash must come from the text the server will render, so every object whose fields
//! become prompt text goes through [`LastWins`]:
//!
//! - the first value of each key is rendered straight into the prompt buffer, so an object
//!   without repeats costs nothing extra;
//! - a repeated key's value is rendered into a side buffer that replaces the earlier text;
//! - [`LastWins::finish`] rebuilds the object's text once, only when a key was repeated.
//!
//! Lookups switch to a hash map past a few keys, so the work stays linear in the body however
//! many keys or repeats an object has. An earlier value is still read (and must have a valid
//! type) before it is dropped.

use std::borrow::Cow;
use std::collections::HashMap;
use std::ops::Range;

/// Up to this many distinct keys, a key is found by a linear scan (the usual object has two or
/// three); past it, through a hash map.
const LINEAR_LOOKUP_KEYS: usize = 8;

/// One key's rendering: where its first value's text sits in the buffer, and the text of its
/// last value when that was a repeat.
#[derive(Debug)]
struct Field<'k> {
    key: Cow<'k, str>,
    range: Range<usize>,
    replacement: Option<String>,
}

/// The rendered fields of one object, in the order their keys first appeared.
///
/// Between [`LastWins::new`] (given the buffer's length) and [`LastWins::finish`], everything
/// appended to the buffer must come from [`LastWins::render`].
#[derive(Debug)]
pub(super) struct LastWins<'k> {
    start: usize,
    fields: Vec<Field<'k>>,
    index: HashMap<Cow<'k, str>, usize>,
    replaced: bool,
}

impl<'k> LastWins<'k> {
    /// Tracks an object whose text starts at byte `start` of the buffer (its current length).
    pub(super) fn new(start: usize) -> Self {
        LastWins {
            start,
            fields: Vec::new(),
            index: HashMap::new(),
            replaced: false,
        }
    }

    fn find(&self, key: &str) -> Option<usize> {
        if self.fields.len() <= LINEAR_LOOKUP_KEYS {
            self.fields.iter().position(|field| field.key == key)
        } else {
            self.index.get(key).copied()
        }
    }

    /// Renders the value of `key` with `render`: at the end of `out` the first time the key
    /// appears, into a side buffer that replaces the earlier text when it repeats.
    pub(super) fn render<T, E>(
        &mut self,
        out: &mut String,
        key: Cow<'k, str>,
        render: impl FnOnce(&mut String) -> Result<T, E>,
    ) -> Result<T, E> {
        if let Some(at) = self.find(&key) {
            let mut side = String::new();
            let value = render(&mut side)?;
            if let Some(field) = self.fields.get_mut(at) {
                field.replacement = Some(side);
                self.replaced = true;
            }
            return Ok(value);
        }
        let from = out.len();
        let value = render(out)?;
        let at = self.fields.len();
        if at == LINEAR_LOOKUP_KEYS {
            for (i, field) in self.fields.iter().enumerate() {
                self.index.insert(field.key.clone(), i);
            }
        }
        if at >= LINEAR_LOOKUP_KEYS {
            self.index.insert(key.clone(), at);
        }
        self.fields.push(Field {
            key,
            range: from..out.len(),
            replacement: None,
        });
        Ok(value)
    }

    /// Leaves in `out` each key's last value, in first-appearance order (a no-op unless some
    /// key was repeated).
    pub(super) fn finish(self, out: &mut String) {
        if !self.replaced || self.start > out.len() {
            return;
        }
        let first_values = out.split_off(self.start);
        for field in &self.fields {
            match &field.replacement {
                Some(text) => out.push_str(text),
                None => {
                    let range = field.range.start.saturating_sub(self.start)
                        ..field.range.end.saturating_sub(self.start);
                    out.push_str(first_values.get(range).unwrap_or_default());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(fields: &mut LastWins<'static>, out: &mut String, key: &'static str, text: &str) {
        fields
            .render::<(), ()>(out, Cow::Borrowed(key), |buf| {
                buf.push_str(text);
                Ok(())
            })
            .unwrap();
    }

    #[test]
    fn repeated_keys_keep_the_last_value_in_the_first_position() {
        let mut out = String::from("head|");
        let mut fields = LastWins::new(out.len());
        put(&mut fields, &mut out, "a", "A1");
        put(&mut fields, &mut out, "b", "B1");
        put(&mut fields, &mut out, "a", "A2");
        put(&mut fields, &mut out, "a", "A3");
        fields.finish(&mut out);
        assert_eq!(out, "head|A3B1");
    }

    #[test]
    fn without_repeats_the_text_is_left_as_rendered() {
        let mut out = String::new();
        let mut fields = LastWins::new(0);
        put(&mut fields, &mut out, "x", "1");
        put(&mut fields, &mut out, "y", "2");
        fields.finish(&mut out);
        assert_eq!(out, "12");
    }

    #[test]
    fn many_keys_switch_to_the_hash_map() {
        let keys: Vec<&'static str> = vec!["k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8"];
        let mut out = String::new();
        let mut fields = LastWins::new(0);
        for key in keys.iter().chain(&keys) {
            for _ in 0..2 {
                put(&mut fields, &mut out, key, key);
            }
        }
        put(&mut fields, &mut out, "k0", "last");
        put(&mut fields, &mut out, "k8", "LAST");
        fields.finish(&mut out);
        assert_eq!(out, "lastk1k2k3k4k5k6k7LAST");
    }
}
