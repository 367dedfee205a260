//! Conversation turns: the `messages` of `/v1/chat/completions` and the `input` items of
//! `/v1/responses`, rendered in order into the prompt text.
//!
//! Each turn becomes `<|ROLE|>` + content + its other fields + `"\n"`, where every other field
//! (`name`, `tool_calls`, `tool_call_id`, `call_id`, `arguments`, `output`, …) is rendered as
//! `<|KEY|>` followed by its value as compact JSON, in the body's order (fields that are
//! `null` are left out). A responses item without `role` and `content` (a function call or
//! its output, say) uses its `type` in place of the role; a responses message without `role`
//! is a `user` turn.
//!
//! A key given twice in a turn counts once, with its last value, at the place it first
//! appeared (the role always leads): what the model server keeps (see [`super::last_wins`]).

use std::borrow::Cow;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, Error, MapAccess, SeqAccess, Visitor};

use super::content::ContentSeed;
use super::json_text::JsonInto;
use super::keys::{Key, KeySeed, StrSeed};
use super::last_wins::LastWins;
use super::trail::{Segment, Trail};
use crate::request::chat::{ChatMessage, ContentShape};

/// Which API the turns come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TurnKind {
    /// Chat completions `messages`: every message needs a `role`.
    ChatMessage,
    /// Responses `input`: a string (one user turn) or an array of items.
    ResponsesItem,
    /// Anthropic `messages`: every message needs a `role`; content blocks are Anthropic's
    /// (see [`super::anthropic`]).
    AnthropicMessage,
}

/// Appends `<|ROLE|>` + text + `"\n"`: how a plain-string turn is rendered.
pub(super) fn push_text_turn(out: &mut String, role: &str, text: &str) {
    push_tag(out, role);
    out.push_str(text);
    out.push('\n');
}

/// Appends `<|TAG|>`.
pub(super) fn push_tag(out: &mut String, tag: &str) {
    out.reserve(tag.len() + 4);
    out.push_str("<|");
    out.push_str(tag);
    out.push_str("|>");
}

/// Appends every turn of an array to `out`; returns how many turns there were.
pub(super) struct TurnsSeed<'o> {
    pub(super) out: &'o mut String,
    pub(super) trail: &'o mut Trail,
    pub(super) kind: TurnKind,
    /// Where to keep each turn as a [`ChatMessage`] too (chat completions).
    pub(super) keep: Option<&'o mut Vec<ChatMessage>>,
}

impl<'de> DeserializeSeed<'de> for TurnsSeed<'_> {
    type Value = usize;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<usize, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for TurnsSeed<'_> {
    type Value = usize;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            TurnKind::ChatMessage | TurnKind::AnthropicMessage => {
                f.write_str("an array of messages")
            }
            TurnKind::ResponsesItem => f.write_str("a string or an array of input items"),
        }
    }

    fn visit_str<E: Error>(self, v: &str) -> Result<usize, E> {
        match self.kind {
            TurnKind::ResponsesItem => {
                push_text_turn(self.out, "user", v);
                Ok(1)
            }
            TurnKind::ChatMessage | TurnKind::AnthropicMessage => {
                Err(E::invalid_type(serde::de::Unexpected::Str(v), &self))
            }
        }
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<usize, A::Error> {
        let mut index = 0;
        loop {
            let turn = TurnSeed {
                out: &mut *self.out,
                trail: &mut *self.trail,
                kind: self.kind,
                keep: self.keep.as_deref_mut(),
            };
            let next = seq.next_element_seed(turn);
            if self.trail.note(Segment::Index(index), next)?.is_none() {
                return Ok(index);
            }
            index += 1;
        }
    }
}

const TURN_KEYS: &[&str] = &["role", "content", "type"];

/// One message or input item.
struct TurnSeed<'o> {
    out: &'o mut String,
    trail: &'o mut Trail,
    kind: TurnKind,
    keep: Option<&'o mut Vec<ChatMessage>>,
}

