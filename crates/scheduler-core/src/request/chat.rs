//! The messages of a chat completions request, kept beside the prompt text for the plugins that
//! must render them as the model server does (a chat template, then a real tokenizer).
//!
//! [`Prompt::Text`](super::Prompt::Text) holds Shepherd's own serialization of a conversation
//! (`<|ROLE|>content\n`...), good for hashing byte prefixes but not what a model sees. A
//! tokenizer that must reproduce the server's token ids needs the messages themselves: the
//! parser keeps them, for `/v1/chat/completions` bodies only, in [`InferenceRequest::chat`]
//! (`None` for every other API and for requests built by hand).
//!
//! ```
//! use shepherd_scheduler_core::request::{parse_openai_request, ParseLimits};
//!
//! let body = br#"{"model":"m","messages":[
//!     {"role":"system","content":"Be brief."},
//!     {"role":"user","content":[{"type":"text","text":"Hi"},{"type":"text","text":"there"}]},
//!     {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function",
//!      "function":{"name":"f","arguments":"{}"}}]}]}"#;
//! let req = parse_openai_request("/v1/chat/completions", body, &ParseLimits::default()).unwrap();
//! let chat = req.chat.as_deref().unwrap();
//! assert_eq!(chat.messages.len(), 3);
//! assert_eq!(chat.messages[0].content, "Be brief.");
//! assert_eq!(chat.messages[0].parts, None);
//! // An array's text parts are joined with "\n", as vLLM does for string-content templates.
//! assert_eq!(chat.messages[1].content, "Hi\nthere");
//! assert_eq!(chat.messages[1].part_texts().collect::<Vec<_>>(), ["Hi", "there"]);
//! assert_eq!(
//!     chat.messages[2].field("tool_calls"),
//!     Some(r#"[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]"#)
//! );
//! assert!(!chat.has_tools);
//! ```
//!
//! [`InferenceRequest::chat`]: super::InferenceRequest::chat

use std::ops::Range;

/// A chat completions request's messages and what else its chat template would read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChatMessages {
    /// The messages, in order.
    pub messages: Vec<ChatMessage>,
    /// Whether the body had a non-empty `tools` array (which chat templates render).
    pub has_tools: bool,
}

/// One chat message: its role, its text content and its other fields.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChatMessage {
    /// The `role`.
    pub role: String,
    /// The text content: a string as given; an array's parts joined with `"\n"` (vLLM's
    /// "string" content format); empty for `null` or absent content. Media parts appear here
    /// as Shepherd's placeholders (see [`ChatMessage::has_media`]).
    pub content: String,
    /// When the content was an array (or `null`, or absent: no parts), where each part's text
    /// lies in [`ChatMessage::content`]; `None` when it was a string.
    pub parts: Option<Vec<Range<usize>>>,
    /// Whether some content part was not text (`text`, `refusal`, `input_text`,
    /// `output_text`): an image, audio, video, file or unknown part, which the server renders
    /// in a way only it knows (model-specific placeholders, image tokens).
    pub has_media: bool,
    /// The message's other fields (`name`, `tool_calls`, `tool_call_id`, `reasoning`, …) as
    /// compact JSON, in the body's order; `null` fields are left out, a repeated key keeps its
    /// last value.
    pub fields: Vec<(String, String)>,
}

impl ChatMessage {
    /// The compact JSON of field `name`, when the message has it.
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, json)| json.as_str())
    }

    /// The text of each content part (one item, the whole content, when it was a string).
    pub fn part_texts(&self) -> impl Iterator<Item = &str> + '_ {
        let whole = match self.parts {
            None => Some(self.content.as_str()),
            Some(_) => None,
        };
        let parts = self.parts.as_deref().unwrap_or_default().iter();
        whole
            .into_iter()
            .chain(parts.map(|range| self.content.get(range.clone()).unwrap_or_default()))
    }

    /// Sets field `name` to `json`: in place when it is already there (the last value wins),
    /// else at the end.
    pub(super) fn set_field(&mut self, name: &str, json: String) {
        match self.fields.iter_mut().find(|(key, _)| key == name) {
            Some(field) => field.1 = json,
            None => self.fields.push((name.to_owned(), json)),
        }
    }
}

/// How a message's content came out of the parser: its part ranges (relative to where the
/// content starts in the buffer) and whether a part was not text.
#[derive(Debug, Default)]
pub(super) struct ContentShape {
    /// Whether the content was an array (or `null`).
    pub(super) array: bool,
    /// Each part's range in the buffer the content was rendered into.
    pub(super) parts: Vec<Range<usize>>,
    /// Whether a part was not text.
    pub(super) media: bool,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use crate::request::{ApiKind, ParseLimits, parse_openai_request};

    fn chat(body: &str) -> super::ChatMessages {
        let req = parse_openai_request(
            "/v1/chat/completions",
            body.as_bytes(),
            &ParseLimits::default(),
        )
        .unwrap();
        assert_eq!(req.api, ApiKind::ChatCompletions);
        req.chat.as_deref().cloned().unwrap()
    }

    #[test]
    fn keeps_roles_contents_and_fields_in_order() {
        let c = chat(
            r#"{"model":"m","tools":[{"type":"function","function":{"name":"f"}}],"messages":[
            {"content":"late role","role":"user","name":"bob"},
            {"role":"assistant","content":"a","reasoning":null,"tool_call_id":"x"},
            {"role":"tool","content":[{"type":"text","text":"r1"},{"type":"image_url","image_url":{"url":"u"}}]}
        ]}"#,
        );
        assert!(c.has_tools);
        assert_eq!(c.messages[0].role, "user");
        assert_eq!(c.messages[0].content, "late role");
        assert_eq!(c.messages[0].field("name"), Some("\"bob\""));
        assert_eq!(
            c.messages[1].fields,
            [("tool_call_id".into(), "\"x\"".into())]
        );
        assert!(!c.messages[1].has_media);
        assert!(c.messages[2].has_media);
        assert_eq!(c.messages[2].part_texts().next(), Some("r1"));
    }

    #[test]
    fn repeated_keys_keep_their_last_value() {
        let c = chat(
            r#"{"model":"m","messages":[{"role":"user","content":"A","name":"x","content":[{"type":"text","text":"B"}],"name":"y","role":"system"}]}"#,
        );
        let m = &c.messages[0];
        assert_eq!(m.role, "system");
        assert_eq!(m.content, "B");
        assert_eq!(m.parts, Some(vec![std::ops::Range { start: 0, end: 1 }]));
        assert_eq!(m.fields, [("name".into(), "\"y\"".into())]);
    }

    #[test]
    fn null_content_is_an_empty_array_and_empty_tools_are_none() {
        let c = chat(
            r#"{"model":"m","tools":[],"messages":[{"role":"assistant","content":null},{"role":"user"}]}"#,
        );
        assert!(!c.has_tools);
        for m in &c.messages {
            assert_eq!(m.content, "");
            assert_eq!(m.parts.as_deref(), Some(&[][..]));
        }
    }

    #[test]
    fn other_apis_keep_no_messages() {
        let limits = ParseLimits::default();
        let req = parse_openai_request("/v1/responses", br#"{"model":"m","input":"hi"}"#, &limits)
            .unwrap();
        assert!(req.chat.is_none());
        let req = parse_openai_request(
            "/v1/completions",
            br#"{"model":"m","prompt":"hi"}"#,
            &limits,
        )
        .unwrap();
        assert!(req.chat.is_none());
    }
}
