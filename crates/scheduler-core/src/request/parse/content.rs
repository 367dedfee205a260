//! Message content: a string, `null`, or an array of content parts.
//!
//! Parts are rendered in order, separated by `"\n"`. A part's `text` (or `refusal`) is copied
//! as it is; media become a tag and a stable reference — `<|image|>URL`, `<|audio|>…`,
//! `<|video|>…`, `<|file|>ID` — where inline data (`data:` URLs, base64 payloads) is replaced
//! by its xxh3 hash. A part with none of these renders as `<|TYPE|>`.
//!
//! A key given twice in a part (or in a media object) counts once, with its last value, at the
//! place it first appeared: what the model server keeps (see [`super::last_wins`]).

use std::borrow::Cow;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, Error, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::anthropic::AnthropicBlockSeed;
use super::json_text::push_media_ref;
use super::keys::{AppendStr, Key, KeySeed, StrSeed};
use super::last_wins::LastWins;
use super::trail::{Segment, Trail};
use crate::request::chat::ContentShape;

/// Separator between the parts of an array content.
pub(super) const PART_SEPARATOR: &str = "\n";

/// Appends a message's content to `out`.
pub(super) struct ContentSeed<'o> {
    pub(super) out: &'o mut String,
    pub(super) trail: &'o mut Trail,
    /// The parts are Anthropic content blocks ([`AnthropicBlockSeed`]).
    pub(super) anthropic: bool,
    /// Where to note each part's range in `out` and whether one was not text (chat
    /// messages kept for [`ChatMessages`](crate::request::ChatMessages)).
    pub(super) shape: Option<&'o mut ContentShape>,
}

impl<'de> DeserializeSeed<'de> for ContentSeed<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ContentSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string, null, or an array of content parts")
    }

    fn visit_str<E: Error>(self, v: &str) -> Result<(), E> {
        self.out.push_str(v);
        Ok(())
    }

    fn visit_unit<E: Error>(mut self) -> Result<(), E> {
        if let Some(shape) = self.shape.as_deref_mut() {
            shape.array = true;
        }
        Ok(())
    }

    fn visit_none<E: Error>(self) -> Result<(), E> {
        self.visit_unit()
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        if let Some(shape) = self.shape.as_deref_mut() {
            shape.array = true;
        }
        let mut index = 0;
        loop {
            let mark = self.out.len();
            if index > 0 {
                self.out.push_str(PART_SEPARATOR);
            }
            let text_at = self.out.len();
            let mut text = true;
            let next = if self.anthropic {
                seq.next_element_seed(AnthropicBlockSeed {
                    out: &mut *self.out,
                    trail: &mut *self.trail,
                })
            } else {
                seq.next_element_seed(PartSeed {
                    out: &mut *self.out,
                    trail: &mut *self.trail,
                    text: &mut text,
                })
            };
            if self.trail.note(Segment::Index(index), next)?.is_none() {
                self.out.truncate(mark);
                return Ok(());
            }
            if let Some(shape) = self.shape.as_deref_mut() {
                shape.parts.push(text_at..self.out.len());
                shape.media |= !text;
            }
            index += 1;
        }
    }
}

/// Keys of a content part this parser reads.
const PART_KEYS: &[&str] = &[
    "type",
    "text",
    "refusal",
    "image_url",
    "audio_url",
    "video_url",
    "input_audio",
    "file",
    "file_id",
    "file_data",
    "file_url",
];

/// Part types whose text a model server renders as text.
const TEXT_PART_TYPES: &[&str] = &["text", "refusal", "input_text", "output_text"];

/// One content part, appended to `out`.
struct PartSeed<'o> {
    out: &'o mut String,
    trail: &'o mut Trail,
    /// Set to whether the part was text (a text type, or no type, with `text` or `refusal`
    /// and no media).
    text: &'o mut bool,
}

