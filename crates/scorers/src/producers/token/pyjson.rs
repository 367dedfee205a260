//! The `tojson` filter of Hugging Face chat templates: Python's `json.dumps`, byte for byte.
//!
//! transformers replaces Jinja's `tojson` with
//! `json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)`, so a
//! template's tool calls and tool schemas come out as Python prints them: `", "` and `": "`
//! between items (`","` and `": "` with an indent), non-ASCII kept, floats in Python's `repr`
//! (`1e+20`, `1e-05`, `0.1`), `NaN` and `Infinity` allowed, keys in insertion order unless
//! `sort_keys`. minijinja's own `tojson` (compact, HTML-escaping) would change the tokens.

use std::fmt::Write as _;

use minijinja::value::{Kwargs, ValueKind};
use minijinja::{Error, ErrorKind, Value};

/// How to lay the JSON out (the keyword arguments of `json.dumps` that templates use).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct JsonStyle {
    /// Escape every non-ASCII character as `\uXXXX`.
    pub(super) ensure_ascii: bool,
    /// The indent of one level, when pretty-printing.
    pub(super) indent: Option<String>,
    /// Between items.
    pub(super) item_separator: String,
    /// Between a key and its value.
    pub(super) key_separator: String,
    /// Sort object keys.
    pub(super) sort_keys: bool,
}

impl Default for JsonStyle {
    fn default() -> Self {
        JsonStyle {
            ensure_ascii: false,
            indent: None,
            item_separator: ", ".into(),
            key_separator: ": ".into(),
            sort_keys: false,
        }
    }
}

impl JsonStyle {
    /// The style of `json.dumps(..., **kwargs)` with transformers' defaults.
    fn from_kwargs(kwargs: &Kwargs) -> Result<Self, Error> {
        let mut style = JsonStyle {
            ensure_ascii: kwargs.get::<Option<bool>>("ensure_ascii")?.unwrap_or(false),
            sort_keys: kwargs.get::<Option<bool>>("sort_keys")?.unwrap_or(false),
            ..JsonStyle::default()
        };
        let indent: Option<Value> = kwargs.get("indent")?;
        if let Some(indent) = indent.filter(|v| !v.is_none()) {
            style.indent = Some(match indent.as_str() {
                Some(text) => text.to_owned(),
                None => {
                    let width = i64::try_from(indent)?;
                    " ".repeat(usize::try_from(width).unwrap_or(0))
                }
            });
            // Python: with an indent, the default item separator loses its space.
            style.item_separator = ",".into();
        }
        let separators: Option<Value> = kwargs.get("separators")?;
        if let Some(separators) = separators.filter(|v| !v.is_none()) {
            let item = separators.get_item_by_index(0)?;
            let key = separators.get_item_by_index(1)?;
            match (item.as_str(), key.as_str()) {
                (Some(item), Some(key)) => {
                    style.item_separator = item.to_owned();
                    style.key_separator = key.to_owned();
                }
                _ => {
                    return Err(Error::new(
                        ErrorKind::InvalidOperation,
                        "tojson: `separators` must be two strings",
                    ));
                }
            }
        }
        kwargs.assert_all_used()?;
        Ok(style)
    }
}

/// The `tojson` filter: `value | tojson(indent=..., separators=..., sort_keys=..., ensure_ascii=...)`.
pub(super) fn tojson_filter(value: &Value, kwargs: Kwargs) -> Result<Value, Error> {
    let style = JsonStyle::from_kwargs(&kwargs)?;
    let mut out = String::new();
    write_value(&mut out, value, &style, 0)?;
    Ok(Value::from(out))
}

/// Appends `value` as `json.dumps` would print it.
pub(super) fn write_value(
    out: &mut String,
    value: &Value,
    style: &JsonStyle,
    depth: usize,
) -> Result<(), Error> {
    match value.kind() {
        ValueKind::None => out.push_str("null"),
        ValueKind::Bool => out.push_str(if value.is_true() { "true" } else { "false" }),
        ValueKind::Number => write_number(out, value)?,
        ValueKind::String => write_string(out, value.as_str().unwrap_or_default(), style),
        ValueKind::Seq | ValueKind::Iterable => {
            let items: Vec<Value> = value.try_iter()?.collect();
            write_container(out, style, depth, ('[', ']'), &items, |out, item, depth| {
                write_value(out, item, style, depth)
            })?;
        }
        ValueKind::Map => {
            let mut keys: Vec<Value> = value.try_iter()?.collect();
            if style.sort_keys {
                keys.sort();
            }
            write_container(out, style, depth, ('{', '}'), &keys, |out, key, depth| {
                write_key(out, key, style)?;
                out.push_str(&style.key_separator);
                write_value(out, &value.get_item(key)?, style, depth)
            })?;
        }
        kind => {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("tojson: a value of type {kind} is not JSON serializable"),
            ));
        }
    }
    Ok(())
}

