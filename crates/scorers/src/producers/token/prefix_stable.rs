//! Whether a tokenizer's configuration lets a text be tokenized a piece at a time.
//!
//! [`stream`](super::stream) tokenizes a growing prefix of a text and keeps the tokens of all
//! but its last few pre-tokens (words), continuing from the first word it did not keep. That
//! gives the ids of the whole text when every stage of the pipeline works word by word and
//! a word's fate is decided by the text near it:
//!
//! - the normalizer is absent, or is Unicode NFC / NFKC (then cuts are made only before an
//!   ASCII character: an ASCII character never composes with what precedes it);
//! - the pre-tokenizer is a sequence of regex splits (without look-behind or anchors, so a
//!   split after a cut is the split found when scanning from the start), byte-level mapping
//!   without a prefix space, digit, punctuation and whitespace splits;
//! - the model is a BPE without dropout (or WordPiece, WordLevel): each word is tokenized
//!   alone;
//! - no added token is matched after normalization (those that are cut before it are the
//!   splitter's, between pieces).
//!
//! Anything else (SentencePiece's `Metaspace` with a prepended `▁`, a BPE with dropout,
//! a `Precompiled` normalizer, `BertPreTokenizer`...) is not claimed: such tokenizers are
//! tokenized whole, as before. A probe on loading (`hf.rs`) and the property tests in
//! `crates/scorers/tests/precise_stream.rs` check the claim on real configurations.

use serde_json::Value;

/// Whether the configuration in `tokenizer.json` (parsed) is one [`stream`](super::stream)
/// may tokenize a piece at a time, and whether cuts must fall before ASCII characters.
pub(super) fn check(config: &Value) -> Option<CutRule> {
    let rule = match config.get("normalizer") {
        None | Some(Value::Null) => CutRule::Anywhere,
        Some(n) if matches!(kind(n), Some("NFC" | "NFKC")) => CutRule::BeforeAscii,
        Some(_) => return None,
    };
    let pre_tokenizer = config.get("pre_tokenizer").filter(|p| !p.is_null())?;
    if !pre_tokenizer_ok(pre_tokenizer) {
        return None;
    }
    let model = config.get("model")?;
    let model_ok = match kind(model) {
        Some("BPE") => model.get("dropout").is_none_or(Value::is_null),
        Some("WordPiece" | "WordLevel") => true,
        _ => false,
    };
    if !model_ok {
        return None;
    }
    let normalized_added = config
        .get("added_tokens")
        .and_then(Value::as_array)
        .is_some_and(|tokens| {
            tokens
                .iter()
                .any(|t| t.get("normalized").and_then(Value::as_bool) == Some(true))
        });
    (!normalized_added).then_some(rule)
}

/// Where a cut between two chunks of a piece may fall.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CutRule {
    /// At any word boundary.
    Anywhere,
    /// At a word boundary before an ASCII character (a normalizer composes characters).
    BeforeAscii,
}

fn kind(value: &Value) -> Option<&str> {
    value.get("type").and_then(Value::as_str)
}

fn pre_tokenizer_ok(value: &Value) -> bool {
    match kind(value) {
        Some("Sequence") => value
            .get("pretokenizers")
            .and_then(Value::as_array)
            .is_some_and(|all| !all.is_empty() && all.iter().all(pre_tokenizer_ok)),
        Some("ByteLevel") => value.get("add_prefix_space").and_then(Value::as_bool) == Some(false),
        Some("Split") => match value.get("pattern") {
            Some(pattern) => match (pattern.get("Regex"), pattern.get("String")) {
                (Some(Value::String(regex)), _) => regex_ok(regex),
                (None, Some(Value::String(text))) => !text.is_empty(),
                _ => false,
            },
            None => false,
        },
        Some("Digits" | "Punctuation" | "Whitespace" | "WhitespaceSplit") => true,
        _ => false,
    }
}

/// A split regex whose matches after a word boundary do not depend on the text before it:
/// no look-behind, no anchors, no word boundaries.
fn regex_ok(regex: &str) -> bool {
    if regex.contains("(?<=") || regex.contains("(?<!") {
        return false;
    }
    let bytes = regex.as_bytes();
    let mut i = 0;
    let mut in_class = false;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => {
                if matches!(
                    bytes.get(i + 1),
                    Some(b'b' | b'B' | b'A' | b'z' | b'Z' | b'G' | b'<' | b'>')
                ) && !in_class
                {
                    return false;
                }
                i += 2;
                continue;
            }
            b'[' => in_class = true,
            b']' => in_class = false,
            b'^' | b'$' if !in_class => return false,
            _ => {}
        }
        i += 1;
    }
    true
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    fn llama3_like() -> Value {
        json!({
            "normalizer": null,
            "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": "(?i:'s|'t)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\s+(?!\\S)|\\s+"}, "behavior": "Isolated", "invert": false},
                {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}
            ]},
            "model": {"type": "BPE", "dropout": null},
            "added_tokens": [{"content": "<|eot_id|>", "normalized": false}]
        })
    }

    #[test]
    fn byte_level_bpe_is_claimed_and_others_are_not() {
        assert_eq!(check(&llama3_like()), Some(CutRule::Anywhere));
        let mut nfc = llama3_like();
        nfc["normalizer"] = json!({"type": "NFC"});
        assert_eq!(check(&nfc), Some(CutRule::BeforeAscii));
        let mut refused = Vec::new();
        let mut metaspace = llama3_like();
        metaspace["pre_tokenizer"] =
            json!({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always"});
        refused.push(metaspace);
        let mut prefix_space = llama3_like();
        prefix_space["pre_tokenizer"] = json!({"type": "ByteLevel", "add_prefix_space": true});
        refused.push(prefix_space);
        let mut dropout = llama3_like();
        dropout["model"]["dropout"] = json!(0.1);
        refused.push(dropout);
        let mut unigram = llama3_like();
        unigram["model"] = json!({"type": "Unigram"});
        refused.push(unigram);
        let mut lookbehind = llama3_like();
        lookbehind["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = json!("(?<=a)b|\\w+");
        refused.push(lookbehind);
        let mut anchored = llama3_like();
        anchored["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = json!("^\\s+|\\w+");
        refused.push(anchored);
        let mut word_boundary = llama3_like();
        word_boundary["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = json!("\\b\\w+");
        refused.push(word_boundary);
        let mut precompiled = llama3_like();
        precompiled["normalizer"] = json!({"type": "Precompiled"});
        refused.push(precompiled);
        let mut normalized_added = llama3_like();
        normalized_added["added_tokens"][0]["normalized"] = json!(true);
        refused.push(normalized_added);
        let mut none = llama3_like();
        none["pre_tokenizer"] = Value::Null;
        refused.push(none);
        for config in refused {
            assert_eq!(check(&config), None, "{config}");
        }
    }
}