impl<'de> DeserializeSeed<'de> for PartSeed<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for PartSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a content part object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let start = self.out.len();
        let mut part_type: Option<Cow<'de, str>> = None;
        let mut fields = LastWins::new(start);
        let (mut saw_text, mut saw_media) = (false, false);
        while let Some(key) = map.next_key_seed(KeySeed(PART_KEYS))? {
            let Key::Known(name) = key else {
                map.next_value::<IgnoredAny>()?;
                continue;
            };
            if name == "type" {
                let value = map.next_value_seed(StrSeed);
                part_type = Some(self.trail.note(Segment::Key(name), value)?);
                continue;
            }
            match name {
                "text" | "refusal" => saw_text = true,
                _ => saw_media = true,
            }
            let trail = &mut *self.trail;
            let result = fields.render(self.out, Cow::Borrowed(name), |out| match name {
                "text" | "refusal" => map.next_value_seed(AppendStr(out)),
                "image_url" => map.next_value_seed(MediaSeed::new(out, trail, "image", false)),
                "audio_url" | "input_audio" => {
                    map.next_value_seed(MediaSeed::new(out, trail, "audio", false))
                }
                "video_url" => map.next_value_seed(MediaSeed::new(out, trail, "video", false)),
                "file_data" => map.next_value_seed(MediaSeed::new(out, trail, "file", true)),
                _ => map.next_value_seed(MediaSeed::new(out, trail, "file", false)),
            });
            self.trail.note(Segment::Key(name), result)?;
        }
        fields.finish(self.out);
        let text_type = part_type
            .as_deref()
            .is_none_or(|kind| TEXT_PART_TYPES.contains(&kind));
        *self.text = saw_text && !saw_media && text_type;
        if self.out.len() == start
            && let Some(part_type) = part_type
        {
            self.out.push_str("<|");
            self.out.push_str(&part_type);
            self.out.push_str("|>");
        }
        Ok(())
    }
}

/// A media reference: a string (URL, id or inline data) or an object holding one
/// (`url`, `file_id`, `data`, `file_data`). Renders `<|LABEL|>` and the reference(s).
pub(super) struct MediaSeed<'o> {
    out: &'o mut String,
    trail: &'o mut Trail,
    label: &'static str,
    inline: bool,
}

impl<'o> MediaSeed<'o> {
    pub(super) fn new(
        out: &'o mut String,
        trail: &'o mut Trail,
        label: &'static str,
        inline: bool,
    ) -> Self {
        MediaSeed {
            out,
            trail,
            label,
            inline,
        }
    }

    fn open(&mut self) {
        self.out.push_str("<|");
        self.out.push_str(self.label);
        self.out.push_str("|>");
    }
}

const MEDIA_KEYS: &[&str] = &["url", "file_id", "data", "file_data"];

impl<'de> DeserializeSeed<'de> for MediaSeed<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for MediaSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a URL, an id, or an object with `url`, `file_id`, `data` or `file_data`")
    }

    fn visit_str<E: Error>(mut self, v: &str) -> Result<(), E> {
        self.open();
        push_media_ref(self.out, v, self.inline);
        Ok(())
    }

    fn visit_unit<E: Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        // At most one reference per key (the last), in first-appearance order.
        let mut references: Vec<(&'static str, Cow<'de, str>)> = Vec::new();
        while let Some(key) = map.next_key_seed(KeySeed(MEDIA_KEYS))? {
            let Key::Known(name) = key else {
                map.next_value::<IgnoredAny>()?;
                continue;
            };
            let reference = map.next_value_seed(StrSeed);
            let reference = self.trail.note(Segment::Key(name), reference)?;
            match references.iter_mut().find(|(known, _)| *known == name) {
                Some(earlier) => earlier.1 = reference,
                None => references.push((name, reference)),
            }
        }
        self.open();
        for (i, (name, reference)) in references.iter().enumerate() {
            if i > 0 {
                self.out.push(' ');
            }
            push_media_ref(self.out, reference, matches!(*name, "data" | "file_data"));
        }
        Ok(())
    }
}
