//! The top-level request object: the fields the scheduler needs, read in one pass; every other
//! field is skipped without being built. A field given twice keeps its last value, as in the
//! model server.

use std::borrow::Cow;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, Error, IgnoredAny, MapAccess, Visitor};

use super::ApiKind;
use super::anthropic::SystemSeed;
use super::json_text::JsonInto;
use super::keys::{Key, KeySeed, StrSeed};
use super::last_wins::LastWins;
use super::prompt::PromptSeed;
use super::trail::{Segment, Trail};
use super::turns::{TurnKind, TurnsSeed, push_text_turn};
use crate::request::Prompt;
use crate::request::chat::ChatMessage;

/// What the body said, before the checks that need all of it (required fields, empty prompt).
#[derive(Debug, Default)]
pub(super) struct BodyFields {
    /// `model`.
    pub(super) model: Option<String>,
    /// `stream` (`null` counts as absent).
    pub(super) stream: Option<bool>,
    /// `max_tokens`.
    pub(super) max_tokens: Option<u32>,
    /// `max_completion_tokens`.
    pub(super) max_completion_tokens: Option<u32>,
    /// `max_output_tokens`.
    pub(super) max_output_tokens: Option<u32>,
    /// Completions `prompt` / embeddings `input`.
    pub(super) prompt: Option<Prompt>,
    /// Rendered `tools` and `functions`.
    pub(super) tools: String,
    /// Rendered responses `instructions`.
    pub(super) instructions: String,
    /// Rendered chat `messages` / responses `input`.
    pub(super) turns: String,
    /// How many turns there were, when `messages` / `input` was present.
    pub(super) turn_count: Option<usize>,
    /// Chat completions `messages`, kept as messages.
    pub(super) chat: Vec<ChatMessage>,
    /// Whether the last `tools` rendered something.
    pub(super) has_tools: bool,
}

const COMMON_KEYS: [&str; 5] = [
    "model",
    "stream",
    "max_tokens",
    "max_completion_tokens",
    "max_output_tokens",
];

const COMPLETIONS_KEYS: &[&str] = &[
    COMMON_KEYS[0],
    COMMON_KEYS[1],
    COMMON_KEYS[2],
    COMMON_KEYS[3],
    COMMON_KEYS[4],
    "prompt",
];
const CHAT_KEYS: &[&str] = &[
    COMMON_KEYS[0],
    COMMON_KEYS[1],
    COMMON_KEYS[2],
    COMMON_KEYS[3],
    COMMON_KEYS[4],
    "messages",
    "tools",
    "functions",
];
const RESPONSES_KEYS: &[&str] = &[
    COMMON_KEYS[0],
    COMMON_KEYS[1],
    COMMON_KEYS[2],
    COMMON_KEYS[3],
    COMMON_KEYS[4],
    "input",
    "instructions",
    "tools",
];
const MESSAGES_KEYS: &[&str] = &[
    COMMON_KEYS[0],
    COMMON_KEYS[1],
    COMMON_KEYS[2],
    COMMON_KEYS[3],
    COMMON_KEYS[4],
    "messages",
    "tools",
    "system",
];
const EMBEDDINGS_KEYS: &[&str] = &[
    COMMON_KEYS[0],
    COMMON_KEYS[1],
    COMMON_KEYS[2],
    COMMON_KEYS[3],
    COMMON_KEYS[4],
    "input",
];

/// Reads the top-level object of a body for `api`.
pub(super) struct BodySeed<'t> {
    pub(super) api: ApiKind,
    pub(super) trail: &'t mut Trail,
}

impl<'de> DeserializeSeed<'de> for BodySeed<'_> {
    type Value = BodyFields;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<BodyFields, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for BodySeed<'_> {
    type Value = BodyFields;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a request object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<BodyFields, A::Error> {
        let known = match self.api {
            ApiKind::Completions => COMPLETIONS_KEYS,
            ApiKind::ChatCompletions => CHAT_KEYS,
            ApiKind::Responses => RESPONSES_KEYS,
            ApiKind::Embeddings => EMBEDDINGS_KEYS,
            ApiKind::Messages => MESSAGES_KEYS,
            ApiKind::VllmGenerate | ApiKind::SglangGenerate | ApiKind::Unparsed => &[],
        };
        let mut fields = BodyFields::default();
        let mut tools = LastWins::new(0);
        while let Some(key) = map.next_key_seed(KeySeed(known))? {
            let Key::Known(name) = key else {
                map.next_value::<IgnoredAny>()?;
                continue;
            };
            let result = read_field(
                self.api,
                name,
                &mut map,
                &mut fields,
                &mut tools,
                self.trail,
            );
            self.trail.note(Segment::Key(name), result)?;
        }
        tools.finish(&mut fields.tools);
        Ok(fields)
    }
}

