//! Re-emits arbitrary JSON values (tools, tool calls, unknown item fields) as compact JSON text
//! in the prompt, streaming: no `Value` tree is built, so the prompt grows at most about as
//! much as the body. Also the stable placeholders for media (images, audio, files).

use std::fmt::{self, Write as _};

use serde::de::{DeserializeSeed, Deserializer, Error, MapAccess, SeqAccess, Visitor};

/// Writes the JSON value being deserialized to `out` as compact JSON, in the body's order.
///
/// Nesting is bounded by the JSON parser's recursion limit, so this recursion is too.
pub(super) struct JsonInto<'o>(pub(super) &'o mut String);

impl<'de> DeserializeSeed<'de> for JsonInto<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for JsonInto<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: Error>(self, v: bool) -> Result<(), E> {
        self.0.push_str(if v { "true" } else { "false" });
        Ok(())
    }

    fn visit_i64<E: Error>(self, v: i64) -> Result<(), E> {
        let _ = write!(self.0, "{v}");
        Ok(())
    }

    fn visit_u64<E: Error>(self, v: u64) -> Result<(), E> {
        let _ = write!(self.0, "{v}");
        Ok(())
    }

    fn visit_f64<E: Error>(self, v: f64) -> Result<(), E> {
        // Debug keeps the fraction (`-500.0`), so a float stays a float when read back.
        let _ = write!(self.0, "{v:?}");
        Ok(())
    }

    fn visit_str<E: Error>(self, v: &str) -> Result<(), E> {
        push_json_string(self.0, v);
        Ok(())
    }

    fn visit_unit<E: Error>(self) -> Result<(), E> {
        self.0.push_str("null");
        Ok(())
    }

    fn visit_none<E: Error>(self) -> Result<(), E> {
        self.visit_unit()
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.0.push('[');
        let mut first = true;
        loop {
            let mark = self.0.len();
            if !first {
                self.0.push(',');
            }
            if seq.next_element_seed(JsonInto(&mut *self.0))?.is_none() {
                self.0.truncate(mark);
                break;
            }
            first = false;
        }
        self.0.push(']');
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.0.push('{');
        let mut first = true;
        loop {
            let mark = self.0.len();
            if !first {
                self.0.push(',');
            }
            if map.next_key_seed(JsonInto(&mut *self.0))?.is_none() {
                self.0.truncate(mark);
                break;
            }
            self.0.push(':');
            map.next_value_seed(JsonInto(&mut *self.0))?;
            first = false;
        }
        self.0.push('}');
        Ok(())
    }
}

/// Appends `s` as a JSON string literal.
pub(super) fn push_json_string(out: &mut String, s: &str) {
    out.reserve(s.len() + 2);
    out.push('"');
    let mut plain_from = 0;
    for (at, byte) in s.bytes().enumerate() {
        let escape = match byte {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0..=0x1f => "",
            _ => continue,
        };
        out.push_str(&s[plain_from..at]);
        if escape.is_empty() {
            let _ = write!(out, "\\u{byte:04x}");
        } else {
            out.push_str(escape);
        }
        plain_from = at + 1;
    }
    out.push_str(&s[plain_from..]);
    out.push('"');
}

/// A stable, short stand-in for a media reference: URLs and ids as they are, inline data
/// (`data:` URLs, base64 payloads) as `xxh3:` and the 64-bit xxh3 hash of its text in hex.
pub(super) fn push_media_ref(out: &mut String, reference: &str, inline_data: bool) {
    if inline_data || reference.starts_with("data:") {
        let hash = xxhash_rust::xxh3::xxh3_64(reference.as_bytes());
        let _ = write!(out, "xxh3:{hash:016x}");
    } else {
        out.push_str(reference);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transcode(json: &str) -> String {
        let mut out = String::new();
        let mut de = serde_json::Deserializer::from_str(json);
        JsonInto(&mut out).deserialize(&mut de).unwrap();
        out
    }

    #[test]
    fn transcodes_compactly_in_body_order() {
        assert_eq!(
            transcode(
                r#" { "b" : [1, -2, 2.5, true, null], "a": {"x": "q\"\n\u0001"} , "e": [] } "#
            ),
            r#"{"b":[1,-2,2.5,true,null],"a":{"x":"q\"\n\u0001"},"e":[]}"#
        );
    }

    #[test]
    fn output_is_json_that_reads_back_the_same() {
        let json = r#"{"k":["é\\/",{"":{}}],"n":-0.5e3}"#;
        let out = transcode(json);
        let a: serde_json::Value = serde_json::from_str(json).unwrap();
        let b: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn inline_media_is_hashed_and_urls_kept() {
        let mut out = String::new();
        push_media_ref(&mut out, "https://x/y.png", false);
        assert_eq!(out, "https://x/y.png");
        out.clear();
        push_media_ref(&mut out, "data:image/png;base64,AAAA", false);
        assert!(out.starts_with("xxh3:") && out.len() == 21, "{out}");
    }
}
