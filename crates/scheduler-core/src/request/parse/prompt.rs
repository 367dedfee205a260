//! The `prompt` of `/v1/completions` and the `input` of `/v1/embeddings`: a string, an array of
//! strings, an array of token ids, or an array of arrays of token ids.
//!
//! Strings become text; the non-empty strings of an array are joined with `"\n"`. Token ids
//! become tokens; arrays of token-id arrays are concatenated in order. One prompt cannot mix
//! strings and token ids, nor ids and arrays of ids.

use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, Error, SeqAccess, Unexpected, Visitor};

use super::trail::{Segment, Trail};
use crate::request::Prompt;

/// Separator between the strings of an array prompt.
pub(super) const PROMPT_ARRAY_SEPARATOR: &str = "\n";

/// Reads a completions prompt or an embeddings input.
pub(super) struct PromptSeed<'t>(pub(super) &'t mut Trail);

impl<'de> DeserializeSeed<'de> for PromptSeed<'_> {
    type Value = Prompt;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Prompt, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for PromptSeed<'_> {
    type Value = Prompt;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string, an array of strings, or an array of token ids")
    }

    fn visit_str<E: Error>(self, v: &str) -> Result<Prompt, E> {
        Ok(Prompt::Text(v.to_owned()))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Prompt, A::Error> {
        let mut state = ArrayPrompt::default();
        if let Some(hint) = seq.size_hint() {
            state.tokens.reserve(hint.min(1 << 16));
        }
        let mut index = 0;
        loop {
            let element = ElementSeed {
                state: &mut state,
                trail: &mut *self.0,
            };
            let next = seq.next_element_seed(element);
            if self.0.note(Segment::Index(index), next)?.is_none() {
                break;
            }
            index += 1;
        }
        Ok(match state.shape {
            Shape::Texts | Shape::Empty => Prompt::Text(state.text),
            Shape::Ids | Shape::IdArrays => Prompt::Tokens(state.tokens),
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Shape {
    #[default]
    Empty,
    Texts,
    Ids,
    IdArrays,
}

impl Shape {
    fn describe(self) -> &'static str {
        match self {
            Shape::Empty => "nothing",
            Shape::Texts => "strings",
            Shape::Ids => "token ids",
            Shape::IdArrays => "arrays of token ids",
        }
    }
}

#[derive(Default)]
struct ArrayPrompt {
    shape: Shape,
    text: String,
    tokens: Vec<u32>,
}

impl ArrayPrompt {
    fn enter<E: Error>(&mut self, shape: Shape) -> Result<(), E> {
        if self.shape == Shape::Empty {
            self.shape = shape;
        } else if self.shape != shape {
            return Err(E::custom(format_args!(
                "an array prompt of {} cannot also hold {}",
                self.shape.describe(),
                shape.describe()
            )));
        }
        Ok(())
    }
}

/// One element of an array prompt.
struct ElementSeed<'s> {
    state: &'s mut ArrayPrompt,
    trail: &'s mut Trail,
}

impl<'de> DeserializeSeed<'de> for ElementSeed<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ElementSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string, a token id, or an array of token ids")
    }

    fn visit_str<E: Error>(self, v: &str) -> Result<(), E> {
        self.state.enter(Shape::Texts)?;
        if !v.is_empty() {
            if !self.state.text.is_empty() {
                self.state.text.push_str(PROMPT_ARRAY_SEPARATOR);
            }
            self.state.text.push_str(v);
        }
        Ok(())
    }

    fn visit_u64<E: Error>(self, v: u64) -> Result<(), E> {
        self.state.enter(Shape::Ids)?;
        self.state.tokens.push(token_id(v)?);
        Ok(())
    }

    fn visit_i64<E: Error>(self, v: i64) -> Result<(), E> {
        match u64::try_from(v) {
            Ok(v) => self.visit_u64(v),
            Err(_) => Err(E::invalid_value(
                Unexpected::Signed(v),
                &"a token id (0 to 2^32-1)",
            )),
        }
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.state.enter(Shape::IdArrays)?;
        let mut index = 0;
        loop {
            let next = seq.next_element::<u64>();
            let Some(id) = self.trail.note(Segment::Index(index), next)? else {
                break;
            };
            let id = self.trail.note(Segment::Index(index), token_id(id))?;
            self.state.tokens.push(id);
            index += 1;
        }
        Ok(())
    }
}

fn token_id<E: Error>(v: u64) -> Result<u32, E> {
    u32::try_from(v)
        .map_err(|_| E::invalid_value(Unexpected::Unsigned(v), &"a token id (0 to 2^32-1)"))
}