/// Reads the value of `name` into `fields`, replacing what an earlier value of the same key
/// left there (the last value wins).
fn read_field<'de, A: MapAccess<'de>>(
    api: ApiKind,
    name: &'static str,
    map: &mut A,
    fields: &mut BodyFields,
    tools: &mut LastWins<'static>,
    trail: &mut Trail,
) -> Result<(), A::Error> {
    match name {
        "model" => fields.model = Some(map.next_value_seed(StrSeed)?.into_owned()),
        "stream" => fields.stream = map.next_value::<Option<bool>>()?,
        "max_tokens" => fields.max_tokens = map.next_value()?,
        "max_completion_tokens" => fields.max_completion_tokens = map.next_value()?,
        "max_output_tokens" => fields.max_output_tokens = map.next_value()?,
        "prompt" | "input" if api != ApiKind::Responses => {
            fields.prompt = Some(map.next_value_seed(PromptSeed(trail))?);
        }
        "messages" | "input" => {
            let kind = match api {
                ApiKind::Responses => TurnKind::ResponsesItem,
                ApiKind::Messages => TurnKind::AnthropicMessage,
                _ => TurnKind::ChatMessage,
            };
            fields.turns.clear();
            fields.chat.clear();
            let turns = TurnsSeed {
                out: &mut fields.turns,
                trail,
                kind,
                keep: (api == ApiKind::ChatCompletions).then_some(&mut fields.chat),
            };
            fields.turn_count = Some(map.next_value_seed(turns)?);
        }
        "instructions" => {
            fields.instructions.clear();
            map.next_value_seed(InstructionsSeed(&mut fields.instructions))?;
        }
        "system" => {
            fields.instructions.clear();
            map.next_value_seed(SystemSeed {
                out: &mut fields.instructions,
                trail,
            })?;
        }
        _ => {
            // "tools" and "functions": arrays of definitions, each rendered as JSON.
            let tag = if name == "tools" { "tool" } else { "function" };
            let rendered = tools.render(&mut fields.tools, Cow::Borrowed(name), |out| {
                let from = out.len();
                map.next_value_seed(ToolsSeed {
                    out: &mut *out,
                    tag,
                    trail,
                })?;
                Ok(out.len() > from)
            })?;
            if name == "tools" {
                fields.has_tools = rendered;
            }
        }
    }
    Ok(())
}

/// An array of tool (or legacy function) definitions: each becomes `<|tool|>` + JSON + `"\n"`.
struct ToolsSeed<'o> {
    out: &'o mut String,
    tag: &'static str,
    trail: &'o mut Trail,
}

impl<'de> DeserializeSeed<'de> for ToolsSeed<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ToolsSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of tool definitions")
    }

    fn visit_unit<E: Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut index = 0;
        loop {
            let mark = self.out.len();
            self.out.push_str("<|");
            self.out.push_str(self.tag);
            self.out.push_str("|>");
            let next = seq.next_element_seed(JsonInto(&mut *self.out));
            if self.trail.note(Segment::Index(index), next)?.is_none() {
                self.out.truncate(mark);
                return Ok(());
            }
            self.out.push('\n');
            index += 1;
        }
    }
}

/// Responses `instructions`: a string (or `null`), rendered as a leading `system` turn.
struct InstructionsSeed<'o>(&'o mut String);

impl<'de> DeserializeSeed<'de> for InstructionsSeed<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for InstructionsSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string or null")
    }

    fn visit_str<E: Error>(self, v: &str) -> Result<(), E> {
        if !v.is_empty() {
            push_text_turn(self.0, "system", v);
        }
        Ok(())
    }

    fn visit_unit<E: Error>(self) -> Result<(), E> {
        Ok(())
    }
}
