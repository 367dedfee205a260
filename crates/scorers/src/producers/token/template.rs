//! A model's chat template, rendered the way vLLM renders it for `/v1/chat/completions`.
//!
//! The environment is transformers' (`ImmutableSandboxedEnvironment(trim_blocks=True,
//! lstrip_blocks=True)` with loop controls, `raise_exception`, `strftime_now` and its own
//! `tojson`), in minijinja, with Python's string and dict methods (`.strip()`, `.items()`,
//! `.startswith()`...) from `minijinja-contrib`. The template sees what vLLM passes:
//! `messages`, `add_generation_prompt=True`, `tools=None`, `documents=None` and the special
//! tokens (`bos_token`, `eos_token`, ...). Each message is what vLLM's `parse_chat_messages`
//! makes of it: `role`, `content` (a string, or typed parts for "openai"-format templates),
//! `name` when a string, and per role `tool_calls` (their JSON `arguments` parsed, an empty
//! list dropped), `reasoning` (also as `reasoning_content`), `tool_call_id`, `tools`.

use std::path::PathBuf;

use minijinja::syntax::SyntaxConfig;
use minijinja::{AutoEscape, Environment, Error, ErrorKind, Value};
use shepherd_scheduler_core::request::{ChatMessage, ChatMessages};

use super::content_format::{ContentFormat, ContentFormatOption};
use super::error::{TokenizeError, TokenizerLoadError};
use super::pyjson::tojson_filter;
use super::strftime::strftime_now;

const NAME: &str = "chat_template";

/// A compiled chat template and what it is rendered with.
pub(super) struct ChatTemplate {
    env: Environment<'static>,
    format: ContentFormat,
    /// The special tokens passed to the template (`bos_token`, ...).
    special_tokens: Vec<(String, Value)>,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate")
            .field("format", &self.format)
            .field("special_tokens", &self.special_tokens)
            .finish_non_exhaustive()
    }
}

fn raise_exception(message: String) -> Result<Value, Error> {
    Err(Error::new(ErrorKind::InvalidOperation, message))
}

impl ChatTemplate {
    /// Compiles `source` (read from `origin`) and checks that it renders a one-message
    /// conversation.
    pub(super) fn new(
        source: String,
        origin: PathBuf,
        special_tokens: Vec<(String, Value)>,
        format: ContentFormatOption,
    ) -> Result<Self, TokenizerLoadError> {
        let template_error = |source| TokenizerLoadError::Template {
            path: origin.clone(),
            source,
        };
        let format = format.resolve(&source);
        let mut env = Environment::new();
        let syntax = SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()
            .map_err(template_error)?;
        env.set_syntax(syntax);
        env.set_auto_escape_callback(|_| AutoEscape::None);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_filter("tojson", tojson_filter);
        env.add_function("raise_exception", raise_exception);
        env.add_function("strftime_now", strftime_now);
        env.add_template_owned(NAME, source)
            .map_err(template_error)?;
        let template = ChatTemplate {
            env,
            format,
            special_tokens,
        };
        let probe = ChatMessages {
            messages: vec![ChatMessage {
                role: "user".into(),
                content: "Hello".into(),
                ..ChatMessage::default()
            }],
            has_tools: false,
        };
        template
            .render_value(template.messages(&probe))
            .map_err(template_error)?;
        Ok(template)
    }

    /// Whether the template gets content as typed parts.
    #[cfg(test)]
    pub(super) fn openai_format(&self) -> bool {
        self.format == ContentFormat::Openai
    }

    /// The prompt text of `chat`.
    pub(super) fn render(&self, chat: &ChatMessages) -> Result<String, TokenizeError> {
        self.render_value(self.messages(chat))
            .map_err(|e| TokenizeError::Render(e.to_string()))
    }

    fn render_value(&self, messages: Value) -> Result<String, Error> {
        let mut context: Vec<(&str, Value)> = vec![
            ("messages", messages),
            ("add_generation_prompt", Value::from(true)),
            ("tools", Value::from(())),
            ("documents", Value::from(())),
        ];
        for (name, value) in &self.special_tokens {
            context.push((name.as_str(), value.clone()));
        }
        self.env
            .get_template(NAME)?
            .render(Value::from_pairs(context))
    }

    fn messages(&self, chat: &ChatMessages) -> Value {
        chat.messages
            .iter()
            .map(|message| self.message(message))
            .collect()
    }

    /// One message as vLLM hands it to the template.
    fn message(&self, message: &ChatMessage) -> Value {
        let role = message.role.as_str();
        let content = match self.format {
            ContentFormat::Openai if role != "tool" => message
                .part_texts()
                .map(|text| Value::from_pairs([("type", "text"), ("text", text)]))
                .collect(),
            _ => Value::from(message.content.as_str()),
        };
        let mut pairs: Vec<(&str, Value)> = vec![("role", Value::from(role)), ("content", content)];
        let field = |name: &str| {
            message
                .field(name)
                .and_then(|json| serde_json::from_str::<Value>(json).ok())
        };
        match role {
            "assistant" => {
                if let Some(calls) = field("tool_calls").and_then(tool_calls) {
                    pairs.push(("tool_calls", calls));
                }
                if let Some(reasoning) = field("reasoning") {
                    pairs.push(("reasoning", reasoning.clone()));
                    pairs.push(("reasoning_content", reasoning));
                }
            }
            "tool" => {
                if let Some(id) = field("tool_call_id") {
                    pairs.push(("tool_call_id", id));
                }
            }
            _ => {}
        }
        for name in ["name", "task"] {
            if let Some(text) = field(name).filter(|v| v.as_str().is_some()) {
                pairs.push((name, text));
            }
        }
        if role == "developer" {
            pairs.push(("tools", field("tools").unwrap_or_default()));
        }
        Value::from_pairs(pairs)
    }
}

