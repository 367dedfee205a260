//! How a chat template wants message content: one string, or a list of typed parts.
//!
//! vLLM (`--chat-template-content-format`, default `auto`) gives a template either
//! `content: "text"` ("string": text parts joined with `"\n"`) or
//! `content: [{"type": "text", "text": "..."}]` ("openai"). `auto` picks "openai" when the
//! template loops over a message's content (`{% for part in message['content'] %}`, for
//! `message` a loop variable over `messages` or over a variable set from it), else "string".
//! vLLM walks the Jinja syntax tree; Shepherd reads the same shapes from the template's
//! statement tags.

use serde::Deserialize;

/// The `chatTemplateContentFormat` parameter (vLLM's `--chat-template-content-format`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ContentFormatOption {
    /// Detect from the template (vLLM's default).
    #[default]
    Auto,
    /// Content is one string.
    String,
    /// Content is a list of `{"type": "text", "text": ...}` parts.
    Openai,
}

/// The content format in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ContentFormat {
    /// One string.
    String,
    /// A list of typed parts.
    Openai,
}

impl ContentFormatOption {
    /// The format for `template`.
    pub(super) fn resolve(self, template: &str) -> ContentFormat {
        match self {
            ContentFormatOption::String => ContentFormat::String,
            ContentFormatOption::Openai => ContentFormat::Openai,
            ContentFormatOption::Auto if loops_over_content(template) => ContentFormat::Openai,
            ContentFormatOption::Auto => ContentFormat::String,
        }
    }
}

/// The statement tags of a template (`{% ... %}`), trimmed of their whitespace markers.
fn statements(template: &str) -> Vec<&str> {
    let mut found = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find("{%") {
        let after = &rest[open + 2..];
        let Some(close) = after.find("%}") else {
            break;
        };
        let inner = after[..close].trim_start_matches(['-', '+']);
        let inner = inner.trim_end_matches(['-', '+']).trim();
        found.push(inner);
        rest = &after[close + 2..];
    }
    found
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The identifier `expr` starts with, and what follows it.
fn leading_ident(expr: &str) -> Option<(&str, &str)> {
    let expr = expr.trim_start();
    let end = expr.find(|c: char| !is_ident_char(c)).unwrap_or(expr.len());
    (end > 0).then(|| (&expr[..end], &expr[end..]))
}

/// `for TARGET in EXPR ...`: the single-name target and the iterated expression.
fn for_loop(statement: &str) -> Option<(&str, &str)> {
    let rest = statement.strip_prefix("for")?;
    if !rest.starts_with(char::is_whitespace) {
        return None;
    }
    let (target, rest) = leading_ident(rest)?;
    let rest = rest.trim_start().strip_prefix("in")?;
    rest.starts_with(char::is_whitespace)
        .then_some((target, rest.trim_start()))
}

/// `set NAME = EXPR`: the name and the expression.
fn assignment(statement: &str) -> Option<(&str, &str)> {
    let rest = statement.strip_prefix("set")?;
    if !rest.starts_with(char::is_whitespace) {
        return None;
    }
    let (name, rest) = leading_ident(rest)?;
    let rest = rest.trim_start().strip_prefix('=')?;
    Some((name, rest.trim_start()))
}

/// Whether `expr` reads variable `name` (or an element, a slice, a filter or test of it).
fn reads(expr: &str, names: &[&str]) -> bool {
    leading_ident(expr).is_some_and(|(ident, _)| names.contains(&ident))
}

/// Whether `expr` reads the `content` of one of `names`.
fn reads_content(expr: &str, names: &[&str]) -> bool {
    let Some((ident, rest)) = leading_ident(expr) else {
        return false;
    };
    if !names.contains(&ident) {
        return false;
    }
    let rest = rest.trim_start();
    rest.strip_prefix(".content")
        .is_some_and(|after| !after.starts_with(is_ident_char))
        || rest.starts_with("['content']")
        || rest.starts_with("[\"content\"]")
}

/// Whether the template loops over a message's content (vLLM's "openai" detection).
pub(super) fn loops_over_content(template: &str) -> bool {
    let statements = statements(template);
    let mut message_lists = vec!["messages"];
    loop {
        let before = message_lists.len();
        for (name, expr) in statements.iter().filter_map(|s| assignment(s)) {
            if reads(expr, &message_lists) && !message_lists.contains(&name) {
                message_lists.push(name);
            }
        }
        if message_lists.len() == before {
            break;
        }
    }
    let messages: Vec<&str> = statements
        .iter()
        .filter_map(|s| for_loop(s))
        .filter(|(_, expr)| reads(expr, &message_lists))
        .map(|(target, _)| target)
        .collect();
    statements
        .iter()
        .filter_map(|s| for_loop(s))
        .any(|(_, expr)| reads_content(expr, &messages))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_loops_over_message_content() {
        let string = "{% for message in messages %}{{ message['content'] | trim }}{% endfor %}";
        assert!(!loops_over_content(string));
        let openai = "{%- for message in messages -%}{%- for part in message['content'] -%}\
                      {{ part.text }}{%- endfor -%}{%- endfor -%}";
        assert!(loops_over_content(openai));
        let through_set = "{% set loop_messages = messages[1:] %}{% for m in loop_messages %}\
                           {% for c in m.content | selectattr('type', 'eq', 'text') %}{% endfor %}{% endfor %}";
        assert!(loops_over_content(through_set));
        let other_list = "{% for m in messages %}{% for c in m.contents %}{% endfor %}{% endfor %}";
        assert!(!loops_over_content(other_list));
        let unrelated =
            "{% for tool in tools %}{% for c in tool.content %}{% endfor %}{% endfor %}";
        assert!(!loops_over_content(unrelated));
        assert_eq!(
            ContentFormatOption::Auto.resolve(openai),
            ContentFormat::Openai
        );
        assert_eq!(
            ContentFormatOption::String.resolve(openai),
            ContentFormat::String
        );
    }
}