impl<'de> DeserializeSeed<'de> for TurnSeed<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for TurnSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            TurnKind::ChatMessage | TurnKind::AnthropicMessage => f.write_str("a message object"),
            TurnKind::ResponsesItem => f.write_str("an input item object"),
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let start = self.out.len();
        // The usual order: the role comes first, so its header goes in place (`header` is the
        // role it was written for); otherwise the header is put in front at the end.
        let mut header: Option<Cow<'de, str>> = None;
        let mut role: Option<Cow<'de, str>> = None;
        let mut item_type: Option<Cow<'de, str>> = None;
        let mut has_content = false;
        let mut fields: Option<LastWins<'de>> = None;
        let mut kept = self.keep.is_some().then(ChatMessage::default);
        while let Some(key) = map.next_key_seed(KeySeed(TURN_KEYS))? {
            match key {
                Key::Known("role") => {
                    let value = map.next_value_seed(StrSeed);
                    let value = self.trail.note(Segment::Key("role"), value)?;
                    if fields.is_none() && header.is_none() {
                        push_tag(self.out, &value);
                        header = Some(value.clone());
                    }
                    role = Some(value);
                }
                Key::Known("content") => {
                    has_content = true;
                    let trail = &mut *self.trail;
                    let anthropic = self.kind == TurnKind::AnthropicMessage;
                    let kept = kept.as_mut();
                    let result = fields
                        .get_or_insert_with(|| LastWins::new(self.out.len()))
                        .render(self.out, Cow::Borrowed("content"), |out| {
                            let from = out.len();
                            let mut shape = ContentShape::default();
                            map.next_value_seed(ContentSeed {
                                out: &mut *out,
                                trail,
                                anthropic,
                                shape: kept.is_some().then_some(&mut shape),
                            })?;
                            if let Some(message) = kept {
                                keep_content(message, out, from, shape);
                            }
                            Ok(())
                        });
                    self.trail.note(Segment::Key("content"), result)?;
                }
                Key::Known(name) => {
                    // "type": what a responses item is; used only when it has no role.
                    let value = map.next_value_seed(StrSeed);
                    item_type = Some(self.trail.note(Segment::Key(name), value)?);
                }
                Key::Other(name) => {
                    let tag = name.clone();
                    let kept = kept.as_mut();
                    let result = fields
                        .get_or_insert_with(|| LastWins::new(self.out.len()))
                        .render(self.out, name, |out| {
                            let mark = out.len();
                            push_tag(out, &tag);
                            let value_at = out.len();
                            map.next_value_seed(JsonInto(&mut *out))?;
                            let json = out.get(value_at..).unwrap_or_default();
                            if let Some(message) = kept {
                                match json {
                                    "null" => message.fields.retain(|(key, _)| *key != *tag),
                                    _ => message.set_field(&tag, json.to_owned()),
                                }
                            }
                            if json == "null" {
                                out.truncate(mark);
                            }
                            Ok(())
                        });
                    if let Err(e) = result {
                        self.trail
                            .note::<(), _>(Segment::OwnedKey(tag.into_owned()), Err(()))
                            .ok();
                        return Err(e);
                    }
                }
            }
        }
        if let Some(fields) = fields {
            fields.finish(self.out);
        }
        let role_header: &str = match (&role, self.kind) {
            (Some(role), _) => role,
            (None, TurnKind::ChatMessage | TurnKind::AnthropicMessage) => {
                return Err(A::Error::missing_field("role"));
            }
            (None, TurnKind::ResponsesItem) if has_content => "user",
            (None, TurnKind::ResponsesItem) => item_type.as_deref().unwrap_or("item"),
        };
        match header {
            Some(written) if written == role_header => {}
            _ => {
                let mut tag = String::with_capacity(role_header.len() + 4);
                push_tag(&mut tag, role_header);
                match header {
                    // The role was given again later: the last one is the turn's role.
                    Some(written) => {
                        let end = (start + written.len() + 4).min(self.out.len());
                        self.out.replace_range(start..end, &tag);
                    }
                    None => self.out.insert_str(start, &tag),
                }
            }
        }
        if let (Some(keep), Some(mut message)) = (self.keep, kept) {
            message.role = role_header.to_owned();
            if !has_content {
                message.parts = Some(Vec::new());
            }
            keep.push(message);
        }
        self.out.push('\n');
        Ok(())
    }
}

/// Keeps in `message` the content rendered into `out` from byte `from` on.
fn keep_content(message: &mut ChatMessage, out: &str, from: usize, shape: ContentShape) {
    message.content = out.get(from..).unwrap_or_default().to_owned();
    message.parts = shape.array.then(|| {
        shape
            .parts
            .iter()
            .map(|part| part.start.saturating_sub(from)..part.end.saturating_sub(from))
            .collect()
    });
    message.has_media = shape.media;
}
