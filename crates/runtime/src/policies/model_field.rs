//! The request body's top-level `"model"` value, found and replaced in place: a model
//! rewrite changes that one string and forwards every other byte as the client sent it (no
//! re-serialization, so key order, number formats and unknown fields survive).
//!
//! The body has been parsed already (the adapters rewrite only what their parser accepted),
//! so this is a scan over valid JSON, not a validator; anything unexpected returns `None` and
//! the caller leaves the request as it was.

/// The byte range of the top-level `"model"` value (its quotes included) in `body`, when the
/// body is a JSON object with a string `model`.
pub(crate) fn model_value_span(body: &[u8]) -> Option<(usize, usize)> {
    let mut at = skip_ws(body, 0);
    if body.get(at) != Some(&b'{') {
        return None;
    }
    at = skip_ws(body, at + 1);
    let mut found = None;
    loop {
        match body.get(at)? {
            b'}' => return found,
            b'"' => {}
            _ => return None,
        }
        let key_end = string_end(body, at)?;
        let key = &body[at..key_end];
        at = skip_ws(body, key_end);
        if body.get(at) != Some(&b':') {
            return None;
        }
        at = skip_ws(body, at + 1);
        let value_end = value_end(body, at)?;
        if is_model_key(key) {
            // The last duplicate wins, as serde_json's map does.
            found = (body.get(at) == Some(&b'"')).then_some((at, value_end));
        }
        at = skip_ws(body, value_end);
        match body.get(at)? {
            b',' => at = skip_ws(body, at + 1),
            b'}' => return found,
            _ => return None,
        }
    }
}

/// `body` with its top-level `"model"` replaced by `model` (JSON-escaped), when it has one.
///
/// ```
/// use shepherd_runtime::policies::replace_model;
///
/// let body = br#"{"model" : "food-review", "prompt":"hi","max_tokens":8}"#;
/// let out = replace_model(body, "food-review-v2").unwrap();
/// assert_eq!(out, br#"{"model" : "food-review-v2", "prompt":"hi","max_tokens":8}"#);
/// assert!(replace_model(b"[1,2]", "m").is_none());
/// ```
pub fn replace_model(body: &[u8], model: &str) -> Option<Vec<u8>> {
    let (start, end) = model_value_span(body)?;
    let quoted = serde_json::to_string(model).ok()?;
    let mut out = Vec::with_capacity(body.len() - (end - start) + quoted.len());
    out.extend_from_slice(&body[..start]);
    out.extend_from_slice(quoted.as_bytes());
    out.extend_from_slice(&body[end..]);
    Some(out)
}

fn is_model_key(key: &[u8]) -> bool {
    if key == b"\"model\"" {
        return true;
    }
    // An escaped spelling (`"mod\u0065l"`) is the same key to a JSON parser.
    key.contains(&b'\\')
        && std::str::from_utf8(key)
            .ok()
            .and_then(|k| serde_json::from_str::<String>(k).ok())
            .is_some_and(|k| k == "model")
}

fn skip_ws(body: &[u8], mut at: usize) -> usize {
    while matches!(body.get(at), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        at += 1;
    }
    at
}

/// The index just past the string starting at `at` (a `"`).
fn string_end(body: &[u8], at: usize) -> Option<usize> {
    let mut i = at + 1;
    loop {
        match body.get(i)? {
            b'"' => return Some(i + 1),
            b'\\' => i += 2,
            _ => i += 1,
        }
    }
}

/// The index just past the JSON value starting at `at`.
fn value_end(body: &[u8], at: usize) -> Option<usize> {
    match body.get(at)? {
        b'"' => string_end(body, at),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = at;
            loop {
                match body.get(i)? {
                    b'"' => {
                        i = string_end(body, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
        }
        _ => {
            let mut i = at;
            while let Some(c) = body.get(i) {
                if matches!(c, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r') {
                    break;
                }
                i += 1;
            }
            (i > at).then_some(i)
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use proptest::prelude::*;
    use serde_json::{Value, json};

    #[test]
    fn finds_the_top_level_model_only() {
        let body = br#"{"messages":[{"role":"user","content":"{\"model\":\"x\"}"}],"meta":{"model":"inner"},"model":"outer"}"#;
        let out = replace_model(body, "new").unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["model"], "new");
        assert_eq!(v["meta"]["model"], "inner");
        assert_eq!(v["messages"][0]["content"], r#"{"model":"x"}"#);
    }

    #[test]
    fn escaped_keys_and_values_are_handled() {
        let body = br#"{"mod\u0065l":"a\"b","prompt":"p"}"#;
        let out = replace_model(body, "q\"uote").unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["model"], "q\"uote");
        assert_eq!(v["prompt"], "p");
    }

    #[test]
    fn no_string_model_no_rewrite() {
        assert!(replace_model(br#"{"prompt":"p"}"#, "m").is_none());
        assert!(replace_model(br#"{"model":7}"#, "m").is_none());
        assert!(replace_model(b"", "m").is_none());
        assert!(replace_model(br#"{"model":"m""#, "m").is_none());
        assert!(replace_model(b"{\"model\":\"m\",", "m").is_none());
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            ".{0,12}".prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map("[a-z\"\\\\{}]{0,6}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// Any object with a string model: the rewritten body parses to the same object with
        /// only the model changed, compact or pretty-printed.
        #[test]
        fn rewrite_changes_the_model_and_nothing_else(
            mut fields in prop::collection::btree_map("[a-z\"\\\\]{1,6}", json_value(), 0..6),
            model in ".{0,16}",
            target in ".{0,16}",
            pretty in any::<bool>(),
        ) {
            fields.insert("model".to_string(), Value::String(model));
            let object = Value::Object(fields.into_iter().collect());
            let body = if pretty {
                serde_json::to_vec_pretty(&object).unwrap()
            } else {
                serde_json::to_vec(&object).unwrap()
            };
            let out = replace_model(&body, &target).unwrap();
            let mut expected = object;
            expected["model"] = Value::String(target);
            prop_assert_eq!(serde_json::from_slice::<Value>(&out).unwrap(), expected);
        }

        /// Arbitrary bytes never panic.
        #[test]
        fn any_bytes_are_safe(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
            let _ = replace_model(&bytes, "m");
        }
    }
}