fn write_container(
    out: &mut String,
    style: &JsonStyle,
    depth: usize,
    (open, close): (char, char),
    items: &[Value],
    mut write_item: impl FnMut(&mut String, &Value, usize) -> Result<(), Error>,
) -> Result<(), Error> {
    out.push(open);
    if items.is_empty() {
        out.push(close);
        return Ok(());
    }
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(&style.item_separator);
        }
        if let Some(indent) = &style.indent {
            out.push('\n');
            for _ in 0..=depth {
                out.push_str(indent);
            }
        }
        write_item(out, item, depth + 1)?;
    }
    if let Some(indent) = &style.indent {
        out.push('\n');
        for _ in 0..depth {
            out.push_str(indent);
        }
    }
    out.push(close);
    Ok(())
}

/// An object key: Python converts `str`, numbers, `bool` and `None` keys to strings.
fn write_key(out: &mut String, key: &Value, style: &JsonStyle) -> Result<(), Error> {
    match key.kind() {
        ValueKind::String => write_string(out, key.as_str().unwrap_or_default(), style),
        ValueKind::None => out.push_str("\"null\""),
        ValueKind::Bool => out.push_str(if key.is_true() {
            "\"true\""
        } else {
            "\"false\""
        }),
        ValueKind::Number => {
            let mut number = String::new();
            write_number(&mut number, key)?;
            write_string(out, &number, style);
        }
        kind => {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("tojson: keys must be str, int, float, bool or None, not {kind}"),
            ));
        }
    }
    Ok(())
}

fn write_number(out: &mut String, value: &Value) -> Result<(), Error> {
    if value.is_integer() {
        let _ = write!(out, "{value}");
        return Ok(());
    }
    let float = f64::try_from(value.clone())?;
    push_python_float(out, float);
    Ok(())
}

/// Appends `v` as Python's `repr(float)`: the shortest digits that read back as `v`, in
/// positional notation when the exponent is within [-4, 16), else as `d.ddde+XX`.
pub(super) fn push_python_float(out: &mut String, v: f64) {
    if v.is_nan() {
        out.push_str("NaN");
        return;
    }
    if v.is_infinite() {
        out.push_str(if v > 0.0 { "Infinity" } else { "-Infinity" });
        return;
    }
    if v == 0.0 {
        out.push_str(if v.is_sign_negative() { "-0.0" } else { "0.0" });
        return;
    }
    // Rust's `{:e}` gives the shortest round-trip digits: "-1.2345e-7", "1e20".
    let scientific = format!("{v:e}");
    let (mantissa, exponent) = scientific
        .split_once('e')
        .unwrap_or((scientific.as_str(), "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    out.push_str(sign);
    if (-4..16).contains(&exponent) {
        if exponent < 0 {
            out.push_str("0.");
            for _ in 0..(-exponent - 1) {
                out.push('0');
            }
            out.push_str(&digits);
        } else {
            let point = usize::try_from(exponent).unwrap_or(0) + 1;
            if digits.len() <= point {
                out.push_str(&digits);
                for _ in digits.len()..point {
                    out.push('0');
                }
                out.push_str(".0");
            } else {
                out.push_str(&digits[..point]);
                out.push('.');
                out.push_str(&digits[point..]);
            }
        }
    } else {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let _ = write!(
            out,
            "e{}{:02}",
            if exponent < 0 { '-' } else { '+' },
            exponent.unsigned_abs()
        );
    }
}

/// Appends `text` as a JSON string the way Python escapes it.
fn write_string(out: &mut String, text: &str, style: &JsonStyle) {
    out.reserve(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c if style.ensure_ascii && !c.is_ascii() => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn float(v: f64) -> String {
        let mut out = String::new();
        push_python_float(&mut out, v);
        out
    }

    #[test]
    fn floats_print_as_python_repr() {
        let cases = [
            (0.1, "0.1"),
            (1.0, "1.0"),
            (-2.5, "-2.5"),
            (1e20, "1e+20"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (123456789.125, "123456789.125"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1.5e-7, "1.5e-07"),
            (-0.0, "-0.0"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (5e-324, "5e-324"),
            (f64::INFINITY, "Infinity"),
        ];
        for (v, want) in cases {
            assert_eq!(float(v), want, "{v}");
        }
    }

    #[test]
    fn values_print_as_json_dumps() {
        let value: Value = serde_json::from_str(
            r#"{"b": [1, 2.5, "x\ny", true, null], "a": {}, "é": "ü\u0001", "n": []}"#,
        )
        .unwrap();
        let mut out = String::new();
        write_value(&mut out, &value, &JsonStyle::default(), 0).unwrap();
        assert_eq!(
            out,
            r#"{"b": [1, 2.5, "x\ny", true, null], "a": {}, "é": "ü\u0001", "n": []}"#
        );
        let style = JsonStyle {
            indent: Some("  ".into()),
            item_separator: ",".into(),
            sort_keys: true,
            ensure_ascii: true,
            ..JsonStyle::default()
        };
        let mut out = String::new();
        write_value(&mut out, &value, &style, 0).unwrap();
        assert_eq!(
            out,
            "{\n  \"a\": {},\n  \"b\": [\n    1,\n    2.5,\n    \"x\\ny\",\n    true,\n    null\n  ],\n  \"n\": [],\n  \"\\u00e9\": \"\\u00fc\\u0001\"\n}"
        );
    }
}