/// An assistant's `tool_calls` as vLLM post-processes them: each call's `function.arguments`
/// parsed from its JSON string (`{}` when it is not JSON, or not a string, object or array);
/// an empty list is dropped.
fn tool_calls(calls: Value) -> Option<Value> {
    let Ok(items) = calls.try_iter() else {
        return Some(calls);
    };
    let items: Vec<Value> = items.collect();
    if items.is_empty() {
        return None;
    }
    Some(items.into_iter().map(parse_arguments).collect())
}

fn empty_map() -> Value {
    Value::from_pairs(Vec::<(Value, Value)>::new())
}

/// `map` with `key` set to `value` (in place when present, else at the end).
fn with_item(map: &Value, key: &str, value: Value) -> Value {
    let mut pairs: Vec<(Value, Value)> = Vec::new();
    let mut value = Some(value);
    if let Ok(keys) = map.try_iter() {
        for k in keys {
            let v = match k.as_str() == Some(key) {
                true => value.take().unwrap_or_default(),
                false => map.get_item(&k).unwrap_or_default(),
            };
            pairs.push((k, v));
        }
    }
    if let Some(value) = value {
        pairs.push((Value::from(key), value));
    }
    Value::from_pairs(pairs)
}

fn parse_arguments(call: Value) -> Value {
    let Ok(function) = call.get_attr("function") else {
        return call;
    };
    if function.is_undefined() || function.kind() != minijinja::value::ValueKind::Map {
        return call;
    }
    let arguments = function.get_attr("arguments").unwrap_or_default();
    let parsed = match arguments.kind() {
        minijinja::value::ValueKind::String => {
            serde_json::from_str::<Value>(arguments.as_str().unwrap_or_default())
                .unwrap_or_else(|_| empty_map())
        }
        minijinja::value::ValueKind::Map | minijinja::value::ValueKind::Seq => arguments,
        _ => empty_map(),
    };
    with_item(&call, "function", with_item(&function, "arguments", parsed))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn template(source: &str) -> Result<ChatTemplate, TokenizerLoadError> {
        ChatTemplate::new(
            source.into(),
            PathBuf::from("test"),
            vec![("bos_token".into(), Value::from("<s>"))],
            ContentFormatOption::Auto,
        )
    }

    fn message(role: &str, content: &str) -> ChatMessage {
        ChatMessage {
            role: role.into(),
            content: content.into(),
            ..ChatMessage::default()
        }
    }

    #[test]
    fn renders_with_python_methods_and_whitespace_control() {
        let t = template(
            "{{ bos_token }}\n{% for m in messages %}\n[{{ m.role.upper() }}] {{ m['content'].strip() }}\n{% endfor %}\n{% if add_generation_prompt %}>{% endif %}\n",
        )
        .unwrap();
        let chat = ChatMessages {
            messages: vec![message("user", "  hi  "), message("assistant", "yo")],
            has_tools: false,
        };
        assert_eq!(
            t.render(&chat).unwrap(),
            "<s>\n[USER] hi\n[ASSISTANT] yo\n>"
        );
    }

    #[test]
    fn tool_calls_get_parsed_arguments_and_python_json() {
        let t = template(
            "{% for m in messages %}{% for c in m.tool_calls or [] %}{{ c.function.arguments | tojson }}|{{ c | tojson }}{% endfor %}{% endfor %}",
        )
        .unwrap();
        let mut m = message("assistant", "");
        m.fields = vec![(
            "tool_calls".into(),
            r#"[{"id":"1","function":{"name":"f","arguments":"{\"b\":1.0,\"a\":[true,null]}"}}]"#
                .into(),
        )];
        let chat = ChatMessages {
            messages: vec![m],
            has_tools: false,
        };
        assert_eq!(
            t.render(&chat).unwrap(),
            r#"{"b": 1.0, "a": [true, null]}|{"id": "1", "function": {"name": "f", "arguments": {"b": 1.0, "a": [true, null]}}}"#
        );
    }

    #[test]
    fn openai_format_gets_typed_parts() {
        let t = template(
            "{% for m in messages %}{% for p in m['content'] %}<{{ p.type }}:{{ p.text }}>{% endfor %}{% endfor %}",
        )
        .unwrap();
        assert!(t.openai_format());
        let mut m = message("user", "a\nb");
        m.parts = Some(vec![0..1, 2..3]);
        let chat = ChatMessages {
            messages: vec![m, message("user", "c")],
            has_tools: false,
        };
        assert_eq!(t.render(&chat).unwrap(), "<text:a><text:b><text:c>");
    }

    #[test]
    fn bad_templates_fail_at_load_and_raise_exception_at_render() {
        assert!(matches!(
            template("{% for m in messages %}"),
            Err(TokenizerLoadError::Template { .. })
        ));
        assert!(matches!(
            template("{{ raise_exception('never') }}"),
            Err(TokenizerLoadError::Template { .. })
        ));
        let t = template(
            "{% if messages[0].role != 'user' %}{{ raise_exception('must start with user') }}{% endif %}ok",
        )
        .unwrap();
        let chat = ChatMessages {
            messages: vec![message("system", "x")],
            has_tools: false,
        };
        let err = t.render(&chat).unwrap_err();
        assert!(
            matches!(&err, TokenizeError::Render(m) if m.contains("must start with user")),
            "{err}"
        );
    }
}
