//! Anthropic's messages API (`/v1/messages`): the `system` prompt and content blocks, rendered
//! like chat turns so that conversations sharing their first turns share a byte prefix.
//!
//! - `system` (a string, or an array of text blocks) becomes a leading `<|system|>` turn, as
//!   a chat `system` message would: `{"system":"Be brief.","messages":[{"role":"user",
//!   "content":"Hi"}]}` renders `<|system|>Be brief.\n<|user|>Hi\n`, the text of the same
//!   conversation in chat completions.
//! - A block's `text` is copied as it is; a `source` (images, documents) becomes
//!   `<|image|>` (or `<|file|>`) and its URL, file id, or the xxh3 hash of its inline data.
//! - `cache_control` is left out: clients move the cache breakpoint from turn to turn, and
//!   the rendered prefix must not change with it.
//! - Every other field (`id`, `name`, `input` of a `tool_use`; `tool_use_id`, `content` of a
//!   `tool_result`; …) follows as `<|KEY|>` + compact JSON, in the body's order; a block
//!   that renders to nothing becomes `<|TYPE|>`.
//!
//! A key given twice in a block counts once, with its last value, at the place it first
//! appeared (see [`super::last_wins`]).

use std::borrow::Cow;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};

use super::content::{ContentSeed, MediaSeed};
use super::json_text::JsonInto;
use super::keys::{AppendStr, Key, KeySeed, StrSeed};
use super::last_wins::LastWins;
use super::trail::{Segment, Trail};
use super::turns::push_tag;

/// Keys of a content block read by name.
const BLOCK_KEYS: &[&str] = &["type", "text", "source", "cache_control"];

/// One Anthropic content block, appended to `out`.
pub(super) struct AnthropicBlockSeed<'o> {
    pub(super) out: &'o mut String,
    pub(super) trail: &'o mut Trail,
}

impl<'de> DeserializeSeed<'de> for AnthropicBlockSeed<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for AnthropicBlockSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a content block object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let start = self.out.len();
        let mut block_type: Option<Cow<'de, str>> = None;
        let mut fields = LastWins::new(start);
        while let Some(key) = map.next_key_seed(KeySeed(BLOCK_KEYS))? {
            let name: Cow<'de, str> = match key {
                Key::Known("cache_control") => {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
                Key::Known("type") => {
                    let value = map.next_value_seed(StrSeed);
                    block_type = Some(self.trail.note(Segment::Key("type"), value)?);
                    continue;
                }
                Key::Known(name) => Cow::Borrowed(name),
                Key::Other(name) => name,
            };
            let label = match block_type.as_deref() {
                Some("image") => "image",
                _ => "file",
            };
            let trail = &mut *self.trail;
            let tag = name.clone();
            let result = fields.render(self.out, name, |out| match tag.as_ref() {
                "text" => map.next_value_seed(AppendStr(out)),
                "source" => map.next_value_seed(MediaSeed::new(out, trail, label, true)),
                other => {
                    let mark = out.len();
                    push_tag(out, other);
                    let value_at = out.len();
                    map.next_value_seed(JsonInto(&mut *out))?;
                    if &out[value_at..] == "null" {
                        out.truncate(mark);
                    }
                    Ok(())
                }
            });
            if result.is_err() {
                return self.trail.note(Segment::OwnedKey(tag.into_owned()), result);
            }
        }
        fields.finish(self.out);
        if self.out.len() == start
            && let Some(block_type) = block_type
        {
            push_tag(self.out, &block_type);
        }
        Ok(())
    }
}

/// The top-level `system`: a string, `null`, or an array of text blocks, rendered as a
/// leading `<|system|>` turn (nothing when it is empty).
pub(super) struct SystemSeed<'o> {
    pub(super) out: &'o mut String,
    pub(super) trail: &'o mut Trail,
}

impl<'de> DeserializeSeed<'de> for SystemSeed<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        let mark = self.out.len();
        push_tag(self.out, "system");
        let text_at = self.out.len();
        ContentSeed {
            out: &mut *self.out,
            trail: self.trail,
            anthropic: true,
            shape: None,
        }
        .deserialize(deserializer)?;
        if self.out.len() == text_at {
            self.out.truncate(mark);
        } else {
            self.out.push('\n');
        }
        Ok(())
    }
}
